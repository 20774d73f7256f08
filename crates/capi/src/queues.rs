//! The domain's table, and the C objects of completion queues, event queues, address
//! vectors and counters.
//!
//! CQ reads hand the program's buffer to the provider as the CQ's entry format (the
//! format chosen at open, `FI_CQ_FORMAT_CONTEXT` for `UNSPEC`); error entries follow the
//! `err_data` rules of the fabric's API version: before 1.5 the provider's buffer is
//! always returned (what the program passed is ignored). EQ events are written in the
//! C entry forms: `struct fi_eq_entry` for plain events, `struct fi_eq_cm_entry` with
//! the connection data after it for `FI_CONNREQ`, `FI_CONNECTED` and `FI_SHUTDOWN` (a
//! connection request's info is a list the program frees with `fi_freeinfo`); the
//! `fid` of an event is the C object it is about.
//!
//! Invariants: as in [`crate::obj`]. Every buffer length the program passes is checked
//! before anything is written; too small is `-FI_ETOOSMALL`.

use std::ffi::{c_char, c_int, c_void};
use std::mem::size_of;
use std::ptr;
use std::sync::Mutex;

use ofi::abi::object::AsFid;
use ofi::abi::raw::{
    CqDataEntry, CqEntry, CqErrEntry, CqMsgEntry, CqTaggedEntry, RawCntrAttr, RawCqAttr, RawEqAttr,
};
use ofi::cntr::Counter;
use ofi::cq::CompletionQueue;
use ofi::eq::{Event, EventQueue};
use ofi::{AtomicOp, CqFormat, Datatype, EqEvent, Errno, Version};

use crate::fid::Fid;
use crate::info::{list_to_c, FiInfo};
use crate::obj::{
    cast_fid, code, fid_header, put_result, CObj, DomainObj, FabricObj, FidDomain, FidFabric,
    EINVAL,
};
use crate::sets::open_waitable;
use crate::{guard, guard_try, interned_ptr};

fn etoosmall() -> isize {
    -(Errno::ETOOSMALL.0 as isize)
}

fn ssize(r: ofi::Result<usize>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => e.to_status(),
    }
}

// ---------------------------------------------------------------------------------
// Domain table.

/// `struct fi_ops_domain`.
#[repr(C)]
pub struct FiOpsDomain {
    /// `size`.
    pub size: usize,
    /// `av_open`.
    pub av_open: unsafe extern "C" fn(
        *mut FidDomain,
        *mut crate::av::FiAvAttr,
        *mut *mut crate::av::FidAv,
        *mut c_void,
    ) -> c_int,
    /// `cq_open`.
    pub cq_open:
        unsafe extern "C" fn(*mut FidDomain, *mut RawCqAttr, *mut *mut FidCq, *mut c_void) -> c_int,
    /// `endpoint`.
    pub endpoint: unsafe extern "C" fn(
        *mut FidDomain,
        *mut FiInfo,
        *mut *mut crate::endpoint::FidEp,
        *mut c_void,
    ) -> c_int,
    /// `scalable_ep`.
    pub scalable_ep: unsafe extern "C" fn(
        *mut FidDomain,
        *mut FiInfo,
        *mut *mut crate::endpoint::FidEp,
        *mut c_void,
    ) -> c_int,
    /// `cntr_open`.
    pub cntr_open: unsafe extern "C" fn(
        *mut FidDomain,
        *mut RawCntrAttr,
        *mut *mut FidCntr,
        *mut c_void,
    ) -> c_int,
    /// `poll_open`.
    pub poll_open: unsafe extern "C" fn(*mut FidDomain, *mut c_void, *mut *mut c_void) -> c_int,
    /// `stx_ctx`.
    pub stx_ctx:
        unsafe extern "C" fn(*mut FidDomain, *mut c_void, *mut *mut c_void, *mut c_void) -> c_int,
    /// `srx_ctx`.
    pub srx_ctx:
        unsafe extern "C" fn(*mut FidDomain, *mut c_void, *mut *mut c_void, *mut c_void) -> c_int,
    /// `query_atomic`.
    pub query_atomic: unsafe extern "C" fn(
        *mut FidDomain,
        u32,
        u32,
        *mut ofi::abi::raw::AtomicAttr,
        u64,
    ) -> c_int,
    /// `query_collective`.
    pub query_collective: unsafe extern "C" fn(*mut FidDomain, u32, *mut c_void, u64) -> c_int,
    /// `endpoint2`.
    pub endpoint2: unsafe extern "C" fn(
        *mut FidDomain,
        *mut FiInfo,
        *mut *mut crate::endpoint::FidEp,
        u64,
        *mut c_void,
    ) -> c_int,
}

