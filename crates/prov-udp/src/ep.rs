//! The endpoint: one UDP socket, its bindings, and its queue of posted receives.
//!
//! # Life cycle
//!
//! `fi_endpoint` creates the socket and binds it to the info's `src_addr` (the wildcard
//! address of the format's family when there is none; port 0 lets the kernel pick), so
//! `fi_getname` works at once; `fi_setname` before `fi_enable` rebinds it. `fi_ep_bind`
//! attaches the AV, CQs (`FI_TRANSMIT` and/or `FI_RECV`, optionally
//! `FI_SELECTIVE_COMPLETION`), counters (`FI_SEND`, `FI_RECV`; `FI_READ`, `FI_WRITE`,
//! `FI_REMOTE_*` are accepted and count nothing) and an EQ; other flags, or none, are
//! `FI_EBADFLAGS`. `fi_enable` needs an AV (`FI_ENOAV`) and a CQ or
//! counter (`FI_ENOCQ`) and freezes the bindings: the data path reads them without a
//! lock. Data calls before `fi_enable` are `FI_EOPBADSTATE`, and so are binds after.
//!
//! # Data path
//!
//! - A send is one `sendmsg(2)` of `[header, application iov…]` (no copy), or for
//!   messages of at most [`SMALL_SEND`] bytes one `sendto(2)` of header and payload
//!   copied into a stack buffer (cheaper in the kernel than a vector): when it
//!   returns, the kernel has the datagram, so the send's completion (if one is wanted)
//!   is queued at once; a full socket buffer is `FI_EAGAIN`. Checks, in order: enabled
//!   (`FI_EOPBADSTATE`), I/O vector (`FI_EINVAL`), size (`FI_EMSGSIZE`), destination
//!   in the AV (`FI_EINVAL`), room in the CQ (`FI_EAGAIN`).
//! - A receive is queued (at most `rx_size`, else `FI_EAGAIN`). Progress (a CQ or counter
//!   read, or the auto thread) takes datagrams off the socket only while a receive is
//!   posted and its CQ has room, `recvmsg(2)` scattering the header into a stack slot
//!   and the payload straight into the application's buffers — or, for a receive of at
//!   most [`SMALL_RECV`] bytes, one `recvfrom(2)` into a stack buffer and a copy (the
//!   kernel imports no message header or vector: cheaper, and most polls find
//!   nothing). Longer than the buffer: error completion `FI_ETRUNC`, `olen` = the bytes
//!   that did not fit.
//! - `FI_MULTI_RECV`: one buffer takes datagrams one after another (each completion
//!   points into it); when less than the receive's `FI_OPT_MIN_MULTI_RECV` is left, or
//!   the next datagram would not fit in what is left, the buffer is released and the
//!   last completion carries `FI_MULTI_RECV` (a zero-length one if the datagram goes to
//!   the next receive).
//! - `FI_SOURCE`: the sender's socket address is looked up in the AV (O(1)); unknown
//!   senders are `FI_ADDR_NOTAVAIL`, or, with `FI_SOURCE_ERR`, an error completion
//!   `FI_EADDRNOTAVAIL` whose `err_data` is the sender's address in the endpoint's
//!   format (the message itself is in the buffer, `len` says how much).
//! - A datagram whose header does not parse ([`crate::proto`]) is dropped and counted
//!   ([`Endpoint::malformed`]); the receive stays posted.
//!
//! # Peer sockets
//!
//! An unconnected socket makes the kernel look up a route for every datagram sent,
//! and another for every datagram received; a connected one does it once. So the
//! first `FI_UDP_PEER_SOCKETS` (default 1) unicast destinations an endpoint sends to
//! each get a socket bound to the endpoint's own address and port (`SO_REUSEPORT`,
//! set on the endpoint's socket only then, so an unrelated bind of the port still
//! fails with `FI_EADDRINUSE`) and connected to the destination. Datagrams to that
//! destination leave through it (same source address as before), and the kernel
//! delivers that peer's datagrams to it rather than to the endpoint's socket, so
//! progress reads it too: the socket that gave the last datagram every round, one of
//! one of the others every round while they bring datagrams, backing off to every
//! [`MAX_OTHER_GAP`]th round while they stay empty (see `EpInner::poll_rx`).
//! Nothing else changes: `FI_SOURCE` comes from `recvfrom` as before (a datagram that
//! arrived on a peer socket before its `connect` still names its real sender);
//! multicast and broadcast destinations take no slot; peer sockets join no group;
//! an ICMP "port unreachable" a connected socket reports is dropped (datagrams to a
//! closed port vanish, as through the endpoint's socket). A broadcast datagram from a
//! peer with a peer socket reaches both sockets (the kernel gives broadcasts to every
//! matching socket): it may be delivered twice. A socket that cannot be
//! made leaves its destination on the endpoint's socket. Waiters and the watcher
//! poll every socket. Slots are kept until the endpoint closes.
//!
//! # Closing
//!
//! - `fi_close` unregisters the endpoint from progress and forgets its posted receives
//!   (no completions; the buffers are the application's again).
//! - Multicast (`fi_join`/leave): see [`Endpoint`]'s `join`; memberships are recorded so
//!   each leave undoes exactly its join.
//!
//! Lock order: the receive queue, then a CQ's lock (or the AV's read lock). Progress
//! only `try_lock`s the receive queue, so concurrent drivers never wait on each other.
//! Nothing here panics.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};

use ofi_core::abi::raw::{CqTaggedEntry, Iov, Msg};
use ofi_core::attr::Info;
use ofi_core::cq::CqError;
use ofi_core::enums::EqEvent;
use ofi_core::eq::Event;
use ofi_core::provider::{BindTarget, Desc, EndpointOps};
use ofi_core::{AddrFormat, Address, Caps, EpType, Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::av::KitAv;
use ofi_kit::cntr::KitCntr;
use ofi_kit::ep::{BindRules, Bindings, CqBinding};
use ofi_kit::eq::KitEq;
use ofi_kit::progress::{FdInterest, Progress, ProgressEngine};

use crate::fabric::{Fabric, Peer};
use crate::proto::{Header, HDR_LEN};
use crate::sock::{SockAddr, UdpSock};
use crate::watch::Hub;
use crate::{Settings, CAPS, DEFAULT_MIN_MULTI_RECV, IOV_LIMIT, MAX_MSG_SIZE, NAME};

/// `FI_OPT_ENDPOINT`: the option level of `fi_getopt`/`fi_setopt`.
pub const FI_OPT_ENDPOINT: i32 = 0;
/// `FI_OPT_MIN_MULTI_RECV` (a `size_t`).
pub const FI_OPT_MIN_MULTI_RECV: i32 = 0;

/// Sends of at most this many bytes are copied, with the header, into one stack
/// buffer and sent with `sendto`; larger ones are gathered by `sendmsg` (no copy).
pub const SMALL_SEND: usize = 256;
/// Receives of at most this many bytes (one buffer, not multi-receive) take the
/// datagram with one `recvfrom(2)` into a stack buffer and copy the payload out.
pub const SMALL_RECV: usize = 256;

/// With peer sockets, the longest gap, in progress rounds, between two reads of a
/// socket besides the hot one (see `EpInner::poll_rx`).
pub const MAX_OTHER_GAP: usize = 16;

/// Why reading one socket stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Nothing (more) queued on the socket.
    Empty,
    /// No receive posted, or its CQ full: no socket can be read.
    NoReceive,
    /// `batch` datagrams taken.
    Budget,
}

