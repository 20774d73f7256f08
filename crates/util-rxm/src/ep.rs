//! The RDM endpoint over MSG connections.
//!
//! # Structure
//!
//! An endpoint owns, in the core provider: a passive endpoint listening on its address
//! (its name is the RDM endpoint's name), an EQ for connection events, a CQ every MSG
//! endpoint it opens is bound to, and one MSG endpoint per connection (two for a
//! connection to itself). Everything else is one mutex-protected state (`St`):
//! connections by peer address, the MSG endpoint slots, the transmit operations, the
//! rendezvous reads and the kit tag matcher.
//!
//! # Paths
//!
//! - Send to a connected peer with credit and nothing queued: a message whose packet
//!   fits the core's inject size is injected and completes at once; an eager message
//!   goes as one `sendv` (header + the application's buffer, no copy); up to the SAR
//!   limit as segments of one bounce-buffer size each; beyond as a rendezvous request
//!   (the buffers registered with the core for remote read) completed by the receiver's
//!   RNDV_DONE after it read the data with an RMA read.
//! - Anything else (peer not connected yet, no credit, operations queued ahead) waits in
//!   the connection's FIFO, so messages to one peer keep their order; the connection
//!   manager ([`crate::conn`]) decides when to connect.
//! - RMA and atomics are forwarded to the peer's MSG endpoint (queued likewise while
//!   connecting) and complete with the core's completion.
//! - Receive: each MSG endpoint keeps `msg_rx_size` bounce buffers posted. A packet is
//!   matched with the kit matcher: data goes straight into the matched receive, or is
//!   copied out as an unexpected message; the buffer is reposted at once.
//! - Flow control: a peer may have at most the granted `credits` messages (eager, SAR,
//!   RTS) not yet consumed by a receive; consumption returns credits, piggybacked on the
//!   next packet or in a CREDIT packet. The receiver counts what each peer holds
//!   (`Conn::held`) and disconnects a peer that goes past the grant (`FI_EPROTO`), so
//!   unexpected data held per peer is bounded by `credits × sar_limit` bytes (and RTS
//!   entries hold no data) even when the peer ignores flow control.
//! - Progress ([`Progress::progress`]): connection events from the core EQ, completions
//!   from the core CQ, connection timers, queued sends.
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
//! - Lock order: `St`, then a kit CQ's / counter's / AV's own lock, then the core's.
//! - A core context names (kind, index, generation): a completion for a freed slot is
//!   recognised by its generation and ignored.
//!
//! Nothing here panics on application or peer input.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqTaggedEntry, Ioc, Iov, MsgAtomic, MsgRma, RmaIoc, RmaIov};
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::cq::{CompletionQueue, CqAttr};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype, ADDR_UNSPEC};
use ofi_core::ep::{Endpoint as CoreEp, PassiveEndpoint};
use ofi_core::eq::{EqAttr, EventQueue};
use ofi_core::mr::MemoryRegion;
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::EqEvent;
use ofi_core::{Caps, CqFormat, Errno, Error, MrMode, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::ep::{BindRules, Bindings, Bound};
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{
    Incoming, Match, MatcherConfig, MultiBuf, Placement, PostAction, PostedRecv, TagMatcher,
    ANY_SRC,
};

use crate::conn::{self, Action, Incoming as ConnDecision, Manager, PeerId};
use crate::fabric::{DomainShared, Fabric};
use crate::proto::{self, Hdr, Hello, Kind, Op, Reason, Rts, HDR_LEN};
use crate::{Settings, IOV_LIMIT, NAME};

/// Core completions read per progress call.
const CQ_BATCH: usize = 8;
/// Core CQ reads per progress call at most.
const CQ_ROUNDS: usize = 16;
/// Core EQ events handled per progress call.
const EQ_BUDGET: usize = 16;
/// Largest packet of the inject fast path (header included).
const FAST_MAX: usize = 512;
/// Progress calls between two looks at the clock (for the EQ interval).
const EQ_CHECK_EVERY: u64 = 64;
/// How often the core EQ is read when no handshake is pending.
const EQ_INTERVAL: Duration = Duration::from_millis(1);
/// Context of the passive endpoint.
const CTX_PEP: usize = usize::MAX;

const K_RX: u64 = 0;
const K_TX: u64 = 1;
const K_RD: u64 = 2;

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
    prov: "ofi_rxm",
    eq: false,
};

/// What `fi_enable` froze (the kit's [`Bound`]).
type Active = Bound;

/// A MSG endpoint of the core, with its bounce buffers.
struct MsgEp {
    ep: CoreEp,
    conn: usize,
    gen: u32,
    bufs: Vec<Box<[u8]>>,
    posted: bool,
}

/// A segmented message being received.
struct SarRx {
    inc: Incoming,
    got: usize,
    target: SarTarget,
    /// The sender waits for a delivery acknowledgement once the last segment is in.
    dc: bool,
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

/// What an unexpected message holds.
enum Unexp {
    Data {
        data: Vec<u8>,
        conn: usize,
        epoch: u64,
    },
    Sar {
        buf: Arc<Mutex<SarBuf>>,
        conn: usize,
        epoch: u64,
    },
    Rts {
        rts: Rts,
        conn: usize,
        epoch: u64,
    },
}

struct Conn {
    /// The peer's address in the forms seen (AV entries, handshakes).
    aliases: Vec<Address>,
    /// The normalised address (unspecified IP made concrete): the connection's key and
    /// where it connects to.
    key: Vec<u8>,
    epoch: u64,
    tx: Option<usize>,
    attempt: Option<usize>,
    accepting: Option<usize>,
    extra: Vec<usize>,
    credits: usize,
    accept_credits: usize,
    /// The peer's SAR limit (from its handshake): its segmented messages are at most
    /// this long.
    peer_sar: usize,
    /// Credits to hand back: messages of the peer consumed since the last return.
    owed: usize,
    /// The peer's credited messages (eager, first segment, RTS) whose credit has not
    /// been handed back yet (consumed or not): never above our grant, or the peer
    /// broke the protocol.
    held: usize,
    queue: VecDeque<u32>,
    ctrl: VecDeque<Hdr>,
    /// Delivery-complete operations sent on this connection whose acknowledgement has
    /// not come (index, generation), in the order sent.
    dc_wait: VecDeque<(u32, u32)>,
    sar: Option<SarRx>,
    src: u64,
    src_alias: usize,
    instance: Option<u64>,
    loopback: bool,
}

impl Conn {
    /// Take the credits owed to the peer (at most what a header carries) for a packet.
    fn give_owed(&mut self) -> u16 {
        let give = self.owed.min(u16::MAX as usize);
        self.owed -= give;
        self.held = self.held.saturating_sub(give);
        give as u16
    }

    /// A packet that carried `give` credits was not sent after all.
    fn regain_owed(&mut self, give: u16) {
        self.owed += usize::from(give);
        self.held += usize::from(give);
    }
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

// SAFETY: the raw pointers in `Fwd` are the application's buffer addresses (and
// descriptors) of an operation in flight; they are only handed to the core's data calls,
// under the endpoint's lock, never dereferenced here. The C contract keeps them valid
// until the operation completes, whatever thread progresses it.
unsafe impl Send for Fwd {}

enum Body {
    Send {
        iov: IoList,
        len: usize,
        tag: u64,
        data: Option<u64>,
        tagged: bool,
    },
    Fwd(Fwd),
}

struct TxOp {
    gen: u32,
    conn: usize,
    ctx: usize,
    flags: u64,
    want: bool,
    body: Body,
    /// Data copied at an inject call (the application's buffer may be reused).
    owned: Option<Vec<u8>>,
    outstanding: u32,
    await_done: bool,
    /// `FI_DELIVERY_COMPLETE` asked for: an eager or segmented message carries
    /// [`proto::F_DC`] and completes on the receiver's [`Op::DcAck`] (a rendezvous one
    /// completes on "done" anyway).
    dc: bool,
    /// Its message is out; its delivery acknowledgement has not come.
    await_ack: bool,
    posted: bool,
    sent: usize,
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
    conn: usize,
    recv: PostedRecv<IoList>,
    place: Placement,
    inc: Incoming,
    released: bool,
    id: u64,
    pieces: Vec<(usize, usize, u64, u64)>,
    posted: usize,
    outstanding: usize,
    err: Option<Errno>,
}

struct St {
    conns: Vec<Option<Conn>>,
    by_addr: HashMap<Vec<u8>, usize>,
    by_fi: HashMap<u64, usize>,
    msgs: Vec<Option<MsgEp>>,
    msg_gen: u32,
    ops: Vec<Option<TxOp>>,
    op_free: Vec<u32>,
    op_gen: u32,
    live: usize,
    rds: Vec<Option<RdOp>>,
    rd_free: Vec<u32>,
    rd_waiting: Vec<u32>,
    m: TagMatcher<IoList, Unexp>,
    mgr: Manager,
    next_timer: Option<Instant>,
    epoch: u64,
    /// When the core EQ was last read.
    last_eq: Instant,
    /// Progress calls so far.
    polls: u64,
}

/// Everything of an endpoint; the progress engine holds it weakly.
struct Shared {
    st: Mutex<St>,
    dom: Arc<DomainShared>,
    settings: Settings,
    core_cq: CompletionQueue,
    core_eq: EventQueue,
    pep: PassiveEndpoint,
    me: Address,
    me_bytes: Vec<u8>,
    instance: u64,
    core_inject: usize,
    core_virt: bool,
    engine: Arc<ProgressEngine>,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
    need_src: bool,
    directed: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
}

/// An `FI_EP_RDM` endpoint of `ofi_rxm` (see the module docs).
pub struct Endpoint {
    sh: Arc<Shared>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("addr", &self.sh.me)
            .finish_non_exhaustive()
    }
}

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
        pep.listen()?;
        let me_bytes = pep.getname()?;
        let me = Address::from_bytes(dom.core_info.addr_format, &me_bytes)?;
        let caps = if info.caps.is_empty() {
            Caps::MSG | Caps::TAGGED | Caps::SEND | Caps::RECV
        } else {
            info.caps
        };
        let directed = caps.contains(Caps::DIRECTED_RECV);
        let rx_size = if info.rx_attr.size == 0 {
            settings.rx_size
        } else {
            info.rx_attr.size
        };
        let m = TagMatcher::new(MatcherConfig {
            directed_recv: directed,
            max_posted: rx_size,
            // Credits bound what peers can leave unexpected; these are backstops.
            max_unexpected: usize::MAX / 2,
            max_unexpected_bytes: usize::MAX / 2,
            ..MatcherConfig::default()
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
        let core_virt = dom
            .core_info
            .domain_attr
            .mr_mode
            .contains(MrMode::VIRT_ADDR);
        let sh = Arc::new(Shared {
            st: Mutex::new(St {
                conns: Vec::new(),
                by_addr: HashMap::new(),
                by_fi: HashMap::new(),
                msgs: Vec::new(),
                msg_gen: 1,
                ops: Vec::new(),
                op_free: Vec::new(),
                op_gen: 1,
                live: 0,
                rds: Vec::new(),
                rd_free: Vec::new(),
                rd_waiting: Vec::new(),
                m,
                mgr,
                next_timer: None,
                epoch: 1,
                last_eq: Instant::now(),
                polls: 0,
            }),
            dom,
            settings,
            core_cq,
            core_eq,
            pep,
            me,
            me_bytes,
            instance,
            core_inject,
            core_virt,
            engine: engine.clone(),
            tx_op_flags: default_tx_flags(info.tx_attr.op_flags),
            rx_op_flags: info.rx_attr.op_flags,
            need_src: caps.intersects(Caps::SOURCE | Caps::DIRECTED_RECV),
            directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
        });
        engine.register(&sh);
        Ok(Endpoint { sh })
    }

    /// The endpoint's address (the core passive endpoint's name).
    pub fn address(&self) -> &Address {
        &self.sh.me
    }

    /// Connections currently up.
    pub fn connections(&self) -> usize {
        lock(&self.sh.st)
            .conns
            .iter()
            .flatten()
            .filter(|c| c.tx.is_some())
            .count()
    }

    fn active(&self) -> Result<&Active> {
        self.sh
            .active
            .get()
            .ok_or_else(|| Error::new(Errno::EOPBADSTATE, "ofi_rxm: endpoint not enabled"))
    }
}

/// Whether a core data-call error means the connection is gone.
fn is_conn_err(e: Errno) -> bool {
    matches!(
        e,
        Errno::ENOTCONN | Errno::ECONNRESET | Errno::ECONNABORTED | Errno::ESHUTDOWN | Errno(32)
    )
}

fn default_tx_flags(f: OpFlags) -> OpFlags {
    if f.intersects(OpFlags::INJECT_COMPLETE | OpFlags::TRANSMIT_COMPLETE) {
        f - OpFlags::DELIVERY_COMPLETE
    } else {
        f
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
        Hello {
            kind,
            version: proto::VERSION,
            reason,
            buffer_size: self.settings.buffer_size as u32,
            credits: self.settings.credits as u32,
            sar_limit: self.settings.sar_limit as u64,
            instance: self.instance,
            addr: self.me_bytes.clone(),
        }
        .encode()
    }
}

// ---------------------------------------------------------------------------------------
// Connections.

impl St {
    /// The connection for peer `addr` (created idle if new); `addr` becomes one of its
    /// aliases (the forms the AV may hold it under).
    fn conn_for_addr(&mut self, addr: &Address) -> usize {
        let key = norm_addr(addr, None).to_bytes();
        if let Some(&c) = self.by_addr.get(&key) {
            if let Some(conn) = self.conns.get_mut(c).and_then(Option::as_mut) {
                if !conn.aliases.contains(addr) {
                    conn.aliases.push(addr.clone());
                }
            }
            return c;
        }
        let epoch = self.epoch;
        self.epoch += 1;
        let c = Conn {
            aliases: vec![addr.clone()],
            key: key.clone(),
            epoch,
            tx: None,
            attempt: None,
            accepting: None,
            extra: Vec::new(),
            credits: 0,
            accept_credits: 0,
            peer_sar: 0,
            owed: 0,
            held: 0,
            queue: VecDeque::new(),
            ctrl: VecDeque::new(),
            dc_wait: VecDeque::new(),
            sar: None,
            src: ADDR_NOTAVAIL,
            src_alias: 0,
            instance: None,
            loopback: false,
        };
        let idx = match self.conns.iter().position(Option::is_none) {
            Some(i) => {
                self.conns[i] = Some(c);
                i
            }
            None => {
                self.conns.push(Some(c));
                self.conns.len() - 1
            }
        };
        self.by_addr.insert(key, idx);
        idx
    }

