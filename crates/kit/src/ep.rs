//! Endpoint bindings (`fi_ep_bind` before `fi_enable`): which CQs, counters, AV and EQ
//! an endpoint reports to, with the flag rules of fi_endpoint(3) checked once for every
//! provider built on the kit's objects.
//!
//! Rules [`Bindings::bind`] enforces:
//! - a CQ binds with `FI_TRANSMIT` and/or `FI_RECV`, optionally
//!   `FI_SELECTIVE_COMPLETION`; anything else is `FI_EBADFLAGS`;
//! - a counter binds with a non-empty subset of `FI_SEND`, `FI_RECV`, `FI_READ`,
//!   `FI_WRITE` (`FI_REMOTE_READ` / `FI_REMOTE_WRITE` are `FI_ENOSYS`: the kit's
//!   providers have no `FI_RMA_EVENT`); anything else is `FI_EBADFLAGS`;
//! - an AV binds with flags 0 (else `FI_EBADFLAGS`), once;
//! - an EQ binds only where [`BindRules::eq`] allows it (else `FI_ENOSYS`), once;
//! - a second CQ or counter for a direction already bound, a second AV or EQ, is
//!   `FI_EINVAL` (nothing changes);
//! - shared contexts are `FI_ENOSYS`.
//!
//! The domain's AV type only has to be [`BindableAv`]: the kit's [`SharedAv`], or
//! [`Unsupported`] for connected endpoints (tcp), which then keep their bindings here
//! too and check `fi_enable` with [`Bindings::require_for_connected`] (an EQ and a
//! CQ); they read them through [`Bindings::tx_cq`], [`Bindings::counter`] and the like.
//!
//! Whether binding is still allowed (`FI_EOPBADSTATE` after `fi_enable`) is the
//! endpoint's to check; [`Bindings::freeze`] gives `fi_enable`'s checks and the frozen
//! [`Bound`], which then reports completions the way every kit provider does:
//! [`Bound::complete_tx`] (the counter follows the completion flags: `FI_WRITE`,
//! `FI_READ`, else send), [`Bound::complete_rx`] (truncation, selective completion,
//! multi-receive release), [`Bound::cancelled`]. The endpoint option the kit's
//! providers share, `FI_OPT_MIN_MULTI_RECV`, is [`getopt_min_multi_recv`] /
//! [`setopt_min_multi_recv`]. Nothing here panics.

use std::sync::Arc;

use ofi_core::abi::raw::CqTaggedEntry;
use ofi_core::attr::Info;
use ofi_core::cq::CqError;
use ofi_core::enums::ADDR_NOTAVAIL;
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{Caps, OpFlags};
use ofi_core::provider::{BindTarget, CqBindFlags, DomainOps, FabricOps, Unsupported};

use crate::av::{KitAv, SharedAv};
use crate::cntr::KitCntr;
use crate::cq::KitCq;
use crate::epglue::Delivery;
use crate::eq::KitEq;
use crate::iov::IoList;
use crate::tagmatch::{
    multi_deliveries, Incoming, MatcherConfig, Placement, PostAction, PostedRecv,
};

/// A CQ bound for one direction.
#[derive(Clone, Debug)]
pub struct CqBinding {
    /// The queue.
    pub cq: KitCq,
    /// Bound with `FI_SELECTIVE_COMPLETION`.
    pub selective: bool,
}

impl CqBinding {
    /// Whether an operation posted with `flags` writes a completion here.
    #[inline]
    pub fn wants(&self, flags: OpFlags) -> bool {
        !self.selective || flags.contains(OpFlags::COMPLETION)
    }
}

/// What a tag-matching endpoint takes from its `fi_info` when it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpOpenInfo {
    /// The endpoint's capabilities (`FI_MSG | FI_TAGGED | FI_SEND | FI_RECV` when the
    /// info names none).
    pub caps: Caps,
    /// `FI_DIRECTED_RECV`: receives with a source take only that source's messages.
    pub directed: bool,
    /// Received messages need their source's fabric address (`FI_SOURCE`, or
    /// `FI_DIRECTED_RECV` to match on it).
    pub need_src: bool,
    /// Receives that may be posted at once: `rx_attr.size`, or the provider's default.
    pub rx_size: usize,
}