/// `ECONNREFUSED`: a connected UDP socket's note that an earlier datagram was refused.
fn is_refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECONNREFUSED)
}

const SEND_FLAGS: u64 = OpFlags::SEND.bits() | OpFlags::MSG.bits();
const RECV_FLAGS: u64 = OpFlags::RECV.bits() | OpFlags::MSG.bits();

fn code(e: Errno) -> Error {
    Error::code_only(e)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An OS error as a fabric error (same errno value), with what was being done.
fn os_error(e: &io::Error, what: &str) -> Error {
    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
    Error::new(errno, format!("udp: {what}: {e}"))
}

/// Up to [`IOV_LIMIT`] application buffers in the form the kernel takes.
#[derive(Clone, Copy)]
struct UserIov {
    v: [libc::iovec; IOV_LIMIT],
    n: usize,
    total: usize,
}

// SAFETY: the iovecs point at application buffers that the application keeps valid,
// and does not touch, until the operation completes (the `EndpointOps` contract). They
// are written only by `recvmsg` under the receive-queue lock, one operation at a time.
unsafe impl Send for UserIov {}

const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

impl UserIov {
    #[inline]
    fn one(base: *mut libc::c_void, len: usize) -> Result<UserIov> {
        if base.is_null() && len > 0 {
            return Err(code(Errno::EINVAL));
        }
        let mut v = [EMPTY_IOVEC; IOV_LIMIT];
        v[0] = libc::iovec {
            iov_base: base,
            iov_len: len,
        };
        Ok(UserIov {
            v,
            n: 1,
            total: len,
        })
    }

    #[inline]
    fn from_iov(iov: &[Iov]) -> Result<UserIov> {
        if iov.len() > IOV_LIMIT {
            return Err(code(Errno::EINVAL));
        }
        let mut out = UserIov {
            v: [EMPTY_IOVEC; IOV_LIMIT],
            n: iov.len(),
            total: 0,
        };
        for (dst, src) in out.v.iter_mut().zip(iov) {
            if src.base.is_null() && src.len > 0 {
                return Err(code(Errno::EINVAL));
            }
            *dst = libc::iovec {
                iov_base: src.base,
                iov_len: src.len,
            };
            out.total = out.total.checked_add(src.len).ok_or(code(Errno::EINVAL))?;
        }
        Ok(out)
    }

    /// # Safety
    /// `msg.msg_iov` is valid for `msg.iov_count` entries (or the count is 0).
    #[inline]
    unsafe fn from_msg(msg: &Msg) -> Result<UserIov> {
        if msg.iov_count == 0 {
            return UserIov::from_iov(&[]);
        }
        if msg.msg_iov.is_null() || msg.iov_count > IOV_LIMIT {
            return Err(code(Errno::EINVAL));
        }
        // SAFETY: non-null and valid for `iov_count` entries (caller's contract).
        UserIov::from_iov(unsafe { std::slice::from_raw_parts(msg.msg_iov, msg.iov_count) })
    }

    /// `[header slot, buffers…]` and how many entries are used.
    #[inline]
    fn with_header(&self, hdr: *mut u8) -> ([libc::iovec; IOV_LIMIT + 1], usize) {
        let mut out = [EMPTY_IOVEC; IOV_LIMIT + 1];
        out[0] = libc::iovec {
            iov_base: hdr.cast(),
            iov_len: HDR_LEN,
        };
        out[1..=self.n].copy_from_slice(&self.v[..self.n]);
        (out, self.n + 1)
    }

    /// Copy `data` into the buffers, in order (as much as they hold).
    ///
    /// # Safety
    /// The iovecs are writable for their lengths.
    unsafe fn scatter(&self, mut data: &[u8]) {
        for v in &self.v[..self.n] {
            let k = v.iov_len.min(data.len());
            if k == 0 {
                continue;
            }
            // SAFETY: caller's contract for the iovec; `data` has `k` bytes; the two
            // do not overlap (`data` is the provider's own buffer).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), v.iov_base.cast(), k) };
            data = &data[k..];
        }
    }

    fn first_base(&self) -> *mut libc::c_void {
        if self.n > 0 {
            self.v[0].iov_base
        } else {
            std::ptr::null_mut()
        }
    }
}

/// A receive waiting for datagrams.
struct Posted {
    iov: UserIov,
    context: usize,
    flags: OpFlags,
    /// `FI_MULTI_RECV`: one buffer (`iov.v[0]`), filled from `offset` on.
    multi: bool,
    offset: usize,
    min_multi: usize,
}

/// Bindings made before `fi_enable`.
#[derive(Default)]
struct Setup {
    sock: Option<UdpSock>,
    /// CQs, counters, AV and EQ (the kit's rules).
    b: Bindings<Peer>,
}

impl Active {
    /// Call `f` with each socket's descriptor: the endpoint's, then its peer sockets'.
    fn each_fd(&self, mut f: impl FnMut(i32)) {
        f(self.sock.raw_fd());
        for p in self.peers.live().iter().filter_map(OnceLock::get) {
            if let Some(s) = &p.sock {
                f(s.raw_fd());
            }
        }
    }
}

/// A destination's connected socket (`sock` is `None` if it could not be made; the
/// destination then goes through the endpoint's socket).
struct PeerSock {
    dst: SockAddr,
    sock: Option<UdpSock>,
}

/// The peer sockets of an endpoint: the first `FI_UDP_PEER_SOCKETS` unicast
/// destinations, each in a slot for the endpoint's lifetime (slots are filled in
/// order and never emptied, so readers need no lock).
struct PeerSocks {
    slots: Box<[OnceLock<PeerSock>]>,
    /// Slots filled (a prefix of `slots`).
    made: AtomicUsize,
    /// Serialises filling slots.
    make: Mutex<()>,
    /// The endpoint's bound address, which every peer socket shares.
    local: SocketAddr,
    /// Socket buffer sizes (`FI_UDP_SNDBUF` / `FI_UDP_RCVBUF`; 0: the kernel's).
    sndbuf: usize,
    rcvbuf: usize,
}

impl PeerSocks {
    fn new(settings: &Settings, local: SocketAddr) -> PeerSocks {
        PeerSocks {
            slots: (0..settings.peer_sockets)
                .map(|_| OnceLock::new())
                .collect(),
            made: AtomicUsize::new(0),
            make: Mutex::new(()),
            local,
            sndbuf: settings.sndbuf,
            rcvbuf: settings.rcvbuf,
        }
    }

    /// The filled slots (each `get` is `Some`: `made` is raised after the slot is set).
    #[inline]
    fn live(&self) -> &[OnceLock<PeerSock>] {
        let n = self.made.load(Ordering::Acquire).min(self.slots.len());
        &self.slots[..n]
    }

    /// The filled slot of `dst`, if it has one.
    #[inline]
    fn slot_of(&self, dst: &SockAddr) -> Option<&PeerSock> {
        self.live()
            .iter()
            .filter_map(OnceLock::get)
            .find(|p| p.dst.same(dst))
    }

    /// The connected socket for `dst`, making one if a slot is free and `dst` may have
    /// one; `None`: send through the endpoint's socket. `made_one` runs after a new
    /// socket exists (waiters must learn of it).
    #[inline]
    fn for_dst(&self, main: &UdpSock, dst: &SockAddr, made_one: impl FnOnce()) -> Option<&UdpSock> {
        if let Some(slot) = self.slot_of(dst) {
            return slot.sock.as_ref();
        }
        if self.made.load(Ordering::Relaxed) >= self.slots.len() {
            return None;
        }
        // Multicast and broadcast destinations take no slot.
        if !dst
            .to_std()
            .is_some_and(|d| peer_socket_for(&self.local, &d))
        {
            return None;
        }
        self.make_for(main, dst, made_one)
    }

    #[cold]
    fn make_for(
        &self,
        main: &UdpSock,
        dst: &SockAddr,
        made_one: impl FnOnce(),
    ) -> Option<&UdpSock> {
        let _g = lock(&self.make);
        // Made by another thread meanwhile?
        if let Some(slot) = self.slot_of(dst) {
            return slot.sock.as_ref();
        }
        let i = self.made.load(Ordering::Acquire);
        let slot = self.slots.get(i)?;
        // A failure (say, the port cannot be shared) fills the slot without a socket:
        // `dst` then goes through the endpoint's socket, and is not tried again.
        let sock = match main
            .share_port()
            .and_then(|()| UdpSock::connected(&self.local, dst, self.sndbuf, self.rcvbuf))
        {
            Ok(s) => Some(s),
            Err(e) => {
                ofi_core::ofi_debug!(NAME, "ep_data", "no peer socket for {dst:?}: {e}");
                None
            }
        };
        let made = sock.is_some();
        let _ = slot.set(PeerSock { dst: *dst, sock });
        self.made.store(i + 1, Ordering::Release);
        if made {
            made_one();
        }
        slot.get().and_then(|p| p.sock.as_ref())
    }
}

/// Whether a datagram from `local` to `dst` may go through a peer socket: a unicast
/// destination of the same family (multicast and broadcast stay on the endpoint's
/// socket, which holds the memberships).
fn peer_socket_for(local: &SocketAddr, dst: &SocketAddr) -> bool {
    match (local, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(d)) => {
            let ip = d.ip();
            !ip.is_multicast() && !ip.is_broadcast() && !ip.is_unspecified() && d.port() != 0
        }
        (SocketAddr::V6(_), SocketAddr::V6(d)) => {
            !d.ip().is_multicast() && !d.ip().is_unspecified() && d.port() != 0
        }
        _ => false,
    }
}

