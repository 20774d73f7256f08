//! Error paths over the software device with the codes of `verbs::cq`'s table: a bad
//! rkey, an access past a region's end and a write into a region without remote write
//! complete at the initiator with `FI_EACCES`, the target memory untouched; a queue pair
//! in error (after `fi_shutdown`) flushes posted receives as `FI_ECANCELED`, and the
//! peer hears `FI_SHUTDOWN`.

mod common;

use common::subject;
use ofi::{Caps, EpType, Errno, OpFlags};
use ofi_conformance::checks::rma::Region;
use ofi_conformance::fixture::post_recv;
use ofi_conformance::pair::{EqPoller, Pair, PairSpec};
use ofi_conformance::Subject;

const LOCAL: OpFlags = OpFlags::READ
    .union(OpFlags::WRITE)
    .union(OpFlags::SEND)
    .union(OpFlags::RECV);

/// One failing RMA on a fresh pair (the failure puts both queue pairs in error, as on
/// hardware): `FI_EACCES` at the initiator, the status in `prov_errno`, target intact.
fn failing_rma(s: &Subject, access: OpFlags, read: bool, bad_key: bool, off: u64, what: &str) {
    let p = Pair::new(s, &PairSpec::new(EpType::Msg, Caps::RMA | Caps::MSG));
    let target = Region::new(&p, 1, 4096, 0x11, access, 0);
    let local = Region::new(&p, 0, 4096, 0x22, LOCAL, 0);
    let key = if bad_key {
        target.mr.key() ^ 0x5a5a
    } else {
        target.mr.key()
    };
    let addr = target.addr + off;
    // SAFETY: `local` outlives the operation's completion, read below.
    unsafe {
        if read {
            p.a.ep
                .read(local.ptr, 64, local.mr.desc(), p.a.peer, addr, key, 0x51)
        } else {
            p.a.ep
                .write(local.ptr, 64, local.mr.desc(), p.a.peer, addr, key, 0x51)
        }
    }
    .unwrap_or_else(|e| panic!("{what}: posting failed: {e}"));
    let ee = p.wait_err(0, what);
    assert_eq!(ee.op_context, 0x51, "{what}: context");
    assert_eq!(Errno(ee.err), Errno::EACCES, "{what}: error code");
    assert_eq!(
        ee.prov_errno, 10,
        "{what}: IBV_WC_REM_ACCESS_ERR in prov_errno"
    );
    assert!(
        target.bytes().iter().all(|&b| b == 0x11),
        "{what}: target memory touched"
    );
    if read {
        assert!(
            local.bytes().iter().all(|&b| b == 0x22),
            "{what}: local buffer touched"
        );
    }
}

#[test]
fn remote_access_errors_are_eacces_and_leave_the_target_untouched() {
    let s = subject();
    let rw = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    failing_rma(&s, rw, false, true, 0, "write with a bad rkey");
    failing_rma(&s, rw, true, true, 0, "read with a bad rkey");
    failing_rma(
        &s,
        rw,
        false,
        false,
        4096 - 8,
        "write past the region's end",
    );
    failing_rma(
        &s,
        OpFlags::REMOTE_READ,
        false,
        false,
        0,
        "write without remote write",
    );
    failing_rma(
        &s,
        OpFlags::REMOTE_WRITE,
        true,
        false,
        0,
        "read without remote read",
    );
}

#[test]
fn shutdown_flushes_posted_receives_as_ecanceled() {
    let s = subject();
    let p = Pair::new(&s, &PairSpec::new(EpType::Msg, Caps::MSG));
    let mut bufs = [[0u8; 64]; 3];
    for (i, b) in bufs.iter_mut().enumerate() {
        post_recv(&p.b.ep, b, 0x60 + i).unwrap();
    }
    p.b.ep.shutdown(0).unwrap();
    let mut got: Vec<usize> = (0..3)
        .map(|_| {
            let ee = p.wait_err(1, "flushed receive");
            assert_eq!(Errno(ee.err), Errno::ECANCELED, "flushed receive's code");
            ee.op_context
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, vec![0x60, 0x61, 0x62]);
    let eqs = [p.a.eq.as_ref().unwrap(), p.b.eq.as_ref().unwrap()];
    let ev = EqPoller::new(2).expect(
        &eqs,
        0,
        &[&p.a.cq, &p.b.cq],
        ofi::EqEvent::Shutdown,
        "the peer of a shut-down endpoint",
    );
    assert_eq!(ev.fid, ofi_conformance::pair::CTX_A);
}
