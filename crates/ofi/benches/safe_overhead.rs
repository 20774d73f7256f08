//! safe_overhead: what the safe layer costs on the latency path. A 64-byte ping-pong
//! between two processes over an RDM endpoint (shm by default), the same endpoint and
//! CQ driven two ways in alternating rounds:
//!
//! - `raw`: the core's `unsafe` calls (`Endpoint::recv` / `send` with pointers and
//!   integer contexts, `CompletionQueue::read` of `CqTaggedEntry`), as an application
//!   on the raw API writes it;
//! - `safe`: `Ep::recv` / `Ep::send` moving `Buf`s, `Ep::poll` returning typed
//!   completions that hand the buffers back.
//!
//! A benchmark binary (`harness = false`):
//!
//! ```text
//! FI_PROVIDER=shm cargo bench -p ofi --bench safe_overhead -- [-n ITERS] [--rounds R] [--size BYTES]
//! FI_PROVIDER=shm cargo bench -p ofi --bench safe_overhead -- --self-loop [-n ITERS]
//! FI_PROVIDER=shm cargo bench -p ofi --bench safe_overhead -- --aa [-n ITERS] [--rounds R]
//! ```
//!
//! (`cargo bench` adds `--bench` to the arguments; it is accepted and ignored. The
//! binary is `target/release/deps/safe_overhead-<hash>`; `cargo bench -p ofi --bench
//! safe_overhead --no-run` builds it and prints its path.)
//!
//! `--self-loop` measures the layer's CPU cost per operation instead: one process, the
//! endpoint sending to itself, raw then safe.
//!
//! `--aa` calibrates the method: the second mode runs a twin of the raw loop (the same
//! code, other contexts, so the compiler keeps two functions at two addresses) instead
//! of the safe layer. What it reports is the method's own offset for two copies of one
//! loop. Something that comes with each copy of the executable (most likely where its
//! pages land in memory) moves the safe figure by several ns from one byte-identical
//! copy to another (docs/PERFORMANCE.md, "Safe layer overhead"), so compare builds over
//! several copies each: `scripts/safe_overhead.py`.
//!
//! Rounds alternate which mode runs first. Prints, per mode, the median and the 10th / 90th percentile round trip over all
//! rounds, and the median of the per-round medians; and the difference of the modes as
//! the median of the rounds' differences of means (finer than the medians, which move in
//! steps of the round trip's few discrete poll counts). Numbers only make sense from a
//! release build. `cargo test -p ofi` builds this target too (`test = true`) and runs it
//! without arguments: then (no `--bench`, nothing asked) it runs tiny counts
//! (`-n 200 --rounds 2`) whose numbers mean nothing; the `examples` test runs the built
//! binary in every mode and checks its output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::safe::{Buf, Ep, EpAddr, Fabric, Hints, OpKind, Peer, Rdm};
use ofi::{Errno, ADDR_UNSPEC};

