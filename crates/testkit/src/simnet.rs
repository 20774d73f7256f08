//! A simulated network on a virtual clock, for testing sans-IO protocol engines.
//!
//! The harness owns the clock, the packets in flight (an event heap ordered by arrival
//! time) and the network's behaviour; the test owns the engines, each behind the
//! [`SimNode`] trait (transmit what it has, take a packet, report its next timer). One
//! [`Sim::run`] moves packets and timers until nothing is pending or a time passes.
//!
//! Two kinds of network, chosen by [`Mode`]:
//!
//! - [`Mode::Datagram`]: each packet may be lost, duplicated, and delayed by a base
//!   latency plus a random jitter (so packets overtake each other) — a UDP-like network,
//!   for engines that make their own reliability (rxd).
//! - [`Mode::Stream`]: reliable and in order between each pair of nodes (a packet never
//!   arrives before one sent earlier on the same pair), with jitter only between pairs —
//!   connected byte streams (rxm over a MSG provider). A link can break
//!   ([`Sim::break_link`]): what is in flight on it is lost, and both ends are told
//!   ([`SimNode::link_down`]), as a connection reset would.
//!
//! In both modes a node can be killed ([`Sim::kill`]): packets to or from it vanish,
//! it no longer runs, and (stream mode) its peers see their links to it go down. A
//! node can also be silenced ([`Sim::set_silent`]) and heard again: it keeps running
//! but what is sent to it vanishes (a peer that went quiet, for timeout tests).
//!
//! # Invariants
//!
//! - Time only moves forward; a run is a pure function of the seed and the nodes'
//!   behaviour (no wall clock, no threads).
//! - Two packets with the same arrival time arrive in the order they were sent.
//! - [`Sim::run`] takes at most [`Sim::step_limit`] steps and panics past it (a test that
//!   does not settle fails instead of hanging).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::TestRng;

/// A node's index in the simulation.
pub type NodeId = usize;

/// Virtual time, in nanoseconds.
pub type Nanos = u64;

/// How the network treats packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Unreliable datagrams: loss, duplication and reordering.
    Datagram {
        /// Percent of packets lost.
        loss_pct: u64,
        /// Percent of packets delivered twice.
        dup_pct: u64,
        /// Base one-way latency.
        latency: Nanos,
        /// Up to this much more per packet (reordering).
        jitter: Nanos,
    },
    /// Reliable, in order per pair of nodes; links can break.
    Stream {
        /// Base one-way latency.
        latency: Nanos,
        /// Up to this much more per packet (never past a later packet of the same pair).
        jitter: Nanos,
    },
}

/// An engine under test, seen from the network.
pub trait SimNode {
    /// What travels on the wire.
    type Packet: Clone;

    /// Hand every packet the engine wants to send at `now` to `out` (destination,
    /// packet). `out` returns `false` when the network refuses the packet (see
    /// [`Sim::refuse_pct`]): the engine keeps it and should stop for now.
    fn transmit(&mut self, now: Nanos, out: &mut dyn FnMut(NodeId, Self::Packet) -> bool);

    /// A packet from `src` arrived at `now`.
    fn deliver(&mut self, now: Nanos, src: NodeId, pkt: Self::Packet);

    /// When the engine next needs [`SimNode::timeout`] (`None`: no timer).
    fn next_timeout(&self) -> Option<Nanos>;

    /// Time `now` came: run the timers that are due.
    fn timeout(&mut self, now: Nanos);

    /// Stream mode: the link to `peer` broke (a reset, or the peer was killed).
    /// Datagram engines need not care.
    fn link_down(&mut self, _now: Nanos, _peer: NodeId) {}
}

/// A packet in flight: arrival, sequence (ties keep send order), destination, source.
struct InFlight<P> {
    at: Nanos,
    seq: u64,
    dst: NodeId,
    src: NodeId,
    /// The link generation it was sent on (stream mode; a broken link drops it).
    gen: u64,
    pkt: P,
}

