//! The sans-IO reliable-datagram engine: connections to peers, sequence numbers, sliding
//! windows, acknowledgements, retransmission with exponential back-off, segmentation and
//! reassembly, and loss of unresponsive peers.
//!
//! [`Engine`] does no I/O and reads no clock. Its inputs are packet bytes
//! ([`Engine::handle_packet`]), the current time in nanoseconds of any monotonic clock
//! ([`Engine::handle_timeout`]) and messages to send ([`Engine::send_with`]); its outputs are
//! packets to put on the wire ([`Engine::poll_transmit`]), events ([`Engine::poll_event`]:
//! messages received, sends acknowledged or failed, peers lost) and its next deadline
//! ([`Engine::poll_timeout`]). Received messages come out whole
//! ([`Event::Message`]), or piece by piece in order to a sink
//! ([`Engine::handle_packet_streaming`]) so the caller can place them without a reassembly
//! copy. Tests drive it on a virtual clock over a simulated lossy
//! network; the endpoint drives it with `Instant` and the core provider.
//!
//! # Protocol
//!
//! - **Addresses**: a peer *is* the source address of its datagrams, as the caller
//!   reports it to [`Engine::handle_packet`]; no packet carries an address, and every
//!   packet goes to the address of a peer that proved it receives there (or, for a
//!   `CHALLENGE`, back to the datagram's source). Data, acknowledgements and `ACCEPT`s
//!   are taken only from the address of the connection they name.
//! - **Connection**: the first message to a peer sends `CONNECT` (our id and a fresh
//!   session number), repeated with back-off until `ACCEPT` arrives or the retry limit
//!   is reached. A `CONNECT` without a valid cookie is answered with a `CHALLENGE` to
//!   its source and leaves no state: the cookie is a keyed hash (SipHash-2-4, a key
//!   drawn at [`Engine::new`]) of the source address, a coarse time window
//!   ([`COOKIE_WINDOW_SHIFT`]) and the `CONNECT`'s id and session (its nonce). The
//!   initiator echoes it in a new `CONNECT`; only a `CONNECT` with a valid cookie
//!   (current or previous window) creates or refreshes a connection, answered with
//!   `ACCEPT` (again for duplicates of the connection's own session). So a peer's state
//!   exists only once it has shown it receives at its address, and a forged `CONNECT`
//!   (another source, or an invented one) changes nothing. Simultaneous connects
//!   converge: each side adopts the other's session. A cookie-validated `CONNECT` with a
//!   new session from a connected peer means the peer restarted or gave up on us: the
//!   old connection's operations fail and the new one starts from scratch.
//! - **Peer bound**: peers created by the far side (not by [`Engine::peer_for_addr`])
//!   are at most `max_peers`; at the bound, a new one takes the slot of the one heard
//!   from least recently among those with nothing queued, in flight or being received
//!   and either without a connection or silent for [`RECLAIM_IDLE_RTOS`] × `rto_max`
//!   ([`Event::PeerReclaimed`]); with none such, the `CONNECT` is ignored (its sender
//!   retries).
//! - **Timers**: a heap of (deadline, peer) holds the peers with a timer armed;
//!   [`Engine::handle_timeout`] visits only the peers whose deadline passed, so its work
//!   is proportional to them, not to every peer.
//! - **Data**: a message is cut into segments of at most `seg_size` bytes, one packet
//!   each, numbered by a per-connection 32-bit sequence number (wrap-safe). At most
//!   `window` packets and `max_inflight` bytes are unacknowledged. The receiver delivers
//!   segments in sequence order only (so messages to one peer arrive in the order sent:
//!   `FI_ORDER_SAS`), keeps out-of-order packets within twice the window, and drops
//!   duplicates; a message's length must add up exactly, or the peer is reset.
//! - **Acknowledgement**: cumulative (next sequence expected) plus a 64-bit selective
//!   bitmap, piggybacked on every packet to the peer; a standalone `ACK` goes after
//!   `ack_every` packets, after `ack_delay`, and at once for out-of-order or duplicate
//!   packets and for packets flagged [`F_REQ`] (the sender's bytes in flight passed half
//!   the limit, or its window is full).
//! - **Retransmission**: a packet not acknowledged within `rto × 2^(tries-1)` (capped at
//!   `rto_max`) is sent again; holes below a selectively acknowledged packet are resent
//!   after two such acknowledgements (at most once per quarter `rto`). A packet (or `CONNECT`) sent `retry_limit`
//!   times without answer declares the peer lost: every operation queued or in flight to
//!   it fails ([`Event::Failed`]), partial receives are dropped, and packets of that
//!   connection are ignored from then on. A later send opens a new connection.
//! - **Receiver not ready**: the streaming sink may refuse a piece that starts a message
//!   (no room for another unexpected message). The packet is then not taken — the
//!   receive sequence does not move past it, later packets wait out of order as usual —
//!   and an `ACK` flagged [`F_RNR`] tells the sender the peer is alive: the sender holds
//!   that packet's tries at a fixed level (so waiting is never counted toward losing
//!   the peer) and offers it again on its timer at that level's pace, never as a hole.
//!   So a receiver whose application does not post receives bounds what it buffers, and
//!   its senders wait instead of failing.
//!
//! # Invariants
//!
//! - `inflight` of a connection holds exactly the packets with sequence numbers in
//!   `[snd_una, snd_nxt)`, in order; those below `sent_upto` were transmitted.
//! - A message's token is reported exactly once: [`Event::Sent`] or [`Event::Failed`].
//! - Each peer's `timer_at` is in the timer heap (entries whose time differs from their
//!   peer's `timer_at` are stale and skipped); a peer with a deadline of any kind (a
//!   connection retry, a packet's retransmission, a delayed acknowledgement) has
//!   `timer_at` at or before it.
//! - `by_addr` maps the address of every peer slot to it (a reclaimed slot's old
//!   address is removed); `remote_peers` counts the slots not `pinned`.
//!
//! Nothing here panics on any input: malformed packets are counted and dropped.

#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use crate::cookie::CookieKey;

use crate::proto::{
    self, cookie_of, first_len, seq_lt, Hdr, PktType, COOKIE_LEN, FIRST_LEN, F_ACK, F_FIRST,
    F_LAST, F_REQ, F_RNR, HDR_LEN,
};

/// The peer given to [`Engine::poll_transmit`]'s sink for a packet that belongs to no
/// peer (a `CHALLENGE`, sent back to the source of the `CONNECT` it answers).
pub const NO_PEER: PeerId = PeerId::MAX;

