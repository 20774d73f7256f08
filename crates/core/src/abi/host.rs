//! The host-table client: [`Host`], a provider's view of the host table, and which
//! table this copy of the core talks to.
//!
//! The host table carries the log sink, parameter declaration and lookup, getinfo over
//! the host's providers (for layering: core providers only), fabric open through
//! the host's registry, and (minor 2) `hook_inner`: the fabric a hook provider being
//! opened wraps ([`Host::hook_inner_fabric`]). Its implementation is the host's
//! (`ofi_host::host_table`, over the registry and the parameter store); this module
//! only calls it, and offers the host the pieces of serving it that touch the core's
//! object bookkeeping (`serve_*`).
//!
//! Which table ([`current_table`]):
//! - in an application process, `ofi-host` installs its table with
//!   [`install_process_host`] before it initialises any provider; linked-in providers
//!   reach it through the same [`Host`] calls a plugin makes (one path);
//! - inside a plugin (its own copy of `ofi-core`, no host code), the plugin's init
//!   installs the table its host handed over, and a log forwarder to the host's sink;
//! - before either, a detached table answers: log events go to this copy's `tracing`,
//!   parameters read as unset, layering calls fail with `FI_ENOSYS`.
//!
//! Invariant: the table pointer is set at most once and never freed (tables are
//! `'static`). Every slot catches panics (a panic becomes `FI_EOTHER`). Nothing here
//! panics.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

use crate::abi::object::{ctl, Closer, Node, ERR_CAP};
use crate::abi::raw::{info_from_raw, ErrBuf, RawInfo, RawInfoBox, RawStr};
use crate::abi::tables::{call_slot, HostTable};
use crate::abi::wire::{
    fill_result, free_result, outcome_from_raw, request_from_raw, RawGetinfoRequest,
    RawGetinfoResult, RawHostFabric, RequestBox,
};
use crate::attr::Info;
use crate::error::{Errno, Error, Result};
use crate::fabric::Fabric;
use crate::getinfo::{GetinfoOutcome, GetinfoRequest};
use crate::param::ParamType;
use crate::provider::{param_type_from_raw, param_type_to_raw};

/// The table of a process without a host: what this copy offers before (or without)
/// `ofi-host` installing the process's host table. Log events are re-emitted into this
/// copy's `tracing`; parameters are accepted and read as unset (providers use their
/// built-in defaults); getinfo, fabric open and `hook_inner` fail with `FI_ENOSYS`.
static DETACHED: HostTable = HostTable {
    size: std::mem::size_of::<HostTable>(),
    log: crate::log::host_log_sink,
    log_level: d_log_level,
    param_declare: d_param_declare,
    param_get_str: d_param_get_str,
    param_get_int: d_param_get_int,
    param_get_size: d_param_get_size,
    param_get_bool: d_param_get_bool,
    getinfo: d_getinfo,
    free_getinfo: serve_free_getinfo,
    open_fabric: d_open_fabric,
    fabric_close: d_fabric_close,
    fabric_release: d_fabric_release,
    hook_inner: d_hook_inner,
};

/// The host table this copy talks to (null: [`DETACHED`]). Set once: by the host
/// crate in an application process ([`install_process_host`]), or by a plugin's init
/// with the table its host handed over.
static INSTALLED: AtomicPtr<HostTable> = AtomicPtr::new(std::ptr::null_mut());

/// In an application process: make `table` the host table of this process, the one
/// [`current_table`] returns and [`ProviderHandle::init`](crate::provider::ProviderHandle::init)
/// hands to providers. `ofi-host` calls this before it initialises any provider.
/// Returns true if `table` is installed (now or before); false if another table was
/// installed first (it stays).
pub fn install_process_host(table: &'static HostTable) -> bool {
    let want = table as *const HostTable as *mut HostTable;
    match INSTALLED.compare_exchange(
        std::ptr::null_mut(),
        want,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => true,
        Err(already) => already == want,
    }
}

/// Install a foreign host table (inside a plugin). Returns true if it is foreign and
/// was installed now; false if it is this copy's current table (a linked-in provider
/// initialised by its own process's host) or one was installed already.
///
/// # Safety
/// `table` must point to a host table that stays valid for the life of the process.
pub(crate) unsafe fn install(table: *const HostTable) -> bool {
    if std::ptr::eq(table, current_table()) {
        return false;
    }
    INSTALLED
        .compare_exchange(
            std::ptr::null_mut(),
            table as *mut HostTable,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
}

/// The host table this copy talks to: the installed one (the process's host, or inside
/// a plugin the table its host handed over), else the detached table.
pub fn current_table() -> &'static HostTable {
    let p = INSTALLED.load(Ordering::Acquire);
    if p.is_null() {
        &DETACHED
    } else {
        // SAFETY: only `install` / `install_process_host` store here, with a table
        // valid for the process's life.
        unsafe { &*p }
    }
}

