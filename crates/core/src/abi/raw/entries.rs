//! Completion and event entries, data-path descriptors (C layouts) (see [`super`] for the conventions).

use super::*;

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

impl Msg {
    /// The tagged message of the same buffers, peer, context and data, with `tag` and
    /// `ignore` (an `fi_msg_tagged` is an `fi_msg` plus those two).
    pub fn tagged(self, tag: u64, ignore: u64) -> MsgTagged {
        MsgTagged {
            msg_iov: self.msg_iov,
            desc: self.desc,
            iov_count: self.iov_count,
            addr: self.addr,
            tag,
            ignore,
            context: self.context,
            data: self.data,
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