impl<P> PartialEq for InFlight<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<P> Eq for InFlight<P> {}
impl<P> PartialOrd for InFlight<P> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for InFlight<P> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Virtual time after which a node whose packet was refused is asked again.
pub const REFUSE_RETRY: Nanos = 5_000;

/// The simulated network and its nodes.
pub struct Sim<N: SimNode> {
    /// The engines, by [`NodeId`].
    pub nodes: Vec<N>,
    /// The current virtual time.
    pub now: Nanos,
    /// The network's behaviour.
    pub mode: Mode,
    /// Percent of packets refused at transmit time (a full socket buffer, `EAGAIN`).
    pub refuse_pct: u64,
    /// Steps one [`Sim::run`] may take before it panics.
    pub step_limit: u64,
    /// Every packet put on the wire (destination, source, packet), when `Some`.
    pub tap: Option<Vec<(NodeId, NodeId, N::Packet)>>,
    rng: TestRng,
    wire: BinaryHeap<Reverse<InFlight<N::Packet>>>,
    seq: u64,
    dead: Vec<bool>,
    silent: Vec<bool>,
    /// Stream mode: per (src, dst) the latest arrival time scheduled and the link's
    /// generation (bumped when it breaks).
    links: BTreeMap<(NodeId, NodeId), (Nanos, u64)>,
}

impl<N: SimNode> Sim<N> {
    /// A network of `nodes` at time 0, its randomness from `seed`.
    pub fn new(nodes: Vec<N>, mode: Mode, seed: u64) -> Sim<N> {
        let n = nodes.len();
        Sim {
            nodes,
            now: 0,
            mode,
            refuse_pct: 0,
            step_limit: 5_000_000,
            tap: None,
            rng: TestRng::seeded(seed),
            wire: BinaryHeap::new(),
            seq: 0,
            dead: vec![false; n],
            silent: vec![false; n],
            links: BTreeMap::new(),
        }
    }

    /// The network's random stream (for decisions a test wants tied to the seed).
    pub fn rng(&mut self) -> &mut TestRng {
        &mut self.rng
    }

    /// Whether node `i` was killed.
    pub fn is_dead(&self, i: NodeId) -> bool {
        self.dead.get(i).copied().unwrap_or(true)
    }

    /// Silence node `i` (`true`: what is sent to it from now on vanishes) or let it be
    /// heard again (`false`). It keeps running either way.
    pub fn set_silent(&mut self, i: NodeId, silent: bool) {
        if let Some(s) = self.silent.get_mut(i) {
            *s = silent;
        }
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.wire.len()
    }

    /// Kill node `i`: it stops running, what it sent and what is sent to it vanishes,
    /// and (stream mode) every other node sees its link to `i` go down.
    pub fn kill(&mut self, i: NodeId) {
        if self.is_dead(i) {
            return;
        }
        self.dead[i] = true;
        self.wire.retain(|Reverse(p)| p.src != i && p.dst != i);
        if matches!(self.mode, Mode::Stream { .. }) {
            for j in 0..self.nodes.len() {
                if j != i && !self.dead[j] {
                    self.bump_link(i, j);
                    let now = self.now;
                    self.nodes[j].link_down(now, i);
                }
            }
        }
    }

    /// Stream mode: break the link between `a` and `b` (a connection reset): what is in
    /// flight between them is lost and both are told. No effect in datagram mode.
    pub fn break_link(&mut self, a: NodeId, b: NodeId) {
        if !matches!(self.mode, Mode::Stream { .. }) || a == b {
            return;
        }
        self.bump_link(a, b);
        self.wire
            .retain(|Reverse(p)| !((p.src == a && p.dst == b) || (p.src == b && p.dst == a)));
        let now = self.now;
        for (x, y) in [(a, b), (b, a)] {
            if !self.is_dead(x) {
                self.nodes[x].link_down(now, y);
            }
        }
    }

    fn bump_link(&mut self, a: NodeId, b: NodeId) {
        for k in [(a, b), (b, a)] {
            let e = self.links.entry(k).or_insert((0, 0));
            e.1 += 1;
        }
    }

