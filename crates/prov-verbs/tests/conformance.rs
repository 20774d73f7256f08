//! The conformance suite on `verbs` (FI_EP_MSG over RC) over the software device
//! (`FI_VERBS_DEVICE=soft`), linked in, in one process and across two
//! (`TwoProcessCm`, `TwoProcessRma`).
//!
//! The subject states the semantics verbs inherits from RC queue pairs (as C's verbs
//! provider does): a remote access error or a too-short receive puts the queue pair in
//! the error state (the connection is gone afterwards), and a posted receive cannot be
//! cancelled. The checks concerned assert that behaviour instead
//! (`ofi_conformance::Semantics`).

mod common;

use ofi_conformance::{conformance_suite, expected};

conformance_suite!(
    verbs_soft_linked,
    crate::common::subject().with_semantics(common::VERBS_SEMANTICS),
    expected::VERBS
);
