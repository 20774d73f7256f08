//! The trace hook (`ofi_hook_trace`): every call on a hooked object, with its arguments
//! and result, at trace level (`FI_LOG_LEVEL=trace`), rate-limited.
//!
//! # Parameters
//!
//! | variable | default | meaning |
//! | --- | --- | --- |
//! | `FI_OFI_HOOK_TRACE_RATE` | 1000 | most lines per second (0: no limit); the next line after a suppressed stretch says how many were left out |
//!
//! Subsystems: `ep_data` for data calls, `cq` for CQ / counter reads, `ep_ctrl` for
//! the other calls. When trace level is off for the hook, a call costs one level check.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ofi_core::fabric::Fabric;
use ofi_core::param::ParamType;
use ofi_core::provider::Host;
use ofi_core::{Info, Result};
use tracing::Level;

use crate::{CallKind, Hook, HookParam, HookedCall};

/// The trace hook of one fabric.
pub struct Trace {
    limit: u64,
    window: Mutex<(Instant, u64)>,
    suppressed: AtomicU64,
    lines: AtomicU64,
}

fn result<R: fmt::Debug>(r: &Result<R>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("{:?}", e.code()),
    }
}

impl Trace {
    fn on() -> bool {
        tracing::enabled!(target: "ofi", Level::TRACE)
    }

    /// May a line go out now? `Some(n)`: yes, `n` lines were suppressed before it.
    fn allow(&self) -> Option<u64> {
        if self.limit > 0 {
            let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if now.duration_since(w.0) >= Duration::from_secs(1) {
                *w = (now, 0);
            }
            if w.1 >= self.limit {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            w.1 += 1;
        }
        self.lines.fetch_add(1, Ordering::Relaxed);
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }

    fn line(&self, subsys: &str, text: impl FnOnce() -> String) {
        if let Some(sup) = self.allow() {
            let t = text();
            if sup > 0 {
                ofi_core::ofi_trace!(
                    Self::NAME,
                    subsys,
                    "{t} ({sup} line(s) suppressed before this)"
                );
            } else {
                ofi_core::ofi_trace!(Self::NAME, subsys, "{t}");
            }
        }
    }

    /// Lines written so far (for tests and diagnostics).
    pub fn lines(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }
}

impl Hook for Trace {
    const NAME: &'static str = "ofi_hook_trace";
    type EpData = ();
    type CqData = ();

    const PARAMS: &'static [HookParam] = &[HookParam::new(
        "rate",
        ParamType::Int,
        "Most trace lines per second (0: no limit)",
        Some("1000"),
    )];

    fn open(host: &Host, _info: &Info, _inner: &Fabric) -> Result<Trace> {
        let limit = host.param_int("rate")?.unwrap_or(1000).max(0) as u64;
        Ok(Trace {
            limit,
            window: Mutex::new((Instant::now(), 0)),
            suppressed: AtomicU64::new(0),
            lines: AtomicU64::new(0),
        })
    }

    /// Forwards the call and, when tracing is on, writes the line `call = result`
    /// (the call with its arguments, formatted only then) under the call's subsystem.
    #[inline]
    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        let subsys = match call.kind {
            CallKind::Data(..) => "ep_data",
            CallKind::Ctl(..) => "ep_ctrl",
            CallKind::Read(..) => "cq",
        };
        let (r, text) = call.forward_described();
        if Self::on() {
            self.line(subsys, || format!("{text} = {}", result(&r)));
        }
        r
    }
}