/// A queue size an attribute asks for (`tx_attr.size`, `rx_attr.size`), or `default`
/// (the provider's) where it is 0, which leaves the size to the provider.
pub fn size_or(size: usize, default: usize) -> usize {
    if size == 0 {
        default
    } else {
        size
    }
}

impl EpOpenInfo {
    /// From `info`, with `default_rx_size` where `rx_attr.size` is 0.
    pub fn new(info: &Info, default_rx_size: usize) -> EpOpenInfo {
        let caps = if info.caps.is_empty() {
            Caps::MSG | Caps::TAGGED | Caps::SEND | Caps::RECV
        } else {
            info.caps
        };
        EpOpenInfo {
            caps,
            directed: caps.contains(Caps::DIRECTED_RECV),
            need_src: caps.intersects(Caps::SOURCE | Caps::DIRECTED_RECV),
            rx_size: size_or(info.rx_attr.size, default_rx_size),
        }
    }

    /// The tag matcher's configuration: directed receive and the posted-receive bound
    /// from the info, the rest the matcher's defaults.
    pub fn matcher_config(&self) -> MatcherConfig {
        MatcherConfig {
            directed_recv: self.directed,
            max_posted: self.rx_size,
            ..MatcherConfig::default()
        }
    }
}

/// What an endpoint accepts beyond CQs, counters and an AV.
#[derive(Clone, Copy, Debug)]
pub struct BindRules {
    /// The provider's name, for messages.
    pub prov: &'static str,
    /// Whether an EQ may be bound (e.g. for `FI_JOIN_COMPLETE` events).
    pub eq: bool,
}

/// The AV type of a domain whose endpoints keep their bindings in [`Bindings`]: the
/// kit's [`SharedAv`] (or a [`GatedAv`](crate::av::GatedAv) around one), or
/// [`Unsupported`] for a domain without AVs (connected endpoints), which can never be
/// bound.
pub trait BindableAv<P> {
    /// The kit AV to keep in [`Bindings::av`].
    fn kit_av(&self) -> &Arc<KitAv<P>>;
}

impl<P> BindableAv<P> for SharedAv<P> {
    fn kit_av(&self) -> &Arc<KitAv<P>> {
        self.kit()
    }
}

impl<G, P> BindableAv<P> for crate::av::GatedAv<G, P> {
    fn kit_av(&self) -> &Arc<KitAv<P>> {
        self.shared().kit()
    }
}

impl<P> BindableAv<P> for Unsupported {
    fn kit_av(&self) -> &Arc<KitAv<P>> {
        match *self {}
    }
}

/// Which counter an operation counts on (an event `fi_ep_bind` binds a counter for).
/// Its value is the index of the counter in [`Bindings::counters`], so
/// [`Bindings::counter`] is an offset, not a branch (tcp's data path asks it once per
/// operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    /// `FI_SEND`: sends.
    Send = 0,
    /// `FI_RECV`: receives.
    Recv,
    /// `FI_WRITE`: RMA writes and atomics.
    Write,
    /// `FI_READ`: RMA reads and fetching atomics.
    Read,
}

/// The objects an endpoint was bound to (see the module docs).
#[derive(Debug)]
pub struct Bindings<P = ()> {
    /// Completion queue for transmit operations.
    pub txcq: Option<CqBinding>,
    /// Completion queue for receive operations.
    pub rxcq: Option<CqBinding>,
    /// The counters, by [`CounterKind`] (read with [`Bindings::counter`]).
    pub counters: [Option<KitCntr>; 4],
    /// The address vector.
    pub av: Option<Arc<KitAv<P>>>,
    /// The event queue.
    pub eq: Option<KitEq>,
}

/// An unexpected message [`Bound::carry_out`] hands the provider.
#[derive(Debug)]
pub enum Unexpected<'a, U> {
    /// Deliver a message into a receive ([`Delivery`]).
    Deliver(Delivery<'a, U>),
    /// `FI_DISCARD` removed the message: release what `payload` holds.
    Discard(U),
}

