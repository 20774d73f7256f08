//! Logging, the host side (DESIGN §9): the stderr subscriber of an application process,
//! filtered by `FI_LOG_LEVEL`, `FI_LOG_PROV` and `FI_LOG_SUBSYS`.
//!
//! # Emitting
//!
//! Every event carries two fields, `prov` (provider name, `"core"` for the core) and
//! `subsys` (one of [`SUBSYSTEMS`]). The macros [`ofi_error!`](crate::ofi_error),
//! [`ofi_warn!`](crate::ofi_warn), [`ofi_info!`](crate::ofi_info),
//! [`ofi_debug!`](crate::ofi_debug) and [`ofi_trace!`](crate::ofi_trace) add them and use
//! the target `ofi`:
//!
//! ```
//! ofi_core::ofi_warn!("tcp", "ep_ctrl", "connect to {} failed", "10.0.0.1:4000");
//! ```
//!
//! # Filtering ([`init`])
//!
//! - `FI_LOG_LEVEL`: `warn`, `info`, `debug` or `trace` (case-insensitive; `error`,
//!   `off`, `none` and `warning` are accepted too). Unset → `warn` — unlike the C
//!   library, which logs nothing when it is unset. Anything else → `warn`, and one
//!   warning says so. Levels follow `tracing`'s order (`trace` is the most detailed),
//!   where the C library puts `trace` between `warn` and `info`.
//! - `FI_LOG_PROV`: comma-separated provider names; a leading `^` excludes them instead.
//!   Events whose `prov` is filtered out are dropped. The core (`prov = "core"`) is not a
//!   provider: a list of names never hides it, only `^core` does.
//! - `FI_LOG_SUBSYS`: comma-separated subsystem names from [`SUBSYSTEMS`], `^` to exclude.
//!
//! Names match case-insensitively. The three values are read as the core parameters
//! `log_level`, `log_prov` and `log_subsys` ([`crate::param`]), so `plugins.toml` may set
//! them too (the environment wins). The prov/subsys filters apply to events of the `ofi`
//! target and of modules of crates named `ofi…`; an event there without a `prov` or
//! `subsys` field counts as `core`. Events of other crates are filtered by level only.
//!
//! Output goes to stderr through `tracing_subscriber`'s fmt layer, with the fields
//! formatted by [`OfiFields`] so the origin comes first, e.g.
//! `2025-01-01T00:00:00.000000Z  WARN ofi: prov=tcp subsys=ep_ctrl connect failed`.
//! Colours are used only when stderr is a terminal and `NO_COLOR` is unset. Warnings
//! about the configuration itself (a bad `FI_LOG_LEVEL`, a `plugins.toml` that failed to
//! load) use the target [`SETUP_TARGET`] and are filtered by level only.
//! If the application already installed a global subscriber, [`init`] leaves it alone and
//! our events go there.
//!
//! # What is the core's
//!
//! The `ofi_*!` macros, the level numbers of the plugin boundary, the plugin-side
//! forwarder and the host's log sink live in `ofi_core::log` (a plugin links them) and
//! are re-exported here, so `ofi::log` is one module.
//!
//! Nothing here panics; a panic inside the sink is caught before it reaches C.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};

pub use ofi_core::log::*;

/// A name list with optional negation, as in `FI_LOG_PROV=^tcp,udp`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NameFilter {
    /// `None`: no filter (everything passes).
    names: Option<Vec<String>>,
    negate: bool,
}

impl NameFilter {
    fn parse(text: Option<&str>) -> NameFilter {
        let Some(t) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return NameFilter::default();
        };
        let (negate, list) = match t.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, t),
        };
        let names = list
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect();
        NameFilter {
            names: Some(names),
            negate,
        }
    }

    fn is_all(&self) -> bool {
        self.names.is_none()
    }

    fn listed(&self, name: &str) -> bool {
        self.names
            .as_ref()
            .is_some_and(|v| v.iter().any(|n| n.eq_ignore_ascii_case(name)))
    }

    fn allows(&self, name: &str) -> bool {
        match &self.names {
            None => true,
            Some(_) => self.listed(name) != self.negate,
        }
    }
}

