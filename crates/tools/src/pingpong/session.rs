//! The fabric side of a benchmark: the objects one side opens, its buffers, and the
//! ping-pong and windowed-throughput loops.
//!
//! # Buffers and invariants
//!
//! One heap region, never reallocated while the endpoint lives, holds a transmit slot and
//! the receive slots, each `slot` bytes (the largest message size of the run); it is
//! registered once when the provider asks for `FI_MR_LOCAL`. Receives are kept posted:
//! `nrx` of them, each repost happening right after its completion is read. Operation
//! contexts point into a separate array of 64-byte cells (enough for `FI_CONTEXT2`), one
//! per receive and one per possibly outstanding send, so providers that use the
//! application's context memory get memory of their own for each operation.
//!
//! Field order is drop order: the endpoint (and with it every posted operation) goes
//! before the memory region, which goes before the buffer.
//!
//! Every wait has a deadline. With datagrams a missing message is counted as lost; with
//! reliable endpoints it is an `FI_ETIMEDOUT` error. Nothing here panics on provider or
//! peer behaviour.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ofi::abi::raw::{CqErrEntry, CqMsgEntry};
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::{Endpoint, PassiveEndpoint};
use ofi::eq::{EqAttr, EqWaitError, EventQueue};
use ofi::fabric::Fabric;
use ofi::mr::MemoryRegion;
use ofi::{AddrFormat, Address, CqFormat, EpType, EqEvent, Errno, Error, Info, MrMode, OpFlags};

use super::ctrl::Ctrl;

/// The tag of every tagged message.
const TAG: u64 = 0xC0DE;
/// The requested MR key (the C tool's).
const MR_KEY: u64 = 0xC0DE;
/// Length of a throughput acknowledgement.
pub const ACK_LEN: usize = 4;
/// Polls without what a wait is for after which the tool yields the CPU (and again
/// after as many more): long enough that a wait for a peer on another CPU practically
/// never reaches it (a shm round trip is about 50 polls; at 128, 0.045 yields per round
/// trip remained here, at 256 none), short enough that a peer sharing this CPU gets it
/// within a few microseconds. A multiple of [`SpinLimit::EVERY`].
const YIELD_EVERY: u32 = 256;
const _: () = assert!(YIELD_EVERY.is_multiple_of(SpinLimit::EVERY));

/// The bound of one busy-polling wait: counts the polls that did not bring what the
/// wait is for, reads the clock only every [`SpinLimit::EVERY`] of them and yields the
/// CPU every [`YIELD_EVERY`]. Reading the clock on every empty poll took a third of the
/// polling loop's time (`clock_gettime` in a VM), which delays noticing a message. The
/// limit starts at the first reading, so it may end up to `EVERY` polls late —
/// microseconds. Creating one reads no clock, so a wait that ends at its first poll
/// costs no more than a counter. The limit itself is passed to each check, so the state
/// is two words that a polling loop can keep in registers.
#[derive(Clone, Copy, Default)]
struct SpinLimit {
    start: Option<Instant>,
    calls: u32,
}

impl SpinLimit {
    const EVERY: u32 = 64;

    /// Called once per fruitless poll: true once `limit` has passed.
    #[inline(always)]
    fn expired(&mut self, limit: Duration) -> bool {
        self.expired_on(limit, Instant::now)
    }

    /// [`Self::expired`] on the clock `now` (tests use a clock they move).
    #[inline(always)]
    fn expired_on(&mut self, limit: Duration, now: impl Fn() -> Instant) -> bool {
        self.calls = self.calls.wrapping_add(1);
        if !self.calls.is_multiple_of(Self::EVERY) {
            return false;
        }
        let (start, expired) = Self::check(self.calls, self.start, limit, now);
        self.start = Some(start);
        expired
    }

    /// Every [`Self::EVERY`] polls: yield when due, then look at the clock; the start
    /// of the limit (now at the first reading) and whether it has passed. By value, so
    /// that the state of the inlined `expired` can live in registers.
    #[cold]
    #[inline(never)]
    fn check(
        calls: u32,
        start: Option<Instant>,
        limit: Duration,
        clock: impl Fn() -> Instant,
    ) -> (Instant, bool) {
        if calls.is_multiple_of(YIELD_EVERY) {
            // Let a peer that shares this CPU run (both sides busy-poll).
            std::thread::yield_now();
        }
        let now = clock();
        match start {
            None => (now, false),
            Some(t) => (t, now.duration_since(t) >= limit),
        }
    }
}

/// Largest receive region (receive slots beyond it share buffers).
const RX_BUDGET: usize = 64 << 20;

