//! rxm's message protocol as a sans-IO state machine: credits, eager messages,
//! segmentation (SAR), rendezvous and connection epochs, over connections a driver
//! provides, speaking the wire format of [`crate::proto`].
//!
//! The engine does no I/O, reads no clock and holds no message bytes: it names them.
//! A send is a handle ([`OpId`]) with a length; when the engine hands out a packet
//! ([`Engine::poll_transmit`]) it says which bytes of which send follow the header
//! ([`Transmit::Data`]), and the driver resolves the handle to its buffers (the
//! endpoint: the application's iovs, sent without a copy; `tests/sim.rs`: an owned
//! `Vec<u8>`). An arriving packet is checked and classified by [`Engine::receive`],
//! which returns where its bytes belong ([`Arrival`]): the driver chooses a message's
//! target at its first packet (the endpoint: kit's tag matcher, then straight into the
//! application's receive) and places the later segments at the offsets the engine
//! gives.
//!
//! A driver feeds the engine what happened — [`Engine::handle_conn_up`] /
//! [`Engine::handle_conn_down`] (a connection to a peer came up with the peer's credit
//! grant, or broke), [`Engine::receive`] (a packet arrived on a peer's connection),
//! [`Engine::handle_read_done`] (a rendezvous read finished), [`Engine::send`] /
//! [`Engine::send_msg`] / [`Engine::forward`] / [`Engine::consumed`] (the application
//! submitted an operation, or took a message in) — and asks it what to do:
//! [`Engine::poll_transmit`] (send this packet on that peer's connection, or post this
//! forwarded operation) and [`Engine::poll_event`] (sends completed or failed,
//! receptions failed). The engine keeps no timers: when to connect, how long a
//! handshake may take and when to try again is the connection manager's
//! ([`crate::conn::Manager`], time as an argument), which every driver uses — the
//! endpoint and the simulated network with its virtual clock (`ofi_testkit::simnet`,
//! `tests/sim.rs`) alike. A driver asks [`Engine::wants_connection`] whether a peer
//! needs a connection, tells the manager, and reports a peer the manager gave up on
//! with [`Engine::fail_waiting`].
//!
//! The rules the engine is built from are their own types: credit accounting
//! ([`Flow`]), the protocol a message takes ([`Protocol`]), the headers of its packets
//! ([`MsgMeta`]), the checks on an arriving packet ([`Inbound::classify`]), the
//! reassembly bookkeeping of a segmented message ([`SarCursor`]), control packets
//! ([`Control`]) and delivery acknowledgements ([`AckQueue`]).
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
//!   returns credits, piggybacked on the next packet, or in a CREDIT packet once half
//!   the grant is owed. A peer going past its grant breaks the protocol.
//! - A forwarded operation ([`Engine::forward`]: RMA or atomic, posted by the driver on
//!   the peer's connection) takes its place in the peer's queue like a send, so it
//!   waits for the connection and for the sends before it; it needs no credit and is
//!   done, for the engine, when it is handed out.
//! - Remote-access reports (`FI_RMA_EVENT`): the driver of an initiator whose forwarded
//!   access completed calls [`Engine::remote_access_done`] (a control packet on the
//!   peer's connection, no credit); the target's engine reports it as
//!   [`Event::RemoteAccess`] for its driver to count.
//!
//! # Invariants
//!
//! - Every [`Engine::send_msg`] and [`Engine::forward`] ends in exactly one
//!   [`Event::Sent`] or [`Event::Failed`]; a send taken by [`Engine::send_now`] has no
//!   record and no event (the driver completes it).
//! - Every message whose first packet [`Engine::receive`] returned as
//!   [`Arrival::First`] or [`Arrival::Rts`] is, for the engine, either complete (the
//!   last segment came, or the driver reported the read done) or reported by one
//!   [`Event::RecvFailed`]; [`Arrival`]s carry `arrival`, the message's place among
//!   the peer's messages by first packet.
//! - Operations to one peer leave in the order submitted; a connection that breaks fails
//!   every operation queued or in flight to that peer with `FI_ECONNRESET`, and a new
//!   connection starts a new epoch: credits, acknowledgements and consumed-tokens of an
//!   older epoch count for nothing.
//! - Peer input never panics: a malformed or out-of-protocol packet is an error of
//!   [`Engine::receive`] (`FI_EPROTO`; the driver closes that connection) or, through
//!   [`Engine::handle_packet`], an [`Event::ProtocolError`] with the connection handled
//!   as broken.

