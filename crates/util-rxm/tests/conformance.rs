//! The conformance suite for `tcp;ofi_rxm`: rxm linked in (over IPv4 and IPv6), and rxm
//! loaded as a plugin (built in-tree by `ofi_conformance::plugin::build_intree`), all
//! over the linked-in tcp provider.
//!
//! rxm reaches its core through the host table, which answers from the process-wide
//! registry: `ofi::registry()` is built first so that tcp is there.

use ofi::AddrFormat;
use ofi_conformance::plugin::{layered_subject, UtilityLink::*};
use ofi_conformance::{conformance_suite, expected};
use ofi_prov_tcp::TcpProvider as Core;
use ofi_util_rxm::RxmProvider as Utility;

conformance_suite!(expected = expected::RXM;
    rxm_linked: layered_subject::<Core, Utility>(Linked, AddrFormat::SOCKADDR_IN),
    rxm_linked_ipv6: layered_subject::<Core, Utility>(Linked, AddrFormat::SOCKADDR_IN6),
    rxm_plugin: layered_subject::<Core, Utility>(Plugin("util-rxm"), AddrFormat::SOCKADDR_IN),
);
