//! Triggered operations from C (fi_trigger(3)): the counter of a `struct
//! fi_triggered_context` is the program's `struct fid_cntr *`, a wrapper of this
//! library; the provider beneath knows its own counter object only. Before a `*msg`
//! call with `FI_TRIGGER` goes down, [`lower_trigger`] puts the provider's counter
//! ([`Counter::trigger_ref`](ofi::cntr::Counter::trigger_ref)) in the context's
//! `cntr` field, in place: the triggered context belongs to the operation until it
//! completes, and the completion still reports it. A pointer that is not one of our
//! counters is left for the provider to judge (`FI_EINVAL`).
//!
//! Nothing here panics.

use ofi::abi::raw::{Msg, MsgAtomic, MsgRma, MsgTagged};
use ofi::cntr::{TriggeredContext, TRIGGER_THRESHOLD};
use ofi::OpFlags;

use crate::fid::Fid;
use crate::queues::cntr_of;

/// The context of a `*msg` call's message.
pub trait MsgContext {
    /// The message's context (0 for a null message).
    ///
    /// # Safety
    /// The pointer is null or points to a readable message.
    unsafe fn msg_context(self) -> usize;
}

macro_rules! msg_context {
    ($($t:ty),*) => {$(
        impl MsgContext for *const $t {
            unsafe fn msg_context(self) -> usize {
                // SAFETY: the caller's contract.
                unsafe { self.as_ref() }.map_or(0, |m| m.context)
            }
        }
    )*};
}
msg_context!(Msg, MsgTagged, MsgRma, MsgAtomic);

/// For a call made with `flags` whose context is `context`: when it is triggered
/// and the context names one of our counters, name the provider's counter instead.
///
/// # Safety
/// With `FI_TRIGGER` in `flags`, `context` is null or points to a `struct
/// fi_triggered_context` valid for reads and writes whose `cntr` is null or a valid
/// `struct fid` (the C API's contract for a triggered call).
pub unsafe fn lower_trigger(flags: u64, context: usize) {
    if flags & OpFlags::TRIGGER.bits() == 0 || context == 0 {
        return;
    }
    let p = context as *mut TriggeredContext;
    // SAFETY: the caller's contract; unaligned, nothing relies on the program's alignment.
    let mut tc = unsafe { p.read_unaligned() };
    if tc.event_type != TRIGGER_THRESHOLD {
        return;
    }
    // SAFETY: the caller's contract: null or a valid `struct fid`.
    if let Some(c) = unsafe { cntr_of(tc.threshold.cntr as *const Fid) } {
        tc.threshold.cntr = c.r.trigger_ref();
        // SAFETY: as above.
        unsafe { p.write_unaligned(tc) };
    }
}
