//! The data path: kit's [`DataPath`] shapes each data call into a request; here it
//! becomes one work request on the queue pair (a send, an RDMA write or read, or an
//! atomic), with a slot recording its completion.
//!
//! Invariants: an operation is posted only on a connected, enabled endpoint with a free
//! slot (`FI_EAGAIN` otherwise); a slot is freed by the operation's completion. Nothing
//! here panics.

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::dataops::DataPath;
use ofi_kit::iov::IoList;
use ofi_kit::request::{AtomicRequest, RmaDir, RmaRequest, SendRequest};
use ofi_kit::tagmatch::PostedRecv;
use std::sync::Arc;

use ofi_rdma::{RecvWr, Remote, SendFlags, SendOp, SendWr, Sge, UdDest};

use super::ud::{UdPeer, UserRecv};
use super::{lock, sges, Conn, CounterKind, Endpoint, EpInner, EpState, Slot, RX_BIT};

use crate::NAME;

fn not_ready(state: &EpState) -> Result<()> {
    if !state.enabled {
        return Err(Error::new(
            Errno::EOPBADSTATE,
            format!("{NAME}: endpoint not enabled"),
        ));
    }
    if state.conn != Conn::Connected {
        return Err(Error::new(
            Errno::ENOTCONN,
            format!("{NAME}: endpoint not connected"),
        ));
    }
    Ok(())
}

fn no_room() -> Error {
    Error::new(Errno::EAGAIN, format!("{NAME}: send queue full"))
}

/// What a transmit operation posts.
struct Tx<'a> {
    iov: &'a [(usize, usize)],
    op: SendOp,
    /// Carry the data inline when it fits (`FI_INJECT`, `fi_inject*`).
    inject: bool,
    /// An `fi_inject*` call: no completion entry.
    quiet: bool,
    ctx: usize,
    flags: u64,
    report: bool,
    cntr: CounterKind,
    write_local: bool,
    scratch: Option<Box<u64>>,
    /// The destination of a datagram.
    ud: Option<Arc<UdPeer>>,
}

impl EpInner {
    fn post_tx(&self, t: Tx<'_>) -> Result<()> {
        let mut state = lock(&self.state);
        not_ready(&state)?;
        if state.tx.left() == 0 {
            return Err(no_room());
        }
        let total: usize = t.iov.iter().map(|p| p.1).sum();
        let mut list = [Sge::default(); crate::IOV_LIMIT];
        let mut tmp = Vec::new();
        let mut flags = SendFlags::SIGNALED;
        let mut scratch = t.scratch;
        // An injected datagram over the inline size: copied into the send slot's
        // bounce buffer once the slot is known (below).
        let bounce = t.inject && total > self.inline_size && t.ud.is_some();
        let mut n = if bounce {
            0
        } else if t.inject && total <= self.inline_size {
            flags |= SendFlags::INLINE;
            let mut n = 0;
            for &(p, len) in t.iov.iter().filter(|(_, l)| *l > 0) {
                if n == list.len() {
                    return Err(Error::new(Errno::EINVAL, format!("{NAME}: iov too long")));
                }
                list[n] = Sge {
                    addr: p as u64,
                    length: len as u32,
                    lkey: 0,
                };
                n += 1;
            }
            n
        } else if let Some(s) = scratch.as_mut() {
            let p = (&mut **s as *mut u64) as usize;
            // SAFETY: the box lives in the slot until the completion.
            unsafe { sges(&self.dom, &[(p, 8)], true, &mut tmp, &mut list)? }
        } else {
            // SAFETY: the data calls' contract keeps the buffers valid until completion.
            unsafe { sges(&self.dom, t.iov, t.write_local, &mut tmp, &mut list)? }
        };
        let first = t.iov.first().map_or(0, |p| p.0);
        let slot = Slot {
            ctx: t.ctx,
            flags: t.flags,
            len: total,
            buf: first,
            report: t.report && !t.quiet,
            cntr: t.cntr,
            _tmp: tmp,
            _scratch: scratch,
        };
        let Some(i) = state.tx.insert(slot) else {
            return Err(no_room());
        };
        if bounce {
            let bounce_bufs = state.ud_tx.as_ref();
            // SAFETY: the data calls' contract: the iov is readable now; send slot `i`
            // is free, so its bounce buffer is not posted.
            let filled = bounce_bufs.and_then(|b| unsafe { b.fill(i, t.iov) });
            match filled {
                Some(sge) => {
                    list[0] = sge;
                    n = 1;
                }
                None => {
                    state.tx.remove(i);
                    return Err(Error::new(
                        Errno::EMSGSIZE,
                        format!("{NAME}: a {total}-byte datagram (at most {})", self.mtu),
                    ));
                }
            }
        }
        let wr = SendWr {
            wr_id: i as u64,
            sg_list: &list[..n],
            op: t.op,
            send_flags: flags,
            ud: t.ud.as_deref().map(|p| UdDest {
                ah: &p.ah,
                remote_qpn: p.qpn,
                remote_qkey: p.qkey,
            }),
        };
        // SAFETY: inline sends read the application's buffers now (valid by the data
        // calls' contract); the scatter list names registered memory.
        if let Err(e) = unsafe { self.qp()?.post_send(&wr) } {
            state.tx.remove(i);
            return Err(e);
        }
        Ok(())
    }

