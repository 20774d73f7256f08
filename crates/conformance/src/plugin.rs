//! Build an in-tree provider as a plugin (a `.so`), for the tests that load each in-tree
//! provider through the plugin boundary (DESIGN §3).
//!
//! In-tree providers are linked into `ofi` as rlibs; their plugin entry is behind the
//! crate feature `plugin` (every provider exports the same symbol, so linked-in builds
//! leave it off). [`build_intree`] runs
//! `cargo rustc --manifest-path crates/prov-NAME/Cargo.toml --lib --features plugin
//! --crate-type cdylib` with its own target directory (`target/plugin-build`), so it never
//! waits on, or disturbs, the build of the test that called it. Builds are serialised
//! within a process and each crate is built at most once per process.
//!
//! [`linked_registry`] and [`plugin_registry`] give the registries the conformance
//! tests run a provider from: linked in, or loaded as a plugin ([`linked_subject`]: a
//! provider linked in alone); [`layered_subject`] a
//! utility provider over a linked-in core, either way.
//!
//! Panics (test support code) when cargo cannot run or the build fails, with cargo's
//! output in the message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use ofi::abi::PluginEntry;
use ofi::provider::Provider;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, Info};

use crate::Subject;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The target directory of plugin builds.
pub fn target_dir() -> PathBuf {
    repo_root().join("target").join("plugin-build")
}

/// A registry of the providers `builtins`, linked in (each from
/// `ofi::abi::entry_for::<P>()`), in this order.
pub fn linked_registry(builtins: &[&'static PluginEntry]) -> Registry {
    Registry::build(RegistryConfig {
        builtins: builtins.to_vec(),
        ..RegistryConfig::default()
    })
}

/// The subject `P` (named `P::NAME`), linked in alone.
pub fn linked_subject<P: Provider>() -> Subject {
    Subject::new(linked_registry(&[ofi::abi::entry_for::<P>()]), P::NAME)
}

/// A registry that loads the in-tree provider crate `crates/<dir>` as a plugin
/// ([`build_intree`]`(dir, lib_name)`), with the providers `builtins` linked in (the
/// cores a utility plugin layers over).
pub fn plugin_registry(dir: &str, lib_name: &str, builtins: &[&'static PluginEntry]) -> Registry {
    Registry::build(RegistryConfig {
        builtins: builtins.to_vec(),
        plugin_dirs: vec![build_intree(dir, lib_name)],
        ..RegistryConfig::default()
    })
}

/// How a test reaches the utility provider of a layered stack (`tcp;ofi_rxm`).
#[derive(Clone, Copy, Debug)]
pub enum UtilityLink {
    /// Linked in.
    Linked,
    /// Loaded as the in-tree plugin built from `crates/<dir>` (library
    /// `ofi_<dir with '_' for '-'>`, e.g. `util-rxm` → `ofi_util_rxm`).
    Plugin(&'static str),
}

/// The subject `C;U` (`tcp;ofi_rxm`): the utility provider `U` (reached as `utility`
/// says) over the core provider `C`, linked in, asked with default hints in the
/// address format `format`.
///
/// The utility reaches its core through the host table, which answers from the
/// process-wide registry: `ofi::registry()` is built first so that the in-tree cores
/// are there.
pub fn layered_subject<C: Provider, U: Provider>(
    utility: UtilityLink,
    format: AddrFormat,
) -> Subject {
    let _ = ofi::registry();
    let core = ofi::abi::entry_for::<C>();
    let reg = match utility {
        UtilityLink::Linked => linked_registry(&[core, ofi::abi::entry_for::<U>()]),
        UtilityLink::Plugin(dir) => {
            plugin_registry(dir, &format!("ofi_{}", dir.replace('-', "_")), &[core])
        }
    };
    let stack = format!("{};{}", C::NAME, U::NAME);
    Subject::new(reg, &stack).with_hints(Info::hints().with_addr_format(format))
}

static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// Build the in-tree provider crate `crates/<dir>` (e.g. `"prov-udp"`) as a plugin and
/// return a plugin directory that holds only its `.so` (`lib<lib_name>.so`, e.g.
/// `"ofi_prov_udp"`): `target/plugin-build/dirs/<dir>/`. The file is copied under a
/// temporary name and renamed into place, so a process that has an older copy loaded
/// keeps its mapping.
pub fn build_intree(dir: &str, lib_name: &str) -> PathBuf {
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let map = built.get_or_insert_with(HashMap::new);
    if let Some(p) = map.get(dir) {
        return p.clone();
    }
    let manifest = repo_root().join("crates").join(dir).join("Cargo.toml");
    let target = target_dir();
    let out = Command::new(env!("CARGO"))
        .args(["rustc", "--quiet", "--lib", "--features", "plugin"])
        .args(["--crate-type", "cdylib", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", env!("CARGO")));
    assert!(
        out.status.success(),
        "building {dir} as a plugin failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = format!("lib{lib_name}.so");
    let produced = target.join("debug").join(&file);
    let plugin_dir = target.join("dirs").join(dir);
    std::fs::create_dir_all(&plugin_dir).expect("create the plugin directory");
    let tmp = plugin_dir.join(format!(".{file}.{}", std::process::id()));
    std::fs::copy(&produced, &tmp)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", produced.display(), tmp.display()));
    std::fs::rename(&tmp, plugin_dir.join(&file)).expect("move the plugin into place");
    map.insert(dir.to_string(), plugin_dir.clone());
    plugin_dir
}
