//! The checks: plain functions taking `&Subject`, each needing one [`Capability`].
//! They panic (with the exact error code expected and found) when the provider does
//! not conform. [`ALL`] lists them; [`crate::conformance_suite!`] makes one test each.

pub mod av;
pub mod cq;
pub mod dgram;
pub mod domain;
pub mod getinfo;
pub mod teardown;

use crate::{Capability, Subject};

/// One check.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// Its name (the test's name).
    pub name: &'static str,
    /// The capability the provider must claim for it to run.
    pub cap: Capability,
    /// The check.
    pub run: fn(&Subject),
}

macro_rules! table {
    ($($cap:ident: $module:ident :: $name:ident),* $(,)?) => {
        /// Every check, in the order the macro instantiates them.
        pub const ALL: &[Check] = &[
            $(Check { name: stringify!($name), cap: Capability::$cap, run: $module::$name },)*
        ];
    };
}

table! {
    Getinfo: getinfo::getinfo_results_name_the_provider,
    Getinfo: getinfo::getinfo_result_caps_are_claimed,
    Getinfo: getinfo::getinfo_unclaimed_cap_is_enodata,
    Getinfo: getinfo::getinfo_prov_attr_only,
    Getinfo: getinfo::getinfo_ep_type_filter,
    Getinfo: getinfo::getinfo_newer_api_version_is_enosys,
    Domain: domain::domain_open_close,
    Domain: domain::domain_close_with_open_endpoint_is_ebusy,
    Cq: cq::cq_open_each_format,
    Cq: cq::cq_read_empty_is_eagain,
    Cq: cq::cq_bad_format_is_einval,
    Cq: cq::cq_readerr_without_error_is_eagain,
    Av: av::av_insert_own_address_lookup_round_trip,
    Av: av::av_remove_then_lookup_is_einval,
    Av: av::av_insert_malformed,
    Av: av::av_straddr,
    Msg: dgram::msg_send_to_self,
    Msg: dgram::msg_payload_sizes_to_second_endpoint,
    Msg: dgram::msg_larger_than_max_is_emsgsize,
    Msg: dgram::msg_recv_too_small_is_etrunc,
    Msg: dgram::msg_cancel_posted_recv_is_ecanceled,
    Msg: dgram::msg_data_call_before_enable,
    Source: dgram::msg_source_address,
    Dgram: dgram::dgram_ep_type_results,
    Inject: dgram::inject_up_to_inject_size,
    Msg: teardown::teardown_drop_ep_before_cq,
    Msg: teardown::teardown_drop_cq_before_ep,
    Msg: teardown::teardown_drop_domain_first,
    Msg: teardown::teardown_close_bound_cq_is_ebusy,
}

/// The check called `name`.
pub fn by_name(name: &str) -> Option<&'static Check> {
    ALL.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, c) in ALL.iter().enumerate() {
            assert!(ALL[..i].iter().all(|d| d.name != c.name), "{}", c.name);
            assert_eq!(by_name(c.name).map(|c| c.name), Some(c.name));
        }
        assert!(by_name("no_such_check").is_none());
    }
}
