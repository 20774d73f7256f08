//! Triggered operations called from C (tests/c/trigger.c, compiled against the
//! installed headers and linked with our libfabric.so.1): a send and an RMA write
//! triggered by counters (`struct fi_triggered_context` naming the program's
//! `struct fid_cntr *`), a refused threshold, and close cancelling a waiting one.

mod common;

#[test]
fn c_program_triggers_operations() {
    let Some(mut cmd) = common::c_program("trigger", include_str!("c/trigger.c")) else {
        return;
    };
    cmd.env_remove("FI_PROVIDER").env("FI_LOG_LEVEL", "warn");
    let (stdout, _stderr) = common::run_c_program_ok(&mut cmd, 60);
    assert!(stdout.contains("trigger ok"), "{stdout}");
}
