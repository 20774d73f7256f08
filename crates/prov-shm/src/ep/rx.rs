//! The receive side: posted receives and the tag matcher, delivery into receive
//! buffers or the unexpected queue, acknowledgements to senders, rings attaching and
//! going away, and the progress loop over this endpoint's rings.
//!
//! Invariants:
//! - Called with the `rx` lock held (never the `tx` lock).
//! - A ring owes at most [`ACK_BACKLOG_MAX`] acks beyond what its ack ring holds;
//!   past that it is left unread until its sender takes them.
//! - The lock-free idle check ([`Shared::rx_may_have_work`]) may say yes in vain,
//!   never no while work is pending: it reads what [`Shared::publish_peek`] left.
//!
//! Nothing here panics on application or peer input.

use super::*;

impl Shared {
    // ---------------------------------------------------------------- receive side

    #[inline]
    pub(super) fn src_of(&self, active: &Active, rr: &mut RxRing) -> u64 {
        if !self.need_src {
            return ADDR_NOTAVAIL;
        }
        Self::src_lookup(active, rr)
    }

    /// [`Self::src_of`] when the source is wanted (out of line).
    #[inline(never)]
    pub(super) fn src_lookup(active: &Active, rr: &mut RxRing) -> u64 {
        if rr.src != ADDR_NOTAVAIL
            && active
                .av
                .with_entry(rr.src, |e| e.addr == &rr.addr)
                .unwrap_or(false)
        {
            return rr.src;
        }
        rr.src = active.av.reverse_lookup(&rr.addr).unwrap_or(ADDR_NOTAVAIL);
        rr.src
    }

    pub(super) fn push_ack(&self, rx: &mut Rx, ring: usize, claim: u64, id: u64, status: i32) {
        let Some(rr) = rx.rings.get_mut(ring) else {
            return;
        };
        if !rr.on || rr.claim != claim {
            return;
        }
        rr.backlog.push_back((id, status));
        Self::flush_acks(&self.region, ring, rr);
        if !rr.backlog.is_empty() {
            self.peek.more.store(true, Ordering::Release);
        }
    }

    pub(super) fn flush_acks(region: &Region, r: usize, rr: &mut RxRing) {
        let ring = region.ring(r);
        let ar = ring.acks();
        while let Some(&(id, state)) = rr.backlog.front() {
            match rr.ackp.reserve(&ar) {
                Ok(Some(i)) => {
                    ring.ack_id(i).store(id, Ordering::Relaxed);
                    ring.ack_status(i).store(state as u32, Ordering::Relaxed);
                    rr.ackp.publish(&ar);
                    rr.backlog.pop_front();
                }
                _ => return,
            }
        }
    }

