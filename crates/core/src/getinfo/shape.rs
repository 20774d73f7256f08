//! Result shaping: turning a matching template into the info handed to the application
//! (reference §4.4). [`alter_info`] assumes the template passed
//! [`check_info`](super::check_info) against the same hints; it never fails and never
//! panics, and on unchecked input it still produces a self-consistent info (it never adds
//! a capability the template does not offer).
//!
//! What changes, with hints:
//! - `caps`: the hint's caps, the modifiers their primary caps imply (taken from the
//!   template), and the template's secondary caps — `FI_SOURCE` / `FI_SOURCE_ERR` and `FI_TRIGGER` only
//!   if hinted (they cost performance). A hint without primary caps keeps the template's
//!   primaries. Remote RMA modifiers are dropped when the application's `mr_mode` does
//!   not accept the registration bits an RMA target needs. Without hint caps the
//!   template's caps are kept.
//! - `tx_attr.caps` / `rx_attr.caps`: shaped the same way from their hints, then narrowed
//!   to the result's caps.
//! - `mode` (and tx/rx/domain modes): the modes the template requires, which after a
//!   passed check equals the template's mode ∩ the hint's, with `FI_LOCAL_MR`
//!   adjusted as in the check.
//! - `domain_attr.mr_mode`: legacy `BASIC`/`SCALABLE` hints copied verbatim (before 1.5,
//!   `UNSPEC` becomes `BASIC` or `SCALABLE` by what the template accepts); otherwise the
//!   template's bits trimmed to what the result's caps need.
//! - threading, progress (control and data), resource management, AV type: the hint's
//!   when set.
//! - endpoint context counts, tx/rx `size`, `iov_limit`, `inject_size`,
//!   `rma_iov_limit`, and (with RMA/atomic) the `max_order_*` sizes: the hint's when
//!   non-zero and within the template's limit.
//! - tx/rx `op_flags`: copied from the hints (even 0, as the C library does).
//! - `handle`, authorization keys: copied from the hints; fabric and domain names: the
//!   hint's where the template has none; `addr_format`: a generic `FI_SOCKADDR` template
//!   takes the hint's `_IN` / `_IN6`.
//!
//! Addresses are not touched here: `match_templates` fills them with the flags in hand.

use crate::attr::Info;
use crate::enums::{AddrFormat, AvType, Progress, ResourceMgmt, Threading, SHARED_CONTEXT};
use crate::flags::{Caps, Mode, MrMode};
use crate::version::Version;

use super::check::{
    legacy_mr, mr_mode_for_caps, required_mode, MR_BITS_VERSION, MR_LEGACY, MR_RMA_TARGET,
    MSG_MODIFIERS, RMA_MODIFIERS,
};

