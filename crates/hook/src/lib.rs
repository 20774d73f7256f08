//! ofi-hook: hooks perf, trace, debug, noop and fault, over any provider (DESIGN §8).
//!
//! # How a hook works
//!
//! A hook is a provider of kind [`ProviderKind::Hook`](ofi_core::abi::ProviderKind::Hook) (`ofi_hook_perf`, …). When
//! `FI_HOOK` (or `Registry::set_hooks` of the host)
//! names hooks, the core's `open_fabric` opens the real fabric and then opens each
//! hook's fabric in order; a hook's [`Provider::fabric`](ofi_core::provider::Provider::fabric) takes the fabric beneath it
//! with [`Host::hook_inner_fabric`] and wraps it. Every object the application opens
//! from the hooked fabric is a wrapper ([`fabric`], [`domain`], [`ep`], [`cq`],
//! [`objects`]) that holds the inner object as the core's public type
//! (`ofi_core::Endpoint`, …) and forwards each call to it, so hooks work over
//! built-ins, plugins and utility providers alike, and a hook can itself be a plugin.
//!
//! What a hook does is a [`Hook`] implementation: one value per hooked fabric, called
//! around every call ([`Hook::around`], given the call as one request value, a
//! [`HookedCall`]: a data operation, a control call or a CQ / counter read), and after
//! CQ reads, binds and closes. The defaults forward and inline to nothing, so
//! [`noop::Noop`] is the bare cost of the wrapper. With no hook configured nothing is
//! wrapped at all.
//!
//! # Invariants
//!
//! - The wrappers keep the host's guarantees for the inner objects: a wrapper is
//!   dropped only after its children (the host's bookkeeping of the outer objects
//!   ensures it), and dropping a wrapper drops (and so closes) its inner object.
//!   `close` of a wrapper runs the hook's close callback and succeeds; the inner
//!   object is closed by the drop that follows at once (an inner close error is
//!   logged by the core then).
//! - Memory descriptors, keys, contexts and fabric addresses pass through unchanged:
//!   a hooked MR's `desc` is the inner MR's.
//!
//! # What may panic
//!
//! Nothing here panics on provider or peer input; the adapters catch panics at the
//! boundary regardless.

#![allow(clippy::too_many_arguments)]

pub mod call;
pub mod cq;
pub mod debug;
pub mod domain;
pub mod ep;
pub mod fabric;
pub mod fault;
pub mod noop;
pub mod objects;
pub mod perf;
mod provider;
pub mod trace;
mod trigger;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ofi_core::abi::object::AsFid;
use ofi_core::abi::ops::{OpFamily, OpKind};
use ofi_core::cq::{CqBuf, CqError};
use ofi_core::fabric::Fabric;
use ofi_core::param::ParamType;
use ofi_core::provider::{
    AvOf, BindTarget, CntrOf, CqOf, EpOf, EqOf, FabricOps, Host, MrBindTarget,
};
use ofi_core::{Info, OpFlags, Result, Version};

pub(crate) use call::HookCalls;
pub use call::{CallKind, CallText, HookedCall};
pub use cq::CqCore;

/// A hooked object made from the object beneath, sharing its parent's hook state: what
/// the generated forwarders of the open-style calls return (the lists' `forward …
/// => hooked`).
pub(crate) trait Hooked<'a, H: Hook>: Sized {
    /// The object beneath (with what else the wrapper needs, borrowed for `'a`).
    type Inner;
    /// Wrap `inner` for hook state `h`.
    fn hooked(inner: Self::Inner, h: Arc<H>) -> Self;
}

/// `Hooked` impls of the types made by `Type::new(inner, h)`.
macro_rules! hooked_by_new {
    ($($Type:ident: $Inner:ty;)*) => {$(
        impl<H: Hook> Hooked<'_, H> for $Type<H> {
            type Inner = $Inner;
            fn hooked(inner: $Inner, h: Arc<H>) -> Self {
                $Type::new(inner, h)
            }
        }
    )*};
}

hooked_by_new! {
    HookCntr: ofi_core::cntr::Counter;
}

/// A hooked object as a bind or a trywait hands it on: the object beneath, as the
/// call beneath takes it.
pub trait Beneath {
    /// The object beneath.
    fn beneath(&self) -> &dyn AsFid;
}

