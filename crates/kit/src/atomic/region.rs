//! Making [`apply`](super::apply) atomic between concurrent callers.
//!
//! Like the C providers' software atomics, atomicity here is cooperative: an operation
//! is atomic with respect to every other operation (and read / write) that goes through
//! the same [`AtomicRegion`] or the same [`AtomicLocks`]. Memory changed behind their
//! back (a plain RMA write that takes no lock, another process) is not covered, which is
//! the seed's "single actor" rule.
//!
//! - [`AtomicRegion`] owns its bytes, split into pages, one mutex per page. An operation
//!   locks the pages it covers in ascending order (so two operations never deadlock)
//!   and runs while it holds them; operations on different pages run in parallel.
//! - [`AtomicLocks`] owns no memory: a small array of mutexes striped by address, for a
//!   provider whose target is memory it reaches another way (a registered buffer).
//!   [`AtomicLocks::lock`] takes every stripe a byte range maps to, in ascending stripe
//!   order, and holds them until the guard drops. [`AtomicLocks::apply_raw`] is the
//!   entry point for memory others may access at the same time: it reaches the target
//!   through raw-pointer copies only, never a reference.
//!
//! A poisoned mutex (a panic elsewhere while holding it) is recovered: the protected
//! data are plain bytes, with no invariant a panic could break. Nothing here panics.

use std::sync::{Mutex, MutexGuard};

use super::{AtomicArgs, AtomicCall};
use ofi_core::error::{fail, Errno, Result};

fn lock_recover<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Default page size of an [`AtomicRegion`], in bytes.
pub const DEFAULT_PAGE_SIZE: usize = 256;

/// A block of memory whose atomic operations are serialised by per-page mutexes.
///
/// Offsets are byte offsets from the start of the region. Every operation, read and
/// write through the region is atomic with respect to every other one on an
/// overlapping range (in fact with respect to anything on the same pages).
#[derive(Debug)]
pub struct AtomicRegion {
    pages: Box<[Mutex<Box<[u8]>>]>,
    page_size: usize,
    len: usize,
}

impl AtomicRegion {
    /// A zero-filled region of `len` bytes with [`DEFAULT_PAGE_SIZE`] pages.
    pub fn new(len: usize) -> Self {
        Self::from_bytes_paged(&vec![0; len], DEFAULT_PAGE_SIZE)
    }

    /// A region holding a copy of `data`, with [`DEFAULT_PAGE_SIZE`] pages.
    pub fn from_bytes(data: &[u8]) -> Self {
        Self::from_bytes_paged(data, DEFAULT_PAGE_SIZE)
    }

    /// A region holding a copy of `data`, locked in pages of `page_size` bytes (at
    /// least 1; 0 is taken as 1).
    pub fn from_bytes_paged(data: &[u8], page_size: usize) -> Self {
        let page_size = page_size.max(1);
        let pages = data
            .chunks(page_size)
            .map(|c| Mutex::new(c.to_vec().into_boxed_slice()))
            .collect();
        AtomicRegion {
            pages,
            page_size,
            len: data.len(),
        }
    }

    /// Size of the region in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the region holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page range covering `[offset, offset + bytes)`, if inside the region.
    fn span(&self, offset: usize, bytes: usize) -> Result<std::ops::Range<usize>> {
        match offset.checked_add(bytes) {
            Some(end) if end <= self.len => {
                let last = end.saturating_sub(1) / self.page_size;
                Ok(offset / self.page_size..last + 1)
            }
            _ => fail(
                Errno::EINVAL,
                format!(
                    "range of {bytes} bytes at offset {offset} is outside the region of {} bytes",
                    self.len
                ),
            ),
        }
    }

    /// Runs `f` on the bytes `[offset, offset + bytes)` while holding their pages.
    fn with_range<R>(
        &self,
        offset: usize,
        bytes: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        let pages = self.span(offset, bytes)?;
        if bytes == 0 {
            return Ok(f(&mut []));
        }
        let first = pages.start;
        // Ascending order: no two callers can wait on each other.
        let mut guards: Vec<MutexGuard<'_, Box<[u8]>>> =
            self.pages[pages].iter().map(lock_recover).collect();
        let start = offset - first * self.page_size;
        if let [only] = guards.as_mut_slice() {
            return Ok(f(&mut only[start..start + bytes]));
        }
        // Several pages: work on a copy and write it back.
        let mut copy = Vec::with_capacity(bytes);
        for g in &guards {
            copy.extend_from_slice(g);
        }
        let out = f(&mut copy[start..start + bytes]);
        let mut rest = copy.as_slice();
        for g in &mut guards {
            let (head, tail) = rest.split_at(g.len());
            g.copy_from_slice(head);
            rest = tail;
        }
        Ok(out)
    }

