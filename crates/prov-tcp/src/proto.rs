//! The wire format of the `tcp` provider (version [`PROTO_VERSION`]).
//!
//! Everything is little-endian. A connection carries, in order:
//!
//! 1. **Connection management** ([`CmHdr`], 8 bytes, then up to [`CM_DATA_SIZE`] bytes
//!    of application data). The connecting side sends [`CmKind::ConnReq`]; the
//!    listening side answers [`CmKind::ConnResp`] (accepted) or [`CmKind::Reject`]
//!    (then closes). Layout: magic `b"oftc"` (4), version u8, kind u8, data length u16.
//!    A magic or version mismatch is [`ProtoError::BadMagic`] /
//!    [`ProtoError::Version`]; the endpoint reports it as `FI_ENOPROTOOPT`.
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
//! limits here ([`Hdr::parse`], [`CmHdr::parse`], [`RmaIov::parse`]); the payload
//! length is checked against the receiver's `max_msg_size` by the endpoint. Nothing in
//! this module panics (fuzzed by `fuzz/fuzz_targets/proto.rs` and an inline test).

use std::fmt;

/// Version of the operation header and the CM messages.
pub const PROTO_VERSION: u8 = 2;
/// Bytes of an operation header.
pub const HDR_LEN: usize = 40;
/// Bytes of one remote iov.
pub const RMA_IOV_LEN: usize = 24;
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

/// Why bytes from a peer were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// Fewer bytes than the structure needs.
    Short {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// The CM magic is wrong.
    BadMagic,
    /// Another protocol version.
    Version(u8),
    /// An unknown operation code.
    Op(u8),
    /// An unknown CM message kind.
    CmKind(u8),
    /// Unknown flag bits.
    Flags(u8),
    /// Too many (or, for the operation, a wrong number of) remote iovs.
    RmaCount(u8),
    /// CM data longer than [`CM_DATA_SIZE`].
    CmDataLen(u16),
    /// A field that must be zero for this operation is not.
    Field(&'static str),
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::Short { need, got } => write!(f, "short message: {got} of {need} bytes"),
            ProtoError::BadMagic => f.write_str("not an ofi-rs tcp connection (bad magic)"),
            ProtoError::Version(v) => {
                write!(f, "protocol version {v} (this side speaks {PROTO_VERSION})")
            }
            ProtoError::Op(o) => write!(f, "unknown operation {o}"),
            ProtoError::CmKind(k) => write!(f, "unknown CM message kind {k}"),
            ProtoError::Flags(x) => write!(f, "unknown header flags {x:#x}"),
            ProtoError::RmaCount(n) => write!(f, "bad remote iov count {n}"),
            ProtoError::CmDataLen(n) => {
                write!(f, "CM data of {n} bytes (at most {CM_DATA_SIZE})")
            }
            ProtoError::Field(name) => write!(f, "field {name} must be zero here"),
        }
    }
}

impl std::error::Error for ProtoError {}

/// Operation codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
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

impl Op {
    /// From the wire byte.
    pub fn from_u8(v: u8) -> Result<Op, ProtoError> {
        Ok(match v {
            1 => Op::Msg,
            2 => Op::Tagged,
            3 => Op::Write,
            4 => Op::ReadReq,
            5 => Op::ReadRsp,
            6 => Op::Ack,
            7 => Op::Atomic,
            8 => Op::AtomicFetch,
            9 => Op::AtomicCompare,
            10 => Op::AtomicRsp,
            11 => Op::LocalOffer,
            12 => Op::LocalProof,
            13 => Op::LocalOk,
            14 => Op::LocalReadReq,
            _ => return Err(ProtoError::Op(v)),
        })
    }

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

    /// Write the header into `out`.
    pub fn encode(&self, out: &mut [u8; HDR_LEN]) {
        out[0] = PROTO_VERSION;
        out[1] = self.op as u8;
        out[2] = self.flags;
        out[3] = self.rma_cnt;
        out[4] = self.atomic_op;
        out[5] = self.datatype;
        out[6..8].copy_from_slice(&self.status.to_le_bytes());
        out[8..16].copy_from_slice(&self.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.data.to_le_bytes());
        out[24..32].copy_from_slice(&self.tag.to_le_bytes());
        out[32..40].copy_from_slice(&self.id.to_le_bytes());
    }

