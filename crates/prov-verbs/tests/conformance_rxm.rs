//! The conformance suite on `verbs;ofi_rxm` (FI_EP_RDM through the unchanged rxm) over
//! the software device. rxm reaches verbs through the process-wide registry, built here
//! after `FI_VERBS_DEVICE=soft` is set. One process and two (the RDM two-process
//! areas).
//!
//! rxm handles truncation and cancels its own receives, but a remote access error still
//! breaks the verbs connection underneath: the subject states
//! `Semantics::ACCESS_ERROR_BREAKS_CONNECTION`.

mod common;

use ofi_conformance::{conformance_suite, expected, Semantics, Subject};

fn linked() -> Subject {
    common::layered(
        ofi::abi::entry_for::<ofi_util_rxm::RxmProvider>(),
        "verbs;ofi_rxm",
    )
    .with_semantics(Semantics::ACCESS_ERROR_BREAKS_CONNECTION)
}

conformance_suite!(verbs_rxm_soft_linked, linked(), expected::RXM_OVER_VERBS);
