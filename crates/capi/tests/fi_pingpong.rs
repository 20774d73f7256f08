//! The C library's own `fi_pingpong` (Debian `libfabric-bin`, unmodified) between two
//! processes over our libfabric.so.1, every size with data checks (`-S all -c`), for
//! shm rdm, tcp msg, tcp;ofi_rxm rdm, udp dgram and udp;ofi_rxd rdm. Skipped, with the
//! reason printed, when the binary is absent (CI installs it).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FI_PINGPONG: &str = "/usr/bin/fi_pingpong";

/// A control port for this run (distinct per case and per process).
fn port(case: u16) -> u16 {
    40_000 + (std::process::id() % 1000) as u16 * 10 + case
}

fn pingpong(case: u16, prov: &str, ep: &str) {
    if !Path::new(FI_PINGPONG).exists() {
        eprintln!("fi_pingpong: SKIPPED: {FI_PINGPONG} not found (install libfabric-bin)");
        return;
    }
    let lib = common::lib_dir();
    let port = port(case).to_string();
    let args = ["-p", prov, "-e", ep, "-I", "2", "-S", "all", "-c"];
    let mut server = Command::new("timeout")
        .arg("120")
        .arg(FI_PINGPONG)
        .args(args)
        .args(["-B", &port])
        .env("LD_LIBRARY_PATH", lib)
        .env_remove("FI_PROVIDER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the fi_pingpong server");
    // The client retries its control connection until the server listens.
    let start = Instant::now();
    let client = loop {
        let out = Command::new("timeout")
            .arg("120")
            .arg(FI_PINGPONG)
            .args(args)
            .args(["-P", &port, "127.0.0.1"])
            .env("LD_LIBRARY_PATH", lib)
            .env_remove("FI_PROVIDER")
            .output()
            .expect("run the fi_pingpong client");
        let refused = String::from_utf8_lossy(&out.stderr).contains("Connection refused");
        if !refused || start.elapsed() > Duration::from_secs(20) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = server_output(&mut server);
    let cout = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success() && server.0,
        "{prov} {ep}: client\n{cout}\n{}\nserver\n{}\n{}",
        String::from_utf8_lossy(&client.stderr),
        server.1,
        server.2
    );
    // One line per size, up to the largest.
    assert!(cout.contains("bytes"), "{cout}");
    let largest = if ep == "dgram" { "48k" } else { "6m" };
    assert!(
        cout.lines().any(|l| l.starts_with(&format!("{largest} "))),
        "{prov} {ep}: no {largest} line\n{cout}"
    );
}

/// Waits for the server (bounded by its `timeout`): (success, stdout, stderr).
fn server_output(child: &mut std::process::Child) -> (bool, String, String) {
    use std::io::Read;
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    (ok, out, err)
}

/// One test per provider and endpoint type: `name: case, provider, endpoint type`.
macro_rules! pingpong_tests {
    ($($name:ident: $case:literal, $prov:literal, $ep:literal;)*) => {
        $(
            #[test]
            fn $name() {
                pingpong($case, $prov, $ep);
            }
        )*
    };
}

pingpong_tests! {
    shm_rdm: 1, "shm", "rdm";
    tcp_msg: 2, "tcp", "msg";
    tcp_rxm_rdm: 3, "tcp;ofi_rxm", "rdm";
    udp_dgram: 4, "udp", "dgram";
    udp_rxd_rdm: 5, "udp;ofi_rxd", "rdm";
}
