//! Queue pairs and shared receive queues.

use std::sync::Arc;

use ofi_core::{Errno, Error, Result};

use crate::cq::{CompletionQueue, CqInner};
use crate::device::{mixed, CtxInner};
use crate::pd::{AhInner, PdInner, ProtectionDomain};
use crate::soft::cq::lock;
use crate::soft::qp::{SoftQp, SoftQpInit, SoftSrq, MAX_INLINE, MAX_SGE};
use crate::sys::objects::{QpCreate, SysAh, SysQp, SysSrq};
use crate::verbs::{QpAttr, QpAttrMask, QpCap, QpState, QpType, RecvWr, SendWr};

/// Creation attributes of a queue pair (`struct ibv_qp_init_attr`).
pub struct QpInitAttr<'a> {
    /// RC or UD.
    pub qp_type: QpType,
    /// Where send completions go.
    pub send_cq: &'a CompletionQueue,
    /// Where receive completions go.
    pub recv_cq: &'a CompletionQueue,
    /// Take receives from this shared queue instead of an own receive queue.
    pub srq: Option<&'a SharedReceiveQueue>,
    /// Queue capacities.
    pub cap: QpCap,
    /// Every send completes visibly, whatever its `SIGNALED` flag.
    pub sq_sig_all: bool,
}

/// Creation attributes of a shared receive queue.
#[derive(Clone, Copy, Debug)]
pub struct SrqInitAttr {
    /// Most outstanding receives.
    pub max_wr: u32,
    /// Most scatter/gather elements per receive.
    pub max_sge: u32,
}

/// A queue pair (`struct ibv_qp`); destroyed on drop (no completions for what was posted).
pub struct QueuePair {
    pd: ProtectionDomain,
    inner: QpInner,
}

enum QpInner {
    Soft(Arc<SoftQp>),
    Sys(Arc<SysQp>),
}

/// The rdma-core address handle of a datagram send (none for other sends); an error
/// for a handle of the software device.
fn sys_ah<'a>(wr: &SendWr<'a>) -> Result<Option<&'a SysAh>> {
    match wr.ud.map(|d| &d.ah.inner) {
        None => Ok(None),
        Some(AhInner::Sys(ah)) => Ok(Some(&**ah)),
        Some(AhInner::Soft(_)) => Err(mixed()),
    }
}

impl QueuePair {
    /// The rdma-core queue pair behind this one (`None` on the software device).
    pub(crate) fn sys(&self) -> Option<&Arc<SysQp>> {
        match &self.inner {
            QpInner::Sys(q) => Some(q),
            QpInner::Soft(_) => None,
        }
    }

