//! The conformance suite on `verbs` (FI_EP_MSG over RC) over the software device
//! (`FI_VERBS_DEVICE=soft`), linked in.

mod common;

use ofi_conformance::{conformance_suite, expected};

conformance_suite!(verbs_soft_linked, crate::common::subject(), expected::VERBS);
