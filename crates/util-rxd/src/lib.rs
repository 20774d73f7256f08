//! ofi-util-rxd: utility provider ofi_rxd: FI_EP_RDM over any FI_EP_DGRAM provider, reliable under loss.
