//! A peer process killed (SIGKILL) with operations under way: within a bounded time
//! (the probe interval plus the device's report) every operation with it completes with
//! `FI_EIO` — a long message waiting for the peer's clear-to-send, a message sent with
//! delivery complete the peer's application never received — and a send after that
//! is refused (`FI_EHOSTUNREACH`) or completes in
//! error. The test binary runs itself again as the child (`child_side`, active only
//! with `EFA_CHILD` set).
//!
//! And `fi_av_remove` of a live peer (in this process) with operations under way: they
//! complete at the next CQ read with `FI_ECANCELED`, a send to the removed fabric
//! address is `FI_EINVAL` at the call, and the address inserted again goes on where it
//! was (the peer's message ids continue: what it holds and what comes next arrive in
//! order).

use std::time::{Duration, Instant};

use ofi::av::AddressVector;
use ofi::cq::CompletionQueue;
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{Address, Caps, EpType, Errno, Info, OpFlags};
use ofi_conformance::fixture::{open_domain, post_recv, send, sendmsg};
use ofi_conformance::pair::{info_for, open_side, poll, PairSpec, CTX_A, CTX_B};
use ofi_conformance::plugin::linked_subject;
use ofi_conformance::Subject;
use ofi_testkit::child::{child_mode, hex, say, unhex, ChildProc};

const CHILD_ENV: &str = "EFA_CHILD";
/// How long the whole failure may take to be noticed (the probe comes after 50 ms).
const BOUND: Duration = Duration::from_secs(10);
/// How long the child may take to open its endpoint and say its address.
const CHILD_BOUND: Duration = Duration::from_secs(30);

fn subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    // A peer with work waiting is probed after a tenth of this: 50 ms.
    std::env::set_var("FI_EFA_PEER_TIMEOUT", "500");
    linked_subject::<ofi_prov_efa::EfaProvider>()
}

/// An enabled RDM endpoint with its CQ and AV, in its own fabric and domain (field
/// order = drop order).
struct RdmSide {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    info: Info,
    _domain: Domain,
    _fabric: Fabric,
}

/// The [`RdmSide`] of `s` with context `context`.
fn rdm_side(s: &Subject, context: usize) -> RdmSide {
    let info = info_for(s, EpType::Rdm, Caps::MSG).expect("efa RDM info");
    let (fabric, domain) = open_domain(s, &info);
    let spec = PairSpec::new(EpType::Rdm, Caps::MSG);
    let (ep, cq, _, av) = open_side(&domain, &info, &spec, context, None);
    ep.enable().unwrap();
    RdmSide {
        ep,
        cq,
        av: av.expect("an RDM side has an AV"),
        info,
        _domain: domain,
        _fabric: fabric,
    }
}

/// A send of `buf` to `dest` with delivery complete (it completes only once the
/// receiver's application took it).
/// The caller keeps `buf` until the operation completed (or was canceled) and its
/// completion was read.
fn send_dc(ep: &Endpoint, buf: &[u8], dest: u64, context: usize) {
    let flags = OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION;
    sendmsg(ep, buf, dest, context, flags).unwrap();
}