    /// Parse and check a header from untrusted bytes (at least [`HDR_LEN`]; extra bytes
    /// are ignored).
    ///
    /// # Errors
    /// [`ProtoError`] for short input, a foreign version, an unknown op or flag, a
    /// remote iov count that does not fit the op, or atomic fields on other ops.
    pub fn parse(b: &[u8]) -> Result<Hdr, ProtoError> {
        let Some(b) = b.get(..HDR_LEN) else {
            return Err(ProtoError::Short {
                need: HDR_LEN,
                got: b.len(),
            });
        };
        if b[0] != PROTO_VERSION {
            return Err(ProtoError::Version(b[0]));
        }
        let op = Op::from_u8(b[1])?;
        let flags = b[2];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(ProtoError::Flags(flags));
        }
        let rma_cnt = b[3];
        let local = flags & FLAG_LOCAL != 0;
        if local && !matches!(op, Op::Msg | Op::Tagged | Op::ReadRsp) {
            return Err(ProtoError::Field("local flag"));
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
            return Err(ProtoError::RmaCount(rma_cnt));
        }
        if !op.is_atomic() && (b[4] != 0 || b[5] != 0) {
            return Err(ProtoError::Field("atomic op / datatype"));
        }
        let status = u16::from_le_bytes([b[6], b[7]]);
        if !op.is_response() && status != 0 {
            return Err(ProtoError::Field("status"));
        }
        Ok(Hdr {
            op,
            flags,
            rma_cnt,
            atomic_op: b[4],
            datatype: b[5],
            status,
            size: le64(&b[8..16]),
            data: le64(&b[16..24]),
            tag: le64(&b[24..32]),
            id: le64(&b[32..40]),
        })
    }
}

fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// A remote iov (`struct fi_rma_iov`) as the wire carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmaIov {
    /// Remote address (virtual address or offset, per the target's `mr_mode`).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Memory key.
    pub key: u64,
}

impl RmaIov {
    /// Write into `out` (24 bytes).
    pub fn encode(&self, out: &mut [u8]) {
        if out.len() >= RMA_IOV_LEN {
            out[0..8].copy_from_slice(&self.addr.to_le_bytes());
            out[8..16].copy_from_slice(&self.len.to_le_bytes());
            out[16..24].copy_from_slice(&self.key.to_le_bytes());
        }
    }

    /// Parse from untrusted bytes.
    ///
    /// # Errors
    /// [`ProtoError::Short`] with fewer than 24 bytes.
    pub fn parse(b: &[u8]) -> Result<RmaIov, ProtoError> {
        let Some(b) = b.get(..RMA_IOV_LEN) else {
            return Err(ProtoError::Short {
                need: RMA_IOV_LEN,
                got: b.len(),
            });
        };
        Ok(RmaIov {
            addr: le64(&b[0..8]),
            len: le64(&b[8..16]),
            key: le64(&b[16..24]),
        })
    }
}

/// CM message kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CmKind {
    /// Connection request (initiator → listener).
    ConnReq = 1,
    /// Accepted (listener → initiator).
    ConnResp = 2,
    /// Rejected (listener → initiator; the listener then closes).
    Reject = 3,
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
    /// Encode into 8 bytes.
    pub fn encode(&self) -> [u8; CM_HDR_LEN] {
        let mut b = [0u8; CM_HDR_LEN];
        b[..4].copy_from_slice(&CM_MAGIC);
        b[4] = PROTO_VERSION;
        b[5] = self.kind as u8;
        b[6..8].copy_from_slice(&self.data_len.to_le_bytes());
        b
    }

    /// Parse and check from untrusted bytes.
    ///
    /// # Errors
    /// Short input, bad magic, foreign version, unknown kind, or data longer than
    /// [`CM_DATA_SIZE`].
    pub fn parse(b: &[u8]) -> Result<CmHdr, ProtoError> {
        let Some(b) = b.get(..CM_HDR_LEN) else {
            return Err(ProtoError::Short {
                need: CM_HDR_LEN,
                got: b.len(),
            });
        };
        if b[..4] != CM_MAGIC {
            return Err(ProtoError::BadMagic);
        }
        if b[4] != PROTO_VERSION {
            return Err(ProtoError::Version(b[4]));
        }
        let kind = match b[5] {
            1 => CmKind::ConnReq,
            2 => CmKind::ConnResp,
            3 => CmKind::Reject,
            k => return Err(ProtoError::CmKind(k)),
        };
        let data_len = u16::from_le_bytes([b[6], b[7]]);
        if usize::from(data_len) > CM_DATA_SIZE {
            return Err(ProtoError::CmDataLen(data_len));
        }
        Ok(CmHdr { kind, data_len })
    }
}

