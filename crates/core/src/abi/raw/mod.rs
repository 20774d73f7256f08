//! The raw (`#[repr(C)]`) forms of everything that crosses the plugin boundary, and the
//! lossless conversions between them and the Rust types.
//!
//! # Conventions
//!
//! - Strings and byte strings are [`RawStr`]: pointer + length, not NUL-terminated; a
//!   null pointer means "none" (`Option::None`), a non-null pointer with length 0 is the
//!   empty string.
//! - Addresses are [`RawAddr`]: the address format plus the bytes of
//!   [`Address::to_bytes`]; a null pointer means "no address".
//! - Enumerations cross as their C `u32` value and bit sets as their C bits; the
//!   receiving side validates enumerations (an unknown value is `FI_EINVAL`, never
//!   undefined behaviour) and keeps unknown bits.
//! - Structures that may grow ([`RawInfo`] and its attribute structures, the getinfo
//!   request and result, [`RawVerdict`](crate::abi::wire::RawVerdict), [`RawEp`], [`RawMr`]) start with
//!   `struct_size`, the size the producer was built with; fields are only appended, and
//!   a reader ignores fields beyond `struct_size` (and fields it does not know).
//! - Whoever allocates a value frees it. A getinfo result produced by a plugin stays
//!   owned by the plugin (its `owner` pointer) until the host has copied it and called
//!   the plugin's `free_getinfo` slot.
//!
//! # Entries and data-path structures
//!
//! Completion entries ([`CqEntry`], [`CqMsgEntry`], [`CqDataEntry`], [`CqTaggedEntry`],
//! [`CqErrEntry`]), event entries ([`EqEntry`], [`EqCmEntry`], [`EqErrEntry`]) and the
//! data-path descriptors ([`Iov`], [`RmaIov`], [`Ioc`], [`RmaIoc`], [`Msg`],
//! [`MsgTagged`], [`MsgRma`], [`MsgAtomic`], [`AtomicAttr`]) have the C library's
//! layouts field for field; contexts are `usize` (a C `void *`).
//!
//! Nothing here panics on bad input: conversions from raw forms return `FI_EINVAL`
//! naming the field.

use std::ffi::c_void;

use crate::abi::layout::{abi_enum, abi_struct};
use crate::abi::tables::{AtomicTable, CmTable, EpTable, MrTable, MsgTable, RmaTable, TaggedTable};
use crate::addr::Address;
use crate::attr::{Bus, DomainAttr, EpAttr, FabricAttr, Info, Nic, PciAddress, RxAttr, TxAttr};
use crate::enums::AddrFormat;
use crate::error::{Errno, Error, Result};
use crate::flags::{Caps, CompOrder, Mode, MrMode, MsgOrder, OpFlags};
use crate::version::Version;

mod attrs;
mod entries;
mod info;

pub use self::attrs::*;
pub use self::entries::*;
pub use self::info::*;

/// An opaque object pointer: the provider's object behind a handle. Only the provider
/// that produced it dereferences it.
pub type Obj = *mut c_void;

abi_enum! {
    /// Object classes (the C library's `FI_CLASS_*` values), used when one object is
    /// handed to another (bind, trywait); `label` is a short lower-case name for messages
    /// (`"completion queue"`).
    pub enum FidClass, text label {
        /// A fabric.
        Fabric = 1 => "fabric",
        /// A domain.
        Domain = 2 => "domain",
        /// An endpoint.
        Ep = 3 => "endpoint",
        /// A scalable endpoint.
        Sep = 4 => "scalable endpoint",
        /// A receive context.
        RxCtx = 5 => "rx context",
        /// A shared receive context.
        SrxCtx = 6 => "shared rx context",
        /// A transmit context.
        TxCtx = 7 => "tx context",
        /// A shared transmit context.
        StxCtx = 8 => "shared tx context",
        /// A passive endpoint.
        Pep = 9 => "passive endpoint",
        /// An address vector.
        Av = 11 => "address vector",
        /// A memory region.
        Mr = 12 => "memory region",
        /// An event queue.
        Eq = 13 => "event queue",
        /// A completion queue.
        Cq = 14 => "completion queue",
        /// A counter.
        Cntr = 15 => "counter",
        /// A wait set.
        Wait = 16 => "wait set",
        /// A poll set (`fi_poll_open`); kept by the host, never handed to a provider.
        Poll = 17 => "poll set",
        /// A multicast group membership (`fid_mc`, `fi_join`).
        Mc = 19 => "multicast group",
    }
}

