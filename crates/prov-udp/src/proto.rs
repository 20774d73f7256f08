//! The wire format of the `udp` provider: one fixed header in front of every datagram.
//!
//! # Format (version 1)
//!
//! Every datagram an endpoint sends is `HEADER || payload`, where `HEADER` is
//! [`HDR_LEN`] = 12 bytes, multi-byte fields in network byte order (big endian):
//!
//! | offset | size | field | value |
//! | --- | --- | --- | --- |
//! | 0 | 1 | magic | [`MAGIC`] (`0xd6`) |
//! | 1 | 1 | version | [`VERSION`] (1) |
//! | 2 | 2 | flags | bit 0 [`FLAG_CQ_DATA`]: `data` carries remote CQ data; other bits 0 |
//! | 4 | 8 | data | the remote CQ data (`fi_senddata`), 0 when the flag is clear |
//!
//! The header has a fixed size so a receive can scatter it into a small slot of its own
//! and the payload straight into the application's buffer (no copy beyond the
//! kernel's). The payload is the message exactly as the application sent it; its length
//! is the datagram's length minus [`HDR_LEN`].
//!
//! # Parsing
//!
//! The header is declared once with kit's [`wire_header!`] (the [`field`] ranges and the
//! checked view [`Packet`]); [`Header`] is its parsed representation.
//! [`Header::parse`] checks everything: a datagram shorter than the header, a wrong
//! magic or version, an unknown flag bit, or non-zero `data` without the flag is a
//! [`WireError`]. The endpoint drops such a datagram (counted, logged at debug level);
//! the receive it landed in stays posted. Nothing here panics, whatever the bytes.

use ofi_kit::wire::WireError;
use ofi_kit::wire_header;

/// First byte of every datagram.
pub const MAGIC: u8 = 0xd6;
/// The header version this module writes and accepts.
pub const VERSION: u8 = 1;
/// Size of the header in bytes.
pub const HDR_LEN: usize = 12;
/// Flag bit: the `data` field carries remote CQ data.
pub const FLAG_CQ_DATA: u16 = 1;
/// Every flag bit version 1 defines.
pub const KNOWN_FLAGS: u16 = FLAG_CQ_DATA;

wire_header! {
    /// A checked view of a datagram: the [`HDR_LEN`]-byte header, then the payload.
    pub struct Packet;
    endian: big;
    len: HDR_LEN;
    /// Where each header field lies.
    pub mod field {
        /// [`MAGIC`].
        MAGIC: u8 = 0..1 => magic, set_magic;
        /// [`VERSION`].
        VERSION: u8 = 1..2 => version, set_version;
        /// Flag bits ([`KNOWN_FLAGS`]).
        FLAGS: u16 = 2..4 => flags, set_flags;
        /// Remote CQ data (0 without [`FLAG_CQ_DATA`]).
        DATA: u64 = 4..12 => data, set_data;
    }
}

/// A parsed header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Flag bits (only [`KNOWN_FLAGS`]).
    pub flags: u16,
    /// Remote CQ data (0 unless [`FLAG_CQ_DATA`] is set).
    pub data: u64,
}

impl Header {
    /// A header for a message with remote CQ data `data`, or none.
    #[inline]
    pub fn new(data: Option<u64>) -> Header {
        match data {
            Some(d) => Header {
                flags: FLAG_CQ_DATA,
                data: d,
            },
            None => Header { flags: 0, data: 0 },
        }
    }

    /// The remote CQ data, if the sender attached some.
    #[inline]
    pub fn cq_data(&self) -> Option<u64> {
        (self.flags & FLAG_CQ_DATA != 0).then_some(self.data)
    }

    /// Write the header into `p`.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_magic(MAGIC);
        p.set_version(VERSION);
        p.set_flags(self.flags);
        p.set_data(self.data);
    }

    /// The header's bytes.
    #[inline]
    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut p = Packet::zeroed();
        self.emit(&mut p);
        p.into_inner()
    }

    /// Validate and parse the header of `p`.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Header, WireError> {
        if p.magic() != MAGIC {
            return Err(WireError::field("udp.magic", p.magic()));
        }
        WireError::check_version(p.version(), VERSION)?;
        let flags = WireError::check_flags("udp.flags", p.flags(), KNOWN_FLAGS)?;
        let data = p.data();
        if flags & FLAG_CQ_DATA == 0 && data != 0 {
            return Err(WireError::Malformed(
                "non-zero CQ data without the CQ-data flag",
            ));
        }
        Ok(Header { flags, data })
    }

    /// Parse the header at the start of `bytes` (a datagram, or at least its first
    /// [`HDR_LEN`] bytes): [`Packet::new_checked`] then [`Header::parse`].
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> Result<Header, WireError> {
        Header::parse(&Packet::new_checked(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_data() {
        for h in [
            Header::new(None),
            Header::new(Some(0)),
            Header::new(Some(u64::MAX)),
        ] {
            let b = h.encode();
            assert_eq!(Header::from_bytes(&b), Ok(h));
        }
        assert_eq!(Header::new(Some(7)).cq_data(), Some(7));
        assert_eq!(Header::new(None).cq_data(), None);
    }

    #[test]
    fn exact_bytes() {
        let b = Header::new(Some(0x0102_0304_0506_0708)).encode();
        assert_eq!(b, [0xd6, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            Header::new(None).encode(),
            [0xd6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn every_malformation_is_refused() {
        let good = Header::new(Some(5)).encode();
        for n in 0..HDR_LEN {
            assert_eq!(
                Header::from_bytes(&good[..n]),
                Err(WireError::Truncated {
                    need: HDR_LEN,
                    have: n
                })
            );
        }
        let mut b = good;
        b[0] = 0;
        assert_eq!(
            Header::from_bytes(&b),
            Err(WireError::field("udp.magic", 0u8))
        );
        let mut b = good;
        b[1] = 2;
        assert_eq!(
            Header::from_bytes(&b),
            Err(WireError::version(2u8, VERSION))
        );
        let mut b = good;
        b[2] = 0x80;
        assert_eq!(
            Header::from_bytes(&b),
            Err(WireError::field("udp.flags", 0x8000u16))
        );
        let mut b = Header::new(None).encode();
        b[11] = 1;
        assert!(matches!(
            Header::from_bytes(&b),
            Err(WireError::Malformed(_))
        ));
        // Longer input: only the first HDR_LEN bytes matter.
        let mut long = good.to_vec();
        long.extend_from_slice(&[0xff; 40]);
        assert_eq!(Header::from_bytes(&long), Ok(Header::new(Some(5))));
    }

    /// Arbitrary bytes never panic the parser, and whatever it accepts re-encodes to
    /// the same bytes (seeded random bytes from the shared test generator).
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = ofi_testkit::TestRng::seeded(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for i in 0..200_000usize {
            let len = i % 24;
            let mut buf = [0u8; 24];
            rng.fill(&mut buf);
            // Bias half the inputs towards a valid prefix so deeper paths run.
            if i % 2 == 0 {
                buf[0] = MAGIC;
                buf[1] = VERSION;
                buf[2] = 0;
                buf[3] &= 1;
            }
            if let Ok(h) = Header::from_bytes(&buf[..len]) {
                accepted += 1;
                assert_eq!(h.encode()[..], buf[..HDR_LEN]);
            }
        }
        assert!(accepted > 0, "the biased inputs should parse sometimes");
    }
}
