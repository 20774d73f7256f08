//! The ops tables: one `#[repr(C)]` table of `unsafe extern "C"` function pointers per
//! object class, each beginning with its own `size`.
//!
//! # Rules (part of the interface)
//!
//! - Every slot takes the provider's opaque object pointer ([`Obj`]) first. Buffers are
//!   pointer + length, contexts `usize`, fabric addresses `u64`, enumerations their C
//!   `u32` value, flags their C bits.
//! - Results: `i32` status (0 or `-FI_x`) or `isize` (a non-negative count, or `-FI_x`).
//!   Control slots (open, close, bind, enable, connect, …) take a last `err: *mut ErrBuf`
//!   where the callee may leave a one-line message; data-path slots do not.
//! - `size` is the size of the table the producer was built with. **Tables only grow at
//!   the end**: a new slot is appended (declared `fn @N name(...)` with N the interface
//!   minor that added it), never inserted, removed, renamed or retyped. A caller checks
//!   `size` before using a slot (`call_slot!`); a slot
//!   beyond the producer's table is `-FI_ENOSYS`, the rule the C library applies to its
//!   own ops tables. Changing anything but appending changes the layout fingerprint, and
//!   plugins built before the change are refused at load.
//! - Slots are never null. A provider that lacks an operation fills the slot with one
//!   that returns `-FI_ENOSYS` (the adapters do this; [`MsgTable::ENOSYS`] etc. are
//!   ready-made all-`ENOSYS` tables). A group table of an endpoint may be null in
//!   [`RawEp`](crate::abi::raw::RawEp): the host then uses the all-`ENOSYS` table.
//! - No slot may unwind: the adapters catch panics and return `-FI_EOTHER`.
//!
//! Every table (and every raw structure, see [`crate::abi::raw`]) is declared through one
//! macro that also emits its layout descriptor (`LAYOUT`);
//! [`FINGERPRINT`](crate::abi::FINGERPRINT) is the hash of all of them.

use std::ffi::c_void;

use crate::abi::layout::StructDesc;
use crate::abi::raw::{ErrBuf, Obj, RawInfo, RawStr};
use crate::abi::wire::{RawGetinfoRequest, RawGetinfoResult, RawHostFabric};

/// The result types a slot may have; lets generated stubs return `-code`.
pub trait SlotRet: Copy {
    /// The value that reports error `code` (positive `FI_*` value).
    fn from_errno(code: i32) -> Self;
}

impl SlotRet for i32 {
    #[inline(always)]
    fn from_errno(code: i32) -> i32 {
        -code
    }
}

impl SlotRet for isize {
    #[inline(always)]
    fn from_errno(code: i32) -> isize {
        -(code as isize)
    }
}

impl SlotRet for () {
    #[inline(always)]
    fn from_errno(_code: i32) {}
}

/// `FI_ENOSYS`.
pub const ENOSYS: i32 = 38;
/// `FI_EBADF`: what every slot of a closed handle's table returns.
pub const EBADF: i32 = 9;

