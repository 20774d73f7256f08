/* A stand-in for librdmacm, written for ofi-rs's tests (tests/rdmacm_fake.rs and
 * tests/rdmacm_fake_active.rs, the latter with tests/fake/libibverbs_fake.c): the
 * entry points the connection manager resolves, over the installed header's structs,
 * with an event queue the test fills (fake_connect_request, fake_event) and a log of
 * the calls (fake_log). The event channel's fd is a pipe holding one byte per queued
 * event. It checks one rule of librdmacm: no id is destroyed while an event of it is
 * taken and not acknowledged ("UNACKED" in the log). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

static char log_buf[8192];
static int write_fd = -1;
static struct rdma_cm_event queue[64];
static int q_head, q_tail;
static struct rdma_cm_id *taken_for;
static struct rdma_cm_id *last_listen;
static struct rdma_cm_id *last_request;
static struct rdma_cm_id *last_connect;
static int resolve_error;
/* The device ids resolve to (libibverbs_fake.c's device has the same name). */
static struct ibv_device fake_dev = {.name = "fake0"};
static struct ibv_context fake_ctx = {.device = &fake_dev};

static void note(const char *fmt, ...);

static void note_data(const char *what, const void *data, int len, uint32_t qpn) {
    char hex[3 * 256 + 1] = "";
    for (int i = 0; i < len; i++)
        sprintf(hex + 3 * i, " %02x", ((const unsigned char *)data)[i]);
    note("%s qpn=%u len=%d%s", what, qpn, len, hex);
}

static void note(const char *fmt, ...) {
    size_t used = strlen(log_buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log_buf + used, sizeof log_buf - used, fmt, ap);
    va_end(ap);
    used = strlen(log_buf);
    if (used + 1 < sizeof log_buf) {
        log_buf[used] = '\n';
        log_buf[used + 1] = 0;
    }
}

const char *fake_log(void) { return log_buf; }

static void enqueue(struct rdma_cm_event ev) {
    queue[q_tail++ % 64] = ev;
    if (write(write_fd, "e", 1) != 1)
        note("pipe write failed");
}

static struct rdma_cm_id *new_id(struct rdma_event_channel *ch) {
    struct rdma_cm_id *id = calloc(1, sizeof *id);
    id->channel = ch;
    id->ps = RDMA_PS_TCP;
    return id;
}

/* A connect request at the last listener, from 10.0.0.5:5555 (GID 0x5a...), queue pair
 * qpn, with len bytes of private data padded to 56 as InfiniBand delivers them. */
int fake_connect_request(const void *data, int len, uint32_t qpn) {
    if (!last_listen)
        return -1;
    struct rdma_cm_id *id = new_id(last_listen->channel);
    id->verbs = &fake_ctx;
    last_request = id;
    struct sockaddr_in *dst = (struct sockaddr_in *)&id->route.addr.dst_storage;
    dst->sin_family = AF_INET;
    dst->sin_port = htons(5555);
    dst->sin_addr.s_addr = htonl(0x0a000005);
    memset(id->route.addr.addr.ibaddr.dgid.raw, 0x5a, 16);
    unsigned char *pd = calloc(1, 56);
    memcpy(pd, data, len);
    struct rdma_cm_event ev = {0};
    ev.id = id;
    ev.listen_id = last_listen;
    ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
    ev.param.conn.private_data = pd;
    ev.param.conn.private_data_len = 56;
    ev.param.conn.qp_num = qpn;
    enqueue(ev);
    return 0;
}

/* An event of kind `type` with `status` on a new id nobody knows. */
int fake_event(int type, int status) {
    if (!last_listen)
        return -1;
    struct rdma_cm_event ev = {0};
    ev.id = new_id(last_listen->channel);
    ev.event = type;
    ev.status = status;
    enqueue(ev);
    return 0;
}

/* The next address resolution fails with an ADDR_ERROR of `status` (0: succeeds). */
void fake_set_resolve_error(int status) { resolve_error = status; }

/* An event of kind `type` on the last request (which = 0) or the last connecting id
 * (which = 1), carrying `len` bytes of private data padded to 196 and `qpn`. */
int fake_answer(int which, int type, int status, const void *data, int len, uint32_t qpn) {
    struct rdma_cm_id *id = which ? last_connect : last_request;
    if (!id)
        return -1;
    struct rdma_cm_event ev = {0};
    ev.id = id;
    ev.event = type;
    ev.status = status;
    if (len > 0) {
        unsigned char *pd = calloc(1, 196);
        memcpy(pd, data, len);
        ev.param.conn.private_data = pd;
        ev.param.conn.private_data_len = 196;
    }
    ev.param.conn.qp_num = qpn;
    enqueue(ev);
    return 0;
}

