//! The fault hook over udp: drop, duplicate, delay, reorder and fail, from a seed; its
//! parameters through the environment (in a child process) and `set_config`.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{drain, is_child, next, pair, post_recv, registry, run_child, Pair, WAIT};
use ofi::{EpType, Errno, OpFlags};
use ofi_conformance::fixture;
use ofi_hook::fault::{self, FaultConfig};

/// `set_config` is process-wide: tests that set it run one at a time.
static CONFIG: Mutex<()> = Mutex::new(());

fn with_config<T>(cfg: FaultConfig, f: impl FnOnce() -> T) -> T {
    let _g = CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    fault::set_config(Some(cfg));
    let r = f();
    fault::set_config(None);
    r
}

/// Run `f` on a udp pair under the fault hook configured with `cfg`.
fn on_faulty_pair<T>(cfg: FaultConfig, f: impl FnOnce(&Pair) -> T) -> T {
    with_config(cfg, || {
        let reg = registry("fault");
        let p = pair(&reg, "udp", EpType::Dgram);
        f(&p)
    })
}

/// Post `n` 64-byte receives on b (contexts 1000 + i).
fn post_recvs(p: &Pair, bufs: &mut [[u8; 64]]) {
    for (i, b) in bufs.iter_mut().enumerate() {
        post_recv(p, b, 1000 + i);
    }
}

/// Send `n` datagrams a → b, each carrying its index; contexts 1 + i.
fn send_all(p: &Pair, msgs: &[[u8; 8]]) {
    for (i, m) in msgs.iter().enumerate() {
        let end = Instant::now() + WAIT;
        loop {
            // SAFETY: `msgs` outlives the sends' completions (drained by the caller).
            match unsafe {
                p.a.ep
                    .send(m.as_ptr(), m.len(), std::ptr::null_mut(), p.to_b, 1 + i)
            } {
                Ok(()) => break,
                Err(e) if e.code() == Errno::EAGAIN && Instant::now() < end => {
                    let _ = next(&p.a.cq, Duration::ZERO);
                }
                Err(e) => panic!("send {i}: {e}"),
            }
        }
    }
}

fn msgs(n: usize) -> Vec<[u8; 8]> {
    (0..n as u64).map(u64::to_le_bytes).collect()
}

fn seqs(bufs: &[[u8; 64]], done: &[ofi::abi::raw::CqDataEntry]) -> Vec<u64> {
    done.iter()
        .map(|e| {
            let i = e.op_context - 1000;
            u64::from_le_bytes(bufs[i][..8].try_into().unwrap())
        })
        .collect()
}

#[test]
fn drop_completes_to_the_sender_and_loses_the_datagram() {
    const N: usize = 100;
    let (tx, rx, dropped) = on_faulty_pair(
        FaultConfig {
            seed: 7,
            drop: 0.3,
            ..FaultConfig::default()
        },
        |p| {
            let mut bufs = vec![[0u8; 64]; N];
            post_recvs(p, &mut bufs);
            let before = fault::totals().dropped;
            let m = msgs(N);
            send_all(p, &m);
            let (ca, cb) = drain(p, Duration::from_millis(400));
            let got = seqs(&bufs, &cb);
            (ca, got, fault::totals().dropped - before)
        },
    );
    // Every send completes to the sender, dropped or not, exactly once.
    let mut ctxs: Vec<usize> = tx.iter().map(|e| e.op_context).collect();
    ctxs.sort_unstable();
    assert_eq!(ctxs, (1..=N).collect::<Vec<_>>());
    assert!(tx.iter().all(|e| e.flags & OpFlags::SEND.bits() != 0));
    // What did not arrive was dropped by the hook (loopback loses nothing else).
    assert!(
        dropped > 10 && dropped < 50,
        "dropped {dropped} of {N} at 0.3"
    );
    assert_eq!(rx.len() as u64 + dropped, N as u64, "received {}", rx.len());
}

#[test]
fn dropped_sends_follow_selective_completion_and_counters() {
    with_config(
        FaultConfig {
            drop: 1.0,
            ..FaultConfig::default()
        },
        || {
            let reg = registry("fault");
            let info = common::info(&reg, "udp", EpType::Dgram);
            let fabric = reg.open_fabric(&info).unwrap();
            let domain = fabric.domain(&info).unwrap();
            let cq = domain
                .cq_open(&ofi::cq::CqAttr {
                    wait_obj: ofi::WaitObj::None,
                    ..ofi::cq::CqAttr::with_format(ofi::CqFormat::Data)
                })
                .unwrap();
            let cntr = domain.cntr_open(&ofi::cntr::CntrAttr::default()).unwrap();
            let av = domain.av_open(&ofi::av::AvAttr::default()).unwrap();
            let ep = domain.endpoint(&info).unwrap();
            ep.bind(
                &cq,
                OpFlags::TRANSMIT | OpFlags::RECV | OpFlags::SELECTIVE_COMPLETION,
            )
            .unwrap();
            ep.bind_cntr(&cntr, OpFlags::SEND).unwrap();
            ep.bind_av(&av).unwrap();
            ep.enable().unwrap();
            let me = ofi::Address::from_bytes(info.addr_format, &ep.getname().unwrap()).unwrap();
            let to = av.insert(&[me]).unwrap()[0];
            let m = [5u8; 8];
            // `m` outlives the sends (they are dropped by the hook).
            // No FI_COMPLETION: no completion, as udp itself would do.
            fixture::send(&ep, &m, to, 1).unwrap();
            // With FI_COMPLETION: one completion, context 2.
            fixture::sendmsg(&ep, &m, to, 2, OpFlags::COMPLETION).unwrap();
            ep.inject(&m, to).unwrap();
            let e = next(&cq, Duration::from_millis(100)).expect("the FI_COMPLETION send");
            assert_eq!(e.op_context, 2);
            assert_eq!(e.flags, (OpFlags::SEND | OpFlags::MSG).bits());
            assert!(
                next(&cq, Duration::from_millis(100)).is_none(),
                "nothing else"
            );
            assert_eq!(cntr.read().unwrap(), 3, "every dropped send counts");
        },
    );
}

