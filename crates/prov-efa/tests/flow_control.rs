//! Receiver not ready through the whole stack: a sender floods a receiver that posts no
//! receive until the sender is held back (`fi_send` answers `FI_EAGAIN`: the receiver's
//! engine holds its limit of unexpected messages and of messages waiting behind a
//! refused one for order, then refuses datagrams, its receive slots stay held, the
//! device answers RNR and the sender's engine backs off). Then the
//! receiver posts its receives: every message arrives exactly once, in order, with its
//! bytes, and every send completes successfully.
//!
//! And the engine's side of it, by hand and under a storm of refusals: once its peer
//! refused a packet, a sender sends no new request to it until the refused packets are
//! taken (control packets still go), so the receiver never holds only packets later
//! than the one it waits for while that one finds no room.

use std::time::{Duration, Instant};

use ofi::{Caps, EpType, Errno};
use ofi_conformance::fixture::{open_domain, post_recv, send};
use ofi_conformance::pair::{info_for, open_side, poll, PairSpec, CTX_A, CTX_B};
use ofi_conformance::plugin::linked_subject;
use ofi_conformance::Subject;
use ofi_core::flags::OpFlags;
use ofi_prov_efa::proto::wire::{self, PktType, Repr};
use ofi_prov_efa::proto::{Config, Engine, Event, RecvReq, SendReq, Transmit};
use ofi_testkit::TestRng;

const BOUND: Duration = Duration::from_secs(60);
const LEN: usize = 48;

fn subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    // Few receive slots and a short device retry: RNR comes quickly.
    std::env::set_var("FI_EFA_RX_BUFS", "16");
    std::env::set_var("FI_EFA_RNR_RETRY", "1");
    // Messages held for order (behind a refused one) at most 1024 ahead (and as many
    // refused datagrams copied aside), above the 32 datagrams a sender has in flight.
    std::env::set_var("FI_EFA_RECVWIN_SIZE", "1024");
    std::env::set_var("FI_EFA_TX_BUFS", "32");
    // Back-offs of at most 5 ms (1 s by default), to keep the test short.
    std::env::set_var("FI_EFA_RNR_BACKOFF_WAIT_TIME_CAP", "5000");
    linked_subject::<ofi_prov_efa::EfaProvider>()
}

fn payload(i: usize) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(&(i as u64).to_le_bytes());
    for (k, x) in b[8..].iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(7).wrapping_add(k as u8);
    }
    b
}

