//! Traffic classes (`tx_attr.tclass`, fi_endpoint(3) `fi_tc_dscp_set`): the DSCP value
//! of an endpoint's class is on its connection's socket (`IP_TOS` / `IPV6_TCLASS`,
//! read back with `getsockopt`), on the connecting and the accepting side alike; a
//! class that is neither `FI_TC_DSCP` nor a known label is refused.

mod common;

use common::*;
use ofi::control::{tc_dscp_set, TC_BULK_DATA, TC_LABEL};
use ofi::{Address, Caps, EqEvent, Errno};

/// The DSCP value (`TOS >> 2`) of this process's socket from `local` to `peer`.
fn dscp_of(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> u8 {
    let fd = socket_fd_of(local, peer).expect("the connection's socket");
    let (level, name) = if local.is_ipv6() {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` has room for `len` bytes; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "getsockopt: {}", std::io::Error::last_os_error());
    (v >> 2) as u8
}

#[test]
fn endpoint_tclass_marks_the_connection() {
    for v6 in [false, true] {
        let reg = registry();
        let mut info = info(&reg, v6, Caps::MSG);
        info.tx_attr.tclass = tc_dscp_set(46);
        let fabric = reg.open_fabric(&info).expect("fabric");
        let domain = fabric.domain(&info).expect("domain");
        let (client, listening, mut rinfo) = connect_request(&fabric, &domain, &info, b"");
        // An unknown class is refused, and leaves the request to accept.
        rinfo.tx_attr.tclass = TC_LABEL + 77;
        let e = domain
            .endpoint(&rinfo)
            .expect_err("an unknown traffic class");
        assert_eq!(e.code(), Errno::EINVAL, "{e}");
        rinfo.tx_attr.tclass = TC_BULK_DATA;
        let server = side(&fabric, &domain, &rinfo);
        server.ep.accept(b"").expect("accept");
        eq_expect(&client.eq, EqEvent::Connected);
        eq_expect(&server.eq, EqEvent::Connected);
        let at = |b: Vec<u8>| {
            Address::from_bytes(info.addr_format, &b)
                .unwrap()
                .socket_addr()
                .unwrap()
        };
        let (c, s) = (
            at(client.ep.getname().unwrap()),
            at(server.ep.getname().unwrap()),
        );
        assert_eq!(dscp_of(c, s), 46, "client (v6 {v6}): FI_TC_DSCP 46");
        assert_eq!(
            dscp_of(s, c),
            10,
            "server (v6 {v6}): FI_TC_BULK_DATA (AF11)"
        );
        drop((client, server, listening));
    }
}
