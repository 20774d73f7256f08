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

use crate::abi::layout::abi_struct;
use crate::abi::tables::{AtomicTable, CmTable, EpTable, MrTable, MsgTable, RmaTable, TaggedTable};
use crate::addr::Address;
use crate::attr::{DomainAttr, EpAttr, FabricAttr, Info, Nic, RxAttr, TxAttr};
use crate::enums::{AddrFormat, AvType, EpType, Progress, Protocol, ResourceMgmt, Threading};
use crate::error::{Errno, Error, Result};
use crate::flags::{Caps, CompOrder, Mode, MrMode, MsgOrder, OpFlags};
use crate::version::Version;

/// An opaque object pointer: the provider's object behind a handle. Only the provider
/// that produced it dereferences it.
pub type Obj = *mut c_void;

/// Object classes (the C library's `FI_CLASS_*` values), used when one object is handed
/// to another (bind, trywait).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum FidClass {
    /// A fabric.
    Fabric = 1,
    /// A domain.
    Domain = 2,
    /// An endpoint.
    Ep = 3,
    /// A scalable endpoint.
    Sep = 4,
    /// A receive context.
    RxCtx = 5,
    /// A shared receive context.
    SrxCtx = 6,
    /// A transmit context.
    TxCtx = 7,
    /// A shared transmit context.
    StxCtx = 8,
    /// A passive endpoint.
    Pep = 9,
    /// An address vector.
    Av = 11,
    /// A memory region.
    Mr = 12,
    /// An event queue.
    Eq = 13,
    /// A completion queue.
    Cq = 14,
    /// A counter.
    Cntr = 15,
    /// A wait set.
    Wait = 16,
    /// A poll set (`fi_poll_open`); kept by the host, never handed to a provider.
    Poll = 17,
    /// A multicast group membership (`fid_mc`, `fi_join`).
    Mc = 19,
}

impl FidClass {
    /// The class with C value `raw`, if known.
    pub const fn from_raw(raw: u32) -> Option<FidClass> {
        Some(match raw {
            1 => FidClass::Fabric,
            2 => FidClass::Domain,
            3 => FidClass::Ep,
            4 => FidClass::Sep,
            5 => FidClass::RxCtx,
            6 => FidClass::SrxCtx,
            7 => FidClass::TxCtx,
            8 => FidClass::StxCtx,
            9 => FidClass::Pep,
            11 => FidClass::Av,
            12 => FidClass::Mr,
            13 => FidClass::Eq,
            14 => FidClass::Cq,
            15 => FidClass::Cntr,
            16 => FidClass::Wait,
            17 => FidClass::Poll,
            19 => FidClass::Mc,
            _ => return None,
        })
    }

    /// A short lower-case name for messages (`"cq"`).
    pub const fn label(self) -> &'static str {
        match self {
            FidClass::Fabric => "fabric",
            FidClass::Domain => "domain",
            FidClass::Ep => "endpoint",
            FidClass::Sep => "scalable endpoint",
            FidClass::RxCtx => "rx context",
            FidClass::SrxCtx => "shared rx context",
            FidClass::TxCtx => "tx context",
            FidClass::StxCtx => "shared tx context",
            FidClass::Pep => "passive endpoint",
            FidClass::Av => "address vector",
            FidClass::Mr => "memory region",
            FidClass::Eq => "event queue",
            FidClass::Cq => "completion queue",
            FidClass::Cntr => "counter",
            FidClass::Wait => "wait set",
            FidClass::Poll => "poll set",
            FidClass::Mc => "multicast group",
        }
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

// ---------------------------------------------------------------------------------------
// Info and its attributes.

abi_struct! {
    /// Raw `TxAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawTxAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `op_flags` bits.
        pub op_flags: u64,
        /// `msg_order` bits.
        pub msg_order: u64,
        /// `comp_order` bits.
        pub comp_order: u64,
        /// `inject_size`.
        pub inject_size: usize,
        /// `size`.
        pub size: usize,
        /// `iov_limit`.
        pub iov_limit: usize,
        /// `rma_iov_limit`.
        pub rma_iov_limit: usize,
        /// `tclass`.
        pub tclass: u32,
    }