pub use crate::cookie::COOKIE_WINDOW_SHIFT;

/// A peer created by the far side may be reclaimed, at the peer bound, once silent for
/// this many `rto_max`.
pub const RECLAIM_IDLE_RTOS: u64 = 4;

/// `CHALLENGE`s waiting to go at most; more are not answered (their senders retry).
const MAX_REPLIES: usize = 64;

/// A `CHALLENGE` packet: header and cookie.
type Reply = (Vec<u8>, [u8; HDR_LEN + COOKIE_LEN]);

/// The tries a packet refused by a receiver that is not ready ([`F_RNR`]) is held at
/// (below `retry_limit`: [`rnr_tries`]): it is offered again every `rto × 2^RNR_TRIES`
/// or so (32 ms with the defaults, at most `rto_max`), and the peer is lost only after
/// `retry_limit − RNR_TRIES` timeouts without any answer.
const RNR_TRIES: u32 = 4;

/// [`RNR_TRIES`], kept below the retry limit (a refusal must leave at least one
/// timeout before the peer counts as lost).
fn rnr_tries(cfg: &Config) -> u32 {
    RNR_TRIES.min(cfg.retry_limit.saturating_sub(1)).max(1)
}

/// A peer's index in the engine.
pub type PeerId = u32;

/// Engine parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Largest payload of one packet (the core's datagram size less [`HDR_LEN`]).
    pub seg_size: usize,
    /// Most unacknowledged packets per connection.
    pub window: u32,
    /// Most unacknowledged bytes per connection (at least one packet goes): keeps a
    /// burst within what the receiver's socket buffer holds.
    pub max_inflight: usize,
    /// First retransmission timeout, in nanoseconds.
    pub rto: u64,
    /// Largest retransmission timeout, in nanoseconds.
    pub rto_max: u64,
    /// Transmissions of one packet without answer before the peer is lost.
    pub retry_limit: u32,
    /// In-order packets received before a standalone acknowledgement goes.
    pub ack_every: u32,
    /// Longest delay of an acknowledgement, in nanoseconds.
    pub ack_delay: u64,
    /// Largest message accepted from a peer.
    pub max_msg: usize,
    /// First sequence number of each connection (tests start near the wrap).
    pub initial_seq: u32,
    /// Most peers created by the far side (see the module docs).
    pub max_peers: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seg_size: 8192,
            window: 256,
            max_inflight: 192 << 10,
            rto: 2_000_000,
            rto_max: 500_000_000,
            retry_limit: 12,
            ack_every: 16,
            ack_delay: 200_000,
            max_msg: 1 << 30,
            initial_seq: 0,
            max_peers: 65536,
        }
    }
}

/// Why operations to a peer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The peer stopped answering (retry limit reached).
    Lost,
    /// The peer opened a new connection (it restarted or gave up on us).
    Reset,
    /// The peer broke the protocol.
    Protocol,
}

/// What the engine reports.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A whole message from `peer`, in order.
    Message {
        /// Sender.
        peer: PeerId,
        /// The message.
        data: Vec<u8>,
    },
    /// Every packet of the message `token` was acknowledged.
    Sent {
        /// The token given to [`Engine::send_with`].
        token: u64,
    },
    /// The message `token` will not be delivered (or may not have been).
    Failed {
        /// The token.
        token: u64,
        /// Why.
        why: Failure,
    },
    /// The connection to `peer` ended (after its operations' `Failed` events).
    PeerLost {
        /// The peer.
        peer: PeerId,
        /// Why.
        why: Failure,
    },
    /// The slot of `peer` (created by the far side, idle) was taken for a new peer at
    /// the peer bound: whatever the caller keeps for the old one (its address) is stale.
    PeerReclaimed {
        /// The slot.
        peer: PeerId,
    },
}

/// One in-order piece of a message, handed to the sink of
/// [`Engine::handle_packet_streaming`].
#[derive(Debug, PartialEq, Eq)]
pub struct Seg<'a> {
    /// The sender.
    pub peer: PeerId,
    /// The sender's address (as in [`Engine::peer_addr`]).
    pub addr: &'a [u8],
    /// Whether this starts a message.
    pub first: bool,
    /// The message's total length.
    pub total: usize,
    /// Offset of `data` in the message.
    pub offset: usize,
    /// The bytes.
    pub data: &'a [u8],
    /// Whether this ends the message.
    pub last: bool,
}

/// Where [`Engine::handle_packet_streaming`] hands message pieces. It returns whether it
/// took the piece; only a piece that starts a message (`first`) may be refused
/// (receiver not ready: see the module docs) — for any other piece the answer is ignored.
pub type SegSink<'s> = dyn FnMut(Seg<'_>) -> bool + 's;

/// What became of one in-order segment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Taken,
    /// The sink refused a first piece: the packet stays unreceived.
    NotReady,
    /// The peer broke the protocol (it is reset).
    Broken,
}

/// Engine counters (for tests, logs and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets handed to [`Engine::poll_transmit`]'s sink.
    pub sent: u64,
    /// Of which retransmissions (data and `CONNECT`).
    pub retransmits: u64,
    /// Packets accepted by [`Engine::handle_packet`].
    pub received: u64,
    /// Duplicate data packets dropped.
    pub duplicates: u64,
    /// Malformed, stale or unexpected packets dropped.
    pub dropped: u64,
    /// First pieces the streaming sink refused (receiver not ready).
    pub not_ready: u64,
    /// Acknowledgements flagged [`F_RNR`] received (the peer was not ready).
    pub peer_not_ready: u64,
    /// `CONNECT`s without a valid cookie, answered with a `CHALLENGE` (or not, past the
    /// queue of replies).
    pub challenged: u64,
    /// Packets from a source that is not the address of the connection they name.
    pub wrong_source: u64,
    /// Peer slots reclaimed at the peer bound.
    pub reclaimed: u64,
    /// Peers whose timers [`Engine::handle_timeout`] ran (its work).
    pub timer_visits: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Connecting { tries: u32, deadline: u64 },
    Connected,
}

struct TxPkt {
    buf: Vec<u8>,
    sent_at: u64,
    deadline: u64,
    tries: u32,
    sacked: bool,
    /// Counted in the peer's `inflight_bytes`.
    counted: bool,
    /// The peer refused it (receiver not ready): resent on the timer only.
    rnr: bool,
}

