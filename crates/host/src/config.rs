//! `plugins.toml`: the plugin configuration file (DESIGN §4, §9).
//!
//! # Where the file is looked for
//!
//! 1. `OFI_PLUGINS_CONFIG` — when set and non-empty, this exact file is used and must exist
//!    and be valid; anything wrong with it is an error (`FI_EINVAL`). Point it at
//!    `/dev/null` to run with no configuration at all.
//! 2. otherwise the first of these that exists:
//!    - `$XDG_CONFIG_HOME/ofi/plugins.toml` (only when `XDG_CONFIG_HOME` is an absolute path),
//!    - `$HOME/.config/ofi/plugins.toml`,
//!    - `/etc/ofi/plugins.toml`.
//!
//!    When none exists the configuration is empty — that is not an error. A default file that
//!    exists but cannot be read or parsed is an error.
//!
//! # What is read
//!
//! Only a regular file (or a symbolic link to one) of at most [`MAX_CONFIG_BYTES`], and
//! `/dev/null` (read as empty). Anything else — a directory, a FIFO, a socket, a device
//! such as `/dev/zero` or `/dev/urandom` — is an error naming the file and what it is,
//! given at once: the file is opened without blocking and checked before it is read,
//! and never more than the cap plus one byte is read.
//!
//! # Format
//!
//! ```toml
//! # directories scanned for plugins, after those in FI_PROVIDER_PATH
//! search_paths = ["/opt/vendor/lib/ofi", "plugins", "~/lib/ofi"]
//! # providers switched off, by name
//! disable = ["verbs"]
//! # parameter values, keyed by the environment-variable name; the environment wins
//! [params]
//! FI_TCP_IFACE = "lo"
//! FI_OFI_RXM_BUFFER_SIZE = 16384
//! FI_SHM_DISABLE_CMA = true
//! ```
//!
//! Every key is optional. Unknown keys are errors, so a typo is reported instead of being
//! silently ignored; every error names the file, the line and the column.
//!
//! - `search_paths`: a relative entry is taken relative to the directory holding the file;
//!   a leading `~/` is the home directory (`$HOME`). Entries must not be empty.
//! - `disable`: provider names (non-empty).
//! - `params`: keys are environment-variable names as [`crate::param::env_name`] builds them
//!   (`FI_` followed by upper-case letters, digits and `_`); values may be written as
//!   strings, integers or booleans and are stored as their text (`16384`, `true`). A
//!   well-formed key that no parameter of the process has (a typo, or a provider that is
//!   not loaded) is not an error: once the process-wide registry is built, each is
//!   warned about with the closest known name ([`crate::param::warn_unknown_config_keys`]).
//!
//! # Invariants and panics
//!
//! A [`PluginsConfig`] holds only validated data: absolute or file-relative-resolved search
//! paths, non-empty names, well-formed parameter keys. Nothing here panics; [`global`] turns
//! a load error into one warning (see [`load_error`]) and an empty configuration.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::error::{Errno, Error, Result};

/// The largest configuration file read, in bytes (1 MiB); a larger one is an error.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What a file that is not a regular file is, for error messages and the loader's
/// report.
pub(crate) fn file_kind(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Whether `meta` is the null device (`/dev/null`, under any name).
fn is_dev_null(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    meta.file_type().is_char_device()
        && std::fs::metadata("/dev/null")
            .is_ok_and(|null| null.file_type().is_char_device() && null.rdev() == meta.rdev())
}

/// Read a configuration file safely (see "What is read" in the module docs): never
/// blocks in `open` or `read`, never reads more than [`MAX_CONFIG_BYTES`] + 1 bytes.
fn read_config_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |why: String| {
        Error::new(
            Errno::EINVAL,
            format!("cannot read {}: {why}", path.display()),
        )
    };
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.file_type().is_file() {
        if is_dev_null(&meta) {
            return Ok(Vec::new());
        }
        return Err(fail(format!(
            "{}, not a regular file",
            file_kind(meta.file_type())
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_CONFIG_BYTES) as usize);
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(fail(format!(
            "larger than {} bytes (the limit of a configuration file)",
            MAX_CONFIG_BYTES
        )));
    }
    Ok(bytes)
}

/// The environment variable naming the configuration file explicitly.
pub const CONFIG_ENV: &str = "OFI_PLUGINS_CONFIG";

/// The system-wide default file, the last one looked for.
pub const SYSTEM_CONFIG: &str = "/etc/ofi/plugins.toml";

/// The parsed plugin configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginsConfig {
    /// The file this came from; `None` for an empty default or a configuration parsed
    /// from a string without a file.
    pub source: Option<PathBuf>,
    /// Directories scanned for plugins (after `FI_PROVIDER_PATH`), in file order.
    pub search_paths: Vec<PathBuf>,
    /// Provider names switched off.
    pub disable: Vec<String>,
    /// Parameter values keyed by environment-variable name (`FI_TCP_IFACE`), as text.
    pub params: BTreeMap<String, String>,
}

