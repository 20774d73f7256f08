//! Runs the built `fi_info` binary, one test (or more) per option.
//!
//! Every run sees the example vendor provider (`unixdgram`, `FI_EP_DGRAM`), built out of
//! tree and loaded through `FI_PROVIDER_PATH`, plus whatever providers this build links
//! in; `plugins.toml` is switched off. So listings are never empty, filters are checked
//! against real results, and a filter that excludes everything must fail with the
//! C tool's `fi_getinfo: -61 ...` form and status 61.

mod common;

use common::Run;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[allow(dead_code)]
#[path = "../../ofi/tests/vendor/mod.rs"]
mod vendor;

/// A plugin directory holding the example provider (under `target/`, see
/// `vendor::shared_plugin_dir`).
fn plugins() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| vendor::shared_plugin_dir("fi_info-tests"))
}

fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fi_info"));
    for var in ["FI_PROVIDER", "FI_LOG_LEVEL", "FI_HOOK"] {
        c.env_remove(var);
    }
    c.env("FI_PROVIDER_PATH", plugins());
    c.env("OFI_PLUGINS_CONFIG", "/dev/null");
    c
}

/// Runs `c` (an `fi_info`) to its end, bounded by a minute.
fn run_cmd(c: Command) -> Run {
    common::run_bounded(c, Duration::from_secs(60))
}

fn fi_info(args: &[&str]) -> Run {
    let mut c = command();
    c.args(args);
    run_cmd(c)
}

/// The stderr of `fi_info args`, which must exit with `status` and print nothing on
/// stdout (a refused command line).
fn refused(args: &[&str], status: i32) -> String {
    let r = fi_info(args);
    assert_eq!(r.status, status, "{args:?}");
    assert_eq!(r.out, "", "{args:?}");
    r.err
}

/// Checks the getinfo-failure form for `FI_ENODATA`.
fn assert_nodata(r: &Run) {
    assert_eq!(r.status, 61, "stdout: {}\nstderr: {}", r.out, r.err);
    let mut lines = r.err.lines();
    assert_eq!(
        lines.next(),
        Some("fi_getinfo: -61 (No data available)"),
        "{}",
        r.err
    );
    let reason = lines.next().unwrap_or("");
    assert!(
        reason.starts_with("reason: ") && reason.len() > 8,
        "{}",
        r.err
    );
}

/// Splits the default listing into its 6-line blocks, checking each line's shape.
fn blocks(out: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() % 6, 0, "{out}");
    let keys = [
        "provider: ",
        "    fabric: ",
        "    domain: ",
        "    version: ",
        "    type: ",
        "    protocol: ",
    ];
    lines
        .chunks(6)
        .map(|chunk| {
            for (l, k) in chunk.iter().zip(keys) {
                assert!(l.starts_with(k), "{l:?} should start with {k:?}\n{out}");
            }
            let v = &chunk[3]["    version: ".len()..];
            let (maj, min) = v.split_once('.').expect("version M.m");
            assert!(
                maj.parse::<u16>().is_ok() && min.parse::<u16>().is_ok(),
                "{v}"
            );
            assert!(
                chunk[4]["    type: ".len()..].starts_with("FI_EP_"),
                "{}",
                chunk[4]
            );
            chunk.iter().map(|s| s.to_string()).collect()
        })
        .collect()
}

/// A successful, non-empty listing (its blocks).
fn listing(r: &Run) -> Vec<Vec<String>> {
    assert_eq!(r.status, 0, "stdout: {}\nstderr: {}", r.out, r.err);
    let bs = blocks(&r.out);
    assert!(!bs.is_empty(), "{}", r.out);
    bs
}

/// A successful listing (its blocks) or the ENODATA failure (no blocks).
fn listing_or_nodata(r: &Run) -> Vec<Vec<String>> {
    if r.status == 0 {
        assert_eq!(r.err, "");
        blocks(&r.out)
    } else {
        assert_nodata(r);
        Vec::new()
    }
}

/// The verbose blocks of a successful listing, or none after the ENODATA failure.
fn verbose_blocks_or_nodata(r: &Run) -> Vec<String> {
    if r.status == 0 {
        verbose_blocks(&r.out)
    } else {
        assert_nodata(r);
        Vec::new()
    }
}

