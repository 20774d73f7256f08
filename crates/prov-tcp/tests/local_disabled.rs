//! `FI_TCP_DISABLE_CMA=1`: large messages go through the socket even on loopback (the
//! twin of `local.rs`'s receive-time test; its own binary because the parameter is
//! read from the environment when the provider starts).

mod common;

use common::*;
use ofi::Caps;

#[test]
fn with_copies_disabled_the_kernel_takes_the_data_at_the_send() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_TCP_DISABLE_CMA", "1");
    let p = connect_pair(false, Caps::MSG);
    // See local.rs: the first bytes were in the kernel already.
    let (orig, _, dst) = send_changing_the_source(&p, 1 << 20);
    assert_eq!(&dst[..16], &orig[..16]);
}