crate::fid::enosys_slots! {
    fn query_collective_enosys(*mut FidDomain, u32, *mut c_void, u64) -> c_int;
}

/// Slots of the C tables this library does not implement that hand out an object:
/// each clears its out-pointer argument (`out`, when the program gave one) and
/// returns `-FI_ENOSYS`. `fn name(types before; out: *mut *mut T; types after);`
macro_rules! enosys_out_slots {
    ($($(#[$doc:meta])* fn $name:ident($($pre:ty),+; out: *mut *mut $ot:ty $(; $($post:ty),+)?);)*) => {$(
        $(#[$doc])*
        unsafe extern "C" fn $name($(_: $pre,)+ out: *mut *mut $ot, $($(_: $post),+)?) -> c_int {
            // SAFETY: per the C API (`out` null or writable).
            unsafe { $crate::queues::null_out(out) };
            $crate::fid::ENOSYS
        }
    )*};
}

pub(crate) use enosys_out_slots;

/// Clears an out pointer when the program gave one.
///
/// # Safety
/// `out` is null or writable.
pub(crate) unsafe fn null_out<T>(out: *mut *mut T) {
    if !out.is_null() {
        // SAFETY: the caller's contract.
        unsafe { out.write(ptr::null_mut()) };
    }
}

/// The out-pointer of a call that makes an object, and the argument the call needs:
/// clears `out` when the program gave one (a refused call leaves no stale pointer
/// behind), then refuses a null `out` or `arg` with `-FI_EINVAL`.
///
/// # Safety
/// `out` is null or writable.
pub(crate) unsafe fn prepare_out<T, A>(out: *mut *mut T, arg: *const A) -> Result<(), c_int> {
    // SAFETY: the caller's contract.
    unsafe { null_out(out) };
    if out.is_null() || arg.is_null() {
        return Err(EINVAL);
    }
    Ok(())
}

unsafe extern "C" fn domain_query_atomic(
    domain: *mut FidDomain,
    datatype: u32,
    op: u32,
    attr: *mut ofi::abi::raw::AtomicAttr,
    flags: u64,
) -> c_int {
    guard(|| {
        // SAFETY: our domain.
        let d = unsafe { DomainObj::of(domain) };
        let (Some(dt), Some(op)) = (Datatype::from_raw(datatype), AtomicOp::from_raw(op)) else {
            return EINVAL;
        };
        // SAFETY: `attr` per the C API.
        unsafe { put_result(attr, d.r.domain.query_atomic(dt, op, flags)) }
    })
}

/// The `fi_ops_domain` of a domain.
pub static DOMAIN_OPS: FiOpsDomain = crate::fid::ops_table!(FiOpsDomain {
    av_open: crate::av::domain_av_open,
    cq_open: domain_cq_open,
    endpoint: crate::endpoint::domain_endpoint,
    scalable_ep: crate::contexts::domain_scalable_ep,
    cntr_open: domain_cntr_open,
    poll_open: crate::sets::domain_poll_open,
    stx_ctx: crate::contexts::domain_shared_ctx::<crate::contexts::Tx>,
    srx_ctx: crate::contexts::domain_shared_ctx::<crate::contexts::Rx>,
    query_atomic: domain_query_atomic,
    query_collective: query_collective_enosys,
    endpoint2: crate::endpoint::domain_endpoint2,
});

// ---------------------------------------------------------------------------------
// Completion queues.

/// `struct fid_cq`.
#[repr(C)]
pub struct FidCq {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsCq,
}

/// What a CQ object holds.
pub struct CqState {
    /// The ofi CQ.
    pub cq: CompletionQueue,
    /// Its entry format.
    pub format: CqFormat,
    /// The fabric's API version (the `err_data` rules).
    pub api_version: Version,
}

/// A CQ object.
pub type CqObj = CObj<FidCq, CqState>;

/// `struct fi_ops_cq`.
#[repr(C)]
pub struct FiOpsCq {
    /// `size`.
    pub size: usize,
    /// `read`.
    pub read: unsafe extern "C" fn(*mut FidCq, *mut c_void, usize) -> isize,
    /// `readfrom`.
    pub readfrom: unsafe extern "C" fn(*mut FidCq, *mut c_void, usize, *mut u64) -> isize,
    /// `readerr`.
    pub readerr: unsafe extern "C" fn(*mut FidCq, *mut CqErrEntry, u64) -> isize,
    /// `sread`.
    pub sread: unsafe extern "C" fn(*mut FidCq, *mut c_void, usize, *const c_void, c_int) -> isize,
    /// `sreadfrom`.
    pub sreadfrom: unsafe extern "C" fn(
        *mut FidCq,
        *mut c_void,
        usize,
        *mut u64,
        *const c_void,
        c_int,
    ) -> isize,
    /// `signal`.
    pub signal: unsafe extern "C" fn(*mut FidCq) -> c_int,
    /// `strerror`.
    pub strerror:
        unsafe extern "C" fn(*mut FidCq, c_int, *const c_void, *mut c_char, usize) -> *const c_char,
}

/// `count` entries of `E` at `buf` (an empty slice for a zero count).
///
/// # Safety
/// `buf` is valid and aligned for `count` entries when `count > 0`.
pub(crate) unsafe fn entries<'a, E>(buf: *mut c_void, count: usize) -> &'a mut [E] {
    if count == 0 || buf.is_null() {
        &mut []
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<E>(), count) }
    }
}

