//! The efa RDM wire format: every SRD datagram is one packet, a fixed header (little
//! endian) chosen by the packet's type, followed by a payload.
//!
//! Every packet starts with the same four bytes, the [`Prefix`] ([`PREFIX_LEN`]
//! bytes): type (`u8`, [`PktType`]), protocol version (`u8`, [`VERSION`]) and flags
//! (`u16`, [`F_CQ_DATA`], [`F_DC`]). Three header layouts follow from there, each
//! declared once with kit's [`wire_header!`] (its fields at their offsets from the
//! packet's start, after the prefix):
//!
//! - **handshake** ([`HsPacket`], [`HS_LEN`] bytes): `HELLO` (the question a sender
//!   puts to a peer it has no handshake from) and `HANDSHAKE` (the answer): the highest
//!   version spoken, the feature bits ([`FEAT_RDMA_READ`], [`FEAT_DELIVERY_COMPLETE`]),
//!   in `HANDSHAKE` the cookie the asker must put in every request it sends, and the
//!   sender's receive window (how many message ids ahead of the oldest one it waits
//!   for it holds for order: the room a sender to it keeps within).
//! - **request** ([`ReqPacket`], [`REQ_LEN`] bytes), the first packet(s) of an operation
//!   (C's "REQ" packets: RTM, RTW, RTR, RTA): message id, cookie, tag (or the atomic
//!   operation), total length, offset of this payload in the operation, the sender's
//!   operation id, a memory key, remote CQ data, and the target offset of an RMA.
//! - **control** ([`CtrlPacket`], [`CTRL_LEN`] bytes), the packets that continue an
//!   operation both ends know (CTS, CTSDATA, READRSP, EOR, ATOMRSP, RECEIPT): the
//!   sender's and the receiver's operation ids, a status, an offset and a length.
//!
//! The type numbers are C's efa protocol v4 numbers where the packet has the same role
//! (3 CTS, 4 CTSDATA, 5 READRSP, 7 EOR, 8 ATOMRSP, 9 HANDSHAKE, 10 RECEIPT, 64-70 the
//! eager/medium/long-CTS message and write requests, 72 SHORT_RTR, 74-76 the atomic
//! requests, 128/129 LONGREAD); `HELLO` (13) is this protocol's own. The layouts are
//! this crate's own: the two protocols do not interoperate.
//!
//! [`Repr::parse`] checks everything a peer controls that can be checked without state:
//! the version, the type, the flags, and that each payload fits its operation (an
//! eager request carries exactly its message, a segment never reaches past its total
//! length, an atomic carries whole operands, twice as many bytes for a compare). Nothing here panics; a bad packet
//! is a [`WireError`].

use ofi_kit::wire::WireError;
use ofi_kit::{wire_enum, wire_header};

/// The protocol version every packet carries.
pub const VERSION: u8 = 4;
/// Length of the prefix every packet starts with.
pub const PREFIX_LEN: usize = 4;
/// Length of the handshake header.
pub const HS_LEN: usize = 28;
/// Length of the request header.
pub const REQ_LEN: usize = 64;
/// Length of the control header.
pub const CTRL_LEN: usize = 32;

/// Request flag: the `cq_data` field carries remote CQ data.
pub const F_CQ_DATA: u16 = 1 << 0;
/// Request flag: the sender asked for delivery complete (the receiver answers with a
/// `RECEIPT` once the data is placed).
pub const F_DC: u16 = 1 << 1;
/// Every flag this version defines.
pub const KNOWN_FLAGS: u16 = F_CQ_DATA | F_DC;

/// Feature bit: the device can read a peer's registered memory (long messages by read).
pub const FEAT_RDMA_READ: u64 = 1 << 0;
/// Feature bit: the endpoint answers `F_DC` requests with a `RECEIPT`.
pub const FEAT_DELIVERY_COMPLETE: u64 = 1 << 1;

