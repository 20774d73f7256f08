//! Domains (`fi_domain`): the public [`Domain`], which opens endpoints, completion
//! queues, counters, address vectors and memory registrations.
//!
//! A domain keeps its fabric alive; [`Domain::close`] is `FI_EBUSY` while any object it
//! opened is still open. Nothing here panics.

use crate::abi::object::{close_of, open_signalling, AsFid, Node};
use crate::abi::raw::RawInfoBox;
use crate::abi::raw::{rx_to_raw, tx_to_raw, ErrBuf, FidClass, RawMr, RawObj};
use crate::abi::tables::{call_slot, CntrTable, DomainTable, MrTable};
use crate::attr::{Info, RxAttr, TxAttr};
use crate::cntr::{CntrAttr, Counter};
use crate::cq::{CompletionQueue, CqAttr};
use crate::ep::Endpoint;
use crate::eq::EventQueue;
use crate::error::Result;
use crate::flags::OpFlags;
use crate::mr::MemoryRegion;
use crate::wait::WaitSet;

crate::abi::ctl_ops::host_object! {
    /// An open domain.
    Domain(DomainTable, "a domain");
}

impl Domain {
    // ---- one method per `op` and `close` entry of the list (`for_each_domain_op!`) ----
    crate::for_each_domain_op!(crate::abi::ctl_ops::ctl_wrappers);

    /// The provider's name.
    pub fn provider(&self) -> &str {
        self.node.prov()
    }

    /// `fi_endpoint2` with a context (reported in its events) and flags.
    pub fn endpoint_with(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        let ib = RawInfoBox::new(info);
        // SAFETY: our own object; `ib` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::Ep, |out, e| unsafe {
            call_slot!(
                self.t(),
                DomainTable.endpoint(self.obj, ib.as_ptr(), context, flags, out, e)
            )
        })
    }

    /// `fi_stx_context`: a shared transmit context.
    pub fn stx_context(&self, attr: &TxAttr) -> Result<Endpoint> {
        let raw = tx_to_raw(attr);
        // SAFETY: our own object; `raw` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::StxCtx, |out, e| unsafe {
            call_slot!(self.t(), DomainTable.stx_ctx(self.obj, &raw, 0, out, e))
        })
    }

    /// `fi_srx_context`: a shared receive context.
    pub fn srx_context(&self, attr: &RxAttr) -> Result<Endpoint> {
        let raw = rx_to_raw(attr);
        // SAFETY: our own object; `raw` and `out` live across the call.
        Endpoint::open_child(&self.node, FidClass::SrxCtx, |out, e| unsafe {
            call_slot!(self.t(), DomainTable.srx_ctx(self.obj, &raw, 0, out, e))
        })
    }

    /// `fi_cq_open` with a context.
    pub fn cq_open_with(&self, attr: &CqAttr, context: usize) -> Result<CompletionQueue> {
        self.cq_open_common(attr, None, context)
    }

    /// `fi_cq_open` with `wait_obj` `FI_WAIT_SET`: the CQ signals `set` (opened with
    /// [`Fabric::wait_open`](crate::fabric::Fabric::wait_open) on this domain's fabric),
    /// so [`WaitSet::wait`] returns when it has completions. `attr.wait_obj` is
    /// ignored (the CQ's is `FI_WAIT_SET`). The set cannot be closed before the CQ
    /// (`FI_EBUSY`). `FI_EINVAL` for a set of another provider; `FI_ENOSYS` from a
    /// provider (or a plugin built before this call existed) without wait sets.
    pub fn cq_open_in(
        &self,
        attr: &CqAttr,
        set: &WaitSet,
        context: usize,
    ) -> Result<CompletionQueue> {
        self.cq_open_common(attr, Some(set), context)
    }

    fn cq_open_common(
        &self,
        attr: &CqAttr,
        set: Option<&WaitSet>,
        context: usize,
    ) -> Result<CompletionQueue> {
        // SAFETY: our own object; the pointers `open` passes live across the call.
        crate::cq::open(
            &self.node,
            attr,
            set,
            |a, o: *mut RawObj, e: *mut ErrBuf| unsafe {
                call_slot!(self.t(), DomainTable.cq_open(self.obj, a, context, o, e))
            },
        )
    }

    /// `fi_cntr_open` with a context.
    pub fn cntr_open_with(&self, attr: &CntrAttr, context: usize) -> Result<Counter> {
        self.cntr_open_common(attr, None, context)
    }

    /// `fi_cntr_open` with `wait_obj` `FI_WAIT_SET`: the counter signals `set` (as
    /// [`Domain::cq_open_in`]).
    pub fn cntr_open_in(&self, attr: &CntrAttr, set: &WaitSet, context: usize) -> Result<Counter> {
        self.cntr_open_common(attr, Some(set), context)
    }

    pub(crate) fn cntr_open_common(
        &self,
        attr: &CntrAttr,
        set: Option<&WaitSet>,
        context: usize,
    ) -> Result<Counter> {
        let (obj, ops, node) = open_signalling::<CntrTable, _>(
            &self.node,
            attr.to_raw(),
            set,
            FidClass::Cntr,
            "cntr_open",
            // SAFETY: our own object; the pointers `open_signalling` passes live
            // across the call.
            |raw, out, e| unsafe {
                call_slot!(
                    self.t(),
                    DomainTable.cntr_open(self.obj, raw, context, out, e)
                )
            },
        )?;
        // SAFETY: the provider returned a counter and its table.
        Ok(unsafe { Counter::from_raw(obj, ops, node) })
    }

    pub(crate) fn mr_from(&self, out: &RawMr) -> Result<MemoryRegion> {
        let ops = out.ops;
        let node = Node::child(
            &self.node,
            FidClass::Mr,
            close_of::<MrTable>(out.obj, ops, "memory region")?,
        );
        // SAFETY: the provider returned an MR and its table.
        Ok(unsafe { MemoryRegion::from_raw(out.obj, ops, None, node) })
    }

    /// Register a buffer the region takes ownership of (safe: the buffer lives until
    /// the registration is gone). Read it back with [`MemoryRegion::owned_to_vec`] or
    /// [`MemoryRegion::read_owned`].
    pub fn mr_reg_owned(
        &self,
        buf: Vec<u8>,
        access: OpFlags,
        requested_key: u64,
    ) -> Result<MemoryRegion> {
        let mem = crate::mr::OwnedMem::new(buf);
        let (ptr, len) = mem.raw();
        // SAFETY: the block does not move and is kept by the region (and, after the
        // region handle is dropped, by its node) until deregistration; it is only ever
        // accessed through raw pointers, so the provider's writes alias no reference.
        let mut mr = unsafe { self.mr_reg(ptr, len, access, 0, requested_key, 0) }?;
        mr.set_owned(mem);
        Ok(mr)
    }

    /// `fi_domain_bind` an event queue.
    pub fn bind_eq(&self, eq: &EventQueue, flags: u64) -> Result<()> {
        // SAFETY: our own object; `raw` names an open EQ of our family.
        self.node.bind(eq.as_fid(), "domain bind", |raw, e| unsafe {
            call_slot!(self.t(), DomainTable.bind(self.obj, raw, flags, e))
        })
    }
}
