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
//! RMA messages take one remote buffer, atomic messages one remote ioc.
//!
//! Used by `ofi_rxm` and `ofi_rxd`. Nothing here panics.

use std::ffi::c_void;

use ofi_core::abi::raw::{Ioc, Iov, MsgAtomic, MsgRma, RmaIoc, RmaIov};
use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
use ofi_core::provider::Desc;
use ofi_core::{Errno, Error, OpFlags, Result};

use crate::iov::{IoList, IOV_LIMIT};
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
    pub use ofi_core::{Errno, Error, OpFlags, Result};
    pub use std::ffi::c_void;
}

/// What a provider's endpoint implements so that [`endpoint_data_ops!`](crate::endpoint_data_ops) can write its
/// data calls.
pub trait DataPath {
    /// The provider's name, for error messages.
    const NAME: &'static str;
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
    /// Send `iov` to `dest` (`tag` with `tagged`; remote CQ `data`; `inject`: no
    /// completion, the buffer may be reused on return).
    #[allow(clippy::too_many_arguments)]
    fn send_list(
        &self,
        act: &Self::Active,
        iov: IoList,
        dest: u64,
        ctx: usize,
        tag: u64,
        data: Option<u64>,
        tagged: bool,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()>;
    /// Post a receive.
    fn post_recv(&self, act: &Self::Active, recv: PostedRecv<IoList>) -> Result<()>;
    /// An RMA read (`read`) or write of `iov` from / to one remote buffer.
    #[allow(clippy::too_many_arguments)]
    fn rma(
        &self,
        iov: Vec<Iov>,
        desc: Vec<usize>,
        peer: u64,
        rma: RmaIov,
        ctx: usize,
        data: Option<u64>,
        read: bool,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()>;
    /// An atomic of `kind` (operands `iov`, compare values `cmp`, results `res`) on one
    /// remote ioc.
    #[allow(clippy::too_many_arguments)]
    fn atomic_any(
        &self,
        kind: AtomicKind,
        iov: &[Ioc],
        desc: Vec<usize>,
        cmp: &[Ioc],
        cdesc: Vec<usize>,
        res: &[Ioc],
        rdesc: Vec<usize>,
        peer: u64,
        rma: RmaIoc,
        dt: Datatype,
        op: AtomicOp,
        ctx: usize,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()>;
    /// `fi_atomicvalid` and its fetch / compare forms: the most elements per call.
    fn atomic_max(&self, dt: Datatype, op: AtomicOp, kind: AtomicKind) -> Result<usize>;
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

/// Descriptors as integers.
pub fn descs<T: DataPath + ?Sized>(d: &[Desc]) -> Vec<usize> {
    d.iter().map(|p| *p as usize).collect()
}

/// A message's descriptor array as integers.
///
/// # Safety
/// `p` is null or points to `n` entries (the C contract: one per iov).
pub unsafe fn desc_vec<T: DataPath + ?Sized>(p: *const *mut c_void, n: usize) -> Vec<usize> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
        .iter()
        .map(|d| *d as usize)
        .collect()
}

fn ioc_slice<'a, T: DataPath + ?Sized>(p: *const Ioc, n: usize) -> Result<&'a [Ioc]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() || n > IOV_LIMIT {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: bad atomic iov ({n} entries)", T::NAME),
        ));
    }
    // SAFETY: the C contract of the atomic message calls: `p` holds `n` entries.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The parts of an atomic message: local iocs, the single remote buffer, datatype and
/// operation.
pub fn atomic_parts<T: DataPath + ?Sized>(
    msg: &MsgAtomic,
) -> Result<(&[Ioc], RmaIoc, Datatype, AtomicOp)> {
    if msg.rma_iov_count != 1 || msg.rma_iov.is_null() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: atomic messages take one remote buffer", T::NAME),
        ));
    }
    let iov = ioc_slice::<T>(msg.msg_iov, msg.iov_count)?;
    // SAFETY: the C contract; count is 1.
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

