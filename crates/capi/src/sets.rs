//! Wait sets (`fi_wait_open`, `fi_wait`) and poll sets (`fi_poll_open`, `fi_poll`,
//! `fi_poll_add`, `fi_poll_del`) in the libfabric 1.17 layouts, over
//! [`ofi::wait::WaitSet`] and [`ofi::poll::PollSet`].
//!
//! A CQ, counter or EQ opened with `wait_obj` `FI_WAIT_SET` and the attribute's `wait_set`
//! pointing at one of these wait sets signals it ([`set_of_attr`] resolves the
//! pointer); `fi_control(FI_GETWAIT)` on a wait set gives its file descriptor. A poll
//! set takes this library's CQs and counters; `fi_poll` reports the `context` of each
//! member with something new (the CQ's or counter's own `fid.context`, as the C
//! library does).
//!
//! Invariants: as in [`crate::obj`]; a wait set cannot be closed while a CQ or counter
//! signals it, nor a poll set's member while it is in the set (`-FI_EBUSY`, from the
//! ofi objects). Nothing here panics on program input: a foreign or null fid is
//! `-FI_EINVAL`.

use std::ffi::{c_int, c_void};

use ofi::abi::raw::RawWaitAttr;
use ofi::poll::PollSet;
use ofi::wait::{WaitAttr, WaitSet};

use crate::fid::{FiOps, Fid, FI_CLASS_POLL, FI_CLASS_WAIT};
use crate::obj::{
    code, fid_header, put_result, CObj, DomainObj, FabricObj, FidDomain, FidFabric, EINVAL,
};
use crate::queues::{cntr_of, cq_of};
use crate::{guard, guard_try, or_status, status};

/// `FI_WAIT_SET` (`enum fi_wait_obj`).
pub const FI_WAIT_SET: u32 = 2;

/// `struct fi_ops_wait`.
#[repr(C)]
pub struct FiOpsWait {
    /// `size`.
    pub size: usize,
    /// `wait`.
    pub wait: unsafe extern "C" fn(*mut FidWait, c_int) -> c_int,
}

/// `struct fid_wait`.
#[repr(C)]
pub struct FidWait {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsWait,
}

/// A wait-set object.
pub type WaitObj = CObj<FidWait, WaitSet>;

/// `struct fi_ops_poll`.
#[repr(C)]
pub struct FiOpsPoll {
    /// `size`.
    pub size: usize,
    /// `poll`.
    pub poll: unsafe extern "C" fn(*mut FidPoll, *mut *mut c_void, c_int) -> c_int,
    /// `poll_add`.
    pub poll_add: unsafe extern "C" fn(*mut FidPoll, *mut Fid, u64) -> c_int,
    /// `poll_del`.
    pub poll_del: unsafe extern "C" fn(*mut FidPoll, *mut Fid, u64) -> c_int,
}

/// `struct fid_poll`.
#[repr(C)]
pub struct FidPoll {
    /// `fid`.
    pub fid: Fid,
    /// `ops`.
    pub ops: *const FiOpsPoll,
}

/// A poll-set object.
pub type PollObj = CObj<FidPoll, PollSet>;

// ---------------------------------------------------------------------------------
// Wait sets.

/// The fabric's `wait_open` slot.
pub(crate) unsafe extern "C" fn fabric_wait_open(
    fabric: *mut FidFabric,
    attr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: `out` per the C API.
        unsafe { crate::queues::prepare_out(out, attr) }?;
        // SAFETY: our fabric; `attr` is a `struct fi_wait_attr` (C API), whose layout
        // `RawWaitAttr` has.
        let (f, attr) = unsafe { (FabricObj::of(fabric), &*attr.cast::<RawWaitAttr>()) };
        let a = or_status(WaitAttr::from_raw(attr))?;
        let c = FidWait {
            fid: fid_header(FI_CLASS_WAIT, std::ptr::null_mut(), &WAIT_FI_OPS),
            ops: &WAIT_OPS,
        };
        let made = f.r.wait_open(&a).map(|w| WaitObj::into_c(c, w));
        // SAFETY: checked non-null.
        Ok(unsafe { put_result(out.cast::<*mut FidWait>(), made) })
    })
}

crate::fid::wait_fd_fi_ops! {
    /// The `fi_ops` of a wait set.
    pub static WAIT_FI_OPS: WaitObj,
        close wait_close = WaitSet::close, control wait_control = |w| w.r.fd();
}

unsafe extern "C" fn wait_wait(waitset: *mut FidWait, timeout: c_int) -> c_int {
    // SAFETY: our wait set.
    guard(|| code(unsafe { WaitObj::of(waitset) }.r.wait(timeout)))
}

