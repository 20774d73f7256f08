//! Progress, slot by slot: one handler per slot kind (inline message, RTS, RMA,
//! inline write, write fragment, atomic, bounce fragment), each taking a slot that
//! `Slot::parse` (or `proto::parse_inline`) has checked.
//!
//! Invariants:
//! - A handler returns `true` when the slot is consumed and `false` to stall the ring
//!   (the slot is read again later: only for want of room for an unexpected message).
//! - A bounce message's fragments arrive contiguous and in order; any other slot in
//!   the middle of one, or a fragment out of sequence, is counted as corrupt
//!   ([`Endpoint::corrupt_slots`](super::Endpoint::corrupt_slots)), its chunk freed
//!   and the slot skipped.
//! - Slot and chunk bytes are the peer's and may change under us: they are read by
//!   word loads or raw copies, never borrowed.
//!
//! Nothing here panics on peer input.

use super::*;
use crate::proto::{BounceSlot, ChunkFrag, RmaSlot, RtsSlot, WriteFragSlot, WriteInlineSlot};

impl Shared {
    /// Parse and handle slot `slot_off` of ring `r` when it is not a valid inline slot
    /// (out of line: it keeps the large `Slot` off the small-message path); true when
    /// the slot is consumed (a bad one is counted and skipped).
    #[inline(never)]
    pub(super) fn handle_other(
        &self,
        active: &Active,
        rx: &mut Rx,
        r: usize,
        slot_off: usize,
        geo: &region::Geometry,
        max_msg: usize,
    ) -> bool {
        let mut hdr = [0u8; proto::PARSE_LEN];
        self.region.map().read_bytes(slot_off, &mut hdr);
        match Slot::parse(&hdr, geo, max_msg) {
            Ok(s) => self.handle_slot(active, rx, r, slot_off, s),
            Err(why) => self.skip_slot(r, &format!("bad slot ({why})")),
        }
    }

    /// Deliver the inline message of slot `slot_off` of ring `r` (its header checked by
    /// `proto::parse_inline` or `Slot::parse`); false if it must wait (no room for an
    /// unexpected message).
    #[inline]
    pub(super) fn handle_inline(
        &self,
        active: &Active,
        rx: &mut Rx,
        r: usize,
        slot_off: usize,
        h: &proto::InlineHdr,
    ) -> bool {
        if rx.rings[r].asm.is_some() {
            return self.skip_slot(r, "inline slot in the middle of a bounce message");
        }
        let claim = rx.rings[r].claim;
        let inc = Incoming {
            src: self.src_of(active, &mut rx.rings[r]),
            tag: h.tag,
            len: h.len,
            data: if h.flags & F_DATA != 0 {
                Some(h.data)
            } else {
                None
            },
            tagged: h.flags & F_TAGGED != 0,
        };
        let ack = if h.flags & F_ACK != 0 {
            Some((r, claim, h.id))
        } else {
            None
        };
        // SAFETY: the payload lies inside the slot (len ≤ INLINE_CAP checked by the
        // parser), inside the mapping.
        unsafe {
            let payload = self.region.map().base().add(slot_off + INLINE_OFF);
            self.deliver_whole(active, rx, &inc, r, ack, payload)
        }
    }

    /// Handle one slot: the handler of its kind; `false`: stall the ring (leave the slot
    /// for later).
    pub(super) fn handle_slot(
        &self,
        active: &Active,
        rx: &mut Rx,
        r: usize,
        slot_off: usize,
        s: Slot,
    ) -> bool {
        if rx.rings[r].asm.is_some() && !matches!(s.body, Body::Bounce(_)) {
            // Only the fragments of the bounce message under way may come until it ends.
            if let Body::WriteFrag(w) = s.body {
                self.region.ring(r).release_chunk(w.frag.chunk);
            }
            let kind = s.body.kind();
            return self.skip_slot(
                r,
                &format!("{kind:?} slot in the middle of a bounce message"),
            );
        }
        let at = SlotAt {
            r,
            claim: rx.rings[r].claim,
            slot_off,
            src: self.src_of(active, &mut rx.rings[r]),
        };
        match s.body {
            Body::Inline { len, id } => {
                let h = proto::InlineHdr {
                    flags: s.flags,
                    len,
                    tag: s.tag,
                    data: s.data,
                    id,
                };
                self.handle_inline(active, rx, r, slot_off, &h)
            }
            Body::Rts(rts) => self.on_rts(active, rx, &at, &s, &rts),
            Body::Rma(rma) => self.on_rma(active, rx, &at, &s, &rma),
            Body::Atomic(atomic) => self.on_atomic(rx, &at, &s, &atomic),
            Body::WriteFrag(w) => self.on_write_fragment(active, rx, &at, &s, &w),
            Body::WriteInline(w) => self.on_write_inline(active, rx, &at, &s, &w),
            Body::Bounce(b) => self.on_bounce(active, rx, &at, &s, &b),
        }
    }

