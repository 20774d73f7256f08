//! Queue pairs and shared receive queues of the software device: the requester (send
//! queue: transmit, acknowledgements, RNR back-off, timeouts) and the responder
//! (placement of sends and writes, reads and atomics served from registered memory, all
//! checked by key, bounds, protection domain and access).
//!
//! RC follows go-back-N over an ordered, reliable connection: every message has a
//! sequence number; the responder accepts only the next expected one, so after a
//! receiver-not-ready NAK everything behind the refused message is dropped and sent
//! again after the RNR timer. Completions of a send queue come in posting order.
//!
//! Peer input never panics: a packet for an unknown or mismatched queue pair, out of
//! sequence, or with impossible offsets is dropped; a request breaking the rules gets a
//! NAK and moves the responder's queue pair to the error state.
//!
//! SRD (in `srd`) is addressed like UD but reliable and unordered: see that module.

mod requester;
mod responder;
mod srd;

pub(crate) use srd::{acks_in, bundled, srd_nak_no_qp, PendingAcks};

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ofi_core::{Errno, Error, Result};

use super::conn::Conn;
use super::cq::{lock, SoftCq};
use super::ctx::CtxShared;
use super::mem::MrView;
use super::wire::{Hdr, Kind, Nak, ReqOp, F_FIRST, F_IMM, F_LAST, F_SOLICITED, HDR_LEN};
use crate::verbs::{
    Access, AsyncEvent, EventElement, EventType, Gid, Mtu, QpAttr, QpAttrMask, QpCap, QpState,
    QpType, RecvWr, SendFlags, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};

/// Most scatter/gather elements per work request.
pub(crate) const MAX_SGE: usize = 16;
/// Most inline bytes per send.
pub(crate) const MAX_INLINE: usize = 256;
/// The UD payload limit (the port's MTU).
pub(crate) const UD_MTU: u64 = 4096;

#[derive(Clone, Copy)]
struct SgList {
    sges: [Sge; MAX_SGE],
    n: usize,
}

impl SgList {
    fn new(s: &[Sge]) -> SgList {
        let mut sges = [Sge::default(); MAX_SGE];
        sges[..s.len()].copy_from_slice(s);
        SgList { sges, n: s.len() }
    }
    fn get(&self) -> &[Sge] {
        &self.sges[..self.n]
    }
}

struct SendSlot {
    wr_id: u64,
    op: SendOp,
    sg: SgList,
    inline: Option<([u8; MAX_INLINE], usize)>,
    signaled: bool,
    solicited: bool,
    msn: u32,
    total: u64,
    local_err: Option<WcStatus>,
    read_got: u64,
}

#[derive(Clone, Copy)]
pub(crate) struct RecvSlot {
    wr_id: u64,
    sg: SgList,
}

struct Inbound {
    msn: u32,
    op: ReqOp,
    recv: Option<RecvSlot>,
    total: u64,
    got: u64,
    raddr: u64,
    rkey: u32,
    imm: u32,
    solicited: bool,
}

struct QpInner {
    state: QpState,
    qkey: u32,
    access: Access,
    dest: Option<(Gid, u32)>,
    mtu: Mtu,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    conn: Option<Arc<Conn>>,
    sq: VecDeque<SendSlot>,
    next_msn: u32,
    sent: usize,
    rnr_left: u8,
    resend_at: Option<Instant>,
    head_since: Instant,
    rq: VecDeque<RecvSlot>,
    expected: u32,
    inbound: Option<Inbound>,
    /// SRD sends not yet answered, in posting order (completed in any order).
    srd: VecDeque<srd::SrdSend>,
    /// While a batch is posted ([`SoftQp::post_send_batch`]): its SRD datagrams, sent
    /// together when it ends.
    srd_out: Option<srd::SrdOut>,
}

/// A shared receive queue.
pub(crate) struct SoftSrq {
    pub srqn: u32,
    pub pd: u32,
    max_wr: usize,
    max_sge: usize,
    q: Mutex<VecDeque<RecvSlot>>,
}

