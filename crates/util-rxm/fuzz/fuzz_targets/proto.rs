//! Fuzz rxm's parsers: arbitrary bytes (as a hostile peer could send in CM data or a
//! packet) must never panic, and whatever parses must respect the format's limits and
//! round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_kit::auth::AuthTag;
use ofi_util_rxm::engine::{Inbound, RxLimits};
use ofi_util_rxm::hello_ext::{self, Extensions};
use ofi_util_rxm::proto::{Hdr, Hello, Rts, HDR_LEN, MAX_ADDR, RTS_IOVS};

/// The default limits (a 16 KiB buffer size).
const LIM: RxLimits = RxLimits {
    eager_max: 16384 - HDR_LEN,
    sar_max: 131_072,
    max_msg: 256 << 20,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hello::parse(data) {
        assert!(h.addr.len() <= MAX_ADDR);
        // A connection request's extensions (receive context index, alias): what
        // parses round-trips through `append` (after a tag's place of zeros).
        if let Ok(ext) = Extensions::parse(data, h.addr.len()) {
            assert!(ext.alias.as_ref().map_or(true, |a| !a.is_empty() && a.len() <= MAX_ADDR));
            let mut again = h.encode();
            hello_ext::append(&mut again, AuthTag::NONE, &ext);
            assert_eq!(Extensions::parse(&again, h.addr.len()).ok(), Some(ext));
        }
        assert_eq!(Hello::parse(&h.encode()).ok(), Some(h));
    }
    if let Ok(h) = Hdr::parse(data) {
        assert_eq!(Hdr::parse(&h.bytes()).ok(), Some(h));
        let body = &data[HDR_LEN..];
        if let Ok(r) = Rts::parse(body, h.size) {
            assert!((1..=RTS_IOVS).contains(&r.n));
            let sum: u64 = r.iov[..r.n].iter().map(|e| e.1).sum();
            assert_eq!(sum, h.size);
        }
    }
    // The checks the engine and the endpoint share: what passes respects the limits.
    if let Ok((inb, _)) = Inbound::classify(data, &LIM) {
        match inb {
            Inbound::Eager { payload, .. } => assert!(payload.len() <= LIM.eager_max),
            Inbound::SarFirst { total, payload, .. } => {
                assert!(payload.len() <= total && total <= LIM.sar_max)
            }
            Inbound::Rts { total, body, .. } => {
                assert!(total <= LIM.max_msg);
                assert!(body.get().is_ok());
            }
            _ => {}
        }
    }
});
