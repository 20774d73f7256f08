//! Triggered operations (fi_trigger(3)): a `*msg` data call made with `FI_TRIGGER`
//! is kept until a counter reaches a threshold, then issued as if posted then.
//!
//! # How the counter is named
//!
//! The call's context points to a [`TriggeredContext`] (`struct
//! fi_triggered_context`) whose `cntr` is the counter's object pointer as the host
//! sees it ([`Counter::trigger_ref`](ofi_core::cntr::Counter::trigger_ref); the C
//! API's `struct fid_cntr *`). Kit never dereferences that pointer: every [`KitCntr`]
//! records the address it was published at ([`KitCntr`]'s
//! `CntrOps::published`), and [`resolve_counter`] looks the pointer up among the
//! live published counters. A pointer that names none, or a counter of another
//! domain (another progress engine), is `FI_EINVAL`.
//!
//! # The queue
//!
//! A [`TriggerQueue`] per endpoint holds the deferred calls ([`OwnedCall`]: the
//! message and its arrays copied, so the application's `fi_msg*` structure may go
//! away after the call; the buffers themselves stay the application's, valid until
//! the operation completes as for any data call). At most `capacity` (the
//! endpoint's `tx_size`) wait at once: one more is `FI_EAGAIN`.
//!
//! The provider calls [`TriggerQueue::fire_ready`] from its progress (every counter
//! change a triggered operation can wait for happens in progress or in an
//! application call that drives it: a completion, `fi_cntr_add`/`fi_cntr_set`
//! followed by any read): each call whose counter has reached its threshold is
//! issued through the endpoint's [`DataPath`] without `FI_TRIGGER`; one that answers
//! `FI_EAGAIN` stays queued, in order; any other error is handed back for the
//! provider to complete as an error (CQ error entry, error counter), as a failure
//! after posting is. [`TriggerQueue::cancel_all`] empties the queue at close (the
//! provider completes each with `FI_ECANCELED`).
//!
//! # Invariants
//!
//! - A call is issued at most once, and calls on the same counter and threshold go
//!   in the order they were made.
//! - The queue's lock is never held while a call is issued (issuing may complete
//!   operations and change counters, which may fire more calls at the next round).
//!
//! Nothing here panics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ofi_core::abi::ops::{DataArgs, DescArg, IovArg, MsgArg, OpKind};
use ofi_core::abi::raw::{Ioc, Iov, Msg, MsgAtomic, MsgRma, MsgTagged, RmaIoc, RmaIov};
use ofi_core::cntr::{TriggeredContext, TRIGGER_THRESHOLD};
use ofi_core::provider::Desc;
use ofi_core::{Errno, Error, OpFlags, Result};

use crate::cntr::KitCntr;
use crate::dataops::DataPath;
use crate::progress::ProgressEngine;
use crate::wait::lock;

/// The counter a triggered context names, checked to be a live counter of the
/// domain whose progress engine is `engine`.
///
/// # Errors
/// `FI_EINVAL` for a null context, an event other than `FI_TRIGGER_THRESHOLD`
/// (`FI_ENOSYS` for the XPU form), a threshold of 0, a pointer that names no live
/// counter of this provider, or a counter of another domain.
///
/// # Safety
/// `context` is null or points to a readable [`TriggeredContext`] (the C API's
/// contract for a call made with `FI_TRIGGER`).
pub unsafe fn resolve_counter(
    prov: &str,
    context: usize,
    engine: &Arc<ProgressEngine>,
) -> Result<(KitCntr, u64)> {
    if context == 0 {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{prov}: FI_TRIGGER with a null context (a struct fi_triggered_context is needed)"
            ),
        ));
    }
    // SAFETY: the caller's contract; read unaligned, nothing relies on the caller's
    // alignment.
    let tc = unsafe { (context as *const TriggeredContext).read_unaligned() };
    if tc.event_type != TRIGGER_THRESHOLD {
        let code = if tc.event_type == 1 {
            Errno::ENOSYS
        } else {
            Errno::EINVAL
        };
        return Err(Error::new(
            code,
            format!(
                "{prov}: trigger event {} is not supported (only FI_TRIGGER_THRESHOLD)",
                tc.event_type
            ),
        ));
    }
    if tc.threshold.threshold == 0 {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: trigger threshold 0"),
        ));
    }
    let cntr = KitCntr::published_at(tc.threshold.cntr as usize).ok_or_else(|| {
        Error::new(
            Errno::EINVAL,
            format!("{prov}: the trigger's counter is not an open counter of this provider"),
        )
    })?;
    if !cntr.in_domain(engine) {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: the trigger's counter belongs to another domain"),
        ));
    }
    Ok((cntr, tc.threshold.threshold as u64))
}

