//! Unit tests of the `cq` module (in their own file; they see its private items).

use super::*;
use crate::test_support::{assert_signals_wait_set, in_a_moment};
use crate::wait::Waitable;
use ofi_core::abi::raw::{CqDataEntry, CqEntry, CqMsgEntry};
use ofi_core::enums::{CqWaitCond, WaitObj};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

fn attr(format: CqFormat, size: usize, wait_obj: WaitObj) -> CqAttr {
    CqAttr {
        size,
        format,
        wait_obj,
        ..CqAttr::default()
    }
}

fn cq(format: CqFormat, size: usize) -> KitCq {
    KitCq::new(&attr(format, size, WaitObj::Unspec)).unwrap()
}

fn tagged(ctx: usize) -> CqTaggedEntry {
    CqTaggedEntry {
        op_context: ctx,
        flags: (OpFlags::RECV | OpFlags::TAGGED).bits(),
        len: ctx * 10,
        buf: (0x1000 + ctx) as *mut c_void,
        data: ctx as u64 + 100,
        tag: ctx as u64 + 200,
    }
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> Errno {
    r.unwrap_err().code()
}

/// The error of a blocking read of one context entry with time-out `timeout` ms.
fn sread_err(q: &KitCq, timeout: i32) -> Errno {
    let mut b = [CqEntry::default(); 1];
    code(q.sread(CqBuf::Context(&mut b), None, None, timeout))
}

fn read_ctx(q: &KitCq, n: usize) -> Result<Vec<usize>> {
    let mut b = vec![CqEntry::default(); n];
    let k = q.read(CqBuf::Context(&mut b), None)?;
    Ok(b[..k].iter().map(|e| e.op_context).collect())
}

/// A progress source counting its calls; on each call pushes the entries of
/// `pending` into `cq`.
struct Src {
    calls: AtomicUsize,
    cq: Mutex<Option<KitCq>>,
    pending: Mutex<Vec<usize>>,
}

impl Src {
    fn new() -> Arc<Src> {
        Arc::new(Src {
            calls: AtomicUsize::new(0),
            cq: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl crate::progress::Progress for Src {
    fn progress(&self) -> usize {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let cq = lock(&self.cq).clone();
        let work: Vec<usize> = lock(&self.pending).drain(..).collect();
        if let Some(cq) = cq {
            for c in &work {
                cq.push_entry(&tagged(*c)).unwrap();
            }
        }
        work.len()
    }
}

fn engine_with(src: &Arc<Src>) -> Arc<ProgressEngine> {
    let e = Arc::new(ProgressEngine::manual());
    e.register(src);
    e
}

#[test]
fn open_attributes() {
    let q = KitCq::new(&CqAttr::default()).unwrap();
    assert_eq!(q.format(), CqFormat::Context);
    assert_eq!(q.size(), DEFAULT_CQ_SIZE);
    assert_eq!(q.wait_mode(), WaitMode::None);
    assert!(!q.has_threshold_cond());
    let e = KitCq::new(&attr(CqFormat::Msg, MAX_CQ_SIZE + 1, WaitObj::None)).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.message().contains("size"));
    let mut a = attr(CqFormat::Msg, 8, WaitObj::None);
    a.flags = OpFlags::AFFINITY.bits();
    KitCq::new(&a).unwrap();
    a.flags = 1 << 3;
    assert_eq!(code(KitCq::new(&a)), Errno::EINVAL);
    assert_eq!(
        code(KitCq::new(&attr(CqFormat::Msg, 8, WaitObj::PollFd))),
        Errno::ENOSYS
    );
    let in_set = KitCq::new(&attr(CqFormat::Msg, 8, WaitObj::Set)).unwrap();
    assert_eq!(in_set.wait_mode(), WaitMode::Internal);
    let mut a = attr(CqFormat::Tagged, 8, WaitObj::Fd);
    a.wait_cond = CqWaitCond::Threshold;
    let q = KitCq::new(&a).unwrap();
    assert!(q.has_threshold_cond());
    assert!(format!("{q:?}").contains("Tagged"));
}

#[test]
fn all_four_formats_keep_their_fields() {
    let q = cq(CqFormat::Context, 8);
    q.push_entry(&tagged(1)).unwrap();
    let mut b = [CqEntry::default(); 2];
    assert_eq!(q.read(CqBuf::Context(&mut b), None).unwrap(), 1);
    assert_eq!(b[0].op_context, 1);

    let q = cq(CqFormat::Msg, 8);
    q.push_entry(&tagged(2)).unwrap();
    let mut b = [CqMsgEntry::default(); 2];
    assert_eq!(q.read(CqBuf::Msg(&mut b), None).unwrap(), 1);
    assert_eq!((b[0].op_context, b[0].len), (2, 20));
    assert_eq!(b[0].flags, tagged(2).flags);

    let q = cq(CqFormat::Data, 8);
    q.push_entry(&tagged(3)).unwrap();
    let mut b = [CqDataEntry::default(); 2];
    assert_eq!(q.read(CqBuf::Data(&mut b), None).unwrap(), 1);
    assert_eq!((b[0].data, b[0].buf as usize), (103, 0x1003));

    let q = cq(CqFormat::Tagged, 8);
    q.push_entry(&tagged(4)).unwrap();
    let mut b = [CqTaggedEntry::default(); 2];
    assert_eq!(q.read(CqBuf::Tagged(&mut b), None).unwrap(), 1);
    assert_eq!(b[0], tagged(4));
}

#[test]
fn read_errors() {
    let q = cq(CqFormat::Msg, 8);
    // Wrong format.
    let mut b = [CqEntry::default(); 1];
    assert_eq!(code(q.read(CqBuf::Context(&mut b), None)), Errno::EINVAL);
    // Empty: EAGAIN, also for zero entries.
    let mut m = [CqMsgEntry::default(); 2];
    assert_eq!(code(q.read(CqBuf::Msg(&mut m), None)), Errno::EAGAIN);
    assert_eq!(code(q.read(CqBuf::Msg(&mut []), None)), Errno::EAGAIN);
    // readfrom with too few address slots.
    let mut src = [0u64; 1];
    assert_eq!(
        code(q.read(CqBuf::Msg(&mut m), Some(&mut src))),
        Errno::EINVAL
    );
    // Zero entries with completions waiting: Ok(0), nothing consumed.
    q.push_entry(&tagged(1)).unwrap();
    assert_eq!(q.read(CqBuf::Msg(&mut []), None).unwrap(), 0);
    assert_eq!(q.len(), 1);
    assert_eq!(code(q.readerr(0)), Errno::EAGAIN);
}

#[test]
fn reads_are_fifo_and_bounded_by_the_buffer() {
    let q = cq(CqFormat::Context, 16);
    for c in 1..=5 {
        q.push_entry(&tagged(c)).unwrap();
    }
    assert_eq!(read_ctx(&q, 2).unwrap(), vec![1, 2]);
    assert_eq!(read_ctx(&q, 10).unwrap(), vec![3, 4, 5]);
    assert_eq!(code(read_ctx(&q, 1)), Errno::EAGAIN);
    assert!(q.is_empty());
}

#[test]
fn readfrom_returns_source_addresses() {
    let q = cq(CqFormat::Msg, 8);
    q.push(&tagged(1), 42).unwrap();
    q.push_entry(&tagged(2)).unwrap();
    let mut m = [CqMsgEntry::default(); 2];
    let mut src = [0u64; 2];
    assert_eq!(q.read(CqBuf::Msg(&mut m), Some(&mut src)).unwrap(), 2);
    assert_eq!(src, [42, ADDR_NOTAVAIL]);
}

#[test]
fn error_entries_come_in_order_with_eavail() {
    let q = cq(CqFormat::Context, 8);
    q.push_entry(&tagged(1)).unwrap();
    let mut err = CqError::new(2, Errno::ETRUNC);
    err.olen = 7;
    err.prov_errno = -5;
    err.tag = 9;
    err.err_data = vec![1, 2, 3];
    q.push_err(err).unwrap();
    q.push_entry(&tagged(3)).unwrap();
    assert_eq!(q.len(), 3);
    // The success before the error is returned, then EAVAIL.
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1]);
    assert_eq!(code(read_ctx(&q, 8)), Errno::EAVAIL);
    assert_eq!(code(read_ctx(&q, 0)), Errno::EAVAIL);
    let e = q.readerr(0).unwrap();
    assert_eq!(e.op_context, 2);
    assert_eq!(e.err, Errno::ETRUNC);
    assert_eq!((e.olen, e.prov_errno, e.tag), (7, -5, 9));
    // The error data is handed over whole, owned.
    assert_eq!(e.err_data, vec![1, 2, 3]);
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![3]);
    assert_eq!(code(q.readerr(0)), Errno::EAGAIN);
}

#[test]
fn readerr_takes_an_error_queued_behind_successes() {
    let q = cq(CqFormat::Context, 8);
    q.push_entry(&tagged(1)).unwrap();
    q.push_err(CqError::new(2, Errno::ECANCELED)).unwrap();
    let e = q.readerr(0).unwrap();
    assert_eq!((e.op_context, e.err), (2, Errno::ECANCELED));
    assert!(e.err_data.is_empty());
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1]);
}

