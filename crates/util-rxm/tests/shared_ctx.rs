//! rxm's shared contexts over real tcp connections (what the conformance suite does not
//! cover): messages of every protocol size (eager, segmented, rendezvous) left
//! unexpected at two endpoints before the receives are posted to their shared receive
//! context; tagged receives on the context matched across endpoints; receives posted
//! to a bound endpoint going to its context; receives posted from one thread while
//! messages arrive at four endpoints; and the refusals (`FI_EOPBADSTATE`,
//! `FI_EBADFLAGS`, `FI_EINVAL`, `FI_EBUSY`).
//!
//! The sender is an endpoint of another domain, so every message crosses a tcp
//! connection of its own.

use std::time::{Duration, Instant};

use ofi::abi::raw::CqMsgEntry;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{
    AddrFormat, Caps, CqFormat, EpType, Errno, GetinfoFlags, Info, OpFlags, API_VERSION,
    SHARED_CONTEXT,
};
use ofi_conformance::checks::tagged::{trecv, tsend};
use ofi_conformance::fixture::{
    assert_empty, enabled_peer, expect_errno, name_of, pattern, poll_one, post_recv, recvmsg, send,
    trecvmsg, wait_err,
};

/// `tcp;ofi_rxm` over IPv4 with both contexts shared.
fn shared_info() -> Info {
    let mut h = Info::hints()
        .with_addr_format(AddrFormat::SOCKADDR_IN)
        .with_caps(Caps::MSG | Caps::TAGGED);
    h.ep_attr.ep_type = EpType::Rdm;
    h.ep_attr.tx_ctx_cnt = SHARED_CONTEXT;
    h.ep_attr.rx_ctx_cnt = SHARED_CONTEXT;
    h.fabric_attr.prov_name = Some("tcp;ofi_rxm".into());
    let infos = ofi::getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&h))
        .unwrap_or_else(|e| panic!("getinfo tcp;ofi_rxm with shared contexts: {e}"));
    let i = infos[0].clone();
    assert_eq!(i.prov_name(), "tcp;ofi_rxm");
    assert_eq!(i.ep_attr.rx_ctx_cnt, SHARED_CONTEXT);
    assert!(i.domain_attr.max_ep_srx_ctx >= 1 && i.domain_attr.max_ep_stx_ctx >= 1);
    i
}

/// `n` endpoints of one domain bound to one shared transmit and one shared receive
/// context, one CQ and one AV.
struct Group {
    eps: Vec<Endpoint>,
    srx: Endpoint,
    stx: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    domain: Domain,
    _fabric: Fabric,
}

fn group(info: &Info, n: usize) -> Group {
    let fabric = ofi::fabric(info).expect("fi_fabric");
    let domain = fabric.domain(info).expect("fi_domain");
    let srx = domain.srx_context(&info.rx_attr).expect("fi_srx_context");
    let stx = domain.stx_context(&info.tx_attr).expect("fi_stx_context");
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Msg))
        .expect("fi_cq_open");
    let av = domain.av_open(&AvAttr::default()).expect("fi_av_open");
    let eps = (0..n)
        .map(|i| {
            let ep = domain.endpoint(info).expect("fi_endpoint");
            ep.bind(&srx, OpFlags::empty())
                .unwrap_or_else(|e| panic!("bind srx ({i}): {e}"));
            ep.bind(&stx, OpFlags::empty())
                .unwrap_or_else(|e| panic!("bind stx ({i}): {e}"));
            ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
                .expect("bind cq");
            ep.bind_av(&av).expect("bind av");
            ep.enable().expect("fi_enable");
            ep
        })
        .collect();
    Group {
        eps,
        srx,
        stx,
        cq,
        av,
        domain,
        _fabric: fabric,
    }
}

/// An ordinary endpoint in a domain of its own, with the group's endpoints in its AV.
struct Sender {
    ep: Endpoint,
    cq: CompletionQueue,
    dests: Vec<u64>,
    av: AddressVector,
    _domain: Domain,
    _fabric: Fabric,
}

