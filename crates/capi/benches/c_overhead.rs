//! The C layer's own cost per data call: the same `fi_recv` on the same endpoint, once
//! through the C table (`ep->msg->recv`, as a C program's inline wrapper calls it) and
//! once through the Rust API (`Endpoint::recv`), on a path the provider answers at
//! once without side effects (a udp endpoint whose receive queue is full: `-FI_EAGAIN`).
//!
//! `cargo bench -p ofi-capi --bench c_overhead -- [iterations] [c|rust]` prints both
//! costs and their difference per call (`c` or `rust` runs one path only, for
//! instruction counts: `valgrind --tool=callgrind` of each, the difference of the
//! totals divided by the iterations is the C layer's instructions per call). Take time
//! figures on a quiet machine.

use std::hint::black_box;
use std::ptr;
use std::time::Instant;

use ofi_capi::endpoint::{EpObj, FidEp};
use ofi_capi::entry::{ofi_capi_dupinfo, ofi_capi_fabric, ofi_capi_freeinfo, ofi_capi_getinfo};
use ofi_capi::fid::Fid;
use ofi_capi::info::FiInfo;
use ofi_capi::obj::{FidDomain, FidFabric};
use ofi_capi::queues::FidCq;

const FI_EP_DGRAM: u32 = 2;
const FI_MSG: u64 = 1 << 1;
const FI_TRANSMIT: u64 = 1 << 11;
const FI_RECV: u64 = 1 << 10;
const FI_ADDR_UNSPEC: u64 = u64::MAX;
const EAGAIN: isize = -(libc::EAGAIN as isize);

fn check(what: &str, rc: i32) {
    assert_eq!(rc, 0, "{what}: {rc}");
}

fn main() {
    let iters: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let only: Option<String> = std::env::args().skip(1).find(|a| a == "c" || a == "rust");
    let (run_c, run_rust) = match only.as_deref() {
        Some("c") => (true, false),
        Some("rust") => (false, true),
        _ => (true, true),
    };
    let rounds = if only.is_some() { 1 } else { 5 };
    // SAFETY: the C API used as a C program uses it; every pointer is ours and live.
    unsafe {
        let hints = ofi_capi_dupinfo(ptr::null());
        (*(*hints).ep_attr).ep_type = FI_EP_DGRAM;
        (*hints).caps = FI_MSG;
        (*(*hints).fabric_attr).prov_name = ofi_capi::info::malloc_str(Some("udp"));
        let mut info: *mut FiInfo = ptr::null_mut();
        check(
            "getinfo",
            ofi_capi_getinfo(
                0x1_0011,
                c"127.0.0.1".as_ptr(),
                c"0".as_ptr(),
                1 << 57,
                hints,
                &mut info,
            ),
        );
        let mut fabric: *mut FidFabric = ptr::null_mut();
        check(
            "fabric",
            ofi_capi_fabric((*info).fabric_attr, &mut fabric, ptr::null_mut()),
        );
        let mut domain: *mut FidDomain = ptr::null_mut();
        check(
            "domain",
            ((*(*fabric).ops).domain)(fabric, info, &mut domain, ptr::null_mut()),
        );
        let mut cq_attr = ofi::abi::raw::RawCqAttr {
            size: 0,
            flags: 0,
            format: 1,
            wait_obj: 0,
            signaling_vector: 0,
            wait_cond: 0,
            wait_set: ptr::null_mut(),
        };
        let mut cq: *mut FidCq = ptr::null_mut();
        check(
            "cq",
            ((*(*domain).ops).cq_open)(domain, &mut cq_attr, &mut cq, ptr::null_mut()),
        );
        let mut av_attr = ofi_capi::av::FiAvAttr {
            av_type: 2,
            rx_ctx_bits: 0,
            count: 4,
            ep_per_node: 0,
            name: ptr::null(),
            map_addr: ptr::null_mut(),
            flags: 0,
        };
        let mut av: *mut ofi_capi::av::FidAv = ptr::null_mut();
        check(
            "av",
            ((*(*domain).ops).av_open)(domain, &mut av_attr, &mut av, ptr::null_mut()),
        );
        let mut ep: *mut FidEp = ptr::null_mut();
        check(
            "endpoint",
            ((*(*domain).ops).endpoint)(domain, info, &mut ep, ptr::null_mut()),
        );
        let bind = (*(*ep).fid.ops).bind.expect("bind slot");
        check(
            "bind cq",
            bind(ep.cast(), cq.cast::<Fid>(), FI_TRANSMIT | FI_RECV),
        );
        check("bind av", bind(ep.cast(), av.cast::<Fid>(), 0));
        let control = (*(*ep).fid.ops).control.expect("control slot");
        check("enable", control(ep.cast(), 6, ptr::null_mut()));

        let mut buf = vec![0u8; 64];
        let c_recv = black_box((*(*ep).msg).recv);
        let rust_ep = &EpObj::of(ep).r.ep;
        // Fill the receive queue: from here on every post answers -FI_EAGAIN at once.
        let mut posted = 0;
        while c_recv(
            ep,
            buf.as_mut_ptr(),
            buf.len(),
            ptr::null_mut(),
            FI_ADDR_UNSPEC,
            1,
        ) == 0
        {
            posted += 1;
            assert!(posted < 1_000_000, "the receive queue never filled");
        }
        assert_eq!(
            c_recv(
                ep,
                buf.as_mut_ptr(),
                buf.len(),
                ptr::null_mut(),
                FI_ADDR_UNSPEC,
                1
            ),
            EAGAIN
        );

        let mut best_c = f64::MAX;
        let mut best_rust = f64::MAX;
        for _ in 0..rounds {
            let t = Instant::now();
            for i in 0..iters * u64::from(run_c) {
                let rc = c_recv(
                    black_box(ep),
                    buf.as_mut_ptr(),
                    64,
                    ptr::null_mut(),
                    FI_ADDR_UNSPEC,
                    i as usize,
                );
                debug_assert_eq!(rc, EAGAIN);
                black_box(rc);
            }
            best_c = best_c.min(t.elapsed().as_nanos() as f64 / iters as f64);
            let t = Instant::now();
            for i in 0..iters * u64::from(run_rust) {
                let rc = black_box(rust_ep).recv(
                    buf.as_mut_ptr(),
                    64,
                    ptr::null_mut(),
                    FI_ADDR_UNSPEC,
                    i as usize,
                );
                black_box(rc.is_err());
            }
            best_rust = best_rust.min(t.elapsed().as_nanos() as f64 / iters as f64);
        }
        println!(
            "fi_recv (-FI_EAGAIN path), {iters} calls, best of {rounds}: C table {best_c:.2} ns/call, \
             Rust API {best_rust:.2} ns/call, C layer {:.2} ns/call",
            best_c - best_rust
        );

        let close = |f: *mut Fid| ((*(*f).ops).close.expect("close slot"))(f);
        check("close ep", close(ep.cast()));
        check("close av", close(av.cast()));
        check("close cq", close(cq.cast()));
        check("close domain", close(domain.cast()));
        check("close fabric", close(fabric.cast()));
        ofi_capi_freeinfo(info);
        ofi_capi_freeinfo(hints);
    }
}
