//! The librdmacm backend of the connection manager (rdma-core devices).
//!
//! One event channel (`rdma_create_event_channel`, its fd non-blocking and the wait fd)
//! holds every id of the channel: listeners (`rdma_bind_addr` + `rdma_listen`), the
//! ids a connect request creates, and connecting ids. A connect resolves the address
//! and route first (internal steps, each an event), moves the queue pair to INIT with
//! the attributes rdma_cm computes for the route (`rdma_init_qp_attr`), and sends the
//! request carrying the queue pair number and the private data. The queue pair is not
//! attached to the id (it was created on the domain's own context), so librdmacm hands
//! the answer over as `CONNECT_RESPONSE`: the queue pair goes to RTR and RTS and
//! `rdma_establish` completes the exchange. An acceptor's queue pair goes through INIT,
//! RTR and RTS before `rdma_accept`.
//!
//! InfiniBand pads private data to its limit (56 bytes in a request, 196 in a reply),
//! so the data travels framed: one length byte, then the bytes. A frame whose length
//! exceeds what arrived reads as no data.
//!
//! Invariants: every event is acknowledged before `get_event` returns and before any id
//! it names is destroyed; ids are destroyed once, by the channel, and only after the
//! event naming them is acknowledged (librdmacm's `rdma_destroy_id` waits for that);
//! an id is in the channel's tables before any event of it can be taken (the lock is
//! held from its creation). Peer input (private data, addresses) is bounded and parsed defensively: nothing here
//! panics on it.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use libc::{c_int, c_void, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage};
use ofi_core::{Errno, Error, Result};

use super::{
    check_private_data, CmEvent, CmEventKind, CmPeer, ACCEPT_PRIVATE_MAX, CONNECT_PRIVATE_MAX,
};
use crate::device::mixed;
use crate::qp::QueuePair;
use crate::soft::cq::lock;
use crate::sys::ffi::IbvQpAttr;
use crate::sys::objects::SysQp;
use crate::sys::rdmacm::{
    RdmaCm, RdmaCmEvent, RdmaCmId, RdmaConnParam, RdmaEventChannel, RDMA_MAX_RD_ATOMIC, RDMA_PS_TCP,
};
use crate::verbs::{Gid, QpState};

/// Most application bytes of a connect request on hardware (one of InfiniBand's 56 is
/// the frame's length).
pub const HW_CONNECT_PRIVATE_MAX: usize = CONNECT_PRIVATE_MAX - 1;
/// Most application bytes of an accept or reject on hardware.
pub const HW_ACCEPT_PRIVATE_MAX: usize = ACCEPT_PRIVATE_MAX - 1;

/// How long address and route resolution may take, in milliseconds.
const RESOLVE_TIMEOUT_MS: c_int = 2000;
/// Connect requests a listener queues.
const BACKLOG: c_int = 128;
/// Events taken from the kernel per `get_event` call at most.
const EVENTS_PER_CALL: usize = 32;
/// Retries of the transport and on receiver-not-ready (7: forever for RNR).
const RETRIES: u8 = 7;

// `enum rdma_cm_event_type`.
const ADDR_RESOLVED: u32 = 0;
const ADDR_ERROR: u32 = 1;
const ROUTE_RESOLVED: u32 = 2;
const ROUTE_ERROR: u32 = 3;
const CONNECT_REQUEST: u32 = 4;
const CONNECT_RESPONSE: u32 = 5;
const CONNECT_ERROR: u32 = 6;
const UNREACHABLE: u32 = 7;
const REJECTED: u32 = 8;
const ESTABLISHED: u32 = 9;
const DISCONNECTED: u32 = 10;
const DEVICE_REMOVAL: u32 = 11;

