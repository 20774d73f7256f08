//! Wait objects: how the kit's CQs, counters and EQs block and signal, the wait fd
//! ([`WaitFd`]), wait sets ([`KitWait`], core's `WaitOps`), poll sets
//! ([`KitPollSet`]) and `fi_trywait` ([`trywait`]).
//!
//! # Wait objects
//!
//! [`WaitMode::resolve`] maps the `wait_obj` of an attribute:
//!
//! | `wait_obj` | mode | blocking calls | wait fd |
//! | --- | --- | --- | --- |
//! | `FI_WAIT_NONE` | [`WaitMode::None`] | `FI_ENOSYS` | `FI_ENOSYS` |
//! | `FI_WAIT_FD`, `FI_WAIT_UNSPEC` | [`WaitMode::Fd`] | yes | yes |
//! | `FI_WAIT_MUTEX_COND`, `FI_WAIT_YIELD` | [`WaitMode::Internal`] | yes | `FI_ENOSYS` |
//! | `FI_WAIT_SET` | [`WaitMode::Internal`] | yes | `FI_ENOSYS` (the set has the fd) |
//! | `FI_WAIT_POLLFD` | — | `FI_ENOSYS` at open | |
//!
//! An object opened in a wait set (core's `cq_open_in_set`, `cntr_open_in_set`,
//! `eq_open_in_set`; the kit's [`KitCq::with_progress_in`](crate::cq::KitCq::with_progress_in),
//! [`KitCntr::with_progress_in`](crate::cntr::KitCntr::with_progress_in),
//! [`KitEq::new_in`](crate::eq::KitEq::new_in)) is attached to the set: every push
//! signals it, and the set's `wait` watches the object.
//!
//! Blocking calls sleep on a condition variable of the object (woken by the push that
//! makes them ready), alternating with progress as the [progress
//! contract](crate::progress) requires.
//!
//! # Wait fds
//!
//! A [`WaitFd`] is one end of a non-blocking Unix datagram socket pair: readable (for
//! poll/select/epoll) while the object it belongs to has something to report, not
//! readable otherwise. The object keeps it in step with its state: [`WaitFd::set`] when
//! it becomes ready, [`WaitFd::clear`] when a read empties it. At most one byte is ever
//! queued. As with the C library, an application that blocks on the fd first calls
//! [`trywait`] (`fi_trywait`), which drives progress and says whether blocking is safe.
//!
//! # Invariants
//!
//! - A wait set holds its members weakly; members hold the set strongly (to signal it).
//! - Nothing takes a member's lock while holding a set's lock: a set snapshots its
//!   member list, releases its lock, then calls the members.
//!
//! # What may panic
//!
//! Nothing: bad input is an `Error`, poisoned locks are recovered.

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard,
    RwLockWriteGuard, Weak,
};
use std::time::{Duration, Instant};

use ofi_core::enums::WaitObj;
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::OpFlags;
use ofi_core::provider::WaitOps;
use ofi_core::wait::WaitAttr;

use crate::progress::{idle_slice, Backoff, FdWake, ProgressEngine, LONG_SLICE};
use crate::queue_common::check_open_flags;

/// Lock a mutex, recovering it if a panicking thread poisoned it (the kit's state stays
/// consistent across panics: every critical section leaves it valid; a provider that
/// uses it for its own state keeps the same rule).
#[inline]
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lock a read-write lock for reading, recovering it if poisoned (as [`lock`]).
#[inline]
pub fn read_lock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Lock a read-write lock for writing, recovering it if poisoned (as [`lock`]).
#[inline]
pub fn write_lock<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// What every kit queue (CQ, EQ, counter) is linked to: the progress engine its reads
/// and waits drive, and the wait sets its updates signal. One copy of that plumbing,
/// held by each queue.
#[derive(Default)]
pub(crate) struct Links {
    progress: OnceLock<Arc<ProgressEngine>>,
    sets: Mutex<Vec<KitWait>>,
    has_sets: AtomicBool,
}

impl Links {
    /// Drive the linked engine once (0 when none is linked).
    #[inline]
    pub(crate) fn drive(&self) -> usize {
        self.progress.get().map_or(0, |e| e.drive())
    }

    /// The linked engine, if any.
    pub(crate) fn engine(&self) -> Option<&Arc<ProgressEngine>> {
        self.progress.get()
    }

    /// Wake whoever sleeps on the linked engine's descriptors (after a push that a
    /// sleeper of this queue may be waiting for).
    #[inline]
    pub(crate) fn kick(&self) {
        if let Some(e) = self.progress.get() {
            e.kick();
        }
    }

    /// Whether a waiter must poll (the engine needs driving) rather than sleep.
    pub(crate) fn needs_polling(&self) -> bool {
        self.progress.get().is_some_and(|e| e.needs_polling())
    }

    /// Link `engine` (the same engine again: no-op; another: `FI_EINVAL` naming `what`).
    pub(crate) fn bind_progress(&self, engine: Arc<ProgressEngine>, what: &str) -> Result<()> {
        let cur = self.progress.get_or_init(|| engine.clone());
        if Arc::ptr_eq(cur, &engine) {
            Ok(())
        } else {
            Err(Error::new(
                Errno::EINVAL,
                format!("{what} is already bound to another progress engine"),
            ))
        }
    }