impl SoftSrq {
    pub(crate) fn new(srqn: u32, pd: u32, max_wr: u32, max_sge: u32) -> SoftSrq {
        SoftSrq {
            srqn,
            pd,
            max_wr: max_wr as usize,
            max_sge: (max_sge as usize).min(MAX_SGE),
            q: Mutex::new(VecDeque::with_capacity(max_wr as usize)),
        }
    }

    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        if wr.sg_list.len() > self.max_sge {
            return Err(Error::new(
                Errno::EINVAL,
                "too many scatter/gather elements",
            ));
        }
        let mut q = lock(&self.q);
        if q.len() >= self.max_wr {
            return Err(Error::new(Errno::ENOMEM, "shared receive queue full"));
        }
        q.push_back(RecvSlot {
            wr_id: wr.wr_id,
            sg: SgList::new(wr.sg_list),
        });
        Ok(())
    }
}

/// A queue pair.
pub(crate) struct SoftQp {
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: u32,
    pub cap: QpCap,
    sq_sig_all: bool,
    send_cq: Arc<SoftCq>,
    recv_cq: Arc<SoftCq>,
    srq: Option<Arc<SoftSrq>>,
    inner: Mutex<QpInner>,
}

/// The RNR timer codes of the InfiniBand specification, in microseconds (code 0 is the
/// longest, 655.36 ms).
fn rnr_delay(code: u8) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
        245_760, 327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[usize::from(code & 31)]))
}

/// Whether a send refused with RNR goes again, under the queue pair's `rnr_retry`
/// (7: for ever) with `left` retries left (counted down here).
pub(crate) fn rnr_retry_again(rnr_retry: u8, left: &mut u8) -> bool {
    if rnr_retry == 7 {
        return true;
    }
    if *left == 0 {
        return false;
    }
    *left -= 1;
    true
}

/// Answers a request for a queue pair that does not exist here.
pub(crate) fn nak_no_qp(conn: &Conn, h: &Hdr) {
    if h.flags & F_FIRST != 0 {
        answer_no_qp(conn, h, Kind::Nak);
    }
}

/// Answers `h` with a `kind` (`Nak` for RC and UD, `SrdNak` for SRD) saying its queue
/// pair does not exist here.
pub(crate) fn answer_no_qp(conn: &Conn, h: &Hdr, kind: Kind) {
    send_hdr(
        conn,
        &Hdr {
            kind: kind as u8,
            op: Nak::NoQp as u8,
            dst_qpn: h.src_qpn,
            src_qpn: h.dst_qpn,
            msn: h.msn,
            ..Hdr::default()
        },
    );
}

fn send_hdr(conn: &Conn, h: &Hdr) -> bool {
    conn.send_packet(&h.emit(), &[])
}

/// One packet as a gather list: the emitted header, then `len` bytes from offset `off`
/// of the payload — the work request's inline bytes, or else its scatter-gather list in
/// registered memory (checked by the caller, under the MR view it holds while sending).
struct Frame<'a> {
    iov: [libc::iovec; MAX_SGE + 1],
    n: usize,
    /// The header and inline bytes the entries point at.
    _bytes: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> Frame<'a> {
    /// The frame of `hdr` and the payload piece `[off, off + len)`; inline bytes hold the
    /// whole payload (`off + len` within them).
    fn new(
        hdr: &'a [u8; HDR_LEN],
        inline: Option<&'a [u8]>,
        sg: &[Sge],
        off: u64,
        len: u64,
    ) -> Frame<'a> {
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; MAX_SGE + 1];
        iov[0] = libc::iovec {
            iov_base: hdr.as_ptr() as *mut _,
            iov_len: HDR_LEN,
        };
        let n = match inline {
            Some(b) => {
                let piece = &b[off as usize..][..len as usize];
                iov[1] = libc::iovec {
                    iov_base: piece.as_ptr() as *mut _,
                    iov_len: piece.len(),
                };
                1
            }
            None => MrView::gather(sg, off, len, &mut iov[1..]),
        };
        Frame {
            iov,
            n,
            _bytes: std::marker::PhantomData,
        }
    }

    /// The packet's pieces, header first.
    fn pieces(&self) -> &[libc::iovec] {
        &self.iov[..=self.n]
    }

    /// Sends the packet on `conn` now or, with a fault `delay`, a copy of it once the
    /// delay is over (the context's service sends it). False when the connection is
    /// dead; a delayed packet counts as sent.
    ///
    /// # Safety
    /// The scatter-gather pieces point at registered memory readable for the call (the
    /// caller holds the MR view it checked them under).
    unsafe fn send(&self, ctx: &CtxShared, conn: Arc<Conn>, delay: Duration) -> bool {
        if delay.is_zero() {
            // SAFETY: header and inline bytes are borrowed for the frame's life; the
            // rest is the caller's contract.
            return unsafe { conn.send(self.pieces()) };
        }
        let mut p = Vec::with_capacity(self.pieces().iter().map(|v| v.iov_len).sum());
        for v in self.pieces() {
            // SAFETY: as above; copied raw.
            p.extend_from_slice(unsafe {
                std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
            });
        }
        lock(&ctx.delayed).push((Instant::now() + delay, conn, p));
        ctx.wake();
        true
    }
}

