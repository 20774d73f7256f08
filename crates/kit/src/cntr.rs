//! A counter ready to use: [`KitCntr`] implements core's `CntrOps` with two atomics
//! (successes and errors), `fi_cntr_wait` driving progress, and a wait fd.
//!
//! # For the provider
//!
//! Open one in `DomainOps::cntr_open` with [`KitCntr::new`] (or
//! [`KitCntr::with_progress`]); endpoints keep a clone from `bind` and count completed
//! operations with [`KitCntr::inc`] and failed ones with [`KitCntr::inc_err`].
//!
//! # Semantics (fi_cntr(3))
//!
//! - `read`/`readerr` drive progress, then load the value. `add`/`set`/`adderr`/
//!   `seterr` update it (additions wrap at 2⁶⁴, like the C library's atomics) and wake
//!   waiters.
//! - `wait(threshold, timeout)`: `Ok` once the value is ≥ `threshold`; `FI_EAVAIL` as
//!   soon as the error value changes during the wait; `FI_ETIMEDOUT` after `timeout`
//!   ms (negative: never). It alternates progress with sleeping ([progress
//!   contract](crate::progress)). `FI_ENOSYS` for a counter opened with `FI_WAIT_NONE`.
//! - The wait fd (`FI_WAIT_FD`, `FI_WAIT_UNSPEC`) becomes readable when either value
//!   changes and stops being readable at the next `read`/`readerr`.
//! - Open: non-zero `flags` or `events` are `FI_EINVAL`; `FI_WAIT_POLLFD` is
//!   `FI_ENOSYS`; `FI_WAIT_SET` blocks internally and is attached to its set by
//!   [`KitCntr::with_progress_in`] (see [`crate::wait`]).
//!
//! # Costs
//!
//! An update is one atomic operation, plus — only when somebody waits or a wait fd or
//! wait set is attached — a wake-up. Nothing allocates after open.
//!
//! # What may panic
//!
//! Nothing: bad input is an `Error`, poisoned locks are recovered.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

use ofi_core::cntr::CntrAttr;
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::OpFlags;
use ofi_core::provider::CntrOps;

use crate::progress::ProgressEngine;
use crate::queue_common::check_open_flags;
use crate::wait::{lock, wait_for, BlockingWait, Links, WaitFd, WaitMode, Waitable};

struct CntrShared {
    value: AtomicU64,
    err: AtomicU64,
    mode: WaitMode,
    fd: Option<WaitFd>,
    /// Changed since the last read (what the wait fd and trywait report).
    changed: AtomicBool,
    /// Threads blocked in `wait`.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    links: Links,
}

impl CntrShared {
    #[inline]
    fn drive(&self) -> usize {
        self.links.drive()
    }

    /// After an update: fd, waiters, wait sets.
    #[inline]
    fn notify(&self) {
        if !self.changed.swap(true, Ordering::SeqCst) {
            if let Some(fd) = &self.fd {
                fd.set();
            }
        }
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.lock);
            self.cv.notify_all();
            self.links.kick();
        }
        self.links.signal_sets();
    }

    /// A read: the change has been seen.
    #[inline]
    fn seen(&self) {
        self.changed.store(false, Ordering::SeqCst);
        if let Some(fd) = &self.fd {
            fd.clear();
        }
    }
}

impl Waitable for CntrShared {
    fn drive_progress(&self) -> usize {
        self.drive()
    }

    fn is_ready(&self) -> bool {
        self.changed.load(Ordering::SeqCst)
    }

    fn needs_polling(&self) -> bool {
        self.links.needs_polling()
    }
}

/// A counter (see the module docs). Clones share the values.
#[derive(Clone)]
pub struct KitCntr {
    inner: Arc<CntrShared>,
}

impl std::fmt::Debug for KitCntr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KitCntr")
            .field("value", &self.value())
            .field("err", &self.err_value())
            .field("mode", &self.inner.mode)
            .finish()
    }
}

