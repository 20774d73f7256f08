//! `OFI_RDMA_RDMACM_LIB` naming a library that does not exist: the rdma-core channel
//! gives the one-line reason, the software device's is unaffected (the only test of
//! this binary: the library is looked up once per process).

use ofi_core::Errno;
use ofi_rdma::{CmChannel, DeviceKind};

#[test]
fn a_missing_librdmacm_is_the_one_line_reason() {
    std::env::set_var("OFI_RDMA_RDMACM_LIB", "librdmacm-not-here.so.1");
    let e = CmChannel::open(DeviceKind::RdmaCore).unwrap_err();
    assert_eq!(e.code(), Errno::ENODEV);
    assert_eq!(e.message(), "librdmacm-not-here.so.1 not found");
    let soft = CmChannel::open(DeviceKind::Soft).unwrap();
    assert_eq!(soft.get_event(), None);
}
