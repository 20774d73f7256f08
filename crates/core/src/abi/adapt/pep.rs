//! Passive endpoint slots of the adapters (see [`super`] for the object pointers and panics).

use super::*;

eq_bind_slot!(
    /// Slot `bind` of the `pep` table.
    pep_bind,
    F::PassiveEp,
    "pep.bind",
    "passive endpoint bind: only an event queue can be bound"
);

control_slot!(
    /// Slot `control` of the `pep` table (minor 3).
    pep_control,
    PepOf<F>,
    "pep.control"
);

boxed_objects!(PepOf<F>);

// The table: the trampolines of the `op` entries, the adapters of the `fn` entries.
crate::for_each_pep_op!(ctl_trampolines);

// ---- host methods of the `fn` entries above ----

use crate::abi::object::ctl;
use crate::abi::tables::call_slot;
use crate::ep::PassiveEndpoint;

impl PassiveEndpoint {
    /// `fi_control` with a provider-specific command. `FI_ENOSYS` from a provider built
    /// before interface minor 3 (its table has no such slot).
    ///
    /// # Safety
    /// `arg` must be what the provider documents for `command`.
    pub unsafe fn control(&self, command: i32, arg: *mut c_void) -> Result<()> {
        // SAFETY: our own object; `arg` per the caller's contract.
        ctl(|eb| unsafe { call_slot!(self.t(), PepTable.control(self.obj, command, arg, eb)) })
    }

    /// `fi_control(FI_BACKLOG)`: how many connection requests the listener queues
    /// (before or after `fi_listen`). `FI_EINVAL` for a negative value.
    pub fn set_backlog(&self, backlog: i32) -> Result<()> {
        let mut value = backlog;
        // SAFETY: FI_BACKLOG takes an `int *`; `value` lives across the call.
        unsafe { self.control(crate::control::BACKLOG, (&mut value as *mut i32).cast()) }
    }
}
