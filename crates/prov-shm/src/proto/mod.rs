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
//! The layout is declared once with kit's wire convention ([`ofi_kit::wire`]): the
//! header's named field ranges in [`header`], then the parts bodies are made of, each
//! declared once and shared by the kinds that carry it: [`inline_body`] (inline);
//! [`body_head`] (total and id, every other kind); after it [`iov_entry`]s (RTS), a
//! [`fragment`] (bounce) or an [`rma_target`] (the RMA and atomic kinds), which buffer
//! entries (read, write), a [`fragment`] (write fragment) or an [`atomic_tail`] (atomic)
//! follow. They are read and written through the checked views they generate;
//! [`Slot`] is the parsed representation ([`Slot::parse`], [`Slot::emit`]) and a
//! refused slot is a [`WireError`] naming the field. Its [`Body`] has one variant a
//! kind, each (but inline) carrying a struct of that kind's fields ([`RtsSlot`],
//! [`BounceSlot`], [`RmaSlot`], [`WriteFragSlot`], [`WriteInlineSlot`],
//! [`AtomicSlot`]) made of the same parts as the layout: a [`RemoteMem`] (the RMA
//! target), a [`BufList`] (buffer entries), a [`ChunkFrag`] (a fragment's placement).
//!
//! [`Slot::parse`] never panics; every field is checked against the limits of the receiving
//! region's geometry before the caller uses it.

use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};

use ofi_kit::wire::{atomic_kind_code, atomic_kind_of_code, WireError};
use ofi_kit::{wire_enum, wire_header};

use crate::region::{Geometry, SLOT_HDR, SLOT_SIZE};

/// The operand and compare bytes of an atomic (what an inline atomic slot carries,
/// operand first): `count` elements of `dt` each, but no operand for an atomic read and
/// no compare outside the compare family. `None` when the bytes overflow.
pub fn atomic_operand_lens(
    op: AtomicOp,
    dt: Datatype,
    kind: AtomicKind,
    count: usize,
) -> Option<(usize, usize)> {
    let bytes = count.checked_mul(dt.size())?;
    let operand = if op == AtomicOp::AtomicRead { 0 } else { bytes };
    let compare = if kind == AtomicKind::Compare {
        bytes
    } else {
        0
    };
    Some((operand, compare))
}

wire_enum! {
    /// What a slot carries (its header's `kind` field): the body that follows.
    pub enum SlotKind: u8 {
        /// Data in the slot.
        Inline = 1,
        /// Request to read the sender's memory with CMA.
        Rts = 2,
        /// One fragment through a bounce chunk.
        Bounce = 3,
        /// RMA write: the target copies from the initiator's buffers with CMA.
        Write = 4,
        /// RMA write with the data in the slot.
        WriteInline = 5,
        /// RMA read: the target copies into the initiator's buffers with CMA.
        Read = 6,
        /// Atomic operation: applied by the target with the kit's engine.
        Atomic = 7,
        /// One fragment of an RMA write through a bounce chunk.
        WriteFrag = 8,
    }
}

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
/// Bytes of slot header + body that [`Slot::parse`] looks at.
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

/// Where an RMA or atomic operates at the target: a registration and an address in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteMem {
    /// Memory key at the target.
    pub key: u64,
    /// Remote address (or offset) at the target.
    pub raddr: u64,
}

/// The buffers of the sender (RTS) or initiator (CMA read or write) a slot names, for
/// the receiver to copy with CMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufList {
    /// (address, length) pairs in the sender's process.
    pub iov: [(u64, u64); RTS_IOVS],
    /// How many of `iov` are used (1..=4 once parsed).
    pub niov: usize,
}

impl BufList {
    /// The first [`RTS_IOVS`] buffers of `list` (addresses and lengths in this
    /// process); an empty list is one empty buffer.
    pub fn from_pairs(list: &[(usize, usize)]) -> BufList {
        let mut iov = [(0u64, 0u64); RTS_IOVS];
        for (d, s) in iov.iter_mut().zip(list) {
            *d = (s.0 as u64, s.1 as u64);
        }
        BufList {
            iov,
            niov: list.len().max(1),
        }
    }