    /// Attach `member` (the queue itself) to wait set `set`, once.
    pub(crate) fn attach_wait(&self, set: &KitWait, member: Weak<dyn Waitable>) {
        set.add(member);
        let mut g = lock(&self.sets);
        if !g.iter().any(|s| s.same(set)) {
            g.push(set.clone());
        }
        self.has_sets.store(true, Ordering::Release);
    }

    /// Signal the attached wait sets (no lock of the queue held).
    #[inline]
    pub(crate) fn signal_sets(&self) {
        if self.has_sets.load(Ordering::Acquire) {
            for s in lock(&self.sets).iter() {
                s.signal();
            }
        }
    }
}

/// The fd sleep of one blocking call (CQ `sread`, counter `wait`, EQ `sread`): when
/// the linked manual engine's sources can all be waited on by descriptor, the caller
/// sleeps in `poll(2)` on them (up to [`LONG_SLICE`]) instead of waking every
/// [`MAX_IDLE_SLEEP`] on its condition variable, so transport activity wakes it at
/// once and an idle wait costs no CPU. Pushes to the queue kick the engine while the
/// queue has sleepers ([`Links::kick`]), which wakes the caller too.
///
/// A wake by a transport descriptor that then gives no work (a socket with data but no
/// receive posted stays readable) turns the fd sleep off for the rest of the call, so a
/// waiter can never spin on it; it then polls as before.
pub(crate) struct FdSleep {
    enabled: bool,
    woke_by_transport: bool,
}

impl FdSleep {
    pub(crate) fn new() -> FdSleep {
        FdSleep {
            enabled: true,
            woke_by_transport: false,
        }
    }

    /// After a progress round that did `work`.
    pub(crate) fn after_round(&mut self, work: usize) {
        if self.woke_by_transport && work == 0 {
            self.enabled = false;
        }
        self.woke_by_transport = false;
    }

    /// Sleep on descriptors if this call may; false if the caller must sleep its own
    /// way. `enter` / `leave`: see [`ProgressEngine::sleep_on_fds`] (check the queue
    /// and count the caller as a sleeper; undo that).
    pub(crate) fn sleep(
        &mut self,
        links: &Links,
        deadline: &Deadline,
        enter: impl FnOnce() -> bool,
        leave: impl FnOnce(),
    ) -> bool {
        if !self.enabled || !links.needs_polling() {
            return false;
        }
        let Some(engine) = links.engine() else {
            return false;
        };
        let d = deadline
            .remaining()
            .map_or(LONG_SLICE, |r| r.min(LONG_SLICE));
        match engine.sleep_on_fds(d, enter, leave) {
            None => {
                self.enabled = false;
                false
            }
            Some(wake) => {
                self.woke_by_transport = wake == FdWake::Transport;
                true
            }
        }
    }
}

/// Wait on `cv` for at most `d`, recovering a poisoned lock.
pub(crate) fn wait_for<'a, T>(
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    d: Duration,
) -> MutexGuard<'a, T> {
    cv.wait_timeout(g, d).unwrap_or_else(|p| p.into_inner()).0
}

/// The wait-set plumbing of a kit queue handle (`KitCq`, `KitEq`, `KitCntr`): a
/// `Clone` handle whose field `inner: Arc<Shared>` is the wait-set member (`Shared:
/// Waitable`, with fields `links: Links` and `mode: WaitMode`). Writes the handle's
/// `Waitable` (the shared state's) and its methods `bind_progress`, `attach_wait`,
/// `waitable` and `wait_mode`; `$what` names the object in errors.
macro_rules! queue_handle_waiting {
    ($handle:ty, $what:literal) => {
        impl $crate::wait::Waitable for $handle {
            fn drive_progress(&self) -> usize {
                $crate::wait::Waitable::drive_progress(&*self.inner)
            }

            fn is_ready(&self) -> bool {
                $crate::wait::Waitable::is_ready(&*self.inner)
            }

            fn needs_polling(&self) -> bool {
                $crate::wait::Waitable::needs_polling(&*self.inner)
            }
        }

        impl $handle {
            #[doc = concat!("Link the domain's progress engine: every read and wait of the ", $what, " drives it. Binding the same engine again is a no-op; another engine is `FI_EINVAL`.")]
            pub fn bind_progress(
                &self,
                engine: std::sync::Arc<$crate::progress::ProgressEngine>,
            ) -> ofi_core::error::Result<()> {
                self.inner.links.bind_progress(engine, $what)
            }

            #[doc = concat!("Attach to a wait set: each update of the ", $what, " signals it, and its `wait` watches the ", $what, ".")]
            pub fn attach_wait(&self, set: &$crate::wait::KitWait) {
                self.inner.links.attach_wait(set, self.waitable());
            }

            #[doc = concat!("This ", $what, " as a wait-set or poll-set member.")]
            pub fn waitable(&self) -> std::sync::Weak<dyn $crate::wait::Waitable> {
                std::sync::Arc::downgrade(&self.inner) as std::sync::Weak<dyn $crate::wait::Waitable>
            }

            /// The wait mode.
            pub fn wait_mode(&self) -> $crate::wait::WaitMode {
                self.inner.mode
            }
        }
    };
}
pub(crate) use queue_handle_waiting;

