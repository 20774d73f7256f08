//! The MR table: registration (flags, keys, access), the mode state machine, and
//! the checked local and remote lookups of the data path.

use super::*;

/// A bijective scramble of a counter (an odd multiply and xor-shifts), so provider
/// keys are unique without looking sequential.
pub(super) fn scramble(mut x: u64) -> u64 {
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

    pub(super) fn read(&self) -> RwLockReadGuard<'_, TableInner> {
        read_lock(&self.inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, TableInner> {
        write_lock(&self.inner)
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
    pub(super) fn deregister(&self, region: &Arc<Region>) {
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

    pub(super) fn lookup_remote_inner(
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
        let (region, bound_ep) = self.enabled_region(Find::Key(key))?;
        if let Some(ep) = ep {
            if self.mode.contains(MrMode::ENDPOINT) && bound_ep != Some(ep) {
                return err(
                    Errno::ENOKEY,
                    "MR lookup: key is not registered on this endpoint",
                );
            }
        }
        region.check_access("MR lookup", access)?;
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
        let (region, _) = self.enabled_region(Find::Desc(d))?;
        region.check_access("MR check", access)?;
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

/// How [`MrTable::enabled_region`] finds a region.
#[derive(Clone, Copy)]
enum Find {
    /// By key: a peer's RMA or atomic access ([`MrTable::lookup_remote`]).
    Key(u64),
    /// By descriptor: a local buffer's check ([`MrTable::check_local`]).
    Desc(usize),
}

impl Find {
    /// The lookup's name, for messages.
    const fn what(self) -> &'static str {
        match self {
            Find::Key(_) => "MR lookup",
            Find::Desc(_) => "MR check",
        }
    }

    /// The error for no such region: `FI_ENOKEY` for a key, `FI_EINVAL` for a
    /// descriptor.
    #[cold]
    #[inline(never)]
    fn missing(self) -> Error {
        match self {
            Find::Key(_) => Error::new(Errno::ENOKEY, "MR lookup: no registration has this key"),
            Find::Desc(_) => Error::new(Errno::EINVAL, "MR check: unknown memory descriptor"),
        }
    }
}

impl MrTable {
    /// The region `find` names and the endpoint it is bound to, if it is enabled.
    ///
    /// # Errors
    /// No such region ([`Find::missing`]); `FI_EOPBADSTATE` when the region is not
    /// enabled.
    #[inline(always)]
    fn enabled_region(&self, find: Find) -> Result<(Arc<Region>, Option<u64>)> {
        let found = match find {
            Find::Key(key) => self.read().by_key.get(&key).cloned(),
            Find::Desc(desc) => self.read().by_desc.get(&desc).cloned(),
        };
        let Some(region) = found else {
            return Err(find.missing());
        };
        let state = region.state();
        if !state.enabled {
            return Err(refused(
                Errno::EOPBADSTATE,
                find.what(),
                "region is not enabled",
            ));
        }
        let ep = state.ep;
        drop(state);
        Ok((region, ep))
    }
}
