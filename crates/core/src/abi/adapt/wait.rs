//! Wait set slots of the adapters (see [`super`] for the object pointers and panics):
//! generated from the list of wait set operations
//! ([`for_each_wait_op!`](crate::for_each_wait_op)), but for `close`.

use super::*;

/// The slots of the list's `fn` entries, written by hand.
pub(super) mod hand {
    use super::*;
    close_slot!(close, WaitOf<F>, |o| WaitOps::close(o));
}

crate::for_each_wait_op!(ctl_trampolines);
