//! RMA, emulated by the protocol (`EAGER_RTW` writes, `SHORT_RTR` reads): the
//! initiator's calls, and the target's side over the domain's kit MR table
//! ([`MrAccess`], the engine's [`RegionAccess`]).
//!
//! Keys are the MR table's (`mr_key_size` 4: the wire carries 32 bits; a key with the
//! top bit set is the protocol's own and never an application region); addresses are
//! offsets in the region unless the domain has `FI_MR_VIRT_ADDR` (kit's rules).
//! Every access is checked by the table (key, endpoint, access, whole range) before a
//! raw copy into or out of the application's memory.
//!
//! Nothing here panics on application or peer input.

use std::sync::OnceLock;

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::ADDR_NOTAVAIL;
use ofi_kit::atomic::{AtomicArgs, AtomicCall, AtomicLocks};
use ofi_kit::mr::{MrTable, RemoteRegion};
use ofi_kit::request::RmaRequest;

use super::*;
use crate::proto::{atomic_access, RegionAccess, RemoteRegion as Target};

/// The target side of emulated RMA: the domain's MR table, as seen by one endpoint.
#[derive(Debug)]
pub(super) struct MrAccess {
    pub(super) table: Arc<MrTable>,
    /// The endpoint's id for `FI_MR_ENDPOINT` lookups.
    pub(super) ep: u64,
}

impl MrAccess {
    /// The checked region for `len` bytes at `offset` of `key` with `access`, as one
    /// list of local buffers.
    fn region(
        &self,
        key: u32,
        offset: u64,
        len: usize,
        access: OpFlags,
    ) -> std::result::Result<(RemoteRegion, IoList), Errno> {
        let r = self
            .table
            .lookup_remote_ep(self.ep, u64::from(key), offset, len, access)
            .map_err(|e| e.code())?;
        let mut segs = [(0usize, 0usize); ofi_kit::iov::IOV_LIMIT];
        let mut n = 0;
        for seg in r.segments() {
            let Some(slot) = segs.get_mut(n) else {
                return Err(Errno::EINVAL);
            };
            *slot = seg;
            n += 1;
        }
        Ok((r, IoList::from_pairs(&segs[..n])))
    }
}

impl RegionAccess for MrAccess {
    fn read(&self, key: u32, offset: u64, len: usize) -> std::result::Result<Vec<u8>, Errno> {
        let (r, segs) = self.region(key, offset, len, OpFlags::REMOTE_READ)?;
        let mut v = vec![0u8; len];
        // SAFETY: the segments are registered memory the table checked for `len` bytes
        // of remote read access; the registration is live (the application's contract:
        // memory stays valid until deregistered); raw copy.
        unsafe { segs.gather(0, v.as_mut_ptr(), len) };
        r.count_access();
        Ok(v)
    }

    fn check_write(&self, key: u32, offset: u64, len: u64) -> std::result::Result<(), Errno> {
        let len = usize::try_from(len).map_err(|_| Errno::EINVAL)?;
        self.region(key, offset, len, OpFlags::REMOTE_WRITE)
            .map(drop)
    }

    fn write(&self, key: u32, offset: u64, data: &[u8]) -> std::result::Result<(), Errno> {
        let (_, segs) = self.region(key, offset, data.len(), OpFlags::REMOTE_WRITE)?;
        // SAFETY: as in `read`, for remote write access; raw copy.
        unsafe { segs.scatter(0, data.as_ptr(), data.len()) };
        Ok(())
    }

    fn atomic(
        &self,
        key: u32,
        offset: u64,
        call: AtomicCall,
        operand: &[u8],
        compare: &[u8],
    ) -> std::result::Result<Vec<u8>, Errno> {
        let need = atomic_access(&call);
        let mut access = OpFlags::empty();
        if need.remote_read {
            access |= OpFlags::REMOTE_READ;
        }
        if need.remote_write {
            access |= OpFlags::REMOTE_WRITE;
        }
        let bytes = operand.len();
        let (r, segs) = self.region(key, offset, bytes, access)?;
        // The table hands back one segment for a range inside one registration.
        let [(target, len)] = segs.slice() else {
            return Err(Errno::EINVAL);
        };
        let mut result = vec![0u8; if need.remote_read { bytes } else { 0 }];
        let locks = ATOMIC_LOCKS.get_or_init(AtomicLocks::new);
        // SAFETY: `[target, target + len)` is live registered memory the table checked
        // for the access this call needs (readable; writable unless the call is
        // ATOMIC_READ, which writes nothing); the registration stays valid during the
        // call (the application's contract). The application may touch those bytes
        // concurrently: the engine copies through raw pointers only.
        unsafe {
            locks.apply_raw(
                *target as *mut u8,
                *len,
                call,
                AtomicArgs::new(operand, compare, &mut result),
            )
        }
        .map_err(|e| e.code())?;
        r.count_access();
        Ok(result)
    }
}

