//! `fi_pingpong` (latency: one message each way at a time) and `fi_bw` (throughput: a
//! window of messages in flight, then one acknowledgement), over any provider and
//! endpoint type (`dgram`, `rdm`, `msg`).
//!
//! Both follow the C `fi_pingpong`'s command line, defaults and result table (see
//! [`format`](mod@format)): a server is started without an address, a client with the server's
//! address; `-p -e -d -f -s -B -P -I -S -c -m -v -6 -h`. `-S` takes one size, a
//! comma-separated list (suffixes `k`, `m`, `g`), or `all`. Beyond C:
//! - `--self`: run server and client as two processes of this host (the tool re-executes
//!   itself as the client and reaps it); the provider defaults to the first getinfo result
//!   for the endpoint type;
//! - `--json`: one JSON object per size row instead of the table;
//! - `--pin CPU_A,CPU_B`: the server runs on CPU_A, the client on CPU_B (with `--self`
//!   the default is two different CPUs when this process may use two);
//! - `--timeout SECS`: the bound of every wait on a reliable endpoint (default 10);
//! - `fi_bw` only: `-W N` / `--window N`, messages in flight (default 64);
//! - `fi_bw` only: `--threads N`, the message rate of N threads on one scalable
//!   endpoint pair of this process, one transmit and one receive context each
//!   ([`threads`]; shm by default).
//!
//! Differences from C, on purpose: the control protocol is ours ([`ctrl`]); the server
//! follows the client's sizes and iteration count; a bad `-S` or `-I` value is an error
//! (status 1) instead of a warning; a size above `max_msg_size` given explicitly is an
//! error. The exit status of a failure is the error's code (e.g. 111 for a refused
//! connection), as C's. Datagram losses show in the `#ack` column (`-98` for 98 of 100).
//!
//! Nothing here panics on bad input, an absent peer or provider errors; every wait is
//! bounded.

pub mod bench;
pub mod ctrl;
pub mod format;
pub mod pin;
pub mod session;
pub mod threads;

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use ofi::EpType;

use crate::getopt::{self, long_only, spec, GetoptError, OptSpec, Parsed};

/// The default control port.
pub const DEFAULT_PORT: u16 = 47592;

/// Which benchmark a binary runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `fi_pingpong`: latency.
    PingPong,
    /// `fi_bw`: throughput with a window of messages in flight.
    Bw,
}

impl Tool {
    /// The program name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::PingPong => "fi_pingpong",
            Tool::Bw => "fi_bw",
        }
    }
}

/// Which sizes to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// 64, 256, 1k, 4k, 64k, 1m (up to `max_msg_size`).
    Default,
    /// 0, 1, 2, 3, 4, 6, 8, 12, … up to 6m (and `max_msg_size`).
    All,
    /// These sizes.
    List(Vec<usize>),
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Opts {
    /// `-B`: the local control port (server default 47592, client: any).
    pub src_port: Option<u16>,
    /// `-P`: the server's control port.
    pub dst_port: u16,
    /// `-d`: domain name.
    pub domain: Option<String>,
    /// `-f`: fabric name.
    pub fabric: Option<String>,
    /// `-s`: source address (node passed to getinfo with `FI_SOURCE`).
    pub src_addr: Option<String>,
    /// `-p`: provider.
    pub provider: Option<String>,
    /// `-e`: endpoint type.
    pub ep_type: EpType,
    /// `-I`: iterations (messages per size).
    pub iters: u64,
    /// `-S`.
    pub sizes: Sizes,
    /// `-c`: check every payload.
    pub integrity: bool,
    /// `-m tagged`.
    pub tagged: bool,
    /// `-v`.
    pub verbose: bool,
    /// `-6`.
    pub ipv6: bool,
    /// `-h`.
    pub help: bool,
    /// `--json`.
    pub json: bool,
    /// `--self`.
    pub self_run: bool,
    /// `--pin A,B` (server CPU, client CPU).
    pub pin: Option<(usize, usize)>,
    /// `--timeout`.
    pub timeout: Duration,
    /// `-W` (fi_bw).
    pub window: usize,
    /// `--threads` (fi_bw): run [`threads`] with this many threads.
    pub threads: Option<usize>,
    /// The server's address (client only).
    pub server: Option<String>,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            src_port: None,
            dst_port: DEFAULT_PORT,
            domain: None,
            fabric: None,
            src_addr: None,
            provider: None,
            ep_type: EpType::Dgram,
            iters: 10,
            sizes: Sizes::Default,
            integrity: false,
            tagged: false,
            verbose: false,
            ipv6: false,
            help: false,
            json: false,
            self_run: false,
            pin: None,
            timeout: Duration::from_secs(10),
            window: 64,
            threads: None,
            server: None,
        }
    }
}

