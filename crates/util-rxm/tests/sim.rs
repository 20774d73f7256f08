//! rxm's sans-IO protocol engine on the shared simulated network (`ofi_testkit::simnet`
//! in stream mode: connections reliable and in order, which can break) with a virtual
//! clock.
//!
//! The engine names bytes instead of owning them; the test's driver ([`Node`]) owns
//! them: each send's message as a `Vec<u8>` it resolves [`Transmit`] handles to, and
//! each message being received, assembled where [`Arrival`] says. It serves the reads
//! of its rendezvous sends while the engine says the peer may read them.
//!
//! The big run: 10^4 messages of mixed sizes (eager, segmented, rendezvous) among 8
//! peers, with connection storms (many links reset at once), credit exhaustion
//! (receivers that take messages in late, a grant of 4) and one peer killed while a
//! rendezvous read of its buffer is in flight. Every message is delivered exactly once
//! and in order, or its send completes in error (then it arrived at most once); the
//! engines end idle; it spans more than a second of virtual time. Several seeds.
//!
//! Connections are made the way the endpoint makes them: by rxm's connection manager
//! ([`ofi_util_rxm::conn::Manager`]: connect on first use, handshake time-outs,
//! retries with back-off, simultaneous connects resolved by address, a restarted peer
//! replacing its old connection), on the virtual clock.
//!
//! `RXM_SIM_SEEDS` sets how many seeds (default 3).

use std::collections::{BTreeMap, VecDeque};

use ofi_core::Errno;
use ofi_testkit::simnet::{Mode, Nanos, NodeId, Sim, SimNode};
use ofi_testkit::TestRng;
use ofi_util_rxm::conn::{self, Action, Incoming, Manager};
use ofi_util_rxm::engine::{
    Arrival, Config, CreditToken, Engine, Event, MsgMeta, OpId, PeerId, ReadId, Transmit,
};
use ofi_util_rxm::proto::{Hello, Kind, Reason, Rts, RTS_IOVS, VERSION};

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

/// A handshake of `kind` from the endpoint `instance`, granting `grant` credits.
fn hello(kind: Kind, reason: Reason, grant: u32, instance: u64) -> Vec<u8> {
    Hello {
        kind,
        version: VERSION,
        reason,
        buffer_size: 1024,
        credits: grant,
        sar_limit: 8192,
        instance,
        rma_event: false,
        addr: Vec::new(),
    }
    .encode()
}

/// A received message as the test saw it.
#[derive(Debug)]
struct Got {
    from: PeerId,
    tag: u64,
    tagged: bool,
    cq_data: Option<u64>,
    data: Vec<u8>,
    arrival: u64,
}

/// A message being received: where its bytes are assembled.
struct Assembling {
    got: Got,
    credit: CreditToken,
}

impl Assembling {
    /// The message from `from` whose first packet said `meta` and brought `data`.
    fn new(from: PeerId, meta: MsgMeta, arrival: u64, credit: CreditToken, data: Vec<u8>) -> Self {
        let got = Got {
            from,
            tag: meta.tag.unwrap_or(0),
            tagged: meta.tag.is_some(),
            cq_data: meta.data,
            data,
            arrival,
        };
        Assembling { got, credit }
    }
}

/// The bytes of the engine's packet `t` to `peer`, resolved from the sends' buffers
/// `bufs` (the driver's side of the handle).
fn packet_bytes(bufs: &BTreeMap<OpId, Vec<u8>>, t: Transmit) -> Vec<u8> {
    match t {
        Transmit::Control(h) => h.bytes().to_vec(),
        Transmit::Data {
            hdr,
            op,
            offset,
            len,
        } => {
            let mut b = hdr.bytes().to_vec();
            b.extend_from_slice(&bufs[&op][offset..offset + len]);
            b
        }
        Transmit::Rts { hdr, op, len } => {
            // The "registration": address = the operation, key = its length.
            let mut iov = [(0, 0, 0); RTS_IOVS];
            iov[0] = (op.0, len as u64, len as u64);
            let mut b = hdr.bytes().to_vec();
            Rts {
                id: op.0,
                iov,
                n: 1,
            }
            .encode(&mut b);
            b
        }
        Transmit::Forward { .. } => panic!("the simulation forwards nothing"),
    }
}

/// A driver that owns its messages' bytes.
#[derive(Default)]
struct Driver {
    /// Sends' bytes, until the engine is done with them.
    bufs: BTreeMap<OpId, Vec<u8>>,
    /// Messages being received by segments, per peer.
    open: BTreeMap<PeerId, Assembling>,
    /// Rendezvous messages being read.
    reads: BTreeMap<ReadId, (usize, Assembling)>,
    /// Reads to ask of peers: (peer, read, remote buffer).
    read_q: VecDeque<(PeerId, ReadId, (u64, u64, u64))>,
    /// Whole messages, with their credits.
    done: Vec<(Got, CreditToken)>,
}

