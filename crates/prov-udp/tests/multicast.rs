//! `FI_MULTICAST` on loopback: `Endpoint::join` / leave through the core, with the
//! provider parameter `FI_UDP_MCAST_IF=127.0.0.1` so groups are joined on and sent from
//! the loopback interface. One test (this binary sets an environment variable before
//! the provider initialises). If the kernel refuses multicast on loopback the test
//! prints why and returns.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi::abi::raw::CqEntry;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::eq::EqAttr;
use ofi::getinfo::GetinfoRequest;
use ofi::{AddrFormat, Address, Caps, CqFormat, EqEvent, Errno, Info, OpFlags, API_VERSION};
use ofi_conformance::plugin::linked_registry;
use ofi_prov_udp::UdpProvider;

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn endpoint(domain: &Domain, info: &Info) -> (Endpoint, CompletionQueue, ofi::av::AddressVector) {
    common::bound_endpoint(domain, info, &CqAttr::with_format(CqFormat::Context))
}

/// The next completion's context within `limit`, if any.
fn next(cq: &CompletionQueue, limit: Duration) -> Option<usize> {
    let deadline = Instant::now() + limit;
    loop {
        let mut e = [CqEntry::default()];
        match cq.read(&mut e) {
            Ok(1) => return Some(e[0].op_context),
            Ok(n) => panic!("read of one entry returned {n}"),
            Err(x) if x.code() == Errno::EAGAIN => {}
            Err(x) => panic!("cq read: {x}"),
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Post a receive of `buf` (the caller keeps it alive longer than the endpoint).
fn post(ep: &Endpoint, buf: &mut [u8], ctx: usize) {
    // The test declares its buffers before its endpoints, so they outlive every
    // receive posted on them.
    ofi_conformance::fixture::post_recv(ep, buf, ctx).unwrap();
}

#[test]
fn join_send_receive_leave_on_loopback() {
    // This binary's only test: nothing else reads the environment concurrently.
    std::env::set_var("FI_UDP_MCAST_IF", "127.0.0.1");
    // Receive buffers first: they outlive every endpoint below.
    let mut buf = [0u8; 32];
    let mut buf2 = [0u8; 32];
    let reg = linked_registry(&[ofi::abi::entry_for::<UdpProvider>()]);
    let mut h = Info::hints().with_caps(Caps::MSG | Caps::MULTICAST);
    h.addr_format = AddrFormat::SOCKADDR_IN;
    h.fabric_attr.prov_name = Some("udp".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo with FI_MULTICAST")
        .remove(0);
    assert!(info.caps.contains(Caps::MULTICAST), "{}", info.caps);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();

    // The receiver listens on the wildcard address and the group's port.
    let port = free_port();
    let group = Address::Inet(
        format!("239.255.77.{}:{port}", port % 200 + 1)
            .parse()
            .unwrap(),
    );
    let mut rinfo = info.clone();
    rinfo.src_addr = Some(Address::Inet(format!("0.0.0.0:{port}").parse().unwrap()));
    let (rep, rcq, _rav) = endpoint(&domain, &rinfo);
    let eq = fabric.eq_open(&EqAttr::default()).unwrap();
    rep.bind_eq(&eq).unwrap();

    let e = rep.join(&group, 0).unwrap_err();
    assert_eq!(e.code(), Errno::EOPBADSTATE, "join before enable: {e}");
    rep.enable().unwrap();
    let e = rep
        .join(&Address::Inet("127.0.0.1:9".parse().unwrap()), 0)
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "not a multicast address: {e}");
    let e = rep
        .join(&Address::Inet6("[ff02::1]:9".parse().unwrap()), 0)
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "another family: {e}");
    let e = rep.join(&group, OpFlags::TAGGED.bits()).unwrap_err();
    assert_eq!(e.code(), Errno::EBADFLAGS, "{e}");

    let member = match rep.join_with(&group, 0, 0x33) {
        Ok(m) => m,
        Err(e) => {
            println!("SKIP: the kernel refuses multicast group {group} on 127.0.0.1: {e}");
            return;
        }
    };
    let ev = eq.read().expect("FI_JOIN_COMPLETE queued");
    assert_eq!(ev.event, EqEvent::JoinComplete);
    assert_eq!(ev.context, 0x33);

    // The sender joins send-only and sends to the group's fabric address.
    let (sep, scq, _sav) = endpoint(&domain, &info);
    sep.enable().unwrap();
    let mut to_group = sep.join(&group, OpFlags::SEND.bits()).unwrap();
    post(&rep, &mut buf, 7);
    sep.inject(b"to the group", to_group.fi_addr()).unwrap();
    match next(&rcq, Duration::from_secs(2)) {
        Some(7) => assert_eq!(&buf[..12], b"to the group"),
        Some(c) => panic!("unexpected completion {c:#x}"),
        None => {
            let to: SocketAddr = group.socket_addr().unwrap();
            println!("SKIP: nothing arrived through multicast group {to} on loopback");
            return;
        }
    }
    assert!(
        next(&scq, Duration::ZERO).is_none(),
        "inject: no completion"
    );

    // The membership keeps the endpoint open.
    let mut sep = sep;
    assert_eq!(sep.close().unwrap_err().code(), Errno::EBUSY);
    to_group.close().unwrap();
    to_group.close().unwrap();

    // After leaving, the receiver no longer gets the group's datagrams.
    drop(member);
    let (sep2, _scq2, _sav2) = endpoint(&domain, &info);
    sep2.enable().unwrap();
    let again = sep2.join(&group, OpFlags::SEND.bits()).unwrap();
    post(&rep, &mut buf2, 8);
    sep2.inject(b"nobody home", again.fi_addr()).unwrap();
    assert_eq!(
        next(&rcq, Duration::from_millis(200)),
        None,
        "left the group"
    );
    rep.cancel(8).unwrap();
    drop(again);
    sep.close().unwrap();
}
