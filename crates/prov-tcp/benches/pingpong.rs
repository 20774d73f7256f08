//! Ping-pong over loopback between two threads of one process, each busy-polling its
//! own CQ (`FI_PROGRESS_MANUAL`): one-way latency (half the round trip) for 64 B and
//! bandwidth for 1 MiB messages (size / one-way time, as fi_pingpong reports it).
//!
//! `cargo bench -p ofi-prov-tcp --bench pingpong`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use ofi::abi::raw::CqTaggedEntry;
use ofi::cq::CompletionQueue;
use ofi::ep::Endpoint;
use ofi::{Caps, Errno};

const NULL: *mut std::ffi::c_void = std::ptr::null_mut();

/// Wait for `n` completions (busy polling).
fn reap(cq: &CompletionQueue, mut n: usize) {
    let mut e = [CqTaggedEntry::default(); 4];
    while n > 0 {
        match cq.read(&mut e) {
            Ok(k) => n = n.saturating_sub(k),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => panic!("cq read: {err}"),
        }
    }
}

/// One side: `iters` rounds of (recv, send) — the client sends first.
fn run(ep: &Endpoint, cq: &CompletionQueue, size: usize, iters: usize, first: bool) {
    let sbuf = vec![1u8; size];
    let mut rbuf = vec![0u8; size];
    for _ in 0..iters {
        // SAFETY: both buffers outlive the round (its completions are reaped).
        unsafe { ep.recv(rbuf.as_mut_ptr(), size, NULL, 0, 1).unwrap() };
        if first {
            // SAFETY: as above.
            unsafe { ep.send(sbuf.as_ptr(), size, NULL, 0, 2).unwrap() };
            reap(cq, 2);
        } else {
            reap(cq, 1);
            // SAFETY: as above.
            unsafe { ep.send(sbuf.as_ptr(), size, NULL, 0, 2).unwrap() };
            reap(cq, 1);
        }
    }
}

/// A connected pair whose sides live in separate fabrics and domains (as two processes
/// would), so each thread's CQ reads drive only its own endpoint.
struct Split {
    client: common::Side,
    server: common::Side,
    _keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

fn split_pair() -> Split {
    use ofi::EqEvent;
    let reg = common::registry();
    let info = common::info(&reg, false, Caps::MSG);
    let f1 = reg.open_fabric(&info).unwrap();
    let d1 = f1.domain(&info).unwrap();
    let f2 = reg.open_fabric(&info).unwrap();
    let d2 = f2.domain(&info).unwrap();
    let (pep, peq) = common::listener(&f2, &info);
    let client = common::side(&f1, &d1, &info);
    client.ep.connect(&pep.getname().unwrap(), b"").unwrap();
    let req = common::eq_expect(&peq, EqEvent::ConnReq);
    let server = common::side(&f2, &d2, req.info.as_ref().unwrap());
    server.ep.accept(b"").unwrap();
    common::eq_expect(&client.eq, EqEvent::Connected);
    common::eq_expect(&server.eq, EqEvent::Connected);
    Split {
        client,
        server,
        _keep: vec![
            Box::new(peq),
            Box::new(pep),
            Box::new(d2),
            Box::new(f2),
            Box::new(d1),
            Box::new(f1),
        ],
    }
}

fn measure(p: &Split, size: usize, iters: usize) -> f64 {
    // Warm up.
    std::thread::scope(|s| {
        s.spawn(|| run(&p.server.ep, &p.server.cq, size, iters / 10 + 1, false));
        run(&p.client.ep, &p.client.cq, size, iters / 10 + 1, true);
    });
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| run(&p.server.ep, &p.server.cq, size, iters, false));
        run(&p.client.ep, &p.client.cq, size, iters, true);
    });
    t.elapsed().as_secs_f64() / iters as f64 / 2.0
}

/// Baseline: the same ping-pong over plain blocking std sockets (TCP_NODELAY), to
/// compare with what the machine gives at the moment.
fn raw_baseline(size: usize, iters: usize) -> f64 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut b = vec![0u8; size];
        for _ in 0..iters {
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut b = vec![1u8; size];
    let start = Instant::now();
    for _ in 0..iters {
        c.write_all(&b).unwrap();
        c.read_exact(&mut b).unwrap();
    }
    let el = start.elapsed().as_secs_f64();
    t.join().unwrap();
    el / iters as f64 / 2.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let p = split_pair();
    println!(
        "raw std TCP baseline: 64 B one-way {:.2} us; 1 MiB {:.2} GB/s",
        raw_baseline(64, 20_000) * 1e6,
        (1 << 20) as f64 / raw_baseline(1 << 20, 500) / 1e9
    );
    let only: Option<usize> = std::env::var("TCP_BENCH_SIZE")
        .ok()
        .and_then(|v| v.parse().ok());
    if let Some(size) = only {
        let one_way = measure(&p, size, 200);
        println!("tcp pingpong {size:>8} B: one-way {:.1} us", one_way * 1e6);
        return;
    }
    for size in [64usize, 4096] {
        let one_way = measure(&p, size, 20_000);
        println!(
            "tcp pingpong {size:>8} B: one-way latency {:.2} us",
            one_way * 1e6
        );
    }
    for size in [64 << 10, 1 << 20] {
        let one_way = measure(&p, size, 500);
        println!(
            "tcp pingpong {size:>8} B: one-way {:.1} us, bandwidth {:.2} GB/s",
            one_way * 1e6,
            size as f64 / one_way / 1e9
        );
    }
}
