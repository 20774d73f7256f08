//! Provider parameters, the host's store (DESIGN §9): declared once with a type, help and default, read
//! from the environment, then `plugins.toml`, then the default.
//!
//! A parameter belongs to the core (`prov = None`) or to a provider. Its environment
//! variable is [`env_name`]: `FI_<NAME>` for the core, `FI_<PROV>_<NAME>` for a provider,
//! upper-cased (`ofi_rxm` + `buffer_size` → `FI_OFI_RXM_BUFFER_SIZE`), so settings written
//! for the C library keep working.
//!
//! Value order: the environment variable, then `[params]` of the plugin configuration
//! ([`crate::config`]) under the same name, then the declared default, else unset
//! (`Ok(None)`). An empty value (`FI_X=`) counts as unset at that level, so the next
//! source is consulted.
//!
//! Value syntax (surrounding white space is ignored for the typed readers):
//! - [`ParamType::Int`]: optional sign, then decimal, `0x` hex or `0`-prefixed octal.
//! - [`ParamType::Size`]: like Int without a `-`, plus an optional `k`, `m` or `g` suffix
//!   (case-insensitive; powers of 1024).
//! - [`ParamType::Bool`]: `0/1`, `on/off`, `true/false`, `yes/no`, case-insensitive.
//!
//! Unlike the C library, trailing garbage (`12abc`) and out-of-range numbers are errors
//! (`FI_EINVAL`), never silently truncated.
//!
//! The logic lives in [`ParamStore`], which reads the environment through [`EnvLookup`]
//! and takes the configuration as an argument, so it can be tested with fake
//! environments. The free functions ([`declare`], [`get_str`], …, [`list`]) use one
//! process-wide store holding the core parameters ([`core_params`]), the real environment
//! and [`crate::config::global`].
//!
//! Providers reach this store only through the host table
//! ([`Host`](ofi_core::provider::Host)); [`ParamType`] is the core's (a provider names
//! types with it) and is re-exported here.
//!
//! Invariants: every declared parameter has a valid name, non-empty help and a default
//! that parses as its type; one environment variable belongs to at most one parameter.
//! Nothing here panics.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::{OnceLock, RwLock};

use crate::config::{self, PluginsConfig};
use crate::error::{Errno, Error, Result};

pub use ofi_core::param::ParamType;

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDef {
    /// The owning provider; `None` for the core.
    pub prov: Option<String>,
    /// The parameter's name within its owner (`buffer_size`).
    pub name: String,
    /// The value type.
    pub ty: ParamType,
    /// One-line description.
    pub help: String,
    /// The value used when neither the environment nor the configuration sets one.
    pub default: Option<String>,
}

impl ParamDef {
    /// The environment variable of this parameter (see [`env_name`]).
    pub fn env_name(&self) -> String {
        env_name(self.prov.as_deref(), &self.name)
    }
}

/// The environment variable of a parameter: `FI_<NAME>` for the core (`prov = None`),
/// `FI_<PROV>_<NAME>` otherwise, upper-cased.
pub fn env_name(prov: Option<&str>, name: &str) -> String {
    let mut s = String::with_capacity(4 + prov.map_or(0, |p| p.len() + 1) + name.len());
    s.push_str("FI_");
    if let Some(p) = prov {
        s.push_str(p);
        s.push('_');
    }
    s.push_str(name);
    s.make_ascii_uppercase();
    s
}

/// Where a parameter's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamSource {
    /// The environment variable.
    Env,
    /// `[params]` of this configuration file (an empty path: a configuration without file).
    Config(PathBuf),
    /// The declared default.
    Default,
    /// Not set anywhere and no default.
    Unset,
}

impl fmt::Display for ParamSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamSource::Env => f.write_str("environment"),
            ParamSource::Config(p) if p.as_os_str().is_empty() => f.write_str("configuration"),
            ParamSource::Config(p) => write!(f, "{}", p.display()),
            ParamSource::Default => f.write_str("default"),
            ParamSource::Unset => f.write_str("unset"),
        }
    }
}

/// A parameter with its current value, as `fi_info -e` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamEntry {
    /// The declaration.
    pub def: ParamDef,
    /// Its environment variable.
    pub env_name: String,
    /// The current value as text (a non-UTF-8 environment value is shown lossily).
    pub value: Option<String>,
    /// Where `value` came from.
    pub source: ParamSource,
}

/// Reads environment variables; lets tests substitute a fake environment.
pub trait EnvLookup {
    /// The value of variable `name`, or `None` when it is not set.
    fn lookup(&self, name: &str) -> Option<OsString>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvLookup for ProcessEnv {
    fn lookup(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name)
    }
}

impl<F: Fn(&str) -> Option<String>> EnvLookup for F {
    fn lookup(&self, name: &str) -> Option<OsString> {
        self(name).map(OsString::from)
    }
}

