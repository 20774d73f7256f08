//! The conformance suite on `efa` (`FI_EP_RDM` over SRD, `FI_EP_DGRAM` over UD) over the
//! software device (`FI_EFA_DEVICE=soft`): linked in, and loaded as a plugin (built from
//! this crate with `ofi_conformance::plugin::build_intree`); in one process, and across
//! two (the suite's `TwoProcess`, `TwoProcessTagged` and `TwoProcessRma` areas run this
//! binary again as the peer).

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, expected, Subject};

/// Linked in.
fn efa_subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_efa::EfaProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "efa")
}

/// As a plugin.
fn efa_plugin() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    let dir = ofi_conformance::plugin::build_intree("prov-efa", "ofi_prov_efa");
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "efa")
}

conformance_suite!(efa_soft_linked, efa_subject(), expected::EFA);
conformance_suite!(efa_soft_plugin, efa_plugin(), expected::EFA);
