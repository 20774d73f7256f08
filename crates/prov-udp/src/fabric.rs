//! The fabric, the domain and the address vector: small objects that open everything
//! else, built from the kit.
//!
//! - [`Fabric`] is the family type (`Provider::Fabric`): event queues are the kit's
//!   `KitEq`, wait sets `KitWait`; passive endpoints are `Unsupported` (`FI_ENOSYS`).
//! - [`Domain`] owns the domain's [`ProgressEngine`] (manual, or auto with its own
//!   thread, from `domain_attr.data_progress`); its CQs (`KitCq`) and counters
//!   (`KitCntr`) are bound to it, and every endpoint registers with it. With manual
//!   progress, the first CQ or counter with a wait fd starts the domain's watcher
//!   thread (`watch`), which drives progress when a socket becomes readable.
//! - The AV is the kit's `SharedAv`, a `KitAv` endpoints share, with a
//!   [`Peer`] per entry: the peer's socket address in the C layout, ready for
//!   `sendmsg` without allocation.
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_core::addr::Address;
use ofi_core::attr::Info;
use ofi_core::av::AvAttr;
use ofi_core::cntr::CntrAttr;
use ofi_core::cq::CqAttr;
use ofi_core::provider::{DomainOps, Unsupported};
use ofi_core::{AddrFormat, EpType, Errno, Error, Result};
use ofi_kit::av::{AvConfig, KitAv, SharedAv};
use ofi_kit::cntr::KitCntr;
use ofi_kit::cq::KitCq;
use ofi_kit::progress::{ProgressEngine, ProgressMode};
use ofi_kit::wait::{KitWait, WaitMode};

use crate::ep::Endpoint;
use crate::sock::SockAddr;
use crate::watch::Hub;
use crate::{Settings, NAME};

ofi_kit::settings_fabric! {
    /// A fabric (`fid_fabric`). `FI_EINVAL` when `info` names an endpoint type other
    /// than `FI_EP_DGRAM`.
    pub struct Fabric(Settings) {
        Domain = Domain, check = |info| ofi_kit::fabric::check_ep_type(NAME, info, EpType::Dgram);
    }
}

/// A domain (`fid_domain`): its progress engine, and what its objects are opened with.
#[derive(Debug)]
pub struct Domain {
    settings: Settings,
    engine: Arc<ProgressEngine>,
    addr_format: AddrFormat,
    /// Endpoints and the wait-fd watcher (see [`crate::watch`]).
    hub: Arc<Hub>,
}

impl Domain {
    /// Open a domain of a fabric with `settings` for `info`.
    ///
    /// # Errors
    /// `FI_EINVAL` for an endpoint type other than `FI_EP_DGRAM`; the progress engine's
    /// errors.
    pub(crate) fn open(settings: &Settings, info: &Info) -> Result<Domain> {
        Fabric::check_info(info)?;
        let engine = ProgressEngine::for_domain(info)?;
        let addr_format = match info.addr_format {
            AddrFormat::UNSPEC => AddrFormat::SOCKADDR_IN,
            f => f,
        };
        Ok(Domain {
            settings: *settings,
            engine,
            addr_format,
            hub: Arc::new(Hub::new()),
        })
    }

    /// The domain's progress engine.
    pub fn engine(&self) -> &Arc<ProgressEngine> {
        &self.engine
    }

    /// A CQ or counter with a wait fd on a manual-progress domain: start the watcher,
    /// so the fd becomes readable when a datagram arrives (see [`crate::watch`]).
    fn watch_if(&self, mode: WaitMode) {
        if mode.has_fd() && self.engine.mode() == ProgressMode::Manual {
            self.hub.start(&self.engine);
        }
    }
}

impl DomainOps<Fabric> for Domain {
    type Endpoint = Endpoint;
    type Cq = KitCq;
    type Cntr = KitCntr;
    type Av = SharedAv<Peer>;
    type Mr = Unsupported;

    fn endpoint(&self, info: &Info, context: usize, flags: u64) -> Result<Endpoint> {
        ofi_kit::fabric::no_endpoint_flags(NAME, flags)?;
        Endpoint::open(
            self.settings,
            info,
            context,
            self.engine.clone(),
            self.hub.clone(),
        )
    }

    fn cq_open(&self, attr: &CqAttr, _context: usize) -> Result<KitCq> {
        let cq = KitCq::with_progress(attr, self.engine.clone())?;
        self.watch_if(cq.wait_mode());
        Ok(cq)
    }

    fn cntr_open(&self, attr: &CntrAttr, _context: usize) -> Result<KitCntr> {
        let c = KitCntr::with_progress(attr, self.engine.clone())?;
        self.watch_if(c.wait_mode());
        Ok(c)
    }

    fn cq_open_in_set(&self, attr: &CqAttr, set: &KitWait, _context: usize) -> Result<KitCq> {
        KitCq::with_progress_in(attr, self.engine.clone(), set)
    }

    fn cntr_open_in_set(&self, attr: &CntrAttr, set: &KitWait, _context: usize) -> Result<KitCntr> {
        KitCntr::with_progress_in(attr, self.engine.clone(), set)
    }

    fn av_open(&self, attr: &AvAttr, context: usize) -> Result<Self::Av> {
        let kit = KitAv::open_with(attr, context, AvConfig::new(self.addr_format), Peer::new)?;
        Ok(SharedAv::new(kit))
    }
}

/// What the AV keeps per peer: its socket address, ready for `sendmsg`.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    /// The peer's address in the C layout.
    pub addr: SockAddr,
}

impl Peer {
    /// The peer behind an inserted address: IPv4, IPv6, or an `FI_ADDR_STR` string of
    /// either (`fi_sockaddr_in://…`, `fi_sockaddr_in6://…`).
    ///
    /// # Errors
    /// `FI_EINVAL` for any other address.
    pub fn new(addr: &Address) -> Result<Peer> {
        let sa = match addr {
            Address::Str(s) => Address::parse_addr_str(s)?.socket_addr(),
            a => a.socket_addr(),
        };
        match sa {
            Some(sa) => Ok(Peer {
                addr: SockAddr::from_std(&sa),
            }),
            None => Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: {addr} is not an IP socket address"),
            )),
        }
    }
}
