//! The endpoint's operations as the core calls them: kit's layered glue (binding,
//! enabling, cancel, options, name, queue room) and kit's data path (sends and receives
//! handed to the engine, RMA in `rma`, atomics in `atomic`).
//!
//! Nothing here panics on application input: bad arguments return `FI_EINVAL` or
//! `FI_EMSGSIZE`; a full queue `FI_EAGAIN`.

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::EndpointOps;
use ofi_kit::layered::{LayeredEndpoint, RecvQueue};
use ofi_kit::request::{AtomicRequest, RmaRequest, SendRequest};
use ofi_kit::tagmatch::{PostedRecv, ANY_SRC};

use super::*;
use crate::fabric::Fabric;
use crate::proto::{RecvReq, SendReq};
use ofi_kit::epglue::check_len;

/// The receive side as kit's glue sees it: the engine's matcher and the provider's
/// receives.
struct RecvSide<'a> {
    state: &'a mut EpState,
    rx_size: usize,
}

impl RecvQueue for RecvSide<'_> {
    fn cancel(&mut self, context: usize) -> Option<PostedRecv<IoList>> {
        if let Some(r) = Shared::dgram_cancel(self.state, context) {
            return Some(r);
        }
        let id = self
            .state
            .rx_ops
            .iter()
            .filter(|(_, o)| o.ctx == context)
            .map(|(&id, _)| id)
            .min()?;
        if !self.state.eng.cancel_recv(id) {
            return None;
        }
        Some(self.state.rx_ops.remove(&id)?.posted())
    }

    fn min_multi_recv(&self) -> usize {
        self.state.eng.min_multi_recv()
    }

    fn set_min_multi_recv(&mut self, min: usize) {
        self.state.eng.set_min_multi_recv(min);
    }

    fn room(&self) -> usize {
        self.rx_size
            .saturating_sub(self.state.rx_ops.len() + self.state.dgram_rx.len())
    }
}

impl ofi_kit::mr::MrEndpointTarget for Endpoint {
    fn mr_endpoint_id(&self) -> u64 {
        Arc::as_ptr(&self.sh) as usize as u64
    }
}

impl LayeredEndpoint for Endpoint {
    const NAME: &'static str = NAME;

    ofi_kit::layered_endpoint_state!(shared: sh, flags: flags, rules: BIND_RULES);

    fn with_matcher<R>(&self, f: impl FnOnce(&mut dyn RecvQueue) -> R) -> R {
        let mut state = lock(&self.sh.state);
        f(&mut RecvSide {
            state: &mut state,
            rx_size: self.sh.rx_size,
        })
    }

    /// `FI_RMA_EVENT`: counters of peers' RMA reads (`FI_REMOTE_READ`) and writes and
    /// atomics (`FI_REMOTE_WRITE`) on this endpoint's memory, counted as the engine
    /// reports each done.
    fn bind_remote_cntr(&self, cntr: &ofi_kit::cntr::KitCntr, flags: OpFlags) -> Result<()> {
        self.sh.no_dgram("remote-access counters")?;
        lock(&self.sh.state).remote_cntrs.bind(NAME, cntr, flags)
    }

    fn tx_room(&self) -> usize {
        self.sh
            .tx_size
            .saturating_sub(lock(&self.sh.state).tx_ops.len())
    }
}

impl EndpointOps<Fabric> for Endpoint {
    ofi_kit::layered_handle_ops!(Fabric, shared: sh, flags: flags, alias: true);
}

impl ofi_kit::dataops::DataPath for Endpoint {
    ofi_kit::layered_data_path!();

    /// Kit's default set and `FI_FENCE` (see `fence_ready`).
    const OP_FLAGS: OpFlags = ofi_kit::opflags::PROVIDER_DEFAULT.union(OpFlags::FENCE);

