//! Several endpoints and blocking reads (fabtests `multi_ep`, `rdm_multi_domain`,
//! `rdm_multi_client`, `av_xfer`, `msg_epoll` in spirit):
//!
//! - `fi_cq_sread` on a CQ with a wait object: an empty CQ times out with `FI_EAGAIN`
//!   after about the time-out; a completion wakes it (it drives progress itself);
//! - eight endpoints of one domain each send to the next (connectionless);
//! - endpoints of two different domains exchange messages (connectionless);
//! - an address removed from an AV between transfers and inserted again is reachable
//!   through its new number, and the other entries keep working;
//! - one listener accepts three connections in turn and each carries its own
//!   messages (`FI_EP_MSG`).

use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::{Caps, EpType, Errno, WaitObj};

use crate::fixture::{self, pattern, post_recv, send, wait_ok, Fixture};
use crate::pair::{each_pair_spec, each_type, empty_entry, PairSpec};
use crate::{Subject, WAIT};

/// `fi_cq_sread`: `FI_EAGAIN` after ~100 ms on an empty CQ; returns a receive
/// completion once the peer sends.
pub fn cq_sread_times_out_and_wakes(s: &Subject) {
    each_pair_spec(
        s,
        Caps::MSG,
        |spec| spec.cq_wait_obj = WaitObj::Unspec,
        |p| {
            let mut e: [CqTaggedEntry; 1] = [empty_entry()];
            let t0 = Instant::now();
            let err = p.b.cq.sread(&mut e, 100).expect_err("an empty CQ");
            let took = t0.elapsed();
            assert_eq!(err.code(), Errno::EAGAIN, "fi_cq_sread time-out: {err}");
            assert!(
                took >= Duration::from_millis(90) && took < WAIT,
                "fi_cq_sread(100 ms) returned after {took:?}"
            );
            let mut buf = vec![0u8; 32];
            post_recv(&p.b.ep, &mut buf, 0x31).unwrap();
            send(&p.a.ep, b"wake up", p.a.peer, 0x30).unwrap();
            // Side a's send completes when its CQ is read (manual progress drives it).
            let c = p.wait_ok(0, "send completion");
            assert_eq!(c.op_context, 0x30);
            let t0 = Instant::now();
            let n =
                p.b.cq
                    .sread(&mut e, WAIT.as_millis() as i32)
                    .unwrap_or_else(|e| panic!("fi_cq_sread for the receive: {e} ({})", e.code()));
            assert_eq!(n, 1);
            assert!(t0.elapsed() < WAIT);
            assert_eq!((e[0].op_context, e[0].len), (0x31, 7));
            assert_eq!(&buf[..7], b"wake up");
        },
    );
}

/// Eight endpoints of one domain: each sends to the next (and the last to the first),
/// all sends posted before any completion is read.
pub fn many_endpoints_ring(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |i| crate::connectionless(i.ep_type()),
        |_t, info| {
            let n = 8;
            let f = Fixture::with_info(s, info, n);
            let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; 128]).collect();
            for (i, b) in bufs.iter_mut().enumerate() {
                post_recv(&f.peers[i].ep, b, 0x100 + i).unwrap();
            }
            let payloads: Vec<Vec<u8>> = (0..n).map(|i| pattern(100, i as u8)).collect();
            for (i, (peer, pl)) in f.peers.iter().zip(&payloads).enumerate() {
                send(&peer.ep, pl, f.fi_addrs[(i + 1) % n], 0x200 + i)
                    .unwrap_or_else(|e| panic!("fi_send from endpoint {i}: {e}"));
            }
            for (i, (peer, buf)) in f.peers.iter().zip(&bufs).enumerate() {
                // Each endpoint's CQ has its send and its receive, in either order.
                let mut got = [
                    wait_ok(&peer.cq, "completion"),
                    wait_ok(&peer.cq, "completion"),
                ];
                got.sort_by_key(|e| e.op_context);
                assert_eq!(
                    (got[0].op_context, got[0].len),
                    (0x100 + i, 100),
                    "endpoint {i} receive"
                );
                assert_eq!(got[1].op_context, 0x200 + i, "endpoint {i} send");
                // Endpoint i receives from i - 1.
                let from = (i + n - 1) % n;
                assert!(
                    buf[..100] == payloads[from][..],
                    "endpoint {i} got the wrong message"
                );
            }
        },
    );
}

