//! A seeded random workload on the software device checked against a model of the
//! target's memory: writes of random sizes (fragmented when large) at random offsets,
//! reads back, fetch-adds, and sends whose receives are posted late (so RNR retries
//! happen), all on one RC queue pair; then two threads driving two queue pairs at once.
//! Seed: `OFI_RDMA_RANDOM_SEED`.

mod common;

use common::*;
use ofi_rdma::*;
use ofi_testkit::TestRng;

const MEM: usize = 256 * 1024;
const COUNTER: usize = MEM - 8;

#[test]
fn random_operations_match_the_model() {
    let mut rng = TestRng::from_env("OFI_RDMA_RANDOM_SEED", 2929);
    let a = Node::all_access(2 * MEM);
    let b = Node::all_access(MEM + 4096);
    let (qa, qb) = rc_pair(&a, &b, 7);
    let mut model = vec![0u8; MEM];
    let mut counter = 0u64;
    let rkey = b.mr.rkey();
    let base = b.buf.addr();
    for i in 0..300u64 {
        match rng.below(4) {
            0 => {
                let len = if rng.chance(10) {
                    rng.range(32 * 1024, 100 * 1024)
                } else {
                    rng.range(1, 2048)
                } as usize;
                let off = rng.below((COUNTER - len) as u64) as usize;
                let data = rng.bytes(len);
                a.buf.write(0, &data);
                a.post(
                    &qa,
                    i,
                    SendOp::RdmaWrite(Remote {
                        addr: base + off as u64,
                        rkey,
                    }),
                    0,
                    len,
                );
                let c = wait_wc(&a.scq, "write");
                assert_eq!((c.wr_id, c.status), (i, WcStatus::Success));
                model[off..off + len].copy_from_slice(&data);
            }
            1 => {
                let len = rng.range(1, 64 * 1024) as usize;
                let off = rng.below((COUNTER - len) as u64) as usize;
                a.post(
                    &qa,
                    i,
                    SendOp::RdmaRead(Remote {
                        addr: base + off as u64,
                        rkey,
                    }),
                    MEM,
                    len,
                );
                let c = wait_wc(&a.scq, "read");
                assert_eq!((c.wr_id, c.status), (i, WcStatus::Success));
                assert_eq!(
                    a.buf.read(MEM, len),
                    &model[off..off + len],
                    "read {len} at {off}"
                );
            }
            2 => {
                let add = rng.below(1000);
                let remote = Remote {
                    addr: base + COUNTER as u64,
                    rkey,
                };
                a.post(&qa, i, SendOp::AtomicFetchAdd { remote, add }, 16, 8);
                let c = wait_wc(&a.scq, "fetch add");
                assert_eq!((c.wr_id, c.status), (i, WcStatus::Success));
                assert_eq!(a.buf.u64_at(16), counter);
                counter += add;
            }
            _ => {
                let len = rng.range(0, 3000) as usize;
                let data = rng.bytes(len);
                a.buf.write(0, &data);
                let late = rng.chance(30);
                if !late {
                    b.recv(&qb, i, MEM, 4096);
                }
                a.post(&qa, i, SendOp::SendWithImm(i as u32), 0, len);
                if late {
                    // The receive goes up after the request found none (RNR), or not:
                    // either way the message lands once.
                    std::thread::yield_now();
                    b.recv(&qb, i, MEM, 4096);
                }
                let c = wait_wc(&a.scq, "send");
                assert_eq!((c.wr_id, c.status), (i, WcStatus::Success));
                let r = wait_wc(&b.rcq, "recv");
                assert_eq!(
                    (r.wr_id, r.byte_len as usize, r.imm_data),
                    (i, len, i as u32)
                );
                assert_eq!(b.buf.read(MEM, len), data);
            }
        }
    }
    assert_eq!(b.buf.read(0, COUNTER), &model[..COUNTER]);
    assert_eq!(b.buf.u64_at(COUNTER), counter);
}

#[test]
fn two_threads_two_queue_pairs_in_order() {
    let a = Node::all_access(64 * 1024);
    let b = Node::all_access(64 * 1024);
    let (qa1, qb1) = rc_pair(&a, &b, 7);
    let (qa2, qb2) = rc_pair(&a, &b, 7);
    const N: u64 = 200;
    // Each thread's messages carry its sequence in the immediate data; receives are
    // posted in advance in batches.
    for q in [&qb1, &qb2] {
        for i in 0..64 {
            b.recv(q, i, 0, 64);
        }
    }
    std::thread::scope(|s| {
        for (t, q) in [(1u64, &qa1), (2, &qa2)] {
            let a = &a;
            s.spawn(move || {
                for i in 0..N {
                    // Completions of both threads share a's send CQ: only post here.
                    let sg = [a.sge(0, 8)];
                    let wr = SendWr {
                        wr_id: t << 32 | i,
                        sg_list: &sg,
                        op: SendOp::SendWithImm((t << 16 | i) as u32),
                        send_flags: SendFlags::empty(),
                        ud: None,
                    };
                    let deadline = std::time::Instant::now() + BOUND;
                    // SAFETY: registered range.
                    while let Err(e) = unsafe { q.post_send(&wr) } {
                        // Send queue full until acknowledgements free slots.
                        assert_eq!(e.code(), ofi_core::Errno::ENOMEM);
                        assert!(std::time::Instant::now() < deadline, "send queue stuck");
                        std::thread::yield_now();
                    }
                }
            });
        }
        // The receiving side: every message of each queue pair in order.
        let mut next = [0u64; 3];
        let mut posted = [64u64; 3];
        let deadline = std::time::Instant::now() + BOUND;
        while next[1] < N || next[2] < N {
            assert!(std::time::Instant::now() < deadline, "stalled at {next:?}");
            let mut wc = [WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Send, 0); 16];
            let n = b.rcq.poll(&mut wc).unwrap();
            for w in &wc[..n] {
                assert_eq!(w.status, WcStatus::Success);
                let t = (w.imm_data >> 16) as usize;
                assert_eq!(
                    u64::from(w.imm_data & 0xffff),
                    next[t],
                    "thread {t} out of order"
                );
                next[t] += 1;
                if posted[t] < N {
                    b.recv(if t == 1 { &qb1 } else { &qb2 }, posted[t], 0, 64);
                    posted[t] += 1;
                }
            }
            std::thread::yield_now();
        }
    });
}