mod flow;
mod packet;
mod rx;

use std::collections::{BTreeMap, VecDeque};

use ofi_core::Errno;

pub use flow::Flow;
pub use packet::{AckQueue, Control, Inbound, MsgMeta, Protocol, RtsBody, RxLimits, SarCursor};
pub use rx::{Arrival, Violation};

use crate::proto::{Hdr, HDR_LEN};

/// A peer of the engine (the driver's index for a remote endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

impl PeerId {
    /// The peer of the driver's table index `index` (a table of fewer than 2^32
    /// entries: a driver's connections, bounded by memory long before that).
    pub fn from_index(index: usize) -> PeerId {
        PeerId(index as u32)
    }

    /// The driver's table index of this peer.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An application operation, named by the driver (unique among those live). A
/// rendezvous request carries it on the wire (RNDV_DONE echoes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// A connection's generation with one peer: bumped each time a connection comes up or
/// goes down.
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

impl CreditToken {
    /// The peer the message came from.
    pub fn peer(&self) -> PeerId {
        self.peer
    }
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
}

impl Default for Config {
    fn default() -> Config {
        Config {
            credits: 64,
            eager_max: 16384 - HDR_LEN,
            seg_size: 16384 - HDR_LEN,
            sar_limit: 128 << 10,
            max_msg: 256 << 20,
        }
    }
}

/// What the engine reports.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// The engine is done with `op`: a delivery-complete send was acknowledged, a
    /// rendezvous send answered "done", another send's last packet or a forwarded
    /// operation was handed out.
    Sent {
        /// The operation.
        op: OpId,
    },
    /// The operation `op` failed (a send may or may not have been delivered once).
    Failed {
        /// The operation.
        op: OpId,
        /// Why (`FI_ECONNRESET`, a status the receiver sent, …).
        err: Errno,
    },
    /// A message that had begun to arrive will not complete (its connection broke).
    RecvFailed {
        /// From whom.
        peer: PeerId,
        /// Its tag.
        tag: u64,
        /// Its place among the messages from `peer`.
        arrival: u64,
        /// The rendezvous read it waited for, if it is a rendezvous message.
        read: Option<ReadId>,
        /// Why.
        err: Errno,
    },
    /// The peer broke the protocol on the current connection: close it (the engine
    /// already handled it as broken). Only from [`Engine::handle_packet`].
    ProtocolError {
        /// The peer.
        peer: PeerId,
        /// What was wrong (`FI_EPROTO`).
        err: Errno,
    },
    /// One of the peer's RMA or atomics on our memory is done (the peer says so
    /// because our handshake asked: `FI_RMA_EVENT`).
    RemoteAccess {
        /// The peer.
        peer: PeerId,
        /// A read (else a write or an atomic).
        read: bool,
    },
}

/// What to put on a peer's connection (see [`Engine::poll_transmit`]). Headers come
/// with the credits they hand back already filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// A control packet: the header alone.
    Control(Hdr),
    /// A packet of a message: the header, then the bytes `offset..offset + len` of the
    /// message of send `op`.
    Data {
        /// The header.
        hdr: Hdr,
        /// The send.
        op: OpId,
        /// Where its bytes start in the message.
        offset: usize,
        /// How many.
        len: usize,
    },
    /// A rendezvous request for send `op` of `len` bytes: the header, then an RTS body
    /// ([`crate::proto::Rts`]) with id `op.0` naming the send's buffers, readable by the
    /// peer until the send completes.
    Rts {
        /// The header.
        hdr: Hdr,
        /// The send.
        op: OpId,
        /// The message's length.
        len: usize,
    },
    /// The forwarded operation `op`: post it on the peer's connection now.
    Forward {
        /// The operation.
        op: OpId,
    },
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

/// What an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxKind {
    /// A message of `len` bytes.
    Msg { meta: MsgMeta, len: usize },
    /// An operation the driver posts on the connection (RMA, atomics).
    Forward,
}

struct TxOp {
    peer: PeerId,
    kind: TxKind,
    state: TxState,
}

