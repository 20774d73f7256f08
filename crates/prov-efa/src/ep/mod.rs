//! The `FI_EP_RDM` endpoint: the protocol engine ([`crate::proto::Engine`]) over one SRD
//! queue pair; and, sharing its structure, the `FI_EP_DGRAM` endpoint over one UD queue
//! pair without the engine (`dgram`).
//!
//! # Structure
//!
//! An endpoint owns an SRD queue pair with its two device completion queues and one
//! registered bounce region: `rx_bufs` receive slots that stay posted, and `tx_bufs`
//! send slots (one MTU each). A receive slot is one MTU after room for a 40-byte GRH
//! where the device writes one (UD; SRD on the software device) and one MTU alone
//! where it does not (SRD on EFA hardware). Everything else is one mutex-protected
//! state (`EpState`): the engine, the peers the engine knows (`senders`: its `PeerAddr` is
//! an index into that table of GID, queue pair, Q_Key and address handle), and the
//! application's operations by the id the engine reports them with.
//!
//! # Paths
//!
//! - Send: the message is copied into the engine at the call (so `fi_inject` is the same
//!   path without a completion); the engine's packets go to the device as send slots
//!   free up, posted in batches (one doorbell each). The operation completes when the engine says so (the device took every
//!   packet; with `FI_DELIVERY_COMPLETE`, the receiver placed the data).
//! - Receive: each receive completion's datagram (the sender named by the GRH's GID,
//!   or on EFA hardware by the completion's GID or address handle number, and the
//!   completion's source queue pair; see `senders`) goes to the engine. The device took it
//!   already (its sender counts it delivered), so a datagram the engine cannot take now
//!   (its unexpected queue or its window for order is full: receiver not ready) is
//!   kept and offered again each round: copied aside, up to the window's size in
//!   packets, so that the slot is posted again — a datagram waiting for an earlier one
//!   must not keep the slot the earlier one needs — and beyond, in its slot, not posted
//!   again: once every slot is held, the device itself refuses senders with RNR, and
//!   their engines back off.
//! - Completions: the engine's events become kit CQ entries and counter updates
//!   (`Bound::complete_tx` / `complete_rx`), data copied into the application's buffer.
//! - Progress (kit's [`ProgressEngine`], manual or auto): device completions, the
//!   engine's timers (`Engine::poll_timeout`, handled in every round), its packets, its
//!   events. With auto progress kit's thread runs the rounds; with manual progress a
//!   watchdog thread per endpoint runs one when the application has not for a
//!   millisecond (an injected message may wait for a handshake after the application
//!   stopped calling in; manual progress lets it, and then only a thread of the
//!   provider's own moves the handshake on).
//!
//! # Invariants
//!
//! - The bounce region is only touched through raw copies (the device writes it), or
//!   read in place from a receive slot that is not posted, until it is posted again.
//! - A send slot is in exactly one place: free, or posted with the engine token it
//!   carries; a receive slot is posted, or held with its datagram. At most
//!   `copied_max` refused datagrams are copied aside.
//! - Lock order: `EpState`, then kit's CQ / counter / AV locks.
//! - Fields of `Shared` drop in order: the queue pair first (no more device writes),
//!   the region, then the memory.
//!
//! Nothing here panics on application or peer input.

mod atomic;
mod dgram;
mod ops;
mod progress;
mod rma;
mod senders;

pub(crate) use senders::AhNumbers;

pub(crate) use atomic::max_count as atomic_max_count;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use ofi_core::attr::Info;
use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::ep::{BindRules, Bindings, Bound, EpOpenInfo};
use ofi_kit::iov::IoList;
use ofi_kit::opflags::DefaultOpFlags;
use ofi_kit::progress::ProgressEngine;
use ofi_kit::remote_cntr::RemoteCntrs;
use ofi_kit::tagmatch::MatcherConfig;
use ofi_kit::wait::lock;
use ofi_rdma::{
    Access, CompletionQueue, Gid, MemoryRegion, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState,
    QpType, QueuePair, RecvWr, Sge, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN,
};

use crate::av::{EfaAddr, QKEY};
use crate::domain::DomainShared;
use crate::proto::{self, Engine, PeerAddr, Transmit};
use crate::{MAX_MSG_SIZE, NAME};

/// Most peers an endpoint knows (senders and destinations); datagrams from further
/// senders are dropped (counted) and sends to further destinations refused
/// (`FI_ENOSPC`).
pub const MAX_PEERS: usize = 1 << 16;
/// Device completions read per batch.
const WC_BATCH: usize = 32;
/// Bit of a work request id naming a send slot (else a receive slot).
const TX_BIT: u64 = 1 << 32;
/// Bit of the engine's receive ids the provider makes (a receive with `FI_CLAIM` uses
/// the application's context instead: the matcher claims by context).
const RX_ID_BIT: u64 = 1 << 63;

