//! Adapters: turn a safe provider implementation into the C-ABI tables.
//!
//! For a provider `P` with fabric type `F`, [`ProvAdapt::<P>::TABLE`] is its root table
//! and [`Adapt::<F>`] holds one `'static` table per object class (associated consts, so
//! every slot is a monomorphised `extern "C" fn slot<F>(...)` and a data call reaches the
//! provider's method through one indirect call, without `dyn`).
//!
//! # Object pointers
//!
//! Every object the adapters hand out is a `Box` turned into a raw pointer: `Box<T>` for
//! most classes, `Box<CqBox<T>>` for CQs (the format is kept next to the object) and
//! `Box<EqBox<T>>` for EQs (connection infos and error data handed out are kept until
//! released). The close slot calls the object's `close` hook and, if it succeeds,
//! drops the box. The host guarantees (see [`crate::abi::object`]) that a pointer
//! passed to a slot came from the same family's adapter and is still open; that is what
//! makes the casts below sound.
//!
//! # Panics
//!
//! Every slot runs its body under `catch_unwind`; a panic is logged with
//! `tracing::error!`, written to the call's message buffer when it has one, and
//! becomes `-FI_EOTHER`. Conversions of raw arguments that fail (an unknown enum value,
//! a null array with a non-zero count) are `-FI_EINVAL`.

use std::any::Any;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use crate::abi::raw::{
    info_from_raw, rx_attr_from_raw, tx_attr_from_raw, AtomicAttr, CqErrEntry, EqCmEntry, EqEntry,
    EqErrEntry, ErrBuf, FidClass, Iov, Obj, RawAddr, RawAvAttr, RawCntrAttr, RawCqAttr, RawEp,
    RawEqAttr, RawFidRef, RawInfo, RawInfoBox, RawMr, RawMrAttr, RawObj, RawRxAttr, RawStr,
    RawTxAttr, RawWaitAttr,
};
use crate::abi::tables::{
    AtomicTable, AvTable, CmTable, CntrTable, CqTable, DomainTable, EpTable, EqTable, FabricTable,
    HostTable, MrTable, MsgTable, PepTable, ProviderTable, RmaTable, SlotRet, TaggedTable,
    WaitTable,
};
use crate::abi::wire::{
    fill_result, free_result, request_from_raw, RawGetinfoRequest, RawGetinfoResult,
};
use crate::abi::ProviderInstance;
use crate::av::AvAttr;
use crate::cntr::CntrAttr;
use crate::cq::{CqAttr, CqBuf};
use crate::enums::{AtomicOp, CqFormat, CqWaitCond, Datatype, EqEvent, HmemIface, WaitObj};
use crate::eq::{EqAttr, Event};
use crate::error::{Errno, Error, Result};
use crate::flags::OpFlags;
use crate::getinfo::GetinfoOutcome;
use crate::mr::MrAttr;
use crate::provider::{
    AvOf, AvOps, BindTarget, CntrOf, CntrOps, CqOf, CqOps, DomainOps, EndpointOps, EpOf, EqOf,
    EqOps, FabricOps, Host, MrBindTarget, MrOf, MrOps, PassiveEndpointOps, Provider, TryWaitRef,
    WaitOf, WaitOps,
};
use crate::wait::WaitAttr;

// ---------------------------------------------------------------------------------------
// Guards and conversions.

fn panic_text(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string())
}

#[cold]
fn report_panic(what: &str, p: Box<dyn Any + Send>) -> String {
    let msg = format!("provider panicked in {what}: {}", panic_text(&*p));
    tracing::error!(target: "ofi", prov = "core", subsys = "core", "{msg}");
    msg
}

/// Run a slot body; a panic becomes `-FI_EOTHER`.
#[inline(always)]
fn guard<R: SlotRet>(what: &'static str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            report_panic(what, p);
            R::from_errno(Errno::EOTHER.0)
        }
    }
}

/// Run a control slot body; an error's message (or a panic's) goes to `err`.
fn guard_ctl(err: *mut ErrBuf, what: &'static str, f: impl FnOnce() -> Result<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            if !e.message().is_empty() {
                // SAFETY: `err` is null or the caller's message buffer (table contract).
                unsafe { ErrBuf::write(err, e.message()) };
            }
            e.code().to_status()
        }
        Err(p) => {
            let msg = report_panic(what, p);
            // SAFETY: as above.
            unsafe { ErrBuf::write(err, &msg) };
            Errno::EOTHER.to_status()
        }
    }
}

/// Call `f` (keeps slot bodies that use `?` readable).
#[inline(always)]
fn run<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    f()
}

#[inline(always)]
fn st(r: Result<()>) -> isize {
    match r {
        Ok(()) => 0,
        Err(e) => -(e.code().0 as isize),
    }
}

#[inline(always)]
fn st32(r: Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.code().to_status(),
    }
}

#[inline(always)]
fn cnt(r: Result<usize>) -> isize {
    match r {
        Ok(n) => n.min(isize::MAX as usize) as isize,
        Err(e) => -(e.code().0 as isize),
    }
}

fn einval<T>(msg: &'static str) -> Result<T> {
    Err(Error::new(Errno::EINVAL, msg))
}

/// A slice from pointer + count; null or 0 → empty.
///
/// # Safety
/// A non-null `p` must be valid for `n` reads for `'a`.
#[inline(always)]
unsafe fn sl<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: valid by the caller's contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// Like [`sl`] but a null pointer with a non-zero count is an error.
///
/// # Safety
/// As [`sl`].
#[inline(always)]
unsafe fn sl_req<'a, T>(p: *const T, n: usize, what: &'static str) -> Result<&'a [T]> {
    if p.is_null() && n != 0 {
        return einval(what);
    }
    // SAFETY: forwarded.
    Ok(unsafe { sl(p, n) })
}

/// A mutable slice from pointer + count; a null pointer with a non-zero count is an
/// error.
///
/// # Safety
/// A non-null `p` must be valid for `n` writes for `'a`, not aliased.
unsafe fn sl_mut<'a, T>(p: *mut T, n: usize, what: &'static str) -> Result<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return einval(what);
    }
    // SAFETY: valid by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// The object behind a pointer this adapter boxed.
///
/// # Safety
/// `p` must come from `Box::<T>::into_raw` in this module and not be freed.
#[inline(always)]
unsafe fn ob<'a, T>(p: Obj) -> &'a T {
    // SAFETY: by the caller's contract.
    unsafe { &*(p as *const T) }
}

/// Box `v` and store it as an opened object with table `ops`.
///
/// # Safety
/// `out` must be valid for writes.
unsafe fn put_obj<T>(out: *mut RawObj, v: T, ops: *const c_void) {
    // SAFETY: checked non-null by the callers before opening; valid by contract.
    unsafe {
        (*out).obj = Box::into_raw(Box::new(v)) as Obj;
        (*out).ops = ops;
    }
}

fn need_out<T>(out: *mut T) -> Result<()> {
    if out.is_null() {
        einval("null out-parameter")
    } else {
        Ok(())
    }
}

fn datatype(raw: u32) -> Result<Datatype> {
    Datatype::from_raw(raw).ok_or_else(|| Error::new(Errno::EINVAL, "unknown atomic datatype"))
}

fn atomic_op(raw: u32) -> Result<AtomicOp> {
    AtomicOp::from_raw(raw).ok_or_else(|| Error::new(Errno::EINVAL, "unknown atomic operation"))
}

/// Copy `v` to a caller's buffer with in/out length; `-FI_ETOOSMALL` (with the needed
/// length) if it does not fit, after copying what fits.
///
/// # Safety
/// `len` valid for read/write; `buf` valid for `*len` bytes of writes.
unsafe fn copy_out(v: &[u8], buf: *mut u8, len: *mut usize) -> Result<()> {
    if len.is_null() {
        return einval("null length");
    }
    // SAFETY: by the caller's contract.
    unsafe {
        let cap = *len;
        *len = v.len();
        let n = v.len().min(cap);
        if n > 0 {
            if buf.is_null() {
                return einval("null buffer");
            }
            std::ptr::copy_nonoverlapping(v.as_ptr(), buf, n);
        }
        if v.len() > cap {
            return Err(Error::code_only(Errno::ETOOSMALL));
        }
    }
    Ok(())
}

/// The error data of the last `readerr` of a CQ or EQ, kept by the adapter: handed out
/// as a pointer when the caller gave no buffer (valid until the next `readerr`), and
/// recognised by address when the caller passes it back to `strerror` (the C call
/// carries no length, so only data this adapter handed out can be passed on).
#[derive(Default)]
struct ErrData {
    /// The data, whole.
    data: Vec<u8>,
    /// The caller's buffer it was last copied into (address) and how many bytes.
    copied_to: usize,
    copied: usize,
}

impl ErrData {
    /// Deliver `data` by the fi_cq(3)/fi_eq(3) rules: into the caller's buffer (up to
    /// `user_len` bytes) when `user_buf` is non-null and `user_len` > 0, else as a
    /// pointer to the kept copy (null when empty). Returns the `err_data` and
    /// `err_data_size` to report.
    ///
    /// # Safety
    /// A non-null `user_buf` with `user_len` > 0 must be valid for `user_len` bytes of
    /// writes.
    unsafe fn hand_out(
        &mut self,
        data: Vec<u8>,
        user_buf: *mut c_void,
        user_len: usize,
    ) -> (*mut c_void, usize) {
        self.data = data;
        if !user_buf.is_null() && user_len > 0 {
            let n = self.data.len().min(user_len);
            // SAFETY: `user_buf` valid for `user_len` >= n bytes (contract); our Vec
            // does not overlap the caller's buffer.
            unsafe { std::ptr::copy_nonoverlapping(self.data.as_ptr(), user_buf as *mut u8, n) };
            self.copied_to = user_buf as usize;
            self.copied = n;
            (user_buf, n)
        } else {
            self.copied_to = 0;
            self.copied = 0;
            if self.data.is_empty() {
                (std::ptr::null_mut(), 0)
            } else {
                (self.data.as_mut_ptr() as *mut c_void, self.data.len())
            }
        }
    }

