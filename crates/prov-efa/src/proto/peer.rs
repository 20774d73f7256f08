//! What an engine keeps per peer: the handshake in each direction, message ids, the
//! receive window that rebuilds order over the unordered transport, the packets waiting
//! to go out, the RNR backoff and the lost-peer clock.
//!
//! # Handshake and the no-state rule
//!
//! A sender that has no handshake from a peer sends it `HELLO` and holds its requests.
//! The peer answers `HANDSHAKE` with its features and a cookie computed from the asker's
//! address and a secret ([`cookie_for`]) — keeping nothing, so a forged source address
//! costs the peer one answer and no memory. The answer only reaches the real owner of
//! the address; every request it then sends carries the cookie, and the peer creates
//! its state for the sender only for a request whose cookie checks. A `HELLO` without
//! answer is sent again every [`super::Config::hello_interval`].
//!
//! # Receive window
//!
//! Message ids are per (sender, receiver), from 0, wrapping. [`RecvWindow`] records
//! which ids were released to matching: every id below `base`, and those in `above`.
//! With ordering (`FI_ORDER_SAS`) a message is released only when all earlier ones
//! were: later ones are held (their packets kept) up to `recvwin_size` ids ahead and
//! `recvwin_size` packets in all; further ahead, or beyond that, the packet is refused (the transport answers RNR and the sender tries
//! again later). Without ordering a message is released when it arrives. An id already
//! released is a later segment of a multi-packet message, or a duplicate.
//!
//! # The sender's window
//!
//! The transport takes a datagram before the peer's protocol sees it, so what the
//! peer's engine refuses it must keep (copied aside, then in its receive slots); only
//! the peer's device can refuse (RNR), and only once the peer keeps all it can. Were a
//! sender to send on regardless, reordering and each refusal cycle would put ever more
//! later messages at the peer ahead of one it waits for (for order), until the peer
//! held only later ones and the one it waits for found no room: each would wait for the
//! other. So a sender sends the first packet of message `i` to a peer only while `i` is
//! less than `recvwin_size` ids ahead of the oldest message with a packet the peer's
//! device has not taken yet ([`in_window`], [`Unacked`]): the peer's window for order holds
//! every message ahead of one it waits for, and it refuses for order nothing the sender
//! sends. That `recvwin_size` is the peer's: each end announces its own in its
//! `HANDSHAKE` ([`TxHandshake::Known`]), so the two ends may differ. Refused packets go again first, and
//! control packets (grants, their data, answers, handshakes) are never held back: they
//! complete what the peer holds already (a peer whose receive waits for the data of a
//! granted long message can release nothing before that data comes). RMA and atomic
//! requests carry no message id and are bounded by the target instead.
//!
//! Nothing here panics; id arithmetic wraps.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::rnr::Backoff;
use super::wire::{PktType, Prefix, ReqPacket};
use super::{Nanos, PeerAddr};

/// The cookie `secret` gives the peer at `addr` (splitmix64 finalizer over both; never
/// 0). Not cryptographic: it proves the asker receives at its address, nothing more.
pub fn cookie_for(secret: u64, addr: PeerAddr) -> u64 {
    let mut z = secret ^ addr.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

/// The handshake as the sending side knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxHandshake {
    /// Nothing sent yet.
    None,
    /// `HELLO` sent at this time, no answer yet.
    Asked(Nanos),
    /// Answered.
    Known {
        /// The peer's feature bits.
        features: u64,
        /// The cookie to put in requests.
        cookie: u64,
        /// The peer's receive window in message ids, as announced, clamped to
        /// `1..=MAX_RECVWIN`: the sender's window towards it.
        recvwin: u32,
    },
}

impl TxHandshake {
    /// The sender's window towards this peer: its announced receive window once known
    /// (no message request is queued before that; 1 then).
    pub fn send_window(&self) -> u32 {
        match *self {
            TxHandshake::Known { recvwin, .. } => recvwin,
            _ => 1,
        }
    }
}

/// Who is waiting for a packet's transport completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Nobody (a control packet).
    None,
    /// The transmit operation with this id.
    Tx(u32),
}

/// A packet waiting to be handed to the transport.
#[derive(Clone, Debug)]
pub struct Queued {
    /// The packet.
    pub bytes: Vec<u8>,
    /// Who counts it.
    pub owner: Owner,
}

/// The message id of a message request (`None` for every other packet).
pub fn msg_id_of(bytes: &[u8]) -> Option<u32> {
    let t = PktType::from_wire(Prefix::new_checked(bytes).ok()?.pkt_type())?;
    if !(t.is_req() && t.is_msg()) {
        return None;
    }
    Some(ReqPacket::new_checked(bytes).ok()?.msg_id())
}

/// Whether packet `q` may go now under the sender's window of `window` message ids
/// (module docs): it is not a message request, or its id is less than `window` ahead
/// of `oldest`, the oldest message not taken.
pub fn in_window(q: &Queued, oldest: Option<u32>, window: u32) -> bool {
    let Some(id) = msg_id_of(&q.bytes) else {
        return true;
    };
    oldest.is_none_or(|o| id.wrapping_sub(o) < window.max(1))
}

