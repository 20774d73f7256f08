//! Building the stand-in libraries of this directory (C, compiled with `cc` against the
//! installed rdma-core headers) for the tests that load them in place of rdma-core.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/fake/<stem>.c` into `<dir>/<stem>.so`; `None` (with a line saying
/// why) when `header` is not installed or there is no C compiler. Panics when the
/// compiler refuses the source.
pub fn build(stem: &str, header: &str, dir: &Path) -> Option<PathBuf> {
    if !Path::new("/usr/include").join(header).exists() {
        eprintln!("fake: SKIPPED: <{header}> not installed");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fake/{stem}.c"));
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
