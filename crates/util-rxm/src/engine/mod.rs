//! rxm's message protocol as a sans-IO state machine: credits, eager messages,
//! segmentation (SAR), rendezvous and connection epochs, over connections a driver
//! provides, speaking the wire format of [`crate::proto`].
//!
//! The engine does no I/O and reads no clock. A driver feeds it what happened —
//! [`Engine::handle_conn_up`] / [`Engine::handle_conn_down`] (a connection to a peer came
//! up with the peer's credit grant, or broke), [`Engine::handle_packet`] (a packet arrived
//! on a peer's connection), [`Engine::handle_read_done`] (a rendezvous read finished),
//! [`Engine::send`] / [`Engine::consumed`] (the application submitted a message, or took
//! one in) — and asks it what to do: [`Engine::poll_connect`] (connect to this peer),
//! [`Engine::poll_transmit`] (send this packet on that peer's connection),
//! [`Engine::poll_read`] (read the peer's registered buffer: the core's RMA),
//! [`Engine::poll_event`] (completions and received messages) and
//! [`Engine::poll_timeout`] (when to call [`Engine::handle_timeout`]). Every call that
//! depends on time takes `now` (nanoseconds on any monotonic clock) as an argument, so
//! the engine runs on a simulated network with a virtual clock
//! (`ofi_testkit::simnet`, `tests/sim.rs`).
//!
//! The protocol's rules live once, here, and the endpoint ([`crate::ep`]) uses the same
//! code: credit accounting ([`Flow`]), the protocol a message takes ([`Protocol`]), the
//! headers of its packets ([`MsgMeta`]), the checks on an arriving packet
//! ([`Inbound::classify`]) and the reassembly bookkeeping of a segmented message
//! ([`SarCursor`]). What the endpoint adds is I/O: zero-copy sends from the
//! application's buffers, placement straight into matched receives, the core's RMA for
//! rendezvous reads. Both speak the wire format of [`crate::proto`].
//!
//! # Protocol
//!
//! - A message of at most [`Config::eager_max`] bytes goes as one eager packet; up to
//!   [`Config::sar_limit`] as segments of [`Config::seg_size`] bytes sent back to back
//!   (first, next…, the last flagged); beyond as a rendezvous request (RTS) naming the
//!   sender's buffer, which the receiver reads and answers with RNDV_DONE.
//! - Eager and segmented messages sent with [`MsgMeta::dc`] (every [`Engine::send`])
//!   carry [`crate::proto::F_DC`]: the receiver acknowledges each once it holds the
//!   whole message (DC_ACK, in order per connection), and the send completes then — a
//!   completed send was delivered. Without it a send completes when its last packet is
//!   handed to the driver.
//! - Credits: a peer may have at most the grant it was given (its handshake's credits)
//!   of messages (eager, first segment, RTS) the receiver has not consumed; consuming
//!   returns credits, piggybacked on the next packet or in a CREDIT packet. A peer
//!   going past its grant breaks the protocol.
//!
//! # Invariants
//!
//! - Every [`Engine::send`] ends in exactly one [`Event::Sent`] or [`Event::Failed`].
//! - Every message whose first packet arrived ends in exactly one [`Event::Received`]
//!   or [`Event::RecvFailed`], in the order the first packets arrived
//!   ([`Event::Received::arrival`] numbers them per peer).
//! - Messages to one peer leave in the order submitted; a connection that breaks fails
//!   every operation queued or in flight to that peer with `FI_ECONNRESET`, and a new
//!   connection starts a new epoch: credits, acknowledgements and consumed-tokens of an
//!   older epoch count for nothing.
//! - Peer input never panics: a malformed or out-of-protocol packet is
//!   [`Event::ProtocolError`] (the driver closes that connection), then handled as a
//!   broken connection.

mod flow;
mod packet;
mod rx;

use std::collections::{BTreeMap, VecDeque};

use ofi_core::Errno;

pub use flow::Flow;
pub use packet::{AckQueue, Control, Inbound, MsgMeta, Protocol, RtsBody, RxLimits, SarCursor};

use crate::proto::{Hdr, HdrView, Rts, HDR_LEN, RTS_IOVS};

/// A peer of the engine (the driver's index for a remote endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

/// An application operation, named by the application (unique among those live).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// A connection's generation with one peer: bumped each time a connection comes up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

