//! Reads the `ofi` crate's version from its manifest, for `fi_info --version`.

use std::fs;

fn main() {
    let manifest = "../ofi/Cargo.toml";
    println!("cargo:rerun-if-changed={manifest}");
    let text = fs::read_to_string(manifest).unwrap_or_default();
    let mut in_package = false;
    let mut version = String::from("unknown");
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if !in_package {
            continue;
        }
        if let Some(rest) = line.strip_prefix("version") {
            if let Some(v) = rest.trim_start().strip_prefix('=') {
                let v = v.trim().trim_matches('"');
                if !v.is_empty() {
                    version = v.to_string();
                }
                break;
            }
        }
    }
    println!("cargo:rustc-env=OFI_CRATE_VERSION={version}");
}