/// What an enabled connectionless endpoint reports to: [`Bindings`] frozen by
/// [`Bindings::freeze`] at `fi_enable`, read by the data path without a lock.
#[derive(Debug)]
pub struct Bound<P = ()> {
    /// The address vector.
    pub av: Arc<KitAv<P>>,
    /// Completion queue for transmit operations.
    pub txcq: Option<CqBinding>,
    /// Completion queue for receive operations.
    pub rxcq: Option<CqBinding>,
    /// Counter of completed sends.
    pub txcntr: Option<KitCntr>,
    /// Counter of completed receives.
    pub rxcntr: Option<KitCntr>,
    /// Counter of completed RMA writes and atomics.
    pub wcntr: Option<KitCntr>,
    /// Counter of completed RMA reads and fetching atomics.
    pub rcntr: Option<KitCntr>,
}

/// The completion flags of a received message: `FI_RECV` with `FI_MSG` or `FI_TAGGED`,
/// `FI_REMOTE_CQ_DATA` when it carried data, `FI_MULTI_RECV` when it `released` its
/// multi-receive buffer.
pub fn recv_flags(inc: &Incoming, released: bool) -> u64 {
    let mut f = OpFlags::RECV
        | if inc.tagged {
            OpFlags::TAGGED
        } else {
            OpFlags::MSG
        };
    if inc.data.is_some() {
        f |= OpFlags::REMOTE_CQ_DATA;
    }
    if released {
        f |= OpFlags::MULTI_RECV;
    }
    f.bits()
}

/// `FI_OPT_ENDPOINT`, the option level of fi_getopt / fi_setopt.
pub const OPT_ENDPOINT: i32 = 0;
/// `FI_OPT_MIN_MULTI_RECV` (a `size_t`).
pub const OPT_MIN_MULTI_RECV: i32 = 0;

/// `fi_getopt` of `FI_OPT_MIN_MULTI_RECV` for a provider whose only endpoint option it
/// is: `value` written into `optval` (`FI_ETOOSMALL` if it does not fit), its length
/// returned; any other option is `FI_ENOPROTOOPT`.
pub fn getopt_min_multi_recv(
    prov: &str,
    level: i32,
    optname: i32,
    optval: &mut [u8],
    value: impl FnOnce() -> usize,
) -> Result<usize> {
    only_min_multi_recv(prov, level, optname)?;
    put_size_opt(prov, "FI_OPT_MIN_MULTI_RECV", optval, value())
}

/// `fi_setopt` of `FI_OPT_MIN_MULTI_RECV`: the value in `optval` (`FI_EINVAL` unless it
/// is exactly a `size_t`); any other option is `FI_ENOPROTOOPT`.
pub fn setopt_min_multi_recv(prov: &str, level: i32, optname: i32, optval: &[u8]) -> Result<usize> {
    only_min_multi_recv(prov, level, optname)?;
    take_size_opt(prov, "FI_OPT_MIN_MULTI_RECV", optval)
}

/// `FI_ENOPROTOOPT` naming `prov` unless the option is `FI_OPT_MIN_MULTI_RECV`.
fn only_min_multi_recv(prov: &str, level: i32, optname: i32) -> Result<()> {
    if level != OPT_ENDPOINT || optname != OPT_MIN_MULTI_RECV {
        return Err(Error::new(
            Errno::ENOPROTOOPT,
            format!("{prov}: option {level}/{optname} is not supported"),
        ));
    }
    Ok(())
}

/// `fi_getopt` of a `size_t` option (`name`, as `FI_OPT_…`): `value` written into
/// `optval`, its length returned; `FI_ETOOSMALL` naming `prov` if it does not fit.
pub fn put_size_opt(prov: &str, name: &str, optval: &mut [u8], value: usize) -> Result<usize> {
    let b = value.to_ne_bytes();
    let Some(dst) = optval.get_mut(..b.len()) else {
        return Err(Error::new(
            Errno::ETOOSMALL,
            format!("{prov}: {name} needs a size_t"),
        ));
    };
    dst.copy_from_slice(&b);
    Ok(b.len())
}

