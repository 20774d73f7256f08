//! libefa (`libefa.so.1`, rdma-core's EFA direct-verbs library), opened at run time
//! like libibverbs: what plain verbs cannot do on EFA — the device's EFA attributes
//! (`efadv_query_device`: RDMA read, RNR retry, the largest RDMA size, whether
//! completions can name the sender's GID), SRD queue pairs (`efadv_create_qp_ex` with
//! [`QP_DRIVER_TYPE_SRD`]), an address handle's number (`efadv_query_ah`) and extended
//! completion queues whose receive completions name the sender (`efadv_create_cq` with
//! [`WC_EX_WITH_SGID`]; `efadv_wc_read_sgid` is inline in C: it calls
//! [`EfadvCq::wc_read_sgid`], reached by `efadv_cq_from_ibv_cq_ex`).
//!
//! The structures are mirrors of `<infiniband/efadv.h>` (rdma-core 44, x86-64 Linux),
//! checked against the installed header by the efa provider's `tests/efadv_layout.rs`;
//! `tests/sys.rs` resolves every entry point in the installed library. Nothing is
//! linked: without libefa the caller gets one line saying why. The name can be
//! overridden with `OFI_EFA_LIB` (tests point it at a library that does not exist).
//!
//! Nothing here panics.

use std::sync::OnceLock;

use libc::c_int;

use super::ffi::{IbvAh, IbvContext, IbvCqEx, IbvCqInitAttrEx, IbvGid, IbvQp, IbvQpInitAttrEx};

/// The library name looked for.
pub const LIBEFA: &str = "libefa.so.1";

/// `struct efadv_device_attr` (efadv_query_device(3)).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvDeviceAttr {
    /// Compatibility mask (out).
    pub comp_mask: u64,
    /// Most send work requests.
    pub max_sq_wr: u32,
    /// Most receive work requests.
    pub max_rq_wr: u32,
    /// Most send scatter/gather elements.
    pub max_sq_sge: u16,
    /// Most receive scatter/gather elements.
    pub max_rq_sge: u16,
    /// Largest inline send.
    pub inline_buf_size: u16,
    /// Reserved.
    pub reserved: [u8; 2],
    /// `EFADV_DEVICE_ATTR_CAPS_*`.
    pub device_caps: u32,
    /// Largest RDMA transfer.
    pub max_rdma_size: u32,
}

/// `EFADV_DEVICE_ATTR_CAPS_RDMA_READ`: the device reads remote memory.
pub const CAPS_RDMA_READ: u32 = 1 << 0;
/// `EFADV_DEVICE_ATTR_CAPS_RNR_RETRY`: SRD queue pairs take an RNR retry count.
pub const CAPS_RNR_RETRY: u32 = 1 << 1;

/// `EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID`: completions name the sender's GID
/// (`efadv_wc_read_sgid`).
pub const CAPS_CQ_WITH_SGID: u32 = 1 << 2;

/// `EFADV_QP_DRIVER_TYPE_SRD`: the driver queue pair type of `efadv_create_qp_ex`.
pub const QP_DRIVER_TYPE_SRD: u32 = 0;

/// `EFADV_WC_EX_WITH_SGID`: asks extended completion queues for the sender's GID.
pub const WC_EX_WITH_SGID: u64 = 1 << 0;

/// `struct efadv_qp_init_attr` (efadv_create_qp_ex(3)): the EFA part of a queue pair's
/// creation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvQpInitAttr {
    /// Compatibility mask (0).
    pub comp_mask: u64,
    /// [`QP_DRIVER_TYPE_SRD`].
    pub driver_qp_type: u32,
    /// Reserved (0).
    pub reserved: [u8; 4],
}

/// `struct efadv_ah_attr` (efadv_query_ah(3)): the device's number of an address handle,
/// which names the sender of a receive where completions carry no GID.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvAhAttr {
    /// Compatibility mask (out).
    pub comp_mask: u64,
    /// The address handle number.
    pub ahn: u16,
    /// Reserved.
    pub reserved: [u8; 6],
}

/// `struct efadv_cq`: the EFA part of an extended completion queue.
#[repr(C)]
pub struct EfadvCq {
    /// Compatibility mask.
    pub comp_mask: u64,
    /// What `efadv_wc_read_sgid` calls: the current receive completion's sender GID
    /// into the second argument; 0 when the completion names it, nonzero when not (the
    /// device names a sender it has an address handle for by that handle's number,
    /// `ibv_wc_read_slid`, instead).
    pub wc_read_sgid: Option<unsafe extern "C" fn(*mut EfadvCq, *mut IbvGid) -> c_int>,
}

/// `struct efadv_cq_init_attr` (efadv_create_cq(3)).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvCqInitAttr {
    /// Compatibility mask (0).
    pub comp_mask: u64,
    /// `EFADV_WC_EX_WITH_*`: [`WC_EX_WITH_SGID`].
    pub wc_flags: u64,
}

entry_points! {
    LibEfa, resolve, "infiniband/efadv.h";
    query_device = "efadv_query_device": fn(*mut IbvContext, *mut EfadvDeviceAttr, u32) -> c_int;
    create_qp_ex = "efadv_create_qp_ex": fn(*mut IbvContext, *mut IbvQpInitAttrEx, *mut EfadvQpInitAttr, u32) -> *mut IbvQp;
    query_ah = "efadv_query_ah": fn(*mut IbvAh, *mut EfadvAhAttr, u32) -> c_int;
    create_cq = "efadv_create_cq": fn(*mut IbvContext, *mut IbvCqInitAttrEx, *mut EfadvCqInitAttr, u32) -> *mut IbvCqEx;
    cq_from_ibv_cq_ex = "efadv_cq_from_ibv_cq_ex": fn(*mut IbvCqEx) -> *mut EfadvCq;
}

impl std::fmt::Debug for LibEfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LibEfa")
    }
}

/// Loads `name` and resolves the entry points; the error is the one-line reason.
pub fn load(name: &str) -> std::result::Result<LibEfa, String> {
    // SAFETY: loading rdma-core's libefa runs its constructors, which only register its
    // driver with libibverbs.
    let lib = unsafe { libloading::Library::new(name) }.map_err(|_| format!("{name} not found"))?;
    resolve(name, lib)
}

fn lib_name() -> String {
    std::env::var("OFI_EFA_LIB").unwrap_or_else(|_| LIBEFA.to_string())
}

/// The process-wide library (loaded once; the name is read once).
pub fn libefa() -> std::result::Result<&'static LibEfa, String> {
    static LIB: OnceLock<std::result::Result<LibEfa, String>> = OnceLock::new();
    LIB.get_or_init(|| load(&lib_name()))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_one_line() {
        let e = load("libefa-does-not-exist.so.1").unwrap_err();
        assert_eq!(e, "libefa-does-not-exist.so.1 not found");
    }
}
