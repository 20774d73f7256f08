//! The fabric, the domain and the passive endpoint.
//!
//! - [`Fabric`] owns the connection-management progress engine (every EQ read or wait
//!   drives it; with `FI_PROGRESS_AUTO` control progress — the default — its own thread
//!   does too). It drives passive endpoints and connection setup only, never the data
//!   path of connected endpoints. It also owns the table
//!   of connection requests that have arrived but were not yet accepted or rejected
//!   (the `handle` of an `FI_CONNREQ` info is a key of that table).
//! - [`Domain`] owns the data progress engine (manual, or with kit's thread for
//!   `FI_PROGRESS_AUTO`) and the MR table; it opens endpoints, CQs, counters and MRs.
//! - [`PassiveEp`] listens; its progress accepts sockets, reads each connection
//!   request (bounded, nonblocking) and reports it on the EQ. A peer that sends
//!   anything but a well-formed request is dropped (logged), never a panic.
//!
//! Nothing here panics.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::AtomicAttr;
use ofi_core::attr::Info;
use ofi_core::mr::MrAttr;
use ofi_core::provider::{DomainOps, FabricOps, PassiveEndpointOps, Unsupported};
use ofi_core::{AddrFormat, Address, AtomicOp, Datatype, EpType, Errno, Error, Result};
use ofi_kit::cm::{PepBase, PepListener};
use ofi_kit::eq::KitEq;
use ofi_kit::mr::{KitMr, MrConfig, MrTable};
use ofi_kit::progress::{FdInterest, Progress, ProgressEngine, ProgressMode};

use crate::ep::Endpoint;
use crate::proto::{CmHdr, CmKind, CM_DATA_SIZE, CM_HDR_LEN};
use crate::sock::Sock;
use crate::{Settings, NAME};

/// The listen backlog of a passive endpoint until `fi_control(FI_BACKLOG)` sets another.
pub const BACKLOG: i32 = 128;
/// A connection request that has not arrived whole within this time is dropped.
pub const CONNREQ_TIMEOUT: Duration = Duration::from_secs(5);
/// `FI_OPT_ENDPOINT` (level).
pub const OPT_ENDPOINT: i32 = 0;
/// `FI_EINVAL` for `what` (the CM data of `fi_connect`, `fi_accept` or `fi_reject`)
/// longer than tcp carries.
pub(crate) fn check_cm_data(what: &str, param: &[u8]) -> Result<()> {
    if param.len() > CM_DATA_SIZE {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{NAME}: {what} of {} bytes (at most {CM_DATA_SIZE})",
                param.len()
            ),
        ));
    }
    Ok(())
}

/// `FI_OPT_CM_DATA_SIZE` (option name).
pub const OPT_CM_DATA_SIZE: i32 = 1;

pub(crate) use ofi_kit::wait::lock;

/// An accepted socket whose connection request was read and reported, waiting for
/// `fi_accept` (through an endpoint opened with its info) or `fi_reject`.
#[derive(Debug)]
pub(crate) struct PendingConn {
    pub(crate) sock: Sock,
    pub(crate) peer: SocketAddr,
}

/// What the fabric's objects share.
#[derive(Debug)]
pub(crate) struct FabricShared {
    pub(crate) settings: Settings,
    pub(crate) cm_engine: Arc<ProgressEngine>,
    pending: Mutex<HashMap<usize, PendingConn>>,
    next_handle: AtomicUsize,
}

