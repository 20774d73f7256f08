/*
 * The inline wrappers of fi_endpoint.h, fi_tagged.h, fi_rma.h, fi_atomic.h, fi_cm.h,
 * fi_eq.h and fi_domain.h, called on libfabric.so.1 over ofi-rs (tests/wrappers.rs
 * compiles this against the installed headers). Part one runs two shm RDM endpoints of
 * one process against each other (messages, tagged messages, RMA, atomics, CQs,
 * counters, AV, MR, wait and poll sets); part two a tcp MSG connection (passive
 * endpoint, CM events, accept, shutdown) and the EQ calls; part three udp, for
 * fi_setname, fi_join and the AV's IP name resolution. Calls no ofi-rs provider
 * supports are checked for their exact code. Exits non-zero at the first failed CHECK
 * (EXPECT reports every mismatch of a part, then fails it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>
#include "check.h"
#include "progress.h"

/* Checks `call` returns `want`, reporting every mismatch (not only the first); the part
 * ends with CHECK(expect_failures == 0). */
static int expect_failures;
#define EXPECT(call, want)                                                     \
	do {                                                                   \
		long _r = (long)(call);                                        \
		if (_r != (long)(want)) {                                      \
			fprintf(stderr, "FAIL line %d: %s = %ld (%s), want %ld\n", \
				__LINE__, #call, _r, fi_strerror((int)-_r), (long)(want)); \
			expect_failures++;                                     \
		}                                                              \
	} while (0)

static struct fid_cq *cq_a, *cq_b;

/* Retries a post while it answers -FI_EAGAIN, driving progress on both CQs. */
#define POST(call)                                                             \
	do {                                                                   \
		long _r;                                                       \
		int _n = 0;                                                    \
		while ((_r = (long)(call)) == -FI_EAGAIN && _n++ < SPIN) {     \
			fi_cq_read(cq_a, NULL, 0);                             \
			fi_cq_read(cq_b, NULL, 0);                             \
		}                                                              \
		CHECK(_r == 0, "%s = %ld (%s)", #call, _r, fi_strerror((int)-_r)); \
	} while (0)

/* fi_wait_open / fi_wait with a CQ and a counter in the set, and fi_poll_open /
 * fi_poll_add / fi_poll / fi_poll_del over the same two: endpoint `c` (opened here,
 * its CQ in the wait set) receives from `a`. */
static void wait_and_poll_sets(struct fid_fabric *fabric, struct fid_domain *domain,
			       struct fi_info *info, struct fid_av *av, struct fid_ep *a)
{
	struct fi_wait_attr wattr = { .wait_obj = FI_WAIT_FD };
	struct fi_poll_attr pattr = { 0 };
	struct fid_wait *ws = (struct fid_wait *)0x1;
	struct fid_poll *ps = (struct fid_poll *)0x1;
	struct fid_cq *cq_w;
	struct fid_cntr *cntr_w;
	struct fid_ep *c;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_SET };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_SET };
	struct fi_cq_tagged_entry comp;
	struct fi_context ctx[2];
	char name[256], rbuf[16];
	size_t len = sizeof(name);
	fi_addr_t to_c;
	void *found[4];
	int fd = -1, i, r;

	OK(fi_wait_open(fabric, &wattr, &ws));
	CHECK(ws && ws->fid.fclass == FI_CLASS_WAIT, "wait set class");
	OK(fi_control(&ws->fid, FI_GETWAIT, &fd));
	CHECK(fd >= 0, "wait set fd %d", fd);
	cq_attr.wait_set = ws;
	cntr_attr.wait_set = ws;
	/* Refused for a null out pointer before anything opens: no queue is left in the
	 * set (it closes at the end). */
	EXPECT(fi_cq_open(domain, &cq_attr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_cntr_open(domain, &cntr_attr, NULL, NULL), -FI_EINVAL);
	OK(fi_cq_open(domain, &cq_attr, &cq_w, (void *)0xc9));
	OK(fi_cntr_open(domain, &cntr_attr, &cntr_w, (void *)0xc7));
	/* A set in use cannot be closed. */
	CHECK(fi_close(&ws->fid) == -FI_EBUSY, "closing a wait set in use");
	OK(fi_endpoint(domain, info, &c, NULL));
	OK(fi_ep_bind(c, &cq_w->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(c, &av->fid, 0));
	OK(fi_enable(c));
	OK(fi_getname(&c->fid, name, &len));
	CHECK(fi_av_insert(av, name, 1, &to_c, 0, NULL) == 1, "insert c");

	/* Nothing pending: the wait times out. */
	EXPECT(fi_wait(ws, 10), -FI_ETIMEDOUT);
	/* A message to c: once fi_trywait says a read would find something, fi_wait
	 * returns at once and the CQ holds the completion. */
	POST(fi_recv(c, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_send(a, "ws", 3, NULL, to_c, &ctx[1]));
	wait_comp(cq_a, NULL, &comp);
	{
		struct fid *fids[1] = { &cq_w->fid };
		for (i = 0, r = 0; i < SPIN && r == 0; i++)
			r = fi_trywait(fabric, fids, 1);
		CHECK(r == -FI_EAGAIN, "trywait with a completion pending: %d", r);
	}
	EXPECT(fi_wait(ws, 1000), 0);
	CHECK(fi_cq_read(cq_w, &comp, 1) == 1 && comp.op_context == &ctx[0] &&
	      !strcmp(rbuf, "ws"), "completion after fi_wait");

	/* Poll set: a member with something new is reported by its context. */
	OK(fi_poll_open(domain, &pattr, &ps));
	CHECK(ps && ps->fid.fclass == FI_CLASS_POLL, "poll set class");
	OK(fi_poll_add(ps, &cq_w->fid, 0));
	OK(fi_poll_add(ps, &cntr_w->fid, 0));
	CHECK(fi_poll_add(ps, &domain->fid, 0) == -FI_EINVAL, "poll_add of a domain");
	EXPECT(fi_poll(ps, found, 4), 0);
	OK(fi_cntr_add(cntr_w, 1));
	EXPECT(fi_poll(ps, found, 4), 1);
	CHECK(found[0] == (void *)0xc7, "poll reports the counter %p", found[0]);
	POST(fi_recv(c, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_send(a, "ps", 3, NULL, to_c, &ctx[1]));
	wait_comp(cq_a, NULL, &comp);
	for (i = 0, r = 0; i < SPIN && r == 0; i++)
		r = fi_poll(ps, found, 4);
	CHECK(r == 1 && found[0] == (void *)0xc9, "poll reports the CQ: %d %p", r, found[0]);
	wait_comp(cq_w, NULL, &comp);
	CHECK(!strcmp(rbuf, "ps"), "payload through the poll set");
	/* A member stays open while it is in the set. */
	CHECK(fi_close(&cntr_w->fid) == -FI_EBUSY, "closing a poll set member");
	OK(fi_poll_del(ps, &cq_w->fid, 0));
	OK(fi_poll_del(ps, &cntr_w->fid, 0));
	EXPECT(fi_poll_del(ps, &cq_w->fid, 0), -FI_EINVAL);
	OK(fi_close(&ps->fid));

	/* An EQ in the wait set: a written event wakes fi_wait and is then read. */
	{
		struct fid_eq *eq_w;
		struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_SET, .flags = FI_WRITE };
		struct fi_eq_entry entry = { .fid = &fabric->fid, .context = (void *)0xe0 };
		uint32_t event;
		eq_attr.wait_set = ws;
		EXPECT(fi_eq_open(fabric, &eq_attr, NULL, NULL), -FI_EINVAL);
		OK(fi_eq_open(fabric, &eq_attr, &eq_w, NULL));
		CHECK(fi_eq_write(eq_w, FI_NOTIFY, &entry, sizeof(entry), 0) == sizeof(entry),
		      "eq write");
		EXPECT(fi_wait(ws, 1000), 0);
		memset(&entry, 0, sizeof(entry));
		CHECK(fi_eq_read(eq_w, &event, &entry, sizeof(entry), 0) == sizeof(entry) &&
		      event == FI_NOTIFY && entry.context == (void *)0xe0, "eq event after fi_wait");
		OK(fi_close(&eq_w->fid));
	}
	CLOSE_ALL(&c->fid, &cq_w->fid, &cntr_w->fid, &ws->fid);
	CHECK(expect_failures == 0, "%d mismatches above", expect_failures);
}

static void part_rdm(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *a, *b;
	struct fid_av *av;
	struct fid_cntr *cntr;
	struct fid_mr *mr, *mr2, *mr3;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_tagged_entry comp;
	struct fi_cq_err_entry err;
	struct fi_context ctx[4];
	char name_a[256], name_b[256], text[256];
	size_t len_a = sizeof(name_a), len_b = sizeof(name_b), len;
	fi_addr_t addr[2], src;
	char sbuf[64], rbuf[64], rbuf2[64];
	uint64_t target[4] = { 0 }, operand = 5, result = 0, compare = 0, count = 0;
	struct iovec siov[2], riov[2];
	struct fi_ioc ioc, res_ioc, cmp_ioc;
	struct fi_rma_iov rma_iov;
	struct fi_rma_ioc rma_ioc;
	struct fi_msg msg;
	struct fi_msg_tagged tmsg;
	struct fi_msg_rma rmsg;
	struct fi_msg_atomic amsg;
	struct fi_atomic_attr aattr;
	struct fi_mr_attr mr_attr;
	void *desc = NULL;
	int i;

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
	hints->mode = FI_CONTEXT;
	hints->fabric_attr->prov_name = strdup("shm");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fabric->api_version == FI_VERSION(1, 17), "api_version");
	OK(fi_domain(fabric, info, &domain, (void *)0x77));
	CHECK(domain->fid.context == (void *)0x77, "domain context");
	CHECK(domain->fid.fclass == FI_CLASS_DOMAIN, "domain class");
	OK(fi_cq_open(domain, &cq_attr, &cq_a, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq_b, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	OK(fi_cntr_open(domain, &cntr_attr, &cntr, NULL));
	OK(fi_endpoint(domain, info, &a, (void *)0xa));
	OK(fi_endpoint(domain, info, &b, (void *)0xb));
	OK(fi_ep_bind(a, &cq_a->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(b, &cq_b->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(a, &av->fid, 0));
	OK(fi_ep_bind(b, &av->fid, 0));
	OK(fi_ep_bind(b, &cntr->fid, FI_RECV));
	CHECK(fi_ep_bind(a, &domain->fid, 0) == -FI_EINVAL, "binding a domain");
	OK(fi_enable(a));
	OK(fi_enable(b));
	/* Deprecated in the headers, still wrappers programs call. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	CHECK(fi_rx_size_left(a) > 0 || fi_rx_size_left(a) == -FI_ENOSYS, "rx_size_left");
	CHECK(fi_tx_size_left(a) > 0 || fi_tx_size_left(a) == -FI_ENOSYS, "tx_size_left");
#pragma GCC diagnostic pop

	/* fi_cm.h on a connectionless endpoint: names, and no peer. */
	OK(fi_getname(&a->fid, name_a, &len_a));
	OK(fi_getname(&b->fid, name_b, &len_b));
	len = 1;
	CHECK(fi_getname(&a->fid, name_a, &len) == -FI_ETOOSMALL && len == len_a, "getname too small");
	len = sizeof(text);
	CHECK(fi_getpeer(a, text, &len) < 0, "getpeer on rdm");
	CHECK(fi_av_insert(av, name_a, 1, &addr[0], 0, NULL) == 1, "insert a");
	CHECK(fi_av_insert(av, name_b, 1, &addr[1], 0, NULL) == 1, "insert b");
	CHECK(fi_rx_addr(addr[1], 0, 0) == addr[1], "fi_rx_addr");
	len = sizeof(text);
	OK(fi_av_lookup(av, addr[1], text, &len));
	CHECK(len == len_b && !memcmp(text, name_b, len), "lookup");
	len = sizeof(text);
	CHECK(fi_av_straddr(av, name_b, text, &len) == text && len > 1, "straddr");

	/* fi_domain.h: registrations. */
	OK(fi_mr_reg(domain, target, sizeof(target), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0, &mr, NULL));
	riov[0].iov_base = rbuf;
	riov[0].iov_len = sizeof(rbuf);
	OK(fi_mr_regv(domain, riov, 1, FI_RECV, 0, 2, 0, &mr2, NULL));
	memset(&mr_attr, 0, sizeof(mr_attr));
	mr_attr.mr_iov = riov;
	mr_attr.iov_count = 1;
	mr_attr.access = FI_RECV;
	mr_attr.requested_key = 3;
	OK(fi_mr_regattr(domain, &mr_attr, 0, &mr3));
	desc = fi_mr_desc(mr2);
	(void)desc;
	CHECK(fi_mr_key(mr) != FI_KEY_NOTAVAIL, "mr key");
	{
		int r = fi_query_atomic(domain, FI_UINT64, FI_SUM, &aattr, 0);
		CHECK(r == 0 && aattr.size == 8 && aattr.count >= 1, "query_atomic %d", r);
	}

	/* fi_endpoint.h: messages. */
	strcpy(sbuf, "hello");
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_send(a, sbuf, 6, NULL, addr[1], &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.op_context == &ctx[0] && (comp.flags & FI_RECV) && comp.len == 6, "recv comp");
	CHECK(!strcmp(rbuf, "hello"), "payload %s", rbuf);
	wait_comp(cq_a, cq_b, &comp);
	CHECK(comp.op_context == &ctx[1] && (comp.flags & FI_SEND), "send comp");
	CHECK(fi_cntr_read(cntr) == 1, "recv counter %lu", (unsigned long)fi_cntr_read(cntr));

	siov[0].iov_base = sbuf;
	siov[0].iov_len = 3;
	siov[1].iov_base = sbuf + 3;
	siov[1].iov_len = 3;
	riov[0].iov_base = rbuf;
	riov[0].iov_len = 2;
	riov[1].iov_base = rbuf2;
	riov[1].iov_len = 32;
	strcpy(sbuf, "vecto");
	POST(fi_recvv(b, riov, NULL, 2, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_sendv(a, siov, NULL, 2, addr[1], &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.len == 6 && !memcmp(rbuf, "ve", 2) && !strcmp(rbuf2, "cto"), "vector payload");
	wait_comp(cq_a, cq_b, &comp);

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = riov;
	msg.iov_count = 1;
	msg.addr = FI_ADDR_UNSPEC;
	msg.context = &ctx[2];
	riov[0].iov_len = sizeof(rbuf);
	POST(fi_recvmsg(b, &msg, 0));
	msg.msg_iov = siov;
	msg.iov_count = 2;
	msg.addr = addr[1];
	msg.context = &ctx[3];
	msg.data = 0xd00d;
	POST(fi_sendmsg(a, &msg, FI_REMOTE_CQ_DATA));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.op_context == &ctx[2] && (comp.flags & FI_REMOTE_CQ_DATA) && comp.data == 0xd00d,
	      "sendmsg data %lx", (unsigned long)comp.data);
	wait_comp(cq_a, cq_b, &comp);
	CHECK(comp.op_context == &ctx[3], "sendmsg context");

	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_inject(a, "inj", 4, addr[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(!strcmp(rbuf, "inj"), "inject payload");
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_senddata(a, "sd", 3, NULL, 42, addr[1], &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.data == 42 && !strcmp(rbuf, "sd"), "senddata");
	wait_comp(cq_a, cq_b, &comp);
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_injectdata(a, "id", 3, 43, addr[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.data == 43 && !strcmp(rbuf, "id"), "injectdata");

	/* Truncation: an error completion with the lengths. */
	POST(fi_recv(b, rbuf, 2, NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_send(a, "toolong", 8, NULL, addr[1], &ctx[1]));
	{
		ssize_t r = read_until(cq_b, cq_a, &comp, SPIN);

		CHECK(r == -FI_EAVAIL, "truncation read %zd", r);
		memset(&err, 0, sizeof(err));
		CHECK(fi_cq_readerr(cq_b, &err, 0) == 1, "readerr");
		CHECK(err.err == FI_ETRUNC && err.op_context == &ctx[0] && err.olen == 6,
		      "err %d olen %zu", err.err, err.olen);
		CHECK(fi_cq_strerror(cq_b, err.prov_errno, err.err_data, text, sizeof(text)) != NULL,
		      "cq strerror");
		wait_comp(cq_a, cq_b, &comp);
	}

	/* Cancel a posted receive: it completes in error with FI_ECANCELED. */
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[2]));
	OK(fi_cancel(&b->fid, &ctx[2]));
	{
		ssize_t r = read_until(cq_b, NULL, &comp, SPIN);

		CHECK(r == -FI_EAVAIL, "cancel read %zd", r);
		memset(&err, 0, sizeof(err));
		CHECK(fi_cq_readerr(cq_b, &err, 0) == 1 && err.err == FI_ECANCELED &&
		      err.op_context == &ctx[2], "cancel err %d", err.err);
	}

	/* fi_tagged.h. */
	POST(fi_trecv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x10, 0, &ctx[0]));
	POST(fi_tsend(a, "t1", 3, NULL, addr[1], 0x10, &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.tag == 0x10 && (comp.flags & FI_TAGGED) && !strcmp(rbuf, "t1"), "tsend");
	wait_comp(cq_a, cq_b, &comp);
	riov[0].iov_base = rbuf;
	riov[0].iov_len = sizeof(rbuf);
	POST(fi_trecvv(b, riov, NULL, 1, FI_ADDR_UNSPEC, 0x20, 0xf, &ctx[0]));
	strcpy(sbuf, "tvecx");
	POST(fi_tsendv(a, siov, NULL, 2, addr[1], 0x2f, &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.tag == 0x2f && !memcmp(rbuf, "tvecx", 6), "tsendv with ignore bits");
	wait_comp(cq_a, cq_b, &comp);
	memset(&tmsg, 0, sizeof(tmsg));
	tmsg.msg_iov = riov;
	tmsg.iov_count = 1;
	tmsg.addr = FI_ADDR_UNSPEC;
	tmsg.tag = 0x30;
	tmsg.context = &ctx[2];
	POST(fi_trecvmsg(b, &tmsg, 0));
	tmsg.msg_iov = siov;
	tmsg.iov_count = 2;
	tmsg.addr = addr[1];
	tmsg.context = &ctx[3];
	POST(fi_tsendmsg(a, &tmsg, 0));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.op_context == &ctx[2] && comp.tag == 0x30, "tsendmsg");
	wait_comp(cq_a, cq_b, &comp);
	POST(fi_trecv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x40, 0, &ctx[0]));
	POST(fi_tinject(a, "ti", 3, addr[1], 0x40));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.tag == 0x40 && !strcmp(rbuf, "ti"), "tinject");
	POST(fi_trecv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x50, 0, &ctx[0]));
	POST(fi_tsenddata(a, "tsd", 4, NULL, 7, addr[1], 0x50, &ctx[1]));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.tag == 0x50 && comp.data == 7, "tsenddata");
	wait_comp(cq_a, cq_b, &comp);
	POST(fi_trecv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, 0x60, 0, &ctx[0]));
	POST(fi_tinjectdata(a, "tid", 4, 8, addr[1], 0x60));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.tag == 0x60 && comp.data == 8, "tinjectdata");

	/* fi_rma.h against b's registered target (offsets: no FI_MR_VIRT_ADDR). */
	target[0] = 0x1111;
	POST(fi_read(a, &result, 8, NULL, addr[1], 0, fi_mr_key(mr), &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 0x1111 && (comp.flags & FI_READ), "read");
	operand = 0x2222;
	POST(fi_write(a, &operand, 8, NULL, addr[1], 8, fi_mr_key(mr), &ctx[1]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[1] == 0x2222 && (comp.flags & FI_WRITE), "write");
	siov[0].iov_base = &operand;
	siov[0].iov_len = 8;
	operand = 0x3333;
	POST(fi_writev(a, siov, NULL, 1, addr[1], 16, fi_mr_key(mr), &ctx[1]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[2] == 0x3333, "writev");
	riov[0].iov_base = &result;
	riov[0].iov_len = 8;
	POST(fi_readv(a, riov, NULL, 1, addr[1], 16, fi_mr_key(mr), &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 0x3333, "readv");
	rma_iov.addr = 24;
	rma_iov.len = 8;
	rma_iov.key = fi_mr_key(mr);
	memset(&rmsg, 0, sizeof(rmsg));
	rmsg.msg_iov = siov;
	rmsg.iov_count = 1;
	rmsg.addr = addr[1];
	rmsg.rma_iov = &rma_iov;
	rmsg.rma_iov_count = 1;
	rmsg.context = &ctx[2];
	operand = 0x4444;
	POST(fi_writemsg(a, &rmsg, 0));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[3] == 0x4444 && comp.op_context == &ctx[2], "writemsg");
	rmsg.msg_iov = riov;
	POST(fi_readmsg(a, &rmsg, 0));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 0x4444, "readmsg");
	operand = 0x5555;
	POST(fi_inject_write(a, &operand, 8, addr[1], 0, fi_mr_key(mr)));
	for (i = 0; i < SPIN && target[0] != 0x5555; i++)
		fi_cq_read(cq_b, NULL, 0);
	CHECK(target[0] == 0x5555, "inject_write");
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	operand = 0x6666;
	POST(fi_writedata(a, &operand, 8, NULL, 99, addr[1], 8, fi_mr_key(mr), &ctx[1]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[1] == 0x6666, "writedata");
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.data == 99 && (comp.flags & FI_REMOTE_CQ_DATA), "writedata remote data");
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	operand = 0x7777;
	POST(fi_inject_writedata(a, &operand, 8, 100, addr[1], 16, fi_mr_key(mr)));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.data == 100 && target[2] == 0x7777, "inject_writedata");

	/* fi_atomic.h. */
	OK(fi_atomicvalid(a, FI_UINT64, FI_SUM, &count));
	CHECK(count >= 1, "atomicvalid");
	OK(fi_fetch_atomicvalid(a, FI_UINT64, FI_SUM, &count));
	OK(fi_compare_atomicvalid(a, FI_UINT64, FI_CSWAP, &count));
	CHECK(fi_atomicvalid(a, 99, FI_SUM, &count) == -FI_EINVAL, "bad datatype");
	target[0] = 10;
	operand = 5;
	POST(fi_atomic(a, &operand, 1, NULL, addr[1], 0, fi_mr_key(mr), FI_UINT64, FI_SUM, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[0] == 15 && (comp.flags & FI_ATOMIC), "atomic sum %lu", (unsigned long)target[0]);
	ioc.addr = &operand;
	ioc.count = 1;
	rma_ioc.addr = 0;
	rma_ioc.count = 1;
	rma_ioc.key = fi_mr_key(mr);
	POST(fi_atomicv(a, &ioc, NULL, 1, addr[1], 0, fi_mr_key(mr), FI_UINT64, FI_SUM, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[0] == 20, "atomicv");
	memset(&amsg, 0, sizeof(amsg));
	amsg.msg_iov = &ioc;
	amsg.iov_count = 1;
	amsg.addr = addr[1];
	amsg.rma_iov = &rma_ioc;
	amsg.rma_iov_count = 1;
	amsg.datatype = FI_UINT64;
	amsg.op = FI_SUM;
	amsg.context = &ctx[1];
	POST(fi_atomicmsg(a, &amsg, 0));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(target[0] == 25 && comp.op_context == &ctx[1], "atomicmsg");
	POST(fi_inject_atomic(a, &operand, 1, addr[1], 0, fi_mr_key(mr), FI_UINT64, FI_SUM));
	for (i = 0; i < SPIN && target[0] != 30; i++)
		fi_cq_read(cq_b, NULL, 0);
	CHECK(target[0] == 30, "inject_atomic");
	POST(fi_fetch_atomic(a, &operand, 1, NULL, &result, NULL, addr[1], 0, fi_mr_key(mr),
			     FI_UINT64, FI_SUM, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 30 && target[0] == 35, "fetch_atomic");
	res_ioc.addr = &result;
	res_ioc.count = 1;
	POST(fi_fetch_atomicv(a, &ioc, NULL, 1, &res_ioc, NULL, 1, addr[1], 0, fi_mr_key(mr),
			      FI_UINT64, FI_SUM, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 35 && target[0] == 40, "fetch_atomicv");
	POST(fi_fetch_atomicmsg(a, &amsg, &res_ioc, NULL, 1, 0));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 40 && target[0] == 45, "fetch_atomicmsg");
	compare = 45;
	operand = 1;
	POST(fi_compare_atomic(a, &operand, 1, NULL, &compare, NULL, &result, NULL, addr[1], 0,
			       fi_mr_key(mr), FI_UINT64, FI_CSWAP, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 45 && target[0] == 1, "compare_atomic");
	cmp_ioc.addr = &compare;
	cmp_ioc.count = 1;
	compare = 1;
	operand = 2;
	POST(fi_compare_atomicv(a, &ioc, NULL, 1, &cmp_ioc, NULL, 1, &res_ioc, NULL, 1, addr[1], 0,
				fi_mr_key(mr), FI_UINT64, FI_CSWAP, &ctx[0]));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 1 && target[0] == 2, "compare_atomicv");
	amsg.op = FI_CSWAP;
	compare = 2;
	operand = 3;
	POST(fi_compare_atomicmsg(a, &amsg, &cmp_ioc, NULL, 1, &res_ioc, NULL, 1, 0));
	wait_comp(cq_a, cq_b, &comp);
	CHECK(result == 2 && target[0] == 3, "compare_atomicmsg");

	/* Options, blocking reads, wait/poll sets and scalable endpoints. */
	{
		size_t min = 0, optlen = sizeof(min);
		int r = fi_getopt(&b->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &optlen);
		CHECK(r == 0 || r == -FI_ENOPROTOOPT || r == -FI_ENOSYS, "getopt %d", r);
		min = 512;
		r = fi_setopt(&b->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));
		CHECK(r == 0 || r == -FI_ENOPROTOOPT || r == -FI_ENOSYS, "setopt %d", r);
		r = (int)fi_cq_sread(cq_b, &comp, 1, NULL, 10);
		CHECK(r == -FI_EAGAIN || r == -FI_ENOSYS || r == -FI_ETIMEDOUT, "sread idle %d", r);
		r = (int)fi_cq_sreadfrom(cq_b, &comp, 1, &src, NULL, 10);
		CHECK(r == -FI_EAGAIN || r == -FI_ENOSYS || r == -FI_ETIMEDOUT, "sreadfrom idle %d", r);
		{
			struct fid *fids[1] = { &cq_a->fid };
			r = fi_trywait(fabric, fids, 1);
			CHECK(r == 0 || r == -FI_EAGAIN || r == -FI_ENOSYS || r == -FI_EINVAL, "trywait %d", r);
		}
		/* fi_scalable_ep and its contexts: tests/c/contexts.c. */
		wait_and_poll_sets(fabric, domain, info, av, a);
	}

	/* The rest of fi_endpoint.h, fi_cm.h and fi_domain.h (and the fabric.h calls they
	 * build on). Where no ofi-rs provider has the feature the exact code is checked. */
	{
		struct fid_ep *alias = (struct fid_ep *)0x1, *ctxep = (struct fid_ep *)0x1;
		struct fid_ep *ep2 = NULL;
		struct fid_stx *stx = (struct fid_stx *)0x1;
		struct fid_domain *dom2 = NULL;
		struct fid_mc *mc = (struct fid_mc *)0x1;
		struct fid_mc fake_mc;
		struct fi_tx_attr tx_attr = { 0 };
		struct fi_rx_attr rx_attr = { 0 };
		struct iovec miov = { .iov_base = target, .iov_len = sizeof(target) };
		uint64_t base = 0, key = 0, val = 0;
		uint8_t raw[64];
		size_t raw_len = sizeof(raw);
		void *ops = (void *)0x1;
		int fd = -1, r;

		/* fi_setname: shm takes a new name only before fi_enable; this endpoint
		 * is enabled (tcp takes a name: part two). */
		EXPECT(fi_setname(&a->fid, name_a, len_a), -FI_EOPBADSTATE);
		/* fi_ep_alias (fi_alias, FI_ALIAS): the flags must name FI_TRANSMIT or
		 * FI_RECV; the alias has its own default flags (FI_GETOPSFLAG /
		 * FI_SETOPSFLAG through fi_control), the endpoint keeps its own, and the
		 * endpoint cannot close while the alias is open. */
		EXPECT(fi_ep_alias(a, &alias, 0), -FI_EINVAL);
		EXPECT(fi_ep_alias(a, &alias, FI_RECV | FI_INJECT), -FI_EBADFLAGS);
		EXPECT(fi_ep_alias(a, &alias, FI_TRANSMIT | FI_COMPLETION), 0);
		{
			uint64_t f = FI_TRANSMIT;
			EXPECT(fi_control(&alias->fid, FI_GETOPSFLAG, &f), 0);
			CHECK(f == FI_COMPLETION, "alias tx flags %#llx", (unsigned long long)f);
			f = FI_TRANSMIT | FI_RECV;
			EXPECT(fi_control(&alias->fid, FI_GETOPSFLAG, &f), -FI_EINVAL);
			f = FI_TRANSMIT | FI_INJECT_COMPLETE;
			EXPECT(fi_control(&alias->fid, FI_SETOPSFLAG, &f), 0);
			f = FI_TRANSMIT;
			EXPECT(fi_control(&alias->fid, FI_GETOPSFLAG, &f), 0);
			CHECK(f == FI_INJECT_COMPLETE, "alias tx flags after set %#llx",
			      (unsigned long long)f);
			f = FI_RECV | FI_INJECT;
			EXPECT(fi_control(&a->fid, FI_SETOPSFLAG, &f), -FI_EBADFLAGS);
		}
		EXPECT(fi_close(&a->fid), -FI_EBUSY);
		EXPECT(fi_close(&alias->fid), 0);
		alias = (struct fid_ep *)0x1;
		/* Contexts of an endpoint that is not scalable: refused, nothing handed
		 * out. Shared contexts open and close here; their use is in
		 * tests/c/contexts.c. */
		r = fi_tx_context(a, 0, &tx_attr, &ctxep, NULL);
		CHECK(r < 0 && ctxep == NULL, "tx_context of a plain endpoint: %d", r);
		ctxep = (struct fid_ep *)0x1;
		r = fi_rx_context(a, 0, &rx_attr, &ctxep, NULL);
		CHECK(r < 0 && ctxep == NULL, "rx_context of a plain endpoint: %d", r);
		OK(fi_stx_context(domain, &tx_attr, &stx, NULL));
		CHECK(stx && stx->fid.fclass == FI_CLASS_STX_CTX, "stx_context out");
		OK(fi_close(&stx->fid));
		ctxep = NULL;
		OK(fi_srx_context(domain, &rx_attr, &ctxep, NULL));
		CHECK(ctxep && ctxep->fid.fclass == FI_CLASS_SRX_CTX, "srx_context out");
		OK(fi_close(&ctxep->fid));
		/* fi_scalable_ep_bind is the fid's bind: on a plain endpoint it binds like
		 * fi_ep_bind, and after fi_enable that is refused. */
		EXPECT(fi_scalable_ep_bind(a, &av->fid, 0), -FI_EOPBADSTATE);
		/* fi_join: shm has no multicast (udp joins: part three); fi_mc_addr only
		 * reads the fid_mc. */
		EXPECT(fi_join(a, &addr[1], 0, &mc, NULL), -FI_ENOSYS);
		CHECK(mc == NULL, "join out");
		fake_mc.fi_addr = 0x42;
		CHECK(fi_mc_addr(&fake_mc) == 0x42, "mc_addr");
		/* fabric.h's traffic-class helpers: pure encodings. */
		CHECK(fi_tc_dscp_get(fi_tc_dscp_set(46)) == 46 && fi_tc_dscp_get(FI_TC_BULK_DATA) == 0,
		      "tc dscp");
		/* fi_domain2 / fi_endpoint2 without flags: a second domain and endpoint. */
		OK(fi_domain2(fabric, info, &dom2, 0, NULL));
		OK(fi_endpoint2(dom2, info, &ep2, 0, (void *)0xe2));
		CHECK(ep2->fid.context == (void *)0xe2, "endpoint2 context");
		OK(fi_close(&ep2->fid));
		/* fi_domain_bind: shm reports no asynchronous events; an AV is no EQ. */
		EXPECT(fi_domain_bind(dom2, &av->fid, 0), -FI_EINVAL);
		OK(fi_close(&dom2->fid));
		/* MR bind / enable / refresh. */
		EXPECT(fi_mr_bind(mr, &cntr->fid, FI_REMOTE_WRITE), 0);
		EXPECT(fi_mr_enable(mr), 0);
		/* fi_mr_refresh: ranges inside the region are taken, others refused. */
		EXPECT(fi_mr_refresh(mr, &miov, 1, 0), 0);
		miov.iov_len = sizeof(target) + 8;
		EXPECT(fi_mr_refresh(mr, &miov, 1, 0), -FI_EINVAL);
		miov.iov_len = sizeof(target);
		EXPECT(fi_mr_refresh(mr, &miov, 1, 1), -FI_EBADFLAGS);
		/* Raw keys: no provider of ofi-rs has FI_MR_RAW. */
		EXPECT(fi_mr_raw_attr(mr, &base, raw, &raw_len, 0), -FI_ENOSYS);
		EXPECT(fi_mr_map_raw(domain, 0, raw, 8, &key, 0), -FI_ENOSYS);
		EXPECT(fi_mr_unmap_key(domain, key), -FI_ENOSYS);
		/* AV: shm has no resolver for node/service names: insertsvc fails, insertsym
		 * inserts nothing and reports the address as not available (tcp resolves
		 * them: part two). */
		EXPECT(fi_av_insertsvc(av, "node", "svc", &key, 0, NULL), -FI_EINVAL);
		key = 0;
		EXPECT(fi_av_insertsym(av, "node", 1, "svc", 1, &key, 0, NULL), 0);
		CHECK(key == FI_ADDR_NOTAVAIL, "insertsym failed entry %lx", (unsigned long)key);
		EXPECT(fi_av_bind(av, &cntr->fid, 0), -FI_EINVAL);
		/* fabric.h: control, named values and provider extensions. */
		EXPECT(fi_control(&cq_a->fid, FI_GETWAIT, &fd), -FI_ENOSYS);
		EXPECT(fi_get_val(&domain->fid, 0, &val), -FI_ENOSYS);
		EXPECT(fi_set_val(&domain->fid, 0, &val), -FI_ENOSYS);
		EXPECT(fi_open_ops(&domain->fid, "ofi-rs-none", 0, &ops, NULL), -FI_ENOSYS);
		EXPECT(fi_set_ops(&domain->fid, "ofi-rs-none", 0, NULL, NULL), -FI_ENOSYS);
		CHECK(expect_failures == 0, "%d mismatches above", expect_failures);
	}

	/* Counters. */
	OK(fi_cntr_set(cntr, 100));
	OK(fi_cntr_add(cntr, 5));
	CHECK(fi_cntr_read(cntr) == 105, "cntr add");
	OK(fi_cntr_seterr(cntr, 2));
	OK(fi_cntr_adderr(cntr, 1));
	CHECK(fi_cntr_readerr(cntr) == 3, "cntr err");
	OK(fi_cntr_wait(cntr, 105, 100));

	/* CQ: readfrom gives the source (FI_SOURCE), signal, sread with nothing pending. */
	POST(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, &ctx[0]));
	POST(fi_send(a, "src", 4, NULL, addr[1], &ctx[1]));
	{
		ssize_t r = -FI_EAGAIN;
		for (i = 0; i < SPIN && r == -FI_EAGAIN; i++) {
			r = fi_cq_readfrom(cq_b, &comp, 1, &src);
			fi_cq_read(cq_a, NULL, 0);
		}
		CHECK(r == 1, "readfrom %zd", r);
		CHECK(src == addr[0] || src == FI_ADDR_NOTAVAIL, "source %lu", (unsigned long)src);
	}
	wait_comp(cq_a, cq_b, &comp);
	CHECK(fi_cq_signal(cq_a) == 0 || fi_cq_signal(cq_a) == -FI_ENOSYS, "signal");

	OK(fi_av_remove(av, &addr[0], 1, 0));
	CLOSE_ALL(&a->fid, &b->fid, &mr->fid, &mr2->fid, &mr3->fid, &cntr->fid, &av->fid,
		  &cq_a->fid, &cq_b->fid, &domain->fid, &fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("rdm ok\n");
}

/* Reads one EQ event of kind `want` into `buf`. */
static ssize_t wait_event(struct fid_eq *eq, uint32_t want, void *buf, size_t len)
{
	uint32_t event = ~0u;
	ssize_t r = fi_eq_sread(eq, &event, buf, len, 5000, 0);

	CHECK(r > 0 && event == want, "eq event %u (want %u): %zd %s", event, want, r,
	      fi_strerror((int)-r));
	return r;
}

static void part_msg(void)
{
	struct fi_info *hints, *info, *conn_info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_pep *pep;
	struct fid_ep *srv, *cli;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC, .flags = FI_WRITE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_eq_entry entry;
	struct fi_eq_err_entry eq_err;
	struct fi_cq_tagged_entry comp;
	struct fi_context ctx[2];
	union {
		struct fi_eq_cm_entry cm;
		char raw[sizeof(struct fi_eq_cm_entry) + 64];
	} ev;
	char name[128], rbuf[32];
	size_t len = sizeof(name);
	uint32_t event;
	ssize_t r;

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup("tcp");
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &eq, NULL));

	/* fi_eq.h: write, peek, read, and an empty queue. */
	entry.fid = &fabric->fid;
	entry.context = (void *)0x1234;
	entry.data = 77;
	CHECK(fi_eq_write(eq, FI_NOTIFY, &entry, sizeof(entry), 0) == sizeof(entry), "eq write");
	memset(&entry, 0, sizeof(entry));
	r = fi_eq_read(eq, &event, &entry, sizeof(entry), FI_PEEK);
	CHECK(r == sizeof(entry) && event == FI_NOTIFY && entry.data == 77, "eq peek %zd", r);
	r = fi_eq_read(eq, &event, &entry, sizeof(entry), 0);
	CHECK(r == sizeof(entry) && entry.context == (void *)0x1234 && entry.fid == &fabric->fid,
	      "eq read");
	CHECK(fi_eq_read(eq, &event, &entry, sizeof(entry), 0) == -FI_EAGAIN, "eq empty");
	CHECK(fi_eq_readerr(eq, &eq_err, 0) == -FI_EAGAIN, "no eq error");
	CHECK(fi_eq_strerror(eq, 0, NULL, name, sizeof(name)) != NULL, "eq strerror");

	/* fi_cm.h: passive endpoint, connection, accept, shutdown. */
	OK(fi_passive_ep(fabric, info, &pep, (void *)0xbeef));
	OK(fi_pep_bind(pep, &eq->fid, 0));
	{
		/* fi_endpoint.h: FI_BACKLOG on a passive endpoint, before and after fi_listen. */
		int backlog = 16;
		OK(fi_control(&pep->fid, FI_BACKLOG, &backlog));
		backlog = -1;
		EXPECT(fi_control(&pep->fid, FI_BACKLOG, &backlog), -FI_EINVAL);
	}
	OK(fi_listen(pep));
	{
		int backlog = 64;
		OK(fi_control(&pep->fid, FI_BACKLOG, &backlog));
	}
	OK(fi_getname(&pep->fid, name, &len));
	OK(fi_domain(fabric, info, &domain, NULL));
	/* fi_domain_bind: no ofi-rs provider reports asynchronous domain events. */
	EXPECT(fi_domain_bind(domain, &eq->fid, 0), -FI_ENOSYS);
	{
		struct fid_cq *cq;
		OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
		hints->dest_addr = malloc(len);
		memcpy(hints->dest_addr, name, len);
		hints->dest_addrlen = len;
		fi_freeinfo(info);
		OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
		OK(fi_endpoint(domain, info, &cli, NULL));
		/* fi_setname: tcp names an endpoint before it connects (a name that is
		 * no IP socket address is refused; udp renames: part three). */
		EXPECT(fi_setname(&cli->fid, name, 3), -FI_EINVAL);
		OK(fi_ep_bind(cli, &eq->fid, 0));
		OK(fi_ep_bind(cli, &cq->fid, FI_TRANSMIT | FI_RECV));
		OK(fi_enable(cli));
		OK(fi_connect(cli, name, "hi", 3));
		r = wait_event(eq, FI_CONNREQ, &ev, sizeof(ev));
		CHECK(ev.cm.fid == &pep->fid, "connreq names the pep");
		CHECK(ev.cm.info && ev.cm.info->handle, "connreq info and handle");
		CHECK(r == (ssize_t)sizeof(ev.cm) + 3 && !strcmp((char *)(&ev.cm + 1), "hi"),
		      "connection data (%zd)", r);
		conn_info = ev.cm.info;
		OK(fi_endpoint(domain, conn_info, &srv, NULL));
		OK(fi_ep_bind(srv, &eq->fid, 0));
		OK(fi_ep_bind(srv, &cq->fid, FI_TRANSMIT | FI_RECV));
		OK(fi_enable(srv));
		OK(fi_accept(srv, NULL, 0));
		wait_event(eq, FI_CONNECTED, &ev, sizeof(ev));
		wait_event(eq, FI_CONNECTED, &ev, sizeof(ev));
		fi_freeinfo(conn_info);
		len = sizeof(name);
		OK(fi_getpeer(cli, name, &len));
		CHECK(len > 0, "peer");
		{
			int n;
			cq_a = cq;
			cq_b = cq;
			POST(fi_recv(srv, rbuf, sizeof(rbuf), NULL, 0, &ctx[0]));
			POST(fi_send(cli, "msg", 4, NULL, 0, &ctx[1]));
			for (n = 0, r = 0; n < SPIN && r < 2; n++) {
				if (fi_cq_read(cq, &comp, 1) == 1)
					r++;
			}
			CHECK(r == 2 && !strcmp(rbuf, "msg"), "msg over the connection");
		}
		/* A second connection, rejected: the client's EQ reports an error entry. */
		{
			struct fid_ep *cli2;
			struct fi_eq_err_entry e2;
			int n;
			OK(fi_endpoint(domain, info, &cli2, (void *)0xc2));
			OK(fi_ep_bind(cli2, &eq->fid, 0));
			OK(fi_ep_bind(cli2, &cq->fid, FI_TRANSMIT | FI_RECV));
			OK(fi_enable(cli2));
			OK(fi_connect(cli2, name, NULL, 0));
			wait_event(eq, FI_CONNREQ, &ev, sizeof(ev));
			OK(fi_reject(pep, ev.cm.info->handle, NULL, 0));
			fi_freeinfo(ev.cm.info);
			for (n = 0, r = -FI_EAGAIN; n < 500 && r != -FI_EAVAIL; n++)
				r = fi_eq_sread(eq, &event, &ev, sizeof(ev), 10, 0);
			CHECK(r == -FI_EAVAIL, "rejected connect: %zd", r);
			memset(&e2, 0, sizeof(e2));
			CHECK(fi_eq_readerr(eq, &e2, 0) == sizeof(e2), "eq readerr");
			CHECK(e2.fid == &cli2->fid && e2.err == FI_ECONNREFUSED, "reject error %d", e2.err);
			OK(fi_close(&cli2->fid));
		}
		OK(fi_shutdown(cli, 0));
		wait_event(eq, FI_SHUTDOWN, &ev, sizeof(ev));
		CHECK(ev.cm.fid == &srv->fid || ev.cm.fid == &cli->fid, "shutdown names an endpoint");
		CLOSE_ALL(&cli->fid, &srv->fid, &cq->fid);
	}
	CLOSE_ALL(&pep->fid, &domain->fid, &eq->fid, &fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	CHECK(expect_failures == 0, "%d mismatches above", expect_failures);
	printf("msg ok\n");
}

/* fi_av_insertsvc / fi_av_insertsym on udp, whose AV resolves IP node and service names. */
static void part_ip_av(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	fi_addr_t fa[2] = { 0, 0 };
	struct sockaddr_in sin;
	size_t slen;

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG | FI_MULTICAST;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup("udp");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	/* fi_setname before fi_enable: the endpoint takes the new address. */
	{
		struct fid_ep *ep;
		struct sockaddr_in src = { .sin_family = AF_INET }, got;
		size_t glen = sizeof(got);
		src.sin_addr.s_addr = htonl(0x7f000001);
		OK(fi_endpoint(domain, info, &ep, NULL));
		EXPECT(fi_setname(&ep->fid, &src, sizeof(src)), 0);
		OK(fi_getname(&ep->fid, &got, &glen));
		CHECK(got.sin_family == AF_INET && got.sin_addr.s_addr == htonl(0x7f000001) &&
		      got.sin_port != 0, "setname address");
		OK(fi_close(&ep->fid));
	}
	/* fi_join / fi_mc_addr: a send-only membership (no group traffic needed) gives a
	 * fabric address; the endpoint stays open while it is joined. */
	{
		struct fid_ep *ep;
		struct fid_cq *cq;
		struct fid_mc *mc = (struct fid_mc *)0x1;
		struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
		struct sockaddr_in group = { .sin_family = AF_INET, .sin_port = htons(4791) };
		struct sockaddr_in unicast = group;
		OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
		OK(fi_endpoint(domain, info, &ep, NULL));
		OK(fi_ep_bind(ep, &av->fid, 0));
		OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
		OK(fi_enable(ep));
		unicast.sin_addr.s_addr = htonl(0x7f000001);
		EXPECT(fi_join(ep, &unicast, FI_SEND, &mc, NULL), -FI_EINVAL);
		CHECK(mc == NULL, "failed join out");
		group.sin_addr.s_addr = htonl(0xefff0001); /* 239.255.0.1 */
		OK(fi_join(ep, &group, FI_SEND, &mc, (void *)0x3c));
		CHECK(mc && mc->fid.fclass == FI_CLASS_MC && mc->fid.context == (void *)0x3c,
		      "membership fid");
		CHECK(fi_mc_addr(mc) != FI_ADDR_NOTAVAIL, "group address");
		CHECK(fi_close(&ep->fid) == -FI_EBUSY, "closing a joined endpoint");
		CLOSE_ALL(&mc->fid, &ep->fid, &cq->fid);
	}
	EXPECT(fi_av_insertsvc(av, "127.0.0.1", "4000", &fa[0], 0, NULL), 1);
	slen = sizeof(sin);
	OK(fi_av_lookup(av, fa[0], &sin, &slen));
	CHECK(sin.sin_port == htons(4000) && sin.sin_addr.s_addr == htonl(0x7f000001),
	      "insertsvc address");
	EXPECT(fi_av_insertsym(av, "127.0.0.1", 1, "5000", 2, fa, 0, NULL), 2);
	slen = sizeof(sin);
	OK(fi_av_lookup(av, fa[1], &sin, &slen));
	CHECK(sin.sin_port == htons(5001), "insertsym second service %u", ntohs(sin.sin_port));
	CLOSE_ALL(&av->fid, &domain->fid, &fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	CHECK(expect_failures == 0, "%d mismatches above", expect_failures);
	printf("ip av ok\n");
}

int main(void)
{
	part_rdm();
	part_msg();
	part_ip_av();
	printf("all ok\n");
	return 0;
}
