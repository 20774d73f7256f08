//! The sans-IO engine on a virtual clock over a simulated network that loses, duplicates
//! and reorders packets: hundreds of seeds, each a deterministic run. Every message is
//! delivered exactly once and in order (rxd always keeps `FI_ORDER_SAS`), every send is
//! reported once, and a silent peer is declared lost in bounded virtual time.
//!
//! The network is `ofi_testkit::simnet` in datagram mode (the harness rxm's simulation
//! shares); this file holds rxd's node: the engine, what it delivered and reported.
//!
//! `RXD_SIM_SEEDS` sets the number of seeds of the big runs (default 300).

use ofi_testkit::simnet::{self, Mode, Nanos, NodeId, SimNode};
use ofi_testkit::TestRng;
use ofi_util_rxd::peer::{Config, Engine, Event, Failure, PeerId, Seg};

/// The lossy network of most runs: 10 % loss, 5 % duplicates, 20 µs + up to 60 µs.
const NET: Mode = Mode::Datagram {
    loss_pct: 10,
    dup_pct: 5,
    latency: 20_000,
    jitter: 60_000,
};

fn cfg() -> Config {
    Config {
        seg_size: 100,
        window: 32,
        max_inflight: 2000,
        rto: 300_000,
        rto_max: 20_000_000,
        retry_limit: 25,
        ack_every: 4,
        ack_delay: 50_000,
        max_msg: 1 << 20,
        initial_seq: 0,
        max_peers: 64,
    }
}

/// The cookie key of node `i` in a run of `seed` (deterministic runs).
fn key(seed: u64, i: u8) -> (u64, u64) {
    (seed ^ 0x5eed, u64::from(i))
}

/// The content of message `k` from node `from`: its length and bytes are a function of
/// (seed, from, k), and it starts with `k` so the receiver can check the order.
fn payload(seed: u64, from: u8, k: u32) -> Vec<u8> {
    let mut r = TestRng::seeded(seed ^ (u64::from(from) << 40) ^ u64::from(k));
    let len = match r.below(4) {
        0 => r.below(8) as usize,
        1 => 4 + r.below(100) as usize,
        _ => 4 + r.below(700) as usize,
    };
    let mut v: Vec<u8> = (0..len).map(|_| r.next_u64() as u8).collect();
    if len >= 4 {
        v[..4].copy_from_slice(&k.to_le_bytes());
    }
    v
}

/// One rxd engine on the simulated network (its address is its node number, one byte).
struct Node {
    eng: Engine,
    /// Messages received from each node, in arrival order.
    got: Vec<Vec<Vec<u8>>>,
    sent: Vec<u64>,
    failed: Vec<(u64, Failure)>,
    lost: Vec<(PeerId, Failure)>,
    /// Messages being received piece by piece (streaming delivery), by sender.
    partial: Vec<Option<Vec<u8>>>,
    /// Deliver with `handle_packet_streaming` (and reassemble here) instead of
    /// `handle_packet`.
    streaming: bool,
    /// Streaming delivery refuses every first piece before this time (a receiver
    /// with no room: not ready).
    refuse_until: u64,
}

impl SimNode for Node {
    type Packet = Vec<u8>;

    fn transmit(&mut self, now: Nanos, out: &mut dyn FnMut(NodeId, Vec<u8>) -> bool) {
        self.eng.poll_transmit(now, usize::MAX, |_, a, b| {
            out(usize::from(a[0]), b.to_vec())
        });
        while let Some(ev) = self.eng.poll_event() {
            match ev {
                Event::Message { peer, data } => {
                    let from = self.eng.peer_addr(peer)[0] as usize;
                    self.got[from].push(data);
                }
                Event::Sent { token } => self.sent.push(token),
                Event::Failed { token, why } => self.failed.push((token, why)),
                Event::PeerLost { peer, why } => {
                    self.lost.push((peer, why));
                    let from = self.eng.peer_addr(peer)[0] as usize;
                    self.partial[from] = None;
                }
                Event::PeerReclaimed { .. } => {}
            }
        }
    }

