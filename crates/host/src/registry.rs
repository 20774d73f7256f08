//! The provider registry: every provider this process knows, and getinfo across them.
//!
//! Sources, in order (DESIGN §4): built-ins registered by the `ofi` crate, then plugin
//! files from the directories [`crate::loader`] finds. Built-ins and plugins go through
//! the same C-ABI tables ([`ProviderHandle`]), so a provider behaves the same either way.
//!
//! Rules:
//! - Same name twice (case-insensitive): the higher version wins, a tie goes to the
//!   plugin; the loser stays listed as superseded.
//! - Order: by declared priority (higher first), then registration order; getinfo
//!   results keep that order and each provider's own order within it.
//! - `FI_PROVIDER` and `hints.fabric_attr.prov_name` filter results with the grammar of
//!   [`crate::select`]. Providers a filter rules out entirely are not asked at all.
//! - Utility providers answer with stacks (`tcp;ofi_rxm`); they reach the cores
//!   beneath them through [`host_getinfo`] with `core_only`, like an application would.
//!   The host answers from the registry whose call into the provider is running on
//!   that thread (a per-thread stack the registry's getinfo and fabric opens push
//!   onto), so a registry built by hand layers over its own providers; outside such a
//!   call (a provider's own thread) the global registry answers.
//! - Every provider gets a [`Verdict`] per template (kept / rejected / filtered), the
//!   explain report of `fi_info --explain`.
//!
//! - Hooks (DESIGN §8): [`Registry::open_fabric`] opens the real fabric, then hands it
//!   to each hook of the registry's hook list in order ([`Registry::set_hooks`]; the
//!   global registry takes `FI_HOOK`), each wrapping the previous: the host keeps the
//!   fabric beneath in a per-thread slot while it opens the hook's fabric, and the hook
//!   takes it through the host table (`hook_inner`). With no hooks nothing is wrapped
//!   and the data path is untouched. Every fabric open goes this way, including the
//!   ones utility providers make for the cores beneath them.
//!
//! The global registry is built lazily and thread-safely on first use. Provider calls
//! are made without holding the registry's lock, so a utility provider may call back
//! into the registry from its getinfo. Nothing here panics on provider output.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::abi::{PluginEntry, ProviderKind};
use crate::attr::Info;
use crate::error::{Errno, Error, Result};
use crate::fabric::Fabric;
use crate::flags::GetinfoFlags;
use crate::getinfo::{self, GetinfoOutcome, GetinfoRequest, Verdict, VerdictKind};
use crate::loader::{self, LoadOutcome, LoadRecord};
use crate::provider::ProviderHandle;
use crate::select::{self, ProviderFilter};
use crate::version::Version;

/// What a registry is built from. [`RegistryConfig::from_environment`] reads the
/// process environment and `plugins.toml`; tests build one by hand.
#[derive(Clone, Default)]
pub struct RegistryConfig {
    /// Linked-in providers, in registration order.
    pub builtins: Vec<&'static PluginEntry>,
    /// Plugin directories, in search order.
    pub plugin_dirs: Vec<PathBuf>,
    /// The `FI_PROVIDER` value, if set.
    pub filter: Option<String>,
    /// Provider names switched off in `plugins.toml`.
    pub disabled: Vec<String>,
}

impl RegistryConfig {
    /// `FI_PROVIDER`, `FI_PROVIDER_PATH` and `plugins.toml`, with these built-ins.
    pub fn from_environment(builtins: Vec<&'static PluginEntry>) -> RegistryConfig {
        let config = crate::config::global();
        // Through the parameter store, so plugins.toml can set them too (env wins).
        let path = crate::param::get_str(None, "provider_path").ok().flatten();
        RegistryConfig {
            builtins,
            plugin_dirs: loader::plugin_dirs(path.as_deref(), &config.search_paths),
            filter: crate::param::get_str(None, "provider").ok().flatten(),
            disabled: config.disable.clone(),
        }
    }
}

/// A registered provider as listed by `fi_info -l`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderRecord {
    /// Provider name.
    pub name: String,
    /// Provider version.
    pub version: Version,
    /// Core, utility or hook.
    pub kind: ProviderKind,
    /// Declared priority.
    pub priority: i32,
    /// The plugin file, or `None` for a built-in.
    pub path: Option<PathBuf>,
    /// Set when another provider of the same name won.
    pub superseded_by: Option<String>,
}