/// What one rdma_cm event means to the channel ([`translate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmStep {
    /// `ADDR_RESOLVED`: resolve the route next (internal).
    AddrResolved,
    /// `ROUTE_RESOLVED`: move the queue pair to INIT and send the request (internal).
    RouteResolved,
    /// `CONNECT_REQUEST` at a listener: the requester.
    ConnectRequest(CmPeer),
    /// `CONNECT_RESPONSE`: the acceptor; move the queue pair to RTR and RTS and
    /// establish (internal, then [`CmEventKind::Established`]).
    ConnectResponse(CmPeer),
    /// `ESTABLISHED`: the other side, with the private data the event carries.
    Established(CmPeer),
    /// `REJECTED`: the rejecter's private data (empty unless an application rejected).
    Rejected(Vec<u8>),
    /// `DISCONNECTED`.
    Disconnected,
    /// An error event, with the `FI_*` code it stands for.
    Failed(Errno),
    /// Nothing for the channel's user (`TIMEWAIT_EXIT`, `ADDR_CHANGE`, multicast, an
    /// event type this binding does not know).
    Ignored,
}

/// The `FI_*` code of an error event's status (a negative errno, or a transport's
/// reason), `default` when the status says nothing more precise.
fn errno_of(status: c_int, default: Errno) -> Errno {
    match status.checked_abs().unwrap_or(0) {
        libc::ETIMEDOUT => Errno::ETIMEDOUT,
        libc::ECONNREFUSED => Errno::ECONNREFUSED,
        libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EADDRNOTAVAIL => Errno::EHOSTUNREACH,
        libc::ENODEV => Errno::ENODEV,
        _ => default,
    }
}

/// Frames application data for the wire: one length byte, then the bytes.
fn frame(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(u8::try_from(data.len()).unwrap_or(u8::MAX));
    v.extend_from_slice(&data[..data.len().min(u8::MAX as usize)]);
    v
}

/// The application data of a frame; none when the frame is empty or claims more than
/// arrived.
fn unframe(raw: &[u8]) -> Vec<u8> {
    match raw.split_first() {
        Some((&n, rest)) => rest.get(..n as usize).map_or_else(Vec::new, <[u8]>::to_vec),
        None => Vec::new(),
    }
}

/// The framed private data of `conn`, at most `max` bytes of it read.
///
/// # Safety
/// `conn.private_data` is null or valid for `conn.private_data_len` bytes.
unsafe fn private_data(conn: &RdmaConnParam, max: usize) -> Vec<u8> {
    if conn.private_data.is_null() {
        return Vec::new();
    }
    let n = (conn.private_data_len as usize).min(max);
    // SAFETY: the caller guarantees `private_data_len` readable bytes; `n` is no more.
    let raw = unsafe { std::slice::from_raw_parts(conn.private_data.cast::<u8>(), n) };
    unframe(raw)
}