/// What `fi_enable` froze: read by the data path without a lock.
struct Active {
    sock: UdpSock,
    /// Connected sockets for the first unicast destinations.
    peers: PeerSocks,
    local: SocketAddr,
    av: Arc<KitAv<Peer>>,
    tx_cq: Option<CqBinding>,
    rx_cq: Option<CqBinding>,
    tx_cntr: Option<KitCntr>,
    rx_cntr: Option<KitCntr>,
    eq: Option<KitEq>,
}

/// The endpoint's state, shared with the domain's progress engine.
pub(crate) struct EpInner {
    settings: Settings,
    addr_format: AddrFormat,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
    source: bool,
    source_err: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    rx: Mutex<VecDeque<Posted>>,
    /// The last datagram source found in the AV and what it reported as (`FI_SOURCE`):
    /// checked against the AV entry at each use, so a removed or replaced entry is
    /// never reported (saves hashing the address per datagram).
    last_src: Mutex<Option<(SocketAddr, u64)>>,
    min_multi_recv: AtomicUsize,
    malformed: AtomicU64,
    engine: Arc<ProgressEngine>,
    /// The endpoint's open context (the `fid` of its EQ events).
    context: usize,
    /// Joined multicast groups: (fabric address, socket membership taken).
    groups: Mutex<Vec<(u64, bool)>>,
    /// The domain's watcher hub (wait fds with manual progress, see [`crate::watch`]).
    hub: Arc<Hub>,
    /// The watcher left this endpoint's socket out (no receive posted): the next
    /// posted receive wakes it.
    unwatched: AtomicBool,
    /// With peer sockets (touched only under the `rx` lock, so relaxed): the socket
    /// read first, the rounds until another is read, the current gap between such
    /// reads, the last "other" socket read.
    rx_hot: AtomicUsize,
    rx_wait: AtomicUsize,
    rx_gap: AtomicUsize,
    rx_rr: AtomicUsize,
}

/// An active endpoint (`FI_EP_DGRAM`).
pub struct Endpoint {
    inner: Arc<EpInner>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr_format", &self.inner.addr_format)
            .field("enabled", &self.inner.active.get().is_some())
            .finish_non_exhaustive()
    }
}