    /// `FI_FENCE`: the fenced operation waits (`FI_EAGAIN`) until every earlier
    /// transmit operation of the endpoint completed, injected ones included;
    /// `FI_EBADFLAGS` on an endpoint without the `FI_FENCE` capability (`FI_EP_DGRAM`,
    /// or an info that did not ask for it).
    fn fence_ready(&self, _act: &Bound) -> Result<()> {
        if !self.sh.fence {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("{NAME}: FI_FENCE without the FI_FENCE capability"),
            ));
        }
        if lock(&self.sh.state).tx_ops.is_empty() {
            Ok(())
        } else {
            Err(Error::code_only(Errno::EAGAIN))
        }
    }

    fn inject_size(&self) -> usize {
        self.sh.inject_max
    }

    fn submit_send(&self, active: &Bound, r: SendRequest) -> Result<()> {
        if self.sh.dgram {
            return self.sh.dgram_send(active, &r);
        }
        let len = r.iov.total();
        check_len(NAME, "message", len, "max_msg_size", MAX_MSG_SIZE)?;
        let mut data = vec![0u8; len];
        // SAFETY: `iov` is the application's message, readable for its length during
        // this submitting call (the C contract `SendRequest` carries).
        unsafe { r.iov.gather(0, data.as_mut_ptr(), len) };
        let want = active.tx_completion_wanted(r.inject, r.flags);
        let cq_flags = r.completion_flags().bits();
        let sh = &self.sh;
        let (mut state, peer, id) = sh.begin_tx(active, r.dest)?;
        let now = sh.now();
        state
            .eng
            .send(
                now,
                SendReq {
                    ctx: id,
                    peer,
                    data,
                    tag: r.tag,
                    cq_data: r.data,
                    delivery_complete: r.flags.contains(OpFlags::DELIVERY_COMPLETE),
                },
            )
            .map_err(|e| Error::new(e, format!("{NAME}: send refused")))?;
        state.tx_ops.insert(
            id,
            TxOp {
                ctx: r.context,
                peer,
                flags: cq_flags,
                want,
                read_into: None,
            },
        );
        sh.round(active, &mut state);
        Ok(())
    }

    fn submit_recv(&self, active: &Bound, recv: PostedRecv<IoList>) -> Result<()> {
        if self.sh.dgram {
            return self.sh.dgram_recv(recv);
        }
        let sh = &self.sh;
        let mut state = lock(&sh.state);
        if state.rx_ops.len() >= sh.rx_size {
            drop(state);
            sh.engine.kick();
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let src = if recv.src == ANY_SRC {
            None
        } else {
            Some(sh.peer_of_fi(active, &mut state, recv.src)?)
        };
        let id = if recv.flags.contains(OpFlags::CLAIM) {
            recv.ctx as u64
        } else {
            let id = RX_ID_BIT | state.next_rx;
            state.next_rx = state.next_rx.wrapping_add(1) & !RX_ID_BIT;
            id
        };
        state.rx_ops.insert(
            id,
            RxOp {
                ctx: recv.ctx,
                buf: recv.buf,
                tag: recv.tag,
                ignore: recv.ignore,
                tagged: recv.tagged,
                flags: recv.flags,
            },
        );
        let now = sh.now();
        let r = state.eng.post_recv(
            now,
            RecvReq {
                ctx: id,
                len: recv.buf.total(),
                tag: recv.tagged.then_some((recv.tag, recv.ignore)),
                src,
                flags: recv.flags,
            },
        );
        if let Err(e) = r {
            state.rx_ops.remove(&id);
            return Err(Error::new(e, format!("{NAME}: receive refused")));
        }
        sh.round(active, &mut state);
        Ok(())
    }

    fn submit_rma(&self, active: &Bound, req: RmaRequest<'_>) -> Result<()> {
        self.sh.no_dgram("RMA")?;
        self.sh.submit_rma(active, req)
    }

    fn submit_atomic(&self, active: &Bound, req: AtomicRequest<'_>) -> Result<()> {
        self.sh.no_dgram("atomics")?;
        self.sh.submit_atomic(active, req)
    }

    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        super::atomic_max_count(dt, op, kind)
    }
}