/// The verbose blocks (`---` separated); each must be a full `fi_info:` block.
fn verbose_blocks(out: &str) -> Vec<String> {
    if out.is_empty() {
        return Vec::new();
    }
    assert!(out.starts_with("---\n"), "{out}");
    out.split("---\n")
        .skip(1)
        .map(|b| {
            assert!(b.starts_with("fi_info:\n    caps: ["), "{b}");
            for needed in [
                "\n    fi_tx_attr:\n",
                "\n    fi_rx_attr:\n",
                "\n    fi_ep_attr:\n",
                "\n    fi_domain_attr:\n",
                "\n    fi_fabric_attr:\n",
                "\n        api_version: ",
            ] {
                assert!(b.contains(needed), "missing {needed:?} in\n{b}");
            }
            assert!(b.contains("\n    nic:"), "{b}");
            b.to_string()
        })
        .collect()
}

fn field<'a>(block: &'a str, prefix: &str) -> Vec<&'a str> {
    block
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect()
}

#[test]
fn default_listing_has_six_line_blocks() {
    let r = fi_info(&[]);
    let bs = listing(&r);
    let ours: Vec<_> = bs
        .iter()
        .filter(|b| b[0] == "provider: unixdgram")
        .collect();
    assert_eq!(
        ours.len(),
        2,
        "one entry per template (FI_AV_MAP, FI_AV_TABLE): {}",
        r.out
    );
    assert_eq!(ours[0][3], "    version: 1.0");
    assert_eq!(ours[0][4], "    type: FI_EP_DGRAM");
}

#[test]
fn ep_type_filter_really_filters() {
    // The example provider is DGRAM only: the DGRAM listing holds it, MSG and RDM don't.
    let dgram = listing(&fi_info(&["-t", "FI_EP_DGRAM"]));
    assert!(dgram.iter().any(|b| b[0] == "provider: unixdgram"));
    for t in ["FI_EP_MSG", "FI_EP_RDM"] {
        let r = fi_info(&["-t", t]);
        // Exactly the plugin; stacks over it (`unixdgram;ofi_rxd`, RDM) are other results.
        assert!(
            !r.out.lines().any(|l| l == "provider: unixdgram"),
            "{}",
            r.out
        );
    }
    for t in ["FI_EP_DGRAM", "FI_EP_MSG", "FI_EP_RDM"] {
        let r = fi_info(&["-t", t]);
        for b in listing_or_nodata(&r) {
            assert_eq!(b[4], format!("    type: {t}"));
        }
        // Case-insensitive name.
        let lower = fi_info(&["--ep_type", &t.to_lowercase()]);
        assert_eq!(lower.out, r.out);
        assert_eq!(lower.status, r.status);
    }
}

#[test]
fn provider_filter() {
    assert_nodata(&fi_info(&["-p", "nosuchprov"]));
    // Every provider listed alone lists only its own entries.
    let all = fi_info(&[]);
    let names: std::collections::BTreeSet<String> = listing_or_nodata(&all)
        .into_iter()
        .map(|b| b[0]["provider: ".len()..].to_string())
        .collect();
    for n in names {
        let r = fi_info(&["--provider", &n]);
        let bs = listing_or_nodata(&r);
        assert!(!bs.is_empty(), "{n}");
        for b in bs {
            assert!(
                b[0].to_ascii_lowercase().contains(&n.to_ascii_lowercase()),
                "{n}: {}",
                b[0]
            );
        }
    }
}

#[test]
fn domain_and_fabric_filters() {
    assert_nodata(&fi_info(&["-d", "no-such-domain-xyz"]));
    assert_nodata(&fi_info(&["--fabric", "no-such-fabric-xyz"]));
    let all = fi_info(&[]);
    if let Some(b) = listing_or_nodata(&all).first() {
        let dom = &b[2]["    domain: ".len()..];
        for blk in listing_or_nodata(&fi_info(&["-d", dom])) {
            assert_eq!(blk[2], b[2]);
        }
        let fab = &b[1]["    fabric: ".len()..];
        for blk in listing_or_nodata(&fi_info(&["-f", fab])) {
            assert_eq!(blk[1], b[1]);
        }
    }
}

