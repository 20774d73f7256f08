//! What every kit-built provider's fabric and domain objects repeat, written once.
//!
//! - [`kit_fabric_ops!`](crate::kit_fabric_ops): inside `impl FabricOps for …`, the
//!   kit's event queues ([`KitEq`]) and wait sets
//!   ([`KitWait`]): the two associated types and `eq_open`,
//!   `eq_open_in_set`, `wait_open`, `trywait`.
//! - [`kit_domain_cq_cntr_ops!`](crate::kit_domain_cq_cntr_ops): inside
//!   `impl DomainOps<F> for …`, the kit's CQs and counters on the domain's progress
//!   engine: the two associated types and `cq_open`, `cntr_open`, `cq_open_in_set`,
//!   `cntr_open_in_set`.
//! - [`check_fabric_name`], [`check_domain_name`], [`check_ep_type`] and
//!   [`no_endpoint_flags`]: the checks of `fi_fabric`, `fi_domain` and `fi_endpoint`
//!   every provider makes, with messages prefixed by the provider's name.
//!
//! Error messages here name the provider from the `prov` argument (the provider's
//! `NAME` constant), never from a hand-typed string. Nothing here panics.

use std::sync::Arc;

use ofi_core::attr::Info;
use ofi_core::eq::EqAttr;
use ofi_core::{EpType, Errno, Error, Result};

use crate::eq::KitEq;
use crate::progress::ProgressEngine;
use crate::wait::KitWait;

/// `Ok` when `info` asks for endpoints of type `want` (or leaves the type unspecified),
/// else `FI_EINVAL` with a message prefixed by `prov`.
///
/// # Errors
/// `FI_EINVAL` for any other endpoint type.
pub fn check_ep_type(prov: &str, info: &Info, want: EpType) -> Result<()> {
    let got = info.ep_attr.ep_type;
    if got == want || got == EpType::Unspec {
        return Ok(());
    }
    Err(Error::new(
        Errno::EINVAL,
        format!("{prov}: {got} endpoints are not supported (only {want})"),
    ))
}

/// `Ok` when `info` names no fabric or one that `is_ours` accepts, else `FI_EINVAL`
/// with a message prefixed by `prov`.
///
/// # Errors
/// `FI_EINVAL` for a fabric name `is_ours` refuses.
pub fn check_fabric_name(prov: &str, info: &Info, is_ours: impl Fn(&str) -> bool) -> Result<()> {
    check_name(prov, "fabric", info.fabric_attr.name.as_deref(), is_ours)
}

/// `Ok` when `info` names no domain or one that `is_ours` accepts, else `FI_EINVAL`
/// with a message prefixed by `prov`.
///
/// # Errors
/// `FI_EINVAL` for a domain name `is_ours` refuses.
pub fn check_domain_name(prov: &str, info: &Info, is_ours: impl Fn(&str) -> bool) -> Result<()> {
    check_name(prov, "domain", info.domain_attr.name.as_deref(), is_ours)
}

/// [`check_fabric_name`] and [`check_domain_name`]: `name` of a `what` ("fabric",
/// "domain"), if given, is one `is_ours` accepts.
fn check_name(
    prov: &str,
    what: &str,
    name: Option<&str>,
    is_ours: impl Fn(&str) -> bool,
) -> Result<()> {
    match name {
        Some(name) if !is_ours(name) => Err(Error::new(
            Errno::EINVAL,
            format!("{prov}: no {what} named {name:?}"),
        )),
        _ => Ok(()),
    }
}

/// `Ok` for `fi_endpoint2` flags of 0: a provider that supports none refuses the rest
/// with `FI_EBADFLAGS` (message prefixed by `prov`).
///
/// # Errors
/// `FI_EBADFLAGS` for non-zero `flags`.
pub fn no_endpoint_flags(prov: &str, flags: u64) -> Result<()> {
    if flags == 0 {
        return Ok(());
    }
    Err(Error::new(
        Errno::EBADFLAGS,
        format!("{prov}: fi_endpoint2 flags are not supported ({flags:#x})"),
    ))
}

