//! Without libefa (the loader pointed at a library that does not exist) the provider is
//! not listed, the registry's load report gives the one-line reason, and the other
//! providers work as before. With the software device (`FI_EFA_DEVICE=soft`) libefa is
//! not needed.

use ofi_conformance::unavailable::{check_missing_library, MissingLibrary};

const EFA: MissingLibrary = MissingLibrary {
    provider: ofi::abi::entry_for::<ofi_prov_efa::EfaProvider>(),
    name: "efa",
    device_var: "FI_EFA_DEVICE",
    lib_var: "OFI_EFA_LIB",
    missing_file: "libefa-does-not-exist.so.1",
};

#[test]
fn a_missing_libefa_is_one_reason_line_and_nothing_else_changes() {
    let tcp = ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>();
    check_missing_library(&EFA, tcp);
    // The software device needs no libefa.
    std::env::set_var("FI_EFA_DEVICE", "soft");
    let reg = EFA.registry(tcp);
    let names: Vec<String> = reg.providers().iter().map(|p| p.name.clone()).collect();
    assert!(names.contains(&"efa".to_string()), "{names:?}");
    std::env::remove_var("FI_EFA_DEVICE");
}
