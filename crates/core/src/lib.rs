//! ofi-core: the thin core of ofi-rs, the OpenFabrics Interfaces in Rust.
//!
//! What lives here (DESIGN §1–§5, §9):
//! - the vocabulary: [`error`], [`version`], [`flags`], [`enums`], [`addr`], [`attr`],
//!   the `fi_control` commands ([`control`]);
//! - getinfo matching, written once for every provider: [`getinfo`];
//! - the C-ABI plugin boundary: [`abi`] (entry struct, ops tables, host table, adapters)
//!   and the safe provider traits in [`provider`];
//! - the public object types (reverse wrappers over the tables): [`fabric`], [`domain`],
//!   [`ep`], [`cq`], [`eq`], [`cntr`], [`av`], [`mr`];
//! - the host-table client: log macros and the plugin forwarder ([`log`]), parameter
//!   types ([`param`]) and [`Host`](provider::Host) (parameters, layering getinfo and
//!   fabric open), which reach the process's host through the host table.
//!
//! This is what a provider links, in-tree or plugin. The host (registry, loader,
//! `FI_PROVIDER` selection, `plugins.toml`, parameter store, log subscriber, `fi_tostr`)
//! is `ofi-host`: an application process installs its host table here at start-up
//! ([`abi::host::install_process_host`]); a plugin's copy receives it at init.
//!
//! `core` depends on no provider and no other workspace crate (DESIGN §2).

pub mod abi;
pub mod addr;
pub mod attr;
pub mod av;
pub mod cntr;
pub mod const_list;
pub mod control;
pub mod cq;
pub mod domain;
pub mod enums;
pub mod ep;
pub mod eq;
pub mod error;
pub mod fabric;
pub mod flags;
pub mod getinfo;
pub mod log;
pub mod mr;
pub mod param;
pub mod poll;
pub mod provider;
pub mod text;
pub mod version;
pub mod wait;

pub use addr::Address;
pub use attr::{Bus, DomainAttr, EpAttr, FabricAttr, Info, Nic, PciAddress, RxAttr, TxAttr};
pub use enums::*;
pub use error::{Errno, Error, Result};
pub use flags::*;
pub use version::Version;
