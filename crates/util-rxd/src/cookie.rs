//! The stateless cookie of rxd's handshake (see [`crate::peer`]): a keyed PRF of a
//! `CONNECT`'s source address, a coarse time window and the `CONNECT`'s id and session
//! (its nonce). The responder keeps nothing between its `CHALLENGE` and the echo; only
//! a sender that receives at its source address can echo the right value.
//!
//! Invariants: a cookie is never 0 (0 means "none" on the wire); it is valid in the
//! window it was made in and the next ([`COOKIE_WINDOW_SHIFT`]).

#![forbid(unsafe_code)]

use std::hash::{BuildHasher, Hash, Hasher};

/// A cookie is valid in the time window (`now >> COOKIE_WINDOW_SHIFT`, about 4.3 s of
/// nanoseconds) it was made in and the next one.
pub const COOKIE_WINDOW_SHIFT: u32 = 32;

/// The 128-bit key of an endpoint's cookies (SipHash-2-4).
#[derive(Clone, Copy)]
pub struct CookieKey(u64, u64);

impl std::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

impl CookieKey {
    /// A key drawn from std's randomly keyed hasher (`seed` only varies the input).
    pub fn random(seed: u32) -> CookieKey {
        let random = std::collections::hash_map::RandomState::new();
        CookieKey(random.hash_one(seed), random.hash_one(!seed))
    }

    /// A given key (deterministic tests and fuzzing).
    pub fn from_parts(key: (u64, u64)) -> CookieKey {
        CookieKey(key.0, key.1)
    }

    /// The cookie for (`src`, `src_id`, `src_sess`) at `now`.
    pub fn make(&self, src: &[u8], src_id: u32, src_sess: u32, now: u64) -> u64 {
        self.in_window(src, src_id, src_sess, now >> COOKIE_WINDOW_SHIFT)
    }

    fn in_window(&self, src: &[u8], src_id: u32, src_sess: u32, window: u64) -> u64 {
        // SipHash-2-4 keyed with a random 128-bit key: a PRF an off-path sender cannot
        // compute (std keeps the keyed constructor, deprecated only as a choice of
        // general-purpose hasher).
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(self.0, self.1);
        src.hash(&mut h);
        window.hash(&mut h);
        src_id.hash(&mut h);
        src_sess.hash(&mut h);
        h.finish().max(1)
    }

    /// Whether `cookie` is what `src` was given for (`src_id`, `src_sess`) in this
    /// window or the one before.
    pub fn valid(&self, src: &[u8], src_id: u32, src_sess: u32, cookie: u64, now: u64) -> bool {
        let w = now >> COOKIE_WINDOW_SHIFT;
        cookie != 0
            && (self.in_window(src, src_id, src_sess, w) == cookie
                || (w > 0 && self.in_window(src, src_id, src_sess, w - 1) == cookie))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_bound_to_source_nonce_key_and_time() {
        let k = CookieKey::from_parts((1, 2));
        let now = 5u64 << COOKIE_WINDOW_SHIFT;
        let c = k.make(b"a", 1, 2, now);
        assert!(k.valid(b"a", 1, 2, c, now));
        // The next window still takes it, the one after does not.
        assert!(k.valid(b"a", 1, 2, c, now + (1 << COOKIE_WINDOW_SHIFT)));
        assert!(!k.valid(b"a", 1, 2, c, now + (2 << COOKIE_WINDOW_SHIFT)));
        assert!(!k.valid(b"b", 1, 2, c, now), "another source");
        assert!(!k.valid(b"a", 9, 2, c, now), "another id");
        assert!(!k.valid(b"a", 1, 3, c, now), "another session");
        assert!(
            !CookieKey::from_parts((1, 3)).valid(b"a", 1, 2, c, now),
            "another key"
        );
        assert!(!k.valid(b"a", 1, 2, 0, now), "0 is no cookie");
        assert_ne!(
            CookieKey::random(1).make(b"a", 1, 2, now),
            CookieKey::random(1).make(b"a", 1, 2, now)
        );
    }
}
