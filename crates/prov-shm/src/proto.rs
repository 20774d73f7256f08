//! The wire format of one ring slot and one acknowledgement entry, with a checked
//! parser for bytes read from shared memory (a peer may have written anything there).
//!
//! # Slot (`SLOT_SIZE` = 256 bytes)
//!
//! ```text
//! +0  seq u64 (the ring's publish word, see crate::ring)
//! +8  kind u8   +9 flags u8   +10 iov count u8   +11 reserved u8   +12 length u32
//! +16 tag u64   +24 cq data u64
//! +32 body:
//!     INLINE: +0 message id u64 (for FI_DELIVERY_COMPLETE acks), +8 payload (≤ INLINE_CAP)
//!     RTS:    +0 total u64, +8 message id u64, +16 up to 4 × (address u64, length u64)
//!     BOUNCE: +0 total u64, +8 message id u64, +16 offset u64, +24 chunk u32, +28 chunk length u32
//!     WRITE, READ: +0 total u64, +8 id u64, +16 key u64, +24 remote address u64,
//!             +32 up to 4 × (initiator address u64, length u64)
//!     WRITE_FRAG: +0 total u64, +8 id u64, +16 key u64, +24 remote address u64,
//!             +32 offset u64, +40 chunk u32, +44 chunk length u32
//!     ATOMIC: +0 count u64, +8 id u64, +16 key u64, +24 remote address u64, +32 op u8,
//!             +33 datatype u8, +34 family u8 (0 base, 1 fetch, 2 compare), +35 inline u8,
//!             +40 operand address u64, +48 compare address u64, +56 result address u64,
//!             +64 inline operand then compare bytes (≤ ATOMIC_INLINE_CAP)
//!     WRITE_INLINE: +0 length u64, +8 id u64, +16 key u64, +24 remote address u64,
//!             +32 data (≤ RMA_INLINE_CAP)
//! ```
//!
//! # Ack entry (`ACK_SIZE` = 32 bytes)
//!
//! `+0 seq u64, +8 message id u64, +16 status i32` (0, or a positive `FI_*` code).
//!
//! [`parse`] never panics; every field is checked against the limits of the receiving
//! region's geometry before the caller uses it.

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};

use crate::region::{Geometry, SLOT_HDR, SLOT_SIZE};

