//! A parameter out of range keeps the provider out with one reason naming the variable
//! and its value (its own test binary: it sets process-wide environment variables).

use ofi_conformance::plugin::linked_registry;

fn report_with(var: &str, value: &str) -> Vec<String> {
    std::env::set_var("FI_VERBS_DEVICE", "soft");
    std::env::set_var(var, value);
    let reg = linked_registry(&[ofi::abi::entry_for::<ofi_prov_verbs::VerbsProvider>()]);
    std::env::remove_var(var);
    assert!(reg.providers().is_empty(), "{var}={value} was accepted");
    reg.load_report().iter().map(|r| r.to_string()).collect()
}

#[test]
fn out_of_range_sizes_are_refused_naming_the_variable() {
    for (var, value, why) in [
        ("FI_VERBS_TX_SIZE", "0", "must be from 1 to 16384"),
        ("FI_VERBS_RX_SIZE", "20000", "must be from 1 to 16384"),
        ("FI_VERBS_INLINE_SIZE", "100000", "at most"),
    ] {
        let lines = report_with(var, value);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(&format!("{var}={value}: {why}")),
            "{var}={value}: {lines:?}"
        );
    }
}
