//! ofi-host: what only an application process runs (DESIGN §1, §2). A provider, linked
//! in or a plugin, never links this crate; it reaches all of it through the host table
//! (`ofi_core::provider::Host`).
//!
//! What lives here:
//! - the provider registry (built-ins plus plugins) and getinfo over it: [`registry`];
//! - the plugin loader (`FI_PROVIDER_PATH`, `plugins.toml` search paths, `dlopen`):
//!   [`loader`];
//! - `FI_PROVIDER` selection: [`select`];
//! - the plugin configuration (`plugins.toml`, `OFI_PLUGINS_CONFIG`): [`config`];
//! - the parameter store (environment, then `plugins.toml`, then defaults): [`param`];
//! - the stderr log subscriber filtered by `FI_LOG_*`: [`log`] (it re-exports the
//!   core's client side, so it is the one `log` module of an application);
//! - the host side of the host table, installed into `ofi-core` before any provider is
//!   initialised: [`host_table`];
//! - printing attributes the way the C library's `fi_tostr` does: [`tostr`].
//!
//! Invariant: [`host_table::install`] runs before the registry initialises a provider
//! (every entry point that builds a registry calls it), so every provider of the
//! process, linked in or plugin, sees this crate's registry, parameters and log sink.

// The moved modules name the core's modules as `crate::…` (they were written inside
// `ofi-core`); these imports keep those paths valid.
use ofi_core::{abi, addr, attr, enums, error, fabric, flags, getinfo, provider, version};
#[allow(unused_imports)]
use ofi_core::{ofi_debug, ofi_error, ofi_info, ofi_trace, ofi_warn};

pub mod config;
pub mod host_table;
pub mod loader;
pub mod log;
pub mod param;
pub mod registry;
pub mod select;
pub mod tostr;
