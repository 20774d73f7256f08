//! Every inline wrapper of fi_endpoint.h, fi_tagged.h, fi_rma.h, fi_atomic.h, fi_cm.h,
//! fi_eq.h and fi_domain.h called from C (tests/c/wrappers.c) on libfabric.so.1 over
//! ofi-rs: shm RDM for data, CQs, counters, AV, MR, wait and poll sets; tcp MSG for the
//! connection calls and EQ events; udp for fi_setname, fi_join and IP name resolution in
//! the AV. Results, completions, error entries and events are checked; calls no
//! provider supports are checked for their exact code.

mod common;

use std::process::Command;

#[test]
fn c_program_calls_every_wrapper() {
    if common::skip_without_headers("wrappers") {
        return;
    }
    let exe = common::compile_c("wrappers", include_str!("c/wrappers.c"));
    let mut cmd = Command::new(&exe);
    cmd.env_remove("FI_PROVIDER").env("FI_LOG_LEVEL", "warn");
    let out = common::run_with_lib(&mut cmd, 120);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "wrappers.c failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("rdm ok")
            && stdout.contains("msg ok")
            && stdout.contains("ip av ok")
            && stdout.contains("all ok")
    );
}
