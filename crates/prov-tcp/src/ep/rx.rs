//! Receive: reading the stream, matching messages to posted receives, placing
//! payloads, and the completions of receives.
//!
//! Progress reads the 40-byte header, then the remote iovs, then places the payload:
//! a message that matches a posted receive is read with `readv` straight into the
//! receive's buffers (what arrived in the same read-ahead as the header, at most
//! `FI_TCP_READ_AHEAD` bytes, is copied from there, see [`RxStage`]); an unexpected one
//! into an owned buffer the matcher holds (its limits bound the memory: when full, the
//! endpoint stops reading the socket until receives are posted); RMA writes go to the
//! registered region after `MrTable` checks (`target`); read responses into the
//! initiator's buffers. Every round does a bounded amount of work.
//!
//! Invariants: `EpState::rx` says where the next byte of the stream belongs; bytes are
//! consumed in stream order (staged bytes before new reads); a payload is written only
//! into a posted receive's buffers (inside their length), an owned buffer, a region
//! `MrTable` checked, or the buffers of a pending read of this side.
//!
//! Nothing here panics on peer input: malformed headers, unknown operations, lengths
//! over the limits or responses to unknown operations fail the connection with
//! `FI_EPROTO`.

use super::*;

/// Bytes read from the socket ahead of the parser (`FI_TCP_READ_AHEAD` of them), so
/// that a small message — header and payload — costs one `recv` instead of two. Reads
/// for at least that many bytes go straight to their destination (all of them when the
/// read-ahead is 0). Invariant: `start <= end <= buf.len()`;
/// staged bytes are consumed before the socket is read again, so the byte order of
/// the stream is kept. While bytes are staged the socket may not be readable although
/// work is pending, so the endpoint then asks waiters to poll (`wait_fds`).
pub(super) struct RxStage {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl RxStage {
    pub(super) fn new(len: usize) -> RxStage {
        RxStage {
            buf: vec![0u8; len].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Staged bytes not yet consumed.
    pub(super) fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Move up to `n` staged bytes into `dst` (one copy); how many.
    ///
    /// # Safety
    /// `dst` is valid for writes of `n` bytes and does not overlap the staging buffer.
    pub(super) unsafe fn take(&mut self, dst: *mut u8, n: usize) -> usize {
        let k = n.min(self.pending());
        // SAFETY: `start..start + k` lies in `buf`; the caller gives `dst` writable for
        // `n >= k` bytes, and it is not inside `buf` (our own allocation).
        unsafe { std::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.start), dst, k) };
        self.start += k;
        k
    }

    /// Read into `dst` (non-empty): staged bytes first; else, for a `dst` shorter than
    /// the read-ahead, one read-ahead; else the socket directly. `Ok(0)` is the end of
    /// the stream.
    pub(super) fn recv(&mut self, sock: &Sock, dst: &mut [u8]) -> io::Result<usize> {
        if self.pending() > 0 {
            // SAFETY: `dst` is a distinct writable slice of its length.
            return Ok(unsafe { self.take(dst.as_mut_ptr(), dst.len()) });
        }
        if dst.len() >= self.buf.len() {
            return sock.recv(dst);
        }
        let n = sock.recv(&mut self.buf)?;
        self.start = 0;
        self.end = n;
        // SAFETY: as above.
        Ok(unsafe { self.take(dst.as_mut_ptr(), dst.len()) })
    }

    /// Read into the buffers `iov` describes: staged bytes first (scattered in order),
    /// else `readv` on the socket.
    ///
    /// # Safety
    /// Every entry of `iov` is writable for its length.
    pub(super) unsafe fn readv(&mut self, sock: &Sock, iov: &[libc::iovec]) -> io::Result<usize> {
        if self.pending() == 0 {
            // SAFETY: caller's contract.
            return unsafe { sock.readv(iov) };
        }
        let mut done = 0;
        for v in iov {
            if self.pending() == 0 {
                break;
            }
            // SAFETY: our contract: `v` is writable for its length (and an application
            // buffer, not our staging buffer).
            done += unsafe { self.take(v.iov_base.cast(), v.iov_len) };
        }
        Ok(done)
    }
}

pub(super) fn parse_rma(hbuf: &[u8; HDR_MAX], cnt: u8) -> [RmaIov; 4] {
    let mut out = [RmaIov::default(); 4];
    for (i, o) in out.iter_mut().enumerate().take(usize::from(cnt)) {
        let at = HDR_LEN + i * RMA_IOV_LEN;
        *o = RmaIov::from_bytes(&hbuf[at..]).unwrap_or_default();
    }
    out
}

impl EpInner {
    /// Report a posted receive canceled (`fi_cancel`, or the connection ended): an
    /// `FI_ECANCELED` error entry.
    pub(super) fn recv_canceled(b: &Binds, r: &PostedRecv<RBuf>) {
        if let Some(cq) = b.rx_cq() {
            let kind = if r.tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            };
            let mut e = CqError::new(r.ctx, Errno::ECANCELED);
            e.flags = (OpFlags::RECV | kind).bits();
            e.buf = r.buf.segs.base();
            let _ = cq.push_err(e);
        }
    }

