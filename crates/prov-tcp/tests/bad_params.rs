//! Parameters the provider refuses: it does not start (getinfo finds no tcp), and the
//! same registry setup works again with a good value. Its own binary: it changes the
//! environment, which the provider reads when it starts.

mod common;

use common::tcp_starts;

#[test]
fn a_bad_local_congestion_name_stops_the_provider() {
    // The only test of this binary: no other thread reads the environment.
    for bad in ["bad name", "x/../y", "a_name_far_too_long_for_the_kernel"] {
        std::env::set_var("FI_TCP_LOCAL_CONGESTION", bad);
        assert!(!tcp_starts(), "{bad:?} was accepted");
    }
    for good in ["reno", "system", "cubic"] {
        std::env::set_var("FI_TCP_LOCAL_CONGESTION", good);
        assert!(tcp_starts(), "{good:?} was refused");
    }
}