/// `fi_setopt` of a `size_t` option (`name`, as `FI_OPT_…`): the value in `optval`;
/// `FI_EINVAL` naming `prov` unless `optval` is exactly a `size_t`.
pub fn take_size_opt(prov: &str, name: &str, optval: &[u8]) -> Result<usize> {
    let b: [u8; std::mem::size_of::<usize>()] = optval.try_into().map_err(|_| {
        Error::new(
            Errno::EINVAL,
            format!(
                "{prov}: {name} takes a size_t ({} bytes), got {}",
                std::mem::size_of::<usize>(),
                optval.len()
            ),
        )
    })?;
    Ok(usize::from_ne_bytes(b))
}

impl<P> Bound<P> {
    /// Whether a transmit operation posted with `flags` writes a completion entry: not
    /// an inject, a transmit CQ bound, and selective completion letting it through.
    #[inline]
    pub fn tx_completion_wanted(&self, inject: bool, flags: OpFlags) -> bool {
        !inject && self.txcq.as_ref().is_some_and(|b| b.wants(flags))
    }

    /// Report a receive that `fi_cancel` took back: an `FI_ECANCELED` error entry with
    /// the receive's flags and tag.
    pub fn cancelled<B>(&self, recv: &PostedRecv<B>) {
        self.rx_error(recv, Errno::ECANCELED);
    }