    /// Report a finished receive (a CQ entry or a truncation error, and the counter).
    pub(super) fn rx_done(&self, b: &Binds, done: &RxDone) {
        let mut f = OpFlags::RECV | done.flags;
        f |= if done.tag.is_some() {
            OpFlags::TAGGED
        } else {
            OpFlags::MSG
        };
        if done.data.is_some() {
            f |= OpFlags::REMOTE_CQ_DATA;
        }
        if done.olen > 0 {
            if let Some(cq) = b.rx_cq() {
                let mut e = CqError::new(done.ctx, Errno::ETRUNC);
                e.flags = f.bits();
                e.len = done.len;
                e.buf = done.buf;
                e.data = done.data.unwrap_or(0);
                e.tag = done.tag.unwrap_or(0);
                e.olen = done.olen;
                let _ = cq.push_err(e);
            }
            if let Some(c) = b.counter(CounterKind::Recv) {
                c.inc_err();
            }
            return;
        }
        if done.report {
            if let Some(cq) = b.rx_cq() {
                let _ = cq.push_entry(&CqTaggedEntry {
                    op_context: done.ctx,
                    flags: f.bits(),
                    len: done.len,
                    buf: done.buf as *mut c_void,
                    data: done.data.unwrap_or(0),
                    tag: done.tag.unwrap_or(0),
                });
            }
        }
        if let Some(c) = b.counter(CounterKind::Recv) {
            c.inc();
        }
    }

    /// Post the receive `posted`.
    pub(super) fn recv_common(&self, posted: PostedRecv<IoList>) -> Result<()> {
        let segs = Segs::from_list(&posted.buf);
        segs.total()?;
        let flags = posted.flags;
        let mut state = lock(&self.state);
        if !state.enabled {
            return Err(Error::code_only(Errno::EOPBADSTATE));
        }
        let recv = PostedRecv {
            ctx: posted.ctx,
            src: ofi_kit::tagmatch::ANY_SRC,
            tag: posted.tag,
            ignore: posted.ignore,
            flags,
            tagged: posted.tagged,
            buf: RBuf { segs },
            len: posted.len,
        };
        let EpState { matcher, b, .. } = &mut *state;
        let out = matcher.post_recv(recv).map_err(|r| r.error)?;
        match out {
            PostOutcome::Queued => {}
            PostOutcome::Matched { recv, place, msg } => {
                self.deliver_unexpected(b, &recv, place, &msg, false);
            }
            PostOutcome::MultiMatched { buf, msgs } => {
                let released = buf.is_released();
                let recv = buf.recv().clone();
                let last = msgs.len().saturating_sub(1);
                for (i, (place, msg)) in msgs.iter().enumerate() {
                    self.deliver_unexpected(b, &recv, *place, msg, released && i == last);
                }
            }
            PostOutcome::Peeked { recv, msg } => {
                if let Some(cq) = b.rx_cq() {
                    let mut f = OpFlags::RECV | OpFlags::TAGGED;
                    if msg.data.is_some() {
                        f |= OpFlags::REMOTE_CQ_DATA;
                    }
                    let _ = cq.push_entry(&CqTaggedEntry {
                        op_context: recv.ctx,
                        flags: f.bits(),
                        len: msg.len,
                        buf: std::ptr::null_mut(),
                        data: msg.data.unwrap_or(0),
                        tag: msg.tag,
                    });
                }
            }
            PostOutcome::NoMessage { recv } => {
                if let Some(cq) = b.rx_cq() {
                    let mut e = CqError::new(recv.ctx, Errno::ENOMSG);
                    e.flags = (OpFlags::RECV | OpFlags::TAGGED).bits();
                    let _ = cq.push_err(e);
                }
            }
            PostOutcome::Discarded { recv, msg } => {
                if let Some(cq) = b.rx_cq() {
                    let _ = cq.push_entry(&CqTaggedEntry {
                        op_context: recv.ctx,
                        flags: (OpFlags::RECV | OpFlags::TAGGED).bits(),
                        len: 0,
                        buf: std::ptr::null_mut(),
                        data: 0,
                        tag: msg.msg.tag,
                    });
                }
            }
        }
        Ok(())
    }