/// `Beneath` and `Debug` (the object's name in hook messages) of hooked types, from
/// where each keeps the object beneath and its name (`|this| (beneath, name)`).
/// Invoked in the module of the type (its fields stay private there).
macro_rules! beneath_and_name {
    ($($Type:ident |$this:ident| ($inner:expr, $name:expr);)*) => {$(
        impl<H: Hook> $crate::Beneath for $Type<H> {
            fn beneath(&self) -> &dyn ::ofi_core::abi::object::AsFid {
                let $this = self;
                &$inner
            }
        }

        impl<H: Hook> ::std::fmt::Debug for $Type<H> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $this = self;
                ::std::fmt::Display::fmt(&$name, f)
            }
        }
    )*};
}

pub(crate) use beneath_and_name;

/// The objects a bind hands on are the ones beneath those of the hook's family.
impl<F: FabricOps> Beneath for BindTarget<'_, F>
where
    CqOf<F>: Beneath,
    CntrOf<F>: Beneath,
    AvOf<F>: Beneath,
    EqOf<F>: Beneath,
    EpOf<F>: Beneath,
{
    fn beneath(&self) -> &dyn AsFid {
        match self {
            BindTarget::Cq(cq) => cq.beneath(),
            BindTarget::Cntr(cntr) => cntr.beneath(),
            BindTarget::Av(av) => av.beneath(),
            BindTarget::Eq(eq) => eq.beneath(),
            BindTarget::Stx(ep) | BindTarget::Srx(ep) => ep.beneath(),
        }
    }
}

impl<F: FabricOps> Beneath for MrBindTarget<'_, F>
where
    CntrOf<F>: Beneath,
    EpOf<F>: Beneath,
{
    fn beneath(&self) -> &dyn AsFid {
        match self {
            MrBindTarget::Ep(ep) => ep.beneath(),
            MrBindTarget::Cntr(cntr) => cntr.beneath(),
        }
    }
}

