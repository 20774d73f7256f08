//! The software device's connection manager: request, accept and ready-to-use carrying
//! queue pairs and private data, then RC traffic over what was exchanged; reject;
//! nobody listening; disconnect and a vanished peer; garbage at a listener.

mod common;

use std::net::SocketAddr;

use common::*;
use ofi_core::Errno;
use ofi_rdma::*;

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn event(ch: &CmChannel, what: &str) -> CmEvent {
    ch.wait_event(BOUND)
        .unwrap_or_else(|| panic!("no {what} event within {BOUND:?}"))
}

fn me(n: &Node, qp: &QueuePair, data: &[u8]) -> CmPeer {
    CmPeer {
        gid: n.gid(),
        qpn: qp.qp_num(),
        private_data: data.to_vec(),
        source: None,
    }
}

#[test]
fn exchange_connects_two_queue_pairs() {
    let server = CmChannel::new().unwrap();
    let client = CmChannel::new().unwrap();
    let (lid, addr) = server.listen(any_port()).unwrap();
    assert_ne!(addr.port(), 0);
    let a = Node::all_access(4096);
    let b = Node::all_access(4096);
    let qa = a.qp(QpType::Rc);
    let qb = b.qp(QpType::Rc);
    rc_init(&qa);
    rc_init(&qb);
    // The requester names its own address (rdma_cm's IP header): the acceptor learns it.
    let from: std::net::SocketAddr = "[fe80::1]:4791".parse().unwrap();
    let hello = CmPeer {
        source: Some(from),
        ..me(&a, &qa, b"hello")
    };
    let cid = client.connect(addr, &hello, &qa).unwrap();
    // The channel's fd says there is something to read.
    assert!(
        readable_within(server.fd(), BOUND),
        "channel fd not readable"
    );
    let req = event(&server, "connect request");
    let CmEventKind::ConnectRequest { listener, peer } = req.kind else {
        panic!("{req:?}")
    };
    assert_eq!(listener, lid);
    assert_eq!(
        peer, hello,
        "the request's queue pair, data and source address"
    );
    // The acceptor's queue pair goes to RTS before it answers.
    rc_connect(&qb, peer.gid, peer.qpn, 0, 1);
    b.recv(&qb, 1, 0, 64);
    server
        .accept(req.id, &me(&b, &qb, b"welcome"), &qb)
        .unwrap();
    let est = event(&client, "established (client)");
    assert_eq!(est.id, cid);
    let CmEventKind::Established { peer } = est.kind else {
        panic!("{est:?}")
    };
    assert_eq!(
        peer,
        me(&b, &qb, b"welcome"),
        "no source address given: none read"
    );
    rc_connect(&qa, peer.gid, peer.qpn, 0, 1);
    let est = event(&server, "established (server)");
    assert_eq!(
        (est.id, matches!(est.kind, CmEventKind::Established { .. })),
        (req.id, true)
    );
    a.buf.write(0, b"over cm");
    a.post(&qa, 1, SendOp::Send, 0, 7);
    assert_eq!(wait_wc(&a.scq, "send").status, WcStatus::Success);
    assert_eq!(wait_wc(&b.rcq, "recv").byte_len, 7);
    assert_eq!(b.buf.read(0, 7), b"over cm");
    // Disconnect: the other side hears it.
    client.disconnect(cid).unwrap();
    let d = event(&server, "disconnect");
    assert_eq!(
        d,
        CmEvent {
            id: req.id,
            kind: CmEventKind::Disconnected
        }
    );
    // The connection is gone: answering it is refused.
    assert_eq!(
        server
            .accept(req.id, &me(&b, &qb, b""), &qb)
            .unwrap_err()
            .code(),
        Errno::ENOENT
    );
}

#[test]
fn reject_carries_private_data_and_nobody_listening_is_refused() {
    let server = CmChannel::new().unwrap();
    let client = CmChannel::new().unwrap();
    let (_lid, addr) = server.listen(any_port()).unwrap();
    let a = Node::all_access(64);
    let qa = a.qp(QpType::Rc);
    let cid = client.connect(addr, &me(&a, &qa, b""), &qa).unwrap();
    let req = event(&server, "request");
    server.reject(req.id, b"no room").unwrap();
    let r = event(&client, "rejected");
    assert_eq!(
        r,
        CmEvent {
            id: cid,
            kind: CmEventKind::Rejected {
                private_data: b"no room".to_vec()
            }
        }
    );
    // Private data limits.
    let big = CmPeer {
        private_data: vec![0; cm::CONNECT_PRIVATE_MAX + 1],
        ..me(&a, &qa, b"")
    };
    assert_eq!(
        client.connect(addr, &big, &qa).unwrap_err().code(),
        Errno::EINVAL
    );
    // Nobody at this address (an address no test listens at).
    let nobody: SocketAddr = format!("127.9.9.9:{}", addr.port()).parse().unwrap();
    let e = client.connect(nobody, &me(&a, &qa, b""), &qa).unwrap_err();
    assert!(
        e.code() == Errno::ECONNREFUSED || e.code() == Errno::ENOENT,
        "{e}"
    );
    // The same address twice is refused while the first listens.
    assert_eq!(server.listen(addr).unwrap_err().code(), Errno::EADDRINUSE);
}