    fn deliver(&mut self, now: Nanos, src: NodeId, b: Vec<u8>) {
        let src = [src as u8];
        if !self.streaming {
            self.eng.handle_packet(&src, &b, now);
            return;
        }
        let Node {
            eng,
            got,
            partial,
            refuse_until,
            ..
        } = self;
        eng.handle_packet_streaming(&src, &b, now, &mut |seg: Seg<'_>| {
            let from = seg.addr[0] as usize;
            if seg.first && now < *refuse_until {
                return false;
            }
            if seg.first {
                partial[from] = Some(Vec::with_capacity(seg.total));
            }
            let v = partial[from].as_mut().expect("a first piece came");
            assert_eq!(seg.offset, v.len(), "pieces are contiguous");
            v.extend_from_slice(seg.data);
            assert!(v.len() <= seg.total);
            if seg.last {
                assert_eq!(v.len(), seg.total);
                got[from].push(partial[from].take().unwrap_or_default());
            }
            true
        });
    }

    fn next_timeout(&self) -> Option<Nanos> {
        self.eng.poll_timeout()
    }

    fn timeout(&mut self, now: Nanos) {
        self.eng.handle_timeout(now);
    }
}

type Sim = simnet::Sim<Node>;

/// `n` rxd nodes on network `net`, engines and network seeded from `seed`.
fn new_sim(n: usize, seed: u64, net: Mode, cfg: Config) -> Sim {
    let nodes = (0..n)
        .map(|i| Node {
            eng: Engine::with_cookie_key(
                cfg,
                (seed as u32) ^ (i as u32 * 7919),
                key(seed, i as u8),
            ),
            got: vec![Vec::new(); 16],
            sent: Vec::new(),
            failed: Vec::new(),
            lost: Vec::new(),
            partial: vec![None; 16],
            streaming: false,
            refuse_until: 0,
        })
        .collect();
    Sim::new(nodes, net, seed)
}

/// Node `from` sends `data` to node `to` now, reported under `token`.
fn send(sim: &mut Sim, from: usize, to: u8, token: u64, data: &[u8]) {
    let now = sim.now;
    let e = &mut sim.nodes[from].eng;
    let p = e.peer_for_addr(&[to]);
    e.send(p, token, data, now).expect("send");
}

/// Every node delivers with `handle_packet_streaming`.
fn set_streaming(sim: &mut Sim) {
    for n in &mut sim.nodes {
        n.streaming = true;
    }
}

/// Nodes 0 and 1 exchange `n` messages each way (and node 2 sends to node 1 when `three`),
/// interleaving sends with the run; everything arrives exactly once and in order.
fn exchange(seed: u64, n: u32, three: bool, cfg: Config) -> u64 {
    exchange_with(seed, n, three, cfg, false)
}

