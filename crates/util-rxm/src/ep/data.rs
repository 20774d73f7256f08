//! The data path: kit's [`DataPath`](ofi_kit::dataops::DataPath) over the endpoint
//! (request values in, operations submitted to the shared state).

use super::ops::FwdRequest;
use super::*;

impl ofi_kit::dataops::DataPath for Endpoint {
    ofi_kit::layered_data_path!();
    /// Kit's default set, `FI_FENCE` (see `fence_ready`), `FI_TRIGGER` (see
    /// `triggers`) and `FI_COMMIT_COMPLETE` (as delivery complete).
    const OP_FLAGS: OpFlags = ofi_kit::opflags::PROVIDER_DEFAULT
        .union(OpFlags::FENCE)
        .union(OpFlags::TRIGGER)
        .union(OpFlags::COMMIT_COMPLETE);

    /// Triggered operations wait in the endpoint's queue (module `trigger`).
    fn triggers(
        &self,
    ) -> Option<(
        &ofi_kit::trigger::TriggerQueue,
        &Arc<ofi_kit::progress::ProgressEngine>,
    )> {
        Some((&self.sh.triggers, &self.sh.engine))
    }

    /// A fenced operation starts only when no earlier transmit operation is still in
    /// the operation table (waiting for its core completion, its peer's
    /// acknowledgement or a rendezvous).
    fn fence_ready(&self, _act: &Active) -> Result<()> {
        if lock(&self.sh.state).live > 0 {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    fn inject_size(&self) -> usize {
        self.sh.core_inject.saturating_sub(HDR_LEN)
    }

    fn submit_send(&self, active: &Active, req: SendRequest) -> Result<()> {
        self.refuse_tx_on_context()?;
        self.sh.send(active, req)
    }

    fn submit_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        self.sh.post_recv(active, recv)
    }

    fn submit_rma(&self, active: &Active, req: RmaRequest<'_>) -> Result<()> {
        self.refuse_tx_on_context()?;
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
        let iov = local.bufs.to_vec();
        let desc = local.desc_words();
        let total = req.matched_len(NAME)?;
        if iov.len() > IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: too many iov entries"),
            ));
        }
        let copy = !read && (inject || flags.contains(OpFlags::INJECT));
        let (fwd, owned) = if read {
            (Fwd::Read { iov, desc, rma }, None)
        } else if copy {
            let max = self.sh.core_inject;
            if total > max {
                return Err(Error::new(
                    Errno::EMSGSIZE,
                    format!("{NAME}: inject write of {total} bytes exceeds {max}"),
                ));
            }
            let mut v = vec![0u8; total];
            let l = IoList::from_iov(&iov, NAME)?;
            // SAFETY: the application's buffers, readable during the call.
            unsafe { l.gather(0, v.as_mut_ptr(), total) };
            let iov = vec![Iov {
                base: v.as_mut_ptr() as *mut c_void,
                len: total,
            }];
            let fwd = Fwd::Write {
                iov,
                desc: Vec::new(),
                rma,
                data,
            };
            (fwd, Some(v))
        } else {
            let fwd = Fwd::Write {
                iov,
                desc,
                rma,
                data,
            };
            (fwd, None)
        };
        self.sh.forward(
            active,
            FwdRequest {
                dest: peer,
                ctx,
                fwd,
                owned,
                flags,
                // The inject calls report no completion.
                suppress: inject && !read,
            },
        )
    }

    fn submit_atomic(&self, active: &Active, req: AtomicRequest<'_>) -> Result<()> {
        self.refuse_tx_on_context()?;
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
        let (iov, desc) = (operands.bufs, operands.desc_words());
        let (cmp, cdesc) = (compare.bufs, compare.desc_words());
        let (res, rdesc) = (result.bufs, result.desc_words());
        ofi_kit::atomic::valid(op, dt, kind)?;
        let count = req.matched_count(NAME)?;
        let mut owned = None;
        let mut iov = iov.to_vec();
        let mut desc = desc;
        let suppress = inject;
        if inject || flags.contains(OpFlags::INJECT) {
            // SAFETY: the operands of an atomic call hold `count` elements of `dt` each,
            // readable during the call (the C contract `AtomicRequest` carries).
            let mut v = unsafe { copy_operands(&iov, dt.size()) };
            iov = vec![Ioc {
                addr: v.as_mut_ptr() as *mut c_void,
                count,
            }];
            desc = Vec::new();
            owned = Some(v);
        }
        self.sh.forward(
            active,
            FwdRequest {
                dest: peer,
                ctx,
                fwd: Fwd::Atomic {
                    kind,
                    iov,
                    desc,
                    rma,
                    dt,
                    op,
                    cmp: cmp.to_vec(),
                    cdesc,
                    res: res.to_vec(),
                    rdesc,
                },
                owned,
                flags,
                suppress,
            },
        )
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        // rxm forwards atomics to its core: what the core's domain supports is the
        // answer (verbs has two operations, tcp every one of kit's engine), so
        // `fi_atomicvalid` here agrees with `fi_query_atomic` on rxm's domain.
        ofi_kit::atomic::valid(op, dt, kind)?;
        let flags = match kind {
            AtomicKind::Base => 0,
            AtomicKind::Fetch => ofi_kit::atomic::FETCH_ATOMIC,
            AtomicKind::Compare => ofi_kit::atomic::COMPARE_ATOMIC,
        };
        let attr = self.sh.dom.core.query_atomic(dt, op, flags)?;
        Ok(attr
            .count
            .min(self.sh.dom.core_info.ep_attr.max_msg_size / dt.size().max(1)))
    }
}

/// The bytes of `iov`'s elements of `size` bytes each, one after the other (null or
/// empty entries contribute nothing).
///
/// # Safety
/// Each non-null `addr` must be readable for `count * size` bytes for the call.
unsafe fn copy_operands(iov: &[Ioc], size: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for e in iov {
        let n = e.count.saturating_mul(size);
        if !e.addr.is_null() && n > 0 {
            // SAFETY: readable for `n` bytes (the caller's contract).
            v.extend_from_slice(unsafe { std::slice::from_raw_parts(e.addr as *const u8, n) });
        }
    }
    v
}
