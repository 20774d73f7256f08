//! The endpoint: one Unix datagram socket, its bindings, and its queue of posted
//! receives.
//!
//! # Life cycle
//!
//! `fi_endpoint` creates and binds the socket (to the info's `src_addr` name, or to a
//! name the kernel picks), so `fi_getname` works at once. `fi_ep_bind` attaches an AV
//! and CQs; `fi_enable` checks them (`FI_ENOAV`, `FI_ENOCQ`) and freezes them: binding
//! after enable is `FI_EOPBADSTATE`, and so is a data call before it.
//!
//! # Data path
//!
//! - A send is one `sendmsg(2)`: the datagram is in the peer's socket queue when the call
//!   returns, so its completion is queued at once (if one is wanted). A full peer
//!   queue is `FI_EAGAIN` (the kernel queues `net.unix.max_dgram_qlen` datagrams per
//!   socket, 10 by default, and bounds their bytes by the sender's buffer); a peer
//!   whose socket is gone is `FI_ECONNREFUSED`.
//! - A receive is queued; the CQ's progress fills queued receives in order from the
//!   socket. A datagram longer than the buffer fills it and completes with error
//!   `FI_ETRUNC`, `olen` = the bytes that did not fit.
//! - Checks, in order: enabled (`FI_EOPBADSTATE`), I/O vector (`FI_EINVAL`), size
//!   (`FI_EMSGSIZE`), destination in the AV (`FI_EINVAL`), room (`FI_EAGAIN`).
//!
//! Lock order: the receive queue, then a CQ's state. Nothing here panics (except `send`
//! with the test-only feature `panic-in-send`).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use ofi_core::abi::raw::{Iov, Msg};
use ofi_core::attr::Info;
use ofi_core::provider::{BindTarget, CqBindFlags, Desc, EndpointOps};
use ofi_core::{AddrFormat, Caps, Errno, Error, OpFlags, Result, ADDR_NOTAVAIL};

use crate::av::AvShared;
use crate::cq::{self, CqShared};
use crate::fabric::Fabric;
use crate::sock::{DgramSocket, SockAddr};
use crate::{addr, Settings, IOV_LIMIT, NAME};

/// Every capability an endpoint of this provider can have.
pub const CAPS: Caps = Caps::MSG
    .union(Caps::SEND)
    .union(Caps::RECV)
    .union(Caps::SOURCE)
    .union(Caps::LOCAL_COMM);

const SEND_FLAGS: u64 = OpFlags::SEND.bits() | OpFlags::MSG.bits();
const RECV_FLAGS: u64 = OpFlags::RECV.bits() | OpFlags::MSG.bits();

/// Up to [`IOV_LIMIT`] buffers, in the form `sendmsg`/`recvmsg` take.
#[derive(Clone, Copy)]
struct IoVec {
    v: [libc::iovec; IOV_LIMIT],
    n: usize,
    total: usize,
}

// SAFETY: the iovecs point at application buffers that the application guarantees stay
// valid until the operation completes (the `EndpointOps` contract). They are written
// only by `recvmsg`, from whichever thread drives progress, one operation at a time
// (under the receive-queue lock).
unsafe impl Send for IoVec {}

impl IoVec {
    fn one(base: *mut libc::c_void, len: usize) -> Result<IoVec> {
        if base.is_null() && len > 0 {
            return Err(Error::new(Errno::EINVAL, "unixdgram: null buffer"));
        }
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut v = [empty; IOV_LIMIT];
        v[0] = libc::iovec {
            iov_base: base,
            iov_len: len,
        };
        Ok(IoVec {
            v,
            n: 1,
            total: len,
        })
    }

    fn from_iov(iov: &[Iov], limit: usize) -> Result<IoVec> {
        if iov.len() > limit {
            return Err(Error::new(
                Errno::EINVAL,
                "unixdgram: too many I/O vector entries",
            ));
        }
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut out = IoVec {
            v: [empty; IOV_LIMIT],
            n: iov.len(),
            total: 0,
        };
        for (dst, src) in out.v.iter_mut().zip(iov) {
            if src.base.is_null() && src.len > 0 {
                return Err(Error::new(
                    Errno::EINVAL,
                    "unixdgram: null buffer in I/O vector",
                ));
            }
            *dst = libc::iovec {
                iov_base: src.base,
                iov_len: src.len,
            };
            out.total = out.total.checked_add(src.len).ok_or_else(|| {
                Error::new(Errno::EINVAL, "unixdgram: I/O vector length overflows")
            })?;
        }
        Ok(out)
    }

