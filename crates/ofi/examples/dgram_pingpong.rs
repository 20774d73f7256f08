//! dgram_pingpong: a real transfer between two processes of this host over an
//! `FI_EP_DGRAM` provider loaded as a plugin (by default the example vendor provider
//! `unixdgram`, built out of tree; see scripts/demo.sh and docs/PLUGINS.md).
//!
//! ```text
//! FI_PROVIDER_PATH=DIR cargo run --release -p ofi --example dgram_pingpong
//! cargo run --release -p ofi --example dgram_pingpong -- --plugin-dir DIR [-n 1000]
//!     [--max-size BYTES] [--provider NAME] [--timeout SECS]
//! ```
//!
//! The parent starts itself again as the child (`--child`). Each opens an endpoint and
//! prints its address; they exchange addresses over the child's stdin/stdout. The
//! parent then sends N messages whose sizes sweep 1..=max (max: `--max-size`, else the
//! provider's `max_msg_size`), each filled with a pattern derived from its sequence
//! number; the child checks every message against the pattern and sends it back; the
//! parent checks the echo and measures the round trip. At the end the parent prints the
//! messages, bytes and mean round trip.
//!
//! Bounded: N messages, and `--timeout` seconds (default 30) for the whole run, after
//! which the parent kills the child and fails. The child gives up at the same deadline,
//! or as soon as the parent goes away (its stdin closes).
//!
//! Exit status: 0 on success, 1 on failure, 2 on a usage error.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use ofi::abi::raw::{CqErrEntry, CqMsgEntry};
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::{Registry, RegistryConfig};
use ofi::{
    AddrFormat, Address, Caps, CqFormat, EpType, Errno, Info, OpFlags, WaitObj, ADDR_NOTAVAIL,
    API_VERSION,
};

const USAGE: &str = "usage: dgram_pingpong [--plugin-dir DIR] [-n COUNT] [--max-size BYTES] \
                     [--provider NAME] [--timeout SECS]";

/// Contexts of the two operations in flight.
const SEND_CTX: usize = 1;
const RECV_CTX: usize = 2;