abi_struct! {
    /// A string or byte string: pointer + length; null pointer = none.
    #[derive(Clone, Copy, Debug)]
    pub struct RawStr {
        /// First byte, or null for "none".
        pub ptr: *const u8,
        /// Length in bytes.
        pub len: usize,
    }

    /// An address: its format and the bytes of [`Address::to_bytes`]; null pointer = none.
    #[derive(Clone, Copy, Debug)]
    pub struct RawAddr {
        /// `AddrFormat` C value.
        pub format: u32,
        /// First byte, or null for "no address".
        pub ptr: *const u8,
        /// Length in bytes.
        pub len: usize,
    }

    /// A message buffer the caller provides for an error message of a control call. The
    /// callee writes at most `cap` bytes of UTF-8 at `buf` and sets `len`; a null
    /// `ErrBuf` pointer means "no message wanted".
    #[derive(Debug)]
    pub struct ErrBuf {
        /// The caller's buffer.
        pub buf: *mut u8,
        /// Its capacity.
        pub cap: usize,
        /// Bytes written by the callee.
        pub len: usize,
    }

    /// A newly opened object: the provider's object pointer and its ops table.
    #[derive(Debug)]
    pub struct RawObj {
        /// The provider's object.
        pub obj: Obj,
        /// The object's ops table (the class's table type).
        pub ops: *const c_void,
    }

    /// A newly opened endpoint (also scalable endpoints, contexts, aliases): its object
    /// and one table per operation group. A null group table means the group is not
    /// supported (every call of it is `FI_ENOSYS`).
    #[derive(Debug)]
    pub struct RawEp {
        /// Size of this structure as the caller knows it; the callee fills only fields
        /// that fit.
        pub struct_size: usize,
        /// The provider's object.
        pub obj: Obj,
        /// Control operations.
        pub ep: *const EpTable,
        /// Connection management.
        pub cm: *const CmTable,
        /// Messages.
        pub msg: *const MsgTable,
        /// Tagged messages.
        pub tagged: *const TaggedTable,
        /// RMA.
        pub rma: *const RmaTable,
        /// Atomics.
        pub atomic: *const AtomicTable,
    }

    /// A newly registered memory region.
    #[derive(Debug)]
    pub struct RawMr {
        /// Size of this structure as the caller knows it.
        pub struct_size: usize,
        /// The provider's object.
        pub obj: Obj,
        /// The region's ops table.
        pub ops: *const MrTable,
    }

    /// One object handed to another call (bind target, trywait list).
    #[derive(Clone, Copy, Debug)]
    pub struct RawFidRef {
        /// [`FidClass`] C value.
        pub class: u32,
        /// The provider's object.
        pub obj: Obj,
    }
}

impl RawStr {
    /// "None".
    pub const NONE: RawStr = RawStr {
        ptr: std::ptr::null(),
        len: 0,
    };

