//! Plugin discovery: which directories are scanned, which files are candidates, and
//! what became of each one.
//!
//! Directories come from `FI_PROVIDER_PATH` (`:`-separated) and then from
//! `plugins.toml` (`search_paths`); each directory is read once, even when listed twice.
//! Every regular file whose name ends in `.so` is a candidate; files are taken in
//! name order. For each candidate the loader records one [`LoadOutcome`].
//!
//! Loading a candidate, step by step, stopping at the first failure:
//! 1. a negated `FI_PROVIDER` entry that names the file's provider (known from the
//!    file name conventions in [`crate::select::name_from_plugin_file`]) skips the
//!    file unopened → `Filtered`;
//! 2. `dlopen` with `RTLD_NOW | RTLD_LOCAL` (unresolved symbols fail here, not later)
//!    → `NotAPlugin` with the loader's message (a truncated or foreign file);
//! 3. the exported [`crate::abi::ENTRY_SYMBOL`] static must exist → `NotAPlugin`;
//! 4. its ABI major/minor and layout fingerprint are compared with ours by reading the
//!    static, before any of the plugin's functions runs → `AbiMismatch`;
//! 5. the plugin's init runs with our host table → `InitFailed` with its error.
//!
//! The library stays loaded for as long as its provider handle lives (the registry
//! keeps them for the life of the process): Rust plugins are never unloaded.
//! Nothing here panics on any file content.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::abi::{self, PluginEntry};
use crate::provider::ProviderHandle;
use crate::select::{self, ProviderFilter};
use crate::version::Version;

/// What became of one plugin candidate file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadOutcome {
    /// Loaded and registered.
    Loaded {
        /// Provider name.
        name: String,
        /// Provider version.
        version: Version,
    },
    /// Not an ofi-rs plugin (cannot be loaded, or no entry symbol).
    NotAPlugin {
        /// Why.
        reason: String,
    },
    /// Built against an incompatible interface.
    AbiMismatch {
        /// One line: what was found and what was wanted.
        detail: String,
    },
    /// The plugin's init failed.
    InitFailed {
        /// The error it returned.
        error: String,
    },
    /// Skipped by configuration (`FI_PROVIDER`, `plugins.toml`).
    Filtered {
        /// The rule that skipped it.
        rule: String,
    },
    /// Loaded, but another provider of the same name won.
    Superseded {
        /// Who won (name, version, origin).
        by: String,
    },
}

impl fmt::Display for LoadOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadOutcome::Loaded { name, version } => write!(f, "loaded {name} {version}"),
            LoadOutcome::NotAPlugin { reason } => write!(f, "not a plugin: {reason}"),
            LoadOutcome::AbiMismatch { detail } => write!(f, "ABI mismatch: {detail}"),
            LoadOutcome::InitFailed { error } => write!(f, "init failed: {error}"),
            LoadOutcome::Filtered { rule } => write!(f, "filtered: {rule}"),
            LoadOutcome::Superseded { by } => write!(f, "superseded by {by}"),
        }
    }
}

/// One candidate file and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadRecord {
    /// The file.
    pub path: PathBuf,
    /// What became of it.
    pub outcome: LoadOutcome,
}

impl fmt::Display for LoadRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.outcome)
    }
}

/// The plugin directories in search order: `FI_PROVIDER_PATH` entries, then the
/// configuration's `search_paths`, each once (compared after canonicalisation).
pub fn plugin_dirs(provider_path: Option<&str>, config_paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    let env_dirs = provider_path
        .unwrap_or("")
        .split(':')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    for dir in env_dirs.chain(config_paths.iter().cloned()) {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if !seen.contains(&key) {
            seen.push(key);
            out.push(dir);
        }
    }
    out
}

/// The candidate files of one directory, in name order. A missing or unreadable
/// directory yields an error message instead (reported by the registry, never fatal).
pub fn scan_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|ent| ent.ok())
        .map(|ent| ent.path())
        .filter(|p| p.is_file())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".so")))
        .collect();
    files.sort();
    Ok(files)
}

/// Load one candidate file. `filter` is `FI_PROVIDER` (only its negated one-name
/// entries can skip a file before it is opened); `disabled` are names switched off in
/// `plugins.toml`.
pub fn load_file(
    path: &Path,
    filter: Option<&ProviderFilter>,
    disabled: &[String],
) -> (LoadOutcome, Option<ProviderHandle>) {
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(name) = select::name_from_plugin_file(file_name) {
        if let Some(f) = filter.filter(|f| f.is_negated() && f.excludes_entirely(&name)) {
            return (LoadOutcome::Filtered { rule: format!("FI_PROVIDER={f}") }, None);
        }
        if disabled.iter().any(|d| d.eq_ignore_ascii_case(&name)) {
            return (LoadOutcome::Filtered { rule: "disabled in plugins.toml".into() }, None);
        }
    }
    let lib = match open_library(path) {
        Ok(lib) => lib,
        Err(reason) => return (LoadOutcome::NotAPlugin { reason }, None),
    };
    let entry: &'static PluginEntry = match find_entry(&lib) {
        Ok(e) => e,
        Err(reason) => return (LoadOutcome::NotAPlugin { reason }, None),
    };
    if let Err(mismatch) = abi::check_entry(entry) {
        return (LoadOutcome::AbiMismatch { detail: mismatch.to_string() }, None);
    }
    let keepalive: Arc<dyn std::any::Any + Send + Sync> = Arc::new(lib);
    // SAFETY: `entry` points into `lib`, which `keepalive` keeps loaded for as long as
    // the handle (and anything it creates) lives; check_entry accepted its layout.
    match unsafe { ProviderHandle::init(entry, Some(keepalive)) } {
        Ok(handle) => {
            let name = handle.name().to_string();
            if disabled.iter().any(|d| d.eq_ignore_ascii_case(&name)) {
                return (LoadOutcome::Filtered { rule: "disabled in plugins.toml".into() }, None);
            }
            let outcome = LoadOutcome::Loaded { name, version: handle.version() };
            (outcome, Some(handle))
        }
        Err(e) => (LoadOutcome::InitFailed { error: e.to_string() }, None),
    }
}

fn open_library(path: &Path) -> Result<libloading::Library, String> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading a shared object runs its ELF initialisers. That is the nature of
    // plugins: the operator put this file in a plugin directory. Rust cdylibs built
    // with ofi-core define no initialisers of their own.
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) };
    lib.map(libloading::Library::from).map_err(|e| {
        let msg = e.to_string();
        // libloading's message repeats the path; keep the loader's own words.
        msg.rsplit(": ").next().unwrap_or(&msg).trim().to_string()
    })
}

fn find_entry(lib: &libloading::Library) -> Result<&'static PluginEntry, String> {
    let mut symbol = abi::ENTRY_SYMBOL.as_bytes().to_vec();
    symbol.push(0);
    // SAFETY: we ask for the address of a data symbol; the type parameter is the
    // pointer type, not a function, and nothing is called.
    let sym = unsafe { lib.get::<*const PluginEntry>(&symbol) }
        .map_err(|_| format!("no {} symbol", abi::ENTRY_SYMBOL))?;
    let ptr: *const PluginEntry = *sym;
    if ptr.is_null() || (ptr as usize) % std::mem::align_of::<PluginEntry>() != 0 {
        return Err(format!("{} symbol is not a valid entry", abi::ENTRY_SYMBOL));
    }
    // SAFETY: the symbol is the address of the plugin's exported entry static, which
    // lives as long as the library; the caller keeps the library loaded while the
    // reference is used (it is moved into the provider handle's keep-alive).
    Ok(unsafe { &*ptr })
}
