//! Behaviour of the `udp` provider the conformance suite does not cover (yet): remote
//! CQ data, counters, selective completion, multi-receive buffers, malformed
//! datagrams, size limits, `FI_SOURCE_ERR`, auto progress, setname, bind errors.
//!
//! Everything runs on loopback; every wait is bounded by [`WAIT`].

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use ofi::abi::raw::{CqDataEntry, Iov, Msg};
use ofi::av::{AddressVector, AvAttr};
use ofi::cntr::{CntrAttr, Counter};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{
    AddrFormat, Address, Caps, CqFormat, Errno, GetinfoFlags, Info, OpFlags, Progress, WaitObj,
    ADDR_NOTAVAIL, API_VERSION,
};
use ofi_conformance::fixture;
use ofi_conformance::plugin::linked_registry;
use ofi_prov_udp::ep::{FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV};
use ofi_prov_udp::{UdpProvider, MAX_MSG_SIZE};

const WAIT: Duration = Duration::from_secs(2);

fn registry() -> &'static Registry {
    static R: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    R.get_or_init(|| linked_registry(&[ofi::abi::entry_for::<UdpProvider>()]))
}

fn info_with(format: AddrFormat, caps: Caps, progress: Progress) -> Info {
    let mut h = Info::hints().with_caps(caps);
    h.addr_format = format;
    h.domain_attr.data_progress = progress;
    h.fabric_attr.prov_name = Some("udp".into());
    fixture::first_info(registry(), h)
}

fn info(caps: Caps) -> Info {
    info_with(AddrFormat::SOCKADDR_IN, caps, Progress::Unspec)
}

/// One endpoint with a data-format CQ, an AV, and optional counters.
struct Peer {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    tx_cntr: Counter,
    rx_cntr: Counter,
    addr: Address,
}

struct Pair {
    a: Peer,
    b: Peer,
    /// fi_addr of b in a's AV, and of a in b's AV.
    to_b: u64,
    to_a: u64,
    _domain: Domain,
    _fabric: Fabric,
}

fn peer(domain: &Domain, info: &Info, cq_flags: OpFlags) -> Peer {
    let cq = domain
        .cq_open(&CqAttr {
            wait_obj: WaitObj::Unspec,
            ..CqAttr::with_format(CqFormat::Data)
        })
        .unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let cattr = CntrAttr {
        wait_obj: WaitObj::Unspec,
        ..CntrAttr::default()
    };
    let tx_cntr = domain.cntr_open(&cattr).unwrap();
    let rx_cntr = domain.cntr_open(&cattr).unwrap();
    let ep = domain.endpoint(info).unwrap();
    ep.bind(&cq, cq_flags).unwrap();
    ep.bind_av(&av).unwrap();
    ep.bind_cntr(&tx_cntr, OpFlags::SEND).unwrap();
    ep.bind_cntr(&rx_cntr, OpFlags::RECV).unwrap();
    ep.enable().unwrap();
    let addr = Address::from_bytes(info.addr_format, &ep.getname().unwrap()).unwrap();
    Peer {
        ep,
        cq,
        av,
        tx_cntr,
        rx_cntr,
        addr,
    }
}

fn pair_with(info: &Info, cq_flags: OpFlags, b_knows_a: bool) -> Pair {
    let fabric = registry().open_fabric(info).unwrap();
    let domain = fabric.domain(info).unwrap();
    let a = peer(&domain, info, cq_flags);
    let b = peer(&domain, info, OpFlags::TRANSMIT | OpFlags::RECV);
    let to_b = a.av.insert(std::slice::from_ref(&b.addr)).unwrap()[0];
    let to_a = if b_knows_a {
        b.av.insert(std::slice::from_ref(&a.addr)).unwrap()[0]
    } else {
        ADDR_NOTAVAIL
    };
    Pair {
        a,
        b,
        to_b,
        to_a,
        _domain: domain,
        _fabric: fabric,
    }
}

impl Pair {
    /// Posts a receive into `buf` at b with context `ctx`, then sends `msg` from a to
    /// b with context `ctx + 1` (the datagram is in b's receive, or b's error
    /// completion, when b's CQ is read).
    fn a_sends_to_b(&self, buf: &mut [u8], msg: &[u8], ctx: usize) {
        recv(&self.b.ep, buf, ctx).unwrap();
        send(&self.a.ep, msg, self.to_b, ctx + 1).unwrap();
    }
}

fn pair(caps: Caps) -> Pair {
    pair_with(&info(caps), OpFlags::TRANSMIT | OpFlags::RECV, true)
}

type Completion = Result<(CqDataEntry, u64), ofi::cq::CqError>;

/// The next completion of `cq` (with its source address) within [`WAIT`].
fn next(cq: &CompletionQueue) -> Option<Completion> {
    fixture::read_from_within(cq, WAIT)
}

fn ok(cq: &CompletionQueue, what: &str) -> (CqDataEntry, u64) {
    match next(cq) {
        Some(Ok(e)) => e,
        Some(Err(e)) => panic!("{what}: error completion {:?}", e),
        None => panic!("{what}: nothing within {WAIT:?}"),
    }
}