    /// Raw `RxAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawRxAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `op_flags` bits.
        pub op_flags: u64,
        /// `msg_order` bits.
        pub msg_order: u64,
        /// `comp_order` bits.
        pub comp_order: u64,
        /// `total_buffered_recv`.
        pub total_buffered_recv: usize,
        /// `size`.
        pub size: usize,
        /// `iov_limit`.
        pub iov_limit: usize,
    }

    /// Raw `EpAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawEpAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `EpType` C value.
        pub ep_type: u32,
        /// `Protocol` C value.
        pub protocol: u32,
        /// `protocol_version`.
        pub protocol_version: u32,
        /// `max_msg_size`.
        pub max_msg_size: usize,
        /// `msg_prefix_size`.
        pub msg_prefix_size: usize,
        /// `max_order_raw_size`.
        pub max_order_raw_size: usize,
        /// `max_order_war_size`.
        pub max_order_war_size: usize,
        /// `max_order_waw_size`.
        pub max_order_waw_size: usize,
        /// `mem_tag_format`.
        pub mem_tag_format: u64,
        /// `tx_ctx_cnt`.
        pub tx_ctx_cnt: usize,
        /// `rx_ctx_cnt`.
        pub rx_ctx_cnt: usize,
        /// `auth_key` (null = none).
        pub auth_key: RawStr,
    }

    /// Raw `DomainAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawDomainAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `domain` handle.
        pub domain: usize,
        /// `name`.
        pub name: RawStr,
        /// `Threading` C value.
        pub threading: u32,
        /// `Progress` C value.
        pub control_progress: u32,
        /// `Progress` C value.
        pub data_progress: u32,
        /// `ResourceMgmt` C value.
        pub resource_mgmt: u32,
        /// `AvType` C value.
        pub av_type: u32,
        /// `mr_mode` bits.
        pub mr_mode: u32,
        /// `mr_key_size`.
        pub mr_key_size: usize,
        /// `cq_data_size`.
        pub cq_data_size: usize,
        /// `cq_cnt`.
        pub cq_cnt: usize,
        /// `ep_cnt`.
        pub ep_cnt: usize,
        /// `tx_ctx_cnt`.
        pub tx_ctx_cnt: usize,
        /// `rx_ctx_cnt`.
        pub rx_ctx_cnt: usize,
        /// `max_ep_tx_ctx`.
        pub max_ep_tx_ctx: usize,
        /// `max_ep_rx_ctx`.
        pub max_ep_rx_ctx: usize,
        /// `max_ep_stx_ctx`.
        pub max_ep_stx_ctx: usize,
        /// `max_ep_srx_ctx`.
        pub max_ep_srx_ctx: usize,
        /// `cntr_cnt`.
        pub cntr_cnt: usize,
        /// `mr_iov_limit`.
        pub mr_iov_limit: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `auth_key` (null = none).
        pub auth_key: RawStr,
        /// `max_err_data`.
        pub max_err_data: usize,
        /// `mr_cnt`.
        pub mr_cnt: usize,
        /// `tclass`.
        pub tclass: u32,
    }

    /// Raw `FabricAttr`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawFabricAttr {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `fabric` handle.
        pub fabric: usize,
        /// `name`.
        pub name: RawStr,
        /// `prov_name`.
        pub prov_name: RawStr,
        /// `prov_version`, packed.
        pub prov_version: u32,
        /// `api_version`, packed.
        pub api_version: u32,
    }

    /// Raw `Nic`.
    #[derive(Clone, Copy, Debug)]
    pub struct RawNic {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `device_name`.
        pub device_name: RawStr,
        /// `device_id`.
        pub device_id: RawStr,
        /// `device_version`.
        pub device_version: RawStr,
        /// `vendor_id`.
        pub vendor_id: RawStr,
        /// `driver`.
        pub driver: RawStr,
        /// `firmware`.
        pub firmware: RawStr,
        /// `link_address`.
        pub link_address: RawStr,
        /// `mtu`.
        pub mtu: usize,
        /// `speed`.
        pub speed: usize,
        /// `link_up` (0 or 1).
        pub link_up: u32,
        /// `network_type`.
        pub network_type: RawStr,
    }

    /// Raw `Info`. Attribute pointers may be null (all-default attributes); `nic` null
    /// means no NIC.
    #[derive(Clone, Copy, Debug)]
    pub struct RawInfo {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// `caps` bits.
        pub caps: u64,
        /// `mode` bits.
        pub mode: u64,
        /// `AddrFormat` C value.
        pub addr_format: u32,
        /// `src_addr`.
        pub src_addr: RawAddr,
        /// `dest_addr`.
        pub dest_addr: RawAddr,
        /// `handle`.
        pub handle: usize,
        /// Transmit attributes.
        pub tx_attr: *const RawTxAttr,
        /// Receive attributes.
        pub rx_attr: *const RawRxAttr,
        /// Endpoint attributes.
        pub ep_attr: *const RawEpAttr,
        /// Domain attributes.
        pub domain_attr: *const RawDomainAttr,
        /// Fabric attributes.
        pub fabric_attr: *const RawFabricAttr,
        /// NIC, or null.
        pub nic: *const RawNic,
    }
}

/// A [`RawInfo`] with the storage its pointers point into. Moving it is fine (the
/// pointed-to data is boxed); the raw form is valid while this value lives.
pub struct RawInfoBox {
    raw: Box<RawInfo>,
    _tx: Box<RawTxAttr>,
    _rx: Box<RawRxAttr>,
    _ep: Box<RawEpAttr>,
    _domain: Box<RawDomainAttr>,
    _fabric: Box<RawFabricAttr>,
    _nic: Option<Box<RawNic>>,
    _bytes: Vec<Box<[u8]>>,
}

// SAFETY: a RawInfoBox owns every byte its raw pointers point to and never mutates them
// after construction, so moving it to or sharing it with another thread is sound.
unsafe impl Send for RawInfoBox {}
// SAFETY: see the `Send` impl: the data is immutable after construction.
unsafe impl Sync for RawInfoBox {}

/// Copies strings into owned boxes and hands out raw views of them.
#[derive(Default)]
struct Store {
    bytes: Vec<Box<[u8]>>,
}

impl Store {
    fn bytes(&mut self, b: Option<&[u8]>) -> RawStr {
        match b {
            None => RawStr::NONE,
            Some(b) => {
                let boxed: Box<[u8]> = b.into();
                let raw = RawStr {
                    ptr: boxed.as_ptr(),
                    len: boxed.len(),
                };
                self.bytes.push(boxed);
                raw
            }
        }
    }

    fn str(&mut self, s: &Option<String>) -> RawStr {
        self.bytes(s.as_deref().map(str::as_bytes))
    }

    fn addr(&mut self, a: &Option<Address>) -> RawAddr {
        match a {
            None => RawAddr::NONE,
            Some(a) => {
                let s = self.bytes(Some(&a.to_bytes()));
                RawAddr {
                    format: a.format().to_raw(),
                    ptr: s.ptr,
                    len: s.len,
                }
            }
        }
    }
}