/// The info of [`shared_info`], a [`group`] of `n` endpoints and a [`sender`] to them.
fn group_and_sender(n: usize) -> (Info, Group, Sender) {
    let info = shared_info();
    let g = group(&info, n);
    let s = sender(&g, &info);
    (info, g, s)
}

fn sender(g: &Group, info: &Info) -> Sender {
    let mut own = info.clone();
    own.ep_attr.tx_ctx_cnt = 1;
    own.ep_attr.rx_ctx_cnt = 1;
    let fabric = ofi::fabric(&own).expect("fi_fabric (sender)");
    let domain = fabric.domain(&own).expect("fi_domain (sender)");
    let (ep, cq, av) = enabled_peer(&domain, &own);
    let names: Vec<_> = g.eps.iter().map(|e| name_of(e, info)).collect();
    let dests = av.insert(&names).expect("fi_av_insert");
    Sender {
        ep,
        cq,
        dests,
        av,
        _domain: domain,
        _fabric: fabric,
    }
}

/// How long a test waits for one completion before it fails (a bound on failure only).
const WAIT: Duration = Duration::from_secs(30);

/// The group's next completion; the sender (in a domain of its own, progressed only by
/// reading its CQ) is driven meanwhile, its completions' contexts pushed to `sent`.
fn next_received(g: &Group, s: &Sender, sent: &mut Vec<usize>, what: &str) -> CqMsgEntry {
    let end = Instant::now() + WAIT;
    loop {
        if let Some(c) = poll_one(&g.cq) {
            return c;
        }
        if let Some(c) = poll_one(&s.cq) {
            sent.push(c.op_context);
        }
        assert!(
            Instant::now() < end,
            "{what}: no completion within {WAIT:?}"
        );
        std::thread::yield_now();
    }
}

/// The sender's completions until there are `n` in `sent` (the group driven meanwhile,
/// which must report nothing more); sorted.
fn all_sent(g: &Group, s: &Sender, sent: &mut Vec<usize>, n: usize) -> Vec<usize> {
    let end = Instant::now() + WAIT;
    while sent.len() < n {
        assert!(poll_one(&g.cq).is_none(), "a completion too many");
        if let Some(c) = poll_one(&s.cq) {
            sent.push(c.op_context);
        }
        assert!(
            Instant::now() < end,
            "send completions: {} of {n}",
            sent.len()
        );
        std::thread::yield_now();
    }
    let mut v = sent.clone();
    v.sort_unstable();
    v
}

/// Drive both sides for `d`, asserting that the group reports nothing meanwhile (no
/// receive is posted), and collect the sender's completions.
fn drive_without_receives(g: &Group, s: &Sender, d: Duration, sent: &mut Vec<usize>) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        assert!(
            poll_one(&g.cq).is_none(),
            "a completion before any receive was posted"
        );
        if let Some(c) = poll_one(&s.cq) {
            sent.push(c.op_context);
        }
        std::thread::yield_now();
    }
}

