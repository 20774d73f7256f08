//! The active endpoint: connection management and the data path.
//!
//! # State
//!
//! One `Mutex<St>` per endpoint holds the socket, the connection state, the transmit
//! queue, the receive state machine, kit's tag matcher and the operations waiting for
//! a response (reads, acknowledged writes, delivery-complete sends). The data calls and
//! the progress function take it; progress uses `try_lock`, so a thread that posts
//! never waits behind a progress round and vice versa.
//!
//! # Transmit
//!
//! An operation is one header block (header plus remote iovs) and a payload given as up
//! to four segments. When nothing is queued it is written at once with one
//! `sendmsg` of header and payload; what the kernel did not take is queued (an inject's
//! remainder copied into the queue entry, other payloads by reference: the application
//! keeps them valid until completion) and progress writes it later.
//!
//! # Receive
//!
//! Progress reads the 40-byte header, then the remote iovs, then places the payload:
//! a message that matches a posted receive is read with `readv` straight into the
//! receive's buffers (what arrived in the same read-ahead as the header, at most
//! `FI_TCP_READ_AHEAD` bytes, is copied from there); an unexpected one into an owned buffer the matcher holds (its
//! limits bound the memory: when full, the endpoint stops reading the socket until
//! receives are posted); RMA writes go to the registered region after `MrTable`
//! checks; read responses into the initiator's buffers. Every round does a bounded
//! amount of work.
//!
//! # Same-host copies
//!
//! On a connection between two processes of this host (see the crate docs), each side
//! offers a nonce once connected and verifies the peer's proof with a real
//! `process_vm_readv` (the `Local` state of each connection); the nonce is never kept in plain form (masked with a
//! per-process key) so no other process can find it in this one's memory. Once the
//! peer has verified this side, sends and RMA reads of at least `cma_threshold` bytes
//! go as descriptors: the send waits (as a pending operation) for the receiver's `Ack`,
//! the receiver copies from the sender with `process_vm_readv` straight into the
//! matched buffer (or into an unexpected-message buffer, under the same limits), and a
//! read's target copies into the initiator with `process_vm_writev`. Descriptors are
//! accepted only from a verified peer; the copies only touch the verified peer's memory
//! (the kernel checks its addresses) and buffers this side owns or has checked.
//!
//! Application buffers travel as addresses (`Segs`) from the `unsafe` data calls,
//! whose contract keeps them valid until the operation completes; a private function
//! handed raw pointers or iocs from elsewhere (`iov_slice`, `rma_slice`, `take`,
//! `atomic_common`) is an `unsafe fn`. Registered memory, which a same-host peer's copy
//! may write at any moment, is never borrowed as `&[u8]`/`&mut [u8]`: an atomic copies
//! its target out and back through raw pointers under the stripe locks.
//!
//! # Failure
//!
//! End of stream or a socket error: queued and pending operations complete with
//! `FI_ECONNRESET` (posted receives with `FI_ECANCELED`), `FI_SHUTDOWN` goes to the EQ.
//! Malformed bytes: the same, with an `FI_EPROTO` error event instead.
//!
//! Nothing here panics on peer or application input.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

use ofi_core::abi::raw::{CqTaggedEntry, Ioc, Iov};
use ofi_core::attr::Info;
use ofi_core::cq::CqError;
use ofi_core::enums::ADDR_NOTAVAIL;
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::eq::EqErrorEntry;
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{AddrFormat, Address, Errno, Error, OpFlags, Result};
use ofi_kit::cntr::KitCntr;
use ofi_kit::cq::KitCq;
use ofi_kit::dataops::DataPath;
use ofi_kit::eq::KitEq;
use ofi_kit::iov::IoList;
use ofi_kit::mr::MrEndpointTarget;
use ofi_kit::progress::{FdInterest, Progress};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{
    Incoming, Match, MatcherConfig, Placement, PostOutcome, PostedRecv, TagMatcher, UnexpectedMsg,
};

use crate::fabric::{bind_addr, lock, DomainShared, Fabric, OPT_CM_DATA_SIZE, OPT_ENDPOINT};
use crate::proto::{
    self, CmHdr, CmKind, Hdr, Op, RmaIov, CM_DATA_SIZE, CM_HDR_LEN, FLAG_ACK_REQ, FLAG_CQ_DATA,
    FLAG_LOCAL, HDR_LEN, HDR_MAX, RMA_IOV_LEN,
};
use crate::sock::{iovec, Sock};
use crate::{IOV_LIMIT, NAME};

/// Largest inject (payload bytes copied into a queue entry when the socket is full).
pub const INLINE_MAX: usize = 128;
/// `FI_OPT_MIN_MULTI_RECV` (option name).
const OPT_MIN_MULTI_RECV: i32 = 0;
/// Most segments of one payload.
const SEGS_MAX: usize = 4;
/// Messages handled per progress round.
const ROUND: usize = 16;
/// Read rounds [`EpInner::fail_after_write`] spends delivering what a closed peer sent.
const DRAIN_ROUNDS: usize = 4096;

/// `getopt` for the CM options shared by endpoints and passive endpoints.
pub(crate) fn cm_getopt(level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
    if level != OPT_ENDPOINT || optname != OPT_CM_DATA_SIZE {
        return Err(Error::new(Errno::ENOPROTOOPT, "tcp: option not supported"));
    }
    let v = CM_DATA_SIZE.to_ne_bytes();
    let Some(out) = optval.get_mut(..v.len()) else {
        return Err(Error::new(
            Errno::ETOOSMALL,
            "tcp: FI_OPT_CM_DATA_SIZE needs a size_t",
        ));
    };
    out.copy_from_slice(&v);
    Ok(v.len())
}

/// `setopt` for the CM options: `FI_OPT_CM_DATA_SIZE` may be lowered, not raised.
pub(crate) fn cm_setopt(level: i32, optname: i32, optval: &[u8]) -> Result<()> {
    if level != OPT_ENDPOINT || optname != OPT_CM_DATA_SIZE {
        return Err(Error::new(Errno::ENOPROTOOPT, "tcp: option not supported"));
    }
    let Ok(b) = <[u8; 8]>::try_from(optval) else {
        return Err(Error::new(
            Errno::EINVAL,
            "tcp: FI_OPT_CM_DATA_SIZE takes a size_t",
        ));
    };
    if usize::from_ne_bytes(b) > CM_DATA_SIZE {
        return Err(Error::new(
            Errno::EINVAL,
            format!("tcp: FI_OPT_CM_DATA_SIZE is at most {CM_DATA_SIZE}"),
        ));
    }
    Ok(())
}

/// Up to [`SEGS_MAX`] `(address, length)` segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Segs {
    s: [(usize, usize); SEGS_MAX],
    n: usize,
}

impl Segs {
    fn one(base: usize, len: usize) -> Segs {
        let mut s = Segs::default();
        s.push(base, len);
        s
    }

    fn push(&mut self, base: usize, len: usize) -> bool {
        if self.n >= SEGS_MAX {
            return false;
        }
        self.s[self.n] = (base, len);
        self.n += 1;
        true
    }

    fn from_list(l: &IoList) -> Segs {
        let mut s = Segs::default();
        for &(base, len) in l.slice() {
            s.push(base, len);
        }
        s
    }

    fn from_iov(iov: &[Iov]) -> Result<Segs> {
        if iov.len() > IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!("tcp: {} iov entries (at most {IOV_LIMIT})", iov.len()),
            ));
        }
        let mut s = Segs::default();
        for v in iov {
            s.push(v.base as usize, v.len);
        }
        s.total()?;
        Ok(s)
    }

    fn segs(&self) -> &[(usize, usize)] {
        &self.s[..self.n]
    }

    fn total(&self) -> Result<usize> {
        self.segs()
            .iter()
            .try_fold(0usize, |a, &(_, l)| a.checked_add(l))
            .ok_or_else(|| Error::new(Errno::EINVAL, "tcp: iov lengths overflow"))
    }

    fn base(&self) -> usize {
        self.s[0].0
    }

    /// The `len` bytes starting at byte `off`.
    fn window(&self, mut off: usize, mut len: usize) -> Segs {
        let mut w = Segs::default();
        for &(b, l) in self.segs() {
            if len == 0 {
                break;
            }
            if off >= l {
                off -= l;
                continue;
            }
            let take = (l - off).min(len);
            w.push(b + off, take);
            len -= take;
            off = 0;
        }
        w
    }

    /// iovecs for the bytes from `off` on, at most `max` bytes; the count written.
    fn iovecs(&self, mut off: usize, mut max: usize, out: &mut [libc::iovec]) -> usize {
        let mut n = 0;
        for &(b, l) in self.segs() {
            if max == 0 || n >= out.len() {
                break;
            }
            if off >= l {
                off -= l;
                continue;
            }
            let take = (l - off).min(max);
            out[n] = iovec(b + off, take);
            n += 1;
            max -= take;
            off = 0;
        }
        n
    }

    /// Copy `data` into the segments.
    ///
    /// # Safety
    /// The segments are writable for their lengths.
    unsafe fn copy_in(&self, mut data: &[u8]) {
        for &(b, l) in self.segs() {
            let n = l.min(data.len());
            if n == 0 {
                break;
            }
            // SAFETY: the caller vouches for the segment; data has n bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b as *mut u8, n) };
            data = &data[n..];
        }
    }
}

/// A transmit payload.
#[derive(Debug)]
enum Payload {
    Segs(Segs),
    Inline([u8; INLINE_MAX], usize),
    /// An owned buffer (atomic operands and results; its heap bytes do not move).
    Owned(Vec<u8>),
}

impl Payload {
    fn segs(&self) -> Segs {
        match self {
            Payload::Segs(s) => *s,
            Payload::Inline(b, n) => Segs::one(b.as_ptr() as usize, *n),
            Payload::Owned(v) => Segs::one(v.as_ptr() as usize, v.len()),
        }
    }
}

/// Which counter an operation counts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CntrKind {
    Send,
    Read,
    Write,
}

/// The completion of a transmit-side operation.
#[derive(Clone, Copy, Debug)]
struct Comp {
    ctx: usize,
    flags: u64,
    len: usize,
    buf: usize,
    /// Write a CQ entry (else only counters).
    report: bool,
    cntr: CntrKind,
}

/// A queued transmit.
#[derive(Debug)]
struct TxOp {
    hdr: [u8; HDR_MAX],
    hdr_len: usize,
    pl: Payload,
    total: usize,
    sent: usize,
    comp: Option<Comp>,
}

/// An operation waiting for its response.
#[derive(Debug)]
struct Pending {
    id: u64,
    comp: Comp,
    /// Which response completes it.
    kind: PendKind,
    /// Where a read's data or an atomic's original values go.
    read: Option<Segs>,
}

/// The response a pending operation waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PendKind {
    Ack,
    Read,
    Atomic,
}

/// A receive buffer as the matcher holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RBuf {
    segs: Segs,
}

/// A finished receive as [`EpInner::rx_done`] reports it.
#[derive(Clone, Copy, Debug)]
struct RxDone {
    ctx: usize,
    /// Flags besides `FI_RECV`, `FI_MSG` / `FI_TAGGED` and `FI_REMOTE_CQ_DATA`.
    flags: OpFlags,
    buf: usize,
    /// Bytes placed.
    len: usize,
    /// Bytes that did not fit (a truncation error when not 0).
    olen: usize,
    /// The message's remote CQ data, if it carried any.
    data: Option<u64>,
    /// The tag of a tagged message.
    tag: Option<u64>,
    /// Write a CQ entry (else only the counter).
    report: bool,
}

/// Where the payload being read goes.
#[derive(Debug)]
enum Sink {
    Recv {
        recv: PostedRecv<RBuf>,
        segs: Segs,
        keep: usize,
        truncated: bool,
        multi_released: Option<bool>,
    },
    Unexp(Vec<u8>),
    Write {
        segs: Segs,
        status: u16,
    },
    ReadRsp(Pending),
    /// Atomic operands (and compare values), applied when all are in.
    Atomic(Vec<u8>),
}

/// The receive state (boxed sinks would cost an allocation per message; the size
/// difference is accepted).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Rx {
    Hdr {
        got: usize,
    },
    Rma {
        hdr: Hdr,
        got: usize,
    },
    Body {
        hdr: Hdr,
        sink: Sink,
        off: usize,
    },
    /// A message header waits for room among the unexpected messages.
    Stalled {
        hdr: Hdr,
    },
}

#[derive(Debug, PartialEq, Eq)]
enum Conn {
    Idle,
    Connecting { req: Vec<u8>, sent: usize },
    AwaitResp { buf: Vec<u8> },
    Accepting,
    Connected,
    Shutdown,
}

