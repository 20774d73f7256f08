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
];

/// `tcp`: connections (`FI_EP_MSG`) with tagged messages, RMA and atomics.
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
];

/// The areas of a full `FI_EP_RDM` provider: messages, tagged messages with peek and
/// directed receive, RMA, atomics; no `FI_EP_MSG`, no scalable endpoints or shared
/// contexts.
const FULL_RDM: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Av,
    Msg,
    Source,
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
];

/// `shm`: a full RDM provider with remote counters, scalable endpoints and shared
/// contexts.
pub const SHM: &[Capability] = &SHM_AREAS;

const SHM_AREAS: [Capability; FULL_RDM.len() + 3] =
    joined(FULL_RDM, &[RmaEvent, Scalable, SharedCtx]);

/// `a` then `b`, as an array of `N = a.len() + b.len()` areas (a declaration that adds
/// areas to another's).
const fn joined<const N: usize>(a: &[Capability], b: &[Capability]) -> [Capability; N] {
    assert!(a.len() + b.len() == N, "N is the sum of the lengths");
    let mut out = [Getinfo; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

/// `tcp;ofi_rxm`: rxm over tcp, a full RDM provider.
pub const RXM: &[Capability] = FULL_RDM;

/// `udp;ofi_rxd`: rxd over udp, a full RDM provider.
pub const RXD: &[Capability] = FULL_RDM;

/// `verbs`: connections (`FI_EP_MSG`) over RC queue pairs with messages, RMA (remote
/// CQ data by write with immediate) and the verbs atomics; no tagged messages; and
/// datagrams (`FI_EP_DGRAM`) over UD queue pairs.
pub const VERBS: &[Capability] = &[
    Getinfo,
    Domain,
    Cq,
    Av,
    Msg,
    Dgram,
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
    ("RXD", RXD),
    ("VERBS", VERBS),
    ("UNIXDGRAM", UNIXDGRAM),
];

/// The declaration called `name` (`"UDP"`, or `"expected::UDP"`).
pub fn by_name(name: &str) -> Option<&'static [Capability]> {
    let name = name.rsplit("::").next().unwrap_or(name);
    ALL.iter().find(|(n, _)| *n == name).map(|(_, caps)| *caps)
}
