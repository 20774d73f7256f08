//! `struct fid` and `struct fi_ops`, the header of every object the C API hands out.
//!
//! A C program reaches an object's operations through `fid->ops` (the `static inline`
//! wrappers of `<rdma/fabric.h>`: `fi_close`, `fi_bind`, `fi_control`, `fi_open_ops`,
//! …), so every slot of a table built here is a function: what an object lacks answers
//! `-FI_ENOSYS`, never a null pointer. Every slot catches panics ([`crate::guard`]).

use std::ffi::{c_char, c_int, c_void};

/// `FI_CLASS_FABRIC`.
pub const FI_CLASS_FABRIC: usize = 1;
/// `FI_CLASS_DOMAIN`.
pub const FI_CLASS_DOMAIN: usize = 2;
/// `FI_CLASS_EP`.
pub const FI_CLASS_EP: usize = 3;
/// `FI_CLASS_PEP`.
pub const FI_CLASS_PEP: usize = 9;
/// `FI_CLASS_AV`.
pub const FI_CLASS_AV: usize = 11;
/// `FI_CLASS_MR`.
pub const FI_CLASS_MR: usize = 12;
/// `FI_CLASS_EQ`.
pub const FI_CLASS_EQ: usize = 13;
/// `FI_CLASS_CQ`.
pub const FI_CLASS_CQ: usize = 14;
/// `FI_CLASS_CNTR`.
pub const FI_CLASS_CNTR: usize = 15;
/// `FI_CLASS_WAIT`.
pub const FI_CLASS_WAIT: usize = 16;
/// `FI_CLASS_POLL`.
pub const FI_CLASS_POLL: usize = 17;
/// `FI_CLASS_NIC`.
pub const FI_CLASS_NIC: usize = 20;

/// `struct fid`.
#[repr(C)]
pub struct Fid {
    /// `fclass` (`FI_CLASS_*`).
    pub fclass: usize,
    /// `context`: the application's, returned untouched.
    pub context: *mut c_void,
    /// `ops`.
    pub ops: *mut FiOps,
}

/// `close` slot type.
pub type CloseFn = unsafe extern "C" fn(fid: *mut Fid) -> c_int;
/// `bind` slot type.
pub type BindFn = unsafe extern "C" fn(fid: *mut Fid, bfid: *mut Fid, flags: u64) -> c_int;
/// `control` slot type.
pub type ControlFn = unsafe extern "C" fn(fid: *mut Fid, command: c_int, arg: *mut c_void) -> c_int;
/// `ops_open` slot type.
pub type OpsOpenFn = unsafe extern "C" fn(
    fid: *mut Fid,
    name: *const c_char,
    flags: u64,
    ops: *mut *mut c_void,
    context: *mut c_void,
) -> c_int;
/// `tostr` slot type.
pub type TostrFn = unsafe extern "C" fn(fid: *const Fid, buf: *mut c_char, len: usize) -> c_int;
/// `ops_set` slot type.
pub type OpsSetFn = unsafe extern "C" fn(
    fid: *mut Fid,
    name: *const c_char,
    flags: u64,
    ops: *mut c_void,
    context: *mut c_void,
) -> c_int;

/// `struct fi_ops`. The slots are `Option` so that a foreign table (a NIC a program
/// built) is read safely; every table built here has all of them set.
#[repr(C)]
pub struct FiOps {
    /// `size`: the size of this table.
    pub size: usize,
    /// `close`.
    pub close: Option<CloseFn>,
    /// `bind`.
    pub bind: Option<BindFn>,
    /// `control`.
    pub control: Option<ControlFn>,
    /// `ops_open`.
    pub ops_open: Option<OpsOpenFn>,
    /// `tostr`.
    pub tostr: Option<TostrFn>,
    /// `ops_set`.
    pub ops_set: Option<OpsSetFn>,
}

/// A C ops table (`struct fi_ops_*`) of type `T` with the slots given (`T { slot: f, … }`)
/// and `size`, the field every C table begins with, the size of `T`.
macro_rules! ops_table {
    ($T:ident { $($slots:tt)* }) => {
        $T {
            size: ::std::mem::size_of::<$T>(),
            $($slots)*
        }
    };
}

pub(crate) use ops_table;

/// `-FI_ENOSYS` as the `int` the slots return.
pub const ENOSYS: c_int = -(libc::ENOSYS);

/// `FI_GETWAIT` (the `fi_control` command).
pub const FI_GETWAIT: c_int = 5;

