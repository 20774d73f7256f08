//! Fuzz the slot parser: arbitrary bytes (as a hostile peer could leave in a slot)
//! must never panic, and whatever parses must respect the geometry's limits. The
//! inline fast path (`parse_inline`) must accept exactly the inline slots `parse`
//! accepts, with the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_prov_shm::proto::{
    parse_inline, Body, BounceSlot, InlineHdr, RmaSlot, RtsSlot, Slot, WriteFragSlot, INLINE_CAP,
    INLINE_OFF, PARSE_LEN, RMA_INLINE_CAP,
};
use ofi_prov_shm::region::Geometry;

fuzz_target!(|data: &[u8]| {
    let geo = Geometry {
        rings: 4,
        slots: 8,
        chunks: 4,
        chunk_size: 4096,
    };
    let parsed = Slot::parse(data, &geo, 1 << 20);
    // Slots are always whole (PARSE_LEN bytes and more); shorter inputs only test
    // that the general parser refuses them.
    if let (Some(first), true) = (data.get(..INLINE_OFF), data.len() >= PARSE_LEN) {
        let mut b = [0u8; INLINE_OFF];
        b.copy_from_slice(first);
        let fast = parse_inline(&b);
        match &parsed {
            Ok(s) => match s.body {
                Body::Inline { len, id } => assert_eq!(
                    fast,
                    Some(InlineHdr {
                        flags: s.flags,
                        len,
                        tag: s.tag,
                        data: s.data,
                        id
                    })
                ),
                _ => assert_eq!(fast, None),
            },
            Err(_) => assert_eq!(fast, None),
        }
    }
    if let Ok(s) = parsed {
        match s.body {
            Body::Inline { len, .. } => assert!(len <= INLINE_CAP),
            Body::Rts(RtsSlot { total, bufs, .. }) | Body::Rma(RmaSlot { total, bufs, .. }) => {
                assert!((1..=4).contains(&bufs.niov) && total <= 1 << 20)
            }
            Body::Bounce(BounceSlot { total, frag, .. })
            | Body::WriteFrag(WriteFragSlot { total, frag, .. }) => {
                assert!(frag.chunk < 4 && frag.clen <= 4096 && frag.offset + frag.clen <= total)
            }
            Body::WriteInline(w) => assert!(w.len <= RMA_INLINE_CAP),
            Body::Atomic(a) => assert!(a.count * a.dt.size() <= 1 << 20),
        }
    }
});
