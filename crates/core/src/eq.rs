//! Event queues (`fi_eq`): attributes, events, and the public [`EventQueue`].
//!
//! An EQ reports control events: connection requests, connections established and
//! shut down (with the connection's info and data), asynchronous MR and AV
//! completions, and application events written with [`EventQueue::write`]. Reads
//! return `FI_EAGAIN` when empty and `FI_EAVAIL` when an error is next
//! ([`EventQueue::readerr`]).
//!
//! Across the boundary an event travels in the C layout (`fi_eq_entry` or
//! `fi_eq_cm_entry` plus connection data); a connection request's info is copied into
//! the returned [`Event`] and the provider's copy released at once. Nothing here panics.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use crate::abi::raw::{info_from_raw, EqCmEntry, EqEntry, RawEqAttr};
use crate::abi::tables::{call_slot, EqTable};
use crate::attr::Info;
use crate::enums::{EqEvent, WaitObj};
use crate::error::{Errno, Error, Result};

/// Event queue attributes (`struct fi_eq_attr`, without the wait set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EqAttr {
    /// Number of events (0: the provider's default).
    pub size: usize,
    /// Flags (`FI_WRITE` to allow [`EventQueue::write`], …).
    pub flags: u64,
    /// Wait object.
    pub wait_obj: WaitObj,
    /// Signaling vector.
    pub signaling_vector: i32,
}

impl EqAttr {
    /// The raw form.
    pub fn to_raw(&self) -> RawEqAttr {
        RawEqAttr {
            size: self.size,
            flags: self.flags,
            wait_obj: self.wait_obj.to_raw(),
            signaling_vector: self.signaling_vector,
            wait_set: std::ptr::null_mut(),
        }
    }

    /// From the raw form (unknown values `FI_EINVAL`; a wait set `FI_ENOSYS`).
    pub fn from_raw(r: &RawEqAttr) -> Result<EqAttr> {
        Ok(EqAttr {
            size: r.size,
            flags: r.flags,
            wait_obj: crate::wait::raw_wait_obj(r.wait_obj, r.wait_set, "EQ")?,
            signaling_vector: r.signaling_vector,
        })
    }
}

/// One event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// Which event.
    pub event: EqEvent,
    /// The context of the object the event is about (the endpoint or passive
    /// endpoint's open context).
    pub fid: usize,
    /// The event's context (not carried by connection events).
    pub context: usize,
    /// Event data (not carried by connection events).
    pub data: u64,
    /// A connection request's info (open the accepting endpoint with it).
    pub info: Option<Box<Info>>,
    /// Connection data (connection events only).
    pub cm_data: Vec<u8>,
}

/// An error event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EqErrorEntry {
    /// The context of the object the error is about.
    pub fid: usize,
    /// The operation's context.
    pub context: usize,
    /// Event data.
    pub data: u64,
    /// The error.
    pub err: Errno,
    /// Provider-specific error code.
    pub prov_errno: i32,
    /// Provider-specific error data.
    pub err_data: Vec<u8>,
}

crate::abi::ctl_ops::host_object! {
    /// An open event queue.
    EventQueue(EqTable, "an event queue");
}

/// Read buffer for one event: 8-byte aligned.
pub(crate) const READ_WORDS: usize = 64;

impl EventQueue {
    /// Read one event through `call` (a slot taking the event kind, a buffer and its
    /// length), growing the buffer while the provider answers `FI_ETOOSMALL`.
    pub(crate) fn read_with(
        &self,
        mut call: impl FnMut(*mut u32, *mut c_void, usize) -> isize,
    ) -> Result<Event> {
        let mut words = READ_WORDS;
        loop {
            let mut buf = vec![0u64; words];
            let len = words * 8;
            let mut event = 0u32;
            let rc = call(&mut event, buf.as_mut_ptr() as *mut c_void, len);
            if rc == Errno::ETOOSMALL.to_status() as isize && words < (1 << 16) {
                words *= 4;
                continue;
            }
            if rc < 0 {
                return Err(Error::from_status(rc));
            }
            // SAFETY: the provider wrote `rc` bytes of an event of kind `event` into
            // `buf`, which is aligned for the entry types.
            return unsafe { self.parse(event, buf.as_ptr() as *const u8, rc as usize) };
        }
    }

