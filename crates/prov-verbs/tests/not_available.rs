//! Without rdma-core (the loader pointed at a library that does not exist) the provider
//! is not listed, the registry's load report gives the one-line reason, and the other
//! providers work as before.

use ofi_conformance::unavailable::{check_missing_library, MissingLibrary};

#[test]
fn a_missing_libibverbs_is_one_reason_line_and_nothing_else_changes() {
    let verbs = MissingLibrary {
        provider: ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>(),
        name: "verbs",
        device_var: "FI_VERBS_DEVICE",
        lib_var: "OFI_RDMA_IBVERBS_LIB",
        missing_file: "libibverbs-does-not-exist.so.1",
    };
    check_missing_library(&verbs, ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>());
}
