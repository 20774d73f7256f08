//! Without libefa (the loader pointed at a library that does not exist) the provider is
//! not listed, the registry's load report gives the one-line reason, and the other
//! providers work as before. With the software device (`FI_EFA_DEVICE=soft`) libefa is
//! not needed.

use ofi::registry::{Registry, RegistryConfig};
use ofi::{EpType, Info};

fn registry() -> Registry {
    Registry::build(RegistryConfig {
        builtins: vec![
            ofi::abi::entry_for::<ofi_prov_efa::EfaProvider>(),
            ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>(),
        ],
        ..RegistryConfig::default()
    })
}

#[test]
fn a_missing_libefa_is_one_reason_line_and_nothing_else_changes() {
    std::env::remove_var("FI_EFA_DEVICE");
    std::env::set_var("OFI_EFA_LIB", "libefa-does-not-exist.so.1");
    let reg = registry();
    let names: Vec<String> = reg.providers().iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, vec!["tcp".to_string()], "only tcp is registered");
    let lines: Vec<String> = reg.load_report().iter().map(|r| r.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "built-in efa: init failed: provider efa: libefa-does-not-exist.so.1 not found \
             (No such device)"
                .to_string()
        ]
    );
    // tcp still answers and opens.
    let hints = Info::hints().with_ep_type(EpType::Msg);
    let infos = reg
        .getinfo(&ofi::GetinfoRequest {
            version: ofi::API_VERSION,
            node: None,
            service: None,
            flags: ofi::GetinfoFlags::empty(),
            hints: Some(hints),
        })
        .expect("tcp answers");
    assert!(infos
        .iter()
        .all(|i| i.fabric_attr.prov_name.as_deref() == Some("tcp")));
    let fabric = reg.open_fabric(&infos[0]).expect("tcp fabric");
    fabric.domain(&infos[0]).expect("tcp domain");
    // The software device needs no libefa.
    std::env::set_var("FI_EFA_DEVICE", "soft");
    let reg = registry();
    let names: Vec<String> = reg.providers().iter().map(|p| p.name.clone()).collect();
    assert!(names.contains(&"efa".to_string()), "{names:?}");
    std::env::remove_var("FI_EFA_DEVICE");
}
