//! Parameters and logging for C code: `fi_param_define`, `fi_param_get`,
//! `fi_getparams`, `fi_freeparams`, `fi_log_enabled`, `fi_log_ready` and `fi_log`.
//!
//! They use the process-wide parameter store and log subscriber of ofi-rs, so a C
//! program's parameters are listed by `fi_info -e` beside the providers', and its log
//! lines are filtered by `FI_LOG_LEVEL`, `FI_LOG_PROV` and `FI_LOG_SUBSYS` like every
//! other. The variadic `fi_param_define` and `fi_log` format their text in `src/shim.c`
//! and call the `ofi_capi_*` functions here.

use std::ffi::{c_char, c_int, c_void};

use ofi::log::{self as olog, SUBSYSTEMS};
use ofi::param::{self as oparam, ParamSource, ParamType};
use ofi::{Errno, Error};

use crate::info::{malloc_str, opt_str};
use crate::{guard, interned_ptr, status};

/// The start of `struct fi_provider` (`<rdma/providers/fi_prov.h>`): enough to read
/// the provider's name.
#[repr(C)]
pub struct FiProviderHead {
    /// `version`.
    pub version: u32,
    /// `fi_version`.
    pub fi_version: u32,
    /// `context` (`struct fi_context`).
    pub context: [*mut c_void; 4],
    /// `name`.
    pub name: *const c_char,
}

/// The provider name of a `struct fi_provider *` (`None` for null: the core).
///
/// # Safety
/// `prov` is null or a valid provider structure whose name is null or a valid string.
unsafe fn provider_name(prov: *const c_void) -> Option<String> {
    // SAFETY: the caller's contract.
    let head = unsafe { prov.cast::<FiProviderHead>().as_ref() }?;
    // SAFETY: the caller's contract.
    unsafe { opt_str(head.name) }.filter(|n| n != "core")
}

/// `enum fi_param_type` to the store's type.
fn param_type(raw: c_int) -> Option<ParamType> {
    match raw {
        0 => Some(ParamType::String),
        1 => Some(ParamType::Int),
        2 => Some(ParamType::Bool),
        3 => Some(ParamType::Size),
        _ => None,
    }
}

fn param_type_raw(ty: ParamType) -> u32 {
    match ty {
        ParamType::String => 0,
        ParamType::Int => 1,
        ParamType::Bool => 2,
        ParamType::Size => 3,
    }
}

/// `fi_param_define@FABRIC_1.0` after the shim formatted the help text.
///
/// # Safety
/// `prov` is null or a valid `struct fi_provider` with a null or valid name; `name` and `help` null or valid strings.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_param_define(
    prov: *const c_void,
    name: *const c_char,
    ty: c_int,
    help: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (prov, name, help) = unsafe { (provider_name(prov), opt_str(name), opt_str(help)) };
        let (Some(name), Some(ty)) = (name, param_type(ty)) else {
            return -libc::EINVAL;
        };
        let help = help
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| name.clone());
        match oparam::declare(prov.as_deref(), &name, ty, &help, None) {
            Ok(()) => 0,
            Err(e) => status(&e),
        }
    })
}

/// `fi_param_get@FABRIC_1.0`: the value of a defined parameter, written by its type
/// (`char *` for a string — a process-lifetime string —, `int` for an integer or a
/// boolean, `size_t` for a size). `-FI_ENOENT` when it is not defined, `-FI_ENODATA`
/// when it has no value, `-FI_EINVAL` when the value does not parse.
///
/// # Safety
/// `prov` is null or a valid `struct fi_provider` with a null or valid name; `name` null or a valid string; `value` null or
/// writable for the parameter's type.
#[no_mangle]
pub unsafe extern "C" fn fi_param_get(
    prov: *const c_void,
    name: *const c_char,
    value: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (prov, name) = unsafe { (provider_name(prov), opt_str(name)) };
        let Some(name) = name else {
            return -libc::EINVAL;
        };
        if value.is_null() {
            return -libc::EINVAL;
        }
        let entry = oparam::list()
            .into_iter()
            .find(|e| e.def.prov.as_deref() == prov.as_deref() && e.def.name == name);
        let Some(entry) = entry else {
            return -libc::ENOENT;
        };
        let Some(text) = entry.value else {
            return -libc::ENODATA;
        };
        let bad = |e: Error| status(&e.context(format!("{}={text}", entry.env_name)));
        let range = |v: i64| {
            c_int::try_from(v).map_err(|_| Error::new(Errno::EINVAL, "out of the range of int"))
        };
        match entry.def.ty {
            ParamType::String => {
                let s = interned_ptr(&text);
                // SAFETY: `value` is writable for a `char *` (contract).
                unsafe { value.cast::<*const c_char>().write(s) }
            }
            ParamType::Int => match oparam::parse_int(&text).and_then(range) {
                // SAFETY: `value` is writable for an `int` (contract).
                Ok(v) => unsafe { value.cast::<c_int>().write(v) },
                Err(e) => return bad(e),
            },
            ParamType::Bool => match oparam::parse_bool(&text) {
                // SAFETY: `value` is writable for an `int` (contract).
                Ok(v) => unsafe { value.cast::<c_int>().write(c_int::from(v)) },
                Err(e) => return bad(e),
            },
            ParamType::Size => match oparam::parse_size(&text) {
                // SAFETY: `value` is writable for a `size_t` (contract).
                Ok(v) => unsafe { value.cast::<usize>().write(v) },
                Err(e) => return bad(e),
            },
        }
        0
    })
}

