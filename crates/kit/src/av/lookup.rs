//! Fabric addresses and lookups: the encoding of `FI_AV_TABLE` / `FI_AV_MAP` fabric
//! addresses (see the [module documentation](super)), the data-path lookups that never
//! allocate, reverse lookup for `FI_SOURCE`, and the read-only queries.

use super::*;

impl<P> KitAv<P> {
    pub(super) fn read(&self) -> RwLockReadGuard<'_, AvInner<P>> {
        read_lock(&self.inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, AvInner<P>> {
        write_lock(&self.inner)
    }

    /// Entries room was reserved for at open (`attr.count`, or the universe size, at
    /// most [`RESERVE_MAX`]).
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The AV type in effect (`Map` or `Table`, never `Unspec`).
    pub fn av_type(&self) -> AvType {
        self.av_type
    }

    /// The address format inserted addresses must have.
    pub fn addr_format(&self) -> AddrFormat {
        self.addr_format
    }

    /// Whether inserts report through events (`FI_EVENT`).
    pub fn is_async(&self) -> bool {
        self.asynchronous
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.read().live
    }

    /// Whether the AV has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots allocated so far (live or free); the table grows beyond its reservation
    /// as needed.
    pub fn slot_count(&self) -> usize {
        self.read().slots.len()
    }

    /// The receive-context index encoded in the top `rx_ctx_bits` of `fi_addr`
    /// (0 without receive-context bits).
    pub fn rx_index(&self, fi_addr: u64) -> usize {
        if self.rx_ctx_bits == 0 || fi_addr == ADDR_NOTAVAIL {
            0
        } else {
            (fi_addr >> (64 - self.rx_ctx_bits)) as usize
        }
    }

    /// The fabric address of a live index.
    pub(super) fn encode(&self, generation: u32, index: u32) -> u64 {
        match self.av_type {
            AvType::Map => (u64::from(generation) << 32) | u64::from(index),
            _ => u64::from(index),
        }
    }

    /// The index behind `fi_addr` if it names a live entry.
    pub(super) fn decode(&self, inner: &AvInner<P>, fi_addr: u64) -> Option<u32> {
        if fi_addr == ADDR_NOTAVAIL {
            return None;
        }
        let a = fi_addr & self.addr_mask;
        let (index, generation) = match self.av_type {
            AvType::Map => (a & 0xffff_ffff, Some(a >> 32)),
            _ => (a, None),
        };
        let index = u32::try_from(index).ok()?;
        let slot = inner.slots.get(index as usize)?;
        slot.entry.as_ref()?;
        match generation {
            Some(g) if g != u64::from(slot.generation) => None,
            _ => Some(index),
        }
    }

    /// The dense index of a live `fi_addr` (receive-context bits ignored), for
    /// provider arrays indexed like the AV. Allocation-free.
    ///
    /// # Errors
    /// `FI_EINVAL` (no message): not a live entry, stale (map), or `FI_ADDR_NOTAVAIL`.
    #[inline]
    pub fn index(&self, fi_addr: u64) -> Result<u32> {
        self.decode(&self.read(), fi_addr)
            .ok_or(Error::code_only(Errno::EINVAL))
    }

    /// Whether `fi_addr` names a live entry.
    pub fn contains(&self, fi_addr: u64) -> bool {
        self.decode(&self.read(), fi_addr).is_some()
    }

    /// The fabric address of the live entry at `index`, if any.
    pub fn fi_addr_of(&self, index: u32) -> Option<u64> {
        let inner = self.read();
        let slot = inner.slots.get(index as usize)?;
        slot.entry.as_ref()?;
        Some(self.encode(slot.generation, index))
    }

    /// Run `f` on the entry of `fi_addr` under the read lock (keep `f` short: inserts
    /// wait for it). Allocation-free.
    ///
    /// # Errors
    /// `FI_EINVAL` (no message) as [`KitAv::index`].
    #[inline]
    pub fn with_entry<R>(&self, fi_addr: u64, f: impl FnOnce(AvEntry<'_, P>) -> R) -> Result<R> {
        let inner = self.read();
        let index = self
            .decode(&inner, fi_addr)
            .ok_or(Error::code_only(Errno::EINVAL))?;
        let slot = &inner.slots[index as usize];
        match &slot.entry {
            Some(e) => Ok(f(AvEntry {
                fi_addr: self.encode(slot.generation, index),
                index,
                addr: &e.addr,
                peer: &e.peer,
                user_id: e.user_id,
            })),
            None => Err(Error::code_only(Errno::EINVAL)),
        }
    }

    /// How many inserts and removes have changed the AV (a counter, bumped under the
    /// write lock). A provider may cache what it derived from an entry together with
    /// this count and trust the cache while the count is unchanged.
    #[inline]
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// A clone of the per-peer value of `fi_addr` (for `P = Arc<_>` an atomic
    /// increment, no allocation).
    ///
    /// # Errors
    /// `FI_EINVAL` (no message) as [`KitAv::index`].
    #[inline]
    pub fn peer(&self, fi_addr: u64) -> Result<P>
    where
        P: Clone,
    {
        self.with_entry(fi_addr, |e| e.peer.clone())
    }

    /// `fi_av_lookup`: the address behind `fi_addr`.
    ///
    /// # Errors
    /// `FI_EINVAL`: not a live entry (never inserted, removed, stale map address).
    pub fn lookup(&self, fi_addr: u64) -> Result<Address> {
        self.with_entry(fi_addr, |e| e.addr.clone()).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("av lookup: fabric address {fi_addr:#x} is not in the AV"),
            )
        })
    }

    /// The fabric address `addr` was inserted as (`FI_SOURCE`), if it is live. O(1).
    pub fn reverse_lookup(&self, addr: &Address) -> Option<u64> {
        let inner = self.read();
        let &index = inner.rev.get(addr)?;
        let slot = inner.slots.get(index as usize)?;
        Some(self.encode(slot.generation, index))
    }

    /// What a completion reports as the source of a message from fabric address
    /// `fi_addr`: its `FI_AV_USER_ID` id if it was inserted with one, else `fi_addr`
    /// itself (matching, directed receives included, uses the fabric address; only the
    /// report changes). No lookup until the AV has seen a user id.
    #[inline]
    pub fn reported(&self, fi_addr: u64) -> u64 {
        if fi_addr == ADDR_NOTAVAIL || !self.has_user_ids.load(Ordering::Relaxed) {
            return fi_addr;
        }
        self.with_entry(fi_addr, |e| e.user_id.unwrap_or(fi_addr))
            .unwrap_or(fi_addr)
    }

    /// What a completion reports as the source of a message from `addr`: its
    /// `FI_AV_USER_ID` id if it has one, else its fabric address, else
    /// `FI_ADDR_NOTAVAIL` (unknown peer): [`reported`](Self::reported) of its
    /// [`reverse_lookup`](Self::reverse_lookup).
    pub fn source_addr(&self, addr: &Address) -> u64 {
        self.reverse_lookup(addr)
            .map_or(ADDR_NOTAVAIL, |fi_addr| self.reported(fi_addr))
    }

    /// Every live entry as `(fi_addr, address)`, in index order.
    pub fn snapshot(&self) -> Vec<(u64, Address)> {
        let inner = self.read();
        inner
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.entry
                    .as_ref()
                    .map(|e| (self.encode(s.generation, i as u32), e.addr.clone()))
            })
            .collect()
    }

    /// `fi_av_straddr`: the `FI_ADDR_STR` text of an address (it need not be in the AV).
    pub fn straddr(&self, addr: &Address) -> String {
        addr.to_addr_str()
    }
}
