//! Completion queues and event notifiers of the software device.
//!
//! A [`Notifier`] is a queue of events with an eventfd in semaphore mode: the fd is
//! readable exactly while an event is queued (each event adds one, each taken event
//! reads one). Completion channels and the context's asynchronous events are notifiers.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::verbs::{AsyncEvent, EventElement, EventType, WcStatus, WorkCompletion};

/// Locks, ignoring poisoning (the data stays consistent: every critical section here
/// leaves it valid before anything that could panic).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates a non-blocking eventfd (semaphore mode when `semaphore`).
pub(crate) fn eventfd(semaphore: bool) -> std::io::Result<OwnedFd> {
    let mut flags = libc::EFD_CLOEXEC | libc::EFD_NONBLOCK;
    if semaphore {
        flags |= libc::EFD_SEMAPHORE;
    }
    // SAFETY: plain syscall.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd.
pub(crate) fn eventfd_add(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a local.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Reads an eventfd once; true when it was readable.
pub(crate) fn eventfd_take(fd: RawFd) -> bool {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a local.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) == 8 }
}

/// Takes an event with `take`, sleeping on `fd` (readable when one may be there)
/// between tries, for at most `timeout`.
pub(crate) fn wait_on<T>(
    fd: RawFd,
    timeout: std::time::Duration,
    mut take: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = take() {
            return Some(v);
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: polls one pollfd on the stack.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}

/// A queue of events with a readable-while-pending fd.
pub(crate) struct Notifier<T> {
    efd: OwnedFd,
    q: Mutex<VecDeque<T>>,
}

impl<T> Notifier<T> {
    pub(crate) fn new() -> std::io::Result<Self> {
        Ok(Notifier {
            efd: eventfd(true)?,
            q: Mutex::new(VecDeque::new()),
        })
    }

    pub(crate) fn push(&self, v: T) {
        lock(&self.q).push_back(v);
        eventfd_add(self.efd.as_raw_fd());
    }

    /// Takes one event without blocking.
    pub(crate) fn try_pop(&self) -> Option<T> {
        if eventfd_take(self.efd.as_raw_fd()) {
            lock(&self.q).pop_front()
        } else {
            None
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }
}

struct CqInner {
    q: VecDeque<WorkCompletion>,
    cap: usize,
    armed: Option<bool>,
    overrun: bool,
}

/// A completion queue.
pub(crate) struct SoftCq {
    pub user: u64,
    inner: Mutex<CqInner>,
    channel: Option<Arc<Notifier<u64>>>,
    async_ev: Arc<Notifier<AsyncEvent>>,
}

impl SoftCq {
    pub(crate) fn new(
        cap: usize,
        user: u64,
        channel: Option<Arc<Notifier<u64>>>,
        async_ev: Arc<Notifier<AsyncEvent>>,
    ) -> SoftCq {
        SoftCq {
            user,
            inner: Mutex::new(CqInner {
                q: VecDeque::with_capacity(cap),
                cap,
                armed: None,
                overrun: false,
            }),
            channel,
            async_ev,
        }
    }

    /// Adds a completion; `solicited` marks a receive of a solicited message.
    pub(crate) fn push(&self, wc: WorkCompletion, solicited: bool) {
        let mut g = lock(&self.inner);
        if g.q.len() >= g.cap {
            if !g.overrun {
                g.overrun = true;
                self.async_ev.push(AsyncEvent {
                    event_type: EventType::CqErr,
                    element: EventElement::Cq(self.user),
                });
            }
            return;
        }
        g.q.push_back(wc);
        if let Some(sol_only) = g.armed {
            if !sol_only || solicited || wc.status != WcStatus::Success {
                g.armed = None;
                if let Some(ch) = &self.channel {
                    ch.push(self.user);
                }
            }
        }
    }

    pub(crate) fn poll(&self, out: &mut [WorkCompletion]) -> usize {
        let mut g = lock(&self.inner);
        let n = out.len().min(g.q.len());
        for (slot, wc) in out.iter_mut().zip(g.q.drain(..n)) {
            *slot = wc;
        }
        n
    }

    pub(crate) fn arm(&self, solicited_only: bool) {
        lock(&self.inner).armed = Some(solicited_only);
    }
}
