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

use ofi_core::attr::Info;
use ofi_core::av::AvAttr;
use ofi_core::domain::Domain as CoreDomain;
use ofi_core::fabric::Fabric as CoreFabric;
use ofi_core::mr::MrAttr;
use ofi_core::provider::{DomainOps, FabricOps, Host, Unsupported};
use ofi_core::{AvType, Result};
use ofi_kit::av::{AvConfig, KitAv, SharedAv};
use ofi_kit::mr::{KitMr, MrConfig, MrTable};
use ofi_kit::progress::ProgressEngine;

use crate::ep::Endpoint;
use crate::{Settings, NAME};

fn check_ep_type(info: &Info) -> Result<()> {
    crate::LAYERING.check_ep_type(info)
}

/// A fabric: the DGRAM core's fabric, opened through the host.
#[derive(Debug)]
pub struct Fabric {
    settings: Settings,
    core: ofi_kit::layer::CoreFabric,
}

impl Fabric {
    /// Open the fabric for `info` (a getinfo result of this utility).
    ///
    /// # Errors
    /// `FI_EINVAL` for a non-RDM info; `FI_ENODATA` when the core is gone; the core's
    /// fabric-open errors.
    pub fn open(settings: Settings, host: Host, info: &Info) -> Result<Fabric> {
        let core = crate::LAYERING.open_core(&host, info, crate::core_hints(Some(info)))?;
        Ok(Fabric { settings, core })
    }

    /// The core's fabric.
    pub fn core(&self) -> &CoreFabric {
        &self.core.fabric
    }
}

impl FabricOps for Fabric {
    type Domain = Domain;
    type PassiveEp = Unsupported;
    ofi_kit::kit_fabric_ops!();

    fn domain(&self, info: &Info, _context: usize) -> Result<Domain> {
        check_ep_type(info)?;
        let (engine, core, ci) = self.core.domain(info)?;
        let cfg = MrConfig::for_domain(info.domain_attr.mr_mode, crate::IOV_LIMIT);
        Ok(Domain {
            inner: Arc::new(DomainShared {
                settings: self.settings,
                core_info: ci,
                core,
                fabric: self.core.fabric.clone(),
                mr: MrTable::new(cfg)?,
            }),
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
    type Endpoint = Endpoint;
    ofi_kit::kit_domain_cq_cntr_ops!(|d| d.engine.clone());
    type Av = SharedAv;
    type Mr = KitMr;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        check_ep_type(info)?;
        Endpoint::open(self.inner.clone(), info, context, self.engine.clone())
    }

    fn av_open(&self, attr: &AvAttr, context: usize) -> Result<Self::Av> {
        let cfg = AvConfig::new(self.inner.core_info.addr_format)
            .with_domain_type(self.av_type, AvType::Map);
        Ok(SharedAv::new(KitAv::open(attr, context, cfg)?))
    }

    /// Registration in the domain's kit MR table: rxd carries out RMA and atomics
    /// itself at the target, checked against it.
    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.inner.mr.register(attr, flags)
    }

    fn query_atomic(
        &self,
        datatype: ofi_core::enums::Datatype,
        op: ofi_core::enums::AtomicOp,
        flags: u64,
    ) -> Result<ofi_core::abi::raw::AtomicAttr> {
        let a = ofi_kit::atomic::query(op, datatype, flags)?;
        let size = a.size.max(1);
        Ok(ofi_core::abi::raw::AtomicAttr {
            count: a.count.min(crate::MAX_ATOMIC_BYTES / size),
            size: a.size,
        })
    }
}