    fn conn_src(&mut self, act: &Active, c: usize, need: bool) -> u64 {
        if !need {
            return ADDR_NOTAVAIL;
        }
        let Some(conn) = self.conns.get_mut(c).and_then(Option::as_mut) else {
            return ADDR_NOTAVAIL;
        };
        if conn.src != ADDR_NOTAVAIL {
            if let Some(a) = conn.aliases.get(conn.src_alias) {
                if act
                    .av
                    .with_entry(conn.src, |e| e.addr == a)
                    .unwrap_or(false)
                {
                    return act.av.source_addr(a);
                }
            }
        }
        for (k, a) in conn.aliases.iter().enumerate() {
            if let Some(f) = act.av.reverse_lookup(a) {
                conn.src = f;
                conn.src_alias = k;
                return act.av.source_addr(a);
            }
        }
        conn.src = ADDR_NOTAVAIL;
        ADDR_NOTAVAIL
    }

    fn new_msg(&mut self, ep: CoreEp, conn: usize, gen: u32) -> usize {
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

impl Shared {
    /// Open a MSG endpoint for `conn` from `info` (a connection request's, or the core
    /// info for an outgoing one), bound to the core EQ and CQ.
    fn open_msg(&self, st: &mut St, info: &Info, conn: usize) -> Result<usize> {
        st.msg_gen = st.msg_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = st.msg_gen;
        let slot = st
            .msgs
            .iter()
            .position(Option::is_none)
            .unwrap_or(st.msgs.len());
        let ep = self.dom.core.endpoint_with(info, ep_ctx(slot, gen), 0)?;
        ep.bind_eq(&self.core_eq)?;
        ep.bind(&self.core_cq, OpFlags::TRANSMIT | OpFlags::RECV)?;
        let s = st.new_msg(ep, conn, gen);
        debug_assert_eq!(s, slot);
        Ok(s)
    }

    fn post_bufs(&self, st: &mut St, slot: usize) {
        let size = self.settings.buffer_size;
        let n = self.settings.msg_rx_size;
        let Some(m) = st.msgs.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if m.posted {
            return;
        }
        m.posted = true;
        for b in 0..n {
            m.bufs.push(vec![0u8; size].into_boxed_slice());
            let p = m.bufs[b].as_mut_ptr();
            let ctx = mk_ctx(K_RX, ((slot as u32) << 12) | b as u32, m.gen);
            // SAFETY: the buffer is owned by the slot and lives until the MSG endpoint is
            // dropped (the endpoint is dropped first: `ep` is declared before `bufs`).
            if let Err(e) = unsafe { m.ep.recv(p, size, std::ptr::null_mut(), ADDR_UNSPEC, ctx) } {
                ofi_core::ofi_warn!(NAME, "ep_data", "posting a bounce buffer: {e}");
            }
        }
    }

    fn repost(&self, st: &mut St, slot: usize, b: usize) {
        let size = self.settings.buffer_size;
        let Some(m) = st.msgs.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some(buf) = m.bufs.get_mut(b) else {
            return;
        };
        let p = buf.as_mut_ptr();
        let ctx = mk_ctx(K_RX, ((slot as u32) << 12) | b as u32, m.gen);
        // SAFETY: as in post_bufs.
        if let Err(e) = unsafe { m.ep.recv(p, size, std::ptr::null_mut(), ADDR_UNSPEC, ctx) } {
            ofi_core::ofi_warn!(NAME, "ep_data", "reposting a bounce buffer: {e}");
        }
    }

    fn drop_msg(&self, st: &mut St, slot: Option<usize>) {
        if let Some(s) = slot {
            if let Some(m) = st.msgs.get_mut(s).and_then(Option::take) {
                let _ = m.ep.shutdown(0);
                drop(m);
            }
        }
    }

    /// Carry out the connection manager's actions.
    fn run_actions(&self, act: &Active, st: &mut St) {
        let now = Instant::now();
        while let Some(a) = st.mgr.poll_action() {
            match a {
                Action::Connect(p) => {
                    let c = p as usize;
                    let Some(addr) = st
                        .conns
                        .get(c)
                        .and_then(Option::as_ref)
                        .map(|x| x.key.clone())
                    else {
                        st.mgr.remove(p, now);
                        continue;
                    };
                    let mut ci = self.dom.core_info.clone();
                    ci.dest_addr = None;
                    ci.src_addr = None;
                    let r = self.open_msg(st, &ci, c).and_then(|slot| {
                        let res = st.msgs[slot]
                            .as_ref()
                            .map(|m| {
                                m.ep.enable().and_then(|_| {
                                    m.ep.connect(&addr, &self.hello(Kind::Connect, Reason::None))
                                })
                            })
                            .unwrap_or(Ok(()));
                        match res {
                            Ok(()) => Ok(slot),
                            Err(e) => {
                                self.drop_msg(st, Some(slot));
                                Err(e)
                            }
                        }
                    });
                    match r {
                        Ok(slot) => {
                            if let Some(conn) = st.conns[c].as_mut() {
                                conn.attempt = Some(slot);
                            }
                        }
                        Err(e) => {
                            ofi_core::ofi_info!(NAME, "ep_ctrl", "connect: {e}");
                            st.mgr.on_refused(p, e.code(), Reason::None, now);
                        }
                    }
                }
                Action::Abort(p) => {
                    let slot = st
                        .conns
                        .get_mut(p as usize)
                        .and_then(Option::as_mut)
                        .and_then(|c| c.attempt.take());
                    self.drop_msg(st, slot);
                }
                Action::AbortAccept(p) => {
                    let slot = st
                        .conns
                        .get_mut(p as usize)
                        .and_then(Option::as_mut)
                        .and_then(|c| c.accepting.take());
                    self.drop_msg(st, slot);
                }
                Action::Fail(p, e) => {
                    ofi_core::ofi_info!(NAME, "ep_ctrl", "peer {p}: giving up: {e}");
                    self.fail_queued(act, st, p as usize, e);
                }
            }
        }
        st.next_timer = st.mgr.poll_timeout();
    }

    /// Fail every operation queued (not yet posted) for `c`.
    fn fail_queued(&self, act: &Active, st: &mut St, c: usize, e: Errno) {
        let q: Vec<u32> = st
            .conns
            .get_mut(c)
            .and_then(Option::as_mut)
            .map(|x| x.queue.drain(..).collect())
            .unwrap_or_default();
        for i in q {
            if let Some(op) = st.free_op(i) {
                act.complete_tx(op.ctx, op.flags, op.want, Some(e));
            }
        }
    }

    /// The connection to `c` is gone: fail what was queued or in flight on it.
    fn fail_conn(&self, act: &Active, st: &mut St, c: usize, e: Errno) {
        let now = Instant::now();
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        let slots: Vec<usize> = conn
            .tx
            .take()
            .into_iter()
            .chain(conn.attempt.take())
            .chain(conn.accepting.take())
            .chain(conn.extra.drain(..))
            .collect();
        conn.credits = 0;
        conn.owed = 0;
        conn.held = 0;
        conn.ctrl.clear();
        conn.dc_wait.clear();
        conn.instance = None;
        let sar = conn.sar.take();
        conn.epoch = {
            st.epoch += 1;
            st.epoch
        };
        for s in slots {
            self.drop_msg(st, Some(s));
        }
        // Operations in flight or queued on this connection.
        let ids: Vec<u32> = st
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|o| o.conn == c).map(|_| i as u32))
            .collect();
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.queue.clear();
        }
        for i in ids {
            if let Some(op) = st.free_op(i) {
                act.complete_tx(op.ctx, op.flags, op.want, Some(e));
            }
        }
        // Receives being filled from it.
        if let Some(s) = sar {
            if let SarTarget::Recv {
                recv,
                place,
                released,
            } = s.target
            {
                act.complete_rx(&recv, place, &s.inc, released, Some(e));
            }
        }
        let rds: Vec<u32> = st
            .rds
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().filter(|r| r.conn == c).map(|_| i as u32))
            .collect();
        for i in rds {
            if let Some(r) = st.rds.get_mut(i as usize).and_then(Option::take) {
                st.rd_free.push(i);
                act.complete_rx(&r.recv, r.place, &r.inc, r.released, Some(e));
            }
        }
        st.rd_waiting
            .retain(|i| st.rds.get(*i as usize).is_some_and(Option::is_some));
        st.mgr.on_lost(c as PeerId, now);
        self.run_actions(act, st);
    }

    fn handle_connreq(&self, act: &Active, st: &mut St, info: Option<Box<Info>>, data: &[u8]) {
        let Some(info) = info else {
            return;
        };
        let handle = info.handle;
        let from = info
            .dest_addr
            .as_ref()
            .map(|a| a.to_bytes())
            .unwrap_or_default();
        let reject = |reason: Reason, why: &str| {
            // At most 5 lines per requesting address per 10 s.
            static LOG: OnceLock<ofi_kit::diag::RateLimit<Vec<u8>>> = OnceLock::new();
            let log =
                LOG.get_or_init(|| ofi_kit::diag::RateLimit::new(5, Duration::from_secs(10), 1024));
            if let Some(n) = log.admit(&from, Instant::now()) {
                ofi_core::ofi_warn!(
                    NAME,
                    "ep_ctrl",
                    "refused a connection request: {why}{}",
                    ofi_kit::diag::suppressed_note(n)
                );
            }
            let _ = self.pep.reject(handle, &self.hello(Kind::Reject, reason));
        };
        let h = match Hello::parse(data) {
            Ok(h) => h,
            Err(e) => return reject(Reason::Malformed, &format!("malformed handshake: {e}")),
        };
        if h.kind != Kind::Connect {
            return reject(Reason::Malformed, "handshake is not a connection request");
        }
        if h.version != proto::VERSION {
            return reject(
                Reason::Version,
                &format!(
                    "peer speaks ofi_rxm protocol version {}, this endpoint {}",
                    h.version,
                    proto::VERSION
                ),
            );
        }
        if h.buffer_size as usize != self.settings.buffer_size {
            return reject(
                Reason::Params,
                &format!(
                    "peer's FI_OFI_RXM_BUFFER_SIZE is {}, ours {}",
                    h.buffer_size, self.settings.buffer_size
                ),
            );
        }
        if h.credits == 0 {
            return reject(Reason::Params, "peer grants no credits");
        }
        let addr = match Address::from_bytes(self.dom.core_info.addr_format, &h.addr) {
            Ok(a) => a,
            Err(e) => return reject(Reason::Malformed, &format!("bad peer address: {e}")),
        };
        let now = Instant::now();
        // An unspecified IP in the peer's name (it listens on every interface) is the
        // IP its connection comes from.
        let src_ip = info
            .dest_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .map(|a| a.ip());
        let actual = norm_addr(&addr, src_ip);
        let c = st.conn_for_addr(&actual);
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            if !conn.aliases.contains(&addr) {
                conn.aliases.push(addr.clone());
            }
        }
        let loopback = h.addr == self.me_bytes;
        let decision = if loopback {
            ConnDecision::Accept
        } else {
            st.mgr.on_incoming(
                c as PeerId,
                h.instance,
                conn::self_wins(&self.me_bytes, &h.addr),
                now,
            )
        };
        match decision {
            ConnDecision::RejectAlready => {
                let _ = self
                    .pep
                    .reject(handle, &self.hello(Kind::Reject, Reason::Already));
            }
            ConnDecision::Accept | ConnDecision::Replace => {
                if decision == ConnDecision::Replace {
                    // The peer restarted: what was in flight on the old connection is lost.
                    let old = st.conns[c].as_mut().and_then(|x| x.tx.take());
                    let q: Vec<u32> = st.conns[c]
                        .as_ref()
                        .map(|x| x.queue.iter().copied().collect())
                        .unwrap_or_default();
                    self.drop_msg(st, old);
                    let ids: Vec<u32> = st
                        .ops
                        .iter()
                        .enumerate()
                        .filter_map(|(i, o)| {
                            o.as_ref()
                                .filter(|o| o.conn == c && !q.contains(&(i as u32)))
                                .map(|_| i as u32)
                        })
                        .collect();
                    for i in ids {
                        if let Some(op) = st.free_op(i) {
                            act.complete_tx(op.ctx, op.flags, op.want, Some(Errno::ECONNRESET));
                        }
                    }
                }
                self.run_actions(act, st);
                match self.open_msg(st, &info, c) {
                    Ok(slot) => {
                        let ok = st.msgs[slot]
                            .as_ref()
                            .map(|m| m.ep.accept(&self.hello(Kind::Accept, Reason::None)))
                            .unwrap_or(Ok(()));
                        if let Err(e) = ok {
                            ofi_core::ofi_warn!(NAME, "ep_ctrl", "accept: {e}");
                            self.drop_msg(st, Some(slot));
                            return;
                        }
                        if let Some(conn) = st.conns[c].as_mut() {
                            if loopback {
                                conn.loopback = true;
                                conn.extra.push(slot);
                            } else {
                                let prev = conn.accepting.replace(slot);
                                conn.accept_credits = h.credits as usize;
                                conn.peer_sar =
                                    h.sar_limit.min(crate::MAX_MSG_SIZE as u64) as usize;
                                conn.instance = Some(h.instance);
                                self.drop_msg(st, prev);
                            }
                        }
                    }
                    Err(e) => {
                        ofi_core::ofi_warn!(NAME, "ep_ctrl", "opening an accepting endpoint: {e}");
                        let _ = self
                            .pep
                            .reject(handle, &self.hello(Kind::Reject, Reason::Refused));
                    }
                }
            }
        }
    }

    fn handle_connected(&self, act: &Active, st: &mut St, slot: usize, data: &[u8]) {
        let now = Instant::now();
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        if conn.extra.contains(&slot) {
            self.post_bufs(st, slot);
            return;
        }
        let (credits, instance) = if conn.attempt == Some(slot) {
            conn.attempt = None;
            match Hello::parse(data) {
                Ok(h)
                    if h.kind == Kind::Accept
                        && h.version == proto::VERSION
                        && h.buffer_size as usize == self.settings.buffer_size
                        && h.credits > 0 =>
                {
                    conn.peer_sar = h.sar_limit.min(crate::MAX_MSG_SIZE as u64) as usize;
                    (h.credits as usize, Some(h.instance))
                }
                Ok(h) => {
                    ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer accepted with an incompatible handshake (kind {:?}, version {}, buffer size {})", h.kind, h.version, h.buffer_size);
                    self.drop_msg(st, Some(slot));
                    st.mgr
                        .on_refused(c as PeerId, Errno::ECONNREFUSED, Reason::Version, now);
                    self.run_actions(act, st);
                    return;
                }
                Err(e) => {
                    ofi_core::ofi_warn!(
                        NAME,
                        "ep_ctrl",
                        "peer accepted with a malformed handshake: {e}"
                    );
                    self.drop_msg(st, Some(slot));
                    st.mgr
                        .on_refused(c as PeerId, Errno::ECONNREFUSED, Reason::Malformed, now);
                    self.run_actions(act, st);
                    return;
                }
            }
        } else if conn.accepting == Some(slot) {
            conn.accepting = None;
            (conn.accept_credits, conn.instance)
        } else {
            // Abandoned attempt that completed anyway.
            self.drop_msg(st, Some(slot));
            return;
        };
        let old = conn.tx.replace(slot);
        // Credits are counted per peer on both sides (the receiver's `held`), not per
        // MSG connection: when a second connection of the same epoch takes over (both
        // sides connected at once), the messages sent on the first one still hold
        // credits at the peer, so the grant of the new handshake must not refill them.
        if old.is_none() {
            conn.credits = credits;
        }
        conn.instance = instance;
        if conn.loopback {
            // A connection to ourselves: both MSG endpoints are ours.
        }
        self.drop_msg(st, old);
        self.post_bufs(st, slot);
        st.mgr.on_connected(c as PeerId, instance, now);
        self.run_actions(act, st);
        self.pump_conn(act, st, c);
    }

    fn handle_cm_error(&self, act: &Active, st: &mut St, slot: usize, err: Errno, data: &[u8]) {
        // As for FI_SHUTDOWN: what arrived before the error is completed first.
        self.progress_cq(act, st);
        let now = Instant::now();
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        if conn.attempt == Some(slot) {
            conn.attempt = None;
            self.drop_msg(st, Some(slot));
            let reason = match Hello::parse(data) {
                Ok(h) if h.kind == Kind::Reject => h.reason,
                _ => Reason::None,
            };
            if matches!(reason, Reason::Version | Reason::Params | Reason::Malformed) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer refused our handshake ({reason:?})");
            }
            st.mgr.on_refused(c as PeerId, err, reason, now);
            self.run_actions(act, st);
        } else if conn.tx == Some(slot) {
            self.fail_conn(act, st, c, Errno::ECONNRESET);
        } else {
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            conn.extra.retain(|s| *s != slot);
            self.drop_msg(st, Some(slot));
        }
    }

    fn handle_shutdown(&self, act: &Active, st: &mut St, slot: usize) {
        // The core reports the close after the completions of what arrived before it;
        // take those first, or a peer's last message (sent just before it exited) would
        // be dropped with the connection's slot (the same for an error event).
        self.progress_cq(act, st);
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        if conn.tx == Some(slot) {
            self.fail_conn(act, st, c, Errno::ECONNRESET);
        } else {
            conn.extra.retain(|s| *s != slot);
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            self.drop_msg(st, Some(slot));
        }
    }

    fn progress_eq(&self, act: &Active, st: &mut St) -> usize {
        let mut n = 0;
        for _ in 0..EQ_BUDGET {
            match self.core_eq.read() {
                Ok(ev) => {
                    n += 1;
                    match ev.event {
                        EqEvent::ConnReq if ev.fid == CTX_PEP => {
                            self.handle_connreq(act, st, ev.info, &ev.cm_data)
                        }
                        EqEvent::Connected => {
                            if let Some((slot, gen)) = split_ep_ctx(ev.fid) {
                                if st
                                    .msgs
                                    .get(slot)
                                    .and_then(Option::as_ref)
                                    .is_some_and(|m| m.gen == gen)
                                {
                                    self.handle_connected(act, st, slot, &ev.cm_data);
                                }
                            }
                        }
                        EqEvent::Shutdown => {
                            if let Some((slot, gen)) = split_ep_ctx(ev.fid) {
                                if st
                                    .msgs
                                    .get(slot)
                                    .and_then(Option::as_ref)
                                    .is_some_and(|m| m.gen == gen)
                                {
                                    self.handle_shutdown(act, st, slot);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    n += 1;
                    match self.core_eq.readerr() {
                        Ok(ee) => {
                            if let Some((slot, gen)) = split_ep_ctx(ee.fid) {
                                if st
                                    .msgs
                                    .get(slot)
                                    .and_then(Option::as_ref)
                                    .is_some_and(|m| m.gen == gen)
                                {
                                    self.handle_cm_error(act, st, slot, ee.err, &ee.err_data);
                                }
                            }
                        }
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        n
    }
}

// ---------------------------------------------------------------------------------------
// Transmit.

/// What posting an operation did.
enum Posted {
    /// Fully handed to the core (or completed).
    Done,
    /// Not (fully) posted: no credit or the core queue is full; try again later.
    Blocked,
}

impl Shared {
    fn tx_ep<'a>(&self, st: &'a St, c: usize) -> Option<&'a CoreEp> {
        let slot = st.conns.get(c)?.as_ref()?.tx?;
        st.msgs.get(slot)?.as_ref().map(|m| &m.ep)
    }

    /// Send a control header (no credit needed).
    fn send_ctrl(&self, st: &mut St, c: usize, mut h: Hdr) {
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        if conn.tx.is_none() {
            return;
        }
        h.credits = conn.give_owed();
        if !conn.ctrl.is_empty() {
            conn.ctrl.push_back(h);
            return;
        }
        let b = h.bytes();
        let r = match self.tx_ep(st, c) {
            // SAFETY: `b` is valid for the call; inject copies it.
            Some(ep) => unsafe { ep.inject_raw(b.as_ptr(), HDR_LEN, ADDR_UNSPEC) },
            None => return,
        };
        if let Err(e) = r {
            if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
                if e.code() == Errno::EAGAIN {
                    conn.ctrl.push_back(h);
                } else {
                    ofi_core::ofi_info!(NAME, "ep_data", "control packet: {e}");
                }
            }
        }
    }

    fn flush_ctrl(&self, st: &mut St, c: usize) {
        loop {
            let Some(h) = st
                .conns
                .get_mut(c)
                .and_then(Option::as_mut)
                .and_then(|x| x.ctrl.front().copied())
            else {
                return;
            };
            let b = h.bytes();
            let r = match self.tx_ep(st, c) {
                // SAFETY: as in send_ctrl.
                Some(ep) => unsafe { ep.inject_raw(b.as_ptr(), HDR_LEN, ADDR_UNSPEC) },
                None => return,
            };
            match r {
                Err(e) if e.code() == Errno::EAGAIN => return,
                _ => {
                    if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
                        conn.ctrl.pop_front();
                    }
                }
            }
        }
    }

    /// Return credits to `c` when enough are owed.
    fn maybe_credit(&self, st: &mut St, c: usize) {
        let th = (self.settings.credits / 2).max(1);
        if st
            .conns
            .get(c)
            .and_then(Option::as_ref)
            .is_some_and(|x| x.owed >= th && x.tx.is_some())
        {
            self.send_ctrl(st, c, Hdr::new(Op::Credit, 0, 0, 0, 0));
        }
    }

    /// Post queued operations of `c` in order while possible.
    fn pump_conn(&self, act: &Active, st: &mut St, c: usize) {
        self.flush_ctrl(st, c);
        while let Some(&i) = st
            .conns
            .get(c)
            .and_then(Option::as_ref)
            .and_then(|x| x.queue.front())
        {
            if st.conns[c].as_ref().is_some_and(|x| x.tx.is_none()) {
                break;
            }
            match self.try_post(act, st, i) {
                Posted::Done => {
                    if let Some(conn) = st.conns[c].as_mut() {
                        conn.queue.pop_front();
                    }
                }
                Posted::Blocked => break,
            }
        }
        self.maybe_credit(st, c);
    }

    /// Take a credit of `c` (with the owed credits to piggyback); None without credit.
    fn take_credit(st: &mut St, c: usize) -> Option<u16> {
        let conn = st.conns.get_mut(c)?.as_mut()?;
        if conn.credits == 0 {
            return None;
        }
        conn.credits -= 1;
        Some(conn.give_owed())
    }

    fn untake_credit(st: &mut St, c: usize, give: u16) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.credits += 1;
            conn.regain_owed(give);
        }
    }

    /// Try to post operation `i` (its connection is up).
    fn try_post(&self, act: &Active, st: &mut St, i: u32) -> Posted {
        let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
            return Posted::Done;
        };
        let c = op.conn;
        let gen = op.gen;
        let ctx = mk_ctx(K_TX, i, gen);
        match &op.body {
            Body::Fwd(_) => self.post_fwd(act, st, i, ctx),
            Body::Send { len, .. } => {
                let len = *len;
                if len <= self.settings.eager_limit() {
                    self.post_eager(act, st, i, c, ctx)
                } else if len <= self.settings.sar_limit {
                    self.post_sar(act, st, i, c, ctx)
                } else {
                    self.post_rts(act, st, i, c, ctx)
                }
            }
        }
    }

    fn fail_op(&self, act: &Active, st: &mut St, i: u32, e: Errno) -> Posted {
        if is_conn_err(e) {
            if let Some(c) = st
                .ops
                .get(i as usize)
                .and_then(Option::as_ref)
                .map(|o| o.conn)
            {
                self.fail_conn(act, st, c, Errno::ECONNRESET);
                return Posted::Done;
            }
        }
        if let Some(op) = st.free_op(i) {
            act.complete_tx(op.ctx, op.flags, op.want, Some(e));
        }
        Posted::Done
    }

    /// Operation `i` (generation `gen`) waits for a delivery acknowledgement on
    /// connection `c`; they come in the order the messages were sent.
    fn wait_for_ack(st: &mut St, c: usize, i: u32, gen: u32) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.dc_wait.push_back((i, gen));
        }
    }

    /// The peer acknowledges `n` more delivery-complete messages of connection `c`.
    fn on_dc_ack(&self, act: &Active, st: &mut St, c: usize, n: u64) -> Result<()> {
        for _ in 0..n {
            let Some((i, gen)) = st
                .conns
                .get_mut(c)
                .and_then(Option::as_mut)
                .and_then(|x| x.dc_wait.pop_front())
            else {
                return Err(Error::new(
                    Errno::EPROTO,
                    "delivery acknowledgement of a message never sent",
                ));
            };
            if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                if op.gen == gen && op.conn == c && op.await_ack {
                    op.await_ack = false;
                    self.maybe_finish(act, st, i);
                }
            }
        }
        Ok(())
    }

    /// Acknowledge one delivery-complete message taken in from connection `c`.
    fn ack_dc(&self, st: &mut St, c: usize) {
        self.send_ctrl(st, c, Hdr::new(Op::DcAck, 0, 1, 0, 0));
    }

    fn send_hdr(op: &TxOp) -> (u8, u64, u64) {
        match &op.body {
            Body::Send {
                tag, data, tagged, ..
            } => {
                let mut f = 0;
                if *tagged {
                    f |= proto::F_TAGGED;
                }
                if data.is_some() {
                    f |= proto::F_DATA;
                }
                (f, *tag, data.unwrap_or(0))
            }
            Body::Fwd(_) => (0, 0, 0),
        }
    }

    fn post_eager(&self, act: &Active, st: &mut St, i: u32, c: usize, ctx: usize) -> Posted {
        let Some(give) = Self::take_credit(st, c) else {
            return Posted::Blocked;
        };
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Posted::Done;
        };
        let (mut flags, tag, data) = Self::send_hdr(op);
        if op.dc {
            flags |= proto::F_DC;
        }
        let Body::Send { iov, len, .. } = op.body else {
            return Posted::Done;
        };
        let mut h = Hdr::new(Op::Eager, flags, len as u64, tag, data);
        h.credits = give;
        let mut hb = Box::new([0u8; HDR_LEN]);
        h.write(&mut hb);
        let src: IoList = match &op.owned {
            Some(v) => IoList::one(v.as_ptr() as usize, v.len()),
            None => iov,
        };
        let mut v: Vec<Iov> = Vec::with_capacity(IOV_LIMIT + 1);
        v.push(Iov {
            base: hb.as_ptr() as *mut c_void,
            len: HDR_LEN,
        });
        let core_iov = self.dom.core_info.tx_attr.iov_limit.max(1);
        if src.len() < core_iov {
            for &(a, l) in src.slice() {
                v.push(Iov {
                    base: a as *mut c_void,
                    len: l,
                });
            }
        } else {
            let mut b = vec![0u8; len];
            // SAFETY: the application's buffers are readable for their lengths; `b` has
            // `len` bytes.
            unsafe { src.gather(0, b.as_mut_ptr(), len) };
            v.push(Iov {
                base: b.as_ptr() as *mut c_void,
                len,
            });
            op.bounce.push(b);
        }
        op.hdrs.push(hb);
        let r = match self.tx_ep(st, c) {
            // SAFETY: the header box and bounce buffers live in the op until its
            // completion; the application's buffers by the C contract.
            Some(ep) => unsafe {
                ep.sendv(v.as_ptr(), std::ptr::null(), v.len(), ADDR_UNSPEC, ctx)
            },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        };
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Posted::Done;
        };
        match r {
            Ok(()) => {
                op.outstanding += 1;
                op.posted = true;
                if op.dc {
                    op.await_ack = true;
                    let gen = op.gen;
                    Self::wait_for_ack(st, c, i, gen);
                }
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                op.hdrs.clear();
                op.bounce.clear();
                Self::untake_credit(st, c, give);
                Posted::Blocked
            }
            Err(e) => {
                Self::untake_credit(st, c, give);
                self.fail_op(act, st, i, e.code())
            }
        }
    }

    fn post_sar(&self, act: &Active, st: &mut St, i: u32, c: usize, ctx: usize) -> Posted {
        let seg = self.settings.eager_limit();
        loop {
            let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
                return Posted::Done;
            };
            let (flags, tag, data) = Self::send_hdr(op);
            let dc = if op.dc { proto::F_DC } else { 0 };
            let Body::Send { iov, len, .. } = op.body else {
                return Posted::Done;
            };
            let off = op.sent;
            if off >= len && op.posted {
                return Posted::Done;
            }
            let first = off == 0;
            let give = if first {
                match Self::take_credit(st, c) {
                    Some(g) => g,
                    None => return Posted::Blocked,
                }
            } else {
                st.conns[c].as_mut().map_or(0, Conn::give_owed)
            };
            let n = seg.min(len - off);
            let last = off + n >= len;
            let mut h = if first {
                Hdr::new(Op::SarFirst, flags | dc, len as u64, tag, data)
            } else {
                Hdr::new(Op::SarNext, flags & proto::F_TAGGED, off as u64, tag, 0)
            };
            if last {
                h.flags |= proto::F_LAST;
            }
            h.credits = give;
            let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
                return Posted::Done;
            };
            let mut hb = Box::new([0u8; HDR_LEN]);
            h.write(&mut hb);
            let src: IoList = match &op.owned {
                Some(v) => IoList::one(v.as_ptr() as usize, v.len()),
                None => iov,
            };
            let part = src.sub(off, n);
            let mut v: Vec<Iov> = vec![Iov {
                base: hb.as_ptr() as *mut c_void,
                len: HDR_LEN,
            }];
            if part.len() == 1 {
                v.push(Iov {
                    base: part.slice()[0].0 as *mut c_void,
                    len: n,
                });
            } else {
                let mut b = vec![0u8; n];
                // SAFETY: as in post_eager.
                unsafe { src.gather(off, b.as_mut_ptr(), n) };
                v.push(Iov {
                    base: b.as_ptr() as *mut c_void,
                    len: n,
                });
                op.bounce.push(b);
            }
            op.hdrs.push(hb);
            let r = match self.tx_ep(st, c) {
                // SAFETY: as in post_eager.
                Some(ep) => unsafe {
                    ep.sendv(v.as_ptr(), std::ptr::null(), v.len(), ADDR_UNSPEC, ctx)
                },
                None => Err(Error::code_only(Errno::ENOTCONN)),
            };
            match r {
                Ok(()) => {
                    if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                        op.outstanding += 1;
                        op.sent = off + n;
                        if last {
                            op.posted = true;
                            // The receiver acknowledges at the last segment: queued now,
                            // the order of the acknowledgements.
                            if op.dc {
                                op.await_ack = true;
                                let gen = op.gen;
                                Self::wait_for_ack(st, c, i, gen);
                            }
                            return Posted::Done;
                        }
                    }
                }
                Err(e) if e.code() == Errno::EAGAIN => {
                    if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                        op.hdrs.pop();
                    }
                    if first {
                        Self::untake_credit(st, c, give);
                    } else if let Some(conn) = st.conns[c].as_mut() {
                        conn.regain_owed(give);
                    }
                    return Posted::Blocked;
                }
                Err(e) => {
                    if first {
                        Self::untake_credit(st, c, give);
                        return self.fail_op(act, st, i, e.code());
                    }
                    // Segments already went: the connection is broken.
                    self.fail_conn(act, st, c, e.code());
                    return Posted::Done;
                }
            }
        }
    }

    fn post_rts(&self, act: &Active, st: &mut St, i: u32, c: usize, ctx: usize) -> Posted {
        // Register the buffers once (on the first try).
        let need_reg = st.ops[i as usize]
            .as_ref()
            .is_some_and(|o| o.mrs.is_empty());
        if need_reg {
            let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
                return Posted::Done;
            };
            let src: IoList = match (&op.owned, &op.body) {
                (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
                (None, Body::Send { iov, .. }) => *iov,
                _ => return Posted::Done,
            };
            let mut mrs = Vec::new();
            // Empty iov entries are not registered: nothing is read from them (and a
            // zero-length registration is refused by tcp with FI_EINVAL).
            for &(a, l) in src.slice().iter().filter(|&&(_, l)| l > 0) {
                // SAFETY: the buffer stays valid until the operation completes (C API
                // contract), and the registration is closed at completion.
                let r = unsafe {
                    self.dom.core.mr_reg(
                        a as *const u8,
                        l,
                        OpFlags::REMOTE_READ,
                        0,
                        self.dom.internal_key(),
                        0,
                    )
                };
                match r {
                    Ok(m) => mrs.push(m),
                    Err(e) => return self.fail_op(act, st, i, e.code()),
                }
            }
            if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                op.mrs = mrs;
            }
        }
        let Some(give) = Self::take_credit(st, c) else {
            return Posted::Blocked;
        };
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Posted::Done;
        };
        let (flags, tag, data) = Self::send_hdr(op);
        let src: IoList = match (&op.owned, &op.body) {
            (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
            (None, Body::Send { iov, .. }) => *iov,
            _ => return Posted::Done,
        };
        let len = src.total();
        let mut h = Hdr::new(Op::Rts, flags, len as u64, tag, data);
        h.credits = give;
        let mut rts = Rts {
            id: (u64::from(op.gen) << 32) | u64::from(i),
            iov: [(0, 0, 0); proto::RTS_IOVS],
            n: src.len(),
        };
        let mut regs = op.mrs.iter();
        for (k, &(a, l)) in src.slice().iter().enumerate() {
            let key = if l == 0 {
                0
            } else {
                regs.next().map_or(0, |m| m.key())
            };
            let addr = if self.core_virt { a as u64 } else { 0 };
            rts.iov[k] = (addr, l as u64, key);
        }
        let mut b = h.bytes().to_vec();
        rts.encode(&mut b);
        let ptr = b.as_ptr();
        let blen = b.len();
        op.bounce.push(b);
        let r = match self.tx_ep(st, c) {
            // SAFETY: the packet lives in the op until completion.
            Some(ep) => unsafe { ep.send(ptr, blen, std::ptr::null_mut(), ADDR_UNSPEC, ctx) },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        };
        match r {
            Ok(()) => {
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.outstanding += 1;
                    op.await_done = true;
                    op.posted = true;
                }
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.bounce.pop();
                }
                Self::untake_credit(st, c, give);
                Posted::Blocked
            }
            Err(e) => {
                Self::untake_credit(st, c, give);
                self.fail_op(act, st, i, e.code())
            }
        }
    }

    fn post_fwd(&self, act: &Active, st: &mut St, i: u32, ctx: usize) -> Posted {
        let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
            return Posted::Done;
        };
        let Body::Fwd(f) = &op.body else {
            return Posted::Done;
        };
        let Some(ep) = self.tx_ep(st, op.conn) else {
            return Posted::Blocked;
        };
        let dp = |d: &Vec<usize>| -> *const *mut c_void {
            if d.is_empty() {
                std::ptr::null()
            } else {
                d.as_ptr() as *const *mut c_void
            }
        };
        let r = match f {
            Fwd::Read { iov, desc, rma } => {
                let m = MsgRma {
                    msg_iov: iov.as_ptr(),
                    desc: dp(desc),
                    iov_count: iov.len(),
                    addr: ADDR_UNSPEC,
                    rma_iov: rma,
                    rma_iov_count: 1,
                    context: ctx,
                    data: 0,
                };
                // SAFETY: the arrays live in the op until completion; the application's
                // buffers by the C contract.
                unsafe { ep.readmsg(&m, OpFlags::COMPLETION.bits()) }
            }
            Fwd::Write {
                iov,
                desc,
                rma,
                data,
            } => {
                let m = MsgRma {
                    msg_iov: iov.as_ptr(),
                    desc: dp(desc),
                    iov_count: iov.len(),
                    addr: ADDR_UNSPEC,
                    rma_iov: rma,
                    rma_iov_count: 1,
                    context: ctx,
                    data: data.unwrap_or(0),
                };
                let mut fl = OpFlags::COMPLETION;
                if data.is_some() {
                    fl |= OpFlags::REMOTE_CQ_DATA;
                }
                // SAFETY: as above.
                unsafe { ep.writemsg(&m, fl.bits()) }
            }
            Fwd::Atomic {
                kind,
                iov,
                desc,
                rma,
                dt,
                op: aop,
                cmp,
                cdesc,
                res,
                rdesc,
            } => {
                let m = MsgAtomic {
                    msg_iov: iov.as_ptr(),
                    desc: dp(desc),
                    iov_count: iov.len(),
                    addr: ADDR_UNSPEC,
                    rma_iov: rma,
                    rma_iov_count: 1,
                    datatype: dt.to_raw(),
                    op: aop.to_raw(),
                    context: ctx,
                    data: 0,
                };
                let fl = OpFlags::COMPLETION.bits();
                // SAFETY: as above.
                unsafe {
                    match kind {
                        AtomicKind::Base => ep.atomicmsg(&m, fl),
                        AtomicKind::Fetch => {
                            ep.fetch_atomicmsg(&m, res.as_ptr(), dp(rdesc), res.len(), fl)
                        }
                        AtomicKind::Compare => ep.compare_atomicmsg(
                            &m,
                            cmp.as_ptr(),
                            dp(cdesc),
                            cmp.len(),
                            res.as_ptr(),
                            dp(rdesc),
                            res.len(),
                            fl,
                        ),
                    }
                }
            }
        };
        match r {
            Ok(()) => {
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.outstanding += 1;
                    op.posted = true;
                }
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => Posted::Blocked,
            Err(e) => self.fail_op(act, st, i, e.code()),
        }
    }

    /// A core transmit completion (or error) for operation `i`.
    fn tx_done(&self, act: &Active, st: &mut St, i: u32, gen: u32, err: Option<Errno>) {
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        if op.gen != gen {
            return;
        }
        op.outstanding = op.outstanding.saturating_sub(1);
        if err.is_some() && op.err.is_none() {
            op.err = err;
        }
        self.maybe_finish(act, st, i);
    }

    fn maybe_finish(&self, act: &Active, st: &mut St, i: u32) {
        let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
            return;
        };
        if !op.posted || op.outstanding > 0 || ((op.await_done || op.await_ack) && op.err.is_none())
        {
            return;
        }
        if let Some(op) = st.free_op(i) {
            act.complete_tx(op.ctx, op.flags, op.want, op.err);
        }
    }

    /// Submit a new operation: post it now if its connection allows, else queue it.
    fn submit(&self, act: &Active, st: &mut St, op: TxOp) -> Result<()> {
        if st.live >= self.settings.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let c = op.conn;
        let i = st.alloc_op(op);
        let ready = st
            .conns
            .get(c)
            .and_then(Option::as_ref)
            .is_some_and(|x| x.tx.is_some() && x.queue.is_empty());
        if ready {
            if let Posted::Blocked = self.try_post(act, st, i) {
                if let Some(conn) = st.conns[c].as_mut() {
                    conn.queue.push_back(i);
                }
            }
        } else {
            if let Some(conn) = st.conns[c].as_mut() {
                conn.queue.push_back(i);
            }
            st.mgr.want(c as PeerId, Instant::now());
            self.run_actions(act, st);
        }
        Ok(())
    }

    /// The connection for fabric address `dest`.
    fn conn_of(&self, act: &Active, st: &mut St, dest: u64) -> Result<usize> {
        if let Some(&c) = st.by_fi.get(&dest) {
            if let Some(conn) = st.conns.get(c).and_then(Option::as_ref) {
                if act
                    .av
                    .with_entry(dest, |e| conn.aliases.contains(e.addr))
                    .unwrap_or(false)
                {
                    return Ok(c);
                }
            }
        }
        let addr = act.av.lookup(dest).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("ofi_rxm: fabric address {dest:#x} is not in the AV"),
            )
        })?;
        let c = st.conn_for_addr(&addr);
        st.by_fi.insert(dest, c);
        Ok(c)
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        act: &Active,
        iov: IoList,
        dest: u64,
        ctx: usize,
        tag: u64,
        data: Option<u64>,
        tagged: bool,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()> {
        let len = iov.total();
        let max = self
            .dom
            .core_info
            .ep_attr
            .max_msg_size
            .min(crate::MAX_MSG_SIZE);
        if len > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxm: message of {len} bytes exceeds max_msg_size {max}"),
            ));
        }
        let suppress = inject;
        let inject = inject || flags.contains(OpFlags::INJECT);
        // An eager or segmented message completes when the core has sent it; a
        // delivery-complete one waits for the receiver's word that it has taken the
        // message in (into a receive, or buffered), so it needs an operation record:
        // not the fast path.
        let delivery = !inject && flags.contains(OpFlags::DELIVERY_COMPLETE);
        let cq_flags = (OpFlags::SEND
            | if tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            })
        .bits();
        let want = !suppress
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let mut g = lock(&self.st);
        let st = &mut *g;
        let c = self.conn_of(act, st, dest)?;
        // Fast path: a packet that fits the core's inject size, connection idle.
        if !delivery && len + HDR_LEN <= self.core_inject && len + HDR_LEN <= FAST_MAX {
            let ready = st
                .conns
                .get(c)
                .and_then(Option::as_ref)
                .is_some_and(|x| x.tx.is_some() && x.queue.is_empty() && x.credits > 0);
            if ready {
                let give = Self::take_credit(st, c).unwrap_or(0);
                let mut f = 0;
                if tagged {
                    f |= proto::F_TAGGED;
                }
                if data.is_some() {
                    f |= proto::F_DATA;
                }
                let mut h = Hdr::new(Op::Eager, f, len as u64, tag, data.unwrap_or(0));
                h.credits = give;
                let mut pkt = [0u8; FAST_MAX];
                h.write(
                    (&mut pkt[..HDR_LEN])
                        .try_into()
                        .unwrap_or(&mut [0u8; HDR_LEN]),
                );
                // SAFETY: the application's buffers are readable for their lengths (C
                // contract); `pkt` has room for `len` bytes after the header.
                unsafe { iov.gather(0, pkt[HDR_LEN..].as_mut_ptr(), len) };
                let r = match self.tx_ep(st, c) {
                    // SAFETY: `pkt` is valid for the call; inject copies it.
                    Some(ep) => unsafe { ep.inject_raw(pkt.as_ptr(), HDR_LEN + len, ADDR_UNSPEC) },
                    None => Err(Error::code_only(Errno::ENOTCONN)),
                };
                match r {
                    Ok(()) => {
                        drop(g);
                        act.complete_tx(ctx, cq_flags, want, None);
                        return Ok(());
                    }
                    Err(e) => {
                        Self::untake_credit(st, c, give);
                        if is_conn_err(e.code()) {
                            self.fail_conn(act, st, c, Errno::ECONNRESET);
                        } else if e.code() != Errno::EAGAIN {
                            return Err(e);
                        }
                    }
                }
            }
        }
        let owned = if inject {
            let mut v = vec![0u8; len];
            // SAFETY: as above.
            unsafe { iov.gather(0, v.as_mut_ptr(), len) };
            Some(v)
        } else {
            None
        };
        let op = TxOp {
            gen: 0,
            conn: c,
            ctx,
            flags: cq_flags,
            want,
            body: Body::Send {
                iov,
                len,
                tag,
                data,
                tagged,
            },
            owned,
            outstanding: 0,
            await_done: false,
            dc: delivery,
            await_ack: false,
            posted: false,
            sent: 0,
            err: None,
            hdrs: Vec::new(),
            bounce: Vec::new(),
            mrs: Vec::new(),
        };
        self.submit(act, st, op)
    }

    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        act: &Active,
        dest: u64,
        ctx: usize,
        fwd: Fwd,
        owned: Option<Vec<u8>>,
        flags: OpFlags,
        suppress: bool,
    ) -> Result<()> {
        let cq_flags = match &fwd {
            Fwd::Read { .. } => (OpFlags::RMA | OpFlags::READ).bits(),
            Fwd::Write { .. } => (OpFlags::RMA | OpFlags::WRITE).bits(),
            Fwd::Atomic { kind, .. } => match kind {
                AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
                _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
            },
        };
        let want = !suppress
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let mut g = lock(&self.st);
        let st = &mut *g;
        let c = self.conn_of(act, st, dest)?;
        let op = TxOp {
            gen: 0,
            conn: c,
            ctx,
            flags: cq_flags,
            want,
            body: Body::Fwd(fwd),
            owned,
            outstanding: 0,
            await_done: false,
            dc: false,
            await_ack: false,
            posted: false,
            sent: 0,
            err: None,
            hdrs: Vec::new(),
            bounce: Vec::new(),
            mrs: Vec::new(),
        };
        self.submit(act, st, op)
    }
}

