//! What rxd's tests over real udp (and the `forged_flood` example, which includes this
//! file) share: one rxd endpoint with its own fabric, domain, tagged CQ and AV, and a
//! pair of them that know each other; a completion read without waiting; a forged rxd
//! `CONNECT` datagram.

// Each test binary (and the example) uses part of this file.
#![allow(dead_code)]

use ofi::abi::raw::CqTaggedEntry;
use ofi::addr::Address;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{AddrFormat, Caps, CqFormat, EpType, Errno, GetinfoFlags, Info, OpFlags, API_VERSION};
use ofi_util_rxd::proto::{Hdr, PktType};

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
    let (ep, cq, av, addr) = endpoint_in(&domain, info);
    Node {
        ep,
        cq,
        av,
        addr,
        _domain: domain,
        _fabric: fabric,
    }
}

/// An enabled endpoint of `domain` for `info`, with its own CQ (transmit and receive,
/// `FI_CQ_FORMAT_TAGGED`, 4096 entries) and AV bound, and its name; panics (the test
/// fails) on any error.
pub fn endpoint_in(
    domain: &Domain,
    info: &Info,
) -> (Endpoint, CompletionQueue, AddressVector, Address) {
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
    (ep, cq, av, addr)
}

/// The number in the environment variable `var`, else `default` (the size of a
/// test's run).
pub fn env_count<T: std::str::FromStr>(var: &str, default: T) -> T {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Two rxd endpoints over udp (IPv4), each in the other's AV.
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

/// A completion: the entry and its source address, or an error's context and code.
pub type Done = Result<(CqTaggedEntry, u64), (usize, Errno)>;

/// The next completion of `cq` if one is there (no waiting; reading drives progress).
pub fn poll(cq: &CompletionQueue) -> Option<Done> {
    let mut e = [CqTaggedEntry::default()];
    let mut src = [0u64];
    match cq.readfrom(&mut e, &mut src) {
        Ok(1) => Some(Ok((e[0], src[0]))),
        Ok(_) => None,
        Err(err) if err.code() == Errno::EAGAIN => None,
        Err(err) if err.code() == Errno::EAVAIL => {
            let ee = cq.readerr_owned(0).expect("readerr");
            Some(Err((ee.op_context, ee.err)))
        }
        Err(err) => panic!("cq read: {err}"),
    }
}

/// A datagram to an rxd endpoint over udp: udp's header, then an rxd `CONNECT` with
/// `src_id`, `sess` and `body`.
pub fn forged_connect(src_id: u32, sess: u32, body: &[u8]) -> Vec<u8> {
    let mut h = Hdr::new(PktType::Connect);
    h.src_id = src_id;
    h.src_sess = sess;
    let mut d = ofi_prov_udp::proto::Header::new(None).encode().to_vec();
    d.extend_from_slice(&h.bytes());
    d.extend_from_slice(body);
    d
}

/// Post a receive of `buf` from any source with context `ctx` on `ep`.
///
/// # Safety
///
/// `buf` stays valid until the receive completes or the endpoint is closed.
pub unsafe fn recv_into(ep: &Endpoint, buf: &mut [u8], ctx: usize) {
    // SAFETY: the caller keeps `buf` valid as long as the provider may write it.
    unsafe {
        ep.recv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            ofi::ADDR_UNSPEC,
            ctx,
        )
    }
    .expect("fi_recv");
}