/// Runs `$call` with `$buf` viewed as the CQ format's entry type.
macro_rules! by_format {
    ($format:expr, $buf:expr, $count:expr, |$s:ident| $call:expr) => {
        // SAFETY: the program's buffer holds `count` entries of the CQ's format.
        unsafe {
            match $format {
                CqFormat::Msg => {
                    let $s = entries::<CqMsgEntry>($buf, $count);
                    $call
                }
                CqFormat::Data => {
                    let $s = entries::<CqDataEntry>($buf, $count);
                    $call
                }
                CqFormat::Tagged => {
                    let $s = entries::<CqTaggedEntry>($buf, $count);
                    $call
                }
                _ => {
                    let $s = entries::<CqEntry>($buf, $count);
                    $call
                }
            }
        }
    };
}

crate::fid::wait_fd_fi_ops! {
    /// The `fi_ops` of a CQ.
    pub static CQ_FI_OPS: CqObj,
        close cq_close = |c| c.cq.close(), control cq_control = |c| c.r.cq.wait_fd();
}

unsafe extern "C" fn cq_read(cq: *mut FidCq, buf: *mut c_void, count: usize) -> isize {
    guard(|| {
        // SAFETY: our CQ.
        let c = unsafe { CqObj::of(cq) };
        ssize(by_format!(c.r.format, buf, count, |s| c.r.cq.read(s)))
    })
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut FidCq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
) -> isize {
    guard(|| {
        // SAFETY: our CQ.
        let c = unsafe { CqObj::of(cq) };
        if src.is_null() {
            return ssize(by_format!(c.r.format, buf, count, |s| c.r.cq.read(s)));
        }
        // SAFETY: `src` holds `count` addresses (C API).
        let src = unsafe { entries::<u64>(src.cast(), count) };
        ssize(by_format!(c.r.format, buf, count, |s| c
            .r
            .cq
            .readfrom(s, src)))
    })
}

