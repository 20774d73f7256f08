//! The engine against forged and hostile traffic, on a virtual clock with no loss:
//! forged `CONNECT`s (invented sources, a live peer's ids from another source, valid
//! cookies replayed from another source) leave no state and break no connection;
//! packets go only to proven peers or back to a datagram's source; packets of a
//! connection from another source are ignored; peers created by the far side are
//! bounded and idle ones reclaimed; timer work follows the peers with timers due.
//!
//! The same over real udp (an rxd endpoint under a flood from raw sockets) is in
//! `tests/forged.rs`.

use ofi_testkit::TestRng;
use std::collections::HashSet;

use ofi_util_rxd::peer::{Config, Engine, Event, PeerId, NO_PEER};
use ofi_util_rxd::proto::{Hdr, PktType, COOKIE_LEN, HDR_LEN};

fn cfg() -> Config {
    Config {
        seg_size: 256,
        window: 32,
        rto: 300_000,
        rto_max: 20_000_000,
        retry_limit: 12,
        max_peers: 1 << 20,
        ..Config::default()
    }
}

/// A packet an engine sent: (its peer slot, destination, bytes).
type Out = (PeerId, Vec<u8>, Vec<u8>);

/// Two engines, `A` at address `[0]` and `B` at `[1]`, on a perfect network; what B
/// sends to anyone else is kept in `b_out_other`.
struct Pair {
    a: Engine,
    b: Engine,
    now: u64,
    a_events: Vec<Event>,
    b_events: Vec<Event>,
    b_out_other: Vec<Out>,
    /// Packets B was handed from sources other than A (forged).
    forged_sources: HashSet<Vec<u8>>,
}

const A: &[u8] = &[0];
const B: &[u8] = &[1];

impl Pair {
    fn new(b_cfg: Config) -> Pair {
        Pair {
            a: Engine::with_cookie_key(cfg(), 11, (1, 2)),
            b: Engine::with_cookie_key(b_cfg, 22, (3, 4)),
            now: 1_000,
            a_events: Vec::new(),
            b_events: Vec::new(),
            b_out_other: Vec::new(),
            forged_sources: HashSet::new(),
        }
    }

    /// Move packets between A and B, and run their timers, until neither has anything
    /// to send or time (bounded).
    fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut to_b = Vec::new();
            let mut to_a = Vec::new();
            let now = self.now;
            self.a.handle_timeout(now);
            self.b.handle_timeout(now);
            self.a.poll_transmit(now, usize::MAX, |_, to, pkt| {
                assert_eq!(to, B, "A sends only to B");
                to_b.push(pkt.to_vec());
                true
            });
            let other = &mut self.b_out_other;
            self.b.poll_transmit(now, usize::MAX, |peer, to, pkt| {
                if to == A {
                    to_a.push(pkt.to_vec());
                } else {
                    other.push((peer, to.to_vec(), pkt.to_vec()));
                }
                true
            });
            while let Some(e) = self.a.poll_event() {
                self.a_events.push(e);
            }
            while let Some(e) = self.b.poll_event() {
                self.b_events.push(e);
            }
            if to_a.is_empty() && to_b.is_empty() {
                let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) => self.now = self.now.max(t),
                    None => return,
                }
                continue;
            }
            self.now += 10_000;
            for p in to_b {
                self.b.handle_packet(A, &p, self.now);
            }
            for p in to_a {
                self.a.handle_packet(B, &p, self.now);
            }
        }
        panic!("the pair did not settle");
    }

    /// Hand B a packet from `src` (not A).
    fn forge(&mut self, src: &[u8], pkt: &[u8]) {
        self.forged_sources.insert(src.to_vec());
        self.b.handle_packet(src, pkt, self.now);
    }

    /// A sends `data` to B; it arrives and its send completes.
    fn exchange(&mut self, token: u64, data: &[u8]) {
        let pb = self.a.peer_for_addr(B);
        self.a.send(pb, token, data, self.now).expect("send");
        self.settle();
        assert!(
            self.a_events.contains(&Event::Sent { token }),
            "send {token} completes: {:?}",
            self.a_events
        );
        assert!(
            self.b_events.iter().any(|e| matches!(e,
                Event::Message { data: d, .. } if d == data)),
            "message {token} arrives"
        );
    }

    /// No operation failed and no connection ended or was reclaimed, on either side.
    fn assert_no_failure(&self) {
        for e in self.a_events.iter().chain(&self.b_events) {
            assert!(
                matches!(e, Event::Message { .. } | Event::Sent { .. }),
                "unexpected event {e:?}"
            );
        }
    }

    /// Everything B sent to an address other than A's was a CHALLENGE to the source
    /// of a packet it was handed (no packet to an address taken from a packet).
    fn assert_no_reflection(&self) {
        for (peer, to, pkt) in &self.b_out_other {
            assert_eq!(*peer, NO_PEER, "only challenges go to non-peers");
            assert!(
                self.forged_sources.contains(to),
                "sent to {to:?}: no such source"
            );
            assert_eq!(
                Hdr::from_bytes(pkt).ok().map(|h| h.ty),
                Some(PktType::Challenge)
            );
        }
    }
}