    /// # Safety
    /// `msg.msg_iov` must be valid for `msg.iov_count` entries (or the count 0).
    unsafe fn from_msg(msg: &Msg, limit: usize) -> Result<IoVec> {
        if msg.iov_count == 0 {
            return IoVec::from_iov(&[], limit);
        }
        if msg.msg_iov.is_null() {
            return Err(Error::new(Errno::EINVAL, "unixdgram: null msg_iov"));
        }
        if msg.iov_count > limit {
            return Err(Error::new(
                Errno::EINVAL,
                "unixdgram: too many I/O vector entries",
            ));
        }
        // SAFETY: non-null and valid for `iov_count` entries (caller's contract).
        IoVec::from_iov(
            unsafe { std::slice::from_raw_parts(msg.msg_iov, msg.iov_count) },
            limit,
        )
    }

    fn as_slice(&self) -> &[libc::iovec] {
        &self.v[..self.n]
    }

    fn first_base(&self) -> *mut libc::c_void {
        if self.n > 0 {
            self.v[0].iov_base
        } else {
            std::ptr::null_mut()
        }
    }
}

/// A receive waiting for a datagram.
struct PostedRecv {
    iov: IoVec,
    context: usize,
    /// A completion slot was reserved on the receive CQ.
    completion: bool,
}

/// A CQ bound to one direction.
#[derive(Clone)]
struct CqBinding {
    cq: Arc<CqShared>,
    /// Bound with `FI_SELECTIVE_COMPLETION`: only operations flagged `FI_COMPLETION`
    /// generate a completion.
    selective: bool,
}

impl CqBinding {
    fn wants(&self, flags: OpFlags) -> bool {
        !self.selective || flags.contains(OpFlags::COMPLETION)
    }
}

/// Bindings made before `fi_enable`.
#[derive(Default)]
struct Setup {
    av: Option<Arc<AvShared>>,
    tx: Option<CqBinding>,
    rx: Option<CqBinding>,
}

/// Bindings frozen by `fi_enable`: what the data path reads, without a lock.
struct Active {
    av: Arc<AvShared>,
    tx: Option<CqBinding>,
    rx: Option<CqBinding>,
}

/// The endpoint's state, shared with the CQ that progresses its receives.
pub struct EpShared {
    sock: DgramSocket,
    caps: Caps,
    tx_op_flags: OpFlags,
    rx_op_flags: OpFlags,
    max_msg_size: usize,
    inject_size: usize,
    tx_iov_limit: usize,
    rx_iov_limit: usize,
    rx_size: usize,
    tx_size: usize,
    setup: Mutex<Setup>,
    active: OnceLock<Active>,
    rx: Mutex<VecDeque<PostedRecv>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A socket error of the data path as a fabric error code.
#[cold]
fn io_error(e: &io::Error) -> Error {
    let code = match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Errno::EAGAIN,
        Some(libc::ECONNREFUSED) | Some(libc::ENOENT) => Errno::ECONNREFUSED,
        Some(libc::EMSGSIZE) => Errno::EMSGSIZE,
        _ => Errno::EIO,
    };
    Error::code_only(code)
}

/// `FI_EINVAL` "unixdgram: {why}" when `flags` holds `flag`, an operation flag this
/// provider does not support.
fn refuse_flag(flags: OpFlags, flag: OpFlags, why: &str) -> Result<()> {
    if flags.contains(flag) {
        return Err(Error::new(Errno::EINVAL, format!("unixdgram: {why}")));
    }
    Ok(())
}

/// The smaller of two limits, where 0 means "no preference".
fn limit(asked: usize, ours: usize) -> usize {
    if asked == 0 {
        ours
    } else {
        asked.min(ours)
    }
}

impl EpShared {
    /// The socket's descriptor (what a blocking CQ read polls).
    pub(crate) fn raw_fd(&self) -> i32 {
        self.sock.raw_fd()
    }

    #[inline]
    fn active(&self) -> Result<&Active> {
        self.active
            .get()
            .ok_or_else(|| Error::new(Errno::EOPBADSTATE, "unixdgram: endpoint is not enabled"))
    }

