//! The safe layer against real providers, in one process (an endpoint talking to a
//! second endpoint of the same domain): ownership round trips, typed completions,
//! RMA with remote CQ data, atomics, error completions and teardown with operations
//! in flight. Runs on shm and on `tcp;ofi_rxm` (each test skips a provider that is
//! not built in, saying so).

use std::time::Duration;

use ofi::safe::{
    Buf, Domain, Ep, EpAddr, Fabric, FabricInfo, Hints, OpKind, Peer, Rdm, RemoteRegion,
    RemoteWrite,
};
use ofi::{Caps, Errno, OpFlags};

const T: Duration = Duration::from_secs(10);
const PROVIDERS: &[&str] = &["shm", "tcp;ofi_rxm"];

struct Pair {
    _fabric: Fabric,
    domain: Domain,
    a: Ep<Rdm>,
    b: Ep<Rdm>,
    a_to_b: Peer,
    b_to_a: Peer,
    /// Completions one endpoint gave while a test waited on the other, in order.
    early_a: std::collections::VecDeque<ofi::safe::Completion>,
    early_b: std::collections::VecDeque<ofi::safe::Completion>,
}

fn info(prov: &str, caps: Caps) -> Option<FabricInfo<Rdm>> {
    first_or_skip(Hints::<Rdm>::new().provider(prov).caps(caps), prov)
}

/// The first result for `hints`, or `None` (the test is skipped, saying it lacks `what`).
fn first_or_skip<K: ofi::safe::EpKind>(hints: Hints<K>, what: &str) -> Option<FabricInfo<K>> {
    match hints.first() {
        Ok(i) => Some(i),
        Err(e) => {
            eprintln!("skipping: no {what}: {e}");
            None
        }
    }
}