/// Messages of each protocol size sent to two endpoints before any receive exists wait
/// at their endpoints; receives posted afterwards to the shared context take them, in
/// the order each endpoint got them, whatever endpoint they came to.
#[test]
fn unexpected_messages_at_two_endpoints_meet_receives_posted_later() {
    let (_, g, s) = group_and_sender(2);
    // Eager, segmented and rendezvous sizes, alternating between the endpoints.
    let sizes = [100usize, 40_000, 1 << 20, 60, 30_000, 600_000];
    let msgs: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n, i as u8))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        send(&s.ep, m, s.dests[i % 2], 0x100 + i).unwrap_or_else(|e| panic!("send {i}: {e}"));
    }
    let mut sent = Vec::new();
    drive_without_receives(&g, &s, Duration::from_millis(300), &mut sent);
    // One receive per message, big enough for any, posted to the context.
    let mut bufs = vec![vec![0u8; 1 << 20]; sizes.len()];
    for (k, b) in bufs.iter_mut().enumerate() {
        post_recv(&g.srx, b, 0x200 + k).unwrap_or_else(|e| panic!("recv {k}: {e}"));
    }
    let mut got = vec![None; sizes.len()];
    for _ in 0..sizes.len() {
        let c = next_received(&g, &s, &mut sent, "a receive through the shared context");
        let k = c.op_context - 0x200;
        assert!(got[k].is_none(), "receive {k} completed twice");
        let m = sizes
            .iter()
            .position(|&n| n == c.len)
            .unwrap_or_else(|| panic!("a message of {} bytes", c.len));
        assert!(bufs[k][..c.len] == msgs[m][..], "receive {k}: message {m}");
        got[k] = Some(m);
    }
    let mut msgs_seen: Vec<usize> = got.iter().flatten().copied().collect();
    msgs_seen.sort_unstable();
    assert_eq!(msgs_seen, (0..sizes.len()).collect::<Vec<_>>());
    // Each endpoint's messages were taken in the order they came (receives are
    // offered in posting order).
    for ep in 0..2 {
        let order: Vec<usize> = got
            .iter()
            .flatten()
            .copied()
            .filter(|m| m % 2 == ep)
            .collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "endpoint {ep}'s messages in order");
    }
    assert_eq!(
        all_sent(&g, &s, &mut sent, sizes.len()),
        (0x100..0x100 + sizes.len()).collect::<Vec<_>>()
    );
    assert_empty(&g.cq, "one completion per message");
}

/// Tagged receives posted to the shared context match by tag whatever endpoint the
/// message comes to; a receive whose tag never comes stays posted.
#[test]
fn tagged_receives_on_the_context_match_across_endpoints() {
    let (_, g, s) = group_and_sender(3);
    let mut b7 = vec![0u8; 64];
    let mut b9 = vec![0u8; 64];
    let mut b11 = vec![0u8; 64];
    trecv(&g.srx, &mut b7, ofi::ADDR_UNSPEC, 7, 0, 0x7);
    trecv(&g.srx, &mut b9, ofi::ADDR_UNSPEC, 9, 0, 0x9);
    trecv(&g.srx, &mut b11, ofi::ADDR_UNSPEC, 11, 0, 0xb);
    let left = g.srx.rx_size_left().expect("fi_rx_size_left");
    let (m9, m7) = (pattern(20, 9), pattern(30, 7));
    tsend(&s.ep, &m9, s.dests[0], 9, 0x90);
    tsend(&s.ep, &m7, s.dests[2], 7, 0x70);
    let mut seen = Vec::new();
    let mut sent = Vec::new();
    for _ in 0..2 {
        let c = next_received(
            &g,
            &s,
            &mut sent,
            "a tagged receive through the shared context",
        );
        match c.op_context {
            0x9 => assert!(c.len == 20 && b9[..20] == m9[..]),
            0x7 => assert!(c.len == 30 && b7[..30] == m7[..]),
            o => panic!("unexpected completion {o:#x}"),
        }
        seen.push(c.op_context);
    }
    seen.sort_unstable();
    assert_eq!(seen, [0x7, 0x9]);
    assert_eq!(all_sent(&g, &s, &mut sent, 2), [0x70, 0x90]);
    assert_eq!(
        g.srx.rx_size_left().expect("fi_rx_size_left"),
        left + 2,
        "the tag-11 receive is still posted"
    );
    assert_empty(&g.cq, "nothing for tag 11");
    assert!(b11.iter().all(|&b| b == 0));
}

/// A receive posted to a bound endpoint is queued in its shared context (whose room
/// shrinks) and takes a message sent to another endpoint of the context.
#[test]
fn receives_posted_to_an_endpoint_go_to_its_context() {
    let (_, g, s) = group_and_sender(2);
    let before = g.srx.rx_size_left().expect("fi_rx_size_left");
    let mut buf = vec![0u8; 64];
    post_recv(&g.eps[0], &mut buf, 0x33).expect("recv on a bound endpoint");
    assert_eq!(g.srx.rx_size_left().expect("fi_rx_size_left"), before - 1);
    let m = pattern(48, 3);
    send(&s.ep, &m, s.dests[1], 0x44).expect("send to the other endpoint");
    let mut sent = Vec::new();
    let c = next_received(&g, &s, &mut sent, "the receive posted on endpoint 0");
    assert_eq!((c.op_context, c.len), (0x33, 48));
    assert!(buf[..48] == m[..]);
    assert_eq!(all_sent(&g, &s, &mut sent, 1), [0x44]);
    assert_eq!(g.srx.rx_size_left().expect("fi_rx_size_left"), before);
}

