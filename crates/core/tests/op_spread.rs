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
    assert!(checked >= 50, "too few operations checked: {text}");
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
fn the_script_sees_the_lists_and_the_hand_written_code() {
    // Declared once, in a list: a data operation, a query, a counter operation.
    assert_eq!(spread("ep.tsendv"), ["crates/core/src/abi/ops.rs"]);
    assert_eq!(spread("ep.atomicvalid"), ["crates/core/src/abi/ops.rs"]);
    assert_eq!(spread("cntr.add"), ["crates/core/src/abi/ctl_ops.rs"]);
    // A `close` entry, and an open-style `fn` entry whose C conversion is written by
    // hand: the list and the class's adapter file only.
    assert_eq!(spread("cq.close"), ["crates/core/src/abi/ctl_ops.rs"]);
    assert_eq!(
        spread("domain.cq_open"),
        [
            "crates/core/src/abi/adapt/domain.rs",
            "crates/core/src/abi/ctl_ops.rs"
        ]
    );
    // Binding to an endpoint or an MR: the hook's forwarder (with its bookkeeping of
    // the bound CQs and counters, `=> bound`) comes from the list too.
    assert_eq!(
        spread("ep.bind"),
        [
            "crates/core/src/abi/adapt/ep.rs",
            "crates/core/src/abi/ctl_ops.rs"
        ]
    );
    assert_eq!(
        spread("mr.bind"),
        [
            "crates/core/src/abi/adapt/mr.rs",
            "crates/core/src/abi/ctl_ops.rs"
        ]
    );
    // A provider method outside the lists whose hook forwarder is written by hand
    // (`EndpointOps::leave`, `fi_close` of a multicast membership) is seen in each file
    // that spells it out — the trait and the hook — so a check that passes means
    // something.
    let by_hand = spread("ep.leave");
    for f in ["crates/core/src/provider.rs", "crates/hook/src/ep.rs"] {
        assert!(by_hand.iter().any(|g| g == f), "{f} not in {by_hand:?}");
    }
}
