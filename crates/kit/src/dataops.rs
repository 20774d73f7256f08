//! The data calls of fi_msg(3), fi_tagged(3), fi_rma(3) and fi_atomic(3) — the forty
//! `EndpointOps` methods from `send` to `compare_atomicvalid` — reduced to a handful of
//! operations a provider implements once ([`DataPath`]); [`endpoint_data_ops!`](crate::endpoint_data_ops) writes
//! the forty methods inside the provider's `impl EndpointOps` from them.
//!
//! What the methods do before they reach the provider: the enabled check first
//! ([`DataPath::active`], so an endpoint that is not enabled answers
//! `FI_EOPBADSTATE` whatever else is wrong), the I/O vectors of `*msg` calls checked
//! ([`iov_slice`]: null or longer than [`IOV_LIMIT`] is `FI_EINVAL`), `FI_INJECT` checked
//! ([`DataPath::check_inject`]), the `op_flags` of the endpoint's attributes for the
//! calls without flags, `FI_REMOTE_CQ_DATA` deciding whether a `*msg` call carries data,
//! `FI_MULTI_RECV` with exactly one buffer, and the receive flags a posted receive keeps
//! (`FI_COMPLETION`, `FI_MULTI_RECV`; tagged: `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD`).
//! RMA messages take one remote buffer (up to [`DataPath::RMA_IOV_LIMIT`]), atomic
//! messages one remote ioc. A `*msg` transmit call with `FI_TRIGGER` goes to
//! [`crate::trigger`] (kept until its counter reaches the threshold) when the provider
//! takes the flag ([`DataPath::triggers`]).
//!
//! Used by shm, tcp, verbs, efa, `ofi_rxm` and `ofi_rxd` for every data call;
//! by `udp` for the message calls only (`endpoint_data_ops!(msg)`: the other families
//! keep `EndpointOps`' `FI_ENOSYS` defaults). Nothing here panics.

use std::ffi::c_void;

use ofi_core::abi::ops::{DataArgs, DescArg, IovArg, MsgArg, OpFamily, OpKind};
use ofi_core::abi::raw::{Ioc, Iov, MsgAtomic, MsgRma, RmaIoc, RmaIov};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::Desc;
use ofi_core::{Errno, Error, OpFlags, Result};

use crate::iov::{IoList, IOV_LIMIT};
use crate::request::{AtomicRequest, Local, RmaDir, RmaRequest, SendRequest};
use crate::tagmatch::PostedRecv;

/// The names [`endpoint_data_ops!`](crate::endpoint_data_ops) uses, by absolute path.
#[doc(hidden)]
pub mod p {
    pub use crate::iov::IoList;
    pub use crate::tagmatch::PostedRecv;
    pub use ofi_core::abi::raw::{
        Ioc, Iov, Msg as RawMsg, MsgAtomic, MsgRma, MsgTagged, RmaIoc, RmaIov,
    };
    pub use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
    pub use ofi_core::provider::Desc;
    pub use ofi_core::{data_args, for_each_ep_data_op, op_kind};
    pub use ofi_core::{Errno, Error, OpFlags, Result};
    pub use std::ffi::c_void;
}

