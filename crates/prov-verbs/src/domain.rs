//! The domain: one device context and protection domain, the data progress engine, and
//! the table of registered regions (address → lkey) the data path looks local buffers
//! up in.
//!
//! Invariants: every region in the table is registered with `LOCAL_WRITE` and stays
//! registered while it is in the table (its [`crate::mr::VerbsMr`] removes it before
//! deregistering). Nothing here panics.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use ofi_core::abi::raw::AtomicAttr;
use ofi_core::attr::{Info, RxAttr};
use ofi_core::av::AvAttr;
use ofi_core::mr::MrAttr;
use ofi_core::provider::DomainOps;
use ofi_core::{AddrFormat, AtomicKind, AtomicOp, Datatype, EpType, Errno, Error, Result};
use ofi_kit::av::{AvConfig, KitAv, SharedAv};
use ofi_kit::progress::{ProgressEngine, ProgressMode};
use ofi_rdma::{Context, DomainDevice, Gid, ProtectionDomain};

use crate::ep::ud::UdPeer;
use crate::ep::Endpoint;
use crate::fabric::{Fabric, FabricShared};
use crate::mr::VerbsMr;
use crate::NAME;

/// What a domain's objects share.
pub(crate) struct DomainShared {
    pub(crate) fabric: Arc<FabricShared>,
    pub(crate) ctx: Context,
    pub(crate) pd: ProtectionDomain,
    pub(crate) gid: Gid,
    pub(crate) engine: Arc<ProgressEngine>,
    /// Registered regions: start → (length, lkey).
    regions: RwLock<BTreeMap<usize, (usize, u32)>>,
}

ofi_kit::debug_fields!(DomainShared, |dom| { device: dom.ctx.device_name() });

impl DomainShared {
    pub(crate) fn add_region(&self, addr: usize, len: usize, lkey: u32) {
        self.regions
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(addr, (len, lkey));
    }

    pub(crate) fn remove_region(&self, addr: usize, lkey: u32) {
        let mut t = self.regions.write().unwrap_or_else(|p| p.into_inner());
        if t.get(&addr).is_some_and(|&(_, k)| k == lkey) {
            t.remove(&addr);
        }
    }

    /// The lkey of a registered region covering `[addr, addr + len)`.
    pub(crate) fn lkey_of(&self, addr: usize, len: usize) -> Option<u32> {
        let t = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let (&base, &(rlen, lkey)) = t.range(..=addr).next_back()?;
        let end = addr.checked_add(len)?;
        (end <= base.checked_add(rlen)?).then_some(lkey)
    }
}

/// A domain (one RDMA device).
#[derive(Debug)]
pub struct Domain {
    pub(crate) shared: Arc<DomainShared>,
}

impl Domain {
    pub(crate) fn open(fabric: Arc<FabricShared>, info: &Info) -> Result<Domain> {
        if info.ep_attr.ep_type != EpType::Dgram {
            ofi_kit::fabric::check_ep_type(NAME, info, EpType::Msg)?;
        }
        let DomainDevice { ctx, pd, gid } = DomainDevice::open(
            NAME,
            fabric.settings.kind,
            &fabric.settings.devices,
            info.domain_attr.name.as_deref(),
        )?;
        let engine = Arc::new(ProgressEngine::new(ProgressMode::from(
            info.domain_attr.data_progress,
        ))?);
        Ok(Domain {
            shared: Arc::new(DomainShared {
                fabric,
                ctx,
                pd,
                gid,
                engine,
                regions: RwLock::new(BTreeMap::new()),
            }),
        })
    }
}

/// Whether verbs performs `op` on `dt` as an operation of `kind`: fetch-and-add
/// (`FI_SUM`, base or fetch) and compare-and-swap (`FI_CSWAP`, compare) on 8-byte
/// integers.
pub(crate) fn atomic_supported(dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<()> {
    let ok = matches!(dt, Datatype::Uint64 | Datatype::Int64)
        && match kind {
            AtomicKind::Base | AtomicKind::Fetch => op == AtomicOp::Sum,
            AtomicKind::Compare => op == AtomicOp::Cswap,
        };
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            Errno::EOPNOTSUPP,
            format!("{NAME}: verbs offers 8-byte fetch-and-add and compare-and-swap only"),
        ))
    }
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    ofi_kit::kit_domain_cq_cntr_ops!(|d| d.shared.engine.clone());
    type Av = SharedAv<Arc<UdPeer>>;
    type Mr = VerbsMr;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        Endpoint::open(self.shared.clone(), info, context)
    }

    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<VerbsMr> {
        VerbsMr::register(self.shared.clone(), attr, flags)
    }

    fn srx_ctx(&self, attr: &RxAttr, context: usize) -> Result<Endpoint> {
        Endpoint::open_srx(self.shared.clone(), attr, context)
    }

    fn av_open(&self, attr: &AvAttr, context: usize) -> Result<Self::Av> {
        let pd = self.shared.pd.clone();
        let kit = KitAv::open_with(attr, context, AvConfig::new(AddrFormat::IB_UD), move |a| {
            crate::ep::ud::peer_from(&pd, a)
        })?;
        Ok(SharedAv::new(kit))
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        let kind = ofi_kit::atomic::query_kind(flags)?;
        atomic_supported(datatype, op, kind)?;
        Ok(AtomicAttr { count: 1, size: 8 })
    }
}
