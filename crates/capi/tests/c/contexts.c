/*
 * Scalable endpoints and shared contexts from C (fi_endpoint.h) on libfabric.so.1 over
 * ofi-rs's shm, or the provider named by the environment variable CONTEXTS_PROV
 * ("tcp;ofi_rxm"), the way an MPI library uses them:
 *  - part one: a scalable endpoint with two transmit and two receive contexts, each with
 *    its own CQ; transmit context i sends to receive context 1 - i through fi_rx_addr,
 *    each completion lands on its own context's CQ only; closing the scalable endpoint
 *    with open contexts is -FI_EBUSY;
 *  - part two: two endpoints bound to one shared transmit and one shared receive
 *    context; a receive posted once to the shared receive context takes a message sent
 *    to the second endpoint.
 * Exits non-zero at the first failed CHECK.
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
#include <rdma/fi_errno.h>
#include "check.h"
#include "progress.h"

#define BITS 1

static struct fi_info *prov_info(size_t tx_ctx_cnt, size_t rx_ctx_cnt, uint64_t caps)
{
	struct fi_info *hints, *info;
	const char *prov = getenv("CONTEXTS_PROV");

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->ep_attr->tx_ctx_cnt = tx_ctx_cnt;
	hints->ep_attr->rx_ctx_cnt = rx_ctx_cnt;
	hints->fabric_attr->prov_name = strdup(prov ? prov : "shm");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	return info;
}

static void part_scalable(void)
{
	struct fi_info *info = prov_info(2, 2, FI_MSG | FI_NAMED_RX_CTX);
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *sep, *tx[2], *rx[2];
	struct fid_cq *tcq[2], *rcq[2];
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .rx_ctx_bits = BITS };
	struct fi_cq_tagged_entry comp;
	char name[256], rbuf[2][64], payload[2][32];
	size_t len = sizeof(name);
	fi_addr_t base;
	int i;

	CHECK(info->ep_attr->tx_ctx_cnt >= 2 && info->ep_attr->rx_ctx_cnt >= 2,
	      "contexts given: tx %zu rx %zu", info->ep_attr->tx_ctx_cnt,
	      info->ep_attr->rx_ctx_cnt);
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	OK(fi_scalable_ep(domain, info, &sep, (void *)0x5e9));
	CHECK(sep->fid.fclass == FI_CLASS_SEP && sep->fid.context == (void *)0x5e9,
	      "scalable endpoint fid: class %zu", sep->fid.fclass);
	OK(fi_scalable_ep_bind(sep, &av->fid, 0));
	for (i = 0; i < 2; i++) {
		OK(fi_tx_context(sep, i, NULL, &tx[i], NULL));
		OK(fi_rx_context(sep, i, NULL, &rx[i], NULL));
		CHECK(tx[i]->fid.fclass == FI_CLASS_TX_CTX, "tx context class %zu",
		      tx[i]->fid.fclass);
		CHECK(rx[i]->fid.fclass == FI_CLASS_RX_CTX, "rx context class %zu",
		      rx[i]->fid.fclass);
		OK(fi_cq_open(domain, &cq_attr, &tcq[i], NULL));
		OK(fi_cq_open(domain, &cq_attr, &rcq[i], NULL));
		OK(fi_ep_bind(tx[i], &tcq[i]->fid, FI_TRANSMIT));
		OK(fi_ep_bind(rx[i], &rcq[i]->fid, FI_RECV));
		OK(fi_enable(tx[i]));
		OK(fi_enable(rx[i]));
	}
	{
		/* An index past the contexts the endpoint has is refused. */
		struct fid_ep *extra = (struct fid_ep *)0x1;
		int r = fi_tx_context(sep, 2, NULL, &extra, NULL);

		CHECK(r < 0 && extra == NULL, "tx context 2: %d", r);
	}
	OK(fi_enable(sep));
	OK(fi_getname(&sep->fid, name, &len));
	CHECK(fi_av_insert(av, name, 1, &base, 0, NULL) == 1, "insert the scalable endpoint");

	memset(rbuf, 0, sizeof(rbuf));
	for (i = 0; i < 2; i++) {
		memset(payload[i], 'a' + i, sizeof(payload[i]));
		OK(fi_recv(rx[i], rbuf[i], sizeof(rbuf[i]), NULL, FI_ADDR_UNSPEC, &rbuf[i]));
	}
	for (i = 0; i < 2; i++)
		OK(fi_send(tx[i], payload[i], 10 + i, NULL, fi_rx_addr(base, 1 - i, BITS),
			   &payload[i]));
	for (i = 0; i < 2; i++) {
		wait_comp(tcq[i], rcq[1 - i], &comp);
		CHECK(comp.op_context == &payload[i], "tx %d: its own send", i);
	}
	for (i = 0; i < 2; i++) {
		int from = 1 - i;

		wait_comp(rcq[i], NULL, &comp);
		CHECK(comp.op_context == &rbuf[i] && comp.len == (size_t)(10 + from),
		      "rx %d: len %zu", i, comp.len);
		CHECK(memcmp(rbuf[i], payload[from], 10 + from) == 0, "rx %d: data", i);
		CHECK(read_until(rcq[i], NULL, &comp, 64) == -FI_EAGAIN, "rx %d: one message", i);
		CHECK(read_until(tcq[i], NULL, &comp, 64) == -FI_EAGAIN, "tx %d: one send", i);
	}

	CHECK(fi_close(&sep->fid) == -FI_EBUSY, "scalable endpoint with open contexts");
	for (i = 0; i < 2; i++)
		CLOSE_ALL(&tx[i]->fid, &rx[i]->fid, &tcq[i]->fid, &rcq[i]->fid);
	CLOSE_ALL(&sep->fid, &av->fid, &domain->fid, &fabric->fid);
	fi_freeinfo(info);
	printf("scalable ok\n");
}

