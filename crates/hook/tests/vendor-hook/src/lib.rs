//! `ofi_hook_count`: an example hook a vendor ships as a plugin. It builds on the
//! `ofi-hook` crate's [`Hook`] trait (the wrappers come from there) and exports itself
//! with `ofi_core::export_provider!`, like any provider plugin.
//!
//! Behaviour (what the loading test checks): every data call is counted and the count
//! is logged at fabric close; a data call with context `0xdead` is refused with
//! `FI_ECANCELED` without reaching the provider beneath.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use ofi_core::fabric::Fabric;
use ofi_core::provider::Host;
use ofi_core::{Errno, Error, Info, Result};
use ofi_hook::{CallKind, Hook, HookProvider, HookedCall, ObjName};

/// The hook of one fabric.
pub struct Count {
    calls: AtomicU64,
    prov: String,
}

impl Hook for Count {
    const NAME: &'static str = "ofi_hook_count";
    type EpData = ();
    type CqData = ();

    fn open(_host: &Host, info: &Info, _inner: &Fabric) -> Result<Count> {
        Ok(Count {
            calls: AtomicU64::new(0),
            prov: info.prov_name().to_string(),
        })
    }

    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        let CallKind::Data(_, data) = call.kind else {
            return call.forward();
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        if data.context == 0xdead {
            return Err(Error::new(
                Errno::ECANCELED,
                "ofi_hook_count refuses 0xdead",
            ));
        }
        call.forward()
    }

    fn fabric_close(&self, fabric: &ObjName) {
        ofi_core::ofi_info!(
            Self::NAME,
            "fabric",
            "{fabric} over {}: {} data calls",
            self.prov,
            self.calls.load(Ordering::Relaxed)
        );
    }
}

ofi_core::export_provider!(HookProvider<Count>);
