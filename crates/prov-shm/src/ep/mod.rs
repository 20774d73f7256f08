//! The endpoint: messages, tagged messages, RMA and atomics over the rings of
//! [`crate::region`].
//!
//! # Structure
//!
//! An endpoint owns its region (created at open, unlinked at close). Its send side
//! (`Tx`, one mutex) holds a connection per AV index it has sent to: the peer's mapped
//! region, the ring it claimed there, the ring's producer state and the return ring's
//! consumer state, and a FIFO of sends that could not be posted at once (large
//! messages waiting for the CMA probe, for ring slots or for bounce chunks, and
//! whatever was sent after them, so the order is kept). Its receive side (`Rx`, one
//! mutex) holds the kit's tag matcher and a consumer per active ring of its own region.
//!
//! # Modules
//!
//! - this one: the endpoint's state (the types every part shares), `fi_enable` and
//!   the control calls, and the data calls: [`ofi_kit::endpoint_data_ops!`] writes
//!   them from the endpoint's [`DataPath`], whose four submissions hand an operation
//!   on as one request value;
//! - `tx`: connections, the operation table and the send paths;
//! - `bounce`: large transfers (bounce chunks, CMA) and the send FIFO's streaming;
//! - `rma`: RMA and atomics, initiator and target;
//! - `rx`: posted receives, matching, delivery, acks and the receive progress;
//! - `slot`: one handler per slot kind.
//!
//! # Paths
//!
//! - A send of at most `INLINE_CAP` bytes with an empty FIFO writes one slot and
//!   completes (no syscall, no allocation; the locks taken are uncontended unless the
//!   application shares the endpoint between threads).
//! - A send that fits one bounce chunk, with an empty FIFO, no acknowledgement wanted
//!   and the next chunk free, is copied into the chunk, announced in one slot and
//!   completed at once, with no operation record (`put_fragment`); the receiver
//!   delivers such a whole-message chunk into the matched receive as it does an
//!   inline slot (`deliver_whole`).
//! - Other sends become tracked operations (a slab entry, no allocation once warm):
//!   up to one bounce chunk eagerly through a chunk, completed at once; beyond, with
//!   CMA an RTS slot completed by the receiver's ack, otherwise bounce fragments
//!   completed when the last one is posted (with `FI_DELIVERY_COMPLETE`: on the ack).
//!   An inject (or `FI_INJECT`) that cannot go at once is tracked from a private copy
//!   of its data (`Op::owned`), so the caller's buffer is free on return.
//! - RMA and atomics post one slot (`rma`, `atomic`) and complete on the target's ack;
//!   the target checks them in the kit's MR table (`rma_target`, `atomic_target`).
//! - Progress (`Progress::progress`, from CQ reads or the auto thread) first asks,
//!   without a lock, whether a ring's next slot is published or other work is pending
//!   (`rx_may_have_work`, fed by `publish_peek`; a published slot's second cache line
//!   is prefetched there, so its transfer from the sender overlaps the locking); then
//!   it polls at most [`POLL_BUDGET`] slots per ring (none while the ring owes
//!   [`ACK_BACKLOG_MAX`] acks its sender has not taken), attaches new senders, flushes
//!   acks, moves queued sends on, and checks peers' liveness at most every
//!   [`LIVENESS_EVERY`]. Inline slots are parsed from the header words of their first
//!   [`INLINE_OFF`] bytes, loaded in place (`proto::parse_inline_words`, the checks of
//!   `proto::parse_inline`, which are `Slot::parse`'s) and delivered into the matched
//!   receive where it lies, without copying the receive or the slot.
//! - Sends of one buffer (`fi_send`, `fi_inject` and their tagged and data forms)
//!   carry it as an address and a length (`OneBuf`) until an operation must be
//!   tracked; the inline path writes its header with `proto::encode_inline`.
//!
//! # Invariants
//!
//! - Lock order: `tx` or `rx` (never both), then the AV's lock, then a CQ's or
//!   counter's lock.
//! - Every value read from shared memory is checked before use (`Slot::parse`, ack
//!   ids against the operation table, names and pids in `read_identity`, RMA and atomic
//!   ranges against the MR table); a bad slot is logged, counted
//!   ([`Endpoint::corrupt_slots`]) and skipped.
//! - A ring's messages are consumed in order; a bounce message's fragments are
//!   contiguous in its ring (the sender streams one operation at a time).
//! - Application buffers travel as addresses (`IoList`, `OneBuf`, `[u64; 3]`) from
//!   the `unsafe` data calls of [`EndpointOps`] (written by kit's
//!   `endpoint_data_ops!`, handed on in the request values of [`DataPath`]), whose
//!   contract keeps them valid until the operation completes; only those calls create
//!   them, and the private functions that copy through them rely on this. A private function handed a raw pointer from
//!   elsewhere (`rma_target`, `write_fragment`, `cma_read`) is an `unsafe fn`.
//! - Shared bytes (the rings, a peer's region, registered memory a peer's CMA copy
//!   may write) are never borrowed as `&[u8]`/`&mut [u8]`: words are atomics, data is
//!   copied through raw pointers.
//!
//! Nothing here panics on application or peer input.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::Ioc;
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::atomic::AtomicLocks;
use ofi_kit::auth::AuthTag;
use ofi_kit::dataops::DataPath;
use ofi_kit::ep::{BindRules, Bindings, Bound, EpOpenInfo};
use ofi_kit::mr::{MrEndpointTarget, MrTable};
use ofi_kit::opflags::DefaultOpFlags;
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{Incoming, Match, Placement, PostedRecv, TagMatcher, ANY_SRC};

