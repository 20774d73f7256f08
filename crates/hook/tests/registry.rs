//! Applying hooks: `Registry::set_hooks` / `with_hooks` (the `FI_HOOK` grammar itself,
//! `parse_hook_list`, is tested in the host's registry module), the global registry's
//! `FI_HOOK` (in a child process), fabrics opened for layering
//! (through the host table) hooked too, and the errors.

mod common;

use std::sync::OnceLock;

use common::{info, registry, CHILD_BOUND};
use ofi::abi::ProviderKind;
use ofi::getinfo::GetinfoRequest;
use ofi::provider::{Host, Provider, Unsupported};
use ofi::registry::MAX_HOOKS;
use ofi::{EpType, Errno, Error, Info, Result, Version, API_VERSION};
use ofi_testkit::child;

#[test]
fn hooks_wrap_in_order_and_only_when_asked() {
    let reg = registry("");
    assert!(reg.hooks().is_empty());
    let i = info(&reg, "udp", EpType::Dgram);
    assert_eq!(
        reg.open_fabric(&i).unwrap().provider(),
        "udp",
        "no hook: no wrapper"
    );

    reg.set_hooks("noop;perf").unwrap();
    assert_eq!(reg.hooks(), vec!["ofi_hook_noop", "ofi_hook_perf"]);
    let f = reg.open_fabric(&i).unwrap();
    assert_eq!(f.provider(), "ofi_hook_perf", "the last hook is outermost");
    let d = f.domain(&i).unwrap();
    assert_eq!(d.provider(), "ofi_hook_perf");
    assert_eq!(reg.open_fabric_unhooked(&i).unwrap().provider(), "udp");
}

#[test]
fn hooks_are_listed_but_never_selected() {
    let reg = registry("");
    let provs = reg.providers();
    for name in ["perf", "trace", "debug", "noop", "fault"] {
        let p = provs
            .iter()
            .find(|p| p.name == format!("ofi_hook_{name}"))
            .unwrap_or_else(|| panic!("{name} not registered"));
        assert_eq!(p.kind, ProviderKind::Hook);
    }
    let infos = reg.getinfo(&GetinfoRequest::new(API_VERSION)).unwrap();
    assert!(infos.iter().all(|i| !i.prov_name().contains("hook")));
}

#[test]
fn unknown_hook_is_enoent_and_changes_nothing() {
    let reg = registry("noop");
    let e = reg.set_hooks("noop,bogus").unwrap_err();
    assert_eq!(e.code(), Errno::ENOENT);
    assert!(e.to_string().contains("ofi_hook_bogus"), "{e}");
    assert_eq!(reg.hooks(), vec!["ofi_hook_noop"]);
    // A core provider is not a hook.
    assert_eq!(
        reg.set_hooks("ofi_hook_udp").unwrap_err().code(),
        Errno::ENOENT
    );
}

#[test]
fn a_hook_opened_directly_has_nothing_to_wrap() {
    let reg = registry("");
    let i = info(&reg, "udp", EpType::Dgram);
    let hook = reg.find("ofi_hook_noop").unwrap();
    let e = hook.open_fabric(&i).unwrap_err();
    assert_eq!(e.code(), Errno::ENOENT, "{e}");
}

/// A utility-like provider that opens the fabric beneath it through the host table and
/// records that fabric's provider name (as rxd does with udp).
struct Layer {
    host: Host,
}

static SEEN: OnceLock<String> = OnceLock::new();

impl Provider for Layer {
    const NAME: &'static str = "layer_probe";
    const VERSION: Version = Version::new(1, 0);
    const KIND: ProviderKind = ProviderKind::Utility;
    type Fabric = Unsupported;

    fn init(host: &Host) -> Result<Layer> {
        Ok(Layer { host: *host })
    }

    fn info_templates(&self) -> Vec<Info> {
        Vec::new()
    }

    fn fabric(&self, info: &Info) -> Result<Unsupported> {
        let f = self.host.open_fabric(info)?;
        let _ = SEEN.set(f.provider().to_string());
        Err(Error::new(Errno::ENOSYS, "probe only"))
    }
}

