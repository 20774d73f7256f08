//! The librdmacm backend of the connection manager, as far as this machine (librdmacm
//! installed, no RDMA device, no /dev/infiniband/rdma_cm) lets it run: opening the
//! channel fails with one line naming the cause, and the translation of rdma_cm events
//! to the channel's steps, on events built here as librdmacm would hand them over.

use std::net::SocketAddr;

use ofi_core::Errno;
use ofi_rdma::cm::{translate, CmStep, HW_ACCEPT_PRIVATE_MAX, HW_CONNECT_PRIVATE_MAX};
use ofi_rdma::sys::rdmacm::*;
use ofi_rdma::{CmChannel, CmPeer, DeviceKind, Gid};

#[test]
fn without_the_kernel_connection_manager_the_channel_says_why() {
    if std::path::Path::new("/dev/infiniband/rdma_cm").exists() {
        eprintln!("rdmacm: this host has /dev/infiniband/rdma_cm: the refusal is not testable");
        return;
    }
    let e = CmChannel::open(DeviceKind::RdmaCore).unwrap_err();
    assert_eq!(e.code(), Errno::ENODEV, "{e}");
    let msg = e.message();
    eprintln!("rdmacm: the rdma-core channel says: {msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert!(
        msg.contains("rdma_cm") || msg == "librdmacm.so.1 not found",
        "the reason names the cause: {msg}"
    );
    // The software device's channel is unaffected.
    let soft = CmChannel::open(DeviceKind::Soft).unwrap();
    assert_eq!(soft.kind(), DeviceKind::Soft);
    assert!(!soft.drives_qp());
    assert_eq!(
        soft.connect_private_max(),
        ofi_rdma::cm::CONNECT_PRIVATE_MAX
    );
}

/// A zeroed `rdma_cm_id` (every member is a pointer or plain data: zero is valid).
fn blank_id() -> Box<RdmaCmId> {
    // SAFETY: all-zero bytes are a valid value of this plain C struct.
    Box::new(unsafe { std::mem::zeroed() })
}

/// An id whose route names `dst` and the peer GID `dgid`.
fn id_towards(dst: SocketAddr, dgid: [u8; 16]) -> Box<RdmaCmId> {
    let mut id = blank_id();
    let SocketAddr::V4(v4) = dst else {
        panic!("IPv4 in these tests")
    };
    let p: *mut libc::sockaddr_storage = &mut id.route.addr.dst_storage;
    // SAFETY: all-zero bytes are a valid sockaddr_in; the storage holds one.
    let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sin.sin_family = libc::AF_INET as libc::sa_family_t;
    sin.sin_port = v4.port().to_be();
    sin.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    // SAFETY: the storage is larger than, and aligned for, a sockaddr_in.
    unsafe { p.cast::<libc::sockaddr_in>().write(sin) };
    id.route.addr.ibaddr.dgid.raw = dgid;
    id
}

fn conn(data: &[u8], len: u8, qp_num: u32) -> RdmaConnParam {
    RdmaConnParam {
        private_data: if data.is_empty() {
            std::ptr::null()
        } else {
            data.as_ptr().cast()
        },
        private_data_len: len,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 0,
        rnr_retry_count: 0,
        srq: 0,
        qp_num,
    }
}

fn event(kind: &str, status: i32, id: *mut RdmaCmId, c: RdmaConnParam) -> RdmaCmEvent {
    let n = RDMA_CM_EVENTS
        .iter()
        .position(|e| *e == kind)
        .unwrap_or_else(|| panic!("no event {kind}"));
    RdmaCmEvent {
        id,
        listen_id: std::ptr::null_mut(),
        event: n as u32,
        status,
        param: RdmaCmEventParam { conn: c },
    }
}

/// `data` framed (length byte) and padded to `pad` bytes, as InfiniBand delivers it.
fn framed(data: &[u8], pad: usize) -> Vec<u8> {
    let mut v = vec![data.len() as u8];
    v.extend_from_slice(data);
    v.resize(pad, 0);
    v
}

fn step(ev: &RdmaCmEvent) -> CmStep {
    // SAFETY: the events of these tests point at live ids and at buffers at least
    // as long as their private_data_len, or at nothing.
    unsafe { translate(ev) }
}

#[test]
fn a_connect_request_names_the_requester_and_its_data() {
    let from: SocketAddr = "10.0.0.7:40000".parse().unwrap();
    let mut id = id_towards(from, [7; 16]);
    let data = framed(b"hello", 56);
    let ev = event("CONNECT_REQUEST", 0, &mut *id, conn(&data, 56, 0x1234));
    assert_eq!(
        step(&ev),
        CmStep::ConnectRequest(CmPeer {
            gid: Gid([7; 16]),
            qpn: 0x1234,
            private_data: b"hello".to_vec(),
            source: Some(from),
        })
    );
}

#[test]
fn the_answer_carries_the_acceptors_queue_pair_and_data() {
    let to: SocketAddr = "10.0.0.8:7471".parse().unwrap();
    let mut id = id_towards(to, [8; 16]);
    let data = framed(&[0xab; HW_ACCEPT_PRIVATE_MAX], 196);
    let ev = event("CONNECT_RESPONSE", 0, &mut *id, conn(&data, 196, 99));
    match step(&ev) {
        CmStep::ConnectResponse(p) => {
            assert_eq!(p.qpn, 99);
            assert_eq!(p.gid, Gid([8; 16]));
            assert_eq!(p.private_data, vec![0xab; HW_ACCEPT_PRIVATE_MAX]);
            assert_eq!(p.source, Some(to));
        }
        other => panic!("{other:?}"),
    }
    let ev = event("ESTABLISHED", 0, &mut *id, conn(&[], 0, 99));
    assert!(matches!(step(&ev), CmStep::Established(p) if p.private_data.is_empty()));
}

