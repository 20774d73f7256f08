//! `fi_control(FI_GETWAIT)` on tcp endpoints: the connection's socket, which polls
//! readable when a message arrives and stops once progress (a CQ read) has taken it;
//! refused before a connection exists and with a null argument.

mod common;

use common::*;
use ofi::{Caps, Errno};
use ofi_conformance::checks::control_wait::{readable_within, wait_fd};

#[test]
fn getwait_is_refused_before_a_connection_and_without_an_argument() {
    let (info, fabric, domain) = open_msg_domain(Caps::MSG);
    let s = side(&fabric, &domain, &info);
    s.ep.enable().unwrap();
    let e = wait_fd(&s.ep).expect_err("FI_GETWAIT before fi_connect");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    let p = connect_pair(false, Caps::MSG);
    // SAFETY: a null argument is refused before anything is written.
    let e = unsafe {
        p.client
            .ep
            .control(ofi::control::GETWAIT, std::ptr::null_mut())
    }
    .expect_err("FI_GETWAIT with a null argument");
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
}

/// A connected pair whose two sides are in domains of their own (a domain's progress
/// engine drives all its endpoints: reading the client's CQ would take the server's
/// bytes off its socket).
fn pair_in_two_domains() -> (Side, Side, ofi::ep::PassiveEndpoint) {
    let reg = registry();
    let info = info(&reg, false, Caps::MSG);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let client_domain = fabric.domain(&info).expect("client domain");
    let server_domain = fabric.domain(&info).expect("server domain");
    let (client, (pep, _peq), rinfo) = connect_request(&fabric, &client_domain, &info, b"");
    let server = side(&fabric, &server_domain, &rinfo);
    server.ep.accept(b"").expect("accept");
    eq_expect(&client.eq, ofi::EqEvent::Connected);
    eq_expect(&server.eq, ofi::EqEvent::Connected);
    (client, server, pep)
}

#[test]
fn the_wait_fd_polls_readable_when_a_message_arrives() {
    let (client, server, _pep) = pair_in_two_domains();
    let fd = wait_fd(&server.ep).unwrap();
    assert_eq!(
        wait_fd(&server.ep).unwrap(),
        fd,
        "the same descriptor each time"
    );
    assert!(!readable_within(fd, 0), "readable with nothing sent");
    let msg = b"wake up";
    let null = std::ptr::null_mut();
    // SAFETY: `msg` outlives the send, whose completion is read below.
    unsafe { client.ep.send(msg.as_ptr(), msg.len(), null, 0, 1) }.unwrap();
    cq_wait(&client.cq, &[]).expect("send completion");
    assert!(
        readable_within(fd, 5000),
        "not readable after a message came"
    );
    let mut buf = [0u8; 16];
    // SAFETY: `buf` outlives the receive, whose completion is read below.
    unsafe { server.ep.recv(buf.as_mut_ptr(), buf.len(), null, 0, 2) }.unwrap();
    let c = cq_wait(&server.cq, &[]).expect("receive completion");
    assert_eq!(c.len, msg.len());
    assert_eq!(&buf[..msg.len()], msg);
    assert!(
        !readable_within(fd, 0),
        "still readable after the receive took it"
    );
}
