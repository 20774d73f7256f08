//! The software device's memory region table and the raw copies into and out of
//! registered memory.
//!
//! Registered memory is memory the peer (through the service thread) and the
//! application touch concurrently: it is only ever read or written through raw-pointer
//! copies and atomics, never through `&`/`&mut` slices. Every copy happens while the
//! table's read guard is held, after the range was checked against a live entry, so a
//! deregistration (which takes the write guard) waits for copies in flight and no copy
//! starts after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use crate::verbs::{Access, Sge, WcStatus};

/// One registered region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrEntry {
    pub pd: u32,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
}

impl MrEntry {
    fn covers(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= self.addr + self.len)
    }
}

/// The regions of one context, by key (the lkey and rkey are the same number).
#[derive(Default)]
pub(crate) struct MrTable {
    map: RwLock<HashMap<u32, MrEntry>>,
    next: AtomicU32,
}

/// A read view of the table: checks and copies happen through it.
pub(crate) struct MrView<'a>(RwLockReadGuard<'a, HashMap<u32, MrEntry>>);

impl MrTable {
    /// Registers a region and returns its key.
    pub(crate) fn insert(&self, e: MrEntry) -> u32 {
        // Keys: a counter in the upper 24 bits and a varying low byte, never 0.
        let n = self.next.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let key = (n << 8) | (n.wrapping_mul(0x9d) & 0xff) | 1;
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, e);
        key
    }

    /// Deregisters; waits for copies in flight.
    pub(crate) fn remove(&self, key: u32) {
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    }

    /// The read view.
    pub(crate) fn view(&self) -> MrView<'_> {
        MrView(self.map.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl MrView<'_> {
    /// Checks local buffers: every element inside a region of `pd` with its key, with
    /// `LOCAL_WRITE` when `write`. Returns the total length or the status to report.
    pub(crate) fn check_local(&self, pd: u32, sges: &[Sge], write: bool) -> Result<u64, WcStatus> {
        let mut total = 0u64;
        for s in sges {
            let ok = self.0.get(&s.lkey).is_some_and(|e| {
                e.pd == pd
                    && e.covers(s.addr, u64::from(s.length))
                    && (!write || e.access.contains(Access::LOCAL_WRITE))
            });
            if !ok {
                return Err(WcStatus::LocProtErr);
            }
            total += u64::from(s.length);
        }
        Ok(total)
    }

    /// Checks a remote access: `len` bytes at `addr` under `rkey`, in `pd`, allowing `need`.
    pub(crate) fn check_remote(
        &self,
        pd: u32,
        rkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> bool {
        self.0
            .get(&rkey)
            .is_some_and(|e| e.pd == pd && e.covers(addr, len) && e.access.contains(need))
    }

    /// Copies `data` into the scatter list starting at logical offset `off`; bytes past
    /// the list's end are not written.
    ///
    /// # Safety
    /// The elements were checked with [`MrView::check_local`] on this view (so each lies
    /// in registered memory, which its registrant keeps valid while registered).
    pub(crate) unsafe fn scatter(&self, sges: &[Sge], mut off: u64, mut data: &[u8]) {
        for s in sges {
            let l = u64::from(s.length);
            if off >= l {
                off -= l;
                continue;
            }
            let n = ((l - off) as usize).min(data.len());
            // SAFETY: inside a checked registered range (caller's contract); raw copy,
            // no reference to the destination is formed.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (s.addr + off) as *mut u8, n) };
            data = &data[n..];
            off = 0;
            if data.is_empty() {
                break;
            }
        }
    }

    /// Fills `iov` with the pieces of the scatter list covering `[off, off + len)`;
    /// returns how many entries were used (stops when `iov` is full).
    pub(crate) fn gather(
        sges: &[Sge],
        mut off: u64,
        mut len: u64,
        iov: &mut [libc::iovec],
    ) -> usize {
        let mut n = 0;
        for s in sges {
            if len == 0 || n == iov.len() {
                break;
            }
            let l = u64::from(s.length);
            if off >= l {
                off -= l;
                continue;
            }
            let take = (l - off).min(len);
            iov[n] = libc::iovec {
                iov_base: (s.addr + off) as *mut libc::c_void,
                iov_len: take as usize,
            };
            n += 1;
            len -= take;
            off = 0;
        }
        n
    }
}

/// Copies `data` to raw address `addr`.
///
/// # Safety
/// `addr .. addr + data.len()` was checked with [`MrView::check_remote`] on a view that
/// is still held.
pub(crate) unsafe fn write_raw(addr: u64, data: &[u8]) {
    // SAFETY: caller's contract: a checked registered range.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) }
}

/// Performs an 8-byte atomic at `addr` and returns the original value.
///
/// # Safety
/// `addr` is 8-byte aligned and `addr .. addr + 8` was checked with
/// [`MrView::check_remote`] on a view that is still held.
pub(crate) unsafe fn atomic_raw(addr: u64, cmp_swap: Option<(u64, u64)>, add: u64) -> u64 {
    // SAFETY: aligned, registered and alive (caller's contract); accessed only atomically.
    let a = unsafe { std::sync::atomic::AtomicU64::from_ptr(addr as *mut u64) };
    match cmp_swap {
        Some((cmp, swap)) => {
            match a.compare_exchange(cmp, swap, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(v) | Err(v) => v,
            }
        }
        None => a.fetch_add(add, Ordering::SeqCst),
    }
}