    /// Carries out what posting a receive answered ([`PostAction`]): peeks and
    /// "no message" are reported here; each unexpected message to deliver (one, or the
    /// several a multi-receive buffer takes, the last with `releases` when the buffer
    /// was released) and each payload `FI_DISCARD` removed go to `unexpected`, which
    /// knows the provider's payloads.
    pub fn carry_out<U>(
        &self,
        action: PostAction<IoList, U>,
        mut unexpected: impl FnMut(Unexpected<'_, U>),
    ) {
        match action {
            PostAction::Queued => {}
            PostAction::One {
                recv,
                place,
                msg,
                payload,
            } => unexpected(Unexpected::Deliver(Delivery {
                recv: &recv,
                place,
                msg: &msg,
                payload,
                releases: false,
            })),
            PostAction::Multi {
                recv,
                released,
                msgs,
            } => {
                for (place, msg, payload, releases) in multi_deliveries(released, msgs) {
                    unexpected(Unexpected::Deliver(Delivery {
                        recv: &recv,
                        place,
                        msg: &msg,
                        payload,
                        releases,
                    }));
                }
            }
            PostAction::Peeked { recv, msg } => self.peeked(recv, &msg, false),
            PostAction::NoMessage { recv } => self.no_message(&recv),
            PostAction::Discarded { recv, msg, payload } => {
                unexpected(Unexpected::Discard(payload));
                self.peeked(recv, &msg, true);
            }
        }
    }

    /// Report a peek that found nothing: an `FI_ENOMSG` error entry.
    pub fn no_message<B>(&self, recv: &PostedRecv<B>) {
        self.rx_error(recv, Errno::ENOMSG);
    }

    /// Report a peek that found `msg` (its length, tag and data; no buffer), or, with
    /// `discarded`, a message `FI_DISCARD` removed (length 0).
    pub fn peeked(&self, mut recv: PostedRecv<IoList>, msg: &Incoming, discarded: bool) {
        let place = Placement {
            offset: 0,
            len: if discarded { 0 } else { msg.len },
            truncated: false,
        };
        recv.buf = IoList::one(0, 0);
        self.complete_rx(&recv, place, msg, false, None);
    }

    /// An error entry `code` for a receive, with its flags and tag.
    fn rx_error<B>(&self, recv: &PostedRecv<B>, code: Errno) {
        if let Some(b) = &self.rxcq {
            let mut ce = CqError::new(recv.ctx, code);
            ce.flags = (OpFlags::RECV
                | if recv.tagged {
                    OpFlags::TAGGED
                } else {
                    OpFlags::MSG
                })
            .bits();
            ce.tag = recv.tag;
            let _ = b.cq.push_err(ce);
        }
    }

    /// Report a finished transmit-side operation (send, RMA, atomic) of context `ctx`
    /// with completion `flags`: an error entry and the counter's error count on `err`;
    /// else an entry when `want` (not suppressed by selective completion) and the
    /// counter. The counter follows the flags: `FI_WRITE` → write counter, `FI_READ` →
    /// read counter, else the send counter.
    pub fn complete_tx(&self, ctx: usize, flags: u64, want: bool, err: Option<Errno>) {
        let f = OpFlags::from_bits_truncate(flags);
        let cntr = if f.contains(OpFlags::WRITE) {
            &self.wcntr
        } else if f.contains(OpFlags::READ) {
            &self.rcntr
        } else {
            &self.txcntr
        };
        if let Some(e) = err {
            if let Some(b) = &self.txcq {
                let mut ce = CqError::new(ctx, e);
                ce.flags = flags;
                let _ = b.cq.push_err(ce);
            }
            if let Some(c) = cntr {
                c.inc_err();
            }
            return;
        }
        if want {
            if let Some(b) = &self.txcq {
                let e = CqTaggedEntry {
                    op_context: ctx,
                    flags,
                    len: 0,
                    buf: std::ptr::null_mut(),
                    data: 0,
                    tag: 0,
                };
                let _ = b.cq.push(&e, ADDR_NOTAVAIL);
            }
        }
        if let Some(c) = cntr {
            c.inc();
        }
    }

    /// Report message `inc` received into `recv` at `place`: an error entry (with
    /// `olen` for `FI_ETRUNC`, which a truncated placement implies) and the receive
    /// counter's error count on error; else an entry unless selective completion
    /// suppresses it (a `released` multi-receive buffer is always reported), and the
    /// receive counter.
    pub fn complete_rx(
        &self,
        recv: &PostedRecv<IoList>,
        place: Placement,
        inc: &Incoming,
        released: bool,
        err: Option<Errno>,
    ) {
        let err = err.or(place.truncated.then_some(Errno::ETRUNC));
        if let Some(e) = err {
            return self.complete_rx_err(recv, place, inc, released, e);
        }
        if let Some(b) = &self.rxcq {
            if !b.selective || recv.flags.contains(OpFlags::COMPLETION) || released {
                let e = CqTaggedEntry {
                    op_context: recv.ctx,
                    flags: recv_flags(inc, released),
                    len: place.len,
                    buf: recv.buf.addr_at(place.offset) as *mut std::ffi::c_void,
                    data: inc.data.unwrap_or(0),
                    tag: inc.tag,
                };
                let _ = b.cq.push(&e, self.av.reported(inc.src));
            }
        }
        if let Some(c) = &self.rxcntr {
            c.inc();
        }
    }

    /// [`Self::complete_rx`] of a failed (or truncated) receive (out of line).
    #[cold]
    #[inline(never)]
    fn complete_rx_err(
        &self,
        recv: &PostedRecv<IoList>,
        place: Placement,
        inc: &Incoming,
        released: bool,
        e: Errno,
    ) {
        if let Some(b) = &self.rxcq {
            let mut ce = CqError::new(recv.ctx, e);
            ce.flags = recv_flags(inc, released);
            ce.len = place.len;
            ce.buf = recv.buf.addr_at(place.offset);
            ce.data = inc.data.unwrap_or(0);
            ce.tag = inc.tag;
            ce.olen = if e == Errno::ETRUNC {
                inc.len.saturating_sub(place.len)
            } else {
                0
            };
            let _ = b.cq.push_err(ce);
        }
        if let Some(c) = &self.rxcntr {
            c.inc_err();
        }
    }
}

impl<P> Default for Bindings<P> {
    fn default() -> Self {
        Bindings {
            txcq: None,
            rxcq: None,
            counters: [None, None, None, None],
            av: None,
            eq: None,
        }
    }
}

fn already(rules: &BindRules, what: &str) -> Error {
    Error::new(
        Errno::EINVAL,
        format!("{}: {what} is already bound", rules.prov),
    )
}

impl<P> Bindings<P> {
    /// `fi_ep_bind` of `target` with `flags` (see the module docs for the rules).
    pub fn bind<F>(
        &mut self,
        target: BindTarget<'_, F>,
        flags: OpFlags,
        rules: &BindRules,
    ) -> Result<()>
    where
        F: FabricOps<Eq = KitEq>,
        F::Domain: DomainOps<F, Cq = KitCq, Cntr = KitCntr>,
        <F::Domain as DomainOps<F>>::Av: BindableAv<P>,
    {
        let prov = rules.prov;
        let bad = |what: &str| {
            Error::new(
                Errno::EBADFLAGS,
                format!("{prov}: {what} (flags {:#x})", flags.bits()),
            )
        };
        match target {
            BindTarget::Cq(cq) => {
                let sides = CqBindFlags::parse(flags).map_err(|e| e.context(prov))?;
                let b = CqBinding {
                    cq: cq.clone(),
                    selective: sides.selective,
                };
                if !sides.store(b, &mut self.txcq, &mut self.rxcq) {
                    return Err(already(rules, "a CQ for this direction"));
                }
                Ok(())
            }
            BindTarget::Cntr(c) => {
                if flags.intersects(OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE) {
                    return Err(Error::new(
                        Errno::ENOSYS,
                        format!("{prov}: remote-access counters (FI_RMA_EVENT) are not supported"),
                    ));
                }
                let ok = OpFlags::SEND | OpFlags::RECV | OpFlags::WRITE | OpFlags::READ;
                if flags.is_empty() || !ok.contains(flags) {
                    return Err(bad(
                        "a counter binds with FI_SEND, FI_RECV, FI_WRITE and/or FI_READ",
                    ));
                }
                let events = [
                    (OpFlags::SEND, CounterKind::Send),
                    (OpFlags::RECV, CounterKind::Recv),
                    (OpFlags::WRITE, CounterKind::Write),
                    (OpFlags::READ, CounterKind::Read),
                ];
                let asked = events.iter().filter(|(f, _)| flags.contains(*f));
                if asked.clone().any(|&(_, k)| self.counter(k).is_some()) {
                    return Err(already(rules, "a counter for this event"));
                }
                for &(_, k) in asked {
                    self.counters[k as usize] = Some(c.clone());
                }
                Ok(())
            }
            BindTarget::Av(av) => {
                if !flags.is_empty() {
                    return Err(bad("an AV binds with flags 0"));
                }
                if self.av.is_some() {
                    return Err(already(rules, "an address vector"));
                }
                self.av = Some(av.kit_av().clone());
                Ok(())
            }
            BindTarget::Eq(eq) if rules.eq => {
                if self.eq.is_some() {
                    return Err(already(rules, "an event queue"));
                }
                self.eq = Some(eq.clone());
                Ok(())
            }
            BindTarget::Eq(_) => Err(Error::new(
                Errno::ENOSYS,
                format!("{prov}: an event queue does not bind to this endpoint"),
            )),
            BindTarget::Stx(_) | BindTarget::Srx(_) => Err(Error::new(
                Errno::ENOSYS,
                format!("{prov}: shared contexts are not supported"),
            )),
        }
    }

