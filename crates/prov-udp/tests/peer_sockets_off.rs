//! `FI_UDP_PEER_SOCKETS=0`: every datagram goes through the endpoint's one socket (its
//! own binary because the parameter is read from the environment when the provider
//! starts).

mod common;

use common::*;
use ofi::Caps;

#[test]
fn with_peer_sockets_off_the_endpoint_keeps_one_socket() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_UDP_PEER_SOCKETS", "0");
    let reg = registry();
    let info = getinfo(&reg, Caps::empty()).unwrap().remove(0);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let (a, b) = (node(&domain, &info), node(&domain, &info));
    let to_b = a.av.insert(std::slice::from_ref(&b.addr)).unwrap()[0];
    // b knows a (the default capabilities include FI_SOURCE_ERR).
    b.av.insert(std::slice::from_ref(&a.addr)).unwrap();
    let mut buf = [0u8; 8];
    for _ in 0..5 {
        post_recv(&b.ep, &mut buf);
        send(&a.ep, b"x", to_b);
        assert_eq!(next(&b.cq).0, 1);
        next(&a.cq);
    }
    // Only the endpoint's own socket is bound to its port.
    let port = a.addr.socket_addr().unwrap().port();
    let bound = common::udp_sockets_on_port(port).len();
    assert_eq!(bound, 1, "sockets on a's port {port}");
}