/// The packets waiting to go to one peer: refused ones to send again, control packets,
/// and requests (in message id order; see the module docs on the sender's window).
#[derive(Debug, Default)]
pub struct SendQueue {
    refused: VecDeque<Queued>,
    ctrl: VecDeque<Queued>,
    requests: VecDeque<Queued>,
}

impl SendQueue {
    /// Queue a new packet (a request or a control packet, told by its type byte).
    pub fn push(&mut self, q: Queued) {
        let req = q
            .bytes
            .first()
            .and_then(|&b| PktType::from_wire(b))
            .is_some_and(PktType::is_req);
        if req {
            self.requests.push_back(q);
        } else {
            self.ctrl.push_back(q);
        }
    }

    /// Queue a packet the peer refused, to go again before anything else.
    pub fn push_refused(&mut self, q: Queued) {
        self.refused.push_back(q);
    }

    /// The next packet to send and whether it is one the peer refused before; the next
    /// request only when `may_send` allows it.
    pub fn pop(&mut self, may_send: impl Fn(&Queued) -> bool) -> Option<(Queued, bool)> {
        if let Some(q) = self.refused.pop_front() {
            return Some((q, true));
        }
        if let Some(q) = self.ctrl.pop_front() {
            return Some((q, false));
        }
        if self.requests.front().is_some_and(may_send) {
            return self.requests.pop_front().map(|q| (q, false));
        }
        None
    }

    /// Whether [`SendQueue::pop`] would return a packet.
    pub fn ready(&self, may_send: impl Fn(&Queued) -> bool) -> bool {
        !self.refused.is_empty()
            || !self.ctrl.is_empty()
            || self.requests.front().is_some_and(may_send)
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.refused.len() + self.ctrl.len() + self.requests.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop everything.
    pub fn clear(&mut self) {
        self.refused.clear();
        self.ctrl.clear();
        self.requests.clear();
    }
}

/// The messages with packets sent (or refused) to a peer and not taken by its device
/// yet: the sender's window (module docs).
#[derive(Debug, Default)]
pub struct Unacked {
    /// Packets not taken, per message id.
    pending: HashMap<u32, usize>,
    /// Those ids in sending order (ids no longer pending are skipped lazily).
    order: VecDeque<u32>,
}

impl Unacked {
    /// A packet of message `id` was handed to the transport.
    pub fn sent(&mut self, id: u32) {
        *self.pending.entry(id).or_insert(0) += 1;
        if self.order.back() != Some(&id) {
            self.order.push_back(id);
        }
    }

    /// A packet of message `id` was taken.
    pub fn taken(&mut self, id: u32) {
        if let Some(n) = self.pending.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.pending.remove(&id);
            }
        }
    }

    /// The oldest message with a packet not taken.
    pub fn oldest(&mut self) -> Option<u32> {
        while let Some(&f) = self.order.front() {
            if self.pending.contains_key(&f) {
                return Some(f);
            }
            self.order.pop_front();
        }
        None
    }

    /// Forget everything (the peer is lost).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.order.clear();
    }
}

/// What [`RecvWindow::arrive`] decided for a message id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Already released: a later segment, or a duplicate.
    Released,
    /// Release it now (then call [`RecvWindow::release`]).
    Release,
    /// Hold its packet until the earlier ids are released (ordered only).
    Hold,
    /// Too far ahead: refuse it (RNR).
    Refuse,
}

/// The ids released to matching and the packets held for order.
#[derive(Clone, Debug, Default)]
pub struct RecvWindow {
    /// Every id below this was released.
    pub base: u32,
    /// Ids at or above `base` released (unordered only).
    above: BTreeSet<u32>,
    /// Held packets by id (ordered only), in arrival order per id.
    held: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Packets in `held`.
    held_pkts: usize,
}

impl RecvWindow {
    fn ahead(&self, id: u32) -> u32 {
        id.wrapping_sub(self.base)
    }

    /// Whether `id` was released.
    pub fn is_released(&self, id: u32) -> bool {
        // Ids "behind" base (more than half the space ahead) count as released.
        self.ahead(id) >= 1 << 31 || self.above.contains(&id)
    }

    /// Decide what to do with a packet of message `id`.
    pub fn arrive(&self, id: u32, ordered: bool, window: u32) -> Arrival {
        if self.is_released(id) {
            return Arrival::Released;
        }
        if self.ahead(id) >= window.max(1) {
            return Arrival::Refuse;
        }
        if ordered && id != self.base {
            Arrival::Hold
        } else {
            Arrival::Release
        }
    }

    /// Mark `id` released.
    pub fn release(&mut self, id: u32) {
        if id == self.base {
            self.base = self.base.wrapping_add(1);
            while self.above.remove(&self.base) {
                self.base = self.base.wrapping_add(1);
            }
        } else if !self.is_released(id) {
            self.above.insert(id);
        }
    }

