//! Scalable endpoints and shared contexts through the C ABI: `fi_scalable_ep`,
//! `fi_tx_context` / `fi_rx_context`, `fi_stx_context` / `fi_srx_context`.
//!
//! Every one of these objects is an endpoint of the ofi layer ([`ofi::ep::Endpoint`]),
//! so each is handed to the program as a `struct fid_ep` carrying the endpoint's own
//! tables ([`crate::endpoint::ep_header`]): `fi_close`, `fi_ep_bind` /
//! `fi_scalable_ep_bind`, `fi_enable`, `fi_control` and the data calls reach the
//! provider's object, and the provider refuses what its kind does not do (a data call on
//! a scalable endpoint itself, a receive on a transmit context). A `struct fid_stx` is
//! the leading part of a `struct fid_ep` (`fid`, `ops`), so a shared transmit context is
//! one as well. Binding an endpoint to a shared context is `fi_ep_bind` with the
//! context's `fid` ([`crate::endpoint`]'s bind slot accepts our endpoints).
//!
//! A null attribute pointer asks for the provider's defaults (`fi_endpoint(3)`). Nothing
//! here panics; a panic of a provider is caught by [`guard_try`].

use std::ffi::{c_int, c_void};

use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::AddrFormat;

use crate::endpoint::{ep_header, EpObj, EpState, FidEp};
use crate::guard_try;
use crate::info::{rx_from_c, tx_from_c, FiRxAttr, FiTxAttr};
use crate::obj::{put_result, DomainObj, FidDomain, EINVAL};

/// `FI_CLASS_SEP`.
pub const FI_CLASS_SEP: usize = 4;
/// `FI_CLASS_RX_CTX`.
pub const FI_CLASS_RX_CTX: usize = 5;
/// `FI_CLASS_SRX_CTX`.
pub const FI_CLASS_SRX_CTX: usize = 6;
/// `FI_CLASS_TX_CTX`.
pub const FI_CLASS_TX_CTX: usize = 7;
/// `FI_CLASS_STX_CTX`.
pub const FI_CLASS_STX_CTX: usize = 8;

/// A direction of the contexts, transmit ([`Tx`]) or receive ([`Rx`]): its attributes,
/// its classes and the calls that open its contexts. The slots of the contexts are
/// written once, generic over it ([`ep_ctx`], [`domain_shared_ctx`]).
pub trait Direction {
    /// The class of a scalable endpoint's context (`FI_CLASS_TX_CTX`, `FI_CLASS_RX_CTX`).
    const CTX_CLASS: usize;
    /// The class of a shared context (`FI_CLASS_STX_CTX`, `FI_CLASS_SRX_CTX`).
    const SHARED_CLASS: usize;
    /// The attributes of the direction (`ofi::TxAttr`, `ofi::RxAttr`).
    type Attr;

    /// The program's attributes, or the defaults for a null pointer.
    ///
    /// # Safety
    /// `attr` is null or points to the C attributes of the direction (`struct
    /// fi_tx_attr`, `struct fi_rx_attr`).
    unsafe fn attr_arg(attr: *const c_void) -> Self::Attr;

    /// Context `index` of the scalable endpoint `sep`.
    fn context(sep: &Endpoint, index: c_int, attr: &Self::Attr) -> ofi::Result<Endpoint>;

    /// A shared context of `domain`.
    fn shared(domain: &Domain, attr: &Self::Attr) -> ofi::Result<Endpoint>;
}