use crate::fabric::{region_name, Fabric};
use crate::proto::{self, AtomicSlot, Body, Slot, F_ACK, F_DATA, F_TAGGED, INLINE_CAP, INLINE_OFF};
use crate::region::{self, cma_state, state, Region, NAME_PREFIX, SLOT_HDR};

/// How many generated region names an endpoint tries before giving up.
const AUTO_NAME_TRIES: usize = 64;
use crate::ring::{Consumer, Producer, RingWords};
use crate::{Settings, ADDR_PREFIX, IOV_LIMIT, NAME};

mod bounce;
mod name;
mod remote_cntr;
mod rma;
mod rx;
mod scalable;
mod shared_ctx;
mod slot;
mod trigger;
mod tx;

use tx::{private_copy, want_tx_cq, OneBuf, OpId};

/// Slots read from one ring per progress call.
pub const POLL_BUDGET: usize = 32;
/// How often, at most, peers' liveness is checked.
pub const LIVENESS_EVERY: Duration = Duration::from_millis(5);
/// Acknowledgements a ring may owe beyond what its ack ring holds. A sender that does
/// not take its acks (a stuck or hostile one, or one whose ack tail is corrupt) has its
/// ring left unread at this depth until it does, so it cannot make the receiver queue
/// acknowledgements without bound; its other messages wait in its ring, as they do
/// when the ring is full.
pub const ACK_BACKLOG_MAX: usize = 256;

use ofi_kit::wait::lock;

pub use ofi_kit::iov::IoList;

/// Bindings made before `fi_enable` (the kit's rules).
type Setup = Bindings;

const BIND_RULES: BindRules = BindRules {
    prov: NAME,
    eq: false,
};

/// What `fi_enable` froze (the kit's [`Bound`]).
type Active = Bound;

/// A posted receive an incoming message matched: where in it the message goes, and
/// whether the receive is released by this message (a multi-receive buffer's last).
#[derive(Clone, Copy)]
struct Matched<'a> {
    recv: &'a PostedRecv<IoList>,
    place: Placement,
    released: bool,
}

impl<'a> Matched<'a> {
    fn new(recv: &'a PostedRecv<IoList>, place: Placement, released: bool) -> Self {
        Matched {
            recv,
            place,
            released,
        }
    }
}

/// An RMA access a peer asked this (target) endpoint for.
struct RmaAccess<'a> {
    /// Where the initiator's side of the data is.
    source: RmaSource<'a>,
    /// A read (the target's memory is copied out) or a write.
    read: bool,
    /// Bytes.
    total: usize,
    /// Where it reads or writes.
    at: proto::RemoteMem,
    /// Remote CQ data the write reports to the target's receive CQ.
    data: Option<u64>,
}

/// The initiator's side of an [`RmaAccess`].
#[derive(Clone, Copy)]
enum RmaSource<'a> {
    /// Its buffers, reached with CMA: its pid and (address, length) pairs.
    Cma { pid: i32, iov: &'a [(u64, u64)] },
    /// Inline in the slot: bytes of a mapped region.
    Inline(*const u8),
}