impl RawInfoBox {
    /// The raw form of `info`.
    pub fn new(info: &Info) -> RawInfoBox {
        let mut st = Store::default();
        let tx = Box::new(tx_to_raw(&info.tx_attr));
        let rx = Box::new(rx_to_raw(&info.rx_attr));
        let e = &info.ep_attr;
        let ep = Box::new(RawEpAttr {
            struct_size: std::mem::size_of::<RawEpAttr>(),
            ep_type: e.ep_type.to_raw(),
            protocol: e.protocol.to_raw(),
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            auth_key: st.bytes(e.auth_key.as_deref()),
        });
        let d = &info.domain_attr;
        let domain = Box::new(RawDomainAttr {
            struct_size: std::mem::size_of::<RawDomainAttr>(),
            domain: d.domain,
            name: st.str(&d.name),
            threading: d.threading.to_raw(),
            control_progress: d.control_progress.to_raw(),
            data_progress: d.data_progress.to_raw(),
            resource_mgmt: d.resource_mgmt.to_raw(),
            av_type: d.av_type.to_raw(),
            mr_mode: d.mr_mode.bits(),
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps.bits(),
            mode: d.mode.bits(),
            auth_key: st.bytes(d.auth_key.as_deref()),
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass,
        });
        let f = &info.fabric_attr;
        let fabric = Box::new(RawFabricAttr {
            struct_size: std::mem::size_of::<RawFabricAttr>(),
            fabric: f.fabric,
            name: st.str(&f.name),
            prov_name: st.str(&f.prov_name),
            prov_version: f.prov_version.to_raw(),
            api_version: f.api_version.to_raw(),
        });
        let nic = info.nic.as_ref().map(|n| {
            Box::new(RawNic {
                struct_size: std::mem::size_of::<RawNic>(),
                device_name: st.str(&n.device_name),
                device_id: st.str(&n.device_id),
                device_version: st.str(&n.device_version),
                vendor_id: st.str(&n.vendor_id),
                driver: st.str(&n.driver),
                firmware: st.str(&n.firmware),
                link_address: st.str(&n.link_address),
                mtu: n.mtu,
                speed: n.speed,
                link_up: n.link_up as u32,
                network_type: st.str(&n.network_type),
            })
        });
        let raw = Box::new(RawInfo {
            struct_size: std::mem::size_of::<RawInfo>(),
            caps: info.caps.bits(),
            mode: info.mode.bits(),
            addr_format: info.addr_format.to_raw(),
            src_addr: st.addr(&info.src_addr),
            dest_addr: st.addr(&info.dest_addr),
            handle: info.handle,
            tx_attr: &*tx,
            rx_attr: &*rx,
            ep_attr: &*ep,
            domain_attr: &*domain,
            fabric_attr: &*fabric,
            nic: nic
                .as_deref()
                .map_or(std::ptr::null(), |n| n as *const RawNic),
        });
        RawInfoBox {
            raw,
            _tx: tx,
            _rx: rx,
            _ep: ep,
            _domain: domain,
            _fabric: fabric,
            _nic: nic,
            _bytes: st.bytes,
        }
    }

    /// The raw form; valid while `self` lives.
    pub fn as_ptr(&self) -> *const RawInfo {
        &*self.raw
    }
}

/// The raw form of transmit attributes.
pub fn tx_to_raw(t: &TxAttr) -> RawTxAttr {
    RawTxAttr {
        struct_size: std::mem::size_of::<RawTxAttr>(),
        caps: t.caps.bits(),
        mode: t.mode.bits(),
        op_flags: t.op_flags.bits(),
        msg_order: t.msg_order.bits(),
        comp_order: t.comp_order.bits(),
        inject_size: t.inject_size,
        size: t.size,
        iov_limit: t.iov_limit,
        rma_iov_limit: t.rma_iov_limit,
        tclass: t.tclass,
    }
}

/// The raw form of receive attributes.
pub fn rx_to_raw(r: &RxAttr) -> RawRxAttr {
    RawRxAttr {
        struct_size: std::mem::size_of::<RawRxAttr>(),
        caps: r.caps.bits(),
        mode: r.mode.bits(),
        op_flags: r.op_flags.bits(),
        msg_order: r.msg_order.bits(),
        comp_order: r.comp_order.bits(),
        total_buffered_recv: r.total_buffered_recv,
        size: r.size,
        iov_limit: r.iov_limit,
    }
}

fn tx_from(t: &RawTxAttr) -> TxAttr {
    TxAttr {
        caps: Caps::from_bits_retain(t.caps),
        mode: Mode::from_bits_retain(t.mode),
        op_flags: OpFlags::from_bits_retain(t.op_flags),
        msg_order: MsgOrder::from_bits_retain(t.msg_order),
        comp_order: CompOrder::from_bits_retain(t.comp_order),
        inject_size: t.inject_size,
        size: t.size,
        iov_limit: t.iov_limit,
        rma_iov_limit: t.rma_iov_limit,
        tclass: t.tclass,
    }
}

fn rx_from(r: &RawRxAttr) -> RxAttr {
    RxAttr {
        caps: Caps::from_bits_retain(r.caps),
        mode: Mode::from_bits_retain(r.mode),
        op_flags: OpFlags::from_bits_retain(r.op_flags),
        msg_order: MsgOrder::from_bits_retain(r.msg_order),
        comp_order: CompOrder::from_bits_retain(r.comp_order),
        total_buffered_recv: r.total_buffered_recv,
        size: r.size,
        iov_limit: r.iov_limit,
    }
}

/// Transmit attributes from their raw form (null → defaults).
///
/// # Safety
/// A non-null `p` must point to a valid [`RawTxAttr`].
pub unsafe fn tx_attr_from_raw(p: *const RawTxAttr) -> Result<TxAttr> {
    // SAFETY: forwarded from this function's contract.
    Ok(
        unsafe { sub(p, RawTxAttr::LAYOUT.size_for_minor(0), "tx_attr") }?
            .map(tx_from)
            .unwrap_or_default(),
    )
}

/// Receive attributes from their raw form (null → defaults).
///
/// # Safety
/// A non-null `p` must point to a valid [`RawRxAttr`].
pub unsafe fn rx_attr_from_raw(p: *const RawRxAttr) -> Result<RxAttr> {
    // SAFETY: forwarded from this function's contract.
    Ok(
        unsafe { sub(p, RawRxAttr::LAYOUT.size_for_minor(0), "rx_attr") }?
            .map(rx_from)
            .unwrap_or_default(),
    )
}

