//! RMA and atomics emulated over messages: registered regions, and both ends of the
//! write (`EAGER_RTW` segments answered by one `RECEIPT`), read (`SHORT_RTR` answered by
//! `READRSP` segments, or a `RECEIPT` with the error) and atomic (`*_RTA` answered by
//! `ATOMRSP`) requests. Atomics are every operation × datatype kit's atomic engine
//! defines (`ofi_kit::atomic`), `count` elements in one packet: the request's tag
//! carries the operation (low 32 bits) and the datatype (high 32 bits), its payload the
//! operands then (compare calls) the compare values, in the initiator's byte order (the
//! protocol assumes peers of one byte order, as C's does); the answer carries the
//! original target elements (fetch and compare calls). The target applies them through
//! kit's engine, which checks every length before it writes a byte.
//!
//! The target checks each request against the region: an unknown key or a region
//! without the access asked is `FI_EACCES`; a range outside it is `FI_EINVAL`. A
//! refused request leaves the region untouched and the initiator's operation completes
//! with that code. Writes are not ordered with messages.
//!
//! The regions are the engine's own (`Engine::register`: bytes it holds), or, once the
//! caller installed a [`RegionAccess`] (a provider, whose regions are the application's
//! registered memory), that: every target access of a key without
//! `READ_KEY_BIT` then goes through it, checked there.
//!
//! Nothing here panics: every range is checked (overflow included) before a copy.

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::error::Errno;
use ofi_kit::atomic::AtomicCall;

use super::engine::Engine;
use super::tx::{blank_req, TxOp, READ_KEY_BIT};
use super::wire::{Ctrl, PktType, Req, CTRL_LEN};
use super::{Nanos, NotReady, PeerAddr, TxKind};

/// Most emulated writes received at once (partly arrived); a segment of a new one
/// beyond is refused with [`NotReady`] until one ends.
pub const MAX_WRITES_IN_PROGRESS: usize = 1024;

/// Remote access a region grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Peers may read it (`FI_REMOTE_READ`).
    pub remote_read: bool,
    /// Peers may write it (`FI_REMOTE_WRITE`).
    pub remote_write: bool,
}

impl Access {
    /// Read and write.
    pub const ALL: Access = Access {
        remote_read: true,
        remote_write: true,
    };
}

/// The remote access an atomic needs at its target: `FI_ATOMIC_READ` reads only, the
/// other fetch and compare calls read and write, base calls write.
pub fn atomic_access(call: &AtomicCall) -> Access {
    let reads = call.kind != AtomicKind::Base;
    Access {
        remote_read: reads,
        remote_write: call.op != AtomicOp::AtomicRead,
    }
}

/// The request tag naming `op` on `datatype`.
fn atomic_tag(op: AtomicOp, datatype: Datatype) -> u64 {
    u64::from(op.to_raw()) | u64::from(datatype.to_raw()) << 32
}

/// The call a received atomic request names (`FI_EOPNOTSUPP` for an operation or
/// datatype unknown or not offered for its family; `FI_EINVAL` when the operands do not
/// make whole elements).
fn atomic_call(req: &Req, payload_len: usize) -> Result<AtomicCall, Errno> {
    let op = AtomicOp::from_raw(req.tag as u32).ok_or(Errno::EOPNOTSUPP)?;
    let datatype = Datatype::from_raw((req.tag >> 32) as u32).ok_or(Errno::EOPNOTSUPP)?;
    let (kind, bytes) = match req.ty {
        PktType::CompareRta => (AtomicKind::Compare, payload_len / 2),
        PktType::FetchRta => (AtomicKind::Fetch, payload_len),
        _ => (AtomicKind::Base, payload_len),
    };
    ofi_kit::atomic::valid(op, datatype, kind).map_err(|e| e.code())?;
    if !bytes.is_multiple_of(datatype.size()) {
        return Err(Errno::EINVAL);
    }
    Ok(AtomicCall::new(op, datatype, kind, bytes / datatype.size()))
}