    /// The bytes `p` stands for: the kept data when `p` is its address, what was copied
    /// when `p` is the caller's buffer it was copied into, else nothing (null or a
    /// pointer of unknown length, which is never read).
    fn lookup(&self, p: *const c_void) -> Vec<u8> {
        if p.is_null() || self.data.is_empty() {
            Vec::new()
        } else if std::ptr::eq(p as *const u8, self.data.as_ptr()) && self.copied_to == 0 {
            self.data.clone()
        } else if p as usize == self.copied_to {
            self.data[..self.copied].to_vec()
        } else {
            Vec::new()
        }
    }
}

/// A completion queue as this adapter boxes it: the provider's object plus the format
/// and wait condition it was opened with, and the error data it handed out.
pub struct CqBox<T> {
    inner: T,
    format: CqFormat,
    wait_cond: CqWaitCond,
    err_data: Mutex<ErrData>,
}

/// An event queue as this adapter boxes it: the provider's object plus what it handed
/// out and must keep until released (connection infos, error data).
pub struct EqBox<T> {
    inner: T,
    infos: Mutex<Vec<RawInfoBox>>,
    err_data: Mutex<ErrData>,
}

// ---------------------------------------------------------------------------------------
// Provider root and plugin init.

/// The root table of provider `P`.
pub struct ProvAdapt<P>(PhantomData<P>);

impl<P: Provider> ProvAdapt<P> {
    /// `P`'s provider table.
    pub const TABLE: &'static ProviderTable = &ProviderTable {
        size: std::mem::size_of::<ProviderTable>(),
        getinfo: prov_getinfo::<P>,
        free_getinfo: prov_free_getinfo::<P>,
        fabric: prov_fabric::<P>,
        cleanup: prov_cleanup::<P>,
    };
}

/// The entry's init for provider `P`: installs the host table and log forwarder when
/// running inside a plugin, runs `P::init`, returns the context and root table.
///
/// # Safety
/// `host` must be a host table valid for the life of the process; `out` valid for
/// writes of a `ProviderInstance`.
pub unsafe extern "C" fn plugin_init<P: Provider>(
    host: *const HostTable,
    out: *mut ProviderInstance,
) -> i32 {
    let err: *mut ErrBuf = if out.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: non-null and valid by contract.
        unsafe { &mut (*out).err }
    };
    guard_ctl(err, "init", || {
        if host.is_null() || out.is_null() {
            return einval("init: null host table or out-parameter");
        }
        // SAFETY: non-null; valid by contract.
        let size = unsafe { (*out).struct_size };
        if size < ProviderInstance::LAYOUT.size_for_minor(0) {
            return einval("init: ProviderInstance too small");
        }
        // SAFETY: the host table is valid for the life of the process (contract).
        let table: &'static HostTable = unsafe { &*host };
        if table.size < HostTable::LAYOUT.size_for_minor(0) {
            return einval("init: host table too small");
        }
        // SAFETY: as above.
        if unsafe { crate::abi::host::install(host) } {
            // We are a plugin with our own copy of the core: forward our log events.
            // SAFETY: a slot of the host's valid table.
            let level = unsafe { crate::abi::tables::call_slot!(table, HostTable.log_level()) };
            crate::log::install_plugin_forwarder_at(table.log, level.clamp(0, 5) as u8);
            // Our copy of std has a panic hook of its own, which would print to stderr
            // (with a backtrace under RUST_BACKTRACE) before the boundary catches the
            // panic. Send the report through the host's log instead: the boundary then
            // logs the failed call and returns FI_EOTHER. Only this plugin's panics
            // are affected; the host's hook is untouched.
            std::panic::set_hook(Box::new(|info| {
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                tracing::debug!(target: "ofi", prov = P::NAME, subsys = "core",
                    "panic{at}: {}", panic_text(info.payload()));
            }));
        }
        let h = Host::with_table(table, P::NAME);
        let prov = P::init(&h)?;
        let ctx = Box::into_raw(Box::new(prov)) as Obj;
        // SAFETY: `out` valid for writes (contract).
        unsafe {
            (*out).ctx = ctx;
            (*out).ops = ProvAdapt::<P>::TABLE;
        }
        Ok(())
    })
}

unsafe extern "C" fn prov_getinfo<P: Provider>(
    prov: Obj,
    req: *const RawGetinfoRequest,
    out: *mut RawGetinfoResult,
) -> i32 {
    guard("getinfo", || {
        if out.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: `req` valid for the call (contract).
        let outcome = match unsafe { request_from_raw(req) } {
            // SAFETY: `prov` is the provider plugin_init boxed.
            Ok(req) => unsafe { ob::<P>(prov) }.getinfo(&req),
            Err(e) => GetinfoOutcome {
                error: Some(e),
                ..GetinfoOutcome::default()
            },
        };
        // SAFETY: `out` valid for writes; released by prov_free_getinfo.
        unsafe { fill_result(&outcome, out) };
        0
    })
}

#[allow(clippy::extra_unused_type_parameters)]
unsafe extern "C" fn prov_free_getinfo<P: Provider>(_prov: Obj, out: *mut RawGetinfoResult) -> i32 {
    guard("free_getinfo", || {
        // SAFETY: filled by prov_getinfo of this copy (contract).
        unsafe { free_result(out) };
        0
    })
}

unsafe extern "C" fn prov_fabric<P: Provider>(
    prov: Obj,
    info: *const RawInfo,
    _context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric", || {
        need_out(out)?;
        // SAFETY: our boxed provider; `info` valid for the call (contract).
        let (p, info) = unsafe { (ob::<P>(prov), info_from_raw(info)?) };
        let f = p.fabric(&info)?;
        // SAFETY: `out` checked non-null.
        unsafe {
            put_obj(
                out,
                f,
                Adapt::<P::Fabric>::FABRIC as *const _ as *const c_void,
            )
        };
        Ok(())
    })
}

unsafe extern "C" fn prov_cleanup<P: Provider>(prov: Obj) -> i32 {
    guard("cleanup", || {
        if !prov.is_null() {
            // SAFETY: from Box::into_raw in plugin_init; the host calls cleanup once.
            drop(unsafe { Box::from_raw(prov as *mut P) });
        }
        0
    })
}

// ---------------------------------------------------------------------------------------
// The family tables.

/// Every object table of family `F` (the provider's fabric type).
pub struct Adapt<F>(PhantomData<F>);

impl<F: FabricOps> Adapt<F> {
    /// Fabric table.
    pub const FABRIC: &'static FabricTable = &FabricTable {
        size: std::mem::size_of::<FabricTable>(),
        close: close_fabric::<F>,
        domain: fab_domain::<F>,
        passive_ep: fab_pep::<F>,
        eq_open: fab_eq_open::<F>,
        wait_open: fab_wait_open::<F>,
        trywait: fab_trywait::<F>,
    };

    /// Domain table.
    pub const DOMAIN: &'static DomainTable = &DomainTable {
        size: std::mem::size_of::<DomainTable>(),
        close: close_domain::<F>,
        bind: dom_bind::<F>,
        endpoint: dom_endpoint::<F>,
        scalable_ep: dom_scalable_ep::<F>,
        cq_open: dom_cq_open::<F>,
        cntr_open: dom_cntr_open::<F>,
        av_open: dom_av_open::<F>,
        mr_reg: dom_mr_reg::<F>,
        mr_regv: dom_mr_regv::<F>,
        mr_regattr: dom_mr_regattr::<F>,
        query_atomic: dom_query_atomic::<F>,
        stx_ctx: dom_stx_ctx::<F>,
        srx_ctx: dom_srx_ctx::<F>,
    };

    /// Endpoint control table.
    pub const EP: &'static EpTable = &EpTable {
        size: std::mem::size_of::<EpTable>(),
        close: close_ep::<F>,
        bind: ep_bind::<F>,
        enable: ep_enable::<F>,
        control: ep_control::<F>,
        alias: ep_alias::<F>,
        cancel: ep_cancel::<F>,
        getopt: ep_getopt::<F>,
        setopt: ep_setopt::<F>,
        tx_ctx: ep_tx_ctx::<F>,
        rx_ctx: ep_rx_ctx::<F>,
        rx_size_left: ep_rx_size_left::<F>,
        tx_size_left: ep_tx_size_left::<F>,
        join: ep_join::<F>,
        mc_close: ep_mc_close::<F>,
    };

    /// Connection management table.
    pub const CM: &'static CmTable = &CmTable {
        size: std::mem::size_of::<CmTable>(),
        setname: ep_setname::<F>,
        getname: ep_getname::<F>,
        getpeer: ep_getpeer::<F>,
        connect: ep_connect::<F>,
        accept: ep_accept::<F>,
        shutdown: ep_shutdown::<F>,
    };

    /// Message table.
    pub const MSG: &'static MsgTable = <MsgTable as DataSlots<F>>::TABLE;

    /// Tagged message table.
    pub const TAGGED: &'static TaggedTable = <TaggedTable as DataSlots<F>>::TABLE;

    /// RMA table.
    pub const RMA: &'static RmaTable = <RmaTable as DataSlots<F>>::TABLE;

    /// Atomic table.
    pub const ATOMIC: &'static AtomicTable = <AtomicTable as DataSlots<F>>::TABLE;

    /// Passive endpoint table.
    pub const PEP: &'static PepTable = &PepTable {
        size: std::mem::size_of::<PepTable>(),
        close: close_pep::<F>,
        bind: pep_bind::<F>,
        listen: pep_listen::<F>,
        reject: pep_reject::<F>,
        getname: pep_getname::<F>,
        setname: pep_setname::<F>,
        getopt: pep_getopt::<F>,
        setopt: pep_setopt::<F>,
    };

    /// Completion queue table.
    pub const CQ: &'static CqTable = &CqTable {
        size: std::mem::size_of::<CqTable>(),
        close: close_cq::<F>,
        read: cq_read::<F>,
        readfrom: cq_readfrom::<F>,
        readerr: cq_readerr::<F>,
        sread: cq_sread::<F>,
        sreadfrom: cq_sreadfrom::<F>,
        signal: cq_signal::<F>,
        strerror: cq_strerror::<F>,
        wait_fd: cq_wait_fd::<F>,
    };

    /// Event queue table.
    pub const EQ: &'static EqTable = &EqTable {
        size: std::mem::size_of::<EqTable>(),
        close: close_eq::<F>,
        read: eq_read::<F>,
        readerr: eq_readerr::<F>,
        write: eq_write::<F>,
        sread: eq_sread::<F>,
        strerror: eq_strerror::<F>,
        wait_fd: eq_wait_fd::<F>,
        free_info: eq_free_info::<F>,
    };

    /// Counter table.
    pub const CNTR: &'static CntrTable = &CntrTable {
        size: std::mem::size_of::<CntrTable>(),
        close: close_cntr::<F>,
        read: cntr_read::<F>,
        readerr: cntr_readerr::<F>,
        add: cntr_add::<F>,
        set: cntr_set::<F>,
        adderr: cntr_adderr::<F>,
        seterr: cntr_seterr::<F>,
        wait: cntr_wait::<F>,
        wait_fd: cntr_wait_fd::<F>,
    };

    /// Address vector table.
    pub const AV: &'static AvTable = &AvTable {
        size: std::mem::size_of::<AvTable>(),
        close: close_av::<F>,
        bind: av_bind::<F>,
        insert: av_insert::<F>,
        insertsvc: av_insertsvc::<F>,
        insertsym: av_insertsym::<F>,
        remove: av_remove::<F>,
        lookup: av_lookup::<F>,
        straddr: av_straddr::<F>,
    };

    /// Memory region table.
    pub const MR: &'static MrTable = &MrTable {
        size: std::mem::size_of::<MrTable>(),
        close: close_mr::<F>,
        key: mr_key::<F>,
        desc: mr_desc::<F>,
        bind: mr_bind::<F>,
        refresh: mr_refresh::<F>,
        enable: mr_enable::<F>,
    };

    /// Wait set table.
    pub const WAIT: &'static WaitTable = &WaitTable {
        size: std::mem::size_of::<WaitTable>(),
        close: close_wait::<F>,
        wait: wait_wait::<F>,
        fd: wait_fd::<F>,
    };
}

