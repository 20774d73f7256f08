//! `fi_strerror CODE`: print the text of a fabric error code.
//!
//! Behaviour (that of the C tool, util/strerror.c in libfabric 1.17):
//! - exactly one argument, read like C `strtol(arg, &end, 0)`: leading blanks, an
//!   optional sign, then `0x`/`0X` hexadecimal, `0` octal or decimal digits, and
//!   nothing after them;
//! - the text printed is that of the absolute value ([`ofi::error::strerror`]);
//! - `-h` alone prints the usage and exits 0; a missing or extra argument prints the
//!   usage and exits 1; an unparsable number or one outside the C `int` range prints
//!   `ERROR: ...`, a blank line and the usage, and exits 1. Everything goes to stdout.
//!
//! One deliberate difference: for `-2147483648` the C tool takes `abs()` of `INT_MIN`
//! (which stays negative) and prints libc's "Unknown error -2147483648"; here the
//! magnitude is used, giving "Unspecified error" like every other code past the table.
//!
//! Nothing here panics; write errors on stdout (a closed pipe) are ignored.

use std::ffi::OsString;
use std::fmt;
use std::io::Write;

/// Why an argument is not an error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodeError {
    /// Not a number in the accepted syntax (the argument as given).
    Unparsable(String),
    /// A number outside the range of a C `int` (the argument as given).
    OutOfRange(String),
}

impl fmt::Display for CodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodeError::Unparsable(s) => write!(f, "ERROR: unable to parse '{s}'"),
            CodeError::OutOfRange(s) => write!(f, "ERROR: '{s}' is out of range"),
        }
    }
}

impl std::error::Error for CodeError {}

/// The usage text (ends with a newline).
pub const USAGE: &str = "\
Usage: fi_strerror FI_ERROR_CODE

Prints the message of a libfabric error code, as fi_strerror() returns it.
FI_ERROR_CODE is a decimal, hexadecimal (0x...) or octal (0...) integer.
A sign is accepted and ignored: the message of the absolute value is shown.
";

/// Parses an error code the way C `strtol(s, &end, 0)` reads it, requiring the whole
/// string to be used and the value to fit a C `int`.
///
/// # Errors
/// [`CodeError::Unparsable`] for anything that is not such a number (including an empty
/// string, trailing characters, `0x` without digits and `8`/`9` in an octal number);
/// [`CodeError::OutOfRange`] for a number outside `i32`.
///
/// ```
/// use ofi_tools::strerror::{parse_code, CodeError};
/// assert_eq!(parse_code("61"), Ok(61));
/// assert_eq!(parse_code("0x100"), Ok(256));
/// assert_eq!(parse_code("-011"), Ok(-9));
/// assert!(matches!(parse_code("12abc"), Err(CodeError::Unparsable(_))));
/// ```
pub fn parse_code(s: &str) -> Result<i32, CodeError> {
    let unparsable = || CodeError::Unparsable(s.to_string());
    // C isspace: space, \t, \n, \v, \f, \r.
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(unparsable());
    }
    // Accumulate with saturation: any overflow is out of range, as strtol's ERANGE is.
    let mut mag: u64 = 0;
    for c in digits.chars() {
        let d = u64::from(c.to_digit(radix).unwrap_or(0));
        mag = mag.saturating_mul(u64::from(radix)).saturating_add(d);
    }
    let value = if neg {
        -(i128::from(mag))
    } else {
        i128::from(mag)
    };
    i32::try_from(value).map_err(|_| CodeError::OutOfRange(s.to_string()))
}

/// Runs the tool on `args` (program name first), writing to `out`; returns the exit
/// status.
pub fn run(args: &[OsString], out: &mut dyn Write) -> i32 {
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if rest.len() != 1 {
        let _ = out.write_all(USAGE.as_bytes());
        return 1;
    }
    if rest[0] == "-h" {
        let _ = out.write_all(USAGE.as_bytes());
        return 0;
    }
    match parse_code(&rest[0]) {
        Ok(code) => {
            let _ = writeln!(out, "{}", ofi::error::strerror(code));
            0
        }
        Err(e) => {
            let _ = write!(out, "{e}\n\n{USAGE}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_strtol() {
        assert_eq!(parse_code("61"), Ok(61));
        assert_eq!(parse_code("-61"), Ok(-61));
        assert_eq!(parse_code("+5"), Ok(5));
        assert_eq!(parse_code("0x100"), Ok(256));
        assert_eq!(parse_code("0X10D"), Ok(269));
        assert_eq!(parse_code("-0x10"), Ok(-16));
        assert_eq!(parse_code("010"), Ok(8));
        assert_eq!(parse_code("0"), Ok(0));
        assert_eq!(parse_code("-0"), Ok(0));
        assert_eq!(parse_code(" \t12"), Ok(12));
        assert_eq!(parse_code("2147483647"), Ok(i32::MAX));
        assert_eq!(parse_code("-2147483648"), Ok(i32::MIN));
        assert_eq!(parse_code("0x7fffffff"), Ok(i32::MAX));
    }

    #[test]
    fn rejects_what_the_c_tool_rejects() {
        for bad in [
            "", "foo", "12abc", "12 ", "0x", "-", "+", "09", "0b11", "--5", "-x", "1.5", "٣",
        ] {
            assert_eq!(
                parse_code(bad),
                Err(CodeError::Unparsable(bad.to_string())),
                "{bad:?}"
            );
        }
        for big in [
            "2147483648",
            "-2147483649",
            "0xffffffff",
            "99999999999999999999999999",
        ] {
            assert_eq!(
                parse_code(big),
                Err(CodeError::OutOfRange(big.to_string())),
                "{big:?}"
            );
        }
        assert_eq!(
            CodeError::Unparsable("foo".into()).to_string(),
            "ERROR: unable to parse 'foo'"
        );
        assert_eq!(
            CodeError::OutOfRange("2147483648".into()).to_string(),
            "ERROR: '2147483648' is out of range"
        );
    }

    fn run_str(args: &[&str]) -> (i32, String) {
        let mut v: Vec<OsString> = vec!["fi_strerror".into()];
        v.extend(args.iter().map(OsString::from));
        let mut out = Vec::new();
        let rc = run(&v, &mut out);
        (rc, String::from_utf8(out).unwrap())
    }

    #[test]
    fn run_outputs() {
        assert_eq!(run_str(&["61"]), (0, "No data available\n".to_string()));
        assert_eq!(run_str(&["-0x100"]), (0, "Unspecified error\n".to_string()));
        assert_eq!(
            run_str(&["0x10D"]).1,
            "Receiver not ready, no receive buffers available\n"
        );
        assert_eq!(run_str(&["300"]).1, "Unspecified error\n");
        assert_eq!(run_str(&["-h"]), (0, USAGE.to_string()));
        assert_eq!(run_str(&[]), (1, USAGE.to_string()));
        assert_eq!(run_str(&["1", "2"]), (1, USAGE.to_string()));
        assert_eq!(run_str(&["--", "5"]), (1, USAGE.to_string()));
        let (rc, out) = run_str(&["foo"]);
        assert_eq!(rc, 1);
        assert_eq!(out, format!("ERROR: unable to parse 'foo'\n\n{USAGE}"));
        let (rc, out) = run_str(&["2147483648"]);
        assert_eq!(rc, 1);
        assert!(
            out.starts_with("ERROR: '2147483648' is out of range\n\nUsage: fi_strerror"),
            "{out}"
        );
        // Only "-h" is help; "--help" is a number that does not parse.
        assert_eq!(run_str(&["--help"]).0, 1);
    }
}