/// Declares the directions: `Type(attributes, their C struct, conversion from C):
/// context class, shared class, endpoint method, domain method;`.
macro_rules! directions {
    ($($(#[$doc:meta])* $Dir:ident($Attr:ty, $CAttr:ty, $from_c:path):
        $ctx_class:expr, $shared_class:expr, $context:ident, $shared:ident;)*) => {$(
        $(#[$doc])*
        pub enum $Dir {}

        impl Direction for $Dir {
            const CTX_CLASS: usize = $ctx_class;
            const SHARED_CLASS: usize = $shared_class;
            type Attr = $Attr;

            unsafe fn attr_arg(attr: *const c_void) -> $Attr {
                // SAFETY: the caller's contract.
                let attr = unsafe { attr.cast::<$CAttr>().as_ref() };
                attr.map_or_else(<$Attr>::default, $from_c)
            }

            fn context(sep: &Endpoint, index: c_int, attr: &$Attr) -> ofi::Result<Endpoint> {
                sep.$context(index, attr)
            }

            fn shared(domain: &Domain, attr: &$Attr) -> ofi::Result<Endpoint> {
                domain.$shared(attr)
            }
        }
    )*};
}

directions! {
    /// The transmit direction (`fi_tx_context`, `fi_stx_context`).
    Tx(ofi::TxAttr, FiTxAttr, tx_from_c):
        FI_CLASS_TX_CTX, FI_CLASS_STX_CTX, tx_context, stx_context;
    /// The receive direction (`fi_rx_context`, `fi_srx_context`).
    Rx(ofi::RxAttr, FiRxAttr, rx_from_c):
        FI_CLASS_RX_CTX, FI_CLASS_SRX_CTX, rx_context, srx_context;
}

/// Wraps the endpoint `open` makes as a C object of `class` and writes it to `out`
/// (null when the open fails).
///
/// # Safety
/// `out` is null (refused with `FI_EINVAL`) or writable.
unsafe fn hand_out(
    out: *mut *mut FidEp,
    class: usize,
    context: *mut c_void,
    addr_format: AddrFormat,
    open: impl FnOnce() -> ofi::Result<Endpoint>,
) -> c_int {
    if out.is_null() {
        return EINVAL;
    }
    // A refused open leaves no stale pointer behind.
    // SAFETY: checked non-null; writable (contract).
    unsafe { crate::queues::null_out(out) };
    let made = EpObj::into_c_with(ep_header(class, context), |_| {
        open().map(|ep| EpState { ep, addr_format })
    });
    // SAFETY: checked non-null; writable (contract).
    unsafe { put_result(out, made) }
}

crate::fid::open_for_info! {
    /// `fi_scalable_ep` (the domain table's slot).
    pub fn domain_scalable_ep(domain: *mut FidDomain as DomainObj, info,
        sep: *mut *mut FidEp, context) = |d| {
        // SAFETY: `sep` checked non-null, writable per the C API.
        Ok(unsafe {
            hand_out(sep, FI_CLASS_SEP, context, info.addr_format, || {
                d.r.domain.scalable_ep(&info)
            })
        })
    }
}

/// `fi_stx_context` / `fi_srx_context` (the domain table's slots, `D` = [`Tx`] / [`Rx`];
/// `out` is a `struct fid_stx **` or a `struct fid_ep **`).
///
/// # Safety
/// `domain` is a domain of this library; the other pointers per the C API.
pub unsafe extern "C" fn domain_shared_ctx<D: Direction>(
    domain: *mut FidDomain,
    attr: *mut c_void,
    out: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain; `attr` null or the C attributes of `D` (C API).
        let (d, attr) = unsafe { (DomainObj::of(domain), D::attr_arg(attr)) };
        // SAFETY: `out` per the C API; a `fid_stx` is the head of our `fid_ep`.
        Ok(unsafe {
            hand_out(
                out.cast(),
                D::SHARED_CLASS,
                context,
                AddrFormat::UNSPEC,
                || D::shared(&d.r.domain, &attr),
            )
        })
    })
}

/// `fi_tx_context` / `fi_rx_context` (the endpoint table's slots, `D` = [`Tx`] /
/// [`Rx`]) of a scalable endpoint.
///
/// # Safety
/// `ep` is an endpoint of this library; the other pointers per the C API.
pub unsafe extern "C" fn ep_ctx<D: Direction>(
    ep: *mut FidEp,
    index: c_int,
    attr: *mut c_void,
    out: *mut *mut FidEp,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our endpoint; `attr` null or the C attributes of `D` (C API).
        let (e, attr) = unsafe { (&EpObj::of(ep).r, D::attr_arg(attr)) };
        // SAFETY: `out` per the C API.
        Ok(unsafe {
            hand_out(out, D::CTX_CLASS, context, e.addr_format, || {
                D::context(&e.ep, index, &attr)
            })
        })
    })
}