#[test]
fn same_seed_same_faults() {
    let run = || {
        on_faulty_pair(
            FaultConfig {
                seed: 42,
                drop: 0.5,
                ..FaultConfig::default()
            },
            |p| {
                let mut bufs = vec![[0u8; 64]; 64];
                post_recvs(p, &mut bufs);
                send_all(p, &msgs(64));
                let (_, cb) = drain(p, Duration::from_millis(300));
                let mut s = seqs(&bufs, &cb);
                s.sort_unstable();
                s
            },
        )
    };
    let first = run();
    assert!(!first.is_empty() && first.len() < 64);
    assert_eq!(first, run(), "the seed fixes which datagrams are lost");
}

#[test]
fn dup_delivers_twice_and_completes_once() {
    const N: usize = 20;
    let (tx, rx) = on_faulty_pair(
        FaultConfig {
            dup: 1.0,
            ..FaultConfig::default()
        },
        |p| {
            let mut bufs = vec![[0u8; 64]; 2 * N + 5];
            post_recvs(p, &mut bufs);
            send_all(p, &msgs(N));
            let (ca, cb) = drain(p, Duration::from_millis(300));
            (ca, seqs(&bufs, &cb))
        },
    );
    assert_eq!(tx.len(), N, "one completion per send");
    assert_eq!(rx.len(), 2 * N, "every datagram twice");
    for i in 0..N as u64 {
        assert_eq!(rx.iter().filter(|s| **s == i).count(), 2, "seq {i}");
    }
}

#[test]
fn reorder_changes_the_order_and_loses_nothing() {
    const N: usize = 60;
    let rx = on_faulty_pair(
        FaultConfig {
            seed: 3,
            reorder: 0.3,
            delay_for: Duration::from_millis(50),
            ..FaultConfig::default()
        },
        |p| {
            let mut bufs = vec![[0u8; 64]; N];
            post_recvs(p, &mut bufs);
            send_all(p, &msgs(N));
            let (ca, cb) = drain(p, Duration::from_millis(400));
            assert_eq!(ca.len(), N, "every send completes");
            seqs(&bufs, &cb)
        },
    );
    assert_eq!(rx.len(), N);
    let mut sorted = rx.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..N as u64).collect::<Vec<_>>());
    assert_ne!(rx, sorted, "some datagrams overtook others");
}

#[test]
fn delay_holds_a_send_until_progress_after_the_delay() {
    let (early, late) = on_faulty_pair(
        FaultConfig {
            delay: 1.0,
            delay_for: Duration::from_millis(100),
            ..FaultConfig::default()
        },
        |p| {
            let mut bufs = vec![[0u8; 64]; 1];
            post_recvs(p, &mut bufs);
            send_all(p, &msgs(1));
            // The held send is work a read must release: no blocking now.
            let e = p.fabric.trywait(&[&p.a.cq]).unwrap_err();
            assert_eq!(e.code(), Errno::EAGAIN);
            // Only the sender's CQ reads (or sends) release a held send, and only once
            // due: however much the receiver polls meanwhile, nothing arrives.
            let early = next(&p.b.cq, Duration::from_millis(40));
            // The sender's CQ reads release it once due.
            let (ca, cb) = drain(p, Duration::from_millis(400));
            assert_eq!(ca.len(), 1);
            (early, cb.len())
        },
    );
    assert!(early.is_none(), "delivered before the delay");
    assert_eq!(late, 1);
}

/// The code of a send from a to b that the fault hook fails (a panic if it passes).
fn failed_send(p: &Pair) -> Errno {
    let m = [1u8; 8];
    // SAFETY: `m` outlives the call (the call fails before reaching udp).
    let r = unsafe {
        p.a.ep
            .send(m.as_ptr(), m.len(), std::ptr::null_mut(), p.to_b, 1)
    };
    r.expect_err("the fault hook fails sends").code()
}

