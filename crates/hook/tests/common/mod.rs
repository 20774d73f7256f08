//! Shared test helpers: registries with the hooks, and a connectionless endpoint pair.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqDataEntry;
use ofi::av::AddressVector;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{AddrFormat, CqFormat, EpType, Errno, Info, WaitObj};
use ofi_testkit::child::{self, ChildRun};

/// Every wait is bounded by this.
pub const WAIT: Duration = Duration::from_secs(5);

/// The variable that tells a test binary it runs as the child of one of its tests.
pub const CHILD_VAR: &str = "OFI_HOOK_TEST_CHILD";

/// How long a child test may run.
pub const CHILD_BOUND: Duration = Duration::from_secs(120);

/// Whether this process is the child of a test of its binary (see [`run_child`]).
pub fn is_child() -> bool {
    std::env::var_os(CHILD_VAR).is_some()
}

/// Runs test `test` of this binary again as a child process ([`CHILD_VAR`] set, and
/// what `setup` adds to its command), where it plays its child side; what it left once
/// it ended (within [`CHILD_BOUND`]).
pub fn run_child(test: &str, setup: impl FnOnce(&mut Command)) -> ChildRun {
    let mut cmd = child::test_command(CHILD_VAR, test);
    setup(&mut cmd);
    child::run_to_end(cmd, CHILD_BOUND)
}

/// Test `test` run again as a child process whose perf hook writes its summaries to
/// `file_name` in a fresh directory (`FI_OFI_HOOK_PERF_FILE`), with what `setup` adds
/// to the child's command. In that child (see [`is_child`]): runs `child_side` and
/// returns `None`. In the test: the directory (removed when dropped), the file's path
/// and what the child left.
pub fn run_child_with_perf_file(
    test: &str,
    child_side: fn(),
    setup: impl FnOnce(&mut Command),
    file_name: &str,
) -> Option<(tempfile::TempDir, PathBuf, ChildRun)> {
    if is_child() {
        child_side();
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(file_name);
    let run = run_child(test, |c| {
        c.env("FI_OFI_HOOK_PERF_FILE", &file);
        setup(c);
    });
    Some((dir, file, run))
}

/// A registry with the in-tree core providers and the five hooks, wrapping fabrics in
/// `hooks`.
pub fn registry(hooks: &str) -> Registry {
    let mut builtins = vec![
        ofi::abi::entry_for::<ofi_prov_udp::UdpProvider>(),
        ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>(),
        ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>(),
    ];
    builtins.extend(ofi_hook::builtin_entries());
    Registry::build(RegistryConfig {
        builtins,
        ..RegistryConfig::default()
    })
    .with_hooks(hooks)
    .expect("hooks registered")
}

/// The first info of `prov` with endpoint type `ep_type`.
pub fn info(reg: &Registry, prov: &str, ep_type: EpType) -> Info {
    let mut h = Info::hints().with_ep_type(ep_type);
    h.fabric_attr.prov_name = Some(prov.into());
    if prov == "udp" {
        h.addr_format = AddrFormat::SOCKADDR_IN;
    }
    ofi_conformance::fixture::first_info(reg, h)
}

/// One endpoint with its CQ (data format) and AV.
pub struct Peer {
    pub ep: Endpoint,
    pub cq: CompletionQueue,
    pub av: AddressVector,
}

/// Two endpoints of one domain that know each other.
pub struct Pair {
    pub a: Peer,
    pub b: Peer,
    /// b's address in a's AV.
    pub to_b: u64,
    /// a's address in b's AV.
    pub to_a: u64,
    pub domain: Domain,
    pub fabric: Fabric,
    pub info: Info,
}

/// An enabled endpoint of `domain` with its own CQ and AV.
pub fn peer(domain: &Domain, info: &Info) -> Peer {
    let cq_attr = CqAttr {
        wait_obj: WaitObj::None,
        ..CqAttr::with_format(CqFormat::Data)
    };
    let (ep, cq, av) = ofi_conformance::fixture::enabled_endpoint(domain, info, &cq_attr);
    Peer { ep, cq, av }
}

/// A connectionless pair over `prov` from `reg`.
pub fn pair(reg: &Registry, prov: &str, ep_type: EpType) -> Pair {
    let info = info(reg, prov, ep_type);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let a = peer(&domain, &info);
    let b = peer(&domain, &info);
    let fmt = info.addr_format;
    let name_a = ofi::Address::from_bytes(fmt, &a.ep.getname().unwrap()).unwrap();
    let name_b = ofi::Address::from_bytes(fmt, &b.ep.getname().unwrap()).unwrap();
    let to_b = a.av.insert(&[name_b]).unwrap()[0];
    let to_a = b.av.insert(&[name_a]).unwrap()[0];
    Pair {
        a,
        b,
        to_b,
        to_a,
        domain,
        fabric,
        info,
    }
}

/// Read one completion from `cq` within `wait` (`None`: none came).
pub fn next(cq: &CompletionQueue, wait: Duration) -> Option<CqDataEntry> {
    let end = Instant::now() + wait;
    let mut e = [CqDataEntry::default()];
    loop {
        match cq.read(&mut e) {
            Ok(1) => return Some(e[0]),
            Ok(_) => {}
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => panic!("cq read: {err}"),
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Drive both CQs for `wait`, collecting every completion.
pub fn drain(p: &Pair, wait: Duration) -> (Vec<CqDataEntry>, Vec<CqDataEntry>) {
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    let end = Instant::now() + wait;
    while Instant::now() < end {
        if let Some(e) = next(&p.a.cq, Duration::ZERO) {
            ca.push(e);
        }
        if let Some(e) = next(&p.b.cq, Duration::ZERO) {
            cb.push(e);
        }
    }
    (ca, cb)
}

/// Post a receive of `buf` on b, from a, with context `ctx`.
pub fn post_recv(p: &Pair, buf: &mut [u8], ctx: usize) {
    // SAFETY: the callers keep `buf` alive until the pair is dropped (or its
    // completions drained).
    unsafe {
        p.b.ep
            .recv(
                buf.as_mut_ptr(),
                buf.len(),
                std::ptr::null_mut(),
                p.to_a,
                ctx,
            )
            .expect("recv")
    };
}