/// The next completion of `cq` must succeed, with context `ctx`, from source `src`.
fn expect_from(cq: &CompletionQueue, what: &str, ctx: usize, src: u64) {
    let (r, from) = ok(cq, what);
    assert_eq!(
        (r.op_context, from),
        (ctx, src),
        "{what}: context and source"
    );
}

fn err(cq: &CompletionQueue, what: &str) -> ofi::cq::CqError {
    match next(cq) {
        Some(Err(e)) => e,
        Some(Ok(e)) => panic!("{what}: expected an error, got {e:?}"),
        None => panic!("{what}: nothing within {WAIT:?}"),
    }
}

fn empty(cq: &CompletionQueue, what: &str) {
    let mut e = [CqDataEntry::default()];
    match cq.read(&mut e) {
        Err(x) => assert_eq!(x.code(), Errno::EAGAIN, "{what}: {x}"),
        Ok(n) => panic!("{what}: {n} unexpected completions: {:?}", e[0]),
    }
}

fn recv(ep: &Endpoint, buf: &mut [u8], ctx: usize) -> ofi::Result<()> {
    // Each test keeps `buf` alive until the receive completes or the endpoint is
    // dropped.
    ofi_conformance::fixture::post_recv(ep, buf, ctx)
}

fn send(ep: &Endpoint, buf: &[u8], dest: u64, ctx: usize) -> ofi::Result<()> {
    // SAFETY: `buf` lives across the call; the send completes before the call returns.
    unsafe { ep.send(buf.as_ptr(), buf.len(), std::ptr::null_mut(), dest, ctx) }
}

fn msg_of(iov: &[Iov], dest: u64, ctx: usize, data: u64) -> Msg {
    Msg {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null(),
        iov_count: iov.len(),
        addr: dest,
        context: ctx,
        data,
    }
}

/// `fi_sendmsg` of `payload` from `p`'s `a` to `b` with context `ctx`, CQ data `data`
/// and `flags`; panics when refused. udp has the bytes when the call returns.
fn sendmsg_a_to_b(p: &Pair, payload: &[u8], ctx: usize, data: u64, flags: OpFlags) {
    let iov = [Iov::from_slice(payload)];
    let m = msg_of(&iov, p.to_b, ctx, data);
    // SAFETY: `m`, its iov and `payload` live across the call, which copies the bytes.
    unsafe { p.a.ep.sendmsg(&m, flags.bits()) }
        .unwrap_or_else(|e| panic!("fi_sendmsg (context {ctx}): {e}"));
}

fn remote_cq_data(e: &CqDataEntry) -> bool {
    OpFlags::from_bits_retain(e.flags).contains(OpFlags::REMOTE_CQ_DATA)
}

#[test]
fn senddata_injectdata_and_sendmsg_carry_remote_cq_data() {
    let p = pair(Caps::MSG);
    let mut b1 = [0u8; 16];
    let mut b2 = [0u8; 16];
    let mut b3 = [0u8; 16];
    let mut b4 = [0u8; 16];
    recv(&p.b.ep, &mut b1, 1).unwrap();
    recv(&p.b.ep, &mut b2, 2).unwrap();
    recv(&p.b.ep, &mut b3, 3).unwrap();
    recv(&p.b.ep, &mut b4, 4).unwrap();
    // SAFETY: the buffer lives across the call.
    unsafe {
        p.a.ep
            .senddata(
                b"one".as_ptr(),
                3,
                std::ptr::null_mut(),
                0xdead_beef,
                p.to_b,
                11,
            )
            .unwrap();
    }
    p.a.ep.injectdata(b"two", u64::MAX, p.to_b).unwrap();
    sendmsg_a_to_b(&p, b"three", 13, 42, OpFlags::REMOTE_CQ_DATA);
    // Without the flag, msg.data is not sent.
    sendmsg_a_to_b(&p, b"three", 14, 43, OpFlags::empty());

    let (s, _) = ok(&p.a.cq, "senddata completion");
    assert_eq!(s.op_context, 11);
    assert!(!remote_cq_data(&s));
    ok(&p.a.cq, "sendmsg completion");
    ok(&p.a.cq, "sendmsg completion");
    empty(&p.a.cq, "injectdata has no completion");

    let (r, _) = ok(&p.b.cq, "first");
    assert_eq!((r.op_context, r.len, r.data), (1, 3, 0xdead_beef));
    assert!(remote_cq_data(&r));
    let (r, _) = ok(&p.b.cq, "second");
    assert_eq!((r.op_context, r.len, r.data), (2, 3, u64::MAX));
    assert!(remote_cq_data(&r));
    let (r, _) = ok(&p.b.cq, "third");
    assert_eq!((r.op_context, r.len, r.data), (3, 5, 42));
    let (r, _) = ok(&p.b.cq, "fourth");
    assert_eq!((r.op_context, r.len, r.data), (4, 5, 0));
    assert!(!remote_cq_data(&r));
    assert_eq!(&b1[..3], b"one");
    assert_eq!(&b2[..3], b"two");
    assert_eq!(&b3[..5], b"three");
}

