//! The conformance suite for `tcp;ofi_rxm`: rxm linked in (over IPv4 and IPv6), and rxm
//! loaded as a plugin (built in-tree by `ofi_conformance::plugin::build_intree`), all
//! over the linked-in tcp provider.
//!
//! rxm reaches its core through the host table, which answers from the process-wide
//! registry: `ofi::registry()` is built first so that tcp is there.

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
            ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>(),
            ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>(),
        ],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "tcp;ofi_rxm").with_hints(hints)
}

fn plugin() -> Subject {
    let _ = ofi::registry();
    let dir = ofi_conformance::plugin::build_intree("util-rxm", "ofi_util_rxm");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>()],
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "tcp;ofi_rxm").with_hints(hints())
}

conformance_suite!(rxm_linked, linked(), expected::RXM);
conformance_suite!(rxm_linked_ipv6, linked_ipv6(), expected::RXM);
conformance_suite!(rxm_plugin, plugin(), expected::RXM);
