//! Mirrors of the rdma-core structures (from the facts of `<infiniband/verbs.h>`),
//! checked against the installed header by `tests/layout.rs`.

/// `struct ibv_device` (opaque here: only handled by pointer).
#[repr(C)]
pub struct IbvDevice {
    _opaque: [u8; 0],
}
