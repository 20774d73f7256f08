//! The librdmacm backend's connecting and accepting sides, driven through stand-ins for
//! librdmacm and libibverbs (tests/fake, compiled here against the installed headers
//! and loaded through `OFI_RDMA_RDMACM_LIB` and `OFI_RDMA_IBVERBS_LIB`): the queue pair
//! comes from the stand-in device `fake0`, and the test checks the calls the channel
//! makes and in which order — address, then route resolution as internal steps, the
//! queue pair moved to INIT with rdma_init_qp_attr's attributes before `rdma_connect`
//! (which carries its number and the framed data), RTR, RTS and `rdma_establish` on the
//! answer; an acceptor's queue pair through INIT, RTR and RTS before `rdma_accept` —
//! and the events that come out (established with the peer's data, rejected, failed
//! with the status's code, disconnected). What the stand-ins cannot show is a real
//! device's answers. Skipped (with a line) without a C compiler or the headers. The
//! only test of this binary: the libraries are looked up once per process.

mod common;
mod fake;

use std::time::Duration;

use fake::{framed, StandIns, CONNECTING, CONNECT_RESPONSE, DISCONNECTED, ESTABLISHED};
use fake::{REJECTED, REQUEST};
use ofi_core::Errno;
use ofi_rdma::*;

const WAIT: Duration = Duration::from_secs(5);

fn me(data: &[u8]) -> CmPeer {
    CmPeer {
        gid: Gid([0; 16]),
        qpn: 0,
        private_data: data.to_vec(),
        source: None,
    }
}

