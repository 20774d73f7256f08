//! The conformance suite for `udp;ofi_rxd`: rxd linked in (over IPv4 and IPv6), and rxd
//! loaded as a plugin (built in-tree by `ofi_conformance::plugin::build_intree`), all
//! over the linked-in udp provider.
//!
//! rxd reaches its core through the host table, which answers from the process-wide
//! registry: `ofi::registry()` is built first so that udp is there.

use ofi::AddrFormat;
use ofi_conformance::plugin::{layered_subject, UtilityLink::*};
use ofi_conformance::{conformance_suite, expected};
use ofi_prov_udp::UdpProvider as Core;
use ofi_util_rxd::RxdProvider as Utility;

conformance_suite!(expected = expected::RXD;
    rxd_linked: layered_subject::<Core, Utility>(Linked, AddrFormat::SOCKADDR_IN),
    rxd_linked_ipv6: layered_subject::<Core, Utility>(Linked, AddrFormat::SOCKADDR_IN6),
    rxd_plugin: layered_subject::<Core, Utility>(Plugin("util-rxd"), AddrFormat::SOCKADDR_IN),
);
