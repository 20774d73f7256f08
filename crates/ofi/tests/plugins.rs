//! Plugin loading, end to end, with a real provider built out of tree: the example
//! vendor provider `unixdgram` (examples/vendor-provider), compiled by these tests with
//! `cargo build --manifest-path …` into `target/vendor-plugin`, in five variants (the
//! real one and four broken ones; see `vendor/mod.rs`).
//!
//! What is shown:
//! - the plugin loads from a plugin directory (as `FI_PROVIDER_PATH` names them) and
//!   moves data; also through the real `FI_PROVIDER_PATH`, in a child process;
//! - a copy built for another interface major, and one with a changed table layout, are
//!   each refused with one line naming the file, what was wanted and what was found,
//!   while the good copy in the same directory loads;
//! - a text file, a truncated library and a plugin whose init fails are reported and
//!   skipped;
//! - a panic inside `send` comes back as `FI_EOTHER`, the process lives and the
//!   provider keeps working;
//! - the provider linked in and loaded as a plugin answer getinfo, and explain a
//!   rejection, identically;
//! - with the same name and version twice, the plugin wins and the built-in is listed
//!   as superseded.
//!
//! The first test to need a variant builds it (about 40 s for the first, a few seconds
//! for each other, on two cores); the build time is printed to stderr.

mod vendor;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ofi::abi::raw::{CqErrEntry, CqMsgEntry};
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::loader::{LoadOutcome, LoadRecord};
use ofi::registry::{Registry, RegistryConfig};
use ofi::{
    AddrFormat, Address, CqFormat, EpType, Errno, GetinfoFlags, Info, VerdictKind, Version,
    ADDR_NOTAVAIL, API_VERSION,
};
use ofi_prov_unixdgram::UnixDgram;
use vendor::{plugin_dir, with_bytes, Variant};

/// A registry of the plugins in `dir` only (no built-ins, no environment).
fn registry_of(dir: &Path) -> Registry {
    Registry::build(RegistryConfig {
        plugin_dirs: vec![dir.to_path_buf()],
        ..RegistryConfig::default()
    })
}

/// A registry with the provider linked in (the rlib of the same crate).
fn registry_linked_in() -> Registry {
    Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UnixDgram>()],
        ..RegistryConfig::default()
    })
}

/// The load record of file `name`.
fn record<'a>(report: &'a [LoadRecord], name: &str) -> &'a LoadRecord {
    report
        .iter()
        .find(|r| r.path.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no load record for {name}: {report:#?}"))
}

/// The detail of `name`'s `AbiMismatch` record, after checking that the record reads
/// as one line naming the file.
fn abi_mismatch<'a>(report: &'a [LoadRecord], name: &str) -> &'a str {
    let rec = record(report, name);
    let LoadOutcome::AbiMismatch { detail } = &rec.outcome else {
        panic!("{name}: not an ABI mismatch: {rec}");
    };
    let line = rec.to_string();
    assert!(!line.contains('\n') && line.contains(name), "{line}");
    detail
}

fn request(hints: Option<Info>) -> GetinfoRequest {
    GetinfoRequest {
        hints,
        ..GetinfoRequest::new(API_VERSION)
    }
}

fn unixdgram_hints() -> Info {
    Info::hints().with_provider("unixdgram")
}

/// Two enabled endpoints of one provider, each with a CQ and an AV holding both.
struct Pair {
    eps: Vec<(Endpoint, CompletionQueue, AddressVector)>,
    _domain: Domain,
    _fabric: Fabric,
}

fn pair(reg: &Registry) -> Pair {
    let info = reg
        .getinfo(&request(Some(unixdgram_hints())))
        .expect("getinfo")[0]
        .clone();
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let mut eps = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..2 {
        let cq = domain
            .cq_open(&CqAttr::with_format(CqFormat::Msg))
            .expect("cq");
        let av = domain.av_open(&AvAttr::default()).expect("av");
        let ep = domain.endpoint(&info).expect("endpoint");
        ep.bind(&cq, ofi::OpFlags::TRANSMIT | ofi::OpFlags::RECV)
            .expect("bind cq");
        ep.bind_av(&av).expect("bind av");
        ep.enable().expect("enable");
        addrs.push(Address::from_bytes(AddrFormat::STR, &ep.getname().unwrap()).unwrap());
        eps.push((ep, cq, av));
    }
    for (_, _, av) in &eps {
        assert_eq!(av.insert(&addrs).unwrap(), vec![0, 1]);
    }
    Pair {
        eps,
        _domain: domain,
        _fabric: fabric,
    }
}

