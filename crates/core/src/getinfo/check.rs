//! Hint checks: does one provider template satisfy the application's hints?
//!
//! [`check_info`] runs the checks in a fixed order and stops at the first failure, which
//! it reports as a [`Mismatch`] naming the hint field, what the hints asked and what the
//! template offers. The order follows the C library's utility code (reference §4.3):
//! endpoint type, capabilities, mode, address format, fabric, domain, endpoint, receive
//! and transmit attributes.
//!
//! General rule (seed fi_getinfo, both versions): a zero / `None` / `Unspec` hint is a
//! wildcard and a set hint is a requirement; the exception is `mode`, where the hint lists
//! the modes the application can live with and 0 means "none". Numeric limits pass when
//! the hint is at most what the template offers.
//!
//! Template conventions the checks rely on:
//! - a template lists the mode bits it requires (all of them are requirements);
//! - `domain_attr.mr_mode` lists required registration bits; `FI_MR_BASIC` /
//!   `FI_MR_SCALABLE` bits in a template are never requirements, they declare that the
//!   provider accepts applications using those legacy modes;
//! - threading / progress / resource management are declared (an `Unspec` template value
//!   is the most demanding level, as in C);
//! - a template with `fabric_attr.api_version` 0 supports the library's [`API_VERSION`].
//!
//! Nothing here panics.

use std::fmt;

use crate::attr::{Info, RxAttr, TxAttr};
use crate::enums::{
    AddrFormat, AvType, EpType, Progress, Protocol, ResourceMgmt, Threading, SHARED_CONTEXT,
};
use crate::flags::{flag_set, Caps, Mode, MrMode};
use crate::version::{Version, API_VERSION};

use super::explain::Mismatch;

type Check = Result<(), Mismatch>;

/// The first API version with the 1.5 memory-registration bits (`FI_MR_LOCAL`, …).
pub(crate) const MR_BITS_VERSION: Version = Version::new(1, 5);

/// The RMA/atomic modifiers (who initiates, who is the target).
pub(crate) const RMA_MODIFIERS: Caps = flag_set!(Caps: READ, WRITE, REMOTE_READ, REMOTE_WRITE);
/// The message modifiers.
pub(crate) const MSG_MODIFIERS: Caps = flag_set!(Caps: SEND, RECV);
/// Memory-registration bits that only matter when the endpoint is an RMA/atomic target.
pub(crate) const MR_RMA_TARGET: MrMode = flag_set!(MrMode: RAW, VIRT_ADDR, PROV_KEY, RMA_EVENT);
/// The pre-1.5 memory-registration modes, which must be used alone.
pub(crate) const MR_LEGACY: MrMode = flag_set!(MrMode: BASIC, SCALABLE);

/// Capability bits that only concern the initiator side: ignored when a hint's
/// `rx_attr.caps` is compared (applications often copy `info.caps` into both).
const RX_IGNORED_CAPS: Caps = flag_set!(Caps: SEND, READ, WRITE, FENCE);
/// Capability bits that only concern the target side: ignored in a hint's `tx_attr.caps`.
const TX_IGNORED_CAPS: Caps = flag_set!(Caps:
    RECV, REMOTE_READ, REMOTE_WRITE, DIRECTED_RECV, MULTI_RECV, SOURCE, SOURCE_ERR, RMA_EVENT,
    VARIABLE_MSG, NAMED_RX_CTX
);

/// Threading model as a level: the lower the level, the more the provider does for the
/// application. A hint fails when its level is below the template's (the application
/// asks for more thread safety than the template gives).
///
/// `SAFE`=1 < `FID`=2 < `ENDPOINT`=3 < `COMPLETION`=4 < `DOMAIN`=5 < `UNSPEC`=6. The
/// reference gives SAFE < COMPLETION < DOMAIN < UNSPEC (newer C dropped FID and ENDPOINT);
/// FID (serialise per object) and ENDPOINT (serialise per endpoint with its contexts) ask
/// less of the application than COMPLETION (per completion domain), so they sit between
/// SAFE and COMPLETION, FID first.
pub fn threading_level(t: Threading) -> u8 {
    match t {
        Threading::Safe => 1,
        Threading::Fid => 2,
        Threading::Endpoint => 3,
        Threading::Completion => 4,
        Threading::Domain => 5,
        Threading::Unspec => 6,
    }
}

/// Progress model as a level: `AUTO`=1 < `MANUAL`=2 < `UNSPEC`=3. An application asking
/// for automatic progress cannot use a manual-progress template; the reverse is fine.
pub fn progress_level(p: Progress) -> u8 {
    match p {
        Progress::Auto => 1,
        Progress::Manual => 2,
        Progress::Unspec => 3,
    }
}