#[test]
fn counters_count_sends_injects_receives_and_errors() {
    let p = pair(Caps::MSG);
    let mut bufs = [[0u8; 8]; 3];
    for (i, b) in bufs.iter_mut().enumerate() {
        recv(&p.b.ep, b, i).unwrap();
    }
    send(&p.a.ep, b"x", p.to_b, 1).unwrap();
    p.a.ep.inject(b"y", p.to_b).unwrap();
    send(&p.a.ep, &[7u8; 20], p.to_b, 2).unwrap(); // truncated at b: an error
    p.b.rx_cntr.wait(2, 2000).expect("two receives counted");
    let deadline = Instant::now() + WAIT;
    while p.b.rx_cntr.readerr().unwrap() < 1 {
        assert!(Instant::now() < deadline, "the truncation was not counted");
        std::thread::yield_now();
    }
    assert_eq!(p.a.tx_cntr.read().unwrap(), 3, "send, inject, send");
    assert_eq!(p.a.tx_cntr.readerr().unwrap(), 0);
    assert_eq!(p.b.rx_cntr.read().unwrap(), 2);
    assert_eq!(p.b.rx_cntr.readerr().unwrap(), 1);
    let e = p.b.rx_cntr.wait(3, 10).expect_err("no third success");
    assert!(matches!(e.code(), Errno::ETIMEDOUT | Errno::EAVAIL), "{e}");
}

#[test]
fn selective_completion_reports_only_flagged_operations() {
    let p = pair_with(
        &info(Caps::MSG),
        OpFlags::TRANSMIT | OpFlags::RECV | OpFlags::SELECTIVE_COMPLETION,
        true,
    );
    let mut b = [[0u8; 8]; 2];
    let (b0, b1) = b.split_at_mut(1);
    recv(&p.b.ep, &mut b0[0], 1).unwrap();
    recv(&p.b.ep, &mut b1[0], 2).unwrap();
    // No FI_COMPLETION in the endpoint's default op_flags: no completion.
    send(&p.a.ep, b"quiet", p.to_b, 10).unwrap();
    sendmsg_a_to_b(&p, b"loud", 11, 0, OpFlags::COMPLETION);
    let (e, _) = ok(&p.a.cq, "the flagged send");
    assert_eq!(e.op_context, 11);
    empty(&p.a.cq, "the unflagged send");
    assert_eq!(p.a.tx_cntr.read().unwrap(), 2, "counters count both");
    ok(&p.b.cq, "receive 1");
    ok(&p.b.cq, "receive 2");
}

/// a sends `n` datagrams of 90 bytes to b (the i-th filled with `i + 1`), each
/// completing at a: the pieces of the multi-receive tests.
fn a_sends_pieces(p: &Pair, n: u8) {
    for i in 0..n {
        send(&p.a.ep, &[i + 1; 90], p.to_b, i as usize).unwrap();
        ok(&p.a.cq, "send");
    }
}

#[test]
fn multi_recv_consumes_the_buffer_and_releases_it() {
    let p = pair(Caps::MSG | Caps::MULTI_RECV);
    let ep = &p.b.ep;
    let mut v = [0u8; 8];
    assert_eq!(
        ep.getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut v)
            .unwrap(),
        8
    );
    assert_eq!(usize::from_ne_bytes(v), 64, "the default");
    ep.setopt(
        FI_OPT_ENDPOINT,
        FI_OPT_MIN_MULTI_RECV,
        &100usize.to_ne_bytes(),
    )
    .unwrap();
    ep.getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut v)
        .unwrap();
    assert_eq!(usize::from_ne_bytes(v), 100);
    let e = ep
        .getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut [0u8; 4])
        .unwrap_err();
    assert_eq!(e.code(), Errno::ETOOSMALL);
    let e = ep
        .setopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &[1u8; 3])
        .unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert_eq!(
        ep.setopt(FI_OPT_ENDPOINT, 77, &[0u8; 8])
            .unwrap_err()
            .code(),
        Errno::ENOPROTOOPT
    );

    // 400 bytes, released when fewer than 100 are left.
    let mut big = vec![0u8; 400];
    // `big` outlives every completion read below.
    fixture::recvmsg(ep, &mut big, 0x77, OpFlags::MULTI_RECV).unwrap();
    let base = big.as_ptr() as usize;
    a_sends_pieces(&p, 4);
    for i in 0..4usize {
        let (e, _) = ok(&p.b.cq, "multi-recv piece");
        assert_eq!(e.op_context, 0x77);
        assert_eq!(e.len, 90);
        assert_eq!(e.buf as usize, base + 90 * i, "piece {i} placed in order");
        let released = OpFlags::from_bits_retain(e.flags).contains(OpFlags::MULTI_RECV);
        // After 4 × 90 = 360 bytes only 40 < 100 are left: the last piece releases.
        assert_eq!(released, i == 3, "FI_MULTI_RECV on piece {i}");
    }
    for i in 0..4usize {
        assert!(big[90 * i..90 * (i + 1)].iter().all(|&x| x == i as u8 + 1));
    }
    empty(&p.b.cq, "after the release");
}

