//! Runs the built `fi_strerror` binary.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fi_strerror"))
        .args(args)
        .output()
        .expect("spawn fi_strerror");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn decimal_hex_octal_and_sign() {
    assert_eq!(run(&["61"]).1, "No data available\n");
    assert_eq!(run(&["-61"]).1, "No data available\n");
    assert_eq!(run(&["0x100"]).1, "Unspecified error\n");
    assert_eq!(
        run(&["0X10D"]).1,
        "Receiver not ready, no receive buffers available\n"
    );
    assert_eq!(run(&["010"]).1, "Exec format error\n");
    assert_eq!(run(&["+11"]).1, "Resource temporarily unavailable\n");
    assert_eq!(run(&["0"]).1, "Success\n");
    assert_eq!(run(&["270"]).1, "Unspecified error\n");
    for a in ["61", "0x100", "-5"] {
        let (rc, _, err) = run(&[a]);
        assert_eq!(rc, 0, "{a}");
        assert_eq!(err, "", "{a}");
    }
}

#[test]
fn usage_on_wrong_argument_count() {
    for args in [&[][..], &["1", "2"][..]] {
        let (rc, out, _) = run(args);
        assert_eq!(rc, 1);
        assert!(
            out.starts_with("Usage: fi_strerror FI_ERROR_CODE\n\n"),
            "{out}"
        );
    }
    let (rc, out, _) = run(&["-h"]);
    assert_eq!(rc, 0);
    assert!(
        out.starts_with("Usage: fi_strerror FI_ERROR_CODE\n"),
        "{out}"
    );
}

#[test]
fn parse_errors_and_range() {
    for bad in ["foo", "12abc", "", "0x", "09", "--help"] {
        let (rc, out, _) = run(&[bad]);
        assert_eq!(rc, 1, "{bad:?}");
        assert!(
            out.starts_with(&format!(
                "ERROR: unable to parse '{bad}'\n\nUsage: fi_strerror"
            )),
            "{bad:?}: {out}"
        );
    }
    for big in ["2147483648", "-2147483649", "0xffffffff"] {
        let (rc, out, _) = run(&[big]);
        assert_eq!(rc, 1, "{big}");
        assert!(
            out.starts_with(&format!("ERROR: '{big}' is out of range\n\nUsage:")),
            "{out}"
        );
    }
    let (rc, out, _) = run(&["2147483647"]);
    assert_eq!((rc, out.as_str()), (0, "Unspecified error\n"));
}
