//! CQ slots of the adapters (see [`super`] for the object pointers and panics): the
//! hand-written `fn` entries of the list of CQ operations
//! ([`for_each_cq_op!`](crate::for_each_cq_op)), then the generated ones.

use super::*;

/// # Safety
/// `cq` our boxed CQ; `buf` valid for `count` entries of its format.
#[inline(always)]
pub(super) unsafe fn cq_buf<'a, T>(
    b: &CqBox<T>,
    buf: *mut c_void,
    count: usize,
) -> Result<CqBuf<'a>> {
    // SAFETY: forwarded.
    unsafe { CqBuf::from_raw(b.format, buf, count) }
}

/// # Safety
/// `cond` null or valid for a `usize` read when the CQ's condition is a threshold.
pub(super) unsafe fn threshold<T>(b: &CqBox<T>, cond: *const c_void) -> Option<usize> {
    if b.wait_cond == CqWaitCond::Threshold && !cond.is_null() {
        // SAFETY: with FI_CQ_COND_THRESHOLD, `cond` points to a size_t (C API).
        Some(unsafe { *(cond as *const usize) })
    } else {
        None
    }
}

count_slots! {
    /// Slot `read` of the `cq` table.
    "cq.read" fn cq_read(cq, buf: *mut c_void, count: usize) on b: Boxed<F> => {
        // SAFETY: `buf` valid for `count` entries of the CQ's format (contract).
        b.inner.read(unsafe { cq_buf(b, buf, count) }?, None)
    }

    /// Slot `readfrom` of the `cq` table.
    "cq.readfrom" fn cq_readfrom(
        cq, buf: *mut c_void, count: usize, src: *mut u64
    ) on b: Boxed<F> => {
        // SAFETY: as cq_read; `src` valid for `count` (contract).
        let (src, buf) = unsafe {
            (sl_mut(src, count, "readfrom: null address array")?, cq_buf(b, buf, count)?)
        };
        b.inner.read(buf, Some(src))
    }

    /// Slot `readerr` of the `cq` table.
    "cq.readerr" fn cq_readerr(cq, entry: *mut CqErrEntry, flags: u64) on b: Boxed<F> => {
        need_out(entry)?;
        // SAFETY: `entry` checked non-null, valid for read/write, and a non-null
        // `err_data` with a non-zero size valid for that many bytes (contract).
        unsafe {
            let user_buf = (*entry).err_data;
            let user_len = (*entry).err_data_size;
            let e = b.inner.readerr(flags)?;
            let mut raw = e.to_raw();
            (raw.err_data, raw.err_data_size) =
                ErrData::hand_out_kept(&b.err_data, e.err_data, user_buf, user_len);
            entry.write(raw);
        }
        Ok(1)
    }

    /// Slot `sread` of the `cq` table.
    "cq.sread" fn cq_sread(
        cq, buf: *mut c_void, count: usize, cond: *const c_void, timeout: i32
    ) on b: Boxed<F> => {
        // SAFETY: as cq_read; `cond` per the C API.
        let (buf, threshold) = unsafe { (cq_buf(b, buf, count)?, threshold(b, cond)) };
        b.inner.sread(buf, None, threshold, timeout)
    }

    /// Slot `sreadfrom` of the `cq` table.
    "cq.sreadfrom" fn cq_sreadfrom(
        cq, buf: *mut c_void, count: usize, src: *mut u64, cond: *const c_void, timeout: i32
    ) on b: Boxed<F> => {
        // SAFETY: as cq_readfrom; `cond` per the C API.
        let (src, buf, threshold) = unsafe {
            (
                sl_mut(src, count, "sreadfrom: null address array")?,
                cq_buf(b, buf, count)?,
                threshold(b, cond),
            )
        };
        b.inner.sread(buf, Some(src), threshold, timeout)
    }

    /// Slot `strerror` of the `cq` table.
    "cq.strerror" fn cq_strerror(
        cq, prov_errno: i32, err_data: *const c_void, buf: *mut u8, len: usize
    ) on b: Boxed<F> => {
        let text = |data: &[u8]| b.inner.strerror(prov_errno, data);
        // SAFETY: `buf` valid for `len` (contract).
        Ok(unsafe { ErrData::strerror_into(&b.err_data, err_data, text, buf, len) })
    }
}

