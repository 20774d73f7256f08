//! The fabric, the domain, the address vector and memory regions.
//!
//! - [`Fabric`] opens the DGRAM core's fabric through the host (it finds the core's info
//!   again from the RDM info's provider stack, fabric name and address format); its EQs
//!   and wait sets are the kit's.
//! - [`Domain`] opens the core's domain (manual progress: rxd drives it) and owns the
//!   kit progress engine its CQs, counters and endpoints use (manual or auto, from the
//!   RDM info).
//! - The AV (`SharedAv`) is the kit's AV over the core's address format (`FI_SOCKADDR_IN` for udp):
//!   an rxd address is the core DGRAM endpoint's name.
//! - Memory regions are the kit's ([`KitMr`] in a per-domain [`MrTable`]): rxd carries
//!   out RMA and atomics at the target itself, checking each access against the table.
//!
//! Nothing here panics.

#![forbid(unsafe_code)]

use std::sync::Arc;

use ofi_core::abi::raw::AtomicAttr;
use ofi_core::attr::Info;
use ofi_core::enums::{AtomicOp, Datatype};
use ofi_core::mr::MrAttr;
use ofi_core::provider::DomainOps;
use ofi_core::Result;
use ofi_kit::layer::{LayeredFabric, UtilityDomainShared};
use ofi_kit::mr::{KitMr, MrConfig, MrTable};

use crate::ep::Endpoint;
use crate::Settings;

/// A fabric: the DGRAM core's fabric, opened through the host (the kit's
/// [`LayeredFabric`], whose domains are [`Domain`]s).
pub type Fabric = LayeredFabric<Domain>;

/// What a domain's endpoints share: the kit's part (settings, the core's info, domain
/// and fabric) and rxd's memory registrations.
pub type DomainShared = UtilityDomainShared<Settings, Registrations>;

/// rxd's own part of a domain: its registrations, the targets of RMA and atomics that
/// rxd carries out itself at the target, checked against the table.
#[derive(Debug)]
pub struct Registrations {
    /// The MR table.
    pub mr: Arc<MrTable>,
}

impl Registrations {
    /// A kit MR table in the mode `info` asks for.
    fn new(info: &Info) -> Result<Registrations> {
        let cfg = MrConfig::for_domain(info.domain_attr.mr_mode, crate::IOV_LIMIT);
        Ok(Registrations {
            mr: MrTable::new(cfg)?,
        })
    }
}

ofi_kit::layered_domain! {
    /// A domain (the kit's parts of a utility domain).
    pub struct Domain(Settings, Registrations) over crate::LAYERING, Registrations::new;
}

impl DomainOps<Fabric> for Domain {
    ofi_kit::layered_domain_ops!(crate::LAYERING, Endpoint);
    type Mr = KitMr;

    /// Registration in the domain's kit MR table: rxd carries out RMA and atomics
    /// itself at the target, checked against it.
    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.0.inner.mr.register(attr, flags)
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        ofi_kit::atomic::query_within(op, datatype, flags, crate::MAX_ATOMIC_BYTES)
    }
}
