//! `FI_UNIVERSE_SIZE` sizes the AVs opened with `attr.count` 0, and a value that is no
//! size is an error naming it at `av_open` (each case in a child process, whose
//! environment it sets). Until 2026-11-27 nothing read it: `abc`, `-1` and `1e20`
//! were taken silently and every AV reserved 1024 entries.

use ofi_core::av::AvAttr;
use ofi_core::enums::AddrFormat;
use ofi_core::error::Errno;
use ofi_kit::av::{AvConfig, KitAv, DEFAULT_UNIVERSE_SIZE, RESERVE_MAX};

/// The child's side (a process of its own, whose environment [`run`] sets): open an AV
/// with the default count, then one with an explicit huge count.
fn child_open_av() {
    // Parameters reach a provider through the host, as in an application.
    ofi_host::host_table::install();
    let av = KitAv::<()>::open(
        &AvAttr::default(),
        0,
        AvConfig::new(AddrFormat::SOCKADDR_IN),
    );
    match av {
        Ok(av) => println!("CHILD ok {}", av.reserved()),
        Err(e) => println!("CHILD err {:?} {e}", e.code()),
    }
    // An explicit count wins over the parameter (and is never reserved past the cap).
    let attr = AvAttr {
        count: usize::MAX,
        ..AvAttr::default()
    };
    let av = KitAv::<()>::open(&attr, 0, AvConfig::new(AddrFormat::SOCKADDR_IN));
    println!("CHILD count {}", av.map(|a| a.reserved()).unwrap_or(0));
}

/// The child's two lines: what the default open gave, and what an explicit count gave.
fn run(value: Option<&str>) -> (String, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "the_universe_size_sizes_an_av_and_bad_values_are_einval",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("OFI_KIT_UNIVERSE_CHILD", "1")
    .env_remove("FI_UNIVERSE_SIZE");
    if let Some(v) = value {
        cmd.env("FI_UNIVERSE_SIZE", v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    // (The harness may print its "test ... " on the same line.)
    let mut lines = stdout
        .lines()
        .filter_map(|l| l.find("CHILD ").map(|i| &l[i + "CHILD ".len()..]));
    let first = lines.next().unwrap_or_default().to_string();
    let second = lines.next().unwrap_or_default().to_string();
    assert!(out.status.success(), "{stdout}");
    (first, second)
}

#[test]
fn the_universe_size_sizes_an_av_and_bad_values_are_einval() {
    if std::env::var_os("OFI_KIT_UNIVERSE_CHILD").is_some() {
        return child_open_av();
    }
    assert_eq!(run(None).0, format!("ok {DEFAULT_UNIVERSE_SIZE}"));
    assert_eq!(run(Some("5000")).0, "ok 5000");
    assert_eq!(run(Some("4000000000")).0, format!("ok {RESERVE_MAX}"));
    for bad in ["abc", "-1", "1e20", "0", "99999999999"] {
        let (first, _) = run(Some(bad));
        assert!(
            first.starts_with(&format!("err {:?}", Errno::EINVAL))
                && first.contains("FI_UNIVERSE_SIZE"),
            "FI_UNIVERSE_SIZE={bad}: {first}"
        );
    }
    assert_eq!(run(Some("5000")).1, format!("count {RESERVE_MAX}"));
}
