//! Counters (`fi_cntr`): attributes and the public [`Counter`].
//!
//! A counter counts completed operations (and, separately, failed ones) of the
//! endpoints it is bound to. Every read drives the provider's progress. Reads and
//! updates are one indirect call into the provider: no allocation, no lock. Nothing
//! here panics.

use crate::abi::raw::{Obj, RawCntrAttr};
use crate::abi::tables::CntrTable;
use crate::enums::WaitObj;
use crate::error::{Errno, Error, Result};

/// Counter attributes (`struct fi_cntr_attr`, without the wait set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CntrAttr {
    /// Counted events: only `FI_CNTR_EVENTS_COMP` (0) exists.
    pub events: u32,
    /// Wait object.
    pub wait_obj: WaitObj,
    /// Flags.
    pub flags: u64,
}

impl CntrAttr {
    /// The raw form.
    pub fn to_raw(&self) -> RawCntrAttr {
        RawCntrAttr {
            events: self.events,
            wait_obj: self.wait_obj.to_raw(),
            wait_set: std::ptr::null_mut(),
            flags: self.flags,
        }
    }

    /// From the raw form (unknown values `FI_EINVAL`; a wait set `FI_ENOSYS`).
    pub fn from_raw(r: &RawCntrAttr) -> Result<CntrAttr> {
        let wait_obj = crate::wait::raw_wait_obj(r.wait_obj, r.wait_set, "counter")?;
        if r.events != 0 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("counter events {} unknown", r.events),
            ));
        }
        Ok(CntrAttr {
            events: r.events,
            wait_obj,
            flags: r.flags,
        })
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open counter.
    Counter(CntrTable, "a counter");
}

impl Counter {
    /// What a triggered operation names this counter by
    /// ([`TriggerThreshold::cntr`]): the provider's object pointer, the value the
    /// provider recorded in [`CntrOps::published`](crate::provider::CntrOps::published).
    pub fn trigger_ref(&self) -> *mut std::ffi::c_void {
        self.obj
    }
}

/// `FI_TRIGGER_THRESHOLD` (`enum fi_trigger_event`): the operation starts when a
/// counter reaches a threshold.
pub const TRIGGER_THRESHOLD: u32 = 0;

/// `struct fi_trigger_threshold`: the counter and the value it must reach.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TriggerThreshold {
    /// The counter: in Rust, [`Counter::trigger_ref`]; the C API's `struct fid_cntr *`.
    pub cntr: *mut std::ffi::c_void,
    /// The value the counter's success count must reach (at least 1).
    pub threshold: usize,
}

/// `struct fi_triggered_context` (fi_trigger(3)), `FI_TRIGGER_THRESHOLD` form: what
/// the context of a data call made with `FI_TRIGGER` points to. It stays valid, and
/// is the context the operation's completion reports, until the operation completes.
/// Layout: the C structure's (an `enum` then a 24-byte union).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TriggeredContext {
    /// [`TRIGGER_THRESHOLD`]; any other event is `FI_EINVAL`/`FI_ENOSYS`.
    pub event_type: u32,
    /// The union's threshold member.
    pub threshold: TriggerThreshold,
    /// The rest of the union (unused by the threshold form).
    pub reserved: usize,
}

impl TriggeredContext {
    /// A threshold trigger on `cntr` at `threshold`.
    pub fn threshold(cntr: &Counter, threshold: usize) -> TriggeredContext {
        TriggeredContext {
            event_type: TRIGGER_THRESHOLD,
            threshold: TriggerThreshold {
                cntr: cntr.trigger_ref(),
                threshold,
            },
            reserved: 0,
        }
    }
}

impl Counter {
    /// The provider object and table (for the host's poll sets).
    pub(crate) fn raw_parts(&self) -> (Obj, *const CntrTable) {
        (self.obj, self.ops)
    }

    // ---- one method per operation of the list (`for_each_cntr_op!`) ----

    crate::for_each_cntr_op!(crate::abi::ctl_ops::ctl_wrappers);
}

#[cfg(test)]
mod trigger_layout {
    #[test]
    fn triggered_context_has_the_c_layout() {
        assert_eq!(std::mem::size_of::<super::TriggeredContext>(), 32);
        assert_eq!(std::mem::offset_of!(super::TriggeredContext, threshold), 8);
    }
}
