//! The wire format of the `tcp` provider (version [`PROTO_VERSION`]).
//!
//! Everything is little-endian. Written in kit's wire convention
//! ([`ofi_kit::wire`]): each fixed header is declared once with named field ranges
//! ([`hdr_field`], [`rma_iov_field`], [`cm_field`]) and read through a checked view
//! ([`HdrView`], [`RmaIovView`], [`CmView`]); the parsed forms ([`Hdr`], [`RmaIov`],
//! [`CmHdr`]) validate in `parse` and write every field in `emit`. Every parse error
//! is kit's [`WireError`], which the endpoint turns into `FI_EPROTO` at the edge (or
//! `FI_ENOPROTOOPT` for a peer of another protocol, [`is_foreign`]).
//!
//! A connection carries, in order:
//!
//! 1. **Connection management** ([`CmHdr`], 8 bytes, then up to [`CM_DATA_SIZE`] bytes
//!    of application data). The connecting side sends [`CmKind::ConnReq`]; the
//!    listening side answers [`CmKind::ConnResp`] (accepted) or [`CmKind::Reject`]
//!    (then closes). Layout: magic `b"oftc"` (4), version u8, kind u8, data length u16.
//!    A magic or version mismatch ([`is_foreign`]) is reported as `FI_ENOPROTOOPT`.
//! 2. **Operations**, each a fixed 40-byte [`Hdr`], then `rma_cnt` remote iovs of 24
//!    bytes ([`RmaIov`]: addr u64, len u64, key u64), then `size` payload bytes.
//!
//! ```text
//! off  size  field
//!   0     1  version   (PROTO_VERSION)
//!   1     1  op        (Op)
//!   2     1  flags     (FLAG_CQ_DATA | FLAG_ACK_REQ)
//!   3     1  rma_cnt   (0..=RMA_IOV_LIMIT)
//!   4     1  atomic op (fi_op value; atomic ops only)
//!   5     1  datatype  (fi_datatype value; atomic ops only)
//!   6     2  status    (0, or a positive FI_* error code in responses)
//!   8     8  size      (payload bytes after the header and the rma iovs)
//!  16     8  data      (remote CQ data with FLAG_CQ_DATA)
//!  24     8  tag       (tagged messages)
//!  32     8  id        (initiator's operation id; echoed by responses)
//! ```
//!
//! Requests: `Msg`, `Tagged` (payload = message), `Write` (rma iovs + payload),
//! `ReadReq` (rma iovs, no payload), `Atomic`/`AtomicFetch`/`AtomicCompare` (one rma
//! iov; payload = operands, then compare values). Responses: `ReadRsp` (payload = data,
//! or a status and no payload), `Ack` (status; for writes and delivery-complete
//! messages), `AtomicRsp` (payload = the original target values for fetch/compare).
//!
//! # Same-host copies (version 2)
//!
//! Two endpoints on one host may move large payloads with one cross-memory copy
//! (`process_vm_readv` / `process_vm_writev`) instead of through the stream. Each side
//! proves to the other that it is the process it claims to be:
//!
//! 1. `LocalOffer` (`data` = a fresh random nonce) — "prove you can be read";
//! 2. `LocalProof` (`data` = the prover's pid, `tag` = the address of a word in its
//!    memory that now holds the nonce) — the verifier reads that word from that pid;
//! 3. `LocalOk` (`data` = 1 when the word held the nonce, 0 otherwise) — from then on
//!    the prover may send large messages as descriptors.
//!
//! Only the process that received the nonce over this connection can show it, so a
//! verified pid is the peer itself: the verifier only ever copies from or into the
//! peer's own memory. Descriptors:
//!
//! - `Msg` / `Tagged` with [`FLAG_LOCAL`] (and [`FLAG_ACK_REQ`]): `size` is the message
//!   length, the `rma_cnt` iovs (key 0) name the sender's buffers, no payload follows;
//!   the receiver copies the data out of the sender and acknowledges (`Ack`, with a
//!   status when the copy failed);
//! - `LocalReadReq`: an RMA read whose `rma_cnt` iovs are first `tag` remote iovs (as
//!   in `ReadReq`), then the initiator's destination buffers (key 0); the target checks
//!   the remote ones, copies into the initiator and answers `ReadRsp` with
//!   [`FLAG_LOCAL`], a status and no payload.
//!
//! # Invariants
//!
//! Parsing never panics and never trusts a length: every field is checked against the
//! limits here ([`Hdr::parse`], [`CmHdr::parse`], [`RmaIov::from_bytes`]); the payload
//! length is checked against the receiver's `max_msg_size` by the endpoint. Nothing in
//! this module panics (fuzzed by `fuzz/fuzz_targets/proto.rs` and an inline test).

