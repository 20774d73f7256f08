//! rxm's wire format: the connection handshake (carried in the MSG provider's CM data)
//! and the packets sent on each MSG connection.
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
//! A peer whose magic, length or kind is wrong is refused with `FI_EPROTO`; one with
//! another version or buffer size with `FI_EPROTONOSUPPORT`-style reason
//! [`Reason::Version`] / [`Reason::Params`] (the rejecting side answers with a reject
//! hello, the connecting side completes its operations with `FI_ECONNREFUSED`).
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
//! (8), iov count (1), 7 reserved, then per iov address, length and key (8 each).
//!
//! Every parser checks lengths and values and returns `FI_EPROTO`; nothing here panics.

use ofi_core::{Errno, Error, Result};

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
/// Length of an RTS body with `n` iovs.
pub const fn rts_len(n: usize) -> usize {
    16 + 24 * n
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

fn eproto(m: impl Into<String>) -> Error {
    Error::new(Errno::EPROTO, m.into())
}

/// Handshake kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `fi_connect` data.
    Connect = 1,
    /// `fi_accept` data.
    Accept = 2,
    /// `fi_reject` data.
    Reject = 3,
}

/// Why a connection request was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
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

impl Reason {
    fn from_u8(v: u8) -> Option<Reason> {
        Some(match v {
            0 => Reason::None,
            1 => Reason::Already,
            2 => Reason::Malformed,
            3 => Reason::Version,
            4 => Reason::Params,
            5 => Reason::Refused,
            _ => return None,
        })
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
    /// Sender's RDM address bytes.
    pub addr: Vec<u8>,
}

impl Hello {
    /// Encode.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.addr.len().min(MAX_ADDR);
        let mut b = Vec::with_capacity(HELLO_LEN + n);
        b.extend_from_slice(&MAGIC);
        b.push(self.version);
        b.push(self.kind as u8);
        b.push(self.reason as u8);
        b.push(0);
        b.extend_from_slice(&self.buffer_size.to_le_bytes());
        b.extend_from_slice(&self.credits.to_le_bytes());
        b.extend_from_slice(&self.sar_limit.to_le_bytes());
        b.extend_from_slice(&(n as u16).to_le_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.instance.to_le_bytes());
        b.extend_from_slice(&self.addr[..n]);
        b
    }

    /// Parse untrusted bytes. The version is returned as found (the caller decides);
    /// everything else is checked.
    ///
    /// # Errors
    /// `FI_EPROTO` for a short buffer, wrong magic, unknown kind or reason, or an
    /// address length that does not fit.
    pub fn parse(b: &[u8]) -> Result<Hello> {
        if b.len() < HELLO_LEN {
            return Err(eproto(format!(
                "ofi_rxm handshake of {} bytes (at least {HELLO_LEN} expected)",
                b.len()
            )));
        }
        if b[0..4] != MAGIC {
            return Err(eproto("ofi_rxm handshake: bad magic (not an rxm peer)"));
        }
        let version = b[4];
        let kind = match b[5] {
            1 => Kind::Connect,
            2 => Kind::Accept,
            3 => Kind::Reject,
            k => return Err(eproto(format!("ofi_rxm handshake: unknown kind {k}"))),
        };
        let reason = Reason::from_u8(b[6])
            .ok_or_else(|| eproto(format!("ofi_rxm handshake: unknown reason {}", b[6])))?;
        let u32at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64at = |o: usize| {
            let mut s = [0u8; 8];
            s.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(s)
        };
        let n = u16::from_le_bytes([b[24], b[25]]) as usize;
        if n > MAX_ADDR || HELLO_LEN + n > b.len() {
            return Err(eproto(format!(
                "ofi_rxm handshake: address length {n} does not fit ({} bytes)",
                b.len()
            )));
        }
        Ok(Hello {
            kind,
            version,
            reason,
            buffer_size: u32at(8),
            credits: u32at(12),
            sar_limit: u64at(16),
            instance: u64at(28),
            addr: b[HELLO_LEN..HELLO_LEN + n].to_vec(),
        })
    }
}

/// Packet operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
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
}

