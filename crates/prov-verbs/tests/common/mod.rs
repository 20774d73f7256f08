//! What the tests share: the `verbs` provider over the software device, linked in.

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::Subject;

/// A registry with `verbs` linked in, `FI_VERBS_DEVICE=soft` set for this process.
pub fn subject() -> Subject {
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "verbs")
}
