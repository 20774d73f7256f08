//! The responder side: requests of an RC peer (sends and writes placed, reads and
//! atomics served from registered memory, every access checked) and UD datagrams.

use super::super::conn::Conn;
use super::super::cq::lock;
use super::super::ctx::CtxShared;
use super::super::mem::{atomic_raw, write_raw};
use super::super::wire::{
    Hdr, Kind, Nak, ReqOp, FRAG, F_FIRST, F_IMM, F_LAST, F_SOLICITED, HDR_LEN,
};
use super::{nak_no_qp, send_hdr, Inbound, QpInner, RecvSlot, SoftQp, UD_MTU};
use crate::verbs::{
    Access, EventType, Gid, QpState, QpType, WcFlags, WcOpcode, WcStatus, WorkCompletion, GRH_LEN,
};

impl SoftQp {
    /// A request for this responder.
    pub(crate) fn on_request(
        &self,
        ctx: &CtxShared,
        conn: &Conn,
        peer: &Gid,
        h: &Hdr,
        payload: &[u8],
    ) {
        let mut g = lock(&self.inner);
        if self.qp_type != QpType::Rc || g.dest != Some((*peer, h.src_qpn)) {
            return;
        }
        if !matches!(g.state, QpState::Rtr | QpState::Rts) {
            if g.state == QpState::Err {
                nak_no_qp(conn, h);
            }
            return;
        }
        if h.msn != g.expected {
            return;
        }
        let reply = |kind: Kind, op: u8, rnr: u8, value: u64| Hdr {
            kind: kind as u8,
            op,
            rnr_timer: rnr,
            dst_qpn: h.src_qpn,
            src_qpn: self.qpn,
            msn: h.msn,
            value,
            ..Hdr::default()
        };
        let op = match ReqOp::from_wire(h.op) {
            Some(op) => op,
            None => {
                send_hdr(conn, &reply(Kind::Nak, Nak::InvReq as u8, 0, 0));
                self.enter_error(ctx, &mut g, Some(EventType::QpReqErr));
                return;
            }
        };
        let fail = |g: &mut QpInner, nak: Nak, ev: EventType| {
            send_hdr(conn, &reply(Kind::Nak, nak as u8, 0, 0));
            self.enter_error(ctx, g, Some(ev));
        };
        let view = ctx.mrs.view();
        match op {
            ReqOp::Read => {
                if !g.access.contains(Access::REMOTE_READ)
                    || !view.check_remote(self.pd, h.rkey, h.raddr, h.total, Access::REMOTE_READ)
                {
                    drop(view);
                    return fail(&mut g, Nak::Access, EventType::QpAccessErr);
                }
                let mut off = 0u64;
                loop {
                    let len = (h.total - off).min(FRAG as u64);
                    let mut r = reply(Kind::ReadResp, 0, 0, 0);
                    r.offset = off;
                    r.total = h.total;
                    r.flags = if off + len == h.total { F_LAST } else { 0 };
                    let hb = r.emit();
                    let iov = [
                        libc::iovec {
                            iov_base: hb.as_ptr() as *mut _,
                            iov_len: HDR_LEN,
                        },
                        libc::iovec {
                            iov_base: (h.raddr + off) as *mut _,
                            iov_len: len as usize,
                        },
                    ];
                    // SAFETY: the header is a local; the data range was checked under the
                    // view held here.
                    if !unsafe { conn.send(&iov) } {
                        break;
                    }
                    off += len;
                    if off >= h.total {
                        break;
                    }
                }
                g.expected = g.expected.wrapping_add(1);
            }
            ReqOp::CmpSwap | ReqOp::FetchAdd => {
                if !h.raddr.is_multiple_of(8) {
                    drop(view);
                    return fail(&mut g, Nak::InvReq, EventType::QpReqErr);
                }
                if !g.access.contains(Access::REMOTE_ATOMIC)
                    || !view.check_remote(self.pd, h.rkey, h.raddr, 8, Access::REMOTE_ATOMIC)
                {
                    drop(view);
                    return fail(&mut g, Nak::Access, EventType::QpAccessErr);
                }
                let cs = (op == ReqOp::CmpSwap).then_some((h.value, h.swap));
                // SAFETY: aligned and checked under the held view.
                let orig = unsafe { atomic_raw(h.raddr, cs, h.value) };
                drop(view);
                send_hdr(conn, &reply(Kind::AtomicResp, 0, 0, orig));
                g.expected = g.expected.wrapping_add(1);
            }
            ReqOp::Send | ReqOp::SendImm | ReqOp::Write | ReqOp::WriteImm => {
                let write = matches!(op, ReqOp::Write | ReqOp::WriteImm);
                if h.flags & F_FIRST != 0 {
                    if h.offset != 0 {
                        return;
                    }
                    if write
                        && (!g.access.contains(Access::REMOTE_WRITE)
                            || !view.check_remote(
                                self.pd,
                                h.rkey,
                                h.raddr,
                                h.total,
                                Access::REMOTE_WRITE,
                            ))
                    {
                        drop(view);
                        return fail(&mut g, Nak::Access, EventType::QpAccessErr);
                    }
                    let recv = if op == ReqOp::Write {
                        None
                    } else {
                        match self.take_recv(&mut g) {
                            Some(r) => Some(r),
                            None => {
                                send_hdr(
                                    conn,
                                    &reply(Kind::Nak, Nak::Rnr as u8, g.min_rnr_timer, 0),
                                );
                                return;
                            }
                        }
                    };
                    if let (Some(r), false) = (&recv, write) {
                        match view.check_local(self.pd, r.sg.get(), true) {
                            Err(s) => {
                                drop(view);
                                let wc = WorkCompletion::new(r.wr_id, s, WcOpcode::Recv, self.qpn);
                                self.recv_cq.push(wc, false);
                                return fail(&mut g, Nak::RemOp, EventType::QpFatal);
                            }
                            Ok(cap) if cap < h.total => {
                                drop(view);
                                let wc = WorkCompletion::new(
                                    r.wr_id,
                                    WcStatus::LocLenErr,
                                    WcOpcode::Recv,
                                    self.qpn,
                                );
                                self.recv_cq.push(wc, false);
                                return fail(&mut g, Nak::InvReq, EventType::QpFatal);
                            }
                            Ok(_) => {}
                        }
                    }
                    g.inbound = Some(Inbound {
                        msn: h.msn,
                        op,
                        recv,
                        total: h.total,
                        got: 0,
                        raddr: h.raddr,
                        rkey: h.rkey,
                        imm: h.imm,
                        solicited: h.flags & F_SOLICITED != 0,
                    });
                }
                let Some(ib) = g.inbound.as_mut() else { return };
                let len = payload.len() as u64;
                if ib.msn != h.msn || ib.op != op || h.offset != ib.got || ib.got + len > ib.total {
                    return;
                }
                if write {
                    if !view.check_remote(
                        self.pd,
                        ib.rkey,
                        ib.raddr + ib.got,
                        len,
                        Access::REMOTE_WRITE,
                    ) {
                        drop(view);
                        return fail(&mut g, Nak::Access, EventType::QpAccessErr);
                    }
                    // SAFETY: checked under the held view.
                    unsafe { write_raw(ib.raddr + ib.got, payload) };
                } else if let Some(r) = &ib.recv {
                    if view.check_local(self.pd, r.sg.get(), true).is_err() {
                        let wc = WorkCompletion::new(
                            r.wr_id,
                            WcStatus::LocProtErr,
                            WcOpcode::Recv,
                            self.qpn,
                        );
                        drop(view);
                        self.recv_cq.push(wc, false);
                        return fail(&mut g, Nak::RemOp, EventType::QpFatal);
                    }
                    // SAFETY: checked under the held view.
                    unsafe { view.scatter(r.sg.get(), ib.got, payload) };
                }
                drop(view);
                ib.got += len;
                if h.flags & F_LAST == 0 {
                    return;
                }
                if ib.got != ib.total {
                    return;
                }
                let ib = g.inbound.take().expect("checked above");
                g.expected = g.expected.wrapping_add(1);
                send_hdr(conn, &reply(Kind::Ack, 0, 0, 0));
                if let Some(r) = ib.recv {
                    let opc = if op == ReqOp::WriteImm {
                        WcOpcode::RecvRdmaWithImm
                    } else {
                        WcOpcode::Recv
                    };
                    let mut wc = WorkCompletion::new(r.wr_id, WcStatus::Success, opc, self.qpn);
                    wc.byte_len = ib.total as u32;
                    wc.src_qp = h.src_qpn;
                    if matches!(op, ReqOp::SendImm | ReqOp::WriteImm) {
                        wc.imm_data = ib.imm;
                        wc.wc_flags |= WcFlags::WITH_IMM;
                    }
                    self.recv_cq.push(wc, ib.solicited);
                }
            }
        }
    }

