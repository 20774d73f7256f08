//! Fuzz the udp provider's header parser: any bytes must parse or be refused without a
//! panic, and whatever parses must re-encode to exactly the bytes it came from.
//!
//! `cargo fuzz run proto_header --sanitizer none` (from crates/prov-udp/fuzz).

#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_prov_udp::proto::{Header, HDR_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Header::from_bytes(data) {
        assert!(data.len() >= HDR_LEN);
        assert_eq!(h.encode()[..], data[..HDR_LEN]);
        assert_eq!(h.cq_data().is_some(), h.flags & 1 != 0);
    }
});