/// A whole CM message (header and data) encoded.
pub fn cm_message(kind: CmKind, data: &[u8]) -> Vec<u8> {
    let n = data.len().min(CM_DATA_SIZE);
    let mut v = Vec::with_capacity(CM_HDR_LEN + n);
    v.extend_from_slice(
        &CmHdr {
            kind,
            data_len: n as u16,
        }
        .encode(),
    );
    v.extend_from_slice(&data[..n]);
    v
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
            if RmaIov::parse(b).is_err() {
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
        let mut b = [0u8; HDR_LEN];
        h.encode(&mut b);
        assert_eq!(Hdr::parse(&b), Ok(h));
    }

    #[test]
    fn header_checks() {
        let mut b = [0u8; HDR_LEN];
        Hdr::new(Op::Msg).encode(&mut b);
        assert!(Hdr::parse(&b).is_ok());
        assert_eq!(
            Hdr::parse(&b[..10]),
            Err(ProtoError::Short { need: 40, got: 10 })
        );
        let mut v = b;
        v[0] = 9;
        assert_eq!(Hdr::parse(&v), Err(ProtoError::Version(9)));
        let mut v = b;
        v[1] = 0;
        assert_eq!(Hdr::parse(&v), Err(ProtoError::Op(0)));
        let mut v = b;
        v[2] = 0x80;
        assert_eq!(Hdr::parse(&v), Err(ProtoError::Flags(0x80)));
        let mut v = b;
        v[3] = 1;
        assert_eq!(Hdr::parse(&v), Err(ProtoError::RmaCount(1)));
        let mut v = b;
        v[6] = 1;
        assert_eq!(Hdr::parse(&v), Err(ProtoError::Field("status")));
        let mut w = [0u8; HDR_LEN];
        let mut h = Hdr::new(Op::Write);
        h.rma_cnt = 5;
        h.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(5)));
        h.rma_cnt = 0;
        h.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(0)));
        let mut a = Hdr::new(Op::AtomicFetch);
        a.rma_cnt = 2;
        a.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(2)));
    }

    #[test]
    fn local_descriptor_checks() {
        let mut w = [0u8; HDR_LEN];
        let mut m = Hdr::new(Op::Tagged);
        m.flags = FLAG_LOCAL | FLAG_ACK_REQ;
        m.rma_cnt = 2;
        m.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Ok(m));
        m.rma_cnt = 0;
        m.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(0)));
        let mut wr = Hdr::new(Op::Write);
        wr.flags = FLAG_LOCAL;
        wr.rma_cnt = 1;
        wr.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::Field("local flag")));
        let mut r = Hdr::new(Op::LocalReadReq);
        r.rma_cnt = 1;
        r.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(1)));
        r.rma_cnt = 2;
        r.tag = 1;
        r.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Ok(r));
        let mut rsp = Hdr::new(Op::ReadRsp);
        rsp.flags = FLAG_LOCAL;
        rsp.status = 14;
        rsp.encode(&mut w);
        assert_eq!(Hdr::parse(&w), Ok(rsp));
        for op in [Op::LocalOffer, Op::LocalProof, Op::LocalOk] {
            let mut h = Hdr::new(op);
            h.data = 42;
            h.encode(&mut w);
            assert_eq!(Hdr::parse(&w), Ok(h));
            h.rma_cnt = 1;
            h.encode(&mut w);
            assert_eq!(Hdr::parse(&w), Err(ProtoError::RmaCount(1)));
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
        assert_eq!(CmHdr::parse(&bad), Err(ProtoError::BadMagic));
        let mut bad = m.clone();
        bad[4] = 1;
        assert_eq!(CmHdr::parse(&bad), Err(ProtoError::Version(1)));
        let mut bad = m.clone();
        bad[5] = 7;
        assert_eq!(CmHdr::parse(&bad), Err(ProtoError::CmKind(7)));
        let mut bad = m;
        bad[6..8].copy_from_slice(&300u16.to_le_bytes());
        assert_eq!(CmHdr::parse(&bad), Err(ProtoError::CmDataLen(300)));
        // Data is capped at CM_DATA_SIZE when encoding.
        assert_eq!(cm_message(CmKind::ConnReq, &[1u8; 999]).len(), 8 + 256);
    }

    #[test]
    fn rma_iov_roundtrip() {
        let r = RmaIov {
            addr: 1,
            len: 2,
            key: 3,
        };
        let mut b = [0u8; RMA_IOV_LEN];
        r.encode(&mut b);
        assert_eq!(RmaIov::parse(&b), Ok(r));
        assert!(RmaIov::parse(&b[..23]).is_err());
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
        let mut rb = [0u8; RMA_IOV_LEN];
        RmaIov::default().encode(&mut rb);
        valid.extend_from_slice(&rb);
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
            let _ = RmaIov::parse(&buf);
        }
    }
}
