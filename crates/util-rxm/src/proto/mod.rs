//! rxm's wire format: the connection handshake (carried in the MSG provider's CM data)
//! and the packets sent on each MSG connection.
//!
//! Written in kit's wire convention ([`ofi_kit::wire`]): every fixed header is declared
//! once with named field ranges ([`hello_field`], [`hdr_field`], [`rts_field`]) and a
//! checked view ([`HelloView`], [`HdrView`], [`RtsView`]; an RTS body's remote buffers
//! are kit's [`RmaIov`]); the parsed representations ([`Hello`], [`Hdr`], [`Rts`]) have
//! `parse` (every validation, [`WireError`] on refusal) and `emit`. A [`WireError`] becomes
//! `FI_EPROTO` at the endpoint (its `From` conversion into [`ofi_core::Error`]).
//!
//! # Handshake ([`Hello`])
//!
//! Every `fi_connect`, `fi_accept` and `fi_reject` of rxm carries [`HELLO_LEN`] bytes
//! plus the sender's address, little-endian:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic `RXMh` |
//! | 4 | 1 | version ([`VERSION`]) |
//! | 5 | 1 | kind: 1 connect, 2 accept, 3 reject |
//! | 6 | 1 | reject reason ([`Reason`]; 0 otherwise) |
//! | 7 | 1 | reserved (0) |
//! | 8 | 4 | buffer size (`FI_OFI_RXM_BUFFER_SIZE`) |
//! | 12 | 4 | credits the sender grants its peer |
//! | 16 | 8 | SAR limit |
//! | 24 | 2 | address length `n` (≤ [`MAX_ADDR`]) |
//! | 26 | 2 | reserved (0) |
//! | 28 | 8 | instance: identifies the sending endpoint (pid and a counter) |
//! | 36 | n | the sender's RDM address (its listening name) |
//!
//! then, optionally, the sender's authorization tag ([`crate::auth`]) and a connection
//! request's extensions ([`crate::hello_ext`]: a receive context index, an alias).
//!
//! A peer whose magic, length or kind is wrong is refused (`FI_EPROTO`); one with
//! another version or buffer size with reason [`Reason::Version`] / [`Reason::Params`]
//! (the rejecting side answers with a reject hello, the connecting side completes its
//! operations with `FI_ECONNREFUSED`).
//!
//! # Packets ([`Hdr`])
//!
//! Each packet on a MSG connection starts with a [`HDR_LEN`]-byte header:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 1 | version ([`VERSION`]) |
//! | 1 | 1 | op ([`Op`]) |
//! | 2 | 1 | flags ([`F_TAGGED`], [`F_DATA`], [`F_LAST`], [`F_DC`]) |
//! | 3 | 1 | reserved |
//! | 4 | 2 | credits returned to the receiver of this packet |
//! | 6 | 2 | reserved |
//! | 8 | 8 | size: message length (eager, first segment, RTS), segment offset (next segments), count (DC_ACK) |
//! | 16 | 8 | tag (RNDV_DONE: the operation id) |
//! | 24 | 8 | remote CQ data (RNDV_DONE: the status, a negated `FI_*` code or 0) |
//!
//! followed by the payload (eager data, a segment) or, for RTS, [`Rts`]: operation id
//! (8), iov count (1), 7 reserved, then per iov address, length and key (8 each: kit's
//! remote buffer, [`RmaIov`]).
//!
//! # Invariants
//!
//! - Every parser checks lengths and values and returns a [`WireError`]; nothing here
//!   panics on any input.
//! - `emit` writes every field (reserved ones as zero); `parse(emit(x)) == x`.
//! - The bytes on the wire are those of protocol version [`VERSION`], unchanged by the
//!   move to the kit convention (the tests pin them).

use ofi_kit::wire::{RmaIov, WireError, RMA_IOV_LEN};
use ofi_kit::{wire_enum, wire_header};

/// Protocol version carried by the handshake and every packet (2: delivery
/// acknowledgements, [`F_DC`] and [`Op::DcAck`]).
pub const VERSION: u8 = 2;
/// Handshake magic.
pub const MAGIC: [u8; 4] = *b"RXMh";
/// Fixed part of a handshake.
pub const HELLO_LEN: usize = 36;
/// Largest address a handshake carries.
pub const MAX_ADDR: usize = 128;
/// Packet header length.
pub const HDR_LEN: usize = 32;
/// Remote buffers one RTS names at most.
pub const RTS_IOVS: usize = 4;
/// Fixed part of an RTS body.
pub const RTS_HEAD_LEN: usize = 16;
/// Length of an RTS body with `n` iovs (each a kit [`RmaIov`], [`RMA_IOV_LEN`] bytes).
pub const fn rts_len(n: usize) -> usize {
    RTS_HEAD_LEN + RMA_IOV_LEN * n
}

