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
mod tests;
