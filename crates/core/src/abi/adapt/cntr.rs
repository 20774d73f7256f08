//! Counter slots of the adapters (see [`super`] for the object pointers and panics):
//! generated from the list of counter operations
//! ([`for_each_cntr_op!`](crate::for_each_cntr_op)).

use super::*;

boxed_objects!(CntrOf<F>);

crate::for_each_cntr_op!(ctl_trampolines);