#[test]
fn caps_filter() {
    // The example provider offers FI_MSG, not FI_RMA.
    assert!(listing(&fi_info(&["-c", "FI_MSG|FI_SEND"]))
        .iter()
        .any(|b| b[0] == "provider: unixdgram"));
    assert!(!fi_info(&["-c", "FI_RMA"])
        .out
        .lines()
        .any(|l| l == "provider: unixdgram"));
    for b in verbose_blocks_or_nodata(&fi_info(&["-v", "-c", "FI_MSG"])) {
        let caps = field(&b, "    caps: ");
        assert_eq!(caps.len(), 1, "{b}");
        assert!(caps[0].contains("FI_MSG"), "{b}");
    }
}

#[test]
fn addr_format_filter() {
    // The example provider's addresses are FI_ADDR_STR.
    let r = fi_info(&["-v", "-a", "FI_ADDR_STR"]);
    let bs = verbose_blocks(&r.out);
    assert!(
        bs.iter().any(|b| b.contains("prov_name: unixdgram")),
        "{}",
        r.out
    );
    for b in bs {
        assert_eq!(field(&b, "    addr_format: "), ["FI_ADDR_STR"], "{b}");
    }
    assert!(!fi_info(&["-a", "fi_sockaddr_in6"])
        .out
        .contains("provider: unixdgram"));
    for b in verbose_blocks_or_nodata(&fi_info(&["-v", "-a", "fi_sockaddr_in6"])) {
        assert_eq!(field(&b, "    addr_format: "), ["FI_SOCKADDR_IN6"], "{b}");
    }
}

#[test]
fn mode_option() {
    // Supporting no mode at all only keeps entries that require none.
    for b in verbose_blocks_or_nodata(&fi_info(&["-v", "-m", ""])) {
        assert_eq!(field(&b, "    mode: "), ["[  ]"], "{b}");
    }
    let r = fi_info(&["-m", "FI_CONTEXT|fi_context2"]);
    listing_or_nodata(&r);
}

#[test]
fn bad_names_fail_like_the_c_tool() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["-c", "FI_BOGUS"],
            "error: Unrecognized capability: FI_BOGUS\n",
        ),
        (
            &["-c", "FI_MSG|nope"],
            "error: Unrecognized capability: nope\n",
        ),
        (&["-m", "FI_BOGUS"], "error: Unrecognized mode: FI_BOGUS\n"),
        (
            &["-t", "FI_EP_BOGUS"],
            "error: Unrecognized endpoint type: FI_EP_BOGUS\n",
        ),
        (
            &["-a", "BOGUS"],
            "error: Unrecognized address format: BOGUS\n",
        ),
        (
            &["--caps=FI_BOGUS"],
            "error: Unrecognized capability: FI_BOGUS\n",
        ),
    ];
    for (args, msg) in cases {
        assert_eq!(refused(args, 22), msg, "{args:?}");
    }
}

#[test]
fn getopt_errors() {
    let cases: [(&[&str], &str); 5] = [
        (&["-x"], "fi_info: invalid option -- 'x'"),
        (&["-c"], "fi_info: option requires an argument -- 'c'"),
        (&["--bogus"], "fi_info: unrecognized option '--bogus'"),
        (
            &["--list=x"],
            "fi_info: option '--list' doesn't allow an argument",
        ),
        (
            &["--ver"],
            "fi_info: option '--ver' is ambiguous; possibilities: '--verbose' '--version'",
        ),
    ];
    for (args, msg) in cases {
        let err = refused(args, 1);
        assert_eq!(err.lines().next(), Some(msg), "{args:?}");
        assert!(err.contains("Usage: fi_info"), "{args:?}");
    }
}

#[test]
fn help() {
    let r = fi_info(&["-h"]);
    assert_eq!(r.status, 0);
    assert!(r.out.starts_with("Usage: fi_info"), "{}", r.out);
    for opt in [
        "--src_addr",
        "--node",
        "--port",
        "--caps",
        "--mode",
        "--ep_type",
        "--addr_format",
        "--provider",
        "--domain",
        "--fabric",
        "--env",
        "--getenv",
        "--info",
        "--list",
        "--verbose",
        "--json",
        "--explain",
        "--version",
        "--help",
    ] {
        assert!(r.out.contains(opt), "{opt}");
    }
    assert_eq!(fi_info(&["--help"]).out, r.out);
}

