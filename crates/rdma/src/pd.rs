//! Protection domains and address handles.

use std::sync::Arc;

use crate::device::{mixed, Context, CtxInner};
use crate::mr::{MemoryRegion, MrInner};
use crate::qp::{QpInitAttr, QueuePair, SharedReceiveQueue, SrqInitAttr};
use crate::sys::objects::{SysAh, SysPd};
use crate::verbs::{Access, AhAttr, Gid};
use ofi_core::{Errno, Error, Result};

/// A protection domain (`struct ibv_pd`): memory regions, queue pairs and shared receive
/// queues of one domain only work together.
#[derive(Clone, Debug)]
pub struct ProtectionDomain {
    pub(crate) ctx: Context,
    pub(crate) inner: PdInner,
}

/// The backend of a protection domain.
#[derive(Clone, Debug)]
pub(crate) enum PdInner {
    /// The software device's domain number.
    Soft(u32),
    Sys(Arc<SysPd>),
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
        let inner = match (&self.inner, &self.ctx.inner) {
            (PdInner::Soft(id), CtxInner::Soft(o)) => {
                let key = o.shared.mrs.insert(crate::soft::mem::MrEntry {
                    pd: *id,
                    addr: addr as u64,
                    len: len as u64,
                    access,
                });
                MrInner::Soft {
                    ctx: self.ctx.clone(),
                    key,
                }
            }
            (PdInner::Sys(pd), _) => {
                // SAFETY: caller's contract.
                let mr = unsafe { crate::sys::objects::reg_mr(pd, addr, len, access) }?;
                MrInner::Sys(mr)
            }
            _ => return Err(mixed()),
        };
        Ok(MemoryRegion {
            inner,
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
        let inner = match &self.inner {
            PdInner::Soft(_) => AhInner::Soft(self.clone()),
            PdInner::Sys(pd) => AhInner::Sys(crate::sys::objects::create_ah(pd, attr)?),
        };
        Ok(AddressHandle { inner, attr: *attr })
    }
}

/// An address handle (`struct ibv_ah`): where a UD send goes.
#[derive(Clone, Debug)]
pub struct AddressHandle {
    pub(crate) inner: AhInner,
    attr: AhAttr,
}

/// The backend of an address handle.
#[derive(Clone, Debug)]
pub(crate) enum AhInner {
    /// The software device keeps only the attributes (and the domain alive).
    Soft(#[allow(dead_code)] ProtectionDomain),
    Sys(Arc<SysAh>),
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

    /// The EFA device's number for this handle (`efadv_query_ah`): how an EFA receive
    /// completion names a sender the receiver has this handle for (in `slid`).
    /// `EOPNOTSUPP` on the software device (whose receives name the sender in a GRH)
    /// or without libefa; the device's error on a device that is not EFA's.
    pub fn efa_ahn(&self) -> Result<u16> {
        match &self.inner {
            AhInner::Soft(_) => Err(Error::new(
                Errno::EOPNOTSUPP,
                "the software device has no address handle numbers",
            )),
            AhInner::Sys(ah) => ah.efa_ahn(),
        }
    }
}
