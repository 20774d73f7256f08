//! rxm's sans-IO protocol engine on the shared simulated network (`ofi_testkit::simnet`
//! in stream mode: connections reliable and in order, which can break) with a virtual
//! clock.
//!
//! The big run: 10^4 messages of mixed sizes (eager, segmented, rendezvous) among 8
//! peers, with connection storms (many links reset at once), credit exhaustion
//! (receivers that take messages in late, a grant of 4) and one peer killed while a
//! rendezvous read of its buffer is in flight. Every message is delivered exactly once
//! and in order, or its send completes in error (then it arrived at most once); the
//! engines end idle; it spans more than a second of virtual time. Several seeds.
//!
//! `RXM_SIM_SEEDS` sets how many seeds (default 3).

use std::collections::{BTreeMap, VecDeque};

use ofi_core::Errno;
use ofi_testkit::simnet::{Mode, Nanos, NodeId, Sim, SimNode};
use ofi_testkit::TestRng;
use ofi_util_rxm::engine::{Config, CreditToken, Engine, Event, OpId, PeerId, ReadId};
use ofi_util_rxm::proto::{Hello, Kind, Reason, VERSION};

/// What travels between two simulated endpoints.
#[derive(Clone, Debug)]
enum Pkt {
    /// Connection management: an rxm handshake (connect or accept), as CM data.
    Cm(Vec<u8>),
    /// A packet on the connection.
    Msg(Vec<u8>),
    /// The core's RMA read of the target's registered buffer, and its answer.
    ReadReq { id: u64, remote: (u64, u64, u64) },
    ReadResp {
        id: u64,
        result: Result<Vec<u8>, Errno>,
    },
}

fn hello(kind: Kind, grant: u32) -> Vec<u8> {
    Hello {
        kind,
        version: VERSION,
        reason: Reason::None,
        buffer_size: 1024,
        credits: grant,
        sar_limit: 8192,
        instance: 1,
        addr: Vec::new(),
    }
    .encode()
}

/// A received message as the test saw it.
#[derive(Debug)]
struct Got {
    from: PeerId,
    tag: u64,
    data: Vec<u8>,
    arrival: u64,
}

struct Node {
    eng: Engine,
    outbox: VecDeque<(NodeId, Pkt)>,
    got: Vec<Got>,
    sent: Vec<OpId>,
    failed: Vec<(OpId, Errno)>,
    recv_failed: Vec<(PeerId, u64)>,
    protocol_errors: usize,
    /// Messages not yet taken in: (when the application takes it, its credit).
    backlog: VecDeque<(Nanos, CreditToken)>,
    rng: TestRng,
    /// The longest the application takes to take a message in.
    consume_delay: Nanos,
}

impl Node {
    fn drain_events(&mut self, now: Nanos) {
        while let Some(ev) = self.eng.poll_event() {
            match ev {
                Event::Sent { op } => self.sent.push(op),
                Event::Failed { op, err } => self.failed.push((op, err)),
                Event::Received {
                    peer,
                    tag,
                    data,
                    arrival,
                    credit,
                    ..
                } => {
                    self.got.push(Got {
                        from: peer,
                        tag,
                        data,
                        arrival,
                    });
                    let due = now + self.rng.below(self.consume_delay + 1);
                    // Taken in in order (a FIFO of receives).
                    let due = due.max(self.backlog.back().map_or(0, |b| b.0));
                    self.backlog.push_back((due, credit));
                }
                Event::RecvFailed { peer, tag, .. } => self.recv_failed.push((peer, tag)),
                Event::ProtocolError { .. } => self.protocol_errors += 1,
            }
        }
    }
}

impl SimNode for Node {
    type Packet = Pkt;