// ---------------------------------------------------------------------------------------
// Close.

/// Close an object boxed as `T`: run its close hook, then drop the box.
///
/// # Safety
/// `obj` must be a `Box<T>` this adapter handed out, not yet closed; nothing uses it
/// after a successful close (host contract).
unsafe fn close_with<T>(obj: Obj, err: *mut ErrBuf, hook: impl FnOnce(&T) -> Result<()>) -> i32 {
    guard_ctl(err, "close", || {
        if obj.is_null() {
            return einval("close: null object");
        }
        // SAFETY: by this function's contract.
        hook(unsafe { ob::<T>(obj) })?;
        // SAFETY: as above; the host calls close once and never uses the object after.
        drop(unsafe { Box::from_raw(obj as *mut T) });
        Ok(())
    })
}

/// Defines the close slot of one class.
macro_rules! close_slot {
    ($name:ident, $t:ty, |$o:ident| $hook:expr) => {
        unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, err: *mut ErrBuf) -> i32 {
            // SAFETY: the host passes this table's own object and closes it once.
            unsafe { close_with::<$t>(obj, err, |$o| $hook) }
        }
    };
}

close_slot!(close_fabric, F, |o| FabricOps::close(o));
close_slot!(close_domain, F::Domain, |o| DomainOps::<F>::close(o));
close_slot!(close_ep, EpOf<F>, |o| EndpointOps::<F>::close(o));
close_slot!(close_pep, F::PassiveEp, |o| PassiveEndpointOps::<F>::close(
    o
));
close_slot!(close_cq, CqBox<CqOf<F>>, |o| CqOps::close(&o.inner));
close_slot!(close_eq, EqBox<EqOf<F>>, |o| EqOps::close(&o.inner));
close_slot!(close_cntr, CntrOf<F>, |o| CntrOps::close(o));
close_slot!(close_av, AvOf<F>, |o| AvOps::<F>::close(o));
close_slot!(close_mr, MrOf<F>, |o| MrOps::<F>::close(o));
close_slot!(close_wait, WaitOf<F>, |o| WaitOps::close(o));

// ---------------------------------------------------------------------------------------
// Fabric slots.

unsafe extern "C" fn fab_domain<F: FabricOps>(
    fab: Obj,
    info: *const RawInfo,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric.domain", || {
        need_out(out)?;
        // SAFETY: our boxed fabric; `info` valid for the call (contract).
        let (f, info) = unsafe { (ob::<F>(fab), info_from_raw(info)?) };
        let d = f.domain(&info, context)?;
        // SAFETY: `out` checked.
        unsafe { put_obj(out, d, Adapt::<F>::DOMAIN as *const _ as *const c_void) };
        Ok(())
    })
}

unsafe extern "C" fn fab_pep<F: FabricOps>(
    fab: Obj,
    info: *const RawInfo,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric.passive_ep", || {
        need_out(out)?;
        // SAFETY: our boxed fabric; `info` valid for the call (contract).
        let (f, info) = unsafe { (ob::<F>(fab), info_from_raw(info)?) };
        let p = f.passive_ep(&info, context)?;
        // SAFETY: `out` checked.
        unsafe { put_obj(out, p, Adapt::<F>::PEP as *const _ as *const c_void) };
        Ok(())
    })
}

unsafe extern "C" fn fab_eq_open<F: FabricOps>(
    fab: Obj,
    attr: *const RawEqAttr,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric.eq_open", || {
        need_out(out)?;
        if attr.is_null() {
            return einval("eq_open: null attributes");
        }
        // SAFETY: our boxed fabric; `attr` non-null and valid (contract).
        let (f, raw) = unsafe { (ob::<F>(fab), *attr) };
        let attr = EqAttr::from_raw(&RawEqAttr {
            wait_set: std::ptr::null_mut(),
            ..raw
        })?;
        let eq = match wait_set_of(raw.wait_set, attr.wait_obj)? {
            // SAFETY: a wait set of this family, open (host contract).
            Some(set) => f.eq_open_in_set(&attr, unsafe { ob::<WaitOf<F>>(set) }, context)?,
            None => f.eq_open(&attr, context)?,
        };
        let b = EqBox {
            inner: eq,
            infos: Mutex::new(Vec::new()),
            err_data: Mutex::new(ErrData::default()),
        };
        // SAFETY: `out` checked.
        unsafe { put_obj(out, b, Adapt::<F>::EQ as *const _ as *const c_void) };
        Ok(())
    })
}

/// The wait set named by an attribute's `wait_set`, checked against its `wait_obj`:
/// `FI_WAIT_SET` needs a set, and a set needs `FI_WAIT_SET`.
fn wait_set_of(set: Obj, wait_obj: WaitObj) -> Result<Option<Obj>> {
    match (set.is_null(), wait_obj == WaitObj::Set) {
        (true, false) => Ok(None),
        (false, true) => Ok(Some(set)),
        (true, true) => einval("wait object FI_WAIT_SET without a wait set"),
        (false, false) => einval("a wait set is given but the wait object is not FI_WAIT_SET"),
    }
}

unsafe extern "C" fn fab_wait_open<F: FabricOps>(
    fab: Obj,
    attr: *const RawWaitAttr,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "fabric.wait_open", || {
        need_out(out)?;
        if attr.is_null() {
            return einval("wait_open: null attributes");
        }
        // SAFETY: our boxed fabric; `attr` non-null and valid (contract).
        let (f, attr) = unsafe { (ob::<F>(fab), WaitAttr::from_raw(&*attr)?) };
        let w = f.wait_open(&attr)?;
        // SAFETY: `out` checked.
        unsafe { put_obj(out, w, Adapt::<F>::WAIT as *const _ as *const c_void) };
        Ok(())
    })
}

unsafe extern "C" fn fab_trywait<F: FabricOps>(
    fab: Obj,
    objs: *const RawFidRef,
    count: usize,
) -> i32 {
    guard("fabric.trywait", || {
        st32(run(|| {
            // SAFETY: our boxed fabric; `objs` valid for `count` (contract), and each
            // object is of this family (checked by the host).
            unsafe {
                let f = ob::<F>(fab);
                let refs = sl_req(objs, count, "trywait: null array")?;
                let mut list: Vec<TryWaitRef<'_, F>> = Vec::with_capacity(refs.len());
                for r in refs {
                    if r.obj.is_null() {
                        return einval("trywait: null object");
                    }
                    list.push(match FidClass::from_raw(r.class) {
                        Some(FidClass::Cq) => TryWaitRef::Cq(&ob::<CqBox<CqOf<F>>>(r.obj).inner),
                        Some(FidClass::Eq) => TryWaitRef::Eq(&ob::<EqBox<EqOf<F>>>(r.obj).inner),
                        Some(FidClass::Cntr) => TryWaitRef::Cntr(ob::<CntrOf<F>>(r.obj)),
                        Some(FidClass::Wait) => TryWaitRef::Wait(ob::<WaitOf<F>>(r.obj)),
                        _ => return einval("trywait: only CQs, EQs, counters and wait sets"),
                    });
                }
                f.trywait(&list)
            }
        }))
    })
}

// ---------------------------------------------------------------------------------------
// Domain slots.

unsafe extern "C" fn dom_bind<F: FabricOps>(
    dom: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.bind", || {
        if target.obj.is_null() || FidClass::from_raw(target.class) != Some(FidClass::Eq) {
            return einval("domain bind: only an event queue can be bound");
        }
        // SAFETY: our boxed domain and an EQ of this family (host contract).
        unsafe { ob::<F::Domain>(dom).bind_eq(&ob::<EqBox<EqOf<F>>>(target.obj).inner, flags) }
    })
}

/// Fill an endpoint out-parameter with `ep` and the family's endpoint tables.
///
/// # Safety
/// `out` valid for writes of `(*out).struct_size` bytes.
unsafe fn put_ep<F: FabricOps>(out: *mut RawEp, ep: EpOf<F>) -> Result<()> {
    // SAFETY: valid by contract.
    unsafe {
        if (*out).struct_size < RawEp::LAYOUT.size_for_minor(0) {
            return einval("endpoint out-parameter too small");
        }
        (*out).obj = Box::into_raw(Box::new(ep)) as Obj;
        (*out).ep = Adapt::<F>::EP;
        (*out).cm = Adapt::<F>::CM;
        (*out).msg = Adapt::<F>::MSG;
        (*out).tagged = Adapt::<F>::TAGGED;
        (*out).rma = Adapt::<F>::RMA;
        (*out).atomic = Adapt::<F>::ATOMIC;
    }
    Ok(())
}

