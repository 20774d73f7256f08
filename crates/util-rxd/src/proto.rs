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
//! Every header is declared once with kit's [`wire_header!`] (named field ranges and a
//! checked view: [`Packet`] and [`field`], [`MsgPacket`] and [`msg_field`],
//! [`RmaPacket`] and [`rma_field`]); [`Hdr`], [`MsgHdr`] and [`RmaReq`] are their parsed
//! representations, with `parse` (from a view: every check) and `emit`.
//!
//! Nothing here panics: parsers return a [`WireError`] on anything malformed (the
//! engine drops such a packet and counts it).

#![forbid(unsafe_code)]

use ofi_core::enums::AtomicKind;
use ofi_kit::wire::WireError;
use ofi_kit::{wire_enum, wire_header};

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

/// The cookie in the body of a `CONNECT` or `CHALLENGE` (an error if the body is not
/// exactly [`COOKIE_LEN`] bytes).
pub fn cookie_of(body: &[u8]) -> Result<u64, WireError> {
    let b: [u8; COOKIE_LEN] = body.try_into().map_err(|_| {
        if body.len() < COOKIE_LEN {
            WireError::Truncated {
                need: COOKIE_LEN,
                have: body.len(),
            }
        } else {
            WireError::Malformed("bytes after the cookie")
        }
    })?;
    Ok(u64::from_le_bytes(b))
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
/// Every packet flag version 2 defines.
pub const KNOWN_FLAGS: u8 = F_FIRST | F_LAST | F_ACK | F_REQ | F_RNR;

wire_header! {
    /// A checked view of a packet: the [`HDR_LEN`]-byte header, then the body.
    pub struct Packet;
    endian: little;
    len: HDR_LEN;
    /// Where each packet-header field lies (see the table above).
    pub mod field {
        /// [`MAGIC`].
        MAGIC: u8 = 0..1 => magic, set_magic;
        /// [`VERSION`].
        VERSION: u8 = 1..2 => version, set_version;
        /// The packet type's code ([`PktType`]).
        TYPE: u8 = 2..3 => ty, set_ty;
        /// `F_*` flags ([`KNOWN_FLAGS`]).
        FLAGS: u8 = 3..4 => flags, set_flags;
        /// The receiver's connection id.
        DST_ID: u32 = 4..8 => dst_id, set_dst_id;
        /// The sender's connection id.
        SRC_ID: u32 = 8..12 => src_id, set_src_id;
        /// The sender's session.
        SRC_SESS: u32 = 12..16 => src_sess, set_src_sess;
        /// The receiver's session as the sender knows it.
        DST_SESS: u32 = 16..20 => dst_sess, set_dst_sess;
        /// Sequence number.
        SEQ: u32 = 20..24 => seq, set_seq;
        /// Cumulative acknowledgement.
        ACK: u32 = 24..28 => ack, set_ack;
        /// Selective acknowledgement bitmap.
        SACK: u64 = 28..36 => sack, set_sack;
    }
    repr: Hdr;
}

wire_enum! {
    /// Packet types.
    pub enum PktType: u8 {
        /// Open a connection (body: the cookie, 0 for none).
        Connect = 1,
        /// Accept a connection.
        Accept = 2,
        /// A message segment.
        Data = 3,
        /// A standalone acknowledgement.
        Ack = 4,
        /// Prove you receive at your address: echo this cookie in a new `CONNECT`.
        Challenge = 5,
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

    /// Validate and parse the header of `p`: magic, version, type and flags.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Hdr, WireError> {
        if p.magic() != MAGIC {
            return Err(WireError::field("rxd.magic", p.magic()));
        }
        WireError::check_version(p.version(), VERSION)?;
        let ty = PktType::from_field("rxd.type", p.ty())?;
        let flags = WireError::check_flags("rxd.flags", p.flags(), KNOWN_FLAGS)?;
        Ok(Hdr {
            ty,
            flags,
            dst_id: p.dst_id(),
            src_id: p.src_id(),
            src_sess: p.src_sess(),
            dst_sess: p.dst_sess(),
            seq: p.seq(),
            ack: p.ack(),
            sack: p.sack(),
        })
    }

    /// Write every header field into `p` (the acknowledgement fields only as far as
    /// [`F_ACK`] says: see [`Hdr::emit_ack`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_magic(MAGIC);
        p.set_version(VERSION);
        p.set_ty(self.ty as u8);
        p.set_flags(self.flags);
        p.set_dst_id(self.dst_id);
        p.set_src_id(self.src_id);
        p.set_src_sess(self.src_sess);
        p.set_dst_sess(self.dst_sess);
        p.set_seq(self.seq);
        Hdr::emit_ack(p, self.flags & F_ACK != 0, self.ack, self.sack);
    }

    /// Rewrite only the acknowledgement fields (and the [`F_ACK`] flag) of an emitted
    /// header: a retransmitted packet carries the current acknowledgement.
    pub fn emit_ack<T: AsRef<[u8]> + AsMut<[u8]>>(
        p: &mut Packet<T>,
        on: bool,
        ack: u32,
        sack: u64,
    ) {
        let flags = p.flags();
        p.set_flags(if on { flags | F_ACK } else { flags & !F_ACK });
        p.set_ack(ack);
        p.set_sack(sack);
    }

    /// [`Hdr::emit_ack`] on the packet in `b` (shorter than [`HDR_LEN`]: left alone).
    pub fn write_ack(&self, b: &mut [u8], on: bool, ack: u32, sack: u64) {
        if let Ok(mut p) = Packet::new_checked(b) {
            Hdr::emit_ack(&mut p, on, ack, sack);
        }
    }

    /// Rewrite the connection fields of a written header (packets queued before the
    /// connection was up get the peer's ids when they go).
    pub fn patch_ids(b: &mut [u8], dst_id: u32, src_id: u32, src_sess: u32, dst_sess: u32) {
        if let Ok(mut p) = Packet::new_checked(b) {
            p.set_dst_id(dst_id);
            p.set_src_id(src_id);
            p.set_src_sess(src_sess);
            p.set_dst_sess(dst_sess);
        }
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

const _: () = assert!(MSG_HDR == 18);

wire_header! {
    /// A checked view of a message: the [`MSG_HDR`]-byte message header, then the
    /// message's bytes (or an RMA / atomic request header, [`RmaPacket`]).
    pub struct MsgPacket;
    endian: little;
    len: MSG_HDR;
    /// Where each message-header field lies.
    pub mod msg_field {
        /// Operation ([`OP_MSG`] ..= [`OP_RESP`]).
        OP: u8 = 0..1 => op, set_op;
        /// Flags ([`H_DATA`]).
        FLAGS: u8 = 1..2 => flags, set_flags;
        /// Tag, or request id for requests and responses.
        TAG: u64 = 2..10 => tag, set_tag;
        /// Remote CQ data (with [`H_DATA`]), or a response's status.
        DATA: u64 = 10..18 => data, set_data;
    }
    repr: MsgHdr;
}

/// A parsed message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgHdr {
    /// Operation ([`OP_MSG`] ..= [`OP_RESP`]).
    pub op: u8,
    /// Tag or request id.
    pub tag: u64,
    /// Remote CQ data or status, present with [`H_DATA`] (the field is ignored
    /// without it).
    pub data: Option<u64>,
}

impl MsgHdr {
    /// Validate and parse the message header of `p`: a known operation and flags.
    pub fn parse<T: AsRef<[u8]>>(p: &MsgPacket<T>) -> Result<MsgHdr, WireError> {
        if p.op() > OP_RESP {
            return Err(WireError::field("rxd.msg.op", p.op()));
        }
        if p.flags() & !H_DATA != 0 {
            return Err(WireError::field("rxd.msg.flags", p.flags() & !H_DATA));
        }
        Ok(MsgHdr {
            op: p.op(),
            tag: p.tag(),
            data: (p.flags() & H_DATA != 0).then(|| p.data()),
        })
    }

    /// Write every field into `p` (`data` 0 when absent).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut MsgPacket<T>) {
        p.set_op(self.op);
        p.set_flags(if self.data.is_some() { H_DATA } else { 0 });
        p.set_tag(self.tag);
        p.set_data(self.data.unwrap_or(0));
    }
}

