//! ofi-conformance: one test suite, written once, run against every provider for the
//! capabilities it claims.
//!
//! # How it works
//!
//! A [`Subject`] says how to reach a provider: a [`Registry`] holding it, its name, and
//! the hints to ask getinfo with. From the provider's getinfo answer the suite derives
//! its [`Claims`] (capabilities, endpoint types, sizes) and from those the set of
//! [`Capability`] areas it must pass. Each check is a plain function in [`checks`]
//! taking `&Subject`; the [`conformance_suite!`] macro turns every check into one
//! `#[test]` that runs it when the provider claims the check's capability and otherwise
//! prints why it skipped (and passes). A provider must not claim what it lacks: a
//! claimed capability whose check fails fails the test.
//!
//! # Running the suite for your provider (also out of tree)
//!
//! In your provider crate's `tests/conformance.rs`, with `ofi` and `ofi-conformance`
//! as dev-dependencies:
//!
//! ```text
//! use ofi::registry::{Registry, RegistryConfig};
//! use ofi_conformance::{conformance_suite, Subject};
//!
//! fn subject() -> Subject {
//!     // Linked in (an rlib) …
//!     let reg = Registry::build(RegistryConfig {
//!         builtins: vec![ofi::abi::entry_for::<my_prov::MyProvider>()],
//!         ..RegistryConfig::default()
//!     });
//!     // … or as a plugin: `plugin_dirs: vec![dir]`.
//!     Subject::new(reg, "myprov")
//! }
//!
//! conformance_suite!(myprov, subject());
//! ```
//!
//! The subject expression is evaluated once per test process (the macro keeps it in a
//! `OnceLock`) and once more in the child process of the two-process test, which
//! re-executes the test binary (see [`twoproc`]).
//!
//! # Bounds and panics
//!
//! Every wait is bounded ([`WAIT`], 2 s): a provider that never completes fails a check,
//! it never hangs the suite. Checks report failures by panicking (they are test code);
//! library helpers outside the checks return `Result`.

pub mod checks;
pub mod fixture;
pub mod plugin;
pub mod twoproc;

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{AddrFormat, Caps, EpType, Errno, Info, Result, API_VERSION};

/// How long any single wait for a completion may take before a check fails.
pub const WAIT: Duration = Duration::from_secs(2);

/// What a provider documents where the specification leaves the choice to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectations {
    /// The error of a data transfer call on an endpoint that is not enabled
    /// (the C API leaves it to the provider; `FI_EOPBADSTATE` by default).
    pub data_before_enable: Errno,
}

impl Default for Expectations {
    fn default() -> Expectations {
        Expectations {
            data_before_enable: Errno::EOPBADSTATE,
        }
    }
}

/// The provider under test.
pub struct Subject {
    /// A registry that holds the provider.
    pub registry: Registry,
    /// The provider's name (`fabric_attr.prov_name`).
    pub provider: String,
    /// Base hints; the suite sets `fabric_attr.prov_name` and narrows from here.
    pub hints: Info,
    /// Provider-documented choices.
    pub expect: Expectations,
    claims: OnceLock<std::result::Result<Claims, String>>,
    keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subject")
            .field("provider", &self.provider)
            .field("hints", &self.hints)
            .field("expect", &self.expect)
            .finish_non_exhaustive()
    }
}

impl Subject {
    /// The provider `provider` of `registry`, asked with default hints
    /// ([`Info::hints`]).
    pub fn new(registry: Registry, provider: &str) -> Subject {
        Subject {
            registry,
            provider: provider.to_string(),
            hints: Info::hints(),
            expect: Expectations::default(),
            claims: OnceLock::new(),
            keep: Vec::new(),
        }
    }

    /// Builder-style: base hints (the provider name is set by the suite).
    pub fn with_hints(mut self, hints: Info) -> Subject {
        self.hints = hints;
        self
    }

    /// Builder-style: provider-documented choices.
    pub fn with_expectations(mut self, expect: Expectations) -> Subject {
        self.expect = expect;
        self
    }

