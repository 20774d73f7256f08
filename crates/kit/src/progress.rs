//! The per-domain progress engine (DESIGN §6).
//!
//! A provider's transport code implements [`Progress`]: one call polls the transport
//! (sockets, rings, hardware queues), moves protocol state machines on, writes the
//! completions that became ready into the kit's CQs, counters and EQs, and returns how
//! much it did. Each domain owns one [`ProgressEngine`]; endpoints (and anything else
//! that needs driving) [`register`](ProgressEngine::register) with it, and the kit's
//! CQs, counters and EQs are [bound](crate::cq::KitCq::bind_progress) to it.
//!
//! # The contract
//!
//! - Every read or wait on a kit CQ, counter or EQ calls [`ProgressEngine::drive`]
//!   first, which calls every registered source once — a read of zero entries too.
//! - Blocking waits (`sread`, `fi_cntr_wait`, `fi_wait`) alternate driving progress with
//!   sleeping on the object; they never sleep after a round that did work, and with a
//!   manual engine that has sources they sleep at most [`MAX_IDLE_SLEEP`] at a time, so
//!   a transport that needs polling is polled at least every millisecond.
//! - A source that can say which file descriptors bring it work implements
//!   [`Progress::wait_fds`]. When every source of a manual engine does, blocking waits
//!   sleep in `poll(2)` on those descriptors and the engine's kick fd (which pushes to
//!   a queue with sleepers, and posted operations, make readable) instead of waking
//!   every millisecond: a datagram or a byte on a stream wakes the waiter at once, and
//!   an idle wait costs no CPU ([`ProgressEngine::sleep_on_fds`]).
//! - [`ProgressMode::Auto`] adds one thread per engine that calls `drive` in a loop
//!   with a bounded idle back-off ([`Backoff`]: a short spin, then sleeping). When every
//!   source names its descriptors the thread sleeps in `poll(2)` on them and the kick
//!   fd (at most [`LONG_SLICE`], for sources' timers), so an idle connected endpoint
//!   costs no wake-ups; otherwise it parks for at most [`MAX_IDLE_SLEEP`].
//!   [`ProgressEngine::kick`] wakes it at once (call it when an operation is posted).
//!   Dropping the engine stops and joins the thread; if the thread does not stop
//!   within [`STOP_TIMEOUT`] (a source blocked forever) it is detached instead, so
//!   dropping never hangs.
//!
//! # Invariants
//!
//! - The engine holds its sources weakly: dropping an endpoint unregisters it (the dead
//!   reference is pruned at the next `drive`); [`ProgressEngine::unregister`] does it
//!   at once.
//! - `drive` takes no lock while calling sources and allocates nothing (the source list
//!   is an immutable shared slice replaced on registration), so a source may register
//!   or unregister sources, or read a CQ, from inside its `progress`.
//! - Each change of the source list gives it a fresh *stamp* (under the engine's lock),
//!   unique among all engines. A thread keeps its last copy of the list of a few engines
//!   ([`CACHE_WAYS`]) with the stamp it was taken at, and `drive` reuses that copy while
//!   the stamp is unchanged: an idle drive then costs no lock and no reference count on
//!   the list, one look-up in the thread's cache (one comparison when the engine is the
//!   first cached), and the upgrade of each source. The copy stays borrowed (a
//!   `RefCell` shared borrow, which a nested `drive` of the same engine shares) while
//!   the sources run, and an entry is replaced only when nothing borrows it, so a
//!   source may drive any engine, or register sources, from inside its `progress`.
//!   The cost: such a copy holds its sources weakly — a dropped source's *allocation*
//!   (its value is dropped at once) can outlive it until that thread drives the engine
//!   again, caches other engines, or exits.
//! - Sources may be called concurrently from several threads (the application's reads
//!   and the auto thread): they must be thread safe, as [`Progress`]'s bounds say.
//!
//! # What may panic
//!
//! Nothing here panics by itself. A panic in a source propagates out of `drive` to the
//! caller (the boundary adapters turn it into `FI_EOTHER`); in the auto thread it is
//! caught, and the thread goes on.

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use ofi_core::error::{Errno, Error, Result};

use crate::wait::{lock, Deadline, WaitFd};

/// A provider's progress function: poll the transport, write completions, and return
/// how much was done (0 when idle). Implemented for closures `Fn() -> usize`.
pub trait Progress: Send + Sync {
    /// Make one round of progress; the amount of work done (0: nothing to do).
    fn progress(&self) -> usize;

    /// The descriptors whose readiness brings this source work (a socket to read, a
    /// socket with queued output to write), appended to `out`; `true` if that is all a
    /// waiter needs to watch. The default, `false`, means the source must be polled
    /// (shared-memory rings, a layer over another provider), and waiters then wake
    /// every [`MAX_IDLE_SLEEP`].
    ///
    /// List only descriptors this source drains when it runs: one that stays ready
    /// without giving work (data with no receive posted) turns the fd sleep off for
    /// the rest of that wait, so it cannot spin, but it costs that waiter the benefit.
    fn wait_fds(&self, _out: &mut Vec<FdInterest>) -> bool {
        false
    }
}

/// A descriptor a progress source waits on ([`Progress::wait_fds`]). A hang-up or an
/// error on it always wakes the waiter (`POLLRDHUP`, `POLLHUP`, `POLLERR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdInterest {
    /// The descriptor.
    pub fd: RawFd,
    /// Wake when it becomes readable.
    pub read: bool,
    /// Wake when it becomes writable (queued output, a connect in progress).
    pub write: bool,
}

impl FdInterest {
    /// Readable (or hung up).
    pub fn read(fd: RawFd) -> FdInterest {
        FdInterest {
            fd,
            read: true,
            write: false,
        }
    }

    /// Readable or writable (or hung up).
    pub fn read_write(fd: RawFd) -> FdInterest {
        FdInterest {
            fd,
            read: true,
            write: true,
        }
    }

    /// Writable (or hung up).
    pub fn write(fd: RawFd) -> FdInterest {
        FdInterest {
            fd,
            read: false,
            write: true,
        }
    }

    /// Only a hang-up or an error.
    pub fn hangup(fd: RawFd) -> FdInterest {
        FdInterest {
            fd,
            read: false,
            write: false,
        }
    }

    fn events(self) -> libc::c_short {
        let mut e = libc::POLLRDHUP;
        if self.read {
            e |= libc::POLLIN;
        }
        if self.write {
            e |= libc::POLLOUT;
        }
        e
    }
}

