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
//!   `proto::parse_inline`, which are `proto::parse`'s) and delivered into the matched
//!   receive where it lies, without copying the receive or the slot.
//! - Sends of one buffer (`fi_send`, `fi_inject` and their tagged and data forms)
//!   carry it as an address and a length (`OneBuf`) until an operation must be
//!   tracked; the inline path writes its header with `proto::encode_inline`.
//!
//! # Invariants
//!
//! - Lock order: `tx` or `rx` (never both), then the AV's lock, then a CQ's or
//!   counter's lock.
//! - Every value read from shared memory is checked before use (`proto::parse`, ack
//!   ids against the operation table, names and pids in `read_identity`, RMA and atomic
//!   ranges against the MR table); a bad slot is logged, counted
//!   ([`Endpoint::corrupt_slots`]) and skipped.
//! - A ring's messages are consumed in order; a bounce message's fragments are
//!   contiguous in its ring (the sender streams one operation at a time).
//! - Application buffers travel as addresses (`IoList`, `OneBuf`, `[u64; 3]`) from
//!   the `unsafe` data calls of [`EndpointOps`], whose contract keeps them valid until
//!   the operation completes; only those calls create them, and the private functions
//!   that copy through them rely on this. A private function handed a raw pointer from
//!   elsewhere (`rma_target`, `write_fragment`, `cma_read`) is an `unsafe fn`.
//! - Shared bytes (the rings, a peer's region, registered memory a peer's CMA copy
//!   may write) are never borrowed as `&[u8]`/`&mut [u8]`: words are atomics, data is
//!   copied through raw pointers.
//!
//! Nothing here panics on application or peer input.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqTaggedEntry, Ioc};
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{Caps, Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};
use ofi_kit::atomic::AtomicLocks;
use ofi_kit::dataops::DataPath;
use ofi_kit::ep::{BindRules, Bindings, Bound};
use ofi_kit::mr::{MrEndpointTarget, MrTable};
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{
    Incoming, Match, MatcherConfig, Placement, PostAction, PostedRecv, TagMatcher, ANY_SRC,
};

use crate::fabric::{region_name, Fabric};
use crate::proto::{self, Body, Slot, F_ACK, F_DATA, F_TAGGED, INLINE_CAP, INLINE_OFF};
use crate::region::{self, cma_state, state, Region, NAME_PREFIX, SLOT_HDR};

/// How many generated region names an endpoint tries before giving up.
const AUTO_NAME_TRIES: usize = 64;
use crate::ring::{Consumer, Producer, RingWords};
use crate::{Settings, ADDR_PREFIX, IOV_LIMIT};

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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub use ofi_kit::iov::IoList;

/// Bindings made before `fi_enable` (the kit's rules).
type Setup = Bindings;

const BIND_RULES: BindRules = BindRules {
    prov: "shm",
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
    /// The registration's key.
    key: u64,
    /// The target address.
    raddr: u64,
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

/// An atomic request as the target sees it.
struct AtomicReq {
    count: usize,
    key: u64,
    raddr: u64,
    op: AtomicOp,
    dt: Datatype,
    kind: AtomicKind,
    bufs: [u64; 3],
    inline: Option<*const u8>,
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
    conn: usize,
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
    /// An RMA write streamed through bounce chunks: its key and remote address.
    rma: Option<(u64, u64)>,
    /// The data of an inject (or `FI_INJECT`) that could not be sent at once, copied:
    /// `iov` points into it, so the application's buffer is free on return. Held, never
    /// read: it lives exactly as long as the operation.
    #[allow(dead_code)]
    owned: Option<Box<[u8]>>,
}

struct Tx {
    /// The last destination resolved by `conn_for`: (fi_addr, the AV's change count
    /// then, connection index).
    last_dest: Option<(u64, u64, usize)>,
    conns: Vec<Option<Conn>>,
    ops: Vec<Option<Op>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    live: usize,
    polls: u64,
    last_check: Instant,
}

enum Unexp {
    /// Copied out of the ring (a delivery-complete sender was acknowledged then).
    Data { data: Vec<u8> },
    Rts {
        ring: usize,
        claim: u64,
        pid: i32,
        iov: [(u64, u64); proto::RTS_IOVS],
        niov: usize,
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
}

struct Shared {
    settings: Settings,
    mr: Arc<MrTable>,
    name: String,
    region: Arc<Region>,
    engine: Arc<ProgressEngine>,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
    need_src: bool,
    directed: bool,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    tx: Mutex<Tx>,
    rx: Mutex<Rx>,
    tx_work: AtomicUsize,
    corrupt: AtomicU64,
    peek: PeekSet,
}

/// An `FI_EP_RDM` endpoint (see the module docs).
pub struct Endpoint {
    sh: Arc<Shared>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.sh.name)
            .finish_non_exhaustive()
    }
}

static NEXT_NAME: AtomicU64 = AtomicU64::new(0);

/// A region under a generated name `ofi-shm-<pid>-<n>`. Another copy of this
/// provider in the same process (linked in and loaded as a plugin) counts from the
/// same start, so a name already taken by a live owner moves on to the next number
/// (at most [`AUTO_NAME_TRIES`] times).
fn create_auto_named(geometry: region::Geometry) -> Result<Region> {
    let mut last = None;
    for _ in 0..AUTO_NAME_TRIES {
        let name = format!(
            "{NAME_PREFIX}{}-{}",
            std::process::id(),
            NEXT_NAME.fetch_add(1, Ordering::Relaxed)
        );
        match Region::create(&name, geometry) {
            Err(e) if e.code() == Errno::EADDRINUSE => last = Some(e),
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| Error::new(Errno::EADDRINUSE, "shm: no free region name")))
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
        let removed = region::reclaim_stale();
        if !removed.is_empty() {
            ofi_core::ofi_info!(
                crate::NAME,
                "ep_ctrl",
                "reclaimed stale regions {removed:?}"
            );
        }
        let region = match &info.src_addr {
            Some(a) => Region::create(region_name(a)?, settings.geometry)?,
            None => create_auto_named(settings.geometry)?,
        };
        let region = Arc::new(region);
        let caps = if info.caps.is_empty() {
            Caps::MSG | Caps::TAGGED | Caps::SEND | Caps::RECV
        } else {
            info.caps
        };
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
        let directed = caps.contains(Caps::DIRECTED_RECV);
        let rx_size = if info.rx_attr.size == 0 {
            settings.rx_size
        } else {
            info.rx_attr.size
        };
        let m = TagMatcher::new(MatcherConfig {
            directed_recv: directed,
            max_posted: rx_size,
            ..MatcherConfig::default()
        });
        let sh = Arc::new(Shared {
            settings,
            mr,
            name: region.name().to_string(),
            region,
            engine: engine.clone(),
            tx_op_flags: default_tx_flags(info.tx_attr.op_flags),
            rx_op_flags: info.rx_attr.op_flags,
            need_src: caps.intersects(Caps::SOURCE | Caps::DIRECTED_RECV),
            directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
            tx: Mutex::new(Tx {
                last_dest: None,
                conns: Vec::new(),
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
            }),
            tx_work: AtomicUsize::new(0),
            corrupt: AtomicU64::new(0),
            peek: PeekSet {
                n: AtomicUsize::new(0),
                words: (0..geo.rings).map(|_| AtomicU64::new(0)).collect(),
                gen: AtomicU64::new(u64::MAX),
                more: AtomicBool::new(true),
                calls: AtomicU64::new(1),
            },
        });
        engine.register(&sh);
        Ok(Endpoint { sh })
    }

    /// The endpoint's region name.
    pub fn name(&self) -> &str {
        &self.sh.name
    }

    /// The endpoint's address.
    pub fn address(&self) -> Address {
        Address::Str(format!("{ADDR_PREFIX}{}", self.sh.name))
    }

    /// Slots received that failed validation and were skipped.
    pub fn corrupt_slots(&self) -> u64 {
        self.sh.corrupt.load(Ordering::Relaxed)
    }

    fn active(&self) -> Result<&Active> {
        self.sh
            .active
            .get()
            .ok_or_else(|| Error::new(Errno::EOPBADSTATE, "shm: endpoint not enabled"))
    }
}