/// Write the data calls of `EndpointOps` (messages, tagged messages, RMA, atomics and
/// the `*atomicvalid` queries) from the endpoint's [`DataPath`]. Invoke inside
/// `impl EndpointOps<F> for YourEndpoint { ... }`, next to the control methods.
#[macro_export]
macro_rules! endpoint_data_ops {
    () => {
        unsafe fn send(
            &self,
            buf: *const u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            dest: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                ctx,
                0,
                None,
                false,
                f,
                false,
            )
        }

        unsafe fn sendv(
            &self,
            iov: &[$crate::dataops::p::Iov],
            _d: &[$crate::dataops::p::Desc],
            dest: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::from_iov(
                    iov,
                    <Self as $crate::dataops::DataPath>::NAME,
                )?,
                dest,
                ctx,
                0,
                None,
                false,
                f,
                false,
            )
        }

        unsafe fn sendmsg(
            &self,
            msg: &$crate::dataops::p::RawMsg,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            let data = flags
                .contains($crate::dataops::p::OpFlags::REMOTE_CQ_DATA)
                .then_some(msg.data);
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            $crate::dataops::DataPath::check_inject(self, flags, l.total())?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                l,
                msg.addr,
                msg.context,
                0,
                data,
                false,
                flags,
                false,
            )
        }

        unsafe fn inject(
            &self,
            buf: *const u8,
            len: usize,
            dest: u64,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            $crate::dataops::DataPath::check_inject(
                self,
                $crate::dataops::p::OpFlags::INJECT,
                len,
            )?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                0,
                0,
                None,
                false,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn senddata(
            &self,
            buf: *const u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            data: u64,
            dest: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                ctx,
                0,
                Some(data),
                false,
                f,
                false,
            )
        }

        unsafe fn injectdata(
            &self,
            buf: *const u8,
            len: usize,
            data: u64,
            dest: u64,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            $crate::dataops::DataPath::check_inject(
                self,
                $crate::dataops::p::OpFlags::INJECT,
                len,
            )?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                0,
                0,
                Some(data),
                false,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn recv(
            &self,
            buf: *mut u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            src: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let r = $crate::dataops::p::PostedRecv::msg(
                ctx,
                $crate::dataops::p::IoList::one(buf as usize, len),
                len,
            )
            .from_src($crate::dataops::DataPath::recv_src(self, src))
            .with_flags(
                $crate::dataops::DataPath::rx_op_flags(self)
                    & $crate::dataops::p::OpFlags::COMPLETION,
            );
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        unsafe fn recvv(
            &self,
            iov: &[$crate::dataops::p::Iov],
            _d: &[$crate::dataops::p::Desc],
            src: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            let r = $crate::dataops::p::PostedRecv::msg(ctx, l, l.total())
                .from_src($crate::dataops::DataPath::recv_src(self, src))
                .with_flags(
                    $crate::dataops::DataPath::rx_op_flags(self)
                        & $crate::dataops::p::OpFlags::COMPLETION,
                );
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        unsafe fn recvmsg(
            &self,
            msg: &$crate::dataops::p::RawMsg,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            if flags.contains($crate::dataops::p::OpFlags::MULTI_RECV) && l.len() != 1 {
                return Err($crate::dataops::p::Error::new(
                    $crate::dataops::p::Errno::EINVAL,
                    format!(
                        "{}: FI_MULTI_RECV needs exactly one buffer",
                        <Self as $crate::dataops::DataPath>::NAME
                    ),
                ));
            }
            let r = $crate::dataops::p::PostedRecv::msg(msg.context, l, l.total())
                .from_src($crate::dataops::DataPath::recv_src(self, msg.addr))
                .with_flags(
                    flags
                        & ($crate::dataops::p::OpFlags::MULTI_RECV
                            | $crate::dataops::p::OpFlags::COMPLETION),
                );
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        unsafe fn tsend(
            &self,
            buf: *const u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            dest: u64,
            tag: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                ctx,
                tag,
                None,
                true,
                f,
                false,
            )
        }

        unsafe fn tsendv(
            &self,
            iov: &[$crate::dataops::p::Iov],
            _d: &[$crate::dataops::p::Desc],
            dest: u64,
            tag: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::from_iov(
                    iov,
                    <Self as $crate::dataops::DataPath>::NAME,
                )?,
                dest,
                ctx,
                tag,
                None,
                true,
                f,
                false,
            )
        }

        unsafe fn tsendmsg(
            &self,
            msg: &$crate::dataops::p::MsgTagged,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            let data = flags
                .contains($crate::dataops::p::OpFlags::REMOTE_CQ_DATA)
                .then_some(msg.data);
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            $crate::dataops::DataPath::check_inject(self, flags, l.total())?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                l,
                msg.addr,
                msg.context,
                msg.tag,
                data,
                true,
                flags,
                false,
            )
        }

        unsafe fn tinject(
            &self,
            buf: *const u8,
            len: usize,
            dest: u64,
            tag: u64,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            $crate::dataops::DataPath::check_inject(
                self,
                $crate::dataops::p::OpFlags::INJECT,
                len,
            )?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                0,
                tag,
                None,
                true,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn tsenddata(
            &self,
            buf: *const u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            data: u64,
            dest: u64,
            tag: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let f = $crate::dataops::DataPath::tx_op_flags(self);
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                ctx,
                tag,
                Some(data),
                true,
                f,
                false,
            )
        }

        unsafe fn tinjectdata(
            &self,
            buf: *const u8,
            len: usize,
            data: u64,
            dest: u64,
            tag: u64,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            $crate::dataops::DataPath::check_inject(
                self,
                $crate::dataops::p::OpFlags::INJECT,
                len,
            )?;
            $crate::dataops::DataPath::send_list(
                self,
                act,
                $crate::dataops::p::IoList::one(buf as usize, len),
                dest,
                0,
                tag,
                Some(data),
                true,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn trecv(
            &self,
            buf: *mut u8,
            len: usize,
            _d: $crate::dataops::p::Desc,
            src: u64,
            tag: u64,
            ignore: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let r = $crate::dataops::p::PostedRecv::tagged(
                ctx,
                tag,
                ignore,
                $crate::dataops::p::IoList::one(buf as usize, len),
                len,
            )
            .from_src($crate::dataops::DataPath::recv_src(self, src))
            .with_flags(
                $crate::dataops::DataPath::rx_op_flags(self)
                    & $crate::dataops::p::OpFlags::COMPLETION,
            );
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        unsafe fn trecvv(
            &self,
            iov: &[$crate::dataops::p::Iov],
            _d: &[$crate::dataops::p::Desc],
            src: u64,
            tag: u64,
            ignore: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            let r = $crate::dataops::p::PostedRecv::tagged(ctx, tag, ignore, l, l.total())
                .from_src($crate::dataops::DataPath::recv_src(self, src))
                .with_flags(
                    $crate::dataops::DataPath::rx_op_flags(self)
                        & $crate::dataops::p::OpFlags::COMPLETION,
                );
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        unsafe fn trecvmsg(
            &self,
            msg: &$crate::dataops::p::MsgTagged,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let act = $crate::dataops::DataPath::active(self)?;
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            let l = $crate::dataops::p::IoList::from_iov(
                iov,
                <Self as $crate::dataops::DataPath>::NAME,
            )?;
            let keep = $crate::dataops::p::OpFlags::PEEK
                | $crate::dataops::p::OpFlags::CLAIM
                | $crate::dataops::p::OpFlags::DISCARD
                | $crate::dataops::p::OpFlags::COMPLETION;
            let r = $crate::dataops::p::PostedRecv::tagged(
                msg.context,
                msg.tag,
                msg.ignore,
                l,
                l.total(),
            )
            .from_src($crate::dataops::DataPath::recv_src(self, msg.addr))
            .with_flags(flags & keep);
            $crate::dataops::DataPath::post_recv(self, act, r)
        }

        // ---- RMA ----

        unsafe fn read(
            &self,
            buf: *mut u8,
            len: usize,
            d: $crate::dataops::p::Desc,
            src: u64,
            addr: u64,
            key: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = vec![$crate::dataops::p::Iov {
                base: buf as *mut $crate::dataops::p::c_void,
                len,
            }];
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov,
                $crate::dataops::descs::<Self>(&[d]),
                src,
                rma,
                ctx,
                None,
                true,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn readv(
            &self,
            iov: &[$crate::dataops::p::Iov],
            d: &[$crate::dataops::p::Desc],
            src: u64,
            addr: u64,
            key: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let len = iov.iter().map(|v| v.len).sum();
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov.to_vec(),
                $crate::dataops::descs::<Self>(d),
                src,
                rma,
                ctx,
                None,
                true,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn readmsg(
            &self,
            msg: &$crate::dataops::p::MsgRma,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            // SAFETY: as above.
            let rma = unsafe { $crate::dataops::one_rma_iov::<Self>(msg)? };
            // SAFETY: the C API's contract for the message's desc array.
            let d = unsafe { $crate::dataops::desc_vec::<Self>(msg.desc, msg.iov_count) };
            $crate::dataops::DataPath::rma(
                self,
                iov.to_vec(),
                d,
                msg.addr,
                rma,
                msg.context,
                None,
                true,
                flags,
                false,
            )
        }

        unsafe fn write(
            &self,
            buf: *const u8,
            len: usize,
            d: $crate::dataops::p::Desc,
            dest: u64,
            addr: u64,
            key: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = vec![$crate::dataops::p::Iov {
                base: buf as *mut $crate::dataops::p::c_void,
                len,
            }];
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov,
                $crate::dataops::descs::<Self>(&[d]),
                dest,
                rma,
                ctx,
                None,
                false,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn writev(
            &self,
            iov: &[$crate::dataops::p::Iov],
            d: &[$crate::dataops::p::Desc],
            dest: u64,
            addr: u64,
            key: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let len = iov.iter().map(|v| v.len).sum();
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov.to_vec(),
                $crate::dataops::descs::<Self>(d),
                dest,
                rma,
                ctx,
                None,
                false,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn writemsg(
            &self,
            msg: &$crate::dataops::p::MsgRma,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            // SAFETY: the C API's contract.
            let iov = unsafe { $crate::dataops::iov_slice::<Self>(msg.msg_iov, msg.iov_count)? };
            // SAFETY: as above.
            let rma = unsafe { $crate::dataops::one_rma_iov::<Self>(msg)? };
            let data = flags
                .contains($crate::dataops::p::OpFlags::REMOTE_CQ_DATA)
                .then_some(msg.data);
            // SAFETY: the C API's contract for the message's desc array.
            let d = unsafe { $crate::dataops::desc_vec::<Self>(msg.desc, msg.iov_count) };
            $crate::dataops::DataPath::rma(
                self,
                iov.to_vec(),
                d,
                msg.addr,
                rma,
                msg.context,
                data,
                false,
                flags,
                false,
            )
        }

        unsafe fn inject_write(
            &self,
            buf: *const u8,
            len: usize,
            dest: u64,
            addr: u64,
            key: u64,
        ) -> $crate::dataops::p::Result<()> {
            let iov = vec![$crate::dataops::p::Iov {
                base: buf as *mut $crate::dataops::p::c_void,
                len,
            }];
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov,
                Vec::new(),
                dest,
                rma,
                0,
                None,
                false,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn writedata(
            &self,
            buf: *const u8,
            len: usize,
            d: $crate::dataops::p::Desc,
            data: u64,
            dest: u64,
            addr: u64,
            key: u64,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = vec![$crate::dataops::p::Iov {
                base: buf as *mut $crate::dataops::p::c_void,
                len,
            }];
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov,
                $crate::dataops::descs::<Self>(&[d]),
                dest,
                rma,
                ctx,
                Some(data),
                false,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
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
        ) -> $crate::dataops::p::Result<()> {
            let iov = vec![$crate::dataops::p::Iov {
                base: buf as *mut $crate::dataops::p::c_void,
                len,
            }];
            let rma = $crate::dataops::p::RmaIov { addr, len, key };
            $crate::dataops::DataPath::rma(
                self,
                iov,
                Vec::new(),
                dest,
                rma,
                0,
                Some(data),
                false,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        // ---- atomics ----

        unsafe fn atomic(
            &self,
            buf: *const $crate::dataops::p::c_void,
            count: usize,
            d: $crate::dataops::p::Desc,
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = [$crate::dataops::p::Ioc {
                addr: buf as *mut $crate::dataops::p::c_void,
                count,
            }];
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Base,
                &iov,
                $crate::dataops::descs::<Self>(&[d]),
                &[],
                Vec::new(),
                &[],
                Vec::new(),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn atomicv(
            &self,
            iov: &[$crate::dataops::p::Ioc],
            d: &[$crate::dataops::p::Desc],
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let count = iov.iter().map(|v| v.count).sum();
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Base,
                iov,
                $crate::dataops::descs::<Self>(d),
                &[],
                Vec::new(),
                &[],
                Vec::new(),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn atomicmsg(
            &self,
            msg: &$crate::dataops::p::MsgAtomic,
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let (iov, rma, dt, op) = $crate::dataops::atomic_parts::<Self>(msg)?;
            // SAFETY: the C API's contract for the message's desc array.
            let d = unsafe { $crate::dataops::desc_vec::<Self>(msg.desc, msg.iov_count) };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Base,
                iov,
                d,
                &[],
                Vec::new(),
                &[],
                Vec::new(),
                msg.addr,
                rma,
                dt,
                op,
                msg.context,
                flags,
                false,
            )
        }

        unsafe fn inject_atomic(
            &self,
            buf: *const $crate::dataops::p::c_void,
            count: usize,
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
        ) -> $crate::dataops::p::Result<()> {
            let iov = [$crate::dataops::p::Ioc {
                addr: buf as *mut $crate::dataops::p::c_void,
                count,
            }];
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Base,
                &iov,
                Vec::new(),
                &[],
                Vec::new(),
                &[],
                Vec::new(),
                dest,
                rma,
                datatype,
                op,
                0,
                $crate::dataops::p::OpFlags::empty(),
                true,
            )
        }

        unsafe fn fetch_atomic(
            &self,
            buf: *const $crate::dataops::p::c_void,
            count: usize,
            d: $crate::dataops::p::Desc,
            result: *mut $crate::dataops::p::c_void,
            result_desc: $crate::dataops::p::Desc,
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = [$crate::dataops::p::Ioc {
                addr: buf as *mut $crate::dataops::p::c_void,
                count,
            }];
            let res = [$crate::dataops::p::Ioc {
                addr: result,
                count,
            }];
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            let iovs: &[$crate::dataops::p::Ioc] = if buf.is_null() { &[] } else { &iov };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Fetch,
                iovs,
                $crate::dataops::descs::<Self>(&[d]),
                &[],
                Vec::new(),
                &res,
                $crate::dataops::descs::<Self>(&[result_desc]),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn fetch_atomicv(
            &self,
            iov: &[$crate::dataops::p::Ioc],
            d: &[$crate::dataops::p::Desc],
            resultv: &[$crate::dataops::p::Ioc],
            result_desc: &[$crate::dataops::p::Desc],
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let count = resultv.iter().map(|v| v.count).sum();
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Fetch,
                iov,
                $crate::dataops::descs::<Self>(d),
                &[],
                Vec::new(),
                resultv,
                $crate::dataops::descs::<Self>(result_desc),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn fetch_atomicmsg(
            &self,
            msg: &$crate::dataops::p::MsgAtomic,
            resultv: &[$crate::dataops::p::Ioc],
            result_desc: &[$crate::dataops::p::Desc],
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let (iov, rma, dt, op) = $crate::dataops::atomic_parts::<Self>(msg)?;
            // SAFETY: the C API's contract for the message's desc array.
            let d = unsafe { $crate::dataops::desc_vec::<Self>(msg.desc, msg.iov_count) };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Fetch,
                iov,
                d,
                &[],
                Vec::new(),
                resultv,
                $crate::dataops::descs::<Self>(result_desc),
                msg.addr,
                rma,
                dt,
                op,
                msg.context,
                flags,
                false,
            )
        }

        unsafe fn compare_atomic(
            &self,
            buf: *const $crate::dataops::p::c_void,
            count: usize,
            d: $crate::dataops::p::Desc,
            compare: *const $crate::dataops::p::c_void,
            compare_desc: $crate::dataops::p::Desc,
            result: *mut $crate::dataops::p::c_void,
            result_desc: $crate::dataops::p::Desc,
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let iov = [$crate::dataops::p::Ioc {
                addr: buf as *mut $crate::dataops::p::c_void,
                count,
            }];
            let cmp = [$crate::dataops::p::Ioc {
                addr: compare as *mut $crate::dataops::p::c_void,
                count,
            }];
            let res = [$crate::dataops::p::Ioc {
                addr: result,
                count,
            }];
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Compare,
                &iov,
                $crate::dataops::descs::<Self>(&[d]),
                &cmp,
                $crate::dataops::descs::<Self>(&[compare_desc]),
                &res,
                $crate::dataops::descs::<Self>(&[result_desc]),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn compare_atomicv(
            &self,
            iov: &[$crate::dataops::p::Ioc],
            d: &[$crate::dataops::p::Desc],
            comparev: &[$crate::dataops::p::Ioc],
            compare_desc: &[$crate::dataops::p::Desc],
            resultv: &[$crate::dataops::p::Ioc],
            result_desc: &[$crate::dataops::p::Desc],
            dest: u64,
            addr: u64,
            key: u64,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
            ctx: usize,
        ) -> $crate::dataops::p::Result<()> {
            let count = iov.iter().map(|v| v.count).sum();
            let rma = $crate::dataops::p::RmaIoc { addr, count, key };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Compare,
                iov,
                $crate::dataops::descs::<Self>(d),
                comparev,
                $crate::dataops::descs::<Self>(compare_desc),
                resultv,
                $crate::dataops::descs::<Self>(result_desc),
                dest,
                rma,
                datatype,
                op,
                ctx,
                $crate::dataops::DataPath::tx_op_flags(self),
                false,
            )
        }

        unsafe fn compare_atomicmsg(
            &self,
            msg: &$crate::dataops::p::MsgAtomic,
            comparev: &[$crate::dataops::p::Ioc],
            compare_desc: &[$crate::dataops::p::Desc],
            resultv: &[$crate::dataops::p::Ioc],
            result_desc: &[$crate::dataops::p::Desc],
            flags: $crate::dataops::p::OpFlags,
        ) -> $crate::dataops::p::Result<()> {
            let (iov, rma, dt, op) = $crate::dataops::atomic_parts::<Self>(msg)?;
            // SAFETY: the C API's contract for the message's desc array.
            let d = unsafe { $crate::dataops::desc_vec::<Self>(msg.desc, msg.iov_count) };
            $crate::dataops::DataPath::atomic_any(
                self,
                $crate::dataops::p::AtomicKind::Compare,
                iov,
                d,
                comparev,
                $crate::dataops::descs::<Self>(compare_desc),
                resultv,
                $crate::dataops::descs::<Self>(result_desc),
                msg.addr,
                rma,
                dt,
                op,
                msg.context,
                flags,
                false,
            )
        }

        fn atomicvalid(
            &self,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
        ) -> $crate::dataops::p::Result<usize> {
            $crate::dataops::DataPath::atomic_max(
                self,
                datatype,
                op,
                $crate::dataops::p::AtomicKind::Base,
            )
        }

        fn fetch_atomicvalid(
            &self,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
        ) -> $crate::dataops::p::Result<usize> {
            $crate::dataops::DataPath::atomic_max(
                self,
                datatype,
                op,
                $crate::dataops::p::AtomicKind::Fetch,
            )
        }

        fn compare_atomicvalid(
            &self,
            datatype: $crate::dataops::p::Datatype,
            op: $crate::dataops::p::AtomicOp,
        ) -> $crate::dataops::p::Result<usize> {
            $crate::dataops::DataPath::atomic_max(
                self,
                datatype,
                op,
                $crate::dataops::p::AtomicKind::Compare,
            )
        }
    };
}