/// Wire value of an atomic call family.
pub fn kind_to_u8(k: AtomicKind) -> u8 {
    match k {
        AtomicKind::Base => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

fn kind_from_u8(v: u8) -> Option<AtomicKind> {
    Some(match v {
        0 => AtomicKind::Base,
        1 => AtomicKind::Fetch,
        2 => AtomicKind::Compare,
        _ => return None,
    })
}

/// Operand + compare bytes an atomic carries (`count` elements of `dt`).
pub fn atomic_data_len(
    op: AtomicOp,
    dt: Datatype,
    kind: AtomicKind,
    count: usize,
) -> Option<usize> {
    let bytes = count.checked_mul(dt.size())?;
    let operand = if op == AtomicOp::AtomicRead { 0 } else { bytes };
    let compare = if kind == AtomicKind::Compare {
        bytes
    } else {
        0
    };
    operand.checked_add(compare)
}

/// Data in the slot.
pub const KIND_INLINE: u8 = 1;
/// Request to read the sender's memory with CMA.
pub const KIND_RTS: u8 = 2;
/// One fragment through a bounce chunk.
pub const KIND_BOUNCE: u8 = 3;

/// RMA write: the target copies from the initiator's buffers with CMA.
pub const KIND_WRITE: u8 = 4;
/// RMA write with the data in the slot.
pub const KIND_WRITE_INLINE: u8 = 5;
/// RMA read: the target copies into the initiator's buffers with CMA.
pub const KIND_READ: u8 = 6;

/// One fragment of an RMA write through a bounce chunk.
pub const KIND_WRITE_FRAG: u8 = 8;

/// Atomic operation: applied by the target with the kit's engine.
pub const KIND_ATOMIC: u8 = 7;

/// A tagged message.
pub const F_TAGGED: u8 = 1;
/// Carries remote CQ data.
pub const F_DATA: u8 = 2;
/// The sender waits for an acknowledgement (`FI_DELIVERY_COMPLETE`).
pub const F_ACK: u8 = 4;

/// Largest payload of an inline slot.
pub const INLINE_CAP: usize = SLOT_SIZE - SLOT_HDR - 8;
/// Most remote buffers an RTS carries.
pub const RTS_IOVS: usize = 4;
/// Bytes of slot header + body that [`parse`] looks at.
pub const PARSE_LEN: usize = SLOT_HDR + 32 + 16 * RTS_IOVS;
/// Offset (from the slot) of an inline RMA write's data.
pub const RMA_INLINE_OFF: usize = SLOT_HDR + 32;
/// Largest inline RMA write.
pub const RMA_INLINE_CAP: usize = SLOT_SIZE - RMA_INLINE_OFF;
/// Offset (from the slot) of an atomic's inline operand (then compare) bytes.
pub const ATOMIC_INLINE_OFF: usize = SLOT_HDR + 64;
/// Most inline operand + compare bytes of an atomic.
pub const ATOMIC_INLINE_CAP: usize = SLOT_SIZE - ATOMIC_INLINE_OFF;

/// `inject_size`: what `fi_inject*`, `fi_inject_write*` and the `FI_INJECT` flag
/// accept (the C provider's figure). Data that does not fit a slot goes into a bounce
/// chunk at once, or, when none is free (or the write is an RMA one), into a private
/// copy the operation owns until it is sent. Atomics inject only what fits a slot
/// ([`ATOMIC_INLINE_CAP`] bytes of operands).
pub const INJECT_SIZE: usize = 4096;

/// Offset (from the slot) of an inline payload.
pub const INLINE_OFF: usize = SLOT_HDR + 8;

/// A parsed slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Flags (`F_*`).
    pub flags: u8,
    /// Tag.
    pub tag: u64,
    /// CQ data.
    pub data: u64,
    /// The body.
    pub body: Body,
}

/// A parsed slot body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// RMA write or read through CMA.
    Rma {
        /// Read (the target writes into the initiator) or write.
        read: bool,
        /// Bytes.
        total: usize,
        /// Operation id (acknowledged).
        id: u64,
        /// Memory key at the target.
        key: u64,
        /// Remote address (or offset) at the target.
        raddr: u64,
        /// The initiator's buffers.
        iov: [(u64, u64); RTS_IOVS],
        /// How many of `iov` are used (1..=4).
        niov: usize,
    },
    /// One fragment of an RMA write through a bounce chunk.
    WriteFrag {
        /// Bytes of the whole write.
        total: usize,
        /// Operation id (acknowledged after the last fragment).
        id: u64,
        /// Memory key at the target.
        key: u64,
        /// Remote address (or offset) of the whole write at the target.
        raddr: u64,
        /// Where this fragment goes in the write.
        offset: usize,
        /// The chunk holding it (< chunks).
        chunk: usize,
        /// Its length (1..=chunk size, `offset + clen ≤ total`).
        clen: usize,
    },
    /// An atomic operation.
    Atomic {
        /// Elements.
        count: usize,
        /// Operation id (acknowledged with `F_ACK`).
        id: u64,
        /// Memory key at the target.
        key: u64,
        /// Remote address (or offset) at the target.
        raddr: u64,
        /// The operation.
        op: AtomicOp,
        /// The datatype.
        dt: Datatype,
        /// The call family.
        kind: AtomicKind,
        /// Operand and compare bytes are in the slot.
        inline: bool,
        /// The initiator's operand, compare and result buffers.
        bufs: [u64; 3],
    },
    /// RMA write with the data in the slot.
    WriteInline {
        /// Bytes (≤ [`RMA_INLINE_CAP`]).
        len: usize,
        /// Operation id (acknowledged with `F_ACK`).
        id: u64,
        /// Memory key at the target.
        key: u64,
        /// Remote address (or offset) at the target.
        raddr: u64,
    },
    /// Data inline.
    Inline {
        /// Payload length (≤ [`INLINE_CAP`]).
        len: usize,
        /// Message id (meaningful with `F_ACK`).
        id: u64,
    },
    /// CMA request.
    Rts {
        /// Message length (= the sum of the iov lengths).
        total: usize,
        /// Message id.
        id: u64,
        /// Remote buffers.
        iov: [(u64, u64); RTS_IOVS],
        /// How many of `iov` are used (1..=4).
        niov: usize,
    },
    /// A bounce fragment.
    Bounce {
        /// Message length.
        total: usize,
        /// Message id.
        id: u64,
        /// Where this fragment goes in the message.
        offset: usize,
        /// The chunk holding it (< chunks).
        chunk: usize,
        /// Its length (≤ chunk size, `offset + clen ≤ total`).
        clen: usize,
    },
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parse the first [`PARSE_LEN`] bytes of a slot, checking every field against `geo`
/// and `max_msg`. The error says what was wrong.
pub fn parse(b: &[u8], geo: &Geometry, max_msg: usize) -> Result<Slot, &'static str> {
    if b.len() < PARSE_LEN {
        return Err("slot too short");
    }
    let kind = b[8];
    let flags = b[9];
    let niov = b[10] as usize;
    let len = u32_at(b, 12).ok_or("short")? as usize;
    let tag = u64_at(b, 16).ok_or("short")?;
    let data = u64_at(b, 24).ok_or("short")?;
    if flags & !(F_TAGGED | F_DATA | F_ACK) != 0 {
        return Err("unknown flags");
    }
    let body_at = SLOT_HDR;
    let body = match kind {
        KIND_INLINE => {
            if len > INLINE_CAP {
                return Err("inline length over the slot capacity");
            }
            Body::Inline {
                len,
                id: u64_at(b, body_at).ok_or("short")?,
            }
        }
        KIND_RTS => {
            if niov == 0 || niov > RTS_IOVS {
                return Err("RTS iov count outside 1..=4");
            }
            let total = u64_at(b, body_at).ok_or("short")?;
            let id = u64_at(b, body_at + 8).ok_or("short")?;
            let mut iov = [(0u64, 0u64); RTS_IOVS];
            let mut sum: u64 = 0;
            for (i, e) in iov.iter_mut().enumerate().take(niov) {
                let a = u64_at(b, body_at + 16 + 16 * i).ok_or("short")?;
                let l = u64_at(b, body_at + 24 + 16 * i).ok_or("short")?;
                sum = sum.checked_add(l).ok_or("RTS lengths overflow")?;
                *e = (a, l);
            }
            if sum != total || total > max_msg as u64 {
                return Err("RTS total does not match its iovs or exceeds max_msg_size");
            }
            Body::Rts {
                total: total as usize,
                id,
                iov,
                niov,
            }
        }
        KIND_BOUNCE => {
            let total = u64_at(b, body_at).ok_or("short")?;
            let id = u64_at(b, body_at + 8).ok_or("short")?;
            let offset = u64_at(b, body_at + 16).ok_or("short")?;
            let chunk = u32_at(b, body_at + 24).ok_or("short")? as usize;
            let clen = u32_at(b, body_at + 28).ok_or("short")? as u64;
            if total > max_msg as u64 {
                return Err("bounce total exceeds max_msg_size");
            }
            if chunk >= geo.chunks {
                return Err("bounce chunk index out of range");
            }
            if clen == 0 || clen > geo.chunk_size as u64 {
                return Err("bounce fragment length outside 1..=chunk size");
            }
            match offset.checked_add(clen) {
                Some(end) if end <= total => {}
                _ => return Err("bounce fragment beyond the message"),
            }
            Body::Bounce {
                total: total as usize,
                id,
                offset: offset as usize,
                chunk,
                clen: clen as usize,
            }
        }
        KIND_WRITE | KIND_READ => {
            if niov == 0 || niov > RTS_IOVS {
                return Err("RMA iov count outside 1..=4");
            }
            let total = u64_at(b, body_at).ok_or("short")?;
            let id = u64_at(b, body_at + 8).ok_or("short")?;
            let key = u64_at(b, body_at + 16).ok_or("short")?;
            let raddr = u64_at(b, body_at + 24).ok_or("short")?;
            let mut iov = [(0u64, 0u64); RTS_IOVS];
            let mut sum: u64 = 0;
            for (i, e) in iov.iter_mut().enumerate().take(niov) {
                let a = u64_at(b, body_at + 32 + 16 * i).ok_or("short")?;
                let l = u64_at(b, body_at + 40 + 16 * i).ok_or("short")?;
                sum = sum.checked_add(l).ok_or("RMA lengths overflow")?;
                *e = (a, l);
            }
            if sum != total || total > max_msg as u64 {
                return Err("RMA total does not match its iovs or exceeds max_msg_size");
            }
            Body::Rma {
                read: kind == KIND_READ,
                total: total as usize,
                id,
                key,
                raddr,
                iov,
                niov,
            }
        }
        KIND_WRITE_FRAG => {
            let total = u64_at(b, body_at).ok_or("short")?;
            let id = u64_at(b, body_at + 8).ok_or("short")?;
            let key = u64_at(b, body_at + 16).ok_or("short")?;
            let raddr = u64_at(b, body_at + 24).ok_or("short")?;
            let offset = u64_at(b, body_at + 32).ok_or("short")?;
            let chunk = u32_at(b, body_at + 40).ok_or("short")? as usize;
            let clen = u32_at(b, body_at + 44).ok_or("short")? as u64;
            if total > max_msg as u64 {
                return Err("RMA write exceeds max_msg_size");
            }
            if chunk >= geo.chunks {
                return Err("RMA fragment chunk index out of range");
            }
            if clen == 0 || clen > geo.chunk_size as u64 {
                return Err("RMA fragment length outside 1..=chunk size");
            }
            match offset.checked_add(clen) {
                Some(end) if end <= total => {}
                _ => return Err("RMA fragment beyond the write"),
            }
            Body::WriteFrag {
                total: total as usize,
                id,
                key,
                raddr,
                offset: offset as usize,
                chunk,
                clen: clen as usize,
            }
        }
        KIND_ATOMIC => {
            let count = u64_at(b, body_at).ok_or("short")?;
            let id = u64_at(b, body_at + 8).ok_or("short")?;
            let key = u64_at(b, body_at + 16).ok_or("short")?;
            let raddr = u64_at(b, body_at + 24).ok_or("short")?;
            let op = AtomicOp::from_raw(b[body_at + 32] as u32).ok_or("unknown atomic op")?;
            let dt = Datatype::from_raw(b[body_at + 33] as u32).ok_or("unknown datatype")?;
            let kind = kind_from_u8(b[body_at + 34]).ok_or("unknown atomic family")?;
            let inline = match b[body_at + 35] {
                0 => false,
                1 => true,
                _ => return Err("bad atomic inline flag"),
            };
            let bytes = (count as usize)
                .checked_mul(dt.size())
                .filter(|&n| n <= max_msg && count <= max_msg as u64)
                .ok_or("atomic exceeds max_msg_size")?;
            let data = atomic_data_len(op, dt, kind, count as usize).ok_or("atomic overflows")?;
            if inline && data > ATOMIC_INLINE_CAP {
                return Err("inline atomic data over the slot capacity");
            }
            let _ = bytes;
            Body::Atomic {
                count: count as usize,
                id,
                key,
                raddr,
                op,
                dt,
                kind,
                inline,
                bufs: [
                    u64_at(b, body_at + 40).ok_or("short")?,
                    u64_at(b, body_at + 48).ok_or("short")?,
                    u64_at(b, body_at + 56).ok_or("short")?,
                ],
            }
        }
        KIND_WRITE_INLINE => {
            let l = u64_at(b, body_at).ok_or("short")?;
            if l > RMA_INLINE_CAP as u64 || len as u64 != l {
                return Err("inline RMA length over the slot capacity");
            }
            Body::WriteInline {
                len: l as usize,
                id: u64_at(b, body_at + 8).ok_or("short")?,
                key: u64_at(b, body_at + 16).ok_or("short")?,
                raddr: u64_at(b, body_at + 24).ok_or("short")?,
            }
        }
        _ => return Err("unknown slot kind"),
    };
    Ok(Slot {
        flags,
        tag,
        data,
        body,
    })
}