/// Why [`ProgressEngine::sleep_on_fds`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdWake {
    /// A source's descriptor became ready.
    Transport,
    /// The caller's own descriptor, or a [`ProgressEngine::kick`].
    Other,
    /// The time ran out (or `poll` failed, which the caller treats the same way).
    Timeout,
}

impl<F: Fn() -> usize + Send + Sync> Progress for F {
    fn progress(&self) -> usize {
        self()
    }
}

/// For a provider that offers both progress modes (its template says
/// `FI_PROGRESS_AUTO`, so hints asking for either match): make each getinfo result's
/// data progress manual unless the hints asked for auto. Busy-polling applications
/// then get no progress thread competing with them for the CPU and the endpoint's
/// lock — the C providers answer manual too.
pub fn prefer_manual_data_progress(
    req: &ofi_core::getinfo::GetinfoRequest,
    infos: &mut [ofi_core::attr::Info],
) {
    let asked_auto = req
        .hints
        .as_ref()
        .is_some_and(|h| h.domain_attr.data_progress == ofi_core::enums::Progress::Auto);
    if !asked_auto {
        for i in infos {
            i.domain_attr.data_progress = ofi_core::enums::Progress::Manual;
        }
    }
}

/// How an engine is driven.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// Only by the application's calls (reads and waits): `FI_PROGRESS_MANUAL`.
    #[default]
    Manual,
    /// Also by a thread of the engine's own: `FI_PROGRESS_AUTO`.
    Auto,
}

impl From<ofi_core::enums::Progress> for ProgressMode {
    /// `FI_PROGRESS_AUTO` is [`ProgressMode::Auto`]; manual and unspecified are manual.
    fn from(p: ofi_core::enums::Progress) -> ProgressMode {
        match p {
            ofi_core::enums::Progress::Auto => ProgressMode::Auto,
            _ => ProgressMode::Manual,
        }
    }
}

/// Idle rounds spent spinning (yielding) before an idle loop starts to sleep.
pub const IDLE_SPINS: u32 = 64;
/// The longest an idle loop sleeps before driving progress again.
pub const MAX_IDLE_SLEEP: Duration = Duration::from_millis(1);
/// How long dropping an engine waits for its auto thread to stop before detaching it.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a blocking wait sleeps in one go when no polling is needed (progress
/// comes from another thread, which wakes the waiter); it then re-checks.
pub const LONG_SLICE: Duration = Duration::from_millis(50);

/// The idle back-off of the auto thread and of blocking waits: after a round that did
/// work, go again at once; after an idle round, spin for [`IDLE_SPINS`] rounds, then
/// sleep 16 µs, doubling up to [`MAX_IDLE_SLEEP`].
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    idle: u32,
}

impl Backoff {
    /// A back-off that has seen no idle round.
    pub fn new() -> Backoff {
        Backoff { idle: 0 }
    }

    /// Forget the idle rounds seen so far.
    pub fn reset(&mut self) {
        self.idle = 0;
    }

    /// After a round that did `work` units: `None` means go again at once (yield the
    /// CPU if `work` was 0), `Some(d)` means sleep at most `d` (≤ [`MAX_IDLE_SLEEP`]).
    pub fn next(&mut self, work: usize) -> Option<Duration> {
        if work > 0 {
            self.idle = 0;
            return None;
        }
        self.idle = self.idle.saturating_add(1);
        if self.idle <= IDLE_SPINS {
            return None;
        }
        let step = (self.idle - IDLE_SPINS - 1).min(6);
        Some(Duration::from_micros(16u64 << step).min(MAX_IDLE_SLEEP))
    }
}

type SourceList = Arc<[Weak<dyn Progress>]>;

/// How many engines' source lists a thread keeps (see the module docs): enough for a
/// layered provider's engine and its core provider's, and a few domains polled in turn.
pub const CACHE_WAYS: usize = 4;

/// Engine ids and list stamps, from one sequence: both start at 1 (0 marks a free
/// cache entry), and a stamp names one engine's list of one generation, never another
/// engine's.
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

/// A fresh engine id or list stamp.
fn next_stamp() -> u64 {
    NEXT_STAMP.fetch_add(1, Ordering::Relaxed)
}

/// One entry of a thread's list cache. Its three fields change together, and only
/// while `list` is not borrowed: an entry whose list a `drive` of this thread is
/// running stays as it is until that drive is done.
struct Cached {
    /// The engine's id (0: free).
    engine: Cell<u64>,
    /// The stamp of the engine's list when `list` was taken (0: free).
    stamp: Cell<u64>,
    /// The list (`None`: free); borrowed while drives of this thread run its sources.
    list: RefCell<Option<SourceList>>,
}

thread_local! {
    /// A thread's copies of engines' source lists.
    static LISTS: [Cached; CACHE_WAYS] = const {
        [const {
            Cached {
                engine: Cell::new(0),
                stamp: Cell::new(0),
                list: RefCell::new(None),
            }
        }; CACHE_WAYS]
    };
    /// The next entry of `LISTS` to replace when every entry is taken.
    static VICTIM: Cell<usize> = const { Cell::new(0) };
}

/// Call every source of `list` once: the total work, and whether one was dead.
#[inline]
fn run_sources(list: &[Weak<dyn Progress>]) -> (usize, bool) {
    if let [w] = list {
        // The common case (one endpoint in the domain), without the loop.
        return match w.upgrade() {
            Some(s) => (s.progress(), false),
            None => (0, true),
        };
    }
    run_each(list)
}

/// [`run_sources`] for a list of any length.
#[inline(never)]
fn run_each(list: &[Weak<dyn Progress>]) -> (usize, bool) {
    let mut work = 0usize;
    let mut dead = false;
    for w in list {
        match w.upgrade() {
            Some(s) => work = work.saturating_add(s.progress()),
            None => dead = true,
        }
    }
    (work, dead)
}

/// A thread's list cache.
struct ListCache;

impl ListCache {
    /// Run the sources of this thread's copy of the list of stamp `stamp`; `None` if
    /// there is none.
    #[inline]
    fn run(stamp: u64) -> Option<(usize, bool)> {
        LISTS
            .try_with(|ways| {
                let e = ways.iter().find(|e| e.stamp.get() == stamp)?;
                // Shared: a nested drive of the same engine runs it too.
                let list = e.list.try_borrow().ok()?;
                Some(run_sources(list.as_deref()?))
            })
            .ok()
            .flatten()
    }

