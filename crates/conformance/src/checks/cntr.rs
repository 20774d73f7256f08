//! Counters (fi_cntr(3)): read / add / set and their error twins, `fi_cntr_wait`
//! (reached → success, time-out → `FI_ETIMEDOUT`), and counters bound to endpoints as
//! completions for sends and receives (every endpoint type with `FI_MSG`).

use std::time::{Duration, Instant};

use ofi::cntr::{CntrAttr, Counter};
use ofi::{Caps, Errno, OpFlags};

use crate::pair::each_pair_spec;
use crate::{fixture, Subject, WAIT};

fn counter(s: &Subject) -> (ofi::fabric::Fabric, ofi::domain::Domain, Counter) {
    let info = s.claimed().infos[0].clone();
    let (fabric, domain) = fixture::open_domain(s, &info);
    let c = domain
        .cntr_open(&CntrAttr {
            // fi_cntr_wait needs a wait object (FI_WAIT_NONE forbids it).
            wait_obj: ofi::WaitObj::Unspec,
            ..CntrAttr::default()
        })
        .unwrap_or_else(|e| panic!("fi_cntr_open (FI_WAIT_UNSPEC): {e}"));
    (fabric, domain, c)
}

/// A new counter reads 0 / 0; add, set, adderr and seterr change exactly their half.
pub fn cntr_read_add_set(s: &Subject) {
    let (_f, _d, c) = counter(s);
    assert_eq!(c.read().unwrap(), 0, "a new counter");
    assert_eq!(c.readerr().unwrap(), 0, "a new counter's errors");
    c.add(5).unwrap_or_else(|e| panic!("fi_cntr_add: {e}"));
    assert_eq!(c.read().unwrap(), 5, "after add(5)");
    c.add(2).unwrap();
    assert_eq!(c.read().unwrap(), 7, "after add(2)");
    c.set(3).unwrap_or_else(|e| panic!("fi_cntr_set: {e}"));
    assert_eq!(c.read().unwrap(), 3, "after set(3)");
    assert_eq!(c.readerr().unwrap(), 0, "set does not touch the errors");
    c.adderr(4)
        .unwrap_or_else(|e| panic!("fi_cntr_adderr: {e}"));
    assert_eq!(c.readerr().unwrap(), 4, "after adderr(4)");
    assert_eq!(c.read().unwrap(), 3, "adderr does not touch the count");
    c.seterr(1)
        .unwrap_or_else(|e| panic!("fi_cntr_seterr: {e}"));
    assert_eq!(c.readerr().unwrap(), 1, "after seterr(1)");
    c.set(0).unwrap();
    c.seterr(0).unwrap();
    assert_eq!((c.read().unwrap(), c.readerr().unwrap()), (0, 0));
}

/// `fi_cntr_wait`: a threshold already reached returns at once; one not reached
/// times out with `FI_ETIMEDOUT` after about the time-out; one reached by another
/// thread's `fi_cntr_add` while waiting wakes it.
pub fn cntr_wait_threshold_and_timeout(s: &Subject) {
    let (_f, _d, c) = counter(s);
    c.set(4).unwrap();
    c.wait(4, 100)
        .unwrap_or_else(|e| panic!("fi_cntr_wait for a reached threshold: {e}"));
    let t = Instant::now();
    let e = c.wait(5, 100).expect_err("threshold 5 is never reached");
    let took = t.elapsed();
    assert_eq!(e.code(), Errno::ETIMEDOUT, "fi_cntr_wait time-out: {e}");
    assert!(
        took >= Duration::from_millis(90) && took < WAIT,
        "fi_cntr_wait(100 ms) returned after {took:?}"
    );
    let t = Instant::now();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            c.add(2).unwrap();
        });
        c.wait(6, WAIT.as_millis() as i32)
            .unwrap_or_else(|e| panic!("fi_cntr_wait woken by an add: {e} ({})", e.code()));
    });
    assert!(t.elapsed() < WAIT);
    assert_eq!(c.read().unwrap(), 6);
}

/// Counters bound with `FI_SEND | FI_RECV` count completed sends and receives, on
/// every endpoint type with `FI_MSG`; the CQ still reports them, the error count
/// stays 0.
pub fn cntr_counts_sends_and_receives(s: &Subject) {
    each_pair_spec(
        s,
        Caps::MSG,
        |spec| spec.cntr_flags = OpFlags::SEND | OpFlags::RECV,
        |p| {
            let mut bufs = vec![[0u8; 16]; 3];
            for (i, b) in bufs.iter_mut().enumerate() {
                fixture::post_recv(&p.b.ep, b, 0x10 + i).unwrap();
            }
            for i in 0..3 {
                fixture::send(&p.a.ep, b"counted", p.a.peer, 0x20 + i)
                    .unwrap_or_else(|e| panic!("fi_send: {e}"));
            }
            p.wait_n(0, 3, "send completions");
            p.wait_n(1, 3, "receive completions");
            let ca = p.a.cntr.as_ref().unwrap();
            let cb = p.b.cntr.as_ref().unwrap();
            ca.wait(3, WAIT.as_millis() as i32)
                .unwrap_or_else(|e| panic!("send counter to 3: {e}; it reads {:?}", ca.read()));
            cb.wait(3, WAIT.as_millis() as i32)
                .unwrap_or_else(|e| panic!("receive counter to 3: {e}; it reads {:?}", cb.read()));
            assert_eq!(ca.read().unwrap(), 3, "sender's counter (FI_SEND)");
            assert_eq!(cb.read().unwrap(), 3, "receiver's counter (FI_RECV)");
            assert_eq!(ca.readerr().unwrap(), 0);
            assert_eq!(cb.readerr().unwrap(), 0);
            for b in &bufs {
                assert_eq!(&b[..7], b"counted");
            }
        },
    );
}