#[test]
fn fail_ops_return_the_chosen_code() {
    on_faulty_pair(
        FaultConfig {
            fail_ops: vec![ofi_hook::Op::Send],
            fail_code: Errno::EIO,
            ..FaultConfig::default()
        },
        |p| {
            assert_eq!(failed_send(p), Errno::EIO);
            // Other operations are untouched.
            p.a.ep
                .inject(&[1u8; 8], p.to_b)
                .expect("inject is not listed");
        },
    );
    // A code of its own per operation.
    on_faulty_pair(
        FaultConfig {
            fail_ops: vec![ofi_hook::Op::Send, ofi_hook::Op::CqRead],
            fail_codes: vec![(ofi_hook::Op::CqRead, Errno::EAGAIN)],
            fail_code: Errno::ECANCELED,
            ..FaultConfig::default()
        },
        |p| {
            assert_eq!(failed_send(p), Errno::ECANCELED);
            let mut e = [ofi::abi::raw::CqDataEntry::default()];
            assert_eq!(p.a.cq.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
            let before = fault::totals().failed;
            let _ = p.b.cq.read(&mut e);
            assert_eq!(
                fault::totals().failed,
                before + 1,
                "the read failed on purpose"
            );
        },
    );
}

#[test]
fn bad_config_fails_the_fabric_open() {
    with_config(
        FaultConfig {
            drop: 0.7,
            dup: 0.7,
            ..FaultConfig::default()
        },
        open_refused,
    );
}

/// Opens the udp fabric under the fault hook, which must refuse it (a bad
/// configuration) with `FI_EINVAL`; returns the error.
fn open_refused() -> ofi::Error {
    let reg = registry("fault");
    let info = common::info(&reg, "udp", EpType::Dgram);
    let e = reg.open_fabric(&info).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    e
}

/// The child side of `parameters_from_the_environment`: the parameters come from
/// `FI_OFI_HOOK_FAULT_*`.
fn env_drop_all_child() {
    let reg = registry("fault");
    let p = pair(&reg, "udp", EpType::Dgram);
    let mut bufs = vec![[0u8; 64]; 10];
    post_recvs(&p, &mut bufs);
    send_all(&p, &msgs(10));
    let (ca, cb) = drain(&p, Duration::from_millis(200));
    assert_eq!((ca.len(), cb.len()), (10, 0), "all dropped, all completed");
}

/// The child side of `parameters_from_the_environment` for a bad parameter: it fails
/// the fabric open with `FI_EINVAL` naming the variable `var` (`OFI_HOOK_TEST_EXPECT`).
fn env_bad_config_child(var: &str) {
    let e = open_refused();
    assert!(e.to_string().contains(var), "{e}");
}

/// The child side of `apply_globally_hooks_the_process_registry`: `apply_globally`
/// hooks the process-wide registry (what the `ofi` crate's getinfo / fabric open use).
fn apply_globally_child() {
    fault::set_config(Some(FaultConfig {
        drop: 1.0,
        ..FaultConfig::default()
    }));
    assert_eq!(
        ofi::apply_hooks_globally("nope").unwrap_err().code(),
        Errno::ENOENT
    );
    ofi::apply_hooks_globally("fault").unwrap();
    let p = pair(ofi::registry(), "udp", EpType::Dgram);
    assert_eq!(p.fabric.provider(), "ofi_hook_fault");
    let mut bufs = vec![[0u8; 64]; 4];
    post_recvs(&p, &mut bufs);
    send_all(&p, &msgs(4));
    let (ca, cb) = drain(&p, Duration::from_millis(200));
    assert_eq!((ca.len(), cb.len()), (4, 0), "all dropped, all completed");
    assert_eq!(fault::totals().dropped, 4);
    println!("CHILD OK");
}

#[test]
fn apply_globally_hooks_the_process_registry() {
    if is_child() {
        apply_globally_child();
        return;
    }
    run_child("apply_globally_hooks_the_process_registry", |_| {}).assert_ok_printing("CHILD OK");
}

#[test]
fn parameters_from_the_environment() {
    if let Some(var) = std::env::var_os("OFI_HOOK_TEST_EXPECT") {
        env_bad_config_child(&var.to_string_lossy());
        return;
    }
    if is_child() {
        env_drop_all_child();
        return;
    }
    run_child("parameters_from_the_environment", |c| {
        c.env("FI_OFI_HOOK_FAULT_DROP", "1")
            .env("FI_OFI_HOOK_FAULT_SEED", "9");
    })
    .assert_ok_printing("1 passed");
    for (var, value) in [
        ("FI_OFI_HOOK_FAULT_DROP", "1.5"),
        ("FI_OFI_HOOK_FAULT_DUP", "often"),
        ("FI_OFI_HOOK_FAULT_DELAY_US", "-1"),
        ("FI_OFI_HOOK_FAULT_DELAY_US", "9223372036854775807"),
        ("FI_OFI_HOOK_FAULT_FAIL_OPS", "send,sned"),
        ("FI_OFI_HOOK_FAULT_FAIL_CODE", "EWHATEVER"),
    ] {
        let run = run_child("parameters_from_the_environment", |c| {
            c.env(var, value).env("OFI_HOOK_TEST_EXPECT", var);
        });
        assert!(
            run.success && run.stdout.contains("1 passed"),
            "{var}={value}:\n{}\n{}",
            run.stdout,
            run.stderr
        );
    }
}
