//! Logging, the client side (DESIGN §9): the `ofi_*!` macros every provider and the core
//! emit with, and the forwarding of a plugin's events to its host.
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
//! Events are plain `tracing` events. Filtering (`FI_LOG_LEVEL`, `FI_LOG_PROV`,
//! `FI_LOG_SUBSYS`) and printing are the host's: `ofi_host::log` installs the stderr
//! subscriber in an application process. This crate carries no subscriber
//! implementation of its own beyond the plugin forwarder below.
//!
//! # Plugins
//!
//! A plugin links its own copy of this module (and of `tracing`) but must not print by
//! itself: when its init receives the host's table, [`install_plugin_forwarder_at`]
//! installs, inside the plugin, a subscriber that hands every event to the host's
//! [`LogSinkFn`] (given in the host table), pre-filtered by the level the host asked
//! for; [`host_log_sink`] is the host side, which re-emits the event into the host's
//! `tracing` with the same level, `prov` and `subsys`. Levels cross as
//! [`LEVEL_ERROR`]..=[`LEVEL_TRACE`] (1 = error … 5 = trace).
//!
//! Nothing here panics; a panic inside the sink is caught before it reaches C.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span;
use tracing::{Event, Level, Metadata, Subscriber};

#[doc(hidden)]
pub use tracing as __tracing;

/// The subsystem names `FI_LOG_SUBSYS` understands (the C library's list).
pub const SUBSYSTEMS: &[&str] = &[
    "core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr",
];

/// The `tracing` target of every event emitted by the `ofi_*!` macros.
pub const TARGET: &str = "ofi";

/// The target of the host's warnings about the logging and plugin configuration itself;
/// only the level filter applies to them, so a bad `FI_LOG_SUBSYS` cannot hide the
/// warning about it.
pub const SETUP_TARGET: &str = "ofi::setup";

/// Level 1 at the plugin boundary: error.
pub const LEVEL_ERROR: u8 = 1;
/// Level 2 at the plugin boundary: warn.
pub const LEVEL_WARN: u8 = 2;
/// Level 3 at the plugin boundary: info.
pub const LEVEL_INFO: u8 = 3;
/// Level 4 at the plugin boundary: debug.
pub const LEVEL_DEBUG: u8 = 4;
/// Level 5 at the plugin boundary: trace.
pub const LEVEL_TRACE: u8 = 5;