/// Two endpoints in two different domains (of two fabrics) exchange messages both
/// ways.
pub fn endpoints_in_two_domains(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |i| crate::connectionless(i.ep_type()),
        |_t, info| {
            let x = Fixture::with_info(s, info.clone(), 1);
            let y = Fixture::with_info(s, info, 1);
            let (px, py) = (&x.peers[0], &y.peers[0]);
            let to_y = px.av.insert(std::slice::from_ref(&py.addr)).unwrap()[0];
            let to_x = py.av.insert(std::slice::from_ref(&px.addr)).unwrap()[0];
            for (from, to, dest, tag) in [(px, py, to_y, 1u8), (py, px, to_x, 2u8)] {
                let mut buf = vec![0u8; 64];
                let payload = pattern(50, tag);
                post_recv(&to.ep, &mut buf, 0x10).unwrap();
                send(&from.ep, &payload, dest, 0x11).unwrap();
                let deadline = Instant::now() + WAIT;
                // Each domain progresses on its own: drive both.
                let (mut sent, mut got) = (false, false);
                while !(sent && got) {
                    sent |= fixture::poll_one(&from.cq).is_some();
                    if let Some(r) = fixture::poll_one(&to.cq) {
                        assert_eq!((r.op_context, r.len), (0x10, 50));
                        got = true;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "no exchange across domains within {WAIT:?}"
                    );
                    std::thread::yield_now();
                }
                assert!(buf[..50] == payload[..]);
            }
        },
    );
}

/// Remove an address, keep sending to the others, insert it again and send to it.
pub fn av_changes_between_transfers(s: &Subject) {
    each_type(
        s,
        Caps::MSG,
        |i| crate::connectionless(i.ep_type()),
        |_t, info| {
            let f = Fixture::with_info(s, info, 3);
            let (a, b, c) = (&f.peers[0], &f.peers[1], &f.peers[2]);
            let one = |to: &fixture::Peer, dest: u64, ctx: usize| {
                let mut buf = vec![0u8; 16];
                post_recv(&to.ep, &mut buf, ctx + 1).unwrap();
                send(&a.ep, b"hop", dest, ctx).unwrap();
                wait_ok(&a.cq, "send");
                assert_eq!(wait_ok(&to.cq, "receive").op_context, ctx + 1);
                assert_eq!(&buf[..3], b"hop");
            };
            one(b, f.fi_addrs[1], 0x10);
            one(c, f.fi_addrs[2], 0x20);
            // Remove c; b still works; insert c again and reach it through its new
            // address. (Whether the old number is refused afterwards is left open:
            // fi_av(3) makes using a removed address undefined.)
            a.av.remove(&[f.fi_addrs[2]], 0)
                .unwrap_or_else(|e| panic!("fi_av_remove: {e}"));
            one(b, f.fi_addrs[1], 0x30);
            let again =
                a.av.insert(std::slice::from_ref(&c.addr))
                    .unwrap_or_else(|e| panic!("fi_av_insert after a remove: {e}"))[0];
            assert_ne!(again, ofi::ADDR_NOTAVAIL);
            one(c, again, 0x40);
            one(b, f.fi_addrs[1], 0x50);
        },
    );
}

