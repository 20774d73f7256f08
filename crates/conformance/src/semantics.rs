//! Transport semantics a provider inherits and the specification allows, under which
//! some checks assert a different — still exact — behaviour instead of being skipped.
//!
//! A subject states its semantics with [`crate::Subject::with_semantics`]; the default
//! is [`Semantics::NONE`] (every check as written). Each flag names the checks it
//! changes and what they assert then, so a provider cannot use one to hide a bug: the
//! alternative behaviour is checked as strictly as the default one.

use std::fmt;

/// A set of transport semantics (see the constants).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Semantics(u32);

impl Semantics {
    /// Nothing special: every check as written.
    pub const NONE: Semantics = Semantics(0);

    /// A remote access error on a reliable connection (a bad key, an access past a
    /// region's end) breaks the connection, as a verbs RC queue pair enters the error
    /// state. Changed check: `rma_bad_key_and_out_of_range` runs each bad access on a
    /// fresh pair and asserts its error completion and code, the target untouched,
    /// and that the next write completes in error (flushed: `FI_ECANCELED` or
    /// `FI_ECONNRESET`) without touching the target.
    pub const ACCESS_ERROR_BREAKS_CONNECTION: Semantics = Semantics(1);

    /// A message longer than the receive buffer breaks the connection of an `FI_EP_MSG`
    /// endpoint (a verbs RC queue pair: the receiver's `LOC_LEN_ERR`, the sender's
    /// `REM_INV_REQ_ERR`); other endpoint types are checked as written.
    /// Changed check: `pair_recv_too_small_is_etrunc` asserts the receiver's
    /// `FI_ETRUNC` with its context, the sender's completion (success, or an error
    /// with its context), and that a receive and a send posted afterwards complete in
    /// error (`FI_ECANCELED`), the receive buffer untouched.
    pub const TRUNCATION_BREAKS_CONNECTION: Semantics = Semantics(4);

    /// A receive posted on an `FI_EP_MSG` endpoint cannot be taken back (an RC queue
    /// pair has no such operation; C's verbs provider answers `fi_cancel` with
    /// `FI_ENOSYS`); other endpoint types are checked as written. Changed check:
    /// `pair_cancel_recv` asserts `fi_cancel` fails with `FI_ENOSYS`, no completion
    /// follows it, and the receive stays posted: the next message lands in it, with
    /// its context.
    pub const NO_RECV_CANCEL: Semantics = Semantics(2);

    const NAMES: [(Semantics, &'static str); 3] = [
        (
            Semantics::ACCESS_ERROR_BREAKS_CONNECTION,
            "ACCESS_ERROR_BREAKS_CONNECTION",
        ),
        (
            Semantics::TRUNCATION_BREAKS_CONNECTION,
            "TRUNCATION_BREAKS_CONNECTION",
        ),
        (Semantics::NO_RECV_CANCEL, "NO_RECV_CANCEL"),
    ];

    /// Both sets.
    pub const fn union(self, other: Semantics) -> Semantics {
        Semantics(self.0 | other.0)
    }

    /// Whether every flag of `other` is in `self`.
    pub const fn contains(self, other: Semantics) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Semantics {
    type Output = Semantics;
    fn bitor(self, other: Semantics) -> Semantics {
        self.union(other)
    }
}

impl fmt::Debug for Semantics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Semantics::NAMES
            .iter()
            .filter(|(s, _)| self.contains(*s))
            .map(|(_, n)| *n)
            .collect();
        if names.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&names.join(" | "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Semantics;

    #[test]
    fn sets_combine_and_print_by_name() {
        let both = Semantics::ACCESS_ERROR_BREAKS_CONNECTION | Semantics::NO_RECV_CANCEL;
        assert!(both.contains(Semantics::NO_RECV_CANCEL));
        assert!(both.contains(Semantics::ACCESS_ERROR_BREAKS_CONNECTION));
        assert!(!both.contains(Semantics::TRUNCATION_BREAKS_CONNECTION));
        assert!(!Semantics::NO_RECV_CANCEL.contains(Semantics::ACCESS_ERROR_BREAKS_CONNECTION));
        assert!(Semantics::NONE.contains(Semantics::NONE));
        assert_eq!(
            format!("{both:?}"),
            "ACCESS_ERROR_BREAKS_CONNECTION | NO_RECV_CANCEL"
        );
        assert_eq!(format!("{:?}", Semantics::default()), "NONE");
    }
}
