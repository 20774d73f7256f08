//! Completion queues (`fi_cq`): attributes, the typed view of a read buffer that
//! providers fill ([`CqBuf`]), and the public [`CompletionQueue`].
//!
//! A CQ is opened with a format (`FI_CQ_FORMAT_CONTEXT`, `_MSG`, `_DATA`, `_TAGGED`;
//! `Unspec` becomes `Context`) and every read must use the matching entry type
//! ([`CqEntry`], [`CqMsgEntry`], [`CqDataEntry`], [`CqTaggedEntry`]): a mismatch is
//! `FI_EINVAL`. Reads return the number of entries, `FI_EAGAIN` when there are none and
//! `FI_EAVAIL` when an error entry is next (read it with [`CompletionQueue::readerr`]).
//! Every read, including a read of zero entries, drives the provider's progress.
//!
//! Data-path calls (reads) make one indirect call into the provider: no allocation, no
//! lock, and errors carry only their code. Nothing here panics.

use std::ffi::c_void;
use std::sync::Arc;

use crate::abi::object::Node;
use crate::abi::raw::{
    CqDataEntry, CqEntry, CqEntryFormat, CqErrEntry, CqMsgEntry, CqTaggedEntry, RawCqAttr,
};
use crate::abi::tables::CqTable;
use crate::enums::{CqFormat, CqWaitCond, WaitObj};
use crate::error::{Errno, Error, Result};

/// Completion queue attributes (`struct fi_cq_attr`, without the wait set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CqAttr {
    /// Number of entries (0: the provider's default).
    pub size: usize,
    /// Flags (`FI_AFFINITY`, …).
    pub flags: u64,
    /// Entry format; `Unspec` means `Context`.
    pub format: CqFormat,
    /// Wait object (`None`: polling only).
    pub wait_obj: WaitObj,
    /// Signaling vector (with `FI_AFFINITY`).
    pub signaling_vector: i32,
    /// Wait condition of blocking reads.
    pub wait_cond: CqWaitCond,
}

impl CqAttr {
    /// Attributes with this format and defaults elsewhere.
    pub fn with_format(format: CqFormat) -> CqAttr {
        CqAttr {
            format,
            ..CqAttr::default()
        }
    }

    /// The raw form.
    pub fn to_raw(&self) -> RawCqAttr {
        RawCqAttr {
            size: self.size,
            flags: self.flags,
            format: self.format.to_raw(),
            wait_obj: self.wait_obj.to_raw(),
            signaling_vector: self.signaling_vector,
            wait_cond: self.wait_cond.to_raw(),
            wait_set: std::ptr::null_mut(),
        }
    }

    /// From the raw form; unknown enumeration values are `FI_EINVAL`, a wait set is
    /// `FI_ENOSYS` (not supported through this interface yet).
    pub fn from_raw(r: &RawCqAttr) -> Result<CqAttr> {
        Ok(CqAttr {
            size: r.size,
            flags: r.flags,
            format: CqFormat::try_from(r.format)?,
            wait_obj: crate::wait::raw_wait_obj(r.wait_obj, r.wait_set, "CQ")?,
            signaling_vector: r.signaling_vector,
            wait_cond: CqWaitCond::try_from(r.wait_cond)?,
        })
    }
}

/// An error completion with its error data owned: the fields of `fi_cq_err_entry` as a
/// provider reports them (`CqOps::readerr`) and as
/// [`CompletionQueue::readerr_owned`] returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqError {
    /// The operation's context.
    pub op_context: usize,
    /// Completion flags.
    pub flags: u64,
    /// Length of data received.
    pub len: usize,
    /// Where data was placed (an address, as an integer).
    pub buf: usize,
    /// Remote CQ data.
    pub data: u64,
    /// Tag.
    pub tag: u64,
    /// Length of data that did not fit (truncation).
    pub olen: usize,
    /// The error.
    pub err: Errno,
    /// Provider-specific error code.
    pub prov_errno: i32,
    /// Provider-specific error data (empty: none).
    pub err_data: Vec<u8>,
}