/// Defines the emitting macros, one per level: `ofi_<level>!(prov, subsys, "format",
/// args…)` is the `tracing` macro of that level with the target `ofi` and the fields
/// `prov` and `subsys`. `$d` is a `$` token handed in, so that the macros made here can
/// declare metavariables of their own.
macro_rules! level_macros {
    ($d:tt $($(#[$doc:meta])* $name:ident => $level:ident;)*) => {$(
        $(#[$doc])*
        #[macro_export]
        macro_rules! $name {
            ($d prov:expr, $d subsys:expr, $d($d arg:tt)+) => {
                $crate::log::__tracing::$level!(
                    target: "ofi", prov = %$d prov, subsys = %$d subsys, $d($d arg)+
                )
            };
        }
    )*};
}

level_macros! { $
    /// Emit an error event: `ofi_error!(prov, subsys, "format", args…)`.
    ofi_error => error;
    /// Emit a warning event: `ofi_warn!(prov, subsys, "format", args…)`.
    ofi_warn => warn;
    /// Emit an info event: `ofi_info!(prov, subsys, "format", args…)`.
    ofi_info => info;
    /// Emit a debug event: `ofi_debug!(prov, subsys, "format", args…)`.
    ofi_debug => debug;
    /// Emit a trace event: `ofi_trace!(prov, subsys, "format", args…)`.
    ofi_trace => trace;
}

/// The boundary number of a level (1 = error … 5 = trace).
pub fn level_to_u8(level: Level) -> u8 {
    match level {
        Level::ERROR => LEVEL_ERROR,
        Level::WARN => LEVEL_WARN,
        Level::INFO => LEVEL_INFO,
        Level::DEBUG => LEVEL_DEBUG,
        _ => LEVEL_TRACE,
    }
}

/// The level of a boundary number; out-of-range numbers are clamped (0 → error,
/// above 5 → trace).
pub fn level_from_u8(level: u8) -> Level {
    match level {
        0 | LEVEL_ERROR => Level::ERROR,
        LEVEL_WARN => Level::WARN,
        LEVEL_INFO => Level::INFO,
        LEVEL_DEBUG => Level::DEBUG,
        _ => Level::TRACE,
    }
}

/// The boundary number of a level filter; 0 means off.
pub fn filter_to_u8(filter: LevelFilter) -> u8 {
    filter.into_level().map_or(0, level_to_u8)
}

/// The level filter of a boundary number; 0 is off, above 5 is trace.
pub fn filter_from_u8(level: u8) -> LevelFilter {
    if level == 0 {
        LevelFilter::OFF
    } else {
        LevelFilter::from_level(level_from_u8(level))
    }
}

/// The most detailed level any subscriber of this process currently wants, as a boundary
/// number (0 = nothing). The host can hand this to a plugin for
/// [`install_plugin_forwarder_at`], so the plugin does not format events nobody reads.
pub fn host_max_level() -> u8 {
    filter_to_u8(LevelFilter::current())
}

/// The host's log sink as a plugin sees it in the host table: level (1 = error …
/// 5 = trace), then `prov`, `subsys` and the formatted message as UTF-8 pointer + length
/// (not NUL-terminated; a null pointer with length 0 is an empty string).
pub type LogSinkFn = unsafe extern "C" fn(
    level: u8,
    prov: *const u8,
    prov_len: usize,
    subsys: *const u8,
    subsys_len: usize,
    msg: *const u8,
    msg_len: usize,
);

/// An event flattened for the plugin boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatEvent {
    /// 1 = error … 5 = trace.
    pub level: u8,
    /// The `prov` field; empty when the event has none.
    pub prov: String,
    /// The `subsys` field; empty when the event has none.
    pub subsys: String,
    /// The message followed by every other field as ` name=value`.
    pub message: String,
}

/// Collects an event's fields as text: `prov`, `subsys`, the message, and every other
/// field as ` name=value` (the `log` bridge's `log.*` metadata is left out). The host's
/// output formatter and [`flatten_event`] share it.
#[derive(Debug, Default)]
pub struct FieldText {
    /// The `prov` field; empty when absent.
    pub prov: String,
    /// The `subsys` field; empty when absent.
    pub subsys: String,
    /// The message; empty when absent.
    pub message: String,
    /// Every other field, each as ` name=value`.
    pub extra: String,
}

impl FieldText {
    fn slot(&mut self, field: &Field) -> Option<&mut String> {
        match field.name() {
            "prov" => Some(&mut self.prov),
            "subsys" => Some(&mut self.subsys),
            "message" => Some(&mut self.message),
            // Metadata the `log` bridge attaches; not part of the text.
            n if n.starts_with("log.") => None,
            n => {
                let _ = write!(self.extra, " {n}=");
                Some(&mut self.extra)
            }
        }
    }
}

impl Visit for FieldText {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(s) = self.slot(field) {
            s.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(s) = self.slot(field) {
            let _ = write!(s, "{value:?}");
        }
    }
}

/// Flatten an event for the plugin boundary: its level, `prov`, `subsys`, and the message
/// with the remaining fields appended.
pub fn flatten_event(event: &Event<'_>) -> FlatEvent {
    let mut f = FieldText::default();
    event.record(&mut f);
    let mut message = f.message;
    if message.is_empty() {
        message = f.extra.trim_start().to_owned();
    } else {
        message.push_str(&f.extra);
    }
    FlatEvent {
        level: level_to_u8(*event.metadata().level()),
        prov: f.prov,
        subsys: f.subsys,
        message,
    }
}

/// The plugin-side subscriber: every event up to `max_level` goes to the host's sink.
/// Spans are given ids and otherwise ignored (the host table carries events only).
struct Forwarder {
    sink: LogSinkFn,
    max_level: LevelFilter,
    next_span: AtomicU64,
}

impl Subscriber for Forwarder {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.max_level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max_level)
    }

    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        // Ids must be non-zero; wrapping past u64::MAX is out of reach.
        span::Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        if !self.enabled(event.metadata()) {
            return;
        }
        let e = flatten_event(event);
        // SAFETY: every pointer/length pair describes a live `String` owned by `e`, valid
        // for the whole call; the sink's contract (LogSinkFn) is to only read them during
        // the call. The host supplied `sink` in its table for exactly this use.
        unsafe {
            (self.sink)(
                e.level,
                e.prov.as_ptr(),
                e.prov.len(),
                e.subsys.as_ptr(),
                e.subsys.len(),
                e.message.as_ptr(),
                e.message.len(),
            )
        };
    }

    fn enter(&self, _span: &span::Id) {}

    fn exit(&self, _span: &span::Id) {}
}

/// The plugin's forwarding subscriber, showing levels up to `max_level` (0 = nothing).
fn forwarder(sink: LogSinkFn, max_level: u8) -> impl Subscriber + Send + Sync {
    Forwarder {
        sink,
        max_level: filter_from_u8(max_level),
        next_span: AtomicU64::new(1),
    }
}

