//! Memory regions: `fi_mr_reg` registers with the device (`ibv_reg_mr`); the key is the
//! region's rkey (`FI_MR_PROV_KEY`), remote addresses are virtual addresses
//! (`FI_MR_VIRT_ADDR`). Local write is always granted (verbs needs it for remote write
//! and atomics, and receives land in registered memory); `FI_REMOTE_WRITE` grants remote
//! write and remote atomics, `FI_REMOTE_READ` remote read.
//!
//! Invariants: a region is in the domain's table exactly while it is registered. Nothing
//! here panics.

use std::sync::{Arc, Mutex};

use ofi_core::mr::MrAttr;
use ofi_core::provider::{Desc, MrOps};
use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_rdma::{Access, MemoryRegion};

use crate::cm::lock;
use crate::domain::DomainShared;
use crate::fabric::Fabric;
use crate::NAME;

/// A registered region.
pub struct VerbsMr {
    domain: Arc<DomainShared>,
    key: u64,
    addr: usize,
    lkey: u32,
    /// A stable address handed out as the descriptor.
    desc: Box<u32>,
    mr: Mutex<Option<MemoryRegion>>,
}

impl std::fmt::Debug for VerbsMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsMr").field("key", &self.key).finish()
    }
}

impl VerbsMr {
    pub(crate) fn register(
        domain: Arc<DomainShared>,
        attr: &MrAttr<'_>,
        flags: u64,
    ) -> Result<VerbsMr> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("{NAME}: no registration flags are supported"),
            ));
        }
        let [iov] = attr.iov else {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: one iov per region (mr_iov_limit 1)"),
            ));
        };
        let known = OpFlags::SEND
            | OpFlags::RECV
            | OpFlags::READ
            | OpFlags::WRITE
            | OpFlags::REMOTE_READ
            | OpFlags::REMOTE_WRITE;
        if !(attr.access - known).is_empty() {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!(
                    "{NAME}: unknown access bits {:#x}",
                    (attr.access - known).bits()
                ),
            ));
        }
        let mut access = Access::LOCAL_WRITE;
        if attr.access.contains(OpFlags::REMOTE_WRITE) {
            access |= Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        }
        if attr.access.contains(OpFlags::REMOTE_READ) {
            access |= Access::REMOTE_READ;
        }
        let addr = iov.base as usize;
        // SAFETY: the application keeps the memory valid while it is registered
        // (fi_mr_reg's contract); the region is deregistered on close or drop.
        let mr = unsafe { domain.pd.reg_mr(iov.base.cast(), iov.len, access)? };
        let (lkey, rkey) = (mr.lkey(), mr.rkey());
        domain.add_region(addr, iov.len, lkey);
        Ok(VerbsMr {
            domain,
            key: u64::from(rkey),
            addr,
            lkey,
            desc: Box::new(lkey),
            mr: Mutex::new(Some(mr)),
        })
    }

    fn release(&self) {
        if let Some(mr) = lock(&self.mr).take() {
            self.domain.remove_region(self.addr, self.lkey);
            drop(mr);
        }
    }
}

impl Drop for VerbsMr {
    fn drop(&mut self) {
        self.release();
    }
}

impl MrOps<Fabric> for VerbsMr {
    fn key(&self) -> u64 {
        self.key
    }

    fn desc(&self) -> Desc {
        (&*self.desc as *const u32).cast_mut().cast()
    }

    fn close(&self) -> Result<()> {
        self.release();
        Ok(())
    }
}