struct Slot {
    handle: Arc<ProviderHandle>,
    path: Option<PathBuf>,
    superseded_by: Option<String>,
    seq: usize,
}

impl Slot {
    fn origin(&self) -> String {
        match &self.path {
            Some(p) => format!(
                "{} {} ({})",
                self.handle.name(),
                self.handle.version(),
                p.display()
            ),
            None => format!(
                "{} {} (built-in)",
                self.handle.name(),
                self.handle.version()
            ),
        }
    }
}

#[derive(Default)]
struct Inner {
    slots: Vec<Slot>,
    report: Vec<LoadRecord>,
    /// Built-in providers whose init failed (listed after the plugin records).
    builtin_failures: Vec<LoadRecord>,
    next_seq: usize,
}

/// The set of known providers.
pub struct Registry {
    inner: RwLock<Inner>,
    filter: Option<ProviderFilter>,
    disabled: Vec<String>,
    warned_unknown: OnceLock<()>,
    hooks: RwLock<Vec<String>>,
}

/// Most hooks a fabric is wrapped in. Every call goes through each hook's layer (its
/// frames on the stack), so a longer list would overflow the stack: it is refused
/// ([`Registry::set_hooks`]: `FI_EINVAL`; `FI_HOOK`: one warning, no hook applied).
pub const MAX_HOOKS: usize = 64;

/// Parse a hook list (`FI_HOOK`): names separated by `,` (ofi-rs) or `;` (the C
/// library), blanks ignored; a short name (`perf`) means the provider `ofi_hook_perf`,
/// a full provider name is taken as it is. Lower-cased, in order.
pub fn parse_hook_list(spec: &str) -> Vec<String> {
    spec.split([',', ';'])
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .map(|n| {
            if n.starts_with("ofi_hook_") {
                n
            } else {
                format!("ofi_hook_{n}")
            }
        })
        .collect()
}

thread_local! {
    /// The registries whose calls into providers run on this thread, innermost last.
    static CALLING: RefCell<Vec<*const Registry>> = const { RefCell::new(Vec::new()) };
}

/// Marks a registry as calling into providers on this thread until dropped.
struct Calling;

impl Calling {
    fn enter(r: &Registry) -> Calling {
        CALLING.with(|c| c.borrow_mut().push(r as *const Registry));
        Calling
    }
}

impl Drop for Calling {
    fn drop(&mut self) {
        CALLING.with(|c| {
            c.borrow_mut().pop();
        });
    }
}

/// Run `f` with the registry whose provider call is running on this thread, else the
/// global one.
fn with_calling<T>(f: impl FnOnce(&Registry) -> T) -> T {
    let cur = CALLING.with(|c| c.borrow().last().copied());
    match cur {
        // SAFETY: the pointer was pushed by a `Registry` method still running on this
        // thread (its `Calling` guard pops it before the method returns), so the
        // registry is alive, and borrowed, for the whole of this call.
        Some(p) => f(unsafe { &*p }),
        None => f(global()),
    }
}

thread_local! {
    /// The fabric beneath the hook whose fabric is being opened on this thread.
    static HOOK_INNER: RefCell<Option<Fabric>> = const { RefCell::new(None) };
}

/// Take the fabric a hook being opened on this thread wraps (host table `hook_inner`).
pub(crate) fn take_hook_inner() -> Option<Fabric> {
    HOOK_INNER.with(|c| c.borrow_mut().take())
}

/// Open `hook`'s fabric over `inner`: park `inner` where the hook's `hook_inner` call
/// finds it, and take it back if the hook did not (then it is closed by the drop).
/// The slot is saved and restored around the call, so hooked opens nested in the
/// hook's open (before it took its fabric) leave its fabric parked.
fn open_hook(hook: &ProviderHandle, info: &Info, inner: Fabric) -> Result<Fabric> {
    let saved = HOOK_INNER.with(|c| c.borrow_mut().replace(inner));
    let res = hook.open_fabric(info);
    let left = HOOK_INNER.with(|c| std::mem::replace(&mut *c.borrow_mut(), saved));
    match (res, left) {
        (Ok(_), Some(_)) => Err(Error::new(
            Errno::EOTHER,
            format!(
                "hook {} opened a fabric without the one beneath it",
                hook.name()
            ),
        )),
        (res, _) => res,
    }
}