/// `FI_MULTI_RECV` among the endpoint's receive `op_flags` makes a plain `fi_recv` a
/// multi-receive: datagrams fill one buffer one after another.
#[test]
fn multi_recv_as_a_default_receive_flag() {
    let mut i = info(Caps::MSG | Caps::MULTI_RECV);
    i.rx_attr.op_flags |= OpFlags::MULTI_RECV;
    let p = pair_with(&i, OpFlags::TRANSMIT | OpFlags::RECV, true);
    let mut big = vec![0u8; 400];
    // `big` outlives every completion read below.
    recv(&p.b.ep, &mut big, 0x33).unwrap();
    let base = big.as_ptr() as usize;
    a_sends_pieces(&p, 2);
    for i in 0..2usize {
        let (e, _) = ok(&p.b.cq, "multi-recv piece");
        assert_eq!((e.op_context, e.len), (0x33, 90));
        assert_eq!(e.buf as usize, base + 90 * i, "piece {i} placed in order");
    }
    assert!(big[..90].iter().all(|&x| x == 1) && big[90..180].iter().all(|&x| x == 2));
}

#[test]
fn multi_recv_releases_early_when_the_next_datagram_does_not_fit() {
    let p = pair(Caps::MSG | Caps::MULTI_RECV);
    let ep = &p.b.ep;
    ep.setopt(
        FI_OPT_ENDPOINT,
        FI_OPT_MIN_MULTI_RECV,
        &1usize.to_ne_bytes(),
    )
    .unwrap();
    let mut small = vec![0u8; 100];
    let mut next_buf = vec![0u8; 100];
    // Both buffers outlive the completions read below.
    fixture::recvmsg(ep, &mut small, 0x10, OpFlags::MULTI_RECV).unwrap();
    recv(ep, &mut next_buf, 0x20).unwrap();
    send(&p.a.ep, &[1; 60], p.to_b, 1).unwrap();
    send(&p.a.ep, &[2; 60], p.to_b, 2).unwrap();
    let (e, _) = ok(&p.b.cq, "first piece");
    assert_eq!((e.op_context, e.len), (0x10, 60));
    assert!(!OpFlags::from_bits_retain(e.flags).contains(OpFlags::MULTI_RECV));
    let (e, _) = ok(&p.b.cq, "release");
    assert_eq!((e.op_context, e.len), (0x10, 0));
    assert!(OpFlags::from_bits_retain(e.flags).contains(OpFlags::MULTI_RECV));
    let (e, _) = ok(&p.b.cq, "the next receive");
    assert_eq!((e.op_context, e.len), (0x20, 60));
    assert!(next_buf[..60].iter().all(|&x| x == 2));
}