/// A rendezvous read the engine asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadId(pub u64);

/// Proof that a received message holds a credit; hand it back with
/// [`Engine::consumed`] once the application took the message in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditToken {
    peer: PeerId,
    epoch: Epoch,
}

/// The engine's limits.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Credits this side grants each peer (messages a peer may have unconsumed here).
    pub credits: u32,
    /// Largest eager message (payload bytes).
    pub eager_max: usize,
    /// Payload bytes per segment.
    pub seg_size: usize,
    /// Largest segmented message; beyond, rendezvous.
    pub sar_limit: usize,
    /// Largest message accepted.
    pub max_msg: usize,
    /// Wait after a connection broke or failed before connecting again.
    pub reconnect_delay: u64,
    /// A connection attempt not up after this long is given up and tried again.
    pub connect_timeout: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            credits: 64,
            eager_max: 16384 - HDR_LEN,
            seg_size: 16384 - HDR_LEN,
            sar_limit: 128 << 10,
            max_msg: 256 << 20,
            reconnect_delay: 1_000_000,
            connect_timeout: 100_000_000,
        }
    }
}

/// What the engine reports.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// The send `op` was delivered (the receiver acknowledged it).
    Sent {
        /// The operation.
        op: OpId,
    },
    /// The send `op` failed (it may or may not have been delivered once).
    Failed {
        /// The operation.
        op: OpId,
        /// Why (`FI_ECONNRESET`, a status the receiver sent, …).
        err: Errno,
    },
    /// A whole message arrived.
    Received {
        /// From whom.
        peer: PeerId,
        /// Its tag (0 for an untagged message).
        tag: u64,
        /// Whether it is tagged.
        tagged: bool,
        /// Its remote CQ data.
        cq_data: Option<u64>,
        /// Its bytes.
        data: Vec<u8>,
        /// Its place among the messages from `peer` (by first packet), from 0.
        arrival: u64,
        /// Hand back with [`Engine::consumed`] when taken in.
        credit: CreditToken,
    },
    /// A message that had begun to arrive will not complete.
    RecvFailed {
        /// From whom.
        peer: PeerId,
        /// Its tag.
        tag: u64,
        /// Its place among the messages from `peer`.
        arrival: u64,
        /// Why.
        err: Errno,
    },
    /// The peer broke the protocol on the current connection: close it (the engine
    /// already handled it as broken).
    ProtocolError {
        /// The peer.
        peer: PeerId,
        /// What was wrong (`FI_EPROTO`).
        err: Errno,
    },
}

/// A read of a peer's registered buffer the driver must carry out (the core's RMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// Which read (for [`Engine::handle_read_done`]).
    pub id: ReadId,
    /// Whose buffer.
    pub peer: PeerId,
    /// Remote address, length and key, as the RTS named them.
    pub remote: (u64, u64, u64),
}

/// Where a send is.
#[derive(Debug, PartialEq, Eq)]
enum TxState {
    /// Waiting for a connection or a credit.
    Queued,
    /// Its packets are queued on the connection; it waits for DC_ACK.
    AwaitAck,
    /// Its packets are queued on the connection; it completes when the last one is
    /// handed to the driver (no delivery acknowledgement asked: transmit complete).
    AwaitTransmit,
    /// Its RTS went; it waits for RNDV_DONE (its buffer may be read meanwhile).
    AwaitDone,
}

struct TxOp {
    op: OpId,
    peer: PeerId,
    meta: MsgMeta,
    data: Vec<u8>,
    state: TxState,
    epoch: Epoch,
}

/// A segmented message being received.
struct SarRx {
    meta: MsgMeta,
    cursor: SarCursor,
    data: Vec<u8>,
    arrival: u64,
}

/// A rendezvous message being read.
struct RdState {
    peer: PeerId,
    epoch: Epoch,
    meta: MsgMeta,
    /// The sender's operation (echoed in RNDV_DONE).
    remote_op: u64,
    len: usize,
    arrival: u64,
}

/// A packet ready to go, and the send it completes when handed to the driver (the
/// last packet of a send that asks no delivery acknowledgement).
struct Out {
    bytes: Vec<u8>,
    completes: Option<u64>,
}

impl From<Vec<u8>> for Out {
    fn from(bytes: Vec<u8>) -> Out {
        Out {
            bytes,
            completes: None,
        }
    }
}