use ofi_kit::wire::WireError;
use ofi_kit::{wire_enum, wire_header};

/// The remote iovs after a header: kit's remote buffer, 24 bytes (`addr`, `len`, `key`).
pub use ofi_kit::wire::{rma_iov_field, RmaIov, RmaIovView, RMA_IOV_LEN};

/// Version of the operation header and the CM messages.
pub const PROTO_VERSION: u8 = 2;
/// Bytes of an operation header.
pub const HDR_LEN: usize = 40;
/// Most remote iovs one operation carries.
pub const RMA_IOV_LIMIT: usize = 4;
/// The largest header block: header plus the most remote iovs.
pub const HDR_MAX: usize = HDR_LEN + RMA_IOV_LIMIT * RMA_IOV_LEN;
/// Bytes of a CM header.
pub const CM_HDR_LEN: usize = 8;
/// Most application bytes a CM message carries (`FI_OPT_CM_DATA_SIZE`).
pub const CM_DATA_SIZE: usize = 256;
/// The CM magic.
pub const CM_MAGIC: [u8; 4] = *b"oftc";

/// Flag: the header's `data` is remote CQ data.
pub const FLAG_CQ_DATA: u8 = 1;
/// Flag: the initiator wants an [`Op::Ack`] once the message is placed
/// (`FI_DELIVERY_COMPLETE`).
pub const FLAG_ACK_REQ: u8 = 2;
/// Flag: the payload stays in the initiator's memory, named by the rma iovs
/// (same-host copies; `Msg`, `Tagged` and `ReadRsp` only).
pub const FLAG_LOCAL: u8 = 4;
const KNOWN_FLAGS: u8 = FLAG_CQ_DATA | FLAG_ACK_REQ | FLAG_LOCAL;

/// Whether `e` says the peer speaks another protocol (a wrong CM magic or another
/// version), not that it broke this one.
pub fn is_foreign(e: &WireError) -> bool {
    matches!(
        e,
        WireError::Version { .. } | WireError::Field { field: "magic", .. }
    )
}

wire_header! {
    /// A checked view of an operation header.
    pub struct HdrView;
    endian: little;
    len: HDR_LEN;
    /// Where each field of an operation header lies.
    pub mod hdr_field {
        /// [`PROTO_VERSION`].
        VERSION: u8 = 0..1 => version, set_version;
        /// The operation ([`Op`]).
        OP: u8 = 1..2 => op, set_op;
        /// `FLAG_*` bits.
        FLAGS: u8 = 2..3 => flags, set_flags;
        /// Remote iovs after the header.
        RMA_CNT: u8 = 3..4 => rma_cnt, set_rma_cnt;
        /// Atomic operation (`fi_op`).
        ATOMIC_OP: u8 = 4..5 => atomic_op, set_atomic_op;
        /// Atomic datatype (`fi_datatype`).
        DATATYPE: u8 = 5..6 => datatype, set_datatype;
        /// Response status.
        STATUS: u16 = 6..8 => status, set_status;
        /// Payload bytes.
        SIZE: u64 = 8..16 => size, set_size;
        /// Remote CQ data.
        DATA: u64 = 16..24 => data, set_data;
        /// Tag.
        TAG: u64 = 24..32 => tag, set_tag;
        /// Operation id.
        ID: u64 = 32..40 => id, set_id;
    }
}

wire_header! {
    /// A checked view of a CM header.
    pub struct CmView;
    endian: little;
    len: CM_HDR_LEN;
    /// Where each field of a CM header lies.
    pub mod cm_field {
        /// [`CM_MAGIC`].
        MAGIC: [u8; 4] = 0..4 => magic, set_magic;
        /// [`PROTO_VERSION`].
        VERSION: u8 = 4..5 => version, set_version;
        /// The message kind ([`CmKind`]).
        KIND: u8 = 5..6 => kind, set_kind;
        /// Bytes of application data after the header.
        DATA_LEN: u16 = 6..8 => data_len, set_data_len;
    }
}

