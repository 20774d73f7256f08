//! The hooks' provider: each hook registers as a provider of kind `Hook` (named
//! `H::NAME`), answers no getinfo (hooks are not selected, they are applied), and opens
//! its fabric over the fabric beneath. This is the hook crate's implementation of the
//! provider root table (`for_each_provider_op!`), as every provider has one; the rest
//! of the crate is the forwarding beneath it. Nothing here panics.

use std::marker::PhantomData;

use ofi_core::abi::{self, PluginEntry, ProviderKind};
use ofi_core::getinfo::{GetinfoOutcome, GetinfoRequest};
use ofi_core::provider::{Host, Provider};
use ofi_core::{Info, Result, Version};

use crate::{debug, fault, noop, perf, trace, Hook, HookFabric, VERSION};

/// The provider of hook `H`: registers as `H::NAME`, answers no getinfo (hooks are
/// not selected, they are applied), and wraps the fabric beneath when opened.
pub struct HookProvider<H: Hook> {
    host: Host,
    _h: PhantomData<fn() -> H>,
}

impl<H: Hook> Provider for HookProvider<H> {
    const NAME: &'static str = H::NAME;
    const VERSION: Version = VERSION;
    const KIND: ProviderKind = ProviderKind::Hook;
    type Fabric = HookFabric<H>;

    fn init(host: &Host) -> Result<Self> {
        H::declare(host)?;
        Ok(HookProvider {
            host: *host,
            _h: PhantomData,
        })
    }

    fn info_templates(&self) -> Vec<Info> {
        Vec::new()
    }

    fn getinfo(&self, _req: &GetinfoRequest) -> GetinfoOutcome {
        GetinfoOutcome::default()
    }

    fn fabric(&self, info: &Info) -> Result<HookFabric<H>> {
        let inner = self.host.hook_inner_fabric(info.prov_name())?;
        HookFabric::open(&self.host, info, inner)
    }
}

/// The provider of the perf hook.
pub type PerfProvider = HookProvider<perf::Perf>;
/// The provider of the trace hook.
pub type TraceProvider = HookProvider<trace::Trace>;
/// The provider of the debug hook.
pub type DebugProvider = HookProvider<debug::Debug>;
/// The provider of the noop hook.
pub type NoopProvider = HookProvider<noop::Noop>;
/// The provider of the fault hook.
pub type FaultProvider = HookProvider<fault::Fault>;

/// The entries of the five hooks, to register as built-ins (the `ofi` crate does with
/// its `hook` feature; tests pass them in `RegistryConfig::builtins`).
pub fn builtin_entries() -> Vec<&'static PluginEntry> {
    vec![
        abi::entry_for::<PerfProvider>(),
        abi::entry_for::<TraceProvider>(),
        abi::entry_for::<DebugProvider>(),
        abi::entry_for::<NoopProvider>(),
        abi::entry_for::<FaultProvider>(),
    ]
}

// A plugin build of this crate is the noop hook (one provider per library); a vendor
// hook is its own cdylib crate exporting `HookProvider<TheirHook>`.
#[cfg(feature = "plugin")]
ofi_core::export_provider!(crate::NoopProvider);