impl Registry {
    /// Build a registry: register the built-ins, then load every plugin candidate.
    pub fn build(config: RegistryConfig) -> Registry {
        // Providers initialised below must reach this crate through the host table.
        crate::host_table::install();
        let filter = config.filter.as_deref().and_then(ProviderFilter::parse);
        let reg = Registry {
            inner: RwLock::new(Inner::default()),
            filter,
            disabled: config
                .disabled
                .iter()
                .map(|d| d.trim().to_ascii_lowercase())
                .collect(),
            warned_unknown: OnceLock::new(),
            hooks: RwLock::new(Vec::new()),
        };
        for entry in config.builtins {
            if let Err(e) = reg.register_entry(entry) {
                reg.builtin_failed(entry, &e);
            }
        }
        for dir in &config.plugin_dirs {
            reg.load_dir(dir);
        }
        reg
    }

    /// A linked-in provider whose init failed: logged, and kept for the load report as
    /// `built-in <name>` with the reason (what `fi_info -l` prints under "not loaded"),
    /// after the plugin records.
    /// `FI_ENODEV` (no hardware, no driver library) is an expected condition: logged at
    /// info level only.
    fn builtin_failed(&self, entry: &'static PluginEntry, e: &Error) {
        if e.code() == Errno::ENODEV {
            tracing::info!(target: "ofi", prov = "core", subsys = "core",
                "built-in provider not available: {e}");
        } else {
            tracing::warn!(target: "ofi", prov = "core", subsys = "core",
                "built-in provider failed to initialise: {e}");
        }
        // SAFETY: a linked-in entry's name is a NUL-terminated 'static string.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.name) }.to_string_lossy();
        self.write().builtin_failures.push(LoadRecord {
            path: std::path::PathBuf::from(format!("built-in {name}")),
            outcome: LoadOutcome::InitFailed {
                error: e.to_string(),
            },
        });
    }

    /// Register a linked-in provider from its entry (the same table path a plugin takes).
    pub fn register_entry(&self, entry: &'static PluginEntry) -> Result<()> {
        crate::host_table::install();
        // SAFETY: a linked-in entry is a 'static of this process, built by
        // `abi::entry_for` from the same ofi-core, so its layout is ours.
        let handle = unsafe { ProviderHandle::init(entry, None) }?;
        self.register(handle, None);
        Ok(())
    }

    /// Scan one plugin directory and register what loads.
    pub fn load_dir(&self, dir: &std::path::Path) {
        let files = match loader::scan_dir(dir) {
            Ok(f) => f,
            Err(reason) => {
                tracing::info!(target: "ofi", prov = "core", subsys = "core",
                    "plugin directory {} skipped: {reason}", dir.display());
                self.write().report.push(LoadRecord {
                    path: dir.to_path_buf(),
                    outcome: LoadOutcome::DirUnreadable { reason },
                });
                return;
            }
        };
        for path in files {
            let (outcome, handle) = loader::load_file(&path, self.filter.as_ref(), &self.disabled);
            match &outcome {
                LoadOutcome::Loaded { .. } => {}
                other => tracing::warn!(target: "ofi", prov = "core", subsys = "core",
                    "plugin {}: {other}", path.display()),
            }
            let index = {
                let mut inner = self.write();
                inner.report.push(LoadRecord {
                    path: path.clone(),
                    outcome,
                });
                inner.report.len() - 1
            };
            if let Some(handle) = handle {
                if let Some(winner) = self.register(handle, Some(path)) {
                    self.write().report[index].outcome = LoadOutcome::Superseded { by: winner };
                }
            }
        }
    }