fn pair(prov: &str, caps: Caps) -> Option<Pair> {
    let info = info(prov, caps)?;
    let fabric = Fabric::open(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let mut a = domain.endpoint(&info).cq_size(64).build().unwrap();
    let mut b = domain.endpoint(&info).cq_size(64).build().unwrap();
    let a_to_b = a.insert_peer(b.addr()).unwrap();
    let b_to_a = b.insert_peer(a.addr()).unwrap();
    Some(Pair {
        _fabric: fabric,
        domain,
        a,
        b,
        a_to_b,
        b_to_a,
        early_a: Default::default(),
        early_b: Default::default(),
    })
}

/// The next completion of endpoint b (`on_b`) or a, driving both: the other
/// endpoint's may come first (completions of two endpoints have no order between
/// them), and are kept for a later call.
fn wait_on(p: &mut Pair, on_b: bool) -> ofi::safe::Completion {
    let deadline = std::time::Instant::now() + T;
    loop {
        let (me, other, mine, others) = if on_b {
            (&mut p.b, &mut p.a, &mut p.early_b, &mut p.early_a)
        } else {
            (&mut p.a, &mut p.b, &mut p.early_a, &mut p.early_b)
        };
        if let Some(c) = mine.pop_front() {
            return c;
        }
        if let Some(c) = me.poll().unwrap() {
            return c;
        }
        // The other side may need progress for the transfer to move (manual progress).
        if let Some(c) = other.poll().unwrap() {
            others.push_back(c);
        }
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::yield_now();
    }
}

#[test]
fn send_recv_gives_buffers_back_with_lengths() {
    for prov in PROVIDERS {
        let Some(mut p) = pair(prov, Caps::MSG) else {
            continue;
        };
        let r = p.b.recv(p.domain.alloc(128).unwrap()).unwrap();
        let mut m = p.domain.alloc(128).unwrap();
        assert!(m.fill_from(b"hello, safe layer"));
        let s = p.a.send(m, p.a_to_b).unwrap();
        assert_eq!((p.a.in_flight(), p.b.in_flight()), (1, 1));
        let c = wait_on(&mut p, true);
        assert_eq!((c.id, c.kind, c.len), (r, OpKind::Recv, 17), "{prov}");
        assert!(c.flags.contains(OpFlags::RECV));
        let got = c.buf.unwrap();
        assert_eq!(&got[..], b"hello, safe layer");
        assert_eq!(got.capacity(), 128);
        let c = wait_on(&mut p, false);
        assert_eq!((c.id, c.kind), (s, OpKind::Send));
        assert_eq!(&c.buf.unwrap()[..], b"hello, safe layer");
        assert_eq!((p.a.in_flight(), p.b.in_flight()), (0, 0));
    }
}

#[test]
fn tagged_receives_match_tags_and_report_them() {
    for prov in PROVIDERS {
        let Some(mut p) = pair(prov, Caps::MSG | Caps::TAGGED) else {
            continue;
        };
        let r7 = p.b.trecv(Buf::new(16), 7, 0).unwrap();
        let r9 = p.b.trecv(Buf::new(16), 9, 0).unwrap();
        p.a.tsend(Buf::from(b"nine".to_vec()), p.a_to_b, 9).unwrap();
        let c = wait_on(&mut p, true);
        assert_eq!((c.id, c.tag(), c.len), (r9, Some(9), 4), "{prov}");
        assert_eq!(&c.buf.unwrap()[..], b"nine");
        p.a.tsend(Buf::from(b"seven".to_vec()), p.a_to_b, 7)
            .unwrap();
        let c = wait_on(&mut p, true);
        assert_eq!((c.id, c.tag()), (r7, Some(7)));
        assert_eq!(&c.buf.unwrap()[..], b"seven");
        // The two send completions.
        for _ in 0..2 {
            assert_eq!(wait_on(&mut p, false).kind, OpKind::TaggedSend);
        }
    }
}

#[test]
fn rma_write_with_data_read_and_fetch_add() {
    for prov in PROVIDERS {
        let caps = Caps::MSG | Caps::RMA | Caps::ATOMIC | Caps::REMOTE_CQ_DATA;
        let Some(mut p) = pair(prov, caps) else {
            continue;
        };
        let region = p.domain.register_remote_writable(vec![0u8; 64]).unwrap();
        // The descriptor travels as bytes, like it would between processes.
        let wire = serde_json::to_string(&region.remote()).unwrap();
        let remote: RemoteRegion<RemoteWrite> = serde_json::from_str(&wire).unwrap();
        assert_eq!(remote, region.remote());

        // A receive for the CQ data, in case the provider consumes one.
        p.b.recv(Buf::new(8)).unwrap();
        p.a.write_data(
            Buf::from(b"written!".to_vec()),
            p.a_to_b,
            &remote,
            8,
            0xfeed,
        )
        .unwrap();
        let c = wait_on(&mut p, true);
        assert_eq!(c.data(), Some(0xfeed), "{prov}: {c:?}");
        assert!(c.flags.contains(OpFlags::REMOTE_CQ_DATA));
        assert_eq!(wait_on(&mut p, false).kind, OpKind::Write);
        assert_eq!(&region.snapshot()[8..16], b"written!");

        // Read it back through the read-only view.
        let id =
            p.a.read(Buf::new(8), p.a_to_b, &remote.read_only(), 8)
                .unwrap();
        let c = wait_on(&mut p, false);
        assert_eq!((c.id, c.kind), (id, OpKind::Read));
        assert_eq!(&c.buf.unwrap()[..], b"written!");

        // Fetch-add twice on word 0.
        for (add, before) in [(5u64, 0u64), (7, 5)] {
            p.a.fetch_add(p.a_to_b, &remote, 0, add).unwrap();
            let c = wait_on(&mut p, false);
            assert_eq!(
                (c.kind, c.fetched()),
                (OpKind::FetchAtomic, Some(before)),
                "{prov}"
            );
        }
        assert_eq!(
            u64::from_ne_bytes(region.snapshot()[..8].try_into().unwrap()),
            12
        );

        // Out-of-range offsets are refused before posting, and the buffer comes back.
        let e = p.a.write(Buf::new(8), p.a_to_b, &remote, 60).unwrap_err();
        assert_eq!(e.error.code(), Errno::EINVAL);
        assert_eq!(e.buf.map(|b| b.len()), Some(8));
        let e = p.a.fetch_add(p.a_to_b, &remote, 64, 1).unwrap_err();
        assert_eq!(e.error.code(), Errno::EINVAL);
        assert_eq!(p.a.in_flight(), 0);
    }
}

#[test]
fn a_truncated_receive_is_an_error_completion_with_its_buffer() {
    for prov in PROVIDERS {
        let Some(mut p) = pair(prov, Caps::MSG) else {
            continue;
        };
        let r = p.b.recv(Buf::new(4)).unwrap();
        p.a.send(Buf::from(vec![9u8; 32]), p.a_to_b).unwrap();
        let deadline = std::time::Instant::now() + T;
        let err = loop {
            match p.b.poll() {
                Ok(Some(c)) => panic!("{prov}: truncation completed normally: {c:?}"),
                Ok(None) => {}
                Err(e) => break e,
            }
            let _ = p.a.poll();
            assert!(std::time::Instant::now() < deadline, "timed out");
            std::thread::yield_now();
        };
        assert_eq!(err.error.code(), Errno::ETRUNC, "{prov}: {err}");
        assert_eq!(err.id, Some(r));
        assert_eq!(err.buf.map(|b| b.capacity()), Some(4));
    }
}

#[test]
fn dropping_an_endpoint_with_operations_in_flight_is_clean() {
    for prov in PROVIDERS {
        let Some(mut p) = pair(prov, Caps::MSG) else {
            continue;
        };
        for _ in 0..8 {
            p.b.recv(Buf::new(256)).unwrap();
        }
        assert_eq!(p.b.in_flight(), 8);
        // Closing cancels the receives before their buffers are freed (run under
        // Miri/ASan this would flag a use after free otherwise).
        drop(p.b);
        let _ = p.b_to_a;
        // The survivor still works: send to itself.
        let me = p.a.insert_peer(&p.a.addr().clone()).unwrap();
        p.a.recv(Buf::new(8)).unwrap();
        p.a.send(Buf::from(b"self".to_vec()), me).unwrap();
        let mut kinds = Vec::new();
        for _ in 0..2 {
            kinds.push(p.a.wait(T).unwrap().kind);
        }
        kinds.sort_by_key(|k| *k as u8);
        assert_eq!(kinds, [OpKind::Send, OpKind::Recv]);
    }
}

#[test]
fn addresses_survive_serde_and_text() {
    for prov in PROVIDERS {
        let Some(p) = pair(prov, Caps::MSG) else {
            continue;
        };
        let a = p.a.addr().clone();
        let json = serde_json::to_string(&a).unwrap();
        let back: EpAddr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        let text: EpAddr = a.to_string().parse().unwrap();
        assert_eq!(text, a);
        assert!(back.to_address().is_ok(), "{prov}");
    }
    for bad in ["", "3", "x:00", "3:0", "3:zz", "3:é0"] {
        assert_eq!(
            bad.parse::<EpAddr>().unwrap_err().code(),
            Errno::EINVAL,
            "{bad:?}"
        );
    }
}

#[test]
fn hints_pick_the_kind_and_fi_provider_order() {
    let infos = Hints::<Rdm>::new().getinfo().unwrap();
    assert!(!infos.is_empty());
    for i in &infos {
        assert_eq!(i.info().ep_type(), ofi::EpType::Rdm);
    }
    // A result of another kind is refused by the typed wrapper.
    let dgram = ofi::safe::Hints::<ofi::safe::Dgram>::new().first().unwrap();
    let e = FabricInfo::<Rdm>::new(dgram.info().clone()).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    // An unknown provider has no match.
    let e = Hints::<Rdm>::new()
        .provider("no-such-provider")
        .first()
        .unwrap_err();
    assert_eq!(e.code(), Errno::ENODATA);
}

#[test]
fn wait_fds_are_exposed_when_asked_for() {
    use ofi::cntr::CntrAttr;
    use ofi::eq::EqAttr;
    use ofi::WaitObj;
    for prov in PROVIDERS {
        let Some(info) = info(prov, Caps::MSG) else {
            continue;
        };
        let fabric = Fabric::open(&info).unwrap();
        let domain = fabric.domain(&info).unwrap();
        let ep = domain.endpoint(&info).wait_fd(true).build().unwrap();
        assert!(ep.cq_wait_fd().unwrap() >= 0, "{prov}");
        // Nothing is pending: sleeping on the fd is allowed.
        ep.trywait().unwrap();
        let plain = domain.endpoint(&info).build().unwrap();
        assert!(
            plain.cq_wait_fd().is_err(),
            "{prov}: a polling-only CQ has no fd"
        );
        let c = domain
            .counter(&CntrAttr {
                wait_obj: WaitObj::Fd,
                ..CntrAttr::default()
            })
            .unwrap();
        assert!(c.wait_fd().unwrap() >= 0);
        let eq = fabric
            .raw()
            .eq_open(&EqAttr {
                wait_obj: WaitObj::Fd,
                ..EqAttr::default()
            })
            .unwrap();
        assert!(eq.wait_fd().unwrap() >= 0);
    }
}

mod aio {
    use super::*;
    use ofi::safe::aio::AsyncEp;

    fn ep(prov: &str, wait_fd: bool) -> Option<(Domain, Ep<Rdm>)> {
        let info = info(prov, Caps::MSG)?;
        let fabric = Fabric::open(&info).unwrap();
        let domain = fabric.domain(&info).unwrap();
        let ep = domain.endpoint(&info).wait_fd(wait_fd).build().unwrap();
        Some((domain, ep))
    }

    #[test]
    fn async_ep_needs_a_runtime_and_a_wait_fd() {
        let Some((_d, e)) = ep("shm", true) else {
            return;
        };
        assert_eq!(AsyncEp::new(e).unwrap_err().code(), Errno::EOTHER);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let Some((_d, e)) = ep("shm", false) else {
                return;
            };
            assert!(AsyncEp::new(e).is_err());
        });
    }

    #[test]
    fn completions_arrive_as_futures_and_idle_waits_stay_pending() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for prov in PROVIDERS {
            rt.block_on(async {
                let Some((domain, e)) = ep(prov, true) else {
                    return;
                };
                let mut a = AsyncEp::new(e).unwrap();
                // Nothing posted: the future must not complete.
                let idle = tokio::time::timeout(Duration::from_millis(30), a.next()).await;
                assert!(idle.is_err(), "{prov}: a completion out of nowhere");
                let own = a.get_ref().addr().clone();
                let me = a.get_mut().insert_peer(&own).unwrap();
                a.get_mut().recv(domain.alloc(32).unwrap()).unwrap();
                a.get_mut().send(Buf::from(b"async".to_vec()), me).unwrap();
                let mut got = Vec::new();
                for _ in 0..2 {
                    let c = tokio::time::timeout(T, a.next()).await.unwrap().unwrap();
                    got.push((c.kind, c.buf.map(|b| b.into_vec())));
                }
                got.sort_by_key(|(k, _)| *k as u8);
                assert_eq!(
                    got,
                    [
                        (OpKind::Send, Some(b"async".to_vec())),
                        (OpKind::Recv, Some(b"async".to_vec()))
                    ],
                    "{prov}"
                );
                // The same through the Stream trait.
                a.get_mut().recv(domain.alloc(32).unwrap()).unwrap();
                a.get_mut().send(Buf::from(b"stream".to_vec()), me).unwrap();
                let mut kinds = Vec::new();
                for _ in 0..2 {
                    let item = tokio::time::timeout(
                        T,
                        std::future::poll_fn(|cx| {
                            futures_core::Stream::poll_next(std::pin::Pin::new(&mut a), cx)
                        }),
                    )
                    .await
                    .unwrap();
                    let c = item.expect("the stream never ends").unwrap();
                    assert_eq!(c.buf.map(|b| b.into_vec()), Some(b"stream".to_vec()));
                    kinds.push(c.kind as u8);
                }
                kinds.sort();
                let mut want = vec![OpKind::Send as u8, OpKind::Recv as u8];
                want.sort();
                assert_eq!(kinds, want, "{prov}");
                let back = a.into_inner();
                assert_eq!(back.in_flight(), 0);
            });
        }
    }
}