impl Driver {
    fn send(&mut self, eng: &mut Engine, peer: PeerId, op: OpId, meta: MsgMeta, data: Vec<u8>) {
        eng.send_msg(peer, op, meta, data.len()).expect("send");
        self.bufs.insert(op, data);
    }

    /// Place what `eng.handle_packet` brought.
    fn arrived(&mut self, peer: PeerId, a: Arrival<'_>) {
        match a {
            Arrival::Nothing => {}
            Arrival::First {
                meta,
                total,
                payload,
                done,
                arrival,
                credit,
            } => {
                let mut data = Vec::with_capacity(total);
                data.extend_from_slice(payload);
                let m = Assembling::new(peer, meta, arrival, credit, data);
                if done {
                    self.done.push((m.got, m.credit));
                } else {
                    self.open.insert(peer, m);
                }
            }
            Arrival::Segment {
                offset,
                payload,
                done,
            } => {
                let m = self.open.get_mut(&peer).expect("an open message");
                assert_eq!(m.got.data.len(), offset, "segments in order");
                m.got.data.extend_from_slice(payload);
                if done {
                    let m = self.open.remove(&peer).expect("open");
                    self.done.push((m.got, m.credit));
                }
            }
            Arrival::Rts {
                meta,
                total,
                rts,
                read,
                arrival,
                credit,
            } => {
                let rts = rts.get().expect("the engine checked it");
                assert_eq!(rts.n, 1, "the simulation's sends name one buffer");
                let m = Assembling::new(peer, meta, arrival, credit, Vec::new());
                self.reads.insert(read, (total, m));
                self.read_q.push_back((peer, read, rts.iov[0]));
            }
        }
    }

