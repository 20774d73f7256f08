//! Hostile and malformed packets: truncated, bad versions, types, flags and lengths,
//! forged cookies, ids naming nothing, random bytes. None panics; each is dropped and
//! counted; no state is created for a peer that has not proved its address.

mod common;

use common::{body, settle, sim, small_cfg, srd};
use ofi_core::error::Errno;
use ofi_core::flags::OpFlags;
use ofi_prov_efa::proto::peer::cookie_for;
use ofi_prov_efa::proto::wire::{self, Ctrl, Hs, PktType, Req, CTRL_LEN, HS_LEN, REQ_LEN};
use ofi_prov_efa::proto::{Config, Engine, Outstanding, SendReq, MAX_HS_REPLIES};
use ofi_testkit::TestRng;

const SECRET: u64 = 99;

fn engine() -> Engine {
    Engine::new(Config {
        secret: SECRET,
        ..small_cfg(SECRET)
    })
}

fn req(ty: PktType, cookie: u64, total: u64) -> Req {
    Req {
        ty,
        flags: 0,
        msg_id: 0,
        cookie,
        tag: 0,
        total_len: total,
        seg_offset: 0,
        send_id: 1,
        key: 0,
        cq_data: 0,
        rma_offset: 0,
    }
}

/// Handshake fields of version 4, no features, a window of 16 and `cookie`.
fn hs_fields(cookie: u64) -> Hs {
    Hs {
        max_version: 4,
        features: 0,
        cookie,
        recvwin: 16,
    }
}

fn samples() -> Vec<Vec<u8>> {
    let c = cookie_for(SECRET, 5);
    let hs = Hs {
        features: 3,
        ..hs_fields(0)
    };
    let mut v = vec![
        wire::emit_hs(PktType::Hello, &hs),
        wire::emit_hs(PktType::Handshake, &Hs { cookie: 7, ..hs }),
        wire::emit_req(&req(PktType::EagerMsg, c, 5), b"hello"),
        wire::emit_req(&req(PktType::MediumTag, c, 100), &[1; 40]),
        wire::emit_req(&req(PktType::LongReadMsg, c, 1 << 20), &[]),
        wire::emit_req(&req(PktType::CompareRta, c, 16), &[0; 16]),
    ];
    for ty in [
        PktType::Cts,
        PktType::CtsData,
        PktType::Eor,
        PktType::AtomRsp,
        PktType::Receipt,
    ] {
        let mut k = Ctrl::new(ty, 1);
        k.length = 10;
        let payload: &[u8] = match ty {
            PktType::CtsData => &[1, 2, 3],
            PktType::AtomRsp => &[0; 8],
            _ => &[],
        };
        v.push(wire::emit_ctrl(&k, payload));
    }
    v
}

#[test]
fn every_sample_parses_and_every_truncation_is_refused() {
    for p in samples() {
        assert!(wire::Repr::parse(&p).is_ok(), "{:?}", &p[..1]);
        let hdr = match PktType::from_wire(p[0]).unwrap() {
            t if t.is_handshake() => HS_LEN,
            t if t.is_req() => REQ_LEN,
            _ => CTRL_LEN,
        };
        for cut in 0..hdr {
            assert!(
                wire::Repr::parse(&p[..cut]).is_err(),
                "type {} cut at {cut}",
                p[0]
            );
        }
        let mut e = engine();
        for cut in 0..hdr {
            assert_eq!(e.handle_packet(0, 5, &p[..cut]), Ok(()));
        }
        assert_eq!(e.stats().malformed, hdr as u64);
        assert_eq!(e.known_peers(), 0, "no state from truncated packets");
        // Cut inside the payload: refused, or (a shorter segment) still well formed.
        for cut in hdr..p.len() {
            let _ = e.handle_packet(0, 5, &p[..cut]);
        }
    }
}

