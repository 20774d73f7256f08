//! The conformance suite on `efa` (`FI_EP_RDM` over SRD, `FI_EP_DGRAM` over UD) over the
//! software device (`FI_EFA_DEVICE=soft`): linked in, and loaded as a plugin (built from
//! this crate with `ofi_conformance::plugin::build_intree`); in one process, and across
//! two (the suite's `TwoProcess`, `TwoProcessTagged` and `TwoProcessRma` areas run this
//! binary again as the peer).

use ofi_conformance::plugin::{linked_subject, plugin_registry};
use ofi_conformance::{conformance_suite, expected, Subject};

/// Linked in.
fn efa_subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    linked_subject::<ofi_prov_efa::EfaProvider>()
}

/// As a plugin.
fn efa_plugin() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    Subject::new(plugin_registry("prov-efa", "ofi_prov_efa", &[]), "efa")
}

conformance_suite!(efa_soft_linked, efa_subject(), expected::EFA);
conformance_suite!(efa_soft_plugin, efa_plugin(), expected::EFA);
