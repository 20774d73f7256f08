//! End to end over udp with the fault hook on rxd's core (drop 10 %, duplicate 5 %,
//! reorder 5 % of the datagrams): `RXD_E2E_N` (default 5000) checksummed messages of
//! mixed sizes a → b, with a window of sends and receives outstanding; every message
//! arrives once, intact and in order (`FI_ORDER_SAS`), and every send completes. Then
//! RMA writes read back and fetch-adds under the same faults: each applied exactly once.
//!
//! The hook is process-wide (`ofi::apply_hooks_globally`), so this file is its own test
//! binary. The full 10^5 run: `RXD_E2E_N=100000 cargo test --release -p ofi-util-rxd
//! --test e2e -- --nocapture` (time in docs/providers/rxd.md).

mod common;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::{Errno, OpFlags};
use ofi_conformance::fixture::post_recv;
use ofi_conformance::node::{endpoint_in, poll};
use ofi_hook::fault::{self, FaultConfig};
use ofi_testkit::TestRng;

const MAX: usize = 150_000;

/// Message `k`: its sequence number, a checksum of the rest, then pseudo-random bytes
/// (70 % up to 256 bytes, 25 % up to 16 KiB, 5 % up to `MAX`).
fn message(k: u64) -> Vec<u8> {
    let mut rng = TestRng::seeded(k);
    let len = 16
        + match rng.below(20) {
            0 => rng.below((MAX - 16) as u64) as usize,
            1..=5 => rng.below(16384) as usize,
            _ => rng.below(256) as usize,
        };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[16..]);
    let sum = checksum(&v[16..]);
    v[..8].copy_from_slice(&k.to_le_bytes());
    v[8..16].copy_from_slice(&sum.to_le_bytes());
    v
}

