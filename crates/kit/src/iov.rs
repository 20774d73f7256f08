//! Scatter / gather lists of application buffers: [`IoList`], up to [`IOV_LIMIT`]
//! `(address, length)` pairs, copied by value (no allocation), with the offset
//! arithmetic every provider's data path needs (total, sub-list, copy in and out).
//!
//! Invariants: at most [`IOV_LIMIT`] entries; lengths are summed saturating, so an
//! absurd application iov yields `usize::MAX` and fails a size check instead of
//! wrapping. The list holds addresses, not borrows: the copy functions are `unsafe`,
//! their callers promise the buffers are valid (the C API's contract: until the
//! operation completes). Nothing here panics.

use ofi_core::abi::raw::Iov;
use ofi_core::{Errno, Error, Result};

/// The most entries an [`IoList`] holds (the `iov_limit` the kit's providers report).
pub const IOV_LIMIT: usize = 4;

/// A buffer list as `(address, length)` pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoList {
    iov: [(usize, usize); IOV_LIMIT],
    n: usize,
}

impl IoList {
    /// One buffer.
    #[inline]
    pub fn one(p: usize, len: usize) -> IoList {
        let mut iov = [(0, 0); IOV_LIMIT];
        iov[0] = (p, len);
        IoList { iov, n: 1 }
    }

    /// An application's iov; `FI_EINVAL` (naming `prov`) over [`IOV_LIMIT`] entries.
    pub fn from_iov(v: &[Iov], prov: &str) -> Result<IoList> {
        if v.len() > IOV_LIMIT {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{prov}: {} iov entries, the limit is {IOV_LIMIT}", v.len()),
            ));
        }
        let mut iov = [(0, 0); IOV_LIMIT];
        for (d, s) in iov.iter_mut().zip(v) {
            *d = (s.base as usize, s.len);
        }
        Ok(IoList { iov, n: v.len() })
    }

    /// From pairs (entries past [`IOV_LIMIT`] are dropped).
    pub fn from_pairs(v: &[(usize, usize)]) -> IoList {
        let mut iov = [(0, 0); IOV_LIMIT];
        let n = v.len().min(IOV_LIMIT);
        iov[..n].copy_from_slice(&v[..n]);
        IoList { iov, n }
    }

    /// The number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.n
    }

    /// True if the list has no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The entries.
    #[inline]
    pub fn slice(&self) -> &[(usize, usize)] {
        &self.iov[..self.n]
    }

    /// Total bytes (saturating: an absurd application iov then fails the size check).
    #[inline]
    pub fn total(&self) -> usize {
        self.slice()
            .iter()
            .fold(0usize, |a, e| a.saturating_add(e.1))
    }

    /// The address at byte `offset` (the first entry's address past the end; 0 when
    /// empty).
    #[inline]
    pub fn addr_at(&self, mut offset: usize) -> usize {
        for &(a, l) in self.slice() {
            if offset < l || l == 0 && offset == 0 {
                return a.wrapping_add(offset);
            }
            offset -= l;
        }
        self.slice().first().map(|e| e.0).unwrap_or(0)
    }

    /// The sub-list of (at most) `len` bytes from `offset`.
    pub fn sub(&self, offset: usize, len: usize) -> IoList {
        let mut out = IoList::default();
        each_piece(self.slice(), offset, len, |_, addr, take| {
            // At most one piece per entry of `self`: `out.n` stays below IOV_LIMIT.
            out.iov[out.n] = (addr, take);
            out.n += 1;
        });
        out
    }

    /// Copy `len` bytes from raw `src` into this list at `offset` (fewer if the list
    /// ends first).
    ///
    /// # Safety
    /// `src` is readable for `len` bytes; the list's buffers are writable and do not
    /// overlap `src`.
    pub unsafe fn scatter(&self, offset: usize, src: *const u8, len: usize) {
        each_piece(self.slice(), offset, len, |done, addr, take| {
            // SAFETY: caller's contract; the piece lies within the list and `len`.
            unsafe { std::ptr::copy_nonoverlapping(src.add(done), addr as *mut u8, take) };
        });
    }

    /// Copy `len` bytes of this list from `offset` to raw `dst` (fewer if the list
    /// ends first).
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes; the list's buffers are readable and do not
    /// overlap `dst`.
    pub unsafe fn gather(&self, offset: usize, dst: *mut u8, len: usize) {
        each_piece(self.slice(), offset, len, |done, addr, take| {
            // SAFETY: caller's contract; the piece lies within the list and `len`.
            unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, dst.add(done), take) };
        });
    }
}

