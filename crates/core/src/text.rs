//! Text of messages about values the user or a peer gave: [`shorten`] keeps a long value
//! (a 100 KB environment variable, a peer's garbage) from making a message as long.
//!
//! Invariant: the result keeps whole characters and says how long the value was.

#![forbid(unsafe_code)]

use std::borrow::Cow;

/// Characters of a value a message shows by default ([`shorten`]).
pub const SHOWN: usize = 64;

/// `value` for a message: as it is when at most `max` characters, else its first
/// `max` characters, `…` and its length in bytes.
pub fn shorten(value: &str, max: usize) -> Cow<'_, str> {
    match value.char_indices().nth(max) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes)", &value[..cut], value.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_stay_and_long_ones_are_cut_on_a_character() {
        assert_eq!(shorten("eth0", 8), "eth0");
        assert_eq!(shorten("12345678", 8), "12345678");
        let long = "x".repeat(100_000);
        assert_eq!(
            shorten(&long, 16),
            format!("{}… (100000 bytes)", "x".repeat(16))
        );
        // Multi-byte characters are never split.
        assert_eq!(shorten("ééééé", 2), "éé… (10 bytes)");
    }
}
