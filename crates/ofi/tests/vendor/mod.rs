//! Builds the out-of-tree example provider (`examples/vendor-provider`) as a plugin, the
//! way a vendor would, and lays out plugin directories for the tests.
//!
//! Each variant is built at most once per test process, with
//! `cargo build --manifest-path <repo>/examples/vendor-provider/Cargo.toml [--features X]`
//! and `CARGO_TARGET_DIR=<repo>/target/vendor-plugin` (set for that command only, so
//! the workspace's own build is untouched). Builds are serialised: they share one
//! target directory and one output file, which is copied to a per-variant path before
//! the next build starts. A test then copies the variants it needs, under the file names
//! it wants, into its own temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// One build of the example provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The real plugin.
    Good,
    /// Entry claims interface major `ABI_MAJOR + 1`.
    AbiNextMajor,
    /// Entry claims another layout fingerprint.
    LayoutDrift,
    /// `init` returns an error.
    InitFails,
    /// `send` panics.
    PanicInSend,
}

const VARIANTS: usize = 5;

impl Variant {
    fn index(self) -> usize {
        self as usize
    }

    /// The cargo feature that makes this variant.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Variant::Good => None,
            Variant::AbiNextMajor => Some("abi-next-major"),
            Variant::LayoutDrift => Some("layout-drift"),
            Variant::InitFails => Some("init-fails"),
            Variant::PanicInSend => Some("panic-in-send"),
        }
    }

    fn label(self) -> &'static str {
        self.feature().unwrap_or("default")
    }
}

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The target directory of the out-of-tree builds.
pub fn target_dir() -> PathBuf {
    repo_root().join("target").join("vendor-plugin")
}

/// The file name cargo gives the example's cdylib.
pub const LIB_NAME: &str = "libofi_prov_unixdgram.so";

/// One cargo command at a time in the shared target directory.
static CARGO_LOCK: Mutex<()> = Mutex::new(());

/// The built plugin file of `variant` (built on first use).
pub fn built(variant: Variant) -> &'static Path {
    static BUILDS: [OnceLock<PathBuf>; VARIANTS] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    BUILDS[variant.index()].get_or_init(|| {
        let _one_at_a_time = CARGO_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        build(variant)
    })
}

/// Run the example crate's own tests (`cargo test --manifest-path …`) in the same
/// target directory; returns whether they passed and cargo's output.
pub fn run_own_tests() -> (bool, String) {
    let _one_at_a_time = CARGO_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let manifest = repo_root().join("examples/vendor-provider/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .arg("test")
        .arg("--manifest-path")
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", env!("CARGO")));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn build(variant: Variant) -> PathBuf {
    let root = repo_root();
    let manifest = root.join("examples/vendor-provider/Cargo.toml");
    let target = target_dir();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--quiet");
    if let Some(f) = variant.feature() {
        cmd.arg("--features").arg(f);
    }
    cmd.env("CARGO_TARGET_DIR", &target);
    let started = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", env!("CARGO")));
    assert!(
        out.status.success(),
        "building the vendor plugin ({}) failed:\n{}",
        variant.label(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "vendor plugin ({}) built out of tree in {:.1} s",
        variant.label(),
        started.elapsed().as_secs_f64()
    );
    // Keep this variant's file before another build overwrites the output. Copy to a
    // temporary name, then rename: a process that has the old file loaded keeps it.
    let produced = target.join("debug").join(LIB_NAME);
    let dir = target.join("variants").join(variant.label());
    std::fs::create_dir_all(&dir).expect("create the variants directory");
    let dest = dir.join(LIB_NAME);
    let tmp = dir.join(format!(".{LIB_NAME}.{}", std::process::id()));
    std::fs::copy(&produced, &tmp)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", produced.display(), tmp.display()));
    std::fs::rename(&tmp, &dest).expect("rename the copied plugin into place");
    dest
}

/// A fresh plugin directory holding `files`: (variant, file name) pairs; a file name
/// may also be given raw bytes with [`with_bytes`].
pub fn plugin_dir(files: &[(Variant, &str)]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ofi-plugins-")
        .tempdir()
        .expect("temporary directory");
    for (variant, name) in files {
        let src = built(*variant);
        std::fs::copy(src, dir.path().join(name)).expect("copy the plugin");
    }
    dir
}

/// A plugin directory that lives as long as the test process and beyond: for subjects
/// held in statics, which are never dropped (a `TempDir` there would be left in /tmp).
/// It is `target/vendor-plugin/dirs/<name>/` holding the real plugin, so it is build
/// output, cleaned with the rest of `target/`. The copy is made under another name and
/// renamed into place, so a process that has the previous copy loaded (a parent whose
/// child re-executes the test binary) keeps its own mapping intact.
#[allow(dead_code)] // used by the fi_info and conformance tests, which share this module
pub fn shared_plugin_dir(name: &str) -> PathBuf {
    let dir = target_dir().join("dirs").join(name);
    std::fs::create_dir_all(&dir).expect("create the shared plugin directory");
    let src = built(Variant::Good);
    let dest = dir.join(LIB_NAME);
    let same = |a: &Path, b: &Path| match (std::fs::read(a), std::fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    };
    if !same(src, &dest) {
        let tmp = dir.join(format!(".{LIB_NAME}.{}", std::process::id()));
        std::fs::copy(src, &tmp).expect("copy the plugin");
        std::fs::rename(&tmp, &dest).expect("move the plugin into place");
    }
    dir
}

/// Write `bytes` as file `name` of `dir`.
pub fn with_bytes(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write a file into the plugin directory");
    path
}