/// One listener accepts three connections (connect data tells them apart); each
/// carries its own messages both ways.
pub fn msg_listener_serves_several_connections(s: &Subject) {
    use ofi::eq::EqAttr;
    use ofi::EqEvent;
    let info = crate::pair::info_for(s, EpType::Msg, Caps::MSG).expect("an FI_EP_MSG result");
    let (fabric, domain) = fixture::open_domain(s, &info);
    let (_pep, eq_s, name) = crate::pair::listen(&fabric, &info);
    let spec = PairSpec::new(EpType::Msg, Caps::MSG);
    let n = 3usize;
    let mut clients = Vec::new();
    let mut eqs_c = Vec::new();
    for i in 0..n {
        let eq = fabric.eq_open(&EqAttr::default()).unwrap();
        let (ep, cq, _c, _av) = crate::pair::open_side(&domain, &info, &spec, 0x100 + i, Some(&eq));
        ep.enable().unwrap();
        ep.connect(&name, &[i as u8; 4])
            .unwrap_or_else(|e| panic!("fi_connect #{i}: {e}"));
        clients.push((ep, cq));
        eqs_c.push(eq);
    }
    let mut eqs: Vec<&ofi::eq::EventQueue> = eqs_c.iter().collect();
    eqs.push(&eq_s);
    let server_eq = n;
    let mut poll = crate::pair::EqPoller::new(n + 1);
    let cqs: Vec<&ofi::cq::CompletionQueue> = clients.iter().map(|c| &c.1).collect();
    let mut servers: Vec<Option<(ofi::ep::Endpoint, ofi::cq::CompletionQueue)>> =
        (0..n).map(|_| None).collect();
    // The listener and the accepted endpoints share `eq_s`, so an accepted endpoint's
    // FI_CONNECTED may come before the next FI_CONNREQ: take them in any order, each
    // FI_CONNECTED for an endpoint already accepted and at most once.
    let mut connected = vec![false; n];
    let mut requests = 0;
    while requests < n || connected.iter().any(|done| !done) {
        let mut all_cqs = cqs.clone();
        all_cqs.extend(servers.iter().flatten().map(|(_, cq)| cq));
        let ev = match poll.next(&eqs, server_eq, &all_cqs) {
            Some(Ok(ev)) => ev,
            Some(Err(ee)) => panic!("listener: error event {} {ee:?}", ee.err),
            None => panic!(
                "listener: {requests} of {n} FI_CONNREQ and {} of {n} FI_CONNECTED within {WAIT:?}",
                connected.iter().filter(|done| **done).count()
            ),
        };
        match ev.event {
            EqEvent::ConnReq => {
                let i = usize::from(ev.cm_data[0]);
                assert!(
                    i < n && ev.cm_data[..4] == [i as u8; 4],
                    "connect data {:?}",
                    ev.cm_data
                );
                assert!(servers[i].is_none(), "two FI_CONNREQ for connection {i}");
                let req_info = ev.info.as_deref().cloned().expect("FI_CONNREQ info");
                let (ep, cq, _c, _av) =
                    crate::pair::open_side(&domain, &req_info, &spec, 0x200 + i, Some(&eq_s));
                ep.accept(&[])
                    .unwrap_or_else(|e| panic!("fi_accept #{i}: {e}"));
                servers[i] = Some((ep, cq));
                requests += 1;
            }
            EqEvent::Connected => {
                let i = ev.fid.wrapping_sub(0x200);
                assert!(
                    i < n && servers[i].is_some(),
                    "server FI_CONNECTED fid {:#x} of no accepted endpoint",
                    ev.fid
                );
                assert!(!connected[i], "two FI_CONNECTED for server endpoint {i}");
                connected[i] = true;
            }
            other => panic!("listener: unexpected {other:?}"),
        }
    }
    let mut all_cqs = cqs.clone();
    all_cqs.extend(servers.iter().map(|x| &x.as_ref().unwrap().1));
    for i in 0..n {
        let ev = poll.expect(&eqs, i, &all_cqs, EqEvent::Connected, "client side");
        assert_eq!(ev.fid, 0x100 + i, "client FI_CONNECTED fid");
    }
    for (i, (cep, ccq)) in clients.iter().enumerate() {
        let (sep, scq) = servers[i].as_ref().unwrap();
        for (from, fcq, to, tcq, seed) in [
            (cep, ccq, sep, scq, i as u8),
            (sep, scq, cep, ccq, 50 + i as u8),
        ] {
            let mut buf = vec![0u8; 80];
            let payload = pattern(64, seed);
            post_recv(to, &mut buf, 0x31).unwrap();
            send(from, &payload, ofi::ADDR_UNSPEC, 0x30).unwrap();
            let deadline = Instant::now() + WAIT;
            let (mut sent, mut got) = (false, false);
            while !(sent && got) {
                if let Some(c) = crate::pair::poll(fcq) {
                    assert_eq!(
                        c.map(|e| e.op_context).ok(),
                        Some(0x30),
                        "connection {i}: send"
                    );
                    sent = true;
                }
                if let Some(c) = crate::pair::poll(tcq) {
                    let r = c.unwrap_or_else(|ee| {
                        panic!("connection {i}: receive error {}", Errno(ee.err))
                    });
                    assert_eq!((r.op_context, r.len), (0x31, 64), "connection {i}");
                    got = true;
                }
                assert!(
                    Instant::now() < deadline,
                    "connection {i}: no exchange within {WAIT:?}"
                );
                std::thread::yield_now();
            }
            assert!(
                buf[..64] == payload[..],
                "connection {i}: wrong bytes (crossed connections?)"
            );
        }
    }
}
