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
//! # Host side
//!
//! A class file also ends with the host methods of its list's `fn` entries (the public
//! method that calls the hand-adapted slot: `Domain::cq_open`, `AddressVector::insert`
//! …), so that the C conversion of such an operation, both ways, is written in one file
//! and the rest comes from its list entry (see [`crate::abi::ctl_ops`]).
//!
//! # Slot contract
//!
//! What every slot (an `unsafe extern "C" fn` of this module and its children)
//! requires of its caller, and what its `# Safety` section refers to: the object
//! pointer (the first argument) is an object this adapter handed out for family `F`,
//! still open, passed to a slot of its own table; every pointer argument is valid as
//! the C call's contract says (null only where the call allows it). The host
//! guarantees both.
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

use crate::abi::object::SignalsWaitSet;
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
use crate::enums::{AtomicOp, CqFormat, CqWaitCond, Datatype, EqEvent, WaitObj};
use crate::eq::{EqAttr, Event};
use crate::error::{Errno, Error, Result};
use crate::flags::OpFlags;
use crate::getinfo::GetinfoOutcome;
use crate::mr::MrAttr;
use crate::provider::{
    AvOf, AvOps, BindTarget, CntrOf, CntrOps, CqOf, CqOps, DomainOf, DomainOps, EndpointOps, EpOf,
    EqOf, EqOps, FabricOf, FabricOps, Host, MrBindTarget, MrOf, MrOps, PassiveEndpointOps, PepOf,
    Provider, TryWaitRef, WaitOf, WaitOps,
};
use crate::wait::WaitAttr;