/// A socket address stored in a `sockaddr_storage`; `None` for other families.
pub(crate) fn from_storage(s: &sockaddr_storage) -> Option<SocketAddr> {
    let p: *const sockaddr_storage = s;
    match c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: an AF_INET storage holds a sockaddr_in at its start; the storage
            // is larger and suitably aligned.
            let a = unsafe { p.cast::<sockaddr_in>().read() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { p.cast::<sockaddr_in6>().read() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `a` as a `sockaddr_storage`.
pub(crate) fn to_storage(a: &SocketAddr) -> sockaddr_storage {
    // SAFETY: all-zero bytes are a valid (unspecified) sockaddr_storage.
    let mut s: sockaddr_storage = unsafe { std::mem::zeroed() };
    let p: *mut sockaddr_storage = &mut s;
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in.
            let mut sin: sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            // SAFETY: the storage is larger than, and aligned for, a sockaddr_in.
            unsafe { p.cast::<sockaddr_in>().write(sin) };
        }
        SocketAddr::V6(v6) => {
            // SAFETY: all-zero bytes are a valid sockaddr_in6.
            let mut sin6: sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_scope_id = v6.scope_id();
            // SAFETY: as above, for sockaddr_in6.
            unsafe { p.cast::<sockaddr_in6>().write(sin6) };
        }
    }
    s
}

/// The other side of `id` as its route names it, with `conn`'s queue pair number and
/// private data (at most `max` bytes read).
///
/// # Safety
/// `id` is null or a valid `rdma_cm_id`; `conn` as for [`private_data`].
unsafe fn peer_of(id: *const RdmaCmId, conn: &RdmaConnParam, max: usize) -> CmPeer {
    // SAFETY: the caller guarantees the data pointer.
    let private_data = unsafe { private_data(conn, max) };
    let (gid, source) = if id.is_null() {
        (Gid([0; 16]), None)
    } else {
        // SAFETY: a valid id (caller); its route is plain data librdmacm filled.
        let addr = unsafe { &(*id).route.addr };
        (Gid(addr.ibaddr.dgid.raw), from_storage(&addr.dst_storage))
    };
    CmPeer {
        gid,
        qpn: conn.qp_num,
        private_data,
        source,
    }
}

/// What `ev` means: the pure translation of an rdma_cm event (its type, status, the
/// id's route and the connection parameters) to the channel's step.
///
/// # Safety
/// `ev.id` is null or a valid `rdma_cm_id`; for connection events
/// `ev.param.conn.private_data` is null or valid for `private_data_len` bytes (as
/// librdmacm guarantees until the event is acknowledged).
pub unsafe fn translate(ev: &RdmaCmEvent) -> CmStep {
    // SAFETY: every member of the union is plain data; `conn` is the one connection
    // events fill, and its pointer is only followed under the caller's guarantee.
    let conn = unsafe { ev.param.conn };
    // SAFETY: the caller's guarantees (the id valid or null, the data pointer valid
    // for its length or null), passed on.
    let peer = |max| unsafe { peer_of(ev.id, &conn, max) };
    match ev.event {
        ADDR_RESOLVED => CmStep::AddrResolved,
        ROUTE_RESOLVED => CmStep::RouteResolved,
        CONNECT_REQUEST => CmStep::ConnectRequest(peer(CONNECT_PRIVATE_MAX)),
        CONNECT_RESPONSE => CmStep::ConnectResponse(peer(ACCEPT_PRIVATE_MAX)),
        ESTABLISHED => CmStep::Established(peer(ACCEPT_PRIVATE_MAX)),
        REJECTED => CmStep::Rejected(peer(ACCEPT_PRIVATE_MAX).private_data),
        DISCONNECTED => CmStep::Disconnected,
        ADDR_ERROR | ROUTE_ERROR | UNREACHABLE => {
            CmStep::Failed(errno_of(ev.status, Errno::EHOSTUNREACH))
        }
        CONNECT_ERROR => CmStep::Failed(errno_of(ev.status, Errno::ECONNREFUSED)),
        DEVICE_REMOVAL => CmStep::Failed(Errno::ENODEV),
        _ => CmStep::Ignored,
    }
}

/// The error of a failed librdmacm call (which sets errno).
fn os_error(what: impl std::fmt::Display) -> Error {
    Error::from(std::io::Error::last_os_error()).context(what)
}

/// Where an id is in the exchange.
enum Role {
    Listener,
    /// Resolving, or request sent: the framed data to send and the queue pair.
    Connecting {
        data: Vec<u8>,
        qp: Arc<SysQp>,
    },
    /// A request that arrived, not yet answered.
    Requested {
        peer: CmPeer,
    },
    /// Accepted, waiting for `ESTABLISHED`.
    Accepted {
        peer: CmPeer,
        _qp: Arc<SysQp>,
    },
    /// Connected.
    Established {
        _qp: Arc<SysQp>,
    },
}

struct Id {
    ptr: *mut RdmaCmId,
    role: Role,
}

#[derive(Default)]
struct Inner {
    ids: HashMap<u64, Id>,
    by_ptr: HashMap<usize, u64>,
    events: VecDeque<CmEvent>,
    next_id: u64,
}

impl Inner {
    fn add(&mut self, ptr: *mut RdmaCmId, role: Role) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.by_ptr.insert(ptr as usize, id);
        self.ids.insert(id, Id { ptr, role });
        id
    }

    fn remove(&mut self, id: u64) -> Option<Id> {
        let c = self.ids.remove(&id)?;
        self.by_ptr.remove(&(c.ptr as usize));
        Some(c)
    }
}

/// librdmacm's event channel and its ids.
pub(crate) struct RdmaCmChannel {
    lib: &'static RdmaCm,
    ch: *mut RdmaEventChannel,
    fd: RawFd,
    inner: Mutex<Inner>,
}