/// The header of an inline slot (the common case, parsed without building a [`Slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InlineHdr {
    /// Flags (`F_*`).
    pub flags: u8,
    /// Payload length (≤ [`INLINE_CAP`]).
    pub len: usize,
    /// Tag.
    pub tag: u64,
    /// CQ data.
    pub data: u64,
    /// Message id (meaningful with `F_ACK`).
    pub id: u64,
}

/// The first [`INLINE_OFF`] bytes of a slot as an inline header, checked as [`parse`]
/// checks an inline slot; `None` when the slot is not a valid inline one (then
/// [`parse`] says what it is, or what is wrong).
#[inline]
pub fn parse_inline(b: &[u8; INLINE_OFF]) -> Option<InlineHdr> {
    let w = |off: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[off..off + 8]);
        u64::from_le_bytes(x)
    };
    parse_inline_words(w(8), w(16), w(24), || w(SLOT_HDR))
}

/// [`parse_inline`] of a slot's words as read from it: the kind/flags/length word
/// (offset 8), the tag (16), the data (24) and, read only for a valid inline slot, the
/// message id (`SLOT_HDR`). The same checks as [`parse_inline`].
#[inline]
pub fn parse_inline_words(
    h: u64,
    tag: u64,
    data: u64,
    id: impl FnOnce() -> u64,
) -> Option<InlineHdr> {
    let (kind, flags, len) = (h as u8, (h >> 8) as u8, (h >> 32) as usize);
    if kind != KIND_INLINE || flags & !(F_TAGGED | F_DATA | F_ACK) != 0 || len > INLINE_CAP {
        return None;
    }
    Some(InlineHdr {
        flags,
        len,
        tag,
        data,
        id: id(),
    })
}

