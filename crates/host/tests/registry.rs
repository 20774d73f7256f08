//! Registry and selection: FI_PROVIDER, hints prov_name, name clashes, priority order,
//! FI_PROV_ATTR_ONLY, and the framework-level getinfo errors — with mock providers
//! registered through the same C-ABI entry path a real provider takes.

use ofi_core::abi::{entry_for, ProviderKind};
use ofi_core::getinfo::{GetinfoRequest, VerdictKind};
use ofi_core::provider::{Host, Provider, Unsupported};
use ofi_core::version::API_VERSION;
use ofi_core::{
    AddrFormat, AvType, Caps, EpType, Errno, GetinfoFlags, Info, MrMode, Progress, Protocol,
    ResourceMgmt, Result, Threading, Version,
};
use ofi_host::loader::{LoadOutcome, LoadRecord};
use ofi_host::registry::{Registry, RegistryConfig};

/// A template with every domain field a real provider must fill.
fn template(ep: EpType, caps: Caps, proto: Protocol, fmt: AddrFormat) -> Info {
    let mut i = Info::new();
    i.caps = caps;
    i.addr_format = fmt;
    i.ep_attr.ep_type = ep;
    i.ep_attr.protocol = proto;
    i.ep_attr.max_msg_size = 1 << 20;
    i.tx_attr.caps = caps;
    i.tx_attr.size = 256;
    i.tx_attr.iov_limit = 4;
    i.tx_attr.inject_size = 64;
    i.rx_attr.caps = caps;
    i.rx_attr.size = 256;
    i.rx_attr.iov_limit = 4;
    i.domain_attr.threading = Threading::Safe;
    i.domain_attr.control_progress = Progress::Manual;
    i.domain_attr.data_progress = Progress::Manual;
    i.domain_attr.resource_mgmt = ResourceMgmt::Enabled;
    i.domain_attr.av_type = AvType::Unspec;
    i.domain_attr.mr_mode = MrMode::empty();
    i.domain_attr.name = Some("mock".into());
    i.fabric_attr.name = Some("mock".into());
    i
}

macro_rules! mock {
    ($ty:ident, $name:literal, $kind:expr, $prio:expr, $ver:expr, $templates:expr) => {
        struct $ty;
        impl Provider for $ty {
            const NAME: &'static str = $name;
            const VERSION: Version = $ver;
            const KIND: ProviderKind = $kind;
            const PRIORITY: i32 = $prio;
            type Fabric = Unsupported;
            fn init(_host: &Host) -> Result<Self> {
                Ok($ty)
            }
            fn info_templates(&self) -> Vec<Info> {
                $templates
            }
            fn fabric(&self, _info: &Info) -> Result<Unsupported> {
                Err(Errno::ENOSYS.into())
            }
        }
    };
}

const MSG: Caps = Caps::MSG.union(Caps::SEND).union(Caps::RECV);
const V1: Version = Version::new(1, 0);

mock!(
    Tcp,
    "tcp",
    ProviderKind::Core,
    0,
    V1,
    vec![template(
        EpType::Msg,
        MSG.union(Caps::RMA),
        Protocol::SOCK_TCP,
        AddrFormat::SOCKADDR_IN
    )]
);
mock!(
    Udp,
    "udp",
    ProviderKind::Core,
    0,
    V1,
    vec![template(
        EpType::Dgram,
        MSG,
        Protocol::UDP,
        AddrFormat::SOCKADDR_IN
    )]
);
mock!(
    Shm,
    "shm",
    ProviderKind::Core,
    10,
    V1,
    vec![template(
        EpType::Rdm,
        MSG.union(Caps::TAGGED),
        Protocol::SHM,
        AddrFormat::STR
    )]
);
// A utility: answers as if layered over tcp (its infos name the core beneath it).
mock!(Rxm, "ofi_rxm", ProviderKind::Utility, 5, V1, {
    let mut t = template(
        EpType::Rdm,
        MSG.union(Caps::TAGGED),
        Protocol::RXM,
        AddrFormat::SOCKADDR_IN,
    );
    t.fabric_attr.prov_name = Some("tcp".into());
    vec![t]
});
mock!(
    TcpV2,
    "tcp",
    ProviderKind::Core,
    0,
    Version::new(2, 0),
    vec![template(
        EpType::Msg,
        MSG,
        Protocol::SOCK_TCP,
        AddrFormat::SOCKADDR_IN
    )]
);
mock!(Hook, "ofi_hook_noop", ProviderKind::Hook, 0, V1, vec![]);

