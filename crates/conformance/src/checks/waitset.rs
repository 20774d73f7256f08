//! Wait sets (fi_wait(3)) and poll sets (fi_poll(3)): CQs, counters and EQs opened
//! with `FI_WAIT_SET` signal their set; a poll set reports the contexts of the members
//! with something new; members and sets refuse to close out of order (`FI_EBUSY`).
//! Every wait is bounded.

use std::time::{Duration, Instant};

use ofi::cntr::CntrAttr;
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::eq::{EqAttr, Event};
use ofi::wait::WaitSet;
use ofi::{CqFormat, EqEvent, Errno, Info, OpFlags, WaitObj};

use crate::fixture::expect_errno;
use crate::fixture::{open_domain, post_recv, send};
use crate::{Subject, WAIT};

fn first_info(s: &Subject) -> Info {
    s.claimed().infos[0].clone()
}

fn assert_times_out(set: &WaitSet, what: &str) {
    let t = Instant::now();
    let e = set.wait(20).expect_err(what);
    assert_eq!(e.code(), Errno::ETIMEDOUT, "{what}: {e}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "fi_wait(20 ms) took {:?}",
        t.elapsed()
    );
}

fn wait_signalled(set: &WaitSet, what: &str) {
    set.wait(WAIT.as_millis() as i32)
        .unwrap_or_else(|e| panic!("fi_wait after {what}: {e} ({})", e.code()));
}

/// A counter and an EQ opened in a wait set wake `fi_wait`; once read, the set times
/// out again; the set has an fd; it cannot close before its members (`FI_EBUSY`).
pub fn wait_set_counter_and_eq(s: &Subject) {
    let info = first_info(s);
    let (fabric, domain) = open_domain(s, &info);
    let mut set = crate::pair::open_wait_set(&fabric);
    assert!(set.fd().expect("the wait set's fd") >= 0);
    assert_times_out(&set, "fi_wait on an empty set");

    let mut cntr = domain
        .cntr_open_in(
            &CntrAttr {
                wait_obj: WaitObj::Unspec,
                ..CntrAttr::default()
            },
            &set,
            0x11,
        )
        .unwrap_or_else(|e| panic!("fi_cntr_open with FI_WAIT_SET: {e}"));
    assert_times_out(&set, "fi_wait with an unchanged counter");
    cntr.add(3).expect("fi_cntr_add");
    wait_signalled(&set, "fi_cntr_add");
    assert_eq!(cntr.read().expect("fi_cntr_read"), 3);
    assert_times_out(&set, "fi_wait once the counter change was read");

    let eq_claimed = s.claimed().check(crate::Capability::Eq).is_ok();
    let mut eq = eq_claimed.then(|| {
        fabric
            .eq_open_in(
                &EqAttr {
                    flags: OpFlags::WRITE.bits(),
                    ..EqAttr::default()
                },
                &set,
                0x12,
            )
            .unwrap_or_else(|e| panic!("fi_eq_open with FI_WAIT_SET: {e}"))
    });
    if let Some(eq) = &eq {
        let ev = Event {
            event: EqEvent::Notify,
            fid: 0x77,
            data: 0x78,
            ..Event::default()
        };
        eq.write(&ev).expect("fi_eq_write");
        wait_signalled(&set, "fi_eq_write");
        let got = eq.read().expect("fi_eq_read");
        assert_eq!((got.fid, got.data), (0x77, 0x78), "the written event");
        assert_times_out(&set, "fi_wait once the event was read");
    }

    expect_errno(set.close(), Errno::EBUSY, "closing a wait set with members");
    cntr.close().expect("closing the counter");
    if let Some(eq) = &mut eq {
        eq.close().expect("closing the EQ");
    }
    set.close().expect("closing the wait set after its members");
}

/// CQs opened in a wait set wake `fi_wait` when a message completes (a pair of every
/// endpoint type the provider offers, connected ones included); the set times out
/// before anything happened.
pub fn wait_set_wakes_on_completion(s: &Subject) {
    crate::pair::each_type(
        s,
        ofi::Caps::MSG,
        |_| true,
        |t, info| {
            let spec = crate::pair::PairSpec {
                cq_in_wait_set: true,
                ..crate::pair::PairSpec::new(t, ofi::Caps::MSG)
            };
            let p = crate::pair::Pair::with_info(s, &spec, info);
            let set = p.wait_set.as_ref().expect("the pair's wait set");
            assert_times_out(set, "fi_wait before any operation");
            let mut buf = [0u8; 64];
            post_recv(&p.a.ep, &mut buf, 0x31).expect("fi_recv");
            send(&p.b.ep, b"wake the set", p.b.peer, 0x30).expect("fi_send");
            wait_signalled(set, "a message between the two sides");
            let r = p.wait_ok(0, "the receive");
            assert_eq!(r.op_context, 0x31);
            assert_eq!(&buf[..12], b"wake the set");
            let sent = p.wait_ok(1, "the send");
            assert_eq!(sent.op_context, 0x30);
        },
    );
}

