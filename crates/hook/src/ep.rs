//! Hooked endpoints (active, scalable, contexts, aliases) and passive endpoints.
//!
//! Every data call builds an [`OpCall`] and goes through [`Hook::op`]; message sends
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

use ofi_core::abi::raw::{Ioc, Iov, Msg, MsgAtomic, MsgRma, MsgTagged};
use ofi_core::ep::Endpoint;
use ofi_core::ep::{Multicast, PassiveEndpoint};
use ofi_core::provider::{BindTarget, Desc, EndpointOps, EqOf, PassiveEndpointOps};
use ofi_core::{
    Address, AtomicOp, Datatype, EpType, Errno, Error, Info, OpFlags, Result, RxAttr, TxAttr,
};

use crate::cq::CqCore;
use crate::fabric::HookFabric;
use crate::fault::Held;
use crate::objects::CntrCore;
use crate::{Hook, ObjName, Op, OpCall};

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

fn desc_ptr(desc: &[Desc]) -> *const *mut c_void {
    if desc.is_empty() {
        std::ptr::null()
    } else {
        desc.as_ptr()
    }
}

fn iov_bytes(iov: &[Iov]) -> usize {
    iov.iter().map(|i| i.len).sum()
}

/// # Safety
/// `p` null or valid for `n` entries during the call.
unsafe fn iovs<'a>(p: *const Iov, n: usize) -> &'a [Iov] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: by the contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// # Safety
/// As [`iovs`].
unsafe fn descs<'a>(p: *const *mut c_void, n: usize) -> &'a [Desc] {
    if p.is_null() || n == 0 {
        &[]
    } else {
        // SAFETY: by the contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// A data call through [`Hook::op`].
macro_rules! data {
    ($self:ident, $op:ident, $bytes:expr, $ctx:expr, $flags:expr, $args:expr, $call:expr) => {{
        let call = OpCall {
            op: Op::$op,
            bytes: $bytes,
            context: $ctx,
            flags: $flags,
        };
        $self.h.op(&$self.core, call, $args, || {
            // SAFETY: the caller of this data method upholds the C API's contract for
            // the same buffers, which the endpoint beneath receives unchanged.
            unsafe { $call }
        })
    }};
}

/// A message send: through [`Hook::op`] and, on datagram endpoints of a hook that
/// intercepts sends, [`Hook::dgram_send`].
macro_rules! send {
    ($self:ident, $op:ident, $bytes:expr, $ctx:expr, $flags:expr, $args:expr, $held:expr, $call:expr) => {{
        let call = OpCall {
            op: Op::$op,
            bytes: $bytes,
            context: $ctx,
            flags: $flags,
        };
        $self.h.op(&$self.core, call, $args, || {
            if H::SENDS && $self.core.dgram {
                // SAFETY: the buffers are valid per the caller's contract; `Held`
                // copies what must outlive the call.
                let held = || unsafe { $held };
                if let Some(r) = $self.h.dgram_send(&$self.core, call, held) {
                    return r;
                }
            }
            // SAFETY: the caller of this data method upholds the C API's contract for
            // the same buffers, which the endpoint beneath receives unchanged.
            unsafe { $call }
        })
    }};
}

impl<H: Hook> HookEp<H> {
    pub(crate) fn new(
        inner: Endpoint,
        info: Option<&Info>,
        h: Arc<H>,
        class: &'static str,
    ) -> HookEp<H> {
        let core = EpCore {
            inner,
            name: ObjName::new(class),
            dgram: info.is_some_and(|i| i.ep_attr.ep_type == EpType::Dgram),
            tx_op_flags: info.map(|i| i.tx_attr.op_flags).unwrap_or_default(),
            rx_op_flags: info.map(|i| i.rx_attr.op_flags).unwrap_or_default(),
            inject_size: info.map(|i| i.tx_attr.inject_size).unwrap_or(0),
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

    /// An alias or context of this endpoint: same type and attributes.
    fn derived(&self, inner: Endpoint, class: &'static str) -> HookEp<H> {
        let p = &self.core;
        let core = EpCore {
            inner,
            name: ObjName::new(class),
            dgram: p.dgram,
            tx_op_flags: p.tx_op_flags,
            rx_op_flags: p.rx_op_flags,
            inject_size: p.inject_size,
            enabled: AtomicBool::new(false),
            tx_cq: OnceLock::new(),
            rx_cq: OnceLock::new(),
            tx_cntr: OnceLock::new(),
            data: H::EpData::default(),
        };
        HookEp {
            core: Arc::new(core),
            h: self.h.clone(),
            mcs: Mutex::new(Vec::new()),
        }
    }

    /// The endpoint's core (for hooks and tests).
    pub fn core(&self) -> &Arc<EpCore<H>> {
        &self.core
    }

    fn ctl<R: std::fmt::Debug>(
        &self,
        what: &'static str,
        args: impl FnOnce() -> String,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.h.ctl(&self.core.name, what, args, f)
    }
}

impl<H: Hook> EndpointOps<HookFabric<H>> for HookEp<H> {
    fn bind(&self, target: BindTarget<'_, HookFabric<H>>, flags: OpFlags) -> Result<()> {
        let inner = &self.core.inner;
        match target {
            BindTarget::Cq(cq) => {
                self.ctl(
                    "bind",
                    || format!("{} flags={flags:?}", cq.core().name),
                    || inner.bind(&cq.core().inner, flags),
                )?;
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
                Ok(())
            }
            BindTarget::Cntr(c) => {
                self.ctl(
                    "bind",
                    || format!("{} flags={flags:?}", c.core().name),
                    || inner.bind(&c.core().inner, flags),
                )?;
                if flags.contains(OpFlags::SEND) {
                    let _ = self.core.tx_cntr.set(c.core().clone());
                }
                Ok(())
            }
            BindTarget::Av(av) => self.ctl(
                "bind",
                || format!("av flags={flags:?}"),
                || inner.bind(av.inner(), flags),
            ),
            BindTarget::Eq(eq) => self.ctl(
                "bind",
                || format!("eq flags={flags:?}"),
                || inner.bind(eq.inner(), flags),
            ),
            BindTarget::Stx(ep) | BindTarget::Srx(ep) => self.ctl(
                "bind",
                || format!("{} flags={flags:?}", ep.core.name),
                || inner.bind(&ep.core.inner, flags),
            ),
        }
    }

    fn enable(&self) -> Result<()> {
        self.ctl("enable", String::new, || self.core.inner.enable())?;
        self.core.enabled.store(true, Ordering::Release);
        Ok(())
    }

    // The trait's signature is the core's; `arg` comes from the application through
    // `fi_control`, whose contract the provider beneath documents.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn control(&self, command: i32, arg: *mut c_void) -> Result<()> {
        self.ctl(
            "control",
            || format!("command={command} arg={arg:p}"),
            // SAFETY: `arg` is what the application passed for `command` to this
            // endpoint; the provider beneath documents the same commands.
            || unsafe { self.core.inner.control(command, arg) },
        )
    }

    fn alias(&self, flags: u64) -> Result<Self> {
        let a = self.ctl(
            "alias",
            || format!("flags={flags:#x}"),
            || self.core.inner.alias(flags),
        )?;
        Ok(self.derived(a, "endpoint alias"))
    }

    fn cancel(&self, context: usize) -> Result<()> {
        self.ctl(
            "cancel",
            || format!("context={context:#x}"),
            || self.core.inner.cancel(context),
        )
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        self.ctl(
            "getopt",
            || format!("level={level} optname={optname}"),
            || self.core.inner.getopt(level, optname, optval),
        )
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        self.ctl(
            "setopt",
            || format!("level={level} optname={optname} len={}", optval.len()),
            || self.core.inner.setopt(level, optname, optval),
        )
    }

    fn tx_ctx(&self, index: i32, attr: &TxAttr, context: usize) -> Result<Self> {
        let c = self.ctl(
            "tx_context",
            || format!("index={index} context={context:#x}"),
            || self.core.inner.tx_context(index, attr),
        )?;
        Ok(self.derived(c, "tx context"))
    }

    fn rx_ctx(&self, index: i32, attr: &RxAttr, context: usize) -> Result<Self> {
        let c = self.ctl(
            "rx_context",
            || format!("index={index} context={context:#x}"),
            || self.core.inner.rx_context(index, attr),
        )?;
        Ok(self.derived(c, "rx context"))
    }

    fn rx_size_left(&self) -> Result<usize> {
        self.ctl("rx_size_left", String::new, || {
            self.core.inner.rx_size_left()
        })
    }

    fn tx_size_left(&self) -> Result<usize> {
        self.ctl("tx_size_left", String::new, || {
            self.core.inner.tx_size_left()
        })
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        self.ctl(
            "setname",
            || format!("len={}", addr.len()),
            || self.core.inner.setname(addr),
        )
    }

    fn getname(&self) -> Result<Vec<u8>> {
        self.ctl("getname", String::new, || self.core.inner.getname())
    }

    fn getpeer(&self) -> Result<Vec<u8>> {
        self.ctl("getpeer", String::new, || self.core.inner.getpeer())
    }

    fn connect(&self, addr: &[u8], param: &[u8]) -> Result<()> {
        self.ctl(
            "connect",
            || format!("addr_len={} param_len={}", addr.len(), param.len()),
            || self.core.inner.connect(addr, param),
        )
    }

    fn accept(&self, param: &[u8]) -> Result<()> {
        self.ctl(
            "accept",
            || format!("param_len={}", param.len()),
            || self.core.inner.accept(param),
        )
    }

    fn shutdown(&self, flags: u64) -> Result<()> {
        self.ctl(
            "shutdown",
            || format!("flags={flags:#x}"),
            || self.core.inner.shutdown(flags),
        )
    }

    fn join(&self, addr: &Address, flags: u64, context: usize) -> Result<u64> {
        let mc = self.ctl(
            "join",
            || format!("addr={addr} flags={flags:#x} context={context:#x}"),
            || self.core.inner.join_with(addr, flags, context),
        )?;
        let fi_addr = mc.fi_addr();
        self.mcs.lock().unwrap_or_else(|p| p.into_inner()).push(mc);
        Ok(fi_addr)
    }

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
            || mcs[i].close(),
        )?;
        mcs.remove(i);
        Ok(())
    }

    // ---- messages ----

    unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        send!(
            self,
            Send,
            len,
            context,
            None,
            || format!("buf={buf:p} len={len} desc={desc:p} dest={dest:#x} context={context:#x}"),
            Held::single(Op::Send, buf, len, desc, dest, 0, 0, context),
            self.core.inner.send(buf, len, desc, dest, context)
        )
    }

    unsafe fn sendv(&self, iov: &[Iov], desc: &[Desc], dest: u64, context: usize) -> Result<()> {
        send!(
            self,
            Sendv,
            iov_bytes(iov),
            context,
            None,
            || format!(
                "iov_count={} dest={dest:#x} context={context:#x}",
                iov.len()
            ),
            Held::vector(Op::Sendv, iov, desc, dest, 0, 0, context, OpFlags::empty()),
            self.core
                .inner
                .sendv(iov.as_ptr(), desc_ptr(desc), iov.len(), dest, context)
        )
    }

    unsafe fn sendmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let (iov, desc) = unsafe {
            (
                iovs(msg.msg_iov, msg.iov_count),
                descs(msg.desc, msg.iov_count),
            )
        };
        send!(
            self,
            Sendmsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} dest={:#x} context={:#x} data={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.context, msg.data
            ),
            Held::vector(
                Op::Sendmsg,
                iov,
                desc,
                msg.addr,
                0,
                msg.data,
                msg.context,
                flags
            ),
            self.core.inner.sendmsg(msg, flags.bits())
        )
    }

    unsafe fn inject(&self, buf: *const u8, len: usize, dest: u64) -> Result<()> {
        send!(
            self,
            Inject,
            len,
            0,
            None,
            || format!("buf={buf:p} len={len} dest={dest:#x}"),
            Held::single(Op::Inject, buf, len, std::ptr::null_mut(), dest, 0, 0, 0),
            self.core.inner.inject_raw(buf, len, dest)
        )
    }

    unsafe fn senddata(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        data: u64,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        send!(
            self,
            Senddata,
            len,
            context,
            None,
            || format!("buf={buf:p} len={len} data={data:#x} dest={dest:#x} context={context:#x}"),
            Held::single(Op::Senddata, buf, len, desc, dest, 0, data, context),
            self.core
                .inner
                .senddata(buf, len, desc, data, dest, context)
        )
    }

    unsafe fn injectdata(&self, buf: *const u8, len: usize, data: u64, dest: u64) -> Result<()> {
        send!(
            self,
            Injectdata,
            len,
            0,
            None,
            || format!("buf={buf:p} len={len} data={data:#x} dest={dest:#x}"),
            Held::single(
                Op::Injectdata,
                buf,
                len,
                std::ptr::null_mut(),
                dest,
                0,
                data,
                0
            ),
            self.core.inner.injectdata_raw(buf, len, data, dest)
        )
    }

    unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        desc: Desc,
        src: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Recv,
            len,
            context,
            None,
            || format!("buf={buf:p} len={len} desc={desc:p} src={src:#x} context={context:#x}"),
            self.core.inner.recv(buf, len, desc, src, context)
        )
    }

    unsafe fn recvv(&self, iov: &[Iov], desc: &[Desc], src: u64, context: usize) -> Result<()> {
        data!(
            self,
            Recvv,
            iov_bytes(iov),
            context,
            None,
            || format!("iov_count={} src={src:#x} context={context:#x}", iov.len()),
            self.core
                .inner
                .recvv(iov.as_ptr(), desc_ptr(desc), iov.len(), src, context)
        )
    }

    unsafe fn recvmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let iov = unsafe { iovs(msg.msg_iov, msg.iov_count) };
        data!(
            self,
            Recvmsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} src={:#x} context={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.context
            ),
            self.core.inner.recvmsg(msg, flags.bits())
        )
    }

    // ---- tagged ----

    unsafe fn tsend(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        dest: u64,
        tag: u64,
        context: usize,
    ) -> Result<()> {
        send!(
            self,
            Tsend,
            len,
            context,
            None,
            || format!("buf={buf:p} len={len} dest={dest:#x} tag={tag:#x} context={context:#x}"),
            Held::single(Op::Tsend, buf, len, desc, dest, tag, 0, context),
            self.core.inner.tsend(buf, len, desc, dest, tag, context)
        )
    }

    unsafe fn tsendv(
        &self,
        iov: &[Iov],
        desc: &[Desc],
        dest: u64,
        tag: u64,
        context: usize,
    ) -> Result<()> {
        send!(
            self,
            Tsendv,
            iov_bytes(iov),
            context,
            None,
            || format!(
                "iov_count={} dest={dest:#x} tag={tag:#x} context={context:#x}",
                iov.len()
            ),
            Held::vector(
                Op::Tsendv,
                iov,
                desc,
                dest,
                tag,
                0,
                context,
                OpFlags::empty()
            ),
            self.core
                .inner
                .tsendv(iov.as_ptr(), desc_ptr(desc), iov.len(), dest, tag, context)
        )
    }

    unsafe fn tsendmsg(&self, msg: &MsgTagged, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let (iov, desc) = unsafe {
            (
                iovs(msg.msg_iov, msg.iov_count),
                descs(msg.desc, msg.iov_count),
            )
        };
        send!(
            self,
            Tsendmsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} dest={:#x} tag={:#x} context={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.tag, msg.context
            ),
            Held::vector(
                Op::Tsendmsg,
                iov,
                desc,
                msg.addr,
                msg.tag,
                msg.data,
                msg.context,
                flags
            ),
            self.core.inner.tsendmsg(msg, flags.bits())
        )
    }

    unsafe fn tinject(&self, buf: *const u8, len: usize, dest: u64, tag: u64) -> Result<()> {
        send!(
            self,
            Tinject,
            len,
            0,
            None,
            || format!("buf={buf:p} len={len} dest={dest:#x} tag={tag:#x}"),
            Held::single(Op::Tinject, buf, len, std::ptr::null_mut(), dest, tag, 0, 0),
            self.core.inner.tinject_raw(buf, len, dest, tag)
        )
    }

    unsafe fn tsenddata(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        data: u64,
        dest: u64,
        tag: u64,
        context: usize,
    ) -> Result<()> {
        send!(
            self,
            Tsenddata,
            len,
            context,
            None,
            || {
                format!(
                "buf={buf:p} len={len} data={data:#x} dest={dest:#x} tag={tag:#x} context={context:#x}"
            )
            },
            Held::single(Op::Tsenddata, buf, len, desc, dest, tag, data, context),
            self.core
                .inner
                .tsenddata(buf, len, desc, data, dest, tag, context)
        )
    }

    unsafe fn tinjectdata(
        &self,
        buf: *const u8,
        len: usize,
        data: u64,
        dest: u64,
        tag: u64,
    ) -> Result<()> {
        send!(
            self,
            Tinjectdata,
            len,
            0,
            None,
            || format!("buf={buf:p} len={len} data={data:#x} dest={dest:#x} tag={tag:#x}"),
            Held::single(
                Op::Tinjectdata,
                buf,
                len,
                std::ptr::null_mut(),
                dest,
                tag,
                data,
                0
            ),
            self.core.inner.tinjectdata_raw(buf, len, data, dest, tag)
        )
    }

    unsafe fn trecv(
        &self,
        buf: *mut u8,
        len: usize,
        desc: Desc,
        src: u64,
        tag: u64,
        ignore: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Trecv,
            len,
            context,
            None,
            || {
                format!(
                "buf={buf:p} len={len} src={src:#x} tag={tag:#x} ignore={ignore:#x} context={context:#x}"
            )
            },
            self.core
                .inner
                .trecv(buf, len, desc, src, tag, ignore, context)
        )
    }

    unsafe fn trecvv(
        &self,
        iov: &[Iov],
        desc: &[Desc],
        src: u64,
        tag: u64,
        ignore: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Trecvv,
            iov_bytes(iov),
            context,
            None,
            || format!(
                "iov_count={} src={src:#x} tag={tag:#x} ignore={ignore:#x} context={context:#x}",
                iov.len()
            ),
            self.core.inner.trecvv(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                src,
                tag,
                ignore,
                context
            )
        )
    }

    unsafe fn trecvmsg(&self, msg: &MsgTagged, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let iov = unsafe { iovs(msg.msg_iov, msg.iov_count) };
        data!(
            self,
            Trecvmsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} src={:#x} tag={:#x} ignore={:#x} context={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.tag, msg.ignore, msg.context
            ),
            self.core.inner.trecvmsg(msg, flags.bits())
        )
    }

    // ---- RMA ----

    unsafe fn read(
        &self,
        buf: *mut u8,
        len: usize,
        desc: Desc,
        src: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Read,
            len,
            context,
            None,
            || {
                format!(
                "buf={buf:p} len={len} src={src:#x} addr={addr:#x} key={key:#x} context={context:#x}"
            )
            },
            self.core
                .inner
                .read(buf, len, desc, src, addr, key, context)
        )
    }

    unsafe fn readv(
        &self,
        iov: &[Iov],
        desc: &[Desc],
        src: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Readv,
            iov_bytes(iov),
            context,
            None,
            || format!(
                "iov_count={} src={src:#x} addr={addr:#x} key={key:#x} context={context:#x}",
                iov.len()
            ),
            self.core.inner.readv(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                src,
                addr,
                key,
                context
            )
        )
    }

    unsafe fn readmsg(&self, msg: &MsgRma, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let iov = unsafe { iovs(msg.msg_iov, msg.iov_count) };
        data!(
            self,
            Readmsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} src={:#x} context={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.context
            ),
            self.core.inner.readmsg(msg, flags.bits())
        )
    }

    unsafe fn write(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Write,
            len,
            context,
            None,
            || {
                format!(
                "buf={buf:p} len={len} dest={dest:#x} addr={addr:#x} key={key:#x} context={context:#x}"
            )
            },
            self.core
                .inner
                .write(buf, len, desc, dest, addr, key, context)
        )
    }

    unsafe fn writev(
        &self,
        iov: &[Iov],
        desc: &[Desc],
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Writev,
            iov_bytes(iov),
            context,
            None,
            || format!(
                "iov_count={} dest={dest:#x} addr={addr:#x} key={key:#x} context={context:#x}",
                iov.len()
            ),
            self.core.inner.writev(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                dest,
                addr,
                key,
                context
            )
        )
    }

    unsafe fn writemsg(&self, msg: &MsgRma, flags: OpFlags) -> Result<()> {
        // SAFETY: the message's arrays are valid for its counts (caller's contract).
        let iov = unsafe { iovs(msg.msg_iov, msg.iov_count) };
        data!(
            self,
            Writemsg,
            iov_bytes(iov),
            msg.context,
            Some(flags),
            || format!(
                "iov_count={} dest={:#x} context={:#x} flags={flags:?}",
                msg.iov_count, msg.addr, msg.context
            ),
            self.core.inner.writemsg(msg, flags.bits())
        )
    }

    unsafe fn inject_write(
        &self,
        buf: *const u8,
        len: usize,
        dest: u64,
        addr: u64,
        key: u64,
    ) -> Result<()> {
        data!(
            self,
            InjectWrite,
            len,
            0,
            None,
            || format!("buf={buf:p} len={len} dest={dest:#x} addr={addr:#x} key={key:#x}"),
            self.core.inner.inject_write_raw(buf, len, dest, addr, key)
        )
    }

    unsafe fn writedata(
        &self,
        buf: *const u8,
        len: usize,
        desc: Desc,
        data: u64,
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Writedata,
            len,
            context,
            None,
            || {
                format!(
                "buf={buf:p} len={len} data={data:#x} dest={dest:#x} addr={addr:#x} key={key:#x} context={context:#x}"
            )
            },
            self.core
                .inner
                .writedata(buf, len, desc, data, dest, addr, key, context)
        )
    }

    unsafe fn inject_writedata(
        &self,
        buf: *const u8,
        len: usize,
        data: u64,
        dest: u64,
        addr: u64,
        key: u64,
    ) -> Result<()> {
        data!(
            self,
            InjectWritedata,
            len,
            0,
            None,
            || format!(
                "buf={buf:p} len={len} data={data:#x} dest={dest:#x} addr={addr:#x} key={key:#x}"
            ),
            self.core
                .inner
                .inject_writedata_raw(buf, len, data, dest, addr, key)
        )
    }

    // ---- atomics ----

    unsafe fn atomic(
        &self,
        buf: *const c_void,
        count: usize,
        desc: Desc,
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Atomic,
            0,
            context,
            None,
            || {
                format!(
                "buf={buf:p} count={count} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}"
            )
            },
            self.core
                .inner
                .atomic(buf, count, desc, dest, addr, key, datatype, op, context)
        )
    }

    unsafe fn atomicv(
        &self,
        iov: &[Ioc],
        desc: &[Desc],
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            Atomicv,
            0,
            context,
            None,
            || {
                format!(
                "ioc_count={} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}",
                iov.len()
            )
            },
            self.core.inner.atomicv(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                dest,
                addr,
                key,
                datatype,
                op,
                context
            )
        )
    }

    unsafe fn atomicmsg(&self, msg: &MsgAtomic, flags: OpFlags) -> Result<()> {
        data!(
            self,
            Atomicmsg,
            0,
            msg.context,
            Some(flags),
            || format!("context={:#x} flags={flags:?}", msg.context),
            self.core.inner.atomicmsg(msg, flags.bits())
        )
    }

    unsafe fn inject_atomic(
        &self,
        buf: *const c_void,
        count: usize,
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
    ) -> Result<()> {
        data!(
            self,
            InjectAtomic,
            0,
            0,
            None,
            || {
                format!(
                "buf={buf:p} count={count} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?}"
            )
            },
            self.core
                .inner
                .inject_atomic(buf, count, dest, addr, key, datatype, op)
        )
    }

    unsafe fn fetch_atomic(
        &self,
        buf: *const c_void,
        count: usize,
        desc: Desc,
        result: *mut c_void,
        result_desc: Desc,
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            FetchAtomic,
            0,
            context,
            None,
            || {
                format!(
                "buf={buf:p} count={count} result={result:p} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}"
            )
            },
            self.core.inner.fetch_atomic(
                buf,
                count,
                desc,
                result,
                result_desc,
                dest,
                addr,
                key,
                datatype,
                op,
                context
            )
        )
    }

    unsafe fn fetch_atomicv(
        &self,
        iov: &[Ioc],
        desc: &[Desc],
        resultv: &[Ioc],
        result_desc: &[Desc],
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            FetchAtomicv,
            0,
            context,
            None,
            || {
                format!(
                "ioc_count={} result_count={} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}",
                iov.len(),
                resultv.len()
            )
            },
            self.core.inner.fetch_atomicv(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                resultv.as_ptr(),
                desc_ptr(result_desc),
                resultv.len(),
                dest,
                addr,
                key,
                datatype,
                op,
                context
            )
        )
    }

    unsafe fn fetch_atomicmsg(
        &self,
        msg: &MsgAtomic,
        resultv: &[Ioc],
        result_desc: &[Desc],
        flags: OpFlags,
    ) -> Result<()> {
        data!(
            self,
            FetchAtomicmsg,
            0,
            msg.context,
            Some(flags),
            || format!(
                "result_count={} context={:#x} flags={flags:?}",
                resultv.len(),
                msg.context
            ),
            self.core.inner.fetch_atomicmsg(
                msg,
                resultv.as_ptr(),
                desc_ptr(result_desc),
                resultv.len(),
                flags.bits()
            )
        )
    }

    unsafe fn compare_atomic(
        &self,
        buf: *const c_void,
        count: usize,
        desc: Desc,
        compare: *const c_void,
        compare_desc: Desc,
        result: *mut c_void,
        result_desc: Desc,
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            CompareAtomic,
            0,
            context,
            None,
            || {
                format!(
                "buf={buf:p} count={count} compare={compare:p} result={result:p} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}"
            )
            },
            self.core.inner.compare_atomic(
                buf,
                count,
                desc,
                compare,
                compare_desc,
                result,
                result_desc,
                dest,
                addr,
                key,
                datatype,
                op,
                context
            )
        )
    }

    unsafe fn compare_atomicv(
        &self,
        iov: &[Ioc],
        desc: &[Desc],
        comparev: &[Ioc],
        compare_desc: &[Desc],
        resultv: &[Ioc],
        result_desc: &[Desc],
        dest: u64,
        addr: u64,
        key: u64,
        datatype: Datatype,
        op: AtomicOp,
        context: usize,
    ) -> Result<()> {
        data!(
            self,
            CompareAtomicv,
            0,
            context,
            None,
            || {
                format!(
                "ioc_count={} compare_count={} result_count={} dest={dest:#x} addr={addr:#x} key={key:#x} {datatype:?} {op:?} context={context:#x}",
                iov.len(),
                comparev.len(),
                resultv.len()
            )
            },
            self.core.inner.compare_atomicv(
                iov.as_ptr(),
                desc_ptr(desc),
                iov.len(),
                comparev.as_ptr(),
                desc_ptr(compare_desc),
                comparev.len(),
                resultv.as_ptr(),
                desc_ptr(result_desc),
                resultv.len(),
                dest,
                addr,
                key,
                datatype,
                op,
                context
            )
        )
    }

    unsafe fn compare_atomicmsg(
        &self,
        msg: &MsgAtomic,
        comparev: &[Ioc],
        compare_desc: &[Desc],
        resultv: &[Ioc],
        result_desc: &[Desc],
        flags: OpFlags,
    ) -> Result<()> {
        data!(
            self,
            CompareAtomicmsg,
            0,
            msg.context,
            Some(flags),
            || format!(
                "compare_count={} result_count={} context={:#x} flags={flags:?}",
                comparev.len(),
                resultv.len(),
                msg.context
            ),
            self.core.inner.compare_atomicmsg(
                msg,
                comparev.as_ptr(),
                desc_ptr(compare_desc),
                comparev.len(),
                resultv.as_ptr(),
                desc_ptr(result_desc),
                resultv.len(),
                flags.bits()
            )
        )
    }

    fn atomicvalid(&self, datatype: Datatype, op: AtomicOp) -> Result<usize> {
        self.ctl(
            "atomicvalid",
            || format!("{datatype:?} {op:?}"),
            || self.core.inner.atomicvalid(datatype, op),
        )
    }

    fn fetch_atomicvalid(&self, datatype: Datatype, op: AtomicOp) -> Result<usize> {
        self.ctl(
            "fetch_atomicvalid",
            || format!("{datatype:?} {op:?}"),
            || self.core.inner.fetch_atomicvalid(datatype, op),
        )
    }

    fn compare_atomicvalid(&self, datatype: Datatype, op: AtomicOp) -> Result<usize> {
        self.ctl(
            "compare_atomicvalid",
            || format!("{datatype:?} {op:?}"),
            || self.core.inner.compare_atomicvalid(datatype, op),
        )
    }

    fn close(&self) -> Result<()> {
        self.ctl("close", String::new, || Ok(()))?;
        self.h.ep_close(&self.core);
        Ok(())
    }
}

