//! Protection domains and address handles.

use crate::device::Context;
use crate::mr::MemoryRegion;
use crate::qp::{QpInitAttr, QueuePair, SharedReceiveQueue, SrqInitAttr};
use crate::verbs::{Access, AhAttr, Gid};
use ofi_core::{Errno, Error, Result};

/// A protection domain (`struct ibv_pd`): memory regions, queue pairs and shared receive
/// queues of one domain only work together.
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    pub(crate) ctx: Context,
    pub(crate) id: u32,
}

impl ProtectionDomain {
    /// The context it belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Registers `len` bytes at `addr` (`ibv_reg_mr`). `REMOTE_WRITE` and
    /// `REMOTE_ATOMIC` need `LOCAL_WRITE`, as in verbs.
    ///
    /// # Safety
    /// The range stays valid (allocated, not unmapped) until the region is dropped: the
    /// device and remote peers read and write it at any time meanwhile. Treat it as
    /// memory written concurrently: read it with raw-pointer copies or volatile reads.
    pub unsafe fn reg_mr(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemoryRegion> {
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(Error::new(
                Errno::EINVAL,
                "remote write or atomic access needs LOCAL_WRITE",
            ));
        }
        if len == 0 || (addr as u64).checked_add(len as u64).is_none() {
            return Err(Error::new(Errno::EINVAL, "bad memory range"));
        }
        let key = self.ctx.owner.shared.mrs.insert(crate::soft::mem::MrEntry {
            pd: self.id,
            addr: addr as u64,
            len: len as u64,
            access,
        });
        Ok(MemoryRegion {
            ctx: self.ctx.clone(),
            key,
            addr: addr as u64,
            len,
        })
    }

    /// Creates a queue pair (`ibv_create_qp`).
    pub fn create_qp(&self, attr: &QpInitAttr<'_>) -> Result<QueuePair> {
        QueuePair::create(self, attr)
    }

    /// Creates a shared receive queue (`ibv_create_srq`).
    pub fn create_srq(&self, attr: &SrqInitAttr) -> Result<SharedReceiveQueue> {
        SharedReceiveQueue::create(self, attr)
    }

    /// Creates an address handle for UD sends (`ibv_create_ah`).
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        Ok(AddressHandle {
            _pd: self.clone(),
            attr: *attr,
        })
    }
}

/// An address handle (`struct ibv_ah`): where a UD send goes.
#[derive(Clone, Debug)]
pub struct AddressHandle {
    _pd: ProtectionDomain,
    attr: AhAttr,
}

impl AddressHandle {
    /// The destination GID.
    pub fn dgid(&self) -> Gid {
        self.attr.dgid
    }

    /// The attributes it was created with.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
}