    /// Add a provider; resolves a name clash. Returns the winner's description when the
    /// newcomer lost.
    fn register(&self, handle: ProviderHandle, path: Option<PathBuf>) -> Option<String> {
        let mut inner = self.write();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let mut slot = Slot {
            handle: Arc::new(handle),
            path,
            superseded_by: None,
            seq,
        };
        let name = slot.handle.name().to_ascii_lowercase();
        let mut lost_to = None;
        if let Some(old) = inner
            .slots
            .iter_mut()
            .find(|s| s.superseded_by.is_none() && s.handle.name().eq_ignore_ascii_case(&name))
        {
            let (ov, nv) = (old.handle.version(), slot.handle.version());
            let newcomer_wins = nv > ov || (nv == ov && slot.path.is_some() && old.path.is_none());
            if newcomer_wins {
                old.superseded_by = Some(slot.origin());
            } else {
                let by = old.origin();
                slot.superseded_by = Some(by.clone());
                lost_to = Some(by);
            }
        }
        inner.slots.push(slot);
        lost_to
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Active providers in getinfo order.
    fn active(&self) -> Vec<Arc<ProviderHandle>> {
        let inner = self.read();
        let mut slots: Vec<&Slot> = inner
            .slots
            .iter()
            .filter(|s| s.superseded_by.is_none())
            .collect();
        slots.sort_by_key(|s| (std::cmp::Reverse(s.handle.priority()), s.seq));
        slots.into_iter().map(|s| s.handle.clone()).collect()
    }

    /// Every registered provider, active ones first in getinfo order, then superseded.
    pub fn providers(&self) -> Vec<ProviderRecord> {
        let inner = self.read();
        let mut slots: Vec<&Slot> = inner.slots.iter().collect();
        slots.sort_by_key(|s| {
            (
                s.superseded_by.is_some(),
                std::cmp::Reverse(s.handle.priority()),
                s.seq,
            )
        });
        slots
            .into_iter()
            .map(|s| ProviderRecord {
                name: s.handle.name().to_string(),
                version: s.handle.version(),
                kind: s.handle.kind(),
                priority: s.handle.priority(),
                path: s.path.clone(),
                superseded_by: s.superseded_by.clone(),
            })
            .collect()
    }

    /// What became of every plugin candidate file, then of every built-in provider whose
    /// init failed.
    pub fn load_report(&self) -> Vec<LoadRecord> {
        let g = self.read();
        g.report
            .iter()
            .chain(g.builtin_failures.iter())
            .cloned()
            .collect()
    }

    /// The active provider called `name` (case-insensitive).
    pub fn find(&self, name: &str) -> Option<Arc<ProviderHandle>> {
        self.active()
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(name))
    }

    /// The `FI_PROVIDER` filter in force, if any.
    pub fn filter(&self) -> Option<&ProviderFilter> {
        self.filter.as_ref()
    }

    fn warn_unknown_names(&self, filter: &ProviderFilter) {
        self.warned_unknown.get_or_init(|| {
            let known: Vec<String> = self
                .providers()
                .iter()
                .map(|p| p.name.to_ascii_lowercase())
                .collect();
            for name in filter.names() {
                if !known.iter().any(|k| k == name) {
                    tracing::warn!(target: "ofi", prov = "core", subsys = "core",
                        "FI_PROVIDER names '{}', which is not a known provider (known: {})",
                        ofi_core::text::shorten(name, ofi_core::text::SHOWN), known.join(", "));
                }
            }
        });
    }

    /// getinfo across every provider, with the explain report. On failure the verdicts
    /// say why each provider was filtered or rejected.
    pub fn getinfo_explain(&self, req: &GetinfoRequest) -> (Result<Vec<Info>>, Vec<Verdict>) {
        let _calling = Calling::enter(self);
        if let Err(e) = getinfo::validate_request(req) {
            return (Err(e), Vec::new());
        }
        if req.flags == GetinfoFlags::PROV_ATTR_ONLY {
            return (Ok(self.attr_only()), Vec::new());
        }
        if let Some(f) = &self.filter {
            self.warn_unknown_names(f);
        }
        let hint_filter = hints_filter(req);
        let filters: Vec<(&ProviderFilter, String)> = self
            .filter
            .iter()
            .map(|f| {
                let text = f.to_string();
                (
                    f,
                    format!(
                        "FI_PROVIDER={}",
                        ofi_core::text::shorten(&text, ofi_core::text::SHOWN)
                    ),
                )
            })
            .chain(hint_filter.iter().map(|f| {
                let text = f.to_string();
                let shown = ofi_core::text::shorten(&text, ofi_core::text::SHOWN);
                (f, format!("hints.fabric_attr.prov_name={shown}"))
            }))
            .collect();
        self.collect(req, false, &filters)
    }

    /// getinfo as an application calls it.
    pub fn getinfo(&self, req: &GetinfoRequest) -> Result<Vec<Info>> {
        self.getinfo_explain(req).0
    }

