//! The areas each in-tree provider is expected to claim: one declaration per provider,
//! named by every instantiation of the suite for it (`conformance_suite!(name,
//! subject, expected::UDP)`). A provider whose claims differ — an area it stops
//! claiming, or one it starts claiming — fails its suite (see [`crate::compare`]), so a
//! lost capability cannot turn into a silently skipped, passing check. docs/CONFORMANCE.md
//! is generated from these lists and the instantiations (the test `conformance_doc`
//! of this crate checks the committed file is current).
//!
//! Out of tree, declare your own list (`&[Capability]`) the same way.

use crate::Capability::{self, *};

/// `udp`: datagrams only (`FI_EP_DGRAM`), no memory registration.
pub const UDP: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Av,
    Msg,
    Source,
    AvUserId,
    Dgram,
    Inject,
    Eq,
    Counters,
    Pairs,
    CqData,
    PairInject,
    SelectiveCompletion,
    MultiRecv,
    WaitSet,
    PollSet,
    TwoProcess,
    Control,
];

/// `tcp`: connections (`FI_EP_MSG`) with tagged messages, RMA and atomics;
/// `FI_COMMIT_COMPLETE` (as delivery complete: no persistent memory).
pub const TCP: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Eq,
    Counters,
    Mr,
    Pairs,
    Reliable,
    CqData,
    PairInject,
    SelectiveCompletion,
    Cm,
    Tagged,
    Peek,
    MultiRecv,
    Rma,
    RmaCqData,
    Atomic,
    WaitSet,
    PollSet,
    TwoProcessCm,
    TwoProcessTagged,
    TwoProcessRma,
    Control,
    Ordering,
    Fence,
    CommitComplete,
];

/// The areas of a full `FI_EP_RDM` provider: messages, tagged messages with peek and
/// directed receive, RMA, atomics, the control surface; no `FI_EP_MSG`, no scalable
/// endpoints or shared contexts; then the provider's `extra` areas.
macro_rules! full_rdm {
    ($($extra:ident),* $(,)?) => {
        &[
            Getinfo,
            Domain,
            Cq,
            Av,
            Msg,
            Source,
            AvUserId,
            Inject,
            Eq,
            Counters,
            Mr,
            Pairs,
            Reliable,
            CqData,
            PairInject,
            SelectiveCompletion,
            Tagged,
            Peek,
            DirectedRecv,
            MultiRecv,
            Rma,
            RmaCqData,
            Atomic,
            Rdm,
            WaitSet,
            PollSet,
            TwoProcess,
            TwoProcessTagged,
            TwoProcessRma,
            Control,
            $($extra,)*
        ]
    };
}

/// `shm`: a full RDM provider with `FI_FENCE`, remote counters, scalable endpoints,
/// shared contexts, triggered operations, authorization keys, shared AVs,
/// `FI_COMMIT_COMPLETE` and RMA ordering (one ring per peer, carried out in order).
pub const SHM: &[Capability] = full_rdm!(
    Fence,
    Ordering,
    RmaEvent,
    Scalable,
    SharedCtx,
    Trigger,
    AuthKey,
    SharedAv,
    CommitComplete
);

/// The areas of rxm over any core: a full RDM provider with `FI_FENCE`, remote counters,
/// triggered operations, authorization keys, shared contexts, `FI_COMMIT_COMPLETE` and
/// the RMA ordering its core claims (operations reach the core in issue order); then
/// the `extra` areas of that core.
macro_rules! rxm {
    ($($extra:ident),* $(,)?) => {
        full_rdm!(
            Fence,
            Ordering,
            RmaEvent,
            Trigger,
            AuthKey,
            SharedCtx,
            CommitComplete,
            $($extra,)*
        )
    };
}

/// `tcp;ofi_rxm`: rxm over tcp, with scalable endpoints (a receive context's index
/// travels in rxm's connection request).
pub const RXM: &[Capability] = rxm!(Scalable);

/// `verbs;ofi_rxm`: rxm over verbs, as [`RXM`] but without scalable endpoints (RDMA
/// CM's 56 bytes of connect data leave no room to address a receive context); the
/// ordering is verbs' (RAW and WAW).
pub const RXM_OVER_VERBS: &[Capability] = rxm!();

/// `udp;ofi_rxd`: rxd over udp, a full RDM provider with `FI_FENCE`.
pub const RXD: &[Capability] = full_rdm!(Fence);

/// `efa`: an RDM provider over SRD with messages, tagged messages (peek, claim, discard,
/// directed receive), multi-receive, `FI_SOURCE`, remote CQ data, emulated RMA and
/// atomics, `FI_FENCE` and remote counters; and datagrams (`FI_EP_DGRAM`) over UD.
pub const EFA: &[Capability] = full_rdm!(Fence, RmaEvent, Dgram);

/// `verbs`: connections (`FI_EP_MSG`) over RC queue pairs with messages, RMA (remote
/// CQ data by write with immediate) and the verbs atomics; no tagged messages; and
/// datagrams (`FI_EP_DGRAM`) over UD queue pairs, with each datagram's source
/// (`FI_SOURCE`, from its GRH).
pub const VERBS: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Av,
    Msg,
    Dgram,
    Source,
    Inject,
    TwoProcess,
    Eq,
    Counters,
    Mr,
    Pairs,
    Reliable,
    CqData,
    PairInject,
    SelectiveCompletion,
    Cm,
    Rma,
    RmaCqData,
    Atomic,
    WaitSet,
    PollSet,
    TwoProcessCm,
    TwoProcessRma,
    Ordering,
];

/// `unixdgram`, the out-of-tree example provider: datagrams, no EQs, counters, MRs,
/// wait or poll sets.
pub const UNIXDGRAM: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Av,
    Msg,
    Source,
    Dgram,
    Inject,
    Pairs,
    PairInject,
    SelectiveCompletion,
    TwoProcess,
];

/// Every declaration by its name here (`"UDP"` …), for the generated documentation.
pub const ALL: &[(&str, &[Capability])] = &[
    ("UDP", UDP),
    ("TCP", TCP),
    ("SHM", SHM),
    ("RXM", RXM),
    ("RXM_OVER_VERBS", RXM_OVER_VERBS),
    ("RXD", RXD),
    ("VERBS", VERBS),
    ("EFA", EFA),
    ("UNIXDGRAM", UNIXDGRAM),
];

/// The declaration called `name` (`"UDP"`, or `"expected::UDP"`).
pub fn by_name(name: &str) -> Option<&'static [Capability]> {
    let name = name.rsplit("::").next().unwrap_or(name);
    ALL.iter().find(|(n, _)| *n == name).map(|(_, caps)| *caps)
}
