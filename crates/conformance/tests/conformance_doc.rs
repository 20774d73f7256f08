//! docs/CONFORMANCE.md is generated from the declarations: every
//! `conformance_suite!(name, subject, expected::X)` (or
//! `conformance_suite!(expected = expected::X; name: subject, …)`) of the workspace's
//! tests and the
//! lists of `ofi_conformance::expected`. This test renders the document and fails when
//! the committed file differs (or when an instantiation names no declaration).
//! Regenerate it with
//!
//! ```text
//! OFI_CONFORMANCE_DOC=write cargo test -p ofi-conformance --test conformance_doc
//! ```
//!
//! (what `scripts/conformance-summary.py` runs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ofi_conformance::{expected, Capability};

/// One instantiation of the suite found in a test file.
struct Instance {
    suite: String,
    file: String,
    declaration: String,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/conformance sits two levels below the workspace root")
        .to_path_buf()
}

/// The top-level comma-separated arguments of `inner`.
fn split_args(inner: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for ch in inner.chars() {
        match ch {
            // Generic arguments (`f::<A, B>(…)`) count as brackets too.
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            parts.push(current.trim().to_string());
            current.clear();
        } else {
            current.push(ch);
        }
    }
    if !current.trim().is_empty() {
        parts.push(current.trim().to_string());
    }
    parts
}

/// Every `conformance_suite!(…)` invocation in `text` (of file `file`).
fn invocations(text: &str, file: &str) -> Vec<Instance> {
    const KEY: &str = "conformance_suite!(";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let line_start = rest[..at].rfind('\n').map_or(0, |n| n + 1);
        // Only an invocation that starts its line (not a mention in a comment or string).
        let starts_line = rest[line_start..at].trim().is_empty();
        let body = &rest[at + KEY.len()..];
        if !starts_line {
            rest = body;
            continue;
        }
        let mut depth = 1;
        let mut end = None;
        for (index, ch) in body.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(index);
                        break;
                    }
                }
                _ => {}
            }
        }
        let end = end.unwrap_or_else(|| panic!("{file}: unclosed conformance_suite!("));
        if let Some(list) = body[..end].trim_start().strip_prefix("expected =") {
            // conformance_suite!(expected = expected::X; name: subject, …)
            let (declaration, suites) = list
                .split_once(';')
                .unwrap_or_else(|| panic!("{file}: conformance_suite!(expected = …; …) needs ';'"));
            for entry in split_args(suites) {
                let (suite, _subject) = entry
                    .split_once(':')
                    .unwrap_or_else(|| panic!("{file}: '{entry}' needs name: subject"));
                out.push(Instance {
                    suite: suite.trim().to_string(),
                    file: file.to_string(),
                    declaration: declaration.trim().to_string(),
                });
            }
        } else {
            let args = split_args(&body[..end]);
            assert_eq!(
                args.len(),
                3,
                "{file}: conformance_suite!({}) needs (name, subject, expected::X)",
                &body[..end]
            );
            out.push(Instance {
                suite: args[0].clone(),
                file: file.to_string(),
                declaration: args[2].clone(),
            });
        }
        rest = &body[end..];
    }
    out
}

/// Every instantiation under crates/*/tests/*.rs, sorted by suite name.
fn instances(root: &Path) -> Vec<Instance> {
    let mut out = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("read crates/")
        .filter_map(|entry| Some(entry.ok()?.path()))
        .collect();
    crates.sort();
    for krate in crates {
        let Ok(entries) = std::fs::read_dir(krate.join("tests")) else {
            continue;
        };
        for entry in entries.filter_map(|entry| entry.ok()) {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a test file");
                let rel = path
                    .strip_prefix(root)
                    .expect("under the root")
                    .to_string_lossy()
                    .into_owned();
                out.extend(invocations(&text, &rel));
            }
        }
    }
    out.sort_by(|a, b| a.suite.cmp(&b.suite));
    out
}