#[test]
fn overrun_without_resource_management() {
    let q = cq(CqFormat::Context, 2);
    q.push_entry(&tagged(1)).unwrap();
    q.push_entry(&tagged(2)).unwrap();
    assert!(!q.has_room());
    let e = q.push_entry(&tagged(3)).unwrap_err();
    assert_eq!(e.code(), Errno::EOVERRUN);
    assert!(q.is_overrun());
    assert_eq!(code(q.push_entry(&tagged(4))), Errno::EOVERRUN);
    assert_eq!(
        code(q.push_err(CqError::new(5, Errno::EIO))),
        Errno::EOVERRUN
    );
    assert_eq!(q.dropped(), 3);
    // The valid completions first, then the overrun error entry.
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1, 2]);
    assert_eq!(code(read_ctx(&q, 8)), Errno::EAVAIL);
    assert_eq!(q.readerr(0).unwrap(), CqError::new(0, Errno::EOVERRUN));
    // Fatal from then on: reads fail with EOVERRUN, never EAGAIN.
    assert_eq!(code(read_ctx(&q, 8)), Errno::EOVERRUN);
    assert_eq!(code(q.readerr(0)), Errno::EAGAIN);
    assert_eq!(code(q.reserve()), Errno::EOVERRUN);
    assert_eq!(q.room(), 0);
}

