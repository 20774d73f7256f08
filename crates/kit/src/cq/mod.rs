//! A completion queue ready to use: [`KitCq`] implements core's `CqOps` for all four
//! entry formats, with error entries, source addresses, blocking reads, `fi_cq_signal`,
//! a wait fd, overrun handling and the progress link.
//!
//! # For the provider
//!
//! Open one in `DomainOps::cq_open` with [`KitCq::new`] (or
//! [`KitCq::with_progress`] to bind the domain's [`ProgressEngine`] at once) and name it
//! as the domain's `Cq` type. The endpoint keeps a clone (clones share the queue) from
//! its `bind` and reports completions with [`KitCq::push`] (a [`CqTaggedEntry`]; the
//! fields the CQ's format lacks are dropped at read time) and failures with
//! [`KitCq::push_err`] ([`CqError`], which owns its `err_data`).
//!
//! # Resource management and overrun
//!
//! The queue holds at most `size` entries (successes, errors and reservations
//! together). With `FI_RM_ENABLED` the provider must not start an operation whose
//! completion would not fit: check [`KitCq::has_room`], or better take a
//! [`KitCq::reserve`] slot when the operation starts (`FI_EAGAIN` when full, which the
//! application clears by reading) and complete through the [`CqReservation`]. With
//! resource management disabled a push that does not fit is dropped and the CQ is
//! *overrun*, as fi_cq(3) describes: reads still return the completions queued before,
//! then report one error entry with `FI_EOVERRUN` (read → `FI_EAVAIL`, readerr → the
//! entry); after that every read returns `FI_EOVERRUN` (the CQ is unusable; never
//! `FI_EAGAIN`, which would promise that progress can clear it). Pushes after an overrun
//! are dropped and return `FI_EOVERRUN`.
//!
//! # Reads
//!
//! - `read`/`readfrom` drive progress first (a read of zero entries too), then return
//!   the successful completions queued before the first error entry: `FI_EAVAIL` if an
//!   error entry is next, `FI_EAGAIN` if nothing is queued, and `Ok(0)` for a read of
//!   zero entries when completions are waiting (as the C utility CQ does). `readfrom`
//!   fills the source address of each entry (`FI_ADDR_NOTAVAIL` when the provider had
//!   none).
//! - `readerr` returns the oldest error entry (or the overrun entry, with no error
//!   data); `FI_EAGAIN` if there is none. It hands the entry's `err_data` over owned;
//!   core's adapter delivers it by the fi_cq(3) rules (copied into the caller's buffer
//!   when one is given, else kept and pointed to until the next `readerr`).
//! - `sread` (`FI_WAIT_NONE`: `FI_ENOSYS`; zero entries: `FI_EINVAL`) blocks until the
//!   threshold (or one entry) is queued, an error entry is next, `fi_cq_signal` is
//!   called, or the timeout passes (`FI_EAGAIN`; with fewer than the threshold queued it
//!   returns those). A signal with nothing queued returns `FI_EAGAIN` — also to the next
//!   `sread` if nobody was waiting.
//! - A buffer whose format is not the CQ's is `FI_EINVAL`; `readfrom` with fewer address
//!   slots than entries is `FI_EINVAL`.
//!
//! # Completions handed straight to the reader
//!
//! A `read` drives progress, and most completions it returns were made by that very
//! drive. While a read drives, its thread's *sink* is open for that CQ: a success pushed
//! from the same thread while nothing is queued (no success, error or overrun pending)
//! is kept in a small per-thread array instead of the queue, and the read returns it
//! after the drive — first, then whatever the queue holds. So the common completion
//! costs neither lock nor queue slot, and the order seen by readers is the order of the
//! pushes: an entry goes to the sink only when nothing is queued before it, and once
//! something is queued every later push queues behind it. The sink holds at most the
//! reader's buffer length (and [`SINK_SLOTS`] in all) and only entries without a
//! [`CqReservation`] (those settle their reservation under the lock). A read inside a
//! progress source (a utility provider reading its core's CQ) opens its own sink above
//! the outer one and restores it after; pushes to the outer CQ meanwhile are queued (a
//! read of the same CQ nested in its own drive first queues what the outer one holds). If
//! a source panics during the drive, the entries already in the sink are queued as
//! ordinary pushes before the panic goes on, so none is lost. Entries in a sink are
//! never visible to other readers, wait objects or `sread`: they are already being read.
//!
//! # Invariants and costs
//!
//! The ring is allocated at open (`size` slots) and never grows; reads, pushes of
//! successes and reservations allocate nothing (`push_err` stores the error the caller
//! built). One mutex guards the queue; progress is always driven without holding it,
//! so a progress source may push into the CQ it is driven from. The wait fd (modes
//! `FI_WAIT_FD`/`FI_WAIT_UNSPEC`) is readable exactly while a read would not return
//! `FI_EAGAIN` (or a signal is pending). A flag kept beside the mutex says the same
//! (updated under the lock with every change of the queue), so a read that finds
//! nothing returns `FI_EAGAIN` without taking the lock: it is ordered as if it had
//! read just before a push that runs concurrently on another thread.
//!
//! # What may panic
//!
//! Nothing: bad input is an `Error`, poisoned locks are recovered.
//!
//! # Files
//!
//! This file: the entry ring, overrun and the per-thread read sinks; `queue.rs`:
//! [`KitCq`]'s provider-facing API; `ops.rs`: core's `CqOps` (the reads); `tests.rs`.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::cq::{CqAttr, CqBuf};
use ofi_core::enums::{CqFormat, ADDR_NOTAVAIL};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::OpFlags;
use ofi_core::provider::CqOps;

