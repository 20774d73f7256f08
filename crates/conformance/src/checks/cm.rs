//! Connection management (`FI_EP_MSG`): connect and accept data, `FI_CONNREQ` /
//! `FI_CONNECTED` contents, `fi_getpeer`, reject with data (the client gets an error
//! event `FI_ECONNREFUSED` carrying the data), and `fi_shutdown` (the peer reads
//! `FI_SHUTDOWN`). Every wait is bounded.

use ofi::eq::EqAttr;
use ofi::{Caps, EpType, EqEvent, Errno, OpFlags};

use crate::pair::{self, EqPoller, Pair, PairSpec, CTX_A};
use crate::{fixture, Subject};

fn spec_with_data() -> PairSpec {
    let mut spec = PairSpec::new(EpType::Msg, Caps::MSG);
    spec.connect_data = b"hello from the client".to_vec();
    spec.accept_data = b"welcome, said the server".to_vec();
    spec
}

/// Connect data arrives with `FI_CONNREQ`, accept data with the client's
/// `FI_CONNECTED` (checked while building the pair); both ends know their peer
/// (`fi_getpeer` of one is the other's `fi_getname`); messages flow.
pub fn cm_connect_accept_data(s: &Subject) {
    let p = Pair::new(s, &spec_with_data());
    let cm = p.cm.as_ref().expect("a connected pair");
    assert_eq!(
        &cm.connreq.cm_data[..21],
        b"hello from the client",
        "FI_CONNREQ data"
    );
    for (me, other, who) in [(&p.a, &p.b, "client"), (&p.b, &p.a, "server")] {
        let peer = me
            .ep
            .getpeer()
            .unwrap_or_else(|e| panic!("fi_getpeer ({who}): {e} ({})", e.code()));
        let name = other
            .ep
            .getname()
            .unwrap_or_else(|e| panic!("fi_getname (the {who}'s peer): {e}"));
        assert_eq!(peer, name, "the {who}'s peer is the other endpoint");
    }
    super::pairs::exchange(&p, 0, b"over the connection", 0x10);
    super::pairs::exchange(&p, 1, b"and back", 0x20);
}

/// `fi_reject` with data: the client's EQ reports an error event `FI_ECONNREFUSED`
/// for its endpoint, carrying the reject data; a new connection works afterwards.
pub fn cm_reject_with_data(s: &Subject) {
    let info = pair::info_for(s, EpType::Msg, Caps::MSG).expect("an FI_EP_MSG result");
    let (fabric, domain) = fixture::open_domain(s, &info);
    let (_pep, eq_s, name) = pair::listen(&fabric, &info);
    let eq_c = fabric.eq_open(&EqAttr::default()).unwrap();
    let cq = domain
        .cq_open(&ofi::cq::CqAttr::with_format(ofi::CqFormat::Tagged))
        .unwrap();
    let ep = domain.endpoint_with(&info, CTX_A, 0).unwrap();
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_eq(&eq_c).unwrap();
    ep.enable().unwrap();
    ep.connect(&name, b"may I?")
        .unwrap_or_else(|e| panic!("fi_connect: {e}"));
    let mut poll = EqPoller::new(2);
    let eqs = [&eq_c, &eq_s];
    let req = poll.expect(&eqs, 1, &[&cq], EqEvent::ConnReq, "listener");
    assert_eq!(&req.cm_data[..6], b"may I?");
    let handle = req.info.as_ref().expect("FI_CONNREQ info").handle;
    _pep.reject(handle, b"no, sorry")
        .unwrap_or_else(|e| panic!("fi_reject: {e} ({})", e.code()));
    match poll.next(&eqs, 0, &[&cq]) {
        Some(Err(ee)) => {
            assert_eq!(ee.err, Errno::ECONNREFUSED, "rejected connection: {ee:?}");
            assert_eq!(ee.fid, CTX_A, "the error event names the client endpoint");
            assert!(
                ee.err_data.starts_with(b"no, sorry"),
                "the reject data travels in err_data: {:?}",
                ee.err_data
            );
        }
        Some(Ok(ev)) => panic!("rejected connection: expected an error event, got {ev:?}"),
        None => panic!("rejected connection: no event within {:?}", crate::WAIT),
    }
    drop(ep);
    let p = {
        let spec = PairSpec::new(EpType::Msg, Caps::MSG);
        Pair::new(s, &spec)
    };
    super::pairs::exchange(&p, 0, b"after a reject", 0x30);
}

/// `fi_shutdown` on one side: the other side's EQ reads `FI_SHUTDOWN` for its
/// endpoint; shutting down from either side works.
pub fn cm_shutdown_event(s: &Subject) {
    for closer in [0usize, 1] {
        let p = Pair::new(s, &PairSpec::new(EpType::Msg, Caps::MSG));
        super::pairs::exchange(&p, 0, b"before shutdown", 0x40);
        p.side(closer)
            .ep
            .shutdown(0)
            .unwrap_or_else(|e| panic!("fi_shutdown: {e} ({})", e.code()));
        let other = 1 - closer;
        let eqs = [p.a.eq.as_ref().unwrap(), p.b.eq.as_ref().unwrap()];
        let mut poll = EqPoller::new(2);
        let ev = poll.expect(
            &eqs,
            other,
            &[&p.a.cq, &p.b.cq],
            EqEvent::Shutdown,
            "the peer of a shut-down endpoint",
        );
        let ctx = if other == 0 { pair::CTX_A } else { pair::CTX_B };
        assert_eq!(ev.fid, ctx, "FI_SHUTDOWN names the endpoint");
    }
}