/// Shapes `template` for an application that gave `hints` (None = no hints) and uses
/// API `api_version`. See the module docs for every rule.
pub fn alter_info(template: &Info, hints: Option<&Info>, api_version: Version) -> Info {
    let mut out = template.clone();
    let Some(h) = hints else {
        out.domain_attr.mr_mode = mr_mode_without_hints(template, api_version);
        return out;
    };

    // Capabilities.
    let mut caps = shape_caps(template.caps, h.caps);
    let user_mr = h.domain_attr.mr_mode;
    if !legacy_mr(h, api_version) && !user_mr.is_empty() {
        let target_bits = template.domain_attr.mr_mode & MR_RMA_TARGET;
        if !user_mr.contains(target_bits) && caps.intersects(Caps::REMOTE_READ | Caps::REMOTE_WRITE)
        {
            caps -= Caps::REMOTE_READ | Caps::REMOTE_WRITE | Caps::RMA_EVENT;
            if caps.intersects(Caps::RMA | Caps::ATOMIC) && !caps.intersects(RMA_MODIFIERS) {
                // Without any modifier RMA would again mean "everything".
                caps |= Caps::READ | Caps::WRITE;
            }
        }
    }
    out.caps = caps;
    out.tx_attr.caps = shape_caps(template.tx_attr.caps, h.tx_attr.caps) & caps;
    out.rx_attr.caps = shape_caps(template.rx_attr.caps, h.rx_attr.caps) & caps;

    // Modes.
    out.mode = required_mode(template.mode, template, h, api_version, true);
    out.tx_attr.mode = required_mode(template.tx_attr.mode, template, h, api_version, false);
    out.rx_attr.mode = required_mode(template.rx_attr.mode, template, h, api_version, false);

    // Address format: a generic sockaddr template takes the hint's specific family.
    if template.addr_format == AddrFormat::SOCKADDR
        && matches!(
            h.addr_format,
            AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6
        )
    {
        out.addr_format = h.addr_format;
    }
    out.handle = h.handle;

    // Domain.
    let (od, hd) = (&mut out.domain_attr, &h.domain_attr);
    od.mr_mode = mr_mode_with_hints(template, h, caps, api_version);
    if hd.threading != Threading::Unspec {
        od.threading = hd.threading;
    }
    if hd.control_progress != Progress::Unspec {
        od.control_progress = hd.control_progress;
    }
    if hd.data_progress != Progress::Unspec {
        od.data_progress = hd.data_progress;
    }
    if hd.resource_mgmt != ResourceMgmt::Unspec {
        od.resource_mgmt = hd.resource_mgmt;
    }
    if hd.av_type != AvType::Unspec {
        od.av_type = hd.av_type;
    }
    if od.name.is_none() {
        od.name.clone_from(&hd.name);
    }
    if hd.auth_key.is_some() {
        od.auth_key.clone_from(&hd.auth_key);
    }

    // Fabric.
    if out.fabric_attr.name.is_none() {
        out.fabric_attr.name.clone_from(&h.fabric_attr.name);
    }

    // Endpoint.
    let (oe, he, te) = (&mut out.ep_attr, &h.ep_attr, &template.ep_attr);
    oe.tx_ctx_cnt = ctx_override(
        te.tx_ctx_cnt,
        he.tx_ctx_cnt,
        template.domain_attr.max_ep_tx_ctx,
    );
    oe.rx_ctx_cnt = ctx_override(
        te.rx_ctx_cnt,
        he.rx_ctx_cnt,
        template.domain_attr.max_ep_rx_ctx,
    );
    if caps.intersects(Caps::RMA | Caps::ATOMIC) {
        oe.max_order_raw_size = lower(te.max_order_raw_size, he.max_order_raw_size);
        oe.max_order_war_size = lower(te.max_order_war_size, he.max_order_war_size);
        oe.max_order_waw_size = lower(te.max_order_waw_size, he.max_order_waw_size);
    }
    if he.auth_key.is_some() {
        oe.auth_key.clone_from(&he.auth_key);
    }

    // Transmit / receive.
    let (ot, ht, tt) = (&mut out.tx_attr, &h.tx_attr, &template.tx_attr);
    ot.op_flags = ht.op_flags;
    ot.size = lower(tt.size, ht.size);
    ot.iov_limit = lower(tt.iov_limit, ht.iov_limit);
    ot.inject_size = lower(tt.inject_size, ht.inject_size);
    ot.rma_iov_limit = lower(tt.rma_iov_limit, ht.rma_iov_limit);
    let (or, hr, tr) = (&mut out.rx_attr, &h.rx_attr, &template.rx_attr);
    or.op_flags = hr.op_flags;
    or.size = lower(tr.size, hr.size);
    or.iov_limit = lower(tr.iov_limit, hr.iov_limit);

    out
}

/// The hint's value when it is non-zero and within the template's, else the template's.
fn lower(template: usize, hint: usize) -> usize {
    if hint != 0 && hint <= template {
        hint
    } else {
        template
    }
}

/// Endpoint context count: `FI_SHARED_CONTEXT` or a non-zero count within the template's
/// per-endpoint maximum replaces the template's count.
fn ctx_override(template: usize, hint: usize, max_ep: usize) -> usize {
    if hint == SHARED_CONTEXT {
        return hint;
    }
    let limit = if max_ep != 0 {
        max_ep
    } else if template != 0 && template != SHARED_CONTEXT {
        template
    } else {
        1
    };
    if hint != 0 && hint <= limit {
        hint
    } else {
        template
    }
}

/// Capability shaping for one level (info, tx or rx): see the module docs.
pub(crate) fn shape_caps(offered: Caps, asked: Caps) -> Caps {
    if asked.is_empty() {
        return offered;
    }
    let asked_primary = asked & Caps::PRIMARY;
    let primary = if asked_primary.is_empty() {
        offered & Caps::PRIMARY
    } else {
        asked_primary
    };
    let mut caps = asked | primary;
    if primary.intersects(Caps::MSG | Caps::TAGGED) && !asked.intersects(MSG_MODIFIERS) {
        let m = offered & MSG_MODIFIERS;
        caps |= if m.is_empty() { MSG_MODIFIERS } else { m };
    }
    if primary.intersects(Caps::RMA | Caps::ATOMIC) && !asked.intersects(RMA_MODIFIERS) {
        let m = offered & RMA_MODIFIERS;
        caps |= if m.is_empty() { RMA_MODIFIERS } else { m };
    }
    caps |= (offered & Caps::SECONDARY) - (Caps::SOURCE | Caps::SOURCE_ERR | Caps::TRIGGER);
    caps
}

