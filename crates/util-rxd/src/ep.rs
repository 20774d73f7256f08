//! The RDM endpoint over one DGRAM endpoint of the core.
//!
//! # Structure
//!
//! An endpoint owns, in the core provider: one DGRAM endpoint (its name is the RDM
//! endpoint's name), an AV holding the peers it talks to, and a CQ. `rx_bufs` datagram
//! buffers of the core's largest datagram size stay posted on it. Everything else is
//! one mutex-protected state (`St`): the sans-IO [`Engine`] (connections, windows,
//! retransmission, reassembly), the transmit operations by token, and the kit tag
//! matcher.
//!
//! # Paths
//!
//! - Send: the message (rxd's [`MSG_HDR`]-byte header, then the application's data) is
//!   copied into the engine's packets at the call — so the application's buffer is free
//!   at once, and `fi_inject` is the same path without a completion — and the packets go
//!   to the core right away within the window. The operation completes when the peer
//!   acknowledged every packet (transmit complete), or fails with `FI_EIO` when the peer
//!   is lost.
//! - Receive: each datagram completion feeds the engine, which hands out message
//!   pieces in order ([`Engine::handle_packet_streaming`]). A message's first piece is
//!   matched with the kit matcher: the pieces of a matched message go straight into the
//!   application's buffer (no reassembly copy); an unexpected message is gathered whole
//!   and matched again when complete (then kept until a receive is posted) — or, past
//!   `unexp_msgs` / `unexp_bytes` held, refused (receiver not ready: the engine has its
//!   sender offer it again later); requests and responses are gathered whole and
//!   carried out when complete.
//! - RMA and atomics: a request message (write data, or what to read, or the atomic's
//!   operands) carried like any message; the target checks it against the domain's kit
//!   MR table, carries it out (atomics with the kit's engine under process-wide address
//!   locks) and answers with a response (status, and the data read or fetched) that
//!   completes the initiator's operation. `fi_writedata` raises a remote CQ entry.
//! - Progress ([`Progress::progress`]): the core CQ (bounded batches), the engine's
//!   timers (retransmission, delayed acknowledgements, lost peers), its events, and its
//!   packets to send. A watchdog thread per endpoint runs a round when the application
//!   has not for a millisecond and a timer is due (an application may stop calling in
//!   once it has its completions, while its peer waits for an acknowledgement).
//!
//! # Failure
//!
//! A lost peer (retry limit reached) fails its operations with `FI_EIO`; a peer that
//! reconnects with a new session fails the old connection's with `FI_ECONNRESET`.
//! Requests that fail at the target (bad key, out of range, no access) complete with
//! the target's error code. Malformed messages are dropped and logged.
//!
//! # Invariants
//!
//! - Lock order: `St`, then a kit CQ's / counter's / AV's / MR table's own lock or the
//!   atomic address stripes, then the core's.
//! - A token names (index, generation) of a transmit operation; each is reported by the
//!   engine exactly once.
//! - The core endpoint is declared first in `Shared` so it is closed before the buffers
//!   it may still write are freed.
//!
//! Nothing here panics on application or peer input.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqTaggedEntry, Ioc};
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::av::{AddressVector, AvAttr};
use ofi_core::cq::{CompletionQueue, CqAttr};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype, ADDR_UNSPEC};
use ofi_core::ep::Endpoint as CoreEp;
use ofi_core::provider::EndpointOps;
use ofi_core::{AddrFormat, AvType, Caps, CqFormat, Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::atomic::AtomicLocks;
use ofi_kit::ep::{BindRules, Bindings, Bound};
use ofi_kit::iov::IoList;
use ofi_kit::mr::MrEndpointTarget;
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{
    Incoming, Match, MatcherConfig, MultiBuf, Placement, PostAction, PostedRecv, TagMatcher,
};

use crate::fabric::{DomainShared, Fabric};
use crate::peer::{Engine, Event, Failure, PeerId, Seg, NO_PEER};
use crate::proto::{
    self, kind_code, kind_of, msg_hdr, op_hdr, parse_msg_hdr, RmaReq, OP_ATOMIC, OP_READ, OP_RESP,
    OP_TAGGED, OP_WRITE, RMA_HDR,
};
use crate::{Settings, IOV_LIMIT, MAX_MSG_SIZE, MSG_HDR, NAME};

/// Core completions read per batch.
const CQ_BATCH: usize = 16;
/// Core CQ batches per progress call at most.
const CQ_ROUNDS: usize = 8;
/// Packets handed to the core per flush at most.
const TX_BUDGET: usize = 256;

/// Token of packets that complete no operation (responses).
const NO_TOKEN: u64 = u64::MAX;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn token(idx: u32, gen: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(idx)
}

fn split_token(t: u64) -> (u32, u32) {
    (t as u32, (t >> 32) as u32)
}

// ---------------------------------------------------------------------------------------
// State.

/// Bindings made before `fi_enable` (the kit's rules).
type Setup = Bindings;

const BIND_RULES: BindRules = BindRules {
    prov: "ofi_rxd",
    eq: false,
};

/// What `fi_enable` froze (the kit's [`Bound`]).
type Active = Bound;

/// An RMA or atomic operation waiting for its response.
struct Remote {
    peer: PeerId,
    /// Where the response's data goes (read, fetched values), and how long it must be.
    result: Option<IoList>,
    expect: usize,
}

struct TxOp {
    gen: u32,
    ctx: usize,
    flags: u64,
    want: bool,
    remote: Option<Remote>,
}

/// An unexpected message: the whole message, rxd header included.
type Unexp = Vec<u8>;

/// Where the pieces of a message being received go.
enum RxTarget {
    /// A posted receive matched at the first piece: the data goes straight into it.
    Recv {
        recv: PostedRecv<IoList>,
        place: Placement,
        released: bool,
        inc: Incoming,
    },
    /// Gathered whole: an unexpected message (matched again when complete, `unexp`),
    /// a request or a response (carried out when complete), or something malformed.
    /// `total` is the message's announced length.
    Buffer {
        data: Vec<u8>,
        total: usize,
        unexp: bool,
    },
}

impl RxTarget {
    /// A buffer for a message of `total` bytes; memory is reserved up to
    /// [`RESERVE_MAX`] at once and grows with the pieces beyond (the length is the
    /// peer's word until they arrive).
    fn buffer(total: usize, unexp: bool) -> RxTarget {
        RxTarget::Buffer {
            data: Vec::with_capacity(total.min(RESERVE_MAX)),
            total,
            unexp,
        }
    }
}

/// Most bytes reserved for a message being gathered before its pieces arrive.
const RESERVE_MAX: usize = 1 << 20;

struct St {
    eng: Engine,
    /// Datagram buffers posted on the core endpoint (context = index).
    bufs: Vec<Box<[u8]>>,
    /// Core AV address of each engine peer.
    core_addr: Vec<Option<u64>>,
    /// The address (as the engine knows it) of core AV entries that sent datagrams,
    /// by the entry's index: (fabric address, address bytes).
    src_bytes: Vec<Option<(u64, Vec<u8>)>>,
    /// The source of the datagram being handled (kept for its capacity).
    src_buf: Vec<u8>,
    /// Each engine peer's address (for `FI_SOURCE`).
    peer_addr: Vec<Option<Address>>,
    /// Engine peer of each normalised RDM address.
    by_key: HashMap<Vec<u8>, PeerId>,
    /// The message being received from each engine peer.
    rx: Vec<Option<RxTarget>>,
    /// Requests and responses complete in this round, carried out after it.
    deferred: Vec<(PeerId, Vec<u8>)>,
    ops: Vec<Option<TxOp>>,
    op_free: Vec<u32>,
    op_gen: u32,
    live: usize,
    m: TagMatcher<IoList, Unexp>,
}

/// Everything of an endpoint; the progress engine holds it weakly.
struct Shared {
    /// Declared first: closed before the buffers in `st` are freed.
    core_ep: CoreEp,
    core_cq: CompletionQueue,
    core_av: AddressVector,
    st: Mutex<St>,
    settings: Settings,
    fmt: AddrFormat,
    me: Address,
    me_bytes: Vec<u8>,
    buf_size: usize,
    inject_max: usize,
    base: Instant,
    engine: Arc<ProgressEngine>,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
    need_src: bool,
    directed: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    /// When progress last ran (ns since `base`), for the watchdog.
    last_progress: AtomicU64,
    _dom: Arc<DomainShared>,
}

/// An `FI_EP_RDM` endpoint of `ofi_rxd` (see the module docs).
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

/// `a` with an unspecified IP replaced by the first up non-loopback interface's
/// address of its family (loopback only without one): a name of an endpoint bound to
/// every interface, made concrete for peers on other hosts.
fn norm_addr(a: &Address) -> Address {
    match a.socket_addr() {
        Some(mut sa) if sa.ip().is_unspecified() => {
            sa.set_ip(ofi_kit::netif::default_ip(sa.is_ipv6()));
            Address::from(sa)
        }
        _ => a.clone(),
    }
}

static NEXT_INSTANCE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

impl Endpoint {
    /// Open an endpoint: the core DGRAM endpoint (at `info.src_addr` if given) with its
    /// AV and CQ, enabled, with the datagram buffers posted.
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
        let mut ci = dom.core_info.clone();
        ci.src_addr.clone_from(&info.src_addr);
        ci.dest_addr = None;
        // The source of every datagram (FI_SOURCE; an unknown one as an error entry
        // with its address, FI_SOURCE_ERR): the engine takes a peer to be the address
        // its datagrams come from, never an address inside a packet.
        ci.caps = Caps::MSG | Caps::SEND | Caps::RECV | Caps::SOURCE | Caps::SOURCE_ERR;
        ci.rx_attr.caps |= Caps::SOURCE | Caps::SOURCE_ERR;
        ci.rx_attr.size = ci.rx_attr.size.max(settings.rx_bufs);
        let core_cq = dom.core.cq_open(&CqAttr {
            size: settings.rx_bufs * 2 + 64,
            ..CqAttr::with_format(CqFormat::Tagged)
        })?;
        let core_av = dom.core.av_open(&AvAttr {
            av_type: AvType::Map,
            ..AvAttr::default()
        })?;
        let core_ep = dom.core.endpoint(&ci)?;
        core_ep.bind(&core_cq, OpFlags::TRANSMIT | OpFlags::RECV)?;
        core_ep.bind_av(&core_av)?;
        core_ep.enable()?;
        let fmt = dom.core_info.addr_format;
        let raw = core_ep.getname()?;
        let me = norm_addr(&Address::from_bytes(fmt, &raw)?);
        let me_bytes = me.to_bytes();
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
            max_unexpected: usize::MAX / 2,
            max_unexpected_bytes: usize::MAX / 2,
            ..MatcherConfig::default()
        });
        let core_max = dom.core_info.ep_attr.max_msg_size.max(proto::HDR_LEN + 64);
        // Packets go to the core with `fi_inject`: none may be longer than its
        // inject_size (udp's equals its max_msg_size; the example unixdgram plugin's is
        // 4096 of 65536, and longer packets were refused, then the peer lost).
        let core_pkt = core_max.min(dom.core_info.tx_attr.inject_size.max(proto::HDR_LEN + 64));
        let cfg = settings.engine_config(core_pkt);
        // Full-size buffers whatever our own segment size: a peer may use a larger one.
        let buf_size = core_max;
        // Session numbers differ between processes, endpoints and runs (a restarted
        // peer at the same address must not look like the old one).
        let seed = std::process::id()
            .wrapping_mul(0x9e37_79b9)
            .wrapping_add(NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
            ^ seed_time();
        let eng = Engine::new(cfg, seed);
        let inject_max = cfg
            .seg_size
            .saturating_sub(proto::FIRST_LEN + MSG_HDR)
            .min(4096);
        let sh = Arc::new(Shared {
            core_ep,
            core_cq,
            core_av,
            st: Mutex::new(St {
                eng,
                bufs: Vec::new(),
                core_addr: Vec::new(),
                src_bytes: Vec::new(),
                src_buf: Vec::new(),
                peer_addr: Vec::new(),
                by_key: HashMap::new(),
                rx: Vec::new(),
                deferred: Vec::new(),
                ops: Vec::new(),
                op_free: Vec::new(),
                op_gen: 1,
                live: 0,
                m,
            }),
            settings,
            fmt,
            me,
            me_bytes,
            buf_size,
            inject_max,
            base: Instant::now(),
            engine: engine.clone(),
            tx_op_flags: default_tx_flags(info.tx_attr.op_flags),
            rx_op_flags: info.rx_attr.op_flags,
            need_src: caps.intersects(Caps::SOURCE | Caps::DIRECTED_RECV),
            directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
            last_progress: AtomicU64::new(0),
            _dom: dom,
        });
        {
            let mut g = lock(&sh.st);
            let st = &mut *g;
            for i in 0..settings.rx_bufs {
                st.bufs.push(vec![0u8; buf_size].into_boxed_slice());
                sh.repost(st, i);
            }
        }
        engine.register(&sh);
        spawn_watchdog(Arc::downgrade(&sh));
        Ok(Endpoint { sh })
    }

    /// The endpoint's address (the core endpoint's name).
    pub fn address(&self) -> &Address {
        &self.sh.me
    }

    /// The engine's counters (packets sent, retransmitted, received, dropped).
    pub fn stats(&self) -> crate::peer::Stats {
        lock(&self.sh.st).eng.stats()
    }
}

