//! The endpoint's [`DataPath`]: kit's dispatch checks and shapes each of the forty data
//! calls into one request value (`SendRequest`, `PostedRecv`, `RmaRequest`,
//! `AtomicRequest`) and hands it here; tx and rx take it from there.
//!
//! Invariants: the endpoint's own state — enabled, connected, room in the transmit
//! queue — is checked under its lock by the `*_common` functions, so
//! [`DataPath::active`] always answers (the enabled check is made there, with the
//! other checks, in the order the tests of today expect). An RMA message names up to
//! `proto::RMA_IOV_LIMIT` remote buffers ([`DataPath::RMA_IOV_LIMIT`]).
//!
//! Nothing here panics.

use super::*;

/// The data calls (`endpoint_data_ops!`): kit checks and shapes each call into one
/// request; the endpoint's state (enabled, connected, room in the transmit queue) is
/// checked under its lock by the `*_common` functions.
impl DataPath for Endpoint {
    const NAME: &'static str = NAME;
    const RMA_IOV_LIMIT: usize = proto::RMA_IOV_LIMIT;
    /// Kit's default set, `FI_FENCE` ([`fence_ready`](DataPath::fence_ready)) and
    /// `FI_COMMIT_COMPLETE` (as delivery complete).
    const OP_FLAGS: OpFlags = ofi_kit::opflags::PROVIDER_DEFAULT
        .union(OpFlags::FENCE)
        .union(OpFlags::COMMIT_COMPLETE);
    type Active = Endpoint;

    /// A fenced operation starts only when nothing earlier is queued or waiting for
    /// its answer (an acknowledgement, read data or atomic result).
    fn fence_ready(&self, _act: &Endpoint) -> Result<()> {
        let state = lock(&self.inner.state);
        if !state.tx.is_empty() || !state.pending.is_empty() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(())
    }

    fn active(&self) -> Result<&Endpoint> {
        Ok(self)
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.flags.tx()
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.flags.rx()
    }

    fn recv_src(&self, _src: u64) -> u64 {
        ofi_kit::tagmatch::ANY_SRC
    }

    fn inject_size(&self) -> usize {
        self.inner.inject_size
    }

    #[inline]
    fn submit_send(&self, _act: &Endpoint, req: SendRequest) -> Result<()> {
        self.inner.send_common(&req)
    }

    #[inline]
    fn submit_recv(&self, _act: &Endpoint, recv: PostedRecv<IoList>) -> Result<()> {
        self.inner.recv_common(recv)
    }

    #[inline]
    fn submit_rma(&self, _act: &Endpoint, req: RmaRequest<'_>) -> Result<()> {
        self.inner.rma_common(&req)
    }

    #[inline]
    fn submit_atomic(&self, _act: &Endpoint, req: AtomicRequest<'_>) -> Result<()> {
        // SAFETY: kit built `req` from a data call whose C contract keeps the iocs
        // valid as `atomic_common` requires.
        unsafe { self.inner.atomic_common(&req) }
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        self.inner.atomic_valid(dt, op, kind)
    }
}