/// Whether a host table has been installed in this copy (false: the detached table answers).
pub fn has_host() -> bool {
    !INSTALLED.load(Ordering::Acquire).is_null()
}

/// A provider's view of the host: parameters, layering getinfo and fabric open.
/// Linked-in and plugin providers use it the same way. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Host {
    table: &'static HostTable,
    prov: &'static str,
}

impl Host {
    /// The host of this copy of the core, acting for provider `prov` (whose parameters
    /// [`Host::declare_param`] and the `param_*` readers address).
    pub fn for_provider(prov: &'static str) -> Host {
        Host {
            table: current_table(),
            prov,
        }
    }

    /// The host as the core itself sees it (parameters of the core, prefix `FI_`).
    pub fn current() -> Host {
        Host {
            table: current_table(),
            prov: "",
        }
    }

    pub(crate) fn with_table(table: &'static HostTable, prov: &'static str) -> Host {
        Host { table, prov }
    }

    fn prov_raw(&self) -> RawStr {
        if self.prov.is_empty() {
            RawStr::NONE
        } else {
            RawStr::from_text(self.prov)
        }
    }

    /// Declare one of the provider's parameters: environment variable
    /// `FI_<PROV>_<NAME>`, then `plugins.toml`, then `default`.
    pub fn declare_param(
        &self,
        name: &str,
        ty: ParamType,
        help: &str,
        default: Option<&str>,
    ) -> Result<()> {
        let t = self.table;
        let (p, n, h, d) = (
            self.prov_raw(),
            RawStr::from_text(name),
            RawStr::from_text(help),
            RawStr::from_opt(default),
        );
        // SAFETY: the host table is valid for the process; the strings live across the call.
        ctl(|eb| unsafe {
            call_slot!(
                t,
                HostTable.param_declare(p, n, param_type_to_raw(ty), h, d, eb)
            )
        })
    }

    /// A parameter's text (`None` if unset).
    pub fn param_str(&self, name: &str) -> Result<Option<String>> {
        let t = self.table;
        let (p, n) = (self.prov_raw(), RawStr::from_text(name));
        let mut cap = 256;
        loop {
            let mut buf = vec![0u8; cap];
            let mut len = 0usize;
            let mut msg = [0u8; ERR_CAP];
            let mut eb = ErrBuf::new(&mut msg);
            // SAFETY: buffers live across the call and their sizes are passed.
            let rc = unsafe {
                call_slot!(
                    t,
                    HostTable.param_get_str(p, n, buf.as_mut_ptr(), cap, &mut len, &mut eb)
                )
            };
            match rc {
                0 => return Ok(None),
                1 if len > cap => cap = len,
                1 => {
                    buf.truncate(len);
                    return String::from_utf8(buf).map(Some).map_err(|_| {
                        Error::new(Errno::EINVAL, format!("parameter {name}: not UTF-8"))
                    });
                }
                rc => return Err(crate::abi::object::status_error(rc as isize, &eb)),
            }
        }
    }

    fn param_typed<T: Default>(
        &self,
        name: &str,
        call: impl FnOnce(RawStr, RawStr, *mut T, *mut ErrBuf) -> i32,
    ) -> Result<Option<T>> {
        let mut out = T::default();
        let mut msg = [0u8; ERR_CAP];
        let mut eb = ErrBuf::new(&mut msg);
        match call(self.prov_raw(), RawStr::from_text(name), &mut out, &mut eb) {
            0 => Ok(None),
            1 => Ok(Some(out)),
            rc => Err(crate::abi::object::status_error(rc as isize, &eb)),
        }
    }

    /// An Int parameter.
    pub fn param_int(&self, name: &str) -> Result<Option<i64>> {
        let t = self.table;
        // SAFETY: pointers live across the call.
        self.param_typed(name, |p, n, o, e| unsafe {
            call_slot!(t, HostTable.param_get_int(p, n, o, e))
        })
    }

    /// A Size parameter.
    pub fn param_size(&self, name: &str) -> Result<Option<usize>> {
        let t = self.table;
        // SAFETY: pointers live across the call.
        self.param_typed(name, |p, n, o, e| unsafe {
            call_slot!(t, HostTable.param_get_size(p, n, o, e))
        })
    }