#[test]
fn address_and_route_resolution_are_internal_steps() {
    let mut id = blank_id();
    for (kind, want) in [
        ("ADDR_RESOLVED", CmStep::AddrResolved),
        ("ROUTE_RESOLVED", CmStep::RouteResolved),
        ("TIMEWAIT_EXIT", CmStep::Ignored),
        ("ADDR_CHANGE", CmStep::Ignored),
        ("MULTICAST_JOIN", CmStep::Ignored),
        ("DISCONNECTED", CmStep::Disconnected),
    ] {
        assert_eq!(
            step(&event(kind, 0, &mut *id, conn(&[], 0, 0))),
            want,
            "{kind}"
        );
    }
    // An event type this binding does not know.
    let mut ev = event("ADDR_RESOLVED", 0, &mut *id, conn(&[], 0, 0));
    ev.event = 4242;
    assert_eq!(step(&ev), CmStep::Ignored);
}

#[test]
fn errors_become_unreachable_refused_or_timed_out() {
    let mut id = blank_id();
    let cases = [
        ("ADDR_ERROR", -libc::EHOSTUNREACH, Errno::EHOSTUNREACH),
        ("ADDR_ERROR", -libc::ENETUNREACH, Errno::EHOSTUNREACH),
        ("ADDR_ERROR", -libc::ETIMEDOUT, Errno::ETIMEDOUT),
        ("ADDR_ERROR", -libc::EINVAL, Errno::EHOSTUNREACH),
        ("ROUTE_ERROR", -libc::ETIMEDOUT, Errno::ETIMEDOUT),
        ("ROUTE_ERROR", -libc::EIO, Errno::EHOSTUNREACH),
        ("UNREACHABLE", -libc::ETIMEDOUT, Errno::ETIMEDOUT),
        ("UNREACHABLE", 0, Errno::EHOSTUNREACH),
        ("CONNECT_ERROR", -libc::ECONNREFUSED, Errno::ECONNREFUSED),
        ("CONNECT_ERROR", 5, Errno::ECONNREFUSED),
        ("CONNECT_ERROR", i32::MIN, Errno::ECONNREFUSED),
        ("DEVICE_REMOVAL", 0, Errno::ENODEV),
    ];
    for (kind, status, want) in cases {
        assert_eq!(
            step(&event(kind, status, &mut *id, conn(&[], 0, 0))),
            CmStep::Failed(want),
            "{kind} status {status}"
        );
    }
}

#[test]
fn a_reject_carries_the_rejecters_data_and_nothing_else() {
    let mut id = blank_id();
    // An application's reject (InfiniBand consumer reason 28): framed data.
    let data = framed(b"go away", 196);
    let ev = event("REJECTED", 28, &mut *id, conn(&data, 196, 0));
    assert_eq!(step(&ev), CmStep::Rejected(b"go away".to_vec()));
    // Nobody listening (invalid service id, 8): no data at all.
    let ev = event("REJECTED", 8, &mut *id, conn(&[], 0, 0));
    assert_eq!(step(&ev), CmStep::Rejected(Vec::new()));
    // A frame claiming more than arrived reads as no data.
    let lie = [200u8, 1, 2, 3];
    let ev = event("REJECTED", 28, &mut *id, conn(&lie, 4, 0));
    assert_eq!(step(&ev), CmStep::Rejected(Vec::new()));
}

#[test]
fn a_peer_length_is_bounded_by_the_exchange() {
    // The request says 255 bytes: only InfiniBand's 56 are read (the buffer here has
    // exactly 56), and the frame inside says 55.
    let from: SocketAddr = "10.0.0.9:1".parse().unwrap();
    let mut id = id_towards(from, [1; 16]);
    let data = framed(&[5; HW_CONNECT_PRIVATE_MAX], 56);
    assert_eq!(data.len(), 56);
    let ev = event("CONNECT_REQUEST", 0, &mut *id, conn(&data, 255, 3));
    match step(&ev) {
        CmStep::ConnectRequest(p) => assert_eq!(p.private_data, vec![5; HW_CONNECT_PRIVATE_MAX]),
        other => panic!("{other:?}"),
    }
    // A frame claiming 60 bytes inside the 56 that may be read: no data.
    let mut lie = data.clone();
    lie[0] = 60;
    let ev = event("CONNECT_REQUEST", 0, &mut *id, conn(&lie, 255, 3));
    assert!(matches!(step(&ev), CmStep::ConnectRequest(p) if p.private_data.is_empty()));
    // No id and no data pointer: nothing is followed.
    let ev = event("CONNECT_REQUEST", 0, std::ptr::null_mut(), conn(&[], 56, 3));
    assert_eq!(
        step(&ev),
        CmStep::ConnectRequest(CmPeer {
            gid: Gid([0; 16]),
            qpn: 3,
            private_data: Vec::new(),
            source: None,
        })
    );
}