/// The socket address an endpoint of `info` binds to.
fn bind_addr(info: &Info, format: AddrFormat) -> Result<SocketAddr> {
    match &info.src_addr {
        Some(a) => addr_to_std(a),
        None => Ok(match format {
            AddrFormat::SOCKADDR_IN6 => {
                SocketAddr::V6(SocketAddrV6::new(std::net::Ipv6Addr::UNSPECIFIED, 0, 0, 0))
            }
            _ => SocketAddr::V4(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)),
        }),
    }
}

/// An IP socket address from an address of any of this provider's formats.
fn addr_to_std(a: &Address) -> Result<SocketAddr> {
    let sa = match a {
        Address::Str(s) => Address::parse_addr_str(s)?.socket_addr(),
        a => a.socket_addr(),
    };
    sa.ok_or_else(|| {
        Error::new(
            Errno::EINVAL,
            format!("udp: address {a} is not an IP socket address"),
        )
    })
}

/// A socket bound to `addr`, with the multicast interface set when configured.
fn open_sock(settings: &Settings, addr: &SocketAddr) -> Result<UdpSock> {
    let sock = UdpSock::bind(addr, settings.sndbuf, settings.rcvbuf)
        .map_err(|e| os_error(&e, &format!("cannot bind a socket to {addr}")))?;
    if let (Some(ifaddr), false) = (settings.mcast_if, sock.is_v6()) {
        sock.multicast_v4_setup(ifaddr)
            .map_err(|e| os_error(&e, &format!("multicast interface {ifaddr}")))?;
    }
    Ok(sock)
}

