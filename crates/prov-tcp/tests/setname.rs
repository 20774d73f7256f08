//! `fi_setname` on tcp: a passive endpoint renamed before `fi_listen` listens at the
//! new address (and cannot be renamed once listening); an endpoint named before
//! `fi_connect` connects from that address, which the server sees as its peer (and
//! cannot be renamed once connecting).

mod common;

use common::*;
use ofi::{AddrFormat, Address, Caps, EqEvent, Errno};

fn name(a: std::net::SocketAddr) -> Vec<u8> {
    Address::from(a).to_bytes()
}

fn addr(b: &[u8]) -> std::net::SocketAddr {
    Address::from_bytes(AddrFormat::SOCKADDR_IN, b)
        .unwrap()
        .socket_addr()
        .unwrap()
}

#[test]
fn setname_moves_listener_and_connection_source() {
    let (info, fabric, domain) = open_msg_domain(Caps::MSG);
    let peq = fabric.eq_open(&ofi::eq::EqAttr::default()).unwrap();
    let pep = fabric.passive_ep(&info).expect("passive_ep");
    pep.bind_eq(&peq, 0).unwrap();
    let listen_at: std::net::SocketAddr = format!("127.0.0.1:{}", ofi_testkit::free_tcp_port())
        .parse()
        .unwrap();
    pep.setname(&name(listen_at)).expect("pep setname");
    assert_eq!(
        addr(&pep.getname().unwrap()),
        listen_at,
        "pep getname after setname"
    );
    pep.listen().unwrap();
    let e = pep
        .setname(&name(listen_at))
        .expect_err("setname while listening");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    let e = pep.setname(&[0u8; 5]).expect_err("a 5-byte name");
    assert!(
        matches!(e.code(), Errno::EINVAL | Errno::EOPBADSTATE),
        "{e}"
    );

    let client = side(&fabric, &domain, &info);
    let from: std::net::SocketAddr = format!("127.0.0.1:{}", ofi_testkit::free_tcp_port())
        .parse()
        .unwrap();
    client.ep.setname(&name(from)).expect("ep setname");
    assert_eq!(
        addr(&client.ep.getname().unwrap()),
        from,
        "ep getname before connect"
    );
    client.ep.enable().unwrap();
    client.ep.connect(&name(listen_at), b"").expect("connect");
    let e = client
        .ep
        .setname(&name(from))
        .expect_err("setname while connecting");
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    let req = eq_expect(&peq, EqEvent::ConnReq);
    let server = side(&fabric, &domain, &req.info.expect("connreq info"));
    server.ep.accept(b"").unwrap();
    eq_expect(&client.eq, EqEvent::Connected);
    eq_expect(&server.eq, EqEvent::Connected);
    assert_eq!(
        addr(&client.ep.getname().unwrap()),
        from,
        "ep getname connected"
    );
    assert_eq!(
        addr(&server.ep.getpeer().unwrap()),
        from,
        "the server's peer"
    );
}