/// The parsed `FI_LOG_*` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter {
    level: LevelFilter,
    prov: NameFilter,
    subsys: NameFilter,
    warnings: Vec<String>,
}

impl Default for LogFilter {
    /// Level warn, every provider and subsystem.
    fn default() -> Self {
        LogFilter::from_env_values(None, None, None)
    }
}

impl LogFilter {
    /// Parse the values of `FI_LOG_LEVEL`, `FI_LOG_PROV` and `FI_LOG_SUBSYS` (`None` =
    /// unset). Never fails: problems (an unknown level, unknown subsystem names) are kept
    /// in [`LogFilter::warnings`] and the filter falls back to sensible values.
    pub fn from_env_values(
        level: Option<&str>,
        prov: Option<&str>,
        subsys: Option<&str>,
    ) -> LogFilter {
        let mut warnings = Vec::new();
        let level = match level.map(str::trim).filter(|l| !l.is_empty()) {
            None => LevelFilter::WARN,
            Some(l) => match l.to_ascii_lowercase().as_str() {
                "off" | "none" => LevelFilter::OFF,
                "error" => LevelFilter::ERROR,
                "warn" | "warning" => LevelFilter::WARN,
                "info" => LevelFilter::INFO,
                "debug" => LevelFilter::DEBUG,
                "trace" => LevelFilter::TRACE,
                _ => {
                    warnings.push(format!(
                        "FI_LOG_LEVEL={l:?} is not a level (use warn, info, debug or trace); \
                         logging at warn"
                    ));
                    LevelFilter::WARN
                }
            },
        };
        let prov = NameFilter::parse(prov);
        let subsys = NameFilter::parse(subsys);
        if let Some(names) = &subsys.names {
            let unknown: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| !SUBSYSTEMS.contains(n))
                .collect();
            if !unknown.is_empty() {
                warnings.push(format!(
                    "FI_LOG_SUBSYS: unknown subsystem(s) {} (known: {})",
                    unknown.join(", "),
                    SUBSYSTEMS.join(", ")
                ));
            }
        }
        LogFilter {
            level,
            prov,
            subsys,
            warnings,
        }
    }

    /// The filter of this process: `log_level`, `log_prov`, `log_subsys` read through
    /// [`crate::param`] (environment, then `plugins.toml`). A value that cannot be read
    /// (not UTF-8) is ignored with a warning.
    pub fn from_process() -> LogFilter {
        let mut problems = Vec::new();
        let mut read = |name: &str| match crate::param::get_str(None, name) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("ignored: {e}"));
                None
            }
        };
        let level = read("log_level");
        let prov = read("log_prov");
        let subsys = read("log_subsys");
        let mut f =
            LogFilter::from_env_values(level.as_deref(), prov.as_deref(), subsys.as_deref());
        f.warnings.extend(problems);
        f
    }

    /// The most detailed level shown.
    pub fn max_level(&self) -> LevelFilter {
        self.level
    }

    /// Problems found while parsing, one sentence each ([`init`] logs them).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Whether an event of `level` from provider `prov` and subsystem `subsys` is shown.
    pub fn enabled(&self, level: Level, prov: &str, subsys: &str) -> bool {
        level <= self.level && self.prov_allows(prov) && self.subsys.allows(subsys)
    }

    fn prov_allows(&self, prov: &str) -> bool {
        if prov.eq_ignore_ascii_case("core") && !self.prov.negate {
            return true;
        }
        self.prov.allows(prov)
    }

    fn fields_matter(&self, meta: &Metadata<'_>) -> bool {
        (!self.prov.is_all() || !self.subsys.is_all()) && is_ofi_target(meta.target())
    }
}

