//! The fabric, the domain and the address vector, built from the kit.
//!
//! - [`Fabric`] is the family type: event queues are the kit's `KitEq`, wait sets
//!   `KitWait`; passive endpoints are `Unsupported` (`FI_ENOSYS`).
//! - [`Domain`] owns the domain's `ProgressEngine` (manual, or auto with its own thread,
//!   from `domain_attr.data_progress`); its CQs (`KitCq`) and counters (`KitCntr`) are
//!   bound to it, and every endpoint registers with it.
//! - Authorization keys: the domain keeps `domain_attr.auth_key`; each endpoint uses
//!   its own `ep_attr.auth_key` or else the domain's, and exchanges data only with
//!   endpoints of the same key (see `region`). Keys longer than
//!   [`ofi_kit::auth::AUTH_KEY_MAX`] are `FI_EINVAL`; keys are never logged.
//! - The AV is [`crate::av::ShmAv`]: the kit's `SharedAv`, a `KitAv` endpoints share,
//!   shared by name between processes when opened with one (`FI_SHARED_AV`). Inserted
//!   addresses must be `fi_shm://NAME` with a valid region name (else `FI_EINVAL` for
//!   that address).
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_core::abi::raw::AtomicAttr;
use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::av::AvAttr;
use ofi_core::enums::{AtomicOp, Datatype};
use ofi_core::mr::MrAttr;
use ofi_core::provider::DomainOps;
use ofi_core::{AvType, EpType, Errno, Error, Result};
use ofi_kit::auth::{self, AuthKey, AuthTag, AUTH_KEY_MAX};
use ofi_kit::epglue::SharedCtxAttr;
use ofi_kit::mr::{KitMr, MrConfig, MrTable};
use ofi_kit::progress::ProgressEngine;

use crate::av::ShmAv;
use crate::ep::Endpoint;
use crate::{Settings, ADDR_PREFIX, NAME};

ofi_kit::settings_fabric! {
    /// A fabric: every process of this host that uses this provider. `FI_EINVAL` for an
    /// endpoint type other than `FI_EP_RDM`.
    pub struct Fabric(Settings) {
        Domain = Domain, check = |info| ofi_kit::fabric::check_ep_type(NAME, info, EpType::Rdm);
    }
}

/// A domain: opens endpoints, CQs, counters and AVs; owns the progress engine.
#[derive(Debug)]
pub struct Domain {
    settings: Settings,
    engine: Arc<ProgressEngine>,
    av_type: AvType,
    mr: Arc<MrTable>,
    /// `domain_attr.auth_key` (its tag is `settings.auth`).
    auth_key: AuthKey,
}

impl Domain {
    /// Open a domain of a fabric with `settings` for `info`.
    ///
    /// # Errors
    /// `FI_EINVAL` for an endpoint type other than `FI_EP_RDM` or a key longer than
    /// [`AUTH_KEY_MAX`]; the progress engine's and MR table's errors.
    pub(crate) fn open(settings: &Settings, info: &Info) -> Result<Domain> {
        Fabric::check_info(info)?;
        let auth_key = AuthKey::new(info.domain_attr.auth_key.as_deref());
        auth::check_key(NAME, "domain_attr.auth_key", auth_key.get(), AUTH_KEY_MAX)?;
        let engine = ProgressEngine::for_domain(info)?;
        let cfg = MrConfig::for_domain(info.domain_attr.mr_mode, crate::IOV_LIMIT);
        Ok(Domain {
            settings: Settings {
                auth: auth_key.tag(),
                ..*settings
            },
            engine,
            av_type: info.domain_attr.av_type,
            mr: MrTable::new(cfg)?,
            auth_key,
        })
    }

    /// The domain's progress engine.
    pub fn engine(&self) -> &Arc<ProgressEngine> {
        &self.engine
    }

    /// The settings of an endpoint opened with `info`: the domain's, with the tag of
    /// the endpoint's key (`ep_attr.auth_key`, else the domain's).
    ///
    /// # Errors
    /// `FI_EINVAL` for a key longer than [`AUTH_KEY_MAX`].
    fn endpoint_settings(&self, info: &Info) -> Result<Settings> {
        let key = auth::endpoint_key(NAME, info, self.auth_key.get(), AUTH_KEY_MAX)?;
        Ok(Settings {
            auth: AuthTag::of(key),
            ..self.settings
        })
    }

    /// `fi_stx_context` or `fi_srx_context` (see `ep::shared_ctx`).
    fn shared_ctx(&self, attr: SharedCtxAttr<'_>) -> Result<Endpoint> {
        Endpoint::open_shared_ctx(self.settings, attr, self.engine.clone(), self.mr.clone())
    }
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    ofi_kit::kit_domain_cq_cntr_ops!(|d| d.engine.clone());
    type Av = ShmAv;
    type Mr = KitMr;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        Fabric::check_info(info)?;
        Endpoint::open(
            self.endpoint_settings(info)?,
            info,
            context,
            self.engine.clone(),
            self.mr.clone(),
        )
    }

    /// `fi_scalable_ep`: contexts per `ep_attr.tx_ctx_cnt` / `rx_ctx_cnt` (see
    /// `ep::scalable`).
    fn scalable_ep(&self, info: &Info, _context: usize) -> Result<Endpoint> {
        Fabric::check_info(info)?;
        let settings = self.endpoint_settings(info)?;
        Endpoint::open_scalable(settings, info, self.engine.clone(), self.mr.clone())
    }

    /// `fi_stx_context` (see `ep::shared_ctx`).
    fn stx_ctx(&self, attr: &ofi_core::TxAttr, _context: usize) -> Result<Endpoint> {
        self.shared_ctx(SharedCtxAttr::Tx(attr))
    }

    /// `fi_srx_context` (see `ep::shared_ctx`).
    fn srx_ctx(&self, attr: &ofi_core::RxAttr, _context: usize) -> Result<Endpoint> {
        self.shared_ctx(SharedCtxAttr::Rx(attr))
    }

    /// Registration by the kit's MR table (which answers unknown access bits with
    /// `FI_EBADFLAGS`).
    fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        self.mr.register(attr, flags)
    }

    fn query_atomic(&self, datatype: Datatype, op: AtomicOp, flags: u64) -> Result<AtomicAttr> {
        ofi_kit::atomic::query_within(op, datatype, flags, self.settings.max_msg_size)
    }

    /// A private AV, or a named one shared between processes (see `av`).
    fn av_open(&self, attr: &AvAttr, context: usize) -> Result<Self::Av> {
        crate::av::open(attr, context, self.av_type)
    }
}

/// The region name of an `fi_shm://NAME` address.
///
/// # Errors
/// `FI_EINVAL` for another format or a bad name.
pub fn region_name(a: &Address) -> Result<&str> {
    match a {
        Address::Str(s) => {
            let name = s.strip_prefix(ADDR_PREFIX).ok_or_else(|| {
                Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: address {s:?} does not start with {ADDR_PREFIX}"),
                )
            })?;
            crate::region::check_name(name)?;
            Ok(name)
        }
        other => Err(Error::new(
            Errno::EINVAL,
            format!(
                "{NAME}: address of format {} (expected FI_ADDR_STR)",
                other.format()
            ),
        )),
    }
}
