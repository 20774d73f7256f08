//! Each message path between two engines on the simulated SRD network: eager, medium,
//! long by clear-to-send, long by read; expected and unexpected; tagged and untagged;
//! FI_SOURCE, remote CQ data, multi-receive, delivery complete, truncation; RNR.

mod common;

use common::{body, check_body, settle, sim, small_cfg, srd, Node};
use ofi_core::error::Errno;
use ofi_core::flags::OpFlags;
use ofi_prov_efa::proto::{Event, Outstanding, RecvReq, RxDone, SendReq};
use ofi_testkit::simnet::{Nanos, Sim};

/// How long each step may run (virtual): far longer than any transfer here.
const END: Nanos = 500_000_000;

fn send(peer: u64, ctx: u64, data: Vec<u8>) -> SendReq {
    SendReq {
        ctx,
        peer,
        data,
        tag: None,
        cq_data: None,
        delivery_complete: false,
    }
}

fn recv(ctx: u64, len: usize) -> RecvReq {
    RecvReq {
        ctx,
        len,
        tag: None,
        src: None,
        flags: OpFlags::empty(),
    }
}

/// Node `n` of `s` posts the receive `req` at the simulation's current time.
fn post_recv(s: &mut Sim<Node>, n: usize, req: RecvReq) {
    let now = s.now;
    s.nodes[n].eng.post_recv(now, req).unwrap();
}

/// Node `n` of `s` starts the send `req` at the simulation's current time.
fn post_send(s: &mut Sim<Node>, n: usize, req: SendReq) {
    let now = s.now;
    s.nodes[n].eng.send(now, req).unwrap();
}