/// A `fi_msg*` structure a deferred call keeps: its local array (`msg_iov`,
/// `iov_count`), one descriptor per local entry and, for RMA and atomics, its remote
/// array (`rma_iov`, `rma_iov_count`).
trait DeferredMsg: Copy + std::fmt::Debug {
    /// An entry of the local array.
    type Local: Copy + std::fmt::Debug;
    /// An entry of the remote array (`()` for a message, which has none).
    type Remote: Copy + std::fmt::Debug;
    /// The arrays the message points at.
    fn arrays(&self) -> MsgArrays<Self::Local, Self::Remote>;
    /// The message pointing at other arrays (of the same lengths).
    fn pointing_at(
        self,
        local: *const Self::Local,
        desc: *const Desc,
        remote: *const Self::Remote,
    ) -> Self;
}

/// Where a message's arrays are, and their lengths.
struct MsgArrays<L, R> {
    local: *const L,
    desc: *const Desc,
    count: usize,
    remote: *const R,
    remote_count: usize,
}

/// [`DeferredMsg`] for `fi_msg*` structure `$t` with local entries `$local`; with
/// `$remote => $rma_iov, $rma_count`, its remote array of `$remote` entries is at
/// those fields.
macro_rules! deferred_msg {
    ($t:ty, $local:ty $(, $remote:ty => $rma_iov:ident, $rma_count:ident)?) => {
        impl DeferredMsg for $t {
            type Local = $local;
            type Remote = deferred_msg!(@remote $($remote)?);

            fn arrays(&self) -> MsgArrays<Self::Local, Self::Remote> {
                #[allow(unused_mut)]
                let mut arrays = MsgArrays {
                    local: self.msg_iov,
                    desc: self.desc,
                    count: self.iov_count,
                    remote: std::ptr::null(),
                    remote_count: 0,
                };
                $(
                    arrays.remote = self.$rma_iov;
                    arrays.remote_count = self.$rma_count;
                )?
                arrays
            }

            #[allow(unused_variables)]
            fn pointing_at(
                self,
                local: *const Self::Local,
                desc: *const Desc,
                remote: *const Self::Remote,
            ) -> Self {
                #[allow(unused_mut)]
                let mut msg = Self {
                    msg_iov: local,
                    desc,
                    ..self
                };
                $(msg.$rma_iov = remote;)?
                msg
            }
        }
    };
    (@remote $remote:ty) => { $remote };
    (@remote) => { () };
}

deferred_msg!(Msg, Iov);
deferred_msg!(MsgTagged, Iov);
deferred_msg!(MsgRma, Iov, RmaIov => rma_iov, rma_iov_count);
deferred_msg!(MsgAtomic, Ioc, RmaIoc => rma_iov, rma_iov_count);

/// A message with its arrays copied.
///
/// Invariant: `msg` points at `local`, `desc` (null when empty) and `remote`, which
/// are never changed after the copy: the pointers stay valid as long as `self` (a
/// move of a `Vec` leaves its entries where they are).
#[derive(Debug)]
struct Captured<M: DeferredMsg> {
    msg: M,
    // The copies `msg` points at, owned here (read only through `msg`).
    #[allow(dead_code)]
    local: Vec<M::Local>,
    #[allow(dead_code)]
    desc: Vec<Desc>,
    #[allow(dead_code)]
    remote: Vec<M::Remote>,
}

