//! The conformance suite on `verbs` (FI_EP_MSG over RC) over the software device
//! (`FI_VERBS_DEVICE=soft`), linked in.

mod common;

use ofi_conformance::{conformance_suite, Capability};

/// The areas `verbs` claims: connections (`FI_EP_MSG`) with messages, RMA (with remote
/// CQ data through write with immediate) and the verbs atomics; no tagged messages.
const VERBS: &[Capability] = &[
    Capability::Getinfo,
    Capability::Domain,
    Capability::Cq,
    Capability::Eq,
    Capability::Counters,
    Capability::Mr,
    Capability::Pairs,
    Capability::Reliable,
    Capability::CqData,
    Capability::PairInject,
    Capability::SelectiveCompletion,
    Capability::Cm,
    Capability::Rma,
    Capability::RmaCqData,
    Capability::Atomic,
    Capability::WaitSet,
    Capability::PollSet,
    Capability::TwoProcessCm,
    Capability::TwoProcessRma,
];

conformance_suite!(verbs_soft_linked, crate::common::subject(), VERBS);