#[test]
fn handles_are_send() {
    fn send<T: Send>() {}
    send::<Ep<Rdm>>();
    send::<Ep<ofi::safe::Msg>>();
    send::<ofi::safe::aio::AsyncEp<Rdm>>();
    fn stream<T: futures_core::Stream + Unpin>() {}
    stream::<ofi::safe::aio::AsyncEp<Rdm>>();
    send::<Buf>();
    send::<ofi::safe::Completion>();
    send::<ofi::safe::SharedRegion<RemoteWrite>>();
    send::<Domain>();
}

#[test]
fn msg_connect_with_data_accept_and_reject() {
    use ofi::safe::{Listener, Msg};
    let hints = Hints::<Msg>::new()
        .node_service(Some("127.0.0.1"), Some("0"))
        .source();
    let Some(info) = first_or_skip(hints, "MSG provider") else {
        return;
    };
    let fabric = Fabric::open(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let mut l = Listener::bind(&fabric, &info).unwrap();
    assert!(l.raw_eq().wait_fd().unwrap() >= 0);

    let client = |addr: EpAddr, hello: &'static [u8]| {
        std::thread::spawn(move || -> Result<Vec<u8>, ofi::Error> {
            let info = Hints::<Msg>::new().first()?;
            let fabric = Fabric::open(&info)?;
            let domain = fabric.domain(&info)?;
            let (mut ep, welcome) = domain.endpoint(&info).connect(&addr, hello, T)?;
            assert_eq!(welcome, b"come in");
            let peer = ep.peer();
            ep.recv(Buf::new(16)).map_err(|e| e.error)?;
            ep.send(Buf::from(b"over msg".to_vec()), peer)
                .map_err(|e| e.error)?;
            let mut answer = None;
            for _ in 0..2 {
                let c = ep.wait(T)?;
                if c.kind == OpKind::Recv {
                    answer = c.buf.map(|b| b.into_vec());
                }
            }
            Ok(answer.unwrap_or_default())
        })
    };

    let h = client(l.addr().clone(), b"knock");
    let req = l.next_request(T).unwrap();
    assert_eq!(req.cm_data, b"knock");
    let mut ep = l.accept(&domain, req, b"come in", T).unwrap();
    assert!(ep.raw_eq().unwrap().wait_fd().unwrap() >= 0);
    ep.recv(Buf::new(64)).unwrap();
    let c = ep.wait(T).unwrap();
    assert_eq!(
        (c.kind, c.buf.map(|b| b.into_vec())),
        (OpKind::Recv, Some(b"over msg".to_vec()))
    );
    let peer = ep.peer();
    ep.send(Buf::from(b"ack".to_vec()), peer).unwrap();
    assert_eq!(ep.wait(T).unwrap().kind, OpKind::Send);
    assert_eq!(h.join().unwrap().unwrap(), b"ack");

    // A rejected client gets an error, not a connection.
    let h = client(l.addr().clone(), b"let me in");
    let req = l.next_request(T).unwrap();
    assert_eq!(req.cm_data, b"let me in");
    l.reject(req, b"go away").unwrap();
    let e = h.join().unwrap().unwrap_err();
    assert_eq!(e.code(), Errno::ECONNREFUSED, "{e}");
}