fn exchange_with(seed: u64, n: u32, three: bool, cfg: Config, streaming: bool) -> u64 {
    let mut sim = new_sim(if three { 3 } else { 2 }, seed, NET, cfg);
    if streaming {
        set_streaming(&mut sim);
    }
    let senders: Vec<(usize, u8)> = if three {
        vec![(0, 1), (1, 0), (2, 1)]
    } else {
        vec![(0, 1), (1, 0)]
    };
    let mut rng = TestRng::seeded(seed.wrapping_mul(31));
    let mut next = vec![0u32; senders.len()];
    while next.iter().any(|&k| k < n) {
        let s = rng.below(senders.len() as u64) as usize;
        if next[s] < n {
            let (from, to) = senders[s];
            let k = next[s];
            let data = payload(seed, from as u8, k);
            send(
                &mut sim,
                from,
                to,
                (u64::from(to) << 32) | u64::from(k),
                &data,
            );
            next[s] += 1;
        }
        let step = sim.now + rng.below(40_000);
        sim.run(step);
    }
    sim.run(u64::MAX);
    for &(from, to) in &senders {
        let got = &sim.nodes[to as usize].got[from];
        assert_eq!(got.len(), n as usize, "seed {seed}: {from}->{to} count");
        for (k, m) in got.iter().enumerate() {
            assert_eq!(
                m,
                &payload(seed, from as u8, k as u32),
                "seed {seed}: {from}->{to} message {k} (lost, duplicated or out of order)"
            );
        }
        let mut sent = sim.nodes[from].sent.clone();
        sent.retain(|t| (t >> 32) as u8 == to);
        let mut want: Vec<u64> = (0..n)
            .map(|k| (u64::from(to) << 32) | u64::from(k))
            .collect();
        sent.sort_unstable();
        want.sort_unstable();
        assert_eq!(sent, want, "seed {seed}: every send reported once");
    }
    for nd in &sim.nodes {
        assert!(
            nd.failed.is_empty(),
            "seed {seed}: failures {:?}",
            nd.failed
        );
        assert!(nd.eng.is_idle() || nd.eng.stats().sent > 0);
    }
    sim.nodes.iter().map(|n| n.eng.stats().retransmits).sum()
}

/// The virtual time within which a peer that answers nothing is lost: the tries back
/// off as rto × 2^(k-1), capped at rto_max, retry_limit of them.
fn lost_within(c: &Config) -> u64 {
    (1..=c.retry_limit)
        .map(|k| (c.rto << (k - 1).min(30)).min(c.rto_max))
        .sum()
}

fn seeds() -> u64 {
    ofi_testkit::env_count("RXD_SIM_SEEDS", 300)
}

#[test]
fn lossy_network_delivers_exactly_once_in_order_over_many_seeds() {
    let mut retransmits = 0;
    for seed in 0..seeds() {
        retransmits += exchange(seed, 40, false, cfg());
    }
    // The network does lose packets: recovery was exercised.
    assert!(retransmits > 0);
}

#[test]
fn streaming_delivery_gives_contiguous_pieces_exactly_once_in_order() {
    for seed in 0..seeds() / 3 {
        exchange_with(5000 + seed, 30, seed % 2 == 0, cfg(), true);
    }
}

#[test]
fn three_nodes_and_sequence_wrap() {
    for seed in 0..seeds() / 3 {
        let c = Config {
            initial_seq: u32::MAX - 40,
            ..cfg()
        };
        exchange(1000 + seed, 30, true, c);
    }
}

#[test]
fn large_messages_are_segmented_and_reassembled() {
    for seed in 0..20 {
        let mut sim = new_sim(2, seed, NET, cfg());
        let msgs: Vec<Vec<u8>> = (0..5u32)
            .map(|k| {
                let mut r = TestRng::seeded(seed * 100 + u64::from(k));
                (0..(5000 + r.below(20000)))
                    .map(|_| r.next_u64() as u8)
                    .collect()
            })
            .collect();
        for (k, m) in msgs.iter().enumerate() {
            send(&mut sim, 0, 1, k as u64, m);
        }
        sim.run(u64::MAX);
        assert_eq!(sim.nodes[1].got[0], msgs, "seed {seed}");
        assert_eq!(sim.nodes[0].sent, vec![0, 1, 2, 3, 4]);
    }
}

