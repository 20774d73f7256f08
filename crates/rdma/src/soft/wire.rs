//! The software device's packet format between contexts: a fixed 64-byte little-endian
//! header followed by the payload. Parsing never panics: a short or unknown packet is
//! `None` and the caller drops it. Public so that hostile-peer tests and tools can forge
//! packets; not a stable interface.

/// Header length in bytes.
pub const HDR_LEN: usize = 64;
/// Most payload bytes one packet carries (messages are split into fragments).
pub const FRAG: usize = 32 * 1024;

/// Packet kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
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
}

/// Request operations (the `op` byte of a [`Kind::Req`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReqOp {
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

/// Negative acknowledgement codes (the `op` byte of a [`Kind::Nak`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Nak {
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

/// Flag: first fragment of a message.
pub const F_FIRST: u8 = 1;
/// Flag: last fragment of a message.
pub const F_LAST: u8 = 2;
/// Flag: solicited event.
pub const F_SOLICITED: u8 = 4;
/// Flag: immediate data present (UD).
pub const F_IMM: u8 = 8;

/// A parsed header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hdr {
    /// [`Kind`].
    pub kind: u8,
    /// [`ReqOp`] or [`Nak`].
    pub op: u8,
    /// `F_*` flags.
    pub flags: u8,
    /// RNR timer code (NAK).
    pub rnr_timer: u8,
    /// Destination queue pair.
    pub dst_qpn: u32,
    /// Source queue pair.
    pub src_qpn: u32,
    /// Message sequence number.
    pub msn: u32,
    /// Immediate data.
    pub imm: u32,
    /// Remote key.
    pub rkey: u32,
    /// Remote address.
    pub raddr: u64,
    /// Message length.
    pub total: u64,
    /// Offset of this fragment's payload in the message.
    pub offset: u64,
    /// Compare value / add value / atomic original / UD qkey.
    pub value: u64,
    /// Swap value.
    pub swap: u64,
}

impl Hdr {
    /// The header's bytes.
    pub fn emit(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0] = self.kind;
        b[1] = self.op;
        b[2] = self.flags;
        b[3] = self.rnr_timer;
        b[4..8].copy_from_slice(&self.dst_qpn.to_le_bytes());
        b[8..12].copy_from_slice(&self.src_qpn.to_le_bytes());
        b[12..16].copy_from_slice(&self.msn.to_le_bytes());
        b[16..20].copy_from_slice(&self.imm.to_le_bytes());
        b[20..24].copy_from_slice(&self.rkey.to_le_bytes());
        b[24..32].copy_from_slice(&self.raddr.to_le_bytes());
        b[32..40].copy_from_slice(&self.total.to_le_bytes());
        b[40..48].copy_from_slice(&self.offset.to_le_bytes());
        b[48..56].copy_from_slice(&self.value.to_le_bytes());
        b[56..64].copy_from_slice(&self.swap.to_le_bytes());
        b
    }

    /// A packet: the header's bytes, then `payload`.
    pub fn packet(&self, payload: &[u8]) -> Vec<u8> {
        let mut p = self.emit().to_vec();
        p.extend_from_slice(payload);
        p
    }

    /// Parses a packet: the header and the payload, or `None` when too short.
    pub fn parse(pkt: &[u8]) -> Option<(Hdr, &[u8])> {
        let b = pkt.get(..HDR_LEN)?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let h = Hdr {
            kind: b[0],
            op: b[1],
            flags: b[2],
            rnr_timer: b[3],
            dst_qpn: u32_at(4),
            src_qpn: u32_at(8),
            msn: u32_at(12),
            imm: u32_at(16),
            rkey: u32_at(20),
            raddr: u64_at(24),
            total: u64_at(32),
            offset: u64_at(40),
            value: u64_at(48),
            swap: u64_at(56),
        };
        Some((h, &pkt[HDR_LEN..]))
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