/// Inside a plugin: install a global subscriber that sends every event up to
/// `max_level` (given by the host, e.g. its [`host_max_level`]; 0 forwards nothing,
/// 5 everything) to the host's `sink`; the host applies its full filter again.
/// Returns false if a global subscriber was already set (nothing changed).
pub fn install_plugin_forwarder_at(sink: LogSinkFn, max_level: u8) -> bool {
    tracing::subscriber::set_global_default(forwarder(sink, max_level)).is_ok()
}

/// Text of a pointer + length pair from the boundary; null or length 0 → empty.
///
/// # Safety
/// A non-null `ptr` must be valid for reads of `len` bytes for the duration of the call.
unsafe fn boundary_str<'a>(ptr: *const u8, len: usize) -> std::borrow::Cow<'a, str> {
    if ptr.is_null() || len == 0 {
        return std::borrow::Cow::Borrowed("");
    }
    // SAFETY: non-null and, by the caller's contract, valid for `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    String::from_utf8_lossy(bytes)
}

/// Re-emit one flattened event into the host's `tracing`. An empty `prov` or `subsys`
/// becomes `core`.
pub fn emit_flat(level: u8, prov: &str, subsys: &str, msg: &str) {
    let prov = if prov.is_empty() { "core" } else { prov };
    let subsys = if subsys.is_empty() { "core" } else { subsys };
    match level_from_u8(level) {
        Level::ERROR => ofi_error!(prov, subsys, "{msg}"),
        Level::WARN => ofi_warn!(prov, subsys, "{msg}"),
        Level::INFO => ofi_info!(prov, subsys, "{msg}"),
        Level::DEBUG => ofi_debug!(prov, subsys, "{msg}"),
        _ => ofi_trace!(prov, subsys, "{msg}"),
    }
}