/// `has_room` (read without the lock) follows every change: pushes, reads, error
/// entries, reservations taken and dropped, and an overrun (for good).
#[test]
fn has_room_follows_every_change() {
    let q = cq(CqFormat::Context, 2);
    assert!(q.has_room());
    q.push_entry(&tagged(1)).unwrap();
    assert!(q.has_room());
    q.push_entry(&tagged(2)).unwrap();
    assert!(!q.has_room(), "two of two");
    assert_eq!(read_ctx(&q, 1).unwrap(), vec![1]);
    assert!(q.has_room(), "a read made room");
    q.push_err(CqError::new(3, Errno::EIO)).unwrap();
    assert!(!q.has_room(), "an error entry takes room");
    assert_eq!(read_ctx(&q, 4).unwrap(), vec![2]);
    assert!(q.has_room(), "the error entry holds one of two");
    q.push_entry(&tagged(7)).unwrap();
    assert!(!q.has_room(), "an error entry and a success");
    q.readerr(0).unwrap();
    assert!(q.has_room());
    assert_eq!(read_ctx(&q, 4).unwrap(), vec![7]);
    let r = q.reserve().unwrap();
    let r2 = q.reserve().unwrap();
    assert!(!q.has_room(), "reserved");
    drop(r2);
    assert!(q.has_room(), "a dropped reservation gives its room back");
    r.push(&tagged(4), 0).unwrap();
    q.push_entry(&tagged(5)).unwrap();
    assert_eq!(code(q.push_entry(&tagged(6))), Errno::EOVERRUN);
    assert_eq!(read_ctx(&q, 4).unwrap(), vec![4, 5]);
    assert!(!q.has_room(), "overrun is for good");
}

#[test]
fn reservations_for_resource_management() {
    let q = cq(CqFormat::Context, 2);
    assert_eq!(q.room(), 2);
    let r1 = q.reserve().unwrap();
    let r2 = q.reserve().unwrap();
    assert!(!q.has_room());
    assert_eq!(code(q.reserve()), Errno::EAGAIN);
    // An unreserved push would overrun; don't. Release one by dropping it.
    drop(r2);
    assert!(q.has_room());
    r1.push(&tagged(1), 7).unwrap();
    let r3 = q.reserve().unwrap();
    r3.push_err(CqError::new(2, Errno::EIO)).unwrap();
    assert_eq!(q.room(), 0);
    assert!(!q.is_overrun());
    assert_eq!(read_ctx(&q, 4).unwrap(), vec![1]);
    q.readerr(0).unwrap();
    assert_eq!(q.room(), 2);
    assert!(format!("{:?}", q.reserve().unwrap()).contains("CqReservation"));
}

