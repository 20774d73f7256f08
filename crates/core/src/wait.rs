//! Wait sets (`fi_wait`): attributes and the public [`WaitSet`]. Nothing here panics.

use crate::abi::raw::{Obj, RawWaitAttr};
use crate::abi::tables::WaitTable;
use crate::enums::WaitObj;
use crate::error::{Errno, Error, Result};

/// The wait object of the raw attributes of an object that can signal a wait set (CQ,
/// EQ, counter), checked as they all check it: a `wait_set` in them is `FI_ENOSYS`
/// (`object`'s attribute is not supported through this interface yet; the `*_open_in`
/// calls take the set), an unknown `wait_obj` is `FI_EINVAL`.
pub(crate) fn raw_wait_obj(wait_obj: u32, wait_set: Obj, object: &str) -> Result<WaitObj> {
    if !wait_set.is_null() {
        return Err(Error::new(
            Errno::ENOSYS,
            format!("{object} attribute wait_set is not supported"),
        ));
    }
    WaitObj::try_from(wait_obj)
}

/// Wait set attributes (`struct fi_wait_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitAttr {
    /// Wait object.
    pub wait_obj: WaitObj,
    /// Flags.
    pub flags: u64,
}

impl WaitAttr {
    /// The raw form.
    pub fn to_raw(&self) -> RawWaitAttr {
        RawWaitAttr {
            wait_obj: self.wait_obj.to_raw(),
            flags: self.flags,
        }
    }

    /// From the raw form (unknown values `FI_EINVAL`).
    pub fn from_raw(r: &RawWaitAttr) -> Result<WaitAttr> {
        Ok(WaitAttr {
            wait_obj: WaitObj::try_from(r.wait_obj)?,
            flags: r.flags,
        })
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open wait set.
    WaitSet(WaitTable, "a wait set");
}

impl WaitSet {
    // ---- one method per operation of the list (`for_each_wait_op!`) ----

    crate::for_each_wait_op!(crate::abi::ctl_ops::ctl_wrappers);
}
