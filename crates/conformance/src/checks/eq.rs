//! Event queues (fi_eq(3)), on a fabric of the provider: application events written
//! with `fi_eq_write` come back from `fi_eq_read` / `fi_eq_sread` unchanged and in
//! order; `FI_PEEK` leaves the event queued; an empty EQ reads `FI_EAGAIN`, its error
//! queue reads `FI_EAGAIN`, and `fi_eq_sread` with a time-out returns `FI_EAGAIN` after
//! about that long.

use std::time::{Duration, Instant};

use ofi::eq::{EqAttr, Event, EventQueue};
use ofi::{EqEvent, Errno, OpFlags};

use crate::fixture::expect_errno;
use crate::{Subject, WAIT};

fn writable_eq(s: &Subject) -> (ofi::fabric::Fabric, EventQueue) {
    let info = s.claimed().infos[0].clone();
    let fabric = s
        .registry
        .open_fabric(&info)
        .unwrap_or_else(|e| panic!("fi_fabric: {e}"));
    let eq = fabric
        .eq_open(&EqAttr {
            flags: OpFlags::WRITE.bits(),
            // fi_eq_sread needs a wait object (FI_WAIT_NONE forbids it).
            wait_obj: ofi::WaitObj::Unspec,
            ..EqAttr::default()
        })
        .unwrap_or_else(|e| panic!("fi_eq_open (FI_WRITE, FI_WAIT_UNSPEC): {e}"));
    (fabric, eq)
}

fn event(n: u64) -> Event {
    Event {
        event: EqEvent::Notify,
        fid: 0x1000 + n as usize,
        context: 0x2000 + n as usize,
        data: 0x3000 + n,
        ..Event::default()
    }
}

fn same(got: &Event, want: &Event, what: &str) {
    assert_eq!(got.event, want.event, "{what}: event");
    assert_eq!(got.fid, want.fid, "{what}: fid");
    assert_eq!(got.context, want.context, "{what}: context");
    assert_eq!(got.data, want.data, "{what}: data");
}

/// Written events are read back in order; `FI_PEEK` leaves the event queued.
pub fn eq_write_read_peek(s: &Subject) {
    let (_fabric, eq) = writable_eq(s);
    for n in 0..3 {
        eq.write(&event(n))
            .unwrap_or_else(|e| panic!("fi_eq_write #{n}: {e} ({})", e.code()));
    }
    let p = eq
        .peek()
        .unwrap_or_else(|e| panic!("fi_eq_read FI_PEEK: {e}"));
    same(&p, &event(0), "peeked event");
    let p2 = eq.peek().unwrap_or_else(|e| panic!("second FI_PEEK: {e}"));
    same(&p2, &event(0), "peeking twice sees the same event");
    for n in 0..3 {
        let got = eq
            .read()
            .unwrap_or_else(|e| panic!("fi_eq_read #{n}: {e} ({})", e.code()));
        same(&got, &event(n), &format!("event #{n}"));
    }
    expect_errno(eq.read(), Errno::EAGAIN, "fi_eq_read of an empty EQ");
}

/// An empty EQ: `fi_eq_read`, `FI_PEEK` and `fi_eq_readerr` are `FI_EAGAIN`;
/// `fi_eq_sread` with a 100 ms time-out is `FI_EAGAIN` after at least ~100 ms.
pub fn eq_empty_is_eagain_and_sread_times_out(s: &Subject) {
    let (_fabric, eq) = writable_eq(s);
    expect_errno(eq.read(), Errno::EAGAIN, "fi_eq_read");
    expect_errno(eq.peek(), Errno::EAGAIN, "fi_eq_read FI_PEEK");
    expect_errno(eq.readerr(), Errno::EAGAIN, "fi_eq_readerr");
    let t = Instant::now();
    let e = eq.sread(100).expect_err("fi_eq_sread of an empty EQ");
    let took = t.elapsed();
    assert_eq!(e.code(), Errno::EAGAIN, "fi_eq_sread time-out: {e}");
    assert!(
        took >= Duration::from_millis(90),
        "fi_eq_sread(100 ms) returned after {took:?}"
    );
    assert!(took < WAIT, "fi_eq_sread(100 ms) took {took:?}");
}

/// `fi_eq_sread` returns an event already queued at once, and one written from
/// another thread while it waits.
pub fn eq_sread_returns_event(s: &Subject) {
    let (_fabric, eq) = writable_eq(s);
    eq.write(&event(7)).unwrap();
    let got = eq
        .sread(WAIT.as_millis() as i32)
        .unwrap_or_else(|e| panic!("fi_eq_sread: {e}"));
    same(&got, &event(7), "sread");
    let t = Instant::now();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            eq.write(&event(8)).unwrap();
        });
        let got = eq.sread(WAIT.as_millis() as i32).unwrap_or_else(|e| {
            panic!(
                "fi_eq_sread({WAIT:?}) while another thread writes after 50 ms: {e} after {:?}{}",
                t.elapsed(),
                if t.elapsed() < WAIT {
                    " (before its time-out: a spurious FI_EAGAIN)"
                } else {
                    ""
                }
            )
        });
        same(&got, &event(8), "sread woken by a write");
    });
    assert!(
        t.elapsed() < WAIT,
        "sread woke only after {:?}",
        t.elapsed()
    );
}