/// Append `n` bytes of `iov` from `offset` to `dst` (without zero-filling first).
fn append_from(dst: &mut Vec<u8>, iov: &IoList, offset: usize, n: usize) {
    if n == 0 || offset.saturating_add(n) > iov.total() {
        return;
    }
    dst.reserve(n);
    let at = dst.len();
    // SAFETY: `reserve` made room for `n` more bytes after `at`; the application's
    // buffers are readable for their lengths (C contract) and `offset + n` lies within
    // them (checked above); every one of the `n` bytes is written before `set_len`.
    unsafe {
        iov.gather(offset, dst.as_mut_ptr().add(at), n);
        dst.set_len(at + n);
    }
}

/// The parts of `St` streaming delivery needs while the engine is borrowed.
struct RxParts<'a> {
    m: &'a mut TagMatcher<IoList, Unexp>,
    rx: &'a mut Vec<Option<RxTarget>>,
    peer_addr: &'a mut Vec<Option<Address>>,
    deferred: &'a mut Vec<(PeerId, Vec<u8>)>,
}

/// The posted receive an incoming message goes to, with its placement and whether a
/// multi-receive buffer was released by it.
fn match_recv(
    m: &mut TagMatcher<IoList, Unexp>,
    inc: &Incoming,
) -> Option<(PostedRecv<IoList>, Placement, bool)> {
    match m.match_incoming(inc) {
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
    }
}