/// Defines the `fi_ops` (`OPS`) of an object with a wait file descriptor (a CQ, EQ,
/// counter or wait set, the C object type `Obj`) and its two slots: `close` closes it
/// (`closer`, given its state); `control` answers `FI_GETWAIT` with `wait_fd` (given the
/// object `o`) written to `arg`, and any other command with `-FI_ENOSYS`. The other slots
/// are `-FI_ENOSYS`.
macro_rules! wait_fd_fi_ops {
    ($(#[$doc:meta])* $vis:vis static $OPS:ident: $Obj:ty,
        close $close:ident = $closer:expr, control $control:ident = |$o:ident| $wait_fd:expr;) => {
        unsafe extern "C" fn $close(fid: *mut $crate::fid::Fid) -> ::std::ffi::c_int {
            // SAFETY: the slot of our own table: `fid` is one of our objects of this type.
            $crate::guard(|| unsafe { <$Obj>::close_with(fid.cast(), $closer) })
        }

        unsafe extern "C" fn $control(
            fid: *mut $crate::fid::Fid,
            command: ::std::ffi::c_int,
            arg: *mut ::std::ffi::c_void,
        ) -> ::std::ffi::c_int {
            $crate::guard(|| {
                if command != $crate::fid::FI_GETWAIT {
                    return $crate::fid::ENOSYS;
                }
                // SAFETY: the slot of our own table.
                let $o = unsafe { <$Obj>::of(fid.cast()) };
                // SAFETY: `arg` is an `int *` for FI_GETWAIT (C API).
                unsafe { $crate::obj::put_result(arg.cast::<::std::ffi::c_int>(), $wait_fd) }
            })
        }

        $(#[$doc])*
        $vis static $OPS: $crate::fid::FiOps = $crate::fid::FiOps {
            control: Some($control),
            ..$crate::fid::FiOps::with_close($close)
        };
    };
}

pub(crate) use wait_fd_fi_ops;

/// Slots of the C tables this library does not implement: each ignores its arguments
/// and returns `-FI_ENOSYS` in the slot's return type (`int` or `ssize_t`).
/// `fn name(argument types) -> return type;`
macro_rules! enosys_slots {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ty),*) -> $ret:ty;)*) => {$(
        $(#[$doc])*
        #[allow(clippy::unnecessary_cast)]
        unsafe extern "C" fn $name($(_: $arg),*) -> $ret {
            $crate::fid::ENOSYS as $ret
        }
    )*};
}

pub(crate) use enosys_slots;

/// The slot of an open call whose later form (`fi_domain2`, `fi_endpoint2`) only adds
/// `flags`: it is that form with no flags. `fn name(*mut Parent, *mut *mut Made) =
/// later_form;`
macro_rules! open_without_flags {
    ($(#[$doc:meta])* $vis:vis fn $name:ident(*mut $Parent:ty, *mut *mut $Made:ty) = $with_flags:ident;) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As for the form with flags: the parent is an object of this library; the other
        /// pointers per the C API.
        $vis unsafe extern "C" fn $name(
            parent: *mut $Parent,
            info: *mut $crate::info::FiInfo,
            out: *mut *mut $Made,
            context: *mut ::std::ffi::c_void,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded (the same contract).
            unsafe { $with_flags(parent, info, out, 0, context) }
        }
    };
}

pub(crate) use open_without_flags;

/// The slot of a call that opens an object for an info (`fi_domain2`, `fi_endpoint2`,
/// `fi_scalable_ep`, `fi_passive_ep`): under [`crate::guard_try`], the parent behind its
/// pointer (`Obj::of`) becomes `p` and the info from C ([`crate::obj::info_arg`]) `info`;
/// a null info or out-pointer is `-FI_EINVAL`; then `body`, which answers the status.
/// `fn name(parent: *mut Parent as Obj, info, out: *mut *mut Made, [flags: u64,] context)
/// = |p| { body }`
macro_rules! open_for_info {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($parent:ident: *mut $Parent:ty as $Obj:ty, $info:ident,
        $out:ident: *mut *mut $Made:ty, $flags:ident: u64, $context:ident) = |$p:ident| $body:block) => {
        $crate::fid::open_for_info! { @slot $(#[$doc])* $vis fn $name($parent: *mut $Parent as $Obj, $info,
            $out: *mut *mut $Made, [$flags] $context) = |$p| $body }
    };
    ($(#[$doc:meta])* $vis:vis fn $name:ident($parent:ident: *mut $Parent:ty as $Obj:ty, $info:ident,
        $out:ident: *mut *mut $Made:ty, $context:ident) = |$p:ident| $body:block) => {
        $crate::fid::open_for_info! { @slot $(#[$doc])* $vis fn $name($parent: *mut $Parent as $Obj, $info,
            $out: *mut *mut $Made, [] $context) = |$p| $body }
    };
    (@slot $(#[$doc:meta])* $vis:vis fn $name:ident($parent:ident: *mut $Parent:ty as $Obj:ty, $info:ident,
        $out:ident: *mut *mut $Made:ty, [$($flags:ident)?] $context:ident) = |$p:ident| $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The parent is an object of this library; the other pointers per the C API.
        $vis unsafe extern "C" fn $name(
            $parent: *mut $Parent,
            $info: *mut $crate::info::FiInfo,
            $out: *mut *mut $Made,
            $($flags: u64,)?
            $context: *mut ::std::ffi::c_void,
        ) -> ::std::ffi::c_int {
            $crate::guard_try(|| {
                // SAFETY: our parent; `info` per the C API.
                let ($p, $info) = unsafe { (<$Obj>::of($parent), $crate::obj::info_arg($info)?) };
                if $out.is_null() {
                    return Err($crate::obj::EINVAL);
                }
                $body
            })
        }
    };
}

pub(crate) use open_for_info;

enosys_slots! {
    fn bind_enosys(*mut Fid, *mut Fid, u64) -> c_int;
    fn control_enosys(*mut Fid, c_int, *mut c_void) -> c_int;
    fn ops_open_enosys(*mut Fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int;
    fn tostr_enosys(*const Fid, *mut c_char, usize) -> c_int;
    fn ops_set_enosys(*mut Fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int;
}

impl FiOps {
    /// A table with `close` and every other slot `-FI_ENOSYS`.
    pub const fn with_close(close: CloseFn) -> FiOps {
        FiOps {
            size: std::mem::size_of::<FiOps>(),
            close: Some(close),
            bind: Some(bind_enosys),
            control: Some(control_enosys),
            ops_open: Some(ops_open_enosys),
            tostr: Some(tostr_enosys),
            ops_set: Some(ops_set_enosys),
        }
    }
}
