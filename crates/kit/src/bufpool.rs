//! Buffer pools: a bounded slab whose ids are stable and safe to use as context ids.
//!
//! A [`BufPool<T>`] stores values of `T` in slots and hands out a `u64` id for each
//! allocated value. Providers use these ids as operation contexts (the value that goes
//! on the wire as a message id, or into a lower provider's `op_context`), and look the
//! entry up again when the answer arrives.
//!
//! # Ids
//!
//! An id is `generation << 32 | index`. `index` names the slot; `generation` is the
//! slot's counter, bumped every time the slot is freed. A stale id — one whose entry was
//! freed, whether or not the slot has been reused since — no longer matches the slot's
//! generation, so [`get`](BufPool::get), [`get_mut`](BufPool::get_mut) and
//! [`free`](BufPool::free) answer `None` for it instead of touching somebody else's
//! entry. Generations start at 1 and skip 0 when they wrap, so **an id is never 0**
//! (0 stays free to mean "no context"). Detection is exact until one slot has been
//! reused 2³² − 1 times between the moment an id was issued and the moment it comes
//! back, after which a stale id could alias a live one.
//!
//! # Storage
//!
//! Slots live in chunks allocated on demand (`chunk_size` slots each, rounded up to a
//! power of two so an index splits into chunk and offset with a shift and a mask). A
//! chunk is never reallocated or moved once created, so an entry's address is stable
//! while it is allocated; [`BufPool::fixed`] allocates all slots at construction so the
//! pool never allocates afterwards. Freed slots go onto an intrusive LIFO free list
//! (the most recently freed, cache-warm slot is reused first).
//!
//! # Costs and limits
//!
//! `alloc`, `free`, `get`, `get_mut` are O(1); `alloc` allocates memory only when it
//! opens a new chunk. The pool holds at most `max_entries` live values (at most
//! `u32::MAX`); `alloc` beyond that fails with `FI_EAGAIN` — freeing entries, which
//! progress does as operations complete, clears it.
//!
//! Invariants: `len() <= max_entries()`; `capacity()` never shrinks; every free slot is
//! on the free list exactly once. Nothing here panics on any input.

use ofi_core::error::{Errno, Error, Result};

/// Slots per chunk used by [`BufPool::new`].
pub const DEFAULT_CHUNK_SIZE: usize = 64;

/// End of the free list.
const NIL: u32 = u32::MAX;

/// One slot: a live value, or a link in the free list. Both carry the slot's
/// generation.
#[derive(Debug)]
enum Slot<T> {
    Live { generation: u32, value: T },
    Free { generation: u32, next: u32 },
}

/// A bounded slab of `T` with generation-checked `u64` ids (see the module docs).
#[derive(Debug)]
pub struct BufPool<T> {
    chunks: Vec<Vec<Slot<T>>>,
    /// log2 of the chunk size.
    shift: u32,
    /// Slots ever created (they are indices `0..created`).
    created: u32,
    /// Head of the free list of created slots.
    free_head: u32,
    len: usize,
    max_entries: u32,
}

/// The slot index inside a pool id (`id & 0xffff_ffff`), e.g. to index a side table
/// sized `max_entries`; always below the pool's `max_entries` for an id it issued.
pub fn id_index(id: u64) -> usize {
    split(id).1 as usize
}

/// The generation inside a pool id (`id >> 32`); never 0 for an id a pool issued.
pub fn id_generation(id: u64) -> u32 {
    split(id).0
}

/// Split an id into (generation, index).
fn split(id: u64) -> (u32, u32) {
    ((id >> 32) as u32, id as u32)
}