impl KitCntr {
    /// Open a counter (see the module docs for the errors).
    pub fn new(attr: &CntrAttr) -> Result<KitCntr> {
        check_open_flags("counter", attr.flags, OpFlags::empty())?;
        if attr.events != 0 {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "counter events {}: only FI_CNTR_EVENTS_COMP is supported",
                    attr.events
                ),
            ));
        }
        let mode = WaitMode::resolve(attr.wait_obj)?;
        Ok(KitCntr {
            inner: Arc::new(CntrShared {
                value: AtomicU64::new(0),
                err: AtomicU64::new(0),
                mode,
                fd: mode.make_fd()?,
                changed: AtomicBool::new(false),
                waiters: AtomicUsize::new(0),
                lock: Mutex::new(()),
                cv: Condvar::new(),
                links: Links::default(),
            }),
        })
    }

    /// Count one completed operation.
    #[inline]
    pub fn inc(&self) {
        self.inner.value.fetch_add(1, Ordering::SeqCst);
        self.inner.notify();
    }

    /// Count one failed operation.
    #[inline]
    pub fn inc_err(&self) {
        self.inner.err.fetch_add(1, Ordering::SeqCst);
        self.inner.notify();
    }

    /// The value, without driving progress.
    pub fn value(&self) -> u64 {
        self.inner.value.load(Ordering::SeqCst)
    }

    /// The error value, without driving progress.
    pub fn err_value(&self) -> u64 {
        self.inner.err.load(Ordering::SeqCst)
    }
}

crate::wait::queue_handle_waiting!(KitCntr, "counter");
crate::wait::queue_open_with_progress!(KitCntr, CntrAttr, "counter", "cntr_open_in_set");

/// The live published counters: the address each was published at
/// (`CntrOps::published`) and the counter. What a triggered operation's counter
/// pointer is looked up in ([`crate::trigger`]), so that pointer is never
/// dereferenced.
static PUBLISHED: Mutex<Vec<(usize, Weak<CntrShared>)>> = Mutex::new(Vec::new());

impl KitCntr {
    /// The live counter published at `addr` (see [`crate::trigger`]), if any.
    pub fn published_at(addr: usize) -> Option<KitCntr> {
        if addr == 0 {
            return None;
        }
        let list = lock(&PUBLISHED);
        list.iter()
            .rev()
            .find(|(a, _)| *a == addr)
            .and_then(|(_, w)| w.upgrade())
            .map(|inner| KitCntr { inner })
    }

    /// Whether this counter drives `engine` (belongs to the domain that owns it).
    pub fn in_domain(&self, engine: &Arc<ProgressEngine>) -> bool {
        self.inner
            .links
            .engine()
            .is_some_and(|e| Arc::ptr_eq(e, engine))
    }
}

/// Writes, inside `impl CntrOps for KitCntr`, one method per `name: field.update` entry:
/// it applies `update` (`fetch_add` or `store`) with the caller's value to the shared
/// atomic `field`, then notifies fd, waiters and wait sets.
macro_rules! counter_writes {
    ($($name:ident: $field:ident.$update:ident;)*) => {
        $(
            fn $name(&self, value: u64) -> Result<()> {
                self.inner.$field.$update(value, Ordering::SeqCst);
                self.inner.notify();
                Ok(())
            }
        )*
    };
}

impl CntrOps for KitCntr {
    /// Record where the host's object pointer points, for triggered operations
    /// ([`KitCntr::published_at`]); entries of counters gone since are dropped.
    fn published(&self) {
        let addr = self as *const KitCntr as usize;
        let mut list = lock(&PUBLISHED);
        list.retain(|(a, w)| *a != addr && w.strong_count() > 0);
        list.push((addr, Arc::downgrade(&self.inner)));
    }

    fn read(&self) -> u64 {
        self.inner.drive();
        self.inner.seen();
        self.value()
    }

    fn readerr(&self) -> u64 {
        self.inner.drive();
        self.inner.seen();
        self.err_value()
    }

    // The four writes of the C API (`fi_cntr_add`/`set`/`adderr`/`seterr`): each
    // changes one of the two values, then notifies.
    counter_writes! {
        add: value.fetch_add;
        set: value.store;
        adderr: err.fetch_add;
        seterr: err.store;
    }