    fn transmit(&mut self, now: Nanos, out: &mut dyn FnMut(NodeId, Pkt) -> bool) {
        while self.backlog.front().is_some_and(|b| b.0 <= now) {
            if let Some((_, c)) = self.backlog.pop_front() {
                self.eng.consumed(c);
            }
        }
        while let Some(p) = self.eng.poll_connect(now) {
            let grant = self.eng.grant();
            self.outbox
                .push_back((p.0 as NodeId, Pkt::Cm(hello(Kind::Connect, grant))));
        }
        while let Some(r) = self.eng.poll_read() {
            self.outbox.push_back((
                r.peer.0 as NodeId,
                Pkt::ReadReq {
                    id: r.id.0,
                    remote: r.remote,
                },
            ));
        }
        while let Some((p, b)) = self.eng.poll_transmit(now) {
            self.outbox.push_back((p.0 as NodeId, Pkt::Msg(b)));
        }
        for (dst, pkt) in self.outbox.drain(..) {
            assert!(out(dst, pkt), "stream mode takes every packet");
        }
        self.drain_events(now);
    }

    fn deliver(&mut self, now: Nanos, src: NodeId, pkt: Pkt) {
        let peer = PeerId(src as u32);
        match pkt {
            Pkt::Cm(b) => {
                let h = Hello::parse(&b).expect("a well-formed handshake");
                self.eng.handle_conn_up(peer, h.credits);
                if h.kind == Kind::Connect {
                    let grant = self.eng.grant();
                    self.outbox
                        .push_back((src, Pkt::Cm(hello(Kind::Accept, grant))));
                }
            }
            Pkt::Msg(b) => self.eng.handle_packet(peer, &b, now),
            Pkt::ReadReq { id, remote } => {
                let result = self.eng.serve_read(peer, remote);
                self.outbox.push_back((src, Pkt::ReadResp { id, result }));
            }
            Pkt::ReadResp { id, result } => self.eng.handle_read_done(ReadId(id), result),
        }
        self.drain_events(now);
    }

