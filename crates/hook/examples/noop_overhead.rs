//! The noop hook's cost per call, measured without a peer: `fi_cq_read` of an empty
//! CQ (`FI_EAGAIN`, which still drives the provider's progress) and `fi_rx_size_left`,
//! each in a tight loop, over shm, bare and under `noop`. Prints ns per call.
//!
//! ```sh
//! cargo run --release -p ofi-hook --example noop_overhead
//! ```

use std::time::Instant;

use ofi::abi::raw::CqDataEntry;
use ofi::av::AvAttr;
use ofi::cq::CqAttr;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{CqFormat, EpType, Info, OpFlags, WaitObj, API_VERSION};

const N: u32 = 2_000_000;

fn per_call(hooks: &str) -> (f64, f64) {
    let mut builtins = vec![ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()];
    builtins.extend(ofi_hook::builtin_entries());
    let reg = Registry::build(RegistryConfig {
        builtins,
        ..RegistryConfig::default()
    });
    reg.set_hooks(hooks).expect("hooks");
    let mut h = Info::hints().with_ep_type(EpType::Rdm);
    h.fabric_attr.prov_name = Some("shm".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo")
        .remove(0);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let cq = domain
        .cq_open(&CqAttr {
            wait_obj: WaitObj::None,
            ..CqAttr::with_format(CqFormat::Data)
        })
        .expect("cq");
    let av = domain.av_open(&AvAttr::default()).expect("av");
    let ep = domain.endpoint(&info).expect("ep");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
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
