//! rxd under a flood of forged `CONNECT`s, measured: two rxd endpoints over udp in
//! this process play 64-byte ping-pong; raw UDP sockets on loopback send `N` forged
//! `CONNECT`s (invented addresses inside, invented sessions and cookies, from 32
//! source ports) at one of them while the ping-pong runs. Prints the one-way
//! latency before and after the flood (median and minimum of 10 blocks of `ITERS`/10
//! round trips each: the machine may be shared, and noise only adds), the ping-pong
//! rounds during it, and the process's resident memory (VmRSS) before and after.
//!
//! ```text
//! cargo run --release -p ofi-util-rxd --example forged_flood -- [N] [ITERS]
//! ```
//! (defaults 100000 and 20000).

#[path = "../tests/common/mod.rs"]
mod common;
use common::{forged_connect, pair, Node};
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::addr::Address;
use ofi::cq::CompletionQueue;
use ofi::Errno;

const RECV: usize = 2;
const SEND: usize = 1;

/// Wait for the receive completion on `cq` (send completions are skipped), driving
/// `other`; panics on an error completion or after 20 s.
fn wait_recv(cq: &CompletionQueue, other: &CompletionQueue) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let mut e = [CqTaggedEntry::default(); 8];
        match cq.read(&mut e) {
            Ok(k) => {
                if e[..k].iter().any(|x| x.op_context == RECV) {
                    return;
                }
            }
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                let ee = cq.readerr_owned(0).expect("readerr");
                panic!("error completion: {} (context {})", ee.err, ee.op_context);
            }
            Err(err) => panic!("cq read: {err}"),
        }
        let _ = other.read::<CqTaggedEntry>(&mut []);
        assert!(Instant::now() < end, "no completion within 20 s");
    }
}

/// One round trip: `a` sends 64 bytes to `b`, `b` answers.
fn round(a: &Node, b: &Node, b_at_a: u64, a_at_b: u64, bufs: &mut [[u8; 64]; 4]) {
    let [ping, pong, ra, rb] = bufs;
    // SAFETY: the buffers outlive the operations (each round waits for its receives;
    // sends copy the data at the call in rxd).
    unsafe {
        b.ep.recv(rb.as_mut_ptr(), 64, std::ptr::null_mut(), u64::MAX, RECV)
            .expect("recv");
        a.ep.recv(ra.as_mut_ptr(), 64, std::ptr::null_mut(), u64::MAX, RECV)
            .expect("recv");
        a.ep.send(ping.as_ptr(), 64, std::ptr::null_mut(), b_at_a, SEND)
            .expect("send");
    }
    wait_recv(&b.cq, &a.cq);
    // SAFETY: as above.
    unsafe {
        b.ep.send(pong.as_ptr(), 64, std::ptr::null_mut(), a_at_b, SEND)
            .expect("send");
    }
    wait_recv(&a.cq, &b.cq);
}

/// One-way latency (µs) in 10 blocks of `iters`/10 round trips: (median, minimum).
fn blocks(a: &Node, b: &Node, b_at_a: u64, a_at_b: u64, iters: u32) -> (f64, f64) {
    let mut v: Vec<f64> = (0..10)
        .map(|_| latency(a, b, b_at_a, a_at_b, (iters / 10).max(1)))
        .collect();
    v.sort_by(f64::total_cmp);
    ((v[4] + v[5]) / 2.0, v[0])
}

/// One-way latency (µs) over `iters` round trips.
fn latency(a: &Node, b: &Node, b_at_a: u64, a_at_b: u64, iters: u32) -> f64 {
    let mut bufs = [[7u8; 64]; 4];
    let t = Instant::now();
    for _ in 0..iters {
        round(a, b, b_at_a, a_at_b, &mut bufs);
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(iters) / 2.0
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(100_000);
    let iters = args.get(1).copied().unwrap_or(20_000);
    let (a, b, b_at_a, a_at_b) = pair();
    latency(&a, &b, b_at_a, a_at_b, 2000); // warm up
    let before = blocks(&a, &b, b_at_a, a_at_b, iters);
    let rss_before = rss_kib();

    let target = a.addr.socket_addr().expect("IPv4");
    let done = Arc::new(AtomicBool::new(false));
    let flood = {
        let done = done.clone();
        std::thread::spawn(move || {
            let senders: Vec<UdpSocket> = (0..32)
                .map(|_| UdpSocket::bind("127.0.0.1:0").expect("bind"))
                .collect();
            let mut x = 0x1234_5678_9abc_def0u64;
            let t = Instant::now();
            for k in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let body = if k % 2 == 0 {
                    let ip = std::net::Ipv4Addr::new(127, 1 + (x >> 40) as u8 % 200, 7, 9);
                    let sa = std::net::SocketAddr::from((ip, (x >> 16) as u16 | 1));
                    Address::from(sa).to_bytes()
                } else {
                    x.to_le_bytes().to_vec()
                };
                let d = forged_connect(x as u32, (x >> 32) as u32 | 1, &body);
                let _ = senders[k as usize % senders.len()].send_to(&d, target);
            }
            done.store(true, Ordering::SeqCst);
            t.elapsed()
        })
    };
    let mut bufs = [[7u8; 64]; 4];
    let mut during = 0u64;
    let t = Instant::now();
    while !done.load(Ordering::SeqCst) {
        round(&a, &b, b_at_a, a_at_b, &mut bufs);
        during += 1;
    }
    let flood_time = flood.join().expect("flood");
    let during_time = t.elapsed();
    // Let the endpoint take what is left in its socket buffer.
    latency(&a, &b, b_at_a, a_at_b, 2000);
    let rss_after = rss_kib();
    let after = blocks(&a, &b, b_at_a, a_at_b, iters);
    println!(
        "forged CONNECTs: {n} in {flood_time:?}; ping-pong rounds during the flood: {during} in {during_time:?}"
    );
    println!(
        "64 B one-way latency, median (min) of 10 blocks: before {:.2} ({:.2}) us, \
         after {:.2} ({:.2}) us: median {:+.1} %, min {:+.1} %",
        before.0,
        before.1,
        after.0,
        after.1,
        (after.0 / before.0 - 1.0) * 100.0,
        (after.1 / before.1 - 1.0) * 100.0
    );
    println!(
        "VmRSS: before {rss_before} KiB, after {rss_after} KiB ({:+} KiB)",
        rss_after as i64 - rss_before as i64
    );
}