/// What a provider's endpoint implements so that [`endpoint_data_ops!`](crate::endpoint_data_ops) can write its
/// data calls.
pub trait DataPath {
    /// The provider's name, for error messages.
    const NAME: &'static str;
    /// The most remote buffers one RMA message may name (`FI_EINVAL` past it); 1 unless
    /// the provider takes more ([`RmaRequest::remote_iov`]).
    const RMA_IOV_LIMIT: usize = 1;
    /// The operation flags the provider implements on `*msg` calls
    /// ([`crate::opflags`]: a flag the call defines but the provider does not implement
    /// is `FI_EBADFLAGS`; `FI_MORE` always passes). Add `FI_FENCE` where fences are
    /// honoured.
    const OP_FLAGS: OpFlags = crate::opflags::PROVIDER_DEFAULT;
    /// What a receive without flags (`fi_recv`, `fi_recvv`, tagged alike) keeps of the
    /// endpoint's receive `op_flags`: `FI_COMPLETION`; a provider that honours
    /// `FI_MULTI_RECV` as a default flag adds it (and checks the buffer count itself).
    const RECV_OP_FLAGS: OpFlags = OpFlags::COMPLETION;
    /// What an enabled endpoint hands its operations.
    type Active;
    /// The enabled state; `FI_EOPBADSTATE` before `fi_enable`.
    fn active(&self) -> Result<&Self::Active>;
    /// The transmit `op_flags` (for calls that take no flags).
    fn tx_op_flags(&self) -> OpFlags;
    /// The receive `op_flags` (for calls that take no flags).
    fn rx_op_flags(&self) -> OpFlags;
    /// The source a receive posted for `src` matches (`FI_DIRECTED_RECV` or any).
    fn recv_src(&self, src: u64) -> u64;
    /// The most bytes one `FI_INJECT` operation may carry.
    fn inject_size(&self) -> usize;
    /// `FI_EMSGSIZE` when `flags` has `FI_INJECT` and `len` is over
    /// [`inject_size`](Self::inject_size).
    fn check_inject(&self, flags: OpFlags, len: usize) -> Result<()> {
        let max = self.inject_size();
        if flags.contains(OpFlags::INJECT) && len > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!(
                    "{}: FI_INJECT of {len} bytes exceeds inject_size {max}",
                    Self::NAME
                ),
            ));
        }
        Ok(())
    }
    /// `FI_FENCE` on a transmit `*msg` call (only reached when [`OP_FLAGS`](Self::OP_FLAGS)
    /// has it): `FI_EAGAIN` while an earlier transmit operation of the endpoint has not
    /// completed, so the fenced operation starts only after all of them (the caller
    /// drives progress and posts again, as for any `FI_EAGAIN`).
    fn fence_ready(&self, active: &Self::Active) -> Result<()> {
        let _ = active;
        Ok(())
    }
    /// The endpoint's queue of triggered operations and its domain's progress
    /// engine ([`crate::trigger`]); `None` (the default) for a provider that does not
    /// take `FI_TRIGGER` (it is not in its [`OP_FLAGS`](Self::OP_FLAGS) either).
    fn triggers(
        &self,
    ) -> Option<(
        &crate::trigger::TriggerQueue,
        &std::sync::Arc<crate::progress::ProgressEngine>,
    )> {
        None
    }
    /// Submit a send (message or tagged message).
    fn submit_send(&self, active: &Self::Active, req: SendRequest) -> Result<()>;
    /// Post a receive.
    fn submit_recv(&self, active: &Self::Active, recv: PostedRecv<IoList>) -> Result<()>;
    /// Submit an RMA read or write of one remote buffer. `FI_ENOSYS` by default: only
    /// reached through [`endpoint_data_ops!()`](crate::endpoint_data_ops), which a
    /// provider without RMA does not use.
    fn submit_rma(&self, active: &Self::Active, req: RmaRequest<'_>) -> Result<()> {
        let _ = (active, req);
        Err(not_implemented::<Self>("RMA"))
    }
    /// Submit an atomic (base, fetch or compare) on one remote ioc. `FI_ENOSYS` by
    /// default, as [`submit_rma`](Self::submit_rma).
    fn submit_atomic(&self, active: &Self::Active, req: AtomicRequest<'_>) -> Result<()> {
        let _ = (active, req);
        Err(not_implemented::<Self>("atomics"))
    }
    /// `fi_atomicvalid` and its fetch / compare forms: the most elements per call.
    /// `FI_ENOSYS` by default, as [`submit_rma`](Self::submit_rma).
    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize> {
        let _ = (dt, op, kind);
        Err(not_implemented::<Self>("atomics"))
    }
}

