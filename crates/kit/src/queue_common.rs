//! What the completion queue ([`crate::cq`]) and the event queue ([`crate::eq`]) share:
//! the checks of their open attributes (the counter's and the wait set's too), their
//! error entries kept in their place among the successes, and the overrun state.
//!
//! # Invariants
//!
//! - Each error entry carries the number of successes pushed before it (its sequence
//!   number in the stream); error entries are queued oldest first, so their sequence
//!   numbers never decrease. A reader returns successes only up to the next error
//!   entry ([`ErrorEntries::readable`]).
//! - The overrun state only moves forward: [`Overrun::No`] → [`Overrun::Pending`] (an
//!   entry was dropped) → [`Overrun::Reported`] (the `FI_EOVERRUN` entry was read).
//!
//! # What may panic
//!
//! Nothing.

use std::collections::VecDeque;

use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::OpFlags;

/// The size a queue opens with: `requested`, or `default` for 0. `FI_EINVAL` naming
/// `what` (`"CQ"`, `"EQ"`) over `max`.
pub(crate) fn open_size(what: &str, requested: usize, default: usize, max: usize) -> Result<usize> {
    match requested {
        0 => Ok(default),
        s if s > max => Err(Error::new(
            Errno::EINVAL,
            format!("{what} size {s} is over the limit of {max}"),
        )),
        s => Ok(s),
    }
}

/// `FI_EINVAL` naming `what` and the bits of the open `flags` outside `allowed`.
pub(crate) fn check_open_flags(what: &str, flags: u64, allowed: OpFlags) -> Result<()> {
    let unknown = flags & !allowed.bits();
    if unknown != 0 {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{what} flags {unknown:#x} are not supported"),
        ));
    }
    Ok(())
}

/// `FI_EOVERRUN`: queue `what` (`"CQ"`, `"EQ"`) was overrun. Out of line, so the paths
/// that may return it stay small.
#[cold]
#[inline(never)]
pub(crate) fn overrun_error(what: &str) -> Error {
    Error::new(Errno::EOVERRUN, format!("the {what} was overrun"))
}

/// Overrun state of a CQ or EQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overrun {
    /// Never overrun.
    No,
    /// Overrun; the `FI_EOVERRUN` error entry has not been read yet.
    Pending,
    /// Overrun and reported: every read fails with `FI_EOVERRUN`.
    Reported,
}

/// A queue's error entries (`E`: a CQ's or an EQ's), each in its place in the stream of
/// successes, with the overrun state and the count of dropped entries. The queue keeps
/// it under its lock, beside its successes.
#[derive(Debug)]
pub(crate) struct ErrorEntries<E> {
    /// Error entries, each with the number of successes pushed before it.
    errs: VecDeque<(u64, E)>,
    /// Whether the queue was overrun, and whether that has been read.
    pub(crate) overrun: Overrun,
    /// Entries dropped because the queue was full or overrun.
    pub(crate) dropped: u64,
}

impl<E> ErrorEntries<E> {
    /// No error entry, never overrun.
    pub(crate) fn new() -> ErrorEntries<E> {
        ErrorEntries {
            errs: VecDeque::new(),
            overrun: Overrun::No,
            dropped: 0,
        }
    }

    /// The error entries queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.errs.len()
    }

    /// Of `queued` successes whose oldest has sequence number `head`, how many may be
    /// read before the next error entry.
    #[inline]
    pub(crate) fn readable(&self, head: u64, queued: usize) -> usize {
        match self.errs.front() {
            Some((seq, _)) => (seq.saturating_sub(head) as usize).min(queued),
            None => queued,
        }
    }

    /// True if a read stops at an error entry or the overrun, whatever is queued.
    #[inline]
    pub(crate) fn blocked(&self) -> bool {
        !self.errs.is_empty() || self.overrun != Overrun::No
    }

    /// The error of a read of queue `what` (`"CQ"`, `"EQ"`) that finds no success to
    /// return: `FI_EAVAIL` if an error entry (or the overrun entry) is next,
    /// `FI_EOVERRUN` once the overrun was reported, else `FI_EAGAIN`.
    pub(crate) fn empty_error(&self, what: &str) -> Error {
        if !self.errs.is_empty() || self.overrun == Overrun::Pending {
            Error::code_only(Errno::EAVAIL)
        } else if self.overrun == Overrun::Reported {
            overrun_error(what)
        } else {
            Error::code_only(Errno::EAGAIN)
        }
    }

    /// Queue error entry `e` behind the `seq` successes pushed before it.
    pub(crate) fn push(&mut self, seq: u64, e: E) {
        self.errs.push_back((seq, e));
    }

    /// `FI_EOVERRUN` naming queue `what` if it was overrun: the entry offered is then
    /// dropped (and counted).
    #[inline]
    pub(crate) fn refuse_if_overrun(&mut self, what: &str) -> Result<()> {
        if self.overrun != Overrun::No {
            self.dropped += 1;
            return Err(overrun_error(what));
        }
        Ok(())
    }

    /// Drop an entry that did not fit: the queue is overrun from now on. True if it was
    /// not before (the overrun entry is now pending).
    pub(crate) fn overflow(&mut self) -> bool {
        self.dropped += 1;
        let first = self.overrun == Overrun::No;
        if first {
            self.overrun = Overrun::Pending;
        }
        first
    }

    /// What `readerr` returns: the oldest error entry, else the overrun entry
    /// (`overrun_entry()`, once), else `None` (the caller's `FI_EAGAIN`).
    pub(crate) fn take(&mut self, overrun_entry: impl FnOnce() -> E) -> Option<E> {
        if let Some((_, e)) = self.errs.pop_front() {
            Some(e)
        } else if self.overrun == Overrun::Pending {
            self.overrun = Overrun::Reported;
            Some(overrun_entry())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_size_and_flags() {
        assert_eq!(open_size("CQ", 0, 16, 64).unwrap(), 16);
        assert_eq!(open_size("CQ", 64, 16, 64).unwrap(), 64);
        let e = open_size("EQ", 65, 16, 64).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.to_string().contains("EQ size 65"), "{e}");
        check_open_flags("CQ", OpFlags::AFFINITY.bits(), OpFlags::AFFINITY).unwrap();
        let e = check_open_flags("CQ", OpFlags::READ.bits(), OpFlags::AFFINITY).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
    }

    #[test]
    fn errors_keep_their_place_and_overrun_goes_forward() {
        let mut q = ErrorEntries::<u32>::new();
        assert_eq!(q.readable(0, 3), 3);
        assert_eq!(q.empty_error("CQ").code(), Errno::EAGAIN);
        q.push(2, 7);
        assert_eq!(q.readable(0, 3), 2, "two successes before the error");
        assert_eq!(q.readable(2, 1), 0);
        assert!(q.blocked());
        assert_eq!(q.empty_error("CQ").code(), Errno::EAVAIL);
        assert!(q.overflow());
        assert!(!q.overflow(), "overrun once");
        assert_eq!(
            q.refuse_if_overrun("CQ").unwrap_err().code(),
            Errno::EOVERRUN
        );
        assert_eq!(q.dropped, 3);
        assert_eq!(q.take(|| 99), Some(7));
        assert_eq!(q.empty_error("CQ").code(), Errno::EAVAIL, "overrun pending");
        assert_eq!(q.take(|| 99), Some(99));
        assert_eq!(q.overrun, Overrun::Reported);
        assert_eq!(q.take(|| 99), None);
        assert_eq!(q.empty_error("CQ").code(), Errno::EOVERRUN);
        assert_eq!(q.len(), 0);
    }
}
