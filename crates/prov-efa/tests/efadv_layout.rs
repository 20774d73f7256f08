//! The mirrors of libefa's structures and constants in `ofi_prov_efa::libefa`, checked
//! against the installed `<infiniband/efadv.h>`: a C program printing each `sizeof`,
//! `_Alignof`, `offsetof` and value is compiled with `cc` and run, and its output must
//! equal the Rust side's. Skipped, saying so, without the header (rdma-core's
//! `libibverbs-dev`). This checks the declarations only: calling libefa needs an EFA
//! device, which this machine does not have.

use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use ofi_prov_efa::libefa::*;

const HEADER: &str = "/usr/include/infiniband/efadv.h";

/// (C expression, Rust value) pairs, printed by the probe as `expr value`.
fn facts() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = Vec::new();
    let mut s = |c: &str, r: usize| v.push((c.to_owned(), r as u64));
    s(
        "sizeof(struct efadv_device_attr)",
        size_of::<EfadvDeviceAttr>(),
    );
    s(
        "_Alignof(struct efadv_device_attr)",
        align_of::<EfadvDeviceAttr>(),
    );
    for (f, o) in [
        ("comp_mask", offset_of!(EfadvDeviceAttr, comp_mask)),
        ("max_sq_wr", offset_of!(EfadvDeviceAttr, max_sq_wr)),
        ("max_rq_wr", offset_of!(EfadvDeviceAttr, max_rq_wr)),
        ("max_sq_sge", offset_of!(EfadvDeviceAttr, max_sq_sge)),
        ("max_rq_sge", offset_of!(EfadvDeviceAttr, max_rq_sge)),
        (
            "inline_buf_size",
            offset_of!(EfadvDeviceAttr, inline_buf_size),
        ),
        ("reserved", offset_of!(EfadvDeviceAttr, reserved)),
        ("device_caps", offset_of!(EfadvDeviceAttr, device_caps)),
        ("max_rdma_size", offset_of!(EfadvDeviceAttr, max_rdma_size)),
    ] {
        s(&format!("offsetof(struct efadv_device_attr, {f})"), o);
    }
    s(
        "sizeof(struct efadv_qp_init_attr)",
        size_of::<EfadvQpInitAttr>(),
    );
    s(
        "_Alignof(struct efadv_qp_init_attr)",
        align_of::<EfadvQpInitAttr>(),
    );
    for (f, o) in [
        ("comp_mask", offset_of!(EfadvQpInitAttr, comp_mask)),
        (
            "driver_qp_type",
            offset_of!(EfadvQpInitAttr, driver_qp_type),
        ),
        ("reserved", offset_of!(EfadvQpInitAttr, reserved)),
    ] {
        s(&format!("offsetof(struct efadv_qp_init_attr, {f})"), o);
    }
    s("sizeof(struct efadv_ah_attr)", size_of::<EfadvAhAttr>());
    s("_Alignof(struct efadv_ah_attr)", align_of::<EfadvAhAttr>());
    for (f, o) in [
        ("comp_mask", offset_of!(EfadvAhAttr, comp_mask)),
        ("ahn", offset_of!(EfadvAhAttr, ahn)),
        ("reserved", offset_of!(EfadvAhAttr, reserved)),
    ] {
        s(&format!("offsetof(struct efadv_ah_attr, {f})"), o);
    }
    v.push((
        "EFADV_DEVICE_ATTR_CAPS_RDMA_READ".into(),
        u64::from(CAPS_RDMA_READ),
    ));
    v.push((
        "EFADV_DEVICE_ATTR_CAPS_RNR_RETRY".into(),
        u64::from(CAPS_RNR_RETRY),
    ));
    v.push((
        "EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID".into(),
        u64::from(CAPS_CQ_WITH_SGID),
    ));
    v.push((
        "EFADV_QP_DRIVER_TYPE_SRD".into(),
        u64::from(QP_DRIVER_TYPE_SRD),
    ));
    v.push(("EFADV_WC_EX_WITH_SGID".into(), WC_EX_WITH_SGID));
    v
}

#[test]
fn mirrors_match_the_installed_efadv_header() {
    if !std::path::Path::new(HEADER).exists() {
        eprintln!("efadv_layout: SKIPPED: {HEADER} not found (install libibverbs-dev)");
        return;
    }
    let facts = facts();
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/efadv.h>\nint main(void) {\n",
    );
    for (c, _) in &facts {
        src.push_str(&format!(
            "\tprintf(\"%llu\\n\", (unsigned long long)({c}));\n"
        ));
    }
    src.push_str("\treturn 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("efadv-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c_file, exe) = (dir.join("probe.c"), dir.join("probe"));
    std::fs::write(&c_file, &src).unwrap();
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&c_file)
        .output()
        .expect("run cc");
    let run = cc.status.success().then(|| Command::new(&exe).output());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = run.unwrap().expect("run the probe");
    assert!(out.status.success());
    let got: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().expect("a number"))
        .collect();
    assert_eq!(got.len(), facts.len());
    let bad: Vec<String> = facts
        .iter()
        .zip(&got)
        .filter(|((_, r), c)| r != *c)
        .map(|((e, r), c)| format!("{e}: Rust {r}, C {c}"))
        .collect();
    assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
}
