//! The C library's own `fi_pingpong` (Debian `libfabric-bin`, unmodified) between two
//! processes over our libfabric.so.1, every size with data checks (`-S all -c`), for
//! shm rdm, tcp msg, tcp;ofi_rxm rdm, udp dgram and udp;ofi_rxd rdm. Skipped, with the
//! reason printed, when the binary is absent (CI installs it).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FI_PINGPONG: &str = "/usr/bin/fi_pingpong";

/// A control port the kernel just handed out as free (bound on the wildcard address,
/// as the server binds, then released). A fixed or pid-derived port could sit in the
/// ephemeral range and be taken by any other connection of the test run; another
/// process may still take this one before the server binds it, so a server failing
/// with `EADDRINUSE` is retried with a new port (see [`pingpong`]).
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .expect("a free TCP port")
        .port()
}

/// How one run of the pair ended.
enum Run {
    /// The server could not bind its control port (taken meanwhile): try another.
    PortTaken,
    /// Client output and the server's (success, stdout, stderr).
    Done(std::process::Output, (bool, String, String)),
}

fn pingpong(prov: &str, ep: &str) {
    if !Path::new(FI_PINGPONG).exists() {
        eprintln!("fi_pingpong: SKIPPED: {FI_PINGPONG} not found (install libfabric-bin)");
        return;
    }
    const ATTEMPTS: usize = 3;
    let (client, server) = (0..ATTEMPTS)
        .find_map(|_| match run_pair(prov, ep, free_port()) {
            Run::PortTaken => None,
            Run::Done(client, server) => Some((client, server)),
        })
        .unwrap_or_else(|| panic!("{prov} {ep}: control port taken {ATTEMPTS} times"));
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

/// Runs the server with control port `port` and the client against it.
fn run_pair(prov: &str, ep: &str, port: u16) -> Run {
    let lib = common::lib_dir();
    let port = port.to_string();
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
    // The client retries its control connection until the server listens (or gave up).
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
        let server_gone = matches!(server.try_wait(), Ok(Some(_)));
        if !refused || server_gone || start.elapsed() > Duration::from_secs(20) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = server_output(&mut server);
    if !server.0 && server.2.contains("Address already in use") {
        return Run::PortTaken;
    }
    Run::Done(client, server)
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

/// One test per provider and endpoint type: `name: provider, endpoint type`.
macro_rules! pingpong_tests {
    ($($name:ident: $prov:literal, $ep:literal;)*) => {
        $(
            #[test]
            fn $name() {
                pingpong($prov, $ep);
            }
        )*
    };
}

pingpong_tests! {
    shm_rdm: "shm", "rdm";
    tcp_msg: "tcp", "msg";
    tcp_rxm_rdm: "tcp;ofi_rxm", "rdm";
    udp_dgram: "udp", "dgram";
    udp_rxd_rdm: "udp;ofi_rxd", "rdm";
}
