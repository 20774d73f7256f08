//! getinfo: results name the provider and stay within its claims; hints it cannot
//! meet are `FI_ENODATA`; `FI_PROV_ATTR_ONLY`; the endpoint-type filter.

use ofi::{Caps, EpType, Errno, GetinfoFlags, Version, API_VERSION};

use crate::fixture::expect_errno;
use crate::Subject;

/// Every result names the provider (`fabric_attr.prov_name`), with its version.
pub fn getinfo_results_name_the_provider(s: &Subject) {
    let c = s.claimed();
    assert!(!c.infos.is_empty());
    for i in &c.infos {
        assert_eq!(i.prov_name(), s.provider, "result {i:?}");
        assert_ne!(
            i.fabric_attr.prov_version,
            Version::new(0, 0),
            "prov_version unset"
        );
    }
}

/// Capabilities fi_endpoint(3) applies to the receive side only: never in a result's
/// `tx_attr.caps`. Written out from the man page here rather than taken from kit's
/// `RX_ONLY_CAPS` / `TX_ONLY_CAPS`, which build the templates: a wrong kit set must not
/// pass its own check (and out-of-tree providers do not use kit).
const RECEIVE_ONLY: Caps = Caps::RECV
    .union(Caps::REMOTE_READ)
    .union(Caps::REMOTE_WRITE)
    .union(Caps::DIRECTED_RECV)
    .union(Caps::VARIABLE_MSG)
    .union(Caps::MULTI_RECV)
    .union(Caps::SOURCE)
    .union(Caps::RMA_EVENT)
    .union(Caps::SOURCE_ERR);

/// Capabilities fi_endpoint(3) applies to the transmit side only: never in a result's
/// `rx_attr.caps`.
const TRANSMIT_ONLY: Caps = Caps::SEND
    .union(Caps::READ)
    .union(Caps::WRITE)
    .union(Caps::FENCE)
    .union(Caps::MULTICAST)
    .union(Caps::NAMED_RX_CTX);

/// Every result's caps are within the claimed caps, tx/rx caps within the result's
/// and each only of the kind that applies to its side (fi_endpoint(3)), and asking for
/// exactly a result's caps still finds it.
pub fn getinfo_result_caps_are_claimed(s: &Subject) {
    let c = s.claimed();
    for i in &c.infos {
        assert!(c.caps.contains(i.caps));
        assert!(
            !i.tx_attr.caps.intersects(RECEIVE_ONLY),
            "tx_attr.caps {} hold receive-side capabilities {}",
            i.tx_attr.caps,
            i.tx_attr.caps & RECEIVE_ONLY
        );
        assert!(
            !i.rx_attr.caps.intersects(TRANSMIT_ONLY),
            "rx_attr.caps {} hold transmit-side capabilities {}",
            i.rx_attr.caps,
            i.rx_attr.caps & TRANSMIT_ONLY
        );
        assert!(
            i.caps.contains(i.tx_attr.caps),
            "tx_attr.caps {} exceed the result's caps {}",
            i.tx_attr.caps,
            i.caps
        );
        assert!(
            i.caps.contains(i.rx_attr.caps),
            "rx_attr.caps {} exceed the result's caps {}",
            i.rx_attr.caps,
            i.caps
        );
        let again = s
            .getinfo_with(
                Some(s.base_hints().with_caps(i.caps).with_ep_type(i.ep_type())),
                GetinfoFlags::empty(),
            )
            .unwrap_or_else(|e| panic!("asking for a result's own caps {}: {e}", i.caps));
        for j in &again {
            assert!(
                j.caps.contains(i.caps),
                "asked for {}, got a result with {}",
                i.caps,
                j.caps
            );
        }
    }
}

/// Hints asking for a capability the provider claims nowhere: `FI_ENODATA`.
pub fn getinfo_unclaimed_cap_is_enodata(s: &Subject) {
    let c = s.claimed();
    let candidates = [
        Caps::TAGGED,
        Caps::RMA,
        Caps::ATOMIC,
        Caps::MSG,
        Caps::MULTICAST,
        Caps::NAMED_RX_CTX,
        Caps::DIRECTED_RECV,
        Caps::REMOTE_COMM,
    ];
    let mut tried = 0;
    for cap in candidates {
        if c.caps.contains(cap) {
            continue;
        }
        tried += 1;
        expect_errno(
            s.getinfo_with(Some(s.base_hints().with_caps(cap)), GetinfoFlags::empty()),
            Errno::ENODATA,
            &format!("asking for {cap}"),
        );
    }
    assert!(tried > 0, "the provider claims every candidate capability");
}