    fn link_gen(&self, src: NodeId, dst: NodeId) -> u64 {
        self.links.get(&(src, dst)).map_or(0, |e| e.1)
    }

    /// Put a packet on the wire at the current time, as the network's mode treats it.
    pub fn put(&mut self, src: NodeId, dst: NodeId, pkt: N::Packet) {
        if let Some(t) = self.tap.as_mut() {
            t.push((dst, src, pkt.clone()));
        }
        if self.is_dead(dst) || self.is_dead(src) || self.silent.get(dst) != Some(&false) {
            return;
        }
        match self.mode {
            Mode::Datagram {
                loss_pct,
                dup_pct,
                latency,
                jitter,
            } => {
                if self.rng.chance(loss_pct) {
                    return;
                }
                let copies = if self.rng.chance(dup_pct) { 2 } else { 1 };
                for _ in 0..copies {
                    let at = self.now + latency + self.rng.below(jitter + 1);
                    self.push(at, src, dst, 0, pkt.clone());
                }
            }
            Mode::Stream { latency, jitter } => {
                let at = self.now + latency + self.rng.below(jitter + 1);
                let link = self.links.entry((src, dst)).or_insert((0, 0));
                // In order per pair: never before the pair's previous packet.
                let at = at.max(link.0);
                link.0 = at;
                let gen = link.1;
                self.push(at, src, dst, gen, pkt);
            }
        }
    }

    fn push(&mut self, at: Nanos, src: NodeId, dst: NodeId, gen: u64, pkt: N::Packet) {
        self.seq += 1;
        self.wire.push(Reverse(InFlight {
            at,
            seq: self.seq,
            dst,
            src,
            gen,
            pkt,
        }));
    }

    /// Let every live node transmit what it has at the current time. Returns whether
    /// the network refused a packet.
    pub fn transmit_all(&mut self) -> bool {
        let mut refused = false;
        for i in 0..self.nodes.len() {
            if self.dead[i] {
                continue;
            }
            let mut out: Vec<(NodeId, N::Packet)> = Vec::new();
            let now = self.now;
            let refuse_pct = self.refuse_pct;
            let Sim { nodes, rng, .. } = self;
            nodes[i].transmit(now, &mut |dst, p| {
                if refuse_pct > 0 && rng.chance(refuse_pct) {
                    refused = true;
                    return false;
                }
                out.push((dst, p));
                true
            });
            for (dst, p) in out {
                self.put(i, dst, p);
            }
        }
        refused
    }

    /// [`Sim::run`] to `t`, then the clock stands at `t` (when nothing was pending
    /// before it, time still passes: a test that spaces its own actions out).
    pub fn run_to(&mut self, t: Nanos) {
        self.run(t);
        self.now = self.now.max(t);
    }

