//! Same-host copies: the proof exchange, descriptors from a forged or a true peer, a
//! copy that fails, reads the target answers by copying, and messages through the API
//! that show the data came from the sender's memory at receive time.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;
use ofi::{Caps, Errno, OpFlags};
use ofi_prov_tcp::proto::{Hdr, Op, RmaIov, FLAG_ACK_REQ, FLAG_LOCAL, HDR_LEN, RMA_IOV_LEN};

const NULL: *mut std::ffi::c_void = std::ptr::null_mut();

fn send_hdr(raw: &mut TcpStream, h: &Hdr, iovs: &[RmaIov]) {
    let mut b = [0u8; HDR_LEN];
    h.encode(&mut b);
    let mut v = b.to_vec();
    for r in iovs {
        let mut rb = [0u8; RMA_IOV_LEN];
        r.write(&mut rb);
        v.extend_from_slice(&rb);
    }
    raw.write_all(&v).unwrap();
}

/// Read the next header from the endpoint, driving `side`'s progress meanwhile.
fn recv_hdr(raw: &mut TcpStream, side: &Side) -> Hdr {
    raw.set_nonblocking(true).unwrap();
    let mut b = [0u8; HDR_LEN];
    let mut got = 0;
    let end = std::time::Instant::now() + WAIT;
    while got < HDR_LEN {
        match raw.read(&mut b[got..]) {
            Ok(0) => panic!("endpoint closed the connection"),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let _ = side
                    .cq
                    .read(&mut Vec::<ofi::abi::raw::CqTaggedEntry>::new());
                let _ = side.eq.read();
                assert!(std::time::Instant::now() < end, "no header within {WAIT:?}");
                std::thread::yield_now();
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    raw.set_nonblocking(false).unwrap();
    Hdr::parse(&b).unwrap()
}

/// A raw peer connected to a fresh endpoint with RMA; the nonce the endpoint offered.
struct Raw {
    raw: TcpStream,
    s: Side,
    domain: ofi::domain::Domain,
    _fabric: ofi::fabric::Fabric,
    nonce: u64,
}

fn raw_peer() -> Raw {
    let RawConn {
        mut raw,
        s,
        domain,
        fabric,
    } = raw_connection(Caps::MSG | Caps::RMA);
    // Loopback: the endpoint offers a proof exchange at once.
    let offer = recv_hdr(&mut raw, &s);
    assert_eq!(offer.op, Op::LocalOffer);
    Raw {
        raw,
        s,
        domain,
        _fabric: fabric,
        nonce: offer.data,
    }
}

/// The connection's error event, driving data progress (manual) meanwhile; returns its
/// code. Completions met on the way are dropped.
fn error_event(s: &Side) -> Errno {
    let end = std::time::Instant::now() + WAIT;
    loop {
        let _ = s.cq.read(&mut Vec::<ofi::abi::raw::CqTaggedEntry>::new());
        match s.eq.read() {
            Err(e) if e.code() == Errno::EAVAIL => return s.eq.readerr().unwrap().err,
            Err(e) if e.code() == Errno::EAGAIN => {}
            other => panic!("expected an error event, got {other:?}"),
        }
        assert!(
            std::time::Instant::now() < end,
            "no error event within {WAIT:?}"
        );
        std::thread::yield_now();
    }
}

fn prove(r: &mut Raw, word: &std::sync::atomic::AtomicU64) -> u64 {
    let mut p = Hdr::new(Op::LocalProof);
    p.data = u64::from(std::process::id());
    p.tag = word.as_ptr() as u64;
    send_hdr(&mut r.raw, &p, &[]);
    let ok = recv_hdr(&mut r.raw, &r.s);
    assert_eq!(ok.op, Op::LocalOk);
    ok.data
}

/// A raw peer whose proof the endpoint accepted, with the word it proved with (boxed:
/// the endpoint read it at its address, which must stay the same).
fn verified_peer() -> (Raw, Box<std::sync::atomic::AtomicU64>) {
    let mut r = raw_peer();
    let word = Box::new(std::sync::atomic::AtomicU64::new(r.nonce));
    assert_eq!(prove(&mut r, &word), 1, "the proof of a same-host peer");
    (r, word)
}

fn descriptor(tag_op: Op, id: u64, bufs: &[(u64, u64)]) -> (Hdr, Vec<RmaIov>) {
    let mut h = Hdr::new(tag_op);
    h.flags = FLAG_LOCAL | FLAG_ACK_REQ;
    h.rma_cnt = bufs.len() as u8;
    h.size = bufs.iter().map(|b| b.1).sum();
    h.id = id;
    let iovs = bufs
        .iter()
        .map(|&(addr, len)| RmaIov { addr, len, key: 0 })
        .collect();
    (h, iovs)
}

#[test]
fn a_forged_proof_is_refused_and_its_descriptors_close_the_connection() {
    let mut r = raw_peer();
    // The word holds something other than the nonce.
    let word = std::sync::atomic::AtomicU64::new(r.nonce ^ 1);
    assert_eq!(prove(&mut r, &word), 0);
    let mut rb = vec![0u8; 4096];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { r.s.ep.recv(rb.as_mut_ptr(), rb.len(), NULL, 0, 5).unwrap() };
    let src = vec![7u8; 4096];
    let (h, iovs) = descriptor(Op::Msg, 1, &[(src.as_ptr() as u64, 4096)]);
    send_hdr(&mut r.raw, &h, &iovs);
    let e = cq_wait(&r.s.cq, &[]).expect_err("flushed receive");
    assert_eq!((e.err, e.op_context), (Errno::ECANCELED.0, 5));
    let err = eq_wait(&r.s.eq).expect_err("an error event");
    assert_eq!(err.err, Errno::EPROTO);
    assert!(rb.iter().all(|&b| b == 0), "nothing was copied");
}

#[test]
fn a_proof_nobody_asked_for_is_a_protocol_error() {
    let (mut r, word) = verified_peer();
    // A second proof: the endpoint offered once.
    let mut p = Hdr::new(Op::LocalProof);
    p.data = u64::from(std::process::id());
    p.tag = word.as_ptr() as u64;
    send_hdr(&mut r.raw, &p, &[]);
    assert_eq!(error_event(&r.s), Errno::EPROTO);
}

#[test]
fn a_verified_peer_s_descriptors_are_copied_and_a_failed_copy_is_eio() {
    let (mut r, _word) = verified_peer();
    // Tagged message from two buffers.
    let a: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..5000u32).map(|i| (i % 13) as u8).collect();
    let mut rb = vec![0u8; 8000];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe {
        r.s.ep
            .trecv(rb.as_mut_ptr(), rb.len(), NULL, 0, 0x77, 0, 6)
            .unwrap()
    };
    let (mut h, iovs) = descriptor(
        Op::Tagged,
        9,
        &[(a.as_ptr() as u64, 3000), (b.as_ptr() as u64, 5000)],
    );
    h.tag = 0x77;
    send_hdr(&mut r.raw, &h, &iovs);
    let e = cq_wait(&r.s.cq, &[]).expect("received");
    assert_eq!((e.op_context, e.len, e.tag), (6, 8000, 0x77));
    assert_eq!(&rb[..3000], &a[..]);
    assert_eq!(&rb[3000..], &b[..]);
    let ack = recv_hdr(&mut r.raw, &r.s);
    assert_eq!((ack.op, ack.id, ack.status), (Op::Ack, 9, 0));
    // Unexpected: copied into the endpoint's buffer at once, delivered on post.
    let (h, iovs) = descriptor(Op::Msg, 10, &[(a.as_ptr() as u64, 3000)]);
    send_hdr(&mut r.raw, &h, &iovs);
    let ack = recv_hdr(&mut r.raw, &r.s);
    assert_eq!((ack.op, ack.id, ack.status), (Op::Ack, 10, 0));
    let mut ub = vec![0u8; 3000];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { r.s.ep.recv(ub.as_mut_ptr(), ub.len(), NULL, 0, 7).unwrap() };
    let e = cq_wait(&r.s.cq, &[]).expect("unexpected delivered");
    assert_eq!((e.op_context, e.len), (7, 3000));
    assert_eq!(ub, a);
    // A descriptor naming memory the sender does not have: the receive completes with
    // FI_EIO, the sender hears FI_EIO, the connection stays.
    let mut fb = vec![0u8; 4096];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { r.s.ep.recv(fb.as_mut_ptr(), fb.len(), NULL, 0, 8).unwrap() };
    let (h, iovs) = descriptor(Op::Msg, 11, &[(8, 4096)]);
    send_hdr(&mut r.raw, &h, &iovs);
    let e = cq_wait(&r.s.cq, &[]).expect_err("failed copy");
    assert_eq!((e.err, e.op_context), (Errno::EIO.0, 8));
    assert_eq!(e.prov_errno, libc::EFAULT);
    let ack = recv_hdr(&mut r.raw, &r.s);
    assert_eq!(
        (ack.op, ack.id, ack.status),
        (Op::Ack, 11, Errno::EIO.0 as u16)
    );
    // Lengths that do not add up to the size: a protocol error.
    let (mut h, iovs) = descriptor(Op::Msg, 12, &[(a.as_ptr() as u64, 3000)]);
    h.size = 2999;
    send_hdr(&mut r.raw, &h, &iovs);
    assert_eq!(error_event(&r.s), Errno::EPROTO);
}

#[test]
fn a_same_host_read_is_copied_into_the_initiator_after_the_target_s_checks() {
    let (mut r, _word) = verified_peer();
    let content: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 256) as u8).collect();
    let mr = r
        .domain
        .mr_reg_owned(content.clone(), OpFlags::REMOTE_READ, 0x55)
        .unwrap();
    let mut dst = vec![0u8; 50_000];
    let read = |r: &mut Raw, id: u64, off: u64, len: u64, key: u64, dst: &mut Vec<u8>| {
        let mut h = Hdr::new(Op::LocalReadReq);
        h.rma_cnt = 2;
        h.tag = 1;
        h.id = id;
        let iovs = [
            RmaIov {
                addr: off,
                len,
                key,
            },
            RmaIov {
                addr: dst.as_mut_ptr() as u64,
                len,
                key: 0,
            },
        ];
        send_hdr(&mut r.raw, &h, &iovs);
        let rsp = recv_hdr(&mut r.raw, &r.s);
        assert_eq!(
            (rsp.op, rsp.id, rsp.flags, rsp.size),
            (Op::ReadRsp, id, FLAG_LOCAL, 0)
        );
        rsp.status
    };
    assert_eq!(read(&mut r, 1, 25_000, 50_000, 0x55, &mut dst), 0);
    assert_eq!(&dst[..], &content[25_000..75_000]);
    // Out of the region: FI_EINVAL; unknown key: FI_EACCES; nothing copied.
    dst.fill(0);
    assert_eq!(
        read(&mut r, 2, 60_000, 50_000, 0x55, &mut dst),
        Errno::EINVAL.0 as u16
    );
    assert_eq!(
        read(&mut r, 3, 0, 50_000, 0x56, &mut dst),
        Errno::EACCES.0 as u16
    );
    assert!(dst.iter().all(|&b| b == 0));
    drop(mr);
}