    /// Copy the unexpected message `msg` into `recv`'s buffers at `place` and report
    /// it (`released`: the last message of a released multi-receive buffer).
    pub(super) fn deliver_unexpected(
        &self,
        b: &Binds,
        recv: &PostedRecv<RBuf>,
        place: Placement,
        msg: &UnexpectedMsg<Vec<u8>>,
        released: bool,
    ) {
        let w = recv.buf.segs.window(place.offset, place.len);
        let n = place.len.min(msg.payload.len());
        // SAFETY: the receive's buffers are valid until its completion (the caller's
        // contract for posted receives); `w` lies inside them.
        unsafe { w.copy_in(&msg.payload[..n]) };
        let done = RxDone {
            ctx: recv.ctx,
            flags: if released {
                OpFlags::MULTI_RECV
            } else {
                OpFlags::empty()
            },
            buf: if w.n > 0 {
                w.base()
            } else {
                recv.buf.segs.base()
            },
            len: n,
            olen: msg.msg.len.saturating_sub(n),
            data: msg.msg.data,
            tag: msg.msg.tagged.then_some(msg.msg.tag),
            report: b.rx_reports(recv.flags),
        };
        self.rx_done(b, &done);
    }

    /// Read from the socket; the number of operations finished.
    pub(super) fn read_some(&self, state: &mut EpState) -> std::result::Result<usize, Fail> {
        let mut done = 0;
        for _ in 0..ROUND {
            let step = self.read_step(state)?;
            match step {
                Step::Blocked => break,
                Step::Progressed => {}
                Step::Finished => {
                    // Hand the completion over now: looking for the next message would
                    // cost a system call that usually finds nothing (latency).
                    done += 1;
                    break;
                }
            }
        }
        Ok(done)
    }

    pub(super) fn read_step(&self, state: &mut EpState) -> std::result::Result<Step, Fail> {
        let Some(sock) = state.sock.as_ref() else {
            return Ok(Step::Blocked);
        };
        match &mut state.rx {
            Rx::Stalled { hdr } => {
                let hdr = *hdr;
                self.start_body(state, hdr)
            }
            Rx::Hdr { got } => {
                let n = match state.stage.recv(sock, &mut state.hbuf[*got..HDR_LEN]) {
                    Ok(0) => return Err(Fail::Closed),
                    Ok(n) => n,
                    Err(e) if would_block(&e) => return Ok(Step::Blocked),
                    Err(e) => return Err(sock_fail(e)),
                };
                *got += n;
                if *got < HDR_LEN {
                    return Ok(Step::Progressed);
                }
                let hdr = Hdr::parse(&state.hbuf[..HDR_LEN]).map_err(Fail::wire)?;
                if hdr.rma_cnt > 0 {
                    state.rx = Rx::Rma { hdr, got: 0 };
                    return Ok(Step::Progressed);
                }
                self.start_body(state, hdr)
            }
            Rx::Rma { hdr, got } => {
                let need = usize::from(hdr.rma_cnt) * RMA_IOV_LEN;
                let n = match state
                    .stage
                    .recv(sock, &mut state.hbuf[HDR_LEN + *got..HDR_LEN + need])
                {
                    Ok(0) => return Err(Fail::Closed),
                    Ok(n) => n,
                    Err(e) if would_block(&e) => return Ok(Step::Blocked),
                    Err(e) => return Err(sock_fail(e)),
                };
                *got += n;
                if *got < need {
                    return Ok(Step::Progressed);
                }
                let hdr = *hdr;
                self.start_body(state, hdr)
            }
            Rx::Body { hdr, sink, off } => {
                let size = hdr.size as usize;
                if *off < size {
                    let (segs, keep) = match sink {
                        Sink::Recv { segs, keep, .. } => (*segs, *keep),
                        Sink::Write { segs, .. } => (*segs, if segs.n > 0 { size } else { 0 }),
                        Sink::ReadRsp(p) => (p.read.unwrap_or_default(), size),
                        Sink::Unexp(v) | Sink::Atomic(v) => {
                            v.resize(size, 0);
                            (Segs::one(v.as_mut_ptr() as usize, size), size)
                        }
                    };
                    let n = if *off < keep {
                        let mut iov = [iovec(0, 0); SEGS_MAX];
                        let cnt = segs.iovecs(*off, keep - *off, &mut iov);
                        if cnt == 0 {
                            return Err(Fail::Error(Errno::EPROTO, "payload has no target".into()));
                        }
                        // SAFETY: the segments are a posted receive's buffers, a read's
                        // local buffers, a checked registered region, or our own
                        // buffer: all writable for their lengths.
                        match unsafe { state.stage.readv(sock, &iov[..cnt]) } {
                            Ok(0) => return Err(Fail::Closed),
                            Ok(n) => n,
                            Err(e) if would_block(&e) => return Ok(Step::Blocked),
                            Err(e) => return Err(sock_fail(e)),
                        }
                    } else {
                        let want = (size - *off).min(64 * 1024);
                        if state.scratch.len() < want {
                            state.scratch.resize(want, 0);
                        }
                        match state.stage.recv(sock, &mut state.scratch[..want]) {
                            Ok(0) => return Err(Fail::Closed),
                            Ok(n) => n,
                            Err(e) if would_block(&e) => return Ok(Step::Blocked),
                            Err(e) => return Err(sock_fail(e)),
                        }
                    };
                    *off += n;
                    if *off < size {
                        return Ok(Step::Progressed);
                    }
                }
                let Rx::Body { hdr, sink, .. } =
                    std::mem::replace(&mut state.rx, Rx::Hdr { got: 0 })
                else {
                    return Ok(Step::Progressed);
                };
                self.finish(state, hdr, sink)?;
                Ok(Step::Finished)
            }
        }
    }