#[test]
fn connecting_and_accepting_run_against_stand_ins() {
    let Some(fake) = StandIns::install("rdmacm-fake-active", true) else {
        return;
    };

    let dev = device_list(DeviceKind::RdmaCore).expect("the stand-in's device")[0].clone();
    assert_eq!(dev.name(), "fake0");
    let ctx = dev.open().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, 0, None).unwrap();
    let rc_qp = || common::small_rc_qp(&pd, &cq, &cq);
    let qp = rc_qp();
    let qpn = qp.qp_num();
    let ch = CmChannel::open(DeviceKind::RdmaCore).unwrap();
    let dst: std::net::SocketAddr = "10.0.0.9:7471".parse().unwrap();

    // Connect: address and route resolved inside the channel, INIT, the request.
    let (_, cm0) = fake.cm_since(0);
    let (_, v0) = fake.verbs_since(0);
    let id = ch.connect(dst, &me(b"hi"), &qp).unwrap();
    assert_eq!(ch.get_event(), None, "resolution is internal");
    let (calls, cm1) = fake.cm_since(cm0);
    assert_eq!(
        calls,
        [
            "create_id ps=262".to_string(),
            "resolve_addr ms=2000".into(),
            "get_cm_event 0".into(),
            "resolve_route ms=2000".into(),
            "ack_cm_event 0".into(),
            "get_cm_event 2".into(),
            "init_qp_attr state=1".into(),
            format!("connect qpn={qpn} len=3 02 68 69"),
            "connect srq=0 retry=7 rnr=7".into(),
            "ack_cm_event 2".into(),
        ]
    );
    let (moves, v1) = fake.verbs_since(v0);
    assert_eq!(moves, [format!("modify_qp qpn={qpn} state=1 mask=1")]);

    // The answer: RTR (with the destination rdma_cm gave), RTS, establish; the event
    // carries the acceptor's queue pair and data.
    fake.answer(CONNECTING, CONNECT_RESPONSE, 0, &framed(b"welcome"), 0x77);
    let ev = ch.wait_event(WAIT).expect("established");
    assert_eq!(ev.id, id);
    assert_eq!(
        ev.kind,
        CmEventKind::Established {
            peer: CmPeer {
                gid: Gid([0x5a; 16]),
                qpn: 0x77,
                private_data: b"welcome".to_vec(),
                source: Some(dst),
            }
        }
    );
    let (calls, cm2) = fake.cm_since(cm1);
    assert_eq!(
        calls,
        [
            "get_cm_event 5",
            "init_qp_attr state=2",
            "init_qp_attr state=3",
            "establish",
            "ack_cm_event 5"
        ]
    );
    let (moves, v2) = fake.verbs_since(v1);
    assert_eq!(
        moves,
        [
            format!("modify_qp qpn={qpn} state=2 mask={}", 1 | (1 << 20)),
            format!("modify_qp qpn={qpn} state=3 mask=1"),
        ],
        "RTR with the destination queue pair rdma_cm computed, then RTS"
    );

    // The peer disconnects: reported, the id destroyed after the ack.
    fake.answer(CONNECTING, DISCONNECTED, 0, &[], 0);
    let ev = ch.wait_event(WAIT).expect("disconnected");
    assert_eq!((ev.id, ev.kind), (id, CmEventKind::Disconnected));
    let (calls, cm3) = fake.cm_since(cm2);
    assert_eq!(calls, ["get_cm_event 10", "ack_cm_event 10", "destroy_id"]);
    assert_eq!(
        ch.disconnect(id).unwrap_err().code(),
        Errno::ENOENT,
        "forgotten"
    );

    // An address that does not resolve in time: FI_ETIMEDOUT, nothing sent.
    fake.fail_next_resolution(-libc::ETIMEDOUT);
    let id = ch.connect(dst, &me(b""), &qp).unwrap();
    let ev = ch.wait_event(WAIT).expect("failed");
    assert_eq!(
        (ev.id, ev.kind),
        (
            id,
            CmEventKind::Failed {
                err: Errno::ETIMEDOUT
            }
        )
    );
    let (calls, cm4) = fake.cm_since(cm3);
    assert!(!calls.iter().any(|c| c.starts_with("connect")), "{calls:?}");
    assert_eq!(calls.last().map(String::as_str), Some("destroy_id"));

    // A rejection carries the rejecter's data.
    let id = ch.connect(dst, &me(b"again"), &qp).unwrap();
    assert_eq!(ch.get_event(), None);
    fake.answer(CONNECTING, REJECTED, 28, &framed(b"busy"), 0);
    let ev = ch.wait_event(WAIT).expect("rejected");
    assert_eq!(
        (ev.id, ev.kind),
        (
            id,
            CmEventKind::Rejected {
                private_data: b"busy".to_vec()
            }
        )
    );
    let (_, cm5) = fake.cm_since(cm4);
    let (_, v5) = fake.verbs_since(v2);

    // Accepting: a request, the acceptor's queue pair through INIT, RTR and RTS, then
    // rdma_accept with its number and the framed data; established on ESTABLISHED.
    let (lid, _) = ch.listen("10.0.0.1:0".parse().unwrap()).unwrap();
    let qp2 = rc_qp();
    let qpn2 = qp2.qp_num();
    let hello = framed(b"hello");
    fake.request(&hello, 0x55);
    let req = ch.wait_event(WAIT).expect("the request");
    let CmEventKind::ConnectRequest { listener, peer } = req.kind else {
        panic!("{req:?}")
    };
    assert_eq!((listener, peer.qpn), (lid, 0x55));
    assert_eq!(peer.private_data, b"hello");
    assert_eq!(
        ch.accept(req.id, &me(&[0; 196]), &qp2).unwrap_err().code(),
        Errno::EINVAL,
        "over 195 bytes"
    );
    ch.accept(req.id, &me(b"ok"), &qp2).unwrap();
    let (moves, v6) = fake.verbs_since(v5);
    assert_eq!(
        moves,
        [
            format!("modify_qp qpn={qpn2} state=1 mask=1"),
            format!("modify_qp qpn={qpn2} state=2 mask={}", 1 | (1 << 20)),
            format!("modify_qp qpn={qpn2} state=3 mask=1"),
        ]
    );
    let (calls, cm6) = fake.cm_since(cm5);
    assert_eq!(
        calls.last().map(String::as_str),
        Some(format!("accept qpn={qpn2} len=3 02 6f 6b").as_str())
    );
    assert_eq!(
        ch.accept(req.id, &me(b""), &qp2).unwrap_err().code(),
        Errno::EINVAL,
        "answered already"
    );
    fake.answer(REQUEST, ESTABLISHED, 0, &[], 0);
    let ev = ch.wait_event(WAIT).expect("established");
    assert_eq!(
        (ev.id, ev.kind),
        (req.id, CmEventKind::Established { peer })
    );
    ch.disconnect(req.id).unwrap();
    let (calls, _) = fake.cm_since(cm6);
    assert_eq!(&calls[calls.len() - 2..], ["disconnect", "destroy_id"]);
    assert!(fake.verbs_since(v6).0.is_empty());

    // An answer the connector refuses: the acceptor's connection fails.
    fake.request(&hello, 0x56);
    let req = ch.wait_event(WAIT).expect("a second request");
    let qp3 = rc_qp();
    ch.accept(req.id, &me(b""), &qp3).unwrap();
    fake.answer(REQUEST, REJECTED, 28, &[], 0);
    let ev = ch.wait_event(WAIT).expect("failed");
    assert_eq!(
        (ev.id, ev.kind),
        (
            req.id,
            CmEventKind::Failed {
                err: Errno::ECONNREFUSED
            }
        )
    );

    // A queue pair of another device kind is refused.
    let soft = device_list(DeviceKind::Soft).unwrap()[0].open().unwrap();
    let spd = soft.alloc_pd().unwrap();
    let scq = soft.create_cq(16, 0, None).unwrap();
    let sqp = common::small_rc_qp(&spd, &scq, &scq);
    assert_eq!(
        ch.connect(dst, &me(b""), &sqp).unwrap_err().code(),
        Errno::EINVAL
    );

    drop(ch);
    let (all, _) = fake.cm_since(0);
    assert!(
        !all.iter().any(|l| l.contains("UNACKED")),
        "an id destroyed with its event taken: {all:?}"
    );
    assert_eq!(
        all.last().map(String::as_str),
        Some("destroy_event_channel")
    );
    drop((qp, qp2, qp3, cq, pd, ctx));
    fake.clean_up();
}
