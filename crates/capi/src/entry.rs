//! The exported functions of `<rdma/fabric.h>` that are not tables: `fi_getinfo`,
//! `fi_freeinfo`, `fi_dupinfo` (and `fi_allocinfo`, its inline `fi_dupinfo(NULL)`),
//! `fi_fabric`, `fi_version`, `fi_strerror`, `fi_open`.
//!
//! The symbols exported in several versions (`fi_getinfo`, `fi_freeinfo`,
//! `fi_dupinfo`, `fi_fabric`) are defined here as `ofi_capi_*` and bound to their
//! versioned names by `src/shim.c`. Each function catches panics ([`crate::guard`]).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Mutex;

use ofi::{GetinfoFlags, Version, API_VERSION};

use crate::fid::{Fid, ENOSYS};
use crate::info::{self, opt_str, FiInfo};
use crate::{guard, interned_ptr, status};

/// `fi_getinfo@@FABRIC_1.3` (through the shim): the fabric services matching `hints`
/// that reach `node`/`service`, as a list the caller frees with `fi_freeinfo`.
///
/// # Safety
/// `node` and `service` are null or valid strings; `hints` null or a valid info;
/// `info` null or writable.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const FiInfo,
    info: *mut *mut FiInfo,
) -> c_int {
    guard(|| {
        ofi::log::init();
        if info.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: `info` is writable (contract).
        unsafe { info.write(std::ptr::null_mut()) };
        let hints = if hints.is_null() {
            None
        } else {
            // SAFETY: `hints` is a valid info (contract).
            match unsafe { info::info_from_c(hints) } {
                Ok(h) => Some(h),
                Err(e) => {
                    let e = e.context("fi_getinfo: hints");
                    ofi::ofi_debug!("core", "core", "{e}");
                    return status(&e);
                }
            }
        };
        // SAFETY: the strings are null or valid (contract).
        let (node, service) = unsafe { (opt_str(node), opt_str(service)) };
        let (found, verdicts) = ofi::getinfo_explain(&ofi::GetinfoRequest {
            version: Version::from_raw(version),
            node,
            service,
            flags: GetinfoFlags::from_bits_retain(flags),
            hints,
        });
        // With FI_LOG_LEVEL=debug, why each provider entry was kept or not.
        if ofi::log::host_max_level() >= ofi::log::LEVEL_DEBUG {
            for v in &verdicts {
                ofi::ofi_debug!("core", "core", "fi_getinfo: {v}");
            }
        }
        if let Ok(list) = &found {
            crate::obj::remember_infos(list);
        }
        match found.and_then(|list| info::list_to_c(&list)) {
            Ok(list) => {
                // SAFETY: `info` is writable (contract).
                unsafe { info.write(list) };
                0
            }
            Err(e) => {
                ofi::ofi_debug!("core", "core", "fi_getinfo: {e}");
                status(&e)
            }
        }
    })
}

/// `fi_freeinfo@@FABRIC_1.3` (through the shim).
///
/// # Safety
/// `info` is null or a list from `fi_getinfo`/`fi_dupinfo`/`fi_allocinfo` (possibly
/// with parts the program replaced using `malloc`), not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_freeinfo(info: *mut FiInfo) {
    // SAFETY: the caller's contract.
    guard(|| unsafe { info::free_list(info) })
}

/// `fi_dupinfo@@FABRIC_1.3` (through the shim); `fi_dupinfo(NULL)` is `fi_allocinfo`.
///
/// # Safety
/// `info` is null or a valid info.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_dupinfo(info: *const FiInfo) -> *mut FiInfo {
    // SAFETY: the caller's contract.
    guard(|| unsafe { info::dup(info) })
}

/// `fi_fabric@@FABRIC_1.1` (through the shim): opens the fabric named by the
/// attributes (`prov_name` and `name`, as `fi_getinfo` returned them).
///
/// # Safety
/// `attr` is null or valid; `fabric` null or writable.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_fabric(
    attr: *mut crate::info::FiFabricAttr,
    fabric: *mut *mut crate::obj::FidFabric,
    context: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { crate::obj::open_fabric(attr, fabric, context) })
}

/// The compat entries of the shim (`fi_getinfo@FABRIC_1.0`, …): refuse with
/// `-FI_ENOSYS`, logging a warning once per symbol.
///
/// # Safety
/// `symbol` is null or a valid string.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_refuse_compat(symbol: *const c_char) -> c_int {
    guard(|| {
        static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
        // SAFETY: the caller's contract.
        let name = unsafe { opt_str(symbol) }.unwrap_or_default();
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if !warned.contains(&name) {
            ofi::log::init();
            ofi::ofi_warn!(
                "core",
                "core",
                "{name}: this program was linked against a libfabric older than 1.7; \
                 its structure layouts are not served by ofi-rs (relink it)"
            );
            warned.push(name);
        }
        ENOSYS
    })
}

/// `fi_version@FABRIC_1.0`: the API version this library implements (1.17).
#[no_mangle]
pub extern "C" fn fi_version() -> u32 {
    API_VERSION.to_raw()
}

/// `fi_strerror@FABRIC_1.0`: the C library's text of an error code (either sign). The
/// string lives as long as the process.
#[no_mangle]
pub extern "C" fn fi_strerror(errnum: c_int) -> *const c_char {
    guard(|| interned_ptr(&ofi::error::strerror(errnum)))
}

/// `fi_open@FABRIC_1.5`: opening a named top-level object (`"mr_cache"`, a logging
/// class, …). None is offered: `-FI_ENOSYS`.
///
/// # Safety
/// `fid` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn fi_open(
    _version: u32,
    name: *const c_char,
    _attr: *mut c_void,
    _attr_len: usize,
    _flags: u64,
    fid: *mut *mut Fid,
    _context: *mut c_void,
) -> c_int {
    guard(|| {
        if name.is_null() || fid.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: `fid` is writable, `name` a valid string (contract).
        unsafe { fid.write(std::ptr::null_mut()) };
        // SAFETY: as above.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        ofi::ofi_debug!("core", "core", "fi_open({name}): not offered");
        ENOSYS
    })
}
