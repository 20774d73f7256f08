//! Transmit paths: control packets, credits, and the three ways a message goes —
//! eager (one packet), segmented (SAR, bounce-buffer-sized segments) and rendezvous
//! (an RTS the receiver answers by reading the buffers).
//!
//! # Invariants
//!
//! - A message packet (eager, first segment, RTS) goes only with a credit taken from its
//!   connection; a failed post gives the credit back.
//! - Operations to one peer leave in the order submitted (a blocked one blocks those
//!   queued after it).

use super::*;

// ---------------------------------------------------------------------------------------
// Transmit.

/// What posting an operation did.
pub(super) enum Posted {
    /// Fully handed to the core (or completed).
    Done,
    /// Not (fully) posted: no credit or the core queue is full; try again later.
    Blocked,
}

impl Shared {
    pub(super) fn tx_ep<'a>(&self, st: &'a St, c: usize) -> Option<&'a CoreEp> {
        let slot = st.conns.get(c)?.as_ref()?.tx?;
        st.msgs.get(slot)?.as_ref().map(|m| &m.ep)
    }

    /// Send a control header (no credit needed).
    pub(super) fn send_ctrl(&self, st: &mut St, c: usize, mut h: Hdr) {
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return;
        };
        if conn.tx.is_none() {
            return;
        }
        h.credits = conn.flow.piggyback();
        if !conn.ctrl.is_empty() {
            conn.ctrl.push_back(h);
            return;
        }
        let b = h.bytes();
        let r = match self.tx_ep(st, c) {
            // SAFETY: `b` is valid for the call; inject copies it.
            Some(ep) => unsafe { ep.inject_raw(b.as_ptr(), HDR_LEN, ADDR_UNSPEC) },
            None => return,
        };
        if let Err(e) = r {
            if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
                if e.code() == Errno::EAGAIN {
                    conn.ctrl.push_back(h);
                } else {
                    ofi_core::ofi_info!(NAME, "ep_data", "control packet: {e}");
                }
            }
        }
    }

    pub(super) fn flush_ctrl(&self, st: &mut St, c: usize) {
        loop {
            let Some(h) = st
                .conns
                .get_mut(c)
                .and_then(Option::as_mut)
                .and_then(|x| x.ctrl.front().copied())
            else {
                return;
            };
            let b = h.bytes();
            let r = match self.tx_ep(st, c) {
                // SAFETY: as in send_ctrl.
                Some(ep) => unsafe { ep.inject_raw(b.as_ptr(), HDR_LEN, ADDR_UNSPEC) },
                None => return,
            };
            match r {
                Err(e) if e.code() == Errno::EAGAIN => return,
                _ => {
                    if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
                        conn.ctrl.pop_front();
                    }
                }
            }
        }
    }

    /// Return credits to `c` when enough are owed.
    pub(super) fn maybe_credit(&self, st: &mut St, c: usize) {
        let grant = self.settings.credits as u32;
        if st
            .conns
            .get(c)
            .and_then(Option::as_ref)
            .is_some_and(|x| x.flow.credit_due(grant) && x.tx.is_some())
        {
            self.send_ctrl(st, c, Control::credit());
        }
    }

    /// Post queued operations of `c` in order while possible.
    pub(super) fn pump_conn(&self, act: &Active, st: &mut St, c: usize) {
        // The common case after a packet: nothing queued, no credit due.
        let grant = self.settings.credits as u32;
        let Some(conn) = st.conns.get(c).and_then(Option::as_ref) else {
            return;
        };
        if conn.queue.is_empty() && conn.ctrl.is_empty() && !conn.flow.credit_due(grant) {
            return;
        }
        self.flush_ctrl(st, c);
        while let Some(&i) = st
            .conns
            .get(c)
            .and_then(Option::as_ref)
            .and_then(|x| x.queue.front())
        {
            if st.conns[c].as_ref().is_some_and(|x| x.tx.is_none()) {
                break;
            }
            match self.try_post(act, st, i) {
                Posted::Done => {
                    if let Some(conn) = st.conns[c].as_mut() {
                        conn.queue.pop_front();
                    }
                }
                Posted::Blocked => break,
            }
        }
        self.maybe_credit(st, c);
    }

    /// Take a credit of `c` (with the owed credits to piggyback); None without credit.
    pub(super) fn take_credit(st: &mut St, c: usize) -> Option<u16> {
        let conn = st.conns.get_mut(c)?.as_mut()?;
        if !conn.flow.take() {
            return None;
        }
        Some(conn.flow.piggyback())
    }

    pub(super) fn untake_credit(st: &mut St, c: usize, give: u16) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.flow.untake();
            conn.flow.unpiggyback(give);
        }
    }

    /// Try to post operation `i` (its connection is up).
    pub(super) fn try_post(&self, act: &Active, st: &mut St, i: u32) -> Posted {
        let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
            return Posted::Done;
        };
        let c = op.conn;
        let gen = op.gen;
        let ctx = mk_ctx(K_TX, i, gen);
        match &op.body {
            Body::Fwd(_) => self.post_fwd(act, st, i, ctx),
            Body::Send { len, .. } => {
                match Protocol::of(*len, self.settings.eager_limit(), self.settings.sar_limit) {
                    Protocol::Eager | Protocol::Segmented => self.post_message(act, st, i, c, ctx),
                    Protocol::Rendezvous => self.post_rts(act, st, i, c, ctx),
                }
            }
        }
    }

    pub(super) fn fail_op(&self, act: &Active, st: &mut St, i: u32, e: Errno) -> Posted {
        if is_conn_err(e) {
            if let Some(c) = st
                .ops
                .get(i as usize)
                .and_then(Option::as_ref)
                .map(|o| o.conn)
            {
                self.fail_conn(act, st, c, Errno::ECONNRESET);
                return Posted::Done;
            }
        }
        if let Some(op) = st.free_op(i) {
            act.complete_tx(op.ctx, op.flags, op.want, Some(e));
        }
        Posted::Done
    }

    /// Operation `i` (generation `gen`) waits for a delivery acknowledgement on
    /// connection `c`; they come in the order the messages were sent.
    pub(super) fn wait_for_ack(st: &mut St, c: usize, i: u32, gen: u32) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.dc_wait.expect((i, gen));
        }
    }

    /// The peer acknowledges `n` more delivery-complete messages of connection `c`.
    pub(super) fn on_dc_ack(&self, act: &Active, st: &mut St, c: usize, n: u64) -> Result<()> {
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return Ok(());
        };
        // Usually one; the operations are finished after the queue is let go.
        let acked: Vec<(u32, u32)> = conn
            .dc_wait
            .acked(n)
            .map_err(|e| Error::new(e, "delivery acknowledgement of a message never sent"))?
            .collect();
        for (i, gen) in acked {
            if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                if op.gen == gen && op.conn == c && op.await_ack {
                    op.await_ack = false;
                    self.maybe_finish(act, st, i);
                }
            }
        }
        Ok(())
    }

    /// Acknowledge one delivery-complete message taken in from connection `c`.
    pub(super) fn ack_dc(&self, st: &mut St, c: usize) {
        self.send_ctrl(st, c, Control::dc_ack(1));
    }

    /// What a send's packets carry besides its bytes (the headers come from the
    /// protocol's rules, [`MsgMeta`]).
    pub(super) fn send_meta(op: &TxOp) -> MsgMeta {
        match &op.body {
            Body::Send {
                tag, data, tagged, ..
            } => MsgMeta {
                tag: tagged.then_some(*tag),
                data: *data,
                dc: op.dc,
            },
            Body::Fwd(_) => MsgMeta::default(),
        }
    }

    /// Post one packet of send `i` on connection `c`: the header `h` and the bytes
    /// `range` of the send's data, straight from the application's buffers when the
    /// core takes that many iov entries, else gathered into a bounce buffer. The header
    /// box and any bounce buffer stay in the operation until it completes (the core
    /// holds pointers to them).
    fn post_packet(
        &self,
        st: &mut St,
        i: u32,
        c: usize,
        ctx: usize,
        h: Hdr,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        let core_iov = self.dom.core_info.tx_attr.iov_limit.max(1);
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
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
        match self.tx_ep(st, c) {
            // SAFETY: the header box and bounce buffers live in the op until its
            // completion; the application's buffers by the C contract.
            Some(ep) => unsafe {
                ep.sendv(v.as_ptr(), std::ptr::null(), v.len(), ADDR_UNSPEC, ctx)
            },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        }
    }

    /// Post an eager send (one packet) or a segmented one (its segments back to back)
    /// from where it stopped; the first packet takes a credit. The send then waits for
    /// the core's completions, and for the receiver's acknowledgement if it asked for
    /// delivery complete.
    pub(super) fn post_message(
        &self,
        act: &Active,
        st: &mut St,
        i: u32,
        c: usize,
        ctx: usize,
    ) -> Posted {
        let seg = self.settings.eager_limit();
        loop {
            let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
                return Posted::Done;
            };
            let meta = Self::send_meta(op);
            let Body::Send { len, .. } = op.body else {
                return Posted::Done;
            };
            let off = op.sent;
            if off >= len && op.posted {
                return Posted::Done;
            }
            let bounced = op.bounce.len();
            let first = off == 0;
            let give = if first {
                match Self::take_credit(st, c) {
                    Some(g) => g,
                    None => return Posted::Blocked,
                }
            } else {
                st.conns[c].as_mut().map_or(0, |x| x.flow.piggyback())
            };
            let (mut h, n) = if len <= seg {
                (meta.eager(len), len)
            } else {
                meta.segment(off, len, seg)
            };
            let last = off + n >= len;
            h.credits = give;
            let r = self.post_packet(st, i, c, ctx, h, off..off + n);
            match r {
                Ok(()) => {
                    if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                        op.outstanding += 1;
                        op.sent = off + n;
                        if last {
                            op.posted = true;
                            // The receiver acknowledges once the whole message is in:
                            // queued now, the order of the acknowledgements.
                            if op.dc {
                                op.await_ack = true;
                                let gen = op.gen;
                                Self::wait_for_ack(st, c, i, gen);
                            }
                            return Posted::Done;
                        }
                    }
                }
                Err(e) if e.code() == Errno::EAGAIN => {
                    if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                        op.hdrs.pop();
                        op.bounce.truncate(bounced);
                    }
                    if first {
                        Self::untake_credit(st, c, give);
                    } else if let Some(conn) = st.conns[c].as_mut() {
                        conn.flow.unpiggyback(give);
                    }
                    return Posted::Blocked;
                }
                Err(e) => {
                    if first {
                        Self::untake_credit(st, c, give);
                        return self.fail_op(act, st, i, e.code());
                    }
                    // Segments already went: the connection is broken.
                    self.fail_conn(act, st, c, e.code());
                    return Posted::Done;
                }
            }
        }
    }

    pub(super) fn post_rts(
        &self,
        act: &Active,
        st: &mut St,
        i: u32,
        c: usize,
        ctx: usize,
    ) -> Posted {
        // Register the buffers once (on the first try).
        let need_reg = st.ops[i as usize]
            .as_ref()
            .is_some_and(|o| o.mrs.is_empty());
        if need_reg {
            let Some(op) = st.ops.get(i as usize).and_then(Option::as_ref) else {
                return Posted::Done;
            };
            let src: IoList = match (&op.owned, &op.body) {
                (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
                (None, Body::Send { iov, .. }) => *iov,
                _ => return Posted::Done,
            };
            let mut mrs = Vec::new();
            // Empty iov entries are not registered: nothing is read from them (and a
            // zero-length registration is refused by tcp with FI_EINVAL).
            for &(a, l) in src.slice().iter().filter(|&&(_, l)| l > 0) {
                // SAFETY: the buffer stays valid until the operation completes (C API
                // contract), and the registration is closed at completion.
                let r = unsafe {
                    self.dom.core.mr_reg(
                        a as *const u8,
                        l,
                        OpFlags::REMOTE_READ,
                        0,
                        self.dom.internal_key(),
                        0,
                    )
                };
                match r {
                    Ok(m) => mrs.push(m),
                    Err(e) => return self.fail_op(act, st, i, e.code()),
                }
            }
            if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                op.mrs = mrs;
            }
        }
        let Some(give) = Self::take_credit(st, c) else {
            return Posted::Blocked;
        };
        let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) else {
            return Posted::Done;
        };
        let meta = Self::send_meta(op);
        let src: IoList = match (&op.owned, &op.body) {
            (Some(v), _) => IoList::one(v.as_ptr() as usize, v.len()),
            (None, Body::Send { iov, .. }) => *iov,
            _ => return Posted::Done,
        };
        let len = src.total();
        let mut h = meta.rts(len);
        h.credits = give;
        let mut rts = Rts {
            id: (u64::from(op.gen) << 32) | u64::from(i),
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
        let r = match self.tx_ep(st, c) {
            // SAFETY: the packet lives in the op until completion.
            Some(ep) => unsafe { ep.send(ptr, blen, std::ptr::null_mut(), ADDR_UNSPEC, ctx) },
            None => Err(Error::code_only(Errno::ENOTCONN)),
        };
        match r {
            Ok(()) => {
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.outstanding += 1;
                    op.await_done = true;
                    op.posted = true;
                }
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    op.bounce.pop();
                }
                Self::untake_credit(st, c, give);
                Posted::Blocked
            }
            Err(e) => {
                Self::untake_credit(st, c, give);
                self.fail_op(act, st, i, e.code())
            }
        }
    }
}
