//! Hooked endpoints (active, scalable, contexts, aliases) and passive endpoints.
//!
//! Every data call builds an [`OpCall`] and goes through [`Hook::around`]; message sends
//! on `FI_EP_DGRAM` endpoints also go through [`Hook::dgram_send`] when the hook
//! intercepts sends ([`Hook::SENDS`], the fault hook). Pointers, descriptors,
//! contexts and addresses are passed to the endpoint beneath unchanged.
//!
//! Invariants: [`EpCore`] is shared (an `Arc`) only with the CQs it is bound to, as a
//! `Weak`, so a closed endpoint's core is dropped with its wrapper. The CQ / counter
//! bindings are recorded once (the first bind for a direction wins, as providers
//! refuse a second one). Nothing here panics.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ofi_core::abi::ops::{OpFamily, OpKind};
use ofi_core::abi::raw::{Msg, MsgAtomic, MsgRma, MsgTagged};
use ofi_core::ep::Endpoint;
use ofi_core::ep::{Multicast, PassiveEndpoint};
use ofi_core::provider::{BindTarget, EndpointOps, PassiveEndpointOps};
use ofi_core::{AtomicOp, Datatype, EpType, Errno, Error, Info, OpFlags, Result};

use crate::cq::CqCore;
use crate::fabric::{HookFabric, HookFamily};
use crate::fault::Held;
use crate::objects::CntrCore;
use crate::{Beneath, CallKind, Hook, HookCalls, HookedCall, ObjName, Op, OpCall};

/// A CQ an endpoint is bound to, for one direction.
pub struct CqBinding<H: Hook> {
    /// The CQ.
    pub cq: Arc<CqCore<H>>,
    /// Bound with `FI_SELECTIVE_COMPLETION`.
    pub selective: bool,
}

/// The state of a hooked endpoint that hooks see.
pub struct EpCore<H: Hook> {
    /// The endpoint beneath.
    pub inner: Endpoint,
    /// Its name in hook messages.
    pub name: ObjName,
    /// An `FI_EP_DGRAM` endpoint.
    pub dgram: bool,
    /// Default transmit operation flags (`tx_attr.op_flags`).
    pub tx_op_flags: OpFlags,
    /// Default receive operation flags (`rx_attr.op_flags`).
    pub rx_op_flags: OpFlags,
    /// `tx_attr.inject_size`.
    pub inject_size: usize,
    /// Set by a successful `fi_enable`.
    pub enabled: AtomicBool,
    /// The transmit CQ, once bound.
    pub tx_cq: OnceLock<CqBinding<H>>,
    /// The receive CQ, once bound.
    pub rx_cq: OnceLock<CqBinding<H>>,
    /// The counter of transmit completions, once bound.
    pub tx_cntr: OnceLock<Arc<CntrCore>>,
    /// The hook's own data.
    pub data: H::EpData,
}

impl<H: Hook> EpCore<H> {
    /// The CQ the completion of `call` goes to, if the call generates one (not an
    /// inject; not suppressed by `FI_SELECTIVE_COMPLETION`).
    pub fn completion_cq(&self, call: &OpCall) -> Option<&CqBinding<H>> {
        if call.op.is_inject() || call.op.is_cq() {
            return None;
        }
        let (b, defaults) = if call.op.is_rx() {
            (self.rx_cq.get()?, self.rx_op_flags)
        } else {
            (self.tx_cq.get()?, self.tx_op_flags)
        };
        if b.selective {
            let flags = call.flags.unwrap_or(defaults);
            if !flags.contains(OpFlags::COMPLETION) {
                return None;
            }
        }
        Some(b)
    }
}

/// An endpoint wrapped by hook `H`.
pub struct HookEp<H: Hook> {
    core: Arc<EpCore<H>>,
    h: Arc<H>,
    mcs: Mutex<Vec<Multicast>>,
}

/// An argument as the trace hook prints it (`name=value`).
pub trait TraceArg {
    /// Append ` name=value` to `out`.
    fn trace(&self, name: &str, out: &mut String);
}

macro_rules! trace_as {
    ($($t:ty => $fmt:literal;)*) => {$(
        impl TraceArg for $t {
            fn trace(&self, name: &str, out: &mut String) {
                use std::fmt::Write;
                let _ = write!(out, concat!(" {}=", $fmt), name, self);
            }
        }
    )*};
}

trace_as! {
    *const u8 => "{:p}";
    *mut u8 => "{:p}";
    *const c_void => "{:p}";
    *mut c_void => "{:p}";
    u64 => "{:#x}";
    usize => "{}";
    OpFlags => "{:?}";
    Datatype => "{:?}";
    AtomicOp => "{:?}";
    &Msg => "{:?}";
    &MsgTagged => "{:?}";
    &MsgRma => "{:?}";
    &MsgAtomic => "{:?}";
}