unsafe extern "C" fn dom_endpoint<F: FabricOps>(
    dom: Obj,
    info: *const RawInfo,
    context: usize,
    flags: u64,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.endpoint", || {
        need_out(out)?;
        // SAFETY: our boxed domain; `info` valid (contract).
        let (d, info) = unsafe { (ob::<F::Domain>(dom), info_from_raw(info)?) };
        let ep = d.endpoint(&info, context, flags)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, ep) }
    })
}

unsafe extern "C" fn dom_scalable_ep<F: FabricOps>(
    dom: Obj,
    info: *const RawInfo,
    context: usize,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.scalable_ep", || {
        need_out(out)?;
        // SAFETY: our boxed domain; `info` valid (contract).
        let (d, info) = unsafe { (ob::<F::Domain>(dom), info_from_raw(info)?) };
        let ep = d.scalable_ep(&info, context)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, ep) }
    })
}

unsafe extern "C" fn dom_cq_open<F: FabricOps>(
    dom: Obj,
    attr: *const RawCqAttr,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.cq_open", || {
        need_out(out)?;
        if attr.is_null() {
            return einval("cq_open: null attributes");
        }
        // SAFETY: our boxed domain; `attr` non-null and valid (contract).
        let (d, raw) = unsafe { (ob::<F::Domain>(dom), *attr) };
        let mut attr = CqAttr::from_raw(&RawCqAttr {
            wait_set: std::ptr::null_mut(),
            ..raw
        })?;
        if attr.format == CqFormat::Unspec {
            attr.format = CqFormat::Context;
        }
        let cq = match wait_set_of(raw.wait_set, attr.wait_obj)? {
            // SAFETY: a wait set of this family, open (host contract).
            Some(set) => d.cq_open_in_set(&attr, unsafe { ob::<WaitOf<F>>(set) }, context)?,
            None => d.cq_open(&attr, context)?,
        };
        let b = CqBox {
            inner: cq,
            format: attr.format,
            wait_cond: attr.wait_cond,
            err_data: Mutex::new(ErrData::default()),
        };
        // SAFETY: `out` checked.
        unsafe { put_obj(out, b, Adapt::<F>::CQ as *const _ as *const c_void) };
        Ok(())
    })
}

unsafe extern "C" fn dom_cntr_open<F: FabricOps>(
    dom: Obj,
    attr: *const RawCntrAttr,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.cntr_open", || {
        need_out(out)?;
        if attr.is_null() {
            return einval("cntr_open: null attributes");
        }
        // SAFETY: our boxed domain; `attr` non-null and valid (contract).
        let (d, raw) = unsafe { (ob::<F::Domain>(dom), *attr) };
        let attr = CntrAttr::from_raw(&RawCntrAttr {
            wait_set: std::ptr::null_mut(),
            ..raw
        })?;
        let c = match wait_set_of(raw.wait_set, attr.wait_obj)? {
            // SAFETY: a wait set of this family, open (host contract).
            Some(set) => d.cntr_open_in_set(&attr, unsafe { ob::<WaitOf<F>>(set) }, context)?,
            None => d.cntr_open(&attr, context)?,
        };
        // SAFETY: `out` checked.
        unsafe { put_obj(out, c, Adapt::<F>::CNTR as *const _ as *const c_void) };
        Ok(())
    })
}

unsafe extern "C" fn dom_av_open<F: FabricOps>(
    dom: Obj,
    attr: *const RawAvAttr,
    context: usize,
    out: *mut RawObj,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.av_open", || {
        need_out(out)?;
        if attr.is_null() {
            return einval("av_open: null attributes");
        }
        // SAFETY: our boxed domain; `attr` non-null and valid (contract).
        let (d, attr) = unsafe { (ob::<F::Domain>(dom), AvAttr::from_raw(&*attr)?) };
        let av = d.av_open(&attr, context)?;
        // SAFETY: `out` checked.
        unsafe { put_obj(out, av, Adapt::<F>::AV as *const _ as *const c_void) };
        Ok(())
    })
}

/// Register with `attr` and fill `out`.
///
/// # Safety
/// `dom` our boxed domain; `out` valid for writes.
unsafe fn mr_common<F: FabricOps>(
    dom: Obj,
    attr: &MrAttr<'_>,
    flags: u64,
    out: *mut RawMr,
) -> Result<()> {
    need_out(out)?;
    // SAFETY: valid by contract.
    unsafe {
        if (*out).struct_size < RawMr::LAYOUT.size_for_minor(0) {
            return einval("MR out-parameter too small");
        }
        let mr = ob::<F::Domain>(dom).mr_reg(attr, flags)?;
        (*out).obj = Box::into_raw(Box::new(mr)) as Obj;
        (*out).ops = Adapt::<F>::MR;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn dom_mr_reg<F: FabricOps>(
    dom: Obj,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    context: usize,
    out: *mut RawMr,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.mr_reg", || {
        let iov = [Iov {
            base: buf as *mut c_void,
            len,
        }];
        let attr = MrAttr {
            iov: &iov,
            access: OpFlags::from_bits_retain(access),
            offset,
            requested_key,
            context,
            auth_key: None,
            iface: HmemIface::System,
            device: 0,
        };
        // SAFETY: our boxed domain; `out` valid (contract).
        unsafe { mr_common::<F>(dom, &attr, flags, out) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn dom_mr_regv<F: FabricOps>(
    dom: Obj,
    iov: *const Iov,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    context: usize,
    out: *mut RawMr,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.mr_regv", || {
        // SAFETY: `iov` valid for `count` (contract).
        let iov = unsafe { sl_req(iov, count, "mr_regv: null iov")? };
        let attr = MrAttr {
            iov,
            access: OpFlags::from_bits_retain(access),
            offset,
            requested_key,
            context,
            auth_key: None,
            iface: HmemIface::System,
            device: 0,
        };
        // SAFETY: our boxed domain; `out` valid (contract).
        unsafe { mr_common::<F>(dom, &attr, flags, out) }
    })
}

unsafe extern "C" fn dom_mr_regattr<F: FabricOps>(
    dom: Obj,
    attr: *const RawMrAttr,
    flags: u64,
    out: *mut RawMr,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.mr_regattr", || {
        if attr.is_null() {
            return einval("mr_regattr: null attributes");
        }
        // SAFETY: `attr` and its arrays valid for the call (contract).
        let attr = unsafe { MrAttr::from_raw(&*attr)? };
        // SAFETY: our boxed domain; `out` valid (contract).
        unsafe { mr_common::<F>(dom, &attr, flags, out) }
    })
}

unsafe extern "C" fn dom_query_atomic<F: FabricOps>(
    dom: Obj,
    dt: u32,
    op: u32,
    attr: *mut AtomicAttr,
    flags: u64,
) -> i32 {
    guard("domain.query_atomic", || {
        st32(run(|| {
            need_out(attr)?;
            // SAFETY: our boxed domain.
            let a = unsafe { ob::<F::Domain>(dom) }.query_atomic(
                datatype(dt)?,
                atomic_op(op)?,
                flags,
            )?;
            // SAFETY: `attr` non-null and valid for writes (contract).
            unsafe { attr.write(a) };
            Ok(())
        }))
    })
}

unsafe extern "C" fn dom_stx_ctx<F: FabricOps>(
    dom: Obj,
    attr: *const RawTxAttr,
    context: usize,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.stx_ctx", || {
        need_out(out)?;
        // SAFETY: `attr` valid or null (contract).
        let attr = unsafe { tx_attr_from_raw(attr) }?;
        // SAFETY: our boxed domain.
        let ep = unsafe { ob::<F::Domain>(dom) }.stx_ctx(&attr, context)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, ep) }
    })
}

unsafe extern "C" fn dom_srx_ctx<F: FabricOps>(
    dom: Obj,
    attr: *const RawRxAttr,
    context: usize,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "domain.srx_ctx", || {
        need_out(out)?;
        // SAFETY: `attr` valid or null (contract).
        let attr = unsafe { rx_attr_from_raw(attr) }?;
        // SAFETY: our boxed domain.
        let ep = unsafe { ob::<F::Domain>(dom) }.srx_ctx(&attr, context)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, ep) }
    })
}

// ---------------------------------------------------------------------------------------
// Endpoint control and CM slots.

/// # Safety
/// `t.obj` an object of family `F` of the announced class (host contract).
unsafe fn bind_target<'a, F: FabricOps>(t: RawFidRef) -> Result<BindTarget<'a, F>> {
    if t.obj.is_null() {
        return einval("bind: null object");
    }
    // SAFETY: by the caller's contract.
    unsafe {
        Ok(match FidClass::from_raw(t.class) {
            Some(FidClass::Cq) => BindTarget::Cq(&ob::<CqBox<CqOf<F>>>(t.obj).inner),
            Some(FidClass::Cntr) => BindTarget::Cntr(ob::<CntrOf<F>>(t.obj)),
            Some(FidClass::Av) => BindTarget::Av(ob::<AvOf<F>>(t.obj)),
            Some(FidClass::Eq) => BindTarget::Eq(&ob::<EqBox<EqOf<F>>>(t.obj).inner),
            Some(FidClass::StxCtx) => BindTarget::Stx(ob::<EpOf<F>>(t.obj)),
            Some(FidClass::SrxCtx) => BindTarget::Srx(ob::<EpOf<F>>(t.obj)),
            _ => return einval("bind: this kind of object cannot be bound to an endpoint"),
        })
    }
}

unsafe extern "C" fn ep_bind<F: FabricOps>(
    ep: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.bind", || {
        // SAFETY: our boxed endpoint; target of this family (host contract).
        unsafe {
            ob::<EpOf<F>>(ep).bind(bind_target::<F>(target)?, OpFlags::from_bits_retain(flags))
        }
    })
}

unsafe extern "C" fn ep_enable<F: FabricOps>(ep: Obj, err: *mut ErrBuf) -> i32 {
    // SAFETY: our boxed endpoint (host contract).
    guard_ctl(err, "ep.enable", || unsafe { ob::<EpOf<F>>(ep) }.enable())
}

