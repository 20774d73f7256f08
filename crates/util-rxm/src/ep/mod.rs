//! The RDM endpoint over MSG connections: a driver of the protocol engine.
//!
//! # Structure
//!
//! The protocol's sequencing is [`crate::engine::Engine`]'s (`EpState::protocol`, one engine
//! peer per connection, numbered by the connection's index): the per-peer queue of
//! operations waiting for a connection or a credit, credits both ways, delivery
//! acknowledgements, the cursor of a segmented message being received, the rendezvous
//! bookkeeping and the epochs of a reconnected peer. The endpoint feeds it (operations
//! submitted, connections up and down, packets, finished reads, consumed messages)
//! and carries out what it hands out, adding the I/O and the buffers the engine only
//! names:
//!
//! - an operation's record (`TxOp`, its index and generation are the engine's
//!   [`OpId`]) resolves the engine's [`Transmit`]s to the application's iovs — a
//!   packet is one `sendv` of the header and the application's buffer, no copy — and
//!   the buffers registered for a rendezvous; it completes when the engine is done
//!   with it ([`Event::Sent`]) and the core completed what was posted for it;
//! - an arriving packet's [`Arrival`] is placed where kit's tag matcher says: straight
//!   into the matched receive, or copied out as an unexpected message; a rendezvous
//!   request is read with the core's RMA into the receive;
//! - completions and counters through kit, RMA and atomics forwarded to the peer's MSG
//!   endpoint (they take their place in the engine's queue, [`Engine::forward`]), and
//!   connections through the core's EQ with the connection manager
//!   ([`crate::conn`], which decides when to connect; the engine's own connection
//!   timing serves drivers without one, as the simulation's).
//!
//! An endpoint owns, in the core provider: a passive endpoint listening on its address
//! (its name is the RDM endpoint's name), an EQ for connection events, a CQ every MSG
//! endpoint it opens is bound to, and one MSG endpoint per connection (two for a
//! connection to itself). Everything else is one mutex-protected state (`EpState`):
//! connections by peer address (and receive context index), the MSG endpoint slots,
//! the engine, the operation records, the rendezvous reads and the kit tag matcher.
//! Shared contexts (`shared_ctx`) and a scalable endpoint's contexts (`scalable`) are
//! such endpoints too; a scalable endpoint owns the listener its receive contexts
//! answer through.
//!
//! # Paths
//!
//! - Send to a connected peer with credit and nothing queued: a message whose packet
//!   fits the core's inject size is injected and completes at once (the engine's
//!   [`Engine::send_now`]: no record); an eager message goes as one `sendv`; up to the
//!   SAR limit as segments of one bounce-buffer size each; beyond as a rendezvous
//!   request (the buffers registered with the core for remote read at submission)
//!   completed by the receiver's RNDV_DONE after it read the data with an RMA read.
//! - Anything else (peer not connected yet, no credit, operations queued ahead) waits in
//!   the engine's queue for the peer, so operations to one peer keep their order; what
//!   the engine handed out and the core refused for now (`FI_EAGAIN`) waits in the
//!   connection's `stalled` queue and goes first.
//! - Receive: each MSG endpoint keeps `msg_rx_size` bounce buffers posted; the buffer
//!   is reposted once its packet is placed.
//! - Flow control: a peer may have at most the granted `credits` messages (eager, SAR,
//!   RTS) not yet consumed by a receive; consumption returns credits, piggybacked on the
//!   next packet or in a CREDIT packet. The engine counts what each peer holds and
//!   refuses a packet past the grant (`FI_EPROTO`: the endpoint closes the connection),
//!   so unexpected data held per peer is bounded by `credits × sar_limit` bytes (and RTS
//!   entries hold no data) even when the peer ignores flow control.
//! - Progress ([`Progress::progress`]): connection events from the core EQ, completions
//!   from the core CQ, connection timers, what the engine has for each connection.
//!
//! # Failure
//!
//! A connection that shuts down or fails completes every operation queued or in flight
//! on it with `FI_ECONNRESET` (receives being filled from it too); a peer that cannot be
//! reached fails its queued operations with the connection manager's error
//! (`FI_ECONNREFUSED`, `FI_ETIMEDOUT`). Other peers are unaffected. Malformed packets
//! from a peer close that connection (`FI_EPROTO` logged).
//!
//! # Invariants
//!
//! - Lock order: `EpState`, then a kit CQ's / counter's / AV's own lock, then the core's.
//! - A core context names (kind, index, generation): a completion for a freed slot is
//!   recognised by its generation and ignored.
//!
//! Nothing here panics on application or peer input.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqTaggedEntry, Ioc, Iov, Msg, MsgAtomic, MsgRma, RmaIoc, RmaIov};
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::cq::{CompletionQueue, CqAttr};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype, EpOption, OptLevel, ADDR_UNSPEC};
use ofi_core::ep::{Endpoint as CoreEp, PassiveEndpoint};
use ofi_core::eq::{EqAttr, EventQueue};
use ofi_core::mr::MemoryRegion;
use ofi_core::provider::EndpointOps;
use ofi_core::EqEvent;
use ofi_core::{Caps, CqFormat, Errno, Error, MrMode, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::ep::{BindRules, Bindings, Bound, EpOpenInfo};
use ofi_kit::layered::RecvQueue;
use ofi_kit::opflags::DefaultOpFlags;
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{Incoming, Match, MatcherConfig, Placement, PostedRecv, TagMatcher};

use crate::conn::{self, Action, Incoming as ConnDecision, Manager};
use crate::engine::{
    Arrival, Config as EngineConfig, CreditToken, Engine, Event, MsgMeta, OpId,
    PeerId as EnginePeer, Protocol, ReadId, Transmit,
};
use crate::fabric::{DomainShared, Fabric};
use crate::proto::{self, Hello, Kind, Reason, Rts, HDR_LEN};
use crate::{Settings, IOV_LIMIT, NAME};

/// Core completions read per progress call.
const CQ_BATCH: usize = 8;
/// Core CQ reads per progress call at most.
const CQ_ROUNDS: usize = 16;
/// Core EQ events handled per progress call.
const EQ_BUDGET: usize = 16;
/// Largest packet of the inject fast path (header included).
const FAST_MAX: usize = 512;
/// AV indexes below this have a slot in the endpoint's direct-mapped address cache.
const DEST_FAST_MAX: usize = 4096;
/// Progress calls between two looks at the clock (for the EQ interval).
const EQ_CHECK_EVERY: u64 = 64;
/// How often the core EQ is read when no handshake is pending.
const EQ_INTERVAL: Duration = Duration::from_millis(1);
/// Context of the passive endpoint.
const CTX_PEP: usize = usize::MAX;

const K_RX: u64 = 0;
const K_TX: u64 = 1;
const K_RD: u64 = 2;

mod bounce;
mod connect;
mod data;
mod ops;
mod progress;
mod rx;
mod scalable;
mod shared_ctx;
mod trigger;
mod tx;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn mk_ctx(kind: u64, idx: u32, gen: u32) -> usize {
    ((u64::from(gen & 0x3fff_ffff) << 34) | (u64::from(idx) << 2) | kind) as usize
}

fn split_ctx(c: usize) -> (u64, u32, u32) {
    let c = c as u64;
    (c & 3, ((c >> 2) & 0xffff_ffff) as u32, (c >> 34) as u32)
}

/// The engine's name for operation `i` of generation `gen` (also the id a rendezvous
/// request carries).
fn op_id(i: u32, gen: u32) -> OpId {
    OpId((u64::from(gen) << 32) | u64::from(i))
}

/// A connection of this endpoint: its index in [`EpState::conns`], which is also the
/// engine's name for the peer at its other end (the engine keeps one peer a
/// connection; a closed connection's index may serve a new one, after the engine has
/// been told the old one went down).
type ConnId = EnginePeer;

/// MSG endpoint contexts (EQ events): slot + 1 and generation.
fn ep_ctx(slot: usize, gen: u32) -> usize {
    ((u64::from(gen) << 32) | (slot as u64 + 1)) as usize
}

fn split_ep_ctx(c: usize) -> Option<(usize, u32)> {
    let c = c as u64;
    let s = (c & 0xffff_ffff) as usize;
    if s == 0 {
        return None;
    }
    Some((s - 1, (c >> 32) as u32))
}

// ---------------------------------------------------------------------------------------
// Buffer lists.

pub use ofi_kit::iov::IoList;

// ---------------------------------------------------------------------------------------
// State.

/// Bindings made before `fi_enable` (the kit's rules).
type Setup = Bindings;

const BIND_RULES: BindRules = BindRules {
    prov: NAME,
    eq: false,
};

/// What `fi_enable` froze (the kit's [`Bound`]).
type Active = Bound;

/// A MSG endpoint of the core, with its bounce buffers.
struct MsgEp {
    ep: CoreEp,
    conn: ConnId,
    gen: u32,
    bufs: Vec<Box<[u8]>>,
    posted: bool,
}

/// A segmented message being received (the engine keeps its cursor): where its bytes
/// go, and its credit.
struct SarRx {
    inc: Incoming,
    target: SarTarget,
    credit: CreditToken,
}

enum SarTarget {
    Recv {
        recv: PostedRecv<IoList>,
        place: Placement,
        released: bool,
    },
    Buffer(Arc<Mutex<SarBuf>>),
}

/// An unexpected segmented message, assembled while it arrives.
struct SarBuf {
    data: Vec<u8>,
    complete: bool,
    discarded: bool,
    matched: Option<(PostedRecv<IoList>, Placement, bool)>,
}

/// Where a message lands: a posted receive, the part of it the message fills, and
/// whether the message releases it (its last use).
struct Landing {
    recv: PostedRecv<IoList>,
    place: Placement,
    released: bool,
}

/// What an unexpected message holds, and its credit (its peer, and the connection
/// it came on: [`Engine::is_current`]).
enum Unexp {
    Data {
        data: Vec<u8>,
        credit: CreditToken,
    },
    Sar {
        buf: Arc<Mutex<SarBuf>>,
        credit: CreditToken,
    },
    Rts(RndvReq),
}

/// A rendezvous request as the engine handed it out: the sender's buffers, the
/// engine's read and the message's credit.
struct RndvReq {
    rts: Rts,
    read: ReadId,
    credit: CreditToken,
}

struct Conn {
    /// The peer's address in the forms seen (AV entries, handshakes).
    aliases: Vec<Address>,
    /// The normalised address (unspecified IP made concrete): the connection's key and
    /// where it connects to.
    key: Vec<u8>,
    /// The peer's receive context this connection reaches (`fi_rx_addr`; 0 for an
    /// endpoint that is no scalable one), asked for in the connection request.
    rx_index: u16,
    tx: Option<usize>,
    attempt: Option<usize>,
    accepting: Option<usize>,
    extra: Vec<usize>,
    accept_credits: usize,
    /// The peer's SAR limit (from its handshake): its segmented messages are at most
    /// this long.
    peer_sar: usize,
    /// What the engine handed out for this connection that the core did not take yet
    /// (`FI_EAGAIN`), in order: sent before anything else.
    stalled: VecDeque<Transmit>,
    sar: Option<SarRx>,
    src: u64,
    src_alias: usize,
    instance: Option<u64>,
    loopback: bool,
    /// The peer counts our accesses to its memory (its handshake asked,
    /// `FI_RMA_EVENT`): each forwarded RMA or atomic that completes is told to it.
    peer_rma_event: bool,
}

enum Fwd {
    Read {
        iov: Vec<Iov>,
        desc: Vec<usize>,
        rma: RmaIov,
    },
    Write {
        iov: Vec<Iov>,
        desc: Vec<usize>,
        rma: RmaIov,
        data: Option<u64>,
    },
    Atomic {
        kind: AtomicKind,
        iov: Vec<Ioc>,
        desc: Vec<usize>,
        rma: RmaIoc,
        dt: Datatype,
        op: AtomicOp,
        cmp: Vec<Ioc>,
        cdesc: Vec<usize>,
        res: Vec<Ioc>,
        rdesc: Vec<usize>,
    },
}

impl Fwd {
    /// Whether the peer counts it as a read of its memory (`FI_REMOTE_READ`): an RMA
    /// read or an atomic read; else a write (`FI_REMOTE_WRITE`: writes and atomics).
    fn is_remote_read(&self) -> bool {
        match self {
            Fwd::Read { .. } => true,
            Fwd::Write { .. } => false,
            Fwd::Atomic { op, .. } => *op == AtomicOp::AtomicRead,
        }
    }
}

// SAFETY: the raw pointers in `Fwd` are the application's buffer addresses (and
// descriptors) of an operation in flight; they are only handed to the core's data calls,
// under the endpoint's lock, never dereferenced here. The C contract keeps them valid
// until the operation completes, whatever thread progresses it.
unsafe impl Send for Fwd {}

/// What an operation's handle resolves to: a message's buffers (the engine has its
/// tag and data), or a forwarded RMA or atomic operation.
enum Body {
    Send { iov: IoList, len: usize },
    Fwd(Fwd),
}

/// The driver's record of an operation: the buffers its handle ([`OpId`]) resolves to
/// and what its completion needs. Where it is in the protocol (queued, waiting for a
/// credit, an acknowledgement or "done") is the engine's.
struct TxOp {
    gen: u32,
    conn: ConnId,
    ctx: usize,
    flags: u64,
    want: bool,
    body: Body,
    /// Data copied at an inject call (the application's buffer may be reused).
    owned: Option<Vec<u8>>,
    /// Core operations posted and not completed.
    outstanding: u32,
    /// The engine handed out its first packet (or the operation itself).
    started: bool,
    /// Its last packet (or the operation itself) went to the core.
    posted: bool,
    /// The engine is done with it ([`Event::Sent`]).
    engine_done: bool,
    err: Option<Errno>,
    /// Packet headers in flight; boxed so their addresses stay put while the vector
    /// grows (the core holds pointers to them until completion).
    #[allow(clippy::vec_box)]
    hdrs: Vec<Box<[u8; HDR_LEN]>>,
    bounce: Vec<Vec<u8>>,
    mrs: Vec<MemoryRegion>,
}

/// A rendezvous read at the receiver.
struct RdOp {
    gen: u32,
    conn: ConnId,
    recv: PostedRecv<IoList>,
    place: Placement,
    inc: Incoming,
    released: bool,
    /// The engine's read (RNDV_DONE goes when it is reported done).
    read: ReadId,
    credit: CreditToken,
    pieces: Vec<(usize, usize, u64, u64)>,
    posted: usize,
    outstanding: u32,
    err: Option<Errno>,
}

/// One core completion of an operation with `outstanding` core operations posted:
/// one fewer, and its error kept unless an earlier one was.
fn core_completed(outstanding: &mut u32, first_err: &mut Option<Errno>, err: Option<Errno>) {
    *outstanding = outstanding.saturating_sub(1);
    if first_err.is_none() {
        *first_err = err;
    }
}

/// Room for one batch of core completions.
struct CqBuf([CqTaggedEntry; CQ_BATCH]);

// SAFETY: the entries are plain values copied out of the core CQ; their pointer fields
// (the core's buffer address of a receive) are never dereferenced through this buffer,
// which is only read and written under the endpoint's lock.
unsafe impl Send for CqBuf {}

struct EpState {
    conns: Vec<Option<Conn>>,
    /// Connections by (normalised address, receive context index).
    by_addr: HashMap<(Vec<u8>, u16), ConnId>,
    by_fi: HashMap<u64, ConnId>,
    /// (fabric address, the AV's change count then, connection) by the address's low
    /// 32 bits (the AV index), for the first [`DEST_FAST_MAX`] indexes:
    /// [`Shared::conn_of`] without a hash lookup or an AV read.
    dest_fast: Vec<(u64, u64, ConnId)>,
    /// The inject fast path's packet buffer (reused).
    fast_pkt: Vec<u8>,
    /// Core completions read per [`Shared::progress_cq`] round (reused, not zeroed per
    /// call).
    cq_buf: CqBuf,
    msgs: Vec<Option<MsgEp>>,
    msg_gen: u32,
    ops: Vec<Option<TxOp>>,
    op_free: Vec<u32>,
    op_gen: u32,
    live: usize,
    rds: Vec<Option<RdOp>>,
    rd_free: Vec<u32>,
    rd_waiting: Vec<u32>,
    matcher: TagMatcher<IoList, Unexp>,
    /// The protocol's sequencing (peer = connection index): per-peer queues, credits,
    /// acknowledgements, segment cursors, rendezvous bookkeeping, epochs.
    protocol: Engine,
    conn_mgr: Manager,
    /// The connection manager's next deadline, on its clock ([`EpState::now`]).
    next_timer: Option<conn::Nanos>,
    /// The origin of the connection manager's clock.
    clock: Instant,
    /// When the core EQ was last read.
    last_eq: Instant,
    /// Progress calls so far.
    polls: u64,
}

/// Everything of an endpoint; the progress engine holds it weakly.
struct Shared {
    state: Mutex<EpState>,
    dom: Arc<DomainShared>,
    settings: Settings,
    core_cq: CompletionQueue,
    core_eq: EventQueue,
    /// The listening passive endpoint; `fi_setname` before `fi_enable` replaces it by
    /// one listening at the new name ([`Shared::listen_at`]). Locked alone (nothing is
    /// taken under it).
    pep: Mutex<PassiveEndpoint>,
    /// The endpoint's name: its passive endpoint's.
    me_bytes: ofi_kit::layered::SettableName,
    instance: u64,
    core_inject: usize,
    core_virt: bool,
    /// How the bounce buffers on the core's MSG endpoints are laid out (`bounce`).
    bounce: bounce::Bounce,
    engine: Arc<ProgressEngine>,
    need_src: bool,
    directed: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    /// Remote-access counters (locked after `state` where both are held).
    /// Counters bound with `FI_REMOTE_WRITE` / `FI_REMOTE_READ` (`FI_RMA_EVENT`): they
    /// count the peers' accesses to this endpoint's memory as the peers report them done
    /// ([`proto::Op::RemoteAccess`]). Bound before `fi_enable`, so before any handshake
    /// (which asks peers for those reports).
    remote: Mutex<ofi_kit::remote_cntr::RemoteCntrs>,
    /// Triggered operations waiting for their counters (`trigger`).
    triggers: ofi_kit::trigger::TriggerQueue,
    /// This endpoint, for issuing triggered operations from progress (`trigger`).
    this: std::sync::Weak<Shared>,
    /// The tag of this endpoint's authorization key (`crate::auth`).
    auth: ofi_kit::auth::AuthTag,
    /// What this object is (an endpoint or a shared context) and its shared-context
    /// bindings (`shared_ctx`).
    ctx: shared_ctx::CtxState,
    /// A scalable endpoint's state, or a context's link to its scalable endpoint
    /// (`scalable`).
    sep: scalable::Membership,
}

/// An `FI_EP_RDM` endpoint of `ofi_rxm` (see the module docs).
pub struct Endpoint {
    sh: Arc<Shared>,
    /// This handle's default operation flags (an alias has its own).
    flags: DefaultOpFlags,
}

ofi_kit::debug_fields!(Endpoint, |ep| { addr: ep.sh.me_bytes });

static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Endpoint {
    /// Open an endpoint: the core EQ, CQ and a listening passive endpoint (at
    /// `info.src_addr` if given).
    ///
    /// # Errors
    /// The core's errors opening those objects.
    pub fn open(
        dom: Arc<DomainShared>,
        info: &Info,
        _context: usize,
        engine: Arc<ProgressEngine>,
    ) -> Result<Endpoint> {
        Self::open_as(
            dom,
            info,
            engine,
            shared_ctx::Role::Endpoint,
            scalable::Membership::None,
        )
    }

    /// [`Endpoint::open`] of an endpoint, a shared context, a scalable endpoint or one
    /// of its contexts (`role`, `sep`).
    fn open_as(
        dom: Arc<DomainShared>,
        info: &Info,
        engine: Arc<ProgressEngine>,
        role: shared_ctx::Role,
        sep: scalable::Membership,
    ) -> Result<Endpoint> {
        // Checked first: a refused open leaves nothing registered.
        let flags = DefaultOpFlags::of_endpoint::<Self>(info)?;
        let auth = ofi_kit::auth::AuthTag::of(ofi_kit::auth::endpoint_key(
            NAME,
            info,
            dom.auth_key.get(),
            ofi_kit::auth::AUTH_KEY_MAX,
        )?);
        let settings = dom.settings;
        let core_eq = dom.fabric.eq_open(&EqAttr::default())?;
        let core_cq = dom.core.cq_open(&CqAttr {
            size: settings.tx_size + settings.rx_size + 1024,
            ..CqAttr::with_format(CqFormat::Tagged)
        })?;
        let mut pi = dom.core_info.clone();
        pi.src_addr.clone_from(&info.src_addr);
        pi.dest_addr = None;
        let pep = dom.fabric.passive_ep_with(&pi, CTX_PEP)?;
        pep.bind_eq(&core_eq, 0)?;
        if role.listens() {
            // A shared context is reached through its endpoints, a scalable endpoint's
            // context through the scalable endpoint: never connected to.
            pep.listen()?;
        }
        let me_bytes = pep.getname()?;
        let open = EpOpenInfo::new(info, settings.rx_size);
        let m = TagMatcher::new(MatcherConfig {
            // Credits bound what peers can leave unexpected; these are backstops.
            max_unexpected: usize::MAX / 2,
            max_unexpected_bytes: usize::MAX / 2,
            ..open.matcher_config()
        });
        let mgr = Manager::new(conn::Config {
            timeout: Duration::from_millis(settings.conn_timeout_ms),
            retries: settings.conn_retries.max(1),
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            max_in_flight: settings.max_connecting,
        });
        let instance = (u64::from(std::process::id()) << 32)
            | NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let core_inject = dom.core_info.tx_attr.inject_size;
        let bounce = bounce::Bounce::new(&settings, dom.core_info.caps);
        let core_virt = dom
            .core_info
            .domain_attr
            .mr_mode
            .contains(MrMode::VIRT_ADDR);
        let tx_size = settings.tx_size;
        let sh = Arc::new_cyclic(|this| Shared {
            triggers: ofi_kit::trigger::TriggerQueue::new(tx_size),
            this: this.clone(),
            auth,
            state: Mutex::new(EpState {
                conns: Vec::new(),
                by_addr: HashMap::new(),
                by_fi: HashMap::new(),
                dest_fast: Vec::new(),
                fast_pkt: Vec::with_capacity(FAST_MAX),
                cq_buf: CqBuf([CqTaggedEntry::default(); CQ_BATCH]),
                msgs: Vec::new(),
                msg_gen: 1,
                ops: Vec::new(),
                op_free: Vec::new(),
                op_gen: 1,
                live: 0,
                rds: Vec::new(),
                rd_free: Vec::new(),
                rd_waiting: Vec::new(),
                matcher: m,
                protocol: Engine::new(EngineConfig {
                    credits: settings.credits as u32,
                    eager_max: settings.eager_limit(),
                    seg_size: settings.eager_limit(),
                    sar_limit: settings.sar_limit,
                    max_msg: crate::MAX_MSG_SIZE,
                }),
                conn_mgr: mgr,
                next_timer: None,
                clock: Instant::now(),
                last_eq: Instant::now(),
                polls: 0,
            }),
            dom,
            settings,
            core_cq,
            core_eq,
            pep: Mutex::new(pep),
            me_bytes: ofi_kit::layered::SettableName::new(me_bytes),
            instance,
            core_inject,
            core_virt,
            bounce,
            engine: engine.clone(),
            need_src: open.need_src,
            directed: open.directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
            remote: Mutex::default(),
            ctx: shared_ctx::CtxState::new(role),
            sep,
        });
        engine.register(&sh);
        Ok(Endpoint { sh, flags })
    }

    /// The endpoint's address (the core passive endpoint's name).
    ///
    /// # Errors
    /// `FI_EINVAL` if the core's name is no address of its format.
    pub fn address(&self) -> Result<Address> {
        Address::from_bytes(
            self.sh.dom.core_info.addr_format,
            &self.sh.me_bytes.to_vec(),
        )
    }

    /// Connections currently up.
    pub fn connections(&self) -> usize {
        lock(&self.sh.state)
            .conns
            .iter()
            .flatten()
            .filter(|c| c.tx.is_some())
            .count()
    }
}

/// Whether a core data-call error means the connection is gone.
fn is_conn_err(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOTCONN | Errno::ECONNRESET | Errno::ECONNABORTED | Errno::ESHUTDOWN | Errno(32)
    )
}

