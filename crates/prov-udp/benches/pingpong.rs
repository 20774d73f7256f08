//! 64-byte ping-pong between two endpoints of the `udp` provider over loopback, each
//! side in its own thread with its own domain (its own progress engine), polling its
//! CQ (manual progress: each read polls the socket). Prints the one-way latency
//! (round trip / 2) for `fi_send` with send completions and for `fi_inject`.
//!
//! For reference it first measures the same exchange on bare nonblocking std UDP
//! sockets (payload + 12 header bytes), so the provider's overhead can be read off even
//! on a loaded machine.
//!
//! `cargo bench -p ofi-prov-udp --bench pingpong [-- SIZE ITERS]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use ofi::abi::raw::CqEntry;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::ep::Endpoint;
use ofi::registry::Registry;
use ofi::{Address, Caps, CqFormat, Errno, Info};

struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    _av: ofi::av::AddressVector,
    _domain: ofi::domain::Domain,
    _fabric: ofi::fabric::Fabric,
}

fn side(reg: &Registry, info: &Info) -> Side {
    let fabric = reg.open_fabric(info).unwrap();
    let domain = fabric.domain(info).unwrap();
    let (ep, cq, av) =
        common::bound_endpoint(&domain, info, &CqAttr::with_format(CqFormat::Context));
    ep.enable().unwrap();
    Side {
        ep,
        cq,
        _av: av,
        _domain: domain,
        _fabric: fabric,
    }
}

/// Wait for the receive completion (context 1), counting send completions on the way.
fn wait_recv(cq: &CompletionQueue) {
    let mut e = [CqEntry::default(); 4];
    loop {
        match cq.read(&mut e) {
            Ok(n) => {
                if e[..n].iter().any(|x| x.op_context == 1) {
                    return;
                }
            }
            Err(x) if x.code() == Errno::EAGAIN => {}
            Err(x) => panic!("cq read: {x}"),
        }
    }
}

fn xmit(ep: &Endpoint, buf: &[u8], dest: u64, inject: bool) {
    loop {
        let r = if inject {
            ep.inject(buf, dest)
        } else {
            // SAFETY: `buf` outlives the call; the send completes at once.
            unsafe { ep.send(buf.as_ptr(), buf.len(), std::ptr::null_mut(), dest, 2) }
        };
        match r {
            Ok(()) => return,
            Err(e) if e.code() == Errno::EAGAIN => continue,
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn run(reg: &Registry, info: &Info, size: usize, iters: usize, inject: bool) -> f64 {
    let a = side(reg, info);
    let b = side(reg, info);
    let name = |s: &Side| Address::from_bytes(info.addr_format, &s.ep.getname().unwrap()).unwrap();
    let (na, nb) = (name(&a), name(&b));
    let to_b = a._av.insert(&[nb]).unwrap()[0];
    let to_a = b._av.insert(&[na]).unwrap()[0];
    let warm = iters / 10;
    let total = iters + warm;
    let pong = std::thread::spawn(move || {
        let mut rbuf = vec![0u8; size];
        let sbuf = vec![2u8; size];
        for _ in 0..total {
            common::post_recv(&b.ep, &mut rbuf);
            wait_recv(&b.cq);
            xmit(&b.ep, &sbuf, to_a, inject);
        }
        b
    });
    let mut rbuf = vec![0u8; size];
    let sbuf = vec![1u8; size];
    let mut start = Instant::now();
    for i in 0..total {
        if i == warm {
            start = Instant::now();
        }
        common::post_recv(&a.ep, &mut rbuf);
        xmit(&a.ep, &sbuf, to_b, inject);
        wait_recv(&a.cq);
    }
    let el = start.elapsed();
    let _b = pong.join().unwrap();
    el.as_secs_f64() * 1e6 / iters as f64 / 2.0
}

/// The same ping-pong on bare std sockets (the floor the provider adds to).
fn raw(size: usize, iters: usize) -> f64 {
    let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let len = size + ofi_prov_udp::proto::HDR_LEN;
    let warm = iters / 10;
    let total = iters + warm;
    let t = std::thread::spawn(move || {
        let mut buf = vec![0u8; len];
        for _ in 0..total {
            while b.recv_from(&mut buf).is_err() {}
            b.send_to(&buf, aa).unwrap();
        }
    });
    let mut buf = vec![0u8; len];
    let mut start = Instant::now();
    for i in 0..total {
        if i == warm {
            start = Instant::now();
        }
        a.send_to(&buf, ba).unwrap();
        while a.recv_from(&mut buf).is_err() {}
    }
    let el = start.elapsed();
    t.join().unwrap();
    el.as_secs_f64() * 1e6 / iters as f64 / 2.0
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let size: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(64);
    let iters: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let reg = common::registry();
    let info = common::info_v4(&reg, Caps::empty());
    // Interleaved rounds, best of each: the machine may be shared, and the minimum is
    // the least disturbed measurement of each kind.
    let rounds = 5;
    let mut best = [f64::MAX; 3];
    for _ in 0..rounds {
        best[0] = best[0].min(raw(size, iters));
        best[1] = best[1].min(run(&reg, &info, size, iters, false));
        best[2] = best[2].min(run(&reg, &info, size, iters, true));
    }
    println!(
        "{size} B one-way latency, best of {rounds} interleaved rounds of {iters} round trips:"
    );
    println!("  bare std UDP sockets:     {:.2} us", best[0]);
    println!("  udp fi_send + completions: {:.2} us", best[1]);
    println!("  udp fi_inject:             {:.2} us", best[2]);
}
