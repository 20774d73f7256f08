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
//! prints why it skipped. A provider must not claim what it lacks: a claimed capability
//! whose check fails fails the test.
//!
//! Each instantiation also declares the areas its provider is **expected** to claim
//! ([`expected`]). Claims that differ from the declaration — an area the provider stops
//! claiming (its checks would be skipped) or starts claiming (they would run
//! unannounced) — fail every check of that area and the test `capabilities_checked`,
//! naming the areas and the reason ([`compare`]). So a skip passes only where the
//! declaration says the provider does not claim the area; docs/CONFORMANCE.md is
//! generated from the declarations.
//!
//! Most capabilities come from getinfo fields (caps, endpoint types, `inject_size`,
//! `cq_data_size`, context counts). What no field announces — EQs, counters, memory
//! registration, `FI_SELECTIVE_COMPLETION` — is probed once ([`Probes`]): it counts as
//! claimed unless opening it answers `FI_ENOSYS` / `FI_EOPNOTSUPP` (`FI_EBADFLAGS` for
//! the bind flag). [`summary`] (and the test `capabilities_checked`) lists the areas
//! checked and the ones skipped with the reason.
//!
//! Checks on data transfer run on a [`pair`] of endpoints of every endpoint type the
//! provider offers with the capability: connectionless types (`FI_EP_DGRAM`,
//! `FI_EP_RDM`) insert each other's names in their AVs; `FI_EP_MSG` connects through a
//! passive endpoint and EQs, with connection data. The areas: getinfo, domain, CQ, AV,
//! EQ, counters, MR, messages (sizes, iov, unexpected, flood, truncation, cancel, inject
//! and `FI_INJECT_COMPLETE`, transmit / delivery complete, remote CQ data, selective
//! completion, multi-receive, `fi_cq_sread`, bad input), several endpoints and domains,
//! endpoint errors, connection management, tagged messages (matching, peek /
//! claim / discard, directed receive), RMA, atomics (against a reference), scalable
//! endpoints and shared contexts (where offered), teardown in any order, and two
//! processes (connectionless messages, a connection, tagged messages, RMA).
//!
//! # Running the suite for your provider (also out of tree)
//!
//! In your provider crate's `tests/conformance.rs`, with `ofi` and `ofi-conformance`
//! as dev-dependencies:
//!
//! ```text
//! use ofi::registry::{Registry, RegistryConfig};
//! use ofi_conformance::{conformance_suite, Capability, Subject};
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
//! // The areas it must claim: its claims differing from this list fail the suite.
//! const MYPROV: &[Capability] = &[Capability::Getinfo, Capability::Domain, /* … */];
//!
//! conformance_suite!(myprov, subject(), MYPROV);
//! ```
//!
//! The subject expression is evaluated once per test process (the macro keeps it in a
//! `OnceLock`) and once more in the child process of each two-process test, which
//! re-executes the test binary running that same test, in child mode (see [`twoproc`]).
//!
//! # Bounds and panics
//!
//! Every wait is bounded ([`WAIT`], 2 s; [`twoproc::STEP`] per step across processes):
//! a provider that never completes fails a check, it never hangs the suite. Checks report failures by panicking (they are test code);
//! library helpers outside the checks return `Result`.

mod capability;
pub mod checks;
pub mod expected;
pub mod fixture;
pub mod nic;
pub mod node;
pub mod pair;
pub mod plugin;
pub mod semantics;
pub mod twoproc;
pub mod unavailable;

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

pub use capability::Capability;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{AddrFormat, Caps, EpType, Errno, Info, MsgOrder, Result, API_VERSION};
pub use semantics::Semantics;

/// How long any single wait for a completion may take before a check fails.
pub const WAIT: Duration = Duration::from_secs(2);

