//! The software device's packet format between contexts: a fixed 64-byte little-endian
//! header followed by the payload, declared in the kit's wire convention
//! ([`HdrView`], `ofi_kit::wire`), with the parsed header [`Hdr`] generated from the same
//! field list. Parsing never panics: a short or unknown packet is
//! `None` and the caller drops it. Public so that hostile-peer tests and tools can forge
//! packets; not a stable interface.

use crate::verbs::WcStatus;

/// Header length in bytes.
pub const HDR_LEN: usize = 64;
/// Most payload bytes one packet carries (messages are split into fragments).
pub const FRAG: usize = 32 * 1024;
/// The longest packet a context reads (longer ones are dropped): room for a bundle of
/// SRD datagrams ([`Kind::SrdBundle`], 15 of 8 KiB); other packets carry at most
/// [`FRAG`] bytes.
pub const MAX_PACKET: usize = HDR_LEN + 4 * FRAG + 256;

ofi_kit::wire_enum! {
    /// Packet kinds.
    pub enum Kind: u8 {
        /// First packet on a connection: the payload is the sender's 16-byte GID.
        Hello = 1,
        /// A request of an RC queue pair (fragment of a send/write, a read or an atomic).
        Req = 2,
        /// Positive acknowledgement of message `msn`.
        Ack = 3,
        /// Negative acknowledgement of message `msn` (`op` = [`Nak`] code).
        Nak = 4,
        /// Fragment of read response data.
        ReadResp = 5,
        /// Atomic response: the original value in `value`.
        AtomicResp = 6,
        /// A UD datagram.
        Ud = 7,
        /// An SRD datagram (`msn`: the sender's number for it; `value`: the Q_Key).
        Srd = 8,
        /// The SRD receiver took datagram `msn`.
        SrdAck = 9,
        /// The SRD receiver refused datagram `msn` (`op` = [`Nak`] code; `rnr_timer` with
        /// [`Nak::Rnr`]).
        SrdNak = 10,
        /// Several [`Kind::SrdAck`]s in one packet (what the receiver took in one read of
        /// its connection): the payload is their headers, [`HDR_LEN`] bytes each.
        SrdAcks = 11,
        /// Several [`Kind::Srd`] datagrams in one packet (posted in one batch to one
        /// context): the payload is each datagram's packet, header then `total` bytes.
        SrdBundle = 12,
    }
}

ofi_kit::wire_enum! {
    /// Request operations (the `op` byte of a [`Kind::Req`]).
    pub enum ReqOp: u8 {
        /// Send.
        Send = 1,
        /// Send with immediate data.
        SendImm = 2,
        /// RDMA write.
        Write = 3,
        /// RDMA write with immediate data.
        WriteImm = 4,
        /// RDMA read.
        Read = 5,
        /// Compare and swap.
        CmpSwap = 6,
        /// Fetch and add.
        FetchAdd = 7,
    }
}

ofi_kit::wire_enum! {
    /// Negative acknowledgement codes (the `op` byte of a [`Kind::Nak`]).
    pub enum Nak: u8 {
        /// Receiver not ready; `rnr_timer` holds the responder's timer code.
        Rnr = 1,
        /// Remote access error (key, bounds, access flags, protection domain).
        Access = 2,
        /// Invalid request (too long for the receive, misaligned atomic).
        InvReq = 3,
        /// No responder (queue pair absent, not ready, or in error).
        NoQp = 4,
        /// Remote operational error (the responder could not place the data).
        RemOp = 5,
    }
}

impl Nak {
    /// The completion status a requester reports for the operation the peer refused
    /// with code `op`: an RNR refusal only once its retries are spent (the caller
    /// retries first), a code this device does not send as a retry error.
    pub fn status_of(op: u8) -> WcStatus {
        match Nak::from_wire(op) {
            Some(Nak::Rnr) => WcStatus::RnrRetryExcErr,
            Some(Nak::Access) => WcStatus::RemAccessErr,
            Some(Nak::InvReq) => WcStatus::RemInvReqErr,
            Some(Nak::RemOp) => WcStatus::RemOpErr,
            Some(Nak::NoQp) | None => WcStatus::RetryExcErr,
        }
    }
}

