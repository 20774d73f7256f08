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

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ofi_core::abi::raw::Iov;
use ofi_core::enums::{HmemIface, KEY_NOTAVAIL};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{Caps, MrMode, OpFlags};
use ofi_core::mr::MrAttr;
use ofi_core::provider::{
    CntrOf, CntrOps, Desc, EpOf, FabricOps, MrBindTarget, MrOps, Unsupported,
};

/// `FI_RMA_EVENT` as a registration flag: the region will be bound to counters.
pub const REG_RMA_EVENT: u64 = Caps::RMA_EVENT.bits();
/// `FI_RMA_PMEM` as a registration flag (accepted; persistence is the provider's).
pub const REG_RMA_PMEM: u64 = Caps::RMA_PMEM.bits();
/// `FI_HMEM_HOST_ALLOC` registration flag (accepted, recorded).
pub const REG_HMEM_HOST_ALLOC: u64 = 1 << 45;
/// `FI_HMEM_DEVICE_ONLY` registration flag (accepted, recorded).
pub const REG_HMEM_DEVICE_ONLY: u64 = 1 << 46;

const REG_FLAGS: u64 = REG_RMA_EVENT | REG_RMA_PMEM | REG_HMEM_HOST_ALLOC | REG_HMEM_DEVICE_ONLY;

/// The access bits a registration may carry.
pub const MR_ACCESS: OpFlags = OpFlags::SEND
    .union(OpFlags::RECV)
    .union(OpFlags::READ)
    .union(OpFlags::WRITE)
    .union(OpFlags::REMOTE_READ)
    .union(OpFlags::REMOTE_WRITE)
    .union(OpFlags::COLLECTIVE);

/// The remote access bits.
const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