#[test]
fn version() {
    let r = fi_info(&["--version"]);
    assert_eq!(r.status, 0);
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.out);
    assert_eq!(lines[0], format!("fi_info: {}", env!("CARGO_PKG_VERSION")));
    assert!(
        lines[1].starts_with("libfabric: ") && lines[1].ends_with(" (ofi-rs)"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[2], "libfabric api: 1.17");
    let j: serde_json::Value =
        serde_json::from_str(&fi_info(&["--json", "--version"]).out).unwrap();
    assert_eq!(j["api_version"], "1.17");
}

#[test]
fn verbose_blocks_match_the_listing() {
    let plain = fi_info(&[]);
    let verbose = fi_info(&["-v"]);
    assert_eq!(plain.status, verbose.status);
    if plain.status != 0 {
        assert_nodata(&verbose);
        return;
    }
    let bs = blocks(&plain.out);
    let vs = verbose_blocks(&verbose.out);
    assert_eq!(bs.len(), vs.len());
    for (b, v) in bs.iter().zip(&vs) {
        let prov = &b[0]["provider: ".len()..];
        assert_eq!(field(v, "        prov_name: "), [prov]);
        assert_eq!(field(v, "        type: "), [&b[4]["    type: ".len()..]]);
    }
}

#[test]
fn info_substring_filter() {
    let r = fi_info(&["-i", "no-such-text-in-any-block-xyz"]);
    if r.status == 0 {
        assert_eq!(r.out, "");
    } else {
        assert_nodata(&r);
    }
    let r = fi_info(&["-i", "FI_EP_"]);
    if r.status == 0 {
        let vs = verbose_blocks(&r.out);
        assert_eq!(vs.len(), blocks(&fi_info(&[]).out).len());
    }
}

#[test]
fn node_port_and_source() {
    for args in [
        &["-n", "127.0.0.1", "-P", "4321"][..],
        &["-s", "127.0.0.1", "-P", "4321"][..],
        &["--node=127.0.0.1"][..],
        &["--port", "4321"][..],
    ] {
        let r = fi_info(args);
        assert!(r.status == 0 || r.status == 61, "{args:?}: {}", r.err);
        listing_or_nodata(&r);
    }
    let r = fi_info(&[
        "-v",
        "-s",
        "127.0.0.1",
        "-P",
        "4321",
        "-a",
        "FI_SOCKADDR_IN",
    ]);
    if r.status == 0 {
        for b in verbose_blocks(&r.out) {
            assert_eq!(
                field(&b, "    src_addr: "),
                ["fi_sockaddr_in://127.0.0.1:4321"],
                "{b}"
            );
        }
    }
}

#[test]
fn json_listing() {
    let r = fi_info(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("valid JSON");
    if r.status == 0 {
        let items = v.as_array().expect("array");
        assert_eq!(items.len(), blocks(&fi_info(&[]).out).len());
        for i in items {
            for k in [
                "provider", "fabric", "domain", "version", "type", "protocol",
            ] {
                assert!(i.get(k).is_some(), "{k} in {i}");
            }
        }
        let vv: serde_json::Value = serde_json::from_str(&fi_info(&["--json", "-v"]).out).unwrap();
        for i in vv.as_array().unwrap() {
            for k in ofi_tools::json::INFO_KEYS {
                assert!(i.get(k).is_some(), "{k} in {i}");
            }
        }
    } else {
        assert_nodata(&r);
        assert_eq!(v["error"]["code"], 61);
        assert_eq!(v["error"]["name"], "FI_ENODATA");
    }
    let r = fi_info(&["--json", "-p", "nosuchprov"]);
    assert_nodata(&r);
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("valid JSON");
    assert_eq!(v["error"]["code"], 61);
    assert!(
        v["error"]["reason"].as_str().is_some_and(|s| !s.is_empty()),
        "{v}"
    );
}

#[test]
fn explain() {
    let r = fi_info(&["--explain", "-p", "nosuchprov"]);
    assert_nodata(&r);
    let all = fi_info(&["-l"]);
    let nprov = all
        .out
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('#'))
        .count();
    if nprov > 0 {
        assert!(!r.out.is_empty(), "one line per verdict expected");
    }
    for l in r.out.lines() {
        assert!(!l.trim().is_empty());
    }
    let j = fi_info(&["--explain", "--json", "-t", "FI_EP_RDM"]);
    let v: serde_json::Value = serde_json::from_str(&j.out).expect("valid JSON");
    assert!(v["verdicts"].is_array(), "{v}");
    assert!(v["status"].is_i64(), "{v}");
    for verdict in v["verdicts"].as_array().unwrap() {
        for k in ["provider", "kind", "field", "asked", "offered", "text"] {
            assert!(verdict.get(k).is_some(), "{k} in {verdict}");
        }
    }
}

