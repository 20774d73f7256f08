//! Raw forms of getinfo requests and results, verdicts, and the fabric the host hands a
//! layering provider; with their conversions.
//!
//! Ownership: a [`RawGetinfoResult`] is filled by the side that answered (provider or
//! host) with storage of its own, referenced by `owner`; the asking side copies it
//! ([`outcome_from_raw`]) and then hands it back to the answering side's `free_getinfo`
//! slot, which calls [`free_result`] in the answering side's copy of this code. A
//! request ([`RequestBox`]) is owned by the asking side and only read during the call.
//!
//! Nothing here panics; malformed raw data becomes an error (for results: the outcome's
//! `error`, with no infos).

use std::ffi::c_void;

use crate::abi::layout::abi_struct;
use crate::abi::raw::{info_from_raw, infos_from_raw, Obj, RawInfo, RawInfoBox, RawStr};
use crate::abi::tables::FabricTable;
use crate::error::{Errno, Error, Result};
use crate::flags::GetinfoFlags;
use crate::getinfo::{GetinfoOutcome, GetinfoRequest, Verdict, VerdictKind};
use crate::version::Version;

abi_struct! {
    /// Raw `GetinfoRequest`.
    pub struct RawGetinfoRequest {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// API version, packed.
        pub version: u32,
        /// Node, or none.
        pub node: RawStr,
        /// Service, or none.
        pub service: RawStr,
        /// `GetinfoFlags` bits.
        pub flags: u64,
        /// Hints, or null.
        pub hints: *const RawInfo,
    }

    /// Raw `Verdict`.
    pub struct RawVerdict {
        /// Size of this structure as its producer knows it.
        pub struct_size: usize,
        /// Provider name.
        pub provider: RawStr,
        /// Template index.
        pub template: usize,
        /// 0 kept, 1 rejected, 2 filtered.
        pub kind: u32,
        /// Field or rule.
        pub field: RawStr,
        /// What was asked.
        pub asked: RawStr,
        /// What is offered.
        pub offered: RawStr,
    }

    /// Raw `GetinfoOutcome`, filled by the answering side.
    pub struct RawGetinfoResult {
        /// Size of this structure as the asking side knows it (set by the asker).
        pub struct_size: usize,
        /// Array of `ninfos` info pointers.
        pub infos: *const *const RawInfo,
        /// Number of infos.
        pub ninfos: usize,
        /// Array of `nverdicts` verdict pointers.
        pub verdicts: *const *const RawVerdict,
        /// Number of verdicts.
        pub nverdicts: usize,
        /// 0, or the positive `FI_*` code of the outcome's error.
        pub error_code: i32,
        /// The error's message.
        pub error_msg: RawStr,
        /// The answering side's storage; released by its `free_getinfo`.
        pub owner: *mut c_void,
    }

    /// A fabric the host opened for a provider (layering): the fabric's object and
    /// table, its provider family, and the host's hold on it (`keep`, released with the
    /// host table's `fabric_release`).
    pub struct RawHostFabric {
        /// Size of this structure as the asking side knows it.
        pub struct_size: usize,
        /// The fabric object.
        pub obj: Obj,
        /// Its table.
        pub ops: *const FabricTable,
        /// Identity of the provider family the fabric belongs to.
        pub family: usize,
        /// The host's hold.
        pub keep: *mut c_void,
    }
}

impl RawGetinfoResult {
    /// An empty out-parameter of this build's size.
    pub const fn empty() -> RawGetinfoResult {
        RawGetinfoResult {
            struct_size: std::mem::size_of::<RawGetinfoResult>(),
            infos: std::ptr::null(),
            ninfos: 0,
            verdicts: std::ptr::null(),
            nverdicts: 0,
            error_code: 0,
            error_msg: RawStr::NONE,
            owner: std::ptr::null_mut(),
        }
    }
}

impl RawHostFabric {
    /// An empty out-parameter of this build's size.
    pub const fn empty() -> RawHostFabric {
        RawHostFabric {
            struct_size: std::mem::size_of::<RawHostFabric>(),
            obj: std::ptr::null_mut(),
            ops: std::ptr::null(),
            family: 0,
            keep: std::ptr::null_mut(),
        }
    }
}

/// Every structure of this module, for the layout fingerprint.
pub const LAYOUTS: &[&crate::abi::layout::StructDesc] = &[
    &RawGetinfoRequest::LAYOUT,
    &RawVerdict::LAYOUT,
    &RawGetinfoResult::LAYOUT,
    &RawHostFabric::LAYOUT,
];