/// rxd's header of one message: operation, flags, tag, remote CQ data.
pub fn msg_hdr(tagged: bool, tag: u64, data: Option<u64>) -> [u8; MSG_HDR] {
    op_hdr(if tagged { OP_TAGGED } else { OP_MSG }, tag, data)
}

/// The header of a message of operation `op`.
pub fn op_hdr(op: u8, tag: u64, data: Option<u64>) -> [u8; MSG_HDR] {
    MsgHdr { op, tag, data }.bytes()
}

/// Parse a message header into (operation, tag, data): [`MsgHdr::from_bytes`] as a
/// tuple.
pub fn parse_msg_hdr(m: &[u8]) -> Result<(u8, u64, Option<u64>), WireError> {
    let h = MsgHdr::from_bytes(m)?;
    Ok((h.op, h.tag, h.data))
}

wire_header! {
    /// A checked view of an RMA or atomic request's header (after the message header),
    /// then the request's payload.
    pub struct RmaPacket;
    endian: little;
    len: RMA_HDR;
    /// Where each request-header field lies.
    pub mod rma_field {
        /// Memory key.
        KEY: u64 = 0..8 => key, set_key;
        /// Remote address (or offset).
        ADDR: u64 = 8..16 => addr, set_addr;
        /// Length in bytes (RMA) or elements (atomics).
        LEN: u64 = 16..24 => length, set_length;
        /// Datatype (`fi_datatype`, atomics).
        DATATYPE: u8 = 24..25 => dt, set_dt;
        /// Operation (`fi_op`, atomics).
        OP: u8 = 25..26 => op, set_op;
        /// Atomic kind ([`kind_code`]).
        KIND: u8 = 26..27 => kind, set_kind;
        /// Padding, written 0 and not read.
        PAD: u8 = 27..28 => pad, set_pad;
    }
    repr: RmaReq;
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
    /// Parse the request header of `p`. The values are checked where they are used
    /// (the MR table, the atomic engine), which answer the initiator with a status.
    pub fn parse<T: AsRef<[u8]>>(p: &RmaPacket<T>) -> Result<RmaReq, WireError> {
        Ok(RmaReq {
            key: p.key(),
            addr: p.addr(),
            len: p.length(),
            dt: p.dt(),
            op: p.op(),
            kind: p.kind(),
        })
    }

    /// Write every field into `p`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut RmaPacket<T>) {
        p.set_key(self.key);
        p.set_addr(self.addr);
        p.set_length(self.len);
        p.set_dt(self.dt);
        p.set_op(self.op);
        p.set_kind(self.kind);
        p.set_pad(0);
    }
}