/// A core that refuses packets now and then (a full socket buffer: `EAGAIN`): the
/// refused packets go later and everything arrives. A refused new packet must not be
/// counted in the bytes in flight (once per refusal, never released): the count would
/// grow past `max_inflight` with nothing in flight, and the connection would stall for
/// good with no timer armed (the `fi_bw -p "unixdgram;ofi_rxd"` stall at 4 KiB).
#[test]
fn refused_transmissions_go_later_without_stalling() {
    let Mode::Datagram {
        latency, jitter, ..
    } = NET
    else {
        unreachable!("NET is a datagram network")
    };
    let lossless = Mode::Datagram {
        loss_pct: 0,
        dup_pct: 0,
        latency,
        jitter,
    };
    for (seed, net) in (0..seeds() / 3).flat_map(|s| [(7000 + s, lossless), (8000 + s, NET)]) {
        let mut sim = new_sim(2, seed, net, cfg());
        sim.refuse_pct = 30;
        let msgs: Vec<Vec<u8>> = (0..60u32).map(|k| payload(seed, 0, k)).collect();
        for (k, m) in msgs.iter().enumerate() {
            send(&mut sim, 0, 1, k as u64, m);
            send(&mut sim, 1, 0, 100 + k as u64, m);
        }
        sim.run(u64::MAX);
        assert_eq!(
            sim.nodes[1].got[0].len(),
            msgs.len(),
            "seed {seed}: 0->1 stalled"
        );
        assert_eq!(
            sim.nodes[0].got[1].len(),
            msgs.len(),
            "seed {seed}: 1->0 stalled"
        );
        assert_eq!(sim.nodes[1].got[0], msgs, "seed {seed}");
        assert_eq!(sim.nodes[0].got[1], msgs, "seed {seed}");
        for (i, nd) in sim.nodes.iter().enumerate() {
            assert!(
                nd.failed.is_empty(),
                "seed {seed}: failures {:?}",
                nd.failed
            );
            assert_eq!(
                nd.sent.len(),
                msgs.len(),
                "seed {seed}: node {i} sends reported"
            );
            assert!(nd.eng.is_idle(), "seed {seed}: node {i} not idle");
        }
    }
}

#[test]
fn runs_are_deterministic() {
    let a = exchange(77, 30, false, cfg());
    let b = exchange(77, 30, false, cfg());
    assert_eq!(a, b);
}

#[test]
fn silent_peer_is_lost_in_bounded_virtual_time() {
    let c = cfg();
    let bound = lost_within(&c);
    for seed in 0..50 {
        let mut sim = new_sim(2, seed, NET, c);
        sim.set_silent(1, true);
        send(&mut sim, 0, 1, 10, b"hello");
        send(&mut sim, 0, 1, 11, &[7u8; 900]);
        sim.run(u64::MAX);
        let n = &sim.nodes[0];
        assert_eq!(n.failed, vec![(10, Failure::Lost), (11, Failure::Lost)]);
        assert_eq!(n.lost.len(), 1);
        assert!(sim.now <= bound + 1, "lost at {} > bound {bound}", sim.now);
        assert!(sim.now >= c.rto, "lost too early");
    }
}

#[test]
fn peer_going_silent_mid_stream_fails_its_operations() {
    for seed in 0..50 {
        let mut sim = new_sim(2, seed, NET, cfg());
        for k in 0..10u64 {
            send(&mut sim, 0, 1, k, &[k as u8; 300]);
        }
        sim.run(200_000);
        sim.set_silent(1, true);
        for k in 10..20u64 {
            send(&mut sim, 0, 1, k, &[k as u8; 300]);
        }
        sim.run(u64::MAX);
        let n = &sim.nodes[0];
        // Every token reported exactly once, as sent or as failed.
        let mut all: Vec<u64> = n.sent.clone();
        all.extend(n.failed.iter().map(|f| f.0));
        all.sort_unstable();
        assert_eq!(all, (0..20).collect::<Vec<_>>(), "seed {seed}");
        assert!(n.failed.iter().all(|f| f.1 == Failure::Lost));
        assert!(n.failed.iter().any(|f| f.0 >= 10));
        // What was delivered is a prefix, in order, without duplicates.
        let got = &sim.nodes[1].got[0];
        for (k, m) in got.iter().enumerate() {
            assert_eq!(m, &vec![k as u8; 300]);
        }
        // Late packets of the lost connection are ignored; a new send reconnects.
        sim.set_silent(1, false);
        send(&mut sim, 0, 1, 99, b"again");
        sim.run(u64::MAX);
        assert!(sim.nodes[0].sent.contains(&99), "seed {seed}: reconnect");
        assert_eq!(
            sim.nodes[1].got[0].last().map(Vec::as_slice),
            Some(&b"again"[..])
        );
    }
}