/// What a provider documents where the specification leaves the choice to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectations {
    /// The error of a data transfer call on an endpoint that is not enabled
    /// (the C API leaves it to the provider; `FI_EOPBADSTATE` by default).
    pub data_before_enable: Errno,
    /// The error code of an RMA access with a key no region has (reported in the
    /// initiator's error completion). `None`: any error code passes (it is printed).
    pub rma_bad_key: Option<Errno>,
    /// The error code of an RMA access past the end of a region. `None`: any.
    pub rma_out_of_range: Option<Errno>,
    /// Transport semantics some checks assert instead of their default behaviour.
    pub semantics: Semantics,
}

impl Default for Expectations {
    fn default() -> Expectations {
        Expectations {
            data_before_enable: Errno::EOPBADSTATE,
            rma_bad_key: None,
            rma_out_of_range: None,
            semantics: Semantics::NONE,
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

    /// Builder-style: the transport semantics the provider inherits (see
    /// [`Semantics`]).
    pub fn with_semantics(mut self, semantics: Semantics) -> Subject {
        self.expect.semantics = semantics;
        self
    }

    /// Whether the subject states `semantics`.
    pub fn has(&self, semantics: Semantics) -> bool {
        self.expect.semantics.contains(semantics)
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
                Ok(infos) if !infos.is_empty() => {
                    let probes = Probes::run(&self.registry, &infos[0]);
                    let mut c = Claims::from_infos(infos);
                    c.probes = probes;
                    Ok(c)
                }
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
    /// What opening objects showed (see [`Probes`]).
    pub probes: Probes,
}

/// Objects that no getinfo field announces: the suite opens each once and counts it
/// supported unless the provider answers `FI_ENOSYS` / `FI_EOPNOTSUPP` (or, for a bind
/// flag, `FI_EBADFLAGS`). Any other failure counts as supported, so the check runs and
/// reports it. `Err` holds the reason it is not supported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probes {
    /// `fi_eq_open`.
    pub eq: std::result::Result<(), String>,
    /// `fi_cntr_open`.
    pub cntr: std::result::Result<(), String>,
    /// `fi_mr_reg`.
    pub mr: std::result::Result<(), String>,
    /// Binding a CQ with `FI_SELECTIVE_COMPLETION`.
    pub selective: std::result::Result<(), String>,
    /// `fi_wait_open` (`FI_WAIT_FD`).
    pub wait: std::result::Result<(), String>,
    /// `fi_poll` over a CQ (the host's poll set asks the provider's `fi_trywait`).
    pub poll: std::result::Result<(), String>,
    /// `fi_control(FI_GETOPSFLAG)` on an endpoint.
    pub opsflag: std::result::Result<(), String>,
    /// getinfo with a `domain_attr.auth_key` hint ([`checks::auth::takes_auth_key`]).
    pub auth_key: std::result::Result<(), String>,
    /// getinfo with `FI_COMMIT_COMPLETE` in `tx_attr.op_flags`
    /// ([`checks::commit::takes_commit_complete`]).
    pub commit: std::result::Result<(), String>,
}

fn unsupported(e: &ofi::Error) -> bool {
    matches!(e.code(), Errno::ENOSYS | Errno::EOPNOTSUPP)
}

impl Probes {
    /// Open each probed object once with `info`'s fabric and domain.
    pub fn run(registry: &Registry, info: &Info) -> Probes {
        let auth_key = checks::auth::takes_auth_key(registry, info);
        let commit = checks::commit::takes_commit_complete(registry, info);
        let no = |what: &str| {
            Err(format!(
                "could not open a fabric and domain to probe {what}"
            ))
        };
        let fabric = match registry.open_fabric(info) {
            Ok(f) => f,
            Err(_) => {
                return Probes {
                    eq: no("EQs"),
                    cntr: no("counters"),
                    mr: no("MRs"),
                    selective: no("selective completion"),
                    wait: no("wait sets"),
                    poll: no("poll sets"),
                    opsflag: no("endpoint control"),
                    auth_key,
                    commit,
                }
            }
        };
        let eq = match fabric.eq_open(&ofi::eq::EqAttr::default()) {
            Err(e) if unsupported(&e) => Err(format!("fi_eq_open: {e}")),
            _ => Ok(()),
        };
        let wait = match fabric.wait_open(&ofi::wait::WaitAttr {
            wait_obj: ofi::WaitObj::Fd,
            flags: 0,
        }) {
            Err(e) if unsupported(&e) => Err(format!("fi_wait_open: {e}")),
            _ => Ok(()),
        };
        let Ok(domain) = fabric.domain(info) else {
            return Probes {
                eq,
                cntr: no("counters"),
                mr: no("MRs"),
                selective: no("selective completion"),
                wait,
                poll: no("poll sets"),
                opsflag: no("endpoint control"),
                auth_key,
                commit,
            };
        };
        let poll = (|| {
            let cq = domain.cq_open(&ofi::cq::CqAttr::default()).ok()?;
            let ps = fabric.poll_open().ok()?;
            ps.add_cq(&cq, 1).ok()?;
            let r = match ps.poll(&mut [0usize; 1]) {
                Err(e) if unsupported(&e) => Some(format!("fi_poll (fi_trywait on a CQ): {e}")),
                _ => None,
            };
            let _ = ps.del(&cq);
            r
        })()
        .map_or(Ok(()), Err);
        let cntr = match domain.cntr_open(&ofi::cntr::CntrAttr::default()) {
            Err(e) if unsupported(&e) => Err(format!("fi_cntr_open: {e}")),
            _ => Ok(()),
        };
        let access = ofi::OpFlags::SEND | ofi::OpFlags::RECV;
        let mr = match domain.mr_reg_owned(vec![0u8; 64], access, 0x5eed) {
            Err(e) if unsupported(&e) => Err(format!("fi_mr_reg: {e}")),
            _ => Ok(()),
        };
        let selective = (|| {
            let cq = domain
                .cq_open(&ofi::cq::CqAttr::with_format(ofi::CqFormat::Tagged))
                .ok()?;
            let ep = domain.endpoint(info).ok()?;
            let flags =
                ofi::OpFlags::TRANSMIT | ofi::OpFlags::RECV | ofi::OpFlags::SELECTIVE_COMPLETION;
            match ep.bind(&cq, flags) {
                Err(e) if unsupported(&e) || e.code() == Errno::EBADFLAGS => Some(format!(
                    "fi_ep_bind(CQ, FI_SELECTIVE_COMPLETION): {e} ({})",
                    e.code()
                )),
                _ => None,
            }
        })()
        .map_or(Ok(()), Err);
        let opsflag = match domain.endpoint(info).map(|ep| ep.op_flags(true)) {
            Ok(Err(e)) if unsupported(&e) => Err(format!("fi_control(FI_GETOPSFLAG): {e}")),
            _ => Ok(()),
        };
        Probes {
            eq,
            cntr,
            mr,
            selective,
            wait,
            poll,
            opsflag,
            auth_key,
            commit,
        }
    }
}

impl Claims {
    /// Derive the claims from getinfo results (no probes: every probe "not run").
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
        let not_run = || Err("not probed".to_string());
        Claims {
            infos,
            caps,
            ep_types,
            addr_formats,
            max_msg_size,
            inject_size,
            probes: Probes {
                eq: not_run(),
                cntr: not_run(),
                mr: not_run(),
                selective: not_run(),
                wait: not_run(),
                poll: not_run(),
                opsflag: not_run(),
                auth_key: not_run(),
                commit: not_run(),
            },
        }
    }

    /// The first connectionless endpoint type offered (`FI_EP_DGRAM` or `FI_EP_RDM`).
    pub fn connectionless_type(&self) -> Option<EpType> {
        self.ep_types.iter().copied().find(|t| connectionless(*t))
    }

    /// The endpoint types (among `FI_EP_MSG`, `FI_EP_DGRAM`, `FI_EP_RDM`) with a result
    /// that has every capability of `caps` and satisfies `extra`.
    pub fn types_where(&self, caps: Caps, extra: impl Fn(&Info) -> bool) -> Vec<EpType> {
        let mut out = Vec::new();
        for i in &self.infos {
            let t = i.ep_type();
            if matches!(t, EpType::Msg | EpType::Dgram | EpType::Rdm)
                && i.caps.contains(caps)
                && extra(i)
                && !out.contains(&t)
            {
                out.push(t);
            }
        }
        out
    }

    /// The endpoint types with a result that has every capability of `caps`.
    pub fn types_with(&self, caps: Caps) -> Vec<EpType> {
        self.types_where(caps, |_| true)
    }

    /// Whether the provider claims `cap` (the reason if not).
    pub fn check(&self, cap: Capability) -> std::result::Result<(), String> {
        let need = |ok: bool, why: &str| if ok { Ok(()) } else { Err(why.to_string()) };
        let msg = self.caps.contains(Caps::MSG) && self.connectionless_type().is_some();
        let any = |caps: Caps, why: &str| need(!self.types_with(caps).is_empty(), why);
        // Some endpoint type has a result with every bit of `caps` that also passes `extra`.
        let any_where = |caps: Caps, extra: fn(&Info) -> bool, why: &str| {
            need(!self.types_where(caps, extra).is_empty(), why)
        };
        // Some endpoint type has `caps` with FI_REMOTE_CQ_DATA and a cq_data_size > 0.
        let any_with_cq_data = |caps: Caps, why: &str| {
            any_where(
                caps | Caps::REMOTE_CQ_DATA,
                |i| i.domain_attr.cq_data_size > 0,
                why,
            )
        };
        let reliable = |caps: Caps| {
            self.types_with(caps)
                .into_iter()
                .any(|t| t != EpType::Dgram)
        };
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
                "no connectionless endpoint type with FI_MSG and inject_size > 0 (pair-inject covers the others)",
            ),
            Capability::Source => need(
                msg && self.caps.contains(Caps::SOURCE),
                "no FI_SOURCE with FI_MSG",
            ),
            Capability::AvUserId => need(
                msg && self.caps.contains(Caps::SOURCE | Caps::AV_USER_ID),
                "no FI_AV_USER_ID with FI_SOURCE and FI_MSG",
            ),
            Capability::TwoProcess => need(msg, "no FI_MSG on a connectionless endpoint type"),
            Capability::Pairs => any(Caps::MSG, "no endpoint type with FI_MSG"),
            Capability::PairInject => any_where(
                Caps::MSG,
                |i| i.tx_attr.inject_size > 0,
                "no endpoint type with FI_MSG and inject_size > 0",
            ),
            Capability::Reliable => need(
                reliable(Caps::MSG),
                "no reliable endpoint type (FI_EP_MSG / FI_EP_RDM) with FI_MSG",
            ),
            Capability::Rdm => need(
                self.types_with(Caps::MSG).contains(&EpType::Rdm),
                "no FI_EP_RDM with FI_MSG",
            ),
            Capability::Cm => need(
                self.types_with(Caps::MSG).contains(&EpType::Msg),
                "no FI_EP_MSG with FI_MSG (no connection management)",
            ),
            Capability::Eq => match (&self.probes.eq, self.ep_types.contains(&EpType::Msg)) {
                (_, true) | (Ok(()), _) => Ok(()),
                (Err(why), false) => Err(why.clone()),
            },
            Capability::Counters => self.probes.cntr.clone(),
            Capability::WaitSet => {
                self.probes.wait.clone()?;
                self.probes.cntr.clone()
            }
            Capability::PollSet => {
                self.probes.poll.clone()?;
                self.probes.cntr.clone()
            }
            Capability::Mr => {
                if self.caps.intersects(Caps::RMA | Caps::ATOMIC) {
                    Ok(())
                } else {
                    self.probes.mr.clone()
                }
            }
            Capability::SelectiveCompletion => {
                any(Caps::MSG, "no endpoint type with FI_MSG")?;
                self.probes.selective.clone()
            }
            Capability::CqData => any_with_cq_data(Caps::MSG, "no FI_REMOTE_CQ_DATA with FI_MSG and cq_data_size > 0"),
            Capability::Tagged => any(Caps::TAGGED, "no FI_TAGGED"),
            Capability::Peek => need(
                reliable(Caps::TAGGED),
                "no FI_TAGGED on a reliable endpoint type (FI_PEEK needs unexpected messages)",
            ),
            Capability::DirectedRecv => need(
                self.types_with(Caps::TAGGED | Caps::DIRECTED_RECV)
                    .into_iter()
                    .any(connectionless),
                "no FI_DIRECTED_RECV with FI_TAGGED on a connectionless endpoint type",
            ),
            Capability::MultiRecv => any(Caps::MSG | Caps::MULTI_RECV, "no FI_MULTI_RECV with FI_MSG"),
            Capability::Rma => any(Caps::RMA, "no FI_RMA"),
            Capability::RmaCqData => any_with_cq_data(Caps::RMA, "no FI_RMA with FI_REMOTE_CQ_DATA"),
            Capability::Atomic => any(Caps::ATOMIC, "no FI_ATOMIC"),
            Capability::RmaEvent => need(
                reliable(Caps::RMA | Caps::RMA_EVENT) && self.probes.cntr.is_ok(),
                "no FI_RMA with FI_RMA_EVENT on a reliable type (or no counters)",
            ),
            Capability::Scalable => need(
                self.infos.iter().any(offers_scalable),
                "no scalable endpoints (max_ep_tx_ctx / max_ep_rx_ctx <= 1)",
            ),
            Capability::SharedCtx => need(
                self.infos.iter().any(offers_shared_contexts),
                "no shared contexts (max_ep_stx_ctx / max_ep_srx_ctx 0)",
            ),
            Capability::TwoProcessCm => need(
                self.types_with(Caps::MSG).contains(&EpType::Msg),
                "no FI_EP_MSG with FI_MSG",
            ),
            Capability::TwoProcessTagged => need(
                reliable(Caps::TAGGED),
                "no FI_TAGGED on a reliable endpoint type",
            ),
            Capability::TwoProcessRma => need(reliable(Caps::RMA), "no FI_RMA"),
            Capability::Control => {
                any(Caps::MSG, "no endpoint type with FI_MSG")?;
                self.probes.opsflag.clone()
            }
            Capability::Ordering => any_where(
                Caps::RMA,
                |i| {
                    i.tx_attr
                        .msg_order
                        .intersects(MsgOrder::RAW | MsgOrder::WAW | MsgOrder::WAR)
                },
                "no FI_RMA with FI_ORDER_RAW, FI_ORDER_WAW or FI_ORDER_WAR",
            ),
            Capability::Fence => any(Caps::RMA | Caps::FENCE, "no FI_RMA with FI_FENCE"),
            Capability::CommitComplete => self.probes.commit.clone(),
            Capability::Trigger => need(
                reliable(Caps::MSG | Caps::TRIGGER) && self.probes.cntr.is_ok(),
                "no FI_MSG with FI_TRIGGER on a reliable type (or no counters)",
            ),
            Capability::AuthKey => self.probes.auth_key.clone(),
            Capability::SharedAv => need(
                msg && self.caps.contains(Caps::SHARED_AV),
                "no FI_SHARED_AV with FI_MSG on a connectionless type",
            ),
        }
    }
}