/// The two places a [`ParamStore`] reads values from, besides defaults.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// The environment.
    pub env: &'a dyn EnvLookup,
    /// The plugin configuration.
    pub config: &'a PluginsConfig,
}

impl<'a> Sources<'a> {
    /// The sources `env` and `config`.
    pub fn new(env: &'a dyn EnvLookup, config: &'a PluginsConfig) -> Sources<'a> {
        Sources { env, config }
    }
}

/// A Rust type a parameter can be read as (see [`get`]).
pub trait ParamValue: Sized {
    /// The declared type this reader is for.
    const TYPE: ParamType;
    /// Whether a parameter declared as `ty` may be read as `Self` (default: `ty == TYPE`).
    fn accepts(ty: ParamType) -> bool {
        ty == Self::TYPE
    }
    /// Parse the text of a value; the error message says what is wrong with it.
    fn parse_param(text: &str) -> Result<Self>;
}

impl ParamValue for String {
    const TYPE: ParamType = ParamType::String;
    /// Any parameter can be read as its raw text.
    fn accepts(_: ParamType) -> bool {
        true
    }
    fn parse_param(text: &str) -> Result<Self> {
        Ok(text.to_owned())
    }
}

impl ParamValue for i64 {
    const TYPE: ParamType = ParamType::Int;
    fn parse_param(text: &str) -> Result<Self> {
        parse_int(text)
    }
}

impl ParamValue for usize {
    const TYPE: ParamType = ParamType::Size;
    fn parse_param(text: &str) -> Result<Self> {
        parse_size(text)
    }
}

impl ParamValue for bool {
    const TYPE: ParamType = ParamType::Bool;
    fn parse_param(text: &str) -> Result<Self> {
        parse_bool(text)
    }
}

/// Split `text` (trimmed) into (negative, magnitude, rest-after-digits).
fn parse_number(text: &str) -> std::result::Result<(bool, u64, &str), String> {
    let t = text.trim();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits_and_rest) = if let Some(r) = t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        (16, r)
    } else if t.len() > 1 && t.starts_with('0') && t.as_bytes()[1].is_ascii_digit() {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = digits_and_rest
        .char_indices()
        .find(|(_, c)| !c.is_digit(radix))
        .map_or(digits_and_rest.len(), |(i, _)| i);
    let (digits, rest) = digits_and_rest.split_at(end);
    if digits.is_empty() {
        return Err("not a number".to_owned());
    }
    let mag = u64::from_str_radix(digits, radix).map_err(|_| "number out of range".to_owned())?;
    Ok((neg, mag, rest))
}

/// Parse an integer parameter value: optional sign, then decimal, `0x` hex or `0` octal.
/// Errors: `FI_EINVAL` for anything else or a value outside `i64`.
pub fn parse_int(text: &str) -> Result<i64> {
    let bad = |why: &str| Error::new(Errno::EINVAL, format!("`{text}` is not an integer: {why}"));
    let (neg, mag, rest) = parse_number(text).map_err(|w| bad(&w))?;
    if !rest.is_empty() {
        return Err(bad(&format!("unexpected `{rest}`")));
    }
    let v = if neg { -(mag as i128) } else { mag as i128 };
    i64::try_from(v).map_err(|_| bad("number out of range"))
}

/// Parse a size parameter value: like [`parse_int`] but not negative, with an optional
/// `k`/`m`/`g` suffix (× 1024, 1024², 1024³). Errors: `FI_EINVAL`.
pub fn parse_size(text: &str) -> Result<usize> {
    let bad = |why: &str| Error::new(Errno::EINVAL, format!("`{text}` is not a size: {why}"));
    let (neg, mag, rest) = parse_number(text).map_err(|w| bad(&w))?;
    if neg {
        return Err(bad("must not be negative"));
    }
    let shift = match rest {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        other => return Err(bad(&format!("unexpected `{other}` (suffixes: k, m, g)"))),
    };
    mag.checked_mul(1u64 << shift)
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| bad("number out of range"))
}

/// Parse a boolean parameter value: `0/1`, `on/off`, `true/false`, `yes/no`
/// (case-insensitive). Errors: `FI_EINVAL`.
pub fn parse_bool(text: &str) -> Result<bool> {
    let t = text.trim();
    const TRUE: [&str; 4] = ["1", "on", "true", "yes"];
    const FALSE: [&str; 4] = ["0", "off", "false", "no"];
    if TRUE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Ok(true)
    } else if FALSE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Ok(false)
    } else {
        Err(Error::new(
            Errno::EINVAL,
            format!("`{text}` is not a boolean: use 0/1, on/off, true/false or yes/no"),
        ))
    }
}

