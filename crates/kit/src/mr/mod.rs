//! Memory registration: [`MrTable`], a domain's registrations, and [`KitMr`], one
//! registration, implementing core's [`MrOps`] (fi_mr(3)).
//!
//! A provider keeps one `Arc<MrTable>` per domain, calls [`MrTable::register`] from
//! `DomainOps::mr_reg`, and names [`KitMr`] as its `DomainOps::Mr`. On the data path it
//! asks the table two questions, both allocation-free:
//! - [`MrTable::lookup_remote`]: may a peer access `len` bytes at `addr` under `key`
//!   with `access`? The answer, a [`RemoteRegion`], gives the local address(es) to copy
//!   from or to — the provider does the copy (this crate has no `unsafe`) — and counts
//!   the access on bound counters ([`RemoteRegion::count_access`]);
//! - [`MrTable::check_local`]: under `FI_MR_LOCAL`, is `desc` a registration covering
//!   the local buffer?
//!
//! # Modes (the domain's `mr_mode`, fixed at [`MrTable::new`])
//!
//! - `FI_MR_PROV_KEY`: the table chooses keys (unique among live registrations, never
//!   `FI_KEY_NOTAVAIL`; with 8-byte keys a scrambled counter, so keys are not simply
//!   1, 2, 3; with shorter keys a counter over the key range);
//!   `requested_key` is ignored. Without it the application's `requested_key` is the
//!   key: one already in use is `FI_ENOKEY`; one beyond [`MrConfig::key_size`] bytes
//!   or equal to `FI_KEY_NOTAVAIL` is `FI_EKEYREJECTED` (fi_mr(3) ERRORS).
//! - `FI_MR_VIRT_ADDR`: peers address the region by the virtual address of its first
//!   buffer; without it by offsets starting at `attr.offset` (normally 0). A region
//!   of several buffers (`fi_mr_regv`) is one contiguous range of `sum(len)` bytes in
//!   that address space, its buffers laid end to end.
//! - `FI_MR_ALLOCATED`: buffers must be backed at registration. The kit cannot check
//!   backing pages; it rejects null buffers (`FI_EINVAL`) and otherwise takes the
//!   application's word. Without it any address range may be registered.
//! - `FI_MR_LOCAL`: local buffers need a descriptor; [`MrTable::check_local`] enforces
//!   it (and does nothing without the mode: descriptors are then ignored).
//! - `FI_MR_ENDPOINT`: regions start disabled; they must be bound to one endpoint
//!   ([`KitMr::bind_endpoint`]) and then enabled ([`KitMr::enable`]).
//! - `FI_MR_RMA_EVENT`: regions registered with the `FI_RMA_EVENT` flag start disabled;
//!   their counters are bound, then they are enabled; after enabling no more bindings.
//! - `FI_MR_BASIC` stands for `VIRT_ADDR | ALLOCATED | PROV_KEY`. `FI_MR_RAW` is not
//!   supported (`FI_ENOSYS` at [`MrTable::new`]). `FI_MR_MMU_NOTIFY`, `FI_MR_HMEM`,
//!   `FI_MR_COLLECTIVE` need nothing from the table ([`KitMr::refresh`] validates its
//!   ranges; `iface`/`device` are stored for the provider).
//!
//! # Region states
//!
//! `registered (disabled)` —bind ep / counters→ `enable` → `enabled` — `close` →
//! `closed`. A region that needs neither `FI_MR_ENDPOINT` nor `FI_MR_RMA_EVENT` is
//! enabled at registration. Using a disabled region (remote access, local check) is
//! `FI_EOPBADSTATE`; so are enabling an `FI_MR_ENDPOINT` region not bound to an
//! endpoint, and binding to a region already enabled where the mode forbids it.
//!
//! # Error codes of the data-path checks (chosen here; fi_mr(3) leaves them open)
//!
//! | condition | code |
//! |---|---|
//! | no live registration has `key` | `FI_ENOKEY` |
//! | region not enabled yet | `FI_EOPBADSTATE` |
//! | access not granted (e.g. `REMOTE_WRITE` on a read-only region) | `FI_EACCES` |
//! | range before the region, past its end, or `addr + len` overflowing | `FI_EFAULT` |
//! | `FI_MR_ENDPOINT`: region bound to another endpoint ([`MrTable::lookup_remote_ep`]) | `FI_ENOKEY` |
//! | local: null or unknown descriptor | `FI_EINVAL` |
//!
//! Checks run in that order (key, state, access, range); all arithmetic is checked.
//! A zero-length access is accepted anywhere in `[start, end]` of the region.
//! Errors on these paths carry static messages (no allocation).
//!
//! # Counters (`FI_RMA_EVENT`)
//!
//! A counter bound with `FI_REMOTE_WRITE` counts remote writes and atomics that modify
//! the region, with `FI_REMOTE_READ` remote reads; [`RemoteRegion::count_access`]
//! adds 1 to each bound counter whose flags meet the access (once per counter, even
//! for a fetching atomic that both reads and writes). The counter is reached through
//! a [`CounterHook`] the provider's counter type supplies ([`RmaCounterTarget`]).
//!
//! # Threads
//!
//! The table is an `RwLock` over two hash maps (key → region, descriptor → region);
//! lookups share it. Each region's mutable state (enabled, endpoint, counters) has its
//! own `RwLock`. Poisoned locks are recovered. Nothing here panics.
//!
//! # Files
//!
//! This file: the types; `table.rs`: [`MrTable`] (registration, keys, checked
//! lookups); `region.rs`: [`KitMr`] and core's `MrOps`; `tests.rs`.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ofi_core::abi::raw::Iov;
use ofi_core::enums::{HmemIface, KEY_NOTAVAIL};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{Caps, MrMode, OpFlags};
use ofi_core::mr::MrAttr;
use ofi_core::provider::{
    CntrOf, CntrOps, Desc, EpOf, FabricOps, MrBindTarget, MrOps, Unsupported,
};