/// How often the watchdog looks at an endpoint with timers pending.
const WATCHDOG_PERIOD: Duration = Duration::from_millis(1);
/// How often it looks at an endpoint with nothing pending.
const WATCHDOG_IDLE: Duration = Duration::from_millis(10);

/// The watchdog: with manual progress an application may stop calling into the provider
/// as soon as it has its completions, while its peer still waits for an acknowledgement
/// (or a retransmission is due). When progress has not run for a watchdog period and a
/// timer of the engine is due, the watchdog runs one round. It sleeps otherwise, and
/// ends when the endpoint is closed.
fn spawn_watchdog(w: Weak<Shared>) {
    let r = std::thread::Builder::new()
        .name("ofi_rxd-watchdog".into())
        .spawn(move || {
            let mut nap = WATCHDOG_PERIOD;
            loop {
                std::thread::sleep(nap);
                let Some(sh) = w.upgrade() else {
                    return;
                };
                let Some(act) = sh.active.get() else {
                    continue;
                };
                let now = sh.now();
                let last = sh.last_progress.load(AtomicOrdering::Relaxed);
                if now.saturating_sub(last) < WATCHDOG_PERIOD.as_nanos() as u64 {
                    continue;
                }
                // Busy (someone is progressing): look again soon.
                let deadline = match sh.st.try_lock() {
                    Ok(g) => g.eng.poll_timeout(),
                    Err(_) => Some(u64::MAX),
                };
                nap = if deadline.is_none() {
                    WATCHDOG_IDLE
                } else {
                    WATCHDOG_PERIOD
                };
                if deadline.is_some_and(|d| d <= now) {
                    sh.progress_all(act);
                }
            }
        });
    if let Err(e) = r {
        ofi_core::ofi_warn!(NAME, "ep_ctrl", "no watchdog thread: {e}");
    }
}

fn seed_time() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ d.as_secs() as u32)
        .unwrap_or(0)
}

fn default_tx_flags(f: OpFlags) -> OpFlags {
    f - OpFlags::DELIVERY_COMPLETE
}

// ---------------------------------------------------------------------------------------
// Shared state: engine plumbing (completions are the kit's `Bound::complete_*`).

impl Shared {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Post datagram buffer `i` on the core endpoint again.
    fn repost(&self, st: &mut St, i: usize) {
        let Some(b) = st.bufs.get_mut(i) else {
            return;
        };
        let p = b.as_mut_ptr();
        let size = self.buf_size;
        // SAFETY: the buffer is owned by `St` and outlives the core endpoint (declared
        // first in `Shared`, so closed first); it is not touched while posted.
        let r = unsafe {
            self.core_ep
                .recv(p, size, std::ptr::null_mut(), ADDR_UNSPEC, i)
        };
        if let Err(e) = r {
            ofi_core::ofi_warn!(NAME, "ep_data", "posting a datagram buffer: {e}");
        }
    }

    /// Hand the engine's packets to the core.
    fn flush(&self, st: &mut St, now: u64) -> usize {
        let St { eng, core_addr, .. } = st;
        let fmt = self.fmt;
        let av = &self.core_av;
        let ep = &self.core_ep;
        eng.poll_transmit(now, TX_BUDGET, |peer, addr, pkt| {
            if peer == NO_PEER {
                // A CHALLENGE to the source of a CONNECT: no peer, no state kept (the
                // address is in the core AV for the send only; inserts are counted, so
                // this never drops a peer's entry).
                let Some(f) = Address::from_bytes(fmt, addr)
                    .and_then(|a| av.insert(&[a]))
                    .ok()
                    .and_then(|v| v.first().copied())
                else {
                    return true;
                };
                // SAFETY: `pkt` is valid for the call; inject copies it.
                let r = unsafe { ep.inject_raw(pkt.as_ptr(), pkt.len(), f) };
                let _ = av.remove(&[f], 0);
                return !matches!(r, Err(e) if e.code() == Errno::EAGAIN);
            }
            let i = peer as usize;
            if core_addr.len() <= i {
                core_addr.resize(i + 1, None);
            }
            let fi = match core_addr[i] {
                Some(f) => f,
                None => {
                    let r = Address::from_bytes(fmt, addr).and_then(|a| av.insert(&[a]));
                    match r.ok().and_then(|v| v.first().copied()) {
                        Some(f) => {
                            core_addr[i] = Some(f);
                            f
                        }
                        None => {
                            // Not an address of the core: the packet is lost (the engine
                            // will give up on the peer).
                            ofi_core::ofi_info!(NAME, "ep_data", "peer {peer}: bad address");
                            return true;
                        }
                    }
                }
            };
            // SAFETY: `pkt` is valid for the call; inject copies it.
            match unsafe { ep.inject_raw(pkt.as_ptr(), pkt.len(), fi) } {
                Ok(()) => true,
                Err(e) if e.code() == Errno::EAGAIN => false,
                Err(e) => {
                    ofi_core::ofi_debug!(NAME, "ep_data", "sending a packet: {e}");
                    true
                }
            }
        })
    }

