//! Messages on connectionless endpoints (`FI_EP_DGRAM`, `FI_EP_RDM`): to self and to a
//! second endpoint, payload integrity, size limits (`FI_EMSGSIZE`), truncation
//! (`FI_ETRUNC` with `olen`), cancel (`FI_ECANCELED`), inject limits, data calls before
//! `fi_enable`, and `FI_SOURCE` (with `FI_AV_USER_ID` ids).
//!
//! Receive buffers are kept alive until their completion has been read, or until the
//! endpoint is closed.

use ofi::abi::raw::CqMsgEntry;
use ofi::{EpType, Errno, GetinfoFlags, OpFlags};

use crate::fixture::expect_errno;
use crate::fixture::{self, assert_empty, pattern, post_recv, send, wait_err, wait_ok, Fixture};
use crate::Subject;

const RECV_FLAGS: OpFlags = OpFlags::RECV.union(OpFlags::MSG);
const SEND_FLAGS: OpFlags = OpFlags::SEND.union(OpFlags::MSG);

fn check_send_completion(e: &CqMsgEntry, context: usize) {
    assert_eq!(e.op_context, context, "send completion context");
    assert!(
        OpFlags::from_bits_retain(e.flags).contains(SEND_FLAGS),
        "send completion flags {:#x} lack FI_SEND | FI_MSG",
        e.flags
    );
}

/// Send `payload` from peer `from` to peer `to` of `f` and check what arrives.
pub(crate) fn exchange(f: &Fixture, from: usize, to: usize, payload: &[u8], ctx: usize) {
    let (a, b) = (&f.peers[from], &f.peers[to]);
    let mut buf = vec![0u8; payload.len() + 8];
    post_recv(&b.ep, &mut buf, ctx + 1).unwrap_or_else(|e| panic!("fi_recv: {e}"));
    send(&a.ep, payload, f.fi_addrs[to], ctx)
        .unwrap_or_else(|e| panic!("fi_send of {} bytes: {e}", payload.len()));
    if from == to {
        // One CQ sees both completions; the send's comes first or second.
        let x = wait_ok(&a.cq, "first completion");
        let y = wait_ok(&a.cq, "second completion");
        let (s_c, r_c) = if x.op_context == ctx { (x, y) } else { (y, x) };
        check_send_completion(&s_c, ctx);
        check_recv(&r_c, ctx + 1, payload, &buf);
    } else {
        check_send_completion(&wait_ok(&a.cq, "send completion"), ctx);
        let r = wait_ok(&b.cq, "receive completion");
        check_recv(&r, ctx + 1, payload, &buf);
    }
}

fn check_recv(e: &CqMsgEntry, ctx: usize, payload: &[u8], buf: &[u8]) {
    assert_eq!(e.op_context, ctx, "receive completion context");
    assert!(
        OpFlags::from_bits_retain(e.flags).contains(RECV_FLAGS),
        "receive completion flags {:#x} lack FI_RECV | FI_MSG",
        e.flags
    );
    assert_eq!(e.len, payload.len(), "received length");
    assert!(
        buf[..payload.len()] == *payload,
        "payload of {} bytes corrupted",
        payload.len()
    );
    assert!(
        buf[payload.len()..].iter().all(|&b| b == 0),
        "bytes written past the message"
    );
}

/// An endpoint sends to itself (its own address in its AV).
pub fn msg_send_to_self(s: &Subject) {
    let f = Fixture::new(s, 1);
    exchange(&f, 0, 0, b"to myself", 0x100);
    assert_empty(&f.peers[0].cq, "after the exchange");
}

/// Sizes 0, 1, 64, 4096 and `max_msg_size` (capped at [`BIG`](super::pairs::BIG), as
/// the pair checks do: a 256 MiB message in a debug build outlasts any bounded wait)
/// arrive intact at a second endpoint.
pub fn msg_payload_sizes_to_second_endpoint(s: &Subject) {
    let f = Fixture::new(s, 2);
    let max = f.info.ep_attr.max_msg_size.min(super::pairs::BIG);
    for (i, len) in [0, 1, 64, 4096, max].into_iter().enumerate() {
        if len > max {
            continue;
        }
        exchange(&f, 0, 1, &pattern(len, i as u8 + 1), 0x200 + 4 * i);
    }
    exchange(&f, 1, 0, b"and back", 0x300);
    assert_empty(&f.peers[0].cq, "after the exchanges");
    assert_empty(&f.peers[1].cq, "after the exchanges");
}