    /// Builder-style: keep `guard` alive as long as the subject (e.g. the temporary
    /// directory a plugin was copied into).
    pub fn keep_alive<T: Send + Sync + 'static>(mut self, guard: T) -> Subject {
        self.keep.push(Box::new(guard));
        self
    }

    /// The base hints, naming this provider.
    pub fn base_hints(&self) -> Info {
        let mut h = self.hints.clone();
        h.fabric_attr.prov_name = Some(self.provider.clone());
        h
    }

    /// getinfo with `hints` (which should name this provider) and `flags`.
    pub fn getinfo_with(&self, hints: Option<Info>, flags: ofi::GetinfoFlags) -> Result<Vec<Info>> {
        self.registry.getinfo(&GetinfoRequest {
            hints,
            flags,
            ..GetinfoRequest::new(API_VERSION)
        })
    }

    /// getinfo with the base hints.
    pub fn getinfo(&self) -> Result<Vec<Info>> {
        self.getinfo_with(Some(self.base_hints()), ofi::GetinfoFlags::empty())
    }

    /// What the provider claims, from its getinfo answer to the base hints (computed
    /// once). `Err` holds the reason getinfo failed.
    pub fn claims(&self) -> std::result::Result<&Claims, String> {
        self.claims
            .get_or_init(|| match self.getinfo() {
                Ok(infos) if !infos.is_empty() => Ok(Claims::from_infos(infos)),
                Ok(_) => Err("getinfo returned no results".into()),
                Err(e) => Err(format!("getinfo failed: {e} ({})", e.code())),
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The claims, or a panic naming why there are none (for checks).
    pub fn claimed(&self) -> &Claims {
        match self.claims() {
            Ok(c) => c,
            Err(e) => panic!("provider {}: {e}", self.provider),
        }
    }
}

/// What a provider's getinfo answer claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    /// Every result.
    pub infos: Vec<Info>,
    /// The union of the results' capabilities.
    pub caps: Caps,
    /// The endpoint types offered, in order of first appearance.
    pub ep_types: Vec<EpType>,
    /// The address formats offered.
    pub addr_formats: Vec<AddrFormat>,
    /// The largest `ep_attr.max_msg_size` of a connectionless result with `FI_MSG`.
    pub max_msg_size: usize,
    /// The largest `tx_attr.inject_size` of such a result.
    pub inject_size: usize,
}

impl Claims {
    /// Derive the claims from getinfo results.
    pub fn from_infos(infos: Vec<Info>) -> Claims {
        let mut caps = Caps::empty();
        let mut ep_types = Vec::new();
        let mut addr_formats = Vec::new();
        let mut max_msg_size = 0;
        let mut inject_size = 0;
        for i in &infos {
            caps |= i.caps;
            if !ep_types.contains(&i.ep_type()) {
                ep_types.push(i.ep_type());
            }
            if !addr_formats.contains(&i.addr_format) {
                addr_formats.push(i.addr_format);
            }
            if connectionless(i.ep_type()) && i.caps.contains(Caps::MSG) {
                max_msg_size = max_msg_size.max(i.ep_attr.max_msg_size);
                inject_size = inject_size.max(i.tx_attr.inject_size);
            }
        }
        Claims {
            infos,
            caps,
            ep_types,
            addr_formats,
            max_msg_size,
            inject_size,
        }
    }

    /// The first connectionless endpoint type offered (`FI_EP_DGRAM` or `FI_EP_RDM`).
    pub fn connectionless_type(&self) -> Option<EpType> {
        self.ep_types.iter().copied().find(|t| connectionless(*t))
    }

    /// Whether the provider claims `cap` (the reason if not).
    pub fn check(&self, cap: Capability) -> std::result::Result<(), String> {
        let need = |ok: bool, why: &str| if ok { Ok(()) } else { Err(why.to_string()) };
        let msg = self.caps.contains(Caps::MSG) && self.connectionless_type().is_some();
        match cap {
            Capability::Getinfo | Capability::Domain | Capability::Cq => Ok(()),
            Capability::Av => need(
                self.connectionless_type().is_some(),
                "no connectionless endpoint type (FI_EP_DGRAM / FI_EP_RDM): no address vectors to check",
            ),
            Capability::Msg => need(msg, "no FI_MSG on a connectionless endpoint type"),
            Capability::Dgram => need(
                self.ep_types.contains(&EpType::Dgram) && self.caps.contains(Caps::MSG),
                "no FI_EP_DGRAM with FI_MSG",
            ),
            Capability::Inject => need(
                msg && self.inject_size > 0,
                "no FI_MSG with inject_size > 0",
            ),
            Capability::Source => need(
                msg && self.caps.contains(Caps::SOURCE),
                "no FI_SOURCE with FI_MSG",
            ),
            Capability::TwoProcess => need(msg, "no FI_MSG on a connectionless endpoint type"),
        }
    }
}

/// Whether endpoints of `t` address peers through an AV (no connection).
pub fn connectionless(t: EpType) -> bool {
    matches!(t, EpType::Dgram | EpType::Rdm)
}

/// The areas the suite checks; each check needs one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// getinfo answers (every provider).
    Getinfo,
    /// Fabric and domain life cycle (every provider).
    Domain,
    /// Completion queues (every provider).
    Cq,
    /// Address vectors (connectionless endpoint types).
    Av,
    /// `FI_MSG` send / receive on a connectionless endpoint.
    Msg,
    /// `FI_EP_DGRAM` with `FI_MSG`.
    Dgram,
    /// `fi_inject` (`inject_size > 0`).
    Inject,
    /// `FI_SOURCE`: receives report the sender's fabric address.
    Source,
    /// Messages between two processes.
    TwoProcess,
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Capability::Getinfo => "getinfo",
            Capability::Domain => "domain",
            Capability::Cq => "cq",
            Capability::Av => "av",
            Capability::Msg => "msg",
            Capability::Dgram => "dgram",
            Capability::Inject => "inject",
            Capability::Source => "source",
            Capability::TwoProcess => "two-process",
        };
        f.write_str(s)
    }
}

