//! Diagnostics about input a provider does not control: values shortened before they
//! go into a message ([`shorten`], the core's), and warnings about what peers send rate-limited
//! per peer ([`RateLimit`]), so a hostile or broken peer can neither flood the log
//! nor make one line megabytes long.
//!
//! # Invariants
//!
//! - [`shorten`] keeps whole characters and says how long the value was.
//! - [`RateLimit::admit`] lets through at most `burst` lines per key in each window of
//!   `interval` (a window starts at the first line after the previous one ended); the
//!   first line let through after a window with suppressed lines carries their count.
//! - A [`RateLimit`] keeps at most `max_keys` keys; past that, new keys share one
//!   overflow window (so memory is bounded whatever the number of peers).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use crate::wait::lock;
use std::time::{Duration, Instant};

pub use ofi_core::text::shorten;

/// The words to append to a line [`RateLimit::admit`] let through after suppressing
/// `suppressed` lines (empty for none).
pub fn suppressed_note(suppressed: u64) -> String {
    if suppressed == 0 {
        String::new()
    } else {
        format!(" ({suppressed} more suppressed)")
    }
}

#[derive(Clone, Copy, Debug)]
struct Window {
    start: Instant,
    passed: u32,
    suppressed: u64,
}

#[derive(Debug)]
struct Keys<K> {
    by_key: HashMap<K, Window>,
    overflow: Option<Window>,
}

/// At most `burst` lines per `interval` per key (see the module docs).
#[derive(Debug)]
pub struct RateLimit<K> {
    burst: u32,
    interval: Duration,
    max_keys: usize,
    keys: Mutex<Keys<K>>,
}

impl<K: Hash + Eq + Clone> RateLimit<K> {
    /// A limit of `burst` lines per `interval` per key, for at most `max_keys` keys.
    pub fn new(burst: u32, interval: Duration, max_keys: usize) -> RateLimit<K> {
        RateLimit {
            burst: burst.max(1),
            interval,
            max_keys: max_keys.max(1),
            keys: Mutex::new(Keys {
                by_key: HashMap::new(),
                overflow: None,
            }),
        }
    }

    /// Whether a line about `key` may go at `now`: `Some(n)` when it may, `n` being the
    /// lines about the key suppressed just before (for [`suppressed_note`]); `None`
    /// when it is suppressed (and counted).
    pub fn admit(&self, key: &K, now: Instant) -> Option<u64> {
        let mut g = lock(&self.keys);
        let Keys { by_key, overflow } = &mut *g;
        let interval = self.interval;
        if !by_key.contains_key(key) && by_key.len() >= self.max_keys {
            // Make room: forget the windows that are over and owe no count.
            by_key.retain(|_, w| {
                now.saturating_duration_since(w.start) < interval || w.suppressed > 0
            });
        }
        let window = if by_key.contains_key(key) || by_key.len() < self.max_keys {
            by_key.entry(key.clone()).or_insert(Window {
                start: now,
                passed: 0,
                suppressed: 0,
            })
        } else {
            overflow.get_or_insert(Window {
                start: now,
                passed: 0,
                suppressed: 0,
            })
        };
        if now.saturating_duration_since(window.start) >= interval {
            let owed = window.suppressed;
            *window = Window {
                start: now,
                passed: 1,
                suppressed: 0,
            };
            return Some(owed);
        }
        if window.passed < self.burst {
            window.passed += 1;
            Some(0)
        } else {
            window.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_interval_per_key_then_the_count_of_what_was_left_out() {
        let limit = RateLimit::new(3, Duration::from_secs(1), 16);
        let t0 = Instant::now();
        let got: Vec<Option<u64>> = (0..10).map(|_| limit.admit(&"a", t0)).collect();
        assert_eq!(got[..3], [Some(0), Some(0), Some(0)]);
        assert!(got[3..].iter().all(Option::is_none));
        // Another key has its own window.
        assert_eq!(limit.admit(&"b", t0), Some(0));
        // After the interval: one line, carrying the count.
        let t1 = t0 + Duration::from_millis(1001);
        assert_eq!(limit.admit(&"a", t1), Some(7));
        assert_eq!(limit.admit(&"a", t1), Some(0));
        assert_eq!(suppressed_note(7), " (7 more suppressed)");
        assert_eq!(suppressed_note(0), "");
    }

    #[test]
    fn keys_past_the_bound_share_one_window() {
        let limit = RateLimit::new(1, Duration::from_secs(1), 4);
        let t0 = Instant::now();
        for k in 0..4u32 {
            assert_eq!(limit.admit(&k, t0), Some(0));
        }
        // Keys 4.. share the overflow window: one line between them.
        assert_eq!(limit.admit(&4, t0), Some(0));
        for k in 5..1000u32 {
            assert_eq!(limit.admit(&k, t0), None);
        }
        let g = limit.keys.lock().unwrap();
        assert_eq!(g.by_key.len(), 4);
        drop(g);
        // Once the windows are over, the old keys make room.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(limit.admit(&2000, t1), Some(0));
        assert!(limit.keys.lock().unwrap().by_key.contains_key(&2000));
    }
}
