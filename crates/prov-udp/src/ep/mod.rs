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
//!
//! # Files
//!
//! This file holds the endpoint's state ([`Endpoint`], `EpInner`, what `fi_enable`
//! froze in `Active`) and its opening; `iov` the application's buffers in kernel form,
//! `peers` the peer sockets, `datapath` the message calls as kit hands them over, `tx`
//! the send path, `rx` the receive queue and progress, `ops` the `fi_ops` entry points,
//! `wait` the wait descriptor of `FI_GETWAIT`.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::attr::Info;
use ofi_core::cq::CqError;
use ofi_core::enums::EqEvent;
use ofi_core::eq::Event;
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{AddrFormat, Address, Caps, EpType, Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::av::KitAv;
use ofi_kit::cntr::KitCntr;
use ofi_kit::ep::{BindRules, Bindings, CqBinding};
use ofi_kit::eq::KitEq;
use ofi_kit::opflags::DefaultOpFlags;
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

use ofi_kit::wait::lock;

/// An OS error as a fabric error (same errno value), with what was being done.
fn os_error(e: &io::Error, what: &str) -> Error {
    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
    Error::new(errno, format!("{NAME}: {what}: {e}"))
}

mod datapath;
mod iov;
mod ops;
mod peers;
mod rx;
mod tx;
mod wait;

use iov::UserIov;
use peers::PeerSocks;

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

/// What `fi_enable` froze: read by the data path without a lock. Public only as the
/// endpoint's [`DataPath::Active`](ofi_kit::dataops::DataPath::Active) (kit hands it to
/// the data calls); opaque.
pub struct Active {
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
    /// The DSCP value of the endpoint's traffic class, on each of its sockets.
    dscp: Option<u8>,
    settings: Settings,
    addr_format: AddrFormat,
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
    /// The wait descriptor `FI_GETWAIT` gave (an epoll set of the endpoint's sockets,
    /// see `wait`), made at the first such call.
    wait_set: Mutex<Option<std::os::fd::OwnedFd>>,
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
    /// This handle's default operation flags (an alias has its own).
    op_flags: DefaultOpFlags,
    /// An alias (`fi_ep_alias`): closing it leaves the endpoint as it is.
    alias: bool,
}

ofi_kit::debug_fields!(Endpoint, |ep| {
    addr_format: ep.inner.addr_format,
    enabled: ep.inner.active.get().is_some(),
});

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
            format!("{NAME}: address {a} is not an IP socket address"),
        )
    })
}

/// A socket bound to `addr`, with the multicast interface set when configured and the
/// endpoint's traffic class (`dscp`).
fn open_sock(settings: &Settings, dscp: Option<u8>, addr: &SocketAddr) -> Result<UdpSock> {
    let sock = UdpSock::bind(addr, settings.sndbuf, settings.rcvbuf)
        .map_err(|e| os_error(&e, &format!("cannot bind a socket to {addr}")))?;
    if let Some(d) = dscp {
        sock.set_dscp(d)
            .map_err(|e| os_error(&e, "cannot set the traffic class"))?;
    }
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
                format!("{NAME}: cannot open a {} endpoint", info.ep_attr.ep_type),
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
                    format!("{NAME}: address format {f} is not supported"),
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
        let op_flags = DefaultOpFlags::from_attrs(
            NAME,
            info.tx_attr.op_flags,
            info.rx_attr.op_flags,
            ops::OP_FLAGS,
        )?;
        let dscp = ofi_core::control::endpoint_dscp(info).map_err(|e| e.context(NAME))?;
        let sock = open_sock(&settings, dscp, &addr)?;
        let inner = Arc::new(EpInner {
            settings,
            dscp,
            addr_format,
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
            wait_set: Mutex::new(None),
            rx_hot: AtomicUsize::new(0),
            rx_wait: AtomicUsize::new(0),
            rx_gap: AtomicUsize::new(1),
            rx_rr: AtomicUsize::new(0),
        });
        inner.engine.register(&inner);
        inner.hub.add(&inner);
        Ok(Endpoint {
            inner,
            op_flags,
            alias: false,
        })
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
                format!("{NAME}: endpoint has no socket"),
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
    fn source_of(&self, active: &Active, src: &SockAddr) -> (u64, Option<Address>) {
        let Some(sa) = src.to_std() else {
            return (ADDR_NOTAVAIL, None);
        };
        let mut last = lock(&self.last_src);
        if let Some((cached, fi)) = *last {
            if cached == sa {
                let same = active.av.with_entry(fi, |e| {
                    (e.peer.addr.to_std() == Some(sa)).then(|| e.user_id.unwrap_or(e.fi_addr))
                });
                if let Ok(Some(reported)) = same {
                    return (reported, None);
                }
            }
        }
        let a = self.to_address(sa);
        let found = active
            .av
            .reverse_lookup(&a)
            .map(|fi| (fi, active.av.reported(fi)));
        *last = found.map(|(fi, _)| (sa, fi));
        (found.map_or(ADDR_NOTAVAIL, |(_, r)| r), Some(a))
    }

    /// For the watcher: append the sockets to poll (the endpoint's and its peer
    /// sockets) if this endpoint is enabled and has a receive posted, and say so;
    /// otherwise `false`, and the next posted receive wakes the watcher.
    pub(crate) fn watch_fds(&self, out: &mut Vec<libc::pollfd>) -> bool {
        let Some(active) = self.active.get() else {
            return false;
        };
        self.unwatched.store(true, Ordering::SeqCst);
        if lock(&self.rx).is_empty() {
            return false;
        }
        self.unwatched.store(false, Ordering::SeqCst);
        active.each_fd(|fd| {
            out.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
        });
        true
    }
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        self.poll_rx()
    }

    /// The socket while a receive is posted (sends complete when posted; datagrams
    /// without a receive stay in the socket and must not wake a waiter).
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        if let Some(active) = self.active.get() {
            if !lock(&self.rx).is_empty() {
                active.each_fd(|fd| out.push(FdInterest::read(fd)));
            }
        }
        true
    }
}