/// Bits of a ring's tail kept in a [`PeekSet`] word (the ring index takes the rest).
const PEEK_TAIL_MASK: u64 = (1 << 48) - 1;

/// Bounce fragments of at most this many bytes take their chunks from the first
/// [`SMALL_SPAN`] only; larger ones from all of them. Measured here (2026-11-26,
/// `fi_pingpong` between two processes): cycling through more chunks — a longer reuse
/// distance — makes large transfers faster (16 chunks against 8: 1 MiB 15 → 25 GB/s,
/// 64 KiB 8.4 → 6.4 µs) but small ones slower (1 KiB 0.33 → 0.345 µs, 8 KiB 1.35 → 1.38).
const SMALL_BOUNCE: usize = 16 << 10;
/// See [`SMALL_BOUNCE`].
const SMALL_SPAN: usize = 8;

/// The slot index of position `pos` in a ring of `region`.
#[inline]
fn ring_index(region: &Region, pos: u64) -> usize {
    (pos & (region.geometry().slots as u64 - 1)) as usize
}

/// What the receive side publishes so that an idle poll needs no lock: per active
/// ring its index and next position, the claims generation seen, and whether other
/// work is pending.
struct PeekSet {
    n: AtomicUsize,
    words: Box<[AtomicU64]>,
    gen: AtomicU64,
    more: AtomicBool,
    calls: AtomicU64,
    /// Set by the periodic call of `rx_may_have_work` (every 256th): the receive side
    /// then checks its senders' liveness (time-gated by [`LIVENESS_EVERY`]) even when
    /// idle, so a dead sender is noticed after 256 polls, not 256 × 256.
    liveness_due: AtomicBool,
}

/// Serialises atomics applied by this process (across its endpoints and threads).
static ATOMIC_LOCKS: OnceLock<AtomicLocks> = OnceLock::new();

/// A connection to a peer's region.
struct Conn {
    /// The full address (`fi_shm://name`), compared with the AV entry on each send.
    addr: String,
    region: Arc<Region>,
    ring: usize,
    claim: u64,
    prod: Producer,
    acks: Consumer,
    fifo: VecDeque<u32>,
    waiting: usize,
    /// The next bounce chunk for a fragment larger than [`SMALL_BOUNCE`] (all chunks in
    /// turn).
    chunk: usize,
    /// The next bounce chunk for a fragment of at most [`SMALL_BOUNCE`] bytes (the first
    /// [`SMALL_SPAN`] chunks in turn).
    small_chunk: usize,
    /// Bounce chunks seen free (bit per chunk) and not used since: only the receiver
    /// frees a chunk and only we fill one, so a chunk seen free stays free until we
    /// fill it. The shared chunk-state line (which the receiver writes as it frees
    /// chunks) is read only when the next chunk is not known free.
    free_chunks: u32,
    dead: bool,
    /// Why it is dead: the error its queued operations fail with.
    why: Errno,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Queued,
    AwaitAck,
}

struct Op {
    conn: PeerIdx,
    ctx: usize,
    cq_flags: u64,
    want_cq: bool,
    iov: IoList,
    len: usize,
    tag: u64,
    data: u64,
    hflags: u8,
    sent: usize,
    stage: Stage,
    /// An RMA write streamed through bounce chunks: where it goes at the target.
    rma: Option<proto::RemoteMem>,
    /// The data of an inject (or `FI_INJECT`) that could not be sent at once, copied:
    /// `iov` points into it, so the application's buffer is free on return. Held, never
    /// read: it lives exactly as long as the operation.
    #[allow(dead_code)]
    owned: Option<Box<[u8]>>,
}

impl Op {
    /// An operation on peer `conn` that reports `ctx` with `cq_flags` (an entry when
    /// `want_cq`) on completion; queued, with no buffers, header or RMA target yet
    /// (callers set what they use with struct update syntax).
    fn new(conn: PeerIdx, ctx: usize, cq_flags: u64, want_cq: bool) -> Op {
        Op {
            conn,
            ctx,
            cq_flags,
            want_cq,
            iov: IoList::default(),
            len: 0,
            tag: 0,
            data: 0,
            hflags: 0,
            sent: 0,
            stage: Stage::Queued,
            rma: None,
            owned: None,
        }
    }