struct Peer {
    addr: Vec<u8>,
    state: State,
    local_sess: u32,
    remote_id: u32,
    remote_sess: u32,
    // Transmit side.
    snd_una: u32,
    snd_nxt: u32,
    sent_upto: u32,
    inflight_bytes: usize,
    inflight: VecDeque<TxPkt>,
    /// (token, sequence number of the message's last packet).
    msgs: VecDeque<(u64, u32)>,
    resend: VecDeque<u32>,
    dup_sacks: u32,
    send_accept: bool,
    send_connect: bool,
    // Receive side.
    rcv_nxt: u32,
    ooo: BTreeMap<u32, Vec<u8>>,
    /// Reassembly buffer (reassembling delivery only).
    reasm: Option<Vec<u8>>,
    /// A message is open: its total length and the bytes delivered so far.
    rx_open: Option<(usize, usize)>,
    ack_count: u32,
    ack_due: Option<u64>,
    ack_now: bool,
    /// An acknowledgement flagged [`F_RNR`] is owed (a first piece was refused).
    rnr: bool,
    queued: bool,
    /// The cookie the peer gave us to echo in our `CONNECT` (0: none).
    cookie: u64,
    /// Created by the local side ([`Engine::peer_for_addr`]): never reclaimed.
    pinned: bool,
    /// When a valid packet last came from the peer.
    last_heard: u64,
    /// This peer's entry in the timer heap (`u64::MAX`: none).
    timer_at: u64,
}

impl Peer {
    fn new(addr: Vec<u8>, seq: u32) -> Peer {
        Peer {
            addr,
            state: State::Idle,
            local_sess: 0,
            remote_id: 0,
            remote_sess: 0,
            snd_una: seq,
            snd_nxt: seq,
            sent_upto: seq,
            inflight_bytes: 0,
            inflight: VecDeque::new(),
            msgs: VecDeque::new(),
            resend: VecDeque::new(),
            dup_sacks: 0,
            send_accept: false,
            send_connect: false,
            rcv_nxt: seq,
            ooo: BTreeMap::new(),
            reasm: None,
            rx_open: None,
            ack_count: 0,
            ack_due: None,
            ack_now: false,
            rnr: false,
            queued: false,
            cookie: 0,
            pinned: false,
            last_heard: 0,
            timer_at: u64::MAX,
        }
    }

    /// Nothing queued, in flight, being received or owed to the peer.
    fn quiet(&self) -> bool {
        self.msgs.is_empty()
            && self.inflight.is_empty()
            && self.ooo.is_empty()
            && self.rx_open.is_none()
            && self.ack_due.is_none()
            && !self.ack_now
            && !self.queued
    }

    fn sack_bits(&self) -> u64 {
        let mut s = 0u64;
        for &q in self.ooo.keys() {
            let d = q.wrapping_sub(self.rcv_nxt);
            if (1..=64).contains(&d) {
                s |= 1 << (d - 1);
            }
        }
        s
    }
}