/// A send larger than `max_msg_size` is `FI_EMSGSIZE` and generates no completion.
pub fn msg_larger_than_max_is_emsgsize(s: &Subject) {
    let f = Fixture::new(s, 2);
    let max = f.info.ep_attr.max_msg_size;
    let big = vec![7u8; max + 1];
    expect_errno(
        send(&f.peers[0].ep, &big, f.fi_addrs[1], 1),
        Errno::EMSGSIZE,
        "a message over max_msg_size",
    );
    assert_empty(&f.peers[0].cq, "after the refused send");
    assert_empty(&f.peers[1].cq, "after the refused send");
}

/// A receive buffer smaller than the message: an error completion `FI_ETRUNC` with
/// `olen` = the bytes that did not fit, and the endpoint keeps working.
pub fn msg_recv_too_small_is_etrunc(s: &Subject) {
    let f = Fixture::new(s, 2);
    let (a, b) = (&f.peers[0], &f.peers[1]);
    let mut small = [0u8; 16];
    post_recv(&b.ep, &mut small, 0x51).unwrap();
    let payload = pattern(64, 9);
    send(&a.ep, &payload, f.fi_addrs[1], 0x50).unwrap();
    check_send_completion(&wait_ok(&a.cq, "send completion"), 0x50);
    let ee = wait_err(&b.cq, "truncated receive");
    assert_eq!(Errno(ee.err), Errno::ETRUNC, "error code");
    assert_eq!(ee.op_context, 0x51);
    assert_eq!(ee.olen, 64 - 16, "olen");
    assert!(small[..] == payload[..16], "the part that fit");
    exchange(&f, 0, 1, b"still fine", 0x60);
}

/// A posted receive cancelled: an error completion `FI_ECANCELED` with its context;
/// cancelling it again finds nothing (`FI_ENOENT`), and nothing else completes.
pub fn msg_cancel_posted_recv_is_ecanceled(s: &Subject) {
    let f = Fixture::new(s, 1);
    let p = &f.peers[0];
    let mut buf = [0u8; 32];
    post_recv(&p.ep, &mut buf, 0x77).unwrap();
    p.ep.cancel(0x77)
        .unwrap_or_else(|e| panic!("fi_cancel: {e}"));
    let ee = wait_err(&p.cq, "cancelled receive");
    assert_eq!(Errno(ee.err), Errno::ECANCELED, "error code");
    assert_eq!(ee.op_context, 0x77);
    expect_errno(p.ep.cancel(0x77), Errno::ENOENT, "nothing left to cancel");
    assert_empty(&p.cq, "after the cancel");
    // The buffer is free again: a message now goes nowhere near it.
    exchange(&f, 0, 0, b"after cancel", 0x80);
    assert!(buf.iter().all(|&b| b == 0));
}

/// Data calls on an endpoint that is not enabled fail with the provider's documented
/// error ([`crate::Expectations::data_before_enable`]).
pub fn msg_data_call_before_enable(s: &Subject) {
    let info = fixture::msg_info(s);
    let (_fabric, domain) = fixture::open_domain(s, &info);
    let (ep, _cq, av) = fixture::unenabled_peer(&domain, &info);
    let me = fixture::name_of(&ep, &info);
    let dest = av.insert(&[me]).unwrap()[0];
    let want = s.expect.data_before_enable;
    let mut buf = [0u8; 8];
    let e = post_recv(&ep, &mut buf, 1).expect_err("fi_recv before fi_enable");
    assert_eq!(e.code(), want, "fi_recv: {e}");
    let e = send(&ep, b"x", dest, 2).expect_err("fi_send before fi_enable");
    assert_eq!(e.code(), want, "fi_send: {e}");
    let e = ep
        .inject(b"x", dest)
        .expect_err("fi_inject before fi_enable");
    assert_eq!(e.code(), want, "fi_inject: {e}");
}