/// `FI_PROV_ATTR_ONLY`: exactly one result for the provider, with its name and version
/// and default values elsewhere.
pub fn getinfo_prov_attr_only(s: &Subject) {
    let all = s
        .getinfo_with(None, GetinfoFlags::PROV_ATTR_ONLY)
        .unwrap_or_else(|e| panic!("FI_PROV_ATTR_ONLY: {e}"));
    // A layered subject (`tcp;ofi_rxm`) is listed under its top provider (`ofi_rxm`).
    let top = ofi::select::top_of_stack(&s.provider);
    let mine: Vec<_> = all.iter().filter(|i| i.prov_name() == top).collect();
    assert_eq!(mine.len(), 1, "one result per provider: {all:#?}");
    let i = mine[0];
    assert_eq!(
        i.fabric_attr.prov_version,
        s.claimed().infos[0].fabric_attr.prov_version
    );
    assert_eq!(i.caps, Caps::empty());
    assert_eq!(i.ep_type(), EpType::Unspec);
}

/// An endpoint-type hint keeps only results of that type; a type the provider does not
/// offer is `FI_ENODATA`.
pub fn getinfo_ep_type_filter(s: &Subject) {
    let c = s.claimed();
    for &t in &c.ep_types {
        let r = s
            .getinfo_with(Some(s.base_hints().with_ep_type(t)), GetinfoFlags::empty())
            .unwrap_or_else(|e| panic!("ep type {t}: {e}"));
        assert!(!r.is_empty());
        assert!(r.iter().all(|i| i.ep_type() == t), "asked for {t}: {r:#?}");
    }
    for t in [EpType::Msg, EpType::Dgram, EpType::Rdm] {
        if c.ep_types.contains(&t) {
            continue;
        }
        expect_errno(
            s.getinfo_with(Some(s.base_hints().with_ep_type(t)), GetinfoFlags::empty()),
            Errno::ENODATA,
            &format!("asking for {t}"),
        );
    }
}

/// A version newer than the library's is `FI_ENOSYS` (fi_getinfo(3), newer page).
pub fn getinfo_newer_api_version_is_enosys(s: &Subject) {
    let newer = Version::new(API_VERSION.major, API_VERSION.minor + 1);
    expect_errno(
        s.registry.getinfo(&ofi::getinfo::GetinfoRequest {
            hints: Some(s.base_hints()),
            ..ofi::getinfo::GetinfoRequest::new(newer)
        }),
        Errno::ENOSYS,
        "a newer API version must be refused",
    );
}

/// Where an answer describes a NIC (`fi_info->nic`), it describes one of this host's
/// network interfaces as the kernel does: the device name is an interface in
/// /sys/class/net, and the bus is `FI_BUS_PCI` at the PCI function the interface's
/// `device` link leads to (the device itself, or its parent for a virtio NIC) or
/// `FI_BUS_UNKNOWN` when that link leads to no PCI function (loopback, veth). Read here
/// from sysfs independently of the provider; an answer without a NIC passes.
pub fn getinfo_nic_describes_a_host_interface(s: &Subject) {
    use ofi::attr::Bus;
    for i in &s.claimed().infos {
        let Some(nic) = &i.nic else { continue };
        let name = nic
            .device_name
            .as_deref()
            .unwrap_or_else(|| panic!("{}: a nic without a device name", s.provider));
        let class = std::path::Path::new("/sys/class/net").join(name);
        assert!(
            class.exists(),
            "{}: nic {name:?} is no interface of this host",
            s.provider
        );
        let expect = pci_function_of(&class.join("device"));
        match nic.bus {
            Bus::Pci(a) => assert_eq!(
                expect,
                Some(a),
                "{}: nic {name:?} says FI_BUS_PCI {a:?}, sysfs's device link leads to {expect:?}",
                s.provider
            ),
            Bus::Unknown => assert_eq!(
                expect, None,
                "{}: nic {name:?} says FI_BUS_UNKNOWN, sysfs has a PCI function",
                s.provider
            ),
        }
    }
}

/// The PCI function a `device` link leads to: its target or the target's parent, when
/// its name is a PCI address as sysfs writes it (`DDDD:BB:DD.F`); `None` without a link
/// or a PCI name.
fn pci_function_of(link: &std::path::Path) -> Option<ofi::attr::PciAddress> {
    let target = std::fs::canonicalize(link).ok()?;
    let found = [Some(target.as_path()), target.parent()]
        .into_iter()
        .flatten()
        .filter_map(|p| p.file_name()?.to_str())
        .find_map(ofi::attr::PciAddress::parse);
    found
}
