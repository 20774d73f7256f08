//! `FI_EP_MSG` on an rdma-core device through librdmacm, with stand-ins for both
//! libraries (ofi-rdma's tests/fake, compiled against the installed headers): the
//! provider's side of the hardware connection manager. `fi_listen`, `FI_CONNREQ` with
//! the requester's data, `fi_accept` (the queue pair moved by the channel, the data
//! framed), `FI_CONNECTED` on both sides with the acceptor's data, `FI_SHUTDOWN` on a
//! disconnect, `FI_ETIMEDOUT` for an address that does not resolve, and the hardware's
//! CM data limit (55 bytes). What the stand-ins cannot show is a real device's answers
//! and traffic. Skipped (with a line) without a C compiler or the headers. The only test
//! of this binary: the libraries are looked up once per process.

#[path = "../../rdma/tests/fake/mod.rs"]
mod fake;

use fake::{framed, StandIns, CONNECTING, CONNECT_RESPONSE, DISCONNECTED, ESTABLISHED, REQUEST};
use ofi::eq::EqAttr;
use ofi::{Caps, EpType, EqEvent, Errno, OpFlags};
use ofi_conformance::fixture;
use ofi_conformance::pair::{self, EqPoller, CTX_A, CTX_B};
use ofi_conformance::plugin::linked_subject;

#[test]
fn connections_go_through_librdmacm_on_an_rdma_core_device() {
    std::env::remove_var("FI_VERBS_DEVICE");
    let Some(fake) = StandIns::install("verbs-hw-stand-in", true) else {
        return;
    };
    let s = linked_subject::<ofi_prov_verbs::VerbsProvider>();
    let info = pair::info_for(&s, EpType::Msg, Caps::MSG).expect("verbs on the stand-in");
    assert_eq!(info.domain_attr.name.as_deref(), Some("fake0"));
    let (fabric, domain) = fixture::open_domain(&s, &info);
    let cq = domain
        .cq_open(&ofi::cq::CqAttr::with_format(ofi::CqFormat::Tagged))
        .unwrap();

    // The server listens; a request arrives with the requester's data.
    let (pep, eq_s, name) = pair::listen(&fabric, &info);
    let eq_c = fabric.eq_open(&EqAttr::default()).unwrap();
    let eqs = [&eq_c, &eq_s];
    let mut poll = EqPoller::new(2);
    fake.request(&framed(b"may I?"), 0x55);
    let req = poll.expect(&eqs, 1, &[&cq], EqEvent::ConnReq, "the listener");
    assert_eq!(req.cm_data, b"may I?");
    let req_info = req.info.expect("FI_CONNREQ info");

    // fi_accept: the channel moves the queue pair, then answers with the data framed.
    let (_, v0) = fake.verbs_since(0);
    let server = domain.endpoint_with(&req_info, CTX_B, 0).unwrap();
    server.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    server.bind_eq(&eq_s).unwrap();
    server.accept(b"ok").unwrap();
    let (moves, _) = fake.verbs_since(v0);
    let states: Vec<&str> = moves
        .iter()
        .map(|m| m.split(' ').nth(2).unwrap_or(""))
        .collect();
    assert_eq!(
        states,
        ["state=1", "state=1", "state=2", "state=3"],
        "INIT at fi_enable, then rdma_cm's INIT, RTR, RTS: {moves:?}"
    );
    let (calls, cm0) = fake.cm_since(0);
    assert!(
        calls.last().is_some_and(|c| c.ends_with("len=3 02 6f 6b")),
        "{calls:?}"
    );
    fake.answer(REQUEST, ESTABLISHED, 0, &[], 0);
    poll.expect(&eqs, 1, &[&cq], EqEvent::Connected, "the server");

    // A client connects: resolution inside the channel, the answer's data reported.
    let client = domain.endpoint_with(&info, CTX_A, 0).unwrap();
    client.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    client.bind_eq(&eq_c).unwrap();
    client.enable().unwrap();
    assert_eq!(
        client.connect(&name, &[0; 56]).unwrap_err().code(),
        Errno::EINVAL,
        "55 bytes of CM data at most on hardware"
    );
    client.connect(&name, b"hi").unwrap();
    assert!(
        eq_c.read().is_err(),
        "nothing to report while resolving (the read drives it)"
    );
    let (calls, _) = fake.cm_since(cm0);
    assert!(
        calls.iter().any(|c| c.starts_with("connect qpn=")),
        "the request went out: {calls:?}"
    );
    fake.answer(CONNECTING, CONNECT_RESPONSE, 0, &framed(b"welcome"), 0x77);
    let up = poll.expect(&eqs, 0, &[&cq], EqEvent::Connected, "the client");
    assert_eq!(up.cm_data, b"welcome");

    // The peer goes: FI_SHUTDOWN.
    fake.answer(CONNECTING, DISCONNECTED, 0, &[], 0);
    poll.expect(&eqs, 0, &[&cq], EqEvent::Shutdown, "the client");

    // An address that does not resolve in time: an error event FI_ETIMEDOUT.
    let late = domain.endpoint_with(&info, CTX_A + 1, 0).unwrap();
    late.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    late.bind_eq(&eq_c).unwrap();
    fake.fail_next_resolution(-110); // -ETIMEDOUT
    late.connect(&name, b"").unwrap();
    match poll.next(&eqs, 0, &[&cq]) {
        Some(Err(ee)) => assert_eq!(ee.err, Errno::ETIMEDOUT, "{ee:?}"),
        other => panic!("expected an FI_ETIMEDOUT error event, got {other:?}"),
    }

    drop((late, client, server, pep, eq_c, eq_s, cq));
    fixture::close_domain(fabric, domain);
    assert!(!fake.cm_log().iter().any(|l| l.contains("UNACKED")));
    fake.clean_up();
}