    fn wait(&self, threshold: u64, timeout: i32) -> Result<()> {
        let inner = &*self.inner;
        if !inner.mode.can_block() {
            return Err(Error::new(
                Errno::ENOSYS,
                "wait on a counter opened with FI_WAIT_NONE",
            ));
        }
        let err0 = inner.err.load(Ordering::SeqCst);
        let mut w = BlockingWait::new(timeout);
        let done = |inner: &CntrShared| -> Option<Result<()>> {
            if inner.value.load(Ordering::SeqCst) >= threshold {
                Some(Ok(()))
            } else if inner.err.load(Ordering::SeqCst) != err0 {
                Some(Err(Error::new(
                    Errno::EAVAIL,
                    "an operation counted by this counter failed",
                )))
            } else {
                None
            }
        };
        loop {
            let work = inner.drive();
            w.after_round(work);
            if let Some(r) = done(inner) {
                return r;
            }
            if w.expired() {
                return Err(Error::code_only(Errno::ETIMEDOUT));
            }
            match w.slice(&inner.links, work) {
                None => std::thread::yield_now(),
                Some(_)
                    if w.sleep_on_fds(
                        &inner.links,
                        || {
                            inner.waiters.fetch_add(1, Ordering::SeqCst);
                            if done(inner).is_some() {
                                inner.waiters.fetch_sub(1, Ordering::SeqCst);
                                false
                            } else {
                                true
                            }
                        },
                        || {
                            inner.waiters.fetch_sub(1, Ordering::SeqCst);
                        },
                    ) => {}
                Some(d) => {
                    inner.waiters.fetch_add(1, Ordering::SeqCst);
                    let g = lock(&inner.lock);
                    if done(inner).is_none() {
                        drop(wait_for(&inner.cv, g, d));
                    } else {
                        drop(g);
                    }
                    inner.waiters.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn wait_fd(&self) -> Result<i32> {
        crate::wait::wait_fd_of(self.inner.fd.as_ref(), "counter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Progress;
    use crate::test_support::{assert_open_refused, assert_signals_wait_set, in_a_moment};
    use ofi_core::enums::WaitObj;
    use std::thread;
    use std::time::{Duration, Instant};

    fn cntr(wait_obj: WaitObj) -> KitCntr {
        KitCntr::new(&CntrAttr {
            wait_obj,
            ..CntrAttr::default()
        })
        .unwrap()
    }

    fn code<T: std::fmt::Debug>(r: Result<T>) -> Errno {
        r.unwrap_err().code()
    }

    #[test]
    fn open_errors() {
        assert_open_refused(
            KitCntr::new,
            &[
                (|a| a.flags = 1, Errno::EINVAL),
                (|a| a.events = 1, Errno::EINVAL),
                (|a| a.wait_obj = WaitObj::PollFd, Errno::ENOSYS),
            ],
        );
        let in_set = KitCntr::new(&CntrAttr {
            wait_obj: WaitObj::Set,
            ..CntrAttr::default()
        })
        .unwrap();
        assert_eq!(in_set.wait_mode(), WaitMode::Internal);
        let c = cntr(WaitObj::None);
        assert_eq!(c.wait_mode(), WaitMode::None);
        assert!(format!("{c:?}").contains("KitCntr"));
    }

    #[test]
    fn read_add_set_and_errors() {
        let c = cntr(WaitObj::None);
        assert_eq!(c.read(), 0);
        c.add(5).unwrap();
        c.inc();
        assert_eq!(c.read(), 6);
        c.set(2).unwrap();
        assert_eq!(c.read(), 2);
        c.adderr(3).unwrap();
        c.inc_err();
        assert_eq!(c.readerr(), 4);
        c.seterr(1).unwrap();
        assert_eq!((c.readerr(), c.err_value(), c.value()), (1, 1, 2));
        // Additions wrap like the C library's atomics.
        c.set(u64::MAX).unwrap();
        c.add(2).unwrap();
        assert_eq!(c.read(), 1);
        c.close().unwrap();
    }

    #[test]
    fn wait_errors_and_immediate_success() {
        let c = cntr(WaitObj::None);
        assert_eq!(code(c.wait(0, 0)), Errno::ENOSYS);
        assert_eq!(code(c.wait_fd()), Errno::ENOSYS);
        let c = cntr(WaitObj::MutexCond);
        assert_eq!(code(c.wait_fd()), Errno::ENOSYS);
        c.wait(0, 0).unwrap();
        assert_eq!(code(c.wait(1, 0)), Errno::ETIMEDOUT);
        c.add(3).unwrap();
        c.wait(3, 0).unwrap();
    }

    #[test]
    fn wait_times_out_bounded() {
        let c = cntr(WaitObj::Unspec);
        let t = Instant::now();
        assert_eq!(code(c.wait(1, 50)), Errno::ETIMEDOUT);
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn wait_is_woken_by_adds_from_another_thread() {
        let c = cntr(WaitObj::Fd);
        let c2 = c.clone();
        let h = thread::spawn(move || {
            for _ in 0..3 {
                thread::sleep(Duration::from_millis(5));
                c2.inc();
            }
        });
        let t = Instant::now();
        c.wait(3, 5_000).unwrap();
        assert!(t.elapsed() < Duration::from_secs(4));
        assert!(c.value() >= 3);
        h.join().unwrap();
    }

    #[test]
    fn an_error_ends_the_wait_with_eavail() {
        let c = cntr(WaitObj::Fd);
        c.adderr(1).unwrap(); // before the wait: not counted
        let c2 = c.clone();
        let h = in_a_moment(move || {
            c2.inc_err();
        });
        assert_eq!(code(c.wait(10, 5_000)), Errno::EAVAIL);
        h.join().unwrap();
    }

    #[test]
    fn reads_and_waits_drive_progress() {
        struct Src {
            calls: AtomicUsize,
            cntr: Mutex<Option<KitCntr>>,
        }
        impl Progress for Src {
            fn progress(&self) -> usize {
                let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
                // Every fifth round completes an operation.
                if n.checked_rem(5) == Some(0) {
                    if let Some(c) = lock(&self.cntr).as_ref() {
                        c.inc();
                    }
                    return 1;
                }
                0
            }
        }
        let src = Arc::new(Src {
            calls: AtomicUsize::new(0),
            cntr: Mutex::new(None),
        });
        let e = Arc::new(ProgressEngine::manual());
        e.register(&src);
        let c = KitCntr::with_progress(
            &CntrAttr {
                wait_obj: WaitObj::Unspec,
                ..CntrAttr::default()
            },
            e.clone(),
        )
        .unwrap();
        *lock(&src.cntr) = Some(c.clone());
        assert_eq!(c.read(), 0);
        assert_eq!(c.readerr(), 0);
        assert_eq!(src.calls.load(Ordering::SeqCst), 2);
        // Only progress completes operations: the wait must drive it.
        c.wait(3, 5_000).unwrap();
        assert!(src.calls.load(Ordering::SeqCst) >= 15);
        c.bind_progress(e).unwrap();
        assert_eq!(
            code(c.bind_progress(Arc::new(ProgressEngine::manual()))),
            Errno::EINVAL
        );
        assert!(c.needs_polling());
        crate::wait::trywait(&[&c]).unwrap_err();
    }

    #[test]
    fn wait_fd_is_readable_after_a_change_until_read() {
        let c = cntr(WaitObj::Fd);
        let fd = c.inner.fd.as_ref().unwrap();
        assert_eq!(c.wait_fd().unwrap(), fd.fd());
        assert!(!fd.readable());
        crate::wait::trywait(&[&c]).unwrap();
        c.inc();
        assert!(fd.readable());
        assert_eq!(code(crate::wait::trywait(&[&c])), Errno::EAGAIN);
        c.read();
        assert!(!fd.readable());
        crate::wait::trywait(&[&c]).unwrap();
        c.adderr(1).unwrap();
        assert!(fd.readable());
        c.readerr();
        assert!(!fd.readable());
    }

    #[test]
    fn wait_set_is_signalled_by_updates() {
        use ofi_core::provider::WaitOps;
        let c = cntr(WaitObj::None);
        let c2 = c.clone();
        let set = assert_signals_wait_set(|set| c.attach_wait(set), move || c2.inc());
        assert_eq!(c.read(), 1);
        // The wake-up consumed the signal.
        assert_eq!(code(set.wait(0)), Errno::ETIMEDOUT);
    }
}
