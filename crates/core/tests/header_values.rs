//! Core's endpoint-option, atomic-query, `fi_control` command and traffic-class values
//! against the installed libfabric 1.17 headers: a C program printing each C constant
//! is generated from the list below, compiled with `cc` and run; every line must equal
//! the Rust value. Skipped (with a message) where the headers or a C compiler are
//! missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use ofi_core::enums::{EpOption, HmemP2p, OptLevel};
use ofi_core::flags::AtomicQueryFlags;

const HEADER: &str = "/usr/include/rdma/fi_endpoint.h";

/// (C expression, Rust value) pairs: every value core defines for these headers.
fn values() -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = Vec::new();
    for l in OptLevel::ALL {
        v.push((l.name().to_string(), l.to_raw().into()));
    }
    for o in EpOption::ALL {
        v.push((o.name().to_string(), o.to_c_int().into()));
    }
    for p in HmemP2p::ALL {
        v.push((p.name().to_string(), p.to_raw().into()));
    }
    for (name, f) in AtomicQueryFlags::NAMED {
        // The 64-bit flags are compared as their bit pattern.
        v.push((name.to_string(), f.bits() as i64));
    }
    use ofi_core::control as c;
    for (name, x) in [
        ("FI_GETOPSFLAG", c::GETOPSFLAG as u32),
        ("FI_SETOPSFLAG", c::SETOPSFLAG as u32),
        ("FI_ALIAS", c::ALIAS as u32),
        ("FI_GETWAIT", c::GETWAIT as u32),
        ("FI_ENABLE", c::ENABLE as u32),
        ("FI_BACKLOG", c::BACKLOG as u32),
        ("FI_TC_UNSPEC", c::TC_UNSPEC),
        ("FI_TC_DSCP", c::TC_DSCP),
        ("FI_TC_LABEL", c::TC_LABEL),
        ("FI_TC_BEST_EFFORT", c::TC_BEST_EFFORT),
        ("FI_TC_LOW_LATENCY", c::TC_LOW_LATENCY),
        ("FI_TC_DEDICATED_ACCESS", c::TC_DEDICATED_ACCESS),
        ("FI_TC_BULK_DATA", c::TC_BULK_DATA),
        ("FI_TC_SCAVENGER", c::TC_SCAVENGER),
        ("FI_TC_NETWORK_CTRL", c::TC_NETWORK_CTRL),
        ("fi_tc_dscp_set(46)", c::tc_dscp_set(46)),
        (
            "fi_tc_dscp_get(fi_tc_dscp_set(46))",
            c::tc_dscp_get(c::tc_dscp_set(46)).into(),
        ),
        (
            "fi_tc_dscp_get(FI_TC_LOW_LATENCY)",
            c::tc_dscp_get(c::TC_LOW_LATENCY).into(),
        ),
    ] {
        v.push((name.to_string(), x.into()));
    }
    v
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn option_and_atomic_query_values_match_the_header() {
    if !Path::new(HEADER).exists() {
        eprintln!("skipped: {HEADER} is not installed");
        return;
    }
    let values = values();
    let mut src = String::from(
        "#include <stdio.h>\n#include <stdint.h>\n#include <rdma/fabric.h>\n\
         #include <rdma/fi_endpoint.h>\n#include <rdma/fi_atomic.h>\n\
         int main(void) {\n",
    );
    for (c, _) in &values {
        src.push_str(&format!(
            "    printf(\"%s %lld\\n\", \"{c}\", (long long)(int64_t)({c}));\n"
        ));
    }
    src.push_str("    return 0;\n}\n");

    let dir = Scratch(
        std::env::temp_dir().join(format!("ofi-core-header-values-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let c_file = dir.0.join("probe.c");
    let exe = dir.0.join("probe");
    std::fs::write(&c_file, &src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = match Command::new(&cc)
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&c_file)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no C compiler ({cc}: {e})");
            return;
        }
    };
    assert!(
        built.status.success(),
        "cc failed:\n{}\n{src}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), values.len(), "{text}");
    let mut wrong = Vec::new();
    for ((c, rust), line) in values.iter().zip(lines) {
        let c_value: i64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        if c_value != *rust {
            wrong.push(format!("{c}: C {c_value}, Rust {rust}"));
        }
    }
    assert!(wrong.is_empty(), "values differ:\n{}", wrong.join("\n"));
}