wire_header! {
    /// A checked view of the prefix every packet starts with.
    pub struct Prefix;
    endian: little;
    len: PREFIX_LEN;
    /// Where each field of the prefix lies.
    pub mod prefix_field {
        /// Packet type.
        TYPE: u8 = 0..1 => pkt_type, set_pkt_type;
        /// Protocol version.
        VERSION: u8 = 1..2 => version, set_version;
        /// Flags ([`F_CQ_DATA`], [`F_DC`] in requests; zero in other packets).
        FLAGS: u16 = 2..4 => flags, set_flags;
    }
}

wire_header! {
    /// A checked view of a handshake packet (`HELLO`, `HANDSHAKE`).
    pub struct HsPacket;
    endian: little;
    len: HS_LEN;
    /// Where each field of a handshake packet after the [`Prefix`] lies.
    pub mod hs_field {
        /// Highest protocol version the sender speaks.
        MAX_VERSION: u32 = 4..8 => max_version, set_max_version;
        /// Feature bits.
        FEATURES: u64 = 8..16 => features, set_features;
        /// `HANDSHAKE`: the cookie the asker must echo in its requests; `HELLO`: zero.
        COOKIE: u64 = 16..24 => cookie, set_cookie;
        /// The sender's receive window in message ids (its `recvwin_size`), as
        /// announced (the receiving engine clamps it, or refuses 0: see `Engine`'s
        /// handshake).
        RECVWIN: u32 = 24..28 => recvwin, set_recvwin;
    }
    /// A parsed handshake packet: every field after the prefix (the type, `HELLO` or
    /// `HANDSHAKE`, is the [`Repr`] variant; the flags are zero).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    record: pub struct Hs;
}

wire_header! {
    /// A checked view of a request packet (RTM, RTW, RTR, RTA).
    pub struct ReqPacket;
    endian: little;
    len: REQ_LEN;
    /// Where each field of a request packet after the [`Prefix`] lies.
    pub mod req_field {
        /// Message id (messages only), per sender and receiver, from 0.
        MSG_ID: u32 = 4..8 => msg_id, set_msg_id;
        /// The cookie the receiver handed out in its `HANDSHAKE`.
        COOKIE: u64 = 8..16 => cookie, set_cookie;
        /// Tag (tagged messages), or the atomic operation (`FI_*` op number).
        TAG: u64 = 16..24 => tag, set_tag;
        /// Length of the whole operation.
        TOTAL_LEN: u64 = 24..32 => total_len, set_total_len;
        /// Offset of this packet's payload in the operation.
        SEG_OFFSET: u64 = 32..40 => seg_offset, set_seg_offset;
        /// The sender's operation id (answers name it).
        SEND_ID: u32 = 40..44 => send_id, set_send_id;
        /// Long read: the sender's region holding the message; RMA: the target's key.
        KEY: u32 = 44..48 => key, set_key;
        /// Remote CQ data (with [`F_CQ_DATA`]).
        CQ_DATA: u64 = 48..56 => cq_data, set_cq_data;
        /// RMA and atomics: offset in the target region where the operation starts.
        RMA_OFFSET: u64 = 56..64 => rma_offset, set_rma_offset;
    }
}

wire_header! {
    /// A checked view of a control packet (CTS, CTSDATA, READRSP, EOR, ATOMRSP, RECEIPT).
    pub struct CtrlPacket;
    endian: little;
    len: CTRL_LEN;
    /// Where each field of a control packet after the [`Prefix`] lies.
    pub mod ctrl_field {
        /// The operation's id at the end that sent the request.
        SEND_ID: u32 = 4..8 => send_id, set_send_id;
        /// The operation's id at the end that received it (CTS, CTSDATA).
        RECV_ID: u32 = 8..12 => recv_id, set_recv_id;
        /// Status: 0 or a positive `FI_*` code (EOR, RECEIPT, ATOMRSP).
        STATUS: u32 = 12..16 => status, set_status;
        /// Offset in the operation (CTS: where the grant starts; CTSDATA, READRSP: of
        /// the payload).
        OFFSET: u64 = 16..24 => offset, set_offset;
        /// CTS: bytes granted.
        LENGTH: u64 = 24..32 => length, set_length;
    }
}