/// Exchange a few small messages so the proof exchange (three headers each way) is
/// done before the large transfers.
fn warm_up(p: &Pair) {
    let (c, s) = (&p.client, &p.server);
    for i in 0..3 {
        let mut b = [0u8; 8];
        // SAFETY: the buffer outlives the operation (its completion is awaited).
        unsafe { s.ep.recv(b.as_mut_ptr(), 8, NULL, 0, 100 + i).unwrap() };
        c.ep.inject(b"warm-up!", 0).unwrap();
        cq_wait(&s.cq, &[&c.cq]).unwrap();
        // SAFETY: as above.
        unsafe { c.ep.recv(b.as_mut_ptr(), 8, NULL, 0, 200 + i).unwrap() };
        s.ep.inject(b"warm-up!", 0).unwrap();
        cq_wait(&c.cq, &[&s.cq]).unwrap();
    }
}

#[test]
fn large_messages_are_read_from_the_sender_s_memory_at_receive_time() {
    for v6 in [false, true] {
        let p = connect_pair(v6, Caps::MSG | Caps::RMA);
        warm_up(&p);
        let (c, s) = (&p.client, &p.server);
        let n = 1 << 20;
        // A same-host receiver copies the bytes as they are when it receives: it sees
        // the change made after the send.
        let (_, src, dst) = send_changing_the_source(&p, n);
        assert!(src == dst, "v6 {v6}: data differs");
        // An RMA read of 1 MiB, copied by the target, and a truncated receive.
        let mr = p
            .domain
            .mr_reg_owned(src.clone(), OpFlags::REMOTE_READ, 0x9)
            .unwrap();
        let mut rd = vec![0u8; n];
        // SAFETY: the buffer outlives the operation (its completion is awaited).
        unsafe { c.ep.read(rd.as_mut_ptr(), n, NULL, 0, 0, 0x9, 3).unwrap() };
        cq_expect_ctx(&c.cq, &[&s.cq], 3);
        assert!(rd == src);
        drop(mr);
        let mut small = vec![0u8; 100_000];
        // SAFETY: the buffer outlives the operation (its completion is awaited).
        unsafe {
            s.ep.recv(small.as_mut_ptr(), small.len(), NULL, 0, 4)
                .unwrap()
        };
        // SAFETY: as above.
        unsafe { c.ep.send(src.as_ptr(), n, NULL, 0, 5).unwrap() };
        let e = cq_wait(&s.cq, &[&c.cq]).expect_err("truncated");
        assert_eq!(
            (e.err, e.op_context, e.len, e.olen),
            (Errno::ETRUNC.0, 4, 100_000, n - 100_000)
        );
        assert_eq!(&small[..], &src[..100_000]);
        assert_eq!(cq_wait(&c.cq, &[&s.cq]).unwrap().op_context, 5);
    }
}

