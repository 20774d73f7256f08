//! What the tests share: the `verbs` provider over the software device, linked in.

use ofi_conformance::plugin::{linked_registry, linked_subject};
use ofi_conformance::{Semantics, Subject};

/// Sets `FI_VERBS_DEVICE=soft` for this process, unless `OFI_VERBS_TEST_HW` is set:
/// then the device is rdma-core's, chosen by `FI_VERBS_DEVICE_NAME` as usual, for
/// running the suites on a host with a device (docs/providers/verbs.md).
pub fn choose_device() {
    if std::env::var_os("OFI_VERBS_TEST_HW").is_none() {
        std::env::set_var("FI_VERBS_DEVICE", "soft");
    }
}

/// A registry with `verbs` linked in, on the device [`choose_device`] picks.
#[allow(dead_code)] // not every test binary uses verbs alone
pub fn subject() -> Subject {
    choose_device();
    linked_subject::<ofi_prov_verbs::VerbsProvider>()
}

/// What verbs inherits from RC queue pairs (C's verbs provider behaves the same way):
/// an access error or a too-short receive puts the queue pair in the error state, and
/// a posted receive cannot be taken back (`fi_cancel` is `FI_ENOSYS`).
#[allow(dead_code)] // not every test binary runs the suite
pub const VERBS_SEMANTICS: Semantics = Semantics::ACCESS_ERROR_BREAKS_CONNECTION
    .union(Semantics::TRUNCATION_BREAKS_CONNECTION)
    .union(Semantics::NO_RECV_CANCEL);

/// `upper;verbs` (`name`) with `verbs` and the utility provider `upper` linked in, on the
/// device [`choose_device`] picks. The utility reaches verbs through the process-wide
/// registry, built first (after the device is chosen).
#[allow(dead_code)] // not every test binary layers
pub fn layered(upper: &'static ofi_core::abi::PluginEntry, name: &str) -> Subject {
    choose_device();
    let _ = ofi::registry();
    let verbs = ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>();
    Subject::new(linked_registry(&[verbs, upper]), name)
}
