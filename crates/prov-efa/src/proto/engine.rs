//! The engine: its state, the transport's inputs and outputs, the handshake, timers and
//! lost peers. The message paths live in `tx.rs` (sending side) and `rx.rs` (receiving
//! side and matching); emulated RMA and atomics in `rma.rs`.
//!
//! Nothing here panics on any input; a packet that fails a check is dropped and counted.

use std::collections::{BTreeMap, HashMap, VecDeque};

use ofi_core::error::Errno;
use ofi_kit::tagmatch::TagMatcher;

use super::peer::{cookie_for, in_window, msg_id_of, Owner, Peer, Queued, TxHandshake};
use super::rma::{Region, RtwState};
use super::rnr::RANDOM_INITIAL_US;
use super::rx::{RxOp, Unexp};
use super::tx::TxOp;
use super::wire::{self, Ctrl, Hs, PktType, Repr};
use super::{
    Config, Event, Nanos, NotReady, PeerAddr, Stats, Transmit, BAD_HANDSHAKE_ERRNO,
    LOST_PEER_ERRNO, MAX_HS_REPLIES, MAX_RECVWIN,
};

/// Later segments of an unexpected medium message: (offset, bytes).
pub(crate) type Segments = Vec<(u64, Vec<u8>)>;

/// A packet handed to the transport and not yet reported on.
#[derive(Debug)]
pub(crate) struct Flight {
    pub peer: PeerAddr,
    /// Kept to send again after an RNR (empty for untracked packets).
    pub bytes: Vec<u8>,
    pub owner: Owner,
    /// Counted in the peer's work (false: a handshake answer to a peer without state).
    pub tracked: bool,
    /// The message id of a message request (counted in the peer's `unacked`).
    pub msg_id: Option<u32>,
}

/// What the engine holds, for leak checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outstanding {
    /// Transmit operations not completed.
    pub tx_ops: usize,
    /// Receive transfers not completed.
    pub rx_ops: usize,
    /// Packets and reads handed to the transport and not reported on.
    pub in_flight: usize,
    /// Packets queued for the transport.
    pub queued: usize,
    /// Packets held for order.
    pub held: usize,
    /// Unexpected messages.
    pub unexpected: usize,
    /// Partial state of emulated writes.
    pub rma_state: usize,
}

/// One endpoint's protocol state (see the [module docs](super)).
#[derive(Debug)]
pub struct Engine {
    pub(crate) cfg: Config,
    pub(crate) peers: BTreeMap<PeerAddr, Peer>,
    /// Peers with queued packets, round robin.
    active: VecDeque<PeerAddr>,
    hs_replies: VecDeque<(PeerAddr, Vec<u8>)>,
    pub(crate) reads: VecDeque<Transmit>,
    flights: HashMap<u64, Flight>,
    pub(crate) read_tokens: HashMap<u64, (PeerAddr, u32)>,
    pub(crate) next_token: u64,
    pub(crate) tx: HashMap<u32, TxOp>,
    pub(crate) next_tx: u32,
    pub(crate) rx: HashMap<u32, RxOp>,
    pub(crate) next_rx: u32,
    pub(crate) rx_by_msg: HashMap<(PeerAddr, u32), u32>,
    pub(crate) unexp_segs: HashMap<(PeerAddr, u32), Segments>,
    pub(crate) matcher: TagMatcher<(), Unexp>,
    pub(crate) regions: HashMap<u32, Region>,
    /// The caller's regions, when it keeps them (then `regions` is not consulted).
    pub(crate) region_access: Option<Box<dyn super::RegionAccess>>,
    pub(crate) rtw: HashMap<(PeerAddr, u32), RtwState>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) stats: Stats,
    rng: u64,
    /// The latest time an input carried.
    pub(crate) now: Nanos,
}

impl Engine {
    /// An endpoint with `cfg`.
    pub fn new(cfg: Config) -> Engine {
        let matcher = TagMatcher::new(cfg.matcher.clone());
        Engine {
            rng: cfg.secret ^ 0x2545_f491_4f6c_dd1d,
            cfg,
            peers: BTreeMap::new(),
            active: VecDeque::new(),
            hs_replies: VecDeque::new(),
            reads: VecDeque::new(),
            flights: HashMap::new(),
            read_tokens: HashMap::new(),
            next_token: 1,
            tx: HashMap::new(),
            next_tx: 1,
            rx: HashMap::new(),
            next_rx: 1,
            rx_by_msg: HashMap::new(),
            unexp_segs: HashMap::new(),
            matcher,
            regions: HashMap::new(),
            region_access: None,
            rtw: HashMap::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            now: 0,
        }
    }

