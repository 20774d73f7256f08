//! RMA and atomics: the initiator's side (one slot per operation, or a write streamed
//! through bounce chunks; completed on the target's ack) and the target's side
//! (every access checked against the MR table before any byte moves; data copied
//! inline from the slot, with CMA, or from a chunk; atomics applied under the
//! process's atomic locks).
//!
//! Invariants:
//! - An access outside a registration, or without its access rights, moves no data
//!   and acks its `FI_*` error code.
//! - A write streamed in fragments is checked as a whole on its first fragment, so a
//!   write that would fail part way leaves the target untouched.
//!
//! Nothing here panics on application or peer input.

use super::*;
use ofi_kit::atomic::{AtomicArgs, AtomicCall};
use ofi_kit::epglue::check_len;

impl Shared {
    /// Start the RMA write or read `req`, whose local buffers are `local`.
    pub(super) fn rma(&self, active: &Active, local: IoList, req: &RmaRequest<'_>) -> Result<()> {
        let at = proto::RemoteMem {
            key: req.remote.key,
            raddr: req.remote.addr,
        };
        let (dest, ctx, data, read, flags, inject) = (
            req.peer,
            req.context,
            req.data,
            req.is_read(),
            req.flags,
            req.inject,
        );
        let len = local.total();
        check_len(NAME, "RMA", len, "max_msg_size", self.settings.max_msg_size)?;
        // fi_inject_write*, or FI_INJECT on writemsg: the buffer is free on return.
        let copy = !read && (inject || flags.contains(OpFlags::INJECT));
        if copy {
            check_len(NAME, "inject write", len, "inject_size", proto::INJECT_SIZE)?;
        }
        let want_cq = want_tx_cq(active, inject, flags)?;
        let cq_flags = (OpFlags::RMA | if read { OpFlags::READ } else { OpFlags::WRITE }).bits();
        let mut g = lock(&self.tx);
        let tx = &mut *g;
        let idx = self.conn_for(active, tx, dest)?;
        let conn = tx.live_conn(idx)?;
        // Writes too large for a slot stream through the bounce chunks below the CMA
        // threshold, or always when CMA is disabled or refused, or the write is an
        // inject (streamed from a private copy).
        let refused =
            conn.region.ring(conn.ring).cma().load(Ordering::Acquire) == cma_state::REFUSED;
        if !read
            && len > proto::RMA_INLINE_CAP
            && (copy || self.settings.disable_cma || refused || len <= self.settings.cma_threshold)
        {
            let (local, owned) = if copy {
                let (l, o) = private_copy(&local, len);
                (l, Some(o))
            } else {
                (local, None)
            };
            let op = Op {
                iov: local,
                len,
                data: data.unwrap_or(0),
                hflags: F_ACK | if data.is_some() { F_DATA } else { 0 },
                rma: Some(at),
                owned,
                ..Op::new(idx, ctx, cq_flags, want_cq)
            };
            self.queue_op(tx, op)?;
            self.stream(active, tx, idx);
            self.engine.kick();
            return Ok(());
        }
        let (slot, id) = self.one_slot_op(tx, idx, inject, || Op {
            iov: local,
            len,
            data: data.unwrap_or(0),
            sent: len,
            ..Op::new(idx, ctx, cq_flags, want_cq)
        })?;
        let conn = tx.live_conn(idx)?;
        let mut hflags = if data.is_some() { F_DATA } else { 0 };
        if !inject {
            hflags |= F_ACK;
        }
        let inline = !read && len <= proto::RMA_INLINE_CAP;
        let body = if inline {
            Body::WriteInline(proto::WriteInlineSlot { len, id, at })
        } else {
            Body::Rma(proto::RmaSlot {
                read,
                total: len,
                id,
                at,
                bufs: proto::BufList::from_pairs(local.slice()),
            })
        };
        let s = Slot {
            flags: hflags,
            tag: 0,
            data: data.unwrap_or(0),
            body,
        };
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let hdr = s.to_bytes();
        let map = conn.region.map();
        if inline {
            map.write_bytes(off + 8, &hdr[8..proto::RMA_INLINE_OFF]);
            // SAFETY: the slot has RMA_INLINE_CAP ≥ len bytes after RMA_INLINE_OFF,
            // inside the mapping; the application's buffers are readable (C contract).
            unsafe { local.gather(0, map.base().add(off + proto::RMA_INLINE_OFF), len) };
        } else {
            map.write_bytes(off + 8, &hdr[8..]);
        }
        conn.prod.publish(&ring);
        Ok(())
    }

