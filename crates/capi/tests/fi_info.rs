//! The C library's own `fi_info` (Debian `libfabric-bin`, unmodified) over our
//! libfabric.so.1: `-l`, `-p`, `-t`, `-v`, `-e`. Skipped, with the reason printed,
//! when the binary is absent (CI installs it).

mod common;

use std::path::Path;
use std::process::Command;

const FI_INFO: &str = "/usr/bin/fi_info";

/// Runs `fi_info args` over our library; (exit success, stdout, stderr).
fn fi_info(args: &[&str]) -> Option<(bool, String, String)> {
    if !Path::new(FI_INFO).exists() {
        eprintln!("fi_info: SKIPPED: {FI_INFO} not found (install libfabric-bin)");
        return None;
    }
    let mut cmd = Command::new(FI_INFO);
    cmd.args(args)
        .env_remove("FI_PROVIDER")
        .env_remove("FI_HOOK")
        .env("FI_LOG_LEVEL", "warn");
    let out = common::run_with_lib(&mut cmd, 60);
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Runs `fi_info args`, which must succeed; its stdout.
fn fi_info_ok(args: &[&str]) -> Option<String> {
    let (ok, out, err) = fi_info(args)?;
    assert!(ok, "fi_info {args:?} failed:\n{err}");
    Some(out)
}

/// Asserts that `out` has lines `<key>: <value>` and that `ok` holds for every value.
fn assert_every_value(out: &str, key: &str, ok: impl Fn(&str) -> bool) {
    let found = values(out, key);
    assert!(!found.is_empty(), "no {key}:\n{out}");
    assert!(found.iter().all(|v| ok(v)), "{key}: {found:?}");
}

/// The values of the lines `<key>: <value>` of `out` (indentation ignored).
fn values<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.trim().strip_prefix(key)?.strip_prefix(": "))
        .collect()
}

#[test]
fn list_shows_the_in_tree_providers() {
    let Some(out) = fi_info_ok(&["-l"]) else {
        return;
    };
    for p in ["udp:", "tcp:", "shm:", "ofi_rxm:", "ofi_rxd:"] {
        assert!(out.lines().any(|l| l == p), "{p} missing:\n{out}");
    }
}

#[test]
fn provider_filter_keeps_tcp_and_its_layers() {
    let Some(out) = fi_info_ok(&["-p", "tcp"]) else {
        return;
    };
    assert_every_value(&out, "provider", |p| p == "tcp" || p == "tcp;ofi_rxm");
    assert!(out.contains("type: FI_EP_MSG"), "{out}");
    assert!(out.contains("protocol: FI_PROTO_SOCK_TCP"), "{out}");
}

#[test]
fn ep_type_filter_returns_only_rdm() {
    let Some(out) = fi_info_ok(&["-t", "FI_EP_RDM"]) else {
        return;
    };
    assert_every_value(&out, "type", |t| t == "FI_EP_RDM");
    for p in ["shm", "tcp;ofi_rxm", "udp;ofi_rxd"] {
        assert!(
            out.contains(&format!("provider: {p}\n")),
            "{p} missing:\n{out}"
        );
    }
}

#[test]
fn verbose_prints_every_attribute_block() {
    let Some(out) = fi_info_ok(&["-p", "udp", "-v"]) else {
        return;
    };
    for block in [
        "---\nfi_info:\n",
        "    fi_tx_attr:\n",
        "    fi_rx_attr:\n",
        "    fi_ep_attr:\n",
        "    fi_domain_attr:\n",
        "    fi_fabric_attr:\n",
        "        prov_name: udp\n",
        "        type: FI_EP_DGRAM\n",
        "        api_version: 1.17\n",
    ] {
        assert!(out.contains(block), "{block:?} missing:\n{out}");
    }
}

#[test]
fn env_lists_the_parameters_of_ofi_rs() {
    let Some(out) = fi_info_ok(&["-e"]) else {
        return;
    };
    // Core parameters, and ones only ofi-rs has: the library really is ours.
    for var in [
        "# FI_PROVIDER: String",
        "# FI_LOG_LEVEL: String",
        "# FI_OFI_HOOK_FAULT_SEED:",
    ] {
        assert!(out.contains(var), "{var} missing:\n{out}");
    }
}

#[test]
fn no_match_is_reported_by_the_tool() {
    let Some((ok, out, err)) = fi_info(&["-p", "no_such_provider"]) else {
        return;
    };
    assert!(!ok, "fi_info succeeded:\n{out}");
    // The tool prints the code fi_getinfo returned: -FI_ENODATA.
    assert!(err.contains("fi_getinfo: -61"), "{err}");
}
