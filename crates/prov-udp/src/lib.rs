//! ofi-prov-udp: FI_EP_DGRAM over UDP (the datagram base for rxd).