/// The destination and immediate data of a datagram (UD or SRD, named by `kind`) send:
/// `EINVAL` without a destination or for another operation than a send.
fn datagram_send<'a>(
    wr: &SendWr<'a>,
    kind: &str,
) -> Result<(crate::verbs::UdDest<'a>, Option<u32>)> {
    let Some(dest) = wr.ud else {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{kind} send without a destination"),
        ));
    };
    match wr.op {
        SendOp::Send => Ok((dest, None)),
        SendOp::SendWithImm(i) => Ok((dest, Some(i))),
        _ => Err(Error::new(
            Errno::EINVAL,
            format!("{kind} offers only sends"),
        )),
    }
}

fn seq_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// What a software queue pair is created with: `ibv_create_qp`'s attributes, with the
/// queues resolved to the software device's own.
pub(crate) struct SoftQpInit {
    pub(crate) qp_type: QpType,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
    pub(crate) send_cq: Arc<SoftCq>,
    pub(crate) recv_cq: Arc<SoftCq>,
    pub(crate) srq: Option<Arc<SoftSrq>>,
}

impl SoftQp {
    /// Queue pair `qpn` of protection domain `pd`, in the reset state.
    pub(crate) fn new(qpn: u32, pd: u32, init: SoftQpInit) -> SoftQp {
        let SoftQpInit {
            qp_type,
            cap,
            sq_sig_all,
            send_cq,
            recv_cq,
            srq,
        } = init;
        SoftQp {
            qpn,
            qp_type,
            pd,
            cap,
            sq_sig_all,
            send_cq,
            recv_cq,
            srq,
            inner: Mutex::new(QpInner {
                state: QpState::Reset,
                qkey: 0,
                access: Access::empty(),
                dest: None,
                mtu: Mtu::Mtu4096,
                timeout: 0,
                retry_cnt: 0,
                rnr_retry: 0,
                // SRD: the device's own short timer (10 µs) unless set.
                min_rnr_timer: u8::from(qp_type == QpType::Srd),
                conn: None,
                sq: VecDeque::with_capacity(cap.max_send_wr as usize),
                next_msn: 0,
                sent: 0,
                rnr_left: 0,
                resend_at: None,
                head_since: Instant::now(),
                rq: VecDeque::with_capacity(cap.max_recv_wr as usize),
                expected: 0,
                inbound: None,
                srd: VecDeque::with_capacity(if qp_type == QpType::Srd {
                    cap.max_send_wr as usize
                } else {
                    0
                }),
                srd_out: None,
            }),
        }
    }

    pub(crate) fn state(&self) -> QpState {
        lock(&self.inner).state
    }