#[test]
fn a_flooded_receiver_holds_the_sender_back_then_takes_everything_in_order() {
    let s = subject();
    let info = info_for(&s, EpType::Rdm, Caps::MSG).expect("efa RDM info");
    let (_fabric, domain) = open_domain(&s, &info);
    let spec = PairSpec::new(EpType::Rdm, Caps::MSG);
    let (tx, tx_cq, _, tx_av) = open_side(&domain, &info, &spec, CTX_A, None);
    let (rx, rx_cq, _, _rx_av) = open_side(&domain, &info, &spec, CTX_B, None);
    tx.enable().unwrap();
    rx.enable().unwrap();
    let rx_name = ofi::Address::from_bytes(info.addr_format, &rx.getname().unwrap()).unwrap();
    let dest = tx_av.unwrap().insert(&[rx_name]).unwrap()[0];
    let bufs: Vec<[u8; LEN]> = (0..5000).map(payload).collect();
    let mut sent = 0usize;
    let mut done = 0usize;
    let start = Instant::now();
    // Flood until the sender is held back for a while (the receiver makes progress —
    // its CQ is read — but posts nothing).
    let mut held_since: Option<Instant> = None;
    while sent < bufs.len() {
        assert!(start.elapsed() < BOUND, "flooding took over {BOUND:?}");
        match send(&tx, &bufs[sent], dest, sent) {
            Ok(()) => {
                sent += 1;
                held_since = None;
            }
            Err(e) if e.code() == Errno::EAGAIN => {
                let t = *held_since.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_millis(200) {
                    break;
                }
            }
            Err(e) => panic!("send {sent}: {e}"),
        }
        while let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
        assert!(poll(&rx_cq).is_none(), "a completion without a receive");
    }
    assert!(
        sent < bufs.len(),
        "the receiver never held the sender back ({sent} sent, {done} complete)"
    );
    println!("held back after {sent} sends, {done} complete");
    // Now receive everything, then send the rest.
    let mut rbufs = vec![[0u8; LEN]; bufs.len()];
    let mut posted = 0usize;
    let mut got = Vec::new();
    while got.len() < bufs.len() {
        assert!(
            start.elapsed() < BOUND,
            "{} of {} received within {BOUND:?}",
            got.len(),
            bufs.len()
        );
        while posted < rbufs.len() && posted < got.len() + 512 {
            match post_recv(&rx, &mut rbufs[posted], 0x10_0000 + posted) {
                Ok(()) => posted += 1,
                Err(e) if e.code() == Errno::EAGAIN => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if sent < bufs.len() {
            match send(&tx, &bufs[sent], dest, sent) {
                Ok(()) => sent += 1,
                Err(e) if e.code() == Errno::EAGAIN => {}
                Err(e) => panic!("send {sent}: {e}"),
            }
        }
        while let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
        while let Some(c) = poll(&rx_cq) {
            let c = c.unwrap_or_else(|e| panic!("a receive failed: {e:?}"));
            assert_eq!(c.len, LEN);
            got.push(c.op_context - 0x10_0000);
        }
    }
    while done < bufs.len() {
        assert!(start.elapsed() < BOUND, "{done} sends complete");
        if let Some(c) = poll(&tx_cq) {
            c.unwrap_or_else(|e| panic!("a send failed: {e:?}"));
            done += 1;
        }
    }
    // Receives complete in posting order, and messages were matched in sending order:
    // receive i holds message i.
    for (k, &i) in got.iter().enumerate() {
        assert_eq!(i, k, "receive completions out of order");
        assert_eq!(rbufs[i], bufs[i], "receive {i} holds another message");
    }
}

const A: u64 = 1;
const B: u64 = 2;

fn send_req(ctx: u64, i: u32) -> SendReq {
    let mut data = vec![0u8; 32];
    data[..4].copy_from_slice(&i.to_le_bytes());
    SendReq {
        ctx,
        peer: B,
        data,
        tag: None,
        cq_data: None,
        delivery_complete: false,
    }
}

fn sent(t: Option<Transmit>) -> (u64, Vec<u8>) {
    match t {
        Some(Transmit::Send { token, bytes, .. }) => (token, bytes),
        t => panic!("expected a send, got {t:?}"),
    }
}

/// A, having sent message 0 to B, and B, having answered A's `HELLO`: B's
/// `HANDSHAKE`, not yet given to A.
fn hello_answered(a_cfg: Config, b_cfg: Config) -> (Engine, Engine, Vec<u8>) {
    let mut a = Engine::new(a_cfg);
    let mut b = Engine::new(b_cfg);
    a.send(0, send_req(0, 0)).unwrap();
    let (tok, hello) = sent(a.poll_transmit(0));
    a.handle_send_done(0, tok);
    b.handle_packet(0, A, &hello).unwrap();
    let (tok, hs) = sent(b.poll_transmit(0));
    b.handle_send_done(0, tok);
    (a, b, hs)
}

/// A and B with the handshake done (B's answer taken by A).
fn handshaken(a_cfg: Config, b_cfg: Config) -> (Engine, Engine) {
    let (mut a, b, hs) = hello_answered(a_cfg, b_cfg);
    a.handle_packet(0, B, &hs).unwrap();
    (a, b)
}

#[test]
fn a_sender_stays_within_the_window_of_its_oldest_message_not_taken() {
    // The window is the receiver's (4 ids, announced in its handshake), not the
    // sender's own setting (the default, 16384).
    let cfg = Config {
        rnr_backoff_initial_wait_time: 10,
        rnr_backoff_wait_time_cap: 10,
        secret: 1,
        ..Config::default()
    };
    let (mut a, _b) = handshaken(
        cfg,
        Config {
            recvwin_size: 4,
            secret: 2,
            ..Config::default()
        },
    );
    for i in 1..10 {
        a.send(0, send_req(u64::from(i), i)).unwrap();
    }
    let id = |bytes: &[u8]| match Repr::parse(bytes) {
        Ok(Repr::Req(r, _)) => r.msg_id,
        r => panic!("{r:?}"),
    };
    let mut toks = Vec::new();
    for want in 0..4 {
        let (t, p) = sent(a.poll_transmit(1_000));
        assert_eq!(id(&p), want);
        toks.push((t, p));
    }
    assert!(
        a.poll_transmit(1_000).is_none(),
        "message 4 went while message 0 was not taken (window of 4)"
    );
    // 1-3 taken, 0 refused: the window stays at 0..4.
    for (t, _) in &toks[1..] {
        a.handle_send_done(1_000, *t);
    }
    a.handle_rnr(1_000, toks[0].0);
    let due = a.poll_timeout().expect("the backoff's end");
    assert_eq!(due, 11_000);
    a.handle_timeout(due);
    let (t0, again) = sent(a.poll_transmit(due));
    assert_eq!(again, toks[0].1, "the refused packet again");
    assert!(
        a.poll_transmit(due).is_none(),
        "message 4 before message 0 was taken"
    );
    a.handle_send_done(due, t0);
    for want in 4..8 {
        let (_, p) = sent(a.poll_transmit(due));
        assert_eq!(id(&p), want);
    }
    assert!(a.poll_transmit(due).is_none());
}

/// The storm: A sends `n` eager messages to B with up to `in_flight` packets on the
/// network, delivered in random order; B's device refuses (RNR) 10 % of datagrams at
/// random and every one when it holds `device_room` datagrams its engine refused (the
/// receive slots and copies of the provider's endpoint); B's engine keeps at most 4
/// unexpected messages and holds 8 ids ahead for order. B's application posts nothing
/// for the first `quiet` rounds, then keeps 4 receives posted. A's own
/// `recvwin_size` is `a_recvwin`: its sender's window is B's 8, announced in B's
/// handshake, whatever A's setting. Returns the rounds taken, or what was stuck after
/// `max_rounds`.
fn storm(
    seed: u64,
    n: u32,
    in_flight: usize,
    device_room: usize,
    a_recvwin: u32,
) -> Result<u64, String> {
    let mut rng = TestRng::from_env("EFA_FLOW_SEED", seed);
    let a_cfg = Config {
        rnr_backoff_initial_wait_time: 2,
        rnr_backoff_wait_time_cap: 16,
        recvwin_size: a_recvwin,
        secret: 1,
        ..Config::default()
    };
    // B's window: 8 ids (were A to send beyond it, the same storm would leave the two
    // waiting for each other: message 2 refused, the receiver full of later ones).
    let mut b_cfg = Config {
        recvwin_size: 8,
        secret: 2,
        ..Config::default()
    };
    b_cfg.matcher.max_unexpected = 4;
    let (mut a, mut b) = handshaken(a_cfg, b_cfg);
    for i in 1..n {
        a.send(0, send_req(u64::from(i), i)).unwrap();
    }
    let quiet = 2_000u64;
    let max_rounds = 400_000u64;
    let mut flights: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut held: std::collections::VecDeque<Vec<u8>> = Default::default();
    let (mut posted, mut received, mut done) = (0u32, 0u32, 0u32);
    for round in 0..max_rounds {
        let now = 1_000 + round * 1_000;
        for e in [&mut a, &mut b] {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
        }
        while flights.len() < in_flight {
            match a.poll_transmit(now) {
                Some(Transmit::Send { token, bytes, .. }) => flights.push((token, bytes)),
                Some(t) => return Err(format!("unexpected {t:?}")),
                None => break,
            }
        }
        while let Some(t) = b.poll_transmit(now) {
            let (tok, bytes) = sent(Some(t));
            let _ = a.handle_packet(now, B, &bytes);
            b.handle_send_done(now, tok);
        }
        for _ in 0..2 {
            if flights.is_empty() {
                break;
            }
            let (tok, bytes) = flights.swap_remove(rng.below(flights.len() as u64) as usize);
            if held.len() >= device_room || rng.chance(10) {
                a.handle_rnr(now, tok);
            } else {
                if b.handle_packet(now, A, &bytes).is_err() {
                    held.push_back(bytes); // taken by the device: kept
                }
                a.handle_send_done(now, tok);
            }
        }
        for _ in 0..held.len() {
            let Some(p) = held.pop_front() else { break };
            if b.handle_packet(now, A, &p).is_err() {
                held.push_back(p);
            }
        }
        if round >= quiet && posted < n && posted - received < 4 {
            let r = RecvReq {
                ctx: 1_000_000 + u64::from(posted),
                len: 64,
                tag: None,
                src: None,
                flags: OpFlags::empty(),
            };
            b.post_recv(now, r)
                .map_err(|e| format!("post_recv: {e:?}"))?;
            posted += 1;
        }
        while let Some(ev) = b.poll_event() {
            if let Event::Rx(r) = ev {
                r.result.map_err(|e| format!("receive failed: {e:?}"))?;
                let i = u32::from_le_bytes(r.data[..4].try_into().unwrap());
                if i != received {
                    return Err(format!("message {i} received as number {received}"));
                }
                received += 1;
            }
        }
        while let Some(ev) = a.poll_event() {
            if let Event::Tx { result, .. } = ev {
                result.map_err(|e| format!("send failed: {e:?}"))?;
                done += 1;
            }
        }
        if received == n && done == n {
            return Ok(round);
        }
    }
    Err(format!(
        "sender and receiver wait for each other: {received} of {n} received, {done} sent, \
         {} datagrams held by the receiver's device, {} in flight; receiver {:?}",
        held.len(),
        flights.len(),
        b.outstanding()
    ))
}

#[test]
fn a_storm_of_refusals_never_leaves_sender_and_receiver_waiting_for_each_other() {
    // 16 datagrams in flight, room for 16 refused ones at the receiver's device (and
    // 8 ids held for order, 4 unexpected messages in its engine).
    // A's own window is the default (16384) or smaller than B's (2): either way it
    // keeps within the 8 ids B announced.
    for (seed, a_recvwin) in [(1u64, 16384), (2, 2), (3, 16384), (4, 2)] {
        match storm(seed, 3_000, 16, 16, a_recvwin) {
            Ok(rounds) => println!("seed {seed}: all delivered in {rounds} rounds"),
            Err(e) => panic!("seed {seed} (EFA_FLOW_SEED replays it): {e}"),
        }
    }
}

/// A with messages 0 and 1 waiting for B's handshake, B, and B's `HANDSHAKE` as A
/// receives it, with its receive window replaced by `recvwin`.
fn handshake_announcing(recvwin: u32) -> (Engine, Engine, Vec<u8>) {
    let secret = |secret| Config {
        secret,
        ..Config::default()
    };
    let (mut a, b, hs) = hello_answered(secret(1), secret(2));
    a.send(0, send_req(1, 1)).unwrap();
    let Ok(Repr::Handshake(mut h)) = Repr::parse(&hs) else {
        panic!("not a handshake")
    };
    h.recvwin = recvwin;
    (a, b, wire::emit_hs(PktType::Handshake, &h))
}

#[test]
fn a_handshake_announcing_no_room_fails_the_peers_operations_with_eproto() {
    let (mut a, _b, hs) = handshake_announcing(0);
    a.handle_packet(0, B, &hs).unwrap();
    assert_eq!(a.stats().bad_handshake, 1);
    let mut failed = 0;
    while let Some(ev) = a.poll_event() {
        if let Event::Tx { result, .. } = ev {
            assert_eq!(result.unwrap_err(), Errno::EPROTO);
            failed += 1;
        }
    }
    assert_eq!(failed, 2, "both sends waiting for the handshake fail");
    assert!(a.poll_transmit(0).is_none(), "nothing sent to B");
    assert_eq!(
        a.send(0, send_req(2, 2)).unwrap_err(),
        Errno::EHOSTUNREACH,
        "B stays refused until removed"
    );
}

#[test]
fn an_absurd_announced_room_is_clamped() {
    let (mut a, mut b, hs) = handshake_announcing(u32::MAX);
    a.handle_packet(0, B, &hs).unwrap();
    assert_eq!(a.stats().recvwin_clamped, 1);
    // Both messages go (the window is large) and arrive in order.
    for i in 0..2u64 {
        b.post_recv(
            0,
            RecvReq {
                ctx: 100 + i,
                len: 64,
                tag: None,
                src: None,
                flags: OpFlags::empty(),
            },
        )
        .unwrap();
    }
    while let Some(t) = a.poll_transmit(0) {
        let (tok, bytes) = sent(Some(t));
        b.handle_packet(0, A, &bytes).unwrap();
        a.handle_send_done(0, tok);
    }
    let got: Vec<u64> = std::iter::from_fn(|| b.poll_event())
        .filter_map(|e| match e {
            Event::Rx(r) => Some(r.ctx),
            _ => None,
        })
        .collect();
    assert_eq!(got, [100, 101]);
}