impl FabricShared {
    fn add_pending(&self, c: PendingConn) -> usize {
        let h = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.pending).insert(h, c);
        h
    }

    pub(crate) fn take_pending(&self, handle: usize) -> Option<PendingConn> {
        lock(&self.pending).remove(&handle)
    }

    /// The source address for a socket of `family` (v6 or not): the `FI_TCP_IFACE`
    /// interface's address; `Ok(None)` when the parameter is not set.
    ///
    /// # Errors
    /// `FI_ENODATA` naming the interface when there is none of that name, or it has no
    /// address of the family.
    pub(crate) fn iface_addr(&self, v6: bool) -> Result<Option<IpAddr>> {
        let Some(name) = self.settings.iface.as_deref() else {
            return Ok(None);
        };
        match usable_iface_addr(name, v6) {
            Some(ip) => Ok(Some(ip)),
            None => Err(Error::new(
                Errno::ENODATA,
                format!(
                    "FI_TCP_IFACE={name}: no network interface of that name with an {} address",
                    if v6 { "IPv6" } else { "IPv4" }
                ),
            )),
        }
    }

    /// The address a peer reaches a socket bound to `local` at: `local`, or for the
    /// wildcard address `FI_TCP_IFACE`'s address, else the first up non-loopback
    /// interface's (loopback only without one), with the bound port.
    pub(crate) fn reachable(&self, local: SocketAddr) -> Result<SocketAddr> {
        if !local.ip().is_unspecified() {
            return Ok(local);
        }
        let v6 = local.is_ipv6();
        let ip = match self.iface_addr(v6)? {
            Some(ip) => ip,
            None => reachable_default(v6),
        };
        Ok(SocketAddr::new(ip, local.port()))
    }
}

/// `FI_TCP_IFACE`'s address of family `v6`; for IPv6, where the interface has none
/// but a link-local one (unusable without its scope, as on a veth pair), the IPv4-mapped
/// form of its IPv4 address ([`mapped_v4`]).
fn usable_iface_addr(name: &str, v6: bool) -> Option<IpAddr> {
    let found = crate::sock::iface_addr(name, v6);
    if v6 && found.as_ref().is_none_or(ofi_kit::netif::link_local) {
        return mapped_v4(crate::sock::iface_addr(name, false)).or(found);
    }
    found
}

/// The address a wildcard listener of family `v6` is reached at when no interface is
/// named: the first up non-loopback address of the family; for IPv6 on a host with no
/// global IPv6 address (link-local only, as two namespaces joined by a veth pair are),
/// the IPv4-mapped form of its IPv4 address ([`mapped_v4`]) — `::1` would send every
/// other host to itself.
fn reachable_default(v6: bool) -> IpAddr {
    let ip = ofi_kit::netif::default_ip(v6);
    if v6 && ip.is_loopback() {
        return mapped_v4(Some(ofi_kit::netif::default_ip(false))).unwrap_or(ip);
    }
    ip
}

/// The IPv4-mapped IPv6 form of a non-loopback IPv4 address: what an IPv6 endpoint is
/// named by when its host offers no usable IPv6 address. tcp sockets are dual-stack
/// (not `IPV6_V6ONLY`), so a listener bound to `::` or to the mapped address accepts it.
fn mapped_v4(ip: Option<IpAddr>) -> Option<IpAddr> {
    match ip {
        Some(IpAddr::V4(v4)) if !v4.is_loopback() => Some(IpAddr::V6(v4.to_ipv6_mapped())),
        _ => None,
    }
}

/// A fabric.
#[derive(Debug)]
pub struct Fabric {
    shared: Arc<FabricShared>,
}

impl Fabric {
    /// Open the fabric.
    ///
    /// # Errors
    /// `FI_EINVAL` when `info` names another fabric.
    pub fn open(settings: Settings, info: &Info) -> Result<Fabric> {
        ofi_kit::fabric::check_fabric_name(NAME, info, |name| name.eq_ignore_ascii_case(NAME))?;
        Ok(Fabric {
            shared: Arc::new(FabricShared {
                settings,
                cm_engine: Arc::new(ProgressEngine::new(ProgressMode::from(
                    info.domain_attr.control_progress,
                ))?),
                pending: Mutex::new(HashMap::new()),
                next_handle: AtomicUsize::new(1),
            }),
        })
    }
}

impl FabricOps for Fabric {
    type Domain = Domain;
    type PassiveEp = PassiveEp;
    ofi_kit::kit_fabric_ops!(eq_progress = |f| f.shared.cm_engine.clone());