    fn report(&self, flags: OpFlags, sel: bool) -> bool {
        !sel || flags.contains(OpFlags::COMPLETION)
    }

    fn send_common(&self, req: &SendRequest) -> Result<()> {
        if req.tag.is_some() {
            return Err(Error::new(
                Errno::ENOSYS,
                format!("{NAME}: tagged messages are not offered"),
            ));
        }
        let (sel, ud) = {
            let state = lock(&self.state);
            (state.b.tx_selective(), self.datagram_dest(&state, req)?)
        };
        let inject = req.inject || req.flags.contains(OpFlags::INJECT);
        self.post_tx(Tx {
            iov: req.iov.slice(),
            op: match req.data {
                Some(d) => SendOp::SendWithImm(d as u32),
                None => SendOp::Send,
            },
            inject,
            quiet: req.inject,
            ctx: req.context,
            flags: (OpFlags::SEND | OpFlags::MSG).bits(),
            report: self.report(req.flags, sel),
            cntr: CounterKind::Send,
            write_local: false,
            scratch: None,
            ud,
        })
    }

    /// Where a datagram endpoint's send goes (`None` on a connected endpoint):
    /// `FI_EMSGSIZE` over the MTU, `FI_EINVAL` for an address not in the AV.
    fn datagram_dest(&self, state: &EpState, req: &SendRequest) -> Result<Option<Arc<UdPeer>>> {
        if !self.dgram {
            return Ok(None);
        }
        let len = req.iov.total();
        if len > self.mtu {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: a {len}-byte datagram (at most {})", self.mtu),
            ));
        }
        let av = state.b.av.as_ref().ok_or_else(|| {
            Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: no address vector bound"),
            )
        })?;
        av.peer(req.dest).map(Some).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: fabric address {:#x} is not in the AV", req.dest),
            )
        })
    }

    fn recv_common(&self, recv: PostedRecv<IoList>) -> Result<()> {
        if recv.tagged {
            return Err(Error::new(
                Errno::ENOSYS,
                format!("{NAME}: tagged messages are not offered"),
            ));
        }
        let mut state = lock(&self.state);
        if !state.enabled {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: endpoint not enabled"),
            ));
        }
        if state.rx.left() == 0 {
            return Err(Error::new(
                Errno::EAGAIN,
                format!("{NAME}: receive queue full"),
            ));
        }
        if state.srx.is_some() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: this endpoint receives from its shared receive context"),
            ));
        }
        // A shared receive context does not know which endpoint's CQ reports the
        // receive: unless asked for, the receiving endpoint's selection decides.
        let report = if self.srq.is_some() {
            recv.flags.contains(OpFlags::COMPLETION)
        } else {
            self.report(recv.flags, state.b.rx_selective())
        };
        if let Some(u) = state.ud.as_mut() {
            if u.left() == 0 {
                return Err(Error::new(
                    Errno::EAGAIN,
                    format!("{NAME}: receive queue full"),
                ));
            }
            u.posted.push_back(UserRecv {
                ctx: recv.ctx,
                buf: recv.buf,
                len: recv.len,
                report,
            });
            return Ok(());
        }
        let mut list = [Sge::default(); crate::IOV_LIMIT];
        let mut tmp = Vec::new();
        // SAFETY: the data calls' contract keeps the buffers valid until completion.
        let n = unsafe { sges(&self.dom, recv.buf.slice(), true, &mut tmp, &mut list)? };
        let slot = Slot {
            ctx: recv.ctx,
            flags: (OpFlags::RECV | OpFlags::MSG).bits(),
            len: recv.len,
            buf: recv.buf.slice().first().map_or(0, |p| p.0),
            report,
            cntr: CounterKind::Recv,
            _tmp: tmp,
            _scratch: None,
        };
        let Some(i) = state.rx.insert(slot) else {
            return Err(Error::new(
                Errno::EAGAIN,
                format!("{NAME}: receive queue full"),
            ));
        };
        let wr = RecvWr {
            wr_id: i as u64 | RX_BIT,
            sg_list: &list[..n],
        };
        let posted = match &self.srq {
            Some(srq) => srq.post_recv(&wr),
            None => self.qp().and_then(|qp| qp.post_recv(&wr)),
        };
        if let Err(e) = posted {
            state.rx.remove(i);
            return Err(e);
        }
        Ok(())
    }

    fn rkey(key: u64) -> Result<u32> {
        u32::try_from(key).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: key {key:#x} is not a verbs rkey"),
            )
        })
    }

    fn rma_common(&self, req: &RmaRequest<'_>) -> Result<()> {
        let iov: Vec<(usize, usize)> = req
            .local
            .bufs
            .iter()
            .map(|v| (v.base as usize, v.len))
            .collect();
        let remote = Remote {
            addr: req.remote.addr,
            rkey: EpInner::rkey(req.remote.key)?,
        };
        let sel = lock(&self.state).b.tx_selective();
        let (op, flags, cntr, write_local) = match req.dir {
            RmaDir::Write => (
                match req.data {
                    Some(d) => SendOp::RdmaWriteWithImm(remote, d as u32),
                    None => SendOp::RdmaWrite(remote),
                },
                OpFlags::RMA | OpFlags::WRITE,
                CounterKind::Write,
                false,
            ),
            RmaDir::Read => (
                SendOp::RdmaRead(remote),
                OpFlags::RMA | OpFlags::READ,
                CounterKind::Read,
                true,
            ),
        };
        let inject = req.inject || req.flags.contains(OpFlags::INJECT);
        self.post_tx(Tx {
            iov: &iov,
            op,
            inject: inject && req.dir == RmaDir::Write,
            quiet: req.inject,
            ctx: req.context,
            flags: flags.bits(),
            report: self.report(req.flags, sel),
            cntr,
            write_local,
            scratch: None,
            ud: None,
        })
    }

    /// # Safety
    /// The request's iocs must be valid (the data calls' contract) until completion.
    unsafe fn atomic_common(&self, req: &AtomicRequest<'_>) -> Result<()> {
        crate::domain::atomic_supported(req.datatype, req.op, req.kind)?;
        let count: usize = req.operands.bufs.iter().map(|i| i.count).sum();
        if count != 1 || req.remote.count != 1 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: verbs atomics act on one 8-byte element"),
            ));
        }
        let Some(opnd) = req.operands.bufs.iter().find(|i| i.count > 0) else {
            return Err(Error::new(Errno::EINVAL, format!("{NAME}: no operand")));
        };
        // SAFETY: the operand is one valid 8-byte element (caller's contract).
        let value = unsafe { std::ptr::read_unaligned(opnd.addr.cast::<u64>()) };
        let remote = Remote {
            addr: req.remote.addr,
            rkey: EpInner::rkey(req.remote.key)?,
        };
        let op = match req.op {
            AtomicOp::Cswap => {
                let Some(c) = req.compare.bufs.iter().find(|i| i.count > 0) else {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!("{NAME}: no compare value"),
                    ));
                };
                // SAFETY: as the operand.
                let compare = unsafe { std::ptr::read_unaligned(c.addr.cast::<u64>()) };
                SendOp::AtomicCmpSwap {
                    remote,
                    compare,
                    swap: value,
                }
            }
            _ => SendOp::AtomicFetchAdd { remote, add: value },
        };
        let sel = lock(&self.state).b.tx_selective();
        let (result, scratch, flags, cntr) = match req.kind {
            AtomicKind::Base => (
                Vec::new(),
                Some(Box::new(0u64)),
                OpFlags::ATOMIC | OpFlags::WRITE,
                CounterKind::Write,
            ),
            _ => {
                let Some(r) = req.result.bufs.iter().find(|i| i.count > 0) else {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!("{NAME}: no result buffer"),
                    ));
                };
                (
                    vec![(r.addr as usize, 8)],
                    None,
                    OpFlags::ATOMIC | OpFlags::READ,
                    CounterKind::Read,
                )
            }
        };
        self.post_tx(Tx {
            iov: &result,
            op,
            inject: false,
            quiet: req.inject,
            ctx: req.context,
            flags: flags.bits(),
            report: self.report(req.flags, sel),
            cntr,
            write_local: true,
            scratch,
            ud: None,
        })
    }
}

