//! Atomics, emulated by the protocol (`WRITE_RTA`, `FETCH_RTA`, `COMPARE_RTA` answered
//! by `ATOMRSP`): one 8-byte unsigned element (`FI_UINT64`) per operation — `FI_MIN`,
//! `FI_MAX`, `FI_SUM`, `FI_BOR`, `FI_BAND`, `FI_BXOR`, `FI_ATOMIC_WRITE` (base and
//! fetch), `FI_ATOMIC_READ` (fetch), `FI_CSWAP` (compare). The target applies them to
//! the application's registered memory through the endpoint's `MrAccess` (an atomic
//! word operation where the word is 8-byte aligned).
//!
//! Nothing here panics on application or peer input.

use ofi_core::abi::raw::Ioc;
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_kit::request::AtomicRequest;

use super::*;
use crate::proto::{AtomicArgs, AtomicOp as WireOp, RemoteRegion};

/// The protocol's operation for `op` on `dt` as an atomic of `kind`, when offered.
pub(crate) fn offered(dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Option<WireOp> {
    if dt != Datatype::Uint64 {
        return None;
    }
    let base = match op {
        AtomicOp::Min => Some(WireOp::Min),
        AtomicOp::Max => Some(WireOp::Max),
        AtomicOp::Sum => Some(WireOp::Sum),
        AtomicOp::Bor => Some(WireOp::Bor),
        AtomicOp::Band => Some(WireOp::Band),
        AtomicOp::Bxor => Some(WireOp::Bxor),
        AtomicOp::AtomicWrite => Some(WireOp::Write),
        _ => None,
    };
    match kind {
        AtomicKind::Base => base,
        AtomicKind::Fetch if op == AtomicOp::AtomicRead => Some(WireOp::Read),
        AtomicKind::Fetch => base,
        AtomicKind::Compare => (op == AtomicOp::Cswap).then_some(WireOp::Cswap),
    }
}

/// `FI_EOPNOTSUPP` for what is not offered; else one element.
pub(crate) fn max_count(dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
    match offered(dt, op, kind) {
        Some(_) => Ok(1),
        None => Err(Error::new(
            Errno::EOPNOTSUPP,
            format!("{NAME}: {kind:?} {op} on {dt} is not offered (one FI_UINT64 element)"),
        )),
    }
}

/// The one 8-byte element of `v` (`FI_EINVAL` for another count).
fn one_word(v: &[Ioc], what: &str) -> Result<u64> {
    match v {
        [Ioc { addr, count: 1 }] if !addr.is_null() => {
            let mut b = [0u8; 8];
            // SAFETY: the application's element, readable for its size during this
            // submitting call (the C contract `AtomicRequest` carries); raw copy.
            unsafe { std::ptr::copy_nonoverlapping(addr.cast::<u8>(), b.as_mut_ptr(), 8) };
            Ok(u64::from_ne_bytes(b))
        }
        _ => Err(crate::einval(format!(
            "{what}: one FI_UINT64 element expected"
        ))),
    }
}

impl Shared {
    /// An atomic of the application.
    pub(super) fn submit_atomic(&self, act: &Bound, req: AtomicRequest<'_>) -> Result<()> {
        let kind = req.kind;
        let Some(wire_op) = offered(req.datatype, req.op, kind) else {
            return Err(max_count(req.datatype, req.op, kind).unwrap_err());
        };
        if req.remote.count != 1 {
            return Err(crate::einval("one remote element per atomic"));
        }
        let operand = if wire_op == WireOp::Read {
            0
        } else {
            one_word(req.operands.bufs, "operand")?
        };
        let compare = match kind {
            AtomicKind::Compare => Some(one_word(req.compare.bufs, "compare")?),
            _ => None,
        };
        let result = match kind {
            AtomicKind::Base => None,
            _ => match req.result.bufs {
                [Ioc { addr, count: 1 }] if !addr.is_null() => Some(IoList::one(*addr as usize, 8)),
                _ => return Err(crate::einval("result: one FI_UINT64 element expected")),
            },
        };
        let want = act.tx_completion_wanted(req.inject, req.flags);
        let cq_flags = match kind {
            AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
            _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
        };
        let (mut st, peer, id) = self.begin_tx(act, req.peer)?;
        let op = TxOp {
            ctx: req.context,
            flags: cq_flags,
            want,
            read_into: result,
        };
        let key = u32::try_from(req.remote.key)
            .ok()
            .filter(|k| k & proto::READ_KEY_BIT == 0);
        let now = self.now();
        let r = match key {
            None => Err(Errno::ENOKEY),
            Some(key) => st.eng.atomic(
                now,
                id,
                RemoteRegion {
                    peer,
                    key,
                    offset: req.remote.addr,
                },
                AtomicArgs {
                    op: wire_op,
                    operand,
                    compare,
                    fetch: kind != AtomicKind::Base,
                },
            ),
        };
        match r {
            Ok(()) => {
                st.tx_ops.insert(id, op);
            }
            Err(e @ (Errno::ENOKEY | Errno::EHOSTUNREACH)) => {
                act.complete_tx(op.ctx, op.flags, true, Some(e));
            }
            Err(e) => return Err(Error::new(e, format!("{NAME}: atomic refused"))),
        }
        self.round(act, &mut st);
        Ok(())
    }
}
