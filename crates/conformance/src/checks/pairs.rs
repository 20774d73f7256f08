//! Messages between the two endpoints of a pair, on every endpoint type the provider
//! offers with `FI_MSG` (see [`crate::pair`]): sizes 0 to `max_msg_size` with
//! integrity in both directions, unexpected messages (reliable types), remote CQ data,
//! inject and `FI_INJECT_COMPLETE`, selective completion, cancel, and bad input.
//!
//! Buffers stay alive until their completion has been read or the pair is gone.

use std::ffi::c_void;

use ofi::abi::raw::Iov;
use ofi::{Caps, EpType, Errno, OpFlags};

use crate::fixture::expect_errno;
use crate::fixture::{iov_of, pattern, post_recv, recvmsg, send, sendmsg};
use crate::pair::{assert_flags, each_pair, each_pair_spec, each_pair_where, show, Pair};
use crate::Subject;

/// The largest message a check sends (bigger `max_msg_size` values are capped here).
pub const BIG: usize = 4 << 20;

const RECV_FLAGS: OpFlags = OpFlags::RECV.union(OpFlags::MSG);
const SEND_FLAGS: OpFlags = OpFlags::SEND.union(OpFlags::MSG);

/// Send `payload` from side `from` to the other side and check what arrives.
pub fn exchange(p: &Pair, from: usize, payload: &[u8], ctx: usize) {
    let (tx, rx) = (p.side(from), p.side(1 - from));
    let mut buf = vec![0u8; payload.len() + 8];
    post_recv(&rx.ep, &mut buf, ctx + 1).unwrap_or_else(|e| panic!("fi_recv: {e}"));
    send(&tx.ep, payload, tx.peer, ctx)
        .unwrap_or_else(|e| panic!("fi_send of {} bytes: {e} ({})", payload.len(), e.code()));
    let s = p.wait_ok(from, "send completion");
    assert_eq!(s.op_context, ctx, "send completion context");
    assert_flags(&s, SEND_FLAGS, "send completion");
    let r = p.wait_ok(1 - from, &format!("receive of {} bytes", payload.len()));
    check_recv(&r, ctx + 1, payload, &buf);
}

/// Check a receive completion and the buffer it filled.
pub fn check_recv(e: &ofi::abi::raw::CqTaggedEntry, ctx: usize, payload: &[u8], buf: &[u8]) {
    assert_eq!(
        e.op_context,
        ctx,
        "receive completion context ({})",
        show(e)
    );
    assert_flags(e, RECV_FLAGS, "receive completion");
    assert_eq!(e.len, payload.len(), "received length");
    if let Some(i) = (0..payload.len()).find(|&i| buf[i] != payload[i]) {
        panic!(
            "payload of {} bytes corrupted from byte {i}: {:#04x} instead of {:#04x}",
            payload.len(),
            buf[i],
            payload[i]
        );
    }
    assert!(
        buf[payload.len()..].iter().all(|&b| b == 0),
        "bytes written past the message"
    );
}

fn sizes(max: usize) -> Vec<usize> {
    let top = max.min(BIG);
    let mut v: Vec<usize> = [0, 1, 7, 64, 1000, 4096, 8193, 65536, 1 << 20]
        .into_iter()
        .filter(|&n| n <= top)
        .collect();
    if !v.contains(&top) {
        v.push(top);
    }
    v
}

/// Sizes 0, 1, … up to `max_msg_size` (capped at [`BIG`]) arrive intact, in both
/// directions, on every endpoint type with `FI_MSG`.
pub fn pair_msg_sizes_both_ways(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let max = p.info.ep_attr.max_msg_size;
        for (i, len) in sizes(max).into_iter().enumerate() {
            exchange(p, 0, &pattern(len, i as u8 + 1), 0x1000 + 4 * i);
            exchange(p, 1, &pattern(len, i as u8 + 101), 0x2000 + 4 * i);
        }
        p.assert_quiet(0, 10, "after the exchanges");
        p.assert_quiet(1, 10, "after the exchanges");
    });
}