#[test]
fn a_vanished_peer_is_a_disconnect() {
    let server = CmChannel::new().unwrap();
    let (_lid, addr) = server.listen(any_port()).unwrap();
    let a = Node::all_access(64);
    let qa = a.qp(QpType::Rc);
    let client = CmChannel::new().unwrap();
    let _cid = client.connect(addr, &me(&a, &qa, b""), &qa).unwrap();
    let req = event(&server, "request");
    server.accept(req.id, &me(&a, &qa, b""), &qa).unwrap();
    assert!(matches!(
        event(&client, "established").kind,
        CmEventKind::Established { .. }
    ));
    assert!(matches!(
        event(&server, "established").kind,
        CmEventKind::Established { .. }
    ));
    // Its sockets close as when its process ends.
    drop(client);
    assert_eq!(
        event(&server, "disconnect"),
        CmEvent {
            id: req.id,
            kind: CmEventKind::Disconnected
        }
    );
}

/// The socket path of the listener at `addr`.
fn listener_path(addr: SocketAddr) -> std::path::PathBuf {
    let dir = std::env::var("FI_VERBS_SOFT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            // SAFETY: plain syscall.
            std::path::PathBuf::from(format!("/tmp/ofi-rdma-soft-{}", unsafe { libc::getuid() }))
        });
    dir.join(format!("cm-{}-{}", addr.ip(), addr.port()))
}

/// A raw seqpacket connection to `path` (the caller closes the fd).
fn raw_connect(path: &std::path::Path) -> i32 {
    // SAFETY: plain socket calls on our own fd and buffers.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
        assert!(fd >= 0);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in sa.sun_path.iter_mut().zip(path.to_str().unwrap().bytes()) {
            *d = s as libc::c_char;
        }
        assert_eq!(
            libc::connect(
                fd,
                (&sa as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as u32
            ),
            0
        );
        fd
    }
}

#[test]
fn a_malformed_source_address_is_read_as_none() {
    let server = CmChannel::new().unwrap();
    let (_lid, addr) = server.listen(any_port()).unwrap();
    let path = listener_path(addr);
    // A connect request: type 1, queue pair 77, GID 0, 2 bytes of private data.
    let mut req = vec![0u8; 24];
    req[0] = 1;
    req[4] = 77;
    req.extend_from_slice(&2u16.to_le_bytes());
    req.extend_from_slice(b"pd");
    let mut v4_mapped = [0u8; 16];
    v4_mapped[10] = 0xff;
    v4_mapped[11] = 0xff;
    v4_mapped[12..].copy_from_slice(&[10, 0, 0, 7]);
    let trailer = |family: u8, ip: [u8; 16], port: u16| -> Vec<u8> {
        let mut t = vec![family];
        t.extend_from_slice(&ip);
        t.extend_from_slice(&port.to_le_bytes());
        t
    };
    let cases: [(Vec<u8>, Option<SocketAddr>); 5] = [
        (Vec::new(), None),
        (trailer(9, v4_mapped, 1), None),
        (trailer(4, v4_mapped, 1)[..10].to_vec(), None),
        (trailer(4, [0xfe; 16], 1), None),
        (
            trailer(4, v4_mapped, 4791),
            Some("10.0.0.7:4791".parse().unwrap()),
        ),
    ];
    for (tail, want) in cases {
        let mut m = req.clone();
        m.extend_from_slice(&tail);
        let fd = raw_connect(&path);
        // SAFETY: sends our own buffer on our own fd.
        unsafe { libc::send(fd, m.as_ptr().cast(), m.len(), libc::MSG_NOSIGNAL) };
        let ev = event(&server, "request");
        let CmEventKind::ConnectRequest { peer, .. } = ev.kind else {
            panic!("{ev:?}")
        };
        assert_eq!(
            (peer.qpn, peer.private_data.as_slice(), peer.source),
            (77, &b"pd"[..], want),
            "trailer {tail:?}"
        );
        server.reject(ev.id, &[]).unwrap();
        // SAFETY: our own fd.
        unsafe { libc::close(fd) };
    }
}

#[test]
fn garbage_at_a_listener_makes_no_event() {
    let server = CmChannel::new().unwrap();
    let (_lid, addr) = server.listen(any_port()).unwrap();
    let path = listener_path(addr);
    let stream = std::os::unix::net::UnixStream::connect(&path);
    // A stream socket cannot reach a seqpacket listener.
    assert!(stream.is_err());
    let fd = raw_connect(&path);
    // SAFETY: sends our own buffers on our own fd.
    unsafe {
        for m in [
            &[1u8][..],
            &[1u8; 25],
            &[9u8; 40],
            &{
                let mut m = [0u8; 30];
                m[0] = 1;
                m[24] = 200;
                m
            }[..],
        ] {
            libc::send(fd, m.as_ptr().cast(), m.len(), libc::MSG_NOSIGNAL);
        }
        libc::close(fd);
    }
    // Drained without an event (bounded), and the channel still works.
    for _ in 0..20 {
        assert_eq!(server.get_event(), None);
        std::thread::yield_now();
    }
    let client = CmChannel::new().unwrap();
    let a = Node::all_access(64);
    let qa = a.qp(QpType::Rc);
    client.connect(addr, &me(&a, &qa, b"x"), &qa).unwrap();
    assert!(matches!(
        event(&server, "request").kind,
        CmEventKind::ConnectRequest { .. }
    ));
}
