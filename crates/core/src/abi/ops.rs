//! The one list of an endpoint's data operations, and what is generated from it.
//!
//! Every data operation of an endpoint (messages, tagged messages, RMA, atomics) is
//! declared **once**, in [`for_each_ep_data_op!`](crate::for_each_ep_data_op). That
//! macro is an "x-macro": `for_each_ep_data_op!(gen)` expands to `gen! { …the list… }`,
//! and each generator turns the list into one of:
//!
//! | generated | generator | where |
//! | --- | --- | --- |
//! | the ABI slot of each operation and its layout-fingerprint entry | `data_tables!` | `abi/tables.rs` |
//! | the plugin-side trampolines and the `Adapt::<F>::MSG` … `ATOMIC` tables | `data_trampolines!`, `data_table_consts!` | `abi/adapt.rs` |
//! | the `EndpointOps` method with its `FI_ENOSYS` default | `data_trait_methods!` | `provider.rs` |
//! | the host-side wrapper `Endpoint::tsendv` … | `data_wrappers!` | `ep.rs` |
//! | the hook's `Op` enum, names and kinds, its forwarders and the fault hook's replay | `hook_ops!`, `hook_forwarders!`, `hook_replay!` | `ofi-hook` |
//! | the data calls of kit's `endpoint_data_ops!` | `__kit_data_methods!` | `ofi-kit` |
//!
//! Adding an operation is one entry here plus its implementation in the providers that
//! support it (a provider without it answers `FI_ENOSYS` through the trait default).
//!
//! # Grammar of the list
//!
//! The list is made of groups, one per ops table, in table order:
//!
//! ```text
//! group_field TableType {
//!     entry*
//! } [+ queries { fn slot(arg: Type, …) -> Ret; … }]
//! ```
//!
//! `group_field` is the field of [`RawEp`](crate::abi::raw::RawEp) (and of
//! `ofi_core::Endpoint`) that holds the table. The optional `queries` are further slots
//! of the same table that are not data operations (the `*atomicvalid` queries); they
//! are declared in the table after the entries, and written by hand elsewhere.
//!
//! One entry:
//!
//! ```text
//! /// doc (becomes the doc of the slot, the trait method and the host wrapper)
//! name / host_name / Variant [@N] [family flag*]
//!     (c_arg: CType [as HostType], …)
//!     => (prov_arg: ProvType = expression over the c_args, …)
//!     <= (expression over the prov_args, …);
//! ```
//!
//! - `name` is the C API's name without `fi_` and the name of the slot and of the
//!   [`EndpointOps`](crate::provider::EndpointOps) method; `host_name` the name of the
//!   public `Endpoint` method (`inject_raw` where a safe `inject` taking a slice
//!   exists); `Variant` the hook's `Op` variant.
//! - `@N` (optional): the interface minor that appended this slot (none for the
//!   original layout).
//! - `[family flag*]`: what the operation is ([`OpKind`]): the family (`send`, `recv`,
//!   `read`, `write`, `atomic`, `fetch`, `compare`), then any of `tagged` (tag
//!   matching), `data` (carries remote CQ data), `inject` (no completion; the buffer
//!   is free on return), `msg` (a `*msg` call: its own flags).
//! - The first list is the C slot's arguments after the object pointer (the slot
//!   returns `isize`: 0 or `-FI_x`). `as HostType` makes the host wrapper take a typed
//!   value that it lowers with `to_raw()` (datatype and operation of atomics).
//! - The second list is the provider method's arguments (it returns `Result<()>`);
//!   each is computed from the C arguments by its expression, inside `unsafe` and a
//!   function returning `Result`, so `?` rejects a bad argument (`FI_EINVAL`).
//! - The third list lowers the provider arguments back to the host wrapper's
//!   arguments (what a hook does to call the endpoint beneath it).
//!
//! The provider arguments are named from a fixed vocabulary ([`DataArgs`] has one field
//! per name): `buf len count desc dest src context iov msg flags data tag ignore addr key
//! datatype op result result_desc resultv compare compare_desc comparev`. That is how
//! the hooks and kit read an operation generically.
//!
//! # Example
//!
//! ```
//! // A generator that lists every operation's C name and table.
//! macro_rules! names {
//!     ($($group:ident $Table:ident {
//!         $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident [$($kind:ident)+]
//!             ($($c:ident : $cty:ty $(as $hty:ty)?),*)
//!             => ($($p:ident : $pty:ty = $from:expr),*)
//!             <= ($($low:expr),*);)*
//!     } $(+ queries { $($q:tt)* })?)*) => {
//!         &[$($((stringify!($Table), stringify!($name)),)*)*]
//!     };
//! }
//! let all: &[(&str, &str)] = ofi_core::for_each_ep_data_op!(names);
//! assert!(all.contains(&("RmaTable", "inject_writedata")));
//! assert_eq!(all.len(), 37);
//! ```
//!
//! # Invariants
//!
//! - The order of the entries is the order of the slots in each table. Tables only
//!   grow at the end: a new operation is appended to its group, marked
//!   `name / host / Variant @N [kind]` with N the interface minor that added it; the
//!   layout fingerprint covers every slot's name and signature, so a reordered or
//!   retyped entry cannot load against an older build.
//! - The host wrapper, the trampoline and the trait method of one entry take exactly
//!   the arguments listed; nothing is allocated or converted on the host side beyond
//!   the listed `to_raw()` of typed arguments.

