//! The index logic of the single-producer / single-consumer rings that live in a shared
//! region, separated from the memory they index so that it can be model-checked with
//! `loom` and property-tested without a mapping. The model check:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ofi-prov-shm --lib
//! --release ring::loom_tests` (its own target directory, so the shared one is not
//! rebuilt with other flags).
//!
//! # Protocol
//!
//! A ring has `n` (a power of two) fixed slots. Each slot begins with a sequence word;
//! position `p` (a 64-bit counter that never wraps in practice) lives in slot `p % n`.
//!
//! - The producer owns `head` (private to it). To write position `p` it needs
//!   `p - tail < n`, where `tail` is the consumer's published index (read with `Acquire`
//!   only when the producer's cached copy says the ring is full). It fills the slot's
//!   body with plain stores, then stores `p + 1` into the slot's sequence word with
//!   `Release`: that store publishes the body.
//! - The consumer owns `tail`. It polls the sequence word of slot `tail % n` with
//!   `Acquire`; the slot is ready when the word equals `tail + 1` (any other value: not
//!   yet written, or a stale lap). After reading the body it stores `tail + 1` into the
//!   shared tail with `Release`, which hands the slot back to the producer.
//!
//! So a message costs the consumer one poll of the slot's own cache line, and the
//! producer reads the consumer's tail line only when its cached copy says "full".
//!
//! # Hostile memory
//!
//! The shared words may be written by a buggy or hostile peer. Slot indices are always
//! computed locally (`pos & mask`, with `mask` from the validated geometry), never read
//! from shared memory, so they are in range whatever the words hold. A published tail
//! that is ahead of the producer's head, or further behind than `n`, is reported as
//! [`Corrupt`]. Nothing here panics.

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// The shared words of one ring, as the index logic sees them.
pub trait RingWords {
    /// The sequence word of slot `i` (`i < n`).
    fn seq(&self, i: usize) -> &AtomicU64;
    /// The consumer's published tail.
    fn tail(&self) -> &AtomicU64;
}

/// The shared memory broke the protocol (a tail outside `head - n ..= head`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt {
    /// The producer's head.
    pub head: u64,
    /// The tail that was read.
    pub tail: u64,
}

/// The producer's private state.
#[derive(Clone, Copy, Debug)]
pub struct Producer {
    head: u64,
    cached_tail: u64,
    mask: u64,
}

impl Producer {
    /// A producer of a ring of `n` slots (a power of two, at least 1) starting at
    /// position `start` (the published tail when the producer attaches).
    pub fn new(n: usize, start: u64) -> Producer {
        Producer {
            head: start,
            cached_tail: start,
            mask: (n.max(1) as u64).next_power_of_two() - 1,
        }
    }

    /// The next position to write.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Positions written but not yet released by the consumer (as last seen).
    pub fn in_flight(&self) -> u64 {
        self.head - self.cached_tail
    }

    /// The slot index to fill next, if the ring has room (reads the consumer's tail
    /// only when the cached copy says the ring is full).
    #[inline]
    pub fn reserve<W: RingWords + ?Sized>(&mut self, w: &W) -> Result<Option<usize>, Corrupt> {
        let n = self.mask + 1;
        if self.head - self.cached_tail >= n {
            let tail = self.refresh_tail(w)?;
            if self.head - tail >= n {
                return Ok(None);
            }
        }
        Ok(Some((self.head & self.mask) as usize))
    }

    /// Whether `k` more slots are free (refreshing the tail if needed).
    pub fn has_room<W: RingWords + ?Sized>(&mut self, w: &W, k: u64) -> Result<bool, Corrupt> {
        let n = self.mask + 1;
        if self.head - self.cached_tail + k > n {
            self.refresh_tail(w)?;
        }
        Ok(self.head - self.cached_tail + k <= n)
    }