/// `FI_ENOSYS` naming the provider and the family it does not implement.
#[cold]
fn not_implemented<T: DataPath + ?Sized>(what: &str) -> Error {
    Error::new(
        Errno::ENOSYS,
        format!("{}: {what} are not supported", T::NAME),
    )
}

/// The iov array of a message.
///
/// # Safety
/// `p` points to `n` entries (or `n` is 0).
pub unsafe fn iov_slice<'a, T: DataPath + ?Sized>(p: *const Iov, n: usize) -> Result<&'a [Iov]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: null msg_iov", T::NAME),
        ));
    }
    if n > IOV_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: {n} iov entries, the limit is {IOV_LIMIT}", T::NAME),
        ));
    }
    // SAFETY: caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The single remote buffer of an RMA message.
///
/// # Safety
/// `msg.rma_iov` points to `msg.rma_iov_count` entries.
pub unsafe fn one_rma_iov<T: DataPath + ?Sized>(msg: &MsgRma) -> Result<RmaIov> {
    if msg.rma_iov_count != 1 || msg.rma_iov.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{}: {} remote buffers (the limit is 1)",
                T::NAME,
                msg.rma_iov_count
            ),
        ));
    }
    // SAFETY: caller's contract; count is 1.
    Ok(unsafe { *msg.rma_iov })
}

/// The remote buffers of an RMA message: 1 to [`DataPath::RMA_IOV_LIMIT`] of them.
///
/// # Safety
/// `msg.rma_iov` points to `msg.rma_iov_count` entries valid for `'a`.
pub unsafe fn rma_iovs<'a, T: DataPath + ?Sized>(msg: &MsgRma) -> Result<&'a [RmaIov]> {
    let n = msg.rma_iov_count;
    if n == 0 || n > T::RMA_IOV_LIMIT || msg.rma_iov.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{}: {n} remote buffers (the limit is {})",
                T::NAME,
                T::RMA_IOV_LIMIT
            ),
        ));
    }
    // SAFETY: caller's contract; not null, `n` entries.
    Ok(unsafe { std::slice::from_raw_parts(msg.rma_iov, n) })
}

/// A message's descriptor array (empty when null: the C API allows no descriptors).
///
/// # Safety
/// `p` is null or points to `n` entries valid for `'a` (the C contract: one per iov).
pub unsafe fn desc_slice<'a>(p: *const Desc, n: usize) -> &'a [Desc] {
    if p.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// The ioc array of an atomic message (`FI_EINVAL` when null or longer than
/// [`IOV_LIMIT`]).
///
/// # Safety
/// `p` is null or points to `n` entries that stay valid and unchanged for `'a`.
unsafe fn ioc_slice<'a, T: DataPath + ?Sized>(p: *const Ioc, n: usize) -> Result<&'a [Ioc]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() || n > IOV_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: bad atomic iov ({n} entries)", T::NAME),
        ));
    }
    // SAFETY: not null, and the caller's contract: `p` holds `n` entries for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The parts of an atomic message: local iocs, the single remote buffer, datatype and
/// operation.
///
/// # Safety
/// The C contract of the atomic message calls: `msg.msg_iov` holds `msg.iov_count`
/// entries and `msg.rma_iov` (if not null) `msg.rma_iov_count`, valid while `msg` is
/// borrowed.
pub unsafe fn atomic_parts<T: DataPath + ?Sized>(
    msg: &MsgAtomic,
) -> Result<(&[Ioc], RmaIoc, Datatype, AtomicOp)> {
    if msg.rma_iov_count != 1 || msg.rma_iov.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: atomic messages take one remote buffer", T::NAME),
        ));
    }
    // SAFETY: the caller's contract for `msg_iov`.
    let iov = unsafe { ioc_slice::<T>(msg.msg_iov, msg.iov_count)? };
    // SAFETY: the caller's contract; not null and its count is 1.
    let r = unsafe { *msg.rma_iov };
    let dt = Datatype::from_raw(msg.datatype).ok_or_else(|| {
        Error::new(
            Errno::EINVAL,
            format!("{}: unknown atomic datatype", T::NAME),
        )
    })?;
    let op = AtomicOp::from_raw(msg.op).ok_or_else(|| {
        Error::new(
            Errno::EINVAL,
            format!("{}: unknown atomic operation", T::NAME),
        )
    })?;
    Ok((iov, r, dt, op))
}