#[derive(Debug, Default)]
struct Binds {
    tx_cq: Option<KitCq>,
    rx_cq: Option<KitCq>,
    tx_sel: bool,
    rx_sel: bool,
    eq: Option<KitEq>,
    c_send: Option<KitCntr>,
    c_recv: Option<KitCntr>,
    c_read: Option<KitCntr>,
    c_write: Option<KitCntr>,
}

struct St {
    conn: Conn,
    sock: Option<Sock>,
    peer: Option<SocketAddr>,
    enabled: bool,
    b: Binds,
    tx: VecDeque<TxOp>,
    pending: VecDeque<Pending>,
    rx: Rx,
    hbuf: [u8; HDR_MAX],
    matcher: TagMatcher<RBuf, Vec<u8>>,
    next_id: u64,
    scratch: Vec<u8>,
    /// Bytes read ahead of the parser (see [`RxStage`]).
    stage: RxStage,
    /// Same-host copies on this connection.
    local: Local,
}

/// The same-host copy state of one connection (see the module docs).
#[derive(Debug, Default)]
struct Local {
    /// Both ends are on this host and copies are not disabled.
    eligible: bool,
    /// The nonce offered to the peer, masked with [`process_key`]; cleared once the
    /// peer's proof has been checked.
    offered: Option<u64>,
    /// The peer's pid, once its proof held: descriptors from it are accepted and this
    /// side copies from / into its memory.
    peer_pid: Option<i32>,
    /// A proof was sent (a `LocalOk` may come).
    proved: bool,
    /// The peer verified this side: large sends and reads go as descriptors.
    tx_ok: bool,
}

/// A random key of this process that masks offered nonces in memory.
fn process_key() -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    *KEY.get_or_init(ofi_kit::cma::random_u64)
}

/// Whether a connection between `local` and `peer` stays on this host.
fn same_host(local: &SocketAddr, peer: &SocketAddr) -> bool {
    peer.ip().is_loopback() || peer.ip() == local.ip()
}

/// Bytes read from the socket ahead of the parser (`FI_TCP_READ_AHEAD` of them), so
/// that a small message — header and payload — costs one `recv` instead of two. Reads
/// for at least that many bytes go straight to their destination (all of them when the
/// read-ahead is 0). Invariant: `start <= end <= buf.len()`;
/// staged bytes are consumed before the socket is read again, so the byte order of
/// the stream is kept. While bytes are staged the socket may not be readable although
/// work is pending, so the endpoint then asks waiters to poll (`wait_fds`).
struct RxStage {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl RxStage {
    fn new(len: usize) -> RxStage {
        RxStage {
            buf: vec![0u8; len].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Staged bytes not yet consumed.
    fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Move up to `n` staged bytes into `dst` (one copy); how many.
    ///
    /// # Safety
    /// `dst` is valid for writes of `n` bytes and does not overlap the staging buffer.
    unsafe fn take(&mut self, dst: *mut u8, n: usize) -> usize {
        let k = n.min(self.pending());
        // SAFETY: `start..start + k` lies in `buf`; the caller gives `dst` writable for
        // `n >= k` bytes, and it is not inside `buf` (our own allocation).
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.start), dst, k) };
        self.start += k;
        k
    }

    /// Read into `dst` (non-empty): staged bytes first; else, for a `dst` shorter than
    /// the read-ahead, one read-ahead; else the socket directly. `Ok(0)` is the end of
    /// the stream.
    fn recv(&mut self, sock: &Sock, dst: &mut [u8]) -> io::Result<usize> {
        if self.pending() > 0 {
            // SAFETY: `dst` is a distinct writable slice of its length.
            return Ok(unsafe { self.take(dst.as_mut_ptr(), dst.len()) });
        }
        if dst.len() >= self.buf.len() {
            return sock.recv(dst);
        }
        let n = sock.recv(&mut self.buf)?;
        self.start = 0;
        self.end = n;
        // SAFETY: as above.
        Ok(unsafe { self.take(dst.as_mut_ptr(), dst.len()) })
    }

    /// Read into the buffers `iov` describes: staged bytes first (scattered in order),
    /// else `readv` on the socket.
    ///
    /// # Safety
    /// Every entry of `iov` is writable for its length.
    unsafe fn readv(&mut self, sock: &Sock, iov: &[libc::iovec]) -> io::Result<usize> {
        if self.pending() == 0 {
            // SAFETY: caller's contract.
            return unsafe { sock.readv(iov) };
        }
        let mut done = 0;
        for v in iov {
            if self.pending() == 0 {
                break;
            }
            // SAFETY: our contract: `v` is writable for its length (and an application
            // buffer, not our staging buffer).
            done += unsafe { self.take(v.iov_base.cast(), v.iov_len) };
        }
        Ok(done)
    }
}

/// The shared part of an endpoint (registered with both progress engines).
pub(crate) struct EpInner {
    id: u64,
    fid: usize,
    dom: Arc<DomainShared>,
    info: Info,
    tx_flags: OpFlags,
    rx_flags: OpFlags,
    max_msg: usize,
    inject_size: usize,
    tx_size: usize,
    /// Smallest payload sent as a same-host descriptor (`usize::MAX`: never).
    cma_threshold: usize,
    /// The word the peer reads to check this side's proof (holds its nonce).
    proof: AtomicU64,
    /// Whether progress has anything to look at (connecting or connected).
    active: AtomicBool,
    /// The connected socket's descriptor, for the CM source's hang-up watch without
    /// taking `st` (which the data path holds most of the time); -1 when not
    /// connected. Cleared before the socket is closed: a stale read at worst makes a
    /// waiter poll a closed descriptor, which wakes it (POLLNVAL), nothing more.
    cm_watch: AtomicI32,
    st: Mutex<St>,
}

/// An active `FI_EP_MSG` endpoint.
pub struct Endpoint {
    inner: Arc<EpInner>,
    /// The connection-management source registered with the fabric's CM engine.
    cm: Arc<CmSource>,
}

/// Drives an endpoint's connection setup (connect / await response) from the fabric's
/// CM engine — and so from EQ reads, or the CM thread with `FI_PROGRESS_AUTO` control
/// progress — without touching the data path of connected endpoints.
pub(crate) struct CmSource(std::sync::Weak<EpInner>);

impl Progress for CmSource {
    fn progress(&self) -> usize {
        let Some(ep) = self.0.upgrade() else {
            return 0;
        };
        if !ep.active.load(Ordering::Acquire) {
            return 0;
        }
        let Ok(mut st) = ep.st.try_lock() else {
            return 0;
        };
        match st.conn {
            Conn::Connecting { .. } | Conn::AwaitResp { .. } => ep.progress_connect(&mut st),
            Conn::Connected => {
                // Only notice a closed or failed connection here (one poll, no reads),
                // so FI_SHUTDOWN reaches the EQ without the data path being driven.
                let ev = st
                    .sock
                    .as_ref()
                    .and_then(|s| s.poll(libc::POLLRDHUP, 0).ok())
                    .unwrap_or(0);
                if ev & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
                    ep.progress_locked(&mut st)
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Connecting: writable (the connect completes); awaiting the response: readable;
    /// connected: only a hang-up (the data path reads the socket).
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        let Some(ep) = self.0.upgrade() else {
            return true;
        };
        if !ep.active.load(Ordering::Acquire) {
            return true;
        }
        let watch = ep.cm_watch.load(Ordering::Acquire);
        if watch >= 0 {
            out.push(FdInterest::hangup(watch));
            return true;
        }
        let Ok(st) = ep.st.try_lock() else {
            return false;
        };
        let Some(fd) = st.sock.as_ref().map(Sock::fd) else {
            return true;
        };
        match st.conn {
            Conn::Connecting { .. } => out.push(FdInterest::write(fd)),
            Conn::AwaitResp { .. } => out.push(FdInterest::read(fd)),
            Conn::Connected => out.push(FdInterest::hangup(fd)),
            _ => {}
        }
        true
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::new(Errno(crate::sock::os_code(&e)), format!("tcp: {what}: {e}"))
}

fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The status a failed MR lookup answers with (see the crate docs).
fn mr_status(e: &Error) -> u16 {
    match e.code() {
        Errno::EFAULT | Errno::EINVAL => Errno::EINVAL.0 as u16,
        _ => Errno::EACCES.0 as u16,
    }
}

impl Endpoint {
    pub(crate) fn open(dom: Arc<DomainShared>, info: &Info, context: usize) -> Result<Endpoint> {
        let mut st_conn = Conn::Idle;
        let mut sock = None;
        let mut peer = None;
        if info.handle != 0 {
            let Some(c) = dom.fabric.take_pending(info.handle) else {
                return Err(Error::new(
                    Errno::EINVAL,
                    "tcp: info.handle names no pending connection request",
                ));
            };
            peer = Some(c.peer);
            sock = Some(c.sock);
            st_conn = Conn::Accepting;
        }
        let settings = &dom.fabric.settings;
        let max_msg = if info.ep_attr.max_msg_size == 0 {
            settings.max_msg_size
        } else {
            info.ep_attr.max_msg_size.min(settings.max_msg_size)
        };
        let rx_size = if info.rx_attr.size == 0 {
            settings.rx_size
        } else {
            info.rx_attr.size
        };
        let tx_size = if info.tx_attr.size == 0 {
            settings.tx_size
        } else {
            info.tx_attr.size
        };
        let matcher = TagMatcher::new(MatcherConfig {
            directed_recv: false,
            max_posted: rx_size,
            max_unexpected: 1024,
            max_unexpected_bytes: settings.max_unexpected_bytes,
            ..MatcherConfig::default()
        });
        let inner = Arc::new(EpInner {
            id: dom
                .next_ep
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fid: context,
            dom: dom.clone(),
            info: info.clone(),
            tx_flags: info.tx_attr.op_flags,
            rx_flags: info.rx_attr.op_flags,
            max_msg,
            inject_size: settings.inject_size,
            tx_size,
            cma_threshold: if settings.disable_cma {
                usize::MAX
            } else {
                settings.cma_threshold
            },
            proof: AtomicU64::new(0),
            active: AtomicBool::new(false),
            cm_watch: AtomicI32::new(-1),
            st: Mutex::new(St {
                conn: st_conn,
                sock,
                peer,
                enabled: false,
                b: Binds::default(),
                tx: VecDeque::new(),
                pending: VecDeque::new(),
                rx: Rx::Hdr { got: 0 },
                hbuf: [0; HDR_MAX],
                matcher,
                next_id: 1,
                scratch: Vec::new(),
                stage: RxStage::new(settings.read_ahead),
                local: Local::default(),
            }),
        });
        dom.engine.register(&inner);
        let cm = Arc::new(CmSource(Arc::downgrade(&inner)));
        dom.fabric.cm_engine.register(&cm);
        Ok(Endpoint { inner, cm })
    }
}

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        self.inner.id
    }
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        if !self.active.load(Ordering::Acquire) {
            return 0;
        }
        let Ok(mut st) = self.st.try_lock() else {
            return 0;
        };
        self.progress_locked(&mut st)
    }

    /// Connected: the socket, readable, and writable while output is queued. Connection
    /// setup belongs to the CM source; other states have nothing to wait for. A state
    /// another thread holds cannot be read: then the waiter polls.
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return true;
        }
        let Ok(st) = self.st.try_lock() else {
            return false;
        };
        if st.stage.pending() > 0 {
            // Work is waiting in user space: the socket may never become readable.
            return false;
        }
        if let (Conn::Connected, Some(sock)) = (&st.conn, st.sock.as_ref()) {
            out.push(if st.tx.is_empty() {
                FdInterest::read(sock.fd())
            } else {
                FdInterest::read_write(sock.fd())
            });
        }
        true
    }
}

/// How a connection ended.
enum Fail {
    /// End of stream or reset: `FI_SHUTDOWN`.
    Closed,
    /// A socket error or malformed bytes: an error event with this code.
    Error(Errno, String),
}

impl EpInner {
    fn progress_locked(&self, st: &mut St) -> usize {
        match st.conn {
            Conn::Connected => {}
            Conn::Connecting { .. } | Conn::AwaitResp { .. } => return self.progress_connect(st),
            _ => return 0,
        }
        let mut work = 0;
        match self.flush(st) {
            Ok(n) => work += n,
            Err(f) => {
                self.fail_after_write(st, f);
                return work + 1;
            }
        }
        match self.read_some(st) {
            Ok(n) => work += n,
            Err(f) => {
                self.fail(st, f);
                return work + 1;
            }
        }
        if work > 0 {
            // Responses queued while reading.
            if let Err(f) = self.flush(st) {
                self.fail_after_write(st, f);
            }
        }
        work
    }

