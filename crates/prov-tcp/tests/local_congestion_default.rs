//! `FI_TCP_LOCAL_CONGESTION=system`: same-host connections keep the system's
//! congestion control (its own binary because the parameter is read from the
//! environment when the provider starts).

mod common;

use common::*;
use ofi::{AddrFormat, Address, Caps};

#[test]
fn local_congestion_system_leaves_the_system_default() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_TCP_LOCAL_CONGESTION", "system");
    let p = connect_pair(false, Caps::MSG);
    let at = |b: Vec<u8>| {
        Address::from_bytes(AddrFormat::SOCKADDR_IN, &b)
            .unwrap()
            .socket_addr()
            .unwrap()
    };
    let (c, s) = (
        at(p.client.ep.getname().unwrap()),
        at(p.server.ep.getname().unwrap()),
    );
    let system = system_congestion();
    assert!(!system.is_empty(), "no system default to compare with");
    assert_eq!(congestion_of(c, s), Some(system.clone()), "client");
    assert_eq!(congestion_of(s, c), Some(system), "server");
}