    /// Deliver an unexpected message `inc` (held as `payload`) to the receive `to`
    /// that matched it.
    pub(super) fn deliver_unexp(
        &self,
        active: &Active,
        rx: &mut Rx,
        to: Matched<'_>,
        inc: &Incoming,
        payload: Unexp,
    ) {
        let Matched {
            recv,
            place,
            released,
        } = to;
        let via = match &payload {
            Unexp::Data { via, .. } | Unexp::Rts { via, .. } => via.clone(),
        };
        let active = via.as_deref().unwrap_or(active);
        match payload {
            Unexp::Data { data, .. } => {
                let n = place.len.min(data.len());
                // SAFETY: `data` holds n bytes; the receive buffer is the
                // application's, writable for its length (placement within it).
                unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
                active.complete_rx(recv, place, inc, released, None);
            }
            Unexp::Rts {
                ring,
                claim,
                pid,
                bufs,
                id,
                ..
            } => {
                let dst = recv.buf.sub(place.offset, place.len);
                // SAFETY: `dst` is the placement's part of a posted receive buffer,
                // which the application left writable to the provider until the
                // receive completes (the C API's contract of fi_recv); the provider
                // holds it only as addresses.
                let state = unsafe { Self::cma_read(pid, dst, bufs.used()) };
                let err = if state == 0 { None } else { Some(Errno(state)) };
                active.complete_rx(recv, place, inc, released, err);
                self.push_ack(rx, ring, claim, id, state);
            }
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn attach_rings(&self, rx: &mut Rx) {
        let geo = self.region.geometry();
        for r in 0..geo.rings {
            if rx.rings[r].on {
                continue;
            }
            let ring = self.region.ring(r);
            // A sender may have sent and closed (or died) before we first looked: its
            // messages are still to be drained.
            let state = ring.state().load(Ordering::Acquire);
            if state != state::READY && state != state::CLOSED {
                continue;
            }
            let Some((pid, name, pa, pv)) = ring.read_identity() else {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            if ring.auth() != self.settings.auth {
                // A sender with another key: its messages are never taken.
                continue;
            }
            let cma = if self.settings.disable_cma || !ofi_kit::cma::probe(pid, pa, pv) {
                cma_state::REFUSED
            } else {
                cma_state::OK
            };
            ring.cma().store(cma, Ordering::Release);
            let rr = &mut rx.rings[r];
            rr.on = true;
            rr.claim = ring.claim().load(Ordering::Acquire);
            rr.cons = Consumer::new(geo.slots, ring.tail_word().load(Ordering::Relaxed));
            rr.ackp = Producer::new(geo.slots, ring.ack_tail_word().load(Ordering::Acquire));
            rr.pid = pid;
            rr.start = region::process_start(pid).unwrap_or(0);
            rr.addr = Address::Str(format!(
                "{ADDR_PREFIX}{}",
                super::scalable::public_name(&name)
            ));
            rr.src = ADDR_NOTAVAIL;
            rr.asm = None;
            rr.wr = None;
            rr.backlog.clear();
            rx.via[r] = self.srx_route(ring.dest());
            rx.routed |= rx.via[r].is_some();
            rx.active.push(r);
        }
    }

    /// On a shared receive context, the bindings of its endpoint whose name has
    /// `digest` (see [`Ring::dest`](region::Ring::dest)); `None` for the context's own
    /// (another endpoint, or no digest).
    fn srx_route(&self, digest: u64) -> Option<Arc<Active>> {
        let routes = lock(&self.srx_routes);
        let (_, b) = routes.iter().find(|(d, _)| *d == digest)?;
        Some(b.clone())
    }

    pub(super) fn release_ring(&self, active: &Active, rx: &mut Rx, r: usize) {
        let ring = self.region.ring(r);
        let via = rx.via.get_mut(r).and_then(Option::take);
        let active = via.as_deref().unwrap_or(active);
        let Some(rr) = rx.rings.get_mut(r) else {
            return;
        };
        if let Some(a) = rr.asm.take() {
            if let AsmTarget::Recv {
                recv,
                place,
                released,
            } = a.target
            {
                active.complete_rx(&recv, place, &a.inc, released, Some(Errno::ECONNRESET));
            }
        }
        let rr = &mut rx.rings[r];
        rr.on = false;
        rr.backlog.clear();
        for c in 0..self.region.geometry().chunks {
            ring.chunk_state(c).store(0, Ordering::Relaxed);
        }
        ring.cma().store(cma_state::UNKNOWN, Ordering::Relaxed);
        ring.ack_tail_word()
            .store(rr.ackp.head(), Ordering::Relaxed);
        ring.state().store(state::FREE, Ordering::Release);
        ring.claim().store(0, Ordering::Release);
        rx.active.retain(|&x| x != r);
    }

    /// Deliver message `inc`, whose `inc.len` bytes lie at `payload`, at once: into
    /// the matching receive, or copied into the unexpected queue (with `ack`, the
    /// acknowledgement owed once it is received). False if it must wait (no room for
    /// an unexpected message); otherwise the payload is no longer needed on return.
    ///
    /// # Safety
    /// `payload` is valid for reads of `inc.len` bytes.
    pub(super) unsafe fn deliver_whole(
        &self,
        active: &Active,
        rx: &mut Rx,
        inc: &Incoming,
        r: usize,
        ack: Option<(usize, u64, u64)>,
        payload: *const u8,
    ) -> bool {
        let deliver = |recv: &PostedRecv<IoList>, place: Placement, released: bool| {
            // SAFETY: the payload per the contract (place.len ≤ inc.len); the receive
            // buffer is the application's.
            unsafe { scatter(&recv.buf, place.offset, payload, place.len) };
            active.complete_rx(recv, place, inc, released, None);
        };
        // An ordinary receive is used where it lies in its queue (it is large: no
        // copies); other answers come back from the matcher as they are.
        match rx
            .m
            .match_incoming_with(inc, |recv, place| deliver(recv, place, false))
        {
            Ok(()) => {}
            Err(Match::Recv { ref recv, place }) => deliver(recv, place, false),
            Err(Match::Multi { ref buf, place }) => deliver(buf.recv(), place, buf.is_released()),
            Err(Match::Unexpected) => {
                let len = inc.len;
                if !rx.m.has_room_for_unexpected(len) {
                    return false;
                }
                let mut data = vec![0u8; len];
                // SAFETY: the payload per the contract; `data` holds len bytes.
                unsafe { std::ptr::copy_nonoverlapping(payload, data.as_mut_ptr(), len) };
                let via = rx.via[r].clone();
                if rx
                    .m
                    .push_unexpected(*inc, Unexp::Data { data, via })
                    .is_err()
                {
                    return false;
                }
            }
        }
        // Placed or buffered is taken in: libfabric's delivery complete (the data no
        // longer needs the sender's slot or chunk).
        if let Some((ring, claim, id)) = ack {
            self.push_ack(rx, ring, claim, id, 0);
        }
        true
    }

    /// Whether the receive side may have work, checked without its lock: a sender
    /// attached, a ring's next slot is published, acks or a stall are pending, or a
    /// liveness check is due (every 256th call).
    #[inline]
    pub(super) fn rx_may_have_work(&self) -> bool {
        let p = &self.peek;
        let calls = p.calls.load(Ordering::Relaxed);
        p.calls.store(calls.wrapping_add(1), Ordering::Relaxed);
        if calls.is_multiple_of(256) {
            p.liveness_due.store(true, Ordering::Relaxed);
            return true;
        }
        if p.more.load(Ordering::Acquire)
            || self.region.claims_gen().load(Ordering::Acquire) != p.gen.load(Ordering::Relaxed)
        {
            return true;
        }
        let n = p.n.load(Ordering::Acquire).min(p.words.len());
        p.words[..n].iter().any(|w| {
            let w = w.load(Ordering::Relaxed);
            let ring = self.region.ring((w >> 48) as usize);
            let tail = w & PEEK_TAIL_MASK;
            let i = ring_index(&self.region, tail);
            let ready = ring.seq(i).load(Ordering::Acquire) == tail + 1;
            if ready {
                // The slot's second line (the rest of a small message's payload, or
                // of a header's body) is still in the sender's cache: start fetching
                // it now, while the lock is taken and the first line parsed.
                self.region.map().prefetch(ring.slot_off(i) + 64);
            }
            ready
        })
    }

    /// Publish what [`Shared::rx_may_have_work`] reads (under the rx lock): `more`, or
    /// any active ring owing acks, says other work is pending.
    pub(super) fn publish_peek(&self, rx: &Rx, mut more: bool) {
        let p = &self.peek;
        let n = rx.active.len().min(p.words.len());
        for (k, &r) in rx.active.iter().enumerate() {
            let Some(rr) = rx.rings.get(r) else {
                continue;
            };
            // Acks queued by receives posted since (post_recv) also need a flush.
            more |= !rr.backlog.is_empty();
            if let Some(w) = p.words.get(k) {
                w.store(
                    ((r as u64) << 48) | (rr.cons.tail() & PEEK_TAIL_MASK),
                    Ordering::Relaxed,
                );
            }
        }
        p.n.store(n, Ordering::Release);
        p.gen.store(rx.gen, Ordering::Relaxed);
        p.more.store(more, Ordering::Release);
    }

    /// The receive side's progress, once `rx_may_have_work` said there may be some
    /// (out of line, as `progress_tx`).
    #[inline(never)]
    pub(super) fn progress_rx(&self, active: &Active) -> usize {
        let Ok(mut g) = self.rx.try_lock() else {
            return 0;
        };
        let rx = &mut *g;
        let gen = self.region.claims_gen().load(Ordering::Acquire);
        if gen != rx.gen {
            rx.gen = gen;
            self.attach_rings(rx);
        }
        // A shared receive context looks up per ring the bindings of the endpoint the
        // sender addressed; every other endpoint polls without the lookup.
        let (mut work, more) = if rx.routed {
            self.poll_rings::<true>(active, rx)
        } else {
            self.poll_rings::<false>(active, rx)
        };
        rx.polls = rx.polls.wrapping_add(1);
        if rx.polls.is_multiple_of(256) || self.peek.liveness_due.load(Ordering::Relaxed) {
            self.peek.liveness_due.store(false, Ordering::Relaxed);
            work += self.check_liveness(active, rx);
        }
        self.publish_peek(rx, more);
        work
    }

    /// Drain the active rings (a bounded number of slots each): how many slots were
    /// taken, and whether work is left. With `ROUTED`, a ring's messages are reported
    /// with its [`Rx::via`] bindings when it has some.
    #[inline(always)]
    fn poll_rings<const ROUTED: bool>(&self, active: &Active, rx: &mut Rx) -> (usize, bool) {
        let geo = self.region.geometry();
        let max_msg = self.settings.max_msg_size;
        let mut work = 0;
        let mut more = false;
        let mut k = 0;
        while k < rx.active.len() {
            let r = rx.active[k];
            k += 1;
            let ring = self.region.ring(r);
            let via = if ROUTED { rx.via[r].clone() } else { None };
            let active = via.as_deref().unwrap_or(active);
            for n in 0..=POLL_BUDGET {
                let Some(i) = rx.rings[r].cons.peek(&ring) else {
                    break;
                };
                if n == POLL_BUDGET || rx.rings[r].backlog.len() >= ACK_BACKLOG_MAX {
                    more = true;
                    break;
                }
                let off = ring.slot_off(i);
                // Inline messages (the small-message path) are parsed from their first
                // line, read as words in place, without building a `Slot`; anything
                // else takes the general way.
                let word = |w: usize| u64::from_le(ring.slot_word(i, w).load(Ordering::Relaxed));
                let consumed = match proto::parse_inline_words(word(1), word(2), word(3), || {
                    word(SLOT_HDR / 8)
                }) {
                    Some(h) => self.handle_inline(active, rx, r, off, &h),
                    None => self.handle_other(active, rx, r, off, &geo, max_msg),
                };
                if !consumed {
                    more = true;
                    break;
                }
                rx.rings[r].cons.release(&ring);
                work += 1;
            }
            if !rx.rings[r].backlog.is_empty() {
                Self::flush_acks(&self.region, r, &mut rx.rings[r]);
                more |= !rx.rings[r].backlog.is_empty();
            }
        }
        (work, more)
    }

    /// Release the drained rings whose sender closed or died, if [`LIVENESS_EVERY`] has
    /// passed since the last check (out of line: one progress call in 256 gets here,
    /// busy or idle).
    #[cold]
    #[inline(never)]
    pub(super) fn check_liveness(&self, active: &Active, rx: &mut Rx) -> usize {
        if rx.last_check.elapsed() < LIVENESS_EVERY {
            return 0;
        }
        let mut work = 0;
        rx.last_check = Instant::now();
        let list = rx.active.clone();
        for r in list {
            let ring = self.region.ring(r);
            let closed = ring.state().load(Ordering::Acquire) == state::CLOSED;
            let rr = &rx.rings[r];
            let empty = rr.cons.peek(&ring).is_none();
            if empty && (closed || !region::pid_alive(rr.pid, rr.start)) {
                self.release_ring(active, rx, r);
                work += 1;
            }
        }
        work
    }

    // ---------------------------------------------------------------- posting receives

    pub(super) fn post_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let mut g = lock(&self.rx);
        active.post_recv(
            &mut *g,
            |rx| &mut rx.m,
            recv,
            |rx, d| {
                let to = Matched::new(d.recv, d.place, d.releases);
                self.deliver_unexp(active, rx, to, d.msg, d.payload);
            },
            |rx, payload| {
                // A discarded rendezvous: the sender waits for its acknowledgement.
                if let Unexp::Rts {
                    ring, claim, id, ..
                } = payload
                {
                    self.push_ack(rx, ring, claim, id, 0);
                }
            },
        )
    }
}

/// [`IoList::scatter`], with the one-buffer case (most receives) copied directly.
///
/// # Safety
/// As [`IoList::scatter`].
#[inline]
pub(super) unsafe fn scatter(buf: &IoList, offset: usize, src: *const u8, len: usize) {
    if let [(a, l)] = *buf.slice() {
        if offset < l {
            // SAFETY: the caller's contract; the range lies inside the one buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src,
                    a.wrapping_add(offset) as *mut u8,
                    len.min(l - offset),
                )
            };
        }
        return;
    }
    // SAFETY: forwarded.
    unsafe { buf.scatter(offset, src, len) }
}