    /// The slot that carries `body` of this operation, with its header's flags, tag
    /// and CQ data.
    fn slot(&self, body: Body) -> Slot {
        Slot {
            flags: self.hflags,
            tag: self.tag,
            data: self.data,
            body,
        }
    }
}

struct Tx {
    /// The last destination resolved by `conn_for`: (fi_addr, the AV's change count
    /// then, connection index).
    last_dest: Option<(u64, u64, PeerIdx)>,
    conns: Vec<Option<Conn>>,
    /// (AV index, receive context) of the odd connection slots ([`Tx::peer_idx`]).
    ctx_peers: Vec<(u32, usize)>,
    ops: Vec<Option<Op>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    live: usize,
    polls: u64,
    last_check: Instant,
}

impl Tx {
    /// The connection slot of AV index `index`, receive context `rx_ctx`: even slots
    /// for context 0 (every ordinary peer), odd ones handed out in order for the other
    /// receive contexts of scalable endpoints.
    fn peer_idx(&mut self, index: u32, rx_ctx: usize) -> PeerIdx {
        if rx_ctx == 0 {
            return PeerIdx(2 * index as usize);
        }
        let key = (index, rx_ctx);
        let n = match self.ctx_peers.iter().position(|k| *k == key) {
            Some(n) => n,
            None => {
                self.ctx_peers.push(key);
                self.ctx_peers.len() - 1
            }
        };
        PeerIdx(2 * n + 1)
    }

    /// The connection to peer `p`, if there is one.
    #[inline]
    fn conn(&self, p: PeerIdx) -> Option<&Conn> {
        self.conns.get(p.0)?.as_ref()
    }

    /// The connection to peer `p`, writable, if there is one.
    #[inline]
    fn conn_mut(&mut self, p: PeerIdx) -> Option<&mut Conn> {
        self.conns.get_mut(p.0)?.as_mut()
    }

    /// The connection to peer `p`, writable, which [`Shared::conn_for`] found or made
    /// under the same lock: `FI_EIO` if it is gone all the same.
    #[inline]
    fn live_conn(&mut self, p: PeerIdx) -> Result<&mut Conn> {
        self.conn_mut(p)
            .ok_or_else(|| Error::new(Errno::EIO, format!("{NAME}: connection vanished")))
    }
}

/// A peer this endpoint sends to: its connection's slot in `Tx::conns`, derived from
/// its index in the address vector ([`Tx::peer_idx`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PeerIdx(usize);

enum Unexp {
    /// Copied out of the ring (a delivery-complete sender was acknowledged then).
    Data {
        data: Vec<u8>,
        /// The ring's [`Rx::via`] when it arrived.
        via: Option<Arc<Active>>,
    },
    Rts {
        /// The ring's [`Rx::via`] when it arrived.
        via: Option<Arc<Active>>,
        ring: usize,
        claim: u64,
        pid: i32,
        bufs: proto::BufList,
        id: u64,
    },
}

enum AsmTarget {
    Recv {
        recv: PostedRecv<IoList>,
        place: Placement,
        released: bool,
    },
    Unexp(Vec<u8>),
}

struct Asm {
    id: u64,
    got: usize,
    inc: Incoming,
    ack: bool,
    target: AsmTarget,
}

struct RxRing {
    on: bool,
    claim: u64,
    cons: Consumer,
    ackp: Producer,
    pid: i32,
    start: u64,
    addr: Address,
    src: u64,
    asm: Option<Asm>,
    /// The RMA write being streamed in: its id and status so far.
    wr: Option<(u64, i32)>,
    backlog: VecDeque<(u64, i32)>,
}

struct Rx {
    m: TagMatcher<IoList, Unexp>,
    rings: Vec<RxRing>,
    active: Vec<usize>,
    gen: u64,
    polls: u64,
    last_check: Instant,
    /// Per ring, on a shared receive context: the bindings of the endpoint the ring's
    /// sender addressed (`None`: the context's own, those of its first endpoint). Kept
    /// beside `rings`, not in them, so that every other endpoint's rings keep their
    /// layout.
    via: Vec<Option<Arc<Active>>>,
    /// Whether a ring has bindings in `via`: chooses the poll loop that looks them up.
    routed: bool,
}