    /// The buffers in use.
    pub fn used(&self) -> &[(u64, u64)] {
        &self.iov[..self.niov.min(RTS_IOVS)]
    }
}

/// Where a fragment streamed through a bounce chunk goes, and the chunk holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkFrag {
    /// Where this fragment goes in the message (or write).
    pub offset: usize,
    /// The chunk holding it (< chunks).
    pub chunk: usize,
    /// Its length (1..=chunk size, `offset + clen ≤ total` once parsed).
    pub clen: usize,
}

/// What an atomic slot carries ([`Body::Atomic`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicSlot {
    /// Elements.
    pub count: usize,
    /// Operation id (acknowledged with `F_ACK`).
    pub id: u64,
    /// Where it applies at the target.
    pub at: RemoteMem,
    /// The operation.
    pub op: AtomicOp,
    /// The datatype.
    pub dt: Datatype,
    /// The call family.
    pub kind: AtomicKind,
    /// Operand and compare bytes are in the slot.
    pub inline: bool,
    /// The initiator's operand, compare and result buffers.
    pub bufs: [u64; 3],
}

/// What an RMA read or write through CMA carries ([`Body::Rma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmaSlot {
    /// Read (the target writes into the initiator) or write.
    pub read: bool,
    /// Bytes.
    pub total: usize,
    /// Operation id (acknowledged).
    pub id: u64,
    /// Where it reads or writes at the target.
    pub at: RemoteMem,
    /// The initiator's buffers.
    pub bufs: BufList,
}

/// What one fragment of an RMA write through a bounce chunk carries
/// ([`Body::WriteFrag`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteFragSlot {
    /// Bytes of the whole write.
    pub total: usize,
    /// Operation id (acknowledged after the last fragment).
    pub id: u64,
    /// Where the whole write goes at the target.
    pub at: RemoteMem,
    /// This fragment.
    pub frag: ChunkFrag,
}

/// What an RMA write with its data in the slot carries ([`Body::WriteInline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteInlineSlot {
    /// Bytes (≤ [`RMA_INLINE_CAP`]).
    pub len: usize,
    /// Operation id (acknowledged with `F_ACK`).
    pub id: u64,
    /// Where it writes at the target.
    pub at: RemoteMem,
}

/// What a request to send (the receiver copies the message with CMA) carries
/// ([`Body::Rts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtsSlot {
    /// Message length (= the sum of the buffer lengths).
    pub total: usize,
    /// Message id.
    pub id: u64,
    /// The sender's buffers.
    pub bufs: BufList,
}

/// What one fragment of a message through a bounce chunk carries ([`Body::Bounce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BounceSlot {
    /// Message length.
    pub total: usize,
    /// Message id.
    pub id: u64,
    /// This fragment.
    pub frag: ChunkFrag,
}

/// A parsed slot body: one variant a [`SlotKind`] (read and write share [`Body::Rma`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// RMA write or read through CMA.
    Rma(RmaSlot),
    /// One fragment of an RMA write through a bounce chunk.
    WriteFrag(WriteFragSlot),
    /// An atomic operation.
    Atomic(AtomicSlot),
    /// RMA write with the data in the slot.
    WriteInline(WriteInlineSlot),
    /// Data inline.
    Inline {
        /// Payload length (≤ [`INLINE_CAP`]).
        len: usize,
        /// Message id (meaningful with `F_ACK`).
        id: u64,
    },
    /// CMA request.
    Rts(RtsSlot),
    /// A bounce fragment.
    Bounce(BounceSlot),
}

