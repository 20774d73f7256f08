//! Tests of the trigger queue and counter resolution.

use super::*;
use ofi_core::cntr::{CntrAttr, TriggerThreshold};
use ofi_core::op_kind;
use ofi_core::provider::CntrOps;

fn counter(engine: &Arc<ProgressEngine>) -> Box<KitCntr> {
    let c = Box::new(KitCntr::with_progress(&CntrAttr::default(), engine.clone()).unwrap());
    c.published();
    c
}

fn ctx_for(c: &KitCntr, threshold: usize) -> TriggeredContext {
    TriggeredContext {
        event_type: TRIGGER_THRESHOLD,
        threshold: TriggerThreshold {
            cntr: c as *const KitCntr as *mut std::ffi::c_void,
            threshold,
        },
        reserved: 0,
    }
}

fn send_call(ctx: &TriggeredContext, iov: &[Iov]) -> OwnedCall {
    let m = Msg {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null(),
        iov_count: iov.len(),
        addr: 7,
        context: ctx as *const _ as usize,
        data: 0,
    };
    let a = DataArgs {
        msg: MsgArg::Msg(&m),
        flags: Some(OpFlags::TRIGGER | OpFlags::COMPLETION),
        ..DataArgs::default()
    };
    // SAFETY: `iov` is live.
    unsafe { OwnedCall::capture("t", op_kind!(send msg), OpFlags::TRIGGER, &a) }.unwrap()
}

#[test]
fn resolves_published_counters_of_the_domain_only() {
    let engine = Arc::new(ProgressEngine::new(crate::progress::ProgressMode::Manual).unwrap());
    let other = Arc::new(ProgressEngine::new(crate::progress::ProgressMode::Manual).unwrap());
    let c = counter(&engine);
    let ctx = ctx_for(&c, 2);
    // SAFETY: `ctx` is a live triggered context.
    let (r, t) = unsafe { resolve_counter("t", &ctx as *const _ as usize, &engine) }.unwrap();
    assert_eq!(t, 2);
    r.add(5).unwrap();
    assert_eq!(c.value(), 5, "the resolved counter is the published one");
    // SAFETY: as above.
    let e = unsafe { resolve_counter("t", &ctx as *const _ as usize, &other) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "a counter of another domain");
    let mut bad = ctx;
    bad.threshold.threshold = 0;
    // SAFETY: as above.
    let e = unsafe { resolve_counter("t", &bad as *const _ as usize, &engine) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "threshold 0");
    let unknown = 0x1000usize;
    bad = ctx;
    bad.threshold.cntr = unknown as *mut _;
    // SAFETY: as above.
    let e = unsafe { resolve_counter("t", &bad as *const _ as usize, &engine) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "a pointer that names no counter");
    // SAFETY: null is refused before any read.
    let e = unsafe { resolve_counter("t", 0, &engine) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    bad = ctx;
    bad.event_type = 1;
    // SAFETY: as above.
    let e = unsafe { resolve_counter("t", &bad as *const _ as usize, &engine) }.unwrap_err();
    assert_eq!(e.code(), Errno::ENOSYS, "the XPU form");
}

#[test]
fn a_closed_counter_is_not_resolved() {
    let engine = Arc::new(ProgressEngine::new(crate::progress::ProgressMode::Manual).unwrap());
    let c = counter(&engine);
    let ctx = ctx_for(&c, 1);
    drop(c);
    // SAFETY: `ctx` is live; its counter pointer is not dereferenced.
    let e = unsafe { resolve_counter("t", &ctx as *const _ as usize, &engine) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
}

#[test]
fn capture_owns_the_arrays_and_drops_the_trigger_flag() {
    let engine = Arc::new(ProgressEngine::new(crate::progress::ProgressMode::Manual).unwrap());
    let c = counter(&engine);
    let ctx = ctx_for(&c, 1);
    let buf = [0u8; 8];
    let mut iov = vec![Iov {
        base: buf.as_ptr() as *mut _,
        len: 8,
    }];
    let call = send_call(&ctx, &iov);
    iov[0].len = 1; // the caller's array may change after the call
    let OwnedMsg::Msg(captured) = &call.msg else {
        panic!("a send is captured as an fi_msg");
    };
    assert_eq!(captured.local[0].len, 8);
    assert_eq!(
        captured.msg.msg_iov,
        captured.local.as_ptr(),
        "points at its copy"
    );
    assert!(!call.flags.contains(OpFlags::TRIGGER));
    assert_eq!(call.context(), &ctx as *const _ as usize);
}

#[test]
fn queue_is_bounded_and_cancels_in_order() {
    let engine = Arc::new(ProgressEngine::new(crate::progress::ProgressMode::Manual).unwrap());
    let c = counter(&engine);
    let ctx = ctx_for(&c, 3);
    let q = TriggerQueue::new(2);
    let iov = [];
    q.push("t", (*c).clone(), 3, send_call(&ctx, &iov)).unwrap();
    q.push("t", (*c).clone(), 4, send_call(&ctx, &iov)).unwrap();
    let e = q
        .push("t", (*c).clone(), 5, send_call(&ctx, &iov))
        .unwrap_err();
    assert_eq!(e.code(), Errno::EAGAIN);
    assert_eq!(q.len(), 2);
    c.add(3).unwrap();
    let ready = q.take_ready();
    assert_eq!(ready.len(), 1, "only the threshold reached goes");
    assert_eq!(ready[0].threshold, 3);
    let cancelled = q.cancel_all();
    assert_eq!(cancelled.len(), 1);
    assert!(q.is_empty());
}