    /// A response that carries no payload (an ack, a failed response, a same-host read
    /// response) is all in with its header: it completes `comp` with the header's status.
    /// A payload after it is `FI_EPROTO` ("`what` with a payload").
    fn finish_bodiless(
        &self,
        state: &mut EpState,
        hdr: &Hdr,
        comp: &Comp,
        what: &str,
    ) -> std::result::Result<Step, Fail> {
        if hdr.size != 0 {
            return Err(Fail::Error(Errno::EPROTO, format!("{what} with a payload")));
        }
        self.comp_status(&state.b, comp, hdr.status);
        state.rx = Rx::Hdr { got: 0 };
        Ok(Step::Finished)
    }

    /// A header (and its remote iovs) is in: decide where the payload goes.
    pub(super) fn start_body(
        &self,
        state: &mut EpState,
        hdr: Hdr,
    ) -> std::result::Result<Step, Fail> {
        let size = usize::try_from(hdr.size).unwrap_or(usize::MAX);
        let perr = |m: &str| Fail::Error(Errno::EPROTO, m.to_string());
        let sink = match hdr.op {
            Op::Msg | Op::Tagged => {
                if size > self.max_msg {
                    return Err(perr("message larger than max_msg_size"));
                }
                if hdr.flags & FLAG_LOCAL != 0 {
                    if state.local.peer_pid.is_none() {
                        return Err(perr("same-host descriptor from an unverified peer"));
                    }
                    if hdr.flags & FLAG_ACK_REQ == 0 {
                        return Err(perr("same-host descriptor without an ack request"));
                    }
                    let rma = parse_rma(&state.hbuf, hdr.rma_cnt);
                    let sum = rma[..usize::from(hdr.rma_cnt)]
                        .iter()
                        .fold(0u64, |a, r| a.saturating_add(r.len));
                    if sum != hdr.size {
                        return Err(perr("same-host descriptor lengths differ from the size"));
                    }
                }
                let tagged = hdr.op == Op::Tagged;
                let inc = Incoming {
                    src: ADDR_NOTAVAIL,
                    tag: hdr.tag,
                    len: size,
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tagged,
                };
                match state.matcher.match_incoming(&inc) {
                    Match::Recv { recv, place } => Sink::Recv {
                        segs: recv.buf.segs.window(place.offset, place.len),
                        keep: place.len,
                        truncated: place.truncated,
                        multi_released: None,
                        recv,
                    },
                    Match::Multi { buf, place } => {
                        let released = buf.is_released();
                        let recv = buf.recv().clone();
                        Sink::Recv {
                            segs: recv.buf.segs.window(place.offset, place.len),
                            keep: place.len,
                            truncated: place.truncated,
                            multi_released: Some(released),
                            recv,
                        }
                    }
                    Match::Unexpected => {
                        if !state.matcher.has_room_for_unexpected(size) {
                            // Stop reading until receives are posted: re-examine this
                            // header next round.
                            state.rx = Rx::Stalled { hdr };
                            return Ok(Step::Blocked);
                        }
                        Sink::Unexp(Vec::with_capacity(size))
                    }
                }
            }
            Op::Write => {
                let rma = parse_rma(&state.hbuf, hdr.rma_cnt);
                let rlen: u64 = rma.iter().map(|r| r.len).fold(0u64, u64::saturating_add);
                if rlen != hdr.size {
                    return Err(perr("write: remote iov lengths differ from the payload"));
                }
                match self.lookup(&rma, hdr.rma_cnt, ofi_core::OpFlags::REMOTE_WRITE) {
                    Ok(segs) => Sink::Write { segs, status: 0 },
                    Err(status) => Sink::Write {
                        segs: Segs::default(),
                        status,
                    },
                }
            }
            Op::ReadReq => {
                if hdr.size != 0 {
                    return Err(perr("read request with a payload"));
                }
                let rma = parse_rma(&state.hbuf, hdr.rma_cnt);
                let mut rsp = Hdr::new(Op::ReadRsp);
                rsp.id = hdr.id;
                let segs = match self.lookup(&rma, hdr.rma_cnt, OpFlags::REMOTE_READ) {
                    Ok(segs) => {
                        rsp.size = segs.total().unwrap_or(0) as u64;
                        segs
                    }
                    Err(status) => {
                        rsp.status = status;
                        Segs::default()
                    }
                };
                EpInner::respond(state, rsp, segs);
                state.rx = Rx::Hdr { got: 0 };
                return Ok(Step::Finished);
            }
            Op::ReadRsp => {
                let Some(p) = take_pending(state, &hdr, PendKind::Read) else {
                    return Err(perr("read response for no pending read"));
                };
                if hdr.flags & FLAG_LOCAL != 0 {
                    // The target copied into our buffers already.
                    return self.finish_bodiless(state, &hdr, &p.comp, "same-host read response");
                }
                if hdr.status != 0 {
                    return self.finish_bodiless(state, &hdr, &p.comp, "failed read response");
                }
                if size != p.comp.len {
                    return Err(perr("read response of the wrong length"));
                }
                Sink::ReadRsp(p)
            }
            Op::Ack => {
                if hdr.size != 0 {
                    return Err(perr("ack with a payload"));
                }
                let Some(p) = take_pending(state, &hdr, PendKind::Ack) else {
                    return Err(perr("ack for no pending operation"));
                };
                return self.finish_bodiless(state, &hdr, &p.comp, "ack");
            }
            Op::Atomic | Op::AtomicFetch | Op::AtomicCompare => {
                if size > self.max_msg.saturating_mul(2) {
                    return Err(perr("atomic operands larger than max_msg_size"));
                }
                Sink::Atomic(Vec::with_capacity(size))
            }
            Op::AtomicRsp => {
                let Some(p) = take_pending(state, &hdr, PendKind::Atomic) else {
                    return Err(perr("atomic response for no pending atomic"));
                };
                let want = p.read.map(|r| r.total().unwrap_or(0)).unwrap_or(0);
                if hdr.status != 0 {
                    return self.finish_bodiless(state, &hdr, &p.comp, "failed atomic response");
                }
                if size != want {
                    return Err(perr("atomic response of the wrong length"));
                }
                if size == 0 {
                    self.comp_ok(&state.b, &p.comp);
                    state.rx = Rx::Hdr { got: 0 };
                    return Ok(Step::Finished);
                }
                Sink::ReadRsp(p)
            }
            Op::LocalOffer | Op::LocalProof | Op::LocalOk | Op::LocalReadReq => {
                if hdr.size != 0 {
                    return Err(perr("same-host control message with a payload"));
                }
                self.local_control(state, &hdr)?;
                state.rx = Rx::Hdr { got: 0 };
                return Ok(Step::Finished);
            }
        };
        if hdr.flags & FLAG_LOCAL != 0 {
            return self.local_pull(state, hdr, sink);
        }
        state.rx = Rx::Body { hdr, sink, off: 0 };
        Ok(Step::Progressed)
    }