/// Is `s` usable inside an environment-variable name?
fn valid_ident(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn describe(prov: Option<&str>, name: &str) -> String {
    match prov {
        Some(p) => format!("parameter `{name}` of provider `{p}`"),
        None => format!("core parameter `{name}`"),
    }
}

/// A set of declared parameters and the logic to read them.
#[derive(Debug, Clone, Default)]
pub struct ParamStore {
    /// Declarations in declaration order.
    defs: Vec<ParamDef>,
    /// Environment-variable name → index in `defs`.
    by_env: HashMap<String, usize>,
}

/// Declares `ParamStore`'s typed getters: each is [`ParamStore::get`] at one type.
macro_rules! typed_getters {
    ($($(#[$doc:meta])* $name:ident -> $t:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(
                &self,
                src: &Sources<'_>,
                prov: Option<&str>,
                name: &str,
            ) -> Result<Option<$t>> {
                self.get(src, prov, name)
            }
        )*
    };
}

impl ParamStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declare a parameter.
    ///
    /// Errors (`FI_EINVAL`): an empty `help`; a `prov` or `name` that is empty or holds
    /// anything but ASCII letters, digits and `_`; a default that does not parse as `ty`;
    /// the same (prov, name) declared before with another type; or another parameter
    /// already using the same environment variable. Declaring the same (prov, name) again
    /// with the same type is accepted and keeps the first declaration.
    pub fn declare(
        &mut self,
        prov: Option<&str>,
        name: &str,
        ty: ParamType,
        help: &str,
        default: Option<&str>,
    ) -> Result<()> {
        let what = describe(prov, name);
        if let Some(p) = prov {
            if !valid_ident(p) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{what}: provider name must be ASCII letters, digits and _"),
                ));
            }
        }
        if !valid_ident(name) {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{what}: name must be non-empty ASCII letters, digits and _"),
            ));
        }
        if help.trim().is_empty() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{what}: help text is empty"),
            ));
        }
        if let Some(d) = default {
            let check = match ty {
                ParamType::String => Ok(()),
                ParamType::Int => parse_int(d).map(drop),
                ParamType::Size => parse_size(d).map(drop),
                ParamType::Bool => parse_bool(d).map(drop),
            };
            check.map_err(|e| e.context(format!("{what}: default")))?;
        }
        let env = env_name(prov, name);
        if let Some(&i) = self.by_env.get(&env) {
            let old = &self.defs[i];
            if !same_owner(old, prov, name) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!(
                        "{what}: {env} is already used by {}",
                        describe(old.prov.as_deref(), &old.name)
                    ),
                ));
            }
            if old.ty != ty {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{what}: already declared as {}, now as {}", old.ty, ty),
                ));
            }
            return Ok(());
        }
        self.by_env.insert(env, self.defs.len());
        self.defs.push(ParamDef {
            prov: prov.map(str::to_owned),
            name: name.to_owned(),
            ty,
            help: help.to_owned(),
            default: default.map(str::to_owned),
        });
        Ok(())
    }

    /// The declaration of (prov, name), if any.
    pub fn def(&self, prov: Option<&str>, name: &str) -> Option<&ParamDef> {
        let &i = self.by_env.get(&env_name(prov, name))?;
        let d = &self.defs[i];
        same_owner(d, prov, name).then_some(d)
    }

    /// Every declaration, in declaration order.
    pub fn defs(&self) -> &[ParamDef] {
        &self.defs
    }

    fn require(&self, prov: Option<&str>, name: &str) -> Result<&ParamDef> {
        self.def(prov, name).ok_or_else(|| {
            Error::new(
                Errno::ENOENT,
                format!("{} is not declared", describe(prov, name)),
            )
        })
    }

    /// The raw text and source of a declared parameter's value (`(None, Unset)` when not
    /// set). A non-UTF-8 environment value is an `FI_EINVAL` error.
    fn resolve(&self, def: &ParamDef, src: &Sources<'_>) -> Result<(Option<String>, ParamSource)> {
        let env = def.env_name();
        if let Some(v) = src.env.lookup(&env).filter(|v| !v.is_empty()) {
            return match v.into_string() {
                Ok(s) => Ok((Some(s), ParamSource::Env)),
                Err(raw) => Err(Error::new(
                    Errno::EINVAL,
                    format!("{env}={raw:?} (environment): not valid UTF-8"),
                )),
            };
        }
        if let Some(v) = src.config.params.get(&env).filter(|v| !v.is_empty()) {
            let path = src.config.source.clone().unwrap_or_default();
            return Ok((Some(v.clone()), ParamSource::Config(path)));
        }
        match &def.default {
            Some(d) => Ok((Some(d.clone()), ParamSource::Default)),
            None => Ok((None, ParamSource::Unset)),
        }
    }

    /// Read a parameter as `T` (see [`ParamValue`]).
    ///
    /// Errors: `FI_ENOENT` when (prov, name) is not declared; `FI_EINVAL` when it is
    /// declared with a type `T` cannot read, or its value does not parse — the message
    /// names the variable, the value and where it came from.
    pub fn get<T: ParamValue>(
        &self,
        src: &Sources<'_>,
        prov: Option<&str>,
        name: &str,
    ) -> Result<Option<T>> {
        let def = self.require(prov, name)?;
        if !T::accepts(def.ty) {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{} is declared as {}, not {}",
                    def.env_name(),
                    def.ty,
                    T::TYPE
                ),
            ));
        }
        let (value, source) = self.resolve(def, src)?;
        let Some(text) = value else { return Ok(None) };
        T::parse_param(&text).map(Some).map_err(|e| {
            Error::new(
                Errno::EINVAL,
                format!("{}={text:?} ({source}): {}", def.env_name(), e.message()),
            )
        })
    }

    typed_getters! {
        /// Read a parameter's raw text (any declared type). See [`ParamStore::get`].
        get_str -> String;
        /// Read an [`ParamType::Int`] parameter. See [`ParamStore::get`].
        get_int -> i64;
        /// Read a [`ParamType::Size`] parameter. See [`ParamStore::get`].
        get_size -> usize;
        /// Read a [`ParamType::Bool`] parameter. See [`ParamStore::get`].
        get_bool -> bool;
    }

    /// Every parameter with its current value and source: core parameters first, then by
    /// provider name, each group in declaration order. Never fails: a non-UTF-8
    /// environment value is shown lossily.
    pub fn list(&self, src: &Sources<'_>) -> Vec<ParamEntry> {
        let mut out: Vec<ParamEntry> = self
            .defs
            .iter()
            .map(|def| {
                let env = def.env_name();
                let (value, source) = match self.resolve(def, src) {
                    Ok(r) => r,
                    Err(_) => (
                        src.env
                            .lookup(&env)
                            .map(|v| v.to_string_lossy().into_owned()),
                        ParamSource::Env,
                    ),
                };
                ParamEntry {
                    def: def.clone(),
                    env_name: env,
                    value,
                    source,
                }
            })
            .collect();
        // Stable: declaration order survives within each owner.
        out.sort_by(|a, b| a.def.prov.cmp(&b.def.prov));
        out
    }

    /// The keys of `config`'s `[params]` that are no declared parameter's environment
    /// variable, in key order, each with the closest declared name when one is close
    /// (a likely typo). Keys are compared case-insensitively.
    pub fn unknown_config_keys(&self, config: &PluginsConfig) -> Vec<UnknownParam> {
        config
            .params
            .keys()
            .filter(|key| !self.by_env.contains_key(&key.to_ascii_uppercase()))
            .map(|key| UnknownParam {
                key: key.clone(),
                closest: closest_name(key, self.by_env.keys().map(String::as_str)),
            })
            .collect()
    }
}

