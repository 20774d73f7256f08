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
