//! SRD queue pairs of the software device: EFA's scalable reliable datagram.
//!
//! Addressed like UD (an address handle, a remote queue pair number and Q_Key per send),
//! but:
//!
//! - **reliable**: a send completes successfully only once the receiving queue pair took
//!   the datagram into a posted receive (the receiver answers `SrdAck`); each datagram is
//!   delivered at most once (the connection under it is reliable and a datagram is sent
//!   again only after the receiver refused it);
//! - **unordered**: sends complete in whatever order their answers come, and with
//!   [`SoftFault::srd_reorder`](crate::SoftFault) each datagram leaves after a random
//!   delay, so later datagrams overtake earlier ones;
//! - **MTU-limited**: a send longer than [`SRD_MTU`](crate::soft::SRD_MTU) is refused at
//!   posting (`EINVAL`);
//! - **receiver not ready**: a datagram finding no posted receive is refused (`SrdNak`
//!   RNR with the receiver's `min_rnr_timer`); the sender sends it again after that
//!   timer, up to `rnr_retry` times (7: for ever), then completes it with
//!   `RNR_RETRY_EXC_ERR`, as EFA does;
//! - **lost peers**: a send to a context that cannot be reached, or whose process ended
//!   while the send was outstanding, or to a queue pair that does not exist there,
//!   completes with `RETRY_EXC_ERR`. Unlike RC, the queue pair stays usable: one lost
//!   peer does not affect the others.
//!
//! A receive starts with a 40-byte GRH holding the sender's GID (as UD's do on this
//! device; `WcFlags::GRH`), the completion's `src_qp` names the sending queue pair. EFA
//! hardware has no GRH on SRD: there the sender is named by the extended completion
//! queue (`Context::create_efa_cq`: `WorkCompletion::sgid`, or the address handle
//! number in `slid`), and the efa provider reads whichever the completion gives.
//!
//! RDMA read is not offered on SRD by this device (sends only).
//!
//! Datagrams posted in one batch (`QueuePair::post_send_batch`) to one context leave in
//! one packet ([`SrdOut`], `Kind::SrdBundle`), as hardware takes a list of work requests
//! at one doorbell; a send whose connection turns out dead there completes when the
//! context sees the peer lost (`RETRY_EXC_ERR`), not at once.
//!
//! The receiver acknowledges what one read of a connection brought in one packet
//! ([`PendingAcks`], `Kind::SrdAcks`) rather than one packet per datagram: on this device
//! a packet (a system call at each end and a wake-up) costs far more than its bytes.
//!
//! Peer input never panics: a datagram whose length disagrees with its header or
//! exceeds the MTU is dropped; answers naming no outstanding send are ignored; an
//! acknowledgement packet whose length is not a whole number of headers is dropped; a
//! bundle is read up to its first datagram that does not fit, and entries of another
//! kind in it are skipped.

use std::sync::Arc;
use std::time::Instant;

use ofi_core::{Errno, Error, Result};

use super::super::conn::Conn;
use super::super::cq::lock;
use super::super::ctx::CtxShared;
use super::super::wire::{
    Hdr, Kind, Nak, F_FIRST, F_IMM, F_LAST, F_SOLICITED, HDR_LEN, MAX_PACKET,
};
use super::super::SRD_MTU;
use super::{rnr_delay, send_hdr, Frame, QpInner, SgList, SoftQp, MAX_INLINE};
use crate::verbs::{Gid, QpState, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion};

/// An SRD send not yet answered.
pub(super) struct SrdSend {
    pub(super) wr_id: u64,
    sg: SgList,
    inline: Option<([u8; MAX_INLINE], usize)>,
    imm: Option<u32>,
    solicited: bool,
    signaled: bool,
    msn: u32,
    total: u64,
    /// Destination GID, queue pair and Q_Key.
    dest: (Gid, u32, u32),
    rnr_left: u8,
    /// Waiting out a receiver-not-ready until then.
    resend_at: Option<Instant>,
}

/// Most acknowledgements one `Kind::SrdAcks` packet carries.
const ACKS_PER_PACKET: usize = 64;

/// The SRD acknowledgements a context owes while it reads its connections, by the
/// connection they go back on: sent when the read of a connection ends
/// ([`PendingAcks::flush`]) or a packet's worth is owed, as one packet — a lone one as
/// a plain `Kind::SrdAck`. Buffers are kept between reads (no allocation once warm).
#[derive(Default)]
pub(crate) struct PendingAcks {
    to: Vec<(Arc<Conn>, Vec<u8>)>,
}

