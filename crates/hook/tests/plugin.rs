//! Hooks through the plugin boundary: an out-of-tree hook (tests/vendor-hook, built
//! here with cargo as its own workspace) and this crate built as a plugin (the noop
//! hook) load from a plugin directory, apply with `set_hooks`, and pass the
//! conformance suite over udp — alone, and stacked with a built-in hook; and built-in
//! hooks over udp loaded as a plugin.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::{next, pair, WAIT};
use ofi::abi::ProviderKind;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, EpType, Errno, Info};
use ofi_conformance::{conformance_suite, expected, Subject};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build the vendor hook once per process; its plugin directory.
fn vendor_hook_dir() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut b = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = &*b {
        return d.clone();
    }
    let target = root().join("target").join("plugin-build");
    let manifest = root().join("crates/hook/tests/vendor-hook/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "building the vendor hook failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = "libofi_hook_count.so";
    let dir = target.join("dirs").join("vendor-hook");
    std::fs::create_dir_all(&dir).unwrap();
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    std::fs::copy(target.join("debug").join(file), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
    *b = Some(dir.clone());
    dir
}

/// udp linked in, the built-in hooks, the vendor hook and the noop hook as plugins.
fn registry(hooks: &str) -> Registry {
    let mut builtins = vec![ofi::abi::entry_for::<ofi_prov_udp::UdpProvider>()];
    builtins.extend(ofi_hook::builtin_entries());
    let noop_dir = ofi_conformance::plugin::build_intree("hook", "ofi_hook");
    let reg = Registry::build(RegistryConfig {
        builtins,
        plugin_dirs: vec![vendor_hook_dir(), noop_dir],
        ..RegistryConfig::default()
    });
    reg.set_hooks(hooks).expect("hooks registered");
    reg
}

#[test]
fn plugin_hooks_load_and_wrap() {
    let reg = registry("count");
    let provs = reg.providers();
    let count = provs
        .iter()
        .find(|p| p.name == "ofi_hook_count")
        .expect("loaded");
    assert_eq!(count.kind, ProviderKind::Hook);
    assert!(count.path.is_some(), "a plugin");
    // The plugin noop supersedes the built-in one (same name and version).
    let noop = provs
        .iter()
        .find(|p| p.name == "ofi_hook_noop" && p.superseded_by.is_none())
        .unwrap();
    assert!(noop.path.is_some(), "{noop:?}");

    let p = pair(&reg, "udp", EpType::Dgram);
    assert_eq!(p.fabric.provider(), "ofi_hook_count");
    let m = [1u8; 8];
    // SAFETY: refused by the hook before reaching udp.
    let e = unsafe {
        p.a.ep
            .send(m.as_ptr(), 8, std::ptr::null_mut(), p.to_b, 0xdead)
    }
    .unwrap_err();
    assert_eq!(
        e.code(),
        Errno::ECANCELED,
        "the plugin hook's own behaviour"
    );
    let mut buf = [0u8; 8];
    // SAFETY: `buf` and `m` outlive the completions read below.
    unsafe {
        p.b.ep
            .recv(buf.as_mut_ptr(), 8, std::ptr::null_mut(), p.to_a, 1)
            .unwrap();
        p.a.ep
            .send(m.as_ptr(), 8, std::ptr::null_mut(), p.to_b, 2)
            .unwrap();
    }
    assert_eq!(next(&p.a.cq, WAIT).expect("send completes").op_context, 2);
    assert_eq!(next(&p.b.cq, WAIT).expect("recv completes").op_context, 1);
    assert_eq!(buf, m);
}

fn udp(hooks: &str) -> Subject {
    let mut h = Info::hints();
    h.addr_format = AddrFormat::SOCKADDR_IN;
    Subject::new(registry(hooks), "udp").with_hints(h)
}

/// udp loaded as a plugin, wrapped by built-in hooks.
fn udp_as_plugin(hooks: &str) -> Subject {
    let udp_dir = ofi_conformance::plugin::build_intree("prov-udp", "ofi_prov_udp");
    let reg = Registry::build(RegistryConfig {
        builtins: ofi_hook::builtin_entries(),
        plugin_dirs: vec![udp_dir],
        ..RegistryConfig::default()
    });
    reg.set_hooks(hooks).expect("hooks registered");
    let mut h = Info::hints();
    h.addr_format = AddrFormat::SOCKADDR_IN;
    Subject::new(reg, "udp").with_hints(h)
}

conformance_suite!(udp_vendor_hook_plugin, udp("count"), expected::UDP);
conformance_suite!(
    udp_plugin_under_builtin_hooks,
    udp_as_plugin("perf,debug"),
    expected::UDP
);
conformance_suite!(
    udp_stacked_plugins_and_builtin,
    udp("noop,perf,count"),
    expected::UDP
);
