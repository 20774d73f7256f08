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
        if !r.wait_set.is_null() {
            return Err(Error::new(
                Errno::ENOSYS,
                "counter attribute wait_set is not supported",
            ));
        }
        if r.events != 0 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("counter events {} unknown", r.events),
            ));
        }
        Ok(CntrAttr {
            events: r.events,
            wait_obj: WaitObj::try_from(r.wait_obj)?,
            flags: r.flags,
        })
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open counter.
    Counter(CntrTable, "a counter");
}

impl Counter {
    /// The provider object and table (for the host's poll sets).
    pub(crate) fn raw_parts(&self) -> (Obj, *const CntrTable) {
        (self.obj, self.ops)
    }

    // ---- one method per operation of the list (`for_each_cntr_op!`) ----

    crate::for_each_cntr_op!(crate::abi::ctl_ops::ctl_wrappers);
}