    /// A view of `s` (valid while `s` is).
    pub fn from_text(s: &str) -> RawStr {
        RawStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// A view of `b` (valid while `b` is).
    pub fn from_bytes(b: &[u8]) -> RawStr {
        RawStr {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }

    /// A view of an optional string.
    pub fn from_opt(s: Option<&str>) -> RawStr {
        s.map_or(RawStr::NONE, RawStr::from_text)
    }

    /// The bytes, or `None` for a null pointer.
    ///
    /// # Safety
    /// A non-null `ptr` must be valid for reads of `len` bytes for `'a`.
    pub unsafe fn bytes<'a>(&self) -> Option<&'a [u8]> {
        if self.ptr.is_null() {
            return None;
        }
        if self.len == 0 {
            return Some(&[]);
        }
        // SAFETY: non-null and, by the caller's contract, valid for `len` bytes.
        Some(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The text, or `None` for a null pointer; invalid UTF-8 is `FI_EINVAL` naming `what`.
    ///
    /// # Safety
    /// As for [`RawStr::bytes`].
    pub unsafe fn str<'a>(&self, what: &str) -> Result<Option<&'a str>> {
        // SAFETY: forwarded from this function's contract.
        match unsafe { self.bytes() } {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b)
                .map(Some)
                .map_err(|_| Error::new(Errno::EINVAL, format!("{what}: not valid UTF-8"))),
        }
    }

    /// An owned copy of the text.
    ///
    /// # Safety
    /// As for [`RawStr::bytes`].
    pub unsafe fn to_string_opt(&self, what: &str) -> Result<Option<String>> {
        // SAFETY: forwarded from this function's contract.
        Ok(unsafe { self.str(what) }?.map(str::to_string))
    }
}

impl RawAddr {
    /// No address.
    pub const NONE: RawAddr = RawAddr {
        format: 0,
        ptr: std::ptr::null(),
        len: 0,
    };

    /// A view of `bytes` in `format` (valid while `bytes` is).
    pub fn new(format: AddrFormat, bytes: &[u8]) -> RawAddr {
        RawAddr {
            format: format.to_raw(),
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The address, or `None` for a null pointer; bytes that do not form a valid
    /// address of the format are an error naming `what`.
    ///
    /// # Safety
    /// A non-null `ptr` must be valid for reads of `len` bytes during the call.
    pub unsafe fn to_address(&self, what: &str) -> Result<Option<Address>> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        let bytes: &[u8] = if self.len == 0 {
            &[]
        } else {
            // SAFETY: non-null and valid for `len` bytes by the caller's contract.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        };
        Address::from_bytes(AddrFormat::from_raw(self.format), bytes)
            .map(Some)
            .map_err(|e| e.context(what))
    }
}

impl ErrBuf {
    /// An empty message buffer over `buf`.
    pub fn new(buf: &mut [u8]) -> ErrBuf {
        ErrBuf {
            buf: buf.as_mut_ptr(),
            cap: buf.len(),
            len: 0,
        }
    }

    /// Write `msg` (truncated at a character boundary to the capacity) into `*eb`.
    ///
    /// # Safety
    /// `eb` is null or points to an `ErrBuf` whose `buf` is valid for writes of `cap`
    /// bytes.
    pub unsafe fn write(eb: *mut ErrBuf, msg: &str) {
        if eb.is_null() {
            return;
        }
        // SAFETY: non-null and valid by the caller's contract.
        let eb = unsafe { &mut *eb };
        if eb.buf.is_null() {
            eb.len = 0;
            return;
        }
        let mut n = msg.len().min(eb.cap);
        while n > 0 && !msg.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `buf` is valid for `cap` >= `n` bytes; `msg` is a distinct allocation.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), eb.buf, n) };
        eb.len = n;
    }

    /// The message written so far, read from the buffer `self` was created over.
    ///
    /// # Safety
    /// `buf` must still be valid for reads of `len` bytes.
    pub unsafe fn message(&self) -> String {
        if self.buf.is_null() || self.len == 0 {
            return String::new();
        }
        // SAFETY: by the caller's contract; `len <= cap` as written by `write`.
        let b = unsafe { std::slice::from_raw_parts(self.buf, self.len.min(self.cap)) };
        String::from_utf8_lossy(b).into_owned()
    }
}

impl RawObj {
    /// An empty out-parameter.
    pub const fn empty() -> RawObj {
        RawObj {
            obj: std::ptr::null_mut(),
            ops: std::ptr::null(),
        }
    }
}

impl RawEp {
    /// An empty out-parameter of this build's size.
    pub const fn empty() -> RawEp {
        RawEp {
            struct_size: std::mem::size_of::<RawEp>(),
            obj: std::ptr::null_mut(),
            ep: std::ptr::null(),
            cm: std::ptr::null(),
            msg: std::ptr::null(),
            tagged: std::ptr::null(),
            rma: std::ptr::null(),
            atomic: std::ptr::null(),
        }
    }
}

impl RawMr {
    /// An empty out-parameter of this build's size.
    pub const fn empty() -> RawMr {
        RawMr {
            struct_size: std::mem::size_of::<RawMr>(),
            obj: std::ptr::null_mut(),
            ops: std::ptr::null(),
        }
    }
}

/// Every boundary structure of this module, for the layout fingerprint.
pub const LAYOUTS: &[&crate::abi::layout::StructDesc] = &[
    &RawStr::LAYOUT,
    &RawAddr::LAYOUT,
    &ErrBuf::LAYOUT,
    &RawObj::LAYOUT,
    &RawEp::LAYOUT,
    &RawMr::LAYOUT,
    &RawFidRef::LAYOUT,
    &RawTxAttr::LAYOUT,
    &RawRxAttr::LAYOUT,
    &RawEpAttr::LAYOUT,
    &RawDomainAttr::LAYOUT,
    &RawFabricAttr::LAYOUT,
    &RawNic::LAYOUT,
    &RawInfo::LAYOUT,
    &Iov::LAYOUT,
    &RmaIov::LAYOUT,
    &Ioc::LAYOUT,
    &RmaIoc::LAYOUT,
    &Msg::LAYOUT,
    &MsgTagged::LAYOUT,
    &MsgRma::LAYOUT,
    &MsgAtomic::LAYOUT,
    &AtomicAttr::LAYOUT,
    &CqEntry::LAYOUT,
    &CqMsgEntry::LAYOUT,
    &CqDataEntry::LAYOUT,
    &CqTaggedEntry::LAYOUT,
    &CqErrEntry::LAYOUT,
    &EqEntry::LAYOUT,
    &EqCmEntry::LAYOUT,
    &EqErrEntry::LAYOUT,
    &RawCqAttr::LAYOUT,
    &RawEqAttr::LAYOUT,
    &RawCntrAttr::LAYOUT,
    &RawAvAttr::LAYOUT,
    &RawMrAttr::LAYOUT,
    &RawWaitAttr::LAYOUT,
];

#[cfg(test)]
mod tests;
