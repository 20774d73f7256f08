//! Layout: every C structure and table this library fills or reads, compared with the
//! installed libfabric 1.17 headers. The C program is generated from the list below
//! (C name, Rust type, C field = Rust field), compiled with `cc` against
//! `<rdma/fabric.h>` and run; its `sizeof`/`offsetof` must equal the Rust ones.

mod common;

use std::mem::{offset_of, size_of};
use std::process::Command;

use ofi_capi::fid::{FiOps, Fid};
use ofi_capi::info::{
    FiBusAttr, FiDeviceAttr, FiDomainAttr, FiEpAttr, FiFabricAttr, FiInfo, FiLinkAttr, FiPciAttr,
    FiRxAttr, FiTxAttr, FidNic,
};
use ofi_capi::params::{FiParam, FiProviderHead};

/// One structure: its C name, Rust size, and (C field, Rust offset) pairs.
struct Layout {
    c_name: &'static str,
    size: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! layout {
    ($c:literal = $T:ty { $($cf:literal = $rf:ident),* $(,)? }) => {
        Layout {
            c_name: $c,
            size: size_of::<$T>(),
            fields: vec![$(($cf, offset_of!($T, $rf))),*],
        }
    };
}

fn layouts() -> Vec<Layout> {
    vec![
        layout!("struct fid" = Fid { "fclass" = fclass, "context" = context, "ops" = ops }),
        layout!("struct fi_ops" = FiOps {
            "size" = size, "close" = close, "bind" = bind, "control" = control,
            "ops_open" = ops_open, "tostr" = tostr, "ops_set" = ops_set,
        }),
        layout!("struct fi_tx_attr" = FiTxAttr {
            "caps" = caps, "mode" = mode, "op_flags" = op_flags, "msg_order" = msg_order,
            "comp_order" = comp_order, "inject_size" = inject_size, "size" = size,
            "iov_limit" = iov_limit, "rma_iov_limit" = rma_iov_limit, "tclass" = tclass,
        }),
        layout!("struct fi_rx_attr" = FiRxAttr {
            "caps" = caps, "mode" = mode, "op_flags" = op_flags, "msg_order" = msg_order,
            "comp_order" = comp_order, "total_buffered_recv" = total_buffered_recv,
            "size" = size, "iov_limit" = iov_limit,
        }),
        layout!("struct fi_ep_attr" = FiEpAttr {
            "type" = ep_type, "protocol" = protocol, "protocol_version" = protocol_version,
            "max_msg_size" = max_msg_size, "msg_prefix_size" = msg_prefix_size,
            "max_order_raw_size" = max_order_raw_size,
            "max_order_war_size" = max_order_war_size,
            "max_order_waw_size" = max_order_waw_size, "mem_tag_format" = mem_tag_format,
            "tx_ctx_cnt" = tx_ctx_cnt, "rx_ctx_cnt" = rx_ctx_cnt,
            "auth_key_size" = auth_key_size, "auth_key" = auth_key,
        }),
        layout!("struct fi_domain_attr" = FiDomainAttr {
            "domain" = domain, "name" = name, "threading" = threading,
            "control_progress" = control_progress, "data_progress" = data_progress,
            "resource_mgmt" = resource_mgmt, "av_type" = av_type, "mr_mode" = mr_mode,
            "mr_key_size" = mr_key_size, "cq_data_size" = cq_data_size, "cq_cnt" = cq_cnt,
            "ep_cnt" = ep_cnt, "tx_ctx_cnt" = tx_ctx_cnt, "rx_ctx_cnt" = rx_ctx_cnt,
            "max_ep_tx_ctx" = max_ep_tx_ctx, "max_ep_rx_ctx" = max_ep_rx_ctx,
            "max_ep_stx_ctx" = max_ep_stx_ctx, "max_ep_srx_ctx" = max_ep_srx_ctx,
            "cntr_cnt" = cntr_cnt, "mr_iov_limit" = mr_iov_limit, "caps" = caps,
            "mode" = mode, "auth_key" = auth_key, "auth_key_size" = auth_key_size,
            "max_err_data" = max_err_data, "mr_cnt" = mr_cnt, "tclass" = tclass,
        }),
        layout!("struct fi_fabric_attr" = FiFabricAttr {
            "fabric" = fabric, "name" = name, "prov_name" = prov_name,
            "prov_version" = prov_version, "api_version" = api_version,
        }),
        layout!("struct fi_device_attr" = FiDeviceAttr {
            "name" = name, "device_id" = device_id, "device_version" = device_version,
            "vendor_id" = vendor_id, "driver" = driver, "firmware" = firmware,
        }),
        layout!("struct fi_pci_attr" = FiPciAttr {
            "domain_id" = domain_id, "bus_id" = bus_id, "device_id" = device_id,
            "function_id" = function_id,
        }),
        layout!("struct fi_bus_attr" = FiBusAttr { "bus_type" = bus_type, "attr.pci" = pci }),
        layout!("struct fi_link_attr" = FiLinkAttr {
            "address" = address, "mtu" = mtu, "speed" = speed, "state" = state,
            "network_type" = network_type,
        }),
        layout!("struct fid_nic" = FidNic {
            "fid" = fid, "device_attr" = device_attr, "bus_attr" = bus_attr,
            "link_attr" = link_attr, "prov_attr" = prov_attr,
        }),
        layout!("struct fi_info" = FiInfo {
            "next" = next, "caps" = caps, "mode" = mode, "addr_format" = addr_format,
            "src_addrlen" = src_addrlen, "dest_addrlen" = dest_addrlen,
            "src_addr" = src_addr, "dest_addr" = dest_addr, "handle" = handle,
            "tx_attr" = tx_attr, "rx_attr" = rx_attr, "ep_attr" = ep_attr,
            "domain_attr" = domain_attr, "fabric_attr" = fabric_attr, "nic" = nic,
        }),
        layout!("struct fi_param" = FiParam {
            "name" = name, "type" = ty, "help_string" = help_string, "value" = value,
        }),
        layout!("struct fi_provider" = FiProviderHead {
            "version" = version, "fi_version" = fi_version, "context" = context,
            "name" = name,
        }),
    ]
}

/// The C program printing `<name> <number>` per line, and the lines Rust expects.
fn program_and_expected(list: &[Layout]) -> (String, Vec<String>) {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/fabric.h>\n\
         #include <rdma/providers/fi_prov.h>\nint main(void)\n{\n",
    );
    let mut expected = Vec::new();
    for l in list {
        // `struct fi_provider` is read only up to `name`: compare that prefix.
        if l.c_name != "struct fi_provider" {
            c.push_str(&format!(
                "\tprintf(\"{0} %zu\\n\", sizeof({0}));\n",
                l.c_name
            ));
            expected.push(format!("{} {}", l.c_name, l.size));
        }
        for (f, off) in &l.fields {
            c.push_str(&format!(
                "\tprintf(\"{0}.{1} %zu\\n\", offsetof({0}, {1}));\n",
                l.c_name, f
            ));
            expected.push(format!("{}.{} {}", l.c_name, f, off));
        }
    }
    c.push_str("\treturn 0;\n}\n");
    (c, expected)
}

#[test]
fn rust_layouts_match_the_installed_headers() {
    if common::skip_without_headers("layout") {
        return;
    }
    let list = layouts();
    let (src, expected) = program_and_expected(&list);
    let exe = common::compile_c("layout", &src);
    let out = Command::new(&exe).output().expect("run layout probe");
    assert!(out.status.success());
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let mismatches: Vec<String> = expected
        .iter()
        .zip(&got)
        .filter(|(e, g)| e != g)
        .map(|(e, g)| format!("rust: {e}   C: {g}"))
        .collect();
    assert_eq!(got.len(), expected.len(), "line count differs");
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    // Every slot of a table built here is set (never a null pointer).
    let ops = FiOps::with_close(dummy_close);
    assert!(ops.close.is_some() && ops.bind.is_some() && ops.control.is_some());
    assert!(ops.ops_open.is_some() && ops.tostr.is_some() && ops.ops_set.is_some());
    assert_eq!(ops.size, size_of::<FiOps>());
}

unsafe extern "C" fn dummy_close(_: *mut Fid) -> std::ffi::c_int {
    0
}