impl Endpoint {
    /// Open an endpoint for `info`: create and bind its socket and register it with
    /// the domain's progress engine.
    ///
    /// # Errors
    /// `FI_EINVAL` for another endpoint type or a source address that is not an IP
    /// address; the OS error (`FI_EADDRINUSE`, `FI_EADDRNOTAVAIL`, …) if the socket
    /// cannot be bound.
    pub(crate) fn open(
        settings: Settings,
        info: &Info,
        context: usize,
        engine: Arc<ProgressEngine>,
        hub: Arc<Hub>,
    ) -> Result<Endpoint> {
        if !matches!(info.ep_attr.ep_type, EpType::Dgram | EpType::Unspec) {
            return Err(Error::new(
                Errno::EINVAL,
                format!("udp: cannot open a {} endpoint", info.ep_attr.ep_type),
            ));
        }
        let addr_format = match info.addr_format {
            AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6 | AddrFormat::STR => {
                info.addr_format
            }
            AddrFormat::UNSPEC | AddrFormat::SOCKADDR => match &info.src_addr {
                Some(Address::Inet6(_)) => AddrFormat::SOCKADDR_IN6,
                _ => AddrFormat::SOCKADDR_IN,
            },
            f => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("udp: address format {f} is not supported"),
                ))
            }
        };
        let caps = if info.caps.is_empty() {
            CAPS
        } else {
            info.caps
        };
        let rx_caps = caps | info.rx_attr.caps;
        let addr = bind_addr(info, addr_format)?;
        let sock = open_sock(&settings, &addr)?;
        let inner = Arc::new(EpInner {
            settings,
            addr_format,
            tx_op_flags: info.tx_attr.op_flags,
            rx_op_flags: info.rx_attr.op_flags,
            source: rx_caps.contains(Caps::SOURCE),
            source_err: rx_caps.contains(Caps::SOURCE | Caps::SOURCE_ERR),
            setup: Mutex::new(Setup {
                sock: Some(sock),
                ..Setup::default()
            }),
            active: OnceLock::new(),
            rx: Mutex::new(VecDeque::with_capacity(settings.rx_size.min(256))),
            last_src: Mutex::new(None),
            min_multi_recv: AtomicUsize::new(DEFAULT_MIN_MULTI_RECV),
            malformed: AtomicU64::new(0),
            engine,
            context,
            groups: Mutex::new(Vec::new()),
            hub,
            unwatched: AtomicBool::new(false),
            rx_hot: AtomicUsize::new(0),
            rx_wait: AtomicUsize::new(0),
            rx_gap: AtomicUsize::new(1),
            rx_rr: AtomicUsize::new(0),
        });
        inner.engine.register(&inner);
        inner.hub.add(&inner);
        Ok(Endpoint { inner })
    }

    /// Datagrams dropped because their header did not parse.
    pub fn malformed(&self) -> u64 {
        self.inner.malformed.load(Ordering::Relaxed)
    }

    /// The bound socket address.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl EpInner {
    #[inline]
    fn active(&self) -> Result<&Active> {
        self.active.get().ok_or(code(Errno::EOPBADSTATE))
    }

    fn local_addr(&self) -> Result<SocketAddr> {
        if let Some(a) = self.active.get() {
            return Ok(a.local);
        }
        let s = lock(&self.setup);
        match &s.sock {
            Some(sock) => sock.local_addr().map_err(|e| os_error(&e, "getsockname")),
            None => Err(Error::new(
                Errno::EOPBADSTATE,
                "udp: endpoint has no socket",
            )),
        }
    }

    /// `sa` as an address of this endpoint's format.
    fn to_address(&self, sa: SocketAddr) -> Address {
        let a = match sa {
            SocketAddr::V4(v4) => Address::Inet(v4),
            SocketAddr::V6(v6) => Address::Inet6(v6),
        };
        if self.addr_format == AddrFormat::STR {
            Address::Str(a.to_addr_str())
        } else {
            a
        }
    }

    /// The fabric address of a datagram's sender (`FI_ADDR_NOTAVAIL` if unknown) and
    /// its address.
    ///
    /// A peer sending many datagrams in a row hits `last_src`: one AV entry check
    /// instead of building, hashing and looking up its address (callgrind on `fi_pingpong
    /// -p "udp;ofi_rxd"`, where rxd asks for sources: about 340 instructions a datagram
    /// down to about 100).
    fn source_of(&self, act: &Active, src: &SockAddr) -> (u64, Option<Address>) {
        let Some(sa) = src.to_std() else {
            return (ADDR_NOTAVAIL, None);
        };
        let mut last = lock(&self.last_src);
        if let Some((cached, fi)) = *last {
            if cached == sa {
                let same = act.av.with_entry(fi, |e| {
                    (e.peer.addr.to_std() == Some(sa)).then(|| e.user_id.unwrap_or(e.fi_addr))
                });
                if let Ok(Some(reported)) = same {
                    return (reported, None);
                }
            }
        }
        let a = self.to_address(sa);
        let found = act.av.reverse_lookup(&a).and_then(|fi| {
            let reported = act.av.with_entry(fi, |e| e.user_id.unwrap_or(e.fi_addr));
            reported.ok().map(|r| (fi, r))
        });
        *last = found.map(|(fi, _)| (sa, fi));
        (found.map_or(ADDR_NOTAVAIL, |(_, r)| r), Some(a))
    }

    /// Send one datagram (every send flavour ends here).
    ///
    /// # Safety
    /// The buffers of `iov` are valid for reading during the call.
    #[inline]
    unsafe fn send_common(
        &self,
        iov: &UserIov,
        dest: u64,
        context: usize,
        data: Option<u64>,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()> {
        let act = self.active()?;
        if iov.total > MAX_MSG_SIZE {
            return Err(code(Errno::EMSGSIZE));
        }
        let dst = act.av.with_entry(dest, |e| e.peer.addr)?;
        let reservation = match &act.tx_cq {
            Some(c) if !inject && c.wants(flags) => Some(c.cq.reserve()?),
            _ => None,
        };
        let hdr = Header::new(data).encode();
        let (sock, to) = match act.peers.for_dst(&act.sock, &dst, || {
            // Waiters asleep on the endpoint's sockets must add the new one.
            self.engine.kick();
            self.hub.wake();
        }) {
            Some(peer) => (peer, None),
            None => (&act.sock, Some(&dst)),
        };
        let send = || {
            if iov.total <= SMALL_SEND {
                // Small: header and payload copied into one stack buffer, sent with
                // `sendto` (cheaper in the kernel than `sendmsg` with a vector).
                let mut b = [0u8; HDR_LEN + SMALL_SEND];
                b[..HDR_LEN].copy_from_slice(&hdr);
                let mut at = HDR_LEN;
                for v in &iov.v[..iov.n] {
                    if v.iov_len > 0 {
                        // SAFETY: the application's buffer is valid for `iov_len` bytes
                        // during the call (caller's contract); the total fits `b`.
                        let src = unsafe {
                            std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len)
                        };
                        b[at..at + v.iov_len].copy_from_slice(src);
                        at += v.iov_len;
                    }
                }
                sock.send_buf(to, &b[..at])
            } else {
                let (vecs, n) = iov.with_header(hdr.as_ptr().cast_mut());
                // SAFETY: the header lives on this frame; the application's buffers are
                // valid for the call (caller's contract).
                unsafe { sock.send_to(to, &vecs[..n]) }
            }
        };
        let mut sent = send();
        if matches!(&sent, Err(e) if is_refused(e)) && to.is_none() {
            // A peer socket reported that an earlier datagram was refused (ICMP port
            // unreachable) instead of sending this one; the report is consumed, and
            // datagrams to a closed port are lost silently, as on the shared socket.
            sent = send();
        }
        if let Err(e) = sent {
            return Err(code(match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Errno::EAGAIN,
                Some(libc::EMSGSIZE) => Errno::EMSGSIZE,
                Some(c) => Errno(c),
                None => Errno::EIO,
            }));
        }
        if let Some(r) = reservation {
            let e = CqTaggedEntry {
                op_context: context,
                flags: SEND_FLAGS,
                len: 0,
                buf: std::ptr::null_mut(),
                data: 0,
                tag: 0,
            };
            let _ = r.push(&e, ADDR_NOTAVAIL);
        }
        if let Some(c) = &act.tx_cntr {
            c.inc();
        }
        Ok(())
    }

    /// For the watcher: append the sockets to poll (the endpoint's and its peer
    /// sockets) if this endpoint is enabled and has a receive posted, and say so;
    /// otherwise `false`, and the next posted receive wakes the watcher.
    pub(crate) fn watch_fds(&self, out: &mut Vec<libc::pollfd>) -> bool {
        let Some(act) = self.active.get() else {
            return false;
        };
        self.unwatched.store(true, Ordering::SeqCst);
        if lock(&self.rx).is_empty() {
            return false;
        }
        self.unwatched.store(false, Ordering::SeqCst);
        act.each_fd(|fd| {
            out.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
        });
        true
    }

    /// Queue a receive.
    fn post_recv(&self, iov: UserIov, context: usize, flags: OpFlags) -> Result<()> {
        self.active()?;
        let multi = flags.contains(OpFlags::MULTI_RECV);
        if multi && iov.n != 1 {
            return Err(Error::new(
                Errno::EINVAL,
                "udp: FI_MULTI_RECV takes exactly one buffer",
            ));
        }
        {
            let mut q = lock(&self.rx);
            if q.len() >= self.settings.rx_size {
                return Err(code(Errno::EAGAIN));
            }
            q.push_back(Posted {
                iov,
                context,
                flags,
                multi,
                offset: 0,
                min_multi: self.min_multi_recv.load(Ordering::Relaxed),
            });
        }
        self.engine.kick();
        if self.unwatched.load(Ordering::SeqCst) && self.unwatched.swap(false, Ordering::SeqCst) {
            self.hub.wake();
        }
        Ok(())
    }

    /// Report a received datagram (or its failure) for the receive `ctx`.
    #[allow(clippy::too_many_arguments)]
    fn complete_recv(
        &self,
        act: &Active,
        ctx: usize,
        op_flags: OpFlags,
        cflags: u64,
        buf: *mut libc::c_void,
        len: usize,
        payload: usize,
        data: u64,
        src: &SockAddr,
    ) {
        let (src_addr, src_a) = if self.source {
            self.source_of(act, src)
        } else {
            (ADDR_NOTAVAIL, None)
        };
        let err = if payload > len {
            Some((Errno::ETRUNC, payload - len, Vec::new()))
        } else if self.source_err && src_addr == ADDR_NOTAVAIL {
            let bytes = src_a.map(|a| a.to_bytes()).unwrap_or_default();
            Some((Errno::EADDRNOTAVAIL, 0, bytes))
        } else {
            None
        };
        match err {
            Some((errno, olen, err_data)) => {
                if let Some(c) = &act.rx_cq {
                    let _ = c.cq.push_err(CqError {
                        op_context: ctx,
                        flags: cflags,
                        len,
                        buf: buf as usize,
                        data,
                        tag: 0,
                        olen,
                        err: errno,
                        prov_errno: 0,
                        err_data,
                    });
                }
                if let Some(c) = &act.rx_cntr {
                    c.inc_err();
                }
            }
            None => {
                if let Some(c) = &act.rx_cq {
                    if c.wants(op_flags) {
                        let e = CqTaggedEntry {
                            op_context: ctx,
                            flags: cflags,
                            len,
                            buf,
                            data,
                            tag: 0,
                        };
                        let _ = c.cq.push(&e, src_addr);
                    }
                }
                if let Some(c) = &act.rx_cntr {
                    c.inc();
                }
            }
        }
    }

    /// One progress round: fill posted receives from the sockets (bounded batch).
    ///
    /// Without peer sockets, the endpoint's socket. With them, the socket that gave
    /// the last datagram ("hot") every round, and one other (round robin) after a gap
    /// that is one round while the others bring datagrams and doubles, up to
    /// [`MAX_OTHER_GAP`], each time the one read was empty: a read of an idle socket is
    /// a system call that finds nothing. A datagram on another socket while the hot one
    /// had none makes it the hot one.
    fn poll_rx(&self) -> usize {
        let Some(act) = self.active.get() else {
            return 0;
        };
        let mut q = match self.rx.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return 0,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let peers = act.peers.live();
        if peers.is_empty() {
            return self.poll_sock(act, &mut q, &act.sock).0;
        }
        // Socket 0 is the endpoint's, 1.. the peer sockets (slots whose socket could
        // not be made are skipped by `sock_at`).
        let count = peers.len() + 1;
        let sock_at = |i: usize| -> Option<&UdpSock> {
            if i == 0 {
                Some(&act.sock)
            } else {
                peers
                    .get(i - 1)
                    .and_then(OnceLock::get)
                    .and_then(|p| p.sock.as_ref())
            }
        };
        let hot = self.rx_hot.load(Ordering::Relaxed) % count;
        let (work, stop) = match sock_at(hot) {
            Some(sock) => self.poll_sock(act, &mut q, sock),
            None => (0, Stop::Empty),
        };
        if stop == Stop::NoReceive {
            return work;
        }
        let wait = self.rx_wait.load(Ordering::Relaxed);
        if wait > 0 {
            self.rx_wait.store(wait - 1, Ordering::Relaxed);
            return work;
        }
        let mut other = self.rx_rr.load(Ordering::Relaxed);
        let mut found = 0;
        for _ in 0..count {
            other = (other + 1) % count;
            if other == hot {
                continue;
            }
            if let Some(sock) = sock_at(other) {
                found = self.poll_sock(act, &mut q, sock).0;
                if found > 0 && work == 0 {
                    self.rx_hot.store(other, Ordering::Relaxed);
                }
                break;
            }
        }
        self.rx_rr.store(other, Ordering::Relaxed);
        let gap = if found > 0 {
            1
        } else {
            (self.rx_gap.load(Ordering::Relaxed) * 2).clamp(1, MAX_OTHER_GAP)
        };
        self.rx_gap.store(gap, Ordering::Relaxed);
        self.rx_wait.store(gap - 1, Ordering::Relaxed);
        work + found
    }

    /// Fill posted receives from `sock` (at most `batch` datagrams); the work done and
    /// why it stopped.
    fn poll_sock(&self, act: &Active, q: &mut VecDeque<Posted>, sock: &UdpSock) -> (usize, Stop) {
        let mut work = 0;
        let mut rounds = 0;
        let mut refused = false;
        while rounds < self.settings.batch {
            rounds += 1;
            let Some(p) = q.front_mut() else {
                return (work, Stop::NoReceive);
            };
            if let Some(c) = &act.rx_cq {
                if !c.cq.has_room() {
                    return (work, Stop::NoReceive);
                }
            }
            let mut hdr = [0u8; HDR_LEN];
            let (mut vecs, n) = p.iov.with_header(hdr.as_mut_ptr());
            let region_len;
            if p.multi {
                let room = p.iov.total - p.offset;
                // SAFETY: offset ≤ total, so the pointer stays inside the buffer.
                let base = unsafe { p.iov.v[0].iov_base.cast::<u8>().add(p.offset) };
                vecs[1] = libc::iovec {
                    iov_base: base.cast(),
                    iov_len: room,
                };
                region_len = room;
                if room < MAX_MSG_SIZE {
                    let mut peek = [libc::iovec {
                        iov_base: hdr.as_mut_ptr().cast(),
                        iov_len: HDR_LEN,
                    }];
                    // SAFETY: the iovec points at `hdr` on this frame.
                    match unsafe { sock.recv_from(&mut peek, true) } {
                        Ok((len, _)) if len >= HDR_LEN && len - HDR_LEN > room => {
                            // Does not fit: release this buffer; the datagram goes
                            // to the next receive.
                            let ctx = p.context;
                            let flags = p.flags;
                            q.pop_front();
                            if let Some(c) = &act.rx_cq {
                                if c.wants(flags) {
                                    let e = CqTaggedEntry {
                                        op_context: ctx,
                                        flags: RECV_FLAGS | OpFlags::MULTI_RECV.bits(),
                                        len: 0,
                                        buf: base.cast(),
                                        data: 0,
                                        tag: 0,
                                    };
                                    let _ = c.cq.push(&e, ADDR_NOTAVAIL);
                                }
                            }
                            work += 1;
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            return (work, Stop::Empty)
                        }
                        Err(e) if is_refused(&e) && !refused => {
                            refused = true;
                            rounds -= 1;
                            continue;
                        }
                        Err(e) => {
                            ofi_core::ofi_debug!(NAME, "ep_data", "recvmsg (peek): {e}");
                            return (work, Stop::Empty);
                        }
                    }
                }
            } else {
                region_len = p.iov.total;
            }
            let used = if p.multi { 2 } else { n };
            let r = if !p.multi && region_len <= SMALL_RECV {
                // Small receive: one recvfrom into a stack buffer, then a copy of at most
                // SMALL_RECV bytes (cheaper than recvmsg's header and vector imports).
                let mut b = [0u8; HDR_LEN + SMALL_RECV];
                sock.recv_into(&mut b[..HDR_LEN + region_len], self.source)
                    .map(|(len, src)| {
                        let got = len.min(HDR_LEN + region_len);
                        let h = got.min(HDR_LEN);
                        hdr[..h].copy_from_slice(&b[..h]);
                        // SAFETY: the posted iovecs are the application's buffers, valid
                        // for writing until this receive completes (caller's contract).
                        unsafe { p.iov.scatter(&b[h..got]) };
                        (len, src)
                    })
            } else {
                // SAFETY: the iovecs point at `hdr` and at the posted application
                // buffers, which stay valid until this receive completes (caller's
                // contract).
                unsafe { sock.recv_from(&mut vecs[..used], false) }
            };
            let (len, src) = match r {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (work, Stop::Empty),
                // A peer socket's report of an ICMP "port unreachable" for an earlier
                // datagram (reading it clears it): look again, once.
                Err(e) if is_refused(&e) && !refused => {
                    refused = true;
                    rounds -= 1;
                    continue;
                }
                Err(e) => {
                    ofi_core::ofi_debug!(NAME, "ep_data", "recvmsg: {e}");
                    return (work, Stop::Empty);
                }
            };
            work += 1;
            let h = match Header::from_bytes(&hdr[..len.min(HDR_LEN)]) {
                Ok(h) => h,
                Err(e) => {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                    ofi_core::ofi_debug!(
                        NAME,
                        "ep_data",
                        "dropped a malformed datagram from {src:?}: {e}"
                    );
                    continue;
                }
            };
            let payload = len - HDR_LEN;
            let got = payload.min(region_len);
            let buf = vecs[1].iov_base;
            let mut cflags = RECV_FLAGS;
            let data = match h.cq_data() {
                Some(d) => {
                    cflags |= OpFlags::REMOTE_CQ_DATA.bits();
                    d
                }
                None => 0,
            };
            let (ctx, op_flags) = (p.context, p.flags);
            let release = if p.multi {
                p.offset += got;
                p.iov.total - p.offset < p.min_multi
            } else {
                true
            };
            if p.multi && release {
                cflags |= OpFlags::MULTI_RECV.bits();
            }
            if release {
                q.pop_front();
            }
            self.complete_recv(act, ctx, op_flags, cflags, buf, got, payload, data, &src);
        }
        (work, Stop::Budget)
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let p = {
            let mut q = lock(&self.rx);
            match q.iter().position(|p| p.context == context) {
                Some(i) => q.remove(i),
                None => None,
            }
        };
        let Some(p) = p else {
            return Err(Error::new(
                Errno::ENOENT,
                "udp: no queued operation has this context",
            ));
        };
        if let Some(c) = self.active.get().and_then(|a| a.rx_cq.as_ref()) {
            let mut flags = RECV_FLAGS;
            if p.multi {
                flags |= OpFlags::MULTI_RECV.bits();
            }
            let mut e = CqError::new(context, Errno::ECANCELED);
            e.flags = flags;
            e.buf = p.iov.first_base() as usize;
            let _ = c.cq.push_err(e);
        }
        Ok(())
    }
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        self.poll_rx()
    }

    /// The socket while a receive is posted (sends complete when posted; datagrams
    /// without a receive stay in the socket and must not wake a waiter).
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        if let Some(act) = self.active.get() {
            if !lock(&self.rx).is_empty() {
                act.each_fd(|fd| out.push(FdInterest::read(fd)));
            }
        }
        true
    }
}

