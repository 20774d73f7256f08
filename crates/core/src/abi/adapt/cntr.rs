//! Counter slots of the adapters (see [`super`] for the object pointers and panics):
//! generated from the list of counter operations
//! ([`for_each_cntr_op!`](crate::for_each_cntr_op)), but for `close`.

use super::*;

/// The slots of the list's `fn` entries, written by hand.
pub(super) mod hand {
    use super::*;
    close_slot!(close, CntrOf<F>, |o| CntrOps::close(o));
}

/// The provider's object behind a slot's object pointer.
///
/// # Safety
/// `obj` must be an object this adapter handed out for family `F`, still open (host
/// contract, see [`crate::abi::object`]).
unsafe fn this<'a, F: FabricOps>(obj: Obj) -> &'a CntrOf<F> {
    // SAFETY: by this function's contract.
    unsafe { ob::<CntrOf<F>>(obj) }
}

crate::for_each_cntr_op!(ctl_trampolines);