    /// The engine peer for RDM address `dest`.
    fn peer_of(&self, act: &Active, st: &mut St, dest: u64) -> Result<PeerId> {
        let a = act.av.lookup(dest).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("ofi_rxd: destination {dest:#x} is not in the AV"),
            )
        })?;
        let key = norm_addr(&a).to_bytes();
        if let Some(&p) = st.by_key.get(&key) {
            return Ok(p);
        }
        let p = st.eng.peer_for_addr(&key);
        st.by_key.insert(key, p);
        Ok(p)
    }

    fn src_of(&self, act: &Active, st: &mut St, peer: PeerId) -> u64 {
        let St { eng, peer_addr, .. } = st;
        self.src_for(act, peer_addr, peer, eng.peer_addr(peer))
    }

    /// The fabric address (in the bound AV) of engine peer `peer` at `addr`, for
    /// `FI_SOURCE`; `cache` keeps the parsed addresses.
    fn src_for(
        &self,
        act: &Active,
        cache: &mut Vec<Option<Address>>,
        peer: PeerId,
        addr: &[u8],
    ) -> u64 {
        if !self.need_src {
            return ADDR_NOTAVAIL;
        }
        let i = peer as usize;
        if cache.len() <= i {
            cache.resize(i + 1, None);
        }
        if cache[i].is_none() {
            cache[i] = Address::from_bytes(self.fmt, addr).ok();
        }
        match &cache[i] {
            Some(a) => act.av.source_addr(a),
            None => ADDR_NOTAVAIL,
        }
    }

    fn alloc_op(st: &mut St, mut op: TxOp) -> u64 {
        st.op_gen = st.op_gen.wrapping_add(1).max(1);
        op.gen = st.op_gen;
        st.live += 1;
        let gen = op.gen;
        let i = match st.op_free.pop() {
            Some(i) => {
                st.ops[i as usize] = Some(op);
                i
            }
            None => {
                st.ops.push(Some(op));
                (st.ops.len() - 1) as u32
            }
        };
        token(i, gen)
    }

    fn take_op(st: &mut St, t: u64) -> Option<TxOp> {
        let (i, gen) = split_token(t);
        let slot = st.ops.get_mut(i as usize)?;
        if slot.as_ref().map(|o| o.gen) != Some(gen) {
            return None;
        }
        let op = slot.take()?;
        st.op_free.push(i);
        st.live = st.live.saturating_sub(1);
        Some(op)
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
        if len > MAX_MSG_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxd: message of {len} bytes exceeds max_msg_size {MAX_MSG_SIZE}"),
            ));
        }
        let cq_flags = (OpFlags::SEND
            | if tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            })
        .bits();
        let want = !inject
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let mut g = lock(&self.st);
        let st = &mut *g;
        if st.live >= self.settings.tx_size {
            drop(g);
            self.engine.kick();
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let peer = self.peer_of(act, st, dest)?;
        let t = Self::alloc_op(
            st,
            TxOp {
                gen: 0,
                ctx,
                flags: cq_flags,
                want,
                remote: None,
            },
        );
        let h = msg_hdr(tagged, tag, data);
        let now = self.now();
        let r = st
            .eng
            .send_with(peer, t, MSG_HDR + len, now, |off, n, dst| {
                let mut o = off;
                let mut left = n;
                if o < MSG_HDR {
                    let k = (MSG_HDR - o).min(left);
                    dst.extend_from_slice(&h[o..o + k]);
                    left -= k;
                    o += k;
                }
                append_from(dst, &iov, o - MSG_HDR, left);
            });
        if r.is_err() {
            let _ = Self::take_op(st, t);
            return Err(Error::new(Errno::EMSGSIZE, "ofi_rxd: message too long"));
        }
        self.flush(st, now);
        Ok(())
    }

    /// Handle what the engine reported.
    fn handle_events(&self, act: &Active, st: &mut St) -> usize {
        let mut n = 0;
        while let Some(ev) = st.eng.poll_event() {
            n += 1;
            match ev {
                Event::Message { peer, data } => self.on_message(act, st, peer, data),
                Event::Sent { token } => {
                    // RMA and atomics complete with their response instead.
                    let (i, gen) = split_token(token);
                    let remote = st
                        .ops
                        .get(i as usize)
                        .and_then(Option::as_ref)
                        .is_some_and(|o| o.gen == gen && o.remote.is_some());
                    if !remote {
                        if let Some(op) = Self::take_op(st, token) {
                            act.complete_tx(op.ctx, op.flags, op.want, None);
                        }
                    }
                }
                Event::Failed { token, why } => {
                    if let Some(op) = Self::take_op(st, token) {
                        let e = match why {
                            Failure::Lost | Failure::Protocol => Errno::EIO,
                            Failure::Reset => Errno::ECONNRESET,
                        };
                        act.complete_tx(op.ctx, op.flags, true, Some(e));
                    }
                }
                Event::PeerLost { peer, why } => {
                    // Its operations failed (Failed events before this one); those whose
                    // request it had acknowledged but not answered (RMA, atomics) fail
                    // now; a message being received from it is abandoned; the core
                    // address stays for a later connection.
                    let waiting: Vec<u64> = st
                        .ops
                        .iter()
                        .enumerate()
                        .filter_map(|(i, o)| {
                            let o = o.as_ref()?;
                            o.remote.as_ref().filter(|r| r.peer == peer)?;
                            Some(token(i as u32, o.gen))
                        })
                        .collect();
                    for t in waiting {
                        if let Some(op) = Self::take_op(st, t) {
                            act.complete_tx(op.ctx, op.flags, true, Some(Errno::EIO));
                        }
                    }
                    if let Some(t) = st.rx.get_mut(peer as usize).and_then(Option::take) {
                        self.abort_rx(act, t, Errno::EIO);
                    }
                    ofi_core::ofi_info!(NAME, "ep_ctrl", "peer {peer}: connection ended ({why:?})");
                }
                Event::PeerReclaimed { peer } => {
                    // The slot goes to a new peer: forget the old one's core address.
                    let i = peer as usize;
                    if let Some(f) = st.core_addr.get_mut(i).and_then(Option::take) {
                        let _ = self.core_av.remove(&[f], 0);
                        if let Some(e) = st.src_bytes.get_mut((f & 0xffff_ffff) as usize) {
                            *e = None;
                        }
                    }
                    if let Some(a) = st.peer_addr.get_mut(i) {
                        *a = None;
                    }
                    if let Some(t) = st.rx.get_mut(i).and_then(Option::take) {
                        self.abort_rx(act, t, Errno::EIO);
                    }
                }
            }
        }
        n
    }

    fn on_message(&self, act: &Active, st: &mut St, peer: PeerId, data: Vec<u8>) {
        let Some((op, tag, cqdata)) = parse_msg_hdr(&data) else {
            ofi_core::ofi_debug!(NAME, "ep_data", "peer {peer}: malformed message dropped");
            return;
        };
        if op > OP_TAGGED {
            self.on_remote(act, st, peer, op, tag, cqdata, &data);
            return;
        }
        let src = self.src_of(act, st, peer);
        self.match_whole(act, &mut st.m, src, data);
    }

    /// Match a whole (message or tagged) message `data` from `src`: copy it into a
    /// posted receive, or keep it as unexpected.
    fn match_whole(
        &self,
        act: &Active,
        m: &mut TagMatcher<IoList, Unexp>,
        src: u64,
        data: Vec<u8>,
    ) {
        let Some((op, tag, cqdata)) = parse_msg_hdr(&data) else {
            return;
        };
        let tagged = op == OP_TAGGED;
        let inc = Incoming {
            src,
            tag,
            len: data.len() - MSG_HDR,
            data: cqdata,
            tagged,
        };
        match match_recv(m, &inc) {
            Some((recv, place, rel)) => {
                let payload = &data[MSG_HDR..];
                let n = place.len.min(payload.len());
                // SAFETY: the receive buffer is the application's, writable for its
                // length (the placement lies within it); `payload` has n bytes.
                unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                act.complete_rx(&recv, place, &inc, rel, None);
            }
            None => {
                if m.push_unexpected(inc, data).is_err() {
                    // At most 5 lines per sender per 10 s.
                    static LOG: OnceLock<ofi_kit::diag::RateLimit<u64>> = OnceLock::new();
                    let log = LOG.get_or_init(|| {
                        ofi_kit::diag::RateLimit::new(5, Duration::from_secs(10), 1024)
                    });
                    if let Some(n) = log.admit(&src, Instant::now()) {
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "unexpected message dropped (limit){}",
                            ofi_kit::diag::suppressed_note(n)
                        );
                    }
                }
            }
        }
    }

    /// Whether an unexpected message of `total` bytes may be gathered now: what the
    /// matcher holds plus what is being gathered stays within `unexp_msgs` and
    /// `unexp_bytes` (one message of any size when nothing is held, so none waits for
    /// ever).
    fn room_for_unexpected(
        &self,
        m: &TagMatcher<IoList, Unexp>,
        rx: &[Option<RxTarget>],
        total: usize,
    ) -> bool {
        let (mut msgs, mut bytes) = (m.unexpected_len(), m.unexpected_bytes());
        for t in rx.iter().flatten() {
            if let RxTarget::Buffer {
                total, unexp: true, ..
            } = t
            {
                msgs += 1;
                bytes = bytes.saturating_add(*total);
            }
        }
        msgs == 0
            || (msgs < self.settings.unexp_msgs
                && bytes.saturating_add(total) <= self.settings.unexp_bytes)
    }

    /// A piece of a message from the engine (streaming delivery): place it. `false`
    /// refuses a first piece (receiver not ready: no room for another unexpected
    /// message; the engine has its sender offer it again later).
    fn on_seg(&self, act: &Active, parts: RxParts<'_>, seg: Seg<'_>) -> bool {
        let RxParts {
            m,
            rx,
            peer_addr,
            deferred,
        } = parts;
        let i = seg.peer as usize;
        if rx.len() <= i {
            rx.resize_with(i + 1, || None);
        }
        if seg.first {
            // A message left open belongs to a connection that ended.
            if let Some(old) = rx[i].take() {
                self.abort_rx(act, old, Errno::EIO);
            }
            let hdr = if seg.total >= MSG_HDR {
                parse_msg_hdr(seg.data)
            } else {
                None
            };
            let target = match hdr {
                Some((op, tag, cqdata)) if op <= OP_TAGGED => {
                    let inc = Incoming {
                        src: self.src_for(act, peer_addr, seg.peer, seg.addr),
                        tag,
                        len: seg.total - MSG_HDR,
                        data: cqdata,
                        tagged: op == OP_TAGGED,
                    };
                    match match_recv(m, &inc) {
                        Some((recv, place, released)) => RxTarget::Recv {
                            recv,
                            place,
                            released,
                            inc,
                        },
                        None if !self.room_for_unexpected(m, rx, seg.total) => return false,
                        None => RxTarget::buffer(seg.total, true),
                    }
                }
                _ => RxTarget::buffer(seg.total, false),
            };
            rx[i] = Some(target);
        }
        let Some(target) = rx[i].as_mut() else {
            return true;
        };
        match target {
            RxTarget::Recv { recv, place, .. } => {
                // Message offset → receive offset (the header is not delivered).
                let (skip, at) = if seg.offset < MSG_HDR {
                    (MSG_HDR - seg.offset, 0)
                } else {
                    (0, seg.offset - MSG_HDR)
                };
                let data = seg.data.get(skip..).unwrap_or(&[]);
                if at < place.len {
                    let n = (place.len - at).min(data.len());
                    // SAFETY: the receive buffer is the application's, writable for its
                    // length; [place.offset + at, + n) lies within the placement.
                    unsafe { recv.buf.scatter(place.offset + at, data.as_ptr(), n) };
                }
            }
            RxTarget::Buffer { data, .. } => data.extend_from_slice(seg.data),
        }
        if !seg.last {
            return true;
        }
        match rx[i].take() {
            Some(RxTarget::Recv {
                recv,
                place,
                released,
                inc,
            }) => act.complete_rx(&recv, place, &inc, released, None),
            Some(RxTarget::Buffer { data: v, .. }) => match parse_msg_hdr(&v) {
                Some((op, ..)) if op <= OP_TAGGED => {
                    let src = self.src_for(act, peer_addr, seg.peer, seg.addr);
                    self.match_whole(act, m, src, v);
                }
                Some(_) => deferred.push((seg.peer, v)),
                None => {
                    ofi_core::ofi_debug!(
                        NAME,
                        "ep_data",
                        "peer {}: malformed message dropped",
                        seg.peer
                    );
                }
            },
            None => {}
        }
        true
    }

    /// A message being received will not complete: its receive (if one matched) fails.
    fn abort_rx(&self, act: &Active, t: RxTarget, e: Errno) {
        if let RxTarget::Recv {
            recv,
            place,
            released,
            inc,
        } = t
        {
            act.complete_rx(&recv, place, &inc, released, Some(e));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver_unexp(
        &self,
        act: &Active,
        _st: &mut St,
        recv: PostedRecv<IoList>,
        place: Placement,
        inc: &Incoming,
        payload: Unexp,
        released: bool,
    ) {
        let data = payload.get(MSG_HDR..).unwrap_or(&[]);
        let n = place.len.min(data.len());
        // SAFETY: as in on_message.
        unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
        act.complete_rx(&recv, place, inc, released, None);
    }

    fn discard_unexp(&self, _st: &mut St, _payload: Unexp) {}

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

// ---------------------------------------------------------------------------------------
// Progress.

impl Shared {
    fn progress_cq(&self, act: &Active, st: &mut St, now: u64) -> usize {
        let mut buf = [CqTaggedEntry::default(); CQ_BATCH];
        let mut from = [ADDR_NOTAVAIL; CQ_BATCH];
        let mut n = 0;
        for _ in 0..CQ_ROUNDS {
            match self.core_cq.readfrom(&mut buf, &mut from) {
                Ok(k) => {
                    for (e, &f) in buf[..k].iter().zip(&from[..k]) {
                        let i = e.op_context;
                        if e.flags & OpFlags::RECV.bits() == 0 {
                            continue;
                        }
                        if i < st.bufs.len() {
                            // (A buffer kept across packets: no allocation per datagram.)
                            let mut src = std::mem::take(&mut st.src_buf);
                            self.src_of_core(st, f, &mut src);
                            self.take_packet(act, st, i, e.len, &src, now);
                            st.src_buf = src;
                            self.repost(st, i);
                        }
                    }
                    n += k;
                    if k < CQ_BATCH {
                        break;
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    if let Ok(ce) = self.core_cq.readerr_owned(0) {
                        if ce.flags & OpFlags::RECV.bits() != 0 && ce.op_context < st.bufs.len() {
                            if ce.err == Errno::EADDRNOTAVAIL {
                                // A datagram from a source not in the core AV (a first
                                // CONNECT): its source is in the error data.
                                let src = Address::from_bytes(self.fmt, &ce.err_data)
                                    .map(|a| norm_addr(&a).to_bytes())
                                    .unwrap_or_default();
                                self.take_packet(act, st, ce.op_context, ce.len, &src, now);
                            }
                            // (Else a truncated or failed datagram: not one of ours.)
                            self.repost(st, ce.op_context);
                        }
                    }
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Write into `out` the address (engine form) of core AV entry `f` that sent a
    /// datagram (nothing if unknown: the engine then takes nothing from it).
    fn src_of_core(&self, st: &mut St, f: u64, out: &mut Vec<u8>) {
        out.clear();
        if f == ADDR_NOTAVAIL {
            return;
        }
        let i = (f & 0xffff_ffff) as usize;
        if let Some(Some((g, b))) = st.src_bytes.get(i) {
            if *g == f {
                out.extend_from_slice(b);
                return;
            }
        }
        let Ok(a) = self.core_av.lookup(f) else {
            return;
        };
        let b = norm_addr(&a).to_bytes();
        out.extend_from_slice(&b);
        if i < (1 << 20) {
            if st.src_bytes.len() <= i {
                st.src_bytes.resize(i + 1, None);
            }
            st.src_bytes[i] = Some((f, b));
        }
    }

    /// Feed datagram buffer `i` (`len` bytes) to the engine, placing message pieces as
    /// they come; then handle its events (a lost peer's open message is abandoned before
    /// the next packet) and the requests it completed.
    fn take_packet(&self, act: &Active, st: &mut St, i: usize, len: usize, src: &[u8], now: u64) {
        {
            let St {
                eng,
                bufs,
                m,
                rx,
                peer_addr,
                deferred,
                ..
            } = st;
            let b = &bufs[i];
            let pkt = &b[..len.min(b.len())];
            eng.handle_packet_streaming(src, pkt, now, &mut |seg: Seg<'_>| {
                let parts = RxParts {
                    m: &mut *m,
                    rx: &mut *rx,
                    peer_addr: &mut *peer_addr,
                    deferred: &mut *deferred,
                };
                self.on_seg(act, parts, seg)
            });
        }
        self.handle_events(act, st);
        if !st.deferred.is_empty() {
            for (peer, v) in std::mem::take(&mut st.deferred) {
                self.on_message(act, st, peer, v);
            }
        }
    }

    fn progress_all(&self, act: &Active) -> usize {
        let mut g = lock(&self.st);
        let st = &mut *g;
        let now = self.now();
        self.last_progress.store(now, AtomicOrdering::Relaxed);
        let mut n = self.progress_cq(act, st, now);
        st.eng.handle_timeout(now);
        n += self.handle_events(act, st);
        n += self.flush(st, now);
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

// ---------------------------------------------------------------------------------------
// RMA and atomics: requests carried as messages, carried out at the target against the
// domain's MR table, answered with a response that completes the initiator's operation.

impl Shared {
    /// Start a remote operation: a request message of `op` with `req`, whose payload is
    /// `payload` (gathered from the application's buffers at the call).
    #[allow(clippy::too_many_arguments)]
    fn remote(
        &self,
        act: &Active,
        dest: u64,
        ctx: usize,
        op: u8,
        req: RmaReq,
        data: Option<u64>,
        payload: &[IoList],
        result: Option<IoList>,
        expect: usize,
        cq_flags: u64,
        want: bool,
    ) -> Result<()> {
        let plen: usize = payload.iter().map(IoList::total).sum();
        let mut g = lock(&self.st);
        let st = &mut *g;
        if st.live >= self.settings.tx_size {
            drop(g);
            self.engine.kick();
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let peer = self.peer_of(act, st, dest)?;
        let t = Self::alloc_op(
            st,
            TxOp {
                gen: 0,
                ctx,
                flags: cq_flags,
                want,
                remote: Some(Remote {
                    peer,
                    result,
                    expect,
                }),
            },
        );
        let mut head = Vec::with_capacity(MSG_HDR + RMA_HDR);
        head.extend_from_slice(&op_hdr(op, t, data));
        head.extend_from_slice(&req.bytes());
        let mut body = vec![0u8; plen];
        let mut at = 0;
        for l in payload {
            let n = l.total();
            // SAFETY: the application's buffers are readable for their lengths during
            // the call (C contract); `body[at..]` has `n` bytes.
            unsafe { l.gather(0, body[at..].as_mut_ptr(), n) };
            at += n;
        }
        let now = self.now();
        let hl = head.len();
        let r = st.eng.send_with(peer, t, hl + plen, now, |off, n, dst| {
            let mut o = off;
            let mut left = n;
            if o < hl {
                let k = (hl - o).min(left);
                dst.extend_from_slice(&head[o..o + k]);
                left -= k;
                o += k;
            }
            dst.extend_from_slice(&body[o - hl..o - hl + left]);
        });
        if r.is_err() {
            let _ = Self::take_op(st, t);
            return Err(Error::new(Errno::EMSGSIZE, "ofi_rxd: request too long"));
        }
        self.flush(st, now);
        Ok(())
    }

    /// A request or response arrived from `peer`.
    #[allow(clippy::too_many_arguments)]
    fn on_remote(
        &self,
        act: &Active,
        st: &mut St,
        peer: PeerId,
        op: u8,
        rid: u64,
        cqdata: Option<u64>,
        msg: &[u8],
    ) {
        if op == OP_RESP {
            self.on_response(act, st, peer, rid, cqdata.unwrap_or(0), &msg[MSG_HDR..]);
            return;
        }
        let Some(req) = RmaReq::parse(&msg[MSG_HDR..]) else {
            ofi_core::ofi_debug!(NAME, "ep_data", "peer {peer}: short RMA request");
            return;
        };
        let payload = &msg[MSG_HDR + RMA_HDR..];
        let (status, out) = match op {
            OP_WRITE => (self.target_write(act, &req, payload, cqdata), Vec::new()),
            OP_READ => match self.target_read(&req) {
                Ok(v) => (0, v),
                Err(e) => (e.0, Vec::new()),
            },
            _ => match self.target_atomic(&req, payload) {
                Ok(v) => (0, v),
                Err(e) => (e.0, Vec::new()),
            },
        };
        let mut m = Vec::with_capacity(MSG_HDR + out.len());
        m.extend_from_slice(&op_hdr(OP_RESP, rid, Some(u64::from(status as u32))));
        m.extend_from_slice(&out);
        let now = self.now();
        if st.eng.send(peer, NO_TOKEN, &m, now).is_err() {
            ofi_core::ofi_warn!(NAME, "ep_data", "peer {peer}: response not sent");
        }
    }

    fn on_response(
        &self,
        act: &Active,
        st: &mut St,
        peer: PeerId,
        rid: u64,
        status: u64,
        data: &[u8],
    ) {
        let (i, gen) = split_token(rid);
        let ok = st
            .ops
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|o| o.gen == gen && o.remote.as_ref().is_some_and(|r| r.peer == peer));
        if !ok {
            ofi_core::ofi_debug!(NAME, "ep_data", "peer {peer}: stray response");
            return;
        }
        let Some(op) = Self::take_op(st, rid) else {
            return;
        };
        // The peer's status (the low 32 bits, signed): an FI code or FI_EPROTO.
        let mut err = Errno::from_peer_status(i64::from(status as u32 as i32));
        if let Some(r) = &op.remote {
            if err.is_none() {
                if data.len() != r.expect {
                    err = Some(Errno::EIO);
                } else if let Some(res) = &r.result {
                    let n = data.len().min(res.total());
                    // SAFETY: the result buffers are the application's, writable for
                    // their lengths until this completion (C contract).
                    unsafe { res.scatter(0, data.as_ptr(), n) };
                }
            }
        }
        let want = op.want || err.is_some();
        act.complete_tx(op.ctx, op.flags, want, err);
    }

    /// The target region of a request, as one list of local buffers.
    fn region(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        access: OpFlags,
    ) -> std::result::Result<(ofi_kit::mr::RemoteRegion, IoList), Errno> {
        let region = self
            ._dom
            .mr
            .lookup_remote(key, addr, len, access)
            .map_err(|e| e.code())?;
        let mut segs = [(0usize, 0usize); IOV_LIMIT];
        let mut n = 0;
        for seg in region.segments() {
            if n == segs.len() {
                return Err(Errno::EINVAL);
            }
            segs[n] = seg;
            n += 1;
        }
        Ok((region, IoList::from_pairs(&segs[..n])))
    }

    fn target_write(&self, act: &Active, req: &RmaReq, payload: &[u8], cqdata: Option<u64>) -> i32 {
        if req.len != payload.len() as u64 {
            return Errno::EINVAL.0;
        }
        let (region, segs) =
            match self.region(req.key, req.addr, payload.len(), OpFlags::REMOTE_WRITE) {
                Ok(r) => r,
                Err(e) => return e.0,
            };
        // SAFETY: the segments are the registered region's memory, checked by the MR
        // table for `payload.len()` bytes of remote write access.
        unsafe { segs.scatter(0, payload.as_ptr(), payload.len()) };
        region.count_access();
        if let (Some(d), Some(b)) = (cqdata, &act.rxcq) {
            let e = CqTaggedEntry {
                op_context: 0,
                flags: (OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA).bits(),
                len: payload.len(),
                buf: std::ptr::null_mut(),
                data: d,
                tag: 0,
            };
            let _ = b.cq.push(&e, ADDR_NOTAVAIL);
        }
        0
    }

    fn target_read(&self, req: &RmaReq) -> std::result::Result<Vec<u8>, Errno> {
        let len = usize::try_from(req.len).map_err(|_| Errno::EINVAL)?;
        if len > MAX_MSG_SIZE {
            return Err(Errno::EMSGSIZE);
        }
        let (region, segs) = self.region(req.key, req.addr, len, OpFlags::REMOTE_READ)?;
        let mut v = vec![0u8; len];
        // SAFETY: the segments are the registered region's memory, checked for `len`
        // bytes of remote read access; `v` has `len` bytes.
        unsafe { segs.gather(0, v.as_mut_ptr(), len) };
        region.count_access();
        Ok(v)
    }

    fn target_atomic(&self, req: &RmaReq, payload: &[u8]) -> std::result::Result<Vec<u8>, Errno> {
        let dt = Datatype::from_raw(u32::from(req.dt)).ok_or(Errno::EINVAL)?;
        let op = AtomicOp::from_raw(u32::from(req.op)).ok_or(Errno::EINVAL)?;
        let kind = kind_of(req.kind).ok_or(Errno::EINVAL)?;
        let count = usize::try_from(req.len).map_err(|_| Errno::EINVAL)?;
        ofi_kit::atomic::valid(op, dt, kind).map_err(|e| e.code())?;
        let bytes = count.checked_mul(dt.size()).ok_or(Errno::EMSGSIZE)?;
        if bytes > crate::MAX_ATOMIC_BYTES {
            return Err(Errno::EMSGSIZE);
        }
        let fetch = kind != AtomicKind::Base;
        let access = if op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else if fetch {
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE
        } else {
            OpFlags::REMOTE_WRITE
        };
        let operand_len = if op == AtomicOp::AtomicRead { 0 } else { bytes };
        let compare_len = if kind == AtomicKind::Compare {
            bytes
        } else {
            0
        };
        if payload.len() != operand_len + compare_len {
            return Err(Errno::EINVAL);
        }
        let (region, segs) = self.region(req.key, req.addr, bytes, access)?;
        let seg = match segs.slice() {
            [one] => *one,
            [] if bytes == 0 => (0, 0),
            _ => return Err(Errno::EINVAL),
        };
        let (operand, compare) = payload.split_at(operand_len);
        let mut result = vec![0u8; if fetch { bytes } else { 0 }];
        let target: &mut [u8] = if bytes == 0 {
            &mut []
        } else {
            // SAFETY: the MR table checked that [seg.0, seg.0 + bytes) lies inside a live
            // registration granting this access; atomics through this process are
            // serialised by ATOMIC_LOCKS.
            unsafe { std::slice::from_raw_parts_mut(seg.0 as *mut u8, bytes) }
        };
        let locks = ATOMIC_LOCKS.get_or_init(AtomicLocks::new);
        locks
            .apply(
                seg.0 as u64,
                op,
                dt,
                kind,
                target,
                operand,
                compare,
                &mut result,
                count,
            )
            .map_err(|e| e.code())?;
        region.count_access();
        Ok(result)
    }
}

/// Atomics applied by this process (every rxd endpoint) are serialised per address
/// stripe.
static ATOMIC_LOCKS: OnceLock<AtomicLocks> = OnceLock::new();

fn ioc_list(v: &[Ioc], size: usize) -> Result<IoList> {
    if v.len() > IOV_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("ofi_rxd: {} ioc entries, the limit is {IOV_LIMIT}", v.len()),
        ));
    }
    let mut pairs = [(0usize, 0usize); IOV_LIMIT];
    for (d, e) in pairs.iter_mut().zip(v) {
        let n = e
            .count
            .checked_mul(size)
            .ok_or_else(|| Error::new(Errno::EINVAL, "ofi_rxd: atomic element count overflows"))?;
        *d = (e.addr as usize, n);
    }
    Ok(IoList::from_pairs(&pairs[..v.len()]))
}

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        Arc::as_ptr(&self.sh) as usize as u64
    }
}

impl ofi_kit::layered::LayeredEndpoint for Endpoint {
    const NAME: &'static str = NAME;

    fn bindings(&self) -> &Mutex<Setup> {
        &self.sh.setup
    }

    fn bound(&self) -> &OnceLock<Active> {
        &self.sh.active
    }

    fn bind_rules(&self) -> &BindRules {
        &BIND_RULES
    }

    fn engine(&self) -> &ProgressEngine {
        &self.sh.engine
    }

    fn with_matcher<R>(&self, f: impl FnOnce(&mut dyn ofi_kit::layered::RecvQueue) -> R) -> R {
        f(&mut lock(&self.sh.st).m)
    }

    fn tx_room(&self) -> usize {
        let st = lock(&self.sh.st);
        self.sh.settings.tx_size.saturating_sub(st.live)
    }

    fn name_bytes(&self) -> &[u8] {
        &self.sh.me_bytes
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.sh.tx_op_flags
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.sh.rx_op_flags
    }

    fn directed(&self) -> bool {
        self.sh.directed
    }
}

impl EndpointOps<Fabric> for Endpoint {
    ofi_kit::layered_endpoint_ops!(Fabric);
}

impl ofi_kit::dataops::DataPath for Endpoint {
    ofi_kit::layered_data_path!();

    fn inject_size(&self) -> usize {
        self.sh.inject_max
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
        let iov = local.bufs;
        let l = IoList::from_iov(iov, NAME)?;
        let total = l.total();
        if total != rma.len {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "ofi_rxd: {total} local bytes for a remote buffer of {}",
                    rma.len
                ),
            ));
        }
        if total > MAX_MSG_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxd: RMA of {total} bytes exceeds max_msg_size {MAX_MSG_SIZE}"),
            ));
        }
        if inject || flags.contains(OpFlags::INJECT) {
            self.check_inject(OpFlags::INJECT, total)?;
        }
        let want = !inject
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let req = RmaReq {
            key: rma.key,
            addr: rma.addr,
            len: total as u64,
            dt: 0,
            op: 0,
            kind: 0,
        };
        if read {
            self.sh.remote(
                act,
                peer,
                ctx,
                OP_READ,
                req,
                None,
                &[],
                Some(l),
                total,
                (OpFlags::RMA | OpFlags::READ).bits(),
                want,
            )
        } else {
            self.sh.remote(
                act,
                peer,
                ctx,
                OP_WRITE,
                req,
                data,
                &[l],
                None,
                0,
                (OpFlags::RMA | OpFlags::WRITE).bits(),
                want,
            )
        }
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
        let (iov, cmp, res) = (operands.bufs, compare.bufs, result.bufs);
        ofi_kit::atomic::valid(op, dt, kind)?;
        let size = dt.size();
        let count: usize = iov.iter().map(|v| v.count).sum();
        let count = if op == AtomicOp::AtomicRead && count == 0 {
            res.iter().map(|v| v.count).sum()
        } else {
            count
        };
        if count != rma.count {
            return Err(Error::new(
                Errno::EINVAL,
                "ofi_rxd: local and remote atomic element counts differ",
            ));
        }
        let bytes = count.saturating_mul(size);
        if bytes > crate::MAX_ATOMIC_BYTES {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxd: atomic of {bytes} bytes is too large"),
            ));
        }
        let operand = if op == AtomicOp::AtomicRead {
            IoList::one(0, 0)
        } else {
            ioc_list(iov, size)?
        };
        let compare = ioc_list(cmp, size)?;
        if kind == AtomicKind::Compare && compare.total() != bytes {
            return Err(Error::new(
                Errno::EINVAL,
                "ofi_rxd: compare buffer and operand element counts differ",
            ));
        }
        let result = if kind == AtomicKind::Base {
            None
        } else {
            let r = ioc_list(res, size)?;
            if r.total() != bytes {
                return Err(Error::new(
                    Errno::EINVAL,
                    "ofi_rxd: result buffer and operand element counts differ",
                ));
            }
            Some(r)
        };
        let want = !inject
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let cq_flags = match kind {
            AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
            _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
        };
        let req = RmaReq {
            key: rma.key,
            addr: rma.addr,
            len: count as u64,
            dt: dt.to_raw() as u8,
            op: op.to_raw() as u8,
            kind: kind_code(kind),
        };
        let payload: Vec<IoList> = if kind == AtomicKind::Compare {
            vec![operand, compare]
        } else {
            vec![operand]
        };
        let expect = if result.is_some() { bytes } else { 0 };
        self.sh.remote(
            act, peer, ctx, OP_ATOMIC, req, None, &payload, result, expect, cq_flags, want,
        )
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(crate::MAX_ATOMIC_BYTES / dt.size().max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        assert_eq!(split_token(token(5, 77)), (5, 77));
        assert_eq!(split_token(token(u32::MAX, 1)), (u32::MAX, 1));
    }
}