    /// # Safety
    /// `buf` holds `n` bytes written by the provider for `event`.
    unsafe fn parse(&self, event: u32, buf: *const u8, n: usize) -> Result<Event> {
        let ev = EqEvent::from_raw(event).ok_or_else(|| {
            Error::new(Errno::EOTHER, format!("EQ returned unknown event {event}"))
        })?;
        match ev {
            EqEvent::ConnReq | EqEvent::Connected | EqEvent::Shutdown => {
                if n < std::mem::size_of::<EqCmEntry>() {
                    return Err(Error::new(
                        Errno::EOTHER,
                        "EQ returned a short connection entry",
                    ));
                }
                // SAFETY: at least an EqCmEntry was written, aligned.
                let cm = unsafe { &*(buf as *const EqCmEntry) };
                let info = if cm.info.is_null() {
                    None
                } else {
                    // SAFETY: the provider's info, valid until free_info below.
                    let r = unsafe { info_from_raw(cm.info) };
                    // SAFETY: hand the info back to the EQ that allocated it.
                    unsafe { call_slot!(self.t(), EqTable.free_info(self.obj, cm.info)) };
                    Some(Box::new(r?))
                };
                let hdr = std::mem::size_of::<EqCmEntry>();
                // SAFETY: the data follows the entry within the `n` bytes written.
                let data = unsafe { std::slice::from_raw_parts(buf.add(hdr), n - hdr) }.to_vec();
                Ok(Event {
                    event: ev,
                    fid: cm.fid,
                    context: 0,
                    data: 0,
                    info,
                    cm_data: data,
                })
            }
            _ => {
                if n < std::mem::size_of::<EqEntry>() {
                    return Err(Error::new(Errno::EOTHER, "EQ returned a short entry"));
                }
                // SAFETY: at least an EqEntry was written, aligned.
                let e = unsafe { &*(buf as *const EqEntry) };
                Ok(Event {
                    event: ev,
                    fid: e.fid,
                    context: e.context,
                    data: e.data,
                    info: None,
                    cm_data: Vec::new(),
                })
            }
        }
    }

    crate::cq::strerror_with_data! {
        /// `fi_eq_strerror` with the event's error data: pass the `err_data` of the
        /// [`EqErrorEntry`] the last [`readerr`](Self::readerr) returned (the buffer itself,
        /// not a copy: the provider recognises the data it handed out by its address, as the
        /// C call passes no length). Empty: no data.
        EqTable
    }

    // ---- one method per entry of the list (`for_each_eq_op!`) ----

    crate::for_each_eq_op!(crate::abi::ctl_ops::ctl_wrappers);
}

/// Why [`EventQueue::poll_for`] returned without the event it waited for.
#[derive(Debug)]
pub enum EqWaitError {
    /// Another event came first (it has been read).
    Unexpected(Event),
    /// An error entry came first (it has been read with `fi_eq_readerr`).
    ErrorEntry(EqErrorEntry),
    /// Reading the queue failed (neither `FI_EAGAIN` nor `FI_EAVAIL`).
    Read(Error),
    /// No event within the time limit.
    TimedOut,
}

impl EventQueue {
    /// Polls the queue (`fi_eq_read` every 200 µs, for at most `limit`) until the next
    /// event arrives: `Ok` when it is `want`, else why not. For queues whose provider
    /// has no blocking read; the wait is bounded.
    pub fn poll_for(
        &self,
        want: EqEvent,
        limit: Duration,
    ) -> std::result::Result<Event, EqWaitError> {
        let deadline = Instant::now() + limit;
        loop {
            match self.read() {
                Ok(ev) if ev.event == want => return Ok(ev),
                Ok(ev) => return Err(EqWaitError::Unexpected(ev)),
                Err(e) if e.code() == Errno::EAVAIL => {
                    return Err(match self.readerr() {
                        Ok(entry) => EqWaitError::ErrorEntry(entry),
                        Err(e) => EqWaitError::Read(e),
                    });
                }
                Err(e) if e.code() == Errno::EAGAIN => {}
                Err(e) => return Err(EqWaitError::Read(e)),
            }
            if Instant::now() >= deadline {
                return Err(EqWaitError::TimedOut);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}
