//! The conformance suite for the tcp provider: linked in and loaded as a plugin (built
//! in-tree by `ofi_conformance::plugin::build_intree`), each over IPv4 and IPv6.

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, expected, Subject};

fn hints(fmt: AddrFormat) -> Info {
    Info::hints().with_addr_format(fmt)
}

fn linked(fmt: AddrFormat) -> Subject {
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "tcp").with_hints(hints(fmt))
}

fn plugin(fmt: AddrFormat) -> Subject {
    let dir = ofi_conformance::plugin::build_intree("prov-tcp", "ofi_prov_tcp");
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "tcp").with_hints(hints(fmt))
}

conformance_suite!(
    tcp_linked_ipv4,
    linked(AddrFormat::SOCKADDR_IN),
    expected::TCP
);
conformance_suite!(
    tcp_linked_ipv6,
    linked(AddrFormat::SOCKADDR_IN6),
    expected::TCP
);
conformance_suite!(
    tcp_plugin_ipv4,
    plugin(AddrFormat::SOCKADDR_IN),
    expected::TCP
);
conformance_suite!(
    tcp_plugin_ipv6,
    plugin(AddrFormat::SOCKADDR_IN6),
    expected::TCP
);
