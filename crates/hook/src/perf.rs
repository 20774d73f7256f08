//! The perf hook (`ofi_hook_perf`): per operation, the number of calls, bytes, errors,
//! `FI_EAGAIN` returns and time spent in the call, with a latency histogram; a summary
//! at fabric close on the log, and as JSON in a file on request.
//!
//! # Parameters
//!
//! | variable | default | meaning |
//! | --- | --- | --- |
//! | `FI_OFI_HOOK_PERF_FILE` | unset | append the summary of each fabric, one JSON object per line, to this file (`%p` becomes the process id) |
//!
//! The summary lines are at info level; a warning follows when calls failed with an
//! error other than `FI_EAGAIN`. Time is the wall time of the call (two clock reads
//! per call; the clock's own cost is included). Histogram bucket `i` counts calls that
//! took less than `256 << i` ns (the last bucket: the rest).
//!
//! [`closed_summaries`] keeps the summaries of the last fabrics closed in-process.
//!
//! Counters are relaxed atomics: counts are exact, the summary of a fabric that is
//! still in use by other threads at close is a snapshot.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ofi_core::fabric::Fabric;
use ofi_core::param::ParamType;
use ofi_core::provider::Host;
use ofi_core::{Errno, Info, Result};

use crate::{Hook, HookParam, HookedCall, ObjName, Op};

/// Number of histogram buckets.
pub const BUCKETS: usize = 20;

/// The upper bound (ns, exclusive) of histogram bucket `i` (`u64::MAX` for the last).
pub fn bucket_limit(i: usize) -> u64 {
    if i + 1 >= BUCKETS {
        u64::MAX
    } else {
        256u64 << i
    }
}

fn bucket_of(ns: u64) -> usize {
    let log2 = 63 - (ns | 1).leading_zeros() as usize;
    log2.saturating_sub(7).min(BUCKETS - 1)
}

struct OpStat {
    calls: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    eagain: AtomicU64,
    ns_total: AtomicU64,
    ns_min: AtomicU64,
    ns_max: AtomicU64,
    hist: [AtomicU64; BUCKETS],
}

impl Default for OpStat {
    fn default() -> OpStat {
        OpStat {
            calls: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            eagain: AtomicU64::new(0),
            ns_total: AtomicU64::new(0),
            ns_min: AtomicU64::new(u64::MAX),
            ns_max: AtomicU64::new(0),
            hist: Default::default(),
        }
    }
}

/// One operation's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpSummary {
    /// Calls made.
    pub calls: u64,
    /// Payload bytes of those calls.
    pub bytes: u64,
    /// Calls that failed with an error other than `FI_EAGAIN`.
    pub errors: u64,
    /// Calls that returned `FI_EAGAIN`.
    pub eagain: u64,
    /// Time in the calls (ns).
    pub ns_total: u64,
    /// Shortest call (ns).
    pub ns_min: u64,
    /// Longest call (ns).
    pub ns_max: u64,
    /// Histogram (see [`bucket_limit`]).
    pub hist: [u64; BUCKETS],
}

impl OpSummary {
    /// The upper bound of the bucket holding quantile `q` (0..1) of the calls.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let want = ((self.calls as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= want {
                return bucket_limit(i).min(self.ns_max.max(1));
            }
        }
        self.ns_max
    }
}

/// A fabric's figures: every operation called at least once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfSummary {
    /// The provider beneath.
    pub provider: String,
    /// Per operation.
    pub ops: Vec<(Op, OpSummary)>,
}

impl PerfSummary {
    /// The figures of `op` (all zero if it was not called).
    pub fn get(&self, op: Op) -> OpSummary {
        self.ops
            .iter()
            .find(|(o, _)| *o == op)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    }