/// `ofi`, `ofi::…` (but not [`SETUP_TARGET`]), or a module of a crate named `ofi…`
/// (`ofi_core::log`).
fn is_ofi_target(target: &str) -> bool {
    target != SETUP_TARGET
        && (target == TARGET || target.starts_with("ofi::") || target.starts_with("ofi_"))
}

/// A short name captured without allocating; longer values do not fit and match nothing.
struct ShortName {
    buf: [u8; 64],
    len: usize,
    overflow: bool,
    set: bool,
}

impl ShortName {
    const fn new() -> Self {
        ShortName {
            buf: [0; 64],
            len: 0,
            overflow: false,
            set: false,
        }
    }

    fn as_str(&self) -> &str {
        if !self.set {
            return "core";
        }
        if self.overflow {
            // Matches no list entry (entries are shorter than the buffer).
            return "\u{0}";
        }
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("\u{0}")
    }
}

impl fmt::Write for ShortName {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            self.overflow = true;
            return Ok(());
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Reads `prov` and `subsys` of an event.
struct ProvSubsys {
    prov: ShortName,
    subsys: ShortName,
}

impl Visit for ProvSubsys {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "prov" => &mut self.prov,
            "subsys" => &mut self.subsys,
            _ => return,
        };
        *slot = ShortName::new();
        slot.set = true;
        let _ = slot.write_str(value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let slot = match field.name() {
            "prov" => &mut self.prov,
            "subsys" => &mut self.subsys,
            _ => return,
        };
        *slot = ShortName::new();
        slot.set = true;
        let _ = write!(slot, "{value:?}");
    }
}

impl<S: Subscriber> Filter<S> for LogFilter {
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        *meta.level() <= self.level
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        if !self.fields_matter(event.metadata()) {
            return true;
        }
        let mut v = ProvSubsys {
            prov: ShortName::new(),
            subsys: ShortName::new(),
        };
        event.record(&mut v);
        self.prov_allows(v.prov.as_str()) && self.subsys.allows(v.subsys.as_str())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.level)
    }
}

/// The field formatter of our stderr output: `prov=… subsys=… message other=…`, so the
/// origin of a line comes right after its level and target.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfiFields;

impl<'writer> FormatFields<'writer> for OfiFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut f = FieldText::default();
        fields.record(&mut f);
        let mut sep = "";
        if !f.prov.is_empty() {
            write!(writer, "prov={}", f.prov)?;
            sep = " ";
        }
        if !f.subsys.is_empty() {
            write!(writer, "{sep}subsys={}", f.subsys)?;
            sep = " ";
        }
        if !f.message.is_empty() {
            write!(writer, "{sep}{}", f.message)?;
            sep = " ";
        }
        let extra = f.extra.trim_start();
        if !extra.is_empty() {
            write!(writer, "{sep}{extra}")?;
        }
        Ok(())
    }
}

static INIT: OnceLock<bool> = OnceLock::new();
static INIT_DONE: AtomicBool = AtomicBool::new(false);

/// Install the stderr subscriber filtered by `FI_LOG_*` (see the module documentation).
///
/// Idempotent: only the first call does anything. When the application already set a
/// global subscriber, that one is kept (and receives our events). Warnings about bad
/// `FI_LOG_*` values and a plugin configuration that failed to load are logged once,
/// right after. Never panics.
pub fn init() {
    INIT.get_or_init(|| {
        let filter = LogFilter::from_process();
        let warnings = filter.warnings().to_vec();
        let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_target(true)
            .fmt_fields(OfiFields)
            .with_filter(filter);
        let subscriber = tracing_subscriber::registry().with(fmt);
        let installed = tracing::subscriber::set_global_default(subscriber).is_ok();
        INIT_DONE.store(true, Ordering::Release);
        for w in warnings {
            setup_warning(&w);
        }
        crate::config::report_load_error();
        installed
    });
}

/// Log a warning about the configuration itself (target [`SETUP_TARGET`]).
pub(crate) fn setup_warning(msg: &str) {
    tracing::warn!(target: SETUP_TARGET, prov = "core", subsys = "core", "{msg}");
}