/// Write `text` into a caller's buffer (truncated, NUL-terminated if room); returns the
/// text's full length.
///
/// # Safety
/// `buf` null or valid for `len` bytes.
pub(super) unsafe fn put_text(text: &str, buf: *mut u8, len: usize) -> usize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` valid for `len` > n bytes (contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}

boxed_objects!(CqBox<CqOf<F>> => CqOf<F>, inner);

crate::for_each_cq_op!(ctl_trampolines);

// ---------------------------------------------------------------------------------------
// The host side of the entries above whose C conversion is written by hand: the
// public method that calls the slot (the provider method and the hook forwarder
// come from the list).

use crate::abi::object::count_or_code;
use crate::abi::raw::CqEntryFormat;
use crate::abi::tables::call_slot;
use crate::cq::{CqError, READERR_DATA_MAX};
/// `body` with `b` bound to the typed entries inside a [`CqBuf`], whichever of the four
/// formats it holds.
macro_rules! each_format {
    ($buf:expr, |$b:ident| $body:expr) => {
        match $buf {
            CqBuf::Context($b) => $body,
            CqBuf::Msg($b) => $body,
            CqBuf::Data($b) => $body,
            CqBuf::Tagged($b) => $body,
        }
    };
}

impl crate::cq::CompletionQueue {
    /// `fi_cq_read`: fill `buf` with completions; the number read, `FI_EAGAIN` if none,
    /// `FI_EAVAIL` if an error entry is next. An empty `buf` only drives progress.
    #[inline]
    pub fn read<E: CqEntryFormat>(&self, buf: &mut [E]) -> Result<usize> {
        self.check::<E>()?;
        // SAFETY: `buf` is valid for `len` entries of the CQ's format (checked above).
        count_or_code(unsafe {
            call_slot!(
                self.t(),
                CqTable.read(self.obj, buf.as_mut_ptr() as *mut c_void, buf.len())
            )
        })
    }

    /// `fi_cq_readerr`, C-shaped: the next error entry into `entry` (`FI_EAGAIN` if
    /// none). With `entry.err_data` pointing to a buffer of yours and `err_data_size` > 0
    /// the provider copies up to that many bytes of its error data there and sets
    /// `err_data_size` to the number copied; with `err_data_size` 0, `err_data` is set
    /// to the provider's own buffer, valid until the next read of this CQ. Prefer
    /// [`readerr_owned`](Self::readerr_owned), which needs no raw pointers.
    pub fn readerr(&self, entry: &mut CqErrEntry, flags: u64) -> Result<()> {
        // SAFETY: `entry` is a valid, exclusive CqErrEntry; a non-null `err_data` with a
        // non-zero size is the caller's buffer, which fi_cq(3) lets the provider fill.
        count_or_code(unsafe { call_slot!(self.t(), CqTable.readerr(self.obj, entry, flags)) })
            .map(|_| ())
    }

    /// `fi_cq_readerr` with the error data copied out: the next error entry
    /// (`FI_EAGAIN` if none). At most [`READERR_DATA_MAX`] bytes of error data are
    /// returned.
    pub fn readerr_owned(&self, flags: u64) -> Result<CqError> {
        let mut data = vec![0u8; READERR_DATA_MAX];
        let mut e = CqErrEntry {
            err_data: data.as_mut_ptr() as *mut c_void,
            err_data_size: data.len(),
            ..CqErrEntry::default()
        };
        // SAFETY: `e` valid; its err_data buffer valid for err_data_size bytes.
        count_or_code(unsafe { call_slot!(self.t(), CqTable.readerr(self.obj, &mut e, flags)) })?;
        // SAFETY: `err_data` is ours, or the provider's buffer (one that ignored ours),
        // valid for err_data_size bytes until the next read of this CQ (fi_cq(3)).
        let err_data = unsafe { err_data_read(data, e.err_data, e.err_data_size) };
        Ok(CqError::from_raw(&e, err_data))
    }

    /// `fi_cq_sread`: as [`read`](Self::read), blocking up to `timeout` ms (-1 =
    /// forever); `FI_EAGAIN` on time-out.
    pub fn sread<E: CqEntryFormat>(&self, buf: &mut [E], timeout: i32) -> Result<usize> {
        self.sread_cond(buf, None, timeout)
    }

    /// `fi_cq_sread` with a threshold (CQ opened with `CqWaitCond::Threshold`).
    pub fn sread_threshold<E: CqEntryFormat>(
        &self,
        buf: &mut [E],
        threshold: usize,
        timeout: i32,
    ) -> Result<usize> {
        self.sread_cond(buf, Some(&threshold), timeout)
    }

    /// `fi_cq_sread` with the wait condition `threshold` (none: null).
    fn sread_cond<E: CqEntryFormat>(
        &self,
        buf: &mut [E],
        threshold: Option<&usize>,
        timeout: i32,
    ) -> Result<usize> {
        self.check::<E>()?;
        let cond = threshold.map_or(std::ptr::null(), |t| t as *const usize as *const c_void);
        // SAFETY: `buf` valid for its length; `cond` null or a usize that lives across
        // the call.
        count_or_code(unsafe {
            call_slot!(
                self.t(),
                CqTable.sread(
                    self.obj,
                    buf.as_mut_ptr() as *mut c_void,
                    buf.len(),
                    cond,
                    timeout
                )
            )
        })
    }

    /// The checks of a read with source addresses (`what`): the entry format, and a
    /// slot of `src` for each entry of `buf`.
    fn check_from<E: CqEntryFormat>(
        &self,
        buf: &[E],
        src: &[u64],
        what: &'static str,
    ) -> Result<()> {
        self.check::<E>()?;
        if src.len() < buf.len() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{what}: fewer address slots than entries"),
            ));
        }
        Ok(())
    }

    /// `fi_cq_read` into a buffer of any of the four formats (the CQ's), with the
    /// entries' source addresses in `src` when given (`fi_cq_readfrom`).
    pub fn read_into(&self, buf: &mut CqBuf<'_>, src: Option<&mut [u64]>) -> Result<usize> {
        each_format!(buf, |b| match src {
            Some(s) => self.readfrom(b, s),
            None => self.read(b),
        })
    }

    /// `fi_cq_sread` into a buffer of any of the four formats, as
    /// [`read_into`](Self::read_into), waiting up to `timeout` ms for `threshold`
    /// entries (or one).
    pub fn sread_into(
        &self,
        buf: &mut CqBuf<'_>,
        src: Option<&mut [u64]>,
        threshold: Option<usize>,
        timeout: i32,
    ) -> Result<usize> {
        each_format!(buf, |b| match (src, threshold) {
            (Some(s), _) => self.sreadfrom(b, s, timeout),
            (None, Some(t)) => self.sread_threshold(b, t, timeout),
            (None, None) => self.sread(b, timeout),
        })
    }

    /// `fi_cq_readfrom`: as [`read`](Self::read), with each entry's source address in
    /// `src` (which must be at least as long as `buf`).
    pub fn readfrom<E: CqEntryFormat>(&self, buf: &mut [E], src: &mut [u64]) -> Result<usize> {
        self.check_from(buf, src, "readfrom")?;
        // SAFETY: `buf` valid for its length; `src` for at least as many.
        count_or_code(unsafe {
            call_slot!(
                self.t(),
                CqTable.readfrom(
                    self.obj,
                    buf.as_mut_ptr() as *mut c_void,
                    buf.len(),
                    src.as_mut_ptr()
                )
            )
        })
    }

    /// `fi_cq_sreadfrom`.
    pub fn sreadfrom<E: CqEntryFormat>(
        &self,
        buf: &mut [E],
        src: &mut [u64],
        timeout: i32,
    ) -> Result<usize> {
        self.check_from(buf, src, "sreadfrom")?;
        // SAFETY: `buf` valid; `src` at least as long.
        count_or_code(unsafe {
            call_slot!(
                self.t(),
                CqTable.sreadfrom(
                    self.obj,
                    buf.as_mut_ptr() as *mut c_void,
                    buf.len(),
                    src.as_mut_ptr(),
                    std::ptr::null(),
                    timeout
                )
            )
        })
    }

    /// `fi_cq_strerror`: text for a provider-specific error code of an error entry.
    pub fn strerror(&self, prov_errno: i32) -> String {
        self.strerror_with_data(prov_errno, &[])
    }
}