/// What a run needs to know to open and drive its objects.
#[derive(Clone, Debug)]
pub struct Config {
    /// Use tagged messages.
    pub tagged: bool,
    /// Check every payload.
    pub integrity: bool,
    /// Wait for a message on a reliable endpoint before giving up.
    pub timeout: Duration,
    /// Wait for a datagram before counting it lost.
    pub dgram_timeout: Duration,
    /// Print debug lines to stderr.
    pub verbose: bool,
}

/// An operation context cell (`struct fi_context2` is 8 pointers).
type CtxCell = [usize; 8];
/// Bytes of a [`CtxCell`]: a power of two, so mapping a context back to its cell
/// takes a shift and a mask, no division.
const CELL: usize = std::mem::size_of::<CtxCell>();
const _: () = assert!(CELL.is_power_of_two());

/// What a completion's operation context names.
enum Op {
    /// Receive `i` (a context cell below `nrx`).
    Recv(usize),
    /// The send that used context cell `i`.
    Send(usize),
    /// No context of ours.
    Unknown,
}

/// One side's open objects and buffers.
pub struct Session {
    ep: Endpoint,
    _pep: Option<PassiveEndpoint>,
    _eq: Option<EventQueue>,
    cq: CompletionQueue,
    _av: Option<AddressVector>,
    /// Kept open (field order) while the endpoint may use `desc`.
    _mr: Option<MemoryRegion>,
    /// The region's descriptor (null without one), asked for once: every post passes it.
    desc: ofi::provider::Desc,
    _domain: Domain,
    _fabric: Fabric,
    buf: Box<[u8]>,
    ctx: Box<[CtxCell]>,
    /// The info the endpoint was opened with.
    pub info: Info,
    peer: u64,
    cfg: Config,
    slot: usize,
    rx_slots: usize,
    /// Receive `i`'s slot (its offset in `buf`) and context, worked out once.
    rx_post: Box<[(usize, usize)]>,
    nrx: usize,
    ntx: usize,
    /// Context cells (indices from `nrx`) of no outstanding send.
    tx_free: Vec<usize>,
    tx_outstanding: usize,
    /// Receive completions (index, length) read but not yet taken, oldest first: those
    /// read while waiting for something else, or behind another one in the same read.
    done_rx: VecDeque<(usize, usize)>,
    /// Where each `fi_cq_read` puts its completions (kept, not zeroed on every poll).
    cq_entries: [CqMsgEntry; 16],
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("provider", &self.info.prov_name())
            .field("ep_type", &self.info.ep_type())
            .field("slot", &self.slot)
            .field("nrx", &self.nrx)
            .field("ntx", &self.ntx)
            .finish()
    }
}

/// The provider's own words about an error entry, `", provider: TEXT"`, only when it
/// gave a provider error number (with 0 its text is `Success`, which helps nobody).
fn provider_cause(prov_errno: i32, text: impl FnOnce() -> String) -> String {
    if prov_errno == 0 {
        return String::new();
    }
    let t = text();
    if t.is_empty() {
        String::new()
    } else {
        format!(", provider: {t}")
    }
}

fn ctx_err(what: &str, e: Error) -> Error {
    Error::new(e.code(), format!("{what}: {e}"))
}

/// A reliable endpoint's receive of another length than the one waited for.
#[cold]
#[inline(never)]
fn wrong_length(len: usize, want: usize) -> Error {
    Error::new(Errno::EIO, format!("received {len} bytes, expected {want}"))
}

/// A completion whose context is none of ours.
#[cold]
#[inline(never)]
fn unknown_context(ctx: usize) -> Error {
    Error::new(
        Errno::EOTHER,
        format!("completion with a context we never used: {ctx:#x}"),
    )
}

/// Encode an address frame: `u32 BE addr_format` + raw name.
fn name_frame(format: AddrFormat, name: &[u8]) -> Vec<u8> {
    let mut v = format.to_raw().to_be_bytes().to_vec();
    v.extend_from_slice(name);
    v
}

/// Decode an address frame; an unspecified IP is replaced by `peer_ip` (the control
/// connection's peer), so a name bound to the wildcard address stays reachable.
fn parse_name_frame(f: &[u8], peer_ip: Option<std::net::IpAddr>) -> ofi::Result<Address> {
    if f.len() < 4 {
        return Err(Error::new(
            Errno::EPROTO,
            "control socket: address frame shorter than its format field",
        ));
    }
    let format = AddrFormat::from_raw(u32::from_be_bytes([f[0], f[1], f[2], f[3]]));
    let addr = Address::from_bytes(format, &f[4..])
        .map_err(|e| ctx_err("the peer's endpoint name does not decode", e))?;
    Ok(match (addr, peer_ip) {
        (Address::Inet(a), Some(std::net::IpAddr::V4(ip))) if a.ip().is_unspecified() => {
            Address::Inet(std::net::SocketAddrV4::new(ip, a.port()))
        }
        (Address::Inet6(a), Some(std::net::IpAddr::V6(ip))) if a.ip().is_unspecified() => {
            Address::Inet6(std::net::SocketAddrV6::new(
                ip,
                a.port(),
                a.flowinfo(),
                a.scope_id(),
            ))
        }
        (a, _) => a,
    })
}