/// Walks the `len` bytes from byte `offset` of the `(address, length)` list `list`
/// (fewer if the list ends first), calling `piece(done, address, take)` for each piece
/// in order (`done`: the bytes before this piece). How [`IoList::sub`], the copies in
/// and out, and providers' own segment lists cut a window out of a buffer list; on
/// every message's path (a 64 B message is one piece), so always inlined.
#[inline(always)]
pub fn each_piece(
    list: &[(usize, usize)],
    mut offset: usize,
    len: usize,
    mut piece: impl FnMut(usize, usize, usize),
) {
    let mut left = len;
    for &(addr, l) in list {
        if left == 0 {
            break;
        }
        if offset >= l {
            offset -= l;
            continue;
        }
        let take = (l - offset).min(left);
        piece(len - left, addr.wrapping_add(offset), take);
        left -= take;
        offset = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_lists_cross_entries() {
        let l = IoList::from_pairs(&[(100, 4), (200, 0), (300, 6)]);
        assert_eq!(l.total(), 10);
        assert_eq!(l.addr_at(0), 100);
        assert_eq!(l.addr_at(5), 301);
        assert_eq!(l.sub(2, 5).slice(), &[(102, 2), (300, 3)]);
        assert_eq!(l.sub(10, 4).slice(), &[]);
        assert_eq!(IoList::default().addr_at(3), 0);
    }

    #[test]
    fn too_many_entries_are_einval_and_totals_saturate() {
        let v = [Iov {
            base: std::ptr::null_mut(),
            len: usize::MAX,
        }; 5];
        let e = IoList::from_iov(&v, "test").unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("test: 5 iov entries"));
        assert_eq!(
            IoList::from_iov(&v[..2], "test").unwrap().total(),
            usize::MAX
        );
    }

    #[test]
    fn scatter_and_gather_round_trip() {
        let mut a = [0u8; 3];
        let mut b = [0u8; 5];
        let l = IoList::from_pairs(&[(a.as_mut_ptr() as usize, 3), (b.as_mut_ptr() as usize, 5)]);
        let src: Vec<u8> = (1..=8).collect();
        // SAFETY: `src` has 8 readable bytes; `a` and `b` are writable and distinct.
        unsafe { l.scatter(0, src.as_ptr(), 8) };
        assert_eq!((a, b), ([1, 2, 3], [4, 5, 6, 7, 8]));
        let mut out = [0u8; 4];
        // SAFETY: `out` has 4 writable bytes; the list's buffers are readable.
        unsafe { l.gather(2, out.as_mut_ptr(), 4) };
        assert_eq!(out, [3, 4, 5, 6]);
    }

    #[test]
    fn pieces_skip_empty_entries_and_stop_at_the_end_of_the_list() {
        let mut a = [0u8; 2];
        let mut b = [0u8; 4];
        let l = IoList::from_pairs(&[
            (a.as_mut_ptr() as usize, 2),
            (0, 0),
            (b.as_mut_ptr() as usize, 4),
        ]);
        let src = [9u8, 8, 7];
        // SAFETY: `src` has 3 readable bytes; the list's buffers are writable.
        unsafe { l.scatter(1, src.as_ptr(), 3) };
        assert_eq!((a, b), ([0, 9], [8, 7, 0, 0]));
        let mut out = [0xffu8; 8];
        // From offset 3 the list holds 3 bytes: the rest of `out` stays as it was.
        // SAFETY: `out` has 8 writable bytes; the list's buffers are readable.
        unsafe { l.gather(3, out.as_mut_ptr(), 8) };
        assert_eq!(out, [7, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff]);
        // Nothing at or past the end.
        // SAFETY: as above.
        unsafe { l.gather(6, out.as_mut_ptr(), 8) };
        assert_eq!(out[0], 7);
    }
}