/// The file's shape as serde sees it, with spans so errors can name a line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    search_paths: Vec<Spanned<String>>,
    #[serde(default)]
    disable: Vec<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<Spanned<String>, Spanned<ParamText>>,
}

/// A parameter value written as a string, an integer or a boolean, kept as text.
struct ParamText(String);

impl<'de> Deserialize<'de> for ParamText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ParamText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, an integer or a boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<ParamText, E> {
                Ok(ParamText(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<ParamText, E> {
                Ok(ParamText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<ParamText, E> {
                Ok(ParamText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<ParamText, E> {
                Ok(ParamText(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `line:column` (1-based) of byte offset `pos` in `text`.
fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let mut pos = pos.min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Where a message about the file points: `path:line:col` or `<string>:line:col`.
fn locate(source: Option<&Path>, text: &str, pos: Option<usize>) -> String {
    let file = source.map_or_else(|| "<string>".to_owned(), |p| p.display().to_string());
    match pos {
        Some(pos) => {
            let (line, col) = line_col(text, pos);
            format!("{file}:{line}:{col}")
        }
        None => file,
    }
}

/// Is `key` a name `param::env_name` can produce (`FI_` + upper-case, digits, `_`)?
fn valid_param_key(key: &str) -> bool {
    key.len() > 3
        && key.starts_with("FI_")
        && key
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Expand a leading `~` / `~/` with `home`.
fn expand_home(path: &str, home: Option<&OsString>) -> std::result::Result<PathBuf, String> {
    let rest = if path == "~" {
        ""
    } else if let Some(rest) = path.strip_prefix("~/") {
        rest
    } else {
        return Ok(PathBuf::from(path));
    };
    match home {
        Some(h) if !h.is_empty() => Ok(Path::new(h).join(rest)),
        _ => Err(format!("cannot expand `{path}`: HOME is not set")),
    }
}

impl PluginsConfig {
    /// Parse the TOML text of a configuration. `source` is the file it was read from: it
    /// appears in error messages and relative search paths are resolved against its
    /// directory (without a source they stay as written). A leading `~/` in a search path
    /// uses `$HOME` of the process.
    ///
    /// Errors: `FI_EINVAL` for malformed TOML, an unknown key, a value of the wrong type,
    /// an empty name or path, or a parameter key that is not an `FI_…` variable name; the
    /// message names the file, line and column.
    pub fn from_toml_str(s: &str, source: Option<PathBuf>) -> Result<PluginsConfig> {
        let home = std::env::var_os("HOME");
        Self::parse(s, source, home.as_ref())
    }

    fn parse(s: &str, source: Option<PathBuf>, home: Option<&OsString>) -> Result<PluginsConfig> {
        let src = source.as_deref();
        let raw: RawConfig = toml::from_str(s).map_err(|e| {
            let at = locate(src, s, e.span().map(|r| r.start));
            Error::new(Errno::EINVAL, format!("{at}: {}", e.message().trim_end()))
        })?;
        let bad = |pos: usize, msg: String| -> Error {
            Error::new(
                Errno::EINVAL,
                format!("{}: {msg}", locate(src, s, Some(pos))),
            )
        };

        let base = src.and_then(Path::parent);
        let mut search_paths = Vec::with_capacity(raw.search_paths.len());
        for p in raw.search_paths {
            let pos = p.span().start;
            let text = p.into_inner();
            if text.trim().is_empty() {
                return Err(bad(pos, "search_paths: empty path".to_owned()));
            }
            let path =
                expand_home(&text, home).map_err(|m| bad(pos, format!("search_paths: {m}")))?;
            let path = match base {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path,
            };
            search_paths.push(path);
        }

        let mut disable = Vec::with_capacity(raw.disable.len());
        for name in raw.disable {
            let pos = name.span().start;
            let name = name.into_inner();
            let trimmed = name.trim();
            if trimmed.is_empty() {
                return Err(bad(pos, "disable: empty provider name".to_owned()));
            }
            disable.push(trimmed.to_owned());
        }

        let mut params = BTreeMap::new();
        for (key, value) in raw.params {
            let pos = key.span().start;
            let key = key.into_inner();
            if !valid_param_key(&key) {
                let upper = key.to_ascii_uppercase();
                let hint = if valid_param_key(&upper) {
                    format!(" (did you mean `{upper}`?)")
                } else {
                    String::new()
                };
                return Err(bad(
                    pos,
                    format!(
                        "params: `{key}` is not a parameter's environment-variable name: \
                         expected FI_ followed by upper-case letters, digits and _{hint}"
                    ),
                ));
            }
            params.insert(key, value.into_inner().0);
        }

        Ok(PluginsConfig {
            source,
            search_paths,
            disable,
            params,
        })
    }

    /// Read and parse one file. Errors (`FI_EINVAL`) name the file: it cannot be read,
    /// is not a regular file (`/dev/null` reads as empty), is larger than
    /// [`MAX_CONFIG_BYTES`], is not UTF-8, or does not parse (see [`PluginsConfig::from_toml_str`]).
    pub fn from_file(path: &Path) -> Result<PluginsConfig> {
        let home = std::env::var_os("HOME");
        Self::from_file_with_home(path, home.as_ref())
    }

    fn from_file_with_home(path: &Path, home: Option<&OsString>) -> Result<PluginsConfig> {
        let bytes = read_config_file(path)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let pos = e.utf8_error().valid_up_to();
            let good = String::from_utf8_lossy(&e.as_bytes()[..pos]).into_owned();
            Error::new(
                Errno::EINVAL,
                format!("{}: not valid UTF-8", locate(Some(path), &good, Some(pos))),
            )
        })?;
        Self::parse(&text, Some(path.to_path_buf()), home)
    }

    /// Load the configuration from the process environment, following the search order in
    /// the module documentation. No file found → an empty configuration (`Ok`).
    pub fn load() -> Result<PluginsConfig> {
        Self::load_with(&|name| std::env::var_os(name))
    }

    /// [`PluginsConfig::load`] with the environment given as a lookup function
    /// (`OFI_PLUGINS_CONFIG`, `XDG_CONFIG_HOME` and `HOME` are read through it).
    pub fn load_with(env: &dyn Fn(&str) -> Option<OsString>) -> Result<PluginsConfig> {
        let home = env("HOME");
        if let Some(explicit) = env(CONFIG_ENV).filter(|v| !v.is_empty()) {
            let path = PathBuf::from(explicit);
            return Self::from_file_with_home(&path, home.as_ref())
                .map_err(|e| e.context(format!("{CONFIG_ENV}={}", path.display())));
        }
        for path in default_paths(env) {
            match path.try_exists() {
                Ok(true) => return Self::from_file_with_home(&path, home.as_ref()),
                Ok(false) => {}
                Err(e) => {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!("cannot check {}: {e}", path.display()),
                    ))
                }
            }
        }
        Ok(PluginsConfig::default())
    }
}

/// The default locations, most specific first, as the environment `env` makes them
/// (`OFI_PLUGINS_CONFIG` is not included: it is not a default).
pub fn default_paths(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(3);
    if let Some(xdg) = env("XDG_CONFIG_HOME") {
        let xdg = PathBuf::from(xdg);
        if xdg.is_absolute() {
            out.push(xdg.join("ofi").join("plugins.toml"));
        }
    }
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        out.push(
            Path::new(&home)
                .join(".config")
                .join("ofi")
                .join("plugins.toml"),
        );
    }
    out.push(PathBuf::from(SYSTEM_CONFIG));
    out
}

struct GlobalConfig {
    config: PluginsConfig,
    error: Option<Error>,
    reported: AtomicBool,
}

static GLOBAL: OnceLock<GlobalConfig> = OnceLock::new();

fn global_state() -> &'static GlobalConfig {
    GLOBAL.get_or_init(|| match PluginsConfig::load() {
        Ok(config) => GlobalConfig {
            config,
            error: None,
            reported: AtomicBool::new(true),
        },
        Err(e) => GlobalConfig {
            config: PluginsConfig::default(),
            error: Some(e),
            reported: AtomicBool::new(false),
        },
    })
}

/// The process-wide configuration, loaded once on first use with
/// [`PluginsConfig::load`]. On a load error the configuration is empty and one warning is
/// logged (as soon as logging is set up by [`crate::log::init`]); the error stays
/// available from [`load_error`]. Never panics.
pub fn global() -> &'static PluginsConfig {
    let state = global_state();
    if state.error.is_some() && crate::log::is_initialized() {
        report_load_error();
    }
    &state.config
}

/// The error that made [`global`] fall back to an empty configuration, if any.
pub fn load_error() -> Option<&'static Error> {
    global_state().error.as_ref()
}

/// Log the load error of [`global`] once (no-op when there was none or it was reported).
pub(crate) fn report_load_error() {
    let state = global_state();
    if let Some(e) = &state.error {
        if !state.reported.swap(true, Ordering::AcqRel) {
            crate::log::setup_warning(&format!("plugin configuration ignored: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn parses_the_documented_example() {
        let text = r#"
# directories scanned for plugins
search_paths = ["/opt/vendor/lib/ofi", "rel/dir"]
disable = ["verbs"]
[params]
FI_TCP_IFACE = "lo"
FI_OFI_RXM_BUFFER_SIZE = 16384
FI_SHM_DISABLE_CMA = true
FI_NEG = -3
"#;
        let src = PathBuf::from("/etc/ofi/plugins.toml");
        let cfg = PluginsConfig::from_toml_str(text, Some(src.clone())).unwrap();
        assert_eq!(cfg.source, Some(src));
        assert_eq!(
            cfg.search_paths,
            vec![
                PathBuf::from("/opt/vendor/lib/ofi"),
                PathBuf::from("/etc/ofi/rel/dir")
            ]
        );
        assert_eq!(cfg.disable, vec!["verbs".to_owned()]);
        assert_eq!(cfg.params["FI_TCP_IFACE"], "lo");
        assert_eq!(cfg.params["FI_OFI_RXM_BUFFER_SIZE"], "16384");
        assert_eq!(cfg.params["FI_SHM_DISABLE_CMA"], "true");
        assert_eq!(cfg.params["FI_NEG"], "-3");
        assert_eq!(cfg.params.len(), 4);
    }

    #[test]
    fn empty_text_is_an_empty_config() {
        let cfg = PluginsConfig::from_toml_str("", None).unwrap();
        assert_eq!(cfg, PluginsConfig::default());
    }

    #[test]
    fn relative_paths_without_source_stay_relative() {
        let cfg = PluginsConfig::from_toml_str("search_paths = [\"a/b\"]", None).unwrap();
        assert_eq!(cfg.search_paths, vec![PathBuf::from("a/b")]);
    }

    #[test]
    fn home_is_expanded() {
        let home = OsString::from("/home/u");
        let cfg = PluginsConfig::parse("search_paths = [\"~/lib/ofi\", \"~\"]", None, Some(&home))
            .unwrap();
        assert_eq!(
            cfg.search_paths,
            vec![PathBuf::from("/home/u/lib/ofi"), PathBuf::from("/home/u")]
        );
        let e = PluginsConfig::parse("search_paths = [\"~/x\"]", None, None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("HOME is not set"), "{e}");
    }

    #[test]
    fn unknown_key_is_reported_with_line() {
        let text = "disable = [\"verbs\"]\nsearch_path = [\"/x\"]\n";
        let e = PluginsConfig::from_toml_str(text, Some("/cfg/p.toml".into())).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("/cfg/p.toml:2:"), "{e}");
        assert!(e.message().contains("search_path"), "{e}");
    }

    #[test]
    fn syntax_error_is_reported_with_line() {
        let text = "disable = [\"verbs\"]\n\n[params\n";
        let e = PluginsConfig::from_toml_str(text, None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("<string>:3:"), "{e}");
    }

    #[test]
    fn wrong_value_types_are_rejected() {
        let e = PluginsConfig::from_toml_str("[params]\nFI_X = 1.5\n", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("<string>:2:"), "{e}");
        assert!(
            e.message().contains("a string, an integer or a boolean"),
            "{e}"
        );
        let e = PluginsConfig::from_toml_str("disable = \"verbs\"\n", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        let e = PluginsConfig::from_toml_str("[params]\nFI_X = [1]\n", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
    }

    #[test]
    fn bad_param_keys_are_rejected_with_a_hint() {
        let e =
            PluginsConfig::from_toml_str("[params]\n\nfi_tcp_iface = \"lo\"\n", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("<string>:3:1:"), "{e}");
        assert!(e.message().contains("did you mean `FI_TCP_IFACE`"), "{e}");
        for key in ["TCP_IFACE", "FI_", "\"FI_A-B\""] {
            let text = format!("[params]\n{key} = 1\n");
            let e = PluginsConfig::from_toml_str(&text, None).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{key}");
        }
    }

    #[test]
    fn empty_names_and_paths_are_rejected() {
        let e = PluginsConfig::from_toml_str("disable = [\"tcp\", \" \"]", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("empty provider name"), "{e}");
        let e = PluginsConfig::from_toml_str("search_paths = [\"\"]", None).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("empty path"), "{e}");
    }

    /// Load `path` as `OFI_PLUGINS_CONFIG` on another thread and wait at most 20 s: a
    /// read that never returns fails the test instead of hanging it.
    fn load_bounded(path: &Path) -> Result<PluginsConfig> {
        let path = path.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, &path)])));
        });
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .expect("loading the configuration must return")
    }

    #[test]
    fn devices_and_fifos_are_refused_at_once() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            let path = Path::new(dev);
            if !path.exists() {
                continue;
            }
            let e = load_bounded(path).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{dev}");
            assert!(
                e.message()
                    .contains(&format!("{dev}: a character device, not a regular file")),
                "{e}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("plugins.toml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = load_bounded(&fifo).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("a FIFO, not a regular file"), "{e}");
        let e = load_bounded(dir.path()).unwrap_err();
        assert!(
            e.message().contains("a directory, not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn dev_null_is_an_empty_configuration() {
        let cfg = load_bounded(Path::new("/dev/null")).unwrap();
        assert!(cfg.search_paths.is_empty() && cfg.disable.is_empty() && cfg.params.is_empty());
    }

    #[test]
    fn files_over_the_cap_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let at_cap = dir.path().join("at_cap.toml");
        let mut text = vec![b'#'; MAX_CONFIG_BYTES as usize - 1];
        text.push(b'\n');
        std::fs::write(&at_cap, &text).unwrap();
        load_bounded(&at_cap).expect("a file of exactly the cap loads");
        let over = dir.path().join("over.toml");
        text.push(b'\n');
        std::fs::write(&over, &text).unwrap();
        let e = load_bounded(&over).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(
            e.message().contains("over.toml: larger than 1048576 bytes"),
            "{e}"
        );
    }

    #[test]
    fn explicit_file_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, &missing)])).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("nope.toml"), "{e}");
        assert!(e.message().starts_with(CONFIG_ENV), "{e}");
    }

    #[test]
    fn explicit_file_is_loaded_and_errors_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "search_paths = [\"plug\"]\n[params]\nFI_A = 1\n").unwrap();
        let cfg = PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, &good)])).unwrap();
        assert_eq!(cfg.source.as_deref(), Some(good.as_path()));
        assert_eq!(cfg.search_paths, vec![dir.path().join("plug")]);
        assert_eq!(cfg.params["FI_A"], "1");

        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "disable = [\"x\"]\nbogus = 1\n").unwrap();
        let e = PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, &bad)])).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(
            e.message().contains(&format!("{}:2:1", bad.display())),
            "{e}"
        );

        let binary = dir.path().join("bin.toml");
        std::fs::write(&binary, b"disable = []\n# \xff\n").unwrap();
        let e = PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, &binary)])).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("bin.toml:2:3: not valid UTF-8"), "{e}");

        // A directory cannot be read as a file.
        let e = PluginsConfig::load_with(&env_of(&[(CONFIG_ENV, dir.path())])).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
    }

    #[test]
    fn default_paths_follow_xdg_then_home_then_etc() {
        let env = env_of(&[
            ("XDG_CONFIG_HOME", Path::new("/x/cfg")),
            ("HOME", Path::new("/home/u")),
        ]);
        assert_eq!(
            default_paths(&env),
            vec![
                PathBuf::from("/x/cfg/ofi/plugins.toml"),
                PathBuf::from("/home/u/.config/ofi/plugins.toml"),
                PathBuf::from("/etc/ofi/plugins.toml"),
            ]
        );
        // A relative XDG_CONFIG_HOME is ignored, as the XDG spec asks.
        let env = env_of(&[("XDG_CONFIG_HOME", Path::new("rel"))]);
        assert_eq!(
            default_paths(&env),
            vec![PathBuf::from("/etc/ofi/plugins.toml")]
        );
    }

    #[test]
    fn first_existing_default_wins() {
        let dir = tempfile::tempdir().unwrap();
        let xdg = dir.path().join("xdg");
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/ofi")).unwrap();
        std::fs::write(
            home.join(".config/ofi/plugins.toml"),
            "disable = [\"efa\"]\n",
        )
        .unwrap();
        let env = env_of(&[("XDG_CONFIG_HOME", &xdg), ("HOME", &home)]);
        let cfg = PluginsConfig::load_with(&env).unwrap();
        assert_eq!(cfg.disable, vec!["efa".to_owned()]);
        assert_eq!(cfg.source, Some(home.join(".config/ofi/plugins.toml")));

        std::fs::create_dir_all(xdg.join("ofi")).unwrap();
        std::fs::write(xdg.join("ofi/plugins.toml"), "disable = [\"shm\"]\n").unwrap();
        let cfg = PluginsConfig::load_with(&env).unwrap();
        assert_eq!(cfg.disable, vec!["shm".to_owned()]);
    }

    #[test]
    fn missing_defaults_give_an_empty_config() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_of(&[("XDG_CONFIG_HOME", dir.path()), ("HOME", dir.path())]);
        let cfg = PluginsConfig::load_with(&env).unwrap();
        // /etc/ofi/plugins.toml may exist on some machine; only check when it does not.
        if !Path::new(SYSTEM_CONFIG).exists() {
            assert_eq!(cfg, PluginsConfig::default());
        }
        // An empty OFI_PLUGINS_CONFIG counts as unset.
        let env = env_of(&[(CONFIG_ENV, Path::new("")), ("HOME", dir.path())]);
        assert!(PluginsConfig::load_with(&env).is_ok());
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("ab", 99), (1, 3));
        assert_eq!(line_col("é\nx", 1), (1, 1));
    }
}