/// Hooked types that hold only the object beneath, the hook's state and a name: the
/// struct, `new`, `inner`, `forward` (what the generated forwarders use) and the
/// `Hooked` impl of each. Invoked in the module of the type (its fields stay private
/// there).
macro_rules! hooked_objects {
    ($(#[$doc:meta])* $Type:ident($Inner:ty, $label:literal);) => {
        $(#[$doc])*
        pub struct $Type<H: Hook> {
            inner: $Inner,
            h: Arc<H>,
            name: ObjName,
        }

        impl<H: Hook> $Type<H> {
            pub(crate) fn new(inner: $Inner, h: Arc<H>) -> $Type<H> {
                $Type {
                    inner,
                    h,
                    name: ObjName::new($label),
                }
            }

            /// The object beneath.
            pub fn inner(&self) -> &$Inner {
                &self.inner
            }

            /// What the generated forwarders use: the hook, the name and the object
            /// beneath.
            fn forward(&self) -> (&Arc<H>, &ObjName, &$Inner) {
                (&self.h, &self.name, &self.inner)
            }
        }

        impl<H: Hook> $crate::Hooked<'_, H> for $Type<H> {
            type Inner = $Inner;
            fn hooked(inner: $Inner, h: Arc<H>) -> Self {
                $Type::new(inner, h)
            }
        }
    };
}

pub(crate) use hooked_objects;

/// The forwarder of `bind_eq` (a domain's, passive endpoint's or AV's: the provider
/// method outside the lists that binds an EQ), seen by the hooks as the control call
/// `what`; inside the impl of the class's trait for a type of `hooked_objects!`.
macro_rules! bind_eq_forwarder {
    ($what:literal) => {
        fn bind_eq(&self, eq: &$crate::objects::HookEq<H>, flags: u64) -> ofi_core::Result<()> {
            let (h, name, inner) = self.forward();
            h.ctl(
                name,
                $what,
                || format!("flags={flags:#x}"),
                || inner.bind_eq(eq.inner(), flags),
            )
        }
    };
}

pub(crate) use bind_eq_forwarder;

/// Writes provider-trait methods outside the lists that open a queue in a hooked wait
/// set (they name the hook's wait set type): the object beneath opens it with
/// `$beneath` in the set beneath, seen by the hooks as the control call `$what`;
/// `$inner` makes what [`Hooked`] wraps of the queue beneath and the attribute. Inside
/// the impl of the class's trait for a type with a `forward()` method.
/// `fn method(&Attr) -> Out = beneath, "what", |queue, attr| inner;`
macro_rules! open_in_set_forwarders {
    ($(fn $method:ident(&$Attr:ty) -> $Out:ty = $beneath:ident, $what:literal, $inner:expr;)*) => {$(
        fn $method(
            &self,
            attr: &$Attr,
            set: &$crate::objects::HookWait<H>,
            context: usize,
        ) -> ofi_core::Result<$Out> {
            let (h, name, inner) = self.forward();
            let q = h.ctl(
                name,
                $what,
                || format!("attr={attr:?} wait_set context={context:#x}"),
                || inner.$beneath(attr, set.inner(), context),
            )?;
            Ok(<$Out as $crate::Hooked<'_, H>>::hooked(($inner)(q, attr), h.clone()))
        }
    )*};
}

pub(crate) use open_in_set_forwarders;

impl<H: Hook> Hooked<'_, H> for HookCq<H> {
    /// The CQ beneath and its size.
    type Inner = (ofi_core::cq::CompletionQueue, usize);
    fn hooked((cq, size): Self::Inner, h: Arc<H>) -> Self {
        HookCq::new(cq, size, h)
    }
}

impl<'a, H: Hook> Hooked<'a, H> for HookEp<H> {
    /// The endpoint beneath, the info it was opened for (none for shared contexts)
    /// and its class in hook messages.
    type Inner = (ofi_core::ep::Endpoint, Option<&'a Info>, &'static str);
    fn hooked((ep, info, class): Self::Inner, h: Arc<H>) -> Self {
        HookEp::new(ep, info, h, class)
    }
}
pub use ep::EpCore;
pub use fabric::HookFabric;
pub use provider::{
    builtin_entries, DebugProvider, FaultProvider, HookProvider, NoopProvider, PerfProvider,
    TraceProvider,
};

use cq::HookCq;
use ep::HookEp;
use objects::HookCntr;

/// The hooks' provider version (`prov_version`).
pub const VERSION: Version = Version::new(1, 0);

/// Writes, from the list of data operations
/// ([`ofi_core::for_each_ep_data_op!`]), the [`Op`] enum (one variant per operation,
/// then the CQ and counter reads), its names and its kinds.
macro_rules! hook_ops {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt $c:tt $p:tt $low:tt;)*
    } $queries:tt)*) => {
        /// A data operation, as hooks see it (one per data call of the C API, in the
        /// order of the list of operations), and the reads of CQs and counters.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Op {
            $($($(#[$doc])* $V,)*)*
            /// `fi_cq_read` (and `fi_cq_readfrom`).
            CqRead,
            /// `fi_cq_readerr`.
            CqReaderr,
            /// `fi_cq_sread` (and `fi_cq_sreadfrom`).
            CqSread,
            /// `fi_cntr_read`.
            CntrRead,
        }

        impl Op {
            const COUNT: usize =
                [$($(Op::$V,)*)* Op::CqRead, Op::CqReaderr, Op::CqSread, Op::CntrRead].len();

            /// Every operation, in declaration order (`ALL[op as usize] == op`).
            pub const ALL: [Op; Op::COUNT] =
                [$($(Op::$V,)*)* Op::CqRead, Op::CqReaderr, Op::CqSread, Op::CntrRead];

            /// The C API's name (`fi_send` → `"send"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $($(Op::$V => stringify!($name),)*)*
                    Op::CqRead => "cq_read",
                    Op::CqReaderr => "cq_readerr",
                    Op::CqSread => "cq_sread",
                    Op::CntrRead => "cntr_read",
                }
            }

            /// What an endpoint data operation is (its family and flags, from the
            /// list); `None` for the CQ and counter reads.
            pub const fn kind(self) -> Option<OpKind> {
                match self {
                    $($(Op::$V => Some(ofi_core::op_kind!($kind)),)*)*
                    Op::CqRead | Op::CqReaderr | Op::CqSread | Op::CntrRead => None,
                }
            }
        }
    };
}

