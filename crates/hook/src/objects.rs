//! The other hooked classes: event queues, counters, address vectors, memory regions
//! and wait sets. Each forwards every call to the object beneath through
//! [`Hook::around`], as a control call (counter reads as reads, [`CallKind::Read`](crate::CallKind::Read)).
//!
//! Limits: a counter read or wait error is reported as the C API allows for a `u64`
//! read (0). Nothing here panics.

use std::sync::Arc;

use ofi_core::av::AddressVector;
use ofi_core::cntr::Counter;
use ofi_core::eq::EventQueue;
use ofi_core::mr::MemoryRegion;
use ofi_core::provider::{AvOps, CntrOps, EqOps, MrOps, WaitOps};
use ofi_core::wait::WaitSet;

use crate::fabric::HookFamily;
use crate::{Beneath, Hook, HookCalls, ObjName, Op};

crate::hooked_objects! {
    /// An EQ wrapped by hook `H`.
    HookEq(EventQueue, "eq");
}

impl<H: Hook> EqOps for HookEq<H> {
    // One forwarder per `op` entry of the list (`for_each_eq_op!`).
    ofi_core::for_each_eq_op!(ofi_core::ctl_forwarders);
}

/// The state of a hooked counter that hooks see.
pub struct CntrCore {
    /// The counter beneath.
    pub inner: Counter,
    /// Its name in hook messages.
    pub name: ObjName,
}

/// A counter wrapped by hook `H`.
pub struct HookCntr<H: Hook> {
    core: Arc<CntrCore>,
    h: Arc<H>,
}

impl<H: Hook> HookCntr<H> {
    pub(crate) fn new(inner: Counter, h: Arc<H>) -> HookCntr<H> {
        HookCntr {
            core: Arc::new(CntrCore {
                inner,
                name: ObjName::new("counter"),
            }),
            h,
        }
    }

    /// The counter's core.
    pub fn core(&self) -> &Arc<CntrCore> {
        &self.core
    }
}

impl<H: Hook> HookCntr<H> {
    /// What the generated forwarders use: the hook, the name and the counter beneath.
    fn forward(&self) -> (&Arc<H>, &ObjName, &Counter) {
        (&self.h, &self.core.name, &self.core.inner)
    }
}

impl<H: Hook> CntrOps for HookCntr<H> {
    // One forwarder per operation of the list (`for_each_cntr_op!`); reads through
    // `Hook::around` as reads, the rest as control calls.
    ofi_core::for_each_cntr_op!(ofi_core::ctl_forwarders);

    /// Registered for triggered calls (the crate's `trigger` module).
    fn published(&self) {
        crate::trigger::publish(self as *const Self as usize, &self.core);
    }
}

crate::hooked_objects! {
    /// An AV wrapped by hook `H`.
    HookAv(AddressVector, "av");
}

impl<H: Hook, F: HookFamily<H>> AvOps<F> for HookAv<H> {
    // One forwarder per `op` entry of the list (`for_each_av_op!`).
    ofi_core::for_each_av_op!(ofi_core::ctl_forwarders);

    crate::bind_eq_forwarder!("av_bind");
}

crate::hooked_objects! {
    /// An MR wrapped by hook `H`: its key and descriptor are the inner region's.
    HookMr(MemoryRegion, "mr");
}

impl<H: Hook, F: HookFamily<H>> MrOps<F> for HookMr<H> {
    // One forwarder per entry of the list (`for_each_mr_op!`).
    ofi_core::for_each_mr_op!(ofi_core::ctl_forwarders);
}

crate::hooked_objects! {
    /// A wait set wrapped by hook `H`.
    HookWait(WaitSet, "wait set");
}

impl<H: Hook> WaitOps for HookWait<H> {
    // One forwarder per operation of the list (`for_each_wait_op!`).
    ofi_core::for_each_wait_op!(ofi_core::ctl_forwarders);
}

crate::beneath_and_name! {
    HookEq |q| (q.inner, q.name);
    HookCntr |c| (c.core.inner, c.core.name);
    HookAv |av| (av.inner, av.name);
    HookWait |w| (w.inner, w.name);
}
