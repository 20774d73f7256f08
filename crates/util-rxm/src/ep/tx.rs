//! Transmit: carrying out what the engine hands out for a connection — control
//! packets, the packets of eager and segmented messages (header + the bytes the engine
//! names, straight from the application's buffers), rendezvous requests (naming the
//! buffers registered with the core) and forwarded RMA and atomic operations — and the
//! engine's events about sends.
//!
//! # Invariants
//!
//! - Everything the engine hands out for a connection goes to the core in that order:
//!   what the core refuses for now (`FI_EAGAIN`) waits in the connection's `stalled`
//!   queue and goes before anything newer.
//! - An operation completes once: when the engine is done with it and the core has
//!   completed what was posted for it, or at the first failure.

use super::*;

/// What posting one transmit did.
pub(super) enum Posted {
    /// Handed to the core (or dropped: its operation is gone).
    Done,
    /// The core cannot take it now (`FI_EAGAIN`); try again later.
    Blocked,
    /// The connection failed (and was handled as such).
    Gone,
}

impl EpState {
    /// Operation `i`'s last core operation was posted.
    pub(super) fn posted_last(&mut self, i: u32) {
        if let Some(op) = self.ops.get_mut(i as usize).and_then(Option::as_mut) {
            op.outstanding += 1;
            op.posted = true;
        }
    }

    /// The index of the live operation `op` names (`None` once it completed).
    pub(super) fn op_index(&self, op: OpId) -> Option<u32> {
        let i = (op.0 & 0xffff_ffff) as u32;
        let gen = (op.0 >> 32) as u32;
        self.ops
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|o| o.gen == gen)
            .then_some(i)
    }
}