    /// [`apply`](super::apply) on the region's bytes from `offset`, atomically with
    /// respect to every other call on the region.
    ///
    /// Errors (nothing is modified): those of [`apply`](super::apply), checked first;
    /// `FI_EINVAL` when `count` elements at `offset` reach past the end of the region.
    pub fn apply(&self, offset: usize, call: AtomicCall, args: AtomicArgs<'_>) -> Result<()> {
        let bytes = super::check(call, usize::MAX, &args)?;
        self.with_range(offset, bytes, |target| super::apply(call, target, args))?
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`, atomically with respect to
    /// operations on the region.
    ///
    /// Errors: `FI_EINVAL` when the range reaches past the end of the region.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        self.with_range(offset, buf.len(), |bytes| buf.copy_from_slice(bytes))
    }

    /// Copies `data` into the region at `offset`, atomically with respect to
    /// operations on the region.
    ///
    /// Errors: `FI_EINVAL` when the range reaches past the end of the region.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.with_range(offset, data.len(), |bytes| bytes.copy_from_slice(data))
    }

    /// A copy of the whole region (taken page by page in ascending order while holding
    /// all of them, so it is a consistent snapshot).
    pub fn to_vec(&self) -> Vec<u8> {
        let guards: Vec<_> = self.pages.iter().map(lock_recover).collect();
        guards.iter().flat_map(|g| g.iter().copied()).collect()
    }
}

/// Default number of stripes of [`AtomicLocks::new`].
pub const DEFAULT_STRIPES: usize = 64;
/// Default granule of [`AtomicLocks::new`]: addresses in the same 64-byte block share a
/// stripe.
pub const DEFAULT_GRANULE: usize = 64;

/// Striped mutexes keyed by address, for targets the caller reaches itself.
///
/// Address `a` belongs to granule `a / granule`, which maps to stripe
/// `granule % stripes`. Two byte ranges that overlap share at least one stripe, so
/// holding the stripes of a range excludes every other holder of an overlapping range.
#[derive(Debug)]
pub struct AtomicLocks {
    stripes: Box<[Mutex<()>]>,
    granule: u64,
}

/// Holds the stripes of one byte range; they are released when it drops.
#[derive(Debug)]
pub struct AtomicLockGuard<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

impl Default for AtomicLocks {
    fn default() -> Self {
        Self::new()
    }
}

impl AtomicLocks {
    /// [`DEFAULT_STRIPES`] stripes of [`DEFAULT_GRANULE`]-byte granules.
    pub fn new() -> Self {
        AtomicLocks {
            stripes: (0..DEFAULT_STRIPES).map(|_| Mutex::new(())).collect(),
            granule: DEFAULT_GRANULE as u64,
        }
    }

    /// `stripes` mutexes over `granule`-byte blocks.
    ///
    /// Errors: `FI_EINVAL` when either is zero.
    pub fn with_stripes(stripes: usize, granule: usize) -> Result<Self> {
        if stripes == 0 || granule == 0 {
            return fail(
                Errno::EINVAL,
                format!("atomic lock stripes ({stripes}) and granule ({granule}) must be nonzero"),
            );
        }
        Ok(AtomicLocks {
            stripes: (0..stripes).map(|_| Mutex::new(())).collect(),
            granule: granule as u64,
        })
    }

    /// The stripe indices covering `[addr, addr + len)`, ascending, without repeats.
    fn stripes_for(&self, addr: u64, len: usize) -> Vec<usize> {
        let n = self.stripes.len();
        if len == 0 {
            return Vec::new();
        }
        let first = addr / self.granule;
        let last = addr.saturating_add(len as u64 - 1) / self.granule;
        if last - first >= n as u64 - 1 {
            return (0..n).collect();
        }
        let mut idx: Vec<usize> = (first..=last).map(|g| (g % n as u64) as usize).collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// Locks the stripes of `[addr, addr + len)` (none when `len` is 0) and holds them
    /// until the guard drops. Blocks while another guard holds one of them.
    pub fn lock(&self, addr: u64, len: usize) -> AtomicLockGuard<'_> {
        let held = self
            .stripes_for(addr, len)
            .into_iter()
            .map(|i| lock_recover(&self.stripes[i]))
            .collect();
        AtomicLockGuard { _held: held }
    }

    /// [`apply`](super::apply) on `target`, which lives at address `addr`, while
    /// holding the stripes of the bytes it covers.
    ///
    /// Errors: those of [`apply`](super::apply) (nothing is modified).
    pub fn apply(
        &self,
        addr: u64,
        call: AtomicCall,
        target: &mut [u8],
        args: AtomicArgs<'_>,
    ) -> Result<()> {
        let bytes = super::check(call, target.len(), &args)?;
        let _guard = self.lock(addr, bytes);
        super::apply(call, target, args)
    }

    /// [`apply`](super::apply) on the `target_len` bytes at `target` — memory that
    /// others (the application, a peer through another path) may read or write at the
    /// same time, such as a registered buffer — while holding the stripes of the bytes
    /// the operation covers.
    ///
    /// The target is reached only through raw-pointer copies, never through a reference:
    /// its bytes are copied out under the stripes, the operation runs on the copy, and
    /// only the elements whose bytes changed are copied back (an ATOMIC_READ, a compare
    /// that does not swap, a MIN that keeps the target write nothing). So a target
    /// granted read access only is never written by an operation that does not change
    /// it.
    ///
    /// Errors: those of [`apply`](super::apply) (nothing is read or modified).
    ///
    /// # Safety
    ///
    /// `target` is valid for reads of `target_len` bytes and, unless the operation leaves
    /// every element unchanged (ATOMIC_READ), for writes of them, for the duration of the
    /// call. Concurrent accesses by others that bypass this lock set are allowed (the
    /// copies are byte copies through raw pointers), but their interleaving with this
    /// operation is not atomic (the module's "single actor" rule).
    #[allow(unsafe_code)] // The one raw-memory entry point of the atomic engine.
    pub unsafe fn apply_raw(
        &self,
        target: *mut u8,
        target_len: usize,
        call: AtomicCall,
        args: AtomicArgs<'_>,
    ) -> Result<()> {
        let bytes = super::check(call, target_len, &args)?;
        if bytes == 0 {
            return Ok(());
        }
        let _guard = self.lock(target as u64, bytes);
        let mut before = vec![0u8; bytes];
        // SAFETY: `target` is readable for `target_len >= bytes` bytes (the caller's
        // contract; `check` compared the lengths); `before` is a distinct allocation of
        // `bytes` bytes.
        unsafe { std::ptr::copy_nonoverlapping(target, before.as_mut_ptr(), bytes) };
        let mut after = before.clone();
        super::apply(call, &mut after, args)?;
        let size = call.datatype.size();
        for (i, (a, b)) in after.chunks(size).zip(before.chunks(size)).enumerate() {
            if a != b {
                // SAFETY: element `i` lies within the first `bytes` bytes of `target`,
                // writable because the operation changed it (the caller's contract);
                // `a` is a distinct allocation.
                unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), target.add(i * size), a.len()) };
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::thread;

    /// `per_thread` fetch-add SUMs of 1 by each of two threads on the u64 at `offset`;
    /// returns every fetched value.
    fn hammer(region: &Arc<AtomicRegion>, offset: usize, per_thread: usize) -> Vec<u64> {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let region = Arc::clone(region);
                thread::spawn(move || {
                    let mut seen = Vec::with_capacity(per_thread);
                    let mut res = [0u8; 8];
                    for _ in 0..per_thread {
                        region
                            .apply(
                                offset,
                                AtomicCall::new(
                                    AtomicOp::Sum,
                                    Datatype::Uint64,
                                    AtomicKind::Fetch,
                                    1,
                                ),
                                AtomicArgs::new(&1u64.to_ne_bytes(), &[], &mut res),
                            )
                            .unwrap();
                        seen.push(u64::from_ne_bytes(res));
                    }
                    seen
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    }

    fn read_u64(region: &AtomicRegion, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        region.read(offset, &mut b).unwrap();
        u64::from_ne_bytes(b)
    }

    #[test]
    fn two_threads_fetch_add_exactly_once_each() {
        let region = Arc::new(AtomicRegion::new(64));
        let seen = hammer(&region, 8, 10_000);
        assert_eq!(read_u64(&region, 8), 20_000);
        let distinct: HashSet<u64> = seen.iter().copied().collect();
        assert_eq!(distinct.len(), 20_000, "every fetched value is distinct");
        assert_eq!(distinct, (0..20_000).collect());
        // Neighbouring bytes untouched.
        assert_eq!(read_u64(&region, 0), 0);
        assert_eq!(read_u64(&region, 16), 0);
    }

    #[test]
    fn element_straddling_pages_stays_atomic() {
        // 4-byte pages; the u64 at offset 2 spans three pages.
        let region = Arc::new(AtomicRegion::from_bytes_paged(&[0u8; 16], 4));
        let seen = hammer(&region, 2, 5_000);
        assert_eq!(read_u64(&region, 2), 10_000);
        assert_eq!(seen.iter().copied().collect::<HashSet<u64>>().len(), 10_000);
        let all = region.to_vec();
        assert_eq!(&all[..2], &[0, 0]);
        assert_eq!(&all[10..], &[0; 6]);
    }

    #[test]
    fn region_errors_leave_it_unchanged() {
        let region = AtomicRegion::from_bytes(&[7u8; 20]);
        let mut res = [0u8; 8];
        let op = |offset, count, res: &mut [u8]| {
            region.apply(
                offset,
                AtomicCall::new(AtomicOp::Sum, Datatype::Uint64, AtomicKind::Fetch, count),
                AtomicArgs::new(&[1u8; 16], &[], res),
            )
        };
        assert_eq!(op(16, 1, &mut res).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            op(usize::MAX, 1, &mut res).unwrap_err().code(),
            Errno::EINVAL
        );
        assert_eq!(op(0, 2, &mut res).unwrap_err().code(), Errno::EINVAL); // result too short
        let bad = region.apply(
            0,
            AtomicCall::new(AtomicOp::Bor, Datatype::Double, AtomicKind::Base, 1),
            AtomicArgs::new(&[0u8; 8], &[], &mut []),
        );
        assert_eq!(bad.unwrap_err().code(), Errno::EOPNOTSUPP);
        assert_eq!(region.to_vec(), vec![7u8; 20]);
        assert_eq!(res, [0u8; 8]);
        assert_eq!(
            region.read(18, &mut [0u8; 3]).unwrap_err().code(),
            Errno::EINVAL
        );
        assert_eq!(region.write(21, &[]).unwrap_err().code(), Errno::EINVAL);
        region.write(20, &[]).unwrap();
        assert_eq!(region.len(), 20);
        assert!(!region.is_empty() && AtomicRegion::new(0).is_empty());
    }

    #[test]
    fn region_read_write_and_compare_swap() {
        let region = AtomicRegion::from_bytes_paged(&[0u8; 40], 8);
        region.write(5, &9i32.to_ne_bytes()).unwrap();
        let mut res = [0u8; 4];
        region
            .apply(
                5,
                AtomicCall::new(AtomicOp::CswapLt, Datatype::Int32, AtomicKind::Compare, 1),
                AtomicArgs::new(&100i32.to_ne_bytes(), &3i32.to_ne_bytes(), &mut res),
            )
            .unwrap();
        assert_eq!(i32::from_ne_bytes(res), 9);
        let mut now = [0u8; 4];
        region.read(5, &mut now).unwrap();
        assert_eq!(i32::from_ne_bytes(now), 100);
        assert_eq!(region.to_vec().len(), 40);
    }

    #[test]
    fn stripe_configuration_is_checked() {
        assert_eq!(
            AtomicLocks::with_stripes(0, 64).unwrap_err().code(),
            Errno::EINVAL
        );
        assert_eq!(
            AtomicLocks::with_stripes(8, 0).unwrap_err().code(),
            Errno::EINVAL
        );
        let locks = AtomicLocks::with_stripes(4, 8).unwrap();
        assert_eq!(locks.stripes_for(0, 0), Vec::<usize>::new());
        assert_eq!(locks.stripes_for(0, 8), vec![0]);
        assert_eq!(locks.stripes_for(7, 2), vec![0, 1]);
        assert_eq!(locks.stripes_for(24, 16), vec![0, 3]);
        assert_eq!(locks.stripes_for(0, 1000), vec![0, 1, 2, 3]);
        assert_eq!(locks.stripes_for(u64::MAX - 1, 10), vec![3]);
        drop(locks.lock(0, 0)); // holds nothing
    }

    #[test]
    fn locks_exclude_overlapping_ranges() {
        let locks = Arc::new(AtomicLocks::new());
        let inside = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2u64)
            .map(|i| {
                let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
                thread::spawn(move || {
                    for _ in 0..2_000 {
                        // Overlapping ranges: [100 + i, 100 + i + 8).
                        let _g = locks.lock(100 + i, 8);
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }

    #[test]
    fn locks_apply_runs_the_engine() {
        let locks = AtomicLocks::default();
        let mut target = 5u16.to_ne_bytes();
        let mut res = [0u8; 2];
        locks
            .apply(
                0x1000,
                AtomicCall::new(AtomicOp::Max, Datatype::Uint16, AtomicKind::Fetch, 1),
                &mut target,
                AtomicArgs::new(&9u16.to_ne_bytes(), &[], &mut res),
            )
            .unwrap();
        assert_eq!(u16::from_ne_bytes(target), 9);
        assert_eq!(u16::from_ne_bytes(res), 5);
        let err = locks.apply(
            0,
            AtomicCall::new(AtomicOp::Max, Datatype::Uint16, AtomicKind::Fetch, 1),
            &mut target,
            AtomicArgs::new(&[], &[], &mut res),
        );
        assert_eq!(err.unwrap_err().code(), Errno::EINVAL);
        assert_eq!(u16::from_ne_bytes(target), 9);
    }

    #[test]
    #[allow(unsafe_code)]
    fn apply_raw_writes_only_changed_elements() {
        let locks = AtomicLocks::default();
        let mut target: Vec<u8> = [5u32, 20, 7].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let operand: Vec<u8> = [9u32, 3, 7].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut res = [0u8; 12];
        // SAFETY: `target` is a live local buffer of 12 bytes.
        unsafe {
            locks.apply_raw(
                target.as_mut_ptr(),
                target.len(),
                AtomicCall::new(AtomicOp::Max, Datatype::Uint32, AtomicKind::Fetch, 3),
                AtomicArgs::new(&operand, &[], &mut res),
            )
        }
        .unwrap();
        let words = |b: &[u8]| -> Vec<u32> {
            b.chunks(4)
                .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(words(&target), [9, 20, 7]);
        assert_eq!(words(&res), [5, 20, 7]);

        // An ATOMIC_READ of read-only memory: nothing is written (a write would fault).
        static RO: [u8; 8] = 0x0102_0304_0506_0708u64.to_ne_bytes();
        let mut out = [0u8; 8];
        // SAFETY: `RO` is readable for 8 bytes; ATOMIC_READ changes no element, so
        // nothing is written through the pointer.
        unsafe {
            locks.apply_raw(
                RO.as_ptr().cast_mut(),
                RO.len(),
                AtomicCall::new(AtomicOp::AtomicRead, Datatype::Uint64, AtomicKind::Fetch, 1),
                AtomicArgs::new(&[], &[], &mut out),
            )
        }
        .unwrap();
        assert_eq!(out, RO);

        // A short target is refused before anything is read.
        // SAFETY: the length check fails first; the pointer is never used.
        let err = unsafe {
            locks.apply_raw(
                std::ptr::null_mut(),
                2,
                AtomicCall::new(AtomicOp::Sum, Datatype::Uint32, AtomicKind::Base, 1),
                AtomicArgs::new(&operand, &[], &mut []),
            )
        };
        assert_eq!(err.unwrap_err().code(), Errno::EINVAL);
    }

    proptest! {
        #[test]
        fn overlapping_ranges_share_a_stripe(
            a in 0u64..4096, la in 1usize..300, b in 0u64..4096, lb in 1usize..300,
            stripes in 1usize..20, granule in 1usize..80,
        ) {
            let locks = AtomicLocks::with_stripes(stripes, granule).unwrap();
            let sa = locks.stripes_for(a, la);
            let sb = locks.stripes_for(b, lb);
            prop_assert!(sa.windows(2).all(|w| w[0] < w[1]), "ascending, no repeats");
            let overlap = a < b + lb as u64 && b < a + la as u64;
            if overlap {
                prop_assert!(sa.iter().any(|s| sb.contains(s)));
            }
        }
    }
}
