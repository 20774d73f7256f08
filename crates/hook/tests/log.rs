//! What the hooks write on the log: the perf summary, the trace lines (and their rate
//! limit), the debug warnings naming the object — and no debug warning for correct
//! use. Each test captures the log of its own thread.

mod common;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{next, pair, post_recv, registry};
use ofi::cq::CqAttr;
use ofi::{CqFormat, EpType, Errno, OpFlags, WaitObj};
use ofi_testkit::assert_contains_all;
use tracing::Level;

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Run `f` with this thread's log captured at `level`.
fn capture<T>(level: Level, f: impl FnOnce() -> T) -> (T, String) {
    capture_with(level, |_| f())
}

/// [`capture`], with `f` given the log so far (to wait for a line).
fn capture_with<T>(level: Level, f: impl FnOnce(&Buf) -> T) -> (T, String) {
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    let r = tracing::subscriber::with_default(sub, || f(&buf));
    (r, buf.text())
}

impl Buf {
    /// What was logged so far.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[test]
fn perf_summary_is_logged_at_fabric_close() {
    let ((), log) = capture(Level::INFO, || {
        let reg = registry("perf");
        let p = pair(&reg, "udp", EpType::Dgram);
        for _ in 0..5 {
            p.a.ep.inject(&[1u8; 8], p.to_b).unwrap();
        }
        drop(p);
    });
    let line = log
        .lines()
        .find(|l| l.contains("perf fabric #") && l.contains(" inject: "))
        .unwrap_or_else(|| panic!("no inject line in:\n{log}"));
    assert!(
        line.contains("calls 5 bytes 40 eagain 0 errors 0"),
        "{line}"
    );
    assert!(line.contains("INFO"), "{line}");
    assert!(log.contains("perf summary of fabric #"), "{log}");
}

#[test]
fn trace_logs_calls_with_arguments_and_results_rate_limited() {
    let (calls, log) = capture_with(Level::TRACE, |buf| {
        let reg = registry("trace");
        let p = pair(&reg, "udp", EpType::Dgram);
        p.a.ep.inject(&[1u8; 8], p.to_b).unwrap();
        let mut e = [ofi::abi::raw::CqDataEntry::default()];
        let logged = |buf: &Buf| buf.text().matches("cq_read()").count() as u64;
        // Past the default limit of 1000 lines per second: read until the log has
        // left out at least 100 reads (bounded in count).
        let mut calls = 0u64;
        while calls < 100_000 && calls - logged(buf).min(calls) < 100 {
            for _ in 0..100 {
                let _ = p.a.cq.read(&mut e);
            }
            calls += 100;
        }
        assert!(
            calls - logged(buf) >= 100,
            "{calls} reads and no line left out"
        );
        // The next line after the limit's second is over says how many were left
        // out: read until it is there (bounded wait for a line, not a timed assertion).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !buf.text().contains("line(s) suppressed before this") {
            assert!(
                Instant::now() < deadline,
                "no line after the limit within 10 s"
            );
            assert_eq!(p.a.cq.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
            calls += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        calls
    });
    let inject = log
        .lines()
        .find(|l| l.contains(" inject(buf="))
        .unwrap_or_else(|| panic!("no inject line in:\n{}", &log[..log.len().min(3000)]));
    assert_contains_all(inject, &["len=8", ") = () ", "TRACE", "endpoint #"]);
    assert_contains_all(inject, &["prov=ofi_hook_trace subsys=ep_data"]);
    assert!(
        log.lines().any(|l| l.contains(" bind(target=cq #")),
        "control calls are traced too"
    );
    // Every read is accounted for: traced, or counted in a "suppressed" note (only
    // reads were called while the limit held).
    let traced = log.lines().filter(|l| l.contains("cq_read()")).count() as u64;
    let suppressed: u64 = log
        .lines()
        .filter_map(|l| {
            let (head, _) = l.split_once(" line(s) suppressed before this")?;
            head.rsplit('(').next()?.trim().parse::<u64>().ok()
        })
        .sum();
    assert!(suppressed >= 100, "{suppressed} suppressed");
    assert_eq!(
        traced + suppressed,
        calls,
        "{traced} traced and {suppressed} suppressed of {calls} cq_read calls"
    );
}

#[test]
fn debug_is_quiet_for_correct_use() {
    let (_, log) = capture(Level::WARN, || {
        let reg = registry("debug");
        let p = pair(&reg, "udp", EpType::Dgram);
        let mut bufs = vec![[0u8; 64]; 10];
        for (i, b) in bufs.iter_mut().enumerate() {
            post_recv(&p, b, 1 + i);
        }
        let msg = [3u8; 16];
        for i in 0..10 {
            // SAFETY: `msg` outlives the sends (completions read below).
            unsafe {
                p.a.ep
                    .send(msg.as_ptr(), 16, std::ptr::null_mut(), p.to_b, 100 + i)
                    .unwrap()
            };
        }
        let end = Instant::now() + common::WAIT;
        let (mut a, mut b) = (0, 0);
        while (a < 10 || b < 10) && Instant::now() < end {
            a += next(&p.a.cq, Duration::ZERO).is_some() as usize;
            b += next(&p.b.cq, Duration::ZERO).is_some() as usize;
        }
        assert_eq!((a, b), (10, 10));
    });
    assert!(!log.contains("WARN"), "{log}");
}

#[test]
fn debug_warns_about_misuse_naming_the_object() {
    let ((), log) = capture(Level::WARN, || {
        let reg = registry("debug");
        let p = pair(&reg, "udp", EpType::Dgram);
        let mut bufs = vec![[0u8; 64]; 4];
        let (b0, rest) = bufs.split_at_mut(1);
        // Context reuse while in flight.
        post_recv(&p, &mut b0[0], 7);
        post_recv(&p, &mut rest[0], 7);
        // Outstanding at close: context 9 (and one 7) never completes.
        post_recv(&p, &mut rest[1], 9);
        // A data call on an endpoint that is not enabled.
        let ep = p.domain.endpoint(&p.info).unwrap();
        ep.bind(&p.a.cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        ep.bind_av(&p.a.av).unwrap();
        // SAFETY: the call is refused (not enabled); nothing is kept.
        let e = unsafe { ep.send([0u8; 4].as_ptr(), 4, std::ptr::null_mut(), p.to_b, 5) };
        assert!(e.is_err(), "a disabled endpoint refuses data calls");
        // An overrun: more receives in flight than a small CQ holds.
        let cq = p
            .domain
            .cq_open(&CqAttr {
                size: 2,
                wait_obj: WaitObj::None,
                ..CqAttr::with_format(CqFormat::Data)
            })
            .unwrap();
        let ep2 = p.domain.endpoint(&p.info).unwrap();
        ep2.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        ep2.bind_av(&p.b.av).unwrap();
        ep2.enable().unwrap();
        let mut more = vec![[0u8; 16]; 3];
        for (i, b) in more.iter_mut().enumerate() {
            // SAFETY: `more` outlives the endpoint (dropped first, below).
            unsafe {
                ep2.recv(b.as_mut_ptr(), 16, std::ptr::null_mut(), p.to_a, 50 + i)
                    .unwrap()
            };
        }
        drop(ep2);
        drop(ep);
        drop(cq);
        drop(p);
        drop(bufs);
        drop(more);
    });
    let has = |s: &str| log.lines().any(|l| l.contains("WARN") && l.contains(s));
    assert!(
        has("context 0x7 of recv reused while recv on endpoint #"),
        "{log}"
    );
    assert!(has("send on an endpoint that is not enabled"), "{log}");
    assert!(has("operations in flight, more than its size 2"), "{log}");
    assert!(
        has("closed with 2 operation(s) outstanding: recv context 0x7, recv context 0x9"),
        "{log}"
    );
    assert!(has("closed with 3 operation(s) outstanding"), "{log}");
}
