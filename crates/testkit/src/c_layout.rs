//! C layout probes: checking that Rust mirrors of C structures have the C sizes,
//! alignments and field offsets, and that Rust constants have the C values, against
//! the headers installed on this host.
//!
//! A test lists its structures with [`layout!`](crate::layout) (C name, Rust type, C
//! field = Rust field, plus fields the macro cannot name such as union members or
//! nested fields, by offset), makes a C program with [`probe_program`] that prints one
//! `<what> <number>` line per size, alignment, offset and value, compiles and runs it
//! however it needs (its own includes, libraries and compiler), and hands the output
//! to [`assert_probe_output`]; or, for a probe that needs nothing but the header and
//! the C compiler, hands the lists to [`check_installed_header`], which does all of
//! that (and says the check is skipped when the header is not installed).
//!
//! # What may panic
//!
//! This is test support: [`assert_probe_output`] panics with every mismatch listed;
//! [`run_probe`] panics when the compiler refuses the program or the program fails.

use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

/// One C structure as Rust lays it out.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The C type, e.g. `struct fi_info`.
    pub c_name: &'static str,
    /// The Rust size; `None` where only a prefix of the C structure is mirrored (the
    /// fields are still compared).
    pub size: Option<usize>,
    /// The Rust alignment.
    pub align: usize,
    /// (C field, Rust offset) pairs; a C field may be a path (`param.conn.qp_num`).
    pub fields: Vec<(&'static str, usize)>,
}

impl Layout {
    /// This layout with its size left out of the comparison (a structure Rust mirrors
    /// only up to some field).
    pub fn prefix_only(mut self) -> Layout {
        self.size = None;
        self
    }
}

/// A [`Layout`](crate::c_layout::Layout): `layout!("struct c" = RustType { "c_field" =
/// rust_field, ... })`, optionally followed by `+ { "c.path" = offset_expr, ... }` for
/// fields given by their offset.
#[macro_export]
macro_rules! layout {
    ($c:literal = $T:ty { $($cf:literal = $rf:ident),* $(,)? } $(+ { $($xf:literal = $xo:expr),* $(,)? })?) => {
        $crate::c_layout::Layout {
            c_name: $c,
            size: Some(::std::mem::size_of::<$T>()),
            align: ::std::mem::align_of::<$T>(),
            fields: vec![$(($cf, ::std::mem::offset_of!($T, $rf))),* $($(, ($xf, $xo))*)?],
        }
    };
}

/// The C program (after `includes`, each a full `#include` line) printing one line per
/// size, alignment, field offset and value, and the lines the Rust side expects.
pub fn probe_program(
    includes: &str,
    list: &[Layout],
    values: &[(String, u64)],
) -> (String, Vec<String>) {
    let mut c = format!("#include <stdio.h>\n#include <stddef.h>\n{includes}int main(void)\n{{\n");
    let mut expected = Vec::new();
    let mut line = |c: &mut String, what: String, expr: String, rust: u64| {
        let _ = writeln!(
            c,
            "\tprintf(\"{what} %llu\\n\", (unsigned long long)({expr}));"
        );
        expected.push(format!("{what} {rust}"));
    };
    for l in list {
        let name = l.c_name;
        if let Some(size) = l.size {
            line(&mut c, name.into(), format!("sizeof({name})"), size as u64);
        }
        line(
            &mut c,
            format!("align {name}"),
            format!("_Alignof({name})"),
            l.align as u64,
        );
        for (f, off) in &l.fields {
            line(
                &mut c,
                format!("{name}.{f}"),
                format!("offsetof({name}, {f})"),
                *off as u64,
            );
        }
    }
    for (name, val) in values {
        line(&mut c, name.clone(), name.clone(), *val);
    }
    c.push_str("\treturn 0;\n}\n");
    (c, expected)
}

/// Asserts the probe printed exactly the `expected` lines, listing every mismatch.
pub fn assert_probe_output(stdout: &str, expected: &[String]) {
    let got: Vec<&str> = stdout.lines().collect();
    let bad: Vec<String> = expected
        .iter()
        .zip(&got)
        .filter(|(e, g)| e != g)
        .map(|(e, g)| format!("rust: {e}   C: {g}"))
        .collect();
    assert_eq!(got.len(), expected.len(), "line count differs:\n{stdout}");
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
}

/// Compiles the probe `src` (named `name`) with `$CC` (or `cc`), runs it and compares
/// its lines with `expected` ([`assert_probe_output`]). The source and the program
/// live next to the test binary, per process (several runs of a binary may probe at
/// once), and are removed afterwards.
pub fn run_probe(name: &str, src: &str, expected: &[String]) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir: PathBuf = exe.parent().expect("its directory").join("c-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let stem = format!("{name}-{}", std::process::id());
    let c_path = dir.join(format!("{stem}.c"));
    std::fs::write(&c_path, src).unwrap();
    let bin = dir.join(&stem);
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&bin)
        .arg(&c_path)
        .output()
        .expect("run cc");
    let _ = std::fs::remove_file(&c_path);
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&bin).output().expect("run probe");
    let _ = std::fs::remove_file(&bin);
    assert!(run.status.success(), "the probe {name} failed");
    assert_probe_output(&String::from_utf8_lossy(&run.stdout), expected);
}

/// Checks `layouts` and `values` against the installed `/usr/include/<header>` with
/// the probe `name` ([`probe_program`], [`run_probe`]); when the header (from the
/// distribution's `package`) is not installed, says the check is skipped and returns.
pub fn check_installed_header(
    header: &str,
    package: &str,
    name: &str,
    layouts: &[Layout],
    values: &[(String, u64)],
) {
    let path = format!("/usr/include/{header}");
    if !std::path::Path::new(&path).exists() {
        eprintln!("{name}: SKIPPED: {path} not found (install {package})");
        return;
    }
    let (src, expected) = probe_program(&format!("#include <{header}>\n"), layouts, values);
    run_probe(name, &src, &expected);
}
