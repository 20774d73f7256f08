//! MR slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// Slot `bind` of the `mr` table.
/// # Safety
/// `mr` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn mr_bind<F: FabricOps>(
    mr: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "mr.bind", || {
        if target.obj.is_null() {
            return einval("MR bind: null object");
        }
        // SAFETY: our boxed MR and an object of this family of the announced class.
        unsafe {
            let t = match FidClass::from_raw(target.class) {
                Some(FidClass::Ep) => MrBindTarget::Ep(ob::<EpOf<F>>(target.obj)),
                Some(FidClass::Cntr) => MrBindTarget::Cntr(ob::<CntrOf<F>>(target.obj)),
                _ => return einval("MR bind: only an endpoint or a counter can be bound"),
            };
            ob::<MrOf<F>>(mr).bind(t, flags)
        }
    })
}

boxed_objects!(MrOf<F>);

// The table: the trampolines of the `op` entries, the adapters of the `fn` entries.
crate::for_each_mr_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::AsFid;
use crate::abi::tables::call_slot;
use crate::cntr::Counter;
use crate::ep::Endpoint;

impl crate::mr::MemoryRegion {
    /// `fi_mr_bind` to an endpoint or a counter of the same provider (objects of
    /// another provider are `FI_EINVAL`).
    pub fn bind<B: AsFid + ?Sized>(&self, obj: &B, flags: u64) -> Result<()> {
        // SAFETY: our own object; `raw` names an open object of our family.
        self.node.bind(obj.as_fid(), "MR bind", |raw, e| unsafe {
            call_slot!(self.t(), MrTable.bind(self.obj, raw, flags, e))
        })
    }

    /// `fi_mr_bind` to an endpoint (`FI_MR_ENDPOINT`).
    pub fn bind_ep(&self, ep: &Endpoint, flags: u64) -> Result<()> {
        self.bind(ep, flags)
    }

    /// `fi_mr_bind` to a counter (remote access counting).
    pub fn bind_cntr(&self, cntr: &Counter, flags: u64) -> Result<()> {
        self.bind(cntr, flags)
    }
}