/// Whether [`init`] has run (whether or not it installed its subscriber).
pub fn is_initialized() -> bool {
    INIT_DONE.load(Ordering::Acquire)
}

/// Whether [`init`] installed our subscriber (false: not run yet, or the application had
/// its own).
pub fn installed() -> bool {
    INIT.get().copied().unwrap_or(false)
}

/// A layer that records every event it sees as what `record` makes of it (for
/// [`EventCapture::flattened`]: the event flattened as for the plugin boundary,
/// [`flatten_event`], with its target): for tests and tools that check what was logged.
/// Clones share one record.
pub struct EventCapture<T> {
    events: Arc<Mutex<Vec<T>>>,
    record: fn(&Event<'_>) -> T,
}

impl<T> EventCapture<T> {
    /// A capture that records `record(event)` for every event.
    pub fn new(record: fn(&Event<'_>) -> T) -> Self {
        EventCapture {
            events: Arc::default(),
            record,
        }
    }

    /// The events recorded so far, oldest first; the record is left empty.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl EventCapture<(FlatEvent, String)> {
    /// A capture that records each event flattened ([`flatten_event`]) with its target.
    pub fn flattened() -> Self {
        EventCapture::new(|e| (flatten_event(e), e.metadata().target().to_owned()))
    }
}

impl<T> Clone for EventCapture<T> {
    fn clone(&self) -> Self {
        EventCapture {
            events: Arc::clone(&self.events),
            record: self.record,
        }
    }
}

impl<T> fmt::Debug for EventCapture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.events.lock().map_or(0, |v| v.len());
        f.debug_struct("EventCapture")
            .field("events", &held)
            .finish()
    }
}