/// A passive endpoint wrapped by hook `H`.
pub struct HookPep<H: Hook> {
    inner: PassiveEndpoint,
    h: Arc<H>,
    name: ObjName,
}

impl<H: Hook> HookPep<H> {
    pub(crate) fn new(inner: PassiveEndpoint, h: Arc<H>) -> HookPep<H> {
        HookPep {
            inner,
            h,
            name: ObjName::new("passive endpoint"),
        }
    }
}

impl<H: Hook> PassiveEndpointOps<HookFabric<H>> for HookPep<H> {
    fn bind_eq(&self, eq: &EqOf<HookFabric<H>>, flags: u64) -> Result<()> {
        self.h.ctl(
            &self.name,
            "bind_eq",
            || format!("flags={flags:#x}"),
            || self.inner.bind_eq(eq.inner(), flags),
        )
    }

    fn listen(&self) -> Result<()> {
        self.h
            .ctl(&self.name, "listen", String::new, || self.inner.listen())
    }

    fn reject(&self, handle: usize, param: &[u8]) -> Result<()> {
        self.h.ctl(
            &self.name,
            "reject",
            || format!("handle={handle:#x} param_len={}", param.len()),
            || self.inner.reject(handle, param),
        )
    }

    fn getname(&self) -> Result<Vec<u8>> {
        self.h
            .ctl(&self.name, "getname", String::new, || self.inner.getname())
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        self.h.ctl(
            &self.name,
            "setname",
            || format!("len={}", addr.len()),
            || self.inner.setname(addr),
        )
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        self.h.ctl(
            &self.name,
            "getopt",
            || format!("level={level} optname={optname}"),
            || self.inner.getopt(level, optname, optval),
        )
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        self.h.ctl(
            &self.name,
            "setopt",
            || format!("level={level} optname={optname}"),
            || self.inner.setopt(level, optname, optval),
        )
    }

    fn close(&self) -> Result<()> {
        self.h.ctl(&self.name, "close", String::new, || Ok(()))
    }
}