unsafe extern "C" fn cq_sread(
    cq: *mut FidCq,
    buf: *mut c_void,
    count: usize,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    guard(|| {
        // SAFETY: our CQ.
        let c = unsafe { CqObj::of(cq) };
        ssize(by_format!(c.r.format, buf, count, |s| c
            .r
            .cq
            .sread(s, timeout)))
    })
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut FidCq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    guard(|| {
        // SAFETY: our CQ.
        let c = unsafe { CqObj::of(cq) };
        if src.is_null() {
            // SAFETY: forwarded.
            return unsafe { cq_sread(cq, buf, count, cond, timeout) };
        }
        // SAFETY: `src` holds `count` addresses (C API).
        let src = unsafe { entries::<u64>(src.cast(), count) };
        ssize(by_format!(c.r.format, buf, count, |s| c
            .r
            .cq
            .sreadfrom(s, src, timeout)))
    })
}

unsafe extern "C" fn cq_readerr(cq: *mut FidCq, buf: *mut CqErrEntry, flags: u64) -> isize {
    guard(|| {
        // SAFETY: our CQ; `buf` per the C API.
        let (c, entry) = unsafe { (CqObj::of(cq), buf.as_mut()) };
        let Some(entry) = entry else {
            return EINVAL as isize;
        };
        if !c.r.api_version.at_least(Version::new(1, 5)) {
            // Before 1.5 the provider's buffer is returned; the program's is not used.
            entry.err_data = ptr::null_mut();
            entry.err_data_size = 0;
        }
        match c.r.cq.readerr(entry, flags) {
            Ok(()) => 1,
            Err(e) => e.to_status(),
        }
    })
}

unsafe extern "C" fn cq_signal(cq: *mut FidCq) -> c_int {
    // SAFETY: our CQ.
    guard(|| code(unsafe { CqObj::of(cq) }.r.cq.signal()))
}

/// Writes `text` into the program's `buf` (cut to `len` with a NUL) and returns it, or
/// an interned copy when `buf` is null.
///
/// # Safety
/// `buf` is null or writable for `len` bytes.
pub(crate) unsafe fn text_out(text: &str, buf: *mut c_char, len: usize) -> *const c_char {
    if buf.is_null() || len == 0 {
        return interned_ptr(text);
    }
    let n = text.len().min(len - 1);
    // SAFETY: the caller's contract.
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    buf
}

unsafe extern "C" fn cq_strerror(
    cq: *mut FidCq,
    prov_errno: c_int,
    err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    guard(|| {
        // SAFETY: our CQ.
        let c = unsafe { CqObj::of(cq) };
        let _ = err_data;
        let text = c.r.cq.strerror(prov_errno);
        // SAFETY: `buf` per the C API.
        unsafe { text_out(&text, buf, len) }
    })
}

/// The `fi_ops_cq` of a CQ.
pub static CQ_OPS: FiOpsCq = crate::fid::ops_table!(FiOpsCq {
    read: cq_read,
    readfrom: cq_readfrom,
    readerr: cq_readerr,
    sread: cq_sread,
    sreadfrom: cq_sreadfrom,
    signal: cq_signal,
    strerror: cq_strerror,
});

unsafe extern "C" fn domain_cq_open(
    domain: *mut FidDomain,
    attr: *mut RawCqAttr,
    cq: *mut *mut FidCq,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain.
        let d = unsafe { DomainObj::of(domain) };
        // An unspecified format is the context format, and the program's attribute
        // says so.
        // SAFETY: `attr` is null or valid (C API).
        if let Some(attr) = unsafe { attr.as_mut() } {
            if attr.format == CqFormat::Unspec.to_raw() {
                attr.format = CqFormat::Context.to_raw();
            }
        }
        let c = FidCq {
            fid: fid_header(crate::fid::FI_CLASS_CQ, context, &CQ_FI_OPS),
            ops: &CQ_OPS,
        };
        // SAFETY: `attr` and `cq` per the C API.
        unsafe {
            open_waitable(attr, cq, &d.r.domain, context, |q, a| {
                let state = CqState {
                    cq: q,
                    format: a.format,
                    api_version: d.r.api_version,
                };
                CqObj::into_c(c, state)
            })
        }
    })
}

/// Our CQ behind `fid`, if it is one.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn cq_of(fid: *const Fid) -> Option<&'static CqObj> {
    // SAFETY: the caller's contract.
    unsafe { cast_fid(fid, &CQ_FI_OPS) }
}