impl CqError {
    /// An error entry for the operation `op_context` failing with `err`; other fields
    /// zero, no error data.
    pub fn new(op_context: usize, err: Errno) -> CqError {
        CqError {
            op_context,
            flags: 0,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            olen: 0,
            err,
            prov_errno: 0,
            err_data: Vec::new(),
        }
    }

    /// The raw entry without its error data (`err_data` null, `err_data_size` 0).
    pub fn to_raw(&self) -> CqErrEntry {
        CqErrEntry {
            op_context: self.op_context,
            flags: self.flags,
            len: self.len,
            buf: self.buf as *mut c_void,
            data: self.data,
            tag: self.tag,
            olen: self.olen,
            err: self.err.0,
            prov_errno: self.prov_errno,
            err_data: std::ptr::null_mut(),
            err_data_size: 0,
        }
    }

    /// From a raw entry, with `err_data` as its error data.
    pub fn from_raw(e: &CqErrEntry, err_data: Vec<u8>) -> CqError {
        CqError {
            op_context: e.op_context,
            flags: e.flags,
            len: e.len,
            buf: e.buf as usize,
            data: e.data,
            tag: e.tag,
            olen: e.olen,
            err: Errno(e.err),
            prov_errno: e.prov_errno,
            err_data,
        }
    }
}

/// Size of the buffer [`CompletionQueue::readerr_owned`] offers the provider for error
/// data: longer data is truncated to this (fi_cq(3) copy rule).
pub const READERR_DATA_MAX: usize = 256;

/// The caller's read buffer as a provider sees it: a slice of the CQ's entry type.
#[derive(Debug)]
pub enum CqBuf<'a> {
    /// `FI_CQ_FORMAT_CONTEXT`.
    Context(&'a mut [CqEntry]),
    /// `FI_CQ_FORMAT_MSG`.
    Msg(&'a mut [CqMsgEntry]),
    /// `FI_CQ_FORMAT_DATA`.
    Data(&'a mut [CqDataEntry]),
    /// `FI_CQ_FORMAT_TAGGED`.
    Tagged(&'a mut [CqTaggedEntry]),
}

#[cold]
fn bad_cq_buffer() -> Error {
    Error::new(Errno::EINVAL, "CQ read buffer is null or misaligned")
}

/// A slice from a raw buffer (count 0 → empty; null or misaligned → `FI_EINVAL`).
///
/// # Safety
/// A non-null `p` must be valid for `n` writes of `T` for `'a`.
#[inline]
unsafe fn entries<'a, T>(p: *mut c_void, n: usize) -> Result<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(bad_cq_buffer());
    }
    // SAFETY: non-null, aligned, valid for `n` by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) })
}

impl<'a> CqBuf<'a> {
    /// A view of `count` entries of `format` at `buf`.
    ///
    /// # Safety
    /// A non-null `buf` must be valid for writes of `count` entries of `format` for `'a`.
    #[inline]
    pub unsafe fn from_raw(format: CqFormat, buf: *mut c_void, count: usize) -> Result<CqBuf<'a>> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            Ok(match format {
                CqFormat::Unspec | CqFormat::Context => CqBuf::Context(entries(buf, count)?),
                CqFormat::Msg => CqBuf::Msg(entries(buf, count)?),
                CqFormat::Data => CqBuf::Data(entries(buf, count)?),
                CqFormat::Tagged => CqBuf::Tagged(entries(buf, count)?),
            })
        }
    }

    /// The format of the entries.
    pub fn format(&self) -> CqFormat {
        match self {
            CqBuf::Context(_) => CqFormat::Context,
            CqBuf::Msg(_) => CqFormat::Msg,
            CqBuf::Data(_) => CqFormat::Data,
            CqBuf::Tagged(_) => CqFormat::Tagged,
        }
    }

    /// Number of entries the caller has room for.
    pub fn len(&self) -> usize {
        match self {
            CqBuf::Context(b) => b.len(),
            CqBuf::Msg(b) => b.len(),
            CqBuf::Data(b) => b.len(),
            CqBuf::Tagged(b) => b.len(),
        }
    }

    /// True if the caller asked for zero entries (a progress-only read).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Store completion `e` at index `i`, keeping the fields the format has. Returns
    /// false (and stores nothing) if `i` is out of range.
    pub fn set(&mut self, i: usize, e: &CqTaggedEntry) -> bool {
        match self {
            CqBuf::Context(b) => b.get_mut(i).map(|s| {
                *s = CqEntry {
                    op_context: e.op_context,
                }
            }),
            CqBuf::Msg(b) => b.get_mut(i).map(|s| {
                *s = CqMsgEntry {
                    op_context: e.op_context,
                    flags: e.flags,
                    len: e.len,
                }
            }),
            CqBuf::Data(b) => b.get_mut(i).map(|s| {
                *s = CqDataEntry {
                    op_context: e.op_context,
                    flags: e.flags,
                    len: e.len,
                    buf: e.buf,
                    data: e.data,
                }
            }),
            CqBuf::Tagged(b) => b.get_mut(i).map(|s| *s = *e),
        }
        .is_some()
    }
}

