//! The conformance suite for the example vendor provider `unixdgram`, built out of
//! tree (`examples/vendor-provider`, as a vendor would) and loaded as a plugin from a
//! plugin directory under `target/` (the subject lives in a static, so a temporary
//! directory would never be removed).

#[allow(dead_code)]
#[path = "../../ofi/tests/vendor/mod.rs"]
mod vendor;

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, expected, Subject};

/// The plugin, loaded from its plugin directory.
fn unixdgram_plugin() -> Subject {
    let dir = vendor::shared_plugin_dir("conformance");
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "unixdgram")
}

conformance_suite!(
    unixdgram_plugin_suite,
    unixdgram_plugin(),
    expected::UNIXDGRAM
);
