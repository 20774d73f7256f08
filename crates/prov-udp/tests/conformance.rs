//! The conformance suite against the `udp` provider, four ways: linked in (an rlib
//! registered as a built-in) and loaded as a plugin (built as a `.so` by
//! `ofi_conformance::plugin::build_intree`), each over IPv4 and over IPv6; and linked in
//! with `FI_ADDR_STR` addresses.

use ofi::registry::Registry;
use ofi::{AddrFormat, Info};
use ofi_conformance::plugin::{linked_registry, plugin_registry};
use ofi_conformance::{conformance_suite, expected, Subject};
use ofi_prov_udp::UdpProvider;

fn linked() -> Registry {
    linked_registry(&[ofi::abi::entry_for::<UdpProvider>()])
}

fn plugin() -> Registry {
    plugin_registry("prov-udp", "ofi_prov_udp", &[])
}

fn hints(format: AddrFormat) -> Info {
    let mut h = Info::hints();
    h.addr_format = format;
    h
}

fn udp(reg: Registry, format: AddrFormat) -> Subject {
    Subject::new(reg, "udp").with_hints(hints(format))
}

conformance_suite!(expected = expected::UDP;
    udp_linked_ipv4: udp(linked(), AddrFormat::SOCKADDR_IN),
    udp_linked_ipv6: udp(linked(), AddrFormat::SOCKADDR_IN6),
    udp_plugin_ipv4: udp(plugin(), AddrFormat::SOCKADDR_IN),
    udp_plugin_ipv6: udp(plugin(), AddrFormat::SOCKADDR_IN6),
    udp_linked_addr_str: udp(linked(), AddrFormat::STR),
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
