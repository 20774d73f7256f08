//! What rxd's tests over real udp (and the `forged_flood` example, which includes this
//! file) share: one rxd endpoint with its own fabric, domain, tagged CQ and AV, and a
//! pair of them that know each other.

use ofi::addr::Address;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{AddrFormat, Caps, CqFormat, EpType, GetinfoFlags, Info, OpFlags, API_VERSION};

/// An enabled endpoint with its CQ (transmit and receive) and AV bound, and its name.
pub struct Node {
    /// The endpoint.
    pub ep: Endpoint,
    /// Its CQ (`FI_CQ_FORMAT_TAGGED`, 4096 entries).
    pub cq: CompletionQueue,
    /// Its AV.
    pub av: AddressVector,
    /// Its name (`fi_getname`).
    pub addr: Address,
    _domain: Domain,
    _fabric: Fabric,
}

/// Open a [`Node`] for `info`; panics (the test fails) on any error.
pub fn node(info: &Info) -> Node {
    let fabric = ofi::fabric(info).expect("fi_fabric");
    let domain = fabric.domain(info).expect("fi_domain");
    let cq = domain
        .cq_open(&CqAttr {
            size: 4096,
            ..CqAttr::with_format(CqFormat::Tagged)
        })
        .expect("fi_cq_open");
    let av = domain.av_open(&AvAttr::default()).expect("fi_av_open");
    let ep = domain.endpoint(info).expect("fi_endpoint");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .expect("bind cq");
    ep.bind_av(&av).expect("bind av");
    ep.enable().expect("fi_enable");
    let addr =
        Address::from_bytes(info.addr_format, &ep.getname().expect("getname")).expect("addr");
    Node {
        ep,
        cq,
        av,
        addr,
        _domain: domain,
        _fabric: fabric,
    }
}

/// Two rxd endpoints over udp (IPv4), each in the other's AV.
#[allow(dead_code)] // not every test binary uses it
pub fn pair() -> (Node, Node, u64, u64) {
    let _ = ofi::registry();
    let mut h = Info::hints()
        .with_addr_format(AddrFormat::SOCKADDR_IN)
        .with_caps(Caps::MSG);
    h.ep_attr.ep_type = EpType::Rdm;
    h.fabric_attr.prov_name = Some("udp;ofi_rxd".into());
    let infos = ofi::getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&h))
        .expect("getinfo udp;ofi_rxd");
    let a = node(&infos[0]);
    let b = node(&infos[0]);
    let b_at_a = a.av.insert(std::slice::from_ref(&b.addr)).expect("insert")[0];
    let a_at_b = b.av.insert(std::slice::from_ref(&a.addr)).expect("insert")[0];
    (a, b, b_at_a, a_at_b)
}
