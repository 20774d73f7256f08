//! Receive: packet dispatch, matching, segmented reassembly, rendezvous reads and the
//! unexpected-message queue; credits are returned as receives consume messages.
//!
//! # Invariants
//!
//! - A peer holds at most its granted credits of unconsumed messages; past that the
//!   packet is refused with `FI_EPROTO` (the connection closes).
//! - Every packet is parsed before use; sizes are checked against the packet and the
//!   limits the handshake set. Nothing here panics on peer input.

use super::*;
use ofi_kit::ep::Unexpected;

/// The part of a message's first packet that differs by protocol.
enum First<'a> {
    Eager(&'a [u8]),
    Sar { payload: &'a [u8], last: bool },
    Rts(RtsBody<'a>),
}

// ---------------------------------------------------------------------------------------
// Receive.

impl Shared {
    pub(super) fn return_credit(st: &mut St, c: usize, epoch: u64) {
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            if conn.epoch == epoch {
                conn.flow.consumed();
            }
        }
    }

    /// Count a credited message of the peer on `c`; `FI_EPROTO` if the peer has more
    /// of them unreturned than we granted (it ignores flow control: refusing it bounds
    /// what one peer can make us buffer).
    pub(super) fn hold_credit(&self, st: &mut St, c: usize) -> Result<()> {
        let grant = self.settings.credits as u32;
        if let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) {
            conn.flow.arrive(grant).map_err(|e| {
                Error::new(
                    e,
                    format!("peer sent beyond the {grant} credits granted to it"),
                )
            })?;
        }
        Ok(())
    }

    pub(super) fn conn_epoch(st: &St, c: usize) -> u64 {
        st.conns
            .get(c)
            .and_then(Option::as_ref)
            .map_or(0, |x| x.epoch)
    }

    /// A packet arrived on MSG slot `slot` (of connection `c`): checked by the
    /// protocol's rules ([`Inbound::classify`]), then dispatched.
    pub(super) fn handle_packet(
        &self,
        act: &Active,
        st: &mut St,
        c: usize,
        pkt: &[u8],
    ) -> Result<()> {
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return Ok(());
        };
        let lim = RxLimits {
            eager_max: self.settings.eager_limit(),
            sar_max: conn.peer_sar.max(self.settings.buffer_size),
            max_msg: crate::MAX_MSG_SIZE,
        };
        let (inb, returned) = Inbound::classify(pkt, &lim)
            .map_err(|e| Error::new(e, "a packet out of protocol (header, size or limit)"))?;
        conn.flow.returned(returned);
        let (meta, len, first) = match inb {
            Inbound::Eager { meta, payload } => (meta, payload.len(), First::Eager(payload)),
            Inbound::SarFirst {
                meta,
                total,
                payload,
                last,
            } => (meta, total, First::Sar { payload, last }),
            Inbound::Rts { meta, total, body } => (meta, total, First::Rts(body)),
            Inbound::Credit => return Ok(()),
            Inbound::DcAck { count } => return self.on_dc_ack(act, st, c, count),
            Inbound::RndvDone { op: id, err } => {
                let i = (id & 0xffff_ffff) as u32;
                let gen = (id >> 32) as u32;
                if let Some(op) = st.ops.get_mut(i as usize).and_then(Option::as_mut) {
                    if op.gen == gen && op.await_done && op.conn == c {
                        op.await_done = false;
                        // The peer's status: an FI code or FI_EPROTO, never as it came.
                        if let Some(e) = err {
                            op.err.get_or_insert(e);
                        }
                        op.mrs.clear();
                        self.maybe_finish(act, st, i);
                    }
                }
                return Ok(());
            }
            seg @ Inbound::SarNext { .. } => return self.next_segment(act, st, c, seg),
        };
        self.first_packet(act, st, c, meta, len, first)
    }

    /// The first (credited) packet of a message of `len` bytes: matched with a posted
    /// receive and placed, or queued as unexpected.
    // One call site, on every message's path.
    #[inline(always)]
    fn first_packet(
        &self,
        act: &Active,
        st: &mut St,
        c: usize,
        meta: MsgMeta,
        len: usize,
        first: First<'_>,
    ) -> Result<()> {
        self.hold_credit(st, c)?;
        let rts = match first {
            First::Rts(body) => Some(body.get().map_err(|e| Error::new(e, "bad RTS"))?),
            _ => None,
        };
        let sar = match first {
            First::Sar { payload, last } => {
                if st
                    .conns
                    .get(c)
                    .and_then(Option::as_ref)
                    .is_some_and(|x| x.sar.is_some())
                {
                    return Err(Error::new(
                        Errno::EPROTO,
                        "segmented message while another is open",
                    ));
                }
                let (cursor, done) =
                    SarCursor::first(meta.tag.unwrap_or(0), len, payload.len(), last)
                        .map_err(|e| Error::new(e, "bad first segment"))?;
                Some((cursor, done))
            }
            _ => None,
        };
        let src = st_src(self, act, st, c);
        let inc = Incoming {
            src,
            tag: meta.tag.unwrap_or(0),
            len,
            data: meta.data,
            tagged: meta.tag.is_some(),
        };
        let epoch = Self::conn_epoch(st, c);
        let target = match st.m.match_incoming(&inc) {
            Match::Unexpected => None,
            Match::Recv { recv, place } => Some((recv, place, false)),
            Match::Multi { buf, place } => {
                let rel = buf.is_released();
                let r = match buf {
                    MultiBuf::Posted(p) => p.clone(),
                    MultiBuf::Released(p) => p,
                };
                Some((r, place, rel))
            }
        };
        let dc = meta.dc;
        match (first, target) {
            (First::Eager(payload), Some((recv, place, rel))) => {
                let n = place.len.min(payload.len());
                // SAFETY: the receive buffer is the application's, writable for its
                // length (the placement lies within it); `payload` has n bytes.
                unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                act.complete_rx(&recv, place, &inc, rel, None);
                Self::return_credit(st, c, epoch);
                if dc {
                    self.ack_dc(st, c);
                }
            }
            (First::Eager(payload), None) => {
                let u = Unexp::Data {
                    data: payload.to_vec(),
                    conn: c,
                    epoch,
                };
                let _ = st.m.push_unexpected(inc, u);
                // Buffered is taken in (libfabric's delivery complete).
                if dc {
                    self.ack_dc(st, c);
                }
            }
            (First::Sar { payload, .. }, target) => {
                let Some((cursor, done)) = sar else {
                    return Ok(());
                };
                let target = match target {
                    Some((recv, place, rel)) => {
                        let n = place.len.min(payload.len());
                        // SAFETY: as above.
                        unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                        SarTarget::Recv {
                            recv,
                            place,
                            released: rel,
                        }
                    }
                    None => {
                        // Reserved up to our own segmenting limit, grown beyond: the
                        // size is the peer's word until the segments arrive.
                        let cap = self.settings.sar_limit.max(self.settings.buffer_size);
                        let mut data = Vec::with_capacity(len.min(cap));
                        data.extend_from_slice(payload);
                        let buf = Arc::new(Mutex::new(SarBuf {
                            data,
                            complete: false,
                            discarded: false,
                            matched: None,
                        }));
                        let u = Unexp::Sar {
                            buf: buf.clone(),
                            conn: c,
                            epoch,
                        };
                        let _ = st.m.push_unexpected(inc, u);
                        SarTarget::Buffer(buf)
                    }
                };
                if let Some(conn) = st.conns[c].as_mut() {
                    conn.sar = Some(SarRx {
                        inc,
                        cursor,
                        target,
                        dc,
                    });
                }
                if done {
                    self.finish_sar(act, st, c);
                }
            }
            (First::Rts(_), Some((recv, place, rel))) => {
                let Some(rts) = rts else {
                    return Ok(());
                };
                let to = Landing {
                    recv,
                    place,
                    released: rel,
                };
                self.start_read(act, st, c, to, inc, rts);
            }
            (First::Rts(_), None) => {
                let Some(rts) = rts else {
                    return Ok(());
                };
                let u = Unexp::Rts {
                    rts,
                    conn: c,
                    epoch,
                };
                let _ = st.m.push_unexpected_sized(inc, u, proto::rts_len(rts.n));
            }
        }
        Ok(())
    }

    /// A later segment (`seg`, an [`Inbound::SarNext`]) of the segmented message open
    /// on `c`.
    fn next_segment(&self, act: &Active, st: &mut St, c: usize, seg: Inbound<'_>) -> Result<()> {
        let Inbound::SarNext {
            tag,
            offset,
            payload,
            last,
        } = seg
        else {
            return Ok(());
        };
        let Some(conn) = st.conns.get_mut(c).and_then(Option::as_mut) else {
            return Ok(());
        };
        let Some(sar) = conn.sar.as_mut() else {
            return Err(Error::new(Errno::EPROTO, "segment without a first segment"));
        };
        let off = sar.cursor.got();
        let done = sar
            .cursor
            .next(tag, offset, payload.len(), last)
            .map_err(|e| Error::new(e, "segment out of order"))?;
        match &sar.target {
            SarTarget::Recv { recv, place, .. } => {
                if off < place.len {
                    let n = (place.len - off).min(payload.len());
                    // SAFETY: as in first_packet.
                    unsafe { recv.buf.scatter(place.offset + off, payload.as_ptr(), n) };
                }
            }
            SarTarget::Buffer(b) => {
                lock(b).data.extend_from_slice(payload);
            }
        }
        if done {
            self.finish_sar(act, st, c);
        }
        Ok(())
    }

    pub(super) fn finish_sar(&self, act: &Active, st: &mut St, c: usize) {
        let Some(sar) = st
            .conns
            .get_mut(c)
            .and_then(Option::as_mut)
            .and_then(|x| x.sar.take())
        else {
            return;
        };
        let epoch = Self::conn_epoch(st, c);
        match sar.target {
            SarTarget::Recv {
                recv,
                place,
                released,
            } => {
                act.complete_rx(&recv, place, &sar.inc, released, None);
                Self::return_credit(st, c, epoch);
            }
            SarTarget::Buffer(b) => {
                let mut g = lock(&b);
                g.complete = true;
                if let Some((recv, place, rel)) = g.matched.take() {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    act.complete_rx(&recv, place, &sar.inc, rel, None);
                    Self::return_credit(st, c, epoch);
                } else if g.discarded {
                    drop(g);
                    Self::return_credit(st, c, epoch);
                }
            }
        }
        // The whole message is in (a receive, or assembled): taken in.
        if sar.dc {
            self.ack_dc(st, c);
        }
    }

    /// Read the rendezvous message `rts` of connection `c` into the receive `to`.
    pub(super) fn start_read(
        &self,
        act: &Active,
        st: &mut St,
        c: usize,
        to: Landing,
        inc: Incoming,
        rts: Rts,
    ) {
        let Landing {
            recv,
            place,
            released,
        } = to;
        // Pieces: local contiguous ranges against remote ranges, for place.len bytes.
        let local = recv.buf.sub(place.offset, place.len);
        let mut pieces = Vec::new();
        let (mut li, mut loff) = (0usize, 0usize);
        let mut left = place.len;
        for &(ra, rl, key) in &rts.iov[..rts.n] {
            let mut roff = 0u64;
            while roff < rl && left > 0 && li < local.len() {
                let (la, ll) = local.slice()[li];
                let n = ((ll - loff) as u64).min(rl - roff) as usize;
                let n = n.min(left);
                pieces.push((la + loff, n, ra + roff, key));
                loff += n;
                roff += n as u64;
                left -= n;
                if loff == ll {
                    li += 1;
                    loff = 0;
                }
            }
        }
        let r = RdOp {
            gen: 0,
            conn: c,
            recv,
            place,
            inc,
            released,
            id: rts.id,
            pieces,
            posted: 0,
            outstanding: 0,
            err: None,
        };
        st.op_gen = st.op_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = st.op_gen;
        let i = match st.rd_free.pop() {
            Some(i) => {
                st.rds[i as usize] = Some(RdOp { gen, ..r });
                i
            }
            None => {
                st.rds.push(Some(RdOp { gen, ..r }));
                (st.rds.len() - 1) as u32
            }
        };
        self.pump_read(act, st, i);
    }

    pub(super) fn pump_read(&self, act: &Active, st: &mut St, i: u32) {
        loop {
            let Some(r) = st.rds.get(i as usize).and_then(Option::as_ref) else {
                return;
            };
            if r.posted >= r.pieces.len() {
                break;
            }
            let (la, n, ra, key) = r.pieces[r.posted];
            let ctx = mk_ctx(K_RD, i, r.gen);
            let res = match self.tx_ep(st, r.conn) {
                // SAFETY: the receive buffer is the application's, valid until the
                // receive completes (after this read).
                Some(ep) => unsafe {
                    ep.read(
                        la as *mut u8,
                        n,
                        std::ptr::null_mut(),
                        ADDR_UNSPEC,
                        ra,
                        key,
                        ctx,
                    )
                },
                None => Err(Error::code_only(Errno::ENOTCONN)),
            };
            let Some(r) = st.rds.get_mut(i as usize).and_then(Option::as_mut) else {
                return;
            };
            match res {
                Ok(()) => {
                    r.posted += 1;
                    r.outstanding += 1;
                }
                Err(e) if e.code() == Errno::EAGAIN => {
                    if !st.rd_waiting.contains(&i) {
                        st.rd_waiting.push(i);
                    }
                    return;
                }
                Err(e) => {
                    r.err = Some(e.code());
                    r.posted = r.pieces.len();
                }
            }
        }
        self.maybe_finish_read(act, st, i);
    }

    pub(super) fn maybe_finish_read(&self, act: &Active, st: &mut St, i: u32) {
        let done = st
            .rds
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|r| r.posted >= r.pieces.len() && r.outstanding == 0);
        if !done {
            return;
        }
        let Some(r) = st.rds.get_mut(i as usize).and_then(Option::take) else {
            return;
        };
        st.rd_free.push(i);
        st.rd_waiting.retain(|x| *x != i);
        act.complete_rx(&r.recv, r.place, &r.inc, r.released, r.err);

        let epoch = Self::conn_epoch(st, r.conn);
        Self::return_credit(st, r.conn, epoch);
        self.send_ctrl(
            st,
            r.conn,
            Control::rndv_done(r.id, r.err.map_or(Ok(()), Err)),
        );
    }

    pub(super) fn read_done(
        &self,
        act: &Active,
        st: &mut St,
        i: u32,
        gen: u32,
        err: Option<Errno>,
    ) {
        let Some(r) = st.rds.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        if r.gen != gen {
            return;
        }
        r.outstanding = r.outstanding.saturating_sub(1);
        if err.is_some() && r.err.is_none() {
            r.err = err;
        }
        self.maybe_finish_read(act, st, i);
    }

    /// Deliver an unexpected message to a receive that matched it.
    pub(super) fn deliver_unexp(
        &self,
        act: &Active,
        st: &mut St,
        to: Landing,
        inc: &Incoming,
        payload: Unexp,
    ) {
        let Landing {
            recv,
            place,
            released,
        } = to;
        match payload {
            Unexp::Data { data, conn, epoch } => {
                let n = place.len.min(data.len());
                // SAFETY: as in handle_packet.
                unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
                act.complete_rx(&recv, place, inc, released, None);
                Self::return_credit(st, conn, epoch);
                self.maybe_credit(st, conn);
            }
            Unexp::Sar { buf, conn, epoch } => {
                let mut g = lock(&buf);
                if g.complete {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    act.complete_rx(&recv, place, inc, released, None);
                    Self::return_credit(st, conn, epoch);
                    self.maybe_credit(st, conn);
                } else if Self::conn_epoch(st, conn) == epoch {
                    g.matched = Some((recv, place, released));
                } else {
                    drop(g);
                    act.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
            Unexp::Rts { rts, conn, epoch } => {
                if Self::conn_epoch(st, conn) == epoch {
                    self.start_read(
                        act,
                        st,
                        conn,
                        Landing {
                            recv,
                            place,
                            released,
                        },
                        *inc,
                        rts,
                    );
                } else {
                    act.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
        }
    }

    pub(super) fn discard_unexp(&self, st: &mut St, payload: Unexp) {
        match payload {
            Unexp::Data { conn, epoch, .. } => {
                Self::return_credit(st, conn, epoch);
                self.maybe_credit(st, conn);
            }
            Unexp::Sar { buf, conn, epoch } => {
                let mut g = lock(&buf);
                if g.complete {
                    drop(g);
                    Self::return_credit(st, conn, epoch);
                    self.maybe_credit(st, conn);
                } else {
                    g.discarded = true;
                }
            }
            Unexp::Rts { rts, conn, epoch } => {
                if Self::conn_epoch(st, conn) == epoch {
                    Self::return_credit(st, conn, epoch);
                    self.send_ctrl(st, conn, Control::rndv_done(rts.id, Ok(())));
                }
            }
        }
    }

    pub(super) fn post_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let mut g = lock(&self.st);
        let st = &mut *g;
        // The common answer, Queued, is tested in place and returns before anything
        // is moved out of the (large) result.
        let posted = st.m.post(recv);
        if matches!(posted, Ok(PostAction::Queued)) {
            return Ok(());
        }
        act.carry_out(posted?, |u| match u {
            Unexpected::Deliver {
                recv,
                place,
                msg,
                payload,
                releases,
            } => {
                let to = Landing {
                    recv: recv.clone(),
                    place,
                    released: releases,
                };
                self.deliver_unexp(act, st, to, msg, payload);
            }
            Unexpected::Discard(payload) => self.discard_unexp(st, payload),
        });
        Ok(())
    }
}

pub(super) fn st_src(sh: &Shared, act: &Active, st: &mut St, c: usize) -> u64 {
    st.conn_src(act, c, sh.need_src)
}
