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
pub struct Buf {
    // Field order matters: the registration (if any) is dropped before the memory.
    // Boxed: keeps `Buf` (and every completion carrying one) small to move.
    mr: Option<Box<MemoryRegion>>,
    data: Box<[u8]>,
    len: usize,
}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buf")
            .field("len", &self.len)
            .field("capacity", &self.data.len())
            .field("registered", &self.mr.is_some())
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
        Buf {
            mr: mr.map(Box::new),
            data,
            len,
        }
    }

    /// The allocation's size.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// The number of bytes that count.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the length is 0.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Set the length (clamped to the capacity).
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.data.len());
    }

    /// The whole allocation, to fill before a send (then [`set_len`](Self::set_len)).
    #[inline]
    pub fn as_mut_capacity(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Copy `bytes` in and set the length to theirs; `false` (nothing copied) if they
    /// do not fit.
    #[inline]
    pub fn fill_from(&mut self, bytes: &[u8]) -> bool {
        match self.data.get_mut(..bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = bytes.len();
                true
            }
            None => false,
        }
    }

    /// True if the buffer carries a local registration.
    #[inline]
    pub fn is_registered(&self) -> bool {
        self.mr.is_some()
    }

    /// The descriptor to pass with the buffer (null when unregistered).
    #[inline]
    pub(crate) fn desc(&self) -> Desc {
        self.mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc())
    }

    /// Start and capacity, for posting (the memory stays put while `self` lives).
    #[inline]
    pub(crate) fn raw_parts(&mut self) -> (*mut u8, usize) {
        (self.data.as_mut_ptr(), self.data.len())
    }

    /// The bytes, as a vector (drops the registration).
    #[inline]
    pub fn into_vec(self) -> Vec<u8> {
        let len = self.len;
        let mut v = self.data.into_vec();
        v.truncate(len);
        v
    }
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::with_registration(v.into_boxed_slice(), None)
    }
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }
}
