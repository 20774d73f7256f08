//! ofi-prov-shm: FI_EP_RDM between processes of one host (shared memory + CMA).