#[test]
fn every_read_drives_progress_even_of_zero_entries() {
    let src = Src::new();
    let q = KitCq::with_progress(
        &attr(CqFormat::Context, 8, WaitObj::None),
        engine_with(&src),
    )
    .unwrap();
    *lock(&src.cq) = Some(q.clone());
    assert_eq!(code(q.read(CqBuf::Context(&mut []), None)), Errno::EAGAIN);
    assert_eq!(src.calls(), 1, "a zero-entry read drives progress");
    let mut b = [CqEntry::default(); 1];
    assert_eq!(code(q.read(CqBuf::Context(&mut b), None)), Errno::EAGAIN);
    assert_eq!(src.calls(), 2);
    // Work found by progress is returned by the same read.
    lock(&src.pending).push(9);
    assert_eq!(q.read(CqBuf::Context(&mut b), None).unwrap(), 1);
    assert_eq!(b[0].op_context, 9);
    assert_eq!(src.calls(), 3);
    // A bad format does not drive (rejected first).
    let mut m = [CqMsgEntry::default(); 1];
    assert_eq!(code(q.read(CqBuf::Msg(&mut m), None)), Errno::EINVAL);
    assert_eq!(src.calls(), 3);
    // Binding: same engine again is fine, another is EINVAL.
    let same = q.progress_engine().unwrap().clone();
    q.bind_progress(same).unwrap();
    assert_eq!(
        code(q.bind_progress(Arc::new(ProgressEngine::manual()))),
        Errno::EINVAL
    );
    // trywait drives too.
    crate::wait::trywait(&[&q]).unwrap();
    assert_eq!(src.calls(), 4);
    assert!(q.needs_polling());
}

#[test]
fn sread_errors() {
    let q = KitCq::new(&attr(CqFormat::Context, 8, WaitObj::None)).unwrap();
    assert_eq!(sread_err(&q, 0), Errno::ENOSYS);
    assert_eq!(code(q.signal()), Errno::ENOSYS);
    assert_eq!(code(q.wait_fd()), Errno::ENOSYS);
    let q = cq(CqFormat::Context, 8);
    assert_eq!(
        code(q.sread(CqBuf::Context(&mut []), None, None, 0)),
        Errno::EINVAL
    );
    let mut m = [CqMsgEntry::default(); 1];
    assert_eq!(
        code(q.sread(CqBuf::Msg(&mut m), None, None, 0)),
        Errno::EINVAL
    );
    assert_eq!(sread_err(&q, 0), Errno::EAGAIN);
}

#[test]
fn sread_times_out_with_eagain() {
    let q = cq(CqFormat::Context, 8);
    let t = Instant::now();
    assert_eq!(sread_err(&q, 50), Errno::EAGAIN);
    let el = t.elapsed();
    assert!(el >= Duration::from_millis(50), "{el:?}");
    assert!(el < Duration::from_secs(5), "{el:?}");
}

#[test]
fn sread_is_woken_by_a_push_from_another_thread() {
    let q = cq(CqFormat::Context, 8);
    let q2 = q.clone();
    let h = in_a_moment(move || {
        q2.push_entry(&tagged(5)).unwrap();
    });
    let mut b = [CqEntry::default(); 4];
    let t = Instant::now();
    let n = q.sread(CqBuf::Context(&mut b), None, None, 5_000).unwrap();
    assert!(t.elapsed() < Duration::from_secs(4), "woken, not timed out");
    assert_eq!((n, b[0].op_context), (1, 5));
    h.join().unwrap();
}

#[test]
fn sread_with_infinite_timeout_is_woken_by_signal() {
    let q = cq(CqFormat::Context, 8);
    let q2 = q.clone();
    let h = in_a_moment(move || {
        q2.signal().unwrap();
    });
    let t = Instant::now();
    assert_eq!(sread_err(&q, -1), Errno::EAGAIN);
    assert!(t.elapsed() < Duration::from_secs(4));
    h.join().unwrap();
    // A signal with nobody waiting makes the next sread return at once.
    q.signal().unwrap();
    let t = Instant::now();
    assert_eq!(sread_err(&q, 5_000), Errno::EAGAIN);
    assert!(t.elapsed() < Duration::from_secs(1));
    // ... once.
    assert_eq!(sread_err(&q, 10), Errno::EAGAIN);
}