wire_enum! {
    /// Packet types.
    pub enum PktType: u8 {
        /// Clear to send: the receiver of a long-CTS message grants a window.
        Cts = 3,
        /// Data of a long-CTS message, within a grant.
        CtsData = 4,
        /// Data answering an emulated read.
        ReadRsp = 5,
        /// End of read: the receiver of a long-read message has read it (status).
        Eor = 7,
        /// Answer to an emulated atomic (status, old value).
        AtomRsp = 8,
        /// Handshake answer: features and the cookie.
        Handshake = 9,
        /// Receipt: delivery complete, an emulated write done, or an operation refused.
        Receipt = 10,
        /// Handshake question.
        Hello = 13,
        /// Untagged message in one packet.
        EagerMsg = 64,
        /// Tagged message in one packet.
        EagerTag = 65,
        /// Untagged message in several packets.
        MediumMsg = 66,
        /// Tagged message in several packets.
        MediumTag = 67,
        /// Untagged long message, rest by clear-to-send.
        LongCtsMsg = 68,
        /// Tagged long message, rest by clear-to-send.
        LongCtsTag = 69,
        /// Emulated write, one segment.
        EagerRtw = 70,
        /// Emulated read request.
        ShortRtr = 72,
        /// Emulated atomic without result.
        WriteRta = 74,
        /// Emulated atomic returning the old value.
        FetchRta = 75,
        /// Emulated compare-and-swap.
        CompareRta = 76,
        /// Untagged long message, read by the receiver.
        LongReadMsg = 128,
        /// Tagged long message, read by the receiver.
        LongReadTag = 129,
    }
}

impl PktType {
    /// Whether the type uses the handshake layout.
    pub fn is_handshake(self) -> bool {
        matches!(self, PktType::Hello | PktType::Handshake)
    }

    /// Whether the type uses the request layout.
    pub fn is_req(self) -> bool {
        (self as u8) >= 64
    }

    /// Whether the request carries a message (RTM) rather than an RMA or atomic.
    pub fn is_msg(self) -> bool {
        use PktType::*;
        matches!(
            self,
            EagerMsg
                | EagerTag
                | MediumMsg
                | MediumTag
                | LongCtsMsg
                | LongCtsTag
                | LongReadMsg
                | LongReadTag
        )
    }

    /// Whether a message request is tagged.
    pub fn is_tagged(self) -> bool {
        use PktType::*;
        matches!(self, EagerTag | MediumTag | LongCtsTag | LongReadTag)
    }
}

/// A parsed request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req {
    /// The request's type.
    pub ty: PktType,
    /// Flags.
    pub flags: u16,
    /// Message id.
    pub msg_id: u32,
    /// Cookie.
    pub cookie: u64,
    /// Tag or atomic operation.
    pub tag: u64,
    /// Length of the whole operation.
    pub total_len: u64,
    /// Offset of the payload in the operation.
    pub seg_offset: u64,
    /// The sender's operation id.
    pub send_id: u32,
    /// Memory key.
    pub key: u32,
    /// Remote CQ data (meaningful with [`F_CQ_DATA`]).
    pub cq_data: u64,
    /// Target offset of an RMA or atomic.
    pub rma_offset: u64,
}

/// A parsed control header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctrl {
    /// The packet's type.
    pub ty: PktType,
    /// The requester's operation id.
    pub send_id: u32,
    /// The responder's operation id.
    pub recv_id: u32,
    /// Status (0: success).
    pub status: u32,
    /// Offset.
    pub offset: u64,
    /// Length (CTS grant).
    pub length: u64,
}

