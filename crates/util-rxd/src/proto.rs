//! The rxd wire format: every datagram rxd sends is one packet, a fixed header
//! ([`HDR_LEN`] bytes, little endian) followed by a body.
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 1 | magic [`MAGIC`] |
//! | 1 | 1 | version [`VERSION`] |
//! | 2 | 1 | type ([`PktType`]: 1 `CONNECT`, 2 `ACCEPT`, 3 `DATA`, 4 `ACK`, 5 `CHALLENGE`) |
//! | 3 | 1 | flags ([`F_FIRST`], [`F_LAST`], [`F_ACK`], [`F_REQ`]) |
//! | 4 | 4 | `dst_id`: the receiver's id for this connection (0 in `CONNECT`) |
//! | 8 | 4 | `src_id`: the sender's id for this connection |
//! | 12 | 4 | `src_sess`: the sender's session of this connection |
//! | 16 | 4 | `dst_sess`: the receiver's session as the sender knows it (0 in `CONNECT`) |
//! | 20 | 4 | `seq`: sequence number (`DATA` only) |
//! | 24 | 4 | `ack`: cumulative acknowledgement, the next sequence number expected (with [`F_ACK`]) |
//! | 28 | 8 | `sack`: bit `i` set when `ack + 1 + i` was received (with [`F_ACK`]) |
//!
//! Bodies: `CONNECT` carries a [`COOKIE_LEN`]-byte cookie (0 when it has none yet);
//! `CHALLENGE` (the answer to a `CONNECT` without a valid cookie: `dst_id` and
//! `dst_sess` are the `CONNECT`'s `src_id` and `src_sess`) carries the cookie to echo;
//! `ACCEPT` and `ACK` carry nothing; `DATA` carries a segment of a message, and the
//! first segment ([`F_FIRST`]) starts with the message's total length (4 bytes) before
//! its data. No packet carries an address: a peer is the datagram's source.
//!
//! Version 2 (2026-11-27) added `CHALLENGE` and the cookie; version 1 carried the
//! sender's address in `CONNECT` and was answered at once (see docs/providers/rxd.md).
//!
//! Sequence numbers are 32-bit and compared wrap-safe ([`seq_lt`]).
//!
//! Inside the reliable stream each message starts with an 18-byte header
//! ([`crate::MSG_HDR`]: operation [`OP_MSG`] ... [`OP_RESP`], flags ([`H_DATA`]), tag or
//! request id, remote CQ data or response status: [`op_hdr`], [`parse_msg_hdr`]); RMA
//! and atomic requests add a [`RMA_HDR`]-byte header ([`RmaReq`]).
//!
//! Nothing here panics: parsers return `None` on anything malformed.

#![forbid(unsafe_code)]

use ofi_core::enums::AtomicKind;

use crate::MSG_HDR;

/// First byte of every packet.
pub const MAGIC: u8 = 0xd7;
/// Wire version (2: the stateless cookie handshake).
pub const VERSION: u8 = 2;
/// Header length.
pub const HDR_LEN: usize = 36;
/// Length of the first segment's message-length prefix.
pub const FIRST_LEN: usize = 4;
/// Bytes of the cookie a `CONNECT` and a `CHALLENGE` carry.
pub const COOKIE_LEN: usize = 8;

/// The cookie in the body of a `CONNECT` or `CHALLENGE` (`None` if the body is not
/// exactly [`COOKIE_LEN`] bytes).
pub fn cookie_of(body: &[u8]) -> Option<u64> {
    let b: [u8; COOKIE_LEN] = body.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// First segment of a message.
pub const F_FIRST: u8 = 1;
/// Last segment of a message.
pub const F_LAST: u8 = 2;
/// `ack` and `sack` are valid.
pub const F_ACK: u8 = 4;
/// The sender's window is full: acknowledge at once.
pub const F_REQ: u8 = 8;
/// On an `ACK`: receiver not ready. The packet `ack` (the next one expected, which
/// starts a message) was refused for want of room; the receiver is alive and the
/// sender should offer it again later, without counting the wait against the peer.
pub const F_RNR: u8 = 16;

/// Packet types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PktType {
    /// Open a connection (body: the cookie, 0 for none).
    Connect,
    /// Accept a connection.
    Accept,
    /// A message segment.
    Data,
    /// A standalone acknowledgement.
    Ack,
    /// Prove you receive at your address: echo this cookie in a new `CONNECT`.
    Challenge,
}

