//! What several of rxm's test files use: a plain tcp MSG endpoint that speaks rxm's
//! handshake by hand ([`msg_client`], [`fake_hello`]).

#![allow(dead_code)]

use ofi::addr::Address;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::eq::{EqAttr, EventQueue};
use ofi::fabric::Fabric;
use ofi::{AddrFormat, CqFormat, EpType, GetinfoFlags, Info, OpFlags, API_VERSION};

/// A plain tcp MSG endpoint, with its EQ and CQ, that speaks to rxm endpoints by hand
/// (field order = drop order).
pub struct MsgClient {
    /// The endpoint (enabled, not connected).
    pub ep: Endpoint,
    /// Its EQ.
    pub eq: EventQueue,
    /// Its CQ (transmit and receive, `FI_CQ_FORMAT_TAGGED`).
    pub cq: CompletionQueue,
    _domain: Domain,
    _fabric: Fabric,
}

/// A [`MsgClient`] in a tcp fabric of its own (IPv4).
pub fn msg_client() -> MsgClient {
    let mut h = Info::hints().with_addr_format(AddrFormat::SOCKADDR_IN);
    h.ep_attr.ep_type = EpType::Msg;
    h.fabric_attr.prov_name = Some("tcp".into());
    let minfo =
        ofi::getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&h)).unwrap()[0].clone();
    let fabric = ofi::fabric(&minfo).unwrap();
    let domain = fabric.domain(&minfo).unwrap();
    let eq = fabric.eq_open(&EqAttr::default()).unwrap();
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .unwrap();
    let ep = domain.endpoint(&minfo).unwrap();
    ep.bind_eq(&eq).unwrap();
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.enable().unwrap();
    MsgClient {
        ep,
        eq,
        cq,
        _domain: domain,
        _fabric: fabric,
    }
}

/// The handshake of a fake rxm peer (a [`msg_client`] speaking rxm by hand) whose rxm
/// address is an unused loopback port (it never listens), with that address.
pub fn fake_hello(instance: u64) -> (Address, ofi_util_rxm::proto::Hello) {
    use ofi_util_rxm::proto::{Hello, Kind, Reason, VERSION};
    let addr = Address::from(std::net::SocketAddr::from(([127, 0, 0, 1], 9)));
    let hello = Hello {
        kind: Kind::Connect,
        version: VERSION,
        reason: Reason::None,
        buffer_size: 16384,
        credits: 8,
        sar_limit: 131072,
        instance,
        rma_event: false,
        addr: addr.to_bytes(),
    };
    (addr, hello)
}