    /// A UD datagram for this queue pair.
    pub(crate) fn on_datagram(&self, ctx: &CtxShared, peer: &Gid, h: &Hdr, payload: &[u8]) {
        let mut g = lock(&self.inner);
        if self.qp_type != QpType::Ud || !matches!(g.state, QpState::Rtr | QpState::Rts) {
            return;
        }
        if h.value != u64::from(g.qkey) || payload.len() as u64 != h.total || h.total > UD_MTU {
            return;
        }
        let Some(r) = self.take_recv(&mut g) else {
            return;
        };
        let wc = self.place_datagram(ctx, peer, h, payload, &r);
        self.recv_cq.push(wc, h.flags & F_SOLICITED != 0);
    }

    /// Places a datagram (`payload` from `peer`, header `h`) into receive `r` behind a
    /// GRH naming both GIDs, as UD and SRD receives get it: the receive's completion,
    /// `LOC_LEN_ERR` when the buffer cannot hold GRH and payload, or the buffer's local
    /// error.
    pub(super) fn place_datagram(
        &self,
        ctx: &CtxShared,
        peer: &Gid,
        h: &Hdr,
        payload: &[u8],
        r: &RecvSlot,
    ) -> WorkCompletion {
        let view = ctx.mrs.view();
        let mut wc = WorkCompletion::new(r.wr_id, WcStatus::Success, WcOpcode::Recv, self.qpn);
        match view.check_local(self.pd, r.sg.get(), true) {
            Err(s) => wc.status = s,
            Ok(cap) if cap < (GRH_LEN + payload.len()) as u64 => wc.status = WcStatus::LocLenErr,
            Ok(_) => {
                let grh = crate::grh::ipv6_grh(peer, &ctx.gid, payload.len() as u16);
                // SAFETY: checked under the held view.
                unsafe {
                    view.scatter(r.sg.get(), 0, &grh);
                    view.scatter(r.sg.get(), GRH_LEN as u64, payload);
                }
                wc.byte_len = (GRH_LEN + payload.len()) as u32;
                wc.src_qp = h.src_qpn;
                wc.wc_flags = WcFlags::GRH;
                if h.flags & F_IMM != 0 {
                    wc.imm_data = h.imm;
                    wc.wc_flags |= WcFlags::WITH_IMM;
                }
            }
        }
        wc
    }
}