/// Read a sub-structure that starts with `struct_size`: `None` for a null pointer; an
/// error if it is shorter than its first layout.
///
/// # Safety
/// A non-null `p` must point to a valid structure of its declared `struct_size`.
unsafe fn sub<'a, T>(p: *const T, min: usize, what: &str) -> Result<Option<&'a T>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: every raw sub-structure begins with `struct_size: usize`; `p` is valid.
    let size = unsafe { *(p as *const usize) };
    if size < min {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{what}: struct_size {size} is smaller than the first layout ({min})"),
        ));
    }
    // SAFETY: at least the original layout is present, which is all of `T` at minor 0;
    // fields appended by later minors are checked against `struct_size` before use.
    Ok(Some(unsafe { &*p }))
}

fn closed_enum<T>(raw: u32, from: fn(u32) -> Option<T>, what: &str) -> Result<T> {
    from(raw).ok_or_else(|| Error::new(Errno::EINVAL, format!("{what}: invalid value {raw}")))
}

/// The [`Info`] a raw form describes (a deep copy).
///
/// # Safety
/// `p` must point to a valid [`RawInfo`] whose pointers are valid as documented there,
/// for the duration of the call.
pub unsafe fn info_from_raw(p: *const RawInfo) -> Result<Info> {
    // SAFETY: forwarded from this function's contract.
    let raw = unsafe { sub(p, RawInfo::LAYOUT.size_for_minor(0), "info") }?
        .ok_or_else(|| Error::new(Errno::EINVAL, "info: null pointer"))?;
    let mut info = Info::new();
    // SAFETY: every pointer read below (sub-structures, strings, addresses) is valid
    // by this function's contract.
    unsafe {
        info.caps = Caps::from_bits_retain(raw.caps);
        info.mode = Mode::from_bits_retain(raw.mode);
        info.addr_format = AddrFormat::from_raw(raw.addr_format);
        info.src_addr = raw.src_addr.to_address("info.src_addr")?;
        info.dest_addr = raw.dest_addr.to_address("info.dest_addr")?;
        info.handle = raw.handle;
        if let Some(t) = sub(raw.tx_attr, RawTxAttr::LAYOUT.size_for_minor(0), "tx_attr")? {
            info.tx_attr = tx_from(t);
        }
        if let Some(r) = sub(raw.rx_attr, RawRxAttr::LAYOUT.size_for_minor(0), "rx_attr")? {
            info.rx_attr = rx_from(r);
        }
        if let Some(e) = sub(raw.ep_attr, RawEpAttr::LAYOUT.size_for_minor(0), "ep_attr")? {
            info.ep_attr = EpAttr {
                ep_type: closed_enum(e.ep_type, EpType::from_raw, "ep_attr.type")?,
                protocol: Protocol::from_raw(e.protocol),
                protocol_version: e.protocol_version,
                max_msg_size: e.max_msg_size,
                msg_prefix_size: e.msg_prefix_size,
                max_order_raw_size: e.max_order_raw_size,
                max_order_war_size: e.max_order_war_size,
                max_order_waw_size: e.max_order_waw_size,
                mem_tag_format: e.mem_tag_format,
                tx_ctx_cnt: e.tx_ctx_cnt,
                rx_ctx_cnt: e.rx_ctx_cnt,
                auth_key: e.auth_key.bytes().map(<[u8]>::to_vec),
            };
        }
        if let Some(d) = sub(
            raw.domain_attr,
            RawDomainAttr::LAYOUT.size_for_minor(0),
            "domain_attr",
        )? {
            info.domain_attr = DomainAttr {
                domain: d.domain,
                name: d.name.to_string_opt("domain_attr.name")?,
                threading: closed_enum(d.threading, Threading::from_raw, "domain_attr.threading")?,
                control_progress: closed_enum(
                    d.control_progress,
                    Progress::from_raw,
                    "domain_attr.control_progress",
                )?,
                data_progress: closed_enum(
                    d.data_progress,
                    Progress::from_raw,
                    "domain_attr.data_progress",
                )?,
                resource_mgmt: closed_enum(
                    d.resource_mgmt,
                    ResourceMgmt::from_raw,
                    "domain_attr.resource_mgmt",
                )?,
                av_type: closed_enum(d.av_type, AvType::from_raw, "domain_attr.av_type")?,
                mr_mode: MrMode::from_bits_retain(d.mr_mode),
                mr_key_size: d.mr_key_size,
                cq_data_size: d.cq_data_size,
                cq_cnt: d.cq_cnt,
                ep_cnt: d.ep_cnt,
                tx_ctx_cnt: d.tx_ctx_cnt,
                rx_ctx_cnt: d.rx_ctx_cnt,
                max_ep_tx_ctx: d.max_ep_tx_ctx,
                max_ep_rx_ctx: d.max_ep_rx_ctx,
                max_ep_stx_ctx: d.max_ep_stx_ctx,
                max_ep_srx_ctx: d.max_ep_srx_ctx,
                cntr_cnt: d.cntr_cnt,
                mr_iov_limit: d.mr_iov_limit,
                caps: Caps::from_bits_retain(d.caps),
                mode: Mode::from_bits_retain(d.mode),
                auth_key: d.auth_key.bytes().map(<[u8]>::to_vec),
                max_err_data: d.max_err_data,
                mr_cnt: d.mr_cnt,
                tclass: d.tclass,
            };
        }
        if let Some(f) = sub(
            raw.fabric_attr,
            RawFabricAttr::LAYOUT.size_for_minor(0),
            "fabric_attr",
        )? {
            info.fabric_attr = FabricAttr {
                fabric: f.fabric,
                name: f.name.to_string_opt("fabric_attr.name")?,
                prov_name: f.prov_name.to_string_opt("fabric_attr.prov_name")?,
                prov_version: Version::from_raw(f.prov_version),
                api_version: Version::from_raw(f.api_version),
            };
        }
        if let Some(n) = sub(raw.nic, RawNic::LAYOUT.size_for_minor(0), "nic")? {
            info.nic = Some(Nic {
                device_name: n.device_name.to_string_opt("nic.device_name")?,
                device_id: n.device_id.to_string_opt("nic.device_id")?,
                device_version: n.device_version.to_string_opt("nic.device_version")?,
                vendor_id: n.vendor_id.to_string_opt("nic.vendor_id")?,
                driver: n.driver.to_string_opt("nic.driver")?,
                firmware: n.firmware.to_string_opt("nic.firmware")?,
                link_address: n.link_address.to_string_opt("nic.link_address")?,
                mtu: n.mtu,
                speed: n.speed,
                link_up: n.link_up != 0,
                network_type: n.network_type.to_string_opt("nic.network_type")?,
            });
        }
    }
    Ok(info)
}