    /// Serve `peer`'s read of `remote` (what the core's RMA does at the target): the
    /// bytes of a rendezvous send the engine says the peer may read.
    fn serve_read(
        &self,
        eng: &Engine,
        peer: PeerId,
        remote: (u64, u64, u64),
    ) -> Result<Vec<u8>, Errno> {
        let (addr, len, key) = remote;
        let op = OpId(addr);
        match self.bufs.get(&op) {
            Some(b) if eng.is_readable(peer, op) && b.len() as u64 == len && key == len => {
                Ok(b.clone())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// The read `id` answered: the message is whole, or failed (its credit goes back at
    /// once). Reads already failed by a broken connection are ignored.
    fn read_done(
        &mut self,
        eng: &mut Engine,
        id: ReadId,
        result: Result<Vec<u8>, Errno>,
    ) -> Option<(PeerId, u64)> {
        let (total, mut m) = self.reads.remove(&id)?;
        let result = result.and_then(|d| {
            if d.len() == total {
                Ok(d)
            } else {
                Err(Errno::EIO)
            }
        });
        eng.handle_read_done(id, result.as_ref().map(|_| ()).map_err(|e| *e));
        match result {
            Ok(d) => {
                m.got.data = d;
                self.done.push((m.got, m.credit));
                None
            }
            Err(_) => {
                eng.consumed(m.credit);
                Some((m.got.from, m.got.tag))
            }
        }
    }

    /// An engine event: a send's bytes are no longer needed; a failed reception is
    /// forgotten. What the event says is returned to the caller too.
    fn event(&mut self, ev: &Event) {
        match ev {
            Event::Sent { op } | Event::Failed { op, .. } => {
                self.bufs.remove(op);
            }
            Event::RecvFailed { peer, read, .. } => match read {
                Some(r) => {
                    self.reads.remove(r);
                }
                None => {
                    self.open.remove(peer);
                }
            },
            Event::ProtocolError { .. } | Event::RemoteAccess { .. } => {}
        }
    }
}

struct Node {
    /// This node's id (its address, for simultaneous connects).
    me: NodeId,
    /// This incarnation of the node (a restarted node has a new one).
    instance: u64,
    eng: Engine,
    /// When to connect, time-outs and retries: the endpoint's connection manager.
    mgr: Manager,
    drv: Driver,
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
    /// A fresh node `me` (incarnation `instance`).
    fn new(me: NodeId, instance: u64, seed: u64) -> Node {
        Node {
            me,
            instance,
            eng: Engine::new(cfg()),
            mgr: Manager::new(conn_cfg()),
            drv: Driver::default(),
            outbox: VecDeque::new(),
            got: Vec::new(),
            sent: Vec::new(),
            failed: Vec::new(),
            recv_failed: Vec::new(),
            protocol_errors: 0,
            backlog: VecDeque::new(),
            rng: TestRng::seeded(seed ^ (me as u64 + 1) << 48 ^ instance),
            consume_delay: 400_000,
        }
    }

    /// Ask the manager for connections the engine waits for, and carry out what it
    /// decides (as the endpoint's `run_actions` does).
    fn run_connections(&mut self, now: Nanos) {
        // The manager's verdicts first (a peer given up on fails its waiting sends, so
        // it wants no new connection), then new wants.
        self.carry_out_actions();
        for p in 0..NODES {
            if p != self.me && self.eng.wants_connection(PeerId(p as u32)) {
                self.mgr.want(PeerId(p as u32), now);
            }
        }
        self.carry_out_actions();
    }

    /// What the manager decided: handshakes to send, sends to fail.
    fn carry_out_actions(&mut self) {
        while let Some(a) = self.mgr.poll_action() {
            match a {
                Action::Connect(p) => {
                    let h = hello(Kind::Connect, Reason::None, self.eng.grant(), self.instance);
                    self.outbox.push_back((p.index(), Pkt::Cm(h)));
                }
                // An abandoned attempt: its answer, if one comes, finds the manager
                // elsewhere (the simulated link is the connection).
                Action::Abort(_) | Action::AbortAccept(_) => {}
                Action::Fail(p, e) => self.eng.fail_waiting(p, e),
            }
        }
    }

    /// A handshake from `src` arrived.
    fn handshake(&mut self, now: Nanos, src: NodeId, h: Hello) {
        let peer = PeerId(src as u32);
        match h.kind {
            Kind::Connect => {
                let wins = conn::self_wins(&[self.me as u8], &[src as u8]);
                match self.mgr.on_incoming(peer, h.instance, wins, now) {
                    d @ (Incoming::Accept | Incoming::Replace) => {
                        if d == Incoming::Replace {
                            // A restarted peer: what was in flight on the old
                            // connection fails; what is queued goes on the new one.
                            self.eng.reset(peer, Errno::ECONNRESET, true);
                        }
                        self.eng.handle_conn_up(peer, h.credits);
                        self.mgr.on_connected(peer, None, now);
                        let a = hello(Kind::Accept, Reason::None, self.eng.grant(), self.instance);
                        self.outbox.push_back((src, Pkt::Cm(a)));
                    }
                    Incoming::RejectAlready => {
                        let r = hello(Kind::Reject, Reason::Already, 0, self.instance);
                        self.outbox.push_back((src, Pkt::Cm(r)));
                    }
                }
            }
            Kind::Accept => {
                self.mgr.on_connected(peer, Some(h.instance), now);
                self.eng.handle_conn_up(peer, h.credits);
            }
            Kind::Reject => self
                .mgr
                .on_refused(peer, Errno::ECONNREFUSED, h.reason, now),
        }
        self.run_connections(now);
    }

    fn drain_events(&mut self, now: Nanos) {
        for (g, credit) in self.drv.done.drain(..) {
            self.got.push(g);
            let due = now + self.rng.below(self.consume_delay + 1);
            // Taken in in order (a FIFO of receives).
            let due = due.max(self.backlog.back().map_or(0, |b| b.0));
            self.backlog.push_back((due, credit));
        }
        while let Some(ev) = self.eng.poll_event() {
            self.drv.event(&ev);
            match ev {
                Event::Sent { op } => self.sent.push(op),
                Event::Failed { op, err } => self.failed.push((op, err)),
                Event::RecvFailed { peer, tag, .. } => self.recv_failed.push((peer, tag)),
                Event::ProtocolError { .. } => self.protocol_errors += 1,
                Event::RemoteAccess { .. } => {}
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
        self.run_connections(now);
        while let Some((peer, id, remote)) = self.drv.read_q.pop_front() {
            self.outbox
                .push_back((peer.0 as NodeId, Pkt::ReadReq { id: id.0, remote }));
        }
        while let Some((p, t)) = self.eng.poll_transmit(now) {
            let b = packet_bytes(&self.drv.bufs, t);
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
                self.handshake(now, src, h);
            }
            Pkt::Msg(b) => {
                let a = self.eng.handle_packet(peer, &b);
                self.drv.arrived(peer, a);
            }
            Pkt::ReadReq { id, remote } => {
                let result = self.drv.serve_read(&self.eng, peer, remote);
                self.outbox.push_back((src, Pkt::ReadResp { id, result }));
            }
            Pkt::ReadResp { id, result } => {
                if let Some(f) = self.drv.read_done(&mut self.eng, ReadId(id), result) {
                    self.recv_failed.push(f);
                }
            }
        }
        self.drain_events(now);
    }

    fn next_timeout(&self) -> Option<Nanos> {
        let backlog = self.backlog.front().map(|b| b.0);
        match (self.mgr.poll_timeout(), backlog) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timeout(&mut self, now: Nanos) {
        self.mgr.handle_timeout(now);
        self.run_connections(now);
        self.drain_events(now);
    }

    fn link_down(&mut self, now: Nanos, peer: NodeId) {
        let peer = PeerId(peer as u32);
        self.eng.handle_conn_down(peer);
        self.mgr.on_lost(peer, now);
        self.run_connections(now);
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
    }
}

/// The connection manager's limits on the virtual clock: a handshake unanswered for
/// 5 ms is abandoned, retried once after 200 µs, then its sends fail.
fn conn_cfg() -> conn::Config {
    conn::Config {
        timeout: std::time::Duration::from_millis(5),
        retries: 2,
        backoff: std::time::Duration::from_micros(200),
        backoff_max: std::time::Duration::from_millis(2),
        max_in_flight: 4,
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

/// `nodes` on reliable, in-order links (5 µs, up to 20 µs more), randomness from
/// `seed`.
fn stream_sim(nodes: Vec<Node>, seed: u64) -> Sim<Node> {
    Sim::new(
        nodes,
        Mode::Stream {
            latency: 5_000,
            jitter: 20_000,
        },
        seed,
    )
}

fn run(seed: u64) -> Outcome {
    let mut sim = stream_sim((0..NODES).map(|i| Node::new(i, 1, seed)).collect(), seed);
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
        let n = &mut sim.nodes[from];
        let meta = MsgMeta {
            tag: Some(k),
            data: None,
            dc: true,
        };
        n.drv.send(
            &mut n.eng,
            PeerId(to as u32),
            OpId(k),
            meta,
            payload(seed, k),
        );
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
        assert!(n.drv.bufs.is_empty(), "seed {seed}: node {i} holds bytes");
        assert!(n.drv.reads.is_empty(), "seed {seed}: node {i} awaits reads");
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
    ofi_testkit::env_count("RXM_SIM_SEEDS", 3)
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
    let mut firsts = 0;
    for k in 0..4u64 {
        let mut b = Hdr::new(Op::Eager, F_TAGGED | F_DC, 3, k, 0)
            .bytes()
            .to_vec();
        b.extend_from_slice(b"abc");
        if let Arrival::First { payload, done, .. } = e.handle_packet(peer, &b) {
            assert_eq!((payload, done), (&b"abc"[..], true));
            firsts += 1;
        }
    }
    assert_eq!(firsts, 4);
    let mut b = Hdr::new(Op::Eager, F_TAGGED, 3, 9, 0).bytes().to_vec();
    b.extend_from_slice(b"abc");
    assert!(matches!(e.handle_packet(peer, &b), Arrival::Nothing));
    let evs: Vec<Event> = std::iter::from_fn(|| e.poll_event()).collect();
    assert!(matches!(evs.last(), Some(Event::ProtocolError { .. })));
    assert!(!e.is_up(peer));

    // Random and mutated packets on a fresh connection: never a panic; every op is
    // reported once.
    let mut r = TestRng::seeded(0xbad);
    for round in 0..300u64 {
        let mut e = Engine::new(cfg());
        e.handle_conn_up(peer, 4);
        e.send(peer, OpId(round), 1, r.below(20_000) as usize)
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
            let _ = e.handle_packet(peer, &b);
            if !e.is_up(peer) {
                e.handle_conn_up(peer, 4);
            }
        }
        e.handle_conn_down(peer);
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
    let (pa, pb) = (PeerId(1), PeerId(0));
    let (mut a, mut da) = (Engine::new(cfg()), Driver::default());
    let (mut b, mut db) = (Engine::new(cfg()), Driver::default());
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
        da.send(&mut a, pa, OpId(k as u64), meta, data.clone());
        let mut got = None;
        let mut sent = 0;
        // Drive both by hand (a reliable, in-order link), bounded.
        for _ in 0..100 {
            while let Some((_, t)) = a.poll_transmit(0) {
                let pkt = packet_bytes(&da.bufs, t);
                let arr = b.handle_packet(pb, &pkt);
                db.arrived(pb, arr);
            }
            while let Some((_, id, remote)) = db.read_q.pop_front() {
                let bytes = da.serve_read(&a, pa, remote);
                assert_eq!(db.read_done(&mut b, id, bytes), None, "case {k}");
            }
            while let Some((_, t)) = b.poll_transmit(0) {
                let pkt = packet_bytes(&db.bufs, t);
                let arr = a.handle_packet(pa, &pkt);
                da.arrived(pa, arr);
            }
            for (g, credit) in db.done.drain(..) {
                got = Some((g.tag, g.tagged, g.cq_data, g.data));
                b.consumed(credit);
            }
            while let Some(ev) = a.poll_event() {
                da.event(&ev);
                assert_eq!(ev, Event::Sent { op: OpId(k as u64) }, "case {k}");
                sent += 1;
            }
            if sent > 0 && got.is_some() {
                break;
            }
        }
        assert_eq!(sent, 1, "case {k}: the send completed once");
        assert!(
            da.bufs.is_empty(),
            "case {k}: the driver let go of the bytes"
        );
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

/// The engine's queue for a peer holds forwarded operations (RMA, atomics) in their
/// place among the sends: one behind a send waiting for a credit waits too, and comes
/// out (as `Transmit::Forward`, done for the engine when handed out) right after it.
#[test]
fn forwarded_operations_keep_their_place_behind_sends_waiting_for_credit() {
    use ofi_util_rxm::proto::{Hdr, Op};
    let peer = PeerId(1);
    let mut e = Engine::new(cfg());
    e.handle_conn_up(peer, 1);
    let plain = MsgMeta::default();
    e.send_msg(peer, OpId(1), plain, 10).expect("send");
    e.send_msg(peer, OpId(2), plain, 20).expect("send");
    e.forward(peer, OpId(3)).expect("forward");
    assert_eq!(e.forward(peer, OpId(3)), Err(Errno::EINVAL), "a live id");
    assert!(matches!(
        e.poll_transmit_to(peer),
        Some(Transmit::Data {
            op: OpId(1),
            offset: 0,
            len: 10,
            ..
        })
    ));
    // No credit left: the second send and the operation behind it wait.
    assert_eq!(e.poll_transmit_to(peer), None);
    assert!(!e.has_transmit(peer));
    // The peer hands a credit back.
    let credit = Hdr {
        credits: 1,
        ..Hdr::new(Op::Credit, 0, 0, 0, 0)
    };
    assert!(matches!(
        e.receive(peer, &credit.bytes()),
        Ok(Arrival::Nothing)
    ));
    assert!(matches!(
        e.poll_transmit_to(peer),
        Some(Transmit::Data { op: OpId(2), .. })
    ));
    assert_eq!(
        e.poll_transmit_to(peer),
        Some(Transmit::Forward { op: OpId(3) })
    );
    let evs: Vec<Event> = std::iter::from_fn(|| e.poll_event()).collect();
    assert_eq!(
        evs,
        [1, 2, 3].map(|k| Event::Sent { op: OpId(k) }),
        "done when handed out (no acknowledgement asked)"
    );
    assert_eq!(e.live_ops(), 0);
}

/// `send_now` (the small-message fast path) takes a credit only when nothing waits
/// before it and no acknowledgement is asked; `unsend` gives it back.
#[test]
fn send_now_only_when_the_peer_is_idle() {
    let peer = PeerId(0);
    let mut e = Engine::new(cfg());
    let plain = MsgMeta::default();
    assert_eq!(e.send_now(peer, plain, 8), None, "not connected");
    e.handle_conn_up(peer, 2);
    let h = e.send_now(peer, plain, 8).expect("idle and a credit");
    assert_eq!((h.size, e.credits(peer)), (8, 1));
    e.unsend(peer, &h);
    assert_eq!(e.credits(peer), 2);
    let dc = MsgMeta { dc: true, ..plain };
    assert_eq!(e.send_now(peer, dc, 8), None, "an acknowledgement asked");
    assert_eq!(e.send_now(peer, plain, 5000), None, "not eager");
    e.send_msg(peer, OpId(7), dc, 8).expect("send");
    assert_eq!(e.send_now(peer, plain, 8), None, "a send waits before it");
}

/// A reset that keeps the queue (the peer restarted, a new connection takes over)
/// fails only what was in flight; the queued sends start from their first byte on the
/// next connection, with that connection's credits.
#[test]
fn a_reset_keeping_the_queue_fails_only_what_was_in_flight() {
    let peer = PeerId(2);
    let mut e = Engine::new(cfg());
    e.handle_conn_up(peer, 1);
    e.send(peer, OpId(1), 1, 100).expect("send");
    e.send(peer, OpId(2), 2, 5000).expect("send");
    assert!(matches!(
        e.poll_transmit_to(peer),
        Some(Transmit::Data { op: OpId(1), .. })
    ));
    assert_eq!(e.poll_transmit_to(peer), None, "out of credits");
    e.reset(peer, Errno::ECONNRESET, true);
    assert_eq!(
        e.poll_event(),
        Some(Event::Failed {
            op: OpId(1),
            err: Errno::ECONNRESET
        })
    );
    assert_eq!(e.poll_event(), None, "the queued send stays");
    assert!(e.wants_connection(peer));
    e.handle_conn_up(peer, 4);
    assert!(matches!(
        e.poll_transmit_to(peer),
        Some(Transmit::Data {
            op: OpId(2),
            offset: 0,
            ..
        })
    ));
}

/// A rendezvous message the driver drops unread is answered "done" (the sender lets
/// go of its buffer); a read reported after its connection broke is ignored.
#[test]
fn a_rendezvous_dropped_unread_is_answered_done() {
    let (pa, pb) = (PeerId(1), PeerId(0));
    let (mut a, mut da) = (Engine::new(cfg()), Driver::default());
    let mut b = Engine::new(cfg());
    a.handle_conn_up(pa, 4);
    b.handle_conn_up(pb, 4);
    da.send(&mut a, pa, OpId(9), MsgMeta::default(), vec![5; 20_000]);
    let (_, t) = a.poll_transmit(0).expect("the RTS");
    let pkt = packet_bytes(&da.bufs, t);
    let Arrival::Rts { read, credit, .. } = b.handle_packet(pb, &pkt) else {
        panic!("an RTS");
    };
    b.handle_read_done(read, Ok(()));
    b.consumed(credit);
    let (_, done) = b.poll_transmit(0).expect("done");
    let done = packet_bytes(&BTreeMap::new(), done);
    assert!(matches!(a.handle_packet(pa, &done), Arrival::Nothing));
    assert_eq!(a.poll_event(), Some(Event::Sent { op: OpId(9) }));
    // A second RTS; its connection breaks before the read is reported.
    da.send(&mut a, pa, OpId(10), MsgMeta::default(), vec![6; 20_000]);
    let (_, t) = a.poll_transmit(0).expect("the RTS");
    let pkt = packet_bytes(&da.bufs, t);
    let Arrival::Rts { read, .. } = b.handle_packet(pb, &pkt) else {
        panic!("an RTS");
    };
    b.handle_conn_down(pb);
    assert!(matches!(
        b.poll_event(),
        Some(Event::RecvFailed { read: Some(r), .. }) if r == read
    ));
    b.handle_read_done(read, Ok(()));
    assert!(
        b.poll_transmit(0).is_none(),
        "nothing goes on a broken connection"
    );
}

/// What the restarting peer leaves in flight in [`a_restarted_peer_fails_the_old_connection_once`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    /// A segmented message from the survivor, partly received by the peer.
    SegmentsToIt,
    /// A segmented message from the peer, partly received by the survivor.
    SegmentsFromIt,
    /// The survivor reads the peer's rendezvous buffer.
    SurvivorReads,
    /// The peer reads the survivor's rendezvous buffer.
    PeerReads,
}

const SURVIVOR: usize = 0;
const RESTARTING: usize = 1;

/// Whether `sim` shows `what` in flight (the first packets there, the rest not).
fn in_flight(sim: &Sim<Node>, what: InFlight) -> bool {
    let (s, r) = (&sim.nodes[SURVIVOR], &sim.nodes[RESTARTING]);
    let (ps, pr) = (PeerId(SURVIVOR as u32), PeerId(RESTARTING as u32));
    match what {
        InFlight::SegmentsToIt => r.drv.open.contains_key(&ps),
        InFlight::SegmentsFromIt => s.drv.open.contains_key(&pr),
        InFlight::SurvivorReads => s.eng.reading_from().contains(&pr),
        InFlight::PeerReads => r.eng.reading_from().contains(&ps),
    }
}

/// One restart: `what` is caught in flight, the peer restarts (a new instance) and the
/// old connection either breaks first (`replace` false: the survivor sees it go down)
/// or is replaced by the new incarnation's connection request before the survivor saw
/// anything. The old connection's operation ends in error exactly once at the survivor
/// (a send fails, a reception is reported failed), nothing hangs (both engines end
/// idle, every send reported), and messages both ways on the new connection arrive.
fn restart_case(what: InFlight, replace: bool, seed: u64) {
    let nodes = vec![Node::new(SURVIVOR, 1, seed), Node::new(RESTARTING, 1, seed)];
    let mut sim = stream_sim(nodes, seed);
    let (from, to, len) = match what {
        InFlight::SegmentsToIt => (SURVIVOR, RESTARTING, 7000),
        InFlight::SegmentsFromIt => (RESTARTING, SURVIVOR, 7000),
        InFlight::SurvivorReads => (RESTARTING, SURVIVOR, 20_000),
        InFlight::PeerReads => (SURVIVOR, RESTARTING, 20_000),
    };
    // Messages of the protocol caught in flight (segmented or rendezvous).
    let msg = |k: u64| {
        let mut d = payload(seed, k);
        d.resize(len, k as u8);
        d
    };
    let meta = |k: u64| MsgMeta {
        tag: Some(k),
        data: None,
        dc: true,
    };
    // Send messages one at a time and step the clock finely until one is caught in
    // flight (bounded).
    let mut caught = None;
    'attempts: for k in 0..50u64 {
        let n = &mut sim.nodes[from];
        n.drv
            .send(&mut n.eng, PeerId(to as u32), OpId(k), meta(k), msg(k));
        for _ in 0..2_000 {
            let t = sim.now + 250;
            sim.run_to(t);
            if in_flight(&sim, what) {
                caught = Some(k);
                break 'attempts;
            }
            if sim.nodes[from].sent.contains(&OpId(k)) {
                break;
            }
        }
    }
    let k = caught.unwrap_or_else(|| panic!("{what:?}: never caught in flight"));

    // The restart.
    if !replace {
        sim.break_link(SURVIVOR, RESTARTING);
    }
    sim.nodes[RESTARTING] = Node::new(RESTARTING, 2, seed);
    let (ps, pr) = (PeerId(SURVIVOR as u32), PeerId(RESTARTING as u32));
    // The new incarnation talks first (its connection request replaces the old
    // connection, or finds it gone).
    let n = &mut sim.nodes[RESTARTING];
    n.drv
        .send(&mut n.eng, ps, OpId(1000), meta(1000), payload(seed, 1000));
    sim.run(Nanos::MAX);
    // Then both ways, every protocol, on the new connection.
    for (i, k) in [(SURVIVOR, 2000u64), (RESTARTING, 1001), (SURVIVOR, 2001)] {
        let peer = if i == SURVIVOR { pr } else { ps };
        let n = &mut sim.nodes[i];
        let mut data = payload(seed, k);
        data.resize([10, 7000, 20_000][k as usize % 3], 7);
        n.drv.send(&mut n.eng, peer, OpId(k), meta(k), data);
    }
    sim.run(Nanos::MAX);

    let (s, r) = (&sim.nodes[SURVIVOR], &sim.nodes[RESTARTING]);
    let ctx = format!("{what:?}, replace {replace}, seed {seed}");
    // The old connection's operation: an error, once.
    match what {
        InFlight::SegmentsToIt | InFlight::PeerReads => {
            let fails: Vec<_> = s.failed.iter().filter(|(op, _)| *op == OpId(k)).collect();
            assert_eq!(fails, [&(OpId(k), Errno::ECONNRESET)], "{ctx}");
            assert!(!s.sent.contains(&OpId(k)), "{ctx}: reported sent too");
            assert!(
                r.got.iter().all(|g| g.tag != k),
                "{ctx}: the new peer got it"
            );
        }
        InFlight::SegmentsFromIt | InFlight::SurvivorReads => {
            let fails = s.recv_failed.iter().filter(|f| **f == (pr, k)).count();
            assert_eq!(fails, 1, "{ctx}: {:?}", s.recv_failed);
            assert!(s.got.iter().all(|g| g.tag != k), "{ctx}: delivered too");
        }
    }
    // Nothing hangs: both idle, every send of the survivor reported once.
    for (name, n) in [("survivor", s), ("restarted", r)] {
        assert_eq!(n.protocol_errors, 0, "{ctx}: {name}");
        assert_eq!(n.eng.live_ops(), 0, "{ctx}: {name} not idle");
        assert_eq!(n.eng.reads_in_flight(), 0, "{ctx}: {name} reading");
        assert!(n.drv.bufs.is_empty(), "{ctx}: {name} holds bytes");
        assert!(
            n.drv.reads.is_empty() && n.drv.open.is_empty(),
            "{ctx}: {name}"
        );
    }
    let mut reported: Vec<u64> = s
        .sent
        .iter()
        .chain(s.failed.iter().map(|f| &f.0))
        .map(|o| o.0)
        .collect();
    reported.sort_unstable();
    let mut expect: Vec<u64> = if from == SURVIVOR {
        (0..=k).collect()
    } else {
        Vec::new()
    };
    expect.extend([2000, 2001]);
    assert_eq!(reported, expect, "{ctx}: the survivor's sends, each once");
    // The new connection works both ways.
    assert_eq!(r.sent, [OpId(1000), OpId(1001)], "{ctx}");
    // By arrival (a rendezvous message is whole only after its read).
    let tags = |n: &Node| {
        let mut g: Vec<&Got> = n.got.iter().filter(|g| g.tag >= 1000).collect();
        g.sort_by_key(|g| g.arrival);
        g.iter().map(|g| g.tag).collect::<Vec<_>>()
    };
    assert_eq!(tags(s), [1000, 1001], "{ctx}");
    assert_eq!(tags(r), [2000, 2001], "{ctx}");
    assert!(
        s.sent.contains(&OpId(2000)) && s.sent.contains(&OpId(2001)),
        "{ctx}"
    );
}

/// A peer that restarts while a segmented message or a rendezvous read is in flight on
/// its connection: whether the old connection is seen to break first or the new
/// incarnation's connection request replaces it, the old connection's operation ends in
/// error once, nothing hangs, and the new connection carries messages both ways. (A
/// segmented message from the peer whose last segments are already on the wire when
/// it is replaced still arrives whole: only the broken-link variant loses it.)
#[test]
fn a_restarted_peer_fails_the_old_connection_once() {
    use InFlight::*;
    for seed in 0..4u64 {
        for what in [SegmentsToIt, SegmentsFromIt, SurvivorReads, PeerReads] {
            restart_case(what, false, 0x7e57 + seed);
            if what != SegmentsFromIt {
                restart_case(what, true, 0x7e57 + seed);
            }
        }
    }
}

/// `FI_RMA_EVENT`: an initiator reports each access done to the target (a control
/// packet, no credit); the target's engine reports it as an event of the right kind.
/// A report of no known kind breaks the protocol; nothing goes on a connection that is
/// down.
#[test]
fn remote_access_reports_travel_as_control_packets() {
    let (pa, pb) = (PeerId(1), PeerId(0));
    let mut a = Engine::new(cfg());
    let mut b = Engine::new(cfg());
    a.handle_conn_up(pa, 1);
    b.handle_conn_up(pb, 1);
    a.remote_access_done(pa, false);
    a.remote_access_done(pa, true);
    let mut evs = Vec::new();
    while let Some((_, t)) = a.poll_transmit(0) {
        let pkt = packet_bytes(&BTreeMap::new(), t);
        assert!(matches!(b.handle_packet(pb, &pkt), Arrival::Nothing));
        evs.extend(std::iter::from_fn(|| b.poll_event()));
    }
    assert_eq!(
        evs,
        [
            Event::RemoteAccess {
                peer: pb,
                read: false
            },
            Event::RemoteAccess {
                peer: pb,
                read: true
            }
        ]
    );
    assert_eq!(a.credits(pa), 1, "no credit spent");
    // An unknown kind.
    use ofi_util_rxm::proto::{Hdr, Op};
    let bad = Hdr::new(Op::RemoteAccess, 0, 0, 2, 0);
    assert!(matches!(
        b.handle_packet(pb, &bad.bytes()),
        Arrival::Nothing
    ));
    assert!(matches!(
        b.poll_event(),
        Some(Event::ProtocolError { peer, .. }) if peer == pb
    ));
    assert!(!b.is_up(pb));
    // Down: nothing to send.
    a.handle_conn_down(pa);
    a.remote_access_done(pa, false);
    assert!(a.poll_transmit(0).is_none());
}

/// Connection timing is the connection manager's on the virtual clock too: sends to a
/// peer that never answers wait for the handshake, which times out and is retried
/// after a back-off, then fail with `FI_ETIMEDOUT`, each once, within the manager's
/// bound (2 attempts of 5 ms and one 200 µs back-off); a later send starts over.
#[test]
fn sends_to_a_silent_peer_time_out_through_the_connection_manager() {
    let mut sim = stream_sim(vec![Node::new(0, 1, 9), Node::new(1, 1, 9)], 9);
    sim.set_silent(1, true);
    let meta = MsgMeta {
        tag: Some(0),
        data: None,
        dc: true,
    };
    for k in 0..3u64 {
        let n = &mut sim.nodes[0];
        n.drv
            .send(&mut n.eng, PeerId(1), OpId(k), meta, vec![k as u8; 100]);
    }
    let t0 = sim.now;
    sim.run(Nanos::MAX);
    let n = &sim.nodes[0];
    let want: Vec<(OpId, Errno)> = (0..3).map(|k| (OpId(k), Errno::ETIMEDOUT)).collect();
    assert_eq!(n.failed, want);
    assert!(n.sent.is_empty());
    let took = sim.now - t0;
    assert!(
        (10_000_000..=10_200_000 + 1_000_000).contains(&took),
        "two 5 ms attempts and a back-off: {took} ns"
    );
    assert_eq!(n.eng.live_ops(), 0);
    assert!(n.drv.bufs.is_empty());
    // The peer is heard again: a new send connects and is delivered.
    sim.set_silent(1, false);
    let n = &mut sim.nodes[0];
    n.drv
        .send(&mut n.eng, PeerId(1), OpId(7), meta, vec![7; 100]);
    sim.run(Nanos::MAX);
    assert_eq!(sim.nodes[0].sent, [OpId(7)]);
    assert_eq!(sim.nodes[1].got.len(), 1);
}
