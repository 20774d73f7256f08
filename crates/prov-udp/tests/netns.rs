//! Two network namespaces joined by a veth pair: the parent (root namespace, veth end
//! `ofiudp0` = 10.231.8.1) opens an endpoint bound to that address; a child process in
//! namespace `ofiudp_ns` (`ofiudp1` = 10.231.8.2, port 47123) sends it a datagram over
//! the veth link (`FI_SOURCE`: not in the AV yet, so `FI_ADDR_NOTAVAIL`); the parent
//! inserts the child's address and answers; the child checks the answer and sends
//! again, which `FI_SOURCE` now names. Needs root
//! (`ip netns`); where the namespace cannot be created the test says so and passes.
//! Everything created is deleted (also when the test fails), and the child is bounded
//! in time and reaped.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi::abi::raw::CqDataEntry;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::ep::Endpoint;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Address, Caps, CqFormat, Errno, Info, OpFlags, ADDR_NOTAVAIL, API_VERSION};
use ofi_prov_udp::UdpProvider;

const NS: &str = "ofiudp_ns";
const IF0: &str = "ofiudp0";
const IF1: &str = "ofiudp1";
const PARENT_IP: &str = "10.231.8.1";
const CHILD_IP: &str = "10.231.8.2";
const CHILD_ENV: &str = "OFI_UDP_TEST_NETNS_PARENT_ADDR";
const WAIT: Duration = Duration::from_secs(5);

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
    let child_cidr = format!("{CHILD_IP}/24");
    let parent_cidr = format!("{PARENT_IP}/24");
    let ok = ip(&["link", "add", IF0, "type", "veth", "peer", "name", IF1])
        && ip(&["link", "set", IF1, "netns", NS])
        && ip(&["addr", "add", &parent_cidr, "dev", IF0])
        && ip(&["link", "set", IF0, "up"])
        && ip(&[
            "netns",
            "exec",
            NS,
            "ip",
            "addr",
            "add",
            &child_cidr,
            "dev",
            IF1,
        ])
        && ip(&["netns", "exec", NS, "ip", "link", "set", IF1, "up"])
        && ip(&["netns", "exec", NS, "ip", "link", "set", "lo", "up"]);
    ok.then_some(net)
}

fn registry() -> Registry {
    Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UdpProvider>()],
        ..RegistryConfig::default()
    })
}

/// The udp info for `src` (an IPv4 address to bind; port 0: any).
fn info(reg: &Registry, src: SocketAddr) -> Info {
    let mut h = Info::hints().with_caps(Caps::MSG | Caps::SOURCE);
    h.addr_format = AddrFormat::SOCKADDR_IN;
    h.fabric_attr.prov_name = Some("udp".into());
    let mut i = reg
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo")[0]
        .clone();
    i.src_addr = Some(Address::from(src));
    i
}

struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    _domain: ofi::domain::Domain,
    _fabric: ofi::fabric::Fabric,
}

fn side(reg: &Registry, src: SocketAddr) -> Side {
    let info = info(reg, src);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Data))
        .unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let ep = domain.endpoint(&info).unwrap();
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
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
    let end = Instant::now() + WAIT;
    loop {
        let mut e = [CqDataEntry::default()];
        let mut src = [0u64];
        match cq.readfrom(&mut e, &mut src) {
            Ok(1) => return (e[0], src[0]),
            Ok(n) => panic!("{what}: read of one entry returned {n}"),
            Err(x) if x.code() == Errno::EAGAIN => {}
            Err(x) => panic!("{what}: {x}"),
        }
        assert!(Instant::now() < end, "{what}: nothing within {WAIT:?}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Post a receive into `buf`.
fn post_recv(s: &Side, buf: &mut [u8], ctx: usize) {
    // SAFETY: every caller waits for the receive's completion before `buf` goes away.
    unsafe {
        s.ep.recv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            ADDR_NOTAVAIL,
            ctx,
        )
        .unwrap()
    };
}

/// The child's fixed port (its own namespace: nothing else uses it).
const CHILD_PORT: u16 = 47123;

fn child_addr() -> SocketAddr {
    SocketAddr::new(CHILD_IP.parse().unwrap(), CHILD_PORT)
}

/// The child, in the namespace: send to the parent, expect its answer, send again.
fn child(parent: &str) {
    let parent: SocketAddr = parent.parse().unwrap();
    let reg = registry();
    let s = side(&reg, child_addr());
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
    if let Ok(addr) = std::env::var(CHILD_ENV) {
        child(&addr);
        return;
    }
    let Some(_net) = setup() else {
        println!("SKIP: cannot create network namespace {NS} (needs root and `ip netns`)");
        return;
    };
    let reg = registry();
    let p = side(&reg, format!("{PARENT_IP}:0").parse().unwrap());
    let bound = name(&p);
    assert_eq!(
        bound.ip().to_string(),
        PARENT_IP,
        "bound to the veth address"
    );
    let mut rb = [0u8; 32];
    let mut rb2 = [0u8; 32];
    post_recv(&p, &mut rb, 1);
    let exe = std::env::current_exe().unwrap();
    let mut kid = Command::new("ip")
        .args(["netns", "exec", NS])
        .arg(exe)
        .args(["two_namespaces_over_veth", "--exact", "--nocapture"])
        .env(CHILD_ENV, bound.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (e, src) = next(&p.cq, "the child's datagram");
        assert_eq!(&rb[..e.len], b"over veth");
        assert_eq!(src, ADDR_NOTAVAIL, "a source not in the AV");
        let child = p.av.insert(&[Address::from(child_addr())]).unwrap()[0];
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
