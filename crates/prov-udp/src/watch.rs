//! Wait fds with manual progress: a per-domain watcher thread that sleeps in `poll(2)` on
//! the sockets of the domain's endpoints and drives the progress engine when one of
//! them becomes readable.
//!
//! Why: an application that waits on a CQ's, counter's or EQ's wait fd (epoll) reads
//! nothing until that fd is readable; with `FI_PROGRESS_MANUAL` nobody would take an
//! arriving datagram off the socket, so the fd would never become readable. The kit's
//! wait fds only signal pushes, so this module adds the sockets' fds: the watcher
//! turns socket readiness into progress, and the kit's CQ then signals its wait fd.
//!
//! The watcher starts when the first CQ or counter with a wait fd is opened on a
//! domain with manual progress (never with auto progress: the kit's thread already
//! drives). It costs nothing otherwise.
//!
//! # Invariants
//!
//! - It polls only endpoints that are enabled and have a receive posted (a socket with
//!   data but no receive would stay readable and spin the thread). An endpoint it left
//!   out is marked; posting a receive there wakes the watcher (one `send(2)` on a
//!   socket pair, only while a watcher runs and only for a marked endpoint).
//! - After a round that found a socket readable but did no work (its CQ full), it
//!   sleeps 1 ms before polling again: bounded, never a spin.
//! - Dropping the [`Hub`]'s last domain handle stops and joins the thread (it wakes
//!   within one poll slice of 100 ms at most, at once through the wake socket).
//!
//! Nothing here panics; a failing `poll` is logged and retried after a sleep.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use ofi_kit::progress::ProgressEngine;

use crate::ep::EpInner;
use crate::NAME;

/// How long one `poll` sleeps at most.
const SLICE_MS: i32 = 100;

/// What a domain's endpoints and its watcher share.
pub(crate) struct Hub {
    eps: Mutex<Vec<Weak<EpInner>>>,
    running: AtomicBool,
    stop: AtomicBool,
    wake_rx: Option<UnixDatagram>,
    wake_tx: Option<UnixDatagram>,
    thread: OnceLock<Mutex<Option<JoinHandle<()>>>>,
}

ofi_kit::debug_fields!(Hub, |hub| { running: hub.is_running() });

impl Hub {
    /// A hub without a watcher.
    pub(crate) fn new() -> Hub {
        let (rx, tx) = match UnixDatagram::pair() {
            Ok((rx, tx)) => {
                let _ = rx.set_nonblocking(true);
                let _ = tx.set_nonblocking(true);
                (Some(rx), Some(tx))
            }
            Err(e) => {
                ofi_core::ofi_warn!(NAME, "domain", "no wake socket for the watcher: {e}");
                (None, None)
            }
        };
        Hub {
            eps: Mutex::new(Vec::new()),
            running: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            wake_rx: rx,
            wake_tx: tx,
            thread: OnceLock::new(),
        }
    }

    /// Record an endpoint of the domain.
    pub(crate) fn add(&self, ep: &Arc<EpInner>) {
        let mut g = self.eps.lock().unwrap_or_else(PoisonError::into_inner);
        g.retain(|w| w.strong_count() > 0);
        g.push(Arc::downgrade(ep));
    }

    /// Whether a watcher runs.
    #[inline]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Wake the watcher (it rebuilds its poll set).
    pub(crate) fn wake(&self) {
        if let Some(tx) = &self.wake_tx {
            let _ = tx.send(&[1]);
        }
    }

    /// Start the watcher for `engine` if it does not run yet.
    pub(crate) fn start(self: &Arc<Hub>, engine: &Arc<ProgressEngine>) {
        if self.wake_rx.is_none() || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = Arc::downgrade(self);
        let engine = Arc::downgrade(engine);
        let spawned = std::thread::Builder::new()
            .name("ofi-udp-watch".into())
            .spawn(move || run(hub, engine));
        match spawned {
            Ok(h) => {
                let _ = self.thread.set(Mutex::new(Some(h)));
            }
            Err(e) => {
                self.running.store(false, Ordering::Release);
                ofi_core::ofi_warn!(NAME, "domain", "cannot start the watcher thread: {e}");
            }
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
        if let Some(m) = self.thread.get() {
            let h = m.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(h) = h {
                // The thread holds only weak references: it cannot be the one dropping
                // the hub, so joining it cannot deadlock.
                if h.thread().id() != std::thread::current().id() {
                    let _ = h.join();
                }
            }
        }
    }
}

/// The watcher's loop (holds the hub and engine weakly, so dropping the domain ends
/// it).
fn run(hub: Weak<Hub>, engine: Weak<ProgressEngine>) {
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut eps: Vec<Arc<EpInner>> = Vec::new();
    loop {
        fds.clear();
        eps.clear();
        {
            let Some(h) = hub.upgrade() else { return };
            if h.stop.load(Ordering::Acquire) {
                return;
            }
            let Some(rx) = &h.wake_rx else { return };
            fds.push(libc::pollfd {
                fd: rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            let list = h.eps.lock().unwrap_or_else(PoisonError::into_inner);
            for w in list.iter() {
                let Some(ep) = w.upgrade() else { continue };
                if ep.watch_fds(&mut fds) {
                    eps.push(ep);
                }
            }
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfds; the descriptors belong
        // to the wake socket and to endpoints kept alive in `eps` across the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, SLICE_MS) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                ofi_core::ofi_debug!(NAME, "domain", "watcher poll: {e}");
                std::thread::sleep(Duration::from_millis(1));
            }
            continue;
        }
        if fds[0].revents != 0 {
            if let Some(h) = hub.upgrade() {
                if let Some(rx) = &h.wake_rx {
                    let mut b = [0u8; 64];
                    for _ in 0..64 {
                        if rx.recv(&mut b).is_err() {
                            break;
                        }
                    }
                }
            }
        }
        if fds[1..].iter().any(|p| p.revents != 0) {
            let Some(e) = engine.upgrade() else { return };
            if e.drive() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}