/// A core operation's error as the application sees it: a lost connection, whatever
/// the core called it, is `FI_ECONNRESET`.
fn conn_err(e: Errno) -> Errno {
    if is_conn_err(e) {
        Errno::ECONNRESET
    } else {
        e
    }
}

/// `a` with an unspecified IP replaced by `ip` (or the loopback address of its family):
/// a name of an endpoint listening on every interface, made concrete.
fn norm_addr(a: &Address, ip: Option<std::net::IpAddr>) -> Address {
    match a.socket_addr() {
        Some(mut sa) if sa.ip().is_unspecified() => {
            let ip = match (ip, sa.is_ipv4()) {
                (Some(ip), _) if ip.is_ipv4() == sa.is_ipv4() && !ip.is_unspecified() => ip,
                (_, true) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                (_, false) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            };
            sa.set_ip(ip);
            Address::from(sa)
        }
        _ => a.clone(),
    }
}

// ---------------------------------------------------------------------------------------
// Shared state: engine plumbing (completions are the kit's `Bound::complete_*`).

impl Shared {
    fn hello(&self, kind: Kind, reason: Reason) -> Vec<u8> {
        self.hello_with(kind, reason, &crate::hello_ext::Extensions::default())
    }

    /// [`Shared::hello`] with handshake extensions (`crate::hello_ext`).
    fn hello_with(
        &self,
        kind: Kind,
        reason: Reason,
        ext: &crate::hello_ext::Extensions,
    ) -> Vec<u8> {
        let mut b = Hello {
            kind,
            version: proto::VERSION,
            reason,
            buffer_size: self.settings.buffer_size as u32,
            credits: self.settings.credits as u32,
            sar_limit: self.settings.sar_limit as u64,
            instance: self.instance,
            rma_event: lock(&self.remote).any(),
            addr: self.me_bytes.to_vec(),
        }
        .encode();
        crate::hello_ext::append(&mut b, self.auth, ext);
        b
    }