ofi_core::for_each_ep_data_op!(hook_ops);

impl Op {
    /// The operation called `name` (as [`Op::name`], case-insensitive, `fi_` prefix
    /// allowed).
    pub fn from_name(name: &str) -> Option<Op> {
        let n = name.trim().to_ascii_lowercase();
        let n = n.strip_prefix("fi_").unwrap_or(&n);
        Op::ALL.iter().copied().find(|o| o.name() == n)
    }

    /// The endpoint data operation of kind `kind`, if the list has one.
    pub fn of_kind(kind: OpKind) -> Option<Op> {
        Op::ALL.iter().copied().find(|o| o.kind() == Some(kind))
    }

    /// A transmit operation (its completion goes to the transmit CQ).
    pub const fn is_tx(self) -> bool {
        !self.is_rx() && !self.is_cq()
    }

    /// A receive operation (`recv*`, `trecv*`).
    pub const fn is_rx(self) -> bool {
        match self.kind() {
            Some(k) => k.is_rx(),
            None => false,
        }
    }

    /// A read of a CQ or counter (not an endpoint operation).
    pub const fn is_cq(self) -> bool {
        self.kind().is_none()
    }

    /// An inject (never completes to a CQ).
    pub const fn is_inject(self) -> bool {
        match self.kind() {
            Some(k) => k.inject,
            None => false,
        }
    }

    /// A `*msg` variant (carries its own operation flags).
    pub const fn is_msg(self) -> bool {
        match self.kind() {
            Some(k) => k.msg,
            None => false,
        }
    }

    /// A tagged operation (`t*`).
    pub const fn is_tagged(self) -> bool {
        match self.kind() {
            Some(k) => k.tagged,
            None => false,
        }
    }