/// The engine of one endpoint (see the module docs).
pub struct Engine {
    cfg: Config,
    peers: Vec<Peer>,
    by_addr: HashMap<Vec<u8>, PeerId>,
    /// Peers created by the far side (counted against `max_peers`).
    remote_peers: usize,
    events: VecDeque<Event>,
    ready: VecDeque<PeerId>,
    next_sess: u32,
    /// (deadline, peer) of the peers with a timer armed (see the invariants).
    timers: BinaryHeap<Reverse<(u64, PeerId)>>,
    /// `CHALLENGE`s to send: (destination, packet).
    replies: VecDeque<Reply>,
    /// The cookie key.
    cookie_key: CookieKey,
    stats: Stats,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("peers", &self.peers.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Make sure `p` (peer `pid`)'s timer fires by `t`: a heap entry only when `t` is
/// earlier than the one it has.
fn arm_in(timers: &mut BinaryHeap<Reverse<(u64, PeerId)>>, p: &mut Peer, pid: PeerId, t: u64) {
    if t < p.timer_at {
        p.timer_at = t;
        timers.push(Reverse((t, pid)));
    }
}

fn rto_for(cfg: &Config, tries: u32) -> u64 {
    let t = cfg
        .rto
        .saturating_mul(1u64 << tries.saturating_sub(1).min(30));
    t.min(cfg.rto_max).max(1)
}

impl Engine {
    /// An engine; `sess_seed` makes its session numbers differ from a previous
    /// incarnation's. Its cookie key is drawn from std's randomly keyed hasher.
    pub fn new(cfg: Config, sess_seed: u32) -> Engine {
        Engine::with_key(cfg, sess_seed, CookieKey::random(sess_seed))
    }

    /// An engine with a given cookie key (deterministic tests and fuzzing).
    pub fn with_cookie_key(cfg: Config, sess_seed: u32, cookie_key: (u64, u64)) -> Engine {
        Engine::with_key(cfg, sess_seed, CookieKey::from_parts(cookie_key))
    }

    fn with_key(cfg: Config, sess_seed: u32, cookie_key: CookieKey) -> Engine {
        let cfg = Config {
            seg_size: cfg.seg_size.max(64),
            window: cfg.window.clamp(1, 1 << 20),
            retry_limit: cfg.retry_limit.max(1),
            ack_every: cfg.ack_every.max(1),
            ..cfg
        };
        Engine {
            cfg,
            peers: Vec::new(),
            by_addr: HashMap::new(),
            remote_peers: 0,
            events: VecDeque::new(),
            ready: VecDeque::new(),
            next_sess: sess_seed | 1,
            timers: BinaryHeap::new(),
            replies: VecDeque::new(),
            cookie_key,
            stats: Stats::default(),
            scratch: Vec::new(),
        }
    }

    /// The cookie a `CONNECT` from `src` with id `src_id` and session `src_sess` must
    /// carry at `now` (never 0). Public for tests and fuzzing, which forge valid ones.
    pub fn cookie_for(&self, src: &[u8], src_id: u32, src_sess: u32, now: u64) -> u64 {
        self.cookie_key.make(src, src_id, src_sess, now)
    }

    /// Peers in use (created by either side).
    pub fn peer_count(&self) -> usize {
        self.by_addr.len()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The peer with address `addr` (created, not connected, if new), for the local
    /// side: it is never reclaimed.
    pub fn peer_for_addr(&mut self, addr: &[u8]) -> PeerId {
        if let Some(&p) = self.by_addr.get(addr) {
            if let Some(x) = self.peers.get_mut(p as usize) {
                if !x.pinned {
                    x.pinned = true;
                    self.remote_peers = self.remote_peers.saturating_sub(1);
                }
            }
            return p;
        }
        let id = self.peers.len() as PeerId;
        let mut p = Peer::new(addr.to_vec(), self.cfg.initial_seq);
        p.pinned = true;
        self.peers.push(p);
        self.by_addr.insert(addr.to_vec(), id);
        id
    }

    /// The peer at `addr` for a proven `CONNECT`: the existing one, a new one, or a
    /// reclaimed slot at the peer bound; `None` at the bound with nothing to reclaim.
    fn remote_peer(&mut self, addr: &[u8], now: u64) -> Option<PeerId> {
        if let Some(&p) = self.by_addr.get(addr) {
            return Some(p);
        }
        let seq = self.cfg.initial_seq;
        if self.remote_peers < self.cfg.max_peers {
            let id = self.peers.len() as PeerId;
            self.peers.push(Peer::new(addr.to_vec(), seq));
            self.by_addr.insert(addr.to_vec(), id);
            self.remote_peers += 1;
            return Some(id);
        }
        // At the bound: the quiet, far-created peer heard from least recently, if it
        // has no connection or has been silent long enough.
        let idle = self.cfg.rto_max.saturating_mul(RECLAIM_IDLE_RTOS);
        let victim = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                !p.pinned
                    && p.quiet()
                    && !matches!(p.state, State::Connecting { .. })
                    && (p.state == State::Idle || now.saturating_sub(p.last_heard) >= idle)
            })
            .min_by_key(|(_, p)| p.last_heard)
            .map(|(i, _)| i as PeerId)?;
        let old = std::mem::replace(
            &mut self.peers[victim as usize],
            Peer::new(addr.to_vec(), seq),
        );
        self.by_addr.remove(&old.addr);
        self.by_addr.insert(addr.to_vec(), victim);
        self.stats.reclaimed += 1;
        self.events.push_back(Event::PeerReclaimed { peer: victim });
        Some(victim)
    }

    /// The address of `peer` (empty for an unknown id).
    pub fn peer_addr(&self, peer: PeerId) -> &[u8] {
        self.peers
            .get(peer as usize)
            .map(|p| p.addr.as_slice())
            .unwrap_or(&[])
    }

    /// Whether `peer` has a connection up.
    pub fn is_connected(&self, peer: PeerId) -> bool {
        self.peers
            .get(peer as usize)
            .is_some_and(|p| p.state == State::Connected)
    }

    /// Messages of `peer` not yet acknowledged (queued or in flight).
    pub fn pending(&self, peer: PeerId) -> usize {
        self.peers.get(peer as usize).map_or(0, |p| p.msgs.len())
    }

    /// Whether anything remains to be sent, acknowledged or timed (walks every peer:
    /// for tests and diagnostics, not the data path).
    pub fn is_idle(&self) -> bool {
        self.ready.is_empty()
            && self.replies.is_empty()
            && self.peers.iter().all(|p| {
                p.msgs.is_empty() && p.inflight.is_empty() && !p.ack_now && p.ack_due.is_none()
            })
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time [`Engine::handle_timeout`] has work (`None`: no timer). It may
    /// be early (a timer already cancelled), never late.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Make sure `pid`'s timer fires by `t`.
    fn arm(&mut self, pid: PeerId, t: u64) {
        if let Some(p) = self.peers.get_mut(pid as usize) {
            arm_in(&mut self.timers, p, pid, t);
        }
    }

    fn mark(&mut self, p: PeerId) {
        if let Some(x) = self.peers.get_mut(p as usize) {
            if !x.queued {
                x.queued = true;
                self.ready.push_back(p);
            }
        }
    }

    fn new_sess(&mut self) -> u32 {
        self.next_sess = self
            .next_sess
            .wrapping_mul(0x9e37_79b9)
            .wrapping_add(0x7f4a_7c15);
        if self.next_sess == 0 {
            self.next_sess = 1;
        }
        self.next_sess
    }

    /// Queue a message of `len` bytes to `peer`; `fill(offset, n, packet)` appends the
    /// `n` message bytes at `offset` to `packet` (called once per segment, in order; a
    /// packet left of another length is cut or zero-padded to it). `token` is reported
    /// in [`Event::Sent`] or [`Event::Failed`]. Starts a connection when needed.
    ///
    /// # Errors
    /// `Err(())` for an unknown peer or a message over `max_msg` (or 4 GiB).
    #[allow(clippy::result_unit_err)]
    pub fn send_with(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        now: u64,
        mut fill: impl FnMut(usize, usize, &mut Vec<u8>),
    ) -> Result<(), ()> {
        if len > self.cfg.max_msg || len > u32::MAX as usize {
            return Err(());
        }
        let seg = self.cfg.seg_size;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return Err(());
        };
        let mut off = 0usize;
        let mut first = true;
        loop {
            let hdr_extra = if first { FIRST_LEN } else { 0 };
            let n = (len - off).min(seg - hdr_extra);
            let last = off + n == len;
            let mut buf = Vec::with_capacity(HDR_LEN + hdr_extra + n);
            let mut h = Hdr::new(PktType::Data);
            h.seq = p.snd_nxt;
            h.flags = if first { F_FIRST } else { 0 } | if last { F_LAST } else { 0 };
            buf.resize(HDR_LEN + hdr_extra, 0);
            h.write(&mut buf);
            if first {
                buf[HDR_LEN..HDR_LEN + FIRST_LEN].copy_from_slice(&(len as u32).to_le_bytes());
            }
            let at = buf.len();
            fill(off, n, &mut buf);
            buf.resize(at + n, 0);
            p.inflight.push_back(TxPkt {
                buf,
                sent_at: 0,
                deadline: 0,
                tries: 0,
                sacked: false,
                counted: false,
                rnr: false,
            });
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
            off += n;
            first = false;
            if last {
                break;
            }
        }
        p.msgs.push_back((token, p.snd_nxt.wrapping_sub(1)));
        if p.state == State::Idle {
            self.start_connect(peer, now);
        }
        self.mark(peer);
        Ok(())
    }

    /// Queue a message held in `data` (see [`Engine::send_with`]).
    ///
    /// # Errors
    /// As [`Engine::send_with`].
    #[allow(clippy::result_unit_err)]
    pub fn send(&mut self, peer: PeerId, token: u64, data: &[u8], now: u64) -> Result<(), ()> {
        self.send_with(peer, token, data.len(), now, |off, n, dst| {
            dst.extend_from_slice(&data[off..off + n])
        })
    }

    fn start_connect(&mut self, peer: PeerId, now: u64) {
        let sess = self.new_sess();
        let deadline = now.saturating_add(rto_for(&self.cfg, 1));
        if let Some(p) = self.peers.get_mut(peer as usize) {
            p.local_sess = sess;
            p.remote_sess = 0;
            p.remote_id = 0;
            p.cookie = 0;
            p.state = State::Connecting { tries: 1, deadline };
            p.send_connect = true;
        }
        self.arm(peer, deadline);
        self.mark(peer);
    }

    /// Reset `peer`'s connection state; its messages fail with `why`.
    fn fail_peer(&mut self, peer: PeerId, why: Failure) {
        let seq = self.cfg.initial_seq;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return;
        };
        for (token, _) in p.msgs.drain(..) {
            self.events.push_back(Event::Failed { token, why });
        }
        p.inflight.clear();
        p.inflight_bytes = 0;
        p.resend.clear();
        p.ooo.clear();
        p.reasm = None;
        p.rx_open = None;
        p.state = State::Idle;
        p.local_sess = 0;
        p.remote_sess = 0;
        p.remote_id = 0;
        p.snd_una = seq;
        p.snd_nxt = seq;
        p.sent_upto = seq;
        p.rcv_nxt = seq;
        p.ack_count = 0;
        p.ack_due = None;
        p.ack_now = false;
        p.send_accept = false;
        p.send_connect = false;
        p.cookie = 0;
        p.dup_sacks = 0;
        self.events.push_back(Event::PeerLost { peer, why });
    }