fn registry(filter: Option<&str>) -> Registry {
    Registry::build(RegistryConfig {
        builtins: vec![
            entry_for::<Tcp>(),
            entry_for::<Udp>(),
            entry_for::<Shm>(),
            entry_for::<Rxm>(),
            entry_for::<Hook>(),
        ],
        plugin_dirs: vec![],
        filter: filter.map(str::to_string),
        disabled: vec![],
    })
}

fn req(hints: Option<Info>) -> GetinfoRequest {
    GetinfoRequest {
        version: API_VERSION,
        node: None,
        service: None,
        flags: GetinfoFlags::empty(),
        hints,
    }
}

fn names(reg: &Registry, hints: Option<Info>) -> Vec<String> {
    match reg.getinfo(&req(hints)) {
        Ok(infos) => infos.iter().map(|i| i.prov_name().to_string()).collect(),
        Err(e) => {
            assert_eq!(e.code(), Errno::ENODATA, "{e}");
            Vec::new()
        }
    }
}

/// Runs `f` with a tracing subscriber that records every event: its result and the
/// events, as (level, message).
fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, Vec<(tracing::Level, String)>) {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<(tracing::Level, String)>>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
        fn on_event(&self, ev: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            struct V(String);
            impl tracing::field::Visit for V {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0 = format!("{v:?}");
                    }
                }
            }
            let mut v = V(String::new());
            ev.record(&mut v);
            self.0.lock().unwrap().push((*ev.metadata().level(), v.0));
        }
    }
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let r = tracing::subscriber::with_default(subscriber, f);
    let logs = std::mem::take(&mut *capture.0.lock().unwrap());
    (r, logs)
}

#[test]
fn order_is_priority_then_registration() {
    assert_eq!(
        names(&registry(None), None),
        ["shm", "tcp;ofi_rxm", "tcp", "udp"]
    );
}

#[test]
fn fi_provider_selection() {
    let cases: &[(&str, &[&str])] = &[
        ("tcp", &["tcp;ofi_rxm", "tcp"]),
        ("^tcp", &["shm", "udp"]),
        ("tcp;ofi_rxm", &["tcp;ofi_rxm"]),
        ("ofi_rxm", &["tcp;ofi_rxm"]),
        ("TCP", &["tcp;ofi_rxm", "tcp"]),
        ("nosuch", &[]),
        ("nosuch,udp", &["udp"]),
        ("", &["shm", "tcp;ofi_rxm", "tcp", "udp"]),
        ("   ", &["shm", "tcp;ofi_rxm", "tcp", "udp"]),
        (" udp , shm ", &["shm", "udp"]),
    ];
    for (filter, want) in cases {
        assert_eq!(
            names(&registry(Some(filter)), None),
            *want,
            "FI_PROVIDER={filter:?}"
        );
    }
}

#[test]
fn hints_prov_name_uses_the_same_grammar() {
    let reg = registry(None);
    let cases: &[(&str, &[&str])] = &[
        ("tcp", &["tcp;ofi_rxm", "tcp"]),
        ("tcp;ofi_rxm", &["tcp;ofi_rxm"]),
        ("ofi_rxm", &["tcp;ofi_rxm"]),
        ("UDP", &["udp"]),
        ("^tcp", &["shm", "udp"]),
    ];
    for (name, want) in cases {
        let hints = Info::hints().with_provider(name);
        assert_eq!(names(&reg, Some(hints)), *want, "prov_name={name:?}");
    }
}

#[test]
fn unknown_name_warns_and_others_still_work() {
    let (got, logs) = capture_logs(|| names(&registry(Some("nosuch,udp")), None));
    assert_eq!(got, ["udp"]);
    assert!(
        logs.iter()
            .any(|(_, m)| m.contains("'nosuch'") && m.contains("not a known provider")),
        "{logs:?}"
    );
}

