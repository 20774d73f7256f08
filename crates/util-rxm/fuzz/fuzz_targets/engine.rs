//! Fuzz rxm's protocol engine with what a hostile peer could send on a connection: a
//! run of packets (each a length byte and that many bytes) fed to `Engine::receive`,
//! with a send of every protocol waiting and the engine asked what to transmit after
//! each. Nothing panics; what the engine hands the driver stays within the message
//! its first packet announced; a violation resets the connection, which comes up again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_testkit::length_prefixed;
use ofi_util_rxm::engine::{Arrival, Config, Engine, MsgMeta, OpId, PeerId, Transmit};

fuzz_target!(|data: &[u8]| {
    let peer = PeerId(0);
    let mut e = Engine::new(Config {
        credits: 4,
        eager_max: 1024,
        seg_size: 1024,
        sar_limit: 8192,
        max_msg: 1 << 20,
        ..Config::default()
    });
    e.handle_conn_up(peer, 4);
    for (k, len) in [10usize, 5000, 20_000].into_iter().enumerate() {
        let meta = MsgMeta {
            tag: Some(k as u64),
            data: None,
            dc: k % 2 == 0,
        };
        e.send_msg(peer, OpId(k as u64), meta, len).expect("send");
    }
    // The message being received: its length and the bytes placed so far.
    let mut open: Option<(usize, usize)> = None;
    for pkt in length_prefixed(data) {
        match e.receive(peer, pkt) {
            Ok(Arrival::First {
                total,
                payload,
                done,
                ..
            }) => {
                assert!(payload.len() <= total);
                assert_eq!(done, payload.len() == total);
                open = (!done).then_some((total, payload.len()));
            }
            Ok(Arrival::Segment {
                offset,
                payload,
                done,
            }) => {
                let (total, got) = open.expect("a segment only of an open message");
                assert_eq!(offset, got);
                assert!(got + payload.len() <= total);
                open = (!done).then_some((total, got + payload.len()));
            }
            Ok(Arrival::Rts { rts, .. }) => assert!(rts.get().is_ok()),
            Ok(Arrival::Nothing) => {}
            Err(v) => {
                e.reset(peer, v.errno(), false);
                open = None;
                e.handle_conn_up(peer, 4);
            }
        }
        while let Some(t) = e.poll_transmit_to(peer) {
            if let Transmit::Data { offset, len, .. } = t {
                assert!(offset + len <= 20_000);
            }
        }
        while e.poll_event().is_some() {}
    }
});