/// The ioc array of a vector argument (empty when the call has none).
fn ioc_arg(v: IovArg<'_>) -> &[Ioc] {
    match v {
        IovArg::Ioc(v) => v,
        _ => &[],
    }
}

/// The descriptors of an argument; a single descriptor is written into `one`.
fn desc_arg<'a>(d: DescArg<'a>, one: &'a mut [Desc; 1]) -> &'a [Desc] {
    match d {
        DescArg::None => &[],
        DescArg::One(d) => {
            one[0] = d;
            &one[..]
        }
        DescArg::Many(v) => v,
    }
}

fn typed<T: DataPath + ?Sized, V>(v: Option<V>, what: &str) -> Result<V> {
    v.ok_or_else(|| Error::new(Errno::EINVAL, format!("{}: no atomic {what}", T::NAME)))
}

/// One data call of the list of operations, of kind `kind` with arguments `a`, on the
/// endpoint's [`DataPath`]: what every method [`endpoint_data_ops!`](crate::endpoint_data_ops)
/// writes calls (with `kind` a constant, so the dispatch folds away: this function and
/// the four it picks from are `#[inline(always)]`, so each data method compiles to its
/// own path — measured on shm's `fi_inject`, a shared out-of-line `send` cost about
/// 100 instructions per call more than the provider's hand-written method).
///
/// # Safety
/// The C API's contract for the call: buffers, arrays and messages of `a` valid for
/// their counts until the operation completes (for an inject, during the call).
#[inline(always)]
pub unsafe fn dispatch<T: DataPath + ?Sized>(ep: &T, kind: OpKind, a: &DataArgs<'_>) -> Result<()> {
    // SAFETY: forwarded.
    unsafe {
        match kind.family {
            OpFamily::Send => send::<T>(ep, kind, a),
            OpFamily::Recv => recv::<T>(ep, kind, a),
            OpFamily::Read | OpFamily::Write => rma::<T>(ep, kind, a),
            OpFamily::Atomic | OpFamily::Fetch | OpFamily::Compare => atomic::<T>(ep, kind, a),
        }
    }
}

/// The flags of a `*msg` call (none for the others), checked against what the call
/// defines and the provider implements ([`crate::opflags::check_call`]), then with what
/// they imply ([`crate::opflags::with_implied`]); with `FI_FENCE`, `FI_EAGAIN` until
/// the earlier operations completed ([`DataPath::fence_ready`]).
#[inline(always)]
fn msg_flags<T: DataPath + ?Sized>(
    ep: &T,
    active: &T::Active,
    kind: OpKind,
    a: &DataArgs<'_>,
) -> Result<OpFlags> {
    let flags = a.flags.unwrap_or(OpFlags::empty());
    if flags.is_empty() {
        return Ok(flags);
    }
    crate::opflags::check_call(T::NAME, kind, flags, T::OP_FLAGS)?;
    if flags.contains(OpFlags::FENCE) {
        ep.fence_ready(active)?;
    }
    Ok(crate::opflags::with_implied(flags))
}