// ---------------------------------------------------------------------------------------
// Receive.

impl Shared {
    fn return_credit(st: &mut St, c: usize, epoch: u64) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            if conn.epoch == epoch {
                conn.owed += 1;
            }
        }
    }

    /// Count a credited message of the peer on `c`; `FI_EPROTO` if the peer has more
    /// of them unreturned than we granted (it ignores flow control: refusing it bounds
    /// what one peer can make us buffer).
    fn hold_credit(&self, st: &mut St, c: usize) -> Result<()> {
        let grant = self.settings.credits;
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            if conn.held >= grant {
                return Err(Error::new(
                    Errno::EPROTO,
                    format!("peer sent beyond the {grant} credits granted to it"),
                ));
            }
            conn.held += 1;
        }
        Ok(())
    }

    fn conn_epoch(st: &St, c: usize) -> u64 {
        st.conns
            .get(c)
            .and_then(Option::as_ref)
            .map_or(0, |x| x.epoch)
    }

    /// A packet arrived on MSG slot `slot` (of connection `c`).
    fn handle_packet(&self, act: &Active, st: &mut St, c: usize, pkt: &[u8]) -> Result<()> {
        let h = Hdr::parse(pkt)?;
        let payload = &pkt[HDR_LEN..];
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.credits += h.credits as usize;
        }
        let tagged = h.flags & proto::F_TAGGED != 0;
        match h.op {
            Op::Credit => Ok(()),
            Op::DcAck => self.on_dc_ack(act, st, c, h.size),
            Op::RndvDone => {
                let i = (h.tag & 0xffff_ffff) as u32;
                let gen = (h.tag >> 32) as u32;
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    if op.gen == gen && op.await_done && op.conn == c {
                        op.await_done = false;
                        // The peer's status: an FI code or FI_EPROTO, never as it came.
                        if let Some(e) = Errno::from_peer_status(h.data as i64) {
                            op.err.get_or_insert(e);
                        }
                        op.mrs.clear();
                        self.maybe_finish(act, st, i);
                    }
                }
                Ok(())
            }
            Op::Eager | Op::SarFirst | Op::Rts => {
                self.hold_credit(st, c)?;
                let size =
                    usize::try_from(h.size).map_err(|_| Error::new(Errno::EPROTO, "size"))?;
                if h.op == Op::Eager && size != payload.len() {
                    return Err(Error::new(
                        Errno::EPROTO,
                        format!("eager packet of {} bytes says {size}", payload.len()),
                    ));
                }
                let peer_sar = st
                    .conns
                    .get(c)
                    .and_then(Option::as_ref)
                    .map_or(0, |x| x.peer_sar);
                if h.op == Op::SarFirst
                    && (payload.len() > size || size > peer_sar.max(self.settings.buffer_size))
                {
                    return Err(Error::new(Errno::EPROTO, "bad first segment"));
                }
                let rts = if h.op == Op::Rts {
                    Some(Rts::parse(payload, h.size)?)
                } else {
                    None
                };
                let src = st_src(self, act, st, c);
                let inc = Incoming {
                    src,
                    tag: h.tag,
                    len: size,
                    data: (h.flags & proto::F_DATA != 0).then_some(h.data),
                    tagged,
                };
                let epoch = Self::conn_epoch(st, c);
                if h.op == Op::SarFirst
                    && st
                        .conns
                        .get(c)
                        .and_then(Option::as_ref)
                        .is_some_and(|x| x.sar.is_some())
                {
                    return Err(Error::new(
                        Errno::EPROTO,
                        "segmented message while another is open",
                    ));
                }
                let m = st.m.match_incoming(&inc);
                let target = match m {
                    Match::Unexpected => None,
                    Match::Recv { recv, place } => Some((recv, place, false)),
                    Match::Multi { buf, place } => {
                        let rel = buf.is_released();
                        let r = match buf {
                            MultiBuf::Posted(p) => p.clone(),
                            MultiBuf::Released(p) => p,
                        };
                        Some((r, place, rel))
                    }
                };
                let dc = h.flags & proto::F_DC != 0;
                match (h.op, target) {
                    (Op::Eager, Some((recv, place, rel))) => {
                        let n = place.len.min(payload.len());
                        // SAFETY: the receive buffer is the application's, writable for
                        // its length (the placement lies within it); `payload` has n bytes.
                        unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                        act.complete_rx(&recv, place, &inc, rel, None);
                        Self::return_credit(st, c, epoch);
                        if dc {
                            self.ack_dc(st, c);
                        }
                    }
                    (Op::Eager, None) => {
                        let u = Unexp::Data {
                            data: payload.to_vec(),
                            conn: c,
                            epoch,
                        };
                        let _ = st.m.push_unexpected(inc, u);
                        // Buffered is taken in (libfabric's delivery complete).
                        if dc {
                            self.ack_dc(st, c);
                        }
                    }
                    (Op::SarFirst, Some((recv, place, rel))) => {
                        let n = place.len.min(payload.len());
                        // SAFETY: as above.
                        unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                        if let Some(conn) = st.conns[c].as_mut() {
                            conn.sar = Some(SarRx {
                                inc,
                                got: payload.len(),
                                target: SarTarget::Recv {
                                    recv,
                                    place,
                                    released: rel,
                                },
                                dc,
                            });
                        }
                        if h.flags & proto::F_LAST != 0 {
                            self.finish_sar(act, st, c);
                        }
                    }
                    (Op::SarFirst, None) => {
                        // Reserved up to our own segmenting limit, grown beyond: the
                        // size is the peer's word until the segments arrive.
                        let cap = self.settings.sar_limit.max(self.settings.buffer_size);
                        let mut data = Vec::with_capacity(size.min(cap));
                        data.extend_from_slice(payload);
                        let buf = Arc::new(Mutex::new(SarBuf {
                            data,
                            complete: false,
                            discarded: false,
                            matched: None,
                        }));
                        let _ = st.m.push_unexpected(
                            inc,
                            Unexp::Sar {
                                buf: buf.clone(),
                                conn: c,
                                epoch,
                            },
                        );
                        if let Some(conn) = st.conns[c].as_mut() {
                            conn.sar = Some(SarRx {
                                inc,
                                got: payload.len(),
                                target: SarTarget::Buffer(buf),
                                dc,
                            });
                        }
                        if h.flags & proto::F_LAST != 0 {
                            self.finish_sar(act, st, c);
                        }
                    }
                    (Op::Rts, Some((recv, place, rel))) => {
                        if let Some(rts) = rts {
                            self.start_read(act, st, c, recv, place, inc, rel, rts);
                        }
                    }
                    (Op::Rts, None) => {
                        if let Some(rts) = rts {
                            let _ = st.m.push_unexpected_sized(
                                inc,
                                Unexp::Rts {
                                    rts,
                                    conn: c,
                                    epoch,
                                },
                                proto::rts_len(rts.n),
                            );
                        }
                    }
                    _ => {}
                }
                Ok(())
            }
            Op::SarNext => {
                let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
                    return Ok(());
                };
                let Some(sar) = conn.sar.as_mut() else {
                    return Err(Error::new(Errno::EPROTO, "segment without a first segment"));
                };
                if h.size != sar.got as u64 || sar.got + payload.len() > sar.inc.len {
                    return Err(Error::new(Errno::EPROTO, "segment out of order"));
                }
                match &sar.target {
                    SarTarget::Recv { recv, place, .. } => {
                        let off = sar.got;
                        if off < place.len {
                            let n = (place.len - off).min(payload.len());
                            // SAFETY: as above.
                            unsafe { recv.buf.scatter(place.offset + off, payload.as_ptr(), n) };
                        }
                    }
                    SarTarget::Buffer(b) => {
                        lock(b).data.extend_from_slice(payload);
                    }
                }
                sar.got += payload.len();
                if h.flags & proto::F_LAST != 0 || sar.got == sar.inc.len {
                    self.finish_sar(act, st, c);
                }
                Ok(())
            }
        }
    }

    fn finish_sar(&self, act: &Active, st: &mut St, c: usize) {
        let Some(sar) = st
            .conns
            .get_mut(c)
            .and_then(Option::as_mut)
            .and_then(|x| x.sar.take())
        else {
            return;
        };
        let epoch = Self::conn_epoch(st, c);
        match sar.target {
            SarTarget::Recv {
                recv,
                place,
                released,
            } => {
                act.complete_rx(&recv, place, &sar.inc, released, None);
                Self::return_credit(st, c, epoch);
            }
            SarTarget::Buffer(b) => {
                let mut g = lock(&b);
                g.complete = true;
                if let Some((recv, place, rel)) = g.matched.take() {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    act.complete_rx(&recv, place, &sar.inc, rel, None);
                    Self::return_credit(st, c, epoch);
                } else if g.discarded {
                    drop(g);
                    Self::return_credit(st, c, epoch);
                }
            }
        }
        // The whole message is in (a receive, or assembled): taken in.
        if sar.dc {
            self.ack_dc(st, c);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn start_read(
        &self,
        act: &Active,
        st: &mut St,
        c: usize,
        recv: PostedRecv<IoList>,
        place: Placement,
        inc: Incoming,
        released: bool,
        rts: Rts,
    ) {
        // Pieces: local contiguous ranges against remote ranges, for place.len bytes.
        let local = recv.buf.sub(place.offset, place.len);
        let mut pieces = Vec::new();
        let (mut li, mut loff) = (0usize, 0usize);
        let mut left = place.len;
        for &(ra, rl, key) in &rts.iov[..rts.n] {
            let mut roff = 0u64;
            while roff < rl && left > 0 && li < local.len() {
                let (la, ll) = local.slice()[li];
                let n = ((ll - loff) as u64).min(rl - roff) as usize;
                let n = n.min(left);
                pieces.push((la + loff, n, ra + roff, key));
                loff += n;
                roff += n as u64;
                left -= n;
                if loff == ll {
                    li += 1;
                    loff = 0;
                }
            }
        }
        let r = RdOp {
            gen: 0,
            conn: c,
            recv,
            place,
            inc,
            released,
            id: rts.id,
            pieces,
            posted: 0,
            outstanding: 0,
            err: None,
        };
        st.op_gen = st.op_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = st.op_gen;
        let i = match st.rd_free.pop() {
            Some(i) => {
                st.rds[i as usize] = Some(RdOp { gen, ..r });
                i
            }
            None => {
                st.rds.push(Some(RdOp { gen, ..r }));
                (st.rds.len() - 1) as u32
            }
        };
        self.pump_read(act, st, i);
    }

    fn pump_read(&self, act: &Active, st: &mut St, i: u32) {
        loop {
            let Some(r) = st.rds.get(i as usize).and_then(Option::as_ref) else {
                return;
            };
            if r.posted >= r.pieces.len() {
                break;
            }
            let (la, n, ra, key) = r.pieces[r.posted];
            let ctx = mk_ctx(K_RD, i, r.gen);
            let res = match self.tx_ep(st, r.conn) {
                // SAFETY: the receive buffer is the application's, valid until the
                // receive completes (after this read).
                Some(ep) => unsafe {
                    ep.read(
                        la as *mut u8,
                        n,
                        std::ptr::null_mut(),
                        ADDR_UNSPEC,
                        ra,
                        key,
                        ctx,
                    )
                },
                None => Err(Error::code_only(Errno::ENOTCONN)),
            };
            let Some(r) = st.rds.get_mut(i as usize).and_then(Option::as_mut) else {
                return;
            };
            match res {
                Ok(()) => {
                    r.posted += 1;
                    r.outstanding += 1;
                }
                Err(e) if e.code() == Errno::EAGAIN => {
                    if !st.rd_waiting.contains(&i) {
                        st.rd_waiting.push(i);
                    }
                    return;
                }
                Err(e) => {
                    r.err = Some(e.code());
                    r.posted = r.pieces.len();
                }
            }
        }
        self.maybe_finish_read(act, st, i);
    }

    fn maybe_finish_read(&self, act: &Active, st: &mut St, i: u32) {
        let done = st
            .rds
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|r| r.posted >= r.pieces.len() && r.outstanding == 0);
        if !done {
            return;
        }
        let Some(r) = st.rds.get_mut(i as usize).and_then(Option::take) else {
            return;
        };
        st.rd_free.push(i);
        st.rd_waiting.retain(|x| *x != i);
        act.complete_rx(&r.recv, r.place, &r.inc, r.released, r.err);
        let status = r.err.map_or(0i64, |e| -i64::from(e.0));
        let epoch = Self::conn_epoch(st, r.conn);
        Self::return_credit(st, r.conn, epoch);
        self.send_ctrl(
            st,
            r.conn,
            Hdr::new(Op::RndvDone, 0, 0, r.id, status as u64),
        );
    }

    fn read_done(&self, act: &Active, st: &mut St, i: u32, gen: u32, err: Option<Errno>) {
        let Some(r) = st.rds.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        if r.gen != gen {
            return;
        }
        r.outstanding = r.outstanding.saturating_sub(1);
        if err.is_some() && r.err.is_none() {
            r.err = err;
        }
        self.maybe_finish_read(act, st, i);
    }

    /// Deliver an unexpected message to a receive that matched it.
    #[allow(clippy::too_many_arguments)]
    fn deliver_unexp(
        &self,
        act: &Active,
        st: &mut St,
        recv: PostedRecv<IoList>,
        place: Placement,
        inc: &Incoming,
        payload: Unexp,
        released: bool,
    ) {
        match payload {
            Unexp::Data { data, conn, epoch } => {
                let n = place.len.min(data.len());
                // SAFETY: as in handle_packet.
                unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
                act.complete_rx(&recv, place, inc, released, None);
                Self::return_credit(st, conn, epoch);
                self.maybe_credit(st, conn);
            }
            Unexp::Sar { buf, conn, epoch } => {
                let mut g = lock(&buf);
                if g.complete {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    act.complete_rx(&recv, place, inc, released, None);
                    Self::return_credit(st, conn, epoch);
                    self.maybe_credit(st, conn);
                } else if Self::conn_epoch(st, conn) == epoch {
                    g.matched = Some((recv, place, released));
                } else {
                    drop(g);
                    act.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
            Unexp::Rts { rts, conn, epoch } => {
                if Self::conn_epoch(st, conn) == epoch {
                    self.start_read(act, st, conn, recv, place, *inc, released, rts);
                } else {
                    act.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
        }
    }

    fn discard_unexp(&self, st: &mut St, payload: Unexp) {
        match payload {
            Unexp::Data { conn, epoch, .. } => {
                Self::return_credit(st, conn, epoch);
                self.maybe_credit(st, conn);
            }
            Unexp::Sar { buf, conn, epoch } => {
                let mut g = lock(&buf);
                if g.complete {
                    drop(g);
                    Self::return_credit(st, conn, epoch);
                    self.maybe_credit(st, conn);
                } else {
                    g.discarded = true;
                }
            }
            Unexp::Rts { rts, conn, epoch } => {
                if Self::conn_epoch(st, conn) == epoch {
                    Self::return_credit(st, conn, epoch);
                    self.send_ctrl(st, conn, Hdr::new(Op::RndvDone, 0, 0, rts.id, 0));
                }
            }
        }
    }

    fn post_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let mut g = lock(&self.st);
        let st = &mut *g;
        // The common answer, Queued, is tested in place and returns before anything
        // is moved out of the (large) result.
        let posted = st.m.post(recv);
        if matches!(posted, Ok(PostAction::Queued)) {
            return Ok(());
        }
        match posted? {
            PostAction::Queued => {}
            PostAction::One {
                recv,
                place,
                msg,
                payload,
            } => self.deliver_unexp(act, st, recv, place, &msg, payload, false),
            PostAction::Multi {
                recv,
                released,
                msgs,
            } => {
                let n = msgs.len();
                for (i, (place, msg, payload)) in msgs.into_iter().enumerate() {
                    let last = released && i + 1 == n;
                    self.deliver_unexp(act, st, recv.clone(), place, &msg, payload, last);
                }
            }
            PostAction::Peeked { recv, msg } => act.peeked(recv, &msg, false),
            PostAction::NoMessage { recv } => act.no_message(&recv),
            PostAction::Discarded { recv, msg, payload } => {
                self.discard_unexp(st, payload);
                act.peeked(recv, &msg, true);
            }
        }
        Ok(())
    }
}

fn st_src(sh: &Shared, act: &Active, st: &mut St, c: usize) -> u64 {
    st.conn_src(act, c, sh.need_src)
}

// ---------------------------------------------------------------------------------------
// Progress.

impl Shared {
    fn progress_cq(&self, act: &Active, st: &mut St) -> usize {
        let mut buf = [CqTaggedEntry::default(); CQ_BATCH];
        let mut n = 0;
        // Bounded work per call, so one busy endpoint cannot starve the others.
        for _ in 0..CQ_ROUNDS {
            match self.core_cq.read(&mut buf) {
                Ok(k) => {
                    n += k;
                    for e in &buf[..k] {
                        self.on_completion(act, st, e, None);
                    }
                    if k < CQ_BATCH {
                        break;
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => match self.core_cq.readerr_owned(0) {
                    Ok(err) => {
                        n += 1;
                        let entry = CqTaggedEntry {
                            op_context: err.op_context,
                            flags: err.flags,
                            len: err.len,
                            buf: std::ptr::null_mut(),
                            data: err.data,
                            tag: err.tag,
                        };
                        let code = if err.err == Errno(0) {
                            Errno::EIO
                        } else {
                            err.err
                        };
                        self.on_completion(act, st, &entry, Some(code));
                    }
                    Err(_) => break,
                },
                Err(_) => break,
            }
        }
        n
    }

    fn on_completion(&self, act: &Active, st: &mut St, e: &CqTaggedEntry, err: Option<Errno>) {
        if e.op_context == 0 {
            // Remote CQ data of an RMA write at this target.
            if err.is_none()
                && OpFlags::from_bits_truncate(e.flags).contains(OpFlags::REMOTE_CQ_DATA)
            {
                if let Some(b) = &act.rxcq {
                    let _ = b.cq.push_entry(&CqTaggedEntry {
                        op_context: 0,
                        flags: e.flags,
                        len: 0,
                        buf: std::ptr::null_mut(),
                        data: e.data,
                        tag: 0,
                    });
                }
                if let Some(c) = &act.rxcntr {
                    c.inc();
                }
            }
            return;
        }
        let (kind, idx, gen) = split_ctx(e.op_context);
        match kind {
            K_RX => {
                let slot = (idx >> 12) as usize;
                let b = (idx & 0xfff) as usize;
                let Some(m) = st.msgs.get(slot).and_then(Option::as_ref) else {
                    return;
                };
                if m.gen != gen {
                    return;
                }
                let c = m.conn;
                match err {
                    Some(Errno::ETRUNC) => {
                        // Larger than the agreed buffer size: not an rxm peer.
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "closing a connection after an oversized packet"
                        );
                        self.fail_conn(act, st, c, Errno::EPROTO);
                        return;
                    }
                    // Flushed by a closing connection; the EQ reports the reason.
                    Some(_) => return,
                    None => {}
                }
                let len = e.len.min(self.settings.buffer_size);
                let Some(buf) = m.bufs.get(b) else {
                    return;
                };
                // SAFETY: the packet lies in a bounce buffer, a `Box<[u8]>` owned by MSG
                // slot `slot`; its heap bytes never move (growing `st.msgs` moves only
                // the box pointer) and are freed only when the slot is dropped.
                // `handle_packet` never drops MSG slots (it reports a broken connection
                // by returning an error; `fail_conn` runs after it returns), and the core
                // does not write the buffer until it is reposted below. The raw slice
                // only detaches the borrow from `st` so `handle_packet` can take it.
                let pkt: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) };
                match self.handle_packet(act, st, c, pkt) {
                    Ok(()) => {
                        self.repost(st, slot, b);
                        self.pump_conn(act, st, c);
                    }
                    Err(err) => {
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "closing a connection after a malformed packet: {err}"
                        );
                        self.fail_conn(act, st, c, Errno::EPROTO);
                    }
                }
            }
            K_TX => {
                let err = err.map(|e| if is_conn_err(e) { Errno::ECONNRESET } else { e });
                self.tx_done(act, st, idx, gen, err)
            }
            K_RD => {
                let err = err.map(|e| if is_conn_err(e) { Errno::ECONNRESET } else { e });
                self.read_done(act, st, idx, gen, err)
            }
            _ => {}
        }
    }

    fn progress_all(&self, act: &Active) -> usize {
        let mut g = lock(&self.st);
        let st = &mut *g;
        // Connection events are read every EQ_INTERVAL (the clock is looked at every
        // EQ_CHECK_EVERY calls), or at every call while a handshake or timer is pending
        // (reading the core EQ costs the core's CM poll).
        st.polls = st.polls.wrapping_add(1);
        let timers = st.next_timer.is_some();
        let mut n = 0;
        let mut now = None;
        if timers || st.polls.is_multiple_of(EQ_CHECK_EVERY) {
            let t = Instant::now();
            now = Some(t);
            if timers || t.duration_since(st.last_eq) >= EQ_INTERVAL {
                st.last_eq = t;
                n += self.progress_eq(act, st);
            }
        }
        n += self.progress_cq(act, st);
        if let (Some(t), Some(now)) = (st.next_timer, now) {
            if t <= now {
                st.mgr.handle_timeout(now);
                self.run_actions(act, st);
                n += 1;
            }
        }
        if !st.rd_waiting.is_empty() {
            let w: Vec<u32> = std::mem::take(&mut st.rd_waiting);
            for i in w {
                self.pump_read(act, st, i);
            }
        }
        // Queued work on connected peers (credits may have come back).
        let mut busy: Vec<usize> = Vec::new();
        for (i, c) in st.conns.iter().enumerate() {
            if let Some(c) = c {
                if c.tx.is_some() && (!c.queue.is_empty() || !c.ctrl.is_empty()) {
                    busy.push(i);
                }
            }
        }
        for c in busy {
            self.pump_conn(act, st, c);
        }
        n
    }
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(act) = self.active.get() else {
            return 0;
        };
        self.progress_all(act)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // MSG endpoints go first (they are bound to the CQ and EQ dropped after us).
        let st = self.st.get_mut().unwrap_or_else(PoisonError::into_inner);
        st.msgs.clear();
        st.ops.clear();
        st.rds.clear();
    }
}