/// A parsed packet and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr<'a> {
    /// `HELLO`.
    Hello(Hs),
    /// `HANDSHAKE`.
    Handshake(Hs),
    /// A request and its payload.
    Req(Req, &'a [u8]),
    /// A control packet and its payload.
    Ctrl(Ctrl, &'a [u8]),
}

impl<'a> Repr<'a> {
    /// Parse and check one packet.
    pub fn parse(buf: &'a [u8]) -> Result<Repr<'a>, WireError> {
        let prefix = Prefix::new_checked(buf)?;
        let ty = PktType::from_field("type", prefix.pkt_type())?;
        WireError::check_version(prefix.version(), VERSION)?;
        let flags = prefix.flags();
        if ty.is_handshake() {
            let p = HsPacket::new_checked(buf)?;
            WireError::check_flags("flags", flags, 0)?;
            if !p.payload().is_empty() {
                return Err(WireError::Malformed("bytes after a handshake header"));
            }
            let hs = Hs::read(&p);
            return Ok(if ty == PktType::Hello {
                Repr::Hello(hs)
            } else {
                Repr::Handshake(hs)
            });
        }
        if ty.is_req() {
            let p = ReqPacket::new_checked(buf)?;
            let req = Req {
                ty,
                flags,
                msg_id: p.msg_id(),
                cookie: p.cookie(),
                tag: p.tag(),
                total_len: p.total_len(),
                seg_offset: p.seg_offset(),
                send_id: p.send_id(),
                key: p.key(),
                cq_data: p.cq_data(),
                rma_offset: p.rma_offset(),
            };
            let payload = &buf[REQ_LEN..];
            check_req(&req, payload.len())?;
            return Ok(Repr::Req(req, payload));
        }
        let p = CtrlPacket::new_checked(buf)?;
        WireError::check_flags("flags", flags, 0)?;
        let ctrl = Ctrl {
            ty,
            send_id: p.send_id(),
            recv_id: p.recv_id(),
            status: p.status(),
            offset: p.offset(),
            length: p.length(),
        };
        let payload = &buf[CTRL_LEN..];
        let ok = match ty {
            PktType::Cts | PktType::Eor | PktType::Receipt => payload.is_empty(),
            PktType::AtomRsp => true, // the original elements, or nothing
            _ => !payload.is_empty(),
        };
        if !ok {
            return Err(WireError::Malformed(
                "payload length wrong for the packet type",
            ));
        }
        if ty == PktType::Cts && ctrl.length == 0 {
            return Err(WireError::field("cts length", 0u64));
        }
        Ok(Repr::Ctrl(ctrl, payload))
    }
}

/// The checks a request's fields and payload length must pass.
fn check_req(req: &Req, payload: usize) -> Result<(), WireError> {
    use PktType::*;
    if req.flags & !KNOWN_FLAGS != 0 {
        return Err(WireError::field("flags", req.flags));
    }
    let end = req
        .seg_offset
        .checked_add(payload as u64)
        .ok_or(WireError::field("seg_offset", req.seg_offset))?;
    if end > req.total_len {
        return Err(WireError::Malformed(
            "segment reaches past the total length",
        ));
    }
    let ok = match req.ty {
        EagerMsg | EagerTag => req.seg_offset == 0 && end == req.total_len,
        MediumMsg | MediumTag | EagerRtw => payload > 0,
        LongCtsMsg | LongCtsTag => req.seg_offset == 0,
        LongReadMsg | LongReadTag | ShortRtr => payload == 0 && req.seg_offset == 0,
        // Whole operands (then compare values, as many): the initiator's elements.
        WriteRta | FetchRta => req.seg_offset == 0 && end == req.total_len && payload > 0,
        CompareRta => {
            req.seg_offset == 0 && end == req.total_len && payload > 0 && payload.is_multiple_of(2)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(WireError::Malformed(
            "payload does not fit the request type",
        ))
    }
}

/// Write the [`Prefix`] of a packet of type `ty` with `flags` at the start of `packet`
/// (every layout's header starts with it).
fn emit_prefix(packet: &mut [u8], ty: PktType, flags: u16) {
    if let Ok(mut p) = Prefix::new_checked(packet) {
        p.set_pkt_type(ty as u8);
        p.set_version(VERSION);
        p.set_flags(flags);
    }
}

/// Emit a handshake packet of type `ty` (`Hello` or `Handshake`).
pub fn emit_hs(ty: PktType, hs: &Hs) -> Vec<u8> {
    let mut p = HsPacket::with_payload(&[]);
    emit_prefix(p.header_mut(), ty, 0);
    hs.write(&mut p);
    p.into_inner()
}

/// Emit a request with `payload`.
pub fn emit_req(req: &Req, payload: &[u8]) -> Vec<u8> {
    let mut p = ReqPacket::with_payload(payload);
    emit_prefix(p.header_mut(), req.ty, req.flags);
    p.set_msg_id(req.msg_id);
    p.set_cookie(req.cookie);
    p.set_tag(req.tag);
    p.set_total_len(req.total_len);
    p.set_seg_offset(req.seg_offset);
    p.set_send_id(req.send_id);
    p.set_key(req.key);
    p.set_cq_data(req.cq_data);
    p.set_rma_offset(req.rma_offset);
    p.into_inner()
}

/// Emit a control packet with `payload`.
pub fn emit_ctrl(c: &Ctrl, payload: &[u8]) -> Vec<u8> {
    let mut p = CtrlPacket::with_payload(payload);
    emit_prefix(p.header_mut(), c.ty, 0);
    p.set_send_id(c.send_id);
    p.set_recv_id(c.recv_id);
    p.set_status(c.status);
    p.set_offset(c.offset);
    p.set_length(c.length);
    p.into_inner()
}

impl Ctrl {
    /// A control packet of type `ty` naming `send_id` (other fields zero).
    pub fn new(ty: PktType, send_id: u32) -> Ctrl {
        Ctrl {
            ty,
            send_id,
            recv_id: 0,
            status: 0,
            offset: 0,
            length: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_round_trips() {
        let hs = Hs {
            max_version: 4,
            features: FEAT_RDMA_READ,
            cookie: 0xdead_beef,
            recvwin: 77,
        };
        let b = emit_hs(PktType::Handshake, &hs);
        assert_eq!(Repr::parse(&b), Ok(Repr::Handshake(hs)));
        let req = Req {
            ty: PktType::MediumTag,
            flags: F_CQ_DATA | F_DC,
            msg_id: 0x0102_0304,
            cookie: 5,
            tag: 6,
            total_len: 100,
            seg_offset: 90,
            send_id: 7,
            key: 8,
            cq_data: 9,
            rma_offset: 10,
        };
        let b = emit_req(&req, &[1; 10]);
        assert_eq!(b.len(), REQ_LEN + 10);
        assert_eq!(
            b[..PREFIX_LEN],
            [PktType::MediumTag as u8, VERSION, 3, 0],
            "the prefix: type, version, flags"
        );
        assert_eq!(&b[4..8], &[4, 3, 2, 1], "little endian");
        assert_eq!(Repr::parse(&b), Ok(Repr::Req(req, &[1; 10][..])));
        let mut c = Ctrl::new(PktType::Cts, 3);
        c.recv_id = 4;
        c.offset = 5;
        c.length = 6;
        let b = emit_ctrl(&c, &[]);
        assert_eq!(Repr::parse(&b), Ok(Repr::Ctrl(c, &[][..])));
    }

    #[test]
    fn every_known_type_number_maps_back() {
        for b in 0..=255u8 {
            if let Some(t) = PktType::from_wire(b) {
                assert_eq!(t as u8, b);
            }
        }
        assert_eq!(PktType::from_wire(1), None, "RTS is retired");
        assert!(PktType::LongReadTag.is_req() && PktType::LongReadTag.is_tagged());
        assert!(!PktType::EagerRtw.is_msg());
    }
}
