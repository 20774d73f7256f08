/* The C tests' assertions: CHECK(cond, fmt, ...) stops the program with exit status 1,
 * naming the file, line and condition; OK(call) checks a libfabric call returned 0 and
 * prints its error text otherwise; CLOSE_ALL(&a->fid, &b->fid, ...) closes objects in
 * order, checking each close. Included by every program in this directory. */
#ifndef OFI_RS_CAPI_TEST_CHECK_H
#define OFI_RS_CAPI_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			exit(1);                                               \
		}                                                              \
	} while (0)
#define OK(call)                                                               \
	do {                                                                   \
		long _r = (long)(call);                                        \
		CHECK(_r == 0, "%s = %ld (%s)", #call, _r, fi_strerror((int)-_r)); \
	} while (0)

/* Closes the NULL-terminated `fids` in order; a failed close stops the program, naming
 * the caller's `line` and the object's place in the list. */
static inline void close_all(int line, struct fid **fids)
{
	int i;

	for (i = 0; fids[i]; i++) {
		int r = fi_close(fids[i]);

		CHECK(r == 0, "line %d: close of object %d = %d (%s)", line, i + 1, r,
		      fi_strerror(-r));
	}
}
#define CLOSE_ALL(...) close_all(__LINE__, (struct fid *[]){ __VA_ARGS__, NULL })

#endif