/// A `*msg` call made with `FI_TRIGGER` ([`crate::trigger`]; with `FI_INJECT`:
/// `FI_EBADFLAGS`): its counter resolved and checked, then issued at once when the counter has reached the threshold
/// already, otherwise kept in the endpoint's queue.
///
/// # Safety
/// As [`dispatch`].
#[cold]
unsafe fn defer<T: DataPath + ?Sized>(
    ep: &T,
    kind: OpKind,
    flags: OpFlags,
    a: &DataArgs<'_>,
) -> Result<()> {
    let Some((queue, engine)) = ep.triggers() else {
        return Err(Error::new(
            Errno::EBADFLAGS,
            format!("{}: FI_TRIGGER is not supported", T::NAME),
        ));
    };
    if flags.contains(OpFlags::INJECT) {
        // The buffer of an inject is the caller's again on return; a deferred call
        // would read it later.
        return Err(Error::new(
            Errno::EBADFLAGS,
            format!("{}: FI_INJECT with FI_TRIGGER is not supported", T::NAME),
        ));
    }
    let context = match a.msg {
        MsgArg::Msg(m) => m.context,
        MsgArg::Tagged(m) => m.context,
        MsgArg::Rma(m) => m.context,
        MsgArg::Atomic(m) => m.context,
        MsgArg::None => 0,
    };
    // SAFETY: the C API's contract: the context of a triggered call is its
    // `struct fi_triggered_context`; the message's arrays hold their counts.
    let ((cntr, threshold), call) = unsafe {
        (
            crate::trigger::resolve_counter(T::NAME, context, engine)?,
            crate::trigger::OwnedCall::capture(T::NAME, kind, flags, a)?,
        )
    };
    if cntr.value() >= threshold {
        // SAFETY: the buffers are the caller's contract, as for any call.
        return unsafe { call.issue(ep) };
    }
    queue.push(T::NAME, cntr, threshold, call)
}

/// A send: single buffer, vector, or message (`FI_REMOTE_CQ_DATA` decides the data,
/// `FI_INJECT` is checked); injects are checked against `inject_size`.
///
/// # Safety
/// As [`dispatch`].
#[inline(always)]
unsafe fn send<T: DataPath + ?Sized>(ep: &T, kind: OpKind, a: &DataArgs<'_>) -> Result<()> {
    let active = ep.active()?;
    let tag = kind.tagged.then_some(a.tag);
    let (iov, count, dest, context, tag, data) = match a.msg {
        MsgArg::Msg(m) => (m.msg_iov, m.iov_count, m.addr, m.context, tag, m.data),
        MsgArg::Tagged(m) => (
            m.msg_iov,
            m.iov_count,
            m.addr,
            m.context,
            Some(m.tag),
            m.data,
        ),
        _ => {
            let iov = match a.iov {
                IovArg::Iov(v) => IoList::from_iov(v, T::NAME)?,
                _ => IoList::one(a.buf, a.len),
            };
            let req = if kind.inject {
                ep.check_inject(OpFlags::INJECT, a.len)?;
                SendRequest {
                    iov,
                    dest: a.dest,
                    context: 0,
                    tag,
                    data: a.data,
                    flags: OpFlags::empty(),
                    inject: true,
                }
            } else {
                SendRequest {
                    iov,
                    dest: a.dest,
                    context: a.context,
                    tag,
                    data: a.data,
                    flags: ep.tx_op_flags(),
                    inject: false,
                }
            };
            return ep.submit_send(active, req);
        }
    };
    let flags = msg_flags(ep, active, kind, a)?;
    if flags.contains(OpFlags::TRIGGER) {
        // SAFETY: forwarded.
        return unsafe { defer(ep, kind, flags, a) };
    }
    // SAFETY: the C API's contract.
    let iov = unsafe { iov_slice::<T>(iov, count)? };
    let iov = IoList::from_iov(iov, T::NAME)?;
    ep.check_inject(flags, iov.total())?;
    let req = SendRequest {
        iov,
        dest,
        context,
        tag,
        data: flags.contains(OpFlags::REMOTE_CQ_DATA).then_some(data),
        flags,
        inject: false,
    };
    ep.submit_send(active, req)
}