    /// Manual progress for this endpoint's receives: fill posted receives, in order, from
    /// the datagrams waiting in the socket. Returns true if receives remain posted (the
    /// socket is worth polling).
    pub(crate) fn progress_rx(&self) -> bool {
        let Some(act) = self.active.get() else {
            return false;
        };
        let mut rx = lock(&self.rx);
        loop {
            let Some(head) = rx.front() else { return false };
            let mut from = SockAddr::empty();
            let full = match self.sock.recv_from(head.iov.as_slice(), &mut from) {
                Ok(Some(full)) => full,
                Ok(None) => return true,
                Err(e) => {
                    // Not expected on a bound datagram socket; leave the receive posted.
                    ofi_core::ofi_warn!(NAME, "ep_data", "recvmsg: {e}");
                    return true;
                }
            };
            let Some(r) = rx.pop_front() else {
                return false;
            };
            let Some(b) = act.rx.as_ref().filter(|_| r.completion) else {
                continue;
            };
            let c = if full > r.iov.total {
                cq::error(
                    r.context,
                    RECV_FLAGS,
                    r.iov.total,
                    r.iov.first_base(),
                    Errno::ETRUNC,
                    full - r.iov.total,
                )
            } else {
                let src = if self.caps.contains(Caps::SOURCE) {
                    act.av.reverse(from.abstract_name())
                } else {
                    ADDR_NOTAVAIL
                };
                cq::ok(r.context, RECV_FLAGS, full, r.iov.first_base(), src)
            };
            b.cq.complete(c);
        }
    }

    /// Send one datagram; queue its completion when `flags` ask for one.
    #[inline]
    fn send_iov(
        &self,
        iov: &IoVec,
        dest: u64,
        context: usize,
        flags: OpFlags,
        inject: bool,
    ) -> Result<()> {
        let act = self.active()?;
        let max = if inject {
            self.inject_size
        } else {
            self.max_msg_size
        };
        if iov.total > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                "unixdgram: message larger than the endpoint's limit",
            ));
        }
        let sa = act
            .av
            .sockaddr(dest)
            .ok_or_else(|| Error::new(Errno::EINVAL, "unixdgram: destination is not in the AV"))?;
        let cq = act.tx.as_ref().filter(|b| !inject && b.wants(flags));
        if let Some(b) = cq {
            if !b.cq.reserve() {
                return Err(Error::code_only(Errno::EAGAIN));
            }
        }
        match self.sock.send_to(iov.as_slice(), &sa) {
            Ok(_) => {
                if let Some(b) = cq {
                    b.cq.complete(cq::ok(
                        context,
                        SEND_FLAGS,
                        iov.total,
                        std::ptr::null_mut(),
                        ADDR_NOTAVAIL,
                    ));
                }
                Ok(())
            }
            Err(e) => {
                if let Some(b) = cq {
                    b.cq.unreserve();
                }
                Err(io_error(&e))
            }
        }
    }

    /// Queue a receive.
    #[inline]
    fn post_recv(&self, iov: IoVec, context: usize, flags: OpFlags) -> Result<()> {
        let act = self.active()?;
        let Some(b) = act.rx.as_ref() else {
            return Err(Error::new(Errno::ENOCQ, "unixdgram: no receive CQ bound"));
        };
        let completion = b.wants(flags);
        let mut rx = lock(&self.rx);
        if rx.len() >= self.rx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        if completion && !b.cq.reserve() {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        rx.push_back(PostedRecv {
            iov,
            context,
            completion,
        });
        drop(rx);
        b.cq.nudge();
        Ok(())
    }
}

impl Drop for EpShared {
    fn drop(&mut self) {
        // Receives still posted will never complete: give back their CQ slots.
        let rx = std::mem::take(&mut *lock(&self.rx));
        if let Some(b) = self.active.get().and_then(|a| a.rx.as_ref()) {
            for _ in rx.iter().filter(|r| r.completion) {
                b.cq.unreserve();
            }
        }
    }
}

/// An active endpoint (`fid_ep`) of type `FI_EP_DGRAM`.
pub struct Endpoint {
    shared: Arc<EpShared>,
}