impl Shared {
    fn connect(&self, tx: &mut Tx, idx: usize, name: &str) -> Result<()> {
        let region = Arc::new(Region::open_peer(name)?);
        let geo = region.geometry();
        let me = std::process::id() as u64;
        let token = (me << 32) | (Arc::as_ptr(&self.region) as u64 & 0xffff_fff0) | 1;
        for r in 0..geo.rings {
            let ring = region.ring(r);
            if ring
                .claim()
                .compare_exchange(0, token, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            ring.state().store(state::ATTACHING, Ordering::Relaxed);
            let tail = ring.tail_word().load(Ordering::Acquire);
            let ack_tail = ring.ack_tail_word().load(Ordering::Acquire);
            let (pa, pv) = ofi_kit::cma::probe_word();
            ring.write_identity(me as i32, &self.name, pa, pv);
            ring.state().store(state::READY, Ordering::Release);
            region.claims_gen().fetch_add(1, Ordering::AcqRel);
            if tx.conns.len() <= idx {
                tx.conns.resize_with(idx + 1, || None);
            }
            tx.conns[idx] = Some(Conn {
                addr: format!("{ADDR_PREFIX}{name}"),
                region: region.clone(),
                ring: r,
                claim: token,
                prod: Producer::new(geo.slots, tail),
                acks: Consumer::new(geo.slots, ack_tail),
                fifo: VecDeque::new(),
                waiting: 0,
                chunk: 0,
                small_chunk: 0,
                free_chunks: 0,
                dead: false,
                why: Errno::ECONNRESET,
            });
            return Ok(());
        }
        Err(Error::new(
            Errno::ENOSPC,
            format!(
                "shm: every ring of peer {name:?} is taken ({} senders)",
                geo.rings
            ),
        ))
    }

    /// The connection index for `dest`, connecting on first use (or when the AV entry
    /// now names another peer, or the old connection's peer died).
    #[inline]
    fn conn_for(&self, act: &Active, tx: &mut Tx, dest: u64) -> Result<usize> {
        // The same destination as last time and no AV change since: the same
        // connection, if it is still up (no AV lock, no address compare).
        let changes = act.av.changes();
        if let Some((d, c, idx)) = tx.last_dest {
            if d == dest && c == changes {
                if let Some(Some(conn)) = tx.conns.get(idx) {
                    if !conn.dead && conn.region.closed().load(Ordering::Relaxed) == 0 {
                        return Ok(idx);
                    }
                }
            }
        }
        let idx = self.conn_for_slow(act, tx, dest)?;
        tx.last_dest = Some((dest, changes, idx));
        Ok(idx)
    }

    /// [`Self::conn_for`] through the AV (out of line: the fast path stays small).
    #[inline(never)]
    fn conn_for_slow(&self, act: &Active, tx: &mut Tx, dest: u64) -> Result<usize> {
        // The connection for this AV entry, if it is still for the same peer (no
        // allocation on this path: the address is compared in place).
        let (idx, fresh) = act.av.with_entry(dest, |e| {
            let ok = matches!(
                (tx.conns.get(e.index as usize), e.addr),
                (Some(Some(c)), Address::Str(a))
                    if !c.dead && c.addr == *a && c.region.closed().load(Ordering::Relaxed) == 0
            );
            let fresh = if ok {
                None
            } else {
                region_name(e.addr).ok().map(str::to_string)
            };
            (e.index as usize, fresh)
        })?;
        if let Some(name) = fresh {
            if matches!(tx.conns.get(idx), Some(Some(_))) {
                // Operations still waiting on the old connection can never complete.
                self.fail_conn(act, tx, idx, Errno::ECONNRESET);
            }
            if let Some(slot) = tx.conns.get_mut(idx) {
                if let Some(old) = slot.take() {
                    self.drop_conn(old);
                }
            }
            self.connect(tx, idx, &name)?;
        }
        Ok(idx)
    }

    /// Reserve a slot on connection `idx` (`FI_EAGAIN` when full, an error when the
    /// peer is gone or its ring is corrupt).
    #[inline(always)]
    fn reserve_slot(conn: &mut Conn) -> Result<usize> {
        let ring = conn.region.ring(conn.ring);
        match conn.prod.reserve(&ring) {
            Ok(Some(i)) => Ok(i),
            r => Self::reserve_failed(conn, r),
        }
    }

    /// [`Self::reserve_slot`] when the ring is full or corrupt (out of line).
    #[cold]
    #[inline(never)]
    fn reserve_failed(
        conn: &mut Conn,
        r: std::result::Result<Option<usize>, crate::ring::Corrupt>,
    ) -> Result<usize> {
        match r {
            Ok(Some(i)) => Ok(i),
            Ok(None) => {
                if !conn.region.owner_alive() {
                    conn.dead = true;
                    // (New sends are refused; those queued on it are reset.)
                    conn.why = Errno::ECONNRESET;
                    return Err(Error::new(
                        Errno::ECONNREFUSED,
                        "shm: the peer closed or died",
                    ));
                }
                Err(Error::code_only(Errno::EAGAIN))
            }
            Err(c) => {
                conn.dead = true;
                conn.why = Errno::EPROTO;
                Err(Error::new(
                    Errno::EPROTO,
                    format!("shm: peer ring corrupt (head {}, tail {})", c.head, c.tail),
                ))
            }
        }
    }

    /// Start the RMA write or read `req`, whose local buffers are `local`.
    fn rma(&self, act: &Active, local: IoList, req: &RmaRequest<'_>) -> Result<()> {
        let (dest, raddr, key, ctx, data, read, flags, inject) = (
            req.peer,
            req.remote.addr,
            req.remote.key,
            req.context,
            req.data,
            req.is_read(),
            req.flags,
            req.inject,
        );
        let len = local.total();
        if len > self.settings.max_msg_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "shm: RMA of {len} bytes exceeds max_msg_size {}",
                    self.settings.max_msg_size
                ),
            ));
        }
        // fi_inject_write*, or FI_INJECT on writemsg: the buffer is free on return.
        let copy = !read && (inject || flags.contains(OpFlags::INJECT));
        if copy && len > proto::INJECT_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "shm: inject write of {len} bytes exceeds inject_size {}",
                    proto::INJECT_SIZE
                ),
            ));
        }
        let want_cq = !inject
            && match &act.txcq {
                Some(b) => !b.selective || flags.contains(OpFlags::COMPLETION),
                None => false,
            };
        if want_cq {
            if let Some(b) = &act.txcq {
                if !b.cq.has_room() {
                    return Err(Error::code_only(Errno::EAGAIN));
                }
            }
        }
        let cq_flags = (OpFlags::RMA | if read { OpFlags::READ } else { OpFlags::WRITE }).bits();
        let mut g = lock(&self.tx);
        let tx = &mut *g;
        let idx = self.conn_for(act, tx, dest)?;
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        // Writes too large for a slot stream through the bounce chunks below the CMA
        // threshold, or always when CMA is disabled or refused, or the write is an
        // inject (streamed from a private copy).
        let refused =
            conn.region.ring(conn.ring).cma().load(Ordering::Acquire) == cma_state::REFUSED;
        if !read
            && len > proto::RMA_INLINE_CAP
            && (copy || self.settings.disable_cma || refused || len <= self.settings.cma_threshold)
        {
            let (local, owned) = if copy {
                let (l, o) = private_copy(&local, len);
                (l, Some(o))
            } else {
                (local, None)
            };
            let op = Op {
                conn: idx,
                ctx,
                cq_flags,
                want_cq,
                iov: local,
                len,
                tag: 0,
                data: data.unwrap_or(0),
                hflags: F_ACK | if data.is_some() { F_DATA } else { 0 },
                sent: 0,
                stage: Stage::Queued,
                rma: Some((key, raddr)),
                owned,
            };
            let id = self.alloc_op(tx, op)?;
            if let Some(Some(c)) = tx.conns.get_mut(idx) {
                c.fifo.push_back(id as u32);
            }
            self.stream(act, tx, idx);
            self.engine.kick();
            return Ok(());
        }
        if !conn.fifo.is_empty() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let slot = Self::reserve_slot(conn)?;
        let id = if inject {
            0
        } else {
            let op = Op {
                conn: idx,
                ctx,
                cq_flags,
                want_cq,
                iov: local,
                len,
                tag: 0,
                data: data.unwrap_or(0),
                hflags: 0,
                sent: len,
                stage: Stage::AwaitAck,
                rma: None,
                owned: None,
            };
            let id = self.alloc_op(tx, op)?;
            if let Some(Some(c)) = tx.conns.get_mut(idx) {
                c.waiting += 1;
            }
            id
        };
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        let mut hflags = if data.is_some() { F_DATA } else { 0 };
        if !inject {
            hflags |= F_ACK;
        }
        let inline = !read && len <= proto::RMA_INLINE_CAP;
        let body = if inline {
            Body::WriteInline {
                len,
                id,
                key,
                raddr,
            }
        } else {
            let mut iov = [(0u64, 0u64); proto::RTS_IOVS];
            for (d, s) in iov.iter_mut().zip(local.slice()) {
                *d = (s.0 as u64, s.1 as u64);
            }
            Body::Rma {
                read,
                total: len,
                id,
                key,
                raddr,
                iov,
                niov: local.len().max(1),
            }
        };
        let s = Slot {
            flags: hflags,
            tag: 0,
            data: data.unwrap_or(0),
            body,
        };
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let mut hdr = [0u8; proto::PARSE_LEN];
        proto::encode(&s, &mut hdr);
        let map = conn.region.map();
        if inline {
            map.write_bytes(off + 8, &hdr[8..proto::RMA_INLINE_OFF]);
            // SAFETY: the slot has RMA_INLINE_CAP ≥ len bytes after RMA_INLINE_OFF,
            // inside the mapping; the application's buffers are readable (C contract).
            unsafe { local.gather(0, map.base().add(off + proto::RMA_INLINE_OFF), len) };
        } else {
            map.write_bytes(off + 8, &hdr[8..]);
        }
        conn.prod.publish(&ring);
        Ok(())
    }

    fn alloc_op(&self, tx: &mut Tx, op: Op) -> Result<u64> {
        if tx.live >= self.settings.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let idx = match tx.free.pop() {
            Some(i) => i as usize,
            None => {
                tx.ops.push(None);
                tx.gens.push(1);
                tx.ops.len() - 1
            }
        };
        tx.ops[idx] = Some(op);
        tx.live += 1;
        self.tx_work.fetch_add(1, Ordering::Relaxed);
        Ok(((tx.gens[idx] as u64) << 32) | idx as u64)
    }

    fn free_op(&self, tx: &mut Tx, idx: usize) -> Option<Op> {
        let op = tx.ops.get_mut(idx)?.take()?;
        tx.gens[idx] = tx.gens[idx].wrapping_add(1).max(1);
        tx.free.push(idx as u32);
        tx.live -= 1;
        self.tx_work.fetch_sub(1, Ordering::Relaxed);
        Some(op)
    }

    /// Send `req`, whose buffers are `iov` (the request's own list, or its one buffer).
    #[inline(always)]
    fn send<P: Payload>(&self, act: &Active, iov: P, req: &SendRequest) -> Result<()> {
        let (dest, ctx, data, flags, inject) =
            (req.dest, req.context, req.data, req.flags, req.inject);
        let (tag, tagged) = (req.tag.unwrap_or(0), req.tagged());
        let len = iov.total();
        if len > self.settings.max_msg_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "shm: message of {len} bytes exceeds max_msg_size {}",
                    self.settings.max_msg_size
                ),
            ));
        }
        // fi_inject*, or FI_INJECT on sendmsg: the buffer is free again on return.
        let copy = inject || flags.contains(OpFlags::INJECT);
        if copy && len > proto::INJECT_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "shm: inject of {len} bytes exceeds inject_size {}",
                    proto::INJECT_SIZE
                ),
            ));
        }
        let want_cq = !inject
            && match &act.txcq {
                Some(b) => !b.selective || flags.contains(OpFlags::COMPLETION),
                None => false,
            };
        if want_cq {
            if let Some(b) = &act.txcq {
                if !b.cq.has_room() {
                    return Err(Error::code_only(Errno::EAGAIN));
                }
            }
        }
        let mut hflags = 0u8;
        if tagged {
            hflags |= F_TAGGED;
        }
        if data.is_some() {
            hflags |= F_DATA;
        }
        let delivery = flags.contains(OpFlags::DELIVERY_COMPLETE) && !inject;
        if delivery {
            hflags |= F_ACK;
        }
        let cq_flags = (OpFlags::SEND
            | if tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            })
        .bits();
        let mut tx = lock(&self.tx);
        let idx = self.conn_for(act, &mut tx, dest)?;
        let tx = &mut *tx;
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        let hdr = proto::InlineHdr {
            flags: hflags,
            len,
            tag,
            data: data.unwrap_or(0),
            id: 0,
        };
        if len <= INLINE_CAP && conn.fifo.is_empty() && !delivery {
            // The common small send: one slot, complete at once.
            let slot = Self::reserve_slot(conn)?;
            Self::write_inline(conn, slot, &hdr, &iov);
            // Nothing to report (no entry wanted, no counter): no call.
            if want_cq || act.txcntr.is_some() {
                act.complete_tx(ctx, cq_flags, want_cq, None);
            }
            return Ok(());
        }
        let t = Tracked {
            idx,
            ctx,
            cq_flags,
            want_cq,
            delivery,
            copy,
        };
        self.send_tracked(act, tx, t, hdr, iov.list())
    }

    /// Write an inline slot (header `hdr`, payload from `iov`) at `slot` of `conn`'s
    /// ring and publish it.
    #[inline(always)]
    fn write_inline<P: Payload>(conn: &mut Conn, slot: usize, hdr: &proto::InlineHdr, iov: &P) {
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let map = conn.region.map();
        // The header words (what `proto::encode_inline` gives), stored in place.
        let b = proto::encode_inline(hdr);
        for (k, w) in b.chunks_exact(8).enumerate() {
            let mut x = [0u8; 8];
            x.copy_from_slice(w);
            ring.slot_word(slot, 1 + k)
                .store(u64::from_ne_bytes(x), Ordering::Relaxed);
        }
        // SAFETY: the slot lies inside the mapping (validated geometry) and has
        // INLINE_CAP ≥ len bytes after INLINE_OFF (checked by the callers); the
        // application's buffers are readable for `len` bytes (the C API's contract).
        unsafe { iov.gather_all(map.base().add(off + INLINE_OFF), hdr.len) };
        conn.prod.publish(&ring);
    }

    /// The rest of [`Shared::send`] (out of line): an inline send that waits for its
    /// acknowledgement, or a send queued behind others or too large for a slot.
    #[inline(never)]
    fn send_tracked(
        &self,
        act: &Active,
        tx: &mut Tx,
        t: Tracked,
        mut hdr: proto::InlineHdr,
        iov: IoList,
    ) -> Result<()> {
        let idx = t.idx;
        let len = hdr.len;
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        if len <= INLINE_CAP && conn.fifo.is_empty() {
            let slot = Self::reserve_slot(conn)?;
            if t.delivery {
                let op = Op {
                    conn: idx,
                    ctx: t.ctx,
                    cq_flags: t.cq_flags,
                    want_cq: t.want_cq,
                    iov,
                    len,
                    tag: hdr.tag,
                    data: hdr.data,
                    hflags: hdr.flags,
                    sent: len,
                    stage: Stage::AwaitAck,
                    rma: None,
                    owned: None,
                };
                hdr.id = self.alloc_op(tx, op)?;
                if let Some(Some(c)) = tx.conns.get_mut(idx) {
                    c.waiting += 1;
                }
            }
            let Some(Some(conn)) = tx.conns.get_mut(idx) else {
                return Err(Error::new(Errno::EIO, "shm: connection vanished"));
            };
            Self::write_inline(conn, slot, &hdr, &iov);
            if !t.delivery {
                act.complete_tx(t.ctx, t.cq_flags, t.want_cq, None);
            }
            return Ok(());
        }
        // One bounce chunk, nothing queued before it, no acknowledgement wanted: copied
        // now and complete at once, with no operation record (the eager common case;
        // the receiver delivers it straight from the chunk).
        if !t.delivery
            && conn.fifo.is_empty()
            && len <= conn.region.geometry().chunk_size
            && Self::put_fragment(conn, &iov, 0, len, |c| Slot {
                flags: hdr.flags,
                tag: hdr.tag,
                data: hdr.data,
                body: Body::Bounce {
                    total: len,
                    id: 0,
                    offset: 0,
                    chunk: c,
                    clen: len,
                },
            })
        {
            act.complete_tx(t.ctx, t.cq_flags, t.want_cq, None);
            return Ok(());
        }
        // Otherwise an inject is sent from a private copy, queued like any send.
        let (iov, owned) = if t.copy {
            let (iov, owned) = private_copy(&iov, len);
            (iov, Some(owned))
        } else {
            (iov, None)
        };
        let op = Op {
            conn: idx,
            ctx: t.ctx,
            cq_flags: t.cq_flags,
            want_cq: t.want_cq,
            iov,
            len,
            tag: hdr.tag,
            data: hdr.data,
            hflags: hdr.flags,
            sent: 0,
            stage: Stage::Queued,
            rma: None,
            owned,
        };
        let id = self.alloc_op(tx, op)?;
        if let Some(Some(c)) = tx.conns.get_mut(idx) {
            c.fifo.push_back(id as u32);
        }
        self.stream(act, tx, idx);
        self.engine.kick();
        Ok(())
    }

    fn drop_conn(&self, c: Conn) {
        let ring = c.region.ring(c.ring);
        if ring.claim().load(Ordering::Acquire) == c.claim {
            ring.state().store(state::CLOSED, Ordering::Release);
        }
    }

    /// Copy `n` bytes of `iov` from offset `from` into `conn`'s next bounce chunk and
    /// publish a slot for them (`slot`, given the chunk index). False, with nothing
    /// written, while that chunk or the ring is not free.
    fn put_fragment(
        conn: &mut Conn,
        iov: &IoList,
        from: usize,
        n: usize,
        slot_for: impl FnOnce(usize) -> Slot,
    ) -> bool {
        let ring = conn.region.ring(conn.ring);
        let chunks = conn.region.geometry().chunks;
        let small = n <= SMALL_BOUNCE;
        let c = if small { conn.small_chunk } else { conn.chunk };
        let bit = 1u32 << (c % region::MAX_CHUNKS);
        if conn.free_chunks & bit == 0 {
            for k in 0..conn.region.geometry().chunks.min(region::MAX_CHUNKS) {
                if ring.chunk_state(k).load(Ordering::Acquire) == 0 {
                    conn.free_chunks |= 1 << k;
                }
            }
            if conn.free_chunks & bit == 0 {
                return false;
            }
        }
        let Ok(slot) = Self::reserve_slot(conn) else {
            return false;
        };
        let ring = conn.region.ring(conn.ring);
        conn.free_chunks &= !bit;
        let map = conn.region.map();
        // SAFETY: the chunk lies inside the mapping (validated geometry) and holds
        // chunk_size ≥ n bytes (callers); the source buffers are the application's.
        unsafe { iov.gather(from, map.base().add(ring.chunk_off(c)), n) };
        ring.chunk_state(c).store(1, Ordering::Relaxed);
        let s = slot_for(c);
        let mut hdr = [0u8; proto::PARSE_LEN];
        proto::encode(&s, &mut hdr);
        let used = proto::encoded_len(&s.body);
        map.write_bytes(ring.slot_off(slot) + 8, &hdr[8..used]);
        conn.prod.publish(&ring);
        if small {
            conn.small_chunk = (c + 1) % chunks.clamp(1, SMALL_SPAN);
        } else {
            conn.chunk = (c + 1) % chunks.max(1);
        }
        true
    }

    /// Move the queued sends of connection `idx` on as far as resources allow.
    fn stream(&self, act: &Active, tx: &mut Tx, idx: usize) {
        'ops: loop {
            let Some(Some(conn)) = tx.conns.get_mut(idx) else {
                return;
            };
            let Some(&front) = conn.fifo.front() else {
                return;
            };
            let oi = front as usize;
            let Some(Some(op)) = tx.ops.get_mut(oi) else {
                conn.fifo.pop_front();
                continue;
            };
            let ring = conn.region.ring(conn.ring);
            let id = ((tx.gens[oi] as u64) << 32) | oi as u64;
            // A small message queued behind others goes inline when its turn comes.
            if op.rma.is_none() && op.len <= INLINE_CAP {
                let slot = match Self::reserve_slot(conn) {
                    Ok(i) => i,
                    Err(_) => break 'ops,
                };
                let ring = conn.region.ring(conn.ring);
                let s = Slot {
                    flags: op.hflags,
                    tag: op.tag,
                    data: op.data,
                    body: Body::Inline { len: op.len, id },
                };
                let off = ring.slot_off(slot);
                let mut hdr = [0u8; proto::PARSE_LEN];
                proto::encode(&s, &mut hdr);
                let map = conn.region.map();
                map.write_bytes(off + 8, &hdr[8..INLINE_OFF]);
                // SAFETY: the slot holds INLINE_CAP ≥ len bytes after INLINE_OFF inside
                // the mapping; the application's buffers are readable (C contract).
                unsafe { op.iov.gather(0, map.base().add(off + INLINE_OFF), op.len) };
                conn.prod.publish(&ring);
                conn.fifo.pop_front();
                if op.hflags & F_ACK != 0 {
                    op.stage = Stage::AwaitAck;
                    conn.waiting += 1;
                } else if let Some(op) = self.free_op(tx, oi) {
                    act.complete_tx(op.ctx, op.cq_flags, op.want_cq, None);
                }
                continue;
            }
            // Messages that fit one bounce chunk go eagerly through it (the send
            // completes without the receiver); those up to `cma_threshold` stream
            // through the chunks; longer ones use CMA once the receiver has probed it
            // successfully.
            let eager = op.len <= conn.region.geometry().chunk_size;
            let use_cma = !self.settings.disable_cma
                && !eager
                && op.rma.is_none()
                && op.len > self.settings.cma_threshold;
            let cma = ring.cma().load(Ordering::Acquire);
            if use_cma && cma == cma_state::UNKNOWN {
                return;
            }
            if use_cma && cma == cma_state::OK {
                let slot = match Self::reserve_slot(conn) {
                    Ok(i) => i,
                    Err(_) => break 'ops,
                };
                let ring = conn.region.ring(conn.ring);
                let mut riov = [(0u64, 0u64); proto::RTS_IOVS];
                for (d, s) in riov.iter_mut().zip(op.iov.slice()) {
                    *d = (s.0 as u64, s.1 as u64);
                }
                let s = Slot {
                    flags: op.hflags,
                    tag: op.tag,
                    data: op.data,
                    body: Body::Rts {
                        total: op.len,
                        id,
                        iov: riov,
                        niov: op.iov.len().max(1),
                    },
                };
                let mut hdr = [0u8; proto::PARSE_LEN];
                proto::encode(&s, &mut hdr);
                conn.region
                    .map()
                    .write_bytes(ring.slot_off(slot) + 8, &hdr[8..]);
                conn.prod.publish(&ring);
                op.stage = Stage::AwaitAck;
                conn.waiting += 1;
                conn.fifo.pop_front();
                continue;
            }
            // Bounce.
            let chunk_size = conn.region.geometry().chunk_size;
            while op.sent < op.len {
                let n = (op.len - op.sent).min(chunk_size);
                let (total, offset, rma) = (op.len, op.sent, op.rma);
                let (flags, tag, data) = (op.hflags, op.tag, op.data);
                let put = Self::put_fragment(conn, &op.iov, offset, n, |c| Slot {
                    flags,
                    tag,
                    data,
                    body: match rma {
                        Some((key, raddr)) => Body::WriteFrag {
                            total,
                            id,
                            key,
                            raddr,
                            offset,
                            chunk: c,
                            clen: n,
                        },
                        None => Body::Bounce {
                            total,
                            id,
                            offset,
                            chunk: c,
                            clen: n,
                        },
                    },
                });
                if !put {
                    break 'ops;
                }
                op.sent += n;
            }
            conn.fifo.pop_front();
            if op.hflags & F_ACK != 0 {
                op.stage = Stage::AwaitAck;
                conn.waiting += 1;
            } else if let Some(op) = self.free_op(tx, oi) {
                act.complete_tx(op.ctx, op.cq_flags, op.want_cq, None);
            }
        }
        // Stopped for want of room (the receiver frees slots and chunks as it reads),
        // or because the connection broke on the way: then what is queued on it can
        // never go, and fails now — FI_EPROTO for a corrupt ring, FI_ECONNRESET for a
        // peer gone (as the liveness check fails them).
        if let Some(Some(c)) = tx.conns.get(idx) {
            if c.dead {
                let why = c.why;
                self.fail_conn(act, tx, idx, why);
            }
        }
    }

    /// The send side's progress, once `tx_work` says there is some (kept out of line:
    /// an idle poll only runs the checks in `Progress::progress`).
    #[inline(never)]
    fn progress_tx(&self, act: &Active) -> usize {
        let Ok(mut g) = self.tx.try_lock() else {
            return 0;
        };
        let tx = &mut *g;
        tx.polls = tx.polls.wrapping_add(1);
        let check = tx.polls.is_multiple_of(256) && tx.last_check.elapsed() >= LIVENESS_EVERY;
        if check {
            tx.last_check = Instant::now();
        }
        let mut work = 0;
        for idx in 0..tx.conns.len() {
            let Some(Some(conn)) = tx.conns.get_mut(idx) else {
                continue;
            };
            if conn.waiting == 0 && conn.fifo.is_empty() {
                continue;
            }
            // Acks.
            let mut acks: [(u64, i32); 16] = [(0, 0); 16];
            let mut na = 0;
            {
                let ring = conn.region.ring(conn.ring);
                let ar = ring.acks();
                while na < acks.len() {
                    let Some(i) = conn.acks.peek(&ar) else {
                        break;
                    };
                    let id = ring.ack_id(i).load(Ordering::Relaxed);
                    let st = ring.ack_status(i).load(Ordering::Relaxed) as i32;
                    conn.acks.release(&ar);
                    acks[na] = (id, st);
                    na += 1;
                }
            }
            for &(id, st) in &acks[..na] {
                let oi = (id & 0xffff_ffff) as usize;
                let ok = matches!(tx.ops.get(oi), Some(Some(op))
                    if op.conn == idx && op.stage == Stage::AwaitAck
                        && tx.gens.get(oi).copied() == Some((id >> 32) as u32));
                if !ok {
                    self.corrupt.fetch_add(1, Ordering::Relaxed);
                    ofi_core::ofi_warn!(
                        crate::NAME,
                        "ep_data",
                        "ack for unknown operation {id:#x} ignored"
                    );
                    continue;
                }
                if let Some(Some(c)) = tx.conns.get_mut(idx) {
                    c.waiting = c.waiting.saturating_sub(1);
                }
                if let Some(op) = self.free_op(tx, oi) {
                    // Read from the peer's region: an FI code or FI_EPROTO.
                    let err = Errno::from_peer_status(i64::from(st));
                    act.complete_tx(op.ctx, op.cq_flags, op.want_cq, err);
                }
                work += 1;
            }
            self.stream(act, tx, idx);
            if check {
                let dead = match tx.conns.get(idx) {
                    Some(Some(c)) => !c.region.owner_alive(),
                    _ => false,
                };
                if dead {
                    work += self.fail_conn(act, tx, idx, Errno::ECONNRESET);
                }
            }
        }
        work
    }

    /// Fail every operation of connection `idx` (its peer is gone).
    fn fail_conn(&self, act: &Active, tx: &mut Tx, idx: usize, err: Errno) -> usize {
        if let Some(Some(c)) = tx.conns.get_mut(idx) {
            c.dead = true;
            c.why = err;
            c.fifo.clear();
            c.waiting = 0;
        }
        let mut n = 0;
        for oi in 0..tx.ops.len() {
            if matches!(&tx.ops[oi], Some(op) if op.conn == idx) {
                if let Some(op) = self.free_op(tx, oi) {
                    act.complete_tx(op.ctx, op.cq_flags, op.want_cq, Some(err));
                    n += 1;
                }
            }
        }
        n
    }

    // ---------------------------------------------------------------- receive side

    #[inline]
    fn src_of(&self, act: &Active, rr: &mut RxRing) -> u64 {
        if !self.need_src {
            return ADDR_NOTAVAIL;
        }
        Self::src_lookup(act, rr)
    }

    /// [`Self::src_of`] when the source is wanted (out of line).
    #[inline(never)]
    fn src_lookup(act: &Active, rr: &mut RxRing) -> u64 {
        if rr.src != ADDR_NOTAVAIL
            && act
                .av
                .with_entry(rr.src, |e| e.addr == &rr.addr)
                .unwrap_or(false)
        {
            return rr.src;
        }
        rr.src = act.av.reverse_lookup(&rr.addr).unwrap_or(ADDR_NOTAVAIL);
        rr.src
    }

    fn push_ack(&self, rx: &mut Rx, ring: usize, claim: u64, id: u64, status: i32) {
        let Some(rr) = rx.rings.get_mut(ring) else {
            return;
        };
        if !rr.on || rr.claim != claim {
            return;
        }
        rr.backlog.push_back((id, status));
        Self::flush_acks(&self.region, ring, rr);
        if !rr.backlog.is_empty() {
            self.peek.more.store(true, Ordering::Release);
        }
    }

    fn flush_acks(region: &Region, r: usize, rr: &mut RxRing) {
        let ring = region.ring(r);
        let ar = ring.acks();
        while let Some(&(id, st)) = rr.backlog.front() {
            match rr.ackp.reserve(&ar) {
                Ok(Some(i)) => {
                    ring.ack_id(i).store(id, Ordering::Relaxed);
                    ring.ack_status(i).store(st as u32, Ordering::Relaxed);
                    rr.ackp.publish(&ar);
                    rr.backlog.pop_front();
                }
                _ => return,
            }
        }
    }

    /// CMA-read an RTS into `dst` (the placement's part of the receive buffer).
    ///
    /// # Safety
    /// `dst` describes memory valid for writes with no Rust reference to it live (a
    /// posted receive buffer: the application left it to the provider until the
    /// receive completes).
    unsafe fn cma_read(pid: i32, dst: IoList, iov: &[(u64, u64)]) -> i32 {
        // SAFETY: the caller's contract for `dst`.
        match unsafe { ofi_kit::cma::readv(pid, dst.slice(), iov) } {
            Ok(n) if n == dst.total() => 0,
            Ok(_) => Errno::EIO.0,
            Err(e) if e == libc::ESRCH => Errno::ECONNRESET.0,
            Err(_) => Errno::EIO.0,
        }
    }

    /// Deliver an unexpected message `inc` (held as `payload`) to the receive `to`
    /// that matched it.
    fn deliver_unexp(
        &self,
        act: &Active,
        rx: &mut Rx,
        to: Matched<'_>,
        inc: &Incoming,
        payload: Unexp,
    ) {
        let Matched {
            recv,
            place,
            released,
        } = to;
        match payload {
            Unexp::Data { data } => {
                let n = place.len.min(data.len());
                // SAFETY: `data` holds n bytes; the receive buffer is the
                // application's, writable for its length (placement within it).
                unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
                act.complete_rx(recv, place, inc, released, None);
            }
            Unexp::Rts {
                ring,
                claim,
                pid,
                iov,
                niov,
                id,
            } => {
                let dst = recv.buf.sub(place.offset, place.len);
                // SAFETY: `dst` is the placement's part of a posted receive buffer,
                // which the application left writable to the provider until the
                // receive completes (the C API's contract of fi_recv); the provider
                // holds it only as addresses.
                let st = unsafe { Self::cma_read(pid, dst, &iov[..niov]) };
                let err = if st == 0 { None } else { Some(Errno(st)) };
                act.complete_rx(recv, place, inc, released, err);
                self.push_ack(rx, ring, claim, id, st);
            }
        }
    }

    /// Carry out the RMA access `a` at this (target) endpoint: check it against the
    /// MR table, copy with CMA or from inline data, count it and report remote CQ
    /// data. Returns the ack status.
    ///
    /// # Safety
    /// An [`RmaSource::Inline`] pointer is valid for reads of `a.total` bytes (inside a
    /// slot of a mapped region).
    unsafe fn rma_target(&self, act: &Active, a: &RmaAccess<'_>) -> i32 {
        let (read, total, key, raddr) = (a.read, a.total, a.key, a.raddr);
        let access = if read {
            OpFlags::REMOTE_READ
        } else {
            OpFlags::REMOTE_WRITE
        };
        let region = match self.mr.lookup_remote(key, raddr, total, access) {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let mut segs = [(0usize, 0usize); IOV_LIMIT];
        let mut n = 0;
        for seg in region.segments() {
            if n == segs.len() {
                return Errno::EINVAL.0;
            }
            segs[n] = seg;
            n += 1;
        }
        let segs = IoList::from_pairs(&segs[..n]);
        let st = match a.source {
            RmaSource::Cma { .. } if self.settings.disable_cma => Errno::EOPNOTSUPP.0,
            RmaSource::Cma { pid, iov } => {
                // SAFETY: the segments are the registration's memory, which the MR table
                // checked covers `total` bytes with this access; a registration leaves
                // its memory to remote access until it is closed (fi_mr(3)), and the
                // provider holds it only as addresses. The initiator's buffers (ours
                // too when both endpoints live in this process) belong to its pending
                // fi_read, whose contract keeps them valid and untouched until it
                // completes, after this copy.
                let r = unsafe {
                    if read {
                        ofi_kit::cma::writev(pid, segs.slice(), iov)
                    } else {
                        ofi_kit::cma::readv(pid, segs.slice(), iov)
                    }
                };
                match r {
                    Ok(k) if k == total => 0,
                    Ok(_) => Errno::EIO.0,
                    Err(e) if e == libc::ESRCH => Errno::ECONNRESET.0,
                    Err(e) if e == libc::EPERM || e == libc::ENOSYS => Errno::EOPNOTSUPP.0,
                    Err(_) => Errno::EIO.0,
                }
            }
            RmaSource::Inline(src) => {
                // SAFETY: `src` holds `total` bytes inside the slot; the segments are
                // the registered region's memory, checked by the MR table for `total`.
                unsafe { segs.scatter(0, src, total) };
                0
            }
        };
        if st == 0 {
            region.count_access();
            if let Some(data) = a.data {
                if let Some(b) = &act.rxcq {
                    let e = CqTaggedEntry {
                        op_context: 0,
                        flags: (OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA)
                            .bits(),
                        len: total,
                        buf: std::ptr::null_mut(),
                        data,
                        tag: 0,
                    };
                    let _ = b.cq.push(&e, ADDR_NOTAVAIL);
                }
            }
        }
        st
    }

    /// Apply an atomic at this (target) endpoint with the kit's engine: check it
    /// against the MR table, fetch operand and compare (inline or with CMA), apply under
    /// the process's atomic locks, and write fetched values back with CMA. Returns the
    /// ack status.
    fn atomic_target(&self, pid: i32, a: &AtomicReq) -> i32 {
        let Some(bytes) = a.count.checked_mul(a.dt.size()) else {
            return Errno::EMSGSIZE.0;
        };
        let fetch = a.kind != AtomicKind::Base;
        let access = if a.op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else if fetch {
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE
        } else {
            OpFlags::REMOTE_WRITE
        };
        let region = match self.mr.lookup_remote(a.key, a.raddr, bytes, access) {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let mut segs = region.segments();
        let seg = match (segs.next(), segs.next()) {
            (Some(s), None) => s,
            (None, _) if bytes == 0 => (0, 0),
            _ => return Errno::EINVAL.0,
        };
        let operand_len = if a.op == AtomicOp::AtomicRead {
            0
        } else {
            bytes
        };
        let compare_len = if a.kind == AtomicKind::Compare {
            bytes
        } else {
            0
        };
        if self.settings.disable_cma && (a.inline.is_none() || (fetch && bytes > 0)) {
            return Errno::EOPNOTSUPP.0;
        }
        let mut data = vec![0u8; operand_len + compare_len];
        match a.inline {
            Some(src) => {
                // SAFETY: `src` holds operand + compare bytes inside the slot (checked
                // by parse); `data` holds as many.
                unsafe { std::ptr::copy_nonoverlapping(src, data.as_mut_ptr(), data.len()) };
            }
            None => {
                let remote = [
                    (a.bufs[0], operand_len as u64),
                    (a.bufs[1], compare_len as u64),
                ];
                let (o, c) = data.split_at_mut(operand_len);
                let local = [
                    (o.as_mut_ptr() as usize, o.len()),
                    (c.as_mut_ptr() as usize, c.len()),
                ];
                for (l, r) in local.iter().zip(remote.iter()) {
                    if l.1 == 0 {
                        continue;
                    }
                    // SAFETY: `l` points into `data` (derived from `o`/`c`), a live
                    // Vec of this frame that nothing else touches during the call.
                    match unsafe {
                        ofi_kit::cma::readv(pid, std::slice::from_ref(l), std::slice::from_ref(r))
                    } {
                        Ok(n) if n == l.1 => {}
                        Err(e) if e == libc::EPERM || e == libc::ENOSYS => {
                            return Errno::EOPNOTSUPP.0
                        }
                        _ => return Errno::EIO.0,
                    }
                }
            }
        }
        let (operand, compare) = data.split_at(operand_len);
        let mut result = vec![0u8; if fetch { bytes } else { 0 }];
        // The registered bytes may be written at any moment by a peer's CMA copy or
        // the application, so they are never borrowed as `&mut [u8]`: they are copied
        // out and back through raw pointers while the stripe locks serialise every
        // atomic on them in this process.
        let locks = ATOMIC_LOCKS.get_or_init(AtomicLocks::new);
        let held = locks.lock(seg.0 as u64, bytes);
        let mut before = vec![0u8; bytes];
        if bytes > 0 {
            // SAFETY: the MR table checked that [seg.0, seg.0 + bytes) lies inside a
            // live registration granting this access; `before` holds `bytes`.
            unsafe {
                std::ptr::copy_nonoverlapping(seg.0 as *const u8, before.as_mut_ptr(), bytes)
            };
        }
        let mut target = before.clone();
        if let Err(e) = ofi_kit::atomic::apply(
            a.op,
            a.dt,
            a.kind,
            &mut target,
            operand,
            compare,
            &mut result,
            a.count,
        ) {
            return e.code().0;
        }
        if target != before {
            // SAFETY: as above; an operation that changes the target was checked for
            // REMOTE_WRITE (only an atomic read lacks it, and it changes nothing).
            unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), seg.0 as *mut u8, bytes) };
        }
        drop(held);
        region.count_access();
        if fetch && bytes > 0 {
            let local = [(result.as_ptr() as usize, bytes)];
            let remote = [(a.bufs[2], bytes as u64)];
            // SAFETY: `local` is `result`, a live Vec, only read; the remote range is
            // the result buffer of the initiator's pending fetching atomic (in this
            // process too when both endpoints live here), valid for writes and left
            // untouched until that operation completes, after this copy.
            match unsafe { ofi_kit::cma::writev(pid, &local, &remote) } {
                Ok(n) if n == bytes => {}
                Err(e) if e == libc::EPERM || e == libc::ENOSYS => return Errno::EOPNOTSUPP.0,
                _ => return Errno::EIO.0,
            }
        }
        0
    }

    /// Start the atomic `req`; `bufs` are the addresses of its operand, compare and
    /// result buffers (0 where it has none).
    fn atomic(&self, act: &Active, bufs: [u64; 3], req: &AtomicRequest<'_>) -> Result<()> {
        let (count, dest, raddr, key, dt, op, kind, ctx, flags) = (
            req.remote.count,
            req.peer,
            req.remote.addr,
            req.remote.key,
            req.datatype,
            req.op,
            req.kind,
            req.context,
            req.flags,
        );
        // `FI_INJECT` on a base atomic message: the operands are free on return.
        let inject =
            req.inject || (kind == AtomicKind::Base && req.flags.contains(OpFlags::INJECT));
        let max = self.atomic_max(dt, op, kind)?;
        if count > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("shm: {count} atomic elements exceed the limit of {max}"),
            ));
        }
        let data_len = proto::atomic_data_len(op, dt, kind, count)
            .ok_or_else(|| Error::new(Errno::EMSGSIZE, "shm: atomic too large"))?;
        let inline = data_len <= proto::ATOMIC_INLINE_CAP;
        if inject && !inline {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "shm: an inject atomic carries at most {} bytes of operands (one slot)",
                    proto::ATOMIC_INLINE_CAP
                ),
            ));
        }
        let want_cq = !inject
            && match &act.txcq {
                Some(b) => !b.selective || flags.contains(OpFlags::COMPLETION),
                None => false,
            };
        if want_cq {
            if let Some(b) = &act.txcq {
                if !b.cq.has_room() {
                    return Err(Error::code_only(Errno::EAGAIN));
                }
            }
        }
        let cq_flags = (OpFlags::ATOMIC
            | if kind == AtomicKind::Base {
                OpFlags::WRITE
            } else {
                OpFlags::READ
            })
        .bits();
        let mut g = lock(&self.tx);
        let tx = &mut *g;
        let idx = self.conn_for(act, tx, dest)?;
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        if !conn.fifo.is_empty() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let slot = Self::reserve_slot(conn)?;
        let id = if inject {
            0
        } else {
            let op = Op {
                conn: idx,
                ctx,
                cq_flags,
                want_cq,
                iov: IoList::one(0, 0),
                len: 0,
                tag: 0,
                data: 0,
                hflags: 0,
                sent: 0,
                stage: Stage::AwaitAck,
                rma: None,
                owned: None,
            };
            let id = self.alloc_op(tx, op)?;
            if let Some(Some(c)) = tx.conns.get_mut(idx) {
                c.waiting += 1;
            }
            id
        };
        let Some(Some(conn)) = tx.conns.get_mut(idx) else {
            return Err(Error::new(Errno::EIO, "shm: connection vanished"));
        };
        let s = Slot {
            flags: if inject { 0 } else { F_ACK },
            tag: 0,
            data: 0,
            body: Body::Atomic {
                count,
                id,
                key,
                raddr,
                op,
                dt,
                kind,
                inline,
                bufs,
            },
        };
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let mut hdr = [0u8; proto::PARSE_LEN];
        proto::encode(&s, &mut hdr);
        let map = conn.region.map();
        map.write_bytes(off + 8, &hdr[8..proto::ATOMIC_INLINE_OFF]);
        if inline {
            let bytes = count * dt.size();
            let operand_len = if op == AtomicOp::AtomicRead { 0 } else { bytes };
            let compare_len = if kind == AtomicKind::Compare {
                bytes
            } else {
                0
            };
            // SAFETY: operand + compare ≤ ATOMIC_INLINE_CAP bytes fit the slot after
            // ATOMIC_INLINE_OFF; the application's buffers hold `bytes` each (C contract).
            unsafe {
                let dst = map.base().add(off + proto::ATOMIC_INLINE_OFF);
                if operand_len > 0 {
                    std::ptr::copy_nonoverlapping(bufs[0] as *const u8, dst, operand_len);
                }
                if compare_len > 0 {
                    std::ptr::copy_nonoverlapping(
                        bufs[1] as *const u8,
                        dst.add(operand_len),
                        compare_len,
                    );
                }
            }
        }
        conn.prod.publish(&ring);
        Ok(())
    }

    /// The most elements of one atomic (the engine's answer, clamped to max_msg_size).
    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(self.settings.max_msg_size / dt.size().max(1)))
    }

    /// Copy one RMA write fragment (`clen` bytes at `src`, in the ring's chunk) to
    /// `raddr + offset` of region `key`, after checking it in the MR table. Returns the
    /// status (0 or an `FI_*` code).
    ///
    /// # Safety
    /// `src` is valid for reads of `clen` bytes (a chunk of a mapped region).
    unsafe fn write_fragment(
        &self,
        key: u64,
        raddr: u64,
        offset: usize,
        src: *const u8,
        clen: usize,
    ) -> i32 {
        let Some(a) = raddr.checked_add(offset as u64) else {
            return Errno::EFAULT.0;
        };
        let region = match self.mr.lookup_remote(key, a, clen, OpFlags::REMOTE_WRITE) {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let mut segs = [(0usize, 0usize); IOV_LIMIT];
        let mut n = 0;
        for seg in region.segments() {
            if n == segs.len() {
                return Errno::EINVAL.0;
            }
            segs[n] = seg;
            n += 1;
        }
        // SAFETY: the MR table checked [a, a + clen) inside a live registration granting
        // remote writes; `src` holds `clen` bytes (the caller's chunk).
        unsafe { IoList::from_pairs(&segs[..n]).scatter(0, src, clen) };
        0
    }

    #[cold]
    #[inline(never)]
    fn attach_rings(&self, rx: &mut Rx) {
        let geo = self.region.geometry();
        for r in 0..geo.rings {
            if rx.rings[r].on {
                continue;
            }
            let ring = self.region.ring(r);
            // A sender may have sent and closed (or died) before we first looked: its
            // messages are still to be drained.
            let st = ring.state().load(Ordering::Acquire);
            if st != state::READY && st != state::CLOSED {
                continue;
            }
            let Some((pid, name, pa, pv)) = ring.read_identity() else {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let cma = if self.settings.disable_cma || !ofi_kit::cma::probe(pid, pa, pv) {
                cma_state::REFUSED
            } else {
                cma_state::OK
            };
            ring.cma().store(cma, Ordering::Release);
            let rr = &mut rx.rings[r];
            rr.on = true;
            rr.claim = ring.claim().load(Ordering::Acquire);
            rr.cons = Consumer::new(geo.slots, ring.tail_word().load(Ordering::Relaxed));
            rr.ackp = Producer::new(geo.slots, ring.ack_tail_word().load(Ordering::Acquire));
            rr.pid = pid;
            rr.start = region::process_start(pid).unwrap_or(0);
            rr.addr = Address::Str(format!("{ADDR_PREFIX}{name}"));
            rr.src = ADDR_NOTAVAIL;
            rr.asm = None;
            rr.wr = None;
            rr.backlog.clear();
            rx.active.push(r);
        }
    }

    fn release_ring(&self, act: &Active, rx: &mut Rx, r: usize) {
        let ring = self.region.ring(r);
        let Some(rr) = rx.rings.get_mut(r) else {
            return;
        };
        if let Some(a) = rr.asm.take() {
            if let AsmTarget::Recv {
                recv,
                place,
                released,
            } = a.target
            {
                act.complete_rx(&recv, place, &a.inc, released, Some(Errno::ECONNRESET));
            }
        }
        let rr = &mut rx.rings[r];
        rr.on = false;
        rr.backlog.clear();
        for c in 0..self.region.geometry().chunks {
            ring.chunk_state(c).store(0, Ordering::Relaxed);
        }
        ring.cma().store(cma_state::UNKNOWN, Ordering::Relaxed);
        ring.ack_tail_word()
            .store(rr.ackp.head(), Ordering::Relaxed);
        ring.state().store(state::FREE, Ordering::Release);
        ring.claim().store(0, Ordering::Release);
        rx.active.retain(|&x| x != r);
    }

    /// Parse and handle slot `slot_off` of ring `r` when it is not a valid inline slot
    /// (out of line: it keeps the large `Slot` off the small-message path); true when
    /// the slot is consumed (a bad one is counted and skipped).
    #[inline(never)]
    fn handle_other(
        &self,
        act: &Active,
        rx: &mut Rx,
        r: usize,
        slot_off: usize,
        geo: &region::Geometry,
        max_msg: usize,
    ) -> bool {
        let mut hdr = [0u8; proto::PARSE_LEN];
        self.region.map().read_bytes(slot_off, &mut hdr);
        match proto::parse(&hdr, geo, max_msg) {
            Ok(s) => self.handle_slot(act, rx, r, slot_off, s),
            Err(why) => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                ofi_core::ofi_warn!(
                    crate::NAME,
                    "ep_data",
                    "ring {r}: bad slot ({why}); skipped"
                );
                true
            }
        }
    }

    /// Deliver the inline message of slot `slot_off` of ring `r` (its header checked by
    /// `proto::parse_inline` or `proto::parse`); false if it must wait (no room for an
    /// unexpected message).
    #[inline]
    fn handle_inline(
        &self,
        act: &Active,
        rx: &mut Rx,
        r: usize,
        slot_off: usize,
        h: &proto::InlineHdr,
    ) -> bool {
        if rx.rings[r].asm.is_some() {
            return self.inline_mid_bounce(r);
        }
        let claim = rx.rings[r].claim;
        let inc = Incoming {
            src: self.src_of(act, &mut rx.rings[r]),
            tag: h.tag,
            len: h.len,
            data: if h.flags & F_DATA != 0 {
                Some(h.data)
            } else {
                None
            },
            tagged: h.flags & F_TAGGED != 0,
        };
        let ack = if h.flags & F_ACK != 0 {
            Some((r, claim, h.id))
        } else {
            None
        };
        // SAFETY: the payload lies inside the slot (len ≤ INLINE_CAP checked by the
        // parser), inside the mapping.
        unsafe {
            let payload = self.region.map().base().add(slot_off + INLINE_OFF);
            self.deliver_whole(act, rx, &inc, ack, payload)
        }
    }

    /// An inline slot inside a bounce message: counted, logged and skipped (true).
    #[cold]
    #[inline(never)]
    fn inline_mid_bounce(&self, r: usize) -> bool {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
        ofi_core::ofi_warn!(
            crate::NAME,
            "ep_data",
            "ring {r}: inline slot in the middle of a bounce message; slot skipped"
        );
        true
    }

    /// Deliver message `inc`, whose `inc.len` bytes lie at `payload`, at once: into
    /// the matching receive, or copied into the unexpected queue (with `ack`, the
    /// acknowledgement owed once it is received). False if it must wait (no room for
    /// an unexpected message); otherwise the payload is no longer needed on return.
    ///
    /// # Safety
    /// `payload` is valid for reads of `inc.len` bytes.
    unsafe fn deliver_whole(
        &self,
        act: &Active,
        rx: &mut Rx,
        inc: &Incoming,
        ack: Option<(usize, u64, u64)>,
        payload: *const u8,
    ) -> bool {
        let deliver = |recv: &PostedRecv<IoList>, place: Placement, released: bool| {
            // SAFETY: the payload per the contract (place.len ≤ inc.len); the receive
            // buffer is the application's.
            unsafe { scatter(&recv.buf, place.offset, payload, place.len) };
            act.complete_rx(recv, place, inc, released, None);
        };
        // An ordinary receive is used where it lies in its queue (it is large: no
        // copies); other answers come back from the matcher as they are.
        match rx
            .m
            .match_incoming_with(inc, |recv, place| deliver(recv, place, false))
        {
            Ok(()) => {}
            Err(Match::Recv { ref recv, place }) => deliver(recv, place, false),
            Err(Match::Multi { ref buf, place }) => deliver(buf.recv(), place, buf.is_released()),
            Err(Match::Unexpected) => {
                let len = inc.len;
                if !rx.m.has_room_for_unexpected(len) {
                    return false;
                }
                let mut data = vec![0u8; len];
                // SAFETY: the payload per the contract; `data` holds len bytes.
                unsafe { std::ptr::copy_nonoverlapping(payload, data.as_mut_ptr(), len) };
                if rx.m.push_unexpected(*inc, Unexp::Data { data }).is_err() {
                    return false;
                }
            }
        }
        // Placed or buffered is taken in: libfabric's delivery complete (the data no
        // longer needs the sender's slot or chunk).
        if let Some((ring, claim, id)) = ack {
            self.push_ack(rx, ring, claim, id, 0);
        }
        true
    }

    /// Handle one slot; `false`: stall the ring (leave the slot for later).
    fn handle_slot(&self, act: &Active, rx: &mut Rx, r: usize, slot_off: usize, s: Slot) -> bool {
        let map = self.region.map();
        let claim = rx.rings[r].claim;
        let src = self.src_of(act, &mut rx.rings[r]);
        let mk = |len: usize| Incoming {
            src,
            tag: s.tag,
            len,
            data: if s.flags & F_DATA != 0 {
                Some(s.data)
            } else {
                None
            },
            tagged: s.flags & F_TAGGED != 0,
        };
        let corrupt = |why: &str| {
            self.corrupt.fetch_add(1, Ordering::Relaxed);
            ofi_core::ofi_warn!(crate::NAME, "ep_data", "ring {r}: {why}; slot skipped");
            true
        };
        match s.body {
            Body::Inline { len, id } => {
                let h = proto::InlineHdr {
                    flags: s.flags,
                    len,
                    tag: s.tag,
                    data: s.data,
                    id,
                };
                self.handle_inline(act, rx, r, slot_off, &h)
            }
            Body::Rts {
                total,
                id,
                iov,
                niov,
            } => {
                if rx.rings[r].asm.is_some() {
                    return corrupt("RTS slot in the middle of a bounce message");
                }
                let inc = mk(total);
                let pid = rx.rings[r].pid;
                let payload = Unexp::Rts {
                    ring: r,
                    claim,
                    pid,
                    iov,
                    niov,
                    id,
                };
                let (recv, place, released) = match rx.m.match_incoming(&inc) {
                    Match::Recv { recv, place } => (recv, place, false),
                    Match::Multi { buf, place } => {
                        let rel = buf.is_released();
                        (buf.recv().clone(), place, rel)
                    }
                    Match::Unexpected => {
                        return rx.m.push_unexpected_sized(inc, payload, 64).is_ok();
                    }
                };
                self.deliver_unexp(act, rx, Matched::new(&recv, place, released), &inc, payload);
                true
            }
            Body::Rma {
                read,
                total,
                id,
                key,
                raddr,
                iov,
                niov,
            } => {
                if rx.rings[r].asm.is_some() {
                    return corrupt("RMA slot in the middle of a bounce message");
                }
                let pid = rx.rings[r].pid;
                let access = RmaAccess {
                    source: RmaSource::Cma {
                        pid,
                        iov: &iov[..niov],
                    },
                    read,
                    total,
                    key,
                    raddr,
                    data: (s.flags & F_DATA != 0).then_some(s.data),
                };
                // SAFETY: no inline pointer.
                let st = unsafe { self.rma_target(act, &access) };
                self.push_ack(rx, r, claim, id, st);
                true
            }
            Body::Atomic {
                count,
                id,
                key,
                raddr,
                op,
                dt,
                kind,
                inline,
                bufs,
            } => {
                if rx.rings[r].asm.is_some() {
                    return corrupt("atomic slot in the middle of a bounce message");
                }
                let pid = rx.rings[r].pid;
                // SAFETY: inline data lies inside the slot (length checked by parse
                // against ATOMIC_INLINE_CAP), inside the mapping.
                let src = unsafe { map.base().add(slot_off + proto::ATOMIC_INLINE_OFF) };
                let req = AtomicReq {
                    count,
                    key,
                    raddr,
                    op,
                    dt,
                    kind,
                    bufs,
                    inline: if inline { Some(src) } else { None },
                };
                let st = self.atomic_target(pid, &req);
                if s.flags & F_ACK != 0 {
                    self.push_ack(rx, r, claim, id, st);
                }
                true
            }
            Body::WriteFrag {
                total,
                id,
                key,
                raddr,
                offset,
                chunk,
                clen,
            } => {
                let ring = self.region.ring(r);
                if rx.rings[r].asm.is_some() {
                    ring.chunk_state(chunk).store(0, Ordering::Release);
                    return corrupt("RMA fragment in the middle of a bounce message");
                }
                if offset == 0 {
                    // Check the whole range first, so a write that would fail part way
                    // leaves the target untouched.
                    let st = match self
                        .mr
                        .lookup_remote(key, raddr, total, OpFlags::REMOTE_WRITE)
                    {
                        Ok(_) => 0,
                        Err(e) => e.code().0,
                    };
                    rx.rings[r].wr = Some((id, st));
                }
                let Some((wid, mut st)) = rx.rings[r].wr else {
                    ring.chunk_state(chunk).store(0, Ordering::Release);
                    return corrupt("RMA fragment without a write");
                };
                if wid != id {
                    ring.chunk_state(chunk).store(0, Ordering::Release);
                    return corrupt("RMA fragment of another write");
                }
                if st == 0 {
                    // SAFETY: chunk < chunks and clen <= chunk_size were checked by parse,
                    // so the chunk lies inside the mapping.
                    let src = unsafe { map.base().add(ring.chunk_off(chunk)) };
                    // SAFETY: `src` holds `clen` bytes of the chunk (see above).
                    st = unsafe { self.write_fragment(key, raddr, offset, src, clen) };
                }
                ring.chunk_state(chunk).store(0, Ordering::Release);
                rx.rings[r].wr = Some((id, st));
                if offset + clen < total {
                    return true;
                }
                rx.rings[r].wr = None;
                if st == 0 {
                    if let Ok(region) =
                        self.mr
                            .lookup_remote(key, raddr, total, OpFlags::REMOTE_WRITE)
                    {
                        region.count_access();
                    }
                    if s.flags & F_DATA != 0 {
                        if let Some(b) = &act.rxcq {
                            let e = CqTaggedEntry {
                                op_context: 0,
                                flags: (OpFlags::RMA
                                    | OpFlags::REMOTE_WRITE
                                    | OpFlags::REMOTE_CQ_DATA)
                                    .bits(),
                                len: total,
                                buf: std::ptr::null_mut(),
                                data: s.data,
                                tag: 0,
                            };
                            let _ = b.cq.push(&e, ADDR_NOTAVAIL);
                        }
                    }
                }
                if s.flags & F_ACK != 0 {
                    self.push_ack(rx, r, claim, id, st);
                }
                true
            }
            Body::WriteInline {
                len,
                id,
                key,
                raddr,
            } => {
                if rx.rings[r].asm.is_some() {
                    return corrupt("RMA slot in the middle of a bounce message");
                }
                // SAFETY: the data lies inside the slot (len ≤ RMA_INLINE_CAP checked by
                // parse), inside the mapping.
                let src = unsafe { map.base().add(slot_off + proto::RMA_INLINE_OFF) };
                let access = RmaAccess {
                    source: RmaSource::Inline(src),
                    read: false,
                    total: len,
                    key,
                    raddr,
                    data: (s.flags & F_DATA != 0).then_some(s.data),
                };
                // SAFETY: `src` holds `len` bytes of the slot (see above).
                let st = unsafe { self.rma_target(act, &access) };
                if s.flags & F_ACK != 0 {
                    self.push_ack(rx, r, claim, id, st);
                }
                true
            }
            Body::Bounce {
                total,
                id,
                offset,
                chunk,
                clen,
            } => {
                let ring = self.region.ring(r);
                if offset == 0 && clen == total && rx.rings[r].asm.is_none() {
                    // The whole message in one chunk (every eager send): delivered
                    // straight from the chunk, as an inline slot is.
                    let inc = mk(total);
                    let ack = (s.flags & F_ACK != 0).then_some((r, claim, id));
                    // SAFETY: chunk < chunks and clen ≤ chunk_size were checked by
                    // parse, so the chunk's `total` bytes lie inside the mapping.
                    let done = unsafe {
                        let src = map.base().add(ring.chunk_off(chunk));
                        self.deliver_whole(act, rx, &inc, ack, src)
                    };
                    if done {
                        ring.chunk_state(chunk).store(0, Ordering::Release);
                    }
                    return done;
                }
                if offset == 0 {
                    if rx.rings[r].asm.is_some() {
                        ring.chunk_state(chunk).store(0, Ordering::Release);
                        return corrupt("a new bounce message before the last one ended");
                    }
                    let inc = mk(total);
                    let target = match rx.m.match_incoming(&inc) {
                        Match::Recv { recv, place } => AsmTarget::Recv {
                            recv,
                            place,
                            released: false,
                        },
                        Match::Multi { buf, place } => {
                            let released = buf.is_released();
                            AsmTarget::Recv {
                                recv: buf.recv().clone(),
                                place,
                                released,
                            }
                        }
                        Match::Unexpected => {
                            if !rx.m.has_room_for_unexpected(total) {
                                return false;
                            }
                            AsmTarget::Unexp(vec![0u8; total])
                        }
                    };
                    rx.rings[r].asm = Some(Asm {
                        id,
                        got: 0,
                        inc,
                        ack: s.flags & F_ACK != 0,
                        target,
                    });
                }
                let Some(a) = rx.rings[r].asm.as_mut() else {
                    ring.chunk_state(chunk).store(0, Ordering::Release);
                    return corrupt("bounce fragment without a message");
                };
                if a.id != id || a.got != offset || a.inc.len != total {
                    ring.chunk_state(chunk).store(0, Ordering::Release);
                    return corrupt("bounce fragment out of sequence");
                }
                // SAFETY: chunk < chunks and clen ≤ chunk_size were checked by parse,
                // so the chunk lies inside the mapping.
                let src = unsafe { map.base().add(ring.chunk_off(chunk)) };
                let n = if total == 0 { 0 } else { clen };
                match &mut a.target {
                    AsmTarget::Recv { recv, place, .. } => {
                        let room = place.len.saturating_sub(offset).min(n);
                        // SAFETY: the receive buffer is the application's; `room`
                        // stays inside the placement.
                        unsafe { recv.buf.scatter(place.offset + offset, src, room) };
                    }
                    AsmTarget::Unexp(v) => {
                        if let Some(d) = v.get_mut(offset..offset + n) {
                            // SAFETY: `d` holds n bytes; the chunk holds ≥ n.
                            unsafe { std::ptr::copy_nonoverlapping(src, d.as_mut_ptr(), n) };
                        }
                    }
                }
                ring.chunk_state(chunk).store(0, Ordering::Release);
                a.got += n;
                if a.got < total {
                    return true;
                }
                let Some(a) = rx.rings[r].asm.take() else {
                    return true;
                };
                let ack = if a.ack { Some((r, claim, a.id)) } else { None };
                match a.target {
                    AsmTarget::Recv {
                        recv,
                        place,
                        released,
                    } => {
                        act.complete_rx(&recv, place, &a.inc, released, None);
                        if let Some((ring, claim, id)) = ack {
                            self.push_ack(rx, ring, claim, id, 0);
                        }
                    }
                    AsmTarget::Unexp(data) => {
                        // A receive may have been posted while the message streamed in.
                        let inc = a.inc;
                        let payload = Unexp::Data { data };
                        let m = match rx.m.match_incoming(&inc) {
                            Match::Recv { recv, place } => Some((recv, place, false)),
                            Match::Multi { buf, place } => {
                                let rel = buf.is_released();
                                Some((buf.recv().clone(), place, rel))
                            }
                            Match::Unexpected => None,
                        };
                        // Placed or buffered is taken in (as above): acknowledged now;
                        // a message the full queue drops fails its sender.
                        let status = match m {
                            Some((recv, place, rel)) => {
                                self.deliver_unexp(
                                    act,
                                    rx,
                                    Matched::new(&recv, place, rel),
                                    &inc,
                                    payload,
                                );
                                0
                            }
                            None => match rx.m.push_unexpected(inc, payload) {
                                Ok(()) => 0,
                                Err(_) => {
                                    ofi_core::ofi_warn!(
                                        crate::NAME,
                                        "ep_data",
                                        "unexpected queue full: a {total}-byte message was \
                                         dropped"
                                    );
                                    Errno::ENOBUFS.0
                                }
                            },
                        };
                        if let Some((ring, claim, id)) = ack {
                            self.push_ack(rx, ring, claim, id, status);
                        }
                    }
                }
                true
            }
        }
    }

    /// Whether the receive side may have work, checked without its lock: a sender
    /// attached, a ring's next slot is published, acks or a stall are pending, or a
    /// liveness check is due (every 256th call).
    #[inline]
    fn rx_may_have_work(&self) -> bool {
        let p = &self.peek;
        let calls = p.calls.load(Ordering::Relaxed);
        p.calls.store(calls.wrapping_add(1), Ordering::Relaxed);
        if calls.is_multiple_of(256)
            || p.more.load(Ordering::Acquire)
            || self.region.claims_gen().load(Ordering::Acquire) != p.gen.load(Ordering::Relaxed)
        {
            return true;
        }
        let n = p.n.load(Ordering::Acquire).min(p.words.len());
        p.words[..n].iter().any(|w| {
            let w = w.load(Ordering::Relaxed);
            let ring = self.region.ring((w >> 48) as usize);
            let tail = w & PEEK_TAIL_MASK;
            let i = ring_index(&self.region, tail);
            let ready = ring.seq(i).load(Ordering::Acquire) == tail + 1;
            if ready {
                // The slot's second line (the rest of a small message's payload, or
                // of a header's body) is still in the sender's cache: start fetching
                // it now, while the lock is taken and the first line parsed.
                self.region.map().prefetch(ring.slot_off(i) + 64);
            }
            ready
        })
    }

    /// Publish what [`Shared::rx_may_have_work`] reads (under the rx lock): `more`, or
    /// any active ring owing acks, says other work is pending.
    fn publish_peek(&self, rx: &Rx, mut more: bool) {
        let p = &self.peek;
        let n = rx.active.len().min(p.words.len());
        for (k, &r) in rx.active.iter().enumerate() {
            let Some(rr) = rx.rings.get(r) else {
                continue;
            };
            // Acks queued by receives posted since (post_recv) also need a flush.
            more |= !rr.backlog.is_empty();
            if let Some(w) = p.words.get(k) {
                w.store(
                    ((r as u64) << 48) | (rr.cons.tail() & PEEK_TAIL_MASK),
                    Ordering::Relaxed,
                );
            }
        }
        p.n.store(n, Ordering::Release);
        p.gen.store(rx.gen, Ordering::Relaxed);
        p.more.store(more, Ordering::Release);
    }

    /// The receive side's progress, once `rx_may_have_work` said there may be some
    /// (out of line, as `progress_tx`).
    #[inline(never)]
    fn progress_rx(&self, act: &Active) -> usize {
        let Ok(mut g) = self.rx.try_lock() else {
            return 0;
        };
        let rx = &mut *g;
        let gen = self.region.claims_gen().load(Ordering::Acquire);
        if gen != rx.gen {
            rx.gen = gen;
            self.attach_rings(rx);
        }
        let geo = self.region.geometry();
        let max_msg = self.settings.max_msg_size;
        let mut work = 0;
        let mut more = false;
        let mut k = 0;
        while k < rx.active.len() {
            let r = rx.active[k];
            k += 1;
            let ring = self.region.ring(r);
            for n in 0..=POLL_BUDGET {
                let Some(i) = rx.rings[r].cons.peek(&ring) else {
                    break;
                };
                if n == POLL_BUDGET || rx.rings[r].backlog.len() >= ACK_BACKLOG_MAX {
                    more = true;
                    break;
                }
                let off = ring.slot_off(i);
                // Inline messages (the small-message path) are parsed from their first
                // line, read as words in place, without building a `Slot`; anything
                // else takes the general way.
                let word = |w: usize| u64::from_le(ring.slot_word(i, w).load(Ordering::Relaxed));
                let consumed = match proto::parse_inline_words(word(1), word(2), word(3), || {
                    word(SLOT_HDR / 8)
                }) {
                    Some(h) => self.handle_inline(act, rx, r, off, &h),
                    None => self.handle_other(act, rx, r, off, &geo, max_msg),
                };
                if !consumed {
                    more = true;
                    break;
                }
                rx.rings[r].cons.release(&ring);
                work += 1;
            }
            if !rx.rings[r].backlog.is_empty() {
                Self::flush_acks(&self.region, r, &mut rx.rings[r]);
                more |= !rx.rings[r].backlog.is_empty();
            }
        }
        rx.polls = rx.polls.wrapping_add(1);
        if rx.polls.is_multiple_of(256) {
            work += self.check_liveness(act, rx);
        }
        self.publish_peek(rx, more);
        work
    }

    /// Release the drained rings whose sender closed or died, if [`LIVENESS_EVERY`] has
    /// passed since the last check (out of line: one progress call in 256 gets here).
    #[cold]
    #[inline(never)]
    fn check_liveness(&self, act: &Active, rx: &mut Rx) -> usize {
        if rx.last_check.elapsed() < LIVENESS_EVERY {
            return 0;
        }
        let mut work = 0;
        rx.last_check = Instant::now();
        let list = rx.active.clone();
        for r in list {
            let ring = self.region.ring(r);
            let closed = ring.state().load(Ordering::Acquire) == state::CLOSED;
            let rr = &rx.rings[r];
            let empty = rr.cons.peek(&ring).is_none();
            if empty && (closed || !region::pid_alive(rr.pid, rr.start)) {
                self.release_ring(act, rx, r);
                work += 1;
            }
        }
        work
    }

    // ---------------------------------------------------------------- posting receives

    fn post_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let mut g = lock(&self.rx);
        let rx = &mut *g;
        // The common answer, Queued, is tested in place and returns before anything
        // is moved out of the (large) result.
        let posted = rx.m.post(recv);
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
            } => self.deliver_unexp(act, rx, Matched::new(&recv, place, false), &msg, payload),
            PostAction::Multi {
                recv,
                released,
                msgs,
            } => {
                let n = msgs.len();
                for (i, (place, msg, payload)) in msgs.into_iter().enumerate() {
                    let last = released && i + 1 == n;
                    self.deliver_unexp(act, rx, Matched::new(&recv, place, last), &msg, payload);
                }
            }
            PostAction::Peeked { recv, msg } => act.peeked(recv, &msg, false),
            PostAction::NoMessage { recv } => act.no_message(&recv),
            PostAction::Discarded { recv, msg, payload } => {
                if let Unexp::Rts {
                    ring, claim, id, ..
                } = payload
                {
                    self.push_ack(rx, ring, claim, id, 0);
                }
                act.peeked(recv, &msg, true);
            }
        }
        Ok(())
    }
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(act) = self.active.get() else {
            return 0;
        };
        // The idle case — nothing published, nothing queued to send — costs a few
        // loads and no lock.
        let rx = if self.rx_may_have_work() {
            self.progress_rx(act)
        } else {
            0
        };
        let tx = if self.tx_work.load(Ordering::Relaxed) != 0 {
            self.progress_tx(act)
        } else {
            0
        };
        rx + tx
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
        region::unlink(&self.name);
    }
}

