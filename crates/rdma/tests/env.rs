//! The device family is chosen by `FI_VERBS_DEVICE` (the only test of this binary, so
//! changing the environment races with nothing).

use ofi_rdma::DeviceKind;

#[test]
fn fi_verbs_device_soft_selects_the_software_device() {
    std::env::remove_var("FI_VERBS_DEVICE");
    assert_eq!(DeviceKind::from_env(), DeviceKind::RdmaCore);
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    assert_eq!(DeviceKind::from_env(), DeviceKind::Soft);
    std::env::set_var("FI_VERBS_DEVICE", "SOFT");
    assert_eq!(DeviceKind::from_env(), DeviceKind::Soft);
    std::env::set_var("FI_VERBS_DEVICE", "mlx5_0");
    assert_eq!(DeviceKind::from_env(), DeviceKind::RdmaCore);
    std::env::remove_var("FI_VERBS_DEVICE");
}