/// The options of the tools, as [`getopt::parse`] reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opt {
    SrcPort,
    DstPort,
    Domain,
    Fabric,
    SrcAddr,
    Provider,
    EpType,
    Iters,
    Sizes,
    Integrity,
    MsgKind,
    Verbose,
    Ipv6,
    Help,
    Json,
    SelfRun,
    Pin,
    Timeout,
    Window,
    Threads,
}

/// The option table.
const SPECS: &[OptSpec<Opt>] = &[
    spec(Opt::SrcPort, 'B', None, true),
    spec(Opt::DstPort, 'P', None, true),
    spec(Opt::Domain, 'd', None, true),
    spec(Opt::Fabric, 'f', None, true),
    spec(Opt::SrcAddr, 's', None, true),
    spec(Opt::Provider, 'p', None, true),
    spec(Opt::EpType, 'e', None, true),
    spec(Opt::Iters, 'I', None, true),
    spec(Opt::Sizes, 'S', None, true),
    spec(Opt::Integrity, 'c', None, false),
    spec(Opt::MsgKind, 'm', None, true),
    spec(Opt::Verbose, 'v', None, false),
    spec(Opt::Ipv6, '6', None, false),
    spec(Opt::Help, 'h', Some("help"), false),
    long_only(Opt::Json, "json", false),
    long_only(Opt::SelfRun, "self", false),
    long_only(Opt::Pin, "pin", true),
    long_only(Opt::Timeout, "timeout", true),
    spec(Opt::Window, 'W', Some("window"), true),
    long_only(Opt::Threads, "threads", true),
];

/// A command-line error: the message (without the program name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

fn parse_port(v: &str, opt: char) -> Result<u16, UsageError> {
    v.parse::<u16>()
        .map_err(|_| UsageError(format!("invalid port for -{opt}: '{v}'")))
}

/// A size with an optional `k`, `m` or `g` suffix (binary).
pub fn parse_size(v: &str) -> Option<usize> {
    let (num, mult) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 1usize << 10),
        b'm' | b'M' => (&v[..v.len() - 1], 1 << 20),
        b'g' | b'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

fn parse_sizes(v: &str) -> Result<Sizes, UsageError> {
    if v == "all" {
        return Ok(Sizes::All);
    }
    let list: Option<Vec<usize>> = v.split(',').map(parse_size).collect();
    match list {
        Some(l) if !l.is_empty() => Ok(Sizes::List(l)),
        _ => Err(UsageError(format!(
            "invalid size for -S: '{v}' (a size, a comma-separated list of sizes, or 'all')"
        ))),
    }
}

