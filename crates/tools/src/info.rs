//! `fi_info`: show the fabric services, providers and parameters of this system.
//!
//! Compatible with the C tool of libfabric 1.17 (util/info.c) in its options, its
//! name parsing (`|`-separated, case-insensitive; a bad name prints
//! `error: Unrecognized <what>: <name>` and exits with `FI_EINVAL`, 22), its getopt
//! messages (exit 1) and its output shapes:
//! - default: per info `provider:` and the 4-space `fabric:`, `domain:`, `version:`,
//!   `type:`, `protocol:` lines;
//! - `-v`: per info `---` and the [`ofi::tostr::info_to_string`] block; `-i SUBSTR` keeps
//!   only the blocks containing `SUBSTR`;
//! - `-l`: per provider `<name>:` and `    version: M.m`;
//! - `-e` / `-g SUBSTR`: per parameter `# <ENV>: <type>`, `# <help>`, `<ENV>=<value>` when
//!   set, and a blank line;
//! - a getinfo failure prints `fi_getinfo: -<code> (<text>)` on stderr and exits with the
//!   code (61 for `FI_ENODATA`).
//!
//! Additions: `-l` also shows each provider's kind, origin (plugin path or `built-in`)
//! and status, and lists plugin candidates that were not loaded with the reason; `-e`
//! shows where a set value came from and never prints the NUL bytes the C tool writes
//! around unquoted values; a getinfo failure adds a `reason:` line; `--json` prints the
//! same data as JSON; `--explain` prints one line per provider verdict.
//!
//! Deliberate differences: `-h` exits 0 (the C tool exits 1); after a getopt error the
//! usage goes to stderr (the C tool writes it to stdout); `-e` does not need getinfo
//! to succeed; with `-l`, `-v` is ignored; an error code whose low byte is 0 (e.g.
//! `FI_EOTHER`, 256) exits 1 rather than 0. Operands are ignored, as by the C tool.
//!
//! Hints are passed only if one of `-c -m -t -a -p -d -f` was given, starting from
//! [`ofi::Info::hints`] (every mode, every `mr_mode` bit but `BASIC`/`SCALABLE`).
//! Nothing here panics; output errors end the run quietly (a closed pipe) or with
//! status 1.

use std::ffi::OsString;
use std::io::{self, Write};

use serde_json::{json, Value};

use ofi::param::ParamSource;
use ofi::tostr;
use ofi::{AddrFormat, Caps, EpType, Errno, GetinfoFlags, GetinfoRequest, Info, Mode, OpFlags};

use crate::getopt::{self, long_only, spec, GetoptError, OptSpec, Parsed};
use crate::json;

/// The options of `fi_info`, as [`getopt::parse`] reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opt {
    SrcAddr,
    Node,
    Port,
    Caps,
    Mode,
    EpType,
    AddrFormat,
    Provider,
    Domain,
    Fabric,
    Env,
    Getenv,
    Info,
    List,
    Verbose,
    Version,
    Help,
    Json,
    Explain,
}

/// The option table.
const SPECS: &[OptSpec<Opt>] = &[
    spec(Opt::SrcAddr, 's', Some("src_addr"), true),
    spec(Opt::Node, 'n', Some("node"), true),
    spec(Opt::Port, 'P', Some("port"), true),
    spec(Opt::Caps, 'c', Some("caps"), true),
    spec(Opt::Mode, 'm', Some("mode"), true),
    spec(Opt::EpType, 't', Some("ep_type"), true),
    spec(Opt::AddrFormat, 'a', Some("addr_format"), true),
    spec(Opt::Provider, 'p', Some("provider"), true),
    spec(Opt::Domain, 'd', Some("domain"), true),
    spec(Opt::Fabric, 'f', Some("fabric"), true),
    spec(Opt::Env, 'e', Some("env"), false),
    spec(Opt::Getenv, 'g', Some("getenv"), true),
    spec(Opt::Info, 'i', Some("info"), true),
    spec(Opt::List, 'l', Some("list"), false),
    spec(Opt::Verbose, 'v', Some("verbose"), false),
    long_only(Opt::Version, "version", false),
    spec(Opt::Help, 'h', Some("help"), false),
    long_only(Opt::Json, "json", false),
    long_only(Opt::Explain, "explain", false),
];

