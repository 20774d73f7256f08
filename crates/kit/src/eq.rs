//! An event queue ready to use: [`KitEq`] implements core's `EqOps` — connection
//! events (with their info and connection data), asynchronous MR/AV completions,
//! application events (`fi_eq_write`), error events, `FI_PEEK`, blocking reads and a
//! wait fd.
//!
//! # For the provider
//!
//! Open one in `FabricOps::eq_open` with [`KitEq::new`]; passive endpoints, endpoints,
//! AVs and domains keep a clone from their `bind_eq` and report with [`KitEq::push`]
//! (or the helpers [`KitEq::connreq`], [`KitEq::connected`], [`KitEq::shutdown`],
//! [`KitEq::av_complete`], [`KitEq::mr_complete`]) and failures with
//! [`KitEq::push_err`]. Bind the fabric's (or a domain's) progress engine with
//! [`KitEq::bind_progress`] if connection management is driven by progress.
//!
//! # Semantics (fi_eq(3))
//!
//! - `read` drives progress, then returns the next event; `FI_EAGAIN` if none,
//!   `FI_EAVAIL` if an error event is next. With `peek` the event stays queued.
//! - `readerr` returns the oldest error event (or the overrun event); `FI_EAGAIN` if
//!   there is none.
//! - `write` queues an application event; it needs `FI_WRITE` in the open flags
//!   (`FI_EINVAL` without), and is `FI_EAGAIN` when the queue is full (reading clears
//!   it).
//! - `sread` blocks up to `timeout` ms (negative: forever) for an event, alternating
//!   with progress; `FI_EAGAIN` on time-out; `FI_ENOSYS` with `FI_WAIT_NONE`.
//! - The queue holds `size` events (0: [`DEFAULT_EQ_SIZE`]). A provider push that does
//!   not fit is dropped and the EQ is overrun: the events queued before are still read,
//!   then an `FI_EOVERRUN` error event is reported, then every read fails with
//!   `FI_EOVERRUN` (see [`crate::cq`] for the reasoning).
//! - The wait fd (`FI_WAIT_FD`, `FI_WAIT_UNSPEC`) is readable exactly while a read
//!   would not return `FI_EAGAIN`.
//! - Open: flags other than `FI_WRITE`/`FI_AFFINITY`, or a size over
//!   [`MAX_EQ_SIZE`], are `FI_EINVAL`; `FI_WAIT_POLLFD` is `FI_ENOSYS`; `FI_WAIT_SET`
//!   blocks internally and is attached to its set by [`KitEq::new_in`].
//!
//! Events carry owned data (infos, connection data), so pushes allocate; reads move
//! or (with `peek`) clone them. EQs are the control path.
//!
//! # What may panic
//!
//! Nothing: bad input is an `Error`, poisoned locks are recovered.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use ofi_core::attr::Info;
use ofi_core::enums::EqEvent;
use ofi_core::eq::{EqAttr, EqErrorEntry, Event};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::OpFlags;
use ofi_core::provider::EqOps;

use crate::cq::StrerrorFn;
use crate::queue_common::{check_open_flags, open_size, ErrorEntries, Overrun};
use crate::wait::{lock, BlockingWait, KitWait, Links, SleeperCount, WaitFd, WaitMode};

/// The size of an EQ opened with size 0.
pub const DEFAULT_EQ_SIZE: usize = 1024;
/// The largest EQ size accepted.
pub const MAX_EQ_SIZE: usize = 1 << 20;

struct EqState {
    events: VecDeque<Event>,
    /// Error events in their place among the events; the overrun state.
    errors: ErrorEntries<EqErrorEntry>,
    /// Events ever removed from `events`.
    head: u64,
    sleepers: usize,
}

impl SleeperCount for EqState {
    fn sleepers(&mut self) -> &mut usize {
        &mut self.sleepers
    }
}

impl EqState {
    /// Events and error events counted against the size.
    fn used(&self) -> usize {
        self.events.len() + self.errors.len()
    }