/// A `[params]` key of `plugins.toml` that no parameter of this process has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownParam {
    /// The key as written.
    pub key: String,
    /// The closest declared environment-variable name, if one is close enough to be a
    /// likely typo.
    pub closest: Option<String>,
}

impl fmt::Display for UnknownParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[params] {} is not a parameter of this process",
            self.key
        )?;
        match &self.closest {
            Some(c) => write!(f, " (did you mean {c}?)"),
            None => write!(
                f,
                " (no loaded provider declares it; `fi_info -e` lists the parameters)"
            ),
        }
    }
}

/// Edit distance (insertions, deletions, substitutions) between two ASCII-uppercased
/// strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<u8> = a.bytes().map(|c| c.to_ascii_uppercase()).collect();
    let b: Vec<u8> = b.bytes().map(|c| c.to_ascii_uppercase()).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            row[j + 1] = substitute.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        std::mem::swap(&mut prev, &mut row);
    }
    prev[b.len()]
}

/// The candidate closest to `key`, if within a third of the key's length (at least 1,
/// at most 3 edits); ties go to the alphabetically first.
fn closest_name<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let limit = (key.len() / 3).clamp(1, 3);
    candidates
        .map(|c| (edit_distance(key, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c.to_owned())
}

fn same_owner(def: &ParamDef, prov: Option<&str>, name: &str) -> bool {
    let prov_eq = match (def.prov.as_deref(), prov) {
        (None, None) => true,
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    };
    prov_eq && def.name.eq_ignore_ascii_case(name)
}

/// Declare the core's own parameters into `store`.
pub fn core_params(store: &mut ParamStore) -> Result<()> {
    use ParamType::*;
    let defs: [(&str, ParamType, &str, Option<&str>); 7] = [
        (
            "provider",
            String,
            "Use only these providers: a comma-separated list of names, layered ones \
             written core;util (tcp;ofi_rxm); a leading ^ excludes the listed providers \
             instead (default: every available provider)",
            None,
        ),
        (
            "provider_path",
            String,
            "Directories to search for provider plugins, separated by ':', searched before \
             the search_paths of plugins.toml",
            None,
        ),
        (
            "hook",
            String,
            "Hooks to wrap around every object of a fabric, separated by ',' or ';' and \
             applied in order (perf, trace, debug, noop, fault)",
            None,
        ),
        (
            "log_level",
            String,
            "Most detailed level of log messages shown: warn, info, debug or trace \
             (also error or off; default: warn)",
            None,
        ),
        (
            "log_prov",
            String,
            "Show log messages only from these providers (comma-separated); a leading ^ \
             hides the listed providers instead (default: all)",
            None,
        ),
        (
            "log_subsys",
            String,
            "Show log messages only from these subsystems (comma-separated, from core, \
             fabric, domain, ep_ctrl, ep_data, av, cq, eq, mr, cntr); a leading ^ hides \
             them instead (default: all)",
            None,
        ),
        (
            "universe_size",
            Size,
            "Expected number of peer processes, used to size address vectors and \
             connection tables (default: 1024)",
            Some("1024"),
        ),
    ];
    for (name, ty, help, default) in defs {
        store.declare(None, name, ty, help, default)?;
    }
    Ok(())
}

static GLOBAL: OnceLock<RwLock<ParamStore>> = OnceLock::new();

fn global_store() -> &'static RwLock<ParamStore> {
    GLOBAL.get_or_init(|| {
        let mut store = ParamStore::new();
        // The core table above is valid (tested); an error would only leave a parameter
        // undeclared, which its readers then report as FI_ENOENT.
        let _ = core_params(&mut store);
        RwLock::new(store)
    })
}