    /// Read the consumer's tail into the cached copy and return it; a tail ahead of
    /// the head, or more than the ring's size behind it, is [`Corrupt`] (the cached
    /// copy is then left as it was).
    #[inline(always)]
    fn refresh_tail<W: RingWords + ?Sized>(&mut self, w: &W) -> Result<u64, Corrupt> {
        let tail = w.tail().load(Ordering::Acquire);
        if tail > self.head || self.head - tail > self.mask + 1 {
            return Err(Corrupt {
                head: self.head,
                tail,
            });
        }
        self.cached_tail = tail;
        Ok(tail)
    }

    /// Publish the slot returned by [`Producer::reserve`] (its body written).
    #[inline]
    pub fn publish<W: RingWords + ?Sized>(&mut self, w: &W) {
        let i = (self.head & self.mask) as usize;
        self.head += 1;
        w.seq(i).store(self.head, Ordering::Release);
    }
}

/// The consumer's private state.
#[derive(Clone, Copy, Debug)]
pub struct Consumer {
    tail: u64,
    mask: u64,
}

impl Consumer {
    /// A consumer of a ring of `n` slots (a power of two) starting at position `start`.
    pub fn new(n: usize, start: u64) -> Consumer {
        Consumer {
            tail: start,
            mask: (n.max(1) as u64).next_power_of_two() - 1,
        }
    }

    /// The next position to read.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// The slot index of the next message, if it has been published.
    #[inline]
    pub fn peek<W: RingWords + ?Sized>(&self, w: &W) -> Option<usize> {
        let i = (self.tail & self.mask) as usize;
        if w.seq(i).load(Ordering::Acquire) == self.tail + 1 {
            Some(i)
        } else {
            None
        }
    }

    /// Release the slot returned by [`Consumer::peek`] back to the producer.
    #[inline]
    pub fn release<W: RingWords + ?Sized>(&mut self, w: &W) {
        self.tail += 1;
        w.tail().store(self.tail, Ordering::Release);
    }
}

/// The words of a ring in ordinary memory, for the tests (std's atomics, or loom's under
/// `--cfg loom`): `n` sequence words, the tail, and one body word per slot.
#[cfg(test)]
mod test_words {
    use super::*;

    pub(super) struct Words {
        pub(super) seq: Vec<AtomicU64>,
        pub(super) tail: AtomicU64,
        pub(super) body: Vec<AtomicU64>,
    }

    impl Words {
        pub(super) fn new(n: usize) -> Words {
            Words {
                seq: (0..n).map(|_| AtomicU64::new(0)).collect(),
                tail: AtomicU64::new(0),
                body: (0..n).map(|_| AtomicU64::new(0)).collect(),
            }
        }
    }

