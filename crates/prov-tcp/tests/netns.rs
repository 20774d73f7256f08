//! Two network namespaces joined by a veth pair: the parent (root namespace, veth end
//! `ofitcp0` = 10.231.7.1) listens with `FI_TCP_IFACE=ofitcp0`, so its passive endpoint
//! binds that interface's address; a child process in namespace `ofitcp_ns`
//! (`ofitcp1` = 10.231.7.2) connects over the veth link and sends a message. Needs root
//! (`ip netns`); where the namespace cannot be created the test says so and passes.
//! Everything created is deleted (also when the test fails).
//!
//! This file holds one test and sets `FI_TCP_IFACE` for its own process only.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ofi::abi::raw::CqTaggedEntry;
use ofi::{AddrFormat, Address, Caps, EqEvent};

const NS: &str = "ofitcp_ns";
const IF0: &str = "ofitcp0";
const IF1: &str = "ofitcp1";
const CHILD_ENV: &str = "OFI_TCP_TEST_NETNS_CHILD_ADDR";

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Deletes the namespace and the veth pair on drop.
struct Net;

impl Drop for Net {
    fn drop(&mut self) {
        ip(&["link", "del", IF0]);
        ip(&["netns", "del", NS]);
    }
}

fn setup() -> Option<Net> {
    // Leftovers of an interrupted run.
    drop(Net);
    if !ip(&["netns", "add", NS]) {
        return None;
    }
    let net = Net;
    let ok = ip(&["link", "add", IF0, "type", "veth", "peer", "name", IF1])
        && ip(&["link", "set", IF1, "netns", NS])
        && ip(&["addr", "add", "10.231.7.1/24", "dev", IF0])
        && ip(&["link", "set", IF0, "up"])
        && ip(&[
            "netns",
            "exec",
            NS,
            "ip",
            "addr",
            "add",
            "10.231.7.2/24",
            "dev",
            IF1,
        ])
        && ip(&["netns", "exec", NS, "ip", "link", "set", IF1, "up"])
        && ip(&["netns", "exec", NS, "ip", "link", "set", "lo", "up"]);
    ok.then_some(net)
}

fn child(addr: &str) {
    let sa: std::net::SocketAddr = addr.parse().unwrap();
    let reg = registry();
    let mut info = info(&reg, false, Caps::MSG);
    info.src_addr = None;
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let c = side(&fabric, &domain, &info);
    c.ep.connect(&Address::from(sa).to_bytes(), b"from the namespace")
        .unwrap();
    eq_expect(&c.eq, EqEvent::Connected);
    c.ep.inject(b"over veth", 0).unwrap();
    // Stay until the parent closes the connection (bounded).
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Ok(ev) = c.eq.read() {
            if ev.event == EqEvent::Shutdown {
                break;
            }
        }
        let _ = c.cq.read(&mut Vec::<CqTaggedEntry>::new());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn two_namespaces_over_veth() {
    if let Ok(addr) = std::env::var(CHILD_ENV) {
        child(&addr);
        return;
    }
    let Some(_net) = setup() else {
        println!("SKIP: cannot create network namespace {NS} (needs root and `ip netns`)");
        return;
    };
    // Only this process (the file has one test): the parent's source interface.
    std::env::set_var("FI_TCP_IFACE", IF0);
    let reg = registry();
    let mut info = info(&reg, false, Caps::MSG);
    // No source address from getinfo: the interface parameter decides.
    info.src_addr = None;
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let (pep, peq) = listener(&fabric, &info);
    let bound = Address::from_bytes(AddrFormat::SOCKADDR_IN, &pep.getname().unwrap())
        .unwrap()
        .socket_addr()
        .unwrap();
    assert_eq!(bound.ip().to_string(), "10.231.7.1", "FI_TCP_IFACE={IF0}");
    let exe = std::env::current_exe().unwrap();
    let mut kid = Command::new("ip")
        .args(["netns", "exec", NS])
        .arg(exe)
        .args(["two_namespaces_over_veth", "--exact", "--nocapture"])
        .env(CHILD_ENV, bound.to_string())
        .env_remove("FI_TCP_IFACE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let req = eq_expect(&peq, EqEvent::ConnReq);
        assert_eq!(req.cm_data, b"from the namespace");
        let s = side(&fabric, &domain, req.info.as_ref().unwrap());
        s.ep.enable().unwrap();
        let mut rb = [0u8; 16];
        // SAFETY: the buffer outlives the receive (its completion is awaited).
        unsafe {
            s.ep.recv(rb.as_mut_ptr(), 16, std::ptr::null_mut(), 0, 1)
                .unwrap()
        };
        s.ep.accept(b"").unwrap();
        eq_expect(&s.eq, EqEvent::Connected);
        let peer = Address::from_bytes(AddrFormat::SOCKADDR_IN, &s.ep.getpeer().unwrap())
            .unwrap()
            .socket_addr()
            .unwrap();
        assert_eq!(peer.ip().to_string(), "10.231.7.2", "the child's address");
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
