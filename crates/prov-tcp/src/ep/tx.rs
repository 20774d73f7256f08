//! Transmit: sends, RMA and atomic requests of this side, responses, and the socket
//! writes.
//!
//! An operation is one header block (header plus remote iovs) and a payload given as up
//! to four segments. When nothing is queued it is written at once with one `sendmsg`
//! of header and payload; what the kernel did not take is queued (an inject's remainder
//! copied into the queue entry, other payloads by reference: the application keeps
//! them valid until completion) and progress writes it later.
//!
//! Invariants: `EpState::tx` keeps the stream's order (the head may be partly written,
//! `sent` bytes of it); queued and pending operations together stay under `tx_size`;
//! an operation waiting for a response (read, atomic, acknowledged write or send) is in
//! `EpState::pending` under an id no other pending operation has, and leaves it when its
//! response comes or the connection ends.
//!
//! Nothing here panics on application input: sizes over the limits are
//! `FI_EMSGSIZE` / `FI_EINVAL`.

use super::*;

/// Write `segs` as key-0 iovs into the header block after `skip` iovs; the block's
/// length.
pub(super) fn encode_local_iovs(out: &mut [u8; HDR_MAX], skip: usize, segs: &Segs) -> usize {
    let mut at = HDR_LEN + skip * RMA_IOV_LEN;
    for &(addr, len) in segs.segs() {
        RmaIov {
            addr: addr as u64,
            len: len as u64,
            key: 0,
        }
        .write(&mut out[at..at + RMA_IOV_LEN]);
        at += RMA_IOV_LEN;
    }
    at
}

pub(super) fn encode_hdr(h: &Hdr, out: &mut [u8; HDR_MAX]) {
    let mut b = [0u8; HDR_LEN];
    h.encode(&mut b);
    out[..HDR_LEN].copy_from_slice(&b);
}

pub(super) fn sock_fail(e: io::Error) -> Fail {
    match e.raw_os_error() {
        Some(libc::ECONNRESET) | Some(libc::EPIPE) => Fail::Closed,
        Some(c) => Fail::Error(Errno(c), e.to_string()),
        None => Fail::Error(Errno::EIO, e.to_string()),
    }
}

