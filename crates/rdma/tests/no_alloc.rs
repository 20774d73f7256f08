//! The data path does not allocate: after warm-up, posting sends and receives and
//! polling completions on the software device make no heap allocation in the calling
//! thread (a counting global allocator checks it; the device's service thread is not
//! counted).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::*;
use ofi_rdma::*;

struct Counting;

thread_local! {
    static COUNT: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| {
            if c.get() {
                ALLOCS.with(|a| a.set(a.get() + 1));
            }
        });
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCS.with(|a| a.set(0));
    COUNT.with(|c| c.set(true));
    let r = f();
    COUNT.with(|c| c.set(false));
    (r, ALLOCS.with(|a| a.get()))
}

#[test]
fn posting_and_polling_do_not_allocate() {
    let a = Node::all_access(1 << 16);
    let b = Node::all_access(1 << 16);
    let (qa, qb) = rc_pair(&a, &b, 7);
    let remote = b.remote(0);
    let mut wc = [WorkCompletion::new(0, WcStatus::GeneralErr, WcOpcode::Send, 0); 8];
    // The counter itself sees allocations.
    let (v, n) = counted(|| Vec::<u8>::with_capacity(16));
    assert_eq!(n, 1);
    drop(v);
    // Warm-up: connections opened, queues at their size.
    b.recv(&qb, 0, 0, 64);
    a.post(&qa, 0, SendOp::Send, 0, 64);
    wait_wc(&a.scq, "warm-up send");
    wait_wc(&b.rcq, "warm-up recv");
    let mut total = 0;
    for i in 0..50u64 {
        let sg_r = [b.sge(0, 64)];
        let sg_s = [a.sge(0, 64)];
        let sg_w = [a.sge(1024, 512)];
        let ((), n) = counted(|| {
            qb.post_recv(&RecvWr {
                wr_id: i,
                sg_list: &sg_r,
            })
            .unwrap();
            for (op, sg) in [(SendOp::Send, &sg_s), (SendOp::RdmaWrite(remote), &sg_w)] {
                // SAFETY: registered ranges.
                unsafe {
                    qa.post_send(&SendWr {
                        wr_id: i,
                        sg_list: sg,
                        op,
                        send_flags: SendFlags::SIGNALED,
                        ud: None,
                    })
                }
                .unwrap();
            }
        });
        total += n;
        // Drain (bounded); only the poll calls are counted.
        let (mut got_s, mut got_r) = (0, 0);
        let deadline = std::time::Instant::now() + BOUND;
        while got_s < 2 || got_r < 1 {
            assert!(std::time::Instant::now() < deadline, "completions missing");
            let (k, n1) = counted(|| a.scq.poll(&mut wc).unwrap());
            let (m, n2) = counted(|| b.rcq.poll(&mut wc).unwrap());
            total += n1 + n2;
            got_s += k;
            got_r += m;
            std::thread::yield_now();
        }
    }
    assert_eq!(total, 0, "allocations on the data path");
}
