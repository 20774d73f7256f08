//! Scalable endpoints and shared contexts called from C (tests/c/contexts.c, compiled
//! against the installed headers and linked with our libfabric.so.1): a scalable
//! endpoint's transmit and receive contexts with their own CQs addressed through
//! `fi_rx_addr`, and two endpoints sharing one transmit and one receive context; on
//! shm, and the same program on `tcp;ofi_rxm`.

mod common;

#[test]
fn c_program_uses_scalable_endpoints_and_shared_contexts() {
    let Some(stdout) = common::run_c_test("contexts", include_str!("c/contexts.c"), 60) else {
        return;
    };
    assert!(stdout.contains("scalable ok"), "{stdout}");
    assert!(stdout.contains("shared ok"), "{stdout}");
}

/// The same program on `tcp;ofi_rxm` (its contexts are whole rxm endpoints, reached
/// through the scalable endpoint's listener).
#[test]
fn c_program_uses_scalable_endpoints_and_shared_contexts_over_rxm() {
    let Some(mut cmd) = common::c_program("contexts_rxm", include_str!("c/contexts.c")) else {
        return;
    };
    cmd.env("CONTEXTS_PROV", "tcp;ofi_rxm");
    let (stdout, _) = common::run_c_program_ok(&mut cmd, 60);
    assert!(stdout.contains("scalable ok"), "{stdout}");
    assert!(stdout.contains("shared ok"), "{stdout}");
}
