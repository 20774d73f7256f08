//! RMA and atomics: requests carried as messages, carried out at the target against the
//! domain's MR table, answered with a response that completes the initiator's operation.
//!
//! # Invariants
//!
//! - An initiator's operation completes with its response only (an acknowledgement of
//!   the request is not its completion); a response must name a live operation of the
//!   peer that answers, and carry exactly the bytes expected.
//! - The target touches registered memory only within a region the MR table checked
//!   for the access, and only through raw pointers (the application and other peers
//!   may access it concurrently); atomics are serialised per address stripe by
//!   [`ATOMIC_LOCKS`] across every rxd endpoint of the process.
//!
//! Nothing here panics on peer input: a bad request is answered with its error code.

use super::*;
use ofi_kit::atomic::{AtomicArgs, AtomicCall};

/// An RMA or atomic operation waiting for its response.
pub(super) struct Remote {
    pub(super) peer: PeerId,
    /// Where the response's data goes (read, fetched values), and how long it must be.
    result: Option<IoList>,
    expect: usize,
}

/// A remote operation to start ([`Shared::remote`]): what the request carries and how
/// the initiator's operation completes.
pub(super) struct RemoteOp<'a> {
    /// The target's fabric address.
    pub(super) dest: u64,
    /// The operation's context.
    pub(super) ctx: usize,
    /// The request's operation ([`OP_WRITE`], [`OP_READ`], [`OP_ATOMIC`]).
    pub(super) op: u8,
    /// The request header.
    pub(super) req: RmaReq,
    /// Remote CQ data of a write.
    pub(super) data: Option<u64>,
    /// The request's payload (written data, atomic operands then compare values).
    pub(super) payload: &'a [IoList],
    /// Where the response's data goes (read data, fetched values).
    pub(super) result: Option<IoList>,
    /// Bytes the response must carry.
    pub(super) expect: usize,
    /// The completion's flags.
    pub(super) cq_flags: u64,
    /// Whether the operation is completed in the CQ.
    pub(super) want: bool,
}

impl Shared {
    /// Start remote operation `r`: a request message whose payload is gathered from
    /// the application's buffers at the call.
    pub(super) fn remote(&self, active: &Active, r: RemoteOp<'_>) -> Result<()> {
        let RemoteOp {
            dest,
            ctx,
            op,
            req,
            data,
            payload,
            result,
            expect,
            cq_flags,
            want,
        } = r;
        let plen: usize = payload.iter().map(IoList::total).sum();
        let (mut g, peer, t) = self.begin_op(active, dest, |peer| TxOp {
            gen: 0,
            ctx,
            flags: cq_flags,
            want,
            remote: Some(Remote {
                peer,
                result,
                expect,
            }),
        })?;
        let state = &mut *g;
        let mut head = Vec::with_capacity(MSG_HDR + RMA_HDR);
        head.extend_from_slice(&op_hdr(op, t.bits(), data));
        head.extend_from_slice(&req.bytes());
        let mut body = vec![0u8; plen];
        let mut at = 0;
        for l in payload {
            let n = l.total();
            // SAFETY: the application's buffers are readable for their lengths during
            // the call (C contract); `body[at..]` has `n` bytes.
            unsafe { l.gather(0, body[at..].as_mut_ptr(), n) };
            at += n;
        }
        let hl = head.len();
        self.send_op(state, peer, t, hl + plen, "request", |off, n, dst| {
            let (o, left) = super::tx::put_head(&head, off, n, dst);
            dst.extend_from_slice(&body[o..o + left]);
        })
    }

