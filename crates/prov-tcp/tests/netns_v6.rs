//! An IPv6 listener on a host without a global IPv6 address (the namespace of a veth
//! pair has IPv4 and link-local IPv6 only, as many hosts do): bound to the wildcard, it
//! must name itself by an address other hosts reach — the IPv4-mapped form of its
//! IPv4 address, which its dual-stack socket accepts — never `::1`, which sends every
//! other host to itself ("connection refused"; Debian's C `fi_pingpong` over
//! `libfabric.so.1` with `tcp;ofi_rxm` across two namespaces hung on it).
//!
//! A child process in the pair's namespace listens with `FI_SOCKADDR_IN6` and no
//! source address and leaves its name in a file; the parent (the test's own namespace, the other
//! end) connects to that name and sends a message. Needs root (`ip netns`); where the
//! namespace cannot be created the test says so and passes. Everything created is
//! deleted (also when the test fails).

mod common;

use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use ofi::Caps;

const CHILD_ENV: &str = "OFI_TCP_TEST_NETNS_V6_CHILD";

/// The listener, in the namespace: name (left in the file `path`), accept, one message.
fn child(path: &str) {
    let l = listen_unbound(&registry(), true);
    // Written whole, then renamed: the parent never reads half a name.
    std::fs::write(format!("{path}.tmp"), l.addr.to_string()).unwrap();
    std::fs::rename(format!("{path}.tmp"), path).unwrap();
    let (_, s, rb) = accept_with_recv(&l.fabric, &l.domain, &l.eq, 16);
    let e = cq_wait(&s.cq, &[]).unwrap();
    assert_eq!(&rb[..e.len], b"over veth");
}

#[test]
fn an_ipv6_wildcard_listener_is_named_by_an_address_other_hosts_reach() {
    if ofi_testkit::child::played_child(CHILD_ENV, child) {
        return;
    }
    let test = "an_ipv6_wildcard_listener_is_named_by_an_address_other_hosts_reach";
    let Some(pair) = ofi_testkit::netns::NetPair::root_and_namespace_or_skip(test) else {
        return;
    };
    // Named by the first non-loopback interface, then by FI_TCP_IFACE naming the veth
    // end (whose only IPv6 address is link-local).
    for iface in [None, Some(pair.b.iface.as_str())] {
        listen_in_namespace(test, &pair, iface);
    }
}

fn listen_in_namespace(test: &str, pair: &ofi_testkit::netns::NetPair, iface: Option<&str>) {
    let exe = std::env::current_exe().unwrap();
    // Where the child leaves its name (removed at the end).
    let name_file = std::env::temp_dir().join(format!("ofi-tcp-netns-v6-{}", std::process::id()));
    let _ = std::fs::remove_file(&name_file);
    let mut cmd = pair.b.command(exe);
    match iface {
        Some(name) => cmd.env("FI_TCP_IFACE", name),
        None => cmd.env_remove("FI_TCP_IFACE"),
    };
    let mut kid = cmd
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &name_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // The child's name, once it is listening (bounded wait).
        let end = Instant::now() + Duration::from_secs(20);
        let name: SocketAddr = loop {
            if let Ok(text) = std::fs::read_to_string(&name_file) {
                break text.parse().unwrap();
            }
            assert!(
                Instant::now() < end && kid.try_wait().unwrap().is_none(),
                "the child left no name"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(
            name.ip(),
            IpAddr::V6(pair.b.ip.to_ipv6_mapped()),
            "the listener's name (FI_TCP_IFACE {iface:?})"
        );
        let reg = registry();
        let mut info = info(&reg, true, Caps::MSG);
        info.src_addr = None;
        let (_fabric, _domain, c) = connected_client(&reg, &info, name, b"");
        c.ep.inject(b"over veth", 0).unwrap();
        // The child exits once it has the message (bounded); drive our side meanwhile.
        let end = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = kid.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > end {
                break None;
            }
            let _ = c.eq.read();
            let _ = c.cq.read(&mut Vec::<ofi::abi::raw::CqTaggedEntry>::new());
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(
            status.is_some_and(|s| s.success()),
            "the listener in the namespace did not get the message: {status:?}"
        );
    }));
    let _ = kid.kill();
    let _ = kid.wait();
    let _ = std::fs::remove_file(&name_file);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