/// The data calls (`endpoint_data_ops!`).
impl DataPath for Endpoint {
    const NAME: &'static str = NAME;
    const RMA_IOV_LIMIT: usize = 1;
    type Active = Endpoint;

    fn active(&self) -> Result<&Endpoint> {
        Ok(self)
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.inner.tx_flags
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.inner.rx_flags
    }

    fn recv_src(&self, _src: u64) -> u64 {
        ofi_kit::tagmatch::ANY_SRC
    }

    fn inject_size(&self) -> usize {
        // Datagrams are injected through bounce buffers up to the MTU.
        if self.inner.dgram {
            self.inner.mtu
        } else {
            self.inner.inline_size
        }
    }

    fn submit_send(&self, _act: &Endpoint, req: SendRequest) -> Result<()> {
        self.inner.send_common(&req)
    }

    fn submit_recv(&self, _act: &Endpoint, recv: PostedRecv<IoList>) -> Result<()> {
        self.inner.recv_common(recv)
    }

    fn submit_rma(&self, _act: &Endpoint, req: RmaRequest<'_>) -> Result<()> {
        self.inner.rma_common(&req)
    }

    fn submit_atomic(&self, _act: &Endpoint, req: AtomicRequest<'_>) -> Result<()> {
        // SAFETY: kit built `req` from a data call whose contract keeps the iocs valid.
        unsafe { self.inner.atomic_common(&req) }
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        crate::domain::atomic_supported(dt, op, kind)?;
        Ok(1)
    }
}
