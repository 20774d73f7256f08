//! Every operation of the lists is spelled out in at most two files of the plumbing
//! (`scripts/op_spread.py --check`): adding an operation is one list entry plus its
//! implementation where supported.

use std::path::Path;
use std::process::Command;

#[test]
fn no_operation_is_named_in_more_than_two_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(root.join("scripts/op_spread.py"))
        .arg("--check")
        .output()
        .expect("python3 runs scripts/op_spread.py (install python3 to run this check)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "operations over the limit:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The check ran over the lists, not over nothing.
    let checked: usize = text
        .split(" checked")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(checked >= 37, "too few operations checked: {text}");
}

fn spread(name: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("python3")
        .arg(root.join("scripts/op_spread.py"))
        .arg(name)
        .output()
        .expect("python3 runs scripts/op_spread.py");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_script_sees_the_list_and_the_hand_written_code() {
    // `tsendv` is declared once, in the list.
    assert_eq!(spread("tsendv"), ["crates/core/src/abi/ops.rs"]);
    // A name the plumbing spells out by hand in many files is seen in each, so a
    // check that passes means something.
    let many = spread("ErrBuf");
    assert!(many.len() > 5, "{many:?}");
    assert!(many.iter().any(|f| f == "crates/core/src/abi/tables.rs"));
}
