//! What the small single-purpose test binaries of the udp provider share: a registry
//! with the provider linked in, a getinfo for it, an endpoint with its CQ and AV, and
//! a bounded wait for a completion. (`tests/udp.rs` keeps its own, richer helpers; the
//! benches include this file too.)

#![allow(dead_code)]

use std::time::Duration;

use ofi::abi::raw::CqDataEntry;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{AddrFormat, Address, Caps, CqFormat, Info, OpFlags, Result, WaitObj, API_VERSION};
use ofi_conformance::plugin::linked_registry;
use ofi_prov_udp::UdpProvider;

/// A fresh registry with only the udp provider (which reads its parameters now).
pub fn registry() -> Registry {
    linked_registry(&[ofi::abi::entry_for::<UdpProvider>()])
}

/// getinfo for udp with `caps` (empty: the provider's default).
pub fn getinfo(reg: &Registry, caps: Caps) -> Result<Vec<Info>> {
    let mut h = Info::hints();
    if !caps.is_empty() {
        h = h.with_caps(caps);
    }
    h.fabric_attr.prov_name = Some("udp".into());
    reg.getinfo(&GetinfoRequest {
        hints: Some(h),
        ..GetinfoRequest::new(API_VERSION)
    })
}

/// An enabled endpoint with a data-format CQ and an AV.
pub struct Node {
    pub ep: Endpoint,
    pub cq: CompletionQueue,
    pub av: AddressVector,
    pub addr: Address,
}

/// Open a [`Node`] for `info` on `domain`.
pub fn node(domain: &Domain, info: &Info) -> Node {
    let (ep, cq, av) = bound_endpoint(
        domain,
        info,
        &CqAttr {
            wait_obj: WaitObj::Unspec,
            ..CqAttr::with_format(CqFormat::Data)
        },
    );
    ep.enable().unwrap();
    let addr = Address::from_bytes(info.addr_format, &ep.getname().unwrap()).unwrap();
    Node { ep, cq, av, addr }
}

/// An endpoint for `info` on `domain` with a new CQ (`cq_attr`) and AV bound, not yet
/// enabled.
pub fn bound_endpoint(
    domain: &Domain,
    info: &Info,
    cq_attr: &CqAttr,
) -> (Endpoint, CompletionQueue, AddressVector) {
    let cq = domain.cq_open(cq_attr).unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let ep = domain.endpoint(info).unwrap();
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    (ep, cq, av)
}

/// The first IPv4 info of the udp provider (hints: `caps`, empty for the default).
pub fn info_v4(reg: &Registry, caps: Caps) -> Info {
    let mut h = Info::hints();
    if !caps.is_empty() {
        h = h.with_caps(caps);
    }
    h.addr_format = AddrFormat::SOCKADDR_IN;
    h.fabric_attr.prov_name = Some("udp".into());
    ofi_conformance::fixture::first_info(reg, h)
}

/// The next completion of `cq` within 2 s: (length, source); panics on an error
/// completion (with its entry) or a time-out.
pub fn next(cq: &CompletionQueue) -> (usize, u64) {
    let (e, src): (CqDataEntry, u64) =
        ofi_conformance::fixture::wait_from_ok(cq, Duration::from_secs(2), "a completion");
    (e.len, src)
}

/// Post a receive into `buf` (context 1).
pub fn post_recv(ep: &Endpoint, buf: &mut [u8]) {
    // SAFETY: each caller keeps `buf` alive until the receive's completion is read.
    unsafe { ep.recv(buf.as_mut_ptr(), buf.len(), std::ptr::null_mut(), 0, 1) }.unwrap()
}

/// Send `data` to `dest` (context 2; the kernel has it when the call returns).
pub fn send(ep: &Endpoint, data: &[u8], dest: u64) {
    // SAFETY: `data` lives across the call, which completes the send.
    unsafe { ep.send(data.as_ptr(), data.len(), std::ptr::null_mut(), dest, 2) }.unwrap()
}

/// The IPv4 UDP sockets of this host bound to local port `port`, from `/proc/net/udp`:
/// for each, whether it is connected (has a remote port).
pub fn udp_sockets_on_port(port: u16) -> Vec<bool> {
    let local = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/udp")
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[1].ends_with(&local)).then(|| !f[2].ends_with(":0000"))
        })
        .collect()
}
