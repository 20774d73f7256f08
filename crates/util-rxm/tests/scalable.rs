//! Scalable endpoints of `tcp;ofi_rxm` over real tcp connections (beyond the
//! conformance suite's `scalable` area): two contexts each driven by a thread of its
//! own, reading only its own CQs, at every protocol size, with `FI_SOURCE` naming the
//! scalable endpoint; a receive context index past the count refused (the sender's
//! operations fail with `FI_ECONNREFUSED`, the sender keeps working); forged
//! connection requests (an index past the count, a malformed extension) refused with
//! the right reason and a good one accepted; an ordinary peer of another fabric
//! talking with the contexts both ways; authorization keys with contexts; auto
//! progress; a receive context on a shared receive context; the calls a scalable
//! endpoint and its contexts refuse.

mod common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::addr::Address;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{AddrFormat, Caps, CqFormat, EqEvent, Errno, Info, OpFlags};
use ofi_conformance::checks::contexts::rx_addr;
use ofi_conformance::fixture::{name_of, pattern, post_recv, send};
use ofi_conformance::node::{poll, poll_from, rdm_info, wait_for, Done, Node};
use ofi_util_rxm::hello_ext::{self, Extensions};
use ofi_util_rxm::proto::{Hello, Kind, Reason};

use common::{fake_hello, msg_client};

/// A bound on failure only.
const WAIT: Duration = Duration::from_secs(30);

fn info() -> Info {
    rdm_info(
        "tcp;ofi_rxm",
        AddrFormat::SOCKADDR_IN,
        Caps::MSG | Caps::TAGGED | Caps::SOURCE,
    )
}

/// A scalable endpoint with `n` transmit and `n` receive contexts, its AV (with
/// `bits` receive-context bits) bound, and its name in that AV at `base` (field order =
/// drop order).
struct Scalable {
    sep: Endpoint,
    av: AddressVector,
    domain: Domain,
    _fabric: Fabric,
    info: Info,
    name: Address,
    base: u64,
    bits: u32,
}

fn scalable(n: usize, bits: u32) -> Scalable {
    scalable_with(info(), n, bits)
}

/// [`scalable`] for `info` (e.g. with an authorization key).
fn scalable_with(mut info: Info, n: usize, bits: u32) -> Scalable {
    info.ep_attr.tx_ctx_cnt = n;
    info.ep_attr.rx_ctx_cnt = n;
    let fabric = ofi::fabric(&info).expect("fi_fabric");
    let domain = fabric.domain(&info).expect("fi_domain");
    let av = domain
        .av_open(&AvAttr {
            rx_ctx_bits: bits as i32,
            ..AvAttr::default()
        })
        .expect("fi_av_open");
    let sep = domain.scalable_ep(&info).expect("fi_scalable_ep");
    sep.bind_av(&av).expect("fi_scalable_ep_bind");
    sep.enable().expect("fi_enable of the scalable endpoint");
    let name = name_of(&sep, &info);
    let base = av.insert(std::slice::from_ref(&name)).expect("insert")[0];
    Scalable {
        sep,
        av,
        domain,
        _fabric: fabric,
        info,
        name,
        base,
        bits,
    }
}

/// An enabled context with its own CQ (field order = drop order).
struct Ctx {
    ep: Endpoint,
    cq: CompletionQueue,
}

impl Scalable {
    /// Transmit (`tx`) or receive context `i`, enabled with a CQ of its own.
    fn context(&self, tx: bool, i: i32) -> Ctx {
        let ep = if tx {
            self.sep.tx_context(i, &self.info.tx_attr)
        } else {
            self.sep.rx_context(i, &self.info.rx_attr)
        }
        .unwrap_or_else(|e| panic!("context {i} (tx {tx}): {e}"));
        let cq = self
            .domain
            .cq_open(&CqAttr {
                size: 1024,
                ..CqAttr::with_format(CqFormat::Tagged)
            })
            .expect("fi_cq_open");
        let flags = if tx { OpFlags::TRANSMIT } else { OpFlags::RECV };
        ep.bind(&cq, flags).expect("bind the context's CQ");
        ep.enable().expect("fi_enable of a context");
        Ctx { ep, cq }
    }

