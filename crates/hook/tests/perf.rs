//! The perf hook: the summary's counts equal the operations the test performed, on the
//! log and in the JSON file (`FI_OFI_HOOK_PERF_FILE`, set in a child process).

mod common;

use std::time::Duration;

use common::{next, pair, registry, WAIT};
use ofi::{EpType, Errno};

/// Perform a known set of operations over shm: 10 sends, 3 injects, 13 receives, and
/// count the CQ reads made. Returns (cq reads on a, cq reads on b).
fn workload() -> (u64, u64) {
    let reg = registry("perf");
    let p = pair(&reg, "shm", EpType::Rdm);
    let mut bufs = vec![[0u8; 64]; 13];
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: `bufs` outlives the receives (all complete below).
        unsafe {
            p.b.ep
                .recv(b.as_mut_ptr(), 64, std::ptr::null_mut(), p.to_a, 100 + i)
                .unwrap()
        };
    }
    let msg = [7u8; 40];
    for i in 0..10 {
        // SAFETY: `msg` outlives the sends (all complete below).
        unsafe {
            p.a.ep
                .send(msg.as_ptr(), msg.len(), std::ptr::null_mut(), p.to_b, 1 + i)
                .unwrap()
        };
    }
    for _ in 0..3 {
        p.a.ep.inject(&msg[..16], p.to_b).unwrap();
    }
    let (mut reads_a, mut reads_b) = (0u64, 0u64);
    let (mut got_a, mut got_b) = (0, 0);
    let end = std::time::Instant::now() + WAIT;
    let mut e = [ofi::abi::raw::CqDataEntry::default()];
    while (got_a < 10 || got_b < 13) && std::time::Instant::now() < end {
        reads_a += 1;
        match p.a.cq.read(&mut e) {
            Ok(n) => got_a += n,
            Err(err) => assert_eq!(err.code(), Errno::EAGAIN),
        }
        reads_b += 1;
        match p.b.cq.read(&mut e) {
            Ok(n) => got_b += n,
            Err(err) => assert_eq!(err.code(), Errno::EAGAIN),
        }
    }
    assert_eq!((got_a, got_b), (10, 13));
    assert!(next(&p.a.cq, Duration::from_millis(10)).is_none());
    drop(p);
    // `next` above made reads too: they are not counted here, so report them apart.
    (reads_a, reads_b)
}

#[test]
fn summary_in_process() {
    workload();
    // Other tests of this binary may close fabrics too: find ours by its figures.
    let found = ofi_hook::perf::closed_summaries()
        .into_iter()
        .any(|(_, s)| {
            s.provider == "shm"
                && s.get(ofi_hook::Op::Send).calls == 10
                && s.get(ofi_hook::Op::Inject).calls == 3
                && s.get(ofi_hook::Op::Recv).calls == 13
                && s.get(ofi_hook::Op::Recv).bytes == 13 * 64
        });
    assert!(found, "{:#?}", ofi_hook::perf::closed_summaries());
}

/// The child side of `summary_counts_equal_the_operations` (which runs itself again
/// in a child process with `OFI_HOOK_TEST_CHILD` set).
fn perf_workload_child() {
    let (a, b) = workload();
    println!("CQREADS {a} {b}");
}

#[test]
fn summary_counts_equal_the_operations() {
    let Some((dir, _, run)) = common::run_child_with_perf_file(
        "summary_counts_equal_the_operations",
        perf_workload_child,
        |_| {},
        "perf-%p.json",
    ) else {
        return; // This process was the child.
    };
    run.assert_ok_printing("CQREADS ");
    let stdout = &run.stdout;
    let reads: Vec<u64> = stdout
        .lines()
        .find_map(|l| l.split("CQREADS ").nth(1))
        .expect("child output")
        .split_whitespace()
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "one file, named with the child's pid");
    let text = std::fs::read_to_string(entries[0].as_ref().unwrap().path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one fabric, one JSON line: {text}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["hook"], "perf");
    assert_eq!(v["provider"], "shm");
    let ops = &v["ops"];
    assert_eq!(ops["send"]["calls"], 10);
    assert_eq!(ops["send"]["bytes"], 400);
    assert_eq!(ops["inject"]["calls"], 3);
    assert_eq!(ops["inject"]["bytes"], 48);
    assert_eq!(ops["recv"]["calls"], 13);
    assert_eq!(ops["recv"]["bytes"], 13 * 64);
    assert_eq!(ops["send"]["errors"], 0);
    // Both CQs' reads, including the final `next` polls of a (at least one).
    let cq_reads = ops["cq_read"]["calls"].as_u64().unwrap();
    assert!(
        cq_reads > reads[0] + reads[1],
        "{cq_reads} reads counted, {} + {} made plus the final polls",
        reads[0],
        reads[1]
    );
    // The histogram accounts for every call.
    let hist: u64 = ops["send"]["hist_lt_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_u64().unwrap())
        .sum();
    assert_eq!(hist, 10);
    assert!(
        ops.get("tsend").is_none(),
        "operations not called are left out"
    );
}