/// `fi_sendv` / `fi_recvv` with two buffers each (where `iov_limit` ≥ 2) gather and
/// scatter; `fi_sendmsg` / `fi_recvmsg` carry their contexts.
pub fn pair_msg_iov_and_msg_calls(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let payload = pattern(300, 9);
        if p.info.tx_attr.iov_limit >= 2 && p.info.rx_attr.iov_limit >= 2 {
            let mut r1 = vec![0u8; 100];
            let mut r2 = vec![0u8; 300];
            let riov = [iov_of(&mut r1), iov_of(&mut r2)];
            // SAFETY: r1 / r2 live until the completion is read below.
            unsafe {
                p.b.ep
                    .recvv(riov.as_ptr(), std::ptr::null(), 2, ofi::ADDR_UNSPEC, 0x31)
            }
            .unwrap_or_else(|e| panic!("fi_recvv: {e} ({})", e.code()));
            let siov = [
                Iov {
                    base: payload.as_ptr() as *mut c_void,
                    len: 120,
                },
                Iov {
                    base: payload[120..].as_ptr() as *mut c_void,
                    len: 180,
                },
            ];
            // SAFETY: payload lives until the send completion is read below.
            unsafe {
                p.a.ep
                    .sendv(siov.as_ptr(), std::ptr::null(), 2, p.a.peer, 0x30)
            }
            .unwrap_or_else(|e| panic!("fi_sendv: {e} ({})", e.code()));
            assert_eq!(p.wait_ok(0, "fi_sendv completion").op_context, 0x30);
            let r = p.wait_ok(1, "fi_recvv completion");
            assert_eq!(r.op_context, 0x31);
            assert_eq!(r.len, 300);
            let mut got = r1.clone();
            got.extend_from_slice(&r2[..200]);
            assert!(got == payload, "scatter/gather lost the order of the bytes");
        }
        let mut buf = vec![0u8; 64];
        recvmsg(&p.b.ep, &mut buf, 0x41, OpFlags::empty())
            .unwrap_or_else(|e| panic!("fi_recvmsg: {e}"));
        sendmsg(&p.a.ep, &payload[..50], p.a.peer, 0x40, OpFlags::empty())
            .unwrap_or_else(|e| panic!("fi_sendmsg: {e}"));
        assert_eq!(p.wait_ok(0, "fi_sendmsg completion").op_context, 0x40);
        let r = p.wait_ok(1, "fi_recvmsg completion");
        check_recv(&r, 0x41, &payload[..50], &buf);
    });
}

/// Reliable endpoint types: messages sent before any receive is posted are kept
/// (unexpected) and delivered, intact and each whole, to receives posted later.
pub fn pair_unexpected_messages(s: &Subject) {
    each_pair_where(
        s,
        Caps::MSG,
        |i| i.ep_type() != EpType::Dgram,
        |p| {
            let lens = [0usize, 1, 64, 4000, 70000.min(p.info.ep_attr.max_msg_size)];
            let payloads: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| pattern(n, 50 + i as u8))
                .collect();
            for (i, pl) in payloads.iter().enumerate() {
                send(&p.a.ep, pl, p.a.peer, 0x500 + i)
                    .unwrap_or_else(|e| panic!("fi_send #{i}: {e} ({})", e.code()));
            }
            // Let the messages arrive with nothing posted.
            p.assert_quiet(1, 100, "no receive is posted");
            let mut bufs: Vec<Vec<u8>> = lens.iter().map(|_| vec![0u8; 70008]).collect();
            for (i, b) in bufs.iter_mut().enumerate() {
                post_recv(&p.b.ep, b, 0x600 + i).unwrap_or_else(|e| panic!("fi_recv #{i}: {e}"));
            }
            let mut sends = p.wait_n(0, lens.len(), "send completions");
            sends.sort_by_key(|e| e.op_context);
            for (i, e) in sends.iter().enumerate() {
                assert_eq!(e.op_context, 0x500 + i, "send completions");
            }
            let ordered = p.info.tx_attr.msg_order.contains(ofi::MsgOrder::SAS);
            for _ in 0..lens.len() {
                let r = p.wait_ok(1, "unexpected message delivered");
                let k = r.op_context - 0x600;
                assert!(k < lens.len(), "unknown context {}", show(&r));
                // Without FI_ORDER_SAS a message may land in any receive: find it by length.
                let j = if ordered {
                    k
                } else {
                    lens.iter()
                        .position(|&n| n == r.len)
                        .expect("a sent length")
                };
                check_recv(&r, 0x600 + k, &payloads[j], &bufs[k]);
            }
        },
    );
}