/// What a send carries: a list of buffers, or one buffer (most sends), kept as an
/// address and a length until an operation must be tracked.
trait Payload: Copy {
    /// Total bytes.
    fn total(&self) -> usize;
    /// As a list.
    fn list(&self) -> IoList;
    /// Copy the first `len` (≤ `total`) bytes to `dst`.
    ///
    /// # Safety
    /// As [`IoList::gather`]: `dst` is writable for `len` bytes, the buffers are
    /// readable and do not overlap it.
    unsafe fn gather_all(&self, dst: *mut u8, len: usize);
}

impl Payload for IoList {
    #[inline]
    fn total(&self) -> usize {
        IoList::total(self)
    }
    #[inline]
    fn list(&self) -> IoList {
        *self
    }
    #[inline]
    unsafe fn gather_all(&self, dst: *mut u8, len: usize) {
        // SAFETY: forwarded.
        unsafe { self.gather(0, dst, len) }
    }
}

/// What [`Shared::send_tracked`] needs besides the header and the buffers.
struct Tracked {
    /// The connection.
    idx: usize,
    ctx: usize,
    cq_flags: u64,
    want_cq: bool,
    /// `FI_DELIVERY_COMPLETE`: completed on the receiver's acknowledgement.
    delivery: bool,
    /// The application may reuse the buffer on return (`fi_inject*`, `FI_INJECT`).
    copy: bool,
}