/// The target side's memory when the caller keeps the regions (keys are the wire's
/// 32 bits, offsets the RMA addresses as the caller's registrations define them). Each
/// call checks the key, the access and the whole range; errors are the codes the
/// initiator's operation completes with.
pub trait RegionAccess: Send + std::fmt::Debug {
    /// `len` bytes at `offset` of region `key` (remote read access).
    fn read(&self, key: u32, offset: u64, len: usize) -> Result<Vec<u8>, Errno>;
    /// Whether `len` bytes at `offset` of `key` may be written (checked once per write,
    /// for the whole range, before any segment is placed).
    fn check_write(&self, key: u32, offset: u64, len: u64) -> Result<(), Errno>;
    /// Place `data` at `offset` of `key` (remote write access).
    fn write(&self, key: u32, offset: u64, data: &[u8]) -> Result<(), Errno>;
    /// Apply `call` to the elements at `offset` of `key` with the initiator's
    /// `operand` and `compare` bytes, atomically with respect to other atomics,
    /// returning the original elements (fetch and compare calls; empty for base calls).
    /// Needs the access [`atomic_access`] names; on error nothing is written.
    fn atomic(
        &self,
        key: u32,
        offset: u64,
        call: AtomicCall,
        operand: &[u8],
        compare: &[u8],
    ) -> Result<Vec<u8>, Errno>;
}

/// A registered region.
#[derive(Debug)]
pub(crate) struct Region {
    pub data: Vec<u8>,
    pub access: Access,
}

/// An emulated write being received: bytes accounted and the first error.
#[derive(Debug)]
pub(crate) struct RtwState {
    pub total: u64,
    pub got: u64,
    pub status: u32,
    /// Remote CQ data the write carries (reported with [`super::Event::RemoteWrite`]).
    pub cq_data: Option<u64>,
}

fn range(off: u64, len: u64, cap: usize) -> Result<std::ops::Range<usize>, Errno> {
    let end = off
        .checked_add(len)
        .filter(|&e| e <= cap as u64)
        .ok_or(Errno::EINVAL)?;
    Ok(off as usize..end as usize)
}

/// Where an emulated RMA or atomic goes: `peer`'s region `key`, at byte `offset` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRegion {
    /// The target endpoint.
    pub peer: PeerAddr,
    /// The key of the target's registered region.
    pub key: u32,
    /// The offset in the region (or its virtual address, as the target's MR mode says).
    pub offset: u64,
}

/// An atomic for [`Engine::atomic`]: `call` (operation, datatype, family, element
/// count) with the initiator's operand and compare bytes (native byte order,
/// `count` × the datatype's size each; `operand` may be empty for `FI_ATOMIC_READ`,
/// `compare` is empty except for compare calls).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteAtomic {
    /// What to apply.
    pub call: AtomicCall,
    /// The operands.
    pub operand: Vec<u8>,
    /// The compare values (the mask of `FI_MSWAP`).
    pub compare: Vec<u8>,
}

impl Engine {
    /// Take the target side's regions from `access` from now on (see
    /// [`RegionAccess`]); the engine's own regions are no longer consulted.
    pub fn set_region_access(&mut self, access: Box<dyn RegionAccess>) {
        self.region_access = Some(access);
    }

    /// Register `data` under `key` with `access`. Errors: `FI_EINVAL` for a key with
    /// the top bit set (reserved) or already registered.
    pub fn register(&mut self, key: u32, data: Vec<u8>, access: Access) -> Result<(), Errno> {
        if key & READ_KEY_BIT != 0 || self.regions.contains_key(&key) {
            return Err(Errno::EINVAL);
        }
        self.regions.insert(key, Region { data, access });
        Ok(())
    }

    /// A registered region's bytes.
    pub fn region(&self, key: u32) -> Option<&[u8]> {
        self.regions.get(&key).map(|r| &r.data[..])
    }

    /// Remove a region, handing its bytes back.
    pub fn deregister(&mut self, key: u32) -> Option<Vec<u8>> {
        self.regions.remove(&key).map(|r| r.data)
    }

    pub(crate) fn region_bytes(&self, key: u32, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        if let Some(a) = &self.region_access {
            return a.read(key, offset, len);
        }
        let r = self
            .regions
            .get(&key)
            .filter(|r| r.access.remote_read)
            .ok_or(Errno::EACCES)?;
        Ok(r.data[range(offset, len as u64, r.data.len())?].to_vec())
    }

    fn rma_op(
        &mut self,
        now: Nanos,
        ctx: u64,
        peer: PeerAddr,
        kind: TxKind,
        data: Vec<u8>,
        req: Req,
    ) -> Result<(), Errno> {
        if data.len() > self.cfg.max_msg_size || req.total_len > self.cfg.max_msg_size as u64 {
            return Err(Errno::EMSGSIZE);
        }
        if self.peers.get(&peer).is_some_and(|p| p.failed) {
            return Err(Errno::EHOSTUNREACH);
        }
        self.submit(now, TxOp::new(peer, ctx, kind, data, req));
        Ok(())
    }

