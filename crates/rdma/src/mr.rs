//! Memory regions.

use std::sync::Arc;

use crate::device::Context;
use crate::sys::objects::SysMr;

/// A registered memory region (`struct ibv_mr`); deregistered on drop (after any copy
/// the device has in flight into or out of it).
pub struct MemoryRegion {
    pub(crate) inner: MrInner,
    pub(crate) addr: u64,
    pub(crate) len: usize,
}

/// The backend of a memory region.
pub(crate) enum MrInner {
    Soft { ctx: Context, key: u32 },
    Sys(Arc<SysMr>),
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &self.addr)
            .field("len", &self.len)
            .field("lkey", &self.lkey())
            .finish()
    }
}

impl MemoryRegion {
    /// Local key (for scatter/gather elements).
    pub fn lkey(&self) -> u32 {
        match &self.inner {
            MrInner::Soft { key, .. } => *key,
            MrInner::Sys(m) => m.keys().0,
        }
    }

    /// Remote key (what a peer names in an RDMA operation).
    pub fn rkey(&self) -> u32 {
        match &self.inner {
            MrInner::Soft { key, .. } => *key,
            MrInner::Sys(m) => m.keys().1,
        }
    }

    /// Start address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never: registration refuses empty ranges).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        if let MrInner::Soft { ctx, key } = &self.inner {
            if let Some(o) = ctx.soft() {
                o.shared.mrs.remove(*key);
            }
        }
    }
}
