//! libfabric.so.1 over ofi-rs: the C ABI of libfabric 1.17.
//!
//! This crate builds a static library that `scripts/build-capi.sh` links into
//! `libfabric.so.1` (SONAME `libfabric.so.1`, the version nodes `FABRIC_1.0` …
//! `FABRIC_1.6` of `libfabric.map`, each symbol at the default version the C library
//! gives it). Existing C programs then run on ofi-rs with `LD_LIBRARY_PATH` pointing at
//! it: every in-tree provider, the plugins of `FI_PROVIDER_PATH` and the hooks of
//! `FI_HOOK` work as they do for Rust programs. docs/CAPI.md is the user's page.
//!
//! # Modules
//!
//! - [`info`]: `struct fi_info` lists in the C layout, built from and read into
//!   [`ofi::Info`], freed and duplicated the C way;
//! - [`fid`]: `struct fid` and `struct fi_ops`;
//! - [`entry`]: the exported functions (`fi_getinfo`, `fi_freeinfo`, `fi_dupinfo`,
//!   `fi_fabric`, `fi_version`, `fi_strerror`, `fi_open`);
//! - [`obj`]: the C object wrapper, `fi_fabric`, fabric, domain and MR tables;
//! - [`queues`]: the domain table, CQs, EQs and counters;
//! - [`av`]: address vectors;
//! - [`sets`]: wait sets and poll sets;
//! - [`endpoint`]: active and passive endpoints, with the data tables generated from
//!   the one list of operations;
//! - [`tostr`]: `fi_tostr` and `fi_tostr_r`;
//! - [`params`]: `fi_param_*`, `fi_getparams`, `fi_freeparams` and `fi_log*`.
//!
//! `src/shim.c` holds what Rust cannot write: the variadic `fi_log` and
//! `fi_param_define`, and the `.symver` bindings of the symbols exported in several
//! versions.
//!
//! # Invariants
//!
//! - No panic crosses the C boundary: every exported function and every table slot runs
//!   its body in [`guard`], which turns a panic into `-FI_EOTHER` (or null, or nothing,
//!   by the return type) after logging it — except the data slots, whose own code cannot
//!   panic and whose provider calls catch panics themselves (see [`endpoint`]).
//! - Errors are the negative `FI_*` codes of `<rdma/fi_errno.h>`.
//! - Memory handed to the program (lists, strings, parameter arrays) comes from the C
//!   allocator, so the program may `free` parts of it as the C API allows.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

pub mod av;
pub mod contexts;
pub mod endpoint;
pub mod entry;
pub mod fid;
pub mod info;
pub mod obj;
pub mod params;
pub mod queues;
pub mod sets;
pub mod tostr;
pub mod trigger;

/// `FI_EOTHER`: the code a caught panic becomes.
pub const FI_EOTHER: c_int = 256;

/// What an exported function returns when its body panicked.
pub trait PanicValue {
    /// The value returned after a panic.
    fn on_panic() -> Self;
}

impl PanicValue for c_int {
    fn on_panic() -> Self {
        -FI_EOTHER
    }
}

impl PanicValue for isize {
    fn on_panic() -> Self {
        -(FI_EOTHER as isize)
    }
}

impl PanicValue for u64 {
    fn on_panic() -> Self {
        0
    }
}

impl PanicValue for () {
    fn on_panic() -> Self {}
}

impl<T> PanicValue for *mut T {
    fn on_panic() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> PanicValue for *const T {
    fn on_panic() -> Self {
        std::ptr::null()
    }
}

/// Runs `f`, turning a panic into [`PanicValue::on_panic`] (logged as an error).
pub fn guard<R: PanicValue>(f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            // Logging itself must not unwind out of here.
            let _ = catch_unwind(|| {
                ofi::ofi_error!("core", "core", "libfabric.so.1: caught a panic: {what}");
            });
            R::on_panic()
        }
    }
}

/// [`guard`] for a body that leaves early with `Err(value)`, so that it can use `?`:
/// the value is what the function returns ([`or_status`] turns an ofi error into one).
pub fn guard_try<R: PanicValue>(f: impl FnOnce() -> Result<R, R>) -> R {
    guard(|| f().unwrap_or_else(|early| early))
}

/// An ofi result with its error as the C status ([`status`]), for `?` in [`guard_try`].
pub fn or_status<T>(r: ofi::Result<T>) -> Result<T, c_int> {
    r.map_err(|e| status(&e))
}

/// The C status of an error (`-FI_x`).
pub fn status(e: &ofi::Error) -> c_int {
    e.to_status() as c_int
}

/// A process-lifetime C string with the text `s` (the same pointer for the same text):
/// for the strings the C API returns without transferring ownership (`fi_strerror`,
/// `fi_param_get` of a string). An interior NUL cuts the text.
pub fn interned(s: &str) -> &'static CStr {
    static TABLE: Mutex<Option<HashMap<String, &'static CStr>>> = Mutex::new(None);
    let mut guard = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let table = guard.get_or_insert_with(HashMap::new);
    if let Some(c) = table.get(s) {
        return c;
    }
    let text = s.split('\0').next().unwrap_or("");
    let leaked: &'static CStr =
        Box::leak(CString::new(text).unwrap_or_default().into_boxed_c_str());
    table.insert(s.to_owned(), leaked);
    leaked
}

/// The pointer form of [`interned`].
pub fn interned_ptr(s: &str) -> *const c_char {
    interned(s).as_ptr()
}
