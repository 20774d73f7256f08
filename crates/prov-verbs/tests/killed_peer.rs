//! A peer process killed (SIGKILL) while connected: within a bounded time the posted
//! receives complete in error (flushed: `FI_ECANCELED`), a send to it completes in
//! error, and the EQ reports `FI_SHUTDOWN`. The test binary runs itself again as the
//! child (`child_side`, active only with `VERBS_CHILD_ADDR` set).

use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
mod common;

use common::subject;
use ofi::{Caps, EpType, EqEvent, Errno};
use ofi_conformance::fixture::{open_domain, post_recv};
use ofi_conformance::pair::{info_for, listen, open_side, EqPoller, PairSpec, CTX_A, CTX_B};
use ofi_testkit::child::{child_mode, hex, say, unhex, ChildProc};

const CHILD_ENV: &str = "VERBS_CHILD_ADDR";
/// How long the whole failure may take to be noticed.
const BOUND: Duration = Duration::from_secs(10);
/// How long the child may take to connect and say it is ready.
const CHILD_BOUND: Duration = Duration::from_secs(30);

/// The child: connect to the parent's listener, say READY, then wait to be killed
/// (bounded: it exits by itself after 30 s).
#[test]
fn child_side() {
    let Some(addr) = child_mode(CHILD_ENV) else {
        return;
    };
    let s = subject();
    let info = info_for(&s, EpType::Msg, Caps::MSG).expect("verbs MSG info");
    let (fabric, domain) = open_domain(&s, &info);
    let eq = fabric.eq_open(&ofi::eq::EqAttr::default()).unwrap();
    let spec = PairSpec::new(EpType::Msg, Caps::MSG);
    let (ep, cq, _, _) = open_side(&domain, &info, &spec, CTX_A, Some(&eq));
    ep.enable().unwrap();
    ep.connect(&unhex(&addr).expect("the parent's name in hex"), b"")
        .unwrap();
    EqPoller::new(1).expect(&[&eq], 0, &[&cq], EqEvent::Connected, "child");
    say("READY");
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        let mut none: [CqTaggedEntry; 0] = [];
        let _ = cq.read(&mut none);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_peer_fails_posted_work_and_raises_shutdown() {
    if child_mode(CHILD_ENV).is_some() {
        return;
    }
    let s = subject();
    let info = info_for(&s, EpType::Msg, Caps::MSG).expect("verbs MSG info");
    let (fabric, domain) = open_domain(&s, &info);
    let (_pep, peq, name) = listen(&fabric, &info);
    let mut child = ChildProc::spawn(
        CHILD_ENV,
        "child_side",
        &hex(&name),
        &[("FI_VERBS_DEVICE", "soft")],
        CHILD_BOUND,
    );
    let mut poll = EqPoller::new(1);
    let start = Instant::now();
    let req = loop {
        match poll.next(&[&peq], 0, &[]) {
            Some(Ok(ev)) if ev.event == EqEvent::ConnReq => break ev,
            Some(other) => panic!("unexpected EQ entry {other:?}"),
            None if start.elapsed() < BOUND => {}
            None => panic!("no connection request from the child"),
        }
    };
    let req_info = req.info.as_deref().cloned().unwrap();
    let spec = PairSpec::new(EpType::Msg, Caps::MSG);
    let (ep, cq, _, _) = open_side(&domain, &req_info, &spec, CTX_B, Some(&peq));
    ep.accept(b"").unwrap();
    poll.expect(&[&peq], 0, &[&cq], EqEvent::Connected, "server");
    // Wait for the child's READY, then kill it.
    assert_eq!(child.line("READY"), "READY");
    let mut bufs = [[0u8; 32]; 2];
    for (i, b) in bufs.iter_mut().enumerate() {
        post_recv(&ep, b, 0x70 + i).unwrap();
    }
    child.child.kill().expect("SIGKILL the child");
    child.child.wait().expect("reap the child");
    let killed = Instant::now();
    // A send after the peer died completes in error too.
    let msg = [7u8; 16];
    // SAFETY: `msg` outlives the operation's completion, awaited below.
    let _ = unsafe {
        ep.send(
            msg.as_ptr(),
            msg.len(),
            std::ptr::null_mut(),
            ofi::ADDR_NOTAVAIL,
            0x80,
        )
    };
    let mut errs = Vec::new();
    let mut shutdown = false;
    while (errs.len() < 3 || !shutdown) && killed.elapsed() < BOUND {
        match ofi_conformance::pair::poll(&cq) {
            Some(Ok(e)) => panic!("a successful completion after the peer died: {e:?}"),
            Some(Err(ee)) => errs.push((ee.op_context, Errno(ee.err))),
            None => {}
        }
        match peq.read() {
            Ok(ev) if ev.event == EqEvent::Shutdown => shutdown = true,
            Ok(ev) => panic!("unexpected event {ev:?}"),
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(shutdown, "no FI_SHUTDOWN within {BOUND:?}");
    println!("after the kill, within {:?}: {errs:?}", killed.elapsed());
    errs.sort_unstable_by_key(|e| e.0);
    let ctxs: Vec<usize> = errs.iter().map(|e| e.0).collect();
    assert!(
        ctxs.contains(&0x70) && ctxs.contains(&0x71),
        "posted receives not failed: {errs:?}"
    );
    for (ctx, code) in &errs {
        if *ctx != 0x80 {
            assert_eq!(*code, Errno::ECANCELED, "receive {ctx:#x}");
        }
    }
}