    /// A write failed: the peer closed or reset the connection. What it sent before
    /// is still in our socket (the kernel hands queued bytes out before the error), so
    /// deliver it — a peer that sends and then exits must not lose its last message —
    /// then tear the connection down with the write's failure. Bounded: at most
    /// [`DRAIN_ROUNDS`] read rounds.
    fn fail_after_write(&self, st: &mut St, f: Fail) {
        for _ in 0..DRAIN_ROUNDS {
            match self.read_some(st) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        self.fail(st, f);
    }

    // ---------------------------------------------------------------- CM

    fn progress_connect(&self, st: &mut St) -> usize {
        let Some(sock) = st.sock.as_ref() else {
            return 0;
        };
        match &mut st.conn {
            Conn::Connecting { req, sent } => {
                match sock.poll(libc::POLLOUT, 0) {
                    Ok(0) => return 0,
                    Ok(_) => {}
                    Err(e) => {
                        let code = Errno(crate::sock::os_code(&e));
                        self.connect_failed(st, code, Vec::new());
                        return 1;
                    }
                }
                if let Ok(Some(e)) | Err(e) = sock.take_error() {
                    let code = Errno(crate::sock::os_code(&e));
                    self.connect_failed(st, code, Vec::new());
                    return 1;
                }
                while *sent < req.len() {
                    // SAFETY: the request bytes are live for the call.
                    match unsafe {
                        sock.writev(&[iovec(req.as_ptr() as usize + *sent, req.len() - *sent)])
                    } {
                        Ok(n) => *sent += n,
                        Err(e) if would_block(&e) => return 1,
                        Err(e) => {
                            let code = Errno(crate::sock::os_code(&e));
                            self.connect_failed(st, code, Vec::new());
                            return 1;
                        }
                    }
                }
                st.conn = Conn::AwaitResp { buf: Vec::new() };
                1
            }
            Conn::AwaitResp { buf } => {
                let mut tmp = [0u8; CM_HDR_LEN + CM_DATA_SIZE];
                loop {
                    let need = if buf.len() < CM_HDR_LEN {
                        CM_HDR_LEN
                    } else {
                        match CmHdr::parse(buf) {
                            Ok(h) => CM_HDR_LEN + usize::from(h.data_len),
                            Err(e) => {
                                let code = match e {
                                    proto::ProtoError::Version(_) | proto::ProtoError::BadMagic => {
                                        Errno::ENOPROTOOPT
                                    }
                                    _ => Errno::EPROTO,
                                };
                                self.connect_failed(st, code, Vec::new());
                                return 1;
                            }
                        }
                    };
                    if buf.len() >= need {
                        break;
                    }
                    match sock.recv(&mut tmp[..need - buf.len()]) {
                        Ok(0) => {
                            self.connect_failed(st, Errno::ECONNREFUSED, Vec::new());
                            return 1;
                        }
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        Err(e) if would_block(&e) => return 0,
                        Err(e) => {
                            let code = match e.raw_os_error() {
                                Some(libc::ECONNRESET) => Errno::ECONNREFUSED,
                                Some(c) => Errno(c),
                                None => Errno::EIO,
                            };
                            self.connect_failed(st, code, Vec::new());
                            return 1;
                        }
                    }
                }
                let (kind, data) = match CmHdr::parse(buf) {
                    Ok(h) => (h.kind, buf[CM_HDR_LEN..].to_vec()),
                    Err(_) => return 0,
                };
                match kind {
                    CmKind::ConnResp => {
                        st.conn = Conn::Connected;
                        self.on_connected(st);
                        if let Some(eq) = &st.b.eq {
                            let _ = eq.connected(self.fid, data);
                        }
                    }
                    CmKind::Reject => self.connect_failed(st, Errno::ECONNREFUSED, data),
                    CmKind::ConnReq => self.connect_failed(st, Errno::EPROTO, Vec::new()),
                }
                1
            }
            _ => 0,
        }
    }

    /// The connection is up: when both ends are on this host, switch to the local
    /// congestion control and offer the peer a same-host proof.
    fn on_connected(&self, st: &mut St) {
        let Some(sock) = st.sock.as_ref() else {
            return;
        };
        self.cm_watch.store(sock.fd(), Ordering::Release);
        let (Ok(local), Ok(peer)) = (sock.local_addr(), sock.peer_addr()) else {
            return;
        };
        if !same_host(&local, &peer) {
            return;
        }
        if let Some(cc) = &self.dom.fabric.settings.local_congestion {
            if let Err(e) = sock.set_congestion(cc) {
                ofi_core::ofi_debug!(NAME, "ep_ctrl", "congestion control {cc}: {e}");
            }
        }
        if self.cma_threshold == usize::MAX {
            return;
        }
        st.local.eligible = true;
        let nonce = ofi_kit::cma::random_u64();
        st.local.offered = Some(nonce ^ process_key());
        let mut h = Hdr::new(Op::LocalOffer);
        h.data = nonce;
        EpInner::respond(st, h, Segs::default());
        if self.dom.engine.mode() == ofi_kit::progress::ProgressMode::Auto {
            self.dom.engine.kick();
        }
    }

    fn connect_failed(&self, st: &mut St, code: Errno, data: Vec<u8>) {
        self.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = st.sock.take() {
            s.shutdown();
        }
        st.conn = Conn::Shutdown;
        self.active.store(false, Ordering::Release);
        if let Some(eq) = &st.b.eq {
            let _ = eq.push_err(EqErrorEntry {
                fid: self.fid,
                context: 0,
                data: 0,
                err: code,
                prov_errno: code.0,
                err_data: data,
            });
        }
        self.flush_all(st, Errno::ECONNREFUSED);
    }

    /// Tear the connection down and report.
    fn fail(&self, st: &mut St, f: Fail) {
        self.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = st.sock.take() {
            s.shutdown();
        }
        st.conn = Conn::Shutdown;
        self.active.store(false, Ordering::Release);
        self.flush_all(st, Errno::ECONNRESET);
        if let Some(eq) = &st.b.eq {
            match f {
                Fail::Closed => {
                    let _ = eq.shutdown(self.fid);
                }
                Fail::Error(code, msg) => {
                    ofi_core::ofi_warn!(NAME, "ep_data", "connection closed: {msg}");
                    let _ = eq.push_err(EqErrorEntry {
                        fid: self.fid,
                        context: 0,
                        data: 0,
                        err: code,
                        prov_errno: code.0,
                        err_data: Vec::new(),
                    });
                }
            }
        }
    }

    /// Complete everything outstanding in error.
    fn flush_all(&self, st: &mut St, code: Errno) {
        let tx: Vec<TxOp> = st.tx.drain(..).collect();
        for op in tx {
            if let Some(c) = op.comp {
                self.comp_err(&st.b, &c, code);
            }
        }
        let pend: Vec<Pending> = st.pending.drain(..).collect();
        for p in pend {
            self.comp_err(&st.b, &p.comp, code);
        }
        if let Rx::Body {
            sink: Sink::ReadRsp(p),
            ..
        } = std::mem::replace(&mut st.rx, Rx::Hdr { got: 0 })
        {
            self.comp_err(&st.b, &p.comp, code);
        }
        let posted: Vec<PostedRecv<RBuf>> = st.matcher.drain_posted().collect();
        for r in posted {
            let kind = if r.tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            };
            if let Some(cq) = &st.b.rx_cq {
                let mut e = CqError::new(r.ctx, Errno::ECANCELED);
                e.flags = (OpFlags::RECV | kind).bits();
                e.buf = r.buf.segs.base();
                let _ = cq.push_err(e);
            }
            if let Some(c) = &st.b.c_recv {
                c.inc_err();
            }
        }
    }

    // ---------------------------------------------------------------- completions

    fn cntr(b: &Binds, k: CntrKind) -> Option<&KitCntr> {
        match k {
            CntrKind::Send => b.c_send.as_ref(),
            CntrKind::Read => b.c_read.as_ref(),
            CntrKind::Write => b.c_write.as_ref(),
        }
    }

    fn comp_ok(&self, b: &Binds, c: &Comp) {
        if c.report {
            if let Some(cq) = &b.tx_cq {
                let _ = cq.push_entry(&CqTaggedEntry {
                    op_context: c.ctx,
                    flags: c.flags,
                    len: 0,
                    buf: std::ptr::null_mut(),
                    data: 0,
                    tag: 0,
                });
            }
        }
        if let Some(k) = EpInner::cntr(b, c.cntr) {
            k.inc();
        }
    }

    fn comp_err(&self, b: &Binds, c: &Comp, code: Errno) {
        if let Some(cq) = &b.tx_cq {
            let mut e = CqError::new(c.ctx, code);
            e.flags = c.flags;
            e.len = c.len;
            e.buf = c.buf;
            e.prov_errno = code.0;
            let _ = cq.push_err(e);
        }
        if let Some(k) = EpInner::cntr(b, c.cntr) {
            k.inc_err();
        }
    }

    /// Complete a transmit-side operation with the status its response carried.
    fn comp_status(&self, b: &Binds, c: &Comp, status: u16) {
        // The peer's status: an FI code or FI_EPROTO, never as it came.
        match Errno::from_peer_status(i64::from(status)) {
            None => self.comp_ok(b, c),
            Some(e) => self.comp_err(b, c, e),
        }
    }

    /// Report a finished receive (a CQ entry or a truncation error, and the counter).
    fn rx_done(&self, b: &Binds, done: &RxDone) {
        let mut f = OpFlags::RECV | done.flags;
        f |= if done.tag.is_some() {
            OpFlags::TAGGED
        } else {
            OpFlags::MSG
        };
        if done.data.is_some() {
            f |= OpFlags::REMOTE_CQ_DATA;
        }
        if done.olen > 0 {
            if let Some(cq) = &b.rx_cq {
                let mut e = CqError::new(done.ctx, Errno::ETRUNC);
                e.flags = f.bits();
                e.len = done.len;
                e.buf = done.buf;
                e.data = done.data.unwrap_or(0);
                e.tag = done.tag.unwrap_or(0);
                e.olen = done.olen;
                let _ = cq.push_err(e);
            }
            if let Some(c) = &b.c_recv {
                c.inc_err();
            }
            return;
        }
        if done.report {
            if let Some(cq) = &b.rx_cq {
                let _ = cq.push_entry(&CqTaggedEntry {
                    op_context: done.ctx,
                    flags: f.bits(),
                    len: done.len,
                    buf: done.buf as *mut c_void,
                    data: done.data.unwrap_or(0),
                    tag: done.tag.unwrap_or(0),
                });
            }
        }
        if let Some(c) = &b.c_recv {
            c.inc();
        }
    }

    // ---------------------------------------------------------------- transmit

    /// Write queued operations; the number completed.
    fn flush(&self, st: &mut St) -> std::result::Result<usize, Fail> {
        let mut done = 0;
        while let Some(op) = st.tx.front_mut() {
            let Some(sock) = st.sock.as_ref() else {
                return Ok(done);
            };
            match write_op(sock, op) {
                Ok(true) => {}
                Ok(false) => return Ok(done),
                Err(e) => return Err(sock_fail(e)),
            }
            if let Some(op) = st.tx.pop_front() {
                if let Some(c) = op.comp {
                    self.comp_ok(&st.b, &c);
                }
            }
            done += 1;
        }
        Ok(done)
    }