/// The `fi_ops_wait` of a wait set.
pub static WAIT_OPS: FiOpsWait = crate::fid::ops_table!(FiOpsWait { wait: wait_wait });

/// The wait set a CQ, counter or EQ attribute names: `Ok(None)` when `wait_obj` is not
/// `FI_WAIT_SET`; `-FI_EINVAL` when it is but `wait_set` is not one of ours.
///
/// # Safety
/// `wait_set` is null or a valid `struct fid_wait`.
pub unsafe fn set_of_attr(
    wait_obj: u32,
    wait_set: *mut c_void,
) -> Result<Option<&'static WaitObj>, c_int> {
    if wait_obj != FI_WAIT_SET {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    match unsafe { crate::obj::cast_fid(wait_set.cast::<Fid>(), &WAIT_FI_OPS) } {
        Some(w) => Ok(Some(w)),
        None => Err(EINVAL),
    }
}

/// A C queue attribute that may name a wait set (`struct fi_cq_attr`, `fi_eq_attr`,
/// `fi_cntr_attr`): what [`wait_and_attr`] reads, and how its queue opens.
pub trait WaitSetAttr {
    /// The attribute ofi opens the queue with.
    type Attr;
    /// The object the queue opens on (a domain or a fabric).
    type Parent;
    /// The queue.
    type Queue;
    /// `wait_obj` and `wait_set`.
    fn wait(&self) -> (u32, *mut c_void);
    /// The ofi attribute of this one without its wait set (a C object ofi does not
    /// read).
    fn to_attr(&self) -> ofi::Result<Self::Attr>;
    /// Opens the queue on `parent`, in wait set `set` or alone.
    fn open(
        parent: &Self::Parent,
        attr: &Self::Attr,
        set: Option<&WaitSet>,
        context: usize,
    ) -> ofi::Result<Self::Queue>;
}

/// Implements [`WaitSetAttr`] for raw attributes with `wait_obj` and `wait_set` fields:
/// `Raw => Attr, opened on Parent as Queue by open_in (in a set) or open_with (alone)`.
macro_rules! wait_set_attr {
    ($($Raw:ident => $Attr:ty, $Parent:ty => $Queue:ty: $open_in:ident / $open_with:ident;)*) => {$(
        impl WaitSetAttr for ofi::abi::raw::$Raw {
            type Attr = $Attr;
            type Parent = $Parent;
            type Queue = $Queue;
            fn wait(&self) -> (u32, *mut c_void) {
                (self.wait_obj, self.wait_set)
            }
            fn to_attr(&self) -> ofi::Result<$Attr> {
                let plain = ofi::abi::raw::$Raw {
                    wait_set: std::ptr::null_mut(),
                    ..*self
                };
                <$Attr>::from_raw(&plain)
            }
            fn open(
                parent: &$Parent,
                attr: &$Attr,
                set: Option<&WaitSet>,
                context: usize,
            ) -> ofi::Result<$Queue> {
                match set {
                    Some(w) => parent.$open_in(attr, w, context),
                    None => parent.$open_with(attr, context),
                }
            }
        }
    )*};
}

wait_set_attr! {
    RawCqAttr => ofi::cq::CqAttr, ofi::domain::Domain => ofi::cq::CompletionQueue: cq_open_in / cq_open_with;
    RawEqAttr => ofi::eq::EqAttr, ofi::fabric::Fabric => ofi::eq::EventQueue: eq_open_in / eq_open_with;
    RawCntrAttr => ofi::cntr::CntrAttr, ofi::domain::Domain => ofi::cntr::Counter: cntr_open_in / cntr_open_with;
}

/// The wait set a queue attribute names ([`set_of_attr`]) and its ofi attribute; `Err`
/// is the status to return (a foreign wait set, an attribute ofi refuses).
///
/// # Safety
/// The attribute's `wait_set` is a valid `struct fid_wait` when `wait_obj` is
/// `FI_WAIT_SET`.
pub unsafe fn wait_and_attr<A: WaitSetAttr>(
    attr: &A,
) -> Result<(Option<&'static WaitObj>, A::Attr), c_int> {
    let (wait_obj, wait_set) = attr.wait();
    // SAFETY: the caller's contract.
    let set = unsafe { set_of_attr(wait_obj, wait_set) }?;
    Ok((set, crate::or_status(attr.to_attr())?))
}

