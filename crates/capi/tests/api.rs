//! The exported functions called from C (tests/c/api.c, compiled against the installed
//! headers and linked with our libfabric.so.1): getinfo/dupinfo/allocinfo/freeinfo,
//! strerror, tostr, parameters, logging, fi_open, the compat symbol versions, and
//! `fid_nic`'s `bus_attr` on tcp's results.

mod common;

#[test]
fn c_program_uses_the_exported_functions() {
    let Some(mut cmd) = common::c_program("api", include_str!("c/api.c")) else {
        return;
    };
    cmd.env("FI_CAPITEST_DEPTH", "42")
        .env_remove("FI_CAPITEST_LABEL");
    let (stdout, stderr) = common::run_c_program_ok(&mut cmd, 60);
    // fi_nic's bus_attr, checked against sysfs by the program (its lines shown).
    assert!(stdout.contains("nic bus ok"), "{stdout}");
    for line in stdout.lines().filter(|l| l.starts_with("nic ")) {
        println!("{line}");
    }
    // fi_log reached the ofi-rs log with its provider, function and text.
    assert!(stderr.contains("capi-test-warning 7"), "{stderr}");
    assert!(stderr.contains("capitest"), "{stderr}");
    // The compat entry warned once, naming the symbol.
    assert!(stderr.contains("fi_getinfo@FABRIC_1.0"), "{stderr}");
}