/// A raw request with its storage (owned by the asking side).
pub struct RequestBox {
    raw: Box<RawGetinfoRequest>,
    _hints: Option<RawInfoBox>,
    _node: Option<Box<str>>,
    _service: Option<Box<str>>,
}

impl RequestBox {
    /// The raw form of `req`.
    pub fn new(req: &GetinfoRequest) -> RequestBox {
        let hints = req.hints.as_ref().map(RawInfoBox::new);
        let node: Option<Box<str>> = req.node.as_deref().map(Into::into);
        let service: Option<Box<str>> = req.service.as_deref().map(Into::into);
        let raw = Box::new(RawGetinfoRequest {
            struct_size: std::mem::size_of::<RawGetinfoRequest>(),
            version: req.version.to_raw(),
            node: RawStr::from_opt(node.as_deref()),
            service: RawStr::from_opt(service.as_deref()),
            flags: req.flags.bits(),
            hints: hints.as_ref().map_or(std::ptr::null(), RawInfoBox::as_ptr),
        });
        RequestBox {
            raw,
            _hints: hints,
            _node: node,
            _service: service,
        }
    }

    /// The raw form; valid while `self` lives.
    pub fn as_ptr(&self) -> *const RawGetinfoRequest {
        &*self.raw
    }
}

/// The request a raw form describes.
///
/// # Safety
/// `p` must point to a valid [`RawGetinfoRequest`] (pointers valid as documented).
pub unsafe fn request_from_raw(p: *const RawGetinfoRequest) -> Result<GetinfoRequest> {
    if p.is_null() {
        return Err(Error::new(Errno::EINVAL, "getinfo request: null pointer"));
    }
    // SAFETY: valid by this function's contract.
    let raw = unsafe { &*p };
    let min = RawGetinfoRequest::LAYOUT.size_for_minor(0);
    if raw.struct_size < min {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "getinfo request: struct_size {} is smaller than {min}",
                raw.struct_size
            ),
        ));
    }
    Ok(GetinfoRequest {
        version: Version::from_raw(raw.version),
        // SAFETY: string pointers valid by this function's contract.
        node: unsafe { raw.node.to_string_opt("getinfo node") }?,
        // SAFETY: as above.
        service: unsafe { raw.service.to_string_opt("getinfo service") }?,
        flags: GetinfoFlags::from_bits_retain(raw.flags),
        hints: if raw.hints.is_null() {
            None
        } else {
            // SAFETY: non-null and valid by this function's contract.
            Some(unsafe { info_from_raw(raw.hints) }.map_err(|e| e.context("hints"))?)
        },
    })
}

/// The answering side's storage behind a [`RawGetinfoResult`].
struct OutcomeStorage {
    _infos: Vec<RawInfoBox>,
    info_ptrs: Vec<*const RawInfo>,
    _verdicts: Vec<RawVerdict>,
    verdict_ptrs: Vec<*const RawVerdict>,
    _strings: Vec<Box<str>>,
}

fn kind_to_raw(k: VerdictKind) -> u32 {
    match k {
        VerdictKind::Kept => 0,
        VerdictKind::Rejected => 1,
        VerdictKind::Filtered => 2,
    }
}

fn kind_from_raw(k: u32) -> Result<VerdictKind> {
    match k {
        0 => Ok(VerdictKind::Kept),
        1 => Ok(VerdictKind::Rejected),
        2 => Ok(VerdictKind::Filtered),
        _ => Err(Error::new(
            Errno::EINVAL,
            format!("verdict kind: invalid value {k}"),
        )),
    }
}

/// Fill `out` with `outcome`, allocating storage that [`free_result`] releases.
///
/// # Safety
/// `out` must be valid for writes of a `RawGetinfoResult` of at least the first layout.
pub unsafe fn fill_result(outcome: &GetinfoOutcome, out: *mut RawGetinfoResult) {
    let mut strings: Vec<Box<str>> = Vec::new();
    let mut keep = |s: &str| -> RawStr {
        let b: Box<str> = s.into();
        let r = RawStr {
            ptr: b.as_ptr(),
            len: b.len(),
        };
        strings.push(b);
        r
    };
    let infos: Vec<RawInfoBox> = outcome.infos.iter().map(RawInfoBox::new).collect();
    let info_ptrs: Vec<*const RawInfo> = infos.iter().map(RawInfoBox::as_ptr).collect();
    let verdicts: Vec<RawVerdict> = outcome
        .verdicts
        .iter()
        .map(|v| RawVerdict {
            struct_size: std::mem::size_of::<RawVerdict>(),
            provider: keep(&v.provider),
            template: v.template,
            kind: kind_to_raw(v.kind),
            field: keep(&v.field),
            asked: keep(&v.asked),
            offered: keep(&v.offered),
        })
        .collect();
    // The vector is never modified again, so these element pointers stay valid.
    let verdict_ptrs: Vec<*const RawVerdict> = verdicts.iter().map(|v| v as *const _).collect();
    let (error_code, error_msg) = match &outcome.error {
        None => (0, RawStr::NONE),
        Some(e) => (e.code().0, keep(e.message())),
    };
    let storage = Box::new(OutcomeStorage {
        _infos: infos,
        info_ptrs,
        _verdicts: verdicts,
        verdict_ptrs,
        _strings: strings,
    });
    // SAFETY: `out` is valid for writes by this function's contract; the pointers stored
    // point into `storage`, whose heap buffers do not move when the box pointer is
    // taken below.
    unsafe {
        (*out).infos = storage.info_ptrs.as_ptr();
        (*out).ninfos = storage.info_ptrs.len();
        (*out).verdicts = storage.verdict_ptrs.as_ptr();
        (*out).nverdicts = storage.verdict_ptrs.len();
        (*out).error_code = error_code;
        (*out).error_msg = error_msg;
        (*out).owner = Box::into_raw(storage) as *mut c_void;
    }
}