/// One peer: its connection (when up) and what waits for it.
#[derive(Default)]
struct Peer {
    up: bool,
    /// A connection attempt in flight since this time.
    connecting: Option<u64>,
    /// Not before this time may a new attempt start.
    retry_at: u64,
    epoch: Epoch,
    /// Credits both ways (the endpoint's type).
    flow: Flow,
    /// Packets ready to go on the connection.
    out: VecDeque<Out>,
    /// Sends not yet started (internal ids), in order.
    queue: VecDeque<u64>,
    /// Sends waiting for DC_ACK, in order sent.
    await_ack: AckQueue<u64>,
    sar: Option<SarRx>,
    /// First packets received from the peer so far.
    arrivals: u64,
}

/// The protocol engine of one rxm endpoint (see the module docs).
pub struct Engine {
    cfg: Config,
    peers: Vec<Peer>,
    ops: BTreeMap<u64, TxOp>,
    next_op: u64,
    reads: BTreeMap<ReadId, RdState>,
    next_read: u64,
    read_q: VecDeque<ReadRequest>,
    events: VecDeque<Event>,
    /// Round-robin start of [`Engine::poll_transmit`].
    rr: usize,
    stats: Stats,
}

/// What the engine counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Times a send waited for want of a credit.
    pub credit_stalls: u64,
    /// Eager messages sent.
    pub eager: u64,
    /// Segmented messages sent.
    pub sar: u64,
    /// Rendezvous messages sent.
    pub rndv: u64,
}

impl Engine {
    /// An engine with no peers yet.
    pub fn new(cfg: Config) -> Engine {
        Engine {
            cfg,
            peers: Vec::new(),
            ops: BTreeMap::new(),
            next_op: 1,
            reads: BTreeMap::new(),
            next_read: 1,
            read_q: VecDeque::new(),
            events: VecDeque::new(),
            rr: 0,
            stats: Stats::default(),
        }
    }