    /// A message send (`send*`, `inject*`, and their tagged forms): what the fault hook
    /// acts on over `FI_EP_DGRAM`.
    pub const fn is_msg_send(self) -> bool {
        match self.kind() {
            Some(k) => matches!(k.family, OpFamily::Send),
            None => false,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One data call as hooks see it: which operation, its payload size, its context and
/// (for `*msg` calls) its flags. Cheap to build; nothing is computed unless a hook
/// looks.
#[derive(Clone, Copy, Debug)]
pub struct OpCall {
    /// The operation.
    pub op: Op,
    /// Payload bytes (sum of the iov lengths; elements × size for atomics: 0).
    pub bytes: usize,
    /// The operation context (0 for injects).
    pub context: usize,
    /// The `*msg` call's flags (`None` for the other calls).
    pub flags: Option<OpFlags>,
}

/// The name of a hooked object in hook messages: its class and a number unique in the
/// process (`endpoint #7`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjName {
    /// The class (`fabric`, `domain`, `endpoint`, `cq`, …).
    pub class: &'static str,
    /// A number unique in the process.
    pub id: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl ObjName {
    /// A new name of class `class`.
    pub fn new(class: &'static str) -> ObjName {
        ObjName {
            class,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl fmt::Display for ObjName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} #{}", self.class, self.id)
    }
}

/// One parameter of a hook, as [`Hook::PARAMS`] lists them: variable
/// `FI_OFI_HOOK_<SHORT>_<NAME>` (then `plugins.toml`, then `default`).
#[derive(Clone, Copy, Debug)]
pub struct HookParam {
    /// The name (`rate` for `FI_OFI_HOOK_TRACE_RATE`).
    pub name: &'static str,
    /// Its type.
    pub ty: ParamType,
    /// What it does (shown by `fi_info -e`).
    pub help: &'static str,
    /// The value when unset.
    pub default: Option<&'static str>,
}

impl HookParam {
    /// Parameter `name` of type `ty`, described by `help`, `default` when unset.
    pub const fn new(
        name: &'static str,
        ty: ParamType,
        help: &'static str,
        default: Option<&'static str>,
    ) -> HookParam {
        HookParam {
            name,
            ty,
            help,
            default,
        }
    }
}

/// What a hook does: one value per hooked fabric, called around the calls made on its
/// objects. Every method has a forwarding default, so a hook implements only what it
/// needs; the defaults inline away (the cost of [`noop::Noop`] is the wrapper's own).
pub trait Hook: Sized + Send + Sync + 'static {
    /// The provider name (`ofi_hook_<short>`; `FI_HOOK` uses the short name).
    const NAME: &'static str;
    /// True if the hook intercepts message sends on `FI_EP_DGRAM` endpoints
    /// ([`Hook::dgram_send`]) and may queue completions of its own; otherwise that
    /// path is compiled out.
    const SENDS: bool = false;
    /// True if the hook wants [`Hook::cq_read`] / [`Hook::cq_readerr`] callbacks.
    const CQ_EVENTS: bool = false;
    /// Per-endpoint data of the hook.
    type EpData: Default + Send + Sync + 'static;
    /// Per-CQ data of the hook.
    type CqData: Default + Send + Sync + 'static;

    /// The hook's parameters (`FI_OFI_HOOK_<SHORT>_<NAME>`), declared at provider init
    /// and read in [`Hook::open`].
    const PARAMS: &'static [HookParam] = &[];

    /// Declare the hook's parameters (at provider init): those of [`Hook::PARAMS`].
    fn declare(host: &Host) -> Result<()> {
        for p in Self::PARAMS {
            host.declare_param(p.name, p.ty, p.help, p.default)?;
        }
        Ok(())
    }

    /// The hook for one fabric: `inner` is the fabric beneath (its provider name is
    /// `info.fabric_attr.prov_name`). Read parameters here.
    fn open(host: &Host, info: &Info, inner: &Fabric) -> Result<Self>;

    /// Around every call made on the hook's objects: each data operation
    /// ([`CallKind::Data`]), control call ([`CallKind::Ctl`]: open, bind, enable, close,
    /// AV and MR calls, …) and read of a CQ or counter ([`CallKind::Read`]). Forward the
    /// call ([`HookedCall::forward`]) and return its result, or return without
    /// forwarding it.
    #[inline(always)]
    fn around<R: fmt::Debug>(
        &self,
        call: HookedCall<'_, Self, impl Fn() -> String, impl FnOnce() -> Result<R>>,
    ) -> Result<R> {
        call.forward()
    }

    /// A message send on an `FI_EP_DGRAM` endpoint (only with [`Hook::SENDS`]):
    /// `Some(result)` if the hook handled it (dropped, queued, duplicated…), `None` to
    /// forward it normally. `held` captures the call so it can be issued later.
    fn dgram_send(
        &self,
        _ep: &EpCore<Self>,
        _call: OpCall,
        _held: impl FnOnce() -> fault::Held,
    ) -> Option<Result<()>> {
        None
    }

    /// After a CQ read that returned entries in `buf` (only with [`Hook::CQ_EVENTS`]).
    fn cq_read(&self, _cq: &CqCore<Self>, _buf: &CqBuf<'_>, _n: usize) {}

    /// After a CQ error entry was read (only with [`Hook::CQ_EVENTS`]).
    fn cq_readerr(&self, _cq: &CqCore<Self>, _err: &CqError) {}

    /// Progress hook: called on every CQ read before the inner read (only with
    /// [`Hook::SENDS`]).
    fn progress(&self, _cq: &CqCore<Self>) {}

    /// True if the hook holds work for `cq` that only a read of it releases (held
    /// sends, its own completions): `fi_trywait` must then say `FI_EAGAIN` (only with
    /// [`Hook::SENDS`]).
    fn busy(&self, _cq: &CqCore<Self>) -> bool {
        false
    }

    /// An endpoint is closing.
    fn ep_close(&self, _ep: &EpCore<Self>) {}

    /// The fabric is closing (after all its objects): summaries go here.
    fn fabric_close(&self, _fabric: &ObjName) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_table_is_in_order_and_names_round_trip() {
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
        assert_eq!(Op::from_name("FI_SEND"), Some(Op::Send));
        assert_eq!(Op::from_name("nope"), None);
        assert!(Op::Send.is_tx() && Op::Recv.is_rx() && !Op::Recv.is_tx());
        assert!(Op::Inject.is_msg_send() && !Op::Write.is_msg_send());
    }
}