/// The next successful completion of `cq` (panics on an error entry or after 5 s).
fn next(cq: &CompletionQueue) -> CqMsgEntry {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut e = [CqMsgEntry::default()];
        match cq.read(&mut e) {
            Ok(_) => return e[0],
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut ee = CqErrEntry::default();
                cq.readerr(&mut ee, 0).unwrap();
                panic!("error completion: {ee:?}");
            }
            Err(err) => panic!("cq read: {err}"),
        }
        assert!(Instant::now() < deadline, "no completion within 5 s");
        std::thread::yield_now();
    }
}

/// How [`send_across`] sends.
enum SendBy {
    /// `fi_inject`: no completion on the sender's CQ.
    Inject,
    /// `fi_send`: its completion on the sender's CQ is checked.
    Send,
}

/// Endpoint 0 sends `payload` to endpoint 1 `by` inject or send; returns what 1
/// received.
fn send_across(p: &Pair, payload: &[u8], by: SendBy) -> Vec<u8> {
    let (a, b) = (&p.eps[0], &p.eps[1]);
    let mut buf = vec![0u8; 256];
    // SAFETY: `buf` outlives the receive, whose completion is read below.
    unsafe {
        b.0.recv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            ADDR_NOTAVAIL,
            1,
        )
    }
    .expect("recv");
    match by {
        SendBy::Inject => a.0.inject(payload, 1).expect("inject"),
        SendBy::Send => {
            // SAFETY: `payload` outlives the send, whose completion is read here.
            unsafe {
                a.0.send(payload.as_ptr(), payload.len(), std::ptr::null_mut(), 1, 3)
            }
            .expect("send");
            assert_eq!(next(&a.1).op_context, 3, "the send's completion");
        }
    }
    let c = next(&b.1);
    buf.truncate(c.len);
    buf
}

#[test]
fn the_vendor_plugin_builds_out_of_tree_and_loads_from_a_plugin_directory() {
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let reg = registry_of(dir.path());
    let report = reg.load_report();
    assert_eq!(report.len(), 1, "{report:#?}");
    assert_eq!(
        record(&report, vendor::LIB_NAME).outcome,
        LoadOutcome::Loaded {
            name: "unixdgram".into(),
            version: Version::new(1, 0)
        }
    );
    let provs = reg.providers();
    assert_eq!(provs.len(), 1);
    assert_eq!(provs[0].name, "unixdgram");
    assert_eq!(
        provs[0].path.as_deref(),
        Some(dir.path().join(vendor::LIB_NAME).as_path())
    );

    // It is a working provider: a message goes from one endpoint to the other, and a
    // regular send completes on the sender's CQ.
    let p = pair(&reg);
    assert_eq!(
        send_across(&p, b"through the plugin", SendBy::Inject),
        b"through the plugin"
    );
    assert_eq!(send_across(&p, b"sent", SendBy::Send), b"sent");
}

/// The environment variable that puts this test binary in child mode (its value names
/// the child's job; see [`run_child`]).
const CHILD_ENV: &str = "OFI_PLUGIN_TEST_CHILD";

/// Run test `name` of this binary again in a child process with `envs` (and child mode
/// on), where it plays its child side ([`child_job`]).
fn run_child(
    name: &str,
    job: &str,
    envs: &[(&str, &std::ffi::OsStr)],
) -> (std::process::ExitStatus, String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, job)
        .env("OFI_PLUGINS_CONFIG", "/dev/null")
        .env_remove("FI_PROVIDER")
        .env_remove("FI_PROVIDER_PATH")
        .env_remove("FI_LOG_LEVEL");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the test binary as a child");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`run_child`], asserting that the child succeeded: its stdout and stderr.
fn run_child_ok(name: &str, job: &str, envs: &[(&str, &std::ffi::OsStr)]) -> (String, String) {
    let (status, stdout, stderr) = run_child(name, job, envs);
    assert!(
        status.success(),
        "child failed ({status}):\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The first line the child printed with `CHILD ` (from there on: the test harness
/// may have printed the test's name in front of it).
fn child_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|l| l.find("CHILD ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no CHILD line in:\n{stdout}"))
}