    /// True if a read would not return `FI_EAGAIN`.
    fn ready(&self) -> bool {
        !self.events.is_empty() || self.errors.blocked()
    }

    /// The next event (removed unless `peek`), or the error of an empty read.
    fn next(&mut self, peek: bool) -> Result<Event> {
        if self.errors.readable(self.head, self.events.len()) == 0 {
            return Err(self.errors.empty_error("EQ"));
        }
        if peek {
            return self
                .events
                .front()
                .cloned()
                .ok_or_else(|| Error::code_only(Errno::EAGAIN));
        }
        let ev = self
            .events
            .pop_front()
            .ok_or_else(|| Error::code_only(Errno::EAGAIN))?;
        self.head += 1;
        Ok(ev)
    }
}

struct EqShared {
    size: usize,
    mode: WaitMode,
    writable: bool,
    state: Mutex<EqState>,
    cv: Condvar,
    fd: Option<WaitFd>,
    links: Links,
    strerror: OnceLock<StrerrorFn>,
}

impl EqShared {
    fn refresh_fd(&self, state: &EqState) {
        if let Some(fd) = &self.fd {
            fd.update(state.ready());
        }
    }

    /// Queue an event or an error event. `app`: an application write (full is
    /// `FI_EAGAIN`, not an overrun).
    fn enqueue(&self, item: std::result::Result<Event, EqErrorEntry>, app: bool) -> Result<()> {
        {
            let mut state = lock(&self.state);
            state.errors.refuse_if_overrun("EQ")?;
            if state.used() >= self.size {
                if app {
                    return Err(Error::new(Errno::EAGAIN, "the EQ is full"));
                }
                state.errors.overflow();
                self.notify_locked(&state);
                return Err(Error::new(
                    Errno::EOVERRUN,
                    "EQ overrun: event dropped (the queue is full)",
                ));
            }
            match item {
                Ok(ev) => state.events.push_back(ev),
                Err(e) => {
                    let seq = state.head + state.events.len() as u64;
                    state.errors.push(seq, e);
                }
            }
            self.notify_locked(&state);
        }
        self.notify_sets();
        Ok(())
    }
}

crate::wait::locked_queue_waitable!(EqShared, EqState);

/// An event queue (see the module docs). Clones share the queue.
#[derive(Clone)]
pub struct KitEq {
    inner: Arc<EqShared>,
}

impl std::fmt::Debug for KitEq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("KitEq")
            .field("size", &self.inner.size)
            .field("queued", &state.events.len())
            .field("errors", &state.errors)
            .finish()
    }
}

impl KitEq {
    /// Open an EQ (see the module docs for the errors).
    pub fn new(attr: &EqAttr) -> Result<KitEq> {
        let size = open_size("EQ", attr.size, DEFAULT_EQ_SIZE, MAX_EQ_SIZE)?;
        check_open_flags("EQ", attr.flags, OpFlags::WRITE | OpFlags::AFFINITY)?;
        let mode = WaitMode::resolve(attr.wait_obj)?;
        Ok(KitEq {
            inner: Arc::new(EqShared {
                size,
                mode,
                writable: attr.flags & OpFlags::WRITE.bits() != 0,
                state: Mutex::new(EqState {
                    events: VecDeque::new(),
                    errors: ErrorEntries::new(),
                    head: 0,
                    sleepers: 0,
                }),
                cv: Condvar::new(),
                fd: mode.make_fd()?,
                links: Links::default(),
                strerror: OnceLock::new(),
            }),
        })
    }

    /// [`KitEq::new`], attached to wait set `set`: what a provider's
    /// `FabricOps::eq_open_in_set` returns.
    pub fn new_in(attr: &EqAttr, set: &KitWait) -> Result<KitEq> {
        let eq = KitEq::new(attr)?;
        eq.attach_wait(set);
        Ok(eq)
    }

    /// Set the text `strerror` gives for provider error codes (once).
    pub fn set_strerror(&self, f: StrerrorFn) {
        let _ = self.inner.strerror.set(f);
    }

