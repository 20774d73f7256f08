//! Runs the built `fi_pingpong` and `fi_bw` binaries: the command line (bad options,
//! exit statuses, messages), the result table's shape, `--json`, a client without a
//! server, and `--self -c` (both sides on this host, integrity checks on) for every
//! provider getinfo offers for each endpoint type: the example `unixdgram` plugin (built
//! out of tree, loaded through `FI_PROVIDER_PATH`) and whatever providers this build
//! links in (verbs over the software device, `FI_VERBS_DEVICE=soft`). Providers are
//! enumerated through `fi_info`, so new ones are picked up without edits here.
//!
//! Every child runs under a watchdog (killed by its PID and reaped when over time), and
//! after the `--self` runs no process carrying the run's marker is left.

mod common;

use common::{run_bounded, server_then_client, table, Run};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[allow(dead_code)]
#[path = "../../ofi/tests/vendor/mod.rs"]
mod vendor;

fn plugins() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| vendor::shared_plugin_dir("fi_pingpong-tests"))
}

fn command(exe: &str) -> Command {
    let mut c = Command::new(exe);
    for var in ["FI_PROVIDER", "FI_LOG_LEVEL", "FI_HOOK"] {
        c.env_remove(var);
    }
    c.env("FI_PROVIDER_PATH", plugins());
    c.env("OFI_PLUGINS_CONFIG", "/dev/null");
    // verbs (and verbs;ofi_rxm) over the software device, so they are among the
    // providers every run covers.
    c.env("FI_VERBS_DEVICE", "soft");
    c
}

fn pingpong(args: &[&str]) -> Run {
    let mut c = command(env!("CARGO_BIN_EXE_fi_pingpong"));
    c.args(args);
    run_bounded(c, Duration::from_secs(120))
}

fn bw(args: &[&str]) -> Run {
    let mut c = command(env!("CARGO_BIN_EXE_fi_bw"));
    c.args(args);
    run_bounded(c, Duration::from_secs(120))
}

/// A usage error: status 1, `fi_pingpong: <message>` then the usage on stderr.
fn assert_usage_error(r: &Run, message: &str) {
    assert_eq!(r.status, 1, "stdout: {}\nstderr: {}", r.out, r.err);
    assert!(r.out.is_empty(), "stdout: {}", r.out);
    let first = r.err.lines().next().unwrap_or("");
    assert!(
        first.ends_with(&format!("fi_pingpong: {message}")),
        "first line {first:?}, wanted ...fi_pingpong: {message}"
    );
    assert!(r.err.contains("\nUsage:\n"), "{}", r.err);
}

#[test]
fn bad_options_exit_1_with_the_message_and_usage() {
    let cases: &[(&[&str], &str)] = &[
        (&["-x"], "invalid option -- 'x'"),
        (&["-I"], "option requires an argument -- 'I'"),
        (&["-e", "foo"], "Unknown endpoint : foo"),
        (
            &["-I", "0"],
            "invalid number of iterations for -I: '0' (at least 1)",
        ),
        (
            &["-S", "12q"],
            "invalid size for -S: '12q' (a size, a comma-separated list of sizes, or 'all')",
        ),
        (&["-P", "70000"], "invalid port for -P: '70000'"),
        (
            &["--pin", "a"],
            "invalid CPU list for --pin: 'a' (CPU_A,CPU_B)",
        ),
        (
            &["--self", "127.0.0.1"],
            "--self runs both sides on this host: give no server address",
        ),
        (&["a", "b"], "one server address expected, got 2: a b"),
        (&["--bogus"], "unrecognized option '--bogus'"),
        // -W belongs to fi_bw only.
        (&["-W", "8"], "invalid option -- 'W'"),
    ];
    for (args, message) in cases {
        assert_usage_error(&pingpong(args), message);
    }
    let r = bw(&["-W", "0"]);
    r.assert_err_has(1, "fi_bw: invalid window for -W: '0' (1 to 4096)");
}