/// The help text (ends with a newline).
pub const USAGE: &str = "\
Usage: fi_info [OPTIONS]
Show the fabric services this system offers: providers, fabrics, domains and
endpoint types, with their attributes, and the parameters that tune them.

  -s, --src_addr=ADDR          local (source) node name or address; sets FI_SOURCE
  -n, --node=NAME              destination node name or address
  -P, --port=PORT              service (port number)
  -c, --caps=CAP1|CAP2...      capabilities to ask for, e.g. FI_MSG|FI_RMA
  -m, --mode=MODE1|MODE2...    modes the application supports (default: all)
  -t, --ep_type=EPTYPE         one endpoint type: FI_EP_MSG, FI_EP_DGRAM, FI_EP_RDM...
  -a, --addr_format=FMT        address format: FI_SOCKADDR_IN, FI_ADDR_STR...
  -p, --provider=PROV          provider name, e.g. tcp or tcp;ofi_rxm
  -d, --domain=DOMAIN          domain name
  -f, --fabric=FABRIC          fabric name
  -e, --env                    list every parameter (environment variable)
  -g, --getenv=SUBSTR          list the parameters whose name contains SUBSTR
  -i, --info=SUBSTR            verbose, keeping only entries whose text has SUBSTR
  -l, --list                   list the providers, where they come from, and
                               plugin files that could not be loaded
  -v, --verbose                print every attribute of each entry
      --json                   print the same data as JSON
      --explain                say why each provider was kept, filtered or rejected
      --version                print version information and exit
  -h, --help                   print this help and exit

Names are case-insensitive; lists of names are separated by '|'.
";

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Print the help.
    Help,
    /// Print the versions.
    Version,
    /// List the providers (`-l`).
    List,
    /// List the parameters (`-e`, or `-g SUBSTR` with the filter).
    Env(Option<String>),
    /// Call getinfo and print the results (the default).
    Getinfo,
}

/// A parsed `fi_info` command line.
#[derive(Clone, Debug, PartialEq)]
pub struct InfoArgs {
    /// What to do.
    pub action: Action,
    /// The getinfo call to make, for the current API version: `node` from `-n` (or
    /// `-s`, which adds `FI_SOURCE` to the flags), `service` from `-P`, and hints only
    /// if a hint option was given.
    pub request: GetinfoRequest,
    /// `-v` (or `-i`).
    pub verbose: bool,
    /// `-i SUBSTR`: only verbose blocks containing it.
    pub info_filter: Option<String>,
    /// `--json`.
    pub json: bool,
    /// `--explain`.
    pub explain: bool,
}

/// Why a command line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// A getopt-level error (exit status 1, followed by the usage).
    Getopt(GetoptError),
    /// An unknown name in an option's value (exit status 22): what kind of name, and
    /// the name.
    BadName(&'static str, String),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Getopt(e) => write!(f, "fi_info: {e}"),
            ArgError::BadName(what, name) => write!(f, "error: Unrecognized {what}: {name}"),
        }
    }
}

impl std::error::Error for ArgError {}

impl ArgError {
    /// The exit status for this error.
    pub fn status(&self) -> i32 {
        match self {
            ArgError::Getopt(_) => 1,
            ArgError::BadName(..) => Errno::EINVAL.0,
        }
    }
}

/// Parses a `|`-separated list, each name looked up with `lookup`; empty items are
/// skipped (the C tool splits with `strtok`).
fn name_list<F>(
    list: &str,
    what: &'static str,
    lookup: impl Fn(&str) -> Option<F>,
    mut acc: F,
) -> Result<F, ArgError>
where
    F: std::ops::BitOrAssign,
{
    for tok in list.split('|').filter(|t| !t.is_empty()) {
        acc |= lookup(tok).ok_or_else(|| ArgError::BadName(what, tok.to_string()))?;
    }
    Ok(acc)
}

