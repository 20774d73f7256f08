//! The fabric: settings and the connection-management hub (`cm::CmHub`),
//! driven by the fabric's control progress engine (every EQ read or wait drives it).
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_core::attr::Info;
use ofi_core::provider::FabricOps;
use ofi_core::Result;
use ofi_kit::progress::{ProgressEngine, ProgressMode};

use crate::cm::{CmHub, PassiveEp};
use crate::domain::Domain;
use crate::{Settings, FABRIC_NAME, NAME};

/// What a fabric's objects share.
#[derive(Debug)]
pub(crate) struct FabricShared {
    pub(crate) settings: Settings,
    pub(crate) cm_engine: Arc<ProgressEngine>,
    pub(crate) hub: Arc<CmHub>,
}

/// A fabric.
#[derive(Debug)]
pub struct Fabric {
    pub(crate) shared: Arc<FabricShared>,
}

impl Fabric {
    /// Open the fabric.
    ///
    /// # Errors
    /// `FI_EINVAL` when `info` names another fabric; the connection manager's errors.
    pub fn open(settings: Settings, info: &Info) -> Result<Fabric> {
        ofi_kit::fabric::check_fabric_name(NAME, info, |name| {
            name == FABRIC_NAME || name.eq_ignore_ascii_case(NAME)
        })?;
        let cm_engine = Arc::new(ProgressEngine::new(ProgressMode::from(
            info.domain_attr.control_progress,
        ))?);
        let hub = Arc::new(CmHub::new(settings.kind)?);
        cm_engine.register(&hub);
        Ok(Fabric {
            shared: Arc::new(FabricShared {
                settings,
                cm_engine,
                hub,
            }),
        })
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.shared.cm_engine.unregister(&self.shared.hub);
    }
}

impl FabricOps for Fabric {
    type Domain = Domain;
    type PassiveEp = PassiveEp;
    ofi_kit::kit_fabric_ops!(eq_progress = |f| f.shared.cm_engine.clone());

    fn domain(&self, info: &Info, _context: usize) -> Result<Domain> {
        Domain::open(self.shared.clone(), info)
    }

    fn passive_ep(&self, info: &Info, context: usize) -> Result<PassiveEp> {
        PassiveEp::open(self.shared.clone(), info, context)
    }
}
