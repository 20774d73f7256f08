//! Failure handling: malformed bytes from a peer (on a passive endpoint and on a
//! connected endpoint) and a peer killed with SIGKILL in the middle of a transfer.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ofi::abi::raw::CqTaggedEntry;
use ofi::{Caps, EqEvent, Errno};
use ofi_prov_tcp::proto;

const NULL: *mut std::ffi::c_void = std::ptr::null_mut();

#[test]
fn junk_to_a_listener_is_dropped_and_it_keeps_listening() {
    let (info, l) = listen_v4_msg();
    let mut raw = TcpStream::connect(l.addr).unwrap();
    raw.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    // The listener closes it without an event.
    raw.set_read_timeout(Some(WAIT)).unwrap();
    let end = Instant::now() + WAIT;
    let mut closed = false;
    while Instant::now() < end {
        assert_eq!(l.eq.read().unwrap_err().code(), Errno::EAGAIN);
        let mut b = [0u8; 1];
        raw.set_nonblocking(true).unwrap();
        match raw.read(&mut b) {
            Ok(0) => {
                closed = true;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(closed, "the listener kept a connection that sent junk");
    // A proper client still gets through.
    let c = side(&l.fabric, &l.domain, &info);
    c.ep.connect(&l.pep.getname().unwrap(), b"ok").unwrap();
    let ev = eq_expect(&l.eq, EqEvent::ConnReq);
    assert_eq!(ev.cm_data, b"ok");
}

#[test]
fn junk_on_a_connection_closes_it_with_eproto() {
    let RawConn { mut raw, s, .. } = raw_connection(Caps::MSG);
    let mut rb = [0u8; 8];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { s.ep.recv(rb.as_mut_ptr(), 8, NULL, 0, 5).unwrap() };
    // A header with an unknown op.
    let mut junk = [0u8; proto::HDR_LEN];
    junk[0] = proto::PROTO_VERSION;
    junk[1] = 200;
    raw.write_all(&junk).unwrap();
    // Manual data progress: reading the CQ processes the bytes; the posted receive is
    // flushed and the EQ has the error event.
    let e = cq_wait(&s.cq, &[]).expect_err("flushed receive");
    assert_eq!((e.err, e.op_context), (Errno::ECANCELED.0, 5));
    let err = eq_wait(&s.eq).expect_err("an error event");
    assert_eq!(err.err, Errno::EPROTO);
    // The connection is closed (after what the endpoint sent before: its same-host
    // offer, one header).
    raw.set_read_timeout(Some(WAIT)).unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    assert!(
        rest.len() <= proto::HDR_LEN,
        "{} bytes after the close",
        rest.len()
    );
}

/// A response whose status is no FI code (a peer breaking the protocol) completes the
/// operation with `FI_EPROTO`, not with the peer's number.
#[test]
fn a_response_status_that_is_no_fi_code_is_eproto() {
    use ofi::OpFlags;
    use proto::{Hdr, Op};
    let RawConn { mut raw, s, .. } = raw_connection(Caps::MSG);
    // A delivery-complete send waits for the peer's Ack.
    let payload = [1u8; 8];
    let flags = OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION;
    ofi_conformance::fixture::sendmsg(&s.ep, &payload, 0, 9, flags).expect("sendmsg");
    // Read the stream (the endpoint may first offer same-host copies) until the message
    // has come; each request carries its rma iovs and payload after the header. Data
    // progress is manual: the CQ is read meanwhile (nothing completes before the ack).
    raw.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    let req = 'found: loop {
        assert!(Instant::now() < deadline, "no message on the stream");
        let mut e = [CqTaggedEntry::default()];
        match s.cq.read(&mut e) {
            Err(err) if err.code() == Errno::EAGAIN => {}
            other => panic!("a completion before the ack: {other:?}"),
        }
        let mut chunk = [0u8; 4096];
        match raw.read(&mut chunk) {
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => panic!("read: {err}"),
        }
        while got.len() >= proto::HDR_LEN {
            let h = Hdr::parse(&got[..proto::HDR_LEN]).expect("a header from the endpoint");
            let end = proto::HDR_LEN + h.size as usize + 24 * usize::from(h.rma_cnt);
            if got.len() < end {
                break;
            }
            let body: Vec<u8> = got.drain(..end).skip(proto::HDR_LEN).collect();
            if h.op == Op::Msg {
                assert_eq!(body, payload);
                break 'found h;
            }
        }
    };
    raw.set_nonblocking(false).unwrap();
    let mut ack = Hdr::new(Op::Ack);
    ack.id = req.id;
    ack.status = 65_535;
    let mut b = [0u8; proto::HDR_LEN];
    ack.encode(&mut b);
    raw.write_all(&b).unwrap();
    let e = cq_wait(&s.cq, &[]).expect_err("an error completion");
    assert_eq!((Errno(e.err), e.op_context), (Errno::EPROTO, 9));
}

const CHILD_ENV: &str = "OFI_TCP_TEST_KILL_CHILD_ADDR";

/// The child half of `sigkill_peer_mid_transfer` (which runs itself again in a child
/// process with the address in the environment): connects to `addr` and keeps
/// progressing (reading but never posting receives) until killed.
fn sigkill_child_role(addr: &str) {
    let sa: std::net::SocketAddr = addr.parse().unwrap();
    let reg = registry();
    let info = info(&reg, false, Caps::MSG);
    let (_fabric, _domain, c) = connected_client(&reg, &info, sa, b"child");
    // Until the parent kills this process (bounded).
    serve_until(&c, Duration::from_secs(20), |_| false);
}

#[test]
fn sigkill_peer_mid_transfer() {
    if ofi_testkit::child::played_child(CHILD_ENV, sigkill_child_role) {
        return;
    }
    let (info, l) = listen_v4_msg();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "sigkill_peer_mid_transfer",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, l.addr.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ev = eq_expect(&l.eq, EqEvent::ConnReq);
    assert_eq!(ev.cm_data, b"child");
    let s = side(&l.fabric, &l.domain, ev.info.as_ref().unwrap());
    s.ep.accept(b"").unwrap();
    eq_expect(&s.eq, EqEvent::Connected);
    // 64 MiB: more than the child buffers (16 MiB unexpected) plus the socket
    // buffers, so the send stays pending.
    let big = vec![0x5au8; 64 << 20];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { s.ep.send(big.as_ptr(), big.len(), NULL, 0, 0x51).unwrap() };
    let mut rb = [0u8; 8];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { s.ep.recv(rb.as_mut_ptr(), 8, NULL, 0, 0x52).unwrap() };
    // Let some of it flow.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        let mut e = [CqTaggedEntry::default()];
        if let Ok(1) = s.cq.read(&mut e) {
            panic!("the 64 MiB send completed before the kill: {e:?}");
        }
    }
    child.kill().unwrap();
    let killed_at = Instant::now();
    child.wait().unwrap();
    let mut ctxs = Vec::new();
    for _ in 0..2 {
        let e = cq_wait(&s.cq, &[]).expect_err("error completion");
        ctxs.push((e.op_context, e.err));
    }
    ctxs.sort();
    assert_eq!(
        ctxs,
        vec![(0x51, Errno::ECONNRESET.0), (0x52, Errno::ECANCELED.0)]
    );
    eq_expect(&s.eq, EqEvent::Shutdown);
    assert!(killed_at.elapsed() < Duration::from_secs(2));
    // The survivor accepts a new connection on the same listener.
    let c2 = side(&l.fabric, &l.domain, &info);
    c2.ep.connect(&l.pep.getname().unwrap(), b"again").unwrap();
    let ev = eq_expect(&l.eq, EqEvent::ConnReq);
    assert_eq!(ev.cm_data, b"again");
    let s2 = side(&l.fabric, &l.domain, ev.info.as_ref().unwrap());
    s2.ep.accept(b"").unwrap();
    eq_expect(&c2.eq, EqEvent::Connected);
}

/// A peer that sends a message and then resets the connection (it closes with our
/// bytes unread, so its kernel answers with RST): our next send fails, but the message
/// that arrived before the reset is still delivered to the posted receive, and only
/// then is the connection torn down (the posted send fails, FI_SHUTDOWN or an error
/// event follows).
#[test]
fn a_message_sent_before_a_reset_is_delivered_when_our_write_fails() {
    let RawConn { mut raw, s, .. } = raw_connection(Caps::MSG);
    let mut h = proto::Hdr::new(proto::Op::Msg);
    h.size = 5;
    let mut b = [0u8; proto::HDR_LEN];
    h.encode(&mut b);
    let mut v = b.to_vec();
    v.extend_from_slice(b"hello");
    raw.write_all(&v).unwrap();
    // Close with a zero linger time: the kernel resets the connection.
    socket2::SockRef::from(&raw)
        .set_linger(Some(Duration::ZERO))
        .expect("SO_LINGER");
    let ours = socket_fd_of(raw.peer_addr().unwrap(), raw.local_addr().unwrap())
        .expect("the endpoint's socket");
    drop(raw);
    // Wait (bounded) until the reset has reached our socket: poll reports it without
    // reading anything.
    let mut pfd = libc::pollfd {
        fd: ours,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    let end = Instant::now() + WAIT;
    while pfd.revents & (libc::POLLERR | libc::POLLHUP) == 0 {
        assert!(Instant::now() < end, "the reset never reached the endpoint");
        pfd.revents = 0;
        // SAFETY: `pfd` is one live pollfd; the descriptor stays open (the endpoint is alive).
        unsafe { libc::poll(&mut pfd, 1, 100) };
    }
    // Nothing has read the socket yet (manual progress): the message waits there.
    let mut rb = [0u8; 8];
    // SAFETY: the buffers outlive the operations (their completions are awaited).
    unsafe { s.ep.recv(rb.as_mut_ptr(), 8, NULL, 0, 5).unwrap() };
    let sb = *b"ping";
    // SAFETY: as above.
    let sent = unsafe { s.ep.send(sb.as_ptr(), 4, NULL, 0, 6) };
    // The write may fail at once (the reset is known) or be queued; either way the
    // receive completes with the peer's message first.
    let first = cq_wait(&s.cq, &[]).expect("the message sent before the reset");
    assert_eq!((first.op_context, first.len), (5, 5));
    assert_eq!(&rb[..5], b"hello");
    if sent.is_ok() {
        let e = cq_wait(&s.cq, &[]).expect_err("the send fails");
        assert_eq!(e.op_context, 6);
    }
}
