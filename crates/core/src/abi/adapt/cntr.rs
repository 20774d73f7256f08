//! Counter slots of the adapters (see [`super`] for the object pointers and panics):
//! generated from the list of counter operations
//! ([`for_each_cntr_op!`](crate::for_each_cntr_op)), but for `close`.

use super::*;

/// The slots of the list's `fn` entries, written by hand.
pub(super) mod hand {
    use super::*;
    close_slot!(close, CntrOf<F>, |o| CntrOps::close(o));
}

crate::for_each_cntr_op!(ctl_trampolines);
