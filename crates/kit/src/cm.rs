//! What connection-oriented providers share around connection calls: the check that an
//! event queue is bound before `fi_listen`, `fi_connect` or `fi_accept` (which report
//! on it), and [`PepBase`], the part of a passive endpoint that is the same in every
//! provider (in the spirit of C libfabric's `util_pep`): the EQ binding, the
//! `fi_listen` rules, and the `FI_CONNREQ` report. A provider keeps only its listener
//! (a socket, a connection-manager id) and the calls that differ.
//!
//! Invariants: a [`PepBase`] holds two locks, the listener's and the EQ binding's;
//! whoever needs both takes the listener's first. Nothing here panics.

use std::sync::{Mutex, MutexGuard, TryLockError};

use ofi_core::attr::Info;
use ofi_core::{EpType, Errno, Error, Result};

use crate::eq::KitEq;
use crate::wait::lock;

/// The event queue connection call `call` (`"fi_listen"`, `"fi_connect"`,
/// `"fi_accept"`) reports on.
///
/// # Errors
/// `FI_ENOEQ` ("`prov`: bind an event queue before `call`") when none is bound.
pub fn bound_eq<'a>(prov: &str, eq: Option<&'a KitEq>, call: &str) -> Result<&'a KitEq> {
    eq.ok_or_else(|| {
        Error::new(
            Errno::ENOEQ,
            format!("{prov}: bind an event queue before {call}"),
        )
    })
}

/// A provider's listener: what a passive endpoint listens with.
pub trait PepListener: Send + 'static {
    /// Whether `fi_listen` has started it (a second `fi_listen` then does nothing).
    fn is_listening(&self) -> bool;
}

/// The shared part of a passive endpoint (`fid_pep`) of provider `prov`: the info it
/// was opened with (the template of every `FI_CONNREQ` info), its context, the event
/// queue bound to it, and the provider's listener `L` behind its own lock.
#[derive(Debug)]
pub struct PepBase<L> {
    prov: &'static str,
    info: Info,
    fid: usize,
    eq: Mutex<Option<KitEq>>,
    listener: Mutex<L>,
}