    /// Post a transmit: write at once when nothing is queued, else queue.
    fn post_tx(&self, st: &mut St, mut op: TxOp, inject: bool) -> Result<()> {
        if st.tx.is_empty() {
            let Some(sock) = st.sock.as_ref() else {
                return Err(Error::code_only(Errno::ENOTCONN));
            };
            match write_op(sock, &mut op) {
                Ok(true) => {
                    if let Some(c) = op.comp {
                        self.comp_ok(&st.b, &c);
                    }
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) => {
                    let f = sock_fail(e);
                    self.fail_after_write(st, f);
                    return Err(Error::new(Errno::ECONNRESET, "tcp: connection lost"));
                }
            }
        }
        if inject {
            if let Payload::Segs(s) = op.pl {
                let mut b = [0u8; INLINE_MAX];
                let n = s.total().unwrap_or(0).min(INLINE_MAX);
                let mut off = 0;
                for &(base, len) in s.segs() {
                    let take = len.min(n - off);
                    // SAFETY: the inject buffer is valid during the call (caller's
                    // contract); take ≤ its length; b has room.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base as *const u8,
                            b.as_mut_ptr().add(off),
                            take,
                        )
                    };
                    off += take;
                }
                op.pl = Payload::Inline(b, n);
            }
        }
        st.tx.push_back(op);
        if self.dom.engine.mode() == ofi_kit::progress::ProgressMode::Auto {
            self.dom.engine.kick();
        }
        Ok(())
    }

    fn check_tx(&self, st: &St) -> Result<()> {
        if !st.enabled {
            return Err(Error::code_only(Errno::EOPBADSTATE));
        }
        match st.conn {
            Conn::Connected => {}
            Conn::Connecting { .. } | Conn::AwaitResp { .. } | Conn::Accepting => {
                return Err(Error::code_only(Errno::EAGAIN))
            }
            _ => return Err(Error::code_only(Errno::ENOTCONN)),
        }
        // Outstanding transmits: queued bytes and operations waiting for their answer
        // (reads, atomics, acknowledged writes, same-host and delivery-complete sends,
        // whose bytes left long ago): `tx_size` bounds them all.
        if st.tx.len() + st.pending.len() >= self.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    /// A send (message or tagged message) of `req`.
    fn send_common(&self, req: &SendRequest) -> Result<()> {
        let segs = Segs::from_list(&req.iov);
        // An `fi_inject*` call (`silent`: no completion) or a message call with
        // `FI_INJECT` (the payload is copied if it has to wait).
        let silent = req.inject;
        let inject = silent || req.flags.contains(OpFlags::INJECT);
        let (data, tag, ctx, flags) = (req.data, req.tag, req.context, req.flags);
        let len = segs.total()?;
        if len > self.max_msg {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "tcp: message of {len} bytes (max_msg_size {})",
                    self.max_msg
                ),
            ));
        }
        if inject && len > self.inject_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "tcp: inject of {len} bytes (inject_size {})",
                    self.inject_size
                ),
            ));
        }
        let mut st = lock(&self.st);
        self.check_tx(&st)?;
        let mut h = Hdr::new(if tag.is_some() { Op::Tagged } else { Op::Msg });
        h.size = len as u64;
        h.tag = tag.unwrap_or(0);
        if let Some(d) = data {
            h.flags |= FLAG_CQ_DATA;
            h.data = d;
        }
        let kind = if tag.is_some() {
            OpFlags::TAGGED
        } else {
            OpFlags::MSG
        };
        let comp = Comp {
            ctx,
            flags: (OpFlags::SEND | kind).bits(),
            len,
            buf: if segs.n > 0 { segs.base() } else { 0 },
            report: !silent && (!st.b.tx_sel || flags.contains(OpFlags::COMPLETION)),
            cntr: CntrKind::Send,
        };
        let mut tx_comp = Some(comp);
        // Same-host: a descriptor of the buffers instead of the payload.
        let local = st.local.tx_ok && !inject && !silent && len >= self.cma_threshold;
        if local {
            h.flags |= FLAG_LOCAL;
            h.rma_cnt = segs.n as u8;
        }
        if (flags.contains(OpFlags::DELIVERY_COMPLETE) && !silent) || local {
            h.flags |= FLAG_ACK_REQ;
            h.id = st.next_id;
            st.next_id += 1;
            st.pending.push_back(Pending {
                id: h.id,
                comp,
                kind: PendKind::Ack,
                read: None,
            });
            tx_comp = None;
        }
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            pl: Payload::Segs(segs),
            total: HDR_LEN + len,
            sent: 0,
            comp: tx_comp,
        };
        encode_hdr(&h, &mut op.hdr);
        if local {
            op.hdr_len = encode_local_iovs(&mut op.hdr, 0, &segs);
            op.total = op.hdr_len;
            op.pl = Payload::Segs(Segs::default());
        }
        let id = h.id;
        let r = self.post_tx(&mut st, op, inject);
        if r.is_err() && h.flags & FLAG_ACK_REQ != 0 {
            st.pending.retain(|p| p.id != id);
        }
        r
    }

    /// An RMA read or write of `req`.
    fn rma_common(&self, req: &RmaRequest<'_>) -> Result<()> {
        let write = !req.is_read();
        let segs = Segs::from_iov(req.local.bufs)?;
        let rma = req.remote_iov;
        let silent = req.inject;
        let inject = silent || req.flags.contains(OpFlags::INJECT);
        let (data, ctx, flags) = (req.data, req.context, req.flags);
        if rma.is_empty() || rma.len() > proto::RMA_IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "tcp: {} remote iovs (1 to {})",
                    rma.len(),
                    proto::RMA_IOV_LIMIT
                ),
            ));
        }
        let len = segs.total()?;
        let rlen = rma
            .iter()
            .try_fold(0usize, |a, r| a.checked_add(r.len))
            .ok_or_else(|| Error::new(Errno::EINVAL, "tcp: remote iov lengths overflow"))?;
        if len != rlen {
            return Err(Error::new(
                Errno::EINVAL,
                format!("tcp: local ({len}) and remote ({rlen}) lengths differ"),
            ));
        }
        if len > self.max_msg {
            return Err(Error::new(
                Errno::EMSGSIZE,
                "tcp: RMA larger than max_msg_size",
            ));
        }
        if inject && len > self.inject_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                "tcp: inject larger than inject_size",
            ));
        }
        let mut st = lock(&self.st);
        self.check_tx(&st)?;
        // Same-host: the target copies into our buffers (remote and local iovs share the
        // header's four slots).
        let local = !write
            && st.local.tx_ok
            && len >= self.cma_threshold
            && segs.n > 0
            && rma.len() + segs.n <= proto::RMA_IOV_LIMIT;
        let mut h = Hdr::new(if local {
            Op::LocalReadReq
        } else if write {
            Op::Write
        } else {
            Op::ReadReq
        });
        h.rma_cnt = rma.len() as u8;
        h.size = if write { len as u64 } else { 0 };
        if let Some(d) = data {
            h.flags |= FLAG_CQ_DATA;
            h.data = d;
        }
        h.id = st.next_id;
        st.next_id += 1;
        let (f, cntr) = if write {
            (OpFlags::RMA | OpFlags::WRITE, CntrKind::Write)
        } else {
            (OpFlags::RMA | OpFlags::READ, CntrKind::Read)
        };
        let comp = Comp {
            ctx,
            flags: f.bits(),
            len,
            buf: if segs.n > 0 { segs.base() } else { 0 },
            report: !silent && (!st.b.tx_sel || flags.contains(OpFlags::COMPLETION)),
            cntr,
        };
        st.pending.push_back(Pending {
            id: h.id,
            comp,
            kind: if write { PendKind::Ack } else { PendKind::Read },
            read: (!write).then_some(segs),
        });
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN + rma.len() * RMA_IOV_LEN,
            pl: Payload::Segs(if write { segs } else { Segs::default() }),
            total: 0,
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        for (i, r) in rma.iter().enumerate() {
            let at = HDR_LEN + i * RMA_IOV_LEN;
            RmaIov {
                addr: r.addr,
                len: r.len as u64,
                key: r.key,
            }
            .encode(&mut op.hdr[at..at + RMA_IOV_LEN]);
        }
        if local {
            h.tag = rma.len() as u64;
            h.rma_cnt = (rma.len() + segs.n) as u8;
            encode_hdr(&h, &mut op.hdr);
            op.hdr_len = encode_local_iovs(&mut op.hdr, rma.len(), &segs);
        }
        op.total = op.hdr_len + if write { len } else { 0 };
        let id = h.id;
        let r = self.post_tx(&mut st, op, inject);
        if r.is_err() {
            st.pending.retain(|p| p.id != id);
        }
        r
    }

    /// Queue a response (no completion of its own).
    fn respond(st: &mut St, h: Hdr, pl: Segs) {
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            pl: Payload::Segs(pl),
            total: HDR_LEN + h.size as usize,
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        st.tx.push_back(op);
    }

    // ---------------------------------------------------------------- receive

    /// Post the receive `posted`.
    fn recv_common(&self, posted: PostedRecv<IoList>) -> Result<()> {
        let segs = Segs::from_list(&posted.buf);
        segs.total()?;
        let flags = posted.flags;
        let mut st = lock(&self.st);
        if !st.enabled {
            return Err(Error::code_only(Errno::EOPBADSTATE));
        }
        let recv = PostedRecv {
            ctx: posted.ctx,
            src: ofi_kit::tagmatch::ANY_SRC,
            tag: posted.tag,
            ignore: posted.ignore,
            flags,
            tagged: posted.tagged,
            buf: RBuf { segs },
            len: posted.len,
        };
        let St { matcher, b, .. } = &mut *st;
        let out = matcher.post_recv(recv).map_err(|r| r.error)?;
        match out {
            PostOutcome::Queued => {}
            PostOutcome::Matched { recv, place, msg } => {
                self.deliver_unexpected(b, &recv, place, &msg, false);
            }
            PostOutcome::MultiMatched { buf, msgs } => {
                let released = buf.is_released();
                let recv = buf.recv().clone();
                let last = msgs.len().saturating_sub(1);
                for (i, (place, msg)) in msgs.iter().enumerate() {
                    self.deliver_unexpected(b, &recv, *place, msg, released && i == last);
                }
            }
            PostOutcome::Peeked { recv, msg } => {
                if let Some(cq) = &b.rx_cq {
                    let mut f = OpFlags::RECV | OpFlags::TAGGED;
                    if msg.data.is_some() {
                        f |= OpFlags::REMOTE_CQ_DATA;
                    }
                    let _ = cq.push_entry(&CqTaggedEntry {
                        op_context: recv.ctx,
                        flags: f.bits(),
                        len: msg.len,
                        buf: std::ptr::null_mut(),
                        data: msg.data.unwrap_or(0),
                        tag: msg.tag,
                    });
                }
            }
            PostOutcome::NoMessage { recv } => {
                if let Some(cq) = &b.rx_cq {
                    let mut e = CqError::new(recv.ctx, Errno::ENOMSG);
                    e.flags = (OpFlags::RECV | OpFlags::TAGGED).bits();
                    let _ = cq.push_err(e);
                }
            }
            PostOutcome::Discarded { recv, msg } => {
                if let Some(cq) = &b.rx_cq {
                    let _ = cq.push_entry(&CqTaggedEntry {
                        op_context: recv.ctx,
                        flags: (OpFlags::RECV | OpFlags::TAGGED).bits(),
                        len: 0,
                        buf: std::ptr::null_mut(),
                        data: 0,
                        tag: msg.msg.tag,
                    });
                }
            }
        }
        Ok(())
    }

    /// Copy the unexpected message `msg` into `recv`'s buffers at `place` and report
    /// it (`released`: the last message of a released multi-receive buffer).
    fn deliver_unexpected(
        &self,
        b: &Binds,
        recv: &PostedRecv<RBuf>,
        place: Placement,
        msg: &UnexpectedMsg<Vec<u8>>,
        released: bool,
    ) {
        let w = recv.buf.segs.window(place.offset, place.len);
        let n = place.len.min(msg.payload.len());
        // SAFETY: the receive's buffers are valid until its completion (the caller's
        // contract for posted receives); `w` lies inside them.
        unsafe { w.copy_in(&msg.payload[..n]) };
        let done = RxDone {
            ctx: recv.ctx,
            flags: if released {
                OpFlags::MULTI_RECV
            } else {
                OpFlags::empty()
            },
            buf: if w.n > 0 {
                w.base()
            } else {
                recv.buf.segs.base()
            },
            len: n,
            olen: msg.msg.len.saturating_sub(n),
            data: msg.msg.data,
            tag: msg.msg.tagged.then_some(msg.msg.tag),
            report: !b.rx_sel || recv.flags.contains(OpFlags::COMPLETION),
        };
        self.rx_done(b, &done);
    }

    /// Read from the socket; the number of operations finished.
    fn read_some(&self, st: &mut St) -> std::result::Result<usize, Fail> {
        let mut done = 0;
        for _ in 0..ROUND {
            let step = self.read_step(st)?;
            match step {
                Step::Blocked => break,
                Step::Progressed => {}
                Step::Finished => {
                    // Hand the completion over now: looking for the next message would
                    // cost a system call that usually finds nothing (latency).
                    done += 1;
                    break;
                }
            }
        }
        Ok(done)
    }

    fn read_step(&self, st: &mut St) -> std::result::Result<Step, Fail> {
        let Some(sock) = st.sock.as_ref() else {
            return Ok(Step::Blocked);
        };
        match &mut st.rx {
            Rx::Stalled { hdr } => {
                let hdr = *hdr;
                self.start_body(st, hdr)
            }
            Rx::Hdr { got } => {
                let n = match st.stage.recv(sock, &mut st.hbuf[*got..HDR_LEN]) {
                    Ok(0) => return Err(Fail::Closed),
                    Ok(n) => n,
                    Err(e) if would_block(&e) => return Ok(Step::Blocked),
                    Err(e) => return Err(sock_fail(e)),
                };
                *got += n;
                if *got < HDR_LEN {
                    return Ok(Step::Progressed);
                }
                let hdr = Hdr::parse(&st.hbuf[..HDR_LEN])
                    .map_err(|e| Fail::Error(Errno::EPROTO, e.to_string()))?;
                if hdr.rma_cnt > 0 {
                    st.rx = Rx::Rma { hdr, got: 0 };
                    return Ok(Step::Progressed);
                }
                self.start_body(st, hdr)
            }
            Rx::Rma { hdr, got } => {
                let need = usize::from(hdr.rma_cnt) * RMA_IOV_LEN;
                let n = match st
                    .stage
                    .recv(sock, &mut st.hbuf[HDR_LEN + *got..HDR_LEN + need])
                {
                    Ok(0) => return Err(Fail::Closed),
                    Ok(n) => n,
                    Err(e) if would_block(&e) => return Ok(Step::Blocked),
                    Err(e) => return Err(sock_fail(e)),
                };
                *got += n;
                if *got < need {
                    return Ok(Step::Progressed);
                }
                let hdr = *hdr;
                self.start_body(st, hdr)
            }
            Rx::Body { hdr, sink, off } => {
                let size = hdr.size as usize;
                if *off < size {
                    let (segs, keep) = match sink {
                        Sink::Recv { segs, keep, .. } => (*segs, *keep),
                        Sink::Write { segs, .. } => (*segs, if segs.n > 0 { size } else { 0 }),
                        Sink::ReadRsp(p) => (p.read.unwrap_or_default(), size),
                        Sink::Unexp(v) | Sink::Atomic(v) => {
                            v.resize(size, 0);
                            (Segs::one(v.as_mut_ptr() as usize, size), size)
                        }
                    };
                    let n = if *off < keep {
                        let mut iov = [iovec(0, 0); SEGS_MAX];
                        let cnt = segs.iovecs(*off, keep - *off, &mut iov);
                        if cnt == 0 {
                            return Err(Fail::Error(Errno::EPROTO, "payload has no target".into()));
                        }
                        // SAFETY: the segments are a posted receive's buffers, a read's
                        // local buffers, a checked registered region, or our own
                        // buffer: all writable for their lengths.
                        match unsafe { st.stage.readv(sock, &iov[..cnt]) } {
                            Ok(0) => return Err(Fail::Closed),
                            Ok(n) => n,
                            Err(e) if would_block(&e) => return Ok(Step::Blocked),
                            Err(e) => return Err(sock_fail(e)),
                        }
                    } else {
                        let want = (size - *off).min(64 * 1024);
                        if st.scratch.len() < want {
                            st.scratch.resize(want, 0);
                        }
                        match st.stage.recv(sock, &mut st.scratch[..want]) {
                            Ok(0) => return Err(Fail::Closed),
                            Ok(n) => n,
                            Err(e) if would_block(&e) => return Ok(Step::Blocked),
                            Err(e) => return Err(sock_fail(e)),
                        }
                    };
                    *off += n;
                    if *off < size {
                        return Ok(Step::Progressed);
                    }
                }
                let Rx::Body { hdr, sink, .. } = std::mem::replace(&mut st.rx, Rx::Hdr { got: 0 })
                else {
                    return Ok(Step::Progressed);
                };
                self.finish(st, hdr, sink)?;
                Ok(Step::Finished)
            }
        }
    }

    /// A header (and its remote iovs) is in: decide where the payload goes.
    fn start_body(&self, st: &mut St, hdr: Hdr) -> std::result::Result<Step, Fail> {
        let size = usize::try_from(hdr.size).unwrap_or(usize::MAX);
        let perr = |m: &str| Fail::Error(Errno::EPROTO, m.to_string());
        let sink = match hdr.op {
            Op::Msg | Op::Tagged => {
                if size > self.max_msg {
                    return Err(perr("message larger than max_msg_size"));
                }
                if hdr.flags & FLAG_LOCAL != 0 {
                    if st.local.peer_pid.is_none() {
                        return Err(perr("same-host descriptor from an unverified peer"));
                    }
                    if hdr.flags & FLAG_ACK_REQ == 0 {
                        return Err(perr("same-host descriptor without an ack request"));
                    }
                    let rma = parse_rma(&st.hbuf, hdr.rma_cnt);
                    let sum = rma[..usize::from(hdr.rma_cnt)]
                        .iter()
                        .fold(0u64, |a, r| a.saturating_add(r.len));
                    if sum != hdr.size {
                        return Err(perr("same-host descriptor lengths differ from the size"));
                    }
                }
                let tagged = hdr.op == Op::Tagged;
                let inc = Incoming {
                    src: ADDR_NOTAVAIL,
                    tag: hdr.tag,
                    len: size,
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tagged,
                };
                match st.matcher.match_incoming(&inc) {
                    Match::Recv { recv, place } => Sink::Recv {
                        segs: recv.buf.segs.window(place.offset, place.len),
                        keep: place.len,
                        truncated: place.truncated,
                        multi_released: None,
                        recv,
                    },
                    Match::Multi { buf, place } => {
                        let released = buf.is_released();
                        let recv = buf.recv().clone();
                        Sink::Recv {
                            segs: recv.buf.segs.window(place.offset, place.len),
                            keep: place.len,
                            truncated: place.truncated,
                            multi_released: Some(released),
                            recv,
                        }
                    }
                    Match::Unexpected => {
                        if !st.matcher.has_room_for_unexpected(size) {
                            // Stop reading until receives are posted: re-examine this
                            // header next round.
                            st.rx = Rx::Stalled { hdr };
                            return Ok(Step::Blocked);
                        }
                        Sink::Unexp(Vec::with_capacity(size))
                    }
                }
            }
            Op::Write => {
                let rma = parse_rma(&st.hbuf, hdr.rma_cnt);
                let rlen: u64 = rma.iter().map(|r| r.len).fold(0u64, u64::saturating_add);
                if rlen != hdr.size {
                    return Err(perr("write: remote iov lengths differ from the payload"));
                }
                match self.lookup(&rma, hdr.rma_cnt, ofi_core::OpFlags::REMOTE_WRITE) {
                    Ok(segs) => Sink::Write { segs, status: 0 },
                    Err(status) => Sink::Write {
                        segs: Segs::default(),
                        status,
                    },
                }
            }
            Op::ReadReq => {
                if hdr.size != 0 {
                    return Err(perr("read request with a payload"));
                }
                let rma = parse_rma(&st.hbuf, hdr.rma_cnt);
                let mut rsp = Hdr::new(Op::ReadRsp);
                rsp.id = hdr.id;
                let segs = match self.lookup(&rma, hdr.rma_cnt, OpFlags::REMOTE_READ) {
                    Ok(segs) => {
                        rsp.size = segs.total().unwrap_or(0) as u64;
                        segs
                    }
                    Err(status) => {
                        rsp.status = status;
                        Segs::default()
                    }
                };
                EpInner::respond(st, rsp, segs);
                st.rx = Rx::Hdr { got: 0 };
                return Ok(Step::Finished);
            }
            Op::ReadRsp => {
                let Some(i) = st
                    .pending
                    .iter()
                    .position(|p| p.id == hdr.id && p.kind == PendKind::Read)
                else {
                    return Err(perr("read response for no pending read"));
                };
                let Some(p) = st.pending.remove(i) else {
                    return Err(perr("read response for no pending read"));
                };
                if hdr.flags & FLAG_LOCAL != 0 {
                    // The target copied into our buffers already.
                    if hdr.size != 0 {
                        return Err(perr("same-host read response with a payload"));
                    }
                    self.comp_status(&st.b, &p.comp, hdr.status);
                    st.rx = Rx::Hdr { got: 0 };
                    return Ok(Step::Finished);
                }
                if hdr.status != 0 {
                    if hdr.size != 0 {
                        return Err(perr("failed read response with a payload"));
                    }
                    self.comp_status(&st.b, &p.comp, hdr.status);
                    st.rx = Rx::Hdr { got: 0 };
                    return Ok(Step::Finished);
                }
                if size != p.comp.len {
                    return Err(perr("read response of the wrong length"));
                }
                Sink::ReadRsp(p)
            }
            Op::Ack => {
                if hdr.size != 0 {
                    return Err(perr("ack with a payload"));
                }
                let Some(i) = st
                    .pending
                    .iter()
                    .position(|p| p.id == hdr.id && p.kind == PendKind::Ack)
                else {
                    return Err(perr("ack for no pending operation"));
                };
                if let Some(p) = st.pending.remove(i) {
                    self.comp_status(&st.b, &p.comp, hdr.status);
                }
                st.rx = Rx::Hdr { got: 0 };
                return Ok(Step::Finished);
            }
            Op::Atomic | Op::AtomicFetch | Op::AtomicCompare => {
                if size > self.max_msg.saturating_mul(2) {
                    return Err(perr("atomic operands larger than max_msg_size"));
                }
                Sink::Atomic(Vec::with_capacity(size))
            }
            Op::AtomicRsp => {
                let Some(i) = st
                    .pending
                    .iter()
                    .position(|p| p.id == hdr.id && p.kind == PendKind::Atomic)
                else {
                    return Err(perr("atomic response for no pending atomic"));
                };
                let Some(p) = st.pending.remove(i) else {
                    return Err(perr("atomic response for no pending atomic"));
                };
                let want = p.read.map(|r| r.total().unwrap_or(0)).unwrap_or(0);
                if hdr.status != 0 {
                    if hdr.size != 0 {
                        return Err(perr("failed atomic response with a payload"));
                    }
                    self.comp_status(&st.b, &p.comp, hdr.status);
                    st.rx = Rx::Hdr { got: 0 };
                    return Ok(Step::Finished);
                }
                if size != want {
                    return Err(perr("atomic response of the wrong length"));
                }
                if size == 0 {
                    self.comp_ok(&st.b, &p.comp);
                    st.rx = Rx::Hdr { got: 0 };
                    return Ok(Step::Finished);
                }
                Sink::ReadRsp(p)
            }
            Op::LocalOffer | Op::LocalProof | Op::LocalOk | Op::LocalReadReq => {
                if hdr.size != 0 {
                    return Err(perr("same-host control message with a payload"));
                }
                self.local_control(st, &hdr)?;
                st.rx = Rx::Hdr { got: 0 };
                return Ok(Step::Finished);
            }
        };
        if hdr.flags & FLAG_LOCAL != 0 {
            return self.local_pull(st, hdr, sink);
        }
        st.rx = Rx::Body { hdr, sink, off: 0 };
        Ok(Step::Progressed)
    }

    /// The same-host handshake and read requests (see the module docs).
    fn local_control(&self, st: &mut St, hdr: &Hdr) -> std::result::Result<(), Fail> {
        let perr = |m: &str| Fail::Error(Errno::EPROTO, m.to_string());
        match hdr.op {
            Op::LocalOffer => {
                if !st.local.eligible {
                    // Copies are off on this side (or the peer is elsewhere): no proof,
                    // the peer keeps to the socket.
                    return Ok(());
                }
                self.proof.store(hdr.data, Ordering::Release);
                let mut p = Hdr::new(Op::LocalProof);
                p.data = u64::from(std::process::id());
                p.tag = self.proof.as_ptr() as u64;
                st.local.proved = true;
                EpInner::respond(st, p, Segs::default());
            }
            Op::LocalProof => {
                let Some(masked) = st.local.offered.take() else {
                    return Err(perr("same-host proof that was not asked for"));
                };
                let pid = i32::try_from(hdr.data).map_err(|_| perr("same-host proof pid"))?;
                let held = pid > 0 && ofi_kit::cma::probe(pid, hdr.tag, masked ^ process_key());
                if held {
                    st.local.peer_pid = Some(pid);
                } else {
                    ofi_core::ofi_info!(
                        NAME,
                        "ep_data",
                        "same-host copies towards pid {pid} refused by the kernel or the proof; \
                         using the socket"
                    );
                }
                let mut ok = Hdr::new(Op::LocalOk);
                ok.data = u64::from(held);
                EpInner::respond(st, ok, Segs::default());
            }
            Op::LocalOk => {
                if !std::mem::take(&mut st.local.proved) || hdr.data > 1 {
                    return Err(perr("same-host verdict that was not asked for"));
                }
                st.local.tx_ok = hdr.data == 1;
            }
            Op::LocalReadReq => {
                let Some(pid) = st.local.peer_pid else {
                    return Err(perr("same-host read from an unverified peer"));
                };
                let cnt = usize::from(hdr.rma_cnt);
                let nrem = usize::try_from(hdr.tag).unwrap_or(usize::MAX);
                if nrem == 0 || nrem >= cnt {
                    return Err(perr("same-host read with a bad remote iov count"));
                }
                let rma = parse_rma(&st.hbuf, hdr.rma_cnt);
                let mut rsp = Hdr::new(Op::ReadRsp);
                rsp.id = hdr.id;
                rsp.flags = FLAG_LOCAL;
                match self.lookup(&rma, nrem as u8, OpFlags::REMOTE_READ) {
                    Ok(src) => {
                        let dst: Vec<(u64, u64)> =
                            rma[nrem..cnt].iter().map(|r| (r.addr, r.len)).collect();
                        let want = dst.iter().fold(0u64, |a, d| a.saturating_add(d.1));
                        let have = src.total().unwrap_or(usize::MAX) as u64;
                        if want != have {
                            rsp.status = Errno::EINVAL.0 as u16;
                        } else {
                            // SAFETY: `src` is registered memory the MR table checked for
                            // remote read (only read here). `dst` are the buffers of the
                            // peer's pending read, in the process whose pid its proof
                            // established; when that is this process, they are a read
                            // posted here, valid and untouched until it completes (the
                            // contract of fi_read), after this copy.
                            let copied = unsafe { ofi_kit::cma::writev(pid, src.segs(), &dst) };
                            match copied {
                                Ok(n) if n as u64 == have => {}
                                Ok(_) | Err(_) => rsp.status = Errno::EIO.0 as u16,
                            }
                        }
                    }
                    Err(status) => rsp.status = status,
                }
                EpInner::respond(st, rsp, Segs::default());
            }
            _ => {}
        }
        Ok(())
    }

    /// A same-host message descriptor met its sink: copy the data out of the sender,
    /// then complete as if it had been read from the socket, or, when the copy fails,
    /// complete the receive in error and tell the sender.
    fn local_pull(&self, st: &mut St, hdr: Hdr, sink: Sink) -> std::result::Result<Step, Fail> {
        let pid = st.local.peer_pid.unwrap_or(0);
        let rma = parse_rma(&st.hbuf, hdr.rma_cnt);
        let mut remote = [(0u64, 0u64); proto::RMA_IOV_LIMIT];
        for (r, w) in rma.iter().zip(remote.iter_mut()) {
            *w = (r.addr, r.len);
        }
        let remote = &remote[..usize::from(hdr.rma_cnt)];
        st.rx = Rx::Hdr { got: 0 };
        let size = hdr.size as usize;
        let (sink, copied) = match sink {
            Sink::Recv {
                recv,
                segs,
                keep,
                truncated,
                multi_released,
            } => {
                let local = segs.window(0, keep);
                // SAFETY: `local` is the kept part of a posted receive buffer, left
                // writable to the provider until the receive completes (the contract of
                // fi_recv) and held only as addresses.
                let r = unsafe { ofi_kit::cma::readv(pid, local.segs(), remote) };
                let ok = matches!(r, Ok(n) if n == keep);
                let sink = Sink::Recv {
                    recv,
                    segs,
                    keep,
                    truncated,
                    multi_released,
                };
                (sink, if ok { Ok(()) } else { Err(r.err()) })
            }
            Sink::Unexp(mut v) => {
                v.resize(size, 0);
                let local = [(v.as_mut_ptr() as usize, size)];
                // SAFETY: `v` is a live Vec of `size` bytes that nothing else touches
                // during the call.
                let r = unsafe { ofi_kit::cma::readv(pid, &local, remote) };
                let ok = matches!(r, Ok(n) if n == size);
                (Sink::Unexp(v), if ok { Ok(()) } else { Err(r.err()) })
            }
            _ => return Err(Fail::Error(Errno::EPROTO, "same-host descriptor".into())),
        };
        match copied {
            Ok(()) => self.finish(st, hdr, sink)?,
            Err(os) => {
                let os = os.unwrap_or(libc::EFAULT);
                ofi_core::ofi_warn!(
                    NAME,
                    "ep_data",
                    "same-host copy of {size} bytes from pid {pid} failed: {}",
                    io::Error::from_raw_os_error(os)
                );
                if let Sink::Recv { recv, .. } = &sink {
                    self.rx_failed(&st.b, recv, &hdr, Errno::EIO, os);
                }
                let mut ack = Hdr::new(Op::Ack);
                ack.id = hdr.id;
                ack.status = Errno::EIO.0 as u16;
                EpInner::respond(st, ack, Segs::default());
            }
        }
        Ok(Step::Finished)
    }

    /// Complete a posted receive in error.
    fn rx_failed(&self, b: &Binds, recv: &PostedRecv<RBuf>, hdr: &Hdr, code: Errno, os: i32) {
        if let Some(cq) = &b.rx_cq {
            let kind = if hdr.op == Op::Tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            };
            let mut e = CqError::new(recv.ctx, code);
            e.flags = (OpFlags::RECV | kind).bits();
            e.buf = recv.buf.segs.base();
            e.tag = if hdr.op == Op::Tagged { hdr.tag } else { 0 };
            e.prov_errno = os;
            let _ = cq.push_err(e);
        }
        if let Some(c) = &b.c_recv {
            c.inc_err();
        }
    }

    fn lookup(
        &self,
        rma: &[RmaIov; 4],
        cnt: u8,
        access: OpFlags,
    ) -> std::result::Result<Segs, u16> {
        let mut segs = Segs::default();
        for r in &rma[..usize::from(cnt)] {
            let len = usize::try_from(r.len).map_err(|_| Errno::EINVAL.0 as u16)?;
            let reg = self
                .dom
                .mr
                .lookup_remote_ep(self.id, r.key, r.addr, len, access)
                .map_err(|e| mr_status(&e))?;
            for (b, l) in reg.segments() {
                if !segs.push(b, l) {
                    return Err(Errno::EINVAL.0 as u16);
                }
            }
            reg.count_access();
        }
        Ok(segs)
    }

    /// The payload is in: complete.
    fn finish(&self, st: &mut St, hdr: Hdr, sink: Sink) -> std::result::Result<(), Fail> {
        match sink {
            Sink::Recv {
                recv,
                segs,
                keep,
                truncated,
                multi_released,
            } => {
                let size = hdr.size as usize;
                let extra = if multi_released == Some(true) {
                    OpFlags::MULTI_RECV
                } else {
                    OpFlags::empty()
                };
                let report = !st.b.rx_sel || recv.flags.contains(OpFlags::COMPLETION);
                let buf = if segs.n > 0 {
                    segs.base()
                } else {
                    recv.buf.segs.base()
                };
                let done = RxDone {
                    ctx: recv.ctx,
                    flags: extra,
                    buf,
                    len: keep,
                    olen: if truncated { size - keep } else { 0 },
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tag: (hdr.op == Op::Tagged).then_some(hdr.tag),
                    report,
                };
                self.rx_done(&st.b, &done);
                self.ack_if_asked(st, &hdr);
            }
            Sink::Unexp(v) => {
                let inc = Incoming {
                    src: ADDR_NOTAVAIL,
                    tag: hdr.tag,
                    len: v.len(),
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tagged: hdr.op == Op::Tagged,
                };
                // A receive posted while the payload was being read did not see this
                // message (it was not queued yet): match again before queueing it.
                let St { matcher, b, .. } = &mut *st;
                let bytes = v.len();
                let um = |payload| UnexpectedMsg {
                    msg: inc,
                    payload,
                    bytes,
                };
                match matcher.match_incoming(&inc) {
                    Match::Recv { recv, place } => {
                        self.deliver_unexpected(b, &recv, place, &um(v), false);
                    }
                    Match::Multi { buf, place } => {
                        let released = buf.is_released();
                        let recv = buf.recv().clone();
                        self.deliver_unexpected(b, &recv, place, &um(v), released);
                    }
                    Match::Unexpected => {
                        if matcher.push_unexpected(inc, v).is_err() {
                            return Err(Fail::Error(
                                Errno::ENOBUFS,
                                "unexpected-message buffer overflow".into(),
                            ));
                        }
                    }
                }
                self.ack_if_asked(st, &hdr);
            }
            Sink::Write { status, .. } => {
                if status == 0 && hdr.flags & FLAG_CQ_DATA != 0 {
                    if let Some(cq) = &st.b.rx_cq {
                        let _ = cq.push_entry(&CqTaggedEntry {
                            op_context: 0,
                            flags: (OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA)
                                .bits(),
                            len: 0,
                            buf: std::ptr::null_mut(),
                            data: hdr.data,
                            tag: 0,
                        });
                    }
                }
                let mut ack = Hdr::new(Op::Ack);
                ack.id = hdr.id;
                ack.status = status;
                EpInner::respond(st, ack, Segs::default());
            }
            Sink::ReadRsp(p) => self.comp_ok(&st.b, &p.comp),
            Sink::Atomic(v) => {
                let mut rsp = Hdr::new(Op::AtomicRsp);
                rsp.id = hdr.id;
                match self.apply_atomic(st, &hdr, &v) {
                    Ok(result) => {
                        rsp.size = result.len() as u64;
                        EpInner::respond_owned(st, rsp, result);
                    }
                    Err(status) => {
                        rsp.status = status;
                        EpInner::respond(st, rsp, Segs::default());
                    }
                }
            }
        }
        Ok(())
    }

    /// Apply an atomic at the target: the original values (fetch / compare) or a
    /// status.
    fn apply_atomic(
        &self,
        st: &St,
        hdr: &Hdr,
        payload: &[u8],
    ) -> std::result::Result<Vec<u8>, u16> {
        let inval = Errno::EINVAL.0 as u16;
        let kind = match hdr.op {
            Op::Atomic => AtomicKind::Base,
            Op::AtomicFetch => AtomicKind::Fetch,
            _ => AtomicKind::Compare,
        };
        let op = AtomicOp::from_raw(u32::from(hdr.atomic_op)).ok_or(inval)?;
        let dt = Datatype::from_raw(u32::from(hdr.datatype)).ok_or(inval)?;
        let rma = parse_rma(&st.hbuf, 1);
        let len = usize::try_from(rma[0].len).map_err(|_| inval)?;
        let esize = dt.size();
        if esize == 0 || len % esize != 0 {
            return Err(inval);
        }
        let count = len / esize;
        let (operand, compare) = if kind == AtomicKind::Compare {
            if payload.len() != 2 * len {
                return Err(inval);
            }
            payload.split_at(len)
        } else {
            if payload.len() != len {
                return Err(inval);
            }
            (payload, &[][..])
        };
        let access = if op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else {
            OpFlags::REMOTE_WRITE
        };
        let segs = self.lookup(&rma, 1, access)?;
        if segs.n != 1 || segs.s[0].1 != len {
            return Err(inval);
        }
        let mut result = vec![0u8; if kind == AtomicKind::Base { 0 } else { len }];
        let (base, _) = segs.s[0];
        // The registered bytes may be written at any moment by a same-host peer's copy
        // or the application, so they are never borrowed as `&mut [u8]`: they are
        // copied out and back through raw pointers while the stripe locks serialise
        // every atomic on them in this process.
        let held = self.dom.atomic_locks.lock(base as u64, len);
        let mut before = vec![0u8; len];
        if len > 0 {
            // SAFETY: the MR table vouched that [base, base + len) is a live
            // registration granting this access; `before` holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(base as *const u8, before.as_mut_ptr(), len) };
        }
        let mut target = before.clone();
        ofi_kit::atomic::apply(
            op,
            dt,
            kind,
            &mut target,
            operand,
            compare,
            &mut result,
            count,
        )
        .map_err(|e| e.code().0 as u16)?;
        if target != before {
            // SAFETY: as above; an operation that changes the target was checked for
            // REMOTE_WRITE (only an atomic read lacks it, and it changes nothing).
            unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), base as *mut u8, len) };
        }
        drop(held);
        Ok(result)
    }

    /// Queue a response whose payload is an owned buffer.
    fn respond_owned(st: &mut St, h: Hdr, pl: Vec<u8>) {
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            total: HDR_LEN + pl.len(),
            pl: Payload::Owned(pl),
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        st.tx.push_back(op);
    }

    /// Post the atomic `req`: its operands (and compare values) gathered from the
    /// application's buffers, the original values (fetch / compare) written to its
    /// result buffers.
    ///
    /// # Safety
    /// Each operand and compare ioc is readable for its count of elements; each result
    /// ioc stays writable for its count until the operation completes (the C API's
    /// contract of the atomic calls).
    unsafe fn atomic_common(&self, req: &AtomicRequest<'_>) -> Result<()> {
        let (kind, op, dt) = (req.kind, req.op, req.datatype);
        let (compare, result) = (req.compare.bufs, req.result.bufs);
        let (ctx, flags, silent) = (req.context, req.flags, req.inject);
        let esize = dt.size();
        if silent && req.operands.count().saturating_mul(esize) > self.inject_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                "tcp: inject_atomic over inject_size",
            ));
        }
        // A fetch of FI_ATOMIC_READ may come without operands: zeros of the remote
        // count go in their place (the bytes on the wire are the same either way).
        let zeros: Vec<u8>;
        let zero_ioc: [Ioc; 1];
        let operand: &[Ioc] = if kind == AtomicKind::Fetch && req.operands.bufs.is_empty() {
            let n = req.remote.count.saturating_mul(esize);
            if n > self.max_msg {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("tcp: atomic of {} elements", req.remote.count),
                ));
            }
            zeros = vec![0u8; n];
            zero_ioc = [Ioc {
                addr: zeros.as_ptr() as *mut c_void,
                count: req.remote.count,
            }];
            &zero_ioc
        } else {
            req.operands.bufs
        };
        let rma = std::slice::from_ref(&req.remote);
        let max = ofi_kit::atomic::valid(op, dt, kind)?;
        let esize = dt.size();
        let count_of = |v: &[Ioc]| -> Result<usize> {
            v.iter()
                .try_fold(0usize, |a, i| a.checked_add(i.count))
                .ok_or_else(|| Error::new(Errno::EINVAL, "tcp: atomic counts overflow"))
        };
        let count = count_of(operand)?;
        if operand.len() > SEGS_MAX || rma.len() != 1 || rma[0].count != count {
            return Err(Error::new(
                Errno::EINVAL,
                "tcp: an atomic takes up to 4 iocs and one remote ioc of the same count",
            ));
        }
        if count == 0 || count > max || count.saturating_mul(esize) > self.max_msg {
            return Err(Error::new(
                Errno::EINVAL,
                format!("tcp: atomic of {count} elements"),
            ));
        }
        if kind == AtomicKind::Compare && count_of(compare)? != count {
            return Err(Error::new(Errno::EINVAL, "tcp: compare count differs"));
        }
        let len = count * esize;
        let mut res = Segs::default();
        if kind != AtomicKind::Base {
            if result.len() > SEGS_MAX || count_of(result)? != count {
                return Err(Error::new(Errno::EINVAL, "tcp: bad result iocs"));
            }
            for r in result {
                res.push(r.addr as usize, r.count * esize);
            }
        }
        let cmp: &[Ioc] = if kind == AtomicKind::Compare {
            compare
        } else {
            &[]
        };
        let mut pl = Vec::with_capacity(len * if cmp.is_empty() { 1 } else { 2 });
        for v in operand.iter().chain(cmp) {
            let n = v.count * esize;
            if n > 0 {
                if v.addr.is_null() {
                    return Err(Error::new(Errno::EINVAL, "tcp: null atomic buffer"));
                }
                // SAFETY: the application's ioc is valid for count elements (API contract).
                pl.extend_from_slice(unsafe { std::slice::from_raw_parts(v.addr as *const u8, n) });
            }
        }
        let mut st = lock(&self.st);
        self.check_tx(&st)?;
        let mut h = Hdr::new(match kind {
            AtomicKind::Base => Op::Atomic,
            AtomicKind::Fetch => Op::AtomicFetch,
            AtomicKind::Compare => Op::AtomicCompare,
        });
        h.rma_cnt = 1;
        h.atomic_op = op.to_raw() as u8;
        h.datatype = dt.to_raw() as u8;
        h.size = pl.len() as u64;
        h.id = st.next_id;
        st.next_id += 1;
        let (f, cntr) = if kind == AtomicKind::Base {
            (OpFlags::ATOMIC | OpFlags::WRITE, CntrKind::Write)
        } else {
            (OpFlags::ATOMIC | OpFlags::READ, CntrKind::Read)
        };
        let comp = Comp {
            ctx,
            flags: f.bits(),
            len: 0,
            buf: 0,
            report: !silent && (!st.b.tx_sel || flags.contains(OpFlags::COMPLETION)),
            cntr,
        };
        st.pending.push_back(Pending {
            id: h.id,
            comp,
            kind: PendKind::Atomic,
            read: (kind != AtomicKind::Base).then_some(res),
        });
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN + RMA_IOV_LEN,
            total: HDR_LEN + RMA_IOV_LEN + pl.len(),
            pl: Payload::Owned(pl),
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        RmaIov {
            addr: rma[0].addr,
            len: len as u64,
            key: rma[0].key,
        }
        .encode(&mut op.hdr[HDR_LEN..HDR_LEN + RMA_IOV_LEN]);
        let id = h.id;
        let r = self.post_tx(&mut st, op, false);
        if r.is_err() {
            st.pending.retain(|p| p.id != id);
        }
        r
    }

    fn atomic_valid(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(self.max_msg / dt.size().max(1)))
    }

    fn ack_if_asked(&self, st: &mut St, hdr: &Hdr) {
        if hdr.flags & FLAG_ACK_REQ != 0 {
            let mut ack = Hdr::new(Op::Ack);
            ack.id = hdr.id;
            EpInner::respond(st, ack, Segs::default());
        }
    }
}