struct Shared {
    settings: Settings,
    mr: Arc<MrTable>,
    /// The region's name: the endpoint's address. `fi_setname` may change it before
    /// `fi_enable` (`name`), so it is read through [`Shared::name`].
    name: Mutex<String>,
    region: Arc<Region>,
    engine: Arc<ProgressEngine>,
    need_src: bool,
    directed: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    tx: Mutex<Tx>,
    rx: Mutex<Rx>,
    tx_work: AtomicUsize,
    corrupt: AtomicU64,
    peek: PeekSet,
    /// Counters of remote accesses (`remote_cntr`), set at `fi_enable`.
    remote: OnceLock<remote_cntr::RemoteCntrs>,
    /// A scalable endpoint's context: the CQs it is bound to (`scalable`), set at
    /// `fi_enable`.
    ctx_cqs: OnceLock<[usize; 2]>,
    /// Set at `fi_enable` when the endpoint receives through a shared receive context:
    /// its own receive calls are then refused (the context's receives match).
    rx_via_srx: AtomicBool,
    /// A shared receive context's endpoints: the digest of each one's name
    /// ([`region::name_digest`]) and its bindings, where the messages addressed to it
    /// are reported (`shared_ctx`).
    srx_routes: Mutex<Vec<(u64, Arc<Active>)>>,
    /// Triggered operations waiting for their counters (`trigger`).
    triggers: ofi_kit::trigger::TriggerQueue,
    /// This endpoint, for issuing triggered operations from progress (`trigger`).
    this: std::sync::Weak<Shared>,
}

/// An `FI_EP_RDM` endpoint (see the module docs).
pub struct Endpoint {
    sh: Arc<Shared>,
    /// Ordinary, scalable, a scalable endpoint's context, or a shared context.
    role: scalable::Role,
    /// The shared contexts bound to it (an alias shares its endpoint's).
    shared_ctx: Arc<Mutex<shared_ctx::SharedBindings>>,
    /// This handle's default operation flags (an alias has its own).
    flags: DefaultOpFlags,
}

ofi_kit::debug_fields!(Endpoint, |ep| { name: ep.sh.name() });

static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

/// A region under a generated name `ofi-shm-<pid>-<n>`. Another copy of this
/// provider in the same process (linked in and loaded as a plugin) counts from the
/// same start, so a name already taken by a live owner moves on to the next number
/// (at most [`AUTO_NAME_TRIES`] times). Only senders with authorization tag `auth`
/// may use it.
fn create_auto_named(geometry: region::Geometry, auth: AuthTag) -> Result<Region> {
    create_auto_named_base("", geometry, auth).map(|(_, r)| r)
}

/// [`create_auto_named`] for a region named `<base><suffix>`: the generated base and
/// the region.
fn create_auto_named_base(
    suffix: &str,
    geometry: region::Geometry,
    auth: AuthTag,
) -> Result<(String, Region)> {
    let mut last = None;
    for _ in 0..AUTO_NAME_TRIES {
        let base = format!(
            "{NAME_PREFIX}{}-{}",
            std::process::id(),
            NEXT_NAME.fetch_add(1, Ordering::Relaxed)
        );
        match Region::create_keyed(&format!("{base}{suffix}"), geometry, auth) {
            Err(e) if e.code() == Errno::EADDRINUSE => last = Some(e),
            other => return other.map(|r| (base, r)),
        }
    }
    Err(last
        .unwrap_or_else(|| Error::new(Errno::EADDRINUSE, format!("{NAME}: no free region name"))))
}

impl Endpoint {
    /// Open an endpoint for `info`: create its region (reclaiming stale regions of dead
    /// processes first) and register with the domain's progress engine.
    ///
    /// # Errors
    /// `FI_EINVAL` for a bad `src_addr`; `FI_EADDRINUSE` when a live process owns the
    /// name; OS failures creating the region.
    pub fn open(
        settings: Settings,
        info: &Info,
        _context: usize,
        engine: Arc<ProgressEngine>,
        mr: Arc<MrTable>,
    ) -> Result<Endpoint> {
        // Checked first: a refused open creates no region.
        Endpoint::default_flags(info)?;
        let removed = region::reclaim_stale();
        if !removed.is_empty() {
            ofi_core::ofi_info!(
                crate::NAME,
                "ep_ctrl",
                "reclaimed stale regions {removed:?}"
            );
        }
        let region = match &info.src_addr {
            Some(a) => Region::create_keyed(region_name(a)?, settings.geometry, settings.auth)?,
            None => create_auto_named(settings.geometry, settings.auth)?,
        };
        Endpoint::with_region(settings, info, engine, mr, region, scalable::Role::Plain)
    }