#[test]
fn bad_version_type_flags_and_lengths_are_dropped_and_counted() {
    let c = cookie_for(SECRET, 5);
    let mut bad = Vec::new();
    let mut p = wire::emit_req(&req(PktType::EagerMsg, c, 5), b"hello");
    p[1] = 3; // version
    bad.push(p);
    let mut p = wire::emit_req(&req(PktType::EagerMsg, c, 5), b"hello");
    p[0] = 200; // unknown type
    bad.push(p);
    let mut p = wire::emit_req(&req(PktType::EagerMsg, c, 5), b"hello");
    p[2] = 0x80; // unknown flag
    bad.push(p);
    // Eager: payload shorter and longer than its total.
    bad.push(wire::emit_req(&req(PktType::EagerMsg, c, 6), b"hello"));
    bad.push(wire::emit_req(&req(PktType::EagerMsg, c, 4), b"hello"));
    // A segment past the total, and one whose offset overflows.
    let mut r = req(PktType::MediumMsg, c, 100);
    r.seg_offset = 90;
    bad.push(wire::emit_req(&r, &[0; 20]));
    r.seg_offset = u64::MAX;
    bad.push(wire::emit_req(&r, &[0; 20]));
    // A long-read request with data; an atomic without its operand.
    bad.push(wire::emit_req(&req(PktType::LongReadMsg, c, 100), &[0; 4]));
    bad.push(wire::emit_req(&req(PktType::FetchRta, c, 8), &[0; 4]));
    // Control: a CTS granting nothing, a CTSDATA without data, a RECEIPT with data.
    bad.push(wire::emit_ctrl(&Ctrl::new(PktType::Cts, 1), &[]));
    bad.push(wire::emit_ctrl(&Ctrl::new(PktType::CtsData, 1), &[]));
    bad.push(wire::emit_ctrl(&Ctrl::new(PktType::Receipt, 1), &[1]));
    // A handshake with trailing bytes.
    let mut h = wire::emit_hs(PktType::Hello, &hs_fields(0));
    h.push(0);
    bad.push(h);
    let mut e = engine();
    for (i, p) in bad.iter().enumerate() {
        assert!(wire::Repr::parse(p).is_err(), "sample {i} parses");
        assert_eq!(e.handle_packet(0, 5, p), Ok(()));
    }
    assert_eq!(e.stats().malformed, bad.len() as u64);
    assert_eq!(e.known_peers(), 0);
    assert!(e.poll_event().is_none());
}

#[test]
fn a_forged_cookie_creates_no_state_and_a_hello_only_an_answer() {
    let mut e = engine();
    let wrong = cookie_for(SECRET, 6); // the cookie of another address
    assert_eq!(
        e.handle_packet(
            0,
            5,
            &wire::emit_req(&req(PktType::EagerMsg, wrong, 2), b"hi")
        ),
        Ok(())
    );
    assert_eq!(
        e.handle_packet(0, 5, &wire::emit_req(&req(PktType::EagerMsg, 0, 2), b"hi")),
        Ok(())
    );
    assert_eq!(e.stats().bad_cookie, 2);
    assert_eq!(e.known_peers(), 0);
    // HELLOs from many (forged) sources: answered up to the cap, no peer state.
    let hello = wire::emit_hs(PktType::Hello, &hs_fields(0));
    for src in 0..(MAX_HS_REPLIES as u64 + 100) {
        assert_eq!(e.handle_packet(0, src, &hello), Ok(()));
    }
    assert_eq!(e.known_peers(), 0);
    assert_eq!(e.stats().hello_answered, MAX_HS_REPLIES as u64);
    assert_eq!(e.stats().hello_dropped, 100);
    // The answer to 5 carries the cookie of 5.
    match e.poll_transmit(0) {
        Some(ofi_prov_efa::proto::Transmit::Send { peer, bytes, .. }) => {
            assert_eq!(peer, 0);
            match wire::Repr::parse(&bytes) {
                Ok(wire::Repr::Handshake(h)) => assert_eq!(h.cookie, cookie_for(SECRET, 0)),
                r => panic!("{r:?}"),
            }
        }
        t => panic!("{t:?}"),
    }
    // An unsolicited handshake is stale.
    let hs = wire::emit_hs(PktType::Handshake, &hs_fields(9));
    assert_eq!(e.handle_packet(0, 77, &hs), Ok(()));
    assert_eq!(e.stats().stale, 1);
    assert_eq!(e.known_peers(), 0);
}