    /// Receive context `i`'s fabric address.
    fn rx(&self, i: u64) -> u64 {
        rx_addr(self.base, i, self.bits)
    }
}

/// An ordinary endpoint for `info` in a fabric of its own, its AV with `bits`
/// receive-context bits and a scalable endpoint's name in it at `sep` (field order =
/// drop order).
struct Peer {
    ep: Endpoint,
    cq: CompletionQueue,
    _av: AddressVector,
    sep: u64,
    _node: Node,
}

fn peer(info: &Info, bits: u32, sep_name: &Address) -> Peer {
    let node = Node::open(info);
    let av = node
        .domain()
        .av_open(&AvAttr {
            rx_ctx_bits: bits as i32,
            ..AvAttr::default()
        })
        .expect("fi_av_open");
    let ep = node.domain().endpoint(info).expect("fi_endpoint");
    let cq = node
        .domain()
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .expect("fi_cq_open");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    let sep = av.insert(std::slice::from_ref(sep_name)).unwrap()[0];
    Peer {
        ep,
        cq,
        _av: av,
        sep,
        _node: node,
    }
}

/// Message sizes of every protocol: eager, segmented, rendezvous.
const SIZES: [usize; 4] = [8, 1000, 40_000, 300_000];

/// Two transmit and two receive contexts; thread `i` owns transmit and receive context
/// `i` and reads only their CQs. Each sends 24 messages of every protocol size to the
/// other's receive context; each receives the other's, in order, intact, reported from
/// the scalable endpoint's AV entry (`FI_SOURCE`), and nothing else.
#[test]
fn two_contexts_each_driven_by_its_own_thread() {
    const N: usize = 24;
    let s = scalable(2, 1);
    let ctxs: Vec<(Ctx, Ctx)> = (0..2)
        .map(|i| (s.context(true, i), s.context(false, i)))
        .collect();
    let barrier = Arc::new(Barrier::new(2));
    let (base, dests) = (s.base, [s.rx(1), s.rx(0)]);
    std::thread::scope(|scope| {
        for (i, (tx, rx)) in ctxs.iter().enumerate() {
            let barrier = barrier.clone();
            let dest = dests[i];
            scope.spawn(move || {
                let from = 1 - i;
                let mut bufs: Vec<Vec<u8>> = (0..N).map(|k| vec![0u8; SIZES[k % 4]]).collect();
                for (k, b) in bufs.iter_mut().enumerate() {
                    post_recv(&rx.ep, b, 0x1000 + k).expect("fi_recv");
                }
                barrier.wait();
                let msgs: Vec<Vec<u8>> = (0..N)
                    .map(|k| pattern(SIZES[k % 4], (16 * i + k) as u8))
                    .collect();
                for (k, m) in msgs.iter().enumerate() {
                    send(&tx.ep, m, dest, 0x2000 + k).expect("fi_send");
                }
                // Completions come in any order (a rendezvous completes after the
                // eager messages behind it); receives match in sending order.
                let (mut sent, mut got) = (vec![false; N], vec![false; N]);
                let end = Instant::now() + 2 * WAIT;
                let done = |v: &[bool]| v.iter().all(|&d| d);
                while !done(&sent) || !done(&got) {
                    assert!(
                        Instant::now() < end,
                        "thread {i}: {sent:?} sent, {got:?} received"
                    );
                    if let Some(d) = poll(&tx.cq) {
                        let e = d.unwrap_or_else(|e| panic!("thread {i}: send failed {e:?}"));
                        let k = e.op_context - 0x2000;
                        assert!(!std::mem::replace(&mut sent[k], true), "send {k} twice");
                    }
                    if let Some(d) = poll_from(&rx.cq) {
                        let (e, src) =
                            d.unwrap_or_else(|e| panic!("thread {i}: receive failed {e:?}"));
                        let k = e.op_context - 0x1000;
                        assert_eq!(e.len, SIZES[k % 4], "receive {k}");
                        assert!(
                            bufs[k] == pattern(SIZES[k % 4], (16 * from + k) as u8),
                            "thread {i}: message {k} from transmit context {from}"
                        );
                        assert_eq!(src, base, "FI_SOURCE: the scalable endpoint");
                        assert!(!std::mem::replace(&mut got[k], true), "receive {k} twice");
                    }
                }
                assert!(poll(&tx.cq).is_none() && poll(&rx.cq).is_none());
            });
        }
    });
    drop(ctxs);
}

