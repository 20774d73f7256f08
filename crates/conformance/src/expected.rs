//! The areas each in-tree provider is expected to claim: one declaration per provider,
//! named by every instantiation of the suite for it (`conformance_suite!(name,
//! subject, expected::UDP)`). A provider whose claims differ — an area it stops
//! claiming, or one it starts claiming — fails its suite (see [`crate::compare`]), so a
//! lost capability cannot turn into a silently skipped, passing check. docs/CONFORMANCE.md
//! is generated from these lists and the instantiations (the test `conformance_doc`
//! of this crate checks the committed file is current).
//!
//! Each declaration joins named sets of areas that go together (the sets are disjoint,
//! and no declaration names an area twice: a test of this crate checks it) and then
//! lists the areas particular to its provider. Order carries no meaning.
//!
//! Out of tree, declare your own list: a plain `&[Capability]` naming the areas.

use ofi::const_list::{concat, total_len};

use crate::Capability::{self, *};

/// What every in-tree provider claims: getinfo, the domain, CQs, messages between a
/// pair of endpoints (with inject) and selective completion.
const FOUNDATION: &[Capability] = &[Getinfo, Domain, Cq, Pairs, PairInject, SelectiveCompletion];

/// Messages addressed through an AV (connectionless types): `FI_SOURCE`, inject, and
/// messages between two processes.
const CONNECTIONLESS: &[Capability] = &[Av, Msg, Source, Inject, TwoProcess];

/// The objects opened outside any getinfo field: EQs, counters, wait and poll sets.
const OBJECTS: &[Capability] = &[Eq, Counters, WaitSet, PollSet];

/// Reliable messages, memory registration, RMA (with remote CQ data, and between two
/// processes) and atomics.
const RELIABLE_RMA: &[Capability] = &[Reliable, Mr, Rma, RmaCqData, Atomic, TwoProcessRma];

/// Connections (`FI_EP_MSG`), in one process and between two.
const CONNECTED: &[Capability] = &[Cm, TwoProcessCm];

/// Tagged messages with peek, in one process and between two.
const TAGGED: &[Capability] = &[Tagged, Peek, TwoProcessTagged];

/// A declaration made of sets of areas: `areas!(FOUNDATION, OBJECTS, &[Dgram])`, joined
/// at compile time into one `&'static [Capability]`.
macro_rules! areas {
    ($($set:expr),+ $(,)?) => {{
        const SETS: &[&[Capability]] = &[$($set),+];
        const AREAS: [Capability; total_len(SETS)] = concat(SETS, Getinfo);
        &AREAS
    }};
}

/// `udp`: datagrams only (`FI_EP_DGRAM`), no memory registration.
pub const UDP: &[Capability] = areas!(
    FOUNDATION,
    CONNECTIONLESS,
    OBJECTS,
    &[AvUserId, Dgram, CqData, MultiRecv, Control],
);

/// `tcp`: connections (`FI_EP_MSG`) with tagged messages, RMA and atomics;
/// `FI_COMMIT_COMPLETE` (as delivery complete: no persistent memory).
pub const TCP: &[Capability] = areas!(
    FOUNDATION,
    OBJECTS,
    RELIABLE_RMA,
    CONNECTED,
    TAGGED,
    &[CqData, MultiRecv, Control, Ordering, Fence, CommitComplete],
);

/// The areas of a full `FI_EP_RDM` provider: messages, tagged messages with peek and
/// directed receive, RMA, atomics, the control surface; no `FI_EP_MSG`, no scalable
/// endpoints or shared contexts.
const FULL_RDM: &[Capability] = areas!(
    FOUNDATION,
    CONNECTIONLESS,
    OBJECTS,
    RELIABLE_RMA,
    TAGGED,
    &[AvUserId, CqData, DirectedRecv, MultiRecv, Rdm, Control],
);

/// `shm`: a full RDM provider with `FI_FENCE`, remote counters, scalable endpoints,
/// shared contexts, triggered operations, authorization keys, shared AVs,
/// `FI_COMMIT_COMPLETE` and RMA ordering (one ring per peer, carried out in order).
pub const SHM: &[Capability] = areas!(
    FULL_RDM,
    &[
        Fence,
        Ordering,
        RmaEvent,
        Scalable,
        SharedCtx,
        Trigger,
        AuthKey,
        SharedAv,
        CommitComplete
    ],
);

/// The areas of rxm over any core: a full RDM provider with `FI_FENCE`, remote counters,
/// triggered operations, authorization keys, shared contexts, `FI_COMMIT_COMPLETE` and
/// the RMA ordering its core claims (operations reach the core in issue order).
const RXM_OVER_ANY_CORE: &[Capability] = areas!(
    FULL_RDM,
    &[
        Fence,
        Ordering,
        RmaEvent,
        Trigger,
        AuthKey,
        SharedCtx,
        CommitComplete
    ],
);

/// `tcp;ofi_rxm`: rxm over tcp, with scalable endpoints (a receive context's index
/// travels in rxm's connection request).
pub const RXM: &[Capability] = areas!(RXM_OVER_ANY_CORE, &[Scalable]);

/// `verbs;ofi_rxm`: rxm over verbs, as [`RXM`] but without scalable endpoints (RDMA
/// CM's 56 bytes of connect data leave no room to address a receive context); the
/// ordering is verbs' (RAW and WAW).
pub const RXM_OVER_VERBS: &[Capability] = RXM_OVER_ANY_CORE;

/// `udp;ofi_rxd`: rxd over udp, a full RDM provider with `FI_FENCE`.
pub const RXD: &[Capability] = areas!(FULL_RDM, &[Fence]);

/// `efa`: an RDM provider over SRD with messages, tagged messages (peek, claim, discard,
/// directed receive), multi-receive, `FI_SOURCE`, remote CQ data, emulated RMA and
/// atomics, `FI_FENCE` and remote counters; and datagrams (`FI_EP_DGRAM`) over UD.
pub const EFA: &[Capability] = areas!(FULL_RDM, &[Fence, RmaEvent, Dgram]);

/// `verbs`: connections (`FI_EP_MSG`) over RC queue pairs with messages, RMA (remote
/// CQ data by write with immediate) and the verbs atomics; no tagged messages; and
/// datagrams (`FI_EP_DGRAM`) over UD queue pairs, with each datagram's source
/// (`FI_SOURCE`, from its GRH).
pub const VERBS: &[Capability] = areas!(
    FOUNDATION,
    CONNECTIONLESS,
    OBJECTS,
    RELIABLE_RMA,
    CONNECTED,
    &[Dgram, CqData, Ordering],
);

/// `unixdgram`, the out-of-tree example provider: datagrams, no EQs, counters, MRs,
/// wait or poll sets.
pub const UNIXDGRAM: &[Capability] = areas!(FOUNDATION, CONNECTIONLESS, &[Dgram]);

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
