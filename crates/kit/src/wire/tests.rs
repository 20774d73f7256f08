//! Tests of the wire-format convention: the macro's views in both byte orders, the
//! length check, byte arrays, and the error's text and mapping.

use super::*;

const LE_LEN: usize = 16;

crate::wire_header! {
    /// A little-endian test header.
    pub struct LeHdr;
    endian: little;
    len: LE_LEN;
    /// Its fields.
    pub mod le_field {
        /// A byte.
        KIND: u8 = 0..1 => kind, set_kind;
        /// Two bytes.
        LEN16: u16 = 2..4 => len16, set_len16;
        /// Four bytes.
        ID: u32 = 4..8 => id, set_id;
        /// Eight bytes.
        TAG: u64 = 8..16 => tag, set_tag;
    }
}

crate::wire_header! {
    /// A big-endian test header with a byte-array field and a signed one.
    pub struct BeHdr;
    endian: big;
    len: 10;
    /// Its fields.
    pub mod be_field {
        /// Four magic bytes.
        MAGIC: [u8; 4] = 0..4 => magic, set_magic;
        /// A signed 16-bit value.
        DELTA: i16 = 4..6 => delta, set_delta;
        /// A 32-bit value.
        SEQ: u32 = 6..10 => seq, set_seq;
    }
    repr: Be;
}

#[test]
fn field_ranges_are_named() {
    assert_eq!(le_field::TAG, 8..16);
    assert_eq!(be_field::SEQ, 6..10);
    assert_eq!(LeHdr::<&[u8]>::LEN, LE_LEN);
    assert_eq!(BeHdr::<&[u8]>::LEN, 10);
}

#[test]
fn little_endian_getters_and_setters() {
    let mut buf = [0u8; LE_LEN + 2];
    let mut h = LeHdr::new_checked(&mut buf[..]).unwrap();
    h.set_kind(7);
    h.set_len16(0x0102);
    h.set_id(0x0304_0506);
    h.set_tag(0x0708_090a_0b0c_0d0e);
    h.payload_mut().copy_from_slice(&[0xee, 0xff]);
    assert_eq!(
        buf,
        [7, 0, 2, 1, 6, 5, 4, 3, 0xe, 0xd, 0xc, 0xb, 0xa, 9, 8, 7, 0xee, 0xff]
    );
    let h = LeHdr::new_checked(&buf[..]).unwrap();
    assert_eq!(h.kind(), 7);
    assert_eq!(h.len16(), 0x0102);
    assert_eq!(h.id(), 0x0304_0506);
    assert_eq!(h.tag(), 0x0708_090a_0b0c_0d0e);
    assert_eq!(h.header(), &buf[..LE_LEN]);
    assert_eq!(h.payload(), &[0xee, 0xff]);
    assert_eq!(h.into_inner().len(), LE_LEN + 2);
}

#[test]
fn big_endian_arrays_and_signed_fields() {
    let mut buf = vec![0u8; 10];
    let mut h = BeHdr::new_checked(&mut buf).unwrap();
    h.set_magic(*b"oftc");
    h.set_delta(-2);
    h.set_seq(0x0a0b_0c0d);
    assert_eq!(h.header_mut().len(), 10);
    assert_eq!(
        buf,
        [b'o', b'f', b't', b'c', 0xff, 0xfe, 0xa, 0xb, 0xc, 0xd]
    );
    let h = BeHdr::new_checked(buf).unwrap();
    assert_eq!(h.magic(), *b"oftc");
    assert_eq!(h.delta(), -2);
    assert_eq!(h.seq(), 0x0a0b_0c0d);
    assert!(h.payload().is_empty());
}