/// `FI_SOURCE`: `fi_cq_readfrom` reports the sender's fabric address.
pub fn msg_source_address(s: &Subject) {
    let info = fixture::msg_info_with(s, ofi::Caps::MSG | ofi::Caps::SOURCE);
    assert!(
        info.caps.contains(ofi::Caps::SOURCE),
        "asked for FI_SOURCE, got {}",
        info.caps
    );
    let f = Fixture::with_info(s, info, 2);
    let (a, b) = (&f.peers[0], &f.peers[1]);
    let mut buf = [0u8; 16];
    post_recv(&b.ep, &mut buf, 5).unwrap();
    send(&a.ep, b"who", f.fi_addrs[1], 6).unwrap();
    wait_ok(&a.cq, "send completion");
    let (e, src) = read_from(&b.cq);
    assert_eq!(e.op_context, 5);
    assert_eq!(src, f.fi_addrs[0], "the sender's fabric address");
}

/// `FI_AV_USER_ID`: a peer inserted with a user id (`fi_av_insert` with
/// `FI_AV_USER_ID`, the ids in the `fi_addr` array on input) is reported by
/// `fi_cq_readfrom` as that id, not by its fabric address, which the insert still
/// returns and which still names it in sends and (with `FI_DIRECTED_RECV`) in
/// directed receives.
pub fn msg_source_user_id(s: &Subject) {
    const ID: u64 = 0x5eed_0001;
    let caps = ofi::Caps::MSG | ofi::Caps::SOURCE | ofi::Caps::AV_USER_ID;
    // With directed receives too, where the provider has them (a primary capability:
    // only given when asked for).
    let directed = caps | ofi::Caps::DIRECTED_RECV;
    let caps = if s.claimed().types_with(directed).is_empty() {
        caps
    } else {
        directed
    };
    let info = fixture::msg_info_with(s, caps);
    assert!(
        info.caps.contains(caps),
        "asked for {caps}, got {}",
        info.caps
    );
    let f = Fixture::with_info(s, info, 1);
    let b = &f.peers[0];
    // A second endpoint, inserted into b's AV with a user id.
    let (c_ep, c_cq, c_av) = fixture::enabled_peer(&f.domain, &f.info);
    let c_addr = fixture::name_of(&c_ep, &f.info);
    let mut fi_addr = [ID];
    let n =
        b.av.insert_into(
            std::slice::from_ref(&c_addr),
            &mut fi_addr,
            ofi::Caps::AV_USER_ID.bits(),
            0,
        )
        .unwrap_or_else(|e| panic!("fi_av_insert with FI_AV_USER_ID: {e}"));
    assert_eq!(n, 1, "one address inserted");
    assert_ne!(
        fi_addr[0],
        ofi::ADDR_NOTAVAIL,
        "the insert returns a fabric address"
    );
    let b_at_c = c_av.insert(std::slice::from_ref(&b.addr)).unwrap()[0];
    let mut buf = [0u8; 16];
    post_recv(&b.ep, &mut buf, 7).unwrap();
    send(&c_ep, b"id?", b_at_c, 8).unwrap();
    wait_ok(&c_cq, "send completion");
    let (e, src) = read_from(&b.cq);
    assert_eq!(e.op_context, 7);
    assert_eq!(
        src, ID,
        "the user id given at insert, not the fabric address"
    );
    if f.info.caps.contains(ofi::Caps::DIRECTED_RECV) {
        // A receive naming the peer by its fabric address takes its message (matching
        // uses fabric addresses); the completion still reports the id.
        let mut directed = [0u8; 16];
        fixture::post_recv_from(&b.ep, &mut directed, fi_addr[0], 11)
            .unwrap_or_else(|e| panic!("fi_recv from one source: {e}"));
        send(&c_ep, b"dir", b_at_c, 12).unwrap();
        wait_ok(&c_cq, "send completion");
        let (e, src) = read_from(&b.cq);
        assert_eq!(
            (e.op_context, src),
            (11, ID),
            "the directed receive, reported by id"
        );
    }
    // b reaches c by its fabric address.
    let mut back = [0u8; 16];
    post_recv(&c_ep, &mut back, 9).unwrap();
    send(&b.ep, b"yes", fi_addr[0], 10).unwrap();
    wait_ok(&b.cq, "send to the user-id peer");
    assert_eq!(wait_ok(&c_cq, "reply").op_context, 9);
    assert_eq!(&back[..3], b"yes");
}