struct rdma_event_channel *rdma_create_event_channel(void) {
    int p[2];
    if (pipe(p))
        return NULL;
    struct rdma_event_channel *ch = calloc(1, sizeof *ch);
    ch->fd = p[0];
    write_fd = p[1];
    note("create_event_channel");
    return ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *ch) {
    note("destroy_event_channel");
    close(ch->fd);
    close(write_fd);
    free(ch);
}

int rdma_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                   enum rdma_port_space ps) {
    (void)ctx;
    *id = new_id(ch);
    (*id)->ps = ps;
    note("create_id ps=%d", (int)ps);
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id) {
    note("destroy_id%s", id == taken_for ? " UNACKED" : "");
    free(id);
    return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr) {
    struct sockaddr_in *src = (struct sockaddr_in *)&id->route.addr.src_storage;
    memcpy(src, addr, sizeof *src);
    if (src->sin_port == 0)
        src->sin_port = htons(7471);
    note("bind_addr port=%d", ntohs(src->sin_port));
    return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog) {
    last_listen = id;
    note("listen backlog=%d", backlog);
    return 0;
}

int rdma_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **event) {
    char c;
    if (read(ch->fd, &c, 1) != 1) {
        errno = EAGAIN;
        return -1;
    }
    struct rdma_cm_event *ev = malloc(sizeof *ev);
    *ev = queue[q_head++ % 64];
    taken_for = ev->id;
    *event = ev;
    note("get_cm_event %d", (int)ev->event);
    return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event) {
    note("ack_cm_event %d", (int)event->event);
    taken_for = NULL;
    free((void *)event->param.conn.private_data);
    free(event);
    return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *data, uint8_t len) {
    (void)id;
    char hex[3 * 256 + 1] = "";
    for (int i = 0; i < len; i++)
        sprintf(hex + 3 * i, " %02x", ((const unsigned char *)data)[i]);
    note("reject len=%d%s", len, hex);
    return 0;
}

int rdma_disconnect(struct rdma_cm_id *id) {
    (void)id;
    note("disconnect");
    return 0;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                      int ms) {
    (void)src;
    note("resolve_addr ms=%d", ms);
    memcpy(&id->route.addr.dst_storage, dst, sizeof(struct sockaddr_in));
    memset(id->route.addr.addr.ibaddr.dgid.raw, 0x5a, 16);
    last_connect = id;
    struct rdma_cm_event ev = {0};
    ev.id = id;
    if (resolve_error) {
        ev.event = RDMA_CM_EVENT_ADDR_ERROR;
        ev.status = resolve_error;
        resolve_error = 0;
    } else {
        id->verbs = &fake_ctx;
        ev.event = RDMA_CM_EVENT_ADDR_RESOLVED;
    }
    enqueue(ev);
    return 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int ms) {
    note("resolve_route ms=%d", ms);
    struct rdma_cm_event ev = {0};
    ev.id = id;
    ev.event = RDMA_CM_EVENT_ROUTE_RESOLVED;
    enqueue(ev);
    return 0;
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *a, int *mask) {
    (void)id;
    note("init_qp_attr state=%d", (int)a->qp_state);
    *mask = IBV_QP_STATE;
    if (a->qp_state == IBV_QPS_RTR) {
        a->dest_qp_num = 0x99;
        *mask |= IBV_QP_DEST_QPN;
    }
    return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p) {
    (void)id;
    note_data("connect", p->private_data, p->private_data_len, p->qp_num);
    note("connect srq=%d retry=%d rnr=%d", p->srq, p->retry_count, p->rnr_retry_count);
    return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p) {
    (void)id;
    note_data("accept", p->private_data, p->private_data_len, p->qp_num);
    return 0;
}

int rdma_establish(struct rdma_cm_id *id) {
    (void)id;
    note("establish");
    return 0;
}

/* Never reached by the tests: refuse, noted. */
#define REFUSE(what) do { note(what); errno = ENOSYS; return -1; } while (0)
int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
    (void)id; (void)pd; (void)a; REFUSE("create_qp");
}
void rdma_destroy_qp(struct rdma_cm_id *id) { (void)id; note("destroy_qp"); }
