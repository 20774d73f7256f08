//! ofi-prov-tcp: FI_EP_MSG (connection-oriented) over TCP.