// SAFETY: librdmacm's calls are thread-safe; the channel and id pointers are used only
// under `inner`'s lock (or in drop) and freed only in drop or when removed from it.
unsafe impl Send for RdmaCmChannel {}
// SAFETY: as above.
unsafe impl Sync for RdmaCmChannel {}

/// The name of the device `id` is bound to (after address resolution or on a request).
///
/// # Safety
/// `id` is a valid `rdma_cm_id`.
unsafe fn id_device(id: *const RdmaCmId) -> Option<String> {
    // SAFETY: a valid id; `verbs` and its device are null or live as long as the id.
    unsafe {
        let ctx = (*id).verbs;
        if ctx.is_null() || (*ctx).device.is_null() {
            return None;
        }
        let name = &(*(*ctx).device).name;
        let bytes: Vec<u8> = name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl RdmaCmChannel {
    /// Loads librdmacm and opens an event channel; the error is one line.
    pub(crate) fn new() -> Result<RdmaCmChannel> {
        let lib = crate::sys::rdmacm::rdmacm().map_err(|why| Error::new(Errno::ENODEV, why))?;
        // SAFETY: librdmacm's documented call.
        let ch = unsafe { (lib.create_event_channel)() };
        if ch.is_null() {
            let os = std::io::Error::last_os_error();
            return Err(Error::new(
                Errno::ENODEV,
                format!(
                    "rdma_cm: no event channel ({os}): the kernel's connection manager \
                     (/dev/infiniband/rdma_cm, module rdma_ucm) or an RDMA device is missing"
                ),
            ));
        }
        // SAFETY: the channel just created.
        let fd = unsafe { (*ch).fd };
        crate::sys::objects::set_nonblocking(fd);
        Ok(RdmaCmChannel {
            lib,
            ch,
            fd,
            inner: Mutex::new(Inner::default()),
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    fn create_id(&self) -> Result<*mut RdmaCmId> {
        let mut id = std::ptr::null_mut();
        // SAFETY: our channel; `id` receives the new id.
        let rc =
            unsafe { (self.lib.create_id)(self.ch, &mut id, std::ptr::null_mut(), RDMA_PS_TCP) };
        if rc != 0 || id.is_null() {
            return Err(os_error("rdma_create_id"));
        }
        Ok(id)
    }

    fn destroy_id(&self, id: *mut RdmaCmId) {
        // SAFETY: an id of this channel, removed from its tables, every event naming
        // it acknowledged; destroyed once.
        unsafe { (self.lib.destroy_id)(id) };
    }

    pub(crate) fn listen(&self, addr: SocketAddr) -> Result<(u64, SocketAddr)> {
        // Held from the start: a request must not be taken from the channel (by another
        // thread's get_event) before its listener is known.
        let mut g = lock(&self.inner);
        let id = self.create_id()?;
        let mut sa = to_storage(&addr);
        // SAFETY: our id; a socket address of its family.
        let mut rc = unsafe {
            (self.lib.bind_addr)(id, (&mut sa as *mut sockaddr_storage).cast::<sockaddr>())
        };
        if rc == 0 {
            // SAFETY: our bound id.
            rc = unsafe { (self.lib.listen)(id, BACKLOG) };
        }
        if rc != 0 {
            let e = os_error(format!("rdma listen at {addr}"));
            self.destroy_id(id);
            return Err(e);
        }
        // SAFETY: our id; librdmacm filled the bound address.
        let at = from_storage(unsafe { &(*id).route.addr.src_storage }).unwrap_or(addr);
        Ok((g.add(id, Role::Listener), at))
    }

    pub(crate) fn close_listener(&self, id: u64) {
        let mut g = lock(&self.inner);
        if matches!(
            g.ids.get(&id),
            Some(Id {
                role: Role::Listener,
                ..
            })
        ) {
            if let Some(c) = g.remove(id) {
                self.destroy_id(c.ptr);
            }
        }
    }

    pub(crate) fn connect(&self, dst: SocketAddr, data: &[u8], qp: &QueuePair) -> Result<u64> {
        check_private_data("connect", data, HW_CONNECT_PRIVATE_MAX)?;
        let qp = qp.sys().ok_or_else(mixed)?.clone();
        // Held from the start: the resolution's event must not be taken (by another
        // thread's get_event) before the id is known.
        let mut g = lock(&self.inner);
        let id = self.create_id()?;
        let mut sa = to_storage(&dst);
        // SAFETY: our id; a socket address of its family; no source address.
        let rc = unsafe {
            (self.lib.resolve_addr)(
                id,
                std::ptr::null_mut(),
                (&mut sa as *mut sockaddr_storage).cast::<sockaddr>(),
                RESOLVE_TIMEOUT_MS,
            )
        };
        if rc != 0 {
            let e = os_error(format!("rdma_resolve_addr to {dst}"));
            self.destroy_id(id);
            return Err(e);
        }
        let data = frame(data);
        Ok(g.add(id, Role::Connecting { data, qp }))
    }

    /// Moves `qp` to `state` with the attributes rdma_cm computes for `id`'s route.
    fn move_qp(&self, id: *mut RdmaCmId, qp: &SysQp, state: QpState) -> Result<()> {
        let mut attr = IbvQpAttr {
            qp_state: state as u32,
            ..IbvQpAttr::default()
        };
        let mut mask: c_int = 0;
        // SAFETY: our id; librdmacm fills the attribute struct and mask.
        let rc = unsafe { (self.lib.init_qp_attr)(id, &mut attr, &mut mask) };
        if rc != 0 {
            return Err(os_error(format!("rdma_init_qp_attr ({state:?})")));
        }
        qp.modify_raw(&mut attr, mask)
    }

    /// Checks that `id` is on the device of `qp`.
    fn same_device(id: *mut RdmaCmId, qp: &SysQp) -> Result<()> {
        // SAFETY: our id.
        let dev = unsafe { id_device(id) }.unwrap_or_default();
        if dev != qp.device_name() {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "the route goes through device {dev:?}, the queue pair is on {:?}",
                    qp.device_name()
                ),
            ));
        }
        Ok(())
    }

    fn conn_param(data: &[u8], qp: &SysQp) -> RdmaConnParam {
        RdmaConnParam {
            private_data: data.as_ptr().cast::<c_void>(),
            private_data_len: u8::try_from(data.len()).unwrap_or(u8::MAX),
            responder_resources: RDMA_MAX_RD_ATOMIC,
            initiator_depth: RDMA_MAX_RD_ATOMIC,
            flow_control: 1,
            retry_count: RETRIES,
            rnr_retry_count: RETRIES,
            srq: u8::from(qp.has_srq()),
            qp_num: qp.qp_num(),
        }
    }

    pub(crate) fn accept(&self, id: u64, data: &[u8], qp: &QueuePair) -> Result<()> {
        check_private_data("accept", data, HW_ACCEPT_PRIVATE_MAX)?;
        let qp = qp.sys().ok_or_else(mixed)?.clone();
        let mut g = lock(&self.inner);
        let c = g
            .ids
            .get_mut(&id)
            .ok_or_else(|| Error::new(Errno::ENOENT, "no such connection"))?;
        let Role::Requested { peer } = &c.role else {
            return Err(Error::new(Errno::EINVAL, "no request to answer"));
        };
        Self::same_device(c.ptr, &qp)?;
        for state in [QpState::Init, QpState::Rtr, QpState::Rts] {
            self.move_qp(c.ptr, &qp, state)?;
        }
        let framed = frame(data);
        let mut param = Self::conn_param(&framed, &qp);
        // SAFETY: our id with a request; the parameters point at `framed`, alive
        // through the call.
        if unsafe { (self.lib.accept)(c.ptr, &mut param) } != 0 {
            return Err(os_error("rdma_accept"));
        }
        c.role = Role::Accepted {
            peer: peer.clone(),
            _qp: qp,
        };
        Ok(())
    }

    pub(crate) fn reject(&self, id: u64, data: &[u8]) -> Result<()> {
        check_private_data("reject", data, HW_ACCEPT_PRIVATE_MAX)?;
        let mut g = lock(&self.inner);
        match g.ids.get(&id) {
            None => return Err(Error::new(Errno::ENOENT, "no such connection")),
            Some(Id {
                role: Role::Requested { .. },
                ..
            }) => {}
            Some(_) => return Err(Error::new(Errno::EINVAL, "no request to answer")),
        }
        let Some(c) = g.remove(id) else {
            return Err(Error::new(Errno::ENOENT, "no such connection"));
        };
        let framed = frame(data);
        // SAFETY: our id with a request; the data is `framed`, alive through the call.
        let rc = unsafe {
            (self.lib.reject)(
                c.ptr,
                framed.as_ptr().cast::<c_void>(),
                u8::try_from(framed.len()).unwrap_or(u8::MAX),
            )
        };
        let result = if rc != 0 {
            Err(os_error("rdma_reject"))
        } else {
            Ok(())
        };
        self.destroy_id(c.ptr);
        result
    }

    pub(crate) fn disconnect(&self, id: u64) -> Result<()> {
        let mut g = lock(&self.inner);
        let c = g
            .remove(id)
            .ok_or_else(|| Error::new(Errno::ENOENT, "no such connection"))?;
        if !matches!(c.role, Role::Listener | Role::Requested { .. }) {
            // SAFETY: our id; a failure (never connected) changes nothing.
            unsafe { (self.lib.disconnect)(c.ptr) };
        }
        self.destroy_id(c.ptr);
        Ok(())
    }

    pub(crate) fn get_event(&self) -> Option<CmEvent> {
        let mut g = lock(&self.inner);
        for _ in 0..EVENTS_PER_CALL {
            if !g.events.is_empty() {
                break;
            }
            let mut ev = std::ptr::null_mut();
            // SAFETY: our (non-blocking) channel; `ev` receives an event.
            if unsafe { (self.lib.get_cm_event)(self.ch, &mut ev) } != 0 || ev.is_null() {
                break;
            }
            // SAFETY: librdmacm's event, valid (with its id and data) until acknowledged.
            let (step, ptr, listen) = unsafe { (translate(&*ev), (*ev).id, (*ev).listen_id) };
            let doomed = self.handle(&mut g, ptr, listen, step);
            // SAFETY: the event taken above, acknowledged once.
            unsafe { (self.lib.ack_cm_event)(ev) };
            if let Some(p) = doomed {
                self.destroy_id(p);
            }
        }
        g.events.pop_front()
    }

    /// Acts on one event of id `ptr`; returns an id to destroy once the event is
    /// acknowledged.
    fn handle(
        &self,
        g: &mut Inner,
        ptr: *mut RdmaCmId,
        listen: *mut RdmaCmId,
        step: CmStep,
    ) -> Option<*mut RdmaCmId> {
        if let CmStep::ConnectRequest(peer) = step {
            let listener = g.by_ptr.get(&(listen as usize)).copied().filter(|l| {
                matches!(
                    g.ids.get(l),
                    Some(Id {
                        role: Role::Listener,
                        ..
                    })
                )
            });
            let Some(listener) = listener else {
                // A listener closed meanwhile: refuse, and drop the new id.
                // SAFETY: the request's id, valid until destroyed after the ack.
                unsafe { (self.lib.reject)(ptr, std::ptr::null(), 0) };
                return Some(ptr);
            };
            let id = g.add(ptr, Role::Requested { peer: peer.clone() });
            g.events.push_back(CmEvent {
                id,
                kind: CmEventKind::ConnectRequest { listener, peer },
            });
            return None;
        }
        let id = *g.by_ptr.get(&(ptr as usize))?;
        let c = g.ids.get_mut(&id)?;
        // What to report, and whether the connection ends with it.
        let (kind, ends) = match (step, &c.role) {
            (CmStep::AddrResolved, Role::Connecting { qp, .. }) => {
                let r = Self::same_device(ptr, qp).and_then(|()| {
                    // SAFETY: our id, its address resolved.
                    match unsafe { (self.lib.resolve_route)(ptr, RESOLVE_TIMEOUT_MS) } {
                        0 => Ok(()),
                        _ => Err(os_error("rdma_resolve_route")),
                    }
                });
                match r {
                    Ok(()) => return None,
                    Err(e) => (CmEventKind::Failed { err: e.code() }, true),
                }
            }
            (CmStep::RouteResolved, Role::Connecting { data, qp }) => {
                let r = self.move_qp(ptr, qp, QpState::Init).and_then(|()| {
                    let mut param = Self::conn_param(data, qp);
                    // SAFETY: our id, its route resolved; the parameters point at
                    // `data`, alive through the call.
                    match unsafe { (self.lib.connect)(ptr, &mut param) } {
                        0 => Ok(()),
                        _ => Err(os_error("rdma_connect")),
                    }
                });
                match r {
                    Ok(()) => return None,
                    Err(e) => (CmEventKind::Failed { err: e.code() }, true),
                }
            }
            (CmStep::ConnectResponse(peer), Role::Connecting { qp, .. }) => {
                let qp = qp.clone();
                let r = self
                    .move_qp(ptr, &qp, QpState::Rtr)
                    .and_then(|()| self.move_qp(ptr, &qp, QpState::Rts))
                    .and_then(|()| {
                        // SAFETY: our id, answered; the queue pair is in RTS.
                        match unsafe { (self.lib.establish)(ptr) } {
                            0 => Ok(()),
                            _ => Err(os_error("rdma_establish")),
                        }
                    });
                match r {
                    Ok(()) => {
                        c.role = Role::Established { _qp: qp };
                        (CmEventKind::Established { peer }, false)
                    }
                    Err(e) => {
                        // SAFETY: our id; tells the acceptor (best effort).
                        unsafe { (self.lib.reject)(ptr, std::ptr::null(), 0) };
                        (CmEventKind::Failed { err: e.code() }, true)
                    }
                }
            }
            (CmStep::Established(peer), Role::Connecting { qp, .. }) => {
                // A transport whose kernel side finishes the exchange itself.
                c.role = Role::Established { _qp: qp.clone() };
                (CmEventKind::Established { peer }, false)
            }
            (CmStep::Established(_), Role::Accepted { peer, _qp }) => {
                let peer = peer.clone();
                c.role = Role::Established { _qp: _qp.clone() };
                (CmEventKind::Established { peer }, false)
            }
            (CmStep::Rejected(private_data), Role::Connecting { .. }) => {
                (CmEventKind::Rejected { private_data }, true)
            }
            // The connector refused the answer (its queue pair could not follow).
            (CmStep::Rejected(_), Role::Accepted { .. }) => (
                CmEventKind::Failed {
                    err: Errno::ECONNREFUSED,
                },
                true,
            ),
            // A listener's device went away or the like: no connection to tell.
            (CmStep::Failed(_) | CmStep::Disconnected, Role::Listener) => return None,
            (CmStep::Failed(err), _) => (CmEventKind::Failed { err }, true),
            (CmStep::Disconnected, _) => (CmEventKind::Disconnected, true),
            _ => return None,
        };
        g.events.push_back(CmEvent { id, kind });
        if !ends {
            return None;
        }
        // The connection ends here: its id is destroyed after the ack.
        g.remove(id);
        Some(ptr)
    }
}

impl Drop for RdmaCmChannel {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, c) in g.ids.drain() {
            // SAFETY: an id of this channel, every event acknowledged; destroyed once.
            unsafe { (self.lib.destroy_id)(c.ptr) };
        }
        // SAFETY: our channel, its ids destroyed above; destroyed once.
        unsafe { (self.lib.destroy_event_channel)(self.ch) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_lies_read_as_nothing() {
        assert_eq!(unframe(&frame(b"hello")), b"hello");
        assert_eq!(unframe(&frame(&[])), b"");
        // Padding after the frame (InfiniBand's) is not data.
        let mut padded = frame(b"ab");
        padded.resize(56, 0);
        assert_eq!(unframe(&padded), b"ab");
        // A length beyond what arrived, or nothing at all.
        assert!(unframe(&[9, 1, 2]).is_empty());
        assert!(unframe(&[]).is_empty());
    }

    #[test]
    fn socket_addresses_round_trip_through_storage() {
        for a in ["10.1.2.3:4791", "[fe80::1]:7471", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(from_storage(&to_storage(&a)), Some(a));
        }
        // SAFETY: all-zero bytes are a valid storage (family 0: unknown).
        let unknown: sockaddr_storage = unsafe { std::mem::zeroed() };
        assert_eq!(from_storage(&unknown), None);
    }
}