impl Body {
    /// The kind of slot that carries this body.
    pub fn kind(&self) -> SlotKind {
        match self {
            Body::Inline { .. } => SlotKind::Inline,
            Body::Rts(_) => SlotKind::Rts,
            Body::Bounce(_) => SlotKind::Bounce,
            Body::Rma(b) if b.read => SlotKind::Read,
            Body::Rma(_) => SlotKind::Write,
            Body::WriteInline(_) => SlotKind::WriteInline,
            Body::Atomic(_) => SlotKind::Atomic,
            Body::WriteFrag(_) => SlotKind::WriteFrag,
        }
    }
}

wire_header! {
    /// A checked view of a slot's header (the ring's publish word, then what every
    /// kind of slot carries); the body follows ([`SlotHeader::payload`]).
    pub struct SlotHeader;
    endian: little;
    len: SLOT_HDR;
    /// Where each field of a slot's header lies (from the slot's start).
    pub mod header {
        /// The ring's publish word (see `crate::ring`): written by the ring, not here.
        SEQ: u64 = 0..8 => seq, set_seq;
        /// The slot's kind ([`SlotKind`](super::SlotKind)).
        KIND: u8 = 8..9 => kind, set_kind;
        /// Flags (`F_*`).
        FLAGS: u8 = 9..10 => flags, set_flags;
        /// Buffers an RTS or CMA RMA slot names (1..=[`RTS_IOVS`](super::RTS_IOVS)).
        NIOV: u8 = 10..11 => niov, set_niov;
        /// Reserved, zero.
        RESERVED: u8 = 11..12 => reserved, set_reserved;
        /// Payload length of an inline slot, a fragment's length, or 0.
        LEN: u32 = 12..16 => length, set_length;
        /// Tag.
        TAG: u64 = 16..24 => tag, set_tag;
        /// Remote CQ data.
        DATA: u64 = 24..32 => data, set_data;
    }
}

wire_header! {
    /// The body of an inline slot; the payload follows ([`INLINE_OFF`] from the slot).
    pub struct InlineBody;
    endian: little;
    len: 8;
    /// Where each field of an inline body lies (from the body's start).
    pub mod inline_body {
        /// Message id (meaningful with `F_ACK`).
        ID: u64 = 0..8 => id, set_id;
    }
}

wire_header! {
    /// The start of every body but an inline one: the operation's size and id. What
    /// follows depends on the kind: buffer entries (RTS), a [`Fragment`] (bounce), or an
    /// [`RmaTarget`] (the RMA and atomic kinds).
    pub struct BodyHead;
    endian: little;
    len: 16;
    /// Where each field of a body head lies (from the body's start).
    pub mod body_head {
        /// Message or RMA length in bytes; an atomic's element count.
        TOTAL: u64 = 0..8 => total, set_total;
        /// Message or operation id.
        ID: u64 = 8..16 => id, set_id;
    }
}

wire_header! {
    /// Where an RMA or atomic operates at the target, after the [`BodyHead`]. What
    /// follows depends on the kind: buffer entries (CMA read, write), a [`Fragment`]
    /// (write fragment), an [`AtomicTail`] (atomic) or nothing (inline write, whose data
    /// is at [`RMA_INLINE_OFF`] from the slot).
    pub struct RmaTarget;
    endian: little;
    len: 16;
    /// Where each field of an RMA target lies (from its start, 16 into the body).
    pub mod rma_target {
        /// Memory key at the target.
        KEY: u64 = 0..8 => key, set_key;
        /// Remote address (or offset) at the target.
        RADDR: u64 = 8..16 => raddr, set_raddr;
    }
}

wire_header! {
    /// One buffer of the sender (RTS) or initiator (CMA RMA).
    pub struct IovEntry;
    endian: little;
    len: 16;
    /// Where each field of a buffer entry lies.
    pub mod iov_entry {
        /// Address in the sender's process.
        ADDR: u64 = 0..8 => addr, set_addr;
        /// Length.
        LEN: u64 = 8..16 => length, set_length;
    }
}