enum Step {
    Blocked,
    Progressed,
    Finished,
}

fn parse_rma(hbuf: &[u8; HDR_MAX], cnt: u8) -> [RmaIov; 4] {
    let mut out = [RmaIov::default(); 4];
    for (i, o) in out.iter_mut().enumerate().take(usize::from(cnt)) {
        let at = HDR_LEN + i * RMA_IOV_LEN;
        *o = RmaIov::parse(&hbuf[at..]).unwrap_or_default();
    }
    out
}

/// Write `segs` as key-0 iovs into the header block after `skip` iovs; the block's
/// length.
fn encode_local_iovs(out: &mut [u8; HDR_MAX], skip: usize, segs: &Segs) -> usize {
    let mut at = HDR_LEN + skip * RMA_IOV_LEN;
    for &(addr, len) in segs.segs() {
        RmaIov {
            addr: addr as u64,
            len: len as u64,
            key: 0,
        }
        .encode(&mut out[at..at + RMA_IOV_LEN]);
        at += RMA_IOV_LEN;
    }
    at
}

fn encode_hdr(h: &Hdr, out: &mut [u8; HDR_MAX]) {
    let mut b = [0u8; HDR_LEN];
    h.encode(&mut b);
    out[..HDR_LEN].copy_from_slice(&b);
}

