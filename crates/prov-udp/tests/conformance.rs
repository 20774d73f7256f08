//! The conformance suite against the `udp` provider, four ways: linked in (an rlib
//! registered as a built-in) and loaded as a plugin (built as a `.so` by
//! `ofi_conformance::plugin::build_intree`), each over IPv4 and over IPv6; and linked in
//! with `FI_ADDR_STR` addresses.

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, expected, Subject};
use ofi_prov_udp::UdpProvider;

fn linked() -> Registry {
    Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UdpProvider>()],
        ..RegistryConfig::default()
    })
}

fn plugin() -> Registry {
    let dir = ofi_conformance::plugin::build_intree("prov-udp", "ofi_prov_udp");
    Registry::build(RegistryConfig {
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    })
}

fn hints(format: AddrFormat) -> Info {
    let mut h = Info::hints();
    h.addr_format = format;
    h
}

conformance_suite!(
    udp_linked_ipv4,
    Subject::new(linked(), "udp").with_hints(hints(AddrFormat::SOCKADDR_IN)),
    expected::UDP
);
conformance_suite!(
    udp_linked_ipv6,
    Subject::new(linked(), "udp").with_hints(hints(AddrFormat::SOCKADDR_IN6)),
    expected::UDP
);
conformance_suite!(
    udp_plugin_ipv4,
    Subject::new(plugin(), "udp").with_hints(hints(AddrFormat::SOCKADDR_IN)),
    expected::UDP
);
conformance_suite!(
    udp_plugin_ipv6,
    Subject::new(plugin(), "udp").with_hints(hints(AddrFormat::SOCKADDR_IN6)),
    expected::UDP
);
conformance_suite!(
    udp_linked_addr_str,
    Subject::new(linked(), "udp").with_hints(hints(AddrFormat::STR)),
    expected::UDP
);

/// The multicast slots of interface minor 1 cross the plugin boundary: `fi_join` reaches
/// the plugin's endpoint (its errors come back with their codes) and a membership's
/// close reaches its `leave`.
#[test]
fn plugin_join_reaches_the_provider() {
    use ofi::getinfo::GetinfoRequest;
    use ofi::{Address, Caps, Errno, OpFlags};
    let reg = plugin();
    let mut h = hints(AddrFormat::SOCKADDR_IN).with_caps(Caps::MSG | Caps::MULTICAST);
    h.fabric_attr.prov_name = Some("udp".into());
    let info = reg
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(ofi::API_VERSION)
        })
        .expect("getinfo")
        .remove(0);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let cq = domain.cq_open(&ofi::cq::CqAttr::default()).unwrap();
    let av = domain.av_open(&ofi::av::AvAttr::default()).unwrap();
    let mut ep = domain.endpoint(&info).unwrap();
    let group = Address::Inet("239.255.0.9:4999".parse().unwrap());
    let e = ep.join(&group, 0).unwrap_err();
    assert_eq!(e.code(), Errno::EOPBADSTATE, "{e}");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    let e = ep
        .join(&Address::Inet("127.0.0.1:9".parse().unwrap()), 0)
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    // Send-only: no membership, only the group's fabric address.
    let mut mc = ep
        .join(&group, OpFlags::SEND.bits())
        .expect("send-only join");
    assert_eq!(av.lookup(mc.fi_addr()).unwrap(), group);
    assert_eq!(ep.close().unwrap_err().code(), Errno::EBUSY);
    mc.close().unwrap();
    assert!(
        av.lookup(mc.fi_addr()).is_err(),
        "left: removed from the AV"
    );
    ep.close().unwrap();
}
