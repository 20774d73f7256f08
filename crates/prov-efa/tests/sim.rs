//! The simulation: 10^5 messages of mixed sizes among 8 peers on a reordering
//! SRD network with receiver-not-ready injected — each delivered exactly once, with the
//! right bytes, and in order (matching order) per sender; and a killed peer whose
//! operations complete in error within bounded virtual time while the others go on.

mod common;

use ofi_core::flags::OpFlags;
use std::collections::HashMap;

use common::{body, check_body, settle, sim, small_cfg, srd, Node};
use ofi_core::error::Errno;
use ofi_prov_efa::proto::{Config, Event, Outstanding, RecvReq, SendReq, LOST_PEER_ERRNO};
use ofi_testkit::simnet::{Nanos, Sim};
use ofi_testkit::TestRng;

/// Receives each node keeps posted, per kind (untagged, tagged).
const POSTED: usize = 12;
/// Sends each node keeps in flight.
const IN_FLIGHT: usize = 24;
/// Virtual time per driver step.
const STEP: Nanos = 200_000;
/// The tag of tagged messages.
const TAG: u64 = 0x7a;

/// A size: mostly eager, some medium, long by CTS and long by read (see `small_cfg`).
fn size(rng: &mut TestRng) -> usize {
    match rng.below(1000) {
        0..=899 => rng.range(12, 193) as usize,
        900..=969 => rng.range(193, 2049) as usize,
        970..=989 => rng.range(2049, 8192) as usize,
        _ => rng.range(8192, 12_000) as usize,
    }
}

/// What the driver tracks per node.
#[derive(Default)]
struct Book {
    sent: usize,
    tx_done: usize,
    tx_failed: Vec<(Nanos, u64, Errno)>,
    rx_failed: Vec<(Nanos, u64)>,
    /// Outstanding send contexts → destination.
    tx_dest: HashMap<u64, usize>,
    /// Sends completed, by destination.
    tx_done_to: HashMap<usize, usize>,
    posted: [usize; 2],
    next_ctx: u64,
    /// Per (src, tagged): (seq, receive ctx) in completion order.
    got: HashMap<(u32, bool), Vec<(u32, u64)>>,
    seen: usize,
}

/// Drive `s` until every node sent `per_node` messages and all were received (or
/// failed): posting receives, keeping sends in flight to random live peers.
/// `dead` peers are never chosen as destinations after `kill_at`.
fn drive(
    s: &mut Sim<Node>,
    books: &mut [Book],
    per_node: usize,
    rng: &mut TestRng,
    kill: Option<(usize, Nanos)>,
) {
    let n = s.nodes.len();
    let mut seqs = vec![vec![0u32; n]; n];
    for _step in 0..200_000 {
        let now = s.now;
        let killed = kill.filter(|k| now >= k.1).map(|k| k.0);
        if let Some((k, at)) = kill {
            if now >= at && !s.is_dead(k) {
                s.kill(k);
            }
        }
        for i in 0..n {
            if s.is_dead(i) {
                continue;
            }
            let b = &mut books[i];
            // Collect completions (posting a receive can complete one at once).
            s.nodes[i].collect(now);
            for (t, e) in s.nodes[i].events.drain(..) {
                match e {
                    Event::Tx { ctx, result, .. } => {
                        let dst = b.tx_dest.remove(&ctx);
                        match result {
                            Ok(()) => {
                                b.tx_done += 1;
                                *b.tx_done_to.entry(dst.unwrap_or(usize::MAX)).or_default() += 1;
                            }
                            Err(e) => b.tx_failed.push((t, ctx, e)),
                        }
                    }
                    Event::RemoteWrite { .. } | Event::RemoteAccess { .. } => {}
                    Event::Rx(r) => {
                        b.posted[usize::from(r.tagged)] -= 1;
                        if let Err(e) = r.result {
                            // Only a transfer from the killed peer may fail.
                            assert_eq!(
                                (Some(r.src as usize), e),
                                (kill.map(|k| k.0), LOST_PEER_ERRNO),
                                "node {i}"
                            );
                            b.rx_failed.push((t, r.src));
                            continue;
                        }
                        let (src, seq) = check_body(&r.data);
                        assert_eq!(src as u64, r.src, "FI_SOURCE names the sender");
                        assert_eq!(r.tagged, r.tag == TAG);
                        b.got.entry((src, r.tagged)).or_default().push((seq, r.ctx));
                        b.seen += 1;
                    }
                }
            }
            // Keep receives posted.
            for kind in 0..2 {
                while b.posted[kind] < POSTED {
                    b.next_ctx += 1;
                    let tag = (kind == 1).then_some((TAG, 0));
                    let r = RecvReq {
                        ctx: b.next_ctx,
                        len: 12_000,
                        tag,
                        src: None,
                        flags: OpFlags::empty(),
                    };
                    s.nodes[i].eng.post_recv(now, r).expect("post");
                    b.posted[kind] += 1;
                }
            }
            // Keep sends in flight.
            while b.sent < per_node && b.tx_dest.len() < IN_FLIGHT {
                let mut dst = rng.below(n as u64 - 1) as usize;
                if dst >= i {
                    dst += 1;
                }
                if Some(dst) == killed || s.nodes[i].eng.is_lost(dst as u64) {
                    b.sent += 1; // that one is skipped: the peer is gone
                    continue;
                }
                let seq = seqs[i][dst];
                seqs[i][dst] += 1;
                let len = size(rng);
                b.next_ctx += 1;
                let req = SendReq {
                    ctx: b.next_ctx,
                    peer: dst as u64,
                    data: body(i as u32, seq, len),
                    tag: rng.chance(50).then_some(TAG),
                    cq_data: None,
                    delivery_complete: rng.chance(5),
                };
                s.nodes[i].eng.send(now, req).expect("send");
                b.tx_dest.insert(b.next_ctx, dst);
                b.sent += 1;
            }
        }
        let live: Vec<usize> = (0..n).filter(|&i| !s.is_dead(i)).collect();
        let all_sent = live
            .iter()
            .all(|&i| books[i].sent >= per_node && books[i].tx_dest.is_empty());
        // Every send between live nodes that completed was received.
        let received = |j: usize, i: usize| -> usize {
            [false, true]
                .iter()
                .map(|&t| books[j].got.get(&(i as u32, t)).map_or(0, Vec::len))
                .sum()
        };
        let all_in = live.iter().all(|&i| {
            live.iter()
                .filter(|&&j| j != i)
                .all(|&j| books[i].tx_done_to.get(&j).copied().unwrap_or(0) == received(j, i))
        });
        if all_sent && all_in && kill.is_none_or(|k| now > k.1) {
            // Everything sent to a live peer arrived; let the last answers settle.
            s.run_to(now + 20 * STEP);
            return;
        }
        s.run_to(now + STEP);
    }
    panic!("the run did not finish");
}