/// Join a generation and an index into an id.
fn join(generation: u32, index: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

/// The generation after `g`, skipping 0 so ids are never 0.
fn next_generation(g: u32) -> u32 {
    match g.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

impl<T> BufPool<T> {
    /// A growable pool of at most `max_entries` live values, allocating
    /// [`DEFAULT_CHUNK_SIZE`] slots at a time as it fills.
    ///
    /// Errors: `FI_EINVAL` if `max_entries` is 0 or above `u32::MAX`.
    pub fn new(max_entries: usize) -> Result<Self> {
        Self::with_chunk_size(max_entries, DEFAULT_CHUNK_SIZE)
    }

    /// A growable pool of at most `max_entries` live values, allocating `chunk_size`
    /// slots (rounded up to a power of two) at a time.
    ///
    /// Errors: `FI_EINVAL` if `max_entries` is 0 or above `u32::MAX`, or if
    /// `chunk_size` is 0 or above 2³¹.
    pub fn with_chunk_size(max_entries: usize, chunk_size: usize) -> Result<Self> {
        if max_entries == 0 {
            return Err(Error::new(
                Errno::EINVAL,
                "buffer pool: max_entries must be at least 1",
            ));
        }
        if max_entries > u32::MAX as usize {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "buffer pool: max_entries {max_entries} above the limit of {}",
                    u32::MAX
                ),
            ));
        }
        if chunk_size == 0 || chunk_size > 1 << 31 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("buffer pool: chunk_size {chunk_size} not in 1..=2^31"),
            ));
        }
        let shift = chunk_size.next_power_of_two().trailing_zeros();
        Ok(BufPool {
            chunks: Vec::new(),
            shift,
            created: 0,
            free_head: NIL,
            len: 0,
            max_entries: max_entries as u32,
        })
    }

    /// A pool whose `max_entries` slots are all allocated now, in one chunk: it never
    /// allocates memory again.
    ///
    /// Errors: `FI_EINVAL` if `max_entries` is 0 or above 2³¹ (one chunk's limit);
    /// `FI_ENOMEM` if the memory cannot be allocated.
    pub fn fixed(max_entries: usize) -> Result<Self> {
        let mut pool = Self::with_chunk_size(max_entries, max_entries)?;
        let mut chunk = Vec::new();
        chunk.try_reserve_exact(max_entries).map_err(|_| {
            Error::new(
                Errno::ENOMEM,
                format!("buffer pool: cannot allocate {max_entries} entries"),
            )
        })?;
        pool.chunks.push(chunk);
        Ok(pool)
    }

    /// Store `value` and return its id, or give the value back if the pool is full
    /// (or memory for a new chunk could not be had).
    pub fn try_alloc(&mut self, value: T) -> std::result::Result<u64, T> {
        self.alloc_inner(value).map_err(|(_, v)| v)
    }

    /// Store `value` and return its id.
    ///
    /// Errors: `FI_EAGAIN` when `max_entries` values are live; `FI_ENOMEM` when memory
    /// for a new chunk could not be allocated (`FI_EOTHER` would mean a broken internal
    /// invariant). The value is dropped on error; use
    /// [`try_alloc`](Self::try_alloc) to get it back.
    pub fn alloc(&mut self, value: T) -> Result<u64> {
        self.alloc_inner(value).map_err(|(code, _)| {
            Error::new(
                code,
                if code == Errno::ENOMEM {
                    "buffer pool: cannot allocate a new chunk"
                } else if code == Errno::EOTHER {
                    "buffer pool: free list corrupted"
                } else {
                    "buffer pool exhausted: all entries are in use"
                },
            )
        })
    }

    fn alloc_inner(&mut self, value: T) -> std::result::Result<u64, (Errno, T)> {
        if self.free_head != NIL {
            let index = self.free_head;
            let (chunk, offset) = self.locate(index);
            // The free list holds only created, free slots; should that invariant ever
            // break, refuse with FI_EOTHER rather than panic.
            let Some(slot) = self.chunks.get_mut(chunk).and_then(|c| c.get_mut(offset)) else {
                return Err((Errno::EOTHER, value));
            };
            let (generation, next) = match *slot {
                Slot::Free { generation, next } => (generation, next),
                Slot::Live { .. } => return Err((Errno::EOTHER, value)),
            };
            *slot = Slot::Live { generation, value };
            self.free_head = next;
            self.len += 1;
            return Ok(join(generation, index));
        }
        if self.created >= self.max_entries {
            return Err((Errno::EAGAIN, value));
        }
        let index = self.created;
        let (chunk, _) = self.locate(index);
        if chunk == self.chunks.len() {
            // Open a new chunk, sized so the pool never holds more than max_entries slots.
            let chunk_size = 1usize << self.shift;
            let start = chunk << self.shift;
            let size = chunk_size.min(self.max_entries as usize - start);
            let mut fresh = Vec::new();
            if fresh.try_reserve_exact(size).is_err() {
                return Err((Errno::ENOMEM, value));
            }
            self.chunks.push(fresh);
        }
        // The slot at `offset` is the next one pushed: chunks fill in index order, and
        // a push never exceeds the capacity reserved above, so the chunk never moves.
        let Some(open) = self.chunks.get_mut(chunk) else {
            return Err((Errno::EOTHER, value));
        };
        open.push(Slot::Live {
            generation: 1,
            value,
        });
        self.created += 1;
        self.len += 1;
        Ok(join(1, index))
    }

    /// The value for `id`, or `None` if `id` is not live (never issued, freed, or stale).
    pub fn get(&self, id: u64) -> Option<&T> {
        let (generation, index) = split(id);
        let (chunk, offset) = self.locate(index);
        match self.chunks.get(chunk)?.get(offset)? {
            Slot::Live {
                generation: g,
                value,
            } if *g == generation => Some(value),
            _ => None,
        }
    }

    /// The value for `id`, mutably, or `None` if `id` is not live.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (generation, index) = split(id);
        let (chunk, offset) = self.locate(index);
        match self.chunks.get_mut(chunk)?.get_mut(offset)? {
            Slot::Live {
                generation: g,
                value,
            } if *g == generation => Some(value),
            _ => None,
        }
    }

    /// Whether `id` names a live entry.
    pub fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Remove the entry for `id` and return its value; `None` (and no change) if `id`
    /// is not live. The slot's generation is bumped, so `id` is stale from now on.
    pub fn free(&mut self, id: u64) -> Option<T> {
        let (generation, index) = split(id);
        let (chunk, offset) = self.locate(index);
        let slot = self.chunks.get_mut(chunk)?.get_mut(offset)?;
        match slot {
            Slot::Live { generation: g, .. } if *g == generation => {}
            _ => return None,
        }
        let freed = Slot::Free {
            generation: next_generation(generation),
            next: self.free_head,
        };
        let old = std::mem::replace(slot, freed);
        self.free_head = index;
        self.len -= 1;
        match old {
            Slot::Live { value, .. } => Some(value),
            Slot::Free { .. } => None,
        }
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `alloc` would fail with `FI_EAGAIN` now.
    pub fn is_full(&self) -> bool {
        self.len >= self.max_entries as usize
    }

    /// Number of slots whose memory is allocated (live or free); grows chunk by chunk
    /// up to `max_entries`, never shrinks.
    pub fn capacity(&self) -> usize {
        let reserved: usize = self.chunks.iter().map(Vec::capacity).sum();
        reserved.min(self.max_entries as usize)
    }

    /// The bound on live entries given at construction.
    pub fn max_entries(&self) -> usize {
        self.max_entries as usize
    }

    /// The live entries with their ids, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let shift = self.shift;
        self.chunks.iter().enumerate().flat_map(move |(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter_map(move |(o, slot)| match slot {
                    Slot::Live { generation, value } => {
                        Some((join(*generation, ((c << shift) | o) as u32), value))
                    }
                    Slot::Free { .. } => None,
                })
        })
    }

    /// Free every live entry and return the values with their ids, in index order
    /// (e.g. to fail every outstanding operation when an endpoint closes). The ids
    /// become stale; memory is kept.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        let ids: Vec<u64> = self.iter().map(|(id, _)| id).collect();
        ids.into_iter()
            .filter_map(|id| self.free(id).map(|v| (id, v)))
            .collect()
    }

    /// (chunk, offset) of a slot index.
    fn locate(&self, index: u32) -> (usize, usize) {
        let index = index as usize;
        (index >> self.shift, index & ((1usize << self.shift) - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn alloc_get_free_roundtrip() {
        let mut p = BufPool::new(4).unwrap();
        let a = p.alloc("a").unwrap();
        let b = p.alloc("b").unwrap();
        assert_ne!(a, b);
        assert_ne!(a, 0);
        assert_eq!(p.get(a), Some(&"a"));
        assert_eq!(p.get(b), Some(&"b"));
        *p.get_mut(b).unwrap() = "B";
        assert_eq!(p.len(), 2);
        assert_eq!(p.free(b), Some("B"));
        assert_eq!(p.len(), 1);
        assert_eq!(p.get(b), None);
        assert_eq!(p.free(b), None, "double free is refused");
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn ids_pack_generation_and_index() {
        let mut p = BufPool::new(2).unwrap();
        let a = p.alloc(1).unwrap();
        assert_eq!(a, 1 << 32, "first id: generation 1, index 0");
        p.free(a);
        let a2 = p.alloc(2).unwrap();
        assert_eq!(id_index(a2), 0, "freed slot is reused");
        assert_eq!(a2, 2 << 32, "generation bumped");
        assert_eq!(id_generation(a2), 2);
        assert_eq!(p.get(a), None, "stale id after reuse");
        assert_eq!(p.get_mut(a), None);
        assert_eq!(p.free(a), None);
        assert_eq!(p.get(a2), Some(&2));
    }

    #[test]
    fn generation_wraps_past_zero() {
        assert_eq!(next_generation(u32::MAX), 1);
        assert_eq!(next_generation(1), 2);
    }

    #[test]
    fn bounded_alloc_is_eagain() {
        let mut p = BufPool::new(2).unwrap();
        p.alloc(1).unwrap();
        let b = p.alloc(2).unwrap();
        assert!(p.is_full());
        assert_eq!(p.alloc(3).unwrap_err().code(), Errno::EAGAIN);
        assert_eq!(p.try_alloc(4), Err(4), "value handed back");
        p.free(b);
        assert!(!p.is_full());
        assert!(p.alloc(5).is_ok());
    }

    #[test]
    fn bad_construction_is_einval() {
        assert_eq!(BufPool::<u8>::new(0).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            BufPool::<u8>::with_chunk_size(4, 0).unwrap_err().code(),
            Errno::EINVAL
        );
        assert_eq!(
            BufPool::<u8>::with_chunk_size(4, (1 << 31) + 1)
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            BufPool::<u8>::new(u32::MAX as usize + 1)
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
        assert!(BufPool::<u8>::new(u32::MAX as usize).is_ok());
    }

    #[test]
    fn unknown_ids_are_none() {
        let mut p = BufPool::<u8>::new(8).unwrap();
        for id in [0, 1, u64::MAX, 1 << 32, (5 << 32) | 3, 7] {
            assert_eq!(p.get(id), None);
            assert_eq!(p.get_mut(id), None);
            assert_eq!(p.free(id), None);
            assert!(!p.contains(id));
        }
        assert!(p.is_empty());
    }

    #[test]
    fn chunks_grow_to_the_bound_and_never_move() {
        let mut p = BufPool::with_chunk_size(10, 3).unwrap(); // chunk rounds up to 4
        assert_eq!(p.capacity(), 0);
        let ids: Vec<u64> = (0..10).map(|i| p.alloc(i).unwrap()).collect();
        assert_eq!(p.capacity(), 10, "last chunk is trimmed to max_entries");
        assert_eq!(p.chunks.len(), 3);
        let addr0 = p.get(ids[0]).unwrap() as *const i32 as usize;
        p.free(ids[9]);
        p.alloc(99).unwrap();
        assert_eq!(p.get(ids[0]).unwrap() as *const i32 as usize, addr0);
        for (i, id) in ids.iter().enumerate().take(9) {
            assert_eq!(p.get(*id), Some(&(i as i32)));
        }
    }

    #[test]
    fn fixed_preallocates() {
        let mut p = BufPool::fixed(5).unwrap();
        assert_eq!(p.capacity(), 5);
        for i in 0..5 {
            p.alloc(i).unwrap();
        }
        assert_eq!(p.capacity(), 5);
        assert_eq!(p.chunks.len(), 1);
        assert_eq!(p.alloc(5).unwrap_err().code(), Errno::EAGAIN);
    }

    #[test]
    fn free_list_is_lifo() {
        let mut p = BufPool::new(4).unwrap();
        let a = p.alloc('a').unwrap();
        let b = p.alloc('b').unwrap();
        p.free(a);
        p.free(b);
        let c = p.alloc('c').unwrap();
        assert_eq!(id_index(c), id_index(b));
    }

    #[test]
    fn iter_and_drain() {
        let mut p = BufPool::new(8).unwrap();
        let ids: Vec<u64> = (0..4).map(|i| p.alloc(i * 10).unwrap()).collect();
        p.free(ids[1]);
        let seen: Vec<(u64, i32)> = p.iter().map(|(id, v)| (id, *v)).collect();
        assert_eq!(seen, vec![(ids[0], 0), (ids[2], 20), (ids[3], 30)]);
        let drained = p.drain();
        assert_eq!(drained, vec![(ids[0], 0), (ids[2], 20), (ids[3], 30)]);
        assert!(p.is_empty());
        assert!(ids.iter().all(|id| p.get(*id).is_none()));
        assert_eq!(p.capacity(), 8, "one chunk, trimmed to max_entries");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u32),
        /// Free the n-th id ever issued (modulo), live or stale.
        Free(usize),
        /// Overwrite the value of the n-th id ever issued.
        Set(usize, u32),
        /// Free a made-up id.
        FreeRaw(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u32>().prop_map(Op::Alloc),
            3 => any::<usize>().prop_map(Op::Free),
            2 => (any::<usize>(), any::<u32>()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (0u64..4, 0u64..6).prop_map(|(g, i)| Op::FreeRaw(g << 32 | i)),
        ]
    }

    proptest! {
        #[test]
        fn matches_hashmap_model(
            max in 1usize..12,
            chunk in 1usize..6,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let mut pool = BufPool::with_chunk_size(max, chunk).unwrap();
            let mut model: HashMap<u64, u32> = HashMap::new();
            let mut issued: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(v) => match pool.alloc(v) {
                        Ok(id) => {
                            prop_assert!(model.len() < max);
                            prop_assert_ne!(id, 0);
                            prop_assert!(!model.contains_key(&id), "id {id:#x} already live");
                            prop_assert!(id_index(id) < max);
                            model.insert(id, v);
                            issued.push(id);
                        }
                        Err(e) => {
                            prop_assert_eq!(e.code(), Errno::EAGAIN);
                            prop_assert_eq!(model.len(), max);
                        }
                    },
                    Op::Free(n) if !issued.is_empty() => {
                        let id = issued[n % issued.len()];
                        prop_assert_eq!(pool.free(id), model.remove(&id));
                    }
                    Op::Set(n, v) if !issued.is_empty() => {
                        let id = issued[n % issued.len()];
                        match (pool.get_mut(id), model.get_mut(&id)) {
                            (Some(a), Some(b)) => { *a = v; *b = v; }
                            (None, None) => {}
                            (a, b) => prop_assert!(false, "get_mut {:?} vs model {:?}", a, b),
                        }
                    }
                    Op::FreeRaw(id) => prop_assert_eq!(pool.free(id), model.remove(&id)),
                    Op::Free(_) | Op::Set(..) => {}
                }
                prop_assert_eq!(pool.len(), model.len());
                prop_assert!(pool.capacity() <= max);
                for id in &issued {
                    prop_assert_eq!(pool.get(*id), model.get(id));
                }
                let mut live: Vec<(u64, u32)> = pool.iter().map(|(i, v)| (i, *v)).collect();
                let mut want: Vec<(u64, u32)> = model.iter().map(|(i, v)| (*i, *v)).collect();
                live.sort_unstable();
                want.sort_unstable();
                prop_assert_eq!(live, want);
            }
        }
    }
}
