//! `fi_av_remove` of a live peer with operations under way: they complete at the next
//! CQ read with `FI_ECANCELED`, a send to the removed fabric address is `FI_EINVAL` at
//! the call, and the address inserted again goes on where it was (the peer's message
//! ids continue: what it already holds and what comes next arrive in order).

use std::time::{Duration, Instant};

use ofi::av::AddressVector;
use ofi::cq::CompletionQueue;
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{Caps, EpType, Errno, Info, OpFlags};
use ofi_conformance::fixture::{open_domain, post_recv, send};
use ofi_conformance::pair::{info_for, open_side, poll, PairSpec, CTX_A, CTX_B};
use ofi_conformance::plugin::linked_subject;
use ofi_conformance::Subject;

const BOUND: Duration = Duration::from_secs(20);

fn subject() -> Subject {
    std::env::set_var("FI_EFA_DEVICE", "soft");
    linked_subject::<ofi_prov_efa::EfaProvider>()
}

/// An enabled RDM endpoint with its CQ and AV (field order = drop order).
struct Side {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    info: Info,
    _domain: Domain,
    _fabric: Fabric,
}

fn side(s: &Subject, context: usize) -> Side {
    let info = info_for(s, EpType::Rdm, Caps::MSG).expect("efa RDM info");
    let (fabric, domain) = open_domain(s, &info);
    let spec = PairSpec::new(EpType::Rdm, Caps::MSG);
    let (ep, cq, _, av) = open_side(&domain, &info, &spec, context, None);
    ep.enable().unwrap();
    Side {
        ep,
        cq,
        av: av.expect("an RDM side has an AV"),
        info,
        _domain: domain,
        _fabric: fabric,
    }
}

/// `b`'s fabric address in `a`'s AV.
fn insert(a: &Side, b: &Side) -> u64 {
    let name = b.ep.getname().unwrap();
    let addr = ofi::Address::from_bytes(a.info.addr_format, &name).unwrap();
    a.av.insert(&[addr]).unwrap()[0]
}

/// A send of `buf` to `dest` with delivery complete (it completes only once the
/// receiver's application took it).
fn send_dc(ep: &Endpoint, buf: &[u8], dest: u64, context: usize) {
    let iov = [ofi::abi::raw::Iov {
        base: buf.as_ptr() as *mut _,
        len: buf.len(),
    }];
    let msg = ofi::abi::raw::Msg {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null_mut(),
        iov_count: 1,
        addr: dest,
        context,
        data: 0,
    };
    // SAFETY: the iov and its buffer outlive the operation (the caller keeps `buf`
    // until the test's end, after the operation completed or was canceled).
    unsafe {
        ep.sendmsg(
            &msg,
            (OpFlags::DELIVERY_COMPLETE | OpFlags::COMPLETION).bits(),
        )
    }
    .unwrap();
}

#[test]
fn removing_a_live_peer_cancels_its_operations_at_once() {
    let s = subject();
    let (a, b) = (side(&s, CTX_A), side(&s, CTX_B));
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
