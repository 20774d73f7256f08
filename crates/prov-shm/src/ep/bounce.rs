//! Large transfers: the bounce chunks of a peer's ring (fragments copied through them,
//! the receiver frees each chunk after reading it) and CMA (an RTS slot names the
//! sender's buffers; the receiver copies them with `process_vm_readv` and acks).
//!
//! Invariants:
//! - Only the sender fills a chunk and only the receiver frees it, so a chunk seen
//!   free stays free until this side fills it ([`Conn`]'s `free_chunks`).
//! - The fragments of one operation are published back to back in its ring, in
//!   offset order; a fragment is written only when both its chunk and a slot are free,
//!   otherwise nothing is written and the operation waits at the FIFO's head.
//! - Application buffers are read only through the addresses of the call that
//!   submitted them (valid until completion: the C API's contract); a peer's memory
//!   only by the kernel (CMA).
//!
//! Nothing here panics on application or peer input.

use super::*;

impl Shared {
    /// Copy `n` bytes of `iov` from offset `from` into `conn`'s next bounce chunk and
    /// publish a slot for them (`slot`, given the chunk index). False, with nothing
    /// written, while that chunk or the ring is not free.
    pub(super) fn put_fragment(
        conn: &mut Conn,
        iov: &IoList,
        from: usize,
        n: usize,
        slot_for: impl FnOnce(usize) -> Slot,
    ) -> bool {
        let ring = conn.region.ring(conn.ring);
        let chunks = conn.region.geometry().chunks;
        let small = n <= SMALL_BOUNCE;
        let c = if small { conn.small_chunk } else { conn.chunk };
        let bit = 1u32 << (c % region::MAX_CHUNKS);
        if conn.free_chunks & bit == 0 {
            for k in 0..conn.region.geometry().chunks.min(region::MAX_CHUNKS) {
                if ring.chunk_state(k).load(Ordering::Acquire) == 0 {
                    conn.free_chunks |= 1 << k;
                }
            }
            if conn.free_chunks & bit == 0 {
                return false;
            }
        }
        let Ok(slot) = Self::reserve_slot(conn) else {
            return false;
        };
        let ring = conn.region.ring(conn.ring);
        conn.free_chunks &= !bit;
        let map = conn.region.map();
        // SAFETY: the chunk lies inside the mapping (validated geometry) and holds
        // chunk_size ≥ n bytes (callers); the source buffers are the application's.
        unsafe { iov.gather(from, map.base().add(ring.chunk_off(c)), n) };
        ring.chunk_state(c).store(1, Ordering::Relaxed);
        let s = slot_for(c);
        let hdr = s.to_bytes();
        let used = proto::encoded_len(&s.body);
        map.write_bytes(ring.slot_off(slot) + 8, &hdr[8..used]);
        conn.prod.publish(&ring);
        if small {
            conn.small_chunk = (c + 1) % chunks.clamp(1, SMALL_SPAN);
        } else {
            conn.chunk = (c + 1) % chunks.max(1);
        }
        true
    }

