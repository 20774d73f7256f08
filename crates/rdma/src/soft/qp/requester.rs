//! The requester side of an RC queue pair: transmission of the send queue, answers
//! (ACK, NAK, read and atomic responses), the RNR back-off and the transport timeout,
//! and a lost peer.

use std::time::{Duration, Instant};

use super::super::conn::Conn;
use super::super::cq::lock;
use super::super::ctx::CtxShared;
use super::super::wire::{Hdr, Kind, Nak, ReqOp, FRAG, F_FIRST, F_LAST, F_SOLICITED};
use super::{rnr_delay, rnr_retry_again, send_hdr, seq_le, Frame, QpInner, SendSlot, SoftQp};
use crate::verbs::{EventType, Gid, QpState, QpType, SendOp, WcStatus};

impl SoftQp {
    /// Transmits what may be transmitted; completes a head with a local error.
    pub(super) fn kick(&self, ctx: &CtxShared, g: &mut QpInner) {
        if g.state != QpState::Rts {
            return;
        }
        if let Some(s) = g.sq.front().and_then(|h| h.local_err) {
            self.complete_head(g, s);
            self.enter_error(ctx, g, None);
            return;
        }
        if g.resend_at.is_some() {
            return;
        }
        while g.sent < g.sq.len() {
            if g.sq[g.sent].local_err.is_some() {
                return;
            }
            let conn = match &g.conn {
                Some(c) if !c.is_dead() => c.clone(),
                _ => {
                    self.complete_head(g, WcStatus::RetryExcErr);
                    self.enter_error(ctx, g, Some(EventType::QpFatal));
                    return;
                }
            };
            let dst = g.dest.map_or(0, |d| d.1);
            match self.transmit(ctx, &conn, dst, &g.sq[g.sent]) {
                Ok(()) => {}
                Err(WcStatus::LocProtErr) => {
                    // Reported in order, when it reaches the head.
                    let i = g.sent;
                    g.sq[i].local_err = Some(WcStatus::LocProtErr);
                    if i == 0 {
                        self.complete_head(g, WcStatus::LocProtErr);
                        self.enter_error(ctx, g, None);
                    }
                    return;
                }
                Err(status) => {
                    self.complete_head(g, status);
                    self.enter_error(ctx, g, Some(EventType::QpFatal));
                    return;
                }
            }
            if g.sent == 0 {
                g.head_since = Instant::now();
            }
            g.sent += 1;
        }
    }

    pub(super) fn transmit(
        &self,
        ctx: &CtxShared,
        conn: &Conn,
        dst: u32,
        s: &SendSlot,
    ) -> std::result::Result<(), WcStatus> {
        let mut h = Hdr {
            kind: Kind::Req as u8,
            dst_qpn: dst,
            src_qpn: self.qpn,
            msn: s.msn,
            total: s.total,
            ..Hdr::default()
        };
        let (op, remote) = match s.op {
            SendOp::Send => (ReqOp::Send, None),
            SendOp::SendWithImm(i) => {
                h.imm = i;
                (ReqOp::SendImm, None)
            }
            SendOp::RdmaWrite(r) => (ReqOp::Write, Some(r)),
            SendOp::RdmaWriteWithImm(r, i) => {
                h.imm = i;
                (ReqOp::WriteImm, Some(r))
            }
            SendOp::RdmaRead(r) => (ReqOp::Read, Some(r)),
            SendOp::AtomicCmpSwap {
                remote,
                compare,
                swap,
            } => {
                h.value = compare;
                h.swap = swap;
                (ReqOp::CmpSwap, Some(remote))
            }
            SendOp::AtomicFetchAdd { remote, add } => {
                h.value = add;
                (ReqOp::FetchAdd, Some(remote))
            }
        };
        h.op = op as u8;
        if s.solicited {
            h.flags |= F_SOLICITED;
        }
        if let Some(r) = remote {
            h.raddr = r.addr;
            h.rkey = r.rkey;
        }
        if matches!(op, ReqOp::Read | ReqOp::CmpSwap | ReqOp::FetchAdd) {
            h.flags |= F_FIRST | F_LAST;
            return if send_hdr(conn, &h) {
                Ok(())
            } else {
                Err(WcStatus::RetryExcErr)
            };
        }
        let view = ctx.mrs.view();
        if s.inline.is_none() && view.check_local(self.pd, s.sg.get(), false).is_err() {
            // Deregistered since the post: nothing is read from it.
            return Err(WcStatus::LocProtErr);
        }
        let mut off = 0u64;
        loop {
            let len = (s.total - off).min(FRAG as u64);
            h.offset = off;
            h.flags = (h.flags & F_SOLICITED)
                | if off == 0 { F_FIRST } else { 0 }
                | if off + len == s.total { F_LAST } else { 0 };
            let hb = h.emit();
            let inline = s.inline.as_ref().map(|(b, _)| &b[..]);
            let frame = Frame::new(&hb, inline, s.sg.get(), off, len);
            // SAFETY: header and inline data are alive; the rest lies in registered
            // memory checked under the view held here.
            if !unsafe { conn.send(frame.pieces()) } {
                return Err(WcStatus::RetryExcErr);
            }
            off += len;
            if off >= s.total {
                return Ok(());
            }
        }
    }

