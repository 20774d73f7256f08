//! Receiver-not-ready backoff, per peer.
//!
//! When the transport reports that a peer refused a packet (no receive buffer, or its
//! protocol could not take the packet yet), the sender stops sending to that peer for a
//! while, then sends the refused packet again. The wait doubles with each refusal in a
//! row, up to a cap, and starts again from the beginning once a packet to the peer is
//! accepted. The parameters are C efa's: `FI_EFA_RNR_BACKOFF_INITIAL_WAIT_TIME` (µs; 0
//! picks a random first wait in [`RANDOM_INITIAL_US`]) and
//! `FI_EFA_RNR_BACKOFF_WAIT_TIME_CAP` (µs).
//!
//! Nothing here panics; arithmetic saturates.

use std::ops::Range;

use super::Nanos;

/// Range of the random first wait (µs) when the configured initial wait is 0.
pub const RANDOM_INITIAL_US: Range<u64> = 40..120;

/// A peer's backoff state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The current wait, µs (0: not backing off).
    wait_us: u64,
    /// Nothing is sent to the peer before this time.
    until: Nanos,
    /// Refusals in a row.
    pub refusals: u32,
}

impl Backoff {
    /// A refusal at `now`: wait longer (the first wait is `initial_us`, or `random_us`
    /// when that is 0), at most `cap_us`.
    pub fn on_rnr(&mut self, now: Nanos, initial_us: u64, cap_us: u64, random_us: u64) {
        let first = if initial_us == 0 {
            random_us
        } else {
            initial_us
        };
        self.wait_us = if self.wait_us == 0 {
            first
        } else {
            self.wait_us.saturating_mul(2)
        }
        .min(cap_us.max(1));
        self.until = now.saturating_add(self.wait_us.saturating_mul(1_000));
        self.refusals = self.refusals.saturating_add(1);
    }

    /// A packet to the peer was accepted: the next refusal starts from the beginning.
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }

    /// Whether sending must wait at `now`.
    pub fn blocks(&self, now: Nanos) -> bool {
        now < self.until
    }

    /// When sending may start again (`None`: not backing off).
    pub fn until(&self) -> Option<Nanos> {
        (self.wait_us > 0).then_some(self.until)
    }

    /// The current wait in µs.
    pub fn wait_us(&self) -> u64 {
        self.wait_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_reset_on_success() {
        let mut b = Backoff::default();
        assert!(!b.blocks(0));
        b.on_rnr(1_000, 10, 50, 77);
        assert_eq!(b.wait_us(), 10);
        assert!(b.blocks(10_999) && !b.blocks(11_000));
        b.on_rnr(11_000, 10, 50, 77);
        assert_eq!(b.wait_us(), 20);
        b.on_rnr(0, 10, 50, 77);
        b.on_rnr(0, 10, 50, 77);
        assert_eq!(b.wait_us(), 50, "capped");
        assert_eq!(b.refusals, 4);
        b.reset();
        assert_eq!(b.until(), None);
        b.on_rnr(0, 0, 1_000, 77);
        assert_eq!(
            b.wait_us(),
            77,
            "random first wait when the initial wait is 0"
        );
    }
}
