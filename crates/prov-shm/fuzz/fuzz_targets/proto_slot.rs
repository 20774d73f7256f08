//! Fuzz the slot parser: arbitrary bytes (as a hostile peer could leave in a slot)
//! must never panic, and whatever parses must respect the geometry's limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_prov_shm::proto::{parse, Body, INLINE_CAP, RMA_INLINE_CAP};
use ofi_prov_shm::region::Geometry;

fuzz_target!(|data: &[u8]| {
    let geo = Geometry {
        rings: 4,
        slots: 8,
        chunks: 4,
        chunk_size: 4096,
    };
    if let Ok(s) = parse(data, &geo, 1 << 20) {
        match s.body {
            Body::Inline { len, .. } => assert!(len <= INLINE_CAP),
            Body::Rts { total, niov, .. } => assert!((1..=4).contains(&niov) && total <= 1 << 20),
            Body::Bounce {
                total,
                offset,
                chunk,
                clen,
                ..
            } => assert!(chunk < 4 && clen <= 4096 && offset + clen <= total),
            Body::Rma { total, niov, .. } => assert!((1..=4).contains(&niov) && total <= 1 << 20),
            Body::WriteInline { len, .. } => assert!(len <= RMA_INLINE_CAP),
            Body::Atomic { count, dt, .. } => assert!(count * dt.size() <= 1 << 20),
            Body::WriteFrag {
                total,
                offset,
                chunk,
                clen,
                ..
            } => assert!(chunk < 4 && clen <= 4096 && offset + clen <= total),
        }
    }
});