wire_header! {
    /// Where a fragment through a bounce chunk goes: the end of a bounce body (after
    /// its [`BodyHead`]) and of an RMA write fragment's (after its [`RmaTarget`]).
    pub struct Fragment;
    endian: little;
    len: 16;
    /// Where each field of a fragment's placement lies (from its start).
    pub mod fragment {
        /// Where this fragment goes in the message (or write).
        OFFSET: u64 = 0..8 => offset, set_offset;
        /// The chunk holding it.
        CHUNK: u32 = 8..12 => chunk, set_chunk;
        /// Its length.
        CLEN: u32 = 12..16 => clen, set_clen;
    }
}

wire_header! {
    /// The end of an atomic body, after its [`RmaTarget`]; inline operand then compare
    /// bytes follow at [`ATOMIC_INLINE_OFF`] from the slot.
    pub struct AtomicTail;
    endian: little;
    len: 32;
    /// Where each field of an atomic body's end lies (from its start, 32 into the body).
    pub mod atomic_tail {
        /// The operation (`FI_*` value).
        OP: u8 = 0..1 => op, set_op;
        /// The datatype (`FI_*` value).
        DATATYPE: u8 = 1..2 => datatype, set_datatype;
        /// The call family: 0 base, 1 fetch, 2 compare.
        FAMILY: u8 = 2..3 => family, set_family;
        /// 1 when operand and compare bytes are in the slot, else 0.
        INLINE: u8 = 3..4 => inline, set_inline;
        /// Unused (not written).
        PAD: u32 = 4..8 => pad, set_pad;
        /// The initiator's operand buffer.
        OPERAND: u64 = 8..16 => operand, set_operand;
        /// The initiator's compare buffer.
        COMPARE: u64 = 16..24 => compare, set_compare;
        /// The initiator's result buffer.
        RESULT: u64 = 24..32 => result, set_result;
    }
}

/// Bytes of a [`BodyHead`].
const BODY_HEAD_LEN: usize = BodyHead::<&[u8]>::LEN;
/// Bytes of a [`BodyHead`] and an [`RmaTarget`]: where what is particular to an RMA
/// or atomic kind starts (from the body's start).
const RMA_HEAD_LEN: usize = BODY_HEAD_LEN + RmaTarget::<&[u8]>::LEN;
const _: () = assert!(SLOT_HDR + RMA_HEAD_LEN == RMA_INLINE_OFF);
const _: () = assert!(SLOT_HDR + RMA_HEAD_LEN + AtomicTail::<&[u8]>::LEN == ATOMIC_INLINE_OFF);

/// The `n` buffer entries at the start of `entries`, checked: 1..=[`RTS_IOVS`] of
/// them, their lengths summing to `total` without overflow, `total` within `max_msg`.
#[inline]
fn read_iovs(entries: &[u8], n: usize, total: u64, max_msg: usize) -> Result<BufList, WireError> {
    if n == 0 || n > RTS_IOVS {
        return Err(WireError::field("niov", n as u64));
    }
    let mut iov = [(0u64, 0u64); RTS_IOVS];
    let mut sum: u64 = 0;
    for (i, e) in iov.iter_mut().enumerate().take(n) {
        let v = IovEntry::new_checked(entries.get(IovEntry::<&[u8]>::LEN * i..).unwrap_or(&[]))?;
        sum = sum
            .checked_add(v.length())
            .ok_or(WireError::Malformed("buffer lengths overflow"))?;
        *e = (v.addr(), v.length());
    }
    if sum != total {
        return Err(WireError::Malformed(
            "total differs from the sum of the buffers",
        ));
    }
    if total > max_msg as u64 {
        return Err(WireError::field("total", total));
    }
    Ok(BufList { iov, niov: n })
}

/// Write the buffers in use of `bufs` as buffer entries at the start of `entries`
/// (entries that do not fit are left out: the caller passes a whole slot).
#[inline]
fn write_iovs(entries: &mut [u8], bufs: &BufList) {
    for (i, &(a, l)) in bufs.used().iter().enumerate() {
        let from = IovEntry::<&[u8]>::LEN * i;
        if let Some(Ok(mut v)) = entries.get_mut(from..).map(IovEntry::new_checked) {
            v.set_addr(a);
            v.set_length(l);
        }
    }
}

