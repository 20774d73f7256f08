//! Application buffers as addresses: up to four `(address, length)` segments.
//!
//! Invariants: at most `SEGS_MAX` segments; the functions that write through a
//! segment (`copy_in`) are `unsafe fn` whose caller vouches for the buffers (the data
//! calls' contract keeps them valid until the operation completes).
//!
//! Nothing here panics: windows and iovecs are clipped to the segments.

use super::*;

/// Up to [`SEGS_MAX`] `(address, length)` segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Segs {
    pub(super) s: [(usize, usize); SEGS_MAX],
    pub(super) n: usize,
}

impl Segs {
    pub(super) fn one(base: usize, len: usize) -> Segs {
        let mut s = Segs::default();
        s.push(base, len);
        s
    }

    pub(super) fn push(&mut self, base: usize, len: usize) -> bool {
        if self.n >= SEGS_MAX {
            return false;
        }
        self.s[self.n] = (base, len);
        self.n += 1;
        true
    }

    /// Kit's buffer list (both hold at most four entries).
    #[inline]
    pub(super) fn from_list(l: &IoList) -> Segs {
        // Entry by entry: a copy of a run of variable length would be a `memcpy` call
        // (measured with callgrind on the send path).
        let mut s = Segs::default();
        for (d, &x) in s.s.iter_mut().zip(l.slice()) {
            *d = x;
            s.n += 1;
        }
        s
    }

    pub(super) fn from_iov(iov: &[Iov]) -> Result<Segs> {
        if iov.len() > IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: {} iov entries (at most {IOV_LIMIT})", iov.len()),
            ));
        }
        let mut s = Segs::default();
        for v in iov {
            s.push(v.base as usize, v.len);
        }
        s.total()?;
        Ok(s)
    }

    pub(super) fn segs(&self) -> &[(usize, usize)] {
        &self.s[..self.n]
    }

    pub(super) fn total(&self) -> Result<usize> {
        self.segs()
            .iter()
            .try_fold(0usize, |a, &(_, l)| a.checked_add(l))
            .ok_or_else(|| Error::new(Errno::EINVAL, format!("{NAME}: iov lengths overflow")))
    }

    pub(super) fn base(&self) -> usize {
        self.s[0].0
    }

    /// The `len` bytes starting at byte `off`.
    pub(super) fn window(&self, off: usize, len: usize) -> Segs {
        let mut w = Segs::default();
        ofi_kit::iov::each_piece(self.segs(), off, len, |_, base, take| {
            w.push(base, take);
        });
        w
    }

    /// iovecs for the bytes from `off` on, at most `max` bytes; the count written.
    pub(super) fn iovecs(&self, mut off: usize, mut max: usize, out: &mut [libc::iovec]) -> usize {
        let mut n = 0;
        for &(b, l) in self.segs() {
            if max == 0 || n >= out.len() {
                break;
            }
            if off >= l {
                off -= l;
                continue;
            }
            let take = (l - off).min(max);
            out[n] = iovec(b + off, take);
            n += 1;
            max -= take;
            off = 0;
        }
        n
    }

    /// Copy `data` into the segments.
    ///
    /// # Safety
    /// The segments are writable for their lengths.
    pub(super) unsafe fn copy_in(&self, mut data: &[u8]) {
        for &(b, l) in self.segs() {
            let n = l.min(data.len());
            if n == 0 {
                break;
            }
            // SAFETY: the caller vouches for the segment; data has n bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b as *mut u8, n) };
            data = &data[n..];
        }
    }
}
