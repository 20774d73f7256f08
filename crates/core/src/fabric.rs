//! Fabrics (`fi_fabric`): the public [`Fabric`], root of every other object.
//!
//! A fabric is opened from a getinfo result: by the registry
//! (`crate::registry::open_fabric`), by a provider handle
//! ([`crate::provider::ProviderHandle::open_fabric`]) or, inside a provider that layers
//! on others, through [`crate::provider::Host::open_fabric`]. It keeps its provider (and
//! a plugin's library) loaded while it or anything opened from it lives.
//! [`Fabric::close`] is `FI_EBUSY` while domains, event queues, passive endpoints or
//! wait sets of it are open. Nothing here panics.

use std::sync::Arc;

use crate::abi::object::{open_child, open_signalling, ClassTable, Node};
use crate::abi::raw::{ErrBuf, FidClass, Obj, RawInfo, RawInfoBox, RawObj};
use crate::abi::tables::{call_slot, EqTable, FabricTable};
use crate::attr::Info;
use crate::domain::Domain;
use crate::ep::PassiveEndpoint;
use crate::eq::{EqAttr, EventQueue};
use crate::error::{Errno, Error, Result};
use crate::wait::WaitSet;

crate::abi::ctl_ops::host_object! {
    /// An open fabric.
    Fabric(FabricTable, "a fabric");
}

impl Fabric {
    /// Give up the handle without closing: the object, its table and the node that
    /// will close it (used to hand a fabric to a plugin through the host table).
    pub(crate) fn into_raw_parts(self) -> (Obj, *const FabricTable, Arc<Node>) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the Arc is moved out exactly once.
        let node = unsafe { std::ptr::read(&me.node) };
        (me.obj, me.ops, node)
    }

    // ---- one method per `op` and `close` entry of the list (`for_each_fabric_op!`) ----
    crate::for_each_fabric_op!(crate::abi::ctl_ops::ctl_wrappers);

    /// The provider's name.
    pub fn provider(&self) -> &str {
        self.node.prov()
    }

    /// `fi_domain` with a context.
    pub fn domain_with(&self, info: &Info, context: usize) -> Result<Domain> {
        // SAFETY: our own object; the slot opens a domain, which `from_raw` wraps.
        unsafe {
            self.open_from_info(info, FidClass::Domain, Domain::from_raw, |i, out, e| {
                call_slot!(self.t(), FabricTable.domain(self.obj, i, context, out, e))
            })
        }
    }

    /// `fi_passive_ep` with a context (reported as the `fid` of its events).
    pub fn passive_ep_with(&self, info: &Info, context: usize) -> Result<PassiveEndpoint> {
        // SAFETY: our own object; the slot opens a passive endpoint, which `from_raw`
        // wraps.
        unsafe {
            self.open_from_info(
                info,
                FidClass::Pep,
                PassiveEndpoint::from_raw,
                |i, out, e| {
                    call_slot!(
                        self.t(),
                        FabricTable.passive_ep(self.obj, i, context, out, e)
                    )
                },
            )
        }
    }

    /// Open a child of class `class` from `info`: `open(info, out, err)` calls the slot
    /// of this fabric's table that opens it (with the raw form of `info`, valid for the
    /// call), and `wrap` turns what it returns into the public type.
    ///
    /// # Safety
    /// `open` must call the slot that opens a `class` child, and `wrap` be the `from_raw`
    /// of that child's type.
    unsafe fn open_from_info<T: ClassTable, H>(
        &self,
        info: &Info,
        class: FidClass,
        wrap: unsafe fn(Obj, *const T, Arc<Node>) -> H,
        open: impl FnOnce(*const RawInfo, &mut RawObj, *mut ErrBuf) -> i32,
    ) -> Result<H> {
        let ib = RawInfoBox::new(info);
        let (obj, ops, node) = open_child(&self.node, class, |out, e| open(ib.as_ptr(), out, e))?;
        // SAFETY: the provider returned a `class` object and its table (contract).
        Ok(unsafe { wrap(obj, ops, node) })
    }

    /// `fi_eq_open` with a context.
    pub fn eq_open_with(&self, attr: &EqAttr, context: usize) -> Result<EventQueue> {
        self.eq_open_common(attr, None, context)
    }

    /// `fi_eq_open` with `wait_obj` `FI_WAIT_SET`: the EQ signals `set` (opened with
    /// [`Fabric::wait_open`]), so [`WaitSet::wait`] returns when it has events.
    /// `attr.wait_obj` is ignored. The set cannot be closed before the EQ
    /// (`FI_EBUSY`). `FI_ENOSYS` from a provider without wait sets.
    pub fn eq_open_in(&self, attr: &EqAttr, set: &WaitSet, context: usize) -> Result<EventQueue> {
        self.eq_open_common(attr, Some(set), context)
    }

    fn eq_open_common(
        &self,
        attr: &EqAttr,
        set: Option<&WaitSet>,
        context: usize,
    ) -> Result<EventQueue> {
        let (obj, ops, node) = open_signalling::<EqTable, _>(
            &self.node,
            attr.to_raw(),
            set,
            FidClass::Eq,
            "eq_open",
            // SAFETY: our own object; the pointers `open_signalling` passes live
            // across the call.
            |raw, out, e| unsafe {
                call_slot!(
                    self.t(),
                    FabricTable.eq_open(self.obj, raw, context, out, e)
                )
            },
        )?;
        // SAFETY: the provider returned an EQ and its table.
        Ok(unsafe { EventQueue::from_raw(obj, ops, node) })
    }

    /// `fi_poll_open`: a poll set for the CQs and counters of this fabric's domains
    /// (see [`crate::poll`]; the C call takes a domain, here any domain of the fabric
    /// may contribute members). The fabric cannot be closed while the set is open.
    pub fn poll_open(&self) -> Result<crate::poll::PollSet> {
        if self.node.is_closed() {
            return Err(Error::new(
                Errno::EBADF,
                "fi_poll_open: the fabric is closed",
            ));
        }
        Ok(crate::poll::PollSet::new(self.obj, self.ops, &self.node))
    }
}
