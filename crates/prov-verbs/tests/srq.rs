//! Shared receive contexts (`fi_srx_context`) over a shared receive queue: two
//! `FI_EP_MSG` endpoints bound to one context receive from its pool, in the order the
//! receives were posted, each completion on the CQ of the endpoint the message came
//! to. The conformance area `SharedCtx` is not claimed (it needs connectionless
//! endpoints and shared transmit contexts), so the behaviour is checked here.

mod common;

use ofi::cq::CqAttr;
use ofi::eq::EqAttr;
use ofi::{Caps, CqFormat, EpType, EqEvent, Errno, OpFlags, RxAttr};
use ofi_conformance::fixture::{self, expect_errno, post_recv, send, wait_ok};
use ofi_conformance::pair::{self, EqPoller};

#[test]
fn two_endpoints_receive_from_one_shared_receive_context() {
    let s = common::subject();
    let info = pair::info_for(&s, EpType::Msg, Caps::MSG).expect("an FI_EP_MSG result");
    assert!(
        info.domain_attr.max_ep_srx_ctx >= 1,
        "FI_EP_MSG offers a shared receive context"
    );
    let (fabric, domain) = fixture::open_domain(&s, &info);
    let srx = domain
        .srx_context(&RxAttr {
            size: 8,
            ..info.rx_attr.clone()
        })
        .unwrap_or_else(|e| panic!("fi_srx_context: {e} ({})", e.code()));
    let (pep, eq_s, name) = pair::listen(&fabric, &info);
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for k in 0..2usize {
        let eq_c = fabric.eq_open(&EqAttr::default()).unwrap();
        let cq_c = domain.cq_open(&CqAttr::with_format(CqFormat::Msg)).unwrap();
        let c = domain.endpoint_with(&info, 0x100 + k, 0).unwrap();
        c.bind(&cq_c, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        c.bind_eq(&eq_c).unwrap();
        c.enable().unwrap();
        c.connect(&name, b"").unwrap();
        let mut poll = EqPoller::new(2);
        let req = poll.expect(&[&eq_c, &eq_s], 1, &[&cq_c], EqEvent::ConnReq, "listener");
        let req_info = req.info.as_deref().cloned().expect("FI_CONNREQ info");
        let cq_s = domain.cq_open(&CqAttr::with_format(CqFormat::Msg)).unwrap();
        let sv = domain.endpoint_with(&req_info, 0x200 + k, 0).unwrap();
        sv.bind(&cq_s, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        sv.bind_eq(&eq_s).unwrap();
        sv.bind(&srx, OpFlags::empty())
            .unwrap_or_else(|e| panic!("fi_ep_bind srx: {e} ({})", e.code()));
        sv.accept(b"").unwrap();
        let eqs = [&eq_c, &eq_s];
        poll.expect(&eqs, 0, &[&cq_c, &cq_s], EqEvent::Connected, "client");
        poll.expect(&eqs, 1, &[&cq_c, &cq_s], EqEvent::Connected, "server");
        clients.push((c, cq_c, eq_c));
        servers.push((sv, cq_s));
    }
    // Receives go to the shared context, not to a bound endpoint.
    let mut stray = [0u8; 8];
    expect_errno(
        post_recv(&servers[0].0, &mut stray, 0x9),
        Errno::EINVAL,
        "fi_recv on an endpoint bound to a shared receive context",
    );
    let mut bufs = [[0u8; 64]; 3];
    for (i, b) in bufs.iter_mut().enumerate() {
        post_recv(&srx, b, 0x300 + i).unwrap();
    }
    assert_eq!(srx.rx_size_left().unwrap(), 8 - 3);
    // A receive queued on a shared receive queue cannot be taken back.
    expect_errno(
        srx.cancel(0x302),
        Errno::ENOSYS,
        "fi_cancel on the shared context",
    );
    // The second endpoint's message first: it takes the oldest receive.
    for (k, what) in [(1usize, &b"to the second"[..]), (0, &b"to the first"[..])] {
        let (c, cq_c, _) = &clients[k];
        send(c, what, ofi::ADDR_UNSPEC, 0x400 + k).unwrap();
        assert_eq!(wait_ok(cq_c, "send").op_context, 0x400 + k);
    }
    let r1 = wait_ok(&servers[1].1, "receive at the second endpoint");
    assert_eq!(
        (r1.op_context, r1.len),
        (0x300, 13),
        "the oldest shared receive"
    );
    let r0 = wait_ok(&servers[0].1, "receive at the first endpoint");
    assert_eq!(
        (r0.op_context, r0.len),
        (0x301, 12),
        "the next shared receive"
    );
    assert_eq!(&bufs[0][..13], b"to the second");
    assert_eq!(&bufs[1][..12], b"to the first");
    assert!(
        bufs[2].iter().all(|&b| b == 0),
        "the third receive is untouched"
    );
    assert_eq!(srx.rx_size_left().unwrap(), 8 - 1);
    drop((servers, clients, pep, eq_s, srx));
    fixture::close_domain(fabric, domain);
}