#[test]
fn ids_that_name_nothing_are_stale() {
    let mut e = engine();
    let c = cookie_for(SECRET, 5);
    // A valid request makes 5 known.
    assert_eq!(
        e.handle_packet(0, 5, &wire::emit_req(&req(PktType::EagerMsg, c, 2), b"hi")),
        Ok(())
    );
    assert_eq!(e.known_peers(), 1);
    let mut n = 0;
    for ty in [
        PktType::Cts,
        PktType::CtsData,
        PktType::ReadRsp,
        PktType::Eor,
        PktType::AtomRsp,
        PktType::Receipt,
    ] {
        for id in [0, 1, 7, u32::MAX] {
            let mut k = Ctrl::new(ty, id);
            k.recv_id = id;
            k.length = 100;
            let payload: &[u8] = match ty {
                PktType::CtsData | PktType::ReadRsp => &[1, 2, 3],
                PktType::AtomRsp => &[0; 8],
                _ => &[],
            };
            assert_eq!(e.handle_packet(0, 5, &wire::emit_ctrl(&k, payload)), Ok(()));
            n += 1;
        }
    }
    // A later segment of a message that does not exist; a second first packet.
    let mut r = req(PktType::MediumMsg, c, 1000);
    r.msg_id = 0;
    r.seg_offset = 500;
    assert_eq!(e.handle_packet(0, 5, &wire::emit_req(&r, &[0; 10])), Ok(()));
    assert_eq!(
        e.handle_packet(0, 5, &wire::emit_req(&req(PktType::EagerMsg, c, 2), b"hi")),
        Ok(())
    );
    assert_eq!(e.stats().stale, n + 2);
    // Transport reports for tokens never handed out are ignored.
    e.handle_send_done(0, 12345);
    e.handle_rnr(0, 12345);
    e.handle_read_done(0, 12345, Ok(vec![1]));
    assert_eq!(e.outstanding().in_flight, 0);
    // Reads of memory that is not there.
    assert_eq!(e.serve_read(5, 1, 0, 8), Err(Errno::EACCES));
    assert_eq!(e.serve_read(5, 1 << 31 | 3, 0, 8), Err(Errno::EACCES));
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = TestRng::from_env("EFA_HOSTILE_SEED", 0x4057);
    let mut e = engine();
    let types: Vec<u8> = (0..=255).collect();
    for _ in 0..20_000 {
        let len = rng.below(300) as usize;
        let mut p = rng.bytes(len);
        if len >= 2 && rng.chance(80) {
            p[0] = rng.pick(&types[..]) % 140;
            p[1] = wire::VERSION;
            if len >= 16 && rng.chance(50) {
                p[8..16].copy_from_slice(&cookie_for(SECRET, 5).to_le_bytes());
            }
        }
        let _ = e.handle_packet(0, 5, &p);
        while e.poll_transmit(0).is_some() {}
    }
    while e.poll_event().is_some() {}
}

