//! Remote-access counters (`FI_RMA_EVENT`): counters bound to an endpoint with
//! `FI_REMOTE_WRITE` count the RMA writes and atomics peers carry out on its
//! registered memory, those bound with `FI_REMOTE_READ` the RMA reads.
//!
//! The kit's bindings know the local events (`FI_SEND`, `FI_RECV`, `FI_WRITE`,
//! `FI_READ`); the remote ones are kept in kit's [`RemoteCntrs`]: taken out of a
//! counter bind before the kit sees the rest, and frozen with the other bindings at
//! `fi_enable` (the target's progress reads them without a lock). An access counts once it has been done
//! successfully (what the initiator's ack reports as success); a refused or failed
//! access counts nothing.
//!
//! Nothing here panics.

pub(crate) use ofi_kit::remote_cntr::{RemoteCntrs, REMOTE_EVENTS};

use super::Shared;

impl Shared {
    /// Count one remote access done at this endpoint (see the module docs).
    #[inline]
    pub(super) fn count_remote(&self, read: bool) {
        if let Some(r) = self.remote.get() {
            r.count(read);
        }
    }
}
