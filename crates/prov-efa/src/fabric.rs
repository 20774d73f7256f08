//! The fabric: the settings its domains use; EQs and wait sets are kit's.
//!
//! Nothing here panics.

use crate::domain::Domain;
use crate::{Settings, FABRIC_NAME, NAME};

ofi_kit::settings_fabric! {
    /// A fabric: the settings its domains use. `FI_EINVAL` when `info` names another
    /// fabric.
    pub struct Fabric(Settings) {
        Domain = Domain,
        check = |info| ofi_kit::fabric::check_fabric_name(NAME, info, |name| name == FABRIC_NAME);
    }
}