use crate::progress::ProgressEngine;
use crate::queue_common::{check_open_flags, open_size, ErrorEntries, Overrun};
use crate::wait::{lock, BlockingWait, Links, SleeperCount, WaitFd, WaitMode};

/// The size of a CQ opened with size 0.
pub const DEFAULT_CQ_SIZE: usize = 1024;
/// The largest CQ size accepted.
pub const MAX_CQ_SIZE: usize = 1 << 20;

/// A provider's text for its own error codes (`fi_cq_strerror`, `fi_eq_strerror`).
pub type StrerrorFn = fn(prov_errno: i32, err_data: &[u8]) -> String;

/// An error completion as the provider reports it (core's type, re-exported): the
/// fields of `fi_cq_err_entry`, with the error data owned.
pub use ofi_core::cq::CqError;

/// A queued success (the tagged entry, its buffer address as an integer so the queue is
/// `Send`, and the source address).
#[derive(Clone, Copy, Debug)]
struct Slot {
    op_context: usize,
    flags: u64,
    len: usize,
    buf: usize,
    data: u64,
    tag: u64,
    src: u64,
}

impl Slot {
    const EMPTY: Slot = Slot {
        op_context: 0,
        flags: 0,
        len: 0,
        buf: 0,
        data: 0,
        tag: 0,
        src: 0,
    };

    fn new(e: &CqTaggedEntry, src: u64) -> Slot {
        Slot {
            op_context: e.op_context,
            flags: e.flags,
            len: e.len,
            buf: e.buf as usize,
            data: e.data,
            tag: e.tag,
            src,
        }
    }

    fn entry(&self) -> CqTaggedEntry {
        CqTaggedEntry {
            op_context: self.op_context,
            flags: self.flags,
            len: self.len,
            buf: self.buf as *mut c_void,
            data: self.data,
            tag: self.tag,
        }
    }
}

/// Entries a thread's sinks hold at most (all nested reads together).
pub const SINK_SLOTS: usize = 16;

/// The sink open on this thread (see the module docs): the CQ it is for (its address;
/// 0: none) and, as indices into [`SINK`], where the next entry goes and where they must
/// end, and how many it holds. With no sink open all are 0, so a sink opened then starts
/// at 0 and a nested one right after the entries of the one below it.
#[derive(Clone, Copy)]
struct SinkTop {
    cq: usize,
    /// The next index, the count and the end index (each ≤ [`SINK_SLOTS`]), a byte
    /// each from the lowest up (so that a copy is two words).
    idx: usize,
}

impl SinkTop {
    const NONE: SinkTop = SinkTop { cq: 0, idx: 0 };
    /// One more entry: the next index and the count go up by one.
    const ONE: usize = 1 | 1 << 8;

    /// An empty sink for `cq` from index `at` up to `lim`.
    #[inline]
    fn new(cq: usize, at: usize, lim: usize) -> SinkTop {
        SinkTop {
            cq,
            idx: at | lim << 16,
        }
    }

    /// Where the next entry goes.
    #[inline]
    fn at(self) -> usize {
        self.idx & 0xff
    }