/// `fi_senddata` / `fi_injectdata`: the receive completion has `FI_REMOTE_CQ_DATA`
/// and the data (cut to `cq_data_size` bytes); a plain send's does not.
pub fn pair_cq_data(s: &Subject) {
    each_pair_where(
        s,
        Caps::MSG | Caps::REMOTE_CQ_DATA,
        |i| i.domain_attr.cq_data_size > 0,
        |p| {
            let size = p.info.domain_attr.cq_data_size.min(8);
            let mask = if size >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * size)) - 1
            };
            let data = 0x0123_4567_89ab_cdef_u64 & mask;
            let mut buf = vec![0u8; 64];
            post_recv(&p.b.ep, &mut buf, 0x71).unwrap();
            let payload = pattern(40, 3);
            // SAFETY: `payload` outlives the send's completion.
            unsafe {
                p.a.ep.senddata(
                    payload.as_ptr(),
                    payload.len(),
                    std::ptr::null_mut(),
                    data,
                    p.a.peer,
                    0x70,
                )
            }
            .unwrap_or_else(|e| panic!("fi_senddata: {e} ({})", e.code()));
            assert_eq!(p.wait_ok(0, "fi_senddata completion").op_context, 0x70);
            let r = p.wait_ok(1, "receive of fi_senddata");
            check_recv(&r, 0x71, &payload, &buf);
            assert_flags(&r, OpFlags::REMOTE_CQ_DATA, "receive of fi_senddata");
            assert_eq!(r.data & mask, data, "remote CQ data");
            // A plain send: no FI_REMOTE_CQ_DATA.
            let mut buf2 = vec![0u8; 64];
            post_recv(&p.b.ep, &mut buf2, 0x73).unwrap();
            send(&p.a.ep, &payload, p.a.peer, 0x72).unwrap();
            p.wait_ok(0, "send completion");
            let r = p.wait_ok(1, "plain receive");
            check_recv(&r, 0x73, &payload, &buf2);
            assert!(
                !OpFlags::from_bits_retain(r.flags).contains(OpFlags::REMOTE_CQ_DATA),
                "a plain send's receive has FI_REMOTE_CQ_DATA: {}",
                show(&r)
            );
            if p.info.tx_attr.inject_size >= 8 {
                let mut buf3 = vec![0u8; 64];
                post_recv(&p.b.ep, &mut buf3, 0x75).unwrap();
                p.a.ep
                    .injectdata(b"injected", !data & mask, p.a.peer)
                    .unwrap_or_else(|e| panic!("fi_injectdata: {e} ({})", e.code()));
                let r = p.wait_ok(1, "receive of fi_injectdata");
                check_recv(&r, 0x75, b"injected", &buf3);
                assert_flags(&r, OpFlags::REMOTE_CQ_DATA, "receive of fi_injectdata");
                assert_eq!(
                    r.data & mask,
                    !data & mask,
                    "remote CQ data of fi_injectdata"
                );
                p.assert_quiet(0, 20, "fi_injectdata generates no completion");
            }
        },
    );
}

/// `fi_inject` up to `inject_size` arrives and generates no completion (one byte more
/// is `FI_EMSGSIZE`); `fi_sendmsg` with `FI_INJECT | FI_INJECT_COMPLETE` generates a
/// completion and the buffer may be overwritten as soon as the call returns.
pub fn pair_inject_and_inject_complete(s: &Subject) {
    each_pair_where(
        s,
        Caps::MSG,
        |i| i.tx_attr.inject_size > 0,
        |p| {
            let max = p.info.tx_attr.inject_size;
            for (i, len) in [0, 1, max].into_iter().enumerate() {
                let payload = pattern(len, 40 + i as u8);
                let mut buf = vec![0u8; len + 8];
                post_recv(&p.b.ep, &mut buf, 0x90 + i).unwrap();
                p.a.ep
                    .inject(&payload, p.a.peer)
                    .unwrap_or_else(|e| panic!("fi_inject of {len} bytes: {e} ({})", e.code()));
                let r = p.wait_ok(1, "injected message");
                check_recv(&r, 0x90 + i, &payload, &buf);
            }
            p.assert_quiet(0, 20, "fi_inject generates no completion");
            let e =
                p.a.ep
                    .inject(&vec![1u8; max + 1], p.a.peer)
                    .expect_err("an inject over inject_size");
            assert_eq!(e.code(), Errno::EMSGSIZE, "{e}");
            // FI_INJECT | FI_INJECT_COMPLETE through sendmsg.
            let mut src = pattern(max.min(32), 77);
            let want = src.clone();
            let mut buf = vec![0u8; src.len() + 8];
            post_recv(&p.b.ep, &mut buf, 0xa1).unwrap();
            let flags = OpFlags::INJECT | OpFlags::INJECT_COMPLETE;
            // With FI_INJECT the buffer is the caller's again when the call returns.
            sendmsg(&p.a.ep, &src, p.a.peer, 0xa0, flags)
                .unwrap_or_else(|e| panic!("fi_sendmsg({flags}): {e} ({})", e.code()));
            src.fill(0xee);
            let c = p.wait_ok(0, "FI_INJECT_COMPLETE send completion");
            assert_eq!(c.op_context, 0xa0, "FI_INJECT_COMPLETE completion context");
            assert_flags(&c, SEND_FLAGS, "FI_INJECT_COMPLETE completion");
            let r = p.wait_ok(1, "receive of the FI_INJECT send");
            check_recv(&r, 0xa1, &want, &buf);
        },
    );
}