fn with_store<R>(f: impl FnOnce(&ParamStore, &Sources<'_>) -> R) -> R {
    let guard = global_store()
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let src = Sources::new(&ProcessEnv, config::global());
    f(&guard, &src)
}

/// Declare a parameter in the process-wide store. See [`ParamStore::declare`].
pub fn declare(
    prov: Option<&str>,
    name: &str,
    ty: ParamType,
    help: &str,
    default: Option<&str>,
) -> Result<()> {
    let mut guard = global_store()
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    guard.declare(prov, name, ty, help, default)
}

/// Read a parameter of the process-wide store as `T`. See [`ParamStore::get`].
pub fn get<T: ParamValue>(prov: Option<&str>, name: &str) -> Result<Option<T>> {
    with_store(|s, src| s.get(src, prov, name))
}

/// Read a parameter's raw text from the process-wide store. See [`ParamStore::get`].
pub fn get_str(prov: Option<&str>, name: &str) -> Result<Option<String>> {
    get(prov, name)
}

/// Read an Int parameter from the process-wide store. See [`ParamStore::get`].
pub fn get_int(prov: Option<&str>, name: &str) -> Result<Option<i64>> {
    get(prov, name)
}

/// Read a Size parameter from the process-wide store. See [`ParamStore::get`].
pub fn get_size(prov: Option<&str>, name: &str) -> Result<Option<usize>> {
    get(prov, name)
}

/// Read a Bool parameter from the process-wide store. See [`ParamStore::get`].
pub fn get_bool(prov: Option<&str>, name: &str) -> Result<Option<bool>> {
    get(prov, name)
}

/// The `[params]` keys of the process's `plugins.toml` that no parameter declared so
/// far has (see [`ParamStore::unknown_config_keys`]).
pub fn unknown_config_keys() -> Vec<UnknownParam> {
    with_store(|s, src| s.unknown_config_keys(src.config))
}

/// Warn once per process about each `[params]` key of `plugins.toml` that no declared
/// parameter has, with the closest known name. Run after the providers declared theirs
/// (the process-wide registry does, once it is built).
pub fn warn_unknown_config_keys() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let source = config::global()
            .source
            .as_ref()
            .map_or_else(|| "plugins.toml".to_owned(), |p| p.display().to_string());
        for unknown in unknown_config_keys() {
            crate::log::setup_warning(&format!("{source}: {unknown}"));
        }
    });
}

