//! The target side of RMA and atomics: key lookups in the domain's `MrTable` and
//! atomics applied to registered memory.
//!
//! Invariants: a remote access touches only a registered region, after `MrTable` has
//! checked its key, range and access; an atomic copies its target out and back through
//! raw pointers under the region's stripe lock (registered memory is never borrowed as
//! `&[u8]` / `&mut [u8]`: a same-host peer may write it at any moment). A failed check
//! answers the initiator with a status, never a panic.
//!
//! Nothing here panics on peer input.

use super::*;
use ofi_kit::atomic::{AtomicArgs, AtomicCall};

impl EpInner {
    pub(super) fn lookup(
        &self,
        rma: &[RmaIov; 4],
        cnt: u8,
        access: OpFlags,
    ) -> std::result::Result<Segs, u16> {
        let mut segs = Segs::default();
        for r in &rma[..usize::from(cnt)] {
            let len = usize::try_from(r.len).map_err(|_| Errno::EINVAL.0 as u16)?;
            let reg = self
                .dom
                .mr
                .lookup_remote_ep(self.id, r.key, r.addr, len, access)
                .map_err(|e| mr_status(&e))?;
            for (b, l) in reg.segments() {
                if !segs.push(b, l) {
                    return Err(Errno::EINVAL.0 as u16);
                }
            }
            reg.count_access();
        }
        Ok(segs)
    }

    /// Apply an atomic at the target: the original values (fetch / compare) or a
    /// status.
    pub(super) fn apply_atomic(
        &self,
        state: &EpState,
        hdr: &Hdr,
        payload: &[u8],
    ) -> std::result::Result<Vec<u8>, u16> {
        let inval = Errno::EINVAL.0 as u16;
        let kind = match hdr.op {
            Op::Atomic => AtomicKind::Base,
            Op::AtomicFetch => AtomicKind::Fetch,
            _ => AtomicKind::Compare,
        };
        let op = AtomicOp::from_raw(u32::from(hdr.atomic_op)).ok_or(inval)?;
        let dt = Datatype::from_raw(u32::from(hdr.datatype)).ok_or(inval)?;
        let rma = parse_rma(&state.hbuf, 1);
        let len = usize::try_from(rma[0].len).map_err(|_| inval)?;
        let esize = dt.size();
        if esize == 0 || len % esize != 0 {
            return Err(inval);
        }
        let count = len / esize;
        let (operand, compare) = if kind == AtomicKind::Compare {
            if payload.len() != 2 * len {
                return Err(inval);
            }
            payload.split_at(len)
        } else {
            if payload.len() != len {
                return Err(inval);
            }
            (payload, &[][..])
        };
        let access = if op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else {
            OpFlags::REMOTE_WRITE
        };
        let segs = self.lookup(&rma, 1, access)?;
        if segs.n != 1 || segs.s[0].1 != len {
            return Err(inval);
        }
        let mut result = vec![0u8; if kind == AtomicKind::Base { 0 } else { len }];
        let (base, _) = segs.s[0];
        // The registered bytes may be written at any moment by a same-host peer's copy
        // or the application, so they are never borrowed as `&mut [u8]`: they are
        // copied out and back through raw pointers while the stripe locks serialise
        // every atomic on them in this process.
        let held = self.dom.atomic_locks.lock(base as u64, len);
        let mut before = vec![0u8; len];
        if len > 0 {
            // SAFETY: the MR table vouched that [base, base + len) is a live
            // registration granting this access; `before` holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(base as *const u8, before.as_mut_ptr(), len) };
        }
        let mut target = before.clone();
        ofi_kit::atomic::apply(
            AtomicCall::new(op, dt, kind, count),
            &mut target,
            AtomicArgs::new(operand, compare, &mut result),
        )
        .map_err(|e| e.code().0 as u16)?;
        if target != before {
            // SAFETY: as above; an operation that changes the target was checked for
            // REMOTE_WRITE (only an atomic read lacks it, and it changes nothing).
            unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), base as *mut u8, len) };
        }
        drop(held);
        Ok(result)
    }

    /// Queue a response whose payload is an owned buffer.
    pub(super) fn respond_owned(state: &mut EpState, h: Hdr, pl: Vec<u8>) {
        let mut op = TxOp {
            hdr: [0; HDR_MAX],
            hdr_len: HDR_LEN,
            total: HDR_LEN + pl.len(),
            pl: Payload::Owned(pl),
            sent: 0,
            comp: None,
        };
        encode_hdr(&h, &mut op.hdr);
        state.tx.push_back(op);
    }
}
