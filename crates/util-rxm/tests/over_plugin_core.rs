//! rxm over a MSG provider that a plugin adds: in this test process the process-wide
//! registry — which answers rxm's getinfo and fabric open for its core — holds no
//! built-in provider at all, only what `FI_PROVIDER_PATH` names: tcp, built in-tree as a
//! plugin and loaded through the C-ABI boundary. rxm (linked in) layers over it, and the
//! whole conformance suite runs on `tcp;ofi_rxm`.
//!
//! This binary must never call `ofi::registry()` (that would register the built-in
//! providers); the environment is set before the process-wide registry is first built,
//! in the subject expression the suite evaluates once per process (and once more in
//! each two-process child, which re-executes this binary).

use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, Subject};

fn over_plugin_tcp() -> Subject {
    let dir = ofi_conformance::plugin::build_intree("prov-tcp", "ofi_prov_tcp");
    std::env::set_var("FI_PROVIDER_PATH", &dir);
    std::env::set_var("OFI_PLUGINS_CONFIG", "/dev/null");
    std::env::remove_var("FI_PROVIDER");
    std::env::remove_var("FI_HOOK");
    let global = ofi_core::registry::global();
    let tcp = global
        .find("tcp")
        .expect("the tcp plugin in the process-wide registry");
    assert!(
        global.find("udp").is_none() && global.find("shm").is_none(),
        "no built-in provider may be registered in this process"
    );
    drop(tcp);
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "tcp;ofi_rxm")
        .with_hints(Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN))
}

conformance_suite!(rxm_over_plugin_tcp, over_plugin_tcp());