/// Read `count` infos from an array of pointers.
///
/// # Safety
/// `ptrs` must be valid for `count` reads (or `count` be 0) and each element satisfy
/// [`info_from_raw`]'s contract.
pub unsafe fn infos_from_raw(ptrs: *const *const RawInfo, count: usize) -> Result<Vec<Info>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if ptrs.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{count} infos announced, null array"),
        ));
    }
    // SAFETY: valid for `count` elements by the caller's contract.
    let ptrs = unsafe { std::slice::from_raw_parts(ptrs, count) };
    ptrs.iter()
        .enumerate()
        // SAFETY: each element is valid by the caller's contract.
        .map(|(i, p)| unsafe { info_from_raw(*p) }.map_err(|e| e.context(format!("info #{i}"))))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Completion and event entries, data-path descriptors (C layouts).

abi_struct! {
    /// `struct iovec`: one buffer.
    #[derive(Clone, Copy, Debug)]
    pub struct Iov {
        /// Start of the buffer.
        pub base: *mut c_void,
        /// Length in bytes.
        pub len: usize,
    }

    /// `struct fi_rma_iov`: one remote buffer.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct RmaIov {
        /// Remote address (or offset, without `FI_MR_VIRT_ADDR`).
        pub addr: u64,
        /// Length in bytes.
        pub len: usize,
        /// Memory key.
        pub key: u64,
    }

    /// `struct fi_ioc`: one buffer of atomic elements.
    #[derive(Clone, Copy, Debug)]
    pub struct Ioc {
        /// Start of the buffer.
        pub addr: *mut c_void,
        /// Number of elements (not bytes).
        pub count: usize,
    }

    /// `struct fi_rma_ioc`: one remote buffer of atomic elements.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct RmaIoc {
        /// Remote address.
        pub addr: u64,
        /// Number of elements.
        pub count: usize,
        /// Memory key.
        pub key: u64,
    }

    /// `struct fi_msg`.
    #[derive(Clone, Copy, Debug)]
    pub struct Msg {
        /// Buffers.
        pub msg_iov: *const Iov,
        /// Memory descriptors, one per buffer (may be null).
        pub desc: *const *mut c_void,
        /// Number of buffers.
        pub iov_count: usize,
        /// Peer fabric address.
        pub addr: u64,
        /// Operation context.
        pub context: usize,
        /// Remote CQ data.
        pub data: u64,
    }

    /// `struct fi_msg_tagged`.
    #[derive(Clone, Copy, Debug)]
    pub struct MsgTagged {
        /// Buffers.
        pub msg_iov: *const Iov,
        /// Memory descriptors.
        pub desc: *const *mut c_void,
        /// Number of buffers.
        pub iov_count: usize,
        /// Peer fabric address.
        pub addr: u64,
        /// Tag.
        pub tag: u64,
        /// Tag bits to ignore (receives).
        pub ignore: u64,
        /// Operation context.
        pub context: usize,
        /// Remote CQ data.
        pub data: u64,
    }

    /// `struct fi_msg_rma`.
    #[derive(Clone, Copy, Debug)]
    pub struct MsgRma {
        /// Local buffers.
        pub msg_iov: *const Iov,
        /// Memory descriptors.
        pub desc: *const *mut c_void,
        /// Number of local buffers.
        pub iov_count: usize,
        /// Peer fabric address.
        pub addr: u64,
        /// Remote buffers.
        pub rma_iov: *const RmaIov,
        /// Number of remote buffers.
        pub rma_iov_count: usize,
        /// Operation context.
        pub context: usize,
        /// Remote CQ data.
        pub data: u64,
    }

    /// `struct fi_msg_atomic`.
    #[derive(Clone, Copy, Debug)]
    pub struct MsgAtomic {
        /// Local element buffers.
        pub msg_iov: *const Ioc,
        /// Memory descriptors.
        pub desc: *const *mut c_void,
        /// Number of local buffers.
        pub iov_count: usize,
        /// Peer fabric address.
        pub addr: u64,
        /// Remote element buffers.
        pub rma_iov: *const RmaIoc,
        /// Number of remote buffers.
        pub rma_iov_count: usize,
        /// `Datatype` C value.
        pub datatype: u32,
        /// `AtomicOp` C value.
        pub op: u32,
        /// Operation context.
        pub context: usize,
        /// Remote CQ data.
        pub data: u64,
    }

    /// `struct fi_atomic_attr`: what `query_atomic` and the `*valid` calls report.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct AtomicAttr {
        /// Largest number of elements in one operation.
        pub count: usize,
        /// Size of one element in bytes.
        pub size: usize,
    }

    /// `struct fi_cq_entry` (`FI_CQ_FORMAT_CONTEXT`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CqEntry {
        /// The operation's context.
        pub op_context: usize,
    }

    /// `struct fi_cq_msg_entry` (`FI_CQ_FORMAT_MSG`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CqMsgEntry {
        /// The operation's context.
        pub op_context: usize,
        /// Completion flags (`FI_SEND`, `FI_RECV`, …).
        pub flags: u64,
        /// Length of received data.
        pub len: usize,
    }

    /// `struct fi_cq_data_entry` (`FI_CQ_FORMAT_DATA`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CqDataEntry {
        /// The operation's context.
        pub op_context: usize,
        /// Completion flags.
        pub flags: u64,
        /// Length of received data.
        pub len: usize,
        /// Where data was placed (multi-receive buffers).
        pub buf: *mut c_void,
        /// Remote CQ data.
        pub data: u64,
    }

    /// `struct fi_cq_tagged_entry` (`FI_CQ_FORMAT_TAGGED`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CqTaggedEntry {
        /// The operation's context.
        pub op_context: usize,
        /// Completion flags.
        pub flags: u64,
        /// Length of received data.
        pub len: usize,
        /// Where data was placed.
        pub buf: *mut c_void,
        /// Remote CQ data.
        pub data: u64,
        /// The message's tag.
        pub tag: u64,
    }

    /// `struct fi_cq_err_entry`. `err_data` (provider-specific detail, `err_data_size`
    /// bytes) stays valid until the next read of the same CQ.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CqErrEntry {
        /// The operation's context.
        pub op_context: usize,
        /// Completion flags.
        pub flags: u64,
        /// Length of data received.
        pub len: usize,
        /// Where data was placed.
        pub buf: *mut c_void,
        /// Remote CQ data.
        pub data: u64,
        /// Tag.
        pub tag: u64,
        /// Length of data that did not fit (truncation).
        pub olen: usize,
        /// The error (positive `FI_*` code).
        pub err: i32,
        /// Provider-specific error code.
        pub prov_errno: i32,
        /// Provider-specific error data.
        pub err_data: *mut c_void,
        /// Size of `err_data` (in: the caller's buffer size; out: bytes written).
        pub err_data_size: usize,
    }

    /// `struct fi_eq_entry`: a generic event. `fid` identifies the object the event is
    /// about by the context it was opened with.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct EqEntry {
        /// The object's context.
        pub fid: usize,
        /// The event's context.
        pub context: usize,
        /// Event data.
        pub data: u64,
    }

    /// `struct fi_eq_cm_entry`: a connection event. `info` (connection requests only)
    /// is a raw info owned by the EQ's provider, released with the EQ's `free_info`
    /// slot; connection data follows the entry in the buffer (the read returns the
    /// entry's size plus the data's length).
    #[derive(Debug)]
    pub struct EqCmEntry {
        /// The object's context.
        pub fid: usize,
        /// Info of a connection request, or null.
        pub info: *mut RawInfo,
    }

    /// `struct fi_eq_err_entry`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct EqErrEntry {
        /// The object's context.
        pub fid: usize,
        /// The event's context.
        pub context: usize,
        /// Event data.
        pub data: u64,
        /// The error (positive `FI_*` code).
        pub err: i32,
        /// Provider-specific error code.
        pub prov_errno: i32,
        /// Provider-specific error data.
        pub err_data: *mut c_void,
        /// Size of `err_data`.
        pub err_data_size: usize,
    }
}