/// Packet flag: a tagged message.
pub const F_TAGGED: u8 = 1;
/// Packet flag: remote CQ data present.
pub const F_DATA: u8 = 2;
/// Packet flag: the last segment of a segmented message.
pub const F_LAST: u8 = 4;
/// Packet flag (eager, first segment): the sender waits for an [`Op::DcAck`] once the
/// receiver has taken the whole message in, into a receive or buffered
/// (`FI_DELIVERY_COMPLETE`).
pub const F_DC: u8 = 8;
/// Every flag bit this version knows.
const F_KNOWN: u8 = F_TAGGED | F_DATA | F_LAST | F_DC;

wire_header! {
    /// A checked view of a handshake's fixed part.
    pub struct HelloView;
    endian: little;
    len: HELLO_LEN;
    /// Where each field of a handshake lies.
    pub mod hello_field {
        /// Magic, [`MAGIC`](super::MAGIC).
        MAGIC: [u8; 4] = 0..4 => magic, set_magic;
        /// Protocol version.
        VERSION: u8 = 4..5 => version, set_version;
        /// Kind ([`Kind`](super::Kind)).
        KIND: u8 = 5..6 => kind, set_kind;
        /// Reject reason ([`Reason`](super::Reason)).
        REASON: u8 = 6..7 => reason, set_reason;
        /// Feature bits ([`FEATURE_RMA_EVENT`](super::FEATURE_RMA_EVENT); others
        /// reserved, zero, ignored when read).
        FEATURES: u8 = 7..8 => features, set_features;
        /// Bounce buffer size.
        BUFFER_SIZE: u32 = 8..12 => buffer_size, set_buffer_size;
        /// Credits granted.
        CREDITS: u32 = 12..16 => credits, set_credits;
        /// SAR limit.
        SAR_LIMIT: u64 = 16..24 => sar_limit, set_sar_limit;
        /// Address length.
        ADDR_LEN: u16 = 24..26 => addr_len, set_addr_len;
        /// Reserved, zero.
        RESERVED1: u16 = 26..28 => reserved1, set_reserved1;
        /// Sending endpoint instance.
        INSTANCE: u64 = 28..36 => instance, set_instance;
    }
}

wire_header! {
    /// A checked view of a packet header.
    pub struct HdrView;
    endian: little;
    len: HDR_LEN;
    /// Where each field of a packet header lies.
    pub mod hdr_field {
        /// Protocol version.
        VERSION: u8 = 0..1 => version, set_version;
        /// Operation ([`Op`](super::Op)).
        OP: u8 = 1..2 => op, set_op;
        /// Flag bits.
        FLAGS: u8 = 2..3 => flags, set_flags;
        /// Reserved.
        RESERVED0: u8 = 3..4 => reserved0, set_reserved0;
        /// Credits returned.
        CREDITS: u16 = 4..6 => credits, set_credits;
        /// Reserved.
        RESERVED1: u16 = 6..8 => reserved1, set_reserved1;
        /// Size, offset or count.
        SIZE: u64 = 8..16 => size, set_size;
        /// Tag or operation id.
        TAG: u64 = 16..24 => tag, set_tag;
        /// CQ data or status.
        DATA: u64 = 24..32 => data, set_data;
    }
}

wire_header! {
    /// A checked view of an RTS body's fixed part.
    pub struct RtsView;
    endian: little;
    len: RTS_HEAD_LEN;
    /// Where each field of an RTS body's fixed part lies.
    pub mod rts_field {
        /// The sender's operation id.
        ID: u64 = 0..8 => id, set_id;
        /// How many iovs follow.
        COUNT: u8 = 8..9 => count, set_count;
        /// Reserved, zero.
        RESERVED: [u8; 7] = 9..16 => reserved, set_reserved;
    }
}

wire_enum! {
    /// Handshake kinds.
    pub enum Kind: u8 {
        /// `fi_connect` data.
        Connect = 1,
        /// `fi_accept` data.
        Accept = 2,
        /// `fi_reject` data.
        Reject = 3,
    }
}