/// Flag: first fragment of a message.
pub const F_FIRST: u8 = 1;
/// Flag: last fragment of a message.
pub const F_LAST: u8 = 2;
/// Flag: solicited event.
pub const F_SOLICITED: u8 = 4;
/// Flag: immediate data present (UD).
pub const F_IMM: u8 = 8;

ofi_kit::wire_header! {
    /// A checked view of a packet header (the layout of [`Hdr`]).
    pub struct HdrView;
    endian: little;
    len: HDR_LEN;
    /// Where each field of a packet header lies.
    pub mod field {
        /// [`Kind`].
        KIND: u8 = 0..1 => kind, set_kind;
        /// [`ReqOp`] or [`Nak`].
        OP: u8 = 1..2 => op, set_op;
        /// `F_*` flags.
        FLAGS: u8 = 2..3 => flags, set_flags;
        /// RNR timer code (NAK).
        RNR_TIMER: u8 = 3..4 => rnr_timer, set_rnr_timer;
        /// Destination queue pair.
        DST_QPN: u32 = 4..8 => dst_qpn, set_dst_qpn;
        /// Source queue pair.
        SRC_QPN: u32 = 8..12 => src_qpn, set_src_qpn;
        /// Message sequence number.
        MSN: u32 = 12..16 => msn, set_msn;
        /// Immediate data.
        IMM: u32 = 16..20 => imm, set_imm;
        /// Remote key.
        RKEY: u32 = 20..24 => rkey, set_rkey;
        /// Remote address.
        RADDR: u64 = 24..32 => raddr, set_raddr;
        /// Message length.
        TOTAL: u64 = 32..40 => total, set_total;
        /// Offset of this fragment's payload in the message.
        OFFSET: u64 = 40..48 => offset, set_offset;
        /// Compare value / add value / atomic original / UD qkey.
        VALUE: u64 = 48..56 => value, set_value;
        /// Swap value.
        SWAP: u64 = 56..64 => swap, set_swap;
    }
    /// A parsed header: every field of [`HdrView`], unchecked (the receiver checks
    /// what each kind uses).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    record: pub struct Hdr;
}

impl Hdr {
    /// The header's bytes.
    pub fn emit(&self) -> [u8; HDR_LEN] {
        let mut v = HdrView::zeroed();
        self.write(&mut v);
        v.into_inner()
    }

    /// A packet: the header's bytes, then `payload`.
    pub fn packet(&self, payload: &[u8]) -> Vec<u8> {
        let mut v = HdrView::with_payload(payload);
        self.write(&mut v);
        v.into_inner()
    }

    /// Parses a packet: the header and the payload, or `None` when too short.
    pub fn parse(pkt: &[u8]) -> Option<(Hdr, &[u8])> {
        let v = HdrView::new_checked(pkt).ok()?;
        Some((Hdr::read(&v), &pkt[HDR_LEN..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_short_packets_are_refused() {
        let h = Hdr {
            kind: Kind::Req as u8,
            op: ReqOp::Write as u8,
            flags: F_FIRST | F_LAST,
            rnr_timer: 3,
            dst_qpn: 7,
            src_qpn: 9,
            msn: 11,
            imm: 0xdead_beef,
            rkey: 0x55,
            raddr: 1 << 40,
            total: 100,
            offset: 32,
            value: u64::MAX,
            swap: 5,
        };
        let mut pkt = h.emit().to_vec();
        pkt.extend_from_slice(b"abc");
        let (back, payload) = Hdr::parse(&pkt).unwrap();
        assert_eq!(back, h);
        assert_eq!(payload, b"abc");
        assert!(Hdr::parse(&pkt[..HDR_LEN - 1]).is_none());
        assert!(Hdr::parse(&[]).is_none());
    }
}