/// Declares ops tables: `#[repr(C)]`, `size` first, one `unsafe extern "C" fn` field per
/// slot, plus `LAYOUT` (descriptor), `filled::<CODE>()` (every slot returns `-CODE`),
/// `ENOSYS` and `CLOSED` (all `-FI_ENOSYS` / all `-FI_EBADF`).
///
/// Slot syntax: `fn name(arg: Type, ...) -> Ret;`, or `fn @N name(...)` for a slot
/// appended by interface minor N.
macro_rules! abi_table {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                fn $(@ $since:literal)? $slot:ident ( $($arg:ident : $argty:ty),* $(,)? ) -> $ret:ty;
            )*
        }
    )*) => {$(
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name {
            /// Size of this table as its producer built it: slots that end beyond it are
            /// absent (`-FI_ENOSYS`).
            pub size: usize,
            $(
                $(#[$fmeta])*
                pub $slot: unsafe extern "C" fn($($argty),*) -> $ret,
            )*
        }

        impl $name {
            /// The layout descriptor of this table (see [`crate::abi::layout`]).
            pub const LAYOUT: $crate::abi::layout::StructDesc = $crate::abi::layout::StructDesc {
                name: stringify!($name),
                size: ::core::mem::size_of::<$name>(),
                align: ::core::mem::align_of::<$name>(),
                fields: &[
                    $crate::abi::layout::FieldDesc {
                        name: "size",
                        ty: "usize",
                        offset: 0,
                        size: ::core::mem::size_of::<usize>(),
                        since: 0,
                    },
                    $(
                        $crate::abi::layout::FieldDesc {
                            name: stringify!($slot),
                            ty: stringify!(fn($($argty),*) -> $ret),
                            offset: ::core::mem::offset_of!($name, $slot),
                            size: ::core::mem::size_of::<usize>(),
                            since: $crate::abi::layout::since!($($since)?),
                        },
                    )*
                ],
            };

            /// A full-size table whose every slot returns `-CODE` (or nothing).
            pub const fn filled<const CODE: i32>() -> $name {
                $name {
                    size: ::core::mem::size_of::<$name>(),
                    $(
                        $slot: {
                            /// The slot of a `filled` table: returns `-C`.
                            ///
                            /// # Safety
                            /// None beyond the slot's signature: no argument is dereferenced.
                            #[allow(unused_variables)]
                            unsafe extern "C" fn stub<const C: i32>($($arg: $argty),*) -> $ret {
                                <$ret as $crate::abi::tables::SlotRet>::from_errno(C)
                            }
                            stub::<CODE>
                        },
                    )*
                }
            }

            /// A table whose every slot is `-FI_ENOSYS`: stands in for a group the
            /// provider does not have.
            pub const ENOSYS: &'static $name = &$name::filled::<{ $crate::abi::tables::ENOSYS }>();

            /// A table whose every slot is `-FI_EBADF`: what a handle uses once closed.
            pub const CLOSED: &'static $name = &$name::filled::<{ $crate::abi::tables::EBADF }>();
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($name)).field("size", &self.size).finish_non_exhaustive()
            }
        }
    )*};
}

/// Call slot `$slot` of table `$tbl` (a `&Table`) if the producer's table has it, else
/// evaluate to `-FI_ENOSYS`. Must be used inside an `unsafe` block: it calls a foreign
/// function pointer.
///
/// `call_slot!(table_ref, TableType.slot(args...))`
macro_rules! call_slot {
    ($tbl:expr, $T:ident . $slot:ident ( $($arg:expr),* $(,)? )) => {{
        let t: &$T = $tbl;
        if t.size >= ::core::mem::offset_of!($T, $slot) + ::core::mem::size_of::<usize>() {
            (t.$slot)($($arg),*)
        } else {
            $crate::abi::tables::SlotRet::from_errno($crate::abi::tables::ENOSYS)
        }
    }};
}

#[allow(unused_imports)]
pub(crate) use abi_table;
pub(crate) use call_slot;

abi_table! {
    /// What the host offers every provider (see [`crate::abi::host`]).
    pub struct HostTable {
        /// The log sink (`crate::log::LogSinkFn`).
        fn log(level: u8, prov: *const u8, prov_len: usize, subsys: *const u8, subsys_len: usize, msg: *const u8, msg_len: usize) -> ();
        /// The most detailed log level the host wants (0 = none … 5 = trace).
        fn log_level() -> i32;
        /// Declare a parameter (`ty`: 0 string, 1 int, 2 size, 3 bool).
        fn param_declare(prov: RawStr, name: RawStr, ty: u32, help: RawStr, default: RawStr, err: *mut ErrBuf) -> i32;
        /// Read a parameter as text: 1 set (text in `buf`, length in `len`; if `len`
        /// exceeds `cap` nothing was copied, ask again), 0 unset, `-FI_x` error.
        fn param_get_str(prov: RawStr, name: RawStr, buf: *mut u8, cap: usize, len: *mut usize, err: *mut ErrBuf) -> i32;
        /// Read an Int parameter: 1 set, 0 unset, `-FI_x` error.
        fn param_get_int(prov: RawStr, name: RawStr, out: *mut i64, err: *mut ErrBuf) -> i32;
        /// Read a Size parameter.
        fn param_get_size(prov: RawStr, name: RawStr, out: *mut usize, err: *mut ErrBuf) -> i32;
        /// Read a Bool parameter (`out` 0 or 1).
        fn param_get_bool(prov: RawStr, name: RawStr, out: *mut u8, err: *mut ErrBuf) -> i32;
        /// getinfo across the host's providers (`core_only` != 0: core providers only,
        /// for layering). The result is owned by the host until `free_getinfo`.
        fn getinfo(req: *const RawGetinfoRequest, core_only: u32, out: *mut RawGetinfoResult) -> i32;
        /// Free a result of `getinfo`.
        fn free_getinfo(out: *mut RawGetinfoResult) -> i32;
        /// Open a fabric through the host's registry.
        fn open_fabric(info: *const RawInfo, context: usize, out: *mut RawHostFabric, err: *mut ErrBuf) -> i32;
        /// Close a fabric `open_fabric` returned (`-FI_EBUSY` while it has children).
        fn fabric_close(keep: *mut c_void, err: *mut ErrBuf) -> i32;
        /// Drop the host's hold on a fabric `open_fabric` returned (closing it if it is
        /// still open).
        fn fabric_release(keep: *mut c_void) -> i32;
        /// Hand a hook provider the fabric it wraps (minor 2): while the host opens a
        /// hook's fabric (`FI_HOOK`), this returns the fabric beneath it — the real
        /// provider's, or the previous hook's — exactly once, in the form of
        /// `open_fabric` (released through `fabric_close` / `fabric_release`).
        /// `-FI_ENOENT` outside a hook's fabric open or when already taken.
        fn @2 hook_inner(out: *mut RawHostFabric, err: *mut ErrBuf) -> i32;
    }
}