fn rx_events(ev: &[(Nanos, Event)]) -> Vec<RxDone> {
    ev.iter()
        .filter_map(|(_, e)| match e {
            Event::Rx(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn tx_results(ev: &[(Nanos, Event)]) -> Vec<(u64, Result<(), Errno>)> {
    ev.iter()
        .filter_map(|(_, e)| match e {
            Event::Tx { ctx, result, .. } => Some((*ctx, *result)),
            _ => None,
        })
        .collect()
}

/// One message of `len` bytes from 0 to 1, receive posted before (`expected`) or
/// after; checks the bytes, the source, and that both engines end empty.
fn one(len: usize, expected: bool, jitter: Nanos, seed: u64) {
    let mut s = sim(2, |i| small_cfg(i as u64 + 10), 0, srd(jitter), seed);
    if expected {
        post_recv(&mut s, 1, recv(7, 20_000));
    }
    post_send(&mut s, 0, send(1, 3, body(0, 0, len)));
    settle(&mut s, END);
    if !expected {
        post_recv(&mut s, 1, recv(7, 20_000));
        settle(&mut s, END);
    }
    let rx = rx_events(&s.nodes[1].events);
    assert_eq!(rx.len(), 1, "len {len}: {:?}", s.nodes[1].eng.stats(),);
    assert_eq!(rx[0].result, Ok(()));
    assert_eq!(rx[0].src, 0, "FI_SOURCE");
    assert_eq!(rx[0].ctx, 7);
    assert_eq!(check_body(&rx[0].data), (0, 0));
    assert_eq!(tx_results(&s.nodes[0].events), vec![(3, Ok(()))]);
    for n in &s.nodes {
        assert_eq!(n.eng.outstanding(), Outstanding::default());
    }
}

#[test]
fn every_path_expected_and_unexpected_under_reordering() {
    // eager, medium (2 and 9 packets), long by CTS (several grants), long by read
    for (i, len) in [12, 192, 193, 2048, 2049, 5000, 8191, 8192, 20_000]
        .into_iter()
        .enumerate()
    {
        for expected in [true, false] {
            one(len, expected, 30_000, 100 + i as u64);
        }
    }
}

#[test]
fn long_message_without_read_goes_by_cts() {
    let mut s = sim(
        2,
        |i| {
            let mut c = small_cfg(i as u64);
            c.rdma_read = i == 1; // the sender cannot read: never long-read
            c
        },
        0,
        srd(10_000),
        5,
    );
    post_recv(&mut s, 1, recv(1, 50_000));
    post_send(&mut s, 0, send(1, 1, body(0, 0, 40_000)));
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    assert_eq!(check_body(&rx[0].data), (0, 0));
    // No read was served: the receiver's device reads nothing from the sender.
    assert_eq!(s.nodes[0].rnr_sent, 0);
}

#[test]
fn tagged_matching_cq_data_and_truncation() {
    let mut s = sim(2, small_cfg_i, 0, srd(5_000), 8);
    let e = &mut s.nodes[1].eng;
    e.post_recv(
        0,
        RecvReq {
            tag: Some((0x50, 0x0f)),
            ..recv(1, 100)
        },
    )
    .unwrap();
    e.post_recv(0, recv(2, 100)).unwrap();
    e.post_recv(
        0,
        RecvReq {
            tag: Some((0x99, 0)),
            ..recv(3, 20)
        },
    )
    .unwrap();
    let n0 = &mut s.nodes[0].eng;
    n0.send(
        0,
        SendReq {
            tag: Some(0x5a),
            cq_data: Some(77),
            ..send(1, 10, body(0, 0, 40))
        },
    )
    .unwrap();
    n0.send(0, send(1, 11, body(0, 1, 50))).unwrap();
    n0.send(
        0,
        SendReq {
            tag: Some(0x99),
            ..send(1, 12, body(0, 2, 300))
        },
    )
    .unwrap();
    settle(&mut s, END);
    let mut rx = rx_events(&s.nodes[1].events);
    rx.sort_by_key(|r| r.ctx);
    assert_eq!(
        (rx[0].ctx, rx[0].tagged, rx[0].tag, rx[0].cq_data),
        (1, true, 0x5a, Some(77))
    );
    assert_eq!(check_body(&rx[0].data), (0, 0));
    assert_eq!((rx[1].ctx, rx[1].tagged, rx[1].cq_data), (2, false, None));
    assert_eq!(check_body(&rx[1].data), (0, 1));
    assert_eq!(rx[2].result, Err(Errno::ETRUNC));
    assert_eq!((rx[2].msg_len, rx[2].data.len()), (300, 20));
    assert_eq!(&rx[2].data[..], &body(0, 2, 300)[..20]);
    for n in &s.nodes {
        assert_eq!(n.eng.outstanding(), Outstanding::default());
    }
}

fn small_cfg_i(i: usize) -> ofi_prov_efa::proto::Config {
    small_cfg(i as u64 + 1)
}

#[test]
fn multi_recv_packs_messages_and_releases_the_buffer() {
    let mut s = sim(2, small_cfg_i, 0, srd(0), 9);
    post_recv(
        &mut s,
        1,
        RecvReq {
            flags: OpFlags::MULTI_RECV,
            ..recv(5, 200)
        },
    );
    for i in 0..4 {
        post_send(&mut s, 0, send(1, i, body(0, i as u32, 60)));
    }
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    assert_eq!(rx.len(), 3);
    let offs: Vec<usize> = rx.iter().map(|r| r.offset).collect();
    assert_eq!(offs, vec![0, 60, 120]);
    // 200 - 180 = 20 left, under the default minimum of 64: released with the third.
    let released: Vec<bool> = rx.iter().map(|r| r.multi_recv_released).collect();
    assert_eq!(released, vec![false, false, true]);
    assert!(rx.iter().all(|r| r.ctx == 5 && r.result.is_ok()));
    let seqs: Vec<u32> = rx.iter().map(|r| check_body(&r.data).1).collect();
    assert_eq!(seqs, vec![0, 1, 2]);
    assert_eq!(
        s.nodes[1].eng.outstanding().unexpected,
        1,
        "the fourth waits"
    );
}

#[test]
fn delivery_complete_waits_for_the_receipt() {
    let mut s = sim(2, small_cfg_i, 0, srd(1_000), 10);
    for (i, len) in [20usize, 1000, 5000].into_iter().enumerate() {
        post_send(
            &mut s,
            0,
            SendReq {
                delivery_complete: true,
                ..send(1, i as u64, body(0, i as u32, len))
            },
        );
    }
    settle(&mut s, END);
    // Nothing posted: the sends cannot complete (the data is not placed).
    assert!(
        tx_results(&s.nodes[0].events).is_empty(),
        "{:?}",
        s.nodes[0].events
    );
    for i in 0..3 {
        post_recv(&mut s, 1, recv(i, 10_000));
    }
    settle(&mut s, END);
    let mut tx = tx_results(&s.nodes[0].events);
    tx.sort_unstable_by_key(|t| t.0);
    assert_eq!(tx, vec![(0, Ok(())), (1, Ok(())), (2, Ok(()))]);
}

#[test]
fn rnr_backs_off_and_resends_until_delivered() {
    let mut s = sim(2, small_cfg_i, 40, srd(2_000), 11);
    post_recv(&mut s, 1, recv(1, 10_000));
    post_send(&mut s, 0, send(1, 1, body(0, 0, 3000)));
    settle(&mut s, END);
    assert!(s.nodes[1].rnr_sent > 0, "some RNR was injected");
    assert!(s.nodes[0].eng.stats().rnr > 0);
    let rx = rx_events(&s.nodes[1].events);
    assert_eq!(rx.len(), 1);
    assert_eq!(check_body(&rx[0].data), (0, 0));
}

#[test]
fn a_full_unexpected_queue_refuses_with_rnr_until_receives_are_posted() {
    let mut s = sim(
        2,
        |i| {
            let mut c = small_cfg(i as u64);
            c.matcher.max_unexpected = 2;
            c
        },
        0,
        srd(0),
        12,
    );
    for i in 0..6 {
        post_send(&mut s, 0, send(1, i, body(0, i as u32, 20)));
    }
    s.run_to(2_000_000);
    assert!(s.nodes[1].eng.stats().not_ready > 0);
    assert_eq!(s.nodes[1].eng.outstanding().unexpected, 2);
    for i in 0..6 {
        post_recv(&mut s, 1, recv(i, 100));
    }
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    let seqs: Vec<u32> = rx.iter().map(|r| check_body(&r.data).1).collect();
    assert_eq!(seqs, vec![0, 1, 2, 3, 4, 5], "in order, each once");
    assert_eq!(tx_results(&s.nodes[0].events).len(), 6);
}

#[test]
fn send_errors() {
    let mut s = sim(2, small_cfg_i, 0, srd(0), 13);
    let too_big = s.nodes[0].eng.config().max_msg_size + 1;
    assert_eq!(
        s.nodes[0].eng.send(0, send(1, 1, vec![0; too_big])),
        Err(Errno::EMSGSIZE)
    );
    // A lost peer refuses new operations until it is removed.
    s.kill(1);
    post_send(&mut s, 0, send(1, 2, body(0, 0, 20)));
    settle(&mut s, END);
    assert_eq!(tx_results(&s.nodes[0].events), vec![(2, Err(Errno::EIO))]);
    assert!(s.nodes[0].eng.is_lost(1));
    assert_eq!(
        s.nodes[0].eng.send(s.now, send(1, 3, body(0, 1, 20))),
        Err(Errno::EHOSTUNREACH)
    );
    s.nodes[0].eng.remove_peer(s.now, 1);
    assert!(!s.nodes[0].eng.is_lost(1));
    assert_eq!(s.nodes[0].eng.outstanding(), Outstanding::default());
}

#[test]
fn directed_receives_take_only_their_source() {
    let mut s = sim(
        3,
        |i| {
            let mut c = small_cfg(i as u64 + 70);
            c.matcher.directed_recv = true;
            c
        },
        0,
        srd(1_000),
        14,
    );
    post_recv(
        &mut s,
        2,
        RecvReq {
            src: Some(1),
            ..recv(1, 100)
        },
    );
    post_recv(
        &mut s,
        2,
        RecvReq {
            src: Some(0),
            ..recv(0, 100)
        },
    );
    post_send(&mut s, 0, send(2, 1, body(0, 0, 30)));
    post_send(&mut s, 1, send(2, 1, body(1, 0, 30)));
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[2].events);
    assert_eq!(rx.len(), 2);
    for r in rx {
        assert_eq!(
            r.ctx, r.src,
            "receive {} took a message from {}",
            r.ctx, r.src
        );
        assert_eq!(check_body(&r.data).0 as u64, r.src);
    }
}

fn peek(ctx: u64, tag: u64, flags: OpFlags) -> RecvReq {
    RecvReq {
        tag: Some((tag, 0)),
        flags,
        ..recv(ctx, 0)
    }
}

#[test]
fn peek_claim_and_discard() {
    let mut s = sim(2, small_cfg_i, 0, srd(1_000), 15);
    post_recv(&mut s, 1, peek(0x40, 0x99, OpFlags::PEEK));
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    assert_eq!((rx[0].ctx, rx[0].result), (0x40, Err(Errno::ENOMSG)));
    // A message arrives; a peek reports it and leaves it.
    let tsend = |peer, ctx, tag, data| SendReq {
        tag: Some(tag),
        ..send(peer, ctx, data)
    };
    post_send(&mut s, 0, tsend(1, 1, 0x99, body(0, 0, 100)));
    settle(&mut s, END);
    post_recv(&mut s, 1, peek(0x42, 0x99, OpFlags::PEEK));
    post_recv(&mut s, 1, peek(0x43, 0x99, OpFlags::PEEK | OpFlags::CLAIM));
    post_recv(&mut s, 1, peek(0x44, 0x99, OpFlags::PEEK));
    // The claimed message, received by its claiming context.
    post_recv(
        &mut s,
        1,
        RecvReq {
            flags: OpFlags::CLAIM,
            ..recv(0x43, 128)
        },
    );
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    let got: Vec<(u64, Result<(), Errno>, usize, u64)> = rx
        .iter()
        .map(|r| (r.ctx, r.result, r.msg_len, r.tag))
        .collect();
    assert_eq!(
        got[1..],
        [
            (0x42, Ok(()), 100, 0x99),
            (0x43, Ok(()), 100, 0x99),
            (0x44, Err(Errno::ENOMSG), 0, 0),
            (0x43, Ok(()), 100, 0x99),
        ]
    );
    assert_eq!(check_body(&rx[4].data), (0, 0));
    // Discard: a long message by CTS and one by read — the senders complete, the
    // receiver gets the discard's completion only, and a later peek misses.
    post_send(&mut s, 0, tsend(1, 2, 0x55, body(0, 1, 5000)));
    post_send(&mut s, 0, tsend(1, 3, 0x55, body(0, 2, 9000)));
    settle(&mut s, END);
    for ctx in [0x47, 0x48] {
        post_recv(&mut s, 1, peek(ctx, 0x55, OpFlags::PEEK | OpFlags::DISCARD));
    }
    settle(&mut s, END);
    post_recv(&mut s, 1, peek(0x49, 0x55, OpFlags::PEEK));
    settle(&mut s, END);
    let rx = rx_events(&s.nodes[1].events);
    let got: Vec<(u64, Result<(), Errno>, usize)> = rx[5..]
        .iter()
        .map(|r| (r.ctx, r.result, r.msg_len))
        .collect();
    assert_eq!(
        got,
        [
            (0x47, Ok(()), 5000),
            (0x48, Ok(()), 9000),
            (0x49, Err(Errno::ENOMSG), 0)
        ]
    );
    let mut tx = tx_results(&s.nodes[0].events);
    tx.sort_unstable_by_key(|t| t.0);
    assert_eq!(tx, vec![(1, Ok(())), (2, Ok(())), (3, Ok(()))]);
    for n in &s.nodes {
        assert_eq!(n.eng.outstanding(), Outstanding::default());
    }
    // Combinations the matcher refuses.
    let e = &mut s.nodes[1].eng;
    assert_eq!(
        e.post_recv(s.now, peek(1, 0, OpFlags::DISCARD)),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        e.post_recv(s.now, peek(1, 0, OpFlags::PEEK | OpFlags::MULTI_RECV)),
        Err(Errno::EBADFLAGS)
    );
}

/// Every packet `from` has to send, delivered to `to` (which takes each) and completed.
fn pass(
    from: &mut ofi_prov_efa::proto::Engine,
    from_addr: u64,
    to: &mut ofi_prov_efa::proto::Engine,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(0) {
        let ofi_prov_efa::proto::Transmit::Send { token, bytes, .. } = t else {
            panic!("a read: {t:?}");
        };
        to.handle_packet(0, from_addr, &bytes).expect("taken");
        from.handle_send_done(0, token);
        out.push(bytes);
    }
    out
}

fn cts_offset(bytes: &[u8]) -> Option<u64> {
    match ofi_prov_efa::proto::wire::Repr::parse(bytes) {
        Ok(ofi_prov_efa::proto::wire::Repr::Ctrl(c, _))
            if c.ty == ofi_prov_efa::proto::wire::PktType::Cts =>
        {
            Some(c.offset)
        }
        _ => None,
    }
}

#[test]
fn the_next_grant_goes_when_half_the_window_arrived() {
    use ofi_prov_efa::proto::wire::{PktType, Repr};
    use ofi_prov_efa::proto::Engine;
    let (a_addr, b_addr) = (1u64, 2u64);
    let cfg = |secret| ofi_prov_efa::proto::Config {
        rdma_read: false,
        ..small_cfg(secret)
    };
    let (mut a, mut b) = (Engine::new(cfg(1)), Engine::new(cfg(2)));
    b.post_recv(0, recv(7, 6000)).unwrap();
    a.send(0, send(b_addr, 5, vec![3; 6000])).unwrap();
    pass(&mut a, a_addr, &mut b); // HELLO
    pass(&mut b, b_addr, &mut a); // HANDSHAKE
    pass(&mut a, a_addr, &mut b); // the request with the first piece
    let grants = pass(&mut b, b_addr, &mut a);
    assert_eq!(grants.len(), 1, "one grant of 4 packets");
    let first_end = cts_offset(&grants[0]).expect("a CTS");
    // A answers with 4 CTSDATA; B gets them one by one.
    let mut data = Vec::new();
    while let Some(t) = a.poll_transmit(0) {
        let ofi_prov_efa::proto::Transmit::Send { token, bytes, .. } = t else {
            panic!("a read");
        };
        a.handle_send_done(0, token);
        data.push(bytes);
    }
    assert_eq!(data.len(), 4);
    assert!(data
        .iter()
        .all(|d| matches!(Repr::parse(d), Ok(Repr::Ctrl(c, _)) if c.ty == PktType::CtsData)));
    b.handle_packet(0, a_addr, &data[0]).unwrap();
    assert!(b.poll_transmit(0).is_none(), "no grant after 1 of 4");
    b.handle_packet(0, a_addr, &data[1]).unwrap();
    let next = pass(&mut b, b_addr, &mut a);
    assert_eq!(next.len(), 1, "the next grant after 2 of 4 packets");
    assert!(cts_offset(&next[0]).is_some_and(|o| o > first_end));
    // The rest flows to completion.
    for d in &data[2..] {
        b.handle_packet(0, a_addr, d).unwrap();
    }
    for _ in 0..20 {
        pass(&mut a, a_addr, &mut b);
        pass(&mut b, b_addr, &mut a);
    }
    let done: Vec<_> = std::iter::from_fn(|| b.poll_event()).collect();
    assert!(done.iter().any(
        |e| matches!(e, Event::Rx(r) if r.ctx == 7 && r.result.is_ok() && r.data == vec![3; 6000])
    ));
}
