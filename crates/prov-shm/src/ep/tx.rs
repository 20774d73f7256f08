//! The transmit side: connections to peers' regions (a ring claimed in each), the
//! operation table, and sends — the inline fast path (one slot, complete at once), the
//! eager single-chunk path, and the tracked path that queues an operation on its
//! connection's FIFO for [`bounce`] to stream.
//!
//! Invariants:
//! - A connection's FIFO holds the operations that could not be posted at once, in
//!   submission order; nothing is posted around a non-empty FIFO, so a ring carries
//!   one operation's fragments contiguously and messages in order.
//! - An operation id ([`OpId`]) names a slab entry and its generation: an ack for a
//!   freed or reused entry matches nothing and is ignored.
//! - A connection lives at its peer's [`PeerIdx`] (from the AV index) in `Tx::conns`; it is
//!   replaced when the AV entry names another region or its peer is gone.
//! - Called with the `tx` lock held (never the `rx` lock).
//!
//! Nothing here panics on application or peer input.

use super::*;
use ofi_kit::epglue::check_len;

/// An operation's id, as the peer echoes it in its acknowledgement: the operation's
/// slot in the table (low 32 bits) and that slot's generation (high 32 bits, never 0:
/// id 0 names no operation), so an ack for a freed or reused slot matches nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OpId(u64);

impl OpId {
    /// The id of table slot `slot` in generation `gen`.
    #[inline]
    pub(super) fn new(slot: usize, gen: u32) -> OpId {
        OpId((u64::from(gen) << 32) | (slot as u64 & 0xffff_ffff))
    }

    /// The id a peer sent back (any value: checked against the table before use).
    #[inline]
    pub(super) fn from_wire(w: u64) -> OpId {
        OpId(w)
    }

    /// The id as it travels in a slot.
    #[inline]
    pub(super) fn wire(self) -> u64 {
        self.0
    }

