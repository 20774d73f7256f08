//! The conformance suite for the example vendor provider `unixdgram`, built out of
//! tree (`examples/vendor-provider`, as a vendor would) and loaded as a plugin from a
//! temporary plugin directory.

#[allow(dead_code)]
#[path = "../../ofi/tests/vendor/mod.rs"]
mod vendor;

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, Subject};

/// The plugin in a fresh plugin directory, kept alive by the subject.
fn unixdgram_plugin() -> Subject {
    let dir = vendor::plugin_dir(&[(vendor::Variant::Good, vendor::LIB_NAME)]);
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir.path().to_path_buf()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "unixdgram").keep_alive(dir)
}

conformance_suite!(unixdgram_plugin_suite, unixdgram_plugin());
