//! Lists joined at compile time: a constant made of several constant slices, one
//! after the other (the layouts of every boundary structure; a conformance
//! declaration made of named sets of areas).
//!
//! `concat::<T, N>` panics, at compile time when evaluated in a constant, unless `N`
//! is [`total_len`] of its lists; nothing else here panics.

/// How many items `lists` hold together (the `N` of [`concat()`]).
pub const fn total_len<T>(lists: &[&[T]]) -> usize {
    let mut len = 0;
    let mut list = 0;
    while list < lists.len() {
        len += lists[list].len();
        list += 1;
    }
    len
}

/// The items of `lists`, one list after the other, in order. `fill` only initializes
/// the array before it is overwritten. Use it in a constant:
/// `const ALL: [u8; total_len(LISTS)] = concat(LISTS, 0);`.
///
/// # Panics
///
/// If `N` is not [`total_len`] of `lists`.
pub const fn concat<T: Copy, const N: usize>(lists: &[&[T]], fill: T) -> [T; N] {
    assert!(
        N == total_len(lists),
        "concat: N is not the lists' total length"
    );
    let mut out = [fill; N];
    let mut at = 0;
    let mut list = 0;
    while list < lists.len() {
        let mut i = 0;
        while i < lists[list].len() {
            out[at] = lists[list][i];
            at += 1;
            i += 1;
        }
        list += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTS: &[&[u8]] = &[&[1, 2], &[], &[3]];

    #[test]
    fn lists_are_joined_in_order() {
        const JOINED: [u8; total_len(LISTS)] = concat(LISTS, 0);
        assert_eq!(JOINED, [1, 2, 3]);
        assert_eq!(total_len::<u8>(&[]), 0);
    }

    #[test]
    #[should_panic(expected = "total length")]
    fn a_wrong_length_panics() {
        let _: [u8; 2] = concat(LISTS, 0);
    }
}