/// Declares the `bind` slot of a class that binds only an event queue (domain, AV,
/// passive endpoint): `$slot` is `fn(obj, target, flags, err)` over the boxed `$Obj`
/// (a type naming the family `F`), whose `bind_eq` takes the queue; any other target is
/// `FI_EINVAL` with `$refusal` (see `bound_eq`). `$what` names the slot for panics.
macro_rules! eq_bind_slot {
    ($(#[$doc:meta])* $slot:ident, $Obj:ty, $what:literal, $refusal:literal) => {
        $(#[$doc])*
        /// # Safety
        /// `obj` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>(
            obj: Obj,
            target: RawFidRef,
            flags: u64,
            err: *mut ErrBuf,
        ) -> i32 {
            guard_ctl(err, $what, || {
                // SAFETY: our boxed object and, when of class EQ, an EQ of this family
                // (host contract).
                unsafe { ob::<$Obj>(obj).bind_eq(bound_eq::<F>(target, $refusal)?, flags) }
            })
        }
    };
}

/// Declares the `control` slot of an endpoint class (active or passive): `fi_control`
/// forwarded to the boxed `$Obj`'s `control`. `$what` names the slot for panics.
macro_rules! control_slot {
    ($(#[$doc:meta])* $slot:ident, $Obj:ty, $what:literal) => {
        $(#[$doc])*
        /// # Safety
        /// `obj` and the pointers as the slot contract says (see [`crate::abi::adapt`]).
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>(
            obj: Obj,
            command: i32,
            arg: *mut c_void,
            err: *mut ErrBuf,
        ) -> i32 {
            guard_ctl(err, $what, || {
                // SAFETY: our boxed object (host contract); `arg` is what `command`
                // expects, by the C contract of `fi_control` that the host's `control`
                // passes on to its (unsafe) caller.
                unsafe { ob::<$Obj>(obj).control(command, arg) }
            })
        }
    };
}

/// Declares slots that answer a count (a queue's reads and writes, the length of a
/// queue's `strerror` text): each an `extern "C" fn` of the object pointer and the C
/// arguments whose `body` runs through [`count_slot`], with `b` bound to the box behind
/// the pointer. `"what"` names the slot for panics. A body does its own `unsafe` (with
/// its own `SAFETY:` comment) for the pointers it reads.
///
/// ```text
/// /// doc
/// "what" fn slot(obj, arg: CType, …) on b: Box => { body }
/// ```
macro_rules! count_slots {
    ($($(#[$doc:meta])* $what:literal fn $slot:ident($obj:ident $(, $a:ident: $at:ty)*) on $b:ident: $Box:ty => $body:block)*) => {$(
        $(#[$doc])*
        /// # Safety
        #[doc = concat!("`", stringify!($obj), "` and the pointers as the slot contract says (see [`crate::abi::adapt`]).")]
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>($obj: Obj $(, $a: $at)*) -> isize {
            let body = |$b: &$Box| -> Result<usize> { $body };
            // SAFETY: `obj` is a box of this class this adapter handed out, still open
            // (host contract).
            unsafe { count_slot($what, $obj, body) }
        }
    )*};
}

mod av;
mod cm;
mod cntr;
mod cq;
mod data;
mod domain;
mod ep;
mod eq;
mod fabric;
mod mr;
mod pep;
mod wait;

use self::cq::*;
use self::data::*;
use self::domain::*;
use self::fabric::*;

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

/// Run a slot that answers a count (a queue's `read`, `readerr`, `write`, `strerror`…):
/// `body` on the box `B` behind `obj`; a panic is caught and reported as `what`, an error
/// becomes its negative code.
///
/// # Safety
/// `obj` must be a `B` this adapter boxed, still open (host contract).
#[inline(always)]
unsafe fn count_slot<B>(
    what: &'static str,
    obj: Obj,
    body: impl FnOnce(&B) -> Result<usize>,
) -> isize {
    guard(what, || {
        // SAFETY: by this function's contract.
        cnt(body(unsafe { ob::<B>(obj) }))
    })
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

/// The value behind a pointer the slot requires; null is `FI_EINVAL` with `what`.
///
/// # Safety
/// A non-null `p` must be valid for reads for `'a`.
#[inline(always)]
unsafe fn ref_req<'a, T>(p: *const T, what: &'static str) -> Result<&'a T> {
    // SAFETY: null or valid by the caller's contract.
    unsafe { p.as_ref() }.map_or_else(|| einval(what), Ok)
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

/// The event queue handed to the `bind` slot of a domain, AV or passive endpoint (the
/// only class they bind); anything else is `FI_EINVAL` with `refusal`.
///
/// # Safety
/// A non-null `target` of class EQ is an EQ this adapter boxed for family `F`, open
/// for `'a` (the host's contract for a bind).
unsafe fn bound_eq<'a, F: FabricOps>(
    target: RawFidRef,
    refusal: &'static str,
) -> Result<&'a EqOf<F>> {
    if target.obj.is_null() || FidClass::from_raw(target.class) != Some(FidClass::Eq) {
        return einval(refusal);
    }
    // SAFETY: an EQ of this family (caller's contract).
    Ok(unsafe { &ob::<EqBox<EqOf<F>>>(target.obj).inner })
}

/// Box `v` and store it as an opened object with table `ops`; returns the boxed value
/// (where it stays until the host closes the object).
///
/// # Safety
/// `out` must be valid for writes.
unsafe fn put_obj<'a, T, Table>(out: *mut RawObj, v: T, ops: &'static Table) -> &'a T {
    let boxed = Box::into_raw(Box::new(v));
    // SAFETY: checked non-null by the callers before opening; valid by contract.
    unsafe {
        (*out).obj = boxed as Obj;
        (*out).ops = ops as *const Table as *const c_void;
        &*boxed
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

    /// [`ErrData::hand_out`] on the data a queue keeps in `kept` (locked: a panic while
    /// it was held leaves plain data, still usable).
    ///
    /// # Safety
    /// As [`ErrData::hand_out`].
    unsafe fn hand_out_kept(
        kept: &Mutex<ErrData>,
        data: Vec<u8>,
        user_buf: *mut c_void,
        user_len: usize,
    ) -> (*mut c_void, usize) {
        let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: forwarded from this function's contract.
        unsafe { kept.hand_out(data, user_buf, user_len) }
    }

    /// The body of a queue's `strerror` slot: `text` of the error data the queue keeps
    /// in `kept` that `err_data` stands for ([`ErrData::lookup`]: the C call has no
    /// length, so only data this queue handed out is known), put into `buf` as
    /// [`put_text`] does.
    ///
    /// # Safety
    /// `buf` null or valid for `len` bytes.
    unsafe fn strerror_into(
        kept: &Mutex<ErrData>,
        err_data: *const c_void,
        text: impl FnOnce(&[u8]) -> String,
        buf: *mut u8,
        len: usize,
    ) -> usize {
        let data = kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lookup(err_data);
        // SAFETY: `buf` valid for `len` (contract).
        unsafe { put_text(&text(&data), buf, len) }
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

/// The error data of an error entry read host-side with `data` offered as its buffer
/// (`ptr` and `size` as the provider left them in the entry): `data` cut to `size` when
/// the provider wrote there, a copy of the provider's own buffer when it returned that
/// instead, else empty.
///
/// # Safety
/// `ptr` is null, `data`'s buffer, or the provider's buffer, valid for `size` bytes.
unsafe fn err_data_read(mut data: Vec<u8>, ptr: *mut c_void, size: usize) -> Vec<u8> {
    if ptr == data.as_mut_ptr() as *mut c_void {
        data.truncate(size.min(data.len()));
        data
    } else if ptr.is_null() || size == 0 {
        Vec::new()
    } else {
        // SAFETY: the provider's buffer, valid for `size` bytes (contract).
        unsafe { std::slice::from_raw_parts(ptr as *const u8, size) }.to_vec()
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

impl<T> CqBox<T> {
    /// `inner`, opened with `attr`, with no error data handed out yet.
    fn new(inner: T, attr: &CqAttr) -> CqBox<T> {
        CqBox {
            inner,
            format: attr.format,
            wait_cond: attr.wait_cond,
            err_data: Mutex::new(ErrData::default()),
        }
    }
}

impl<T> EqBox<T> {
    /// `inner`, with nothing handed out yet.
    fn new(inner: T) -> EqBox<T> {
        EqBox {
            inner,
            infos: Mutex::new(Vec::new()),
            err_data: Mutex::new(ErrData::default()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Provider root and plugin init.

/// `P`'s root table from its list: every slot is the entry's `prov_` adapter.
macro_rules! prov_table {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident {
        $($(#[$doc:meta])* fn $name:ident ($($a:ident : $t:ty),*) -> $r:ty => $adapter:ident
            $(| $(#[$pdoc:meta])* fn ($($p:ident : $pt:ty),*) -> $pr:ty $(= $(@ $this:ident)? $pdef:expr)?)?;)*
    }) => {
        &$Table {
            size: std::mem::size_of::<$Table>(),
            $($name: $adapter::<P>,)*
        }
    };
}

/// The root table of provider `P`.
pub struct ProvAdapt<P>(PhantomData<P>);

impl<P: Provider> ProvAdapt<P> {
    /// `P`'s provider table.
    pub const TABLE: &'static ProviderTable = crate::for_each_provider_op!(prov_table);
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

/// Slot `getinfo` of the provider root table.
///
/// # Safety
/// `prov` must be the instance [`plugin_init`] produced for `P`; every pointer argument
/// valid as the slot's contract in [`ProviderTable`] says.
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

/// Slot `free_getinfo` of the provider root table.
///
/// # Safety
/// `prov` must be the instance [`plugin_init`] produced for `P`; every pointer argument
/// valid as the slot's contract in [`ProviderTable`] says.
#[allow(clippy::extra_unused_type_parameters)]
unsafe extern "C" fn prov_free_getinfo<P: Provider>(_prov: Obj, out: *mut RawGetinfoResult) -> i32 {
    guard("free_getinfo", || {
        // SAFETY: filled by prov_getinfo of this copy (contract).
        unsafe { free_result(out) };
        0
    })
}

/// Slot `fabric` of the provider root table.
///
/// # Safety
/// `prov` must be the instance [`plugin_init`] produced for `P`; every pointer argument
/// valid as the slot's contract in [`ProviderTable`] says.
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
        unsafe { put_obj(out, f, Adapt::<P::Fabric>::FABRIC) };
        Ok(())
    })
}

/// Slot `cleanup` of the provider root table.
///
/// # Safety
/// `prov` must be the instance [`plugin_init`] produced for `P`; every pointer argument
/// valid as the slot's contract in [`ProviderTable`] says.
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
    /// Fabric table (generated from its list).
    pub const FABRIC: &'static FabricTable = <FabricTable as CtlSlots<F>>::TABLE;

    /// Domain table (generated from its list).
    pub const DOMAIN: &'static DomainTable = <DomainTable as CtlSlots<F>>::TABLE;

    /// Endpoint control table (generated from its list).
    pub const EP: &'static EpTable = <EpTable as CtlSlots<F>>::TABLE;

    /// Connection management table (generated from its list).
    pub const CM: &'static CmTable = <CmTable as CtlSlots<F>>::TABLE;

    /// Message table.
    pub const MSG: &'static MsgTable = <MsgTable as DataSlots<F>>::TABLE;

    /// Tagged message table.
    pub const TAGGED: &'static TaggedTable = <TaggedTable as DataSlots<F>>::TABLE;

    /// RMA table.
    pub const RMA: &'static RmaTable = <RmaTable as DataSlots<F>>::TABLE;

    /// Atomic table.
    pub const ATOMIC: &'static AtomicTable = <AtomicTable as DataSlots<F>>::TABLE;

    /// Passive endpoint table (generated from its list).
    pub const PEP: &'static PepTable = <PepTable as CtlSlots<F>>::TABLE;

    /// Completion queue table (generated from its list).
    pub const CQ: &'static CqTable = <CqTable as CtlSlots<F>>::TABLE;

    /// Event queue table (generated from its list).
    pub const EQ: &'static EqTable = <EqTable as CtlSlots<F>>::TABLE;

    /// Counter table (generated from its list).
    pub const CNTR: &'static CntrTable = <CntrTable as CtlSlots<F>>::TABLE;

    /// Address vector table (generated from its list).
    pub const AV: &'static AvTable = <AvTable as CtlSlots<F>>::TABLE;

    /// Memory region table (generated from its list).
    pub const MR: &'static MrTable = <MrTable as CtlSlots<F>>::TABLE;

    /// Wait set table (generated from its list).
    pub const WAIT: &'static WaitTable = <WaitTable as CtlSlots<F>>::TABLE;
}

// ---------------------------------------------------------------------------------------
// Tables generated from the lists of control operations (`abi::ctl_ops`).

/// The table of a class whose operations are listed in [`crate::abi::ctl_ops`]: each
/// `op` entry's slot is a trampoline of the class's `slots` module, each `fn` entry's
/// its hand-written adapter (`hand::<name>` when the entry names none).
trait CtlSlots<F: FabricOps>: 'static {
    const TABLE: &'static Self;
}

/// Writes, from a class's list, its `slots` module (one trampoline per `op` entry:
/// catches panics, calls the provider method of the same name, writes an `out`/`val`
/// result, `FI_EINVAL` for a null result pointer) and the class's [`CtlSlots`] impl.
/// Invoke in the class's adapter file, which defines `this::<F>(obj)`: the provider's
/// object behind a slot's object pointer.
macro_rules! ctl_trampolines {
    ($(#[$tdoc:meta])* $class:ident $Table:ident $Trait:ident $ObjOf:ident $Host:ident { $($list:tt)* }) => {
        /// The trampolines of the class's listed operations.
        pub(super) mod slots {
            #[allow(unused_imports)]
            use super::*;
            $crate::__ctl_each! { [ctl_trampoline] {$class $ObjOf $Trait} $($list)* }
        }

        impl<F: FabricOps> CtlSlots<F> for $Table {
            const TABLE: &'static $Table = &{
                let mut t = *$Table::ENOSYS;
                $crate::__ctl_each! { [ctl_assign] {t} $($list)* }
                t
            };
        }
    };
}

/// One trampoline (see [`ctl_trampolines!`]).
macro_rules! ctl_trampoline {
    ({$($ctx:tt)*} fn $name:ident $adapter:tt $($prov:tt)*) => {};
    ({$class:ident $ObjOf:ident $Trait:ident} $(#[$doc:meta])* close) => {
        /// The close slot: the provider object's `close`, then its box is dropped.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table, and not used after a successful close
        /// (host contract, see [`crate::abi::object`]); `err` null or a message
        /// buffer.
        pub(in super::super) unsafe extern "C" fn close<F: FabricOps>(obj: Obj, err: *mut ErrBuf) -> i32 {
            guard_ctl(err, concat!(stringify!($class), ".close"), || {
                if obj.is_null() {
                    return einval("close: null object");
                }
                // SAFETY: our boxed object (this function's contract).
                $Trait::close(unsafe { this::<F>(obj) })?;
                // SAFETY: as above; the host closes an object once and never uses it
                // after a successful close, so the box is ours to drop.
                drop(unsafe { Box::from_raw(obj as *mut Boxed<F>) });
                Ok(())
            })
        }
    };
    ({$class:ident $ObjOf:ident $Trait:ident} $($entry:tt)*) => {
        ctl_trampoline! { {$class $ObjOf} $($entry)* }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [count $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation: a count, or `-FI_x`.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]).
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t),*) -> isize {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                // SAFETY: our boxed object (this function's contract).
                cnt(unsafe { this::<F>(obj) }.$name($($a),*))
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] [$($bc:ty)?]),*) ($($c:ident : $ct:ty),*) [] [] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); each byte pointer null with a zero length, or
        /// valid for reads of its length.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* $($b: *const $crate::abi::ctl_ops::slot_elem!([$($bc)?] $bt), $blen: usize,)* $($c: $ct),*) -> i32 {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                st32(run(|| {
                    // SAFETY: our boxed object and its byte arguments (this function's
                    // contract).
                    unsafe {
                        this::<F>(obj).$name($($a,)* $(sl_req($b.cast::<$bt>(), $blen, concat!(stringify!($name), ": null ", stringify!($b)))?,)* $($c),*)
                    }
                }))
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) ($($b:ident $blen:ident [$bt:ty] [$($bc:ty)?]),*) ($($c:ident : $ct:ty),*) [err] [] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation; a failure's message into `*err`.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); each byte pointer null with a zero length, or
        /// valid for reads of its length; `err` null or a message buffer.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* $($b: *const $crate::abi::ctl_ops::slot_elem!([$($bc)?] $bt), $blen: usize,)* $($c: $ct,)* err: *mut ErrBuf) -> i32 {
            guard_ctl(err, concat!(stringify!($class), ".", stringify!($name)), || {
                // SAFETY: our boxed object and its byte arguments (this function's
                // contract).
                unsafe {
                    this::<F>(obj).$name($($a,)* $(sl_req($b.cast::<$bt>(), $blen, concat!(stringify!($name), ": null ", stringify!($b)))?,)* $($c),*)
                }
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [out $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation: the result into `*out`.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); `out` null or valid for a write.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* out: *mut $rt) -> i32 {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                st32(run(|| {
                    need_out(out)?;
                    // SAFETY: our boxed object (this function's contract).
                    let v = unsafe { this::<F>(obj) }.$name($($a),*)?;
                    // SAFETY: `out` non-null and valid for a write (contract).
                    unsafe { out.write(v) };
                    Ok(())
                }))
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident $args:tt () () [] [get $rt:ty [$fb:expr]] $V:tt $def:tt) => {
        ctl_trampoline! { {$class $ObjOf} $(#[$doc])* op $name $args () () [] [val $rt] $V $def }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [fill $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation: the provider fills `buf` (its size in `*len`,
        /// replaced by the bytes written).
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); `len` null or valid for a read and a write, `buf`
        /// null or valid for writes of `*len` bytes, not aliased.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* buf: *mut c_void, len: *mut usize) -> i32 {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                st32(run(|| {
                    need_out(len)?;
                    // SAFETY: `len` valid; `buf` valid for `*len` bytes (contract).
                    let bytes = unsafe { sl_mut(buf.cast::<u8>(), *len, concat!(stringify!($name), ": null buffer"))? };
                    // SAFETY: our boxed object (this function's contract).
                    let n = unsafe { this::<F>(obj) }.$name($($a,)* bytes)?;
                    // SAFETY: `len` valid for a write (contract).
                    unsafe { len.write(n) };
                    Ok(())
                }))
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [bytes $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation: the bytes into `out` (capacity and length in
        /// `*out_len`; `-FI_ETOOSMALL` with the needed length when they do not fit).
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); `out_len` null or valid for a read and a write,
        /// `out` valid for writes of `*out_len` bytes.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* out: *mut u8, out_len: *mut usize) -> i32 {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                st32(run(|| {
                    // SAFETY: our boxed object and the caller's buffer (this
                    // function's contract).
                    unsafe { copy_out(&this::<F>(obj).$name($($a),*)?, out, out_len) }
                }))
            })
        }
    };
    ({$class:ident $ObjOf:ident} $(#[$doc:meta])* op $name:ident ($($a:ident : $t:ty),*) () () [] [val $rt:ty] [$($V:ident)?] [$($def:expr)?]) => {
        /// The slot of this operation: the value into `*out`.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open,
        /// passed to a slot of its own table (host contract, see
        /// [`crate::abi::object`]); `out` null or valid for a write.
        pub(in super::super) unsafe extern "C" fn $name<F: FabricOps>(obj: Obj, $($a: $t,)* out: *mut $rt) -> i32 {
            guard(concat!(stringify!($class), ".", stringify!($name)), || {
                st32(run(|| {
                    need_out(out)?;
                    // SAFETY: our boxed object (this function's contract).
                    let v = unsafe { this::<F>(obj) }.$name($($a),*);
                    // SAFETY: `out` non-null and valid for a write (contract).
                    unsafe { out.write(v) };
                    Ok(())
                }))
            })
        }
    };
}