impl<S: Subscriber, T: Send + 'static> Layer<S> for EventCapture<T> {
    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let item = (self.record)(event);
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn level_defaults_and_parsing() {
        let f = LogFilter::from_env_values(None, None, None);
        assert_eq!(f.max_level(), LevelFilter::WARN);
        assert!(f.warnings().is_empty());
        for (text, want) in [
            ("warn", LevelFilter::WARN),
            ("INFO", LevelFilter::INFO),
            ("Debug", LevelFilter::DEBUG),
            (" trace ", LevelFilter::TRACE),
            ("error", LevelFilter::ERROR),
            ("off", LevelFilter::OFF),
            ("", LevelFilter::WARN),
        ] {
            let f = LogFilter::from_env_values(Some(text), None, None);
            assert_eq!(f.max_level(), want, "{text:?}");
            assert!(f.warnings().is_empty(), "{text:?}");
        }
        let f = LogFilter::from_env_values(Some("loud"), None, None);
        assert_eq!(f.max_level(), LevelFilter::WARN);
        assert_eq!(f.warnings().len(), 1);
        assert!(f.warnings()[0].contains("\"loud\""), "{:?}", f.warnings());
    }

    #[test]
    fn enabled_by_level() {
        let f = LogFilter::from_env_values(Some("info"), None, None);
        assert!(f.enabled(Level::ERROR, "tcp", "cq"));
        assert!(f.enabled(Level::INFO, "tcp", "cq"));
        assert!(!f.enabled(Level::DEBUG, "tcp", "cq"));
        let off = LogFilter::from_env_values(Some("off"), None, None);
        assert!(!off.enabled(Level::ERROR, "core", "core"));
    }

    #[test]
    fn prov_filter() {
        let f = LogFilter::from_env_values(Some("trace"), Some("tcp, OFI_RXM"), None);
        assert!(f.enabled(Level::WARN, "tcp", "cq"));
        assert!(f.enabled(Level::WARN, "ofi_rxm", "cq"));
        assert!(!f.enabled(Level::WARN, "udp", "cq"));
        assert!(
            f.enabled(Level::WARN, "core", "core"),
            "core is not a provider"
        );
        let f = LogFilter::from_env_values(None, Some("^tcp"), None);
        assert!(!f.enabled(Level::WARN, "TCP", "cq"));
        assert!(f.enabled(Level::WARN, "udp", "cq"));
        assert!(f.enabled(Level::WARN, "core", "core"));
        let f = LogFilter::from_env_values(None, Some("^core"), None);
        assert!(!f.enabled(Level::WARN, "core", "core"));
        assert!(f.enabled(Level::WARN, "tcp", "core"));
        // An empty list keeps only the core.
        let f = LogFilter::from_env_values(None, Some(","), None);
        assert!(!f.enabled(Level::WARN, "tcp", "core"));
        assert!(f.enabled(Level::WARN, "core", "core"));
    }

    #[test]
    fn subsys_filter() {
        let f = LogFilter::from_env_values(None, None, Some("cq,ep_data"));
        assert!(f.warnings().is_empty());
        assert!(f.enabled(Level::WARN, "tcp", "cq"));
        assert!(f.enabled(Level::WARN, "tcp", "EP_DATA"));
        assert!(!f.enabled(Level::WARN, "tcp", "av"));
        let f = LogFilter::from_env_values(None, None, Some("^mr"));
        assert!(!f.enabled(Level::WARN, "tcp", "mr"));
        assert!(f.enabled(Level::WARN, "tcp", "cq"));
        let f = LogFilter::from_env_values(None, None, Some("cq,bogus"));
        assert_eq!(f.warnings().len(), 1);
        assert!(f.warnings()[0].contains("bogus"));
    }

    #[test]
    fn filter_as_a_layer_filter() {
        let cap = EventCapture::flattened();
        let filter = LogFilter::from_env_values(Some("debug"), Some("^udp"), Some("^mr"));
        let sub = tracing_subscriber::registry().with(cap.clone().with_filter(filter));
        tracing::subscriber::with_default(sub, || {
            crate::ofi_warn!("tcp", "cq", "kept {}", 1);
            crate::ofi_debug!("tcp", "ep_data", "kept too");
            crate::ofi_trace!("tcp", "cq", "too detailed");
            crate::ofi_warn!("udp", "cq", "provider excluded");
            crate::ofi_warn!("tcp", "mr", "subsystem excluded");
            crate::ofi_warn!("core", "core", "core kept");
            tracing::warn!(target: "other_crate", "foreign events pass by level");
            tracing::debug!(target: "ofi", "no fields: counts as core");
        });
        let got: Vec<String> = cap.take().into_iter().map(|(e, _)| e.message).collect();
        assert_eq!(
            got,
            [
                "kept 1",
                "kept too",
                "core kept",
                "foreign events pass by level",
                "no fields: counts as core"
            ]
        );
    }

    /// A `MakeWriter` into a shared buffer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn output_puts_prov_and_subsys_first() {
        let buf = Buf::default();
        let out = buf.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .without_time()
            .fmt_fields(OfiFields)
            .with_filter(LogFilter::from_env_values(None, None, Some("ep_ctrl")));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            crate::ofi_warn!("tcp", "ep_ctrl", "connect to {} failed", "10.0.0.1:4000");
            tracing::warn!(target: "ofi", prov = "udp", subsys = "ep_ctrl", port = 7, "bind");
            crate::ofi_warn!("tcp", "cq", "filtered out");
            setup_warning("about the configuration");
            tracing::warn!(target: "elsewhere", answer = 42, "plain");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            " WARN ofi: prov=tcp subsys=ep_ctrl connect to 10.0.0.1:4000 failed\n\
             \x20WARN ofi: prov=udp subsys=ep_ctrl bind port=7\n\
             \x20WARN ofi::setup: prov=core subsys=core about the configuration\n\
             \x20WARN elsewhere: plain answer=42\n"
        );
    }

    #[test]
    fn init_is_idempotent() {
        init();
        init();
        assert!(is_initialized());
        // Either we installed ours, or (another test binary setup) someone else's exists.
        let _ = installed();
        crate::ofi_debug!("core", "core", "init test");
    }
}