    /// The parameters.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// What was dropped or done again so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The features this endpoint announces.
    pub(crate) fn features(&self) -> u64 {
        let mut f = wire::FEAT_DELIVERY_COMPLETE;
        if self.cfg.rdma_read {
            f |= wire::FEAT_RDMA_READ;
        }
        f
    }

    /// What the engine holds (all zero once everything completed).
    pub fn outstanding(&self) -> Outstanding {
        Outstanding {
            tx_ops: self.tx.len(),
            rx_ops: self.rx.len(),
            in_flight: self.flights.len() + self.read_tokens.len() + self.reads.len(),
            queued: self.peers.values().map(|p| p.queue.len()).sum::<usize>()
                + self.hs_replies.len(),
            held: self.peers.values().map(|p| p.win.held_len()).sum(),
            unexpected: self.matcher.unexpected_len() + self.unexp_segs.len(),
            rma_state: self.rtw.len(),
        }
    }

    /// Peers the engine keeps state for (asked by us, or proved by a checked cookie).
    pub fn known_peers(&self) -> usize {
        self.peers.len()
    }

    /// Whether `peer` was declared lost.
    pub fn is_lost(&self, peer: PeerAddr) -> bool {
        self.peers.get(&peer).is_some_and(|p| p.failed)
    }

    /// Forget `peer` (the address vector entry was removed): a lost peer may be used
    /// again. Operations still pending with it complete with `FI_ECANCELED`.
    pub fn remove_peer(&mut self, now: Nanos, peer: PeerAddr) {
        if self.peers.get(&peer).is_some_and(|p| !p.failed) {
            self.fail_peer(now, peer, Errno::ECANCELED);
        }
        self.peers.remove(&peer);
    }

