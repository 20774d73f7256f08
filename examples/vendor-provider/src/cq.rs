//! The completion queue: a bounded FIFO of completions, and the provider's progress
//! engine (manual progress: reading the CQ receives what has arrived).
//!
//! # Ordering and errors
//!
//! Completions and error completions share one FIFO, in the order the operations
//! completed. `read` returns successful completions up to the first error entry; when
//! an error entry is at the front it returns `FI_EAVAIL`, and `readerr` takes it. So an
//! application sees every completion in order, and `readerr` returns `FI_EAGAIN` while
//! successful completions are still in front of the next error.
//!
//! # Overrun protection (`FI_RM_ENABLED`)
//!
//! Every operation that will complete here reserves its slot when it is posted: a send
//! when it is posted (it completes at once), a receive when it is posted (it completes
//! later). When `queued + reserved` would exceed the CQ's size the operation is refused
//! with `FI_EAGAIN`, and the application frees room by reading completions. So the
//! queue can never overflow and no completion is ever lost.
//!
//! # Progress
//!
//! Endpoints whose receive side reports to this CQ register with it at `fi_enable`
//! (`CqShared::attach`). `read`, `readfrom` and `sread` first let each of them take
//! the datagrams that are waiting for its posted receives.
//!
//! Lock order: a CQ's endpoint list, then an endpoint's receive queue, then a CQ's
//! state; never the reverse.
//! Nothing here panics (poisoned locks are recovered: the state they protect is updated
//! in single steps).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::cq::{CqAttr, CqBuf, CqError};
use ofi_core::provider::CqOps;
use ofi_core::{CqWaitCond, Errno, Error, Result, WaitObj, ADDR_NOTAVAIL};

use crate::ep::EpShared;
use crate::sock::{poll_readable, EventFd};

/// One completion, successful or not.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// The operation's context.
    pub context: usize,
    /// `FI_SEND | FI_MSG` or `FI_RECV | FI_MSG`.
    pub flags: u64,
    /// Bytes transferred.
    pub len: usize,
    /// Start of the receive buffer (receives), else null.
    pub buf: *mut libc::c_void,
    /// The sender's fabric address (receives with `FI_SOURCE`), else `FI_ADDR_NOTAVAIL`.
    pub src: u64,
    /// `Some((code, olen))` for an error completion: the error and the bytes that did not
    /// fit (`FI_ETRUNC`).
    pub err: Option<(Errno, usize)>,
}

// SAFETY: `buf` is only an address reported back to the application (never
// dereferenced here), so a completion may move between threads.
unsafe impl Send for Completion {}

struct State {
    queue: VecDeque<Completion>,
    reserved: usize,
}

/// The CQ's state, shared with the endpoints bound to it.
pub struct CqShared {
    size: usize,
    wait_obj: WaitObj,
    wait_cond: CqWaitCond,
    state: Mutex<State>,
    /// Endpoints whose receives complete here (weak: an endpoint closes before its CQ).
    eps: Mutex<Vec<Weak<EpShared>>>,
    /// Wakes a thread blocked in `sread`: by `signal`, or when a completion is queued by
    /// another thread.
    wake: EventFd,
    sleepers: AtomicUsize,
    signaled: AtomicBool,
}