#[test]
fn sread_threshold_waits_for_enough_or_returns_what_is_there() {
    let q = cq(CqFormat::Context, 8);
    let mut b = [CqEntry::default(); 4];
    q.push_entry(&tagged(1)).unwrap();
    // Threshold 2, one queued: on time-out the one is returned.
    let n = q.sread(CqBuf::Context(&mut b), None, Some(2), 20).unwrap();
    assert_eq!(n, 1);
    q.push_entry(&tagged(2)).unwrap();
    let q2 = q.clone();
    let h = in_a_moment(move || {
        q2.push_entry(&tagged(3)).unwrap();
    });
    let n = q
        .sread(CqBuf::Context(&mut b), None, Some(2), 5_000)
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!((b[0].op_context, b[1].op_context), (2, 3));
    h.join().unwrap();
    // An error next: the successes before it come back at once, then EAVAIL.
    q.push_entry(&tagged(4)).unwrap();
    q.push_err(CqError::new(5, Errno::EIO)).unwrap();
    let mut src = [0u64; 4];
    let n = q
        .sread(CqBuf::Context(&mut b), Some(&mut src), Some(3), 5_000)
        .unwrap();
    assert_eq!((n, src[0]), (1, ADDR_NOTAVAIL));
    assert_eq!(sread_err(&q, 5_000), Errno::EAVAIL);
}

#[test]
fn sread_drives_a_manual_engine_while_waiting() {
    let src = Src::new();
    let q =
        KitCq::with_progress(&attr(CqFormat::Context, 8, WaitObj::Fd), engine_with(&src)).unwrap();
    *lock(&src.cq) = Some(q.clone());
    let src2 = src.clone();
    let h = in_a_moment(move || {
        // Work appears in the transport; only progress moves it to the CQ.
        lock(&src2.pending).push(8);
    });
    let mut b = [CqEntry::default(); 1];
    let n = q.sread(CqBuf::Context(&mut b), None, None, 5_000).unwrap();
    assert_eq!((n, b[0].op_context), (1, 8));
    assert!(src.calls() > 2, "progress driven while waiting");
    h.join().unwrap();
}

#[test]
fn wait_fd_follows_the_state() {
    let q = cq(CqFormat::Context, 8);
    let fd = q.inner.fd.as_ref().unwrap();
    assert_eq!(q.wait_fd().unwrap(), fd.fd());
    assert!(!fd.readable());
    q.push_entry(&tagged(1)).unwrap();
    assert!(fd.readable());
    assert_eq!(code(crate::wait::trywait(&[&q])), Errno::EAGAIN);
    read_ctx(&q, 4).unwrap();
    assert!(!fd.readable());
    crate::wait::trywait(&[&q]).unwrap();
    q.push_err(CqError::new(1, Errno::EIO)).unwrap();
    assert!(fd.readable(), "an error entry is something to read");
    q.readerr(0).unwrap();
    assert!(!fd.readable());
    q.signal().unwrap();
    assert!(fd.readable(), "a signal makes the fd readable");
    assert_eq!(sread_err(&q, 0), Errno::EAGAIN);
    assert!(!fd.readable());
    // MUTEX_COND: blocking allowed, no fd.
    let q = KitCq::new(&attr(CqFormat::Context, 8, WaitObj::MutexCond)).unwrap();
    assert_eq!(code(q.wait_fd()), Errno::ENOSYS);
    assert_eq!(sread_err(&q, 0), Errno::EAGAIN);
}

#[test]
fn wait_set_is_signalled_by_pushes() {
    let q = cq(CqFormat::Context, 8);
    let q2 = q.clone();
    assert_signals_wait_set(
        |set| q.attach_wait(set),
        move || q2.push_entry(&tagged(1)).unwrap(),
    );
    assert_eq!(read_ctx(&q, 1).unwrap(), vec![1]);
}

