//! `FI_TCP_DISABLE_CMA=1`: large messages go through the socket even on loopback (the
//! twin of `local.rs`'s receive-time test; its own binary because the parameter is
//! read from the environment when the provider starts).

mod common;

use common::*;
use ofi::Caps;

const NULL: *mut std::ffi::c_void = std::ptr::null_mut();

#[test]
fn with_copies_disabled_the_kernel_takes_the_data_at_the_send() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_TCP_DISABLE_CMA", "1");
    let p = connect_pair(false, Caps::MSG);
    let (c, s) = (&p.client, &p.server);
    let n = 1 << 20;
    let mut src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    let orig = src.clone();
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { c.ep.send(src.as_ptr(), n, NULL, 0, 1).unwrap() };
    // See local.rs: the first bytes are in the kernel already.
    src[..16].copy_from_slice(b"changed-at-once!");
    let mut dst = vec![0u8; n];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { s.ep.recv(dst.as_mut_ptr(), n, NULL, 0, 2).unwrap() };
    let e = cq_wait(&s.cq, &[&c.cq]).unwrap();
    assert_eq!((e.op_context, e.len), (2, n));
    assert_eq!(&dst[..16], &orig[..16]);
    cq_wait(&c.cq, &[&s.cq]).unwrap();
}