/// A segmented message being received.
struct SarRx {
    meta: MsgMeta,
    cursor: SarCursor,
    arrival: u64,
}

/// A rendezvous message being read.
struct RdState {
    peer: PeerId,
    epoch: Epoch,
    meta: MsgMeta,
    /// The sender's operation (echoed in RNDV_DONE).
    remote_op: u64,
    arrival: u64,
}

/// A packet or operation ready to go, and the send it completes when handed to the
/// driver (the last packet of a send that asks no delivery acknowledgement, a
/// forwarded operation).
struct Out {
    tx: Transmit,
    completes: Option<OpId>,
}

impl From<Hdr> for Out {
    fn from(h: Hdr) -> Out {
        Out {
            tx: Transmit::Control(h),
            completes: None,
        }
    }
}

/// One peer: its connection (when up) and what waits for it.
#[derive(Default)]
struct Peer {
    up: bool,
    epoch: Epoch,
    /// Credits both ways.
    flow: Flow,
    /// Packets ready to go on the connection.
    out: VecDeque<Out>,
    /// Operations not yet started, in order.
    queue: VecDeque<OpId>,
    /// Sends waiting for DC_ACK, in order sent.
    await_ack: AckQueue<OpId>,
    sar: Option<SarRx>,
    /// First packets received from the peer so far.
    arrivals: u64,
    /// The largest segmented message the peer may send (its handshake's SAR limit);
    /// `None`: [`Config::sar_limit`].
    sar_max: Option<usize>,
}

/// The protocol engine of one rxm endpoint (see the module docs).
pub struct Engine {
    cfg: Config,
    peers: Vec<Peer>,
    ops: BTreeMap<u64, TxOp>,
    reads: BTreeMap<ReadId, RdState>,
    next_read: u64,
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
    /// Eager messages sent (those of [`Engine::send_now`] included).
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
            reads: BTreeMap::new(),
            next_read: 1,
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
    #[inline]
    pub fn is_up(&self, p: PeerId) -> bool {
        self.peers.get(p.0 as usize).is_some_and(|x| x.up)
    }

    /// Whether a message that came with `credit` came on the current connection of its
    /// peer (else that connection broke since, and whatever it awaited failed).
    #[inline]
    pub fn is_current(&self, credit: CreditToken) -> bool {
        self.peers
            .get(credit.peer.0 as usize)
            .is_some_and(|p| p.up && p.epoch == credit.epoch)
    }

    /// Operations not yet done (queued, in flight or awaiting the peer).
    pub fn live_ops(&self) -> usize {
        self.ops.len()
    }

    /// Rendezvous reads in progress (asked for and not done).
    pub fn reads_in_flight(&self) -> usize {
        self.reads.len()
    }

    /// The credits this side may still spend towards `p`.
    pub fn credits(&self, p: PeerId) -> u32 {
        self.peers.get(p.0 as usize).map_or(0, |x| x.flow.credits())
    }

    /// Submit a tagged, delivery-complete message of `len` bytes with `tag` to `peer`,
    /// reported as `op`.
    ///
    /// # Errors
    /// `FI_EMSGSIZE` past [`Config::max_msg`].
    pub fn send(&mut self, peer: PeerId, op: OpId, tag: u64, len: usize) -> Result<(), Errno> {
        let meta = MsgMeta {
            tag: Some(tag),
            data: None,
            dc: true,
        };
        self.send_msg(peer, op, meta, len)
    }

    /// Submit a message of `len` bytes to `peer` with `meta`'s tag (or none) and remote
    /// CQ data, reported as `op`; its bytes stay the driver's, named by `op` in
    /// [`Transmit::Data`] and [`Transmit::Rts`]. With `meta.dc` an eager or segmented
    /// send completes when the receiver acknowledges it (delivery complete); without,
    /// when its last packet is handed to the driver (transmit complete). A rendezvous
    /// send completes on RNDV_DONE either way.
    ///
    /// # Errors
    /// `FI_EMSGSIZE` past [`Config::max_msg`]; `FI_EINVAL` if `op` is live already.
    pub fn send_msg(
        &mut self,
        peer: PeerId,
        op: OpId,
        meta: MsgMeta,
        len: usize,
    ) -> Result<(), Errno> {
        if len > self.cfg.max_msg {
            return Err(Errno::EMSGSIZE);
        }
        self.submit(peer, op, TxKind::Msg { meta, len })
    }

