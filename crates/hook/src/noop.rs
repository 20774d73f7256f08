//! The noop hook (`ofi_hook_noop`): forwarding only. Its cost is the wrapper's own:
//! one more indirect call per operation.

use ofi_core::fabric::Fabric;
use ofi_core::provider::Host;
use ofi_core::{Info, Result};

use crate::Hook;

/// The noop hook.
#[derive(Debug, Default)]
pub struct Noop;

impl Hook for Noop {
    const NAME: &'static str = "ofi_hook_noop";
    type EpData = ();
    type CqData = ();

    fn open(_host: &Host, _info: &Info, _inner: &Fabric) -> Result<Noop> {
        Ok(Noop)
    }
}