// ---------------------------------------------------------------------------------
// Event queues.

/// `struct fid_eq`.
#[repr(C)]
pub struct FidEq {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsEq,
}

/// What an EQ object holds.
pub struct EqState {
    /// The ofi EQ.
    pub eq: EventQueue,
    /// The error data of the last error entry read, until the next read.
    pub err_data: Mutex<Vec<u8>>,
}

impl EqState {
    /// The state of a newly opened EQ: no error data kept yet.
    pub fn new(eq: EventQueue) -> EqState {
        EqState {
            eq,
            err_data: Mutex::new(Vec::new()),
        }
    }
}

/// An EQ object.
pub type EqObj = CObj<FidEq, EqState>;

/// `struct fi_ops_eq`.
#[repr(C)]
pub struct FiOpsEq {
    /// `size`.
    pub size: usize,
    /// `read`.
    pub read: unsafe extern "C" fn(*mut FidEq, *mut u32, *mut c_void, usize, u64) -> isize,
    /// `readerr`.
    pub readerr: unsafe extern "C" fn(*mut FidEq, *mut FiEqErrEntry, u64) -> isize,
    /// `write`.
    pub write: unsafe extern "C" fn(*mut FidEq, u32, *const c_void, usize, u64) -> isize,
    /// `sread`.
    pub sread: unsafe extern "C" fn(*mut FidEq, *mut u32, *mut c_void, usize, c_int, u64) -> isize,
    /// `strerror`.
    pub strerror:
        unsafe extern "C" fn(*mut FidEq, c_int, *const c_void, *mut c_char, usize) -> *const c_char,
}

/// `struct fi_eq_entry`.
#[repr(C)]
pub struct FiEqEntry {
    /// `fid`.
    pub fid: *mut Fid,
    /// `context`.
    pub context: *mut c_void,
    /// `data`.
    pub data: u64,
}

/// `struct fi_eq_cm_entry` (its flexible `data` follows).
#[repr(C)]
pub struct FiEqCmEntry {
    /// `fid`.
    pub fid: *mut Fid,
    /// `info`.
    pub info: *mut FiInfo,
}

/// `struct fi_eq_err_entry`.
#[repr(C)]
pub struct FiEqErrEntry {
    /// `fid`.
    pub fid: *mut Fid,
    /// `context`.
    pub context: *mut c_void,
    /// `data`.
    pub data: u64,
    /// `err`.
    pub err: c_int,
    /// `prov_errno`.
    pub prov_errno: c_int,
    /// `err_data`.
    pub err_data: *mut c_void,
    /// `err_data_size`.
    pub err_data_size: usize,
}

/// `FI_PEEK`.
const FI_PEEK: u64 = 1 << 19;

fn is_cm(event: EqEvent) -> bool {
    matches!(
        event,
        EqEvent::ConnReq | EqEvent::Connected | EqEvent::Shutdown
    )
}

/// Writes `ev` in its C form into `buf`; returns the bytes written.
///
/// # Safety
/// `buf` is writable for `len` bytes; `event` null or writable.
unsafe fn event_out(ev: Event, event: *mut u32, buf: *mut c_void, len: usize) -> isize {
    if !event.is_null() {
        // SAFETY: the caller's contract.
        unsafe { event.write(ev.event.to_raw()) };
    }
    if is_cm(ev.event) {
        let head = size_of::<FiEqCmEntry>();
        if buf.is_null() || len < head {
            return etoosmall();
        }
        let info = match ev.info {
            Some(i) => match list_to_c(std::slice::from_ref(&*i)) {
                Ok(p) => p,
                Err(e) => return e.to_status(),
            },
            None => ptr::null_mut(),
        };
        let n = ev.cm_data.len().min(len - head);
        // SAFETY: `buf` holds `len >= head + n` bytes (checked).
        unsafe {
            buf.cast::<FiEqCmEntry>().write_unaligned(FiEqCmEntry {
                fid: ev.fid as *mut Fid,
                info,
            });
            ptr::copy_nonoverlapping(ev.cm_data.as_ptr(), buf.cast::<u8>().add(head), n);
        }
        (head + n) as isize
    } else {
        if buf.is_null() || len < size_of::<FiEqEntry>() {
            return etoosmall();
        }
        // SAFETY: `buf` holds an entry (checked).
        unsafe {
            buf.cast::<FiEqEntry>().write_unaligned(FiEqEntry {
                fid: ev.fid as *mut Fid,
                context: ev.context as *mut c_void,
                data: ev.data,
            })
        };
        size_of::<FiEqEntry>() as isize
    }
}

