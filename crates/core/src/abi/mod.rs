//! The plugin boundary (DESIGN §3): a plain C ABI between the core and providers.
//!
//! # The pieces
//!
//! - [`PluginEntry`]: the `#[repr(C)]` static a plugin exports as [`ENTRY_SYMBOL`]:
//!   interface version, layout fingerprint, provider name, version, kind, priority and
//!   init function. A linked-in provider has the same entry ([`entry_for`]), and
//!   registers through the same [`ProviderHandle::init`](crate::provider::ProviderHandle::init).
//! - [`tables`]: one `#[repr(C)]` ops table per object class, each starting with its
//!   `size`; [`raw`] and [`wire`]: the raw forms of `Info`, getinfo requests and
//!   results, attributes, completion and event entries.
//! - [`host`]: the host table (logging, parameters, getinfo and fabric open for
//!   layering) and [`Host`](crate::provider::Host), a provider's view of it.
//! - [`adapt`]: turns a safe [`Provider`] implementation
//!   into the tables (provider authors never write `extern "C"`).
//! - [`object`]: the host side: provider handles and the bookkeeping the public
//!   objects (`Fabric`, `Domain`, …: the reverse wrappers) share.
//!
//! # Compatibility rules
//!
//! - A plugin loads if its interface major equals [`ABI_MAJOR`], its minor is at most
//!   [`ABI_MINOR`], and its fingerprint equals [`fingerprint_for_minor`] of its minor.
//!   Otherwise it is refused by [`check_entry`], which only reads the entry's first
//!   fields: no plugin code runs.
//! - Tables and size-prefixed structures only grow at the end, and a new field or slot
//!   is declared with the minor that added it (`fn @N name`, `pub @N name`); the minor
//!   is then bumped. Anything else (reorder, rename, retype, remove) changes every
//!   fingerprint and needs a new major.
//! - The first three fields of [`PluginEntry`] never change.
//!
//! # Ownership
//!
//! - Objects: the provider allocates each object and frees it in its close slot; the
//!   host calls close exactly once, children before parents (see [`object`]).
//! - Values: whoever allocates a value frees it. getinfo results are copied by the
//!   asking side and handed back to the answering side's `free_getinfo`; connection
//!   infos read from an EQ go back to the EQ's `free_info`.
//! - Strings crossing as `RawStr` are borrowed for the duration of the call only.
//!
//! # Panics
//!
//! Nothing may unwind across the boundary: every exported slot (adapters and host
//! table) runs its body under `catch_unwind`, logs a panic with `tracing::error!` and
//! returns `-FI_EOTHER`. Plugins must be built with `panic = "unwind"` (the default).

pub mod adapt;
pub mod ctl_ops;
pub mod host;
pub mod layout;
pub mod object;
pub mod ops;
pub mod raw;
pub mod tables;
pub mod wire;

use std::ffi::c_char;
use std::fmt;

use crate::abi::layout::{abi_struct, hash_all, StructDesc};
use crate::abi::raw::{ErrBuf, Obj};
use crate::abi::tables::{HostTable, ProviderTable};
use crate::provider::Provider;

/// Interface major version: a plugin of another major is refused.
///
/// History: 2 split the host out of the core (`ofi-host`): a plugin's copy of the core
/// no longer carries a registry, parameter store or log subscriber and relies on the
/// host table for all of them (a detached table answers until one is installed).
/// Plugins of major 1 were built against a core that did; they are refused.
pub const ABI_MAJOR: u32 = 2;
/// Interface minor version: a plugin of this minor or an older one loads.
///
/// History: 1 added multicast (`join`, `mc_close`); 2 added the host's `hook_inner`
/// (hook providers, `FI_HOOK`). Major 2 continues these minors (its tables are those of
/// 1.2). 3 added a passive endpoint's `control` (`FI_BACKLOG`). 4 appended the NIC's
/// bus to `RawNic` (`bus_type` and the PCI address); a NIC from an older plugin has
/// none ([`crate::Bus::Unknown`]).
pub const ABI_MINOR: u32 = 4;
/// The name of the static a plugin exports.
pub const ENTRY_SYMBOL: &str = "OFI_RS_PLUGIN_ENTRY";

crate::abi::layout::abi_enum! {
    /// Core, utility or hook provider (`as_str`: `core`, `utility` or `hook`).
    pub enum ProviderKind, text as_str {
        /// Drives hardware or an OS transport (`tcp`, `udp`, `shm`, `verbs`, `efa`).
        Core = 0 => "core",
        /// Layers over core providers (`ofi_rxm`, `ofi_rxd`).
        Utility = 1 => "utility",
        /// Wraps other providers' objects (`ofi_hook_perf`, …).
        Hook = 2 => "hook",
    }
}

