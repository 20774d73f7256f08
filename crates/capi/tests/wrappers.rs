//! Every inline wrapper of fi_endpoint.h, fi_tagged.h, fi_rma.h, fi_atomic.h, fi_cm.h,
//! fi_eq.h and fi_domain.h called from C (tests/c/wrappers.c) on libfabric.so.1 over
//! ofi-rs: shm RDM for data, CQs, counters, AV, MR, wait and poll sets; tcp MSG for the
//! connection calls and EQ events; udp for fi_setname, fi_join and IP name resolution in
//! the AV. Results, completions, error entries and events are checked; calls no
//! provider supports are checked for their exact code.

mod common;

#[test]
fn c_program_calls_every_wrapper() {
    let Some(stdout) = common::run_c_test("wrappers", include_str!("c/wrappers.c"), 120) else {
        return;
    };
    for part in ["rdm ok", "msg ok", "ip av ok"] {
        assert!(stdout.contains(part), "no {part:?}\n{stdout}");
    }
}