    /// getinfo over core providers only, for utility providers to layer on. The user's
    /// `FI_PROVIDER` is not applied here (it is applied to the utility's stacked
    /// results); the hints' prov_name still is.
    pub fn getinfo_core(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        let _calling = Calling::enter(self);
        if let Err(e) = getinfo::validate_request(req) {
            return GetinfoOutcome {
                infos: Vec::new(),
                verdicts: Vec::new(),
                error: Some(e),
            };
        }
        let hint_filter = hints_filter(req);
        let filters: Vec<(&ProviderFilter, String)> = hint_filter
            .iter()
            .map(|f| (f, format!("hints.fabric_attr.prov_name={f}")))
            .collect();
        let (res, verdicts) = self.collect(req, true, &filters);
        into_outcome(res, verdicts)
    }

    fn collect(
        &self,
        req: &GetinfoRequest,
        core_only: bool,
        filters: &[(&ProviderFilter, String)],
    ) -> (Result<Vec<Info>>, Vec<Verdict>) {
        let mut infos = Vec::new();
        let mut verdicts = Vec::new();
        let mut errors: Vec<Error> = Vec::new();
        let mut asked = 0usize;
        for prov in self.active() {
            let name = prov.name().to_string();
            match prov.kind() {
                ProviderKind::Hook => continue,
                ProviderKind::Utility if core_only => continue,
                _ => {}
            }
            let ruled_out = |f: &ProviderFilter| match prov.kind() {
                ProviderKind::Utility => f.excludes_utility_entirely(&name),
                _ => f.excludes_entirely(&name),
            };
            if let Some((_, rule)) = filters.iter().find(|(f, _)| ruled_out(f)) {
                verdicts.push(filtered(&name, rule.clone()));
                continue;
            }
            asked += 1;
            let outcome = prov.getinfo(req);
            verdicts.extend(outcome.verdicts);
            if let Some(e) = outcome.error {
                tracing::info!(target: "ofi", prov = %name, subsys = "core", "getinfo: {e}");
                errors.push(e);
            }
            for mut info in outcome.infos {
                stamp(&mut info, &name, prov.kind(), prov.version(), req.version);
                let stack = info.prov_name().to_string();
                if let Some((_, rule)) = filters.iter().find(|(f, _)| !f.keeps(&stack)) {
                    verdicts.push(filtered(&stack, rule.clone()));
                    continue;
                }
                infos.push(info);
            }
        }
        if !infos.is_empty() {
            return (Ok(infos), verdicts);
        }
        // Every provider that answered failed with the same hard error: report it.
        if asked > 0 && errors.len() == asked {
            let first = errors[0].code();
            if first != Errno::ENODATA && errors.iter().all(|e| e.code() == first) {
                return (Err(errors.swap_remove(0)), verdicts);
            }
        }
        (
            Err(Error::new(Errno::ENODATA, explain_nodata(&verdicts))),
            verdicts,
        )
    }

    /// `FI_PROV_ATTR_ONLY`: one info per registered provider (utilities, hooks and
    /// superseded copies included) with only the provider name and version filled in.
    fn attr_only(&self) -> Vec<Info> {
        self.providers()
            .into_iter()
            .map(|p| {
                let mut info = Info::new();
                info.fabric_attr.prov_name = Some(p.name);
                info.fabric_attr.prov_version = p.version;
                info.fabric_attr.api_version = crate::version::API_VERSION;
                info
            })
            .collect()
    }

