//! A provider whose native library is missing (its loader pointed at a file that does
//! not exist): the provider is not listed, the registry's load report gives one line
//! with the reason, and the other providers work as before. efa (libefa) and verbs
//! (libibverbs) state this the same way, each from its own tests.
//!
//! # What may panic
//!
//! [`check_missing_library`] is a test body: it panics when the registry behaves
//! otherwise.

use ofi::abi::PluginEntry;
use ofi::registry::Registry;
use ofi::{EpType, GetinfoFlags, GetinfoRequest, Info, API_VERSION};

use crate::plugin::linked_registry;

/// A provider and the library it cannot do without.
#[derive(Clone, Copy, Debug)]
pub struct MissingLibrary {
    /// The provider (`ofi::abi::entry_for::<P>()`).
    pub provider: &'static PluginEntry,
    /// Its name, as the registry lists it (`"efa"`).
    pub name: &'static str,
    /// The environment variable that selects a software device needing no library
    /// (`FI_EFA_DEVICE`); removed before the check, so the real library is looked for.
    pub device_var: &'static str,
    /// The environment variable naming the library file the loader opens
    /// (`OFI_EFA_LIB`).
    pub lib_var: &'static str,
    /// The file it is pointed at instead, which does not exist.
    pub missing_file: &'static str,
}

impl MissingLibrary {
    /// A registry of this provider and of `other`, in that order, linked in.
    pub fn registry(&self, other: &'static PluginEntry) -> Registry {
        linked_registry(&[self.provider, other])
    }
}

/// With `missing`'s library absent, a registry of it and of tcp (`tcp`, from
/// `ofi::abi::entry_for::<TcpProvider>()`) lists only tcp, its load report is the one
/// line saying why the provider is missing, and tcp still answers getinfo and opens
/// its fabric and domain. Leaves `missing.lib_var` pointing at the missing file.
pub fn check_missing_library(missing: &MissingLibrary, tcp: &'static PluginEntry) {
    std::env::remove_var(missing.device_var);
    std::env::set_var(missing.lib_var, missing.missing_file);
    let reg = missing.registry(tcp);
    let names: Vec<String> = reg.providers().iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, vec!["tcp".to_string()], "only tcp is registered");
    let lines: Vec<String> = reg.load_report().iter().map(|r| r.to_string()).collect();
    let name = missing.name;
    assert_eq!(
        lines,
        vec![format!(
            "built-in {name}: init failed: provider {name}: {} not found (No such device)",
            missing.missing_file
        )]
    );
    // tcp still answers and opens.
    let hints = Info::hints().with_ep_type(EpType::Msg);
    let infos = reg
        .getinfo(&GetinfoRequest {
            version: API_VERSION,
            node: None,
            service: None,
            flags: GetinfoFlags::empty(),
            hints: Some(hints),
        })
        .expect("tcp answers");
    assert!(infos
        .iter()
        .all(|i| i.fabric_attr.prov_name.as_deref() == Some("tcp")));
    let fabric = reg.open_fabric(&infos[0]).expect("tcp fabric");
    fabric.domain(&infos[0]).expect("tcp domain");
}
