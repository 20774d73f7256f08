//! Shared plumbing of the safe-layer examples: arguments, and a parent that starts
//! itself again as child processes and talks to them by JSON lines over their
//! stdin/stdout (the out-of-band channel that carries addresses and region
//! descriptors). Every wait is bounded by `--timeout`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Common options: `-n COUNT`, `--timeout SECS`, `--child`, `--procs N`.
#[derive(Clone, Debug)]
pub struct Opts {
    pub count: usize,
    pub timeout: Duration,
    pub child: bool,
    pub procs: usize,
    pub deadline: Instant,
}

pub fn parse_args(usage: &str, default_count: usize) -> Opts {
    let mut o = Opts {
        count: default_count,
        timeout: Duration::from_secs(30),
        child: false,
        procs: 3,
        deadline: Instant::now(),
    };
    let mut args = std::env::args().skip(1);
    let die = |msg: &str| -> ! {
        eprintln!("{msg}\n{usage}");
        std::process::exit(2)
    };
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| die(&format!("{name} needs a number")))
        };
        match a.as_str() {
            "-n" | "--count" => o.count = num("-n").max(1) as usize,
            "--timeout" => o.timeout = Duration::from_secs(num("--timeout").max(1)),
            "--procs" => o.procs = num("--procs").clamp(1, 64) as usize,
            "--child" => o.child = true,
            "-h" | "--help" => die(""),
            other => die(&format!("unknown argument {other:?}")),
        }
    }
    o.deadline = Instant::now() + o.timeout;
    o
}

/// Arguments that give a child the same settings.
pub fn child_args(o: &Opts) -> Vec<String> {
    vec![
        "--child".into(),
        "-n".into(),
        o.count.to_string(),
        "--timeout".into(),
        o.timeout.as_secs().to_string(),
    ]
}

/// A child process of ours, talked to by JSON lines. Killed if dropped unfinished.
pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    finished: bool,
}

