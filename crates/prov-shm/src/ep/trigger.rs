//! Triggered operations (fi_trigger(3)) on shm: kit's queue ([`ofi_kit::trigger`])
//! per endpoint, fired from the endpoint's progress.
//!
//! A `*msg` transmit call made with `FI_TRIGGER` is kept by kit's data path in
//! `Shared::triggers` (at most `tx_size`). Each progress round that finds calls
//! waiting issues those whose counters reached their thresholds through a handle
//! of the endpoint made for the purpose (the calls carry their own flags, so the
//! handle's default flags do not matter); a call that fails then completes as an
//! error (CQ error entry, error counter). Closing the endpoint completes every
//! waiting call with `FI_ECANCELED`.
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_kit::opflags::DefaultOpFlags;

use super::{scalable, Active, Endpoint, Shared};

impl Shared {
    /// Issue the waiting calls whose counters reached their thresholds; complete
    /// the ones that fail as errors. The number of calls handled.
    pub(super) fn fire_triggers(&self, active: &Active) -> usize {
        // SAFETY: every queued call was made on this endpoint (kit's data path of a
        // handle of `self`); its buffers are the application's, valid until it
        // completes (the C API's contract).
        unsafe { active.fire_triggers(&self.triggers, || self.trigger_handle()) }
    }

    /// A plain handle of this endpoint, with default flags and no shared context, to
    /// issue triggered calls through; `None` once the endpoint is going.
    fn trigger_handle(&self) -> Option<Endpoint> {
        let sh = self.this.upgrade()?;
        Some(Endpoint {
            sh,
            role: scalable::Role::Plain,
            shared_ctx: Arc::default(),
            flags: DefaultOpFlags::default(),
        })
    }
}

impl Endpoint {
    /// Complete every waiting triggered call with `FI_ECANCELED` (at close).
    pub(super) fn cancel_triggers(&self) {
        if let Some(active) = self.sh.active.get() {
            active.cancel_triggers(&self.sh.triggers);
        }
    }
}