/// Domain, CQ (bound for transmit and receive) and an enabled `FI_EP_MSG` endpoint
/// for `info`, its connection events going to `eq`; not yet connected.
fn open_msg_ep(
    fabric: &Fabric,
    info: &Info,
    cq_attr: &CqAttr,
    eq: &EventQueue,
) -> ofi::Result<(Domain, Endpoint, CompletionQueue)> {
    let domain = fabric.domain(info).map_err(|e| ctx_err("fi_domain", e))?;
    let cq = domain
        .cq_open(cq_attr)
        .map_err(|e| ctx_err("fi_cq_open", e))?;
    let ep = domain
        .endpoint(info)
        .map_err(|e| ctx_err("fi_endpoint", e))?;
    ep.bind_eq(eq).map_err(|e| ctx_err("fi_ep_bind (EQ)", e))?;
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .map_err(|e| ctx_err("fi_ep_bind (CQ)", e))?;
    ep.enable().map_err(|e| ctx_err("fi_enable", e))?;
    Ok((domain, ep, cq))
}

/// Waits (up to the configured timeout) for `FI_CONNECTED` on `eq`.
fn wait_connected(eq: &EventQueue, limit: Duration) -> ofi::Result<()> {
    eq_wait(eq, EqEvent::Connected, limit, "waiting for FI_CONNECTED").map(drop)
}

/// Wait (bounded) for an EQ event; an error event becomes an error naming `what`.
fn eq_wait(
    eq: &EventQueue,
    want: EqEvent,
    limit: Duration,
    what: &str,
) -> ofi::Result<ofi::eq::Event> {
    eq.poll_for(want, limit).map_err(|why| match why {
        EqWaitError::Unexpected(ev) => Error::new(
            Errno::EOTHER,
            format!("{what}: unexpected event {:?} (wanted {want:?})", ev.event),
        ),
        EqWaitError::ErrorEntry(ee) => {
            let cause = provider_cause(ee.prov_errno, || {
                eq.strerror_with_data(ee.prov_errno, &ee.err_data)
            });
            Error::new(
                ee.err,
                format!("{what}: {}{cause}", ofi::error::strerror(ee.err.0)),
            )
        }
        EqWaitError::Read(e) => ctx_err(&format!("{what}: fi_eq_read"), e),
        EqWaitError::TimedOut => Error::new(
            Errno::ETIMEDOUT,
            format!("{what}: no event within {limit:?}"),
        ),
    })
}

/// Sizes of one side's queues.
#[derive(Clone, Copy, Debug)]
pub struct Depth {
    /// Largest message of the run.
    pub max_size: usize,
    /// Receives to keep posted.
    pub nrx: usize,
    /// Sends that may be outstanding.
    pub ntx: usize,
}

