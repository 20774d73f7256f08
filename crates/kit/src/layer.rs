//! The getinfo of a utility provider layered over core providers (rxm over MSG, rxd over
//! DGRAM): ask the host's core providers with the request's node, service and flags,
//! then match one template per usable core answer against the application's hints,
//! keeping the addresses the core resolved. The utility supplies how its template
//! looks over one core info; this module does the rest, the same way for every utility:
//! the hints for the cores ([`Layering::core_hints`]), the opening of the core fabric
//! and domain ([`CoreFabric`]), the fabric itself ([`LayeredFabric`]), the domain
//! ([`layered_domain!`](crate::layered_domain) over [`UtilityDomainParts`], with what
//! its endpoints share in [`UtilityDomainShared`]) and its plain methods
//! ([`layered_domain_ops!`](crate::layered_domain_ops)), the endpoint checks, the AV
//! ([`open_av`]) and the `Provider` implementation
//! ([`layered_provider!`](crate::layered_provider)).
//!
//! Invariants: a hint for another endpoint type than the utility offers is rejected
//! with a verdict naming `ep_attr.type`; `FI_PROV_ATTR_ONLY` answers without asking the
//! cores; when no core answers, the verdict says what was asked for and why nothing
//! came back. Nothing here panics.

use std::sync::Arc;

use ofi_core::attr::{DomainAttr, Info};
use ofi_core::av::AvAttr;
use ofi_core::enums::{AddrFormat, AvType, EpType, Progress, ResourceMgmt, Threading};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{Caps, GetinfoFlags};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest, NoResolver};
use ofi_core::provider::{DomainOps, FabricOps, Host, Unsupported};
use ofi_core::version::{Version, API_VERSION};

use crate::av::{AvConfig, KitAv, SharedAv};
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