/// The openers of a kit queue handle bound to the domain's progress engine (`KitCq`,
/// `KitCntr`): `$handle::new($attr)` opens it; writes `with_progress` and
/// `with_progress_in`. `$what` names the object and `$in_set` the domain operation
/// that returns the latter, in the docs.
macro_rules! queue_open_with_progress {
    ($handle:ident, $attr:ty, $what:literal, $in_set:literal) => {
        impl $handle {
            #[doc = concat!("[`", stringify!($handle), "::new`], bound to `engine`.")]
            pub fn with_progress(
                attr: &$attr,
                engine: std::sync::Arc<$crate::progress::ProgressEngine>,
            ) -> ofi_core::error::Result<$handle> {
                let q = $handle::new(attr)?;
                q.bind_progress(engine)?;
                Ok(q)
            }

            #[doc = concat!("[`", stringify!($handle), "::with_progress`], attached to wait set `set`: what a provider's `DomainOps::", $in_set, "` returns (the ", $what, " then blocks internally).")]
            pub fn with_progress_in(
                attr: &$attr,
                engine: std::sync::Arc<$crate::progress::ProgressEngine>,
                set: &$crate::wait::KitWait,
            ) -> ofi_core::error::Result<$handle> {
                let q = $handle::with_progress(attr, engine)?;
                q.attach_wait(set);
                Ok(q)
            }
        }
    };
}
pub(crate) use queue_open_with_progress;

/// [`Waitable`] for the shared state `$shared` of a queue kept under a lock (the CQ's,
/// the EQ's): it has `drive()` (progress), `links: Links`, `cv: Condvar` and
/// `state: Mutex<$state>` whose `$state` has `ready()` (a read would not return
/// `FI_EAGAIN`) and counts sleepers. Also writes `$shared::idle`, the end of a blocking
/// read's empty round on that lock, condition variable and engine.
macro_rules! locked_queue_waitable {
    ($shared:ty, $state:ty) => {
        impl $shared {
            /// Run the progress engines this queue is linked to.
            #[inline]
            fn drive(&self) -> usize {
                self.links.drive()
            }

            /// After a change that may make the queue ready: its fd, and the readers
            /// asleep on it (lock held; `refresh_fd` is the queue's own).
            fn notify_locked(&self, state: &$state) {
                self.refresh_fd(state);
                if state.sleepers > 0 {
                    self.cv.notify_all();
                    self.links.kick();
                }
            }

            /// Signal the attached wait sets (lock not held).
            fn notify_sets(&self) {
                self.links.signal_sets()
            }

            /// [`BlockingWait::idle`](crate::wait::BlockingWait::idle) on this queue:
            /// `guard` is its locked state, `idle` whether a reader may still sleep.
            fn idle(
                &self,
                w: &mut $crate::wait::BlockingWait,
                guard: ::std::sync::MutexGuard<'_, $state>,
                work: usize,
                idle: impl Fn(&$state) -> bool,
            ) {
                w.idle(guard, &self.state, &self.cv, &self.links, work, idle)
            }
        }

        impl $crate::wait::Waitable for $shared {
            fn drive_progress(&self) -> usize {
                self.drive()
            }

            fn is_ready(&self) -> bool {
                $crate::wait::lock(&self.state).ready()
            }

            fn needs_polling(&self) -> bool {
                self.links.needs_polling()
            }
        }
    };
}
pub(crate) use locked_queue_waitable;

/// A queue's state that counts the readers asleep on it (pushes wake them only then).
pub(crate) trait SleeperCount {
    /// The number of readers asleep on the queue's condition variable or descriptors.
    fn sleepers(&mut self) -> &mut usize;
}

/// One blocking call across its rounds (CQ and EQ `sread`, counter `wait`): its
/// deadline, the back-off of its sleeps, and whether it may still sleep on the
/// engine's descriptors ([`FdSleep`]).
pub(crate) struct BlockingWait {
    deadline: Deadline,
    backoff: Backoff,
    fd_sleep: FdSleep,
}

impl BlockingWait {
    /// A call that gives up `timeout_ms` from now (never, for a negative value).
    pub(crate) fn new(timeout_ms: i32) -> BlockingWait {
        BlockingWait {
            deadline: Deadline::after_ms(timeout_ms),
            backoff: Backoff::new(),
            fd_sleep: FdSleep::new(),
        }
    }

