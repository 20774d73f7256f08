//! The fabric, the domain, the address vector and memory regions.
//!
//! - [`Fabric`] opens the MSG core's fabric through the host (it finds the core's info
//!   again from the RDM info's provider stack, fabric name and address format); its EQs
//!   and wait sets are the kit's.
//! - [`Domain`] opens the core's domain (manual progress: rxm drives it) and owns the
//!   kit progress engine its CQs, counters and endpoints use (manual or auto, from the
//!   RDM info).
//! - The AV (`SharedAv`) is the kit's AV over the core's address format (`FI_SOCKADDR_IN` for tcp):
//!   an rxm address is the core passive endpoint's name.
//! - [`Mr`] is a registration with the core's domain: its key and descriptor are the
//!   core's, so RMA and atomics forwarded to a connection use them unchanged.
//!
//! Nothing here panics.

use std::sync::atomic::{AtomicU64, Ordering};

use ofi_core::abi::raw::AtomicAttr;
use ofi_core::attr::Info;
use ofi_core::enums::{AtomicOp, Datatype};
use ofi_core::mr::{MemoryRegion, MrAttr};
use ofi_core::provider::{Desc, DomainOps, MrOps};
use ofi_core::Result;
use ofi_kit::epglue::SharedCtxAttr;
use ofi_kit::layer::{LayeredFabric, UtilityDomainShared};

use crate::ep::Endpoint;
use crate::Settings;

/// A fabric: the MSG core's fabric, opened through the host (the kit's
/// [`LayeredFabric`], whose domains are [`Domain`]s).
pub type Fabric = LayeredFabric<Domain>;

/// What a domain's endpoints share: the kit's part (settings, the core's info, domain
/// and fabric) and rxm's key counter.
pub type DomainShared = UtilityDomainShared<Settings, InternalKeys>;

/// rxm's own part of a domain: the counter of the keys of its internal registrations,
/// and the domain's authorization key (`domain_attr.auth_key`, see [`crate::auth`]).
#[derive(Debug)]
pub struct InternalKeys {
    next_key: AtomicU64,
    /// The domain's authorization key (`Debug` shows its length only).
    pub auth_key: ofi_kit::auth::AuthKey,
}

impl InternalKeys {
    /// The counter of a new domain (its keys start at 2^60) and its authorization key.
    ///
    /// # Errors
    /// `FI_EINVAL` for a key longer than [`ofi_kit::auth::AUTH_KEY_MAX`].
    fn new(info: &Info) -> Result<InternalKeys> {
        let auth_key = ofi_kit::auth::AuthKey::new(info.domain_attr.auth_key.as_deref());
        ofi_kit::auth::check_key(
            crate::NAME,
            "domain_attr.auth_key",
            auth_key.get(),
            ofi_kit::auth::AUTH_KEY_MAX,
        )?;
        Ok(InternalKeys {
            next_key: AtomicU64::new(1 << 60),
            auth_key,
        })
    }

    /// A key for an internal registration, distinct from application keys (which are
    /// below 2^60 in practice).
    pub fn internal_key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }
}

ofi_kit::layered_domain! {
    /// A domain (the kit's parts of a utility domain).
    pub struct Domain(Settings, InternalKeys) over crate::LAYERING, InternalKeys::new;
}

impl Domain {
    /// `fi_stx_context` or `fi_srx_context` (see `ep::shared_ctx`).
    fn shared_ctx(&self, attr: SharedCtxAttr<'_>) -> Result<Endpoint> {
        Endpoint::open_shared_ctx(self.0.inner.clone(), attr, self.0.engine.clone())
    }
}

impl DomainOps<Fabric> for Domain {
    ofi_kit::layered_domain_ops!(crate::LAYERING, Endpoint);
    type Mr = Mr;

    /// `fi_scalable_ep` (see `ep::scalable`).
    fn scalable_ep(&self, info: &Info, _context: usize) -> Result<Endpoint> {
        Endpoint::open_scalable(self.0.inner.clone(), info, self.0.engine.clone())
    }

    /// `fi_stx_context` (see `ep::shared_ctx`).
    fn stx_ctx(&self, attr: &ofi_core::TxAttr, _context: usize) -> Result<Endpoint> {
        self.shared_ctx(SharedCtxAttr::Tx(attr))
    }

    /// `fi_srx_context` (see `ep::shared_ctx`).
    fn srx_ctx(&self, attr: &ofi_core::RxAttr, _context: usize) -> Result<Endpoint> {
        self.shared_ctx(SharedCtxAttr::Rx(attr))
    }

    /// Registration with the core's domain (its key and descriptor are rxm's).
    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<Mr> {
        // SAFETY: the application's contract for fi_mr_reg* (memory valid until the
        // region is closed) carries over: the core region lives exactly as long as ours.
        let core = unsafe { self.0.inner.core.mr_regattr(attr, flags)? };
        Ok(Mr { core })
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        self.0.inner.core.query_atomic(datatype, op, flags)
    }
}

/// A memory region: a registration with the core's domain.
#[derive(Debug)]
pub struct Mr {
    core: MemoryRegion,
}

impl MrOps<Fabric> for Mr {
    fn key(&self) -> u64 {
        self.core.key()
    }

    fn desc(&self) -> Desc {
        self.core.desc()
    }

    fn enable(&self) -> Result<()> {
        self.core.enable()
    }

    fn refresh(&self, iov: &[ofi_core::abi::raw::Iov], flags: u64) -> Result<()> {
        self.core.refresh(iov, flags)
    }
}
