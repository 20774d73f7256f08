//! Typed endpoints: [`Ep<K>`](Ep) and its [`EpBuilder`].
//!
//! An `Ep` owns the provider's endpoint, its completion queue (format
//! `FI_CQ_FORMAT_TAGGED`, bound for transmit and receive), its address vector
//! (connectionless kinds) or event queue (`Ep<Msg>`), and the in-flight table that
//! owns the buffers of posted operations (see [`super::cq`]'s invariants).
//!
//! # Safety argument
//!
//! Every raw data call here passes pointers into memory owned by an in-flight slot: a
//! [`Buf`]'s bytes or a slot's boxed atomic words. Heap memory of a box does not move
//! when the box moves; a `Buf`'s bytes are an allocation of their own behind the
//! handle, so their address, read before the handle moves into the slot, stays valid
//! (and no box holding them is moved or retagged on the way). A `Buf` is recorded in
//! its slot right after the provider call that posts it returns; until then the posting
//! function holds it, and no completion can be read in between. The slot is only emptied
//! when the operation's completion or error completion is read from this endpoint's CQ
//! — after which the provider no longer touches the memory. On drop the endpoint is
//! closed (which cancels outstanding operations) **before** the slots are freed; if the
//! close fails, the slots are leaked instead of freed.
//!
//! The table trusts the provider to report each context once, after it is done with the
//! operation's memory (the contract of every completion queue); a context that names
//! no operation in flight is reported as [`OpKind::Remote`], never a panic.
//!
//! Posting takes `&mut self`: an `Ep` is used from one thread at a time (it is `Send`).
//! Nothing here panics.

#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::addr::{EpAddr, Peer};
use super::buf::{Buf, BufParts};
use super::cq::{
    complete, fail, Completion, InFlight, OpError, OpId, OpKind, PostError, PostResult, Slot,
};
use super::domain::{Access, Domain, RemoteRegion, RemoteWrite};
use super::info::FabricInfo;
use super::kind::{Connectionless, EpKind, Msg, Reliable};
use crate::abi::raw::CqTaggedEntry;
use crate::av::{AddressVector, AvAttr};
use crate::cq::{CompletionQueue, CqAttr};
use crate::eq::{EqAttr, EqWaitError, EventQueue};
use crate::{
    AtomicOp, CqFormat, Datatype, EqEvent, Errno, Error, Info, OpFlags, Result, WaitObj,
    ADDR_NOTAVAIL, ADDR_UNSPEC,
};

/// Completions read from the CQ per call.
const BATCH: usize = 8;

/// The CQ read buffer, kept with the endpoint so an empty poll does not have to clear
/// a fresh array each time (that showed up as a third of an idle poll's cost).
struct Entries([CqTaggedEntry; BATCH]);

// SAFETY: the entries are plain data the provider writes; their `buf` pointer field is
// only ever copied as an integer, never dereferenced, so moving them to another thread
// is harmless.
unsafe impl Send for Entries {}

/// Builds an [`Ep`] of kind `K` on a domain ([`Domain::endpoint`]).
#[derive(Debug)]
pub struct EpBuilder<K: EpKind> {
    domain: Domain,
    info: Info,
    cq_size: usize,
    wait_fd: bool,
    _kind: PhantomData<K>,
}

impl Domain {
    /// Start building an endpoint of kind `K` described by `info`.
    pub fn endpoint<K: EpKind>(&self, info: &FabricInfo<K>) -> EpBuilder<K> {
        EpBuilder {
            domain: self.clone(),
            info: info.info().clone(),
            cq_size: 0,
            wait_fd: false,
            _kind: PhantomData,
        }
    }
}

impl<K: EpKind> EpBuilder<K> {
    /// Entries of the completion queue (0: the provider's default).
    pub fn cq_size(mut self, entries: usize) -> Self {
        self.cq_size = entries;
        self
    }