/// Atomics applied by this process's efa endpoints are serialised per address stripe
/// (kit's lock set): concurrent atomics from several peers on one element are atomic
/// with respect to each other.
static ATOMIC_LOCKS: OnceLock<AtomicLocks> = OnceLock::new();

impl Shared {
    /// An RMA read or write of the application.
    pub(super) fn submit_rma(&self, active: &Bound, req: RmaRequest<'_>) -> Result<()> {
        let read = req.is_read();
        let l = IoList::from_iov(req.local.bufs, NAME)?;
        let total = req.matched_len(NAME)?;
        if total > MAX_MSG_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: RMA of {total} bytes exceeds max_msg_size {MAX_MSG_SIZE}"),
            ));
        }
        let dir = if read { OpFlags::READ } else { OpFlags::WRITE };
        let op = TxOp {
            ctx: req.context,
            peer: 0, // set by `start_remote`
            flags: (OpFlags::RMA | dir).bits(),
            want: active.tx_completion_wanted(req.inject, req.flags),
            read_into: read.then_some(l),
        };
        let remote = (req.peer, req.remote.key, req.remote.addr);
        self.start_remote(active, remote, op, "RMA", |eng, now, id, at| match () {
            // Nothing to move: done at once.
            () if total == 0 => Err(Errno::ENODATA),
            () if read => eng.read(now, id, at, total),
            () => {
                let mut data = vec![0u8; total];
                // SAFETY: the application's buffers, readable for their lengths during
                // this submitting call (the C contract `RmaRequest` carries).
                unsafe { l.gather(0, data.as_mut_ptr(), total) };
                eng.write_data(now, id, at, data, req.data)
            }
        })
    }

    /// Starts the application's emulated RMA or atomic `op` to `(fabric address, key,
    /// address)`: `submit` hands it to the engine with its id and target region. A key
    /// the wire cannot carry names no region: the operation fails in its completion as
    /// one with an unknown key would (`FI_ENOKEY`); so does one to a lost peer
    /// (`FI_EHOSTUNREACH`); `FI_ENODATA` from `submit` completes it at once with
    /// success (nothing to move). Other refusals are the call's error.
    pub(super) fn start_remote(
        &self,
        active: &Bound,
        (dest, key, addr): (u64, u64, u64),
        mut op: TxOp,
        what: &str,
        submit: impl FnOnce(&mut Engine, proto::Nanos, u64, Target) -> std::result::Result<(), Errno>,
    ) -> Result<()> {
        let (mut state, peer, id) = self.begin_tx(active, dest)?;
        op.peer = peer;
        let key = u32::try_from(key)
            .ok()
            .filter(|k| k & proto::READ_KEY_BIT == 0);
        let now = self.now();
        let r = match key {
            None => Err(Errno::ENOKEY),
            Some(key) => submit(
                &mut state.eng,
                now,
                id,
                Target {
                    peer,
                    key,
                    offset: addr,
                },
            ),
        };
        match r {
            Ok(()) => {
                state.tx_ops.insert(id, op);
            }
            Err(Errno::ENODATA) => active.complete_tx(op.ctx, op.flags, op.want, None),
            Err(e @ (Errno::ENOKEY | Errno::EHOSTUNREACH)) => {
                // Reported as the operation's completion.
                active.complete_tx(op.ctx, op.flags, true, Some(e));
            }
            Err(e) => return Err(Error::new(e, format!("{NAME}: {what} refused"))),
        }
        self.round(active, &mut state);
        Ok(())
    }

    /// A peer's write with remote CQ data was placed here: a receive-side entry.
    pub(super) fn on_remote_write(
        &self,
        active: &Bound,
        state: &EpState,
        src: PeerAddr,
        len: u64,
        data: u64,
    ) {
        let Some(b) = &active.rxcq else {
            return;
        };
        let from = state
            .peers
            .get(src as usize)
            .and_then(|p| active.av.reverse_lookup(&p.addr.to_address()))
            .unwrap_or(ADDR_NOTAVAIL);
        let e = CqTaggedEntry {
            op_context: 0,
            flags: (OpFlags::RMA | OpFlags::REMOTE_WRITE | OpFlags::REMOTE_CQ_DATA).bits(),
            len: len as usize,
            buf: std::ptr::null_mut(),
            data,
            tag: 0,
        };
        let _ = b.cq.push(&e, from);
    }
}
