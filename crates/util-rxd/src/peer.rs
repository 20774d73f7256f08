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
//! # Modules
//!
//! `conn` (handshake, peer slots, resets), `rx` (packets in: acknowledgements and data),
//! `tx` (messages queued, packets out), `timers` (retries, retransmission, lost peers).
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

mod conn;
mod rx;
mod timers;
mod tx;

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

ofi_kit::debug_fields!(Engine, |eng| { peers: eng.peers.len(), stats: eng.stats });

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

    /// Owe every delayed acknowledgement now (the next
    /// [`poll_transmit`](Engine::poll_transmit) sends them): what an endpoint does when it
    /// closes, so that a peer whose last message arrived is not left retransmitting it
    /// to a closed port until it declares this side lost.
    pub fn flush_acks(&mut self) {
        for pid in 0..self.peers.len() {
            let p = &mut self.peers[pid];
            if p.ack_due.take().is_some() {
                p.ack_now = true;
                self.mark(pid as PeerId);
            }
        }
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
}