use std::ffi::c_void;

use crate::abi::raw::{Ioc, Iov, Msg, MsgAtomic, MsgRma, MsgTagged};
use crate::enums::{AtomicOp, Datatype};
use crate::error::{Errno, Error, Result};
use crate::flags::OpFlags;
use crate::provider::Desc;

/// The family of a data operation (the first word of its `[kind]` in the list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpFamily {
    /// A message send (`send*`, `inject*`, `tsend*`, `tinject*`).
    Send,
    /// A posted receive (`recv*`, `trecv*`).
    Recv,
    /// An RMA read.
    Read,
    /// An RMA write.
    Write,
    /// A base atomic.
    Atomic,
    /// A fetching atomic.
    Fetch,
    /// A compare atomic.
    Compare,
}

/// What a data operation is: its family and flags (see the list's grammar).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpKind {
    /// The family.
    pub family: OpFamily,
    /// Tag matching (the `t*` calls).
    pub tagged: bool,
    /// Carries remote CQ data by its signature (`*data` calls; `*msg` calls decide
    /// with `FI_REMOTE_CQ_DATA`).
    pub data: bool,
    /// An inject: no completion, the buffer may be reused on return.
    pub inject: bool,
    /// A `*msg` call (carries its own flags).
    pub msg: bool,
}

