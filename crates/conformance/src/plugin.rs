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
//! Panics (test support code) when cargo cannot run or the build fails, with cargo's
//! output in the message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The target directory of plugin builds.
pub fn target_dir() -> PathBuf {
    repo_root().join("target").join("plugin-build")
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