crate::fid::wait_fd_fi_ops! {
    /// The `fi_ops` of an EQ.
    pub static EQ_FI_OPS: EqObj,
        close eq_close = |e| e.eq.close(), control eq_control = |e| e.r.eq.wait_fd();
}

/// Reads (or peeks at) one event, checking the buffer's room before consuming it
/// (`sread` blocks up to `timeout` ms for one; a too-small buffer then loses it, as
/// the size is known only once it is read).
fn eq_take(e: &EqObj, len: usize, flags: u64, sread: Option<c_int>) -> Result<Event, isize> {
    let peeked = match (e.r.eq.peek(), sread) {
        (Ok(ev), _) => ev,
        (Err(err), Some(timeout)) if err.code() == Errno::EAGAIN => {
            return e.r.eq.sread(timeout).map_err(|err| err.to_status());
        }
        (Err(err), _) => return Err(err.to_status()),
    };
    let need = if is_cm(peeked.event) {
        size_of::<FiEqCmEntry>()
    } else {
        size_of::<FiEqEntry>()
    };
    if len < need {
        return Err(etoosmall());
    }
    if flags & FI_PEEK != 0 {
        return Ok(peeked);
    }
    e.r.eq.read().map_err(|err| err.to_status())
}

unsafe extern "C" fn eq_read(
    eq: *mut FidEq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    guard(|| {
        // SAFETY: our EQ.
        let e = unsafe { EqObj::of(eq) };
        match eq_take(e, len, flags, None) {
            // SAFETY: `buf` holds `len` bytes (C API).
            Ok(ev) => unsafe { event_out(ev, event, buf, len) },
            Err(c) => c,
        }
    })
}

unsafe extern "C" fn eq_sread(
    eq: *mut FidEq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    guard(|| {
        // SAFETY: our EQ.
        let e = unsafe { EqObj::of(eq) };
        match eq_take(e, len, flags, Some(timeout)) {
            // SAFETY: `buf` holds `len` bytes (C API).
            Ok(ev) => unsafe { event_out(ev, event, buf, len) },
            Err(c) => c,
        }
    })
}

unsafe extern "C" fn eq_readerr(eq: *mut FidEq, buf: *mut FiEqErrEntry, _flags: u64) -> isize {
    guard(|| {
        // SAFETY: our EQ; `buf` per the C API.
        let (e, out) = unsafe { (EqObj::of(eq), buf.as_mut()) };
        let Some(out) = out else {
            return EINVAL as isize;
        };
        let err = match e.r.eq.readerr() {
            Ok(err) => err,
            Err(x) => return x.to_status(),
        };
        out.fid = err.fid as *mut Fid;
        out.context = err.context as *mut c_void;
        out.data = err.data;
        out.err = err.err.0;
        out.prov_errno = err.prov_errno;
        if !out.err_data.is_null() && out.err_data_size > 0 {
            let n = out.err_data_size.min(err.err_data.len());
            // SAFETY: the program's buffer holds `err_data_size` bytes (1.5+ rule).
            unsafe {
                ptr::copy_nonoverlapping(err.err_data.as_ptr(), out.err_data.cast::<u8>(), n)
            };
            out.err_data_size = n;
        } else {
            let mut kept = e.r.err_data.lock().unwrap_or_else(|p| p.into_inner());
            *kept = err.err_data;
            out.err_data = if kept.is_empty() {
                ptr::null_mut()
            } else {
                kept.as_mut_ptr().cast()
            };
            out.err_data_size = kept.len();
        }
        size_of::<FiEqErrEntry>() as isize
    })
}