/// Parse the arguments (without the program name).
///
/// # Errors
/// A [`UsageError`] naming the bad option or value.
pub fn parse_args(tool: Tool, args: &[String]) -> Result<Opts, UsageError> {
    let parsed = getopt::parse(SPECS, args).map_err(|e| UsageError(e.to_string()))?;
    let mut o = Opts::default();
    let mut operands = Vec::new();
    for p in parsed {
        let (key, val) = match p {
            Parsed::Operand(w) => {
                operands.push(w);
                continue;
            }
            Parsed::Opt(k, v) => (k, v.unwrap_or_default()),
        };
        match key {
            Opt::SrcPort => o.src_port = Some(parse_port(&val, 'B')?),
            Opt::DstPort => o.dst_port = parse_port(&val, 'P')?,
            Opt::Domain => o.domain = Some(val),
            Opt::Fabric => o.fabric = Some(val),
            Opt::SrcAddr => o.src_addr = Some(val),
            Opt::Provider => o.provider = Some(val),
            Opt::EpType => {
                o.ep_type = match val.as_str() {
                    "msg" => EpType::Msg,
                    "rdm" => EpType::Rdm,
                    "dgram" => EpType::Dgram,
                    _ => return Err(UsageError(format!("Unknown endpoint : {val}"))),
                }
            }
            Opt::Iters => {
                o.iters = match val.parse::<u64>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(UsageError(format!(
                            "invalid number of iterations for -I: '{val}' (at least 1)"
                        )))
                    }
                }
            }
            Opt::Sizes => o.sizes = parse_sizes(&val)?,
            Opt::Integrity => o.integrity = true,
            // As in C: anything but "msg" selects tagged messages.
            Opt::MsgKind => o.tagged = val != "msg",
            Opt::Verbose => o.verbose = true,
            Opt::Ipv6 => o.ipv6 = true,
            Opt::Help => o.help = true,
            Opt::Json => o.json = true,
            Opt::SelfRun => o.self_run = true,
            Opt::Pin => {
                let cpus: Option<Vec<usize>> =
                    val.split(',').map(|c| c.trim().parse().ok()).collect();
                o.pin = match cpus.as_deref() {
                    Some([a]) => Some((*a, *a)),
                    Some([a, b]) => Some((*a, *b)),
                    _ => {
                        return Err(UsageError(format!(
                            "invalid CPU list for --pin: '{val}' (CPU_A,CPU_B)"
                        )))
                    }
                }
            }
            Opt::Timeout => {
                o.timeout = match val.parse::<f64>() {
                    Ok(s) if s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
                    _ => {
                        return Err(UsageError(format!(
                            "invalid --timeout: '{val}' (seconds, 0 < t <= 3600)"
                        )))
                    }
                }
            }
            Opt::Window if tool == Tool::Bw => {
                o.window = match val.parse::<usize>() {
                    Ok(n) if (1..=4096).contains(&n) => n,
                    _ => {
                        return Err(UsageError(format!(
                            "invalid window for -W: '{val}' (1 to 4096)"
                        )))
                    }
                }
            }
            Opt::Threads if tool == Tool::Bw => {
                o.threads = match val.parse::<usize>() {
                    Ok(n) if (1..=threads::MAX_THREADS).contains(&n) => Some(n),
                    _ => {
                        return Err(UsageError(format!(
                            "invalid --threads: '{val}' (1 to {})",
                            threads::MAX_THREADS
                        )))
                    }
                }
            }
            // Options of fi_bw only: refused as getopt refuses an unknown option.
            Opt::Window => return Err(UsageError(GetoptError::InvalidShort('W').to_string())),
            Opt::Threads => {
                let unknown = GetoptError::UnrecognizedLong("threads".into());
                return Err(UsageError(unknown.to_string()));
            }
        }
    }
    if operands.len() > 1 {
        return Err(UsageError(format!(
            "one server address expected, got {}: {}",
            operands.len(),
            operands.join(" ")
        )));
    }
    o.server = operands.pop();
    if o.self_run && o.server.is_some() {
        return Err(UsageError(
            "--self runs both sides on this host: give no server address".into(),
        ));
    }
    Ok(o)
}

/// The usage text.
pub fn usage(tool: Tool, prog: &str) -> String {
    let what = match tool {
        Tool::PingPong => "Ping pong client and server",
        Tool::Bw => "Throughput client and server (a window of messages in flight)",
    };
    let mut s = format!(
        "Usage:\n  {prog} [OPTIONS]\t\tstart server\n  {prog} [OPTIONS] <srv_addr>\tconnect to server\n  {prog} [OPTIONS] --self\trun both on this host\n\n{what}\n\nOptions:\n"
    );
    let lines: &[(&str, &str)] = &[
        (
            "-B <src_port>",
            "source control port number (server: 47592, client: auto)",
        ),
        (
            "-P <dst_port>",
            "destination control port number (client: 47592)",
        ),
        ("-d <domain>", "domain name"),
        ("-f <fabric>", "fabric name"),
        ("-s <src_addr>", "source address"),
        ("-p <provider>", "specific provider name eg tcp, udp, shm"),
        ("-e <ep_type>", "endpoint type: msg|rdm|dgram (dgram)"),
        ("-I <number>", "number of iterations (10)"),
        (
            "-S <size>",
            "specific transfer size, a list (64,4k) or 'all' (64,256,1k,4k,64k,1m)",
        ),
        ("-c", "enables data_integrity checks"),
        ("-m <transmit mode>", "transmit mode type: msg|tagged (msg)"),
        ("-h", "display this help output"),
        ("-v", "enable debugging output"),
        ("-6", "use IPv6 address"),
        (
            "--self",
            "run server and client as two processes on this host",
        ),
        (
            "--json",
            "print one JSON object per size instead of the table",
        ),
        (
            "--pin <A,B>",
            "run the server on CPU A, the client on CPU B",
        ),
        (
            "--timeout <secs>",
            "bound of every wait on reliable endpoints (10)",
        ),
    ];
    for (o, h) in lines {
        s.push_str(&format!(" {o:<21}{h}\n"));
    }
    if tool == Tool::Bw {
        s.push_str(&format!(
            " {:<21}{}\n",
            "-W <number>", "messages in flight (64)"
        ));
        s.push_str(&format!(
            " {:<21}{}\n",
            "--threads <N>",
            "N threads, one per context of a scalable endpoint pair in this process (shm)"
        ));
    }
    s
}