/// The [`Fragment`] at the start of `b` of a message or write of `total` bytes, checked:
/// `total` within `max_msg`, `chunk` one of the region's, `clen` in 1..=chunk size, the
/// fragment inside the `total` bytes.
#[inline]
fn read_fragment(
    b: &[u8],
    geo: &Geometry,
    total: u64,
    max_msg: usize,
) -> Result<ChunkFrag, WireError> {
    let v = Fragment::new_checked(b)?;
    let (offset, chunk, clen) = (v.offset(), v.chunk(), v.clen());
    if total > max_msg as u64 {
        return Err(WireError::field("total", total));
    }
    if chunk as usize >= geo.chunks {
        return Err(WireError::field("chunk", chunk));
    }
    if clen == 0 || clen as usize > geo.chunk_size {
        return Err(WireError::field("chunk length", clen));
    }
    match offset.checked_add(u64::from(clen)) {
        Some(end) if end <= total => Ok(ChunkFrag {
            offset: offset as usize,
            chunk: chunk as usize,
            clen: clen as usize,
        }),
        _ => Err(WireError::Malformed("fragment beyond its message")),
    }
}

/// Write `frag` as a [`Fragment`] at the start of `b`.
#[inline]
fn write_fragment(b: &mut [u8], frag: &ChunkFrag) -> Result<(), WireError> {
    let mut v = Fragment::new_checked(b)?;
    v.set_offset(frag.offset as u64);
    v.set_chunk(frag.chunk as u32);
    v.set_clen(frag.clen as u32);
    Ok(())
}

/// Write a [`BodyHead`] at the start of `body`; the bytes after it.
#[inline]
fn write_head(body: &mut [u8], total: usize, id: u64) -> Result<&mut [u8], WireError> {
    let mut v = BodyHead::new_checked(body)?;
    v.set_total(total as u64);
    v.set_id(id);
    Ok(&mut v.into_inner()[BODY_HEAD_LEN..])
}

/// Write a [`BodyHead`] and an [`RmaTarget`] at the start of `body`; the bytes after
/// them.
#[inline]
fn write_rma_head(
    body: &mut [u8],
    total: usize,
    id: u64,
    at: RemoteMem,
) -> Result<&mut [u8], WireError> {
    let mut v = RmaTarget::new_checked(write_head(body, total, id)?)?;
    v.set_key(at.key);
    v.set_raddr(at.raddr);
    Ok(&mut v.into_inner()[RmaTarget::<&[u8]>::LEN..])
}

impl Slot {
    /// The remote CQ data this slot carries (with `F_DATA`).
    #[inline]
    pub fn cq_data(&self) -> Option<u64> {
        (self.flags & F_DATA != 0).then_some(self.data)
    }

    /// Whether the sender waits for an acknowledgement (`F_ACK`).
    #[inline]
    pub fn wants_ack(&self) -> bool {
        self.flags & F_ACK != 0
    }

    /// Whether this slot keeps the limits [`Slot::parse`] checks against `geo` and
    /// `max_msg`: payload and message sizes, buffer counts, chunk indices and fragment
    /// placement. Every slot `parse` returns keeps them (the codec's property tests and
    /// the fuzz target assert it of arbitrary bytes).
    pub fn within_limits(&self, geo: &Geometry, max_msg: usize) -> bool {
        match self.body {
            Body::Inline { len, .. } => len <= INLINE_CAP,
            Body::Rts(RtsSlot { total, bufs, .. }) | Body::Rma(RmaSlot { total, bufs, .. }) => {
                (1..=RTS_IOVS).contains(&bufs.niov) && total <= max_msg
            }
            Body::Bounce(BounceSlot { total, frag, .. })
            | Body::WriteFrag(WriteFragSlot { total, frag, .. }) => {
                frag.chunk < geo.chunks
                    && frag.clen <= geo.chunk_size
                    && frag
                        .offset
                        .checked_add(frag.clen)
                        .is_some_and(|end| end <= total)
                    && total <= max_msg
            }
            Body::WriteInline(w) => w.len <= RMA_INLINE_CAP,
            Body::Atomic(a) => a
                .count
                .checked_mul(a.dt.size())
                .is_some_and(|n| n <= max_msg),
        }
    }

