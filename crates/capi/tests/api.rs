//! The exported functions called from C (tests/c/api.c, compiled against the installed
//! headers and linked with our libfabric.so.1): getinfo/dupinfo/allocinfo/freeinfo,
//! strerror, tostr, parameters, logging, fi_open, the compat symbol versions.

mod common;

use std::process::Command;

#[test]
fn c_program_uses_the_exported_functions() {
    if common::skip_without_headers("api") {
        return;
    }
    let exe = common::compile_c("api", include_str!("c/api.c"));
    let mut cmd = Command::new(&exe);
    cmd.env("FI_CAPITEST_DEPTH", "42")
        .env("FI_LOG_LEVEL", "warn")
        .env_remove("FI_PROVIDER")
        .env_remove("FI_CAPITEST_LABEL");
    let out = common::run_with_lib(&mut cmd, 60);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "api.c failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("all ok"), "{stdout}");
    // fi_log reached the ofi-rs log with its provider, function and text.
    assert!(stderr.contains("capi-test-warning 7"), "{stderr}");
    assert!(stderr.contains("capitest"), "{stderr}");
    // The compat entry warned once, naming the symbol.
    assert!(stderr.contains("fi_getinfo@FABRIC_1.0"), "{stderr}");
}