impl<L: PepListener> PepBase<L> {
    /// The passive endpoint of `info` opened with context `fid`, listening with
    /// `listener` once `fi_listen` starts it.
    ///
    /// # Errors
    /// `FI_EINVAL` when `info` asks for an endpoint type other than `FI_EP_MSG` (or
    /// unspecified): only connection-oriented endpoints listen.
    pub fn open(prov: &'static str, info: &Info, fid: usize, listener: L) -> Result<Self> {
        if !matches!(info.ep_attr.ep_type, EpType::Msg | EpType::Unspec) {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: passive endpoints are FI_EP_MSG only"),
            ));
        }
        Ok(PepBase {
            prov,
            info: info.clone(),
            fid,
            eq: Mutex::new(None),
            listener: Mutex::new(listener),
        })
    }

    /// The info the endpoint was opened with.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// `fi_pep_bind` of an event queue: connection requests are reported there from
    /// now on (a later bind replaces it).
    pub fn bind_eq(&self, eq: &KitEq) {
        *lock(&self.eq) = Some(eq.clone());
    }

    /// `fi_listen`: `start` starts the listener, unless it is listening already (then
    /// nothing happens).
    ///
    /// # Errors
    /// `FI_ENOEQ` when no event queue is bound (connection requests would have nowhere
    /// to go); `start`'s error.
    pub fn listen(&self, start: impl FnOnce(&mut L) -> Result<()>) -> Result<()> {
        let mut listener = lock(&self.listener);
        bound_eq(self.prov, lock(&self.eq).as_ref(), "fi_listen")?;
        if listener.is_listening() {
            return Ok(());
        }
        start(&mut listener)
    }

    /// The listener, locked.
    pub fn listener(&self) -> MutexGuard<'_, L> {
        lock(&self.listener)
    }

    /// The listener, locked, unless another thread holds it (a progress round then
    /// skips the endpoint).
    pub fn try_listener(&self) -> Option<MutexGuard<'_, L>> {
        match self.listener.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Report a connection request on the bound event queue: `FI_CONNREQ` with a copy
    /// of the endpoint's info naming request `handle` (an `FI_EP_MSG` endpoint; `addrs`
    /// fills in the addresses) and the requester's CM data `data`. `false` when no
    /// event queue is bound or it is full: the caller then drops the request.
    pub fn report_request(
        &self,
        handle: usize,
        addrs: impl FnOnce(&mut Info),
        data: Vec<u8>,
    ) -> bool {
        let eq = lock(&self.eq);
        let Some(eq) = eq.as_ref() else {
            return false;
        };
        let mut info = self.info.clone();
        info.handle = handle;
        info.ep_attr.ep_type = EpType::Msg;
        addrs(&mut info);
        eq.connreq(self.fid, info, data).is_ok()
    }

    /// The error of `fi_reject` with a handle that names no pending request.
    pub fn no_pending_request(&self) -> Error {
        Error::new(
            Errno::EINVAL,
            format!(
                "{}: reject: no pending connection request with this handle",
                self.prov
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::enums::EqEvent;
    use ofi_core::eq::EqAttr;
    use ofi_core::provider::EqOps;

    #[test]
    fn a_connection_call_without_an_eq_is_enoeq_naming_the_call() {
        let e = bound_eq("p", None, "fi_listen").unwrap_err();
        assert_eq!(e.code(), Errno::ENOEQ);
        assert_eq!(e.message(), "p: bind an event queue before fi_listen");
    }

    #[derive(Debug, Default)]
    struct Flag {
        listening: bool,
        starts: usize,
    }

    impl PepListener for Flag {
        fn is_listening(&self) -> bool {
            self.listening
        }
    }

    fn start(l: &mut Flag) -> Result<()> {
        l.starts += 1;
        l.listening = true;
        Ok(())
    }

    #[test]
    fn only_msg_endpoints_are_passive() {
        let mut info = Info::new();
        info.ep_attr.ep_type = EpType::Rdm;
        let e = PepBase::open("p", &info, 0, Flag::default()).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        info.ep_attr.ep_type = EpType::Unspec;
        assert!(PepBase::open("p", &info, 0, Flag::default()).is_ok());
    }

    #[test]
    fn listen_needs_an_eq_and_starts_the_listener_once() {
        let pep = PepBase::open("p", &Info::new(), 7, Flag::default()).unwrap();
        let e = pep.listen(start).unwrap_err();
        assert_eq!(e.code(), Errno::ENOEQ);
        assert_eq!(pep.listener().starts, 0);
        let eq = KitEq::new(&EqAttr::default()).unwrap();
        pep.bind_eq(&eq);
        pep.listen(start).unwrap();
        pep.listen(start).unwrap();
        assert_eq!(pep.listener().starts, 1);
    }

    #[test]
    fn a_request_is_reported_only_with_an_eq() {
        let pep = PepBase::open("p", &Info::new(), 7, Flag::default()).unwrap();
        assert!(!pep.report_request(3, |_| {}, vec![1]));
        assert_eq!(pep.no_pending_request().code(), Errno::EINVAL);
        let eq = KitEq::new(&EqAttr::default()).unwrap();
        pep.bind_eq(&eq);
        assert!(pep.report_request(3, |i| i.dest_addr = None, vec![1, 2]));
        let ev = eq.read(false).unwrap();
        assert_eq!((ev.event, ev.fid), (EqEvent::ConnReq, 7));
        assert_eq!(ev.cm_data, vec![1, 2]);
        let info = ev.info.expect("an info");
        assert_eq!(info.handle, 3);
        assert_eq!(info.ep_attr.ep_type, EpType::Msg);
    }
}