macro_rules! kind_ctor {
    ($($(#[$m:meta])* $f:ident => $fam:ident;)*) => {$(
        $(#[$m])*
        pub const fn $f() -> OpKind {
            OpKind { family: OpFamily::$fam, tagged: false, data: false, inject: false, msg: false }
        }
    )*};
}

impl OpKind {
    kind_ctor! {
        /// A send.
        send => Send;
        /// A receive.
        recv => Recv;
        /// An RMA read.
        read => Read;
        /// An RMA write.
        write => Write;
        /// A base atomic.
        atomic => Atomic;
        /// A fetching atomic.
        fetch => Fetch;
        /// A compare atomic.
        compare => Compare;
    }

    /// With tag matching.
    pub const fn tagged(self) -> OpKind {
        OpKind {
            tagged: true,
            ..self
        }
    }
    /// Carrying remote CQ data.
    pub const fn data(self) -> OpKind {
        OpKind { data: true, ..self }
    }
    /// An inject.
    pub const fn inject(self) -> OpKind {
        OpKind {
            inject: true,
            ..self
        }
    }
    /// A `*msg` call.
    pub const fn msg(self) -> OpKind {
        OpKind { msg: true, ..self }
    }
    /// A receive (completes to the receive CQ).
    pub const fn is_rx(self) -> bool {
        matches!(self.family, OpFamily::Recv)
    }
    /// One of the three atomic families.
    pub const fn is_atomic(self) -> bool {
        matches!(
            self.family,
            OpFamily::Atomic | OpFamily::Fetch | OpFamily::Compare
        )
    }
}

/// The [`OpKind`] of a `[family flag*]` list: `op_kind!(send tagged inject)`.
#[doc(hidden)]
#[macro_export]
macro_rules! op_kind {
    ($family:ident $($flag:ident)*) => {
        $crate::abi::ops::OpKind::$family() $(.$flag())*
    };
}

/// The type a host wrapper takes for a C argument: the C type, or the `as` type.
#[doc(hidden)]
#[macro_export]
macro_rules! host_arg_ty {
    ($cty:ty) => {
        $cty
    };
    ($cty:ty, $hty:ty) => {
        $hty
    };
}

/// A host wrapper's argument lowered to the C slot's type.
#[doc(hidden)]
#[macro_export]
macro_rules! host_arg_to_c {
    ($arg:ident) => {
        $arg
    };
    ($arg:ident, $hty:ty) => {
        $arg.to_raw()
    };
}

/// Conversions the list's expressions use (C arguments to provider arguments and back).
pub mod conv {
    use super::*;

    /// A slice of `n` entries at `p`; `FI_EINVAL` for a null `p` with `n > 0`.
    ///
    /// # Safety
    /// `p` is null or valid for `n` entries for `'a`.
    #[inline(always)]
    pub unsafe fn slice<'a, T>(p: *const T, n: usize) -> Result<&'a [T]> {
        if n == 0 {
            return Ok(&[]);
        }
        if p.is_null() {
            return Err(Error::new(Errno::EINVAL, "null iov array"));
        }
        // SAFETY: non-null and valid for `n` entries (contract).
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }

    /// A descriptor array of `n` entries; null (descriptors absent) is empty.
    ///
    /// # Safety
    /// As [`slice()`].
    #[inline(always)]
    pub unsafe fn descs<'a>(p: *const Desc, n: usize) -> &'a [Desc] {
        if p.is_null() || n == 0 {
            &[]
        } else {
            // SAFETY: non-null and valid for `n` entries (contract).
            unsafe { std::slice::from_raw_parts(p, n) }
        }
    }

    /// A message; `FI_EINVAL` when null.
    ///
    /// # Safety
    /// `p` is null or valid for `'a`.
    #[inline(always)]
    pub unsafe fn msg<'a, T>(p: *const T) -> Result<&'a T> {
        if p.is_null() {
            return Err(Error::new(Errno::EINVAL, "null message"));
        }
        // SAFETY: non-null and valid (contract).
        Ok(unsafe { &*p })
    }

    /// Operation flags from their C bits.
    #[inline(always)]
    pub fn flags(bits: u64) -> OpFlags {
        OpFlags::from_bits_retain(bits)
    }

    /// An atomic datatype from its C value; `FI_EINVAL` if unknown.
    #[inline(always)]
    pub fn datatype(raw: u32) -> Result<Datatype> {
        Datatype::from_raw(raw).ok_or_else(|| Error::new(Errno::EINVAL, "unknown atomic datatype"))
    }

    /// An atomic operation from its C value; `FI_EINVAL` if unknown.
    #[inline(always)]
    pub fn atomic_op(raw: u32) -> Result<AtomicOp> {
        AtomicOp::from_raw(raw).ok_or_else(|| Error::new(Errno::EINVAL, "unknown atomic operation"))
    }

    /// A descriptor slice as the C array pointer (null when empty).
    #[inline(always)]
    pub fn desc_ptr(desc: &[Desc]) -> *const Desc {
        if desc.is_empty() {
            std::ptr::null()
        } else {
            desc.as_ptr()
        }
    }
}

/// The descriptors of an operation: none, one, or one per buffer.
#[derive(Clone, Copy, Debug, Default)]
pub enum DescArg<'a> {
    /// Not an argument of this operation.
    #[default]
    None,
    /// One descriptor (single-buffer calls; may be null).
    One(Desc),
    /// One per buffer (vector calls; may be empty).
    Many(&'a [Desc]),
}

/// A buffer list of an operation.
#[derive(Clone, Copy, Debug, Default)]
pub enum IovArg<'a> {
    /// Not an argument of this operation.
    #[default]
    None,
    /// Byte buffers.
    Iov(&'a [Iov]),
    /// Atomic element buffers.
    Ioc(&'a [Ioc]),
}

/// The message of a `*msg` call.
#[derive(Clone, Copy, Debug, Default)]
pub enum MsgArg<'a> {
    /// Not a `*msg` call.
    #[default]
    None,
    /// `fi_msg`.
    Msg(&'a Msg),
    /// `fi_msg_tagged`.
    Tagged(&'a MsgTagged),
    /// `fi_msg_rma`.
    Rma(&'a MsgRma),
    /// `fi_msg_atomic`.
    Atomic(&'a MsgAtomic),
}

/// A data call's provider arguments by name (one field per name of the list's
/// vocabulary; absent ones keep their default). Filled by
/// [`data_args!`](crate::data_args) from the arguments of a generated method, so a hook
/// or kit reads any operation without naming it. Pointers are kept as addresses.
#[derive(Clone, Copy, Debug, Default)]
#[allow(missing_docs)]
pub struct DataArgs<'a> {
    pub buf: usize,
    pub len: usize,
    pub count: usize,
    pub desc: DescArg<'a>,
    pub dest: u64,
    pub src: u64,
    pub context: usize,
    pub iov: IovArg<'a>,
    pub msg: MsgArg<'a>,
    pub flags: Option<OpFlags>,
    pub data: Option<u64>,
    pub tag: u64,
    pub ignore: u64,
    pub addr: u64,
    pub key: u64,
    pub datatype: Option<Datatype>,
    pub op: Option<AtomicOp>,
    pub result: usize,
    pub result_desc: DescArg<'a>,
    pub resultv: IovArg<'a>,
    pub compare: usize,
    pub compare_desc: DescArg<'a>,
    pub comparev: IovArg<'a>,
}

/// Conversion of one provider argument into its [`DataArgs`] field.
pub trait IntoArg<T> {
    /// The field's value.
    fn into_arg(self) -> T;
}

macro_rules! into_arg {
    ($($from:ty => $to:ty : |$v:ident| $e:expr;)*) => {$(
        impl<'a> IntoArg<$to> for $from {
            #[inline(always)]
            fn into_arg(self) -> $to {
                let $v = self;
                $e
            }
        }
    )*};
}

into_arg! {
    *const u8 => usize: |p| p as usize;
    *mut u8 => usize: |p| p as usize;
    *const c_void => usize: |p| p as usize;
    *mut c_void => usize: |p| p as usize;
    usize => usize: |n| n;
    u64 => u64: |n| n;
    u64 => Option<u64>: |n| Some(n);
    OpFlags => Option<OpFlags>: |f| Some(f);
    Datatype => Option<Datatype>: |d| Some(d);
    AtomicOp => Option<AtomicOp>: |o| Some(o);
    *mut c_void => DescArg<'a>: |d| DescArg::One(d);
    &'a [Desc] => DescArg<'a>: |d| DescArg::Many(d);
    &'a [Iov] => IovArg<'a>: |v| IovArg::Iov(v);
    &'a [Ioc] => IovArg<'a>: |v| IovArg::Ioc(v);
    &'a Msg => MsgArg<'a>: |m| MsgArg::Msg(m);
    &'a MsgTagged => MsgArg<'a>: |m| MsgArg::Tagged(m);
    &'a MsgRma => MsgArg<'a>: |m| MsgArg::Rma(m);
    &'a MsgAtomic => MsgArg<'a>: |m| MsgArg::Atomic(m);
}

impl DataArgs<'_> {
    /// The operation's context (the message's for `*msg` calls).
    #[inline(always)]
    pub fn context(&self) -> usize {
        match self.msg {
            MsgArg::None => self.context,
            MsgArg::Msg(m) => m.context,
            MsgArg::Tagged(m) => m.context,
            MsgArg::Rma(m) => m.context,
            MsgArg::Atomic(m) => m.context,
        }
    }

    /// The payload in bytes of a message or RMA call: `len`, or the sum of the iov
    /// lengths (the message's too). 0 for atomics (their size is in elements).
    ///
    /// # Safety
    /// A message's `msg_iov` is null or holds `iov_count` entries (the C API's
    /// contract).
    #[inline]
    pub unsafe fn bytes(&self) -> usize {
        let sum = |p: *const Iov, n: usize| {
            // SAFETY: null or valid for `n` entries (contract).
            unsafe { conv::slice(p, n) }.map_or(0, |v| v.iter().map(|i| i.len).sum())
        };
        match (self.iov, self.msg) {
            (IovArg::Iov(v), _) => v.iter().map(|i| i.len).sum(),
            (IovArg::Ioc(_), _) => 0,
            (IovArg::None, MsgArg::None) => self.len,
            (IovArg::None, MsgArg::Msg(m)) => sum(m.msg_iov, m.iov_count),
            (IovArg::None, MsgArg::Tagged(m)) => sum(m.msg_iov, m.iov_count),
            (IovArg::None, MsgArg::Rma(m)) => sum(m.msg_iov, m.iov_count),
            (IovArg::None, MsgArg::Atomic(_)) => 0,
        }
    }
}

/// Fill a [`DataArgs`] from the provider arguments of a generated method:
/// `data_args!(buf, len, desc, dest, context)`.
#[doc(hidden)]
#[macro_export]
macro_rules! data_args {
    ($($arg:ident),*) => {{
        #[allow(unused_mut)]
        let mut args = $crate::abi::ops::DataArgs::default();
        $( args.$arg = $crate::abi::ops::IntoArg::into_arg($arg); )*
        args
    }};
}

/// The one list of an endpoint's data operations (see the [module docs](crate::abi::ops)
/// for the grammar): `for_each_ep_data_op!(path::to::generator)` expands to
/// `path::to::generator! { …every group and entry… }`.
#[macro_export]
macro_rules! for_each_ep_data_op {
    ($($gen:tt)+) => {
        $($gen)+! {
            msg MsgTable {
                /// `fi_send`.
                send / send / Send [send]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, dest: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, dest: u64 = dest, context: usize = context)
                    <= (buf, len, desc, dest, context);
                /// `fi_sendv` (`desc` null or one per iov).
                sendv / sendv / Sendv [send]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, dest: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        dest: u64 = dest, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), dest, context);
                /// `fi_sendmsg`.
                sendmsg / sendmsg / Sendmsg [send msg]
                    (msg: *const $crate::abi::raw::Msg, flags: u64)
                    => (msg: &$crate::abi::raw::Msg = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
                /// `fi_inject`: the buffer may be reused as soon as the call returns.
                inject / inject_raw / Inject [send inject]
                    (buf: *const u8, len: usize, dest: u64)
                    => (buf: *const u8 = buf, len: usize = len, dest: u64 = dest)
                    <= (buf, len, dest);
                /// `fi_senddata`.
                senddata / senddata / Senddata [send data]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, data: u64, dest: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, data: u64 = data, dest: u64 = dest, context: usize = context)
                    <= (buf, len, desc, data, dest, context);
                /// `fi_injectdata`.
                injectdata / injectdata_raw / Injectdata [send data inject]
                    (buf: *const u8, len: usize, data: u64, dest: u64)
                    => (buf: *const u8 = buf, len: usize = len, data: u64 = data, dest: u64 = dest)
                    <= (buf, len, data, dest);
                /// `fi_recv`.
                recv / recv / Recv [recv]
                    (buf: *mut u8, len: usize, desc: *mut ::std::ffi::c_void, src: u64, context: usize)
                    => (buf: *mut u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, src: u64 = src, context: usize = context)
                    <= (buf, len, desc, src, context);
                /// `fi_recvv`.
                recvv / recvv / Recvv [recv]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, src: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        src: u64 = src, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), src, context);
                /// `fi_recvmsg`.
                recvmsg / recvmsg / Recvmsg [recv msg]
                    (msg: *const $crate::abi::raw::Msg, flags: u64)
                    => (msg: &$crate::abi::raw::Msg = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
            }
            tagged TaggedTable {
                /// `fi_tsend`.
                tsend / tsend / Tsend [send tagged]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, dest: u64, tag: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, dest: u64 = dest, tag: u64 = tag, context: usize = context)
                    <= (buf, len, desc, dest, tag, context);
                /// `fi_tsendv`.
                tsendv / tsendv / Tsendv [send tagged]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, dest: u64, tag: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        dest: u64 = dest, tag: u64 = tag, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), dest, tag, context);
                /// `fi_tsendmsg`.
                tsendmsg / tsendmsg / Tsendmsg [send tagged msg]
                    (msg: *const $crate::abi::raw::MsgTagged, flags: u64)
                    => (msg: &$crate::abi::raw::MsgTagged = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
                /// `fi_tinject`.
                tinject / tinject_raw / Tinject [send tagged inject]
                    (buf: *const u8, len: usize, dest: u64, tag: u64)
                    => (buf: *const u8 = buf, len: usize = len, dest: u64 = dest, tag: u64 = tag)
                    <= (buf, len, dest, tag);
                /// `fi_tsenddata`.
                tsenddata / tsenddata / Tsenddata [send tagged data]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, data: u64, dest: u64, tag: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, data: u64 = data, dest: u64 = dest, tag: u64 = tag, context: usize = context)
                    <= (buf, len, desc, data, dest, tag, context);
                /// `fi_tinjectdata`.
                tinjectdata / tinjectdata_raw / Tinjectdata [send tagged data inject]
                    (buf: *const u8, len: usize, data: u64, dest: u64, tag: u64)
                    => (buf: *const u8 = buf, len: usize = len, data: u64 = data, dest: u64 = dest, tag: u64 = tag)
                    <= (buf, len, data, dest, tag);
                /// `fi_trecv`.
                trecv / trecv / Trecv [recv tagged]
                    (buf: *mut u8, len: usize, desc: *mut ::std::ffi::c_void, src: u64, tag: u64, ignore: u64, context: usize)
                    => (buf: *mut u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, src: u64 = src, tag: u64 = tag, ignore: u64 = ignore, context: usize = context)
                    <= (buf, len, desc, src, tag, ignore, context);
                /// `fi_trecvv`.
                trecvv / trecvv / Trecvv [recv tagged]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, src: u64, tag: u64, ignore: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        src: u64 = src, tag: u64 = tag, ignore: u64 = ignore, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), src, tag, ignore, context);
                /// `fi_trecvmsg`.
                trecvmsg / trecvmsg / Trecvmsg [recv tagged msg]
                    (msg: *const $crate::abi::raw::MsgTagged, flags: u64)
                    => (msg: &$crate::abi::raw::MsgTagged = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
            }
            rma RmaTable {
                /// `fi_read`.
                read / read / Read [read]
                    (buf: *mut u8, len: usize, desc: *mut ::std::ffi::c_void, src: u64, addr: u64, key: u64, context: usize)
                    => (buf: *mut u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, src: u64 = src, addr: u64 = addr, key: u64 = key, context: usize = context)
                    <= (buf, len, desc, src, addr, key, context);
                /// `fi_readv`.
                readv / readv / Readv [read]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, src: u64, addr: u64, key: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        src: u64 = src, addr: u64 = addr, key: u64 = key, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), src, addr, key, context);
                /// `fi_readmsg`.
                readmsg / readmsg / Readmsg [read msg]
                    (msg: *const $crate::abi::raw::MsgRma, flags: u64)
                    => (msg: &$crate::abi::raw::MsgRma = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
                /// `fi_write`.
                write / write / Write [write]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, dest: u64, addr: u64, key: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, dest: u64 = dest, addr: u64 = addr, key: u64 = key, context: usize = context)
                    <= (buf, len, desc, dest, addr, key, context);
                /// `fi_writev`.
                writev / writev / Writev [write]
                    (iov: *const $crate::abi::raw::Iov, desc: *const *mut ::std::ffi::c_void, count: usize, dest: u64, addr: u64, key: u64, context: usize)
                    => (iov: &[$crate::abi::raw::Iov] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), dest, addr, key, context);
                /// `fi_writemsg`.
                writemsg / writemsg / Writemsg [write msg]
                    (msg: *const $crate::abi::raw::MsgRma, flags: u64)
                    => (msg: &$crate::abi::raw::MsgRma = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
                /// `fi_inject_write`.
                inject_write / inject_write_raw / InjectWrite [write inject]
                    (buf: *const u8, len: usize, dest: u64, addr: u64, key: u64)
                    => (buf: *const u8 = buf, len: usize = len, dest: u64 = dest, addr: u64 = addr, key: u64 = key)
                    <= (buf, len, dest, addr, key);
                /// `fi_writedata`.
                writedata / writedata / Writedata [write data]
                    (buf: *const u8, len: usize, desc: *mut ::std::ffi::c_void, data: u64, dest: u64, addr: u64, key: u64, context: usize)
                    => (buf: *const u8 = buf, len: usize = len, desc: $crate::provider::Desc = desc, data: u64 = data, dest: u64 = dest, addr: u64 = addr, key: u64 = key, context: usize = context)
                    <= (buf, len, desc, data, dest, addr, key, context);
                /// `fi_inject_writedata`.
                inject_writedata / inject_writedata_raw / InjectWritedata [write data inject]
                    (buf: *const u8, len: usize, data: u64, dest: u64, addr: u64, key: u64)
                    => (buf: *const u8 = buf, len: usize = len, data: u64 = data, dest: u64 = dest, addr: u64 = addr, key: u64 = key)
                    <= (buf, len, data, dest, addr, key);
            }
            atomic AtomicTable {
                /// `fi_atomic`: `buf` holds `count` elements of `datatype`.
                atomic / atomic / Atomic [atomic]
                    (buf: *const ::std::ffi::c_void, count: usize, desc: *mut ::std::ffi::c_void, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (buf: *const ::std::ffi::c_void = buf, count: usize = count, desc: $crate::provider::Desc = desc, dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (buf, count, desc, dest, addr, key, datatype, op, context);
                /// `fi_atomicv`.
                atomicv / atomicv / Atomicv [atomic]
                    (iov: *const $crate::abi::raw::Ioc, desc: *const *mut ::std::ffi::c_void, count: usize, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (iov: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(), dest, addr, key, datatype, op, context);
                /// `fi_atomicmsg`.
                atomicmsg / atomicmsg / Atomicmsg [atomic msg]
                    (msg: *const $crate::abi::raw::MsgAtomic, flags: u64)
                    => (msg: &$crate::abi::raw::MsgAtomic = $crate::abi::ops::conv::msg(msg)?,
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, flags.bits());
                /// `fi_inject_atomic`: `buf` holds `count` elements during the call.
                inject_atomic / inject_atomic / InjectAtomic [atomic inject]
                    (buf: *const ::std::ffi::c_void, count: usize, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp)
                    => (buf: *const ::std::ffi::c_void = buf, count: usize = count, dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?)
                    <= (buf, count, dest, addr, key, datatype, op);
                /// `fi_fetch_atomic`: `result` receives `count` elements.
                fetch_atomic / fetch_atomic / FetchAtomic [fetch]
                    (buf: *const ::std::ffi::c_void, count: usize, desc: *mut ::std::ffi::c_void, result: *mut ::std::ffi::c_void, result_desc: *mut ::std::ffi::c_void, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (buf: *const ::std::ffi::c_void = buf, count: usize = count, desc: $crate::provider::Desc = desc,
                        result: *mut ::std::ffi::c_void = result, result_desc: $crate::provider::Desc = result_desc,
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (buf, count, desc, result, result_desc, dest, addr, key, datatype, op, context);
                /// `fi_fetch_atomicv`.
                fetch_atomicv / fetch_atomicv / FetchAtomicv [fetch]
                    (iov: *const $crate::abi::raw::Ioc, desc: *const *mut ::std::ffi::c_void, count: usize, resultv: *const $crate::abi::raw::Ioc, result_desc: *const *mut ::std::ffi::c_void, result_count: usize, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (iov: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        resultv: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(resultv, result_count)?,
                        result_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(result_desc, result_count),
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(),
                        resultv.as_ptr(), $crate::abi::ops::conv::desc_ptr(result_desc), resultv.len(),
                        dest, addr, key, datatype, op, context);
                /// `fi_fetch_atomicmsg`.
                fetch_atomicmsg / fetch_atomicmsg / FetchAtomicmsg [fetch msg]
                    (msg: *const $crate::abi::raw::MsgAtomic, resultv: *const $crate::abi::raw::Ioc, result_desc: *const *mut ::std::ffi::c_void, result_count: usize, flags: u64)
                    => (msg: &$crate::abi::raw::MsgAtomic = $crate::abi::ops::conv::msg(msg)?,
                        resultv: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(resultv, result_count)?,
                        result_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(result_desc, result_count),
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, resultv.as_ptr(), $crate::abi::ops::conv::desc_ptr(result_desc), resultv.len(), flags.bits());
                /// `fi_compare_atomic`: `compare` holds `count` elements.
                compare_atomic / compare_atomic / CompareAtomic [compare]
                    (buf: *const ::std::ffi::c_void, count: usize, desc: *mut ::std::ffi::c_void, compare: *const ::std::ffi::c_void, compare_desc: *mut ::std::ffi::c_void, result: *mut ::std::ffi::c_void, result_desc: *mut ::std::ffi::c_void, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (buf: *const ::std::ffi::c_void = buf, count: usize = count, desc: $crate::provider::Desc = desc,
                        compare: *const ::std::ffi::c_void = compare, compare_desc: $crate::provider::Desc = compare_desc,
                        result: *mut ::std::ffi::c_void = result, result_desc: $crate::provider::Desc = result_desc,
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (buf, count, desc, compare, compare_desc, result, result_desc, dest, addr, key, datatype, op, context);
                /// `fi_compare_atomicv`.
                compare_atomicv / compare_atomicv / CompareAtomicv [compare]
                    (iov: *const $crate::abi::raw::Ioc, desc: *const *mut ::std::ffi::c_void, count: usize, comparev: *const $crate::abi::raw::Ioc, compare_desc: *const *mut ::std::ffi::c_void, compare_count: usize, resultv: *const $crate::abi::raw::Ioc, result_desc: *const *mut ::std::ffi::c_void, result_count: usize, dest: u64, addr: u64, key: u64, datatype: u32 as $crate::Datatype, op: u32 as $crate::AtomicOp, context: usize)
                    => (iov: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(iov, count)?,
                        desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(desc, count),
                        comparev: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(comparev, compare_count)?,
                        compare_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(compare_desc, compare_count),
                        resultv: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(resultv, result_count)?,
                        result_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(result_desc, result_count),
                        dest: u64 = dest, addr: u64 = addr, key: u64 = key,
                        datatype: $crate::Datatype = $crate::abi::ops::conv::datatype(datatype)?,
                        op: $crate::AtomicOp = $crate::abi::ops::conv::atomic_op(op)?, context: usize = context)
                    <= (iov.as_ptr(), $crate::abi::ops::conv::desc_ptr(desc), iov.len(),
                        comparev.as_ptr(), $crate::abi::ops::conv::desc_ptr(compare_desc), comparev.len(),
                        resultv.as_ptr(), $crate::abi::ops::conv::desc_ptr(result_desc), resultv.len(),
                        dest, addr, key, datatype, op, context);
                /// `fi_compare_atomicmsg`.
                compare_atomicmsg / compare_atomicmsg / CompareAtomicmsg [compare msg]
                    (msg: *const $crate::abi::raw::MsgAtomic, comparev: *const $crate::abi::raw::Ioc, compare_desc: *const *mut ::std::ffi::c_void, compare_count: usize, resultv: *const $crate::abi::raw::Ioc, result_desc: *const *mut ::std::ffi::c_void, result_count: usize, flags: u64)
                    => (msg: &$crate::abi::raw::MsgAtomic = $crate::abi::ops::conv::msg(msg)?,
                        comparev: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(comparev, compare_count)?,
                        compare_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(compare_desc, compare_count),
                        resultv: &[$crate::abi::raw::Ioc] = $crate::abi::ops::conv::slice(resultv, result_count)?,
                        result_desc: &[$crate::provider::Desc] = $crate::abi::ops::conv::descs(result_desc, result_count),
                        flags: $crate::OpFlags = $crate::abi::ops::conv::flags(flags))
                    <= (msg, comparev.as_ptr(), $crate::abi::ops::conv::desc_ptr(compare_desc), comparev.len(),
                        resultv.as_ptr(), $crate::abi::ops::conv::desc_ptr(result_desc), resultv.len(), flags.bits());
            } + queries {
                /// `fi_atomicvalid`: element count limit in `count`.
                fn writevalid(ep: Obj, datatype: u32, op: u32, count: *mut usize) -> i32;
                /// `fi_fetch_atomicvalid`.
                fn readwritevalid(ep: Obj, datatype: u32, op: u32, count: *mut usize) -> i32;
                /// `fi_compare_atomicvalid`.
                fn compwritevalid(ep: Obj, datatype: u32, op: u32, count: *mut usize) -> i32;
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::abi::tables::{AtomicTable, MsgTable, RmaTable, TaggedTable};

    #[test]
    fn the_list_reproduces_the_interface_layout() {
        // The fingerprint of interface 1.2 as the hand-written tables had it: the list
        // generates the same slots, in the same order, with the same signatures.
        assert_eq!(crate::abi::fingerprint_for_minor(2), 0x0512_9866_4a3a_b381);
        let names = |t: &crate::abi::layout::StructDesc| {
            t.fields
                .iter()
                .map(|f| f.name)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            names(&TaggedTable::LAYOUT),
            "size tsend tsendv tsendmsg tinject tsenddata tinjectdata trecv trecvv trecvmsg"
        );
        assert_eq!(MsgTable::LAYOUT.size, 80);
        assert_eq!(RmaTable::LAYOUT.size, 80);
        // The atomic table ends with its three queries.
        let atomic = names(&AtomicTable::LAYOUT);
        assert!(atomic.ends_with("compare_atomicmsg writevalid readwritevalid compwritevalid"));
    }

    #[test]
    fn kinds_and_args_read_a_call_by_name() {
        let kind = crate::op_kind!(send tagged data inject);
        assert!(kind.tagged && kind.data && kind.inject && !kind.msg && !kind.is_rx());
        assert!(crate::op_kind!(recv msg).is_rx());
        assert!(crate::op_kind!(fetch).is_atomic());
        let (buf, len, dest, context) = (0x1000 as *const u8, 24usize, 7u64, 9usize);
        let args = crate::data_args!(buf, len, dest, context);
        assert_eq!(
            (args.buf, args.len, args.dest, args.context()),
            (0x1000, 24, 7, 9)
        );
        // SAFETY: no message: nothing is dereferenced.
        assert_eq!(unsafe { args.bytes() }, 24);
        assert!(args.flags.is_none() && args.data.is_none());
    }
}
