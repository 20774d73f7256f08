//! The host side of the host table: what this process offers every provider it
//! initialises (DESIGN §3): the log sink, the parameter store ([`crate::param`]),
//! getinfo and fabric open over the registry ([`crate::registry`]) for layering, and
//! `hook_inner` for hook providers.
//!
//! The table is installed into `ofi-core` ([`install`]) before the registry initialises
//! any provider: linked-in providers then reach it through the core's `Host`, and
//! plugins receive it in their init (their copy of the core installs it as theirs).
//! The object bookkeeping of handed-over fabrics (close, release) and the panic guard
//! are the core's (`ofi_core::abi::host::serve_*`).
//!
//! Every slot catches panics (a panic becomes `FI_EOTHER`). Nothing here panics.

use ofi_core::abi::host::{
    param_type_of_raw, serve_fabric_close, serve_fabric_release, serve_free_getinfo,
    serve_getinfo_request, serve_getinfo_result, serve_give_fabric, serve_info, serve_slot,
};
use ofi_core::abi::raw::{ErrBuf, RawInfo, RawStr};
use ofi_core::abi::tables::HostTable;
use ofi_core::abi::wire::{RawGetinfoRequest, RawGetinfoResult, RawHostFabric};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::getinfo::GetinfoOutcome;

/// This process's host table.
static HOST: HostTable = HostTable {
    size: std::mem::size_of::<HostTable>(),
    log: ofi_core::log::host_log_sink,
    log_level: h_log_level,
    param_declare: h_param_declare,
    param_get_str: h_param_get_str,
    param_get_int: h_param_get_int,
    param_get_size: h_param_get_size,
    param_get_bool: h_param_get_bool,
    getinfo: h_getinfo,
    free_getinfo: serve_free_getinfo,
    open_fabric: h_open_fabric,
    fabric_close: serve_fabric_close,
    fabric_release: serve_fabric_release,
    hook_inner: h_hook_inner,
};

/// This process's host table (what the registry hands to the providers it initialises).
pub fn table() -> &'static HostTable {
    &HOST
}

/// Install this process's host table into `ofi-core` (idempotent). Returns false if
/// another table was installed first: then providers of this process do not reach
/// this crate's registry and parameters (a warning is logged once).
pub fn install() -> bool {
    let ok = ofi_core::abi::host::install_process_host(&HOST);
    if !ok {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            crate::log::setup_warning(
                "another host table is installed in this process; providers will not see \
                 this registry or its parameters",
            )
        });
    }
    ok
}

/// Run a slot body under the core's guard.
fn host_slot(err: *mut ErrBuf, what: &str, f: impl FnOnce() -> Result<i32>) -> i32 {
    // SAFETY: every caller passes the `err` it received, null or valid per the host
    // table's contract.
    unsafe { serve_slot(err, what, f) }
}

/// # Safety
/// Strings valid for the call.
unsafe fn prov_name<'a>(p: RawStr) -> Result<Option<&'a str>> {
    // SAFETY: forwarded.
    unsafe { p.str("parameter provider") }
}

/// # Safety
/// Strings valid for the call.
unsafe fn req_str<'a>(s: RawStr, what: &str) -> Result<&'a str> {
    // SAFETY: forwarded.
    unsafe { s.str(what) }?.ok_or_else(|| Error::new(Errno::EINVAL, format!("{what}: missing")))
}

unsafe extern "C" fn h_log_level() -> i32 {
    std::panic::catch_unwind(ofi_core::log::host_max_level).map_or(2, i32::from)
}

unsafe extern "C" fn h_param_declare(
    prov: RawStr,
    name: RawStr,
    ty: u32,
    help: RawStr,
    default: RawStr,
    err: *mut ErrBuf,
) -> i32 {
    host_slot(err, "param_declare", || {
        let ty = param_type_of_raw(ty)?;
        // SAFETY: the caller passes strings valid for the call (host table contract).
        let (p, n, h, d) = unsafe {
            (
                prov_name(prov)?,
                req_str(name, "name")?,
                req_str(help, "help")?,
                default.str("default")?,
            )
        };
        crate::param::declare(p, n, ty, h, d)?;
        Ok(0)
    })
}