    /// The limits.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    fn peer(&mut self, p: PeerId) -> &mut Peer {
        let i = p.0 as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, Peer::default);
        }
        &mut self.peers[i]
    }

    /// Whether the connection to `p` is up.
    pub fn is_up(&self, p: PeerId) -> bool {
        self.peers.get(p.0 as usize).is_some_and(|x| x.up)
    }

    /// Sends not yet completed.
    pub fn live_ops(&self) -> usize {
        self.ops.len()
    }

    /// Rendezvous reads in progress (asked for and not done).
    pub fn reads_in_flight(&self) -> usize {
        self.reads.len()
    }

    /// Submit a tagged message of `data` with `tag` to `peer`, reported as `op`.
    ///
    /// # Errors
    /// `FI_EMSGSIZE` past [`Config::max_msg`].
    pub fn send(&mut self, peer: PeerId, op: OpId, tag: u64, data: Vec<u8>) -> Result<(), Errno> {
        let meta = MsgMeta {
            tag: Some(tag),
            data: None,
            dc: true,
        };
        self.send_msg(peer, op, meta, data)
    }

    /// Submit a message of `data` to `peer` with `meta`'s tag (or none) and remote CQ
    /// data, reported as `op`. With `meta.dc` an eager or segmented send completes when
    /// the receiver acknowledges it (delivery complete); without, when its last packet
    /// is handed to the driver (transmit complete). A rendezvous send completes on
    /// RNDV_DONE either way.
    ///
    /// # Errors
    /// `FI_EMSGSIZE` past [`Config::max_msg`].
    pub fn send_msg(
        &mut self,
        peer: PeerId,
        op: OpId,
        meta: MsgMeta,
        data: Vec<u8>,
    ) -> Result<(), Errno> {
        if data.len() > self.cfg.max_msg {
            return Err(Errno::EMSGSIZE);
        }
        let id = self.next_op;
        self.next_op += 1;
        self.ops.insert(
            id,
            TxOp {
                op,
                peer,
                meta,
                data,
                state: TxState::Queued,
                epoch: Epoch::default(),
            },
        );
        self.peer(peer).queue.push_back(id);
        Ok(())
    }

    /// A peer the driver should connect to now (it has sends waiting and no connection
    /// or attempt); the attempt counts from `now`.
    pub fn poll_connect(&mut self, now: u64) -> Option<PeerId> {
        self.handle_timeout(now);
        for (i, p) in self.peers.iter_mut().enumerate() {
            if !p.up && p.connecting.is_none() && !p.queue.is_empty() && now >= p.retry_at {
                p.connecting = Some(now);
                return Some(PeerId(i as u32));
            }
        }
        None
    }

    /// The credits this side grants (for the handshake the driver sends).
    pub fn grant(&self) -> u32 {
        self.cfg.credits
    }

    /// A connection to `peer` came up; the peer granted `peer_grant` credits. A second
    /// call while it is up (both sides connected at once) changes nothing.
    pub fn handle_conn_up(&mut self, peer: PeerId, peer_grant: u32) {
        let p = self.peer(peer);
        if p.up {
            return;
        }
        p.up = true;
        p.connecting = None;
        p.epoch.0 += 1;
        p.flow = Flow::new(peer_grant);
    }

    /// The connection to `peer` broke: every send queued or in flight to it fails with
    /// `FI_ECONNRESET`, messages being received from it fail, and a new attempt may
    /// start after [`Config::reconnect_delay`]. An attempt that broke before it was up
    /// is tried again after the delay (its sends keep waiting); with neither, nothing
    /// happens.
    pub fn handle_conn_down(&mut self, peer: PeerId, now: u64) {
        let delay = self.cfg.reconnect_delay;
        let p = self.peer(peer);
        if p.up {
            self.conn_down(peer, now, Errno::ECONNRESET);
        } else if p.connecting.take().is_some() {
            p.retry_at = now + delay;
        }
    }

    fn conn_down(&mut self, peer: PeerId, now: u64, err: Errno) {
        let delay = self.cfg.reconnect_delay;
        let p = self.peer(peer);
        p.up = false;
        p.connecting = None;
        p.retry_at = now + delay;
        p.epoch.0 += 1;
        p.flow = Flow::default();
        p.out.clear();
        p.await_ack.clear();
        let queued: Vec<u64> = p.queue.drain(..).collect();
        let sar = p.sar.take();
        if let Some(s) = sar {
            self.events.push_back(Event::RecvFailed {
                peer,
                tag: s.meta.tag.unwrap_or(0),
                arrival: s.arrival,
                err,
            });
        }
        // Sends to the peer: queued and in flight.
        let mine: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, o)| o.peer == peer)
            .map(|(&k, _)| k)
            .collect();
        for k in queued.into_iter().chain(mine) {
            if let Some(o) = self.ops.remove(&k) {
                self.events.push_back(Event::Failed { op: o.op, err });
            }
        }
        // Reads from the peer.
        let reads: Vec<ReadId> = self
            .reads
            .iter()
            .filter(|(_, r)| r.peer == peer)
            .map(|(&k, _)| k)
            .collect();
        for k in reads {
            if let Some(r) = self.reads.remove(&k) {
                self.events.push_back(Event::RecvFailed {
                    peer,
                    tag: r.meta.tag.unwrap_or(0),
                    arrival: r.arrival,
                    err,
                });
            }
        }
        self.read_q.retain(|r| r.peer != peer);
    }

    /// The application took in the message `credit` came with: the credit goes back to
    /// its sender (unless that connection is gone).
    pub fn consumed(&mut self, credit: CreditToken) {
        let p = self.peer(credit.peer);
        if p.up && p.epoch == credit.epoch {
            p.flow.consumed();
        }
    }

    /// The next packet to send: (peer, bytes) on that peer's current connection.
    pub fn poll_transmit(&mut self, _now: u64) -> Option<(PeerId, Vec<u8>)> {
        let n = self.peers.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            if !self.peers[i].up {
                continue;
            }
            if self.peers[i].out.is_empty() {
                self.start_sends(i);
            }
            let p = &mut self.peers[i];
            let pkt = match p.out.pop_front() {
                Some(Out {
                    mut bytes,
                    completes,
                }) => {
                    if let Ok(mut v) = HdrView::new_checked(&mut bytes[..]) {
                        v.set_credits(p.flow.piggyback());
                    }
                    if let Some(o) = completes.and_then(|id| self.ops.remove(&id)) {
                        self.events.push_back(Event::Sent { op: o.op });
                    }
                    bytes
                }
                None if p.flow.owed() > 0 => {
                    let give = p.flow.piggyback();
                    Hdr {
                        credits: give,
                        ..Control::credit()
                    }
                    .bytes()
                    .to_vec()
                }
                None => continue,
            };
            self.rr = (i + 1) % n;
            return Some((PeerId(i as u32), pkt));
        }
        None
    }

    /// Turn queued sends of peer `i` into packets while credits last.
    fn start_sends(&mut self, i: usize) {
        loop {
            let Some(&id) = self.peers[i].queue.front() else {
                return;
            };
            if !self.peers[i].flow.take() {
                self.stats.credit_stalls += 1;
                return;
            }
            self.peers[i].queue.pop_front();
            let p = &mut self.peers[i];
            let Some(op) = self.ops.get_mut(&id) else {
                p.flow.untake();
                continue;
            };
            op.epoch = p.epoch;
            let len = op.data.len();
            let meta = op.meta;
            match Protocol::of(len, self.cfg.eager_max, self.cfg.sar_limit) {
                Protocol::Eager | Protocol::Segmented => {
                    let eager = len <= self.cfg.eager_max;
                    let mut off = 0;
                    loop {
                        let (h, n) = if eager {
                            (meta.eager(len), len)
                        } else {
                            meta.segment(off, len, self.cfg.seg_size)
                        };
                        let mut b = h.bytes().to_vec();
                        b.extend_from_slice(&op.data[off..off + n]);
                        off += n;
                        let last = off >= len;
                        p.out.push_back(Out {
                            bytes: b,
                            completes: (last && !meta.dc).then_some(id),
                        });
                        if last {
                            break;
                        }
                    }
                    if meta.dc {
                        p.await_ack.expect(id);
                        op.state = TxState::AwaitAck;
                    } else {
                        op.state = TxState::AwaitTransmit;
                    }
                    if eager {
                        self.stats.eager += 1;
                    } else {
                        self.stats.sar += 1;
                    }
                }
                Protocol::Rendezvous => {
                    let mut iov = [(0, 0, 0); RTS_IOVS];
                    iov[0] = (id, len as u64, op.epoch.0);
                    let mut b = meta.rts(len).bytes().to_vec();
                    Rts { id, iov, n: 1 }.encode(&mut b);
                    p.out.push_back(b.into());
                    op.state = TxState::AwaitDone;
                    self.stats.rndv += 1;
                }
            }
        }
    }

    /// Serve a read of this side's registered buffer by `peer` (what the core's RMA
    /// does on the target): the bytes at `remote` if it names a rendezvous send to
    /// `peer` of the current connection.
    ///
    /// # Errors
    /// `FI_EINVAL` for a key, address or length that names no such buffer.
    pub fn serve_read(&self, peer: PeerId, remote: (u64, u64, u64)) -> Result<Vec<u8>, Errno> {
        let (addr, len, key) = remote;
        match self.ops.get(&addr) {
            Some(o)
                if o.peer == peer
                    && o.state == TxState::AwaitDone
                    && o.epoch.0 == key
                    && o.data.len() as u64 == len =>
            {
                Ok(o.data.clone())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// The next rendezvous read to carry out.
    pub fn poll_read(&mut self) -> Option<ReadRequest> {
        self.read_q.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Engine::handle_timeout`] is next needed: a reconnection that may start or
    /// a connection attempt that times out (`None`: nothing waits on time).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.peers
            .iter()
            .filter_map(|p| {
                if let Some(t) = p.connecting {
                    Some(t + self.cfg.connect_timeout)
                } else if !p.up && !p.queue.is_empty() {
                    Some(p.retry_at)
                } else {
                    None
                }
            })
            .min()
    }

    /// Time `now` came: a connection attempt older than [`Config::connect_timeout`]
    /// fails what waits for that peer with `FI_ETIMEDOUT` (a reconnection is then
    /// offered by [`Engine::poll_connect`] after the delay, if sends wait again).
    pub fn handle_timeout(&mut self, now: u64) {
        let timeout = self.cfg.connect_timeout;
        let late: Vec<PeerId> = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.connecting
                    .is_some_and(|t| now.saturating_sub(t) >= timeout)
            })
            .map(|(i, _)| PeerId(i as u32))
            .collect();
        for p in late {
            self.conn_down(p, now, Errno::ETIMEDOUT);
        }
    }

    /// The peers whose buffers are being read (rendezvous in progress here).
    pub fn reading_from(&self) -> Vec<PeerId> {
        self.reads.values().map(|r| r.peer).collect()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}
