//! ofi-prov-efa: the efa provider's RDM protocol (issue #30, part 1).
//!
//! AWS's Elastic Fabric Adapter offers SRD ("scalable reliable datagram") queue pairs:
//! datagrams are delivered reliably but in any order, each at most one MTU, and a
//! receiver without a posted buffer answers "receiver not ready" (RNR) instead of taking
//! the packet. The C provider builds `FI_EP_RDM` on top of that with its own protocol;
//! [`proto`] is this crate's version of it, written sans-IO: a state machine that takes
//! packets, transport reports and the current time as arguments and hands back packets
//! to send, reads to perform and completions. Nothing here does I/O or reads a clock.
//!
//! Not yet here (see docs/providers/efa.md): the provider object model (fabric, domain,
//! endpoint) over the RDMA layer's software device with SRD, libefa on hardware, and
//! registration with `ofi`.

#![forbid(unsafe_code)]

pub mod proto;
