//! Two hosts simulated by network namespaces joined by a veth pair (`ofi-testkit (netns)`):
//! the parent (the test's own namespace, veth end `a`) listens with `FI_TCP_IFACE`
//! naming that end, so its passive endpoint binds that interface's address; a child
//! process in the pair's namespace (end `b`) connects over the veth link and sends a
//! message. Needs root (`ip netns`); where the namespace cannot be created the test
//! says so and passes. Everything created is deleted (also when the test fails).
//!
//! This file holds one test and sets `FI_TCP_IFACE` for its own process only.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use ofi::{AddrFormat, Address, Caps, EqEvent};

const CHILD_ENV: &str = "OFI_TCP_TEST_NETNS_CHILD_ADDR";

fn child(addr: &str) {
    let sa: std::net::SocketAddr = addr.parse().unwrap();
    let reg = registry();
    let mut info = info(&reg, false, Caps::MSG);
    info.src_addr = None;
    let (_fabric, _domain, c) = connected_client(&reg, &info, sa, b"from the namespace");
    c.ep.inject(b"over veth", 0).unwrap();
    // Stay until the parent closes the connection (bounded).
    serve_until(&c, Duration::from_secs(10), |c| {
        c.eq.read().is_ok_and(|ev| ev.event == EqEvent::Shutdown)
    });
}

#[test]
fn two_namespaces_over_veth() {
    if ofi_testkit::child::played_child(CHILD_ENV, child) {
        return;
    }
    let Some(pair) =
        ofi_testkit::netns::NetPair::root_and_namespace_or_skip("two_namespaces_over_veth")
    else {
        return;
    };
    // Only this process (the file has one test): the parent's source interface.
    std::env::set_var("FI_TCP_IFACE", &pair.a.iface);
    let reg = registry();
    // No source address from getinfo: the interface parameter decides.
    let Listening {
        fabric,
        domain,
        pep: _pep,
        eq: peq,
        addr: bound,
    } = listen_unbound(&reg, false);
    assert_eq!(
        bound.ip(),
        std::net::IpAddr::from(pair.a.ip),
        "FI_TCP_IFACE={}",
        pair.a.iface
    );
    let exe = std::env::current_exe().unwrap();
    let mut kid = pair
        .b
        .command(exe)
        .args(["two_namespaces_over_veth", "--exact", "--nocapture"])
        .env(CHILD_ENV, bound.to_string())
        .env_remove("FI_TCP_IFACE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (cm_data, s, rb) = accept_with_recv(&fabric, &domain, &peq, 16);
        assert_eq!(cm_data, b"from the namespace");
        let peer = Address::from_bytes(AddrFormat::SOCKADDR_IN, &s.ep.getpeer().unwrap())
            .unwrap()
            .socket_addr()
            .unwrap();
        assert_eq!(
            peer.ip(),
            std::net::IpAddr::from(pair.b.ip),
            "the child's address"
        );
        let e = cq_wait(&s.cq, &[]).unwrap();
        assert_eq!(e.len, 9);
        assert_eq!(&rb[..9], b"over veth");
        s.ep.shutdown(0).unwrap();
    }));
    let end = Instant::now() + Duration::from_secs(10);
    while kid.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = kid.kill();
    let _ = kid.wait();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