/// FNV-1a.
fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn lossy_udp_delivers_every_message_once_intact_and_in_order() {
    let n: u64 = ofi_testkit::env_count("RXD_E2E_N", 5000);
    let _ = ofi::registry();
    ofi::apply_hooks_globally("fault").expect("fault hook");
    fault::set_config(Some(FaultConfig {
        seed: 42,
        drop: 0.10,
        dup: 0.05,
        reorder: 0.05,
        delay: 0.02,
        delay_for: Duration::from_micros(500),
        ..FaultConfig::default()
    }));

    let info = common::rxd_msg_info();
    let fabric = ofi::fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let open = || endpoint_in(&domain, &info);
    let (a_ep, a_cq, a_av, _a_addr) = open();
    let (b_ep, b_cq, _b_av, b_addr) = open();
    let to_b = a_av.insert(&[b_addr]).expect("insert")[0];

    const WINDOW: usize = 64;
    let mut bufs: Vec<Vec<u8>> = (0..WINDOW).map(|_| vec![0u8; MAX]).collect();
    // Receive slot i is posted with context i; slots are reposted in completion order.
    for (i, b) in bufs.iter_mut().enumerate() {
        // The buffers live until the end of the test, past every completion.
        post_recv(&b_ep, b, i).expect("fi_recv");
    }
    let mut inflight: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let (mut next_send, mut next_recv, mut sends_done) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let limit = Duration::from_secs(30 + n / 200);
    while next_recv < n || sends_done < n {
        assert!(
            start.elapsed() < limit,
            "stuck: sent {next_send}, send completions {sends_done}, received {next_recv}"
        );
        while next_send < n && inflight.len() < WINDOW {
            let m = message(next_send);
            // SAFETY: `m` is kept in `inflight` until its completion.
            match unsafe {
                a_ep.send(
                    m.as_ptr(),
                    m.len(),
                    std::ptr::null_mut(),
                    to_b,
                    next_send as usize,
                )
            } {
                Ok(()) => {
                    inflight.push_back((next_send, m));
                    next_send += 1;
                }
                Err(e) if e.code() == Errno::EAGAIN => break,
                Err(e) => panic!("send {next_send}: {e}"),
            }
        }
        while let Some(r) = poll(&a_cq) {
            let e = r.unwrap_or_else(|(c, e)| panic!("send {c} failed: {e:?}"));
            // Sends complete in order (acknowledged in sequence order).
            let (k, _) = inflight.pop_front().expect("a send was outstanding");
            assert_eq!(e.op_context as u64, k, "send completion order");
            sends_done += 1;
        }
        while let Some(r) = poll(&b_cq) {
            let e = r.unwrap_or_else(|(c, e)| panic!("receive {c} failed: {e:?}"));
            let slot = e.op_context;
            let b = &bufs[slot];
            assert!(e.len >= 16, "short message");
            let k = u64::from_le_bytes(b[..8].try_into().unwrap());
            let sum = u64::from_le_bytes(b[8..16].try_into().unwrap());
            assert_eq!(k, next_recv, "message lost, duplicated or out of order");
            assert_eq!(e.len, message(k).len(), "length of message {k}");
            assert_eq!(checksum(&b[16..e.len]), sum, "checksum of message {k}");
            next_recv += 1;
            let b = &mut bufs[slot];
            post_recv(&b_ep, b, slot).expect("fi_recv");
        }
    }
    let el = start.elapsed();

    // RMA and atomics under the same faults: writes of random sizes at random offsets
    // of a region of b, each read back and compared; fetch-adds on a counter.
    let mut region = vec![0u8; 1 << 20];
    // SAFETY: `region` outlives the registration (dropped first, below).
    let mr = unsafe {
        domain.mr_reg(
            region.as_mut_ptr(),
            region.len(),
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE,
            0,
            0x77,
            0,
        )
    }
    .expect("mr_reg");
    let key = mr.key();
    let wait_a = |what: &str| loop {
        assert!(start.elapsed() < limit, "{what}: stuck");
        if let Some(r) = poll(&a_cq) {
            return r.unwrap_or_else(|(c, e)| panic!("{what} {c} failed: {e:?}"));
        }
        let _ = b_cq.read::<CqTaggedEntry>(&mut []);
    };
    let rounds = (n / 100).clamp(20, 500);
    for i in 0..rounds {
        let mut rng = TestRng::seeded(i ^ 0xabc);
        let len = 1 + rng.below(70_000) as usize;
        let off = rng.below((region.len() - len) as u64) as usize;
        let data = rng.bytes(len);
        // SAFETY: `data` lives until the write completes (waited for below).
        unsafe {
            a_ep.write(
                data.as_ptr(),
                len,
                std::ptr::null_mut(),
                to_b,
                off as u64,
                key,
                1,
            )
        }
        .expect("fi_write");
        wait_a("write");
        let mut back = vec![0u8; len];
        // SAFETY: `back` lives until the read completes.
        unsafe {
            a_ep.read(
                back.as_mut_ptr(),
                len,
                std::ptr::null_mut(),
                to_b,
                off as u64,
                key,
                2,
            )
        }
        .expect("fi_read");
        wait_a("read");
        assert!(back == data, "RMA round {i}: read back differs");
    }
    let counter_off = region.len() as u64 - 8;
    let one = 1u64;
    for i in 0..rounds {
        let mut old = 0u64;
        // SAFETY: `one` and `old` live until the atomic completes.
        unsafe {
            a_ep.fetch_atomic(
                (&one as *const u64).cast(),
                1,
                std::ptr::null_mut(),
                (&mut old as *mut u64).cast(),
                std::ptr::null_mut(),
                to_b,
                counter_off,
                key,
                ofi::enums::Datatype::Uint64,
                ofi::enums::AtomicOp::Sum,
                3,
            )
        }
        .expect("fi_fetch_atomic");
        wait_a("fetch_atomic");
        assert_eq!(old, i, "fetch-add {i} saw {old} (applied twice or lost)");
    }
    drop(mr);
    let counter = u64::from_ne_bytes(region[region.len() - 8..].try_into().unwrap());
    assert_eq!(counter, rounds, "every fetch-add applied exactly once");

    let totals = fault::totals();
    println!(
        "rxd e2e: {n} messages in {el:?}; {rounds} RMA write/read and fetch-add rounds in {:?}; fault hook: {totals:?}",
        start.elapsed() - el
    );
    // The network really was lossy.
    assert!(totals.dropped > 0 && totals.duplicated > 0, "{totals:?}");
    fault::set_config(None);
    assert!(poll(&b_cq).is_none(), "an extra message arrived");
}