    /// `fi_enable` of a connectionless endpoint: [`Bindings::require_for_enable`]'s
    /// checks, then what was bound, frozen.
    pub fn freeze(&self, prov: &str) -> Result<Bound<P>> {
        let av = self.require_for_enable(prov)?;
        Ok(Bound {
            av,
            txcq: self.txcq.clone(),
            rxcq: self.rxcq.clone(),
            txcntr: self.counter(CounterKind::Send).cloned(),
            rxcntr: self.counter(CounterKind::Recv).cloned(),
            wcntr: self.counter(CounterKind::Write).cloned(),
            rcntr: self.counter(CounterKind::Read).cloned(),
        })
    }

    /// `fi_enable`'s checks for a connected endpoint: an EQ (`FI_ENOEQ`, for its
    /// connection events) and a CQ (`FI_ENOCQ`) are bound.
    ///
    /// # Errors
    /// `FI_ENOEQ`, `FI_ENOCQ`, with messages prefixed by `prov`.
    pub fn require_for_connected(&self, prov: &str) -> Result<()> {
        if self.eq.is_none() {
            return Err(Error::new(
                Errno::ENOEQ,
                format!("{prov}: bind an event queue before fi_enable"),
            ));
        }
        if self.txcq.is_none() && self.rxcq.is_none() {
            return Err(Error::new(
                Errno::ENOCQ,
                format!("{prov}: bind a completion queue before fi_enable"),
            ));
        }
        Ok(())
    }

