//! Command-line option parsing in the manner of GNU `getopt_long`, which the C tools use.
//!
//! Accepted forms: `-x`, clustered short options (`-lv`), a short option's argument
//! attached (`-cFI_MSG`) or as the next word (`-c FI_MSG`), `--name`, `--name=value`,
//! `--name value`, and unambiguous prefixes of long names (`--verb` for `--verbose`).
//! `--` ends the options; a lone `-` and every other word are operands, which may appear
//! anywhere (GNU's argument permutation).
//!
//! Errors carry the text glibc prints after `<program>: `, e.g. `invalid option -- 'x'`
//! or `option '--ver' is ambiguous; possibilities: '--verbose' '--version'`.
//! Nothing here panics.

use std::fmt;

/// One option the program accepts, named by the program's `key` for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptSpec<K> {
    /// What [`Parsed::Opt`] reports for this option (a value of the program's own
    /// option enum).
    pub key: K,
    /// The short letter, if any (`'c'` for `-c`).
    pub short: Option<char>,
    /// The long name without dashes, if any (`"caps"` for `--caps`).
    pub long: Option<&'static str>,
    /// Whether the option takes a (required) argument.
    pub takes_arg: bool,
}

/// The option `-short` (and `--long` when named), taking an argument or not.
pub const fn spec<K>(
    key: K,
    short: char,
    long: Option<&'static str>,
    takes_arg: bool,
) -> OptSpec<K> {
    OptSpec {
        key,
        short: Some(short),
        long,
        takes_arg,
    }
}

/// The option `--long`, without a short letter, taking an argument or not.
pub const fn long_only<K>(key: K, long: &'static str, takes_arg: bool) -> OptSpec<K> {
    OptSpec {
        key,
        short: None,
        long: Some(long),
        takes_arg,
    }
}

/// One parsed command-line item, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<K> {
    /// An option: its spec's key, and its argument if it takes one.
    Opt(K, Option<String>),
    /// An operand (a word that is not an option).
    Operand(String),
}

/// A malformed command line; `Display` gives glibc's text (without the program name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GetoptError {
    /// A short option that is not in the table.
    InvalidShort(char),
    /// A long option that matches no name in the table (the word as given, without `--`).
    UnrecognizedLong(String),
    /// A long prefix matching several names.
    Ambiguous(String, Vec<&'static str>),
    /// A short option that needs an argument got none.
    ShortNeedsArg(char),
    /// A long option that needs an argument got none.
    LongNeedsArg(&'static str),
    /// A long option without argument was given `=value`.
    LongNoArg(&'static str),
}

impl fmt::Display for GetoptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GetoptError::InvalidShort(c) => write!(f, "invalid option -- '{c}'"),
            GetoptError::UnrecognizedLong(w) => write!(f, "unrecognized option '--{w}'"),
            GetoptError::Ambiguous(w, names) => {
                write!(f, "option '--{w}' is ambiguous; possibilities:")?;
                for n in names {
                    write!(f, " '--{n}'")?;
                }
                Ok(())
            }
            GetoptError::ShortNeedsArg(c) => write!(f, "option requires an argument -- '{c}'"),
            GetoptError::LongNeedsArg(n) => write!(f, "option '--{n}' requires an argument"),
            GetoptError::LongNoArg(n) => write!(f, "option '--{n}' doesn't allow an argument"),
        }
    }
}

impl std::error::Error for GetoptError {}

/// Finds the long option `word` (exact name, else a unique prefix).
fn find_long<K>(specs: &[OptSpec<K>], word: &str) -> Result<usize, GetoptError> {
    if let Some(i) = specs.iter().position(|s| s.long == Some(word)) {
        return Ok(i);
    }
    let matches: Vec<usize> = specs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.long.is_some_and(|l| l.starts_with(word)))
        .map(|(i, _)| i)
        .collect();
    match matches.as_slice() {
        [] => Err(GetoptError::UnrecognizedLong(word.to_string())),
        [one] => Ok(*one),
        many => Err(GetoptError::Ambiguous(
            word.to_string(),
            many.iter().filter_map(|&i| specs[i].long).collect(),
        )),
    }
}

