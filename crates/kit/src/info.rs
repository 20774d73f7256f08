//! The parts of a getinfo template that every kit-built provider fills the same way, so
//! that a provider's `template` states only what is its own.
//!
//! Each function returns a complete attribute value; a provider changes the fields where
//! it differs with struct-update syntax (`DomainAttr { mr_key_size: 0,
//! ..info::domain_attr(NAME) }`). Nothing here panics.

use ofi_core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use ofi_core::getinfo::{self, AddrResolver, GetinfoOutcome, GetinfoRequest};
use ofi_core::provider::Provider;
use ofi_core::{Caps, EpType, MsgOrder, OpFlags, Progress, Protocol, ResourceMgmt, Threading};

/// What every RDM provider of the kit offers for messages: untagged and tagged sends
/// with remote CQ data, and every receive capability ([`RX_ONLY_CAPS`]: receives, the
/// source of each receive (`FI_SOURCE`) and user ids in the AV, directed and
/// multi-buffer receives).
pub const RDM_MSG_CAPS: Caps = Caps::MSG
    .union(Caps::TAGGED)
    .union(Caps::SEND)
    .union(Caps::REMOTE_CQ_DATA)
    .union(RX_ONLY_CAPS);

/// RMA and atomics in both directions: what a provider that has them adds to its
/// message capabilities ([`RDM_MSG_CAPS`] for an RDM provider).
pub const RMA_ATOMIC_CAPS: Caps = Caps::RMA
    .union(Caps::ATOMIC)
    .union(RMA_INITIATOR)
    .union(RMA_TARGET);

/// The initiator's side of RMA and atomics: reading and writing remote memory
/// (`FI_READ`, `FI_WRITE`).
const RMA_INITIATOR: Caps = Caps::READ.union(Caps::WRITE);

/// The target's side of RMA and atomics: memory read and written by peers
/// (`FI_REMOTE_READ`, `FI_REMOTE_WRITE`).
const RMA_TARGET: Caps = Caps::REMOTE_READ.union(Caps::REMOTE_WRITE);

/// A domain as the kit's objects provide it: thread safe, both progress modes offered
/// (`FI_PROGRESS_AUTO`, so hints asking for either match; see
/// [`getinfo_preferring_manual`]), resource management on, 8-byte MR keys and CQ data,
/// 256 CQs, counters, endpoints and contexts, one transmit and one receive context per
/// endpoint, 65,536 MRs, local and remote communication. Everything else is zero or
/// unspecified.
pub fn domain_attr(name: &str) -> DomainAttr {
    DomainAttr {
        name: Some(name.to_string()),
        threading: Threading::Safe,
        control_progress: Progress::Auto,
        data_progress: Progress::Auto,
        resource_mgmt: ResourceMgmt::Enabled,
        mr_key_size: 8,
        cq_data_size: 8,
        cq_cnt: 256,
        ep_cnt: 256,
        tx_ctx_cnt: 256,
        rx_ctx_cnt: 256,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        cntr_cnt: 256,
        caps: Caps::LOCAL_COMM | Caps::REMOTE_COMM,
        mr_cnt: 1 << 16,
        ..DomainAttr::default()
    }
}

/// An endpoint of `ep_type` speaking `protocol` (`protocol_version`), messages up to
/// `max_msg_size` bytes, every tag bit usable, one transmit and one receive context, no
/// ordering size guarantees and no message prefix.
pub fn ep_attr(
    ep_type: EpType,
    protocol: Protocol,
    protocol_version: u32,
    max_msg_size: usize,
) -> EpAttr {
    EpAttr {
        ep_type,
        protocol,
        protocol_version,
        max_msg_size,
        mem_tag_format: u64::MAX,
        tx_ctx_cnt: 1,
        rx_ctx_cnt: 1,
        ..EpAttr::default()
    }
}

/// `ep` with its ordering guarantees (`FI_ORDER_RAW`, `_WAR`, `_WAW`, as far as
/// `msg_order` claims them) holding at every message size it takes: each
/// `max_order_*_size` is its `max_msg_size`.
pub fn ordered_at_every_size(ep: EpAttr) -> EpAttr {
    EpAttr {
        max_order_raw_size: ep.max_msg_size,
        max_order_war_size: ep.max_msg_size,
        max_order_waw_size: ep.max_msg_size,
        ..ep
    }
}

/// The default transmit flags an RDM provider reports when it honours every completion
/// level per operation: completions, inject, and each level of
/// [`COMPLETION_LEVELS`](crate::opflags::COMPLETION_LEVELS) (inject, transmit and
/// delivery complete).
pub const RDM_TX_OP_FLAGS: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT)
    .union(crate::opflags::COMPLETION_LEVELS);

/// The capabilities that concern receives only: a transmit side ([`tx_caps`]) never has
/// them.
pub const RX_ONLY_CAPS: Caps = Caps::RECV
    .union(Caps::SOURCE)
    .union(Caps::AV_USER_ID)
    .union(Caps::DIRECTED_RECV)
    .union(Caps::MULTI_RECV);

/// The capabilities that concern transmits only: a receive side ([`rx_attr`]) never has
/// them (fi_endpoint(3) gives naming a receive context and multicast sends to the
/// initiator).
pub const TX_ONLY_CAPS: Caps = Caps::SEND
    .union(RMA_INITIATOR)
    .union(Caps::FENCE)
    .union(Caps::TRIGGER)
    .union(Caps::NAMED_RX_CTX)
    .union(Caps::MULTICAST);