/// In the child process of a test, runs its [`child_job`] and returns true (the test
/// then returns); false in the test's own process.
fn ran_as_child() -> bool {
    if std::env::var_os(CHILD_ENV).is_some() {
        child_job();
        return true;
    }
    false
}

/// The child side of the tests below: each runs itself again in a child process (see
/// [`run_child`]) and, there, calls this first; `OFI_PLUGIN_TEST_CHILD` names the job.
fn child_job() {
    match std::env::var(CHILD_ENV).as_deref() {
        // The process-wide registry, built from FI_PROVIDER_PATH like any application's.
        Ok("fi_provider_path") => {
            let hints = unixdgram_hints();
            let infos = ofi::getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&hints))
                .expect("getinfo through FI_PROVIDER_PATH");
            let report = ofi::registry().load_report();
            // The plugin's own results; utility providers built in (rxd) may add stacks
            // over it (`unixdgram;ofi_rxd`), listed apart.
            let (own, stacked): (Vec<&Info>, Vec<&Info>) =
                infos.iter().partition(|i| i.prov_name() == "unixdgram");
            let stacks: Vec<&str> = stacked.iter().map(|i| i.prov_name()).collect();
            println!(
                "CHILD infos={} prov={} stacked=[{}] report={}",
                own.len(),
                own.first().map_or("none", |i| i.prov_name()),
                stacks.join(","),
                report[0]
            );
        }
        // Load one directory and print every record.
        Ok("load_dir") => {
            let dir = std::env::var_os("OFI_PLUGIN_TEST_DIR").expect("OFI_PLUGIN_TEST_DIR");
            for r in registry_of(Path::new(&dir)).load_report() {
                println!("CHILD {r}");
            }
        }
        // The process-wide registry as configured by the environment and plugins.toml.
        Ok("global_report") => {
            let reg = ofi::registry();
            let names: Vec<String> = reg.providers().into_iter().map(|p| p.name).collect();
            println!("CHILD providers=[{}]", names.join(","));
            for r in reg.load_report() {
                println!("CHILD {r}");
            }
        }
        _ => {}
    }
}

#[test]
fn fi_provider_path_loads_the_plugin_in_a_fresh_process() {
    if ran_as_child() {
        return;
    }
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let (stdout, _) = run_child_ok(
        "fi_provider_path_loads_the_plugin_in_a_fresh_process",
        "fi_provider_path",
        &[("FI_PROVIDER_PATH", dir.path().as_os_str())],
    );
    let line = child_line(&stdout);
    assert!(
        line.starts_with("CHILD infos=2 prov=unixdgram stacked=["),
        "{line}"
    );
    // rxd (built in by default) layers over DGRAM providers, plugins included, that
    // report every datagram's source (FI_SOURCE and FI_SOURCE_ERR: rxd knows a peer
    // by it); the example plugin has no FI_SOURCE_ERR, so no stack over it.
    #[cfg(feature = "rxd")]
    assert!(!line.contains("unixdgram;ofi_rxd"), "{line}");
    assert!(
        line.ends_with(&format!("{}: loaded unixdgram 1.0", vendor::LIB_NAME)),
        "{line}"
    );
}

/// In a child process: if loading crashes the process, only the child dies and the
/// failure says so.
#[test]
fn a_truncated_library_is_reported_as_not_a_plugin() {
    if ran_as_child() {
        return;
    }
    let dir = plugin_dir(&[]);
    let real = std::fs::read(vendor::built(Variant::Good)).unwrap();
    assert!(real.len() > 4096);
    with_bytes(&dir, "libofi_prov_truncated.so", &real[..4096]);
    let (status, stdout, stderr) = run_child(
        "a_truncated_library_is_reported_as_not_a_plugin",
        "load_dir",
        &[("OFI_PLUGIN_TEST_DIR", dir.path().as_os_str())],
    );
    assert!(
        status.success(),
        "loading a truncated library killed the process ({status}); the loader must check \
         the ELF program headers against the file size before dlopen:\n{stdout}\n{stderr}"
    );
    let line = child_line(&stdout);
    assert!(
        line.contains("libofi_prov_truncated.so: not a plugin: "),
        "{line}"
    );
}