    /// Whether the deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.deadline.expired()
    }

    /// After a progress round that did `work`.
    pub(crate) fn after_round(&mut self, work: usize) {
        self.fd_sleep.after_round(work);
    }

    /// How long this round may sleep (`None`: yield and poll again), after a round
    /// that did `work` with the engine `links` name.
    pub(crate) fn slice(&mut self, links: &Links, work: usize) -> Option<Duration> {
        let engine = links.engine().map(|e| &**e);
        ProgressEngine::wait_slice(engine, &mut self.backoff, work, &self.deadline)
    }

    /// Sleep on the engine's descriptors if this call may ([`FdSleep::sleep`]).
    pub(crate) fn sleep_on_fds(
        &mut self,
        links: &Links,
        enter: impl FnOnce() -> bool,
        leave: impl FnOnce(),
    ) -> bool {
        self.fd_sleep.sleep(links, &self.deadline, enter, leave)
    }

    /// The end of a round of a queue's blocking read that found nothing to return
    /// (`guard`, the queue's state, still locked): yield, or sleep for at most this
    /// round's slice — on the engine's descriptors when the call may, else on `cv` —
    /// in either case only if `idle` still holds for the state once the reader counts
    /// as a sleeper (so a push between the caller's check and the sleep is not
    /// missed).
    pub(crate) fn idle<S: SleeperCount>(
        &mut self,
        guard: MutexGuard<'_, S>,
        state: &Mutex<S>,
        cv: &Condvar,
        links: &Links,
        work: usize,
        idle: impl Fn(&S) -> bool,
    ) {
        let slice = self.slice(links, work);
        drop(guard);
        let Some(d) = slice else {
            std::thread::yield_now();
            return;
        };
        let enter = || {
            let mut guard = lock(state);
            *guard.sleepers() += 1;
            if idle(&guard) {
                true
            } else {
                *guard.sleepers() -= 1;
                false
            }
        };
        let leave = || *lock(state).sleepers() -= 1;
        if !self.sleep_on_fds(links, enter, leave) {
            let mut guard = lock(state);
            if idle(&guard) {
                *guard.sleepers() += 1;
                let mut guard = wait_for(cv, guard, d);
                *guard.sleepers() -= 1;
            }
        }
    }
}

/// The wait fd of a queue or set (`FI_GETWAIT`): `FI_ENOSYS` naming `what` when it was
/// opened without one.
pub(crate) fn wait_fd_of(fd: Option<&WaitFd>, what: &str) -> Result<i32> {
    match fd {
        Some(fd) => Ok(fd.fd()),
        None => Err(Error::new(
            Errno::ENOSYS,
            format!("this {what} has no wait fd (opened without FI_WAIT_FD/FI_WAIT_UNSPEC)"),
        )),
    }
}

/// The text of provider error `prov_errno`: the provider's own function when it set
/// one ([`crate::cq::KitCq::set_strerror`]), else the common table's.
pub(crate) fn strerror_with(
    f: &OnceLock<crate::cq::StrerrorFn>,
    prov_errno: i32,
    err_data: &[u8],
) -> String {
    match f.get() {
        Some(f) => f(prov_errno, err_data),
        None => ofi_core::error::strerror(prov_errno).into_owned(),
    }
}

/// The end of a blocking call: `timeout` ms from now, or never for a negative timeout
/// (the C API's convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// `timeout` ms from now; negative: no deadline.
    pub fn after_ms(timeout: i32) -> Deadline {
        if timeout < 0 {
            Deadline(None)
        } else {
            Deadline(Some(
                Instant::now() + Duration::from_millis(u64::from(timeout.unsigned_abs())),
            ))
        }
    }

    /// No deadline.
    pub fn never() -> Deadline {
        Deadline(None)
    }

    /// True once the deadline has passed (never for no deadline).
    pub fn expired(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d)
    }

    /// Time left (zero once expired); `None` for no deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.0.map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// How an object waits (see the module docs for the mapping from `wait_obj`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// No blocking calls, no wait fd (`FI_WAIT_NONE`).
    None,
    /// Blocking calls and a wait fd (`FI_WAIT_FD`, `FI_WAIT_UNSPEC`).
    Fd,
    /// Blocking calls without a wait fd (`FI_WAIT_MUTEX_COND`, `FI_WAIT_YIELD`).
    Internal,
}

impl WaitMode {
    /// The mode for `obj`; `FI_WAIT_POLLFD` is `FI_ENOSYS`. `FI_WAIT_SET` blocks
    /// internally: the object's owner attaches it to its set (see the module docs).
    pub fn resolve(obj: WaitObj) -> Result<WaitMode> {
        match obj {
            WaitObj::None => Ok(WaitMode::None),
            WaitObj::Fd | WaitObj::Unspec => Ok(WaitMode::Fd),
            WaitObj::MutexCond | WaitObj::Yield | WaitObj::Set => Ok(WaitMode::Internal),
            WaitObj::PollFd => Err(Error::new(
                Errno::ENOSYS,
                "FI_WAIT_POLLFD is not supported; use FI_WAIT_FD",
            )),
        }
    }

    /// True if blocking calls are allowed.
    pub fn can_block(self) -> bool {
        self != WaitMode::None
    }

    /// True if the object has a wait fd.
    pub fn has_fd(self) -> bool {
        self == WaitMode::Fd
    }

