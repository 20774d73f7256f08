//! The conformance suite under every hook: all five over udp, noop over shm and tcp,
//! and the five stacked over shm. A hooked provider must pass exactly what the bare
//! provider passes.

mod common;

use common::registry;
use ofi::{AddrFormat, Info};
use ofi_conformance::{conformance_suite, expected, Subject};

fn udp(hooks: &str) -> Subject {
    let mut h = Info::hints();
    h.addr_format = AddrFormat::SOCKADDR_IN;
    Subject::new(registry(hooks), "udp").with_hints(h)
}

conformance_suite!(udp_perf, udp("perf"), expected::UDP);
conformance_suite!(udp_trace, udp("trace"), expected::UDP);
conformance_suite!(udp_debug, udp("debug"), expected::UDP);
conformance_suite!(udp_noop, udp("noop"), expected::UDP);
conformance_suite!(udp_fault, udp("fault"), expected::UDP);
conformance_suite!(
    shm_noop,
    Subject::new(registry("noop"), "shm"),
    expected::SHM
);
conformance_suite!(
    tcp_noop,
    Subject::new(registry("noop"), "tcp"),
    expected::TCP
);
conformance_suite!(
    shm_all_stacked,
    Subject::new(registry("perf;trace,debug,fault,noop"), "shm"),
    expected::SHM
);
