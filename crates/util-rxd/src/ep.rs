//! The RDM endpoint over one DGRAM endpoint of the core.
//!
//! # Structure
//!
//! An endpoint owns, in the core provider: one DGRAM endpoint (its name is the RDM
//! endpoint's name), an AV holding the peers it talks to, and a CQ. `rx_bufs` datagram
//! buffers of the core's largest datagram size stay posted on it. Everything else is
//! one mutex-protected state (`EpState`): the sans-IO [`Engine`] (connections, windows,
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
//! # Modules
//!
//! `tx` (operation slots, sends, packets to the core), `rx` (placing incoming messages,
//! matching, unexpected messages), `progress` (the core CQ, engine events and timers,
//! the watchdog), `remote` (RMA and atomics, initiator and target), `ops` (the core's
//! calls and the kit's data path).
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
//! - Lock order: `EpState`, then a kit CQ's / counter's / AV's / MR table's own lock or the
//!   atomic address stripes, then the core's.
//! - A token names (index, generation) of a transmit operation; each is reported by the
//!   engine exactly once.
//! - The core endpoint is declared first in `Shared` so it is closed before the buffers
//!   it may still write are freed.
//!
//! Nothing here panics on application or peer input.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
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
use ofi_kit::ep::{BindRules, Bindings, Bound, EpOpenInfo};
use ofi_kit::iov::IoList;
use ofi_kit::mr::MrEndpointTarget;
use ofi_kit::opflags::DefaultOpFlags;
use ofi_kit::progress::{Progress, ProgressEngine};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{Incoming, MatcherConfig, Placement, PostedRecv, TagMatcher};

use crate::fabric::{DomainShared, Fabric};
use crate::peer::{Engine, Event, Failure, PeerId, Seg, NO_PEER};
use crate::proto::{
    self, kind_code, kind_of, msg_hdr, op_hdr, parse_msg_hdr, MsgHdr, RmaReq, OP_ATOMIC, OP_READ,
    OP_RESP, OP_TAGGED, OP_WRITE, RMA_HDR,
};
use crate::{Settings, IOV_LIMIT, MAX_MSG_SIZE, MSG_HDR, NAME};

mod ops;
mod progress;
mod remote;

use remote::RemoteOp;
mod rx;
mod tx;

use self::progress::spawn_watchdog;
use self::remote::ioc_list;
use self::remote::Remote;
use self::rx::{RxParts, RxTarget, Unexp};
use self::tx::{OpToken, TxOp};

/// Core completions read per batch.
const CQ_BATCH: usize = 16;
/// Core CQ batches per progress call at most.
const CQ_ROUNDS: usize = 8;
/// Packets handed to the core per flush at most.
const TX_BUDGET: usize = 256;

/// Token of packets that complete no operation (responses).
const NO_TOKEN: u64 = u64::MAX;

use ofi_kit::wait::lock;

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

struct EpState {
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
    /// The core CQ's entries and their sources, read in batches (reused: not
    /// initialised per poll).
    cq_batch: CqBatch,
    cq_from: [u64; CQ_BATCH],
    /// By the index of an RDM address (`dest & 0xffff_ffff`, below `DEST_CACHE_MAX`): the
    /// fabric address, its address and its engine peer, checked against the AV at each
    /// use (saves normalising, serialising and hashing the address per send).
    dest_peer: Vec<Option<(u64, Address, PeerId)>>,
    /// Requests and responses complete in this round, carried out after it.
    deferred: Vec<(PeerId, Vec<u8>)>,
    ops: Vec<Option<TxOp>>,
    op_free: Vec<u32>,
    op_gen: u32,
    live: usize,
    m: TagMatcher<IoList, Unexp>,
}

/// A batch of core CQ entries, kept in `EpState` between polls.
struct CqBatch([CqTaggedEntry; CQ_BATCH]);

// SAFETY: the entries are plain values the core CQ wrote; their `buf` field (a raw
// pointer, which makes the type `!Send`) is only ever read as a value here, never
// dereferenced, so moving the array to another thread (with `EpState`) is harmless.
unsafe impl Send for CqBatch {}

/// Everything of an endpoint; the progress engine holds it weakly.
struct Shared {
    /// Declared first: closed before the buffers in `state` are freed.
    core_ep: CoreEp,
    core_cq: CompletionQueue,
    core_av: AddressVector,
    state: Mutex<EpState>,
    settings: Settings,
    fmt: AddrFormat,
    /// The endpoint's name: the core endpoint's, its unspecified IP made concrete
    /// (`norm_addr`); `fi_setname` before `fi_enable` sets it ([`Shared::bind_at`]).
    me_bytes: ofi_kit::layered::SettableName,
    buf_size: usize,
    inject_max: usize,
    base: Instant,
    engine: Arc<ProgressEngine>,
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
    /// This handle's default operation flags (an alias has its own).
    flags: DefaultOpFlags,
    /// An alias (`fi_ep_alias`): dropping it leaves the endpoint as it is.
    alias: bool,
}

impl Drop for Endpoint {
    /// Closing: the acknowledgements the engine was delaying go out now, so a peer whose
    /// last message this endpoint took does not retransmit it to a closed port and end
    /// its operation in error.
    fn drop(&mut self) {
        if self.alias {
            return;
        }
        let now = self.sh.now();
        let mut state = lock(&self.sh.state);
        state.eng.flush_acks();
        self.sh.flush(&mut state, now);
    }
}

