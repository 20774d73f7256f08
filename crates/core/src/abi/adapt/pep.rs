//! Passive endpoint slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

/// Slot `bind` of the `pep` table.
/// # Safety
/// `pep` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
pub(super) unsafe extern "C" fn pep_bind<F: FabricOps>(
    pep: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "pep.bind", || {
        if target.obj.is_null() || FidClass::from_raw(target.class) != Some(FidClass::Eq) {
            return einval("passive endpoint bind: only an event queue can be bound");
        }
        // SAFETY: our boxed passive endpoint and an EQ of this family (host contract).
        unsafe { ob::<F::PassiveEp>(pep).bind_eq(&ob::<EqBox<EqOf<F>>>(target.obj).inner, flags) }
    })
}

boxed_objects!(PepOf<F>);

// The table: the trampolines of the `op` entries, the adapters of the `fn` entries.
crate::for_each_pep_op!(ctl_trampolines);