impl CqShared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserve room for one completion; false if the CQ could overflow.
    #[inline]
    pub(crate) fn reserve(&self) -> bool {
        let mut s = self.state();
        if s.queue.len() + s.reserved < self.size {
            s.reserved += 1;
            true
        } else {
            false
        }
    }

    /// Give back a reservation that will not be used.
    #[inline]
    pub(crate) fn unreserve(&self) {
        let mut s = self.state();
        s.reserved = s.reserved.saturating_sub(1);
    }

    /// Queue a completion in the room reserved for it.
    #[inline]
    pub(crate) fn complete(&self, c: Completion) {
        {
            let mut s = self.state();
            s.reserved = s.reserved.saturating_sub(1);
            s.queue.push_back(c);
        }
        if self.sleepers.load(Ordering::Acquire) > 0 {
            self.wake.notify();
        }
    }

    /// Wake a blocked reader so it polls again (an endpoint posted a receive: its
    /// socket joins the set a blocking read waits on).
    #[inline]
    pub(crate) fn nudge(&self) {
        if self.sleepers.load(Ordering::Acquire) > 0 {
            self.wake.notify();
        }
    }

    /// Register an endpoint whose receives complete here.
    pub(crate) fn attach(&self, ep: &Arc<EpShared>) {
        let mut eps = self.eps.lock().unwrap_or_else(PoisonError::into_inner);
        eps.retain(|w| w.strong_count() > 0);
        eps.push(Arc::downgrade(ep));
    }

    /// Manual progress: every attached endpoint takes what has arrived for its posted
    /// receives. With `waiting`, collects the sockets of the endpoints that still wait
    /// for data (what a blocking read polls). Allocates nothing without `waiting`.
    fn progress(&self, mut waiting: Option<&mut Vec<i32>>) {
        let eps = self.eps.lock().unwrap_or_else(PoisonError::into_inner);
        for ep in eps.iter().filter_map(Weak::upgrade) {
            if ep.progress_rx() {
                if let Some(w) = waiting.as_deref_mut() {
                    w.push(ep.raw_fd());
                }
            }
        }
    }

    /// Copy the successful completions at the front into `buf` (and `src`).
    fn drain(&self, buf: &mut CqBuf<'_>, mut src: Option<&mut [u64]>) -> Result<usize> {
        let mut s = self.state();
        let room = buf.len().min(src.as_ref().map_or(usize::MAX, |a| a.len()));
        let mut n = 0;
        while n < room {
            match s.queue.front() {
                Some(c) if c.err.is_none() => {
                    let c = *c;
                    s.queue.pop_front();
                    let entry = CqTaggedEntry {
                        op_context: c.context,
                        flags: c.flags,
                        len: c.len,
                        buf: c.buf,
                        data: 0,
                        tag: 0,
                    };
                    buf.set(n, &entry);
                    if let Some(a) = src.as_deref_mut() {
                        a[n] = c.src;
                    }
                    n += 1;
                }
                _ => break,
            }
        }
        if n > 0 {
            return Ok(n);
        }
        match s.queue.front() {
            Some(c) if c.err.is_some() => Err(Error::code_only(Errno::EAVAIL)),
            _ => Err(Error::code_only(Errno::EAGAIN)),
        }
    }

    /// Entries a blocking read waits for: the threshold (capped by the room), or one.
    fn wanted(&self, room: usize, threshold: Option<usize>) -> usize {
        match (self.wait_cond, threshold) {
            (CqWaitCond::Threshold, Some(t)) => t.clamp(1, room.max(1)),
            _ => 1,
        }
    }

    /// True when a blocking read may return: enough successful entries, or an error next.
    fn ready(&self, wanted: usize) -> bool {
        let s = self.state();
        match s.queue.front() {
            None => false,
            Some(c) if c.err.is_some() => true,
            _ => {
                s.queue
                    .iter()
                    .take_while(|c| c.err.is_none())
                    .take(wanted)
                    .count()
                    >= wanted
            }
        }
    }
}

/// A completion queue (`fid_cq`).
pub struct Cq {
    shared: Arc<CqShared>,
}

impl Cq {
    /// Open a CQ. Size 0 takes `default_size`.
    ///
    /// # Errors
    /// `FI_ENOSYS` for wait objects other than `FI_WAIT_NONE` / `FI_WAIT_UNSPEC` (this
    /// CQ blocks internally and has no descriptor to hand out), `FI_EBADFLAGS` for flags.
    pub fn open(attr: &CqAttr, default_size: usize) -> Result<Cq> {
        if !matches!(attr.wait_obj, WaitObj::None | WaitObj::Unspec) {
            return Err(Error::new(
                Errno::ENOSYS,
                format!("unixdgram: CQ wait object {} is not supported (use FI_WAIT_NONE or FI_WAIT_UNSPEC)", attr.wait_obj),
            ));
        }
        if attr.flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "unixdgram: CQ flags are not supported",
            ));
        }
        let size = if attr.size == 0 {
            default_size
        } else {
            attr.size
        };
        let wake = EventFd::new()
            .map_err(|e| Error::new(Errno::EMFILE, format!("unixdgram: eventfd: {e}")))?;
        Ok(Cq {
            shared: Arc::new(CqShared {
                size,
                wait_obj: attr.wait_obj,
                wait_cond: attr.wait_cond,
                state: Mutex::new(State {
                    queue: VecDeque::with_capacity(size.min(4096)),
                    reserved: 0,
                }),
                eps: Mutex::new(Vec::new()),
                wake,
                sleepers: AtomicUsize::new(0),
                signaled: AtomicBool::new(false),
            }),
        })
    }

    /// The shared state, for an endpoint being bound to this CQ.
    pub(crate) fn shared(&self) -> Arc<CqShared> {
        self.shared.clone()
    }

    /// The number of entries this CQ holds.
    pub fn size(&self) -> usize {
        self.shared.size
    }
}