unsafe extern "C" fn eq_write(
    eq: *mut FidEq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    guard(|| {
        // SAFETY: our EQ.
        let e = unsafe { EqObj::of(eq) };
        let Some(kind) = EqEvent::from_raw(event) else {
            return EINVAL as isize;
        };
        if buf.is_null() || len < size_of::<FiEqEntry>() || is_cm(kind) {
            return EINVAL as isize;
        }
        // SAFETY: `buf` holds an entry (checked).
        let entry = unsafe { buf.cast::<FiEqEntry>().read_unaligned() };
        let ev = Event {
            event: kind,
            fid: entry.fid as usize,
            context: entry.context as usize,
            data: entry.data,
            info: None,
            cm_data: Vec::new(),
        };
        match e.r.eq.write(&ev) {
            Ok(()) => len as isize,
            Err(x) => x.to_status(),
        }
    })
}

unsafe extern "C" fn eq_strerror(
    eq: *mut FidEq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    guard(|| {
        // SAFETY: our EQ.
        let text = unsafe { EqObj::of(eq) }.r.eq.strerror(prov_errno);
        // SAFETY: `buf` per the C API.
        unsafe { text_out(&text, buf, len) }
    })
}

/// The `fi_ops_eq` of an EQ.
pub static EQ_OPS: FiOpsEq = crate::fid::ops_table!(FiOpsEq {
    read: eq_read,
    readerr: eq_readerr,
    write: eq_write,
    sread: eq_sread,
    strerror: eq_strerror,
});

/// `fi_eq_open` (the fabric table's slot).
///
/// # Safety
/// `fabric` is a fabric of this library; the other pointers per the C API.
pub unsafe extern "C" fn fabric_eq_open(
    fabric: *mut FidFabric,
    attr: *mut c_void,
    eq: *mut *mut c_void,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our fabric.
        let f = unsafe { FabricObj::of(fabric) };
        let c = FidEq {
            fid: fid_header(crate::fid::FI_CLASS_EQ, context, &EQ_FI_OPS),
            ops: &EQ_OPS,
        };
        // SAFETY: `attr` (a `struct fi_eq_attr`) and `eq` per the C API.
        unsafe {
            open_waitable(attr.cast::<RawEqAttr>(), eq, &f.r, context, |q, _| {
                EqObj::into_c(c, EqState::new(q)).cast()
            })
        }
    })
}

/// Our EQ behind `fid`, if it is one.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn eq_of(fid: *const Fid) -> Option<&'static EqObj> {
    // SAFETY: the caller's contract.
    unsafe { cast_fid(fid, &EQ_FI_OPS) }
}

/// `fi_bind` of an event queue (to a domain, AV or passive endpoint): `bind` with our EQ
/// behind `bfid`; anything else is `-FI_EINVAL`.
///
/// # Safety
/// `bfid` is null or a valid `struct fid`.
pub(crate) unsafe fn bind_eq_of(
    bfid: *const Fid,
    bind: impl FnOnce(&EventQueue) -> ofi::Result<()>,
) -> c_int {
    // SAFETY: the caller's contract.
    match unsafe { eq_of(bfid) } {
        Some(eq) => code(bind(&eq.r.eq)),
        None => EINVAL,
    }
}

// ---------------------------------------------------------------------------------
// Counters.

/// `struct fid_cntr`.
#[repr(C)]
pub struct FidCntr {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsCntr,
}

/// A counter object.
pub type CntrObj = CObj<FidCntr, Counter>;

/// `struct fi_ops_cntr`.
#[repr(C)]
pub struct FiOpsCntr {
    /// `size`.
    pub size: usize,
    /// `read`.
    pub read: unsafe extern "C" fn(*mut FidCntr) -> u64,
    /// `readerr`.
    pub readerr: unsafe extern "C" fn(*mut FidCntr) -> u64,
    /// `add`.
    pub add: unsafe extern "C" fn(*mut FidCntr, u64) -> c_int,
    /// `set`.
    pub set: unsafe extern "C" fn(*mut FidCntr, u64) -> c_int,
    /// `wait`.
    pub wait: unsafe extern "C" fn(*mut FidCntr, u64, c_int) -> c_int,
    /// `adderr`.
    pub adderr: unsafe extern "C" fn(*mut FidCntr, u64) -> c_int,
    /// `seterr`.
    pub seterr: unsafe extern "C" fn(*mut FidCntr, u64) -> c_int,
}