/// The header and body bytes (slot offsets 8 to [`INLINE_OFF`]) of an inline slot:
/// what [`encode`] writes there for a [`Body::Inline`] slot.
#[inline]
pub fn encode_inline(h: &InlineHdr) -> [u8; INLINE_OFF - 8] {
    let mut b = [0u8; INLINE_OFF - 8];
    let w0 = u64::from(KIND_INLINE) | u64::from(h.flags) << 8 | (h.len as u32 as u64) << 32;
    b[0..8].copy_from_slice(&w0.to_le_bytes());
    b[8..16].copy_from_slice(&h.tag.to_le_bytes());
    b[16..24].copy_from_slice(&h.data.to_le_bytes());
    b[24..32].copy_from_slice(&h.id.to_le_bytes());
    b
}

/// Bytes of a slot (from its start) that [`encode`] gives meaning to for `body`: a
/// writer need not write past them, so a bounce slot touches only its first cache line
/// (the parser reads nothing of a bounce body beyond it).
pub fn encoded_len(body: &Body) -> usize {
    match body {
        Body::Bounce { .. } => SLOT_HDR + 32,
        _ => PARSE_LEN,
    }
}

/// Encode the header (without the sequence word) and body of `s` into `b`
/// (at least [`PARSE_LEN`] bytes; the inline payload is written separately).
pub fn encode(s: &Slot, b: &mut [u8]) {
    if b.len() < PARSE_LEN {
        return;
    }
    let (kind, niov, len) = match s.body {
        Body::Inline { len, .. } => (KIND_INLINE, 0u8, len as u32),
        Body::Rts { niov, .. } => (KIND_RTS, niov as u8, 0),
        Body::Bounce { clen, .. } => (KIND_BOUNCE, 0, clen as u32),
        Body::Rma { read, niov, .. } => (if read { KIND_READ } else { KIND_WRITE }, niov as u8, 0),
        Body::WriteInline { len, .. } => (KIND_WRITE_INLINE, 0, len as u32),
        Body::Atomic { .. } => (KIND_ATOMIC, 0, 0),
        Body::WriteFrag { clen, .. } => (KIND_WRITE_FRAG, 0, clen as u32),
    };
    b[8] = kind;
    b[9] = s.flags;
    b[10] = niov;
    b[11] = 0;
    b[12..16].copy_from_slice(&len.to_le_bytes());
    b[16..24].copy_from_slice(&s.tag.to_le_bytes());
    b[24..32].copy_from_slice(&s.data.to_le_bytes());
    let o = SLOT_HDR;
    match s.body {
        Body::Inline { id, .. } => b[o..o + 8].copy_from_slice(&id.to_le_bytes()),
        Body::Rts {
            total,
            id,
            iov,
            niov,
        } => {
            b[o..o + 8].copy_from_slice(&(total as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            for (i, (a, l)) in iov.iter().enumerate().take(niov.min(RTS_IOVS)) {
                b[o + 16 + 16 * i..o + 24 + 16 * i].copy_from_slice(&a.to_le_bytes());
                b[o + 24 + 16 * i..o + 32 + 16 * i].copy_from_slice(&l.to_le_bytes());
            }
        }
        Body::Bounce {
            total,
            id,
            offset,
            chunk,
            clen,
        } => {
            b[o..o + 8].copy_from_slice(&(total as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&(offset as u64).to_le_bytes());
            b[o + 24..o + 28].copy_from_slice(&(chunk as u32).to_le_bytes());
            b[o + 28..o + 32].copy_from_slice(&(clen as u32).to_le_bytes());
        }
        Body::Rma {
            total,
            id,
            key,
            raddr,
            iov,
            niov,
            ..
        } => {
            b[o..o + 8].copy_from_slice(&(total as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&key.to_le_bytes());
            b[o + 24..o + 32].copy_from_slice(&raddr.to_le_bytes());
            for (i, (a, l)) in iov.iter().enumerate().take(niov.min(RTS_IOVS)) {
                b[o + 32 + 16 * i..o + 40 + 16 * i].copy_from_slice(&a.to_le_bytes());
                b[o + 40 + 16 * i..o + 48 + 16 * i].copy_from_slice(&l.to_le_bytes());
            }
        }
        Body::WriteFrag {
            total,
            id,
            key,
            raddr,
            offset,
            chunk,
            clen,
        } => {
            b[o..o + 8].copy_from_slice(&(total as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&key.to_le_bytes());
            b[o + 24..o + 32].copy_from_slice(&raddr.to_le_bytes());
            b[o + 32..o + 40].copy_from_slice(&(offset as u64).to_le_bytes());
            b[o + 40..o + 44].copy_from_slice(&(chunk as u32).to_le_bytes());
            b[o + 44..o + 48].copy_from_slice(&(clen as u32).to_le_bytes());
        }
        Body::Atomic {
            count,
            id,
            key,
            raddr,
            op,
            dt,
            kind,
            inline,
            bufs,
        } => {
            b[o..o + 8].copy_from_slice(&(count as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&key.to_le_bytes());
            b[o + 24..o + 32].copy_from_slice(&raddr.to_le_bytes());
            b[o + 32] = op.to_raw() as u8;
            b[o + 33] = dt.to_raw() as u8;
            b[o + 34] = kind_to_u8(kind);
            b[o + 35] = u8::from(inline);
            for (i, a) in bufs.iter().enumerate() {
                b[o + 40 + 8 * i..o + 48 + 8 * i].copy_from_slice(&a.to_le_bytes());
            }
        }
        Body::WriteInline {
            len,
            id,
            key,
            raddr,
        } => {
            b[o..o + 8].copy_from_slice(&(len as u64).to_le_bytes());
            b[o + 8..o + 16].copy_from_slice(&id.to_le_bytes());
            b[o + 16..o + 24].copy_from_slice(&key.to_le_bytes());
            b[o + 24..o + 32].copy_from_slice(&raddr.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn geo() -> Geometry {
        Geometry {
            rings: 2,
            slots: 4,
            chunks: 4,
            chunk_size: 4096,
        }
    }

    fn round(s: Slot) -> Result<Slot, &'static str> {
        let mut b = [0u8; PARSE_LEN];
        encode(&s, &mut b);
        parse(&b, &geo(), 1 << 20)
    }

    /// One slot of each kind, with fields that exercise every byte of its encoding.
    fn samples() -> Vec<Slot> {
        vec![
            Slot {
                flags: F_TAGGED | F_DATA,
                tag: 7,
                data: 9,
                body: Body::Inline { len: 64, id: 3 },
            },
            Slot {
                flags: F_ACK,
                tag: 0,
                data: 0,
                body: Body::Rts {
                    total: 30,
                    id: 5,
                    iov: [(0x1000, 10), (0x2000, 20), (0, 0), (0, 0)],
                    niov: 2,
                },
            },
            Slot {
                flags: 0,
                tag: 1,
                data: 2,
                body: Body::Bounce {
                    total: 10000,
                    id: 8,
                    offset: 8192,
                    chunk: 3,
                    clen: 1808,
                },
            },
            Slot {
                flags: F_DATA,
                tag: 0,
                data: 5,
                body: Body::Rma {
                    read: true,
                    total: 30,
                    id: 2,
                    key: 0x78,
                    raddr: 4096,
                    iov: [(0x10, 10), (0x20, 20), (0, 0), (0, 0)],
                    niov: 2,
                },
            },
            Slot {
                flags: F_ACK,
                tag: 0,
                data: 0,
                body: Body::Atomic {
                    count: 2,
                    id: 9,
                    key: 3,
                    raddr: 64,
                    op: AtomicOp::Cswap,
                    dt: Datatype::Uint32,
                    kind: AtomicKind::Compare,
                    inline: true,
                    bufs: [1, 2, 3],
                },
            },
            Slot {
                flags: F_ACK | F_DATA,
                tag: 0,
                data: 77,
                body: Body::WriteFrag {
                    total: 10_000,
                    id: 4,
                    key: 5,
                    raddr: 6,
                    offset: 8192,
                    chunk: 2,
                    clen: 1808,
                },
            },
            Slot {
                flags: F_ACK,
                tag: 0,
                data: 0,
                body: Body::WriteInline {
                    len: 100,
                    id: 3,
                    key: 1,
                    raddr: 2,
                },
            },
        ]
    }

    #[test]
    fn each_kind_round_trips() {
        for s in samples() {
            assert_eq!(round(s), Ok(s));
        }
    }

    /// FNV-1a of `b`: a short fingerprint of encoded bytes.
    fn fnv(b: &[u8]) -> u64 {
        b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
            (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// The bytes a slot is written as do not change (peers of other builds read
    /// them): each sample encoded over a buffer of 0xaa (so bytes left unwritten count
    /// too) has the fingerprint of the format as first published.
    #[test]
    fn encoding_is_unchanged() {
        let mut all = Vec::new();
        for s in samples() {
            let mut b = [0xaau8; PARSE_LEN];
            encode(&s, &mut b);
            all.extend_from_slice(&b);
        }
        assert_eq!(fnv(&all), 0x027b_682e_b606_ee19);
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let bad = [
            Body::Inline {
                len: INLINE_CAP + 1,
                id: 0,
            },
            Body::Rts {
                total: 11,
                id: 0,
                iov: [(0, 10), (0, 0), (0, 0), (0, 0)],
                niov: 1,
            },
            Body::Bounce {
                total: 100,
                id: 0,
                offset: 0,
                chunk: 4,
                clen: 10,
            },
            Body::Bounce {
                total: 100,
                id: 0,
                offset: 95,
                chunk: 0,
                clen: 10,
            },
            Body::Bounce {
                total: 10000,
                id: 0,
                offset: 0,
                chunk: 0,
                clen: 4097,
            },
            Body::Bounce {
                total: 2 << 20,
                id: 0,
                offset: 0,
                chunk: 0,
                clen: 1,
            },
        ];
        for body in bad {
            let s = Slot {
                flags: 0,
                tag: 0,
                data: 0,
                body,
            };
            assert!(round(s).is_err(), "{body:?}");
        }
        let mut b = [0u8; PARSE_LEN];
        b[8] = 99;
        assert_eq!(parse(&b, &geo(), 1 << 20), Err("unknown slot kind"));
        b[8] = KIND_INLINE;
        b[9] = 0x80;
        assert_eq!(parse(&b, &geo(), 1 << 20), Err("unknown flags"));
        b[9] = 0;
        b[8] = KIND_RTS;
        b[10] = 5;
        assert!(parse(&b, &geo(), 1 << 20).is_err());
        assert_eq!(parse(&b[..10], &geo(), 1 << 20), Err("slot too short"));
    }

    #[test]
    fn inline_fast_path_matches_the_general_codec() {
        let h = InlineHdr {
            flags: F_TAGGED | F_DATA | F_ACK,
            len: INLINE_CAP,
            tag: 0x0102_0304_0506_0708,
            data: u64::MAX,
            id: 42,
        };
        let s = Slot {
            flags: h.flags,
            tag: h.tag,
            data: h.data,
            body: Body::Inline {
                len: h.len,
                id: h.id,
            },
        };
        let mut b = [0u8; PARSE_LEN];
        encode(&s, &mut b);
        assert_eq!(encode_inline(&h)[..], b[8..INLINE_OFF]);
        let first: [u8; INLINE_OFF] = b[..INLINE_OFF].try_into().unwrap();
        assert_eq!(parse_inline(&first), Some(h));
        // Not inline, or not valid: left to the general parser.
        let mut x = first;
        x[8] = KIND_RTS;
        assert_eq!(parse_inline(&x), None);
        let mut x = first;
        x[9] = 0x80;
        assert_eq!(parse_inline(&x), None);
        let mut x = first;
        x[12..16].copy_from_slice(&(INLINE_CAP as u32 + 1).to_le_bytes());
        assert_eq!(parse_inline(&x), None);
    }

    proptest! {
        /// The inline fast path accepts exactly the inline slots the general parser
        /// accepts, with the same fields.
        #[test]
        fn inline_fast_path_agrees_with_parse(b in proptest::collection::vec(any::<u8>(), PARSE_LEN)) {
            let mut b = b;
            if b[0] & 1 == 0 {
                b[8] = KIND_INLINE; // make the interesting case common
            }
            let first: [u8; INLINE_OFF] = b[..INLINE_OFF].try_into().unwrap();
            let fast = parse_inline(&first);
            match parse(&b, &geo(), 1 << 20) {
                Ok(Slot { flags, tag, data, body: Body::Inline { len, id } }) => {
                    prop_assert_eq!(fast, Some(InlineHdr { flags, len, tag, data, id }));
                }
                _ => prop_assert_eq!(fast, None),
            }
        }

        /// What `encoded_len` leaves unwritten does not matter: a bounce slot (the
        /// kind whose writer writes only its first line) parses the same whatever the
        /// bytes past it hold — stale bytes of an earlier lap.
        #[test]
        fn bytes_past_encoded_len_are_ignored(
            flags in 0u8..8,
            tag in any::<u64>(),
            data in any::<u64>(),
            id in any::<u64>(),
            chunk in 0usize..4,
            clen in 1usize..=4096,
            extra in 0usize..8192,
            before in 0usize..8192,
            junk in proptest::collection::vec(any::<u8>(), PARSE_LEN),
        ) {
            let s = Slot {
                flags,
                tag,
                data,
                body: Body::Bounce { total: before + clen + extra, id, offset: before, chunk, clen },
            };
            let mut b = [0u8; PARSE_LEN];
            encode(&s, &mut b);
            let used = encoded_len(&s.body);
            prop_assert_eq!(used, 64);
            b[used..].copy_from_slice(&junk[used..]);
            prop_assert_eq!(parse(&b, &geo(), 1 << 20), Ok(s));
        }

        /// Arbitrary bytes never panic, and whatever parses is within the limits.
        #[test]
        fn arbitrary_bytes_parse_within_limits(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(s) = parse(&b, &geo(), 1 << 20) {
                match s.body {
                    Body::Inline { len, .. } => prop_assert!(len <= INLINE_CAP),
                    Body::Rts { total, niov, .. } => prop_assert!((1..=4).contains(&niov) && total <= 1 << 20),
                    Body::Bounce { total, offset, chunk, clen, .. } => {
                        prop_assert!(chunk < 4 && clen <= 4096 && offset + clen <= total);
                    }
                    Body::Rma { niov, total, .. } => prop_assert!((1..=4).contains(&niov) && total <= 1 << 20),
                    Body::WriteInline { len, .. } => prop_assert!(len <= RMA_INLINE_CAP),
                    Body::Atomic { count, dt, .. } => prop_assert!(count * dt.size() <= 1 << 20),
                    Body::WriteFrag { total, offset, chunk, clen, .. } => {
                        prop_assert!(chunk < 4 && clen <= 4096 && offset + clen <= total);
                    }
                }
            }
        }
    }
}