fn sock_fail(e: io::Error) -> Fail {
    match e.raw_os_error() {
        Some(libc::ECONNRESET) | Some(libc::EPIPE) => Fail::Closed,
        Some(c) => Fail::Error(Errno(c), e.to_string()),
        None => Fail::Error(Errno::EIO, e.to_string()),
    }
}

/// Write as much of `op` as the socket takes; `Ok(true)` when all of it is written.
fn write_op(sock: &Sock, op: &mut TxOp) -> io::Result<bool> {
    loop {
        let mut iov = [iovec(0, 0); 1 + SEGS_MAX];
        let mut n = 0;
        let mut off = op.sent;
        if off < op.hdr_len {
            iov[0] = iovec(op.hdr.as_ptr() as usize + off, op.hdr_len - off);
            n = 1;
            off = 0;
        } else {
            off -= op.hdr_len;
        }
        let segs = op.pl.segs();
        n += segs.iovecs(off, usize::MAX, &mut iov[n..]);
        if n == 0 {
            return Ok(true);
        }
        // SAFETY: the header lives in `op`; payload segments are the application's
        // buffers (valid until completion by the API contract) or `op`'s inline copy.
        match unsafe { sock.writev(&iov[..n]) } {
            Ok(w) => {
                op.sent += w;
                if op.sent >= op.total {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let mut st = lock(&self.inner.st);
        if st.enabled {
            return Err(Error::new(Errno::EOPBADSTATE, "tcp: bind after fi_enable"));
        }
        let b = &mut st.b;
        match target {
            BindTarget::Cq(cq) => {
                let known = OpFlags::SEND | OpFlags::RECV | OpFlags::SELECTIVE_COMPLETION;
                if !(flags - known).is_empty() || !flags.intersects(OpFlags::SEND | OpFlags::RECV) {
                    return Err(Error::new(Errno::EBADFLAGS, "tcp: CQ bind flags"));
                }
                let sel = flags.contains(OpFlags::SELECTIVE_COMPLETION);
                if (flags.contains(OpFlags::SEND) && b.tx_cq.is_some())
                    || (flags.contains(OpFlags::RECV) && b.rx_cq.is_some())
                {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "tcp: a CQ for this direction is already bound",
                    ));
                }
                if flags.contains(OpFlags::SEND) {
                    b.tx_cq = Some(cq.clone());
                    b.tx_sel = sel;
                }
                if flags.contains(OpFlags::RECV) {
                    b.rx_cq = Some(cq.clone());
                    b.rx_sel = sel;
                }
            }
            BindTarget::Cntr(c) => {
                let known = OpFlags::SEND
                    | OpFlags::RECV
                    | OpFlags::READ
                    | OpFlags::WRITE
                    | OpFlags::REMOTE_READ
                    | OpFlags::REMOTE_WRITE;
                if flags.is_empty() || !(flags - known).is_empty() {
                    return Err(Error::new(Errno::EBADFLAGS, "tcp: counter bind flags"));
                }
                if flags.intersects(OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE) {
                    return Err(Error::new(
                        Errno::ENOSYS,
                        "tcp: remote-access counters (FI_RMA_EVENT) are not supported",
                    ));
                }
                let taken = [
                    (OpFlags::SEND, b.c_send.is_some()),
                    (OpFlags::RECV, b.c_recv.is_some()),
                    (OpFlags::READ, b.c_read.is_some()),
                    (OpFlags::WRITE, b.c_write.is_some()),
                ];
                if taken.iter().any(|(f, t)| *t && flags.contains(*f)) {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "tcp: a counter for this event is already bound",
                    ));
                }
                if flags.contains(OpFlags::SEND) {
                    b.c_send = Some(c.clone());
                }
                if flags.contains(OpFlags::RECV) {
                    b.c_recv = Some(c.clone());
                }
                if flags.contains(OpFlags::READ) {
                    b.c_read = Some(c.clone());
                }
                if flags.contains(OpFlags::WRITE) {
                    b.c_write = Some(c.clone());
                }
            }
            BindTarget::Eq(eq) => {
                if b.eq.is_some() {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "tcp: an event queue is already bound",
                    ));
                }
                b.eq = Some(eq.clone())
            }
            BindTarget::Av(_) => {
                return Err(Error::new(
                    Errno::EINVAL,
                    "tcp: FI_EP_MSG endpoints take no address vector",
                ))
            }
            BindTarget::Stx(_) | BindTarget::Srx(_) => {
                return Err(Error::new(
                    Errno::ENOSYS,
                    "tcp: shared contexts are not supported",
                ))
            }
        }
        Ok(())
    }

    fn enable(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        if st.b.eq.is_none() {
            return Err(Error::new(
                Errno::ENOEQ,
                "tcp: bind an event queue before fi_enable",
            ));
        }
        if st.b.tx_cq.is_none() && st.b.rx_cq.is_none() {
            return Err(Error::new(
                Errno::ENOCQ,
                "tcp: bind a completion queue before fi_enable",
            ));
        }
        st.enabled = true;
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let mut st = lock(&self.inner.st);
        match st.matcher.cancel(context) {
            Some(r) => {
                let kind = if r.tagged {
                    OpFlags::TAGGED
                } else {
                    OpFlags::MSG
                };
                if let Some(cq) = &st.b.rx_cq {
                    let mut e = CqError::new(r.ctx, Errno::ECANCELED);
                    e.flags = (OpFlags::RECV | kind).bits();
                    e.buf = r.buf.segs.base();
                    let _ = cq.push_err(e);
                }
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                "tcp: no cancelable operation with this context",
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        if level == OPT_ENDPOINT && optname == OPT_MIN_MULTI_RECV {
            let v = lock(&self.inner.st)
                .matcher
                .config()
                .min_multi_recv
                .to_ne_bytes();
            let Some(out) = optval.get_mut(..v.len()) else {
                return Err(Error::new(
                    Errno::ETOOSMALL,
                    "tcp: FI_OPT_MIN_MULTI_RECV needs a size_t",
                ));
            };
            out.copy_from_slice(&v);
            return Ok(v.len());
        }
        cm_getopt(level, optname, optval)
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        if level == OPT_ENDPOINT && optname == OPT_MIN_MULTI_RECV {
            let Ok(b) = <[u8; 8]>::try_from(optval) else {
                return Err(Error::new(
                    Errno::EINVAL,
                    "tcp: FI_OPT_MIN_MULTI_RECV takes a size_t",
                ));
            };
            lock(&self.inner.st)
                .matcher
                .set_min_multi_recv(usize::from_ne_bytes(b));
            return Ok(());
        }
        cm_setopt(level, optname, optval)
    }

    fn rx_size_left(&self) -> Result<usize> {
        let st = lock(&self.inner.st);
        Ok(st
            .matcher
            .config()
            .max_posted
            .saturating_sub(st.matcher.posted_len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let st = lock(&self.inner.st);
        Ok(self
            .inner
            .tx_size
            .saturating_sub(st.tx.len() + st.pending.len()))
    }

    fn getname(&self) -> Result<Vec<u8>> {
        let st = lock(&self.inner.st);
        if let Some(s) = &st.sock {
            if let Ok(a) = s.local_addr() {
                return Ok(Address::from(a).to_bytes());
            }
        }
        // Not connected yet: the address the connection will be made from (its port is
        // chosen at connect time, so 0 unless the info named one).
        let a = bind_addr(&self.inner.dom.fabric, &self.inner.info)?;
        Ok(Address::from(a).to_bytes())
    }

    fn getpeer(&self) -> Result<Vec<u8>> {
        let st = lock(&self.inner.st);
        if !matches!(
            st.conn,
            Conn::Connected | Conn::Accepting | Conn::AwaitResp { .. }
        ) {
            return Err(Error::new(Errno::ENOTCONN, "tcp: not connected"));
        }
        // The socket's peer (the address actually reached, never a wildcard).
        let a = st
            .sock
            .as_ref()
            .and_then(|s| s.peer_addr().ok())
            .or(st.peer)
            .ok_or_else(|| Error::new(Errno::ENOTCONN, "tcp: not connected"))?;
        Ok(Address::from(a).to_bytes())
    }

    fn connect(&self, addr: &[u8], param: &[u8]) -> Result<()> {
        if param.len() > CM_DATA_SIZE {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "tcp: CM data of {} bytes (at most {CM_DATA_SIZE})",
                    param.len()
                ),
            ));
        }
        let fmt = match addr.len() {
            16 => AddrFormat::SOCKADDR_IN,
            28 => AddrFormat::SOCKADDR_IN6,
            n => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("tcp: a {n}-byte address is neither sockaddr_in nor sockaddr_in6"),
                ))
            }
        };
        let peer = Address::from_bytes(fmt, addr)?
            .socket_addr()
            .ok_or_else(|| Error::new(Errno::EINVAL, "tcp: not an IP address"))?;
        let mut st = lock(&self.inner.st);
        if !st.enabled {
            // fi_connect enables the endpoint implicitly when it is bound.
            if st.b.eq.is_none() {
                return Err(Error::new(Errno::ENOEQ, "tcp: bind an event queue first"));
            }
            st.enabled = true;
        }
        if st.conn != Conn::Idle {
            return Err(Error::new(
                Errno::EISCONN,
                "tcp: the endpoint is connecting or connected already",
            ));
        }
        let sock = Sock::stream(&peer).map_err(|e| io_err("socket", e))?;
        let _ = sock.set_nodelay();
        let mut src_info = self.inner.info.clone();
        if src_info
            .src_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .is_some_and(|a| a.is_ipv6() != peer.is_ipv6())
        {
            src_info.src_addr = None;
        }
        src_info.addr_format = if peer.is_ipv6() {
            AddrFormat::SOCKADDR_IN6
        } else {
            AddrFormat::SOCKADDR_IN
        };
        let src = bind_addr(&self.inner.dom.fabric, &src_info)?;
        if !src.ip().is_unspecified() || src.port() != 0 {
            sock.bind(&src)
                .map_err(|e| io_err(&format!("bind {src}"), e))?;
        }
        sock.connect(&peer)
            .map_err(|e| io_err(&format!("connect {peer}"), e))?;
        st.sock = Some(sock);
        st.peer = Some(peer);
        st.conn = Conn::Connecting {
            req: proto::cm_message(CmKind::ConnReq, param),
            sent: 0,
        };
        self.inner.active.store(true, Ordering::Release);
        drop(st);
        self.inner.dom.fabric.cm_engine.kick();
        Ok(())
    }

    fn accept(&self, param: &[u8]) -> Result<()> {
        if param.len() > CM_DATA_SIZE {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "tcp: CM data of {} bytes (at most {CM_DATA_SIZE})",
                    param.len()
                ),
            ));
        }
        let mut st = lock(&self.inner.st);
        if st.conn != Conn::Accepting {
            return Err(Error::new(
                Errno::EINVAL,
                "tcp: fi_accept needs an endpoint opened from a connection request",
            ));
        }
        if st.b.eq.is_none() {
            return Err(Error::new(Errno::ENOEQ, "tcp: bind an event queue first"));
        }
        st.enabled = true;
        let msg = proto::cm_message(CmKind::ConnResp, param);
        let r = match &st.sock {
            Some(s) => s.write_all_timeout(&msg, 2000),
            None => Err(io::Error::from(io::ErrorKind::NotConnected)),
        };
        if let Err(e) = r {
            self.inner
                .fail(&mut st, Fail::Error(Errno::ECONNABORTED, e.to_string()));
            return Err(io_err("accept", e));
        }
        st.conn = Conn::Connected;
        self.inner.on_connected(&mut st);
        self.inner.active.store(true, Ordering::Release);
        if let Some(eq) = &st.b.eq {
            let _ = eq.connected(self.inner.fid, Vec::new());
        }
        Ok(())
    }

    fn shutdown(&self, _flags: u64) -> Result<()> {
        let mut st = lock(&self.inner.st);
        if matches!(st.conn, Conn::Idle | Conn::Shutdown) {
            return Err(Error::new(Errno::ENOTCONN, "tcp: not connected"));
        }
        // Write what is queued (bounded), then close.
        let _ = self.inner.flush(&mut st);
        self.inner.fail(&mut st, Fail::Closed);
        Ok(())
    }

    ofi_kit::endpoint_data_ops!();

    fn close(&self) -> Result<()> {
        let mut st = lock(&self.inner.st);
        self.inner.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = st.sock.take() {
            s.shutdown();
        }
        st.conn = Conn::Shutdown;
        self.inner.active.store(false, Ordering::Release);
        drop(st);
        self.inner.dom.engine.unregister(&self.inner);
        self.inner.dom.fabric.cm_engine.unregister(&self.cm);
        Ok(())
    }
}