/// A plain endpoint whose AV has two receive-context bits addresses receive context 3
/// of a scalable endpoint with two: the request is refused (reason "parameters") and
/// the send fails with `FI_ECONNREFUSED`; the same endpoint then reaches receive
/// context 1, and a request for an index the receive contexts never saw reaches
/// nobody else.
#[test]
fn an_index_past_the_count_fails_the_send_with_econnrefused() {
    let s = scalable(2, 2);
    let rx: Vec<Ctx> = (0..2).map(|i| s.context(false, i)).collect();
    let p = peer(&s.info, 2, &s.name);
    let (ep, cq, base) = (&p.ep, &p.cq, p.sep);
    let others = [&rx[0].cq, &rx[1].cq];
    send(ep, b"to nobody", rx_addr(base, 3, 2), 0x31).expect("fi_send");
    let d: Done = wait_for(&others, WAIT, "the refused send", || poll(cq));
    assert_eq!(
        d.expect_err("a send to context 3 of 2"),
        (0x31, Errno::ECONNREFUSED)
    );
    let mut buf = [0u8; 16];
    post_recv(&rx[1].ep, &mut buf, 0x32).unwrap();
    send(ep, b"to context 1", rx_addr(base, 1, 2), 0x33).expect("fi_send");
    let d = wait_for(&others, WAIT, "the send to context 1", || poll(cq));
    assert_eq!(d.expect("sent").op_context, 0x33);
    let d = wait_for(&[cq], WAIT, "context 1 receives", || poll(&rx[1].cq));
    assert_eq!(d.expect("received").len, 12);
    assert_eq!(&buf[..12], b"to context 1");
    assert!(poll(&rx[0].cq).is_none(), "context 0 got nothing");
    drop((p, rx));
}

/// An ordinary endpoint of another fabric and a scalable endpoint talk both ways: it
/// reaches each receive context (its AV with receive-context bits), and each transmit
/// context's reply reaches it reported from the scalable endpoint's AV entry
/// (`FI_SOURCE`: the transmit context's request carries that name as an alias).
#[test]
fn an_ordinary_peer_and_a_scalable_endpoint_talk_both_ways() {
    let s = scalable(2, 1);
    let ctxs: Vec<(Ctx, Ctx)> = (0..2)
        .map(|i| (s.context(true, i), s.context(false, i)))
        .collect();
    let p = peer(&s.info, 1, &s.name);
    let (ep, cq, base) = (&p.ep, &p.cq, p.sep);
    let at_sep =
        s.av.insert(&[name_of(ep, &s.info)])
            .expect("insert the peer")[0];
    let all: Vec<&CompletionQueue> = ctxs.iter().flat_map(|(t, r)| [&t.cq, &r.cq]).collect();
    for (i, (tx, rx)) in ctxs.iter().enumerate() {
        let mut got = [0u8; 32];
        post_recv(&rx.ep, &mut got, 0x60 + i).unwrap();
        let msg = pattern(20 + i, i as u8);
        send(ep, &msg, rx_addr(base, i as u64, 1), 0x70 + i).expect("fi_send");
        let d = wait_for(&all, WAIT, "the peer's send", || poll(cq));
        assert_eq!(d.expect("sent").op_context, 0x70 + i);
        let d = wait_for(&[cq], WAIT, "the receive context", || poll(&rx.cq));
        assert_eq!(
            d.expect("received").op_context,
            0x60 + i,
            "receive context {i}"
        );
        assert_eq!(&got[..20 + i], &msg[..]);
        let mut back = [0u8; 32];
        post_recv(ep, &mut back, 0x80 + i).unwrap();
        let reply = pattern(10 + i, 0x40 + i as u8);
        send(&tx.ep, &reply, at_sep, 0x90 + i).expect("the reply");
        let d = wait_for(&[cq], WAIT, "the reply's send", || poll(&tx.cq));
        assert_eq!(d.expect("sent").op_context, 0x90 + i);
        let (e, src) = wait_for(&all, WAIT, "the reply", || poll_from(cq)).expect("the reply");
        assert_eq!((e.op_context, e.len), (0x80 + i, 10 + i));
        assert_eq!(&back[..10 + i], &reply[..]);
        assert_eq!(
            src, base,
            "FI_SOURCE of transmit context {i}: the scalable endpoint"
        );
    }
    drop((p, ctxs));
}

