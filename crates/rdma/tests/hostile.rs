//! Hostile peers: malformed, forged and out-of-sequence packets sent straight to a
//! software-device context's socket, on both the responder and the requester side.
//! Nothing may panic, nothing may be written where no valid key allows it, and the
//! contexts keep working for well-behaved peers.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use ofi_rdma::soft::wire::{Hdr, Kind, F_FIRST, F_LAST};
use ofi_rdma::*;
use ofi_testkit::TestRng;

fn dir() -> PathBuf {
    std::env::var("FI_VERBS_SOFT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            // SAFETY: plain syscall.
            PathBuf::from(format!("/tmp/ofi-rdma-soft-{}", unsafe { libc::getuid() }))
        })
}

fn path_of(g: &Gid) -> PathBuf {
    let b = g.0;
    let pid = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    let serial = u32::from_be_bytes([b[12], b[13], b[14], b[15]]);
    dir().join(format!("{pid}-{serial}"))
}

fn fake_gid(serial: u32) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[4..8].copy_from_slice(b"soft");
    g[8..12].copy_from_slice(&std::process::id().to_be_bytes());
    g[12..16].copy_from_slice(&serial.to_be_bytes());
    Gid(g)
}

fn sockaddr(p: &std::path::Path) -> (libc::sockaddr_un, libc::socklen_t) {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in a.sun_path.iter_mut().zip(p.as_os_str().as_bytes()) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + p.as_os_str().len() + 1;
    (a, len as libc::socklen_t)
}

fn seqpacket() -> OwnedFd {
    // SAFETY: plain syscall; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: a new fd.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn connect(p: &std::path::Path) -> OwnedFd {
    let fd = seqpacket();
    let (a, len) = sockaddr(p);
    // SAFETY: valid sockaddr of `len` bytes.
    let r = unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) };
    assert_eq!(r, 0, "connect {}", p.display());
    fd
}

