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
use ofi_core::domain::Domain as CoreDomain;
use ofi_core::enums::{AtomicOp, Datatype};
use ofi_core::fabric::Fabric as CoreFabric;
use ofi_core::mr::MrAttr;
use ofi_core::provider::DomainOps;
use ofi_core::{AvType, Result};
use ofi_kit::layer::{LayeredFabric, Layering, UtilityDomain};
use ofi_kit::mr::{KitMr, MrConfig, MrTable};
use ofi_kit::progress::ProgressEngine;

use crate::ep::Endpoint;
use crate::Settings;

/// A fabric: the DGRAM core's fabric, opened through the host (the kit's
/// [`LayeredFabric`], whose domains are [`Domain`]s).
pub type Fabric = LayeredFabric<Domain>;

impl UtilityDomain for Domain {
    type Settings = Settings;
    const LAYERING: Layering = crate::LAYERING;

    fn open(
        settings: Settings,
        fabric: &ofi_kit::layer::CoreFabric,
        info: &Info,
    ) -> Result<Domain> {
        let (engine, core, core_info) = fabric.domain(info)?;
        let cfg = MrConfig::for_domain(info.domain_attr.mr_mode, crate::IOV_LIMIT);
        let inner = DomainShared {
            settings,
            core_info,
            core,
            fabric: fabric.fabric.clone(),
            mr: MrTable::new(cfg)?,
        };
        Ok(Domain {
            inner: Arc::new(inner),
            engine: Arc::new(engine),
            av_type: info.domain_attr.av_type,
        })
    }
}

/// What a domain's endpoints share: the core domain and fabric, and the key counter of
/// internal registrations.
#[derive(Debug)]
pub struct DomainShared {
    /// Parameters.
    pub settings: Settings,
    /// The core's info (manual progress).
    pub core_info: Info,
    /// The core's domain.
    pub core: CoreDomain,
    /// The core's fabric.
    pub fabric: Arc<CoreFabric>,
    /// Memory registrations (targets of RMA and atomics).
    pub mr: Arc<MrTable>,
}

/// A domain.
#[derive(Debug)]
pub struct Domain {
    inner: Arc<DomainShared>,
    engine: Arc<ProgressEngine>,
    av_type: AvType,
}

impl DomainOps<Fabric> for Domain {
    ofi_kit::layered_domain_ops!(crate::LAYERING, Endpoint);
    type Mr = KitMr;

    /// Registration in the domain's kit MR table: rxd carries out RMA and atomics
    /// itself at the target, checked against it.
    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.inner.mr.register(attr, flags)
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        ofi_kit::atomic::query_within(op, datatype, flags, crate::MAX_ATOMIC_BYTES)
    }
}