    /// The default operation flags of `info`'s attributes (`FI_EBADFLAGS` for a flag
    /// shm does not take as a default).
    fn default_flags(info: &Info) -> Result<DefaultOpFlags> {
        DefaultOpFlags::of_endpoint::<Self>(info)
    }

    /// An endpoint for `info` on `region` (created by the caller), registered with
    /// `engine`.
    fn with_region(
        settings: Settings,
        info: &Info,
        engine: Arc<ProgressEngine>,
        mr: Arc<MrTable>,
        region: Region,
        role: scalable::Role,
    ) -> Result<Endpoint> {
        let flags = Endpoint::default_flags(info)?;
        let region = Arc::new(region);
        let open = EpOpenInfo::new(info, settings.rx_size);
        let geo = settings.geometry;
        let rings = (0..geo.rings)
            .map(|_| RxRing {
                on: false,
                claim: 0,
                cons: Consumer::new(geo.slots, 0),
                ackp: Producer::new(geo.slots, 0),
                pid: 0,
                start: 0,
                addr: Address::Str(String::new()),
                src: ADDR_NOTAVAIL,
                asm: None,
                wr: None,
                backlog: VecDeque::new(),
            })
            .collect();
        let m = TagMatcher::new(open.matcher_config());
        let tx_size = settings.tx_size;
        let sh = Arc::new_cyclic(|this| Shared {
            triggers: ofi_kit::trigger::TriggerQueue::new(tx_size),
            this: this.clone(),
            settings,
            mr,
            name: Mutex::new(region.name().to_string()),
            region,
            engine: engine.clone(),
            need_src: open.need_src,
            directed: open.directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
            tx: Mutex::new(Tx {
                last_dest: None,
                conns: Vec::new(),
                ctx_peers: Vec::new(),
                ops: Vec::new(),
                gens: Vec::new(),
                free: Vec::new(),
                live: 0,
                polls: 0,
                last_check: Instant::now(),
            }),
            rx: Mutex::new(Rx {
                m,
                rings,
                active: Vec::new(),
                gen: u64::MAX,
                polls: 0,
                last_check: Instant::now(),
                via: vec![None; geo.rings],
                routed: false,
            }),
            tx_work: AtomicUsize::new(0),
            corrupt: AtomicU64::new(0),
            peek: PeekSet {
                n: AtomicUsize::new(0),
                words: (0..geo.rings).map(|_| AtomicU64::new(0)).collect(),
                gen: AtomicU64::new(u64::MAX),
                more: AtomicBool::new(true),
                calls: AtomicU64::new(1),
                liveness_due: AtomicBool::new(false),
            },
            remote: OnceLock::new(),
            ctx_cqs: OnceLock::new(),
            rx_via_srx: AtomicBool::new(false),
            srx_routes: Mutex::new(Vec::new()),
        });
        engine.register(&sh);
        Ok(Endpoint {
            sh,
            role,
            shared_ctx: Arc::default(),
            flags,
        })
    }

    /// The endpoint's region name.
    pub fn name(&self) -> String {
        self.sh.name()
    }

    /// The endpoint's address.
    pub fn address(&self) -> Address {
        Address::Str(format!("{ADDR_PREFIX}{}", self.sh.name()))
    }

    /// Slots received that failed validation and were skipped.
    pub fn corrupt_slots(&self) -> u64 {
        self.sh.corrupt.load(Ordering::Relaxed)
    }

