//! librdmacm opened at run time (`librdmacm.so.1`, overridable with
//! `OFI_RDMA_RDMACM_LIB`): the entry points a verbs provider's connection management on
//! hardware uses, and the mirrors of the structures it reads (`rdma_cm_id`,
//! `rdma_cm_event` and their parts), checked against `<rdma/rdma_cma.h>` by
//! `tests/layout.rs`. Nothing is linked: without the library the reason is one line
//! ("librdmacm.so.1 not found").

#![allow(missing_docs)] // Field names are librdmacm's; the header documents them.

use std::sync::OnceLock;

use libc::{c_int, c_void, sockaddr, sockaddr_storage};

use super::ffi::{
    IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvGid, IbvPd, IbvQp, IbvQpAttr, IbvQpInitAttr,
    IbvSrq,
};

/// The library name looked for.
pub const RDMACM_LIB: &str = "librdmacm.so.1";

/// `RDMA_PS_TCP`: reliable connected port space.
pub const RDMA_PS_TCP: u32 = 0x0106;
/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "as many as the device allows" in
/// `struct rdma_conn_param`.
pub const RDMA_MAX_RD_ATOMIC: u8 = 0xff;

/// `RDMA_PS_UDP`: datagram port space.
pub const RDMA_PS_UDP: u32 = 0x0111;

/// `enum rdma_cm_event_type`, in order from `RDMA_CM_EVENT_ADDR_RESOLVED` (0).
pub const RDMA_CM_EVENTS: [&str; 16] = [
    "ADDR_RESOLVED",
    "ADDR_ERROR",
    "ROUTE_RESOLVED",
    "ROUTE_ERROR",
    "CONNECT_REQUEST",
    "CONNECT_RESPONSE",
    "CONNECT_ERROR",
    "UNREACHABLE",
    "REJECTED",
    "ESTABLISHED",
    "DISCONNECTED",
    "DEVICE_REMOVAL",
    "MULTICAST_JOIN",
    "MULTICAST_ERROR",
    "ADDR_CHANGE",
    "TIMEWAIT_EXIT",
];

/// `struct rdma_event_channel`
#[repr(C)]
pub struct RdmaEventChannel {
    pub fd: c_int,
}

/// `struct rdma_ib_addr`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaIbAddr {
    pub sgid: IbvGid,
    pub dgid: IbvGid,
    /// Network order.
    pub pkey: u16,
}

/// `struct rdma_addr` (the address unions as their `sockaddr_storage` members).
#[repr(C)]
pub struct RdmaAddr {
    pub src_storage: sockaddr_storage,
    pub dst_storage: sockaddr_storage,
    /// `addr.ibaddr`
    pub ibaddr: RdmaIbAddr,
}

/// `struct rdma_route`
#[repr(C)]
pub struct RdmaRoute {
    pub addr: RdmaAddr,
    pub path_rec: *mut c_void,
    pub num_paths: c_int,
}

/// `struct rdma_cm_id`
#[repr(C)]
pub struct RdmaCmId {
    pub verbs: *mut IbvContext,
    pub channel: *mut RdmaEventChannel,
    pub context: *mut c_void,
    pub qp: *mut IbvQp,
    pub route: RdmaRoute,
    pub ps: u32,
    pub port_num: u8,
    pub event: *mut RdmaCmEvent,
    pub send_cq_channel: *mut IbvCompChannel,
    pub send_cq: *mut IbvCq,
    pub recv_cq_channel: *mut IbvCompChannel,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub pd: *mut IbvPd,
    pub qp_type: u32,
}

/// `struct rdma_conn_param`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RdmaUdParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: IbvAhAttr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union RdmaCmEventParam {
    pub conn: RdmaConnParam,
    pub ud: RdmaUdParam,
}

/// `struct rdma_cm_event`
#[repr(C)]
pub struct RdmaCmEvent {
    pub id: *mut RdmaCmId,
    pub listen_id: *mut RdmaCmId,
    pub event: u32,
    pub status: c_int,
    pub param: RdmaCmEventParam,
}

/// Loads `name` and resolves the entry points; the error is the one-line reason.
pub fn load(name: &str) -> std::result::Result<RdmaCm, String> {
    // SAFETY: loading librdmacm runs its constructors, which only set up its own state.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|_| format!("{name} not found"))?;
    resolve(name, lib)
}

entry_points! {
    RdmaCm, resolve, "rdma/rdma_cma.h";
    create_event_channel = "rdma_create_event_channel": fn() -> *mut RdmaEventChannel;
    destroy_event_channel = "rdma_destroy_event_channel": fn(*mut RdmaEventChannel);
    create_id = "rdma_create_id": fn(*mut RdmaEventChannel, *mut *mut RdmaCmId, *mut c_void, u32) -> c_int;
    destroy_id = "rdma_destroy_id": fn(*mut RdmaCmId) -> c_int;
    bind_addr = "rdma_bind_addr": fn(*mut RdmaCmId, *mut sockaddr) -> c_int;
    resolve_addr = "rdma_resolve_addr": fn(*mut RdmaCmId, *mut sockaddr, *mut sockaddr, c_int) -> c_int;
    resolve_route = "rdma_resolve_route": fn(*mut RdmaCmId, c_int) -> c_int;
    listen = "rdma_listen": fn(*mut RdmaCmId, c_int) -> c_int;
    connect = "rdma_connect": fn(*mut RdmaCmId, *mut RdmaConnParam) -> c_int;
    accept = "rdma_accept": fn(*mut RdmaCmId, *mut RdmaConnParam) -> c_int;
    reject = "rdma_reject": fn(*mut RdmaCmId, *const c_void, u8) -> c_int;
    disconnect = "rdma_disconnect": fn(*mut RdmaCmId) -> c_int;
    establish = "rdma_establish": fn(*mut RdmaCmId) -> c_int;
    get_cm_event = "rdma_get_cm_event": fn(*mut RdmaEventChannel, *mut *mut RdmaCmEvent) -> c_int;
    ack_cm_event = "rdma_ack_cm_event": fn(*mut RdmaCmEvent) -> c_int;
    create_qp = "rdma_create_qp": fn(*mut RdmaCmId, *mut IbvPd, *mut IbvQpInitAttr) -> c_int;
    destroy_qp = "rdma_destroy_qp": fn(*mut RdmaCmId);
    init_qp_attr = "rdma_init_qp_attr": fn(*mut RdmaCmId, *mut IbvQpAttr, *mut c_int) -> c_int;
}

/// The process-wide library (loaded once; the name is read once).
pub fn rdmacm() -> std::result::Result<&'static RdmaCm, String> {
    static LIB: OnceLock<std::result::Result<RdmaCm, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        load(&std::env::var("OFI_RDMA_RDMACM_LIB").unwrap_or_else(|_| RDMACM_LIB.to_string()))
    })
    .as_ref()
    .map_err(Clone::clone)
}