/// Same-host sends leave nothing queued once their descriptor is written, so the
/// transmit bound counts the operations waiting for their answer: with `tx_size` 4,
/// the fifth large send before the receiver acknowledges any is FI_EAGAIN, and once
/// the receiver has copied them all, sends are taken again.
#[test]
fn waiting_same_host_sends_count_against_tx_size() {
    let reg = registry();
    let mut info = info(&reg, false, Caps::MSG);
    info.tx_attr.size = 4;
    let p = connect_pair_with(&reg, info);
    warm_up(&p);
    let (c, s) = (&p.client, &p.server);
    let n = 1 << 17;
    let src = vec![0x5au8; n];
    for ctx in 1..=4 {
        // SAFETY: the buffer outlives the operations (their completions are awaited).
        unsafe { c.ep.send(src.as_ptr(), n, NULL, 0, ctx).unwrap() };
    }
    assert_eq!(c.ep.tx_size_left().unwrap(), 0);
    // SAFETY: as above.
    let e = unsafe { c.ep.send(src.as_ptr(), n, NULL, 0, 5) }.unwrap_err();
    assert_eq!(e.code(), Errno::EAGAIN);
    let mut dst = vec![vec![0u8; n]; 4];
    for (i, d) in dst.iter_mut().enumerate() {
        // SAFETY: the buffers outlive the operations (their completions are awaited).
        unsafe { s.ep.recv(d.as_mut_ptr(), n, NULL, 0, 10 + i).unwrap() };
    }
    for _ in 0..4 {
        cq_wait(&s.cq, &[&c.cq]).unwrap();
    }
    for _ in 0..4 {
        cq_wait(&c.cq, &[&s.cq]).unwrap();
    }
    assert!(dst.iter().all(|d| d == &src));
    assert_eq!(c.ep.tx_size_left().unwrap(), 4);
    // SAFETY: as above.
    unsafe { c.ep.send(src.as_ptr(), 8, NULL, 0, 6).unwrap() };
}