/// A posted receive: single buffer or vector (the receive `op_flags` give
/// `FI_COMPLETION`), or message (`FI_MULTI_RECV` with exactly one buffer; tagged:
/// `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD` kept).
///
/// # Safety
/// As [`dispatch`].
#[inline(always)]
unsafe fn recv<T: DataPath + ?Sized>(ep: &T, kind: OpKind, a: &DataArgs<'_>) -> Result<()> {
    let active = ep.active()?;
    let flags = msg_flags(ep, active, kind, a)?;
    let r = match a.msg {
        MsgArg::Msg(m) => {
            // SAFETY: the C API's contract.
            let iov = unsafe { iov_slice::<T>(m.msg_iov, m.iov_count)? };
            let l = IoList::from_iov(iov, T::NAME)?;
            if flags.contains(OpFlags::MULTI_RECV) && l.len() != 1 {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{}: FI_MULTI_RECV needs exactly one buffer", T::NAME),
                ));
            }
            PostedRecv::msg(m.context, l, l.total())
                .from_src(ep.recv_src(m.addr))
                .with_flags(flags & (OpFlags::MULTI_RECV | OpFlags::COMPLETION))
        }
        MsgArg::Tagged(m) => {
            // SAFETY: the C API's contract.
            let iov = unsafe { iov_slice::<T>(m.msg_iov, m.iov_count)? };
            let l = IoList::from_iov(iov, T::NAME)?;
            let keep = OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD | OpFlags::COMPLETION;
            PostedRecv::tagged(m.context, m.tag, m.ignore, l, l.total())
                .from_src(ep.recv_src(m.addr))
                .with_flags(flags & keep)
        }
        _ => {
            let (l, total) = match a.iov {
                IovArg::Iov(v) => {
                    let l = IoList::from_iov(v, T::NAME)?;
                    (l, l.total())
                }
                _ => (IoList::one(a.buf, a.len), a.len),
            };
            let r = if kind.tagged {
                PostedRecv::tagged(a.context, a.tag, a.ignore, l, total)
            } else {
                PostedRecv::msg(a.context, l, total)
            };
            r.from_src(ep.recv_src(a.src))
                .with_flags(ep.rx_op_flags() & T::RECV_OP_FLAGS)
        }
    };
    ep.submit_recv(active, r)
}

/// An RMA read or write of one remote buffer: single buffer, vector, or message
/// (a write message's data by `FI_REMOTE_CQ_DATA`); injects carry no descriptors.
///
/// # Safety
/// As [`dispatch`].
#[inline(always)]
unsafe fn rma<T: DataPath + ?Sized>(ep: &T, kind: OpKind, a: &DataArgs<'_>) -> Result<()> {
    let active = ep.active()?;
    let dir = if matches!(kind.family, OpFamily::Read) {
        RmaDir::Read
    } else {
        RmaDir::Write
    };
    if let MsgArg::Rma(m) = a.msg {
        let flags = msg_flags(ep, active, kind, a)?;
        if flags.contains(OpFlags::TRIGGER) {
            // SAFETY: forwarded.
            return unsafe { defer(ep, kind, flags, a) };
        }
        // SAFETY: the C API's contract.
        let bufs = unsafe { iov_slice::<T>(m.msg_iov, m.iov_count)? };
        // SAFETY: as above.
        let remote_iov = unsafe { rma_iovs::<T>(m)? };
        // SAFETY: the C API's contract for the message's desc array.
        let desc = unsafe { desc_slice(m.desc, m.iov_count) };
        let req = RmaRequest {
            dir,
            local: Local { bufs, desc },
            peer: m.addr,
            remote: remote_iov[0],
            remote_iov,
            context: m.context,
            data: (dir == RmaDir::Write && flags.contains(OpFlags::REMOTE_CQ_DATA))
                .then_some(m.data),
            flags,
            inject: false,
        };
        return ep.submit_rma(active, req);
    }
    let one = [Iov {
        base: a.buf as *mut c_void,
        len: a.len,
    }];
    let bufs: &[Iov] = match a.iov {
        IovArg::Iov(v) => v,
        _ => &one,
    };
    let mut one_desc = [std::ptr::null_mut(); 1];
    let local = Local {
        bufs,
        desc: if kind.inject {
            &[]
        } else {
            desc_arg(a.desc, &mut one_desc)
        },
    };
    let remote = RmaIov {
        addr: a.addr,
        len: local.total(),
        key: a.key,
    };
    let (context, flags) = if kind.inject {
        (0, OpFlags::empty())
    } else {
        (a.context, ep.tx_op_flags())
    };
    let req = RmaRequest {
        dir,
        local,
        peer: if dir == RmaDir::Read { a.src } else { a.dest },
        remote,
        remote_iov: std::slice::from_ref(&remote),
        context,
        data: a.data,
        flags,
        inject: kind.inject,
    };
    ep.submit_rma(active, req)
}

