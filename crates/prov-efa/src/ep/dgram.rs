//! `FI_EP_DGRAM`: the same endpoint over a UD queue pair, without the protocol engine.
//!
//! A send copies the datagram (at most the UD MTU) into a send slot and posts it; it
//! completes with the device's send completion (UD: when it left, not when it arrived).
//! The application's receives wait in a FIFO; each datagram that arrives is copied into
//! the oldest one (`FI_ETRUNC` with what fit when longer) and its slot posted again at
//! once; a datagram finding no receive is dropped, as UD drops it. The sender is the
//! GRH's GID and the completion's source queue pair (`FI_SOURCE` through the AV).
//!
//! Nothing here panics on application or peer input.

use ofi_kit::tagmatch::{Incoming, Placement, PostedRecv};

use super::*;
use ofi_kit::epglue::check_len;

impl Shared {
    /// `FI_EOPNOTSUPP` for `what` on a datagram endpoint.
    pub(super) fn no_dgram(&self, what: &str) -> Result<()> {
        if self.dgram {
            return Err(Error::new(
                Errno::EOPNOTSUPP,
                format!("{NAME}: no {what} on FI_EP_DGRAM"),
            ));
        }
        Ok(())
    }

    /// A datagram send of the application.
    pub(super) fn dgram_send(
        &self,
        active: &Bound,
        r: &ofi_kit::request::SendRequest,
    ) -> Result<()> {
        let len = r.iov.total();
        check_len(NAME, "datagram", len, "the MTU", self.mtu)?;
        let (mut state, peer, id) = self.begin_tx(active, r.dest)?;
        let mut data = vec![0u8; len];
        // SAFETY: the application's message, readable for its length during this
        // submitting call (the C contract `SendRequest` carries).
        unsafe { r.iov.gather(0, data.as_mut_ptr(), len) };
        self.post_packet(&mut state, peer, id, &data)?;
        state.tx_ops.insert(
            id,
            TxOp {
                ctx: r.context,
                peer,
                flags: r.completion_flags().bits(),
                want: active.tx_completion_wanted(r.inject, r.flags),
                read_into: None,
            },
        );
        let now = self.now();
        let _ = self.poll_send(active, &mut state, now);
        Ok(())
    }

    /// A datagram receive of the application: queued.
    pub(super) fn dgram_recv(&self, recv: PostedRecv<IoList>) -> Result<()> {
        let mut state = lock(&self.state);
        if state.dgram_rx.len() >= self.rx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        state.dgram_rx.push_back(RxOp {
            ctx: recv.ctx,
            buf: recv.buf,
            tag: 0,
            ignore: 0,
            tagged: false,
            flags: recv.flags,
        });
        Ok(())
    }

    /// The datagram in receive slot `i` (`len` bytes from `src`): into the oldest
    /// receive, or dropped; the slot is posted again.
    pub(super) fn dgram_arrived(
        &self,
        active: &Bound,
        state: &mut EpState,
        i: u32,
        src: EfaAddr,
        len: usize,
    ) {
        if let Some(op) = state.dgram_rx.pop_front() {
            // SAFETY: slot `i` is not posted (its completion was just read); it is
            // posted again below, after the copy out of it.
            let bytes = unsafe { self.bounce.slot_bytes(self.rx_payload(i), len) };
            let n = len.min(op.buf.total()).min(bytes.len());
            // SAFETY: the receive's buffers are the application's, writable until it
            // completes (the C contract the posted receive carries).
            unsafe { op.buf.scatter(0, bytes.as_ptr(), n) };
            let recv = op.posted();
            let inc = Incoming {
                src: active
                    .av
                    .reverse_lookup(&src.to_address())
                    .unwrap_or(ofi_core::ADDR_NOTAVAIL),
                tag: 0,
                len,
                data: None,
                tagged: false,
            };
            let place = Placement {
                offset: 0,
                len: n,
                truncated: n < len,
            };
            active.complete_rx(&recv, place, &inc, false, None);
        }
        if let Err(e) = self.post_rx(i) {
            ofi_core::ofi_warn!(NAME, "ep_data", "posting a receive slot: {e}");
        }
    }

    /// A datagram send completed: its operation completes.
    pub(super) fn dgram_sent(
        &self,
        active: &Bound,
        state: &mut EpState,
        id: u64,
        status: WcStatus,
    ) {
        let Some(op) = state.tx_ops.remove(&id) else {
            return;
        };
        let err = match status {
            WcStatus::Success => None,
            WcStatus::WrFlushErr => Some(Errno::ECANCELED),
            WcStatus::LocLenErr => Some(Errno::EMSGSIZE),
            _ => Some(Errno::EIO),
        };
        active.complete_tx(op.ctx, op.flags, op.want, err);
    }

    /// Takes back the queued datagram receive with `context`.
    pub(super) fn dgram_cancel(state: &mut EpState, context: usize) -> Option<PostedRecv<IoList>> {
        let i = state.dgram_rx.iter().position(|o| o.ctx == context)?;
        Some(state.dgram_rx.remove(i)?.posted())
    }
}
