//! Endpoint glue that several providers wrote the same way: posting a receive to
//! a [`TagMatcher`] and carrying out the answer ([`Bound::post_recv`], which hands
//! the provider each [`Delivery`]), the
//! [`Info`] of a shared receive or transmit context made from its attributes
//! ([`srx_info`], [`stx_info`], [`SharedCtxAttr`]), the `FI_EMSGSIZE` check of an
//! operation's length against a limit ([`check_len`]), and the issuing and cancelling of the
//! triggered calls an endpoint keeps ([`Bound::fire_triggers`],
//! [`Bound::cancel_triggers`]).
//!
//! What a provider does with an unexpected message (where its bytes are, what
//! releasing them means) stays the provider's: it is handed in as a closure.
//!
//! Nothing here panics. `unsafe` here is only [`Bound::fire_triggers`], which
//! forwards its caller's contract to [`TriggerQueue::fire_ready_completing`].

use ofi_core::attr::{Info, RxAttr, TxAttr};
use ofi_core::error::{Errno, Error, Result};

use crate::dataops::DataPath;
use crate::ep::{Bound, Unexpected};
use crate::iov::IoList;
use crate::tagmatch::{Incoming, Placement, PostAction, PostedRecv, TagMatcher};
use crate::trigger::TriggerQueue;

/// An unexpected message that a receive just posted takes ([`Bound::post_recv`]):
/// deliver message `msg`, whose bytes `payload` holds, into `recv` at `place`.
#[derive(Debug)]
pub struct Delivery<'a, U> {
    /// The receive.
    pub recv: &'a PostedRecv<IoList>,
    /// Where the data goes.
    pub place: Placement,
    /// The message.
    pub msg: &'a Incoming,
    /// The provider's hold on its bytes.
    pub payload: U,
    /// This completion releases the (`FI_MULTI_RECV`) buffer.
    pub releases: bool,
}