/// The `main` of the binary of `tool`: runs it with the process's arguments, standard
/// output and standard error, and exits with its status.
pub fn main(tool: Tool) -> ! {
    let args: Vec<OsString> = std::env::args_os().collect();
    let status = run(
        tool,
        &args,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    );
    std::process::exit(status)
}

/// Run the tool with `args` (program name first); returns the exit status.
pub fn run(tool: Tool, args: &[OsString], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let prog = args
        .first()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| tool.name().to_string());
    let rest: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let opts = match parse_args(tool, &rest) {
        Ok(o) => o,
        Err(UsageError(m)) => {
            let _ = writeln!(err, "{prog}: {m}");
            let _ = write!(err, "{}", usage(tool, &prog));
            return 1;
        }
    };
    if opts.help {
        // As the C tool: usage on stderr, status 1.
        let _ = write!(err, "{}", usage(tool, &prog));
        return 1;
    }
    let result = if let Some(n) = opts.threads {
        threads::run(&opts, n, out)
    } else if opts.self_run {
        pin::run_self(tool, &opts, err)
    } else {
        bench::run(tool, &opts, out, err, None)
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "{prog}: {}", e.message());
            status_of(&e)
        }
    }
}

/// The exit status of a failure: the error's code where it fits, else 1.
pub fn status_of(e: &ofi::Error) -> i32 {
    match e.code().0 {
        c @ 1..=255 => c,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(tool: Tool, v: &[&str]) -> Result<Opts, UsageError> {
        let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        parse_args(tool, &v)
    }

    #[test]
    fn defaults_are_the_c_tools() {
        let o = p(Tool::PingPong, &[]).unwrap();
        assert_eq!(o.ep_type, EpType::Dgram);
        assert_eq!(o.iters, 10);
        assert_eq!(o.dst_port, 47592);
        assert_eq!(o.src_port, None);
        assert_eq!(o.sizes, Sizes::Default);
        assert!(!o.tagged && !o.integrity && !o.self_run && o.server.is_none());
    }

    #[test]
    fn every_option_is_parsed() {
        let o = p(
            Tool::Bw,
            &[
                "-B",
                "1",
                "-P",
                "2",
                "-d",
                "dom",
                "-f",
                "fab",
                "-s",
                "src",
                "-p",
                "tcp",
                "-e",
                "msg",
                "-I",
                "7",
                "-S",
                "0,4k,1m",
                "-c",
                "-m",
                "tagged",
                "-v",
                "-6",
                "--json",
                "--pin",
                "1,0",
                "--timeout",
                "2.5",
                "-W",
                "16",
                "--threads",
                "3",
                "host",
            ],
        )
        .unwrap();
        assert_eq!(o.src_port, Some(1));
        assert_eq!(o.dst_port, 2);
        assert_eq!(o.domain.as_deref(), Some("dom"));
        assert_eq!(o.fabric.as_deref(), Some("fab"));
        assert_eq!(o.src_addr.as_deref(), Some("src"));
        assert_eq!(o.provider.as_deref(), Some("tcp"));
        assert_eq!(o.ep_type, EpType::Msg);
        assert_eq!(o.iters, 7);
        assert_eq!(o.sizes, Sizes::List(vec![0, 4096, 1 << 20]));
        assert!(o.integrity && o.tagged && o.verbose && o.ipv6 && o.json);
        assert_eq!(o.pin, Some((1, 0)));
        assert_eq!(o.timeout, Duration::from_millis(2500));
        assert_eq!(o.window, 16);
        assert_eq!(o.threads, Some(3));
        assert_eq!(o.server.as_deref(), Some("host"));
        assert!(p(Tool::Bw, &["--threads", "0"]).is_err());
        assert!(p(Tool::PingPong, &["--threads", "2"]).is_err());
        // As in C, any mode but "msg" is tagged.
        assert!(p(Tool::PingPong, &["-m", "xyz"]).unwrap().tagged);
        assert!(!p(Tool::PingPong, &["-m", "msg"]).unwrap().tagged);
        assert_eq!(p(Tool::PingPong, &["-S", "all"]).unwrap().sizes, Sizes::All);
        assert_eq!(
            p(Tool::PingPong, &["--pin", "3"]).unwrap().pin,
            Some((3, 3))
        );
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for (args, msg) in [
            (&["-e", "x"][..], "Unknown endpoint : x"),
            (
                &["-I", "-1"][..],
                "invalid number of iterations for -I: '-1' (at least 1)",
            ),
            (
                &["-S", ""][..],
                "invalid size for -S: '' (a size, a comma-separated list of sizes, or 'all')",
            ),
            (
                &["-S", "1,,2"][..],
                "invalid size for -S: '1,,2' (a size, a comma-separated list of sizes, or 'all')",
            ),
            (&["-B", "x"][..], "invalid port for -B: 'x'"),
            (
                &["--pin", "1,2,3"][..],
                "invalid CPU list for --pin: '1,2,3' (CPU_A,CPU_B)",
            ),
            (
                &["--timeout", "0"][..],
                "invalid --timeout: '0' (seconds, 0 < t <= 3600)",
            ),
            (&["-W", "2"][..], "invalid option -- 'W'"),
            (&["--window=2"][..], "invalid option -- 'W'"),
            (&["--threads", "2"][..], "unrecognized option '--threads'"),
        ] {
            assert_eq!(
                p(Tool::PingPong, args),
                Err(UsageError(msg.to_string())),
                "{args:?}"
            );
        }
        assert_eq!(
            p(Tool::Bw, &["-W", "5000"]),
            Err(UsageError(
                "invalid window for -W: '5000' (1 to 4096)".into()
            ))
        );
    }

    #[test]
    fn sizes_parse_with_suffixes_and_overflow_is_refused() {
        assert_eq!(parse_size("64"), Some(64));
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("99999999999999999999g"), None);
        assert_eq!(parse_size("-1"), None);
    }

    #[test]
    fn size_sets_follow_max_msg_size() {
        use super::bench::sizes_for;
        assert_eq!(
            sizes_for(&Sizes::Default, 1472).unwrap(),
            vec![64, 256, 1024]
        );
        let all = sizes_for(&Sizes::All, usize::MAX).unwrap();
        assert_eq!(&all[..8], &[0, 1, 2, 3, 4, 6, 8, 12]);
        assert_eq!(all.last(), Some(&(6 << 20)));
        assert_eq!(sizes_for(&Sizes::All, 1472).unwrap().last(), Some(&1024));
        let e = sizes_for(&Sizes::List(vec![64, 2048]), 1472).unwrap_err();
        assert_eq!(e.code(), ofi::Errno::EINVAL);
    }

    #[test]
    fn client_args_round_trip_through_the_parser() {
        let o = p(
            Tool::Bw,
            &[
                "-p", "udp", "-e", "rdm", "-I", "5", "-S", "1,2", "-c", "-m", "tagged", "--pin",
                "0,1", "-W", "3", "--json",
            ],
        )
        .unwrap();
        let args = pin::client_args(Tool::Bw, &o, 4000, "127.0.0.1");
        let back = parse_args(Tool::Bw, &args).unwrap();
        assert_eq!(back.server.as_deref(), Some("127.0.0.1"));
        assert_eq!(back.dst_port, 4000);
        assert_eq!(
            Opts {
                server: None,
                dst_port: o.dst_port,
                ..back
            },
            o
        );
    }
}