    /// Parse a slot: its first [`PARSE_LEN`] bytes, every field checked against `geo`
    /// and `max_msg` (a peer may have written anything there). The error names the
    /// field at fault.
    pub fn parse(b: &[u8], geo: &Geometry, max_msg: usize) -> Result<Slot, WireError> {
        WireError::check_len(b, PARSE_LEN)?;
        let h = SlotHeader::new_checked(b)?;
        let (kind, flags, niov, len) = (h.kind(), h.flags(), h.niov() as usize, h.length());
        WireError::check_flags("flags", flags, F_TAGGED | F_DATA | F_ACK)?;
        let body = h.payload();
        if kind == SlotKind::Inline as u8 {
            if len as usize > INLINE_CAP {
                return Err(WireError::field("length", len));
            }
            let id = InlineBody::new_checked(body)?.id();
            return Ok(Slot {
                flags,
                tag: h.tag(),
                data: h.data(),
                body: Body::Inline {
                    len: len as usize,
                    id,
                },
            });
        }
        let head = BodyHead::new_checked(body)?;
        let (total, id) = (head.total(), head.id());
        // Meaningful for the RMA and atomic kinds only.
        let target = RmaTarget::new_checked(&body[BODY_HEAD_LEN..])?;
        let at = RemoteMem {
            key: target.key(),
            raddr: target.raddr(),
        };
        let (head_tail, rma_tail) = (&body[BODY_HEAD_LEN..], &body[RMA_HEAD_LEN..]);
        let body = match SlotKind::from_wire(kind) {
            Some(SlotKind::Rts) => Body::Rts(RtsSlot {
                total: total as usize,
                id,
                bufs: read_iovs(head_tail, niov, total, max_msg)?,
            }),
            Some(SlotKind::Bounce) => Body::Bounce(BounceSlot {
                total: total as usize,
                id,
                frag: read_fragment(head_tail, geo, total, max_msg)?,
            }),
            Some(kind @ (SlotKind::Write | SlotKind::Read)) => Body::Rma(RmaSlot {
                read: kind == SlotKind::Read,
                total: total as usize,
                id,
                at,
                bufs: read_iovs(rma_tail, niov, total, max_msg)?,
            }),
            Some(SlotKind::WriteFrag) => Body::WriteFrag(WriteFragSlot {
                total: total as usize,
                id,
                at,
                frag: read_fragment(rma_tail, geo, total, max_msg)?,
            }),
            Some(SlotKind::Atomic) => {
                let v = AtomicTail::new_checked(rma_tail)?;
                let count = total;
                let op = AtomicOp::from_raw(u32::from(v.op()))
                    .ok_or(WireError::field("atomic op", v.op()))?;
                let dt = Datatype::from_raw(u32::from(v.datatype()))
                    .ok_or(WireError::field("datatype", v.datatype()))?;
                let kind = atomic_kind_of_code(v.family())
                    .ok_or(WireError::field("family", v.family()))?;
                let inline = match v.inline() {
                    0 => false,
                    1 => true,
                    x => return Err(WireError::field("inline", x)),
                };
                (count as usize)
                    .checked_mul(dt.size())
                    .filter(|&n| n <= max_msg && count <= max_msg as u64)
                    .ok_or(WireError::field("count", count))?;
                let data = atomic_operand_lens(op, dt, kind, count as usize)
                    .and_then(|(operand, compare)| operand.checked_add(compare))
                    .ok_or(WireError::field("count", count))?;
                if inline && data > ATOMIC_INLINE_CAP {
                    return Err(WireError::Malformed(
                        "inline atomic data over the slot capacity",
                    ));
                }
                Body::Atomic(AtomicSlot {
                    count: count as usize,
                    id,
                    at,
                    op,
                    dt,
                    kind,
                    inline,
                    bufs: [v.operand(), v.compare(), v.result()],
                })
            }
            Some(SlotKind::WriteInline) => {
                if total > RMA_INLINE_CAP as u64 {
                    return Err(WireError::field("length", total));
                }
                if u64::from(len) != total {
                    return Err(WireError::Malformed("inline write lengths differ"));
                }
                Body::WriteInline(WriteInlineSlot {
                    len: total as usize,
                    id,
                    at,
                })
            }
            // (An inline slot was parsed above.)
            Some(SlotKind::Inline) | None => return Err(WireError::field("kind", kind)),
        };
        Ok(Slot {
            flags,
            tag: h.tag(),
            data: h.data(),
            body,
        })
    }