/// A capability name; `FI_MORE` and `FI_PEEK`, which the C tool also takes, are
/// operation flags that share the capability bit space.
fn cap_from_name(name: &str) -> Option<Caps> {
    Caps::from_name(name).or_else(|| {
        OpFlags::from_name(name)
            .filter(|f| !f.is_empty() && (OpFlags::MORE | OpFlags::PEEK).contains(*f))
            .map(|f| Caps::from_bits_retain(f.bits()))
    })
}

/// Parses the arguments that follow the program name.
///
/// `-h` and `--version` act as soon as they are seen, like the C tool: options after
/// them are not checked.
///
/// # Errors
/// [`ArgError`] for the first malformed option or unknown name.
pub fn parse_args(args: &[String]) -> Result<InfoArgs, ArgError> {
    let parsed = getopt::parse(SPECS, args).map_err(ArgError::Getopt)?;
    let mut a = InfoArgs {
        action: Action::Getinfo,
        request: GetinfoRequest::new(ofi::API_VERSION),
        verbose: false,
        info_filter: None,
        json: false,
        explain: false,
    };
    let mut hints = Info::hints();
    let mut use_hints = false;
    let mut list = false;
    let mut env: Option<Option<String>> = None;
    for item in parsed {
        let Parsed::Opt(key, value) = item else {
            continue; // operands are ignored, as by the C tool
        };
        let v = value.unwrap_or_default();
        match key {
            Opt::SrcAddr => {
                a.request.node = Some(v);
                a.request.flags |= GetinfoFlags::SOURCE;
            }
            Opt::Node => a.request.node = Some(v),
            Opt::Port => a.request.service = Some(v),
            Opt::Caps => {
                hints.caps = name_list(&v, "capability", cap_from_name, Caps::empty())?;
                use_hints = true;
            }
            Opt::Mode => {
                hints.mode = name_list(&v, "mode", Mode::from_name, Mode::empty())?;
                use_hints = true;
            }
            Opt::EpType => {
                hints.ep_attr.ep_type = EpType::from_name(&v)
                    .ok_or_else(|| ArgError::BadName("endpoint type", v.clone()))?;
                use_hints = true;
            }
            Opt::AddrFormat => {
                hints.addr_format = AddrFormat::from_name(&v)
                    .ok_or_else(|| ArgError::BadName("address format", v.clone()))?;
                use_hints = true;
            }
            Opt::Provider => {
                hints.fabric_attr.prov_name = Some(v);
                use_hints = true;
            }
            Opt::Domain => {
                hints.domain_attr.name = Some(v);
                use_hints = true;
            }
            Opt::Fabric => {
                hints.fabric_attr.name = Some(v);
                use_hints = true;
            }
            Opt::Env if env.is_none() => env = Some(None),
            Opt::Getenv => env = Some(Some(v)),
            Opt::Info => {
                a.verbose = true;
                a.info_filter = Some(v);
            }
            Opt::List => list = true,
            Opt::Verbose => a.verbose = true,
            Opt::Version => {
                a.action = Action::Version;
                return Ok(a);
            }
            Opt::Help => {
                a.action = Action::Help;
                return Ok(a);
            }
            Opt::Json => a.json = true,
            Opt::Explain => a.explain = true,
            // `-e` after `-g` keeps the `-g` filter.
            Opt::Env => {}
        }
    }
    if use_hints {
        a.request.hints = Some(hints);
    }
    a.action = if list {
        Action::List
    } else if let Some(filter) = env {
        Action::Env(filter)
    } else {
        Action::Getinfo
    };
    Ok(a)
}

/// The `--version` lines.
pub fn version_text() -> String {
    format!(
        "fi_info: {}\nlibfabric: {} (ofi-rs)\nlibfabric api: {}\n",
        env!("CARGO_PKG_VERSION"),
        crate::OFI_VERSION,
        ofi::API_VERSION
    )
}

/// The default (non-verbose) listing of one info.
pub fn summary_text(i: &Info) -> String {
    format!(
        "provider: {}\n    fabric: {}\n    domain: {}\n    version: {}\n    type: {}\n    protocol: {}\n",
        i.prov_name(),
        i.fabric_attr.name.as_deref().unwrap_or("(null)"),
        i.domain_attr.name.as_deref().unwrap_or("(null)"),
        i.fabric_attr.prov_version,
        tostr::ep_type_str(i.ep_attr.ep_type),
        tostr::protocol_str(i.ep_attr.protocol),
    )
}