/// Release what [`fill_result`] allocated and clear `out`. Safe to call twice.
///
/// # Safety
/// `out` must be null or point to a result filled by [`fill_result`] of this same copy
/// of the code (or left empty).
pub unsafe fn free_result(out: *mut RawGetinfoResult) {
    if out.is_null() {
        return;
    }
    // SAFETY: valid by this function's contract.
    let r = unsafe { &mut *out };
    if !r.owner.is_null() {
        // SAFETY: `owner` came from `Box::into_raw` in `fill_result` of this copy.
        drop(unsafe { Box::from_raw(r.owner as *mut OutcomeStorage) });
    }
    *r = RawGetinfoResult {
        struct_size: r.struct_size,
        ..RawGetinfoResult::empty()
    };
}

/// Copy a result into a [`GetinfoOutcome`]. Malformed data yields an outcome with only
/// an `FI_EINVAL` error.
///
/// # Safety
/// `p` must point to a result filled by the answering side and not yet freed.
pub unsafe fn outcome_from_raw(p: *const RawGetinfoResult, who: &str) -> GetinfoOutcome {
    // SAFETY: forwarded from this function's contract.
    match unsafe { try_outcome_from_raw(p) } {
        Ok(o) => o,
        Err(e) => GetinfoOutcome {
            infos: Vec::new(),
            verdicts: Vec::new(),
            error: Some(e.context(format!("getinfo result of {who}"))),
        },
    }
}

/// # Safety
/// As [`outcome_from_raw`].
unsafe fn try_outcome_from_raw(p: *const RawGetinfoResult) -> Result<GetinfoOutcome> {
    // SAFETY: valid by the caller's contract.
    let r = unsafe { &*p };
    // SAFETY: arrays valid by the caller's contract.
    let infos = unsafe { infos_from_raw(r.infos, r.ninfos) }?;
    let mut verdicts = Vec::with_capacity(r.nverdicts);
    if r.nverdicts > 0 {
        if r.verdicts.is_null() {
            return Err(Error::new(Errno::EINVAL, "verdicts announced, null array"));
        }
        // SAFETY: valid for `nverdicts` elements by the caller's contract.
        let ptrs = unsafe { std::slice::from_raw_parts(r.verdicts, r.nverdicts) };
        for &vp in ptrs {
            if vp.is_null() {
                return Err(Error::new(Errno::EINVAL, "null verdict"));
            }
            // SAFETY: non-null element of the answering side's array.
            let v = unsafe { &*vp };
            let s = |x: &RawStr, what: &str| -> Result<String> {
                // SAFETY: string pointers valid by the caller's contract.
                Ok(unsafe { x.to_string_opt(what) }?.unwrap_or_default())
            };
            verdicts.push(Verdict {
                provider: s(&v.provider, "verdict.provider")?,
                template: v.template,
                kind: kind_from_raw(v.kind)?,
                field: s(&v.field, "verdict.field")?,
                asked: s(&v.asked, "verdict.asked")?,
                offered: s(&v.offered, "verdict.offered")?,
            });
        }
    }
    let error = if r.error_code == 0 {
        None
    } else {
        // SAFETY: string pointer valid by the caller's contract.
        let msg = unsafe { r.error_msg.to_string_opt("error message") }?.unwrap_or_default();
        Some(Error::new(Errno(r.error_code), msg))
    };
    Ok(GetinfoOutcome {
        infos: if error.is_some() { Vec::new() } else { infos },
        verdicts,
        error,
    })
}