/// Inside `impl FabricOps for Fabric { … }`: the kit's event queues and wait sets.
///
/// Expands to `type Eq = KitEq; type Wait = KitWait;` and the methods `eq_open`,
/// `eq_open_in_set` (a [`KitEq`], in a wait set for the latter),
/// `wait_open` (a [`KitWait`]) and `trywait`
/// ([`trywait_kit`](crate::wait::trywait_kit): the domain's CQs and counters must be
/// the kit's too).
///
/// `kit_fabric_ops!(eq_progress = |fabric| engine)` also binds every new EQ to the
/// progress engine the closure returns (an `Arc<ProgressEngine>`), for providers whose
/// connection management makes progress on EQ reads.
///
/// ```text
/// impl FabricOps for Fabric {
///     type Domain = Domain;
///     type PassiveEp = Unsupported;
///     ofi_kit::kit_fabric_ops!();
///     fn domain(&self, info: &Info, _context: usize) -> Result<Domain> { … }
/// }
/// ```
#[macro_export]
macro_rules! kit_fabric_ops {
    () => {
        $crate::kit_fabric_ops!(@with |_fabric| None);
    };
    (eq_progress = |$f:ident| $engine:expr) => {
        $crate::kit_fabric_ops!(@with |$f| Some($engine));
    };
    (@with |$f:ident| $progress:expr) => {
        type Eq = $crate::eq::KitEq;
        type Wait = $crate::wait::KitWait;
        fn eq_open(
            &self,
            attr: &$crate::core::eq::EqAttr,
            _context: usize,
        ) -> $crate::core::Result<$crate::eq::KitEq> {
            let $f = self;
            $crate::fabric::open_eq(attr, None, $progress)
        }
        fn eq_open_in_set(
            &self,
            attr: &$crate::core::eq::EqAttr,
            set: &$crate::wait::KitWait,
            _context: usize,
        ) -> $crate::core::Result<$crate::eq::KitEq> {
            let $f = self;
            $crate::fabric::open_eq(attr, Some(set), $progress)
        }
        fn wait_open(
            &self,
            attr: &$crate::core::wait::WaitAttr,
        ) -> $crate::core::Result<$crate::wait::KitWait> {
            $crate::wait::KitWait::new(attr)
        }
        fn trywait(
            &self,
            objs: &[$crate::core::provider::TryWaitRef<'_, Self>],
        ) -> $crate::core::Result<()> {
            $crate::wait::trywait_kit(objs)
        }
    };
}

/// What [`kit_fabric_ops!`](crate::kit_fabric_ops)'s `eq_open` and `eq_open_in_set` do:
/// a [`KitEq`] for `attr` (signalling the wait set `set`, if any), bound to the
/// progress engine `progress`, if any.
///
/// # Errors
/// Those of [`KitEq::new`] / [`KitEq::new_in`] and [`KitEq::bind_progress`].
pub fn open_eq(
    attr: &EqAttr,
    set: Option<&KitWait>,
    progress: Option<Arc<ProgressEngine>>,
) -> Result<KitEq> {
    let eq = match set {
        Some(set) => KitEq::new_in(attr, set)?,
        None => KitEq::new(attr)?,
    };
    if let Some(engine) = progress {
        eq.bind_progress(engine)?;
    }
    Ok(eq)
}

/// Inside `impl DomainOps<Fabric> for Domain { … }`: the kit's CQs and counters, driven
/// by the domain's progress engine.
///
/// `kit_domain_cq_cntr_ops!(|domain| engine)` expands to `type Cq = KitCq;
/// type Cntr = KitCntr;` and `cq_open`, `cntr_open`, `cq_open_in_set`,
/// `cntr_open_in_set`, each opening the kit object on the `Arc<ProgressEngine>` the
/// closure returns for `&self`.
///
/// ```text
/// impl DomainOps<Fabric> for Domain {
///     type Endpoint = Endpoint;
///     ofi_kit::kit_domain_cq_cntr_ops!(|d| d.engine.clone());
///     …
/// }
/// ```
#[macro_export]
macro_rules! kit_domain_cq_cntr_ops {
    (|$d:ident| $engine:expr) => {
        type Cq = $crate::cq::KitCq;
        type Cntr = $crate::cntr::KitCntr;
        $crate::kit_domain_cq_cntr_ops!(
            @open cq_open, cq_open_in_set, $crate::core::cq::CqAttr, $crate::cq::KitCq,
            |$d| $engine
        );
        $crate::kit_domain_cq_cntr_ops!(
            @open cntr_open, cntr_open_in_set, $crate::core::cntr::CntrAttr,
            $crate::cntr::KitCntr, |$d| $engine
        );
    };
    // The two openers of one kind of object (`$kind`, opened from a `$attr`).
    (@open $open:ident, $open_in_set:ident, $attr:ty, $kind:ty, |$d:ident| $engine:expr) => {
        fn $open(&self, attr: &$attr, _context: usize) -> $crate::core::Result<$kind> {
            let $d = self;
            <$kind>::with_progress(attr, $engine)
        }
        fn $open_in_set(
            &self,
            attr: &$attr,
            set: &$crate::wait::KitWait,
            _context: usize,
        ) -> $crate::core::Result<$kind> {
            let $d = self;
            <$kind>::with_progress_in(attr, $engine, set)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep_type_check_names_the_provider() {
        let mut info = Info::new();
        info.ep_attr.ep_type = EpType::Unspec;
        assert!(check_ep_type("udp", &info, EpType::Dgram).is_ok());
        info.ep_attr.ep_type = EpType::Dgram;
        assert!(check_ep_type("udp", &info, EpType::Dgram).is_ok());
        info.ep_attr.ep_type = EpType::Msg;
        let e = check_ep_type("udp", &info, EpType::Dgram).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().starts_with("udp: "), "{}", e.message());
        assert!(e.message().contains("FI_EP_DGRAM"), "{}", e.message());
    }

    #[test]
    fn name_checks_name_the_provider_and_the_object() {
        let is_tcp = |name: &str| name.eq_ignore_ascii_case("tcp");
        for what in ["fabric", "domain"] {
            let check = |info: &Info| match what {
                "fabric" => check_fabric_name("tcp", info, is_tcp),
                _ => check_domain_name("tcp", info, is_tcp),
            };
            let named = |name: &str| {
                let mut info = Info::new();
                let slot = match what {
                    "fabric" => &mut info.fabric_attr.name,
                    _ => &mut info.domain_attr.name,
                };
                *slot = Some(name.into());
                info
            };
            assert!(check(&Info::new()).is_ok(), "{what}");
            assert!(check(&named("TCP")).is_ok(), "{what}");
            let e = check(&named("udp")).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL);
            assert_eq!(e.message(), format!("tcp: no {what} named \"udp\""));
        }
    }

    #[test]
    fn endpoint_flags_are_refused_with_the_provider_name() {
        assert!(no_endpoint_flags("shm", 0).is_ok());
        let e = no_endpoint_flags("shm", 4).unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        assert!(
            e.message().starts_with("shm: fi_endpoint2"),
            "{}",
            e.message()
        );
    }
}