    /// Write the header (all but the publish word) and the body of this slot into `v`,
    /// a view of at least [`PARSE_LEN`] bytes (`WireError::Truncated` otherwise, with
    /// the header written); bytes no field of this kind names are left as they are
    /// (the inline payload is written separately).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        v: &mut SlotHeader<T>,
    ) -> Result<(), WireError> {
        let (niov, len) = match self.body {
            Body::Inline { len, .. } => (0u8, len as u32),
            Body::Rts(b) => (b.bufs.niov as u8, 0),
            Body::Bounce(b) => (0, b.frag.clen as u32),
            Body::Rma(b) => (b.bufs.niov as u8, 0),
            Body::WriteInline(w) => (0, w.len as u32),
            Body::Atomic(_) => (0, 0),
            Body::WriteFrag(w) => (0, w.frag.clen as u32),
        };
        v.set_kind(self.body.kind() as u8);
        v.set_flags(self.flags);
        v.set_niov(niov);
        v.set_reserved(0);
        v.set_length(len);
        v.set_tag(self.tag);
        v.set_data(self.data);
        let body = v.payload_mut();
        WireError::check_len(body, PARSE_LEN - SLOT_HDR)?;
        match self.body {
            Body::Inline { id, .. } => InlineBody::new_checked(body)?.set_id(id),
            Body::Rts(b) => write_iovs(write_head(body, b.total, b.id)?, &b.bufs),
            Body::Bounce(b) => write_fragment(write_head(body, b.total, b.id)?, &b.frag)?,
            Body::Rma(b) => write_iovs(write_rma_head(body, b.total, b.id, b.at)?, &b.bufs),
            Body::WriteFrag(w) => {
                write_fragment(write_rma_head(body, w.total, w.id, w.at)?, &w.frag)?
            }
            Body::Atomic(a) => {
                let rest = write_rma_head(body, a.count, a.id, a.at)?;
                let mut t = AtomicTail::new_checked(rest)?;
                t.set_op(a.op.to_raw() as u8);
                t.set_datatype(a.dt.to_raw() as u8);
                t.set_family(atomic_kind_code(a.kind));
                t.set_inline(u8::from(a.inline));
                t.set_operand(a.bufs[0]);
                t.set_compare(a.bufs[1]);
                t.set_result(a.bufs[2]);
            }
            Body::WriteInline(w) => {
                write_rma_head(body, w.len, w.id, w.at)?;
            }
        }
        Ok(())
    }

    /// The first [`PARSE_LEN`] bytes of this slot as [`Slot::emit`] writes them over
    /// zeros (the publish word zero).
    #[inline]
    pub fn to_bytes(&self) -> [u8; PARSE_LEN] {
        let mut b = [0u8; PARSE_LEN];
        if let Ok(mut v) = SlotHeader::new_checked(&mut b[..]) {
            // PARSE_LEN bytes: the emit cannot fall short.
            let _ = self.emit(&mut v);
        }
        b
    }
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