/// A `CONNECT` with id `src_id`, session `sess` and `cookie`.
fn connect(src_id: u32, sess: u32, cookie: u64) -> Vec<u8> {
    let mut h = Hdr::new(PktType::Connect);
    h.src_id = src_id;
    h.src_sess = sess;
    let mut v = h.bytes().to_vec();
    v.extend_from_slice(&cookie.to_le_bytes());
    v
}

#[test]
fn the_handshake_proves_the_source_and_then_carries_data() {
    let mut p = Pair::new(cfg());
    p.exchange(1, b"hello");
    p.exchange(2, &[7u8; 3000]);
    p.assert_no_failure();
    // One CHALLENGE went back to A (before its CONNECT echoed the cookie): B keeps
    // A alone.
    assert_eq!(p.b.stats().challenged, 1);
    assert_eq!(p.b.peer_count(), 1);
}

#[test]
fn forged_connects_from_invented_sources_leave_no_state() {
    let mut p = Pair::new(cfg());
    p.exchange(1, b"before");
    let mut r = TestRng::seeded(5);
    for k in 0..100_000u32 {
        // Invented sources, ids, sessions and cookies; a tenth carry a cookie that
        // is valid for another source (replayed).
        let src = (r.next_u64() | 0x100).to_le_bytes()[..6].to_vec();
        let sess = (r.next_u64() as u32) | 1;
        let cookie = if k % 10 == 0 {
            p.b.cookie_for(A, k, sess, p.now)
        } else {
            r.next_u64()
        };
        p.forge(&src, &connect(k, sess, cookie));
        if k % 1000 == 0 {
            // Interleaved with live traffic.
            p.exchange(2 + u64::from(k), &k.to_le_bytes());
        }
    }
    p.settle();
    p.exchange(1_000_000, b"after");
    p.assert_no_failure();
    assert_eq!(p.b.peer_count(), 1, "state for a forged peer");
    assert!(p.b.stats().challenged >= 100_000);
    p.assert_no_reflection();
}

#[test]
fn a_forged_connect_naming_a_live_connection_changes_nothing() {
    let mut p = Pair::new(cfg());
    p.exchange(1, b"one");
    // A's real CONNECT (with its valid cookie) is the last CONNECT B saw; replay it,
    // and variants with new sessions, from another source.
    let a_id = 0; // A's first peer slot is its id for this connection.
    for sess in [0x1234_5679u32, 0xdead_beef, 3] {
        let good = p.b.cookie_for(A, a_id, sess, p.now);
        p.forge(&[9, 9], &connect(a_id, sess, good));
        p.forge(&[9, 9], &connect(a_id, sess, 0));
    }
    // From A's own address but without a valid cookie: challenged, not a reset.
    p.b.handle_packet(A, &connect(a_id, 0x7777_7777, 42), p.now);
    p.settle();
    p.exchange(2, b"two");
    p.assert_no_failure();
    assert_eq!(p.b.peer_count(), 1);
    p.assert_no_reflection();
}

#[test]
fn packets_of_a_connection_from_another_source_are_ignored() {
    let mut p = Pair::new(cfg());
    p.exchange(1, b"one");
    // Capture A's next data packet and hand it to B from another source first.
    let pb = p.a.peer_for_addr(B);
    p.a.send(pb, 2, b"two", p.now).expect("send");
    let mut pkts = Vec::new();
    p.a.poll_transmit(p.now, usize::MAX, |_, _, pkt| {
        pkts.push(pkt.to_vec());
        true
    });
    assert!(!pkts.is_empty());
    let before = p.b_events.len();
    for pkt in &pkts {
        p.forge(&[9, 9], pkt);
    }
    while let Some(e) = p.b.poll_event() {
        p.b_events.push(e);
    }
    assert_eq!(
        p.b_events.len(),
        before,
        "B took a packet from another source"
    );
    assert_eq!(p.b.stats().wrong_source, pkts.len() as u64);
    // The real ones (from A) are taken.
    for pkt in &pkts {
        p.b.handle_packet(A, pkt, p.now);
    }
    p.settle();
    assert!(p.a_events.contains(&Event::Sent { token: 2 }));
    p.assert_no_failure();
}

