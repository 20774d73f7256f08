//! getinfo matching, written once for every provider (DESIGN §4, reference §4).
//!
//! A provider describes what it can do as a list of template [`Info`]s. For one getinfo
//! call the framework first runs [`validate_request`] (errors that concern the call, not a
//! provider), then asks each provider, which typically answers with [`match_templates`]:
//! every template is checked against the hints ([`check_info`]), each kept one is shaped
//! for the application ([`alter_info`]), its addresses are filled from `node` / `service`
//! by an [`AddrResolver`], and `fabric_attr.prov_name` / `prov_version` / `api_version`
//! are stamped. Every template gets a [`Verdict`] saying why it was kept or rejected, so
//! getinfo can explain itself (`fi_info --explain`).
//!
//! Submodules: `check` (hint checks), `shape` (result shaping), `resolve` (addresses),
//! `explain` (verdicts).
//!
//! Invariants: a kept template yields exactly one info, in template order; a rejected
//! template yields none; `verdicts.len() == templates.len()` (or 1 for
//! `FI_PROV_ATTR_ONLY`). Nothing here panics; bad requests are errors with the C
//! library's codes.

mod check;
mod explain;
mod resolve;
mod shape;

pub use check::{
    addr_format_accepts, check_cap_dependencies, check_info, progress_level, prov_name_matches,
    rm_level, threading_level, CapDependency, CAP_DEPENDENCIES,
};
pub use explain::{Mismatch, Verdict, VerdictKind};
pub use resolve::{AddrResolver, IpResolver, NoResolver, ResolvedAddrs};
pub use shape::alter_info;

use crate::addr::Address;
use crate::attr::Info;
use crate::enums::AddrFormat;
use crate::error::{Errno, Error, Result};
use crate::flags::{Caps, GetinfoFlags, OpFlags};
use crate::version::{Version, API_VERSION};

/// One getinfo call: the arguments of C's `fi_getinfo(version, node, service, flags,
/// hints)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetinfoRequest {
    /// API version the application was written for.
    pub version: Version,
    /// Node to resolve: a host name, numeric address or `FI_ADDR_STR` string.
    pub node: Option<String>,
    /// Service: a port number or service name.
    pub service: Option<String>,
    /// `FI_NUMERICHOST`, `FI_SOURCE`, `FI_PROV_ATTR_ONLY`, `FI_RESCAN`.
    pub flags: GetinfoFlags,
    /// The application's hints; `None` = no restrictions.
    pub hints: Option<Info>,
}

impl GetinfoRequest {
    /// A request for `version` with no node, service, flags or hints.
    pub fn new(version: Version) -> GetinfoRequest {
        GetinfoRequest {
            version,
            ..GetinfoRequest::default()
        }
    }
}

/// What one provider answered.
#[derive(Clone, Debug, Default)]
pub struct GetinfoOutcome {
    /// The matching, shaped infos, in template order.
    pub infos: Vec<Info>,
    /// One verdict per template.
    pub verdicts: Vec<Verdict>,
    /// A hard error for this provider (e.g. `FI_EINVAL` for `FI_SOURCE` without node or
    /// service, or a resolver failure other than `FI_ENODATA`); `None` otherwise. With an
    /// error `infos` is empty and every verdict is `Rejected`.
    pub error: Option<Error>,
}