/// The first [`INLINE_OFF`] bytes of a slot as an inline header, checked as
/// [`Slot::parse`] checks an inline slot; `None` when the slot is not a valid inline
/// one (then [`Slot::parse`] says what it is, or what is wrong).
#[inline]
pub fn parse_inline(b: &[u8; INLINE_OFF]) -> Option<InlineHdr> {
    let h = SlotHeader::new_checked(&b[..]).ok()?;
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[HEAD_WORD..HEAD_WORD + 8]);
    parse_inline_words(u64::from_le_bytes(w), h.tag(), h.data(), || {
        InlineBody::new_checked(h.payload()).map_or(0, |v| v.id())
    })
}

/// Where the word holding kind, flags, buffer count and length starts (slot offset).
const HEAD_WORD: usize = header::KIND.start;
/// Bit positions of header fields in the little-endian word at [`HEAD_WORD`].
const KIND_SHIFT: u32 = ((header::KIND.start - HEAD_WORD) * 8) as u32;
/// See [`KIND_SHIFT`].
const FLAGS_SHIFT: u32 = ((header::FLAGS.start - HEAD_WORD) * 8) as u32;
/// See [`KIND_SHIFT`].
const LEN_SHIFT: u32 = ((header::LEN.start - HEAD_WORD) * 8) as u32;
const _: () = assert!(header::LEN.end - HEAD_WORD == 8, "kind..len is one word");

/// [`parse_inline`] of a slot's words as read from it: the kind/flags/length word
/// (offset 8), the tag, the data and, read only for a valid inline slot,
/// the message id. The same checks as [`parse_inline`].
#[inline]
pub fn parse_inline_words(
    h: u64,
    tag: u64,
    data: u64,
    id: impl FnOnce() -> u64,
) -> Option<InlineHdr> {
    let (kind, flags, len) = (
        (h >> KIND_SHIFT) as u8,
        (h >> FLAGS_SHIFT) as u8,
        (h >> LEN_SHIFT) as u32 as usize,
    );
    if kind != SlotKind::Inline as u8
        || flags & !(F_TAGGED | F_DATA | F_ACK) != 0
        || len > INLINE_CAP
    {
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
/// what [`Slot::emit`] writes there for a [`Body::Inline`] slot.
#[inline]
pub fn encode_inline(h: &InlineHdr) -> [u8; INLINE_OFF - HEAD_WORD] {
    let w0 = u64::from(SlotKind::Inline as u8) << KIND_SHIFT
        | u64::from(h.flags) << FLAGS_SHIFT
        | u64::from(h.len as u32) << LEN_SHIFT;
    let mut b = [0u8; INLINE_OFF - HEAD_WORD];
    let at = |f: std::ops::Range<usize>| f.start - HEAD_WORD..f.end - HEAD_WORD;
    b[..8].copy_from_slice(&w0.to_le_bytes());
    b[at(header::TAG)].copy_from_slice(&h.tag.to_le_bytes());
    b[at(header::DATA)].copy_from_slice(&h.data.to_le_bytes());
    let id =
        SLOT_HDR + inline_body::ID.start - HEAD_WORD..SLOT_HDR + inline_body::ID.end - HEAD_WORD;
    b[id].copy_from_slice(&h.id.to_le_bytes());
    b
}

/// Bytes of a slot (from its start) that [`Slot::emit`] gives meaning to for `body`: a
/// writer need not write past them, so a bounce slot touches only its first cache line
/// (the parser reads nothing of a bounce body beyond it).
pub fn encoded_len(body: &Body) -> usize {
    match body {
        Body::Bounce(_) => SLOT_HDR + BODY_HEAD_LEN + Fragment::<&[u8]>::LEN,
        _ => PARSE_LEN,
    }
}

#[cfg(test)]
mod tests;