    /// A request to send (a large message the receiver copies with CMA): matched now, or
    /// queued as unexpected.
    fn on_rts(&self, active: &Active, rx: &mut Rx, at: &SlotAt, s: &Slot, rts: &RtsSlot) -> bool {
        let SlotAt { r, claim, .. } = *at;
        let inc = at.incoming(s, rts.total);
        let payload = Unexp::Rts {
            via: rx.via[r].clone(),
            ring: r,
            claim,
            pid: rx.rings[r].pid,
            bufs: rts.bufs,
            id: rts.id,
        };
        let Some((recv, place, released)) = taken(rx.m.match_incoming(&inc)) else {
            return rx.m.push_unexpected_sized(inc, payload, 64).is_ok();
        };
        self.deliver_unexp(
            active,
            rx,
            Matched::new(&recv, place, released),
            &inc,
            payload,
        );
        true
    }

    /// An RMA read or write by CMA: carried out and acknowledged (its initiator always
    /// waits for the acknowledgement).
    fn on_rma(&self, active: &Active, rx: &mut Rx, at: &SlotAt, s: &Slot, rma: &RmaSlot) -> bool {
        let access = RmaAccess {
            source: RmaSource::Cma {
                pid: rx.rings[at.r].pid,
                iov: rma.bufs.used(),
            },
            read: rma.read,
            total: rma.total,
            at: rma.at,
            data: s.cq_data(),
        };
        // SAFETY: no inline pointer.
        let state = unsafe { self.rma_target(active, &access) };
        self.push_ack(rx, at.r, at.claim, rma.id, state);
        true
    }

    /// An atomic: applied and, when the initiator wants it, acknowledged.
    fn on_atomic(&self, rx: &mut Rx, at: &SlotAt, s: &Slot, atomic: &AtomicSlot) -> bool {
        let pid = rx.rings[at.r].pid;
        // SAFETY: inline data lies inside the slot (length checked by parse
        // against ATOMIC_INLINE_CAP), inside the mapping.
        let src = unsafe {
            self.region
                .map()
                .base()
                .add(at.slot_off + proto::ATOMIC_INLINE_OFF)
        };
        let state = self.atomic_target(pid, atomic, atomic.inline.then_some(src));
        self.ack_if_asked(rx, at, s, atomic.id, state);
        true
    }

    /// A fragment of an RMA write streamed through a bounce chunk: checked (the whole range
    /// on the first one), copied, and on the last one counted, reported and acknowledged.
    fn on_write_fragment(
        &self,
        active: &Active,
        rx: &mut Rx,
        at: &SlotAt,
        s: &Slot,
        w: &WriteFragSlot,
    ) -> bool {
        let (r, id, frag) = (at.r, w.id, w.frag);
        let ring = self.region.ring(r);
        let whole_range = || {
            self.mr
                .lookup_remote(w.at.key, w.at.raddr, w.total, OpFlags::REMOTE_WRITE)
        };
        if frag.offset == 0 {
            // Check the whole range first, so a write that would fail part way
            // leaves the target untouched.
            let state = match whole_range() {
                Ok(_) => 0,
                Err(e) => e.code().0,
            };
            rx.rings[r].wr = Some((id, state));
        }
        let Some((wid, mut state)) = rx.rings[r].wr else {
            ring.release_chunk(frag.chunk);
            return self.skip_slot(r, "RMA fragment without a write");
        };
        if wid != id {
            ring.release_chunk(frag.chunk);
            return self.skip_slot(r, "RMA fragment of another write");
        }
        if state == 0 {
            // SAFETY: chunk < chunks and clen <= chunk_size were checked by parse,
            // so the chunk lies inside the mapping.
            let src = unsafe { self.region.map().base().add(ring.chunk_off(frag.chunk)) };
            // SAFETY: `src` holds `clen` bytes of the chunk (see above).
            state = unsafe { self.write_fragment(&w.at, frag.offset, src, frag.clen) };
        }
        ring.release_chunk(frag.chunk);
        rx.rings[r].wr = Some((id, state));
        if frag.offset + frag.clen < w.total {
            return true;
        }
        rx.rings[r].wr = None;
        if state == 0 {
            if let Ok(region) = whole_range() {
                region.count_access();
            }
            self.remote_access_done(active, false, w.total, s.cq_data());
        }
        self.ack_if_asked(rx, at, s, id, state);
        true
    }

