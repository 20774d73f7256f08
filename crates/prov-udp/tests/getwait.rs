//! `fi_control(FI_GETWAIT)` on udp endpoints: a descriptor that polls readable when a
//! datagram arrives — on the endpoint's socket or on a peer socket made after the
//! descriptor was taken — and stops being readable once progress has taken it; refused
//! before `fi_enable` and with a null argument.

mod common;

use common::*;
use ofi::cq::CqAttr;
use ofi::domain::Domain;
use ofi::fabric::Fabric;
use ofi::{Caps, CqFormat, Errno, Info};
use ofi_conformance::checks::control_wait::{readable_within, wait_fd};

/// A domain of the udp provider's first (default) info, its fabric, and that info.
fn open_domain() -> (Fabric, Domain, Info) {
    let reg = registry();
    let info = getinfo(&reg, Caps::empty()).unwrap().remove(0);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    (fabric, domain, info)
}

#[test]
fn getwait_is_refused_before_enable_and_without_an_argument() {
    let (_fabric, domain, info) = open_domain();
    let (ep, _cq, _av) = bound_endpoint(&domain, &info, &CqAttr::with_format(CqFormat::Data));
    let e = wait_fd(&ep).expect_err("FI_GETWAIT before fi_enable");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    ep.enable().unwrap();
    // SAFETY: a null argument is refused before anything is written.
    let e = unsafe { ep.control(ofi::control::GETWAIT, std::ptr::null_mut()) }
        .expect_err("FI_GETWAIT with a null argument");
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    assert!(wait_fd(&ep).unwrap() >= 0);
}

#[test]
fn the_wait_fd_polls_readable_when_a_datagram_arrives() {
    let (_fabric, domain, info) = open_domain();
    let (a, b) = (node(&domain, &info), node(&domain, &info));
    let to_b = a.av.insert(std::slice::from_ref(&b.addr)).unwrap()[0];
    let to_a = b.av.insert(std::slice::from_ref(&a.addr)).unwrap()[0];
    let fd = wait_fd(&b.ep).unwrap();
    assert_eq!(wait_fd(&b.ep).unwrap(), fd, "the same descriptor each time");
    assert!(!readable_within(fd, 0), "readable with nothing sent");

    // Through b's own socket.
    send(&a.ep, b"one", to_b);
    next(&a.cq);
    assert!(
        readable_within(fd, 5000),
        "not readable after a datagram came"
    );
    let mut buf = [0u8; 16];
    post_recv(&b.ep, &mut buf);
    assert_eq!(next(&b.cq).0, 3);
    assert_eq!(&buf[..3], b"one");
    assert!(
        !readable_within(fd, 0),
        "still readable after the receive took it"
    );

    // b sends to a first: b gets a peer socket connected to a, and a's datagrams reach
    // b through it from then on. The descriptor (taken before) must watch it too.
    send(&b.ep, b"hi", to_a);
    next(&b.cq);
    let mut abuf = [0u8; 16];
    post_recv(&a.ep, &mut abuf);
    assert_eq!(next(&a.cq).0, 2);
    send(&a.ep, b"two!", to_b);
    assert!(
        readable_within(fd, 5000),
        "not readable after a datagram came through the peer socket"
    );
    post_recv(&b.ep, &mut buf);
    assert_eq!(next(&b.cq).0, 4);
    assert_eq!(&buf[..4], b"two!");
}
