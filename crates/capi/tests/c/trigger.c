/*
 * Triggered operations from C (fi_trigger.h) on libfabric.so.1 over ofi-rs: two shm
 * RDM endpoints of one process. A send triggered at threshold 2 of a counter does not
 * go while the counter reads 1 and goes at 2, reporting its struct
 * fi_triggered_context; an RMA write triggered by the transmit counter that the send
 * increments follows it; threshold 0 is -FI_EINVAL; closing an endpoint with a
 * waiting triggered send completes it with -FI_ECANCELED. Exits non-zero at the
 * first failed CHECK.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_trigger.h>
#include <rdma/fi_errno.h>
#include "check.h"
#include "progress.h"

#define ROUNDS 64

static struct fid_cq *cq_a, *cq_b;

/* Drives both CQs ROUNDS times; neither may have a completion. */
static void nothing_yet(const char *what)
{
	struct fi_cq_tagged_entry e;
	int n;

	for (n = 0; n < ROUNDS; n++) {
		CHECK(fi_cq_read(cq_a, &e, 1) == -FI_EAGAIN, "%s: side a completed", what);
		CHECK(fi_cq_read(cq_b, &e, 1) == -FI_EAGAIN, "%s: side b completed", what);
	}
}

/* Makes `t` a trigger at `threshold` of counter `cntr`. */
static void threshold_trigger(struct fi_triggered_context *t, struct fid_cntr *cntr,
			      size_t threshold)
{
	memset(t, 0, sizeof(*t));
	t->event_type = FI_TRIGGER_THRESHOLD;
	t->trigger.threshold.cntr = cntr;
	t->trigger.threshold.threshold = threshold;
}

static ssize_t sendmsg_triggered(struct fid_ep *ep, const void *buf, size_t len,
				 fi_addr_t to, struct fi_triggered_context *t)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct fi_msg msg = {
		.msg_iov = &iov, .desc = NULL, .iov_count = 1, .addr = to, .context = t,
	};

	return fi_sendmsg(ep, &msg, FI_TRIGGER);
}

int main(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *a, *b;
	struct fid_av *av;
	struct fid_cntr *start, *txc;
	struct fid_mr *mr;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_triggered_context t_send, t_write, t_zero, t_cancel;
	struct fi_cq_tagged_entry comp;
	struct fi_cq_err_entry err;
	char name_a[256], name_b[256], rbuf[64];
	size_t len_a = sizeof(name_a), len_b = sizeof(name_b);
	fi_addr_t addr[2];
	uint64_t target[8] = { 0 }, local[8] = { 11, 22, 33, 44, 55, 66, 77, 88 };
	struct iovec liov = { .iov_base = local, .iov_len = sizeof(local) };
	struct fi_rma_iov riov;
	struct fi_msg_rma rmsg;
	ssize_t r;

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_TRIGGER;
	hints->fabric_attr->prov_name = strdup("shm");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CHECK(info->caps & FI_TRIGGER, "FI_TRIGGER asked and given");
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq_a, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq_b, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	OK(fi_cntr_open(domain, &cntr_attr, &start, NULL));
	OK(fi_cntr_open(domain, &cntr_attr, &txc, NULL));
	OK(fi_endpoint(domain, info, &a, NULL));
	OK(fi_endpoint(domain, info, &b, NULL));
	OK(fi_ep_bind(a, &cq_a->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(b, &cq_b->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(a, &av->fid, 0));
	OK(fi_ep_bind(b, &av->fid, 0));
	OK(fi_ep_bind(a, &txc->fid, FI_SEND | FI_WRITE));
	OK(fi_enable(a));
	OK(fi_enable(b));
	OK(fi_getname(&a->fid, name_a, &len_a));
	OK(fi_getname(&b->fid, name_b, &len_b));
	CHECK(fi_av_insert(av, name_a, 1, &addr[0], 0, NULL) == 1, "insert a");
	CHECK(fi_av_insert(av, name_b, 1, &addr[1], 0, NULL) == 1, "insert b");
	OK(fi_mr_reg(domain, target, sizeof(target), FI_REMOTE_WRITE, 0, 1, 0, &mr, NULL));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		OK(fi_mr_bind(mr, &b->fid, 0));
		OK(fi_mr_enable(mr));
	}

	/* Threshold 0: refused, nothing posted. */
	threshold_trigger(&t_zero, start, 0);
	r = sendmsg_triggered(a, "zz", 3, addr[1], &t_zero);
	CHECK(r == -FI_EINVAL, "threshold 0: %zd", r);
	CHECK(t_zero.trigger.threshold.cntr == start || t_zero.trigger.threshold.cntr != NULL,
	      "context kept");

	/* A send at threshold 2 of `start`, and a write at threshold 1 of `txc` (which
	 * counts the send's completion). */
	OK(fi_recv(b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, NULL));
	threshold_trigger(&t_send, start, 2);
	OK(sendmsg_triggered(a, "trig", 5, addr[1], &t_send));
	threshold_trigger(&t_write, txc, 1);
	riov.addr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)target : 0;
	riov.len = sizeof(local);
	riov.key = fi_mr_key(mr);
	memset(&rmsg, 0, sizeof(rmsg));
	rmsg.msg_iov = &liov;
	rmsg.iov_count = 1;
	rmsg.addr = addr[1];
	rmsg.rma_iov = &riov;
	rmsg.rma_iov_count = 1;
	rmsg.context = &t_write;
	OK(fi_writemsg(a, &rmsg, FI_TRIGGER | FI_COMPLETION));

	nothing_yet("counter at 0");
	OK(fi_cntr_add(start, 1));
	nothing_yet("counter at 1 of 2");
	OK(fi_cntr_add(start, 1));
	wait_comp(cq_b, cq_a, &comp);
	CHECK(comp.len == 5 && !strcmp(rbuf, "trig"), "received %zu %s", comp.len, rbuf);
	wait_comp(cq_a, cq_b, &comp);
	CHECK(comp.op_context == &t_send, "send completion reports its triggered context");
	wait_comp(cq_a, cq_b, &comp);
	CHECK(comp.op_context == &t_write, "write completion after the send");
	CHECK(!memcmp(target, local, sizeof(local)), "the triggered write landed");
	CHECK(fi_cntr_read(txc) == 2, "tx counter %lu", (unsigned long)fi_cntr_read(txc));

	/* Close with a triggered send waiting: FI_ECANCELED. */
	threshold_trigger(&t_cancel, start, 100);
	OK(sendmsg_triggered(a, "never", 6, addr[1], &t_cancel));
	nothing_yet("before close");
	OK(fi_close(&a->fid));
	r = read_until(cq_a, NULL, &comp, ROUNDS);
	CHECK(r == -FI_EAVAIL, "an error entry after close: %zd", r);
	CHECK(fi_cq_readerr(cq_a, &err, 0) == 1, "readerr");
	CHECK(err.err == FI_ECANCELED && err.op_context == &t_cancel, "cancelled: err %d", err.err);

	CLOSE_ALL(&b->fid, &mr->fid, &txc->fid, &start->fid, &av->fid, &cq_a->fid, &cq_b->fid,
		  &domain->fid, &fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("trigger ok\nall ok\n");
	return 0;
}