impl<P> Bound<P> {
    /// `fi_recv` and its kin: post `recv` to the matcher `matcher` picks out of the
    /// provider's receive state `state`, then carry out the answer
    /// ([`carry_out`](Bound::carry_out)): each unexpected message the receive takes
    /// goes to `deliver`, each payload `FI_DISCARD` removed to `discard`, both with
    /// `state` lent back.
    ///
    /// The common answer — the receive is queued — is tested in place and returns
    /// before anything is moved out of the (large) result; this is a data path, so
    /// the function is inlined into the provider's.
    ///
    /// # Errors
    /// The matcher's refusal of the receive (e.g. `FI_EAGAIN` when it is full).
    #[inline(always)]
    pub fn post_recv<S, U>(
        &self,
        state: &mut S,
        matcher: impl FnOnce(&mut S) -> &mut TagMatcher<IoList, U>,
        recv: PostedRecv<IoList>,
        deliver: impl FnMut(&mut S, Delivery<'_, U>),
        discard: impl FnMut(&mut S, U),
    ) -> Result<()> {
        let posted = matcher(state).post(recv);
        if matches!(posted, Ok(PostAction::Queued)) {
            return Ok(());
        }
        self.settle(state, posted?, deliver, discard);
        Ok(())
    }

    /// The rest of [`post_recv`](Bound::post_recv) when the receive took a message
    /// (or peeked, or found none): out of line, so the queued case builds nothing
    /// for it.
    #[inline(never)]
    fn settle<S, U>(
        &self,
        state: &mut S,
        action: PostAction<IoList, U>,
        mut deliver: impl FnMut(&mut S, Delivery<'_, U>),
        mut discard: impl FnMut(&mut S, U),
    ) {
        self.carry_out(action, |u| match u {
            Unexpected::Deliver(d) => deliver(state, d),
            Unexpected::Discard(payload) => discard(state, payload),
        });
    }
}

impl<P> Bound<P> {
    /// Issue the triggered calls waiting in `queue` whose counters reached their
    /// thresholds, through the handle of the endpoint that `handle` makes for the
    /// purpose (the calls carry their own flags; `None`: the endpoint is going, nothing
    /// is issued); a call that fails completes as a transmit error (CQ error entry,
    /// error counter). The number of calls handled.
    ///
    /// Cold: progress calls it only while calls wait.
    ///
    /// # Safety
    /// Every call in `queue` was made on the endpoint `handle` hands a handle of (kit's
    /// data path), and its buffers are the application's, valid until it completes
    /// (the C API's contract).
    #[allow(unsafe_code)]
    #[cold]
    #[inline(never)]
    pub unsafe fn fire_triggers<T: DataPath>(
        &self,
        queue: &TriggerQueue,
        handle: impl FnOnce() -> Option<T>,
    ) -> usize {
        let Some(ep) = handle() else {
            return 0;
        };
        // SAFETY: the caller's contract.
        unsafe {
            queue.fire_ready_completing(&ep, |ctx, flags, e| {
                self.complete_tx(ctx, flags, true, Some(e))
            })
        }
    }

    /// Complete every call waiting in `queue` with `FI_ECANCELED` (the endpoint goes).
    pub fn cancel_triggers(&self, queue: &TriggerQueue) {
        queue.cancel_all_completing(|ctx, flags, e| self.complete_tx(ctx, flags, true, Some(e)));
    }
}

/// The [`Info`] a shared receive context (`fi_srx_context`) is opened with: the
/// receive attributes `attr` and their capabilities, the rest default.
pub fn srx_info(attr: &RxAttr) -> Info {
    Info {
        caps: attr.caps,
        rx_attr: attr.clone(),
        ..Info::default()
    }
}

/// The [`Info`] a shared transmit context (`fi_stx_context`) is opened with: the
/// transmit attributes `attr`, the rest default.
pub fn stx_info(attr: &TxAttr) -> Info {
    Info {
        tx_attr: attr.clone(),
        ..Info::default()
    }
}

/// What `fi_srx_context` or `fi_stx_context` asks for: a shared context of one kind with
/// that kind's attributes. A provider opens both kinds through one function taking it.
#[derive(Clone, Copy, Debug)]
pub enum SharedCtxAttr<'a> {
    /// A shared receive context (`fi_srx_context`).
    Rx(&'a RxAttr),
    /// A shared transmit context (`fi_stx_context`).
    Tx(&'a TxAttr),
}

impl SharedCtxAttr<'_> {
    /// Whether a shared receive context is asked for.
    pub fn is_rx(&self) -> bool {
        matches!(self, SharedCtxAttr::Rx(_))
    }

    /// The [`Info`] the context is opened with ([`srx_info`] or [`stx_info`]).
    pub fn info(&self) -> Info {
        match self {
            SharedCtxAttr::Rx(attr) => srx_info(attr),
            SharedCtxAttr::Tx(attr) => stx_info(attr),
        }
    }
}

/// `FI_EMSGSIZE` naming `prov` when `len` bytes of `what` (e.g. `"message"`,
/// `"inject"`) exceed `limit`, the endpoint's `limit_name` (e.g. `"max_msg_size"`).
///
/// # Errors
/// `FI_EMSGSIZE` when `len > limit`.
#[inline]
pub fn check_len(prov: &str, what: &str, len: usize, limit_name: &str, limit: usize) -> Result<()> {
    if len > limit {
        return Err(too_long(prov, what, len, limit_name, limit));
    }
    Ok(())
}

/// The error of [`check_len`], out of the callers' data paths.
#[cold]
#[inline(never)]
fn too_long(prov: &str, what: &str, len: usize, limit_name: &str, limit: usize) -> Error {
    Error::new(
        Errno::EMSGSIZE,
        format!("{prov}: {what} of {len} bytes exceeds {limit_name} {limit}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::flags::Caps;

    #[test]
    fn shared_context_info_carries_only_its_attributes() {
        let rx = RxAttr {
            caps: Caps::MSG | Caps::RECV,
            size: 77,
            ..RxAttr::default()
        };
        let info = srx_info(&rx);
        assert_eq!(info.caps, Caps::MSG | Caps::RECV);
        assert_eq!(info.rx_attr.size, 77);
        assert_eq!(info.tx_attr.size, TxAttr::default().size);

        let tx = TxAttr {
            size: 33,
            ..TxAttr::default()
        };
        let info = stx_info(&tx);
        assert_eq!(info.tx_attr.size, 33);
        assert_eq!(info.caps, Info::default().caps);
        assert_eq!(info.rx_attr.size, RxAttr::default().size);
    }

    #[test]
    fn check_len_refuses_only_past_the_limit() {
        assert!(check_len("p", "message", 64, "max_msg_size", 64).is_ok());
        let e = check_len("p", "message", 65, "max_msg_size", 64).unwrap_err();
        assert_eq!(e.code(), Errno::EMSGSIZE);
        assert!(e
            .to_string()
            .contains("p: message of 65 bytes exceeds max_msg_size 64"));
    }
}
