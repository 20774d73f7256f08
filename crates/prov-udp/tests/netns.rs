//! Hosts simulated by network namespaces joined by a veth pair (`ofi-testkit (netns)`):
//!
//! - `two_namespaces_over_veth`: the parent (the test's own namespace, veth end `a`)
//!   opens an endpoint bound to that end's address; a child process in the pair's
//!   namespace (end `b`, port 47123) sends it a datagram over the veth link
//!   (`FI_SOURCE`: not in the AV yet, so `FI_ADDR_NOTAVAIL`); the parent inserts the
//!   child's address and answers; the child checks the answer and sends again, which
//!   `FI_SOURCE` now names.
//! - `default_addresses_reach_across_namespaces`: a server in one namespace and a
//!   client in the other, each with the endpoint getinfo gives when no address is
//!   asked for (no node, no variable): the server's `fi_getname` must name its veth
//!   address (not loopback), and the client's datagram must reach it and be answered.
//!
//! Needs root (`ip netns`); where the namespaces cannot be created each test says so
//! and passes. Everything created is deleted (also when a test fails), and every child
//! is bounded in time and reaped.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqDataEntry;
use ofi::av::AddressVector;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::ep::Endpoint;
use ofi::registry::Registry;
use ofi::{AddrFormat, Address, Caps, CqFormat, Info, ADDR_NOTAVAIL};
use ofi_conformance::plugin::linked_registry;
use ofi_prov_udp::UdpProvider;
use ofi_testkit::netns::NetPair;

const CHILD_ENV: &str = "OFI_UDP_TEST_NETNS_PARENT_ADDR";
const CHILD_IP_ENV: &str = "OFI_UDP_TEST_NETNS_CHILD_IP";
const ROLE_ENV: &str = "OFI_UDP_TEST_NETNS_ROLE";
const SERVER_ENV: &str = "OFI_UDP_TEST_NETNS_SERVER";
const WAIT: Duration = Duration::from_secs(5);

fn registry() -> Registry {
    linked_registry(&[ofi::abi::entry_for::<UdpProvider>()])
}

/// The udp info for `src` (an IPv4 address to bind; port 0: any; `None`: getinfo's
/// own choice).
fn info(reg: &Registry, src: Option<SocketAddr>) -> Info {
    let mut h = Info::hints().with_caps(Caps::MSG | Caps::SOURCE);
    h.addr_format = AddrFormat::SOCKADDR_IN;
    h.fabric_attr.prov_name = Some("udp".into());
    let mut i = ofi_conformance::fixture::first_info(reg, h);
    if let Some(src) = src {
        i.src_addr = Some(Address::from(src));
    }
    i
}

struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    _domain: ofi::domain::Domain,
    _fabric: ofi::fabric::Fabric,
}

fn side(reg: &Registry, src: Option<SocketAddr>) -> Side {
    let info = info(reg, src);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let (ep, cq, av) = common::bound_endpoint(&domain, &info, &CqAttr::with_format(CqFormat::Data));
    ep.enable().unwrap();
    Side {
        ep,
        cq,
        av,
        _domain: domain,
        _fabric: fabric,
    }
}

fn name(s: &Side) -> SocketAddr {
    Address::from_bytes(AddrFormat::SOCKADDR_IN, &s.ep.getname().unwrap())
        .unwrap()
        .socket_addr()
        .unwrap()
}

/// The next successful completion with its source, within [`WAIT`].
fn next(cq: &CompletionQueue, what: &str) -> (CqDataEntry, u64) {
    ofi_conformance::fixture::wait_from_ok(cq, WAIT, what)
}

/// Post a receive into `buf`.
fn post_recv(s: &Side, buf: &mut [u8], ctx: usize) {
    // Every caller waits for the receive's completion before `buf` goes away.
    ofi_conformance::fixture::post_recv(&s.ep, buf, ctx).unwrap();
}

/// The child's fixed port (its own namespace: nothing else uses it).
const CHILD_PORT: u16 = 47123;

fn child_addr() -> SocketAddr {
    let ip = std::env::var(CHILD_IP_ENV).expect("the child's address");
    SocketAddr::new(ip.parse().unwrap(), CHILD_PORT)
}

/// The child, in the namespace: send to the parent, expect its answer, send again.
fn child(parent: &str) {
    let parent: SocketAddr = parent.parse().unwrap();
    let reg = registry();
    let s = side(&reg, Some(child_addr()));
    let to_parent = s.av.insert(&[Address::from(parent)]).unwrap()[0];
    let mut rb = [0u8; 32];
    post_recv(&s, &mut rb, 2);
    s.ep.inject(b"over veth", to_parent).unwrap();
    let (e, _) = next(&s.cq, "the parent's answer");
    assert_eq!(e.op_context, 2);
    assert_eq!(&rb[..e.len], b"and back", "the answer's bytes");
    s.ep.inject(b"known now", to_parent).unwrap();
    // Stay until the parent has read it (its answer's absence is fine: bounded).
    std::thread::sleep(Duration::from_millis(200));
}

