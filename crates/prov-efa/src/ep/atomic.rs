//! Atomics, emulated by the protocol (`WRITE_RTA`, `FETCH_RTA`, `COMPARE_RTA` answered
//! by `ATOMRSP`): every operation × datatype kit's atomic engine defines
//! (`ofi_kit::atomic::valid`), base, fetch and compare calls, vector calls included,
//! up to the elements whose operands fit one request ([`max_count`]). The initiator
//! gathers the application's operand (and compare) elements into the request and
//! scatters the original elements of the answer into its result buffers; the target
//! applies the operation to the application's registered memory through the
//! endpoint's `MrAccess` (kit's engine under kit's address-striped locks).
//!
//! The element counts of the operand, compare and result vectors must each add up to
//! the remote element count (`FI_EINVAL` at the call otherwise, nothing sent); the
//! target's range, key and access are checked there (the operation completes in error,
//! nothing written).
//!
//! Nothing here panics on application or peer input.

use ofi_core::abi::raw::Ioc;
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_kit::atomic::AtomicCall;
use ofi_kit::request::AtomicRequest;

use super::*;
use crate::proto::RemoteAtomic;

/// The protocol settings atomics are sized by: the smallest SRD MTU of the devices
/// (see `libefa::mtu`), so a count answered for the domain holds on every endpoint.
fn sizing() -> proto::Config {
    proto::Config {
        mtu: [ofi_rdma::DeviceKind::Soft, ofi_rdma::DeviceKind::RdmaCore]
            .map(crate::libefa::mtu)
            .into_iter()
            .min()
            .unwrap_or(ofi_rdma::soft::SRD_MTU),
        ..proto::Config::default()
    }
}

/// `fi_atomicvalid` and friends: the most elements of `dt` one atomic of `kind` covers
/// (its operands fit one request). `FI_EOPNOTSUPP` for what kit's engine does not
/// define.
pub(crate) fn max_count(dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
    let engine_max = ofi_kit::atomic::valid(op, dt, kind)
        .map_err(|e| Error::new(e.code(), format!("{NAME}: {e}")))?;
    Ok(engine_max.min(sizing().max_atomic_bytes(kind) / dt.size()))
}

/// The application's elements `v` of `size` bytes each, as local buffers; the number
/// of elements they hold.
fn elements(v: &[Ioc], size: usize, what: &str) -> Result<(IoList, usize)> {
    if v.len() > ofi_kit::iov::IOV_LIMIT {
        return Err(crate::einval(format!("{what}: {} ioc entries", v.len())));
    }
    let mut pairs = [(0usize, 0usize); ofi_kit::iov::IOV_LIMIT];
    let mut count = 0usize;
    for (d, e) in pairs.iter_mut().zip(v) {
        let bytes = e
            .count
            .checked_mul(size)
            .filter(|_| e.count == 0 || !e.addr.is_null())
            .ok_or_else(|| crate::einval(format!("{what}: bad element buffer")))?;
        *d = (e.addr as usize, bytes);
        count = count
            .checked_add(e.count)
            .ok_or_else(|| crate::einval(format!("{what}: element count overflows")))?;
    }
    Ok((IoList::from_pairs(&pairs[..v.len()]), count))
}

/// The bytes of the application's elements `v`, which must hold `count` elements.
fn gather(v: &[Ioc], size: usize, count: usize, what: &str) -> Result<Vec<u8>> {
    let (list, n) = elements(v, size, what)?;
    if n != count {
        return Err(crate::einval(format!(
            "{what}: {n} elements for {count} remote ones"
        )));
    }
    let mut bytes = vec![0u8; list.total()];
    // SAFETY: the application's element buffers, readable for their sizes during this
    // submitting call (the C contract `AtomicRequest` carries); raw copy into `bytes`,
    // which holds `list.total()` bytes.
    unsafe { list.gather(0, bytes.as_mut_ptr(), bytes.len()) };
    Ok(bytes)
}

impl Shared {
    /// An atomic of the application.
    pub(super) fn submit_atomic(&self, active: &Bound, req: AtomicRequest<'_>) -> Result<()> {
        let (kind, dt) = (req.kind, req.datatype);
        let count = req.remote.count;
        let max = max_count(dt, req.op, kind)?;
        if count == 0 || count > max {
            return Err(crate::einval(format!(
                "{count} elements of {dt}: one atomic covers 1 to {max}"
            )));
        }
        let size = dt.size();
        let operand = if req.op == AtomicOp::AtomicRead {
            Vec::new()
        } else {
            gather(req.operands.bufs, size, count, "operand")?
        };
        let compare = match kind {
            AtomicKind::Compare => gather(req.compare.bufs, size, count, "compare")?,
            _ => Vec::new(),
        };
        let result = match kind {
            AtomicKind::Base => None,
            _ => {
                let (list, n) = elements(req.result.bufs, size, "result")?;
                if n != count {
                    return Err(crate::einval(format!(
                        "result: {n} elements for {count} remote ones"
                    )));
                }
                Some(list)
            }
        };
        let cq_flags = match kind {
            AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
            _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
        };
        let op = TxOp {
            ctx: req.context,
            peer: 0, // set by `start_remote`
            flags: cq_flags,
            want: active.tx_completion_wanted(req.inject, req.flags),
            read_into: result,
        };
        let remote = (req.peer, req.remote.key, req.remote.addr);
        let args = RemoteAtomic {
            call: AtomicCall::new(req.op, dt, kind, count),
            operand,
            compare,
        };
        self.start_remote(active, remote, op, "atomic", |eng, now, id, at| {
            eng.atomic(now, id, at, args)
        })
    }
}