#[test]
fn strerror_default_and_custom() {
    let q = cq(CqFormat::Context, 8);
    assert_eq!(
        q.strerror(Errno::EAGAIN.0, &[]),
        ofi_core::error::strerror(Errno::EAGAIN.0)
    );
    fn mine(code: i32, _d: &[u8]) -> String {
        format!("kit error {code}")
    }
    q.set_strerror(mine);
    assert_eq!(q.strerror(7, &[]), "kit error 7");
    q.close().unwrap();
}

#[test]
fn concurrent_pushers_and_a_reader_lose_nothing() {
    let q = cq(CqFormat::Context, 4096);
    let mut hs = Vec::new();
    for t in 0..2usize {
        let q = q.clone();
        hs.push(thread::spawn(move || {
            for i in 0..500usize {
                q.push_entry(&tagged(t * 1000 + i + 1)).unwrap();
            }
        }));
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while got.len() < 1000 && Instant::now() < end {
        let mut b = [CqEntry::default(); 64];
        match q.sread(CqBuf::Context(&mut b), None, None, 100) {
            Ok(n) => got.extend(b[..n].iter().map(|e| e.op_context)),
            Err(e) => assert_eq!(e.code(), Errno::EAGAIN),
        }
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(got.len(), 1000);
    // Per producer, FIFO.
    for t in 0..2usize {
        let mine: Vec<usize> = got
            .iter()
            .copied()
            .filter(|c| (c - 1) / 1000 == t)
            .collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
    }
}

// ---- completions handed to the reader that drives (the sink) ----

/// A CQ of context entries driven by a manual engine with source `f`.
fn driven(size: usize, f: impl Fn(&KitCq) -> usize + Send + Sync + 'static) -> KitCq {
    driven_with(&attr(CqFormat::Context, size, WaitObj::Unspec), f)
}

/// A CQ opened with `a`, driven by a manual engine with source `f`.
fn driven_with(a: &CqAttr, f: impl Fn(&KitCq) -> usize + Send + Sync + 'static) -> KitCq {
    let q = KitCq::new(a).unwrap();
    let e = Arc::new(ProgressEngine::manual());
    let weak = Arc::downgrade(&q.inner);
    let src = Arc::new(move || match weak.upgrade() {
        Some(inner) => f(&KitCq { inner }),
        None => 0,
    });
    e.register(&src);
    q.bind_progress(e).unwrap();
    // The engine holds the source weakly: keep it alive as long as the test runs.
    std::mem::forget(src);
    q
}

/// Pushes the contexts of `script` (0 stands for an error entry with context 9) on
/// the first drive only.
fn scripted(script: &'static [usize]) -> impl Fn(&KitCq) -> usize + Send + Sync {
    let once = AtomicUsize::new(0);
    move |q: &KitCq| {
        if once.fetch_add(1, Ordering::SeqCst) > 0 {
            return 0;
        }
        for &c in script {
            if c == 0 {
                q.push_err(CqError::new(9, Errno::EIO)).unwrap();
            } else {
                q.push_entry(&tagged(c)).unwrap();
            }
        }
        script.len()
    }
}

#[test]
fn completions_made_by_the_drive_come_back_in_push_order() {
    let q = driven(8, scripted(&[1, 2, 3]));
    // Two fit the reader's buffer (handed over); the third is queued behind them.
    assert_eq!(read_ctx(&q, 2).unwrap(), vec![1, 2]);
    assert!(q.is_ready());
    assert_eq!(read_ctx(&q, 2).unwrap(), vec![3]);
    assert_eq!(code(read_ctx(&q, 2)), Errno::EAGAIN);
    assert!(!q.is_ready());
}

#[test]
fn queued_completions_come_before_those_of_the_drive() {
    let q = driven(8, scripted(&[2, 3]));
    q.push_entry(&tagged(1)).unwrap();
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1, 2, 3]);
    assert_eq!(code(read_ctx(&q, 8)), Errno::EAGAIN);
}

#[test]
fn an_error_made_by_the_drive_keeps_its_place() {
    let q = driven(8, scripted(&[1, 0, 2]));
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1]);
    assert_eq!(code(read_ctx(&q, 8)), Errno::EAVAIL);
    assert_eq!(q.readerr(0).unwrap().op_context, 9);
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![2]);
}