/// What the shared contexts refuse, each with its error code.
#[test]
fn shared_contexts_refuse_what_they_cannot_do() {
    let info = shared_info();
    let fabric = ofi::fabric(&info).expect("fi_fabric");
    let domain = fabric.domain(&info).expect("fi_domain");
    let srx = domain.srx_context(&info.rx_attr).expect("fi_srx_context");
    let stx = domain.stx_context(&info.tx_attr).expect("fi_stx_context");
    let mut buf = vec![0u8; 16];
    // No endpoint enabled on the receive context yet: no receive.
    expect_errno(
        post_recv(&srx, &mut buf, 1),
        Errno::EOPBADSTATE,
        "recv on a lone srx",
    );
    // Wrong kinds and flags.
    let ep = domain.endpoint(&info).expect("fi_endpoint");
    expect_errno(
        ep.bind(&stx, OpFlags::RECV),
        Errno::EBADFLAGS,
        "stx with flags",
    );
    expect_errno(
        srx.bind(&stx, OpFlags::empty()),
        Errno::EINVAL,
        "a context bound to a context",
    );
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Msg))
        .expect("fi_cq_open");
    let av = domain.av_open(&AvAttr::default()).expect("fi_av_open");
    for (what, ctx) in [("srx", &srx), ("stx", &stx)] {
        expect_errno(ctx.bind(&cq, OpFlags::RECV), Errno::EINVAL, what);
        expect_errno(ctx.bind_av(&av), Errno::EINVAL, what);
        // A shared context has no name of its own.
        let name = ep.getname().expect("fi_getname");
        expect_errno(ctx.setname(&name), Errno::EINVAL, what);
    }
    ep.bind(&srx, OpFlags::empty()).expect("bind srx");
    expect_errno(
        ep.bind(&srx, OpFlags::empty()),
        Errno::EINVAL,
        "a second srx",
    );
    ep.bind(&stx, OpFlags::empty()).expect("bind stx");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .expect("bind cq");
    ep.bind_av(&av).expect("bind av");
    ep.enable().expect("fi_enable");
    srx.enable()
        .expect("fi_enable of a shared context is accepted");
    stx.enable()
        .expect("fi_enable of a shared context is accepted");
    expect_errno(
        ep.bind(&srx, OpFlags::empty()),
        Errno::EOPBADSTATE,
        "bind after fi_enable",
    );
    // The receive context takes receives now, but no multi-receive buffer and no send.
    expect_errno(
        recvmsg(&srx, &mut buf, 2, OpFlags::MULTI_RECV),
        Errno::EBADFLAGS,
        "FI_MULTI_RECV on an srx",
    );
    for flag in [
        OpFlags::PEEK,
        OpFlags::CLAIM,
        OpFlags::PEEK | OpFlags::DISCARD,
    ] {
        let r = trecvmsg(&srx, &mut buf, 1, 0, 6, flag);
        expect_errno(r, Errno::EBADFLAGS, "peek, claim or discard on an srx");
    }
    let me = av.insert(&[name_of(&ep, &info)]).expect("fi_av_insert")[0];
    expect_errno(
        send(&srx, b"x", me, 3),
        Errno::EOPBADSTATE,
        "send on an srx",
    );
    // The transmit context takes no data call at all.
    expect_errno(
        send(&stx, b"x", me, 4),
        Errno::EOPBADSTATE,
        "send on an stx",
    );
    expect_errno(
        post_recv(&stx, &mut buf, 5),
        Errno::EOPBADSTATE,
        "recv on an stx",
    );
    assert_empty(&cq, "nothing was posted");
    let _ = &domain;
}