/// Resource management as a level: `ENABLED`=1 < `DISABLED`=2 < `UNSPEC`=3. An
/// application asking for overrun protection cannot use a template without it.
pub fn rm_level(r: ResourceMgmt) -> u8 {
    match r {
        ResourceMgmt::Enabled => 1,
        ResourceMgmt::Disabled => 2,
        ResourceMgmt::Unspec => 3,
    }
}

/// True if a template whose address format is `offered` can serve hints asking for
/// `asked` (reference §4.3 item 4): `UNSPEC` on either side passes; `FI_SOCKADDR` accepts
/// any socket address (`_IN`, `_IN6`, `_IB`); `_IN` accepts `FI_SOCKADDR` and `_IN`;
/// `_IN6` accepts `FI_SOCKADDR` and `_IN6`; `_IB` accepts `FI_SOCKADDR` and `_IB`; every
/// other format only itself.
pub fn addr_format_accepts(offered: AddrFormat, asked: AddrFormat) -> bool {
    if offered == AddrFormat::UNSPEC || asked == AddrFormat::UNSPEC {
        return true;
    }
    match offered {
        AddrFormat::SOCKADDR => asked.is_socket(),
        AddrFormat::SOCKADDR_IN => matches!(asked, AddrFormat::SOCKADDR | AddrFormat::SOCKADDR_IN),
        AddrFormat::SOCKADDR_IN6 => {
            matches!(asked, AddrFormat::SOCKADDR | AddrFormat::SOCKADDR_IN6)
        }
        AddrFormat::SOCKADDR_IB => matches!(asked, AddrFormat::SOCKADDR | AddrFormat::SOCKADDR_IB),
        other => other == asked,
    }
}