    /// Carry out the RMA access `a` at this (target) endpoint: check it against the
    /// MR table, copy with CMA or from inline data, count it and report remote CQ
    /// data. Returns the ack status.
    ///
    /// # Safety
    /// An [`RmaSource::Inline`] pointer is valid for reads of `a.total` bytes (inside a
    /// slot of a mapped region).
    pub(super) unsafe fn rma_target(&self, active: &Active, a: &RmaAccess<'_>) -> i32 {
        let (read, total, at) = (a.read, a.total, a.at);
        let access = if read {
            OpFlags::REMOTE_READ
        } else {
            OpFlags::REMOTE_WRITE
        };
        let region = match self.mr.lookup_remote(at.key, at.raddr, total, access) {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let Some(segs) = segment_list(region.segments()) else {
            return Errno::EINVAL.0;
        };
        let state = match a.source {
            RmaSource::Cma { .. } if self.settings.disable_cma => Errno::EOPNOTSUPP.0,
            RmaSource::Cma { pid, iov } => {
                // SAFETY: the segments are the registration's memory, which the MR table
                // checked covers `total` bytes with this access; a registration leaves
                // its memory to remote access until it is closed (fi_mr(3)), and the
                // provider holds it only as addresses. The initiator's buffers (ours
                // too when both endpoints live in this process) belong to its pending
                // fi_read, whose contract keeps them valid and untouched until it
                // completes, after this copy.
                let r = unsafe {
                    if read {
                        ofi_kit::cma::writev(pid, segs.slice(), iov)
                    } else {
                        ofi_kit::cma::readv(pid, segs.slice(), iov)
                    }
                };
                match r {
                    Ok(k) if k == total => 0,
                    Ok(_) => Errno::EIO.0,
                    Err(e) if e == libc::ESRCH => Errno::ECONNRESET.0,
                    Err(e) if e == libc::EPERM || e == libc::ENOSYS => Errno::EOPNOTSUPP.0,
                    Err(_) => Errno::EIO.0,
                }
            }
            RmaSource::Inline(src) => {
                // SAFETY: `src` holds `total` bytes inside the slot; the segments are
                // the registered region's memory, checked by the MR table for `total`.
                unsafe { segs.scatter(0, src, total) };
                0
            }
        };
        if state == 0 {
            region.count_access();
            self.remote_access_done(active, read, total, a.data);
        }
        state
    }

    /// A remote read or write of `total` bytes at this (target) endpoint succeeded:
    /// counted (the endpoint's remote counters) and, when it carries remote CQ data,
    /// reported to the receive CQ. (The caller counts the access on its registration.)
    pub(super) fn remote_access_done(
        &self,
        active: &Active,
        read: bool,
        total: usize,
        data: Option<u64>,
    ) {
        self.count_remote(read);
        if let (Some(data), Some(b)) = (data, &active.rxcq) {
            let _ = b.cq.push_remote_write(total, data);
        }
    }

    /// Apply an atomic at this (target) endpoint with the kit's engine: check it
    /// against the MR table, fetch operand and compare (inline or with CMA), apply under
    /// the process's atomic locks, and write fetched values back with CMA. Returns the
    /// ack status.
    pub(super) fn atomic_target(&self, pid: i32, a: &AtomicSlot, inline: Option<*const u8>) -> i32 {
        let Some(bytes) = a.count.checked_mul(a.dt.size()) else {
            return Errno::EMSGSIZE.0;
        };
        let fetch = a.kind != AtomicKind::Base;
        let access = if a.op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else if fetch {
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE
        } else {
            OpFlags::REMOTE_WRITE
        };
        let region = match self.mr.lookup_remote(a.at.key, a.at.raddr, bytes, access) {
            Ok(r) => r,
            Err(e) => return e.code().0,
        };
        let mut segs = region.segments();
        let seg = match (segs.next(), segs.next()) {
            (Some(s), None) => s,
            (None, _) if bytes == 0 => (0, 0),
            _ => return Errno::EINVAL.0,
        };
        let Some((operand_len, compare_len)) =
            proto::atomic_operand_lens(a.op, a.dt, a.kind, a.count)
        else {
            return Errno::EMSGSIZE.0;
        };
        if self.settings.disable_cma && (inline.is_none() || (fetch && bytes > 0)) {
            return Errno::EOPNOTSUPP.0;
        }
        let mut data = vec![0u8; operand_len + compare_len];
        match inline {
            Some(src) => {
                // SAFETY: `src` holds operand + compare bytes inside the slot (checked
                // by parse); `data` holds as many.
                unsafe { std::ptr::copy_nonoverlapping(src, data.as_mut_ptr(), data.len()) };
            }
            None => {
                let remote = [
                    (a.bufs[0], operand_len as u64),
                    (a.bufs[1], compare_len as u64),
                ];
                let (o, c) = data.split_at_mut(operand_len);
                let local = [
                    (o.as_mut_ptr() as usize, o.len()),
                    (c.as_mut_ptr() as usize, c.len()),
                ];
                for (l, r) in local.iter().zip(remote.iter()) {
                    if l.1 == 0 {
                        continue;
                    }
                    // SAFETY: `l` points into `data` (derived from `o`/`c`), a live
                    // Vec of this frame that nothing else touches during the call.
                    match unsafe {
                        ofi_kit::cma::readv(pid, std::slice::from_ref(l), std::slice::from_ref(r))
                    } {
                        Ok(n) if n == l.1 => {}
                        Err(e) if e == libc::EPERM || e == libc::ENOSYS => {
                            return Errno::EOPNOTSUPP.0
                        }
                        _ => return Errno::EIO.0,
                    }
                }
            }
        }
        let (operand, compare) = data.split_at(operand_len);
        let mut result = vec![0u8; if fetch { bytes } else { 0 }];
        // The registered bytes may be written at any moment by a peer's CMA copy or
        // the application, so they are never borrowed as `&mut [u8]`: they are copied
        // out and back through raw pointers while the stripe locks serialise every
        // atomic on them in this process.
        let locks = ATOMIC_LOCKS.get_or_init(AtomicLocks::new);
        let held = locks.lock(seg.0 as u64, bytes);
        let mut before = vec![0u8; bytes];
        if bytes > 0 {
            // SAFETY: the MR table checked that [seg.0, seg.0 + bytes) lies inside a
            // live registration granting this access; `before` holds `bytes`.
            unsafe {
                std::ptr::copy_nonoverlapping(seg.0 as *const u8, before.as_mut_ptr(), bytes)
            };
        }
        let mut target = before.clone();
        if let Err(e) = ofi_kit::atomic::apply(
            AtomicCall::new(a.op, a.dt, a.kind, a.count),
            &mut target,
            AtomicArgs::new(operand, compare, &mut result),
        ) {
            return e.code().0;
        }
        if target != before {
            // SAFETY: as above; an operation that changes the target was checked for
            // REMOTE_WRITE (only an atomic read lacks it, and it changes nothing).
            unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), seg.0 as *mut u8, bytes) };
        }
        drop(held);
        region.count_access();
        self.count_remote(a.op == AtomicOp::AtomicRead);
        if fetch && bytes > 0 {
            let local = [(result.as_ptr() as usize, bytes)];
            let remote = [(a.bufs[2], bytes as u64)];
            // SAFETY: `local` is `result`, a live Vec, only read; the remote range is
            // the result buffer of the initiator's pending fetching atomic (in this
            // process too when both endpoints live here), valid for writes and left
            // untouched until that operation completes, after this copy.
            match unsafe { ofi_kit::cma::writev(pid, &local, &remote) } {
                Ok(n) if n == bytes => {}
                Err(e) if e == libc::EPERM || e == libc::ENOSYS => return Errno::EOPNOTSUPP.0,
                _ => return Errno::EIO.0,
            }
        }
        0
    }

    /// Start the atomic `req`; `bufs` are the addresses of its operand, compare and
    /// result buffers (0 where it has none).
    pub(super) fn atomic(
        &self,
        active: &Active,
        bufs: [u64; 3],
        req: &AtomicRequest<'_>,
    ) -> Result<()> {
        let at = proto::RemoteMem {
            key: req.remote.key,
            raddr: req.remote.addr,
        };
        let (count, dest, dt, op, kind, ctx, flags) = (
            req.remote.count,
            req.peer,
            req.datatype,
            req.op,
            req.kind,
            req.context,
            req.flags,
        );
        // `FI_INJECT` on a base atomic message: the operands are free on return.
        let inject =
            req.inject || (kind == AtomicKind::Base && req.flags.contains(OpFlags::INJECT));
        let max = self.atomic_max(dt, op, kind)?;
        if count > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: {count} atomic elements exceed the limit of {max}"),
            ));
        }
        let too_large = || Error::new(Errno::EMSGSIZE, format!("{NAME}: atomic too large"));
        let (operand_len, compare_len) =
            proto::atomic_operand_lens(op, dt, kind, count).ok_or_else(too_large)?;
        let data_len = operand_len.checked_add(compare_len).ok_or_else(too_large)?;
        let inline = data_len <= proto::ATOMIC_INLINE_CAP;
        if inject {
            check_len(
                NAME,
                "inject atomic's operands",
                data_len,
                "one slot",
                proto::ATOMIC_INLINE_CAP,
            )?;
        }
        let want_cq = want_tx_cq(active, inject, flags)?;
        let cq_flags = (OpFlags::ATOMIC
            | if kind == AtomicKind::Base {
                OpFlags::WRITE
            } else {
                OpFlags::READ
            })
        .bits();
        let mut g = lock(&self.tx);
        let tx = &mut *g;
        let idx = self.conn_for(active, tx, dest)?;
        let (slot, id) =
            self.one_slot_op(tx, idx, inject, || Op::new(idx, ctx, cq_flags, want_cq))?;
        let conn = tx.live_conn(idx)?;
        let s = Slot {
            flags: if inject { 0 } else { F_ACK },
            tag: 0,
            data: 0,
            body: Body::Atomic(AtomicSlot {
                count,
                id,
                at,
                op,
                dt,
                kind,
                inline,
                bufs,
            }),
        };
        let ring = conn.region.ring(conn.ring);
        let off = ring.slot_off(slot);
        let hdr = s.to_bytes();
        let map = conn.region.map();
        map.write_bytes(off + 8, &hdr[8..proto::ATOMIC_INLINE_OFF]);
        if inline {
            // SAFETY: operand + compare ≤ ATOMIC_INLINE_CAP bytes fit the slot after
            // ATOMIC_INLINE_OFF; the application's buffers hold that many (C contract).
            unsafe {
                let dst = map.base().add(off + proto::ATOMIC_INLINE_OFF);
                if operand_len > 0 {
                    std::ptr::copy_nonoverlapping(bufs[0] as *const u8, dst, operand_len);
                }
                if compare_len > 0 {
                    std::ptr::copy_nonoverlapping(
                        bufs[1] as *const u8,
                        dst.add(operand_len),
                        compare_len,
                    );
                }
            }
        }
        conn.prod.publish(&ring);
        Ok(())
    }

    /// The most elements of one atomic (the engine's answer, clamped to max_msg_size).
    pub(super) fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(self.settings.max_msg_size / dt.size().max(1)))
    }
}

/// A registration's segments as a list (`None` when there are more than an `IoList`
/// holds).
pub(super) fn segment_list(segs: impl Iterator<Item = (usize, usize)>) -> Option<IoList> {
    let mut v = [(0usize, 0usize); IOV_LIMIT];
    let mut n = 0;
    for seg in segs {
        *v.get_mut(n)? = seg;
        n += 1;
    }
    Some(IoList::from_pairs(&v[..n]))
}