#[test]
fn another_major_and_a_changed_layout_are_refused_with_one_line_each() {
    let dir = plugin_dir(&[
        (Variant::AbiNextMajor, "libofi_prov_nextmajor.so"),
        (Variant::LayoutDrift, "libofi_prov_drift.so"),
        (Variant::Good, vendor::LIB_NAME),
    ]);
    let reg = registry_of(dir.path());
    let report = reg.load_report();
    assert_eq!(report.len(), 3, "{report:#?}");

    let wanted = ofi::abi::ABI_MAJOR;
    assert_eq!(
        abi_mismatch(&report, "libofi_prov_nextmajor.so"),
        format!(
            "ABI {}.{} found, {wanted}.x wanted",
            wanted + 1,
            ofi::abi::ABI_MINOR
        )
    );
    let fp = ofi::abi::FINGERPRINT;
    assert_eq!(
        abi_mismatch(&report, "libofi_prov_drift.so"),
        format!(
            "table layout fingerprint {:#018x} found, {fp:#018x} wanted",
            !fp
        )
    );

    // The good copy in the same directory still loads and is the only provider.
    assert!(matches!(
        record(&report, vendor::LIB_NAME).outcome,
        LoadOutcome::Loaded { .. }
    ));
    let provs = reg.providers();
    assert_eq!(provs.len(), 1);
    assert!(reg.getinfo(&request(Some(unixdgram_hints()))).is_ok());
}

#[test]
fn junk_and_a_failing_init_are_reported_and_skipped() {
    let dir = plugin_dir(&[
        (Variant::InitFails, "libofi_prov_initfails.so"),
        (Variant::Good, vendor::LIB_NAME),
    ]);
    with_bytes(
        &dir,
        "libjunk-fi.so",
        b"this is a text file, not a shared object\n",
    );
    // Not a candidate at all: only `.so` files are.
    with_bytes(&dir, "README.txt", b"not a candidate");

    let reg = registry_of(dir.path());
    let report = reg.load_report();
    assert_eq!(report.len(), 3, "{report:#?}");
    let r = record(&report, "libjunk-fi.so");
    let LoadOutcome::NotAPlugin { reason } = &r.outcome else {
        panic!("{r}")
    };
    assert!(!reason.is_empty() && !r.to_string().contains('\n'), "{r}");
    let r = record(&report, "libofi_prov_initfails.so");
    let LoadOutcome::InitFailed { error } = &r.outcome else {
        panic!("{r}")
    };
    assert!(error.contains("init-fails"), "{error}");
    assert!(matches!(
        record(&report, vendor::LIB_NAME).outcome,
        LoadOutcome::Loaded { .. }
    ));
    let provs = reg.providers();
    assert_eq!(provs.len(), 1, "{provs:#?}");
    assert_eq!(
        provs[0].path.as_deref(),
        Some(dir.path().join(vendor::LIB_NAME).as_path())
    );
}

#[test]
fn a_negated_fi_provider_skips_the_file_without_opening_it() {
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    with_bytes(
        &dir,
        "libunixdgram-fi.so",
        b"never opened, so never found to be junk",
    );
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir.path().to_path_buf()],
        filter: Some("^unixdgram".into()),
        ..RegistryConfig::default()
    });
    let report = reg.load_report();
    assert_eq!(report.len(), 2);
    for r in &report {
        assert!(
            matches!(&r.outcome, LoadOutcome::Filtered { rule } if rule == "FI_PROVIDER=^unixdgram"),
            "{r}"
        );
    }
    assert!(reg.providers().is_empty());
}