/// An atomic (base, fetch or compare) on one remote ioc: single buffer, vector, or
/// message.
///
/// # Safety
/// As [`dispatch`].
#[inline(always)]
unsafe fn atomic<T: DataPath + ?Sized>(ep: &T, kind: OpKind, a: &DataArgs<'_>) -> Result<()> {
    let active = ep.active()?;
    let akind = match kind.family {
        OpFamily::Fetch => AtomicKind::Fetch,
        OpFamily::Compare => AtomicKind::Compare,
        _ => AtomicKind::Base,
    };
    let (mut one_cdesc, mut one_rdesc) = ([std::ptr::null_mut(); 1], [std::ptr::null_mut(); 1]);
    let compare = Local {
        bufs: ioc_arg(a.comparev),
        desc: desc_arg(a.compare_desc, &mut one_cdesc),
    };
    let result = Local {
        bufs: ioc_arg(a.resultv),
        desc: desc_arg(a.result_desc, &mut one_rdesc),
    };
    if let MsgArg::Atomic(m) = a.msg {
        let flags = msg_flags(ep, active, kind, a)?;
        if flags.contains(OpFlags::TRIGGER) {
            // SAFETY: forwarded.
            return unsafe { defer(ep, kind, flags, a) };
        }
        // SAFETY: the C API's contract for an atomic message (this function's own).
        let (bufs, remote, datatype, op) = unsafe { atomic_parts::<T>(m)? };
        // SAFETY: the C API's contract for the message's desc array.
        let desc = unsafe { desc_slice(m.desc, m.iov_count) };
        let req = AtomicRequest {
            kind: akind,
            operands: Local { bufs, desc },
            compare,
            result,
            peer: m.addr,
            remote,
            datatype,
            op,
            context: m.context,
            flags,
            inject: false,
        };
        return ep.submit_atomic(active, req);
    }
    let datatype = typed::<T, _>(a.datatype, "datatype")?;
    let op = typed::<T, _>(a.op, "operation")?;
    let mut one_desc = [std::ptr::null_mut(); 1];
    let one = |addr: usize| Ioc {
        addr: addr as *mut c_void,
        count: a.count,
    };
    let (operand_one, compare_one, result_one) = ([one(a.buf)], [one(a.compare)], [one(a.result)]);
    let (operands, compare, result, count, inject) = if let IovArg::Ioc(bufs) = a.iov {
        let operands = Local {
            bufs,
            desc: desc_arg(a.desc, &mut one_desc),
        };
        // A fetch counts the elements it returns; the others the elements they send.
        let count = if akind == AtomicKind::Fetch {
            result.count()
        } else {
            operands.count()
        };
        (operands, compare, result, count, false)
    } else {
        // A fetch with no operand (FI_ATOMIC_READ) sends none.
        let operands = Local {
            bufs: if akind == AtomicKind::Fetch && a.buf == 0 {
                &[]
            } else {
                &operand_one[..]
            },
            desc: desc_arg(a.desc, &mut one_desc),
        };
        let compare = Local {
            bufs: if akind == AtomicKind::Compare {
                &compare_one[..]
            } else {
                &[]
            },
            ..compare
        };
        let result = Local {
            bufs: if akind == AtomicKind::Base {
                &[]
            } else {
                &result_one[..]
            },
            ..result
        };
        (operands, compare, result, a.count, kind.inject)
    };
    let (context, flags) = if inject {
        (0, OpFlags::empty())
    } else {
        (a.context, ep.tx_op_flags())
    };
    let req = AtomicRequest {
        kind: akind,
        operands,
        compare,
        result,
        peer: a.dest,
        remote: RmaIoc {
            addr: a.addr,
            count,
            key: a.key,
        },
        datatype,
        op,
        context,
        flags,
        inject,
    };
    ep.submit_atomic(active, req)
}

