//! Async completions on tokio (feature `tokio`): [`AsyncEp`] turns an [`Ep`]'s
//! completion queue into a stream of [`Completion`]s through `tokio::io::unix::AsyncFd`
//! on the CQ's wait fd — [`AsyncEp::next`] as a future, and `futures_core::Stream`
//! for stream combinators.
//!
//! # Progress
//!
//! With manual progress nothing moves unless someone calls into the provider, and a
//! CQ's wait fd only becomes readable when a completion is *written* — which happens
//! during progress. So waiting works like this, each time the stream is polled:
//!
//! 1. read the CQ (drives progress); a completion is returned at once;
//! 2. `fi_trywait`: if the CQ became ready meanwhile, go back to 1;
//! 3. otherwise register for the fd's readability **and** a progress tick
//!    ([`AsyncEp::set_progress_interval`], 1 ms by default), and return `Pending`.
//!    Either wakes the task, which goes back to 1.
//!
//! The tick is what keeps polled transports (shared-memory rings, sockets owned by a
//! layered provider) moving while the task sleeps; a provider whose progress is driven
//! by its own thread simply makes the fd readable. An idle `AsyncEp` costs one CQ read
//! per tick.
//!
//! # Invariants
//!
//! The `AsyncFd` is deregistered before the endpoint (and its CQ, which owns the fd) is
//! closed: it is declared first and [`AsyncEp::into_inner`] drops it first.
//!
//! Nothing here panics; tokio itself panics if the runtime was built without I/O
//! (`enable_io`/`enable_all`) when `AsyncEp::new` registers the fd.

#![allow(unsafe_code)]

use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::{Instant, Sleep};

use super::cq::{Completion, OpError};
use super::ep::Ep;
use super::kind::EpKind;
use crate::{Errno, Error, Result};

/// The CQ's descriptor, borrowed (the CQ owns and closes it).
#[derive(Debug)]
struct CqFd(RawFd);

impl AsRawFd for CqFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Rounds of (read, trywait, register) per poll before yielding to the scheduler.
const MAX_ROUNDS: usize = 32;

/// An endpoint whose completions are awaited on tokio.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use ofi::safe::{aio::AsyncEp, Fabric, Hints, Rdm};
/// let info = Hints::<Rdm>::new().first()?;
/// let fabric = Fabric::open(&info)?;
/// let domain = fabric.domain(&info)?;
/// let ep = domain.endpoint(&info).wait_fd(true).build()?;
/// let mut ep = AsyncEp::new(ep)?;
/// ep.get_mut().recv(domain.alloc(4096)?).map_err(|e| e.error)?;
/// let c = ep.next().await?;
/// println!("received {} bytes", c.len);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AsyncEp<K: EpKind> {
    // Declared first: deregistered from the reactor before the CQ closes the fd.
    fd: AsyncFd<CqFd>,
    tick: Pin<Box<Sleep>>,
    interval: Duration,
    ep: Ep<K>,
}

impl<K: EpKind> AsyncEp<K> {
    /// Wrap `ep` (built with [`EpBuilder::wait_fd(true)`](super::EpBuilder::wait_fd)).
    /// Must be called inside a tokio runtime with I/O and time enabled
    /// (`FI_EOTHER` otherwise); `FI_ENOSYS` / `FI_EINVAL` if the CQ has no wait fd.
    pub fn new(ep: Ep<K>) -> Result<AsyncEp<K>> {
        let raw = ep.cq_wait_fd()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::new(
                Errno::EOTHER,
                "AsyncEp::new must run inside a tokio runtime",
            ));
        }
        // SAFETY: the fd belongs to the CQ of `ep`, which this struct owns and drops
        // after the AsyncFd (field order; `into_inner` drops the AsyncFd first), so it
        // stays open and names the same file for the AsyncFd's whole life.
        let fd =
            unsafe { AsyncFd::register_with_interest(CqFd(raw), tokio::io::Interest::READABLE) }
                .map_err(|e| {
                    Error::new(
                        Errno::EOTHER,
                        format!("register the CQ wait fd with tokio: {e}"),
                    )
                })?;
        let interval = Duration::from_millis(1);
        Ok(AsyncEp {
            fd,
            tick: Box::pin(tokio::time::sleep(interval)),
            interval,
            ep,
        })
    }

    /// How often a waiting task drives progress when the fd stays quiet (default
    /// 1 ms). Shorter: lower latency on polled transports, more CPU when idle.
    pub fn set_progress_interval(&mut self, interval: Duration) {
        self.interval = interval.max(Duration::from_micros(10));
    }

    /// The endpoint, to post operations.
    pub fn get_mut(&mut self) -> &mut Ep<K> {
        &mut self.ep
    }

    /// The endpoint.
    pub fn get_ref(&self) -> &Ep<K> {
        &self.ep
    }

    /// Stop waiting asynchronously; the endpoint back.
    pub fn into_inner(self) -> Ep<K> {
        let AsyncEp { fd, tick, ep, .. } = self;
        drop(fd);
        drop(tick);
        ep
    }

    /// Poll for the next completion (the `Stream::poll_next` shape; never ends).
    pub fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<std::result::Result<Completion, OpError>> {
        for _ in 0..MAX_ROUNDS {
            match self.ep.poll() {
                Ok(Some(c)) => return Poll::Ready(Ok(c)),
                Err(e) => return Poll::Ready(Err(e)),
                Ok(None) => {}
            }
            match self.ep.trywait() {
                Ok(()) => {}
                Err(e) if e.code() == Errno::EAGAIN => continue,
                Err(e) => return Poll::Ready(Err(e.into())),
            }
            match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut guard)) => {
                    // Readable: a completion was written. Clear tokio's readiness (the
                    // kit clears the fd itself when the CQ is read) and read it.
                    guard.clear_ready();
                    continue;
                }
                Poll::Ready(Err(e)) => {
                    return Poll::Ready(Err(Error::new(
                        Errno::EIO,
                        format!("waiting on the CQ fd: {e}"),
                    )
                    .into()))
                }
                Poll::Pending => {}
            }
            match self.tick.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let next = Instant::now() + self.interval;
                    self.tick.as_mut().reset(next);
                    continue;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        // Busy: let other tasks run, then come back.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The next completion.
    pub async fn next(&mut self) -> std::result::Result<Completion, OpError> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }
}

// Nothing in an `AsyncEp` relies on staying put (the timer is boxed and pinned on its
// own), whatever the kind marker `K` is.
impl<K: EpKind> Unpin for AsyncEp<K> {}

/// The completions as a `Stream` (`futures_core::Stream`, so `StreamExt` combinators
/// from `futures` or `tokio-stream` apply): an endless stream — each item a completion
/// or the failed operation with its buffer; it yields `None` never.
impl<K: EpKind> futures_core::Stream for AsyncEp<K> {
    type Item = std::result::Result<Completion, OpError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        AsyncEp::poll_next(self.get_mut(), cx).map(Some)
    }
}
