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

use ofi::AddrFormat;

use crate::endpoint::{ep_header, EpObj, EpState, FidEp};
use crate::guard_try;
use crate::info::{rx_from_c, tx_from_c, FiInfo, FiRxAttr, FiTxAttr};
use crate::obj::{info_arg, put_result, DomainObj, FidDomain, EINVAL};

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

/// The program's transmit attributes, or the defaults for a null pointer.
///
/// # Safety
/// `attr` is null or points to a `struct fi_tx_attr`.
unsafe fn tx_attr_arg(attr: *const c_void) -> ofi::TxAttr {
    // SAFETY: the caller's contract.
    match unsafe { attr.cast::<FiTxAttr>().as_ref() } {
        Some(a) => tx_from_c(a),
        None => ofi::TxAttr::default(),
    }
}

/// The program's receive attributes, or the defaults for a null pointer.
///
/// # Safety
/// `attr` is null or points to a `struct fi_rx_attr`.
unsafe fn rx_attr_arg(attr: *const c_void) -> ofi::RxAttr {
    // SAFETY: the caller's contract.
    match unsafe { attr.cast::<FiRxAttr>().as_ref() } {
        Some(a) => rx_from_c(a),
        None => ofi::RxAttr::default(),
    }
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
    open: impl FnOnce() -> ofi::Result<ofi::ep::Endpoint>,
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

/// `fi_scalable_ep` (the domain table's slot).
///
/// # Safety
/// `domain` is a domain of this library; the other pointers per the C API.
pub unsafe extern "C" fn domain_scalable_ep(
    domain: *mut FidDomain,
    info: *mut FiInfo,
    sep: *mut *mut FidEp,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain; `info` per the C API.
        let (d, info) = unsafe { (DomainObj::of(domain), info_arg(info)?) };
        // SAFETY: `sep` per the C API.
        Ok(unsafe {
            hand_out(sep, FI_CLASS_SEP, context, info.addr_format, || {
                d.r.domain.scalable_ep(&info)
            })
        })
    })
}

/// `fi_stx_context` (the domain table's slot; `stx` is a `struct fid_stx **`).
///
/// # Safety
/// `domain` is a domain of this library; the other pointers per the C API.
pub unsafe extern "C" fn domain_stx_ctx(
    domain: *mut FidDomain,
    attr: *mut c_void,
    stx: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain; `attr` null or a `struct fi_tx_attr` (C API).
        let (d, attr) = unsafe { (DomainObj::of(domain), tx_attr_arg(attr)) };
        // SAFETY: `stx` per the C API; a `fid_stx` is the head of our `fid_ep`.
        Ok(unsafe {
            hand_out(
                stx.cast(),
                FI_CLASS_STX_CTX,
                context,
                AddrFormat::UNSPEC,
                || d.r.domain.stx_context(&attr),
            )
        })
    })
}

/// `fi_srx_context` (the domain table's slot; `srx` is a `struct fid_ep **`).
///
/// # Safety
/// `domain` is a domain of this library; the other pointers per the C API.
pub unsafe extern "C" fn domain_srx_ctx(
    domain: *mut FidDomain,
    attr: *mut c_void,
    srx: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain; `attr` null or a `struct fi_rx_attr` (C API).
        let (d, attr) = unsafe { (DomainObj::of(domain), rx_attr_arg(attr)) };
        // SAFETY: `srx` per the C API.
        Ok(unsafe {
            hand_out(
                srx.cast(),
                FI_CLASS_SRX_CTX,
                context,
                AddrFormat::UNSPEC,
                || d.r.domain.srx_context(&attr),
            )
        })
    })
}

/// `fi_tx_context` (the endpoint table's slot) of a scalable endpoint.
///
/// # Safety
/// `ep` is an endpoint of this library; the other pointers per the C API.
pub unsafe extern "C" fn ep_tx_ctx(
    ep: *mut FidEp,
    index: c_int,
    attr: *mut c_void,
    tx_ep: *mut *mut FidEp,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our endpoint; `attr` null or a `struct fi_tx_attr` (C API).
        let (e, attr) = unsafe { (&EpObj::of(ep).r, tx_attr_arg(attr)) };
        // SAFETY: `tx_ep` per the C API.
        Ok(unsafe {
            hand_out(tx_ep, FI_CLASS_TX_CTX, context, e.addr_format, || {
                e.ep.tx_context(index, &attr)
            })
        })
    })
}

/// `fi_rx_context` (the endpoint table's slot) of a scalable endpoint.
///
/// # Safety
/// `ep` is an endpoint of this library; the other pointers per the C API.
pub unsafe extern "C" fn ep_rx_ctx(
    ep: *mut FidEp,
    index: c_int,
    attr: *mut c_void,
    rx_ep: *mut *mut FidEp,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our endpoint; `attr` null or a `struct fi_rx_attr` (C API).
        let (e, attr) = unsafe { (&EpObj::of(ep).r, rx_attr_arg(attr)) };
        // SAFETY: `rx_ep` per the C API.
        Ok(unsafe {
            hand_out(rx_ep, FI_CLASS_RX_CTX, context, e.addr_format, || {
                e.ep.rx_context(index, &attr)
            })
        })
    })
}
