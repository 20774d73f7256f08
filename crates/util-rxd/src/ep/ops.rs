//! The endpoint's operations as the core calls them: binding, enabling, cancel, options,
//! and the kit's data path (sends, receives, RMA and atomics, checked here and carried out
//! by the transmit and remote modules).
//!
//! Nothing here panics on application input: bad arguments return `FI_EINVAL` or
//! `FI_EMSGSIZE`.

use super::*;
use ofi_kit::epglue::check_len;

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        Arc::as_ptr(&self.sh) as usize as u64
    }
}

impl ofi_kit::layered::LayeredEndpoint for Endpoint {
    const NAME: &'static str = NAME;

    ofi_kit::layered_endpoint_state!(shared: sh, flags: flags, rules: BIND_RULES);

    fn with_matcher<R>(&self, f: impl FnOnce(&mut dyn ofi_kit::layered::RecvQueue) -> R) -> R {
        f(&mut lock(&self.sh.state).m)
    }

    fn tx_room(&self) -> usize {
        let state = lock(&self.sh.state);
        self.sh.settings.tx_size.saturating_sub(state.live)
    }

    /// `fi_setname` before `fi_enable`: the core endpoint's name.
    fn rename(&self, addr: &[u8]) -> Result<()> {
        self.sh.bind_at(addr)
    }

    /// The core endpoint is enabled and its buffers posted only now.
    fn on_enable(&self, _bound: &Active) -> Result<()> {
        self.sh.start_core()
    }
}

impl EndpointOps<Fabric> for Endpoint {
    ofi_kit::layered_handle_ops!(Fabric, shared: sh, flags: flags, alias: true);

    /// `fi_setname`: before `fi_enable` only (the kit's glue), see `rename`.
    fn setname(&self, addr: &[u8]) -> Result<()> {
        ofi_kit::layered::setname(self, addr)
    }
}

impl ofi_kit::dataops::DataPath for Endpoint {
    ofi_kit::layered_data_path!();
    /// Kit's default set, `FI_FENCE` (see `fence_ready`) and `FI_COMMIT_COMPLETE` per
    /// operation (as delivery complete: the peer acknowledges a packet once placed; no
    /// persistent memory). Neither level is offered as a default.
    const OP_FLAGS: OpFlags = ofi_kit::opflags::PROVIDER_DEFAULT
        .union(OpFlags::FENCE)
        .union(OpFlags::COMMIT_COMPLETE);

    /// A fenced operation starts only when no earlier transmit operation is still in
    /// the operation table (every one stays there until its peer acknowledged or
    /// answered it).
    fn fence_ready(&self, _act: &Active) -> Result<()> {
        if lock(&self.sh.state).live > 0 {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    fn inject_size(&self) -> usize {
        self.sh.inject_max
    }

    fn submit_send(&self, active: &Active, req: SendRequest) -> Result<()> {
        self.sh.send(active, req)
    }

    fn submit_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        self.sh.post_recv(active, recv)
    }

    fn submit_rma(&self, active: &Active, req: RmaRequest<'_>) -> Result<()> {
        let read = req.is_read();
        let RmaRequest {
            local,
            peer,
            remote: rma,
            context: ctx,
            data,
            flags,
            inject,
            ..
        } = req;
        let l = IoList::from_iov(local.bufs, NAME)?;
        let total = req.matched_len(NAME)?;
        check_len(NAME, "RMA", total, "max_msg_size", MAX_MSG_SIZE)?;
        if inject || flags.contains(OpFlags::INJECT) {
            self.check_inject(OpFlags::INJECT, total)?;
        }
        let want = active.tx_completion_wanted(inject, flags);
        let req = RmaReq {
            key: rma.key,
            addr: rma.addr,
            len: total as u64,
            dt: 0,
            op: 0,
            kind: 0,
        };
        let (op, data, payload, result, expect, dir) = if read {
            (OP_READ, None, None, Some(l), total, OpFlags::READ)
        } else {
            (OP_WRITE, data, Some(l), None, 0, OpFlags::WRITE)
        };
        self.sh.remote(
            active,
            RemoteOp {
                dest: peer,
                ctx,
                op,
                req,
                data,
                payload: payload.as_slice(),
                result,
                expect,
                cq_flags: (OpFlags::RMA | dir).bits(),
                want,
            },
        )
    }

    fn submit_atomic(&self, active: &Active, req: AtomicRequest<'_>) -> Result<()> {
        let AtomicRequest {
            kind,
            operands,
            compare,
            result,
            peer,
            remote: rma,
            datatype: dt,
            op,
            context: ctx,
            flags,
            inject,
        } = req;
        let (iov, cmp, res) = (operands.bufs, compare.bufs, result.bufs);
        ofi_kit::atomic::valid(op, dt, kind)?;
        let size = dt.size();
        let count = req.matched_count(NAME)?;
        let bytes = count.saturating_mul(size);
        if bytes > crate::MAX_ATOMIC_BYTES {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: atomic of {bytes} bytes is too large"),
            ));
        }
        let operand = if op == AtomicOp::AtomicRead {
            IoList::one(0, 0)
        } else {
            ioc_list(iov, size)?
        };
        let compare = ioc_list(cmp, size)?;
        if kind == AtomicKind::Compare && compare.total() != bytes {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: compare buffer and operand element counts differ"),
            ));
        }
        let result = if kind == AtomicKind::Base {
            None
        } else {
            let r = ioc_list(res, size)?;
            if r.total() != bytes {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: result buffer and operand element counts differ"),
                ));
            }
            Some(r)
        };
        let want = active.tx_completion_wanted(inject, flags);
        let cq_flags = match kind {
            AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
            _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
        };
        let req = RmaReq {
            key: rma.key,
            addr: rma.addr,
            len: count as u64,
            dt: dt.to_raw() as u8,
            op: op.to_raw() as u8,
            kind: kind_code(kind),
        };
        let payload: Vec<IoList> = if kind == AtomicKind::Compare {
            vec![operand, compare]
        } else {
            vec![operand]
        };
        let expect = if result.is_some() { bytes } else { 0 };
        self.sh.remote(
            active,
            RemoteOp {
                dest: peer,
                ctx,
                op: OP_ATOMIC,
                req,
                data: None,
                payload: &payload,
                result,
                expect,
                cq_flags,
                want,
            },
        )
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(crate::MAX_ATOMIC_BYTES / dt.size().max(1)))
    }
}
