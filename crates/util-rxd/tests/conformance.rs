//! The conformance suite for `udp;ofi_rxd`: rxd linked in (over IPv4 and IPv6), and rxd
//! loaded as a plugin (built in-tree by `ofi_conformance::plugin::build_intree`), all
//! over the linked-in udp provider.
//!
//! rxd reaches its core through the host table, which answers from the process-wide
//! registry: `ofi::registry()` is built first so that udp is there.

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, expected, Subject};

fn hints() -> Info {
    Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN)
}

fn linked() -> Subject {
    linked_with(hints())
}

fn linked_ipv6() -> Subject {
    linked_with(Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN6))
}

fn linked_with(hints: Info) -> Subject {
    let _ = ofi::registry();
    let reg = Registry::build(RegistryConfig {
        builtins: vec![
            ofi::abi::entry_for::<ofi_prov_udp::UdpProvider>(),
            ofi::abi::entry_for::<ofi_util_rxd::RxdProvider>(),
        ],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "udp;ofi_rxd").with_hints(hints)
}

fn plugin() -> Subject {
    let _ = ofi::registry();
    let dir = ofi_conformance::plugin::build_intree("util-rxd", "ofi_util_rxd");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_udp::UdpProvider>()],
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "udp;ofi_rxd").with_hints(hints())
}

conformance_suite!(rxd_linked, linked(), expected::RXD);
conformance_suite!(rxd_linked_ipv6, linked_ipv6(), expected::RXD);
conformance_suite!(rxd_plugin, plugin(), expected::RXD);