    /// Handle one packet received at time `now` from the address `src` (the datagram's
    /// source as the network reports it, in the form of the peers' addresses).
    pub fn handle_packet(&mut self, src: &[u8], pkt: &[u8], now: u64) {
        self.handle_packet_inner(src, pkt, now, None);
    }

    /// Handle one received packet at time `now`, handing message data to `sink` piece
    /// by piece, in order, as it becomes deliverable, instead of reassembling it into an
    /// [`Event::Message`]: the caller places it (no reassembly copy). A peer's open
    /// message ends with a piece with `last`, or is abandoned when an
    /// [`Event::PeerLost`] for the peer comes (or a new `first` piece from it: a new
    /// connection).
    pub fn handle_packet_streaming(
        &mut self,
        src: &[u8],
        pkt: &[u8],
        now: u64,
        sink: &mut SegSink<'_>,
    ) {
        self.handle_packet_inner(src, pkt, now, Some(sink));
    }

    fn handle_packet_inner(
        &mut self,
        src: &[u8],
        pkt: &[u8],
        now: u64,
        mut sink: Option<&mut SegSink<'_>>,
    ) {
        let Ok(h) = Hdr::from_bytes(pkt) else {
            self.stats.dropped += 1;
            return;
        };
        let body = &pkt[HDR_LEN..];
        match h.ty {
            PktType::Connect => self.on_connect(src, &h, body, now),
            PktType::Challenge => self.on_challenge(src, &h, body),
            PktType::Accept => self.on_accept(src, &h, now),
            PktType::Data | PktType::Ack => {
                let Some(pid) = self.check_conn(src, &h) else {
                    self.stats.dropped += 1;
                    return;
                };
                self.stats.received += 1;
                self.peers[pid as usize].last_heard = now;
                if h.flags & F_ACK != 0 {
                    self.on_ack(pid, h.ack, h.sack, h.flags & F_RNR != 0, now);
                }
                if h.ty == PktType::Data {
                    self.on_data(pid, &h, pkt, now, &mut sink);
                }
            }
        }
    }

    /// The connected peer a data or ack packet from `src` belongs to.
    fn check_conn(&mut self, src: &[u8], h: &Hdr) -> Option<PeerId> {
        let p = self.peers.get(h.dst_id as usize)?;
        let ok = p.state == State::Connected
            && p.local_sess == h.dst_sess
            && p.remote_sess == h.src_sess
            && p.remote_id == h.src_id;
        if ok && p.addr != src {
            self.stats.wrong_source += 1;
            return None;
        }
        ok.then_some(h.dst_id)
    }

    /// Queue a `CHALLENGE` for the `CONNECT` `h` from `src` (no peer state).
    fn challenge(&mut self, src: &[u8], h: &Hdr, now: u64) {
        self.stats.challenged += 1;
        if self.replies.len() >= MAX_REPLIES {
            return;
        }
        let mut c = Hdr::new(PktType::Challenge);
        c.dst_id = h.src_id;
        c.dst_sess = h.src_sess;
        let mut pkt = [0u8; HDR_LEN + COOKIE_LEN];
        c.write(&mut pkt);
        let cookie = self.cookie_for(src, h.src_id, h.src_sess, now);
        pkt[HDR_LEN..].copy_from_slice(&cookie.to_le_bytes());
        self.replies.push_back((src.to_vec(), pkt));
    }

    fn on_connect(&mut self, src: &[u8], h: &Hdr, body: &[u8], now: u64) {
        let Some(cookie) = cookie_of(body)
            .ok()
            .filter(|_| h.src_sess != 0 && !src.is_empty())
        else {
            self.stats.dropped += 1;
            return;
        };
        if let Some(&pid) = self.by_addr.get(src) {
            let p = &mut self.peers[pid as usize];
            if p.remote_sess == h.src_sess && p.remote_id == h.src_id && p.state == State::Connected
            {
                // A duplicate from the connection's own address (or our ACCEPT was
                // lost): answer again, to that address.
                self.stats.received += 1;
                p.last_heard = now;
                p.send_accept = true;
                self.mark(pid);
                return;
            }
        }
        if !self
            .cookie_key
            .valid(src, h.src_id, h.src_sess, cookie, now)
        {
            self.challenge(src, h, now);
            return;
        }
        // The sender receives at `src`: it may have state now.
        let Some(pid) = self.remote_peer(src, now) else {
            self.stats.dropped += 1;
            return;
        };
        self.stats.received += 1;
        self.peers[pid as usize].last_heard = now;
        let st = self.peers[pid as usize].state;
        let (rs, ri) = {
            let p = &self.peers[pid as usize];
            (p.remote_sess, p.remote_id)
        };
        if rs == h.src_sess && ri == h.src_id && st == State::Connected {
            self.peers[pid as usize].send_accept = true;
            self.mark(pid);
            return;
        }
        match st {
            State::Connecting { .. } if rs == 0 => {}
            State::Idle => {
                let s = self.new_sess();
                self.peers[pid as usize].local_sess = s;
            }
            _ => {
                // A new connection from a peer we had one with: the old one is over.
                self.fail_peer(pid, Failure::Reset);
                let s = self.new_sess();
                self.peers[pid as usize].local_sess = s;
            }
        }
        let p = &mut self.peers[pid as usize];
        p.remote_sess = h.src_sess;
        p.remote_id = h.src_id;
        p.state = State::Connected;
        p.send_accept = true;
        p.send_connect = false;
        self.mark(pid);
    }