/// A scalable endpoint with an authorization key: a peer with the same key reaches
/// receive context 1 (the request carries the key's tag, then the index) and gets the
/// transmit context's reply (the tag, then the alias); a peer with another key is
/// refused (`FI_ECONNREFUSED`) and nothing reaches the contexts.
#[test]
fn a_key_separates_scalable_endpoints() {
    let keyed = |key: &[u8]| {
        let mut i = info();
        i.domain_attr.auth_key = Some(key.to_vec());
        i
    };
    let s = scalable_with(keyed(b"job-a"), 2, 1);
    let (tx, rx) = (s.context(true, 0), s.context(false, 1));
    let same = peer(&keyed(b"job-a"), 1, &s.name);
    let other = peer(&keyed(b"job-b"), 1, &s.name);
    let mut got = [0u8; 16];
    post_recv(&rx.ep, &mut got, 0xa0).unwrap();
    send(&other.ep, b"wrong key", rx_addr(other.sep, 1, 1), 0xa1).expect("fi_send");
    let d = wait_for(&[&rx.cq], WAIT, "the refused send", || poll(&other.cq));
    assert_eq!(d.expect_err("another key"), (0xa1, Errno::ECONNREFUSED));
    send(&same.ep, b"right key", rx_addr(same.sep, 1, 1), 0xa2).expect("fi_send");
    let d = wait_for(&[&same.cq], WAIT, "receive context 1", || poll(&rx.cq));
    assert_eq!(
        d.expect("received").op_context,
        0xa0,
        "the right key's message only"
    );
    assert_eq!(&got[..9], b"right key");
    let d = wait_for(&[&rx.cq], WAIT, "the right key's send", || poll(&same.cq));
    assert_eq!(d.expect("sent").op_context, 0xa2);
    let mut back = [0u8; 16];
    post_recv(&same.ep, &mut back, 0xa3).unwrap();
    let at_sep = s.av.insert(&[name_of(&same.ep, &s.info)]).unwrap()[0];
    send(&tx.ep, b"reply", at_sep, 0xa4).expect("the reply");
    let (e, src) = wait_for(&[&tx.cq], WAIT, "the reply", || poll_from(&same.cq)).expect("reply");
    assert_eq!((e.op_context, src), (0xa3, same.sep));
    assert_eq!(&back[..5], b"reply");
    drop((tx, rx, same, other));
}