/// The `strerror_with_data` method (with these docs) of a queue whose table `$Table`
/// has a `strerror` slot: CQ and EQ, whose list entries `strerror` call it. The slot
/// writes the provider's text into a buffer; its failure gives the library's text of
/// `prov_errno` (see `strerror_text`).
macro_rules! strerror_with_data {
    ($(#[$doc:meta])* $Table:ident) => {
        $(#[$doc])*
        pub fn strerror_with_data(&self, prov_errno: i32, err_data: &[u8]) -> String {
            $crate::abi::object::strerror_text(prov_errno, err_data, |data, buf, len| {
                // SAFETY: `buf` valid for `len` bytes; `data` null or valid for reads.
                unsafe {
                    $crate::abi::tables::call_slot!(
                        self.t(),
                        $Table.strerror(self.obj, prov_errno, data, buf, len)
                    )
                }
            })
        }
    };
}
pub(crate) use strerror_with_data;

crate::abi::ctl_ops::host_object! {
    /// An open completion queue.
    CompletionQueue(CqTable, "a completion queue") {
        format: CqFormat,
    }
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node
            .fmt_object(f, "CompletionQueue", &[("format", &self.format)])
    }
}

impl CompletionQueue {
    /// The entry format reads must use.
    pub fn format(&self) -> CqFormat {
        self.format
    }

    #[inline(always)]
    pub(crate) fn check<E: CqEntryFormat>(&self) -> Result<()> {
        if E::FORMAT == self.format {
            Ok(())
        } else {
            Err(Error::new(
                Errno::EINVAL,
                "CQ read with an entry type that is not the CQ's format",
            ))
        }
    }

    // ---- one method per entry of the list (`for_each_cq_op!`) ----

    crate::for_each_cq_op!(crate::abi::ctl_ops::ctl_wrappers);

    strerror_with_data! {
        /// `fi_cq_strerror` with the entry's error data: pass the `err_data` of the
        /// [`CqError`] the last [`readerr_owned`](Self::readerr_owned) returned (the buffer
        /// itself, not a copy: the provider recognises the data it handed out by its
        /// address, as the C call passes no length). Empty: no data.
        CqTable
    }
}

/// Open a CQ through a domain's table (shared by [`crate::domain::Domain::cq_open`]).
pub(crate) fn open(
    parent: &Arc<Node>,
    attr: &CqAttr,
    set: Option<&crate::wait::WaitSet>,
    call: impl FnOnce(
        *const RawCqAttr,
        *mut crate::abi::raw::RawObj,
        *mut crate::abi::raw::ErrBuf,
    ) -> i32,
) -> Result<CompletionQueue> {
    let mut attr = *attr;
    if attr.format == CqFormat::Unspec {
        attr.format = CqFormat::Context;
    }
    let (obj, ops, node) = crate::abi::object::open_signalling::<CqTable, _>(
        parent,
        attr.to_raw(),
        set,
        crate::abi::raw::FidClass::Cq,
        "cq_open",
        call,
    )?;
    // SAFETY: the provider returned a CQ and its table for this open.
    Ok(unsafe { CompletionQueue::from_raw(obj, ops, attr.format, node) })
}
