//! What every provider's scalable endpoint (`fi_scalable_ep`) does the same way: the
//! context counts it is opened with, which of its transmit and receive contexts are
//! open ([`ContextSlots`]), and the attributes a context opened with `fi_tx_context` /
//! `fi_rx_context` gets ([`merge_tx`], [`merge_rx`]).
//!
//! # Invariants
//!
//! - Each index is open at most once at a time: a second open is `FI_EBUSY`, an index
//!   at or past the count `FI_EINVAL`; a negative index `FI_EINVAL`.
//! - Closing the scalable endpoint while a context is open is `FI_EBUSY`
//!   ([`ContextSlots::check_close`]).
//!
//! Nothing here panics.

use std::sync::Mutex;

use ofi_core::attr::{Info, RxAttr, TxAttr};
use ofi_core::{Errno, Error, Result};

use crate::wait::lock;

/// The transmit and receive context counts of a scalable endpoint opened with `info`
/// (0 in the endpoint attributes is 1), each at most `max`.
///
/// # Errors
/// `FI_EINVAL` for a count beyond `max`, the message prefixed with `prov`.
pub fn context_counts(prov: &str, info: &Info, max: usize) -> Result<(usize, usize)> {
    let (ntx, nrx) = (
        info.ep_attr.tx_ctx_cnt.max(1),
        info.ep_attr.rx_ctx_cnt.max(1),
    );
    if ntx > max || nrx > max {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: {ntx} transmit and {nrx} receive contexts (at most {max} each)"),
        ));
    }
    Ok((ntx, nrx))
}

/// Which contexts of a scalable endpoint are open.
#[derive(Debug)]
pub struct ContextSlots {
    open: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    tx: Vec<bool>,
    rx: Vec<bool>,
}

/// "transmit" or "receive".
fn kind(tx: bool) -> &'static str {
    if tx {
        "transmit"
    } else {
        "receive"
    }
}

impl ContextSlots {
    /// `ntx` transmit and `nrx` receive contexts, none open.
    pub fn new(ntx: usize, nrx: usize) -> ContextSlots {
        ContextSlots {
            open: Mutex::new(Open {
                tx: vec![false; ntx],
                rx: vec![false; nrx],
            }),
        }
    }

    /// How many receive contexts the endpoint has (open or not).
    pub fn rx_count(&self) -> usize {
        lock(&self.open).rx.len()
    }

    /// Whether receive context `index` is open.
    pub fn rx_is_open(&self, index: usize) -> bool {
        lock(&self.open).rx.get(index).copied().unwrap_or(false)
    }

    /// Mark context `index` (a transmit one when `tx`) open, returning the index as a
    /// `usize`; [`ContextSlots::release`] marks it closed again.
    ///
    /// # Errors
    /// `FI_EINVAL` for a negative index or one at or past the count; `FI_EBUSY` when
    /// it is open already. Messages prefixed with `prov`.
    pub fn claim(&self, prov: &str, tx: bool, index: i32) -> Result<usize> {
        let what = kind(tx);
        let bad = || Error::new(Errno::EINVAL, format!("{prov}: {what} context {index}"));
        let i = usize::try_from(index).map_err(|_| bad())?;
        let mut open = lock(&self.open);
        let v = if tx { &mut open.tx } else { &mut open.rx };
        let n = v.len();
        match v.get_mut(i) {
            None => Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: {what} context {i} of {n}"),
            )),
            Some(true) => Err(Error::new(
                Errno::EBUSY,
                format!("{prov}: {what} context {i} is open"),
            )),
            Some(slot) => {
                *slot = true;
                Ok(i)
            }
        }
    }

    /// Mark context `index` closed (nothing for an index out of range).
    pub fn release(&self, tx: bool, index: usize) {
        let mut open = lock(&self.open);
        let v = if tx { &mut open.tx } else { &mut open.rx };
        if let Some(slot) = v.get_mut(index) {
            *slot = false;
        }
    }

    /// `fi_close` of the scalable endpoint: refused while a context is open.
    ///
    /// # Errors
    /// `FI_EBUSY` naming how many are open, prefixed with `prov`.
    pub fn check_close(&self, prov: &str) -> Result<()> {
        let open = lock(&self.open);
        let n = open.tx.iter().chain(&open.rx).filter(|&&o| o).count();
        if n > 0 {
            return Err(Error::new(
                Errno::EBUSY,
                format!("{prov}: the scalable endpoint has {n} open contexts"),
            ));
        }
        Ok(())
    }
}

/// A context's transmit attributes: the scalable endpoint's `base`, with what `attr`
/// sets (its operation flags and capabilities, when not empty).
pub fn merge_tx(base: &mut TxAttr, attr: &TxAttr) {
    if !attr.op_flags.is_empty() {
        base.op_flags = attr.op_flags;
    }
    if !attr.caps.is_empty() {
        base.caps = attr.caps;
    }
}

/// A context's receive attributes: the scalable endpoint's `base`, with what `attr`
/// sets (its operation flags, capabilities and size, when not empty or 0).
pub fn merge_rx(base: &mut RxAttr, attr: &RxAttr) {
    if !attr.op_flags.is_empty() {
        base.op_flags = attr.op_flags;
    }
    if !attr.caps.is_empty() {
        base.caps = attr.caps;
    }
    if attr.size != 0 {
        base.size = attr.size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_claimed_once_within_the_count() {
        let s = ContextSlots::new(2, 1);
        assert_eq!(s.claim("p", true, 1).unwrap(), 1);
        assert_eq!(s.claim("p", true, 1).unwrap_err().code(), Errno::EBUSY);
        assert_eq!(s.claim("p", true, 2).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(s.claim("p", false, -1).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(s.claim("p", false, 0).unwrap(), 0);
        assert!(s.rx_is_open(0) && !s.rx_is_open(1));
        assert_eq!(s.check_close("p").unwrap_err().code(), Errno::EBUSY);
        s.release(true, 1);
        s.release(false, 0);
        s.release(false, 9);
        assert!(s.check_close("p").is_ok());
        assert_eq!(s.claim("p", true, 1).unwrap(), 1);
        assert_eq!(s.rx_count(), 1);
    }

    #[test]
    fn counts_default_to_one_and_are_bounded() {
        let mut i = Info::default();
        assert_eq!(context_counts("p", &i, 4).unwrap(), (1, 1));
        i.ep_attr.tx_ctx_cnt = 4;
        i.ep_attr.rx_ctx_cnt = 2;
        assert_eq!(context_counts("p", &i, 4).unwrap(), (4, 2));
        i.ep_attr.rx_ctx_cnt = 5;
        assert_eq!(
            context_counts("p", &i, 4).unwrap_err().code(),
            Errno::EINVAL
        );
    }
}