macro_rules! null_default {
    ($($t:ident { $($f:ident : $v:expr),* })*) => {$(
        impl Default for $t {
            fn default() -> Self {
                $t { $($f: $v),* }
            }
        }
    )*};
}

null_default! {
    CqDataEntry { op_context: 0, flags: 0, len: 0, buf: std::ptr::null_mut(), data: 0 }
    CqTaggedEntry { op_context: 0, flags: 0, len: 0, buf: std::ptr::null_mut(), data: 0, tag: 0 }
    CqErrEntry {
        op_context: 0, flags: 0, len: 0, buf: std::ptr::null_mut(), data: 0, tag: 0, olen: 0,
        err: 0, prov_errno: 0, err_data: std::ptr::null_mut(), err_data_size: 0
    }
    EqErrEntry {
        fid: 0, context: 0, data: 0, err: 0, prov_errno: 0, err_data: std::ptr::null_mut(),
        err_data_size: 0
    }
    Iov { base: std::ptr::null_mut(), len: 0 }
    Ioc { addr: std::ptr::null_mut(), count: 0 }
}

impl Iov {
    /// An iov over a slice the caller keeps alive (and does not access) until the
    /// operation completes.
    pub fn from_slice(buf: &[u8]) -> Iov {
        Iov {
            base: buf.as_ptr() as *mut c_void,
            len: buf.len(),
        }
    }
}

/// A CQ entry type of one of the four formats; lets `read` check at compile time which
/// buffer it fills, and at run time that it matches the CQ's format.
pub trait CqEntryFormat: Copy + Default + 'static {
    /// The format this entry type is read with.
    const FORMAT: crate::enums::CqFormat;
}

impl CqEntryFormat for CqEntry {
    const FORMAT: crate::enums::CqFormat = crate::enums::CqFormat::Context;
}
impl CqEntryFormat for CqMsgEntry {
    const FORMAT: crate::enums::CqFormat = crate::enums::CqFormat::Msg;
}
impl CqEntryFormat for CqDataEntry {
    const FORMAT: crate::enums::CqFormat = crate::enums::CqFormat::Data;
}
impl CqEntryFormat for CqTaggedEntry {
    const FORMAT: crate::enums::CqFormat = crate::enums::CqFormat::Tagged;
}

/// The size in bytes of one entry of `format` (`Unspec` reads as `Context`).
pub const fn cq_entry_size(format: crate::enums::CqFormat) -> usize {
    use crate::enums::CqFormat;
    match format {
        CqFormat::Unspec | CqFormat::Context => std::mem::size_of::<CqEntry>(),
        CqFormat::Msg => std::mem::size_of::<CqMsgEntry>(),
        CqFormat::Data => std::mem::size_of::<CqDataEntry>(),
        CqFormat::Tagged => std::mem::size_of::<CqTaggedEntry>(),
    }
}

// ---------------------------------------------------------------------------------------
// Object attributes (raw forms).