#[test]
fn help_prints_usage_on_stderr_with_status_1_like_c() {
    let r = pingpong(&["-h"]);
    assert_eq!(r.status, 1);
    assert!(r.out.is_empty());
    assert!(r.err.starts_with("Usage:\n"), "{}", r.err);
    for opt in [
        "-B", "-P", "-d", "-f", "-s", "-p", "-e", "-I", "-S", "-c", "-m", "-v", "-6",
    ] {
        assert!(
            r.err.contains(&format!("\n {opt} ")),
            "{opt} missing:\n{}",
            r.err
        );
    }
    for opt in ["--self", "--json", "--pin", "--timeout"] {
        assert!(r.err.contains(opt), "{opt} missing:\n{}", r.err);
    }
    let r = bw(&["--help"]);
    assert_eq!(r.status, 1);
    assert!(r.err.contains(" -W <number>"), "{}", r.err);
}

#[test]
fn client_without_server_fails_fast_with_connection_refused() {
    // A port nobody listens on: bind one, note it, close it.
    let port = ofi_testkit::free_tcp_port().to_string();
    for r in [
        pingpong(&["-P", &port, "127.0.0.1"]),
        bw(&["-P", &port, "127.0.0.1"]),
    ] {
        assert_eq!(r.status, 111, "stdout: {}\nstderr: {}", r.out, r.err);
        assert!(
            r.err.contains(&format!(
                "control socket: connect to 127.0.0.1:{port}: Connection refused"
            )),
            "{}",
            r.err
        );
        assert!(r.out.is_empty(), "{}", r.out);
        assert!(r.took < Duration::from_secs(10), "took {:?}", r.took);
    }
}

#[test]
fn unknown_provider_is_enodata_with_the_reason() {
    let r = pingpong(&["--self", "-p", "no_such_provider"]);
    r.assert_err_has(
        61,
        "fi_getinfo (FI_EP_DGRAM endpoint, provider no_such_provider)",
    );
}

/// The providers `fi_info` lists for `ep_type` with `caps` and the modes fi_pingpong supports.
fn providers(ep_type: &str, caps: &str) -> Vec<String> {
    let mut c = command(env!("CARGO_BIN_EXE_fi_info"));
    c.args(["-t", ep_type, "-c", caps, "-m", "FI_CONTEXT|FI_CONTEXT2"]);
    let r = run_bounded(c, Duration::from_secs(60));
    let mut v: Vec<String> = r
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("provider: "))
        .map(str::to_string)
        .collect();
    v.dedup();
    v
}

/// A marker in the command line, to find leftovers in /proc.
fn leftovers(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id().to_string();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
                continue;
            }
            if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(marker) && (cmd.contains("fi_pingpong") || cmd.contains("fi_bw")) {
                    found.push(format!("{name}: {cmd}"));
                }
            }
        }
    }
    found
}

#[test]
fn self_runs_with_integrity_checks_for_every_provider() {
    let marker = "7.31"; // an unusual --timeout, to recognise our processes
    let mut ran = Vec::new();
    for (ep, ep_type) in [
        ("dgram", "FI_EP_DGRAM"),
        ("rdm", "FI_EP_RDM"),
        ("msg", "FI_EP_MSG"),
    ] {
        for (mode, caps) in [("msg", "FI_MSG"), ("tagged", "FI_TAGGED")] {
            for prov in providers(ep_type, caps) {
                let lossy = ep == "dgram";
                let args = [
                    "--self",
                    "-c",
                    "-e",
                    ep,
                    "-p",
                    &prov,
                    "-m",
                    mode,
                    "-I",
                    "50",
                    "-S",
                    "0,64,1k,4k",
                    "--timeout",
                    marker,
                ];
                let r = pingpong(&args);
                assert_eq!(
                    r.status, 0,
                    "fi_pingpong {args:?}\nstdout: {}\nstderr: {}",
                    r.out, r.err
                );
                let rows = table(&r.out, &["0", "64", "1k", "4k"], lossy);
                assert!(rows.iter().all(|row| row[1] == "50"), "{}", r.out);
                let r = bw(&args);
                assert_eq!(
                    r.status, 0,
                    "fi_bw {args:?}\nstdout: {}\nstderr: {}",
                    r.out, r.err
                );
                table(&r.out, &["0", "64", "1k", "4k"], lossy);
                ran.push(format!("{prov}/{ep}/{mode}"));
            }
        }
    }
    eprintln!("ran --self -c for: {ran:?}");
    assert!(
        ran.iter().any(|r| r.starts_with("unixdgram/dgram/msg")),
        "the example provider must be among them: {ran:?}"
    );
    for want in [
        "verbs/msg/msg",
        "verbs;ofi_rxm/rdm/msg",
        "verbs;ofi_rxm/rdm/tagged",
    ] {
        assert!(
            ran.iter().any(|r| r == want),
            "{want} (over the software device) must be among them: {ran:?}"
        );
    }
    assert_eq!(
        leftovers(&format!("--timeout {marker}")),
        Vec::<String>::new()
    );
}

