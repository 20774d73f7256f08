//! Triggered operations called from C (tests/c/trigger.c, compiled against the
//! installed headers and linked with our libfabric.so.1): a send and an RMA write
//! triggered by counters (`struct fi_triggered_context` naming the program's
//! `struct fid_cntr *`), a refused threshold, and close cancelling a waiting one.

mod common;

#[test]
fn c_program_triggers_operations() {
    let Some(stdout) = common::run_c_test("trigger", include_str!("c/trigger.c"), 60) else {
        return;
    };
    assert!(stdout.contains("trigger ok"), "{stdout}");
}