#[test]
fn filtered_and_rejected_verdicts_explain_nodata() {
    let reg = registry(Some("^udp"));
    let hints = Info::hints().with_ep_type(EpType::Dgram);
    let (res, verdicts) = reg.getinfo_explain(&req(Some(hints)));
    let err = res.unwrap_err();
    assert_eq!(err.code(), Errno::ENODATA);
    let udp = verdicts
        .iter()
        .find(|v| v.provider == "udp")
        .expect("udp verdict");
    assert_eq!(udp.kind, VerdictKind::Filtered);
    assert!(udp.field.contains("FI_PROVIDER=^udp"), "{udp}");
    let tcp = verdicts
        .iter()
        .find(|v| v.provider == "tcp")
        .expect("tcp verdict");
    assert_eq!(tcp.kind, VerdictKind::Rejected);
    assert_eq!(tcp.field, "ep_attr.type");
    assert_eq!(tcp.asked, "FI_EP_DGRAM");
    assert_eq!(tcp.offered, "FI_EP_MSG");
    assert!(
        err.message().contains("tcp rejected ep_attr.type"),
        "{}",
        err.message()
    );
    assert!(
        err.message().contains("udp filtered by FI_PROVIDER=^udp"),
        "{}",
        err.message()
    );
}

#[test]
fn framework_errors() {
    let reg = registry(None);
    let mut r = req(None);
    r.version = Version::new(API_VERSION.major, API_VERSION.minor + 1);
    assert_eq!(reg.getinfo(&r).unwrap_err().code(), Errno::ENOSYS);
    let mut r = req(None);
    r.flags = GetinfoFlags::from_bits_retain(1 << 3);
    assert_eq!(reg.getinfo(&r).unwrap_err().code(), Errno::EBADFLAGS);
    let mut r = req(None);
    r.flags = GetinfoFlags::SOURCE;
    assert_eq!(reg.getinfo(&r).unwrap_err().code(), Errno::EINVAL);
}

#[test]
fn prov_attr_only_lists_every_provider() {
    let reg = registry(Some("udp"));
    let mut r = req(None);
    r.flags = GetinfoFlags::PROV_ATTR_ONLY;
    let infos = reg.getinfo(&r).unwrap();
    let got: Vec<&str> = infos.iter().map(|i| i.prov_name()).collect();
    // FI_PROVIDER is ignored here, hooks and utilities are included.
    assert_eq!(got, ["shm", "ofi_rxm", "tcp", "udp", "ofi_hook_noop"]);
    assert!(infos.iter().all(|i| i.fabric_attr.prov_version == V1));
}

#[test]
fn same_name_twice_higher_version_wins() {
    let reg = Registry::build(RegistryConfig {
        builtins: vec![entry_for::<Tcp>(), entry_for::<TcpV2>()],
        ..Default::default()
    });
    let provs = reg.providers();
    assert_eq!(provs.len(), 2);
    assert_eq!(provs[0].version, Version::new(2, 0));
    assert_eq!(provs[0].superseded_by, None);
    assert!(
        provs[1]
            .superseded_by
            .as_deref()
            .unwrap()
            .starts_with("tcp 2.0"),
        "{provs:?}"
    );
    let infos = reg.getinfo(&req(None)).unwrap();
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].fabric_attr.prov_version, Version::new(2, 0));
}

#[test]
fn open_fabric_errors() {
    let reg = registry(None);
    let info = Info::new();
    assert_eq!(reg.open_fabric(&info).unwrap_err().code(), Errno::EINVAL);
    let info = Info::new().with_provider("nosuch");
    assert_eq!(reg.open_fabric(&info).unwrap_err().code(), Errno::ENODEV);
    // The top of the stack is asked: ofi_rxm here, whose mock has no fabric.
    let info = Info::new().with_provider("tcp;ofi_rxm");
    assert_eq!(reg.open_fabric(&info).unwrap_err().code(), Errno::ENOSYS);
}

#[test]
fn providers_report_kind_priority_and_origin() {
    let reg = registry(None);
    let provs = reg.providers();
    let rxm = provs.iter().find(|p| p.name == "ofi_rxm").unwrap();
    assert_eq!(rxm.kind, ProviderKind::Utility);
    assert_eq!(rxm.priority, 5);
    assert!(provs.iter().all(|p| p.path.is_none()));
    assert!(reg.load_report().is_empty());
}

