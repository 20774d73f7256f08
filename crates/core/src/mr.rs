//! Memory regions (`fi_mr`): registration attributes and the public [`MemoryRegion`].
//!
//! A registration makes memory usable by the provider: its descriptor
//! ([`MemoryRegion::desc`]) goes with local buffers in data calls, its key
//! ([`MemoryRegion::key`]) to peers for RMA and atomics. The registered memory must
//! stay valid until the region is closed: the raw registrations
//! ([`crate::domain::Domain::mr_reg`]) are `unsafe` for that reason;
//! [`crate::domain::Domain::mr_reg_owned`] registers a buffer the region owns.
//!
//! Owned memory is never lent out as a Rust reference: while it is registered the
//! provider — and, through it, peers (RMA, atomics, cross-memory copies) — may write it
//! at any moment, which a `&[u8]` would promise cannot happen. It is read and written
//! with volatile copies ([`MemoryRegion::read_owned`], [`MemoryRegion::owned_to_vec`],
//! [`MemoryRegion::write_owned`]); [`MemoryRegion::owned_ptr`] gives its address.
//! Nothing here panics.

use crate::abi::raw::{Iov, RawMrAttr, RawStr};
use crate::abi::tables::MrTable;
use crate::enums::HmemIface;
use crate::error::{Errno, Error, Result};
use crate::flags::OpFlags;

/// Registration attributes (`struct fi_mr_attr`), as a provider receives them.
#[derive(Clone, Copy, Debug)]
pub struct MrAttr<'a> {
    /// The buffers.
    pub iov: &'a [Iov],
    /// Access bits: `SEND`, `RECV`, `READ`, `WRITE`, `REMOTE_READ`, `REMOTE_WRITE`.
    pub access: OpFlags,
    /// Offset (base of remote offsets without `FI_MR_VIRT_ADDR`).
    pub offset: u64,
    /// Requested key (without `FI_MR_PROV_KEY`).
    pub requested_key: u64,
    /// Context of asynchronous registration events.
    pub context: usize,
    /// Authorization key.
    pub auth_key: Option<&'a [u8]>,
    /// Memory interface.
    pub iface: HmemIface,
    /// Device of the interface.
    pub device: u64,
}

impl<'a> MrAttr<'a> {
    /// Attributes for `iov` with `access`, defaults elsewhere.
    pub fn new(iov: &'a [Iov], access: OpFlags) -> MrAttr<'a> {
        MrAttr {
            iov,
            access,
            offset: 0,
            requested_key: 0,
            context: 0,
            auth_key: None,
            iface: HmemIface::System,
            device: 0,
        }
    }

    /// The raw form (pointing into `self`'s slices).
    pub fn to_raw(&self) -> RawMrAttr {
        RawMrAttr {
            mr_iov: self.iov.as_ptr(),
            iov_count: self.iov.len(),
            access: self.access.bits(),
            offset: self.offset,
            requested_key: self.requested_key,
            context: self.context,
            auth_key: self.auth_key.map_or(RawStr::NONE, RawStr::from_bytes),
            iface: self.iface.to_raw(),
            device: self.device,
        }
    }

    /// From the raw form (an unknown interface is `FI_EINVAL`).
    ///
    /// # Safety
    /// The arrays of `r` must be valid for `'a`.
    pub unsafe fn from_raw(r: &RawMrAttr) -> Result<MrAttr<'a>> {
        let iov: &'a [Iov] = if r.mr_iov.is_null() || r.iov_count == 0 {
            &[]
        } else {
            // SAFETY: valid for `iov_count` by this function's contract.
            unsafe { std::slice::from_raw_parts(r.mr_iov, r.iov_count) }
        };
        Ok(MrAttr {
            iov,
            access: OpFlags::from_bits_retain(r.access),
            offset: r.offset,
            requested_key: r.requested_key,
            context: r.context,
            // SAFETY: valid by this function's contract.
            auth_key: unsafe { r.auth_key.bytes() },
            iface: HmemIface::try_from(r.iface)?,
            device: r.device,
        })
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open memory region.
    MemoryRegion(MrTable, "a memory region") {
        owned: Option<OwnedMem>,
    }
}

