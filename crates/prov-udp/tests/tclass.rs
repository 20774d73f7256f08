//! Traffic classes: the DSCP value of an endpoint's class (`domain_attr.tclass` when
//! `tx_attr.tclass` is unspecified) is on its socket (`IP_TOS`, read back with
//! `getsockopt`); an unknown class is refused.

mod common;

use common::*;
use ofi::control::{tc_dscp_set, TC_DSCP, TC_LOW_LATENCY};
use ofi::{Caps, Errno};

/// The `IP_TOS` of this process's unconnected socket bound to `local`.
fn tos_of(local: std::net::SocketAddr) -> Option<i32> {
    let std::net::SocketAddr::V4(want) = local else {
        return None;
    };
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Ok(fd) = entry.ok()?.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: all-zero bytes are a valid sockaddr_in.
        let mut a: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `a` has room for `len` bytes; the kernel writes at most that.
        let r =
            unsafe { libc::getsockname(fd, (&mut a as *mut libc::sockaddr_in).cast(), &mut len) };
        if r != 0
            || i32::from(a.sin_family) != libc::AF_INET
            || u16::from_be(a.sin_port) != want.port()
            || u32::from_be(a.sin_addr.s_addr) != u32::from(*want.ip())
        {
            continue;
        }
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` has room for `len` bytes; the kernel writes at most that.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_IP,
                libc::IP_TOS,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            return Some(v);
        }
    }
    None
}

#[test]
fn endpoint_tclass_marks_the_socket() {
    let reg = registry();
    let info = info_v4(&reg, Caps::MSG);
    let fabric = reg.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    for (tx, dom, dscp) in [
        (tc_dscp_set(26), 0, 26),
        (0, TC_LOW_LATENCY, 46),
        (TC_LOW_LATENCY, tc_dscp_set(8), 46),
    ] {
        let mut i = info.clone();
        i.tx_attr.tclass = tx;
        i.domain_attr.tclass = dom;
        let n = node(&domain, &i);
        let at = n.addr.socket_addr().expect("an IP address");
        assert_eq!(tos_of(at), Some(dscp << 2), "tx {tx:#x} domain {dom:#x}");
    }
    let mut bad = info.clone();
    bad.tx_attr.tclass = TC_DSCP | 64;
    let e = domain.endpoint(&bad).expect_err("DSCP 64");
    assert_eq!(e.code(), Errno::EINVAL, "{e}");
}