/// Every parameter of the process-wide store with its value and source, for `fi_info -e`.
/// See [`ParamStore::list`].
pub fn list() -> Vec<ParamEntry> {
    with_store(|s, src| s.list(src))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn fake_env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn cfg(pairs: &[(&str, &str)]) -> PluginsConfig {
        PluginsConfig {
            source: Some(PathBuf::from("/etc/ofi/plugins.toml")),
            params: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..PluginsConfig::default()
        }
    }

    fn store() -> ParamStore {
        let mut s = ParamStore::new();
        core_params(&mut s).unwrap();
        s.declare(Some("tcp"), "iface", ParamType::String, "interface", None)
            .unwrap();
        s.declare(
            Some("tcp"),
            "port_low",
            ParamType::Int,
            "lowest port",
            Some("0"),
        )
        .unwrap();
        s.declare(
            Some("ofi_rxm"),
            "buffer_size",
            ParamType::Size,
            "buffer",
            Some("16k"),
        )
        .unwrap();
        s.declare(Some("shm"), "disable_cma", ParamType::Bool, "no CMA", None)
            .unwrap();
        s
    }

    #[test]
    fn unknown_config_keys_get_the_closest_known_name() {
        let s = store();
        let config = cfg(&[
            ("FI_TCP_IFACE", "lo"),
            ("fi_tcp_port_low", "1"),
            ("FI_TCP_IFAC", "lo"),
            ("FI_OFI_RXM_BUFER_SIZE", "1"),
            ("FI_SHM_DISABLE_CM", "1"),
            ("FI_VERBS_IFACE", "mlx5_0"),
            ("FI_X", "1"),
        ]);
        let unknown = s.unknown_config_keys(&config);
        let got: Vec<(&str, Option<&str>)> = unknown
            .iter()
            .map(|u| (u.key.as_str(), u.closest.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("FI_OFI_RXM_BUFER_SIZE", Some("FI_OFI_RXM_BUFFER_SIZE")),
                ("FI_SHM_DISABLE_CM", Some("FI_SHM_DISABLE_CMA")),
                ("FI_TCP_IFAC", Some("FI_TCP_IFACE")),
                ("FI_VERBS_IFACE", None),
                ("FI_X", None),
            ]
        );
        assert_eq!(
            unknown[2].to_string(),
            "[params] FI_TCP_IFAC is not a parameter of this process (did you mean \
             FI_TCP_IFACE?)"
        );
        assert!(unknown[3]
            .to_string()
            .contains("no loaded provider declares it"));
        assert!(s
            .unknown_config_keys(&cfg(&[("FI_TCP_IFACE", "lo")]))
            .is_empty());
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", "ABC"), 0);
        assert_eq!(edit_distance("abc", "abd"), 1);
        assert_eq!(edit_distance("abc", "ab"), 1);
        assert_eq!(edit_distance("ab", "abc"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn env_names_are_upper_case() {
        assert_eq!(
            env_name(Some("ofi_rxm"), "buffer_size"),
            "FI_OFI_RXM_BUFFER_SIZE"
        );
        assert_eq!(env_name(None, "log_level"), "FI_LOG_LEVEL");
        assert_eq!(env_name(Some("tcp"), "IFACE"), "FI_TCP_IFACE");
    }

    #[test]
    fn labels_match_fi_info() {
        assert_eq!(ParamType::String.label(), "String");
        assert_eq!(ParamType::Int.label(), "Integer");
        assert_eq!(ParamType::Size.label(), "size_t");
        assert_eq!(
            ParamType::Bool.label(),
            "Boolean (0/1, on/off, true/false, yes/no)"
        );
    }

    #[test]
    fn declare_validates() {
        let mut s = ParamStore::new();
        // (provider, name, type, help, default): each refused with FI_EINVAL.
        let refused = [
            (None, "x", ParamType::Int, "", None),
            (None, "x", ParamType::Int, "  ", None),
            (None, "", ParamType::Int, "h", None),
            (None, "a-b", ParamType::Int, "h", None),
            (Some(""), "a", ParamType::Int, "h", None),
            (Some("tcp;ofi_rxm"), "a", ParamType::Int, "h", None),
            (None, "x", ParamType::Int, "h", Some("12abc")),
            (None, "x", ParamType::Bool, "h", Some("maybe")),
        ];
        for (prov, name, ty, help, default) in refused {
            let e = s.declare(prov, name, ty, help, default).unwrap_err();
            let case = format!("{prov:?} {name:?} {help:?} {default:?}");
            assert_eq!(e.code(), Errno::EINVAL, "{case}");
            if default.is_some() {
                assert!(e.message().contains("default"), "{case}: {e}");
            }
        }
        assert!(s.defs().is_empty());
    }

    #[test]
    fn redeclaring_is_idempotent_but_not_with_another_type() {
        let mut s = ParamStore::new();
        s.declare(Some("tcp"), "iface", ParamType::String, "first", None)
            .unwrap();
        s.declare(Some("tcp"), "iface", ParamType::String, "second", Some("x"))
            .unwrap();
        assert_eq!(s.defs().len(), 1);
        assert_eq!(s.defs()[0].help, "first");
        let e = s
            .declare(Some("tcp"), "iface", ParamType::Int, "h", None)
            .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        // Another owner mapping to the same variable is refused.
        let e = s
            .declare(None, "tcp_iface", ParamType::String, "h", None)
            .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("FI_TCP_IFACE"), "{e}");
        assert_eq!(s.defs().len(), 1);
    }

    #[test]
    fn undeclared_is_enoent() {
        let s = store();
        let env = fake_env(&[("FI_TCP_NOPE", "1")]);
        let c = PluginsConfig::default();
        let src = Sources::new(&env, &c);
        assert_eq!(
            s.get_str(&src, Some("tcp"), "nope").unwrap_err().code(),
            Errno::ENOENT
        );
        // Declared by tcp, not by udp.
        assert_eq!(
            s.get_str(&src, Some("udp"), "iface").unwrap_err().code(),
            Errno::ENOENT
        );
        // Same variable, other owner: not the same parameter.
        assert_eq!(
            s.get_str(&src, None, "tcp_iface").unwrap_err().code(),
            Errno::ENOENT
        );
    }

    #[test]
    fn env_then_config_then_default() {
        let s = store();
        let c = cfg(&[("FI_OFI_RXM_BUFFER_SIZE", "32k"), ("FI_TCP_IFACE", "eth0")]);
        let none = fake_env(&[]);
        let src = Sources::new(&none, &c);
        assert_eq!(
            s.get_size(&src, Some("ofi_rxm"), "buffer_size").unwrap(),
            Some(32 << 10)
        );
        assert_eq!(
            s.get_str(&src, Some("tcp"), "iface").unwrap().as_deref(),
            Some("eth0")
        );
        assert_eq!(s.get_int(&src, Some("tcp"), "port_low").unwrap(), Some(0));
        assert_eq!(s.get_bool(&src, Some("shm"), "disable_cma").unwrap(), None);
        assert_eq!(s.get_size(&src, None, "universe_size").unwrap(), Some(1024));

        let env = fake_env(&[("FI_OFI_RXM_BUFFER_SIZE", "0x100"), ("FI_TCP_IFACE", "lo")]);
        let src = Sources::new(&env, &c);
        assert_eq!(
            s.get_size(&src, Some("ofi_rxm"), "buffer_size").unwrap(),
            Some(256)
        );
        assert_eq!(
            s.get_str(&src, Some("tcp"), "iface").unwrap().as_deref(),
            Some("lo")
        );

        // Empty values count as unset at their level.
        let env = fake_env(&[("FI_TCP_IFACE", "")]);
        let src = Sources::new(&env, &c);
        assert_eq!(
            s.get_str(&src, Some("tcp"), "iface").unwrap().as_deref(),
            Some("eth0")
        );
        let c2 = cfg(&[("FI_OFI_RXM_BUFFER_SIZE", "")]);
        let src = Sources::new(&none, &c2);
        assert_eq!(
            s.get_size(&src, Some("ofi_rxm"), "buffer_size").unwrap(),
            Some(16 << 10)
        );
    }

    #[test]
    fn typed_getters_check_the_declared_type() {
        let s = store();
        let env = fake_env(&[]);
        let c = PluginsConfig::default();
        let src = Sources::new(&env, &c);
        let e = s.get_int(&src, Some("ofi_rxm"), "buffer_size").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("declared as size_t"), "{e}");
        assert_eq!(
            s.get_bool(&src, Some("tcp"), "iface").unwrap_err().code(),
            Errno::EINVAL
        );
        // Raw text is available for any type.
        assert_eq!(
            s.get_str(&src, None, "universe_size").unwrap().as_deref(),
            Some("1024")
        );
    }

    #[test]
    fn bad_values_name_variable_value_and_source() {
        let s = store();
        let env = fake_env(&[
            ("FI_SHM_DISABLE_CMA", "maybe"),
            ("FI_TCP_PORT_LOW", "12abc"),
        ]);
        let c = cfg(&[("FI_OFI_RXM_BUFFER_SIZE", "-1")]);
        let src = Sources::new(&env, &c);
        let e = s.get_bool(&src, Some("shm"), "disable_cma").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(
            e.message()
                .contains("FI_SHM_DISABLE_CMA=\"maybe\" (environment)"),
            "{e}"
        );
        let e = s.get_int(&src, Some("tcp"), "port_low").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("FI_TCP_PORT_LOW"), "{e}");
        let e = s
            .get_size(&src, Some("ofi_rxm"), "buffer_size")
            .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("(/etc/ofi/plugins.toml)"), "{e}");
        assert!(e.message().contains("negative"), "{e}");
    }

    #[test]
    fn non_utf8_env_is_einval() {
        use std::os::unix::ffi::OsStringExt;
        struct Raw;
        impl EnvLookup for Raw {
            fn lookup(&self, name: &str) -> Option<OsString> {
                (name == "FI_TCP_IFACE").then(|| OsString::from_vec(vec![b'e', 0xff]))
            }
        }
        let s = store();
        let c = PluginsConfig::default();
        let src = Sources::new(&Raw, &c);
        let e = s.get_str(&src, Some("tcp"), "iface").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("not valid UTF-8"), "{e}");
        let entry = s
            .list(&src)
            .into_iter()
            .find(|e| e.env_name == "FI_TCP_IFACE")
            .unwrap();
        assert_eq!(entry.source, ParamSource::Env);
        assert_eq!(entry.value.as_deref(), Some("e\u{fffd}"));
    }

    #[test]
    fn int_syntax() {
        assert_eq!(parse_int("42").unwrap(), 42);
        assert_eq!(parse_int(" -42 ").unwrap(), -42);
        assert_eq!(parse_int("+7").unwrap(), 7);
        assert_eq!(parse_int("0x1F").unwrap(), 31);
        assert_eq!(parse_int("0X1f").unwrap(), 31);
        assert_eq!(parse_int("-0x10").unwrap(), -16);
        assert_eq!(parse_int("010").unwrap(), 8);
        assert_eq!(parse_int("0").unwrap(), 0);
        assert_eq!(parse_int("-9223372036854775808").unwrap(), i64::MIN);
        assert_eq!(parse_int("9223372036854775807").unwrap(), i64::MAX);
        for bad in [
            "",
            "-",
            "0x",
            "12abc",
            "08",
            "9223372036854775808",
            "1.5",
            "ten",
            "1 2",
            "--1",
        ] {
            assert_eq!(parse_int(bad).unwrap_err().code(), Errno::EINVAL, "{bad:?}");
        }
    }

    #[test]
    fn size_syntax() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("2m").unwrap(), 2 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("0x10k").unwrap(), 16 << 10);
        assert_eq!(parse_size("+3").unwrap(), 3);
        for bad in ["-1", "-0", "4kb", "4t", "k", "", "18446744073709551615k"] {
            assert_eq!(
                parse_size(bad).unwrap_err().code(),
                Errno::EINVAL,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bool_syntax() {
        for t in ["1", "on", "ON", "true", "True", "yes", " YES "] {
            assert!(parse_bool(t).unwrap(), "{t}");
        }
        for f in ["0", "off", "false", "FALSE", "no", "No"] {
            assert!(!parse_bool(f).unwrap(), "{f}");
        }
        for bad in ["", "2", "y", "enable", "truee"] {
            assert_eq!(
                parse_bool(bad).unwrap_err().code(),
                Errno::EINVAL,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn list_orders_core_first_then_provider_then_declaration() {
        let mut s = ParamStore::new();
        s.declare(Some("tcp"), "b", ParamType::Int, "h", None)
            .unwrap();
        s.declare(None, "z", ParamType::Int, "h", None).unwrap();
        s.declare(Some("shm"), "x", ParamType::Int, "h", None)
            .unwrap();
        s.declare(Some("tcp"), "a", ParamType::Int, "h", Some("5"))
            .unwrap();
        s.declare(None, "y", ParamType::Bool, "h", None).unwrap();
        let env = fake_env(&[("FI_TCP_B", "3")]);
        let c = cfg(&[("FI_SHM_X", "9")]);
        let src = Sources::new(&env, &c);
        let l = s.list(&src);
        let names: Vec<&str> = l.iter().map(|e| e.env_name.as_str()).collect();
        assert_eq!(names, ["FI_Z", "FI_Y", "FI_SHM_X", "FI_TCP_B", "FI_TCP_A"]);
        assert_eq!(l[0].source, ParamSource::Unset);
        assert_eq!(l[0].value, None);
        assert_eq!(
            l[2].source,
            ParamSource::Config("/etc/ofi/plugins.toml".into())
        );
        assert_eq!(l[2].value.as_deref(), Some("9"));
        assert_eq!(l[3].source, ParamSource::Env);
        assert_eq!(l[4].source, ParamSource::Default);
        assert_eq!(l[4].value.as_deref(), Some("5"));
    }

    #[test]
    fn core_params_are_declared() {
        let s = store();
        for n in [
            "provider",
            "provider_path",
            "hook",
            "log_level",
            "log_prov",
            "log_subsys",
            "universe_size",
        ] {
            assert!(s.def(None, n).is_some(), "{n}");
        }
        assert_eq!(s.def(None, "universe_size").unwrap().ty, ParamType::Size);
    }

    #[test]
    fn global_store_works() {
        // Uses a variable nobody sets, so the real environment does not matter.
        declare(
            Some("ofi_param_test"),
            "knob",
            ParamType::Int,
            "a test knob",
            Some("7"),
        )
        .unwrap();
        assert_eq!(get_int(Some("ofi_param_test"), "knob").unwrap(), Some(7));
        assert_eq!(
            get::<String>(Some("ofi_param_test"), "knob")
                .unwrap()
                .as_deref(),
            Some("7")
        );
        assert_eq!(
            get_int(Some("ofi_param_test"), "nope").unwrap_err().code(),
            Errno::ENOENT
        );
        assert!(get_size(None, "universe_size").is_ok());
        let l = list();
        assert!(l.iter().any(|e| e.env_name == "FI_OFI_PARAM_TEST_KNOB"));
        assert!(l[0].def.prov.is_none());
    }
}