    /// Set the hooks every fabric this registry opens is wrapped in, in order (see
    /// [`parse_hook_list`] for the grammar; empty: none). `FI_ENOENT` (and nothing
    /// changes) if a name is not a registered hook provider.
    pub fn set_hooks(&self, spec: &str) -> Result<()> {
        let names = parse_hook_list(spec);
        if names.len() > MAX_HOOKS {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "a list of {} hooks: at most {MAX_HOOKS} are supported",
                    names.len()
                ),
            ));
        }
        for n in &names {
            if !self.find(n).is_some_and(|h| h.kind() == ProviderKind::Hook) {
                return Err(Error::new(
                    Errno::ENOENT,
                    format!("hook '{n}' is not a registered hook provider"),
                ));
            }
        }
        *self.hooks.write().unwrap_or_else(|p| p.into_inner()) = names;
        Ok(())
    }

    /// Builder-style [`Registry::set_hooks`].
    pub fn with_hooks(self, spec: &str) -> Result<Registry> {
        self.set_hooks(spec)?;
        Ok(self)
    }

    /// The hook providers fabrics are wrapped in, in order.
    pub fn hooks(&self) -> Vec<String> {
        self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Take `FI_HOOK` (global registry): unknown names are skipped with a warning.
    fn hooks_from_environment(&self) {
        let Some(spec) = crate::param::get_str(None, "hook").ok().flatten() else {
            return;
        };
        let mut names = parse_hook_list(&spec);
        if names.len() > MAX_HOOKS {
            tracing::warn!(target: "ofi", prov = "core", subsys = "core",
                "FI_HOOK lists {} hooks, more than the {MAX_HOOKS} supported: no hook applied",
                names.len());
            return;
        }
        names.retain(|n| {
            let ok = self.find(n).is_some_and(|h| h.kind() == ProviderKind::Hook);
            if !ok {
                tracing::warn!(target: "ofi", prov = "core", subsys = "core",
                    "FI_HOOK names '{n}', which is not a registered hook provider: skipped");
            }
            ok
        });
        *self.hooks.write().unwrap_or_else(|p| p.into_inner()) = names;
    }

    /// Open a fabric with the provider at the top of `info`'s provider stack, wrapped
    /// in the registry's hooks (none by default; `FI_HOOK` for the global registry).
    pub fn open_fabric(&self, info: &Info) -> Result<Fabric> {
        let _calling = Calling::enter(self);
        let mut fabric = self.open_fabric_unhooked(info)?;
        let hooks = self.hooks();
        for name in &hooks {
            let hook = self
                .find(name)
                .ok_or_else(|| Error::new(Errno::ENODEV, format!("no hook named '{name}'")))?;
            fabric = open_hook(&hook, info, fabric)?;
        }
        Ok(fabric)
    }

    /// Open a fabric with the provider at the top of `info`'s provider stack, without
    /// hooks.
    pub fn open_fabric_unhooked(&self, info: &Info) -> Result<Fabric> {
        let _calling = Calling::enter(self);
        let stack = info.prov_name();
        if stack.is_empty() {
            return Err(Error::new(
                Errno::EINVAL,
                "fabric_attr.prov_name is not set",
            ));
        }
        let top = select::top_of_stack(stack);
        let prov = self
            .find(top)
            .ok_or_else(|| Error::new(Errno::ENODEV, format!("no provider named '{top}'")))?;
        prov.open_fabric(info)
    }
}

/// The provider filter a request's `hints.fabric_attr.prov_name` asks for, if any.
fn hints_filter(req: &GetinfoRequest) -> Option<ProviderFilter> {
    req.hints
        .as_ref()
        .and_then(|h| h.fabric_attr.prov_name.as_deref())
        .and_then(ProviderFilter::parse)
}

/// A registry answer as the outcome form the host table passes to providers.
fn into_outcome(res: Result<Vec<Info>>, verdicts: Vec<Verdict>) -> GetinfoOutcome {
    match res {
        Ok(infos) => GetinfoOutcome {
            infos,
            verdicts,
            error: None,
        },
        Err(e) => GetinfoOutcome {
            infos: Vec::new(),
            verdicts,
            error: Some(e),
        },
    }
}

fn filtered(provider: &str, rule: String) -> Verdict {
    Verdict {
        provider: provider.to_string(),
        template: 0,
        kind: VerdictKind::Filtered,
        field: rule,
        asked: String::new(),
        offered: String::new(),
    }
}

/// Name the result after the provider stack and stamp versions: a utility's result
/// that names the core beneath it becomes `core;util`.
fn stamp(info: &mut Info, name: &str, kind: ProviderKind, version: Version, api: Version) {
    let fa = &mut info.fabric_attr;
    match (kind, fa.prov_name.as_deref()) {
        (ProviderKind::Utility, Some(inner))
            if !inner.is_empty() && select::top_of_stack(inner) != name =>
        {
            fa.prov_name = Some(format!("{inner};{name}"));
        }
        (_, Some(n)) if !n.is_empty() => {}
        _ => fa.prov_name = Some(name.to_string()),
    }
    if select::top_of_stack(fa.prov_name.as_deref().unwrap_or("")).eq_ignore_ascii_case(name) {
        fa.prov_version = version;
    }
    if fa.api_version == Version::default() {
        fa.api_version = api;
    }
}

