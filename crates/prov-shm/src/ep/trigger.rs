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

use ofi_core::abi::ops::{OpFamily, OpKind};
use ofi_core::{Errno, OpFlags};
use ofi_kit::opflags::DefaultOpFlags;

use super::{scalable, Active, Endpoint, Shared};

/// The flags of a triggered call's completion.
fn completion_flags(kind: OpKind) -> u64 {
    let f = match kind.family {
        OpFamily::Send | OpFamily::Recv => {
            OpFlags::SEND
                | if kind.tagged {
                    OpFlags::TAGGED
                } else {
                    OpFlags::MSG
                }
        }
        OpFamily::Read => OpFlags::RMA | OpFlags::READ,
        OpFamily::Write => OpFlags::RMA | OpFlags::WRITE,
        OpFamily::Atomic => OpFlags::ATOMIC | OpFlags::WRITE,
        OpFamily::Fetch | OpFamily::Compare => OpFlags::ATOMIC | OpFlags::READ,
    };
    f.bits()
}

impl Shared {
    /// Issue the waiting calls whose counters reached their thresholds; complete
    /// the ones that fail as errors. The number of calls handled.
    pub(super) fn fire_triggers(&self, act: &Active) -> usize {
        let Some(sh) = self.me.upgrade() else {
            return 0;
        };
        let ep = Endpoint {
            sh,
            role: scalable::Role::Plain,
            shared_ctx: Arc::default(),
            flags: DefaultOpFlags::default(),
        };
        // SAFETY: every queued call was made on this endpoint (kit's data path of a
        // handle of `self`); its buffers are the application's, valid until it
        // completes (the C API's contract).
        let (issued, failed) = unsafe { self.triggers.fire_ready(&ep) };
        let n = issued + failed.len();
        for f in failed {
            ofi_core::ofi_info!(
                crate::NAME,
                "ep_data",
                "triggered operation failed when issued: {}",
                f.error
            );
            act.complete_tx(
                f.context,
                completion_flags(f.kind),
                true,
                Some(f.error.code()),
            );
        }
        n
    }
}

impl Endpoint {
    /// Complete every waiting triggered call with `FI_ECANCELED` (at close).
    pub(super) fn cancel_triggers(&self) {
        let waiting = self.sh.triggers.cancel_all();
        if waiting.is_empty() {
            return;
        }
        if let Some(act) = self.sh.active.get() {
            for (context, kind) in waiting {
                act.complete_tx(
                    context,
                    completion_flags(kind),
                    true,
                    Some(Errno::ECANCELED),
                );
            }
        }
    }
}
