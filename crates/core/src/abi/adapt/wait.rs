//! Wait set slots of the adapters (see [`super`] for the object pointers and panics):
//! generated from the list of wait set operations
//! ([`for_each_wait_op!`](crate::for_each_wait_op)).

use super::*;

boxed_objects!(WaitOf<F>);

crate::for_each_wait_op!(ctl_trampolines);