/// A CQ bound with `FI_SELECTIVE_COMPLETION`: operations report a successful
/// completion only when posted with `FI_COMPLETION`.
pub fn pair_selective_completion(s: &Subject) {
    each_pair_spec(
        s,
        Caps::MSG,
        |spec| spec.cq_flags = OpFlags::SELECTIVE_COMPLETION,
        |p| {
            let payloads = [pattern(16, 1), pattern(16, 2), pattern(16, 3)];
            let mut bufs = vec![vec![0u8; 32]; 3];
            for (i, b) in bufs.iter_mut().enumerate() {
                recvmsg(&p.b.ep, b, 0xc0 + i, OpFlags::COMPLETION)
                    .unwrap_or_else(|e| panic!("fi_recvmsg(FI_COMPLETION): {e}"));
            }
            for (i, pl) in payloads.iter().enumerate() {
                let flags = if i == 1 {
                    OpFlags::COMPLETION
                } else {
                    OpFlags::empty()
                };
                sendmsg(&p.a.ep, pl, p.a.peer, 0xd0 + i, flags)
                    .unwrap_or_else(|e| panic!("fi_sendmsg #{i}: {e}"));
                // Every message must arrive (its receive asked for a completion).
                let r = p.wait_ok(1, &format!("receive #{i}"));
                check_recv(&r, 0xc0 + i, pl, &bufs[i]);
            }
            let c = p.wait_ok(0, "the send posted with FI_COMPLETION");
            assert_eq!(
                c.op_context,
                0xd1,
                "only the send with FI_COMPLETION completes: got {}",
                show(&c)
            );
            // fi_send takes the default op_flags (no FI_COMPLETION): no completion.
            let mut b = vec![0u8; 32];
            recvmsg(&p.b.ep, &mut b, 0xc9, OpFlags::COMPLETION).unwrap();
            if !p.info.tx_attr.op_flags.contains(OpFlags::COMPLETION) {
                send(&p.a.ep, b"quiet", p.a.peer, 0xd9).unwrap();
                let r = p.wait_ok(1, "receive of the fi_send");
                check_recv(&r, 0xc9, b"quiet", &b);
                p.assert_quiet(0, 20, "fi_send under FI_SELECTIVE_COMPLETION");
            }
        },
    );
}

/// A posted receive cancelled: an error completion `FI_ECANCELED` with its context;
/// cancelling it again is `FI_ENOENT`; the pair still works. Under
/// [`Semantics::NO_RECV_CANCEL`](crate::Semantics::NO_RECV_CANCEL): `fi_cancel` is
/// `FI_ENOSYS`, nothing completes, and the receive takes the next message.
pub fn pair_cancel_recv(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let mut buf = [0u8; 32];
        post_recv(&p.b.ep, &mut buf, 0x77).unwrap();
        if s.has(crate::Semantics::NO_RECV_CANCEL) && p.info.ep_type() == EpType::Msg {
            expect_errno(
                p.b.ep.cancel(0x77),
                Errno::ENOSYS,
                "fi_cancel (NO_RECV_CANCEL)",
            );
            p.assert_quiet(1, 20, "an fi_cancel that is not supported");
            send(&p.a.ep, b"still posted", p.a.peer, 0x78).unwrap();
            assert_eq!(p.wait_ok(0, "send completion").op_context, 0x78);
            let r = p.wait_ok(1, "the receive fi_cancel left posted");
            check_recv(&r, 0x77, b"still posted", &buf);
            exchange(p, 0, b"after cancel", 0x80);
            return;
        }
        p.cancel_recv(0x77, "cancelled receive");
        expect_errno(p.b.ep.cancel(0x77), Errno::ENOENT, "nothing left to cancel");
        exchange(p, 0, b"after cancel", 0x80);
        assert!(
            buf.iter().all(|&b| b == 0),
            "a cancelled buffer was written"
        );
    });
}