#[derive(Clone, Debug)]
struct Opts {
    plugin_dir: Option<PathBuf>,
    count: usize,
    max_size: Option<usize>,
    provider: String,
    timeout: Duration,
    child: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        plugin_dir: None,
        count: 1000,
        max_size: None,
        provider: "unixdgram".into(),
        timeout: Duration::from_secs(30),
        child: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--plugin-dir" => o.plugin_dir = Some(PathBuf::from(value("--plugin-dir")?)),
            "-n" | "--count" => {
                o.count = value("-n")?
                    .parse()
                    .map_err(|_| "-n: not a number".to_string())?;
                if o.count == 0 {
                    return Err("-n must be at least 1".into());
                }
            }
            "--max-size" => {
                let v: usize = value("--max-size")?
                    .parse()
                    .map_err(|_| "--max-size: not a number".to_string())?;
                if v == 0 {
                    return Err("--max-size must be at least 1".into());
                }
                o.max_size = Some(v);
            }
            "--provider" => o.provider = value("--provider")?,
            "--timeout" => {
                let s: u64 = value("--timeout")?
                    .parse()
                    .map_err(|_| "--timeout: not a number".to_string())?;
                o.timeout = Duration::from_secs(s.max(1));
            }
            "--child" => o.child = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// The arguments that make a child with the same settings.
fn child_args(o: &Opts, max: usize) -> Vec<String> {
    let mut v = vec![
        "--child".to_string(),
        "-n".into(),
        o.count.to_string(),
        "--max-size".into(),
        max.to_string(),
        "--provider".into(),
        o.provider.clone(),
        "--timeout".into(),
        o.timeout.as_secs().to_string(),
    ];
    if let Some(d) = &o.plugin_dir {
        v.push("--plugin-dir".into());
        v.push(d.display().to_string());
    }
    v
}

/// Size of message `i` of `n`: an even sweep from 1 to `max`.
fn size_of(i: usize, n: usize, max: usize) -> usize {
    if n <= 1 {
        max
    } else {
        1 + i * (max - 1) / (n - 1)
    }
}

/// The content of message `seq` (xorshift from the sequence number).
fn fill(buf: &mut [u8], seq: usize) {
    let mut x = (seq as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// FNV-1a over `bytes`.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// One side's objects. Fields drop in order: endpoint first, fabric last.
struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    _domain: Domain,
    _fabric: Fabric,
    addr: String,
    /// The largest message of the run: `--max-size`, capped by the provider's
    /// `max_msg_size`.
    max_size: usize,
    plugin: Option<PathBuf>,
}

fn open(o: &Opts) -> Result<Side, String> {
    let mut config = RegistryConfig::from_environment(Vec::new());
    if let Some(d) = &o.plugin_dir {
        // First, and once (it may also be in FI_PROVIDER_PATH).
        let canon = d.canonicalize().ok();
        let same = |p: &PathBuf| p == d || (canon.is_some() && p.canonicalize().ok() == canon);
        config.plugin_dirs.retain(|p| !same(p));
        config.plugin_dirs.insert(0, d.clone());
    }
    let reg = Registry::build(config);
    let hints = Info::hints()
        .with_provider(&o.provider)
        .with_ep_type(EpType::Dgram)
        .with_caps(Caps::MSG | Caps::SEND | Caps::RECV);
    let req = GetinfoRequest {
        hints: Some(hints),
        ..GetinfoRequest::new(API_VERSION)
    };
    let info = match reg.getinfo(&req) {
        Ok(infos) => infos.into_iter().next().ok_or("getinfo returned nothing")?,
        Err(e) => {
            let mut msg = format!("no {} endpoint available: {e}", o.provider);
            for r in reg.load_report() {
                msg.push_str(&format!("\n  plugin {r}"));
            }
            msg.push_str(
                "\n  build the plugin with scripts/demo.sh, or point FI_PROVIDER_PATH or \
                 --plugin-dir at the directory holding libofi_prov_unixdgram.so",
            );
            return Err(msg);
        }
    };
    let plugin = reg
        .providers()
        .into_iter()
        .find(|p| p.name.eq_ignore_ascii_case(&o.provider) && p.superseded_by.is_none())
        .and_then(|p| p.path);
    let fabric = reg.open_fabric(&info).map_err(|e| format!("fabric: {e}"))?;
    let domain = fabric.domain(&info).map_err(|e| format!("domain: {e}"))?;
    let attr = CqAttr {
        size: 64,
        wait_obj: WaitObj::Unspec,
        ..CqAttr::with_format(CqFormat::Msg)
    };
    let cq = domain.cq_open(&attr).map_err(|e| format!("cq: {e}"))?;
    let av = domain
        .av_open(&AvAttr::default())
        .map_err(|e| format!("av: {e}"))?;
    let ep = domain
        .endpoint(&info)
        .map_err(|e| format!("endpoint: {e}"))?;
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .map_err(|e| format!("bind cq: {e}"))?;
    ep.bind_av(&av).map_err(|e| format!("bind av: {e}"))?;
    ep.enable().map_err(|e| format!("enable: {e}"))?;
    let name = ep.getname().map_err(|e| format!("getname: {e}"))?;
    let addr = Address::from_bytes(info.addr_format, &name)
        .or_else(|_| Address::from_bytes(AddrFormat::STR, &name))
        .map_err(|e| format!("endpoint address: {e}"))?
        .to_addr_str();
    Ok(Side {
        ep,
        cq,
        av,
        _domain: domain,
        _fabric: fabric,
        addr,
        max_size: o
            .max_size
            .unwrap_or(info.ep_attr.max_msg_size)
            .min(info.ep_attr.max_msg_size),
        plugin,
    })
}

impl Side {
    /// Insert the peer's address; returns its fabric address.
    fn add_peer(&self, text: &str) -> Result<u64, String> {
        let a = Address::parse_addr_str(text).map_err(|e| format!("peer address {text:?}: {e}"))?;
        let fi = self
            .av
            .insert(&[a])
            .map_err(|e| format!("av insert: {e}"))?;
        match fi.first() {
            Some(&f) if f != ADDR_NOTAVAIL => Ok(f),
            _ => Err(format!("peer address {text:?} was not accepted by the AV")),
        }
    }

    /// The next completion, blocking until `deadline`.
    fn wait(&self, deadline: Instant) -> Result<CqMsgEntry, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timed out waiting for a completion".into());
            }
            let mut e = [CqMsgEntry::default()];
            match self.cq.sread(&mut e, left.as_millis().min(1000) as i32) {
                Ok(_) => return Ok(e[0]),
                Err(err) if err.code() == Errno::EAGAIN => {}
                Err(err) if err.code() == Errno::EAVAIL => {
                    let mut ee = CqErrEntry::default();
                    self.cq
                        .readerr(&mut ee, 0)
                        .map_err(|e| format!("readerr: {e}"))?;
                    return Err(format!(
                        "operation {} failed: {} (olen {})",
                        ee.op_context,
                        ofi::error::strerror(ee.err),
                        ee.olen
                    ));
                }
                Err(err) => return Err(format!("cq read: {err}")),
            }
        }
    }

    /// Post a receive into `buf`.
    fn post_recv(&self, buf: &mut [u8], deadline: Instant) -> Result<(), String> {
        self.retry_while_busy("recv", deadline, || {
            // SAFETY: `buf` stays alive and untouched until this receive's completion is
            // read (the callers wait for it before using or dropping the buffer).
            unsafe {
                self.ep.recv(
                    buf.as_mut_ptr(),
                    buf.len(),
                    std::ptr::null_mut(),
                    ADDR_NOTAVAIL,
                    RECV_CTX,
                )
            }
        })
    }

    /// Send `buf` to `dest`, retrying while the peer's queue is full.
    fn send(&self, buf: &[u8], dest: u64, deadline: Instant) -> Result<(), String> {
        self.retry_while_busy("send", deadline, || {
            // SAFETY: `buf` stays alive until the send's completion is read (callers wait).
            unsafe {
                self.ep.send(
                    buf.as_ptr(),
                    buf.len(),
                    std::ptr::null_mut(),
                    dest,
                    SEND_CTX,
                )
            }
        })
    }

    /// Call `post` until it is not `FI_EAGAIN` or `deadline` passes, driving progress
    /// between tries; its error is named `what`.
    fn retry_while_busy(
        &self,
        what: &str,
        deadline: Instant,
        mut post: impl FnMut() -> ofi::Result<()>,
    ) -> Result<(), String> {
        loop {
            match post() {
                Ok(()) => return Ok(()),
                Err(e) if e.code() == Errno::EAGAIN && Instant::now() < deadline => {
                    let mut none: [CqMsgEntry; 0] = [];
                    let _ = self.cq.read(&mut none);
                    std::thread::yield_now();
                }
                Err(e) => return Err(format!("{what}: {e}")),
            }
        }
    }

    /// Wait until both the send and the receive in flight have completed; returns the
    /// received length.
    fn complete_round(&self, deadline: Instant) -> Result<usize, String> {
        let (mut sent, mut received) = (false, None);
        while !sent || received.is_none() {
            let c = self.wait(deadline)?;
            match c.op_context {
                SEND_CTX => sent = true,
                RECV_CTX => received = Some(c.len),
                other => return Err(format!("unexpected completion context {other}")),
            }
        }
        Ok(received.unwrap_or(0))
    }
}