impl PktType {
    fn to_u8(self) -> u8 {
        match self {
            PktType::Connect => 1,
            PktType::Accept => 2,
            PktType::Data => 3,
            PktType::Ack => 4,
            PktType::Challenge => 5,
        }
    }

    fn from_u8(v: u8) -> Option<PktType> {
        Some(match v {
            1 => PktType::Connect,
            2 => PktType::Accept,
            3 => PktType::Data,
            4 => PktType::Ack,
            5 => PktType::Challenge,
            _ => return None,
        })
    }
}

/// A packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// Packet type.
    pub ty: PktType,
    /// `F_*` flags.
    pub flags: u8,
    /// Receiver's connection id.
    pub dst_id: u32,
    /// Sender's connection id.
    pub src_id: u32,
    /// Sender's session.
    pub src_sess: u32,
    /// Receiver's session.
    pub dst_sess: u32,
    /// Sequence number.
    pub seq: u32,
    /// Cumulative acknowledgement.
    pub ack: u32,
    /// Selective acknowledgement bitmap.
    pub sack: u64,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(a)
}

impl Hdr {
    /// A header of type `ty` with everything else zero.
    pub fn new(ty: PktType) -> Hdr {
        Hdr {
            ty,
            flags: 0,
            dst_id: 0,
            src_id: 0,
            src_sess: 0,
            dst_sess: 0,
            seq: 0,
            ack: 0,
            sack: 0,
        }
    }

    /// Parse the header at the start of `b` (`None` if short, of another magic or
    /// version, or of an unknown type).
    pub fn parse(b: &[u8]) -> Option<Hdr> {
        if b.len() < HDR_LEN || b[0] != MAGIC || b[1] != VERSION {
            return None;
        }
        let ty = PktType::from_u8(b[2])?;
        let flags = b[3];
        if flags & !(F_FIRST | F_LAST | F_ACK | F_REQ | F_RNR) != 0 {
            return None;
        }
        let mut s = [0u8; 8];
        s.copy_from_slice(&b[28..36]);
        Some(Hdr {
            ty,
            flags,
            dst_id: u32_at(b, 4),
            src_id: u32_at(b, 8),
            src_sess: u32_at(b, 12),
            dst_sess: u32_at(b, 16),
            seq: u32_at(b, 20),
            ack: u32_at(b, 24),
            sack: u64::from_le_bytes(s),
        })
    }

    /// Write the header into the first [`HDR_LEN`] bytes of `b` (which must be that
    /// long; shorter buffers are left alone).
    pub fn write(&self, b: &mut [u8]) {
        let Some(b) = b.get_mut(..HDR_LEN) else {
            return;
        };
        b[0] = MAGIC;
        b[1] = VERSION;
        b[2] = self.ty.to_u8();
        b[3] = self.flags;
        b[4..8].copy_from_slice(&self.dst_id.to_le_bytes());
        b[8..12].copy_from_slice(&self.src_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.src_sess.to_le_bytes());
        b[16..20].copy_from_slice(&self.dst_sess.to_le_bytes());
        b[20..24].copy_from_slice(&self.seq.to_le_bytes());
        self.write_ack(b, self.flags & F_ACK != 0, self.ack, self.sack);
    }

    /// Rewrite only the acknowledgement fields (and the [`F_ACK`] flag) of a written
    /// header: a retransmitted packet carries the current acknowledgement.
    pub fn write_ack(&self, b: &mut [u8], on: bool, ack: u32, sack: u64) {
        let Some(b) = b.get_mut(..HDR_LEN) else {
            return;
        };
        if on {
            b[3] |= F_ACK;
        } else {
            b[3] &= !F_ACK;
        }
        b[24..28].copy_from_slice(&ack.to_le_bytes());
        b[28..36].copy_from_slice(&sack.to_le_bytes());
    }

