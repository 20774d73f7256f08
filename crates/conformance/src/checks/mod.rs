//! The checks: plain functions taking `&Subject`, each needing one [`Capability`].
//! They panic (with the exact error code expected and found) when the provider does
//! not conform. [`ALL`] lists them; [`crate::conformance_suite!`] makes one test each.

pub mod atomic;
pub mod auth;
pub mod av;
pub mod cm;
pub mod cntr;
pub mod commit;
pub mod contexts;
pub mod control;
pub mod control_wait;
pub mod cq;
pub mod dgram;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod getinfo;
pub mod mr;
pub mod multi;
pub mod multirecv;
pub mod ordering;
pub mod pairs;
pub mod rma;
pub mod rma_event;
pub mod setname;
pub mod shared_av;
pub mod tagged;
pub mod teardown;
pub mod trigger;
pub mod waitset;

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
    Getinfo: getinfo::getinfo_nic_describes_a_host_interface,
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
    AvUserId: dgram::msg_source_user_id,
    Dgram: dgram::dgram_ep_type_results,
    Inject: dgram::inject_up_to_inject_size,
    Msg: teardown::teardown_drop_ep_before_cq,
    Msg: teardown::teardown_drop_cq_before_ep,
    Msg: teardown::teardown_drop_domain_first,
    Msg: teardown::teardown_close_bound_cq_is_ebusy,
    Eq: eq::eq_write_read_peek,
    Eq: eq::eq_empty_is_eagain_and_sread_times_out,
    Eq: eq::eq_sread_returns_event,
    Counters: cntr::cntr_read_add_set,
    Counters: cntr::cntr_wait_threshold_and_timeout,
    Counters: cntr::cntr_counts_sends_and_receives,
    Mr: mr::mr_reg_access_and_keys,
    Mr: mr::mr_regv_regattr_and_bad_args,
    Pairs: pairs::pair_msg_sizes_both_ways,
    Pairs: pairs::pair_msg_iov_and_msg_calls,
    Pairs: pairs::pair_cancel_recv,
    Pairs: pairs::pair_bad_input,
    Reliable: pairs::pair_unexpected_messages,
    CqData: pairs::pair_cq_data,
    PairInject: pairs::pair_inject_and_inject_complete,
    SelectiveCompletion: pairs::pair_selective_completion,
    Pairs: teardown::teardown_pairs_any_order,
    Cm: cm::cm_connect_accept_data,
    Cm: cm::cm_reject_with_data,
    Cm: cm::cm_shutdown_event,
    Tagged: tagged::tagged_match_tag_and_ignore,
    Peek: tagged::tagged_peek_claim_discard,
    Peek: tagged::tagged_unexpected,
    DirectedRecv: tagged::tagged_directed_recv,
    MultiRecv: multirecv::multi_recv_packs_and_releases,
    Rma: rma::rma_write_read_sizes,
    Rma: rma::rma_iov_and_msg,
    Rma: rma::rma_inject_write,
    RmaCqData: rma::rma_writedata_remote_cq_data,
    Rma: rma::rma_bad_key_and_out_of_range,
    Atomic: atomic::atomic_valid_matches_query,
    Atomic: atomic::atomic_ops_match_reference,
    RmaEvent: rma_event::rma_remote_counters,
    Pairs: ep::ep_enable_without_cq_or_av,
    Pairs: ep::ep_bind_after_enable_is_eopbadstate,
    SelectiveCompletion: ep::ep_bind_selective_alone_is_ebadflags,
    Pairs: ep::ep_bind_cq_twice_is_einval,
    Pairs: ep::pair_recv_too_small_is_etrunc,
    Pairs: ep::pair_close_bound_is_ebusy,
    Scalable: contexts::scalable_ep_contexts,
    Scalable: contexts::scalable_ep_per_context_cqs,
    SharedCtx: contexts::shared_contexts,
    SharedCtx: contexts::shared_rx_context_serves_many_endpoints,
    Rdm: dgram::rdm_send_to_self,
    Pairs: multi::cq_sread_times_out_and_wakes,
    Msg: multi::many_endpoints_ring,
    Msg: multi::endpoints_in_two_domains,
    Msg: multi::av_changes_between_transfers,
    Cm: multi::msg_listener_serves_several_connections,
    Reliable: pairs::pair_transmit_and_delivery_complete,
    Reliable: pairs::pair_flood_unexpected,
    WaitSet: waitset::wait_set_counter_and_eq,
    WaitSet: waitset::wait_set_wakes_on_completion,
    PollSet: waitset::poll_set_reports_members,
    PollSet: waitset::poll_set_reports_completions,
    Control: control::control_get_set_ops_flags,
    Control: control::control_ops_flags_and_alias_decide_completions,
    Control: control::control_msg_calls_check_flags,
    Control: control::control_delivery_complete_default,
    CommitComplete: commit::commit_complete_send_and_write,
    CommitComplete: commit::commit_complete_as_default,
    Control: control_wait::control_getwait_polls_readable,
    Control: setname::setname_after_enable_and_bad_names,
    Ordering: ordering::ordering_rma_claims_hold,
    Fence: ordering::fence_read_after_writes,
    Trigger: trigger::trigger_send_waits_for_threshold,
    Trigger: trigger::trigger_chain_rma_and_atomic,
    Trigger: trigger::trigger_bad_arguments,
    Trigger: trigger::trigger_close_cancels,
    Trigger: trigger::trigger_failure_completes_as_error,
    AuthKey: auth::auth_key_separates_endpoints,
    AuthKey: auth::auth_key_too_long_is_einval,
    SharedAv: shared_av::shared_av_view_resolves_and_sends,
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
