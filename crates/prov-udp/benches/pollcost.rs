//! Cost of one idle poll: `fi_cq_read` on an empty CQ whose endpoint has a receive
//! posted (so progress calls `recvmsg`, which finds nothing), against a bare
//! nonblocking `recv_from` that finds nothing. The difference is what the provider adds
//! to each round of busy polling.
//!
//! `cargo bench -p ofi-prov-udp --bench pollcost`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use ofi::abi::raw::CqEntry;
use ofi::cq::CqAttr;
use ofi::{Caps, CqFormat, ADDR_NOTAVAIL};

const N: u32 = 1_000_000;

fn main() {
    let reg = common::registry();
    let info = common::info_v4(&reg, Caps::empty());
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let (ep, cq, _av) =
        common::bound_endpoint(&domain, &info, &CqAttr::with_format(CqFormat::Context));
    ep.enable().unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: `buf` outlives the endpoint's use of it (the endpoint is dropped first).
    unsafe {
        ep.recv(buf.as_mut_ptr(), 64, std::ptr::null_mut(), ADDR_NOTAVAIL, 1)
            .unwrap()
    };
    let mut e = [CqEntry::default(); 4];
    let t = Instant::now();
    for _ in 0..N {
        let _ = cq.read(&mut e);
    }
    let prov = t.elapsed().as_nanos() as f64 / f64::from(N);

    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    let mut rb = [0u8; 128];
    let t = Instant::now();
    for _ in 0..N {
        let _ = s.recv_from(&mut rb);
    }
    let raw = t.elapsed().as_nanos() as f64 / f64::from(N);
    println!("idle poll: fi_cq_read {prov:.0} ns, bare recv_from {raw:.0} ns");
    drop(ep);
}