wire_enum! {
    /// Operation codes.
    pub enum Op: u8 {
        /// An untagged message.
        Msg = 1,
        /// A tagged message.
        Tagged = 2,
        /// An RMA write.
        Write = 3,
        /// An RMA read request.
        ReadReq = 4,
        /// The data of an RMA read (or its error status).
        ReadRsp = 5,
        /// Completion of a write or of a delivery-complete message.
        Ack = 6,
        /// A base atomic.
        Atomic = 7,
        /// A fetching atomic.
        AtomicFetch = 8,
        /// A compare atomic.
        AtomicCompare = 9,
        /// The answer to an atomic.
        AtomicRsp = 10,
        /// Same-host copies: a nonce the peer should prove it holds.
        LocalOffer = 11,
        /// Same-host copies: the prover's pid and the address holding the nonce.
        LocalProof = 12,
        /// Same-host copies: whether the proof held.
        LocalOk = 13,
        /// An RMA read the target answers by copying into the initiator's memory.
        LocalReadReq = 14,
    }
}

impl Op {
    /// Whether this is an answer to an earlier request (matched by `id`).
    pub fn is_response(self) -> bool {
        matches!(self, Op::ReadRsp | Op::Ack | Op::AtomicRsp)
    }

    /// Whether this operation addresses target memory through remote iovs.
    pub fn uses_rma(self) -> bool {
        matches!(
            self,
            Op::Write
                | Op::ReadReq
                | Op::LocalReadReq
                | Op::Atomic
                | Op::AtomicFetch
                | Op::AtomicCompare
        )
    }

    /// Whether this is one of the atomic requests.
    pub fn is_atomic(self) -> bool {
        matches!(self, Op::Atomic | Op::AtomicFetch | Op::AtomicCompare)
    }
}

/// A parsed operation header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// The operation.
    pub op: Op,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Remote iovs that follow the header.
    pub rma_cnt: u8,
    /// Atomic operation (`fi_op`), atomic requests only.
    pub atomic_op: u8,
    /// Atomic datatype (`fi_datatype`), atomic requests only.
    pub datatype: u8,
    /// Response status: 0 or a positive `FI_*` code.
    pub status: u16,
    /// Payload bytes.
    pub size: u64,
    /// Remote CQ data.
    pub data: u64,
    /// Tag.
    pub tag: u64,
    /// Operation id.
    pub id: u64,
}

impl Hdr {
    /// A header for `op` with everything else zero.
    pub fn new(op: Op) -> Hdr {
        Hdr {
            op,
            flags: 0,
            rma_cnt: 0,
            atomic_op: 0,
            datatype: 0,
            status: 0,
            size: 0,
            data: 0,
            tag: 0,
            id: 0,
        }
    }

