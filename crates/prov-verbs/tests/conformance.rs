//! The conformance suite on `verbs` (FI_EP_MSG over RC) over the software device
//! (`FI_VERBS_DEVICE=soft`), linked in.

use ofi::registry::{Registry, RegistryConfig};
use ofi_conformance::{conformance_suite, Capability, Subject};

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

fn linked() -> Subject {
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    let reg = Registry::build(RegistryConfig {
        builtins: vec![ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>()],
        ..RegistryConfig::default()
    });
    Subject::new(reg, "verbs")
}

conformance_suite!(verbs_soft_linked, linked(), VERBS);
