//! Credit flow control of one connection, both directions: the credits this side may
//! still spend towards the peer, and the peer's credited messages held here.
//!
//! Shared by the engine ([`super::Engine`]) and the endpoint ([`crate::ep`]): both count
//! credits with this one type, so the rules below hold in the shipped code and on the
//! simulated network alike.
//!
//! # Invariants
//!
//! - A message packet (eager, first segment, RTS) is sent only after [`Flow::take`]
//!   returned true; a packet that was not sent after all gives its credit back with
//!   [`Flow::untake`].
//! - `held` counts the peer's credited messages whose credit has not been handed back
//!   (consumed or not). A peer that keeps to its grant never has more than the grant
//!   held here, so [`Flow::arrive`] refusing past it catches exactly the peers that
//!   ignore flow control.
//! - Credits handed back ([`Flow::piggyback`]) leave `owed` and `held` together; a packet
//!   that carried them and was not sent restores both ([`Flow::unpiggyback`]).
//!
//! Nothing here panics; counts saturate.

use ofi_core::Errno;

/// The credit state of one connection (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Credits this side may still spend towards the peer.
    credits: u32,
    /// Credits owed to the peer: its messages consumed here, not yet handed back.
    owed: u32,
    /// The peer's credited messages whose credit has not been handed back yet.
    held: u32,
}

impl Flow {
    /// A new connection: the peer granted `peer_grant` credits.
    pub fn new(peer_grant: u32) -> Flow {
        Flow {
            credits: peer_grant,
            owed: 0,
            held: 0,
        }
    }

    /// Credits this side may still spend.
    pub fn credits(&self) -> u32 {
        self.credits
    }

    /// Credits owed to the peer.
    pub fn owed(&self) -> u32 {
        self.owed
    }

    /// The peer's credited messages held here (credit not handed back).
    pub fn held(&self) -> u32 {
        self.held
    }

    /// A new connection came up with the peer's grant of `peer_grant` credits to spend;
    /// what is owed to the peer and held from it stays (counted per peer, not per
    /// connection: a second connection of the same peer taking over does not refill it).
    pub fn set_credits(&mut self, peer_grant: u32) {
        self.credits = peer_grant;
    }

    /// Spend a credit for a message packet; false without one.
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.credits == 0 {
            return false;
        }
        self.credits -= 1;
        true
    }

    /// A message packet whose credit was taken was not sent.
    #[inline]
    pub fn untake(&mut self) {
        self.credits = self.credits.saturating_add(1);
    }

    /// The peer handed back `n` credits (a packet's credits field).
    #[inline]
    pub fn returned(&mut self, n: u16) {
        self.credits = self.credits.saturating_add(u32::from(n));
    }

    /// The credits owed to the peer, at most what a header carries, handed back on the
    /// packet about to be sent.
    #[inline]
    pub fn piggyback(&mut self) -> u16 {
        let give = self.owed.min(u32::from(u16::MAX));
        self.owed -= give;
        self.held = self.held.saturating_sub(give);
        give as u16
    }

    /// The packet that carried `give` credits ([`Flow::piggyback`]) was not sent.
    #[inline]
    pub fn unpiggyback(&mut self, give: u16) {
        self.owed = self.owed.saturating_add(u32::from(give));
        self.held = self.held.saturating_add(u32::from(give));
    }

    /// A credited message of the peer arrived; this side granted `grant` credits.
    ///
    /// # Errors
    /// `FI_EPROTO` if the peer already holds the whole grant here (it ignores flow
    /// control; nothing is counted).
    #[inline]
    pub fn arrive(&mut self, grant: u32) -> Result<(), Errno> {
        if self.held >= grant {
            return Err(Errno::EPROTO);
        }
        self.held += 1;
        Ok(())
    }

    /// A message of the peer was consumed here: its credit is owed back.
    #[inline]
    pub fn consumed(&mut self) {
        self.owed = self.owed.saturating_add(1);
    }

    /// Whether enough credits are owed that a credit-only packet should carry them
    /// (half of `grant`, at least one), rather than waiting for a packet to piggyback on.
    #[inline]
    pub fn credit_due(&self, grant: u32) -> bool {
        self.owed >= (grant / 2).max(1)
    }
}

#[cfg(test)]
mod tests;
