//! Triggered operations through hooks (fi_trigger(3)).
//!
//! The counter a triggered call names ([`TriggeredContext`]) is the one the
//! application holds: under a hook, the hook's counter. The provider beneath only
//! knows its own counters, so before a `*msg` call with `FI_TRIGGER` goes down, the
//! hook puts the counter beneath in the context's `cntr` field (in place: the
//! triggered context belongs to the operation until it completes, and the
//! completion still reports the same context). A stack of hooks does this once per
//! layer. Hook counters are found in a registry of the live ones by the address
//! they were published at (`CntrOps::published`); the pointer is never dereferenced,
//! and one that names no hook counter is left for the provider to judge.
//!
//! Nothing here panics.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use ofi_core::cntr::{TriggeredContext, TRIGGER_THRESHOLD};
use ofi_core::OpFlags;

use crate::objects::CntrCore;

/// The live hook counters: published address and core.
static PUBLISHED: Mutex<Vec<(usize, Weak<CntrCore>)>> = Mutex::new(Vec::new());

/// Record hook counter `core` published at `addr` (entries of counters gone since
/// are dropped).
pub(crate) fn publish(addr: usize, core: &Arc<CntrCore>) {
    let mut list = PUBLISHED.lock().unwrap_or_else(PoisonError::into_inner);
    list.retain(|(a, w)| *a != addr && w.strong_count() > 0);
    list.push((addr, Arc::downgrade(core)));
}

/// For a call made with `flags` and `context`: when it is triggered and its context
/// names a hook counter, name the counter beneath instead.
///
/// # Safety
/// With `FI_TRIGGER` in `flags`, `context` is null or points to a
/// [`TriggeredContext`] valid for reads and writes (the C API's contract for a
/// triggered call).
pub(crate) unsafe fn lower_trigger(flags: Option<OpFlags>, context: usize) {
    if !flags.is_some_and(|f| f.contains(OpFlags::TRIGGER)) || context == 0 {
        return;
    }
    let p = context as *mut TriggeredContext;
    // SAFETY: the caller's contract; unaligned, nothing relies on the caller's alignment.
    let mut tc = unsafe { p.read_unaligned() };
    if tc.event_type != TRIGGER_THRESHOLD {
        return;
    }
    let found = {
        let list = PUBLISHED.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter()
            .rev()
            .find(|(a, _)| *a == tc.threshold.cntr as usize)
            .and_then(|(_, w)| w.upgrade())
    };
    if let Some(core) = found {
        tc.threshold.cntr = core.inner.trigger_ref();
        // SAFETY: as above.
        unsafe { p.write_unaligned(tc) };
    }
}