/// The domain attributes a utility's template starts from over the core answer `core`:
/// the core's, thread-safe, with `progress` ([`progress_for`]) for control and data,
/// resource management on and the AV type left open. The utility then sets what its
/// own protocol decides (MR mode, CQ data size, context counts).
pub fn utility_domain_attr(core: &Info, progress: Progress) -> DomainAttr {
    DomainAttr {
        threading: Threading::Safe,
        control_progress: progress,
        data_progress: progress,
        resource_mgmt: ResourceMgmt::Enabled,
        av_type: AvType::Unspec,
        ..core.domain_attr.clone()
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

/// A utility domain's address vector: the kit's AV over the core's address format
/// `core_format` (the utility's addresses are its core endpoints' names), of the
/// domain's type `domain_av_type` (`FI_AV_MAP` when that leaves it open).
///
/// # Errors
/// Those of [`KitAv::open`].
pub fn open_av(
    core_format: AddrFormat,
    domain_av_type: AvType,
    attr: &AvAttr,
    context: usize,
) -> Result<SharedAv> {
    let cfg = AvConfig::new(core_format).with_domain_type(domain_av_type, AvType::Map);
    Ok(SharedAv::new(KitAv::open(attr, context, cfg)?))
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
        crate::fabric::check_ep_type(self.name, info, self.offers)
    }

    /// The checks of the utility's `fi_endpoint`: no `fi_endpoint2` flags
    /// ([`no_endpoint_flags`](crate::fabric::no_endpoint_flags)) and the endpoint type
    /// it offers ([`Layering::check_ep_type`]).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero `flags`; `FI_EINVAL` for another endpoint type.
    pub fn check_endpoint(&self, info: &Info, flags: u64) -> Result<()> {
        crate::fabric::no_endpoint_flags(self.name, flags)?;
        self.check_ep_type(info)
    }

    /// The hint `prov_name` without the utility's own component (for `ofi_rxm`:
    /// `tcp;ofi_rxm` → `tcp`, `ofi_rxm` → none), compared without regard to case.
    pub fn core_prov_name(&self, hint: Option<&str>) -> Option<String> {
        let rest: Vec<&str> = hint?
            .split(';')
            .map(str::trim)
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case(self.name))
            .collect();
        if rest.is_empty() {
            None
        } else {
            Some(rest.join(";"))
        }
    }

    /// The hints to ask the cores with, for the utility's hints `h`: the core endpoint
    /// type and capabilities, and from `h` the address format, the fabric and domain
    /// names, the provider stack without the utility ([`Layering::core_prov_name`]) and
    /// the addresses. A utility adds its own requirements to the result.
    pub fn core_hints(&self, h: Option<&Info>) -> Info {
        let mut m = Info::hints();
        m.ep_attr.ep_type = self.core_type;
        m.caps = self.core_caps;
        if let Some(h) = h {
            m.addr_format = h.addr_format;
            m.fabric_attr.name.clone_from(&h.fabric_attr.name);
            m.domain_attr.name.clone_from(&h.domain_attr.name);
            m.fabric_attr.prov_name = self.core_prov_name(h.fabric_attr.prov_name.as_deref());
            m.src_addr.clone_from(&h.src_addr);
            m.dest_addr.clone_from(&h.dest_addr);
        }
        m
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

/// What a utility domain's endpoints share: the utility's settings, the core's info
/// (manual progress), domain and fabric, and the utility's own part `X`, reached
/// through `Deref` (rxd's MR table, rxm's key counter).
#[derive(Debug)]
pub struct UtilityDomainShared<S, X> {
    /// The utility's parameters.
    pub settings: S,
    /// The core's info (manual progress).
    pub core_info: Info,
    /// The core's domain.
    pub core: ofi_core::domain::Domain,
    /// The core's fabric (for passive endpoints and EQs).
    pub fabric: Arc<ofi_core::fabric::Fabric>,
    /// The utility's own part.
    pub own: X,
}

impl<S, X> std::ops::Deref for UtilityDomainShared<S, X> {
    type Target = X;

    fn deref(&self) -> &X {
        &self.own
    }
}

/// A utility domain as [`LayeredFabric`] opens it: what its endpoints share, the
/// progress engine its CQs, counters and endpoints use, and the domain's AV type. A
/// utility's `Domain` is a newtype over it ([`layered_domain!`](crate::layered_domain)).
#[derive(Debug)]
pub struct UtilityDomainParts<S, X> {
    /// What the endpoints share.
    pub inner: Arc<UtilityDomainShared<S, X>>,
    /// The domain's progress engine (manual or auto, from the info).
    pub engine: Arc<ProgressEngine>,
    /// `domain_attr.av_type` (the AV's type when it leaves it open).
    pub av_type: AvType,
}

/// A utility's domain type, opened over the core fabric by [`LayeredFabric`]; its CQs
/// and counters are the kit's (as [`layered_domain_ops!`](crate::layered_domain_ops)
/// makes them), which the fabric's `fi_trywait` relies on.
pub trait UtilityDomain:
    DomainOps<LayeredFabric<Self>, Cq = crate::cq::KitCq, Cntr = crate::cntr::KitCntr>
    + From<UtilityDomainParts<Self::Settings, Self::Own>>
{
    /// The utility's parameters (resolved at init, copied into each fabric).
    type Settings: Copy + std::fmt::Debug + Send + Sync + 'static;
    /// The utility's own part of what a domain's endpoints share.
    type Own;
    /// The utility's layering (name, endpoint types), for the fabric's checks.
    const LAYERING: Layering;

    /// The utility's own part of a domain for `info`.
    ///
    /// # Errors
    /// Those of making it (e.g. `FI_EINVAL` for an MR mode it cannot serve).
    fn own(info: &Info) -> Result<Self::Own>;
}

/// A utility provider's fabric: the core's fabric, opened through the host; its EQs and
/// wait sets are the kit's ([`kit_fabric_ops!`](crate::kit_fabric_ops)), its domains
/// the utility's `D`.
#[derive(Debug)]
pub struct LayeredFabric<D: UtilityDomain> {
    settings: D::Settings,
    core: CoreFabric,
}

impl<D: UtilityDomain> LayeredFabric<D> {
    /// The fabric over the opened core fabric `core`, with the utility's `settings`.
    pub fn new(settings: D::Settings, core: CoreFabric) -> LayeredFabric<D> {
        LayeredFabric { settings, core }
    }

    /// The core side (the core's info and fabric).
    pub fn core(&self) -> &CoreFabric {
        &self.core
    }
}

impl<D: UtilityDomain> FabricOps for LayeredFabric<D> {
    type Domain = D;
    type PassiveEp = Unsupported;
    crate::kit_fabric_ops!();

    /// The utility's domain over a core domain opened with manual progress
    /// ([`CoreFabric::domain`]).
    fn domain(&self, info: &Info, _context: usize) -> Result<D> {
        D::LAYERING.check_ep_type(info)?;
        let (engine, core, core_info) = self.core.domain(info)?;
        let inner = UtilityDomainShared {
            settings: self.settings,
            core_info,
            core,
            fabric: self.core.fabric.clone(),
            own: D::own(info)?,
        };
        Ok(D::from(UtilityDomainParts {
            inner: Arc::new(inner),
            engine: Arc::new(engine),
            av_type: info.domain_attr.av_type,
        }))
    }
}

/// The `Provider` implementation of a utility provider built on [`Layering`]: no fixed
/// templates, the getinfo of [`Layering::getinfo`], the fabric of the utility's own type
/// over the core fabric of [`Layering::open_core`].
///
/// `layered_provider!(Prov, L, S, F, h)`: `L` is the utility's [`Layering`] (its name
/// and version are the provider's); `Prov` has the fields `settings` (of the `Copy`
/// type `S`, which has `fn from_host(&Host) -> Result<S>`) and `host` (the [`Host`]),
/// and the method `fn template_over(&self, core: &Info, progress: Progress) -> Info`;
/// the fabric type `F` is a [`LayeredFabric`] (of a domain whose settings are `S`); `h` is the
/// `fn(Option<&Info>) -> Info` giving the hints to ask the cores with. It also writes
/// a unit test that the version follows the crate's version
/// (`prov_version_from_crate`).
///
/// ```text
/// ofi_kit::layered_provider!(RxdProvider, LAYERING, Settings, fabric::Fabric, core_hints);
/// ```
#[macro_export]
macro_rules! layered_provider {
    ($prov:ident, $layering:path, $settings:ty, $fabric:ty, $core_hints:path) => {
        $crate::layered_provider!(
            $prov,
            $layering,
            $settings,
            $fabric,
            $core_hints,
            auth_key_max = 0
        );
    };
    ($prov:ident, $layering:path, $settings:ty, $fabric:ty, $core_hints:path,
     auth_key_max = $auth_key_max:expr) => {
        impl $crate::core::provider::Provider for $prov {
            const NAME: &'static str = $layering.name;
            const VERSION: $crate::core::Version = $layering.version;
            const KIND: $crate::core::abi::ProviderKind = $crate::core::abi::ProviderKind::Utility;
            type Fabric = $fabric;

            fn init(host: &$crate::core::provider::Host) -> $crate::core::Result<Self> {
                Ok($prov {
                    settings: <$settings>::from_host(host)?,
                    host: *host,
                })
            }

            /// A utility has no fixed templates: it derives them from the cores' answers
            /// at each getinfo.
            fn info_templates(&self) -> Vec<$crate::core::Info> {
                Vec::new()
            }

            /// Ask the cores (with the request's node, service and flags), then match one
            /// template per usable core answer against the application's hints; addresses
            /// resolved by the core are kept.
            /// With `auth_key_max` > 0, authorization keys of 1 to that many bytes are
            /// taken ([`auth::match_with_auth_key`](crate::auth::match_with_auth_key))
            /// and never passed to the core.
            fn getinfo(
                &self,
                req: &$crate::core::getinfo::GetinfoRequest,
            ) -> $crate::core::getinfo::GetinfoOutcome {
                let layered = |req: &$crate::core::getinfo::GetinfoRequest| {
                    $layering.getinfo(
                        &self.host,
                        req,
                        $core_hints(req.hints.as_ref()),
                        |core, progress| self.template_over(core, progress),
                    )
                };
                match $auth_key_max {
                    0 => layered(req),
                    max => $crate::auth::match_with_auth_key($layering.name, req, max, layered),
                }
            }

            /// Open the core fabric beneath `info` (`Layering::open_core`); the core is
            /// asked without the utility's authorization keys when it takes them.
            fn fabric(&self, info: &$crate::core::Info) -> $crate::core::Result<$fabric> {
                let bare;
                let for_core = match $auth_key_max {
                    0 => info,
                    _ => {
                        bare = $crate::auth::without_keys(info);
                        &bare
                    }
                };
                let core = $layering.open_core(&self.host, info, $core_hints(Some(for_core)))?;
                Ok(<$fabric>::new(self.settings, core))
            }
        }

        $crate::provider_version_test!($prov);
    };
}

/// A utility's domain type:
/// `layered_domain!(#[doc] pub struct Domain(Settings, Own) over LAYERING, Own::new);`
/// declares the newtype over [`UtilityDomainParts`]`<Settings, Own>` that
/// [`LayeredFabric`] makes and [`layered_domain_ops!`](crate::layered_domain_ops)
/// reads, and its [`UtilityDomain`] implementation: the utility's [`Layering`]
/// `LAYERING`, and its own part made by `Own::new(&Info) -> Result<Own>`.
#[macro_export]
macro_rules! layered_domain {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($settings:ty, $own:ty) over $layering:path, $make:path;
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $name($crate::layer::UtilityDomainParts<$settings, $own>);

        impl From<$crate::layer::UtilityDomainParts<$settings, $own>> for $name {
            fn from(parts: $crate::layer::UtilityDomainParts<$settings, $own>) -> $name {
                $name(parts)
            }
        }

        impl $crate::layer::UtilityDomain for $name {
            type Settings = $settings;
            type Own = $own;
            const LAYERING: $crate::layer::Layering = $layering;

            fn own(info: &$crate::core::Info) -> $crate::core::Result<$own> {
                $make(info)
            }
        }
    };
}

/// Inside `impl DomainOps<F> for Domain { … }` of a utility built on [`Layering`]: the
/// kit's CQs and counters on the domain's progress engine
/// ([`kit_domain_cq_cntr_ops!`](crate::kit_domain_cq_cntr_ops)), the endpoint (checked
/// by [`Layering::check_endpoint`]) and the AV of [`open_av`].
///
/// `layered_domain_ops!(L, E)` needs `Domain` to be a newtype over
/// [`UtilityDomainParts`]; the endpoint type `E` has
/// `fn open(inner, info: &Info, context: usize, engine) -> Result<E>`.
#[macro_export]
macro_rules! layered_domain_ops {
    ($layering:path, $endpoint:ty) => {
        type Endpoint = $endpoint;
        $crate::kit_domain_cq_cntr_ops!(|d| d.0.engine.clone());
        type Av = $crate::av::SharedAv;

        fn endpoint(
            &self,
            info: &$crate::core::Info,
            context: usize,
            flags: u64,
        ) -> $crate::core::Result<$endpoint> {
            $layering.check_endpoint(info, flags)?;
            <$endpoint>::open(self.0.inner.clone(), info, context, self.0.engine.clone())
        }

        fn av_open(
            &self,
            attr: &$crate::core::av::AvAttr,
            context: usize,
        ) -> $crate::core::Result<$crate::av::SharedAv> {
            $crate::layer::open_av(
                self.0.inner.core_info.addr_format,
                self.0.av_type,
                attr,
                context,
            )
        }
    };
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

    const RXD_LIKE: Layering = Layering {
        name: "ofi_rxd",
        version: Version::new(1, 0),
        offers: EpType::Rdm,
        core_type: EpType::Dgram,
        core_caps: Caps::MSG,
    };

    #[test]
    fn core_names_drop_the_utility() {
        let l = RXD_LIKE;
        assert_eq!(
            l.core_prov_name(Some("udp;ofi_rxd")).as_deref(),
            Some("udp")
        );
        assert_eq!(
            l.core_prov_name(Some(" udp ; OFI_RXD ")).as_deref(),
            Some("udp")
        );
        assert_eq!(l.core_prov_name(Some("OFI_RXD")), None);
        assert_eq!(l.core_prov_name(Some("udp")).as_deref(), Some("udp"));
        assert_eq!(l.core_prov_name(None), None);
    }

    #[test]
    fn core_hints_carry_names_and_addresses_but_not_the_utility() {
        let mut h = Info::hints();
        h.fabric_attr.prov_name = Some("udp;ofi_rxd".into());
        h.fabric_attr.name = Some("fab".into());
        h.addr_format = AddrFormat::SOCKADDR_IN6;
        let m = RXD_LIKE.core_hints(Some(&h));
        assert_eq!(m.ep_attr.ep_type, EpType::Dgram);
        assert_eq!(m.caps, Caps::MSG);
        assert_eq!(m.addr_format, AddrFormat::SOCKADDR_IN6);
        assert_eq!(m.fabric_attr.name.as_deref(), Some("fab"));
        assert_eq!(m.fabric_attr.prov_name.as_deref(), Some("udp"));
        assert_eq!(RXD_LIKE.core_hints(None).fabric_attr.prov_name, None);
    }

    #[test]
    fn endpoint_checks_name_the_utility() {
        let mut info = Info::new();
        info.ep_attr.ep_type = EpType::Rdm;
        assert!(RXD_LIKE.check_endpoint(&info, 0).is_ok());
        let e = RXD_LIKE.check_endpoint(&info, 1).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        info.ep_attr.ep_type = EpType::Msg;
        let e = RXD_LIKE.check_endpoint(&info, 0).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("ofi_rxd: "), "{}", e.message());
    }
}