use crate::wait::{read_lock, write_lock};

/// `FI_RMA_EVENT` as a registration flag: the region will be bound to counters.
pub const REG_RMA_EVENT: u64 = Caps::RMA_EVENT.bits();
/// `FI_RMA_PMEM` as a registration flag (accepted; persistence is the provider's).
pub const REG_RMA_PMEM: u64 = Caps::RMA_PMEM.bits();
/// `FI_HMEM_HOST_ALLOC` registration flag (accepted, recorded).
pub const REG_HMEM_HOST_ALLOC: u64 = 1 << 45;
/// `FI_HMEM_DEVICE_ONLY` registration flag (accepted, recorded).
pub const REG_HMEM_DEVICE_ONLY: u64 = 1 << 46;

const REG_FLAGS: u64 = REG_RMA_EVENT | REG_RMA_PMEM | REG_HMEM_HOST_ALLOC | REG_HMEM_DEVICE_ONLY;

/// The remote access bits.
const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

/// The access bits a registration may carry: the local ones, the remote ones
/// (`FI_REMOTE_READ`, `FI_REMOTE_WRITE`) and `FI_COLLECTIVE`.
pub const MR_ACCESS: OpFlags = OpFlags::SEND
    .union(OpFlags::RECV)
    .union(OpFlags::READ)
    .union(OpFlags::WRITE)
    .union(REMOTE)
    .union(OpFlags::COLLECTIVE);

fn err<T>(code: Errno, msg: impl Into<std::borrow::Cow<'static, str>>) -> Result<T> {
    Err(Error::new(code, msg))
}

/// The error `code` for a refused request: `why`, after the name of the call (`what`).
/// Kept out of line: only failures build it.
#[cold]
#[inline(never)]
fn refused(code: Errno, what: &str, why: &str) -> Error {
    Error::new(code, format!("{what}: {why}"))
}

/// Adds to a counter: how a region reports remote accesses (`FI_RMA_EVENT`).
#[derive(Clone)]
pub struct CounterHook(Arc<dyn Fn(u64) + Send + Sync>);

