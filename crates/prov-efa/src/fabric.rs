//! The fabric: the settings its domains use; EQs and wait sets are kit's.
//!
//! Nothing here panics.

use ofi_core::attr::Info;
use ofi_core::provider::{FabricOps, Unsupported};
use ofi_core::Result;

use crate::domain::Domain;
use crate::{Settings, FABRIC_NAME, NAME};

/// A fabric.
#[derive(Debug)]
pub struct Fabric {
    pub(crate) settings: Settings,
}

impl Fabric {
    /// Open the fabric.
    ///
    /// # Errors
    /// `FI_EINVAL` when `info` names another fabric.
    pub fn open(settings: Settings, info: &Info) -> Result<Fabric> {
        ofi_kit::fabric::check_fabric_name(NAME, info, |name| name == FABRIC_NAME)?;
        Ok(Fabric { settings })
    }
}

impl FabricOps for Fabric {
    type Domain = Domain;
    type PassiveEp = Unsupported;
    ofi_kit::kit_fabric_ops!();

    fn domain(&self, info: &Info, _context: usize) -> Result<Domain> {
        Domain::open(&self.settings, info)
    }
}