impl<M: DeferredMsg> Captured<M> {
    /// Copy `m` and its arrays.
    ///
    /// # Errors
    /// `FI_EINVAL` when an array is longer than [`ARRAY_LIMIT`].
    ///
    /// # Safety
    /// `m`'s arrays hold their counts of readable entries (its descriptors: null, or
    /// one per local entry).
    unsafe fn copy(prov: &str, m: &M) -> Result<Captured<M>> {
        let a = m.arrays();
        too_long(prov, a.count)?;
        too_long(prov, a.remote_count)?;
        // SAFETY: the caller's contract for the message's arrays (each copy).
        let (local, desc, remote) = unsafe {
            (
                copy_array(a.local, a.count),
                copy_array(a.desc, a.count),
                copy_array(a.remote, a.remote_count),
            )
        };
        let desc_ptr = if desc.is_empty() {
            std::ptr::null()
        } else {
            desc.as_ptr()
        };
        Ok(Captured {
            msg: m.pointing_at(local.as_ptr(), desc_ptr, remote.as_ptr()),
            local,
            desc,
            remote,
        })
    }
}

/// The message of a deferred call, with its arrays owned.
#[derive(Debug)]
enum OwnedMsg {
    Msg(Captured<Msg>),
    Tagged(Captured<MsgTagged>),
    Rma(Captured<MsgRma>),
    Atomic(Captured<MsgAtomic>),
}

/// A `*msg` call kept for later: its kind, flags (without `FI_TRIGGER`), message
/// and arrays, copied from the call.
#[derive(Debug)]
pub struct OwnedCall {
    kind: OpKind,
    flags: OpFlags,
    msg: OwnedMsg,
    result: Vec<Ioc>,
    result_desc: Vec<Desc>,
    compare: Vec<Ioc>,
    compare_desc: Vec<Desc>,
}

// SAFETY: the pointers an `OwnedCall` holds are the application's buffer and
// descriptor addresses, only ever handed back to the data path that the call was
// made on; the C API's contract keeps them valid until the operation completes, from
// whichever thread it is issued.
unsafe impl Send for OwnedCall {}

/// Copy `n` entries at `p` (none when null or `n` is 0).
///
/// # Safety
/// `p` is null or points to `n` readable entries.
unsafe fn copy_array<T: Copy>(p: *const T, n: usize) -> Vec<T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// The descriptors of an argument, owned.
fn desc_vec(d: DescArg<'_>) -> Vec<Desc> {
    match d {
        DescArg::Many(s) => s.to_vec(),
        DescArg::One(x) => vec![x],
        DescArg::None => Vec::new(),
    }
}

/// The element vector of an argument, owned.
fn ioc_vec(v: IovArg<'_>) -> Vec<Ioc> {
    match v {
        IovArg::Ioc(s) => s.to_vec(),
        _ => Vec::new(),
    }
}

/// The most entries one array of a deferred call may have (the data path's own
/// limit is checked again when the call is issued).
const ARRAY_LIMIT: usize = crate::iov::IOV_LIMIT;

fn too_long(prov: &str, n: usize) -> Result<()> {
    if n > ARRAY_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: {n} entries in a triggered message (the limit is {ARRAY_LIMIT})"),
        ));
    }
    Ok(())
}

