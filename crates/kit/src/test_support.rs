//! Helpers shared by kit's unit tests (compiled only for them).

use std::thread::{self, JoinHandle};
use std::time::Duration;

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
