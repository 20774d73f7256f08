//! The conformance suite on `verbs;ofi_rxm` (FI_EP_RDM through the unchanged rxm) over
//! the software device. rxm reaches verbs through the process-wide registry, built here
//! after `FI_VERBS_DEVICE=soft` is set. Opt-in with the `conformance` feature (see
//! docs/providers/verbs.md for what fails and why).

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, expected, Subject};

fn linked() -> Subject {
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    let _ = ofi::registry();
    let reg = Registry::build(RegistryConfig {
        builtins: vec![
            ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>(),
            ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>(),
        ],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "verbs;ofi_rxm")
}

conformance_suite!(verbs_rxm_soft_linked, linked(), expected::RXM);