fn render(instances: &[Instance]) -> String {
    let mut doc = String::new();
    doc.push_str(
        "# Conformance: what each provider is expected to claim

<!-- Generated by crates/conformance/tests/conformance_doc.rs from the declarations in
crates/conformance/src/expected.rs and the suites' instantiations; do not edit by hand.
Regenerate: OFI_CONFORMANCE_DOC=write cargo test -p ofi-conformance --test conformance_doc
(or python3 scripts/conformance-summary.py). -->

One suite (`crates/conformance`) runs against every provider for the areas it claims: the
claims come from its getinfo answer, and from opening what no getinfo field announces
(EQs, counters, memory registration, selective completion, wait sets, poll sets), which
counts as claimed unless the provider answers `FI_ENOSYS`. A claimed area whose check
fails fails the test.

Each instantiation of the suite also declares the areas its provider is **expected** to
claim (`conformance_suite!(name, subject, expected::X)`, the lists in
`crates/conformance/src/expected.rs`). When the provider's claims differ — it stops
claiming an expected area, or claims one not declared — every check of that area and the
suite's `capabilities_checked` test fail, naming the area and the reason; a check is
skipped (and passes) only for an area the declaration leaves out. How a provider author
runs the suite is in
[PLUGINS.md](PLUGINS.md#10-running-the-conformance-suite-on-your-provider).

## Areas expected, per declaration

",
    );
    let declarations = expected::ALL;
    doc.push_str("| area | claimed when |");
    for (name, _) in declarations {
        let _ = write!(doc, " {name} |");
    }
    doc.push_str("\n| --- | --- |");
    for _ in declarations {
        doc.push_str(" :-: |");
    }
    doc.push('\n');
    for cap in Capability::ALL {
        let _ = write!(doc, "| {cap} | {} |", cap.claimed_when());
        for (_, caps) in declarations {
            doc.push_str(if caps.contains(&cap) {
                " ✓ |"
            } else {
                " — |"
            });
        }
        doc.push('\n');
    }
    doc.push_str("| **areas** | |");
    for (_, caps) in declarations {
        let _ = write!(doc, " **{}** |", caps.len());
    }
    doc.push_str(
        "\n\n## Instantiations

Each row is one instantiation of the suite: a provider linked in, loaded as a plugin, over
IPv6 or `FI_ADDR_STR`, or under a hook.

| suite | test file | expects |
| --- | --- | --- |
",
    );
    for instance in instances {
        let _ = writeln!(
            doc,
            "| `{}` | `{}` | `{}` |",
            instance.suite, instance.file, instance.declaration
        );
    }
    doc
}

#[test]
fn conformance_doc_is_current() {
    let root = workspace_root();
    let found = instances(&root);
    assert!(
        found.len() >= 10,
        "only {} instantiations found under {}",
        found.len(),
        root.display()
    );
    for instance in &found {
        assert!(
            expected::by_name(&instance.declaration).is_some(),
            "{}: suite {} expects `{}`, which is no declaration of ofi_conformance::expected (in tree, name one of those)",
            instance.file,
            instance.suite,
            instance.declaration
        );
    }
    let doc = render(&found);
    let path = root.join("docs/CONFORMANCE.md");
    if std::env::var("OFI_CONFORMANCE_DOC").as_deref() == Ok("write") {
        std::fs::write(&path, &doc).expect("write docs/CONFORMANCE.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == doc,
        "docs/CONFORMANCE.md is not current: regenerate it with\n  OFI_CONFORMANCE_DOC=write cargo test -p ofi-conformance --test conformance_doc"
    );
}

#[test]
fn invocations_are_parsed() {
    let text = "// conformance_suite!(commented, x, y)\nconformance_suite!(a_b, Subject::new(reg(), \"p\").with_hints(h(1, 2)), expected::UDP);\n";
    let found = invocations(text, "f.rs");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].suite, "a_b");
    assert_eq!(found[0].declaration, "expected::UDP");
    assert_eq!(expected::by_name("expected::UDP"), Some(expected::UDP));
    assert_eq!(expected::by_name("expected::NONE"), None);
}

#[test]
fn list_invocations_are_parsed() {
    let text = "conformance_suite!(expected = expected::RXM;\n    a: f::<A, B>(Linked, X),\n    b: g(h(1, 2)),\n);\n";
    let found = invocations(text, "f.rs");
    let names: Vec<(&str, &str)> = found
        .iter()
        .map(|i| (i.suite.as_str(), i.declaration.as_str()))
        .collect();
    assert_eq!(names, [("a", "expected::RXM"), ("b", "expected::RXM")]);
}
