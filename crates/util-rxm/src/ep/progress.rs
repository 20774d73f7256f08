//! Progress: reading the core CQ and EQ and dispatching their completions and events.
//!
//! # Invariants
//!
//! - A core completion names (kind, index, generation); one for a freed or reused slot
//!   is ignored.

use super::*;

// ---------------------------------------------------------------------------------------
// Progress.

impl Shared {
    pub(super) fn progress_cq(&self, active: &Active, state: &mut EpState) -> usize {
        let mut n = 0;
        // Bounded work per call, so one busy endpoint cannot starve the others.
        for _ in 0..CQ_ROUNDS {
            match self.core_cq.read(&mut state.cq_buf.0) {
                Ok(k) => {
                    n += k;
                    for j in 0..k.min(CQ_BATCH) {
                        let e = state.cq_buf.0[j];
                        self.on_completion(active, state, &e, None);
                    }
                    if k < CQ_BATCH {
                        break;
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => match self.core_cq.readerr_owned(0) {
                    Ok(err) => {
                        n += 1;
                        let entry = CqTaggedEntry {
                            op_context: err.op_context,
                            flags: err.flags,
                            len: err.len,
                            buf: std::ptr::null_mut(),
                            data: err.data,
                            tag: err.tag,
                        };
                        let code = if err.err == Errno(0) {
                            Errno::EIO
                        } else {
                            err.err
                        };
                        self.on_completion(active, state, &entry, Some(code));
                    }
                    Err(_) => break,
                },
                Err(_) => break,
            }
        }
        n
    }

    pub(super) fn on_completion(
        &self,
        active: &Active,
        state: &mut EpState,
        e: &CqTaggedEntry,
        err: Option<Errno>,
    ) {
        if e.op_context == 0 {
            // Remote CQ data of an RMA write at this target.
            if err.is_none() {
                self.remote_cq_data(active, e);
            }
            return;
        }
        let (kind, idx, gen) = split_ctx(e.op_context);
        match kind {
            K_RX => {
                let slot = (idx >> 12) as usize;
                let b = (idx & 0xfff) as usize;
                let Some(m) = state.msgs.get(slot).and_then(Option::as_ref) else {
                    return;
                };
                if m.gen != gen {
                    return;
                }
                let conn_id = m.conn;
                match err {
                    Some(Errno::ETRUNC) => {
                        // Larger than the agreed buffer size: not an rxm peer.
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "closing a connection after an oversized packet"
                        );
                        self.fail_conn(active, state, conn_id, Errno::EPROTO);
                        return;
                    }
                    // Flushed by a closing connection; the EQ reports the reason.
                    Some(_) => return,
                    None => {}
                }
                let released = self.bounce.released(e.flags);
                if OpFlags::from_bits_truncate(e.flags).contains(OpFlags::REMOTE_WRITE) {
                    // A write with immediate data that consumed this bounce buffer (a
                    // core with `FI_RX_CQ_DATA`, as verbs): no packet, just the data.
                    self.remote_cq_data(active, e);
                    if released {
                        self.repost(state, slot, b);
                    }
                    return;
                }
                let Some(buf) = m.bufs.get(b) else {
                    return;
                };
                let Some(pkt) = self.bounce.packet(buf, e) else {
                    ofi_core::ofi_warn!(
                        NAME,
                        "ep_data",
                        "closing a connection after a packet the core placed outside its \
                         bounce buffer or longer than {} bytes",
                        self.bounce.packet_max
                    );
                    self.fail_conn(active, state, conn_id, Errno::EPROTO);
                    return;
                };
                // SAFETY: the packet lies in a bounce buffer, a `Box<[u8]>` owned by MSG
                // slot `slot`; its heap bytes never move (growing `state.msgs` moves only
                // the box pointer) and are freed only when the slot is dropped.
                // `handle_packet` never drops MSG slots (it reports a broken connection
                // by returning an error; `fail_conn` runs after it returns), and the core
                // does not write this packet's bytes again until the buffer is posted
                // again below. The raw slice only detaches the borrow from `state` so
                // `handle_packet` can take it.
                let pkt: &[u8] = unsafe { std::slice::from_raw_parts(pkt.as_ptr(), pkt.len()) };
                match self.handle_packet(active, state, conn_id, pkt) {
                    Ok(()) => {
                        if released {
                            self.repost(state, slot, b);
                        }
                        self.pump_conn(active, state, conn_id);
                    }
                    Err(err) => {
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "closing a connection after a malformed packet: {err}"
                        );
                        self.fail_conn(active, state, conn_id, Errno::EPROTO);
                    }
                }
            }
            // A core transmit (or a rendezvous read's piece) completed: one fewer
            // outstanding, and the operation finished if that was its last. A
            // completion of a freed or reused slot finds nothing.
            K_TX => {
                if let Some(op) = state.live_op(idx, gen) {
                    core_completed(&mut op.outstanding, &mut op.err, err.map(conn_err));
                    self.maybe_finish(active, state, idx);
                }
            }
            K_RD => {
                if let Some(read) = state.live_read(idx, gen) {
                    core_completed(&mut read.outstanding, &mut read.err, err.map(conn_err));
                    self.maybe_finish_read(active, state, idx);
                }
            }
            _ => {}
        }
    }

    /// Reports the remote CQ data of an RMA write at this target (a core completion
    /// with `FI_REMOTE_CQ_DATA`) on the receive CQ and counter.
    fn remote_cq_data(&self, active: &Active, e: &CqTaggedEntry) {
        if !OpFlags::from_bits_truncate(e.flags).contains(OpFlags::REMOTE_CQ_DATA) {
            return;
        }
        if let Some(b) = &active.rxcq {
            let _ = b.cq.push_entry(&CqTaggedEntry {
                op_context: 0,
                flags: e.flags,
                len: 0,
                buf: std::ptr::null_mut(),
                data: e.data,
                tag: 0,
            });
        }
        if let Some(c) = &active.rxcntr {
            c.inc();
        }
    }

    pub(super) fn progress_all(&self, active: &Active, state: &mut EpState) -> usize {
        // Connection events are read every EQ_INTERVAL (the clock is looked at every
        // EQ_CHECK_EVERY calls), or at every call while a handshake or timer is pending
        // (reading the core EQ costs the core's CM poll).
        state.polls = state.polls.wrapping_add(1);
        let timers = state.next_timer.is_some();
        let mut n = 0;
        let mut now = None;
        if timers || state.polls.is_multiple_of(EQ_CHECK_EVERY) {
            let t = Instant::now();
            now = Some(t);
            if timers || t.duration_since(state.last_eq) >= EQ_INTERVAL {
                state.last_eq = t;
                n += self.progress_eq(active, state);
            }
        }
        n += self.progress_cq(active, state);
        if let (Some(t), Some(now)) = (state.next_timer, now) {
            let now = state.clock_at(now);
            if t <= now {
                state.conn_mgr.handle_timeout(now);
                self.run_actions(active, state);
                n += 1;
            }
        }
        if !state.rd_waiting.is_empty() {
            let w: Vec<u32> = std::mem::take(&mut state.rd_waiting);
            for i in w {
                self.pump_read(active, state, i);
            }
        }
        // Queued work on connected peers (credits may have come back).
        for index in 0..state.conns.len() {
            let conn_id = ConnId::from_index(index);
            if Self::conn_busy(state, conn_id) {
                self.pump_conn(active, state, conn_id);
            }
        }
        n
    }
}
