//! The areas the suite checks ([`Capability`]), declared once: each area's name (as
//! printed) and when a provider claims it (for docs/CONFORMANCE.md), in the order the
//! suite lists them. What claims an area is decided by [`crate::Claims::check`].

use std::fmt;

/// Declares [`Capability`] from one list: each area's doc, variant, printed name and
/// the description of when it is claimed; [`Capability::ALL`] keeps the list's order.
macro_rules! capabilities {
    ($($(#[$doc:meta])* $area:ident = $name:literal, claimed when $when:literal;)*) => {
        /// The areas the suite checks; each check needs one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Capability {
            $($(#[$doc])* $area,)*
        }

        impl Capability {
            /// Every area, in the order the suite lists them.
            pub const ALL: [Capability; [$($name),*].len()] = [$(Capability::$area),*];

            /// The area's name as printed (`"av-user-id"`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Capability::$area => $name,)*
                }
            }

            /// When a provider claims this area (what [`crate::Claims::check`] asks of
            /// its answers).
            pub fn claimed_when(self) -> &'static str {
                match self {
                    $(Capability::$area => $when,)*
                }
            }
        }
    };
}

capabilities! {
    /// getinfo answers (every provider).
    Getinfo = "getinfo",
        claimed when "always";
    /// Fabric and domain life cycle (every provider).
    Domain = "domain",
        claimed when "always";
    /// Completion queues (every provider).
    Cq = "cq",
        claimed when "always";
    /// Address vectors (connectionless endpoint types).
    Av = "av",
        claimed when "a connectionless endpoint type (`FI_EP_DGRAM` / `FI_EP_RDM`)";
    /// `FI_MSG` send / receive on a connectionless endpoint.
    Msg = "msg",
        claimed when "`FI_MSG` on a connectionless endpoint type";
    /// `FI_SOURCE`: receives report the sender's fabric address.
    Source = "source",
        claimed when "`FI_SOURCE` with `FI_MSG` (connectionless)";
    /// `FI_AV_USER_ID`: receives report the user id a peer was inserted with.
    AvUserId = "av-user-id",
        claimed when "`FI_AV_USER_ID` with `FI_SOURCE` and `FI_MSG` (connectionless)";
    /// `FI_EP_DGRAM` with `FI_MSG`.
    Dgram = "dgram",
        claimed when "`FI_EP_DGRAM` with `FI_MSG`";
    /// `fi_inject` (`inject_size > 0`) on a connectionless endpoint.
    Inject = "inject",
        claimed when "`FI_MSG` on a connectionless type with `inject_size > 0`";
    /// Event queues (`fi_eq_open` works, or `FI_EP_MSG` is offered).
    Eq = "eq",
        claimed when "`fi_eq_open` works, or `FI_EP_MSG` is offered";
    /// Counters (`fi_cntr_open` works).
    Counters = "counters",
        claimed when "`fi_cntr_open` works";
    /// Memory registration (`fi_mr_reg` works, or `FI_RMA` / `FI_ATOMIC` claimed).
    Mr = "mr",
        claimed when "`fi_mr_reg` works, or `FI_RMA` / `FI_ATOMIC` is claimed";
    /// `FI_MSG` between a pair of endpoints, on every endpoint type offered.
    Pairs = "pairs",
        claimed when "an endpoint type with `FI_MSG`";
    /// Reliable messages (`FI_EP_MSG` / `FI_EP_RDM`): unexpected messages.
    Reliable = "reliable",
        claimed when "`FI_EP_MSG` or `FI_EP_RDM` with `FI_MSG`";
    /// `FI_REMOTE_CQ_DATA` with messages (`cq_data_size > 0`).
    CqData = "cq-data",
        claimed when "`FI_MSG` with `FI_REMOTE_CQ_DATA` and `cq_data_size > 0`";
    /// `fi_inject`, `FI_INJECT` and `FI_INJECT_COMPLETE` on pairs.
    PairInject = "pair-inject",
        claimed when "an endpoint type with `FI_MSG` and `inject_size > 0`";
    /// `FI_SELECTIVE_COMPLETION` (the CQ bind accepts it).
    SelectiveCompletion = "selective-completion",
        claimed when "`FI_MSG`, and binding a CQ with `FI_SELECTIVE_COMPLETION` works";
    /// `FI_EP_MSG`: connection management (passive endpoint, EQ, connect / accept).
    Cm = "cm",
        claimed when "`FI_EP_MSG` with `FI_MSG`";
    /// `FI_TAGGED`.
    Tagged = "tagged",
        claimed when "`FI_TAGGED`";
    /// `FI_PEEK` / `FI_CLAIM` / `FI_DISCARD` (tagged, reliable endpoint type).
    Peek = "peek",
        claimed when "`FI_TAGGED` on a reliable endpoint type";
    /// `FI_DIRECTED_RECV` (tagged, connectionless).
    DirectedRecv = "directed-recv",
        claimed when "`FI_TAGGED` with `FI_DIRECTED_RECV` on a connectionless endpoint type";
    /// `FI_MULTI_RECV`.
    MultiRecv = "multi-recv",
        claimed when "`FI_MSG` with `FI_MULTI_RECV`";
    /// `FI_RMA`.
    Rma = "rma",
        claimed when "`FI_RMA`";
    /// `fi_writedata` (`FI_RMA` with `FI_REMOTE_CQ_DATA`).
    RmaCqData = "rma-cq-data",
        claimed when "`FI_RMA` with `FI_REMOTE_CQ_DATA` and `cq_data_size > 0`";
    /// `FI_ATOMIC`.
    Atomic = "atomic",
        claimed when "`FI_ATOMIC`";
    /// `FI_RMA_EVENT`: counters bound with `FI_REMOTE_WRITE` / `FI_REMOTE_READ`.
    RmaEvent = "rma-event",
        claimed when "`FI_RMA` with `FI_RMA_EVENT` on a reliable endpoint type";
    /// Scalable endpoints (only where the domain offers several contexts).
    Scalable = "scalable",
        claimed when "connectionless `FI_MSG` with `max_ep_tx_ctx` and `max_ep_rx_ctx > 1`";
    /// Shared transmit / receive contexts (only where offered).
    SharedCtx = "shared-ctx",
        claimed when "connectionless `FI_MSG` with `max_ep_stx_ctx` and `max_ep_srx_ctx > 0`";
    /// `FI_EP_RDM` with `FI_MSG`.
    Rdm = "rdm",
        claimed when "`FI_EP_RDM` with `FI_MSG`";
    /// Wait sets with CQs, counters and EQs in them (`fi_wait_open` works, and
    /// counters).
    WaitSet = "wait-set",
        claimed when "`fi_wait_open` (`FI_WAIT_FD`) and `fi_cntr_open` work";
    /// Poll sets over CQs and counters (`fi_poll` on a CQ works, and counters).
    PollSet = "poll-set",
        claimed when "`fi_poll` over a CQ and `fi_cntr_open` work";
    /// Messages between two processes (connectionless).
    TwoProcess = "two-process",
        claimed when "`FI_MSG` on a connectionless endpoint type";
    /// A connection between two processes (`FI_EP_MSG`).
    TwoProcessCm = "two-process-cm",
        claimed when "`FI_EP_MSG` with `FI_MSG`";
    /// Tagged messages between two processes.
    TwoProcessTagged = "two-process-tagged",
        claimed when "`FI_TAGGED` on a reliable endpoint type";
    /// RMA between two processes.
    TwoProcessRma = "two-process-rma",
        claimed when "`FI_RMA` on a reliable endpoint type";
    /// The endpoint's control surface: `FI_GETOPSFLAG` / `FI_SETOPSFLAG`, `fi_ep_alias`,
    /// the operation flags of the `*msg` calls checked, and `FI_GETWAIT` and
    /// `fi_setname` where the provider answers them (not `FI_ENOSYS`).
    Control = "control",
        claimed when "`FI_MSG`, and `fi_control(FI_GETOPSFLAG)` on an endpoint works";
    /// RMA ordering (`FI_ORDER_RAW` / `FI_ORDER_WAW` / `FI_ORDER_WAR`) where claimed.
    Ordering = "ordering",
        claimed when "`FI_RMA` with `FI_ORDER_RAW`, `FI_ORDER_WAW` or `FI_ORDER_WAR`";
    /// `FI_FENCE` with RMA.
    Fence = "fence",
        claimed when "`FI_RMA` with `FI_FENCE`";
    /// `FI_COMMIT_COMPLETE` per operation and as a default (completes once the target
    /// holds the data; see `checks::commit`).
    CommitComplete = "commit-complete",
        claimed when "getinfo answers `FI_COMMIT_COMPLETE` in `tx_attr.op_flags` for a reliable type with `FI_MSG`";
    /// Triggered operations (`FI_TRIGGER`, fi_trigger(3)): `*msg` calls that start
    /// when a counter reaches a threshold.
    Trigger = "trigger",
        claimed when "`FI_MSG` with `FI_TRIGGER` on a reliable type, with counters";
    /// Authorization keys (`domain_attr.auth_key` / `ep_attr.auth_key`) on `FI_EP_RDM`.
    AuthKey = "auth-key",
        claimed when "getinfo takes a `domain_attr.auth_key` hint for `FI_EP_RDM`";
    /// Named AVs opened again read-only by name (`FI_SHARED_AV`).
    SharedAv = "shared-av",
        claimed when "`FI_SHARED_AV` with `FI_MSG` on a connectionless type";
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