/// Bad input: a send larger than `max_msg_size` is `FI_EMSGSIZE`; more iov entries
/// than `iov_limit` is `FI_EINVAL` (send and receive); on connectionless endpoints a
/// fabric address not in the AV is `FI_EINVAL`. None generates a completion.
pub fn pair_bad_input(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let max = p.info.ep_attr.max_msg_size;
        if max < BIG {
            let big = vec![7u8; max + 1];
            expect_errno(
                send(&p.a.ep, &big, p.a.peer, 1),
                Errno::EMSGSIZE,
                "a message over max_msg_size",
            );
        }
        let mut one = [0u8; 8];
        let n = p.info.tx_attr.iov_limit + 1;
        let iov = vec![iov_of(&mut one[..1]); n];
        // SAFETY: the call must fail; the buffers outlive it regardless.
        let r = unsafe { p.a.ep.sendv(iov.as_ptr(), std::ptr::null(), n, p.a.peer, 2) };
        expect_errno(r, Errno::EINVAL, &format!("fi_sendv of {n} entries"));
        let n = p.info.rx_attr.iov_limit + 1;
        let iov = vec![iov_of(&mut one[..1]); n];
        // SAFETY: as above.
        let r = unsafe {
            p.b.ep
                .recvv(iov.as_ptr(), std::ptr::null(), n, ofi::ADDR_UNSPEC, 3)
        };
        expect_errno(r, Errno::EINVAL, &format!("fi_recvv of {n} entries"));
        if crate::connectionless(p.info.ep_type()) {
            expect_errno(
                send(&p.a.ep, b"x", p.a.peer + 1000, 4),
                Errno::EINVAL,
                "fi_send to an unknown fi_addr",
            );
            if p.info.tx_attr.inject_size > 0 {
                let e =
                    p.a.ep
                        .inject(b"x", ofi::ADDR_NOTAVAIL)
                        .expect_err("FI_ADDR_NOTAVAIL");
                assert_eq!(
                    e.code(),
                    Errno::EINVAL,
                    "fi_inject to FI_ADDR_NOTAVAIL: {e}"
                );
            }
        }
        p.assert_quiet(0, 20, "after the refused calls");
        p.assert_quiet(1, 0, "after the refused calls");
    });
}

/// Reliable endpoint types: `fi_sendmsg` with `FI_TRANSMIT_COMPLETE` and with
/// `FI_DELIVERY_COMPLETE` completes; by the time a delivery-complete send's
/// completion is read, the data is in the receiver's buffer.
pub fn pair_transmit_and_delivery_complete(s: &Subject) {
    each_pair_where(
        s,
        Caps::MSG,
        |i| i.ep_type() != EpType::Dgram,
        |p| {
            for (i, flag) in [OpFlags::TRANSMIT_COMPLETE, OpFlags::DELIVERY_COMPLETE]
                .into_iter()
                .enumerate()
            {
                let payload = pattern(3000, 60 + i as u8);
                let mut buf = vec![0u8; 3008];
                post_recv(&p.b.ep, &mut buf, 0xb1 + 16 * i).unwrap();
                // `payload` lives until the completion is read.
                sendmsg(&p.a.ep, &payload, p.a.peer, 0xb0 + 16 * i, flag)
                    .unwrap_or_else(|e| panic!("fi_sendmsg({flag}): {e} ({})", e.code()));
                let c = p.wait_ok(0, &format!("{flag} completion"));
                assert_eq!(c.op_context, 0xb0 + 16 * i, "{flag} completion context");
                if flag == OpFlags::DELIVERY_COMPLETE {
                    assert!(
                        buf[..3000] == payload[..],
                        "FI_DELIVERY_COMPLETE completed before the data was delivered"
                    );
                }
                let r = p.wait_ok(1, "receive");
                check_recv(&r, 0xb1 + 16 * i, &payload, &buf);
            }
        },
    );
}

