//! Tests of the slot codec: round trips, the pinned encoding, refusals, and the
//! inline fast path against the general parser.

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

/// Emit `s` over `b` (at least PARSE_LEN bytes).
fn encode(s: &Slot, b: &mut [u8]) {
    s.emit(&mut SlotHeader::new_checked(b).unwrap()).unwrap();
}

fn parse(b: &[u8], geo: &Geometry, max_msg: usize) -> Result<Slot, WireError> {
    Slot::parse(b, geo, max_msg)
}

fn round(s: Slot) -> Result<Slot, WireError> {
    let mut b = [0u8; PARSE_LEN];
    encode(&s, &mut b);
    parse(&b, &geo(), 1 << 20)
}

/// A fragment of a message or write: (offset, chunk, clen).
fn frag((offset, chunk, clen): (usize, usize, usize)) -> ChunkFrag {
    ChunkFrag {
        offset,
        chunk,
        clen,
    }
}

/// A bounce fragment of message `id` of `total` bytes, at (offset, chunk, clen).
fn bounce(total: usize, id: u64, at: (usize, usize, usize)) -> Body {
    Body::Bounce(BounceSlot {
        total,
        id,
        frag: frag(at),
    })
}

/// A slot with header `flags`, `tag` and CQ `data`, carrying `body`.
fn slot(flags: u8, tag: u64, data: u64, body: Body) -> Slot {
    Slot {
        flags,
        tag,
        data,
        body,
    }
}

/// One slot of each kind, with fields that exercise every byte of its encoding.
fn samples() -> Vec<Slot> {
    vec![
        slot(F_TAGGED | F_DATA, 7, 9, Body::Inline { len: 64, id: 3 }),
        slot(
            F_ACK,
            0,
            0,
            Body::Rts(RtsSlot {
                total: 30,
                id: 5,
                bufs: BufList {
                    iov: [(0x1000, 10), (0x2000, 20), (0, 0), (0, 0)],
                    niov: 2,
                },
            }),
        ),
        slot(0, 1, 2, bounce(10000, 8, (8192, 3, 1808))),
        slot(
            F_DATA,
            0,
            5,
            Body::Rma(RmaSlot {
                read: true,
                total: 30,
                id: 2,
                at: RemoteMem {
                    key: 0x78,
                    raddr: 4096,
                },
                bufs: BufList {
                    iov: [(0x10, 10), (0x20, 20), (0, 0), (0, 0)],
                    niov: 2,
                },
            }),
        ),
        slot(
            F_ACK,
            0,
            0,
            Body::Atomic(AtomicSlot {
                id: 9,
                at: RemoteMem { key: 3, raddr: 64 },
                count: 2,
                op: AtomicOp::Cswap,
                dt: Datatype::Uint32,
                kind: AtomicKind::Compare,
                inline: true,
                bufs: [1, 2, 3],
            }),
        ),
        slot(
            F_ACK | F_DATA,
            0,
            77,
            Body::WriteFrag(WriteFragSlot {
                total: 10_000,
                id: 4,
                at: RemoteMem { key: 5, raddr: 6 },
                frag: frag((8192, 2, 1808)),
            }),
        ),
        slot(
            F_ACK,
            0,
            0,
            Body::WriteInline(WriteInlineSlot {
                len: 100,
                id: 3,
                at: RemoteMem { key: 1, raddr: 2 },
            }),
        ),
    ]
}

#[test]
fn each_kind_round_trips() {
    for s in samples() {
        assert_eq!(round(s), Ok(s));
        assert!(s.within_limits(&geo(), 1 << 20), "{s:?}");
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
        Body::Rts(RtsSlot {
            total: 11,
            id: 0,
            bufs: BufList {
                iov: [(0, 10), (0, 0), (0, 0), (0, 0)],
                niov: 1,
            },
        }),
        // (offset, chunk, clen): a chunk past the region's, a fragment past its
        // message, a fragment over the chunk size, a message over max_msg.
        bounce(100, 0, (0, 4, 10)),
        bounce(100, 0, (95, 0, 10)),
        bounce(10000, 0, (0, 0, 4097)),
        bounce(2 << 20, 0, (0, 0, 1)),
    ];
    for body in bad {
        assert!(round(slot(0, 0, 0, body)).is_err(), "{body:?}");
    }
    // Past a limit, as `within_limits` says too (all but the RTS, whose total
    // disagrees with its buffers: a consistency check, not a limit).
    for body in bad.iter().filter(|b| !matches!(b, Body::Rts(_))) {
        assert!(
            !slot(0, 0, 0, *body).within_limits(&geo(), 1 << 20),
            "{body:?}"
        );
    }
    let mut b = [0u8; PARSE_LEN];
    b[8] = 99;
    assert_eq!(
        parse(&b, &geo(), 1 << 20),
        Err(WireError::field("kind", 99u8))
    );
    b[8] = SlotKind::Inline as u8;
    b[9] = 0x80;
    assert_eq!(
        parse(&b, &geo(), 1 << 20),
        Err(WireError::field("flags", 0x80u8))
    );
    b[9] = 0;
    b[8] = SlotKind::Rts as u8;
    b[10] = 5;
    assert!(parse(&b, &geo(), 1 << 20).is_err());
    assert_eq!(
        parse(&b[..10], &geo(), 1 << 20),
        Err(WireError::Truncated {
            need: PARSE_LEN,
            have: 10
        })
    );
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
    x[8] = SlotKind::Rts as u8;
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
            b[8] = SlotKind::Inline as u8; // make the interesting case common
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
            body: bounce(before + clen + extra, id, (before, chunk, clen)),
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
            prop_assert!(s.within_limits(&geo(), 1 << 20), "{s:?}");
        }
    }
}