#[test]
fn cancel_of_a_multi_recv_buffer() {
    let p = pair(Caps::MSG | Caps::MULTI_RECV);
    let mut big = vec![0u8; 256];
    // `big` outlives the cancel.
    fixture::recvmsg(&p.b.ep, &mut big, 0x5, OpFlags::MULTI_RECV).unwrap();
    p.b.ep.cancel(0x5).unwrap();
    let e = err(&p.b.cq, "cancelled");
    assert_eq!(e.err, Errno::ECANCELED);
    assert!(OpFlags::from_bits_retain(e.flags).contains(OpFlags::MULTI_RECV));
    // Two buffers for FI_MULTI_RECV: refused.
    let whole = fixture::iov_of(&mut big);
    let iov2 = [whole, whole];
    let m = msg_of(&iov2, ADDR_NOTAVAIL, 0x6, 0);
    // SAFETY: refused before anything is kept.
    let e = unsafe { p.b.ep.recvmsg(&m, OpFlags::MULTI_RECV.bits()) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
}

fn sock_addr(a: &Address) -> SocketAddr {
    a.socket_addr().expect("an IP address")
}

#[test]
fn malformed_datagrams_are_dropped_and_the_receive_stays_posted() {
    let p = pair(Caps::MSG);
    let mut buf = [0u8; 64];
    recv(&p.b.ep, &mut buf, 9).unwrap();
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sock_addr(&p.b.addr);
    let bad: [&[u8]; 5] = [
        b"",
        b"short",
        &[0u8; 32],
        &[0xd6, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2],
        &[0xd6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ];
    for b in bad {
        raw.send_to(b, to).unwrap();
    }
    // A well-formed datagram from the same socket after them: one socket's datagrams
    // to one receiver queue in order, so by the time it completes the receiver has
    // read (and dropped) every malformed one before it. No sleep: the good datagram's
    // completion is what says the bad ones were looked at.
    let mut good = vec![0xd6, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5];
    good.extend_from_slice(b"hello");
    raw.send_to(&good, to).unwrap();
    // The first completion is the good datagram's, into the receive posted before the
    // malformed ones: none of them completed it or produced an error entry.
    let (e, _) = ok(
        &p.b.cq,
        "the good datagram (first completion after the malformed)",
    );
    assert_eq!((e.op_context, e.len, e.data), (9, 5, 5));
    assert_eq!(&buf[..5], b"hello");
    // Everything sent has been read now: nothing else completed.
    empty(&p.b.cq, "after the malformed datagrams and the good one");
}

#[test]
fn size_limits_and_iov_limits() {
    let p = pair(Caps::MSG);
    let big = vec![1u8; MAX_MSG_SIZE + 1];
    let e = send(&p.a.ep, &big, p.to_b, 1).unwrap_err();
    assert_eq!(e.code(), Errno::EMSGSIZE);
    let e = p.a.ep.inject(&big, p.to_b).unwrap_err();
    assert_eq!(e.code(), Errno::EMSGSIZE);
    let half = vec![1u8; MAX_MSG_SIZE / 2 + 1];
    let iov = [Iov::from_slice(&half), Iov::from_slice(&half)];
    // SAFETY: the buffers live across the call.
    let e = unsafe { p.a.ep.sendv(iov.as_ptr(), std::ptr::null(), 2, p.to_b, 2) }.unwrap_err();
    assert_eq!(e.code(), Errno::EMSGSIZE);
    let five = [iov[0]; 5];
    // SAFETY: as above.
    let e = unsafe { p.a.ep.sendv(five.as_ptr(), std::ptr::null(), 5, p.to_b, 3) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "more than iov_limit buffers");
    let e = send(&p.a.ep, b"x", 12345, 4).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "destination not in the AV");
    empty(&p.a.cq, "after the refused sends");

    // A gathered send of four pieces arrives as one message.
    let parts: [&[u8]; 4] = [b"ab", b"", b"cde", b"f"];
    let iov = parts.map(Iov::from_slice);
    let mut r = [0u8; 8];
    recv(&p.b.ep, &mut r, 5).unwrap();
    // SAFETY: the buffers live across the call.
    unsafe { p.a.ep.sendv(iov.as_ptr(), std::ptr::null(), 4, p.to_b, 6) }.unwrap();
    let (e, _) = ok(&p.b.cq, "gathered");
    assert_eq!(e.len, 6);
    assert_eq!(&r[..6], b"abcdef");
}

#[test]
fn scatter_receive_into_several_buffers() {
    let p = pair(Caps::MSG);
    let (mut x, mut y) = ([0u8; 3], [0u8; 10]);
    let iov = [fixture::iov_of(&mut x), fixture::iov_of(&mut y)];
    // SAFETY: the buffers outlive the completion.
    unsafe {
        p.b.ep
            .recvv(iov.as_ptr(), std::ptr::null(), 2, ADDR_NOTAVAIL, 1)
            .unwrap()
    };
    send(&p.a.ep, b"scattered", p.to_b, 2).unwrap();
    let (e, _) = ok(&p.b.cq, "scatter");
    assert_eq!(e.len, 9);
    assert_eq!(&x, b"sca");
    assert_eq!(&y[..6], b"ttered");
}

#[test]
fn source_err_reports_unknown_senders_with_their_address() {
    let caps = Caps::MSG | Caps::SOURCE | Caps::SOURCE_ERR;
    let p = pair_with(&info(caps), OpFlags::TRANSMIT | OpFlags::RECV, false);
    let mut buf = [0u8; 16];
    p.a_sends_to_b(&mut buf, b"stranger", 3);
    let e = err(&p.b.cq, "unknown sender");
    assert_eq!(e.err, Errno::EADDRNOTAVAIL);
    assert_eq!(e.op_context, 3);
    assert_eq!(e.len, 8);
    assert_eq!(e.err_data, p.a.addr.to_bytes(), "the sender's address");
    assert_eq!(&buf[..8], b"stranger");
    // Once inserted, the sender is known.
    let fa = p.b.av.insert(std::slice::from_ref(&p.a.addr)).unwrap()[0];
    p.a_sends_to_b(&mut buf, b"friend", 5);
    expect_from(&p.b.cq, "known sender", 5, fa);
}

/// The source of a sender seen before (the endpoint remembers the last one) follows the
/// AV: removed, the sender is unknown again; inserted anew, it reports its new fabric
/// address.
#[test]
fn a_remembered_source_follows_the_av() {
    let caps = Caps::MSG | Caps::SOURCE | Caps::SOURCE_ERR;
    let p = pair(caps);
    let mut buf = [0u8; 16];
    for ctx in [3, 5] {
        p.a_sends_to_b(&mut buf, b"known", ctx);
        expect_from(&p.b.cq, "known sender", ctx, p.to_a);
    }
    p.b.av.remove(&[p.to_a], 0).unwrap();
    p.a_sends_to_b(&mut buf, b"removed", 7);
    let e = err(&p.b.cq, "removed sender");
    assert_eq!((e.err, e.op_context), (Errno::EADDRNOTAVAIL, 7));
    assert_eq!(e.err_data, p.a.addr.to_bytes());
    // A placeholder takes the old slot (table AVs reuse it); the sender comes back
    // at another fabric address.
    let other = p.b.av.insert(std::slice::from_ref(&p.b.addr)).unwrap()[0];
    let again = p.b.av.insert(std::slice::from_ref(&p.a.addr)).unwrap()[0];
    assert_ne!(again, other);
    p.a_sends_to_b(&mut buf, b"back", 9);
    expect_from(&p.b.cq, "re-inserted sender", 9, again);
}

#[test]
fn source_without_source_err_is_addr_notavail() {
    let p = pair_with(
        &info(Caps::MSG | Caps::SOURCE),
        OpFlags::TRANSMIT | OpFlags::RECV,
        false,
    );
    let mut buf = [0u8; 16];
    p.a_sends_to_b(&mut buf, b"who?", 3);
    expect_from(&p.b.cq, "unknown sender", 3, ADDR_NOTAVAIL);
}

#[test]
fn ipv6_and_addr_str_exchange_with_source() {
    for format in [AddrFormat::SOCKADDR_IN6, AddrFormat::STR] {
        let i = info_with(format, Caps::MSG | Caps::SOURCE, Progress::Unspec);
        assert_eq!(i.addr_format, format);
        let p = pair_with(&i, OpFlags::TRANSMIT | OpFlags::RECV, true);
        // No address asked for: the first up non-loopback interface's (loopback only
        // on a host without one).
        let v4 = ofi_kit::netif::default_ip(false);
        let v6 = ofi_kit::netif::default_ip(true);
        match (&p.b.addr, format) {
            (Address::Inet6(a), AddrFormat::SOCKADDR_IN6) => {
                assert_eq!(std::net::IpAddr::V6(*a.ip()), v6)
            }
            (Address::Str(s), AddrFormat::STR) => {
                assert!(s.starts_with(&format!("fi_sockaddr_in://{v4}:")), "{s}")
            }
            (a, f) => panic!("{f}: unexpected address {a:?}"),
        }
        let mut buf = [0u8; 16];
        p.a_sends_to_b(&mut buf, b"v6", 1);
        let (r, src) = ok(&p.b.cq, "receive");
        assert_eq!(r.len, 2);
        assert_eq!(src, p.to_a, "{format}: the sender's fabric address");
    }
}

#[test]
fn getinfo_resolves_ipv6_node_and_source_port() {
    let mut h = Info::hints();
    h.addr_format = AddrFormat::SOCKADDR_IN6;
    h.fabric_attr.prov_name = Some("udp".into());
    let infos = registry()
        .getinfo(&GetinfoRequest {
            node: Some("::1".into()),
            service: Some("4791".into()),
            hints: Some(h.clone()),
            ..GetinfoRequest::new(API_VERSION)
        })
        .unwrap();
    assert_eq!(
        infos[0].dest_addr,
        Some(Address::Inet6("[::1]:4791".parse().unwrap()))
    );
    // FI_SOURCE: the endpoint binds to the given port.
    let port = {
        let s = UdpSocket::bind("[::1]:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let infos = registry()
        .getinfo(&GetinfoRequest {
            node: Some("::1".into()),
            service: Some(port.to_string()),
            flags: GetinfoFlags::SOURCE,
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .unwrap();
    let i = &infos[0];
    let fabric = registry().open_fabric(i).unwrap();
    let domain = fabric.domain(i).unwrap();
    let ep = domain.endpoint(i).unwrap();
    let name = Address::from_bytes(i.addr_format, &ep.getname().unwrap()).unwrap();
    assert_eq!(
        name,
        Address::Inet6(format!("[::1]:{port}").parse().unwrap())
    );
}

#[test]
fn setname_rebinds_before_enable_only() {
    let i = info(Caps::MSG);
    let fabric = registry().open_fabric(&i).unwrap();
    let domain = fabric.domain(&i).unwrap();
    let ep = domain.endpoint(&i).unwrap();
    let port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let want = Address::Inet(format!("127.0.0.1:{port}").parse().unwrap());
    ep.setname(&want.to_bytes()).unwrap();
    assert_eq!(
        Address::from_bytes(i.addr_format, &ep.getname().unwrap()).unwrap(),
        want
    );
    let e = ep.setname(&[1, 2, 3]).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    let cq = domain.cq_open(&CqAttr::default()).unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    // Enable needs an AV and a CQ.
    assert_eq!(ep.enable().unwrap_err().code(), Errno::ENOAV);
    ep.bind_av(&av).unwrap();
    assert_eq!(ep.enable().unwrap_err().code(), Errno::ENOCQ);
    assert_eq!(
        ep.bind(&cq, OpFlags::REMOTE_WRITE).unwrap_err().code(),
        Errno::EBADFLAGS
    );
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    assert_eq!(
        ep.bind(&cq, OpFlags::RECV).unwrap_err().code(),
        Errno::EINVAL,
        "a second receive CQ"
    );
    ep.enable().unwrap();
    assert_eq!(
        ep.setname(&want.to_bytes()).unwrap_err().code(),
        Errno::EOPBADSTATE
    );
    assert_eq!(
        ep.bind(&cq, OpFlags::RECV).unwrap_err().code(),
        Errno::EOPBADSTATE
    );
}

#[test]
fn auto_progress_completes_without_reads() {
    let i = info_with(AddrFormat::SOCKADDR_IN, Caps::MSG, Progress::Auto);
    assert_eq!(i.domain_attr.data_progress, Progress::Auto);
    let p = pair_with(&i, OpFlags::TRANSMIT | OpFlags::RECV, true);
    let mut buf = [0u8; 16];
    p.a_sends_to_b(&mut buf, b"auto", 1);
    // Nobody reads b's CQ: the progress thread must fill the receive.
    let deadline = Instant::now() + WAIT;
    let seen = |b: &[u8; 16]| {
        // SAFETY: a volatile read of our own live array: the progress thread writes it
        // behind the compiler's back, so it must be re-read every time.
        unsafe { std::ptr::read_volatile(b.as_ptr().cast::<[u8; 4]>()) }
    };
    while seen(&buf) != *b"auto" {
        assert!(
            Instant::now() < deadline,
            "no auto progress within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut e = [CqDataEntry::default()];
    assert_eq!(p.b.cq.sread(&mut e, 2000).unwrap(), 1);
    assert_eq!(e[0].op_context, 1);
}

#[test]
fn rx_queue_is_bounded_and_size_left_reports_it() {
    let p = pair(Caps::MSG);
    let left = p.b.ep.rx_size_left().unwrap();
    assert_eq!(left, 1024);
    let mut bufs = vec![[0u8; 1]; left + 1];
    for (i, b) in bufs.iter_mut().enumerate().take(left) {
        recv(&p.b.ep, b, i).unwrap();
    }
    assert_eq!(p.b.ep.rx_size_left().unwrap(), 0);
    let e = recv(&p.b.ep, &mut bufs[left], left).unwrap_err();
    assert_eq!(e.code(), Errno::EAGAIN);
    p.b.ep.cancel(0).unwrap();
    assert_eq!(p.b.ep.rx_size_left().unwrap(), 1);
}

#[test]
fn sread_with_manual_progress_wakes_on_arrival() {
    let p = pair(Caps::MSG);
    let mut buf = [0u8; 16];
    recv(&p.b.ep, &mut buf, 1).unwrap();
    let mut e = [CqDataEntry::default()];
    let t0 = Instant::now();
    let r = p.b.cq.sread(&mut e, 30).unwrap_err();
    assert_eq!(r.code(), Errno::EAGAIN, "nothing sent yet: time-out");
    assert!(
        t0.elapsed() >= Duration::from_millis(25),
        "{:?}",
        t0.elapsed()
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            send(&p.a.ep, b"late", p.to_b, 2).unwrap();
        });
        assert_eq!(p.b.cq.sread(&mut e, 2000).unwrap(), 1);
    });
    assert_eq!((e[0].op_context, e[0].len), (1, 4));
    assert_eq!(&buf[..4], b"late");
}

/// Wait until `fd` is readable (bounded), without touching the object it belongs to.
fn fd_readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    n == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn wait_fds_become_readable_with_manual_progress() {
    // The CQ and counters of `pair` have FI_WAIT_UNSPEC, which is a wait fd here.
    let p = pair(Caps::MSG);
    let cq_fd = p.b.cq.wait_fd().expect("a CQ wait fd");
    let cntr_fd = p.b.rx_cntr.wait_fd().expect("a counter wait fd");
    assert!(!fd_readable(cq_fd, 0));
    // No receive posted: a datagram waits in the socket and nothing becomes readable.
    send(&p.a.ep, b"early", p.to_b, 1).unwrap();
    assert!(!fd_readable(cq_fd, 100), "no receive posted yet");
    // Posting one lets the watcher take it; nobody reads the CQ before the fd says so.
    let mut buf = [0u8; 16];
    recv(&p.b.ep, &mut buf, 2).unwrap();
    assert!(fd_readable(cq_fd, 2000), "CQ wait fd after the datagram");
    assert!(
        fd_readable(cntr_fd, 2000),
        "counter wait fd after the datagram"
    );
    let (e, _) = ok(&p.b.cq, "early");
    assert_eq!((e.op_context, e.len), (2, 5));
    assert!(!fd_readable(cq_fd, 0), "read: not readable any more");
    // Again, with the datagram arriving while the fd is being waited for.
    recv(&p.b.ep, &mut buf, 3).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            send(&p.a.ep, b"late", p.to_b, 4).unwrap();
        });
        assert!(
            fd_readable(cq_fd, 2000),
            "CQ wait fd after the late datagram"
        );
    });
    let (e, _) = ok(&p.b.cq, "late");
    assert_eq!((e.op_context, e.len), (3, 4));
}