/// Whether endpoints of `t` address peers through an AV (no connection).
pub fn connectionless(t: EpType) -> bool {
    matches!(t, EpType::Dgram | EpType::Rdm)
}

/// Whether `i` offers scalable endpoints: a connectionless type with `FI_MSG` and more
/// than one transmit and one receive context per endpoint (what claims
/// [`Capability::Scalable`], and the results its checks run on).
pub fn offers_scalable(i: &Info) -> bool {
    connectionless(i.ep_type())
        && i.caps.contains(Caps::MSG)
        && i.domain_attr.max_ep_tx_ctx > 1
        && i.domain_attr.max_ep_rx_ctx > 1
}

/// Whether `i` offers shared contexts: a connectionless type with `FI_MSG` and shared
/// transmit and receive contexts (what claims [`Capability::SharedCtx`], and the
/// results its checks run on).
pub fn offers_shared_contexts(i: &Info) -> bool {
    connectionless(i.ep_type())
        && i.caps.contains(Caps::MSG)
        && i.domain_attr.max_ep_stx_ctx > 0
        && i.domain_attr.max_ep_srx_ctx > 0
}

/// Run check `name` (needing `cap`) against `subject`: skipped, with the reason
/// printed, when the provider does not claim `cap`. Returns whether it ran.
///
/// Panics (fails the check) when what the provider claims about `cap` differs from
/// `expected`, the areas its instantiation declares: an expected area it does not
/// claim (the check would be skipped) or a claimed area not declared.
pub fn run(
    subject: &Subject,
    name: &str,
    cap: Capability,
    expected: &[Capability],
    check: impl FnOnce(&Subject),
) -> bool {
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
    match (claims.check(cap), expected.contains(&cap)) {
        (Err(why), true) => panic!(
            "{name}: provider {} is expected to claim {cap}, but does not: {why} \
             (if that is intended, remove {cap} from the areas its suite expects)",
            subject.provider
        ),
        (Ok(()), false) => panic!(
            "{name}: provider {} claims {cap}, which its suite does not expect \
             (if that is intended, add {cap} to the areas its suite expects)",
            subject.provider
        ),
        _ => {}
    }
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

/// The capability areas checked for `subject` (those it claims, in the order of
/// [`Capability::ALL`]), and the ones skipped with the reason.
pub fn summary(subject: &Subject) -> (Vec<Capability>, Vec<(Capability, String)>) {
    let claims = subject.claimed();
    let mut checked = Vec::new();
    let mut skipped = Vec::new();
    for cap in Capability::ALL {
        match claims.check(cap) {
            Ok(()) => checked.push(cap),
            Err(why) => skipped.push((cap, why)),
        }
    }
    (checked, skipped)
}

/// Compare what `subject` claims with `expected`, the areas its instantiation
/// declares. `Err` names every area claimed but not expected, and every area expected
/// but not claimed with the provider's reason.
pub fn compare(subject: &Subject, expected: &[Capability]) -> std::result::Result<(), String> {
    let (checked, skipped) = summary(subject);
    let extra: Vec<String> = checked
        .iter()
        .filter(|c| !expected.contains(c))
        .map(|c| c.to_string())
        .collect();
    let missing: Vec<String> = skipped
        .iter()
        .filter(|(c, _)| expected.contains(c))
        .map(|(c, why)| format!("{c} ({why})"))
        .collect();
    if extra.is_empty() && missing.is_empty() {
        return Ok(());
    }
    let mut msg = format!(
        "provider {}: its claims differ from the areas its suite expects",
        subject.provider
    );
    if !missing.is_empty() {
        msg += &format!("\n  expected but not claimed: {}", missing.join("; "));
    }
    if !extra.is_empty() {
        msg += &format!("\n  claimed but not expected: {}", extra.join(", "));
    }
    msg += "\n(update the provider, or the declaration in ofi_conformance::expected / the suite's third argument, and regenerate docs/CONFORMANCE.md)";
    Err(msg)
}

/// Instantiate the suite: `conformance_suite!(mod_name, subject_expr, expected_expr)`
/// expands to a module `mod_name` with one `#[test]` per check of [`checks::ALL`], a
/// test comparing the areas claimed with the expected ones (and listing them), and the
/// two-process tests (each re-runs itself in a child process for the other side).
///
/// `subject_expr` must evaluate to a [`Subject`]; it is evaluated once per process.
/// `expected_expr` is a `&'static [Capability]`: the areas the provider must claim
/// (in tree, a declaration of [`expected`], e.g. `ofi_conformance::expected::UDP`;
/// docs/CONFORMANCE.md is generated from those).
///
/// `conformance_suite!(expected = E; m1: subject1, m2: subject2, …)` instantiates one
/// suite per `module: subject` pair, all expected to claim `E` (one provider reached
/// several ways: linked in or as a plugin, over IPv4 or IPv6).
#[macro_export]
macro_rules! conformance_suite {
    (expected = $expected:expr; $($m:ident: $subject:expr),+ $(,)?) => {
        $($crate::conformance_suite!($m, $subject, $expected);)+
    };
    ($m:ident, $subject:expr, $expected:expr $(,)?) => {
        mod $m {
            #[allow(unused_imports)]
            use super::*;

            fn subject() -> &'static $crate::Subject {
                static S: ::std::sync::OnceLock<$crate::Subject> = ::std::sync::OnceLock::new();
                S.get_or_init(|| $subject)
            }

            /// The areas this suite's provider is expected to claim.
            fn expected() -> &'static [$crate::Capability] {
                $expected
            }

            $crate::conformance_suite!(@tests
                getinfo_results_name_the_provider,
                getinfo_result_caps_are_claimed,
                getinfo_unclaimed_cap_is_enodata,
                getinfo_prov_attr_only,
                getinfo_ep_type_filter,
                getinfo_newer_api_version_is_enosys,
                getinfo_nic_describes_a_host_interface,
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
                msg_source_user_id,
                dgram_ep_type_results,
                inject_up_to_inject_size,
                teardown_drop_ep_before_cq,
                teardown_drop_cq_before_ep,
                teardown_drop_domain_first,
                teardown_close_bound_cq_is_ebusy,
                eq_write_read_peek,
                eq_empty_is_eagain_and_sread_times_out,
                eq_sread_returns_event,
                cntr_read_add_set,
                cntr_wait_threshold_and_timeout,
                cntr_counts_sends_and_receives,
                mr_reg_access_and_keys,
                mr_regv_regattr_and_bad_args,
                pair_msg_sizes_both_ways,
                pair_msg_iov_and_msg_calls,
                pair_cancel_recv,
                pair_bad_input,
                pair_unexpected_messages,
                pair_cq_data,
                pair_inject_and_inject_complete,
                pair_selective_completion,
                teardown_pairs_any_order,
                cm_connect_accept_data,
                cm_reject_with_data,
                cm_shutdown_event,
                tagged_match_tag_and_ignore,
                tagged_peek_claim_discard,
                tagged_unexpected,
                tagged_directed_recv,
                multi_recv_packs_and_releases,
                rma_write_read_sizes,
                rma_iov_and_msg,
                rma_inject_write,
                rma_writedata_remote_cq_data,
                rma_bad_key_and_out_of_range,
                atomic_valid_matches_query,
                atomic_ops_match_reference,
                rma_remote_counters,
                ep_enable_without_cq_or_av,
                ep_bind_after_enable_is_eopbadstate,
                ep_bind_selective_alone_is_ebadflags,
                pair_recv_too_small_is_etrunc,
                pair_close_bound_is_ebusy,
                scalable_ep_contexts,
                scalable_ep_per_context_cqs,
                shared_contexts,
                shared_rx_context_serves_many_endpoints,
                rdm_send_to_self,
                cq_sread_times_out_and_wakes,
                many_endpoints_ring,
                endpoints_in_two_domains,
                av_changes_between_transfers,
                msg_listener_serves_several_connections,
                pair_transmit_and_delivery_complete,
                pair_flood_unexpected,
                ep_bind_cq_twice_is_einval,
                wait_set_counter_and_eq,
                wait_set_wakes_on_completion,
                poll_set_reports_members,
                poll_set_reports_completions,
                control_get_set_ops_flags,
                control_ops_flags_and_alias_decide_completions,
                control_msg_calls_check_flags,
                control_delivery_complete_default,
                commit_complete_send_and_write,
                commit_complete_as_default,
                control_getwait_polls_readable,
                setname_after_enable_and_bad_names,
                ordering_rma_claims_hold,
                fence_read_after_writes,
                trigger_send_waits_for_threshold,
                trigger_chain_rma_and_atomic,
                trigger_bad_arguments,
                trigger_close_cancels,
                trigger_failure_completes_as_error,
                auth_key_separates_endpoints,
                auth_key_too_long_is_einval,
                shared_av_view_resolves_and_sends,
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
                if let Err(diff) = $crate::compare(s, expected()) {
                    panic!("{diff}");
                }
            }

            $crate::conformance_suite!(@twoproc
                two_process_exchange => TwoProcess, Msg;
                two_process_cm => TwoProcessCm, Cm;
                two_process_tagged => TwoProcessTagged, Tagged;
                two_process_rma => TwoProcessRma, Rma;
            );
        }
    };
    (@twoproc $($name:ident => $cap:ident, $mode:ident;)*) => {
        $(
            #[test]
            fn $name() {
                $crate::twoproc::suite_test(
                    subject(),
                    module_path!(),
                    stringify!($name),
                    $crate::Capability::$cap,
                    expected(),
                    $crate::twoproc::Mode::$mode,
                );
            }
        )*
    };
    (@tests $($name:ident),* $(,)?) => {
        /// Every check of `checks::ALL` has a test here (none is silently left out).
        #[test]
        fn suite_lists_every_check() {
            let listed: &[&str] = &[$(stringify!($name)),*];
            for c in $crate::checks::ALL {
                assert!(listed.contains(&c.name), "check {} has no test", c.name);
            }
            assert_eq!(listed.len(), $crate::checks::ALL.len());
        }

        $(
            #[test]
            fn $name() {
                let c = $crate::checks::by_name(stringify!($name))
                    .expect("every test of the macro is a check of checks::ALL");
                $crate::run(subject(), c.name, c.cap, expected(), c.run);
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(t: EpType, caps: Caps) -> Info {
        let mut i = Info::new().with_ep_type(t).with_caps(caps);
        i.tx_attr.inject_size = 64;
        i.domain_attr.cq_data_size = 8;
        i
    }

    #[test]
    fn every_area_is_listed_once_and_declarations_use_them() {
        for (index, cap) in Capability::ALL.iter().enumerate() {
            assert!(
                !Capability::ALL[..index].contains(cap),
                "{cap} listed twice"
            );
        }
        for check in checks::ALL {
            assert!(Capability::ALL.contains(&check.cap), "{}", check.name);
        }
        for (name, caps) in expected::ALL {
            assert!(caps.contains(&Capability::Getinfo), "{name}");
            for (index, cap) in caps.iter().enumerate() {
                assert!(!caps[..index].contains(cap), "{name}: {cap} twice");
            }
        }
    }

    #[test]
    fn capabilities_follow_the_claims() {
        let mut c = Claims::from_infos(vec![
            info(EpType::Rdm, Caps::MSG | Caps::TAGGED | Caps::REMOTE_CQ_DATA),
            info(EpType::Msg, Caps::MSG | Caps::RMA),
        ]);
        for cap in [
            Capability::Pairs,
            Capability::Reliable,
            Capability::Rdm,
            Capability::Cm,
            Capability::Tagged,
            Capability::Peek,
            Capability::CqData,
            Capability::Rma,
            Capability::Mr,
            Capability::Eq,
            Capability::PairInject,
            Capability::TwoProcessCm,
            Capability::TwoProcessTagged,
            Capability::TwoProcessRma,
        ] {
            assert_eq!(c.check(cap), Ok(()), "{cap}");
        }
        for cap in [
            Capability::Dgram,
            Capability::Atomic,
            Capability::MultiRecv,
            Capability::DirectedRecv,
            Capability::RmaCqData,
            Capability::Counters,
            Capability::SelectiveCompletion,
            Capability::Scalable,
            Capability::SharedCtx,
        ] {
            assert!(c.check(cap).is_err(), "{cap} is not claimed");
        }
        c.probes.cntr = Ok(());
        assert_eq!(c.check(Capability::Counters), Ok(()));
        // A datagram-only provider: no reliable types, so no peek or unexpected messages.
        let d = Claims::from_infos(vec![info(EpType::Dgram, Caps::MSG | Caps::TAGGED)]);
        assert!(d.check(Capability::Reliable).is_err());
        assert!(d.check(Capability::Peek).is_err());
        assert_eq!(d.check(Capability::Tagged), Ok(()));
        assert!(d.check(Capability::Eq).is_err(), "not probed, no FI_EP_MSG");
    }
}