    /// Write every field into the view.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut HdrView<T>) {
        v.set_version(PROTO_VERSION);
        v.set_op(self.op as u8);
        v.set_flags(self.flags);
        v.set_rma_cnt(self.rma_cnt);
        v.set_atomic_op(self.atomic_op);
        v.set_datatype(self.datatype);
        v.set_status(self.status);
        v.set_size(self.size);
        v.set_data(self.data);
        v.set_tag(self.tag);
        v.set_id(self.id);
    }

    /// Write the header into `out`.
    #[inline]
    pub fn encode(&self, out: &mut [u8; HDR_LEN]) {
        if let Ok(mut v) = HdrView::new_checked(&mut out[..]) {
            self.emit(&mut v);
        }
    }

    /// Parse and check a header from untrusted bytes (at least [`HDR_LEN`]; extra bytes
    /// are ignored).
    ///
    /// # Errors
    /// [`WireError`] for short input, a foreign version, an unknown op or flag, a
    /// remote iov count that does not fit the op, or atomic fields on other ops.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Hdr, WireError> {
        Hdr::parse_view(&HdrView::new_checked(b)?)
    }

    /// Check and parse the header a view shows.
    ///
    /// # Errors
    /// As [`Hdr::parse`].
    #[inline]
    pub fn parse_view<T: AsRef<[u8]>>(v: &HdrView<T>) -> Result<Hdr, WireError> {
        WireError::check_version(v.version(), PROTO_VERSION)?;
        let op = Op::from_field("op", v.op())?;
        let flags = WireError::check_flags("flags", v.flags(), KNOWN_FLAGS)?;
        let rma_cnt = v.rma_cnt();
        let local = flags & FLAG_LOCAL != 0;
        if local && !matches!(op, Op::Msg | Op::Tagged | Op::ReadRsp) {
            return Err(WireError::field("flags", FLAG_LOCAL));
        }
        let rma_ok = if op.is_atomic() {
            rma_cnt == 1
        } else if op == Op::LocalReadReq {
            // At least one remote iov and one destination buffer.
            (2..=RMA_IOV_LIMIT as u8).contains(&rma_cnt)
        } else if (local && op != Op::ReadRsp) || op.uses_rma() {
            // Message descriptors name the sender's buffers like remote iovs.
            (1..=RMA_IOV_LIMIT as u8).contains(&rma_cnt)
        } else {
            rma_cnt == 0
        };
        if !rma_ok {
            return Err(WireError::field("rma_cnt", rma_cnt));
        }
        if !op.is_atomic() && v.atomic_op() != 0 {
            return Err(WireError::field("atomic_op", v.atomic_op()));
        }
        if !op.is_atomic() && v.datatype() != 0 {
            return Err(WireError::field("datatype", v.datatype()));
        }
        let status = v.status();
        if !op.is_response() && status != 0 {
            return Err(WireError::field("status", status));
        }
        Ok(Hdr {
            op,
            flags,
            rma_cnt,
            atomic_op: v.atomic_op(),
            datatype: v.datatype(),
            status,
            size: v.size(),
            data: v.data(),
            tag: v.tag(),
            id: v.id(),
        })
    }
}

wire_enum! {
    /// CM message kinds.
    pub enum CmKind: u8 {
        /// Connection request (initiator → listener).
        ConnReq = 1,
        /// Accepted (listener → initiator).
        ConnResp = 2,
        /// Rejected (listener → initiator; the listener then closes).
        Reject = 3,
    }
}

/// A parsed CM header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmHdr {
    /// The message kind.
    pub kind: CmKind,
    /// Bytes of data that follow.
    pub data_len: u16,
}

impl CmHdr {
    /// Write every field into the view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut CmView<T>) {
        v.set_magic(CM_MAGIC);
        v.set_version(PROTO_VERSION);
        v.set_kind(self.kind as u8);
        v.set_data_len(self.data_len);
    }

    /// Encode into 8 bytes.
    pub fn encode(&self) -> [u8; CM_HDR_LEN] {
        let mut v = CmView::zeroed();
        self.emit(&mut v);
        v.into_inner()
    }

    /// Parse and check from untrusted bytes.
    ///
    /// # Errors
    /// Short input, bad magic, foreign version ([`is_foreign`] for these two), unknown
    /// kind, or data longer than [`CM_DATA_SIZE`].
    pub fn parse(b: &[u8]) -> Result<CmHdr, WireError> {
        let v = CmView::new_checked(b)?;
        if v.magic() != CM_MAGIC {
            return Err(WireError::field("magic", u32::from_le_bytes(v.magic())));
        }
        WireError::check_version(v.version(), PROTO_VERSION)?;
        let kind = CmKind::from_field("kind", v.kind())?;
        let data_len = v.data_len();
        if usize::from(data_len) > CM_DATA_SIZE {
            return Err(WireError::field("data_len", data_len));
        }
        Ok(CmHdr { kind, data_len })
    }
}

/// A whole CM message (header and data) encoded.
pub fn cm_message(kind: CmKind, data: &[u8]) -> Vec<u8> {
    let data = &data[..data.len().min(CM_DATA_SIZE)];
    let mut v = CmView::with_payload(data);
    CmHdr {
        kind,
        data_len: data.len() as u16,
    }
    .emit(&mut v);
    v.into_inner()
}

