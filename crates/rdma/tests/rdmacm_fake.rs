//! The librdmacm backend driven through a stand-in library (tests/fake/librdmacm_fake.c,
//! compiled here against the installed `<rdma/rdma_cma.h>` and loaded through
//! `OFI_RDMA_RDMACM_LIB`): the passive side's calls and bookkeeping run for real —
//! listening, a connect request taken from the event channel (its fd, its events
//! acknowledged), rejected with framed data, a request for a closed listener refused,
//! events of unknown ids ignored, ids destroyed only after their event is
//! acknowledged, the channel destroyed last. The active side and accepting need an
//! rdma-core queue pair, which needs a device: not here. Skipped (with a line saying
//! so) without a C compiler or the header. The only test of this binary: the library
//! is looked up once per process.

mod common;
mod fake;

use std::time::Duration;

use common::readable_within;
use fake::{framed, StandIns};
use ofi_core::Errno;
use ofi_rdma::{CmChannel, CmEventKind, CmPeer, DeviceKind, Gid};

#[test]
fn the_passive_side_runs_against_a_stand_in_librdmacm() {
    let Some(fake) = StandIns::install("rdmacm-fake", false) else {
        return;
    };
    let ch = CmChannel::open(DeviceKind::RdmaCore).expect("the stand-in's channel");
    assert!(ch.drives_qp());
    assert_eq!(
        (ch.connect_private_max(), ch.accept_private_max()),
        (55, 195)
    );
    assert_eq!(ch.get_event(), None, "nothing queued: EAGAIN, no block");
    assert!(!readable_within(ch.fd(), Duration::ZERO));

    let (lid, at) = ch.listen("10.0.0.1:0".parse().unwrap()).unwrap();
    assert_eq!(
        at,
        "10.0.0.1:7471".parse().unwrap(),
        "the bound port read back"
    );

    // A request with framed private data ("hello"), padded to 56 on the wire.
    fake.request(&framed(b"hello"), 77);
    assert!(
        readable_within(ch.fd(), Duration::ZERO),
        "the channel's fd signals the event"
    );
    let ev = ch.wait_event(Duration::from_secs(5)).expect("the request");
    assert_eq!(
        ev.kind,
        CmEventKind::ConnectRequest {
            listener: lid,
            peer: CmPeer {
                gid: Gid([0x5a; 16]),
                qpn: 77,
                private_data: b"hello".to_vec(),
                source: Some("10.0.0.5:5555".parse().unwrap()),
            },
        }
    );
    let mark = fake.cm_log().len();
    ch.reject(ev.id, b"no").unwrap();
    assert_eq!(
        fake.cm_since(mark).0,
        ["reject len=3 02 6e 6f", "destroy_id"],
        "the data framed, the id destroyed"
    );
    assert_eq!(ch.reject(ev.id, b"").unwrap_err().code(), Errno::ENOENT);
    assert_eq!(
        ch.reject(ev.id, &[0; 196]).unwrap_err().code(),
        Errno::EINVAL,
        "over 195 bytes"
    );

    // A request, then the listener closes: refused and destroyed after the ack.
    fake.request(&[0], 78);
    let mark = fake.cm_log().len();
    ch.close_listener(lid);
    assert_eq!(ch.get_event(), None, "no listener to report it to");
    assert_eq!(
        fake.cm_since(mark).0,
        [
            "destroy_id",
            "get_cm_event 4",
            "reject len=0",
            "ack_cm_event 4",
            "destroy_id"
        ]
    );

    // Events of ids the channel does not know: acknowledged, ignored.
    let (lid2, _) = ch.listen("10.0.0.1:7000".parse().unwrap()).unwrap();
    fake.stray_event(fake::DISCONNECTED);
    fake.stray_event(fake::TIMEWAIT_EXIT);
    assert_eq!(ch.get_event(), None);
    assert!(!readable_within(ch.fd(), Duration::ZERO), "both taken");

    // A request disconnected before it is answered: destroyed without
    // rdma_disconnect (there is no connection).
    fake.request(&[1, 0xee], 79);
    let ev = ch.wait_event(Duration::from_secs(5)).expect("the request");
    assert!(matches!(
        ev.kind,
        CmEventKind::ConnectRequest { listener, ref peer }
            if listener == lid2 && peer.private_data == [0xee]
    ));
    let mark = fake.cm_log().len();
    ch.disconnect(ev.id).unwrap();
    assert_eq!(fake.cm_since(mark).0, ["destroy_id"]);

    drop(ch);
    let log = fake.cm_log();
    assert!(
        !log.iter().any(|l| l.contains("UNACKED")),
        "an id destroyed with its event taken: {log:?}"
    );
    assert_eq!(
        &log[log.len() - 2..],
        ["destroy_id", "destroy_event_channel"]
    );
    fake.clean_up();
}
