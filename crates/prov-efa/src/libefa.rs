//! libefa (`libefa.so.1`, rdma-core's EFA direct-verbs library), opened at run time, and
//! the devices the provider offers.
//!
//! On hardware the provider needs libefa for what plain verbs cannot do: query the
//! device's EFA attributes (`efadv_query_device`: RDMA read, RNR retry, the largest
//! RDMA size), create SRD queue pairs (`efadv_create_qp_ex` with
//! `EFADV_QP_DRIVER_TYPE_SRD`), and name the sender of an SRD receive, which carries no
//! GRH on hardware (extended completion queues by `efadv_create_cq`, read with
//! `efadv_wc_read_sgid`; address handle numbers by `efadv_query_ah`). Nothing is linked: a process without libefa starts and
//! the provider answers one line saying why it has no device. The name can be
//! overridden with `OFI_EFA_LIB` (tests point it at a library that does not exist).
//!
//! The binding itself (the structures, the loading, the calls) is the device layer's
//! (`ofi_rdma::sys::efadv`), whose rdma-core backend creates SRD queue pairs and the
//! endpoint's receive completion queue with it; it is re-exported here. What runs without hardware is the loading and symbol
//! resolution; the calls themselves need an EFA device (see docs/providers/efa.md).
//!
//! Nothing here panics.

use ofi_core::{Errno, Error, Result};
use ofi_rdma::{device_list, DeviceKind};

pub use ofi_rdma::sys::efadv::{
    libefa, load, EfadvAhAttr, EfadvCq, EfadvCqInitAttr, EfadvDeviceAttr, EfadvQpInitAttr, LibEfa,
    CAPS_CQ_WITH_SGID, CAPS_RDMA_READ, CAPS_RNR_RETRY, LIBEFA, QP_DRIVER_TYPE_SRD, WC_EX_WITH_SGID,
};

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
