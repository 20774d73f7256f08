//! The endpoint's operations as the core calls them: binding, enabling, cancel, options,
//! and the kit's data path (sends, receives, RMA and atomics, checked here and carried out
//! by the transmit and remote modules).
//!
//! Nothing here panics on application input: bad arguments return `FI_EINVAL` or
//! `FI_EMSGSIZE`.

use super::*;

pub(super) fn recv_src(sh: &Shared, src: u64) -> u64 {
    if sh.directed {
        src
    } else {
        ANY_SRC
    }
}

impl MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        Arc::as_ptr(&self.sh) as usize as u64
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "ofi_rxd: bind after fi_enable",
            ));
        }
        lock(&self.sh.setup).bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Ok(());
        }
        let setup = lock(&self.sh.setup);
        let _ = self.sh.active.set(setup.freeze("ofi_rxd")?);
        self.sh.engine.kick();
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let act = self.active()?;
        let recv = lock(&self.sh.st).m.cancel(context);
        match recv {
            Some(r) => {
                act.cancelled(&r);
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                "ofi_rxd: no such operation to cancel",
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        ofi_kit::ep::getopt_min_multi_recv("ofi_rxd", level, optname, optval, || {
            lock(&self.sh.st).m.config().min_multi_recv
        })
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        let v = ofi_kit::ep::setopt_min_multi_recv("ofi_rxd", level, optname, optval)?;
        lock(&self.sh.st).m.set_min_multi_recv(v);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.sh.me_bytes.clone())
    }

    fn rx_size_left(&self) -> Result<usize> {
        let st = lock(&self.sh.st);
        Ok(st.m.config().max_posted.saturating_sub(st.m.posted_len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let st = lock(&self.sh.st);
        Ok(self.sh.settings.tx_size.saturating_sub(st.live))
    }

    ofi_kit::endpoint_data_ops!();
}

impl ofi_kit::dataops::DataPath for Endpoint {
    const NAME: &'static str = NAME;
    type Active = Active;

    fn active(&self) -> Result<&Active> {
        Endpoint::active(self)
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.sh.tx_op_flags
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.sh.rx_op_flags
    }

    fn recv_src(&self, src: u64) -> u64 {
        recv_src(&self.sh, src)
    }

    fn inject_size(&self) -> usize {
        self.sh.inject_max
    }

    fn submit_send(&self, act: &Active, req: SendRequest) -> Result<()> {
        let SendRequest {
            iov,
            dest,
            context,
            tag,
            data,
            flags,
            inject,
        } = req;
        self.sh.send(
            act,
            iov,
            dest,
            context,
            tag.unwrap_or(0),
            data,
            tag.is_some(),
            flags,
            inject,
        )
    }

    fn submit_recv(&self, act: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        self.sh.post_recv(act, recv)
    }

    fn submit_rma(&self, act: &Active, req: RmaRequest<'_>) -> Result<()> {
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
        let iov = local.bufs;
        let l = IoList::from_iov(iov, NAME)?;
        let total = l.total();
        if total != rma.len {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "ofi_rxd: {total} local bytes for a remote buffer of {}",
                    rma.len
                ),
            ));
        }
        if total > MAX_MSG_SIZE {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxd: RMA of {total} bytes exceeds max_msg_size {MAX_MSG_SIZE}"),
            ));
        }
        if inject || flags.contains(OpFlags::INJECT) {
            self.check_inject(OpFlags::INJECT, total)?;
        }
        let want = !inject
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
        let req = RmaReq {
            key: rma.key,
            addr: rma.addr,
            len: total as u64,
            dt: 0,
            op: 0,
            kind: 0,
        };
        if read {
            self.sh.remote(
                act,
                peer,
                ctx,
                OP_READ,
                req,
                None,
                &[],
                Some(l),
                total,
                (OpFlags::RMA | OpFlags::READ).bits(),
                want,
            )
        } else {
            self.sh.remote(
                act,
                peer,
                ctx,
                OP_WRITE,
                req,
                data,
                &[l],
                None,
                0,
                (OpFlags::RMA | OpFlags::WRITE).bits(),
                want,
            )
        }
    }

    fn submit_atomic(&self, act: &Active, req: AtomicRequest<'_>) -> Result<()> {
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
        let count: usize = iov.iter().map(|v| v.count).sum();
        let count = if op == AtomicOp::AtomicRead && count == 0 {
            res.iter().map(|v| v.count).sum()
        } else {
            count
        };
        if count != rma.count {
            return Err(Error::new(
                Errno::EINVAL,
                "ofi_rxd: local and remote atomic element counts differ",
            ));
        }
        let bytes = count.saturating_mul(size);
        if bytes > crate::MAX_ATOMIC_BYTES {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("ofi_rxd: atomic of {bytes} bytes is too large"),
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
                "ofi_rxd: compare buffer and operand element counts differ",
            ));
        }
        let result = if kind == AtomicKind::Base {
            None
        } else {
            let r = ioc_list(res, size)?;
            if r.total() != bytes {
                return Err(Error::new(
                    Errno::EINVAL,
                    "ofi_rxd: result buffer and operand element counts differ",
                ));
            }
            Some(r)
        };
        let want = !inject
            && act
                .txcq
                .as_ref()
                .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION));
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
            act, peer, ctx, OP_ATOMIC, req, None, &payload, result, expect, cq_flags, want,
        )
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let n = ofi_kit::atomic::valid(op, dt, kind)?;
        Ok(n.min(crate::MAX_ATOMIC_BYTES / dt.size().max(1)))
    }
}
