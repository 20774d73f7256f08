/* A stand-in for libibverbs, written for ofi-rs's tests (tests/rdmacm_fake_active.rs):
 * one device "fake0" whose objects are plain allocations, enough for the connection
 * manager's active and accepting sides to create a queue pair and move it. Queue pair
 * state changes are logged (fake_verbs_log), as "modify_qp qpn=<n> state=<s> mask=<m>".
 * The data path does nothing: posts are accepted and dropped, polls find nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#undef ibv_query_port
#undef ibv_reg_mr

static char log_buf[4096];
static struct ibv_device fake_dev = {.name = "fake0"};
static struct ibv_device *fake_list[2] = {&fake_dev, NULL};
static uint32_t next_qpn = 0x100;

const char *fake_verbs_log(void) { return log_buf; }

static void note(const char *line) {
    size_t used = strlen(log_buf);
    snprintf(log_buf + used, sizeof log_buf - used, "%s\n", line);
}

struct ibv_device **ibv_get_device_list(int *n) { *n = 1; return fake_list; }
void ibv_free_device_list(struct ibv_device **list) { (void)list; }
const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }
__be64 ibv_get_device_guid(struct ibv_device *d) { (void)d; return 0x1122334455667788ull; }

static int poll_none(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    (void)cq; (void)n; (void)wc;
    return 0;
}
static int notify(struct ibv_cq *cq, int solicited_only) {
    (void)cq; (void)solicited_only;
    return 0;
}
/* Sends are dropped; each call is logged "post_send n=<requests>", and a request whose
 * wr_id is 0xbad is refused (EINVAL, named in *bad) with those before it taken. */
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    (void)qp;
    int n = 0;
    for (; wr; wr = wr->next, n++) {
        if (wr->wr_id == 0xbad) {
            *bad = wr;
            return EINVAL;
        }
    }
    char line[64];
    snprintf(line, sizeof line, "post_send n=%d", n);
    note(line);
    return 0;
}
static int post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
    (void)qp; (void)wr; (void)bad;
    return 0;
}
static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
                         struct ibv_recv_wr **bad) {
    (void)srq; (void)wr; (void)bad;
    return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *d) {
    struct ibv_context *c = calloc(1, sizeof *c);
    c->ops.poll_cq = poll_none;
    c->ops.req_notify_cq = notify;
    c->ops.post_send = post_send;
    c->ops.post_recv = post_recv;
    c->ops.post_srq_recv = post_srq_recv;
    int p[2];
    if (pipe(p))
        return NULL;
    c->device = d;
    c->async_fd = p[0];
    c->cmd_fd = p[1];
    return c;
}

int ibv_close_device(struct ibv_context *c) {
    close(c->async_fd);
    close(c->cmd_fd);
    free(c);
    return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
    (void)c;
    memset(a, 0, sizeof *a);
    a->max_qp = 1024;
    a->max_qp_wr = 4096;
    a->max_sge = 16;
    a->max_cq = 1024;
    a->max_cqe = 1 << 16;
    a->max_mr = 1024;
    a->max_pd = 16;
    a->phys_port_cnt = 1;
    return 0;
}

/* The caller passes a whole struct ibv_port_attr (the header declares the compat
 * prefix type, incomplete here). */
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *compat) {
    (void)c;
    (void)port;
    struct ibv_port_attr *a = (struct ibv_port_attr *)compat;
    memset(a, 0, sizeof *a);
    a->state = IBV_PORT_ACTIVE;
    a->max_mtu = IBV_MTU_4096;
    a->active_mtu = IBV_MTU_4096;
    a->gid_tbl_len = 1;
    return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
    (void)c; (void)port; (void)index;
    memset(gid->raw, 0x11, 16);
    return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
    struct ibv_pd *pd = calloc(1, sizeof *pd);
    pd->context = c;
    return pd;
}
int ibv_dealloc_pd(struct ibv_pd *pd) { free(pd); return 0; }

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    (void)access;
    struct ibv_mr *mr = calloc(1, sizeof *mr);
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = len;
    mr->lkey = mr->rkey = 7;
    return mr;
}
int ibv_dereg_mr(struct ibv_mr *mr) { free(mr); return 0; }

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c) {
    struct ibv_comp_channel *ch = calloc(1, sizeof *ch);
    int p[2];
    if (pipe(p))
        return NULL;
    close(p[1]);
    ch->context = c;
    ch->fd = p[0];
    return ch;
}
int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) { close(ch->fd); free(ch); return 0; }

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *user,
                             struct ibv_comp_channel *ch, int vector) {
    (void)vector;
    struct ibv_cq *cq = calloc(1, sizeof *cq);
    cq->context = c;
    cq->channel = ch;
    cq->cq_context = user;
    cq->cqe = cqe;
    return cq;
}
int ibv_destroy_cq(struct ibv_cq *cq) { free(cq); return 0; }
int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **user) {
    (void)ch; (void)cq; (void)user;
    errno = EAGAIN;
    return -1;
}
void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int n) { (void)cq; (void)n; }

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
    struct ibv_qp *qp = calloc(1, sizeof *qp);
    qp->context = pd->context;
    qp->pd = pd;
    qp->send_cq = a->send_cq;
    qp->recv_cq = a->recv_cq;
    qp->srq = a->srq;
    qp->qp_num = next_qpn++;
    qp->qp_type = a->qp_type;
    qp->state = IBV_QPS_RESET;
    return qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
    char line[128];
    snprintf(line, sizeof line, "modify_qp qpn=%u state=%d mask=%d", qp->qp_num,
             (int)a->qp_state, mask);
    note(line);
    if (mask & IBV_QP_STATE)
        qp->state = a->qp_state;
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp) { free(qp); return 0; }

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a) {
    (void)pd; (void)a;
    errno = ENOSYS;
    return NULL;
}
int ibv_destroy_srq(struct ibv_srq *srq) { (void)srq; return 0; }
/* Address handles (for tests/efa_cq_fake.rs, whose libefa stand-in numbers them). */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a) {
    (void)a;
    struct ibv_ah *ah = calloc(1, sizeof *ah);
    ah->context = pd->context;
    ah->pd = pd;
    return ah;
}
int ibv_destroy_ah(struct ibv_ah *ah) { free(ah); return 0; }
int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *e) {
    (void)c; (void)e;
    errno = EAGAIN;
    return -1;
}
void ibv_ack_async_event(struct ibv_async_event *e) { (void)e; }