    /// Packets held.
    pub fn held_len(&self) -> usize {
        self.held_pkts
    }

    /// Hold a packet of message `id`.
    pub fn hold(&mut self, id: u32, bytes: Vec<u8>) {
        self.held.entry(id).or_default().push(bytes);
        self.held_pkts += 1;
    }

    /// Take the packets held for `id`.
    pub fn take_held(&mut self, id: u32) -> Option<Vec<Vec<u8>>> {
        let v = self.held.remove(&id)?;
        self.held_pkts -= v.len().min(self.held_pkts);
        Some(v)
    }

    /// Put packets taken with [`RecvWindow::take_held`] back.
    pub fn put_back(&mut self, id: u32, pkts: Vec<Vec<u8>>) {
        self.held_pkts += pkts.len();
        self.held.entry(id).or_default().splice(0..0, pkts);
    }

    /// Drop every held packet.
    pub fn clear_held(&mut self) {
        self.held.clear();
        self.held_pkts = 0;
    }
}

/// One peer's state.
#[derive(Debug)]
pub struct Peer {
    /// The handshake for what we send.
    pub hs: TxHandshake,
    /// Next message id to send.
    pub next_msg_id: u32,
    /// Received message ids.
    pub win: RecvWindow,
    /// Packets ready to go.
    pub queue: SendQueue,
    /// Messages not fully taken by the peer's device (the sender's window).
    pub unacked: Unacked,
    /// Transmit operations whose requests wait for the handshake.
    pub awaiting_hs: Vec<u32>,
    /// RNR backoff.
    pub backoff: Backoff,
    /// Last sign of life (a packet or a transport report), or when work began.
    pub last_progress: Nanos,
    /// Packets and reads in flight to the peer.
    pub work: usize,
    /// Operations (sends, receives, RMA) in progress with the peer.
    pub ops: usize,
    /// In the engine's list of peers with packets to send.
    pub in_active: bool,
    /// Declared lost: its operations completed in error.
    pub failed: bool,
}

impl Peer {
    /// A peer first seen at `now`.
    pub fn new(now: Nanos) -> Peer {
        Peer {
            hs: TxHandshake::None,
            next_msg_id: 0,
            win: RecvWindow::default(),
            queue: SendQueue::default(),
            unacked: Unacked::default(),
            awaiting_hs: Vec::new(),
            backoff: Backoff::default(),
            last_progress: now,
            work: 0,
            ops: 0,
            in_active: false,
            failed: false,
        }
    }

    /// Whether the peer has anything pending on the network (the lost-peer clock runs).
    pub fn busy(&self) -> bool {
        self.work > 0 || !self.queue.is_empty() || !self.awaiting_hs.is_empty()
    }

    /// Count one more piece of work at `now` (the clock starts when the peer was idle).
    pub fn add_work(&mut self, now: Nanos) {
        if !self.busy() {
            self.last_progress = now;
        }
        self.work += 1;
    }

    /// One piece of work finished.
    pub fn end_work(&mut self) {
        self.work = self.work.saturating_sub(1);
    }

    /// An operation with the peer began.
    pub fn add_op(&mut self) {
        self.ops += 1;
    }

    /// An operation with the peer ended.
    pub fn end_op(&mut self) {
        self.ops = self.ops.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_window_holds_refuses_and_releases_in_order() {
        let mut w = RecvWindow::default();
        assert_eq!(w.arrive(0, true, 4), Arrival::Release);
        assert_eq!(w.arrive(2, true, 4), Arrival::Hold);
        assert_eq!(w.arrive(4, true, 4), Arrival::Refuse);
        w.release(0);
        assert_eq!(w.arrive(0, true, 4), Arrival::Released);
        assert_eq!(w.arrive(4, true, 4), Arrival::Hold);
        assert_eq!(w.arrive(1, true, 4), Arrival::Release);
    }

    #[test]
    fn unordered_window_releases_at_once_and_compacts() {
        let mut w = RecvWindow::default();
        assert_eq!(w.arrive(3, false, 8), Arrival::Release);
        w.release(3);
        w.release(1);
        assert!(w.is_released(3) && w.is_released(1) && !w.is_released(0));
        w.release(0);
        assert_eq!(w.base, 2);
        w.release(2);
        assert_eq!(w.base, 4, "3 was released before");
        assert!(w.above.is_empty());
    }

    #[test]
    fn ids_wrap() {
        let mut w = RecvWindow {
            base: u32::MAX,
            ..RecvWindow::default()
        };
        assert_eq!(w.arrive(0, true, 4), Arrival::Hold);
        w.release(u32::MAX);
        assert_eq!(w.base, 0);
        assert!(w.is_released(u32::MAX));
    }

    #[test]
    fn cookies_differ_by_address_and_secret() {
        assert_ne!(cookie_for(1, 2), cookie_for(1, 3));
        assert_ne!(cookie_for(1, 2), cookie_for(2, 2));
        assert_ne!(cookie_for(0, 0), 0);
    }
}