const BIND_RULES: BindRules = BindRules {
    prov: NAME,
    eq: false,
};

/// Memory the device reads and writes: touched only through raw copies.
struct Bounce {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain heap memory only accessed through raw copies under the endpoint's lock
// (or by the device, in slots posted to it).
unsafe impl Send for Bounce {}
// SAFETY: as above: no reference into it is ever handed out.
unsafe impl Sync for Bounce {}

impl Bounce {
    fn new(len: usize) -> Bounce {
        let b = vec![0u8; len].into_boxed_slice();
        Bounce {
            ptr: Box::into_raw(b).cast(),
            len,
        }
    }

    /// Copies `out.len()` bytes from `off` into `out` (nothing when out of range).
    fn read(&self, off: usize, out: &mut [u8]) {
        if off.checked_add(out.len()).is_none_or(|e| e > self.len) {
            return;
        }
        // SAFETY: inside the allocation (checked); raw copy of memory the device does
        // not write now (the slot is not posted).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
    }

    /// The `len` bytes at `off` (empty when out of range), read in place.
    ///
    /// # Safety
    /// The device must not write the range while the slice lives: it lies in a receive
    /// slot not posted (and not posted again before the slice is dropped).
    unsafe fn slot_bytes(&self, off: usize, len: usize) -> &[u8] {
        if off.checked_add(len).is_none_or(|e| e > self.len) {
            return &[];
        }
        // SAFETY: inside the allocation (checked); the caller keeps the device off it.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    /// Copies `data` in at `off` (nothing when out of range).
    fn write(&self, off: usize, data: &[u8]) {
        if off.checked_add(data.len()).is_none_or(|e| e > self.len) {
            return;
        }
        // SAFETY: inside the allocation (checked); the slot is not posted.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this length; the region and queue pair using
        // it are gone (declared before it in `Shared`).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// A transmit operation of the application.
struct TxOp {
    ctx: usize,
    /// The destination's engine peer (its operations end when its address leaves the
    /// AV).
    peer: PeerAddr,
    /// The completion's flags.
    flags: u64,
    /// Whether a successful completion is written (selective completion, inject).
    want: bool,
    /// A read's local buffers (the data comes with the completion).
    read_into: Option<IoList>,
}

/// A receive of the application.
struct RxOp {
    ctx: usize,
    buf: IoList,
    tag: u64,
    ignore: u64,
    tagged: bool,
    flags: OpFlags,
}

impl RxOp {
    /// The receive as kit's completion helpers take it.
    fn posted(&self) -> ofi_kit::tagmatch::PostedRecv<IoList> {
        ofi_kit::tagmatch::PostedRecv {
            ctx: self.ctx,
            src: ofi_kit::tagmatch::ANY_SRC,
            tag: self.tag,
            ignore: self.ignore,
            flags: self.flags,
            tagged: self.tagged,
            buf: self.buf,
            len: self.buf.total(),
        }
    }
}

/// A datagram the engine refused for now (receiver not ready).
enum Held {
    /// Still in receive slot `.0` (not posted), from `.1`, `.2` bytes: once enough are
    /// held so, the device refuses new datagrams itself (RNR).
    Slot(u32, PeerAddr, usize),
    /// Copied aside, its slot posted again: a datagram that waits for an earlier one
    /// (order) must not keep the slot that earlier one needs to arrive.
    Copied(PeerAddr, Vec<u8>),
}

/// The state behind the endpoint's lock.
struct EpState {
    eng: Engine,
    /// The engine's peers (its `PeerAddr` is an index here) and who sent a receive.
    peers: senders::PeerTable,
    tx_ops: HashMap<u64, TxOp>,
    next_tx: u64,
    rx_ops: HashMap<u64, RxOp>,
    next_rx: u64,
    /// Free send slots.
    tx_free: Vec<u32>,
    /// The engine token each send slot carries while posted.
    tx_token: Vec<u64>,
    /// A packet waiting for a free send slot.
    pending: Option<Transmit>,
    /// Datagrams the engine refused, in arrival order, offered again each round.
    held: VecDeque<Held>,
    /// How many of them are copied aside.
    copied: usize,
    /// `FI_EP_DGRAM`: the application's receives, oldest first.
    dgram_rx: VecDeque<RxOp>,
    /// The AV's change count when lost peers were last compared with it.
    av_seen: u64,
    /// Counters of peers' RMA and atomics on this endpoint's memory (`FI_RMA_EVENT`).
    remote_cntrs: RemoteCntrs,
    wc: [WorkCompletion; WC_BATCH],
}

/// Everything of an endpoint; the progress engine holds it weakly.
struct Shared {
    /// Declared first: destroyed before the region and the memory it uses.
    qp: QueuePair,
    scq: CompletionQueue,
    rcq: CompletionQueue,
    mr: MemoryRegion,
    bounce: Bounce,
    state: Mutex<EpState>,
    me: EfaAddr,
    me_bytes: Vec<u8>,
    /// `FI_EP_DGRAM` over UD (no protocol engine) rather than `FI_EP_RDM` over SRD.
    dgram: bool,
    /// The endpoint's info has `FI_FENCE` (else `FI_FENCE` on a call is refused).
    fence: bool,
    mtu: usize,
    /// Bytes before the datagram in a receive slot: room for the GRH the device
    /// writes ([`GRH_LEN`]), or 0 where it writes none (SRD on EFA hardware).
    rx_prefix: usize,
    rx_bufs: usize,
    /// Most refused datagrams copied aside (the protocol's receive window in packets:
    /// as many as it may hold for order itself).
    copied_max: usize,
    tx_size: usize,
    rx_size: usize,
    inject_max: usize,
    base: Instant,
    /// When the last round ran (ns since `base`), for the watchdog.
    last_round: AtomicU64,
    engine: Arc<ProgressEngine>,
    directed: bool,
    setup: Mutex<Bindings>,
    active: OnceLock<Bound>,
    dom: Arc<DomainShared>,
}

/// An `FI_EP_RDM` endpoint of `efa` (see the module docs).
pub struct Endpoint {
    sh: Arc<Shared>,
    /// This handle's default operation flags (an alias has its own).
    flags: DefaultOpFlags,
    /// An alias (`fi_ep_alias`): dropping it leaves the endpoint as it is.
    alias: bool,
}

ofi_kit::debug_fields!(Endpoint, |ep| { addr: ep.sh.me });

impl Drop for Endpoint {
    fn drop(&mut self) {
        if !self.alias {
            self.sh.engine.unregister(&self.sh);
        }
    }
}

/// A random secret for the handshake cookies of one endpoint.
fn secret() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() | 1
}

impl Endpoint {
    /// Open an endpoint: its SRD queue pair (ready to send), completion queues and
    /// bounce region, with every receive slot posted.
    ///
    /// # Errors
    /// The device's errors creating those objects; bad `op_flags`.
    pub(crate) fn open(
        dom: Arc<DomainShared>,
        info: &Info,
        _context: usize,
        engine: Arc<ProgressEngine>,
        mr_table: Arc<ofi_kit::mr::MrTable>,
    ) -> Result<Endpoint> {
        let flags = DefaultOpFlags::from_attrs(
            NAME,
            info.tx_attr.op_flags,
            info.rx_attr.op_flags,
            <Endpoint as ofi_kit::dataops::DataPath>::OP_FLAGS,
        )?;
        let s = &dom.settings;
        let dgram = info.ep_attr.ep_type == ofi_core::EpType::Dgram;
        // SRD receives on EFA hardware carry no GRH: the sender is named by the
        // extended completion queue the device layer makes there (see `senders`).
        let rx_prefix = if !dgram && s.kind == ofi_rdma::DeviceKind::RdmaCore {
            0
        } else {
            GRH_LEN
        };
        let mtu = if dgram {
            crate::libefa::DGRAM_MTU
        } else {
            crate::libefa::mtu(s.kind)
        };
        let rx_slot = rx_prefix + mtu;
        let (rx_bufs, tx_bufs) = (s.rx_bufs, s.tx_bufs);
        let bounce = Bounce::new(rx_bufs * rx_slot + tx_bufs * mtu);
        // SAFETY: the memory outlives the region (declared after it in `Shared`).
        let mr = unsafe { dom.pd.reg_mr(bounce.ptr, bounce.len, Access::LOCAL_WRITE)? };
        let scq = dom.ctx.create_cq(tx_bufs as u32 + 16, 1, None)?;
        // On EFA hardware an extended queue: SRD receives there name their sender in
        // the completion, not in a GRH.
        let rcq = if dgram {
            dom.ctx.create_cq(rx_bufs as u32 + 16, 2, None)?
        } else {
            dom.ctx.create_efa_cq(rx_bufs as u32 + 16, 2, None)?
        };
        let qp = dom.pd.create_qp(&QpInitAttr {
            qp_type: if dgram { QpType::Ud } else { QpType::Srd },
            send_cq: &scq,
            recv_cq: &rcq,
            srq: None,
            cap: QpCap {
                max_send_wr: tx_bufs as u32,
                max_recv_wr: rx_bufs as u32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: true,
        })?;
        qp_ready(&qp, (!dgram).then_some(s.rnr_retry))?;
        let me = EfaAddr {
            gid: dom.gid,
            qpn: qp.qp_num(),
            qkey: QKEY,
        };
        let open = EpOpenInfo::new(info, s.rx_size);
        let cfg = proto::Config {
            mtu,
            max_msg_size: MAX_MSG_SIZE,
            max_medium_msg_size: s.max_medium_msg_size,
            min_read_msg_size: usize::MAX,
            tx_min_credits: s.tx_min_credits,
            recvwin_size: s.recvwin_size,
            rnr_backoff_initial_wait_time: s.rnr_backoff_initial_wait_time,
            rnr_backoff_wait_time_cap: s.rnr_backoff_wait_time_cap,
            peer_timeout: s.peer_timeout_ms.saturating_mul(1_000_000),
            probe_interval: (s.peer_timeout_ms / 10).max(1).saturating_mul(1_000_000),
            hello_interval: 100_000_000,
            // The device layer offers no RDMA read on SRD: long messages go by CTS.
            rdma_read: false,
            ordered: true,
            matcher: MatcherConfig {
                max_unexpected: 1024,
                max_unexpected_bytes: 64 << 20,
                ..open.matcher_config()
            },
            secret: secret(),
        };
        let inject_max = if dgram {
            mtu
        } else {
            cfg.eager_capacity().min(4096)
        };
        let tx_size = s.tx_size;
        let rx_size = s.rx_size;
        let sh = Arc::new(Shared {
            qp,
            scq,
            rcq,
            mr,
            bounce,
            state: Mutex::new(EpState {
                eng: Engine::new(cfg),
                peers: senders::PeerTable::new(MAX_PEERS, dom.ah_numbers.clone()),
                tx_ops: HashMap::new(),
                remote_cntrs: RemoteCntrs::default(),
                next_tx: 1,
                rx_ops: HashMap::new(),
                next_rx: 1,
                tx_free: (0..tx_bufs as u32).rev().collect(),
                tx_token: vec![0; tx_bufs],
                pending: None,
                held: VecDeque::new(),
                copied: 0,
                dgram_rx: VecDeque::new(),
                av_seen: 0,
                wc: [WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Recv, 0); WC_BATCH],
            }),
            me,
            me_bytes: me.to_bytes().to_vec(),
            dgram,
            fence: info.caps.contains(ofi_core::Caps::FENCE),
            mtu,
            rx_prefix,
            rx_bufs,
            copied_max: s.recvwin_size as usize,
            tx_size,
            rx_size,
            inject_max,
            base: Instant::now(),
            last_round: AtomicU64::new(0),
            engine: engine.clone(),
            directed: open.directed,
            setup: Mutex::new(Bindings::default()),
            active: OnceLock::new(),
            dom,
        });
        for i in 0..rx_bufs as u32 {
            sh.post_rx(i)?;
        }
        // The target side of RMA: the domain's registrations, as this endpoint sees them.
        let ep_id = Arc::as_ptr(&sh) as usize as u64;
        lock(&sh.state)
            .eng
            .set_region_access(Box::new(rma::MrAccess {
                table: mr_table,
                ep: ep_id,
            }));
        engine.register(&sh);
        if engine.mode() == ofi_kit::progress::ProgressMode::Manual {
            // With auto progress kit's thread runs rounds (at most a millisecond
            // apart when idle); only manual progress needs the watchdog.
            progress::spawn_watchdog(Arc::downgrade(&sh));
        }
        Ok(Endpoint {
            sh,
            flags,
            alias: false,
        })
    }

    /// The endpoint's address.
    pub fn address(&self) -> EfaAddr {
        self.sh.me
    }

    /// The protocol's counters (packets dropped, refused, peers lost).
    pub fn stats(&self) -> proto::Stats {
        lock(&self.sh.state).eng.stats().clone()
    }

    /// Datagrams dropped because their sender could not be named (on EFA hardware: a
    /// completion with neither the sender's GID nor the number of an address handle
    /// this endpoint made) or [`MAX_PEERS`] senders were already known.
    pub fn dropped_no_peer(&self) -> u64 {
        lock(&self.sh.state).peers.dropped()
    }
}

/// RESET → INIT → RTR → RTS of a datagram queue pair with the endpoints' Q_Key; SRD's
/// with `rnr_retry`.
fn qp_ready(qp: &QueuePair, rnr_retry: Option<u8>) -> Result<()> {
    qp.modify(
        &QpAttr {
            qp_state: QpState::Init,
            qkey: QKEY,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY,
    )?;
    qp.datagram_ready(rnr_retry)
}

impl Shared {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn rx_slot_len(&self) -> usize {
        self.rx_prefix + self.mtu
    }

    /// Where the datagram in receive slot `i` starts.
    fn rx_payload(&self, i: u32) -> usize {
        self.rx_off(i) + self.rx_prefix
    }

    fn rx_off(&self, i: u32) -> usize {
        i as usize * self.rx_slot_len()
    }

    fn tx_off(&self, i: u32) -> usize {
        self.rx_bufs * self.rx_slot_len() + i as usize * self.mtu
    }

    /// Posts receive slot `i`.
    fn post_rx(&self, i: u32) -> Result<()> {
        let sge = Sge {
            addr: self.bounce.ptr as u64 + self.rx_off(i) as u64,
            length: self.rx_slot_len() as u32,
            lkey: self.mr.lkey(),
        };
        self.qp.post_recv(&RecvWr {
            wr_id: u64::from(i),
            sg_list: &[sge],
        })
    }

    /// After the AV changed (`fi_av_remove`): for each peer whose address left the AV,
    /// the application's transmit operations to it still pending complete at once with
    /// `FI_ECANCELED` (the engine's later word on them is ignored; packets its device
    /// took already may still arrive — the peer's protocol state is kept, so the
    /// address inserted again goes on where it was), and a lost one is forgotten by the
    /// engine, so the address can be used again (a restarted peer). New operations to a
    /// removed fabric address fail at the call (`FI_EINVAL`: not in the AV).
    ///
    /// Looked at in every round (each CQ or counter read drives one; with auto progress
    /// kit's thread does) and before every transmit operation; an address removed and
    /// inserted again with neither in between is not seen as removed (the AV gives the
    /// provider no word of a removal, only its change count).
    pub(super) fn forget_removed(&self, active: &Bound, state: &mut EpState) {
        let changes = active.av.changes();
        if changes == state.av_seen {
            return;
        }
        state.av_seen = changes;
        let now = self.now();
        let mut removed = Vec::new();
        for (i, p) in state.peers.iter().enumerate() {
            if active.av.reverse_lookup(&p.addr.to_address()).is_none() {
                removed.push(i as PeerAddr);
            }
        }
        for peer in removed {
            if state.eng.is_lost(peer) {
                state.eng.remove_peer(now, peer);
            }
            if self.dgram {
                continue; // a datagram's send slot is freed by its device completion
            }
            let mut gone: Vec<u64> = state
                .tx_ops
                .iter()
                .filter(|(_, o)| o.peer == peer)
                .map(|(&id, _)| id)
                .collect();
            gone.sort_unstable();
            for id in gone {
                if let Some(op) = state.tx_ops.remove(&id) {
                    active.complete_tx(op.ctx, op.flags, true, Some(Errno::ECANCELED));
                }
            }
        }
    }

    /// Starts a transmit operation to `dest`: the state locked, the destination's engine
    /// peer and the operation's id; `FI_EAGAIN` (after kicking progress) when `tx_size`
    /// operations are under way (or, for datagrams, no send slot is free).
    fn begin_tx(
        &self,
        active: &Bound,
        dest: u64,
    ) -> Result<(std::sync::MutexGuard<'_, EpState>, PeerAddr, u64)> {
        let mut state = lock(&self.state);
        if state.tx_ops.len() >= self.tx_size || (self.dgram && state.tx_free.is_empty()) {
            drop(state);
            self.engine.kick();
            return Err(Error::code_only(Errno::EAGAIN));
        }
        self.forget_removed(active, &mut state);
        let peer = self.peer_of_fi(active, &mut state, dest)?;
        let id = state.next_tx;
        state.next_tx = state.next_tx.wrapping_add(1).max(1);
        Ok((state, peer, id))
    }

    /// The engine peer of fabric address `dest` (through the AV).
    fn peer_of_fi(&self, active: &Bound, state: &mut EpState, dest: u64) -> Result<PeerAddr> {
        let a = active.av.lookup(dest).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: destination {dest:#x} is not in the AV"),
            )
        })?;
        state
            .peers
            .peer_of(EfaAddr::from_address(&a)?)
            .ok_or_else(|| {
                Error::new(
                    Errno::ENOSPC,
                    format!("{NAME}: {MAX_PEERS} peers already known"),
                )
            })
    }
}