fn send(fd: &OwnedFd, pkt: &[u8]) {
    // SAFETY: sends our own buffer.
    let r = unsafe {
        libc::send(
            fd.as_raw_fd(),
            pkt.as_ptr().cast(),
            pkt.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    assert_eq!(r, pkt.len() as isize);
}

/// An RC queue pair of `a` connected (no RNR retry) to queue pair `qpn` at `gid`.
fn rc_qp_to(a: &Node, gid: Gid, qpn: u32) -> QueuePair {
    let qp = a.qp(QpType::Rc);
    rc_init(&qp);
    rc_connect(&qp, gid, qpn, 0, 1);
    qp
}

/// A fake peer: a listening socket of our own where context `serial` of this process
/// would live. Returns its GID, its path (removed by the caller) and the socket.
fn fake_peer(serial: u32) -> (Gid, PathBuf, OwnedFd) {
    let gid = fake_gid(serial);
    let path = path_of(&gid);
    let _ = std::fs::remove_file(&path);
    let listen = seqpacket();
    let (sa, len) = sockaddr(&path);
    // SAFETY: bind/listen on our socket with a valid address.
    unsafe {
        let sa = (&sa as *const libc::sockaddr_un).cast();
        assert_eq!(libc::bind(listen.as_raw_fd(), sa, len), 0);
        assert_eq!(libc::listen(listen.as_raw_fd(), 4), 0);
    }
    (gid, path, listen)
}

/// Receives one packet, waiting at most `BOUND`.
fn recv(fd: &OwnedFd) -> Vec<u8> {
    assert!(
        readable_within(fd.as_raw_fd(), BOUND),
        "no packet within {BOUND:?}"
    );
    let mut b = vec![0u8; 70_000];
    // SAFETY: receives into our buffer.
    let n = unsafe { libc::recv(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), 0) };
    assert!(n > 0);
    b.truncate(n as usize);
    b
}

type H = Hdr;

const HELLO: u8 = Kind::Hello as u8;
const REQ: u8 = Kind::Req as u8;
const ACK: u8 = Kind::Ack as u8;
const NAK: u8 = Kind::Nak as u8;
const READ_RESP: u8 = Kind::ReadResp as u8;
const ATOMIC_RESP: u8 = Kind::AtomicResp as u8;
const UD: u8 = Kind::Ud as u8;
const FIRST: u8 = F_FIRST;
const LAST: u8 = F_LAST;

fn hello(fd: &OwnedFd, as_gid: &Gid) {
    send(
        fd,
        &H {
            kind: HELLO,
            ..H::default()
        }
        .packet(&as_gid.0),
    );
}

/// Accepts `a`'s connection on the fake peer's `listen`, takes its hello and answers
/// as `gid`.
fn accept_hello(listen: &OwnedFd, a: &Node, gid: &Gid) -> OwnedFd {
    // SAFETY: accept on our listening socket.
    let cfd = unsafe {
        libc::accept(
            listen.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert!(cfd >= 0);
    // SAFETY: a new fd.
    let conn = unsafe { OwnedFd::from_raw_fd(cfd) };
    let hi = recv(&conn);
    assert_eq!(hi[0], HELLO);
    assert_eq!(&hi[64..80], &a.gid().0);
    hello(&conn, gid);
    conn
}

/// Checks that a and b still exchange a message over a fresh pair of queue pairs.
fn still_works(a: &Node, b: &Node) {
    let (qa, qb) = rc_pair(a, b, 0);
    a.buf.write(0, b"alive");
    b.recv(&qb, 1, 2048, 16);
    a.post(&qa, 1, SendOp::Send, 0, 5);
    assert_eq!(
        wait_wc(&a.scq, "send after attack").status,
        WcStatus::Success
    );
    assert_eq!(wait_wc(&b.rcq, "recv after attack").byte_len, 5);
    assert_eq!(b.buf.read(2048, 5), b"alive");
}

#[test]
fn garbage_and_unannounced_packets_are_dropped() {
    let (a, b, qa, _qb) = rc_nodes(0);
    let fd = connect(&path_of(&a.gid()));
    let mut rng = TestRng::from_env("OFI_RDMA_HOSTILE_SEED", 29);
    // Requests before any hello: ignored even when well formed.
    let write = H {
        kind: REQ,
        op: 3,
        flags: FIRST | LAST,
        dst_qpn: qa.qp_num(),
        src_qpn: 1,
        total: 8,
        raddr: a.buf.addr(),
        rkey: a.mr.rkey(),
        ..H::default()
    };
    send(&fd, &write.packet(&[0xee; 8]));
    hello(&fd, &fake_gid(4242));
    for len in [1usize, 2, 10, 63] {
        send(&fd, &rng.bytes(len));
    }
    for _ in 0..300 {
        let len = rng.range(64, 400) as usize;
        let mut p = rng.bytes(len);
        // Aim some at the real queue pair.
        if rng.chance(50) {
            p[4..8].copy_from_slice(&qa.qp_num().to_le_bytes());
        }
        p[0] = rng.pick(&[0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 200]);
        send(&fd, &p);
    }
    // Longer than any packet the device sends.
    send(&fd, &vec![7u8; ofi_rdma::soft::wire::MAX_PACKET + 1]);
    drop(fd);
    assert_eq!(
        a.buf.read(0, 4096),
        vec![0; 4096],
        "memory written by garbage"
    );
    assert_eq!(qa.state(), QpState::Rts);
    still_works(&a, &b);
}

#[test]
fn forged_requests_are_checked_like_real_ones() {
    let (a, b, qa, qb) = rc_nodes(0);
    // A stranger's request for a queue pair that does not exist gets "no queue pair"
    // (a's answers to an unknown peer go back over the stranger's own connection).
    let stranger = connect(&path_of(&a.gid()));
    hello(&stranger, &fake_gid(4343));
    send(
        &stranger,
        &H {
            kind: REQ,
            op: 1,
            dst_qpn: 0xabcdef,
            src_qpn: 3,
            total: 8,
            flags: FIRST | LAST,
            ..H::default()
        }
        .packet(&[7; 8]),
    );
    let nak = recv(&stranger);
    assert_eq!((nak[0], nak[1]), (NAK, 4));
    let fd = connect(&path_of(&a.gid()));
    // Claims to be b; the queue pair checks the source queue pair and the sequence.
    // (What a sends to b goes to the real b, never to the impostor's socket.)
    hello(&fd, &b.gid());
    let base = H {
        kind: REQ,
        dst_qpn: qa.qp_num(),
        src_qpn: qb.qp_num(),
        rkey: a.mr.rkey(),
        raddr: a.buf.addr(),
        total: 8,
        flags: FIRST | LAST,
        ..H::default()
    };
    // Wrong source queue pair, out-of-sequence messages, a middle fragment with no
    // first, an unknown operation out of sequence, a datagram for an RC queue pair,
    // answers to requests never made.
    send(
        &fd,
        &H {
            src_qpn: qb.qp_num() + 1,
            op: 3,
            ..base
        }
        .packet(&[1; 8]),
    );
    send(
        &fd,
        &H {
            msn: 5,
            op: 3,
            ..base
        }
        .packet(&[2; 8]),
    );
    send(
        &fd,
        &H {
            msn: u32::MAX,
            op: 1,
            ..base
        }
        .packet(&[3; 8]),
    );
    send(
        &fd,
        &H {
            op: 3,
            flags: LAST,
            offset: 0,
            ..base
        }
        .packet(&[4; 8]),
    );
    send(
        &fd,
        &H {
            msn: 9,
            op: 99,
            ..base
        }
        .packet(&[]),
    );
    send(
        &fd,
        &H {
            kind: UD,
            op: 0,
            ..base
        }
        .packet(&[5; 8]),
    );
    for kind in [ACK, NAK, READ_RESP, ATOMIC_RESP] {
        send(
            &fd,
            &H {
                kind,
                op: 1,
                offset: u64::MAX - 3,
                ..base
            }
            .packet(&[6; 8]),
        );
    }
    assert_eq!(a.buf.read(0, 4096), vec![0; 4096]);
    assert_eq!(qa.state(), QpState::Rts);
    // In sequence but out of bounds (the length would wrap the address space): refused
    // (a remote access NAK, to b), nothing written, the queue pair in error.
    send(
        &fd,
        &H {
            op: 3,
            total: u64::MAX,
            ..base
        }
        .packet(&[8; 8]),
    );
    assert_eq!(a.buf.read(0, 4096), vec![0; 4096]);
    let deadline = Instant::now() + BOUND;
    while qa.state() != QpState::Err {
        assert!(Instant::now() < deadline, "queue pair not in error");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.buf.read(0, 4096), vec![0; 4096]);
    still_works(&a, &b);
}

#[test]
fn a_lying_responder_cannot_corrupt_the_requester() {
    let a = Node::all_access(4096);
    // A fake peer: a socket of our own where a context of this process would live.
    let (gid, path, listen) = fake_peer(0x7fff_0000 + std::process::id() % 1000);
    let qa = rc_qp_to(&a, gid, 77);
    let conn = accept_hello(&listen, &a, &gid);
    a.buf.write(0, &[0x55; 256]);
    a.post(
        &qa,
        1,
        SendOp::RdmaRead(Remote {
            addr: 0x1000,
            rkey: 9,
        }),
        64,
        32,
    );
    let req = recv(&conn);
    assert_eq!((req[0], req[1]), (REQ, 5));
    let base = H {
        dst_qpn: qa.qp_num(),
        src_qpn: 77,
        msn: 0,
        total: 32,
        ..H::default()
    };
    let lies: Vec<Vec<u8>> = vec![
        H {
            kind: READ_RESP,
            offset: u64::MAX - 7,
            flags: LAST,
            ..base
        }
        .packet(&[1; 16]),
        H {
            kind: READ_RESP,
            offset: 16,
            flags: LAST,
            ..base
        }
        .packet(&[2; 32]),
        H {
            kind: READ_RESP,
            flags: LAST,
            ..base
        }
        .packet(&[3; 64]),
        H {
            kind: READ_RESP,
            msn: 1,
            flags: LAST,
            ..base
        }
        .packet(&[4; 32]),
        H {
            kind: READ_RESP,
            src_qpn: 78,
            flags: LAST,
            ..base
        }
        .packet(&[5; 32]),
        H { kind: ACK, ..base }.packet(&[]),
        H {
            kind: ATOMIC_RESP,
            value: u64::MAX,
            ..base
        }
        .packet(&[]),
        H {
            kind: NAK,
            op: 1,
            msn: 3,
            ..base
        }
        .packet(&[]),
    ];
    for l in &lies {
        send(&conn, l);
    }
    // The true answer, in two fragments.
    send(
        &conn,
        &H {
            kind: READ_RESP,
            ..base
        }
        .packet(&[0xa1; 16]),
    );
    send(
        &conn,
        &H {
            kind: READ_RESP,
            offset: 16,
            flags: LAST,
            ..base
        }
        .packet(&[0xa2; 16]),
    );
    let c = wait_wc(&a.scq, "read");
    assert_eq!((c.wr_id, c.status), (1, WcStatus::Success));
    assert_eq!(a.buf.read(0, 64), vec![0x55; 64], "before the read buffer");
    assert_eq!(a.buf.read(64, 16), vec![0xa1; 16]);
    assert_eq!(a.buf.read(80, 16), vec![0xa2; 16]);
    assert_eq!(
        a.buf.read(96, 160),
        vec![0x55; 160],
        "after the read buffer"
    );
    // The fake peer goes away: the queue pair fails and reports it.
    drop(conn);
    drop(listen);
    let _ = std::fs::remove_file(&path);
    let deadline = Instant::now() + BOUND;
    while qa.state() != QpState::Err {
        assert!(Instant::now() < deadline, "lost peer not noticed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        a.ctx.get_async_event(),
        Some(AsyncEvent {
            event_type: EventType::QpFatal,
            element: EventElement::Qp(qa.qp_num())
        })
    );
}

#[test]
fn a_silent_responder_runs_out_the_transport_timeout() {
    let a = Node::all_access(4096);
    let (gid, path, listen) = fake_peer(0x7ffe_0000 + std::process::id() % 1000);
    let qa = rc_qp_to(&a, gid, 5);
    // timeout 10: 4.096 µs × 2^10 ≈ 4.2 ms per try, retry_cnt 1: two tries.
    let attr = QpAttr {
        qp_state: QpState::Rts,
        timeout: 10,
        retry_cnt: 1,
        ..QpAttr::default()
    };
    qa.modify(&attr, QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT)
        .unwrap();
    let t0 = Instant::now();
    a.post(&qa, 1, SendOp::Send, 0, 8);
    a.post(&qa, 2, SendOp::Send, 0, 8);
    // The peer's socket exists and takes the packets but never answers.
    let c = wait_wc(&a.scq, "timed-out send");
    assert_eq!((c.wr_id, c.status), (1, WcStatus::RetryExcErr));
    assert!(
        t0.elapsed() >= Duration::from_millis(8),
        "gave up before the timeout"
    );
    assert_eq!(wait_wc(&a.scq, "flushed").status, WcStatus::WrFlushErr);
    assert_eq!(qa.state(), QpState::Err);
    drop(listen);
    let _ = std::fs::remove_file(&path);
}

/// SRD acknowledgements in one packet (`SrdAcks`) from a peer that lies: a packet whose
/// length is not a whole number of headers acknowledges nothing, entries of another
/// kind or naming no outstanding send are skipped, and a well-formed one completes each
/// send it names once, however often it names it.
#[test]
fn srd_acknowledgement_packets_are_checked() {
    let a = Node::all_access(4096);
    let (gid, path, listen) = fake_peer(0x7ffe_0000 + std::process::id() % 1000);
    let qa = a.qp(QpType::Srd);
    ud_ready(&qa, 5);
    set_state(&qa, QpState::Rts).unwrap();
    let to = a.ud_target(gid, 77, 5);
    a.buf.write(0, b"datagram");
    for wr_id in [1, 2] {
        a.try_post(&qa, wr_id, SendOp::Send, 0, 8, Some(to.dest()))
            .unwrap();
    }
    let conn = accept_hello(&listen, &a, &gid);
    let msns: Vec<u32> = (0..2)
        .map(|_| {
            let (h, payload) = Hdr::parse(&recv(&conn))
                .map(|(h, p)| (h, p.to_vec()))
                .unwrap();
            assert_eq!(
                (h.kind, payload.as_slice()),
                (Kind::Srd as u8, &b"datagram"[..])
            );
            h.msn
        })
        .collect();
    let ack = |kind: Kind, msn: u32| {
        H {
            kind: kind as u8,
            dst_qpn: qa.qp_num(),
            src_qpn: 77,
            msn,
            ..H::default()
        }
        .emit()
    };
    let bundle = |entries: &[[u8; 64]], extra: usize| {
        let mut body: Vec<u8> = entries.concat();
        body.extend(std::iter::repeat_n(0u8, extra));
        H {
            kind: Kind::SrdAcks as u8,
            total: body.len() as u64,
            ..H::default()
        }
        .packet(&body)
    };
    // Not a whole number of headers: nothing in it counts.
    send(&conn, &bundle(&[ack(Kind::SrdAck, msns[0])], 10));
    // Another kind inside, and an acknowledgement of a send never made: skipped.
    let skipped = [ack(Kind::SrdNak, msns[0]), ack(Kind::SrdAck, 999)];
    send(&conn, &bundle(&skipped, 0));
    // The second send, twice: it completes, once; the packets before it on the
    // connection were handled first, and completed nothing.
    let second = [ack(Kind::SrdAck, msns[1]), ack(Kind::SrdAck, msns[1])];
    send(&conn, &bundle(&second, 0));
    let c = wait_wc(&a.scq, "second send");
    assert_eq!((c.wr_id, c.status), (2, WcStatus::Success));
    assert_empty(&a.scq, "after acknowledgements that acknowledge nothing");
    // Now the first (with the second again, long done).
    let first = [ack(Kind::SrdAck, msns[0]), ack(Kind::SrdAck, msns[1])];
    send(&conn, &bundle(&first, 0));
    let c = wait_wc(&a.scq, "first send");
    assert_eq!((c.wr_id, c.status), (1, WcStatus::Success));
    assert_empty(&a.scq, "after the acknowledgements");
    assert_eq!(qa.state(), QpState::Rts);
    drop(conn);
    drop(listen);
    let _ = std::fs::remove_file(&path);
}

/// SRD datagrams in one packet (`SrdBundle`) from a peer that lies: each well-formed
/// datagram is placed into its own receive and acknowledged; an entry of another kind
/// is skipped; reading stops at an entry longer than what is left.
#[test]
fn srd_bundles_are_read_up_to_their_first_lie() {
    let a = Node::all_access(4096);
    let qa = a.qp(QpType::Srd);
    ud_ready(&qa, 5);
    set_state(&qa, QpState::Rts).unwrap();
    for wr_id in 0..4 {
        a.recv(&qa, wr_id, wr_id as usize * 1024, 1024);
    }
    let fd = connect(&path_of(&a.gid()));
    let me = fake_gid(4343);
    hello(&fd, &me);
    let datagram = |msn: u32, body: &[u8]| {
        H {
            kind: Kind::Srd as u8,
            flags: FIRST | LAST,
            dst_qpn: qa.qp_num(),
            src_qpn: 66,
            msn,
            total: body.len() as u64,
            value: 5,
            ..H::default()
        }
        .packet(body)
    };
    let mut body = datagram(1, b"first");
    body.extend(
        H {
            kind: UD,
            ..H::default()
        }
        .packet(&[]),
    );
    body.extend(datagram(2, b"second"));
    // Claims 100 bytes where 3 are left: the rest of the bundle is not read.
    let mut lie = datagram(3, b"end");
    lie[32..40].copy_from_slice(&100u64.to_le_bytes());
    body.extend(lie);
    let bundle = H {
        kind: Kind::SrdBundle as u8,
        total: body.len() as u64,
        ..H::default()
    }
    .packet(&body);
    send(&fd, &bundle);
    for (wr_id, text) in [(0u64, &b"first"[..]), (1, &b"second"[..])] {
        let c = wait_wc(&a.rcq, "bundled datagram");
        assert_eq!(
            (c.wr_id, c.status, c.src_qp),
            (wr_id, WcStatus::Success, 66)
        );
        assert_eq!(c.byte_len as usize, GRH_LEN + text.len());
        assert_eq!(
            a.buf.read(wr_id as usize * 1024 + GRH_LEN, text.len()),
            text
        );
    }
    assert_empty(&a.rcq, "after the lie");
    // Both acknowledged (one packet of acknowledgements, or each on its own).
    let mut acked = Vec::new();
    while acked.len() < 2 {
        let p = recv(&fd);
        let (h, payload) = Hdr::parse(&p).unwrap();
        if h.kind == Kind::SrdAck as u8 {
            acked.push(h.msn);
        } else if h.kind == Kind::SrdAcks as u8 {
            acked.extend(
                payload
                    .chunks(64)
                    .filter_map(|a| Hdr::parse(a))
                    .map(|(a, _)| a.msn),
            );
        }
    }
    acked.sort_unstable();
    assert_eq!(acked, [1, 2]);
    assert_eq!(qa.state(), QpState::Rts);
}
