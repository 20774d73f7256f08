//! Parameters the provider refuses: it does not start (getinfo finds no udp), and
//! starts again with a good value. Its own binary: it changes the environment, which
//! the provider reads when it starts.

use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{Info, API_VERSION};
use ofi_prov_udp::UdpProvider;

fn udp_starts() -> bool {
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UdpProvider>()],
        ..RegistryConfig::default()
    });
    let mut h = Info::hints();
    h.fabric_attr.prov_name = Some("udp".into());
    reg.getinfo(&GetinfoRequest {
        hints: Some(h),
        ..GetinfoRequest::new(API_VERSION)
    })
    .is_ok_and(|v| !v.is_empty())
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
