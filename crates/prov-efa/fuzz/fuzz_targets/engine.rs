//! Fuzz efa's parser and engine: arbitrary datagrams (as a hostile or broken peer could
//! send) never panic; a request that parses is re-emitted to the same bytes; and an
//! engine with a send, a receive and a region, fed the input as length-prefixed packets
//! from one peer at advancing times (requests carrying the cookie it would accept, so
//! the paths past the handshake are reached), with its own packets reported done or
//! refused in turn, stays consistent and never holds what it did not account for.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofi_testkit::length_prefixed;
use ofi_core::flags::OpFlags;
use ofi_prov_efa::proto::peer::cookie_for;
use ofi_prov_efa::proto::wire::{self, Repr, REQ_LEN};
use ofi_prov_efa::proto::{Access, Config, Engine, RecvReq, SendReq, Transmit};

const SECRET: u64 = 7;
const PEER: u64 = 9;

fuzz_target!(|data: &[u8]| {
    if let Ok(Repr::Req(r, payload)) = Repr::parse(data) {
        assert_eq!(&wire::emit_req(&r, payload)[..], data);
    }
    let cfg = Config {
        mtu: 256,
        max_medium_msg_size: 1024,
        min_read_msg_size: 2048,
        tx_min_credits: 2,
        recvwin_size: 8,
        secret: SECRET,
        ..Config::default()
    };
    let mut e = Engine::new(cfg);
    let _ = e.register(1, vec![0; 256], Access::ALL);
    let _ = e.post_recv(0, RecvReq { ctx: 1, len: 600, tag: None, src: None, flags: OpFlags::MULTI_RECV });
    let _ = e.send(0, SendReq { ctx: 2, peer: PEER, data: vec![3; 1500], tag: Some(4), cq_data: None, delivery_complete: true });
    let mut now = 0u64;
    let mut flip = false;
    for pkt in length_prefixed(data) {
        now += 1_000_000;
        let mut pkt = pkt.to_vec();
        if pkt.len() >= REQ_LEN && pkt[0] >= 64 {
            pkt[8..16].copy_from_slice(&cookie_for(SECRET, PEER).to_le_bytes());
        }
        let _ = e.handle_packet(now, PEER, &pkt);
        while let Some(t) = e.poll_transmit(now) {
            match t {
                Transmit::Send { token, .. } => {
                    flip = !flip;
                    if flip {
                        e.handle_send_done(now, token);
                    } else {
                        e.handle_rnr(now, token);
                    }
                }
                Transmit::Read { token, len, .. } => e.handle_read_done(now, token, Ok(vec![5; len])),
            }
        }
        if e.poll_timeout().is_some_and(|t| t <= now) {
            e.handle_timeout(now);
        }
        while e.poll_event().is_some() {}
    }
});