/// The wire code of an atomic kind: the kit's one code for it.
pub use ofi_kit::wire::atomic_kind_code as kind_code;

/// The atomic kind of a wire code.
pub fn kind_of(c: u8) -> Result<AtomicKind, WireError> {
    ofi_kit::wire::atomic_kind_of_code(c).ok_or(WireError::field("rxd.rma.kind", c))
}

/// Set the acknowledgement fields of the packet in `b` (see [`Hdr::write_ack`]).
pub fn set_ack(b: &mut [u8], on: bool, ack: u32, sack: u64) {
    Hdr::new(PktType::Ack).write_ack(b, on, ack, sack);
}

/// The total message length at the start of a first segment's body (little endian).
pub fn first_len(body: &[u8]) -> Result<u32, WireError> {
    WireError::check_len(body, FIRST_LEN)?;
    Ok(<u32 as ofi_kit::wire::Field>::read_le(&body[..FIRST_LEN]))
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
        assert_eq!(Hdr::from_bytes(&h.bytes()), Ok(h));
        let mut b = h.bytes();
        set_ack(&mut b, false, 1, 2);
        let g = Hdr::from_bytes(&b).unwrap();
        assert_eq!(g.flags, F_FIRST);
        assert_eq!((g.ack, g.sack), (1, 2));
    }

    #[test]
    fn bad_headers_are_refused() {
        let h = Hdr::new(PktType::Ack).bytes();
        assert!(Hdr::from_bytes(&h[..HDR_LEN - 1]).is_err());
        // (offset, byte written there, the error naming it)
        let corruptions = [
            (0, 0, WireError::field("rxd.magic", 0u8)),
            (1, 9, WireError::version(9u8, VERSION)),
            (2, 77, WireError::field("rxd.type", 77u8)),
            (3, 0x80, WireError::field("rxd.flags", 0x80u8)),
        ];
        ofi_testkit::wire::assert_each_corruption(&h, &corruptions, Hdr::from_bytes);
        assert!(first_len(&[1, 2]).is_err());
        assert_eq!(first_len(&[1, 0, 0, 0, 9]), Ok(1));
    }

    #[test]
    fn message_headers_round_trip() {
        let h = msg_hdr(true, 0x1234, Some(9));
        assert_eq!(parse_msg_hdr(&h), Ok((OP_TAGGED, 0x1234, Some(9))));
        let h = msg_hdr(false, 0, None);
        assert_eq!(parse_msg_hdr(&h), Ok((OP_MSG, 0, None)));
        let r = RmaReq {
            key: 1,
            addr: 2,
            len: 3,
            dt: 4,
            op: 5,
            kind: 2,
        };
        assert_eq!(RmaReq::from_bytes(&r.bytes()), Ok(r));
        assert!(RmaReq::from_bytes(&r.bytes()[..RMA_HDR - 1]).is_err());
        for k in [AtomicKind::Base, AtomicKind::Fetch, AtomicKind::Compare] {
            assert_eq!(kind_of(kind_code(k)), Ok(k));
        }
        assert!(kind_of(3).is_err());
        assert!(parse_msg_hdr(&h[..MSG_HDR - 1]).is_err());
        let mut b = h;
        b[0] = 7;
        assert!(parse_msg_hdr(&b).is_err());
        let mut b = h;
        b[1] = 0x10;
        assert!(parse_msg_hdr(&b).is_err());
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
