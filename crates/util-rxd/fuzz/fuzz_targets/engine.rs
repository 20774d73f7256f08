//! Fuzz rxd's parsers and engine: arbitrary datagrams and message headers (as a hostile
//! or broken peer could send) must never panic; whatever parses round-trips; and the engine,
//! fed the bytes as a sequence of packets at advancing times, stays consistent (every
//! token it reports was given to it, once).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_testkit::length_prefixed;
use ofi_util_rxd::peer::{Config, Engine, Event, Seg};
use ofi_util_rxd::proto::{op_hdr, parse_msg_hdr, Hdr, PktType, RmaReq, COOKIE_LEN, HDR_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hdr::from_bytes(data) {
        assert_eq!(Hdr::from_bytes(&h.bytes()), Ok(h));
    }
    // The message-level headers (inside the reliable stream).
    if let Ok((op, tag, cq)) = parse_msg_hdr(data) {
        assert_eq!(parse_msg_hdr(&op_hdr(op, tag, cq)), Ok((op, tag, cq)));
    }
    if let Ok(r) = RmaReq::from_bytes(data) {
        assert_eq!(RmaReq::from_bytes(&r.bytes()), Ok(r));
    }
    let cfg = Config {
        seg_size: 200,
        window: 16,
        max_msg: 4096,
        ..Config::default()
    };
    let mut e = Engine::with_cookie_key(cfg, 7, (1, 2));
    let mut s = Engine::with_cookie_key(cfg, 7, (1, 2));
    let mut got = 0usize;
    let p = e.peer_for_addr(&[9, 9]);
    let _ = e.send(p, 1, &[0u8; 500], 0);
    let mut now = 0u64;
    // Packets are length-prefixed chunks of the input.
    for pkt in length_prefixed(data) {
        now += 1_000_000;
        // Every packet comes from the peer's address; a CONNECT gets the cookie the
        // engines would accept (the fuzzer could not guess it), so the paths past the
        // handshake are reached.
        let mut pkt = pkt.to_vec();
        if let Ok(h) = Hdr::from_bytes(&pkt) {
            if h.ty == PktType::Connect && pkt.len() == HDR_LEN + COOKIE_LEN {
                let c = e.cookie_for(&[9, 9], h.src_id, h.src_sess, now);
                pkt[HDR_LEN..].copy_from_slice(&c.to_le_bytes());
            }
        }
        let pkt = &pkt[..];
        e.handle_packet(&[9, 9], pkt, now);
        // The same packet to a streaming engine: pieces stay contiguous and bounded.
        s.handle_packet_streaming(&[9, 9], pkt, now, &mut |seg: Seg<'_>| {
            if seg.first {
                // Some messages are refused (receiver not ready), as a full unexpected
                // queue does: the engine must offer them again, never half-taken.
                if seg.total % 3 == 1 {
                    return false;
                }
                got = 0;
            }
            assert_eq!(seg.offset, got);
            got += seg.data.len();
            assert!(got <= seg.total && seg.total <= 4096);
            assert_eq!(seg.last, got == seg.total);
            true
        });
        e.handle_timeout(now);
        e.poll_transmit(now, 64, |_, _, b| {
            assert!(b.len() >= HDR_LEN);
            true
        });
    }
    let mut tokens = 0;
    while let Some(ev) = e.poll_event() {
        match ev {
            Event::Sent { token } | Event::Failed { token, .. } => {
                assert_eq!(token, 1);
                tokens += 1;
            }
            Event::Message { data, .. } => assert!(data.len() <= 4096),
            Event::PeerLost { .. } | Event::PeerReclaimed { .. } => {}
        }
    }
    assert!(tokens <= 1);
});