#[test]
fn a_forged_peer_cannot_complete_another_peers_operation() {
    let mut s = sim(3, |i| small_cfg(i as u64 + 40), 0, srd(0), 21);
    // 0 sends a long-read message to 1; 2 forges the EOR naming it.
    s.nodes[0]
        .eng
        .send(
            0,
            SendReq {
                ctx: 1,
                peer: 1,
                data: body(0, 0, 9000),
                tag: None,
                cq_data: None,
                delivery_complete: false,
            },
        )
        .unwrap();
    settle(&mut s, 1_000_000);
    for id in 0..8 {
        let eor = wire::emit_ctrl(&Ctrl::new(PktType::Eor, id), &[]);
        assert_eq!(s.nodes[0].eng.handle_packet(s.now, 2, &eor), Ok(()));
        // 2 cannot read 0's message either.
        assert_eq!(
            s.nodes[0].eng.serve_read(2, 1 << 31 | id, 0, 8),
            Err(Errno::EACCES)
        );
    }
    assert!(s.nodes[0].events.is_empty() && s.nodes[0].eng.poll_event().is_none());
    assert_eq!(s.nodes[0].eng.outstanding().tx_ops, 1);
    // The real receiver completes it.
    s.nodes[1]
        .eng
        .post_recv(
            s.now,
            ofi_prov_efa::proto::RecvReq {
                ctx: 1,
                len: 9000,
                tag: None,
                src: None,
                flags: OpFlags::empty(),
            },
        )
        .unwrap();
    settle(&mut s, 100_000_000);
    assert_eq!(s.nodes[0].events.len(), 1);
    assert_eq!(s.nodes[0].eng.outstanding(), Outstanding::default());
}

#[test]
fn held_packets_are_bounded_by_the_window() {
    let mut e = Engine::new(Config {
        secret: SECRET,
        recvwin_size: 4,
        ..small_cfg(SECRET)
    });
    let c = cookie_for(SECRET, 5);
    let mut r = req(PktType::MediumMsg, c, 1000);
    r.msg_id = 2; // message 0 never comes: everything from 2 on is held
    for i in 0..4 {
        r.seg_offset = i * 10;
        assert_eq!(e.handle_packet(0, 5, &wire::emit_req(&r, &[1; 10])), Ok(()));
    }
    assert_eq!(e.outstanding().held, 4);
    r.seg_offset = 100;
    assert!(
        e.handle_packet(0, 5, &wire::emit_req(&r, &[1; 10]))
            .is_err(),
        "window full: RNR"
    );
    r.msg_id = 9; // too far ahead
    assert!(e
        .handle_packet(0, 5, &wire::emit_req(&r, &[1; 10]))
        .is_err());
    assert_eq!(e.stats().not_ready, 2);
    assert_eq!(e.outstanding().held, 4);
}

#[test]
fn oversized_requests_and_write_floods_are_bounded() {
    use ofi_prov_efa::proto::MAX_WRITES_IN_PROGRESS;
    let mut e = engine();
    let c = cookie_for(SECRET, 5);
    let max = e.config().max_msg_size as u64;
    let mut r = req(PktType::MediumMsg, c, max + 1);
    assert_eq!(e.handle_packet(0, 5, &wire::emit_req(&r, &[0; 10])), Ok(()));
    assert_eq!(e.stats().malformed, 1);
    assert_eq!(e.known_peers(), 0);
    // Writes that never finish: each holds a little state, up to the bound.
    r = req(PktType::EagerRtw, c, 1000);
    for id in 0..MAX_WRITES_IN_PROGRESS as u32 {
        r.send_id = id;
        assert_eq!(e.handle_packet(0, 5, &wire::emit_req(&r, &[0; 10])), Ok(()));
    }
    assert_eq!(e.outstanding().rma_state, MAX_WRITES_IN_PROGRESS);
    r.send_id = u32::MAX;
    assert!(
        e.handle_packet(0, 5, &wire::emit_req(&r, &[0; 10]))
            .is_err(),
        "refused: RNR"
    );
    r.send_id = 3; // a write already in progress goes on
    assert_eq!(e.handle_packet(0, 5, &wire::emit_req(&r, &[0; 10])), Ok(()));
    assert_eq!(e.outstanding().rma_state, MAX_WRITES_IN_PROGRESS);
}