impl Shared {
    pub(super) fn tx_ep<'a>(&self, state: &'a EpState, conn_id: ConnId) -> Option<&'a CoreEp> {
        let slot = state.conns.get(conn_id.index())?.as_ref()?.tx?;
        state.msgs.get(slot)?.as_ref().map(|m| &m.ep)
    }

    /// Carry out what the engine has for connection `conn_id` (up), in order: first what
    /// the core refused before, then what the engine hands out now, until the core
    /// refuses or nothing is left; then the engine's events.
    #[inline]
    pub(super) fn pump_conn(&self, active: &Active, state: &mut EpState, conn_id: ConnId) {
        // The common case after a packet: nothing to send, nothing to report.
        if state.protocol.is_quiet(conn_id)
            && state.conn(conn_id).is_none_or(|x| x.stalled.is_empty())
        {
            return;
        }
        self.pump_conn_busy(active, state, conn_id);
    }

    /// [`Shared::pump_conn`] past its quick test.
    #[inline(never)]
    fn pump_conn_busy(&self, active: &Active, state: &mut EpState, conn_id: ConnId) {
        let peer = conn_id;
        loop {
            let Some(conn) = state
                .conns
                .get_mut(conn_id.index())
                .and_then(Option::as_mut)
            else {
                return;
            };
            if conn.tx.is_none() {
                break;
            }
            let t = match conn.stalled.pop_front() {
                Some(t) => t,
                None => match state.protocol.poll_transmit_to(peer) {
                    Some(t) => t,
                    None => break,
                },
            };
            match self.post_transmit(active, state, conn_id, t) {
                Posted::Done => {}
                Posted::Blocked => {
                    if let Some(conn) = state
                        .conns
                        .get_mut(conn_id.index())
                        .and_then(Option::as_mut)
                    {
                        conn.stalled.push_front(t);
                    }
                    break;
                }
                Posted::Gone => break,
            }
        }
        self.drain_events(active, state);
    }

    /// Whether connection `conn_id` has something to transmit (stalled or from the engine).
    #[inline]
    pub(super) fn conn_busy(state: &EpState, conn_id: ConnId) -> bool {
        state.conn(conn_id).is_some_and(|x| {
            x.tx.is_some() && (!x.stalled.is_empty() || state.protocol.has_transmit(conn_id))
        })
    }

    /// The engine's events: sends it is done with, sends that failed.
    pub(super) fn drain_events(&self, active: &Active, state: &mut EpState) {
        while let Some(ev) = state.protocol.poll_event() {
            match ev {
                Event::Sent { op } => {
                    if let Some(i) = state.op_index(op) {
                        if let Some(o) = state.ops[i as usize].as_mut() {
                            o.engine_done = true;
                        }
                        self.maybe_finish(active, state, i);
                    }
                }
                Event::Failed { op, err } => {
                    let Some(i) = state.op_index(op) else {
                        continue;
                    };
                    match state.ops[i as usize].as_mut() {
                        // The core still holds some of its buffers (a rendezvous
                        // request the peer answered with an error): it completes, with
                        // the error, at the core's last completion.
                        Some(o) if o.outstanding > 0 => {
                            o.err.get_or_insert(err);
                            o.engine_done = true;
                            o.posted = true;
                        }
                        _ => {
                            if let Some(o) = state.free_op(i) {
                                active.complete_tx(o.ctx, o.flags, o.want, Some(err));
                            }
                        }
                    }
                }
                // Receives being filled are the endpoint's (failed with their
                // connection); protocol errors come from `receive` as errors.
                Event::RecvFailed { .. } | Event::ProtocolError { .. } => {}
                Event::RemoteAccess { read, .. } => self.count_remote_access(read),
            }
        }
    }

    /// Hand one transmit of connection `conn_id` to the core.
    fn post_transmit(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        t: Transmit,
    ) -> Posted {
        match t {
            Transmit::Control(h) => {
                let b = h.bytes();
                let r = match self.tx_ep(state, conn_id) {
                    // SAFETY: `b` is valid for the call; inject copies it.
                    Some(ep) => unsafe { ep.inject_raw(b.as_ptr(), HDR_LEN, ADDR_UNSPEC) },
                    None => return Posted::Gone,
                };
                match r {
                    Ok(()) => Posted::Done,
                    Err(e) if e.code() == Errno::EAGAIN => Posted::Blocked,
                    Err(e) if is_conn_err(e.code()) => {
                        self.fail_conn(active, state, conn_id, Errno::ECONNRESET);
                        Posted::Gone
                    }
                    Err(e) => {
                        ofi_core::ofi_info!(NAME, "ep_data", "control packet: {e}");
                        Posted::Done
                    }
                }
            }
            Transmit::Data {
                hdr,
                op,
                offset,
                len,
            } => {
                let Some(i) = state.op_index(op) else {
                    return Posted::Done;
                };
                let ctx = mk_ctx(K_TX, i, (op.0 >> 32) as u32);
                if let Some(o) = state.ops[i as usize].as_mut() {
                    o.started = true;
                }
                let bounced = state.ops[i as usize].as_ref().map_or(0, |o| o.bounce.len());
                match self.post_packet(state, i, conn_id, ctx, hdr, offset..offset + len) {
                    Ok(()) => {
                        if let Some(o) = state.ops[i as usize].as_mut() {
                            o.outstanding += 1;
                            let Body::Send { len: total, .. } = o.body else {
                                return Posted::Done;
                            };
                            if offset + len >= total {
                                o.posted = true;
                            }
                        }
                        Posted::Done
                    }
                    Err(e) if e.code() == Errno::EAGAIN => {
                        if let Some(o) = state.ops[i as usize].as_mut() {
                            o.hdrs.pop();
                            o.bounce.truncate(bounced);
                        }
                        Posted::Blocked
                    }
                    Err(e) => self.post_failed(active, state, conn_id, e.code()),
                }
            }
            Transmit::Rts { hdr, op, .. } => {
                let Some(i) = state.op_index(op) else {
                    return Posted::Done;
                };
                self.post_rts(active, state, i, conn_id, hdr)
            }
            Transmit::Forward { op } => {
                let Some(i) = state.op_index(op) else {
                    return Posted::Done;
                };
                if let Some(o) = state.ops[i as usize].as_mut() {
                    o.started = true;
                }
                let ctx = mk_ctx(K_TX, i, (op.0 >> 32) as u32);
                self.post_fwd(active, state, i, ctx)
            }
        }
    }

    pub(super) fn fail_op(&self, active: &Active, state: &mut EpState, i: u32, e: Errno) -> Posted {
        if is_conn_err(e) {
            if let Some(conn_id) = state
                .ops
                .get(i as usize)
                .and_then(Option::as_ref)
                .map(|o| o.conn)
            {
                self.fail_conn(active, state, conn_id, Errno::ECONNRESET);
                return Posted::Gone;
            }
        }
        if let Some(op) = state.free_op(i) {
            active.complete_tx(op.ctx, op.flags, op.want, Some(e));
        }
        Posted::Done
    }

    /// Post one packet of send `i` on connection `conn_id`: the header `h` and the bytes
    /// `range` of the send's data, straight from the application's buffers when the
    /// core takes that many iov entries, else gathered into a bounce buffer. The header
    /// box and any bounce buffer stay in the operation until it completes (the core
    /// holds pointers to them).
    fn post_packet(
        &self,
        state: &mut EpState,
        i: u32,
        conn_id: ConnId,
        ctx: usize,
        h: proto::Hdr,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        let core_iov = self.dom.core_info.tx_attr.iov_limit.max(1);
        let Some(op) = state.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Ok(());
        };
        let Body::Send { iov, .. } = op.body else {
            return Ok(());
        };
        let mut hb = Box::new([0u8; HDR_LEN]);
        h.write(&mut hb);
        let src: IoList = match &op.owned {
            Some(v) => IoList::one(v.as_ptr() as usize, v.len()),
            None => iov,
        };
        let (off, n) = (range.start, range.len());
        let part = src.sub(off, n);
        let mut v: Vec<Iov> = Vec::with_capacity(IOV_LIMIT + 1);
        v.push(Iov {
            base: hb.as_ptr() as *mut c_void,
            len: HDR_LEN,
        });
        if part.len() < core_iov {
            for &(a, l) in part.slice() {
                v.push(Iov {
                    base: a as *mut c_void,
                    len: l,
                });
            }
        } else {
            let mut b = vec![0u8; n];
            // SAFETY: the application's buffers are readable for their lengths; `b` has
            // `n` bytes.
            unsafe { src.gather(off, b.as_mut_ptr(), n) };
            v.push(Iov {
                base: b.as_ptr() as *mut c_void,
                len: n,
            });
            op.bounce.push(b);
        }
        op.hdrs.push(hb);
        match self.tx_ep(state, conn_id) {
            // SAFETY: the header box and bounce buffers live in the op until its
            // completion; the application's buffers by the C contract.
            Some(ep) => unsafe {
                ep.sendv(v.as_ptr(), std::ptr::null(), v.len(), ADDR_UNSPEC, ctx)
            },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        }
    }

    /// Register the buffers of a rendezvous send `op` with the core for remote read
    /// (done when it is submitted, so a refused registration fails only that send).
    pub(super) fn register_rndv(&self, op: &mut TxOp) -> Result<()> {
        let src: IoList = match (&op.owned, &op.body) {
            (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
            (None, Body::Send { iov, .. }) => *iov,
            _ => return Ok(()),
        };
        // Empty iov entries are not registered: nothing is read from them (and a
        // zero-length registration is refused by tcp with FI_EINVAL).
        for &(a, l) in src.slice().iter().filter(|&&(_, l)| l > 0) {
            // SAFETY: the buffer stays valid until the operation completes (C API
            // contract), and the registration is closed at completion.
            let m = unsafe {
                self.dom.core.mr_reg(
                    a as *const u8,
                    l,
                    OpFlags::REMOTE_READ,
                    0,
                    self.dom.internal_key(),
                    0,
                )
            }?;
            op.mrs.push(m);
        }
        Ok(())
    }

    /// Post the rendezvous request of send `i` (header `h` from the engine) on
    /// connection `conn_id`: its body names the buffers registered at submission.
    fn post_rts(
        &self,
        active: &Active,
        state: &mut EpState,
        i: u32,
        conn_id: ConnId,
        h: proto::Hdr,
    ) -> Posted {
        let Some(op) = state.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Posted::Done;
        };
        op.started = true;
        let ctx = mk_ctx(K_TX, i, op.gen);
        let src: IoList = match (&op.owned, &op.body) {
            (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
            (None, Body::Send { iov, .. }) => *iov,
            _ => return Posted::Done,
        };
        let mut rts = Rts {
            id: op_id(i, op.gen).0,
            iov: [(0, 0, 0); proto::RTS_IOVS],
            n: src.len(),
        };
        let mut regs = op.mrs.iter();
        for (k, &(a, l)) in src.slice().iter().enumerate() {
            let key = if l == 0 {
                0
            } else {
                regs.next().map_or(0, |m| m.key())
            };
            let addr = if self.core_virt { a as u64 } else { 0 };
            rts.iov[k] = (addr, l as u64, key);
        }
        let mut b = h.bytes().to_vec();
        rts.encode(&mut b);
        let ptr = b.as_ptr();
        let blen = b.len();
        op.bounce.push(b);
        let r = match self.tx_ep(state, conn_id) {
            // SAFETY: the packet lives in the op until completion.
            Some(ep) => unsafe { ep.send(ptr, blen, std::ptr::null_mut(), ADDR_UNSPEC, ctx) },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        };
        match r {
            Ok(()) => {
                state.posted_last(i);
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                if let Some(op) = state.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.bounce.pop();
                }
                Posted::Blocked
            }
            Err(e) => self.post_failed(active, state, conn_id, e.code()),
        }
    }

    /// The core refused a packet of connection `conn_id` for good (`e`, not `FI_EAGAIN`).
    /// The engine counted it sent (credits, acknowledgements): the connection's state
    /// is off from here, so the connection goes.
    fn post_failed(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        e: Errno,
    ) -> Posted {
        let code = if is_conn_err(e) { Errno::ECONNRESET } else { e };
        self.fail_conn(active, state, conn_id, code);
        Posted::Gone
    }
}