/// Makes a plugin directory holding a file that looks like a plugin by its name but
/// is not a shared object.
fn broken_plugin_dir(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("libbroken-fi.so");
    std::fs::write(&path, b"this is not an ELF file\n").unwrap();
    path
}

#[test]
fn list_shows_providers_and_broken_plugins() {
    let tmp = tempfile::tempdir().unwrap();
    let broken = broken_plugin_dir(tmp.path());
    let mut c = command();
    c.arg("-l").env("FI_PROVIDER_PATH", tmp.path());
    let r = run_cmd(c);
    assert_eq!(r.status, 0, "{}", r.err);
    // Provider blocks: "<name>:" then indented lines, the first being the version.
    let lines: Vec<&str> = r.out.lines().collect();
    for (n, l) in lines.iter().enumerate() {
        if !l.starts_with(' ') && !l.starts_with('#') {
            assert!(l.ends_with(':'), "{l}");
            assert!(lines[n + 1].starts_with("    version: "), "{}", r.out);
            let block: Vec<&&str> = lines[n + 1..]
                .iter()
                .take_while(|x| x.starts_with(' '))
                .collect();
            assert!(
                block.iter().any(|x| x.starts_with("    path: ")),
                "{}",
                r.out
            );
            assert!(
                block.iter().any(|x| x.starts_with("    status: ")),
                "{}",
                r.out
            );
        }
    }
    let line = lines
        .iter()
        .find(|l| l.contains("libbroken-fi.so"))
        .unwrap_or_else(|| panic!("broken plugin not listed:\n{}", r.out));
    assert!(
        line.starts_with(&format!("# not loaded: {}: ", broken.display())),
        "{line}"
    );
    assert!(line.contains("not a plugin"), "{line}");

    // The same as JSON.
    let mut c = command();
    c.args(["-l", "--json"]).env("FI_PROVIDER_PATH", tmp.path());
    let r = run_cmd(c);
    let v: serde_json::Value = serde_json::from_str(&r.out).expect("valid JSON");
    assert!(v["providers"].is_array());
    for p in v["providers"].as_array().unwrap() {
        for k in ["name", "version", "kind", "path", "superseded_by"] {
            assert!(p.get(k).is_some(), "{k} in {p}");
        }
    }
    let rec = v["load_report"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("libbroken-fi.so"))
        })
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(rec["outcome"], "not_a_plugin");
    assert!(rec["detail"].as_str().unwrap().starts_with("not a plugin"));
}