/// The checks the framework makes once, before asking any provider:
///
/// - `version` newer than [`API_VERSION`] → `FI_ENOSYS` (newer seed);
/// - flags outside [`GetinfoFlags::ALL`] → `FI_EBADFLAGS`;
/// - `FI_SOURCE` with neither node nor service → `FI_EINVAL` (seed: "either the node
///   and/or service parameter must be non-NULL"; C checks it per provider, here once);
/// - node given as an `FI_ADDR_STR` string (`fmt://…`) together with a service →
///   `FI_EINVAL` (seed: "the service parameter must be NULL");
/// - hint caps (info, tx, rx or domain) with bits outside every defined capability →
///   `FI_EBADFLAGS`; tx/rx `op_flags` with unknown bits → `FI_EBADFLAGS`;
/// - a hint `src_addr` / `dest_addr` whose format disagrees with the hints' `addr_format`
///   → `FI_EINVAL`.
pub fn validate_request(req: &GetinfoRequest) -> Result<()> {
    if req.version > API_VERSION {
        return Err(Error::new(
            Errno::ENOSYS,
            format!(
                "requested API version {} is newer than this library's {API_VERSION}",
                req.version
            ),
        ));
    }
    let unknown = req.flags.bits() & !GetinfoFlags::ALL.bits();
    if unknown != 0 {
        return Err(Error::new(
            Errno::EBADFLAGS,
            format!("unknown getinfo flag bits {unknown:#x}"),
        ));
    }
    if req.flags.contains(GetinfoFlags::SOURCE) && req.node.is_none() && req.service.is_none() {
        return Err(Error::new(
            Errno::EINVAL,
            "FI_SOURCE needs a node or a service",
        ));
    }
    if let (Some(node), Some(service)) = (&req.node, &req.service) {
        if node.contains("://") {
            return Err(Error::new(
                Errno::EINVAL,
                format!("node {node:?} is an FI_ADDR_STR address, so service ({service:?}) must be absent"),
            ));
        }
    }
    let Some(h) = &req.hints else {
        return Ok(());
    };
    // Every capability and operation-flag field of the hints: named bits only.
    let caps = |c: Caps| (c.bits(), Caps::all().bits());
    let op_flags = |f: OpFlags| (f.bits(), OpFlags::all().bits());
    for (field, (bits, known)) in [
        ("caps", caps(h.caps)),
        ("tx_attr.caps", caps(h.tx_attr.caps)),
        ("rx_attr.caps", caps(h.rx_attr.caps)),
        ("domain_attr.caps", caps(h.domain_attr.caps)),
        ("tx_attr.op_flags", op_flags(h.tx_attr.op_flags)),
        ("rx_attr.op_flags", op_flags(h.rx_attr.op_flags)),
    ] {
        let unknown = bits & !known;
        if unknown != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("hints {field} has unknown bits {unknown:#x}"),
            ));
        }
    }
    if h.addr_format != AddrFormat::UNSPEC {
        for (field, addr) in [("src_addr", &h.src_addr), ("dest_addr", &h.dest_addr)] {
            if let Some(a) = addr {
                if !addr_agrees(h.addr_format, a) {
                    return Err(Error::new(
                        Errno::EINVAL,
                        format!(
                            "hints {field} {a} is not in the hints' addr_format {}",
                            h.addr_format.name()
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Is address `a` of format `fmt`? `FI_SOCKADDR` takes IPv4 and IPv6 (and a raw
/// `sockaddr_ib`); otherwise the address's own format must be `fmt`.
fn addr_agrees(fmt: AddrFormat, a: &Address) -> bool {
    let af = a.format();
    if fmt == AddrFormat::SOCKADDR {
        af.is_socket()
    } else {
        af == fmt
    }
}

/// The name a result of provider `prov` carries: the template's own name when it already
/// names this provider (alone or as a layered component), `"<template's>;<prov>"` when
/// the template carries another provider's name (a utility answering with its core's),
/// else `prov`.
fn stamped_name(template: &Info, prov: &str) -> String {
    match template.fabric_attr.prov_name.as_deref().map(str::trim) {
        None | Some("") => prov.to_string(),
        Some(t) if t.split(';').any(|c| c.trim().eq_ignore_ascii_case(prov)) => t.to_string(),
        Some(t) => format!("{t};{prov}"),
    }
}

/// Matches provider `prov_name` (version `prov_version`) against one request: each of
/// `templates` is checked against the hints ([`check_info`]; no hints = all pass), kept
/// ones are shaped ([`alter_info`]) and get addresses:
///
/// - hints' `src_addr` is copied unless `FI_SOURCE` is set; hints' `dest_addr` is copied
///   when there is no node/service or `FI_SOURCE` is set (seed: the fields hints may
///   give);
/// - with a node or service, `resolve` fills the source (`FI_SOURCE`) or destination; an
///   `FI_ENODATA` from it rejects that template, any other error fails the provider
///   ([`GetinfoOutcome::error`], no infos);
/// - a generic `FI_SOCKADDR` / `FI_FORMAT_UNSPEC` result takes the format of the
///   addresses found (`_IN` / `_IN6`).
///
/// `fabric_attr.prov_name`, `prov_version` and `api_version` (= `req.version`) are
/// stamped on every result. The name is `prov_name`, unless the template already carries
/// a name: one naming this provider (alone or as a `;` component) is kept, another
/// provider's name `X` (a utility answering with its core's) becomes `X;prov_name`.
///
/// With `req.flags` exactly `FI_PROV_ATTR_ONLY` the answer is one default info carrying
/// only the provider's name and version (seed), whatever the templates. `FI_SOURCE`
/// without node or service is an `FI_EINVAL` error here too.
pub fn match_templates(
    prov_name: &str,
    prov_version: Version,
    templates: &[Info],
    req: &GetinfoRequest,
    resolve: &dyn AddrResolver,
) -> GetinfoOutcome {
    let mut out = GetinfoOutcome::default();
    if req.flags == GetinfoFlags::PROV_ATTR_ONLY {
        let mut info = Info::new();
        info.fabric_attr.prov_name = Some(
            templates
                .first()
                .map_or_else(|| prov_name.to_string(), |t| stamped_name(t, prov_name)),
        );
        info.fabric_attr.prov_version = prov_version;
        info.fabric_attr.api_version = req.version;
        out.infos.push(info);
        out.verdicts.push(Verdict::kept(prov_name, 0));
        return out;
    }

    let source = req.flags.contains(GetinfoFlags::SOURCE);
    let node = req.node.as_deref();
    let service = req.service.as_deref();
    let have_ns = node.is_some() || service.is_some();
    if source && !have_ns {
        let e = Error::new(Errno::EINVAL, "FI_SOURCE needs a node or a service");
        for i in 0..templates.len() {
            out.verdicts.push(Verdict::rejected(
                prov_name,
                i,
                Mismatch::new("flags", "FI_SOURCE", "needs a node or a service"),
            ));
        }
        out.error = Some(e);
        return out;
    }

    let hints = req.hints.as_ref();
    for (i, template) in templates.iter().enumerate() {
        if out.error.is_some() {
            out.verdicts.push(Verdict::rejected(
                prov_name,
                i,
                Mismatch::new(
                    "getinfo",
                    "(not checked)",
                    "provider failed on an earlier template",
                ),
            ));
            continue;
        }
        let mut stamped = template.clone();
        stamped.fabric_attr.prov_name = Some(stamped_name(template, prov_name));
        stamped.fabric_attr.prov_version = prov_version;
        if let Some(h) = hints {
            if let Err(m) = check_info(&stamped, h, req.version) {
                out.verdicts.push(Verdict::rejected(prov_name, i, m));
                continue;
            }
        }
        let mut info = alter_info(&stamped, hints, req.version);
        if let Some(h) = hints {
            if !source && h.src_addr.is_some() {
                info.src_addr.clone_from(&h.src_addr);
            }
            if (!have_ns || source) && h.dest_addr.is_some() {
                info.dest_addr.clone_from(&h.dest_addr);
            }
        }
        if have_ns {
            match resolve.resolve(&info, req) {
                Ok(r) => {
                    if r.src_addr.is_some() {
                        info.src_addr = r.src_addr;
                    }
                    if r.dest_addr.is_some() {
                        info.dest_addr = r.dest_addr;
                    }
                }
                Err(e) if e.code() == Errno::ENODATA => {
                    let (field, asked) = match (node, service) {
                        (Some(n), Some(s)) => ("node", format!("{n}:{s}")),
                        (Some(n), None) => ("node", n.to_string()),
                        (None, s) => ("service", s.unwrap_or_default().to_string()),
                    };
                    out.verdicts.push(Verdict::rejected(
                        prov_name,
                        i,
                        Mismatch::new(field, asked, format!("no address: {}", e.message())),
                    ));
                    continue;
                }
                Err(e) => {
                    out.verdicts.push(Verdict::rejected(
                        prov_name,
                        i,
                        Mismatch::new("getinfo", "address resolution", e.to_string()),
                    ));
                    out.error = Some(e);
                    continue;
                }
            }
        }
        if matches!(info.addr_format, AddrFormat::SOCKADDR | AddrFormat::UNSPEC) {
            let found = info
                .dest_addr
                .as_ref()
                .or(info.src_addr.as_ref())
                .map(Address::format);
            if let Some(f @ (AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR_IN6)) = found {
                info.addr_format = f;
            }
        }
        info.fabric_attr.api_version = req.version;
        out.infos.push(info);
        out.verdicts.push(Verdict::kept(prov_name, i));
    }
    if let Some(e) = &out.error {
        // The provider failed: nothing it matched is returned, so no verdict says "kept".
        out.infos.clear();
        for v in out
            .verdicts
            .iter_mut()
            .filter(|v| v.kind == VerdictKind::Kept)
        {
            *v = Verdict::rejected(
                prov_name,
                v.template,
                Mismatch::new("getinfo", "(matched)", format!("provider failed: {e}")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests_deps;
#[cfg(test)]
mod tests_table;