    /// The JSON form (one line, no trailing newline).
    pub fn to_json(&self, fabric: &ObjName) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "{{\"hook\":\"perf\",\"provider\":{},\"fabric\":{},\"pid\":{},\"ops\":{{",
            json_str(&self.provider),
            fabric.id,
            std::process::id()
        );
        for (k, (op, o)) in self.ops.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            let hist: Vec<String> = o
                .hist
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let lim = bucket_limit(i);
                    let lim = if lim == u64::MAX {
                        "null".to_string()
                    } else {
                        lim.to_string()
                    };
                    format!("[{lim},{n}]")
                })
                .collect();
            let _ = write!(
                s,
                "\"{}\":{{\"calls\":{},\"bytes\":{},\"errors\":{},\"eagain\":{},\"ns_total\":{},\"ns_min\":{},\"ns_max\":{},\"hist_lt_ns\":[{}]}}",
                op.name(),
                o.calls,
                o.bytes,
                o.errors,
                o.eagain,
                o.ns_total,
                o.ns_min,
                o.ns_max,
                hist.join(",")
            );
        }
        s.push_str("}}");
        s
    }
}

fn json_str(t: &str) -> String {
    let mut s = String::from("\"");
    for c in t.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// How many closed fabrics' summaries [`closed_summaries`] keeps.
pub const KEEP_CLOSED: usize = 64;

static CLOSED: Mutex<VecDeque<(ObjName, PerfSummary)>> = Mutex::new(VecDeque::new());

/// The summaries of the last [`KEEP_CLOSED`] fabrics the perf hook of this process
/// (this copy of the crate: linked in) closed, oldest first, each with its fabric's
/// name — what tests in other crates can assert on without parsing the log.
pub fn closed_summaries() -> Vec<(ObjName, PerfSummary)> {
    CLOSED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect()
}

/// The perf hook of one fabric.
pub struct Perf {
    stats: Box<[OpStat]>,
    prov: String,
    file: Option<String>,
}

impl Perf {
    #[inline]
    fn record<R>(&self, op: Op, bytes: usize, t0: Instant, r: &Result<R>) {
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        let s = &self.stats[op as usize];
        s.calls.fetch_add(1, Ordering::Relaxed);
        s.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        s.ns_total.fetch_add(ns, Ordering::Relaxed);
        s.ns_min.fetch_min(ns, Ordering::Relaxed);
        s.ns_max.fetch_max(ns, Ordering::Relaxed);
        s.hist[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        if let Err(e) = r {
            if e.code() == Errno::EAGAIN {
                s.eagain.fetch_add(1, Ordering::Relaxed);
            } else {
                s.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The figures so far.
    pub fn summary(&self) -> PerfSummary {
        let ops = Op::ALL
            .iter()
            .zip(self.stats.iter())
            .filter(|(_, s)| s.calls.load(Ordering::Relaxed) > 0)
            .map(|(op, s)| {
                let mut hist = [0u64; BUCKETS];
                for (h, a) in hist.iter_mut().zip(&s.hist) {
                    *h = a.load(Ordering::Relaxed);
                }
                (
                    *op,
                    OpSummary {
                        calls: s.calls.load(Ordering::Relaxed),
                        bytes: s.bytes.load(Ordering::Relaxed),
                        errors: s.errors.load(Ordering::Relaxed),
                        eagain: s.eagain.load(Ordering::Relaxed),
                        ns_total: s.ns_total.load(Ordering::Relaxed),
                        ns_min: s.ns_min.load(Ordering::Relaxed),
                        ns_max: s.ns_max.load(Ordering::Relaxed),
                        hist,
                    },
                )
            })
            .collect();
        PerfSummary {
            provider: self.prov.clone(),
            ops,
        }
    }

    fn write_file(&self, path: &str, line: &str) {
        let path = path.replace("%p", &std::process::id().to_string());
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = res {
            ofi_core::ofi_warn!(
                Self::NAME,
                "fabric",
                "FI_OFI_HOOK_PERF_FILE={path}: cannot write the summary: {e}"
            );
        }
    }
}

struct Ns(u64);

impl fmt::Display for Ns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n < 10_000 => write!(f, "{n} ns"),
            n if n < 10_000_000 => write!(f, "{:.1} us", n as f64 / 1e3),
            n => write!(f, "{:.1} ms", n as f64 / 1e6),
        }
    }
}

impl Hook for Perf {
    const NAME: &'static str = "ofi_hook_perf";
    type EpData = ();
    type CqData = ();

    const PARAMS: &'static [HookParam] = &[HookParam::new(
        "file",
        ParamType::String,
        "Append each fabric's summary as one JSON line to this file (%p: process id)",
        None,
    )];

    fn open(host: &Host, info: &Info, _inner: &Fabric) -> Result<Perf> {
        Ok(Perf {
            stats: (0..Op::ALL.len()).map(|_| OpStat::default()).collect(),
            prov: info.prov_name().to_string(),
            file: host.param_str("file")?,
        })
    }

    /// Times each data call and read, and counts its bytes and result.
    #[inline]
    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        let (Some(op), bytes) = (call.kind.op(), call.kind.bytes()) else {
            return call.forward();
        };
        let t0 = Instant::now();
        let r = call.forward();
        self.record(op, bytes, t0, &r);
        r
    }

    fn fabric_close(&self, fabric: &ObjName) {
        let s = self.summary();
        let name = Self::NAME;
        ofi_core::ofi_info!(
            name,
            "fabric",
            "perf summary of {fabric} over {}: {} operation kind(s)",
            s.provider,
            s.ops.len()
        );
        let mut failed = 0;
        for (op, o) in &s.ops {
            failed += o.errors;
            let mean = o.ns_total.checked_div(o.calls).unwrap_or(0);
            ofi_core::ofi_info!(name, "fabric",
                "perf {fabric} {op}: calls {} bytes {} eagain {} errors {} time mean {} min {} p50 < {} p99 < {} max {}",
                o.calls, o.bytes, o.eagain, o.errors, Ns(mean), Ns(o.ns_min), Ns(o.quantile_ns(0.5)),
                Ns(o.quantile_ns(0.99)), Ns(o.ns_max));
        }
        if failed > 0 {
            ofi_core::ofi_warn!(
                name,
                "fabric",
                "perf {fabric} over {}: {failed} call(s) failed with errors other than FI_EAGAIN",
                s.provider
            );
        }
        if let Some(path) = &self.file {
            self.write_file(path, &s.to_json(fabric));
        }
        let mut closed = CLOSED.lock().unwrap_or_else(|p| p.into_inner());
        if closed.len() == KEEP_CLOSED {
            closed.pop_front();
        }
        closed.push_back((*fabric, s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        let edges = [
            (0, 0),
            (255, 0),
            (256, 1),
            (511, 1),
            (u64::MAX, BUCKETS - 1),
        ];
        for (ns, bucket) in edges {
            assert_eq!(bucket_of(ns), bucket, "{ns} ns");
        }
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket_of(bucket_limit(i) - 1), i);
        }
    }

    #[test]
    fn quantiles_and_json() {
        let mut o = OpSummary {
            calls: 4,
            ns_max: 3000,
            ..OpSummary::default()
        };
        o.hist[0] = 3;
        o.hist[4] = 1;
        assert_eq!(o.quantile_ns(0.5), 256);
        assert_eq!(o.quantile_ns(0.99), 3000);
        let s = PerfSummary {
            provider: "u\"dp".into(),
            ops: vec![(Op::Send, o)],
        };
        let j = s.to_json(&ObjName {
            class: "fabric",
            id: 9,
        });
        assert!(
            j.starts_with("{\"hook\":\"perf\",\"provider\":\"u\\\"dp\",\"fabric\":9,"),
            "{j}"
        );
        assert!(j.contains("\"send\":{\"calls\":4,"), "{j}");
        assert!(j.contains("\"hist_lt_ns\":[[256,3],[4096,1]]"), "{j}");
    }
}