    /// A `CHALLENGE` from `src`: taken only for a connection we are opening to `src`
    /// with the session it names; our next `CONNECT` (at once) echoes the cookie.
    fn on_challenge(&mut self, src: &[u8], h: &Hdr, body: &[u8]) {
        let cookie = cookie_of(body).unwrap_or(0);
        let ok = self.peers.get(h.dst_id as usize).is_some_and(|p| {
            p.local_sess == h.dst_sess
                && cookie != 0
                && matches!(p.state, State::Connecting { .. })
                && p.addr == src
        });
        if !ok {
            self.stats.dropped += 1;
            return;
        }
        self.stats.received += 1;
        let pid = h.dst_id;
        let p = &mut self.peers[pid as usize];
        if p.cookie != cookie {
            p.cookie = cookie;
            p.send_connect = true;
            self.mark(pid);
        }
    }

    fn on_accept(&mut self, src: &[u8], h: &Hdr, now: u64) {
        let ok = self.peers.get(h.dst_id as usize).is_some_and(|p| {
            p.local_sess == h.dst_sess
                && h.src_sess != 0
                && matches!(p.state, State::Connecting { .. })
                && p.addr == src
        });
        if !ok {
            // Duplicates of an ACCEPT already taken are harmless.
            self.stats.dropped += 1;
            return;
        }
        self.stats.received += 1;
        let pid = h.dst_id;
        let p = &mut self.peers[pid as usize];
        p.last_heard = now;
        p.remote_sess = h.src_sess;
        p.remote_id = h.src_id;
        p.state = State::Connected;
        p.send_connect = false;
        self.mark(pid);
    }

    fn on_ack(&mut self, pid: PeerId, ack: u32, sack: u64, rnr: bool, now: u64) {
        let cfg = self.cfg;
        let p = &mut self.peers[pid as usize];
        // Ignore acknowledgements of packets never sent.
        if seq_lt(p.sent_upto, ack) || seq_lt(ack, p.snd_una) {
            return;
        }
        let mut progressed = false;
        while seq_lt(p.snd_una, ack) {
            if let Some(t) = p.inflight.pop_front() {
                if t.counted {
                    p.inflight_bytes = p.inflight_bytes.saturating_sub(t.buf.len());
                }
            }
            p.snd_una = p.snd_una.wrapping_add(1);
            progressed = true;
        }
        while let Some(&(token, last)) = p.msgs.front() {
            if seq_lt(last, ack) {
                p.msgs.pop_front();
                self.events.push_back(Event::Sent { token });
            } else {
                break;
            }
        }
        if progressed {
            p.dup_sacks = 0;
        }
        if rnr && ack == p.snd_una {
            // The peer is alive but refused the next packet: offer it again at a
            // fixed pace, not counted toward losing the peer.
            if let Some(t) = p.inflight.front_mut().filter(|t| t.tries > 0) {
                t.rnr = true;
                t.tries = t.tries.min(rnr_tries(&cfg));
                t.sent_at = now;
                t.deadline = now.saturating_add(rto_for(&cfg, t.tries + 1));
                let d = t.deadline;
                arm_in(&mut self.timers, p, pid, d);
            }
            self.stats.peer_not_ready += 1;
        }
        if sack != 0 {
            let mut top = 0u32;
            for i in 0..64u32 {
                if sack & (1 << i) != 0 {
                    let idx = (i + 1) as usize;
                    if let Some(t) = p.inflight.get_mut(idx) {
                        t.sacked = true;
                    }
                    top = i + 1;
                }
            }
            if !progressed {
                p.dup_sacks += 1;
            }
            if p.dup_sacks >= 2 || progressed {
                // Resend holes below the highest packet the peer has, once per RTO.
                let rto = self.cfg.rto;
                let mut any = false;
                for idx in 0..top as usize {
                    if let Some(t) = p.inflight.get_mut(idx) {
                        if !t.sacked
                            && !t.rnr
                            && t.tries > 0
                            && now.saturating_sub(t.sent_at) >= rto / 4
                        {
                            let s = p.snd_una.wrapping_add(idx as u32);
                            if !p.resend.contains(&s) {
                                p.resend.push_back(s);
                                any = true;
                            }
                        }
                    }
                }
                if any {
                    p.dup_sacks = 0;
                    self.mark(pid);
                }
            }
        }
        if progressed
            && seq_lt(
                self.peers[pid as usize].sent_upto,
                self.peers[pid as usize].snd_nxt,
            )
        {
            self.mark(pid);
        }
    }

