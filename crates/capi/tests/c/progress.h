/* Completion reads of the C tests that run two endpoints of one process against each
 * other: one side's CQ is read while the other's is read for progress. Included after
 * check.h. */
#ifndef OFI_RS_CAPI_TEST_PROGRESS_H
#define OFI_RS_CAPI_TEST_PROGRESS_H

#include <rdma/fi_eq.h>
#include "check.h"

/* How many reads a wait makes at the most before it fails. */
#define SPIN 2000000

/* Reads one entry of `cq` into `out` until the read answers other than -FI_EAGAIN, at
 * most `rounds` times, reading `other` (when not NULL) for progress meanwhile; returns
 * the last answer. */
static inline ssize_t read_until(struct fid_cq *cq, struct fid_cq *other, void *out,
				 long rounds)
{
	ssize_t r = -FI_EAGAIN;
	long n;

	for (n = 0; n < rounds && r == -FI_EAGAIN; n++) {
		r = fi_cq_read(cq, out, 1);
		if (r == -FI_EAGAIN && other)
			fi_cq_read(other, NULL, 0);
	}
	return r;
}

/* Reads one tagged-format completion from `cq`, progressing `other` meanwhile. */
static inline void wait_comp(struct fid_cq *cq, struct fid_cq *other,
			     struct fi_cq_tagged_entry *out)
{
	ssize_t r = read_until(cq, other, out, SPIN);

	CHECK(r == 1, "cq read: %zd (%s)", r, fi_strerror((int)-r));
}

#endif