/// A copy of the `len` bytes of `iov` the caller may reuse at once, and the list that
/// points into it (the copy must outlive every use of the list: the operation owns it).
fn private_copy(iov: &IoList, len: usize) -> (IoList, Box<[u8]>) {
    let mut owned = vec![0u8; len].into_boxed_slice();
    // SAFETY: `owned` holds `len` bytes; the application's buffers are readable for
    // `len` bytes (the C API's contract for the call being served).
    unsafe { iov.gather(0, owned.as_mut_ptr(), len) };
    (IoList::one(owned.as_ptr() as usize, len), owned)
}

/// One application buffer: address and length.
#[derive(Clone, Copy)]
struct OneBuf(usize, usize);

impl Payload for OneBuf {
    #[inline]
    fn total(&self) -> usize {
        self.1
    }
    #[inline]
    fn list(&self) -> IoList {
        IoList::one(self.0, self.1)
    }
    #[inline]
    unsafe fn gather_all(&self, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract; at most the buffer's length is read.
        unsafe { std::ptr::copy_nonoverlapping(self.0 as *const u8, dst, len.min(self.1)) };
    }
}

/// [`IoList::scatter`], with the one-buffer case (most receives) copied directly.
///
/// # Safety
/// As [`IoList::scatter`].
#[inline]
unsafe fn scatter(buf: &IoList, offset: usize, src: *const u8, len: usize) {
    if let [(a, l)] = *buf.slice() {
        if offset < l {
            // SAFETY: the caller's contract; the range lies inside the one buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src,
                    a.wrapping_add(offset) as *mut u8,
                    len.min(l - offset),
                )
            };
        }
        return;
    }
    // SAFETY: forwarded.
    unsafe { buf.scatter(offset, src, len) }
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
            return Err(Error::new(Errno::EOPBADSTATE, "shm: bind after fi_enable"));
        }
        lock(&self.sh.setup).bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Ok(());
        }
        let setup = lock(&self.sh.setup);
        let _ = self.sh.active.set(setup.freeze("shm")?);
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let act = self.active()?;
        let recv = lock(&self.sh.rx).m.cancel(context);
        match recv {
            Some(r) => {
                act.cancelled(&r);
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                "shm: no such operation to cancel",
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        ofi_kit::ep::getopt_min_multi_recv("shm", level, optname, optval, || {
            lock(&self.sh.rx).m.config().min_multi_recv
        })
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        let v = ofi_kit::ep::setopt_min_multi_recv("shm", level, optname, optval)?;
        lock(&self.sh.rx).m.set_min_multi_recv(v);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.address().to_bytes())
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
    type Active = Active;

    #[inline]
    fn active(&self) -> Result<&Active> {
        Endpoint::active(self)
    }

    #[inline]
    fn tx_op_flags(&self) -> OpFlags {
        self.sh.tx_op_flags
    }

    #[inline]
    fn rx_op_flags(&self) -> OpFlags {
        self.sh.rx_op_flags
    }

    #[inline]
    fn recv_src(&self, src: u64) -> u64 {
        recv_src(&self.sh, src)
    }

    #[inline]
    fn inject_size(&self) -> usize {
        proto::INJECT_SIZE
    }

    #[inline]
    fn submit_send(&self, act: &Active, req: SendRequest) -> Result<()> {
        // One buffer (most sends) travels as an address and a length until an
        // operation must be tracked.
        if let [(p, l)] = *req.iov.slice() {
            self.sh.send(act, OneBuf(p, l), &req)
        } else {
            self.sh.send(act, req.iov, &req)
        }
    }

    #[inline]
    fn submit_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        self.sh.post_recv(act, recv)
    }

    fn submit_rma(&self, act: &Active, req: RmaRequest<'_>) -> Result<()> {
        let local = IoList::from_iov(req.local.bufs, crate::NAME)?;
        // `rma_iov_limit` is 1: the one remote buffer covers the local ones exactly.
        if req.remote.len != local.total() {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "shm: remote buffer of {} bytes for {} local bytes",
                    req.remote.len,
                    local.total()
                ),
            ));
        }
        self.sh.rma(act, local, &req)
    }

    fn submit_atomic(&self, act: &Active, req: AtomicRequest<'_>) -> Result<()> {
        let operand = one_ioc(req.operands.bufs, req.kind == AtomicKind::Fetch)?;
        let compare = one_ioc(req.compare.bufs, req.kind != AtomicKind::Compare)?;
        let result = one_ioc(req.result.bufs, req.kind == AtomicKind::Base)?;
        if let Some((_, n)) = operand {
            if n != req.remote.count {
                return Err(Error::new(
                    Errno::EINVAL,
                    "shm: remote and local atomic element counts differ",
                ));
            }
        }
        if operand.is_none() && req.op != AtomicOp::AtomicRead {
            return Err(Error::new(
                Errno::EINVAL,
                "shm: an atomic other than FI_ATOMIC_READ needs its operands",
            ));
        }
        let addr = |v: Option<(u64, usize)>| v.map_or(0, |(a, _)| a);
        self.sh
            .atomic(act, [addr(operand), addr(compare), addr(result)], &req)
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
                "shm: atomic vectors of {} buffers (the limit is 1)",
                v.len()
            ),
        )),
    }
}