/// Write as much of `op` as the socket takes; `Ok(true)` when all of it is written.
pub(super) fn write_op(sock: &Sock, op: &mut TxOp) -> io::Result<bool> {
    loop {
        let mut iov = [iovec(0, 0); 1 + SEGS_MAX];
        let mut n = 0;
        let mut off = op.sent;
        if off < op.hdr_len {
            iov[0] = iovec(op.hdr.as_ptr() as usize + off, op.hdr_len - off);
            n = 1;
            off = 0;
        } else {
            off -= op.hdr_len;
        }
        let segs = op.pl.segs();
        n += segs.iovecs(off, usize::MAX, &mut iov[n..]);
        if n == 0 {
            return Ok(true);
        }
        // SAFETY: the header lives in `op`; payload segments are the application's
        // buffers (valid until completion by the API contract) or `op`'s inline copy.
        match unsafe { sock.writev(&iov[..n]) } {
            Ok(w) => {
                op.sent += w;
                if op.sent >= op.total {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

impl EpInner {
    /// Write queued operations; the number completed.
    pub(super) fn flush(&self, state: &mut EpState) -> std::result::Result<usize, Fail> {
        let mut done = 0;
        while let Some(op) = state.tx.front_mut() {
            let Some(sock) = state.sock.as_ref() else {
                return Ok(done);
            };
            match write_op(sock, op) {
                Ok(true) => {}
                Ok(false) => return Ok(done),
                Err(e) => return Err(sock_fail(e)),
            }
            if let Some(op) = state.tx.pop_front() {
                if let Some(c) = op.comp {
                    self.comp_ok(&state.b, &c);
                }
            }
            done += 1;
        }
        Ok(done)
    }

    /// Post a transmit: write at once when nothing is queued, else queue.
    ///
    /// `op` is taken by reference (and moved into the queue only when it has to wait):
    /// passed by value it cost a `memcpy` of the whole entry per send (callgrind).
    pub(super) fn post_tx(&self, state: &mut EpState, op: &mut TxOp, inject: bool) -> Result<()> {
        if state.tx.is_empty() {
            let Some(sock) = state.sock.as_ref() else {
                return Err(Error::code_only(Errno::ENOTCONN));
            };
            match write_op(sock, op) {
                Ok(true) => {
                    if let Some(c) = op.comp {
                        self.comp_ok(&state.b, &c);
                    }
                    return Ok(());
                }
                Ok(false) => {}
                Err(e) => {
                    let f = sock_fail(e);
                    self.fail_after_write(state, f);
                    return Err(Error::new(
                        Errno::ECONNRESET,
                        format!("{NAME}: connection lost"),
                    ));
                }
            }
        }
        if inject {
            if let Payload::Segs(s) = op.pl {
                let mut b = [0u8; INLINE_MAX];
                let n = s.total().unwrap_or(0).min(INLINE_MAX);
                let mut off = 0;
                for &(base, len) in s.segs() {
                    let take = len.min(n - off);
                    // SAFETY: the inject buffer is valid during the call (caller's
                    // contract); take ≤ its length; b has room.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base as *const u8,
                            b.as_mut_ptr().add(off),
                            take,
                        )
                    };
                    off += take;
                }
                op.pl = Payload::Inline(b, n);
            }
        }
        let queued = TxOp {
            hdr: op.hdr,
            hdr_len: op.hdr_len,
            pl: std::mem::replace(&mut op.pl, Payload::Segs(Segs::default())),
            total: op.total,
            sent: op.sent,
            comp: op.comp.take(),
        };
        state.tx.push_back(queued);
        if self.dom.engine.mode() == ofi_kit::progress::ProgressMode::Auto {
            self.dom.engine.kick();
        }
        Ok(())
    }

    pub(super) fn check_tx(&self, state: &EpState) -> Result<()> {
        if !state.enabled {
            return Err(Error::code_only(Errno::EOPBADSTATE));
        }
        match state.conn {
            Conn::Connected => {}
            Conn::Connecting { .. } | Conn::AwaitResp { .. } | Conn::Accepting => {
                return Err(Error::code_only(Errno::EAGAIN))
            }
            _ => return Err(Error::code_only(Errno::ENOTCONN)),
        }
        // Outstanding transmits: queued bytes and operations waiting for their answer
        // (reads, atomics, acknowledged writes, same-host and delivery-complete sends,
        // whose bytes left long ago): `tx_size` bounds them all.
        if state.tx.len() + state.pending.len() >= self.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    /// A send (message or tagged message) of `req`.
    pub(super) fn send_common(&self, req: &SendRequest) -> Result<()> {
        let segs = Segs::from_list(&req.iov);
        // An `fi_inject*` call (`silent`: no completion) or a message call with
        // `FI_INJECT` (the payload is copied if it has to wait).
        let silent = req.inject;
        let inject = silent || req.flags.contains(OpFlags::INJECT);
        let (data, tag, ctx, flags) = (req.data, req.tag, req.context, req.flags);
        let len = segs.total()?;
        if len > self.max_msg {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "{NAME}: message of {len} bytes (max_msg_size {})",
                    self.max_msg
                ),
            ));
        }
        // Kit's dispatch checked an inject's size (`DataPath::check_inject`).
        let mut state = lock(&self.state);
        self.check_tx(&state)?;
        let mut h = Hdr::new(if tag.is_some() { Op::Tagged } else { Op::Msg });
        h.size = len as u64;
        h.tag = tag.unwrap_or(0);
        if let Some(d) = data {
            h.flags |= FLAG_CQ_DATA;
            h.data = d;
        }
        let comp = Comp {
            ctx,
            flags: req.completion_flags().bits(),
            len,
            buf: if segs.n > 0 { segs.base() } else { 0 },
            report: !silent && state.b.tx_reports(flags),
            cntr: CounterKind::Send,
        };
        let mut tx_comp = Some(comp);
        // Same-host: a descriptor of the buffers instead of the payload.
        let local = state.local.tx_ok && !inject && !silent && len >= self.cma_threshold;
        if local {
            h.flags |= FLAG_LOCAL;
            h.rma_cnt = segs.n as u8;
        }
        if (flags.contains(OpFlags::DELIVERY_COMPLETE) && !silent) || local {
            h.flags |= FLAG_ACK_REQ;
            let id = state.take_op_id();
            h.id = id.0;
            state.pending.push_back(Pending {
                id,
                comp,
                kind: PendKind::Ack,
                read: None,
            });
            tx_comp = None;
        }
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            pl: Payload::Segs(segs),
            total: HDR_LEN + len,
            sent: 0,
            comp: tx_comp,
        };
        encode_hdr(&h, &mut op.hdr);
        if local {
            op.hdr_len = encode_local_iovs(&mut op.hdr, 0, &segs);
            op.total = op.hdr_len;
            op.pl = Payload::Segs(Segs::default());
        }
        let r = self.post_tx(&mut state, &mut op, inject);
        if r.is_err() && h.flags & FLAG_ACK_REQ != 0 {
            let id = OpId(h.id);
            state.pending.retain(|p| p.id != id);
        }
        r
    }

    /// An RMA read or write of `req`.
    pub(super) fn rma_common(&self, req: &RmaRequest<'_>) -> Result<()> {
        let write = !req.is_read();
        let segs = Segs::from_iov(req.local.bufs)?;
        let rma = req.remote_iov;
        let silent = req.inject;
        let inject = silent || req.flags.contains(OpFlags::INJECT);
        let (data, ctx, flags) = (req.data, req.context, req.flags);
        if rma.is_empty() || rma.len() > proto::RMA_IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: {} remote iovs (1 to {})",
                    rma.len(),
                    proto::RMA_IOV_LIMIT
                ),
            ));
        }
        let len = segs.total()?;
        let rlen = rma
            .iter()
            .try_fold(0usize, |a, r| a.checked_add(r.len))
            .ok_or_else(|| {
                Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: remote iov lengths overflow"),
                )
            })?;
        if len != rlen {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: local ({len}) and remote ({rlen}) lengths differ"),
            ));
        }
        if len > self.max_msg {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: RMA larger than max_msg_size"),
            ));
        }
        if inject && len > self.inject_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: inject larger than inject_size"),
            ));
        }
        let mut state = lock(&self.state);
        self.check_tx(&state)?;
        // Same-host: the target copies into our buffers (remote and local iovs share the
        // header's four slots).
        let local = !write
            && state.local.tx_ok
            && len >= self.cma_threshold
            && segs.n > 0
            && rma.len() + segs.n <= proto::RMA_IOV_LIMIT;
        let mut h = Hdr::new(if local {
            Op::LocalReadReq
        } else if write {
            Op::Write
        } else {
            Op::ReadReq
        });
        h.rma_cnt = rma.len() as u8;
        h.size = if write { len as u64 } else { 0 };
        if let Some(d) = data {
            h.flags |= FLAG_CQ_DATA;
            h.data = d;
        }
        let id = state.take_op_id();
        h.id = id.0;
        let (f, cntr) = if write {
            (OpFlags::RMA | OpFlags::WRITE, CounterKind::Write)
        } else {
            (OpFlags::RMA | OpFlags::READ, CounterKind::Read)
        };
        let comp = Comp {
            ctx,
            flags: f.bits(),
            len,
            buf: if segs.n > 0 { segs.base() } else { 0 },
            report: !silent && state.b.tx_reports(flags),
            cntr,
        };
        state.pending.push_back(Pending {
            id,
            comp,
            kind: if write { PendKind::Ack } else { PendKind::Read },
            read: (!write).then_some(segs),
        });
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN + rma.len() * RMA_IOV_LEN,
            pl: Payload::Segs(if write { segs } else { Segs::default() }),
            total: 0,
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        for (i, r) in rma.iter().enumerate() {
            let at = HDR_LEN + i * RMA_IOV_LEN;
            RmaIov {
                addr: r.addr,
                len: r.len as u64,
                key: r.key,
            }
            .write(&mut op.hdr[at..at + RMA_IOV_LEN]);
        }
        if local {
            h.tag = rma.len() as u64;
            h.rma_cnt = (rma.len() + segs.n) as u8;
            encode_hdr(&h, &mut op.hdr);
            op.hdr_len = encode_local_iovs(&mut op.hdr, rma.len(), &segs);
        }
        op.total = op.hdr_len + if write { len } else { 0 };
        let r = self.post_tx(&mut state, &mut op, inject);
        if r.is_err() {
            state.pending.retain(|p| p.id != id);
        }
        r
    }

    /// Queue a response (no completion of its own).
    pub(super) fn respond(state: &mut EpState, h: Hdr, pl: Segs) {
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            pl: Payload::Segs(pl),
            total: HDR_LEN + h.size as usize,
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        state.tx.push_back(op);
    }

    /// Post the atomic `req`: its operands (and compare values) gathered from the
    /// application's buffers, the original values (fetch / compare) written to its
    /// result buffers.
    ///
    /// # Safety
    /// Each operand and compare ioc is readable for its count of elements; each result
    /// ioc stays writable for its count until the operation completes (the C API's
    /// contract of the atomic calls).
    pub(super) unsafe fn atomic_common(&self, req: &AtomicRequest<'_>) -> Result<()> {
        let (kind, op, dt) = (req.kind, req.op, req.datatype);
        let (compare, result) = (req.compare.bufs, req.result.bufs);
        let (ctx, flags, silent) = (req.context, req.flags, req.inject);
        let esize = dt.size();
        if silent && req.operands.count().saturating_mul(esize) > self.inject_size {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: inject_atomic over inject_size"),
            ));
        }
        // A fetch of FI_ATOMIC_READ may come without operands: zeros of the remote
        // count go in their place (the bytes on the wire are the same either way).
        let zeros: Vec<u8>;
        let zero_ioc: [Ioc; 1];
        let operand: &[Ioc] = if kind == AtomicKind::Fetch && req.operands.bufs.is_empty() {
            let n = req.remote.count.saturating_mul(esize);
            if n > self.max_msg {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: atomic of {} elements", req.remote.count),
                ));
            }
            zeros = vec![0u8; n];
            zero_ioc = [Ioc {
                addr: zeros.as_ptr() as *mut c_void,
                count: req.remote.count,
            }];
            &zero_ioc
        } else {
            req.operands.bufs
        };
        let rma = std::slice::from_ref(&req.remote);
        let max = ofi_kit::atomic::valid(op, dt, kind)?;
        let esize = dt.size();
        let count_of = |v: &[Ioc]| -> Result<usize> {
            v.iter()
                .try_fold(0usize, |a, i| a.checked_add(i.count))
                .ok_or_else(|| Error::new(Errno::EINVAL, format!("{NAME}: atomic counts overflow")))
        };
        let count = count_of(operand)?;
        if operand.len() > SEGS_MAX || rma.len() != 1 || rma[0].count != count {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: an atomic takes up to 4 iocs and one remote ioc of the same count"
                ),
            ));
        }
        if count == 0 || count > max || count.saturating_mul(esize) > self.max_msg {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: atomic of {count} elements"),
            ));
        }
        if kind == AtomicKind::Compare && count_of(compare)? != count {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: compare count differs"),
            ));
        }
        let len = count * esize;
        let mut res = Segs::default();
        if kind != AtomicKind::Base {
            if result.len() > SEGS_MAX || count_of(result)? != count {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: bad result iocs"),
                ));
            }
            for r in result {
                res.push(r.addr as usize, r.count * esize);
            }
        }
        let cmp: &[Ioc] = if kind == AtomicKind::Compare {
            compare
        } else {
            &[]
        };
        let mut pl = Vec::with_capacity(len * if cmp.is_empty() { 1 } else { 2 });
        for v in operand.iter().chain(cmp) {
            let n = v.count * esize;
            if n > 0 {
                if v.addr.is_null() {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!("{NAME}: null atomic buffer"),
                    ));
                }
                // SAFETY: the application's ioc is valid for count elements (API contract).
                pl.extend_from_slice(unsafe { std::slice::from_raw_parts(v.addr as *const u8, n) });
            }
        }
        let mut state = lock(&self.state);
        self.check_tx(&state)?;
        let mut h = Hdr::new(match kind {
            AtomicKind::Base => Op::Atomic,
            AtomicKind::Fetch => Op::AtomicFetch,
            AtomicKind::Compare => Op::AtomicCompare,
        });
        h.rma_cnt = 1;
        h.atomic_op = op.to_raw() as u8;
        h.datatype = dt.to_raw() as u8;
        h.size = pl.len() as u64;
        let id = state.take_op_id();
        h.id = id.0;
        let (f, cntr) = if kind == AtomicKind::Base {
            (OpFlags::ATOMIC | OpFlags::WRITE, CounterKind::Write)
        } else {
            (OpFlags::ATOMIC | OpFlags::READ, CounterKind::Read)
        };
        let comp = Comp {
            ctx,
            flags: f.bits(),
            len: 0,
            buf: 0,
            report: !silent && state.b.tx_reports(flags),
            cntr,
        };
        state.pending.push_back(Pending {
            id,
            comp,
            kind: PendKind::Atomic,
            read: (kind != AtomicKind::Base).then_some(res),
        });
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN + RMA_IOV_LEN,
            total: HDR_LEN + RMA_IOV_LEN + pl.len(),
            pl: Payload::Owned(pl),
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        RmaIov {
            addr: rma[0].addr,
            len: len as u64,
            key: rma[0].key,
        }
        .write(&mut op.hdr[HDR_LEN..HDR_LEN + RMA_IOV_LEN]);
        let r = self.post_tx(&mut state, &mut op, false);
        if r.is_err() {
            state.pending.retain(|p| p.id != id);
        }
        r
    }

    pub(super) fn atomic_valid(
        &self,
        dt: Datatype,
        op: AtomicOp,
        kind: AtomicKind,
    ) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(self.max_msg / dt.size().max(1)))
    }
}
