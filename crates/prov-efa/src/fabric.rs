//! The fabric: the settings its domains use; EQs and wait sets are kit's.
//!
//! Nothing here panics.

use ofi_core::attr::Info;
use ofi_core::provider::{FabricOps, Unsupported};
use ofi_core::Result;

use crate::domain::Domain;
use crate::{Settings, FABRIC_NAME};

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
        if let Some(name) = info.fabric_attr.name.as_deref() {
            if name != FABRIC_NAME {
                return Err(crate::einval(format!("no fabric named {name:?}")));
            }
        }
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