unsafe extern "C" fn ep_control<F: FabricOps>(
    ep: Obj,
    command: i32,
    arg: *mut c_void,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.control", || {
        // SAFETY: our boxed endpoint (host contract); `arg` is what `command` expects,
        // by the C contract of `fi_control` that the host's `Endpoint::control` passes
        // on to its (unsafe) caller.
        unsafe { ob::<EpOf<F>>(ep).control(command, arg) }
    })
}

unsafe extern "C" fn ep_alias<F: FabricOps>(
    ep: Obj,
    flags: u64,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.alias", || {
        need_out(out)?;
        // SAFETY: our boxed endpoint (host contract).
        let a = unsafe { ob::<EpOf<F>>(ep) }.alias(flags)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, a) }
    })
}

unsafe extern "C" fn ep_cancel<F: FabricOps>(ep: Obj, context: usize) -> isize {
    guard("ep.cancel", || {
        // SAFETY: our boxed endpoint (host contract).
        st(unsafe { ob::<EpOf<F>>(ep) }.cancel(context))
    })
}

unsafe extern "C" fn ep_getopt<F: FabricOps>(
    ep: Obj,
    level: i32,
    optname: i32,
    optval: *mut c_void,
    optlen: *mut usize,
) -> i32 {
    guard("ep.getopt", || {
        st32(run(|| {
            need_out(optlen)?;
            // SAFETY: `optlen` valid; `optval` valid for `*optlen` bytes (contract).
            let buf = unsafe { sl_mut(optval as *mut u8, *optlen, "getopt: null buffer")? };
            // SAFETY: our boxed endpoint.
            let n = unsafe { ob::<EpOf<F>>(ep) }.getopt(level, optname, buf)?;
            // SAFETY: `optlen` valid.
            unsafe { *optlen = n };
            Ok(())
        }))
    })
}

unsafe extern "C" fn ep_setopt<F: FabricOps>(
    ep: Obj,
    level: i32,
    optname: i32,
    optval: *const c_void,
    optlen: usize,
) -> i32 {
    guard("ep.setopt", || {
        st32(run(|| {
            // SAFETY: `optval` valid for `optlen` bytes (contract).
            let v = unsafe { sl_req(optval as *const u8, optlen, "setopt: null value")? };
            // SAFETY: our boxed endpoint.
            unsafe { ob::<EpOf<F>>(ep) }.setopt(level, optname, v)
        }))
    })
}

unsafe extern "C" fn ep_tx_ctx<F: FabricOps>(
    sep: Obj,
    index: i32,
    attr: *const RawTxAttr,
    context: usize,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.tx_ctx", || {
        need_out(out)?;
        // SAFETY: `attr` null or valid (contract).
        let attr = unsafe { tx_attr_from_raw(attr) }?;
        // SAFETY: our boxed endpoint.
        let c = unsafe { ob::<EpOf<F>>(sep) }.tx_ctx(index, &attr, context)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, c) }
    })
}

unsafe extern "C" fn ep_rx_ctx<F: FabricOps>(
    sep: Obj,
    index: i32,
    attr: *const RawRxAttr,
    context: usize,
    out: *mut RawEp,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.rx_ctx", || {
        need_out(out)?;
        // SAFETY: `attr` null or valid (contract).
        let attr = unsafe { rx_attr_from_raw(attr) }?;
        // SAFETY: our boxed endpoint.
        let c = unsafe { ob::<EpOf<F>>(sep) }.rx_ctx(index, &attr, context)?;
        // SAFETY: `out` checked.
        unsafe { put_ep::<F>(out, c) }
    })
}

unsafe extern "C" fn ep_rx_size_left<F: FabricOps>(ep: Obj) -> isize {
    guard("ep.rx_size_left", || {
        // SAFETY: our boxed endpoint (host contract).
        cnt(unsafe { ob::<EpOf<F>>(ep) }.rx_size_left())
    })
}

unsafe extern "C" fn ep_tx_size_left<F: FabricOps>(ep: Obj) -> isize {
    guard("ep.tx_size_left", || {
        // SAFETY: our boxed endpoint (host contract).
        cnt(unsafe { ob::<EpOf<F>>(ep) }.tx_size_left())
    })
}

/// A multicast membership as the adapters hand it out (`out_mc` of `join`): the
/// endpoint it belongs to and the group's fabric address.
struct McObj {
    ep: Obj,
    fi_addr: u64,
}

unsafe extern "C" fn ep_join<F: FabricOps>(
    ep: Obj,
    addr: *const RawAddr,
    flags: u64,
    context: usize,
    out_mc: *mut Obj,
    out_fi_addr: *mut u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.join", || {
        need_out(out_mc)?;
        need_out(out_fi_addr)?;
        // SAFETY: `addr` null or valid (contract).
        let a = match unsafe { addr.as_ref() } {
            // SAFETY: its bytes are valid for `len` (contract).
            Some(r) => unsafe { r.to_address("join address") }?,
            None => None,
        };
        let Some(a) = a else {
            return einval("join: null address");
        };
        // SAFETY: our boxed endpoint.
        let fi_addr = unsafe { ob::<EpOf<F>>(ep) }.join(&a, flags, context)?;
        let mc = Box::into_raw(Box::new(McObj { ep, fi_addr }));
        // SAFETY: both out-parameters checked non-null, valid by contract.
        unsafe {
            *out_mc = mc as Obj;
            *out_fi_addr = fi_addr;
        }
        Ok(())
    })
}

unsafe extern "C" fn ep_mc_close<F: FabricOps>(mc: Obj, err: *mut ErrBuf) -> i32 {
    guard_ctl(err, "mc.close", || {
        if mc.is_null() {
            return einval("mc close: null membership");
        }
        // SAFETY: a membership `ep_join` boxed; the host closes it once, before its
        // endpoint (the membership holds the endpoint open).
        let m = unsafe { &*(mc as *const McObj) };
        // SAFETY: the endpoint is still open (see above).
        unsafe { ob::<EpOf<F>>(m.ep) }.leave(m.fi_addr)?;
        // SAFETY: as above; not used again.
        drop(unsafe { Box::from_raw(mc as *mut McObj) });
        Ok(())
    })
}

unsafe extern "C" fn ep_setname<F: FabricOps>(ep: Obj, addr: *const u8, addrlen: usize) -> i32 {
    guard("ep.setname", || {
        st32(run(|| {
            // SAFETY: `addr` valid for `addrlen` (contract); our boxed endpoint.
            unsafe { ob::<EpOf<F>>(ep).setname(sl_req(addr, addrlen, "setname: null address")?) }
        }))
    })
}

unsafe extern "C" fn ep_getname<F: FabricOps>(ep: Obj, addr: *mut u8, addrlen: *mut usize) -> i32 {
    guard("ep.getname", || {
        st32(run(|| {
            // SAFETY: our boxed endpoint; buffers valid (contract).
            unsafe { copy_out(&ob::<EpOf<F>>(ep).getname()?, addr, addrlen) }
        }))
    })
}

unsafe extern "C" fn ep_getpeer<F: FabricOps>(ep: Obj, addr: *mut u8, addrlen: *mut usize) -> i32 {
    guard("ep.getpeer", || {
        st32(run(|| {
            // SAFETY: our boxed endpoint; buffers valid (contract).
            unsafe { copy_out(&ob::<EpOf<F>>(ep).getpeer()?, addr, addrlen) }
        }))
    })
}

unsafe extern "C" fn ep_connect<F: FabricOps>(
    ep: Obj,
    addr: *const u8,
    addrlen: usize,
    param: *const u8,
    paramlen: usize,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.connect", || {
        // SAFETY: our boxed endpoint; buffers valid for their lengths (contract).
        unsafe {
            ob::<EpOf<F>>(ep).connect(
                sl_req(addr, addrlen, "connect: null address")?,
                sl_req(param, paramlen, "connect: null parameters")?,
            )
        }
    })
}

unsafe extern "C" fn ep_accept<F: FabricOps>(
    ep: Obj,
    param: *const u8,
    paramlen: usize,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "ep.accept", || {
        // SAFETY: our boxed endpoint; buffer valid (contract).
        unsafe { ob::<EpOf<F>>(ep).accept(sl_req(param, paramlen, "accept: null parameters")?) }
    })
}

unsafe extern "C" fn ep_shutdown<F: FabricOps>(ep: Obj, flags: u64) -> i32 {
    guard("ep.shutdown", || {
        // SAFETY: our boxed endpoint (host contract).
        st32(unsafe { ob::<EpOf<F>>(ep) }.shutdown(flags))
    })
}

// ---------------------------------------------------------------------------------------
// Data slots.

/// A data table of family `F`: every slot of the list of data operations is a
/// trampoline of [`data_slots`], the group's `queries` come from [`Queries::BASE`].
trait DataSlots<F: FabricOps>: 'static {
    const TABLE: &'static Self;
}

/// The slots of a data table that are not in the list of data operations (the
/// `*atomicvalid` queries), as a table whose data slots are `-FI_ENOSYS`.
trait Queries<F: FabricOps>: Sized + 'static {
    const BASE: Self;
}