    /// How many entries it holds.
    #[inline]
    fn n(self) -> usize {
        (self.idx >> 8) & 0xff
    }

    /// Where its entries start.
    #[inline]
    fn base(self) -> usize {
        self.at() - self.n()
    }

    /// Where its entries must end.
    #[inline]
    fn lim(self) -> usize {
        self.idx >> 16
    }
}

thread_local! {
    static SINK_TOP: Cell<SinkTop> = const { Cell::new(SinkTop::NONE) };
    static SINK: [Cell<Slot>; SINK_SLOTS] = const { [const { Cell::new(Slot::EMPTY) }; SINK_SLOTS] };
}

/// The CQ ([`KitCq::id`]) whose `fi_cq_read` is driving progress on this thread right
/// now, if any (the innermost one when reads nest). A source bound to CQs of its own
/// (a scalable endpoint's context) may leave the work of other CQs' reads to them;
/// a drive from anything else (a counter or EQ read, a wait, the auto thread) gives
/// `None`.
pub fn reading_cq() -> Option<usize> {
    let cq = SINK_TOP.get().cq;
    (cq != 0).then_some(cq)
}

/// The sink of one read, open while it drives progress. [`close`](Self::close) restores
/// the sink that was open before and hands over the entries; dropping it unclosed (a
/// source panicked during the drive) restores it too and queues the entries as
/// ordinary pushes.
struct SinkFrame<'a> {
    cq: &'a CqShared,
    prev: SinkTop,
}

impl<'a> SinkFrame<'a> {
    /// Open a sink for `cq` taking at most `want` entries.
    #[inline]
    fn open(cq: &'a CqShared, want: usize) -> SinkFrame<'a> {
        let mut prev = SINK_TOP.get();
        if prev.cq == cq.addr() && prev.n() != 0 {
            // A read of this CQ nested in its own drive: what the outer read holds is
            // older than anything this one may find, so it is queued first.
            cq.queue_sunk(prev);
            prev = SinkTop::new(prev.cq, prev.base(), prev.lim());
        }
        let at = prev.at();
        SINK_TOP.set(SinkTop::new(cq.addr(), at, at + want.min(SINK_SLOTS - at)));
        SinkFrame { cq, prev }
    }

    /// Close the sink: its entries (oldest first), copied into `buf` from index 0 (and
    /// their sources into `src`); the count.
    #[inline]
    fn close(self, buf: &mut CqBuf<'_>, src: Option<&mut [u64]>) -> usize {
        let top = SINK_TOP.replace(self.prev);
        // Closed: nothing left for `drop` to restore or queue.
        std::mem::forget(self);
        let n = top.n();
        if n > 0 {
            sunk_into(top, buf, src);
        }
        n
    }
}

/// Copy the entries of the closed sink `top` into `buf` from index 0 (and their sources
/// into `src`).
fn sunk_into(top: SinkTop, buf: &mut CqBuf<'_>, mut src: Option<&mut [u64]>) {
    SINK.with(|k| {
        for (i, c) in k[top.base()..top.at()].iter().enumerate() {
            let s = c.get();
            buf.set(i, &s.entry());
            if let Some(slot) = src.as_deref_mut().and_then(|a| a.get_mut(i)) {
                *slot = s.src;
            }
        }
    })
}

impl Drop for SinkFrame<'_> {
    /// Only after a panic in a source: `close` forgets the frame otherwise.
    fn drop(&mut self) {
        let top = SINK_TOP.replace(self.prev);
        self.cq.queue_sunk(top);
    }
}

struct CqState {
    /// Successful completions, oldest first.
    ring: VecDeque<Slot>,
    /// Error entries in their place among the successes; the overrun state.
    errors: ErrorEntries<CqError>,
    /// Successes ever removed from `ring` (the sequence number of its front).
    head: u64,
    /// Slots promised to reservations.
    reserved: usize,
    /// `fi_cq_signal` pending.
    wake: bool,
    /// Threads blocked in `sread`.
    sleepers: usize,
}

impl SleeperCount for CqState {
    fn sleepers(&mut self) -> &mut usize {
        &mut self.sleepers
    }
}

impl CqState {
    /// Successes readable before the next error entry.
    #[inline]
    fn avail(&self) -> usize {
        self.errors.readable(self.head, self.ring.len())
    }

    /// Entries counted against the size.
    fn used(&self) -> usize {
        self.ring.len() + self.errors.len() + self.reserved
    }