/// A receiver that refuses new messages (not ready: no room for them) for far longer
/// than it takes to lose a silent peer does not lose its sender: the sender waits,
/// offering the refused packet again at a bounded pace, and once the receiver takes
/// messages again every one arrives exactly once, in order, and every send completes.
/// On the old engine (no refusal) the sink could not say no.
#[test]
fn a_receiver_that_is_not_ready_holds_its_sender_without_losing_it() {
    let c = Config {
        retry_limit: 10,
        ..cfg()
    };
    let refuse = 40 * lost_within(&c);
    for seed in 0..30 {
        let mut sim = new_sim(2, 900 + seed, NET, c);
        set_streaming(&mut sim);
        sim.nodes[1].refuse_until = refuse;
        let msgs: Vec<Vec<u8>> = (0..40).map(|k| payload(seed, 0, k)).collect();
        for (k, m) in msgs.iter().enumerate() {
            send(&mut sim, 0, 1, k as u64, m);
        }
        sim.run(refuse - 1);
        let (tx, rx) = (&sim.nodes[0], &sim.nodes[1]);
        assert!(
            tx.failed.is_empty() && tx.lost.is_empty(),
            "seed {seed}: sender gave up"
        );
        assert!(
            rx.got[0].is_empty(),
            "seed {seed}: a refused message arrived"
        );
        assert!(
            tx.sent.is_empty(),
            "seed {seed}: a refused message was acknowledged"
        );
        assert!(rx.eng.stats().not_ready > 0 && tx.eng.stats().peer_not_ready > 0);
        // The refused packet is offered about every 2^RNR_TRIES rto, not every rto.
        let paced = refuse / (c.rto << 3);
        let r = tx.eng.stats().retransmits;
        assert!(
            r <= paced + 200,
            "seed {seed}: {r} retransmissions (pace {paced})"
        );
        sim.run(u64::MAX);
        let (tx, rx) = (&sim.nodes[0], &sim.nodes[1]);
        assert_eq!(
            rx.got[0], msgs,
            "seed {seed}: lost, duplicated or out of order"
        );
        let mut sent = tx.sent.clone();
        sent.sort_unstable();
        assert_eq!(sent, (0..40).collect::<Vec<u64>>(), "seed {seed}");
        assert!(tx.failed.is_empty(), "seed {seed}: {:?}", tx.failed);
    }
}

/// A receiver that refuses and then goes silent is still lost in bounded time: waiting
/// on a peer that is not ready is not waiting for ever on a dead one.
#[test]
fn a_receiver_that_refuses_and_then_dies_is_lost() {
    let c = cfg();
    let lost_within = lost_within(&c);
    for seed in 0..30 {
        let mut sim = new_sim(2, 700 + seed, NET, c);
        set_streaming(&mut sim);
        sim.nodes[1].refuse_until = u64::MAX;
        send(&mut sim, 0, 1, 1, &payload(seed, 0, 1));
        send(&mut sim, 0, 1, 2, &payload(seed, 0, 2));
        sim.run(5 * lost_within);
        assert!(
            sim.nodes[0].failed.is_empty(),
            "seed {seed}: lost while refused"
        );
        let died = sim.now;
        sim.set_silent(1, true);
        sim.run(u64::MAX);
        let n = &sim.nodes[0];
        assert_eq!(
            n.failed,
            vec![(1, Failure::Lost), (2, Failure::Lost)],
            "seed {seed}"
        );
        assert!(
            // (plus the wait in progress when it went silent, at most rto_max)
            sim.now <= died + lost_within + c.rto_max,
            "seed {seed}: lost only at {} (silent from {died}, bound {lost_within})",
            sim.now
        );
    }
}

