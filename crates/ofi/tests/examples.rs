//! Runs the safe-layer examples (built by `cargo test` into target/<profile>/examples/)
//! and the `safe_overhead` bench (built by `cargo test` into target/<profile>/deps/)
//! against the in-tree providers: shm and `tcp;ofi_rxm` for the RDM examples, tcp for
//! the MSG one. Each run is bounded (`--timeout`, small counts) and must exit 0 and
//! print its summary line. An example binary that is missing (a build that skipped
//! examples) fails the test rather than passing silently.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ofi_testkit::assert_contains_all;

/// target/<profile>/examples, from this test's own path (…/deps/examples-HASH).
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").join("examples")
}

/// The newest build of bench `name` in target/<profile>/deps (`name-HASH`, no
/// extension): `cargo test -p ofi` builds it (the bench target has `test = true`).
fn bench_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    let prefix = format!("{name}-");
    let newest = std::fs::read_dir(deps)
        .expect("read the deps dir")
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            file.starts_with(&prefix) && !file.contains('.')
        })
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .max();
    match newest {
        Some((_, path)) => path,
        None => panic!(
            "no {prefix}HASH in {}: build the bench first (`cargo test -p ofi` builds it; `--test examples` alone does not)",
            deps.display()
        ),
    }
}

/// Run example `name` with FI_PROVIDER=`prov` and `args`; its stdout on success.
fn run(name: &str, prov: &str, args: &[&str]) -> String {
    let path = examples_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the examples first (`cargo test -p ofi` builds them; `--test examples` alone does not)",
        path.display()
    );
    run_binary(&path, name, prov, args)
}

/// Run the executable at `path` (called `name` in messages) with FI_PROVIDER=`prov`
/// and `args`; its stdout on success.
fn run_binary(path: &std::path::Path, name: &str, prov: &str, args: &[&str]) -> String {
    let t0 = Instant::now();
    let out = Command::new(path)
        .args(args)
        .args(["--timeout", "60"])
        .env("FI_PROVIDER", prov)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", path.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} with FI_PROVIDER={prov} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(t0.elapsed() < Duration::from_secs(90));
    stdout
}

const RDM: &[&str] = &["shm", "tcp;ofi_rxm"];

/// The provider name the example reports (`ofi_rxm` for the `tcp;ofi_rxm` stack).
fn reported(prov: &str) -> &str {
    prov.rsplit(';').next().unwrap_or(prov)
}

/// Runs example `name` with `args` on each RDM provider; its output must contain
/// `summary(provider as the example reports it)`. The outputs, in [`RDM`] order.
fn run_on_rdm(name: &str, args: &[&str], summary: impl Fn(&str) -> String) -> Vec<String> {
    RDM.iter()
        .map(|prov| {
            let out = run(name, prov, args);
            let want = summary(reported(prov));
            assert!(out.contains(&want), "{want:?} missing:\n{out}");
            out
        })
        .collect()
}

#[test]
fn rdm_tagged_ping_runs_on_shm_and_rxm() {
    run_on_rdm("rdm_tagged_ping", &["-n", "50"], |p| {
        format!("provider {p}: 50 round trips, tags and bytes verified (child matched 50)")
    });
}

#[test]
fn msg_client_server_runs_on_tcp() {
    let out = run("msg_client_server", "tcp", &["-n", "20"]);
    assert_contains_all(
        &out,
        &[
            "provider tcp: client said \"hello from ",
            "20 requests answered, 20 answers verified by the client",
        ],
    );
}

#[test]
fn rma_write_runs_on_shm_and_rxm() {
    run_on_rdm("rma_write", &["-n", "40"], |p| {
        format!("provider {p}: 40 writes of 64 bytes with remote CQ data 0..40 (initiator saw 40 write completions); every block verified in place")
    });
}

#[test]
fn atomic_counter_runs_on_shm_and_rxm() {
    run_on_rdm("atomic_counter", &["--procs", "3", "-n", "50"], |p| {
        format!("provider {p}: 3 processes x 50 fetch-adds: counter = 150; every prior value 0..150 fetched exactly once")
    });
}

#[test]
fn async_echo_runs_on_shm_and_rxm() {
    for out in run_on_rdm("async_echo", &["-n", "60"], |p| {
        format!("provider {p}: served 60 echoes")
    }) {
        assert!(out.contains("client verified 60"), "{out}");
    }
}

/// The overhead benchmark (`benches/safe_overhead.rs`) still runs, in every mode (tiny
/// counts; its numbers mean nothing in a debug build and are not checked).
#[test]
fn safe_overhead_benchmark_runs() {
    let bench = bench_binary("safe_overhead");
    let run = |_: &str, prov: &str, args: &[&str]| run_binary(&bench, "safe_overhead", prov, args);
    let out = run("safe_overhead", "shm", &["-n", "200", "--rounds", "2"]);
    let header = "safe_overhead: provider shm, 64 B, 2 rounds x 200 round trips per mode";
    assert_contains_all(&out, &[header, "  raw : median ", "  safe: median "]);
    let out = run(
        "safe_overhead",
        "shm",
        &["--self-loop", "-n", "200", "--rounds", "2"],
    );
    assert!(out.contains("safe - raw: "), "{out}");
    // The calibration mode: the second mode is the raw loop's twin.
    let out = run(
        "safe_overhead",
        "shm",
        &["--aa", "-n", "200", "--rounds", "2"],
    );
    assert_contains_all(
        &out,
        &[
            "(--aa: raw' is a second copy of the raw loop)",
            "  raw': median ",
            "raw' - raw (median of the rounds' differences of means)",
        ],
    );
    assert!(!out.contains("  safe:"), "{out}");
}
