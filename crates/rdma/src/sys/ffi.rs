//! Mirrors of the rdma-core structures the run-time binding reads or fills, written from
//! the field lists of `<infiniband/verbs.h>` (rdma-core 44, x86-64 Linux) and checked
//! against the installed header by `tests/layout.rs` (sizes and every field's offset).
//!
//! The data path of verbs is inline in C: `ibv_post_send`, `ibv_post_recv`,
//! `ibv_post_srq_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` call through the function
//! pointers of the context's [`IbvContextOps`]; these mirrors let Rust make the same
//! calls without a C shim. Opaque objects (`ibv_device`'s driver part, `ibv_mw`, `ibv_wq`)
//! are only handled by pointer.

#![allow(missing_docs)] // Field names are rdma-core's; the header documents them.

use libc::{c_char, c_int, c_uint, c_void, pthread_cond_t, pthread_mutex_t, size_t};

/// `IBV_SYSFS_NAME_MAX`
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct _ibv_device_ops`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDeviceOps {
    pub _dummy1: *mut c_void,
    pub _dummy2: *mut c_void,
}

/// `struct ibv_device` (the public head of the driver's device).
#[repr(C)]
pub struct IbvDevice {
    pub _ops: IbvDeviceOps,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// An entry of the ops table this binding never calls.
pub type Unused = Option<unsafe extern "C" fn()>;

/// `struct ibv_context_ops`: the slots the inline data-path calls go through, and
/// placeholders for the compatibility slots.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvContextOps {
    pub _compat_query_device: Unused,
    pub _compat_query_port: Unused,
    pub _compat_alloc_pd: Unused,
    pub _compat_dealloc_pd: Unused,
    pub _compat_reg_mr: Unused,
    pub _compat_rereg_mr: Unused,
    pub _compat_dereg_mr: Unused,
    pub alloc_mw: Unused,
    pub bind_mw: Unused,
    pub dealloc_mw: Unused,
    pub _compat_create_cq: Unused,
    pub poll_cq: Option<unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int>,
    pub _compat_cq_event: Unused,
    pub _compat_resize_cq: Unused,
    pub _compat_destroy_cq: Unused,
    pub _compat_create_srq: Unused,
    pub _compat_modify_srq: Unused,
    pub _compat_query_srq: Unused,
    pub _compat_destroy_srq: Unused,
    pub post_srq_recv:
        Option<unsafe extern "C" fn(*mut IbvSrq, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
    pub _compat_create_qp: Unused,
    pub _compat_query_qp: Unused,
    pub _compat_modify_qp: Unused,
    pub _compat_destroy_qp: Unused,
    pub post_send:
        Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
    pub _compat_create_ah: Unused,
    pub _compat_destroy_ah: Unused,
    pub _compat_attach_mcast: Unused,
    pub _compat_detach_mcast: Unused,
    pub _compat_async_event: Unused,
}

/// `struct ibv_context`
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: IbvContextOps,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `struct ibv_device_attr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvPortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `struct ibv_pd`
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_mr`
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: size_t,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel`
#[repr(C)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_srq`
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_ah`
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `struct ibv_sge`: the interface's [`Sge`](crate::Sge) has this layout.
pub type IbvSge = crate::verbs::Sge;

/// `struct ibv_wc`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (network order) or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_recv_wr`
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `wr.rdma` of `struct ibv_send_wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvRdmaWr {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of `struct ibv_send_wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAtomicWr {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of `struct ibv_send_wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvUdWr {
    pub ah: *mut IbvAh,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrOp {
    pub rdma: IbvRdmaWr,
    pub atomic: IbvAtomicWr,
    pub ud: IbvUdWr,
}

/// `struct ibv_mw_bind_info`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `bind_mw` of `struct ibv_send_wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvBindMwWr {
    pub mw: *mut c_void,
    pub rkey: u32,
    pub bind_info: IbvMwBindInfo,
}

/// `tso` of `struct ibv_send_wr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvTsoWr {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// The last (anonymous) union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrExt {
    pub bind_mw: IbvBindMwWr,
    pub tso: IbvTsoWr,
}

/// `struct ibv_send_wr`
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: c_uint,
    /// `imm_data` (network order) or `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: IbvSendWrOp,
    /// `qp_type.xrc.remote_srqn`
    pub remote_srqn: u32,
    pub ext: IbvSendWrExt,
}

/// `struct ibv_global_route`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`
#[repr(C)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf` (inside [`IbvQpInitAttrEx`]; unused: zero).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvRxHashConf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex` (what `efadv_create_qp_ex` takes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut IbvPd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: IbvRxHashConf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `IBV_QP_INIT_ATTR_PD`: [`IbvQpInitAttrEx::pd`] is set.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QPT_DRIVER`: a queue pair type of the driver's own (EFA's SRD).
pub const IBV_QPT_DRIVER: u32 = 0xff;

/// `struct ibv_qp_attr`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_srq_attr`
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`
#[repr(C)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}

/// The `element` union of `struct ibv_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvAsyncElement {
    pub cq: *mut IbvCq,
    pub qp: *mut IbvQp,
    pub srq: *mut IbvSrq,
    pub wq: *mut c_void,
    pub port_num: c_int,
}

/// `struct ibv_async_event`
#[repr(C)]
pub struct IbvAsyncEvent {
    pub element: IbvAsyncElement,
    pub event_type: u32,
}

/// `union ibv_gid`: 16 bytes in network order, aligned as its two 64-bit halves.
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_poll_cq_attr` (what `start_poll` takes; `comp_mask` 0).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvPollCqAttr {
    pub comp_mask: u32,
}

/// `struct ibv_cq_init_attr_ex` (what `efadv_create_cq` takes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut IbvCompChannel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut IbvPd,
}

/// A `read_*` slot of [`IbvCqEx`]: one field of the current completion.
pub type CqExRead<T> = Option<unsafe extern "C" fn(*mut IbvCqEx) -> T>;

/// `struct ibv_cq_ex`: an extended completion queue. Its head is a `struct ibv_cq` (in C
/// the same fields spelled out; a pointer to one is a pointer to the other, as
/// `ibv_cq_ex_to_cq` casts); the inline
/// `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and `ibv_wc_read_*` call through
/// the function pointers after it, and read the current completion's `status` and
/// `wr_id` from its fields.
#[repr(C)]
pub struct IbvCqEx {
    pub cq: IbvCq,
    pub comp_mask: u32,
    pub status: u32,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut IbvCqEx, *mut IbvPollCqAttr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut IbvCqEx) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut IbvCqEx)>,
    pub read_opcode: CqExRead<u32>,
    pub read_vendor_err: CqExRead<u32>,
    pub read_byte_len: CqExRead<u32>,
    /// Network order.
    pub read_imm_data: CqExRead<u32>,
    pub read_qp_num: CqExRead<u32>,
    pub read_src_qp: CqExRead<u32>,
    pub read_wc_flags: CqExRead<c_uint>,
    pub read_slid: CqExRead<u32>,
    pub read_sl: CqExRead<u8>,
    pub read_dlid_path_bits: CqExRead<u8>,
    pub read_completion_ts: CqExRead<u64>,
    pub read_cvlan: CqExRead<u16>,
    pub read_flow_tag: CqExRead<u32>,
    pub read_tm_info: Unused,
    pub read_completion_wallclock_ns: CqExRead<u64>,
}

/// `IBV_WC_STANDARD_FLAGS`: byte length, immediate data, queue pair numbers, source LID,
/// service level and path bits can be read from an extended completion.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
