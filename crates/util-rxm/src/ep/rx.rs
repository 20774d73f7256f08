//! Receive: what the engine makes of an arriving packet ([`Arrival`]) placed where kit's
//! matcher says — straight into a posted receive, or kept as an unexpected message
//! (a segmented one assembled while it arrives) — rendezvous reads with the core's RMA,
//! and the messages' credits handed back to the engine as receives consume them.
//!
//! # Invariants
//!
//! - Every packet goes through [`Engine::receive`] before anything is taken from it:
//!   parsed, sizes checked against the packet and the limits the handshake set, the
//!   peer's credits counted (a peer past its grant is refused with `FI_EPROTO` and the
//!   connection closes). Nothing here panics on peer input.
//! - Each message's credit ([`CreditToken`]) goes back to the engine once, when the
//!   message is consumed (placed, or discarded unread); one of an older connection
//!   counts for nothing.

use super::*;

/// The part of a message's first packet that differs by protocol.
enum First<'a> {
    Eager(&'a [u8]),
    Sar(&'a [u8]),
    Rts(RndvReq),
}

/// What a message's first packet says besides its bytes.
struct Head {
    meta: MsgMeta,
    len: usize,
    credit: CreditToken,
}

// ---------------------------------------------------------------------------------------
// Receive.

impl Shared {
    /// A message that came with `credit` was taken in: the engine returns its credit
    /// (piggybacked, or a credit packet once half the grant is owed).
    pub(super) fn consumed(&self, active: &Active, state: &mut EpState, credit: CreditToken) {
        state.protocol.consumed(credit);
        let conn_id = credit.peer();
        if Self::conn_busy(state, conn_id) {
            self.pump_conn(active, state, conn_id);
        }
    }

    /// A packet arrived on a MSG endpoint of connection `conn_id`: checked by the engine
    /// (credits, limits, segment order, acknowledgements), then placed where the
    /// message goes.
    pub(super) fn handle_packet(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        pkt: &[u8],
    ) -> Result<()> {
        let peer = conn_id;
        if !state.protocol.is_up(peer) {
            // A packet of a connection already handled as broken.
            return Ok(());
        }
        let arrival = state
            .protocol
            .receive(peer, pkt)
            .map_err(|v| Error::new(v.errno(), v.to_string()))?;
        match arrival {
            Arrival::Nothing => {
                // Acknowledgements and "done"s complete sends.
                self.drain_events(active, state);
                Ok(())
            }
            Arrival::First {
                meta,
                total,
                payload,
                done,
                credit,
                ..
            } => {
                // A message whole in its first packet (eager, or one segment) lands
                // like an eager one.
                let first = if done {
                    First::Eager(payload)
                } else {
                    First::Sar(payload)
                };
                let head = Head {
                    meta,
                    len: total,
                    credit,
                };
                self.first_packet(active, state, conn_id, head, first);
                Ok(())
            }
            Arrival::Segment {
                offset,
                payload,
                done,
            } => {
                self.next_segment(active, state, conn_id, offset, payload, done);
                Ok(())
            }
            Arrival::Rts {
                meta,
                total,
                rts,
                read,
                credit,
                ..
            } => {
                let head = Head {
                    meta,
                    len: total,
                    credit,
                };
                let rts = rts
                    .get()
                    .map_err(|e| Error::new(e, "a malformed rendezvous request"))?;
                let req = RndvReq { rts, read, credit };
                self.first_packet(active, state, conn_id, head, First::Rts(req));
                Ok(())
            }
        }
    }

    /// The first (credited) packet of a message of `len` bytes: matched with a posted
    /// receive and placed, or queued as unexpected.
    // One call site per protocol, on every message's path.
    #[inline(always)]
    fn first_packet(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        head: Head,
        first: First<'_>,
    ) {
        let Head { meta, len, credit } = head;
        let src = st_src(self, active, state, conn_id);
        let inc = Incoming {
            src,
            tag: meta.tag.unwrap_or(0),
            len,
            data: meta.data,
            tagged: meta.tag.is_some(),
        };
        // An endpoint bound to a shared receive context holds no receive of its own:
        // the context's matcher has them (locked for the match only).
        let target = {
            let mut srx_state;
            let m = match self.ctx.srx() {
                None => &mut state.matcher,
                Some(srx) => {
                    srx_state = lock(&srx.state);
                    &mut srx_state.matcher
                }
            };
            // An eager message for an ordinary posted receive (the common case) is
            // delivered where the receive lies in its queue: the receive record is
            // not copied out.
            let matched = match &first {
                First::Eager(payload) => m.match_incoming_with(&inc, |recv, place| {
                    let n = place.len.min(payload.len());
                    // SAFETY: the receive buffer is the application's, writable for
                    // its length (the placement lies within it); `payload` has n
                    // bytes.
                    unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                    active.complete_rx(recv, place, &inc, false, None);
                }),
                _ => Err(m.match_incoming(&inc)),
            };
            match matched {
                Ok(()) => {
                    state.protocol.consumed(credit);
                    return;
                }
                Err(Match::Unexpected) => None,
                Err(Match::Recv { recv, place }) => Some((recv, place, false)),
                Err(Match::Multi { buf, place }) => {
                    let (recv, released) = buf.into_owned();
                    Some((recv, place, released))
                }
            }
        };
        match (first, target) {
            (First::Eager(payload), Some((recv, place, rel))) => {
                let n = place.len.min(payload.len());
                // SAFETY: the receive buffer is the application's, writable for its
                // length (the placement lies within it); `payload` has n bytes.
                unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                active.complete_rx(&recv, place, &inc, rel, None);
                state.protocol.consumed(credit);
            }
            (First::Eager(payload), None) => {
                let u = Unexp::Data {
                    data: payload.to_vec(),
                    credit,
                };
                let _ = state.matcher.push_unexpected(inc, u);
            }
            (First::Sar(payload), target) => {
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
                            credit,
                        };
                        let _ = state.matcher.push_unexpected(inc, u);
                        SarTarget::Buffer(buf)
                    }
                };
                if let Some(conn) = state.conns[conn_id.index()].as_mut() {
                    conn.sar = Some(SarRx {
                        inc,
                        target,
                        credit,
                    });
                }
            }
            (First::Rts(req), Some((recv, place, rel))) => {
                let to = Landing {
                    recv,
                    place,
                    released: rel,
                };
                self.start_read(active, state, conn_id, to, inc, req);
            }
            (First::Rts(req), None) => {
                let n = req.rts.n;
                let _ =
                    state
                        .matcher
                        .push_unexpected_sized(inc, Unexp::Rts(req), proto::rts_len(n));
            }
        }
    }

    /// Bytes at `off` of the segmented message open on `conn_id` (`done`: its last ones).
    fn next_segment(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        off: usize,
        payload: &[u8],
        done: bool,
    ) {
        let Some(sar) = state.conn_mut(conn_id).and_then(|x| x.sar.as_mut()) else {
            return;
        };
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
            self.finish_sar(active, state, conn_id);
        }
    }

    /// The segmented message open on `conn_id` is whole (the engine acknowledges it if asked).
    pub(super) fn finish_sar(&self, active: &Active, state: &mut EpState, conn_id: ConnId) {
        let Some(sar) = state.conn_mut(conn_id).and_then(|x| x.sar.take()) else {
            return;
        };
        match sar.target {
            SarTarget::Recv {
                recv,
                place,
                released,
            } => {
                active.complete_rx(&recv, place, &sar.inc, released, None);
                state.protocol.consumed(sar.credit);
            }
            SarTarget::Buffer(b) => {
                let mut g = lock(&b);
                g.complete = true;
                if let Some((recv, place, rel)) = g.matched.take() {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    active.complete_rx(&recv, place, &sar.inc, rel, None);
                    state.protocol.consumed(sar.credit);
                } else if g.discarded {
                    drop(g);
                    state.protocol.consumed(sar.credit);
                }
            }
        }
    }

    /// Read the rendezvous message `rts` of connection `conn_id` into the receive `to`.
    pub(super) fn start_read(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        to: Landing,
        inc: Incoming,
        req: RndvReq,
    ) {
        let RndvReq { rts, read, credit } = req;
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
            conn: conn_id,
            recv,
            place,
            inc,
            released,
            read,
            credit,
            pieces,
            posted: 0,
            outstanding: 0,
            err: None,
        };
        state.op_gen = state.op_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = state.op_gen;
        let i = match state.rd_free.pop() {
            Some(i) => {
                state.rds[i as usize] = Some(RdOp { gen, ..r });
                i
            }
            None => {
                state.rds.push(Some(RdOp { gen, ..r }));
                (state.rds.len() - 1) as u32
            }
        };
        self.pump_read(active, state, i);
    }

    pub(super) fn pump_read(&self, active: &Active, state: &mut EpState, i: u32) {
        loop {
            let Some(r) = state.rds.get(i as usize).and_then(Option::as_ref) else {
                return;
            };
            if r.posted >= r.pieces.len() {
                break;
            }
            let (la, n, ra, key) = r.pieces[r.posted];
            let ctx = mk_ctx(K_RD, i, r.gen);
            let res = match self.tx_ep(state, r.conn) {
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
            let Some(r) = state.rds.get_mut(i as usize).and_then(Option::as_mut) else {
                return;
            };
            match res {
                Ok(()) => {
                    r.posted += 1;
                    r.outstanding += 1;
                }
                Err(e) if e.code() == Errno::EAGAIN => {
                    if !state.rd_waiting.contains(&i) {
                        state.rd_waiting.push(i);
                    }
                    return;
                }
                Err(e) => {
                    r.err = Some(e.code());
                    r.posted = r.pieces.len();
                }
            }
        }
        self.maybe_finish_read(active, state, i);
    }

    pub(super) fn maybe_finish_read(&self, active: &Active, state: &mut EpState, i: u32) {
        let done = state
            .rds
            .get(i as usize)
            .and_then(Option::as_ref)
            .is_some_and(|r| r.posted >= r.pieces.len() && r.outstanding == 0);
        if !done {
            return;
        }
        let Some(r) = state.rds.get_mut(i as usize).and_then(Option::take) else {
            return;
        };
        state.rd_free.push(i);
        state.rd_waiting.retain(|x| *x != i);
        active.complete_rx(&r.recv, r.place, &r.inc, r.released, r.err);
        // RNDV_DONE with the status, and the message's credit back.
        state
            .protocol
            .handle_read_done(r.read, r.err.map_or(Ok(()), Err));
        state.protocol.consumed(r.credit);
        if Self::conn_busy(state, r.conn) {
            self.pump_conn(active, state, r.conn);
        }
    }

    /// Deliver an unexpected message to a receive that matched it.
    pub(super) fn deliver_unexp(
        &self,
        active: &Active,
        state: &mut EpState,
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
            Unexp::Data { data, credit } => {
                let n = place.len.min(data.len());
                // SAFETY: as in handle_packet.
                unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
                active.complete_rx(&recv, place, inc, released, None);
                self.consumed(active, state, credit);
            }
            Unexp::Sar { buf, credit } => {
                let mut g = lock(&buf);
                if g.complete {
                    let n = place.len.min(g.data.len());
                    // SAFETY: as above.
                    unsafe { recv.buf.scatter(place.offset, g.data.as_ptr(), n) };
                    drop(g);
                    active.complete_rx(&recv, place, inc, released, None);
                    self.consumed(active, state, credit);
                } else if state.protocol.is_current(credit) {
                    g.matched = Some((recv, place, released));
                } else {
                    drop(g);
                    active.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
            Unexp::Rts(req) => {
                if state.protocol.is_current(req.credit) {
                    let conn_id = req.credit.peer();
                    let to = Landing {
                        recv,
                        place,
                        released,
                    };
                    self.start_read(active, state, conn_id, to, *inc, req);
                } else {
                    active.complete_rx(&recv, place, inc, released, Some(Errno::ECONNRESET));
                }
            }
        }
    }

    pub(super) fn discard_unexp(&self, active: &Active, state: &mut EpState, payload: Unexp) {
        match payload {
            Unexp::Data { credit, .. } => self.consumed(active, state, credit),
            Unexp::Sar { buf, credit } => {
                let mut g = lock(&buf);
                if g.complete {
                    drop(g);
                    self.consumed(active, state, credit);
                } else {
                    g.discarded = true;
                }
            }
            Unexp::Rts(req) => {
                // The sender's buffer is not needed: "done" at once.
                state.protocol.handle_read_done(req.read, Ok(()));
                self.consumed(active, state, req.credit);
            }
        }
    }

    pub(super) fn post_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        // Receives of a shared context, and of an endpoint bound to a shared receive
        // context (`shared_ctx`).
        if self.ctx.routes_recv() {
            // By reference: the common path keeps the receive where it is.
            return self.post_shared_recv(&recv);
        }
        let mut g = lock(&self.state);
        self.post_locked(active, &mut g, recv)
    }

    /// [`Shared::post_recv`] to this endpoint's own matcher, its state locked.
    #[inline(always)]
    pub(super) fn post_locked(
        &self,
        active: &Active,
        state: &mut EpState,
        recv: PostedRecv<IoList>,
    ) -> Result<()> {
        active.post_recv(
            state,
            |state| &mut state.matcher,
            recv,
            |state, d| {
                let to = Landing {
                    recv: d.recv.clone(),
                    place: d.place,
                    released: d.releases,
                };
                self.deliver_unexp(active, state, to, d.msg, d.payload);
            },
            |state, payload| self.discard_unexp(active, state, payload),
        )
    }
}

pub(super) fn st_src(sh: &Shared, active: &Active, state: &mut EpState, conn_id: ConnId) -> u64 {
    state.conn_src(active, conn_id, sh.need_src)
}