    /// A Bool parameter.
    pub fn param_bool(&self, name: &str) -> Result<Option<bool>> {
        let t = self.table;
        // SAFETY: pointers live across the call.
        let v: Option<u8> = self.param_typed(name, |p, n, o, e| unsafe {
            call_slot!(t, HostTable.param_get_bool(p, n, o, e))
        })?;
        Ok(v.map(|b| b != 0))
    }

    fn getinfo_raw(&self, req: &GetinfoRequest, core_only: bool) -> GetinfoOutcome {
        let t = self.table;
        let rb = RequestBox::new(req);
        let mut out = RawGetinfoResult::empty();
        // SAFETY: the request and result live across the call.
        let rc = unsafe {
            call_slot!(
                t,
                HostTable.getinfo(rb.as_ptr(), core_only as u32, &mut out)
            )
        };
        let outcome = if rc != 0 {
            GetinfoOutcome {
                error: Some(Error::from_status(rc as isize)),
                ..GetinfoOutcome::default()
            }
        } else {
            // SAFETY: the host filled `out` and keeps it until free_getinfo.
            unsafe { outcome_from_raw(&out, "host") }
        };
        // SAFETY: return the result to the host, which allocated it.
        unsafe { call_slot!(t, HostTable.free_getinfo(&mut out)) };
        outcome
    }

    /// getinfo over the host's core providers only: what a utility provider layers on.
    pub fn getinfo_core(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        self.getinfo_raw(req, true)
    }

    /// getinfo over every provider of the host (as an application would call it).
    pub fn getinfo_all(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        self.getinfo_raw(req, false)
    }

    /// Open a fabric through the host's registry (for layering): `info` is a result of
    /// [`Host::getinfo_core`].
    pub fn open_fabric(&self, info: &Info) -> Result<Fabric> {
        let t = self.table;
        let ib = RawInfoBox::new(info);
        let mut out = RawHostFabric::empty();
        // SAFETY: `ib` and `out` live across the call.
        ctl(|eb| unsafe { call_slot!(t, HostTable.open_fabric(ib.as_ptr(), 0, &mut out, eb)) })?;
        // SAFETY: `out` was filled by the host's open_fabric.
        unsafe { self.host_fabric(out, info.prov_name(), "open_fabric") }
    }

    /// For a hook provider, inside its [`Provider::fabric`](crate::provider::Provider::fabric):
    /// the fabric it wraps (the real provider's, or the previous hook's when several
    /// are stacked), handed over once per hook fabric open. `FI_ENOENT` when the host
    /// is not opening a hook's fabric on this thread (or it was taken already);
    /// `FI_ENOSYS` from a host older than interface minor 2.
    pub fn hook_inner_fabric(&self, prov: &str) -> Result<Fabric> {
        let t = self.table;
        let mut out = RawHostFabric::empty();
        // SAFETY: `out` lives across the call.
        ctl(|eb| unsafe { call_slot!(t, HostTable.hook_inner(&mut out, eb)) })?;
        // SAFETY: `out` was filled by the host's hook_inner.
        unsafe { self.host_fabric(out, prov, "hook_inner") }
    }

    /// Wrap a fabric the host handed over.
    ///
    /// # Safety
    /// `out` was filled by a successful `open_fabric` / `hook_inner` of `self.table`.
    unsafe fn host_fabric(&self, out: RawHostFabric, prov: &str, what: &str) -> Result<Fabric> {
        if out.obj.is_null() || out.ops.is_null() || out.keep.is_null() {
            return Err(Error::new(
                Errno::EOTHER,
                format!("host {what} returned no fabric"),
            ));
        }
        let prov: Arc<str> = prov.into();
        let node = Node::root(
            out.family,
            prov,
            Closer::HostFabric {
                host: self.table,
                keep: out.keep,
            },
            None,
        );
        // SAFETY: the host returned a fabric object and its table, valid while `keep`
        // is held (by `node`).
        Ok(unsafe { Fabric::from_raw(out.obj, out.ops, node) })
    }
}

// ---------------------------------------------------------------------------------------
// Serving the table: helpers for the host's implementation (`ofi-host`) and the detached
// table of this copy.

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