/// Lines the child writes on its stdout, read by a thread so reads can time out.
fn line_reader(child: &mut Child) -> Result<Receiver<String>, String> {
    let out = child.stdout.take().ok_or("child has no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

fn next_line(rx: &Receiver<String>, deadline: Instant) -> Result<String, String> {
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(l) => Ok(l),
        Err(RecvTimeoutError::Timeout) => Err("timed out waiting for the child".into()),
        Err(RecvTimeoutError::Disconnected) => Err("the child exited early".into()),
    }
}

fn parent(o: &Opts) -> Result<(), String> {
    let deadline = Instant::now() + o.timeout;
    let side = open(o)?;
    let max = side.max_size;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = Command::new(exe)
        .args(child_args(o, max))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn the child: {e}"))?;
    let result = run_parent(o, &side, max, &mut child, deadline);
    if result.is_err() {
        let _ = child.kill();
    }
    let _ = child.wait();
    result
}

fn run_parent(
    o: &Opts,
    side: &Side,
    max: usize,
    child: &mut Child,
    deadline: Instant,
) -> Result<(), String> {
    let lines = line_reader(child)?;
    let mut stdin: ChildStdin = child.stdin.take().ok_or("child has no stdin")?;
    let first = next_line(&lines, deadline)?;
    let peer_text = first
        .strip_prefix("ADDR ")
        .ok_or_else(|| format!("child said {first:?}"))?;
    let peer = side.add_peer(peer_text)?;
    writeln!(stdin, "ADDR {}", side.addr).map_err(|e| format!("write to the child: {e}"))?;
    stdin
        .flush()
        .map_err(|e| format!("write to the child: {e}"))?;

    let mut ping = vec![0u8; max];
    let mut pong = vec![0u8; max];
    let (mut bytes, mut total, mut min, mut worst) =
        (0usize, Duration::ZERO, Duration::MAX, Duration::ZERO);
    for i in 0..o.count {
        let size = size_of(i, o.count, max);
        fill(&mut ping[..size], i);
        let t0 = Instant::now();
        side.post_recv(&mut pong, deadline)?;
        side.send(&ping[..size], peer, deadline)?;
        let got = side.complete_round(deadline)?;
        let rtt = t0.elapsed();
        if got != size || checksum(&pong[..got]) != checksum(&ping[..size]) {
            return Err(format!(
                "message {i}: echo of {got} bytes does not match the {size} sent"
            ));
        }
        bytes += size;
        total += rtt;
        min = min.min(rtt);
        worst = worst.max(rtt);
    }
    let done = next_line(&lines, deadline)?;
    let expect = format!("DONE {} {}", o.count, bytes);
    if done != expect {
        return Err(format!("child reported {done:?}, expected {expect:?}"));
    }
    drop(stdin);

    let mean = total / o.count as u32;
    println!(
        "dgram_pingpong: provider {} ({})",
        o.provider,
        match &side.plugin {
            Some(p) => format!("plugin {}", p.display()),
            None => "built in".to_string(),
        }
    );
    println!(
        "  endpoints: {} (parent) <-> {} (child pid {})",
        side.addr,
        peer_text,
        child.id()
    );
    println!(
        "  messages:  {} round trips, sizes 1..={} bytes, every checksum verified",
        o.count, max
    );
    println!(
        "  bytes:     {} each way ({:.1} MiB)",
        bytes,
        bytes as f64 / (1024.0 * 1024.0)
    );
    println!(
        "  round trip: mean {:.1} us (min {:.1} us, max {:.1} us)",
        mean.as_secs_f64() * 1e6,
        min.as_secs_f64() * 1e6,
        worst.as_secs_f64() * 1e6
    );
    Ok(())
}

fn child(o: &Opts) -> Result<(), String> {
    let deadline = Instant::now() + o.timeout;
    let side = open(o)?;
    let max = side.max_size;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ADDR {}", side.addr)
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))?;

    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    let peer_text = line
        .trim()
        .strip_prefix("ADDR ")
        .ok_or_else(|| format!("parent said {line:?}"))?;
    let peer = side.add_peer(peer_text)?;
    // When the parent goes away, its end of our stdin closes: give up at once (unless
    // we are done, when the parent closes it on purpose).
    static FINISHED: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(move || {
        let mut rest = String::new();
        while stdin.read_line(&mut rest).is_ok_and(|n| n > 0) {
            rest.clear();
        }
        if !FINISHED.load(Ordering::Acquire) {
            eprintln!("dgram_pingpong child: the parent went away");
            std::process::exit(3);
        }
    });

    let mut buf = vec![0u8; max];
    let mut expected = vec![0u8; max];
    let mut bytes = 0usize;
    for i in 0..o.count {
        side.post_recv(&mut buf, deadline)?;
        let got = loop {
            let c = side.wait(deadline)?;
            if c.op_context == RECV_CTX {
                break c.len;
            }
        };
        let size = size_of(i, o.count, max);
        fill(&mut expected[..size], i);
        if got != size || checksum(&buf[..got]) != checksum(&expected[..size]) {
            return Err(format!(
                "message {i}: got {got} bytes, expected {size} with the sequence's pattern"
            ));
        }
        side.send(&buf[..got], peer, deadline)?;
        loop {
            if side.wait(deadline)?.op_context == SEND_CTX {
                break;
            }
        }
        bytes += got;
    }
    FINISHED.store(true, Ordering::Release);
    writeln!(out, "DONE {} {}", o.count, bytes)
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("dgram_pingpong: {msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    ofi::log::init();
    let (who, r) = if o.child {
        ("child", child(&o))
    } else {
        ("parent", parent(&o))
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dgram_pingpong {who}: {e}");
            ExitCode::FAILURE
        }
    }
}