    /// Rewrite the connection fields of a written header (packets queued before the
    /// connection was up get the peer's ids when they go).
    pub fn patch_ids(b: &mut [u8], dst_id: u32, src_id: u32, src_sess: u32, dst_sess: u32) {
        let Some(b) = b.get_mut(..HDR_LEN) else {
            return;
        };
        b[4..8].copy_from_slice(&dst_id.to_le_bytes());
        b[8..12].copy_from_slice(&src_id.to_le_bytes());
        b[12..16].copy_from_slice(&src_sess.to_le_bytes());
        b[16..20].copy_from_slice(&dst_sess.to_le_bytes());
    }

    /// The header as bytes.
    pub fn bytes(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        self.write(&mut b);
        b
    }
}

// ---------------------------------------------------------------------------------------
// Messages: what the reliable stream carries. Each message starts with a header of
// `MSG_HDR` bytes (operation, flags, tag or request id, remote CQ data or status); RMA and
// atomic requests add an `RMA_HDR`-byte header.

/// Message header flag: remote CQ data present.
pub const H_DATA: u8 = 1;
/// Message operation: untagged.
pub const OP_MSG: u8 = 0;
/// Message operation: tagged.
pub const OP_TAGGED: u8 = 1;
/// RMA write request (tag field: request id).
pub const OP_WRITE: u8 = 2;
/// RMA read request.
pub const OP_READ: u8 = 3;
/// Atomic request.
pub const OP_ATOMIC: u8 = 4;
/// Response to a request (tag field: request id; data field: status).
pub const OP_RESP: u8 = 5;
/// Bytes of the RMA / atomic request header after [`MSG_HDR`]: key, remote address,
/// length (bytes, or elements for atomics), datatype, operation, kind, pad.
pub const RMA_HDR: usize = 28;

/// rxd's header of one message: operation, flags, tag, remote CQ data.
pub fn msg_hdr(tagged: bool, tag: u64, data: Option<u64>) -> [u8; MSG_HDR] {
    op_hdr(if tagged { OP_TAGGED } else { OP_MSG }, tag, data)
}

/// The header of a message of operation `op`.
pub fn op_hdr(op: u8, tag: u64, data: Option<u64>) -> [u8; MSG_HDR] {
    let mut h = [0u8; MSG_HDR];
    h[0] = op;
    h[1] = if data.is_some() { H_DATA } else { 0 };
    h[2..10].copy_from_slice(&tag.to_le_bytes());
    h[10..18].copy_from_slice(&data.unwrap_or(0).to_le_bytes());
    h
}

/// Parse a message header: (operation, tag, data); `None` if malformed.
pub fn parse_msg_hdr(m: &[u8]) -> Option<(u8, u64, Option<u64>)> {
    if m.len() < MSG_HDR || m[0] > OP_RESP || m[1] & !H_DATA != 0 {
        return None;
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&m[2..10]);
    let mut d = [0u8; 8];
    d.copy_from_slice(&m[10..18]);
    let data = (m[1] & H_DATA != 0).then_some(u64::from_le_bytes(d));
    Some((m[0], u64::from_le_bytes(t), data))
}

/// An RMA or atomic request's header (after the message header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmaReq {
    /// Memory key.
    pub key: u64,
    /// Remote address (or offset).
    pub addr: u64,
    /// Length in bytes (RMA) or elements (atomics).
    pub len: u64,
    /// Datatype (`fi_datatype`, atomics).
    pub dt: u8,
    /// Operation (`fi_op`, atomics).
    pub op: u8,
    /// Atomic kind: 0 base, 1 fetch, 2 compare.
    pub kind: u8,
}

impl RmaReq {
    /// The header as bytes.
    pub fn bytes(&self) -> [u8; RMA_HDR] {
        let mut b = [0u8; RMA_HDR];
        b[..8].copy_from_slice(&self.key.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24] = self.dt;
        b[25] = self.op;
        b[26] = self.kind;
        b
    }

    /// Parse the header at the start of `b` (`None` if short).
    pub fn parse(b: &[u8]) -> Option<RmaReq> {
        let b = b.get(..RMA_HDR)?;
        let u = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        Some(RmaReq {
            key: u(0),
            addr: u(8),
            len: u(16),
            dt: b[24],
            op: b[25],
            kind: b[26],
        })
    }
}