    /// Submit an operation the driver posts on `peer`'s connection itself (RMA,
    /// atomics), reported as `op`: it waits in the peer's queue like a send and comes
    /// out as [`Transmit::Forward`].
    ///
    /// # Errors
    /// `FI_EINVAL` if `op` is live already.
    pub fn forward(&mut self, peer: PeerId, op: OpId) -> Result<(), Errno> {
        self.submit(peer, op, TxKind::Forward)
    }

    fn submit(&mut self, peer: PeerId, op: OpId, kind: TxKind) -> Result<(), Errno> {
        if self.ops.contains_key(&op.0) {
            return Err(Errno::EINVAL);
        }
        self.ops.insert(
            op.0,
            TxOp {
                peer,
                kind,
                state: TxState::Queued,
            },
        );
        self.peer(peer).queue.push_back(op);
        Ok(())
    }

    /// The fast path of a small message: when `peer` is up with nothing waiting and a
    /// credit to spend, and the message is eager without a delivery acknowledgement,
    /// the header of its one packet (credits filled in; the driver sends it with the
    /// `len` bytes at once and completes the send itself: there is no record of it).
    /// `None` otherwise (submit it with [`Engine::send_msg`]).
    // On every small send's path (one call site in the endpoint).
    #[inline(always)]
    pub fn send_now(&mut self, peer: PeerId, meta: MsgMeta, len: usize) -> Option<Hdr> {
        if meta.dc || len > self.cfg.eager_max {
            return None;
        }
        let p = self.peers.get_mut(peer.0 as usize)?;
        if !p.up || !p.queue.is_empty() || !p.out.is_empty() || !p.flow.take() {
            return None;
        }
        let mut h = meta.eager(len);
        h.credits = p.flow.piggyback();
        self.stats.eager += 1;
        Some(h)
    }

    /// The packet `hdr` of [`Engine::send_now`] was not sent after all: its credits go
    /// back.
    pub fn unsend(&mut self, peer: PeerId, hdr: &Hdr) {
        if let Some(p) = self.peers.get_mut(peer.0 as usize) {
            p.flow.untake();
            p.flow.unpiggyback(hdr.credits);
            self.stats.eager = self.stats.eager.saturating_sub(1);
        }
    }

    /// Whether operations wait for a connection to `peer` (it is not up).
    pub fn wants_connection(&self, peer: PeerId) -> bool {
        self.peers
            .get(peer.0 as usize)
            .is_some_and(|p| !p.up && !p.queue.is_empty())
    }

    /// The peer's handshake said it segments messages up to `limit` bytes (its SAR
    /// limit may differ from ours): segmented messages from it are checked against
    /// that, at least [`Config::eager_max`].
    pub fn set_peer_sar_limit(&mut self, peer: PeerId, limit: usize) {
        self.peer(peer).sar_max = Some(limit);
    }

    /// The credits this side grants (for the handshake the driver sends).
    pub fn grant(&self) -> u32 {
        self.cfg.credits
    }

    /// A connection to `peer` came up; the peer granted `peer_grant` credits. A second
    /// call while it is up (both sides connected at once, one connection taking over
    /// from the other) changes nothing: credits are counted per peer on both sides.
    pub fn handle_conn_up(&mut self, peer: PeerId, peer_grant: u32) {
        let p = self.peer(peer);
        if p.up {
            return;
        }
        p.up = true;
        p.epoch.0 += 1;
        p.flow = Flow::new(peer_grant);
    }

    /// The connection to `peer` broke: every operation queued or in flight to it fails
    /// with `FI_ECONNRESET` and messages being received from it fail. An attempt that
    /// broke before it was up changes nothing here: its operations keep waiting for the
    /// connection manager's next attempt (or its verdict, [`Engine::fail_waiting`]).
    pub fn handle_conn_down(&mut self, peer: PeerId) {
        if self.peer(peer).up {
            self.conn_down(peer, Errno::ECONNRESET, true);
        }
    }