impl CqOps for Cq {
    fn read(&self, mut buf: CqBuf<'_>, src: Option<&mut [u64]>) -> Result<usize> {
        let cq = &self.shared;
        cq.progress(None);
        cq.drain(&mut buf, src)
    }

    fn readerr(&self, _flags: u64) -> Result<CqError> {
        let mut s = self.shared.state();
        let Some((code, olen)) = s.queue.front().and_then(|c| c.err) else {
            return Err(Error::code_only(Errno::EAGAIN));
        };
        let Some(c) = s.queue.pop_front() else {
            return Err(Error::code_only(Errno::EAGAIN));
        };
        // No provider-specific error code or data (`max_err_data` is 0).
        Ok(CqError {
            flags: c.flags,
            len: c.len,
            buf: c.buf as usize,
            olen,
            ..CqError::new(c.context, code)
        })
    }

    /// Blocks in `poll(2)` on the sockets of the endpoints that have receives posted
    /// (and on the CQ's eventfd), so a sleeping reader uses no CPU.
    fn sread(
        &self,
        mut buf: CqBuf<'_>,
        mut src: Option<&mut [u64]>,
        threshold: Option<usize>,
        timeout: i32,
    ) -> Result<usize> {
        let cq = &self.shared;
        if cq.wait_obj == WaitObj::None {
            return Err(Error::new(
                Errno::ENOSYS,
                "unixdgram: sread on a CQ opened with FI_WAIT_NONE",
            ));
        }
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        let wanted = cq.wanted(buf.len(), threshold);
        let mut fds = Vec::new();
        cq.sleepers.fetch_add(1, Ordering::AcqRel);
        let result = loop {
            fds.clear();
            cq.progress(Some(&mut fds));
            if cq.ready(wanted) {
                break cq.drain(&mut buf, src.as_deref_mut());
            }
            if cq.signaled.swap(false, Ordering::AcqRel) {
                break Err(Error::code_only(Errno::EAGAIN));
            }
            let left = match deadline {
                None => -1,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        // Time is up: return what there is, or FI_EAGAIN.
                        break cq.drain(&mut buf, src.as_deref_mut());
                    }
                    // Round up, so a short remaining time still sleeps.
                    (d - now).as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
                }
            };
            fds.push(cq.wake.raw_fd());
            if let Err(e) = poll_readable(&fds, left) {
                break Err(Error::new(Errno::EIO, format!("unixdgram: poll: {e}")));
            }
            cq.wake.drain();
        };
        cq.sleepers.fetch_sub(1, Ordering::AcqRel);
        result
    }

    fn signal(&self) -> Result<()> {
        self.shared.signaled.store(true, Ordering::Release);
        self.shared.wake.notify();
        Ok(())
    }
}

/// A successful completion (convenience for the endpoint).
pub(crate) fn ok(
    context: usize,
    flags: u64,
    len: usize,
    buf: *mut libc::c_void,
    src: u64,
) -> Completion {
    Completion {
        context,
        flags,
        len,
        buf,
        src,
        err: None,
    }
}

