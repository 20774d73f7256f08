//! `verbs;ofi_rxm` over the software device, beyond the conformance suite
//! (tests/conformance_rxm.rs).
//!
//! Messages past rxm's segmentation limit go by rendezvous, the receiver reading the sender's buffer through verbs RMA. verbs keys
//! take virtual addresses only, so rxm must ask its core for `FI_MR_VIRT_ADDR` even when
//! the application is no RMA target (it used to send offsets: the read failed with
//! `FI_EACCES` and the send with `FI_ECONNRESET`).

use ofi::enums::{AtomicOp, Datatype};
use ofi::registry::{Registry, RegistryConfig};
use ofi::{Caps, EpType, Errno};
use ofi_conformance::checks::tagged::{trecv, tsend};
use ofi_conformance::pair::{Pair, PairSpec};
use ofi_conformance::Subject;

fn verbs_rxm() -> Subject {
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![
            ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>(),
            ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>(),
        ],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "verbs;ofi_rxm")
}

#[test]
fn large_tagged_messages_arrive_whole_by_rendezvous() {
    let s = verbs_rxm();
    // An application that asks for tagged messages only: no RMA, so its own mr_mode
    // carries no target bits.
    let p = Pair::new(&s, &PairSpec::new(EpType::Rdm, Caps::MSG | Caps::TAGGED));
    for (round, len) in [256 << 10, 1 << 20, 4 << 20].into_iter().enumerate() {
        let src: Vec<u8> = (0..len).map(|i| (i * 31 + round) as u8).collect();
        let mut dst = vec![0u8; len];
        let tag = 0x500 + round as u64;
        trecv(&p.b.ep, &mut dst, ofi::ADDR_UNSPEC, tag, 0, 1);
        tsend(&p.a.ep, &src, p.a.peer, tag, 2);
        let got = p.wait_ok(1, "the rendezvous receive");
        p.wait_ok(0, "the rendezvous send");
        assert_eq!((got.len, got.tag), (len, tag));
        assert!(dst == src, "{len} B: the received bytes differ");
    }
}

/// rxm forwards atomics to its core, so `fi_*atomicvalid` answers what the core's domain
/// supports: verbs has fetch-add and compare-swap on 8 bytes only.
#[test]
fn atomicvalid_answers_what_verbs_supports() {
    let s = verbs_rxm();
    let p = Pair::new(&s, &PairSpec::new(EpType::Rdm, Caps::MSG | Caps::ATOMIC));
    let ep = &p.a.ep;
    assert!(
        ep.fetch_atomicvalid(Datatype::Uint64, AtomicOp::Sum)
            .unwrap()
            >= 1
    );
    assert!(
        ep.compare_atomicvalid(Datatype::Uint64, AtomicOp::Cswap)
            .unwrap()
            >= 1
    );
    for (what, r) in [
        (
            "fetch PROD u64",
            ep.fetch_atomicvalid(Datatype::Uint64, AtomicOp::Prod),
        ),
        (
            "fetch SUM u32",
            ep.fetch_atomicvalid(Datatype::Uint32, AtomicOp::Sum),
        ),
        (
            "compare CSWAP_NE u64",
            ep.compare_atomicvalid(Datatype::Uint64, AtomicOp::CswapNe),
        ),
    ] {
        let e = r.expect_err(what);
        assert!(
            matches!(e.code(), Errno::EOPNOTSUPP | Errno::ENOSYS),
            "{what}: {e} ({})",
            e.code()
        );
    }
}