    /// The connection to `peer` is gone for `err` (up or not): every operation queued or
    /// in flight fails with `err`, or, with `keep_queued`, only those in flight (the
    /// peer restarted and a new connection takes the queued ones). Messages being
    /// received fail; a new epoch starts.
    pub fn reset(&mut self, peer: PeerId, err: Errno, keep_queued: bool) {
        self.conn_down(peer, err, !keep_queued);
    }

    /// One access of ours to `peer`'s memory (a forwarded RMA or atomic) is done: tell
    /// the peer (a control packet, no credit; nothing if the connection is down). For a
    /// peer that counts remote accesses (`FI_RMA_EVENT`).
    pub fn remote_access_done(&mut self, peer: PeerId, read: bool) {
        if let Some(p) = self.peers.get_mut(peer.0 as usize) {
            if p.up {
                p.out.push_back(Control::remote_access(read).into());
            }
        }
    }

    /// The driver gave up connecting to `peer`: the operations waiting for it fail with
    /// `err`.
    pub fn fail_waiting(&mut self, peer: PeerId, err: Errno) {
        let Some(p) = self.peers.get_mut(peer.0 as usize) else {
            return;
        };
        if p.up {
            return;
        }
        let queued: Vec<OpId> = p.queue.drain(..).collect();
        for op in queued {
            if self.ops.remove(&op.0).is_some() {
                self.events.push_back(Event::Failed { op, err });
            }
        }
    }