impl OwnedCall {
    /// Copy the `*msg` call `a` of kind `kind` made with `flags` (`FI_TRIGGER` is
    /// dropped from them).
    ///
    /// # Errors
    /// `FI_EINVAL` when `a` is not a `*msg` call, or an array is longer than
    /// [`IOV_LIMIT`](crate::iov::IOV_LIMIT).
    ///
    /// # Safety
    /// The message's arrays hold their counts of readable entries (the C API's
    /// contract for the call).
    pub unsafe fn capture(
        prov: &str,
        kind: OpKind,
        flags: OpFlags,
        a: &DataArgs<'_>,
    ) -> Result<OwnedCall> {
        // SAFETY: the caller's contract for the message's arrays.
        let msg = unsafe {
            match a.msg {
                MsgArg::Msg(m) => OwnedMsg::Msg(Captured::copy(prov, m)?),
                MsgArg::Tagged(m) => OwnedMsg::Tagged(Captured::copy(prov, m)?),
                MsgArg::Rma(m) => OwnedMsg::Rma(Captured::copy(prov, m)?),
                MsgArg::Atomic(m) => OwnedMsg::Atomic(Captured::copy(prov, m)?),
                MsgArg::None => {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!("{prov}: FI_TRIGGER is taken by the *msg calls only"),
                    ))
                }
            }
        };
        Ok(OwnedCall {
            kind,
            flags: flags.difference(OpFlags::TRIGGER),
            msg,
            result: ioc_vec(a.resultv),
            result_desc: desc_vec(a.result_desc),
            compare: ioc_vec(a.comparev),
            compare_desc: desc_vec(a.compare_desc),
        })
    }

    /// The context the call reports (its [`TriggeredContext`]).
    pub fn context(&self) -> usize {
        match &self.msg {
            OwnedMsg::Msg(c) => c.msg.context,
            OwnedMsg::Tagged(c) => c.msg.context,
            OwnedMsg::Rma(c) => c.msg.context,
            OwnedMsg::Atomic(c) => c.msg.context,
        }
    }

    /// The kind of the call.
    pub fn kind(&self) -> OpKind {
        self.kind
    }

    /// Issue the call on `ep` as if it were made now (without `FI_TRIGGER`).
    ///
    /// # Safety
    /// The buffers the call names are still valid (the C API's contract: until the
    /// operation completes).
    pub unsafe fn issue<T: DataPath + ?Sized>(&self, ep: &T) -> Result<()> {
        let msg = match &self.msg {
            OwnedMsg::Msg(c) => MsgArg::Msg(&c.msg),
            OwnedMsg::Tagged(c) => MsgArg::Tagged(&c.msg),
            OwnedMsg::Rma(c) => MsgArg::Rma(&c.msg),
            OwnedMsg::Atomic(c) => MsgArg::Atomic(&c.msg),
        };
        let args = DataArgs {
            msg,
            flags: Some(self.flags),
            resultv: IovArg::Ioc(&self.result),
            result_desc: DescArg::Many(&self.result_desc),
            comparev: IovArg::Ioc(&self.compare),
            compare_desc: DescArg::Many(&self.compare_desc),
            ..DataArgs::default()
        };
        // SAFETY: the arrays are this call's own copies; the buffers are the caller's
        // contract.
        unsafe { crate::dataops::dispatch(ep, self.kind, &args) }
    }
}

/// The flags of the completion of a call of `kind`: `FI_SEND` with `FI_MSG` or
/// `FI_TAGGED`, `FI_RMA` with `FI_READ` or `FI_WRITE`, `FI_ATOMIC` with `FI_WRITE`
/// (base) or `FI_READ` (fetch, compare).
pub fn completion_flags(kind: OpKind) -> u64 {
    use ofi_core::abi::ops::OpFamily;
    let f = match kind.family {
        OpFamily::Send | OpFamily::Recv => {
            OpFlags::SEND
                | if kind.tagged {
                    OpFlags::TAGGED
                } else {
                    OpFlags::MSG
                }
        }
        OpFamily::Read => OpFlags::RMA | OpFlags::READ,
        OpFamily::Write => OpFlags::RMA | OpFlags::WRITE,
        OpFamily::Atomic => OpFlags::ATOMIC | OpFlags::WRITE,
        OpFamily::Fetch | OpFamily::Compare => OpFlags::ATOMIC | OpFlags::READ,
    };
    f.bits()
}

/// One waiting call.
#[derive(Debug)]
struct Pending {
    cntr: KitCntr,
    threshold: u64,
    call: OwnedCall,
}

/// A call that failed when issued: the provider completes it as an error.
#[derive(Debug)]
pub struct Failed {
    /// The call's context (its [`TriggeredContext`]).
    pub context: usize,
    /// The call's kind.
    pub kind: OpKind,
    /// Why.
    pub error: Error,
}

/// An endpoint's waiting triggered calls (see the module docs).
#[derive(Debug)]
pub struct TriggerQueue {
    capacity: usize,
    waiting: Mutex<Vec<Pending>>,
    /// `waiting.len()`, read without the lock by [`fire_ready`](Self::fire_ready)'s
    /// idle check.
    count: AtomicUsize,
}

impl TriggerQueue {
    /// A queue holding at most `capacity` calls.
    pub fn new(capacity: usize) -> TriggerQueue {
        TriggerQueue {
            capacity,
            waiting: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        }
    }