    /// `fi_setname` (before `fi_enable`, the kit's glue checks): a passive endpoint
    /// listening at `addr` replaces the current one, and its name becomes the
    /// endpoint's; the old one is closed (a peer that connected to the old name
    /// before the rename gets no answer the protocol relies on: its connection manager
    /// retries or fails as for any refused connection). Naming the endpoint what it is
    /// already called changes nothing.
    ///
    /// # Errors
    /// `FI_EINVAL` for bytes that are no address of the core's format; the core's
    /// errors listening there (`FI_EADDRINUSE`, …), the old listener then kept.
    fn listen_at(&self, addr: &[u8]) -> Result<()> {
        let fmt = self.dom.core_info.addr_format;
        let a = Address::from_bytes(fmt, addr)?;
        if a.to_bytes() == self.me_bytes.to_vec() {
            return Ok(());
        }
        let mut pi = self.dom.core_info.clone();
        pi.src_addr = Some(a);
        pi.dest_addr = None;
        let pep = self.dom.fabric.passive_ep_with(&pi, CTX_PEP)?;
        pep.bind_eq(&self.core_eq, 0)?;
        pep.listen()?;
        let name = pep.getname()?;
        *lock(&self.pep) = pep;
        self.me_bytes.set(name);
        Ok(())
    }