impl<F: FabricOps> Queries<F> for MsgTable {
    const BASE: MsgTable = *MsgTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for TaggedTable {
    const BASE: TaggedTable = *TaggedTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for RmaTable {
    const BASE: RmaTable = *RmaTable::ENOSYS;
}
impl<F: FabricOps> Queries<F> for AtomicTable {
    const BASE: AtomicTable = AtomicTable {
        writevalid: at_writevalid::<F>,
        readwritevalid: at_readwritevalid::<F>,
        compwritevalid: at_compwritevalid::<F>,
        ..*AtomicTable::ENOSYS
    };
}

/// Writes, from the list of data operations, one trampoline per operation in
/// [`data_slots`] (`data_slots::<name>::<F>`: catches panics, converts the C
/// arguments as the list says, `FI_EINVAL` for a bad one, and calls the
/// [`EndpointOps`] method of the same name) and each table's [`DataSlots`] impl.
macro_rules! data_trampolines {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $(@ $since:literal)? [$($kind:ident)+]
            ($($c:ident : $cty:ty $(as $hty:ty)?),*)
            => ($($p:ident : $pty:ty = $from:expr),*)
            <= ($($low:expr),*);)*
    } $(+ queries { $($q:tt)* })?)*) => {
        /// The trampolines of the data slots (one per entry of the list).
        mod data_slots {
            use super::*;
            $($(
                #[allow(clippy::too_many_arguments)]
                pub(super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($c: $cty),*) -> isize {
                    guard(stringify!($name), || {
                        st(run(|| -> Result<()> {
                            // SAFETY: `obj` is an endpoint this adapter boxed for family
                            // `F` (the host passes each handle's own object to its own
                            // tables); the C API's contract for the operation (buffers
                            // and arrays valid, with the given counts, until completion)
                            // is forwarded to the provider.
                            unsafe {
                                let ep: &EpOf<F> = ob::<EpOf<F>>(obj);
                                let ($($p,)*): ($($pty,)*) = ($($from,)*);
                                ep.$name($($p),*)
                            }
                        }))
                    })
                }
            )*)*
        }

        $(
            impl<F: FabricOps> DataSlots<F> for $Table {
                #[allow(clippy::needless_update)]
                const TABLE: &'static $Table = &$Table {
                    size: std::mem::size_of::<$Table>(),
                    $($name: data_slots::$name::<F>,)*
                    ..<$Table as Queries<F>>::BASE
                };
            }
        )*
    };
}

crate::for_each_ep_data_op!(data_trampolines);

/// Shared body of the three `*valid` slots.
fn valid_slot(count: *mut usize, f: impl FnOnce() -> Result<usize>) -> i32 {
    st32(run(|| {
        need_out(count)?;
        let n = f()?;
        // SAFETY: `count` non-null and valid for writes (contract).
        unsafe { count.write(n) };
        Ok(())
    }))
}

unsafe extern "C" fn at_writevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}

unsafe extern "C" fn at_readwritevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("fetch_atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.fetch_atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}

unsafe extern "C" fn at_compwritevalid<F: FabricOps>(
    ep: Obj,
    dt: u32,
    op: u32,
    count: *mut usize,
) -> i32 {
    guard("compare_atomicvalid", || {
        valid_slot(count, || {
            // SAFETY: our boxed endpoint (host contract).
            unsafe { ob::<EpOf<F>>(ep) }.compare_atomicvalid(datatype(dt)?, atomic_op(op)?)
        })
    })
}

// ---------------------------------------------------------------------------------------
// Passive endpoint slots.

unsafe extern "C" fn pep_bind<F: FabricOps>(
    pep: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "pep.bind", || {
        if target.obj.is_null() || FidClass::from_raw(target.class) != Some(FidClass::Eq) {
            return einval("passive endpoint bind: only an event queue can be bound");
        }
        // SAFETY: our boxed passive endpoint and an EQ of this family (host contract).
        unsafe { ob::<F::PassiveEp>(pep).bind_eq(&ob::<EqBox<EqOf<F>>>(target.obj).inner, flags) }
    })
}

unsafe extern "C" fn pep_listen<F: FabricOps>(pep: Obj, err: *mut ErrBuf) -> i32 {
    guard_ctl(err, "pep.listen", || {
        // SAFETY: our boxed passive endpoint (host contract).
        unsafe { ob::<F::PassiveEp>(pep) }.listen()
    })
}

unsafe extern "C" fn pep_reject<F: FabricOps>(
    pep: Obj,
    handle: usize,
    param: *const u8,
    paramlen: usize,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "pep.reject", || {
        // SAFETY: our boxed passive endpoint; buffer valid (contract).
        unsafe {
            ob::<F::PassiveEp>(pep)
                .reject(handle, sl_req(param, paramlen, "reject: null parameters")?)
        }
    })
}

unsafe extern "C" fn pep_getname<F: FabricOps>(
    pep: Obj,
    addr: *mut u8,
    addrlen: *mut usize,
) -> i32 {
    guard("pep.getname", || {
        st32(run(|| {
            // SAFETY: our boxed passive endpoint; buffers valid (contract).
            unsafe { copy_out(&ob::<F::PassiveEp>(pep).getname()?, addr, addrlen) }
        }))
    })
}

unsafe extern "C" fn pep_setname<F: FabricOps>(pep: Obj, addr: *const u8, addrlen: usize) -> i32 {
    guard("pep.setname", || {
        st32(run(|| {
            // SAFETY: our boxed passive endpoint; buffer valid (contract).
            unsafe {
                ob::<F::PassiveEp>(pep).setname(sl_req(addr, addrlen, "setname: null address")?)
            }
        }))
    })
}

unsafe extern "C" fn pep_getopt<F: FabricOps>(
    pep: Obj,
    level: i32,
    optname: i32,
    optval: *mut c_void,
    optlen: *mut usize,
) -> i32 {
    guard("pep.getopt", || {
        st32(run(|| {
            need_out(optlen)?;
            // SAFETY: `optlen` valid; `optval` valid for `*optlen` bytes (contract).
            let buf = unsafe { sl_mut(optval as *mut u8, *optlen, "getopt: null buffer")? };
            // SAFETY: our boxed passive endpoint.
            let n = unsafe { ob::<F::PassiveEp>(pep) }.getopt(level, optname, buf)?;
            // SAFETY: `optlen` valid.
            unsafe { *optlen = n };
            Ok(())
        }))
    })
}

unsafe extern "C" fn pep_setopt<F: FabricOps>(
    pep: Obj,
    level: i32,
    optname: i32,
    optval: *const c_void,
    optlen: usize,
) -> i32 {
    guard("pep.setopt", || {
        st32(run(|| {
            // SAFETY: `optval` valid for `optlen` bytes (contract).
            let v = unsafe { sl_req(optval as *const u8, optlen, "setopt: null value")? };
            // SAFETY: our boxed passive endpoint.
            unsafe { ob::<F::PassiveEp>(pep) }.setopt(level, optname, v)
        }))
    })
}

// ---------------------------------------------------------------------------------------
// CQ slots.

/// # Safety
/// `cq` our boxed CQ; `buf` valid for `count` entries of its format.
#[inline(always)]
unsafe fn cq_buf<'a, T>(b: &CqBox<T>, buf: *mut c_void, count: usize) -> Result<CqBuf<'a>> {
    // SAFETY: forwarded.
    unsafe { CqBuf::from_raw(b.format, buf, count) }
}

unsafe extern "C" fn cq_read<F: FabricOps>(cq: Obj, buf: *mut c_void, count: usize) -> isize {
    guard("cq.read", || {
        cnt(run(|| {
            // SAFETY: our boxed CQ; `buf` valid for `count` entries of its format (contract).
            unsafe {
                let b = ob::<CqBox<CqOf<F>>>(cq);
                b.inner.read(cq_buf(b, buf, count)?, None)
            }
        }))
    })
}

unsafe extern "C" fn cq_readfrom<F: FabricOps>(
    cq: Obj,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
) -> isize {
    guard("cq.readfrom", || {
        cnt(run(|| {
            // SAFETY: as cq_read; `src` valid for `count` (contract).
            unsafe {
                let b = ob::<CqBox<CqOf<F>>>(cq);
                let src = sl_mut(src, count, "readfrom: null address array")?;
                b.inner.read(cq_buf(b, buf, count)?, Some(src))
            }
        }))
    })
}

unsafe extern "C" fn cq_readerr<F: FabricOps>(
    cq: Obj,
    entry: *mut CqErrEntry,
    flags: u64,
) -> isize {
    guard("cq.readerr", || {
        cnt(run(|| {
            need_out(entry)?;
            // SAFETY: our boxed CQ; `entry` valid for read/write, and a non-null
            // `err_data` with a non-zero size valid for that many bytes (contract).
            unsafe {
                let b = ob::<CqBox<CqOf<F>>>(cq);
                let user_buf = (*entry).err_data;
                let user_len = (*entry).err_data_size;
                let e = b.inner.readerr(flags)?;
                let mut keep = b.err_data.lock().unwrap_or_else(|p| p.into_inner());
                let mut raw = e.to_raw();
                (raw.err_data, raw.err_data_size) = keep.hand_out(e.err_data, user_buf, user_len);
                entry.write(raw);
            }
            Ok(1)
        }))
    })
}

/// # Safety
/// `cond` null or valid for a `usize` read when the CQ's condition is a threshold.
unsafe fn threshold<T>(b: &CqBox<T>, cond: *const c_void) -> Option<usize> {
    if b.wait_cond == CqWaitCond::Threshold && !cond.is_null() {
        // SAFETY: with FI_CQ_COND_THRESHOLD, `cond` points to a size_t (C API).
        Some(unsafe { *(cond as *const usize) })
    } else {
        None
    }
}

unsafe extern "C" fn cq_sread<F: FabricOps>(
    cq: Obj,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: i32,
) -> isize {
    guard("cq.sread", || {
        cnt(run(|| {
            // SAFETY: as cq_read; `cond` per the C API.
            unsafe {
                let b = ob::<CqBox<CqOf<F>>>(cq);
                b.inner
                    .sread(cq_buf(b, buf, count)?, None, threshold(b, cond), timeout)
            }
        }))
    })
}

unsafe extern "C" fn cq_sreadfrom<F: FabricOps>(
    cq: Obj,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
    cond: *const c_void,
    timeout: i32,
) -> isize {
    guard("cq.sreadfrom", || {
        cnt(run(|| {
            // SAFETY: as cq_readfrom; `cond` per the C API.
            unsafe {
                let b = ob::<CqBox<CqOf<F>>>(cq);
                let src = sl_mut(src, count, "sreadfrom: null address array")?;
                b.inner.sread(
                    cq_buf(b, buf, count)?,
                    Some(src),
                    threshold(b, cond),
                    timeout,
                )
            }
        }))
    })
}

unsafe extern "C" fn cq_signal<F: FabricOps>(cq: Obj) -> i32 {
    guard("cq.signal", || {
        // SAFETY: our boxed CQ (host contract).
        st32(unsafe { ob::<CqBox<CqOf<F>>>(cq) }.inner.signal())
    })
}

