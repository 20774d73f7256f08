//! The peers an endpoint knows, and who sent each receive.
//!
//! The engine names a peer by a [`PeerAddr`], an index into this table: the peer's
//! address (GID, queue pair number, Q_Key) and the address handle sends to it use.
//! A receive completion names its sender in one of three ways:
//!
//! - a GRH before the datagram holding the sender's GID (UD receives, and SRD
//!   receives on the software device): [`WcFlags::GRH`];
//! - the GID in the completion itself (an EFA extended completion queue, when the
//!   receiver has no address handle for the sender): [`WorkCompletion::sgid`];
//! - else, on EFA, the number of the receiver's address handle for the sender, in
//!   `slid`: mapped back to the GID through the handles the domain's endpoints made
//!   ([`AhNumbers`], shared by them: their handles are of one protection domain;
//!   each endpoint records the number of every handle it makes).
//!
//! With the completion's source queue pair that is the peer. A receive whose sender
//! cannot be named (no GRH, no GID, an address handle number the domain's endpoints
//! did not make) or a new sender beyond the table's capacity is dropped and counted
//! ([`PeerTable::dropped`]), never a panic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ofi_rdma::{AddressHandle, Gid, WcFlags, WorkCompletion};

use crate::av::{EfaAddr, QKEY};
use crate::proto::PeerAddr;

/// One engine peer: its address, and the address handle sends to it use (made on the
/// first send).
pub(super) struct PeerSlot {
    pub(super) addr: EfaAddr,
    pub(super) ah: Option<AddressHandle>,
}

/// The GID each address handle number leads to, for every handle the endpoints of one
/// domain made (a handle made later under a number replaces what it led to before:
/// the device reuses the numbers of handles destroyed).
#[derive(Debug, Default)]
pub(crate) struct AhNumbers(Mutex<HashMap<u16, Gid>>);

impl AhNumbers {
    /// Records that the address handle numbered `ahn` leads to `gid`.
    pub(crate) fn note(&self, ahn: u16, gid: Gid) {
        ofi_kit::wait::lock(&self.0).insert(ahn, gid);
    }

    fn gid(&self, ahn: u16) -> Option<Gid> {
        ofi_kit::wait::lock(&self.0).get(&ahn).copied()
    }
}

/// The engine's peers by index and by address, and the domain's address handle
/// numbers.
pub(super) struct PeerTable {
    slots: Vec<PeerSlot>,
    by_addr: HashMap<(Gid, u32), PeerAddr>,
    ah_numbers: Arc<AhNumbers>,
    max: usize,
    dropped: u64,
}

impl PeerTable {
    /// An empty table of at most `max` peers, naming senders by the domain's
    /// `ah_numbers` where a completion gives a handle's number.
    pub(super) fn new(max: usize, ah_numbers: Arc<AhNumbers>) -> PeerTable {
        PeerTable {
            slots: Vec::new(),
            by_addr: HashMap::new(),
            ah_numbers,
            max,
            dropped: 0,
        }
    }

    /// Peer `p`'s slot.
    pub(super) fn get(&self, p: usize) -> Option<&PeerSlot> {
        self.slots.get(p)
    }

    /// Peer `p`'s slot, to change.
    pub(super) fn get_mut(&mut self, p: usize) -> Option<&mut PeerSlot> {
        self.slots.get_mut(p)
    }

