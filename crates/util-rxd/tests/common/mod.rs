//! What rxd's tests over real udp (and the `forged_flood` example, which includes this
//! file) share: one rxd endpoint with its own fabric, domain, tagged CQ and AV.

use ofi::addr::Address;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{CqFormat, Info, OpFlags};

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