/// The kernel's UDP sockets of this host as (local, remote) pairs, from
/// /proc/net/udp{,6} (an unconnected socket's remote is the unspecified address,
/// port 0). Each socket counts once, by its inode: the kernel's listing is read in
/// pieces, and a socket added to a hash bucket between two reads (other tests run
/// meanwhile) can make it print a socket of that bucket twice.
fn kernel_udp_sockets() -> Vec<(SocketAddr, SocketAddr)> {
    fn parse(field: &str) -> Option<SocketAddr> {
        let (ip, port) = field.split_once(':')?;
        let port = u16::from_str_radix(port, 16).ok()?;
        let ip: std::net::IpAddr = match ip.len() {
            // The address as the kernel's 32-bit words, each printed in host order.
            8 => std::net::Ipv4Addr::from(u32::from_str_radix(ip, 16).ok()?.to_le_bytes()).into(),
            32 => {
                let mut b = [0u8; 16];
                for (i, w) in b.chunks_mut(4).enumerate() {
                    let v = u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16).ok()?;
                    w.copy_from_slice(&v.to_le_bytes());
                }
                std::net::Ipv6Addr::from(b).into()
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    }
    let mut by_inode = std::collections::BTreeMap::new();
    for f in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            // sl, local, remote, st, tx:rx, tr:tm, retrnsmt, uid, timeout, inode, ...
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(l), Some(r), Some(inode)) = (
                fields.get(1).and_then(|f| parse(f)),
                fields.get(2).and_then(|f| parse(f)),
                fields.get(9).and_then(|f| f.parse::<u64>().ok()),
            ) else {
                continue;
            };
            by_inode.insert(inode, (l, r));
        }
    }
    by_inode.into_values().collect()
}

