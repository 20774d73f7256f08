//! Plugin discovery: which directories are scanned, which files are candidates, and
//! what became of each one.
//!
//! Directories come from `FI_PROVIDER_PATH` (`:`-separated) and then from
//! `plugins.toml` (`search_paths`); each directory is read once, even when listed twice.
//! A directory that cannot be read (missing, not a directory, no permission) gets one
//! record of its own, `DirUnreadable`. Every directory entry whose name ends in `.so` is
//! a candidate, whatever it is; entries are taken in name order. For each candidate
//! the loader records one [`LoadOutcome`], so `fi_info -l` accounts for every file it
//! looked at.
//!
//! Loading a candidate, step by step, stopping at the first failure:
//! 1. a negated `FI_PROVIDER` entry that names the file's provider (known from the
//!    file name conventions in [`crate::select::name_from_plugin_file`]) skips the
//!    file unopened → `Filtered`;
//! 2. the candidate must be a regular file, directly or through symbolic links →
//!    otherwise `NotAPlugin` saying what it is (a dangling symbolic link, a symbolic
//!    link loop, a directory, a FIFO, …); nothing that could block is opened;
//! 3. the ELF headers are read and checked: a 64-bit shared object of this byte order
//!    whose loadable segments all lie inside the file → otherwise `NotAPlugin`. This
//!    matters: the system loader maps segments past the end of a truncated file and
//!    then touches them, which kills the process with SIGBUS instead of failing;
//! 4. `dlopen` with `RTLD_NOW | RTLD_LOCAL` (unresolved symbols fail here, not later)
//!    → `NotAPlugin` with the loader's message (a foreign or broken file). The file is
//!    logged at debug level just before, so a library whose initialisers kill the
//!    process is named by the last line of a `FI_LOG_LEVEL=debug` run;
//! 5. the exported [`crate::abi::ENTRY_SYMBOL`] static must exist → `NotAPlugin`;
//! 6. its ABI major/minor and layout fingerprint are compared with ours by reading the
//!    static, before any of the plugin's functions runs → `AbiMismatch`;
//! 7. the plugin's init runs with our host table → `InitFailed` with its error.
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
    /// A plugin directory that could not be read (the record's path is the directory).
    DirUnreadable {
        /// Why (the system's message).
        reason: String,
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
            LoadOutcome::DirUnreadable { reason } => {
                write!(f, "plugin directory not read: {reason}")
            }
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

/// The candidate files of one directory, in name order: every entry whose name ends
/// in `.so`, whatever its type ([`load_file`] refuses what is not a regular file). A
/// missing or unreadable directory yields the system's message instead (recorded by
/// the registry as `DirUnreadable`, never fatal).
pub fn scan_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|ent| ent.ok())
        .map(|ent| ent.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".so"))
        })
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
    // The plugin's init receives the process's host table: install it first.
    crate::host_table::install();
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(name) = select::name_from_plugin_file(file_name) {
        if let Some(f) = filter.filter(|f| f.is_negated() && f.excludes_entirely(&name)) {
            return (
                LoadOutcome::Filtered {
                    rule: format!(
                        "FI_PROVIDER={}",
                        ofi_core::text::shorten(&f.to_string(), ofi_core::text::SHOWN)
                    ),
                },
                None,
            );
        }
        if disabled.iter().any(|d| d.eq_ignore_ascii_case(&name)) {
            return (
                LoadOutcome::Filtered {
                    rule: "disabled in plugins.toml".into(),
                },
                None,
            );
        }
    }
    if let Err(reason) = check_regular_file(path) {
        return (LoadOutcome::NotAPlugin { reason }, None);
    }
    if let Err(reason) = check_elf(path) {
        return (LoadOutcome::NotAPlugin { reason }, None);
    }
    // Named before its initialisers run: if they kill the process, this is the last line.
    tracing::debug!(target: "ofi", prov = "core", subsys = "core",
        "plugin {}: dlopen", path.display());
    let lib = match open_library(path) {
        Ok(lib) => lib,
        Err(reason) => return (LoadOutcome::NotAPlugin { reason }, None),
    };
    let entry: &'static PluginEntry = match find_entry(&lib) {
        Ok(e) => e,
        Err(reason) => return (LoadOutcome::NotAPlugin { reason }, None),
    };
    if let Err(mismatch) = abi::check_entry(entry) {
        return (
            LoadOutcome::AbiMismatch {
                detail: mismatch.to_string(),
            },
            None,
        );
    }
    let keepalive: Arc<dyn std::any::Any + Send + Sync> = Arc::new(lib);
    // SAFETY: `entry` points into `lib`, which `keepalive` keeps loaded for as long as
    // the handle (and anything it creates) lives; check_entry accepted its layout.
    match unsafe { ProviderHandle::init(entry, Some(keepalive)) } {
        Ok(handle) => {
            let name = handle.name().to_string();
            if disabled.iter().any(|d| d.eq_ignore_ascii_case(&name)) {
                return (
                    LoadOutcome::Filtered {
                        rule: "disabled in plugins.toml".into(),
                    },
                    None,
                );
            }
            let outcome = LoadOutcome::Loaded {
                name,
                version: handle.version(),
            };
            (outcome, Some(handle))
        }
        Err(e) => (
            LoadOutcome::InitFailed {
                error: e.to_string(),
            },
            None,
        ),
    }
}

