//! Parameters the provider refuses: it does not start (getinfo finds no udp), and
//! starts again with a good value. Its own binary: it changes the environment, which
//! the provider reads when it starts.

mod common;

use ofi::Caps;

fn udp_starts() -> bool {
    common::getinfo(&common::registry(), Caps::empty()).is_ok_and(|v| !v.is_empty())
}

#[test]
fn too_many_peer_sockets_stops_the_provider() {
    // The only test of this binary: no other thread reads the environment.
    for bad in ["65", "1000", "-1", "many"] {
        std::env::set_var("FI_UDP_PEER_SOCKETS", bad);
        assert!(!udp_starts(), "{bad:?} was accepted");
    }
    for good in ["0", "1", "64"] {
        std::env::set_var("FI_UDP_PEER_SOCKETS", good);
        assert!(udp_starts(), "{good:?} was refused");
    }
}