impl PendingAcks {
    /// Owes `ack` on `conn`.
    fn add(&mut self, conn: &Arc<Conn>, ack: &Hdr) {
        let i = match self.to.iter().position(|(c, _)| Arc::ptr_eq(c, conn)) {
            Some(i) => i,
            None => {
                self.to
                    .push((conn.clone(), Vec::with_capacity(ACKS_PER_PACKET * HDR_LEN)));
                self.to.len() - 1
            }
        };
        let owed = &mut self.to[i].1;
        owed.extend_from_slice(&ack.emit());
        if owed.len() >= ACKS_PER_PACKET * HDR_LEN {
            send_acks(conn, owed);
            owed.clear();
        }
    }

    /// Sends everything owed; forgets connections that ended.
    pub(crate) fn flush(&mut self) {
        for (conn, owed) in &mut self.to {
            if !owed.is_empty() {
                send_acks(conn, owed);
                owed.clear();
            }
        }
        self.to.retain(|(c, _)| !c.is_dead());
    }
}

/// Sends the acknowledgement headers `acks` on `conn` as one packet.
fn send_acks(conn: &Conn, acks: &[u8]) {
    if acks.len() == HDR_LEN {
        conn.send_packet(acks, &[]);
        return;
    }
    let h = Hdr {
        kind: Kind::SrdAcks as u8,
        total: acks.len() as u64,
        ..Hdr::default()
    };
    conn.send_packet(&h.emit(), acks);
}

/// The acknowledgements of a `Kind::SrdAcks` packet's payload, or nothing when it is not
/// a whole number of headers; entries that are not acknowledgements are skipped.
pub(crate) fn acks_in(payload: &[u8]) -> impl Iterator<Item = Hdr> + '_ {
    let whole = payload.len().is_multiple_of(HDR_LEN);
    payload
        .chunks_exact(HDR_LEN)
        .filter(move |_| whole)
        .filter_map(|a| Hdr::parse(a).map(|(h, _)| h))
        .filter(|h| h.kind == Kind::SrdAck as u8)
}

/// Most bytes of datagram packets one `Kind::SrdBundle` carries (a reader takes
/// [`MAX_PACKET`] bytes).
const BUNDLE_MAX: usize = MAX_PACKET - HDR_LEN;

/// The SRD datagrams of a batch being posted, gathered for one context at a time: sent
/// as one packet when the batch ends, or the next goes to another context or would not
/// fit (a lone datagram as itself).
#[derive(Default)]
pub(super) struct SrdOut {
    conn: Option<Arc<Conn>>,
    packets: Vec<u8>,
    count: usize,
}

impl SrdOut {
    /// Adds the packet `frame` for `conn`.
    ///
    /// # Safety
    /// The frame's pieces are readable for the call (the caller holds the MR view it
    /// checked them under); they are copied.
    unsafe fn add(&mut self, conn: Arc<Conn>, frame: &Frame<'_>) {
        let len: usize = frame.pieces().iter().map(|v| v.iov_len).sum();
        let same = self.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn));
        if !same || self.packets.len() + len > BUNDLE_MAX {
            self.send();
        }
        for v in frame.pieces() {
            // SAFETY: the caller's contract; copied raw.
            self.packets.extend_from_slice(unsafe {
                std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
            });
        }
        self.conn = Some(conn);
        self.count += 1;
    }

    /// Sends what was gathered.
    pub(super) fn send(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self.count == 1 {
            conn.send_packet(&self.packets, &[]);
        } else {
            let h = Hdr {
                kind: Kind::SrdBundle as u8,
                total: self.packets.len() as u64,
                ..Hdr::default()
            };
            conn.send_packet(&h.emit(), &self.packets);
        }
        self.packets.clear();
        self.count = 0;
    }
}

/// The datagrams of a `Kind::SrdBundle` packet's payload, each its header and `total`
/// bytes: read up to the first that does not fit; entries of another kind are skipped.
pub(crate) fn bundled(payload: &[u8]) -> impl Iterator<Item = (Hdr, &[u8])> {
    let mut rest = payload;
    std::iter::from_fn(move || loop {
        let whole = Hdr::parse(rest).and_then(|(h, after)| {
            let n = usize::try_from(h.total)
                .ok()
                .filter(|&n| n <= after.len())?;
            Some((h, after.split_at(n)))
        });
        let Some((h, (body, tail))) = whole else {
            rest = &[];
            return None;
        };
        rest = tail;
        if h.kind == Kind::Srd as u8 {
            return Some((h, body));
        }
    })
}