/// Check that `path` is a regular file, following symbolic links; otherwise say what
/// it is. Opens nothing.
fn check_regular_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => Err(format!(
            "{}, not a regular file",
            crate::config::file_kind(meta.file_type())
        )),
        Err(e) => {
            let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            if !is_link {
                return Err(e.to_string());
            }
            if e.raw_os_error() == Some(libc::ELOOP) {
                return Err("a symbolic link loop".into());
            }
            let target = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            if e.kind() == std::io::ErrorKind::NotFound {
                Err(format!("a dangling symbolic link (to {target})"))
            } else {
                Err(format!("a symbolic link to {target}: {e}"))
            }
        }
    }
}

/// Check that `path` is a complete 64-bit ELF shared object of this machine's byte
/// order: the header, the program header table and every `PT_LOAD` / `PT_DYNAMIC`
/// segment must lie inside the file. Reads headers only.
fn check_elf(path: &Path) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const ET_DYN: u64 = 3;
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: should the file have been replaced by a FIFO since it was checked,
    // opening it must not wait for a writer.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a regular file",
            crate::config::file_kind(meta.file_type())
        ));
    }
    let len = meta.len();
    let mut header = [0u8; 64];
    file.read_exact(&mut header)
        .map_err(|_| format!("file too short for an ELF header ({len} bytes)"))?;
    if header[..4] != *b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let native_order = if cfg!(target_endian = "little") { 1 } else { 2 };
    if header[4] != 2 || header[5] != native_order {
        return Err("not a 64-bit ELF file of this machine's byte order".into());
    }
    let field = |bytes: &[u8], at: usize, width: usize| -> u64 {
        let mut raw = [0u8; 8];
        raw[..width].copy_from_slice(&bytes[at..at + width]);
        if cfg!(target_endian = "little") {
            u64::from_le_bytes(raw)
        } else {
            u64::from_be_bytes(raw) >> (8 * (8 - width))
        }
    };
    if field(&header, 16, 2) != ET_DYN {
        return Err("not a shared object".into());
    }
    let (ph_offset, ph_size, ph_count) = (
        field(&header, 32, 8),
        field(&header, 54, 2),
        field(&header, 56, 2),
    );
    if ph_size < 56 || ph_count == 0 {
        return Err("malformed ELF program header table".into());
    }
    let table_len = ph_size * ph_count;
    if ph_offset.checked_add(table_len).is_none_or(|end| end > len) {
        return Err(format!(
            "truncated: program headers end past the file's {len} bytes"
        ));
    }
    let mut table = vec![0u8; table_len as usize];
    file.seek(SeekFrom::Start(ph_offset))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(|e| e.to_string())?;
    for entry in table.chunks_exact(ph_size as usize) {
        let kind = field(entry, 0, 4) as u32;
        let (offset, file_size) = (field(entry, 8, 8), field(entry, 32, 8));
        if (kind == PT_LOAD || kind == PT_DYNAMIC)
            && offset.checked_add(file_size).is_none_or(|end| end > len)
        {
            return Err(format!(
                "truncated: a segment ends past the file's {len} bytes"
            ));
        }
    }
    Ok(())
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
    if ptr.is_null() || !(ptr as usize).is_multiple_of(std::mem::align_of::<PluginEntry>()) {
        return Err(format!("{} symbol is not a valid entry", abi::ENTRY_SYMBOL));
    }
    // SAFETY: the symbol is the address of the plugin's exported entry static, which
    // lives as long as the library; the caller keeps the library loaded while the
    // reference is used (it is moved into the provider handle's keep-alive).
    Ok(unsafe { &*ptr })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real shared object present on every glibc system.
    fn libc_path() -> PathBuf {
        let candidates = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
        ];
        candidates
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("libc.so.6")
    }

    #[test]
    fn elf_check_accepts_a_real_library_and_refuses_truncations() {
        let bytes = std::fs::read(libc_path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("whole.so");
        std::fs::write(&whole, &bytes).unwrap();
        assert_eq!(check_elf(&whole), Ok(()));
        // Cuts inside the headers or the loadable segments. (A cut that only drops the
        // trailing section headers leaves every mapped byte present and loads safely.)
        for cut in [0usize, 10, 63, 64, 700, 4096, bytes.len() / 2] {
            let p = dir.path().join(format!("cut{cut}.so"));
            std::fs::write(&p, &bytes[..cut]).unwrap();
            let err = check_elf(&p).expect_err("a truncated library must be refused");
            assert!(
                err.contains("too short") || err.contains("truncated"),
                "{cut}: {err}"
            );
        }
        let text = dir.path().join("text.so");
        std::fs::write(&text, vec![b'x'; 200]).unwrap();
        assert_eq!(check_elf(&text), Err("not an ELF file".to_string()));
    }

    #[test]
    fn truncated_library_is_not_a_plugin_and_the_process_lives() {
        let bytes = std::fs::read(libc_path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("libtrunc-fi.so");
        std::fs::write(&p, &bytes[..4096]).unwrap();
        let (outcome, handle) = load_file(&p, None, &[]);
        assert!(handle.is_none());
        assert!(
            matches!(outcome, LoadOutcome::NotAPlugin { ref reason } if reason.contains("truncated")),
            "{outcome}"
        );
    }

    #[test]
    fn plugin_dirs_dedupe_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let dirs = plugin_dirs(
            Some(&format!("{d}: {d}/ ::/nonexistent")),
            &[dir.path().to_path_buf()],
        );
        assert_eq!(dirs, vec![PathBuf::from(d), PathBuf::from("/nonexistent")]);
        assert!(plugin_dirs(None, &[]).is_empty());
        assert!(plugin_dirs(Some(""), &[]).is_empty());
    }
}
