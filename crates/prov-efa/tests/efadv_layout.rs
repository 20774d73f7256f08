//! The mirrors of libefa's structures and constants in `ofi_prov_efa::libefa`, checked
//! against the installed `<infiniband/efadv.h>`: a C program printing each `sizeof`,
//! `_Alignof`, `offsetof` and value is compiled with `cc` and run, and its output must
//! equal the Rust side's (`ofi_testkit::c_layout`). Skipped, saying so, without the
//! header (rdma-core's `libibverbs-dev`). This checks the declarations only: calling
//! libefa needs an EFA device, which this machine does not have.

use ofi_testkit::c_layout::{check_installed_header, Layout};
use ofi_testkit::layout;

use ofi_prov_efa::libefa::*;

/// The structures, each with its size, alignment and field offsets.
fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct efadv_device_attr" = EfadvDeviceAttr {
            "comp_mask" = comp_mask, "max_sq_wr" = max_sq_wr, "max_rq_wr" = max_rq_wr,
            "max_sq_sge" = max_sq_sge, "max_rq_sge" = max_rq_sge,
            "inline_buf_size" = inline_buf_size, "reserved" = reserved,
            "device_caps" = device_caps, "max_rdma_size" = max_rdma_size,
        }),
        layout!("struct efadv_qp_init_attr" = EfadvQpInitAttr {
            "comp_mask" = comp_mask, "driver_qp_type" = driver_qp_type,
            "reserved" = reserved,
        }),
        layout!("struct efadv_ah_attr" = EfadvAhAttr {
            "comp_mask" = comp_mask, "ahn" = ahn, "reserved" = reserved,
        }),
    ]
}

/// The constants, by their C names.
fn values() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = [
        ("EFADV_DEVICE_ATTR_CAPS_RDMA_READ", CAPS_RDMA_READ),
        ("EFADV_DEVICE_ATTR_CAPS_RNR_RETRY", CAPS_RNR_RETRY),
        ("EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID", CAPS_CQ_WITH_SGID),
        ("EFADV_QP_DRIVER_TYPE_SRD", QP_DRIVER_TYPE_SRD),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), u64::from(value)))
    .collect();
    v.push(("EFADV_WC_EX_WITH_SGID".into(), WC_EX_WITH_SGID));
    v
}

#[test]
fn mirrors_match_the_installed_efadv_header() {
    check_installed_header(
        "infiniband/efadv.h",
        "libibverbs-dev",
        "efadv_layout",
        &layouts(),
        &values(),
    );
}