    /// Keep `list` (of stamp `stamp`) as this thread's copy of `engine`'s, in the entry
    /// of `engine`, else a free one, else the next victim; not at all if that entry is
    /// in use (drives nested in the sources of others, or an outer drive of `engine`
    /// itself, which caches the list when a later drive finds its copy stale). Whatever
    /// it replaces is dropped after the cache is left.
    fn put(engine: u64, stamp: u64, list: SourceList) {
        let old = LISTS
            .try_with(|ways| {
                let e = match ways.iter().find(|e| e.engine.get() == engine) {
                    Some(e) => e,
                    None => match ways.iter().find(|e| e.engine.get() == 0) {
                        Some(e) => e,
                        None => {
                            let v = VICTIM.try_with(|v| {
                                let i = v.get();
                                v.set(i.wrapping_add(1));
                                i
                            });
                            &ways[v.unwrap_or(0) % CACHE_WAYS]
                        }
                    },
                };
                let mut slot = e.list.try_borrow_mut().ok()?;
                e.engine.set(engine);
                e.stamp.set(stamp);
                slot.replace(list)
            })
            .ok()
            .flatten();
        drop(old);
    }
}

/// What the engine shares with its auto thread.
struct Shared {
    /// This engine's id in the threads' list caches.
    id: u64,
    sources: Mutex<SourceList>,
    /// The stamp of `sources`: a fresh one (set under `sources`' lock) each time the
    /// list is replaced.
    stamp: AtomicU64,
    live: AtomicUsize,
    drives: AtomicU64,
    stop: AtomicBool,
    exited: Mutex<bool>,
    exited_cv: Condvar,
    panics: AtomicU64,
    /// Waiters asleep in [`ProgressEngine::sleep_on_fds`].
    fd_sleepers: AtomicUsize,
    /// Made readable by `kick` while someone sleeps on fds (created on first use).
    kick_fd: std::sync::OnceLock<Option<WaitFd>>,
    /// The auto thread's longest sleep on descriptors ([`LONG_SLICE`]; tests lengthen
    /// it to tell a wake-up from a time-out).
    auto_slice: Duration,
    /// Times the auto thread parked (its sleep when descriptors cannot be used).
    auto_parks: AtomicU64,
    /// Times a source's descriptor woke the auto thread from its descriptor sleep.
    auto_transport_wakes: AtomicU64,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            id: next_stamp(),
            sources: Mutex::new(Arc::from(Vec::<Weak<dyn Progress>>::new())),
            stamp: AtomicU64::new(next_stamp()),
            live: AtomicUsize::new(0),
            drives: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            exited: Mutex::new(false),
            exited_cv: Condvar::new(),
            panics: AtomicU64::new(0),
            fd_sleepers: AtomicUsize::new(0),
            kick_fd: std::sync::OnceLock::new(),
            auto_slice: LONG_SLICE,
            auto_parks: AtomicU64::new(0),
            auto_transport_wakes: AtomicU64::new(0),
        }
    }

    fn drive(&self) -> usize {
        // A diagnostic count: a plain increment, so concurrent drives may lose one.
        let n = self.drives.load(Ordering::Relaxed);
        self.drives.store(n.wrapping_add(1), Ordering::Relaxed);
        // The list of the current stamp: this thread's copy if it has one (no lock, no
        // reference count).
        let stamp = self.stamp.load(Ordering::Acquire);
        let (work, dead) = match ListCache::run(stamp) {
            Some(r) => r,
            None => self.drive_shared(),
        };
        if dead {
            self.prune();
        }
        work
    }

    /// `drive` without this thread's copy of the list (none, or stale): the shared
    /// list, taken under the lock with its stamp, becomes the copy.
    #[cold]
    #[inline(never)]
    fn drive_shared(&self) -> (usize, bool) {
        let (list, stamp) = {
            let g = lock(&self.sources);
            (g.clone(), self.stamp.load(Ordering::Relaxed))
        };
        let r = run_sources(&list);
        ListCache::put(self.id, stamp, list);
        r
    }

    /// Replace the list by its live members (plus `add`, minus `remove`).
    fn rebuild(&self, add: Option<Weak<dyn Progress>>, remove: Option<&Weak<dyn Progress>>) {
        let mut g = lock(&self.sources);
        let mut v: Vec<Weak<dyn Progress>> = g
            .iter()
            .filter(|w| w.strong_count() > 0)
            .filter(|w| !matches!(remove, Some(r) if Weak::ptr_eq(w, r)))
            .cloned()
            .collect();
        if let Some(a) = add {
            if !v.iter().any(|w| Weak::ptr_eq(w, &a)) {
                v.push(a);
            }
        }
        self.live.store(v.len(), Ordering::Release);
        *g = v.into();
        // Published after the list (and under the lock): a drive that sees the new
        // stamp finds the new list.
        self.stamp.store(next_stamp(), Ordering::Release);
    }

    fn prune(&self) {
        self.rebuild(None, None);
    }

    /// Make the kick fd readable if anyone sleeps on it.
    #[inline]
    fn wake_fd_sleepers(&self) {
        if self.fd_sleepers.load(Ordering::SeqCst) > 0 {
            if let Some(Some(fd)) = self.kick_fd.get() {
                fd.set();
            }
        }
    }

    /// One drive of the auto thread: a panic of a source is counted, not propagated.
    fn drive_caught(&self) -> usize {
        match catch_unwind(AssertUnwindSafe(|| self.drive())) {
            Ok(w) => w,
            Err(_) => {
                self.panics.fetch_add(1, Ordering::Relaxed);
                0
            }
        }
    }

    /// [`ProgressEngine::sleep_on_fds`] without the mode check (the auto thread sleeps
    /// this way too).
    #[allow(unsafe_code)]
    fn sleep_on_fds(
        &self,
        d: Duration,
        enter: impl FnOnce() -> bool,
        leave: impl FnOnce(),
    ) -> Option<FdWake> {
        let kick = self.kick_fd.get_or_init(|| WaitFd::new().ok()).as_ref()?;
        let list: SourceList = lock(&self.sources).clone();
        let mut wanted = Vec::new();
        let mut any = false;
        for s in list.iter().filter_map(Weak::upgrade) {
            any = true;
            if !s.wait_fds(&mut wanted) {
                return None;
            }
        }
        if !any {
            return None;
        }
        let mut fds: Vec<libc::pollfd> = wanted
            .iter()
            .map(|w| libc::pollfd {
                fd: w.fd,
                events: w.events(),
                revents: 0,
            })
            .collect();
        let transport = fds.len();
        fds.push(libc::pollfd {
            fd: kick.fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        self.fd_sleepers.fetch_add(1, Ordering::SeqCst);
        if !enter() {
            self.fd_sleepers.fetch_sub(1, Ordering::SeqCst);
            return Some(FdWake::Other);
        }
        let ms = d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd
        // structs for the duration of the call; poll only writes their `revents`. A
        // descriptor closed meanwhile by its source is reported as POLLNVAL, never a
        // memory access.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        leave();
        self.fd_sleepers.fetch_sub(1, Ordering::SeqCst);
        kick.clear();
        Some(if n <= 0 {
            FdWake::Timeout
        } else if fds[..transport].iter().any(|p| p.revents != 0) {
            FdWake::Transport
        } else {
            FdWake::Other
        })
    }
}

/// One domain's progress engine: its registered sources and, in
/// [`ProgressMode::Auto`], its progress thread.
pub struct ProgressEngine {
    shared: Arc<Shared>,
    mode: ProgressMode,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The auto thread, to unpark it without taking `worker`'s lock.
    thread: Option<Thread>,
}

impl std::fmt::Debug for ProgressEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressEngine")
            .field("mode", &self.mode)
            .field("sources", &self.sources())
            .field("drives", &self.drives())
            .field("running", &self.is_running())
            .finish()
    }
}