#[test]
fn a_zeroed_view_owns_its_header() {
    let mut h = LeHdr::zeroed();
    assert_eq!(h.tag(), 0);
    h.set_id(9);
    assert_eq!(
        h.into_inner(),
        [0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn a_view_with_payload_owns_a_zero_header_then_the_payload() {
    let mut p = LeHdr::with_payload(b"xyz");
    assert_eq!(p.tag(), 0);
    assert_eq!(p.payload(), b"xyz");
    p.set_id(9);
    let bytes = p.into_inner();
    assert_eq!(bytes.len(), LE_LEN + 3);
    assert_eq!(bytes[4], 9);
    assert_eq!(&bytes[LE_LEN..], b"xyz");
    assert_eq!(LeHdr::with_payload(&[]).into_inner(), vec![0u8; LE_LEN]);
}

#[test]
fn short_buffers_are_refused_with_their_length() {
    let buf = [0u8; LE_LEN];
    for n in 0..LE_LEN {
        assert_eq!(
            LeHdr::new_checked(&buf[..n]).err(),
            Some(WireError::Truncated {
                need: LE_LEN,
                have: n
            })
        );
    }
    assert!(LeHdr::new_checked(&buf[..]).is_ok());
    assert_eq!(
        WireError::check_len(&buf, 17)
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("truncated: 16 bytes where 17 are needed")
    );
    assert_eq!(WireError::check_len(&buf, 16), Ok(()));
}

#[test]
fn errors_name_the_field_and_map_to_eproto() {
    let cases = [
        (
            WireError::field("rxd.type", 77u8),
            "field `rxd.type` holds an invalid value 0x4d",
        ),
        (
            WireError::version(3u8, 2u8),
            "unsupported protocol version 3 (this side speaks 2)",
        ),
        (
            WireError::Malformed("data without its flag"),
            "malformed: data without its flag",
        ),
        (
            WireError::Truncated { need: 4, have: 1 },
            "truncated: 1 bytes where 4 are needed",
        ),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        let api: ofi_core::Error = e.into();
        assert_eq!(api.code(), ofi_core::Errno::EPROTO);
        assert_eq!(api.message(), text);
    }
    // Small enough to return by value on a hot path.
    assert!(std::mem::size_of::<WireError>() <= 32);
}

#[test]
fn arbitrary_bytes_read_back_what_was_written() {
    let mut rng = ofi_testkit::TestRng::seeded(0x5eed);
    for _ in 0..1000 {
        let mut buf = [0u8; LE_LEN];
        rng.fill(&mut buf);
        let v = LeHdr::new_checked(buf).unwrap();
        let mut out = [0u8; LE_LEN];
        let mut w = LeHdr::new_checked(&mut out[..]).unwrap();
        w.set_kind(v.kind());
        w.set_len16(v.len16());
        w.set_id(v.id());
        w.set_tag(v.tag());
        // Byte 1 is in no field: it stays 0.
        let mut want = buf;
        want[1] = 0;
        assert_eq!(out, want);
    }
}

crate::wire_enum! {
    /// A test enum with gaps between its values and a 16-bit field.
    pub enum Code: u16 {
        /// The first.
        One = 1,
        /// After a gap.
        Five = 5,
        /// Past a byte.
        Big = 0x1234,
    }
}

#[test]
fn wire_enum_converts_exactly_the_declared_values() {
    for (raw, want) in [(1u16, Code::One), (5, Code::Five), (0x1234, Code::Big)] {
        assert_eq!(Code::from_wire(raw), Some(want));
        assert_eq!(want as u16, raw);
    }
    for raw in [0u16, 2, 4, 6, 0x34, 0x1233, u16::MAX] {
        assert_eq!(Code::from_wire(raw), None, "{raw:#x}");
    }
    assert_eq!(std::mem::size_of::<Code>(), 2);
}

#[test]
fn atomic_kind_codes_round_trip_and_other_bytes_are_refused() {
    use ofi_core::enums::AtomicKind;
    let all = [AtomicKind::Base, AtomicKind::Fetch, AtomicKind::Compare];
    for (code, k) in all.into_iter().enumerate() {
        assert_eq!(atomic_kind_code(k), code as u8);
        assert_eq!(atomic_kind_of_code(code as u8), Some(k));
    }
    for c in 3..=u8::MAX {
        assert_eq!(atomic_kind_of_code(c), None);
    }
}

#[test]
fn field_checks_pass_good_values_and_name_bad_ones() {
    assert_eq!(WireError::check_version(2u8, 2), Ok(()));
    assert_eq!(
        WireError::check_version(3u8, 2),
        Err(WireError::version(3u8, 2u8))
    );
    assert_eq!(WireError::check_flags("flags", 0b101u8, 0b111), Ok(0b101));
    assert_eq!(WireError::check_flags("flags", 0u16, 0), Ok(0));
    // The error holds the unknown bits only.
    assert_eq!(
        WireError::check_flags("flags", 0b1101u8, 0b0101),
        Err(WireError::field("flags", 0b1000u8))
    );
    assert_eq!(
        WireError::check_flags("flags", u64::MAX, 1),
        Err(WireError::field("flags", u64::MAX - 1))
    );
}

#[test]
fn wire_enum_from_field_names_the_field() {
    assert_eq!(Code::from_field("code", 5), Ok(Code::Five));
    assert_eq!(
        Code::from_field("code", 6),
        Err(WireError::field("code", 6u16))
    );
}

crate::wire_header! {
    /// A header declared with its record.
    pub struct RecHdr;
    endian: big;
    len: 6;
    /// Its fields.
    pub mod rec_field {
        /// A byte.
        KIND: u8 = 0..1 => kind, set_kind;
        /// Four bytes (byte 1 is in no field).
        SEQ: u32 = 2..6 => seq, set_seq;
    }
    /// The record of every field.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    record: pub struct Rec;
}

#[test]
fn a_record_reads_and_writes_every_field_and_nothing_else() {
    let r = Rec {
        kind: 7,
        seq: 0x0102_0304,
    };
    let mut buf = [0xeeu8; 8];
    r.write(&mut RecHdr::new_checked(&mut buf[..]).unwrap());
    assert_eq!(buf, [7, 0xee, 1, 2, 3, 4, 0xee, 0xee]);
    assert_eq!(Rec::read(&RecHdr::new_checked(&buf[..]).unwrap()), r);
    assert_eq!(Rec::default(), Rec { kind: 0, seq: 0 });
}

/// The parsed form of [`BeHdr`]: the magic checked, the other fields as they are.
#[derive(Debug, PartialEq, Eq)]
pub struct Be {
    delta: i16,
    seq: u32,
}

impl Be {
    fn parse<T: AsRef<[u8]>>(v: &BeHdr<T>) -> Result<Be, WireError> {
        if v.magic() != *b"oftc" {
            return Err(WireError::Malformed("magic"));
        }
        Ok(Be {
            delta: v.delta(),
            seq: v.seq(),
        })
    }

    fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut BeHdr<T>) {
        v.set_magic(*b"oftc");
        v.set_delta(self.delta);
        v.set_seq(self.seq);
    }
}

#[test]
fn repr_wrappers_go_through_parse_and_emit() {
    let be = Be { delta: -2, seq: 7 };
    let want = [b'o', b'f', b't', b'c', 0xff, 0xfe, 0, 0, 0, 7];
    assert_eq!(be.bytes(), want);
    let mut buf = [0xeeu8; 12];
    be.write(&mut buf);
    assert_eq!(buf[..10], want);
    assert_eq!(buf[10..], [0xee, 0xee]);
    let mut short = [0xeeu8; 9];
    be.write(&mut short);
    assert_eq!(short, [0xee; 9], "a short buffer is left alone");
    assert_eq!(Be::from_bytes(&buf), Ok(be));
    assert_eq!(
        Be::from_bytes(&buf[..9]),
        Err(WireError::Truncated { need: 10, have: 9 })
    );
    assert_eq!(Be::from_bytes(&[0; 10]), Err(WireError::Malformed("magic")));
}
