/* A stand-in for libefa, written for ofi-rs's tests (tests/efa_cq_fake.rs). With the
 * libibverbs stand-in's device it answers efadv_query_device as an EFA device whose
 * completions can name the sender's GID, numbers every address handle 42, and makes
 * extended completion queues that hand out one fixed script of completions: a receive
 * naming its sender by GID, a receive with immediate data naming it by address handle
 * number (no GID), a failed send; then nothing. The calls are logged
 * (fake_efa_log): "create_cq wc_flags=<hex> efa_wc_flags=<hex>", and per poll
 * sequence "start", "next", "end" (with "empty" when there was nothing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/efadv.h>

struct entry {
    uint64_t wr_id;
    enum ibv_wc_status status;
    enum ibv_wc_opcode opcode;
    uint32_t vendor_err, byte_len, qp_num, src_qp, slid, imm;
    unsigned int wc_flags;
    int has_gid;
    uint8_t gid_byte;
};

static const struct entry script[] = {
    {11, IBV_WC_SUCCESS, IBV_WC_RECV, 0, 100, 5, 77, 0xffff, 0, 0, 1, 0xab},
    {12, IBV_WC_SUCCESS, IBV_WC_RECV, 0, 200, 5, 78, 42, 0x01020304, IBV_WC_WITH_IMM, 0, 0},
    {13, IBV_WC_GENERAL_ERR, IBV_WC_SEND, 7, 0, 0, 0, 0, 0, 0, 0, 0},
};
#define SCRIPT_LEN ((int)(sizeof script / sizeof script[0]))

struct fake_cq {
    struct ibv_cq_ex ex; /* first: the pointer handed out, freed by ibv_destroy_cq */
    struct efadv_cq efa;
    int next, cur;
};

static char log_buf[4096];
const char *fake_efa_log(void) { return log_buf; }
static void note(const char *line) {
    size_t used = strlen(log_buf);
    snprintf(log_buf + used, sizeof log_buf - used, "%s\n", line);
}

static struct fake_cq *of(struct ibv_cq_ex *c) { return (struct fake_cq *)c; }
static const struct entry *cur(struct ibv_cq_ex *c) { return &script[of(c)->cur]; }

/* Takes the next scripted completion as the current one, or says there is none. */
static int take(struct ibv_cq_ex *c) {
    struct fake_cq *f = of(c);
    if (f->next >= SCRIPT_LEN)
        return ENOENT;
    f->cur = f->next++;
    c->wr_id = script[f->cur].wr_id;
    c->status = script[f->cur].status;
    return 0;
}
static int start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *a) {
    (void)a;
    int rc = take(c);
    note(rc ? "start empty" : "start");
    return rc;
}
static int next_poll(struct ibv_cq_ex *c) {
    int rc = take(c);
    note(rc ? "next empty" : "next");
    return rc;
}
static void end_poll(struct ibv_cq_ex *c) { (void)c; note("end"); }
static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *c) { return cur(c)->opcode; }
static uint32_t read_vendor_err(struct ibv_cq_ex *c) { return cur(c)->vendor_err; }
static uint32_t read_byte_len(struct ibv_cq_ex *c) { return cur(c)->byte_len; }
static __be32 read_imm_data(struct ibv_cq_ex *c) { return htobe32(cur(c)->imm); }
static uint32_t read_qp_num(struct ibv_cq_ex *c) { return cur(c)->qp_num; }
static uint32_t read_src_qp(struct ibv_cq_ex *c) { return cur(c)->src_qp; }
static unsigned int read_wc_flags(struct ibv_cq_ex *c) { return cur(c)->wc_flags; }
static uint32_t read_slid(struct ibv_cq_ex *c) { return cur(c)->slid; }
static uint8_t read_sl(struct ibv_cq_ex *c) { (void)c; return 0; }
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *c) { (void)c; return 0; }

static int wc_read_sgid(struct efadv_cq *e, union ibv_gid *gid) {
    struct fake_cq *f = (struct fake_cq *)((char *)e - offsetof(struct fake_cq, efa));
    const struct entry *x = &script[f->cur];
    if (!x->has_gid)
        return -ENOENT;
    memset(gid->raw, x->gid_byte, sizeof gid->raw);
    return 0;
}

struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr,
                                  struct efadv_cq_init_attr *efa_attr, uint32_t inlen) {
    char line[128];
    snprintf(line, sizeof line, "create_cq wc_flags=%llx efa_wc_flags=%llx inlen=%u",
             (unsigned long long)attr->wc_flags, (unsigned long long)efa_attr->wc_flags,
             inlen);
    note(line);
    struct fake_cq *f = calloc(1, sizeof *f);
    f->ex.context = ctx;
    f->ex.cq_context = attr->cq_context;
    f->ex.cqe = (int)attr->cqe;
    f->ex.start_poll = start_poll;
    f->ex.next_poll = next_poll;
    f->ex.end_poll = end_poll;
    f->ex.read_opcode = read_opcode;
    f->ex.read_vendor_err = read_vendor_err;
    f->ex.read_byte_len = read_byte_len;
    f->ex.read_imm_data = read_imm_data;
    f->ex.read_qp_num = read_qp_num;
    f->ex.read_src_qp = read_src_qp;
    f->ex.read_wc_flags = read_wc_flags;
    f->ex.read_slid = read_slid;
    f->ex.read_sl = read_sl;
    f->ex.read_dlid_path_bits = read_dlid_path_bits;
    f->efa.wc_read_sgid = wc_read_sgid;
    return &f->ex;
}

struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *c) { return &of(c)->efa; }

int efadv_query_device(struct ibv_context *ctx, struct efadv_device_attr *a, uint32_t inlen) {
    (void)ctx;
    memset(a, 0, inlen < sizeof *a ? inlen : sizeof *a);
    a->device_caps = EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
                     EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID;
    return 0;
}

int efadv_query_ah(struct ibv_ah *ah, struct efadv_ah_attr *a, uint32_t inlen) {
    (void)ah;
    memset(a, 0, inlen < sizeof *a ? inlen : sizeof *a);
    a->ahn = 42;
    return 0;
}

struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a,
                                  struct efadv_qp_init_attr *e, uint32_t inlen) {
    (void)ctx; (void)a; (void)e; (void)inlen;
    errno = EOPNOTSUPP;
    return NULL;
}