    /// Write `data` into `at` (emulated `fi_write`).
    pub fn write(
        &mut self,
        now: Nanos,
        ctx: u64,
        at: RemoteRegion,
        data: Vec<u8>,
    ) -> Result<(), Errno> {
        self.write_data(now, ctx, at, data, None)
    }

    /// [`Engine::write`] with remote CQ data (`fi_writedata`): the target reports
    /// [`super::Event::RemoteWrite`] with it once the whole write is placed.
    pub fn write_data(
        &mut self,
        now: Nanos,
        ctx: u64,
        at: RemoteRegion,
        data: Vec<u8>,
        cq_data: Option<u64>,
    ) -> Result<(), Errno> {
        let mut req = blank_req(PktType::EagerRtw);
        if let Some(d) = cq_data {
            req.flags |= super::wire::F_CQ_DATA;
            req.cq_data = d;
        }
        req.key = at.key;
        req.rma_offset = at.offset;
        req.total_len = data.len() as u64;
        if data.is_empty() {
            return Err(Errno::EINVAL);
        }
        self.rma_op(now, ctx, at.peer, TxKind::Write, data, req)
    }

    /// Read `len` bytes at `at` (emulated `fi_read`); the completion carries the data.
    pub fn read(
        &mut self,
        now: Nanos,
        ctx: u64,
        at: RemoteRegion,
        len: usize,
    ) -> Result<(), Errno> {
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        let mut req = blank_req(PktType::ShortRtr);
        req.key = at.key;
        req.rma_offset = at.offset;
        req.total_len = len as u64;
        self.rma_op(now, ctx, at.peer, TxKind::Read, Vec::new(), req)
    }

    /// An atomic at `at` (emulated `fi_atomic`, `fi_fetch_atomic`,
    /// `fi_compare_atomic`); fetch and compare calls complete with the original target
    /// elements. Errors at once: `FI_EOPNOTSUPP` for a combination kit's atomic engine
    /// does not define; `FI_EINVAL` for no elements or buffers of the wrong length;
    /// `FI_EMSGSIZE` when the operands do not fit one packet
    /// ([`super::Config::max_atomic_bytes`]).
    pub fn atomic(
        &mut self,
        now: Nanos,
        ctx: u64,
        at: RemoteRegion,
        args: RemoteAtomic,
    ) -> Result<(), Errno> {
        let RemoteAtomic {
            call,
            mut operand,
            compare,
        } = args;
        ofi_kit::atomic::valid(call.op, call.datatype, call.kind).map_err(|e| e.code())?;
        let bytes = call
            .count
            .checked_mul(call.datatype.size())
            .ok_or(Errno::EMSGSIZE)?;
        if bytes == 0 {
            return Err(Errno::EINVAL);
        }
        if call.op == AtomicOp::AtomicRead && operand.is_empty() {
            // The target learns the element count from the operand bytes.
            operand = vec![0; bytes];
        }
        let compare_len = if call.kind == AtomicKind::Compare {
            bytes
        } else {
            0
        };
        if operand.len() != bytes || compare.len() != compare_len {
            return Err(Errno::EINVAL);
        }
        if bytes > self.cfg.max_atomic_bytes(call.kind) {
            return Err(Errno::EMSGSIZE);
        }
        let ty = match call.kind {
            AtomicKind::Base => PktType::WriteRta,
            AtomicKind::Fetch => PktType::FetchRta,
            AtomicKind::Compare => PktType::CompareRta,
        };
        let mut data = operand;
        data.extend_from_slice(&compare);
        let mut req = blank_req(ty);
        req.key = at.key;
        req.rma_offset = at.offset;
        req.tag = atomic_tag(call.op, call.datatype);
        req.total_len = data.len() as u64;
        self.rma_op(now, ctx, at.peer, TxKind::Atomic, data, req)
    }