    /// The capacity.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// True if opened with `FI_WRITE`.
    pub fn is_writable(&self) -> bool {
        self.inner.writable
    }

    /// Events queued (errors included).
    pub fn len(&self) -> usize {
        lock(&self.inner.state).used()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True once the EQ has been overrun.
    pub fn is_overrun(&self) -> bool {
        lock(&self.inner.state).errors.overrun != Overrun::No
    }

    /// Events dropped because the EQ was full or overrun.
    pub fn dropped(&self) -> u64 {
        lock(&self.inner.state).errors.dropped
    }

    /// Report an event. `FI_EOVERRUN` if it did not fit (it is dropped and the EQ is
    /// overrun) or the EQ was overrun before.
    pub fn push(&self, event: Event) -> Result<()> {
        self.inner.enqueue(Ok(event), false)
    }

    /// Report an error event; reads return `FI_EAVAIL` when it is next.
    pub fn push_err(&self, err: EqErrorEntry) -> Result<()> {
        self.inner.enqueue(Err(err), false)
    }

    /// `FI_CONNREQ` on the passive endpoint opened with context `fid`, with the info
    /// to accept it with and the peer's connection data.
    pub fn connreq(&self, fid: usize, info: Info, cm_data: Vec<u8>) -> Result<()> {
        self.push(Event {
            event: EqEvent::ConnReq,
            fid,
            info: Some(Box::new(info)),
            cm_data,
            ..Event::default()
        })
    }

    /// `FI_CONNECTED` on the endpoint opened with context `fid`.
    pub fn connected(&self, fid: usize, cm_data: Vec<u8>) -> Result<()> {
        self.push(Event {
            event: EqEvent::Connected,
            fid,
            cm_data,
            ..Event::default()
        })
    }

    /// Queue the error event of connection endpoint `fid`: code `code` (also its
    /// provider errno) with `err_data` (a rejection's CM data, or empty).
    pub fn conn_error(&self, fid: usize, code: Errno, err_data: Vec<u8>) -> Result<()> {
        self.push_err(EqErrorEntry {
            fid,
            context: 0,
            data: 0,
            err: code,
            prov_errno: code.0,
            err_data,
        })
    }

    /// `FI_SHUTDOWN` on the endpoint opened with context `fid`.
    pub fn shutdown(&self, fid: usize) -> Result<()> {
        self.push(Event {
            event: EqEvent::Shutdown,
            fid,
            ..Event::default()
        })
    }

    /// `FI_AV_COMPLETE` for the AV opened with context `fid`: the insert with
    /// `context` finished, `count` addresses inserted.
    pub fn av_complete(&self, fid: usize, context: usize, count: u64) -> Result<()> {
        self.push(Event {
            event: EqEvent::AvComplete,
            fid,
            context,
            data: count,
            ..Event::default()
        })
    }

    /// `FI_MR_COMPLETE` for the MR opened with context `fid`.
    pub fn mr_complete(&self, fid: usize, context: usize) -> Result<()> {
        self.push(Event {
            event: EqEvent::MrComplete,
            fid,
            context,
            ..Event::default()
        })
    }
}

crate::wait::queue_handle_waiting!(KitEq, "EQ");

impl EqOps for KitEq {
    fn read(&self, peek: bool) -> Result<Event> {
        let inner = &*self.inner;
        inner.drive();
        let mut state = lock(&inner.state);
        let r = state.next(peek);
        if r.is_ok() && !peek {
            inner.refresh_fd(&state);
        }
        r
    }

    fn readerr(&self) -> Result<EqErrorEntry> {
        let inner = &*self.inner;
        let mut state = lock(&inner.state);
        let overrun_entry = || EqErrorEntry {
            fid: 0,
            context: 0,
            data: 0,
            err: Errno::EOVERRUN,
            prov_errno: 0,
            err_data: Vec::new(),
        };
        let Some(e) = state.errors.take(overrun_entry) else {
            return Err(Error::code_only(Errno::EAGAIN));
        };
        inner.refresh_fd(&state);
        Ok(e)
    }