    /// Give the completion queue a wait file descriptor (`FI_WAIT_FD`), for
    /// [`Ep::cq_wait_fd`] and the async layer. Off by default: polling-only queues are
    /// cheapest.
    pub fn wait_fd(mut self, on: bool) -> Self {
        self.wait_fd = on;
        self
    }

    /// Open the endpoint and its CQ; bind them; the caller binds the rest and enables.
    fn open(&self, info: &Info) -> Result<(crate::ep::Endpoint, CompletionQueue)> {
        let attr = CqAttr {
            size: self.cq_size,
            wait_obj: if self.wait_fd {
                WaitObj::Fd
            } else {
                WaitObj::None
            },
            ..CqAttr::with_format(CqFormat::Tagged)
        };
        let cq = self.domain.inner.cq_open(&attr)?;
        let ep = self.domain.inner.endpoint(info)?;
        ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)?;
        Ok((ep, cq))
    }

    fn finish(
        self,
        ep: crate::ep::Endpoint,
        cq: CompletionQueue,
        av: Option<AddressVector>,
        eq: Option<EventQueue>,
        info: Info,
    ) -> Result<Ep<K>> {
        let name = ep.getname()?;
        Ok(Ep {
            ep,
            cq,
            av,
            eq,
            inflight: InFlight::default(),
            entries: Box::new(Entries([CqTaggedEntry::default(); BATCH])),
            head: 0,
            count: 0,
            addr: EpAddr::new(info.addr_format, name),
            needs_local_mr: self.domain.mr_mode.contains(crate::MrMode::LOCAL),
            domain: self.domain,
            info,
            peer: ADDR_UNSPEC,
            _kind: PhantomData,
        })
    }
}

impl<K: Connectionless> EpBuilder<K> {
    /// Open, bind (CQ, address vector) and enable the endpoint.
    pub fn build(self) -> Result<Ep<K>> {
        let info = self.info.clone();
        let (ep, cq) = self.open(&info)?;
        let av = self.domain.inner.av_open(&AvAttr {
            av_type: info.domain_attr.av_type,
            count: 16,
            ..AvAttr::default()
        })?;
        ep.bind_av(&av)?;
        ep.enable()?;
        self.finish(ep, cq, Some(av), None, info)
    }
}

/// Event queues of the safe layer have a wait fd (control path: no cost that matters).
pub(crate) fn eq_attr() -> EqAttr {
    EqAttr {
        wait_obj: WaitObj::Fd,
        ..EqAttr::default()
    }
}

/// Wait (bounded) for `want` on `eq`; an error event becomes an error.
pub(crate) fn eq_wait(
    eq: &EventQueue,
    want: EqEvent,
    timeout: Duration,
) -> Result<crate::eq::Event> {
    eq.poll_for(want, timeout).map_err(|why| match why {
        EqWaitError::Unexpected(ev) => Error::new(
            Errno::EOTHER,
            format!("unexpected event {:?} while waiting for {want:?}", ev.event),
        ),
        EqWaitError::ErrorEntry(ee) => Error::new(
            ee.err,
            format!(
                "waiting for {want:?}: {}",
                eq.strerror_with_data(ee.prov_errno, &ee.err_data)
            ),
        ),
        EqWaitError::Read(e) => e,
        EqWaitError::TimedOut => Error::new(
            Errno::ETIMEDOUT,
            format!("no {want:?} event within {timeout:?}"),
        ),
    })
}

impl EpBuilder<Msg> {
    /// Open a connected endpoint: connect to the listener at `to` with connection data
    /// `cm_data`, and wait up to `timeout` for the connection. Returns the endpoint and
    /// the data the server sent with its accept.
    pub fn connect(
        self,
        to: &EpAddr,
        cm_data: &[u8],
        timeout: Duration,
    ) -> Result<(Ep<Msg>, Vec<u8>)> {
        let info = self.info.clone();
        let eq = self.domain.fabric.inner.eq_open(&eq_attr())?;
        let (ep, cq) = self.open(&info)?;
        ep.bind_eq(&eq)?;
        ep.enable()?;
        ep.connect(to.bytes(), cm_data)?;
        let ev = eq_wait(&eq, EqEvent::Connected, timeout)?;
        let ep = self.finish(ep, cq, None, Some(eq), info)?;
        Ok((ep, ev.cm_data))
    }