    impl RingWords for Words {
        fn seq(&self, i: usize) -> &AtomicU64 {
            &self.seq[i]
        }
        fn tail(&self) -> &AtomicU64 {
            &self.tail
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::test_words::Words;
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn fills_then_refuses_then_drains() {
        let w = Words::new(4);
        let mut p = Producer::new(4, 0);
        let mut c = Consumer::new(4, 0);
        assert_eq!(c.peek(&w), None);
        for v in 0..4u64 {
            let i = p.reserve(&w).unwrap().unwrap();
            w.body[i].store(v, Ordering::Relaxed);
            p.publish(&w);
        }
        assert_eq!(p.reserve(&w), Ok(None));
        for v in 0..4u64 {
            let i = c.peek(&w).unwrap();
            assert_eq!(w.body[i].load(Ordering::Relaxed), v);
            c.release(&w);
        }
        assert_eq!(c.peek(&w), None);
        assert!(p.reserve(&w).unwrap().is_some());
    }

    #[test]
    fn a_tail_ahead_of_head_is_corrupt() {
        // (the producer's first position, the tail written once the ring is full): a
        // tail ahead of the head, then one further behind it than n.
        for (start, tail) in [(0, 99), (10, 1)] {
            let w = Words::new(4);
            let mut p = Producer::new(4, start);
            for _ in 0..4 {
                p.reserve(&w).unwrap().unwrap();
                p.publish(&w);
            }
            w.tail.store(tail, Ordering::Relaxed);
            let head = start + 4;
            assert_eq!(p.reserve(&w), Err(Corrupt { head, tail }));
        }
    }

    #[test]
    fn stale_sequence_words_are_not_ready() {
        let w = Words::new(2);
        let c = Consumer::new(2, 5);
        // Slot 1 (position 5) holds the word of position 3 (a previous lap).
        w.seq[1].store(4, Ordering::Relaxed);
        assert_eq!(c.peek(&w), None);
        w.seq[1].store(6, Ordering::Relaxed);
        assert_eq!(c.peek(&w), Some(1));
    }

    proptest! {
        /// Any interleaving of produce/consume steps behaves like a bounded FIFO.
        #[test]
        fn behaves_like_a_bounded_fifo(ops in proptest::collection::vec(any::<bool>(), 0..400),
                                       log_n in 0u32..5) {
            let n = 1usize << log_n;
            let w = Words::new(n);
            let mut p = Producer::new(n, 0);
            let mut c = Consumer::new(n, 0);
            let mut model = VecDeque::new();
            let mut next = 0u64;
            for produce in ops {
                if produce {
                    match p.reserve(&w).unwrap() {
                        Some(i) => {
                            prop_assert!(model.len() < n);
                            prop_assert!(i < n);
                            w.body[i].store(next, Ordering::Relaxed);
                            p.publish(&w);
                            model.push_back(next);
                            next += 1;
                        }
                        None => prop_assert_eq!(model.len(), n),
                    }
                } else {
                    match c.peek(&w) {
                        Some(i) => {
                            let want = model.pop_front();
                            prop_assert_eq!(Some(w.body[i].load(Ordering::Relaxed)), want);
                            c.release(&w);
                        }
                        None => prop_assert!(model.is_empty()),
                    }
                }
            }
        }

        /// Whatever a hostile peer writes into the shared words, indices stay in range
        /// and nothing panics.
        #[test]
        fn hostile_words_never_give_an_out_of_range_index(
            words in proptest::collection::vec(any::<u64>(), 9),
            head in 0u64..1000, log_n in 0u32..4) {
            let n = 1usize << log_n;
            let w = Words::new(8);
            for (i, v) in words.iter().take(8).enumerate() {
                w.seq[i].store(*v, Ordering::Relaxed);
            }
            w.tail.store(words[8], Ordering::Relaxed);
            let mut p = Producer::new(n, head);
            p.cached_tail = head.saturating_sub(n as u64);
            if let Ok(Some(i)) = p.reserve(&w) {
                prop_assert!(i < n);
            }
            let c = Consumer::new(n, words[8]);
            if let Some(i) = c.peek(&w) {
                prop_assert!(i < n);
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::test_words::Words;
    use super::*;
    use loom::sync::Arc;

    /// Three messages through a ring of two slots: the consumer always sees the body
    /// the producer wrote before publishing (the body is written with `Relaxed`
    /// stores, so only the slot's Release/Acquire pair can make it visible), in order,
    /// and the producer never overwrites a slot the consumer has not released.
    #[test]
    fn spsc_hand_off_is_ordered_and_complete() {
        loom::model(|| {
            let w = Arc::new(Words::new(2));
            let w2 = w.clone();
            let prod = loom::thread::spawn(move || {
                let mut p = Producer::new(2, 0);
                let mut v = 1u64;
                while v <= 3 {
                    match p.reserve(&*w2).expect("not corrupt") {
                        Some(i) => {
                            w2.body[i].store(v * 10, Ordering::Relaxed);
                            p.publish(&*w2);
                            v += 1;
                        }
                        None => loom::thread::yield_now(),
                    }
                }
            });
            let mut c = Consumer::new(2, 0);
            let mut got = Vec::new();
            while got.len() < 3 {
                match c.peek(&*w) {
                    Some(i) => {
                        got.push(w.body[i].load(Ordering::Relaxed));
                        c.release(&*w);
                    }
                    None => loom::thread::yield_now(),
                }
            }
            prod.join().unwrap();
            assert_eq!(got, vec![10, 20, 30]);
        });
    }
}