    /// Pops the head of the send queue with `status`, reporting it when due.
    /// Timers: RNR resend and the transport timeout. Returns the next deadline.
    pub(crate) fn on_timer(&self, ctx: &CtxShared, now: Instant) -> Option<Instant> {
        if self.qp_type == QpType::Srd {
            return self.srd_timer(ctx, now);
        }
        let mut g = lock(&self.inner);
        if g.state != QpState::Rts {
            return None;
        }
        if let Some(t) = g.resend_at {
            if t <= now {
                g.resend_at = None;
                g.head_since = now;
                self.kick(ctx, &mut g);
            } else {
                return Some(t);
            }
        }
        if g.sent == 0 || g.timeout == 0 {
            return None;
        }
        // 4.096 µs × 2^timeout per try, retry_cnt + 1 tries; the connection under us is
        // reliable, so only a silent peer gets here.
        let per_try = Duration::from_nanos(4096u64 << g.timeout.min(31));
        let limit = per_try * (u32::from(g.retry_cnt) + 1);
        let deadline = g.head_since + limit;
        if now >= deadline {
            self.complete_head(&mut g, WcStatus::RetryExcErr);
            self.enter_error(ctx, &mut g, None);
            return None;
        }
        Some(deadline)
    }

    /// The peer at `gid` is gone.
    pub(crate) fn on_peer_lost(&self, ctx: &CtxShared, gid: &Gid) {
        if self.qp_type == QpType::Srd {
            return self.srd_peer_lost(gid);
        }
        let mut g = lock(&self.inner);
        if self.qp_type != QpType::Rc || g.dest.map(|d| d.0) != Some(*gid) {
            return;
        }
        if !matches!(g.state, QpState::Rtr | QpState::Rts) {
            return;
        }
        if !g.sq.is_empty() {
            self.complete_head(&mut g, WcStatus::RetryExcErr);
        }
        self.enter_error(ctx, &mut g, Some(EventType::QpFatal));
    }

    /// An ACK, NAK, read response or atomic response for this requester.
    pub(crate) fn on_response(&self, ctx: &CtxShared, peer: &Gid, h: &Hdr, payload: &[u8]) {
        let mut g = lock(&self.inner);
        if g.state != QpState::Rts || g.dest != Some((*peer, h.src_qpn)) {
            return;
        }
        match Kind::from_wire(h.kind) {
            Some(Kind::Ack) => {
                while g.sent > 0 {
                    let head = &g.sq[0];
                    let done = seq_le(head.msn, h.msn)
                        && matches!(
                            head.op,
                            SendOp::Send
                                | SendOp::SendWithImm(_)
                                | SendOp::RdmaWrite(_)
                                | SendOp::RdmaWriteWithImm(..)
                        );
                    if !done {
                        break;
                    }
                    self.complete_head(&mut g, WcStatus::Success);
                }
                self.kick(ctx, &mut g);
            }
            Some(Kind::ReadResp) => {
                if g.sent == 0 || g.sq[0].msn != h.msn || !matches!(g.sq[0].op, SendOp::RdmaRead(_))
                {
                    return;
                }
                let head = &mut g.sq[0];
                let end = h.offset.checked_add(payload.len() as u64);
                if h.offset != head.read_got || end.is_none_or(|e| e > head.total) {
                    return;
                }
                let view = ctx.mrs.view();
                if view.check_local(self.pd, head.sg.get(), true).is_err() {
                    drop(view);
                    self.complete_head(&mut g, WcStatus::LocProtErr);
                    self.enter_error(ctx, &mut g, None);
                    return;
                }
                // SAFETY: checked under the held view.
                unsafe { view.scatter(head.sg.get(), h.offset, payload) };
                drop(view);
                head.read_got += payload.len() as u64;
                if h.flags & F_LAST != 0 && head.read_got == head.total {
                    self.complete_head(&mut g, WcStatus::Success);
                    self.kick(ctx, &mut g);
                }
            }
            Some(Kind::AtomicResp) => {
                if g.sent == 0
                    || g.sq[0].msn != h.msn
                    || !matches!(
                        g.sq[0].op,
                        SendOp::AtomicCmpSwap { .. } | SendOp::AtomicFetchAdd { .. }
                    )
                {
                    return;
                }
                let view = ctx.mrs.view();
                let sg = g.sq[0].sg;
                if view.check_local(self.pd, sg.get(), true).is_err() {
                    drop(view);
                    self.complete_head(&mut g, WcStatus::LocProtErr);
                    self.enter_error(ctx, &mut g, None);
                    return;
                }
                // SAFETY: checked under the held view.
                unsafe { view.scatter(sg.get(), 0, &h.value.to_le_bytes()) };
                drop(view);
                self.complete_head(&mut g, WcStatus::Success);
                self.kick(ctx, &mut g);
            }
            Some(Kind::Nak) => {
                if g.sent == 0 || g.sq[0].msn != h.msn {
                    return;
                }
                if Nak::from_wire(h.op) == Some(Nak::Rnr) {
                    let rnr_retry = g.rnr_retry;
                    if rnr_retry_again(rnr_retry, &mut g.rnr_left) {
                        g.sent = 0;
                        g.sq[0].read_got = 0;
                        g.resend_at = Some(Instant::now() + rnr_delay(h.rnr_timer));
                        ctx.wake();
                        return;
                    }
                }
                self.complete_head(&mut g, Nak::status_of(h.op));
                self.enter_error(ctx, &mut g, None);
            }
            _ => {}
        }
    }
}
