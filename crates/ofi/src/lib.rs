//! ofi: the OpenFabrics Interfaces in Rust — the crate applications depend on.
//!
//! An application asks [`getinfo()`] which fabric services can reach a peer, opens
//! fabric → domain → endpoint from the chosen [`Info`], and moves data; completions
//! arrive on completion queues and counters, connection events on event queues. The
//! object and operation names follow the C API one to one (see `ofi_core`'s modules).
//!
//! This crate re-exports `ofi-core` (the vocabulary and object types) and `ofi-host`
//! (the host: [`registry`](mod@registry), [`loader`], [`select`], [`config`], [`param`], [`log`],
//! [`tostr`], at the paths they always had), and registers the in-tree providers that
//! were compiled in (one cargo feature each) before the registry is first used.
//! Providers shipped as plugins are found through `FI_PROVIDER_PATH` and `plugins.toml`.
//!
//! ```no_run
//! use ofi::{getinfo, GetinfoFlags, Info, EpType, API_VERSION};
//! let hints = Info::hints().with_ep_type(EpType::Rdm);
//! match getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&hints)) {
//!     Ok(infos) => for i in &infos { println!("{} {}", i.prov_name(), i.ep_type()) },
//!     Err(e) => eprintln!("getinfo: {e}"),
//! }
//! ```
//!
//! # Two layers
//!
//! - The **raw layer** (`ofi::fabric`, `ofi::domain`, `ofi::ep`, `ofi::cq`, …, re-exported
//!   from `ofi-core`): the C API one to one. Data calls take raw pointers and are
//!   `unsafe`: you keep each buffer alive and untouched until its completion is read.
//! - The **safe layer**, [`safe`]: builders ([`safe::Hints`], [`safe::EpBuilder`]),
//!   endpoints typed by kind ([`safe::Ep`]`<Msg | Rdm | Dgram>`), buffers that move into
//!   an operation and come back with its [`safe::Completion`], remote-writable memory
//!   as its own type ([`safe::SharedRegion`]`<RemoteWrite>`), addresses and region
//!   descriptors that `serde` can send to peers, and (feature `tokio`) async
//!   completions. docs/API.md is the guide, with runnable examples.
//!
//! # The object model
//!
//! fabric (a provider's network) → domain (a NIC's resources: registrations, queues)
//! → endpoints (send and receive), with completion queues (one entry per finished
//! operation), counters (a count of them), event queues (connection events) and
//! address vectors (peer address → compact `fi_addr_t`). Every child keeps its parents
//! open; closing a parent with open children is `FI_EBUSY` in the raw layer, and the
//! safe layer simply keeps parents alive until the last child is dropped.
//!
//! # Progress
//!
//! The in-tree providers use manual data progress: data moves when the application
//! calls into the provider — reading a CQ (even with no room for entries), posting, or
//! `fi_trywait`. A program that waits must keep reading its CQ; the safe layer's
//! [`safe::Ep::wait`] and the async layer do.
//!
//! # Memory registration
//!
//! A provider that sets `FI_MR_LOCAL` needs local buffers registered: allocate them
//! with [`safe::Domain::alloc`]. Memory peers access (RMA, atomics) is registered with
//! [`safe::Domain::register_remote_readable`] / `register_remote_writable`; the
//! registration owns the memory, so it cannot be freed while peers may write to it.
//!
//! # Errors
//!
//! Every call returns [`Result`]: an [`Error`] with an `FI_*` code ([`Errno`]) and a
//! message. `FI_EAGAIN` from a post means "read your CQ, then post again"; a CQ read
//! returning `FI_EAVAIL` means an error completion is next (the safe layer turns it
//! into a [`safe::OpError`] carrying the operation's buffer).
#![deny(unsafe_code)]

pub use ofi_core::*;
// The host's modules at their old paths (they were part of `ofi-core`); `param` and
// `log` shadow the core's (they re-export its items).
pub use ofi_host::{config, host_table, loader, log, param, registry, select, tostr};

pub mod safe;

pub use ofi_core::getinfo::{GetinfoOutcome, GetinfoRequest, Verdict, VerdictKind};
pub use ofi_core::version::API_VERSION;
pub use ofi_host::registry::Registry;

use std::sync::Once;

/// The version of this crate (the ofi-rs library version `fi_info --version` prints).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Register the providers compiled into this build (idempotent).
fn register_builtins() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        /// Registers each provider type whose cargo feature is enabled, in order.
        macro_rules! add_builtins {
            ($($feature:literal => $provider:ty,)*) => {$(
                #[cfg(feature = $feature)]
                ofi_host::registry::add_builtin(ofi_core::abi::entry_for::<$provider>());
            )*};
        }
        add_builtins! {
            // In-tree providers, one cargo feature each.
            "udp" => ofi_prov_udp::UdpProvider,
            "tcp" => ofi_prov_tcp::TcpProvider,
            "shm" => ofi_prov_shm::ShmProvider,
            "verbs" => ofi_prov_verbs::VerbsProvider,
            "efa" => ofi_prov_efa::EfaProvider,
            // Utility providers: they layer over the core providers above (and plugins).
            "rxm" => ofi_util_rxm::RxmProvider,
            "rxd" => ofi_util_rxd::RxdProvider,
        }
        // Hooks (perf, trace, debug, noop, fault), applied when FI_HOOK names them.
        #[cfg(feature = "hook")]
        for entry in ofi_hook::builtin_entries() {
            ofi_host::registry::add_builtin(entry);
        }
    });
}

/// For tests and tools: register the five hooks with the process-wide registry (if
/// they are not already) and wrap every fabric it opens from now on in `spec` (the
/// `FI_HOOK` grammar; `""` for none). This includes the fabrics utility providers open
/// beneath themselves (rxd's udp fabric), which always go through the process-wide
/// registry. `FI_ENOENT` if a name is not a registered hook.
#[cfg(feature = "hook")]
pub fn apply_hooks_globally(spec: &str) -> Result<()> {
    register_builtins();
    for entry in ofi_hook::builtin_entries() {
        ofi_host::registry::add_builtin(entry);
    }
    ofi_host::registry::global().set_hooks(spec)
}

/// The process-wide provider registry (built-ins plus plugins), built on first use.
pub fn registry() -> &'static Registry {
    register_builtins();
    ofi_host::registry::global()
}

/// `fi_getinfo`: the fabric services that match `hints` and can reach `node` /
/// `service`, best first. Errors: `FI_ENODATA` when nothing matches (the message says
/// why), `FI_ENOSYS` for a version newer than [`API_VERSION`], `FI_EBADFLAGS` for
/// unknown flags, `FI_EINVAL` for inconsistent arguments.
pub fn getinfo(
    version: Version,
    node: Option<&str>,
    service: Option<&str>,
    flags: GetinfoFlags,
    hints: Option<&Info>,
) -> Result<Vec<Info>> {
    registry().getinfo(&GetinfoRequest {
        version,
        node: node.map(str::to_string),
        service: service.map(str::to_string),
        flags,
        hints: hints.cloned(),
    })
}

/// [`getinfo()`], its arguments gathered in `req`, plus the explain report: for every
/// provider, kept, filtered (which rule) or rejected (which hint field, what was asked,
/// what it offers).
pub fn getinfo_explain(req: &GetinfoRequest) -> (Result<Vec<Info>>, Vec<Verdict>) {
    registry().getinfo_explain(req)
}

/// `fi_fabric`: open the fabric of an [`Info`] returned by [`getinfo()`].
pub fn fabric(info: &Info) -> Result<fabric::Fabric> {
    registry().open_fabric(info)
}
