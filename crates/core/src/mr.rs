//! Memory regions (`fi_mr`): registration attributes and the public [`MemoryRegion`].
//!
//! A registration makes memory usable by the provider: its descriptor
//! ([`MemoryRegion::desc`]) goes with local buffers in data calls, its key
//! ([`MemoryRegion::key`]) to peers for RMA and atomics. The registered memory must
//! stay valid until the region is closed: the raw registrations
//! ([`crate::domain::Domain::mr_reg`]) are `unsafe` for that reason;
//! [`crate::domain::Domain::mr_reg_owned`] registers a buffer the region owns.
//! Nothing here panics.

use std::ffi::c_void;
use std::sync::Arc;

use crate::abi::object::{ctl, ok_or_code, AsFid, FidRef, Node};
use crate::abi::raw::{Iov, Obj, RawMrAttr, RawStr};
use crate::abi::tables::{call_slot, MrTable};
use crate::cntr::Counter;
use crate::enums::{HmemIface, KEY_NOTAVAIL};
use crate::ep::Endpoint;
use crate::error::Result;
use crate::flags::OpFlags;
use crate::provider::Desc;

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

/// An open memory region.
pub struct MemoryRegion {
    obj: Obj,
    ops: *const MrTable,
    node: Arc<Node>,
    owned: Option<Box<[u8]>>,
}

// SAFETY: the object and table are required by the interface to be usable from any
// thread; the node is thread-safe; `owned` is plain memory.
unsafe impl Send for MemoryRegion {}
// SAFETY: see `Send`.
unsafe impl Sync for MemoryRegion {}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("provider", &self.node.prov())
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

impl AsFid for MemoryRegion {
    fn as_fid(&self) -> FidRef<'_> {
        FidRef::new(&self.node, self.obj)
    }
}

impl MemoryRegion {
    /// Wrap a provider's MR.
    ///
    /// # Safety
    /// `obj`/`ops` must be an MR and its table from the provider of `node`'s family,
    /// owned from now on by `node`.
    pub(crate) unsafe fn from_raw(obj: Obj, ops: *const MrTable, node: Arc<Node>) -> MemoryRegion {
        MemoryRegion {
            obj,
            ops,
            node,
            owned: None,
        }
    }

    pub(crate) fn set_owned(&mut self, buf: Box<[u8]>) {
        self.owned = Some(buf);
    }

    #[inline(always)]
    fn t(&self) -> &MrTable {
        // SAFETY: the provider's table or the static CLOSED table.
        unsafe { &*self.ops }
    }

    /// `fi_mr_key`: the key peers use, or `FI_KEY_NOTAVAIL`.
    pub fn key(&self) -> u64 {
        let mut k = KEY_NOTAVAIL;
        // SAFETY: `k` valid for a write.
        let rc = unsafe { call_slot!(self.t(), MrTable.key(self.obj, &mut k)) };
        if rc == 0 {
            k
        } else {
            KEY_NOTAVAIL
        }
    }

    /// `fi_mr_desc`: the descriptor to pass with local buffers (null if none).
    pub fn desc(&self) -> Desc {
        let mut d: *mut c_void = std::ptr::null_mut();
        // SAFETY: `d` valid for a write.
        let rc = unsafe { call_slot!(self.t(), MrTable.desc(self.obj, &mut d)) };
        if rc == 0 {
            d
        } else {
            std::ptr::null_mut()
        }
    }

    /// The buffer a region registered with `mr_reg_owned` owns.
    pub fn buf(&self) -> Option<&[u8]> {
        self.owned.as_deref()
    }

    /// The owned buffer, mutably (do not change it while operations on it are
    /// outstanding).
    pub fn buf_mut(&mut self) -> Option<&mut [u8]> {
        self.owned.as_deref_mut()
    }

    fn bind_fid(&self, target: FidRef<'_>, flags: u64) -> Result<()> {
        self.node.check_peer(target.node(), "MR bind")?;
        let raw = target.raw();
        // SAFETY: our own object; `raw` names an open object of our family.
        ctl(|e| unsafe { call_slot!(self.t(), MrTable.bind(self.obj, raw, flags, e)) })?;
        self.node.add_binding(target.node());
        Ok(())
    }

    /// `fi_mr_bind` to an endpoint (`FI_MR_ENDPOINT`).
    pub fn bind_ep(&self, ep: &Endpoint, flags: u64) -> Result<()> {
        self.bind_fid(ep.as_fid(), flags)
    }

    /// `fi_mr_bind` to a counter (remote access counting).
    pub fn bind_cntr(&self, cntr: &Counter, flags: u64) -> Result<()> {
        self.bind_fid(cntr.as_fid(), flags)
    }

    /// `fi_mr_refresh`.
    pub fn refresh(&self, iov: &[Iov], flags: u64) -> Result<()> {
        // SAFETY: `iov` valid for its length.
        ok_or_code(unsafe {
            call_slot!(
                self.t(),
                MrTable.refresh(self.obj, iov.as_ptr(), iov.len(), flags)
            )
        } as isize)
    }

    /// `fi_mr_enable`.
    pub fn enable(&self) -> Result<()> {
        // SAFETY: plain call on our own object.
        ctl(|e| unsafe { call_slot!(self.t(), MrTable.enable(self.obj, e)) })
    }

    /// `fi_close`: deregister.
    pub fn close(&mut self) -> Result<()> {
        self.node.close()?;
        self.ops = MrTable::CLOSED;
        self.obj = std::ptr::null_mut();
        Ok(())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // An owned buffer must outlive the registration, which lives as long as the
        // node (bindings may hold it): hand the buffer to the node.
        if let Some(buf) = self.owned.take() {
            self.node.keep_until_drop(Box::new(buf));
        }
    }
}