    /// An RMA write whose data lies in the slot: carried out and, when wanted,
    /// acknowledged.
    fn on_write_inline(
        &self,
        active: &Active,
        rx: &mut Rx,
        at: &SlotAt,
        s: &Slot,
        w: &WriteInlineSlot,
    ) -> bool {
        // SAFETY: the data lies inside the slot (len ≤ RMA_INLINE_CAP checked by
        // parse), inside the mapping.
        let src = unsafe {
            self.region
                .map()
                .base()
                .add(at.slot_off + proto::RMA_INLINE_OFF)
        };
        let access = RmaAccess {
            source: RmaSource::Inline(src),
            read: false,
            total: w.len,
            at: w.at,
            data: s.cq_data(),
        };
        // SAFETY: `src` holds `len` bytes of the slot (see above).
        let state = unsafe { self.rma_target(active, &access) };
        self.ack_if_asked(rx, at, s, w.id, state);
        true
    }

    /// Acknowledge operation `id` of slot `s` (read at `at`) with `state` when its
    /// sender asked (`F_ACK`).
    fn ack_if_asked(&self, rx: &mut Rx, at: &SlotAt, s: &Slot, id: u64, state: i32) {
        if s.wants_ack() {
            self.push_ack(rx, at.r, at.claim, id, state);
        }
    }

    /// A bounce fragment of a message: the whole message in one chunk is delivered at once;
    /// otherwise the fragments are assembled into the matched receive or an unexpected
    /// buffer, and the last one completes it. False when the message must wait for room.
    fn on_bounce(
        &self,
        active: &Active,
        rx: &mut Rx,
        at: &SlotAt,
        s: &Slot,
        b: &BounceSlot,
    ) -> bool {
        let (total, id) = (b.total, b.id);
        let ChunkFrag {
            offset,
            chunk,
            clen,
        } = b.frag;
        let SlotAt { r, claim, .. } = *at;
        let map = self.region.map();
        let ring = self.region.ring(r);
        if offset == 0 && clen == total && rx.rings[r].asm.is_none() {
            // The whole message in one chunk (every eager send): delivered
            // straight from the chunk, as an inline slot is.
            let inc = at.incoming(s, total);
            let ack = s.wants_ack().then_some((r, claim, id));
            // SAFETY: chunk < chunks and clen ≤ chunk_size were checked by
            // parse, so the chunk's `total` bytes lie inside the mapping.
            let done = unsafe {
                let src = map.base().add(ring.chunk_off(chunk));
                self.deliver_whole(active, rx, &inc, r, ack, src)
            };
            if done {
                ring.release_chunk(chunk);
            }
            return done;
        }
        if offset == 0 {
            if rx.rings[r].asm.is_some() {
                ring.release_chunk(chunk);
                return self.skip_slot(r, "a new bounce message before the last one ended");
            }
            let inc = at.incoming(s, total);
            let target = match taken(rx.m.match_incoming(&inc)) {
                Some((recv, place, released)) => AsmTarget::Recv {
                    recv,
                    place,
                    released,
                },
                None => {
                    if !rx.m.has_room_for_unexpected(total) {
                        return false;
                    }
                    AsmTarget::Unexp(vec![0u8; total])
                }
            };
            rx.rings[r].asm = Some(Asm {
                id,
                got: 0,
                inc,
                ack: s.wants_ack(),
                target,
            });
        }
        let Some(a) = rx.rings[r].asm.as_mut() else {
            ring.release_chunk(chunk);
            return self.skip_slot(r, "bounce fragment without a message");
        };
        if a.id != id || a.got != offset || a.inc.len != total {
            ring.release_chunk(chunk);
            return self.skip_slot(r, "bounce fragment out of sequence");
        }
        // SAFETY: chunk < chunks and clen ≤ chunk_size were checked by parse,
        // so the chunk lies inside the mapping.
        let src = unsafe { map.base().add(ring.chunk_off(chunk)) };
        let n = if total == 0 { 0 } else { clen };
        match &mut a.target {
            AsmTarget::Recv { recv, place, .. } => {
                let room = place.len.saturating_sub(offset).min(n);
                // SAFETY: the receive buffer is the application's; `room`
                // stays inside the placement.
                unsafe { recv.buf.scatter(place.offset + offset, src, room) };
            }
            AsmTarget::Unexp(v) => {
                if let Some(d) = v.get_mut(offset..offset + n) {
                    // SAFETY: `d` holds n bytes; the chunk holds ≥ n.
                    unsafe { std::ptr::copy_nonoverlapping(src, d.as_mut_ptr(), n) };
                }
            }
        }
        ring.release_chunk(chunk);
        a.got += n;
        if a.got < total {
            return true;
        }
        self.finish_bounce(active, rx, r, claim);
        true
    }