/// The default flags of send, RMA and atomic calls without flags, from
/// `tx_attr.op_flags`. A result of getinfo without hints carries every completion
/// level the provider supports; the weakest named one is the default then, so
/// `FI_DELIVERY_COMPLETE` applies only when it is the only level asked for.
fn default_tx_flags(f: OpFlags) -> OpFlags {
    if f.intersects(OpFlags::INJECT_COMPLETE | OpFlags::TRANSMIT_COMPLETE) {
        f - OpFlags::DELIVERY_COMPLETE
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generated name that another copy of the provider in this process already
    /// holds is skipped, not reported as `FI_EADDRINUSE`.
    #[test]
    fn generated_names_skip_a_name_in_use() {
        let geo = crate::region::tests::small();
        let next = NEXT_NAME.load(Ordering::Relaxed);
        let taken: Vec<Region> = (next..next + 3)
            .map(|n| {
                let name = format!("{NAME_PREFIX}{}-{n}", std::process::id());
                Region::create(&name, geo).unwrap()
            })
            .collect();
        let got = create_auto_named(geo).unwrap();
        let reused = taken.iter().any(|t| t.name() == got.name());
        for r in taken.iter().chain([&got]) {
            region::unlink(r.name());
        }
        assert!(!reused, "{} reused", got.name());
    }

    #[test]
    fn delivery_complete_is_a_default_only_when_alone() {
        let all = OpFlags::COMPLETION
            | OpFlags::INJECT_COMPLETE
            | OpFlags::TRANSMIT_COMPLETE
            | OpFlags::DELIVERY_COMPLETE;
        assert!(!default_tx_flags(all).contains(OpFlags::DELIVERY_COMPLETE));
        let dc = OpFlags::COMPLETION | OpFlags::DELIVERY_COMPLETE;
        assert_eq!(default_tx_flags(dc), dc);
    }

    #[test]
    fn io_lists_split_and_total() {
        let l = IoList::from_pairs(&[(100, 10), (200, 5), (300, 0), (400, 7)]);
        assert_eq!(l.total(), 22);
        assert_eq!(l.sub(8, 5).slice(), &[(108, 2), (200, 3)]);
        assert_eq!(l.sub(15, 7).slice(), &[(400, 7)]);
        assert_eq!(l.addr_at(12), 202);
        let huge = IoList::from_pairs(&[(0, usize::MAX), (0, 5)]);
        assert_eq!(huge.total(), usize::MAX);
    }
}