#[test]
fn env_lists_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let spaced = tmp.path().join("dir with space");
    std::fs::create_dir(&spaced).unwrap();
    let mut c = command();
    c.arg("-e").env("FI_PROVIDER_PATH", &spaced);
    let r = run_cmd(c);
    assert_eq!(r.status, 0, "{}", r.err);
    assert!(!r.out.contains('\0'));
    // Blocks: "# ENV: type", "# help", optional "# default: ...", optional
    // "ENV=value" + "# source: ...", blank.
    let blocks: Vec<&str> = r.out.split("\n\n").filter(|b| !b.is_empty()).collect();
    assert!(!blocks.is_empty());
    let mut saw_path = false;
    let mut saw_default = false;
    for b in &blocks {
        let mut ls: Vec<&str> = b.lines().collect();
        if ls.get(2).is_some_and(|l| l.starts_with("# default: ")) {
            saw_default = true;
            ls.remove(2);
        }
        assert!(ls.len() == 2 || ls.len() == 4, "{b}");
        let (env, ty) = ls[0].strip_prefix("# ").unwrap().split_once(": ").unwrap();
        assert!(
            env.starts_with("FI_")
                && env
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{env}"
        );
        assert!(
            ["String", "Integer", "size_t"].contains(&ty) || ty.starts_with("Boolean"),
            "{ty}"
        );
        assert!(ls[1].starts_with("# "), "{b}");
        if ls.len() == 4 {
            assert!(ls[2].starts_with(&format!("{env}=")), "{b}");
            assert!(ls[3].starts_with("# source: "), "{b}");
        }
        if env == "FI_PROVIDER_PATH" {
            saw_path = true;
            assert_eq!(ls.len(), 4, "{b}");
            assert_eq!(ls[2], format!("FI_PROVIDER_PATH=\"{}\"", spaced.display()));
            assert_eq!(ls[3], "# source: environment");
        }
    }
    assert!(saw_path, "{}", r.out);
    // FI_UNIVERSE_SIZE has a default (1024) and shows it.
    assert!(saw_default, "{}", r.out);
    assert!(r.out.contains("# FI_UNIVERSE_SIZE: size_t\n"), "{}", r.out);
    assert!(r.out.contains("# default: 1024\n"), "{}", r.out);
    assert!(r.out.ends_with("\n\n"));

    let j = {
        let mut c = command();
        c.args(["-e", "--json"]).env("FI_PROVIDER_PATH", &spaced);
        run_cmd(c)
    };
    let v: serde_json::Value = serde_json::from_str(&j.out).expect("valid JSON");
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), blocks.len());
    for p in arr {
        for k in [
            "env", "provider", "name", "type", "help", "default", "value", "source",
        ] {
            assert!(p.get(k).is_some(), "{k} in {p}");
        }
    }
}

#[test]
fn getenv_filters_by_name() {
    let r = fi_info(&["-g", "log"]);
    assert_eq!(r.status, 0);
    let names: Vec<&str> = r
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("# FI_"))
        .filter_map(|l| l.split_once(": ").map(|(n, _)| n))
        .collect();
    assert!(!names.is_empty(), "{}", r.out);
    for n in names {
        assert!(n.contains("LOG"), "{n}");
    }
    let r = fi_info(&["--getenv", "no_such_param_xyz"]);
    assert_eq!((r.status, r.out.as_str()), (0, ""));
}

#[test]
fn plugin_parameters_are_listed_with_default_value_and_source() {
    let r = fi_info(&["-g", "UNIXDGRAM"]);
    assert_eq!(r.status, 0, "{}", r.err);
    assert!(
        r.out
            .starts_with("# FI_UNIXDGRAM_MAX_MSG_SIZE: size_t\n# unixdgram: Largest message"),
        "{}",
        r.out
    );
    assert!(r.out.contains("# default: 65536\n"), "{}", r.out);
    let mut c = command();
    c.args(["-g", "UNIXDGRAM_RX"])
        .env("FI_UNIXDGRAM_RX_SIZE", "64");
    let r = run_cmd(c);
    assert!(
        r.out
            .contains("FI_UNIXDGRAM_RX_SIZE=64\n# source: environment\n"),
        "{}",
        r.out
    );
    assert!(
        !r.out.contains("MAX_MSG_SIZE"),
        "-g filters by name: {}",
        r.out
    );
}

/// A 100 KB `FI_PROVIDER` was echoed whole in the warning and in every provider's
/// "filtered by" reason (600 KB of output); now each shows its first characters and
/// its length.
#[test]
fn a_long_fi_provider_is_shortened_in_messages() {
    let long = "x".repeat(100_000);
    let mut c = command();
    c.env("FI_PROVIDER", &long);
    let r = run_cmd(c);
    assert_eq!(r.status, 61, "{}", r.err);
    let total = r.out.len() + r.err.len();
    assert!(total < 16 * 1024, "{total} bytes of output");
    assert!(r.err.contains("(100000 bytes)"), "{}", r.err);
}
