//! libefa (`libefa.so.1`, rdma-core's EFA direct-verbs library), opened at run time, and
//! the devices the provider offers.
//!
//! On hardware the provider needs libefa for what plain verbs cannot do: query the
//! device's EFA attributes (`efadv_query_device`: RDMA read, RNR retry, the largest
//! RDMA size) and create SRD queue pairs (`efadv_create_qp_ex` with
//! `EFADV_QP_DRIVER_TYPE_SRD`). Nothing is linked: a process without libefa starts and
//! the provider answers one line saying why it has no device. The name can be
//! overridden with `OFI_EFA_LIB` (tests point it at a library that does not exist).
//!
//! What runs here without hardware is the loading and symbol resolution; the calls
//! themselves need an EFA device (see docs/providers/efa.md).
//!
//! Nothing here panics.

use std::sync::OnceLock;

use libc::{c_int, c_void};
use ofi_core::{Errno, Error, Result};
use ofi_rdma::{device_list, DeviceKind};

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

/// The loaded library and the entry points the provider uses on hardware.
pub struct LibEfa {
    _lib: libloading::Library,
    /// `int efadv_query_device(struct ibv_context *, struct efadv_device_attr *, uint32_t inlen)`.
    pub query_device: unsafe extern "C" fn(*mut c_void, *mut EfadvDeviceAttr, u32) -> c_int,
    /// `struct ibv_qp *efadv_create_qp_ex(struct ibv_context *, struct ibv_qp_init_attr_ex *,
    /// struct efadv_qp_init_attr *, uint32_t inlen)`.
    pub create_qp_ex:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, u32) -> *mut c_void,
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
    let missing = |s: &str| format!("{name}: symbol {s} missing (infiniband/efadv.h)");
    // SAFETY: the symbols have the C signatures of the fields they are stored in
    // (efadv_query_device(3), efadv_create_qp_ex(3)); the library stays loaded as long
    // as the pointers (both live in the returned value).
    let query_device = *unsafe {
        lib.get::<unsafe extern "C" fn(*mut c_void, *mut EfadvDeviceAttr, u32) -> c_int>(
            b"efadv_query_device\0",
        )
    }
    .map_err(|_| missing("efadv_query_device"))?;
    // SAFETY: as above.
    let create_qp_ex = *unsafe {
        lib.get::<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, u32) -> *mut c_void>(
            b"efadv_create_qp_ex\0",
        )
    }
    .map_err(|_| missing("efadv_create_qp_ex"))?;
    Ok(LibEfa {
        _lib: lib,
        query_device,
        create_qp_ex,
    })
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

/// Whether an rdma-core device name is an EFA device's (`efa_0`, or the older
/// `rdmap<bus>s<slot>` names EC2 gives them).
pub fn is_efa_name(name: &str) -> bool {
    name.starts_with("efa") || name.starts_with("rdmap")
}

/// The devices the provider offers for `kind`, or the one-line reason there are none
/// (`FI_ENODEV`): "libefa.so.1 not found", "libibverbs.so.1 not found",
/// "no RDMA device", "no EFA device".
pub fn devices(kind: DeviceKind) -> Result<Vec<String>> {
    if kind == DeviceKind::RdmaCore {
        libefa().map_err(|why| Error::new(Errno::ENODEV, why))?;
    }
    let names: Vec<String> = device_list(kind)
        .map_err(|e| Error::new(Errno::ENODEV, e.message().to_string()))?
        .iter()
        .map(|d| d.name().to_string())
        .filter(|n| kind == DeviceKind::Soft || is_efa_name(n))
        .collect();
    if names.is_empty() {
        return Err(Error::new(Errno::ENODEV, "no EFA device"));
    }
    Ok(names)
}

/// The largest UD datagram (`FI_EP_DGRAM`): the port MTU of the software device and
/// of EFA's UD.
pub const DGRAM_MTU: usize = 4096;

/// The largest SRD datagram of devices of `kind`.
pub fn mtu(kind: DeviceKind) -> usize {
    match kind {
        DeviceKind::Soft => ofi_rdma::soft::SRD_MTU,
        // EFA's SRD carries 8 KiB and more (the port's maximum); the protocol keeps to
        // 8 KiB until the hardware path reads it from the device.
        DeviceKind::RdmaCore => 8192,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_one_line() {
        let e = load("libefa-does-not-exist.so.1").unwrap_err();
        assert_eq!(e, "libefa-does-not-exist.so.1 not found");
    }

    #[test]
    fn efa_names() {
        assert!(is_efa_name("efa_0"));
        assert!(is_efa_name("rdmap16s27"));
        assert!(!is_efa_name("mlx5_0"));
    }

    #[test]
    fn the_attribute_layout_is_the_headers() {
        assert_eq!(std::mem::size_of::<EfadvDeviceAttr>(), 32);
        assert_eq!(std::mem::offset_of!(EfadvDeviceAttr, device_caps), 24);
    }
}
