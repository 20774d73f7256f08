//! rxm over a MSG provider that a plugin adds: the registry under test holds rxm
//! (linked in) and tcp only as a plugin, built in-tree and loaded through the C-ABI
//! boundary from a plugin directory; rxm's getinfo and fabric open for its core are
//! answered by that registry (the one calling rxm), so rxm layers over the plugin.
//! The whole conformance suite runs on `tcp;ofi_rxm`.
//!
//! This binary never calls `ofi::registry()`: the process-wide registry stays empty of
//! built-ins, so nothing but the plugin can serve as rxm's core. The two-process
//! children re-execute this binary and build the same registry.

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, expected, Subject};

fn over_plugin_tcp() -> Subject {
    let dir = ofi_conformance::plugin::build_intree("prov-tcp", "ofi_prov_tcp");
    std::env::set_var("OFI_PLUGINS_CONFIG", "/dev/null");
    std::env::set_var("FI_PROVIDER_PATH", "/nonexistent-ofi-rs-plugin-dir");
    std::env::remove_var("FI_PROVIDER");
    std::env::remove_var("FI_HOOK");
    assert!(
        ofi::registry::global().providers().is_empty(),
        "no provider may be in the process-wide registry of this process"
    );
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>()],
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    let tcp = reg
        .providers()
        .into_iter()
        .find(|r| r.name == "tcp")
        .expect("the tcp plugin in the registry");
    assert!(
        tcp.path.is_some(),
        "tcp must come from the plugin file: {tcp:?}"
    );
    Subject::new(reg, "tcp;ofi_rxm")
        .with_hints(Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN))
}

conformance_suite!(rxm_over_plugin_tcp, over_plugin_tcp(), expected::RXM);