    /// The last fragment of the bounce message on ring `r` (claim `claim`) is in:
    /// complete its receive, or match or queue it as unexpected now, and acknowledge it
    /// when its sender asked.
    fn finish_bounce(&self, active: &Active, rx: &mut Rx, r: usize, claim: u64) {
        let Some(a) = rx.rings[r].asm.take() else {
            return;
        };
        let ack = if a.ack { Some((r, claim, a.id)) } else { None };
        match a.target {
            AsmTarget::Recv {
                recv,
                place,
                released,
            } => {
                active.complete_rx(&recv, place, &a.inc, released, None);
                if let Some((ring, claim, id)) = ack {
                    self.push_ack(rx, ring, claim, id, 0);
                }
            }
            AsmTarget::Unexp(data) => {
                // A receive may have been posted while the message streamed in.
                let inc = a.inc;
                let payload = Unexp::Data {
                    data,
                    via: rx.via[r].clone(),
                };
                let m = taken(rx.m.match_incoming(&inc));
                // Placed or buffered is taken in (as above): acknowledged now;
                // a message the full queue drops fails its sender.
                let status = match m {
                    Some((recv, place, rel)) => {
                        self.deliver_unexp(
                            active,
                            rx,
                            Matched::new(&recv, place, rel),
                            &inc,
                            payload,
                        );
                        0
                    }
                    None => match rx.m.push_unexpected(inc, payload) {
                        Ok(()) => 0,
                        Err(_) => {
                            ofi_core::ofi_warn!(
                                crate::NAME,
                                "ep_data",
                                "unexpected queue full: a {}-byte message was \
                                 dropped",
                                inc.len
                            );
                            Errno::ENOBUFS.0
                        }
                    },
                };
                if let Some((ring, claim, id)) = ack {
                    self.push_ack(rx, ring, claim, id, status);
                }
            }
        }
    }

    /// A slot that fails a check: counted, logged and skipped (true).
    #[cold]
    #[inline(never)]
    fn skip_slot(&self, r: usize, why: &str) -> bool {
        self.corrupt.fetch_add(1, Ordering::Relaxed);
        ofi_core::ofi_warn!(crate::NAME, "ep_data", "ring {r}: {why}; slot skipped");
        true
    }
}

/// Where a slot was read: its ring, the ring's claim token, the slot's offset in the
/// region and the sender's fabric address.
#[derive(Clone, Copy)]
pub(super) struct SlotAt {
    r: usize,
    claim: u64,
    slot_off: usize,
    src: u64,
}

impl SlotAt {
    /// The incoming message of `len` bytes that slot `s` announces.
    fn incoming(&self, s: &Slot, len: usize) -> Incoming {
        Incoming {
            src: self.src,
            tag: s.tag,
            len,
            data: s.cq_data(),
            tagged: s.flags & F_TAGGED != 0,
        }
    }
}

/// The receive a matcher's answer names, owned (a multi-receive buffer's receive is
/// copied), with the placement and whether this message releases it; `None` for an
/// unexpected message.
fn taken(m: Match<'_, IoList>) -> Option<(PostedRecv<IoList>, Placement, bool)> {
    match m {
        Match::Recv { recv, place } => Some((recv, place, false)),
        Match::Multi { buf, place } => Some((buf.recv().clone(), place, buf.is_released())),
        Match::Unexpected => None,
    }
}
