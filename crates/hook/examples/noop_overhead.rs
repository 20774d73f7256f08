//! The noop hook's cost per call, measured without a peer: `fi_cq_read` of an empty
//! CQ (`FI_EAGAIN`, which still drives the provider's progress) and `fi_rx_size_left`,
//! each in a tight loop, over shm, bare and under `noop`. Prints ns per call.
//!
//! ```sh
//! cargo run --release -p ofi-hook --example noop_overhead
//! ```

use std::time::Instant;

use ofi::abi::raw::CqDataEntry;
use ofi::EpType;

/// The tests' registry and endpoint fixtures.
#[path = "../tests/common/mod.rs"]
mod common;

const N: u32 = 2_000_000;

fn per_call(hooks: &str) -> (f64, f64) {
    let reg = common::registry(hooks);
    let info = common::info(&reg, "shm", EpType::Rdm);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let common::Peer { ep, cq, av: _av } = common::peer(&domain, &info);
    let mut e = [CqDataEntry::default()];
    let t = Instant::now();
    for _ in 0..N {
        let _ = std::hint::black_box(cq.read(&mut e));
    }
    let read = t.elapsed().as_nanos() as f64 / N as f64;
    let t = Instant::now();
    for _ in 0..N {
        let _ = std::hint::black_box(ep.rx_size_left());
    }
    let left = t.elapsed().as_nanos() as f64 / N as f64;
    (read, left)
}

fn main() {
    for round in 0..5 {
        let (r0, l0) = per_call("");
        let (r1, l1) = per_call("noop");
        println!(
            "round {round}: cq_read {r0:.1} -> {r1:.1} ns (+{:.1}); rx_size_left {l0:.1} -> {l1:.1} ns (+{:.1})",
            r1 - r0,
            l1 - l0
        );
    }
}
