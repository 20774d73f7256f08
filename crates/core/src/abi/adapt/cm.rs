//! Connection management slots of the adapters (see [`super`] for the object pointers
//! and panics): generated from the list of CM operations
//! ([`for_each_cm_op!`](crate::for_each_cm_op)); the hand-written `fn` entries' adapters
//! are in `ep.rs`.

use super::*;

boxed_objects!(EpOf<F>);

crate::for_each_cm_op!(ctl_trampolines);