    /// Refuse the connection request `handle` on the passive endpoint it arrived at
    /// ([`Shared::listener`]), saying why.
    fn reject(&self, handle: usize, reason: Reason) {
        let _ = lock(&self.listener().pep).reject(handle, &self.hello(Kind::Reject, reason));
    }

    /// [`Shared::reject`], with a warning naming `why` (at most 5 lines per requesting
    /// address `from` per 10 s).
    fn refuse(&self, handle: usize, from: &[u8], reason: Reason, why: &str) {
        static LOG: OnceLock<ofi_kit::diag::RateLimit<Vec<u8>>> = OnceLock::new();
        let log =
            LOG.get_or_init(|| ofi_kit::diag::RateLimit::new(5, Duration::from_secs(10), 1024));
        if let Some(n) = log.admit(&from.to_vec(), Instant::now()) {
            ofi_core::ofi_warn!(
                NAME,
                "ep_ctrl",
                "refused a connection request: {why}{}",
                ofi_kit::diag::suppressed_note(n)
            );
        }
        self.reject(handle, reason);
    }

    /// A peer reported one of its accesses to our memory done: the remote counter of
    /// its kind counts it.
    fn count_remote_access(&self, read: bool) {
        lock(&self.remote).count(read);
    }
}

// ---------------------------------------------------------------------------------------
// Connections.