    fn domain(&self, info: &Info, _context: usize) -> Result<Domain> {
        ofi_kit::fabric::check_domain_name(NAME, info, |name| name.eq_ignore_ascii_case(NAME))?;
        ofi_kit::fabric::check_ep_type(NAME, info, EpType::Msg)?;
        let engine = ProgressEngine::for_domain(info)?;
        let mr = MrTable::new(MrConfig {
            mode: info.domain_attr.mr_mode
                & (ofi_core::MrMode::PROV_KEY
                    | ofi_core::MrMode::VIRT_ADDR
                    | ofi_core::MrMode::ALLOCATED),
            key_size: 8,
            iov_limit: 1,
        })?;
        Ok(Domain {
            shared: Arc::new(DomainShared {
                fabric: self.shared.clone(),
                engine,
                mr,
                next_ep: AtomicU64::new(1),
                atomic_locks: ofi_kit::atomic::AtomicLocks::new(),
            }),
        })
    }

    fn passive_ep(&self, info: &Info, context: usize) -> Result<PassiveEp> {
        PassiveEp::open(self.shared.clone(), info, context)
    }
}

/// What a domain's objects share.
#[derive(Debug)]
pub(crate) struct DomainShared {
    pub(crate) fabric: Arc<FabricShared>,
    pub(crate) engine: Arc<ProgressEngine>,
    pub(crate) mr: Arc<MrTable>,
    pub(crate) next_ep: AtomicU64,
    /// Serialises atomics on overlapping target bytes.
    pub(crate) atomic_locks: ofi_kit::atomic::AtomicLocks,
}

/// A domain.
#[derive(Debug)]
pub struct Domain {
    shared: Arc<DomainShared>,
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    ofi_kit::kit_domain_cq_cntr_ops!(|d| d.shared.engine.clone());
    type Av = Unsupported;
    type Mr = KitMr;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        Endpoint::open(self.shared.clone(), info, context)
    }

    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.shared.mr.register(attr, flags)
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        let max_bytes = self.shared.fabric.settings.max_msg_size;
        ofi_kit::atomic::query_within(op, datatype, flags, max_bytes)
    }
}

/// A connection being read by a passive endpoint.
#[derive(Debug)]
struct Incoming {
    sock: Sock,
    peer: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

/// A passive endpoint's listener: its socket and the connections being read.
#[derive(Debug)]
struct PepState {
    sock: Sock,
    listening: bool,
    /// The listen backlog (`FI_BACKLOG`; [`BACKLOG`] until set).
    backlog: i32,
    incoming: Vec<Incoming>,
}

impl PepListener for PepState {
    fn is_listening(&self) -> bool {
        self.listening
    }
}

/// The shared part of a passive endpoint (registered with the fabric's CM engine).
#[derive(Debug)]
pub(crate) struct PepInner {
    fabric: Arc<FabricShared>,
    base: PepBase<PepState>,
}

/// A passive endpoint.
#[derive(Debug)]
pub struct PassiveEp {
    inner: Arc<PepInner>,
}

/// The address to bind for `info`: its `src_addr` if it is an IP address, else the
/// wildcard of its format's family (with `FI_TCP_IFACE`, that interface's address).
pub(crate) fn bind_addr(fabric: &FabricShared, info: &Info) -> Result<SocketAddr> {
    let src = info.src_addr.as_ref().and_then(Address::socket_addr);
    let v6 = match (&src, info.addr_format) {
        (Some(a), _) => a.is_ipv6(),
        (None, f) => f == AddrFormat::SOCKADDR_IN6,
    };
    let mut a = src.unwrap_or(if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    });
    if a.ip().is_unspecified() {
        if let Some(ip) = fabric.iface_addr(v6)? {
            a.set_ip(ip);
        }
    }
    Ok(a)
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::new(
        Errno(crate::sock::os_code(&e)),
        format!("{NAME}: {what}: {e}"),
    )
}

impl PassiveEp {
    fn open(fabric: Arc<FabricShared>, info: &Info, context: usize) -> Result<PassiveEp> {
        let addr = bind_addr(&fabric, info)?;
        let sock = Sock::stream(&addr).map_err(|e| io_err("socket", e))?;
        sock.set_reuseaddr()
            .map_err(|e| io_err("SO_REUSEADDR", e))?;
        sock.bind(&addr)
            .map_err(|e| io_err(&format!("bind {addr}"), e))?;
        let listener = PepState {
            sock,
            listening: false,
            backlog: BACKLOG,
            incoming: Vec::new(),
        };
        let inner = Arc::new(PepInner {
            fabric: fabric.clone(),
            base: PepBase::open(NAME, info, context, listener)?,
        });
        fabric.cm_engine.register(&inner);
        Ok(PassiveEp { inner })
    }
}