    /// Every peer, in index order.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, PeerSlot> {
        self.slots.iter()
    }

    /// The engine peer of `addr` (made on first use); `None` once the table is full.
    pub(super) fn peer_of(&mut self, addr: EfaAddr) -> Option<PeerAddr> {
        if let Some(&p) = self.by_addr.get(&(addr.gid, addr.qpn)) {
            return Some(p);
        }
        if self.slots.len() >= self.max {
            return None;
        }
        let p = self.slots.len() as PeerAddr;
        self.slots.push(PeerSlot { addr, ah: None });
        self.by_addr.insert((addr.gid, addr.qpn), p);
        Some(p)
    }

    /// The address of the sender of the successful receive `wc`, or `None` when the
    /// completion does not name it. `grh_gid` reads the GID out of the GRH (called only
    /// when the completion says there is one).
    pub(super) fn sender_addr(
        &self,
        wc: &WorkCompletion,
        grh_gid: impl FnOnce() -> Gid,
    ) -> Option<EfaAddr> {
        let gid = if wc.wc_flags.contains(WcFlags::GRH) {
            grh_gid()
        } else if let Some(gid) = wc.sgid {
            gid
        } else {
            self.ah_numbers.gid(wc.slid)?
        };
        Some(EfaAddr {
            gid,
            qpn: wc.src_qp,
            qkey: QKEY,
        })
    }

    /// The engine peer that sent the successful receive `wc` (made on first use);
    /// `None`, counted in [`PeerTable::dropped`], when the completion does not name the
    /// sender or the table is full.
    pub(super) fn sender(
        &mut self,
        wc: &WorkCompletion,
        grh_gid: impl FnOnce() -> Gid,
    ) -> Option<PeerAddr> {
        let peer = self
            .sender_addr(wc, grh_gid)
            .and_then(|addr| self.peer_of(addr));
        if peer.is_none() {
            self.dropped += 1;
        }
        peer
    }

    /// Counts a receive dropped for want of a sender (see [`PeerTable::sender`]).
    pub(super) fn count_dropped(&mut self) {
        self.dropped += 1;
    }

    /// Receives dropped because their sender could not be named or the table was full.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use ofi_rdma::{WcOpcode, WcStatus};

    use super::*;

    fn gid(b: u8) -> Gid {
        Gid([b; 16])
    }

    /// A table of at most `max` peers, with address handle numbers of its own.
    fn table(max: usize) -> PeerTable {
        PeerTable::new(max, Arc::default())
    }

    /// Records, for `t`'s domain, that address handle number `ahn` leads to `gid`.
    fn note_ahn(t: &PeerTable, ahn: u16, gid: Gid) {
        t.ah_numbers.note(ahn, gid);
    }

    /// A successful receive from queue pair `src_qp`, naming the sender by nothing yet.
    fn recv(src_qp: u32) -> WorkCompletion {
        let mut wc = WorkCompletion::new(0, WcStatus::Success, WcOpcode::Recv, 1);
        wc.src_qp = src_qp;
        wc
    }

    /// A receive from `src_qp` whose completion carries the sender's GID.
    fn with_sgid(src_qp: u32, sgid: Gid) -> WorkCompletion {
        WorkCompletion {
            sgid: Some(sgid),
            ..recv(src_qp)
        }
    }

    /// A receive from `src_qp` naming the sender by address handle number `ahn`.
    fn with_ahn(src_qp: u32, ahn: u16) -> WorkCompletion {
        WorkCompletion {
            slid: ahn,
            ..recv(src_qp)
        }
    }

    fn no_grh() -> Gid {
        panic!("the GRH is read only when the completion has one")
    }

    /// The (GID, queue pair number) of peer `p`.
    fn addr_of(t: &PeerTable, p: PeerAddr) -> (Gid, u32) {
        let a = t.get(p as usize).unwrap().addr;
        (a.gid, a.qpn)
    }

    #[test]
    fn a_grh_names_the_sender() {
        let mut t = table(8);
        let wc = WorkCompletion {
            wc_flags: WcFlags::GRH,
            ..recv(5)
        };
        let p = t.sender(&wc, || gid(1)).unwrap();
        assert_eq!(addr_of(&t, p), (gid(1), 5));
        // The same sender again: the same peer.
        assert_eq!(t.sender(&wc, || gid(1)), Some(p));
        assert_eq!(t.dropped(), 0);
    }

    #[test]
    fn the_completion_s_gid_names_the_sender_without_a_grh() {
        let mut t = table(8);
        let p = t.sender(&with_sgid(6, gid(2)), no_grh).unwrap();
        assert_eq!(addr_of(&t, p), (gid(2), 6));
        // A sender known from a send before (same GID and queue pair): that peer.
        let known = t
            .peer_of(EfaAddr {
                gid: gid(3),
                qpn: 7,
                qkey: QKEY,
            })
            .unwrap();
        assert_eq!(t.sender(&with_sgid(7, gid(3)), no_grh), Some(known));
    }

    #[test]
    fn an_address_handle_number_names_a_sender_this_endpoint_has_a_handle_for() {
        let mut t = table(8);
        note_ahn(&t, 42, gid(4));
        let p = t.sender(&with_ahn(9, 42), no_grh).unwrap();
        assert_eq!(addr_of(&t, p), (gid(4), 9));
        // The same GID from another queue pair is another peer.
        let other = t.sender(&with_ahn(10, 42), no_grh).unwrap();
        assert_ne!(other, p);
        assert_eq!(addr_of(&t, other), (gid(4), 10));
    }

    #[test]
    fn an_address_handle_number_another_endpoint_of_the_domain_made_names_the_sender() {
        let domain = Arc::new(AhNumbers::default());
        let mut t = PeerTable::new(8, domain.clone());
        // Another endpoint of the domain made the handle.
        domain.note(7, gid(5));
        let p = t.sender(&with_ahn(3, 7), no_grh).unwrap();
        assert_eq!(addr_of(&t, p), (gid(5), 3));
        // A number made again leads to its new GID.
        domain.note(7, gid(6));
        let q = t.sender(&with_ahn(3, 7), no_grh).unwrap();
        assert_eq!(addr_of(&t, q), (gid(6), 3));
    }

    #[test]
    fn an_unknown_sender_is_dropped_and_counted() {
        let mut t = table(8);
        note_ahn(&t, 1, gid(1));
        // An address handle number this endpoint never made; then nothing at all.
        assert_eq!(t.sender(&with_ahn(3, 2), no_grh), None);
        assert_eq!(t.sender(&recv(3), no_grh), None);
        assert_eq!(t.dropped(), 2);
        assert_eq!(t.iter().count(), 0, "no peer made for an unknown sender");
    }

    #[test]
    fn a_new_sender_beyond_the_table_is_dropped_and_counted() {
        let mut t = table(2);
        for qpn in 0..4 {
            let got = t.sender(&with_sgid(qpn, gid(9)), no_grh);
            assert_eq!(got.is_some(), qpn < 2, "sender {qpn}");
        }
        assert_eq!(t.dropped(), 2);
        // Known senders still map.
        assert_eq!(t.sender(&with_sgid(1, gid(9)), no_grh), Some(1));
    }
}
