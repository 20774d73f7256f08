//! The hooked domain: opens hooked endpoints, CQs, counters, AVs and MRs.
//!
//! Limits: the public API has no context argument for `cntr_open`, `av_open`,
//! `scalable_ep`, `stx_context` and `srx_context`, so those contexts are not passed to
//! the provider beneath (they are 0 there). Nothing here panics.

use std::sync::Arc;

use ofi_core::cntr::CntrAttr;
use ofi_core::cq::CqAttr;
use ofi_core::domain::Domain;
use ofi_core::provider::DomainOps;

use crate::cq::HookCq;
use crate::ep::HookEp;
use crate::fabric::HookFamily;
use crate::objects::{HookAv, HookCntr, HookMr};
use crate::{Hook, HookCalls, Hooked, ObjName};

crate::hooked_objects! {
    /// A domain wrapped by hook `H`.
    HookDomain(Domain, "domain");
}

impl<H: Hook, F: HookFamily<H>> DomainOps<F> for HookDomain<H> {
    // One forwarder per `op` and `close` entry of the list (`for_each_domain_op!`).
    ofi_core::for_each_domain_op!(ofi_core::ctl_forwarders);

    type Endpoint = HookEp<H>;
    type Cq = HookCq<H>;
    type Cntr = HookCntr<H>;
    type Av = HookAv<H>;
    type Mr = HookMr<H>;

    crate::open_in_set_forwarders! {
        fn cq_open_in_set(&CqAttr) -> HookCq<H> = cq_open_in, "cq_open",
            |cq, attr: &CqAttr| (cq, attr.size);
        fn cntr_open_in_set(&CntrAttr) -> HookCntr<H> = cntr_open_in, "cntr_open", |c, _| c;
    }

    crate::bind_eq_forwarder!("bind_eq");
}
