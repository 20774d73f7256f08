//! `fi_control(FI_GETWAIT)` on tcp endpoints: the connection's socket, which polls
//! readable when a message arrives and stops once progress (a CQ read) has taken it;
//! refused before a connection exists and with a null argument.

mod common;

use common::*;
use ofi::ep::Endpoint;
use ofi::{Caps, Errno, Result};

/// `fi_control(FI_GETWAIT)`: the endpoint's wait descriptor.
fn getwait(ep: &Endpoint) -> Result<i32> {
    let mut fd: i32 = -1;
    // SAFETY: FI_GETWAIT writes an `int` into `arg`; `fd` lives across the call.
    unsafe { ep.control(ofi::control::GETWAIT, (&mut fd as *mut i32).cast()) }?;
    Ok(fd)
}

/// Whether `fd` polls readable within `timeout_ms` (one bounded `poll(2)`).
fn readable_within(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    n == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn getwait_is_refused_before_a_connection_and_without_an_argument() {
    let reg = registry();
    let info = info(&reg, false, Caps::MSG);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let s = side(&fabric, &domain, &info);
    s.ep.enable().unwrap();
    let e = getwait(&s.ep).expect_err("FI_GETWAIT before fi_connect");
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
    let fd = getwait(&server.ep).unwrap();
    assert_eq!(
        getwait(&server.ep).unwrap(),
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
