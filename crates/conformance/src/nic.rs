//! What a provider's getinfo says about the network interface of each result (`fi_nic`),
//! for the unit tests of providers that fill it from the source address (`ofi_kit::nic`).
//!
//! The checks panic on a failure (they are test code).

use ofi::GetinfoOutcome;

/// Asserts that getinfo answered and that every result names the loopback device as its
/// NIC (its source address is 127.0.0.1): network type `"Loopback"`, an MTU, the link up,
/// on no bus.
///
/// # Panics
/// When there is no result, or a result names no NIC or another device.
pub fn assert_every_nic_is_loopback(out: &GetinfoOutcome) {
    assert!(!out.infos.is_empty(), "no result: {:?}", out.error);
    for info in &out.infos {
        let nic = info.nic.as_ref().expect("a NIC");
        assert_eq!(nic.network_type.as_deref(), Some("Loopback"), "{nic:?}");
        assert!(nic.mtu > 0 && nic.link_up, "{nic:?}");
        assert_eq!(nic.bus, ofi::Bus::Unknown, "loopback sits on no bus");
    }
}
