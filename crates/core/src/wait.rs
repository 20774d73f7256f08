//! Wait sets (`fi_wait`): attributes and the public [`WaitSet`]. Nothing here panics.

use std::sync::Arc;

use crate::abi::object::{AsFid, FidRef, Node};
use crate::abi::raw::{Obj, RawWaitAttr};
use crate::abi::tables::WaitTable;
use crate::enums::WaitObj;
use crate::error::Result;

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

/// An open wait set.
pub struct WaitSet {
    obj: Obj,
    ops: *const WaitTable,
    node: Arc<Node>,
}

// SAFETY: the object and table are required by the interface to be usable from any
// thread; the node is thread-safe.
unsafe impl Send for WaitSet {}
// SAFETY: see `Send`.
unsafe impl Sync for WaitSet {}

impl std::fmt::Debug for WaitSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitSet")
            .field("provider", &self.node.prov())
            .finish_non_exhaustive()
    }
}

impl AsFid for WaitSet {
    fn as_fid(&self) -> FidRef<'_> {
        FidRef::new(&self.node, self.obj)
    }
}

crate::abi::ctl_ops::detach_one_table!(WaitSet: WaitTable);

impl WaitSet {
    /// Wrap a provider's wait set.
    ///
    /// # Safety
    /// `obj`/`ops` must be a wait set and its table from the provider of `node`'s
    /// family, owned from now on by `node`.
    pub(crate) unsafe fn from_raw(obj: Obj, ops: *const WaitTable, node: Arc<Node>) -> WaitSet {
        WaitSet { obj, ops, node }
    }

    #[inline(always)]
    pub(crate) fn t(&self) -> &WaitTable {
        // SAFETY: the provider's table or the static CLOSED table.
        unsafe { &*self.ops }
    }

    // ---- one method per operation of the list (`for_each_wait_op!`) ----

    crate::for_each_wait_op!(crate::abi::ctl_ops::ctl_wrappers);
}
