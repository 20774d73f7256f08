//! The hooked fabric: wraps the fabric beneath and opens hooked domains, passive
//! endpoints, EQs and wait sets from it.
//!
//! Invariant: the inner fabric outlives every wrapper opened from it (each wrapper
//! holds the inner child, which keeps its parent alive). Nothing here panics.

use std::sync::Arc;

use ofi_core::abi::object::AsFid;
use ofi_core::eq::EqAttr;
use ofi_core::fabric::Fabric;
use ofi_core::provider::{FabricOps, Host, TryWaitRef};
use ofi_core::{Errno, Error, Info, Result};

use crate::domain::HookDomain;
use crate::ep::HookPep;
use crate::objects::{HookEq, HookWait};
use crate::{Beneath, Hook, HookCalls, Hooked, ObjName};

/// A fabric wrapped by hook `H`.
pub struct HookFabric<H: Hook> {
    inner: Fabric,
    h: Arc<H>,
    name: ObjName,
}

impl<H: Hook> HookFabric<H> {
    /// Wrap `inner` (the fabric beneath) for `info`.
    pub(crate) fn open(host: &Host, info: &Info, inner: Fabric) -> Result<HookFabric<H>> {
        let h = H::open(host, info, &inner)?;
        Ok(HookFabric {
            inner,
            h: Arc::new(h),
            name: ObjName::new("fabric"),
        })
    }

    /// The hook's state of this fabric.
    pub fn hook(&self) -> &Arc<H> {
        &self.h
    }
}

impl<H: Hook> HookFabric<H> {
    /// What the generated forwarders use: the hook, the name and the fabric beneath.
    fn forward(&self) -> (&Arc<H>, &ObjName, &Fabric) {
        (&self.h, &self.name, &self.inner)
    }
}

/// The hooks hear of the fabric's end (after all its objects) when its wrapper goes:
/// the adapter drops it right after a successful close.
impl<H: Hook> Drop for HookFabric<H> {
    fn drop(&mut self) {
        self.h.fabric_close(&self.name);
    }
}

impl<H: Hook> FabricOps for HookFabric<H> {
    // One forwarder per `op` and `close` entry of the list (`for_each_fabric_op!`).
    ofi_core::for_each_fabric_op!(ofi_core::ctl_forwarders);

    type Domain = HookDomain<H>;
    type PassiveEp = HookPep<H>;
    type Eq = HookEq<H>;
    type Wait = HookWait<H>;

    crate::open_in_set_forwarders! {
        fn eq_open_in_set(&EqAttr) -> HookEq<H> = eq_open_in, "eq_open", |q, _| q;
    }
}

/// The family of hook `H`'s objects, named by a type parameter: implemented by
/// [`HookFabric<H>`] alone.
///
/// The hook's domain, endpoints, AVs and MRs implement the provider traits for every
/// `F: HookFamily<H>` rather than for `HookFabric<H>` alone, so that the lists'
/// declarations, which spell the family as the traits' parameter `F`
/// (`BindTarget<'_, F>` of `ep.bind`), are the hook's signatures as they stand: their
/// forwarders are generated like the others. Inside those impls `CqOf<F>` and the
/// like are the hook's own types (`HookCq<H>`, …).
pub trait HookFamily<H: Hook>:
    FabricOps<Domain = HookDomain<H>, Eq = HookEq<H>, Wait = HookWait<H>>
{
}

impl<H: Hook> HookFamily<H> for HookFabric<H> {}

/// The objects beneath those of a `trywait` (the list's `trywait` entry).
pub(crate) trait BeneathIdle {
    /// The objects beneath, or `FI_EAGAIN` when the hook itself holds completions for
    /// one of the CQs, or work that will make some: the caller must read before it
    /// waits.
    fn beneath_idle(&self) -> Result<Vec<&dyn AsFid>>;
}

impl<H: Hook> BeneathIdle for [TryWaitRef<'_, HookFabric<H>>] {
    fn beneath_idle(&self) -> Result<Vec<&dyn AsFid>> {
        if self
            .iter()
            .any(|o| matches!(o, TryWaitRef::Cq(c) if c.hook_busy()))
        {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        Ok(self
            .iter()
            .map(|o| match o {
                TryWaitRef::Cq(c) => c.beneath(),
                TryWaitRef::Cntr(c) => c.beneath(),
                TryWaitRef::Eq(e) => e.beneath(),
                TryWaitRef::Wait(w) => w.beneath(),
            })
            .collect())
    }
}
