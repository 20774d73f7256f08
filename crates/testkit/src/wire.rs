//! Hostile-input cases for a wire-format parser, written as a table.
//!
//! A parser's test names a valid header and the corruptions it must refuse, each as
//! (offset, byte written there, the error the parser must return);
//! [`assert_each_corruption`] walks them. It panics (the test fails) on the first case
//! the parser does not refuse with exactly that error.

use std::fmt::Debug;

/// For each `(at, byte, want)` in `cases`: `parse` of `good` with byte `at` set to
/// `byte` returns `Err(want)`. The failure message names the offset and the byte.
///
/// # Panics
/// On the first case that parses, or fails with another error; when `at` lies outside
/// `good`.
pub fn assert_each_corruption<T: Debug, E: Debug + PartialEq>(
    good: &[u8],
    cases: &[(usize, u8, E)],
    parse: impl Fn(&[u8]) -> Result<T, E>,
) {
    for (at, byte, want) in cases {
        let mut bad = good.to_vec();
        bad[*at] = *byte;
        match parse(&bad) {
            Err(e) if e == *want => {}
            got => panic!("byte {at} = {byte:#x}: {got:?}, where {want:?} was due"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_is_one(b: &[u8]) -> Result<(), u8> {
        match b[0] {
            1 => Ok(()),
            other => Err(other),
        }
    }

    #[test]
    fn each_case_must_fail_with_its_error() {
        assert_each_corruption(&[1, 0], &[(0, 2, 2), (0, 9, 9)], first_is_one);
        let missed = std::panic::catch_unwind(|| {
            assert_each_corruption(&[1, 0], &[(1, 5, 5)], first_is_one);
        });
        assert!(
            missed.is_err(),
            "a corruption the parser accepts fails the test"
        );
        let other = std::panic::catch_unwind(|| {
            assert_each_corruption(&[1, 0], &[(0, 2, 3)], first_is_one);
        });
        assert!(other.is_err(), "another error fails the test");
    }
}