/// Every (src, kind) stream: each sequence number once, and matched in order (a
/// later message took a later receive).
/// A test's generator (`EFA_SIM_SEED` replays it; `default` otherwise) and the seed of
/// its simulation, drawn from it.
fn sim_rng(default: u64) -> (TestRng, u64) {
    let mut rng = TestRng::from_env("EFA_SIM_SEED", default);
    let seed = rng.next_u64();
    (rng, seed)
}

/// An empty book for each of `n` nodes.
fn empty_books(n: usize) -> Vec<Book> {
    (0..n).map(|_| Book::default()).collect()
}

fn check_streams(books: &[Book], ordered_kinds: bool) -> usize {
    let mut total = 0;
    for (dst, b) in books.iter().enumerate() {
        let mut per_src: HashMap<u32, Vec<u32>> = HashMap::new();
        for ((src, _tagged), v) in &b.got {
            let mut by_seq = v.clone();
            by_seq.sort_unstable();
            if ordered_kinds {
                let ctxs: Vec<u64> = by_seq.iter().map(|x| x.1).collect();
                assert!(
                    ctxs.windows(2).all(|w| w[0] < w[1]),
                    "node {dst}: messages from {src} matched out of order"
                );
            }
            per_src
                .entry(*src)
                .or_default()
                .extend(by_seq.iter().map(|x| x.0));
            total += v.len();
        }
        for (src, mut seqs) in per_src {
            seqs.sort_unstable();
            let want: Vec<u32> = (0..seqs.len() as u32).collect();
            assert_eq!(
                seqs, want,
                "node {dst}: from {src} each message exactly once"
            );
        }
    }
    total
}