/// One slot of a generated table (see [`ctl_trampolines!`]).
macro_rules! ctl_assign {
    ({$t:ident} $(#[$doc:meta])* close) => {
        $t.close = slots::close::<F>;
    };
    ({$t:ident} fn $name:ident [] $($prov:tt)*) => {
        $t.$name = hand::$name::<F>;
    };
    ({$t:ident} fn $name:ident [$adapter:ident] $($prov:tt)*) => {
        $t.$name = $adapter::<F>;
    };
    ({$t:ident} $(#[$doc:meta])* op $name:ident $($rest:tt)*) => {
        $t.$name = slots::$name::<F>;
    };
}

/// Defines, in a class's adapter file, `Boxed<F>` (the box behind the class's object
/// pointers: the provider's object, or a struct holding it in a field) and
/// `this::<F>(obj)` (the provider's object in it).
macro_rules! boxed_objects {
    ($Obj:ty) => {
        boxed_objects!(@alias $Obj);
        boxed_objects!(@this $Obj, |boxed| boxed);
    };
    ($Boxed:ty => $Obj:ty, $field:ident) => {
        boxed_objects!(@alias $Boxed);
        boxed_objects!(@this $Obj, |boxed| &boxed.$field);
    };
    (@alias $Boxed:ty) => {
        /// The box behind this class's object pointers (what its `close` slot drops;
        /// unused for a list without `close`).
        #[allow(dead_code)]
        type Boxed<F> = $Boxed;
    };
    (@this $Obj:ty, |$boxed:ident| $get:expr) => {
        /// The provider's object behind a slot's object pointer.
        ///
        /// # Safety
        /// `obj` must be an object this adapter handed out for family `F`, still open
        /// (host contract, see [`crate::abi::object`]).
        unsafe fn this<'a, F: FabricOps>(obj: Obj) -> &'a $Obj {
            // SAFETY: by this function's contract.
            let $boxed: &'a Boxed<F> = unsafe { ob::<Boxed<F>>(obj) };
            $get
        }
    };
}

/// The slots that open an endpoint from C attributes (the domain's `endpoint`,
/// `scalable_ep`, `stx_ctx`, `srx_ctx`; a scalable endpoint's `tx_ctx`, `rx_ctx`):
/// the attributes from C (`conv`, an `unsafe fn` of the raw pointer), the provider
/// method of the object (`Of<F>`) with the scalars before and after them as the slot
/// has them, the endpoint handed out with the family's tables (`open_ep`).
///
/// ```text
/// "what" fn slot<Of>(scalars…; attr: *const Raw => conv; scalars…) => method;
/// ```
macro_rules! ep_open_slots {
    ($($what:literal fn $slot:ident<$Of:ident>($($a:ident: $at:ty),*; $attr:ident: *const $Raw:ty => $conv:ident; $($b:ident: $bt:ty),*) => $method:ident;)*) => {$(
        #[doc = concat!("Slot `", $what, "`: opens an endpoint.")]
        ///
        /// # Safety
        /// The object and the pointers as the slot contract says (see
        /// [`crate::abi::adapt`]).
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>(
            obj: Obj,
            $($a: $at,)*
            $attr: *const $Raw,
            $($b: $bt,)*
            out: *mut RawEp,
            err: *mut ErrBuf,
        ) -> i32 {
            let open = || {
                // SAFETY: our boxed object (host contract); the attributes valid, or
                // null where the slot allows it (contract).
                let (o, $attr) = unsafe { (ob::<$Of<F>>(obj), $conv($attr)?) };
                o.$method($($a,)* &$attr, $($b),*)
            };
            // SAFETY: `out` and `err` as the slot's contract says.
            unsafe { open_ep::<F>($what, out, err, open) }
        }
    )*};
}

/// Defines a slot that opens an object on its parent (`Of<F>`) and hands it out as a
/// `RawObj` with the family's table `TABLE`: check `out`, open, box, then call `then` on
/// the boxed value where given. Three forms, by what the slot passes besides `context`:
///
/// ```text
/// // an info (`fabric.domain`, `fabric.passive_ep`): `method(&info, context)`
/// "what" fn slot<Of>(info) => method => TABLE;
/// // required attributes, `conv` an `unsafe fn` of them (`domain.av_open`)
/// "what" fn slot<Of>(attr: *const Raw => conv) => method => TABLE;
/// // attributes that may name a wait set (`cq_open`, `cntr_open`, `eq_open`): `conv`
/// // a function of them, the set checked by `attrs_in_set`; `method`, or
/// // `method_in_set` when a set is named; the object `o` handed out as `wrap` (given
/// // the attributes `a`)
/// "what" fn slot<Of>(attr: *const Raw => conv) => method or method_in_set,
///     |o, a| wrap => TABLE, then published;
/// ```
macro_rules! open_slot {
    ($what:literal fn $slot:ident<$Of:ident>(info) => $method:ident => $TABLE:ident) => {
        open_slot! { @frame $what fn $slot<$Of>(info: *const RawInfo) [parent context] => $TABLE {
            // SAFETY: `info` valid for the call (contract).
            parent.$method(&unsafe { info_from_raw(info)? }, context)?
        } }
    };
    ($what:literal fn $slot:ident<$Of:ident>(attr: *const $Raw:ty => $conv:path) => $method:ident => $TABLE:ident) => {
        open_slot! { @frame $what fn $slot<$Of>(attr: *const $Raw) [parent context] => $TABLE {
            // SAFETY: `attr` null or valid (contract).
            let attr = unsafe { $conv(ref_req(attr, concat!($what, ": null attributes"))?)? };
            parent.$method(&attr, context)?
        } }
    };
    ($what:literal fn $slot:ident<$Of:ident>(attr: *const $Raw:ty => $conv:path)
        => $method:ident or $method_in_set:ident,
        |$o:ident, $a:ident| $wrap:expr => $TABLE:ident $(, then $then:ident)?) => {
        open_slot! { @frame $what fn $slot<$Of>(attr: *const $Raw) [parent context] => $TABLE $(, then $then)? {
            let null_msg = concat!($what, ": null attributes");
            // SAFETY: `attr` null or valid (contract).
            let ($a, set) = unsafe { attrs_in_set(attr, null_msg, $conv, |a| a.wait_obj)? };
            let $o = match set {
                // SAFETY: a wait set of this family, open (host contract).
                Some(set) => parent.$method_in_set(&$a, unsafe { ob::<WaitOf<F>>(set) }, context)?,
                None => parent.$method(&$a, context)?,
            };
            $wrap
        } }
    };
    // What the forms share: the slot, the `out` check, the parent, the hand-out. The
    // names the body uses (`arg`, `parent`, `context`) come from the forms above.
    (@frame $what:literal fn $slot:ident<$Of:ident>($arg:ident: *const $Raw:ty)
        [$parent:ident $context:ident] => $TABLE:ident $(, then $then:ident)? $open:block) => {
        #[doc = concat!("Slot `", $what, "`: opens an object on its parent.")]
        ///
        /// # Safety
        /// The parent and the pointers as the slot contract says (see
        /// [`crate::abi::adapt`]).
        pub(super) unsafe extern "C" fn $slot<F: FabricOps>(
            obj: Obj,
            $arg: *const $Raw,
            $context: usize,
            out: *mut RawObj,
            err: *mut ErrBuf,
        ) -> i32 {
            guard_ctl(err, $what, || {
                need_out(out)?;
                // SAFETY: our boxed parent (host contract).
                let $parent = unsafe { ob::<$Of<F>>(obj) };
                let opened = $open;
                // SAFETY: `out` checked.
                let _placed = unsafe { put_obj(out, opened, Adapt::<F>::$TABLE) };
                $(_placed.$then();)?
                Ok(())
            })
        }
    };
}

use {boxed_objects, ctl_assign, ctl_trampoline, ctl_trampolines, ep_open_slots, open_slot};

// ---------------------------------------------------------------------------------------
// The host side of the provider's root table: the public methods that call its slots
// (the provider methods come from the list).

use crate::abi::object::{close_of, ctl, Node};
use crate::abi::tables::call_slot;
use crate::abi::wire::{outcome_from_raw, RequestBox};
use crate::attr::Info;
use crate::fabric::Fabric;
use crate::getinfo::GetinfoRequest;
use std::sync::Arc;

impl crate::abi::object::ProviderHandle {
    /// Ask the provider, across the boundary.
    pub fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        let rb = RequestBox::new(req);
        let mut out = RawGetinfoResult::empty();
        let p = &*self.inner;
        // SAFETY: the table and context came from the provider's init; `rb` and `out`
        // live across the call.
        let rc =
            unsafe { call_slot!(&*p.ops, ProviderTable.getinfo(p.ctx, rb.as_ptr(), &mut out)) };
        let outcome = if rc != 0 {
            GetinfoOutcome {
                infos: Vec::new(),
                verdicts: Vec::new(),
                error: Some(Error::from_status(rc as isize).context(format!("{} getinfo", p.name))),
            }
        } else {
            // SAFETY: the provider filled `out` and keeps it until free_getinfo.
            unsafe { outcome_from_raw(&out, &p.name) }
        };
        // SAFETY: hand the result back to the side that allocated it.
        unsafe { call_slot!(&*p.ops, ProviderTable.free_getinfo(p.ctx, &mut out)) };
        outcome
    }

    /// Open a fabric, across the boundary. The fabric keeps the provider alive.
    pub fn open_fabric(&self, info: &Info) -> Result<Fabric> {
        let ib = RawInfoBox::new(info);
        let mut out = RawObj::empty();
        let p = &*self.inner;
        // SAFETY: as in `getinfo`; `ib` and `out` live across the call.
        ctl(|eb| unsafe {
            call_slot!(
                &*p.ops,
                ProviderTable.fabric(p.ctx, ib.as_ptr(), 0, &mut out, eb)
            )
        })
        .map_err(|e| e.context(format!("{} fabric", p.name)))?;
        let ops = out.ops as *const FabricTable;
        let closer = close_of(out.obj, ops, "fabric")?;
        let node = Node::root(
            self.family(),
            p.name.clone(),
            closer,
            Some(self.inner.clone() as Arc<dyn Any + Send + Sync>),
        );
        // SAFETY: `obj`/`ops` are the provider's fabric, owned from now on by `node`.
        Ok(unsafe { Fabric::from_raw(out.obj, ops, node) })
    }
}
