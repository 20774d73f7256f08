//! Connection management: accept with data, reject with data, shutdown, getpeer,
//! FI_OPT_CM_DATA_SIZE, IPv4 and IPv6.

mod common;

use common::*;
use ofi::{AddrFormat, Address, Caps, EqEvent, Errno};

fn accept_and_getpeer(v6: bool) {
    let p = connect_pair(v6, Caps::MSG);
    let fmt = if v6 {
        AddrFormat::SOCKADDR_IN6
    } else {
        AddrFormat::SOCKADDR_IN
    };
    let cname = Address::from_bytes(fmt, &p.client.ep.getname().unwrap()).unwrap();
    let speer = Address::from_bytes(fmt, &p.server.ep.getpeer().unwrap()).unwrap();
    assert_eq!(cname, speer);
    let sname = Address::from_bytes(fmt, &p.server.ep.getname().unwrap()).unwrap();
    let cpeer = Address::from_bytes(fmt, &p.client.ep.getpeer().unwrap()).unwrap();
    assert_eq!(sname, cpeer);
    let pname = Address::from_bytes(fmt, &p.pep.getname().unwrap()).unwrap();
    assert_eq!(
        pname.socket_addr().unwrap().port(),
        sname.socket_addr().unwrap().port()
    );
}

#[test]
fn accept_and_getpeer_ipv4() {
    accept_and_getpeer(false);
}

#[test]
fn accept_and_getpeer_ipv6() {
    accept_and_getpeer(true);
}

#[test]
fn reject_with_data_is_econnrefused_with_the_data() {
    let (info, fabric, domain) = open_msg_domain(Caps::MSG);
    let (pep, peq) = listener(&fabric, &info);
    let c = side(&fabric, &domain, &info);
    c.ep.connect(&pep.getname().unwrap(), b"please").unwrap();
    let req = eq_expect(&peq, EqEvent::ConnReq);
    let handle = req.info.as_ref().unwrap().handle;
    assert_ne!(handle, 0);
    pep.reject(handle, b"go away").unwrap();
    // The same handle is gone now.
    assert_eq!(pep.reject(handle, b"").unwrap_err().code(), Errno::EINVAL);
    let err = eq_wait(&c.eq).expect_err("an error event");
    assert_eq!(err.err, Errno::ECONNREFUSED);
    assert_eq!(err.err_data, b"go away");
    // Data calls on the refused endpoint fail without EAGAIN.
    let b = [0u8; 4];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    let r = unsafe { c.ep.send(b.as_ptr(), 4, std::ptr::null_mut(), 0, 0) };
    assert_eq!(r.unwrap_err().code(), Errno::ENOTCONN);
}

#[test]
fn connect_to_nobody_is_an_error_event() {
    let (info, fabric, domain) = open_msg_domain(Caps::MSG);
    // A port nobody listens on: bind a listener, take its address, close it.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let c = side(&fabric, &domain, &info);
    c.ep.connect(&Address::from(addr).to_bytes(), b"").unwrap();
    let err = eq_wait(&c.eq).expect_err("an error event");
    assert_eq!(err.err, Errno::ECONNREFUSED);
}

#[test]
fn shutdown_reaches_the_peer() {
    let p = connect_pair(false, Caps::MSG);
    let mut buf = [0u8; 8];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe {
        p.server
            .ep
            .recv(buf.as_mut_ptr(), 8, std::ptr::null_mut(), 0, 0x77)
            .unwrap()
    };
    p.client.ep.shutdown(0).unwrap();
    eq_expect(&p.client.eq, EqEvent::Shutdown);
    eq_expect(&p.server.eq, EqEvent::Shutdown);
    // The posted receive was flushed.
    let e = cq_wait(&p.server.cq, &[]).expect_err("flushed receive");
    assert_eq!(e.err, Errno::ECANCELED.0);
    assert_eq!(e.op_context, 0x77);
    assert_eq!(p.client.ep.shutdown(0).unwrap_err().code(), Errno::ENOTCONN);
}

#[test]
fn cm_data_size_option() {
    let p = connect_pair(false, Caps::MSG);
    let mut v = [0u8; 8];
    assert_eq!(p.client.ep.getopt(0, 1, &mut v).unwrap(), 8);
    assert_eq!(usize::from_ne_bytes(v), 256);
    assert_eq!(p.pep.getopt(0, 1, &mut v).unwrap(), 8);
    let (info, fabric, domain) = open_msg_domain(Caps::MSG);
    let c = side(&fabric, &domain, &info);
    let too_big = [0u8; 257];
    assert_eq!(
        c.ep.connect(&p.pep.getname().unwrap(), &too_big)
            .unwrap_err()
            .code(),
        Errno::EINVAL
    );
}

/// Both ends of a same-host connection switch to the local congestion control
/// (`FI_TCP_LOCAL_CONGESTION`, default reno), IPv4 and IPv6.
#[test]
fn same_host_connections_use_the_local_congestion_control() {
    for v6 in [false, true] {
        let p = connect_pair(v6, Caps::MSG);
        let fmt = if v6 {
            AddrFormat::SOCKADDR_IN6
        } else {
            AddrFormat::SOCKADDR_IN
        };
        let at = |b: Vec<u8>| Address::from_bytes(fmt, &b).unwrap().socket_addr().unwrap();
        let (c, s) = (
            at(p.client.ep.getname().unwrap()),
            at(p.server.ep.getname().unwrap()),
        );
        assert_eq!(
            congestion_of(c, s).as_deref(),
            Some("reno"),
            "client, v6 {v6}"
        );
        assert_eq!(
            congestion_of(s, c).as_deref(),
            Some("reno"),
            "server, v6 {v6}"
        );
    }
}
