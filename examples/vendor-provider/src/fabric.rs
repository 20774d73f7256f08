//! The fabric and the domain: small objects that open everything else.
//!
//! [`Fabric`] is the family type of this provider (`Provider::Fabric`): through its
//! associated types it names every other class. The classes this provider does not
//! have (passive endpoints, event queues, wait sets, counters, memory regions) are
//! `ofi_core::provider::Unsupported`, and their open calls keep the trait defaults,
//! which return `FI_ENOSYS`.
//!
//! Nothing here panics.

use ofi_core::attr::Info;
use ofi_core::av::AvAttr;
use ofi_core::cq::CqAttr;
use ofi_core::provider::{DomainOps, FabricOps, Unsupported};
use ofi_core::{AvType, EpType, Errno, Error, Result};

use crate::av::Av;
use crate::cq::Cq;
use crate::ep::Endpoint;
use crate::{Settings, NAME};

/// A fabric (`fid_fabric`): every process on this host that uses this provider.
#[derive(Debug)]
pub struct Fabric {
    settings: Settings,
}

impl Fabric {
    /// Open the fabric for `info`.
    ///
    /// # Errors
    /// `FI_EINVAL` when `info` names another fabric.
    pub fn open(settings: Settings, info: &Info) -> Result<Fabric> {
        if let Some(name) = info.fabric_attr.name.as_deref() {
            if !name.eq_ignore_ascii_case(NAME) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("unixdgram: no fabric named {name:?}"),
                ));
            }
        }
        Ok(Fabric { settings })
    }
}

impl FabricOps for Fabric {
    type Domain = Domain;
    type PassiveEp = Unsupported;
    type Eq = Unsupported;
    type Wait = Unsupported;

    fn domain(&self, info: &Info, _context: usize) -> Result<Domain> {
        if let Some(name) = info.domain_attr.name.as_deref() {
            if !name.eq_ignore_ascii_case(NAME) {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("unixdgram: no domain named {name:?}"),
                ));
            }
        }
        require_dgram(info, "domains")?;
        let av_type = match info.domain_attr.av_type {
            AvType::Unspec => AvType::Map,
            t => t,
        };
        Ok(Domain {
            settings: self.settings,
            av_type,
        })
    }
}

/// A domain (`fid_domain`): opens endpoints, CQs and AVs.
#[derive(Debug)]
pub struct Domain {
    settings: Settings,
    /// The AV type an AV opened with `FI_AV_UNSPEC` gets.
    av_type: AvType,
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    type Cq = Cq;
    type Cntr = Unsupported;
    type Av = Av;
    type Mr = Unsupported;

    fn endpoint(&self, info: &Info, _context: usize, flags: u64) -> Result<Endpoint> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "unixdgram: fi_endpoint2 flags are not supported",
            ));
        }
        Endpoint::open(&self.settings, info)
    }

    fn cq_open(&self, attr: &CqAttr, _context: usize) -> Result<Cq> {
        Cq::open(attr, self.settings.default_cq_size)
    }

    fn av_open(&self, attr: &AvAttr, _context: usize) -> Result<Av> {
        Av::open(attr, self.av_type)
    }
}

/// `FI_EINVAL` unless `info` asks for `FI_EP_DGRAM` (or leaves the type unspecified):
/// the only endpoint type of this provider, so the only one its `what` (domains,
/// endpoints) serve.
pub(crate) fn require_dgram(info: &Info, what: &str) -> Result<()> {
    if matches!(info.ep_attr.ep_type, EpType::Dgram | EpType::Unspec) {
        return Ok(());
    }
    Err(Error::new(
        Errno::EINVAL,
        format!(
            "unixdgram {what} are FI_EP_DGRAM only, not {}",
            info.ep_attr.ep_type
        ),
    ))
}
