//! The endpoint's [`DataPath`]: kit's dispatch checks and shapes each message call
//! (`fi_send` to `fi_recvmsg`, written by `endpoint_data_ops!(msg)` in `ops`) into one
//! request value ([`SendRequest`], [`PostedRecv`]) and hands it here; `tx` and `rx`
//! take it from there.
//!
//! What kit checks first, in this order: enabled (`FI_EOPBADSTATE`), a `*msg` call's
//! flags against [`OP_FLAGS`] (`FI_EBADFLAGS`), its I/O vector (`FI_EINVAL`), `FI_INJECT`
//! against `inject_size` (`FI_EMSGSIZE`), and `FI_MULTI_RECV` with one buffer on
//! `fi_recvmsg`. Here: the buffers in kernel form ([`UserIov`]: a null buffer that is
//! not empty, or a total that overflows, is `FI_EINVAL`), then `send_common` or
//! `post_recv` (see the module docs of `ep`). The two submissions are inlined into
//! each data method kit writes (a single buffer's list then folds into one entry);
//! `send_common` and `post_recv` stay out of line. Nothing here panics.

use super::*;
use ofi_kit::dataops::DataPath;
use ofi_kit::iov::IoList;
use ofi_kit::request::SendRequest;
use ofi_kit::tagmatch::{PostedRecv, ANY_SRC};

use self::ops::OP_FLAGS;

impl DataPath for Endpoint {
    const NAME: &'static str = NAME;
    const OP_FLAGS: OpFlags = OP_FLAGS;
    /// `FI_MULTI_RECV` among the receive `op_flags` makes every `fi_recv` a
    /// multi-receive (`post_recv` checks it has one buffer).
    const RECV_OP_FLAGS: OpFlags = OpFlags::COMPLETION.union(OpFlags::MULTI_RECV);
    type Active = Active;

    fn active(&self) -> Result<&Active> {
        self.inner.active()
    }

    fn tx_op_flags(&self) -> OpFlags {
        self.op_flags.tx()
    }

    fn rx_op_flags(&self) -> OpFlags {
        self.op_flags.rx()
    }

    /// A datagram endpoint takes from any source (no `FI_DIRECTED_RECV`).
    fn recv_src(&self, _src: u64) -> u64 {
        ANY_SRC
    }

    /// Any message (`inject_size` = `max_msg_size`).
    fn inject_size(&self) -> usize {
        MAX_MSG_SIZE
    }

    #[inline(always)]
    fn submit_send(&self, active: &Active, req: SendRequest) -> Result<()> {
        let iov = UserIov::from_list(&req.iov)?;
        // SAFETY: kit built `req` from a send call, whose C contract keeps the buffers
        // readable during the call (until completion, and udp is done on return).
        unsafe { self.inner.send_common(active, &iov, &req) }
    }

    #[inline(always)]
    fn submit_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let iov = UserIov::from_list(&recv.buf)?;
        self.inner.post_recv(active, iov, recv.ctx, recv.flags)
    }
}
