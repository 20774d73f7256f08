//! Fuzz the slot parser: arbitrary bytes (as a hostile peer could leave in a slot)
//! must never panic, and whatever parses must respect the geometry's limits. The
//! inline fast path (`parse_inline`) must accept exactly the inline slots `parse`
//! accepts, with the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_prov_shm::proto::{parse_inline, Body, InlineHdr, Slot, INLINE_OFF, PARSE_LEN};
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
        assert!(s.within_limits(&geo, 1 << 20), "{s:?}");
    }
});
