//! Memory regions.

use crate::device::Context;

/// A registered memory region (`struct ibv_mr`); deregistered on drop (after any copy
/// the device has in flight into or out of it).
#[derive(Debug)]
pub struct MemoryRegion {
    pub(crate) ctx: Context,
    pub(crate) key: u32,
    pub(crate) addr: u64,
    pub(crate) len: usize,
}

impl MemoryRegion {
    /// Local key (for scatter/gather elements).
    pub fn lkey(&self) -> u32 {
        self.key
    }

    /// Remote key (what a peer names in an RDMA operation).
    pub fn rkey(&self) -> u32 {
        self.key
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
        self.ctx.owner.shared.mrs.remove(self.key);
    }
}
