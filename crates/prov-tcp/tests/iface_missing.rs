//! `FI_TCP_IFACE` naming an interface that does not exist: opening a passive endpoint
//! that would bind it is `FI_ENODATA` with a message naming the variable and the
//! interface (it used to fall back to the wildcard address silently). Its own binary:
//! it sets the variable for the whole process.

mod common;

use ofi::{Caps, Errno};

#[test]
fn a_missing_interface_is_an_error_naming_it() {
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("FI_TCP_IFACE", "nosuchif0");
    let reg = common::registry();
    let mut info = common::info(&reg, false, Caps::MSG);
    info.src_addr = None;
    let fabric = reg.open_fabric(&info).unwrap();
    let e = fabric.passive_ep(&info).unwrap_err();
    assert_eq!(e.code(), Errno::ENODATA, "{e}");
    assert!(e.to_string().contains("FI_TCP_IFACE=nosuchif0"), "{e}");
}