    /// Open the endpoint for a connection request's info (the builder's), accept with
    /// `cm_data` and wait for the connection (used by [`Listener`](super::Listener)).
    pub(crate) fn accept(self, cm_data: &[u8], timeout: Duration) -> Result<Ep<Msg>> {
        let info = self.info.clone();
        let eq = self.domain.fabric.inner.eq_open(&eq_attr())?;
        let (ep, cq) = self.open(&info)?;
        ep.bind_eq(&eq)?;
        ep.enable()?;
        ep.accept(cm_data)?;
        eq_wait(&eq, EqEvent::Connected, timeout)?;
        self.finish(ep, cq, None, Some(eq), info)
    }

    /// A builder for the endpoint of a connection request's info.
    pub(crate) fn for_request(domain: &Domain, info: Info, cq_size: usize, wait_fd: bool) -> Self {
        EpBuilder {
            domain: domain.clone(),
            info,
            cq_size,
            wait_fd,
            _kind: PhantomData,
        }
    }
}

/// An open, enabled endpoint of kind `K` (`Msg`, `Rdm` or `Dgram`).
///
/// Operations take their buffer and give it back in the [`Completion`]:
///
/// ```no_run
/// use ofi::safe::{Fabric, Hints, Rdm};
/// let info = Hints::<Rdm>::new().first()?;
/// let fabric = Fabric::open(&info)?;
/// let domain = fabric.domain(&info)?;
/// let mut ep = domain.endpoint(&info).build()?;
/// let me = ep.insert_peer(&ep.addr().clone())?; // talk to ourselves
/// ep.recv(domain.alloc(64)?).map_err(|e| e.error)?;
/// let mut msg = domain.alloc(64)?;
/// msg.fill_from(b"hello");
/// ep.send(msg, me).map_err(|e| e.error)?;
/// for _ in 0..2 {
///     let c = ep.wait(std::time::Duration::from_secs(5))?;
///     println!("{:?}: {:?}", c.kind, c.buf.as_deref());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Each `compile_fail` case below differs from one of these, which compile, only in the
/// misuse it shows (so it fails for that reason and no other):
///
/// ```no_run
/// # use ofi::safe::{Buf, Domain, Ep, EpAddr, FabricInfo, Msg, Peer, Rdm};
/// # fn f(domain: &Domain, msg: &FabricInfo<Msg>, server: &EpAddr,
/// #      rdm_ep: &mut Ep<Rdm>, peer: Peer, a: &EpAddr) {
/// let _ = domain.endpoint(msg).connect(server, b"hi", std::time::Duration::from_secs(1));
/// let _ = rdm_ep.tsend(Buf::new(8), peer, 42);
/// let _ = rdm_ep.insert_peer(a);
/// let buf = Buf::new(64);
/// let first = buf[0];
/// let _ = rdm_ep.recv(buf);
/// # let _ = first;
/// # }
/// ```
///
/// Kinds restrict what compiles. Connecting an RDM endpoint does not:
///
/// ```compile_fail,E0599
/// # use ofi::safe::{Domain, FabricInfo, Rdm, EpAddr};
/// # fn f(domain: &Domain, info: &FabricInfo<Rdm>, server: &EpAddr) {
/// let _ = domain.endpoint(info).connect(server, b"hi", std::time::Duration::from_secs(1));
/// # }
/// ```
///
/// nor do tagged, RMA or atomic operations on a datagram endpoint:
///
/// ```compile_fail,E0599
/// # use ofi::safe::{Ep, Dgram, Buf, Peer};
/// # fn f(ep: &mut Ep<Dgram>, peer: Peer) {
/// let _ = ep.tsend(Buf::new(8), peer, 42);
/// # }
/// ```
///
/// nor address-vector calls on a connected endpoint:
///
/// ```compile_fail,E0599
/// # use ofi::safe::{Ep, Msg, EpAddr};
/// # fn f(ep: &mut Ep<Msg>, a: &EpAddr) {
/// let _ = ep.insert_peer(a);
/// # }
/// ```
///
/// A posted buffer is moved into the endpoint, so it cannot be used until its
/// completion gives it back:
///
/// ```compile_fail,E0382
/// # use ofi::safe::{Ep, Rdm, Buf};
/// # fn f(ep: &mut Ep<Rdm>) {
/// let buf = Buf::new(64);
/// let _ = ep.recv(buf);
/// let first = buf[0]; // error: `buf` was moved into the receive
/// # }
/// ```
///
/// and a borrowed slice cannot be posted at all (the operation needs an owned `Buf`):
///
/// ```compile_fail,E0308
/// # use ofi::safe::{Ep, Rdm};
/// # fn f(ep: &mut Ep<Rdm>) {
/// let mut local = [0u8; 64];
/// let _ = ep.recv(&mut local[..]);
/// # }
/// ```
pub struct Ep<K: EpKind> {
    // Drop order: `Drop` closes `ep` explicitly before any field is dropped.
    ep: crate::ep::Endpoint,
    cq: CompletionQueue,
    av: Option<AddressVector>,
    eq: Option<EventQueue>,
    inflight: InFlight,
    /// Entries read from the CQ; `entries[head..count]` are not returned yet (they are
    /// converted one by one, so a batch read costs no extra copies).
    entries: Box<Entries>,
    head: usize,
    count: usize,
    addr: EpAddr,
    /// The provider wants local buffers registered (`FI_MR_LOCAL`).
    needs_local_mr: bool,
    domain: Domain,
    info: Info,
    peer: u64,
    _kind: PhantomData<K>,
}