    /// Move packets and timers until nothing is pending or the next event lies past
    /// `until` (the clock stays at the last event).
    ///
    /// # Panics
    /// Past [`Sim::step_limit`] steps (the run does not settle).
    pub fn run(&mut self, until: Nanos) {
        let mut steps = 0u64;
        loop {
            steps += 1;
            assert!(
                steps < self.step_limit,
                "simulation did not settle (seed {})",
                self.rng.seed()
            );
            let refused = self.transmit_all();
            let wire_next = self.wire.peek().map_or(Nanos::MAX, |Reverse(p)| p.at);
            let timer_next = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.dead[*i])
                .filter_map(|(_, n)| n.next_timeout())
                .min()
                .unwrap_or(Nanos::MAX);
            let mut next = wire_next.min(timer_next);
            if refused {
                next = next.min(self.now + REFUSE_RETRY);
            }
            if next == Nanos::MAX || next > until {
                break;
            }
            self.now = self.now.max(next);
            while self.wire.peek().is_some_and(|Reverse(p)| p.at <= self.now) {
                let Some(Reverse(p)) = self.wire.pop() else {
                    break;
                };
                let stale = matches!(self.mode, Mode::Stream { .. })
                    && p.gen != self.link_gen(p.src, p.dst);
                if stale || self.is_dead(p.dst) {
                    continue;
                }
                let now = self.now;
                self.nodes[p.dst].deliver(now, p.src, p.pkt);
            }
            let now = self.now;
            for (i, n) in self.nodes.iter_mut().enumerate() {
                if !self.dead[i] {
                    n.timeout(now);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `count` numbered packets to node `to`, records what it receives.
    struct Counter {
        to: NodeId,
        count: u32,
        sent: u32,
        got: Vec<(NodeId, u32)>,
        downs: Vec<NodeId>,
    }

    impl SimNode for Counter {
        type Packet = u32;
        fn transmit(&mut self, _now: Nanos, out: &mut dyn FnMut(NodeId, u32) -> bool) {
            while self.sent < self.count {
                if !out(self.to, self.sent) {
                    return;
                }
                self.sent += 1;
            }
        }
        fn deliver(&mut self, _now: Nanos, src: NodeId, pkt: u32) {
            self.got.push((src, pkt));
        }
        fn next_timeout(&self) -> Option<Nanos> {
            None
        }
        fn timeout(&mut self, _now: Nanos) {}
        fn link_down(&mut self, _now: Nanos, peer: NodeId) {
            self.downs.push(peer);
        }
    }

    fn pair(count: u32) -> Vec<Counter> {
        (0..2)
            .map(|i| Counter {
                to: 1 - i,
                count,
                sent: 0,
                got: Vec::new(),
                downs: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn stream_mode_is_reliable_and_in_order_despite_jitter() {
        let mut sim = Sim::new(
            pair(500),
            Mode::Stream {
                latency: 1_000,
                jitter: 50_000,
            },
            7,
        );
        sim.refuse_pct = 20;
        sim.run(Nanos::MAX);
        for n in &sim.nodes {
            let got: Vec<u32> = n.got.iter().map(|g| g.1).collect();
            assert_eq!(got, (0..500).collect::<Vec<_>>());
        }
    }

    #[test]
    fn datagram_mode_loses_duplicates_and_reorders() {
        let mut sim = Sim::new(
            pair(2000),
            Mode::Datagram {
                loss_pct: 10,
                dup_pct: 10,
                latency: 1_000,
                jitter: 50_000,
            },
            9,
        );
        sim.run(Nanos::MAX);
        let got: Vec<u32> = sim.nodes[1].got.iter().map(|g| g.1).collect();
        assert!(got.len() < 2000 * 105 / 100 && got.len() > 2000 * 85 / 100);
        assert!(got.windows(2).any(|w| w[0] > w[1]), "some reordering");
        let mut d = got.clone();
        d.sort_unstable();
        d.dedup();
        assert!(d.len() < got.len(), "some duplicates");
        assert!(d.len() < 2000, "some losses");
    }

    #[test]
    fn a_killed_node_gets_nothing_and_its_peers_see_the_link_go_down() {
        let mut sim = Sim::new(
            pair(100),
            Mode::Stream {
                latency: 10_000,
                jitter: 0,
            },
            3,
        );
        sim.transmit_all();
        sim.kill(1);
        sim.run(Nanos::MAX);
        assert!(sim.nodes[1].got.is_empty() && sim.nodes[0].got.is_empty());
        assert_eq!(sim.nodes[0].downs, vec![1]);
        assert_eq!(sim.in_flight(), 0);
    }

    #[test]
    fn a_broken_link_drops_what_was_in_flight_and_tells_both_ends() {
        let mut sim = Sim::new(
            pair(10),
            Mode::Stream {
                latency: 10_000,
                jitter: 0,
            },
            4,
        );
        sim.transmit_all();
        sim.break_link(0, 1);
        sim.nodes[0].count = 15;
        sim.run(Nanos::MAX);
        let got: Vec<u32> = sim.nodes[1].got.iter().map(|g| g.1).collect();
        assert_eq!(got, (10..15).collect::<Vec<_>>());
        assert_eq!(sim.nodes[0].downs, vec![1]);
        assert_eq!(sim.nodes[1].downs, vec![0]);
    }
}