/// The shared body of the `param_get_*` slots: looks the parameter (`prov`, `name`) up
/// with `get`; 0 when it is not set, else what `store` answers after writing the value
/// to the caller.
///
/// # Safety
/// `prov` and `name` valid for the call (contract).
unsafe fn param_get<T>(
    err: *mut ErrBuf,
    what: &str,
    (prov, name): (RawStr, RawStr),
    get: fn(Option<&str>, &str) -> Result<Option<T>>,
    store: impl FnOnce(T) -> Result<i32>,
) -> i32 {
    host_slot(err, what, || {
        // SAFETY: strings valid for the call (contract).
        let (p, n) = unsafe { (prov_name(prov)?, req_str(name, "name")?) };
        match get(p, n)? {
            None => Ok(0),
            Some(v) => store(v),
        }
    })
}

unsafe extern "C" fn h_param_get_str(
    prov: RawStr,
    name: RawStr,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    err: *mut ErrBuf,
) -> i32 {
    let store = |v: String| {
        if len.is_null() {
            return Err(Error::new(Errno::EINVAL, "len: null"));
        }
        // SAFETY: `len` non-null, `buf` valid for `cap` bytes (contract).
        unsafe {
            *len = v.len();
            if v.len() <= cap && !buf.is_null() {
                std::ptr::copy_nonoverlapping(v.as_ptr(), buf, v.len());
            }
        }
        Ok(1)
    };
    // SAFETY: strings valid for the call (contract).
    unsafe {
        param_get(
            err,
            "param_get_str",
            (prov, name),
            crate::param::get_str,
            store,
        )
    }
}

/// # Safety
/// `out` valid for a write.
unsafe fn put<T>(out: *mut T, v: T) -> Result<i32> {
    if out.is_null() {
        return Err(Error::new(Errno::EINVAL, "out: null"));
    }
    // SAFETY: non-null and valid by the caller's contract.
    unsafe { out.write(v) };
    Ok(1)
}

/// Writes the typed `param_get_*` slots: each looks the parameter up with its getter
/// and writes the value, converted to the slot's C type, to `*out` (1), or answers 0
/// when the parameter is not set.
macro_rules! typed_param_get_slots {
    ($($slot:ident($cty:ty) = $get:ident, |$v:ident| $to_c:expr;)*) => {$(
        unsafe extern "C" fn $slot(
            prov: RawStr,
            name: RawStr,
            out: *mut $cty,
            err: *mut ErrBuf,
        ) -> i32 {
            let what = concat!("param_", stringify!($get));
            // SAFETY: strings valid for the call, `out` for a write (contract).
            unsafe { param_get(err, what, (prov, name), crate::param::$get, |$v| put(out, $to_c)) }
        }
    )*};
}

typed_param_get_slots! {
    h_param_get_int(i64) = get_int, |v| v;
    h_param_get_size(usize) = get_size, |v| v;
    h_param_get_bool(u8) = get_bool, |v| u8::from(v);
}

unsafe extern "C" fn h_getinfo(
    req: *const RawGetinfoRequest,
    core_only: u32,
    out: *mut RawGetinfoResult,
) -> i32 {
    host_slot(std::ptr::null_mut(), "getinfo", || {
        // SAFETY: the request is valid for the call (contract).
        let outcome = match unsafe { serve_getinfo_request(req) } {
            Ok(req) => crate::registry::host_getinfo(&req, core_only != 0),
            Err(e) => GetinfoOutcome {
                error: Some(e),
                ..GetinfoOutcome::default()
            },
        };
        // SAFETY: `out` null or valid for writes (contract); freed by free_getinfo.
        unsafe { serve_getinfo_result(&outcome, out) }
    })
}

unsafe extern "C" fn h_open_fabric(
    info: *const RawInfo,
    _context: usize,
    out: *mut RawHostFabric,
    err: *mut ErrBuf,
) -> i32 {
    host_slot(err, "open_fabric", || {
        if out.is_null() {
            return Err(Error::new(Errno::EINVAL, "open_fabric: null out"));
        }
        // SAFETY: `info` valid for the call (contract).
        let info = unsafe { serve_info(info) }?;
        let fabric = crate::registry::open_fabric(&info)?;
        // SAFETY: `out` valid for writes (contract).
        unsafe { serve_give_fabric(fabric, out) }
    })
}

unsafe extern "C" fn h_hook_inner(out: *mut RawHostFabric, err: *mut ErrBuf) -> i32 {
    host_slot(err, "hook_inner", || {
        if out.is_null() {
            return Err(Error::new(Errno::EINVAL, "hook_inner: null out"));
        }
        let fabric = crate::registry::take_hook_inner().ok_or_else(|| {
            Error::new(
                Errno::ENOENT,
                "hook_inner: no hook fabric is being opened on this thread",
            )
        })?;
        // SAFETY: `out` valid for writes (contract).
        unsafe { serve_give_fabric(fabric, out) }
    })
}