    /// A wait fd if this mode has one.
    pub(crate) fn make_fd(self) -> Result<Option<WaitFd>> {
        if self.has_fd() {
            WaitFd::new().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// A file descriptor that is readable while its object has something to report.
#[derive(Debug)]
pub struct WaitFd {
    rx: UnixDatagram,
    tx: UnixDatagram,
    armed: Mutex<bool>,
}

impl WaitFd {
    /// A new, not readable, wait fd (`FI_EMFILE` etc. from the system).
    pub fn new() -> Result<WaitFd> {
        let (rx, tx) = UnixDatagram::pair().map_err(|e| Error::from(e).context("wait fd"))?;
        rx.set_nonblocking(true)
            .map_err(|e| Error::from(e).context("wait fd"))?;
        tx.set_nonblocking(true)
            .map_err(|e| Error::from(e).context("wait fd"))?;
        Ok(WaitFd {
            rx,
            tx,
            armed: Mutex::new(false),
        })
    }

    /// The descriptor to poll for readability (owned by this object: do not close it).
    pub fn fd(&self) -> i32 {
        self.rx.as_raw_fd()
    }

    /// Make the fd readable (no effect if it already is).
    pub fn set(&self) {
        let mut armed = lock(&self.armed);
        if !*armed {
            match self.tx.send(&[1]) {
                Ok(_) => *armed = true,
                // A full buffer is readable too.
                Err(e) if e.kind() == ErrorKind::WouldBlock => *armed = true,
                // Nothing sensible to do: the fd stays unreadable, waiters still poll.
                Err(_) => {}
            }
        }
    }

    /// Make the fd not readable (no effect if it is not).
    pub fn clear(&self) {
        let mut armed = lock(&self.armed);
        if *armed {
            let mut b = [0u8; 16];
            // Bounded: at most a few bytes were ever queued.
            for _ in 0..64 {
                if self.rx.recv(&mut b).is_err() {
                    break;
                }
            }
            *armed = false;
        }
    }

    /// [`set`](Self::set) if `ready`, else [`clear`](Self::clear).
    pub fn update(&self, ready: bool) {
        if ready {
            self.set()
        } else {
            self.clear()
        }
    }

    /// True if the fd was made readable and not cleared since.
    pub fn is_set(&self) -> bool {
        *lock(&self.armed)
    }

    /// Test helper: is the fd really readable? (Reads the byte and puts it back.)
    #[cfg(test)]
    pub(crate) fn readable(&self) -> bool {
        let _g = lock(&self.armed);
        let mut b = [0u8; 1];
        match self.rx.recv(&mut b) {
            Ok(_) => {
                let _ = self.tx.send(&b);
                true
            }
            Err(_) => false,
        }
    }
}

/// An object applications wait for: the kit's CQ, counter, EQ and wait set.
pub trait Waitable: Send + Sync {
    /// Drive the progress of everything bound to the object; the work done.
    fn drive_progress(&self) -> usize;
    /// True if a read would return something now (entries, errors, a counter change,
    /// a pending signal): the caller must not block.
    fn is_ready(&self) -> bool;
    /// True if only the waiter will drive this object's progress, so a blocking wait
    /// must poll (wake at least every millisecond).
    fn needs_polling(&self) -> bool {
        false
    }
}

/// `fi_trywait`: drive the progress of every object, then `FI_EAGAIN` if any of them
/// has something to read (read it first), else `Ok` — the caller may block on the
/// objects' wait fds. An empty list is `FI_EINVAL`.
pub fn trywait(objs: &[&dyn Waitable]) -> Result<()> {
    if objs.is_empty() {
        return Err(Error::new(Errno::EINVAL, "trywait: no objects"));
    }
    for o in objs {
        o.drive_progress();
    }
    if objs.iter().any(|o| o.is_ready()) {
        Err(Error::code_only(Errno::EAGAIN))
    } else {
        Ok(())
    }
}

/// `FabricOps::trywait` for a provider whose CQs, counters, EQs and wait sets are the
/// kit's ([`KitCq`](crate::cq::KitCq), [`KitCntr`](crate::cntr::KitCntr),
/// [`KitEq`](crate::eq::KitEq), [`KitWait`]): [`trywait`] over them.
pub fn trywait_kit<F>(objs: &[ofi_core::provider::TryWaitRef<'_, F>]) -> Result<()>
where
    F: ofi_core::provider::FabricOps<Eq = crate::eq::KitEq, Wait = KitWait>,
    F::Domain: ofi_core::provider::DomainOps<F, Cq = crate::cq::KitCq, Cntr = crate::cntr::KitCntr>,
{
    use ofi_core::provider::TryWaitRef;
    let list: Vec<&dyn Waitable> = objs
        .iter()
        .map(|o| match o {
            TryWaitRef::Cq(c) => *c as &dyn Waitable,
            TryWaitRef::Cntr(c) => *c as &dyn Waitable,
            TryWaitRef::Eq(e) => *e as &dyn Waitable,
            TryWaitRef::Wait(w) => *w as &dyn Waitable,
        })
        .collect();
    trywait(&list)
}

type Members = Arc<[Weak<dyn Waitable>]>;

struct WaitSetInner {
    mode: WaitMode,
    fd: Option<WaitFd>,
    members: Mutex<Members>,
    seq: Mutex<u64>,
    cv: Condvar,
}

impl WaitSetInner {
    fn snapshot(&self) -> Members {
        lock(&self.members).clone()
    }

    fn progress(&self, members: &Members) -> (usize, bool) {
        let mut work = 0usize;
        let mut polling = false;
        for m in members.iter().filter_map(Weak::upgrade) {
            work = work.saturating_add(m.drive_progress());
            polling |= m.needs_polling();
        }
        (work, polling)
    }

    fn ready(members: &Members) -> bool {
        members
            .iter()
            .filter_map(Weak::upgrade)
            .any(|m| m.is_ready())
    }
}

/// A wait set (`fi_wait_open`): several CQs, counters and EQs signal it, and
/// [`WaitOps::wait`] blocks until one of them has something. Clones share the set.
#[derive(Clone)]
pub struct KitWait {
    inner: Arc<WaitSetInner>,
}

impl std::fmt::Debug for KitWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KitWait")
            .field("mode", &self.inner.mode)
            .field("members", &self.len())
            .finish()
    }
}

impl KitWait {
    /// Open a wait set: `FI_WAIT_FD`/`FI_WAIT_UNSPEC` (with an fd) or
    /// `FI_WAIT_MUTEX_COND`/`FI_WAIT_YIELD` (without); other wait objects and non-zero
    /// flags are `FI_EINVAL`.
    pub fn new(attr: &WaitAttr) -> Result<KitWait> {
        check_open_flags("wait set", attr.flags, OpFlags::empty())?;
        let mode = match attr.wait_obj {
            WaitObj::Fd | WaitObj::Unspec => WaitMode::Fd,
            WaitObj::MutexCond | WaitObj::Yield => WaitMode::Internal,
            other => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("a wait set cannot use wait object {other:?}"),
                ))
            }
        };
        Ok(KitWait {
            inner: Arc::new(WaitSetInner {
                mode,
                fd: mode.make_fd()?,
                members: Mutex::new(Arc::from(Vec::<Weak<dyn Waitable>>::new())),
                seq: Mutex::new(0),
                cv: Condvar::new(),
            }),
        })
    }

