//! [`Buf`]: an owned message buffer that moves into an operation and comes back with
//! its completion.
//!
//! A `Buf` has a capacity (its allocation, fixed) and a length (the bytes that count:
//! what a send sends, what a receive received). Its heap memory never moves while it
//! exists, so the provider may keep the address of a posted buffer. When the domain
//! needs local registration (`FI_MR_LOCAL`), [`Domain::alloc`](super::Domain::alloc)
//! returns buffers registered once for their lifetime. Nothing here panics.

use crate::mr::MemoryRegion;
use crate::provider::Desc;

/// An owned, fixed-capacity byte buffer for data operations.
///
/// ```
/// use ofi::safe::Buf;
/// let mut b = Buf::from(b"ping".to_vec());
/// assert_eq!(&b[..], b"ping");
/// b.set_len(2);
/// assert_eq!(&b[..], b"pi");
/// assert_eq!(b.capacity(), 4);
/// ```
pub struct Buf(Box<Inner>);

/// What a [`Buf`] points to. `Buf` is one pointer so that moving it into an operation
/// and back out of a completion is one 8-byte move (no wide copies of values just
/// written, which the CPU cannot forward from its store buffer), and so that the
/// addresses of the memory, which lives in its own allocation, do not depend on where
/// the handle is moved.
struct Inner {
    // Field order matters: the registration (if any) is dropped before the memory.
    mr: Option<MemoryRegion>,
    data: Box<[u8]>,
    len: usize,
}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buf")
            .field("len", &self.0.len)
            .field("capacity", &self.0.data.len())
            .field("registered", &self.0.mr.is_some())
            .finish()
    }
}

impl Buf {
    /// A zeroed buffer of `capacity` bytes, length `capacity`, not registered.
    #[inline]
    pub fn new(capacity: usize) -> Buf {
        Buf::from(vec![0u8; capacity])
    }

    /// A zeroed buffer registered as `mr` (internal: see `Domain::alloc`).
    #[inline]
    pub(crate) fn with_registration(data: Box<[u8]>, mr: Option<MemoryRegion>) -> Buf {
        let len = data.len();
        Buf(Box::new(Inner { mr, data, len }))
    }

    /// The allocation's size.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.0.data.len()
    }

    /// The number of bytes that count.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True if the length is 0.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Set the length (clamped to the capacity).
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        self.0.len = len.min(self.0.data.len());
    }

    /// The whole allocation, to fill before a send (then [`set_len`](Self::set_len)).
    #[inline]
    pub fn as_mut_capacity(&mut self) -> &mut [u8] {
        &mut self.0.data
    }

    /// Copy `bytes` in and set the length to theirs; `false` (nothing copied) if they
    /// do not fit.
    #[inline]
    pub fn fill_from(&mut self, bytes: &[u8]) -> bool {
        let inner = &mut *self.0;
        match inner.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                inner.len = bytes.len();
                true
            }
            None => false,
        }
    }

    /// True if the buffer carries a local registration.
    #[inline]
    pub fn is_registered(&self) -> bool {
        self.0.mr.is_some()
    }

    /// Where the memory is, for posting. The memory is an allocation of its own, which
    /// moving the handle does not move or touch, so these stay valid after the handle
    /// goes into the endpoint's in-flight table, for as long as it stays there.
    #[inline]
    pub(crate) fn parts(&mut self) -> BufParts {
        let inner = &mut *self.0;
        let desc = inner.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc());
        BufParts {
            ptr: inner.data.as_mut_ptr(),
            cap: inner.data.len(),
            len: inner.len,
            desc,
        }
    }

    /// The bytes, as a vector (drops the registration).
    #[inline]
    pub fn into_vec(self) -> Vec<u8> {
        let Inner { mr, data, len } = *self.0;
        drop(mr);
        let mut v = data.into_vec();
        v.truncate(len);
        v
    }
}

/// A posted buffer's memory ([`Buf::parts`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufParts {
    /// Start of the allocation.
    pub ptr: *mut u8,
    /// Its size (what a receive may fill).
    pub cap: usize,
    /// The bytes that count (what a send sends).
    pub len: usize,
    /// The registration's descriptor (null when unregistered).
    pub desc: Desc,
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::with_registration(v.into_boxed_slice(), None)
    }
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let inner = &*self.0;
        &inner.data[..inner.len]
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let inner = &mut *self.0;
        &mut inner.data[..inner.len]
    }
}