/// The wire code of an atomic kind.
pub fn kind_code(k: AtomicKind) -> u8 {
    match k {
        AtomicKind::Base => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

/// The atomic kind of a wire code.
pub fn kind_of(c: u8) -> Option<AtomicKind> {
    Some(match c {
        0 => AtomicKind::Base,
        1 => AtomicKind::Fetch,
        2 => AtomicKind::Compare,
        _ => return None,
    })
}

/// Set the acknowledgement fields of the packet in `b` (see [`Hdr::write_ack`]).
pub fn set_ack(b: &mut [u8], on: bool, ack: u32, sack: u64) {
    Hdr::new(PktType::Ack).write_ack(b, on, ack, sack);
}

/// The total message length at the start of a first segment's body.
pub fn first_len(body: &[u8]) -> Option<u32> {
    if body.len() < FIRST_LEN {
        return None;
    }
    Some(u32_at(body, 0))
}

/// `a < b` in sequence space (wrap-safe: within 2^31 of each other).
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a <= b` in sequence space.
pub fn seq_le(a: u32, b: u32) -> bool {
    a == b || seq_lt(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Hdr {
            ty: PktType::Data,
            flags: F_FIRST | F_ACK,
            dst_id: 7,
            src_id: 9,
            src_sess: 0xdead_beef,
            dst_sess: 3,
            seq: u32::MAX,
            ack: 12,
            sack: 0x8000_0000_0000_0001,
        };
        assert_eq!(Hdr::parse(&h.bytes()), Some(h));
        let mut b = h.bytes();
        set_ack(&mut b, false, 1, 2);
        let g = Hdr::parse(&b).unwrap();
        assert_eq!(g.flags, F_FIRST);
        assert_eq!((g.ack, g.sack), (1, 2));
    }

    #[test]
    fn bad_headers_are_refused() {
        let h = Hdr::new(PktType::Ack).bytes();
        assert!(Hdr::parse(&h[..HDR_LEN - 1]).is_none());
        let mut b = h;
        b[0] = 0;
        assert!(Hdr::parse(&b).is_none());
        let mut b = h;
        b[1] = 9;
        assert!(Hdr::parse(&b).is_none());
        let mut b = h;
        b[2] = 77;
        assert!(Hdr::parse(&b).is_none());
        let mut b = h;
        b[3] = 0x80;
        assert!(Hdr::parse(&b).is_none());
        assert!(first_len(&[1, 2]).is_none());
        assert_eq!(first_len(&[1, 0, 0, 0, 9]), Some(1));
    }

    #[test]
    fn message_headers_round_trip() {
        let h = msg_hdr(true, 0x1234, Some(9));
        assert_eq!(parse_msg_hdr(&h), Some((OP_TAGGED, 0x1234, Some(9))));
        let h = msg_hdr(false, 0, None);
        assert_eq!(parse_msg_hdr(&h), Some((OP_MSG, 0, None)));
        let r = RmaReq {
            key: 1,
            addr: 2,
            len: 3,
            dt: 4,
            op: 5,
            kind: 2,
        };
        assert_eq!(RmaReq::parse(&r.bytes()), Some(r));
        assert_eq!(RmaReq::parse(&r.bytes()[..RMA_HDR - 1]), None);
        for k in [AtomicKind::Base, AtomicKind::Fetch, AtomicKind::Compare] {
            assert_eq!(kind_of(kind_code(k)), Some(k));
        }
        assert_eq!(kind_of(3), None);
        assert_eq!(parse_msg_hdr(&h[..MSG_HDR - 1]), None);
        let mut b = h;
        b[0] = 7;
        assert_eq!(parse_msg_hdr(&b), None);
        let mut b = h;
        b[1] = 0x10;
        assert_eq!(parse_msg_hdr(&b), None);
    }

    #[test]
    fn sequence_comparison_wraps() {
        assert!(seq_lt(1, 2));
        assert!(!seq_lt(2, 2));
        assert!(seq_le(2, 2));
        assert!(seq_lt(u32::MAX, 0));
        assert!(seq_lt(u32::MAX - 5, 3));
        assert!(!seq_lt(3, u32::MAX - 5));
    }
}