impl Peer {
    /// Start this program again with `args`.
    pub fn spawn(args: &[String]) -> Result<Peer, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn the child: {e}"))?;
        let out = child.stdout.take().ok_or("child without stdout")?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Ok(Peer {
            child,
            stdin,
            lines,
            finished: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send one value as a JSON line.
    pub fn send<T: Serialize>(&mut self, v: &T) -> Result<(), String> {
        let s = serde_json::to_string(v).map_err(|e| format!("encode: {e}"))?;
        let stdin = self.stdin.as_mut().ok_or("child stdin closed")?;
        writeln!(stdin, "{s}")
            .and_then(|_| stdin.flush())
            .map_err(|e| format!("write to the child: {e}"))
    }

    /// The next JSON line, waiting until `deadline`.
    pub fn recv<T: DeserializeOwned>(&mut self, deadline: Instant) -> Result<T, String> {
        let l = match self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => return Err("timed out waiting for the child".into()),
            Err(RecvTimeoutError::Disconnected) => return Err("the child exited early".into()),
        };
        serde_json::from_str(&l).map_err(|e| format!("child said {l:?}: {e}"))
    }

    /// The next JSON line if one is there already.
    pub fn try_recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>, String> {
        match self.lines.try_recv() {
            Ok(l) => serde_json::from_str(&l)
                .map(Some)
                .map_err(|e| format!("child said {l:?}: {e}")),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err("the child exited early".into()),
        }
    }

    /// Close its stdin and wait (until `deadline`) for a successful exit.
    pub fn finish(mut self, deadline: Instant) -> Result<(), String> {
        self.stdin = None;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    self.finished = true;
                    return if st.success() {
                        Ok(())
                    } else {
                        Err(format!("child {} failed: {st}", self.child.id()))
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => return Err("timed out waiting for the child to exit".into()),
                Err(e) => return Err(format!("wait for the child: {e}")),
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Child side: one JSON line to the parent.
pub fn tell<T: Serialize>(v: &T) -> Result<(), String> {
    let s = serde_json::to_string(v).map_err(|e| format!("encode: {e}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{s}")
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// Child side: the parent's next JSON line (blocking; the parent kills us on its
/// deadline, and a closed stdin is an error).
pub fn hear<T: DeserializeOwned>() -> Result<T, String> {
    let mut l = String::new();
    let n = std::io::stdin()
        .read_line(&mut l)
        .map_err(|e| format!("stdin: {e}"))?;
    if n == 0 {
        return Err("the parent went away".into());
    }
    serde_json::from_str(l.trim()).map_err(|e| format!("parent said {l:?}: {e}"))
}

/// Run `f`, print its error, and turn it into the exit status (0 ok, 1 failure).
pub fn run(
    name: &str,
    child: bool,
    f: impl FnOnce() -> Result<(), String>,
) -> std::process::ExitCode {
    ofi::log::init();
    match f() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name} {}: {e}", if child { "child" } else { "parent" });
            std::process::ExitCode::FAILURE
        }
    }
}

/// The whole `main` of an example: parse the arguments (`usage`, `default_count`),
/// then run `child` in a child process and `parent` otherwise (see [`run`]).
pub fn main(
    name: &str,
    usage: &str,
    default_count: usize,
    child: impl FnOnce(&Opts) -> Result<(), String>,
    parent: impl FnOnce(&Opts) -> Result<(), String>,
) -> std::process::ExitCode {
    let o = parse_args(usage, default_count);
    run(
        name,
        o.child,
        || {
            if o.child {
                child(&o)
            } else {
                parent(&o)
            }
        },
    )
}

/// The first getinfo result for endpoint kind `K` (no other hints), its fabric and a
/// domain.
pub fn open_first<K: ofi::safe::EpKind>() -> Result<Opened<K>, String> {
    open_hinted(ofi::safe::Hints::<K>::new())
}

/// The first getinfo result for `hints`, its fabric and a domain.
pub fn open_hinted<K: ofi::safe::EpKind>(hints: ofi::safe::Hints<K>) -> Result<Opened<K>, String> {
    let info = hints.first().map_err(ctx("getinfo"))?;
    let fabric = ofi::safe::Fabric::open(&info).map_err(ctx("fabric"))?;
    let domain = fabric.domain(&info).map_err(ctx("domain"))?;
    Ok((info, fabric, domain))
}

/// What [`open_hinted`] opens: the getinfo result, its fabric and a domain.
pub type Opened<K> = (
    ofi::safe::FabricInfo<K>,
    ofi::safe::Fabric,
    ofi::safe::Domain,
);

/// Shorthand: an error with context.
pub fn ctx<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// Poll `ep` until every operation of `ids` has completed (in any order); their
/// completions in the order of `ids`. Other completions are returned in `others`.
pub fn complete_all<K: ofi::safe::EpKind>(
    ep: &mut ofi::safe::Ep<K>,
    ids: &[ofi::safe::OpId],
    deadline: Instant,
    others: &mut Vec<ofi::safe::Completion>,
) -> Result<Vec<ofi::safe::Completion>, String> {
    let mut got: Vec<Option<ofi::safe::Completion>> = ids.iter().map(|_| None).collect();
    let mut left = ids.len();
    let mut idle = 0u32;
    while left > 0 {
        match ep.poll().map_err(|e| format!("completion: {e}"))? {
            Some(c) => match ids.iter().position(|&i| i == c.id) {
                Some(k) if got[k].is_none() => {
                    got[k] = Some(c);
                    left -= 1;
                }
                _ => others.push(c),
            },
            None => {
                idle += 1;
                if idle.is_multiple_of(256) {
                    if Instant::now() >= deadline {
                        return Err(format!("timed out with {left} operations outstanding"));
                    }
                    std::thread::yield_now();
                }
            }
        }
    }
    Ok(got.into_iter().flatten().collect())
}