/// The data calls (`endpoint_data_ops!`): kit checks and shapes each call into one
/// request; the endpoint's state (enabled, connected, room in the transmit queue) is
/// checked under its lock by the `*_common` functions.
impl DataPath for Endpoint {
    const NAME: &'static str = NAME;
    const RMA_IOV_LIMIT: usize = proto::RMA_IOV_LIMIT;
    type Active = Endpoint;

    fn active(&self) -> Result<&Endpoint> {
        Ok(self)
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.inner.tx_flags
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.inner.rx_flags
    }

    fn recv_src(&self, _src: u64) -> u64 {
        ofi_kit::tagmatch::ANY_SRC
    }

    fn inject_size(&self) -> usize {
        self.inner.inject_size
    }

    fn submit_send(&self, _act: &Endpoint, req: SendRequest) -> Result<()> {
        self.inner.send_common(&req)
    }

    fn submit_recv(&self, _act: &Endpoint, recv: PostedRecv<IoList>) -> Result<()> {
        self.inner.recv_common(recv)
    }

    fn submit_rma(&self, _act: &Endpoint, req: RmaRequest<'_>) -> Result<()> {
        self.inner.rma_common(&req)
    }

    fn submit_atomic(&self, _act: &Endpoint, req: AtomicRequest<'_>) -> Result<()> {
        // SAFETY: kit built `req` from a data call whose C contract keeps the iocs
        // valid as `atomic_common` requires.
        unsafe { self.inner.atomic_common(&req) }
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        self.inner.atomic_valid(dt, op, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair of sockets on loopback.
    fn pair() -> (Sock, Sock) {
        let l_addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let l = Sock::stream(&l_addr).unwrap();
        l.bind(&l_addr).unwrap();
        l.listen(4).unwrap();
        let bound = l.local_addr().unwrap();
        let c = Sock::stream(&bound).unwrap();
        let _ = c.connect(&bound).unwrap();
        for _ in 0..400 {
            if let Some((s, _)) = l.accept().unwrap() {
                c.poll(libc::POLLOUT, 2000).unwrap();
                return (c, s);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("no connection accepted");
    }

    const STAGE_LEN: usize = 16 * 1024;

    #[test]
    fn staged_reads_keep_the_stream_in_order() {
        stream_in_order(STAGE_LEN);
    }

    #[test]
    fn reads_without_read_ahead_keep_the_stream_in_order() {
        stream_in_order(0);
    }

    fn stream_in_order(read_ahead: usize) {
        let (tx, rx) = pair();
        let total = 3 * STAGE_LEN + 123;
        let data: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
        let writer = std::thread::spawn(move || {
            tx.write_all_timeout(&data, 5000).unwrap();
            tx
        });
        let mut stage = RxStage::new(read_ahead);
        let mut got = Vec::with_capacity(total);
        // Small reads (headers), a scatter read, and a read of at least STAGE_LEN.
        let pattern = [HDR_LEN, 24, 3, 5000, 1, STAGE_LEN + 10, 7];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut k = 0;
        while got.len() < total {
            assert!(
                std::time::Instant::now() < deadline,
                "stalled at {}",
                got.len()
            );
            let want = pattern[k % pattern.len()].min(total - got.len());
            k += 1;
            let mut buf = vec![0u8; want];
            let n = if k % 3 == 0 {
                let (a, b) = buf.split_at_mut(want / 2);
                let iov = [
                    iovec(a.as_mut_ptr() as usize, a.len()),
                    iovec(b.as_mut_ptr() as usize, b.len()),
                ];
                // SAFETY: both halves of `buf` are writable for their lengths.
                unsafe { stage.readv(&rx, &iov) }
            } else {
                stage.recv(&rx, &mut buf)
            };
            match n {
                Ok(0) => panic!("end of stream after {} bytes", got.len()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if would_block(&e) => {
                    k -= 1;
                    let _ = rx.poll(libc::POLLIN, 100);
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        let _tx = writer.join().unwrap();
        let want: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
        assert!(got == want, "the bytes came out of order or changed");
        assert_eq!(stage.pending(), 0);
    }

    #[test]
    fn segs_window_and_iovecs() {
        let mut s = Segs::default();
        s.push(1000, 10);
        s.push(2000, 5);
        s.push(3000, 20);
        let w = s.window(8, 10);
        assert_eq!(w.segs(), &[(1008, 2), (2000, 5), (3000, 3)]);
        let mut iov = [iovec(0, 0); 4];
        let n = s.iovecs(12, 100, &mut iov);
        assert_eq!(n, 2);
        assert_eq!(iov[0].iov_base as usize, 2002);
        assert_eq!(iov[0].iov_len, 3);
        assert_eq!(iov[1].iov_len, 20);
        assert_eq!(s.total().unwrap(), 35);
        assert!(!s.push(0, 0) || s.n <= SEGS_MAX);
    }

    #[test]
    fn cm_options() {
        let mut v = [0u8; 8];
        assert_eq!(cm_getopt(0, 1, &mut v).unwrap(), 8);
        assert_eq!(usize::from_ne_bytes(v), CM_DATA_SIZE);
        assert_eq!(
            cm_getopt(0, 1, &mut [0u8; 4]).unwrap_err().code(),
            Errno::ETOOSMALL
        );
        assert_eq!(
            cm_getopt(0, 0, &mut v).unwrap_err().code(),
            Errno::ENOPROTOOPT
        );
        assert!(cm_setopt(0, 1, &16usize.to_ne_bytes()).is_ok());
        assert_eq!(
            cm_setopt(0, 1, &1000usize.to_ne_bytes())
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
    }
}
