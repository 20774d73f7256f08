//! Remote-access counters (`FI_RMA_EVENT`) of an endpoint: a counter bound with
//! `FI_REMOTE_WRITE` counts the RMA writes and atomics peers carry out on the endpoint's
//! registered memory, one bound with `FI_REMOTE_READ` the RMA reads. Kit's bindings
//! ([`crate::ep::Bindings`]) keep the local events; a provider that counts remote ones
//! keeps a [`RemoteCntrs`] beside them and says when an access was done.
//!
//! # Invariants
//!
//! - At most one counter per remote event; a second bind naming an event that has one
//!   is `FI_EINVAL` and changes nothing.
//! - [`RemoteCntrs::count`] adds one to the counter of the access's kind, or nothing
//!   when none is bound.
//!
//! Nothing here panics.

use ofi_core::{Errno, Error, OpFlags, Result};

use crate::cntr::KitCntr;

/// The remote events a counter bind may name.
pub const REMOTE_EVENTS: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

/// The remote-access counters of an endpoint (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct RemoteCntrs {
    read: Option<KitCntr>,
    write: Option<KitCntr>,
}

impl RemoteCntrs {
    /// Binds `cntr` for the remote events in `flags` (the other bits are ignored).
    ///
    /// # Errors
    /// `FI_EINVAL`, naming provider `prov`, when an event of `flags` has a counter
    /// already (nothing is bound then).
    pub fn bind(&mut self, prov: &str, cntr: &KitCntr, flags: OpFlags) -> Result<()> {
        let taken = (flags.contains(OpFlags::REMOTE_READ) && self.read.is_some())
            || (flags.contains(OpFlags::REMOTE_WRITE) && self.write.is_some());
        if taken {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: a counter for this remote event is already bound"),
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

    /// Whether any remote event has a counter (peers must then report their accesses).
    pub fn any(&self) -> bool {
        self.read.is_some() || self.write.is_some()
    }

    /// Counts one remote access done here: a read, or a write or atomic.
    #[inline]
    pub fn count(&self, read: bool) {
        let c = if read { &self.read } else { &self.write };
        if let Some(c) = c {
            c.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use ofi_core::cntr::CntrAttr;

    use super::*;

    fn cntr() -> KitCntr {
        KitCntr::new(&CntrAttr::default()).unwrap()
    }

    #[test]
    fn each_event_counts_on_its_own_counter() {
        let (r, w) = (cntr(), cntr());
        let mut rc = RemoteCntrs::default();
        assert!(!rc.any());
        rc.count(true); // nothing bound: nothing counted, no panic
        rc.bind("p", &r, OpFlags::REMOTE_READ).unwrap();
        rc.bind("p", &w, OpFlags::REMOTE_WRITE | OpFlags::SEND)
            .unwrap();
        assert!(rc.any());
        rc.count(true);
        rc.count(false);
        rc.count(false);
        assert_eq!((r.value(), w.value()), (1, 2));
    }

    #[test]
    fn a_second_counter_for_an_event_is_refused_and_binds_nothing() {
        let (a, b) = (cntr(), cntr());
        let mut rc = RemoteCntrs::default();
        rc.bind("p", &a, OpFlags::REMOTE_WRITE).unwrap();
        let e = rc.bind("p", &b, REMOTE_EVENTS).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("p: "));
        rc.count(true);
        rc.count(false);
        assert_eq!((a.value(), b.value()), (1, 0));
    }
}
