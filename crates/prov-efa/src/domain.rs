//! The domain: one device context and protection domain, the data progress engine its
//! CQs, counters and endpoints use, kit's AV over `FI_ADDR_EFA` addresses ([`crate::av`])
//! and kit's MR table.
//!
//! Memory registration needs no device registration here: the protocol copies every
//! message through the endpoint's own registered bounce buffers (no `FI_MR_LOCAL`); the
//! application's regions are the targets of emulated RMA, checked in kit's table.
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_core::attr::Info;
use ofi_core::av::AvAttr;
use ofi_core::mr::MrAttr;
use ofi_core::provider::DomainOps;
use ofi_core::{AddrFormat, AvType, EpType, Result};
use ofi_kit::av::{AvConfig, KitAv, SharedAv};
use ofi_kit::mr::{KitMr, MrConfig, MrTable};
use ofi_kit::progress::{ProgressEngine, ProgressMode};
use ofi_rdma::{Context, DomainDevice, Gid, ProtectionDomain};

use crate::av::EfaAddr;
use crate::ep::{AhNumbers, Endpoint};
use crate::fabric::Fabric;
use crate::{Settings, IOV_LIMIT, NAME};

/// What a domain's endpoints share.
pub(crate) struct DomainShared {
    pub(crate) settings: Settings,
    pub(crate) pd: ProtectionDomain,
    pub(crate) ctx: Context,
    pub(crate) gid: Gid,
    /// Where the address handles the endpoints made lead (EFA names a known sender by
    /// its handle's number).
    pub(crate) ah_numbers: Arc<AhNumbers>,
}

ofi_kit::debug_fields!(DomainShared, |dom| { device: dom.ctx.device_name() });

/// `FI_EP_RDM` or `FI_EP_DGRAM` (or unspecified).
fn check_ep_type(info: &Info) -> Result<()> {
    if info.ep_attr.ep_type == EpType::Dgram {
        return Ok(());
    }
    ofi_kit::fabric::check_ep_type(NAME, info, EpType::Rdm)
}

/// A domain (one device).
#[derive(Debug)]
pub struct Domain {
    pub(crate) shared: Arc<DomainShared>,
    engine: Arc<ProgressEngine>,
    mr: Arc<MrTable>,
    av_type: AvType,
}

impl Domain {
    pub(crate) fn open(settings: &Settings, info: &Info) -> Result<Domain> {
        check_ep_type(info)?;
        let DomainDevice { ctx, pd, gid } = DomainDevice::open(
            NAME,
            settings.kind,
            &settings.devices,
            info.domain_attr.name.as_deref(),
        )?;
        let engine = Arc::new(ProgressEngine::new(ProgressMode::from(
            info.domain_attr.data_progress,
        ))?);
        // Keys of 4 bytes: the protocol's requests carry 32 bits.
        let mr = MrTable::new(MrConfig {
            key_size: 4,
            ..MrConfig::for_domain(info.domain_attr.mr_mode, IOV_LIMIT)
        })?;
        Ok(Domain {
            shared: Arc::new(DomainShared {
                settings: settings.clone(),
                pd,
                ctx,
                gid,
                ah_numbers: Arc::default(),
            }),
            engine,
            mr,
            av_type: info.domain_attr.av_type,
        })
    }
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    ofi_kit::kit_domain_cq_cntr_ops!(|d| d.engine.clone());
    type Av = SharedAv;
    type Mr = KitMr;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        check_ep_type(info)?;
        Endpoint::open(
            self.shared.clone(),
            info,
            context,
            self.engine.clone(),
            self.mr.clone(),
        )
    }

    fn av_open(&self, attr: &AvAttr, context: usize) -> Result<Self::Av> {
        let cfg = AvConfig::new(AddrFormat::EFA).with_domain_type(self.av_type, AvType::Table);
        // Every address is checked at insertion (a malformed one gets no fabric address).
        let kit = KitAv::open_with(attr, context, cfg, |a| EfaAddr::from_address(a).map(drop))?;
        Ok(SharedAv::new(kit))
    }

    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.mr.register(attr, flags)
    }

    fn query_atomic(
        &self,
        datatype: ofi_core::enums::Datatype,
        op: ofi_core::enums::AtomicOp,
        flags: u64,
    ) -> Result<ofi_core::abi::raw::AtomicAttr> {
        let kind = ofi_kit::atomic::query_kind(flags)?;
        let count = crate::ep::atomic_max_count(datatype, op, kind)?;
        Ok(ofi_core::abi::raw::AtomicAttr {
            count,
            size: datatype.size(),
        })
    }
}
