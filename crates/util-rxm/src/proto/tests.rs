//! The wire format's tests: round trips, refusals (each `FI_EPROTO` at the edge) and the
//! exact bytes (unchanged by the move to kit's wire convention).

use super::*;
use ofi_core::{Errno, Error};

/// The code a refusal has once it reaches the API.
trait EdgeCode {
    fn code(self) -> Errno;
}

impl EdgeCode for WireError {
    fn code(self) -> Errno {
        Error::from(self).code()
    }
}

/// Each `(offset, byte)` written over a copy of `good` makes `parse` refuse it, with
/// `FI_EPROTO` at the edge.
fn each_corruption_is_eproto<T: std::fmt::Debug>(
    good: &[u8],
    corruptions: &[(usize, u8)],
    parse: impl Fn(&[u8]) -> Result<T, WireError>,
) {
    for &(at, byte) in corruptions {
        let mut m = good.to_vec();
        m[at] = byte;
        let e = parse(&m).expect_err(&format!("byte {at} = {byte:#x} is refused"));
        assert_eq!(e.code(), Errno::EPROTO);
    }
}

/// A connection request of the tests (here and in the handshake trailers' tests).
pub(crate) fn hello() -> Hello {
    Hello {
        kind: Kind::Connect,
        version: VERSION,
        reason: Reason::None,
        buffer_size: 16384,
        credits: 64,
        sar_limit: 131072,
        instance: 77,
        rma_event: true,
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
    // Magic, kind, reason, address length.
    each_corruption_is_eproto(&b, &[(0, b'X'), (5, 9), (6, 77), (24, 200)], Hello::parse);
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
    // Version, op, flags.
    each_corruption_is_eproto(&b, &[(0, 9), (1, 0), (2, 0x80)], Hdr::parse);
}

#[test]
fn delivery_flag_and_acknowledgement_round_trip() {
    let h = Hdr::new(Op::Eager, F_TAGGED | F_DC, 64, 1, 0);
    assert_eq!(Hdr::parse(&h.bytes()).unwrap(), h);
    let a = Hdr::new(Op::DcAck, 0, 3, 0, 0);
    assert_eq!(Hdr::parse(&a.bytes()).unwrap(), a);
    each_corruption_is_eproto(&a.bytes(), &[(2, 0x10)], Hdr::parse);
}

/// An RTS of operation `id` over the remote buffers `iov` (`(address, length, key)`,
/// at most [`RTS_IOVS`]), and its encoding.
fn rts_and_bytes(id: u64, iov: &[(u64, u64, u64)]) -> (Rts, Vec<u8>) {
    let mut r = Rts {
        id,
        iov: [(0, 0, 0); RTS_IOVS],
        n: iov.len(),
    };
    r.iov[..iov.len()].copy_from_slice(iov);
    let mut b = Vec::new();
    r.encode(&mut b);
    (r, b)
}

#[test]
fn rts_round_trips_and_checks_lengths() {
    let (r, b) = rts_and_bytes(5, &[(0x1000, 100, 9), (0x2000, 28, 10)]);
    assert_eq!(b.len(), rts_len(2));
    assert_eq!(Rts::parse(&b, 128).unwrap(), r);
    assert_eq!(Rts::parse(&b, 127).unwrap_err().code(), Errno::EPROTO);
    assert_eq!(Rts::parse(&b[..30], 128).unwrap_err().code(), Errno::EPROTO);
    let mut m = b.clone();
    m[8] = 5;
    assert_eq!(Rts::parse(&m, 128).unwrap_err().code(), Errno::EPROTO);
    // Lengths that only add up by overflowing (found by the fuzzer).
    let (_, w) = rts_and_bytes(6, &[(0, u64::MAX, 1), (0, 5, 2)]);
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

#[test]
fn wire_bytes_are_pinned() {
    let mut h = hello();
    h.kind = Kind::Reject;
    h.reason = Reason::Params;
    let b = h.encode();
    let mut want = Vec::new();
    want.extend_from_slice(b"RXMh");
    // Byte 7: the feature bits (reserved and zero before FI_RMA_EVENT; a peer that
    // predates them ignores the byte and never sets it).
    want.extend_from_slice(&[VERSION, 3, 4, FEATURE_RMA_EVENT]);
    want.extend_from_slice(&16384u32.to_le_bytes());
    want.extend_from_slice(&64u32.to_le_bytes());
    want.extend_from_slice(&131072u64.to_le_bytes());
    want.extend_from_slice(&[4, 0, 0, 0]);
    want.extend_from_slice(&77u64.to_le_bytes());
    want.extend_from_slice(&[1, 2, 3, 4]);
    assert_eq!(b, want);

    let hdr = Hdr {
        credits: 0x0102,
        ..Hdr::new(Op::Rts, F_TAGGED | F_DC, 0x1122, 0x3344, 0x5566)
    };
    let mut want = vec![VERSION, 4, F_TAGGED | F_DC, 0, 2, 1, 0, 0];
    want.extend_from_slice(&0x1122u64.to_le_bytes());
    want.extend_from_slice(&0x3344u64.to_le_bytes());
    want.extend_from_slice(&0x5566u64.to_le_bytes());
    assert_eq!(hdr.bytes().to_vec(), want);
    // A remote-access report: op 8, the kind in the tag.
    let ra = Hdr::new(Op::RemoteAccess, 0, 0, 1, 0);
    assert_eq!(ra.bytes()[..2], [VERSION, 8]);
    assert_eq!(
        Hdr::parse(&ra.bytes()).map(|h| (h.op, h.tag)),
        Ok((Op::RemoteAccess, 1))
    );

    let (_, b) = rts_and_bytes(9, &[(0xa, 0xb, 0xc)]);
    let mut want = 9u64.to_le_bytes().to_vec();
    want.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    for x in [0xau64, 0xb, 0xc] {
        want.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(b, want);
}