/// One line saying why nothing matched, from the verdicts (first reason per provider).
pub fn explain_nodata(verdicts: &[Verdict]) -> String {
    let mut reasons: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for v in verdicts.iter().filter(|v| v.kind != VerdictKind::Kept) {
        if seen.contains(&v.provider.as_str()) {
            continue;
        }
        seen.push(&v.provider);
        reasons.push(match v.kind {
            VerdictKind::Filtered => format!("{} filtered by {}", v.provider, v.field),
            _ if v.asked.is_empty() && v.offered.is_empty() => {
                format!("{} rejected {}", v.provider, v.field)
            }
            _ => format!(
                "{} rejected {} (asked {}, offers {})",
                v.provider, v.field, v.asked, v.offered
            ),
        });
    }
    if reasons.is_empty() {
        "no provider is available".to_string()
    } else {
        format!("no provider matched: {}", reasons.join("; "))
    }
}

static BUILTINS: Mutex<Vec<&'static PluginEntry>> = Mutex::new(Vec::new());
static GLOBAL: OnceLock<Registry> = OnceLock::new();

/// Offer a linked-in provider to the global registry. Called by the `ofi` crate for
/// each in-tree provider before the registry is first used; an entry offered after
/// that is registered at once.
pub fn add_builtin(entry: &'static PluginEntry) {
    if let Some(reg) = GLOBAL.get() {
        let known = reg.providers().iter().any(|p| {
            // SAFETY: a linked-in entry's name is a NUL-terminated 'static string.
            let n = unsafe { std::ffi::CStr::from_ptr(entry.name) };
            n.to_str()
                .is_ok_and(|n| n.eq_ignore_ascii_case(&p.name) && p.path.is_none())
        });
        if !known {
            if let Err(e) = reg.register_entry(entry) {
                reg.builtin_failed(entry, &e);
            }
        }
        return;
    }
    let mut list = BUILTINS.lock().unwrap_or_else(|p| p.into_inner());
    if !list.iter().any(|e| std::ptr::eq(*e, entry)) {
        list.push(entry);
    }
}

/// The process-wide registry, built on first use from the environment.
pub fn global() -> &'static Registry {
    GLOBAL.get_or_init(|| {
        crate::log::init();
        let builtins = BUILTINS.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let reg = Registry::build(RegistryConfig::from_environment(builtins));
        reg.hooks_from_environment();
        // Every provider of the process has declared its parameters by now.
        crate::param::warn_unknown_config_keys();
        reg
    })
}

/// getinfo for the host table: what a utility provider (or any plugin) calls to reach
/// the providers of this process — those of the registry that called it (see the
/// module docs).
pub fn host_getinfo(req: &GetinfoRequest, core_only: bool) -> GetinfoOutcome {
    with_calling(|r| {
        if core_only {
            return r.getinfo_core(req);
        }
        let (res, verdicts) = r.getinfo_explain(req);
        into_outcome(res, verdicts)
    })
}

/// Open a fabric for the host table: through the registry that called the provider
/// asking (see the module docs), else the global registry.
pub fn open_fabric(info: &Info) -> Result<Fabric> {
    with_calling(|r| r.open_fabric(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `FI_HOOK` grammar: `;` or `,` between names, blanks and empty names
    /// skipped, short names and any case taken (the cases of the hook crate's
    /// integration test included).
    #[test]
    fn hook_list_accepts_both_separators_and_short_names() {
        let cases: [(&str, &[&str]); 4] = [
            (
                " perf ;TRACE,,ofi_hook_noop",
                &["ofi_hook_perf", "ofi_hook_trace", "ofi_hook_noop"],
            ),
            (
                "perf;Trace, ,ofi_hook_debug,",
                &["ofi_hook_perf", "ofi_hook_trace", "ofi_hook_debug"],
            ),
            ("", &[]),
            (" ; , ", &[]),
        ];
        for (spec, want) in cases {
            assert_eq!(parse_hook_list(spec), want, "FI_HOOK={spec:?}");
        }
    }

    #[test]
    fn no_inner_fabric_outside_a_hook_open() {
        assert!(take_hook_inner().is_none());
    }

    #[test]
    fn unknown_hooks_are_enoent() {
        let reg = Registry::build(RegistryConfig::default());
        assert_eq!(reg.set_hooks("perf").unwrap_err().code(), Errno::ENOENT);
        assert!(reg.hooks().is_empty());
        reg.set_hooks(" ; ")
            .expect("an empty list needs no provider");
    }
}
