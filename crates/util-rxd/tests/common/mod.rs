//! What rxd's tests over real udp (and the `forged_flood` example, which includes this
//! file) share: a pair of rxd endpoints that know each other (the endpoint itself,
//! [`Node`], is conformance's, as are reading completions); a forged rxd `CONNECT`
//! datagram.

// Each test binary (and the example) uses part of this file.
#![allow(dead_code)]

use ofi::{AddrFormat, Caps};
use ofi_conformance::node::rdm_info;
pub use ofi_conformance::node::Node;
use ofi_util_rxd::proto::{Hdr, PktType};

/// The first answer for rxd over udp (IPv4), `FI_EP_RDM` with `FI_MSG`.
pub fn rxd_msg_info() -> ofi::Info {
    let _ = ofi::registry();
    rdm_info("udp;ofi_rxd", AddrFormat::SOCKADDR_IN, Caps::MSG)
}

/// Two rxd endpoints over udp (IPv4), each in the other's AV.
pub fn pair() -> (Node, Node, u64, u64) {
    ofi_conformance::node::pair_of(&rxd_msg_info())
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
