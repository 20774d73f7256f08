//! The getinfo of a utility provider layered over core providers (rxm over MSG, rxd over
//! DGRAM): ask the host's core providers with the request's node, service and flags,
//! then match one template per usable core answer against the application's hints,
//! keeping the addresses the core resolved. The utility supplies how its template
//! looks over one core info; this module does the rest, the same way for every utility.
//!
//! Invariants: a hint for another endpoint type than the utility offers is rejected
//! with a verdict naming `ep_attr.type`; `FI_PROV_ATTR_ONLY` answers without asking the
//! cores; when no core answers, the verdict says what was asked for and why nothing
//! came back. Nothing here panics.

use std::sync::Arc;

use ofi_core::attr::Info;
use ofi_core::enums::{EpType, Progress};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{Caps, GetinfoFlags};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest, NoResolver};
use ofi_core::provider::Host;
use ofi_core::version::{Version, API_VERSION};

use crate::progress::{ProgressEngine, ProgressMode};

/// What a utility provider layers over.
#[derive(Clone, Copy, Debug)]
pub struct Layering {
    /// The utility's name (`ofi_rxm`).
    pub name: &'static str,
    /// The utility's version.
    pub version: Version,
    /// The endpoint type it offers.
    pub offers: EpType,
    /// The core endpoint type it uses.
    pub core_type: EpType,
    /// Capabilities a core answer must have to be used.
    pub core_caps: Caps,
}

/// Data progress for a utility's domain: auto (a thread) when the application asks for
/// auto data or control progress, else manual.
pub fn progress_for(hints: Option<&Info>) -> Progress {
    match hints.map(|h| (h.domain_attr.data_progress, h.domain_attr.control_progress)) {
        Some((Progress::Auto, _) | (_, Progress::Auto)) => Progress::Auto,
        _ => Progress::Manual,
    }
}

/// The core side of a utility provider's fabric: the core info an info of the utility
/// was made from, and the core's fabric, opened through the host.
#[derive(Debug)]
pub struct CoreFabric {
    /// The core's info.
    pub info: Info,
    /// The core's fabric (shared with the domains, for their passive endpoints and EQs).
    pub fabric: Arc<ofi_core::fabric::Fabric>,
}

impl CoreFabric {
    /// What a utility domain for `info` runs on: its progress engine (one engine drives
    /// data and connections, auto if either is asked to be) and the core's domain,
    /// opened with manual data progress (the utility drives it) from the core info
    /// returned alongside.
    pub fn domain(&self, info: &Info) -> Result<(ProgressEngine, ofi_core::domain::Domain, Info)> {
        let d = &info.domain_attr;
        let p = if d.data_progress == Progress::Auto || d.control_progress == Progress::Auto {
            Progress::Auto
        } else {
            d.data_progress
        };
        let engine = ProgressEngine::new(ProgressMode::from(p))?;
        let mut ci = self.info.clone();
        ci.domain_attr.data_progress = Progress::Manual;
        let core = self.fabric.domain(&ci)?;
        Ok((engine, core, ci))
    }
}

impl Layering {
    /// Open the core fabric beneath a utility `info`: check the endpoint type, find the
    /// core info again ([`Layering::core_info_for`] with `core_hints`) and open its
    /// fabric through the host.
    ///
    /// # Errors
    /// `FI_EINVAL` for another endpoint type; `FI_ENODATA` when the core is gone; the
    /// core's fabric-open errors.
    pub fn open_core(&self, host: &Host, info: &Info, core_hints: Info) -> Result<CoreFabric> {
        self.check_ep_type(info)?;
        let core_info = self.core_info_for(host, info, core_hints)?;
        let fabric = Arc::new(host.open_fabric(&core_info)?);
        Ok(CoreFabric {
            info: core_info,
            fabric,
        })
    }