    /// The counter bound for `kind`'s events.
    #[inline]
    pub fn counter(&self, kind: CounterKind) -> Option<&KitCntr> {
        self.counters[kind as usize].as_ref()
    }

    /// Whether the transmit CQ was bound with `FI_SELECTIVE_COMPLETION`.
    #[inline]
    pub fn tx_selective(&self) -> bool {
        self.txcq.as_ref().is_some_and(|b| b.selective)
    }

    /// Whether the receive CQ was bound with `FI_SELECTIVE_COMPLETION`.
    #[inline]
    pub fn rx_selective(&self) -> bool {
        self.rxcq.as_ref().is_some_and(|b| b.selective)
    }

    /// The CQ bound for transmit operations.
    #[inline]
    pub fn tx_cq(&self) -> Option<&KitCq> {
        self.txcq.as_ref().map(|b| &b.cq)
    }

    /// The CQ bound for receive operations.
    #[inline]
    pub fn rx_cq(&self) -> Option<&KitCq> {
        self.rxcq.as_ref().map(|b| &b.cq)
    }

    /// Whether a transmit operation posted with `flags` is reported (no transmit CQ
    /// bound counts as reported: counters and errors still follow).
    #[inline]
    pub fn tx_reports(&self, flags: OpFlags) -> bool {
        self.txcq.as_ref().is_none_or(|b| b.wants(flags))
    }

    /// Whether a receive posted with `flags` is reported (as [`Bindings::tx_reports`]).
    #[inline]
    pub fn rx_reports(&self, flags: OpFlags) -> bool {
        self.rxcq.as_ref().is_none_or(|b| b.wants(flags))
    }

    /// `fi_enable`'s checks for a connectionless endpoint: an AV (`FI_ENOAV`) and at
    /// least one CQ or counter to report to (`FI_ENOCQ`) are bound. Returns the AV.
    pub fn require_for_enable(&self, prov: &str) -> Result<Arc<KitAv<P>>> {
        let av = self.av.clone().ok_or_else(|| {
            Error::new(Errno::ENOAV, format!("{prov}: bind an AV before fi_enable"))
        })?;
        let counters = &self.counters;
        if self.txcq.is_none() && self.rxcq.is_none() && counters.iter().all(|c| c.is_none()) {
            return Err(Error::new(
                Errno::ENOCQ,
                format!("{prov}: bind a CQ or counter before fi_enable"),
            ));
        }
        Ok(av)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_multi_recv_option_round_trips_and_checks_sizes() {
        let mut out = [0u8; 16];
        let n = getopt_min_multi_recv("t", OPT_ENDPOINT, OPT_MIN_MULTI_RECV, &mut out, || 4096)
            .unwrap();
        assert_eq!(n, std::mem::size_of::<usize>());
        assert_eq!(
            setopt_min_multi_recv("t", OPT_ENDPOINT, OPT_MIN_MULTI_RECV, &out[..n]).unwrap(),
            4096
        );
        let e = getopt_min_multi_recv("t", OPT_ENDPOINT, OPT_MIN_MULTI_RECV, &mut out[..2], || 1)
            .unwrap_err();
        assert_eq!(e.code(), Errno::ETOOSMALL);
        let e =
            setopt_min_multi_recv("t", OPT_ENDPOINT, OPT_MIN_MULTI_RECV, &out[..3]).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        let e = setopt_min_multi_recv("t", OPT_ENDPOINT, 7, &out[..n]).unwrap_err();
        assert_eq!(e.code(), Errno::ENOPROTOOPT);
        let e = getopt_min_multi_recv("t", 3, OPT_MIN_MULTI_RECV, &mut out, || 1).unwrap_err();
        assert_eq!(e.code(), Errno::ENOPROTOOPT);
    }
}