    /// The table slot.
    #[inline]
    pub(super) fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    /// The slot's generation.
    #[inline]
    pub(super) fn gen(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

impl Shared {
    pub(super) fn connect(&self, tx: &mut Tx, idx: PeerIdx, name: &str) -> Result<()> {
        let region = Arc::new(Region::open_peer_keyed(name, self.settings.auth)?);
        let geo = region.geometry();
        let me = std::process::id() as u64;
        let token = (me << 32) | (Arc::as_ptr(&self.region) as u64 & 0xffff_fff0) | 1;
        for r in 0..geo.rings {
            let ring = region.ring(r);
            if ring
                .claim()
                .compare_exchange(0, token, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            ring.state().store(state::ATTACHING, Ordering::Relaxed);
            let tail = ring.tail_word().load(Ordering::Acquire);
            let ack_tail = ring.ack_tail_word().load(Ordering::Acquire);
            let (pa, pv) = ofi_kit::cma::probe_word();
            ring.write_identity(me as i32, &self.name(), pa, pv);
            ring.write_auth(self.settings.auth);
            ring.write_dest(region::name_digest(name));
            ring.state().store(state::READY, Ordering::Release);
            region.claims_gen().fetch_add(1, Ordering::AcqRel);
            if tx.conns.len() <= idx.0 {
                tx.conns.resize_with(idx.0 + 1, || None);
            }
            tx.conns[idx.0] = Some(Conn {
                addr: format!("{ADDR_PREFIX}{name}"),
                region: region.clone(),
                ring: r,
                claim: token,
                prod: Producer::new(geo.slots, tail),
                acks: Consumer::new(geo.slots, ack_tail),
                fifo: VecDeque::new(),
                waiting: 0,
                chunk: 0,
                small_chunk: 0,
                free_chunks: 0,
                dead: false,
                why: Errno::ECONNRESET,
            });
            return Ok(());
        }
        Err(Error::new(
            Errno::ENOSPC,
            format!(
                "{NAME}: every ring of peer {name:?} is taken ({} senders)",
                geo.rings
            ),
        ))
    }

    /// The connection index for `dest`, connecting on first use (or when the AV entry
    /// now names another peer, or the old connection's peer died).
    #[inline]
    pub(super) fn conn_for(&self, active: &Active, tx: &mut Tx, dest: u64) -> Result<PeerIdx> {
        // The same destination as last time and no AV change since: the same
        // connection, if it is still up (no AV lock, no address compare).
        let changes = active.av.changes();
        if let Some((d, c, idx)) = tx.last_dest {
            if d == dest && c == changes {
                if let Some(conn) = tx.conn(idx) {
                    if !conn.dead && conn.region.closed().load(Ordering::Relaxed) == 0 {
                        return Ok(idx);
                    }
                }
            }
        }
        let idx = self.conn_for_slow(active, tx, dest)?;
        tx.last_dest = Some((dest, changes, idx));
        Ok(idx)
    }

    /// [`Self::conn_for`] through the AV (out of line: the fast path stays small).
    #[inline(never)]
    pub(super) fn conn_for_slow(&self, active: &Active, tx: &mut Tx, dest: u64) -> Result<PeerIdx> {
        // The connection for this AV entry, if it is still for the same peer (no
        // allocation on this path: the address is compared in place).
        // A receive context of a scalable endpoint (`fi_rx_addr`) has a connection
        // of its own (see `scalable`).
        let rx_ctx = active.av.rx_index(dest);
        let (idx, fresh) = active.av.with_entry(dest, |e| {
            let idx = tx.peer_idx(e.index, rx_ctx);
            let ok = matches!(
                (tx.conn(idx), e.addr),
                (Some(c), Address::Str(a))
                    if !c.dead && c.addr == *a && c.region.closed().load(Ordering::Relaxed) == 0
            );
            let fresh = if ok {
                None
            } else {
                region_name(e.addr)
                    .ok()
                    .map(|n| (super::scalable::rx_region_name(n, rx_ctx), e.addr.clone()))
            };
            (idx, fresh)
        })?;
        if let Some((name, av_addr)) = fresh {
            if tx.conn(idx).is_some() {
                // Operations still waiting on the old connection can never complete.
                self.fail_conn(active, tx, idx, Errno::ECONNRESET);
            }
            if let Some(slot) = tx.conns.get_mut(idx.0) {
                if let Some(old) = slot.take() {
                    self.drop_conn(old);
                }
            }
            self.connect(tx, idx, &name)?;
            // The connection is known by the AV's address (a receive context's
            // region has another name).
            if let (Some(c), Address::Str(a)) = (tx.conn_mut(idx), av_addr) {
                c.addr = a;
            }
        }
        Ok(idx)
    }

    /// Reserve a slot on connection `idx` (`FI_EAGAIN` when full, an error when the
    /// peer is gone or its ring is corrupt).
    #[inline(always)]
    pub(super) fn reserve_slot(conn: &mut Conn) -> Result<usize> {
        let ring = conn.region.ring(conn.ring);
        match conn.prod.reserve(&ring) {
            Ok(Some(i)) => Ok(i),
            r => Self::reserve_failed(conn, r),
        }
    }

    /// [`Self::reserve_slot`] when the ring is full or corrupt (out of line).
    #[cold]
    #[inline(never)]
    pub(super) fn reserve_failed(
        conn: &mut Conn,
        r: std::result::Result<Option<usize>, crate::ring::Corrupt>,
    ) -> Result<usize> {
        match r {
            Ok(Some(i)) => Ok(i),
            Ok(None) => {
                if !conn.region.owner_alive() {
                    conn.dead = true;
                    // (New sends are refused; those queued on it are reset.)
                    conn.why = Errno::ECONNRESET;
                    return Err(Error::new(
                        Errno::ECONNREFUSED,
                        format!("{NAME}: the peer closed or died"),
                    ));
                }
                Err(Error::code_only(Errno::EAGAIN))
            }
            Err(c) => {
                conn.dead = true;
                conn.why = Errno::EPROTO;
                Err(Error::new(
                    Errno::EPROTO,
                    format!(
                        "{NAME}: peer ring corrupt (head {}, tail {})",
                        c.head, c.tail
                    ),
                ))
            }
        }
    }

    /// Record `op` in the operation table (`FI_EAGAIN` when `tx_size` operations are
    /// in flight).
    pub(super) fn alloc_op(&self, tx: &mut Tx, op: Op) -> Result<OpId> {
        if tx.live >= self.settings.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let idx = match tx.free.pop() {
            Some(i) => i as usize,
            None => {
                tx.ops.push(None);
                tx.gens.push(1);
                tx.ops.len() - 1
            }
        };
        tx.ops[idx] = Some(op);
        tx.live += 1;
        self.tx_work.fetch_add(1, Ordering::Relaxed);
        Ok(OpId::new(idx, tx.gens[idx]))
    }

    /// Record `op` and queue it at the end of its connection's FIFO.
    pub(super) fn queue_op(&self, tx: &mut Tx, op: Op) -> Result<OpId> {
        let conn = op.conn;
        let id = self.alloc_op(tx, op)?;
        if let Some(c) = tx.conn_mut(conn) {
            c.fifo.push_back(id.slot() as u32);
        }
        Ok(id)
    }

    /// Reserve a slot on the connection to `idx` for an operation that fits in one
    /// slot and, unless it is an `inject`, record the operation `op` makes as awaiting
    /// its acknowledgement: the slot and the id the acknowledgement will name (0 for
    /// an inject, which has none). `FI_EAGAIN` while operations wait in the
    /// connection's queue (they go first) or the ring is full.
    pub(super) fn one_slot_op(
        &self,
        tx: &mut Tx,
        idx: PeerIdx,
        inject: bool,
        op: impl FnOnce() -> Op,
    ) -> Result<(usize, u64)> {
        let conn = tx.live_conn(idx)?;
        if !conn.fifo.is_empty() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let slot = Self::reserve_slot(conn)?;
        if inject {
            return Ok((slot, 0));
        }
        let op = Op {
            stage: Stage::AwaitAck,
            ..op()
        };
        Ok((slot, self.await_op(tx, op)?.wire()))
    }

    /// Record `op`, posted already, as waiting for its peer's acknowledgement.
    pub(super) fn await_op(&self, tx: &mut Tx, op: Op) -> Result<OpId> {
        let conn = op.conn;
        let id = self.alloc_op(tx, op)?;
        if let Some(c) = tx.conn_mut(conn) {
            c.waiting += 1;
        }
        Ok(id)
    }

    /// Take operation `idx` (a slot of the table) out of the table, its slot's
    /// generation moved on.
    pub(super) fn free_op(&self, tx: &mut Tx, idx: usize) -> Option<Op> {
        let op = tx.ops.get_mut(idx)?.take()?;
        tx.gens[idx] = tx.gens[idx].wrapping_add(1).max(1);
        tx.free.push(idx as u32);
        tx.live -= 1;
        self.tx_work.fetch_sub(1, Ordering::Relaxed);
        Some(op)
    }

    /// Send `req`, whose buffers are `iov` (the request's own list, or its one buffer).
    #[inline(always)]
    pub(super) fn send<P: Payload>(
        &self,
        active: &Active,
        iov: P,
        req: &SendRequest,
    ) -> Result<()> {
        let (dest, ctx, data, flags, inject) =
            (req.dest, req.context, req.data, req.flags, req.inject);
        let (tag, tagged) = (req.tag.unwrap_or(0), req.tagged());
        let len = iov.total();
        check_len(
            NAME,
            "message",
            len,
            "max_msg_size",
            self.settings.max_msg_size,
        )?;
        // fi_inject*, or FI_INJECT on sendmsg: the buffer is free again on return.
        let copy = inject || flags.contains(OpFlags::INJECT);
        if copy {
            check_len(NAME, "inject", len, "inject_size", proto::INJECT_SIZE)?;
        }
        let want_cq = want_tx_cq(active, inject, flags)?;
        let mut hflags = 0u8;
        if tagged {
            hflags |= F_TAGGED;
        }
        if data.is_some() {
            hflags |= F_DATA;
        }
        let delivery = flags.contains(OpFlags::DELIVERY_COMPLETE) && !inject;
        if delivery {
            hflags |= F_ACK;
        }
        let cq_flags = req.completion_flags().bits();
        let mut tx = lock(&self.tx);
        let idx = self.conn_for(active, &mut tx, dest)?;
        let tx = &mut *tx;
        let conn = tx.live_conn(idx)?;
        let hdr = proto::InlineHdr {
            flags: hflags,
            len,
            tag,
            data: data.unwrap_or(0),
            id: 0,
        };
        if len <= INLINE_CAP && conn.fifo.is_empty() && !delivery {
            // The common small send: one slot, complete at once.
            let slot = Self::reserve_slot(conn)?;
            Self::write_inline(conn, slot, &hdr, &iov);
            // Nothing to report (no entry wanted, no counter): no call.
            if want_cq || active.txcntr.is_some() {
                active.complete_tx(ctx, cq_flags, want_cq, None);
            }
            return Ok(());
        }
        let t = Tracked {
            idx,
            ctx,
            cq_flags,
            want_cq,
            delivery,
            copy,
        };
        self.send_tracked(active, tx, t, hdr, iov.list())
    }

    /// Write an inline slot (header `hdr`, payload from `iov`) at `slot` of `conn`'s
    /// ring and publish it.
    #[inline(always)]
    pub(super) fn write_inline<P: Payload>(
        conn: &mut Conn,
        slot: usize,
        hdr: &proto::InlineHdr,
        iov: &P,
    ) {
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let map = conn.region.map();
        // The header words (what `proto::encode_inline` gives), stored in place.
        let b = proto::encode_inline(hdr);
        for (k, w) in b.chunks_exact(8).enumerate() {
            let mut x = [0u8; 8];
            x.copy_from_slice(w);
            ring.slot_word(slot, 1 + k)
                .store(u64::from_ne_bytes(x), Ordering::Relaxed);
        }
        // SAFETY: the slot lies inside the mapping (validated geometry) and has
        // INLINE_CAP ≥ len bytes after INLINE_OFF (checked by the callers); the
        // application's buffers are readable for `len` bytes (the C API's contract).
        unsafe { iov.gather_all(map.base().add(off + INLINE_OFF), hdr.len) };
        conn.prod.publish(&ring);
    }

    /// The rest of [`Shared::send`] (out of line): an inline send that waits for its
    /// acknowledgement, or a send queued behind others or too large for a slot.
    #[inline(never)]
    pub(super) fn send_tracked(
        &self,
        active: &Active,
        tx: &mut Tx,
        t: Tracked,
        mut hdr: proto::InlineHdr,
        iov: IoList,
    ) -> Result<()> {
        let idx = t.idx;
        let len = hdr.len;
        let conn = tx.live_conn(idx)?;
        if len <= INLINE_CAP && conn.fifo.is_empty() {
            let slot = Self::reserve_slot(conn)?;
            if t.delivery {
                let op = Op {
                    sent: len,
                    stage: Stage::AwaitAck,
                    ..Op::message(&t, &hdr, iov)
                };
                hdr.id = self.await_op(tx, op)?.wire();
            }
            let conn = tx.live_conn(idx)?;
            Self::write_inline(conn, slot, &hdr, &iov);
            if !t.delivery {
                active.complete_tx(t.ctx, t.cq_flags, t.want_cq, None);
            }
            return Ok(());
        }
        // One bounce chunk, nothing queued before it, no acknowledgement wanted: copied
        // now and complete at once, with no operation record (the eager common case;
        // the receiver delivers it straight from the chunk).
        if !t.delivery
            && conn.fifo.is_empty()
            && len <= conn.region.geometry().chunk_size
            && Self::put_fragment(conn, &iov, 0, len, |c| Slot {
                flags: hdr.flags,
                tag: hdr.tag,
                data: hdr.data,
                body: Body::Bounce(proto::BounceSlot {
                    total: len,
                    id: 0,
                    frag: proto::ChunkFrag {
                        offset: 0,
                        chunk: c,
                        clen: len,
                    },
                }),
            })
        {
            active.complete_tx(t.ctx, t.cq_flags, t.want_cq, None);
            return Ok(());
        }
        // Otherwise an inject is sent from a private copy, queued like any send.
        let (iov, owned) = if t.copy {
            let (iov, owned) = private_copy(&iov, len);
            (iov, Some(owned))
        } else {
            (iov, None)
        };
        let op = Op {
            owned,
            ..Op::message(&t, &hdr, iov)
        };
        self.queue_op(tx, op)?;
        self.stream(active, tx, idx);
        self.engine.kick();
        Ok(())
    }

    pub(super) fn drop_conn(&self, c: Conn) {
        let ring = c.region.ring(c.ring);
        if ring.claim().load(Ordering::Acquire) == c.claim {
            ring.state().store(state::CLOSED, Ordering::Release);
        }
    }

    /// The send side's progress, once `tx_work` says there is some (kept out of line:
    /// an idle poll only runs the checks in `Progress::progress`).
    #[inline(never)]
    pub(super) fn progress_tx(&self, active: &Active) -> usize {
        let Ok(mut g) = self.tx.try_lock() else {
            return 0;
        };
        let tx = &mut *g;
        tx.polls = tx.polls.wrapping_add(1);
        let check = tx.polls.is_multiple_of(256) && tx.last_check.elapsed() >= LIVENESS_EVERY;
        if check {
            tx.last_check = Instant::now();
        }
        let mut work = 0;
        for idx in (0..tx.conns.len()).map(PeerIdx) {
            let Some(conn) = tx.conn_mut(idx) else {
                continue;
            };
            if conn.waiting == 0 && conn.fifo.is_empty() {
                continue;
            }
            // Acks.
            let mut acks: [(u64, i32); 16] = [(0, 0); 16];
            let mut na = 0;
            {
                let ring = conn.region.ring(conn.ring);
                let ar = ring.acks();
                while na < acks.len() {
                    let Some(i) = conn.acks.peek(&ar) else {
                        break;
                    };
                    let id = ring.ack_id(i).load(Ordering::Relaxed);
                    let state = ring.ack_status(i).load(Ordering::Relaxed) as i32;
                    conn.acks.release(&ar);
                    acks[na] = (id, state);
                    na += 1;
                }
            }
            for &(wire, state) in &acks[..na] {
                let id = OpId::from_wire(wire);
                let oi = id.slot();
                let ok = matches!(tx.ops.get(oi), Some(Some(op))
                    if op.conn == idx && op.stage == Stage::AwaitAck
                        && tx.gens.get(oi).copied() == Some(id.gen()));
                if !ok {
                    self.corrupt.fetch_add(1, Ordering::Relaxed);
                    ofi_core::ofi_warn!(
                        crate::NAME,
                        "ep_data",
                        "ack for unknown operation {wire:#x} ignored"
                    );
                    continue;
                }
                if let Some(c) = tx.conn_mut(idx) {
                    c.waiting = c.waiting.saturating_sub(1);
                }
                if let Some(op) = self.free_op(tx, oi) {
                    // Read from the peer's region: an FI code or FI_EPROTO.
                    let err = Errno::from_peer_status(i64::from(state));
                    active.complete_tx(op.ctx, op.cq_flags, op.want_cq, err);
                }
                work += 1;
            }
            self.stream(active, tx, idx);
            if check {
                let dead = tx.conn(idx).is_some_and(|c| !c.region.owner_alive());
                if dead {
                    work += self.fail_conn(active, tx, idx, Errno::ECONNRESET);
                }
            }
        }
        work
    }

    /// Fail every operation of connection `idx` (its peer is gone).
    pub(super) fn fail_conn(
        &self,
        active: &Active,
        tx: &mut Tx,
        idx: PeerIdx,
        err: Errno,
    ) -> usize {
        if let Some(c) = tx.conn_mut(idx) {
            c.dead = true;
            c.why = err;
            c.fifo.clear();
            c.waiting = 0;
        }
        let mut n = 0;
        for oi in 0..tx.ops.len() {
            if matches!(&tx.ops[oi], Some(op) if op.conn == idx) {
                if let Some(op) = self.free_op(tx, oi) {
                    active.complete_tx(op.ctx, op.cq_flags, op.want_cq, Some(err));
                    n += 1;
                }
            }
        }
        n
    }
}

/// What a send carries: a list of buffers, or one buffer (most sends), kept as an
/// address and a length until an operation must be tracked.
pub(super) trait Payload: Copy {
    /// Total bytes.
    fn total(&self) -> usize;
    /// As a list.
    fn list(&self) -> IoList;
    /// Copy the first `len` (≤ `total`) bytes to `dst`.
    ///
    /// # Safety
    /// As [`IoList::gather`]: `dst` is writable for `len` bytes, the buffers are
    /// readable and do not overlap it.
    unsafe fn gather_all(&self, dst: *mut u8, len: usize);
}

impl Payload for IoList {
    #[inline]
    fn total(&self) -> usize {
        IoList::total(self)
    }
    #[inline]
    fn list(&self) -> IoList {
        *self
    }
    #[inline]
    unsafe fn gather_all(&self, dst: *mut u8, len: usize) {
        // SAFETY: forwarded.
        unsafe { self.gather(0, dst, len) }
    }
}

/// What [`Shared::send_tracked`] needs besides the header and the buffers.
pub(super) struct Tracked {
    /// The connection.
    pub(super) idx: PeerIdx,
    pub(super) ctx: usize,
    pub(super) cq_flags: u64,
    pub(super) want_cq: bool,
    /// `FI_DELIVERY_COMPLETE`: completed on the receiver's acknowledgement.
    pub(super) delivery: bool,
    /// The application may reuse the buffer on return (`fi_inject*`, `FI_INJECT`).
    pub(super) copy: bool,
}

impl Op {
    /// The queued operation of a message: `iov` holding the `hdr.len` bytes of the
    /// message `hdr` heads, sent for `t` (callers set the rest with struct update
    /// syntax).
    #[inline]
    fn message(t: &Tracked, hdr: &proto::InlineHdr, iov: IoList) -> Op {
        Op {
            iov,
            len: hdr.len,
            tag: hdr.tag,
            data: hdr.data,
            hflags: hdr.flags,
            ..Op::new(t.idx, t.ctx, t.cq_flags, t.want_cq)
        }
    }
}

/// A copy of the `len` bytes of `iov` the caller may reuse at once, and the list that
/// points into it (the copy must outlive every use of the list: the operation owns it).
pub(super) fn private_copy(iov: &IoList, len: usize) -> (IoList, Box<[u8]>) {
    let mut owned = vec![0u8; len].into_boxed_slice();
    // SAFETY: `owned` holds `len` bytes; the application's buffers are readable for
    // `len` bytes (the C API's contract for the call being served).
    unsafe { iov.gather(0, owned.as_mut_ptr(), len) };
    (IoList::one(owned.as_ptr() as usize, len), owned)
}

/// One application buffer: address and length.
#[derive(Clone, Copy)]
pub(super) struct OneBuf(pub(super) usize, pub(super) usize);

impl Payload for OneBuf {
    #[inline]
    fn total(&self) -> usize {
        self.1
    }
    #[inline]
    fn list(&self) -> IoList {
        IoList::one(self.0, self.1)
    }
    #[inline]
    unsafe fn gather_all(&self, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract; at most the buffer's length is read.
        unsafe { std::ptr::copy_nonoverlapping(self.0 as *const u8, dst, len.min(self.1)) };
    }
}

/// Whether a transmit operation with `flags` reports a completion entry (not for an
/// inject; with `FI_SELECTIVE_COMPLETION`, only with `FI_COMPLETION`); `FI_EAGAIN` when
/// it does and the CQ has no room for it.
#[inline]
pub(super) fn want_tx_cq(active: &Active, inject: bool, flags: OpFlags) -> Result<bool> {
    let Some(b) = active.txcq.as_ref().filter(|b| !inject && b.wants(flags)) else {
        return Ok(false);
    };
    if !b.cq.has_room() {
        return Err(Error::code_only(Errno::EAGAIN));
    }
    Ok(true)
}