/// How many sockets bound to `local` are connected to `remote`.
fn connected_sockets(local: &Address, remote: &Address) -> usize {
    let (l, r) = (sock_addr(local), sock_addr(remote));
    kernel_udp_sockets()
        .iter()
        .filter(|(kl, kr)| kl == &l && kr == &r)
        .count()
}

/// A send to a unicast peer makes one connected socket on the endpoint's port
/// (FI_UDP_PEER_SOCKETS defaults to 1); the peer's replies arrive through it with
/// their FI_SOURCE address; a third endpoint still reaches the endpoint's own socket,
/// and nobody else can bind that port.
#[test]
fn peer_socket_carries_a_conversation_and_others_still_arrive() {
    for format in [AddrFormat::SOCKADDR_IN, AddrFormat::SOCKADDR_IN6] {
        let i = info_with(format, Caps::MSG | Caps::SOURCE, Progress::Unspec);
        let p = pair_with(&i, OpFlags::TRANSMIT | OpFlags::RECV, true);
        assert_eq!(
            connected_sockets(&p.a.addr, &p.b.addr),
            0,
            "{format}: none yet"
        );
        let mut buf = [0u8; 16];
        for round in 0..20u8 {
            p.a_sends_to_b(&mut buf, &[round; 3], 1);
            let (r, src) = ok(&p.b.cq, "b's receive");
            assert_eq!((r.len, src, buf[0]), (3, p.to_a, round), "{format}");
            ok(&p.a.cq, "a's send");
            recv(&p.a.ep, &mut buf, 3).unwrap();
            send(&p.b.ep, &[round; 5], p.to_a, 4).unwrap();
            let (r, src) = ok(&p.a.cq, "a's receive");
            assert_eq!((r.len, src, buf[0]), (5, p.to_b, round), "{format}");
            ok(&p.b.cq, "b's send");
        }
        assert_eq!(connected_sockets(&p.a.addr, &p.b.addr), 1, "{format}: a's");
        assert_eq!(connected_sockets(&p.b.addr, &p.a.addr), 1, "{format}: b's");
        // A third endpoint, unknown to a's AV, reaches a's own socket.
        let fabric = registry().open_fabric(&i).unwrap();
        let domain = fabric.domain(&i).unwrap();
        let c = peer(&domain, &i, OpFlags::TRANSMIT | OpFlags::RECV);
        let to_a = c.av.insert(std::slice::from_ref(&p.a.addr)).unwrap()[0];
        recv(&p.a.ep, &mut buf, 5).unwrap();
        send(&c.ep, b"third", to_a, 6).unwrap();
        let (r, src) = ok(&p.a.cq, "from the third endpoint");
        assert_eq!((r.len, src, &buf[..5]), (5, ADDR_NOTAVAIL, &b"third"[..]));
        // The port stays a's: another endpoint cannot bind it.
        let mut i2 = i.clone();
        i2.src_addr = Some(p.a.addr.clone());
        let e = domain.endpoint(&i2).unwrap_err();
        assert_eq!(e.code(), Errno::EADDRINUSE, "{format}: {e}");
        // b's replies keep arriving after c's datagram (through the peer socket).
        for round in 0..5u8 {
            recv(&p.a.ep, &mut buf, 7).unwrap();
            send(&p.b.ep, &[round; 2], p.to_a, 8).unwrap();
            let (r, src) = ok(&p.a.cq, "a's receive after c");
            assert_eq!((r.len, src, buf[0]), (2, p.to_b, round));
            ok(&p.b.cq, "b's send");
        }
    }
}

