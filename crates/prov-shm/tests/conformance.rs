//! The conformance suite for `shm`, linked in and loaded as a plugin (built from this
//! crate with `ofi_conformance::plugin::build_intree`).

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, expected, Subject};

/// Linked in.
fn shm_builtin() -> Subject {
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "shm")
}

/// As a plugin.
fn shm_plugin() -> Subject {
    let dir = ofi_conformance::plugin::build_intree("prov-shm", "ofi_prov_shm");
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "shm")
}

conformance_suite!(shm_builtin_suite, shm_builtin(), expected::SHM);
conformance_suite!(shm_plugin_suite, shm_plugin(), expected::SHM);
