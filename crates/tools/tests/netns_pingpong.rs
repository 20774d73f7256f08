//! `fi_pingpong -c -S all` between two hosts simulated by two network namespaces joined
//! by a veth pair (`ofi-testkit (netns)`): the server in one namespace, the client in the other
//! naming the server's veth address, for udp `dgram`, `udp;ofi_rxd` `rdm`, tcp `msg`
//! and `tcp;ofi_rxm` `rdm`; each with no provider variable set (the providers must
//! pick an address the other namespace reaches), and with `FI_UDP_IFACE` /
//! `FI_TCP_IFACE` naming each side's veth end.
//!
//! Each test makes its own pair (names and addresses unique per process and pair), so
//! they run in parallel; the pair is deleted on drop, also when a check fails. Without
//! root or `ip netns` each test prints a `SKIP` line and passes. Both processes run
//! under a watchdog: killed by PID and reaped when over [`LIMIT`].

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ofi_testkit::netns::{Children, End, NetPair};

/// The bound of one run (server and client).
const LIMIT: Duration = Duration::from_secs(90);
/// The server's control port (fi_pingpong's default).
const CTRL_PORT: u16 = 47592;

/// `fi_pingpong` with `args` in `end`'s namespace, with a clean environment:
/// no provider variable but `vars`.
fn pingpong(end: &End, args: &[&str], vars: &[(&str, String)], out: &Path) -> Child {
    let mut c: Command = end.command(env!("CARGO_BIN_EXE_fi_pingpong"));
    c.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("FI_") {
            c.env_remove(k);
        }
    }
    c.env("OFI_PLUGINS_CONFIG", "/dev/null");
    for (k, v) in vars {
        c.env(k, v);
    }
    let log = std::fs::File::create(out).expect("output file");
    c.stdin(Stdio::null())
        .stdout(log.try_clone().expect("dup"))
        .stderr(log)
        .spawn()
        .expect("spawn fi_pingpong")
}

/// Whether process `pid` has left this test's network namespace (`ip netns exec` starts
/// in ours and enters the other one before it runs the program).
fn in_other_namespace(pid: u32) -> bool {
    let ns = |path: &str| std::fs::read_link(path).ok();
    let theirs = ns(&format!("/proc/{pid}/ns/net"));
    theirs.is_some() && theirs != ns("/proc/self/ns/net")
}

/// Whether process `pid`'s network namespace has a TCP socket listening on `port`
/// (`/proc/<pid>/net/tcp` lists the sockets of the process's namespace). Asked only once
/// the process is in its own namespace: before that the table is ours, where another
/// program may listen on the same port.
fn listening(pid: u32, port: u16) -> bool {
    if !in_other_namespace(pid) {
        return false;
    }
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")) else {
        return false;
    };
    let want = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
    })
}

/// Run one cell; `iface_var`: set it on each side to that side's veth end.
fn cell(test: &str, provider: &str, ep_type: &str, iface_var: Option<&str>) {
    let pair = match NetPair::two_namespaces() {
        Ok(p) => p,
        Err(why) => return ofi_testkit::netns::skip(test, &why),
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let (server_log, client_log) = (dir.path().join("server"), dir.path().join("client"));
    let vars = |end: &End| -> Vec<(&str, String)> {
        iface_var
            .map(|v| vec![(v, end.iface.clone())])
            .unwrap_or_default()
    };
    let common = ["-p", provider, "-e", ep_type, "-c", "-S", "all", "-I", "5"];
    let started = Instant::now();
    let mut procs = Children(vec![pingpong(
        &pair.a,
        &common,
        &vars(&pair.a),
        &server_log,
    )]);
    let server_pid = procs.0[0].id();
    while !listening(server_pid, CTRL_PORT) {
        if let Ok(Some(st)) = procs.0[0].try_wait() {
            panic!(
                "{test}: the server ended ({st}) before listening:\n{}",
                std::fs::read_to_string(&server_log).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < LIMIT,
            "{test}: the server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let server_ip = pair.a.ip.to_string();
    let mut client_args = common.to_vec();
    client_args.push(&server_ip);
    procs
        .0
        .push(pingpong(&pair.b, &client_args, &vars(&pair.b), &client_log));
    let mut status = [None, None];
    while status.iter().any(Option::is_none) && started.elapsed() < LIMIT {
        for (i, c) in procs.0.iter_mut().enumerate() {
            if status[i].is_none() {
                status[i] = c.try_wait().expect("try_wait");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(procs);
    let server = std::fs::read_to_string(&server_log).unwrap_or_default();
    let client = std::fs::read_to_string(&client_log).unwrap_or_default();
    let report = format!(
        "{test} ({provider} {ep_type}, {}): server {:?}, client {:?}\n-- server:\n{server}\n-- client:\n{client}",
        iface_var.unwrap_or("no variables"),
        status[0],
        status[1]
    );
    assert!(
        status.iter().all(|s| s.is_some_and(|s| s.success())),
        "{report}"
    );
    // The sizes of `-S all` up to the endpoint's largest message ran (a datagram is at
    // most 65495 bytes: its last size is 48k).
    let sizes: &[&str] = if ep_type == "dgram" {
        &["0", "64", "1k", "32k", "48k"]
    } else {
        &["0", "64", "1k", "64k", "1m", "6m"]
    };
    for size in sizes {
        assert!(
            client
                .lines()
                .any(|l| l.split_whitespace().next() == Some(size)),
            "no result row for {size}: {report}"
        );
    }
    // Every message arrived: `#ack` is `=<sent>` on every row (a datagram lost, or
    // never deliverable, prints `-<received>`).
    let rows = client.lines().filter(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit()))
    });
    for row in rows {
        let ack = row.split_whitespace().nth(2).unwrap_or("");
        assert!(
            ack.starts_with('='),
            "messages lost in row {row:?}: {report}"
        );
    }
    println!("{report}");
}

#[test]
fn udp_dgram_across_namespaces() {
    cell("udp_dgram_across_namespaces", "udp", "dgram", None);
}

#[test]
fn udp_dgram_across_namespaces_with_iface() {
    cell(
        "udp_dgram_across_namespaces_with_iface",
        "udp",
        "dgram",
        Some("FI_UDP_IFACE"),
    );
}

#[test]
fn udp_rxd_rdm_across_namespaces() {
    cell("udp_rxd_rdm_across_namespaces", "udp;ofi_rxd", "rdm", None);
}

#[test]
fn udp_rxd_rdm_across_namespaces_with_iface() {
    cell(
        "udp_rxd_rdm_across_namespaces_with_iface",
        "udp;ofi_rxd",
        "rdm",
        Some("FI_UDP_IFACE"),
    );
}

#[test]
fn tcp_msg_across_namespaces() {
    cell("tcp_msg_across_namespaces", "tcp", "msg", None);
}

#[test]
fn tcp_msg_across_namespaces_with_iface() {
    cell(
        "tcp_msg_across_namespaces_with_iface",
        "tcp",
        "msg",
        Some("FI_TCP_IFACE"),
    );
}

#[test]
fn tcp_rxm_rdm_across_namespaces() {
    cell("tcp_rxm_rdm_across_namespaces", "tcp;ofi_rxm", "rdm", None);
}

#[test]
fn tcp_rxm_rdm_across_namespaces_with_iface() {
    cell(
        "tcp_rxm_rdm_across_namespaces_with_iface",
        "tcp;ofi_rxm",
        "rdm",
        Some("FI_TCP_IFACE"),
    );
}