impl CounterHook {
    /// A hook calling `f` with the amount to add.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> CounterHook {
        CounterHook(Arc::new(f))
    }

    /// A hook adding to a counter through [`CntrOps::add`] (its error, if any, is
    /// dropped: an access that happened cannot be undone).
    pub fn from_counter<C: CntrOps>(cntr: Arc<C>) -> CounterHook {
        CounterHook::new(move |n| {
            let _ = cntr.add(n);
        })
    }

    /// Add `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        (self.0)(n)
    }
}

impl fmt::Debug for CounterHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CounterHook")
    }
}

/// What a provider's endpoint type gives a region bound to it (`FI_MR_ENDPOINT`): an
/// id unique among the domain's live endpoints. Needed for `KitMr`'s [`MrOps`].
pub trait MrEndpointTarget {
    /// The endpoint's id (compared by [`MrTable::lookup_remote_ep`]).
    fn mr_endpoint_id(&self) -> u64;
}

/// What a provider's counter type gives a region bound to it: a hook to count remote
/// accesses. Needed for `KitMr`'s [`MrOps`].
pub trait RmaCounterTarget {
    /// A hook adding to this counter; `FI_ENOSYS` if it cannot count RMA events.
    fn rma_counter_hook(&self) -> Result<CounterHook>;
}

impl MrEndpointTarget for Unsupported {
    fn mr_endpoint_id(&self) -> u64 {
        match *self {}
    }
}

impl RmaCounterTarget for Unsupported {
    fn rma_counter_hook(&self) -> Result<CounterHook> {
        match *self {}
    }
}

/// The kit's counter counts remote accesses directly (the hook shares the counter).
impl RmaCounterTarget for crate::cntr::KitCntr {
    fn rma_counter_hook(&self) -> Result<CounterHook> {
        Ok(CounterHook::from_counter(Arc::new(self.clone())))
    }
}

/// How a provider configures its registrations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MrConfig {
    /// The domain's `mr_mode` (`FI_MR_BASIC` is expanded).
    pub mode: MrMode,
    /// Bytes of a key (`mr_key_size`, 1..=8): user keys must fit.
    pub key_size: usize,
    /// Most buffers per registration (`mr_iov_limit`).
    pub iov_limit: usize,
}

impl MrConfig {
    /// `mode` with 8-byte keys and no iov limit.
    pub fn new(mode: MrMode) -> MrConfig {
        MrConfig {
            mode,
            key_size: 8,
            iov_limit: usize::MAX,
        }
    }

    /// A domain's table for `requested` (its `domain_attr.mr_mode`): the modes the
    /// kit's table implements (`FI_MR_VIRT_ADDR`, `FI_MR_PROV_KEY`, `FI_MR_ALLOCATED`,
    /// `FI_MR_LOCAL`) that were requested, 8-byte keys, at most `iov_limit` buffers a
    /// region.
    pub fn for_domain(requested: MrMode, iov_limit: usize) -> MrConfig {
        MrConfig {
            iov_limit,
            ..MrConfig::new(
                requested
                    & (MrMode::VIRT_ADDR | MrMode::PROV_KEY | MrMode::ALLOCATED | MrMode::LOCAL),
            )
        }
    }
}

/// One buffer of a region.
#[derive(Clone, Copy, Debug)]
struct Seg {
    /// Local address.
    base: usize,
    len: usize,
    /// Offset of its first byte in the region.
    start: u64,
}

#[derive(Debug, Default)]
struct RegionState {
    enabled: bool,
    closed: bool,
    ep: Option<u64>,
    counters: Vec<(OpFlags, CounterHook)>,
}

#[derive(Debug)]
struct Region {
    key: u64,
    desc: usize,
    segs: Box<[Seg]>,
    total: u64,
    /// First remote address of the region.
    remote_base: u64,
    access: OpFlags,
    flags: u64,
    iface: HmemIface,
    device: u64,
    context: usize,
    state: RwLock<RegionState>,
}

