//! The conformance suite on `efa` (`FI_EP_RDM` over SRD) over the software device
//! (`FI_EFA_DEVICE=soft`), linked in: in one process, and across two (the suite's
//! `TwoProcess` and `TwoProcessTagged` areas run this binary again as the peer).

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, expected, Subject};

fn efa_subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_efa::EfaProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "efa")
}

conformance_suite!(efa_soft_linked, efa_subject(), expected::EFA);
