//! Core's [`CqOps`] for [`KitCq`]: the reads (into the C formats, with source
//! addresses), error reads, blocking reads, signal and the wait fd.

use super::*;

impl CqOps for KitCq {
    fn read(&self, mut buf: CqBuf<'_>, mut src: Option<&mut [u64]>) -> Result<usize> {
        let inner = &*self.inner;
        inner.check(&buf, &src)?;
        // Completions this drive makes come back through the sink (module docs).
        let sink = SinkFrame::open(inner, buf.len());
        inner.drive();
        let got = sink.close(&mut buf, src.as_deref_mut());
        if !inner.readable.load(Ordering::Acquire) {
            // Nothing queued, no error or overrun next (see the module docs).
            return if got > 0 {
                Ok(got)
            } else {
                Err(Error::code_only(Errno::EAGAIN))
            };
        }
        inner.read_queued(&mut buf, src, got)
    }

    fn readerr(&self, _flags: u64) -> Result<CqError> {
        let inner = &*self.inner;
        let mut state = lock(&inner.state);
        let state = &mut *state;
        let Some(e) = state.errors.take(|| CqError::new(0, Errno::EOVERRUN)) else {
            return Err(Error::code_only(Errno::EAGAIN));
        };
        inner.refresh_fd(state);
        Ok(e)
    }

    fn sread(
        &self,
        mut buf: CqBuf<'_>,
        src: Option<&mut [u64]>,
        threshold: Option<usize>,
        timeout: i32,
    ) -> Result<usize> {
        let inner = &*self.inner;
        if !inner.mode.can_block() {
            return Err(Error::new(
                Errno::ENOSYS,
                "sread on a CQ opened with FI_WAIT_NONE",
            ));
        }
        inner.check(&buf, &src)?;
        if buf.is_empty() {
            return Err(Error::new(Errno::EINVAL, "sread of zero entries"));
        }
        let want = threshold.unwrap_or(1).clamp(1, buf.len());
        let mut w = BlockingWait::new(timeout);
        loop {
            let work = inner.drive();
            w.after_round(work);
            let mut state = lock(&inner.state);
            let avail = state.avail();
            let expired = w.expired();
            if avail > 0 && (avail >= want || state.errors.blocked() || state.wake || expired) {
                state.wake = false;
                return inner.take(&mut state, &mut buf, src);
            }
            if avail == 0 && state.errors.blocked() {
                return Err(state.errors.empty_error("CQ"));
            }
            if state.wake {
                state.wake = false;
                inner.refresh_fd(&state);
                return Err(Error::code_only(Errno::EAGAIN));
            }
            if expired {
                return Err(Error::code_only(Errno::EAGAIN));
            }
            // Sleep only if nothing changed since the checks above.
            inner.idle(&mut w, state, work, |state| {
                !state.wake && !state.errors.blocked() && state.avail() < want
            });
        }
    }

    fn signal(&self) -> Result<()> {
        let inner = &*self.inner;
        if !inner.mode.can_block() {
            return Err(Error::new(
                Errno::ENOSYS,
                "signal on a CQ opened with FI_WAIT_NONE",
            ));
        }
        {
            let mut state = lock(&inner.state);
            state.wake = true;
            inner.refresh_fd(&state);
            inner.cv.notify_all();
            inner.links.kick();
        }
        inner.notify_sets();
        Ok(())
    }

    fn strerror(&self, prov_errno: i32, err_data: &[u8]) -> String {
        crate::wait::strerror_with(&self.inner.strerror, prov_errno, err_data)
    }

    fn wait_fd(&self) -> Result<i32> {
        crate::wait::wait_fd_of(self.inner.fd.as_ref(), "CQ")
    }
}