#[test]
fn two_namespaces_over_veth() {
    if ofi_testkit::child::played_child(CHILD_ENV, child) {
        return;
    }
    let Some(pair) = NetPair::root_and_namespace_or_skip("two_namespaces_over_veth") else {
        return;
    };
    let reg = registry();
    let p = side(&reg, Some(SocketAddr::new(pair.a.ip.into(), 0)));
    let bound = name(&p);
    assert_eq!(
        bound.ip(),
        std::net::IpAddr::from(pair.a.ip),
        "bound to the veth address"
    );
    let mut rb = [0u8; 32];
    let mut rb2 = [0u8; 32];
    post_recv(&p, &mut rb, 1);
    let exe = std::env::current_exe().unwrap();
    let mut kid = pair
        .b
        .command(exe)
        .args(["two_namespaces_over_veth", "--exact", "--nocapture"])
        .env(CHILD_ENV, bound.to_string())
        .env(CHILD_IP_ENV, pair.b.ip.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (e, src) = next(&p.cq, "the child's datagram");
        assert_eq!(&rb[..e.len], b"over veth");
        assert_eq!(src, ADDR_NOTAVAIL, "a source not in the AV");
        let child_addr = SocketAddr::new(pair.b.ip.into(), CHILD_PORT);
        let child = p.av.insert(&[Address::from(child_addr)]).unwrap()[0];
        assert_ne!(child, ADDR_NOTAVAIL);
        post_recv(&p, &mut rb2, 3);
        p.ep.inject(b"and back", child).unwrap();
        let (e, src) = next(&p.cq, "the child's second datagram");
        assert_eq!(&rb2[..e.len], b"known now");
        assert_eq!(src, child, "FI_SOURCE names the child once it is in the AV");
    }));
    let end = Instant::now() + Duration::from_secs(10);
    let mut finished = false;
    while Instant::now() < end {
        if kid.try_wait().unwrap().is_some() {
            finished = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if !finished {
        let _ = kid.kill();
    }
    let st = kid.wait().expect("reaping the child");
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
    assert!(finished, "the child did not finish within 10 s");
    assert!(st.success(), "the child failed: {st}");
}

/// The server of `default_addresses_reach_across_namespaces`: prints its name, answers
/// one datagram (which carries the client's name) with "pong".
fn default_server() {
    let reg = registry();
    let s = side(&reg, None);
    let me = name(&s);
    println!("SERVER {me}");
    let mut rb = [0u8; 64];
    post_recv(&s, &mut rb, 1);
    let (e, _) = next(&s.cq, "the client's datagram");
    let client: SocketAddr = std::str::from_utf8(&rb[..e.len])
        .expect("text")
        .parse()
        .expect("the client's name");
    let to = s.av.insert(&[Address::from(client)]).unwrap()[0];
    s.ep.inject(b"pong", to).unwrap();
    // Stay until the client has read it (bounded; its absence is the client's failure).
    std::thread::sleep(Duration::from_millis(200));
}

/// The client: sends its own name to the server's, expects "pong".
fn default_client(server: &str) {
    let reg = registry();
    let s = side(&reg, None);
    let me = name(&s);
    assert!(!me.ip().is_loopback(), "the client is named {me}");
    let to =
        s.av.insert(&[Address::from(server.parse::<SocketAddr>().unwrap())])
            .unwrap()[0];
    let mut rb = [0u8; 16];
    post_recv(&s, &mut rb, 2);
    s.ep.inject(me.to_string().as_bytes(), to).unwrap();
    let (e, _) = next(&s.cq, "the server's answer");
    assert_eq!(&rb[..e.len], b"pong");
}

#[test]
fn default_addresses_reach_across_namespaces() {
    const TEST: &str = "default_addresses_reach_across_namespaces";
    match std::env::var(ROLE_ENV).as_deref() {
        Ok("server") => return default_server(),
        Ok("client") => return default_client(&std::env::var(SERVER_ENV).unwrap()),
        _ => {}
    }
    let pair = match NetPair::two_namespaces() {
        Ok(p) => p,
        Err(why) => return ofi_testkit::netns::skip(TEST, &why),
    };
    let exe = std::env::current_exe().unwrap();
    let spawn = |end: &ofi_testkit::netns::End, role: &str, server: &str| {
        let mut c = end.command(&exe);
        c.args([TEST, "--exact", "--nocapture"])
            .env(ROLE_ENV, role)
            .env(SERVER_ENV, server)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, _) in std::env::vars() {
            if k.starts_with("FI_") {
                c.env_remove(k);
            }
        }
        c.spawn().unwrap()
    };
    let mut kids = ofi_testkit::netns::Children(vec![spawn(&pair.a, "server", "")]);
    // The server's first line names it (bounded: the reader ends with the process).
    let out = kids.0[0].stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(i) = line.find("SERVER ") {
                let _ = tx.send(line[i + 7..].trim().to_string());
            }
        }
    });
    let server = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server's name");
    let server_addr: SocketAddr = server.parse().unwrap();
    assert_eq!(
        server_addr.ip(),
        std::net::IpAddr::from(pair.a.ip),
        "with no address asked for, the server is named by its veth address"
    );
    kids.0.push(spawn(&pair.b, "client", &server));
    let end = Instant::now() + Duration::from_secs(30);
    let mut status = [None, None];
    while status.iter().any(Option::is_none) && Instant::now() < end {
        for (i, k) in kids.0.iter_mut().enumerate() {
            if status[i].is_none() {
                status[i] = k.try_wait().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(kids);
    assert!(
        status.iter().all(|s| s.is_some_and(|s| s.success())),
        "server {:?}, client {:?} (none: killed after 30 s)",
        status[0],
        status[1]
    );
}