/// A peer that went away: its port answers with ICMP "port unreachable", which a
/// connected socket reports on a later call. Sends to it still succeed (the datagrams
/// are lost, as through an unconnected socket), and the endpoint keeps receiving.
#[test]
fn a_vanished_peer_costs_no_errors() {
    let p = pair(Caps::MSG);
    let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
    let gone_addr = Address::Inet(match gone.local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(_) => unreachable!("bound to 127.0.0.1"),
    });
    drop(gone);
    let to_gone = p.a.av.insert(std::slice::from_ref(&gone_addr)).unwrap()[0];
    // Each send's completion is read before the next send. On loopback the ICMP answer
    // to a datagram is normally queued on the socket before its send returns, so later
    // sends meet the pending error; what is asserted (every send succeeds, one
    // connected socket) does not depend on when it arrives, so nothing waits for it.
    for i in 0..10 {
        send(&p.a.ep, b"anyone?", to_gone, 100 + i).unwrap();
        ok(&p.a.cq, "send to a closed port");
    }
    // One connected socket, made by the first send and kept through the errors.
    assert_eq!(connected_sockets(&p.a.addr, &gone_addr), 1);
    let mut buf = [0u8; 8];
    recv(&p.a.ep, &mut buf, 1).unwrap();
    send(&p.b.ep, b"still", p.to_a, 2).unwrap();
    let (r, _) = ok(&p.a.cq, "a still receives");
    assert_eq!(&buf[..r.len], b"still");
}