crate::enums::display_as!(ProviderKind, as_str);

abi_struct! {
    /// The exported entry of a provider (plugin static or linked-in constant).
    #[derive(Clone, Copy, Debug)]
    pub struct PluginEntry {
        /// Interface major the provider was built against (first, forever).
        pub abi_major: u32,
        /// Interface minor the provider was built against (second, forever).
        pub abi_minor: u32,
        /// Layout fingerprint of that interface (third, forever).
        pub fingerprint: u64,
        /// `size_of::<PluginEntry>()` in the provider's build.
        pub size: usize,
        /// Provider name, NUL-terminated, 'static.
        pub name: *const c_char,
        /// Provider version, packed (`Version::to_raw`).
        pub version: u32,
        /// [`ProviderKind`] as `u32`.
        pub kind: u32,
        /// Higher = earlier in getinfo results.
        pub priority: i32,
        /// Initialise with the host's table; fills `out`. 0 or `-FI_x`.
        pub init: unsafe extern "C" fn(host: *const HostTable, out: *mut ProviderInstance) -> i32,
    }

    /// What a provider's init hands back: its context and root table, or a message.
    #[derive(Debug)]
    pub struct ProviderInstance {
        /// Size of this structure as the host knows it.
        pub struct_size: usize,
        /// The provider's context (first argument of every provider-table slot).
        pub ctx: Obj,
        /// The provider's root table.
        pub ops: *const ProviderTable,
        /// Where init may leave an error message.
        pub err: ErrBuf,
    }
}

// SAFETY: a PluginEntry is immutable; its name points to a 'static string and its init
// function may be called from any thread.
unsafe impl Sync for PluginEntry {}
// SAFETY: as for `Sync`: immutable data and 'static pointers.
unsafe impl Send for PluginEntry {}

impl ProviderInstance {
    /// An empty out-parameter of this build's size, with a message buffer.
    pub fn empty(err: ErrBuf) -> ProviderInstance {
        ProviderInstance {
            struct_size: std::mem::size_of::<ProviderInstance>(),
            ctx: std::ptr::null_mut(),
            ops: std::ptr::null(),
            err,
        }
    }
}

/// Every boundary structure of the interface (entry, host and ops tables, raw forms).
const ENTRY_LAYOUTS: &[&StructDesc] = &[&PluginEntry::LAYOUT, &ProviderInstance::LAYOUT];

const LISTS: &[&[&StructDesc]] = &[ENTRY_LAYOUTS, tables::LAYOUTS, raw::LAYOUTS, wire::LAYOUTS];
const N_LAYOUTS: usize = crate::const_list::total_len(LISTS);

/// Every boundary structure's layout descriptor, in a fixed order.
pub const ALL_LAYOUTS: [&StructDesc; N_LAYOUTS] =
    crate::const_list::concat(LISTS, &PluginEntry::LAYOUT);

/// The layout fingerprint of the interface as of minor `minor` (see [`layout`]).
pub const fn fingerprint_for_minor(minor: u32) -> u64 {
    hash_all(&ALL_LAYOUTS, minor)
}

/// The layout fingerprint of this build's interface.
pub const FINGERPRINT: u64 = fingerprint_for_minor(ABI_MINOR);

/// The fingerprint of every minor of this major, computed at compile time: hashing the
/// layouts is thousands of instructions per table, and [`check_entry`] runs at every
/// provider's initialisation.
const FINGERPRINTS: [u64; ABI_MINOR as usize + 1] = {
    let mut out = [0u64; ABI_MINOR as usize + 1];
    let mut minor = 0;
    while minor <= ABI_MINOR {
        out[minor as usize] = fingerprint_for_minor(minor);
        minor += 1;
    }
    out
};

/// Why an entry was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbiMismatch {
    /// Another major, or a newer minor.
    Version {
        /// What this core accepts: (major, newest minor).
        wanted: (u32, u32),
        /// What the plugin was built for.
        found: (u32, u32),
    },
    /// The layout fingerprint differs (tables or structures changed without a version
    /// change, or a different build of the interface).
    Layout {
        /// The fingerprint this core computes for the plugin's minor.
        wanted: u64,
        /// The plugin's.
        found: u64,
    },
}