    /// True if a read would not return `FI_EAGAIN`, or a signal is pending.
    fn ready(&self) -> bool {
        !self.ring.is_empty() || self.errors.blocked() || self.wake
    }
}

struct CqShared {
    format: CqFormat,
    size: usize,
    mode: WaitMode,
    threshold_cond: bool,
    state: Mutex<CqState>,
    /// `!ring.is_empty() || errors.blocked()` as of the last change of `state` (written under
    /// its lock by `refresh_fd`): false means a read returns `FI_EAGAIN`.
    readable: AtomicBool,
    /// `overrun || used() >= size` as of the last change of `state` (written under its
    /// lock): `has_room` without the lock, a snapshot exactly as fresh as a locked read.
    full: AtomicBool,
    cv: Condvar,
    fd: Option<WaitFd>,
    links: Links,
    strerror: OnceLock<StrerrorFn>,
}

impl CqShared {
    /// Keep the fd and the `readable` flag in step with the state (called with the
    /// lock held, after every change of the queue).
    #[inline]
    fn refresh_fd(&self, state: &CqState) {
        self.readable.store(
            !state.ring.is_empty() || state.errors.blocked(),
            Ordering::Release,
        );
        self.refresh_room(state);
        if let Some(fd) = &self.fd {
            fd.update(state.ready());
        }
    }

    /// Keep the `full` flag in step with the state (lock held; after every change of
    /// the queue, the reservations or the overrun state).
    #[inline]
    fn refresh_room(&self, state: &CqState) {
        self.full.store(
            state.errors.overrun != Overrun::No || state.used() >= self.size,
            Ordering::Release,
        );
    }

    fn overflow(&self, state: &mut CqState) -> Error {
        if state.errors.overflow() {
            self.notify_locked(state);
        }
        Error::new(
            Errno::EOVERRUN,
            "CQ overrun: completion dropped (the queue is full)",
        )
    }

    /// This CQ's identity in a [`SinkTop`].
    #[inline]
    fn addr(&self) -> usize {
        self as *const CqShared as usize
    }

    /// Hand a success to the read that drives progress on this thread, if one does for
    /// this CQ, has room, and nothing is queued (see the module docs); false otherwise.
    #[inline]
    fn sink(&self, e: &CqTaggedEntry, src: u64) -> bool {
        let top = SINK_TOP.get();
        let at = top.at();
        if top.cq != self.addr() || at >= top.lim() || self.readable.load(Ordering::Acquire) {
            return false;
        }
        SINK.with(|k| k[at].set(Slot::new(e, src)));
        SINK_TOP.set(SinkTop {
            idx: top.idx + SinkTop::ONE,
            ..top
        });
        true
    }

    /// Queue the entries sink `top` holds, oldest first, as ordinary pushes (a nested
    /// read of this CQ, or a panic during the drive).
    #[cold]
    #[inline(never)]
    fn queue_sunk(&self, top: SinkTop) {
        for i in top.base()..top.at() {
            let s = SINK.with(|k| k[i].get());
            let _ = self.push_queued(&s.entry(), s.src, false);
        }
    }

    /// Report a success; `reserved` if it uses a reservation.
    #[inline]
    fn push(&self, e: &CqTaggedEntry, src: u64, reserved: bool) -> Result<()> {
        if !reserved && self.sink(e, src) {
            return Ok(());
        }
        self.push_queued(e, src, reserved)
    }

    /// Whether one more entry may be queued (lock held): its reservation (`reserved`)
    /// is used up either way; an overrun CQ drops it, a full one becomes overrun.
    #[inline]
    fn admit(&self, state: &mut CqState, reserved: bool) -> Result<()> {
        if reserved {
            state.reserved = state.reserved.saturating_sub(1);
        }
        state.errors.refuse_if_overrun("CQ")?;
        if state.used() >= self.size {
            return Err(self.overflow(state));
        }
        Ok(())
    }

    /// Queue a success; `reserved` if it uses a reservation.
    fn push_queued(&self, e: &CqTaggedEntry, src: u64, reserved: bool) -> Result<()> {
        {
            let mut state = lock(&self.state);
            self.admit(&mut state, reserved)?;
            state.ring.push_back(Slot::new(e, src));
            self.notify_locked(&state);
        }
        self.notify_sets();
        Ok(())
    }

