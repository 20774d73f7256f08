//! ofi-util-rxm: utility provider ofi_rxm: FI_EP_RDM over any FI_EP_MSG provider.