/// An error completion.
pub(crate) fn error(
    context: usize,
    flags: u64,
    len: usize,
    buf: *mut libc::c_void,
    code: Errno,
    olen: usize,
) -> Completion {
    Completion {
        err: Some((code, olen)),
        ..ok(context, flags, len, buf, ADDR_NOTAVAIL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::abi::raw::{CqDataEntry, CqEntry, CqMsgEntry};
    use ofi_core::CqFormat;

    fn cq(size: usize, wait: WaitObj) -> Cq {
        let attr = CqAttr {
            size,
            wait_obj: wait,
            ..CqAttr::with_format(CqFormat::Msg)
        };
        Cq::open(&attr, 16).unwrap()
    }

    fn push(cq: &Cq, c: Completion) {
        assert!(cq.shared.reserve());
        cq.shared.complete(c);
    }

    #[test]
    fn reads_stop_at_an_error_and_readerr_takes_it() {
        let cq = cq(8, WaitObj::None);
        push(&cq, ok(1, 2, 3, std::ptr::null_mut(), 7));
        push(&cq, error(2, 4, 0, std::ptr::null_mut(), Errno::ETRUNC, 5));
        push(&cq, ok(3, 2, 9, std::ptr::null_mut(), 8));
        let mut e = [CqMsgEntry::default(); 4];
        let mut src = [0u64; 4];
        assert_eq!(cq.read(CqBuf::Msg(&mut e), Some(&mut src)).unwrap(), 1);
        assert_eq!(
            (e[0].op_context, e[0].flags, e[0].len, src[0]),
            (1, 2, 3, 7)
        );
        assert_eq!(
            cq.read(CqBuf::Msg(&mut e), None).unwrap_err().code(),
            Errno::EAVAIL
        );
        let err = cq.readerr(0).unwrap();
        assert_eq!((err.op_context, err.err, err.olen), (2, Errno::ETRUNC, 5));
        assert_eq!((err.flags, err.len, err.prov_errno), (4, 0, 0));
        assert!(err.err_data.is_empty());
        assert_eq!(cq.readerr(0).unwrap_err().code(), Errno::EAGAIN);
        let mut d = [CqDataEntry::default(); 1];
        assert_eq!(cq.read(CqBuf::Data(&mut d), None).unwrap(), 1);
        assert_eq!((d[0].op_context, d[0].len), (3, 9));
        let mut c = [CqEntry::default(); 1];
        assert_eq!(
            cq.read(CqBuf::Context(&mut c), None).unwrap_err().code(),
            Errno::EAGAIN
        );
    }

    #[test]
    fn reservations_bound_the_queue() {
        let cq = cq(2, WaitObj::None);
        assert!(cq.shared.reserve());
        assert!(cq.shared.reserve());
        assert!(!cq.shared.reserve(), "a third would overrun");
        cq.shared.unreserve();
        assert!(cq.shared.reserve());
        cq.shared.complete(ok(1, 0, 0, std::ptr::null_mut(), 0));
        cq.shared.complete(ok(2, 0, 0, std::ptr::null_mut(), 0));
        assert!(!cq.shared.reserve(), "full until read");
        let mut e = [CqEntry::default(); 1];
        assert_eq!(cq.read(CqBuf::Context(&mut e), None).unwrap(), 1);
        assert!(cq.shared.reserve());
    }

    #[test]
    fn sread_times_out_and_is_woken_by_signal() {
        let cq = cq(4, WaitObj::Unspec);
        let mut e = [CqEntry::default(); 1];
        let t0 = Instant::now();
        assert_eq!(
            cq.sread(CqBuf::Context(&mut e), None, None, 30)
                .unwrap_err()
                .code(),
            Errno::EAGAIN
        );
        assert!(t0.elapsed() >= Duration::from_millis(30));
        cq.signal().unwrap();
        assert_eq!(
            cq.sread(CqBuf::Context(&mut e), None, None, -1)
                .unwrap_err()
                .code(),
            Errno::EAGAIN
        );
        push(&cq, ok(5, 0, 0, std::ptr::null_mut(), 0));
        assert_eq!(cq.sread(CqBuf::Context(&mut e), None, None, -1).unwrap(), 1);
        assert_eq!(e[0].op_context, 5);
    }

    #[test]
    fn sread_needs_a_wait_object_and_bad_attrs_fail() {
        let cq = cq(4, WaitObj::None);
        let mut e = [CqEntry::default(); 1];
        assert_eq!(
            cq.sread(CqBuf::Context(&mut e), None, None, 0)
                .unwrap_err()
                .code(),
            Errno::ENOSYS
        );
        let fd = CqAttr {
            wait_obj: WaitObj::Fd,
            ..CqAttr::default()
        };
        assert_eq!(
            Cq::open(&fd, 4).err().map(|e| e.code()),
            Some(Errno::ENOSYS)
        );
        let flags = CqAttr {
            flags: 1,
            ..CqAttr::default()
        };
        assert_eq!(
            Cq::open(&flags, 4).err().map(|e| e.code()),
            Some(Errno::EBADFLAGS)
        );
        assert_eq!(Cq::open(&CqAttr::default(), 16).unwrap().size(), 16);
    }
}