/// With `FI_PROGRESS_AUTO` the domain's thread drives the contexts (a drive that is
/// no CQ read: in full): a message of each protocol from transmit context 0 reaches
/// receive context 1 while only receive context 1's CQ is read.
#[test]
fn auto_progress_drives_the_contexts() {
    let mut auto = info();
    auto.domain_attr.data_progress = ofi::Progress::Auto;
    let s = scalable_with(auto, 2, 1);
    let (tx, rx) = (s.context(true, 0), s.context(false, 1));
    for (k, len) in SIZES.into_iter().enumerate() {
        let payload = pattern(len, k as u8);
        let mut buf = vec![0u8; len];
        post_recv(&rx.ep, &mut buf, 0xb0 + k).unwrap();
        send(&tx.ep, &payload, s.rx(1), 0xc0 + k).expect("fi_send");
        let d = wait_for(&[], WAIT, "receive with auto progress", || poll(&rx.cq));
        assert_eq!(d.expect("received").op_context, 0xb0 + k, "{len} B");
        assert!(buf == payload, "{len} B");
        let d = wait_for(&[], WAIT, "send with auto progress", || poll(&tx.cq));
        assert_eq!(d.expect("sent").op_context, 0xc0 + k, "{len} B");
    }
    drop((tx, rx));
}

/// A receive context bound to a shared receive context: receives posted to the shared
/// context, or on the receive context (which hands them to it), take the messages sent
/// to that receive context; completions go to the receive context's CQ.
#[test]
fn a_receive_context_on_a_shared_receive_context() {
    let s = scalable(2, 1);
    let srx = s
        .domain
        .srx_context(&s.info.rx_attr)
        .expect("fi_srx_context");
    let rx = s.sep.rx_context(1, &s.info.rx_attr).expect("fi_rx_context");
    let rcq = s
        .domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .unwrap();
    rx.bind(&srx, OpFlags::empty())
        .expect("bind the shared receive context");
    rx.bind(&rcq, OpFlags::RECV).unwrap();
    rx.enable().unwrap();
    let tx = s.context(true, 0);
    let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
    post_recv(&srx, &mut a, 0xd0).expect("a receive on the shared context");
    post_recv(&rx, &mut b, 0xd1).expect("a receive on the receive context");
    for (k, m) in [b"first!!!", b"second!!"].iter().enumerate() {
        send(&tx.ep, *m, s.rx(1), 0xe0 + k).expect("fi_send");
    }
    for k in 0..2 {
        let d = wait_for(&[&tx.cq], WAIT, "a receive", || poll(&rcq));
        assert_eq!(d.expect("received").op_context, 0xd0 + k, "posting order");
    }
    assert_eq!((&a, &b), (b"first!!!", b"second!!"));
    for k in 0..2 {
        let d = wait_for(&[&rcq], WAIT, "a send", || poll(&tx.cq));
        assert_eq!(d.expect("sent").op_context, 0xe0 + k);
    }
    drop((tx, rx, rcq, srx));
}

/// The answer to a hand-made connection request `data` to the scalable endpoint,
/// driving its receive contexts: `Ok(accept hello)` or `Err(reject hello)`.
fn answer(s: &Scalable, rx: &[Ctx], data: &[u8]) -> Result<Hello, Hello> {
    let c = msg_client();
    c.ep.connect(&s.name.to_bytes(), data).expect("fi_connect");
    let end = Instant::now() + WAIT;
    loop {
        for r in rx {
            let _ = r.cq.read::<CqTaggedEntry>(&mut []);
        }
        match c.eq.read() {
            Ok(ev) if ev.event == EqEvent::Connected => {
                return Ok(Hello::parse(&ev.cm_data).expect("accept hello"))
            }
            Err(e) if e.code() == Errno::EAVAIL => {
                let ee = c.eq.readerr().expect("readerr");
                assert_eq!(ee.err, Errno::ECONNREFUSED);
                return Err(Hello::parse(&ee.err_data).expect("reject hello"));
            }
            _ => {}
        }
        assert!(Instant::now() < end, "no answer to the request");
        std::thread::yield_now();
    }
}