    /// Queue an error entry; `reserved` if it uses a reservation.
    fn push_err(&self, e: CqError, reserved: bool) -> Result<()> {
        {
            let mut state = lock(&self.state);
            self.admit(&mut state, reserved)?;
            let seq = state.head + state.ring.len() as u64;
            state.errors.push(seq, e);
            self.notify_locked(&state);
        }
        self.notify_sets();
        Ok(())
    }

    /// Move up to `buf.len()` readable successes into `buf` (and `src`).
    fn take(
        &self,
        state: &mut CqState,
        buf: &mut CqBuf<'_>,
        src: Option<&mut [u64]>,
    ) -> Result<usize> {
        if state.avail() == 0 {
            return Err(state.errors.empty_error("CQ"));
        }
        Ok(self.take_from(state, buf, src, 0))
    }

    /// Move up to `buf.len() - at` readable successes into `buf` from index `at` (and
    /// `src`); how many.
    fn take_from(
        &self,
        state: &mut CqState,
        buf: &mut CqBuf<'_>,
        mut src: Option<&mut [u64]>,
        at: usize,
    ) -> usize {
        let n = state.avail().min(buf.len().saturating_sub(at));
        for i in at..at + n {
            let Some(s) = state.ring.pop_front() else {
                break;
            };
            buf.set(i, &s.entry());
            if let Some(slot) = src.as_deref_mut().and_then(|a| a.get_mut(i)) {
                *slot = s.src;
            }
        }
        state.head += n as u64;
        self.refresh_fd(state);
        n
    }

    /// The rest of a `read` that found the queue readable after its drive: `got`
    /// entries from the sink are in `buf` already.
    #[inline(never)]
    fn read_queued(
        &self,
        buf: &mut CqBuf<'_>,
        src: Option<&mut [u64]>,
        got: usize,
    ) -> Result<usize> {
        let mut state = lock(&self.state);
        if got > 0 {
            return Ok(got + self.take_from(&mut state, buf, src, got));
        }
        self.take(&mut state, buf, src)
    }

    #[inline]
    fn check(&self, buf: &CqBuf<'_>, src: &Option<&mut [u64]>) -> Result<()> {
        if buf.format() != self.format || src.as_ref().is_some_and(|s| s.len() < buf.len()) {
            return Err(self.bad_buffer(buf));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn bad_buffer(&self, buf: &CqBuf<'_>) -> Error {
        if buf.format() != self.format {
            Error::new(Errno::EINVAL, "CQ read buffer is not of the CQ's format")
        } else {
            Error::new(Errno::EINVAL, "readfrom: fewer address slots than entries")
        }
    }
}

crate::wait::locked_queue_waitable!(CqShared, CqState);

/// A completion queue (see the module docs). Clones share the queue: the domain hands
/// one to the host and endpoints keep others to push completions.
#[derive(Clone)]
pub struct KitCq {
    inner: Arc<CqShared>,
}

impl std::fmt::Debug for KitCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("KitCq")
            .field("format", &self.inner.format)
            .field("size", &self.inner.size)
            .field("queued", &state.ring.len())
            .field("errors", &state.errors)
            .finish()
    }
}

/// Room for one completion, held from the start of an operation to its completion.
/// Complete with [`push`](Self::push) or [`push_err`](Self::push_err); dropping it
/// unused releases the room.
#[must_use = "dropping a reservation releases it"]
pub struct CqReservation {
    cq: Option<Arc<CqShared>>,
}

impl std::fmt::Debug for CqReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqReservation").finish_non_exhaustive()
    }
}

impl CqReservation {
    /// Report the operation's success into the reserved room.
    pub fn push(mut self, entry: &CqTaggedEntry, src: u64) -> Result<()> {
        match self.cq.take() {
            Some(cq) => cq.push(entry, src, true),
            None => Ok(()),
        }
    }

    /// Report the operation's failure into the reserved room.
    pub fn push_err(mut self, err: CqError) -> Result<()> {
        match self.cq.take() {
            Some(cq) => cq.push_err(err, true),
            None => Ok(()),
        }
    }
}

impl Drop for CqReservation {
    fn drop(&mut self) {
        if let Some(cq) = self.cq.take() {
            let mut state = lock(&cq.state);
            state.reserved = state.reserved.saturating_sub(1);
            cq.refresh_room(&state);
        }
    }
}

crate::wait::queue_handle_waiting!(KitCq, "CQ");

mod ops;
mod queue;

#[cfg(test)]
mod tests;
