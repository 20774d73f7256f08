//! Queue pairs and shared receive queues.

use std::sync::Arc;

use ofi_core::{Errno, Error, Result};

use crate::cq::CompletionQueue;
use crate::pd::ProtectionDomain;
use crate::soft::cq::lock;
use crate::soft::qp::{SoftQp, SoftSrq, MAX_INLINE, MAX_SGE};
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
    qp: Arc<SoftQp>,
}

impl QueuePair {
    pub(crate) fn create(pd: &ProtectionDomain, a: &QpInitAttr<'_>) -> Result<QueuePair> {
        if a.qp_type == QpType::Uc {
            return Err(Error::new(
                Errno::EOPNOTSUPP,
                "UC queue pairs are not offered",
            ));
        }
        let c = a.cap;
        let max_wr = pd.ctx.query_device().max_qp_wr;
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
        if a.srq.is_none() && c.max_recv_wr == 0 {
            return Err(Error::new(
                Errno::EINVAL,
                "no receive queue and no shared receive queue",
            ));
        }
        if a.srq.is_some_and(|s| s.srq.pd != pd.id) {
            return Err(Error::new(
                Errno::EINVAL,
                "shared receive queue of another protection domain",
            ));
        }
        let shared = &pd.ctx.owner.shared;
        let qpn = shared
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            & 0x00ff_ffff;
        let qp = Arc::new(SoftQp::new(
            qpn,
            a.qp_type,
            pd.id,
            c,
            a.sq_sig_all,
            a.send_cq.cq.clone(),
            a.recv_cq.cq.clone(),
            a.srq.map(|s| s.srq.clone()),
        ));
        lock(&shared.tables).qps.insert(qpn, qp.clone());
        Ok(QueuePair { pd: pd.clone(), qp })
    }

    /// The queue pair number.
    pub fn qp_num(&self) -> u32 {
        self.qp.qpn
    }

    /// RC or UD.
    pub fn qp_type(&self) -> QpType {
        self.qp.qp_type
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.qp.state()
    }

    /// The capacities.
    pub fn cap(&self) -> QpCap {
        self.qp.cap
    }

    /// Modifies attributes and state (`ibv_modify_qp`). Transitions and the attributes
    /// each needs: RESET→INIT `STATE|PKEY_INDEX|PORT|ACCESS_FLAGS` (RC) or `…|QKEY`
    /// (UD); INIT→RTR (RC) `AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER`;
    /// RTR→RTS `SQ_PSN` and for RC `TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC`; any
    /// state →RESET or →ERR. Anything else is `EINVAL`.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.qp.modify(&self.pd.ctx.owner.shared, attr, mask)
    }

    /// Posts a send work request (`ibv_post_send`). Does not allocate. In ERROR the
    /// request completes at once with `WR_FLUSH_ERR`; before RTS it is refused.
    /// Problems found with the buffers or the remote side come as error completions.
    ///
    /// # Safety
    /// With `INLINE`, every element's range must be readable now (keys are ignored).
    /// Without it, ranges are checked against the registered regions.
    pub unsafe fn post_send(&self, wr: &SendWr<'_>) -> Result<()> {
        // SAFETY: caller's contract.
        unsafe { self.qp.post_send(&self.pd.ctx.owner.shared, wr) }
    }

    /// Posts a receive (`ibv_post_recv`). The buffers are checked against the registered
    /// regions when a message lands (`LOC_PROT_ERR` then).
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        self.qp.post_recv(&self.pd.ctx.owner.shared, wr)
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        lock(&self.pd.ctx.owner.shared.tables)
            .qps
            .remove(&self.qp.qpn);
    }
}

/// A shared receive queue (`struct ibv_srq`).
pub struct SharedReceiveQueue {
    pd: ProtectionDomain,
    pub(crate) srq: Arc<SoftSrq>,
}

impl SharedReceiveQueue {
    pub(crate) fn create(pd: &ProtectionDomain, a: &SrqInitAttr) -> Result<SharedReceiveQueue> {
        if a.max_wr == 0
            || a.max_wr > pd.ctx.query_device().max_srq_wr
            || a.max_sge as usize > MAX_SGE
        {
            return Err(Error::new(Errno::EINVAL, "bad shared receive queue size"));
        }
        let shared = &pd.ctx.owner.shared;
        let n = shared
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let srq = Arc::new(SoftSrq::new(n, pd.id, a.max_wr, a.max_sge));
        lock(&shared.tables).srqs.insert(n, srq.clone());
        Ok(SharedReceiveQueue {
            pd: pd.clone(),
            srq,
        })
    }

    /// The shared receive queue number.
    pub fn srq_num(&self) -> u32 {
        self.srq.srqn
    }

    /// Posts a receive (`ibv_post_srq_recv`).
    pub fn post_recv(&self, wr: &RecvWr<'_>) -> Result<()> {
        self.srq.post_recv(wr)
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        lock(&self.pd.ctx.owner.shared.tables)
            .srqs
            .remove(&self.srq.srqn);
    }
}
