//! `fi_control(FI_GETWAIT)` on an endpoint (fi_endpoint(3): the file descriptor of a
//! socket endpoint, for learning that it is ready to receive). A provider without one
//! answers `FI_ENOSYS` and nothing more is checked; one that answers writes a
//! descriptor into the `int` the argument points to, refuses a null argument with
//! `FI_EINVAL`, and its descriptor polls readable once a message was sent to the
//! endpoint — with no receive posted and no CQ read on the receiving side in between —
//! after which the message is received as usual.

use ofi::ep::Endpoint;
use ofi::{Caps, Errno};

use crate::checks::pairs::check_recv;
use crate::fixture::{expect_errno, pattern, post_recv, send};
use crate::pair::each_pair;
use crate::Subject;

/// How long the descriptor may take to become readable.
const READABLE_WITHIN_MS: i32 = 5000;

/// `fi_control(FI_GETWAIT)` on `ep`: the descriptor the provider writes into the `int`
/// the argument points to (also for the providers' own tests).
pub fn wait_fd(ep: &Endpoint) -> ofi::Result<i32> {
    let mut fd: i32 = -1;
    // SAFETY: FI_GETWAIT writes an `int` into `arg`; `fd` lives across the call.
    unsafe { ep.control(ofi::control::GETWAIT, (&mut fd as *mut i32).cast()) }?;
    Ok(fd)
}

/// Whether `fd` polls readable within `timeout_ms` (one bounded `poll(2)`; 0: now).
pub fn readable_within(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
    n == 1 && p.revents & libc::POLLIN != 0
}

/// See the module docs.
pub fn control_getwait_polls_readable(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let ep = &p.b.ep;
        let fd = match wait_fd(ep) {
            Err(e) if e.code() == Errno::ENOSYS => return,
            Err(e) => panic!("fi_control(FI_GETWAIT): {e} ({})", e.code()),
            Ok(fd) => fd,
        };
        assert!(fd >= 0, "FI_GETWAIT gave descriptor {fd}");
        // SAFETY: a null argument must be refused before anything is written.
        let r = unsafe { ep.control(ofi::control::GETWAIT, std::ptr::null_mut()) };
        expect_errno(r, Errno::EINVAL, "fi_control(FI_GETWAIT, NULL)");
        let payload = pattern(24, 0x57);
        send(&p.a.ep, &payload, p.a.peer, 0x700)
            .unwrap_or_else(|e| panic!("fi_send: {e} ({})", e.code()));
        assert!(
            readable_within(fd, READABLE_WITHIN_MS),
            "the FI_GETWAIT descriptor is not readable {READABLE_WITHIN_MS} ms after a message was sent"
        );
        let mut buf = vec![0u8; payload.len() + 8];
        post_recv(ep, &mut buf, 0x701).unwrap_or_else(|e| panic!("fi_recv: {e}"));
        let r = p.wait_ok(1, "receive after the descriptor was readable");
        check_recv(&r, 0x701, &payload, &buf);
        p.wait_ok(0, "send completion");
    });
}