#[test]
fn a_hundred_thousand_messages_among_8_peers_reordered_and_refused() {
    const PEERS: usize = 8;
    const PER_NODE: usize = 12_500;
    let (mut rng, seed) = sim_rng(0xefa);
    // A small unexpected queue: receivers refuse (RNR) when senders run ahead of
    // their posted receives, besides the 5 % the devices inject.
    let cfg = |i: usize| {
        let mut c = small_cfg(i as u64 * 7 + 1);
        c.matcher.max_unexpected = 8;
        c
    };
    let mut s = sim(PEERS, cfg, 5, srd(40_000), seed);
    s.step_limit = 50_000_000;
    let mut books = empty_books(PEERS);
    drive(&mut s, &mut books, PER_NODE, &mut rng, None);
    let total = check_streams(&books, true);
    assert_eq!(total, PEERS * PER_NODE);
    let mut rnr = 0;
    for (i, b) in books.iter().enumerate() {
        assert_eq!(b.tx_done, PER_NODE, "node {i}");
        assert!(b.tx_failed.is_empty(), "node {i}: {:?}", &b.tx_failed[..1]);
        let st = s.nodes[i].eng.stats();
        assert_eq!(
            (st.malformed, st.bad_cookie, st.stale, st.peers_lost),
            (0, 0, 0, 0),
            "node {i}"
        );
        rnr += st.rnr;
        // Nothing held but the receives still posted.
        let o = s.nodes[i].eng.outstanding();
        assert_eq!(o, Outstanding::default(), "node {i}");
    }
    assert!(rnr > 1000, "receiver-not-ready was exercised ({rnr})");
    let refused_by_engines: u64 = s.nodes.iter().map(|n| n.eng.stats().not_ready).sum();
    let hellos: u64 = s.nodes.iter().map(|n| n.eng.stats().hello_answered).sum();
    assert!(
        refused_by_engines > 1000,
        "receivers refused when senders ran ahead"
    );
    eprintln!(
        "{} messages, {} virtual ms, {rnr} RNR ({refused_by_engines} by the engines' windows \
         and queues, the rest injected), {hellos} HELLOs answered",
        PEERS * PER_NODE,
        s.now / 1_000_000
    );
}

#[test]
fn unordered_delivery_still_delivers_each_message_once() {
    const PEERS: usize = 4;
    let cfg = |i: usize| Config {
        ordered: false,
        ..small_cfg(i as u64 + 3)
    };
    let (mut rng, seed) = sim_rng(0xefb);
    let mut s = sim(PEERS, cfg, 5, srd(40_000), seed);
    let mut books = empty_books(PEERS);
    drive(&mut s, &mut books, 2_000, &mut rng, None);
    assert_eq!(check_streams(&books, false), PEERS * 2_000);
}

#[test]
fn a_killed_peer_fails_its_operations_within_bounded_time() {
    const PEERS: usize = 4;
    const KILL_AT: Nanos = 3_000_000;
    let (mut rng, seed) = sim_rng(0xefc);
    let mut s = sim(PEERS, |i| small_cfg(i as u64 + 5), 5, srd(40_000), seed);
    let mut books = empty_books(PEERS);
    drive(&mut s, &mut books, 3_000, &mut rng, Some((3, KILL_AT)));
    let cfg = small_cfg(0);
    // Lost within probe interval + peer timeout (+ one driver step) of the kill.
    let bound = KILL_AT + cfg.probe_interval + cfg.peer_timeout + 2 * STEP;
    let mut failed = 0;
    for (i, b) in books.iter().enumerate().take(3) {
        for &(t, _, e) in &b.tx_failed {
            assert_eq!(e, LOST_PEER_ERRNO, "node {i}");
            assert!(t <= bound, "node {i}: failed at {t}, bound {bound}");
            failed += 1;
        }
        for &(t, _) in &b.rx_failed {
            assert!(t <= bound, "node {i}: receive failed at {t}, bound {bound}");
        }
        if !b.tx_failed.is_empty() || !b.rx_failed.is_empty() {
            assert!(s.nodes[i].eng.is_lost(3), "node {i} declared 3 lost");
        }
    }
    // Messages that arrived before the kill and found no receive are still waiting
    // for one; take them (those from the killed peer that lacked data fail), then
    // nothing is left.
    let mut ctx = 1 << 40;
    for i in 0..3 {
        for _ in 0..64 {
            if s.nodes[i].eng.outstanding().unexpected == 0 {
                break;
            }
            for tag in [None, Some((TAG, 0))] {
                ctx += 1;
                let r = RecvReq {
                    ctx,
                    len: 12_000,
                    tag,
                    src: None,
                    flags: OpFlags::empty(),
                };
                s.nodes[i].eng.post_recv(s.now, r).unwrap();
            }
            settle(&mut s, STEP);
        }
        assert_eq!(
            s.nodes[i].eng.outstanding(),
            Outstanding::default(),
            "node {i}: nothing leaks"
        );
    }
    assert!(
        failed > 0,
        "some operations were pending with the killed peer"
    );
    // The survivors' messages among themselves: each once, in order.
    let survivors: Vec<Book> = books
        .into_iter()
        .take(3)
        .map(|mut b| {
            b.got.retain(|k, _| k.0 != 3);
            b
        })
        .collect();
    check_streams(&survivors, true);
}