impl Session {
    /// Open fabric, domain, CQ (and AV or EQ) for `info`, then exchange names with the peer
    /// over `ctrl` and set up the connection (`msg`) or AV entry (connectionless).
    pub fn open(
        info: &Info,
        server: bool,
        ctrl: &mut Ctrl,
        depth: Depth,
        cfg: Config,
    ) -> ofi::Result<Session> {
        let fabric = ofi::fabric(info).map_err(|e| ctx_err("fi_fabric", e))?;
        let ntx = depth.ntx.clamp(1, info.tx_attr.size.max(1));
        let nrx = depth.nrx.clamp(1, info.rx_attr.size.max(1));
        let cq_attr = CqAttr {
            size: (nrx + ntx + 16).max(64),
            ..CqAttr::with_format(CqFormat::Msg)
        };
        let mut pep = None;
        let mut eq = None;
        let mut av = None;
        let mut peer = ofi::ADDR_UNSPEC;
        let (domain, ep, cq, info) = if info.ep_type() == EpType::Msg {
            let e = fabric
                .eq_open(&EqAttr::default())
                .map_err(|e| ctx_err("fi_eq_open", e))?;
            let (domain, ep, cq, info) = if server {
                let p = fabric
                    .passive_ep(info)
                    .map_err(|e| ctx_err("fi_passive_ep", e))?;
                p.bind_eq(&e, 0).map_err(|e| ctx_err("fi_pep_bind", e))?;
                p.listen().map_err(|e| ctx_err("fi_listen", e))?;
                let name = p.getname().map_err(|e| ctx_err("fi_getname (pep)", e))?;
                ctrl.send(&name_frame(info.addr_format, &name))?;
                let ev = eq_wait(&e, EqEvent::ConnReq, cfg.timeout, "waiting for FI_CONNREQ")?;
                let Some(req) = ev.info else {
                    return Err(Error::new(
                        Errno::EOTHER,
                        "FI_CONNREQ without the connection's info",
                    ));
                };
                let req = *req;
                let (domain, ep, cq) = open_msg_ep(&fabric, &req, &cq_attr, &e)?;
                ep.accept(&[]).map_err(|e| ctx_err("fi_accept", e))?;
                wait_connected(&e, cfg.timeout)?;
                pep = Some(p);
                (domain, ep, cq, req)
            } else {
                let f = ctrl.recv()?;
                let dest = parse_name_frame(&f, ctrl.peer_ip())?;
                let (domain, ep, cq) = open_msg_ep(&fabric, info, &cq_attr, &e)?;
                ep.connect(&dest.to_bytes(), &[])
                    .map_err(|e| ctx_err("fi_connect", e))?;
                wait_connected(&e, cfg.timeout)?;
                (domain, ep, cq, info.clone())
            };
            eq = Some(e);
            (domain, ep, cq, info)
        } else {
            let domain = fabric.domain(info).map_err(|e| ctx_err("fi_domain", e))?;
            let cq = domain
                .cq_open(&cq_attr)
                .map_err(|e| ctx_err("fi_cq_open", e))?;
            let a = domain
                .av_open(&AvAttr {
                    av_type: info.domain_attr.av_type,
                    count: 4,
                    ..AvAttr::default()
                })
                .map_err(|e| ctx_err("fi_av_open", e))?;
            let ep = domain
                .endpoint(info)
                .map_err(|e| ctx_err("fi_endpoint", e))?;
            ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
                .map_err(|e| ctx_err("fi_ep_bind (CQ)", e))?;
            ep.bind_av(&a).map_err(|e| ctx_err("fi_ep_bind (AV)", e))?;
            ep.enable().map_err(|e| ctx_err("fi_enable", e))?;
            let own = name_frame(
                info.addr_format,
                &ep.getname().map_err(|e| ctx_err("fi_getname", e))?,
            );
            let theirs = if server {
                ctrl.send(&own)?;
                ctrl.recv()?
            } else {
                let t = ctrl.recv()?;
                ctrl.send(&own)?;
                t
            };
            let addr = parse_name_frame(&theirs, ctrl.peer_ip())?;
            let got = a
                .insert(std::slice::from_ref(&addr))
                .map_err(|e| ctx_err("fi_av_insert", e))?;
            peer = match got.first() {
                Some(&p) if p != ofi::ADDR_NOTAVAIL => p,
                _ => {
                    return Err(Error::new(
                        Errno::EADDRNOTAVAIL,
                        format!("fi_av_insert of the peer's address {addr:?} failed"),
                    ))
                }
            };
            av = Some(a);
            (domain, ep, cq, info.clone())
        };

        let slot = depth.max_size.max(ACK_LEN).max(8);
        let rx_slots = nrx.min((RX_BUDGET / slot).max(1));
        let buf = vec![0u8; slot * (1 + rx_slots)].into_boxed_slice();
        let mr = if info.domain_attr.mr_mode.contains(MrMode::LOCAL) {
            // SAFETY: `buf` is a heap region owned by the session that is never
            // reallocated and is dropped after the region (field order).
            let m = unsafe {
                domain.mr_reg(
                    buf.as_ptr(),
                    buf.len(),
                    OpFlags::SEND | OpFlags::RECV,
                    0,
                    MR_KEY,
                    0,
                )
            }
            .map_err(|e| ctx_err("fi_mr_reg", e))?;
            Some(m)
        } else {
            None
        };
        let ctx = vec![[0usize; 8]; nrx + ntx].into_boxed_slice();
        let desc = mr.as_ref().map_or(std::ptr::null_mut(), MemoryRegion::desc);
        // Receive `i` lands in slot `1 + i % rx_slots` (slot 0 is the transmit slot)
        // and has context cell `i`.
        let rx_post = (0..nrx)
            .map(|i| (slot * (1 + i % rx_slots), ctx[i].as_ptr() as usize))
            .collect();
        let mut s = Session {
            ep,
            _pep: pep,
            _eq: eq,
            cq,
            _av: av,
            _mr: mr,
            desc,
            _domain: domain,
            _fabric: fabric,
            buf,
            ctx,
            info,
            peer,
            cfg,
            slot,
            rx_slots,
            rx_post,
            nrx,
            ntx,
            tx_free: (nrx..nrx + ntx).rev().collect(),
            tx_outstanding: 0,
            done_rx: VecDeque::new(),
            cq_entries: [CqMsgEntry::default(); 16],
        };
        for i in 0..nrx {
            s.post_recv(i)?;
        }
        Ok(s)
    }