/// Does a template named `template_name` satisfy the hint `fabric_attr.prov_name` value
/// `hint`? Both may be layered names (`core;util`, e.g. `tcp;ofi_rxm`); components are
/// compared case-insensitively and whole (the C library tests whether the provider's
/// name is a *substring* of the hint, so `tcp` would also match a hint `xtcpx`; here only
/// whole components count).
///
/// A hint component starting with `^` excludes that provider. The rule: no component of
/// the template may be excluded; then, if the hint names any provider, either every
/// named component appears in the template's name (hint `tcp` matches `tcp;ofi_rxm`) or
/// every component of the template's name is named (hint `tcp;ofi_rxm` matches `tcp`,
/// the core asked on the utility's behalf, and `ofi_rxm`). Hint `verbs;ofi_rxm` does not
/// match template `tcp;ofi_rxm`. Blank components are ignored.
pub fn prov_name_matches(template_name: &str, hint: &str) -> bool {
    let comps = |s: &str| -> Vec<String> {
        s.split(';')
            .map(|c| c.trim().to_ascii_lowercase())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let template = comps(template_name);
    let mut named = Vec::new();
    let mut excluded = Vec::new();
    for c in comps(hint) {
        match c.strip_prefix('^') {
            Some(x) => {
                let x = x.trim();
                if !x.is_empty() {
                    excluded.push(x.to_string());
                }
            }
            None => named.push(c),
        }
    }
    if template.iter().any(|t| excluded.contains(t)) {
        return false;
    }
    if named.is_empty() {
        return true;
    }
    named.iter().all(|n| template.contains(n))
        || (!template.is_empty() && template.iter().all(|t| named.contains(t)))
}

/// `caps` with the modifiers a primary capability implies when none of its modifiers is
/// listed (seed: "in the absence of any relevant flags, FI_MSG implies the ability to
/// send and receive", likewise RMA/atomic for all four RMA modifiers).
pub(crate) fn with_implied_modifiers(caps: Caps) -> Caps {
    let mut out = caps;
    if caps.intersects(Caps::MSG | Caps::TAGGED) && !caps.intersects(MSG_MODIFIERS) {
        out |= MSG_MODIFIERS;
    }
    if caps.intersects(Caps::RMA | Caps::ATOMIC) && !caps.intersects(RMA_MODIFIERS) {
        out |= RMA_MODIFIERS;
    }
    out
}

/// True if `caps` lets the endpoint be the target of RMA or atomics: RMA/atomic asked and
/// either a remote modifier given or no RMA modifier at all (then all are implied).
pub(crate) fn rma_target(caps: Caps) -> bool {
    caps.intersects(Caps::RMA | Caps::ATOMIC)
        && (caps.intersects(Caps::REMOTE_READ | Caps::REMOTE_WRITE)
            || !caps.intersects(RMA_MODIFIERS))
}

/// The registration bits of `mode` that matter for an endpoint with `caps`: the legacy
/// BASIC/SCALABLE bits removed, `FI_MR_HMEM` only with `FI_HMEM`, `FI_MR_COLLECTIVE` only
/// with `FI_COLLECTIVE`, and the RMA-target bits (RAW, VIRT_ADDR, PROV_KEY, RMA_EVENT)
/// only when the endpoint can be an RMA target.
pub(crate) fn mr_mode_for_caps(mode: MrMode, caps: Caps) -> MrMode {
    let mut m = mode - MR_LEGACY;
    if !caps.contains(Caps::HMEM) {
        m -= MrMode::HMEM;
    }
    if !caps.contains(Caps::COLLECTIVE) {
        m -= MrMode::COLLECTIVE;
    }
    if !rma_target(caps) {
        m -= MR_RMA_TARGET;
    }
    m
}

/// True when the application describes memory registration the pre-1.5 way: an API
/// older than 1.5, or `FI_MR_BASIC` / `FI_MR_SCALABLE` in the hint's `mr_mode`.
pub(crate) fn legacy_mr(hints: &Info, api: Version) -> bool {
    api < MR_BITS_VERSION || hints.domain_attr.mr_mode.intersects(MR_LEGACY)
}

/// The mode bits a template requires of an application described by `hints`.
///
/// All of `t_mode` is required. With `add_local` (the info-level mode), `FI_LOCAL_MR` is
/// added when the template needs `FI_MR_LOCAL` and the application does not say (in
/// 1.5+ `mr_mode` bits) that it registers local buffers. Conversely, the seed says
/// `FI_LOCAL_MR` is ignored for 1.5+ applications using the new `mr_mode` bits, so an
/// application that sets `FI_MR_LOCAL` there is not asked for it.
pub(crate) fn required_mode(
    t_mode: Mode,
    template: &Info,
    hints: &Info,
    api: Version,
    add_local: bool,
) -> Mode {
    let mut req = t_mode;
    let legacy = legacy_mr(hints, api);
    let app_local = !legacy && hints.domain_attr.mr_mode.contains(MrMode::LOCAL);
    if add_local && template.domain_attr.mr_mode.contains(MrMode::LOCAL) && !app_local {
        req |= Mode::LOCAL_MR;
    } else if app_local {
        req -= Mode::LOCAL_MR;
    }
    req
}

/// One capability dependency the seeds state: a hint whose `caps` hold `cap` must also
/// hold what `satisfied` asks for (`needs` says it in words, for the explanation).
pub struct CapDependency {
    /// The dependent capability.
    pub cap: Caps,
    /// What it needs, in C names (e.g. `FI_RMA or FI_ATOMIC`).
    pub needs: &'static str,
    /// True when `caps` (as the hints give them, no modifiers implied) meet the need.
    pub satisfied: fn(Caps) -> bool,
}

/// The capability dependencies of the seeds, checked on the hints' `caps` by
/// [`check_cap_dependencies`]. Sources (fi_getinfo(3), section CAPABILITIES; where the
/// two pages differ, the newer one):
///
/// | capability | needs |
/// | --- | --- |
/// | `FI_READ`, `FI_WRITE`, `FI_REMOTE_READ`, `FI_REMOTE_WRITE` | `FI_RMA` or `FI_ATOMIC` |
/// | `FI_RMA_EVENT` | `FI_REMOTE_READ` or `FI_REMOTE_WRITE` enabled: given, or implied by `FI_RMA` / `FI_ATOMIC` without modifiers |
/// | `FI_RMA_PMEM` | `FI_RMA` |
/// | `FI_SOURCE_ERR` | `FI_SOURCE` |
/// | `FI_MULTICAST` | `FI_MSG` (newer page; the v1.8 page asked for any transfer cap) |
/// | `FI_VARIABLE_MSG` | `FI_MSG` or `FI_TAGGED` (v1.8 page) |
/// | `FI_XPU` | `FI_TRIGGER` (newer page) |
///
/// The other capabilities (`FI_TRIGGER`, `FI_FENCE`, `FI_MULTI_RECV`, `FI_NAMED_RX_CTX`,
/// `FI_DIRECTED_RECV`, `FI_HMEM`, `FI_SEND`, `FI_RECV`, …) have no dependency stated in
/// the seeds, so none is enforced.
pub const CAP_DEPENDENCIES: &[CapDependency] = &[
    CapDependency {
        cap: Caps::READ,
        needs: "FI_RMA or FI_ATOMIC",
        satisfied: rma_or_atomic,
    },
    CapDependency {
        cap: Caps::WRITE,
        needs: "FI_RMA or FI_ATOMIC",
        satisfied: rma_or_atomic,
    },
    CapDependency {
        cap: Caps::REMOTE_READ,
        needs: "FI_RMA or FI_ATOMIC",
        satisfied: rma_or_atomic,
    },
    CapDependency {
        cap: Caps::REMOTE_WRITE,
        needs: "FI_RMA or FI_ATOMIC",
        satisfied: rma_or_atomic,
    },
    CapDependency {
        cap: Caps::RMA_EVENT,
        needs: "FI_REMOTE_READ or FI_REMOTE_WRITE (or FI_RMA / FI_ATOMIC without modifiers)",
        satisfied: rma_target,
    },
    CapDependency {
        cap: Caps::RMA_PMEM,
        needs: "FI_RMA",
        satisfied: |c| c.contains(Caps::RMA),
    },
    CapDependency {
        cap: Caps::SOURCE_ERR,
        needs: "FI_SOURCE",
        satisfied: |c| c.contains(Caps::SOURCE),
    },
    CapDependency {
        cap: Caps::MULTICAST,
        needs: "FI_MSG",
        satisfied: |c| c.contains(Caps::MSG),
    },
    CapDependency {
        cap: Caps::VARIABLE_MSG,
        needs: "FI_MSG or FI_TAGGED",
        satisfied: |c| c.intersects(Caps::MSG | Caps::TAGGED),
    },
    CapDependency {
        cap: Caps::XPU,
        needs: "FI_TRIGGER",
        satisfied: |c| c.contains(Caps::TRIGGER),
    },
];

fn rma_or_atomic(caps: Caps) -> bool {
    caps.intersects(Caps::RMA | Caps::ATOMIC)
}

/// The hints' `caps` against [`CAP_DEPENDENCIES`]: the first capability present whose
/// need is unmet, as a [`Mismatch`] on `caps` (`caps asked FI_SOURCE_ERR, offers nothing:
/// FI_SOURCE_ERR needs FI_SOURCE`). getinfo then answers `FI_ENODATA` (no template can
/// serve such hints; the C library states no other code for it).
pub fn check_cap_dependencies(hints: &Info) -> Result<(), Mismatch> {
    let caps = hints.caps;
    for d in CAP_DEPENDENCIES {
        if caps.contains(d.cap) && !(d.satisfied)(caps) {
            return Err(Mismatch::new(
                "caps",
                d.cap,
                format!("nothing: {} needs {}", d.cap, d.needs),
            ));
        }
    }
    Ok(())
}

/// Checks one provider `template` against the application's `hints` for API version
/// `api_version`. `Ok(())` if every set hint is satisfied; otherwise the first failing
/// check as a [`Mismatch`]. The checks, in order:
///
/// 0. the hints' own consistency: [`check_cap_dependencies`].
/// 1. `ep_attr.type`: equal unless either is `Unspec`.
/// 2. `caps`: the hint's caps ⊆ the template's (modifiers implied by a primary cap count).
/// 3. `mode`: every bit the template requires is in the hint's mode: its `mode`, plus
///    `FI_LOCAL_MR` when the template needs `FI_MR_LOCAL` and the hints' `mr_mode` lacks
///    it (or the application is pre-1.5 / uses BASIC or SCALABLE); an application that
///    sets `FI_MR_LOCAL` in 1.5+ `mr_mode` is never asked for `FI_LOCAL_MR`.
/// 4. `addr_format` ([`addr_format_accepts`]); hint `src_addr` / `dest_addr` must be of a
///    format the template accepts.
/// 5. fabric: `fabric_attr.prov_name` ([`prov_name_matches`]), `fabric_attr.name`
///    (case-insensitive, when the template has one), `fabric_attr.prov_version` ≤,
///    `fabric_attr.api_version` ≤ the template's.
/// 6. domain: name, threading / progress / resource management by level, `av_type`,
///    `cq_data_size`, `mr_mode`, counts and limits, caps, mode, auth key length.
/// 7. endpoint: protocol and version, `max_msg_size`, `msg_prefix_size`, context counts,
///    ordering sizes (with RMA/atomic), tag format (with tagged), auth key length.
/// 8. `rx_attr`, 9. `tx_attr`: caps, mode, op flags, ordering, sizes and limits.
pub fn check_info(template: &Info, hints: &Info, api_version: Version) -> Result<(), Mismatch> {
    check_cap_dependencies(hints)?;
    check_ep_type(template, hints)?;
    check_caps(template, hints)?;
    check_mode(template, hints, api_version)?;
    check_addr_format(template, hints)?;
    check_fabric_attr(template, hints)?;
    check_domain_attr(template, hints, api_version)?;
    check_ep_attr(template, hints)?;
    check_rx_attr(template, hints, api_version)?;
    check_tx_attr(template, hints, api_version)?;
    Ok(())
}

/// `asked` must not exceed `offered` unless it is 0 (wildcard).
fn at_most(field: &str, asked: usize, offered: usize) -> Check {
    if asked != 0 && asked > offered {
        Err(Mismatch::new(field, asked, offered))
    } else {
        Ok(())
    }
}

/// Like [`at_most`], but a template value of 0 means "not limited" and passes.
fn at_most_if_limited(field: &str, asked: usize, offered: usize) -> Check {
    if offered == 0 {
        Ok(())
    } else {
        at_most(field, asked, offered)
    }
}

/// Every bit of `asked` must be in `offered`.
fn subset<T: bitflags::Flags + Copy + fmt::Display>(field: &str, asked: T, offered: T) -> Check {
    if bitflags::Flags::contains(&offered, asked) {
        Ok(())
    } else {
        Err(Mismatch::new(field, asked, offered))
    }
}

/// Every bit `required` must be in `supported` (a mode check: the hint is the
/// application's supported set, the template's the required one).
fn mode_covers(field: &str, supported: Mode, required: Mode) -> Check {
    if supported.contains(required) {
        Ok(())
    } else {
        Err(Mismatch::new(field, supported, required))
    }
}

fn check_ep_type(t: &Info, h: &Info) -> Check {
    let (te, he) = (t.ep_attr.ep_type, h.ep_attr.ep_type);
    if te != EpType::Unspec && he != EpType::Unspec && te != he {
        return Err(Mismatch::new("ep_attr.type", he.name(), te.name()));
    }
    Ok(())
}

fn check_caps(t: &Info, h: &Info) -> Check {
    let offered = with_implied_modifiers(t.caps);
    if !offered.contains(h.caps) {
        return Err(Mismatch::new("caps", h.caps, t.caps));
    }
    Ok(())
}

fn check_mode(t: &Info, h: &Info, api: Version) -> Check {
    mode_covers("mode", h.mode, required_mode(t.mode, t, h, api, true))
}

fn check_addr_format(t: &Info, h: &Info) -> Check {
    if !addr_format_accepts(t.addr_format, h.addr_format) {
        return Err(Mismatch::new(
            "addr_format",
            h.addr_format.name(),
            t.addr_format.name(),
        ));
    }
    for (field, addr) in [("src_addr", &h.src_addr), ("dest_addr", &h.dest_addr)] {
        if let Some(a) = addr {
            if !addr_format_accepts(t.addr_format, a.format()) {
                return Err(Mismatch::new(field, a, t.addr_format.name()));
            }
        }
    }
    Ok(())
}

fn check_fabric_attr(t: &Info, h: &Info) -> Check {
    let (tf, hf) = (&t.fabric_attr, &h.fabric_attr);
    if let Some(hn) = hf.prov_name.as_deref() {
        let tn = tf.prov_name.as_deref().unwrap_or("");
        if !prov_name_matches(tn, hn) {
            return Err(Mismatch::new("fabric_attr.prov_name", hn, or_none(tn)));
        }
    }
    if let (Some(hn), Some(tn)) = (hf.name.as_deref(), tf.name.as_deref()) {
        if !hn.eq_ignore_ascii_case(tn) {
            return Err(Mismatch::new("fabric_attr.name", hn, tn));
        }
    }
    if hf.prov_version > tf.prov_version {
        return Err(Mismatch::new(
            "fabric_attr.prov_version",
            hf.prov_version,
            tf.prov_version,
        ));
    }
    let t_api = if tf.api_version == Version::default() {
        API_VERSION
    } else {
        tf.api_version
    };
    if hf.api_version > t_api {
        return Err(Mismatch::new(
            "fabric_attr.api_version",
            hf.api_version,
            t_api,
        ));
    }
    Ok(())
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

/// Authorization keys: a set hint key must have the length the template expects.
fn check_auth_key(field: &str, asked: &Option<Vec<u8>>, offered: &Option<Vec<u8>>) -> Check {
    let alen = asked.as_ref().map_or(0, Vec::len);
    let olen = offered.as_ref().map_or(0, Vec::len);
    if alen != 0 && alen != olen {
        return Err(Mismatch::new(
            field,
            format!("{alen} bytes"),
            format!("{olen} bytes"),
        ));
    }
    Ok(())
}

fn check_domain_attr(t: &Info, h: &Info, api: Version) -> Check {
    let (td, hd) = (&t.domain_attr, &h.domain_attr);
    if let (Some(hn), Some(tn)) = (hd.name.as_deref(), td.name.as_deref()) {
        if hn != tn {
            return Err(Mismatch::new("domain_attr.name", hn, tn));
        }
    }
    if threading_level(hd.threading) < threading_level(td.threading) {
        return Err(Mismatch::new(
            "domain_attr.threading",
            hd.threading.name(),
            td.threading.name(),
        ));
    }
    for (field, hp, tp) in [
        (
            "domain_attr.control_progress",
            hd.control_progress,
            td.control_progress,
        ),
        (
            "domain_attr.data_progress",
            hd.data_progress,
            td.data_progress,
        ),
    ] {
        if progress_level(hp) < progress_level(tp) {
            return Err(Mismatch::new(field, hp.name(), tp.name()));
        }
    }
    if rm_level(hd.resource_mgmt) < rm_level(td.resource_mgmt) {
        return Err(Mismatch::new(
            "domain_attr.resource_mgmt",
            hd.resource_mgmt.name(),
            td.resource_mgmt.name(),
        ));
    }
    if hd.av_type != AvType::Unspec && td.av_type != AvType::Unspec && hd.av_type != td.av_type {
        return Err(Mismatch::new(
            "domain_attr.av_type",
            hd.av_type.name(),
            td.av_type.name(),
        ));
    }
    at_most("domain_attr.cq_data_size", hd.cq_data_size, td.cq_data_size)?;
    check_mr_mode(t, h, api)?;
    at_most("domain_attr.cntr_cnt", hd.cntr_cnt, td.cntr_cnt)?;
    at_most("domain_attr.mr_iov_limit", hd.mr_iov_limit, td.mr_iov_limit)?;
    subset("domain_attr.caps", hd.caps, td.caps)?;
    mode_covers("domain_attr.mode", hd.mode, td.mode)?;
    at_most("domain_attr.max_err_data", hd.max_err_data, td.max_err_data)?;
    at_most("domain_attr.mr_cnt", hd.mr_cnt, td.mr_cnt)?;
    at_most_if_limited("domain_attr.cq_cnt", hd.cq_cnt, td.cq_cnt)?;
    at_most_if_limited("domain_attr.ep_cnt", hd.ep_cnt, td.ep_cnt)?;
    at_most_if_limited("domain_attr.tx_ctx_cnt", hd.tx_ctx_cnt, td.tx_ctx_cnt)?;
    at_most_if_limited("domain_attr.rx_ctx_cnt", hd.rx_ctx_cnt, td.rx_ctx_cnt)?;
    check_auth_key("domain_attr.auth_key", &hd.auth_key, &td.auth_key)?;
    Ok(())
}

/// Memory-registration mode (reference §4.3 item 7).
///
/// - Before API 1.5 the hint may only be `UNSPEC` (the template must accept BASIC or
///   SCALABLE), `BASIC` or `SCALABLE` (the template must list that bit).
/// - From 1.5, `BASIC` or `SCALABLE` in the hint must appear alone and be listed by the
///   template.
/// - Otherwise the template's bits are trimmed to those the hint's caps need
///   ([`mr_mode_for_caps`]) and a non-zero hint must contain every remaining bit
///   (`FI_MR_LOCAL` is also satisfied by `FI_LOCAL_MR` in the hint's mode). A zero hint
///   (`FI_MR_UNSPEC`) passes.
fn check_mr_mode(t: &Info, h: &Info, api: Version) -> Check {
    const FIELD: &str = "domain_attr.mr_mode";
    let prov = t.domain_attr.mr_mode;
    let user = h.domain_attr.mr_mode;
    if api < MR_BITS_VERSION {
        let ok = if user.is_empty() {
            prov.intersects(MR_LEGACY)
        } else if user == MrMode::BASIC || user == MrMode::SCALABLE {
            prov.contains(user)
        } else {
            false
        };
        return if ok {
            Ok(())
        } else {
            Err(Mismatch::new(FIELD, user, prov))
        };
    }
    if user.intersects(MR_LEGACY) {
        if (user != MrMode::BASIC && user != MrMode::SCALABLE) || !prov.contains(user) {
            return Err(Mismatch::new(FIELD, user, prov));
        }
        return Ok(());
    }
    let mut need = mr_mode_for_caps(prov, h.caps);
    if h.mode.contains(Mode::LOCAL_MR) {
        need -= MrMode::LOCAL;
    }
    if !user.is_empty() && !user.contains(need) {
        return Err(Mismatch::new(FIELD, user, need));
    }
    Ok(())
}

fn ctx_text(n: usize) -> String {
    if n == SHARED_CONTEXT {
        "FI_SHARED_CONTEXT".to_string()
    } else {
        n.to_string()
    }
}

/// Context counts: `FI_SHARED_CONTEXT` needs shared contexts in the template; a number
/// must fit the template's per-endpoint maximum (`max_ep_*_ctx`, else its own count,
/// else 1); a template that demands shared contexts needs a hint that asks for them.
fn check_ctx_cnt(
    field: &str,
    asked: usize,
    t_cnt: usize,
    t_max: usize,
    t_max_shared: usize,
) -> Check {
    if t_cnt == SHARED_CONTEXT && asked != SHARED_CONTEXT {
        return Err(Mismatch::new(
            field,
            ctx_text(asked),
            "FI_SHARED_CONTEXT (required)",
        ));
    }
    if asked == SHARED_CONTEXT {
        if t_max_shared == 0 {
            return Err(Mismatch::new(
                field,
                "FI_SHARED_CONTEXT",
                "no shared contexts",
            ));
        }
        return Ok(());
    }
    let max = if t_max != 0 {
        t_max
    } else if t_cnt != 0 {
        t_cnt
    } else {
        1
    };
    at_most(field, asked, max)
}

/// Index of the highest set bit plus one (0 for 0): the width of a tag format.
fn tag_width(format: u64) -> u32 {
    64 - format.leading_zeros()
}

fn check_ep_attr(t: &Info, h: &Info) -> Check {
    let (te, he) = (&t.ep_attr, &h.ep_attr);
    if he.protocol != Protocol::UNSPEC && he.protocol != te.protocol {
        return Err(Mismatch::new(
            "ep_attr.protocol",
            he.protocol.name(),
            te.protocol.name(),
        ));
    }
    if he.protocol_version > te.protocol_version {
        return Err(Mismatch::new(
            "ep_attr.protocol_version",
            he.protocol_version,
            te.protocol_version,
        ));
    }
    at_most("ep_attr.max_msg_size", he.max_msg_size, te.max_msg_size)?;
    // FI_MSG_PREFIX: the template needs msg_prefix_size bytes in front of every message
    // buffer. A non-zero hint is the prefix space the application can give, so it must
    // be at least what the template needs. Without the mode the prefix is not used and
    // any hint passes.
    let t_modes = t.mode | t.tx_attr.mode | t.rx_attr.mode;
    if t_modes.contains(Mode::MSG_PREFIX)
        && he.msg_prefix_size != 0
        && he.msg_prefix_size < te.msg_prefix_size
    {
        return Err(Mismatch::new(
            "ep_attr.msg_prefix_size",
            he.msg_prefix_size,
            te.msg_prefix_size,
        ));
    }
    let td = &t.domain_attr;
    check_ctx_cnt(
        "ep_attr.tx_ctx_cnt",
        he.tx_ctx_cnt,
        te.tx_ctx_cnt,
        td.max_ep_tx_ctx,
        td.max_ep_stx_ctx,
    )?;
    check_ctx_cnt(
        "ep_attr.rx_ctx_cnt",
        he.rx_ctx_cnt,
        te.rx_ctx_cnt,
        td.max_ep_rx_ctx,
        td.max_ep_srx_ctx,
    )?;
    let caps = if h.caps.is_empty() { t.caps } else { h.caps };
    if caps.intersects(Caps::RMA | Caps::ATOMIC) {
        at_most(
            "ep_attr.max_order_raw_size",
            he.max_order_raw_size,
            te.max_order_raw_size,
        )?;
        at_most(
            "ep_attr.max_order_war_size",
            he.max_order_war_size,
            te.max_order_war_size,
        )?;
        at_most(
            "ep_attr.max_order_waw_size",
            he.max_order_waw_size,
            te.max_order_waw_size,
        )?;
    }
    if caps.contains(Caps::TAGGED)
        && he.mem_tag_format != 0
        && tag_width(he.mem_tag_format) > tag_width(te.mem_tag_format)
    {
        return Err(Mismatch::new(
            "ep_attr.mem_tag_format",
            format!("{:#x}", he.mem_tag_format),
            format!("{:#x}", te.mem_tag_format),
        ));
    }
    check_auth_key("ep_attr.auth_key", &he.auth_key, &te.auth_key)?;
    Ok(())
}

/// The checks `tx_attr` and `rx_attr` share, for attribute `$side` of template `$t`
/// and hints `$h` (statements returning early on the first mismatch), in this order:
/// caps (less the `$ignored` ones of the hint), mode (the hint's, or its info-level mode
/// when empty), op_flags, msg_order, comp_order. Completion order: a hint must be 0
/// (`FI_ORDER_NONE`) or ⊆ the template's.
macro_rules! check_side_flags {
    ($side:ident, $ignored:expr, $t:ident, $h:ident, $api:ident) => {
        let (ts, hs) = (&$t.$side, &$h.$side);
        subset(
            concat!(stringify!($side), ".caps"),
            hs.caps - $ignored,
            with_implied_modifiers(ts.caps),
        )?;
        let supported = if hs.mode.is_empty() { $h.mode } else { hs.mode };
        mode_covers(
            concat!(stringify!($side), ".mode"),
            supported,
            required_mode(ts.mode, $t, $h, $api, false),
        )?;
        subset(
            concat!(stringify!($side), ".op_flags"),
            hs.op_flags,
            ts.op_flags,
        )?;
        subset(
            concat!(stringify!($side), ".msg_order"),
            hs.msg_order,
            ts.msg_order,
        )?;
        subset(
            concat!(stringify!($side), ".comp_order"),
            hs.comp_order,
            ts.comp_order,
        )?;
    };
}

fn check_rx_attr(t: &Info, h: &Info, api: Version) -> Check {
    check_side_flags!(rx_attr, RX_IGNORED_CAPS, t, h, api);
    let (tr, hr): (&RxAttr, &RxAttr) = (&t.rx_attr, &h.rx_attr);
    // Deprecated field: templates carry 0, so any non-zero hint fails.
    at_most(
        "rx_attr.total_buffered_recv",
        hr.total_buffered_recv,
        tr.total_buffered_recv,
    )?;
    at_most("rx_attr.size", hr.size, tr.size)?;
    at_most("rx_attr.iov_limit", hr.iov_limit, tr.iov_limit)?;
    Ok(())
}

fn check_tx_attr(t: &Info, h: &Info, api: Version) -> Check {
    check_side_flags!(tx_attr, TX_IGNORED_CAPS, t, h, api);
    let (tt, ht): (&TxAttr, &TxAttr) = (&t.tx_attr, &h.tx_attr);
    at_most("tx_attr.inject_size", ht.inject_size, tt.inject_size)?;
    at_most("tx_attr.size", ht.size, tt.size)?;
    at_most("tx_attr.iov_limit", ht.iov_limit, tt.iov_limit)?;
    at_most("tx_attr.rma_iov_limit", ht.rma_iov_limit, tt.rma_iov_limit)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order() {
        let t: Vec<u8> = [
            Threading::Safe,
            Threading::Fid,
            Threading::Endpoint,
            Threading::Completion,
            Threading::Domain,
            Threading::Unspec,
        ]
        .into_iter()
        .map(threading_level)
        .collect();
        assert_eq!(t, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            [Progress::Auto, Progress::Manual, Progress::Unspec].map(progress_level),
            [1, 2, 3]
        );
        assert_eq!(
            [
                ResourceMgmt::Enabled,
                ResourceMgmt::Disabled,
                ResourceMgmt::Unspec
            ]
            .map(rm_level),
            [1, 2, 3]
        );
    }

    #[test]
    fn addr_format_table() {
        use AddrFormat as F;
        // (offered, asked, accepted)
        let cases = [
            (F::UNSPEC, F::STR, true),
            (F::STR, F::UNSPEC, true),
            (F::SOCKADDR, F::SOCKADDR_IN, true),
            (F::SOCKADDR, F::SOCKADDR_IN6, true),
            (F::SOCKADDR, F::SOCKADDR_IB, true),
            (F::SOCKADDR_IN, F::SOCKADDR, true),
            (F::SOCKADDR_IN, F::SOCKADDR_IN, true),
            (F::SOCKADDR_IN6, F::SOCKADDR, true),
            (F::SOCKADDR_IB, F::SOCKADDR, true),
            (F::STR, F::STR, true),
            (F::PSMX2, F::PSMX2, true),
            (F::SOCKADDR_IN, F::SOCKADDR_IN6, false),
            (F::SOCKADDR_IN6, F::SOCKADDR_IN, false),
            (F::SOCKADDR_IN, F::SOCKADDR_IB, false),
            (F::SOCKADDR, F::STR, false),
            (F::STR, F::SOCKADDR, false),
            (F::PSMX2, F::PSMX3, false),
        ];
        for (offered, asked, accepted) in cases {
            assert_eq!(
                addr_format_accepts(offered, asked),
                accepted,
                "{offered} accepting {asked}"
            );
        }
    }

    #[test]
    fn prov_name_components() {
        let cases = [
            ("tcp", "tcp", true),
            ("tcp", "TCP", true),
            ("tcp", "tcp;ofi_rxm", true),
            ("ofi_rxm", "tcp;ofi_rxm", true),
            ("tcp;ofi_rxm", "tcp", true),
            ("tcp;ofi_rxm", "ofi_rxm", true),
            ("tcp;ofi_rxm", "tcp;ofi_rxm", true),
            ("tcp", "tcp;^ofi_rxm", true),
            ("tcp", "^udp", true),
            ("tcp", " tcp ; ", true),
            ("tcp", "udp", false),
            ("tcp", "xtcpx", false),
            ("tcp", "tc", false),
            ("tcp", "^tcp", false),
            ("tcp;ofi_rxm", "tcp;^ofi_rxm", false),
            ("tcp;ofi_rxm", "verbs;ofi_rxm", false),
            ("", "tcp", false),
        ];
        for (t, h, want) in cases {
            assert_eq!(prov_name_matches(t, h), want, "template {t:?} hint {h:?}");
        }
    }

    #[test]
    fn mr_trimming() {
        let all = flag_set!(MrMode: LOCAL, VIRT_ADDR, PROV_KEY, ALLOCATED, HMEM, BASIC);
        assert_eq!(
            mr_mode_for_caps(all, Caps::MSG),
            MrMode::LOCAL | MrMode::ALLOCATED
        );
        assert_eq!(
            mr_mode_for_caps(all, Caps::RMA),
            flag_set!(MrMode: LOCAL, VIRT_ADDR, PROV_KEY, ALLOCATED)
        );
        assert_eq!(
            mr_mode_for_caps(all, Caps::RMA | Caps::READ),
            MrMode::LOCAL | MrMode::ALLOCATED
        );
        assert_eq!(
            mr_mode_for_caps(all, Caps::RMA | Caps::REMOTE_READ | Caps::HMEM),
            all - MrMode::BASIC
        );
        assert_eq!(
            with_implied_modifiers(Caps::MSG),
            Caps::MSG | Caps::SEND | Caps::RECV
        );
        assert_eq!(
            with_implied_modifiers(Caps::MSG | Caps::SEND),
            Caps::MSG | Caps::SEND
        );
        assert_eq!(
            with_implied_modifiers(Caps::ATOMIC),
            Caps::ATOMIC | RMA_MODIFIERS
        );
    }
}