fn err<T>(code: Errno, msg: impl Into<std::borrow::Cow<'static, str>>) -> Result<T> {
    Err(Error::new(code, msg))
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
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn state_mut(&self) -> RwLockWriteGuard<'_, RegionState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
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

/// A bijective scramble of a counter (an odd multiply and xor-shifts), so provider
/// keys are unique without looking sequential.
fn scramble(mut x: u64) -> u64 {
    x ^= x >> 31;
    x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x
}

impl MrTable {
    /// A table for `config`.
    ///
    /// # Errors
    /// `FI_ENOSYS` for `FI_MR_RAW` (keys beyond 64 bits); `FI_EINVAL` for a key size
    /// outside 1..=8 or an iov limit of 0.
    pub fn new(config: MrConfig) -> Result<Arc<MrTable>> {
        let mut mode = config.mode;
        if mode.contains(MrMode::BASIC) {
            mode = (mode - MrMode::BASIC) | MrMode::BASIC_MAP;
        }
        mode -= MrMode::SCALABLE;
        if mode.contains(MrMode::RAW) {
            return err(Errno::ENOSYS, "MR table: FI_MR_RAW keys are not supported");
        }
        if !(1..=8).contains(&config.key_size) {
            return err(
                Errno::EINVAL,
                format!("MR table: key size {} outside 1..=8", config.key_size),
            );
        }
        if config.iov_limit == 0 {
            return err(Errno::EINVAL, "MR table: iov limit 0");
        }
        let key_max = if config.key_size == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * config.key_size)) - 1
        };
        Ok(Arc::new(MrTable {
            mode,
            key_max,
            iov_limit: config.iov_limit,
            inner: RwLock::new(TableInner {
                next_desc: 1,
                ..TableInner::default()
            }),
        }))
    }

    fn read(&self) -> RwLockReadGuard<'_, TableInner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, TableInner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The effective mode (`BASIC` expanded, `SCALABLE` dropped).
    pub fn mode(&self) -> MrMode {
        self.mode
    }

    /// Number of live registrations.
    pub fn len(&self) -> usize {
        self.read().by_key.len()
    }

    /// Whether there are no registrations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `key` names a live registration.
    pub fn contains_key(&self, key: u64) -> bool {
        self.read().by_key.contains_key(&key)
    }

    /// `fi_mr_reg` / `fi_mr_regv` / `fi_mr_regattr` (what `DomainOps::mr_reg` gets).
    ///
    /// # Errors
    /// - `FI_EBADFLAGS`: flags other than `FI_RMA_EVENT`, `FI_RMA_PMEM`,
    ///   `FI_HMEM_HOST_ALLOC`, `FI_HMEM_DEVICE_ONLY`; access bits outside [`MR_ACCESS`]
    ///   (flags of a kind the table does not know, as for every other flag argument).
    /// - `FI_EINVAL`: no buffers, more than the iov limit, a zero length, a buffer that
    ///   wraps the address space, a null buffer under `FI_MR_ALLOCATED`, a total length
    ///   or remote range that overflows 64 bits.
    /// - `FI_ENOKEY`: `requested_key` already in use (user keys).
    /// - `FI_EKEYREJECTED`: `requested_key` too large for the key size, or
    ///   `FI_KEY_NOTAVAIL` (user keys).
    /// - `FI_ENOSPC`: provider keys, and every key of the key size is in use.
    pub fn register(self: &Arc<Self>, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
        if flags & !REG_FLAGS != 0 {
            return err(
                Errno::EBADFLAGS,
                format!("mr_reg: unsupported flags {:#x}", flags & !REG_FLAGS),
            );
        }
        if attr.iov.is_empty() {
            return err(Errno::EINVAL, "mr_reg: no buffers to register");
        }
        if attr.iov.len() > self.iov_limit {
            return err(
                Errno::EINVAL,
                format!(
                    "mr_reg: {} buffers, the limit is {}",
                    attr.iov.len(),
                    self.iov_limit
                ),
            );
        }
        let extra = attr.access - MR_ACCESS;
        if !extra.is_empty() {
            return err(
                Errno::EBADFLAGS,
                format!("mr_reg: unknown access bits {:#x}", extra.bits()),
            );
        }
        let mut segs = Vec::with_capacity(attr.iov.len());
        let mut total = 0u64;
        for (i, v) in attr.iov.iter().enumerate() {
            let base = v.base as usize;
            if v.len == 0 {
                return err(Errno::EINVAL, format!("mr_reg: buffer #{i} has length 0"));
            }
            if base.checked_add(v.len).is_none() {
                return err(
                    Errno::EINVAL,
                    format!(
                        "mr_reg: buffer #{i} ({base:#x} + {}) wraps the address space",
                        v.len
                    ),
                );
            }
            if base == 0 && self.mode.contains(MrMode::ALLOCATED) {
                return err(
                    Errno::EINVAL,
                    format!("mr_reg: buffer #{i} is null (FI_MR_ALLOCATED needs backed memory)"),
                );
            }
            segs.push(Seg {
                base,
                len: v.len,
                start: total,
            });
            total = total
                .checked_add(v.len as u64)
                .ok_or_else(|| Error::new(Errno::EINVAL, "mr_reg: total length overflows"))?;
        }
        let remote_base = if self.mode.contains(MrMode::VIRT_ADDR) {
            segs[0].base as u64
        } else {
            attr.offset
        };
        if remote_base.checked_add(total).is_none() {
            return err(
                Errno::EINVAL,
                format!("mr_reg: remote range {remote_base:#x} + {total} overflows"),
            );
        }
        let needs_events = self.mode.contains(MrMode::RMA_EVENT) && flags & REG_RMA_EVENT != 0;
        let enabled = !(self.mode.contains(MrMode::ENDPOINT) || needs_events);

        let mut inner = self.write();
        let key = if self.mode.contains(MrMode::PROV_KEY) {
            // Every key is taken only with 1- to 4-byte keys; then nothing is free.
            if inner.by_key.len() as u64 > self.key_max - u64::from(self.key_max == u64::MAX) {
                return err(Errno::ENOSPC, "mr_reg: every key is in use");
            }
            loop {
                inner.next_prov = inner.next_prov.wrapping_add(1);
                // Full-width keys are scrambled (a bijection of u64); narrower ones
                // count up, which visits every key of their range in turn.
                let k = if self.key_max == u64::MAX {
                    scramble(inner.next_prov)
                } else {
                    inner.next_prov & self.key_max
                };
                if k != KEY_NOTAVAIL && !inner.by_key.contains_key(&k) {
                    break k;
                }
            }
        } else {
            let k = attr.requested_key;
            if k == KEY_NOTAVAIL || k > self.key_max {
                return err(
                    Errno::EKEYREJECTED,
                    format!("mr_reg: requested key {k:#x} is out of the key range"),
                );
            }
            if inner.by_key.contains_key(&k) {
                return err(
                    Errno::ENOKEY,
                    format!("mr_reg: requested key {k:#x} is already in use"),
                );
            }
            k
        };
        let desc = loop {
            let d = inner.next_desc;
            inner.next_desc = inner.next_desc.wrapping_add(1);
            if d != 0 && !inner.by_desc.contains_key(&d) {
                break d;
            }
        };
        let region = Arc::new(Region {
            key,
            desc,
            segs: segs.into_boxed_slice(),
            total,
            remote_base,
            access: attr.access,
            flags,
            iface: attr.iface,
            device: attr.device,
            context: attr.context,
            state: RwLock::new(RegionState {
                enabled,
                ..RegionState::default()
            }),
        });
        inner.by_key.insert(key, region.clone());
        inner.by_desc.insert(desc, region.clone());
        Ok(KitMr {
            table: self.clone(),
            region,
        })
    }

    /// Remove `region` if it is still the one under its key and descriptor.
    fn deregister(&self, region: &Arc<Region>) {
        region.state_mut().closed = true;
        region.state_mut().enabled = false;
        let mut inner = self.write();
        if inner
            .by_key
            .get(&region.key)
            .is_some_and(|r| Arc::ptr_eq(r, region))
        {
            inner.by_key.remove(&region.key);
        }
        if inner
            .by_desc
            .get(&region.desc)
            .is_some_and(|r| Arc::ptr_eq(r, region))
        {
            inner.by_desc.remove(&region.desc);
        }
    }

    /// The bounds- and access-checked target of a remote RMA or atomic: `len` bytes at
    /// remote address `addr` (a virtual address or an offset, per the mode) of the
    /// region `key`, for `access` (`FI_REMOTE_READ` and/or `FI_REMOTE_WRITE`).
    ///
    /// # Errors
    /// See the table in the module docs: `FI_ENOKEY`, `FI_EOPBADSTATE`, `FI_EACCES`,
    /// `FI_EFAULT`; `FI_EINVAL` if `access` is empty or has non-remote bits.
    #[inline]
    pub fn lookup_remote(
        &self,
        key: u64,
        addr: u64,
        len: usize,
        access: OpFlags,
    ) -> Result<RemoteRegion> {
        self.lookup_remote_inner(None, key, addr, len, access)
    }

    /// [`MrTable::lookup_remote`] for an access arriving at endpoint `ep`: under
    /// `FI_MR_ENDPOINT` a region bound to another endpoint is `FI_ENOKEY` (it does not
    /// exist for `ep`). Without the mode the same as `lookup_remote`.
    #[inline]
    pub fn lookup_remote_ep(
        &self,
        ep: u64,
        key: u64,
        addr: u64,
        len: usize,
        access: OpFlags,
    ) -> Result<RemoteRegion> {
        self.lookup_remote_inner(Some(ep), key, addr, len, access)
    }

    fn lookup_remote_inner(
        &self,
        ep: Option<u64>,
        key: u64,
        addr: u64,
        len: usize,
        access: OpFlags,
    ) -> Result<RemoteRegion> {
        if access.is_empty() || !REMOTE.contains(access) {
            return err(
                Errno::EINVAL,
                "MR lookup: access must be FI_REMOTE_READ and/or FI_REMOTE_WRITE",
            );
        }
        let region = match self.read().by_key.get(&key) {
            Some(r) => r.clone(),
            None => return err(Errno::ENOKEY, "MR lookup: no registration has this key"),
        };
        let bound_ep = {
            let st = region.state();
            if !st.enabled {
                return err(Errno::EOPBADSTATE, "MR lookup: region is not enabled");
            }
            st.ep
        };
        if let Some(ep) = ep {
            if self.mode.contains(MrMode::ENDPOINT) && bound_ep != Some(ep) {
                return err(
                    Errno::ENOKEY,
                    "MR lookup: key is not registered on this endpoint",
                );
            }
        }
        if !region.access.contains(access) {
            return err(Errno::EACCES, "MR lookup: access not granted by the region");
        }
        let off = addr.checked_sub(region.remote_base).ok_or(Error::new(
            Errno::EFAULT,
            "MR lookup: address before the region",
        ))?;
        let end = off.checked_add(len as u64).ok_or(Error::new(
            Errno::EFAULT,
            "MR lookup: address + length overflows",
        ))?;
        if end > region.total {
            return err(Errno::EFAULT, "MR lookup: range past the end of the region");
        }
        let seg = region.seg_of(off);
        let offset = (off - region.segs[seg].start) as usize;
        Ok(RemoteRegion {
            region,
            seg,
            offset,
            len,
            access,
            ep: bound_ep,
        })
    }

    /// `FI_MR_LOCAL`: is `desc` an enabled registration whose buffers hold
    /// `[buf, buf + len)`? Without `FI_MR_LOCAL` always `Ok` (descriptors are ignored);
    /// a zero `len` is always `Ok`. Allocation-free.
    ///
    /// # Errors
    /// `FI_EINVAL`: null or unknown descriptor; `FI_EOPBADSTATE`: region not enabled;
    /// `FI_EFAULT`: the buffer is not inside one of the region's buffers (or wraps).
    #[inline]
    pub fn check_local(&self, desc: Desc, buf: *const u8, len: usize) -> Result<()> {
        self.check_local_access(desc, buf, len, OpFlags::empty())
    }

    /// [`MrTable::check_local`] that also requires the region to grant `access`
    /// (`FI_SEND` for a send buffer, `FI_RECV` for a receive buffer, `FI_WRITE` for an
    /// RMA/atomic source, `FI_READ` for an RMA read or fetch result): `FI_EACCES` if
    /// not.
    pub fn check_local_access(
        &self,
        desc: Desc,
        buf: *const u8,
        len: usize,
        access: OpFlags,
    ) -> Result<()> {
        if !self.mode.contains(MrMode::LOCAL) || len == 0 {
            return Ok(());
        }
        let d = desc as usize;
        if d == 0 {
            return err(
                Errno::EINVAL,
                "MR check: FI_MR_LOCAL needs a descriptor for local buffers",
            );
        }
        let region = match self.read().by_desc.get(&d) {
            Some(r) => r.clone(),
            None => return err(Errno::EINVAL, "MR check: unknown memory descriptor"),
        };
        if !region.state().enabled {
            return err(Errno::EOPBADSTATE, "MR check: region is not enabled");
        }
        if !region.access.contains(access) {
            return err(Errno::EACCES, "MR check: access not granted by the region");
        }
        let start = buf as usize;
        let Some(end) = start.checked_add(len) else {
            return err(Errno::EFAULT, "MR check: buffer wraps the address space");
        };
        if region
            .segs
            .iter()
            .any(|s| start >= s.base && end <= s.base + s.len)
        {
            Ok(())
        } else {
            err(
                Errno::EFAULT,
                "MR check: buffer outside the registered memory",
            )
        }
    }
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
        let st = self.region.state();
        for (flags, hook) in &st.counters {
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

impl KitMr {
    /// `fi_mr_key`.
    pub fn key(&self) -> u64 {
        self.region.key
    }

    /// `fi_mr_desc`: a non-null value naming this registration (not a pointer to
    /// anything; [`MrTable::check_local`] looks it up).
    pub fn desc(&self) -> Desc {
        self.region.desc as *mut c_void
    }

    /// The descriptor as an integer.
    pub fn desc_id(&self) -> usize {
        self.region.desc
    }

    /// The access bits registered.
    pub fn access(&self) -> OpFlags {
        self.region.access
    }

    /// Total registered bytes.
    pub fn len(&self) -> u64 {
        self.region.total
    }

    /// Always false: registrations have at least one byte.
    pub fn is_empty(&self) -> bool {
        self.region.total == 0
    }

    /// First remote address of the region (virtual address or offset base).
    pub fn remote_base(&self) -> u64 {
        self.region.remote_base
    }

    /// The registration flags.
    pub fn flags(&self) -> u64 {
        self.region.flags
    }

    /// The memory interface and device of the registration.
    pub fn hmem(&self) -> (HmemIface, u64) {
        (self.region.iface, self.region.device)
    }

    /// The registration's context (for asynchronous registration events).
    pub fn context(&self) -> usize {
        self.region.context
    }

    /// Whether the region may be used.
    pub fn is_enabled(&self) -> bool {
        self.region.state().enabled
    }

    /// The endpoint bound (`FI_MR_ENDPOINT`).
    pub fn endpoint(&self) -> Option<u64> {
        self.region.state().ep
    }

    /// `fi_mr_bind` to an endpoint with id `ep` (`FI_MR_ENDPOINT`).
    ///
    /// # Errors
    /// `FI_ENOSYS` without `FI_MR_ENDPOINT`; `FI_EBADFLAGS` for non-zero flags;
    /// `FI_EOPBADSTATE` once enabled or closed; `FI_EINVAL` if already bound.
    pub fn bind_endpoint(&self, ep: u64, flags: u64) -> Result<()> {
        if !self.table.mode.contains(MrMode::ENDPOINT) {
            return err(
                Errno::ENOSYS,
                "MR bind: endpoint binding needs FI_MR_ENDPOINT",
            );
        }
        if flags != 0 {
            return err(
                Errno::EBADFLAGS,
                format!("MR bind: endpoint binding takes no flags (got {flags:#x})"),
            );
        }
        let mut st = self.region.state_mut();
        if st.closed || st.enabled {
            return err(
                Errno::EOPBADSTATE,
                "MR bind: the region is already enabled (bind before fi_mr_enable)",
            );
        }
        if st.ep.is_some() {
            return err(Errno::EINVAL, "MR bind: already bound to an endpoint");
        }
        st.ep = Some(ep);
        Ok(())
    }

    /// `fi_mr_bind` to a counter: `flags` is `FI_REMOTE_WRITE` and/or `FI_REMOTE_READ`.
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for other flags; `FI_EINVAL` for no flags, or under
    /// `FI_MR_RMA_EVENT` a region registered without `FI_RMA_EVENT`;
    /// `FI_EOPBADSTATE` if closed, or under `FI_MR_RMA_EVENT` already enabled.
    pub fn bind_counter(&self, hook: CounterHook, flags: u64) -> Result<()> {
        let f = OpFlags::from_bits_retain(flags);
        if !(f - REMOTE).is_empty() {
            return err(
                Errno::EBADFLAGS,
                format!(
                    "MR bind: counter flags must be FI_REMOTE_WRITE/FI_REMOTE_READ (got {flags:#x})"
                ),
            );
        }
        if f.is_empty() {
            return err(
                Errno::EINVAL,
                "MR bind: a counter binding needs FI_REMOTE_WRITE and/or FI_REMOTE_READ",
            );
        }
        let rma_event = self.table.mode.contains(MrMode::RMA_EVENT);
        if rma_event && self.region.flags & REG_RMA_EVENT == 0 {
            return err(
                Errno::EINVAL,
                "MR bind: FI_MR_RMA_EVENT needs the region registered with FI_RMA_EVENT",
            );
        }
        let mut st = self.region.state_mut();
        if st.closed || (rma_event && st.enabled) {
            return err(
                Errno::EOPBADSTATE,
                "MR bind: the region is already enabled (bind counters before fi_mr_enable)",
            );
        }
        st.counters.push((f, hook));
        Ok(())
    }

    /// `fi_mr_enable`. Enabling an enabled region is `Ok`.
    ///
    /// # Errors
    /// `FI_EOPBADSTATE`: closed, or `FI_MR_ENDPOINT` and no endpoint bound.
    pub fn enable(&self) -> Result<()> {
        let mut st = self.region.state_mut();
        if st.closed {
            return err(Errno::EOPBADSTATE, "MR enable: the region is closed");
        }
        if self.table.mode.contains(MrMode::ENDPOINT) && st.ep.is_none() {
            return err(
                Errno::EOPBADSTATE,
                "MR enable: FI_MR_ENDPOINT regions must be bound to an endpoint first",
            );
        }
        st.enabled = true;
        Ok(())
    }

    /// `fi_mr_refresh` (`FI_MR_MMU_NOTIFY`): nothing to update in the kit; the ranges
    /// must lie within the registered buffers.
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero flags; `FI_EINVAL` for a range outside the region;
    /// `FI_EOPBADSTATE` if closed.
    pub fn refresh(&self, iov: &[Iov], flags: u64) -> Result<()> {
        if flags != 0 {
            return err(
                Errno::EBADFLAGS,
                format!("MR refresh: flags {flags:#x} not supported"),
            );
        }
        if self.region.state().closed {
            return err(Errno::EOPBADSTATE, "MR refresh: the region is closed");
        }
        for (i, v) in iov.iter().enumerate() {
            let start = v.base as usize;
            let inside = start.checked_add(v.len).is_some_and(|end| {
                self.region
                    .segs
                    .iter()
                    .any(|s| start >= s.base && end <= s.base + s.len)
            });
            if !inside {
                return err(
                    Errno::EINVAL,
                    format!("MR refresh: range #{i} is outside the registered memory"),
                );
            }
        }
        Ok(())
    }

    /// Deregister (`fi_close`): the key and descriptor stop working at once and the key
    /// may be registered again. Closing twice is `Ok`.
    pub fn close(&self) -> Result<()> {
        self.table.deregister(&self.region);
        Ok(())
    }
}

impl Drop for KitMr {
    fn drop(&mut self) {
        self.table.deregister(&self.region);
    }
}

/// Binding goes through the provider's types: an endpoint gives its id
/// ([`MrEndpointTarget`]), a counter a hook ([`RmaCounterTarget`]).
impl<F> MrOps<F> for KitMr
where
    F: FabricOps,
    EpOf<F>: MrEndpointTarget,
    CntrOf<F>: RmaCounterTarget,
{
    fn key(&self) -> u64 {
        KitMr::key(self)
    }

    fn desc(&self) -> Desc {
        KitMr::desc(self)
    }

    fn bind(&self, target: MrBindTarget<'_, F>, flags: u64) -> Result<()> {
        match target {
            MrBindTarget::Ep(ep) => self.bind_endpoint(ep.mr_endpoint_id(), flags),
            MrBindTarget::Cntr(c) => {
                // Check the flags before asking the counter for a hook.
                let f = OpFlags::from_bits_retain(flags);
                if !(f - REMOTE).is_empty() || f.is_empty() {
                    return self.bind_counter(CounterHook::new(|_| {}), flags);
                }
                self.bind_counter(c.rma_counter_hook()?, flags)
            }
        }
    }

    fn refresh(&self, iov: &[Iov], flags: u64) -> Result<()> {
        KitMr::refresh(self, iov, flags)
    }

    fn enable(&self) -> Result<()> {
        KitMr::enable(self)
    }

    fn close(&self) -> Result<()> {
        KitMr::close(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::av::tests::fam;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn iov(base: usize, len: usize) -> Iov {
        Iov {
            base: base as *mut c_void,
            len,
        }
    }

    fn table(mode: MrMode) -> Arc<MrTable> {
        MrTable::new(MrConfig::new(mode)).unwrap()
    }

    fn reg(t: &Arc<MrTable>, iovs: &[Iov], access: OpFlags, key: u64) -> Result<KitMr> {
        let mut a = MrAttr::new(iovs, access);
        a.requested_key = key;
        t.register(&a, 0)
    }

    fn code<T: fmt::Debug>(r: Result<T>) -> Errno {
        r.unwrap_err().code()
    }

    const RW: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

    #[test]
    fn table_configuration() {
        assert_eq!(
            code(MrTable::new(MrConfig::new(MrMode::RAW))),
            Errno::ENOSYS
        );
        for ks in [0, 9] {
            let mut c = MrConfig::new(MrMode::empty());
            c.key_size = ks;
            assert_eq!(code(MrTable::new(c)), Errno::EINVAL);
        }
        let mut c = MrConfig::new(MrMode::empty());
        c.iov_limit = 0;
        assert_eq!(code(MrTable::new(c)), Errno::EINVAL);
        assert_eq!(
            table(MrMode::BASIC | MrMode::LOCAL).mode(),
            MrMode::BASIC_MAP | MrMode::LOCAL
        );
        assert_eq!(table(MrMode::SCALABLE).mode(), MrMode::empty());
        let t = table(MrMode::empty());
        assert!(t.is_empty());
        let m = reg(&t, &[iov(0x1000, 16)], RW, 7).unwrap();
        assert_eq!(t.len(), 1);
        assert!(t.contains_key(7) && !t.contains_key(8));
        assert!(format!("{m:?}").contains("key: 7"));
    }

    #[test]
    fn registration_errors() {
        let t = table(MrMode::ALLOCATED);
        let bad_flags = t.register(&MrAttr::new(&[iov(0x1000, 1)], RW), 1 << 3);
        assert_eq!(code(bad_flags), Errno::EBADFLAGS);
        for (iovs, access, what) in [
            (vec![], RW, "no buffers"),
            (vec![iov(0x1000, 0)], RW, "length 0"),
            (vec![iov(usize::MAX - 3, 8)], RW, "wraps"),
            (vec![iov(0, 8)], RW, "null"),
        ] {
            let e = reg(&t, &iovs, access, 1).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{what}");
            assert!(e.message().contains(what), "{what}: {e}");
        }
        let e = reg(&t, &[iov(0x1000, 8)], OpFlags::MULTI_RECV, 1).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS, "{e}");
        assert!(e.message().contains("access"), "{e}");
        // Without FI_MR_ALLOCATED any range may be registered, even at 0.
        let s = table(MrMode::empty());
        reg(&s, &[iov(0, 8)], RW, 1).unwrap();
        let mut c = MrConfig::new(MrMode::empty());
        c.iov_limit = 2;
        let l = MrTable::new(c).unwrap();
        let e = reg(&l, &[iov(8, 1), iov(16, 1), iov(32, 1)], RW, 1).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("limit is 2"), "{e}");
        // The remote range must not overflow.
        let big = [iov(8, 16)];
        let mut a = MrAttr::new(&big, RW);
        a.offset = u64::MAX - 8;
        assert_eq!(code(s.register(&a, 0)), Errno::EINVAL);
        // Accepted flags.
        let ok = s.register(
            &MrAttr::new(&[iov(8, 1)], RW),
            REG_RMA_EVENT | REG_RMA_PMEM | REG_HMEM_HOST_ALLOC | REG_HMEM_DEVICE_ONLY,
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn user_keys() {
        let t = table(MrMode::empty());
        let a = reg(&t, &[iov(0x1000, 8)], RW, 42).unwrap();
        assert_eq!(a.key(), 42);
        let e = reg(&t, &[iov(0x2000, 8)], RW, 42).unwrap_err();
        assert_eq!(e.code(), Errno::ENOKEY);
        assert!(e.message().contains("0x2a"), "{e}");
        assert_eq!(
            code(reg(&t, &[iov(0x2000, 8)], RW, KEY_NOTAVAIL)),
            Errno::EKEYREJECTED
        );
        a.close().unwrap();
        a.close().unwrap();
        let b = reg(&t, &[iov(0x2000, 8)], RW, 42).unwrap();
        // The first registration's drop must not remove the second.
        drop(a);
        assert!(t.contains_key(42));
        assert_eq!(t.lookup_remote(42, 0, 8, RW).unwrap().addr(), 0x2000);
        drop(b);
        assert!(!t.contains_key(42));
        assert_eq!(code(t.lookup_remote(42, 0, 8, RW)), Errno::ENOKEY);

        let mut c = MrConfig::new(MrMode::empty());
        c.key_size = 2;
        let small = MrTable::new(c).unwrap();
        assert_eq!(
            code(reg(&small, &[iov(8, 8)], RW, 0x1_0000)),
            Errno::EKEYREJECTED
        );
        assert_eq!(reg(&small, &[iov(8, 8)], RW, 0xffff).unwrap().key(), 0xffff);
    }

    #[test]
    fn provider_keys() {
        let t = table(MrMode::PROV_KEY);
        let regs: Vec<KitMr> = (0..500)
            .map(|i| reg(&t, &[iov(0x1000 + i, 1)], RW, 42).unwrap())
            .collect();
        let mut keys: Vec<u64> = regs.iter().map(KitMr::key).collect();
        assert!(keys.iter().all(|&k| k != KEY_NOTAVAIL));
        assert_ne!(keys[..2], [1, 2], "keys are scrambled");
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 500);
        // Descriptors are distinct and non-null.
        let mut descs: Vec<usize> = regs.iter().map(KitMr::desc_id).collect();
        assert!(descs.iter().all(|&d| d != 0));
        descs.sort_unstable();
        descs.dedup();
        assert_eq!(descs.len(), 500);

        // A 1-byte key space: 256 keys, then FI_ENOSPC; a close frees one.
        let mut c = MrConfig::new(MrMode::PROV_KEY);
        c.key_size = 1;
        let one = MrTable::new(c).unwrap();
        let mut all: Vec<KitMr> = (0..256)
            .map(|_| reg(&one, &[iov(8, 1)], RW, 0).unwrap())
            .collect();
        let mut k: Vec<u64> = all.iter().map(KitMr::key).collect();
        k.sort_unstable();
        assert_eq!(k, (0..256).collect::<Vec<u64>>());
        assert_eq!(code(reg(&one, &[iov(8, 1)], RW, 0)), Errno::ENOSPC);
        let gone = all.remove(77);
        let freed = gone.key();
        drop(gone);
        assert_eq!(reg(&one, &[iov(8, 1)], RW, 0).unwrap().key(), freed);
    }

    #[test]
    fn remote_lookup_by_offset_and_by_virtual_address() {
        let buf = vec![0u8; 64];
        let base = buf.as_ptr() as usize;
        let off = table(MrMode::empty());
        let m = reg(&off, &[iov(base, 64)], RW, 1).unwrap();
        assert_eq!(m.remote_base(), 0);
        let r = off.lookup_remote(1, 10, 5, OpFlags::REMOTE_READ).unwrap();
        assert_eq!(
            (r.base(), r.offset(), r.addr(), r.len()),
            (base, 10, base + 10, 5)
        );
        assert_eq!(
            (r.key(), r.access(), r.endpoint()),
            (1, OpFlags::REMOTE_READ, None)
        );
        assert!(r.is_contiguous() && !r.is_empty());
        assert_eq!(
            code(off.lookup_remote(1, base as u64, 1, RW)),
            Errno::EFAULT
        );

        let virt = table(MrMode::VIRT_ADDR);
        let v = reg(&virt, &[iov(base, 64)], RW, 1).unwrap();
        assert_eq!(v.remote_base(), base as u64);
        let r = virt
            .lookup_remote(1, base as u64 + 60, 4, OpFlags::REMOTE_WRITE)
            .unwrap();
        assert_eq!(r.addr(), base + 60);
        assert_eq!(code(virt.lookup_remote(1, 10, 1, RW)), Errno::EFAULT);

        // A non-zero attr.offset moves the offset window.
        let whole = [iov(base, 64)];
        let mut a = MrAttr::new(&whole, RW);
        a.offset = 1000;
        a.requested_key = 2;
        off.register(&a, 0)
            .map(|m| {
                assert_eq!(off.lookup_remote(2, 1000, 64, RW).unwrap().addr(), base);
                assert_eq!(code(off.lookup_remote(2, 999, 1, RW)), Errno::EFAULT);
                assert_eq!(code(off.lookup_remote(2, 1064, 1, RW)), Errno::EFAULT);
                drop(m);
            })
            .unwrap();
        drop(buf);
    }

    #[test]
    fn remote_lookup_errors() {
        let t = table(MrMode::empty());
        let _ro = reg(&t, &[iov(0x1000, 32)], OpFlags::REMOTE_READ, 5).unwrap();
        let r = |key, addr, len, acc| t.lookup_remote(key, addr, len, acc);
        assert_eq!(code(r(6, 0, 1, OpFlags::REMOTE_READ)), Errno::ENOKEY);
        assert_eq!(code(r(5, 0, 1, OpFlags::REMOTE_WRITE)), Errno::EACCES);
        assert_eq!(code(r(5, 0, 1, RW)), Errno::EACCES);
        assert_eq!(code(r(5, 0, 1, OpFlags::empty())), Errno::EINVAL);
        assert_eq!(code(r(5, 0, 1, OpFlags::READ)), Errno::EINVAL);
        assert_eq!(code(r(5, 0, 33, OpFlags::REMOTE_READ)), Errno::EFAULT);
        assert_eq!(code(r(5, 32, 1, OpFlags::REMOTE_READ)), Errno::EFAULT);
        assert_eq!(code(r(5, u64::MAX, 2, OpFlags::REMOTE_READ)), Errno::EFAULT);
        assert_eq!(
            code(r(5, 1, usize::MAX, OpFlags::REMOTE_READ)),
            Errno::EFAULT
        );
        // Zero-length accesses anywhere in [start, end].
        assert!(r(5, 32, 0, OpFlags::REMOTE_READ).unwrap().is_empty());
        assert_eq!(
            r(5, 32, 0, OpFlags::REMOTE_READ)
                .unwrap()
                .segments()
                .count(),
            0
        );
        assert_eq!(code(r(5, 33, 0, OpFlags::REMOTE_READ)), Errno::EFAULT);
        // The order of checks: access before range.
        assert_eq!(code(r(5, 999, 1, OpFlags::REMOTE_WRITE)), Errno::EACCES);
        // Messages are static: no allocation on this path.
        let e = r(5, 33, 1, OpFlags::REMOTE_READ).unwrap_err();
        assert!(e.message().contains("past the end"), "{e}");
    }

    #[test]
    fn vectored_regions() {
        let t = table(MrMode::VIRT_ADDR);
        let m = reg(
            &t,
            &[iov(0x1000, 10), iov(0x5000, 5), iov(0x9000, 20)],
            RW,
            3,
        )
        .unwrap();
        assert_eq!(m.len(), 35);
        // The address space is iov[0].base .. + 35, buffers end to end.
        let r = t.lookup_remote(3, 0x1000 + 8, 10, RW).unwrap();
        assert!(!r.is_contiguous());
        assert_eq!((r.base(), r.offset()), (0x1000, 8));
        assert_eq!(
            r.segments().collect::<Vec<_>>(),
            [(0x1008, 2), (0x5000, 5), (0x9000, 3)]
        );
        let r = t.lookup_remote(3, 0x1000 + 10, 5, RW).unwrap();
        assert!(r.is_contiguous());
        assert_eq!(r.addr(), 0x5000);
        assert_eq!(r.segments().collect::<Vec<_>>(), [(0x5000, 5)]);
        let r = t.lookup_remote(3, 0x1000 + 35, 0, RW).unwrap();
        assert_eq!(r.addr(), 0x9000 + 20);
        assert_eq!(code(t.lookup_remote(3, 0x1000 + 30, 6, RW)), Errno::EFAULT);
    }

    #[test]
    fn local_descriptors() {
        let none = table(MrMode::empty());
        none.check_local(std::ptr::null_mut(), 0x10 as *const u8, 4)
            .unwrap();
        none.check_local(0xdead as Desc, 0x10 as *const u8, 4)
            .unwrap();

        let t = table(MrMode::LOCAL);
        let m = reg(&t, &[iov(0x1000, 16), iov(0x2000, 16)], OpFlags::SEND, 1).unwrap();
        let d = m.desc();
        assert!(!d.is_null());
        let p = |a: usize| a as *const u8;
        t.check_local(d, p(0x1000), 16).unwrap();
        t.check_local(d, p(0x2008), 8).unwrap();
        t.check_local(std::ptr::null_mut(), p(0), 0).unwrap();
        t.check_local_access(d, p(0x1000), 1, OpFlags::SEND)
            .unwrap();
        assert_eq!(
            code(t.check_local(std::ptr::null_mut(), p(0x1000), 1)),
            Errno::EINVAL
        );
        assert_eq!(
            code(t.check_local(0x7777 as Desc, p(0x1000), 1)),
            Errno::EINVAL
        );
        assert_eq!(code(t.check_local(d, p(0x1008), 16)), Errno::EFAULT);
        // Adjacent in the region, not in memory: a local buffer is one range.
        assert_eq!(code(t.check_local(d, p(0x100f), 2)), Errno::EFAULT);
        assert_eq!(code(t.check_local(d, p(usize::MAX), 2)), Errno::EFAULT);
        assert_eq!(
            code(t.check_local_access(d, p(0x1000), 1, OpFlags::RECV)),
            Errno::EACCES
        );
        m.close().unwrap();
        assert_eq!(code(t.check_local(d, p(0x1000), 1)), Errno::EINVAL);
    }

    #[test]
    fn endpoint_regions() {
        let t = table(MrMode::ENDPOINT | MrMode::LOCAL);
        let m = reg(&t, &[iov(0x1000, 16)], RW | OpFlags::SEND, 1).unwrap();
        assert!(!m.is_enabled());
        assert_eq!(code(t.lookup_remote(1, 0, 1, RW)), Errno::EOPBADSTATE);
        assert_eq!(
            code(t.check_local(m.desc(), 0x1000 as *const u8, 1)),
            Errno::EOPBADSTATE
        );
        assert_eq!(code(m.enable()), Errno::EOPBADSTATE);
        assert_eq!(code(m.bind_endpoint(9, 1)), Errno::EBADFLAGS);
        m.bind_endpoint(9, 0).unwrap();
        assert_eq!(m.endpoint(), Some(9));
        assert_eq!(code(m.bind_endpoint(10, 0)), Errno::EINVAL);
        m.enable().unwrap();
        m.enable().unwrap();
        assert!(m.is_enabled());
        assert_eq!(code(m.bind_endpoint(9, 0)), Errno::EOPBADSTATE);
        assert_eq!(t.lookup_remote(1, 0, 1, RW).unwrap().endpoint(), Some(9));
        t.lookup_remote_ep(9, 1, 0, 1, RW).unwrap();
        assert_eq!(code(t.lookup_remote_ep(10, 1, 0, 1, RW)), Errno::ENOKEY);
        t.check_local(m.desc(), 0x1000 as *const u8, 1).unwrap();
        m.close().unwrap();
        assert_eq!(code(m.enable()), Errno::EOPBADSTATE);
        assert_eq!(code(m.bind_endpoint(9, 0)), Errno::EOPBADSTATE);

        // Without the mode: no endpoint binding, and lookup_remote_ep ignores the ep.
        let s = table(MrMode::empty());
        let n = reg(&s, &[iov(0x1000, 16)], RW, 1).unwrap();
        assert!(n.is_enabled());
        assert_eq!(code(n.bind_endpoint(9, 0)), Errno::ENOSYS);
        s.lookup_remote_ep(10, 1, 0, 1, RW).unwrap();
    }

    fn counter() -> (CounterHook, Arc<AtomicU64>) {
        let c = Arc::new(AtomicU64::new(0));
        let h = c.clone();
        (
            CounterHook::new(move |n| {
                h.fetch_add(n, Ordering::Relaxed);
            }),
            c,
        )
    }

    #[test]
    fn rma_event_counters() {
        let t = table(MrMode::RMA_EVENT);
        let attr_iov = [iov(0x1000, 16)];
        let m = t
            .register(&MrAttr::new(&attr_iov, RW), REG_RMA_EVENT)
            .unwrap();
        assert!(!m.is_enabled());
        assert_eq!(m.flags(), REG_RMA_EVENT);
        let (wh, w) = counter();
        let (rh, r) = counter();
        let (bh, b) = counter();
        assert_eq!(
            code(m.bind_counter(wh.clone(), OpFlags::SEND.bits())),
            Errno::EBADFLAGS
        );
        assert_eq!(code(m.bind_counter(wh.clone(), 0)), Errno::EINVAL);
        m.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())
            .unwrap();
        m.bind_counter(rh, OpFlags::REMOTE_READ.bits()).unwrap();
        m.bind_counter(bh, RW.bits()).unwrap();
        m.enable().unwrap();
        assert_eq!(
            code(m.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())),
            Errno::EOPBADSTATE
        );
        t.lookup_remote(m.key(), 0, 4, OpFlags::REMOTE_WRITE)
            .unwrap()
            .count_access();
        t.lookup_remote(m.key(), 0, 4, OpFlags::REMOTE_READ)
            .unwrap()
            .count_access();
        // A fetching atomic reads and writes: each counter counts it once.
        t.lookup_remote(m.key(), 0, 4, RW).unwrap().count_access();
        let v = |c: &Arc<AtomicU64>| c.load(Ordering::Relaxed);
        assert_eq!((v(&w), v(&r), v(&b)), (2, 2, 3));

        // Under FI_MR_RMA_EVENT a region registered without FI_RMA_EVENT is enabled and
        // cannot take counters.
        let plain = reg(&t, &[iov(0x2000, 4)], RW, 2).unwrap();
        assert!(plain.is_enabled());
        assert_eq!(
            code(plain.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())),
            Errno::EINVAL
        );

        // Without the mode, counters may be bound to an enabled region.
        let s = table(MrMode::empty());
        let n = s
            .register(&MrAttr::new(&attr_iov, RW), REG_RMA_EVENT)
            .unwrap();
        assert!(n.is_enabled());
        n.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())
            .unwrap();
        s.lookup_remote(n.key(), 0, 1, OpFlags::REMOTE_WRITE)
            .unwrap()
            .count_access();
        assert_eq!(v(&w), 3);
        n.close().unwrap();
        assert_eq!(
            code(n.bind_counter(wh, OpFlags::REMOTE_WRITE.bits())),
            Errno::EOPBADSTATE
        );
        let hook = CounterHook::from_counter(Arc::new(fam::TCntr(w.clone())));
        hook.add(5);
        assert_eq!(v(&w), 8);
        assert_eq!(format!("{hook:?}"), "CounterHook");
    }

    #[test]
    fn kit_cntr_counts_rma_events() {
        use ofi_core::cntr::CntrAttr;
        let c = crate::cntr::KitCntr::new(&CntrAttr::default()).unwrap();
        let t = table(MrMode::empty());
        let m = reg(&t, &[iov(0x1000, 8)], RW, 1).unwrap();
        m.bind_counter(c.rma_counter_hook().unwrap(), OpFlags::REMOTE_WRITE.bits())
            .unwrap();
        t.lookup_remote(1, 0, 8, OpFlags::REMOTE_WRITE)
            .unwrap()
            .count_access();
        t.lookup_remote(1, 0, 8, OpFlags::REMOTE_READ)
            .unwrap()
            .count_access();
        assert_eq!(c.value(), 1);
    }

    #[test]
    fn refresh_and_accessors() {
        let t = table(MrMode::MMU_NOTIFY);
        let mut a = MrAttr::new(&[], RW);
        let iovs = [iov(0x1000, 16)];
        a.iov = &iovs;
        a.context = 0xc0;
        a.iface = HmemIface::System;
        a.device = 3;
        let m = t.register(&a, 0).unwrap();
        assert_eq!(m.access(), RW);
        assert!(!m.is_empty());
        assert_eq!(m.context(), 0xc0);
        assert_eq!(m.hmem(), (HmemIface::System, 3));
        assert_eq!(m.desc_id(), m.desc() as usize);
        m.refresh(&[], 0).unwrap();
        m.refresh(&[iov(0x1004, 4)], 0).unwrap();
        assert_eq!(code(m.refresh(&[iov(0x1004, 4)], 1)), Errno::EBADFLAGS);
        let e = m.refresh(&[iov(0x1000, 4), iov(0x100c, 8)], 0).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("#1"), "{e}");
        assert_eq!(code(m.refresh(&[iov(usize::MAX, 4)], 0)), Errno::EINVAL);
        m.close().unwrap();
        assert_eq!(code(m.refresh(&[], 0)), Errno::EOPBADSTATE);
    }

    #[test]
    fn through_the_core_tables() {
        use ofi_core::cntr::CntrAttr;
        use ofi_core::provider::init_builtin;
        use ofi_core::AddrFormat;
        let h = init_builtin::<fam::TProv>().unwrap();
        let info = fam::info(AddrFormat::SOCKADDR_IN, MrMode::ENDPOINT | MrMode::PROV_KEY);
        let fabric = h.open_fabric(&info).unwrap();
        let domain = fabric.domain(&info).unwrap();
        let table = fam::last_table();
        let mr = domain.mr_reg_owned(vec![7u8; 32], RW, 0).unwrap();
        let key = mr.key();
        assert_ne!(key, KEY_NOTAVAIL);
        assert!(!mr.desc().is_null());
        assert_eq!(code(table.lookup_remote(key, 0, 4, RW)), Errno::EOPBADSTATE);
        assert_eq!(mr.enable().unwrap_err().code(), Errno::EOPBADSTATE);
        let ep = domain.endpoint(&info).unwrap();
        mr.bind_ep(&ep, 0).unwrap();
        let cntr = domain.cntr_open(&CntrAttr::default()).unwrap();
        assert_eq!(mr.bind_cntr(&cntr, 1).unwrap_err().code(), Errno::EBADFLAGS);
        mr.bind_cntr(&cntr, OpFlags::REMOTE_WRITE.bits()).unwrap();
        mr.enable().unwrap();
        let r = table
            .lookup_remote(key, 8, 4, OpFlags::REMOTE_WRITE)
            .unwrap();
        assert_eq!(r.addr(), mr.owned_ptr().unwrap().0 as usize + 8);
        r.count_access();
        assert_eq!(cntr.read().unwrap(), 1);
        mr.refresh(&[], 0).unwrap();
        drop(r);
        let mut mr = mr;
        mr.close().unwrap();
        assert_eq!(
            code(table.lookup_remote(key, 8, 4, OpFlags::REMOTE_WRITE)),
            Errno::ENOKEY
        );
        assert!(table.is_empty());

        // User keys across the boundary: a duplicate is FI_ENOKEY.
        let info = fam::info(AddrFormat::SOCKADDR_IN, MrMode::empty());
        let d2 = fabric.domain(&info).unwrap();
        let a = d2.mr_reg_owned(vec![0u8; 8], RW, 99).unwrap();
        assert_eq!(a.key(), 99);
        assert_eq!(
            d2.mr_reg_owned(vec![0u8; 8], RW, 99).unwrap_err().code(),
            Errno::ENOKEY
        );
    }

    /// What a correct remote lookup of `(addr, len)` gives: the local pieces, or None.
    fn model(
        segs: &[(usize, usize)],
        remote_base: u64,
        addr: u64,
        len: usize,
    ) -> Option<Vec<(usize, usize)>> {
        let total: u128 = segs.iter().map(|s| s.1 as u128).sum();
        let off = u128::from(addr).checked_sub(u128::from(remote_base))?;
        if off + len as u128 > total {
            return None;
        }
        let mut out = Vec::new();
        let (mut off, mut left) = (off, len as u128);
        for &(b, l) in segs {
            if left == 0 {
                break;
            }
            if off >= l as u128 {
                off -= l as u128;
                continue;
            }
            let n = (l as u128 - off).min(left);
            out.push((b + off as usize, n as usize));
            left -= n;
            off = 0;
        }
        Some(out)
    }

    fn seg_strategy() -> impl Strategy<Value = Vec<(usize, usize)>> {
        prop::collection::vec((0usize..1 << 40, 1usize..200), 1..4)
    }

    fn addr_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..1000, any::<u64>(), (u64::MAX - 300)..=u64::MAX]
    }

    fn len_strategy() -> impl Strategy<Value = usize> {
        prop_oneof![0usize..700, any::<usize>(), (usize::MAX - 10)..=usize::MAX]
    }

    proptest! {
        #[test]
        fn remote_bounds_match_the_model(
            segs in seg_strategy(),
            virt in any::<bool>(),
            offset in prop_oneof![Just(0u64), 0u64..1000, (u64::MAX - 1000)..u64::MAX],
            probes in prop::collection::vec((addr_strategy(), len_strategy(), any::<bool>()), 1..40),
        ) {
            let t = table(if virt { MrMode::VIRT_ADDR } else { MrMode::empty() });
            let iovs: Vec<Iov> = segs.iter().map(|&(b, l)| iov(b, l)).collect();
            let mut a = MrAttr::new(&iovs, RW);
            a.offset = offset;
            let total: u64 = segs.iter().map(|s| s.1 as u64).sum();
            let base = if virt { segs[0].0 as u64 } else { offset };
            let m = match t.register(&a, 0) {
                Ok(m) => m,
                Err(e) => {
                    prop_assert!(base.checked_add(total).is_none());
                    prop_assert_eq!(e.code(), Errno::EINVAL);
                    return Ok(());
                }
            };
            for (addr, len, near) in probes {
                // Half the probes land near the region.
                let addr = if near { base.wrapping_add(addr % (total + 20)).wrapping_sub(10) } else { addr };
                let got = t.lookup_remote(m.key(), addr, len, OpFlags::REMOTE_READ);
                match model(&segs, base, addr, len) {
                    Some(pieces) => {
                        let r = got.unwrap();
                        prop_assert_eq!(r.segments().collect::<Vec<_>>(), pieces.clone());
                        prop_assert_eq!(r.len(), len);
                        if let Some(&(first, _)) = pieces.first() {
                            prop_assert_eq!(r.addr(), first);
                        }
                        prop_assert_eq!(r.is_contiguous(), pieces.len() <= 1);
                    }
                    None => prop_assert_eq!(got.unwrap_err().code(), Errno::EFAULT),
                }
            }
        }
    }

    #[test]
    fn concurrent_registration_and_lookup() {
        let t = table(MrMode::PROV_KEY);
        let stable = reg(&t, &[iov(0x1000, 64)], RW, 0).unwrap();
        let key = stable.key();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        let r = t.lookup_remote(key, i % 64, 1, RW).unwrap();
                        assert_eq!(r.addr(), 0x1000 + (i % 64) as usize);
                    }
                })
            })
            .collect();
        for i in 0..2000 {
            let m = reg(&t, &[iov(0x10_0000 + i, 1)], RW, 0).unwrap();
            assert_eq!(
                t.lookup_remote(m.key(), 0, 1, RW).unwrap().addr(),
                0x10_0000 + i
            );
        }
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(t.len(), 1);
    }
}