    fn conn_down(&mut self, peer: PeerId, err: Errno, fail_queued: bool) {
        let p = self.peer(peer);
        p.up = false;
        p.epoch.0 += 1;
        p.flow = Flow::default();
        p.out.clear();
        p.await_ack.clear();
        let queued: Vec<OpId> = if fail_queued {
            p.queue.drain(..).collect()
        } else {
            Vec::new()
        };
        let kept: Vec<OpId> = p.queue.iter().copied().collect();
        if let Some(s) = p.sar.take() {
            self.events.push_back(Event::RecvFailed {
                peer,
                tag: s.meta.tag.unwrap_or(0),
                arrival: s.arrival,
                read: None,
                err,
            });
        }
        // Operations to the peer: queued and in flight (queued ones that stay start
        // again from the beginning on the next connection).
        let mine: Vec<u64> = self
            .ops
            .iter()
            .filter(|(k, o)| o.peer == peer && !kept.contains(&OpId(**k)))
            .map(|(&k, _)| k)
            .collect();
        for k in queued.into_iter().map(|o| o.0).chain(mine) {
            if self.ops.remove(&k).is_some() {
                self.events.push_back(Event::Failed { op: OpId(k), err });
            }
        }
        for k in kept {
            if let Some(o) = self.ops.get_mut(&k.0) {
                o.state = TxState::Queued;
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
                    read: Some(k),
                    err,
                });
            }
        }
    }

    /// The application took in the message `credit` came with: the credit goes back to
    /// its sender (unless that connection is gone).
    #[inline]
    pub fn consumed(&mut self, credit: CreditToken) {
        if let Some(p) = self.peers.get_mut(credit.peer.0 as usize) {
            if p.up && p.epoch == credit.epoch {
                p.flow.consumed();
            }
        }
    }

    /// Whether [`Engine::poll_transmit_to`] has something for `peer` now (packets or
    /// operations ready, sends that a credit lets start, or credits due back).
    #[inline]
    pub fn has_transmit(&self, peer: PeerId) -> bool {
        self.peers.get(peer.0 as usize).is_some_and(|p| {
            p.up && (!p.out.is_empty()
                || (!p.queue.is_empty() && (p.flow.credits() > 0 || self.head_is_forward(p)))
                || p.flow.credit_due(self.cfg.credits))
        })
    }

    /// Whether nothing concerns `peer` now: nothing to transmit to it (not even
    /// operations waiting for a credit), no credits due back, no events. The cheap
    /// test a driver makes after each packet.
    #[inline]
    pub fn is_quiet(&self, peer: PeerId) -> bool {
        self.events.is_empty()
            && self.peers.get(peer.0 as usize).is_none_or(|p| {
                p.out.is_empty() && p.queue.is_empty() && !p.flow.credit_due(self.cfg.credits)
            })
    }

    fn head_is_forward(&self, p: &Peer) -> bool {
        p.queue
            .front()
            .and_then(|o| self.ops.get(&o.0))
            .is_some_and(|o| o.kind == TxKind::Forward)
    }

    /// The next thing to put on some peer's current connection (peers taken in turn).
    pub fn poll_transmit(&mut self, _now: u64) -> Option<(PeerId, Transmit)> {
        let n = self.peers.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            if let Some(t) = self.poll_transmit_to(PeerId(i as u32)) {
                self.rr = (i + 1) % n;
                return Some((PeerId(i as u32), t));
            }
        }
        None
    }

    /// The next thing to put on `peer`'s current connection: a packet (its header's
    /// credits filled in) or a forwarded operation, in the order the operations were
    /// submitted; a credit packet when half the grant is owed and nothing else goes.
    /// What is handed out is the driver's to send: if the connection cannot take it
    /// yet, the driver keeps it and sends it before asking again.
    pub fn poll_transmit_to(&mut self, peer: PeerId) -> Option<Transmit> {
        let i = peer.0 as usize;
        if !self.peers.get(i)?.up {
            return None;
        }
        if self.peers[i].out.is_empty() {
            self.start_sends(i);
        }
        let grant = self.cfg.credits;
        let p = &mut self.peers[i];
        match p.out.pop_front() {
            Some(Out { mut tx, completes }) => {
                match &mut tx {
                    Transmit::Control(h)
                    | Transmit::Data { hdr: h, .. }
                    | Transmit::Rts { hdr: h, .. } => {
                        h.credits = p.flow.piggyback();
                    }
                    Transmit::Forward { .. } => {}
                }
                if let Some(op) = completes {
                    if self.ops.remove(&op.0).is_some() {
                        self.events.push_back(Event::Sent { op });
                    }
                }
                Some(tx)
            }
            None if p.flow.credit_due(grant) => {
                let give = p.flow.piggyback();
                Some(Transmit::Control(Hdr {
                    credits: give,
                    ..Control::credit()
                }))
            }
            None => None,
        }
    }

    /// Turn queued operations of peer `i` into packets while credits last.
    fn start_sends(&mut self, i: usize) {
        loop {
            let Some(&id) = self.peers[i].queue.front() else {
                return;
            };
            let Some(op) = self.ops.get_mut(&id.0) else {
                self.peers[i].queue.pop_front();
                continue;
            };
            let p = &mut self.peers[i];
            let (meta, len) = match op.kind {
                TxKind::Forward => {
                    p.queue.pop_front();
                    op.state = TxState::AwaitTransmit;
                    p.out.push_back(Out {
                        tx: Transmit::Forward { op: id },
                        completes: Some(id),
                    });
                    continue;
                }
                TxKind::Msg { meta, len } => (meta, len),
            };
            if !p.flow.take() {
                self.stats.credit_stalls += 1;
                return;
            }
            p.queue.pop_front();
            match Protocol::of(len, self.cfg.eager_max, self.cfg.sar_limit) {
                Protocol::Eager | Protocol::Segmented => {
                    let eager = len <= self.cfg.eager_max;
                    let mut off = 0;
                    loop {
                        let (hdr, n) = if eager {
                            (meta.eager(len), len)
                        } else {
                            meta.segment(off, len, self.cfg.seg_size)
                        };
                        let last = off + n >= len;
                        p.out.push_back(Out {
                            tx: Transmit::Data {
                                hdr,
                                op: id,
                                offset: off,
                                len: n,
                            },
                            completes: (last && !meta.dc).then_some(id),
                        });
                        off += n;
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
                    p.out.push_back(Out {
                        tx: Transmit::Rts {
                            hdr: meta.rts(len),
                            op: id,
                            len,
                        },
                        completes: None,
                    });
                    op.state = TxState::AwaitDone;
                    self.stats.rndv += 1;
                }
            }
        }
    }

    /// Whether `op` is a rendezvous send to `peer` whose request went out and whose
    /// "done" has not come: its buffers may be read by the peer now.
    pub fn is_readable(&self, peer: PeerId, op: OpId) -> bool {
        self.ops
            .get(&op.0)
            .is_some_and(|o| o.peer == peer && o.state == TxState::AwaitDone)
    }

    /// Whether events wait for [`Engine::poll_event`].
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next event.
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
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