#[test]
fn a_panic_in_send_is_fi_eother_and_the_provider_keeps_working() {
    let dir = plugin_dir(&[(Variant::PanicInSend, vendor::LIB_NAME)]);
    let reg = registry_of(dir.path());
    let p = pair(&reg);
    let (a, b) = (&p.eps[0], &p.eps[1]);
    let msg = *b"boom";
    for _ in 0..2 {
        // SAFETY: the call panics before touching the buffer.
        let e = unsafe {
            a.0.send(msg.as_ptr(), msg.len(), std::ptr::null_mut(), 1, 9)
        }
        .unwrap_err();
        assert_eq!(e.code(), Errno::EOTHER);
    }
    // No completion was generated by the failed sends, and everything else still works.
    let mut e = [CqMsgEntry::default()];
    assert_eq!(a.1.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
    assert_eq!(
        send_across(&p, b"still alive", SendBy::Inject),
        b"still alive"
    );
    assert_eq!(b.1.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
}

#[test]
fn linked_in_and_plugin_answer_getinfo_identically() {
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let plugin = registry_of(dir.path());
    let linked = registry_linked_in();
    assert!(plugin.providers()[0].path.is_some());
    assert!(linked.providers()[0].path.is_none());

    let mut dgram = unixdgram_hints().with_ep_type(EpType::Dgram);
    dgram.domain_attr.av_type = ofi::AvType::Table;
    let with_node = GetinfoRequest {
        node: Some("fi_unixdgram://peer".into()),
        ..request(Some(unixdgram_hints()))
    };
    let with_source = GetinfoRequest {
        node: Some("fi_unixdgram://me".into()),
        flags: GetinfoFlags::SOURCE,
        ..request(None)
    };
    let attr_only = GetinfoRequest {
        flags: GetinfoFlags::PROV_ATTR_ONLY,
        ..request(None)
    };
    for req in [
        request(None),
        request(Some(dgram)),
        with_node,
        with_source,
        attr_only,
    ] {
        let a = linked
            .getinfo(&req)
            .unwrap_or_else(|e| panic!("linked in: {e} for {req:?}"));
        let b = plugin
            .getinfo(&req)
            .unwrap_or_else(|e| panic!("plugin: {e} for {req:?}"));
        assert!(!a.is_empty());
        assert_eq!(a, b, "request {req:?}");
    }
}

#[test]
fn linked_in_and_plugin_explain_a_rejection_identically() {
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let plugin = registry_of(dir.path());
    let linked = registry_linked_in();
    let mut hints = unixdgram_hints().with_ep_type(EpType::Msg);
    hints.domain_attr.threading = ofi::Threading::Safe;
    let req = request(Some(hints));
    let (ra, va) = linked.getinfo_explain(&req);
    let (rb, vb) = plugin.getinfo_explain(&req);
    let (ea, eb) = (ra.unwrap_err(), rb.unwrap_err());
    assert_eq!(ea.code(), Errno::ENODATA);
    assert_eq!((ea.code(), ea.to_string()), (eb.code(), eb.to_string()));
    assert_eq!(va, vb);
    assert_eq!(va.len(), 2, "one verdict per template: {va:#?}");
    for v in &va {
        assert_eq!(v.kind, VerdictKind::Rejected);
        assert_eq!(
            (v.field.as_str(), v.asked.as_str(), v.offered.as_str()),
            ("ep_attr.type", "FI_EP_MSG", "FI_EP_DGRAM")
        );
    }
}

#[test]
fn same_name_and_version_the_plugin_wins_and_the_builtin_is_superseded() {
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<UnixDgram>()],
        plugin_dirs: vec![dir.path().to_path_buf()],
        ..RegistryConfig::default()
    });
    let provs = reg.providers();
    assert_eq!(provs.len(), 2, "{provs:#?}");
    let winner = &provs[0];
    assert_eq!(
        (winner.name.as_str(), winner.superseded_by.as_deref()),
        ("unixdgram", None)
    );
    assert_eq!(
        winner.path.as_deref(),
        Some(dir.path().join(vendor::LIB_NAME).as_path())
    );
    let loser = &provs[1];
    assert!(loser.path.is_none(), "the built-in is the loser");
    let by = loser
        .superseded_by
        .as_deref()
        .expect("listed as superseded");
    assert!(
        by.starts_with("unixdgram 1.0 (") && by.contains(vendor::LIB_NAME),
        "{by}"
    );
    // The plugin's load record says it loaded (it won), and getinfo answers once.
    let report = reg.load_report();
    assert!(matches!(
        record(&report, vendor::LIB_NAME).outcome,
        LoadOutcome::Loaded { .. }
    ));
    assert_eq!(
        reg.getinfo(&request(None)).unwrap().len(),
        2,
        "one provider, two templates"
    );
    // Data moves through the winner.
    let p = pair(&reg);
    assert_eq!(send_across(&p, b"winner", SendBy::Inject), b"winner");
}

/// The example's own tests (`cargo test --manifest-path examples/vendor-provider/…`)
/// are not part of the workspace; run them here so the template cannot rot.
#[test]
fn the_vendor_crates_own_tests_pass() {
    let (ok, output) = vendor::run_own_tests();
    assert!(
        ok,
        "cargo test --manifest-path examples/vendor-provider/Cargo.toml failed:\n{output}"
    );
    assert!(output.contains("test result: ok"), "{output}");
}