const BIND_RULES: BindRules = BindRules {
    prov: "udp",
    eq: true,
};

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let me = &*self.inner;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "udp: fi_ep_bind after fi_enable",
            ));
        }
        s.b.bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        let me = &*self.inner;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Ok(());
        }
        let av = s.b.require_for_enable("udp")?;
        let Some(sock) = s.sock.take() else {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "udp: endpoint has no socket",
            ));
        };
        let local = match sock.local_addr() {
            Ok(a) => a,
            Err(e) => {
                let err = os_error(&e, "getsockname");
                s.sock = Some(sock);
                return Err(err);
            }
        };
        let act = Active {
            sock,
            peers: PeerSocks::new(&me.settings, local),
            local,
            av,
            tx_cq: s.b.txcq.clone(),
            rx_cq: s.b.rxcq.clone(),
            tx_cntr: s.b.txcntr.clone(),
            rx_cntr: s.b.rxcntr.clone(),
            eq: s.b.eq.clone(),
        };
        if me.active.set(act).is_err() {
            return Err(Error::new(Errno::EOPBADSTATE, "udp: enabled twice"));
        }
        me.engine.kick();
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        self.inner.cancel(context)
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        if level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV {
            return Err(Error::new(
                Errno::ENOPROTOOPT,
                format!("udp: option {level}/{optname} is not supported"),
            ));
        }
        let v = self
            .inner
            .min_multi_recv
            .load(Ordering::Relaxed)
            .to_ne_bytes();
        let Some(dst) = optval.get_mut(..v.len()) else {
            return Err(Error::new(
                Errno::ETOOSMALL,
                format!("udp: FI_OPT_MIN_MULTI_RECV needs {} bytes", v.len()),
            ));
        };
        dst.copy_from_slice(&v);
        Ok(v.len())
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        if level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV {
            return Err(Error::new(
                Errno::ENOPROTOOPT,
                format!("udp: option {level}/{optname} is not supported"),
            ));
        }
        let Ok(b) = <[u8; std::mem::size_of::<usize>()]>::try_from(optval) else {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "udp: FI_OPT_MIN_MULTI_RECV takes a size_t ({} bytes), got {}",
                    std::mem::size_of::<usize>(),
                    optval.len()
                ),
            ));
        };
        self.inner
            .min_multi_recv
            .store(usize::from_ne_bytes(b), Ordering::Relaxed);
        Ok(())
    }

    fn rx_size_left(&self) -> Result<usize> {
        self.inner.active()?;
        let n = lock(&self.inner.rx).len();
        Ok(self.inner.settings.rx_size.saturating_sub(n))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let act = self.inner.active()?;
        Ok(match &act.tx_cq {
            Some(c) => c.cq.room().min(self.inner.settings.tx_size),
            None => self.inner.settings.tx_size,
        })
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        let me = &*self.inner;
        let a = Address::from_bytes(me.addr_format, addr)?;
        let sa = addr_to_std(&a)?;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "udp: fi_setname after fi_enable",
            ));
        }
        s.sock = Some(open_sock(&me.settings, &sa)?);
        Ok(())
    }

    /// Joins the group on the socket (receiving what is sent to it, if the socket is
    /// bound to the wildcard address and the group's port) and inserts the group's
    /// address into the bound AV: the returned fabric address sends to the group.
    /// Needs an enabled endpoint (`FI_EOPBADSTATE`), a multicast address of the
    /// socket's family (`FI_EINVAL`); flags other than `FI_SEND`/`FI_RECV` are
    /// `FI_EBADFLAGS` (`FI_SEND` alone: send-only, no membership). Completes at once;
    /// with an EQ bound, `FI_JOIN_COMPLETE` (fid = the endpoint's context, with
    /// `context`) is queued.
    fn join(&self, addr: &Address, flags: u64, context: usize) -> Result<u64> {
        let me = &*self.inner;
        let Some(act) = me.active.get() else {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "udp: fi_join before fi_enable",
            ));
        };
        let known = OpFlags::SEND.bits() | OpFlags::RECV.bits();
        if flags & !known != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("udp: fi_join flags {:#x} are not supported", flags & !known),
            ));
        }
        let sa = addr_to_std(addr)?;
        if !sa.ip().is_multicast() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("udp: fi_join: {sa} is not a multicast address"),
            ));
        }
        if sa.is_ipv6() != act.sock.is_v6() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("udp: fi_join: {sa} is not of the endpoint's address family"),
            ));
        }
        let member = flags != OpFlags::SEND.bits();
        let ifaddr = me
            .settings
            .mcast_if
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        if member {
            act.sock
                .membership(&sa.ip(), ifaddr, 0, true)
                .map_err(|e| os_error(&e, &format!("fi_join {sa}")))?;
        }
        let key = me.to_address(sa);
        let inserted = act
            .av
            .insert(std::slice::from_ref(&key), 0, 0)
            .and_then(|mut r| r.pop().unwrap_or(Err(code(Errno::EOTHER))));
        let fi_addr = match inserted {
            Ok(a) => a,
            Err(e) => {
                if member {
                    let _ = act.sock.membership(&sa.ip(), ifaddr, 0, false);
                }
                return Err(e);
            }
        };
        lock(&me.groups).push((fi_addr, member));
        if let Some(eq) = &act.eq {
            let _ = eq.push(Event {
                event: EqEvent::JoinComplete,
                fid: me.context,
                context,
                data: 0,
                info: None,
                cm_data: Vec::new(),
            });
        }
        Ok(fi_addr)
    }

    /// Leaves the group joined as `fi_addr` and removes it from the AV.
    fn leave(&self, fi_addr: u64) -> Result<()> {
        let me = &*self.inner;
        let act = me.active()?;
        let member = {
            let mut g = lock(&me.groups);
            let Some(i) = g.iter().position(|(a, _)| *a == fi_addr) else {
                return Err(Error::new(
                    Errno::ENOENT,
                    format!("udp: {fi_addr:#x} is not a joined group"),
                ));
            };
            g.remove(i).1
        };
        let sa = addr_to_std(&act.av.lookup(fi_addr)?)?;
        if member {
            let ifaddr = me
                .settings
                .mcast_if
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
            if let Err(e) = act.sock.membership(&sa.ip(), ifaddr, 0, false) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "leaving {sa}: {e}");
            }
        }
        act.av.remove(&[fi_addr], 0)
    }

    /// The bound address; bound to the wildcard address, the address a peer reaches
    /// it at instead: `FI_UDP_IFACE`'s, else the first up non-loopback interface's
    /// (loopback only when there is no other), with the bound port.
    fn getname(&self) -> Result<Vec<u8>> {
        let mut sa = self.inner.local_addr()?;
        if sa.ip().is_unspecified() {
            let v6 = sa.is_ipv6();
            let ip = match &self.inner.settings.iface {
                Some(i) => crate::iface_ip(i, v6)?,
                None => None,
            };
            sa.set_ip(ip.unwrap_or_else(|| ofi_kit::netif::default_ip(v6)));
        }
        Ok(self.inner.to_address(sa).to_bytes())
    }

    unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        _desc: Desc,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        let iov = UserIov::one(buf as *mut libc::c_void, len)?;
        let f = self.inner.tx_op_flags;
        // SAFETY: caller's contract.
        unsafe { self.inner.send_common(&iov, dest, context, None, f, false) }
    }

    unsafe fn sendv(&self, iov: &[Iov], _desc: &[Desc], dest: u64, context: usize) -> Result<()> {
        let iov = UserIov::from_iov(iov)?;
        let f = self.inner.tx_op_flags;
        // SAFETY: caller's contract.
        unsafe { self.inner.send_common(&iov, dest, context, None, f, false) }
    }

    unsafe fn sendmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        // SAFETY: caller's contract for `msg`.
        let iov = unsafe { UserIov::from_msg(msg) }?;
        let data = flags.contains(OpFlags::REMOTE_CQ_DATA).then_some(msg.data);
        // SAFETY: caller's contract.
        unsafe {
            self.inner
                .send_common(&iov, msg.addr, msg.context, data, flags, false)
        }
    }

    unsafe fn inject(&self, buf: *const u8, len: usize, dest: u64) -> Result<()> {
        let iov = UserIov::one(buf as *mut libc::c_void, len)?;
        // SAFETY: caller's contract.
        unsafe {
            self.inner
                .send_common(&iov, dest, 0, None, OpFlags::empty(), true)
        }
    }

    unsafe fn senddata(
        &self,
        buf: *const u8,
        len: usize,
        _desc: Desc,
        data: u64,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        let iov = UserIov::one(buf as *mut libc::c_void, len)?;
        let f = self.inner.tx_op_flags;
        // SAFETY: caller's contract.
        unsafe {
            self.inner
                .send_common(&iov, dest, context, Some(data), f, false)
        }
    }

    unsafe fn injectdata(&self, buf: *const u8, len: usize, data: u64, dest: u64) -> Result<()> {
        let iov = UserIov::one(buf as *mut libc::c_void, len)?;
        // SAFETY: caller's contract.
        unsafe {
            self.inner
                .send_common(&iov, dest, 0, Some(data), OpFlags::empty(), true)
        }
    }

    unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        _desc: Desc,
        _src: u64,
        context: usize,
    ) -> Result<()> {
        let iov = UserIov::one(buf.cast(), len)?;
        self.inner.post_recv(iov, context, self.inner.rx_op_flags)
    }

    unsafe fn recvv(&self, iov: &[Iov], _desc: &[Desc], _src: u64, context: usize) -> Result<()> {
        let iov = UserIov::from_iov(iov)?;
        self.inner.post_recv(iov, context, self.inner.rx_op_flags)
    }

    unsafe fn recvmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        // SAFETY: caller's contract for `msg`.
        let iov = unsafe { UserIov::from_msg(msg) }?;
        self.inner.post_recv(iov, msg.context, flags)
    }

    /// Stops progress on the endpoint and forgets its posted receives (their buffers
    /// are the application's again; no completions are generated).
    fn close(&self) -> Result<()> {
        self.inner.engine.unregister(&self.inner);
        lock(&self.inner.rx).clear();
        Ok(())
    }
}