    /// Move the queued sends of connection `idx` on as far as resources allow.
    pub(super) fn stream(&self, active: &Active, tx: &mut Tx, idx: PeerIdx) {
        'ops: loop {
            // (The fields directly: `conn` and `ops` are borrowed together.)
            let Some(Some(conn)) = tx.conns.get_mut(idx.0) else {
                return;
            };
            let Some(&front) = conn.fifo.front() else {
                return;
            };
            let oi = front as usize;
            let Some(Some(op)) = tx.ops.get_mut(oi) else {
                conn.fifo.pop_front();
                continue;
            };
            let ring = conn.region.ring(conn.ring);
            let id = OpId::new(oi, tx.gens[oi]).wire();
            // A small message queued behind others goes inline when its turn comes.
            if op.rma.is_none() && op.len <= INLINE_CAP {
                let slot = match Self::reserve_slot(conn) {
                    Ok(i) => i,
                    Err(_) => break 'ops,
                };
                let ring = conn.region.ring(conn.ring);
                let s = op.slot(Body::Inline { len: op.len, id });
                let off = ring.slot_off(slot);
                let hdr = s.to_bytes();
                let map = conn.region.map();
                map.write_bytes(off + 8, &hdr[8..INLINE_OFF]);
                // SAFETY: the slot holds INLINE_CAP ≥ len bytes after INLINE_OFF inside
                // the mapping; the application's buffers are readable (C contract).
                unsafe { op.iov.gather(0, map.base().add(off + INLINE_OFF), op.len) };
                conn.prod.publish(&ring);
                self.sent_whole(active, tx, idx, oi);
                continue;
            }
            // Messages that fit one bounce chunk go eagerly through it (the send
            // completes without the receiver); those up to `cma_threshold` stream
            // through the chunks; longer ones use CMA once the receiver has probed it
            // successfully.
            let eager = op.len <= conn.region.geometry().chunk_size;
            let use_cma = !self.settings.disable_cma
                && !eager
                && op.rma.is_none()
                && op.len > self.settings.cma_threshold;
            let cma = ring.cma().load(Ordering::Acquire);
            if use_cma && cma == cma_state::UNKNOWN {
                return;
            }
            if use_cma && cma == cma_state::OK {
                let slot = match Self::reserve_slot(conn) {
                    Ok(i) => i,
                    Err(_) => break 'ops,
                };
                let ring = conn.region.ring(conn.ring);
                let s = op.slot(Body::Rts(proto::RtsSlot {
                    total: op.len,
                    id,
                    bufs: proto::BufList::from_pairs(op.iov.slice()),
                }));
                let hdr = s.to_bytes();
                conn.region
                    .map()
                    .write_bytes(ring.slot_off(slot) + 8, &hdr[8..]);
                conn.prod.publish(&ring);
                op.stage = Stage::AwaitAck;
                conn.waiting += 1;
                conn.fifo.pop_front();
                continue;
            }
            // Bounce.
            let chunk_size = conn.region.geometry().chunk_size;
            while op.sent < op.len {
                let n = (op.len - op.sent).min(chunk_size);
                let (total, offset) = (op.len, op.sent);
                let put = Self::put_fragment(conn, &op.iov, offset, n, |chunk| {
                    let frag = proto::ChunkFrag {
                        offset,
                        chunk,
                        clen: n,
                    };
                    op.slot(match op.rma {
                        Some(at) => Body::WriteFrag(proto::WriteFragSlot {
                            total,
                            id,
                            at,
                            frag,
                        }),
                        None => Body::Bounce(proto::BounceSlot { total, id, frag }),
                    })
                });
                if !put {
                    break 'ops;
                }
                op.sent += n;
            }
            self.sent_whole(active, tx, idx, oi);
        }
        // Stopped for want of room (the receiver frees slots and chunks as it reads),
        // or because the connection broke on the way: then what is queued on it can
        // never go, and fails now — FI_EPROTO for a corrupt ring, FI_ECONNRESET for a
        // peer gone (as the liveness check fails them).
        if let Some(c) = tx.conn(idx) {
            if c.dead {
                let why = c.why;
                self.fail_conn(active, tx, idx, why);
            }
        }
    }

    /// Operation `oi`, at the head of connection `idx`'s queue, has gone whole into the
    /// ring: it leaves the queue, then waits for the receiver's ack (`F_ACK`) or
    /// completes now.
    fn sent_whole(&self, active: &Active, tx: &mut Tx, idx: PeerIdx, oi: usize) {
        let (Some(Some(conn)), Some(Some(op))) = (tx.conns.get_mut(idx.0), tx.ops.get_mut(oi))
        else {
            return;
        };
        conn.fifo.pop_front();
        if op.hflags & F_ACK != 0 {
            op.stage = Stage::AwaitAck;
            conn.waiting += 1;
        } else if let Some(op) = self.free_op(tx, oi) {
            active.complete_tx(op.ctx, op.cq_flags, op.want_cq, None);
        }
    }

    /// CMA-read an RTS into `dst` (the placement's part of the receive buffer).
    ///
    /// # Safety
    /// `dst` describes memory valid for writes with no Rust reference to it live (a
    /// posted receive buffer: the application left it to the provider until the
    /// receive completes).
    pub(super) unsafe fn cma_read(pid: i32, dst: IoList, iov: &[(u64, u64)]) -> i32 {
        // SAFETY: the caller's contract for `dst`.
        match unsafe { ofi_kit::cma::readv(pid, dst.slice(), iov) } {
            Ok(n) if n == dst.total() => 0,
            Ok(_) => Errno::EIO.0,
            Err(e) if e == libc::ESRCH => Errno::ECONNRESET.0,
            Err(_) => Errno::EIO.0,
        }
    }

    /// Copy one RMA write fragment (`clen` bytes at `src`, in the ring's chunk) to
    /// `raddr + offset` of region `key`, after checking it in the MR table. Returns the
    /// status (0 or an `FI_*` code).
    ///
    /// # Safety
    /// `src` is valid for reads of `clen` bytes (a chunk of a mapped region).
    pub(super) unsafe fn write_fragment(
        &self,
        at: &proto::RemoteMem,
        offset: usize,
        src: *const u8,
        clen: usize,
    ) -> i32 {
        let Some(a) = at.raddr.checked_add(offset as u64) else {
            return Errno::EFAULT.0;
        };
        let region = match self
            .mr
            .lookup_remote(at.key, a, clen, OpFlags::REMOTE_WRITE)
        {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let Some(segs) = super::rma::segment_list(region.segments()) else {
            return Errno::EINVAL.0;
        };
        // SAFETY: the MR table checked [a, a + clen) inside a live registration granting
        // remote writes; `src` holds `clen` bytes (the caller's chunk).
        unsafe { segs.scatter(0, src, clen) };
        0
    }
}