    fn on_data(
        &mut self,
        pid: PeerId,
        h: &Hdr,
        pkt: &[u8],
        now: u64,
        sink: &mut Option<&mut SegSink<'_>>,
    ) {
        let window = self.cfg.window;
        let p = &mut self.peers[pid as usize];
        let s = h.seq;
        if seq_lt(s, p.rcv_nxt) {
            self.stats.duplicates += 1;
            p.ack_now = true;
            self.mark(pid);
            return;
        }
        if s != p.rcv_nxt {
            if s.wrapping_sub(p.rcv_nxt) > window.saturating_mul(2) {
                self.stats.dropped += 1;
                return;
            }
            match p.ooo.entry(s) {
                std::collections::btree_map::Entry::Occupied(_) => self.stats.duplicates += 1,
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(pkt.to_vec());
                }
            }
            p.ack_now = true;
            self.mark(pid);
            return;
        }
        // A window-full sender: acknowledge at the end of this round.
        if h.flags & F_REQ != 0 {
            p.ack_now = true;
        }
        match self.deliver(pid, h.flags, &pkt[HDR_LEN..], sink) {
            Delivery::Taken => {}
            Delivery::NotReady => return self.not_ready(pid),
            Delivery::Broken => return,
        }
        loop {
            let p = &mut self.peers[pid as usize];
            p.rcv_nxt = p.rcv_nxt.wrapping_add(1);
            p.ack_count += 1;
            let nxt = p.rcv_nxt;
            let Some(b) = p.ooo.remove(&nxt) else {
                break;
            };
            let flags = b[3];
            if flags & F_REQ != 0 {
                p.ack_now = true;
            }
            match self.deliver(pid, flags, &b[HDR_LEN..], sink) {
                Delivery::Taken => {}
                Delivery::NotReady => {
                    // Kept where it was, for when the receiver has room.
                    self.peers[pid as usize].ooo.insert(nxt, b);
                    return self.not_ready(pid);
                }
                Delivery::Broken => return,
            }
        }
        let every = self.cfg.ack_every;
        let delay = self.cfg.ack_delay;
        let p = &mut self.peers[pid as usize];
        if p.ack_now || p.ack_count >= every || !p.ooo.is_empty() {
            p.ack_now = true;
            self.mark(pid);
        } else if p.ack_due.is_none() {
            let t = now.saturating_add(delay);
            p.ack_due = Some(t);
            self.arm(pid, t);
        }
    }

    /// The sink refused the next packet of `pid`: owe the peer an `F_RNR` acknowledgement.
    fn not_ready(&mut self, pid: PeerId) {
        self.stats.not_ready += 1;
        let p = &mut self.peers[pid as usize];
        p.rnr = true;
        p.ack_now = true;
        self.mark(pid);
    }

    /// Take one in-order segment (see [`Delivery`]).
    fn deliver(
        &mut self,
        pid: PeerId,
        flags: u8,
        body: &[u8],
        sink: &mut Option<&mut SegSink<'_>>,
    ) -> Delivery {
        let max = self.cfg.max_msg;
        let p = &mut self.peers[pid as usize];
        let last = flags & F_LAST != 0;
        // Check the segment against the open message (lengths must add up exactly).
        let (first, total, offset, data) = if flags & F_FIRST != 0 {
            match first_len(body) {
                Ok(t) if p.rx_open.is_none() && (t as usize) <= max => {
                    let d = &body[FIRST_LEN..];
                    (true, t as usize, 0, d)
                }
                _ => (false, 0, usize::MAX, body),
            }
        } else {
            match p.rx_open {
                Some((t, got)) => (false, t, got, body),
                None => (false, 0, usize::MAX, body),
            }
        };
        let ok = offset != usize::MAX
            && offset + data.len() <= total
            && last == (offset + data.len() == total);
        if !ok {
            self.stats.dropped += 1;
            self.fail_peer(pid, Failure::Protocol);
            return Delivery::Broken;
        }
        let open = (!last).then_some((total, offset + data.len()));
        match sink {
            Some(f) => {
                let taken = f(Seg {
                    peer: pid,
                    addr: &p.addr,
                    first,
                    total,
                    offset,
                    data,
                    last,
                });
                if first && !taken {
                    return Delivery::NotReady;
                }
                p.rx_open = open;
            }
            None => {
                p.rx_open = open;
                if first && last {
                    self.events.push_back(Event::Message {
                        peer: pid,
                        data: data.to_vec(),
                    });
                } else {
                    let v = p.reasm.get_or_insert_with(|| Vec::with_capacity(total));
                    v.extend_from_slice(data);
                    if last {
                        if let Some(v) = p.reasm.take() {
                            self.events.push_back(Event::Message { peer: pid, data: v });
                        }
                    }
                }
            }
        }
        Delivery::Taken
    }

    /// Run the timers due at `now`: connection retries, retransmissions, delayed
    /// acknowledgements, lost peers.
    ///
    /// Only the peers whose timer is due are visited (the timer heap).
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&Reverse((t, pid))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(p) = self.peers.get_mut(pid as usize) else {
                continue;
            };
            if p.timer_at != t {
                // Stale: the peer was re-armed (or reclaimed) since.
                continue;
            }
            p.timer_at = u64::MAX;
            self.stats.timer_visits += 1;
            let next = self.peer_timers(pid, now);
            if next != u64::MAX {
                self.arm(pid, next);
            }
        }
    }

    /// Run `pid`'s timers due at `now`; its next deadline.
    fn peer_timers(&mut self, pid: PeerId, now: u64) -> u64 {
        let mut next = u64::MAX;
        let limit = self.cfg.retry_limit;
        {
            let mut lost = false;
            let mut mark = false;
            {
                let cfg = self.cfg;
                let p = &mut self.peers[pid as usize];
                if let Some(t) = p.ack_due {
                    if t <= now {
                        p.ack_due = None;
                        p.ack_now = true;
                        mark = true;
                    } else {
                        next = next.min(t);
                    }
                }
                match p.state {
                    State::Connecting { tries, deadline } => {
                        if deadline <= now {
                            if tries >= limit {
                                lost = true;
                            } else {
                                let d = now.saturating_add(rto_for(&cfg, tries + 1));
                                p.state = State::Connecting {
                                    tries: tries + 1,
                                    deadline: d,
                                };
                                p.send_connect = true;
                                self.stats.retransmits += 1;
                                mark = true;
                                next = next.min(d);
                            }
                        } else {
                            next = next.min(deadline);
                        }
                    }
                    State::Connected => {
                        let sent = p.sent_upto.wrapping_sub(p.snd_una) as usize;
                        // While the peer refuses the first packet (not ready), only that
                        // one is offered again: the others wait behind it, uncounted.
                        let held = p.inflight.front().is_some_and(|t| t.rnr);
                        for (idx, t) in p.inflight.iter_mut().take(sent).enumerate() {
                            if t.sacked {
                                continue;
                            }
                            if held && idx > 0 {
                                if t.deadline <= now {
                                    t.deadline =
                                        now.saturating_add(rto_for(&cfg, rnr_tries(&cfg) + 1));
                                }
                                next = next.min(t.deadline);
                                continue;
                            }
                            if t.deadline <= now {
                                if t.tries >= limit {
                                    lost = true;
                                    break;
                                }
                                let s = p.snd_una.wrapping_add(idx as u32);
                                if !p.resend.contains(&s) {
                                    p.resend.push_back(s);
                                }
                                // Back off now so the scan does not fire again before
                                // the resend goes.
                                t.deadline = now.saturating_add(rto_for(&cfg, t.tries + 1));
                                mark = true;
                            }
                            next = next.min(t.deadline);
                        }
                    }
                    State::Idle => {}
                }
            }
            if lost {
                self.fail_peer(pid, Failure::Lost);
                return u64::MAX;
            } else if mark {
                self.mark(pid);
            }
        }
        next
    }

    /// Hand packets to `sink(peer, address, bytes)` (to be sent as one datagram to the
    /// peer's address) at time `now`, at most `budget` of them. `sink` returns `false` when the
    /// network cannot take more now (the packet is kept and offered again later).
    /// Returns the packets taken.
    pub fn poll_transmit(
        &mut self,
        now: u64,
        budget: usize,
        mut sink: impl FnMut(PeerId, &[u8], &[u8]) -> bool,
    ) -> usize {
        let mut n = 0;
        // Challenges first: to the source of the CONNECT each answers.
        while n < budget {
            let Some((to, pkt)) = self.replies.front() else {
                break;
            };
            if !sink(NO_PEER, to, pkt) {
                return n;
            }
            self.replies.pop_front();
            self.stats.sent += 1;
            n += 1;
        }
        while n < budget {
            let Some(&pid) = self.ready.front() else {
                break;
            };
            let (done, sent, blocked) = self.pump_peer(pid, now, budget - n, &mut sink);
            n += sent;
            if blocked {
                break;
            }
            if done {
                self.ready.pop_front();
                if let Some(p) = self.peers.get_mut(pid as usize) {
                    p.queued = false;
                }
            }
        }
        n
    }

    /// Send what `pid` has; (nothing left, packets sent, sink refused).
    fn pump_peer(
        &mut self,
        pid: PeerId,
        now: u64,
        budget: usize,
        sink: &mut impl FnMut(PeerId, &[u8], &[u8]) -> bool,
    ) -> (bool, usize, bool) {
        let cfg = self.cfg;
        let Some(p) = self.peers.get_mut(pid as usize) else {
            return (true, 0, false);
        };
        let mut n = 0;
        if p.send_connect {
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Connect);
            h.src_id = pid;
            h.src_sess = p.local_sess;
            self.scratch.clear();
            self.scratch.extend_from_slice(&h.bytes());
            self.scratch.extend_from_slice(&p.cookie.to_le_bytes());
            if !sink(pid, &p.addr, &self.scratch) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.send_connect = false;
        }
        if p.state != State::Connected {
            return (true, n, false);
        }
        let sack = p.sack_bits();
        let ack = p.rcv_nxt;
        if p.send_accept {
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Accept);
            h.dst_id = p.remote_id;
            h.src_id = pid;
            h.src_sess = p.local_sess;
            h.dst_sess = p.remote_sess;
            if !sink(pid, &p.addr, &h.bytes()) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.send_accept = false;
        }
        let mut acked = false;
        // Retransmissions first.
        while let Some(&s) = p.resend.front() {
            if n >= budget {
                return (false, n, false);
            }
            let idx = s.wrapping_sub(p.snd_una) as usize;
            if seq_lt(s, p.snd_una) || !seq_lt(s, p.sent_upto) {
                p.resend.pop_front();
                continue;
            }
            let Some(t) = p.inflight.get_mut(idx) else {
                p.resend.pop_front();
                continue;
            };
            if t.sacked {
                p.resend.pop_front();
                continue;
            }
            proto::set_ack(&mut t.buf, true, ack, sack);
            Hdr::patch_ids(&mut t.buf, p.remote_id, pid, p.local_sess, p.remote_sess);
            if !sink(pid, &p.addr, &t.buf) {
                return (false, n, true);
            }
            t.tries += 1;
            t.sent_at = now;
            t.deadline = now.saturating_add(rto_for(&cfg, t.tries));
            let d = t.deadline;
            arm_in(&mut self.timers, p, pid, d);
            self.stats.sent += 1;
            self.stats.retransmits += 1;
            n += 1;
            acked = true;
            p.resend.pop_front();
        }
        // New packets within the window.
        while seq_lt(p.sent_upto, p.snd_nxt) && p.sent_upto.wrapping_sub(p.snd_una) < cfg.window {
            if n >= budget {
                return (false, n, false);
            }
            let idx = p.sent_upto.wrapping_sub(p.snd_una) as usize;
            let Some(len) = p.inflight.get(idx).map(|t| t.buf.len()) else {
                break;
            };
            if p.inflight_bytes > 0 && p.inflight_bytes + len > cfg.max_inflight {
                break;
            }
            // Ask for an acknowledgement at once when this packet takes the bytes in
            // flight past half the limit (so the answer comes back while the rest of
            // the window goes), or when the window is full after it.
            let next_len = p.inflight.get(idx + 1).map(|t| t.buf.len());
            let half = cfg.max_inflight / 2;
            let crossing = p.inflight_bytes < half && p.inflight_bytes + len >= half;
            let full = next_len.is_some_and(|nl| {
                crossing
                    || idx as u32 + 2 > cfg.window
                    || p.inflight_bytes + len + nl > cfg.max_inflight
            });
            let Some(t) = p.inflight.get_mut(idx) else {
                break;
            };
            if full {
                t.buf[3] |= F_REQ;
            }
            proto::set_ack(&mut t.buf, true, ack, sack);
            Hdr::patch_ids(&mut t.buf, p.remote_id, pid, p.local_sess, p.remote_sess);
            if !sink(pid, &p.addr, &t.buf) {
                // Not sent: offered again later, and counted in flight only then (a
                // count taken here would be taken again at each refusal and released
                // once at the acknowledgement: the bytes in flight would grow with
                // nothing in flight until no packet may go and no timer is armed).
                return (false, n, true);
            }
            t.counted = true;
            p.inflight_bytes += len;
            t.tries = 1;
            t.sent_at = now;
            t.deadline = now.saturating_add(rto_for(&cfg, 1));
            let d = t.deadline;
            arm_in(&mut self.timers, p, pid, d);
            self.stats.sent += 1;
            n += 1;
            acked = true;
            p.sent_upto = p.sent_upto.wrapping_add(1);
        }
        if acked && !p.rnr {
            p.ack_now = false;
            p.ack_due = None;
            p.ack_count = 0;
        } else if p.ack_now || p.rnr {
            // (A refusal goes in a standalone acknowledgement even when data carried
            // the same `ack`: only there does the flag mean "not ready".)
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Ack);
            h.flags = F_ACK | if p.rnr { F_RNR } else { 0 };
            h.dst_id = p.remote_id;
            h.src_id = pid;
            h.src_sess = p.local_sess;
            h.dst_sess = p.remote_sess;
            h.ack = ack;
            h.sack = sack;
            if !sink(pid, &p.addr, &h.bytes()) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.ack_now = false;
            p.rnr = false;
            p.ack_due = None;
            p.ack_count = 0;
        }
        (true, n, false)
    }
}