/// The four data tables of an endpoint (`MsgTable`, `TaggedTable`, `RmaTable`,
/// `AtomicTable`), one slot per entry of the list of data operations
/// ([`for_each_ep_data_op!`](crate::for_each_ep_data_op)), in its order, then the
/// group's `queries`. Each slot takes the endpoint object and the entry's C arguments
/// and returns `isize` (0 or `-FI_x`).
macro_rules! data_tables {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident [$($since:literal)?] $kind:tt
            ($($c:ident : $cty:ty $(as $hty:ty)?),*) $p:tt $low:tt;)*
    } { $($(#[$qdoc:meta])* $qslot:ident / $qname:ident;)* })*) => {
        abi_table! {$(
            #[doc = concat!("The `", stringify!($group), "` data operations of an endpoint (generated from [`for_each_ep_data_op!`](crate::for_each_ep_data_op)).")]
            pub struct $Table {
                $(
                    $(#[$doc])*
                    fn $(@ $since)? $name(ep: Obj, $($c: $cty),*) -> isize;
                )*
                $(
                    $(#[$qdoc])*
                    fn $qslot(ep: Obj, datatype: u32, op: u32, count: *mut usize) -> i32;
                )*
            }
        )*}
    };
}

crate::for_each_ep_data_op!(data_tables);

// The tables of the classes whose operations are listed in `abi::ctl_ops`.
crate::for_each_ep_ctl_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_cm_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_cq_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_eq_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_cntr_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_wait_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_fabric_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_domain_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_pep_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_av_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_mr_op!(crate::abi::ctl_ops::ctl_table);
crate::for_each_provider_op!(crate::abi::ctl_ops::ctl_table);

/// Every table's layout, for the fingerprint.
pub const LAYOUTS: &[&StructDesc] = &[
    &ProviderTable::LAYOUT,
    &FabricTable::LAYOUT,
    &DomainTable::LAYOUT,
    &EpTable::LAYOUT,
    &CmTable::LAYOUT,
    &MsgTable::LAYOUT,
    &TaggedTable::LAYOUT,
    &RmaTable::LAYOUT,
    &AtomicTable::LAYOUT,
    &PepTable::LAYOUT,
    &CqTable::LAYOUT,
    &EqTable::LAYOUT,
    &CntrTable::LAYOUT,
    &AvTable::LAYOUT,
    &MrTable::LAYOUT,
    &WaitTable::LAYOUT,
    &HostTable::LAYOUT,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::layout::fingerprint_of;

    #[allow(dead_code)]
    mod order_a {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant A.
            pub struct T {
                /// first
                fn first(o: Obj, len: usize) -> isize;
                /// second
                fn second(o: Obj) -> i32;
            }
        }
    }
    #[allow(dead_code)]
    mod order_b {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant B: slots swapped.
            pub struct T {
                /// second
                fn second(o: Obj) -> i32;
                /// first
                fn first(o: Obj, len: usize) -> isize;
            }
        }
    }
    #[allow(dead_code)]
    mod renamed {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant: `second` renamed.
            pub struct T {
                /// first
                fn first(o: Obj, len: usize) -> isize;
                /// renamed
                fn other(o: Obj) -> i32;
            }
        }
    }
    #[allow(dead_code)]
    mod retyped {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant: `first` takes a u32.
            pub struct T {
                /// first
                fn first(o: Obj, len: u32) -> isize;
                /// second
                fn second(o: Obj) -> i32;
            }
        }
    }
    #[allow(dead_code)]
    mod args_renamed {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant: argument names differ only.
            pub struct T {
                /// first
                fn first(object: Obj, length: usize) -> isize;
                /// second
                fn second(object: Obj) -> i32;
            }
        }
    }
    #[allow(dead_code)]
    mod grown {
        use crate::abi::raw::Obj;
        crate::abi::tables::abi_table! {
            /// Variant: a slot appended by minor 1.
            pub struct T {
                /// first
                fn first(o: Obj, len: usize) -> isize;
                /// second
                fn second(o: Obj) -> i32;
                /// third
                fn @1 third(o: Obj) -> i32;
            }
        }
    }

    #[test]
    fn fingerprint_tracks_order_names_and_signatures() {
        let a = fingerprint_of(&order_a::T::LAYOUT, 0);
        assert_ne!(a, fingerprint_of(&order_b::T::LAYOUT, 0), "order");
        assert_ne!(a, fingerprint_of(&renamed::T::LAYOUT, 0), "name");
        assert_ne!(a, fingerprint_of(&retyped::T::LAYOUT, 0), "signature");
        assert_eq!(
            a,
            fingerprint_of(&args_renamed::T::LAYOUT, 0),
            "argument names"
        );
        // An appended slot leaves the old minor's fingerprint alone.
        assert_eq!(a, fingerprint_of(&grown::T::LAYOUT, 0));
        assert_ne!(a, fingerprint_of(&grown::T::LAYOUT, 1));
    }

    #[test]
    fn descriptor_lists_every_slot_with_offsets() {
        let l = &MsgTable::LAYOUT;
        assert_eq!(l.fields.len(), 10);
        assert_eq!(l.fields[0].name, "size");
        assert_eq!(l.fields[1].name, "send");
        assert_eq!(l.fields[1].offset, 8);
        assert!(l.fields[1].ty.contains("isize"));
        assert_eq!(l.size, 8 * 10);
    }

    #[test]
    fn a_short_table_yields_enosys() {
        let mut t = *MsgTable::ENOSYS;
        /// A test `inject` slot that succeeds.
        ///
        /// # Safety
        /// None beyond the slot's signature: no argument is dereferenced.
        unsafe extern "C" fn ok_inject(_: Obj, _: *const u8, _: usize, _: u64) -> isize {
            0
        }
        t.inject = ok_inject;
        // SAFETY: the slots called are our own functions; no pointer is dereferenced.
        let full = unsafe {
            call_slot!(
                &t,
                MsgTable.inject(std::ptr::null_mut(), std::ptr::null(), 0, 0)
            )
        };
        assert_eq!(full, 0);
        // A producer built before `inject` existed: its size ends before the slot.
        t.size = std::mem::offset_of!(MsgTable, inject);
        // SAFETY: as above; the slot is not even called.
        let short = unsafe {
            call_slot!(
                &t,
                MsgTable.inject(std::ptr::null_mut(), std::ptr::null(), 0, 0)
            )
        };
        assert_eq!(short, -38);
        // Slots before the end still work.
        // SAFETY: the ENOSYS stub ignores its arguments.
        let send = unsafe {
            call_slot!(
                &t,
                MsgTable.send(
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    0,
                    std::ptr::null_mut(),
                    0,
                    0
                )
            )
        };
        assert_eq!(send, -38);
        // SAFETY: the CLOSED stub ignores its arguments.
        let closed = unsafe {
            call_slot!(
                MsgTable::CLOSED,
                MsgTable.inject(std::ptr::null_mut(), std::ptr::null(), 0, 0)
            )
        };
        assert_eq!(closed, -9);
    }
}
