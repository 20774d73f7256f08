//! [`UserIov`]: the application's buffers of one send or receive, copied into the
//! `iovec` form the kernel takes.
//!
//! Invariants: `n ≤ IOV_LIMIT`, entries `n..` are empty, and `total` is the sum of the
//! lengths (checked for overflow when built: `FI_EINVAL`). The pointers are the
//! application's; they are only dereferenced inside the `unsafe` methods, whose
//! callers vouch for them. Nothing here panics.

use super::*;
use ofi_kit::iov::IoList;

/// Up to [`IOV_LIMIT`] application buffers in the form the kernel takes.
#[derive(Clone, Copy)]
pub(super) struct UserIov {
    pub(super) v: [libc::iovec; IOV_LIMIT],
    pub(super) n: usize,
    pub(super) total: usize,
}

// SAFETY: the iovecs point at application buffers that the application keeps valid,
// and does not touch, until the operation completes (the `EndpointOps` contract). They
// are written only by `recvmsg` under the receive-queue lock, one operation at a time.
unsafe impl Send for UserIov {}

const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

impl UserIov {
    /// No buffers yet.
    const EMPTY: UserIov = UserIov {
        v: [EMPTY_IOVEC; IOV_LIMIT],
        n: 0,
        total: 0,
    };

    /// Append the buffer of `len` bytes at `base`: `FI_EINVAL` for a null buffer that
    /// is not empty, a list already holding [`IOV_LIMIT`] buffers, or a total that
    /// overflows.
    #[inline]
    fn push(&mut self, base: *mut libc::c_void, len: usize) -> Result<()> {
        if (base.is_null() && len > 0) || self.n == IOV_LIMIT {
            return Err(code(Errno::EINVAL));
        }
        self.v[self.n] = libc::iovec {
            iov_base: base,
            iov_len: len,
        };
        self.n += 1;
        self.total = self.total.checked_add(len).ok_or(code(Errno::EINVAL))?;
        Ok(())
    }

    /// The buffers of a request kit built (`FI_EINVAL` as [`push`](Self::push) says:
    /// kit's list neither refuses null buffers nor checks its total).
    #[inline]
    pub(super) fn from_list(list: &IoList) -> Result<UserIov> {
        let mut out = UserIov::EMPTY;
        for &(base, len) in list.slice() {
            out.push(base as *mut libc::c_void, len)?;
        }
        Ok(out)
    }

    /// `[header slot, buffers…]` and how many entries are used.
    #[inline]
    pub(super) fn with_header(&self, hdr: *mut u8) -> ([libc::iovec; IOV_LIMIT + 1], usize) {
        let mut out = [EMPTY_IOVEC; IOV_LIMIT + 1];
        out[0] = libc::iovec {
            iov_base: hdr.cast(),
            iov_len: HDR_LEN,
        };
        out[1..=self.n].copy_from_slice(&self.v[..self.n]);
        (out, self.n + 1)
    }

    /// Copy `data` into the buffers, in order (as much as they hold).
    ///
    /// # Safety
    /// The iovecs are writable for their lengths.
    pub(super) unsafe fn scatter(&self, mut data: &[u8]) {
        for v in &self.v[..self.n] {
            let k = v.iov_len.min(data.len());
            if k == 0 {
                continue;
            }
            // SAFETY: caller's contract for the iovec; `data` has `k` bytes; the two
            // do not overlap (`data` is the provider's own buffer).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), v.iov_base.cast(), k) };
            data = &data[k..];
        }
    }

    pub(super) fn first_base(&self) -> *mut libc::c_void {
        if self.n > 0 {
            self.v[0].iov_base
        } else {
            std::ptr::null_mut()
        }
    }
}