/// The child side of `global_registry_takes_fi_hook` (which runs itself again in a
/// child process with `OFI_HOOK_TEST_CHILD` and `FI_HOOK` set).
fn global_fi_hook_child() {
    for e in ofi_hook::builtin_entries() {
        ofi::registry::add_builtin(e);
    }
    ofi::registry::add_builtin(ofi::abi::entry_for::<Layer>());
    let reg = ofi::registry();
    assert_eq!(
        reg.hooks(),
        vec!["ofi_hook_noop", "ofi_hook_perf"],
        "bogus skipped"
    );
    let i = info(reg, "udp", EpType::Dgram);
    // One perf summary (a JSON line at close) for the fabric opened here …
    let f = reg.open_fabric(&i).unwrap();
    assert_eq!(f.provider(), "ofi_hook_perf");
    drop(f);
    // … and one for the fabric a layering provider opens beneath itself.
    let layer = reg.find("layer_probe").unwrap();
    assert_eq!(layer.open_fabric(&i).unwrap_err().code(), Errno::ENOSYS);
    assert_eq!(SEEN.get().map(String::as_str), Some("udp"));
    println!("CHILD OK");
}

#[test]
fn global_registry_takes_fi_hook() {
    let Some((_dir, file, run)) = common::run_child_with_perf_file(
        "global_registry_takes_fi_hook",
        global_fi_hook_child,
        |c| {
            c.env("FI_HOOK", "noop;bogus,perf");
        },
        "perf.json",
    ) else {
        return; // This process was the child.
    };
    run.assert_ok_printing("CHILD OK");
    let stderr = &run.stderr;
    assert!(
        stderr.contains("FI_HOOK names 'ofi_hook_bogus', which is not a registered hook provider"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 2, "two hooked fabrics: {text}");
    assert!(
        text.lines().all(|l| l.contains("\"provider\":\"udp\"")),
        "{text}"
    );
}

/// A list of 5,000 hooks overflowed the stack when a fabric opened (each hook is a
/// layer every call passes through): now refused with one error, nothing changed.
#[test]
fn a_hook_list_past_the_limit_is_einval_and_changes_nothing() {
    let reg = registry("noop");
    let long = vec!["noop"; 5000].join(",");
    let e = reg.set_hooks(&long).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.to_string().contains("5000 hooks"), "{e}");
    assert_eq!(reg.hooks(), vec!["ofi_hook_noop"]);
    // The limit itself is fine, and a fabric opens through all of it.
    let at_limit = vec!["noop"; MAX_HOOKS].join(",");
    reg.set_hooks(&at_limit).unwrap();
    let i = info(&reg, "udp", EpType::Dgram);
    let f = reg.open_fabric(&i).unwrap();
    assert_eq!(f.provider(), "ofi_hook_noop");
    assert_eq!(f.domain(&i).unwrap().provider(), "ofi_hook_noop");
}

/// The child's side of [`a_fi_hook_past_the_limit_warns_once_and_applies_none`] (a
/// process of its own: `FI_HOOK` is read once per process).
fn child_long_fi_hook() {
    for e in ofi_hook::builtin_entries() {
        ofi::registry::add_builtin(e);
    }
    let reg = ofi::registry();
    assert!(reg.hooks().is_empty(), "{} hooks", reg.hooks().len());
    let i = info(reg, "udp", EpType::Dgram);
    let f = reg.open_fabric(&i).unwrap();
    assert_eq!(f.provider(), "udp");
    f.domain(&i).unwrap();
    println!("CHILD OK");
}

/// `FI_HOOK` of 5,000 entries aborted the process at the first fabric open; now one
/// warning line, no hook applied, and the fabric opens.
#[test]
fn a_fi_hook_past_the_limit_warns_once_and_applies_none() {
    if std::env::var_os("OFI_HOOK_TEST_LONG_CHILD").is_some() {
        return child_long_fi_hook();
    }
    let mut cmd = child::test_command(
        "OFI_HOOK_TEST_LONG_CHILD",
        "a_fi_hook_past_the_limit_warns_once_and_applies_none",
    );
    cmd.env("FI_HOOK", vec!["noop"; 5000].join(","));
    let run = child::run_to_end(cmd, CHILD_BOUND);
    run.assert_ok_printing("CHILD OK");
    let stderr = &run.stderr;
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("FI_HOOK")).collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    assert!(warned[0].contains("5000 hooks"), "{stderr}");
}
