//! Inserts and removals: flags, the asynchronous (`FI_EVENT`) reporting, reference
//! counts of duplicate inserts, the per-peer constructor, and the C shape of the
//! per-entry results. Invariant: every change happens under the write lock, after the
//! resolver and before the sink is called.

use super::*;

impl<P> KitAv<P> {
    /// Set the sink of asynchronous-insert events (what `fi_av_bind` of an EQ does).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero `flags` (reserved, fi_av(3)); `FI_EINVAL` if a
    /// sink is already bound.
    pub fn bind_sink(&self, sink: AvEventSink, flags: u64) -> Result<()> {
        reserved_flags("av bind", flags)?;
        let mut s = lock(&self.sink);
        if s.is_some() {
            return einval("av bind: an event queue is already bound");
        }
        *s = Some(sink);
        Ok(())
    }

    /// Check call-wide conditions; returns the sink for an asynchronous AV.
    pub(super) fn begin(&self, flags: u64, user_ids: bool) -> Result<Option<AvEventSink>> {
        if flags & !INSERT_FLAGS != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av insert: unsupported flags {:#x}", flags & !INSERT_FLAGS),
            ));
        }
        if flags & INSERT_USER_ID != 0 && !user_ids {
            return einval("av insert: FI_AV_USER_ID needs user ids");
        }
        if !self.asynchronous {
            return Ok(None);
        }
        if flags & INSERT_SYNC_ERR != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "av insert: FI_SYNC_ERR applies to synchronous AVs only (this one has FI_EVENT)",
            ));
        }
        match &*lock(&self.sink) {
            Some(s) => Ok(Some(s.clone())),
            None => Err(Error::new(
                Errno::ENOEQ,
                "av insert: an FI_EVENT AV needs a bound event queue first",
            )),
        }
    }

    /// Report the outcome of an asynchronous call.
    pub(super) fn report(
        &self,
        sink: Option<AvEventSink>,
        context: usize,
        results: &[Result<u64>],
    ) {
        let Some(sink) = sink else { return };
        let mut count = 0u64;
        for (i, r) in results.iter().enumerate() {
            match r {
                Ok(_) => count += 1,
                Err(e) => sink(AvEvent::Error {
                    fid: self.context,
                    context,
                    index: i as u64,
                    err: e.code(),
                }),
            }
        }
        sink(AvEvent::Complete {
            fid: self.context,
            context,
            count,
        });
    }

    pub(super) fn format_fits(&self, addr: &Address) -> bool {
        format_fits(self.addr_format, addr)
    }

    /// Insert one address under the write lock.
    pub(super) fn insert_one(
        &self,
        inner: &mut AvInner<P>,
        addr: &Address,
        user_id: Option<u64>,
    ) -> Result<u64> {
        if !self.format_fits(addr) {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "av insert: address {addr} is {}, this AV takes {}",
                    addr.format(),
                    self.addr_format
                ),
            ));
        }
        if let Some(&index) = inner.rev.get(addr) {
            let slot = &mut inner.slots[index as usize];
            if let Some(e) = slot.entry.as_mut() {
                e.refs = e.refs.checked_add(1).ok_or_else(|| {
                    Error::new(Errno::ENOSPC, "av insert: address inserted too many times")
                })?;
                return Ok(self.encode(slot.generation, index));
            }
        }
        if inner.live >= self.max_entries {
            return Err(Error::new(
                Errno::ENOSPC,
                format!("av insert: the AV is full ({} entries)", self.max_entries),
            ));
        }
        let peer = (self.make_peer)(addr)?;
        let index = match inner.free.pop_first() {
            Some(i) => i,
            None => {
                let i = inner.slots.len() as u32;
                inner.slots.push(Slot {
                    generation: 1,
                    entry: None,
                });
                i
            }
        };
        let slot = &mut inner.slots[index as usize];
        slot.entry = Some(Entry {
            addr: addr.clone(),
            peer,
            refs: 1,
            user_id,
        });
        let fi_addr = self.encode(slot.generation, index);
        inner.rev.insert(addr.clone(), index);
        inner.live += 1;
        Ok(fi_addr)
    }

    pub(super) fn insert_list(
        &self,
        addrs: &[std::result::Result<Address, Error>],
        user_ids: Option<&[u64]>,
        flags: u64,
        context: usize,
        sink: Option<AvEventSink>,
    ) -> Vec<Result<u64>> {
        let use_ids = flags & INSERT_USER_ID != 0;
        if use_ids {
            self.has_user_ids.store(true, Ordering::Relaxed);
        }
        let results: Vec<Result<u64>> = {
            let mut inner = self.write();
            self.changes.fetch_add(1, Ordering::Release);
            addrs
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Ok(a) => {
                        let id = if use_ids {
                            user_ids.and_then(|u| u.get(i).copied())
                        } else {
                            None
                        };
                        self.insert_one(&mut inner, a, id)
                    }
                    Err(e) => Err(e.clone()),
                })
                .collect()
        };
        self.report(sink, context, &results);
        results
    }

    /// `fi_av_insert`: one status per address (`Ok(fi_addr)` or why it failed). On an
    /// `FI_EVENT` AV the outcome also goes to the sink (see the module docs).
    ///
    /// # Errors
    /// The whole call: `FI_EBADFLAGS` (unknown flag, `FI_SYNC_ERR` on an asynchronous
    /// AV), `FI_EINVAL` (`FI_AV_USER_ID` here: use [`KitAv::insert_user_ids`]),
    /// `FI_ENOEQ` (asynchronous AV without an EQ).
    pub fn insert(
        &self,
        addrs: &[Address],
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let list: Vec<_> = addrs.iter().cloned().map(Ok).collect();
        Ok(self.insert_list(&list, None, flags, context, sink))
    }

    /// `fi_av_insert` with `FI_AV_USER_ID`: `user_ids[i]` is recorded with `addrs[i]`
    /// (reported by [`KitAv::source_addr`]); the flag is implied.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; `FI_EINVAL` if `user_ids` is shorter than `addrs`.
    pub fn insert_user_ids(
        &self,
        addrs: &[Address],
        user_ids: &[u64],
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        if user_ids.len() < addrs.len() {
            return einval("av insert: fewer user ids than addresses");
        }
        let flags = flags | INSERT_USER_ID;
        let sink = self.begin(flags, true)?;
        let list: Vec<_> = addrs.iter().cloned().map(Ok).collect();
        Ok(self.insert_list(&list, Some(user_ids), flags, context, sink))
    }

    /// `fi_av_insertsvc`: resolve `node`/`service` with the AV's resolver, insert the
    /// address; one status.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; resolution failures fail the whole call (`FI_EINVAL`,
    /// `FI_ENOSYS` for a format without a resolver), as the C providers do.
    pub fn insertsvc(
        &self,
        node: &str,
        service: &str,
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let addr = self.resolver.resolve(node, service)?;
        Ok(self.insert_list(&[Ok(addr)], None, flags, context, sink))
    }

    /// `fi_av_insertsym`: `nodecnt × svccnt` addresses from the ranges [`sym_range`]
    /// expands, each resolved; a resolution failure fails that address only.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; a malformed range is `FI_EINVAL` for the whole call.
    pub fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let pairs = sym_range(node, nodecnt, service, svccnt)?;
        let list: Vec<_> = pairs
            .iter()
            .map(|(n, s)| self.resolver.resolve(n, s))
            .collect();
        Ok(self.insert_list(&list, None, flags, context, sink))
    }

    /// `fi_av_remove`: all or nothing — every fabric address must be live (a duplicate
    /// in the list counts as one more removal of that entry).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero `flags` (reserved); `FI_EINVAL` naming the first
    /// address that is not live, or an entry removed more often than it was inserted.
    pub fn remove(&self, fi_addrs: &[u64], flags: u64) -> Result<()> {
        reserved_flags("av remove", flags)?;
        let mut inner = self.write();
        self.changes.fetch_add(1, Ordering::Release);
        let mut tally: HashMap<u32, u32> = HashMap::new();
        for (i, &fa) in fi_addrs.iter().enumerate() {
            let Some(index) = self.decode(&inner, fa) else {
                return einval(format!(
                    "av remove: fabric address #{i} ({fa:#x}) is not in the AV"
                ));
            };
            let n = tally.entry(index).or_insert(0);
            *n += 1;
            let refs = inner.slots[index as usize]
                .entry
                .as_ref()
                .map_or(0, |e| e.refs);
            if *n > refs {
                return einval(format!(
                    "av remove: fabric address #{i} ({fa:#x}) removed more often than inserted"
                ));
            }
        }
        for (index, n) in tally {
            let inner = &mut *inner;
            let slot = &mut inner.slots[index as usize];
            let gone = match slot.entry.as_mut() {
                Some(e) if e.refs > n => {
                    e.refs -= n;
                    None
                }
                _ => slot.entry.take(),
            };
            if let Some(e) = gone {
                slot.generation = match slot.generation.wrapping_add(1) & self.gen_mask {
                    0 => 1,
                    g => g,
                };
                inner.rev.remove(&e.addr);
                inner.free.insert(index);
                inner.live -= 1;
            }
        }
        Ok(())
    }
}

