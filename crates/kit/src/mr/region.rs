//! One registration, [`KitMr`]: enabling, binding to endpoints and counters,
//! refresh, close, and core's [`MrOps`] for it.

use super::*;

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
        let mut state = self.region.state_mut();
        if state.closed || state.enabled {
            return err(
                Errno::EOPBADSTATE,
                "MR bind: the region is already enabled (bind before fi_mr_enable)",
            );
        }
        if state.ep.is_some() {
            return err(Errno::EINVAL, "MR bind: already bound to an endpoint");
        }
        state.ep = Some(ep);
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
        let mut state = self.region.state_mut();
        if state.closed || (rma_event && state.enabled) {
            return err(
                Errno::EOPBADSTATE,
                "MR bind: the region is already enabled (bind counters before fi_mr_enable)",
            );
        }
        state.counters.push((f, hook));
        Ok(())
    }

    /// `fi_mr_enable`. Enabling an enabled region is `Ok`.
    ///
    /// # Errors
    /// `FI_EOPBADSTATE`: closed, or `FI_MR_ENDPOINT` and no endpoint bound.
    pub fn enable(&self) -> Result<()> {
        let mut state = self.region.state_mut();
        if state.closed {
            return err(Errno::EOPBADSTATE, "MR enable: the region is closed");
        }
        if self.table.mode.contains(MrMode::ENDPOINT) && state.ep.is_none() {
            return err(
                Errno::EOPBADSTATE,
                "MR enable: FI_MR_ENDPOINT regions must be bound to an endpoint first",
            );
        }
        state.enabled = true;
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