impl EpState {
    /// Connection `conn_id`, if it is open.
    fn conn(&self, conn_id: ConnId) -> Option<&Conn> {
        self.conns.get(conn_id.index())?.as_ref()
    }

    /// Transmit operation `i`, if it is still of generation `gen` (a core completion
    /// for a freed or reused slot finds nothing).
    fn live_op(&mut self, i: u32, gen: u32) -> Option<&mut TxOp> {
        self.ops
            .get_mut(i as usize)?
            .as_mut()
            .filter(|op| op.gen == gen)
    }

    /// Rendezvous read `i`, if it is still of generation `gen`.
    fn live_read(&mut self, i: u32, gen: u32) -> Option<&mut RdOp> {
        self.rds
            .get_mut(i as usize)?
            .as_mut()
            .filter(|read| read.gen == gen)
    }

    /// The connection MSG endpoint `slot` serves, if the slot is live.
    fn conn_of_slot(&self, slot: usize) -> Option<ConnId> {
        Some(self.msgs.get(slot)?.as_ref()?.conn)
    }

    /// Connection `conn_id`, writable, if it is open.
    fn conn_mut(&mut self, conn_id: ConnId) -> Option<&mut Conn> {
        self.conns.get_mut(conn_id.index())?.as_mut()
    }

    /// `t` on the connection manager's clock (nanoseconds since the endpoint was made).
    fn clock_at(&self, t: Instant) -> conn::Nanos {
        u64::try_from(t.saturating_duration_since(self.clock).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The time now on the connection manager's clock.
    fn now(&self) -> conn::Nanos {
        self.clock_at(Instant::now())
    }

    /// The connection for peer `addr` (created idle if new); `addr` becomes one of its
    /// aliases (the forms the AV may hold it under).
    fn conn_for_addr(&mut self, addr: &Address) -> ConnId {
        self.conn_for_target(addr, 0)
    }

    /// [`EpState::conn_for_addr`] for receive context `rx_index` of the peer: each index
    /// has its connection.
    fn conn_for_target(&mut self, addr: &Address, rx_index: u16) -> ConnId {
        let key = (norm_addr(addr, None).to_bytes(), rx_index);
        if let Some(&conn_id) = self.by_addr.get(&key) {
            if let Some(conn) = self.conn_mut(conn_id) {
                if !conn.aliases.contains(addr) {
                    conn.aliases.push(addr.clone());
                }
            }
            return conn_id;
        }
        let conn = Conn {
            aliases: vec![addr.clone()],
            key: key.0.clone(),
            rx_index,
            tx: None,
            attempt: None,
            accepting: None,
            extra: Vec::new(),
            accept_credits: 0,
            peer_sar: 0,
            stalled: VecDeque::new(),
            sar: None,
            src: ADDR_NOTAVAIL,
            src_alias: 0,
            instance: None,
            loopback: false,
            peer_rma_event: false,
        };
        let index = match self.conns.iter().position(Option::is_none) {
            Some(i) => {
                self.conns[i] = Some(conn);
                i
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        let id = ConnId::from_index(index);
        self.by_addr.insert(key, id);
        id
    }

    fn conn_src(&mut self, active: &Active, conn_id: ConnId, need: bool) -> u64 {
        if !need {
            return ADDR_NOTAVAIL;
        }
        let Some(conn) = self.conns.get_mut(conn_id.index()).and_then(Option::as_mut) else {
            return ADDR_NOTAVAIL;
        };
        if conn.src != ADDR_NOTAVAIL {
            if let Some(a) = conn.aliases.get(conn.src_alias) {
                if active
                    .av
                    .with_entry(conn.src, |e| e.addr == a)
                    .unwrap_or(false)
                {
                    return conn.src;
                }
            }
        }
        for (k, a) in conn.aliases.iter().enumerate() {
            if let Some(f) = active.av.reverse_lookup(a) {
                conn.src = f;
                conn.src_alias = k;
                return f;
            }
        }
        conn.src = ADDR_NOTAVAIL;
        ADDR_NOTAVAIL
    }

    fn new_msg(&mut self, ep: CoreEp, conn: ConnId, gen: u32) -> usize {
        let m = MsgEp {
            ep,
            conn,
            gen,
            bufs: Vec::new(),
            posted: false,
        };
        match self.msgs.iter().position(Option::is_none) {
            Some(i) => {
                self.msgs[i] = Some(m);
                i
            }
            None => {
                self.msgs.push(Some(m));
                self.msgs.len() - 1
            }
        }
    }

    fn alloc_op(&mut self, mut op: TxOp) -> u32 {
        self.op_gen = self.op_gen.wrapping_add(1) & 0x3fff_ffff;
        op.gen = self.op_gen;
        self.live += 1;
        match self.op_free.pop() {
            Some(i) => {
                self.ops[i as usize] = Some(op);
                i
            }
            None => {
                self.ops.push(Some(op));
                (self.ops.len() - 1) as u32
            }
        }
    }

    fn free_op(&mut self, i: u32) -> Option<TxOp> {
        let op = self.ops.get_mut(i as usize)?.take()?;
        self.op_free.push(i);
        self.live = self.live.saturating_sub(1);
        Some(op)
    }
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(active) = self.active.get() else {
            return 0;
        };
        let n = self.progress_now(active);
        // Triggered operations go once their counters reach their thresholds: one
        // load when none waits.
        if self.triggers.is_empty() {
            n
        } else {
            n + self.fire_triggers(active)
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.cancel_triggers();
        self.refuse_unrouted();
        // MSG endpoints go first (they are bound to the CQ and EQ dropped after us).
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        state.msgs.clear();
        state.ops.clear();
        state.rds.clear();
    }
}

impl ofi_kit::layered::LayeredEndpoint for Endpoint {
    const NAME: &'static str = NAME;

    ofi_kit::layered_endpoint_state!(shared: sh, flags: flags, rules: BIND_RULES);

    fn with_matcher<R>(&self, f: impl FnOnce(&mut dyn RecvQueue) -> R) -> R {
        f(&mut lock(&self.sh.state).matcher)
    }

    fn tx_room(&self) -> usize {
        let state = lock(&self.sh.state);
        self.sh.settings.tx_size.saturating_sub(state.live)
    }

    /// `FI_RMA_EVENT`: counters of the peers' RMA and atomics on this endpoint's memory
    /// (`FI_REMOTE_WRITE`: writes and atomics, `FI_REMOTE_READ`: reads), one per kind.
    fn bind_remote_cntr(&self, cntr: &ofi_kit::cntr::KitCntr, flags: OpFlags) -> Result<()> {
        lock(&self.sh.remote).bind(NAME, cntr, flags)
    }

    /// A shared receive or transmit context (`shared_ctx`).
    fn bind_shared_ctx(&self, ctx: &dyn std::any::Any, srx: bool, flags: OpFlags) -> Result<()> {
        self.sh.bind_shared_ctx(ctx, srx, flags)
    }

    fn is_shared_ctx(&self) -> bool {
        self.sh.ctx.is_context()
    }

    /// `fi_setname` before `fi_enable`: listen at `addr` instead (not on a scalable
    /// endpoint's context, nor on a scalable endpoint with open contexts).
    fn rename(&self, addr: &[u8]) -> Result<()> {
        self.sh.check_rename()?;
        self.sh.listen_at(addr)
    }

    /// An endpoint bound to a shared receive context joins it (`shared_ctx`); a
    /// scalable endpoint's context notes its CQs (`scalable`).
    fn on_enable(&self, bound: &Bound) -> Result<()> {
        self.sh.join_srx(bound);
        self.sh.note_ctx_cqs(bound);
        Ok(())
    }

    /// A scalable endpoint binds an AV only (`scalable`).
    fn is_scalable(&self) -> bool {
        self.sh.is_scalable()
    }

    /// A scalable endpoint's context takes its AV when it has none (`scalable`).
    fn inherit(&self, setup: &mut Bindings) {
        self.sh.inherit_av(setup);
    }
}

impl EndpointOps<Fabric> for Endpoint {
    ofi_kit::layered_handle_ops!(Fabric, shared: sh, flags: flags);

    /// `fi_setname`: before `fi_enable` only (the kit's glue), see `rename`.
    fn setname(&self, addr: &[u8]) -> Result<()> {
        ofi_kit::layered::setname(self, addr)
    }

    /// `fi_close`: `FI_EBUSY` for a scalable endpoint with open contexts.
    fn close(&self) -> Result<()> {
        self.sh.sep_close()
    }

    /// `fi_tx_context` on a scalable endpoint (`scalable`).
    fn tx_ctx(&self, index: i32, attr: &ofi_core::TxAttr, _context: usize) -> Result<Self> {
        self.tx_context(index, attr)
    }

    /// `fi_rx_context` on a scalable endpoint (`scalable`).
    fn rx_ctx(&self, index: i32, attr: &ofi_core::RxAttr, _context: usize) -> Result<Self> {
        self.rx_context(index, attr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_round_trip() {
        for (k, i, g) in [
            (K_RX, 0u32, 1u32),
            (K_TX, 12345, 0x3fff_ffff),
            (K_RD, u32::MAX, 7),
        ] {
            assert_eq!(split_ctx(mk_ctx(k, i, g)), (k, i, g));
        }
        assert_eq!(split_ep_ctx(ep_ctx(0, 5)), Some((0, 5)));
        assert_eq!(
            split_ep_ctx(ep_ctx(77, 0x3fff_ffff)),
            Some((77, 0x3fff_ffff))
        );
        assert_eq!(split_ep_ctx(0), None);
    }
}