/// Whether `addr` may go into an AV of `format`.
pub(super) fn format_fits(format: AddrFormat, addr: &Address) -> bool {
    match format {
        AddrFormat::UNSPEC => true,
        AddrFormat::SOCKADDR => matches!(addr, Address::Inet(_) | Address::Inet6(_)),
        AddrFormat::SOCKADDR_IN => matches!(addr, Address::Inet(_)),
        AddrFormat::SOCKADDR_IN6 => matches!(addr, Address::Inet6(_)),
        AddrFormat::STR => matches!(addr, Address::Str(_)),
        f => matches!(addr, Address::Raw { format, .. } if *format == f),
    }
}

/// Write statuses into `fi_addr` (failures as `FI_ADDR_NOTAVAIL`); the success count.
pub(super) fn fill(results: &[Result<u64>], fi_addr: &mut [u64]) -> usize {
    let mut n = 0;
    for (r, out) in results.iter().zip(fi_addr.iter_mut()) {
        *out = match r {
            Ok(a) => {
                n += 1;
                *a
            }
            Err(_) => ADDR_NOTAVAIL,
        };
    }
    n
}

impl<P> KitAv<P> {
    /// What an [`AvOps`] insert returns: the success count, or 0 when asynchronous.
    pub(super) fn ops_count(&self, n: usize) -> usize {
        if self.asynchronous {
            0
        } else {
            n
        }
    }
}