/// `mr_mode` of a result without hints: before 1.5 the legacy mode the template accepts
/// (BASIC preferred); from 1.5 the template's bits trimmed to its own caps.
fn mr_mode_without_hints(template: &Info, api: Version) -> MrMode {
    let prov = template.domain_attr.mr_mode;
    if api < MR_BITS_VERSION {
        return legacy_pick(prov);
    }
    mr_mode_for_caps(prov, template.caps)
}

fn legacy_pick(prov: MrMode) -> MrMode {
    if prov.contains(MrMode::BASIC) || !prov.contains(MrMode::SCALABLE) {
        MrMode::BASIC
    } else {
        MrMode::SCALABLE
    }
}

/// `mr_mode` of a result with hints (reference §4.4): legacy hints verbatim; from 1.5 the
/// template's bits trimmed to the result's caps (`caps`), intersected with a non-zero
/// hint (keeping `FI_MR_LOCAL` when the application accepted it through `FI_LOCAL_MR`).
fn mr_mode_with_hints(template: &Info, h: &Info, caps: Caps, api: Version) -> MrMode {
    let prov = template.domain_attr.mr_mode;
    let user = h.domain_attr.mr_mode;
    if api < MR_BITS_VERSION {
        return if user == MrMode::BASIC || user == MrMode::SCALABLE {
            user
        } else {
            legacy_pick(prov)
        };
    }
    if user.intersects(MR_LEGACY) {
        return user & MR_LEGACY;
    }
    let m = mr_mode_for_caps(prov, caps);
    if user.is_empty() {
        return m;
    }
    let mut accepted = user;
    if h.mode.contains(Mode::LOCAL_MR) {
        accepted |= MrMode::LOCAL;
    }
    m & accepted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::flag_set;

    #[test]
    fn caps_shaping_rules() {
        let offered = flag_set!(Caps:
            MSG, RMA, SEND, RECV, READ, WRITE, REMOTE_READ, REMOTE_WRITE, SOURCE, MULTI_RECV
        );
        // No hint caps: the template's.
        assert_eq!(shape_caps(offered, Caps::empty()), offered);
        // MSG alone: its modifiers from the template, secondaries except SOURCE, no RMA.
        assert_eq!(
            shape_caps(offered, Caps::MSG),
            flag_set!(Caps: MSG, SEND, RECV, MULTI_RECV)
        );
        // MSG|SEND: send-only stays send-only.
        assert_eq!(
            shape_caps(offered, Caps::MSG | Caps::SEND),
            Caps::MSG | Caps::SEND | Caps::MULTI_RECV
        );
        // RMA: the four RMA modifiers.
        assert_eq!(
            shape_caps(offered, Caps::RMA),
            Caps::RMA | RMA_MODIFIERS | Caps::MULTI_RECV
        );
        // FI_SOURCE only when hinted.
        assert!(shape_caps(offered, Caps::MSG | Caps::SOURCE).contains(Caps::SOURCE));
        // Only a secondary asked: the template's primaries are kept.
        assert_eq!(
            shape_caps(offered, Caps::MULTI_RECV),
            Caps::MSG | Caps::RMA | MSG_MODIFIERS | RMA_MODIFIERS | Caps::MULTI_RECV
        );
    }

    #[test]
    fn overrides() {
        assert_eq!(lower(100, 0), 100);
        assert_eq!(lower(100, 10), 10);
        assert_eq!(lower(100, 1000), 100);
        assert_eq!(ctx_override(1, 0, 0), 1);
        assert_eq!(ctx_override(1, SHARED_CONTEXT, 0), SHARED_CONTEXT);
        assert_eq!(ctx_override(1, 4, 8), 4);
        assert_eq!(ctx_override(1, 16, 8), 1);
        assert_eq!(legacy_pick(MrMode::SCALABLE), MrMode::SCALABLE);
        assert_eq!(legacy_pick(MrMode::BASIC | MrMode::SCALABLE), MrMode::BASIC);
    }
}