struct Opts {
    iters: usize,
    rounds: usize,
    size: usize,
    child: bool,
    timeout: Duration,
    /// `--only raw|safe`: run one mode (for profiling); both by default.
    only: Option<String>,
    /// `--self-loop`: one process, the endpoint sending to itself: the CPU cost per
    /// operation without a peer's latency in the way.
    self_loop: bool,
    /// `--aa`: the safe rounds run `raw_round_again` instead (calibration).
    aa: bool,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        iters: 20_000,
        rounds: 5,
        size: 64,
        child: false,
        timeout: Duration::from_secs(120),
        only: None,
        self_loop: false,
        aa: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        // Run by `cargo test` (a bench target with `test = true` gets no arguments;
        // `cargo bench` passes `--bench`): a quick run that only keeps the code working.
        o.iters = 200;
        o.rounds = 2;
    }
    let mut a = args.into_iter();
    while let Some(x) = a.next() {
        let mut num = |n: &str| -> Result<usize, String> {
            a.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{n} needs a number"))
        };
        match x.as_str() {
            "-n" => o.iters = num("-n")?.max(1),
            "--rounds" => o.rounds = num("--rounds")?.max(1),
            "--size" => o.size = num("--size")?.clamp(1, 1 << 20),
            "--timeout" => o.timeout = Duration::from_secs(num("--timeout")?.max(1) as u64),
            "--child" => o.child = true,
            // Added by `cargo bench`.
            "--bench" => {}
            "--self-loop" => o.self_loop = true,
            "--aa" => o.aa = true,
            "--only" => match a.next().as_deref() {
                Some(m @ ("raw" | "safe")) => o.only = Some(m.to_string()),
                _ => return Err("--only needs raw or safe".into()),
            },
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.aa && o.self_loop {
        return Err("--aa applies to the ping-pong, not to --self-loop".into());
    }
    Ok(o)
}

fn open() -> Result<(ofi::safe::Domain, Ep<Rdm>), String> {
    let info = Hints::<Rdm>::new()
        .first()
        .map_err(|e| format!("getinfo: {e}"))?;
    let fabric = Fabric::open(&info).map_err(|e| format!("fabric: {e}"))?;
    let domain = fabric.domain(&info).map_err(|e| format!("domain: {e}"))?;
    let ep = domain
        .endpoint(&info)
        .cq_size(64)
        .build()
        .map_err(|e| format!("endpoint: {e}"))?;
    Ok((domain, ep))
}

const RECV_CTX: usize = 1 << 40;
const SEND_CTX: usize = (1 << 40) + 1;

/// One raw completion (spinning), its context. Both modes' wait helpers are inlined
/// into their loops, as a latency-bound program's would be (called out of line, the
/// safe one hands back a 56-byte `Completion` through memory where the raw one hands
/// back an integer context: docs/PERFORMANCE.md, "Safe layer overhead").
#[inline(always)]
fn raw_wait(ep: &Ep<Rdm>, deadline: Instant) -> Result<usize, String> {
    let mut e = [CqTaggedEntry::default()];
    let mut spins = 0u32;
    loop {
        match ep.raw_cq().read(&mut e) {
            Ok(_) => return Ok(e[0].op_context),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => return Err(format!("cq read: {err}")),
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1 << 16) && Instant::now() > deadline {
            return Err("timed out".into());
        }
    }
}

/// Defines a raw ping-pong round: `iters` round trips; the parent records each. Two
/// instances, which differ only in their contexts so that the compiler cannot merge
/// them into one function: `raw_round`, and `raw_round_again`, which `--aa` runs in
/// place of the safe rounds to measure what the method itself reports for two copies
/// of the same loop at different addresses.
macro_rules! raw_round_fn {
    ($name:ident, $recv_ctx:expr, $send_ctx:expr) => {
        #[inline(never)]
        fn $name(
            ep: &Ep<Rdm>,
            peer: Peer,
            o: &Opts,
            parent: bool,
            rtts: &mut Vec<u64>,
        ) -> Result<(), String> {
            let deadline = Instant::now() + o.timeout;
            let mut tx = vec![0xa5u8; o.size];
            let mut rx = vec![0u8; o.size];
            let post_recv = |rx: &mut Vec<u8>| {
                // SAFETY: `rx` outlives the receive: every receive posted here is completed
                // (raw_wait below) before `rx` is dropped or reposted.
                unsafe {
                    ep.raw().recv(
                        rx.as_mut_ptr(),
                        rx.len(),
                        std::ptr::null_mut(),
                        ADDR_UNSPEC,
                        $recv_ctx,
                    )
                }
                .map_err(|e| format!("recv: {e}"))
            };
            let send = |tx: &mut Vec<u8>| {
                // SAFETY: `tx` is neither changed nor dropped before the send's completion.
                unsafe {
                    ep.raw().send(
                        tx.as_ptr(),
                        tx.len(),
                        std::ptr::null_mut(),
                        peer.fi_addr(),
                        $send_ctx,
                    )
                }
                .map_err(|e| format!("send: {e}"))
            };
            post_recv(&mut rx)?;
            for i in 0..=o.iters {
                // The extra exchange (i == iters) completes the receive posted last.
                let last = i == o.iters;
                if parent {
                    let t0 = Instant::now();
                    send(&mut tx)?;
                    let (mut s, mut r) = (false, false);
                    while !(s && r) {
                        match raw_wait(ep, deadline)? {
                            c if c == $send_ctx => s = true,
                            c if c == $recv_ctx => r = true,
                            c => return Err(format!("unexpected context {c}")),
                        }
                    }
                    if !last {
                        rtts.push(t0.elapsed().as_nanos() as u64);
                        post_recv(&mut rx)?;
                    }
                } else {
                    while raw_wait(ep, deadline)? != $recv_ctx {}
                    if !last {
                        post_recv(&mut rx)?;
                    }
                    send(&mut tx)?;
                    while raw_wait(ep, deadline)? != $send_ctx {}
                }
            }
            Ok(())
        }
    };
}

raw_round_fn!(raw_round, RECV_CTX, SEND_CTX);
raw_round_fn!(raw_round_again, RECV_CTX + 2, SEND_CTX + 2);

/// One safe completion (spinning), as [`raw_wait`].
#[inline(always)]
fn safe_wait(ep: &mut Ep<Rdm>, deadline: Instant) -> Result<ofi::safe::Completion, String> {
    let mut spins = 0u32;
    loop {
        if let Some(c) = ep.poll().map_err(|e| format!("completion: {e}"))? {
            return Ok(c);
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1 << 16) && Instant::now() > deadline {
            return Err("timed out".into());
        }
    }
}

/// Safe ping-pong, same shape as `raw_round`, buffers moving in and out. Each mode's
/// round is a function of its own (`#[inline(never)]`), as the twins of `--aa` are.
#[inline(never)]
fn safe_round(
    ep: &mut Ep<Rdm>,
    peer: Peer,
    o: &Opts,
    parent: bool,
    rtts: &mut Vec<u64>,
) -> Result<(), String> {
    let deadline = Instant::now() + o.timeout;
    let mut tx = Some(Buf::from(vec![0xa5u8; o.size]));
    let mut rx = Some(Buf::new(o.size));
    let take = |b: &mut Option<Buf>| b.take().ok_or_else(|| "buffer missing".to_string());
    ep.recv(take(&mut rx)?).map_err(|e| format!("recv: {e}"))?;
    for i in 0..=o.iters {
        // The extra exchange (i == iters) completes the receive posted last.
        let last = i == o.iters;
        if parent {
            let t0 = Instant::now();
            ep.send(take(&mut tx)?, peer)
                .map_err(|e| format!("send: {e}"))?;
            while tx.is_none() || rx.is_none() {
                let c = safe_wait(ep, deadline)?;
                match c.kind {
                    OpKind::Send => tx = c.buf,
                    OpKind::Recv => rx = c.buf,
                    k => return Err(format!("unexpected {k:?}")),
                }
            }
            if !last {
                rtts.push(t0.elapsed().as_nanos() as u64);
                ep.recv(take(&mut rx)?).map_err(|e| format!("recv: {e}"))?;
            }
        } else {
            while rx.is_none() {
                let c = safe_wait(ep, deadline)?;
                match c.kind {
                    OpKind::Recv => rx = c.buf,
                    k => return Err(format!("unexpected {k:?}")),
                }
            }
            if !last {
                ep.recv(take(&mut rx)?).map_err(|e| format!("recv: {e}"))?;
            }
            ep.send(take(&mut tx)?, peer)
                .map_err(|e| format!("send: {e}"))?;
            while tx.is_none() {
                let c = safe_wait(ep, deadline)?;
                match c.kind {
                    OpKind::Send => tx = c.buf,
                    k => return Err(format!("unexpected {k:?}")),
                }
            }
        }
    }
    Ok(())
}

/// One process, the endpoint sending to itself: `iters` × (post receive, post send,
/// read both completions), raw then safe, per round; ns per pair.
fn self_loop(o: &Opts) -> Result<(), String> {
    let (_domain, mut ep) = open()?;
    let me = ep
        .insert_peer(&ep.addr().clone())
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + o.timeout;
    println!(
        "safe_overhead --self-loop: provider {}, {} B, {} rounds x {} send+recv pairs",
        ep.provider(),
        o.size,
        o.rounds,
        o.iters
    );
    let (mut raws, mut safes) = (vec![0.0], vec![0.0]);
    let run_raw = o.only.as_deref() != Some("safe");
    let run_safe = o.only.as_deref() != Some("raw");
    for _ in 0..o.rounds {
        if run_raw {
            let tx = vec![0xa5u8; o.size];
            let mut rx = vec![0u8; o.size];
            let t0 = Instant::now();
            for _ in 0..o.iters {
                // SAFETY: both buffers outlive the operations: their completions are read
                // (below) before the next iteration reuses them.
                unsafe {
                    ep.raw()
                        .recv(
                            rx.as_mut_ptr(),
                            rx.len(),
                            std::ptr::null_mut(),
                            ADDR_UNSPEC,
                            RECV_CTX,
                        )
                        .map_err(|e| format!("recv: {e}"))?;
                    ep.raw()
                        .send(
                            tx.as_ptr(),
                            tx.len(),
                            std::ptr::null_mut(),
                            me.fi_addr(),
                            SEND_CTX,
                        )
                        .map_err(|e| format!("send: {e}"))?;
                }
                raw_wait(&ep, deadline)?;
                raw_wait(&ep, deadline)?;
            }
            raws.push(t0.elapsed().as_nanos() as f64 / o.iters as f64);
        }
        if !run_safe {
            continue;
        }
        let mut txb = Some(Buf::from(vec![0xa5u8; o.size]));
        let mut rxb = Some(Buf::new(o.size));
        let t0 = Instant::now();
        for _ in 0..o.iters {
            let b = rxb.take().ok_or("no rx buffer")?;
            ep.recv(b).map_err(|e| format!("recv: {e}"))?;
            let b = txb.take().ok_or("no tx buffer")?;
            ep.send(b, me).map_err(|e| format!("send: {e}"))?;
            while txb.is_none() || rxb.is_none() {
                let c = safe_wait(&mut ep, deadline)?;
                match c.kind {
                    OpKind::Send => txb = c.buf,
                    _ => rxb = c.buf,
                }
            }
        }
        safes.push(t0.elapsed().as_nanos() as f64 / o.iters as f64);
    }
    // Drop the placeholder of a mode that ran (kept for one that did not).
    if raws.len() > 1 {
        raws.remove(0);
    }
    if safes.len() > 1 {
        safes.remove(0);
    }
    raws.sort_by(f64::total_cmp);
    safes.sort_by(f64::total_cmp);
    let (r, s) = (raws[raws.len() / 2], safes[safes.len() / 2]);
    println!(
        "  raw  {r:.1} ns per pair (rounds {:.1}..{:.1})\n  safe {s:.1} ns per pair (rounds {:.1}..{:.1})\n  safe - raw: {:+.1} ns per pair = {:+.1} ns per operation (post or completion)",
        raws[0],
        raws[raws.len() - 1],
        safes[0],
        safes[safes.len() - 1],
        s - r,
        (s - r) / 4.0
    );
    Ok(())
}

/// The second mode's round: the safe layer, or with `--aa` the raw loop's twin.
fn second_round(
    ep: &mut Ep<Rdm>,
    peer: Peer,
    o: &Opts,
    parent: bool,
    rtts: &mut Vec<u64>,
) -> Result<(), String> {
    if o.aa {
        raw_round_again(ep, peer, o, parent, rtts)
    } else {
        safe_round(ep, peer, o, parent, rtts)
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

fn run(o: &Opts) -> Result<(), String> {
    let (_domain, mut ep) = open()?;
    let (peer, mut child, mut lines, mut child_in) = if o.child {
        println!("{}", ep.addr());
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        let mut l = String::new();
        std::io::stdin()
            .read_line(&mut l)
            .map_err(|e| e.to_string())?;
        let a: EpAddr = l.trim().parse().map_err(|e| format!("{e}"))?;
        (
            ep.insert_peer(&a).map_err(|e| e.to_string())?,
            None,
            None,
            None,
        )
    } else {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut c = Command::new(exe)
            .args([
                "--child",
                "-n",
                &o.iters.to_string(),
                "--rounds",
                &o.rounds.to_string(),
            ])
            .args([
                "--size",
                &o.size.to_string(),
                "--timeout",
                &o.timeout.as_secs().to_string(),
            ])
            .args(o.only.iter().flat_map(|m| ["--only", m.as_str()]))
            .args(o.aa.then_some("--aa"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
        let mut lines = BufReader::new(c.stdout.take().ok_or("no stdout")?).lines();
        let first = lines
            .next()
            .ok_or("child exited")?
            .map_err(|e| e.to_string())?;
        let a: EpAddr = first.trim().parse().map_err(|e| format!("{e}"))?;
        let mut cin = c.stdin.take().ok_or("no stdin")?;
        writeln!(cin, "{}", ep.addr()).map_err(|e| e.to_string())?;
        cin.flush().map_err(|e| e.to_string())?;
        (
            ep.insert_peer(&a).map_err(|e| e.to_string())?,
            Some(c),
            Some(lines),
            Some(cin),
        )
    };
    let parent = !o.child;
    let (mut raw, mut safe) = (Vec::new(), Vec::new());
    let (mut raw_med, mut safe_med) = (Vec::new(), Vec::new());
    // Per round: safe mean − raw mean (ns).
    let mut mean_diff = Vec::new();
    // Warm-up of both paths, not recorded.
    let warm = Opts {
        iters: (o.iters / 10).max(1),
        only: o.only.clone(),
        ..*o
    };
    let run_raw = o.only.as_deref() != Some("safe");
    let run_safe = o.only.as_deref() != Some("raw");
    if run_raw {
        raw_round(&ep, peer, &warm, parent, &mut Vec::new())?;
    }
    if run_safe {
        second_round(&mut ep, peer, &warm, parent, &mut Vec::new())?;
    }
    for round in 0..o.rounds {
        // Alternate which mode goes first, so neither always runs second.
        let mut r = Vec::with_capacity(o.iters);
        let mut s = Vec::with_capacity(o.iters);
        if round % 2 == 1 && run_safe {
            second_round(&mut ep, peer, o, parent, &mut s)?;
        }
        if run_raw {
            raw_round(&ep, peer, o, parent, &mut r)?;
        }
        if round % 2 == 0 && run_safe {
            second_round(&mut ep, peer, o, parent, &mut s)?;
        }
        if parent {
            r.sort_unstable();
            s.sort_unstable();
            raw_med.push(pct(&r, 0.5));
            safe_med.push(pct(&s, 0.5));
            if !r.is_empty() && !s.is_empty() {
                let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
                mean_diff.push(mean(&s) - mean(&r));
            }
            raw.extend(r);
            safe.extend(s);
        }
    }
    if let Some(mut c) = child.take() {
        drop(child_in.take());
        drop(lines.take());
        let st = c.wait().map_err(|e| e.to_string())?;
        if !st.success() {
            return Err(format!("child failed: {st}"));
        }
        raw.sort_unstable();
        safe.sort_unstable();
        raw_med.sort_by(f64::total_cmp);
        safe_med.sort_by(f64::total_cmp);
        let mid = |v: &[f64]| v[v.len() / 2];
        // With --aa the second mode is the raw loop's twin, named raw'.
        let second = if o.aa { "raw'" } else { "safe" };
        println!(
            "safe_overhead: provider {}, {} B, {} rounds x {} round trips per mode{}",
            ep.provider(),
            o.size,
            o.rounds,
            o.iters,
            if o.aa {
                " (--aa: raw' is a second copy of the raw loop)"
            } else {
                ""
            }
        );
        for (name, all, meds) in [("raw ", &raw, &raw_med), (second, &safe, &safe_med)] {
            println!(
                "  {name}: median {:.2} us (p10 {:.2}, p90 {:.2}, p99 {:.2}); round medians {:.2}..{:.2}, median of medians {:.2} us",
                pct(all, 0.5),
                pct(all, 0.1),
                pct(all, 0.9),
                pct(all, 0.99),
                meds.first().copied().unwrap_or(0.0),
                meds.last().copied().unwrap_or(0.0),
                mid(meds)
            );
        }
        println!(
            "  {second} - raw (median of round medians): {:+.3} us",
            mid(&safe_med) - mid(&raw_med)
        );
        if !mean_diff.is_empty() {
            mean_diff.sort_by(f64::total_cmp);
            println!(
                "  {second} - raw (median of the rounds' differences of means): {:+.1} ns (rounds {:+.1}..{:+.1})",
                mid(&mean_diff),
                mean_diff[0],
                mean_diff[mean_diff.len() - 1]
            );
        }
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("safe_overhead: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let r = if o.self_loop { self_loop(&o) } else { run(&o) };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "safe_overhead {}: {e}",
                if o.child { "child" } else { "parent" }
            );
            std::process::ExitCode::FAILURE
        }
    }
}