    /// `FI_EINVAL` unless `info` asks for the endpoint type the utility offers (or
    /// leaves it open).
    pub fn check_ep_type(&self, info: &Info) -> Result<()> {
        let t = info.ep_attr.ep_type;
        if t != self.offers && t != EpType::Unspec {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{}: {t} endpoints are not supported (only {})",
                    self.name, self.offers
                ),
            ));
        }
        Ok(())
    }

    /// The core info a utility `info` was made from, asked again with `core_hints`
    /// (addresses and progress cleared): the first answer of the core endpoint type in
    /// `info`'s address format. `FI_ENODATA` when no core matches any more.
    pub fn core_info_for(&self, host: &Host, info: &Info, mut core_hints: Info) -> Result<Info> {
        core_hints.src_addr = None;
        core_hints.dest_addr = None;
        core_hints.domain_attr.data_progress = Progress::Unspec;
        let req = GetinfoRequest {
            hints: Some(core_hints),
            ..GetinfoRequest::new(API_VERSION)
        };
        let out = host.getinfo_core(&req);
        out.infos
            .into_iter()
            .find(|i| i.ep_type() == self.core_type && i.addr_format == info.addr_format)
            .ok_or_else(|| {
                Error::new(
                    Errno::ENODATA,
                    format!(
                        "{}: no {} core provider for '{}'{}",
                        self.name,
                        self.core_type,
                        info.prov_name(),
                        out.error.map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                )
            })
    }

    /// The utility's getinfo: `core_hints` is what to ask the cores; `template` builds
    /// the utility's info over one usable core answer, with the data progress of
    /// [`progress_for`].
    pub fn getinfo(
        &self,
        host: &Host,
        req: &GetinfoRequest,
        core_hints: Info,
        template: impl Fn(&Info, Progress) -> Info,
    ) -> GetinfoOutcome {
        let name = self.name;
        let hints = req.hints.as_ref();
        if let Some(h) = hints {
            if !matches!(h.ep_attr.ep_type, t if t == self.offers || t == EpType::Unspec) {
                return GetinfoOutcome {
                    infos: Vec::new(),
                    verdicts: vec![getinfo::Verdict::rejected(
                        name,
                        0,
                        getinfo::Mismatch::new(
                            "ep_attr.type",
                            h.ep_attr.ep_type.to_string(),
                            self.offers.to_string(),
                        ),
                    )],
                    error: None,
                };
            }
        }
        if req.flags == GetinfoFlags::PROV_ATTR_ONLY {
            return getinfo::match_templates(name, self.version, &[], req, &NoResolver);
        }
        let core_req = GetinfoRequest {
            version: req.version,
            node: req.node.clone(),
            service: req.service.clone(),
            flags: req.flags,
            hints: Some(core_hints),
        };
        let core = host.getinfo_core(&core_req);
        let mut out = GetinfoOutcome::default();
        if core.infos.is_empty() {
            out.verdicts.push(getinfo::Verdict::rejected(
                name,
                0,
                getinfo::Mismatch::new(
                    "core provider",
                    self.core_type.to_string(),
                    core.error
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| format!("no {} core matched", self.core_type)),
                ),
            ));
            return out;
        }
        let progress = progress_for(hints);
        // The utility's own matching: the core already resolved node and service.
        let mut local = req.clone();
        local.node = None;
        local.service = None;
        local.flags -= GetinfoFlags::SOURCE;
        if let Some(h) = local.hints.as_mut() {
            h.src_addr = None;
            h.dest_addr = None;
        }
        for (i, c) in core.infos.iter().enumerate() {
            if c.ep_attr.ep_type != self.core_type || !c.caps.contains(self.core_caps) {
                continue;
            }
            let t = template(c, progress);
            let o = getinfo::match_templates(name, self.version, &[t], &local, &NoResolver);
            for mut info in o.infos {
                info.src_addr.clone_from(&c.src_addr);
                info.dest_addr.clone_from(&c.dest_addr);
                out.infos.push(info);
            }
            for mut v in o.verdicts {
                v.template = i;
                out.verdicts.push(v);
            }
            if out.error.is_none() {
                out.error = o.error;
            }
        }
        if !out.infos.is_empty() {
            out.error = None;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_progress_only_when_asked() {
        assert_eq!(progress_for(None), Progress::Manual);
        let mut h = Info::hints();
        assert_eq!(progress_for(Some(&h)), Progress::Manual);
        h.domain_attr.control_progress = Progress::Auto;
        assert_eq!(progress_for(Some(&h)), Progress::Auto);
        h.domain_attr.control_progress = Progress::Manual;
        h.domain_attr.data_progress = Progress::Auto;
        assert_eq!(progress_for(Some(&h)), Progress::Auto);
    }
}
