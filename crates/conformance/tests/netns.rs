//! The two-process conformance tests ([`ofi_conformance::twoproc`]) across two hosts
//! simulated by two network namespaces joined by a veth pair (`ofi-testkit (netns)`), for
//! `udp`, `tcp`, `tcp;ofi_rxm` and `udp;ofi_rxd`, with no provider variable set: each
//! side takes the address getinfo gives it with no node, which must be one the other
//! namespace reaches.
//!
//! Each `<provider>_across_namespaces` test makes its pair, then runs itself again in
//! namespace `a` as the parent ([`ROLE_ENV`]), which starts its children in namespace
//! `b` ([`twoproc::CHILD_NETNS_ENV`]) and runs every two-process mode the provider
//! claims (messages, connection management, tagged, RMA). The parent is bounded in
//! time, killed by PID and reaped when over; the pair is deleted on drop, also when a
//! check fails. Without root or `ip netns` each test prints a `SKIP` line and passes.

use std::process::Stdio;
use std::time::{Duration, Instant};

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::twoproc::{self, Mode};
use ofi_conformance::{Capability, Subject};

/// Set in the process that runs as the parent inside namespace `a`.
const ROLE_ENV: &str = "OFI_CONFORMANCE_NETNS_PARENT";

/// The bound of one provider's parent run (every mode, each step bounded by
/// [`twoproc::STEP`] too).
const LIMIT: Duration = Duration::from_secs(240);

/// `provider` (one of the four) with only the in-tree crates it is made of as
/// built-ins (a `tcp` hint also matches `tcp;ofi_rxm`), IPv4.
fn subject(provider: &str) -> Subject {
    // rxm and rxd reach their core through the process-wide registry.
    let _ = ofi::registry();
    let udp = ofi::abi::entry_for::<ofi_prov_udp::UdpProvider>();
    let tcp = ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>();
    let builtins = match provider {
        "udp" => vec![udp],
        "tcp" => vec![tcp],
        "tcp;ofi_rxm" => vec![tcp, ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>()],
        "udp;ofi_rxd" => vec![udp, ofi::abi::entry_for::<ofi_util_rxd::RxdProvider>()],
        other => panic!("no subject for {other}"),
    };
    let reg = Registry::build(RegistryConfig {
        builtins,
        ..RegistryConfig::default()
    });
    Subject::new(reg, provider).with_hints(Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN))
}

/// The areas `provider`'s in-process suite declares (`ofi_conformance::expected`).
fn expected_areas(provider: &str) -> &'static [Capability] {
    use ofi_conformance::expected;
    match provider {
        "udp" => expected::UDP,
        "tcp" => expected::TCP,
        "tcp;ofi_rxm" => expected::RXM,
        "udp;ofi_rxd" => expected::RXD,
        other => panic!("no expected areas for {other}"),
    }
}

/// The parent, in namespace `a`: every two-process mode `provider` claims.
fn parent(provider: &str, child_test: &str) {
    let s = subject(provider);
    let mut ran = Vec::new();
    let modes = [
        (Capability::TwoProcess, None),
        (Capability::TwoProcessCm, Some(Mode::Cm)),
        (Capability::TwoProcessTagged, Some(Mode::Tagged)),
        (Capability::TwoProcessRma, Some(Mode::Rma)),
    ];
    for (cap, mode) in modes {
        let checked = ofi_conformance::run(
            &s,
            &format!("{cap} across namespaces"),
            cap,
            expected_areas(provider),
            |s| match mode {
                None => twoproc::parent(s, child_test),
                Some(m) => twoproc::parent_mode(s, child_test, m),
            },
        );
        if checked {
            ran.push(cap.to_string());
        }
    }
    assert!(!ran.is_empty(), "{provider}: no two-process mode ran");
    println!("PARENT DONE {provider}: {}", ran.join(", "));
}

/// The top-level test: make the pair, run [`parent`] in namespace `a`.
fn across(provider: &str, test: &str, child_test: &str) {
    if std::env::var_os(ROLE_ENV).is_some() {
        return parent(provider, child_test);
    }
    let pair = match ofi_testkit::netns::NetPair::two_namespaces() {
        Ok(p) => p,
        Err(why) => return ofi_testkit::netns::skip(test, &why),
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = dir.path().join("parent");
    let out = std::fs::File::create(&log).expect("log file");
    let mut cmd = pair
        .a
        .command(std::env::current_exe().expect("the test binary"));
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, "1")
        .env(
            twoproc::CHILD_NETNS_ENV,
            pair.b.ns.as_deref().expect("b is in a namespace"),
        )
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out);
    for (k, _) in std::env::vars() {
        if k.starts_with("FI_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("start the parent in its namespace");
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()) && text.contains("PARENT DONE"),
        "{provider} across namespaces ({}): {status:?}\n{text}",
        pair.a.ip
    );
    for line in text
        .lines()
        .filter(|l| l.contains("PARENT DONE") || l.contains("skipped"))
    {
        println!("{line}");
    }
}

macro_rules! across_namespaces {
    ($test:ident, $provider:expr) => {
        /// The parent (made in namespace `a`) starts this same test again in
        /// namespace `b` as its child: no child-only test entry.
        #[test]
        fn $test() {
            if twoproc::is_child() {
                return twoproc::child(&subject($provider));
            }
            across($provider, stringify!($test), stringify!($test));
        }
    };
}

across_namespaces!(udp_across_namespaces, "udp");
across_namespaces!(tcp_across_namespaces, "tcp");
across_namespaces!(rxm_across_namespaces, "tcp;ofi_rxm");
across_namespaces!(rxd_across_namespaces, "udp;ofi_rxd");