/// The transmit side's share of capabilities `caps`: those without the receive-only
/// ones ([`RX_ONLY_CAPS`]) and without the target's RMA access (`FI_REMOTE_READ`,
/// `FI_REMOTE_WRITE`) and its counting (`FI_RMA_EVENT`), which fi_endpoint(3) gives to
/// the receive side only.
pub const fn tx_caps(caps: Caps) -> Caps {
    caps.difference(RX_ONLY_CAPS)
        .difference(RMA_TARGET)
        .difference(Caps::RMA_EVENT)
}

/// The transmit side of an RDM provider: `caps`, the default flags `op_flags`,
/// `msg_order`, injects up to `inject_size` bytes, `size` outstanding operations of at
/// most `iov_limit` buffers each and one remote buffer per RMA; no mode bits, no
/// completion order, no traffic class.
pub fn rdm_tx_attr(
    caps: Caps,
    op_flags: OpFlags,
    msg_order: MsgOrder,
    inject_size: usize,
    size: usize,
    iov_limit: usize,
) -> TxAttr {
    TxAttr {
        caps,
        op_flags,
        msg_order,
        inject_size,
        size,
        iov_limit,
        rma_iov_limit: 1,
        ..TxAttr::default()
    }
}

/// The receive side of an endpoint with capabilities `caps`: those caps without the
/// transmit-only ones ([`TX_ONLY_CAPS`]), the default flags `op_flags`, `msg_order`,
/// `size` posted receives of at most `iov_limit` buffers each; no mode bits, no
/// completion order, nothing buffered.
pub fn rx_attr(
    caps: Caps,
    op_flags: OpFlags,
    msg_order: MsgOrder,
    size: usize,
    iov_limit: usize,
) -> RxAttr {
    RxAttr {
        caps: caps - TX_ONLY_CAPS,
        op_flags,
        msg_order,
        size,
        iov_limit,
        ..RxAttr::default()
    }
}

/// The receive side of an RDM provider with multi-buffer receives ([`rx_attr`] with
/// completions and `FI_MULTI_RECV` as default flags).
pub fn rdm_rx_attr(caps: Caps, msg_order: MsgOrder, size: usize, iov_limit: usize) -> RxAttr {
    let op_flags = OpFlags::COMPLETION | OpFlags::MULTI_RECV;
    rx_attr(caps, op_flags, msg_order, size, iov_limit)
}

/// A fabric named after the provider.
pub fn fabric_attr(name: &str) -> FabricAttr {
    FabricAttr {
        name: Some(name.to_string()),
        ..FabricAttr::default()
    }
}

/// The framework's matcher over `prov`'s templates, with `resolve` for `node` and
/// `service`: the getinfo of a provider whose templates are its answer.
pub fn getinfo_from_templates<P: Provider>(
    prov: &P,
    req: &GetinfoRequest,
    resolve: &dyn AddrResolver,
) -> GetinfoOutcome {
    let templates: Vec<Info> = prov.info_templates();
    getinfo::match_templates(P::NAME, P::VERSION, &templates, req, resolve)
}

/// [`getinfo_from_templates`], then data progress manual unless the hints asked for
/// auto ([`crate::progress::prefer_manual_data_progress`]): the getinfo of a provider
/// whose templates offer both progress modes.
pub fn getinfo_preferring_manual<P: Provider>(
    prov: &P,
    req: &GetinfoRequest,
    resolve: &dyn AddrResolver,
) -> GetinfoOutcome {
    let mut out = getinfo_from_templates(prov, req, resolve);
    crate::progress::prefer_manual_data_progress(req, &mut out.infos);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_ordered_at_every_size_keeps_its_other_attributes() {
        let ep = ep_attr(EpType::Msg, Protocol::SOCK_TCP, 3, 1 << 20);
        let ordered = ordered_at_every_size(ep.clone());
        let sizes = (
            ordered.max_order_raw_size,
            ordered.max_order_war_size,
            ordered.max_order_waw_size,
        );
        assert_eq!(sizes, (1 << 20, 1 << 20, 1 << 20));
        assert_eq!(
            EpAttr {
                max_order_raw_size: 0,
                max_order_war_size: 0,
                max_order_waw_size: 0,
                ..ordered
            },
            ep
        );
    }

    #[test]
    fn derived_sets_hold_the_documented_caps() {
        let rma = Caps::RMA | Caps::ATOMIC | Caps::READ | Caps::WRITE;
        assert_eq!(
            RMA_ATOMIC_CAPS,
            rma | Caps::REMOTE_READ | Caps::REMOTE_WRITE
        );
        let tx = Caps::SEND | Caps::READ | Caps::WRITE;
        assert_eq!(
            TX_ONLY_CAPS,
            tx | Caps::FENCE | Caps::TRIGGER | Caps::NAMED_RX_CTX | Caps::MULTICAST
        );
        let msg = Caps::MSG | Caps::TAGGED | Caps::SEND | Caps::RECV | Caps::SOURCE;
        let recv = Caps::AV_USER_ID | Caps::DIRECTED_RECV | Caps::MULTI_RECV;
        assert_eq!(RDM_MSG_CAPS, msg | recv | Caps::REMOTE_CQ_DATA);
    }

    #[test]
    fn tx_caps_keep_what_a_transmit_context_has() {
        let rdm = RDM_MSG_CAPS | RMA_ATOMIC_CAPS | Caps::FENCE;
        let initiator = Caps::MSG | Caps::TAGGED | Caps::SEND | Caps::REMOTE_CQ_DATA;
        let rma = Caps::RMA | Caps::ATOMIC | Caps::READ | Caps::WRITE;
        assert_eq!(tx_caps(rdm), initiator | rma | Caps::FENCE);
        assert!(!tx_caps(rdm).intersects(RX_ONLY_CAPS));
        // Counting peers' accesses is the target's.
        assert_eq!(tx_caps(rdm | Caps::RMA_EVENT), tx_caps(rdm));
    }
}
