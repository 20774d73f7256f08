//! Connection management slots of the adapters (see [`super`] for the object pointers
//! and panics): generated from the list of CM operations
//! ([`for_each_cm_op!`](crate::for_each_cm_op)); the hand-written `fn` entries' adapters
//! are in `ep.rs`.

use super::*;

/// The provider's object behind a slot's object pointer.
///
/// # Safety
/// `obj` must be an object this adapter handed out for family `F`, still open (host
/// contract, see [`crate::abi::object`]).
unsafe fn this<'a, F: FabricOps>(obj: Obj) -> &'a EpOf<F> {
    // SAFETY: by this function's contract.
    unsafe { ob::<EpOf<F>>(obj) }
}

crate::for_each_cm_op!(ctl_trampolines);
