//! Helpers shared by kit's unit tests (compiled only for them).

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ofi_core::provider::WaitOps;
use ofi_core::Errno;

use ofi_core::enums::WaitObj;
use ofi_core::wait::WaitAttr;

use crate::wait::KitWait;

/// Run `f` on another thread a moment (20 ms) from now: the event a blocking call of
/// the test waits for. The test joins the handle before it ends.
pub(crate) fn in_a_moment(f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        f()
    })
}

/// A wait set with a wait fd (`FI_WAIT_FD`).
pub(crate) fn fd_wait_set() -> KitWait {
    KitWait::new(&WaitAttr {
        wait_obj: WaitObj::Fd,
        flags: 0,
    })
    .expect("an FI_WAIT_FD wait set opens")
}

/// Checks that an object `attach` adds to a wait set (called twice: still one member)
/// signals the set when `update` runs on another thread a moment later: the set times
/// out before, and wakes well within its 5 s bound after. Returns the set, for the
/// caller's further checks (and of what `update` left in the object).
pub(crate) fn assert_signals_wait_set(
    attach: impl Fn(&KitWait),
    update: impl FnOnce() + Send + 'static,
) -> KitWait {
    let set = fd_wait_set();
    attach(&set);
    attach(&set);
    assert_eq!(set.len(), 1, "attached twice, one member");
    let before = set.wait(0).expect_err("no signal before the update");
    assert_eq!(before.code(), Errno::ETIMEDOUT, "{before}");
    let h = in_a_moment(update);
    let t = Instant::now();
    set.wait(5_000).expect("the update signals the set");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "woken late: {:?}",
        t.elapsed()
    );
    h.join().unwrap();
    set
}

/// One refused attribute set: `change` turns the default attributes into it, the open
/// must fail with `code`.
pub(crate) type RefusedOpen<A> = (fn(&mut A), Errno);

/// Checks that `open` refuses each attribute set of `cases` with its code.
pub(crate) fn assert_open_refused<A: Default, T>(
    open: impl Fn(&A) -> ofi_core::Result<T>,
    cases: &[RefusedOpen<A>],
) {
    for (i, (change, want)) in cases.iter().enumerate() {
        let mut attr = A::default();
        change(&mut attr);
        match open(&attr) {
            Ok(_) => panic!("case {i}: opened, expected {want:?}"),
            Err(e) => assert_eq!(e.code(), *want, "case {i}: {e}"),
        }
    }
}