impl<T> TraceArg for &[T] {
    fn trace(&self, name: &str, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, " {name}_count={}", self.len());
    }
}

/// The arguments of a data call as the trace hook prints them.
macro_rules! trace_args {
    ($($p:ident),*) => {{
        let mut out = String::new();
        $( TraceArg::trace(&$p, stringify!($p), &mut out); )*
        if out.starts_with(' ') {
            out.remove(0);
        }
        out
    }};
}

/// Writes, from the list of data operations ([`ofi_core::for_each_ep_data_op!`]), the
/// data methods of [`HookEp`]: each builds an [`OpCall`] (the operation, its bytes,
/// context and flags, read from its arguments by name through
/// [`DataArgs`](ofi_core::abi::ops::DataArgs)) and goes through [`Hook::around`]; message
/// sends on datagram endpoints of a hook that intercepts sends also go through
/// [`Hook::dgram_send`]. The endpoint beneath is called with the arguments lowered as
/// the list says, unchanged. The group's queries (`*atomicvalid`) go through
/// [`Hook::around`] as control calls.
macro_rules! hook_forwarders {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt $c:tt
            ($($p:ident : $pty:ty = $from:expr),*) ($($low:expr),*);)*
    } { $($(#[$qdoc:meta])* $qslot:ident / $qname:ident;)* })*) => {$(
        $(
        unsafe fn $name(&self, $($p: $pty),*) -> Result<()> {
            const KIND: OpKind = ofi_core::op_kind!($kind);
            let args = ofi_core::data_args!($($p),*);
            let call = OpCall {
                op: Op::$V,
                // SAFETY: a message's arrays are valid for its counts (the caller's
                // contract for this data method).
                bytes: unsafe { args.bytes() },
                context: args.context(),
                flags: args.flags,
            };
            let kind = CallKind::Data(&self.core, call);
            self.h.around(HookedCall::new(kind, || trace_args!($($p),*), || {
                if H::SENDS && matches!(KIND.family, OpFamily::Send) && self.core.dgram {
                    // SAFETY: the buffers are valid per the caller's contract; `Held`
                    // copies what must outlive the call.
                    let held = || unsafe { Held::capture(call.op, &args) };
                    if let Some(r) = self.h.dgram_send(&self.core, call, held) {
                        return r;
                    }
                }
                // SAFETY: the caller's contract for a triggered call's context.
                unsafe { crate::trigger::lower_trigger(call.flags, call.context) };
                // SAFETY: the caller of this data method upholds the C API's contract
                // for the same buffers, which the endpoint beneath receives unchanged.
                unsafe { self.core.inner.$host($($low),*) }
            }))
        }
        )*
        $(
            fn $qname(&self, datatype: Datatype, op: AtomicOp) -> Result<usize> {
                self.ctl(
                    stringify!($qname),
                    || format!("{datatype:?} {op:?}"),
                    || self.core.inner.$qname(datatype, op),
                )
            }
        )*
    )*};
}

impl<H: Hook> HookEp<H> {
    pub(crate) fn new(
        inner: Endpoint,
        info: Option<&Info>,
        h: Arc<H>,
        class: &'static str,
    ) -> HookEp<H> {
        HookEp::build(
            inner,
            class,
            h,
            info.is_some_and(|i| i.ep_attr.ep_type == EpType::Dgram),
            info.map(|i| i.tx_attr.op_flags).unwrap_or_default(),
            info.map(|i| i.rx_attr.op_flags).unwrap_or_default(),
            info.map(|i| i.tx_attr.inject_size).unwrap_or(0),
        )
    }

    /// A hooked endpoint over `inner` (named `class` in hook messages) with the
    /// attributes the hooks read; not enabled, nothing bound, no membership.
    fn build(
        inner: Endpoint,
        class: &'static str,
        h: Arc<H>,
        dgram: bool,
        tx_op_flags: OpFlags,
        rx_op_flags: OpFlags,
        inject_size: usize,
    ) -> HookEp<H> {
        let core = EpCore {
            inner,
            name: ObjName::new(class),
            dgram,
            tx_op_flags,
            rx_op_flags,
            inject_size,
            enabled: AtomicBool::new(false),
            tx_cq: OnceLock::new(),
            rx_cq: OnceLock::new(),
            tx_cntr: OnceLock::new(),
            data: H::EpData::default(),
        };
        HookEp {
            core: Arc::new(core),
            h,
            mcs: Mutex::new(Vec::new()),
        }
    }