impl<K: EpKind> std::fmt::Debug for Ep<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ep")
            .field("kind", &K::EP_TYPE)
            .field("provider", &self.ep.provider())
            .field("addr", &self.addr)
            .field("in_flight", &self.inflight.len())
            .finish()
    }
}

impl<K: EpKind> Drop for Ep<K> {
    fn drop(&mut self) {
        // Close the provider's endpoint (cancelling what is posted) before the
        // in-flight buffers are freed; if that fails, never free them.
        if self.ep.close().is_err() {
            self.inflight.leak();
        }
    }
}

impl<K: EpKind> Ep<K> {
    /// This endpoint's address, to give to peers.
    pub fn addr(&self) -> &EpAddr {
        &self.addr
    }

    /// The provider's name.
    pub fn provider(&self) -> &str {
        self.ep.provider()
    }

    /// The info the endpoint was opened with.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The domain.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Number of posted operations whose completion has not been read.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// The raw endpoint (its data calls are `unsafe`; its control calls are not).
    pub fn raw(&self) -> &crate::ep::Endpoint {
        &self.ep
    }

    /// The raw completion queue.
    pub fn raw_cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// The raw event queue (`Ep<Msg>` only; it has a wait fd: `raw_eq()?.wait_fd()`).
    pub fn raw_eq(&self) -> Option<&EventQueue> {
        self.eq.as_ref()
    }

    /// The CQ's wait file descriptor (built with [`EpBuilder::wait_fd`]; `FI_ENOSYS`
    /// or `FI_EINVAL` otherwise). Before sleeping on it call [`Ep::trywait`].
    pub fn cq_wait_fd(&self) -> Result<i32> {
        self.cq.wait_fd()
    }

    /// `fi_trywait` on the CQ: `Ok` if sleeping on its fd is safe now, `FI_EAGAIN`
    /// if completions are ready (poll first).
    pub fn trywait(&self) -> Result<()> {
        self.domain.fabric.inner.trywait(&[&self.cq])
    }