impl fmt::Display for AbiMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AbiMismatch::Version { wanted, found } if wanted.0 != found.0 => {
                write!(
                    f,
                    "ABI {}.{} found, {}.x wanted",
                    found.0, found.1, wanted.0
                )
            }
            AbiMismatch::Version { wanted, found } => write!(
                f,
                "ABI {}.{} found, {}.{} or older wanted",
                found.0, found.1, wanted.0, wanted.1
            ),
            AbiMismatch::Layout { wanted, found } => write!(
                f,
                "table layout fingerprint {found:#018x} found, {wanted:#018x} wanted"
            ),
        }
    }
}

impl std::error::Error for AbiMismatch {}

/// Decide whether an entry can be used, reading only its first three fields. No plugin
/// code runs. (The fingerprint fixes the entry's layout for its minor; `size` is
/// informational.)
pub fn check_entry(e: &PluginEntry) -> Result<(), AbiMismatch> {
    if e.abi_major != ABI_MAJOR || e.abi_minor > ABI_MINOR {
        return Err(AbiMismatch::Version {
            wanted: (ABI_MAJOR, ABI_MINOR),
            found: (e.abi_major, e.abi_minor),
        });
    }
    // In range: `abi_minor <= ABI_MINOR` was checked above.
    let wanted = FINGERPRINTS[e.abi_minor as usize];
    if e.fingerprint != wanted {
        return Err(AbiMismatch::Layout {
            wanted,
            found: e.fingerprint,
        });
    }
    Ok(())
}

/// Builds a provider's entry at compile time.
struct EntryOf<P>(std::marker::PhantomData<P>);

/// Longest provider name an entry can carry (bytes, without the NUL).
pub const MAX_NAME_LEN: usize = 63;

const fn nul_terminated(name: &str) -> [u8; MAX_NAME_LEN + 1] {
    let b = name.as_bytes();
    assert!(b.len() <= MAX_NAME_LEN, "provider name too long");
    let mut out = [0u8; MAX_NAME_LEN + 1];
    let mut i = 0;
    while i < b.len() {
        assert!(b[i] != 0, "provider name contains NUL");
        out[i] = b[i];
        i += 1;
    }
    out
}

impl<P: Provider> EntryOf<P> {
    const NAME: &'static [u8; MAX_NAME_LEN + 1] = &nul_terminated(P::NAME);
    const ENTRY: &'static PluginEntry = &PluginEntry {
        abi_major: ABI_MAJOR,
        abi_minor: ABI_MINOR,
        fingerprint: FINGERPRINT,
        size: std::mem::size_of::<PluginEntry>(),
        name: Self::NAME.as_ptr() as *const c_char,
        version: P::VERSION.to_raw(),
        kind: P::KIND as u32,
        priority: P::PRIORITY,
        init: adapt::plugin_init::<P>,
    };
}

/// The entry of provider `P`: what [`export_provider!`](crate::export_provider) exports
/// and what a linked-in registration passes to `ProviderHandle::init`.
pub const fn entry_for<P: Provider>() -> &'static PluginEntry {
    EntryOf::<P>::ENTRY
}