    /// The set's mode.
    pub fn mode(&self) -> WaitMode {
        self.inner.mode
    }

    /// Add a member (held weakly). Kit objects add themselves through their
    /// `attach_wait`; a provider may add objects of its own.
    pub fn add(&self, member: Weak<dyn Waitable>) {
        let mut g = lock(&self.inner.members);
        let mut v: Vec<Weak<dyn Waitable>> =
            g.iter().filter(|w| w.strong_count() > 0).cloned().collect();
        if !v.iter().any(|w| Weak::ptr_eq(w, &member)) {
            v.push(member);
        }
        *g = v.into();
    }

    /// Remove a member; `FI_EINVAL` if it is not one.
    pub fn remove(&self, member: &Weak<dyn Waitable>) -> Result<()> {
        let mut g = lock(&self.inner.members);
        if !g.iter().any(|w| Weak::ptr_eq(w, member)) {
            return Err(Error::new(Errno::EINVAL, "not a member of this wait set"));
        }
        let v: Vec<Weak<dyn Waitable>> = g
            .iter()
            .filter(|w| w.strong_count() > 0 && !Weak::ptr_eq(w, member))
            .cloned()
            .collect();
        *g = v.into();
        Ok(())
    }

    /// The number of live members.
    pub fn len(&self) -> usize {
        lock(&self.inner.members)
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// True if the set has no live member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A member has something new: wake the waiters and make the fd readable.
    pub fn signal(&self) {
        *lock(&self.inner.seq) += 1;
        self.inner.cv.notify_all();
        if let Some(fd) = &self.inner.fd {
            fd.set();
        }
    }

    /// True if `self` and `other` are the same set.
    pub fn same(&self, other: &KitWait) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// A wait set as a `trywait` object: its progress is its members' progress, and it is
/// ready if a member is. Checking readiness resets the set's fd first (as `fi_trywait`
/// does in the C library), so the fd reports only signals that come after the check.
impl Waitable for KitWait {
    fn drive_progress(&self) -> usize {
        self.inner.progress(&self.inner.snapshot()).0
    }

    fn is_ready(&self) -> bool {
        if let Some(fd) = &self.inner.fd {
            fd.clear();
        }
        WaitSetInner::ready(&self.inner.snapshot())
    }

    fn needs_polling(&self) -> bool {
        self.inner
            .snapshot()
            .iter()
            .filter_map(Weak::upgrade)
            .any(|m| m.needs_polling())
    }
}

impl WaitOps for KitWait {
    /// `fi_wait`: `Ok` as soon as a member has something to read, `FI_ETIMEDOUT` after
    /// `timeout` ms (negative: never). Drives the members' progress between sleeps.
    fn wait(&self, timeout: i32) -> Result<()> {
        let inner = &self.inner;
        if let Some(fd) = &inner.fd {
            fd.clear();
        }
        let deadline = Deadline::after_ms(timeout);
        let mut backoff = Backoff::new();
        loop {
            let seen = *lock(&inner.seq);
            let members = inner.snapshot();
            let (work, polling) = inner.progress(&members);
            if WaitSetInner::ready(&members) {
                return Ok(());
            }
            if deadline.expired() {
                return Err(Error::code_only(Errno::ETIMEDOUT));
            }
            match idle_slice(polling, &mut backoff, work, &deadline) {
                None => std::thread::yield_now(),
                Some(d) => {
                    let g = lock(&inner.seq);
                    if *g == seen {
                        drop(wait_for(&inner.cv, g, d));
                    }
                }
            }
        }
    }

    fn fd(&self) -> Result<i32> {
        wait_fd_of(self.inner.fd.as_ref(), "wait set")
    }
}

/// A poll set (`fi_poll`): members with a context each; [`poll`](Self::poll) drives
/// their progress and reports the contexts of those with something to read.
#[derive(Default)]
pub struct KitPollSet {
    members: Mutex<Vec<(Weak<dyn Waitable>, usize)>>,
}

impl std::fmt::Debug for KitPollSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KitPollSet")
            .field("members", &lock(&self.members).len())
            .finish()
    }
}