    #[inline(always)]
    /// Read the next completion, driving progress: `Ok(None)` when there is none yet,
    /// `Err` for a failed operation (its buffer inside) or a CQ error.
    pub fn poll(&mut self) -> std::result::Result<Option<Completion>, OpError> {
        if self.head >= self.count {
            match self.cq.read(&mut self.entries.0) {
                Ok(n) => {
                    self.head = 0;
                    self.count = n.min(BATCH);
                }
                Err(err) if err.code() == Errno::EAGAIN => return Ok(None),
                Err(err) if err.code() == Errno::EAVAIL => {
                    let ce = self.cq.readerr_owned(0)?;
                    return Err(fail(&mut self.inflight, ce));
                }
                Err(err) => return Err(err.into()),
            }
        }
        match self.entries.0.get(self.head) {
            Some(x) if self.head < self.count => {
                self.head += 1;
                Ok(Some(complete(
                    &mut self.inflight,
                    x.op_context,
                    x.flags,
                    x.len,
                    x.data,
                    x.tag,
                )))
            }
            _ => Ok(None),
        }
    }

    /// The next completion, polling until `timeout` passes (`FI_ETIMEDOUT`).
    pub fn wait(&mut self, timeout: Duration) -> std::result::Result<Completion, OpError> {
        let deadline = Instant::now() + timeout;
        let mut idle = 0u32;
        loop {
            if let Some(c) = self.poll()? {
                return Ok(c);
            }
            idle += 1;
            if idle.is_multiple_of(64) {
                if Instant::now() >= deadline {
                    return Err(Error::new(
                        Errno::ETIMEDOUT,
                        format!("no completion within {timeout:?}"),
                    )
                    .into());
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Post an operation on one [`Buf`] (refused, the buffer handed back, if the
    /// provider needs registered memory and it is not). Where its memory is is read
    /// first, an in-flight entry reserved for its context, the provider called, and
    /// only then the handle recorded in the entry: the bookkeeping that can wait is off
    /// the latency path (a send is on the wire before it is recorded). The handle
    /// stays in this frame meanwhile, and nothing between the call and the record can
    /// panic or read a completion (module docs of `cq`). If `post` fails, the entry is
    /// handed back and so is the buffer.
    #[inline(always)]
    fn post_buf(
        &mut self,
        kind: OpKind,
        mut buf: Buf,
        post: impl FnOnce(&crate::ep::Endpoint, BufParts, usize) -> Result<()>,
    ) -> PostResult {
        if self.needs_local_mr && !buf.is_registered() {
            return Err(PostError {
                error: local_mr_needed(),
                buf: Some(buf),
            });
        }
        let parts = buf.parts();
        let r = self.inflight.reserve();
        let ctx = r.context();
        match post(&self.ep, parts, ctx) {
            Ok(()) => {
                self.inflight.fill(r, Slot::Buf(kind, buf));
                Ok(OpId(ctx))
            }
            Err(error) => {
                self.inflight.unreserve(r);
                Err(PostError {
                    error,
                    buf: Some(buf),
                })
            }
        }
    }

    /// [`post_buf`](Self::post_buf) for an operation on two boxed words (an atomic's
    /// operand and result): the slot holds them, `post` takes their address from it.
    #[inline(always)]
    fn post_words(
        &mut self,
        kind: OpKind,
        words: Box<[u64; 2]>,
        post: impl FnOnce(&crate::ep::Endpoint, &mut [u64; 2], usize) -> Result<()>,
    ) -> PostResult {
        if self.needs_local_mr {
            return Err(PostError {
                error: local_mr_needed(),
                buf: None,
            });
        }
        let ctx = self.inflight.insert(Slot::Words(kind, words));
        let r = match self.inflight.get_mut(ctx).and_then(Slot::words_mut) {
            Some(w) => post(&self.ep, w, ctx),
            None => Err(Error::new(Errno::EOTHER, "atomic without operand")),
        };
        match r {
            Ok(()) => Ok(OpId(ctx)),
            Err(error) => {
                self.inflight.remove(ctx);
                Err(PostError { error, buf: None })
            }
        }
    }

    /// `fi_recv`: receive into `buf` (its whole capacity). The completion gives it
    /// back with its length set to the bytes received.
    pub fn recv(&mut self, buf: Buf) -> PostResult {
        self.post_buf(OpKind::Recv, buf, |ep, b, ctx| {
            // SAFETY: `b.ptr..b.ptr+b.cap` is the memory of a Buf owned by the in-flight
            // slot of `ctx` until this receive's completion is read (module docs).
            unsafe { ep.recv(b.ptr, b.cap, b.desc, ADDR_UNSPEC, ctx) }
        })
    }

    /// `fi_send`: send `buf` (its length) to `peer`.
    pub fn send(&mut self, buf: Buf, peer: Peer) -> PostResult {
        self.post_buf(OpKind::Send, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`: the slot owns the memory until the completion.
            unsafe { ep.send(b.ptr, b.len, b.desc, peer.0, ctx) }
        })
    }

    /// `fi_senddata`: send `buf` to `peer` with remote CQ data `data`.
    pub fn send_data(&mut self, buf: Buf, peer: Peer, data: u64) -> PostResult {
        self.post_buf(OpKind::Send, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`.
            unsafe { ep.senddata(b.ptr, b.len, b.desc, data, peer.0, ctx) }
        })
    }

    /// `fi_inject`: send a copy of `data` (up to the provider's `inject_size`); no
    /// completion is reported.
    pub fn inject(&mut self, data: &[u8], peer: Peer) -> Result<()> {
        self.ep.inject(data, peer.0)
    }
}

/// The refusal of an unregistered buffer when the provider needs `FI_MR_LOCAL`.
#[cold]
fn local_mr_needed() -> Error {
    Error::new(
        Errno::EINVAL,
        "this provider needs registered local buffers (FI_MR_LOCAL): allocate them with \
         Domain::alloc (atomics are not supported in this mode yet)",
    )
}

/// The remote address of `buf.len()` bytes at `offset` of `region`, and `buf` back;
/// a span outside the region is refused with the buffer given back.
fn remote_target<A: Access>(
    region: &RemoteRegion<A>,
    offset: u64,
    buf: Buf,
) -> std::result::Result<(u64, Buf), PostError> {
    match region.addr(offset, buf.len() as u64) {
        Ok(addr) => Ok((addr, buf)),
        Err(error) => Err(PostError {
            error,
            buf: Some(buf),
        }),
    }
}

impl<K: Connectionless> Ep<K> {
    /// `fi_av_insert` a peer's address; the handle to send to it.
    pub fn insert_peer(&mut self, addr: &EpAddr) -> Result<Peer> {
        let a = addr.to_address()?;
        let av = self
            .av
            .as_ref()
            .ok_or_else(|| Error::new(Errno::EOTHER, "endpoint without address vector"))?;
        match av.insert(std::slice::from_ref(&a))?.first() {
            Some(&f) if f != ADDR_NOTAVAIL => Ok(Peer(f)),
            _ => Err(Error::new(
                Errno::EADDRNOTAVAIL,
                format!("the address vector refused {addr}"),
            )),
        }
    }
}

impl Ep<Msg> {
    /// The connected peer.
    pub fn peer(&self) -> Peer {
        Peer(self.peer)
    }

    /// `fi_shutdown`: end the connection (the peer gets `FI_SHUTDOWN`).
    pub fn shutdown(&mut self) -> Result<()> {
        self.ep.shutdown(0)
    }
}

impl<K: Reliable> Ep<K> {
    /// `fi_tsend`: send `buf` to `peer` with `tag`.
    pub fn tsend(&mut self, buf: Buf, peer: Peer, tag: u64) -> PostResult {
        self.post_buf(OpKind::TaggedSend, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`.
            unsafe { ep.tsend(b.ptr, b.len, b.desc, peer.0, tag, ctx) }
        })
    }

    /// `fi_trecv`: receive a message whose tag matches `tag` outside the `ignore` bits.
    pub fn trecv(&mut self, buf: Buf, tag: u64, ignore: u64) -> PostResult {
        self.post_buf(OpKind::TaggedRecv, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`.
            unsafe { ep.trecv(b.ptr, b.cap, b.desc, ADDR_UNSPEC, tag, ignore, ctx) }
        })
    }

    /// `fi_write`: write `buf` into the peer's writable `region` at `offset`.
    pub fn write(
        &mut self,
        buf: Buf,
        peer: Peer,
        region: &RemoteRegion<RemoteWrite>,
        offset: u64,
    ) -> PostResult {
        self.write_impl(buf, peer, region, offset, None)
    }

    /// `fi_writedata`: as [`write`](Self::write), and the peer's CQ reports `data`
    /// (`FI_REMOTE_CQ_DATA`) once the data is in place.
    pub fn write_data(
        &mut self,
        buf: Buf,
        peer: Peer,
        region: &RemoteRegion<RemoteWrite>,
        offset: u64,
        data: u64,
    ) -> PostResult {
        self.write_impl(buf, peer, region, offset, Some(data))
    }

    fn write_impl(
        &mut self,
        buf: Buf,
        peer: Peer,
        region: &RemoteRegion<RemoteWrite>,
        offset: u64,
        data: Option<u64>,
    ) -> PostResult {
        let (addr, buf) = remote_target(region, offset, buf)?;
        let key = region.key();
        self.post_buf(OpKind::Write, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`: the slot owns the source memory until completion.
            unsafe {
                match data {
                    Some(d) => ep.writedata(b.ptr, b.len, b.desc, d, peer.0, addr, key, ctx),
                    None => ep.write(b.ptr, b.len, b.desc, peer.0, addr, key, ctx),
                }
            }
        })
    }

    /// `fi_read`: read `buf.len()` bytes of the peer's `region` at `offset` into `buf`.
    pub fn read<A: Access>(
        &mut self,
        buf: Buf,
        peer: Peer,
        region: &RemoteRegion<A>,
        offset: u64,
    ) -> PostResult {
        let (addr, buf) = remote_target(region, offset, buf)?;
        let key = region.key();
        self.post_buf(OpKind::Read, buf, |ep, b, ctx| {
            // SAFETY: as in `recv`: the slot owns the destination memory.
            unsafe { ep.read(b.ptr, b.len, b.desc, peer.0, addr, key, ctx) }
        })
    }

    /// `fi_fetch_atomic(FI_SUM, FI_UINT64)`: add `value` to the 8-byte word of the
    /// peer's writable `region` at `offset`; the completion's
    /// [`fetched`](Completion::fetched) is the word before the addition.
    pub fn fetch_add(
        &mut self,
        peer: Peer,
        region: &RemoteRegion<RemoteWrite>,
        offset: u64,
        value: u64,
    ) -> PostResult {
        let addr = region
            .addr(offset, 8)
            .map_err(|error| PostError { error, buf: None })?;
        let key = region.key();
        self.post_words(OpKind::FetchAtomic, Box::new([value, 0]), |ep, w, ctx| {
            let base = w.as_mut_ptr();
            let operand = base as *const std::ffi::c_void;
            let result = base.wrapping_add(1) as *mut std::ffi::c_void;
            // SAFETY: operand and result are the boxed words owned by the slot of
            // `ctx` until this atomic's completion is read (module docs).
            unsafe {
                ep.fetch_atomic(
                    operand,
                    1,
                    std::ptr::null_mut(),
                    result,
                    std::ptr::null_mut(),
                    peer.0,
                    addr,
                    key,
                    Datatype::Uint64,
                    AtomicOp::Sum,
                    ctx,
                )
            }
        })
    }
}