wire_enum! {
    /// Why a connection request was rejected.
    pub enum Reason: u8 {
        /// Not a reject.
        None = 0,
        /// Simultaneous connect: the peer's own connection wins; wait for it.
        Already = 1,
        /// Malformed handshake.
        Malformed = 2,
        /// Another protocol version.
        Version = 3,
        /// Incompatible parameters (buffer size).
        Params = 4,
        /// The endpoint is closing or cannot take connections.
        Refused = 5,
    }
}

/// A parsed handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// What it is.
    pub kind: Kind,
    /// Protocol version.
    pub version: u8,
    /// Reject reason.
    pub reason: Reason,
    /// Sender's bounce buffer size.
    pub buffer_size: u32,
    /// Credits the sender grants.
    pub credits: u32,
    /// Sender's SAR limit.
    pub sar_limit: u64,
    /// The sending endpoint instance (tells a restarted peer from a stale request).
    pub instance: u64,
    /// The sender counts the RMA and atomics its peers carry out on its memory
    /// (`FI_RMA_EVENT`): tell it each one, once done ([`Op::RemoteAccess`]).
    pub rma_event: bool,
    /// Sender's RDM address bytes.
    pub addr: Vec<u8>,
}

/// Handshake feature bit: [`Hello::rma_event`].
pub const FEATURE_RMA_EVENT: u8 = 1;

impl Hello {
    /// Write the fixed part (the address length as `min(addr.len(), MAX_ADDR)`); the
    /// address itself goes after it (see [`Hello::encode`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut HelloView<T>) {
        v.set_magic(MAGIC);
        v.set_version(self.version);
        v.set_kind(self.kind as u8);
        v.set_reason(self.reason as u8);
        v.set_features(if self.rma_event { FEATURE_RMA_EVENT } else { 0 });
        v.set_buffer_size(self.buffer_size);
        v.set_credits(self.credits);
        v.set_sar_limit(self.sar_limit);
        v.set_addr_len(self.addr.len().min(MAX_ADDR) as u16);
        v.set_reserved1(0);
        v.set_instance(self.instance);
    }

    /// Encode: the fixed part and at most [`MAX_ADDR`] address bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = HelloView::with_payload(&self.addr[..self.addr.len().min(MAX_ADDR)]);
        self.emit(&mut v);
        v.into_inner()
    }

    /// Parse untrusted bytes. The version is returned as found (the caller decides);
    /// everything else is checked.
    ///
    /// # Errors
    /// A [`WireError`] for a short buffer, wrong magic, unknown kind or reason, or an
    /// address length that does not fit.
    pub fn parse(b: &[u8]) -> Result<Hello, WireError> {
        let v = HelloView::new_checked(b)?;
        if v.magic() != MAGIC {
            return Err(WireError::field("magic", u32::from_le_bytes(v.magic())));
        }
        let kind = Kind::from_field("kind", v.kind())?;
        let reason = Reason::from_field("reason", v.reason())?;
        let n = usize::from(v.addr_len());
        if n > MAX_ADDR {
            return Err(WireError::field("addr_len", v.addr_len()));
        }
        let addr = v.payload().get(..n).ok_or(WireError::Truncated {
            need: HELLO_LEN + n,
            have: b.len(),
        })?;
        Ok(Hello {
            kind,
            version: v.version(),
            reason,
            buffer_size: v.buffer_size(),
            credits: v.credits(),
            sar_limit: v.sar_limit(),
            instance: v.instance(),
            rma_event: v.features() & FEATURE_RMA_EVENT != 0,
            addr: addr.to_vec(),
        })
    }
}

wire_enum! {
    /// Packet operations.
    pub enum Op: u8 {
        /// A whole message in one packet.
        Eager = 1,
        /// The first segment of a segmented message (`size` = total length).
        SarFirst = 2,
        /// A later segment (`size` = its offset).
        SarNext = 3,
        /// Rendezvous request: the receiver reads the sender's buffers.
        Rts = 4,
        /// Rendezvous done (`tag` = operation id, `data` = status).
        RndvDone = 5,
        /// Credits only.
        Credit = 6,
        /// Delivery acknowledgements: `size` = how many more [`F_DC`] messages of this
        /// connection the receiver has taken in (they are taken in the order sent).
        DcAck = 7,
        /// One RMA or atomic of the sender on the receiver's memory, carried out over this
        /// connection, is done (`tag` 0: a write or an atomic, 1: a read); sent only to a
        /// peer whose handshake asked ([`Hello::rma_event`]), after the access completed.
        RemoteAccess = 8,
    }
}