    /// How many calls wait.
    #[inline]
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Whether no call waits. Inlined: shm and rxm ask it on every progress call, and
    /// as a call across crates it cost about 20 instructions a call (callgrind, shm
    /// 64 B ping-pong: the progress function's prologue grew with it).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep `call` until `cntr` reaches `threshold`.
    ///
    /// # Errors
    /// `FI_EAGAIN` when `capacity` calls already wait.
    pub fn push(&self, prov: &str, cntr: KitCntr, threshold: u64, call: OwnedCall) -> Result<()> {
        let mut w = lock(&self.waiting);
        if w.len() >= self.capacity {
            return Err(Error::new(
                Errno::EAGAIN,
                format!(
                    "{prov}: {} triggered operations already wait (tx_size)",
                    self.capacity
                ),
            ));
        }
        w.push(Pending {
            cntr,
            threshold,
            call,
        });
        self.count.store(w.len(), Ordering::Release);
        Ok(())
    }

    /// Take the calls whose counters reached their thresholds, in order.
    fn take_ready(&self) -> Vec<Pending> {
        let mut w = lock(&self.waiting);
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut *w)
            .into_iter()
            .partition(|p| p.cntr.value() >= p.threshold);
        *w = wait;
        self.count.store(w.len(), Ordering::Release);
        ready
    }

    /// Put back calls that could not be issued yet, ahead of the others.
    fn put_back(&self, back: Vec<Pending>) {
        if back.is_empty() {
            return;
        }
        let mut w = lock(&self.waiting);
        let rest = std::mem::replace(&mut *w, back);
        w.extend(rest);
        self.count.store(w.len(), Ordering::Release);
    }

    /// Issue every call whose counter has reached its threshold on `ep` (see the
    /// module docs): the number issued, and the calls that failed (for the provider
    /// to complete as errors). A call answering `FI_EAGAIN` stays queued.
    ///
    /// # Safety
    /// Every queued call was captured from a call on `ep` (the buffers it names are
    /// the application's, valid until it completes).
    pub unsafe fn fire_ready<T: DataPath + ?Sized>(&self, ep: &T) -> (usize, Vec<Failed>) {
        if self.is_empty() {
            return (0, Vec::new());
        }
        let mut issued = 0;
        let mut failed = Vec::new();
        let mut back = Vec::new();
        for p in self.take_ready() {
            // SAFETY: the caller's contract.
            match unsafe { p.call.issue(ep) } {
                Ok(()) => issued += 1,
                Err(e) if e.code() == Errno::EAGAIN => back.push(p),
                Err(error) => failed.push(Failed {
                    context: p.call.context(),
                    kind: p.call.kind(),
                    error,
                }),
            }
        }
        self.put_back(back);
        (issued, failed)
    }

    /// [`fire_ready`](Self::fire_ready), each failed call handed to `complete` with its
    /// context, its completion flags ([`completion_flags`]) and error code (for an
    /// error completion). The number of calls issued or failed.
    ///
    /// # Safety
    /// As [`fire_ready`](Self::fire_ready).
    pub unsafe fn fire_ready_completing<T: DataPath + ?Sized>(
        &self,
        ep: &T,
        mut complete: impl FnMut(usize, u64, Errno),
    ) -> usize {
        // SAFETY: the caller's contract.
        let (issued, failed) = unsafe { self.fire_ready(ep) };
        let n = issued + failed.len();
        for f in failed {
            ofi_core::ofi_info!(
                T::NAME,
                "ep_data",
                "triggered operation failed when issued: {}",
                f.error
            );
            complete(f.context, completion_flags(f.kind), f.error.code());
        }
        n
    }

    /// [`cancel_all`](Self::cancel_all), each call handed to `complete` with its
    /// context, completion flags and `FI_ECANCELED`.
    pub fn cancel_all_completing(&self, mut complete: impl FnMut(usize, u64, Errno)) {
        for (context, kind) in self.cancel_all() {
            complete(context, completion_flags(kind), Errno::ECANCELED);
        }
    }

    /// Remove every waiting call (endpoint close): their contexts and kinds, for the
    /// provider to complete with `FI_ECANCELED`.
    pub fn cancel_all(&self) -> Vec<(usize, OpKind)> {
        let mut w = lock(&self.waiting);
        let all = std::mem::take(&mut *w);
        self.count.store(0, Ordering::Release);
        all.into_iter()
            .map(|p| (p.call.context(), p.call.kind()))
            .collect()
    }
}

#[cfg(test)]
#[path = "trigger_tests.rs"]
mod tests;