ofi_kit::debug_fields!(Endpoint, |ep| { addr: ep.sh.me_bytes });

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
    /// AV and CQ; `fi_enable` enables it and posts the datagram buffers (until then
    /// `fi_setname` may still name it).
    ///
    /// # Errors
    /// The core's errors opening those objects.
    pub fn open(
        dom: Arc<DomainShared>,
        info: &Info,
        _context: usize,
        engine: Arc<ProgressEngine>,
    ) -> Result<Endpoint> {
        // Checked first: a refused open leaves nothing registered.
        let flags = DefaultOpFlags::from_attrs(
            NAME,
            default_tx_flags(info.tx_attr.op_flags),
            info.rx_attr.op_flags,
            <Endpoint as ofi_kit::dataops::DataPath>::OP_FLAGS,
        )?;
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
        let fmt = dom.core_info.addr_format;
        let me_bytes = core_name(&core_ep, fmt)?;
        let open = EpOpenInfo::new(info, settings.rx_size);
        let m = TagMatcher::new(MatcherConfig {
            max_unexpected: usize::MAX / 2,
            max_unexpected_bytes: usize::MAX / 2,
            ..open.matcher_config()
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
            state: Mutex::new(EpState {
                eng,
                bufs: Vec::new(),
                core_addr: Vec::new(),
                src_bytes: Vec::new(),
                src_buf: Vec::new(),
                peer_addr: Vec::new(),
                by_key: HashMap::new(),
                rx: Vec::new(),
                deferred: Vec::new(),
                cq_batch: CqBatch([CqTaggedEntry::default(); CQ_BATCH]),
                cq_from: [ADDR_NOTAVAIL; CQ_BATCH],
                dest_peer: Vec::new(),
                ops: Vec::new(),
                op_free: Vec::new(),
                op_gen: 1,
                live: 0,
                m,
            }),
            settings,
            fmt,
            me_bytes: ofi_kit::layered::SettableName::new(me_bytes),
            buf_size,
            inject_max,
            base: Instant::now(),
            engine: engine.clone(),
            need_src: open.need_src,
            directed: open.directed,
            setup: Mutex::new(Setup::default()),
            active: OnceLock::new(),
            last_progress: AtomicU64::new(0),
            _dom: dom,
        });
        engine.register(&sh);
        spawn_watchdog(Arc::downgrade(&sh));
        Ok(Endpoint {
            sh,
            flags,
            alias: false,
        })
    }

    /// The endpoint's address (the core endpoint's name).
    ///
    /// # Errors
    /// `FI_EINVAL` if the core's name is no address of its format.
    pub fn address(&self) -> Result<Address> {
        Address::from_bytes(self.sh.fmt, &self.sh.me_bytes.to_vec())
    }

    /// The engine's counters (packets sent, retransmitted, received, dropped).
    pub fn stats(&self) -> crate::peer::Stats {
        lock(&self.sh.state).eng.stats()
    }
}

/// The name of core endpoint `ep` as this endpoint gives it: its unspecified IP made
/// concrete ([`norm_addr`]).
fn core_name(ep: &CoreEp, fmt: AddrFormat) -> Result<Vec<u8>> {
    let raw = ep.getname()?;
    Ok(norm_addr(&Address::from_bytes(fmt, &raw)?).to_bytes())
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

    /// `fi_enable`: the core endpoint is enabled (it was not, so that `fi_setname` could
    /// still name it) and the datagram buffers are posted on it.
    ///
    /// # Errors
    /// The core's `fi_enable` errors.
    fn start_core(&self) -> Result<()> {
        self.core_ep.enable()?;
        let mut g = lock(&self.state);
        let state = &mut *g;
        for i in state.bufs.len()..self.settings.rx_bufs {
            state.bufs.push(vec![0u8; self.buf_size].into_boxed_slice());
            self.repost(state, i);
        }
        Ok(())
    }

    /// `fi_setname` (before `fi_enable`, the kit's glue checks): the core endpoint,
    /// not enabled yet, takes the name `addr` (the core decides what it accepts), and
    /// its name becomes this endpoint's.
    ///
    /// # Errors
    /// `FI_EINVAL` for bytes that are no address of the core's format; the core's
    /// `fi_setname` errors (`FI_EADDRINUSE`, …), the old name then kept.
    fn bind_at(&self, addr: &[u8]) -> Result<()> {
        if let Address::Raw { .. } = Address::from_bytes(self.fmt, addr)? {
            // A raw format has one length (the core's own name's): other bytes are no
            // address of it, whatever the core would make of them.
            let want = self.me_bytes.to_vec().len();
            if addr.len() != want {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!(
                        "{NAME}: fi_setname: {} bytes are no {} address ({want} bytes)",
                        addr.len(),
                        self.fmt
                    ),
                ));
            }
        }
        self.core_ep.setname(addr)?;
        self.me_bytes.set(core_name(&self.core_ep, self.fmt)?);
        Ok(())
    }

    /// Post datagram buffer `i` on the core endpoint again.
    fn repost(&self, state: &mut EpState, i: usize) {
        let Some(b) = state.bufs.get_mut(i) else {
            return;
        };
        let p = b.as_mut_ptr();
        let size = self.buf_size;
        // SAFETY: the buffer is owned by `EpState` and outlives the core endpoint (declared
        // first in `Shared`, so closed first); it is not touched while posted.
        let r = unsafe {
            self.core_ep
                .recv(p, size, std::ptr::null_mut(), ADDR_UNSPEC, i)
        };
        if let Err(e) = r {
            ofi_core::ofi_warn!(NAME, "ep_data", "posting a datagram buffer: {e}");
        }
    }
}