#[test]
fn restarted_peer_resets_the_connection() {
    let mut sim = new_sim(2, 5, NET, cfg());
    send(&mut sim, 0, 1, 1, b"one");
    sim.run(u64::MAX);
    assert_eq!(sim.nodes[1].got[0], vec![b"one".to_vec()]);
    // Node 0 restarts: a new engine at the same address.
    sim.nodes[0].eng = Engine::new(cfg(), 0xabcd);
    send(&mut sim, 0, 1, 2, b"two");
    sim.run(u64::MAX);
    assert_eq!(sim.nodes[1].got[0], vec![b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(sim.nodes[0].sent, vec![1, 2]);
    // And node 1 can still reach it.
    send(&mut sim, 1, 0, 3, b"three");
    sim.run(u64::MAX);
    assert_eq!(sim.nodes[0].got[1], vec![b"three".to_vec()]);
}

#[test]
fn garbage_packets_are_dropped() {
    let mut e = Engine::new(cfg(), 1);
    let mut r = TestRng::seeded(3);
    for len in 0..200usize {
        let mut b: Vec<u8> = (0..len).map(|_| r.next_u64() as u8).collect();
        if len > 3 {
            b[0] = ofi_util_rxd::proto::MAGIC;
            b[1] = ofi_util_rxd::proto::VERSION;
            b[2] = (len % 5) as u8;
            b[3] &= 7;
        }
        e.handle_packet(&[1], &b, len as u64);
    }
    assert!(e.poll_event().is_none());
    assert!(e.stats().dropped > 0);
}

#[test]
fn mutated_packets_never_panic_and_tokens_stay_single() {
    // Record real traffic, then replay it to fresh engines with random bytes flipped,
    // truncated or repeated (the cargo-fuzz target in fuzz/ does the same with
    // arbitrary input).
    let mut sim = new_sim(2, 11, NET, cfg());
    sim.tap = Some(Vec::new());
    for k in 0..20u64 {
        send(&mut sim, 0, 1, k, &payload(11, 0, k as u32));
        send(&mut sim, 1, 0, 100 + k, &payload(11, 1, k as u32));
    }
    sim.run(u64::MAX);
    let trace = sim.tap.take().unwrap_or_default();
    assert!(trace.len() > 20);
    let mut r = TestRng::seeded(99);
    for round in 0..200u64 {
        // Node 1's key: the recorded CONNECTs carry cookies it made.
        let mut e = Engine::with_cookie_key(cfg(), round as u32, key(11, 1));
        let p = e.peer_for_addr(&[0]);
        e.send(p, 7, &[5u8; 700], 0).unwrap();
        let mut now = 0;
        for (_, src, b) in trace.iter().filter(|t| t.0 == 1) {
            let mut b = b.clone();
            match r.below(4) {
                0 if !b.is_empty() => {
                    let i = r.below(b.len() as u64) as usize;
                    b[i] ^= 1 << r.below(8);
                }
                1 => b.truncate(r.below(b.len() as u64 + 1) as usize),
                2 => b.extend((0..r.below(40)).map(|_| r.next_u64() as u8)),
                _ => {}
            }
            now += r.below(3_000_000);
            e.handle_packet(&[*src as u8], &b, now);
            e.handle_timeout(now);
            e.poll_transmit(now, 64, |_, _, _| true);
        }
        let mut reported = 0;
        while let Some(ev) = e.poll_event() {
            if let Event::Sent { token } | Event::Failed { token, .. } = ev {
                assert_eq!(token, 7);
                reported += 1;
            }
        }
        assert!(
            reported <= 1,
            "round {round}: token reported {reported} times"
        );
    }
}