#[test]
fn readfrom_gives_the_source_of_a_handed_completion() {
    let q = driven(8, |q: &KitCq| {
        q.push(&tagged(4), 77).unwrap();
        1
    });
    let mut b = vec![CqEntry::default(); 4];
    let mut srcs = vec![0u64; 4];
    assert_eq!(q.read(CqBuf::Context(&mut b), Some(&mut srcs)).unwrap(), 1);
    assert_eq!((b[0].op_context, srcs[0]), (4, 77));
}

#[test]
fn a_tagged_read_gets_every_field_of_a_handed_completion() {
    let q = driven_with(&attr(CqFormat::Tagged, 8, WaitObj::None), |q: &KitCq| {
        q.push_entry(&tagged(5)).unwrap();
        q.push_entry(&tagged(6)).unwrap();
        2
    });
    let mut b = vec![CqTaggedEntry::default(); 2];
    assert_eq!(q.read(CqBuf::Tagged(&mut b), None).unwrap(), 2);
    for (got, want) in b.iter().zip([tagged(5), tagged(6)]) {
        assert_eq!(
            (
                got.op_context,
                got.flags,
                got.len,
                got.buf,
                got.data,
                got.tag
            ),
            (
                want.op_context,
                want.flags,
                want.len,
                want.buf,
                want.data,
                want.tag
            )
        );
    }
}

#[test]
fn a_read_of_zero_entries_leaves_the_drive_s_completions_queued() {
    let q = driven(8, scripted(&[1]));
    let mut none: [CqEntry; 0] = [];
    assert_eq!(q.read(CqBuf::Context(&mut none), None).unwrap(), 0);
    assert!(q.is_ready());
    assert_eq!(read_ctx(&q, 4).unwrap(), vec![1]);
}

#[test]
fn a_reserved_completion_is_queued_in_its_place() {
    let q = cq(CqFormat::Context, 8);
    let r = Mutex::new(Some(q.reserve().unwrap()));
    let e = Arc::new(ProgressEngine::manual());
    let weak = Arc::downgrade(&q.inner);
    let src = Arc::new(move || match (weak.upgrade(), lock(&r).take()) {
        (Some(inner), Some(res)) => {
            let q = KitCq { inner };
            q.push_entry(&tagged(1)).unwrap();
            res.push(&tagged(2), ADDR_NOTAVAIL).unwrap();
            q.push_entry(&tagged(3)).unwrap();
            3
        }
        _ => 0,
    });
    e.register(&src);
    q.bind_progress(e).unwrap();
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1, 2, 3]);
    // The reservation was settled: the whole size is free again.
    for c in 0..8 {
        q.push_entry(&tagged(c + 10)).unwrap();
    }
    assert_eq!(code(q.push_entry(&tagged(99))), Errno::EOVERRUN);
}

#[test]
fn completions_pushed_by_another_thread_during_the_drive_are_queued() {
    let q = driven(8, |q: &KitCq| {
        if q.inner.readable.load(Ordering::SeqCst) {
            return 0;
        }
        let other = q.clone();
        thread::spawn(move || other.push_entry(&tagged(1)).unwrap())
            .join()
            .unwrap();
        // Something is queued now: this one queues behind it.
        q.push_entry(&tagged(2)).unwrap();
        2
    });
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![1, 2]);
}

