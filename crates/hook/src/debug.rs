//! The debug hook (`ofi_hook_debug`): usage checks, reported as warnings that name the
//! object.
//!
//! - Operations still outstanding when their endpoint closes (posted with a context,
//!   expecting a completion, whose completion was never read).
//! - A context reused while an operation posted with it is in flight (same CQ).
//! - CQ overruns: more operations in flight towards a CQ than its size, and reads that
//!   report `FI_EOVERRUN`.
//! - Data calls on an endpoint that is not enabled (once per endpoint).
//!
//! Tracking: an operation counts as in flight from a successful post (with a non-zero
//! context, not an inject, not suppressed by `FI_SELECTIVE_COMPLETION`) until a
//! completion or error entry with its context is read from its CQ. Multi-receive
//! buffers are retired at their first completion. [`warnings`] counts the warnings
//! of this process.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use ofi_core::cq::{CqBuf, CqError};
use ofi_core::fabric::Fabric;
use ofi_core::provider::Host;
use ofi_core::{Errno, Info, Result};

use crate::cq::CqCore;
use crate::ep::EpCore;
use crate::{CallKind, Hook, HookedCall, ObjName, Op, OpCall};

static WARNINGS: AtomicU64 = AtomicU64::new(0);

/// Warnings the debug hooks of this process gave so far.
pub fn warnings() -> u64 {
    WARNINGS.load(Ordering::Relaxed)
}

macro_rules! warn {
    ($($arg:tt)+) => {{
        WARNINGS.fetch_add(1, Ordering::Relaxed);
        ofi_core::ofi_warn!(Debug::NAME, "ep_data", $($arg)+);
    }};
}

/// The debug hook's data of one endpoint.
#[derive(Default)]
pub struct DebugEp {
    warned_disabled: AtomicBool,
}

/// The debug hook's data of one CQ: operations in flight towards it.
#[derive(Default)]
pub struct DebugCq {
    in_flight: Mutex<HashMap<usize, (ObjName, Op)>>,
    warned_overrun: AtomicBool,
}

/// The debug hook of one fabric.
pub struct Debug {
    prov: String,
}

fn contexts(buf: &CqBuf<'_>, n: usize) -> Vec<usize> {
    match buf {
        CqBuf::Context(b) => b.iter().take(n).map(|e| e.op_context).collect(),
        CqBuf::Msg(b) => b.iter().take(n).map(|e| e.op_context).collect(),
        CqBuf::Data(b) => b.iter().take(n).map(|e| e.op_context).collect(),
        CqBuf::Tagged(b) => b.iter().take(n).map(|e| e.op_context).collect(),
    }
}

impl Debug {
    /// Warns (once per endpoint) of a data call `call` on `ep` before it is enabled.
    fn check_enabled(&self, ep: &EpCore<Self>, call: OpCall) {
        if !ep.enabled.load(Ordering::Acquire)
            && !ep.data.warned_disabled.swap(true, Ordering::Relaxed)
        {
            warn!(
                "{} ({}): {} on an endpoint that is not enabled",
                ep.name, self.prov, call.op
            );
        }
    }

    /// After data call `call` on `ep` succeeded: it is in flight towards its CQ (if it
    /// completes to one with a context); warns of a context in flight twice and of more
    /// in flight than the CQ holds.
    fn track(&self, ep: &EpCore<Self>, call: OpCall) {
        if call.context == 0 {
            return;
        }
        let Some(b) = ep.completion_cq(&call) else {
            return;
        };
        let d = &b.cq.data;
        let mut m = d.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((other_ep, other_op)) = m.insert(call.context, (ep.name, call.op)) {
            warn!(
                "{} ({}): context {:#x} of {} reused while {} on {} is still in flight",
                ep.name, self.prov, call.context, call.op, other_op, other_ep
            );
        }
        let n = m.len();
        if b.cq.size > 0 && n > b.cq.size && !d.warned_overrun.swap(true, Ordering::Relaxed) {
            warn!(
                "{} ({}): {n} operations in flight, more than its size {}: its completions may overrun",
                b.cq.name, self.prov, b.cq.size
            );
        }
    }
}

impl Hook for Debug {
    const NAME: &'static str = "ofi_hook_debug";
    const CQ_EVENTS: bool = true;
    type EpData = DebugEp;
    type CqData = DebugCq;

    fn open(_host: &Host, info: &Info, _inner: &Fabric) -> Result<Debug> {
        Ok(Debug {
            prov: info.prov_name().to_string(),
        })
    }

    /// Checks data calls (on an endpoint not enabled; contexts reused; more in flight
    /// than the CQ holds) and reads (overruns).
    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        let kind = call.kind;
        if let CallKind::Data(ep, op) = kind {
            self.check_enabled(ep, op);
        }
        let r = call.forward();
        match (kind, &r) {
            (CallKind::Data(ep, op), Ok(_)) => self.track(ep, op),
            (CallKind::Read(obj, op), Err(e)) if e.code() == Errno::EOVERRUN => warn!(
                "{obj} ({}): {op} reports an overrun (FI_EOVERRUN): completions were lost",
                self.prov
            ),
            _ => {}
        }
        r
    }

    fn cq_read(&self, cq: &CqCore<Self>, buf: &CqBuf<'_>, n: usize) {
        if n == 0 {
            return;
        }
        let mut m = cq.data.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if m.is_empty() {
            return;
        }
        for c in contexts(buf, n) {
            m.remove(&c);
        }
        if m.len() <= cq.size {
            cq.data.warned_overrun.store(false, Ordering::Relaxed);
        }
    }

    fn cq_readerr(&self, cq: &CqCore<Self>, err: &CqError) {
        cq.data
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&err.op_context);
    }

    fn ep_close(&self, ep: &EpCore<Self>) {
        let mut left: Vec<(usize, Op)> = Vec::new();
        for b in [ep.tx_cq.get(), ep.rx_cq.get()].into_iter().flatten() {
            let mut m =
                b.cq.data
                    .in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
            m.retain(|ctx, (e, op)| {
                if *e == ep.name {
                    left.push((*ctx, *op));
                    false
                } else {
                    true
                }
            });
        }
        if !left.is_empty() {
            left.sort_unstable_by_key(|(c, _)| *c);
            let shown: Vec<String> = left
                .iter()
                .take(8)
                .map(|(c, op)| format!("{op} context {c:#x}"))
                .collect();
            warn!(
                "{} ({}) closed with {} operation(s) outstanding: {}{}",
                ep.name,
                self.prov,
                left.len(),
                shown.join(", "),
                if left.len() > 8 { ", ..." } else { "" }
            );
        }
    }
}