/// Run the body of a host-table slot: `Ok(v)` returns `v`, an error is written to `err`
/// and returned as `-FI_x`, a panic becomes `-FI_EOTHER` with a message (logged).
/// Nothing unwinds out of it.
///
/// # Safety
/// `err` is null or a valid [`ErrBuf`] (the host table's contract).
pub unsafe fn serve_slot(err: *mut ErrBuf, what: &str, f: impl FnOnce() -> Result<i32>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            // SAFETY: `err` is null or the caller's buffer (this function's contract).
            unsafe { ErrBuf::write(err, &e.to_string()) };
            e.code().to_status()
        }
        Err(p) => {
            let msg = format!("panic in host {what}: {}", panic_text(&*p));
            tracing::error!(target: "ofi", prov = "core", subsys = "core", "{msg}");
            // SAFETY: as above.
            unsafe { ErrBuf::write(err, &msg) };
            Errno::EOTHER.to_status()
        }
    }
}

/// Hand a fabric to the other side of the host table: its object, table, family and
/// a hold released by [`serve_fabric_release`].
///
/// # Safety
/// `out` is null or valid for writes.
pub unsafe fn serve_give_fabric(fabric: Fabric, out: *mut RawHostFabric) -> Result<i32> {
    if out.is_null() {
        return Err(Error::new(Errno::EINVAL, "fabric out-parameter: null"));
    }
    let (obj, ops, node) = fabric.into_raw_parts();
    let family = node.family();
    let keep = Box::into_raw(Box::new(node)) as *mut c_void;
    // SAFETY: `out` non-null and valid for writes (contract).
    unsafe {
        (*out).obj = obj;
        (*out).ops = ops;
        (*out).family = family;
        (*out).keep = keep;
    }
    Ok(0)
}

/// The `getinfo` slot's tail: write `outcome` into `out` (released by
/// [`serve_free_getinfo`]).
///
/// # Safety
/// `out` is null or valid for writes.
pub unsafe fn serve_getinfo_result(
    outcome: &GetinfoOutcome,
    out: *mut RawGetinfoResult,
) -> Result<i32> {
    if out.is_null() {
        return Err(Error::new(Errno::EINVAL, "getinfo: null result"));
    }
    // SAFETY: `out` valid for writes (contract); freed by serve_free_getinfo.
    unsafe { fill_result(outcome, out) };
    Ok(0)
}

/// Decode a getinfo request received through the host table.
///
/// # Safety
/// `req` is null or a request valid for the call.
pub unsafe fn serve_getinfo_request(req: *const RawGetinfoRequest) -> Result<GetinfoRequest> {
    // SAFETY: forwarded.
    unsafe { request_from_raw(req) }
}

/// Decode an `Info` received through the host table.
///
/// # Safety
/// `info` is null or valid for the call.
pub unsafe fn serve_info(info: *const RawInfo) -> Result<Info> {
    // SAFETY: forwarded.
    unsafe { info_from_raw(info) }
}

/// The `free_getinfo` slot: release a result filled by [`serve_getinfo_result`].
///
/// # Safety
/// `out` was filled by [`serve_getinfo_result`] of this copy and not freed yet.
pub unsafe extern "C" fn serve_free_getinfo(out: *mut RawGetinfoResult) -> i32 {
    let body = || {
        // SAFETY: `out` was filled by serve_getinfo_result (contract).
        unsafe { free_result(out) };
        Ok(0)
    };
    // SAFETY: null error buffer.
    unsafe { serve_slot(std::ptr::null_mut(), "free_getinfo", body) }
}

/// The `fabric_close` slot: close a fabric handed over by [`serve_give_fabric`].
///
/// # Safety
/// `keep` came from [`serve_give_fabric`] and is not released; `err` null or valid.
pub unsafe extern "C" fn serve_fabric_close(keep: *mut c_void, err: *mut ErrBuf) -> i32 {
    let body = || {
        if keep.is_null() {
            return Err(Error::new(Errno::EINVAL, "fabric_close: null"));
        }
        // SAFETY: `keep` came from serve_give_fabric and is not released (contract).
        let node = unsafe { &*(keep as *const Arc<Node>) };
        node.close()?;
        Ok(0)
    };
    // SAFETY: `err` per contract.
    unsafe { serve_slot(err, "fabric_close", body) }
}

/// The `fabric_release` slot: drop the hold of [`serve_give_fabric`].
///
/// # Safety
/// `keep` is null or came from [`serve_give_fabric`]; released once.
pub unsafe extern "C" fn serve_fabric_release(keep: *mut c_void) -> i32 {
    let body = || {
        if !keep.is_null() {
            // SAFETY: `keep` came from Box::into_raw in serve_give_fabric; once.
            drop(unsafe { Box::from_raw(keep as *mut Arc<Node>) });
        }
        Ok(0)
    };
    // SAFETY: null error buffer.
    unsafe { serve_slot(std::ptr::null_mut(), "fabric_release", body) }
}