impl Op {
    fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Eager,
            2 => Op::SarFirst,
            3 => Op::SarNext,
            4 => Op::Rts,
            5 => Op::RndvDone,
            6 => Op::Credit,
            7 => Op::DcAck,
            _ => return None,
        })
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

    /// Encode into `out`.
    pub fn write(&self, out: &mut [u8; HDR_LEN]) {
        out[0] = VERSION;
        out[1] = self.op as u8;
        out[2] = self.flags;
        out[3] = 0;
        out[4..6].copy_from_slice(&self.credits.to_le_bytes());
        out[6..8].copy_from_slice(&[0, 0]);
        out[8..16].copy_from_slice(&self.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.tag.to_le_bytes());
        out[24..32].copy_from_slice(&self.data.to_le_bytes());
    }

    /// Encoded.
    pub fn bytes(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        self.write(&mut b);
        b
    }

    /// Parse the header at the start of a packet.
    ///
    /// # Errors
    /// `FI_EPROTO` for a short packet, another version, or an unknown op or flag.
    pub fn parse(b: &[u8]) -> Result<Hdr> {
        if b.len() < HDR_LEN {
            return Err(eproto(format!("ofi_rxm packet of {} bytes", b.len())));
        }
        if b[0] != VERSION {
            return Err(eproto(format!("ofi_rxm packet version {}", b[0])));
        }
        let op = Op::from_u8(b[1]).ok_or_else(|| eproto(format!("ofi_rxm packet op {}", b[1])))?;
        if b[2] & !(F_TAGGED | F_DATA | F_LAST | F_DC) != 0 {
            return Err(eproto(format!("ofi_rxm packet flags {:#x}", b[2])));
        }
        let u64at = |o: usize| {
            let mut s = [0u8; 8];
            s.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(s)
        };
        Ok(Hdr {
            op,
            flags: b[2],
            credits: u16::from_le_bytes([b[4], b[5]]),
            size: u64at(8),
            tag: u64at(16),
            data: u64at(24),
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
    /// Encode.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.push(self.n as u8);
        out.extend_from_slice(&[0; 7]);
        for &(a, l, k) in &self.iov[..self.n.min(RTS_IOVS)] {
            out.extend_from_slice(&a.to_le_bytes());
            out.extend_from_slice(&l.to_le_bytes());
            out.extend_from_slice(&k.to_le_bytes());
        }
    }

    /// Parse, checking that the iov lengths add up to `total`.
    ///
    /// # Errors
    /// `FI_EPROTO` for a short body, a bad count or lengths that do not add up.
    pub fn parse(b: &[u8], total: u64) -> Result<Rts> {
        if b.len() < 16 {
            return Err(eproto("ofi_rxm RTS too short"));
        }
        let u64at = |o: usize| {
            let mut s = [0u8; 8];
            s.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(s)
        };
        let n = b[8] as usize;
        if n == 0 || n > RTS_IOVS || b.len() < rts_len(n) {
            return Err(eproto(format!("ofi_rxm RTS with {n} iovs")));
        }
        let mut iov = [(0, 0, 0); RTS_IOVS];
        let mut sum = 0u64;
        for (i, e) in iov.iter_mut().enumerate().take(n) {
            let o = 16 + 24 * i;
            *e = (u64at(o), u64at(o + 8), u64at(o + 16));
            sum = sum
                .checked_add(e.1)
                .ok_or_else(|| eproto("ofi_rxm RTS iov lengths overflow"))?;
        }
        if sum != total {
            return Err(eproto(format!(
                "ofi_rxm RTS iovs add up to {sum}, message is {total}"
            )));
        }
        Ok(Rts {
            id: u64at(0),
            iov,
            n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            kind: Kind::Connect,
            version: VERSION,
            reason: Reason::None,
            buffer_size: 16384,
            credits: 64,
            sar_limit: 131072,
            instance: 77,
            addr: vec![1, 2, 3, 4],
        }
    }

    #[test]
    fn hello_round_trips() {
        let h = hello();
        assert_eq!(Hello::parse(&h.encode()).unwrap(), h);
    }

    #[test]
    fn malformed_hellos_are_eproto() {
        let b = hello().encode();
        for cut in 0..HELLO_LEN + 4 {
            assert_eq!(Hello::parse(&b[..cut]).unwrap_err().code(), Errno::EPROTO);
        }
        let mut m = b.clone();
        m[0] = b'X';
        assert_eq!(Hello::parse(&m).unwrap_err().code(), Errno::EPROTO);
        let mut m = b.clone();
        m[5] = 9;
        assert_eq!(Hello::parse(&m).unwrap_err().code(), Errno::EPROTO);
        let mut m = b.clone();
        m[6] = 77;
        assert_eq!(Hello::parse(&m).unwrap_err().code(), Errno::EPROTO);
        let mut m = b;
        m[24] = 200;
        assert_eq!(Hello::parse(&m).unwrap_err().code(), Errno::EPROTO);
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = Hdr {
            credits: 7,
            ..Hdr::new(Op::SarFirst, F_TAGGED | F_DATA, 1 << 20, 0xdead, 42)
        };
        assert_eq!(Hdr::parse(&h.bytes()).unwrap(), h);
        let b = h.bytes();
        assert_eq!(Hdr::parse(&b[..31]).unwrap_err().code(), Errno::EPROTO);
        let mut m = b;
        m[0] = 9;
        assert_eq!(Hdr::parse(&m).unwrap_err().code(), Errno::EPROTO);
        let mut m = b;
        m[1] = 0;
        assert_eq!(Hdr::parse(&m).unwrap_err().code(), Errno::EPROTO);
        let mut m = b;
        m[2] = 0x80;
        assert_eq!(Hdr::parse(&m).unwrap_err().code(), Errno::EPROTO);
    }

    #[test]
    fn delivery_flag_and_acknowledgement_round_trip() {
        let h = Hdr::new(Op::Eager, F_TAGGED | F_DC, 64, 1, 0);
        assert_eq!(Hdr::parse(&h.bytes()).unwrap(), h);
        let a = Hdr::new(Op::DcAck, 0, 3, 0, 0);
        assert_eq!(Hdr::parse(&a.bytes()).unwrap(), a);
        let mut m = a.bytes();
        m[2] = 0x10;
        assert_eq!(Hdr::parse(&m).unwrap_err().code(), Errno::EPROTO);
    }

    #[test]
    fn rts_round_trips_and_checks_lengths() {
        let r = Rts {
            id: 5,
            iov: [(0x1000, 100, 9), (0x2000, 28, 10), (0, 0, 0), (0, 0, 0)],
            n: 2,
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(b.len(), rts_len(2));
        assert_eq!(Rts::parse(&b, 128).unwrap(), r);
        assert_eq!(Rts::parse(&b, 127).unwrap_err().code(), Errno::EPROTO);
        assert_eq!(Rts::parse(&b[..30], 128).unwrap_err().code(), Errno::EPROTO);
        let mut m = b.clone();
        m[8] = 5;
        assert_eq!(Rts::parse(&m, 128).unwrap_err().code(), Errno::EPROTO);
        // Lengths that only add up by overflowing (found by the fuzzer).
        let wrap = Rts {
            id: 6,
            iov: [(0, u64::MAX, 1), (0, 5, 2), (0, 0, 0), (0, 0, 0)],
            n: 2,
        };
        let mut w = Vec::new();
        wrap.encode(&mut w);
        assert_eq!(Rts::parse(&w, u64::MAX).unwrap_err().code(), Errno::EPROTO);
        assert_eq!(Rts::parse(&w, 4).unwrap_err().code(), Errno::EPROTO);
    }

    #[test]
    fn parsers_never_panic_on_random_bytes() {
        let mut rng = ofi_testkit::TestRng::seeded(0x9e37_79b9_7f4a_7c15);
        for len in 0..200 {
            let mut b = rng.bytes(len);
            let x = rng.next_u64();
            if len > 4 {
                b[..4].copy_from_slice(&MAGIC);
            }
            let _ = Hello::parse(&b);
            let _ = Hdr::parse(&b);
            let _ = Rts::parse(&b, x);
        }
    }
}