/// A plugin never installs a logger of its own: its events go through the host table's
/// log sink into the host's subscriber, with the host's format and the host's
/// `FI_LOG_*` filters. The child runs with FI_LOG_LEVEL=debug; the plugin's init logs
/// "initialised" at debug level under its own provider name.
#[test]
fn plugin_log_events_reach_the_host_subscriber() {
    if ran_as_child() {
        return;
    }
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let debug = std::ffi::OsStr::new("debug");
    let (_, stderr) = run_child_ok(
        "plugin_log_events_reach_the_host_subscriber",
        "fi_provider_path",
        &[
            ("FI_PROVIDER_PATH", dir.path().as_os_str()),
            ("FI_LOG_LEVEL", debug),
        ],
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("initialised") && l.contains("prov=unixdgram"))
        .unwrap_or_else(|| panic!("the plugin's init message is missing:\n{stderr}"));
    assert!(line.contains("DEBUG"), "{line}");
    assert!(line.contains("prov=unixdgram"), "{line}");
    assert!(line.contains("subsys=core"), "{line}");

    // The host's FI_LOG_PROV filter applies to the plugin's events too.
    let (_, stderr) = run_child_ok(
        "plugin_log_events_reach_the_host_subscriber",
        "fi_provider_path",
        &[
            ("FI_PROVIDER_PATH", dir.path().as_os_str()),
            ("FI_LOG_LEVEL", debug),
            ("FI_LOG_PROV", std::ffi::OsStr::new("^unixdgram")),
        ],
    );
    assert!(
        !stderr.contains("prov=unixdgram"),
        "filtered out, yet:\n{stderr}"
    );
}

/// plugins.toml (named by OFI_PLUGINS_CONFIG) adds plugin directories after
/// FI_PROVIDER_PATH, relative to the file, and can switch a provider off by name.
#[test]
fn plugins_toml_search_paths_and_disable() {
    if ran_as_child() {
        return;
    }
    let dir = plugin_dir(&[(Variant::Good, vendor::LIB_NAME)]);
    let conf_dir = tempfile::tempdir().unwrap();
    let conf = conf_dir.path().join("plugins.toml");
    let rel = pathdiff(dir.path(), conf_dir.path());
    std::fs::write(&conf, format!("search_paths = [{rel:?}]\n")).unwrap();
    let run = || {
        run_child_ok(
            "plugins_toml_search_paths_and_disable",
            "global_report",
            &[("OFI_PLUGINS_CONFIG", conf.as_os_str())],
        )
    };
    let (stdout, _) = run();
    assert!(child_providers(&stdout).contains(&"unixdgram"), "{stdout}");
    assert!(stdout.contains(": loaded unixdgram 1.0"), "{stdout}");

    std::fs::write(
        &conf,
        format!("search_paths = [{rel:?}]\ndisable = [\"UnixDgram\"]\n"),
    )
    .unwrap();
    let (stdout, _) = run();
    assert!(!child_providers(&stdout).contains(&"unixdgram"), "{stdout}");
    assert!(
        stdout.contains(": filtered: disabled in plugins.toml"),
        "{stdout}"
    );

    // A malformed file is reported with its line, and the process still works.
    std::fs::write(&conf, "search_paths = 3\n").unwrap();
    let (stdout, stderr) = run();
    assert!(!child_providers(&stdout).contains(&"unixdgram"), "{stdout}");
    assert!(
        stderr.contains("plugins.toml"),
        "the warning names the file: {stderr}"
    );
}

/// `to` relative to `from` (both absolute): "../x/y" style, for a relative search path.
fn pathdiff(to: &Path, from: &Path) -> String {
    let to: Vec<_> = to.components().collect();
    let from: Vec<_> = from.components().collect();
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// The provider names a child printed on its `CHILD providers=[a,b]` line (built-ins
/// come first, so tests look for the plugin's name rather than the whole list).
fn child_providers(stdout: &str) -> Vec<&str> {
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD providers=[").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no providers line:\n{stdout}"));
    line.trim_end_matches(']')
        .split(',')
        .filter(|n| !n.is_empty())
        .collect()
}