    /// The largest message the endpoint takes.
    pub fn max_msg_size(&self) -> usize {
        self.info.ep_attr.max_msg_size
    }

    /// The address of context cell `i`.
    #[inline]
    fn ctx_of(&self, i: usize) -> usize {
        self.ctx[i].as_ptr() as usize
    }

    /// The operation a completion's context belongs to.
    #[inline]
    fn op_of(&self, ctx: usize) -> Op {
        // Below the base, the offset wraps to far beyond the cells.
        let off = ctx.wrapping_sub(self.ctx.as_ptr() as usize);
        let i = off / CELL;
        if !off.is_multiple_of(CELL) {
            Op::Unknown
        } else if i < self.nrx {
            Op::Recv(i)
        } else if i < self.ctx.len() {
            Op::Send(i)
        } else {
            Op::Unknown
        }
    }

    /// The name of an operation for messages: `tagged` when the session uses tagged
    /// messages, else `plain` (e.g. `fi_tsend` / `fi_send`).
    fn op_name(&self, tagged: &'static str, plain: &'static str) -> &'static str {
        if self.cfg.tagged {
            tagged
        } else {
            plain
        }
    }

    /// The rest of an operation whose first try failed with `first`: while it is
    /// `FI_EAGAIN`, drive progress and try `op` again, until the time-out. Out of line:
    /// the first try, made by the caller, usually succeeds, and then no time limit is
    /// ever set up.
    #[cold]
    #[inline(never)]
    fn retry(
        &mut self,
        what: &str,
        first: Error,
        mut op: impl FnMut(&Self) -> ofi::Result<()>,
    ) -> ofi::Result<()> {
        let mut spin = SpinLimit::default();
        let mut err = first;
        loop {
            if err.code() != Errno::EAGAIN {
                return Err(ctx_err(what, err));
            }
            self.progress()?;
            if spin.expired(self.cfg.timeout) {
                return Err(Error::new(
                    Errno::ETIMEDOUT,
                    format!("{what}: still FI_EAGAIN after {:?}", self.cfg.timeout),
                ));
            }
            match op(self) {
                Ok(()) => return Ok(()),
                Err(e) => err = e,
            }
        }
    }

    /// One try to post receive `i`.
    #[inline(always)]
    fn try_post_recv(&self, i: usize) -> ofi::Result<()> {
        let (off, ctx) = self.rx_post[i];
        let p = self.buf[off..].as_ptr() as *mut u8;
        // SAFETY: the slot lies inside `buf`, which outlives the endpoint (field order)
        // and is only read after this receive's completion.
        unsafe {
            if self.cfg.tagged {
                self.ep
                    .trecv(p, self.slot, self.desc, ofi::ADDR_UNSPEC, TAG, 0, ctx)
            } else {
                self.ep.recv(p, self.slot, self.desc, ofi::ADDR_UNSPEC, ctx)
            }
        }
    }

    /// Post receive `i` (again).
    #[inline]
    fn post_recv(&mut self, i: usize) -> ofi::Result<()> {
        match self.try_post_recv(i) {
            Ok(()) => Ok(()),
            Err(e) => self.retry(self.op_name("fi_trecv", "fi_recv"), e, move |s| {
                s.try_post_recv(i)
            }),
        }
    }

    /// Take in completion `k` of the last read; a receive's (index, length) is returned,
    /// a send's context is freed.
    #[inline]
    fn absorb(&mut self, k: usize) -> ofi::Result<Option<(usize, usize)>> {
        let x = self.cq_entries[k];
        match self.op_of(x.op_context) {
            Op::Recv(i) => Ok(Some((i, x.len))),
            Op::Send(i) => {
                self.tx_outstanding = self.tx_outstanding.saturating_sub(1);
                self.tx_free.push(i);
                Ok(None)
            }
            Op::Unknown => Err(unknown_context(x.op_context)),
        }
    }

    /// Take in completions `from..n` of the last read: receives are queued in
    /// `done_rx`, sends free their contexts.
    #[inline(never)]
    fn queue(&mut self, from: usize, n: usize) -> ofi::Result<()> {
        for k in from..n.min(self.cq_entries.len()) {
            if let Some(d) = self.absorb(k)? {
                self.done_rx.push_back(d);
            }
        }
        Ok(())
    }

    /// Take in the `n` completions of the last read, for a waiting receive: the first
    /// receive's (index, length) is returned, without a trip through `done_rx`, and the
    /// rest are queued after it. Only with `done_rx` empty: the completion returned
    /// must be the oldest.
    #[inline(always)]
    fn take_first(&mut self, n: usize) -> ofi::Result<Option<(usize, usize)>> {
        // One completion per read is the rule in a ping-pong: no loop for it.
        if n == 1 {
            return self.absorb(0);
        }
        self.take_first_of(n)
    }

    /// [`Self::take_first`] of other than one completion.
    #[inline(never)]
    fn take_first_of(&mut self, n: usize) -> ofi::Result<Option<(usize, usize)>> {
        for k in 0..n.min(self.cq_entries.len()) {
            if let Some(d) = self.absorb(k)? {
                if k + 1 < n {
                    self.queue(k + 1, n)?;
                }
                return Ok(Some(d));
            }
        }
        Ok(None)
    }

    /// One poll for a waiting receive (`done_rx` empty): the first receive completion
    /// the CQ has, if any.
    #[inline(always)]
    fn poll_rx(&mut self) -> ofi::Result<Option<(usize, usize)>> {
        match self.cq.read(&mut self.cq_entries) {
            Ok(n) => self.take_first(n),
            Err(e) if e.code() == Errno::EAGAIN => Ok(None),
            Err(e) => Err(self.cq_failure(e)),
        }
    }

    /// Read what the CQ has; receive completions are queued, send completions counted.
    fn progress(&mut self) -> ofi::Result<()> {
        let n = match self.cq.read(&mut self.cq_entries) {
            Ok(n) => n,
            Err(e) if e.code() == Errno::EAGAIN => 0,
            Err(e) => return Err(self.cq_failure(e)),
        };
        self.queue(0, n)
    }

    /// A failed `fi_cq_read` (not `FI_EAGAIN`) as the error to report; an error entry
    /// (`FI_EAVAIL`) is read and described.
    #[cold]
    #[inline(never)]
    fn cq_failure(&mut self, err: Error) -> Error {
        if err.code() != Errno::EAVAIL {
            return ctx_err("fi_cq_read", err);
        }
        let mut ee = CqErrEntry::default();
        if let Err(e) = self.cq.readerr(&mut ee, 0) {
            return ctx_err("fi_cq_readerr", e);
        }
        let what = match self.op_of(ee.op_context) {
            Op::Recv(_) => "receive",
            Op::Send(_) => "send",
            Op::Unknown => "operation",
        };
        let cause = provider_cause(ee.prov_errno, || self.cq.strerror(ee.prov_errno));
        Error::new(
            Errno(ee.err),
            format!(
                "{what} completed with error {} ({}){cause}",
                ee.err,
                ofi::error::strerror(ee.err)
            ),
        )
    }

    /// Fill the transmit slot with the payload of `len` bytes.
    pub fn fill(&mut self, len: usize) {
        for (i, b) in self.buf[..len].iter_mut().enumerate() {
            *b = pattern_byte(i);
        }
    }

    /// One try to inject `len` bytes of the transmit slot.
    #[inline]
    fn try_inject(&self, len: usize) -> ofi::Result<()> {
        let data = &self.buf[..len];
        if self.cfg.tagged {
            self.ep.tinject(data, self.peer, TAG)
        } else {
            self.ep.inject(data, self.peer)
        }
    }

    /// Send `len` bytes of the transmit slot to the peer (inject when small enough).
    #[inline(always)]
    pub fn send(&mut self, len: usize) -> ofi::Result<()> {
        if len >= self.info.tx_attr.inject_size {
            return self.send_with_context(len);
        }
        match self.try_inject(len) {
            Ok(()) => Ok(()),
            Err(e) => self.retry(self.op_name("fi_tinject", "fi_inject"), e, move |s| {
                s.try_inject(len)
            }),
        }
    }

    /// One try to send `len` bytes of the transmit slot with context cell `cell`.
    #[inline]
    fn try_send(&self, len: usize, cell: usize) -> ofi::Result<()> {
        let ctx = self.ctx_of(cell);
        // SAFETY: the transmit slot lies in `buf`, which outlives the endpoint and is not
        // written while sends are outstanding (`fill` runs between sizes, after `flush`).
        unsafe {
            if self.cfg.tagged {
                self.ep
                    .tsend(self.buf.as_ptr(), len, self.desc, self.peer, TAG, ctx)
            } else {
                self.ep
                    .send(self.buf.as_ptr(), len, self.desc, self.peer, ctx)
            }
        }
    }

    /// A send that completes through the CQ, with a context cell of its own.
    #[inline(never)]
    fn send_with_context(&mut self, len: usize) -> ofi::Result<()> {
        if self.tx_free.is_empty() {
            self.wait_tx_free()?;
        }
        let Some(cell) = self.tx_free.pop() else {
            return Err(Error::new(Errno::EOTHER, "no free send context"));
        };
        let sent = match self.try_send(len, cell) {
            Ok(()) => Ok(()),
            Err(e) => self.retry(self.op_name("fi_tsend", "fi_send"), e, move |s| {
                s.try_send(len, cell)
            }),
        };
        sent.inspect_err(|_| self.tx_free.push(cell))?;
        self.tx_outstanding += 1;
        Ok(())
    }

    /// Wait until a send context is free.
    #[cold]
    #[inline(never)]
    fn wait_tx_free(&mut self) -> ofi::Result<()> {
        let mut spin = SpinLimit::default();
        while self.tx_free.is_empty() {
            self.progress()?;
            if spin.expired(self.cfg.timeout) {
                return Err(Error::new(
                    Errno::ETIMEDOUT,
                    format!("no send completion within {:?}", self.cfg.timeout),
                ));
            }
        }
        Ok(())
    }

    /// Wait until every send has completed.
    pub fn flush(&mut self) -> ofi::Result<()> {
        let mut spin = SpinLimit::default();
        while self.tx_outstanding > 0 {
            self.progress()?;
            if spin.expired(self.cfg.timeout) {
                return Err(Error::new(
                    Errno::ETIMEDOUT,
                    format!(
                        "{} send(s) not completed within {:?}",
                        self.tx_outstanding, self.cfg.timeout
                    ),
                ));
            }
        }
        Ok(())
    }

    fn is_dgram(&self) -> bool {
        self.info.ep_type() == EpType::Dgram
    }

    /// Wait for a receive of `want` bytes until `limit` has passed; its buffer is checked
    /// (with integrity checks on) and the receive reposted. `Ok(false)` when nothing came
    /// (datagrams) — a reliable endpoint returns `FI_ETIMEDOUT` instead. Datagrams of
    /// another length (stale ones from an earlier size) are dropped.
    #[inline(always)]
    pub fn recv(&mut self, want: usize, limit: Duration) -> ofi::Result<bool> {
        let mut spin = SpinLimit::default();
        loop {
            let (i, len) = match self.done_rx.pop_front() {
                Some(d) => d,
                None => match self.poll_rx()? {
                    Some(d) => d,
                    None => match self.wait_rx(&mut spin, limit)? {
                        Some(d) => d,
                        None => return self.nothing_came(want, limit),
                    },
                },
            };
            let ok_len = len == want;
            if ok_len && self.cfg.integrity {
                self.check_payload(i, want)?;
            }
            self.post_recv(i)?;
            if ok_len {
                return Ok(true);
            }
            if !self.is_dgram() {
                return Err(wrong_length(len, want));
            }
        }
    }

    /// Busy-poll for a waiting receive after a poll that brought none: the first
    /// receive completion, or `None` once `limit` has expired (`spin`: the state of the
    /// wait). Out of line: a message that is there at the first poll needs none of it,
    /// and the polling loop gets the registers to itself.
    #[inline(never)]
    fn wait_rx(
        &mut self,
        spin: &mut SpinLimit,
        limit: Duration,
    ) -> ofi::Result<Option<(usize, usize)>> {
        // A copy that can live in registers, put back on the way out.
        let mut l = *spin;
        loop {
            if l.expired(limit) {
                *spin = l;
                return Ok(None);
            }
            // `poll_rx`, with an empty CQ going straight to the next poll.
            match self.cq.read(&mut self.cq_entries) {
                Ok(n) => match self.take_first(n) {
                    Ok(None) => {}
                    got => {
                        *spin = l;
                        return got;
                    }
                },
                Err(e) if e.code() == Errno::EAGAIN => {}
                Err(e) => return Err(self.cq_failure(e)),
            }
        }
    }

    /// Check the `want` bytes receive `i` brought, then clear them.
    #[inline(never)]
    fn check_payload(&mut self, i: usize, want: usize) -> ofi::Result<()> {
        let off = self.rx_post[i].0;
        if let Some(bad) = (0..want).find(|&k| self.buf[off + k] != pattern_byte(k)) {
            return Err(Error::new(
                Errno::EIO,
                format!("data check error: byte {bad} of a {want}-byte message differs"),
            ));
        }
        // Clear it, so a later short write cannot pass on stale bytes (not when receives
        // share slots: another may be landing in it).
        if self.rx_slots == self.nrx {
            self.buf[off..off + want].fill(0);
        }
        Ok(())
    }

    /// The end of a receive wait that saw nothing within `limit`.
    #[cold]
    #[inline(never)]
    fn nothing_came(&self, want: usize, limit: Duration) -> ofi::Result<bool> {
        if self.is_dgram() {
            return Ok(false);
        }
        Err(Error::new(
            Errno::ETIMEDOUT,
            format!("no message of {want} bytes within {limit:?}"),
        ))
    }

    /// The wait for one message: the datagram loss timeout or the reliable time-out.
    pub fn msg_timeout(&self) -> Duration {
        if self.is_dgram() {
            self.cfg.dgram_timeout
        } else {
            self.cfg.timeout
        }
    }

    /// The largest message a receive slot holds.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Receives kept posted.
    pub fn nrx(&self) -> usize {
        self.nrx
    }

    /// Sends that may be outstanding.
    pub fn ntx(&self) -> usize {
        self.ntx
    }

    /// Orderly end: shut a connection down (errors ignored: the peer may be gone).
    pub fn shutdown(&mut self) {
        let _ = self.flush();
        if self.info.ep_type() == EpType::Msg {
            let _ = self.ep.shutdown(0);
        }
        if self.cfg.verbose {
            eprintln!("[debug] endpoint closed");
        }
    }
}

