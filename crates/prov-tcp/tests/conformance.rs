//! The conformance suite for the tcp provider: linked in and loaded as a plugin (built
//! in-tree by `ofi_conformance::plugin::build_intree`), each over IPv4 and IPv6.

use ofi::{AddrFormat, Info};
use ofi_conformance::plugin::{linked_registry, plugin_registry};
use ofi_conformance::{conformance_suite, expected, Subject};

fn hints(fmt: AddrFormat) -> Info {
    Info::hints().with_addr_format(fmt)
}

fn linked(fmt: AddrFormat) -> Subject {
    let tcp = ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>();
    Subject::new(linked_registry(&[tcp]), "tcp").with_hints(hints(fmt))
}

fn plugin(fmt: AddrFormat) -> Subject {
    let reg = plugin_registry("prov-tcp", "ofi_prov_tcp", &[]);
    Subject::new(reg, "tcp").with_hints(hints(fmt))
}

conformance_suite!(expected = expected::TCP;
    tcp_linked_ipv4: linked(AddrFormat::SOCKADDR_IN),
    tcp_linked_ipv6: linked(AddrFormat::SOCKADDR_IN6),
    tcp_plugin_ipv4: plugin(AddrFormat::SOCKADDR_IN),
    tcp_plugin_ipv6: plugin(AddrFormat::SOCKADDR_IN6),
);