    /// Complete a posted receive in error.
    pub(super) fn rx_failed(
        &self,
        b: &Binds,
        recv: &PostedRecv<RBuf>,
        hdr: &Hdr,
        code: Errno,
        os: i32,
    ) {
        if let Some(cq) = b.rx_cq() {
            let kind = if hdr.op == Op::Tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            };
            let mut e = CqError::new(recv.ctx, code);
            e.flags = (OpFlags::RECV | kind).bits();
            e.buf = recv.buf.segs.base();
            e.tag = if hdr.op == Op::Tagged { hdr.tag } else { 0 };
            e.prov_errno = os;
            let _ = cq.push_err(e);
        }
        if let Some(c) = b.counter(CounterKind::Recv) {
            c.inc_err();
        }
    }

    /// The payload is in: complete.
    pub(super) fn finish(
        &self,
        state: &mut EpState,
        hdr: Hdr,
        sink: Sink,
    ) -> std::result::Result<(), Fail> {
        match sink {
            Sink::Recv {
                recv,
                segs,
                keep,
                truncated,
                multi_released,
            } => {
                let size = hdr.size as usize;
                let extra = if multi_released == Some(true) {
                    OpFlags::MULTI_RECV
                } else {
                    OpFlags::empty()
                };
                let report = state.b.rx_reports(recv.flags);
                let buf = if segs.n > 0 {
                    segs.base()
                } else {
                    recv.buf.segs.base()
                };
                let done = RxDone {
                    ctx: recv.ctx,
                    flags: extra,
                    buf,
                    len: keep,
                    olen: if truncated { size - keep } else { 0 },
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tag: (hdr.op == Op::Tagged).then_some(hdr.tag),
                    report,
                };
                self.rx_done(&state.b, &done);
                self.ack_if_asked(state, &hdr);
            }
            Sink::Unexp(v) => {
                let inc = Incoming {
                    src: ADDR_NOTAVAIL,
                    tag: hdr.tag,
                    len: v.len(),
                    data: (hdr.flags & FLAG_CQ_DATA != 0).then_some(hdr.data),
                    tagged: hdr.op == Op::Tagged,
                };
                // A receive posted while the payload was being read did not see this
                // message (it was not queued yet): match again before queueing it.
                let EpState { matcher, b, .. } = &mut *state;
                let bytes = v.len();
                let um = |payload| UnexpectedMsg {
                    msg: inc,
                    payload,
                    bytes,
                };
                match matcher.match_incoming(&inc) {
                    Match::Recv { recv, place } => {
                        self.deliver_unexpected(b, &recv, place, &um(v), false);
                    }
                    Match::Multi { buf, place } => {
                        let released = buf.is_released();
                        let recv = buf.recv().clone();
                        self.deliver_unexpected(b, &recv, place, &um(v), released);
                    }
                    Match::Unexpected => {
                        if matcher.push_unexpected(inc, v).is_err() {
                            return Err(Fail::Error(
                                Errno::ENOBUFS,
                                "unexpected-message buffer overflow".into(),
                            ));
                        }
                    }
                }
                self.ack_if_asked(state, &hdr);
            }
            Sink::Write { status, .. } => {
                if status == 0 && hdr.flags & FLAG_CQ_DATA != 0 {
                    if let Some(cq) = state.b.rx_cq() {
                        let _ = cq.push_remote_write(0, hdr.data);
                    }
                }
                let mut ack = Hdr::new(Op::Ack);
                ack.id = hdr.id;
                ack.status = status;
                EpInner::respond(state, ack, Segs::default());
            }
            Sink::ReadRsp(p) => self.comp_ok(&state.b, &p.comp),
            Sink::Atomic(v) => {
                let mut rsp = Hdr::new(Op::AtomicRsp);
                rsp.id = hdr.id;
                match self.apply_atomic(state, &hdr, &v) {
                    Ok(result) => {
                        rsp.size = result.len() as u64;
                        EpInner::respond_owned(state, rsp, result);
                    }
                    Err(status) => {
                        rsp.status = status;
                        EpInner::respond(state, rsp, Segs::default());
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn ack_if_asked(&self, state: &mut EpState, hdr: &Hdr) {
        if hdr.flags & FLAG_ACK_REQ != 0 {
            let mut ack = Hdr::new(Op::Ack);
            ack.id = hdr.id;
            EpInner::respond(state, ack, Segs::default());
        }
    }
}

/// Takes the pending operation the response `hdr` names (its id) if it waits for a
/// response of `kind`; `None` when there is none (a peer's protocol error).
fn take_pending(state: &mut EpState, hdr: &Hdr, kind: PendKind) -> Option<Pending> {
    let i = state
        .pending
        .iter()
        .position(|p| p.id == OpId(hdr.id) && p.kind == kind)?;
    state.pending.remove(i)
}