/// The child: an RDM endpoint that prints its name and then keeps making progress
/// (answering handshakes) without posting a receive, until killed (bounded: it exits
/// by itself after 30 s).
#[test]
fn child_side() {
    if child_mode(CHILD_ENV).is_none() {
        return;
    }
    let side = rdm_side(&subject(), CTX_A);
    let RdmSide { ep, cq, .. } = &side;
    say(&format!("ADDR {}", hex(&ep.getname().unwrap())));
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        let _ = ofi_conformance::pair::poll(cq);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_killed_peer_fails_its_operations_with_eio() {
    if child_mode(CHILD_ENV).is_some() {
        return;
    }
    let side = rdm_side(&subject(), CTX_B);
    let RdmSide {
        ep, cq, av, info, ..
    } = &side;
    let mut child = ChildProc::spawn(CHILD_ENV, "child_side", "1", &[], CHILD_BOUND);
    let line = child.line("address");
    let name = line
        .strip_prefix("ADDR ")
        .and_then(unhex)
        .unwrap_or_else(|| panic!("not an address line: {line:?}"));
    let addr = Address::from_bytes(info.addr_format, &name).unwrap();
    let peer = av.insert(&[addr]).unwrap()[0];
    // A long message (clear-to-send: the child posts no receive, so none comes).
    let long = vec![5u8; 256 << 10];
    ofi_conformance::fixture::send(ep, &long, peer, 0x90).unwrap();
    // A small message with delivery complete: the child's application never takes it.
    let small = [6u8; 64];
    send_dc(ep, &small, peer, 0x91);
    // Let the handshake and the first packets happen: the child answers.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        assert!(
            ofi_conformance::pair::poll(cq).is_none(),
            "a completion before the kill"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    child.child.kill().expect("SIGKILL the child");
    child.child.wait().expect("reap the child");
    let killed = Instant::now();
    let mut errs = Vec::new();
    while errs.len() < 2 && killed.elapsed() < BOUND {
        match ofi_conformance::pair::poll(cq) {
            Some(Ok(e)) => panic!("a successful completion after the peer died: {e:?}"),
            Some(Err(ee)) => errs.push((ee.op_context, Errno(ee.err))),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    println!("after the kill, within {:?}: {errs:?}", killed.elapsed());
    errs.sort_unstable_by_key(|e| e.0);
    assert_eq!(
        errs,
        vec![(0x90, Errno::EIO), (0x91, Errno::EIO)],
        "both sends fail with FI_EIO within {BOUND:?}"
    );
    // A new operation with the lost peer: refused, or completed in error.
    let mut buf = [0u8; 16];
    match ofi_conformance::fixture::send(ep, &buf, peer, 0x92) {
        Err(e) => assert_eq!(e.code(), Errno::EHOSTUNREACH, "{e}"),
        Ok(()) => {
            let t = Instant::now();
            loop {
                match ofi_conformance::pair::poll(cq) {
                    Some(Err(ee)) => {
                        assert_eq!(ee.op_context, 0x92);
                        break;
                    }
                    Some(Ok(e)) => panic!("a send to a lost peer succeeded: {e:?}"),
                    None => assert!(t.elapsed() < BOUND, "no completion of the late send"),
                }
            }
        }
    }
    // Removed from the AV, the lost peer is forgotten: its address may be inserted
    // again (a restarted peer), and a send to it starts over — here it fails again in
    // its completion, the process being gone.
    av.remove(&[peer], 0).unwrap();
    assert!(
        ofi_conformance::pair::poll(cq).is_none(),
        "nothing left to complete"
    );
    let addr = Address::from_bytes(info.addr_format, &name).unwrap();
    let again = av.insert(&[addr]).unwrap()[0];
    ofi_conformance::fixture::send(ep, &buf, again, 0x94)
        .expect("a send to a re-inserted address is accepted");
    let t = Instant::now();
    loop {
        match ofi_conformance::pair::poll(cq) {
            Some(Err(ee)) => {
                assert_eq!((ee.op_context, Errno(ee.err)), (0x94, Errno::EIO));
                break;
            }
            Some(Ok(e)) => panic!("a send to a dead peer succeeded: {e:?}"),
            None => assert!(
                t.elapsed() < BOUND,
                "no completion of the send after re-insert"
            ),
        }
    }
    // The endpoint still takes receives.
    post_recv(ep, &mut buf, 0x93).unwrap();
}

/// `b`'s fabric address in `a`'s AV.
fn insert(a: &RdmSide, b: &RdmSide) -> u64 {
    let name = b.ep.getname().unwrap();
    let addr = Address::from_bytes(a.info.addr_format, &name).unwrap();
    a.av.insert(&[addr]).unwrap()[0]
}

#[test]
fn removing_a_live_peer_cancels_its_operations_at_once() {
    if child_mode(CHILD_ENV).is_some() {
        return;
    }
    let s = subject();
    let (a, b) = (rdm_side(&s, CTX_A), rdm_side(&s, CTX_B));
    let peer = insert(&a, &b);
    insert(&b, &a);
    // B posts nothing: the long message waits for its clear-to-send, the small one for
    // B's application (delivery complete).
    let long = vec![5u8; 256 << 10];
    send(&a.ep, &long, peer, 0x90).unwrap();
    let small = [6u8; 64];
    send_dc(&a.ep, &small, peer, 0x91);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(50) {
        assert!(poll(&a.cq).is_none(), "a completion before the removal");
        let _ = poll(&b.cq);
        std::thread::sleep(Duration::from_millis(1));
    }
    a.av.remove(&[peer], 0).unwrap();
    let mut errs = Vec::new();
    let t = Instant::now();
    while errs.len() < 2 && t.elapsed() < BOUND {
        match poll(&a.cq) {
            Some(Ok(e)) => panic!("a successful completion after the removal: {e:?}"),
            Some(Err(ee)) => errs.push((ee.op_context, Errno(ee.err))),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    errs.sort_unstable_by_key(|e| e.0);
    assert_eq!(
        errs,
        vec![(0x90, Errno::ECANCELED), (0x91, Errno::ECANCELED)],
        "both sends canceled"
    );
    let e = send(&a.ep, &small, peer, 0x92).unwrap_err();
    assert_eq!(
        e.code(),
        Errno::EINVAL,
        "a send to the removed address: {e}"
    );
    // Inserted again: B receives what it held and what comes next, in order.
    let again = insert(&a, &b);
    let third = [7u8; 32];
    send(&a.ep, &third, again, 0x93).unwrap();
    let mut bufs = [
        vec![0u8; 256 << 10],
        vec![0u8; 256 << 10],
        vec![0u8; 256 << 10],
    ];
    for (i, buf) in bufs.iter_mut().enumerate() {
        post_recv(&b.ep, buf, 0xb0 + i).unwrap();
    }
    let (mut got, mut sent) = (Vec::new(), false);
    let t = Instant::now();
    while (got.len() < 3 || !sent) && t.elapsed() < BOUND {
        match poll(&b.cq) {
            Some(Ok(e)) => got.push((e.op_context, e.len)),
            Some(Err(ee)) => panic!("a receive failed: {ee:?}"),
            None => {}
        }
        match poll(&a.cq) {
            Some(Ok(e)) => {
                assert_eq!(e.op_context, 0x93, "only the new send completes");
                sent = true;
            }
            Some(Err(ee)) => panic!("the new send failed: {ee:?}"),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    assert!(sent, "the send after re-insert completed");
    // Receives match in send order (the long one completes last, once its data came).
    got.sort_unstable();
    assert_eq!(
        got,
        vec![(0xb0, long.len()), (0xb1, small.len()), (0xb2, third.len())],
        "matched in send order"
    );
    assert_eq!(&bufs[0][..long.len()], &long[..]);
    assert_eq!(&bufs[2][..third.len()], &third[..]);
}