#[test]
fn a_source_that_panics_mid_drive_loses_no_completion() {
    let q = driven(8, |q: &KitCq| {
        if q.inner.readable.load(Ordering::SeqCst) {
            return 0;
        }
        q.push_entry(&tagged(1)).unwrap();
        q.push_entry(&tagged(2)).unwrap();
        panic!("source failed after two completions");
    });
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_ctx(&q, 8)));
    assert!(caught.is_err());
    // Both were queued when the panic left the read, in order, and the thread's
    // sink is closed: a read elsewhere works as before.
    assert_eq!(SINK_TOP.get().cq, 0);
    let mut b = vec![CqEntry::default(); 8];
    let k = {
        let mut state = lock(&q.inner.state);
        q.inner
            .take(&mut state, &mut CqBuf::Context(&mut b), None)
            .unwrap()
    };
    assert_eq!(
        b[..k].iter().map(|e| e.op_context).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn a_read_nested_in_a_drive_has_its_own_sink() {
    let inner_q = driven(8, scripted(&[10, 11]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let nested = Arc::new(Mutex::new(Vec::new()));
    let nested2 = nested.clone();
    let calls = AtomicUsize::new(0);
    let q = driven(8, move |q: &KitCq| {
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 => {
                q.push_entry(&tagged(1)).unwrap();
                // A utility provider reading its core's CQ inside its progress.
                *lock(&seen2) = read_ctx(&inner_q, 8).unwrap();
                q.push_entry(&tagged(2)).unwrap();
                // The same CQ read from inside its own drive (whose nested drive
                // pushes 3): it must not overtake 1 and 2, which the outer read holds.
                *lock(&nested2) = read_ctx(q, 8).unwrap();
                q.push_entry(&tagged(4)).unwrap();
                3
            }
            1 => {
                q.push_entry(&tagged(3)).unwrap();
                1
            }
            _ => 0,
        }
    });
    assert_eq!(read_ctx(&q, 8).unwrap(), vec![4]);
    assert_eq!(*lock(&nested), vec![1, 2, 3]);
    assert_eq!(*lock(&seen), vec![10, 11]);
    assert_eq!(SINK_TOP.get().cq, 0);
}

#[test]
fn a_wait_fd_stays_quiet_for_handed_completions() {
    let q = driven_with(&attr(CqFormat::Context, 8, WaitObj::Fd), |q: &KitCq| {
        q.push_entry(&tagged(1)).unwrap();
        1
    });
    assert_eq!(read_ctx(&q, 1).unwrap(), vec![1]);
    assert!(!q.inner.fd.as_ref().unwrap().is_set());
}

#[test]
fn readers_driving_on_several_threads_get_every_completion_once() {
    // Each drive pushes up to three completions from whichever thread drives; four
    // threads read (and so drive) at once. Every completion must come out exactly
    // once, and a reader must see one pusher's completions in the order pushed.
    // Context = pusher id * SPAN + that pusher's sequence number.
    const TOTAL: usize = 20_000;
    const SPAN: usize = 1 << 20;
    thread_local! {
        static PUSHER: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }
    let budget = Arc::new(AtomicUsize::new(TOTAL));
    let ids = Arc::new(AtomicUsize::new(1));
    let (b2, ids2) = (budget.clone(), ids.clone());
    // Room for all of them: what a sink does not take is queued, never dropped.
    let q = driven(TOTAL + 64, move |q: &KitCq| {
        let mut k = 0;
        for _ in 0..3 {
            if b2
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                break;
            }
            let (mut id, seq) = PUSHER.get();
            if id == 0 {
                id = ids2.fetch_add(1, Ordering::SeqCst);
            }
            PUSHER.set((id, seq + 1));
            q.push_entry(&tagged(id * SPAN + seq)).unwrap();
            k += 1;
        }
        k
    });
    let seen: Vec<Vec<usize>> = thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let (q, budget) = (&q, &budget);
                sc.spawn(move || {
                    let mut mine = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(30);
                    loop {
                        match read_ctx(q, 1 + t) {
                            Ok(v) => mine.extend(v),
                            Err(e) => assert_eq!(e.code(), Errno::EAGAIN),
                        }
                        if budget.load(Ordering::SeqCst) == 0 && !q.is_ready() {
                            break;
                        }
                        assert!(Instant::now() < deadline, "readers stalled");
                    }
                    mine
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<usize> = seen.iter().flatten().copied().collect();
    assert_eq!(all.len(), TOTAL);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), TOTAL, "a completion came out twice");
    for mine in &seen {
        for p in 1..ids.load(Ordering::SeqCst) {
            let from_p: Vec<usize> = mine.iter().filter(|&&c| c / SPAN == p).copied().collect();
            assert!(from_p.windows(2).all(|w| w[0] < w[1]));
        }
    }
}

#[test]
fn reading_cq_names_the_cq_whose_read_drives() {
    use std::sync::Mutex;
    let seen: Arc<Mutex<Vec<Option<usize>>>> = Arc::default();
    let log = seen.clone();
    let q = driven(8, move |_q| {
        log.lock().unwrap().push(reading_cq());
        0
    });
    assert_eq!(reading_cq(), None, "no read drives here");
    assert_eq!(code(read_ctx(&q, 1)), Errno::EAGAIN);
    // A drive that is no CQ read (a counter's, a wait's, the auto thread's).
    q.progress_engine().unwrap().drive();
    assert_eq!(*seen.lock().unwrap(), vec![Some(q.id()), None]);
    assert_ne!(q.id(), 0);
    assert_eq!(reading_cq(), None, "the read's sink is closed again");
}