#[test]
fn json_gives_one_object_per_size() {
    let r = pingpong(&[
        "--self",
        "--json",
        "-p",
        "unixdgram",
        "-I",
        "20",
        "-S",
        "64,256,1k",
    ]);
    assert_eq!(r.status, 0, "{}", r.err);
    let rows: Vec<serde_json::Value> = r
        .out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(rows.len(), 3, "{}", r.out);
    for (v, size) in rows.iter().zip([64u64, 256, 1024]) {
        assert_eq!(v["bytes"], size);
        assert_eq!(v["sent"], 20);
        assert_eq!(v["provider"], "unixdgram");
        assert_eq!(v["ep_type"], "FI_EP_DGRAM");
        assert_eq!(v["role"], "client");
        assert_eq!(v["total"], size * (20 + v["ack"].as_u64().unwrap()));
        assert!(v["time_s"].as_f64().is_some_and(|t| t >= 0.0));
        assert!(v["usec_per_xfer"].as_f64().is_some_and(|t| t > 0.0));
    }
}

#[test]
fn separate_server_and_client_processes() {
    // The client is retried while the server comes up (each attempt refused at once).
    let (client, server) = server_then_client(
        || command(env!("CARGO_BIN_EXE_fi_pingpong")),
        &["-p", "unixdgram"],
        &["-p", "unixdgram", "-I", "30", "-S", "all"],
        Duration::from_secs(120),
    );
    assert_eq!(client.status, 0, "{}", client.err);
    assert_eq!(server.status, 0, "{}", server.err);
    // -S all, up to the example's max_msg_size (64k): 0 1 2 3 4 6 8 ... 48k 64k.
    let sizes: Vec<String> = client
        .out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    assert_eq!(sizes.first().map(String::as_str), Some("0"));
    assert_eq!(sizes.last().map(String::as_str), Some("64k"));
    assert_eq!(sizes.len(), 33, "{}", client.out);
    let refs: Vec<&str> = sizes.iter().map(String::as_str).collect();
    table(&client.out, &refs, true);
    table(&server.out, &refs, true);
}

/// Large messages between two processes (server and client started separately) over
/// tcp (msg), `tcp;ofi_rxm` (rdm), and verbs (msg) and `verbs;ofi_rxm` (rdm) over the
/// software device, with integrity checks: on loopback these go as same-host copies
/// (tcp's descriptors, and rxm's rendezvous reads that tcp's target copies; the
/// software device's RC queue pairs), so this checks the cross-process copies byte for
/// byte.
#[test]
fn large_messages_between_processes_with_checks() {
    for (prov, ep) in [
        ("tcp", "msg"),
        ("tcp;ofi_rxm", "rdm"),
        ("verbs", "msg"),
        ("verbs;ofi_rxm", "rdm"),
    ] {
        let args = ["-p", prov, "-e", ep, "-c", "-I", "20", "-S", "64k,1m,4m"];
        let (client, server) = server_then_client(
            || command(env!("CARGO_BIN_EXE_fi_pingpong")),
            &args,
            &args,
            Duration::from_secs(120),
        );
        assert_eq!(client.status, 0, "{prov}: {}", client.err);
        assert_eq!(server.status, 0, "{prov}: {}", server.err);
        let rows = table(&client.out, &["64k", "1m", "4m"], false);
        assert!(rows.iter().all(|row| row[1] == "20"), "{}", client.out);
    }
}