/// Export provider `$ty` from a cdylib: defines the `#[no_mangle]` static
/// `OFI_RS_PLUGIN_ENTRY` the loader looks for. Use once per plugin crate (a complete
/// example is `examples/vendor-provider`):
///
/// ```text
/// ofi_core::export_provider!(my_crate::MyProvider);
/// ```
#[macro_export]
macro_rules! export_provider {
    ($ty:ty) => {
        /// The ofi-rs plugin entry of this library.
        #[no_mangle]
        pub static OFI_RS_PLUGIN_ENTRY: $crate::abi::PluginEntry = *$crate::abi::entry_for::<$ty>();
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_with(major: u32, minor: u32, fp: u64) -> PluginEntry {
        /// An init that is never called.
        ///
        /// # Safety
        /// None beyond the slot's signature: no argument is dereferenced.
        unsafe extern "C" fn never(_: *const HostTable, _: *mut ProviderInstance) -> i32 {
            unreachable!("check_entry must not run plugin code")
        }
        PluginEntry {
            abi_major: major,
            abi_minor: minor,
            fingerprint: fp,
            size: std::mem::size_of::<PluginEntry>(),
            name: c"test".as_ptr(),
            version: 0,
            kind: 0,
            priority: 0,
            init: never,
        }
    }

    #[test]
    fn accepts_own_interface() {
        assert_eq!(
            check_entry(&entry_with(ABI_MAJOR, ABI_MINOR, FINGERPRINT)),
            Ok(())
        );
    }

    #[test]
    fn accepts_every_older_minor() {
        // Minor 1 appended the multicast slots (`join`, `mc_close`) to the endpoint
        // table: plugins built for minor 0 still load, with their own fingerprint.
        for minor in 0..ABI_MINOR {
            let fp = fingerprint_for_minor(minor);
            assert_ne!(fp, FINGERPRINT, "minor {minor} fingerprint");
            assert_eq!(check_entry(&entry_with(ABI_MAJOR, minor, fp)), Ok(()));
        }
    }

    #[test]
    fn refuses_other_major_with_one_line() {
        let e = check_entry(&entry_with(3, 0, FINGERPRINT)).unwrap_err();
        assert_eq!(
            e,
            AbiMismatch::Version {
                wanted: (2, ABI_MINOR),
                found: (3, 0)
            }
        );
        assert_eq!(e.to_string(), "ABI 3.0 found, 2.x wanted");
    }

    #[test]
    fn refuses_a_plugin_built_before_the_host_split() {
        // What a plugin built against the core that still carried the host exports:
        // interface 1.2 with the 1.2 layout fingerprint (the same tables as 2.2). It
        // would pass the layout check; the major alone refuses it.
        let e = check_entry(&entry_with(1, 2, fingerprint_for_minor(2))).unwrap_err();
        assert_eq!(
            e,
            AbiMismatch::Version {
                wanted: (ABI_MAJOR, ABI_MINOR),
                found: (1, 2)
            }
        );
        assert_eq!(e.to_string(), "ABI 1.2 found, 2.x wanted");
    }

    #[test]
    fn refuses_newer_minor() {
        let e = check_entry(&entry_with(ABI_MAJOR, ABI_MINOR + 1, FINGERPRINT)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "ABI 2.{} found, 2.{ABI_MINOR} or older wanted",
                ABI_MINOR + 1
            )
        );
    }

    #[test]
    fn refuses_other_fingerprint_with_one_line() {
        let e = check_entry(&entry_with(ABI_MAJOR, 0, 0x1234)).unwrap_err();
        let s = e.to_string();
        assert!(
            s.starts_with("table layout fingerprint 0x0000000000001234 found, 0x"),
            "{s}"
        );
        assert!(s.ends_with(" wanted") && !s.contains('\n'), "{s}");
    }

    #[test]
    fn fingerprint_is_stable_within_a_build_and_covers_everything() {
        assert_eq!(FINGERPRINT, fingerprint_for_minor(ABI_MINOR));
        assert_ne!(FINGERPRINT, 0);
        assert_eq!(ALL_LAYOUTS.len(), N_LAYOUTS);
        assert!(ALL_LAYOUTS.iter().any(|l| l.name == "MsgTable"));
        assert!(ALL_LAYOUTS.iter().any(|l| l.name == "RawInfo"));
        assert!(ALL_LAYOUTS.iter().any(|l| l.name == "HostTable"));
        // Names are unique, so no structure is hashed twice.
        for (i, a) in ALL_LAYOUTS.iter().enumerate() {
            for b in &ALL_LAYOUTS[i + 1..] {
                assert_ne!(a.name, b.name);
            }
        }
    }

    /// The fingerprints of interface 2.0, 2.1 and 2.2 as computed before the tables were
    /// generated from the lists of operations (`abi/ops`): a generated layout identical
    /// to the hand-written one must hash to the same values, or plugins built before
    /// would be refused. 2.3 (a passive endpoint's `control`) and 2.4 (the NIC's bus) are
    /// pinned as first built.
    #[test]
    fn fingerprints_are_pinned() {
        // The fingerprint of each minor, in order.
        let pinned: [u64; 5] = [
            0x332b_e2b9_b141_8ec8,
            0x6ff7_175c_5757_6c9c,
            0x0512_9866_4a3a_b381,
            0xd6ef_f8e1_dfdf_df9b,
            0x1ef9_bb48_a2a8_bd5d,
        ];
        for (minor, want) in (0..).zip(pinned) {
            assert_eq!(fingerprint_for_minor(minor), want, "minor {minor}");
        }
        assert_eq!(ABI_MINOR, 4, "a new minor pins its own value here");
    }

    #[test]
    fn entry_layout_prefix_is_fixed() {
        assert_eq!(std::mem::offset_of!(PluginEntry, abi_major), 0);
        assert_eq!(std::mem::offset_of!(PluginEntry, abi_minor), 4);
        assert_eq!(std::mem::offset_of!(PluginEntry, fingerprint), 8);
    }
}
