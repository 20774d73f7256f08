//! `fi_control(FI_BACKLOG)` on tcp's passive endpoint: the value the listening socket
//! gets, before and after `fi_listen` (read back from the kernel with `ss`, whose
//! `Send-Q` of a listening socket is its backlog), and a negative value refused.

mod common;

use common::*;
use ofi::{Caps, Errno};

/// The backlog the kernel reports for the socket listening at `at`; `None` when `ss`
/// is not installed or lists no such socket.
fn kernel_backlog(at: std::net::SocketAddr) -> Option<u32> {
    let out = std::process::Command::new("ss")
        .args(["-ltnH", "src", &at.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    // State Recv-Q Send-Q Local Peer: Send-Q is the backlog of a listener.
    let line = text.lines().next()?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn the_backlog_is_set_before_and_after_listening() {
    let reg = registry();
    let info = info(&reg, false, Caps::MSG);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let eq = fabric.eq_open(&ofi::eq::EqAttr::default()).unwrap();
    let pep = fabric.passive_ep(&info).expect("passive_ep");
    pep.bind_eq(&eq, 0).unwrap();

    let e = pep.set_backlog(-1).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    pep.set_backlog(3).expect("FI_BACKLOG before fi_listen");
    pep.listen().expect("listen");
    let at = pep_addr(&pep, info.addr_format);
    let Some(first) = kernel_backlog(at) else {
        println!("SKIP the kernel's view: `ss` is missing or lists no listener at {at}");
        return;
    };
    assert_eq!(first, 3, "the value set before fi_listen");
    pep.set_backlog(7).expect("FI_BACKLOG while listening");
    assert_eq!(kernel_backlog(at), Some(7), "the value set while listening");
    let e = pep.set_backlog(-5).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
    assert_eq!(
        kernel_backlog(at),
        Some(7),
        "a refused value changes nothing"
    );
}