#[test]
fn datagram_endpoints_send_and_receive() {
    use ofi::safe::Dgram;
    let Some(info) = first_or_skip(Hints::<Dgram>::new().provider("udp"), "udp") else {
        return;
    };
    let fabric = Fabric::open(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let mut ep: Ep<Dgram> = domain.endpoint(&info).build().unwrap();
    let me = ep.insert_peer(&ep.addr().clone()).unwrap();
    let r = ep.recv(Buf::new(1500)).unwrap();
    ep.send(Buf::from(vec![7u8; 100]), me).unwrap();
    let mut got = None;
    for _ in 0..2 {
        let c = ep.wait(T).unwrap();
        if c.id == r {
            got = c.buf;
        }
    }
    let got = got.expect("the receive completed");
    assert_eq!((got.len(), got.capacity()), (100, 1500));
    assert!(got.iter().all(|&b| b == 7));
    // inject: no completion, the data arrives.
    ep.recv(Buf::new(64)).unwrap();
    ep.inject(b"injected", me).unwrap();
    let c = ep.wait(T).unwrap();
    assert_eq!(c.buf.as_deref(), Some(&b"injected"[..]));
    assert_eq!(ep.in_flight(), 0);
    // A send the provider refuses (over max_msg_size) hands the buffer back and leaves
    // nothing in flight; the posts after it work.
    let big = info.max_msg_size() + 1;
    let e = ep.send(Buf::new(big), me).unwrap_err();
    assert_eq!(e.error.code(), Errno::EMSGSIZE, "{e}");
    assert_eq!(e.buf.map(|b| b.len()), Some(big));
    assert_eq!(ep.in_flight(), 0);
    let r = ep.recv(Buf::new(64)).unwrap();
    let s = ep.send(Buf::from(b"after".to_vec()), me).unwrap();
    assert_ne!(r, s);
    let mut got = None;
    for _ in 0..2 {
        let c = ep.wait(T).unwrap();
        if c.id == r {
            got = c.buf;
        }
    }
    assert_eq!(got.as_deref(), Some(&b"after"[..]));
    assert_eq!(ep.in_flight(), 0);
}