/// Warnings about bad connection requests: at most 5 per peer address per 10 s.
fn bad_request_log() -> &'static ofi_kit::diag::RateLimit<IpAddr> {
    static LOG: std::sync::OnceLock<ofi_kit::diag::RateLimit<IpAddr>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| ofi_kit::diag::RateLimit::new(5, Duration::from_secs(10), 1024))
}

impl PepInner {
    /// Read what one incoming connection has sent; `Some(true)` when its request is
    /// complete, `Some(false)` to keep waiting, `None` to drop it.
    fn read_req(c: &mut Incoming) -> Option<bool> {
        let mut tmp = [0u8; CM_HDR_LEN + CM_DATA_SIZE];
        loop {
            let need = if c.buf.len() < CM_HDR_LEN {
                CM_HDR_LEN
            } else {
                match CmHdr::parse(&c.buf) {
                    Ok(h) if h.kind == CmKind::ConnReq => CM_HDR_LEN + usize::from(h.data_len),
                    Ok(h) => {
                        if let Some(n) = bad_request_log().admit(&c.peer.ip(), Instant::now()) {
                            ofi_core::ofi_warn!(
                                NAME,
                                "ep_ctrl",
                                "{}: unexpected CM message {:?}{}",
                                c.peer,
                                h.kind,
                                ofi_kit::diag::suppressed_note(n)
                            );
                        }
                        return None;
                    }
                    Err(e) => {
                        if let Some(n) = bad_request_log().admit(&c.peer.ip(), Instant::now()) {
                            ofi_core::ofi_warn!(
                                NAME,
                                "ep_ctrl",
                                "{}: bad connection request: {e}{}",
                                c.peer,
                                ofi_kit::diag::suppressed_note(n)
                            );
                        }
                        return None;
                    }
                }
            };
            if c.buf.len() >= need {
                return Some(true);
            }
            let want = need - c.buf.len();
            match c.sock.recv(&mut tmp[..want]) {
                Ok(0) => return None,
                Ok(n) => c.buf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

impl Progress for PepInner {
    fn progress(&self) -> usize {
        let Some(mut state) = self.base.try_listener() else {
            return 0;
        };
        if !state.listening {
            return 0;
        }
        let mut work = 0;
        for _ in 0..16 {
            match state.sock.accept() {
                Ok(Some((sock, peer))) => {
                    let _ = sock.set_nodelay();
                    state.incoming.push(Incoming {
                        sock,
                        peer,
                        buf: Vec::new(),
                        since: Instant::now(),
                    });
                    work += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    ofi_core::ofi_warn!(NAME, "ep_ctrl", "accept: {e}");
                    break;
                }
            }
        }
        let mut i = 0;
        while i < state.incoming.len() {
            let done = PepInner::read_req(&mut state.incoming[i]);
            match done {
                Some(false) if state.incoming[i].since.elapsed() < CONNREQ_TIMEOUT => i += 1,
                Some(true) => {
                    let c = state.incoming.swap_remove(i);
                    work += 1;
                    let data = c.buf[CM_HDR_LEN..].to_vec();
                    let local = c.sock.local_addr().ok();
                    let peer = c.peer;
                    let handle = self.fabric.add_pending(PendingConn { sock: c.sock, peer });
                    let addrs = |info: &mut Info| {
                        info.dest_addr = Some(Address::from(peer));
                        if let Some(l) = local {
                            info.src_addr = Some(Address::from(l));
                        }
                        info.addr_format = if peer.is_ipv6() {
                            AddrFormat::SOCKADDR_IN6
                        } else {
                            AddrFormat::SOCKADDR_IN
                        };
                    };
                    if !self.base.report_request(handle, addrs, data) {
                        drop(self.fabric.take_pending(handle));
                    }
                }
                _ => {
                    // Dropped: malformed, closed, or too slow.
                    state.incoming.swap_remove(i);
                    work += 1;
                }
            }
        }
        work
    }

    /// Listening: the listening socket and every accepted socket whose request has not
    /// all arrived.
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        let Some(state) = self.base.try_listener() else {
            return false;
        };
        if state.listening {
            out.push(FdInterest::read(state.sock.fd()));
            out.extend(state.incoming.iter().map(|i| FdInterest::read(i.sock.fd())));
        }
        true
    }
}

impl PassiveEndpointOps<Fabric> for PassiveEp {
    fn bind_eq(&self, eq: &KitEq, _flags: u64) -> Result<()> {
        self.inner.base.bind_eq(eq);
        Ok(())
    }

    fn listen(&self) -> Result<()> {
        self.inner.base.listen(|state| {
            state
                .sock
                .listen(state.backlog)
                .map_err(|e| io_err("listen", e))?;
            state.listening = true;
            Ok(())
        })
    }

    /// `FI_BACKLOG` (`int *`): the listen backlog, before `fi_listen` or after it (the
    /// socket listens again with the new value, which the kernel caps at `somaxconn`).
    /// A negative value is `FI_EINVAL`; other commands `FI_ENOSYS`.
    unsafe fn control(&self, command: i32, arg: *mut std::ffi::c_void) -> Result<()> {
        if command != ofi_core::control::BACKLOG {
            return Err(Error::new(
                Errno::ENOSYS,
                format!("{NAME}: fi_control command {command} on a passive endpoint"),
            ));
        }
        if arg.is_null() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: FI_BACKLOG without a value"),
            ));
        }
        // SAFETY: FI_BACKLOG's argument is an `int *` (the caller's contract), non-null;
        // read unaligned in case the caller's int is packed.
        let backlog = unsafe { arg.cast::<i32>().read_unaligned() };
        if backlog < 0 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: FI_BACKLOG {backlog}: a backlog is not negative"),
            ));
        }
        let mut state = self.inner.base.listener();
        if state.listening {
            state
                .sock
                .listen(backlog)
                .map_err(|e| io_err("listen", e))?;
        }
        state.backlog = backlog;
        Ok(())
    }

    fn reject(&self, handle: usize, param: &[u8]) -> Result<()> {
        check_cm_data("reject data", param)?;
        let Some(c) = self.inner.fabric.take_pending(handle) else {
            return Err(self.inner.base.no_pending_request());
        };
        let msg = crate::proto::cm_message(CmKind::Reject, param);
        let r = c.sock.write_all_timeout(&msg, 1000);
        c.sock.shutdown();
        r.map_err(|e| io_err("reject", e))
    }

    /// The listening address; listening on the wildcard address, the address a peer
    /// connects to instead (see `FabricShared::reachable`).
    fn getname(&self) -> Result<Vec<u8>> {
        let state = self.inner.base.listener();
        let a = state
            .sock
            .local_addr()
            .map_err(|e| io_err("getsockname", e))?;
        Ok(Address::from(self.inner.fabric.reachable(a)?).to_bytes())
    }

    /// `fi_setname` before `fi_listen`: listen at `addr` instead (a new socket bound
    /// there; `FI_EOPBADSTATE` once listening, the bind's error if the address is
    /// taken or not local).
    fn setname(&self, addr: &[u8]) -> Result<()> {
        let a = crate::ep::ip_name(addr)?;
        let mut state = self.inner.base.listener();
        if state.listening {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_setname on a listening passive endpoint"),
            ));
        }
        let sock = Sock::stream(&a).map_err(|e| io_err("socket", e))?;
        sock.set_reuseaddr()
            .map_err(|e| io_err("SO_REUSEADDR", e))?;
        sock.bind(&a).map_err(|e| io_err(&format!("bind {a}"), e))?;
        state.sock = sock;
        Ok(())
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        crate::ep::cm_getopt(level, optname, optval)
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        crate::ep::cm_setopt(level, optname, optval)
    }

    fn close(&self) -> Result<()> {
        self.inner.fabric.cm_engine.unregister(&self.inner);
        Ok(())
    }
}