impl ProgressEngine {
    /// An engine in `mode`; `Auto` starts the progress thread (`FI_ENOMEM` if the
    /// system refuses a thread).
    pub fn new(mode: ProgressMode) -> Result<ProgressEngine> {
        Self::with_shared(mode, Shared::new())
    }

    /// A domain's engine, in the data progress mode `info` asks for.
    pub fn for_domain(info: &ofi_core::attr::Info) -> Result<Arc<ProgressEngine>> {
        ProgressEngine::new(ProgressMode::from(info.domain_attr.data_progress)).map(Arc::new)
    }

    /// An auto engine whose thread sleeps on descriptors for up to `slice` at a time.
    #[cfg(test)]
    fn auto_with_slice(slice: Duration) -> ProgressEngine {
        let mut shared = Shared::new();
        shared.auto_slice = slice;
        Self::with_shared(ProgressMode::Auto, shared).unwrap()
    }

    fn with_shared(mode: ProgressMode, shared: Shared) -> Result<ProgressEngine> {
        let shared = Arc::new(shared);
        let worker = match mode {
            ProgressMode::Manual => None,
            ProgressMode::Auto => {
                let s = shared.clone();
                let h = thread::Builder::new()
                    .name("ofi-progress".into())
                    .spawn(move || run(s))
                    .map_err(|e| {
                        Error::new(
                            Errno::ENOMEM,
                            format!("cannot start the progress thread: {e}"),
                        )
                    })?;
                Some(h)
            }
        };
        Ok(ProgressEngine {
            shared,
            mode,
            thread: worker.as_ref().map(|h| h.thread().clone()),
            worker: Mutex::new(worker),
        })
    }

    /// A manual engine (cannot fail).
    pub fn manual() -> ProgressEngine {
        ProgressEngine {
            shared: Arc::new(Shared::new()),
            mode: ProgressMode::Manual,
            worker: Mutex::new(None),
            thread: None,
        }
    }

    /// The engine's mode.
    pub fn mode(&self) -> ProgressMode {
        self.mode
    }

