//! The conformance suite for `shm`, linked in and loaded as a plugin (built from this
//! crate with `ofi_conformance::plugin::build_intree`).

use ofi_conformance::plugin::{linked_registry, plugin_registry};
use ofi_conformance::{conformance_suite, expected, Subject};

/// Linked in.
fn shm_builtin() -> Subject {
    let shm = ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>();
    Subject::new(linked_registry(&[shm]), "shm")
}

/// As a plugin.
fn shm_plugin() -> Subject {
    Subject::new(plugin_registry("prov-shm", "ofi_prov_shm", &[]), "shm")
}

conformance_suite!(expected = expected::SHM;
    shm_builtin_suite: shm_builtin(),
    shm_plugin_suite: shm_plugin(),
);