static void part_shared(void)
{
	struct fi_info *info = prov_info(FI_SHARED_CONTEXT, FI_SHARED_CONTEXT, FI_MSG);
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_stx *stx;
	struct fid_ep *srx, *ep[2];
	struct fid_cq *cq;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_tagged_entry comp[2];
	char names[2][256], rbuf[64];
	size_t len;
	fi_addr_t addr[2];
	int i, seen_send = 0, seen_recv = 0;

	CHECK(info->ep_attr->tx_ctx_cnt == FI_SHARED_CONTEXT &&
		      info->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT,
	      "shared contexts given");
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_stx_context(domain, info->tx_attr, &stx, (void *)0x57));
	OK(fi_srx_context(domain, info->rx_attr, &srx, (void *)0x58));
	CHECK(stx->fid.fclass == FI_CLASS_STX_CTX && stx->fid.context == (void *)0x57,
	      "stx class %zu", stx->fid.fclass);
	CHECK(srx->fid.fclass == FI_CLASS_SRX_CTX, "srx class %zu", srx->fid.fclass);
	OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	for (i = 0; i < 2; i++) {
		OK(fi_endpoint(domain, info, &ep[i], NULL));
		OK(fi_ep_bind(ep[i], &stx->fid, 0));
		OK(fi_ep_bind(ep[i], &srx->fid, 0));
		OK(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV));
		OK(fi_ep_bind(ep[i], &av->fid, 0));
		OK(fi_enable(ep[i]));
		len = sizeof(names[i]);
		OK(fi_getname(&ep[i]->fid, names[i], &len));
		CHECK(fi_av_insert(av, names[i], 1, &addr[i], 0, NULL) == 1, "insert %d", i);
	}
	/* One receive posted to the shared context serves the second endpoint. */
	OK(fi_recv(srx, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, rbuf));
	OK(fi_send(ep[0], "shared", 6, NULL, addr[1], names[0]));
	for (i = 0; i < 2; i++) {
		wait_comp(cq, NULL, &comp[i]);
		if (comp[i].op_context == names[0])
			seen_send++;
		else if (comp[i].op_context == rbuf && comp[i].len == 6)
			seen_recv++;
	}
	CHECK(seen_send == 1 && seen_recv == 1, "send %d recv %d", seen_send, seen_recv);
	CHECK(memcmp(rbuf, "shared", 6) == 0, "shared receive data");

	CLOSE_ALL(&ep[0]->fid, &ep[1]->fid, &srx->fid, &stx->fid, &cq->fid, &av->fid,
		  &domain->fid, &fabric->fid);
	fi_freeinfo(info);
	printf("shared ok\n");
}

int main(void)
{
	part_scalable();
	part_shared();
	printf("all ok\n");
	return 0;
}