/// Parse any byte string as the provider would meet it (a CM message, then operation
/// headers with their iovs): what the fuzz target and the inline test drive. Returns
/// how many structures parsed before the first error.
pub fn parse_stream(mut b: &[u8]) -> usize {
    let mut n = 0;
    let Ok(cm) = CmHdr::parse(b) else {
        return n;
    };
    n += 1;
    b = b
        .get(CM_HDR_LEN + usize::from(cm.data_len)..)
        .unwrap_or_default();
    while let Ok(h) = Hdr::parse(b) {
        n += 1;
        b = b.get(HDR_LEN..).unwrap_or_default();
        for _ in 0..h.rma_cnt {
            if RmaIov::from_bytes(b).is_err() {
                return n;
            }
            b = b.get(RMA_IOV_LEN..).unwrap_or_default();
        }
        // A same-host descriptor carries no payload: the data stays with the sender.
        let skip = if h.flags & FLAG_LOCAL != 0 {
            0
        } else {
            usize::try_from(h.size).unwrap_or(usize::MAX)
        };
        b = b.get(skip..).unwrap_or_default();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `h` encoded, then parsed back (with every check).
    fn reparsed(h: &Hdr) -> Result<Hdr, WireError> {
        let mut b = [0u8; HDR_LEN];
        h.encode(&mut b);
        Hdr::parse(&b)
    }

    #[test]
    fn header_roundtrip() {
        let h = Hdr {
            op: Op::Write,
            flags: FLAG_CQ_DATA,
            rma_cnt: 2,
            atomic_op: 0,
            datatype: 0,
            status: 0,
            size: 1 << 33,
            data: 0xdead_beef,
            tag: 7,
            id: 99,
        };
        assert_eq!(reparsed(&h), Ok(h));
    }

    /// The bytes on the wire, spelled out (the layout table of the module docs).
    #[test]
    fn wire_bytes_are_the_documented_layout() {
        let h = Hdr {
            op: Op::AtomicFetch,
            flags: FLAG_CQ_DATA,
            rma_cnt: 1,
            atomic_op: 3,
            datatype: 4,
            status: 0x0506,
            size: 0x1112_1314_1516_1718,
            data: 0x2122_2324_2526_2728,
            tag: 0x3132_3334_3536_3738,
            id: 0x4142_4344_4546_4748,
        };
        let mut b = [0u8; HDR_LEN];
        h.encode(&mut b);
        let mut want = vec![PROTO_VERSION, 8, 1, 1, 3, 4, 0x06, 0x05];
        for base in [0x18u8, 0x28, 0x38, 0x48] {
            want.extend((0..8).map(|i| base - i));
        }
        assert_eq!(b.to_vec(), want);
        // The remote iovs after it are kit's remote buffer, pinned by kit's wire tests.
        let c = CmHdr {
            kind: CmKind::ConnResp,
            data_len: 0x0102,
        }
        .encode();
        assert_eq!(c, [b'o', b'f', b't', b'c', PROTO_VERSION, 2, 0x02, 0x01]);
    }

    #[test]
    fn header_checks() {
        let mut b = [0u8; HDR_LEN];
        Hdr::new(Op::Msg).encode(&mut b);
        assert!(Hdr::parse(&b).is_ok());
        assert_eq!(
            Hdr::parse(&b[..10]),
            Err(WireError::Truncated { need: 40, have: 10 })
        );
        // (offset, byte written there, the error naming it)
        let corruptions = [
            (0, 9, WireError::version(9u8, PROTO_VERSION)),
            (1, 0, WireError::field("op", 0u8)),
            (2, 0x80, WireError::field("flags", 0x80u8)),
            (3, 1, WireError::field("rma_cnt", 1u8)),
            (6, 1, WireError::field("status", 1u16)),
        ];
        ofi_testkit::wire::assert_each_corruption(&b, &corruptions, Hdr::parse);
        let mut h = Hdr::new(Op::Write);
        h.rma_cnt = 5;
        assert_eq!(reparsed(&h), Err(WireError::field("rma_cnt", 5u8)));
        h.rma_cnt = 0;
        assert_eq!(reparsed(&h), Err(WireError::field("rma_cnt", 0u8)));
        let mut a = Hdr::new(Op::AtomicFetch);
        a.rma_cnt = 2;
        assert_eq!(reparsed(&a), Err(WireError::field("rma_cnt", 2u8)));
    }

    #[test]
    fn local_descriptor_checks() {
        let mut m = Hdr::new(Op::Tagged);
        m.flags = FLAG_LOCAL | FLAG_ACK_REQ;
        m.rma_cnt = 2;
        assert_eq!(reparsed(&m), Ok(m));
        m.rma_cnt = 0;
        assert_eq!(reparsed(&m), Err(WireError::field("rma_cnt", 0u8)));
        let mut wr = Hdr::new(Op::Write);
        wr.flags = FLAG_LOCAL;
        wr.rma_cnt = 1;
        assert_eq!(reparsed(&wr), Err(WireError::field("flags", FLAG_LOCAL)));
        let mut r = Hdr::new(Op::LocalReadReq);
        r.rma_cnt = 1;
        assert_eq!(reparsed(&r), Err(WireError::field("rma_cnt", 1u8)));
        r.rma_cnt = 2;
        r.tag = 1;
        assert_eq!(reparsed(&r), Ok(r));
        let mut rsp = Hdr::new(Op::ReadRsp);
        rsp.flags = FLAG_LOCAL;
        rsp.status = 14;
        assert_eq!(reparsed(&rsp), Ok(rsp));
        for op in [Op::LocalOffer, Op::LocalProof, Op::LocalOk] {
            let mut h = Hdr::new(op);
            h.data = 42;
            assert_eq!(reparsed(&h), Ok(h));
            h.rma_cnt = 1;
            assert_eq!(reparsed(&h), Err(WireError::field("rma_cnt", 1u8)));
        }
    }

    #[test]
    fn cm_roundtrip_and_checks() {
        let m = cm_message(CmKind::Reject, b"no thanks");
        let h = CmHdr::parse(&m).unwrap();
        assert_eq!(h.kind, CmKind::Reject);
        assert_eq!(&m[CM_HDR_LEN..], b"no thanks");
        let mut bad = m.clone();
        bad[0] = b'X';
        assert!(is_foreign(&CmHdr::parse(&bad).unwrap_err()));
        let mut bad = m.clone();
        bad[4] = 1;
        assert_eq!(
            CmHdr::parse(&bad),
            Err(WireError::version(1u8, PROTO_VERSION))
        );
        assert!(is_foreign(&CmHdr::parse(&bad).unwrap_err()));
        let mut bad = m.clone();
        bad[5] = 7;
        assert_eq!(CmHdr::parse(&bad), Err(WireError::field("kind", 7u8)));
        let mut bad = m;
        bad[6..8].copy_from_slice(&300u16.to_le_bytes());
        assert_eq!(
            CmHdr::parse(&bad),
            Err(WireError::field("data_len", 300u16))
        );
        // Data is capped at CM_DATA_SIZE when encoding.
        assert_eq!(cm_message(CmKind::ConnReq, &[1u8; 999]).len(), 8 + 256);
    }

    /// Arbitrary and truncated bytes never panic (a cheap in-tree stand-in for the fuzz
    /// target: a deterministic generator over many lengths and every truncation of a
    /// valid stream).
    #[test]
    fn arbitrary_and_truncated_bytes_never_panic() {
        let mut valid = cm_message(CmKind::ConnReq, b"hello");
        let mut h = Hdr::new(Op::Write);
        h.rma_cnt = 1;
        h.size = 3;
        let mut hb = [0u8; HDR_LEN];
        h.encode(&mut hb);
        valid.extend_from_slice(&hb);
        valid.extend_from_slice(&RmaIov::default().bytes());
        valid.extend_from_slice(b"abc");
        assert_eq!(parse_stream(&valid), 2);
        for cut in 0..valid.len() {
            let _ = parse_stream(&valid[..cut]);
            let _ = Hdr::parse(&valid[..cut]);
            let _ = CmHdr::parse(&valid[..cut]);
        }
        let mut rng = ofi_testkit::TestRng::seeded(0x9e37_79b9_7f4a_7c15);
        for len in 0..2000usize {
            let mut buf = rng.bytes(len);
            if len > 8 {
                buf[..8].copy_from_slice(&valid[..8]);
            }
            let _ = parse_stream(&buf);
            let _ = Hdr::parse(&buf);
            let _ = RmaIov::from_bytes(&buf);
        }
    }
}
