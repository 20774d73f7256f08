//! An operation as one value.
//!
//! Kit's data calls ([`dataops`](crate::dataops)) reduce the forty data calls of an
//! endpoint to four requests a provider's [`DataPath`](crate::dataops::DataPath)
//! submits: a [`SendRequest`] (messages and tagged messages), a
//! [`PostedRecv`](crate::tagmatch::PostedRecv) (receives), an [`RmaRequest`] (reads and
//! writes) and an [`AtomicRequest`] (base, fetch and compare atomics). Each carries the
//! whole operation — buffers, peer, tag, remote CQ data, context, flags — so no
//! operation travels as a positional list.
//!
//! Invariants, established by [`dataops`](crate::dataops) before a request is built:
//! - the buffers of a request (`IoList`, [`Local::bufs`]) are the application's, valid
//!   until the operation completes (for an inject, during the call only);
//! - `inject` requests carry context 0 and no descriptors, and their payload fits
//!   the provider's `inject_size`;
//! - `data` is `Some` only where the call carries remote CQ data.
//!
//! Nothing here dereferences a buffer.

use ofi_core::abi::raw::{Ioc, Iov, RmaIoc, RmaIov};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::Desc;
use ofi_core::OpFlags;

use crate::iov::IoList;

/// A message or tagged message to send.
#[derive(Clone, Copy, Debug)]
pub struct SendRequest {
    /// The payload (application buffers).
    pub iov: IoList,
    /// The destination's fabric address.
    pub dest: u64,
    /// The operation's context (0 for an inject).
    pub context: usize,
    /// The tag of a tagged send; `None` for an untagged message.
    pub tag: Option<u64>,
    /// Remote CQ data, when the call carries it.
    pub data: Option<u64>,
    /// The operation's flags (the call's own, or the endpoint's `op_flags`).
    pub flags: OpFlags,
    /// An `fi_inject*` call: no completion, the buffer is free on return.
    pub inject: bool,
}

impl SendRequest {
    /// Whether this is a tagged send.
    #[inline]
    pub fn tagged(&self) -> bool {
        self.tag.is_some()
    }

    /// The flags of this send's completion: `FI_SEND` with `FI_TAGGED` or `FI_MSG`.
    #[inline]
    pub fn completion_flags(&self) -> OpFlags {
        OpFlags::SEND
            | if self.tagged() {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            }
    }
}

/// Local buffers of an operation with their memory descriptors (one per buffer, or
/// none).
#[derive(Clone, Copy, Debug)]
pub struct Local<'a, T> {
    /// The buffers.
    pub bufs: &'a [T],
    /// Their descriptors (`fi_mr_desc`); empty when the call passed none.
    pub desc: &'a [Desc],
}

impl<T> Local<'_, T> {
    /// The descriptors as integers (what a provider keeps past the call).
    pub fn desc_words(&self) -> Vec<usize> {
        self.desc.iter().map(|d| *d as usize).collect()
    }
}

impl Local<'_, Iov> {
    /// Bytes in all buffers.
    pub fn total(&self) -> usize {
        self.bufs.iter().map(|v| v.len).sum()
    }
}

impl Local<'_, Ioc> {
    /// Elements in all buffers.
    pub fn count(&self) -> usize {
        self.bufs.iter().map(|v| v.count).sum()
    }
}

/// Which way an RMA moves data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaDir {
    /// `fi_read*`: from the remote buffer into the local ones.
    Read,
    /// `fi_write*`: from the local buffers into the remote one.
    Write,
}

/// An RMA read or write of one remote buffer.
#[derive(Clone, Copy, Debug)]
pub struct RmaRequest<'a> {
    /// Read or write.
    pub dir: RmaDir,
    /// The local buffers.
    pub local: Local<'a, Iov>,
    /// The target's fabric address.
    pub peer: u64,
    /// The remote buffer (address, length = the local total, key); with several remote
    /// buffers, the first of [`remote_iov`](Self::remote_iov).
    pub remote: RmaIov,
    /// Every remote buffer, `remote` first: one, or up to the provider's
    /// [`DataPath::RMA_IOV_LIMIT`](crate::dataops::DataPath::RMA_IOV_LIMIT) for an RMA
    /// message (`fi_readmsg` / `fi_writemsg`).
    pub remote_iov: &'a [RmaIov],
    /// The operation's context (0 for an inject).
    pub context: usize,
    /// Remote CQ data of a write, when the call carries it.
    pub data: Option<u64>,
    /// The operation's flags.
    pub flags: OpFlags,
    /// An `fi_inject_write*` call.
    pub inject: bool,
}

impl RmaRequest<'_> {
    /// Whether this is a read.
    #[inline]
    pub fn is_read(&self) -> bool {
        self.dir == RmaDir::Read
    }
}

/// An atomic (base, fetch or compare) on one remote ioc.
#[derive(Clone, Copy, Debug)]
pub struct AtomicRequest<'a> {
    /// Base, fetch or compare.
    pub kind: AtomicKind,
    /// The operands (none for a fetch of `FI_ATOMIC_READ`).
    pub operands: Local<'a, Ioc>,
    /// The compare values (compare atomics only).
    pub compare: Local<'a, Ioc>,
    /// Where the original values go (fetch and compare atomics only).
    pub result: Local<'a, Ioc>,
    /// The target's fabric address.
    pub peer: u64,
    /// The remote elements (address, count, key).
    pub remote: RmaIoc,
    /// The element type.
    pub datatype: Datatype,
    /// The operation.
    pub op: AtomicOp,
    /// The operation's context (0 for an inject).
    pub context: usize,
    /// The operation's flags.
    pub flags: OpFlags,
    /// An `fi_inject_atomic` call.
    pub inject: bool,
}