    /// A request or response (header `h`, whole message `msg`) arrived from `peer`.
    pub(super) fn on_remote(
        &self,
        active: &Active,
        state: &mut EpState,
        peer: PeerId,
        h: MsgHdr,
        msg: &[u8],
    ) {
        let (op, rid, cqdata) = (h.op, h.tag, h.data);
        if op == OP_RESP {
            self.on_response(
                active,
                state,
                peer,
                rid,
                cqdata.unwrap_or(0),
                &msg[MSG_HDR..],
            );
            return;
        }
        let Ok(req) = RmaReq::from_bytes(&msg[MSG_HDR..]) else {
            ofi_core::ofi_debug!(NAME, "ep_data", "peer {peer}: short RMA request");
            return;
        };
        let payload = &msg[MSG_HDR + RMA_HDR..];
        let (status, out) = match op {
            OP_WRITE => (self.target_write(active, &req, payload, cqdata), Vec::new()),
            OP_READ => match self.target_read(&req) {
                Ok(v) => (0, v),
                Err(e) => (e.0, Vec::new()),
            },
            _ => match self.target_atomic(&req, payload) {
                Ok(v) => (0, v),
                Err(e) => (e.0, Vec::new()),
            },
        };
        let mut m = Vec::with_capacity(MSG_HDR + out.len());
        m.extend_from_slice(&op_hdr(OP_RESP, rid, Some(u64::from(status as u32))));
        m.extend_from_slice(&out);
        let now = self.now();
        if state.eng.send(peer, NO_TOKEN, &m, now).is_err() {
            ofi_core::ofi_warn!(NAME, "ep_data", "peer {peer}: response not sent");
        }
    }

    pub(super) fn on_response(
        &self,
        active: &Active,
        state: &mut EpState,
        peer: PeerId,
        rid: u64,
        status: u64,
        data: &[u8],
    ) {
        let rid = OpToken::from_bits(rid);
        let ok = state
            .op(rid)
            .is_some_and(|o| o.remote.as_ref().is_some_and(|r| r.peer == peer));
        if !ok {
            ofi_core::ofi_debug!(NAME, "ep_data", "peer {peer}: stray response");
            return;
        }
        let Some(op) = Self::take_op(state, rid) else {
            return;
        };
        // The peer's status (the low 32 bits, signed): an FI code or FI_EPROTO.
        let mut err = Errno::from_peer_status(i64::from(status as u32 as i32));
        if let Some(r) = &op.remote {
            if err.is_none() {
                if data.len() != r.expect {
                    err = Some(Errno::EIO);
                } else if let Some(res) = &r.result {
                    let n = data.len().min(res.total());
                    // SAFETY: the result buffers are the application's, writable for
                    // their lengths until this completion (C contract).
                    unsafe { res.scatter(0, data.as_ptr(), n) };
                }
            }
        }
        let want = op.want || err.is_some();
        active.complete_tx(op.ctx, op.flags, want, err);
    }

    /// The target region of a request, as one list of local buffers.
    pub(super) fn region(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        access: OpFlags,
    ) -> std::result::Result<(ofi_kit::mr::RemoteRegion, IoList), Errno> {
        let region = self
            ._dom
            .mr
            .lookup_remote(key, addr, len, access)
            .map_err(|e| e.code())?;
        let mut segs = [(0usize, 0usize); IOV_LIMIT];
        let mut n = 0;
        for seg in region.segments() {
            if n == segs.len() {
                return Err(Errno::EINVAL);
            }
            segs[n] = seg;
            n += 1;
        }
        Ok((region, IoList::from_pairs(&segs[..n])))
    }

    pub(super) fn target_write(
        &self,
        active: &Active,
        req: &RmaReq,
        payload: &[u8],
        cqdata: Option<u64>,
    ) -> i32 {
        if req.len != payload.len() as u64 {
            return Errno::EINVAL.0;
        }
        let (region, segs) =
            match self.region(req.key, req.addr, payload.len(), OpFlags::REMOTE_WRITE) {
                Ok(r) => r,
                Err(e) => return e.0,
            };
        // SAFETY: the segments are the registered region's memory, checked by the MR
        // table for `payload.len()` bytes of remote write access.
        unsafe { segs.scatter(0, payload.as_ptr(), payload.len()) };
        region.count_access();
        if let (Some(d), Some(b)) = (cqdata, &active.rxcq) {
            let _ = b.cq.push_remote_write(payload.len(), d);
        }
        0
    }