crate::fid::wait_fd_fi_ops! {
    /// The `fi_ops` of a counter.
    pub static CNTR_FI_OPS: CntrObj,
        close cntr_close = Counter::close, control cntr_control = |k| k.r.wait_fd();
}

macro_rules! cntr_slot {
    ($name:ident($($a:ident: $t:ty),*) -> $ret:ty = |$c:ident| $body:expr) => {
        unsafe extern "C" fn $name(cntr: *mut FidCntr, $($a: $t),*) -> $ret {
            guard(|| {
                // SAFETY: our counter.
                let $c = &unsafe { CntrObj::of(cntr) }.r;
                $body
            })
        }
    };
}

cntr_slot!(cntr_read() -> u64 = |c| c.read().unwrap_or(0));
cntr_slot!(cntr_readerr() -> u64 = |c| c.readerr().unwrap_or(0));
cntr_slot!(cntr_add(v: u64) -> c_int = |c| code(c.add(v)));
cntr_slot!(cntr_set(v: u64) -> c_int = |c| code(c.set(v)));
cntr_slot!(cntr_adderr(v: u64) -> c_int = |c| code(c.adderr(v)));
cntr_slot!(cntr_seterr(v: u64) -> c_int = |c| code(c.seterr(v)));
cntr_slot!(cntr_wait(threshold: u64, timeout: c_int) -> c_int = |c| code(c.wait(threshold, timeout)));

/// The `fi_ops_cntr` of a counter.
pub static CNTR_OPS: FiOpsCntr = crate::fid::ops_table!(FiOpsCntr {
    read: cntr_read,
    readerr: cntr_readerr,
    add: cntr_add,
    set: cntr_set,
    wait: cntr_wait,
    adderr: cntr_adderr,
    seterr: cntr_seterr,
});

unsafe extern "C" fn domain_cntr_open(
    domain: *mut FidDomain,
    attr: *mut RawCntrAttr,
    cntr: *mut *mut FidCntr,
    context: *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: our domain.
        let d = unsafe { DomainObj::of(domain) };
        let c = FidCntr {
            fid: fid_header(crate::fid::FI_CLASS_CNTR, context, &CNTR_FI_OPS),
            ops: &CNTR_OPS,
        };
        // SAFETY: `attr` and `cntr` per the C API.
        unsafe {
            open_waitable(attr, cntr, &d.r.domain, context, |k, _| {
                CntrObj::into_c(c, k)
            })
        }
    })
}

/// Our counter behind `fid`, if it is one.
///
/// # Safety
/// `fid` is null or a valid `struct fid`.
pub unsafe fn cntr_of(fid: *const Fid) -> Option<&'static CntrObj> {
    // SAFETY: the caller's contract.
    unsafe { cast_fid(fid, &CNTR_FI_OPS) }
}

/// `fi_trywait` over CQs, EQs and counters of this library.
///
/// # Safety
/// `fabric` is a fabric of this library; `fids` holds `count` valid fids.
pub unsafe fn trywait(fabric: *mut FidFabric, fids: *mut *mut Fid, count: c_int) -> c_int {
    let Ok(n) = usize::try_from(count) else {
        return EINVAL;
    };
    if fids.is_null() && n > 0 {
        return EINVAL;
    }
    // SAFETY: our fabric (the slot's object).
    let f = unsafe { FabricObj::of(fabric) };
    let mut objs: Vec<&dyn AsFid> = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `count` fids (C API).
        let fid = unsafe { *fids.add(i) };
        // SAFETY: each is a valid fid (C API).
        unsafe {
            if let Some(c) = cq_of(fid) {
                objs.push(&c.r.cq);
            } else if let Some(e) = eq_of(fid) {
                objs.push(&e.r.eq);
            } else if let Some(k) = cntr_of(fid) {
                objs.push(&k.r);
            } else {
                return EINVAL;
            }
        }
    }
    code(f.r.trywait(&objs))
}