/// Writes the data methods of `EndpointOps` from the list of data operations
/// (`ofi_core::for_each_ep_data_op!`): each fills the call's
/// [`DataArgs`](ofi_core::abi::ops::DataArgs) and calls [`dispatch`] with the
/// entry's kind. Used by [`endpoint_data_ops!`](crate::endpoint_data_ops).
#[doc(hidden)]
#[macro_export]
macro_rules! __kit_data_methods {
    ($($group:ident $Table:ident {
        $($(#[$doc:meta])* $name:ident / $host:ident / $V:ident $since:tt $kind:tt $c:tt
            ($($p:ident : $pty:ty = $from:expr),*) $low:tt;)*
    } $queries:tt)*) => {$($(
        unsafe fn $name(&self, $($p: $pty),*) -> $crate::dataops::p::Result<()> {
            // SAFETY: the C API's contract for this call, forwarded.
            unsafe {
                $crate::dataops::dispatch::<Self>(
                    self,
                    $crate::dataops::p::op_kind!($kind),
                    &$crate::dataops::p::data_args!($($p),*),
                )
            }
        }
    )*)*};
}

/// The message calls only (the first family of the list, `msg`): what
/// [`endpoint_data_ops!(msg)`](crate::endpoint_data_ops) writes.
#[doc(hidden)]
#[macro_export]
macro_rules! __kit_msg_methods {
    (msg $Table:ident $entries:tt $queries:tt $($other_families:tt)*) => {
        $crate::__kit_data_methods! { msg $Table $entries $queries }
    };
}

/// Write the data calls of `EndpointOps` (messages, tagged messages, RMA, atomics and
/// the `*atomicvalid` queries) from the endpoint's [`DataPath`]: one method per entry
/// of the list of data operations (`ofi_core::for_each_ep_data_op!`), each a call of
/// [`dispatch`]. Invoke inside `impl EndpointOps<F> for YourEndpoint { ... }`, next to
/// the control methods. `endpoint_data_ops!(msg)` writes the nine message calls only
/// (`fi_send` to `fi_recvmsg`), for a provider with neither tagged messages, RMA nor
/// atomics: those keep `EndpointOps`' defaults (`FI_ENOSYS`).
#[macro_export]
macro_rules! endpoint_data_ops {
    (msg) => {
        $crate::dataops::p::for_each_ep_data_op!($crate::__kit_msg_methods);
    };
    () => {
        $crate::dataops::p::for_each_ep_data_op!($crate::__kit_data_methods);
        $crate::endpoint_data_ops!(@valid atomicvalid, Base);
        $crate::endpoint_data_ops!(@valid fetch_atomicvalid, Fetch);
        $crate::endpoint_data_ops!(@valid compare_atomicvalid, Compare);
    };
    // One `*atomicvalid` query: the data path's largest count for that call family.
    (@valid $name:ident, $kind:ident) => {
        fn $name(
            &self,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
        ) -> $crate::dataops::p::Result<usize> {
            $crate::dataops::DataPath::atomic_max(
                self,
                datatype,
                op,
                $crate::dataops::p::AtomicKind::$kind,
            )
        }
    };
}