impl KitPollSet {
    /// An empty poll set.
    pub fn new() -> KitPollSet {
        KitPollSet::default()
    }

    /// `fi_poll_add`: add `member`, reported with `context`; adding it again updates
    /// the context.
    pub fn add(&self, member: Weak<dyn Waitable>, context: usize) {
        let mut g = lock(&self.members);
        g.retain(|(w, _)| w.strong_count() > 0);
        match g.iter_mut().find(|(w, _)| Weak::ptr_eq(w, &member)) {
            Some(e) => e.1 = context,
            None => g.push((member, context)),
        }
    }

    /// `fi_poll_del`: `FI_EINVAL` if `member` is not in the set.
    pub fn remove(&self, member: &Weak<dyn Waitable>) -> Result<()> {
        let mut g = lock(&self.members);
        let before = g.len();
        g.retain(|(w, _)| !Weak::ptr_eq(w, member));
        if g.len() == before {
            return Err(Error::new(Errno::EINVAL, "not a member of this poll set"));
        }
        Ok(())
    }

    /// `fi_poll`: drive every member's progress, then write the contexts of the members
    /// with something to read into `contexts`; their number, `FI_EAGAIN` if none,
    /// `FI_EINVAL` for an empty `contexts`. Members are called under the set's lock:
    /// they must not use the set from their progress.
    pub fn poll(&self, contexts: &mut [usize]) -> Result<usize> {
        if contexts.is_empty() {
            return Err(Error::new(Errno::EINVAL, "poll: no room for a context"));
        }
        let g = lock(&self.members);
        let mut n = 0;
        for (w, ctx) in g.iter() {
            let Some(m) = w.upgrade() else { continue };
            m.drive_progress();
            if n < contexts.len() && m.is_ready() {
                contexts[n] = *ctx;
                n += 1;
            }
        }
        if n == 0 {
            Err(Error::code_only(Errno::EAGAIN))
        } else {
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::in_a_moment;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A member whose readiness the test sets.
    #[derive(Default)]
    struct Flag {
        ready: AtomicBool,
        driven: AtomicUsize,
        polling: bool,
        /// Becomes ready at this many drives (0: never by driving).
        ready_after: usize,
    }

    impl Waitable for Flag {
        fn drive_progress(&self) -> usize {
            let driven = self.driven.fetch_add(1, Ordering::SeqCst) + 1;
            if self.ready_after != 0 && driven >= self.ready_after {
                self.ready.store(true, Ordering::SeqCst);
            }
            0
        }
        fn is_ready(&self) -> bool {
            self.ready.load(Ordering::SeqCst)
        }
        fn needs_polling(&self) -> bool {
            self.polling
        }
    }

    fn weak(f: &Arc<Flag>) -> Weak<dyn Waitable> {
        Arc::downgrade(f) as Weak<dyn Waitable>
    }

    fn set(obj: WaitObj) -> Result<KitWait> {
        KitWait::new(&WaitAttr {
            wait_obj: obj,
            flags: 0,
        })
    }

    #[test]
    fn deadlines() {
        assert_eq!(Deadline::after_ms(-1), Deadline::never());
        assert!(!Deadline::never().expired());
        assert_eq!(Deadline::never().remaining(), None);
        let d = Deadline::after_ms(0);
        assert!(d.expired());
        assert_eq!(d.remaining(), Some(Duration::ZERO));
        let d = Deadline::after_ms(10_000);
        assert!(!d.expired());
        assert!(d.remaining().unwrap() > Duration::from_secs(9));
    }

    #[test]
    fn wait_modes() {
        assert_eq!(WaitMode::resolve(WaitObj::None).unwrap(), WaitMode::None);
        assert_eq!(WaitMode::resolve(WaitObj::Fd).unwrap(), WaitMode::Fd);
        assert_eq!(WaitMode::resolve(WaitObj::Unspec).unwrap(), WaitMode::Fd);
        assert_eq!(
            WaitMode::resolve(WaitObj::MutexCond).unwrap(),
            WaitMode::Internal
        );
        assert_eq!(
            WaitMode::resolve(WaitObj::Yield).unwrap(),
            WaitMode::Internal
        );
        assert_eq!(WaitMode::resolve(WaitObj::Set).unwrap(), WaitMode::Internal);
        assert_eq!(
            WaitMode::resolve(WaitObj::PollFd).unwrap_err().code(),
            Errno::ENOSYS
        );
        assert!(!WaitMode::None.can_block() && WaitMode::Internal.can_block());
        assert!(WaitMode::Fd.has_fd() && !WaitMode::Internal.has_fd());
    }

    #[test]
    fn wait_fd_is_readable_exactly_while_set() {
        let fd = WaitFd::new().unwrap();
        assert!(fd.fd() >= 0);
        assert!(!fd.readable() && !fd.is_set());
        fd.set();
        fd.set(); // idempotent: still one byte
        assert!(fd.readable() && fd.is_set());
        fd.clear();
        assert!(!fd.readable() && !fd.is_set());
        fd.clear();
        fd.update(true);
        assert!(fd.readable());
        fd.update(false);
        assert!(!fd.readable());
    }

    #[test]
    fn trywait_drives_then_reports() {
        let a = Arc::new(Flag::default());
        let b = Arc::new(Flag::default());
        assert_eq!(trywait(&[]).unwrap_err().code(), Errno::EINVAL);
        trywait(&[&*a, &*b]).unwrap();
        assert_eq!(a.driven.load(Ordering::SeqCst), 1);
        assert_eq!(b.driven.load(Ordering::SeqCst), 1);
        b.ready.store(true, Ordering::SeqCst);
        assert_eq!(trywait(&[&*a, &*b]).unwrap_err().code(), Errno::EAGAIN);
    }

    #[test]
    fn wait_set_open_errors() {
        assert_eq!(set(WaitObj::None).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(set(WaitObj::Set).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(set(WaitObj::PollFd).unwrap_err().code(), Errno::EINVAL);
        let e = KitWait::new(&WaitAttr {
            wait_obj: WaitObj::Fd,
            flags: 1,
        })
        .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        let w = set(WaitObj::MutexCond).unwrap();
        assert_eq!(w.mode(), WaitMode::Internal);
        assert_eq!(w.fd().unwrap_err().code(), Errno::ENOSYS);
        assert!(set(WaitObj::Unspec).unwrap().fd().unwrap() >= 0);
    }

    #[test]
    fn wait_set_times_out_then_sees_a_member() {
        let w = set(WaitObj::Fd).unwrap();
        let a = Arc::new(Flag::default());
        w.add(weak(&a));
        w.add(weak(&a));
        assert_eq!(w.len(), 1);
        let t = Instant::now();
        assert_eq!(w.wait(30).unwrap_err().code(), Errno::ETIMEDOUT);
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(w.wait(0).unwrap_err().code(), Errno::ETIMEDOUT);
        a.ready.store(true, Ordering::SeqCst);
        w.wait(0).unwrap();
        w.wait(-1).unwrap();
        assert!(a.driven.load(Ordering::SeqCst) >= 3);
        assert_eq!(trywait(&[&w]).unwrap_err().code(), Errno::EAGAIN);
    }

    #[test]
    fn wait_set_is_woken_by_a_signal_from_another_thread() {
        let w = set(WaitObj::Unspec).unwrap();
        let a = Arc::new(Flag::default());
        w.add(weak(&a));
        let (w2, a2) = (w.clone(), a.clone());
        let t = Instant::now();
        let h = in_a_moment(move || {
            a2.ready.store(true, Ordering::SeqCst);
            w2.signal();
        });
        w.wait(5_000).unwrap();
        assert!(t.elapsed() < Duration::from_secs(4), "woken, not timed out");
        h.join().unwrap();
        assert!(
            w.inner.fd.as_ref().unwrap().readable(),
            "signal sets the fd"
        );
        assert!(!w.is_empty());
    }

    #[test]
    fn wait_set_polls_members_that_need_it() {
        let w = set(WaitObj::Yield).unwrap();
        // The member is ready at its 40th drive. A wait that drove it once per
        // LONG_SLICE (50 ms), as it does a member that needs no polling, would need 2 s
        // for that and times out at 10 slices; one that keeps polling gets there at once.
        let a = Arc::new(Flag {
            polling: true,
            ready_after: 40,
            ..Flag::default()
        });
        w.add(weak(&a));
        assert!(w.needs_polling());
        let slices = 10 * LONG_SLICE.as_millis() as i32;
        w.wait(slices)
            .expect("a polled member made ready by driving wakes the wait");
        assert!(a.driven.load(Ordering::SeqCst) >= 40);
    }

    #[test]
    fn wait_set_membership() {
        let w = set(WaitObj::Fd).unwrap();
        let a = Arc::new(Flag::default());
        let b = Arc::new(Flag::default());
        w.add(weak(&a));
        w.add(weak(&b));
        assert_eq!(w.len(), 2);
        w.remove(&weak(&a)).unwrap();
        assert_eq!(w.remove(&weak(&a)).unwrap_err().code(), Errno::EINVAL);
        drop(b);
        assert!(w.is_empty());
        assert!(w.same(&w.clone()));
        assert!(!w.same(&set(WaitObj::Fd).unwrap()));
        assert!(format!("{w:?}").contains("KitWait"));
    }

    #[test]
    fn poll_set_reports_ready_contexts() {
        let p = KitPollSet::new();
        let a = Arc::new(Flag::default());
        let b = Arc::new(Flag::default());
        p.add(weak(&a), 10);
        p.add(weak(&b), 20);
        p.add(weak(&b), 21); // updates the context
        let mut out = [0usize; 4];
        assert_eq!(p.poll(&mut []).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(p.poll(&mut out).unwrap_err().code(), Errno::EAGAIN);
        b.ready.store(true, Ordering::SeqCst);
        assert_eq!(p.poll(&mut out).unwrap(), 1);
        assert_eq!(out[0], 21);
        a.ready.store(true, Ordering::SeqCst);
        let mut one = [0usize; 1];
        assert_eq!(p.poll(&mut one).unwrap(), 1, "bounded by the room given");
        assert_eq!(p.poll(&mut out).unwrap(), 2);
        assert_eq!(a.driven.load(Ordering::SeqCst), 4);
        p.remove(&weak(&a)).unwrap();
        assert_eq!(p.remove(&weak(&a)).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(p.poll(&mut out).unwrap(), 1);
        assert!(format!("{p:?}").contains("KitPollSet"));
    }
}