/// The host's [`LogSinkFn`]: re-emits a plugin's event into the host's `tracing` with the
/// given level, `prov` and `subsys` (target `ofi`), where the host's filter applies.
/// Invalid UTF-8 is replaced; a panic in a subscriber is caught and dropped.
///
/// # Safety
/// Each non-null pointer must be valid for reads of its length for the duration of the
/// call.
pub unsafe extern "C" fn host_log_sink(
    level: u8,
    prov: *const u8,
    prov_len: usize,
    subsys: *const u8,
    subsys_len: usize,
    msg: *const u8,
    msg_len: usize,
) {
    // SAFETY: forwarded from this function's own contract.
    let (prov, subsys, msg) = unsafe {
        (
            boundary_str(prov, prov_len),
            boundary_str(subsys, subsys_len),
            boundary_str(msg, msg_len),
        )
    };
    let _ = std::panic::catch_unwind(|| emit_flat(level, &prov, &subsys, &msg));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn level_numbers_round_trip() {
        for (n, l) in [
            (1, Level::ERROR),
            (2, Level::WARN),
            (3, Level::INFO),
            (4, Level::DEBUG),
            (5, Level::TRACE),
        ] {
            assert_eq!(level_to_u8(l), n);
            assert_eq!(level_from_u8(n), l);
        }
        assert_eq!(level_from_u8(0), Level::ERROR);
        assert_eq!(level_from_u8(200), Level::TRACE);
        assert_eq!(filter_to_u8(LevelFilter::OFF), 0);
        assert_eq!(filter_from_u8(0), LevelFilter::OFF);
        assert_eq!(filter_from_u8(3), LevelFilter::INFO);
    }

    #[test]
    fn flatten_keeps_prov_subsys_and_extra_fields() {
        let cap = capture();
        let sub = tracing_subscriber::registry().with(cap.clone());
        tracing::subscriber::with_default(sub, || {
            ofi_info!("shm", "av", "inserted {} addresses", 3);
            tracing::warn!(target: "ofi", prov = "efa", subsys = "cq", peer = 7, ok = true, "lost");
            tracing::error!(answer = 42);
        });
        let got = cap.take();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0].0,
            flat(LEVEL_INFO, "shm", "av", "inserted 3 addresses")
        );
        assert_eq!(got[0].1, "ofi");
        assert_eq!(got[1].0.message, "lost peer=7 ok=true");
        assert_eq!(got[1].0.prov, "efa");
        assert_eq!(got[1].0.level, LEVEL_WARN);
        assert_eq!(got[2].0.message, "answer=42");
        assert_eq!(got[2].0.prov, "");
        assert_eq!(got[2].0.level, LEVEL_ERROR);
    }

    /// The flattened event of `level` with these fields.
    fn flat(level: u8, prov: &str, subsys: &str, message: &str) -> FlatEvent {
        FlatEvent {
            level,
            prov: prov.into(),
            subsys: subsys.into(),
            message: message.into(),
        }
    }

    /// [`host_log_sink`] handed live strings, as a plugin's forwarder hands them.
    fn sink_strs(level: u8, prov: &str, subsys: &str, msg: &str) {
        // SAFETY: the pointers come from live string slices of the given lengths.
        unsafe {
            host_log_sink(
                level,
                prov.as_ptr(),
                prov.len(),
                subsys.as_ptr(),
                subsys.len(),
                msg.as_ptr(),
                msg.len(),
            )
        }
    }

    /// A layer recording each event flattened by this build's [`flatten_event`] (the
    /// host's copy of this crate is another instance, with its own `FlatEvent`), with
    /// its target.
    fn capture() -> ofi_host::log::EventCapture<(FlatEvent, String)> {
        ofi_host::log::EventCapture::new(|e| (flatten_event(e), e.metadata().target().to_owned()))
    }

    thread_local! {
        static SUNK: RefCell<Vec<FlatEvent>> = const { RefCell::new(Vec::new()) };
    }

    /// A test sink: records what crossed the "boundary" on this thread.
    ///
    /// # Safety
    /// Each pointer null or valid for reads of its length (a [`LogSinkFn`]'s contract).
    unsafe extern "C" fn test_sink(
        level: u8,
        prov: *const u8,
        prov_len: usize,
        subsys: *const u8,
        subsys_len: usize,
        msg: *const u8,
        msg_len: usize,
    ) {
        // SAFETY: the forwarder passes live strings (see `Forwarder::on_event`).
        let (p, s, m) = unsafe {
            (
                boundary_str(prov, prov_len).into_owned(),
                boundary_str(subsys, subsys_len).into_owned(),
                boundary_str(msg, msg_len).into_owned(),
            )
        };
        SUNK.with(|v| {
            v.borrow_mut().push(FlatEvent {
                level,
                prov: p,
                subsys: s,
                message: m,
            })
        });
    }

    #[test]
    fn forwarder_sends_events_to_the_sink() {
        SUNK.with(|v| v.borrow_mut().clear());
        tracing::subscriber::with_default(forwarder(test_sink, LEVEL_INFO), || {
            ofi_warn!("tcp", "ep_ctrl", "refused by {}", "peer");
            ofi_info!("tcp", "cq", "info");
            ofi_debug!("tcp", "cq", "above the forwarded level");
        });
        let got = SUNK.with(|v| std::mem::take(&mut *v.borrow_mut()));
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            flat(LEVEL_WARN, "tcp", "ep_ctrl", "refused by peer")
        );
        assert_eq!(got[1].level, LEVEL_INFO);

        tracing::subscriber::with_default(forwarder(test_sink, 0), || {
            ofi_error!("tcp", "cq", "nothing is forwarded at 0");
        });
        assert!(SUNK.with(|v| v.borrow().is_empty()));
    }

    #[test]
    fn host_sink_re_emits_with_fields() {
        let cap = capture();
        let sub = tracing_subscriber::registry().with(cap.clone());
        tracing::subscriber::with_default(sub, || {
            sink_strs(LEVEL_DEBUG, "verbs", "domain", "no device");
            // Null pointers and bad UTF-8 are tolerated.
            let bad = [b'x', 0xff];
            // SAFETY: null pointers, and `bad` live for its 2 bytes.
            unsafe { host_log_sink(9, std::ptr::null(), 0, std::ptr::null(), 5, bad.as_ptr(), 2) };
        });
        let got = cap.take();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, flat(LEVEL_DEBUG, "verbs", "domain", "no device"));
        assert_eq!(got[0].1, TARGET);
        assert_eq!(got[1].0, flat(LEVEL_TRACE, "core", "core", "x\u{fffd}"));
    }

    #[test]
    fn forwarder_into_host_sink_round_trip() {
        // Plugin side: the forwarder hands the event to the sink (recorded on this
        // thread). Re-entering another dispatcher from inside a sink is impossible in one
        // copy of `tracing` (a real plugin has its own copy), so the host side replays
        // what crossed, through `host_log_sink`, under the host's subscriber.
        SUNK.with(|v| v.borrow_mut().clear());
        tracing::subscriber::with_default(forwarder(test_sink, LEVEL_TRACE), || {
            ofi_warn!("ofi_rxd", "ep_data", "retransmit seq={}", 9);
        });
        let crossed = SUNK.with(|v| std::mem::take(&mut *v.borrow_mut()));
        let cap = capture();
        let host = tracing_subscriber::registry().with(cap.clone());
        tracing::subscriber::with_default(host, || {
            for e in &crossed {
                sink_strs(e.level, &e.prov, &e.subsys, &e.message);
            }
        });
        let got = cap.take();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, crossed[0]);
        assert_eq!(
            got[0].0,
            flat(LEVEL_WARN, "ofi_rxd", "ep_data", "retransmit seq=9")
        );
    }
}
