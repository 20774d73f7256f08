//! The stand-in libraries of this directory (C, compiled with `cc` against the installed
//! rdma-core headers) for the tests that load them in place of rdma-core
//! (`OFI_RDMA_RDMACM_LIB`, `OFI_RDMA_IBVERBS_LIB`), and their test controls. Shared by
//! ofi-rdma's and ofi-prov-verbs's tests (the latter include this file by path).

#![allow(dead_code)] // not every test uses every control

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `rdma_cm_event_type` numbers the tests inject.
pub const CONNECT_RESPONSE: c_int = 5;
/// `RDMA_CM_EVENT_REJECTED`.
pub const REJECTED: c_int = 8;
/// `RDMA_CM_EVENT_ESTABLISHED`.
pub const ESTABLISHED: c_int = 9;
/// `RDMA_CM_EVENT_DISCONNECTED`.
pub const DISCONNECTED: c_int = 10;
/// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
pub const TIMEWAIT_EXIT: c_int = 15;
/// [`StandIns::answer`] on the last connect request's id.
pub const REQUEST: c_int = 0;
/// [`StandIns::answer`] on the last connecting id.
pub const CONNECTING: c_int = 1;

/// This directory (from ofi-rdma's tests and from its siblings' alike).
fn sources() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../rdma/tests/fake"))
}

/// Compiles `<stem>.c` of this directory into `<dir>/<stem>.so`; `None` (with a line
/// saying why) when `header` is not installed or there is no C compiler. Panics when
/// the compiler refuses the source.
pub fn build(stem: &str, header: &str, dir: &Path) -> Option<PathBuf> {
    if !Path::new("/usr/include").join(header).exists() {
        eprintln!("fake: SKIPPED: <{header}> not installed");
        return None;
    }
    let src = sources().join(format!("{stem}.c"));
    std::fs::create_dir_all(dir).ok()?;
    let lib = dir.join(format!("{stem}.so"));
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(lib),
        Ok(o) => panic!("cc failed:\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            eprintln!("fake: SKIPPED: no C compiler ({e})");
            None
        }
    }
}

/// A per-process directory next to the test binary, for the built libraries.
pub fn dir(what: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .expect("a directory")
        .join(format!("{what}-{}", std::process::id()))
}

/// Framed private data as it travels: the length byte, then the bytes.
pub fn framed(data: &[u8]) -> Vec<u8> {
    let mut v = vec![data.len() as u8];
    v.extend_from_slice(data);
    v
}

type LogFn = unsafe extern "C" fn() -> *const c_char;

/// The stand-ins, built in `dir` and named in the environment for this process (the
/// libraries are looked up once per process: call before anything opens a device or a
/// channel), with their test controls. `None` when they cannot be built here.
pub struct StandIns {
    dir: PathBuf,
    _cm: libloading::Library,
    _verbs: Option<libloading::Library>,
    connect_request: unsafe extern "C" fn(*const c_void, c_int, u32) -> c_int,
    answer: unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, c_int, u32) -> c_int,
    event: unsafe extern "C" fn(c_int, c_int) -> c_int,
    resolve_error: unsafe extern "C" fn(c_int),
    cm_log: LogFn,
    verbs_log: Option<LogFn>,
}