/// Write `text` into a caller's buffer (truncated, NUL-terminated if room); returns the
/// text's full length.
///
/// # Safety
/// `buf` null or valid for `len` bytes.
unsafe fn put_text(text: &str, buf: *mut u8, len: usize) -> isize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` valid for `len` > n bytes (contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
            *buf.add(n) = 0;
        }
    }
    text.len() as isize
}

unsafe extern "C" fn cq_strerror<F: FabricOps>(
    cq: Obj,
    prov_errno: i32,
    err_data: *const c_void,
    buf: *mut u8,
    len: usize,
) -> isize {
    guard("cq.strerror", || {
        // SAFETY: our boxed CQ (host contract).
        let b = unsafe { ob::<CqBox<CqOf<F>>>(cq) };
        // `err_data` has no length in the C call: only data this CQ handed out is known.
        let data = b
            .err_data
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lookup(err_data);
        let text = b.inner.strerror(prov_errno, &data);
        // SAFETY: `buf` valid for `len` (contract).
        unsafe { put_text(&text, buf, len) }
    })
}

unsafe extern "C" fn cq_wait_fd<F: FabricOps>(cq: Obj, fd: *mut i32) -> i32 {
    guard("cq.wait_fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed CQ.
            let v = unsafe { ob::<CqBox<CqOf<F>>>(cq) }.inner.wait_fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}

// ---------------------------------------------------------------------------------------
// EQ slots.

fn is_cm(ev: EqEvent) -> bool {
    matches!(
        ev,
        EqEvent::ConnReq | EqEvent::Connected | EqEvent::Shutdown
    )
}

/// Bytes `ev` takes in a read buffer.
fn eq_entry_size(ev: &Event) -> usize {
    if is_cm(ev.event) {
        std::mem::size_of::<EqCmEntry>() + ev.cm_data.len()
    } else {
        std::mem::size_of::<EqEntry>()
    }
}

/// Write `ev` into `buf` (checked to be large enough and aligned).
///
/// # Safety
/// `buf` valid for `eq_entry_size(ev)` bytes of writes.
unsafe fn write_event<T>(
    b: &EqBox<T>,
    ev: Event,
    event: *mut u32,
    buf: *mut c_void,
) -> Result<usize> {
    let need = eq_entry_size(&ev);
    if !(buf as usize).is_multiple_of(std::mem::align_of::<EqCmEntry>()) {
        return einval("eq read: misaligned buffer");
    }
    // SAFETY: `buf` valid and aligned for `need` bytes (checked/contract); `event` valid.
    unsafe {
        *event = ev.event.to_raw();
        if is_cm(ev.event) {
            let info = match ev.info {
                None => std::ptr::null_mut(),
                Some(i) => {
                    let rb = RawInfoBox::new(&i);
                    let p = rb.as_ptr() as *mut RawInfo;
                    b.infos.lock().unwrap_or_else(|p| p.into_inner()).push(rb);
                    p
                }
            };
            (buf as *mut EqCmEntry).write(EqCmEntry { fid: ev.fid, info });
            let data = (buf as *mut u8).add(std::mem::size_of::<EqCmEntry>());
            std::ptr::copy_nonoverlapping(ev.cm_data.as_ptr(), data, ev.cm_data.len());
        } else {
            (buf as *mut EqEntry).write(EqEntry {
                fid: ev.fid,
                context: ev.context,
                data: ev.data,
            });
        }
    }
    Ok(need)
}

/// Shared body of read and sread: peek, check room, then consume.
///
/// # Safety
/// As [`write_event`]; `event` valid.
unsafe fn eq_read_common<T>(
    b: &EqBox<T>,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
    mut next: impl FnMut(bool) -> Result<Event>,
) -> Result<usize> {
    need_out(event)?;
    let peek = flags & OpFlags::PEEK.bits() != 0;
    let first = next(true)?;
    let need = eq_entry_size(&first);
    if len < need || buf.is_null() {
        return Err(Error::code_only(Errno::ETOOSMALL));
    }
    let ev = if peek { first } else { next(false)? };
    if eq_entry_size(&ev) > len {
        return Err(Error::code_only(Errno::ETOOSMALL));
    }
    // SAFETY: room checked; validity by contract.
    unsafe { write_event(b, ev, event, buf) }
}

unsafe extern "C" fn eq_read<F: FabricOps>(
    eq: Obj,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    guard("eq.read", || {
        cnt(run(|| {
            // SAFETY: our boxed EQ; buffers valid (contract).
            unsafe {
                let b = ob::<EqBox<EqOf<F>>>(eq);
                eq_read_common(b, event, buf, len, flags, |peek| b.inner.read(peek))
            }
        }))
    })
}

unsafe extern "C" fn eq_sread<F: FabricOps>(
    eq: Obj,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: i32,
    flags: u64,
) -> isize {
    guard("eq.sread", || {
        cnt(run(|| {
            // SAFETY: our boxed EQ; buffers valid (contract).
            unsafe {
                let b = ob::<EqBox<EqOf<F>>>(eq);
                let mut waited = false;
                eq_read_common(b, event, buf, len, flags, |peek| {
                    if waited {
                        b.inner.read(peek)
                    } else {
                        waited = true;
                        b.inner.sread(timeout, peek)
                    }
                })
            }
        }))
    })
}

unsafe extern "C" fn eq_readerr<F: FabricOps>(
    eq: Obj,
    entry: *mut EqErrEntry,
    _flags: u64,
) -> isize {
    guard("eq.readerr", || {
        cnt(run(|| {
            need_out(entry)?;
            // SAFETY: our boxed EQ; `entry` valid (contract).
            unsafe {
                let b = ob::<EqBox<EqOf<F>>>(eq);
                let e = b.inner.readerr()?;
                let user_buf = (*entry).err_data;
                let user_len = (*entry).err_data_size;
                let (ptr, size) = b
                    .err_data
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .hand_out(e.err_data, user_buf, user_len);
                entry.write(EqErrEntry {
                    fid: e.fid,
                    context: e.context,
                    data: e.data,
                    err: e.err.0,
                    prov_errno: e.prov_errno,
                    err_data: ptr,
                    err_data_size: size,
                });
            }
            Ok(std::mem::size_of::<EqErrEntry>())
        }))
    })
}

unsafe extern "C" fn eq_write<F: FabricOps>(
    eq: Obj,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    guard("eq.write", || {
        cnt(run(|| {
            let ev = EqEvent::from_raw(event)
                .ok_or_else(|| Error::new(Errno::EINVAL, "eq write: unknown event"))?;
            if buf.is_null() || !(buf as usize).is_multiple_of(std::mem::align_of::<EqCmEntry>()) {
                return einval("eq write: null or misaligned buffer");
            }
            // SAFETY: `buf` valid for `len` bytes and aligned (checked/contract).
            let e = unsafe {
                if is_cm(ev) {
                    if len < std::mem::size_of::<EqCmEntry>() {
                        return einval("eq write: buffer smaller than a CM entry");
                    }
                    let cm = &*(buf as *const EqCmEntry);
                    let info = if cm.info.is_null() {
                        None
                    } else {
                        Some(Box::new(info_from_raw(cm.info)?))
                    };
                    let data = sl(
                        (buf as *const u8).add(std::mem::size_of::<EqCmEntry>()),
                        len - std::mem::size_of::<EqCmEntry>(),
                    );
                    Event {
                        event: ev,
                        fid: cm.fid,
                        context: 0,
                        data: 0,
                        info,
                        cm_data: data.to_vec(),
                    }
                } else {
                    if len < std::mem::size_of::<EqEntry>() {
                        return einval("eq write: buffer smaller than an entry");
                    }
                    let en = &*(buf as *const EqEntry);
                    Event {
                        event: ev,
                        fid: en.fid,
                        context: en.context,
                        data: en.data,
                        info: None,
                        cm_data: Vec::new(),
                    }
                }
            };
            // SAFETY: our boxed EQ.
            unsafe { ob::<EqBox<EqOf<F>>>(eq) }.inner.write(e)?;
            Ok(len)
        }))
    })
}

unsafe extern "C" fn eq_strerror<F: FabricOps>(
    eq: Obj,
    prov_errno: i32,
    err_data: *const c_void,
    buf: *mut u8,
    len: usize,
) -> isize {
    guard("eq.strerror", || {
        // SAFETY: our boxed EQ.
        let b = unsafe { ob::<EqBox<EqOf<F>>>(eq) };
        // As cq_strerror: only data this EQ handed out is known.
        let data = b
            .err_data
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lookup(err_data);
        let text = b.inner.strerror(prov_errno, &data);
        // SAFETY: `buf` valid for `len` (contract).
        unsafe { put_text(&text, buf, len) }
    })
}

unsafe extern "C" fn eq_wait_fd<F: FabricOps>(eq: Obj, fd: *mut i32) -> i32 {
    guard("eq.wait_fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed EQ.
            let v = unsafe { ob::<EqBox<EqOf<F>>>(eq) }.inner.wait_fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}

unsafe extern "C" fn eq_free_info<F: FabricOps>(eq: Obj, info: *mut RawInfo) -> i32 {
    guard("eq.free_info", || {
        // SAFETY: our boxed EQ.
        let b = unsafe { ob::<EqBox<EqOf<F>>>(eq) };
        let mut infos = b.infos.lock().unwrap_or_else(|p| p.into_inner());
        match infos.iter().position(|i| std::ptr::eq(i.as_ptr(), info)) {
            Some(k) => {
                infos.swap_remove(k);
                0
            }
            None => Errno::EINVAL.to_status(),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Counter slots.

unsafe extern "C" fn cntr_read<F: FabricOps>(c: Obj, value: *mut u64) -> i32 {
    guard("cntr.read", || {
        if value.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed counter; `value` valid for writes (contract).
        unsafe { value.write(ob::<CntrOf<F>>(c).read()) };
        0
    })
}

unsafe extern "C" fn cntr_readerr<F: FabricOps>(c: Obj, value: *mut u64) -> i32 {
    guard("cntr.readerr", || {
        if value.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed counter; `value` valid for writes (contract).
        unsafe { value.write(ob::<CntrOf<F>>(c).readerr()) };
        0
    })
}

unsafe extern "C" fn cntr_add<F: FabricOps>(c: Obj, v: u64) -> i32 {
    // SAFETY: our boxed counter (host contract).
    guard("cntr.add", || st32(unsafe { ob::<CntrOf<F>>(c) }.add(v)))
}

unsafe extern "C" fn cntr_set<F: FabricOps>(c: Obj, v: u64) -> i32 {
    // SAFETY: our boxed counter (host contract).
    guard("cntr.set", || st32(unsafe { ob::<CntrOf<F>>(c) }.set(v)))
}

unsafe extern "C" fn cntr_adderr<F: FabricOps>(c: Obj, v: u64) -> i32 {
    guard("cntr.adderr", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.adderr(v))
    })
}

unsafe extern "C" fn cntr_seterr<F: FabricOps>(c: Obj, v: u64) -> i32 {
    guard("cntr.seterr", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.seterr(v))
    })
}

unsafe extern "C" fn cntr_wait<F: FabricOps>(c: Obj, threshold: u64, timeout: i32) -> i32 {
    guard("cntr.wait", || {
        // SAFETY: our boxed counter (host contract).
        st32(unsafe { ob::<CntrOf<F>>(c) }.wait(threshold, timeout))
    })
}

unsafe extern "C" fn cntr_wait_fd<F: FabricOps>(c: Obj, fd: *mut i32) -> i32 {
    guard("cntr.wait_fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed counter.
            let v = unsafe { ob::<CntrOf<F>>(c) }.wait_fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}

// ---------------------------------------------------------------------------------------
// AV slots.

unsafe extern "C" fn av_bind<F: FabricOps>(
    av: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "av.bind", || {
        if target.obj.is_null() || FidClass::from_raw(target.class) != Some(FidClass::Eq) {
            return einval("AV bind: only an event queue can be bound");
        }
        // SAFETY: our boxed AV and an EQ of this family (host contract).
        unsafe { ob::<AvOf<F>>(av).bind_eq(&ob::<EqBox<EqOf<F>>>(target.obj).inner, flags) }
    })
}

/// Count result as the AV's `i32` status.
fn av_count(r: Result<usize>) -> i32 {
    match r {
        Ok(n) => n.min(i32::MAX as usize) as i32,
        Err(e) => e.code().to_status(),
    }
}

unsafe extern "C" fn av_insert<F: FabricOps>(
    av: Obj,
    addrs: *const RawAddr,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insert", || {
        av_count(run(|| {
            // SAFETY: arrays valid for `count` (contract).
            let raw = unsafe { sl_req(addrs, count, "insert: null address array")? };
            let mut list = Vec::with_capacity(raw.len());
            for (i, r) in raw.iter().enumerate() {
                // SAFETY: each address's bytes valid (contract).
                match unsafe { r.to_address("address") } {
                    Ok(Some(a)) => list.push(a),
                    Ok(None) => {
                        return Err(Error::new(
                            Errno::EINVAL,
                            format!("insert: address #{i} is null"),
                        ))
                    }
                    // Bytes that do not decode fail only their own entry (fi_av(3)):
                    // they go on as opaque bytes, which the provider refuses.
                    Err(_) => list.push(crate::addr::Address::Raw {
                        format: crate::enums::AddrFormat::from_raw(r.format),
                        // SAFETY: non-null (checked by `to_address`) and valid for
                        // `len` bytes (contract).
                        bytes: unsafe { std::slice::from_raw_parts(r.ptr, r.len) }.to_vec(),
                    }),
                }
            }
            let mut scratch;
            let out: &mut [u64] = if fi_addr.is_null() {
                scratch = vec![0u64; count];
                &mut scratch
            } else {
                // SAFETY: valid for `count` writes (contract).
                unsafe { sl_mut(fi_addr, count, "insert: null fi_addr")? }
            };
            // SAFETY: our boxed AV.
            unsafe { ob::<AvOf<F>>(av) }.insert(&list, out, flags, context)
        }))
    })
}

unsafe extern "C" fn av_insertsvc<F: FabricOps>(
    av: Obj,
    node: RawStr,
    service: RawStr,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insertsvc", || {
        av_count(run(|| {
            need_out(fi_addr)?;
            // SAFETY: strings valid (contract).
            let (n, s) = unsafe {
                (
                    node.str("node")?.unwrap_or(""),
                    service.str("service")?.unwrap_or(""),
                )
            };
            // SAFETY: our boxed AV; `fi_addr` valid (contract).
            unsafe { ob::<AvOf<F>>(av).insertsvc(n, s, &mut *fi_addr, flags, context) }
        }))
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn av_insertsym<F: FabricOps>(
    av: Obj,
    node: RawStr,
    nodecnt: usize,
    service: RawStr,
    svccnt: usize,
    fi_addr: *mut u64,
    flags: u64,
    context: usize,
) -> i32 {
    guard("av.insertsym", || {
        av_count(run(|| {
            let total = nodecnt
                .checked_mul(svccnt)
                .ok_or_else(|| Error::new(Errno::EINVAL, "insertsym: count overflows"))?;
            // SAFETY: strings and `fi_addr` valid (contract).
            unsafe {
                let (n, s) = (
                    node.str("node")?.unwrap_or(""),
                    service.str("service")?.unwrap_or(""),
                );
                let out = sl_mut(fi_addr, total, "insertsym: null fi_addr")?;
                ob::<AvOf<F>>(av).insertsym(n, nodecnt, s, svccnt, out, flags, context)
            }
        }))
    })
}

unsafe extern "C" fn av_remove<F: FabricOps>(
    av: Obj,
    fi_addr: *const u64,
    count: usize,
    flags: u64,
) -> i32 {
    guard("av.remove", || {
        st32(run(|| {
            // SAFETY: our boxed AV; array valid (contract).
            unsafe {
                ob::<AvOf<F>>(av).remove(sl_req(fi_addr, count, "remove: null array")?, flags)
            }
        }))
    })
}

unsafe extern "C" fn av_lookup<F: FabricOps>(
    av: Obj,
    fi_addr: u64,
    addr: *mut u8,
    addrlen: *mut usize,
    format: *mut u32,
) -> i32 {
    guard("av.lookup", || {
        st32(run(|| {
            // SAFETY: our boxed AV.
            let a = unsafe { ob::<AvOf<F>>(av) }.lookup(fi_addr)?;
            if !format.is_null() {
                // SAFETY: non-null, valid (contract).
                unsafe { format.write(a.format().to_raw()) };
            }
            // SAFETY: buffers valid (contract).
            unsafe { copy_out(&a.to_bytes(), addr, addrlen) }
        }))
    })
}

unsafe extern "C" fn av_straddr<F: FabricOps>(
    av: Obj,
    addr: RawAddr,
    buf: *mut u8,
    len: *mut usize,
) -> i32 {
    guard("av.straddr", || {
        st32(run(|| {
            // SAFETY: the address bytes are valid (contract).
            let a = unsafe { addr.to_address("address") }?
                .ok_or_else(|| Error::new(Errno::EINVAL, "straddr: null address"))?;
            // SAFETY: our boxed AV.
            let text = unsafe { ob::<AvOf<F>>(av) }.straddr(&a);
            // SAFETY: buffers valid (contract).
            unsafe { copy_out(text.as_bytes(), buf, len) }
        }))
    })
}

// ---------------------------------------------------------------------------------------
// MR slots.

unsafe extern "C" fn mr_key<F: FabricOps>(mr: Obj, key: *mut u64) -> i32 {
    guard("mr.key", || {
        if key.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed MR; `key` valid (contract).
        unsafe { key.write(ob::<MrOf<F>>(mr).key()) };
        0
    })
}

unsafe extern "C" fn mr_desc<F: FabricOps>(mr: Obj, desc: *mut *mut c_void) -> i32 {
    guard("mr.desc", || {
        if desc.is_null() {
            return Errno::EINVAL.to_status();
        }
        // SAFETY: our boxed MR; `desc` valid (contract).
        unsafe { desc.write(ob::<MrOf<F>>(mr).desc()) };
        0
    })
}

unsafe extern "C" fn mr_bind<F: FabricOps>(
    mr: Obj,
    target: RawFidRef,
    flags: u64,
    err: *mut ErrBuf,
) -> i32 {
    guard_ctl(err, "mr.bind", || {
        if target.obj.is_null() {
            return einval("MR bind: null object");
        }
        // SAFETY: our boxed MR and an object of this family of the announced class.
        unsafe {
            let t = match FidClass::from_raw(target.class) {
                Some(FidClass::Ep) => MrBindTarget::Ep(ob::<EpOf<F>>(target.obj)),
                Some(FidClass::Cntr) => MrBindTarget::Cntr(ob::<CntrOf<F>>(target.obj)),
                _ => return einval("MR bind: only an endpoint or a counter can be bound"),
            };
            ob::<MrOf<F>>(mr).bind(t, flags)
        }
    })
}

unsafe extern "C" fn mr_refresh<F: FabricOps>(
    mr: Obj,
    iov: *const Iov,
    count: usize,
    flags: u64,
) -> i32 {
    guard("mr.refresh", || {
        st32(run(|| {
            // SAFETY: our boxed MR; `iov` valid (contract).
            unsafe { ob::<MrOf<F>>(mr).refresh(sl_req(iov, count, "refresh: null iov")?, flags) }
        }))
    })
}

unsafe extern "C" fn mr_enable<F: FabricOps>(mr: Obj, err: *mut ErrBuf) -> i32 {
    // SAFETY: our boxed MR (host contract).
    guard_ctl(err, "mr.enable", || unsafe { ob::<MrOf<F>>(mr) }.enable())
}

// ---------------------------------------------------------------------------------------
// Wait set slots.

unsafe extern "C" fn wait_wait<F: FabricOps>(w: Obj, timeout: i32) -> i32 {
    guard("wait.wait", || {
        // SAFETY: our boxed wait set (host contract).
        st32(unsafe { ob::<WaitOf<F>>(w) }.wait(timeout))
    })
}

unsafe extern "C" fn wait_fd<F: FabricOps>(w: Obj, fd: *mut i32) -> i32 {
    guard("wait.fd", || {
        st32(run(|| {
            need_out(fd)?;
            // SAFETY: our boxed wait set.
            let v = unsafe { ob::<WaitOf<F>>(w) }.fd()?;
            // SAFETY: `fd` non-null and valid (contract).
            unsafe { fd.write(v) };
            Ok(())
        }))
    })
}