    pub(super) fn target_read(&self, req: &RmaReq) -> std::result::Result<Vec<u8>, Errno> {
        let len = usize::try_from(req.len).map_err(|_| Errno::EINVAL)?;
        if len > MAX_MSG_SIZE {
            return Err(Errno::EMSGSIZE);
        }
        let (region, segs) = self.region(req.key, req.addr, len, OpFlags::REMOTE_READ)?;
        let mut v = vec![0u8; len];
        // SAFETY: the segments are the registered region's memory, checked for `len`
        // bytes of remote read access; `v` has `len` bytes.
        unsafe { segs.gather(0, v.as_mut_ptr(), len) };
        region.count_access();
        Ok(v)
    }

    pub(super) fn target_atomic(
        &self,
        req: &RmaReq,
        payload: &[u8],
    ) -> std::result::Result<Vec<u8>, Errno> {
        let dt = Datatype::from_raw(u32::from(req.dt)).ok_or(Errno::EINVAL)?;
        let op = AtomicOp::from_raw(u32::from(req.op)).ok_or(Errno::EINVAL)?;
        let kind = kind_of(req.kind).map_err(|_| Errno::EINVAL)?;
        let count = usize::try_from(req.len).map_err(|_| Errno::EINVAL)?;
        ofi_kit::atomic::valid(op, dt, kind).map_err(|e| e.code())?;
        let bytes = count.checked_mul(dt.size()).ok_or(Errno::EMSGSIZE)?;
        if bytes > crate::MAX_ATOMIC_BYTES {
            return Err(Errno::EMSGSIZE);
        }
        let fetch = kind != AtomicKind::Base;
        let access = if op == AtomicOp::AtomicRead {
            OpFlags::REMOTE_READ
        } else if fetch {
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE
        } else {
            OpFlags::REMOTE_WRITE
        };
        let operand_len = if op == AtomicOp::AtomicRead { 0 } else { bytes };
        let compare_len = if kind == AtomicKind::Compare {
            bytes
        } else {
            0
        };
        if payload.len() != operand_len + compare_len {
            return Err(Errno::EINVAL);
        }
        let (region, segs) = self.region(req.key, req.addr, bytes, access)?;
        let seg = match segs.slice() {
            [one] => *one,
            [] if bytes == 0 => (0, 0),
            _ => return Err(Errno::EINVAL),
        };
        let (operand, compare) = payload.split_at(operand_len);
        let mut result = vec![0u8; if fetch { bytes } else { 0 }];
        let locks = ATOMIC_LOCKS.get_or_init(AtomicLocks::new);
        // SAFETY: the MR table checked that [seg.0, seg.0 + bytes) lies inside a live
        // registration granting this access (read, and write unless the operation is
        // ATOMIC_READ, which writes nothing); the registration stays live during the
        // call (the application's contract: memory is not freed before it is
        // deregistered). The application may touch those bytes concurrently: the
        // engine copies through raw pointers only, never a reference.
        unsafe {
            locks.apply_raw(
                seg.0 as *mut u8,
                bytes,
                AtomicCall::new(op, dt, kind, count),
                AtomicArgs::new(operand, compare, &mut result),
            )
        }
        .map_err(|e| e.code())?;
        region.count_access();
        Ok(result)
    }
}

/// Atomics applied by this process (every rxd endpoint) are serialised per address
/// stripe.
static ATOMIC_LOCKS: OnceLock<AtomicLocks> = OnceLock::new();

pub(super) fn ioc_list(v: &[Ioc], size: usize) -> Result<IoList> {
    if v.len() > IOV_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{NAME}: {} ioc entries, the limit is {IOV_LIMIT}", v.len()),
        ));
    }
    let mut pairs = [(0usize, 0usize); IOV_LIMIT];
    for (d, e) in pairs.iter_mut().zip(v) {
        let n = e.count.checked_mul(size).ok_or_else(|| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: atomic element count overflows"),
            )
        })?;
        *d = (e.addr as usize, n);
    }
    Ok(IoList::from_pairs(&pairs[..v.len()]))
}