fn recv_src(sh: &Shared, src: u64) -> u64 {
    if sh.directed {
        src
    } else {
        ANY_SRC
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "ofi_rxm: bind after fi_enable",
            ));
        }
        lock(&self.sh.setup).bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Ok(());
        }
        let setup = lock(&self.sh.setup);
        let _ = self.sh.active.set(setup.freeze("ofi_rxm")?);
        self.sh.engine.kick();
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let act = self.active()?;
        let recv = lock(&self.sh.st).m.cancel(context);
        match recv {
            Some(r) => {
                act.cancelled(&r);
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                "ofi_rxm: no such operation to cancel",
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        ofi_kit::ep::getopt_min_multi_recv("ofi_rxm", level, optname, optval, || {
            lock(&self.sh.st).m.config().min_multi_recv
        })
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        let v = ofi_kit::ep::setopt_min_multi_recv("ofi_rxm", level, optname, optval)?;
        lock(&self.sh.st).m.set_min_multi_recv(v);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.sh.me_bytes.clone())
    }

    fn rx_size_left(&self) -> Result<usize> {
        let st = lock(&self.sh.st);
        Ok(st.m.config().max_posted.saturating_sub(st.m.posted_len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let st = lock(&self.sh.st);
        Ok(self.sh.settings.tx_size.saturating_sub(st.live))
    }

    ofi_kit::endpoint_data_ops!();
}

impl ofi_kit::dataops::DataPath for Endpoint {
    const NAME: &'static str = NAME;
    type Active = Active;

    fn active(&self) -> Result<&Active> {
        Endpoint::active(self)
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.sh.tx_op_flags
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.sh.rx_op_flags
    }

    fn recv_src(&self, src: u64) -> u64 {
        recv_src(&self.sh, src)
    }

    fn inject_size(&self) -> usize {
        self.sh.core_inject.saturating_sub(HDR_LEN)
    }

    fn submit_send(&self, act: &Active, req: SendRequest) -> Result<()> {
        let SendRequest {
            iov,
            dest,
            context,
            tag,
            data,
            flags,
            inject,
        } = req;
        self.sh.send(
            act,
            iov,
            dest,
            context,
            tag.unwrap_or(0),
            data,
            tag.is_some(),
            flags,
            inject,
        )
    }

    fn submit_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        self.sh.post_recv(act, recv)
    }

    fn submit_rma(&self, act: &Active, req: RmaRequest<'_>) -> Result<()> {
        let read = req.is_read();
        let RmaRequest {
            local,
            peer,
            remote: rma,
            context: ctx,
            data,
            flags,
            inject,
            ..
        } = req;
        let iov = local.bufs.to_vec();
        let desc = local.desc_words();
        let total: usize = iov.iter().map(|v| v.len).sum();
        if total != rma.len {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "ofi_rxm: {total} local bytes for a remote buffer of {}",
                    rma.len
                ),
            ));
        }
        if iov.len() > IOV_LIMIT {
            return Err(Error::new(Errno::EINVAL, "ofi_rxm: too many iov entries"));
        }
        let suppress = inject;
        let copy = inject || flags.contains(OpFlags::INJECT);
        if read {
            return self.sh.forward(
                act,
                peer,
                ctx,
                Fwd::Read { iov, desc, rma },
                None,
                flags,
                false,
            );
        }
        if copy {
            let max = self.sh.core_inject;
            if total > max {
                return Err(Error::new(
                    Errno::EMSGSIZE,
                    format!("ofi_rxm: inject write of {total} bytes exceeds {max}"),
                ));
            }
            let mut v = vec![0u8; total];
            let l = IoList::from_iov(&iov, "ofi_rxm")?;
            // SAFETY: the application's buffers, readable during the call.
            unsafe { l.gather(0, v.as_mut_ptr(), total) };
            let iov = vec![Iov {
                base: v.as_mut_ptr() as *mut c_void,
                len: total,
            }];
            return self.sh.forward(
                act,
                peer,
                ctx,
                Fwd::Write {
                    iov,
                    desc: Vec::new(),
                    rma,
                    data,
                },
                Some(v),
                flags,
                suppress,
            );
        }
        self.sh.forward(
            act,
            peer,
            ctx,
            Fwd::Write {
                iov,
                desc,
                rma,
                data,
            },
            None,
            flags,
            false,
        )
    }

    fn submit_atomic(&self, act: &Active, req: AtomicRequest<'_>) -> Result<()> {
        let AtomicRequest {
            kind,
            operands,
            compare,
            result,
            peer,
            remote: rma,
            datatype: dt,
            op,
            context: ctx,
            flags,
            inject,
        } = req;
        let (iov, desc) = (operands.bufs, operands.desc_words());
        let (cmp, cdesc) = (compare.bufs, compare.desc_words());
        let (res, rdesc) = (result.bufs, result.desc_words());
        ofi_kit::atomic::valid(op, dt, kind)?;
        let count: usize = iov.iter().map(|v| v.count).sum();
        let count = if op == AtomicOp::AtomicRead && count == 0 {
            res.iter().map(|v| v.count).sum()
        } else {
            count
        };
        if count != rma.count {
            return Err(Error::new(
                Errno::EINVAL,
                "ofi_rxm: local and remote atomic element counts differ",
            ));
        }
        let mut owned = None;
        let mut iov = iov.to_vec();
        let mut desc = desc;
        let suppress = inject;
        if inject || flags.contains(OpFlags::INJECT) {
            let size = dt.size();
            let mut v = Vec::new();
            for e in &iov {
                let n = e.count * size;
                if !e.addr.is_null() && n > 0 {
                    // SAFETY: the application's buffer holds `count` elements during the
                    // call (C contract).
                    v.extend_from_slice(unsafe {
                        std::slice::from_raw_parts(e.addr as *const u8, n)
                    });
                }
            }
            iov = vec![Ioc {
                addr: v.as_mut_ptr() as *mut c_void,
                count,
            }];
            desc = Vec::new();
            owned = Some(v);
        }
        self.sh.forward(
            act,
            peer,
            ctx,
            Fwd::Atomic {
                kind,
                iov,
                desc,
                rma,
                dt,
                op,
                cmp: cmp.to_vec(),
                cdesc,
                res: res.to_vec(),
                rdesc,
            },
            owned,
            flags,
            suppress,
        )
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(self.sh.dom.core_info.ep_attr.max_msg_size / dt.size().max(1)))
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