    fn next_timeout(&self) -> Option<Nanos> {
        let backlog = self.backlog.front().map(|b| b.0);
        match (self.eng.poll_timeout(), backlog) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timeout(&mut self, now: Nanos) {
        self.eng.handle_timeout(now);
        self.drain_events(now);
    }

    fn link_down(&mut self, now: Nanos, peer: NodeId) {
        self.eng.handle_conn_down(PeerId(peer as u32), now);
        self.drain_events(now);
    }
}

const NODES: usize = 8;
const MESSAGES: u64 = 10_000;

fn cfg() -> Config {
    Config {
        credits: 4,
        eager_max: 1024,
        seg_size: 1024,
        sar_limit: 8192,
        max_msg: 1 << 20,
        reconnect_delay: 200_000,
        connect_timeout: 5_000_000,
    }
}

/// Message `k`'s bytes: a function of (seed, k) — eager, segmented or rendezvous sized.
fn payload(seed: u64, k: u64) -> Vec<u8> {
    let mut r = TestRng::seeded(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let len = match r.below(20) {
        0..=11 => r.below(1025) as usize,
        12..=16 => 1025 + r.below(8192 - 1025) as usize,
        _ => 8193 + r.below(24_000) as usize,
    };
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

struct Outcome {
    virtual_ns: Nanos,
    failed: usize,
    stalls: u64,
    classes: (u64, u64, u64),
}

fn run(seed: u64) -> Outcome {
    let nodes = (0..NODES)
        .map(|i| Node {
            eng: Engine::new(cfg()),
            outbox: VecDeque::new(),
            got: Vec::new(),
            sent: Vec::new(),
            failed: Vec::new(),
            recv_failed: Vec::new(),
            protocol_errors: 0,
            backlog: VecDeque::new(),
            rng: TestRng::seeded(seed ^ (i as u64 + 1) << 48),
            consume_delay: 400_000,
        })
        .collect();
    let mut sim = Sim::new(
        nodes,
        Mode::Stream {
            latency: 5_000,
            jitter: 20_000,
        },
        seed,
    );
    let mut rng = TestRng::seeded(seed.wrapping_mul(31) ^ 0x51);
    // Message k: (from, to).
    let mut route: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    let mut killed: Option<(usize, usize)> = None;
    let mut storms = 0;
    let mut burst = (0, 1);
    for k in 0..MESSAGES {
        // Every 200 messages, 24 from one node to one peer at once: more than the
        // grant, while the receiver takes messages in late (credit exhaustion).
        let in_burst = k % 200 < 24;
        if !in_burst {
            let step = sim.now + rng.below(330_000);
            sim.run_to(step);
        }
        if k > 0 && k % 500 == 0 {
            // A connection storm: many links reset at once.
            for _ in 0..6 {
                let a = rng.below(NODES as u64) as usize;
                let b = rng.below(NODES as u64) as usize;
                sim.break_link(a, b);
            }
            storms += 1;
        }
        if killed.is_none() && k >= MESSAGES / 2 {
            // Kill a peer whose buffer a live node is reading (a rendezvous in flight).
            let victim = (0..NODES).filter(|&i| !sim.is_dead(i)).find_map(|i| {
                sim.nodes[i]
                    .eng
                    .reading_from()
                    .into_iter()
                    .map(|p| p.0 as usize)
                    .find(|&p| p != i)
                    .map(|p| (p, i))
            });
            if let Some((v, reader)) = victim {
                sim.kill(v);
                killed = Some((v, reader));
            }
        }
        let (from, to) = if in_burst && k % 200 != 0 {
            burst
        } else {
            let from = rng.below(NODES as u64) as usize;
            let mut to = rng.below(NODES as u64 - 1) as usize;
            if to >= from {
                to += 1;
            }
            burst = (from, to);
            (from, to)
        };
        if sim.is_dead(from) {
            continue;
        }
        route.insert(k, (from, to));
        sim.nodes[from]
            .eng
            .send(PeerId(to as u32), OpId(k), k, payload(seed, k))
            .expect("send");
    }
    sim.run(Nanos::MAX);
    let (dead, reader) = killed.expect("a rendezvous was in flight at some point");
    assert!(storms > 0);

    // Every live node: no protocol error, idle, and each of its sends reported once.
    let mut outcome: BTreeMap<u64, Result<(), Errno>> = BTreeMap::new();
    for (i, n) in sim.nodes.iter().enumerate() {
        if i == dead {
            continue;
        }
        assert_eq!(n.protocol_errors, 0, "seed {seed}: node {i}");
        assert_eq!(n.eng.live_ops(), 0, "seed {seed}: node {i} not idle");
        assert_eq!(n.eng.reads_in_flight(), 0, "seed {seed}: node {i} reading");
        for op in &n.sent {
            assert!(
                outcome.insert(op.0, Ok(())).is_none(),
                "seed {seed}: {op:?} twice"
            );
        }
        for (op, e) in &n.failed {
            assert!(
                outcome.insert(op.0, Err(*e)).is_none(),
                "seed {seed}: {op:?} twice"
            );
        }
    }
    // Receptions: each message at most once, at the right node, intact.
    let mut delivered: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, n) in sim.nodes.iter().enumerate() {
        if i == dead {
            continue;
        }
        for g in &n.got {
            let (from, to) = route[&g.tag];
            assert_eq!((g.from.0 as usize, to), (from, i), "seed {seed}: misrouted");
            assert_eq!(
                g.data,
                payload(seed, g.tag),
                "seed {seed}: message {}",
                g.tag
            );
            *delivered.entry(g.tag).or_default() += 1;
        }
        // In order per sender: by arrival, tags increase.
        for from in 0..NODES {
            let mut mine: Vec<&Got> = n.got.iter().filter(|g| g.from.0 as usize == from).collect();
            mine.sort_by_key(|g| g.arrival);
            assert!(
                mine.windows(2).all(|w| w[0].tag < w[1].tag),
                "seed {seed}: {from}->{i} out of order"
            );
        }
    }
    assert!(
        delivered.values().all(|&c| c == 1),
        "seed {seed}: a duplicate"
    );
    for (&k, &(from, to)) in &route {
        if from == dead {
            continue;
        }
        match outcome.get(&k) {
            // A completed send was delivered (once: checked above), unless to the dead
            // peer, whose receptions died with it.
            Some(Ok(())) if to != dead => {
                assert_eq!(
                    delivered.get(&k),
                    Some(&1),
                    "seed {seed}: {k} sent, not delivered"
                );
            }
            Some(_) => {}
            None => panic!("seed {seed}: message {k} ({from}->{to}) never completed"),
        }
    }
    // The reader of the killed peer's buffer saw that message fail.
    assert!(
        sim.nodes[reader]
            .recv_failed
            .iter()
            .any(|(p, _)| p.0 as usize == dead),
        "seed {seed}: the rendezvous from the killed peer did not fail"
    );
    let live = sim.nodes.iter().enumerate().filter(|(i, _)| *i != dead);
    let stalls = live.clone().map(|(_, n)| n.eng.stats().credit_stalls).sum();
    let s = live.fold((0, 0, 0), |a, (_, n)| {
        let s = n.eng.stats();
        (a.0 + s.eager, a.1 + s.sar, a.2 + s.rndv)
    });
    let failed = outcome.values().filter(|o| o.is_err()).count();
    Outcome {
        virtual_ns: sim.now,
        failed,
        stalls,
        classes: s,
    }
}

fn seeds() -> u64 {
    std::env::var("RXM_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

#[test]
fn ten_thousand_messages_among_eight_peers_with_storms_exhaustion_and_a_kill() {
    for seed in 0..seeds() {
        let o = run(0x5eed_0000 + seed);
        println!(
            "seed {seed}: {:.2} s virtual, {} sends failed, {} credit stalls, (eager, sar, rndv) = {:?}",
            o.virtual_ns as f64 / 1e9,
            o.failed,
            o.stalls,
            o.classes
        );
        assert!(
            o.virtual_ns > 1_000_000_000,
            "seed {seed}: {} ns",
            o.virtual_ns
        );
        assert!(o.stalls > 0, "seed {seed}: credits never ran out");
        let (e, s, r) = o.classes;
        assert!(
            e > 0 && s > 0 && r > 0,
            "seed {seed}: sizes {:?}",
            o.classes
        );
    }
}

/// A peer that ignores flow control (more first packets than the grant) or sends
/// garbage breaks the protocol: a `ProtocolError`, its connection handled as broken, no
/// panic, and a later connection works.
#[test]
fn hostile_packets_are_protocol_errors_never_panics() {
    use ofi_util_rxm::proto::{Hdr, Op, F_DC, F_TAGGED};
    let peer = PeerId(1);
    let mut e = Engine::new(cfg());
    e.handle_conn_up(peer, 4);
    for k in 0..4u64 {
        let mut b = Hdr::new(Op::Eager, F_TAGGED | F_DC, 3, k, 0)
            .bytes()
            .to_vec();
        b.extend_from_slice(b"abc");
        e.handle_packet(peer, &b, 0);
    }
    let mut b = Hdr::new(Op::Eager, F_TAGGED, 3, 9, 0).bytes().to_vec();
    b.extend_from_slice(b"abc");
    e.handle_packet(peer, &b, 0);
    let evs: Vec<Event> = std::iter::from_fn(|| e.poll_event()).collect();
    assert_eq!(
        evs.iter()
            .filter(|ev| matches!(ev, Event::Received { .. }))
            .count(),
        4
    );
    assert!(matches!(evs.last(), Some(Event::ProtocolError { .. })));
    assert!(!e.is_up(peer));

    // Random and mutated packets on a fresh connection: never a panic; every op is
    // reported once.
    let mut r = TestRng::seeded(0xbad);
    for round in 0..300u64 {
        let mut e = Engine::new(cfg());
        e.handle_conn_up(peer, 4);
        e.send(peer, OpId(round), 1, vec![7; r.below(20_000) as usize])
            .expect("send");
        while e.poll_transmit(0).is_some() {}
        for _ in 0..8 {
            let mut b = Hdr::new(Op::DcAck, 0, 1, 0, 0).bytes().to_vec();
            match r.below(3) {
                0 => {
                    let n = r.below(80) as usize;
                    b = r.bytes(n);
                }
                1 => {
                    let i = r.below(b.len() as u64) as usize;
                    b[i] ^= 1 << r.below(8);
                }
                _ => {
                    let n = r.below(200) as usize;
                    b.extend(r.bytes(n));
                }
            }
            e.handle_packet(peer, &b, round);
            if !e.is_up(peer) {
                e.handle_conn_up(peer, 4);
            }
        }
        e.handle_conn_down(peer, round);
        let reported = std::iter::from_fn(|| e.poll_event())
            .filter(|ev| matches!(ev, Event::Sent { .. } | Event::Failed { .. }))
            .count();
        assert_eq!(reported, 1, "round {round}");
    }
}

/// Untagged messages and remote CQ data travel through every protocol (eager,
/// segmented, rendezvous), with and without a delivery acknowledgement: the receiver
/// sees what the sender's meta said, and every send completes once.
#[test]
fn untagged_messages_and_cq_data_at_every_size() {
    use ofi_util_rxm::engine::MsgMeta;
    let (pa, pb) = (PeerId(1), PeerId(0));
    let mut a = Engine::new(cfg());
    let mut b = Engine::new(cfg());
    a.handle_conn_up(pa, 4);
    b.handle_conn_up(pb, 4);
    // Each size with and without a delivery acknowledgement asked (without, a send
    // completes when its last packet is handed over).
    let metas = [
        MsgMeta::default(),
        MsgMeta {
            tag: Some(3),
            data: Some(0xd0),
            dc: true,
        },
        MsgMeta {
            tag: None,
            data: Some(0xd1),
            dc: true,
        },
        MsgMeta {
            tag: Some(4),
            data: None,
            dc: false,
        },
    ];
    let cases: Vec<(usize, MsgMeta)> = [10, 5000, 20_000]
        .iter()
        .flat_map(|&len| metas.iter().map(move |&m| (len, m)))
        .collect();
    for (k, &(len, meta)) in cases.iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + k) as u8).collect();
        a.send_msg(pa, OpId(k as u64), meta, data.clone())
            .expect("send");
        let mut got = None;
        let mut sent = 0;
        // Drive both by hand (a reliable, in-order link), bounded.
        for _ in 0..100 {
            while let Some((_, pkt)) = a.poll_transmit(0) {
                b.handle_packet(pb, &pkt, 0);
            }
            while let Some(r) = b.poll_read() {
                let bytes = a.serve_read(pa, r.remote);
                b.handle_read_done(r.id, bytes);
            }
            while let Some((_, pkt)) = b.poll_transmit(0) {
                a.handle_packet(pa, &pkt, 0);
            }
            while let Some(ev) = b.poll_event() {
                if let Event::Received {
                    tag,
                    tagged,
                    cq_data,
                    data,
                    credit,
                    ..
                } = ev
                {
                    got = Some((tag, tagged, cq_data, data));
                    b.consumed(credit);
                }
            }
            while let Some(ev) = a.poll_event() {
                assert_eq!(ev, Event::Sent { op: OpId(k as u64) }, "case {k}");
                sent += 1;
            }
            if sent > 0 && got.is_some() {
                break;
            }
        }
        assert_eq!(sent, 1, "case {k}: the send completed once");
        let (tag, tagged, cq_data, bytes) = got.expect("received");
        assert_eq!(
            (tag, tagged, cq_data),
            (meta.tag.unwrap_or(0), meta.tag.is_some(), meta.data),
            "case {k}"
        );
        assert_eq!(bytes, data, "case {k}");
    }
    let s = a.stats();
    assert_eq!((s.eager, s.sar, s.rndv), (4, 4, 4));
}