    /// After a successful `fi_ep_bind` (`=> bound` in the list): a CQ is recorded for
    /// the directions of `flags` (both without either), a counter for sends, so the
    /// hooks know where the completions and counts of this endpoint go.
    fn bound<F: HookFamily<H>>(&self, (): (), target: BindTarget<'_, F>, flags: OpFlags) {
        match target {
            BindTarget::Cq(cq) => {
                let dirs = OpFlags::TRANSMIT | OpFlags::RECV;
                let both = !flags.intersects(dirs);
                let binding = || CqBinding {
                    cq: cq.core().clone(),
                    selective: flags.contains(OpFlags::SELECTIVE_COMPLETION),
                };
                if both || flags.contains(OpFlags::TRANSMIT) {
                    let _ = self.core.tx_cq.set(binding());
                }
                if both || flags.contains(OpFlags::RECV) {
                    let _ = self.core.rx_cq.set(binding());
                }
                if H::SENDS {
                    cq.core().attach(&self.core);
                }
            }
            BindTarget::Cntr(c) if flags.contains(OpFlags::SEND) => {
                let _ = self.core.tx_cntr.set(c.core().clone());
            }
            _ => {}
        }
    }

    /// After a successful `fi_enable` (`=> enabled` in the list): data calls may flow.
    fn enabled(&self, (): ()) {
        self.core.enabled.store(true, Ordering::Release);
    }

    /// After a successful `fi_join` (`=> joined` in the list): keep the membership until
    /// [`EndpointOps::leave`]; its fabric address is what the provider method returns.
    fn joined(&self, mc: Multicast) -> u64 {
        let fi_addr = mc.fi_addr();
        self.mcs.lock().unwrap_or_else(|p| p.into_inner()).push(mc);
        fi_addr
    }

    /// An alias or context of this endpoint (`=> derived` in the list): same type and
    /// attributes.
    fn derived(&self, inner: Endpoint, class: &'static str) -> HookEp<H> {
        let p = &self.core;
        HookEp::build(
            inner,
            class,
            self.h.clone(),
            p.dgram,
            p.tx_op_flags,
            p.rx_op_flags,
            p.inject_size,
        )
    }

    /// The endpoint's core (for hooks and tests).
    pub fn core(&self) -> &Arc<EpCore<H>> {
        &self.core
    }

    fn ctl<R: std::fmt::Debug>(
        &self,
        what: &'static str,
        args: impl Fn() -> String,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.h.ctl(&self.core.name, what, args, f)
    }

    /// What the generated forwarders use: the hook, the name and the endpoint beneath.
    fn forward(&self) -> (&Arc<H>, &ObjName, &Endpoint) {
        (&self.h, &self.core.name, &self.core.inner)
    }
}

/// The hooks hear of an endpoint's end when its wrapper goes: the adapter drops it
/// right after a successful close.
impl<H: Hook> Drop for HookEp<H> {
    fn drop(&mut self) {
        self.h.ep_close(&self.core);
    }
}

impl<H: Hook, F: HookFamily<H>> EndpointOps<F> for HookEp<H> {
    // ---- one forwarder per `op` entry of the lists (`for_each_ep_ctl_op!`,
    // `for_each_cm_op!`) ----

    ofi_core::for_each_ep_ctl_op!(ofi_core::ctl_forwarders);
    ofi_core::for_each_cm_op!(ofi_core::ctl_forwarders);

    fn leave(&self, fi_addr: u64) -> Result<()> {
        let mut mcs = self.mcs.lock().unwrap_or_else(|p| p.into_inner());
        let i = mcs
            .iter()
            .position(|m| m.fi_addr() == fi_addr)
            .ok_or_else(|| Error::new(Errno::ENOENT, format!("no membership {fi_addr:#x}")))?;
        self.h.ctl(
            &self.core.name,
            "leave",
            || format!("fi_addr={fi_addr:#x}"),
            || Multicast::close(&mut mcs[i]),
        )?;
        mcs.remove(i);
        Ok(())
    }

    // ---- data operations: one forwarder per entry of the list ----

    ofi_core::for_each_ep_data_op!(hook_forwarders);
}

crate::hooked_objects! {
    /// A passive endpoint wrapped by hook `H`.
    HookPep(PassiveEndpoint, "passive endpoint");
}

impl<H: Hook> PassiveEndpointOps<HookFabric<H>> for HookPep<H> {
    // One forwarder per `op` entry of the list (`for_each_pep_op!`).
    ofi_core::for_each_pep_op!(ofi_core::ctl_forwarders);

    crate::bind_eq_forwarder!("bind_eq");
}

crate::beneath_and_name! {
    HookEp |ep| (ep.core.inner, ep.core.name);
}
