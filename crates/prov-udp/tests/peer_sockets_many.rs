//! `FI_UDP_PEER_SOCKETS=3`: an endpoint that sends to three peers reads their replies
//! from three connected sockets (one at a time "hot", the others in turn), in any
//! order, with the right `FI_SOURCE`, and a fourth peer still reaches its own socket.
//! Its own binary because the parameter is read from the environment when the provider
//! starts.

mod common;

use common::*;
use ofi::{Caps, ADDR_NOTAVAIL};

#[test]
fn replies_from_several_peer_sockets_arrive_in_any_order() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_UDP_PEER_SOCKETS", "3");
    let reg = registry();
    let info = getinfo(&reg, Caps::MSG | Caps::SOURCE).unwrap().remove(0);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let open = || node(&domain, &info);
    let a = open();
    let peers: Vec<Node> = (0..4).map(|_| open()).collect();
    // a knows the four; each knows a.
    let to: Vec<u64> = peers
        .iter()
        .map(|p| a.av.insert(std::slice::from_ref(&p.addr)).unwrap()[0])
        .collect();
    let back: Vec<u64> = peers
        .iter()
        .map(|p| p.av.insert(std::slice::from_ref(&a.addr)).unwrap()[0])
        .collect();
    let mut buf = [0u8; 16];
    // a sends to peers 0..3 (three peer sockets) and to peer 3 (no slot left).
    for (i, p) in peers.iter().enumerate() {
        let mut pb = [0u8; 16];
        post_recv(&p.ep, &mut pb);
        send(&a.ep, &[i as u8; 4], to[i]);
        next(&a.cq);
        assert_eq!(next(&p.cq).0, 4);
    }
    // Replies in a shuffled, repeating order: every one arrives, from the right peer.
    let order = [2usize, 0, 3, 1, 1, 2, 0, 0, 3, 2, 1, 3, 3, 0, 2, 1];
    for (k, &i) in order.iter().enumerate() {
        post_recv(&a.ep, &mut buf);
        send(&peers[i].ep, &[k as u8; 7], back[i]);
        next(&peers[i].cq);
        let (len, src) = next(&a.cq);
        assert_eq!(
            (len, src, buf[0]),
            (7, to[i], k as u8),
            "reply {k} from peer {i}"
        );
        assert_ne!(src, ADDR_NOTAVAIL);
    }
    // Three connected sockets on a's port, none for the fourth peer.
    let port = a.addr.socket_addr().unwrap().port();
    let connected = common::udp_sockets_on_port(port)
        .into_iter()
        .filter(|&c| c)
        .count();
    assert_eq!(connected, 3, "peer sockets on a's port {port}");
}