    /// Register `src` (held weakly: dropping it unregisters it). Registering the same
    /// source twice keeps one entry.
    pub fn register<T: Progress + 'static>(&self, src: &Arc<T>) {
        let w: Weak<dyn Progress> = Arc::downgrade(src) as Weak<dyn Progress>;
        self.register_weak(w);
    }

    /// Register a source given as a weak reference.
    pub fn register_weak(&self, src: Weak<dyn Progress>) {
        self.shared.rebuild(Some(src), None);
        self.kick();
    }

    /// Unregister `src`; false if it was not registered.
    pub fn unregister<T: Progress + 'static>(&self, src: &Arc<T>) -> bool {
        let w: Weak<dyn Progress> = Arc::downgrade(src) as Weak<dyn Progress>;
        let before = {
            let g = lock(&self.shared.sources);
            g.iter().any(|x| Weak::ptr_eq(x, &w))
        };
        self.shared.rebuild(None, Some(&w));
        before
    }

    /// The number of registered sources still alive (as of the last change or drive).
    pub fn sources(&self) -> usize {
        self.shared.live.load(Ordering::Acquire)
    }

    /// Call every registered source once; the total work they reported.
    #[inline]
    pub fn drive(&self) -> usize {
        self.shared.drive()
    }

    /// How many times `drive` has run (from any thread, the auto thread included; a
    /// diagnostic count that two threads driving at the same instant may undercount).
    pub fn drives(&self) -> u64 {
        self.shared.drives.load(Ordering::Relaxed)
    }

    /// How many panics of sources the auto thread caught.
    pub fn caught_panics(&self) -> u64 {
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// True if blocking waits must poll: a manual engine with sources (nobody else
    /// drives them, so a waiter wakes at least every [`MAX_IDLE_SLEEP`]).
    pub fn needs_polling(&self) -> bool {
        self.mode == ProgressMode::Manual && self.sources() > 0
    }

    /// Wake the auto thread now (after posting an operation), parked or asleep on its
    /// sources' descriptors; in manual mode, wake the waiters asleep in
    /// [`sleep_on_fds`](Self::sleep_on_fds) (one atomic load when there are none).
    #[inline]
    pub fn kick(&self) {
        if let Some(t) = &self.thread {
            t.unpark();
            // Orders the caller's posted work before the sleeper count is read; the
            // thread counts itself before its last look at the sources (`run`).
            fence(Ordering::SeqCst);
        }
        self.shared.wake_fd_sleepers();
    }

    /// Sleep at most `d` in `poll(2)` on every source's [`Progress::wait_fds`] and the
    /// engine's kick fd. `None` when the engine cannot be waited on that way — auto mode
    /// (its thread drives), a source that must be polled, or no sources — and the
    /// caller sleeps its own way instead.
    ///
    /// `enter` runs once this call counts as a sleeper, so a [`kick`](Self::kick) from
    /// then on wakes it: the caller checks its queue there (under its lock) and
    /// registers itself so that pushes kick the engine; `false` means "ready after
    /// all, don't sleep" (answered as [`FdWake::Other`]). `leave` runs after the sleep
    /// when `enter` returned true. Thus a push between the caller's last check and the
    /// sleep is never lost. Two waiters asleep on one engine share the kick fd: the
    /// first to wake clears it, so the second may sleep out its slice — one reason
    /// callers pass short slices.
    pub fn sleep_on_fds(
        &self,
        d: Duration,
        enter: impl FnOnce() -> bool,
        leave: impl FnOnce(),
    ) -> Option<FdWake> {
        if self.mode != ProgressMode::Manual {
            return None;
        }
        self.shared.sleep_on_fds(d, enter, leave)
    }

    /// True while the auto thread runs.
    pub fn is_running(&self) -> bool {
        lock(&self.worker).is_some() && !*lock(&self.shared.exited)
    }

    /// Stop the auto thread and join it, waiting at most [`STOP_TIMEOUT`] (then the
    /// thread is detached). Idempotent; called by `Drop`. Returns true if the thread
    /// (if any) has stopped.
    pub fn stop(&self) -> bool {
        let Some(handle) = lock(&self.worker).take() else {
            return true;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        handle.thread().unpark();
        self.shared.wake_fd_sleepers();
        if handle.thread().id() == thread::current().id() {
            // Dropped from inside a source called by the thread itself: it stops at its
            // next check; joining here would wait for ourselves.
            return false;
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut exited = lock(&self.shared.exited);
        while !*exited {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            exited = self
                .shared
                .exited_cv
                .wait_timeout(exited, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let done = *exited;
        drop(exited);
        if done {
            // The thread has left its loop: the join returns at once.
            let _ = handle.join();
        }
        done
    }

    /// How long a blocking wait may sleep after a round that did `work`, given its
    /// back-off and deadline: `None` means go again at once (yield first if `work`
    /// is 0). Polls (at most [`MAX_IDLE_SLEEP`] asleep) only if `engine` needs it.
    pub fn wait_slice(
        engine: Option<&ProgressEngine>,
        backoff: &mut Backoff,
        work: usize,
        deadline: &Deadline,
    ) -> Option<Duration> {
        idle_slice(
            engine.is_some_and(ProgressEngine::needs_polling),
            backoff,
            work,
            deadline,
        )
    }
}

/// The sleep of one round of a blocking wait. With `polling` (someone must drive
/// progress and only the waiter will): the back-off, at most [`MAX_IDLE_SLEEP`].
/// Without: at once after work, else [`LONG_SLICE`] (pushes wake the waiter earlier).
/// Always capped by the deadline; `None` means go again at once.
pub fn idle_slice(
    polling: bool,
    backoff: &mut Backoff,
    work: usize,
    deadline: &Deadline,
) -> Option<Duration> {
    let d = if polling {
        backoff.next(work)?
    } else if work > 0 {
        return None;
    } else {
        LONG_SLICE
    };
    Some(match deadline.remaining() {
        Some(r) => d.min(r),
        None => d,
    })
}

impl Drop for ProgressEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The auto thread's loop. Idle, it backs off ([`Backoff`]); once the back-off says
/// sleep, it sleeps in `poll(2)` on its sources' descriptors and the kick fd for up to
/// [`LONG_SLICE`] when every source can name its descriptors, else parks for the
/// back-off's slice. Just before such a sleep it counts itself as a sleeper and drives
/// once more, so work posted meanwhile either is seen by that drive or kicks the fd
/// ([`ProgressEngine::kick`]). A descriptor that wakes it without giving work (data no
/// receive takes yet) turns the fd sleep off until work is done again, so the thread
/// never spins on it.
fn run(shared: Arc<Shared>) {
    let mut backoff = Backoff::new();
    let mut fd_sleep = true;
    let mut woke_by_transport = false;
    while !shared.stop.load(Ordering::Acquire) {
        let work = shared.drive_caught();
        if work > 0 {
            fd_sleep = true;
        } else if woke_by_transport {
            fd_sleep = false;
        }
        woke_by_transport = false;
        match backoff.next(work) {
            None if work == 0 => thread::yield_now(),
            None => {}
            Some(d) => {
                let wake = if fd_sleep {
                    shared.sleep_on_fds(
                        shared.auto_slice,
                        || !shared.stop.load(Ordering::SeqCst) && shared.drive_caught() == 0,
                        || {},
                    )
                } else {
                    None
                };
                match wake {
                    Some(FdWake::Transport) => {
                        woke_by_transport = true;
                        shared.auto_transport_wakes.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(FdWake::Other) => backoff.reset(),
                    Some(FdWake::Timeout) => {}
                    // A source that must be polled (or is busy and cannot say): park.
                    None => {
                        shared.auto_parks.fetch_add(1, Ordering::Relaxed);
                        thread::park_timeout(d);
                    }
                }
            }
        }
    }
    *lock(&shared.exited) = true;
    shared.exited_cv.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that counts its calls and reports `work` each time.
    struct Counting {
        calls: AtomicU64,
        work: AtomicUsize,
    }

    impl Counting {
        fn new(work: usize) -> Arc<Counting> {
            Arc::new(Counting {
                calls: AtomicU64::new(0),
                work: AtomicUsize::new(work),
            })
        }
        fn calls(&self) -> u64 {
            self.calls.load(Ordering::SeqCst)
        }
    }

    /// A manual engine with one [`Counting`] source registered per entry of `work`
    /// (reporting that much work), in order.
    fn manual_with<const N: usize>(work: [usize; N]) -> (ProgressEngine, [Arc<Counting>; N]) {
        let e = ProgressEngine::manual();
        let sources = work.map(Counting::new);
        for s in &sources {
            e.register(s);
        }
        (e, sources)
    }

    impl Progress for Counting {
        fn progress(&self) -> usize {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.work.load(Ordering::SeqCst)
        }
    }

    /// Poll `cond` until true or `limit` passes.
    fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if cond() {
                return true;
            }
            thread::sleep(Duration::from_millis(1));
        }
        cond()
    }

    #[test]
    fn drive_calls_each_source_once_and_sums_work() {
        let (e, [a, b]) = manual_with([2, 3]);
        e.register(&a); // twice: still one entry
        assert_eq!(e.sources(), 2);
        assert_eq!(e.drive(), 5);
        assert_eq!((a.calls(), b.calls()), (1, 1));
        assert_eq!(e.drives(), 1);
        assert!(e.needs_polling());
    }

    #[test]
    fn dropping_a_source_unregisters_it() {
        let (e, [a, b]) = manual_with([1, 1]);
        drop(b);
        assert_eq!(e.drive(), 1);
        assert_eq!(e.sources(), 1, "the dead source was pruned");
        assert!(e.unregister(&a));
        assert!(!e.unregister(&a));
        assert_eq!(e.sources(), 0);
        assert_eq!(e.drive(), 0);
        assert_eq!(a.calls(), 1);
        assert!(!e.needs_polling());
    }

    #[test]
    fn closures_are_sources_and_may_register_from_inside() {
        let e = Arc::new(ProgressEngine::manual());
        let inner = Counting::new(0);
        let (e2, inner2) = (Arc::downgrade(&e), inner.clone());
        let src = Arc::new(move || {
            if let Some(e) = e2.upgrade() {
                e.register(&inner2); // no deadlock: drive holds no lock while calling
            }
            1usize
        });
        e.register(&src);
        assert_eq!(e.drive(), 1);
        assert_eq!(e.sources(), 2);
        e.drive();
        assert_eq!(inner.calls(), 1);
    }

    /// The thread's cached copy of the list follows every change: registration,
    /// unregistration, a drop, several engines in turn, and a nested drive.
    #[test]
    fn the_cached_source_list_follows_changes() {
        let e1 = ProgressEngine::manual();
        let e2 = ProgressEngine::manual();
        let a = Counting::new(1);
        let b = Counting::new(10);
        e1.register(&a);
        assert_eq!(e1.drive(), 1);
        assert_eq!(e1.drive(), 1); // from the cache
        e1.register(&b);
        assert_eq!(e1.drive(), 11, "a registration is seen at once");
        assert!(e1.unregister(&a));
        assert_eq!(e1.drive(), 10, "an unregistration too");
        // More engines than cache entries, driven in turn from one thread.
        let many: Vec<(ProgressEngine, Arc<Counting>)> = (0..CACHE_WAYS + 2)
            .map(|i| {
                let (e, [s]) = manual_with([i + 1]);
                (e, s)
            })
            .collect();
        for _ in 0..3 {
            for (i, (e, _)) in many.iter().enumerate() {
                assert_eq!(e.drive(), i + 1);
            }
            assert_eq!(e1.drive(), 10);
            assert_eq!(e2.drive(), 0);
        }
        drop(b);
        assert_eq!(e1.drive(), 0, "a dropped source is skipped");
        assert_eq!(e1.sources(), 0);
        // A source that drives its own engine (a nested drive) from inside progress.
        let e3 = Arc::new(ProgressEngine::manual());
        let inner = Counting::new(2);
        e3.register(&inner);
        let depth = Arc::new(AtomicUsize::new(0));
        let (w, d) = (Arc::downgrade(&e3), depth.clone());
        let nested = Arc::new(move || {
            if d.fetch_add(1, Ordering::SeqCst) == 0 {
                if let Some(e) = w.upgrade() {
                    e.drive();
                }
            }
            d.fetch_sub(1, Ordering::SeqCst);
            0usize
        });
        e3.register(&nested);
        assert_eq!(e3.drive(), 2);
        assert_eq!(inner.calls(), 2, "called by the outer and the nested drive");
        assert_eq!(e3.drive(), 2);
        assert_eq!(inner.calls(), 4);
    }

    /// A cache entry in use by a drive is left alone: a source that, inside a drive of
    /// its engine served from the cache, registers another source and drives its
    /// engine again (nested) and more engines than the cache has entries. Every drive
    /// sees the list current when it starts.
    #[test]
    fn a_cache_entry_in_use_is_left_alone() {
        let e = Arc::new(ProgressEngine::manual());
        let late = Counting::new(100);
        let others: Arc<Vec<(ProgressEngine, Arc<Counting>)>> = Arc::new(
            (0..CACHE_WAYS + 1)
                .map(|i| {
                    let (o, [s]) = manual_with([i + 1]);
                    (o, s)
                })
                .collect(),
        );
        let nested = Arc::new(Mutex::new(Vec::new()));
        let calls = AtomicUsize::new(0);
        let (w, l, o2, n2) = (
            Arc::downgrade(&e),
            late.clone(),
            others.clone(),
            nested.clone(),
        );
        let src = Arc::new(move || {
            if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                let e = w.upgrade().unwrap();
                e.register(&l);
                lock(&n2).push(e.drive());
                for (i, (o, _)) in o2.iter().enumerate() {
                    assert_eq!(o.drive(), i + 1);
                }
                lock(&n2).push(e.drive());
            }
            1usize
        });
        e.register(&src);
        assert_eq!(e.drive(), 1, "the first drive caches the list");
        assert_eq!(
            e.drive(),
            1,
            "the cached list, as it was when the drive began"
        );
        assert_eq!(
            *lock(&nested),
            vec![101, 101],
            "nested drives see the new list"
        );
        assert_eq!(late.calls(), 2);
        assert_eq!(e.drive(), 101);
        assert_eq!(e.drive(), 101);
        for (i, (o, _)) in others.iter().enumerate() {
            assert_eq!(o.drive(), i + 1);
        }
        assert_eq!(e.drive(), 101);
        assert_eq!(late.calls(), 5);
    }

    #[test]
    fn mode_from_core_progress() {
        use ofi_core::enums::Progress as P;
        assert_eq!(ProgressMode::from(P::Auto), ProgressMode::Auto);
        assert_eq!(ProgressMode::from(P::Manual), ProgressMode::Manual);
        assert_eq!(ProgressMode::from(P::Unspec), ProgressMode::Manual);
    }

    #[test]
    fn backoff_spins_then_sleeps_at_most_a_millisecond() {
        let mut b = Backoff::new();
        assert_eq!(b.next(5), None);
        for _ in 0..IDLE_SPINS {
            assert_eq!(b.next(0), None);
        }
        let first = b.next(0).expect("sleeps after the spin");
        assert_eq!(first, Duration::from_micros(16));
        let mut last = first;
        for _ in 0..100 {
            let d = b.next(0).unwrap();
            assert!(d >= last && d <= MAX_IDLE_SLEEP);
            last = d;
        }
        assert_eq!(last, MAX_IDLE_SLEEP);
        assert_eq!(b.next(1), None, "work resets the back-off");
        assert_eq!(b.next(0), None);
        b.reset();
        assert_eq!(b.next(0), None);
    }

    #[test]
    fn wait_slice_polls_only_for_manual_engines_with_sources() {
        let d = Deadline::after_ms(-1);
        let mut b = Backoff::new();
        // No engine: sleep long (woken by pushes), but not after work.
        assert_eq!(
            ProgressEngine::wait_slice(None, &mut b, 0, &d),
            Some(LONG_SLICE)
        );
        assert_eq!(ProgressEngine::wait_slice(None, &mut b, 1, &d), None);
        // Manual engine with a source: the back-off.
        let (e, [_held]) = manual_with([0]); // held: the engine keeps sources weakly
        for _ in 0..IDLE_SPINS {
            assert_eq!(ProgressEngine::wait_slice(Some(&e), &mut b, 0, &d), None);
        }
        let s1 = ProgressEngine::wait_slice(Some(&e), &mut b, 0, &d).unwrap();
        assert!(s1 <= MAX_IDLE_SLEEP);
        // A deadline caps the slice.
        let short = Deadline::after_ms(0);
        assert_eq!(
            ProgressEngine::wait_slice(None, &mut b, 0, &short),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn auto_thread_drives_and_stops() {
        let e = ProgressEngine::new(ProgressMode::Auto).unwrap();
        assert!(e.is_running());
        let s = Counting::new(0);
        e.register(&s);
        assert!(
            eventually(Duration::from_secs(5), || s.calls() >= 3),
            "the auto thread drives the source"
        );
        let t = Instant::now();
        assert!(e.stop());
        assert!(t.elapsed() < STOP_TIMEOUT, "the stop is prompt");
        assert!(!e.is_running());
        // `stop` returned true: the thread has exited (it set `exited` last), so the
        // count is final; a kick, which would wake a live thread, changes nothing.
        let after = s.calls();
        e.kick();
        assert_eq!(s.calls(), after, "no progress after stop");
        assert!(e.stop(), "stop is idempotent");
    }

    #[test]
    fn auto_thread_stops_on_drop_and_survives_a_panicking_source() {
        let e = ProgressEngine::new(ProgressMode::Auto).unwrap();
        let boom = Arc::new(|| -> usize { panic!("source exploded") });
        e.register(&boom);
        assert!(eventually(Duration::from_secs(5), || e.caught_panics() >= 1));
        assert!(e.is_running(), "the thread goes on after a panic");
        let t = Instant::now();
        drop(e);
        assert!(t.elapsed() < STOP_TIMEOUT);
    }

    #[test]
    fn auto_engine_dropped_from_its_own_thread_does_not_hang() {
        // The source holds the last reference to the engine and drops it from inside
        // progress, on the auto thread.
        struct Holder {
            engine: Mutex<Option<Arc<ProgressEngine>>>,
            done: AtomicBool,
        }
        impl Progress for Holder {
            fn progress(&self) -> usize {
                drop(lock(&self.engine).take());
                self.done.store(true, Ordering::SeqCst);
                0
            }
        }
        let e = Arc::new(ProgressEngine::new(ProgressMode::Auto).unwrap());
        let h = Arc::new(Holder {
            engine: Mutex::new(Some(e.clone())),
            done: AtomicBool::new(false),
        });
        e.register(&h);
        drop(e);
        assert!(eventually(Duration::from_secs(5), || h
            .done
            .load(Ordering::SeqCst)));
    }

    #[test]
    fn kick_and_manual_stop_are_harmless() {
        let e = ProgressEngine::manual();
        e.kick();
        assert!(e.stop());
        assert!(!e.is_running());
        assert_eq!(e.mode(), ProgressMode::Manual);
        assert!(format!("{e:?}").contains("Manual"));
    }
}

/// Blocking waits over sources that can be waited on by descriptor.
#[cfg(test)]
mod fd_wait_tests {
    use super::*;
    use crate::cntr::KitCntr;
    use ofi_core::cntr::CntrAttr;
    use ofi_core::enums::WaitObj;
    use ofi_core::provider::CntrOps;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;

    /// A transport of one socket: each datagram read is one counted completion.
    struct SockSource {
        rx: UnixDatagram,
        cntr: KitCntr,
        by_fd: bool,
    }

    impl Progress for SockSource {
        fn progress(&self) -> usize {
            let mut b = [0u8; 8];
            let mut n = 0;
            while self.rx.recv(&mut b).is_ok() {
                self.cntr.inc();
                n += 1;
            }
            n
        }
        fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
            out.push(FdInterest::read(self.rx.as_raw_fd()));
            self.by_fd
        }
    }

    fn setup(by_fd: bool) -> (Arc<ProgressEngine>, Arc<SockSource>, UnixDatagram) {
        let (rx, tx) = UnixDatagram::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let engine = Arc::new(ProgressEngine::manual());
        let attr = CntrAttr {
            wait_obj: WaitObj::Unspec,
            ..CntrAttr::default()
        };
        let cntr = KitCntr::with_progress(&attr, engine.clone()).unwrap();
        let src = Arc::new(SockSource { rx, cntr, by_fd });
        engine.register(&src);
        (engine, src, tx)
    }

    /// An idle wait on an fd-capable transport sleeps in poll(2) (see
    /// [`transport_readiness_wakes_the_waiter`]); where a source must be polled, the
    /// engine declines the descriptor sleep at once (`None`, nobody counted as a
    /// sleeper) and the waiter falls back to polling.
    #[test]
    fn idle_wait_sleeps_on_the_descriptors() {
        let (engine, src, _tx) = setup(false);
        assert_eq!(
            engine.sleep_on_fds(Duration::from_secs(30), || true, || {}),
            None,
            "a source that must be polled: no descriptor sleep"
        );
        assert_eq!(engine.shared.fd_sleepers.load(Ordering::SeqCst), 0);
        // The polled waiter still times out normally.
        let e = src.cntr.wait(1, 10).unwrap_err();
        assert_eq!(e.code(), Errno::ETIMEDOUT);
    }

    /// The waiter of an fd-capable transport is seen asleep on the descriptors (counted
    /// as a descriptor sleeper, which only the poll(2) sleep does), and a datagram
    /// arriving then wakes it.
    #[test]
    fn transport_readiness_wakes_the_waiter() {
        let (engine, src, tx) = setup(true);
        let seen = engine.clone();
        let writer = std::thread::spawn(move || {
            until_asleep_on_fds(&seen);
            tx.send(b"x").unwrap();
            tx
        });
        src.cntr.wait(1, 10_000).unwrap();
        assert_eq!(src.cntr.read(), 1);
        drop(writer.join().unwrap());
    }

    /// A kick (an operation posted by another thread) wakes a waiter asleep on fds.
    #[test]
    fn kick_wakes_an_fd_sleeper() {
        let (engine, _src, _tx) = setup(true);
        let e2 = engine.clone();
        let t =
            std::thread::spawn(move || e2.sleep_on_fds(Duration::from_secs(10), || true, || {}));
        // Bounded: the sleeper registers within a few ms; kick until it has woken.
        let mut woke = None;
        for _ in 0..2000 {
            engine.kick();
            if t.is_finished() {
                woke = Some(t.join().unwrap());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(woke, Some(Some(FdWake::Other)));
    }

    /// A source for the auto thread's fd sleep: its socket's datagrams are its work
    /// (drained when `drain`), plus one unit per `pending` flag set by a "poster".
    struct AutoSource {
        rx: UnixDatagram,
        drain: bool,
        calls: AtomicU64,
        got: AtomicU64,
        pending: AtomicBool,
    }

    impl Progress for AutoSource {
        fn progress(&self) -> usize {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mut n = usize::from(self.pending.swap(false, Ordering::SeqCst));
            if self.drain {
                let mut b = [0u8; 8];
                while self.rx.recv(&mut b).is_ok() {
                    self.got.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            }
            n
        }
        fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
            out.push(FdInterest::read(self.rx.as_raw_fd()));
            true
        }
    }

    /// An auto engine (descriptor sleeps of 30 s, so a wake-up is never a time-out)
    /// with one [`AutoSource`], once its thread has gone idle.
    fn auto_setup(drain: bool) -> (ProgressEngine, Arc<AutoSource>, UnixDatagram) {
        let (rx, tx) = UnixDatagram::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let engine = ProgressEngine::auto_with_slice(Duration::from_secs(30));
        let src = Arc::new(AutoSource {
            rx,
            drain,
            calls: AtomicU64::new(0),
            got: AtomicU64::new(0),
            pending: AtomicBool::new(false),
        });
        engine.register(&src);
        // Idle: the initial spin is over once the calls stop growing for three samples
        // in a row (bounded wait).
        let (mut last, mut still) = (u64::MAX, 0);
        for _ in 0..400 {
            thread::sleep(Duration::from_millis(25));
            let now = src.calls.load(Ordering::SeqCst);
            still = if now == last { still + 1 } else { 0 };
            if still == 3 {
                break;
            }
            last = now;
        }
        (engine, src, tx)
    }

    /// Wait (at most 10 s) for `cond`; how long it took.
    fn time_until(mut cond: impl FnMut() -> bool) -> Duration {
        let t0 = Instant::now();
        while !cond() && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(1));
        }
        t0.elapsed()
    }

    /// Wait (bounded) until the auto thread of `engine` is asleep in `poll(2)` on its
    /// sources' descriptors (it counts itself in `fd_sleepers` for that sleep only).
    fn until_asleep_on_fds(engine: &ProgressEngine) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while engine.shared.fd_sleepers.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "the auto thread never slept on its descriptors"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// An idle auto thread whose sources name their descriptors sleeps on them (in
    /// `poll(2)`, 30 s slices here) instead of parking and waking every millisecond:
    /// it is seen counted as a descriptor sleeper, which only that sleep does. (A
    /// parked thread never counts itself there.)
    #[test]
    fn idle_auto_thread_sleeps_on_the_descriptors() {
        let (engine, _src, _tx) = auto_setup(true);
        until_asleep_on_fds(&engine);
        drop(engine);
    }

    /// Posted work kicks the auto thread out of its descriptor sleep at once, a
    /// datagram wakes it, and dropping the engine stops it without waiting the slice.
    #[test]
    fn kick_readiness_and_stop_wake_the_auto_thread() {
        let (engine, src, tx) = auto_setup(true);
        for _ in 0..5 {
            src.pending.store(true, Ordering::SeqCst);
            engine.kick();
            let d = time_until(|| !src.pending.load(Ordering::SeqCst));
            assert!(d < Duration::from_secs(5), "kicked work waited {d:?}");
            // Wait for the thread to go back to its descriptor sleep.
            until_asleep_on_fds(&engine);
        }
        tx.send(b"x").unwrap();
        let d = time_until(|| src.got.load(Ordering::SeqCst) == 1);
        assert!(d < Duration::from_secs(5), "a datagram waited {d:?}");
        let t0 = Instant::now();
        assert!(engine.stop(), "the auto thread did not stop");
        assert!(
            t0.elapsed() < STOP_TIMEOUT,
            "stopping took {:?}",
            t0.elapsed()
        );
    }

    /// A descriptor that stays ready without giving work (here: data the source does
    /// not read) must not make the auto thread spin: it falls back to parking.
    #[test]
    ///
    /// Counted by events, not time: the descriptor wakes the thread once; from then on
    /// every round of the thread ends in a park (none goes back to the descriptor that
    /// would answer at once, none spins), over 50 parks.
    fn a_ready_descriptor_without_work_does_not_spin_the_auto_thread() {
        let (engine, src, tx) = auto_setup(false);
        let sh = &engine.shared;
        let wakes0 = sh.auto_transport_wakes.load(Ordering::SeqCst);
        tx.send(b"x").unwrap();
        let waited = time_until(|| sh.auto_transport_wakes.load(Ordering::SeqCst) > wakes0);
        assert!(
            waited < Duration::from_secs(10),
            "the ready descriptor never woke the thread"
        );
        let parks0 = sh.auto_parks.load(Ordering::SeqCst);
        let calls0 = src.calls.load(Ordering::SeqCst);
        let waited = time_until(|| sh.auto_parks.load(Ordering::SeqCst) >= parks0 + 50);
        assert!(waited < Duration::from_secs(10), "the thread does not park");
        let calls = src.calls.load(Ordering::SeqCst) - calls0;
        let parks = sh.auto_parks.load(Ordering::SeqCst) - parks0;
        let wakes = sh.auto_transport_wakes.load(Ordering::SeqCst) - wakes0;
        assert_eq!(wakes, 1, "the descriptor kept waking the thread");
        // One drive per round, each round parks (2 of slack for the rounds in progress
        // at either reading).
        assert!(
            calls <= parks + 2,
            "{calls} rounds for {parks} parks: the thread spins"
        );
        drop(engine);
    }

    /// Auto engines and sources that must be polled are not waited on by descriptor.
    #[test]
    fn fd_sleep_needs_a_manual_engine_of_fd_sources() {
        let (engine, _src, _tx) = setup(false);
        let ms = Duration::from_millis(1);
        assert_eq!(engine.sleep_on_fds(ms, || true, || {}), None);
        let auto = ProgressEngine::new(ProgressMode::Auto).unwrap();
        assert_eq!(auto.sleep_on_fds(ms, || true, || {}), None);
        assert_eq!(
            ProgressEngine::manual().sleep_on_fds(ms, || true, || {}),
            None,
            "no sources"
        );
        // Ready after all: no sleep.
        let (engine, _src, _tx) = setup(true);
        let t0 = std::time::Instant::now();
        let r = engine.sleep_on_fds(Duration::from_secs(5), || false, || panic!("left"));
        assert_eq!(r, Some(FdWake::Other));
        assert!(t0.elapsed() < Duration::from_secs(4));
    }
}