/// A far peer at `src` completes the handshake with B (it echoes a valid cookie).
fn proven_connect(p: &mut Pair, src: &[u8], id: u32) {
    let sess = 0x100 + id;
    let cookie = p.b.cookie_for(src, id, sess, p.now);
    p.forge(src, &connect(id, sess, cookie));
}

#[test]
fn far_created_peers_are_bounded_and_idle_ones_reclaimed() {
    let c = Config {
        max_peers: 4,
        ..cfg()
    };
    let mut p = Pair::new(c);
    // A's own connection to B is far-created at B too: one of the 4.
    p.exchange(1, b"one");
    for id in 0..10u32 {
        proven_connect(&mut p, &[5, id as u8], id);
    }
    p.settle();
    // Three more fit; the others wait (nothing idle long enough to reclaim).
    assert_eq!(p.b.peer_count(), 4);
    assert_eq!(p.b.stats().reclaimed, 0);
    // Once they have been silent for RECLAIM_IDLE_RTOS × rto_max, new ones take the
    // slots of the least recently heard (never A's while it is busy).
    p.now += c.rto_max * ofi_util_rxd::peer::RECLAIM_IDLE_RTOS + 1;
    p.exchange(50, b"A is heard from");
    for id in 10..13u32 {
        proven_connect(&mut p, &[6, id as u8], id);
        p.exchange(100 + u64::from(id), b"busy");
    }
    p.settle();
    assert_eq!(p.b.peer_count(), 4);
    assert_eq!(p.b.stats().reclaimed, 3);
    let reclaimed = p
        .b_events
        .iter()
        .filter(|e| matches!(e, Event::PeerReclaimed { .. }))
        .count();
    assert_eq!(reclaimed, 3);
    // A's connection lives on.
    p.exchange(2, b"two");
    assert!(!p
        .a_events
        .iter()
        .any(|e| matches!(e, Event::Failed { .. } | Event::PeerLost { .. })));
}

#[test]
fn timer_work_follows_the_peers_with_timers_due() {
    let mut p = Pair::new(cfg());
    // 2000 idle connections at B (proven far peers that said nothing more).
    for id in 0..2000u32 {
        proven_connect(&mut p, &[7, (id >> 8) as u8, id as u8], id);
    }
    p.settle();
    assert_eq!(p.b.peer_count(), 2000);
    let before = p.b.stats().timer_visits;
    let rounds = 200u64;
    for k in 0..rounds {
        p.exchange(k, &[k as u8; 100]);
    }
    let visits = p.b.stats().timer_visits - before;
    // Each exchange arms a few timers at B (a delayed acknowledgement, at most a
    // retransmission): a handful of visits per round, not one per idle peer.
    assert!(
        visits <= 4 * rounds,
        "{visits} peer visits for {rounds} rounds with 2000 idle peers"
    );
    p.assert_no_failure();
}

#[test]
fn a_challenge_is_taken_only_from_the_peer_being_connected() {
    let mut a = Engine::with_cookie_key(cfg(), 1, (5, 6));
    let pb = a.peer_for_addr(B);
    a.send(pb, 1, b"x", 0).expect("send");
    let mut first = Vec::new();
    a.poll_transmit(0, usize::MAX, |_, _, pkt| {
        first.push(pkt.to_vec());
        true
    });
    let h = Hdr::from_bytes(&first[0]).expect("a CONNECT");
    assert_eq!(h.ty, PktType::Connect);
    let mut c = Hdr::new(PktType::Challenge);
    c.dst_id = h.src_id;
    c.dst_sess = h.src_sess;
    let mut pkt = c.bytes().to_vec();
    pkt.extend_from_slice(&77u64.to_le_bytes());
    assert_eq!(pkt.len(), HDR_LEN + COOKIE_LEN);
    // From another source: ignored (no new CONNECT).
    a.handle_packet(&[9], &pkt, 10);
    let mut sent = 0;
    a.poll_transmit(10, usize::MAX, |_, _, _| {
        sent += 1;
        true
    });
    assert_eq!(sent, 0);
    // From B: the next CONNECT echoes the cookie.
    a.handle_packet(B, &pkt, 20);
    let mut again = Vec::new();
    a.poll_transmit(20, usize::MAX, |_, to, pkt| {
        assert_eq!(to, B);
        again.push(pkt.to_vec());
        true
    });
    assert_eq!(again.len(), 1);
    assert_eq!(&again[0][HDR_LEN..], &77u64.to_le_bytes());
}