/// Memory a region owns: a heap block taken from a `Vec` and returned to the allocator
/// on drop, accessed only through raw pointers (see the module docs).
pub(crate) struct OwnedMem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a plain heap block; every access is a raw-pointer copy whose coordination is
// the caller's (as for any registered memory).
unsafe impl Send for OwnedMem {}
// SAFETY: see `Send`.
unsafe impl Sync for OwnedMem {}

impl OwnedMem {
    /// Take `v`'s memory.
    pub(crate) fn new(v: Vec<u8>) -> OwnedMem {
        let b = v.into_boxed_slice();
        let len = b.len();
        OwnedMem {
            ptr: Box::into_raw(b).cast::<u8>(),
            len,
        }
    }

    /// Base address (writable: derived from the box itself) and length.
    pub(crate) fn raw(&self) -> (*mut u8, usize) {
        (self.ptr, self.len)
    }
}

impl Drop for OwnedMem {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a boxed slice of `len` bytes
        // and are released once, here.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node
            .fmt_object(f, "MemoryRegion", &[("key", &self.key())])
    }
}

impl MemoryRegion {
    pub(crate) fn set_owned(&mut self, mem: OwnedMem) {
        self.owned = Some(mem);
    }

    /// Base address and length of the memory a region registered with
    /// [`mr_reg_owned`](crate::domain::Domain::mr_reg_owned) owns (`None` for other
    /// regions). The memory stays valid while the region or a binding to it lives;
    /// peers may write it whenever the registration allows.
    pub fn owned_ptr(&self) -> Option<(*mut u8, usize)> {
        self.owned.as_ref().map(OwnedMem::raw)
    }

    /// Copy `out.len()` bytes of the owned memory from `offset` into `out` (volatile
    /// reads: a peer may be writing meanwhile; what such a race yields is the
    /// application's to coordinate, as in C). `FI_EINVAL` for a region without owned
    /// memory or a range outside it.
    pub fn read_owned(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let p = self.owned_range(offset, out.len())?;
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: `p + i` lies in the owned block (range checked), which lives as
            // long as `self`; a volatile read creates no reference.
            *o = unsafe { std::ptr::read_volatile(p.add(i)) };
        }
        Ok(())
    }

    /// A copy of the whole owned memory (`None` for a region without it); see
    /// [`read_owned`](Self::read_owned).
    pub fn owned_to_vec(&self) -> Option<Vec<u8>> {
        let (_, len) = self.owned_ptr()?;
        let mut v = vec![0u8; len];
        self.read_owned(0, &mut v).ok()?;
        Some(v)
    }

    /// Write `data` into the owned memory at `offset` (volatile writes). Change memory
    /// an operation in flight reads or writes only if that race is what you want.
    /// `FI_EINVAL` for a region without owned memory or a range outside it.
    pub fn write_owned(&self, offset: usize, data: &[u8]) -> Result<()> {
        let p = self.owned_range(offset, data.len())?;
        for (i, &d) in data.iter().enumerate() {
            // SAFETY: as in `read_owned`; the block is writable (it came from a Box).
            unsafe { std::ptr::write_volatile(p.add(i), d) };
        }
        Ok(())
    }

    /// The start of `offset..offset + len` inside the owned memory.
    fn owned_range(&self, offset: usize, len: usize) -> Result<*mut u8> {
        let Some((base, size)) = self.owned_ptr() else {
            return Err(Error::new(
                Errno::EINVAL,
                "this region does not own its memory (mr_reg_owned)",
            ));
        };
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(base.wrapping_add(offset)),
            _ => Err(Error::new(
                Errno::EINVAL,
                format!("bytes {offset}..+{len} are outside the region's {size} bytes"),
            )),
        }
    }

    // ---- one method per entry of the list (`for_each_mr_op!`) ----
    crate::for_each_mr_op!(crate::abi::ctl_ops::ctl_wrappers);
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // An owned buffer must outlive the registration, which lives as long as the
        // node (bindings may hold it): hand the buffer to the node.
        if let Some(mem) = self.owned.take() {
            self.node.keep_until_drop(Box::new(mem));
        }
    }
}