    /// An RMA or atomic request from `src` (cookie checked).
    pub(crate) fn on_rma_req(
        &mut self,
        _now: Nanos,
        src: PeerAddr,
        req: Req,
        payload: &[u8],
    ) -> Result<(), NotReady> {
        match req.ty {
            PktType::EagerRtw => {
                if self.rtw.len() >= MAX_WRITES_IN_PROGRESS
                    && !self.rtw.contains_key(&(src, req.send_id))
                {
                    self.stats.not_ready += 1;
                    return Err(NotReady);
                }
                self.on_write_seg(src, &req, payload)
            }
            PktType::ShortRtr => {
                match self.region_bytes(req.key, req.rma_offset, req.total_len as usize) {
                    Ok(data) => {
                        self.events
                            .push_back(super::Event::RemoteAccess { src, read: true });
                        let room = self.cfg.mtu.saturating_sub(CTRL_LEN).max(1);
                        for (i, chunk) in data.chunks(room).enumerate() {
                            let mut c = Ctrl::new(PktType::ReadRsp, req.send_id);
                            c.offset = (i * room) as u64;
                            self.queue_ctrl(src, &c, chunk);
                        }
                    }
                    Err(e) => {
                        let mut c = Ctrl::new(PktType::Receipt, req.send_id);
                        c.status = e.0 as u32;
                        self.queue_ctrl(src, &c, &[]);
                    }
                }
            }
            PktType::WriteRta | PktType::FetchRta | PktType::CompareRta => {
                let mut c = Ctrl::new(PktType::AtomRsp, req.send_id);
                let result = match self.apply_atomic(&req, payload) {
                    Ok(result) => {
                        self.events
                            .push_back(super::Event::RemoteAccess { src, read: false });
                        result
                    }
                    Err(e) => {
                        c.status = e.0 as u32;
                        Vec::new()
                    }
                };
                self.queue_ctrl(src, &c, &result);
            }
            _ => self.stats.stale += 1,
        }
        Ok(())
    }

    /// Apply a received atomic; the original elements (fetch and compare calls).
    fn apply_atomic(&mut self, req: &Req, payload: &[u8]) -> Result<Vec<u8>, Errno> {
        let call = atomic_call(req, payload.len())?;
        let (operand, compare) = match call.kind {
            AtomicKind::Compare => payload.split_at(payload.len() / 2),
            _ => (payload, &[][..]),
        };
        if let Some(a) = &self.region_access {
            return a.atomic(req.key, req.rma_offset, call, operand, compare);
        }
        let need = atomic_access(&call);
        let r = self
            .regions
            .get_mut(&req.key)
            .filter(|r| {
                (r.access.remote_read || !need.remote_read)
                    && (r.access.remote_write || !need.remote_write)
            })
            .ok_or(Errno::EACCES)?;
        let rg = range(req.rma_offset, operand.len() as u64, r.data.len())?;
        let mut result = vec![0; if need.remote_read { operand.len() } else { 0 }];
        let args = ofi_kit::atomic::AtomicArgs::new(operand, compare, &mut result);
        ofi_kit::atomic::apply(call, &mut r.data[rg], args).map_err(|e| e.code())?;
        Ok(result)
    }

    fn on_write_seg(&mut self, src: PeerAddr, req: &Req, payload: &[u8]) {
        let key = (src, req.send_id);
        let state = self.rtw.entry(key).or_insert(RtwState {
            total: req.total_len,
            got: 0,
            status: 0,
            cq_data: (req.flags & super::wire::F_CQ_DATA != 0).then_some(req.cq_data),
        });
        if state.total != req.total_len {
            self.stats.stale += 1;
            return;
        }
        if state.status == 0 {
            let res = match &self.region_access {
                Some(a) => req
                    .rma_offset
                    .checked_add(req.seg_offset)
                    .ok_or(Errno::EINVAL)
                    .and_then(|base| {
                        a.check_write(req.key, req.rma_offset, req.total_len)?;
                        a.write(req.key, base, payload)
                    }),
                None => self
                    .regions
                    .get_mut(&req.key)
                    .filter(|r| r.access.remote_write)
                    .ok_or(Errno::EACCES)
                    .and_then(|r| {
                        let base = req
                            .rma_offset
                            .checked_add(req.seg_offset)
                            .ok_or(Errno::EINVAL)?;
                        // The whole write must fit, not only this segment.
                        range(req.rma_offset, req.total_len, r.data.len())?;
                        let rg = range(base, payload.len() as u64, r.data.len())?;
                        r.data[rg].copy_from_slice(payload);
                        Ok(())
                    }),
            };
            if let Err(e) = res {
                state.status = e.0 as u32;
            }
        }
        state.got = state.got.saturating_add(payload.len() as u64);
        if state.got >= state.total {
            let (status, cq_data, total) = (state.status, state.cq_data, state.total);
            self.rtw.remove(&key);
            if let (0, Some(data)) = (status, cq_data) {
                self.events.push_back(super::Event::RemoteWrite {
                    src,
                    len: total,
                    cq_data: data,
                });
            }
            if status == 0 {
                self.events
                    .push_back(super::Event::RemoteAccess { src, read: false });
            }
            let mut c = Ctrl::new(PktType::Receipt, req.send_id);
            c.status = status;
            self.queue_ctrl(src, &c, &[]);
        }
    }
}