impl StandIns {
    /// librdmacm's stand-in, and libibverbs' too when `with_verbs`.
    pub fn install(what: &str, with_verbs: bool) -> Option<StandIns> {
        let dir = dir(what);
        let cm = build("librdmacm_fake", "rdma/rdma_cma.h", &dir)?;
        std::env::set_var("OFI_RDMA_RDMACM_LIB", &cm);
        let verbs = if with_verbs {
            let v = build("libibverbs_fake", "infiniband/verbs.h", &dir)?;
            std::env::set_var("OFI_RDMA_IBVERBS_LIB", &v);
            Some(v)
        } else {
            None
        };
        // SAFETY: the stand-ins just built; loading them runs no constructor.
        let (cm_lib, verbs_lib) = unsafe {
            (
                libloading::Library::new(&cm).expect("load the librdmacm stand-in"),
                verbs.map(|v| libloading::Library::new(v).expect("load the libibverbs stand-in")),
            )
        };
        // SAFETY: the C signatures of this directory's sources; the libraries stay
        // loaded as long as the pointers (all in the returned value).
        let s = unsafe {
            StandIns {
                connect_request: *cm_lib.get(b"fake_connect_request\0").unwrap(),
                answer: *cm_lib.get(b"fake_answer\0").unwrap(),
                event: *cm_lib.get(b"fake_event\0").unwrap(),
                resolve_error: *cm_lib.get(b"fake_set_resolve_error\0").unwrap(),
                cm_log: *cm_lib.get(b"fake_log\0").unwrap(),
                verbs_log: verbs_lib
                    .as_ref()
                    .map(|l| *l.get::<LogFn>(b"fake_verbs_log\0").unwrap()),
                _cm: cm_lib,
                _verbs: verbs_lib,
                dir,
            }
        };
        Some(s)
    }

    /// A connect request at the last listener from 10.0.0.5:5555 (GID 0x5a…), queue
    /// pair `qpn`, with `data` (padded to 56 bytes on the way).
    pub fn request(&self, data: &[u8], qpn: u32) {
        // SAFETY: `data` is readable for its length; the stand-in copies it.
        let rc = unsafe { (self.connect_request)(data.as_ptr().cast(), data.len() as c_int, qpn) };
        assert_eq!(rc, 0, "no listener in the stand-in");
    }

    /// An event `kind` with `status`, `data` (padded to 196) and `qpn` on the last
    /// request's id ([`REQUEST`]) or the last connecting id ([`CONNECTING`]).
    pub fn answer(&self, which: c_int, kind: c_int, status: c_int, data: &[u8], qpn: u32) {
        // SAFETY: `data` is readable for its length; the stand-in copies it.
        let rc = unsafe {
            (self.answer)(
                which,
                kind,
                status,
                data.as_ptr().cast(),
                data.len() as c_int,
                qpn,
            )
        };
        assert_eq!(rc, 0, "no such id in the stand-in");
    }

    /// An event `kind` on an id nobody knows.
    pub fn stray_event(&self, kind: c_int) {
        // SAFETY: a plain C call of the stand-in.
        let rc = unsafe { (self.event)(kind, 0) };
        assert_eq!(rc, 0, "no listener in the stand-in");
    }

    /// The next address resolution fails with an `ADDR_ERROR` of `status`.
    pub fn fail_next_resolution(&self, status: c_int) {
        // SAFETY: a plain C call of the stand-in.
        unsafe { (self.resolve_error)(status) };
    }

    fn lines(f: LogFn) -> Vec<String> {
        // SAFETY: a stand-in's NUL-terminated static log buffer.
        unsafe { CStr::from_ptr(f()) }
            .to_string_lossy()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every librdmacm call so far.
    pub fn cm_log(&self) -> Vec<String> {
        Self::lines(self.cm_log)
    }

    /// Every queue pair change so far (none without the libibverbs stand-in).
    pub fn verbs_log(&self) -> Vec<String> {
        self.verbs_log.map(Self::lines).unwrap_or_default()
    }

    /// The librdmacm calls after the first `from`, and how many there are in all.
    pub fn cm_since(&self, from: usize) -> (Vec<String>, usize) {
        since(self.cm_log(), from)
    }

    /// The queue pair changes after the first `from`, and how many there are in all.
    pub fn verbs_since(&self, from: usize) -> (Vec<String>, usize) {
        since(self.verbs_log(), from)
    }

    /// Removes the built libraries (they stay loaded).
    pub fn clean_up(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn since(all: Vec<String>, from: usize) -> (Vec<String>, usize) {
    let n = all.len();
    (all.into_iter().skip(from).collect(), n)
}