/// Answers an SRD datagram for a queue pair that does not exist here.
pub(crate) fn srd_nak_no_qp(conn: &Conn, h: &Hdr) {
    super::answer_no_qp(conn, h, Kind::SrdNak);
}

impl SoftQp {
    /// Posts an SRD send (the caller holds the queue pair in RTS and checked the
    /// element count; `inline` holds the data of an `INLINE` send).
    pub(super) fn post_srd(
        &self,
        ctx: &CtxShared,
        g: &mut QpInner,
        wr: &SendWr<'_>,
        signaled: bool,
        inline: Option<([u8; MAX_INLINE], usize)>,
    ) -> Result<()> {
        let (dest, imm) = super::datagram_send(wr, "SRD")?;
        let (total, local_err) = match inline {
            Some((_, n)) => (n as u64, None),
            None => match ctx.mrs.view().check_local(self.pd, wr.sg_list, false) {
                Ok(t) => (t, None),
                Err(s) => (0, Some(s)),
            },
        };
        if total > SRD_MTU as u64 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("SRD send of {total} bytes over the MTU ({SRD_MTU})"),
            ));
        }
        if g.srd.len() >= self.cap.max_send_wr as usize {
            return Err(Error::new(Errno::ENOMEM, "send queue full"));
        }
        if let Some(status) = local_err {
            let wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Send, self.qpn);
            self.send_cq.push(wc, false);
            return Ok(());
        }
        let msn = g.next_msn;
        g.next_msn = msn.wrapping_add(1);
        let s = SrdSend {
            wr_id: wr.wr_id,
            sg: SgList::new(wr.sg_list),
            inline,
            imm,
            solicited: wr.send_flags.contains(SendFlags::SOLICITED),
            signaled,
            msn,
            total,
            dest: (dest.ah.dgid(), dest.remote_qpn, dest.remote_qkey),
            rnr_left: g.rnr_retry,
            resend_at: None,
        };
        match self.srd_transmit(ctx, &s, g.srd_out.as_mut()) {
            Ok(()) => g.srd.push_back(s),
            Err(status) => self.srd_complete(&s, status),
        }
        Ok(())
    }

    /// Sends one SRD datagram (now, or after the reordering delay), or adds it to `out`,
    /// the batch being posted.
    fn srd_transmit(
        &self,
        ctx: &CtxShared,
        s: &SrdSend,
        out: Option<&mut SrdOut>,
    ) -> std::result::Result<(), WcStatus> {
        let Some(conn) = ctx.conn_to(&s.dest.0) else {
            return Err(WcStatus::RetryExcErr);
        };
        let view = ctx.mrs.view();
        if s.inline.is_none() && view.check_local(self.pd, s.sg.get(), false).is_err() {
            // Deregistered since the post: nothing is read from it.
            return Err(WcStatus::LocProtErr);
        }
        let h = Hdr {
            kind: Kind::Srd as u8,
            flags: F_FIRST
                | F_LAST
                | if s.imm.is_some() { F_IMM } else { 0 }
                | if s.solicited { F_SOLICITED } else { 0 },
            dst_qpn: s.dest.1,
            src_qpn: self.qpn,
            msn: s.msn,
            imm: s.imm.unwrap_or(0),
            total: s.total,
            value: u64::from(s.dest.2),
            ..Hdr::default()
        }
        .emit();
        let inline = s.inline.as_ref().map(|(b, len)| &b[..*len]);
        let frame = Frame::new(&h, inline, s.sg.get(), 0, s.total);
        let delay = lock(&ctx.fault).srd_delay();
        if let Some(out) = out.filter(|_| delay.is_zero()) {
            // SAFETY: the scatter-gather list lies in registered memory checked under
            // the view held here.
            unsafe { out.add(conn, &frame) };
            return Ok(());
        }
        // SAFETY: the scatter-gather list lies in registered memory checked under the
        // view held here.
        if !unsafe { frame.send(ctx, conn, delay) } {
            return Err(WcStatus::RetryExcErr);
        }
        Ok(())
    }

    /// Reports the end of send `s` when due.
    fn srd_complete(&self, s: &SrdSend, status: WcStatus) {
        if s.signaled || status != WcStatus::Success {
            let mut wc = WorkCompletion::new(s.wr_id, status, WcOpcode::Send, self.qpn);
            wc.byte_len = s.total as u32;
            self.send_cq.push(wc, false);
        }
    }

    /// An SRD datagram for this queue pair: placed into the next receive (and
    /// acknowledged, in `acks`), or refused (at once).
    pub(crate) fn on_srd_datagram(
        &self,
        ctx: &CtxShared,
        conn: &Arc<Conn>,
        peer: &Gid,
        h: &Hdr,
        payload: &[u8],
        acks: &mut PendingAcks,
    ) {
        let reply = |kind: Kind, op: Nak, rnr: u8| Hdr {
            kind: kind as u8,
            op: op as u8,
            rnr_timer: rnr,
            dst_qpn: h.src_qpn,
            src_qpn: self.qpn,
            msn: h.msn,
            ..Hdr::default()
        };
        let answer = |kind: Kind, op: Nak, rnr: u8| {
            send_hdr(conn, &reply(kind, op, rnr));
        };
        let mut g = lock(&self.inner);
        if self.qp_type != crate::verbs::QpType::Srd
            || !matches!(g.state, QpState::Rtr | QpState::Rts)
        {
            return answer(Kind::SrdNak, Nak::NoQp, 0);
        }
        if payload.len() as u64 != h.total || h.total > SRD_MTU as u64 {
            // Malformed: dropped (a real sender never sends it).
            return;
        }
        if h.value != u64::from(g.qkey) {
            return answer(Kind::SrdNak, Nak::InvReq, 0);
        }
        let Some(r) = self.take_recv(&mut g) else {
            return answer(Kind::SrdNak, Nak::Rnr, g.min_rnr_timer);
        };
        let wc = self.place_datagram(ctx, peer, h, payload, &r);
        let refusal = match wc.status {
            WcStatus::Success => None,
            WcStatus::LocLenErr => Some(Nak::InvReq),
            _ => Some(Nak::RemOp),
        };
        drop(g);
        match refusal {
            // The `op` byte of an acknowledgement means nothing.
            None => acks.add(conn, &reply(Kind::SrdAck, Nak::Rnr, 0)),
            Some(nak) => answer(Kind::SrdNak, nak, 0),
        }
        self.recv_cq.push(wc, h.flags & F_SOLICITED != 0);
    }

    /// The receiver's answer to one of this queue pair's SRD sends.
    pub(crate) fn on_srd_answer(&self, ctx: &CtxShared, peer: &Gid, h: &Hdr) {
        let mut g = lock(&self.inner);
        if self.qp_type != crate::verbs::QpType::Srd {
            return;
        }
        let Some(i) = g
            .srd
            .iter()
            .position(|s| s.msn == h.msn && s.dest.0 == *peer && s.dest.1 == h.src_qpn)
        else {
            return;
        };
        if g.srd[i].resend_at.is_some() {
            // Waiting to be sent again: nothing of it is in flight.
            return;
        }
        let status = if h.kind == Kind::SrdAck as u8 {
            WcStatus::Success
        } else {
            if Nak::from_wire(h.op) == Some(Nak::Rnr) {
                let rnr_retry = g.rnr_retry;
                let s = &mut g.srd[i];
                if super::rnr_retry_again(rnr_retry, &mut s.rnr_left) {
                    s.resend_at = Some(Instant::now() + rnr_delay(h.rnr_timer));
                    ctx.wake();
                    return;
                }
            }
            Nak::status_of(h.op)
        };
        if let Some(s) = g.srd.remove(i) {
            self.srd_complete(&s, status);
        }
    }

    /// Sends again what waited out its RNR timer; returns the next deadline.
    pub(super) fn srd_timer(&self, ctx: &CtxShared, now: Instant) -> Option<Instant> {
        let mut g = lock(&self.inner);
        if g.state != QpState::Rts {
            return None;
        }
        let mut next: Option<Instant> = None;
        let mut i = 0;
        while i < g.srd.len() {
            match g.srd[i].resend_at {
                Some(t) if t <= now => {
                    g.srd[i].resend_at = None;
                    if let Err(status) = self.srd_transmit(ctx, &g.srd[i], None) {
                        if let Some(s) = g.srd.remove(i) {
                            self.srd_complete(&s, status);
                        }
                        continue;
                    }
                }
                Some(t) => next = Some(next.map_or(t, |n| n.min(t))),
                None => {}
            }
            i += 1;
        }
        next
    }

    /// The context at `gid` is gone: every send to it completes with `RETRY_EXC_ERR`.
    pub(super) fn srd_peer_lost(&self, gid: &Gid) {
        let mut g = lock(&self.inner);
        let mut i = 0;
        while i < g.srd.len() {
            if g.srd[i].dest.0 == *gid {
                if let Some(s) = g.srd.remove(i) {
                    self.srd_complete(&s, WcStatus::RetryExcErr);
                }
            } else {
                i += 1;
            }
        }
    }
}