abi_struct! {
    /// Raw `CqAttr` (`struct fi_cq_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawCqAttr {
        /// Queue size (entries).
        pub size: usize,
        /// Flags.
        pub flags: u64,
        /// `CqFormat` C value.
        pub format: u32,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Signaling vector.
        pub signaling_vector: i32,
        /// `CqWaitCond` C value.
        pub wait_cond: u32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
    }

    /// Raw `EqAttr` (`struct fi_eq_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawEqAttr {
        /// Queue size.
        pub size: usize,
        /// Flags.
        pub flags: u64,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Signaling vector.
        pub signaling_vector: i32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
    }

    /// Raw `CntrAttr` (`struct fi_cntr_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawCntrAttr {
        /// Counted events (`FI_CNTR_EVENTS_COMP` = 0).
        pub events: u32,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
        /// Flags.
        pub flags: u64,
    }

    /// Raw `AvAttr` (`struct fi_av_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawAvAttr {
        /// `AvType` C value.
        pub av_type: u32,
        /// Bits of a fabric address that select a receive context.
        pub rx_ctx_bits: i32,
        /// Expected number of addresses.
        pub count: usize,
        /// Endpoints per node.
        pub ep_per_node: usize,
        /// Name of a shared AV, or none.
        pub name: RawStr,
        /// Requested base address of a shared AV mapping.
        pub map_addr: usize,
        /// `AvFlags` bits.
        pub flags: u64,
    }

    /// Raw `MrAttr` (`struct fi_mr_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawMrAttr {
        /// Buffers to register.
        pub mr_iov: *const Iov,
        /// Number of buffers.
        pub iov_count: usize,
        /// Access bits (`FI_SEND`, `FI_RECV`, `FI_READ`, `FI_WRITE`, `FI_REMOTE_*`).
        pub access: u64,
        /// Offset (with `FI_MR_VIRT_ADDR` unset: base of remote offsets).
        pub offset: u64,
        /// Requested key (without `FI_MR_PROV_KEY`).
        pub requested_key: u64,
        /// Context reported in asynchronous registration events.
        pub context: usize,
        /// Authorization key, or none.
        pub auth_key: RawStr,
        /// `HmemIface` C value.
        pub iface: u32,
        /// Device identifier for the interface.
        pub device: u64,
    }

    /// Raw `WaitAttr` (`struct fi_wait_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawWaitAttr {
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Flags.
        pub flags: u64,
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
mod tests {
    use super::*;
    use crate::enums::{CqFormat, Threading};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    fn opt_string() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z0-9_;. -]{0,12}")
    }

    fn address() -> impl Strategy<Value = Option<Address>> {
        proptest::option::of(prop_oneof![
            (any::<u32>(), any::<u16>())
                .prop_map(|(ip, port)| Address::Inet(SocketAddrV4::new(Ipv4Addr::from(ip), port))),
            (any::<u128>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
                |(ip, port, fl, sc)| {
                    Address::Inet6(SocketAddrV6::new(Ipv6Addr::from(ip), port, fl, sc))
                }
            ),
            "[a-z]{1,8}://[a-z0-9]{0,10}".prop_map(Address::Str),
            (10u32..16, proptest::collection::vec(any::<u8>(), 1..24)).prop_map(|(f, bytes)| {
                Address::Raw {
                    format: AddrFormat::from_raw(f),
                    bytes,
                }
            }),
        ])
    }

    fn pick<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
        proptest::sample::select(all)
    }

    prop_compose! {
        fn tx()(caps in any::<u64>(), mode in any::<u64>(), op in any::<u64>(), mo in any::<u64>(),
                co in any::<u64>(), n in any::<[usize; 4]>(), tc in any::<u32>()) -> TxAttr {
            TxAttr {
                caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
                op_flags: OpFlags::from_bits_retain(op), msg_order: MsgOrder::from_bits_retain(mo),
                comp_order: CompOrder::from_bits_retain(co), inject_size: n[0], size: n[1],
                iov_limit: n[2], rma_iov_limit: n[3], tclass: tc,
            }
        }
    }

    prop_compose! {
        fn rx()(caps in any::<u64>(), mode in any::<u64>(), op in any::<u64>(), mo in any::<u64>(),
                co in any::<u64>(), n in any::<[usize; 3]>()) -> RxAttr {
            RxAttr {
                caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
                op_flags: OpFlags::from_bits_retain(op), msg_order: MsgOrder::from_bits_retain(mo),
                comp_order: CompOrder::from_bits_retain(co), total_buffered_recv: n[0], size: n[1],
                iov_limit: n[2],
            }
        }
    }

    prop_compose! {
        fn ep()(t in pick(EpType::ALL), proto in any::<u32>(), pv in any::<u32>(), n in any::<[usize; 7]>(),
                tag in any::<u64>(), key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))) -> EpAttr {
            EpAttr {
                ep_type: t, protocol: Protocol::from_raw(proto), protocol_version: pv,
                max_msg_size: n[0], msg_prefix_size: n[1], max_order_raw_size: n[2],
                max_order_war_size: n[3], max_order_waw_size: n[4], mem_tag_format: tag,
                tx_ctx_cnt: n[5], rx_ctx_cnt: n[6], auth_key: key,
            }
        }
    }

    prop_compose! {
        fn domain()(h in any::<usize>(), name in opt_string(), th in pick(Threading::ALL),
                    cp in pick(Progress::ALL), dp in pick(Progress::ALL), rm in pick(ResourceMgmt::ALL),
                    av in pick(AvType::ALL), mr in any::<u32>(), n in any::<[usize; 16]>(),
                    caps in any::<u64>(), mode in any::<u64>(), tc in any::<u32>(),
                    key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))) -> DomainAttr {
            DomainAttr {
                domain: h, name, threading: th, control_progress: cp, data_progress: dp,
                resource_mgmt: rm, av_type: av, mr_mode: MrMode::from_bits_retain(mr),
                mr_key_size: n[0], cq_data_size: n[1], cq_cnt: n[2], ep_cnt: n[3], tx_ctx_cnt: n[4],
                rx_ctx_cnt: n[5], max_ep_tx_ctx: n[6], max_ep_rx_ctx: n[7], max_ep_stx_ctx: n[8],
                max_ep_srx_ctx: n[9], cntr_cnt: n[10], mr_iov_limit: n[11],
                caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode), auth_key: key,
                max_err_data: n[12], mr_cnt: n[13], tclass: tc,
            }
        }
    }

    prop_compose! {
        fn nic()(s in proptest::collection::vec(opt_string(), 8), mtu in any::<usize>(), speed in any::<usize>(),
                 up in any::<bool>()) -> Nic {
            Nic {
                device_name: s[0].clone(), device_id: s[1].clone(), device_version: s[2].clone(),
                vendor_id: s[3].clone(), driver: s[4].clone(), firmware: s[5].clone(),
                link_address: s[6].clone(), mtu, speed, link_up: up, network_type: s[7].clone(),
            }
        }
    }

    prop_compose! {
        fn info()(caps in any::<u64>(), mode in any::<u64>(), fmt in any::<u32>(), src in address(),
                  dest in address(), handle in any::<usize>(), tx in tx(), rx in rx(), ep in ep(),
                  domain in domain(), fname in opt_string(), pname in opt_string(), f in any::<usize>(),
                  pv in any::<u32>(), av in any::<u32>(), nic in proptest::option::of(nic())) -> Info {
            Info {
                caps: Caps::from_bits_retain(caps), mode: Mode::from_bits_retain(mode),
                addr_format: AddrFormat::from_raw(fmt), src_addr: src, dest_addr: dest, handle,
                tx_attr: tx, rx_attr: rx, ep_attr: ep, domain_attr: domain,
                fabric_attr: FabricAttr {
                    fabric: f, name: fname, prov_name: pname,
                    prov_version: Version::from_raw(pv), api_version: Version::from_raw(av),
                },
                nic,
            }
        }
    }

    proptest! {
        #[test]
        fn info_round_trips_through_the_raw_form(i in info()) {
            let b = RawInfoBox::new(&i);
            // SAFETY: the box keeps every pointer valid.
            let back = unsafe { info_from_raw(b.as_ptr()) }.unwrap();
            prop_assert_eq!(back, i);
        }
    }

    #[test]
    fn default_and_empty_strings_survive() {
        let mut i = Info::new();
        i.fabric_attr.name = Some(String::new());
        i.ep_attr.auth_key = Some(Vec::new());
        let b = RawInfoBox::new(&i);
        // SAFETY: the box keeps every pointer valid.
        assert_eq!(unsafe { info_from_raw(b.as_ptr()) }.unwrap(), i);
    }

    #[test]
    fn bad_raw_forms_are_einval() {
        let i = Info::new();
        let b = RawInfoBox::new(&i);
        // An unknown endpoint type.
        let mut ep = RawInfoBox::new(&i);
        // SAFETY: the box's ep_attr pointer is valid.
        let mut raw_ep = unsafe { *ep.raw.ep_attr };
        raw_ep.ep_type = 99;
        ep.raw.ep_attr = &raw_ep;
        // SAFETY: every pointer is valid (raw_ep lives on this frame).
        let e = unsafe { info_from_raw(ep.as_ptr()) }.unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert_eq!(e.message(), "ep_attr.type: invalid value 99");
        // A structure shorter than its first layout.
        let mut short = RawInfoBox::new(&i);
        short.raw.struct_size = 8;
        assert_eq!(
            // SAFETY: as above.
            unsafe { info_from_raw(short.as_ptr()) }.unwrap_err().code(),
            Errno::EINVAL
        );
        // Null pointers.
        assert_eq!(
            // SAFETY: null is handled.
            unsafe { info_from_raw(std::ptr::null()) }
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
        // Null attribute pointers mean defaults.
        let mut bare = RawInfoBox::new(&i);
        bare.raw.tx_attr = std::ptr::null();
        bare.raw.domain_attr = std::ptr::null();
        // SAFETY: null sub-structures are allowed.
        assert_eq!(unsafe { info_from_raw(bare.as_ptr()) }.unwrap(), i);
        // Invalid UTF-8 in a name.
        let bytes = [0xffu8, 0xfe];
        let mut utf = RawInfoBox::new(&i);
        let mut fa = RawFabricAttr {
            struct_size: std::mem::size_of::<RawFabricAttr>(),
            fabric: 0,
            name: RawStr::from_bytes(&bytes),
            prov_name: RawStr::NONE,
            prov_version: 0,
            api_version: 0,
        };
        utf.raw.fabric_attr = &mut fa;
        // SAFETY: all pointers valid.
        let e = unsafe { info_from_raw(utf.as_ptr()) }.unwrap_err();
        assert_eq!(e.message(), "fabric_attr.name: not valid UTF-8");
        drop(b);
    }

    #[test]
    fn entries_have_the_c_layouts() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<CqEntry>(), 8);
        assert_eq!(size_of::<CqMsgEntry>(), 24);
        assert_eq!(size_of::<CqDataEntry>(), 40);
        assert_eq!(size_of::<CqTaggedEntry>(), 48);
        assert_eq!(size_of::<CqErrEntry>(), 80);
        assert_eq!(offset_of!(CqErrEntry, olen), 48);
        assert_eq!(offset_of!(CqErrEntry, err), 56);
        assert_eq!(offset_of!(CqErrEntry, err_data), 64);
        assert_eq!(size_of::<EqEntry>(), 24);
        assert_eq!(size_of::<EqCmEntry>(), 16);
        assert_eq!(size_of::<EqErrEntry>(), 48);
        assert_eq!(size_of::<Msg>(), 48);
        assert_eq!(size_of::<MsgTagged>(), 64);
        assert_eq!(size_of::<MsgRma>(), 64);
        assert_eq!(size_of::<MsgAtomic>(), 72);
        assert_eq!(size_of::<RmaIov>(), 24);
        assert_eq!(size_of::<Iov>(), 16);
        assert_eq!(cq_entry_size(CqFormat::Unspec), 8);
        assert_eq!(cq_entry_size(CqFormat::Tagged), 48);
    }

    #[test]
    fn err_buf_truncates_at_a_char_boundary() {
        let mut buf = [0u8; 5];
        let mut eb = ErrBuf::new(&mut buf);
        // SAFETY: `eb` is over `buf`.
        unsafe { ErrBuf::write(&mut eb, "abcdé!") };
        // SAFETY: `buf` is still alive.
        assert_eq!(unsafe { eb.message() }, "abcd");
        // SAFETY: null is allowed.
        unsafe { ErrBuf::write(std::ptr::null_mut(), "ignored") };
    }
}
