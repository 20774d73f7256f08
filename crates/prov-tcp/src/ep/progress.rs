//! The progress round of a connected endpoint and the completions of transmit-side
//! operations (CQ entries and counters).
//!
//! Invariants: one round writes what is queued, reads what has arrived (bounded by
//! `ROUND` messages) and writes the responses that reading queued; it runs under the
//! endpoint's lock, taken with `try_lock` so a thread that posts never waits behind a
//! round. A failed write first drains what the peer sent before it closed (at most
//! `DRAIN_ROUNDS` rounds), so a peer's last message is not lost. An operation's
//! completion is reported exactly once: a CQ entry unless selective completion left it
//! out, and its counter either way.
//!
//! Nothing here panics.

use super::*;

impl Progress for EpInner {
    fn progress(&self) -> usize {
        if !self.active.load(Ordering::Acquire) {
            return 0;
        }
        let Ok(mut state) = self.state.try_lock() else {
            return 0;
        };
        self.progress_locked(&mut state)
    }

    /// Connected: the socket, readable, and writable while output is queued. Connection
    /// setup belongs to the CM source; other states have nothing to wait for. A state
    /// another thread holds cannot be read: then the waiter polls.
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return true;
        }
        let Ok(state) = self.state.try_lock() else {
            return false;
        };
        if state.stage.pending() > 0 {
            // Work is waiting in user space: the socket may never become readable.
            return false;
        }
        if let (Conn::Connected, Some(sock)) = (&state.conn, state.sock.as_ref()) {
            out.push(if state.tx.is_empty() {
                FdInterest::read(sock.fd())
            } else {
                FdInterest::read_write(sock.fd())
            });
        }
        true
    }
}

impl EpInner {
    pub(super) fn progress_locked(&self, state: &mut EpState) -> usize {
        match state.conn {
            Conn::Connected => {}
            Conn::Connecting { .. } | Conn::AwaitResp { .. } => {
                return self.progress_connect(state)
            }
            _ => return 0,
        }
        let mut work = 0;
        match self.flush(state) {
            Ok(n) => work += n,
            Err(f) => {
                self.fail_after_write(state, f);
                return work + 1;
            }
        }
        match self.read_some(state) {
            Ok(n) => work += n,
            Err(f) => {
                self.fail(state, f);
                return work + 1;
            }
        }
        if work > 0 {
            // Responses queued while reading.
            if let Err(f) = self.flush(state) {
                self.fail_after_write(state, f);
            }
        }
        work
    }

    /// A write failed: the peer closed or reset the connection. What it sent before
    /// is still in our socket (the kernel hands queued bytes out before the error), so
    /// deliver it — a peer that sends and then exits must not lose its last message —
    /// then tear the connection down with the write's failure. Bounded: at most
    /// [`DRAIN_ROUNDS`] read rounds.
    pub(super) fn fail_after_write(&self, state: &mut EpState, f: Fail) {
        for _ in 0..DRAIN_ROUNDS {
            match self.read_some(state) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        self.fail(state, f);
    }

    pub(super) fn comp_ok(&self, b: &Binds, c: &Comp) {
        if c.report {
            if let Some(cq) = b.tx_cq() {
                let _ = cq.push_entry(&CqTaggedEntry {
                    op_context: c.ctx,
                    flags: c.flags,
                    len: 0,
                    buf: std::ptr::null_mut(),
                    data: 0,
                    tag: 0,
                });
            }
        }
        if let Some(k) = b.counter(c.cntr) {
            k.inc();
        }
    }

    pub(super) fn comp_err(&self, b: &Binds, c: &Comp, code: Errno) {
        if let Some(cq) = b.tx_cq() {
            let mut e = CqError::new(c.ctx, code);
            e.flags = c.flags;
            e.len = c.len;
            e.buf = c.buf;
            e.prov_errno = code.0;
            let _ = cq.push_err(e);
        }
        if let Some(k) = b.counter(c.cntr) {
            k.inc_err();
        }
    }

    /// Complete a transmit-side operation with the status its response carried.
    pub(super) fn comp_status(&self, b: &Binds, c: &Comp, status: u16) {
        // The peer's status: an FI code or FI_EPROTO, never as it came.
        match Errno::from_peer_status(i64::from(status)) {
            None => self.comp_ok(b, c),
            Some(e) => self.comp_err(b, c, e),
        }
    }
}