/// Poll until `want` (a context) is reported, within [`WAIT`].
fn poll_until(ps: &ofi::poll::PollSet, want: usize, what: &str) -> Vec<usize> {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut ctx = [0usize; 4];
        let n = ps
            .poll(&mut ctx)
            .unwrap_or_else(|e| panic!("fi_poll ({what}): {e}"));
        if ctx[..n].contains(&want) {
            return ctx[..n].to_vec();
        }
        assert!(
            Instant::now() < deadline,
            "fi_poll never reported context {want:#x} ({what})"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn poll_nothing(ps: &ofi::poll::PollSet, what: &str) {
    let mut ctx = [0usize; 4];
    let n = ps
        .poll(&mut ctx)
        .unwrap_or_else(|e| panic!("fi_poll ({what}): {e}"));
    assert_eq!(n, 0, "fi_poll reported {:?} ({what})", &ctx[..n]);
}

/// A poll set reports a counter once per change and a CQ while it is not empty;
/// `fi_poll_del` of a non-member and an empty context array are `FI_EINVAL`; a member
/// cannot close while in the set, nor the set while it has members (`FI_EBUSY`).
pub fn poll_set_reports_members(s: &Subject) {
    let info = first_info(s);
    let (fabric, domain) = open_domain(s, &info);
    let mut ps = fabric.poll_open().expect("fi_poll_open");
    let cq: CompletionQueue = domain
        .cq_open(&CqAttr::with_format(CqFormat::Msg))
        .expect("fi_cq_open");
    let mut cntr = domain
        .cntr_open(&CntrAttr::default())
        .expect("fi_cntr_open");
    ps.add_cq(&cq, 0xc0).expect("fi_poll_add CQ");
    ps.add_cntr(&cntr, 0xc1).expect("fi_poll_add counter");
    assert_eq!(ps.len(), 2);
    poll_nothing(&ps, "nothing happened yet");

    cntr.add(5).expect("fi_cntr_add");
    assert_eq!(poll_until(&ps, 0xc1, "a counter change"), vec![0xc1]);
    poll_nothing(&ps, "the change was reported once");

    assert_eq!(
        ps.poll(&mut []).expect_err("fi_poll with no room").code(),
        Errno::EINVAL
    );
    expect_errno(
        cntr.close(),
        Errno::EBUSY,
        "closing a counter that is in a poll set",
    );
    expect_errno(ps.close(), Errno::EBUSY, "closing a poll set with members");

    ps.del(&cntr).expect("fi_poll_del counter");
    assert_eq!(
        ps.del(&cntr).expect_err("deleting it again").code(),
        Errno::EINVAL
    );
    cntr.close()
        .expect("closing the counter once out of the set");
    ps.del(&cq).expect("fi_poll_del CQ");
    ps.close().expect("closing the empty poll set");
}

/// A poll set reports a CQ with completions (a message from the other end of a pair,
/// on every endpoint type the provider offers), and stops once they are read.
pub fn poll_set_reports_completions(s: &Subject) {
    crate::pair::each_pair(s, ofi::Caps::MSG, |p| {
        let ps = p.fabric.poll_open().expect("fi_poll_open");
        ps.add_cq(&p.a.cq, 0xd0).expect("fi_poll_add CQ");
        poll_nothing(&ps, "before any operation");
        let mut buf = [0u8; 32];
        post_recv(&p.a.ep, &mut buf, 0x41).expect("fi_recv");
        send(&p.b.ep, b"poll me", p.b.peer, 0x40).expect("fi_send");
        poll_until(&ps, 0xd0, "a receive completion in the CQ");
        let r = p.wait_ok(0, "the receive");
        assert_eq!(r.op_context, 0x41);
        assert_eq!(&buf[..7], b"poll me");
        let _ = p.wait_ok(1, "the send");
        poll_nothing(&ps, "the CQ was emptied");
        ps.del(&p.a.cq).expect("fi_poll_del");
    });
}
