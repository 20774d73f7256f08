//! `FI_TCP_IFACE` naming no interface stops the provider with an error naming it
//! (until 2026-11-27 it was ignored silently, even at debug level); an existing
//! interface (`lo`) is taken. Its own binary: it changes the environment, which the
//! provider reads when it starts.

mod common;

use common::tcp_starts;

#[test]
fn an_interface_that_does_not_exist_stops_the_provider() {
    // The only test of this binary: no other thread reads the environment.
    let long = "x".repeat(100_000);
    for bad in ["nosuchif", "lo0x", "a/b", long.as_str()] {
        std::env::set_var("FI_TCP_IFACE", bad);
        assert!(
            !tcp_starts(),
            "{:?} was accepted",
            &bad[..bad.len().min(20)]
        );
    }
    std::env::set_var("FI_TCP_IFACE", "lo");
    assert!(tcp_starts(), "lo was refused");
    // (Through lo, a listener binds lo's address.)
    let reg = common::registry();
    let info = common::info(&reg, false, ofi::Caps::MSG);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let (pep, _eq) = common::listener(&fabric, &info);
    let a = common::pep_addr(&pep, ofi::AddrFormat::SOCKADDR_IN);
    assert!(a.ip().is_loopback(), "{a}");
}