/// Reliable endpoint types, flood (fabtests `flood` / `unexpected_msg`): 512 messages
/// sent as fast as the provider takes them, receives posted only when a send is
/// refused with `FI_EAGAIN` or after all are sent; every message arrives exactly once,
/// intact, and in order where `FI_ORDER_SAS` is claimed.
pub fn pair_flood_unexpected(s: &Subject) {
    each_pair_where(
        s,
        Caps::MSG,
        |i| i.ep_type() != EpType::Dgram,
        |p| {
            const N: usize = 512;
            const LEN: usize = 64;
            let payloads: Vec<Vec<u8>> = (0..N)
                .map(|i| {
                    let mut v = pattern(LEN, i as u8);
                    v[..4].copy_from_slice(&(i as u32).to_le_bytes());
                    v
                })
                .collect();
            let mut bufs: Vec<Vec<u8>> = (0..N).map(|_| vec![0u8; LEN]).collect();
            let mut posted = 0usize;
            let mut sent = 0usize;
            let (mut send_done, mut recv_done) = (0usize, 0usize);
            let mut seen = vec![false; N];
            let mut next_in_order = 0u32;
            let ordered = p.info.tx_attr.msg_order.contains(ofi::MsgOrder::SAS);
            let deadline = std::time::Instant::now() + 5 * crate::WAIT;
            let mut reap =
                |p: &Pair, bufs: &[Vec<u8>], send_done: &mut usize, recv_done: &mut usize| {
                    while let Some(c) = crate::pair::poll(&p.a.cq) {
                        let c = c.unwrap_or_else(|ee| panic!("flood send error {}", Errno(ee.err)));
                        assert!(c.op_context >= 0x10000, "{}", show(&c));
                        *send_done += 1;
                    }
                    while let Some(c) = crate::pair::poll(&p.b.cq) {
                        let r =
                            c.unwrap_or_else(|ee| panic!("flood receive error {}", Errno(ee.err)));
                        let k = r.op_context - 0x20000;
                        assert_eq!(r.len, LEN, "flood message length");
                        let id = u32::from_le_bytes(bufs[k][..4].try_into().unwrap()) as usize;
                        assert!(
                            id < N && !seen[id],
                            "message {id} delivered twice or unknown"
                        );
                        seen[id] = true;
                        assert!(bufs[k] == payloads[id], "message {id} corrupted");
                        if ordered {
                            assert_eq!(id as u32, next_in_order, "FI_ORDER_SAS: out of order");
                            next_in_order += 1;
                        }
                        *recv_done += 1;
                    }
                };
            while sent < N {
                match send(&p.a.ep, &payloads[sent], p.a.peer, 0x10000 + sent) {
                    Ok(()) => sent += 1,
                    Err(e) if e.code() == Errno::EAGAIN => {
                        // Make room: post a batch of receives (as many as the receive
                        // queue takes), drive progress.
                        for _ in 0..64 {
                            if posted == N {
                                break;
                            }
                            match post_recv(&p.b.ep, &mut bufs[posted], 0x20000 + posted) {
                                Ok(()) => posted += 1,
                                Err(e) if e.code() == Errno::EAGAIN => break,
                                Err(e) => panic!("flood fi_recv: {e}"),
                            }
                        }
                        reap(&p, &bufs, &mut send_done, &mut recv_done);
                    }
                    Err(e) => panic!("flood fi_send #{sent}: {e} ({})", e.code()),
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "flood: {sent} of {N} sent"
                );
            }
            while send_done < N || recv_done < N {
                while posted < N {
                    match post_recv(&p.b.ep, &mut bufs[posted], 0x20000 + posted) {
                        Ok(()) => posted += 1,
                        Err(e) if e.code() == Errno::EAGAIN => break,
                        Err(e) => panic!("flood fi_recv: {e}"),
                    }
                }
                reap(&p, &bufs, &mut send_done, &mut recv_done);
                assert!(
                    std::time::Instant::now() < deadline,
                    "flood: {send_done} sends and {recv_done} receives of {N} completed"
                );
                std::thread::yield_now();
            }
            assert!(seen.iter().all(|&x| x));
        },
    );
}