/// Forged requests: an index past the count is refused with reason "parameters", a
/// malformed extension with "malformed", and nothing panics; a well-formed request for
/// receive context 1 is accepted by it.
#[test]
fn forged_requests_are_refused_for_the_right_reason() {
    let s = scalable(2, 1);
    let rx: Vec<Ctx> = (0..2).map(|i| s.context(false, i)).collect();
    let (_, hello) = fake_hello(0x5e9);
    let request = |ext: &Extensions| {
        let mut b = hello.encode();
        hello_ext::append(&mut b, ofi_kit::auth::AuthTag::NONE, ext);
        b
    };
    let index = |i: u16| Extensions {
        rx_index: Some(i),
        alias: None,
    };
    for i in [2u16, 3, u16::MAX] {
        let h = answer(&s, &rx, &request(&index(i))).expect_err("index past the count");
        assert_eq!(
            (h.kind, h.reason),
            (Kind::Reject, Reason::Params),
            "index {i}"
        );
    }
    let mut bad = request(&index(1));
    bad.extend_from_slice(&[hello_ext::EXT_RX_INDEX, 3, 0, 0, 0]);
    let h = answer(&s, &rx, &bad).expect_err("a malformed extension");
    assert_eq!((h.kind, h.reason), (Kind::Reject, Reason::Malformed));
    let h = answer(&s, &rx, &request(&index(1))).expect("index 1 is accepted");
    assert_eq!(h.kind, Kind::Accept);
    drop(rx);
}

/// What a scalable endpoint and its contexts refuse: a CQ bound to the scalable
/// endpoint (`FI_EINVAL`), fi_enable without an AV (`FI_ENOAV`), an index past the
/// count (`FI_EINVAL`) or open twice (`FI_EBUSY`), a receive on a transmit context and
/// a send on a receive context (`FI_EOPBADSTATE`), fi_setname on a context not enabled
/// yet (`FI_EINVAL`: its name is the scalable endpoint's); contexts of an ordinary
/// endpoint (`FI_EINVAL`).
#[test]
fn what_scalable_endpoints_and_their_contexts_refuse() {
    let s = scalable(2, 1);
    let cq = s
        .domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .unwrap();
    let code = |r: ofi::Result<()>| r.expect_err("refused").code();
    assert_eq!(code(s.sep.bind(&cq, OpFlags::TRANSMIT)), Errno::EINVAL);
    let bare = s.domain.scalable_ep(&s.info).expect("fi_scalable_ep");
    assert_eq!(code(bare.enable()), Errno::ENOAV);
    let code_of = |r: ofi::Result<Endpoint>| r.expect_err("refused").code();
    assert_eq!(code_of(s.sep.tx_context(2, &s.info.tx_attr)), Errno::EINVAL);
    assert_eq!(
        code_of(s.sep.rx_context(-1, &s.info.rx_attr)),
        Errno::EINVAL
    );
    let tx = s.context(true, 0);
    let rx = s.context(false, 0);
    assert_eq!(code_of(s.sep.tx_context(0, &s.info.tx_attr)), Errno::EBUSY);
    let mut buf = [0u8; 8];
    assert_eq!(code(post_recv(&tx.ep, &mut buf, 1)), Errno::EOPBADSTATE);
    assert_eq!(code(send(&rx.ep, b"x", s.base, 2)), Errno::EOPBADSTATE);
    assert_eq!(code(send(&s.sep, b"x", s.base, 3)), Errno::EOPBADSTATE);
    let unnamed = s
        .sep
        .tx_context(1, &s.info.tx_attr)
        .expect("fi_tx_context 1");
    assert_eq!(code(unnamed.setname(&s.name.to_bytes())), Errno::EINVAL);
    assert_eq!(
        rx.ep.getname().unwrap(),
        s.name.to_bytes(),
        "a receive context's name"
    );
    let plain = Node::open(&s.info);
    assert_eq!(
        code_of(plain.ep.tx_context(0, &s.info.tx_attr)),
        Errno::EINVAL
    );
    drop((unnamed, tx, rx, bare, cq));
}