/// A context with endpoints bound to it does not close (`FI_EBUSY`); once they are
/// closed it does.
#[test]
fn contexts_close_after_their_endpoints() {
    let info = shared_info();
    let Group {
        eps,
        mut srx,
        mut stx,
        cq: _cq,
        av: _av,
        domain: _d,
        _fabric,
    } = group(&info, 2);
    expect_errno(
        srx.close(),
        Errno::EBUSY,
        "fi_close srx while endpoints are bound",
    );
    expect_errno(
        stx.close(),
        Errno::EBUSY,
        "fi_close stx while endpoints are bound",
    );
    for mut ep in eps {
        ep.close().expect("fi_close of a bound endpoint");
    }
    srx.close().expect("fi_close srx");
    stx.close().expect("fi_close stx");
}

/// Receives posted to the context from one thread while messages arrive at four
/// endpoints (progressed by another): every message meets a receive, whichever comes
/// first (a message arriving while a receive is being offered must not be left
/// unexpected next to it). Half the receives are posted at once; the other half once
/// the first half completed, while the rest of the messages are arriving or waiting
/// unexpected.
#[test]
fn receives_posted_while_messages_arrive_all_complete() {
    const K: usize = 200;
    let (_, g, s) = group_and_sender(4);
    let msgs: Vec<Vec<u8>> = (0..K).map(|i| pattern(16 + i % 48, i as u8)).collect();
    let mut bufs = vec![vec![0u8; 64]; K];
    let mut received = Vec::new();
    let mut sent = Vec::new();
    let done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let srx = &g.srx;
        let bufs = &mut bufs;
        let done = &done;
        scope.spawn(move || {
            let end = Instant::now() + WAIT;
            for (k, b) in bufs.iter_mut().enumerate() {
                while k >= K / 2 && done.load(std::sync::atomic::Ordering::Acquire) < K / 2 {
                    assert!(Instant::now() < end, "the first half never completed");
                    std::thread::yield_now();
                }
                post_recv(srx, b, 0x1000 + k).unwrap_or_else(|e| panic!("recv {k}: {e}"));
            }
        });
        for (i, m) in msgs.iter().enumerate() {
            send(&s.ep, m, s.dests[i % 4], 0x2000 + i).unwrap_or_else(|e| panic!("send {i}: {e}"));
        }
        let end = Instant::now() + WAIT;
        while received.len() < K || sent.len() < K {
            if let Some(c) = poll_one(&g.cq) {
                received.push(c);
                done.store(received.len(), std::sync::atomic::Ordering::Release);
            }
            if let Some(c) = poll_one(&s.cq) {
                sent.push(c.op_context);
            }
            assert!(
                Instant::now() < end,
                "{} of {K} received, {} sent",
                received.len(),
                sent.len()
            );
            std::thread::yield_now();
        }
    });
    let mut taken = [false; K];
    for c in &received {
        let k = c.op_context - 0x1000;
        let m = msgs
            .iter()
            .position(|m| m.len() == c.len && bufs[k][..c.len] == m[..])
            .unwrap_or_else(|| panic!("receive {k}: no message matches its {} bytes", c.len));
        assert!(!taken[m], "message {m} received twice");
        taken[m] = true;
    }
    assert!(taken.iter().all(|&t| t));
    sent.sort_unstable();
    assert_eq!(sent, (0x2000..0x2000 + K).collect::<Vec<_>>());
    assert_empty(&g.cq, "one completion per message");
}

/// A shared context is reached through its endpoints only: a send to the name of a
/// receive context fails (its passive endpoint does not listen).
#[test]
fn a_shared_context_cannot_be_connected_to() {
    let (info, g, s) = group_and_sender(1);
    let name = g.srx.getname().expect("fi_getname of an srx");
    let addr = ofi::addr::Address::from_bytes(info.addr_format, &name).expect("its address");
    let to_srx = s.av.insert(&[addr]).expect("fi_av_insert")[0];
    send(&s.ep, b"nobody", to_srx, 0x77).expect("send to the srx's name");
    let e = wait_err(&s.cq, "a send to a shared context");
    assert_eq!(e.op_context, 0x77);
    assert!(
        [Errno::ECONNREFUSED, Errno::ETIMEDOUT].contains(&Errno(e.err)),
        "error {}",
        e.err
    );
}