/// The payload byte at offset `i` (the pattern of the integrity check, seed 7).
pub fn pattern_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

    #[test]
    fn spin_limit_reads_the_clock_rarely_and_expires() {
        // A clock the test moves, counting its readings.
        let t0 = Instant::now();
        let now = std::cell::Cell::new(t0);
        let reads = std::cell::Cell::new(0u32);
        let clock = || {
            reads.set(reads.get() + 1);
            now.get()
        };
        let limit = Duration::from_millis(20);
        let mut l = SpinLimit::default();
        for _ in 0..SpinLimit::EVERY - 1 {
            assert!(!l.expired_on(limit, clock), "expired before its limit");
        }
        assert_eq!(reads.get(), 0, "the clock was read before EVERY calls");
        // Time passes, but less than the limit from the first reading.
        assert!(!l.expired_on(limit, clock));
        assert_eq!(reads.get(), 1);
        now.set(t0 + Duration::from_millis(19));
        for _ in 0..10 * SpinLimit::EVERY {
            assert!(!l.expired_on(limit, clock), "expired before its limit");
        }
        assert_eq!(reads.get(), 11, "one reading every EVERY calls");
        now.set(t0 + Duration::from_millis(20));
        let calls = (1..=SpinLimit::EVERY).find(|_| l.expired_on(limit, clock));
        assert_eq!(calls, Some(SpinLimit::EVERY), "expired at the next reading");
        // It stays expired.
        assert!((0..SpinLimit::EVERY).any(|_| l.expired_on(limit, clock)));
    }

    #[test]
    fn the_provider_cause_is_printed_only_when_there_is_one() {
        // A provider errno of 0 said "provider: Success" after every error.
        assert_eq!(provider_cause(0, || "Success".into()), "");
        assert_eq!(provider_cause(5, String::new), "");
        assert_eq!(
            provider_cause(111, || "Connection refused".into()),
            ", provider: Connection refused"
        );
    }

    #[test]
    fn name_frames_round_trip_and_wildcards_take_the_peer_ip() {
        let a = Address::Inet(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 4000));
        let f = name_frame(a.format(), &a.to_bytes());
        let peer = Some(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(
            parse_name_frame(&f, peer).unwrap(),
            Address::Inet(SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 4000))
        );
        assert_eq!(parse_name_frame(&f, None).unwrap(), a);
        let s = Address::Str("fi_unixdgram://x".into());
        let f = name_frame(s.format(), &s.to_bytes());
        assert_eq!(parse_name_frame(&f, peer).unwrap(), s);
    }

    #[test]
    fn malformed_name_frames_are_errors() {
        assert_eq!(
            parse_name_frame(&[0, 0], None).unwrap_err().code(),
            Errno::EPROTO
        );
        // A sockaddr_in frame with 3 bytes of address.
        let mut f = AddrFormat::SOCKADDR_IN.to_raw().to_be_bytes().to_vec();
        f.extend_from_slice(&[1, 2, 3]);
        assert_eq!(
            parse_name_frame(&f, None).unwrap_err().code(),
            Errno::EINVAL
        );
    }
}