/// A queue's open slot (`fi_cq_open`, `fi_eq_open`, `fi_cntr_open`) after its owner is
/// found: the out pointer is cleared and a null one or a null attribute refused
/// ([`prepare_out`](crate::queues::prepare_out)) before anything opens; then the
/// attribute's wait set and ofi attribute are read ([`wait_and_attr`]), the queue opens
/// on `parent` in that set (alone for `None`, [`WaitSetAttr::open`]) with `context`, and
/// `wrap` makes its C object (given the attribute), which goes to `out`.
///
/// # Safety
/// `attr` is null or valid, its wait set as [`wait_and_attr`] needs; `out` is null or
/// writable.
pub(crate) unsafe fn open_waitable<A: WaitSetAttr, T>(
    attr: *const A,
    out: *mut *mut T,
    parent: &A::Parent,
    context: *mut c_void,
    wrap: impl FnOnce(A::Queue, &A::Attr) -> *mut T,
) -> Result<c_int, c_int> {
    // SAFETY: the caller's contract.
    unsafe { crate::queues::prepare_out(out, attr) }?;
    // SAFETY: checked non-null; valid by the caller's contract.
    let (set, a) = unsafe { wait_and_attr(&*attr) }?;
    let made = A::open(parent, &a, set.map(|w| &w.r), context as usize).map(|q| wrap(q, &a));
    // SAFETY: checked non-null.
    Ok(unsafe { put_result(out, made) })
}

// ---------------------------------------------------------------------------------
// Poll sets.

/// The domain's `poll_open` slot: a poll set of the domain's fabric.
pub(crate) unsafe extern "C" fn domain_poll_open(
    domain: *mut FidDomain,
    attr: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    guard_try(|| {
        // SAFETY: `out` per the C API.
        unsafe { crate::queues::prepare_out(out, attr) }?;
        // SAFETY: our domain.
        let d = unsafe { DomainObj::of(domain) };
        // SAFETY: the fabric outlives its domains (closing it answers FI_EBUSY).
        let f = unsafe { FabricObj::of(d.r.fabric) };
        let c = FidPoll {
            fid: fid_header(FI_CLASS_POLL, std::ptr::null_mut(), &POLL_FI_OPS),
            ops: &POLL_OPS,
        };
        let made = f.r.poll_open().map(|p| PollObj::into_c(c, p));
        // SAFETY: checked non-null.
        Ok(unsafe { put_result(out.cast::<*mut FidPoll>(), made) })
    })
}

unsafe extern "C" fn poll_close(fid: *mut Fid) -> c_int {
    // SAFETY: the slot of our own poll-set table.
    guard(|| unsafe { PollObj::close_with(fid.cast(), PollSet::close) })
}

/// The `fi_ops` of a poll set.
pub static POLL_FI_OPS: FiOps = FiOps::with_close(poll_close);

unsafe extern "C" fn poll_poll(
    pollset: *mut FidPoll,
    context: *mut *mut c_void,
    count: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: our poll set.
        let p = unsafe { PollObj::of(pollset) };
        let n = match usize::try_from(count) {
            Ok(n) if n > 0 && !context.is_null() => n,
            _ => return EINVAL,
        };
        let mut found = vec![0usize; n];
        match p.r.poll(&mut found) {
            Ok(k) => {
                for (i, &ctx) in found.iter().take(k).enumerate() {
                    // SAFETY: `context` holds `count` entries (C API); k <= count.
                    unsafe { context.add(i).write(ctx as *mut c_void) };
                }
                c_int::try_from(k).unwrap_or(c_int::MAX)
            }
            Err(e) => status(&e),
        }
    })
}

unsafe extern "C" fn poll_add(pollset: *mut FidPoll, event_fid: *mut Fid, _flags: u64) -> c_int {
    guard(|| {
        // SAFETY: our poll set; `event_fid` is null or a valid fid (C API).
        let (p, f) = unsafe { (PollObj::of(pollset), event_fid.as_ref()) };
        let Some(f) = f else { return EINVAL };
        let context = f.context as usize;
        // SAFETY: as above.
        unsafe {
            if let Some(c) = cq_of(event_fid) {
                code(p.r.add_cq(&c.r.cq, context))
            } else if let Some(k) = cntr_of(event_fid) {
                code(p.r.add_cntr(&k.r, context))
            } else {
                EINVAL
            }
        }
    })
}

unsafe extern "C" fn poll_del(pollset: *mut FidPoll, event_fid: *mut Fid, _flags: u64) -> c_int {
    guard(|| {
        // SAFETY: our poll set; `event_fid` is null or a valid fid (C API).
        let p = unsafe { PollObj::of(pollset) };
        // SAFETY: as above.
        unsafe {
            if let Some(c) = cq_of(event_fid) {
                code(p.r.del(&c.r.cq))
            } else if let Some(k) = cntr_of(event_fid) {
                code(p.r.del(&k.r))
            } else {
                EINVAL
            }
        }
    })
}

/// The `fi_ops_poll` of a poll set.
pub static POLL_OPS: FiOpsPoll = crate::fid::ops_table!(FiOpsPoll {
    poll: poll_poll,
    poll_add,
    poll_del,
});
