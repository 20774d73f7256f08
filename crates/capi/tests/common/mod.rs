//! Shared by the C-ABI tests: link libfabric.so.1 from the static library cargo built
//! for this test run (scripts/build-capi.sh --link-only), and compile C programs
//! against the installed libfabric 1.17 headers and that library.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The cargo profile directory of this test run (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps layout")
        .to_path_buf()
}

/// The directory holding libfabric.so.1 (linked once per test binary).
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = profile_dir().join("capi-test");
        let mut build = Command::new("bash");
        build
            .arg(root.join("scripts/build-capi.sh"))
            .arg("--link-only")
            .arg("--profile-dir")
            .arg(profile_dir())
            .arg("--out")
            .arg(&out);
        output_ok(&mut build, "scripts/build-capi.sh --link-only");
        out
    })
}

/// Whether the libfabric 1.17 development headers are installed (`libfabric-dev`).
pub fn have_headers() -> bool {
    Path::new("/usr/include/rdma/fabric.h").exists()
}

/// Prints why a test is skipped and returns true when the headers are absent.
pub fn skip_without_headers(test: &str) -> bool {
    if have_headers() {
        return false;
    }
    eprintln!("{test}: SKIPPED: /usr/include/rdma/fabric.h not found (install libfabric-dev)");
    true
}

/// Compiles the C source `src` into an executable `name` linked with our
/// libfabric.so (rpath set to it) and returns its path.
pub fn compile_c(name: &str, src: &str) -> PathBuf {
    let dir = profile_dir().join("capi-test");
    std::fs::create_dir_all(&dir).expect("create capi-test dir");
    let c_path = dir.join(format!("{name}.c"));
    std::fs::write(&c_path, src).expect("write C source");
    let exe = dir.join(name);
    let lib = lib_dir();
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-std=gnu11", "-Wall", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(&c_path)
        .arg(concat!("-I", env!("CARGO_MANIFEST_DIR"), "/tests/c"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfabric", "-ldl"]);
    output_ok(&mut cc, &format!("cc {name}.c"));
    exe
}

/// Runs `cmd` to completion; panics naming `what`, with its stderr, unless it succeeds.
fn output_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The C test program `name` (source `src`) compiled and ready to run in the
/// environment every C test starts from (no `FI_PROVIDER` filter, warnings logged), or
/// `None` (with the reason printed) when the headers are absent.
pub fn c_program(name: &str, src: &str) -> Option<Command> {
    if skip_without_headers(name) {
        return None;
    }
    let mut cmd = Command::new(compile_c(name, src));
    cmd.env_remove("FI_PROVIDER").env("FI_LOG_LEVEL", "warn");
    Some(cmd)
}

/// Compiles and runs the C test program `name` (source `src`) as [`c_program`] prepares
/// it, within `limit_secs`; its stdout once it succeeded and printed `all ok` (see
/// [`run_c_program_ok`]), or `None` when the headers are absent.
pub fn run_c_test(name: &str, src: &str, limit_secs: u32) -> Option<String> {
    let mut cmd = c_program(name, src)?;
    Some(run_c_program_ok(&mut cmd, limit_secs).0)
}

/// Runs the C test program `cmd` over our library (bounded by `limit_secs`), asserts
/// it succeeded and printed `all ok`; returns its (stdout, stderr).
pub fn run_c_program_ok(cmd: &mut Command, limit_secs: u32) -> (String, String) {
    let out = run_with_lib(cmd, limit_secs);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let name = cmd.get_program().to_string_lossy().into_owned();
    assert!(
        out.status.success(),
        "{name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("all ok"), "{name}: no \"all ok\"\n{stdout}");
    (stdout, stderr)
}

/// Runs `cmd` with our library first on `LD_LIBRARY_PATH`, with a time limit.
pub fn run_with_lib(cmd: &mut Command, limit_secs: u32) -> Output {
    let lib = lib_dir();
    let mut timed = Command::new("timeout");
    timed
        .arg(limit_secs.to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    timed.env("LD_LIBRARY_PATH", lib);
    timed.output().expect("run program")
}
