//! The active endpoint: connection management and the data path.
//!
//! # State
//!
//! One `Mutex<EpState>` per endpoint holds the socket, the connection state, the transmit
//! queue, the receive state machine, kit's tag matcher and the operations waiting for
//! a response (reads, acknowledged writes, delivery-complete sends). The data calls and
//! the progress function take it; progress uses `try_lock`, so a thread that posts
//! never waits behind a progress round and vice versa.
//!
//! # Concerns
//!
//! - `tx`: sends, RMA and atomic requests, responses, socket writes;
//! - `rx`: reading the stream, matching, placing payloads, receive completions;
//! - `target`: the target side of RMA and atomics (`MrTable` checks);
//! - `local`: same-host copies;
//! - `conn`: connection setup and teardown, CM options;
//! - `progress`: the progress round, transmit completions;
//! - `control` and `datapath`: the `EndpointOps` calls;
//! - `segs`: application buffers as addresses.
//!
//! Application buffers travel as addresses (`Segs`) from the `unsafe` data calls,
//! whose contract keeps them valid until the operation completes; a private function
//! handed raw pointers or iocs from elsewhere (`RxStage::take`, `atomic_common`) is an
//! `unsafe fn`.
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
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{AddrFormat, Address, Errno, Error, OpFlags, Result};
use ofi_kit::dataops::DataPath;
use ofi_kit::ep::CounterKind;
use ofi_kit::iov::IoList;
use ofi_kit::mr::MrEndpointTarget;
use ofi_kit::opflags::DefaultOpFlags;
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

mod conn;
mod control;
mod datapath;
mod local;
mod progress;
mod rx;
mod segs;
mod target;
#[cfg(test)]
mod tests;
mod tx;

pub(crate) use conn::{cm_getopt, cm_setopt, CmSource};
use local::{process_key, same_host, Local};
use rx::{parse_rma, RxStage};
pub(crate) use segs::Segs;
use tx::{encode_hdr, sock_fail};

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

/// The completion of a transmit-side operation.
#[derive(Clone, Copy, Debug)]
struct Comp {
    ctx: usize,
    flags: u64,
    len: usize,
    buf: usize,
    /// Write a CQ entry (else only counters).
    report: bool,
    cntr: CounterKind,
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

/// The id of an operation of this side that waits for a response (the header's `id`
/// field names it on the wire; the response carries it back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpId(u64);

/// An operation waiting for its response.
#[derive(Debug)]
struct Pending {
    id: OpId,
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

/// What the endpoint was bound to (the kit's bindings; tcp's domains have no AV).
type Binds = ofi_kit::ep::Bindings;

struct EpState {
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
    /// The next [`OpId`] (ids are not reused while the endpoint lives).
    next_id: u64,
    scratch: Vec<u8>,
    /// Bytes read ahead of the parser (see [`RxStage`]).
    stage: RxStage,
    /// Same-host copies on this connection.
    local: Local,
    /// The address `fi_setname` gave, before a connection exists.
    name: Option<SocketAddr>,
}

/// The shared part of an endpoint (registered with both progress engines).
pub(crate) struct EpInner {
    id: u64,
    fid: usize,
    dom: Arc<DomainShared>,
    info: Info,
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
    /// taking `state` (which the data path holds most of the time); -1 when not
    /// connected. Cleared before the socket is closed: a stale read at worst makes a
    /// waiter poll a closed descriptor, which wakes it (POLLNVAL), nothing more.
    cm_watch: AtomicI32,
    state: Mutex<EpState>,
}

/// An active `FI_EP_MSG` endpoint.
pub struct Endpoint {
    inner: Arc<EpInner>,
    /// The connection-management source registered with the fabric's CM engine.
    cm: Arc<CmSource>,
    /// This handle's default operation flags (an alias has its own).
    flags: DefaultOpFlags,
    /// An alias (`fi_ep_alias`): closing it leaves the endpoint open.
    alias: bool,
}

ofi_kit::debug_fields!(Endpoint, |ep| { id: ep.inner.id });

/// The IP socket address an application's address bytes name (a `sockaddr_in` or a
/// `sockaddr_in6`, told apart by length).
///
/// # Errors
/// `FI_EINVAL` for any other length or content.
pub(crate) fn ip_name(addr: &[u8]) -> Result<SocketAddr> {
    let fmt = match addr.len() {
        16 => AddrFormat::SOCKADDR_IN,
        28 => AddrFormat::SOCKADDR_IN6,
        n => {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: a {n}-byte address is neither sockaddr_in nor sockaddr_in6"),
            ))
        }
    };
    Address::from_bytes(fmt, addr)?
        .socket_addr()
        .ok_or_else(|| Error::new(Errno::EINVAL, format!("{NAME}: not an IP address")))
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::new(
        Errno(crate::sock::os_code(&e)),
        format!("{NAME}: {what}: {e}"),
    )
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

impl EpState {
    /// A fresh id for an operation that waits for a response.
    fn take_op_id(&mut self) -> OpId {
        let id = OpId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        id
    }
}

impl Endpoint {
    pub(crate) fn open(dom: Arc<DomainShared>, info: &Info, context: usize) -> Result<Endpoint> {
        let mut st_conn = Conn::Idle;
        let mut sock = None;
        let mut peer = None;
        // Checked before a pending connection is taken: bad flags or a bad class leave
        // it pending.
        let flags = DefaultOpFlags::of_endpoint::<Endpoint>(info)?;
        let dscp = ofi_core::control::endpoint_dscp(info).map_err(|e| e.context(NAME))?;
        if info.handle != 0 {
            let Some(c) = dom.fabric.take_pending(info.handle) else {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: info.handle names no pending connection request"),
                ));
            };
            if let Some(d) = dscp {
                c.sock
                    .set_dscp(c.peer.is_ipv6(), d)
                    .map_err(|e| io_err("traffic class", e))?;
            }
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
        let rx_size = ofi_kit::ep::size_or(info.rx_attr.size, settings.rx_size);
        let tx_size = ofi_kit::ep::size_or(info.tx_attr.size, settings.tx_size);
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
            state: Mutex::new(EpState {
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
                name: None,
            }),
        });
        dom.engine.register(&inner);
        let cm = Arc::new(CmSource(Arc::downgrade(&inner)));
        dom.fabric.cm_engine.register(&cm);
        Ok(Endpoint {
            inner,
            cm,
            flags,
            alias: false,
        })
    }
}

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        self.inner.id
    }
}

/// How a connection ended.
enum Fail {
    /// End of stream or reset: `FI_SHUTDOWN`.
    Closed,
    /// A socket error or malformed bytes: an error event with this code.
    Error(Errno, String),
}

impl Fail {
    /// Bytes the wire format refused: kit's mapping (`FI_EPROTO`) with the field at
    /// fault in the text.
    fn wire(e: ofi_kit::wire::WireError) -> Fail {
        let e = Error::from(e);
        Fail::Error(e.code(), format!("{NAME}: {}", e.message()))
    }
}

enum Step {
    Blocked,
    Progressed,
    Finished,
}