    pub(crate) fn create(pd: &ProtectionDomain, a: &QpInitAttr<'_>) -> Result<QueuePair> {
        if a.qp_type == QpType::Uc {
            return Err(Error::new(
                Errno::EOPNOTSUPP,
                "UC queue pairs are not offered",
            ));
        }
        let c = a.cap;
        if a.srq.is_none() && c.max_recv_wr == 0 {
            return Err(Error::new(
                Errno::EINVAL,
                "no receive queue and no shared receive queue",
            ));
        }
        let inner = match (&pd.inner, &pd.ctx.inner) {
            (PdInner::Soft(id), CtxInner::Soft(o)) => {
                let max_wr = pd.ctx.query_device()?.max_qp_wr;
                if c.max_send_wr == 0 || c.max_send_wr > max_wr || c.max_recv_wr > max_wr {
                    return Err(Error::new(Errno::EINVAL, "bad queue depth"));
                }
                if c.max_send_sge as usize > MAX_SGE
                    || c.max_recv_sge as usize > MAX_SGE
                    || c.max_inline_data as usize > MAX_INLINE
                {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "capacity over the device's limits",
                    ));
                }
                let srq = match a.srq.map(|s| &s.inner) {
                    None => None,
                    Some(SrqInner::Soft(s)) if s.pd == *id => Some(s.clone()),
                    Some(SrqInner::Soft(_)) => {
                        return Err(Error::new(
                            Errno::EINVAL,
                            "shared receive queue of another protection domain",
                        ))
                    }
                    Some(SrqInner::Sys(_)) => return Err(mixed()),
                };
                let (CqInner::Soft { cq: scq, .. }, CqInner::Soft { cq: rcq, .. }) =
                    (&a.send_cq.inner, &a.recv_cq.inner)
                else {
                    return Err(mixed());
                };
                let shared = &o.shared;
                let qpn = shared
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    & 0x00ff_ffff;
                let qp = Arc::new(SoftQp::new(
                    qpn,
                    *id,
                    SoftQpInit {
                        qp_type: a.qp_type,
                        cap: c,
                        sq_sig_all: a.sq_sig_all,
                        send_cq: scq.clone(),
                        recv_cq: rcq.clone(),
                        srq,
                    },
                ));
                lock(&shared.tables).qps.insert(qpn, qp.clone());
                QpInner::Soft(qp)
            }
            (PdInner::Sys(p), _) => {
                let (CqInner::Sys(scq), CqInner::Sys(rcq)) = (&a.send_cq.inner, &a.recv_cq.inner)
                else {
                    return Err(mixed());
                };
                let srq = match a.srq.map(|s| &s.inner) {
                    None => None,
                    Some(SrqInner::Sys(s)) => Some(s),
                    Some(SrqInner::Soft(_)) => return Err(mixed()),
                };
                let create = QpCreate {
                    qp_type: a.qp_type,
                    send_cq: scq,
                    recv_cq: rcq,
                    srq,
                    cap: c,
                    sq_sig_all: a.sq_sig_all,
                };
                // SRD is EFA's own queue pair type: libefa creates it.
                QpInner::Sys(if a.qp_type == QpType::Srd {
                    crate::sys::objects::create_srd_qp(p, &create)?
                } else {
                    crate::sys::objects::create_qp(p, &create)?
                })
            }
            _ => return Err(mixed()),
        };
        Ok(QueuePair {
            pd: pd.clone(),
            inner,
        })
    }

    /// The queue pair number.
    pub fn qp_num(&self) -> u32 {
        match &self.inner {
            QpInner::Soft(q) => q.qpn,
            QpInner::Sys(q) => q.qp_num(),
        }
    }

    /// RC or UD.
    pub fn qp_type(&self) -> QpType {
        match &self.inner {
            QpInner::Soft(q) => q.qp_type,
            QpInner::Sys(q) => q.qp_type,
        }
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        match &self.inner {
            QpInner::Soft(q) => q.state(),
            QpInner::Sys(q) => q.state(),
        }
    }

    /// The capacities (as granted by the device).
    pub fn cap(&self) -> QpCap {
        match &self.inner {
            QpInner::Soft(q) => q.cap,
            QpInner::Sys(q) => q.cap,
        }
    }

    /// Modifies attributes and state (`ibv_modify_qp`). Transitions and the attributes
    /// each needs: RESET→INIT `STATE|PKEY_INDEX|PORT|ACCESS_FLAGS` (RC) or `…|QKEY`
    /// (UD); INIT→RTR (RC) [`QpAttrMask::RC_TO_RTR`]; RTR→RTS `SQ_PSN`, for RC
    /// [`QpAttrMask::RC_TO_RTS`]; any state →RESET or →ERR. Anything else is `EINVAL`.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        match &self.inner {
            QpInner::Soft(q) => {
                let o = self.pd.ctx.soft().ok_or_else(mixed)?;
                if mask.contains(QpAttrMask::STATE) && attr.qp_state == QpState::Err {
                    // Acknowledgements that already arrived complete their requests
                    // before the flush (hardware processes what reached it).
                    o.shared.settle();
                }
                q.modify(&o.shared, attr, mask)
            }
            QpInner::Sys(q) => q.modify(attr, mask),
        }
    }

    /// INIT → RTR → RTS of a datagram (UD or SRD) queue pair: no path to set, send PSN 0,
    /// and for SRD the `rnr_retry` count (`None`: the default).
    ///
    /// # Errors
    /// As [`modify`](Self::modify): `EINVAL` unless the queue pair is in INIT.
    pub fn datagram_ready(&self, rnr_retry: Option<u8>) -> Result<()> {
        self.modify(
            &QpAttr {
                qp_state: QpState::Rtr,
                ..QpAttr::default()
            },
            QpAttrMask::STATE,
        )?;
        let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
        if rnr_retry.is_some() {
            mask |= QpAttrMask::RNR_RETRY;
        }
        self.modify(
            &QpAttr {
                qp_state: QpState::Rts,
                rnr_retry: rnr_retry.unwrap_or(0),
                ..QpAttr::default()
            },
            mask,
        )
    }

    /// Posts a send work request (`ibv_post_send`). Does not allocate. In ERROR the
    /// request completes at once with `WR_FLUSH_ERR`; before RTS it is refused.
    /// Problems found with the buffers or the remote side come as error completions.
    ///
    /// # Safety
    /// With `INLINE`, every element's range must be readable now (keys are ignored).
    /// Without it, ranges are checked against the registered regions.
    pub unsafe fn post_send(&self, wr: &SendWr<'_>) -> Result<()> {
        match &self.inner {
            QpInner::Soft(q) => {
                let o = self.pd.ctx.soft().ok_or_else(mixed)?;
                // SAFETY: caller's contract.
                unsafe { q.post_send(&o.shared, wr) }
            }
            QpInner::Sys(q) => {
                let ah = sys_ah(wr)?;
                // SAFETY: caller's contract.
                unsafe { q.post_send(wr, ah) }
            }
        }
    }

    /// Posts `wrs` in order as one batch (`ibv_post_send` of a list: one doorbell). On
    /// the software device the SRD datagrams of a batch bound for one context travel in
    /// one packet. Ok when every one was posted; else the index of the first refused
    /// and why (the ones before it were posted, the ones after it not).
    ///
    /// # Safety
    /// As [`QueuePair::post_send`], for each.
    pub unsafe fn post_send_batch(
        &self,
        wrs: &[SendWr<'_>],
    ) -> std::result::Result<(), (usize, Error)> {
        match &self.inner {
            QpInner::Soft(q) => {
                let o = self.pd.ctx.soft().ok_or_else(|| (0, mixed()))?;
                // SAFETY: caller's contract.
                unsafe { q.post_send_batch(&o.shared, wrs) }
            }
            QpInner::Sys(q) => {
                let mut ahs = Vec::with_capacity(wrs.len());
                for (i, wr) in wrs.iter().enumerate() {
                    ahs.push(sys_ah(wr).map_err(|e| (i, e))?);
                }
                // SAFETY: caller's contract.
                unsafe { q.post_send_list(wrs, &ahs) }
            }
        }
    }

    /// Posts a receive (`ibv_post_recv`). The buffers are checked against the registered
    /// regions when a message lands (`LOC_PROT_ERR` then).
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        match &self.inner {
            QpInner::Soft(q) => q.post_recv(wr),
            QpInner::Sys(q) => q.post_recv(wr),
        }
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        if let (QpInner::Soft(q), Some(o)) = (&self.inner, self.pd.ctx.soft()) {
            lock(&o.shared.tables).qps.remove(&q.qpn);
        }
    }
}