    /// The next completion.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub(crate) fn token(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token = self.next_token.wrapping_add(1).max(1);
        t
    }

    /// The peer at `addr`, created at `now` if new.
    pub(crate) fn peer_mut(&mut self, now: Nanos, addr: PeerAddr) -> &mut Peer {
        self.peers.entry(addr).or_insert_with(|| Peer::new(now))
    }

    /// Queue a packet to `addr` (dropped if the peer is unknown or lost).
    pub(crate) fn queue(&mut self, addr: PeerAddr, bytes: Vec<u8>, owner: Owner) {
        let Some(p) = self.peers.get_mut(&addr) else {
            return;
        };
        if p.failed {
            return;
        }
        if !p.busy() {
            p.last_progress = self.now; // the lost-peer clock starts
        }
        p.queue.push(Queued { bytes, owner });
        if !p.in_active {
            p.in_active = true;
            self.active.push_back(addr);
        }
    }

    /// Queue a control packet to `addr`.
    pub(crate) fn queue_ctrl(&mut self, addr: PeerAddr, c: &Ctrl, payload: &[u8]) {
        self.queue(addr, wire::emit_ctrl(c, payload), Owner::None);
    }

    /// The next thing for the transport to do at `now`: a handshake answer, a read, or
    /// the next packet of a peer not backing off (peers taken in turn).
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Transmit> {
        self.now = self.now.max(now);
        if let Some((peer, bytes)) = self.hs_replies.pop_front() {
            let token = self.token();
            self.flights.insert(
                token,
                Flight {
                    peer,
                    bytes: Vec::new(),
                    owner: Owner::None,
                    tracked: false,
                    msg_id: None,
                },
            );
            return Some(Transmit::Send { peer, token, bytes });
        }
        if let Some(r) = self.reads.pop_front() {
            return Some(r);
        }
        for _ in 0..self.active.len() {
            let addr = self.active.pop_front()?;
            let Some(p) = self.peers.get_mut(&addr) else {
                continue;
            };
            if p.failed || p.queue.is_empty() {
                p.in_active = false;
                continue;
            }
            let window = p.hs.send_window();
            let oldest = p.unacked.oldest();
            if !p.queue.ready(|q| in_window(q, oldest, window)) {
                // Only requests beyond the window: `handle_send_done` makes the peer
                // active again.
                p.in_active = false;
                continue;
            }
            if p.backoff.blocks(now) {
                self.active.push_back(addr);
                continue;
            }
            let Some((q, was_refused)) = p.queue.pop(|q| in_window(q, oldest, window)) else {
                continue;
            };
            let msg_id = msg_id_of(&q.bytes);
            if let (Some(id), false) = (msg_id, was_refused) {
                p.unacked.sent(id);
            }
            p.add_work(now);
            let oldest = p.unacked.oldest();
            if !p.queue.ready(|q| in_window(q, oldest, window)) {
                p.in_active = false;
            } else {
                self.active.push_back(addr);
            }
            let token = self.token();
            self.flights.insert(
                token,
                Flight {
                    peer: addr,
                    bytes: q.bytes.clone(),
                    owner: q.owner,
                    tracked: true,
                    msg_id,
                },
            );
            return Some(Transmit::Send {
                peer: addr,
                token,
                bytes: q.bytes,
            });
        }
        None
    }

    /// The transport delivered the packet `token`.
    pub fn handle_send_done(&mut self, now: Nanos, token: u64) {
        self.now = self.now.max(now);
        let Some(f) = self.flights.remove(&token) else {
            return;
        };
        if !f.tracked {
            return;
        }
        if let Some(p) = self.peers.get_mut(&f.peer) {
            p.end_work();
            p.backoff.reset();
            p.last_progress = now;
            if let Some(id) = f.msg_id {
                p.unacked.taken(id);
                if !p.queue.is_empty() && !p.in_active && !p.failed {
                    // Requests held back by the window may go now.
                    p.in_active = true;
                    self.active.push_back(f.peer);
                }
            }
        }
        if let Owner::Tx(id) = f.owner {
            self.tx_packet_done(id);
        }
    }

    /// The transport could not deliver the packet `token` and will not (the peer's
    /// device, context or queue pair is gone): the peer is declared lost at once, as
    /// [`Config::peer_timeout`] would later, and its operations complete with
    /// [`LOST_PEER_ERRNO`]. A handshake answer that failed is only forgotten (the
    /// asker asks again).
    pub fn handle_send_failed(&mut self, now: Nanos, token: u64) {
        self.now = self.now.max(now);
        let Some(f) = self.flights.remove(&token) else {
            return;
        };
        if !f.tracked || self.peers.get(&f.peer).is_none_or(|p| p.failed) {
            return;
        }
        self.stats.peers_lost += 1;
        self.fail_peer(now, f.peer, LOST_PEER_ERRNO);
    }

    /// Take back the queued receive posted with `ctx` (`fi_cancel`): true when one was
    /// queued (it completes with no event; the caller reports the cancellation).
    pub fn cancel_recv(&mut self, ctx: u64) -> bool {
        self.matcher.cancel(ctx as usize).is_some()
    }

    /// `FI_OPT_MIN_MULTI_RECV` of the receive side.
    pub fn min_multi_recv(&self) -> usize {
        self.matcher.config().min_multi_recv
    }

    /// Set `FI_OPT_MIN_MULTI_RECV` for multi-receive buffers posted from now on.
    pub fn set_min_multi_recv(&mut self, min: usize) {
        self.matcher.set_min_multi_recv(min);
    }

    /// The peer refused the packet `token` (receiver not ready): back off, then send it
    /// again.
    pub fn handle_rnr(&mut self, now: Nanos, token: u64) {
        self.now = self.now.max(now);
        let Some(f) = self.flights.remove(&token) else {
            return;
        };
        self.stats.rnr += 1;
        if !f.tracked {
            return; // a handshake answer: the asker asks again
        }
        let random = self.random_initial_wait();
        let (initial, cap) = (
            self.cfg.rnr_backoff_initial_wait_time,
            self.cfg.rnr_backoff_wait_time_cap,
        );
        let Some(p) = self.peers.get_mut(&f.peer) else {
            return;
        };
        p.end_work();
        if p.failed {
            return;
        }
        p.last_progress = now;
        p.backoff.on_rnr(now, initial, cap, random);
        p.queue.push_refused(Queued {
            bytes: f.bytes,
            owner: f.owner,
        });
        if !p.in_active {
            p.in_active = true;
            self.active.push_back(f.peer);
        }
    }

    fn random_initial_wait(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        RANDOM_INITIAL_US.start
            + self.rng % (RANDOM_INITIAL_US.end - RANDOM_INITIAL_US.start).max(1)
    }

    /// A datagram from `src` arrived at `now`. [`NotReady`]: the engine cannot take it
    /// now; the transport refuses it (RNR) and the sender sends it again later.
    pub fn handle_packet(
        &mut self,
        now: Nanos,
        src: PeerAddr,
        bytes: &[u8],
    ) -> Result<(), NotReady> {
        self.now = self.now.max(now);
        let repr = match Repr::parse(bytes) {
            Ok(r) => r,
            Err(_) => {
                self.stats.malformed += 1;
                return Ok(());
            }
        };
        if let Repr::Hello(_) = repr {
            self.answer_hello(src);
            return Ok(());
        }
        if self.peers.get(&src).is_some_and(|p| p.failed) {
            self.stats.from_lost += 1;
            return Ok(());
        }
        match repr {
            Repr::Hello(_) => Ok(()),
            Repr::Handshake(hs) => {
                self.on_handshake(now, src, hs);
                Ok(())
            }
            Repr::Req(req, payload) => {
                if req.cookie != cookie_for(self.cfg.secret, src) {
                    self.stats.bad_cookie += 1;
                    return Ok(());
                }
                if req.total_len > self.cfg.max_msg_size as u64 {
                    self.stats.malformed += 1;
                    return Ok(());
                }
                self.peer_mut(now, src).last_progress = now;
                if req.ty.is_msg() {
                    self.on_msg_req(now, src, req, payload, bytes)
                } else {
                    self.on_rma_req(now, src, req, payload)
                }
            }
            Repr::Ctrl(c, payload) => {
                match self.peers.get_mut(&src) {
                    Some(p) => p.last_progress = now,
                    None => {
                        self.stats.stale += 1;
                        return Ok(());
                    }
                }
                self.on_ctrl(now, src, c, payload);
                Ok(())
            }
        }
    }

    fn answer_hello(&mut self, src: PeerAddr) {
        if self.hs_replies.len() >= MAX_HS_REPLIES {
            self.stats.hello_dropped += 1;
            return;
        }
        self.stats.hello_answered += 1;
        let hs = self.own_hs(cookie_for(self.cfg.secret, src));
        self.hs_replies
            .push_back((src, wire::emit_hs(PktType::Handshake, &hs)));
    }

    fn on_handshake(&mut self, now: Nanos, src: PeerAddr, hs: Hs) {
        let Some(p) = self.peers.get_mut(&src) else {
            self.stats.stale += 1;
            return;
        };
        if let TxHandshake::Known { .. } = p.hs {
            p.last_progress = now; // the answer to a probe
            return;
        }
        if !matches!(p.hs, TxHandshake::Asked(_)) || hs.cookie == 0 {
            self.stats.stale += 1;
            return;
        }
        p.last_progress = now;
        if hs.recvwin == 0 {
            // A peer with no room could never take a message: its operations fail
            // rather than wait for ever.
            self.stats.bad_handshake += 1;
            self.fail_peer(now, src, BAD_HANDSHAKE_ERRNO);
            return;
        }
        if hs.recvwin > MAX_RECVWIN {
            self.stats.recvwin_clamped += 1;
        }
        let Some(p) = self.peers.get_mut(&src) else {
            return;
        };
        p.hs = TxHandshake::Known {
            features: hs.features,
            cookie: hs.cookie,
            recvwin: hs.recvwin.min(MAX_RECVWIN),
        };
        let waiting = std::mem::take(&mut p.awaiting_hs);
        for id in waiting {
            self.start_tx(id);
        }
    }

    /// Ask `addr` for its handshake (if not asked yet) at `now`.
    pub(crate) fn ask_handshake(&mut self, now: Nanos, addr: PeerAddr) {
        let p = self.peer_mut(now, addr);
        if p.hs != TxHandshake::None {
            return;
        }
        p.hs = TxHandshake::Asked(now);
        self.send_hello(addr);
    }

    fn send_hello(&mut self, addr: PeerAddr) {
        let hs = self.own_hs(0);
        self.queue(addr, wire::emit_hs(PktType::Hello, &hs), Owner::None);
    }

    /// This endpoint's handshake fields with `cookie` (0 in `HELLO`): its version, its
    /// features and its receive window (at most [`MAX_RECVWIN`]).
    fn own_hs(&self, cookie: u64) -> Hs {
        Hs {
            max_version: u32::from(wire::VERSION),
            features: self.features(),
            cookie,
            recvwin: self.cfg.recvwin_size.clamp(1, MAX_RECVWIN),
        }
    }

    /// When [`Engine::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut at = |x: Nanos| t = Some(t.map_or(x, |y| y.min(x)));
        for p in self.peers.values() {
            if p.failed {
                continue;
            }
            if p.busy() {
                at(p.last_progress.saturating_add(self.cfg.peer_timeout));
            } else if p.ops > 0 {
                at(p.last_progress.saturating_add(self.cfg.probe_interval));
            }
            if let TxHandshake::Asked(s) = p.hs {
                at(s.saturating_add(self.cfg.hello_interval));
            }
            if !p.queue.is_empty() {
                if let Some(u) = p.backoff.until() {
                    at(u);
                }
            }
        }
        t
    }

    /// Run the timers due at `now`: `HELLO`s sent again; a peer with operations
    /// waiting but nothing on the network for [`Config::probe_interval`] is probed (a
    /// `HELLO`, whose transport completion proves it alive); a peer with packets in
    /// flight silent for [`Config::peer_timeout`] is declared lost.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        let mut lost = Vec::new();
        let mut hello = Vec::new();
        for (&a, p) in self.peers.iter_mut() {
            if p.failed {
                continue;
            }
            if p.busy() {
                if now >= p.last_progress.saturating_add(self.cfg.peer_timeout) {
                    lost.push(a);
                    continue;
                }
            } else if p.ops > 0 && now >= p.last_progress.saturating_add(self.cfg.probe_interval) {
                p.last_progress = now;
                hello.push(a);
                continue;
            }
            if let TxHandshake::Asked(s) = p.hs {
                if now >= s.saturating_add(self.cfg.hello_interval) {
                    p.hs = TxHandshake::Asked(now);
                    hello.push(a);
                }
            }
        }
        for a in hello {
            self.send_hello(a);
        }
        for a in lost {
            self.stats.peers_lost += 1;
            self.fail_peer(now, a, LOST_PEER_ERRNO);
        }
    }

    /// Complete everything involving `addr` with `err` and drop its state; the peer
    /// stays recorded as lost (packets from it are dropped) until removed.
    pub(crate) fn fail_peer(&mut self, _now: Nanos, addr: PeerAddr, err: Errno) {
        if let Some(p) = self.peers.get_mut(&addr) {
            p.failed = true;
            p.queue.clear();
            p.unacked.clear();
            p.awaiting_hs.clear();
            p.win.clear_held();
            p.work = 0;
            p.ops = 0;
            p.backoff.reset();
        }
        self.flights.retain(|_, f| f.peer != addr);
        self.read_tokens.retain(|_, (p, _)| *p != addr);
        self.reads
            .retain(|r| !matches!(r, Transmit::Read { peer, .. } if *peer == addr));
        self.hs_replies.retain(|(p, _)| *p != addr);
        for id in ids_of_peer(&self.tx, addr, |o| o.peer) {
            if let Some(op) = self.tx.remove(&id) {
                self.events.push_back(op.into_event(Err(err)));
            }
        }
        for id in ids_of_peer(&self.rx, addr, |o| o.peer) {
            if let Some(op) = self.rx.remove(&id) {
                self.rx_by_msg.remove(&(addr, op.msg_id));
                if !op.target.silent {
                    self.events.push_back(op.into_event(Err(err)));
                }
            }
        }
        self.unexp_segs.retain(|(p, _), _| *p != addr);
        self.rtw.retain(|(p, _), _| *p != addr);
    }
}

/// The ids of the operations in `ops` that `peer_of` says are `addr`'s, ascending (so
/// that what is done with them, as the events a failed peer's operations complete
/// with, happens in a fixed order).
fn ids_of_peer<O>(
    ops: &HashMap<u32, O>,
    addr: PeerAddr,
    peer_of: impl Fn(&O) -> PeerAddr,
) -> Vec<u32> {
    let mut ids: Vec<u32> = ops
        .iter()
        .filter(|(_, o)| peer_of(o) == addr)
        .map(|(&id, _)| id)
        .collect();
    ids.sort_unstable();
    ids
}
