//! A simulated SRD network for the engine: testkit's simnet in datagram mode with no
//! loss and no duplication (SRD is reliable) but heavy jitter (it reorders), each
//! engine behind a device model that answers every packet with a send completion or a
//! receiver-not-ready (the engine's own refusal, or one injected at random), and serves
//! reads of its memory for peers.

#![allow(dead_code)]

use std::collections::VecDeque;

use ofi_core::error::Errno;
use ofi_prov_efa::proto::{Config, Engine, Event, Transmit};
use ofi_testkit::simnet::{Mode, Nanos, NodeId, Sim, SimNode};
use ofi_testkit::TestRng;

/// What travels between simulated devices.
#[derive(Clone, Debug)]
pub enum Pkt {
    /// A datagram and the sender's token for it.
    Data { token: u64, bytes: Vec<u8> },
    /// The receiver's device took the datagram.
    Done(u64),
    /// The receiver's device refused it (RNR).
    Rnr(u64),
    /// Read the receiver's memory.
    ReadReq {
        token: u64,
        key: u32,
        offset: u64,
        len: usize,
    },
    /// The answer to a read.
    ReadResp {
        token: u64,
        result: Result<Vec<u8>, Errno>,
    },
}

/// One endpoint and its device.
pub struct Node {
    pub eng: Engine,
    /// Device answers waiting to go out.
    pub out: VecDeque<(NodeId, Pkt)>,
    /// Percent of arriving datagrams refused with RNR regardless of the engine.
    pub rnr_pct: u64,
    rng: TestRng,
    /// Completions with their time.
    pub events: Vec<(Nanos, Event)>,
    /// Datagrams this device refused.
    pub rnr_sent: u64,
}

impl Node {
    pub fn new(cfg: Config, rnr_pct: u64, seed: u64) -> Node {
        Node {
            eng: Engine::new(cfg),
            out: VecDeque::new(),
            rnr_pct,
            rng: TestRng::seeded(seed),
            events: Vec::new(),
            rnr_sent: 0,
        }
    }

    /// Move the engine's completions into `events`.
    pub fn collect(&mut self, now: Nanos) {
        while let Some(e) = self.eng.poll_event() {
            self.events.push((now, e));
        }
    }
}

impl SimNode for Node {
    type Packet = Pkt;

    fn transmit(&mut self, now: Nanos, out: &mut dyn FnMut(NodeId, Pkt) -> bool) {
        while let Some((dst, p)) = self.out.pop_front() {
            if !out(dst, p.clone()) {
                self.out.push_front((dst, p));
                return;
            }
        }
        while let Some(t) = self.eng.poll_transmit(now) {
            let (dst, p) = match t {
                Transmit::Send { peer, token, bytes } => {
                    (peer as NodeId, Pkt::Data { token, bytes })
                }
                Transmit::Read {
                    peer,
                    token,
                    key,
                    offset,
                    len,
                } => (
                    peer as NodeId,
                    Pkt::ReadReq {
                        token,
                        key,
                        offset,
                        len,
                    },
                ),
            };
            if !out(dst, p.clone()) {
                self.out.push_back((dst, p));
                return;
            }
        }
    }

    fn deliver(&mut self, now: Nanos, src: NodeId, pkt: Pkt) {
        match pkt {
            Pkt::Data { token, bytes } => {
                let refused = self.rng.chance(self.rnr_pct)
                    || self.eng.handle_packet(now, src as u64, &bytes).is_err();
                if refused {
                    self.rnr_sent += 1;
                    self.out.push_back((src, Pkt::Rnr(token)));
                } else {
                    self.out.push_back((src, Pkt::Done(token)));
                }
            }
            Pkt::Done(t) => self.eng.handle_send_done(now, t),
            Pkt::Rnr(t) => self.eng.handle_rnr(now, t),
            Pkt::ReadReq {
                token,
                key,
                offset,
                len,
            } => {
                let result = self.eng.serve_read(src as u64, key, offset, len);
                self.out.push_back((src, Pkt::ReadResp { token, result }));
            }
            Pkt::ReadResp { token, result } => self.eng.handle_read_done(now, token, result),
        }
        self.collect(now);
    }

    fn next_timeout(&self) -> Option<Nanos> {
        self.eng.poll_timeout()
    }

    fn timeout(&mut self, now: Nanos) {
        if self.eng.poll_timeout().is_some_and(|t| t <= now) {
            self.eng.handle_timeout(now);
        }
        self.collect(now);
    }
}

/// SRD as simulated: reliable, reordering (`jitter` ns on a 1 µs latency).
pub fn srd(jitter: Nanos) -> Mode {
    Mode::Datagram {
        loss_pct: 0,
        dup_pct: 0,
        latency: 1_000,
        jitter,
    }
}

/// A small-MTU configuration so that every path is exercised with small messages:
/// eager up to 192 bytes, medium to 2 KiB, long by read from 8 KiB, long by CTS
/// between (grants of 4 packets).
pub fn small_cfg(secret: u64) -> Config {
    Config {
        mtu: 256,
        max_medium_msg_size: 2048,
        min_read_msg_size: 8192,
        tx_min_credits: 4,
        rnr_backoff_wait_time_cap: 1_000,
        peer_timeout: 50_000_000,
        probe_interval: 10_000_000,
        hello_interval: 5_000_000,
        secret,
        ..Config::default()
    }
}

/// `n` nodes with `cfg(i)`, `rnr_pct` injected, on `mode`.
pub fn sim(
    n: usize,
    cfg: impl Fn(usize) -> Config,
    rnr_pct: u64,
    mode: Mode,
    seed: u64,
) -> Sim<Node> {
    let nodes = (0..n)
        .map(|i| Node::new(cfg(i), rnr_pct, seed ^ ((i as u64 + 1) * 0x1234_5678)))
        .collect();
    Sim::new(nodes, mode, seed)
}

/// A message body that names its sender and sequence number: 12 header bytes (src,
/// seq, len) then bytes derived from them (`len` ≥ 12).
pub fn body(src: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&src.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&(len as u32).to_le_bytes());
    for i in 12..len {
        v.push((seq as usize * 31 + i * 7 + src as usize) as u8);
    }
    v
}

/// Check a received body; returns (src, seq).
pub fn check_body(data: &[u8]) -> (u32, u32) {
    assert!(data.len() >= 12, "body too short: {}", data.len());
    let w = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().unwrap());
    let (src, seq, len) = (w(0), w(4), w(8));
    assert_eq!(data.len(), len as usize, "length of {src}/{seq}");
    assert_eq!(
        data,
        &body(src, seq, len as usize)[..],
        "content of {src}/{seq}"
    );
    (src, seq)
}

/// Run until nothing is pending (at most `span` from now: waiting operations keep
/// probing), then collect every node's completions (posting a receive can complete one
/// without any packet).
pub fn settle(s: &mut Sim<Node>, span: Nanos) {
    s.run(s.now.saturating_add(span));
    let now = s.now;
    for n in &mut s.nodes {
        n.collect(now);
    }
}