/// Run check `name` (needing `cap`) against `subject`: skipped, with the reason
/// printed, when the provider does not claim `cap`. Returns whether it ran.
pub fn run(subject: &Subject, name: &str, cap: Capability, check: impl FnOnce(&Subject)) -> bool {
    let claims = match subject.claims() {
        Ok(c) => c,
        Err(e) if cap == Capability::Getinfo => {
            panic!("{name}: provider {}: {e}", subject.provider)
        }
        Err(e) => panic!(
            "{name}: provider {} answers no getinfo, so nothing can be checked: {e}",
            subject.provider
        ),
    };
    if let Err(why) = claims.check(cap) {
        println!(
            "SKIP {name} ({cap}): provider {} does not claim it: {why}",
            subject.provider
        );
        return false;
    }
    check(subject);
    true
}

/// The capability areas checked for `subject` (those it claims, among the checks'),
/// and the ones skipped with the reason.
pub fn summary(subject: &Subject) -> (Vec<Capability>, Vec<(Capability, String)>) {
    let claims = subject.claimed();
    let mut checked = Vec::new();
    let mut skipped = Vec::new();
    for c in checks::ALL {
        match claims.check(c.cap) {
            Ok(()) if !checked.contains(&c.cap) => checked.push(c.cap),
            Err(why) if !skipped.iter().any(|(s, _)| *s == c.cap) => skipped.push((c.cap, why)),
            _ => {}
        }
    }
    (checked, skipped)
}

/// Instantiate the suite: `conformance_suite!(mod_name, subject_expr)` expands to a
/// module `mod_name` with one `#[test]` per check of [`checks::ALL`], a test listing the
/// capability areas checked, and the two halves of the two-process test.
///
/// `subject_expr` must evaluate to a [`Subject`]; it is evaluated once per process.
#[macro_export]
macro_rules! conformance_suite {
    ($m:ident, $subject:expr) => {
        mod $m {
            #[allow(unused_imports)]
            use super::*;

            fn subject() -> &'static $crate::Subject {
                static S: ::std::sync::OnceLock<$crate::Subject> = ::std::sync::OnceLock::new();
                S.get_or_init(|| $subject)
            }

            $crate::conformance_suite!(@tests
                getinfo_results_name_the_provider,
                getinfo_result_caps_are_claimed,
                getinfo_unclaimed_cap_is_enodata,
                getinfo_prov_attr_only,
                getinfo_ep_type_filter,
                getinfo_newer_api_version_is_enosys,
                domain_open_close,
                domain_close_with_open_endpoint_is_ebusy,
                cq_open_each_format,
                cq_read_empty_is_eagain,
                cq_bad_format_is_einval,
                cq_readerr_without_error_is_eagain,
                av_insert_own_address_lookup_round_trip,
                av_remove_then_lookup_is_einval,
                av_insert_malformed,
                av_straddr,
                msg_send_to_self,
                msg_payload_sizes_to_second_endpoint,
                msg_larger_than_max_is_emsgsize,
                msg_recv_too_small_is_etrunc,
                msg_cancel_posted_recv_is_ecanceled,
                msg_data_call_before_enable,
                msg_source_address,
                dgram_ep_type_results,
                inject_up_to_inject_size,
                teardown_drop_ep_before_cq,
                teardown_drop_cq_before_ep,
                teardown_drop_domain_first,
                teardown_close_bound_cq_is_ebusy,
            );

            #[test]
            fn capabilities_checked() {
                let s = subject();
                let (checked, skipped) = $crate::summary(s);
                let names: ::std::vec::Vec<::std::string::String> =
                    checked.iter().map(|c| c.to_string()).collect();
                println!("provider {}: checked [{}]", s.provider, names.join(", "));
                for (c, why) in &skipped {
                    println!("provider {}: skipped {c}: {why}", s.provider);
                }
                assert!(!checked.is_empty(), "nothing was checked for {}", s.provider);
            }

            #[test]
            fn two_process_exchange() {
                let s = subject();
                let name = $crate::twoproc::test_name(module_path!(), "two_process_child");
                $crate::run(s, "two_process_exchange", $crate::Capability::TwoProcess, |s| {
                    $crate::twoproc::parent(s, &name)
                });
            }

            /// Child half of `two_process_exchange` (does nothing unless started by it).
            #[test]
            fn two_process_child() {
                if $crate::twoproc::is_child() {
                    $crate::twoproc::child(subject());
                }
            }
        }
    };
    (@tests $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let c = $crate::checks::by_name(stringify!($name))
                    .expect("every test of the macro is a check of checks::ALL");
                $crate::run(subject(), c.name, c.cap, c.run);
            }
        )*
    };
}
