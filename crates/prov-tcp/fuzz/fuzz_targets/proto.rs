//! Fuzz the tcp provider's wire parsers: CM header, operation header, remote iovs and
//! a whole byte stream. Run: `cargo fuzz run proto` (stable: `--sanitizer none`) from
//! `crates/prov-tcp/fuzz`. No input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_prov_tcp::proto::{parse_stream, CmHdr, Hdr, RmaIov};

fuzz_target!(|data: &[u8]| {
    let _ = CmHdr::parse(data);
    if let Ok(h) = Hdr::parse(data) {
        // A parsed header re-encodes to the same bytes.
        let mut b = [0u8; ofi_prov_tcp::proto::HDR_LEN];
        h.encode(&mut b);
        assert_eq!(Hdr::parse(&b), Ok(h));
    }
    let _ = RmaIov::from_bytes(data);
    let _ = parse_stream(data);
});