/// A shared receive queue (`struct ibv_srq`).
pub struct SharedReceiveQueue {
    pd: ProtectionDomain,
    pub(crate) inner: SrqInner,
}

/// The backend of a shared receive queue.
pub(crate) enum SrqInner {
    Soft(Arc<SoftSrq>),
    Sys(Arc<SysSrq>),
}

impl SharedReceiveQueue {
    pub(crate) fn create(pd: &ProtectionDomain, a: &SrqInitAttr) -> Result<SharedReceiveQueue> {
        let inner = match (&pd.inner, &pd.ctx.inner) {
            (PdInner::Soft(id), CtxInner::Soft(o)) => {
                if a.max_wr == 0
                    || a.max_wr > pd.ctx.query_device()?.max_srq_wr
                    || a.max_sge as usize > MAX_SGE
                {
                    return Err(Error::new(Errno::EINVAL, "bad shared receive queue size"));
                }
                let n = o
                    .shared
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let srq = Arc::new(SoftSrq::new(n, *id, a.max_wr, a.max_sge));
                lock(&o.shared.tables).srqs.insert(n, srq.clone());
                SrqInner::Soft(srq)
            }
            (PdInner::Sys(p), _) => {
                SrqInner::Sys(crate::sys::objects::create_srq(p, a.max_wr, a.max_sge)?)
            }
            _ => return Err(mixed()),
        };
        Ok(SharedReceiveQueue {
            pd: pd.clone(),
            inner,
        })
    }

    /// The shared receive queue number.
    pub fn srq_num(&self) -> u32 {
        match &self.inner {
            SrqInner::Soft(s) => s.srqn,
            SrqInner::Sys(s) => s.handle(),
        }
    }

    /// Posts a receive (`ibv_post_srq_recv`).
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        match &self.inner {
            SrqInner::Soft(s) => s.post_recv(wr),
            SrqInner::Sys(s) => s.post_recv(wr),
        }
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        if let (SrqInner::Soft(s), Some(o)) = (&self.inner, self.pd.ctx.soft()) {
            lock(&o.shared.tables).srqs.remove(&s.srqn);
        }
    }
}