    fn write(&self, event: Event) -> Result<()> {
        if !self.inner.writable {
            return Err(Error::new(
                Errno::EINVAL,
                "eq write: the EQ was opened without FI_WRITE",
            ));
        }
        self.inner.enqueue(Ok(event), true)
    }

    fn sread(&self, timeout: i32, peek: bool) -> Result<Event> {
        let inner = &*self.inner;
        if !inner.mode.can_block() {
            return Err(Error::new(
                Errno::ENOSYS,
                "sread on an EQ opened with FI_WAIT_NONE",
            ));
        }
        let mut w = BlockingWait::new(timeout);
        loop {
            let work = inner.drive();
            w.after_round(work);
            let mut state = lock(&inner.state);
            if state.ready() {
                let r = state.next(peek);
                if r.is_ok() && !peek {
                    inner.refresh_fd(&state);
                }
                return r;
            }
            if w.expired() {
                return Err(Error::code_only(Errno::EAGAIN));
            }
            inner.idle(&mut w, state, work, |state| !state.ready());
        }
    }

    fn strerror(&self, prov_errno: i32, err_data: &[u8]) -> String {
        crate::wait::strerror_with(&self.inner.strerror, prov_errno, err_data)
    }

    fn wait_fd(&self) -> Result<i32> {
        crate::wait::wait_fd_of(self.inner.fd.as_ref(), "EQ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::ProgressEngine;
    use crate::test_support::{assert_open_refused, fd_wait_set, in_a_moment};
    use crate::wait::Waitable;
    use ofi_core::enums::WaitObj;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn eq(size: usize, wait_obj: WaitObj) -> KitEq {
        KitEq::new(&EqAttr {
            size,
            flags: OpFlags::WRITE.bits(),
            wait_obj,
            ..EqAttr::default()
        })
        .unwrap()
    }

    fn code<T: std::fmt::Debug>(r: Result<T>) -> Errno {
        r.unwrap_err().code()
    }

    fn notify(ctx: usize) -> Event {
        Event {
            event: EqEvent::Notify,
            fid: 1,
            context: ctx,
            data: ctx as u64 * 2,
            ..Event::default()
        }
    }

    fn err(ctx: usize, code: Errno) -> EqErrorEntry {
        EqErrorEntry {
            fid: 3,
            context: ctx,
            data: 0,
            err: code,
            prov_errno: -1,
            err_data: vec![9, 8],
        }
    }

    #[test]
    fn open_attributes_and_errors() {
        let q = KitEq::new(&EqAttr::default()).unwrap();
        assert_eq!(q.size(), DEFAULT_EQ_SIZE);
        assert_eq!(q.wait_mode(), WaitMode::None);
        assert!(!q.is_writable());
        assert_open_refused(
            KitEq::new,
            &[
                (|a| a.size = MAX_EQ_SIZE + 1, Errno::EINVAL),
                (|a| a.flags = OpFlags::READ.bits(), Errno::EINVAL),
                (|a| a.wait_obj = WaitObj::PollFd, Errno::ENOSYS),
            ],
        );
        assert!(format!("{:?}", eq(4, WaitObj::Fd)).contains("KitEq"));
    }

    #[test]
    fn write_read_peek() {
        let q = eq(8, WaitObj::None);
        assert_eq!(code(q.read(false)), Errno::EAGAIN);
        assert_eq!(code(q.read(true)), Errno::EAGAIN);
        q.write(notify(1)).unwrap();
        q.write(notify(2)).unwrap();
        assert_eq!(q.read(true).unwrap(), notify(1));
        assert_eq!(q.read(true).unwrap(), notify(1), "peek leaves it queued");
        assert_eq!(q.read(false).unwrap(), notify(1));
        assert_eq!(q.read(false).unwrap(), notify(2));
        assert_eq!(code(q.read(false)), Errno::EAGAIN);
        assert!(q.is_empty());
        // Without FI_WRITE.
        let ro = KitEq::new(&EqAttr::default()).unwrap();
        assert_eq!(code(ro.write(notify(1))), Errno::EINVAL);
        ro.push(notify(1)).unwrap(); // the provider may always push
        assert_eq!(ro.len(), 1);
    }

    #[test]
    fn cm_and_av_events() {
        let q = eq(8, WaitObj::None);
        let info = Info::new();
        q.connreq(5, info.clone(), b"hello".to_vec()).unwrap();
        q.connected(6, b"ok".to_vec()).unwrap();
        q.shutdown(6).unwrap();
        q.av_complete(7, 70, 3).unwrap();
        q.mr_complete(8, 80).unwrap();
        let e = q.read(false).unwrap();
        assert_eq!(e.event, EqEvent::ConnReq);
        assert_eq!((e.fid, e.cm_data.as_slice()), (5, &b"hello"[..]));
        assert_eq!(e.info.as_deref(), Some(&info));
        let e = q.read(false).unwrap();
        assert_eq!(
            (e.event, e.fid, e.cm_data),
            (EqEvent::Connected, 6, b"ok".to_vec())
        );
        assert_eq!(q.read(false).unwrap().event, EqEvent::Shutdown);
        let e = q.read(false).unwrap();
        assert_eq!(
            (e.event, e.fid, e.context, e.data),
            (EqEvent::AvComplete, 7, 70, 3)
        );
        let e = q.read(false).unwrap();
        assert_eq!((e.event, e.fid, e.context), (EqEvent::MrComplete, 8, 80));
    }

    #[test]
    fn error_events_come_in_order_with_eavail() {
        let q = eq(8, WaitObj::None);
        q.push(notify(1)).unwrap();
        q.push_err(err(2, Errno::ECONNREFUSED)).unwrap();
        q.push(notify(3)).unwrap();
        assert_eq!(q.read(false).unwrap(), notify(1));
        assert_eq!(code(q.read(true)), Errno::EAVAIL);
        assert_eq!(code(q.read(false)), Errno::EAVAIL);
        let e = q.readerr().unwrap();
        assert_eq!(
            (e.context, e.err, e.prov_errno),
            (2, Errno::ECONNREFUSED, -1)
        );
        assert_eq!(e.err_data, vec![9, 8]);
        assert_eq!(code(q.readerr()), Errno::EAGAIN);
        assert_eq!(q.read(false).unwrap(), notify(3));
        // readerr also takes an error queued behind events.
        q.push(notify(4)).unwrap();
        q.push_err(err(5, Errno::EIO)).unwrap();
        assert_eq!(q.readerr().unwrap().context, 5);
        assert_eq!(q.read(false).unwrap(), notify(4));
    }

    #[test]
    fn bounded_size_full_and_overrun() {
        let q = eq(2, WaitObj::None);
        q.write(notify(1)).unwrap();
        q.write(notify(2)).unwrap();
        // The application's write: EAGAIN (reading clears it), not an overrun.
        assert_eq!(code(q.write(notify(3))), Errno::EAGAIN);
        assert!(!q.is_overrun());
        // A provider push that does not fit: overrun.
        assert_eq!(code(q.push(notify(4))), Errno::EOVERRUN);
        assert!(q.is_overrun());
        assert_eq!(code(q.push_err(err(5, Errno::EIO))), Errno::EOVERRUN);
        assert_eq!(code(q.write(notify(6))), Errno::EOVERRUN);
        assert_eq!(q.dropped(), 3);
        assert_eq!(q.read(false).unwrap(), notify(1));
        assert_eq!(q.read(false).unwrap(), notify(2));
        assert_eq!(code(q.read(false)), Errno::EAVAIL);
        assert_eq!(q.readerr().unwrap().err, Errno::EOVERRUN);
        assert_eq!(code(q.read(false)), Errno::EOVERRUN);
        assert_eq!(code(q.readerr()), Errno::EAGAIN);
    }

    #[test]
    fn sread_errors_timeout_and_wakeup() {
        let none = eq(4, WaitObj::None);
        assert_eq!(code(none.sread(0, false)), Errno::ENOSYS);
        assert_eq!(code(none.wait_fd()), Errno::ENOSYS);
        let q = eq(4, WaitObj::Unspec);
        let t = Instant::now();
        assert_eq!(code(q.sread(50, false)), Errno::EAGAIN);
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(t.elapsed() < Duration::from_secs(5));
        let q2 = q.clone();
        let h = in_a_moment(move || {
            q2.push(notify(7)).unwrap();
        });
        let t = Instant::now();
        assert_eq!(q.sread(5_000, true).unwrap(), notify(7));
        assert!(t.elapsed() < Duration::from_secs(4));
        assert_eq!(
            q.sread(-1, false).unwrap(),
            notify(7),
            "peeked, still there"
        );
        h.join().unwrap();
        q.push_err(err(1, Errno::EIO)).unwrap();
        assert_eq!(code(q.sread(5_000, false)), Errno::EAVAIL);
    }

    #[test]
    fn reads_drive_progress() {
        let calls = Arc::new(AtomicUsize::new(0));
        let q = eq(4, WaitObj::Fd);
        let (c2, q2) = (calls.clone(), q.clone());
        let src = Arc::new(move || {
            // The third round delivers a connection event.
            if c2.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
                q2.connected(9, Vec::new()).unwrap();
                return 1;
            }
            0usize
        });
        let e = Arc::new(ProgressEngine::manual());
        e.register(&src);
        q.bind_progress(e.clone()).unwrap();
        q.bind_progress(e).unwrap();
        assert_eq!(
            code(q.bind_progress(Arc::new(ProgressEngine::manual()))),
            Errno::EINVAL
        );
        assert_eq!(code(q.read(false)), Errno::EAGAIN);
        assert_eq!(code(q.read(true)), Errno::EAGAIN);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(q.sread(5_000, false).unwrap().event, EqEvent::Connected);
        assert!(q.needs_polling());
        crate::wait::trywait(&[&q]).unwrap();
        drop(src);
        assert_eq!(
            q.drive_progress(),
            0,
            "a dropped source is no longer called"
        );
    }

    #[test]
    fn wait_fd_and_wait_sets() {
        use ofi_core::provider::WaitOps;
        let q = eq(4, WaitObj::Fd);
        let fd = q.inner.fd.as_ref().unwrap();
        assert_eq!(q.wait_fd().unwrap(), fd.fd());
        assert!(!fd.readable());
        q.push(notify(1)).unwrap();
        assert!(fd.readable());
        q.read(true).unwrap();
        assert!(fd.readable(), "peek leaves it readable");
        assert_eq!(code(crate::wait::trywait(&[&q])), Errno::EAGAIN);
        q.read(false).unwrap();
        assert!(!fd.readable());
        q.push_err(err(1, Errno::EIO)).unwrap();
        assert!(fd.readable());
        q.readerr().unwrap();
        assert!(!fd.readable());

        let set = fd_wait_set();
        q.attach_wait(&set);
        q.attach_wait(&set);
        assert_eq!(set.len(), 1);
        assert_eq!(code(set.wait(0)), Errno::ETIMEDOUT);
        q.push(notify(2)).unwrap();
        set.wait(0).unwrap();
    }

    #[test]
    fn strerror_default_and_custom() {
        let q = eq(4, WaitObj::None);
        assert_eq!(
            q.strerror(Errno::EIO.0, &[]),
            ofi_core::error::strerror(Errno::EIO.0)
        );
        fn mine(code: i32, d: &[u8]) -> String {
            format!("eq {code} {}", d.len())
        }
        q.set_strerror(mine);
        assert_eq!(q.strerror(4, &[1]), "eq 4 1");
        q.close().unwrap();
    }
}
