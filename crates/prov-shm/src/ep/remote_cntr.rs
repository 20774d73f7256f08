//! Remote-access counters (`FI_RMA_EVENT`): counters bound to an endpoint with
//! `FI_REMOTE_WRITE` count the RMA writes and atomics peers carry out on its
//! registered memory, those bound with `FI_REMOTE_READ` the RMA reads.
//!
//! The kit's bindings know the local events (`FI_SEND`, `FI_RECV`, `FI_WRITE`,
//! `FI_READ`); the remote ones are kept here: taken out of a counter bind before the
//! kit sees the rest, and frozen with the other bindings at `fi_enable` (the target's
//! progress reads them without a lock). An access counts once it has been done
//! successfully (what the initiator's ack reports as success); a refused or failed
//! access counts nothing.
//!
//! Nothing here panics.

use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::cntr::KitCntr;

use super::Shared;
use crate::NAME;

/// The remote-access counters of an endpoint.
#[derive(Clone, Debug, Default)]
pub(crate) struct RemoteCntrs {
    read: Option<KitCntr>,
    write: Option<KitCntr>,
}

impl Shared {
    /// Count one remote access done at this endpoint (see the module docs).
    #[inline]
    pub(super) fn count_remote(&self, read: bool) {
        if let Some(r) = self.remote.get() {
            r.count(read);
        }
    }
}

/// The remote events a counter bind may name.
pub(crate) const REMOTE_EVENTS: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

impl RemoteCntrs {
    /// Bind `cntr` for the remote events of `flags` (`FI_EINVAL` for an event that
    /// has a counter already).
    pub(crate) fn bind(&mut self, cntr: &KitCntr, flags: OpFlags) -> Result<()> {
        let taken = (flags.contains(OpFlags::REMOTE_READ) && self.read.is_some())
            || (flags.contains(OpFlags::REMOTE_WRITE) && self.write.is_some());
        if taken {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: a counter for this remote event is already bound"),
            ));
        }
        if flags.contains(OpFlags::REMOTE_READ) {
            self.read = Some(cntr.clone());
        }
        if flags.contains(OpFlags::REMOTE_WRITE) {
            self.write = Some(cntr.clone());
        }
        Ok(())
    }

    /// Count one remote access done here: a read, or a write or atomic.
    #[inline]
    pub(crate) fn count(&self, read: bool) {
        let c = if read { &self.read } else { &self.write };
        if let Some(c) = c {
            c.inc();
        }
    }
}