#[test]
fn loader_reports_missing_and_bogus_plugin_dirs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("libjunk-fi.so"), b"not an ELF file").unwrap();
    std::fs::write(dir.path().join("README.txt"), b"ignored: not a .so").unwrap();
    let missing = dir.path().join("missing");
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir.path().to_path_buf(), missing.clone()],
        ..Default::default()
    });
    let report = reg.load_report();
    assert_eq!(report.len(), 2, "{report:?}");
    assert!(report[0].path.ends_with("libjunk-fi.so"));
    assert!(
        matches!(&report[0].outcome, LoadOutcome::NotAPlugin { .. }),
        "{report:?}"
    );
    assert_eq!(report[1].path, missing);
    assert!(
        matches!(&report[1].outcome, LoadOutcome::DirUnreadable { reason }
            if reason.contains("No such file or directory")),
        "{report:?}"
    );
    assert!(
        report[1].to_string().ends_with(
            "missing: plugin directory not read: No such file or directory (os error 2)"
        ),
        "{}",
        report[1]
    );
}

/// The reason recorded for the candidate named `file` (panics if there is none).
fn reason_of(report: &[LoadRecord], file: &str) -> String {
    let rec = report
        .iter()
        .find(|r| r.path.file_name().is_some_and(|n| n == file))
        .unwrap_or_else(|| panic!("no record for {file}: {report:?}"));
    match &rec.outcome {
        LoadOutcome::NotAPlugin { reason } => reason.clone(),
        other => panic!("{file}: {other}"),
    }
}

#[test]
fn every_odd_candidate_gets_an_outcome() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    symlink(d.join("nowhere.so"), d.join("libdangling-fi.so")).unwrap();
    symlink(d.join("libloop-fi.so"), d.join("libloop-fi.so")).unwrap();
    std::fs::create_dir(d.join("libdir-fi.so")).unwrap();
    let fifo =
        std::ffi::CString::new(d.join("libfifo-fi.so").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // Loading must return (a FIFO opened for reading would wait for a writer): on
    // another thread, with a bounded wait.
    let dirs = vec![d.to_path_buf()];
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let reg = Registry::build(RegistryConfig {
            plugin_dirs: dirs,
            ..Default::default()
        });
        let _ = tx.send(reg.load_report());
    });
    let report = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the loader must not block on a candidate");
    assert_eq!(report.len(), 4, "{report:?}");
    let dangling = reason_of(&report, "libdangling-fi.so");
    assert!(
        dangling.starts_with("a dangling symbolic link (to ") && dangling.contains("nowhere.so"),
        "{dangling}"
    );
    assert_eq!(reason_of(&report, "libloop-fi.so"), "a symbolic link loop");
    assert_eq!(
        reason_of(&report, "libdir-fi.so"),
        "a directory, not a regular file"
    );
    assert_eq!(
        reason_of(&report, "libfifo-fi.so"),
        "a FIFO, not a regular file"
    );
}

#[test]
fn the_file_is_named_at_debug_level_before_dlopen() {
    // A real shared object that is not a plugin: dlopen succeeds, the entry is missing.
    let libc = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
    ]
    .into_iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
    .expect("libc.so.6");
    let dir = tempfile::tempdir().unwrap();
    let candidate = dir.path().join("libsys-fi.so");
    std::os::unix::fs::symlink(&libc, &candidate).unwrap();
    let (report, logs) = capture_logs(|| {
        Registry::build(RegistryConfig {
            plugin_dirs: vec![dir.path().to_path_buf()],
            ..Default::default()
        })
        .load_report()
    });
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(
        reason_of(&report, "libsys-fi.so").contains("OFI_RS_PLUGIN_ENTRY"),
        "{report:?}"
    );
    let want = format!("plugin {}: dlopen", candidate.display());
    let opened = logs
        .iter()
        .position(|(level, m)| *level == tracing::Level::DEBUG && *m == want)
        .unwrap_or_else(|| panic!("no debug line {want:?}: {logs:?}"));
    let refused = logs
        .iter()
        .position(|(_, m)| m.contains("libsys-fi.so") && m.contains("not a plugin"))
        .unwrap_or_else(|| panic!("no outcome line: {logs:?}"));
    assert!(opened < refused, "{logs:?}");
}

#[test]
fn negated_filter_skips_a_named_file_unopened() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("libverbs-fi.so"), b"would fail to load").unwrap();
    let reg = Registry::build(RegistryConfig {
        plugin_dirs: vec![dir.path().to_path_buf()],
        filter: Some("^verbs".into()),
        ..Default::default()
    });
    let report = reg.load_report();
    assert_eq!(
        report[0].outcome,
        LoadOutcome::Filtered {
            rule: "FI_PROVIDER=^verbs".into()
        }
    );
}