/// Quotes a parameter value for the `ENV=value` line: in double quotes, with shell
/// escapes, when it contains whitespace or a quote; as is otherwise.
pub fn quote_value(v: &str) -> String {
    if !v.chars().any(|c| c.is_whitespace() || c == '"') {
        return v.to_string();
    }
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// The `-e` text of one parameter (ends with the blank line). A `# default:` line
/// follows the help when the parameter has a default; the `ENV=value` line and a
/// `# source:` line follow only when the value was set (in the environment or a
/// configuration file).
pub fn param_text(p: &ofi::param::ParamEntry) -> String {
    let mut s = format!("# {}: {}\n", p.env_name, p.def.ty.label());
    match &p.def.prov {
        Some(prov) => s.push_str(&format!("# {prov}: {}\n", p.def.help)),
        None => s.push_str(&format!("# {}\n", p.def.help)),
    }
    if let Some(default) = &p.def.default {
        s.push_str(&format!("# default: {default}\n"));
    }
    let set = matches!(p.source, ParamSource::Env | ParamSource::Config(_));
    if let (true, Some(v)) = (set, &p.value) {
        s.push_str(&format!("{}={}\n", p.env_name, quote_value(v)));
        s.push_str(&format!("# source: {}\n", p.source));
    }
    s.push('\n');
    s
}

/// Writes a JSON value, pretty-printed, and a newline.
fn write_json(out: &mut dyn Write, v: &Value) -> io::Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

fn do_list(a: &InfoArgs, out: &mut dyn Write) -> io::Result<i32> {
    let reg = ofi::registry();
    let providers = reg.providers();
    let report = reg.load_report();
    let unloaded: Vec<_> = report
        .iter()
        .filter(|r| {
            !matches!(
                r.outcome,
                ofi::loader::LoadOutcome::Loaded { .. }
                    | ofi::loader::LoadOutcome::Superseded { .. }
            )
        })
        .collect();
    if a.json {
        let v = json!({
            "providers": providers.iter().map(json::provider).collect::<Vec<_>>(),
            "load_report": report.iter().map(json::load_record).collect::<Vec<_>>(),
        });
        write_json(out, &v)?;
        return Ok(0);
    }
    for p in &providers {
        writeln!(out, "{}:", p.name)?;
        writeln!(out, "    version: {}", p.version)?;
        writeln!(out, "    kind: {}", json::kind_name(p.kind))?;
        match &p.path {
            Some(path) => writeln!(out, "    path: {}", path.display())?,
            None => writeln!(out, "    path: built-in")?,
        }
        match &p.superseded_by {
            Some(by) => writeln!(out, "    status: superseded by {by}")?,
            None => writeln!(out, "    status: active")?,
        }
    }
    for r in unloaded {
        writeln!(out, "# not loaded: {}: {}", r.path.display(), r.outcome)?;
    }
    Ok(0)
}

fn do_env(a: &InfoArgs, filter: Option<&str>, out: &mut dyn Write) -> io::Result<i32> {
    // Building the registry lets every provider declare its parameters first.
    let _ = ofi::registry();
    let needle = filter.map(str::to_ascii_lowercase);
    let params: Vec<_> = ofi::param::list()
        .into_iter()
        .filter(|p| {
            needle
                .as_deref()
                .is_none_or(|n| p.env_name.to_ascii_lowercase().contains(n))
        })
        .collect();
    if a.json {
        write_json(out, &Value::Array(params.iter().map(json::param).collect()))?;
        return Ok(0);
    }
    for p in &params {
        out.write_all(param_text(p).as_bytes())?;
    }
    Ok(0)
}

/// The exit status for an error code: the code itself when it is a valid, non-zero
/// status, 1 otherwise.
fn status_of(code: Errno) -> i32 {
    if (1..=255).contains(&code.0) {
        code.0
    } else {
        1
    }
}

fn do_getinfo(a: &InfoArgs, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<i32> {
    let (result, verdicts) = if a.explain {
        ofi::getinfo_explain(&a.request)
    } else {
        (ofi::registry().getinfo(&a.request), Vec::new())
    };

    if a.explain {
        if a.json {
            let v = json!({
                "status": result.as_ref().map_or_else(|e| e.code().to_status(), |_| 0),
                "count": result.as_ref().map_or(0, Vec::len),
                "verdicts": verdicts.iter().map(json::verdict).collect::<Vec<_>>(),
            });
            write_json(out, &v)?;
        } else {
            for v in &verdicts {
                writeln!(out, "{v}")?;
            }
            for r in ofi::registry()
                .load_report()
                .iter()
                .filter(|r| matches!(r.outcome, ofi::loader::LoadOutcome::InitFailed { .. }))
            {
                writeln!(out, "{}: not loaded: {}", r.path.display(), r.outcome)?;
            }
        }
    }

    let infos = match result {
        Ok(infos) => infos,
        Err(e) => {
            let code = e.code();
            writeln!(err, "fi_getinfo: {} ({})", code.to_status(), code.message())?;
            let reason = if !e.message().is_empty() {
                e.message().to_string()
            } else if code == Errno::ENODATA {
                let verdicts = if verdicts.is_empty() {
                    ofi::getinfo_explain(&a.request).1
                } else {
                    verdicts
                };
                ofi::registry::explain_nodata(&verdicts)
            } else {
                String::new()
            };
            if !reason.is_empty() {
                writeln!(err, "reason: {reason}")?;
            }
            if a.json && !a.explain {
                let v = json!({ "error": {
                    "code": code.0,
                    "name": code.name(),
                    "message": code.message(),
                    "reason": reason,
                }});
                write_json(out, &v)?;
            }
            return Ok(status_of(code));
        }
    };
    if a.explain {
        return Ok(0);
    }

    let keep = |i: &Info| -> Option<String> {
        let text = tostr::info_to_string(i);
        match &a.info_filter {
            Some(f) if !text.contains(f.as_str()) => None,
            _ => Some(text),
        }
    };
    if a.json {
        let items: Vec<Value> = if a.verbose {
            infos
                .iter()
                .filter(|i| keep(i).is_some())
                .map(json::info)
                .collect()
        } else {
            infos.iter().map(json::info_summary).collect()
        };
        write_json(out, &Value::Array(items))?;
        return Ok(0);
    }
    for i in &infos {
        if a.verbose {
            if let Some(text) = keep(i) {
                write!(out, "---\n{text}")?;
            }
        } else {
            out.write_all(summary_text(i).as_bytes())?;
        }
    }
    Ok(0)
}

fn run_inner(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> io::Result<i32> {
    let a = match parse_args(args) {
        Ok(a) => a,
        Err(e) => {
            writeln!(err, "{e}")?;
            if matches!(e, ArgError::Getopt(_)) {
                err.write_all(USAGE.as_bytes())?;
            }
            return Ok(e.status());
        }
    };
    match &a.action {
        Action::Help => {
            out.write_all(USAGE.as_bytes())?;
            Ok(0)
        }
        Action::Version => {
            if a.json {
                write_json(
                    out,
                    &json!({
                        "fi_info": env!("CARGO_PKG_VERSION"),
                        "libfabric": crate::OFI_VERSION,
                        "api_version": ofi::API_VERSION.to_string(),
                    }),
                )?;
            } else {
                out.write_all(version_text().as_bytes())?;
            }
            Ok(0)
        }
        Action::List => do_list(&a, out),
        Action::Env(filter) => do_env(&a, filter.as_deref(), out),
        Action::Getinfo => do_getinfo(&a, out, err),
    }
}

/// Runs `fi_info` on `args` (program name first); returns the exit status.
pub fn run(args: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let status = run_inner(&rest, out, err).and_then(|s| {
        out.flush()?;
        Ok(s)
    });
    match status {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            let _ = writeln!(err, "fi_info: write error: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi::param::{ParamDef, ParamEntry, ParamType};

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_hint_options_means_no_hints() {
        let a = parse_args(&args(&["-n", "host", "-P", "7", "-v"])).unwrap();
        assert_eq!(a.request.hints, None);
        assert_eq!(a.request.node.as_deref(), Some("host"));
        assert_eq!(a.request.service.as_deref(), Some("7"));
        assert!(a.request.flags.is_empty());
        assert!(a.verbose);
        assert_eq!(a.action, Action::Getinfo);
    }

    #[test]
    fn hint_options_fill_the_default_hints() {
        let a = parse_args(&args(&[
            "-c",
            "fi_msg|FI_rma",
            "-t",
            "fi_ep_rdm",
            "-a",
            "FI_SOCKADDR_IN6",
            "-p",
            "tcp;ofi_rxm",
            "-d",
            "lo",
            "-f",
            "127.0.0.0/8",
        ]))
        .unwrap();
        let h = a.request.hints.unwrap();
        assert_eq!(h.caps, Caps::MSG | Caps::RMA);
        assert_eq!(h.ep_attr.ep_type, EpType::Rdm);
        assert_eq!(h.addr_format, AddrFormat::SOCKADDR_IN6);
        assert_eq!(h.fabric_attr.prov_name.as_deref(), Some("tcp;ofi_rxm"));
        assert_eq!(h.domain_attr.name.as_deref(), Some("lo"));
        assert_eq!(h.fabric_attr.name.as_deref(), Some("127.0.0.0/8"));
        // Defaults of the C tool stay: every mode, mr_mode without BASIC/SCALABLE.
        assert_eq!(h.mode, Mode::all());
        assert_eq!(h.domain_attr.mode, Mode::all());
        assert_eq!(h.domain_attr.mr_mode, Info::hints().domain_attr.mr_mode);
    }

    #[test]
    fn mode_resets_the_default() {
        let h = parse_args(&args(&["-m", "FI_CONTEXT|fi_context2"]))
            .unwrap()
            .request
            .hints
            .unwrap();
        assert_eq!(h.mode, Mode::CONTEXT | Mode::CONTEXT2);
        let h = parse_args(&args(&["-m", ""]))
            .unwrap()
            .request
            .hints
            .unwrap();
        assert_eq!(h.mode, Mode::empty());
    }

    #[test]
    fn caps_accept_more_and_peek() {
        let h = parse_args(&args(&["-c", "FI_MSG|FI_MORE|FI_PEEK|"]))
            .unwrap()
            .request
            .hints
            .unwrap();
        assert_eq!(
            h.caps.bits(),
            Caps::MSG.bits() | OpFlags::MORE.bits() | OpFlags::PEEK.bits()
        );
        let e = parse_args(&args(&["-c", "FI_INJECT"])).unwrap_err();
        assert_eq!(e, ArgError::BadName("capability", "FI_INJECT".into()));
    }

    #[test]
    fn src_addr_sets_source() {
        let a = parse_args(&args(&["-s", "127.0.0.1"])).unwrap();
        assert_eq!(a.request.node.as_deref(), Some("127.0.0.1"));
        assert_eq!(a.request.flags, GetinfoFlags::SOURCE);
        assert_eq!(a.request.hints, None);
    }

    #[test]
    fn bad_names_use_the_c_messages() {
        let cases = [
            (
                vec!["-c", "FI_MSG|FI_BOGUS|x"],
                "error: Unrecognized capability: FI_BOGUS",
            ),
            (vec!["-m", "FI_BOGUS"], "error: Unrecognized mode: FI_BOGUS"),
            (
                vec!["-t", "FI_EP_BOGUS"],
                "error: Unrecognized endpoint type: FI_EP_BOGUS",
            ),
            (
                vec!["-a", "BOGUS"],
                "error: Unrecognized address format: BOGUS",
            ),
        ];
        for (argv, msg) in cases {
            let e = parse_args(&args(&argv)).unwrap_err();
            assert_eq!(e.to_string(), msg);
            assert_eq!(e.status(), 22);
        }
        let e = parse_args(&args(&["-x"])).unwrap_err();
        assert_eq!(e.to_string(), "fi_info: invalid option -- 'x'");
        assert_eq!(e.status(), 1);
    }

    #[test]
    fn actions() {
        assert_eq!(
            parse_args(&args(&["-l", "-v"])).unwrap().action,
            Action::List
        );
        assert_eq!(
            parse_args(&args(&["-e"])).unwrap().action,
            Action::Env(None)
        );
        assert_eq!(
            parse_args(&args(&["-g", "tcp"])).unwrap().action,
            Action::Env(Some("tcp".into()))
        );
        // --version and -h act when seen: later errors are not reached.
        assert_eq!(
            parse_args(&args(&["--version", "-c", "BOGUS"]))
                .unwrap()
                .action,
            Action::Version
        );
        assert!(parse_args(&args(&["-c", "BOGUS", "--version"])).is_err());
        assert_eq!(parse_args(&args(&["-h"])).unwrap().action, Action::Help);
        let a = parse_args(&args(&["-i", "tcp"])).unwrap();
        assert!(a.verbose);
        assert_eq!(a.info_filter.as_deref(), Some("tcp"));
        let a = parse_args(&args(&["--json", "--explain", "extra"])).unwrap();
        assert!(a.json && a.explain);
    }

    #[test]
    fn summary_shape() {
        let mut i = Info::new().with_provider("tcp").with_ep_type(EpType::Msg);
        i.fabric_attr.name = Some("127.0.0.1/32".into());
        i.domain_attr.name = Some("lo".into());
        i.fabric_attr.prov_version = ofi::Version::new(1, 0);
        i.ep_attr.protocol = ofi::Protocol::SOCK_TCP;
        assert_eq!(
            summary_text(&i),
            "provider: tcp\n    fabric: 127.0.0.1/32\n    domain: lo\n    version: 1.0\n    type: FI_EP_MSG\n    protocol: FI_PROTO_SOCK_TCP\n"
        );
    }

    #[test]
    fn param_lines() {
        let mut p = ParamEntry {
            def: ParamDef {
                prov: Some("tcp".into()),
                name: "iface".into(),
                ty: ParamType::String,
                help: "Specify interface name".into(),
                default: None,
            },
            env_name: "FI_TCP_IFACE".into(),
            value: None,
            source: ParamSource::Unset,
        };
        assert_eq!(
            param_text(&p),
            "# FI_TCP_IFACE: String\n# tcp: Specify interface name\n\n"
        );
        p.value = Some("eth0".into());
        p.source = ParamSource::Env;
        assert_eq!(
            param_text(&p),
            "# FI_TCP_IFACE: String\n# tcp: Specify interface name\nFI_TCP_IFACE=eth0\n# source: environment\n\n"
        );
        p.value = Some("eth0 x".into());
        assert!(param_text(&p).contains("FI_TCP_IFACE=\"eth0 x\"\n"));
        assert!(!param_text(&p).contains('\0'));
        // A default is not "set": no value line, but the default is shown.
        p.source = ParamSource::Default;
        p.def.default = Some("lo".into());
        assert_eq!(
            param_text(&p),
            "# FI_TCP_IFACE: String\n# tcp: Specify interface name\n# default: lo\n\n"
        );
        p.def.default = None;
        p.source = ParamSource::Config("/etc/ofi/plugins.toml".into());
        assert!(param_text(&p).ends_with("\n# source: /etc/ofi/plugins.toml\n\n"));
        assert_eq!(quote_value("a\"b $c"), "\"a\\\"b \\$c\"");
        assert_eq!(quote_value(""), "");
    }

    #[test]
    fn version_lines() {
        let v = version_text();
        let lines: Vec<&str> = v.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], format!("fi_info: {}", env!("CARGO_PKG_VERSION")));
        assert!(lines[1].starts_with("libfabric: ") && lines[1].ends_with(" (ofi-rs)"));
        assert_eq!(lines[2], "libfabric api: 1.17");
    }

    #[test]
    fn status_codes() {
        assert_eq!(status_of(Errno::ENODATA), 61);
        assert_eq!(status_of(Errno::EOTHER), 1);
        assert_eq!(status_of(Errno(0)), 1);
    }
}