    /// Applies a modify: checks the transition and the attributes it needs.
    pub(crate) fn modify(&self, ctx: &CtxShared, a: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let mut g = lock(&self.inner);
        let from = g.state;
        let to = if mask.contains(QpAttrMask::STATE) {
            a.qp_state
        } else {
            from
        };
        let need = |m: QpAttrMask| -> Result<()> {
            if mask.contains(m) {
                Ok(())
            } else {
                Err(Error::new(
                    Errno::EINVAL,
                    format!("transition {from:?}->{to:?} needs {m:?}"),
                ))
            }
        };
        let rc = self.qp_type == QpType::Rc;
        match (from, to) {
            (_, QpState::Reset) | (_, QpState::Err) => {}
            (QpState::Reset, QpState::Init) => {
                need(QpAttrMask::PKEY_INDEX | QpAttrMask::PORT)?;
                if rc {
                    need(QpAttrMask::ACCESS_FLAGS)?;
                } else {
                    need(QpAttrMask::QKEY)?;
                }
            }
            (QpState::Init, QpState::Init) => {}
            (QpState::Init, QpState::Rtr) => {
                if rc {
                    need(QpAttrMask::RC_TO_RTR)?;
                }
            }
            (QpState::Rtr, QpState::Rts) => {
                if rc {
                    need(QpAttrMask::RC_TO_RTS)?;
                } else {
                    need(QpAttrMask::SQ_PSN)?;
                }
            }
            (QpState::Rts, QpState::Rts) => {}
            _ => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("invalid queue pair transition {from:?}->{to:?}"),
                ))
            }
        }
        if mask.contains(QpAttrMask::ACCESS_FLAGS) {
            g.access = a.qp_access_flags;
        }
        if mask.contains(QpAttrMask::QKEY) {
            g.qkey = a.qkey;
        }
        if mask.contains(QpAttrMask::PATH_MTU) {
            g.mtu = a.path_mtu;
        }
        if mask.contains(QpAttrMask::TIMEOUT) {
            g.timeout = a.timeout;
        }
        if mask.contains(QpAttrMask::RETRY_CNT) {
            g.retry_cnt = a.retry_cnt.min(7);
        }
        if mask.contains(QpAttrMask::RNR_RETRY) {
            g.rnr_retry = a.rnr_retry.min(7);
            g.rnr_left = g.rnr_retry;
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) {
            g.min_rnr_timer = a.min_rnr_timer & 31;
        }
        if mask.contains(QpAttrMask::RQ_PSN) {
            g.expected = a.rq_psn;
        }
        if mask.contains(QpAttrMask::SQ_PSN) {
            g.next_msn = a.sq_psn;
        }
        if rc && mask.contains(QpAttrMask::AV | QpAttrMask::DEST_QPN) {
            g.dest = Some((a.ah_attr.dgid, a.dest_qp_num));
        }
        if from != QpState::Rts && to == QpState::Rts && rc {
            let (gid, _) = g
                .dest
                .ok_or_else(|| Error::new(Errno::EINVAL, "no destination"))?;
            // An unreachable peer is found out by the first request (RETRY_EXC_ERR).
            g.conn = ctx.conn_to(&gid);
        }
        match to {
            QpState::Reset => {
                g.sq.clear();
                g.rq.clear();
                g.sent = 0;
                g.inbound = None;
                g.resend_at = None;
                g.conn = None;
                g.srd.clear();
                g.state = QpState::Reset;
            }
            QpState::Err if from != QpState::Err => self.enter_error(ctx, &mut g, None),
            s => g.state = s,
        }
        Ok(())
    }

    /// Posts a receive.
    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        if self.srq.is_some() {
            return Err(Error::new(
                Errno::EINVAL,
                "queue pair uses a shared receive queue",
            ));
        }
        if wr.sg_list.len() > self.cap.max_recv_sge as usize {
            return Err(Error::new(
                Errno::EINVAL,
                "too many scatter/gather elements",
            ));
        }
        let mut g = lock(&self.inner);
        if g.state == QpState::Reset {
            return Err(Error::new(Errno::EINVAL, "queue pair in RESET"));
        }
        if g.state == QpState::Err {
            let wc = WorkCompletion::new(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            self.recv_cq.push(wc, false);
            return Ok(());
        }
        if g.rq.len() >= self.cap.max_recv_wr as usize {
            return Err(Error::new(Errno::ENOMEM, "receive queue full"));
        }
        g.rq.push_back(RecvSlot {
            wr_id: wr.wr_id,
            sg: SgList::new(wr.sg_list),
        });
        Ok(())
    }

    /// Posts a send work request.
    ///
    /// # Safety
    /// With `INLINE`, the elements' ranges are readable now; otherwise they lie in
    /// registered memory (checked against the keys).
    /// Posts `wrs` in order as one batch: the SRD datagrams of it bound for one context
    /// leave in one packet. Ok when every one was posted; else the index of the first
    /// refused and why (the ones before it were posted, the ones after it not).
    ///
    /// # Safety
    /// As [`SoftQp::post_send`], for each.
    pub(crate) unsafe fn post_send_batch(
        &self,
        ctx: &CtxShared,
        wrs: &[SendWr<'_>],
    ) -> std::result::Result<(), (usize, Error)> {
        // Gathered by this call unless another batch on this queue pair is gathering
        // (it sends these too).
        let gathering = self.qp_type == QpType::Srd && wrs.len() > 1 && {
            let mut g = lock(&self.inner);
            let free = g.srd_out.is_none();
            if free {
                g.srd_out = Some(srd::SrdOut::default());
            }
            free
        };
        let mut posted = Ok(());
        for (i, wr) in wrs.iter().enumerate() {
            // SAFETY: the caller's contract, for each.
            if let Err(e) = unsafe { self.post_send(ctx, wr) } {
                posted = Err((i, e));
                break;
            }
        }
        if gathering {
            let out = lock(&self.inner).srd_out.take();
            if let Some(mut out) = out {
                out.send();
            }
        }
        posted
    }

    pub(crate) unsafe fn post_send(&self, ctx: &CtxShared, wr: &SendWr<'_>) -> Result<()> {
        if wr.sg_list.len() > (self.cap.max_send_sge as usize).min(MAX_SGE) {
            return Err(Error::new(
                Errno::EINVAL,
                "too many scatter/gather elements",
            ));
        }
        let mut g = lock(&self.inner);
        match g.state {
            QpState::Rts => {}
            QpState::Err => {
                let wc = WorkCompletion::new(
                    wr.wr_id,
                    WcStatus::WrFlushErr,
                    wr.op.wc_opcode(),
                    self.qpn,
                );
                self.send_cq.push(wc, false);
                return Ok(());
            }
            s => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("queue pair in {s:?}, not RTS"),
                ))
            }
        }
        let signaled = self.sq_sig_all || wr.send_flags.contains(SendFlags::SIGNALED);
        let inline = if wr.send_flags.contains(SendFlags::INLINE) {
            if !matches!(
                wr.op,
                SendOp::Send
                    | SendOp::SendWithImm(_)
                    | SendOp::RdmaWrite(_)
                    | SendOp::RdmaWriteWithImm(..)
            ) {
                return Err(Error::new(
                    Errno::EINVAL,
                    "inline only for sends and writes",
                ));
            }
            let total: usize = wr.sg_list.iter().map(|s| s.length as usize).sum();
            if total > (self.cap.max_inline_data as usize).min(MAX_INLINE) {
                return Err(Error::new(
                    Errno::EINVAL,
                    "inline data over max_inline_data",
                ));
            }
            let mut buf = [0u8; MAX_INLINE];
            let mut at = 0;
            for s in wr.sg_list {
                // SAFETY: caller's contract: readable now; copied raw.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        s.addr as *const u8,
                        buf[at..].as_mut_ptr(),
                        s.length as usize,
                    )
                };
                at += s.length as usize;
            }
            Some((buf, at))
        } else {
            None
        };
        if self.qp_type == QpType::Ud {
            drop(g);
            return self.post_ud(ctx, wr, signaled, inline);
        }
        if self.qp_type == QpType::Srd {
            return self.post_srd(ctx, &mut g, wr, signaled, inline);
        }
        if g.sq.len() >= self.cap.max_send_wr as usize {
            return Err(Error::new(Errno::ENOMEM, "send queue full"));
        }
        let (total, local_err) = match inline {
            Some((_, n)) => (n as u64, None),
            None => {
                let write = matches!(
                    wr.op,
                    SendOp::RdmaRead(_)
                        | SendOp::AtomicCmpSwap { .. }
                        | SendOp::AtomicFetchAdd { .. }
                );
                match ctx.mrs.view().check_local(self.pd, wr.sg_list, write) {
                    Ok(t) => (t, None),
                    Err(s) => (0, Some(s)),
                }
            }
        };
        let local_err = local_err.or_else(|| {
            let atomic = matches!(
                wr.op,
                SendOp::AtomicCmpSwap { .. } | SendOp::AtomicFetchAdd { .. }
            );
            (atomic && total != 8).then_some(WcStatus::LocLenErr)
        });
        let msn = g.next_msn;
        g.next_msn = msn.wrapping_add(1);
        g.sq.push_back(SendSlot {
            wr_id: wr.wr_id,
            op: wr.op,
            sg: SgList::new(wr.sg_list),
            inline,
            signaled,
            solicited: wr.send_flags.contains(SendFlags::SOLICITED),
            msn,
            total,
            local_err,
            read_got: 0,
        });
        self.kick(ctx, &mut g);
        Ok(())
    }

    fn post_ud(
        &self,
        ctx: &CtxShared,
        wr: &SendWr<'_>,
        signaled: bool,
        inline: Option<([u8; MAX_INLINE], usize)>,
    ) -> Result<()> {
        let (dest, imm) = datagram_send(wr, "UD")?;
        let view = ctx.mrs.view();
        let (total, status) = match inline {
            Some((_, n)) => (n as u64, WcStatus::Success),
            None => match view.check_local(self.pd, wr.sg_list, false) {
                Ok(t) => (t, WcStatus::Success),
                Err(s) => (0, s),
            },
        };
        let status = if status == WcStatus::Success && total > UD_MTU {
            WcStatus::LocLenErr
        } else {
            status
        };
        if status == WcStatus::Success {
            let dropped = lock(&ctx.fault).drop_now();
            let delay = lock(&ctx.fault).cfg.ud_delay;
            if let (false, Some(conn)) = (dropped, ctx.conn_to(&dest.ah.dgid())) {
                let h = Hdr {
                    kind: Kind::Ud as u8,
                    flags: F_FIRST
                        | F_LAST
                        | if imm.is_some() { F_IMM } else { 0 }
                        | if wr.send_flags.contains(SendFlags::SOLICITED) {
                            F_SOLICITED
                        } else {
                            0
                        },
                    dst_qpn: dest.remote_qpn,
                    src_qpn: self.qpn,
                    imm: imm.unwrap_or(0),
                    total,
                    value: u64::from(dest.remote_qkey),
                    ..Hdr::default()
                }
                .emit();
                let inline = inline.as_ref().map(|(b, len)| &b[..*len]);
                let frame = Frame::new(&h, inline, wr.sg_list, 0, total);
                // SAFETY: the scatter-gather list lies in registered memory checked under
                // the view held here. A datagram may be lost: the result does not matter.
                unsafe { frame.send(ctx, conn, delay) };
            }
        }
        drop(view);
        if signaled || status != WcStatus::Success {
            let mut wc = WorkCompletion::new(wr.wr_id, status, WcOpcode::Send, self.qpn);
            wc.byte_len = total as u32;
            self.send_cq.push(wc, false);
        }
        Ok(())
    }

    fn complete_head(&self, g: &mut QpInner, status: WcStatus) {
        let Some(s) = g.sq.pop_front() else { return };
        g.sent = g.sent.saturating_sub(1);
        g.rnr_left = g.rnr_retry;
        g.head_since = Instant::now();
        if s.signaled || status != WcStatus::Success {
            let mut wc = WorkCompletion::new(s.wr_id, status, s.op.wc_opcode(), self.qpn);
            wc.byte_len = s.total as u32;
            self.send_cq.push(wc, false);
        }
    }

    /// Moves to the error state: flushes both queues, reports `event` if any.
    fn enter_error(&self, ctx: &CtxShared, g: &mut QpInner, event: Option<EventType>) {
        if g.state == QpState::Err {
            return;
        }
        g.state = QpState::Err;
        g.resend_at = None;
        g.sent = 0;
        g.inbound = None;
        while let Some(s) = g.sq.pop_front() {
            let wc = WorkCompletion::new(s.wr_id, WcStatus::WrFlushErr, s.op.wc_opcode(), self.qpn);
            self.send_cq.push(wc, false);
        }
        while let Some(s) = g.srd.pop_front() {
            let wc = WorkCompletion::new(s.wr_id, WcStatus::WrFlushErr, WcOpcode::Send, self.qpn);
            self.send_cq.push(wc, false);
        }
        while let Some(r) = g.rq.pop_front() {
            let wc = WorkCompletion::new(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn);
            self.recv_cq.push(wc, false);
        }
        if let Some(e) = event {
            ctx.async_ev.push(AsyncEvent {
                event_type: e,
                element: EventElement::Qp(self.qpn),
            });
        }
        if self.srq.is_some() {
            ctx.async_ev.push(AsyncEvent {
                event_type: EventType::QpLastWqeReached,
                element: EventElement::Qp(self.qpn),
            });
        }
    }

    fn take_recv(&self, g: &mut QpInner) -> Option<RecvSlot> {
        match &self.srq {
            Some(s) => lock(&s.q).pop_front(),
            None => g.rq.pop_front(),
        }
    }
}