impl Endpoint {
    /// Open an endpoint for `info` (a result of this provider's getinfo).
    ///
    /// # Errors
    /// `FI_EINVAL` for another endpoint type or address format, capabilities this
    /// provider lacks, or a malformed `src_addr`; `FI_EADDRINUSE` when the `src_addr`
    /// name is taken; `FI_EMFILE` (or the OS error) when no socket can be made.
    pub fn open(s: &Settings, info: &Info) -> Result<Endpoint> {
        crate::fabric::require_dgram(info, "endpoints")?;
        if !matches!(info.addr_format, AddrFormat::STR | AddrFormat::UNSPEC) {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "unixdgram addresses are FI_ADDR_STR, not {}",
                    info.addr_format
                ),
            ));
        }
        let caps = if info.caps.is_empty() {
            CAPS
        } else {
            info.caps
        };
        if !CAPS.contains(caps) {
            return Err(Error::new(
                Errno::EINVAL,
                format!("unixdgram: capabilities {} are not supported", caps - CAPS),
            ));
        }
        let name = info.src_addr.as_ref().map(addr::parse).transpose()?;
        let max_msg_size = limit(info.ep_attr.max_msg_size, s.max_msg_size);
        let sock = DgramSocket::bind(name.as_deref(), 2 * max_msg_size + 4096).map_err(|e| {
            let code = match e.raw_os_error() {
                Some(libc::EADDRINUSE) => Errno::EADDRINUSE,
                Some(libc::EMFILE) | Some(libc::ENFILE) => Errno::EMFILE,
                Some(libc::ENOMEM) | Some(libc::ENOBUFS) => Errno::ENOMEM,
                _ => Errno::EIO,
            };
            Error::new(
                code,
                format!("unixdgram: cannot create the endpoint's socket: {e}"),
            )
        })?;
        ofi_core::ofi_debug!(
            NAME,
            "ep_ctrl",
            "endpoint bound to {}",
            addr::address_of(sock.name())
        );
        Ok(Endpoint {
            shared: Arc::new(EpShared {
                sock,
                caps,
                tx_op_flags: info.tx_attr.op_flags,
                rx_op_flags: info.rx_attr.op_flags,
                max_msg_size,
                inject_size: limit(info.tx_attr.inject_size, s.inject_size).min(max_msg_size),
                tx_iov_limit: limit(info.tx_attr.iov_limit, IOV_LIMIT),
                rx_iov_limit: limit(info.rx_attr.iov_limit, IOV_LIMIT),
                rx_size: limit(info.rx_attr.size, s.rx_size),
                tx_size: limit(info.tx_attr.size, s.tx_size),
                setup: Mutex::new(Setup::default()),
                active: OnceLock::new(),
                rx: Mutex::new(VecDeque::new()),
            }),
        })
    }

    /// The endpoint's address (`fi_unixdgram://NAME`).
    pub fn address(&self) -> ofi_core::Address {
        addr::address_of(self.shared.sock.name())
    }

    fn sends(&self) -> bool {
        let c = self.shared.caps;
        c.contains(Caps::SEND) || !c.intersects(Caps::SEND | Caps::RECV)
    }

    fn receives(&self) -> bool {
        let c = self.shared.caps;
        c.contains(Caps::RECV) || !c.intersects(Caps::SEND | Caps::RECV)
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let ep = &self.shared;
        if ep.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                "unixdgram: bind after fi_enable",
            ));
        }
        let mut setup = lock(&ep.setup);
        match target {
            BindTarget::Cq(cq) => {
                let sides = CqBindFlags::parse(flags).map_err(|e| e.context(NAME))?;
                let b = CqBinding {
                    cq: cq.shared(),
                    selective: sides.selective,
                };
                let setup = &mut *setup;
                if !sides.store(b, &mut setup.tx, &mut setup.rx) {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "unixdgram: a CQ is already bound for that direction",
                    ));
                }
                Ok(())
            }
            BindTarget::Av(av) => {
                if setup.av.is_some() {
                    return Err(Error::new(
                        Errno::EINVAL,
                        "unixdgram: an AV is already bound",
                    ));
                }
                setup.av = Some(av.shared());
                Ok(())
            }
            // This provider has no counters and no event queues: such objects cannot exist.
            BindTarget::Cntr(c) => match *c {},
            BindTarget::Eq(e) => match *e {},
            BindTarget::Stx(_) | BindTarget::Srx(_) => Err(Error::new(
                Errno::ENOSYS,
                "unixdgram: shared contexts are not supported",
            )),
        }
    }

    fn enable(&self) -> Result<()> {
        let ep = &self.shared;
        if ep.active.get().is_some() {
            return Ok(());
        }
        let setup = lock(&ep.setup);
        let av = setup
            .av
            .clone()
            .ok_or_else(|| Error::new(Errno::ENOAV, "unixdgram: bind an AV before fi_enable"))?;
        if self.sends() && setup.tx.is_none() {
            return Err(Error::new(
                Errno::ENOCQ,
                "unixdgram: bind a CQ with FI_TRANSMIT before fi_enable",
            ));
        }
        if self.receives() && setup.rx.is_none() {
            return Err(Error::new(
                Errno::ENOCQ,
                "unixdgram: bind a CQ with FI_RECV before fi_enable",
            ));
        }
        let active = Active {
            av,
            tx: setup.tx.clone(),
            rx: setup.rx.clone(),
        };
        let rx_cq = active.rx.as_ref().map(|b| b.cq.clone());
        if ep.active.set(active).is_ok() {
            if let Some(cq) = rx_cq {
                cq.attach(ep);
            }
        }
        Ok(())
    }

    /// Cancels a posted receive: it completes with error `FI_ECANCELED` (if it was to
    /// generate a completion). `FI_ENOENT` if no receive with that context is posted.
    fn cancel(&self, context: usize) -> Result<()> {
        let ep = &self.shared;
        let mut rx = lock(&ep.rx);
        let Some(pos) = rx.iter().position(|r| r.context == context) else {
            return Err(Error::new(
                Errno::ENOENT,
                "unixdgram: no posted receive has that context",
            ));
        };
        let Some(r) = rx.remove(pos) else {
            return Err(Error::code_only(Errno::ENOENT));
        };
        if let Some(b) = ep
            .active
            .get()
            .and_then(|a| a.rx.as_ref())
            .filter(|_| r.completion)
        {
            b.cq.complete(cq::error(
                r.context,
                RECV_FLAGS,
                0,
                r.iov.first_base(),
                Errno::ECANCELED,
                0,
            ));
        }
        Ok(())
    }

    fn rx_size_left(&self) -> Result<usize> {
        let ep = &self.shared;
        ep.active()?;
        Ok(ep.rx_size.saturating_sub(lock(&ep.rx).len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let ep = &self.shared;
        ep.active()?;
        Ok(ep.tx_size)
    }

    fn getname(&self) -> Result<Vec<u8>> {
        Ok(self.address().to_bytes())
    }

    unsafe fn send(
        &self,
        buf: *const u8,
        len: usize,
        _desc: Desc,
        dest: u64,
        context: usize,
    ) -> Result<()> {
        if cfg!(feature = "panic-in-send") {
            panic!("unixdgram built with feature panic-in-send: send panics on purpose");
        }
        let ep = &self.shared;
        let iov = IoVec::one(buf.cast_mut().cast(), len)?;
        ep.send_iov(&iov, dest, context, ep.tx_op_flags, false)
    }

    unsafe fn sendv(&self, iov: &[Iov], _desc: &[Desc], dest: u64, context: usize) -> Result<()> {
        let ep = &self.shared;
        let iov = IoVec::from_iov(iov, ep.tx_iov_limit)?;
        ep.send_iov(&iov, dest, context, ep.tx_op_flags, false)
    }

    unsafe fn sendmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        let ep = &self.shared;
        refuse_flag(
            flags,
            OpFlags::REMOTE_CQ_DATA,
            "remote CQ data is not supported (cq_data_size 0)",
        )?;
        // SAFETY: `msg.msg_iov` is valid for `iov_count` entries (the trait's contract).
        let iov = unsafe { IoVec::from_msg(msg, ep.tx_iov_limit) }?;
        ep.send_iov(&iov, msg.addr, msg.context, flags, false)
    }

    unsafe fn inject(&self, buf: *const u8, len: usize, dest: u64) -> Result<()> {
        let ep = &self.shared;
        let iov = IoVec::one(buf.cast_mut().cast(), len)?;
        ep.send_iov(&iov, dest, 0, OpFlags::empty(), true)
    }

    unsafe fn recv(
        &self,
        buf: *mut u8,
        len: usize,
        _desc: Desc,
        _src: u64,
        context: usize,
    ) -> Result<()> {
        let ep = &self.shared;
        ep.post_recv(IoVec::one(buf.cast(), len)?, context, ep.rx_op_flags)
    }

    unsafe fn recvv(&self, iov: &[Iov], _desc: &[Desc], _src: u64, context: usize) -> Result<()> {
        let ep = &self.shared;
        ep.post_recv(
            IoVec::from_iov(iov, ep.rx_iov_limit)?,
            context,
            ep.rx_op_flags,
        )
    }

    unsafe fn recvmsg(&self, msg: &Msg, flags: OpFlags) -> Result<()> {
        let ep = &self.shared;
        refuse_flag(flags, OpFlags::MULTI_RECV, "FI_MULTI_RECV is not supported")?;
        // SAFETY: `msg.msg_iov` is valid for `iov_count` entries (the trait's contract).
        let iov = unsafe { IoVec::from_msg(msg, ep.rx_iov_limit) }?;
        ep.post_recv(iov, msg.context, flags)
    }
}