    fn active(&self) -> Result<&Active> {
        self.sh
            .active
            .get()
            .ok_or_else(|| Error::new(Errno::EOPBADSTATE, format!("{NAME}: endpoint not enabled")))
    }
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(active) = self.active.get() else {
            return 0;
        };
        if self.leaves_to_own_cqs() {
            return 0;
        }
        // The idle case — nothing published, nothing queued to send — costs a few
        // loads and no lock.
        let rx = if self.rx_may_have_work() {
            self.progress_rx(active)
        } else {
            0
        };
        let tx = if self.tx_work.load(Ordering::Relaxed) != 0 {
            self.progress_tx(active)
        } else {
            0
        };
        // Triggered operations go once their counters (changed above or by the
        // application) reach their thresholds: one load when none waits.
        let fired = if self.triggers.is_empty() {
            0
        } else {
            self.fire_triggers(active)
        };
        rx + tx + fired
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let tx = self.tx.get_mut().unwrap_or_else(PoisonError::into_inner);
        for c in tx.conns.drain(..).flatten() {
            let ring = c.region.ring(c.ring);
            if ring.claim().load(Ordering::Acquire) == c.claim {
                ring.state().store(state::CLOSED, Ordering::Release);
            }
        }
        self.region.closed().store(1, Ordering::Release);
        region::unlink(&self.name());
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
        if let Some(r) = self
            .sep_bind(&target, flags)
            .or_else(|| self.shared_ctx_bind(&target, flags))
        {
            return r;
        }
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: bind after fi_enable"),
            ));
        }
        lock(&self.sh.setup).bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        if let Some(r) = self.sep_enable().or_else(|| self.shared_ctx_enable()) {
            return r;
        }
        if self.sh.active.get().is_some() {
            return Ok(());
        }
        let mut setup = lock(&self.sh.setup);
        self.inherit_av(&mut setup);
        let active = setup.freeze(NAME)?;
        self.attach_srx(&active)?;
        self.note_ctx_cqs(&active);
        let _ = self.sh.active.set(active);
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let active = self.active()?;
        let recv = lock(&self.sh.rx).m.cancel(context);
        match recv {
            Some(r) => {
                active.cancelled(&r);
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: no such operation to cancel"),
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        ofi_kit::ep::getopt_min_multi_recv(NAME, level, optname, optval, || {
            lock(&self.sh.rx).m.config().min_multi_recv
        })
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        let v = ofi_kit::ep::setopt_min_multi_recv(NAME, level, optname, optval)?;
        lock(&self.sh.rx).m.set_min_multi_recv(v);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.public_address().to_bytes())
    }

    /// `fi_setname` before `fi_enable`: the endpoint's region moves to the name of
    /// `addr` (see `name`).
    fn setname(&self, addr: &[u8]) -> Result<()> {
        self.set_name(addr)
    }

    fn close(&self) -> Result<()> {
        self.sep_close()?;
        self.cancel_triggers();
        Ok(())
    }

    fn tx_ctx(&self, index: i32, attr: &ofi_core::TxAttr, _context: usize) -> Result<Self> {
        self.tx_context(index, attr)
    }

    fn rx_ctx(&self, index: i32, attr: &ofi_core::RxAttr, _context: usize) -> Result<Self> {
        self.rx_context(index, attr)
    }

    ofi_kit::op_flags_control!(flags);

    /// `fi_ep_alias`: the same endpoint (region, queues, bindings) with its own default
    /// flags: a copy of this handle's, then one side set from `flags`.
    fn alias(&self, flags: u64) -> Result<Self> {
        if !matches!(self.role, scalable::Role::Plain) {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: fi_ep_alias of a scalable endpoint, a context or a shared context is not supported"
                ),
            ));
        }
        Ok(Endpoint {
            sh: Arc::clone(&self.sh),
            role: scalable::Role::Plain,
            shared_ctx: Arc::clone(&self.shared_ctx),
            flags: self
                .flags
                .alias(NAME, flags, <Self as DataPath>::OP_FLAGS)?,
        })
    }

    fn rx_size_left(&self) -> Result<usize> {
        let rx = lock(&self.sh.rx);
        Ok(rx.m.config().max_posted.saturating_sub(rx.m.posted_len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let tx = lock(&self.sh.tx);
        Ok(self.sh.settings.tx_size.saturating_sub(tx.live))
    }

    ofi_kit::endpoint_data_ops!();
}

/// The endpoint's data calls, written by [`ofi_kit::endpoint_data_ops!`] from these
/// four submissions: each takes the whole operation as one request value.
impl DataPath for Endpoint {
    const NAME: &'static str = crate::NAME;
    /// Kit's default set, `FI_FENCE` ([`fence_ready`](DataPath::fence_ready)),
    /// `FI_TRIGGER` ([`triggers`](DataPath::triggers)) and `FI_COMMIT_COMPLETE` (as
    /// delivery complete: [`ofi_kit::opflags::with_implied`]).
    const OP_FLAGS: OpFlags = ofi_kit::opflags::PROVIDER_DEFAULT
        .union(OpFlags::FENCE)
        .union(OpFlags::TRIGGER)
        .union(OpFlags::COMMIT_COMPLETE);
    type Active = Active;

    /// Triggered operations wait in the endpoint's queue (module `trigger`).
    fn triggers(&self) -> Option<(&ofi_kit::trigger::TriggerQueue, &Arc<ProgressEngine>)> {
        Some((&self.sh.triggers, &self.sh.engine))
    }

    /// A fenced operation starts only when no earlier transmit operation is still in
    /// the operation table (queued, streaming, or waiting for its peer).
    fn fence_ready(&self, _act: &Active) -> Result<()> {
        if lock(&self.sh.tx).live > 0 {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    #[inline]
    fn active(&self) -> Result<&Active> {
        Endpoint::active(self)
    }

    #[inline]
    fn tx_op_flags(&self) -> OpFlags {
        self.flags.tx()
    }

    #[inline]
    fn rx_op_flags(&self) -> OpFlags {
        self.flags.rx()
    }

    #[inline]
    fn recv_src(&self, src: u64) -> u64 {
        recv_src(&self.sh, src)
    }

    #[inline]
    fn inject_size(&self) -> usize {
        proto::INJECT_SIZE
    }

    #[inline(always)]
    fn submit_send(&self, active: &Active, req: SendRequest) -> Result<()> {
        // One buffer (most sends) travels as an address and a length until an
        // operation must be tracked.
        if let [(p, l)] = *req.iov.slice() {
            self.sh.send(active, OneBuf(p, l), &req)
        } else {
            self.sh.send(active, req.iov, &req)
        }
    }

    #[inline]
    fn submit_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        if self.sh.rx_via_srx.load(Ordering::Relaxed) {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!(
                    "{NAME}: this endpoint receives through its shared receive context: post receives there"
                ),
            ));
        }
        self.sh.post_recv(active, recv)
    }

    fn submit_rma(&self, active: &Active, req: RmaRequest<'_>) -> Result<()> {
        let local = IoList::from_iov(req.local.bufs, crate::NAME)?;
        // `rma_iov_limit` is 1: the one remote buffer covers the local ones exactly.
        if req.remote.len != local.total() {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: remote buffer of {} bytes for {} local bytes",
                    req.remote.len,
                    local.total()
                ),
            ));
        }
        self.sh.rma(active, local, &req)
    }

    fn submit_atomic(&self, active: &Active, req: AtomicRequest<'_>) -> Result<()> {
        let operand = one_ioc(req.operands.bufs, req.kind == AtomicKind::Fetch)?;
        let compare = one_ioc(req.compare.bufs, req.kind != AtomicKind::Compare)?;
        let result = one_ioc(req.result.bufs, req.kind == AtomicKind::Base)?;
        if let Some((_, n)) = operand {
            if n != req.remote.count {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: remote and local atomic element counts differ"),
                ));
            }
        }
        if operand.is_none() && req.op != AtomicOp::AtomicRead {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: an atomic other than FI_ATOMIC_READ needs its operands"),
            ));
        }
        let addr = |v: Option<(u64, usize)>| v.map_or(0, |(a, _)| a);
        self.sh
            .atomic(active, [addr(operand), addr(compare), addr(result)], &req)
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        self.sh.atomic_max(dt, op, kind)
    }
}

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        Arc::as_ptr(&self.sh) as u64
    }
}

/// The buffer of an atomic I/O vector (`iov_limit` for atomics is 1): its address and
/// element count; `None` when the vector is empty and `may_be_empty`.
fn one_ioc(v: &[Ioc], may_be_empty: bool) -> Result<Option<(u64, usize)>> {
    match v {
        [one] => Ok(Some((one.addr as u64, one.count))),
        [] if may_be_empty => Ok(None),
        _ => Err(Error::new(
            Errno::EINVAL,
            format!(
                "{NAME}: atomic vectors of {} buffers (the limit is 1)",
                v.len()
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