/// The boundary number of a parameter type (host-table `ty` argument).
pub fn param_type_raw(ty: ParamType) -> u32 {
    param_type_to_raw(ty)
}

/// The parameter type of a boundary number, `FI_EINVAL` for an unknown one.
pub fn param_type_of_raw(ty: u32) -> Result<ParamType> {
    param_type_from_raw(ty)
        .ok_or_else(|| Error::new(Errno::EINVAL, format!("parameter type {ty} unknown")))
}

// The detached table's slots.

const NO_HOST: &str = "no host in this process (an application links `ofi-host` through `ofi`)";

/// The detached host table's `log_level` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_log_level() -> i32 {
    catch_unwind(crate::log::host_max_level).map_or(2, i32::from)
}

/// The detached host table's `param_declare` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_param_declare(
    _prov: RawStr,
    _name: RawStr,
    ty: u32,
    _help: RawStr,
    _default: RawStr,
    err: *mut ErrBuf,
) -> i32 {
    // SAFETY: `err` per the table's contract.
    unsafe { serve_slot(err, "param_declare", || param_type_of_raw(ty).map(|_| 0)) }
}

/// The detached host table's `param_get_str` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_param_get_str(
    _prov: RawStr,
    _name: RawStr,
    _buf: *mut u8,
    _cap: usize,
    _len: *mut usize,
    _err: *mut ErrBuf,
) -> i32 {
    0
}

/// The detached host table's `param_get_int` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_param_get_int(
    _prov: RawStr,
    _name: RawStr,
    _out: *mut i64,
    _err: *mut ErrBuf,
) -> i32 {
    0
}

/// The detached host table's `param_get_size` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_param_get_size(
    _prov: RawStr,
    _name: RawStr,
    _out: *mut usize,
    _err: *mut ErrBuf,
) -> i32 {
    0
}

/// The detached host table's `param_get_bool` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_param_get_bool(
    _prov: RawStr,
    _name: RawStr,
    _out: *mut u8,
    _err: *mut ErrBuf,
) -> i32 {
    0
}

/// The detached host table's `getinfo` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_getinfo(
    _req: *const RawGetinfoRequest,
    _core_only: u32,
    out: *mut RawGetinfoResult,
) -> i32 {
    let outcome = GetinfoOutcome {
        error: Some(Error::new(Errno::ENOSYS, format!("getinfo: {NO_HOST}"))),
        ..GetinfoOutcome::default()
    };
    // SAFETY: `out` null or valid for writes (the table's contract).
    let body = || unsafe { serve_getinfo_result(&outcome, out) };
    // SAFETY: null error buffer.
    unsafe { serve_slot(std::ptr::null_mut(), "getinfo", body) }
}

/// The detached host table's `open_fabric` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_open_fabric(
    _info: *const RawInfo,
    _context: usize,
    _out: *mut RawHostFabric,
    err: *mut ErrBuf,
) -> i32 {
    // SAFETY: `err` per the table's contract.
    unsafe {
        serve_slot(err, "open_fabric", || {
            Err(Error::new(Errno::ENOSYS, format!("open_fabric: {NO_HOST}")))
        })
    }
}

/// The detached host table's `hook_inner` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_hook_inner(_out: *mut RawHostFabric, err: *mut ErrBuf) -> i32 {
    // SAFETY: `err` per the table's contract.
    unsafe {
        serve_slot(err, "hook_inner", || {
            Err(Error::new(Errno::ENOSYS, format!("hook_inner: {NO_HOST}")))
        })
    }
}

/// The detached host table's `fabric_close` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_fabric_close(keep: *mut c_void, err: *mut ErrBuf) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { serve_fabric_close(keep, err) }
}

/// The detached host table's `fabric_release` slot.
///
/// # Safety
/// Every pointer argument valid as the [`HostTable`] slot's contract says.
unsafe extern "C" fn d_fabric_release(keep: *mut c_void) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { serve_fabric_release(keep) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_the_provider_and_hides_the_slots() {
        let text = format!("{:?}", Host::for_provider("tcp"));
        assert!(text.contains("prov: \"tcp\""), "{text}");
        assert!(text.contains("HostTable { size: "), "{text}");
        assert!(!text.contains("param_get_str"), "{text}");
    }
}