impl Region {
    fn state(&self) -> RwLockReadGuard<'_, RegionState> {
        read_lock(&self.state)
    }

    fn state_mut(&self) -> RwLockWriteGuard<'_, RegionState> {
        write_lock(&self.state)
    }

    /// Whether the region grants `access` (`what` names the lookup in the message).
    ///
    /// # Errors
    /// `FI_EACCES` when it does not.
    #[inline(always)]
    fn check_access(&self, what: &str, access: OpFlags) -> Result<()> {
        if !self.access.contains(access) {
            return Err(refused(
                Errno::EACCES,
                what,
                "access not granted by the region",
            ));
        }
        Ok(())
    }

    /// The segment holding region offset `off` (the last one for `off == total`).
    fn seg_of(&self, off: u64) -> usize {
        let i = self.segs.partition_point(|s| s.start <= off);
        i.saturating_sub(1)
    }
}

#[derive(Debug, Default)]
struct TableInner {
    by_key: HashMap<u64, Arc<Region>>,
    by_desc: HashMap<usize, Arc<Region>>,
    next_desc: usize,
    next_prov: u64,
}

/// A domain's memory registrations (see the module docs).
#[derive(Debug)]
pub struct MrTable {
    mode: MrMode,
    key_max: u64,
    iov_limit: usize,
    inner: RwLock<TableInner>,
}

/// The answer of [`MrTable::lookup_remote`]: where a checked remote access lands.
///
/// It keeps the region alive (an `Arc`), so the numbers stay meaningful even if the
/// region is closed meanwhile — but then the memory may be gone: fi_mr(3) leaves
/// accesses racing with a close undefined, and so does the kit.
#[derive(Clone, Debug)]
pub struct RemoteRegion {
    region: Arc<Region>,
    seg: usize,
    offset: usize,
    len: usize,
    access: OpFlags,
    ep: Option<u64>,
}

impl RemoteRegion {
    /// The region's key.
    pub fn key(&self) -> u64 {
        self.region.key
    }

    /// Local base address of the registered buffer the access starts in.
    pub fn base(&self) -> usize {
        self.region.segs[self.seg].base
    }

    /// Offset of the first byte within that buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Local address of the first byte (`base + offset`).
    pub fn addr(&self) -> usize {
        self.base() + self.offset
    }

    /// Bytes accessed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the access has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access it was checked for.
    pub fn access(&self) -> OpFlags {
        self.access
    }

    /// The endpoint the region is bound to (`FI_MR_ENDPOINT`).
    pub fn endpoint(&self) -> Option<u64> {
        self.ep
    }

    /// Whether the bytes are contiguous in local memory (one registered buffer).
    pub fn is_contiguous(&self) -> bool {
        let s = &self.region.segs[self.seg];
        self.len <= s.len - self.offset
    }

    /// The local pieces `(address, length)` of the access, in order (one unless the
    /// access crosses buffers of an `fi_mr_regv` region); empty for a zero length.
    pub fn segments(&self) -> RemoteSegments<'_> {
        RemoteSegments {
            segs: &self.region.segs,
            next: self.seg,
            offset: self.offset,
            left: self.len,
        }
    }

    /// `FI_RMA_EVENT`: add 1 to every counter bound to the region whose flags meet
    /// this access. Call it once the access has been done.
    pub fn count_access(&self) {
        let state = self.region.state();
        for (flags, hook) in &state.counters {
            if flags.intersects(self.access) {
                hook.add(1);
            }
        }
    }
}

/// The local pieces of a [`RemoteRegion`].
#[derive(Debug)]
pub struct RemoteSegments<'a> {
    segs: &'a [Seg],
    next: usize,
    offset: usize,
    left: usize,
}

impl Iterator for RemoteSegments<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.left == 0 {
            return None;
        }
        let s = self.segs.get(self.next)?;
        let n = (s.len - self.offset).min(self.left);
        let piece = (s.base + self.offset, n);
        self.left -= n;
        self.next += 1;
        self.offset = 0;
        Some(piece)
    }
}

/// One registration (see the module docs); closing or dropping it deregisters.
pub struct KitMr {
    table: Arc<MrTable>,
    region: Arc<Region>,
}

impl fmt::Debug for KitMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KitMr")
            .field("key", &self.region.key)
            .field("desc", &self.region.desc)
            .field("len", &self.region.total)
            .field("access", &self.region.access)
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

mod region;
mod table;

#[cfg(test)]
mod tests;