/// `struct fi_param`.
#[repr(C)]
pub struct FiParam {
    /// `name`: the environment variable (`FI_TCP_IFACE`).
    pub name: *const c_char,
    /// `type` (`enum fi_param_type`).
    pub ty: u32,
    /// `help_string`.
    pub help_string: *const c_char,
    /// `value`: what the environment or `plugins.toml` sets, or null.
    pub value: *const c_char,
}

/// `fi_getparams@FABRIC_1.0`: every defined parameter, in an array ended by an entry
/// with a null name, freed with `fi_freeparams`.
///
/// # Safety
/// `params` and `count` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn fi_getparams(params: *mut *mut FiParam, count: *mut c_int) -> c_int {
    guard(|| {
        if params.is_null() || count.is_null() {
            return -libc::EINVAL;
        }
        // The registry declares the providers' parameters when it is built.
        let _ = ofi::registry();
        let list = oparam::list();
        // SAFETY: calloc has no preconditions.
        let arr: *mut FiParam =
            unsafe { libc::calloc(list.len() + 1, std::mem::size_of::<FiParam>()) }.cast();
        if arr.is_null() {
            return -libc::ENOMEM;
        }
        for (i, e) in list.iter().enumerate() {
            let value = match e.source {
                ParamSource::Env | ParamSource::Config(_) => e.value.as_deref(),
                ParamSource::Default | ParamSource::Unset => None,
            };
            // SAFETY: `i < list.len()`: inside the array.
            unsafe {
                arr.add(i).write(FiParam {
                    name: malloc_str(Some(&e.env_name)),
                    ty: param_type_raw(e.def.ty),
                    help_string: malloc_str(Some(&e.def.help)),
                    value: malloc_str(value),
                })
            };
        }
        // SAFETY: both are writable (contract).
        unsafe {
            params.write(arr);
            count.write(c_int::try_from(list.len()).unwrap_or(c_int::MAX));
        }
        0
    })
}

/// `fi_freeparams@FABRIC_1.0`.
///
/// # Safety
/// `params` is null or an array from `fi_getparams`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn fi_freeparams(params: *mut FiParam) {
    guard(|| {
        if params.is_null() {
            return;
        }
        let mut p = params;
        // SAFETY: the array ends with a null name (fi_getparams); its strings are ours.
        unsafe {
            while !(*p).name.is_null() {
                libc::free((*p).name.cast_mut().cast());
                libc::free((*p).help_string.cast_mut().cast());
                libc::free((*p).value.cast_mut().cast());
                p = p.add(1);
            }
            libc::free(params.cast());
        }
    })
}

/// `enum fi_log_level` to the boundary level (2 = warn … 5 = trace).
fn log_level(level: c_int) -> u8 {
    match level {
        0 => olog::LEVEL_WARN,
        1 => olog::LEVEL_TRACE,
        2 => olog::LEVEL_INFO,
        _ => olog::LEVEL_DEBUG,
    }
}

fn subsys_name(subsys: c_int) -> &'static str {
    usize::try_from(subsys)
        .ok()
        .and_then(|i| SUBSYSTEMS.get(i).copied())
        .unwrap_or("core")
}

/// `fi_log_enabled@FABRIC_1.0`: whether a message of this level could be shown (the
/// provider and subsystem filters apply when it is logged).
///
/// # Safety
/// `prov` is null or a valid `struct fi_provider` with a null or valid name (it is not read).
#[no_mangle]
pub unsafe extern "C" fn fi_log_enabled(
    _prov: *const c_void,
    level: c_int,
    _subsys: c_int,
) -> c_int {
    guard(|| {
        olog::init();
        c_int::from(log_level(level) <= olog::host_max_level())
    })
}

/// `fi_log_ready@FABRIC_1.6`: as [`fi_log_enabled`]; `showtime` is not used.
///
/// # Safety
/// As [`fi_log_enabled`].
#[no_mangle]
pub unsafe extern "C" fn fi_log_ready(
    prov: *const c_void,
    level: c_int,
    subsys: c_int,
    _showtime: *mut u64,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { fi_log_enabled(prov, level, subsys) }
}

/// `fi_log@FABRIC_1.0` after the shim formatted the message.
///
/// # Safety
/// `prov` is null or a valid `struct fi_provider` with a null or valid name; `func` and `msg` null or valid strings.
#[no_mangle]
pub unsafe extern "C" fn ofi_capi_log(
    prov: *const c_void,
    level: c_int,
    subsys: c_int,
    func: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    guard(|| {
        olog::init();
        // SAFETY: the caller's contract.
        let (prov, func, msg) = unsafe { (provider_name(prov), opt_str(func), opt_str(msg)) };
        let text = format!(
            "{}():{line} {}",
            func.unwrap_or_default(),
            msg.unwrap_or_default().trim_end()
        );
        olog::emit_flat(
            log_level(level),
            prov.as_deref().unwrap_or("core"),
            subsys_name(subsys),
            &text,
        );
    })
}
