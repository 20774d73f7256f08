//! `fi_pingpong` and `fi_bw` on `efa` (`FI_EP_RDM` over SRD on the software device,
//! `FI_EFA_DEVICE=soft`) between two processes (`--self` runs the server and the client
//! as two processes of this host) with integrity checks (`-c`), messages and tagged
//! messages, at sizes through every protocol path: eager, medium (several packets sent
//! at once) and long (clear-to-send); also with the software device reordering SRD
//! datagrams, and a server and client started separately; and `FI_EP_DGRAM` over UD.
//!
//! Every child runs bounded: killed by its PID and reaped when over time.

mod common;

use common::{check_table, run_bounded, server_then_client};
use std::process::Command;
use std::time::Duration;

fn command(exe: &str) -> Command {
    let mut c = Command::new(exe);
    for var in ["FI_PROVIDER", "FI_LOG_LEVEL", "FI_HOOK", "FI_PROVIDER_PATH"] {
        c.env_remove(var);
    }
    c.env("OFI_PLUGINS_CONFIG", "/dev/null");
    c.env("FI_EFA_DEVICE", "soft");
    c
}

const SIZES: &str = "0,64,4k,8k,64k,256k";
const SIZE_LIST: &[&str] = &["0", "64", "4k", "8k", "64k", "256k"];

fn self_run(exe: &str, mode: &str, extra_env: &[(&str, &str)]) {
    let mut c = command(exe);
    c.args([
        "--self", "-c", "-e", "rdm", "-p", "efa", "-m", mode, "-I", "20", "-S", SIZES,
    ]);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let r = run_bounded(c, Duration::from_secs(120));
    assert_eq!(
        r.status, 0,
        "{exe} {mode} {extra_env:?}\nstdout: {}\nstderr: {}",
        r.out, r.err
    );
    check_table(&r.out, SIZE_LIST, "20");
}

#[test]
fn pingpong_and_bw_on_efa_rdm_with_integrity_checks() {
    for mode in ["msg", "tagged"] {
        self_run(env!("CARGO_BIN_EXE_fi_pingpong"), mode, &[]);
        self_run(env!("CARGO_BIN_EXE_fi_bw"), mode, &[]);
    }
}

#[test]
fn pingpong_and_bw_on_efa_dgram() {
    // Datagrams over UD (unreliable in general; the software device loses none unless
    // told to): every one counted.
    for exe in [
        env!("CARGO_BIN_EXE_fi_pingpong"),
        env!("CARGO_BIN_EXE_fi_bw"),
    ] {
        let mut c = command(exe);
        c.args([
            "--self",
            "-c",
            "-e",
            "dgram",
            "-p",
            "efa",
            "-I",
            "20",
            "-S",
            "0,64,1k,4k",
        ]);
        let r = run_bounded(c, Duration::from_secs(120));
        assert_eq!(r.status, 0, "{exe}\nstdout: {}\nstderr: {}", r.out, r.err);
        check_table(&r.out, &["0", "64", "1k", "4k"], "20");
    }
}

#[test]
fn pingpong_on_efa_with_the_device_reordering_datagrams() {
    // Every SRD datagram leaves after a random delay of up to 200 µs: the protocol
    // puts messages and their segments back in order.
    self_run(
        env!("CARGO_BIN_EXE_fi_pingpong"),
        "tagged",
        &[
            ("FI_VERBS_SOFT_SRD_REORDER_US", "200"),
            ("FI_VERBS_SOFT_SEED", "7"),
        ],
    );
}

#[test]
fn server_and_client_started_separately() {
    let args = ["-c", "-e", "rdm", "-p", "efa", "-I", "20", "-S", "64,64k"];
    // The client retries its control connection until the server listens.
    let (client, server) = server_then_client(
        || command(env!("CARGO_BIN_EXE_fi_pingpong")),
        &args,
        &args,
        Duration::from_secs(120),
    );
    assert_eq!(client.status, 0, "client: {}\n{}", client.out, client.err);
    assert_eq!(server.status, 0, "server: {}\n{}", server.out, server.err);
    check_table(&client.out, &["64", "64k"], "20");
}