/// A packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hdr {
    /// Operation.
    pub op: Op,
    /// Flags.
    pub flags: u8,
    /// Credits returned.
    pub credits: u16,
    /// Size or offset.
    pub size: u64,
    /// Tag or operation id.
    pub tag: u64,
    /// CQ data or status.
    pub data: u64,
}

impl Hdr {
    /// A header.
    pub fn new(op: Op, flags: u8, size: u64, tag: u64, data: u64) -> Hdr {
        Hdr {
            op,
            flags,
            credits: 0,
            size,
            tag,
            data,
        }
    }

    /// Write every field.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut HdrView<T>) {
        v.set_version(VERSION);
        v.set_op(self.op as u8);
        v.set_flags(self.flags);
        v.set_reserved0(0);
        v.set_credits(self.credits);
        v.set_reserved1(0);
        v.set_size(self.size);
        v.set_tag(self.tag);
        v.set_data(self.data);
    }

    /// Encode into `out`.
    #[inline]
    pub fn write(&self, out: &mut [u8; HDR_LEN]) {
        if let Ok(mut v) = HdrView::new_checked(&mut out[..]) {
            self.emit(&mut v);
        }
    }

    /// Encoded.
    #[inline]
    pub fn bytes(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        self.write(&mut b);
        b
    }

    /// Parse the header at the start of a packet.
    ///
    /// # Errors
    /// A [`WireError`] for a short packet, another version, or an unknown op or flag.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Hdr, WireError> {
        let v = HdrView::new_checked(b)?;
        WireError::check_version(v.version(), VERSION)?;
        let op = Op::from_field("op", v.op())?;
        WireError::check_flags("flags", v.flags(), F_KNOWN)?;
        Ok(Hdr {
            op,
            flags: v.flags(),
            credits: v.credits(),
            size: v.size(),
            tag: v.tag(),
            data: v.data(),
        })
    }
}

/// A rendezvous request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rts {
    /// The sender's operation id (echoed in RNDV_DONE).
    pub id: u64,
    /// Remote buffers: (address, length, key).
    pub iov: [(u64, u64, u64); RTS_IOVS],
    /// How many of `iov` are used.
    pub n: usize,
}

impl Rts {
    /// Write the body into `out`, which must hold at least [`rts_len`]`(n)` bytes
    /// (`n` at most [`RTS_IOVS`]).
    ///
    /// # Errors
    /// [`WireError::Truncated`] if `out` is too short.
    pub fn emit(&self, out: &mut [u8]) -> Result<(), WireError> {
        let n = self.n.min(RTS_IOVS);
        WireError::check_len(out, rts_len(n))?;
        let mut head = RtsView::new_checked(&mut *out)?;
        head.set_id(self.id);
        head.set_count(n as u8);
        head.set_reserved([0; 7]);
        for (i, &(addr, len, key)) in self.iov[..n].iter().enumerate() {
            RmaIov { addr, len, key }.write(&mut out[rts_len(i)..]);
        }
        Ok(())
    }

    /// Encode, appending to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + rts_len(self.n.min(RTS_IOVS)), 0);
        // The length was just made right: emit cannot refuse.
        let _ = self.emit(&mut out[at..]);
    }

    /// Parse, checking that the iov lengths add up to `total`.
    ///
    /// # Errors
    /// A [`WireError`] for a short body, a bad count or lengths that do not add up.
    pub fn parse(b: &[u8], total: u64) -> Result<Rts, WireError> {
        let head = RtsView::new_checked(b)?;
        let n = usize::from(head.count());
        if n == 0 || n > RTS_IOVS {
            return Err(WireError::field("count", head.count()));
        }
        WireError::check_len(b, rts_len(n))?;
        let mut iov = [(0, 0, 0); RTS_IOVS];
        let mut sum = 0u64;
        for (i, e) in iov.iter_mut().enumerate().take(n) {
            let RmaIov { addr, len, key } = RmaIov::from_bytes(&b[rts_len(i)..])?;
            *e = (addr, len, key);
            sum = sum
                .checked_add(e.1)
                .ok_or(WireError::Malformed("RTS iov lengths overflow"))?;
        }
        if sum != total {
            return Err(WireError::Malformed(
                "RTS iov lengths do not add up to the message size",
            ));
        }
        Ok(Rts {
            id: head.id(),
            iov,
            n,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