/// Parses `args` (without the program name) against `specs`.
///
/// # Errors
/// The first malformed option, as a [`GetoptError`].
pub fn parse<K: Copy>(
    specs: &[OptSpec<K>],
    args: &[String],
) -> Result<Vec<Parsed<K>>, GetoptError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            out.extend(args[i..].iter().cloned().map(Parsed::Operand));
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (word, inline) = match body.split_once('=') {
                Some((w, v)) => (w, Some(v.to_string())),
                None => (body, None),
            };
            let idx = find_long(specs, word).map_err(|e| match e {
                // glibc quotes the whole word, `=value` included, when nothing matches.
                GetoptError::UnrecognizedLong(_) => GetoptError::UnrecognizedLong(body.to_string()),
                other => other,
            })?;
            let spec = specs[idx];
            let name = spec.long.unwrap_or("");
            if spec.takes_arg {
                let value = match inline {
                    Some(v) => v,
                    None if i < args.len() => {
                        i += 1;
                        args[i - 1].clone()
                    }
                    None => return Err(GetoptError::LongNeedsArg(name)),
                };
                out.push(Parsed::Opt(spec.key, Some(value)));
            } else if inline.is_some() {
                return Err(GetoptError::LongNoArg(name));
            } else {
                out.push(Parsed::Opt(spec.key, None));
            }
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            out.push(Parsed::Operand(arg.clone()));
            continue;
        };
        for (pos, c) in cluster.char_indices() {
            let spec = specs
                .iter()
                .find(|s| s.short == Some(c))
                .ok_or(GetoptError::InvalidShort(c))?;
            if !spec.takes_arg {
                out.push(Parsed::Opt(spec.key, None));
                continue;
            }
            let rest = &cluster[pos + c.len_utf8()..];
            let value = if !rest.is_empty() {
                rest.to_string()
            } else if i < args.len() {
                i += 1;
                args[i - 1].clone()
            } else {
                return Err(GetoptError::ShortNeedsArg(c));
            };
            out.push(Parsed::Opt(spec.key, Some(value)));
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keyed by their index.
    const SPECS: &[OptSpec<usize>] = &[
        spec(0, 'c', Some("caps"), true),
        spec(1, 'l', Some("list"), false),
        spec(2, 'v', Some("verbose"), false),
        long_only(3, "version", false),
        long_only(4, "json", false),
    ];

    fn p(args: &[&str]) -> Result<Vec<Parsed<usize>>, GetoptError> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(SPECS, &v)
    }

    fn opt(i: usize, v: Option<&str>) -> Parsed<usize> {
        Parsed::Opt(i, v.map(str::to_string))
    }

    #[test]
    fn short_forms() {
        assert_eq!(p(&["-l"]).unwrap(), [opt(1, None)]);
        assert_eq!(p(&["-lv"]).unwrap(), [opt(1, None), opt(2, None)]);
        assert_eq!(p(&["-cFI_MSG"]).unwrap(), [opt(0, Some("FI_MSG"))]);
        assert_eq!(p(&["-c", "FI_MSG"]).unwrap(), [opt(0, Some("FI_MSG"))]);
        assert_eq!(
            p(&["-lcX", "y"]).unwrap(),
            [opt(1, None), opt(0, Some("X")), Parsed::Operand("y".into())]
        );
        // The argument may itself look like an option.
        assert_eq!(p(&["-c", "-l"]).unwrap(), [opt(0, Some("-l"))]);
    }

    #[test]
    fn long_forms() {
        assert_eq!(p(&["--caps=A|B"]).unwrap(), [opt(0, Some("A|B"))]);
        assert_eq!(p(&["--caps", "A"]).unwrap(), [opt(0, Some("A"))]);
        assert_eq!(p(&["--caps="]).unwrap(), [opt(0, Some(""))]);
        assert_eq!(p(&["--verb"]).unwrap(), [opt(2, None)]);
        assert_eq!(p(&["--version"]).unwrap(), [opt(3, None)]);
        assert_eq!(p(&["--j"]).unwrap(), [opt(4, None)]);
    }

    #[test]
    fn operands_and_terminator() {
        assert_eq!(
            p(&["x", "-l", "-", "--", "-v"]).unwrap(),
            [
                Parsed::Operand("x".into()),
                opt(1, None),
                Parsed::Operand("-".into()),
                Parsed::Operand("-v".into())
            ]
        );
    }

    #[test]
    fn errors_match_glibc_text() {
        for (args, text) in [
            (&["-x"], "invalid option -- 'x'"),
            (&["-c"], "option requires an argument -- 'c'"),
            (&["--caps"], "option '--caps' requires an argument"),
            (&["--list=x"], "option '--list' doesn't allow an argument"),
            (&["--bogus"], "unrecognized option '--bogus'"),
            (&["--bogus=1"], "unrecognized option '--bogus=1'"),
            (
                &["--ver"],
                "option '--ver' is ambiguous; possibilities: '--verbose' '--version'",
            ),
        ] {
            assert_eq!(p(args).unwrap_err().to_string(), text, "{args:?}");
        }
        // The first error wins, even after good options.
        assert_eq!(
            p(&["-l", "-q", "-z"]).unwrap_err(),
            GetoptError::InvalidShort('q')
        );
    }
}
