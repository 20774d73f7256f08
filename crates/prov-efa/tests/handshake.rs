//! The handshake step by step, between two engines driven by hand: the first send to a
//! new peer asks with `HELLO` and holds its requests; the answer creates no state at the
//! answering end; the request with the cookie does.

use ofi_core::flags::OpFlags;
use ofi_prov_efa::proto::wire::{self, Repr};
use ofi_prov_efa::proto::{Config, Engine, Event, RecvReq, SendReq, Transmit};

fn sent(t: Option<Transmit>) -> (u64, u64, Vec<u8>) {
    match t {
        Some(Transmit::Send { peer, token, bytes }) => (peer, token, bytes),
        t => panic!("expected a send, got {t:?}"),
    }
}

#[test]
fn first_send_asks_then_sends_with_the_cookie() {
    let (a_addr, b_addr) = (1u64, 2u64);
    let mut a = Engine::new(Config {
        secret: 11,
        ..Config::default()
    });
    let mut b = Engine::new(Config {
        secret: 22,
        ..Config::default()
    });
    b.post_recv(
        0,
        RecvReq {
            ctx: 9,
            len: 64,
            tag: None,
            src: None,
            flags: OpFlags::empty(),
        },
    )
    .unwrap();
    let s = SendReq {
        ctx: 5,
        peer: b_addr,
        data: b"ping".to_vec(),
        tag: None,
        cq_data: None,
        delivery_complete: false,
    };
    a.send(0, s).unwrap();
    // Only the question goes out; the message waits.
    let (to, tok, hello) = sent(a.poll_transmit(0));
    assert_eq!(to, b_addr);
    assert!(matches!(Repr::parse(&hello), Ok(Repr::Hello(_))));
    assert!(a.poll_transmit(0).is_none());
    a.handle_send_done(1, tok);
    // B answers and keeps nothing.
    assert_eq!(b.handle_packet(2, a_addr, &hello), Ok(()));
    assert_eq!(b.known_peers(), 0);
    let (to, tok_b, hs) = sent(b.poll_transmit(2));
    assert_eq!(to, a_addr);
    let cookie = match Repr::parse(&hs) {
        Ok(Repr::Handshake(h)) => {
            assert_ne!(h.features & wire::FEAT_RDMA_READ, 0);
            h.cookie
        }
        r => panic!("{r:?}"),
    };
    b.handle_send_done(3, tok_b);
    // A learns B's features and cookie; the message goes, carrying it.
    assert_eq!(a.handle_packet(4, b_addr, &hs), Ok(()));
    let (_, tok, req) = sent(a.poll_transmit(4));
    match Repr::parse(&req) {
        Ok(Repr::Req(r, payload)) => {
            assert_eq!((r.cookie, r.msg_id, payload), (cookie, 0, &b"ping"[..]));
        }
        r => panic!("{r:?}"),
    }
    // A replayed handshake is harmless.
    assert_eq!(a.handle_packet(4, b_addr, &hs), Ok(()));
    // B takes it: now (and only now) it keeps state for A.
    assert_eq!(b.handle_packet(5, a_addr, &req), Ok(()));
    assert_eq!(b.known_peers(), 1);
    match b.poll_event() {
        Some(Event::Rx(r)) => assert_eq!((r.ctx, r.src, &r.data[..4]), (9, a_addr, &b"ping"[..])),
        e => panic!("{e:?}"),
    }
    a.handle_send_done(6, tok);
    assert!(matches!(
        a.poll_event(),
        Some(Event::Tx {
            ctx: 5,
            result: Ok(()),
            ..
        })
    ));
    // The same request from another address does not check.
    assert_eq!(b.handle_packet(7, 3, &req), Ok(()));
    assert_eq!(b.stats().bad_cookie, 1);
    assert_eq!(b.known_peers(), 1);
}

#[test]
fn an_unanswered_hello_is_asked_again() {
    let cfg = Config {
        hello_interval: 1_000,
        ..Config::default()
    };
    let mut a = Engine::new(cfg);
    let s = SendReq {
        ctx: 1,
        peer: 2,
        data: vec![1],
        tag: None,
        cq_data: None,
        delivery_complete: false,
    };
    a.send(0, s).unwrap();
    let (_, tok, _) = sent(a.poll_transmit(0));
    a.handle_send_done(0, tok);
    assert_eq!(a.poll_timeout(), Some(1_000));
    a.handle_timeout(1_000);
    let (_, _, again) = sent(a.poll_transmit(1_000));
    assert!(matches!(Repr::parse(&again), Ok(Repr::Hello(_))));
}

#[test]
fn rnr_backoff_doubles_to_its_cap_and_resets_on_success() {
    let cfg = Config {
        rnr_backoff_initial_wait_time: 10,
        rnr_backoff_wait_time_cap: 50,
        ..Config::default()
    };
    let mut a = Engine::new(cfg);
    let mut b = Engine::new(Config {
        secret: 3,
        ..Config::default()
    });
    let s = SendReq {
        ctx: 1,
        peer: 2,
        data: vec![7; 10],
        tag: None,
        cq_data: None,
        delivery_complete: false,
    };
    a.send(0, s.clone()).unwrap();
    let (_, tok, hello) = sent(a.poll_transmit(0));
    a.handle_send_done(0, tok);
    b.handle_packet(0, 1, &hello).unwrap();
    let (_, _, hs) = sent(b.poll_transmit(0));
    a.handle_packet(0, 2, &hs).unwrap();
    // The request is refused again and again: waits of 10, 20, 40, 50, 50 µs.
    let mut now = 1_000;
    let (_, mut tok, req) = sent(a.poll_transmit(now));
    for wait_us in [10u64, 20, 40, 50, 50] {
        a.handle_rnr(now, tok);
        assert!(
            a.poll_transmit(now).is_none(),
            "nothing before the wait ends"
        );
        let due = now + wait_us * 1_000;
        assert_eq!(a.poll_timeout(), Some(due));
        assert!(a.poll_transmit(due - 1).is_none());
        now = due;
        a.handle_timeout(now);
        let (_, t, again) = sent(a.poll_transmit(now));
        assert_eq!(again, req, "the same packet again");
        tok = t;
    }
    assert_eq!(a.stats().rnr, 5);
    // Accepted: the next refusal starts from the first wait again.
    a.handle_send_done(now, tok);
    assert!(matches!(
        a.poll_event(),
        Some(Event::Tx {
            ctx: 1,
            result: Ok(()),
            ..
        })
    ));
    a.send(now, SendReq { ctx: 2, ..s }).unwrap();
    let (_, tok, _) = sent(a.poll_transmit(now));
    a.handle_rnr(now, tok);
    assert_eq!(a.poll_timeout(), Some(now + 10_000));
}