/// One completion read with `fi_cq_readfrom`, waited for up to [`crate::WAIT`].
fn read_from(cq: &ofi::cq::CompletionQueue) -> (CqMsgEntry, u64) {
    let deadline = std::time::Instant::now() + crate::WAIT;
    let mut e = [CqMsgEntry::default()];
    let mut src = [0u64];
    loop {
        match cq.readfrom(&mut e, &mut src) {
            Ok(1) => return (e[0], src[0]),
            Ok(n) => panic!("fi_cq_readfrom of one entry returned {n}"),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => panic!("fi_cq_readfrom: {err}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no completion within {:?}",
            crate::WAIT
        );
        std::thread::yield_now();
    }
}

/// `FI_EP_DGRAM` results: asking for them gives only datagram endpoints, which open.
pub fn dgram_ep_type_results(s: &Subject) {
    let r = s
        .getinfo_with(
            Some(s.base_hints().with_ep_type(EpType::Dgram)),
            GetinfoFlags::empty(),
        )
        .unwrap_or_else(|e| panic!("getinfo FI_EP_DGRAM: {e}"));
    for info in &r {
        assert_eq!(info.ep_type(), EpType::Dgram);
        let (_fabric, domain) = fixture::open_domain(s, info);
        domain
            .endpoint(info)
            .unwrap_or_else(|e| panic!("fi_endpoint (FI_EP_DGRAM): {e}"));
    }
}

/// `fi_inject` of up to `inject_size` bytes arrives and generates no send completion;
/// one byte more is `FI_EMSGSIZE`.
pub fn inject_up_to_inject_size(s: &Subject) {
    let f = Fixture::new(s, 2);
    let (a, b) = (&f.peers[0], &f.peers[1]);
    let max = f.info.tx_attr.inject_size;
    for (i, len) in [0, 1, max].into_iter().enumerate() {
        let payload = pattern(len, 40 + i as u8);
        let mut buf = vec![0u8; len + 8];
        post_recv(&b.ep, &mut buf, 0x90 + i).unwrap();
        a.ep.inject(&payload, f.fi_addrs[1])
            .unwrap_or_else(|e| panic!("fi_inject of {len} bytes: {e}"));
        check_recv(
            &wait_ok(&b.cq, "injected message"),
            0x90 + i,
            &payload,
            &buf,
        );
    }
    assert_empty(&a.cq, "fi_inject generates no completion");
    let e =
        a.ep.inject(&vec![1u8; max + 1], f.fi_addrs[1])
            .expect_err("an inject over inject_size");
    assert_eq!(e.code(), Errno::EMSGSIZE, "{e}");
    assert_empty(&a.cq, "after the refused inject");
    assert_empty(&b.cq, "after the refused inject");
}

/// `FI_EP_RDM` loopback (fabtests `loopback`): one endpoint sends messages of several
/// sizes to its own address and receives them intact.
pub fn rdm_send_to_self(s: &Subject) {
    let info = crate::pair::info_for(s, EpType::Rdm, ofi::Caps::MSG)
        .expect("an FI_EP_RDM result with FI_MSG");
    let max = info.ep_attr.max_msg_size.min(1 << 16);
    let f = Fixture::with_info(s, info, 1);
    for (i, len) in [0usize, 1, 100, max].into_iter().enumerate() {
        exchange(&f, 0, 0, &pattern(len, 7 + i as u8), 0x700 + 4 * i);
    }
    assert_empty(&f.peers[0].cq, "after the loopback exchanges");
}
