//! Scalable endpoints (`fi_scalable_ep`) and their transmit and receive contexts
//! (`fi_tx_context`, `fi_rx_context`).
//!
//! # Structure
//!
//! - The **scalable endpoint** ([`Membership::Scalable`]) owns the passive endpoint
//!   listening at its name and the core EQ its connection requests arrive on, and
//!   binds an AV only. It carries no data (its data calls are `FI_EOPBADSTATE`: it is
//!   never enabled as an endpoint), so its progress does nothing.
//! - Each **context** ([`Membership::Context`]) is a whole rxm endpoint: its own state
//!   lock, core CQ and EQ, protocol engine, connections, CQs and counters. A context
//!   bound to no AV of its own takes the scalable endpoint's at `fi_enable`.
//!   A transmit context opens connections and takes no receive; a receive context
//!   accepts connections and takes no transmit operation. Both have a passive
//!   endpoint of their own that does not listen (a transmit context's name is its
//!   identity at its peers: two transmit contexts are two connections there).
//! - **Addressing.** One connection per (transmit context, peer, receive context
//!   index). The index (`fi_rx_addr`, the top `rx_ctx_bits` of the fabric address)
//!   travels in the connection request ([`crate::hello_ext`]), absent for index 0:
//!   so a sender that does not address contexts reaches receive context 0, and its
//!   handshakes are those of before. A transmit context's request also carries the
//!   scalable endpoint's name as an alias, so that receivers report its messages'
//!   source (`FI_SOURCE`) as the scalable endpoint's AV entry.
//! - **Requests.** Receive contexts, in their progress's EQ step (not per message),
//!   read the scalable endpoint's EQ under a `try_lock` (a busy reader is not waited
//!   for: it routes for everyone) and route each request to the inbox of the
//!   receive context it names; each then answers the requests of its own inbox,
//!   opening the accepted MSG endpoint on its own core EQ and CQ. A request naming an
//!   index at or past the count is refused with reason "parameters" (the sender fails
//!   the peer's operations with `FI_ECONNREFUSED`, without retrying); one for a
//!   context that is not open, or when its inbox is full, with reason "refused".
//!   A peer's index is used only after it is checked against the count.
//! - **Progress.** A context is progressed in full, under its lock, by a read of one
//!   of its own CQs and by any drive that is not a CQ read (a counter or EQ read, a
//!   wait, the auto thread). A read of another CQ (another context's thread) takes a
//!   context's lock only with `try_lock`, and at most once per [`FOREIGN_INTERVAL`]:
//!   so threads that each read their own context's CQ do not wait for each other's
//!   locks on the data path, and a context nobody reads still answers connection
//!   requests (more slowly: its EQ step comes every 64th progress call, so within
//!   some tens of milliseconds).
//!
//! # Invariants
//!
//! - A context keeps its scalable endpoint alive; closing the scalable endpoint while
//!   a context is open is `FI_EBUSY` ([`ContextSlots`]).
//! - Each index is open at most once at a time (`FI_EBUSY`); a closing receive
//!   context refuses the requests left in its inbox.
//! - Lock order: a context's state, then the scalable endpoint's reader lock, then an
//!   inbox.
//!
//! Nothing here panics on application or peer input.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, TryLockError};

use ofi_core::attr::{RxAttr, TxAttr};
use ofi_kit::scalable::{context_counts, merge_rx, merge_tx, ContextSlots};

use super::shared_ctx::Role;
use super::*;
use crate::hello_ext::Extensions;

/// Connection requests one receive context's inbox holds at most; more are refused
/// ("refused": the sender retries as for any refused connection).
const INBOX_MAX: usize = 256;

/// How often at most a read of another CQ progresses a context (see the module docs).
pub(super) const FOREIGN_INTERVAL: Duration = Duration::from_millis(1);

/// A connection request waiting in a receive context's inbox.
struct Request {
    info: Box<Info>,
    data: Vec<u8>,
}

/// What a scalable endpoint keeps for its contexts.
pub(super) struct SepState {
    /// The info it was opened with (its contexts' attributes start from it).
    info: Info,
    /// Which contexts are open.
    slots: ContextSlots,
    /// Connection requests routed to each receive context, not answered yet.
    inbox: Vec<Mutex<VecDeque<Request>>>,
    /// Held (`try_lock`) by the receive context reading the EQ.
    reading: Mutex<()>,
}

/// A context's link to its scalable endpoint.
pub(super) struct CtxLink {
    /// The scalable endpoint (its listener, EQ, AV and name).
    sep: Arc<Shared>,
    /// A transmit context (else a receive one).
    tx: bool,
    /// Its index.
    index: usize,
    /// The identities of the CQs it is bound to, set at `fi_enable`.
    own_cqs: OnceLock<[usize; 2]>,
    /// When a read of another CQ last progressed it (nanoseconds since `origin`).
    foreign_at: AtomicU64,
    origin: Instant,
}

/// Whether an rxm object belongs to a scalable endpoint.
pub(super) enum Membership {
    /// An ordinary endpoint or a shared context.
    None,
    /// A scalable endpoint.
    Scalable(Box<SepState>),
    /// A context of a scalable endpoint.
    Context(CtxLink),
}

impl Drop for CtxLink {
    fn drop(&mut self) {
        if let Membership::Scalable(sep_state) = &self.sep.sep {
            sep_state.slots.release(self.tx, self.index);
            if let Some(q) = sep_state.inbox.get(self.index).filter(|_| !self.tx) {
                self.sep.refuse_waiting(q);
            }
        }
    }
}

impl Membership {
    /// A context's link, if this is one.
    #[inline]
    pub(super) fn context(&self) -> Option<&CtxLink> {
        match self {
            Membership::Context(link) => Some(link),
            _ => None,
        }
    }

    /// The receive context index this object answers connection requests for (0 for
    /// an ordinary endpoint).
    fn rx_index(&self) -> usize {
        match self {
            Membership::Context(link) if !link.tx => link.index,
            _ => 0,
        }
    }
}

impl CtxLink {
    /// Whether the drive now running is the read of a CQ this context is not bound to.
    #[inline]
    pub(super) fn foreign_drive(&self) -> bool {
        let Some(own) = self.own_cqs.get() else {
            return false;
        };
        ofi_kit::cq::reading_cq().is_some_and(|reading| !own.contains(&reading))
    }

    /// Whether a foreign drive may progress the context now (at most once per
    /// [`FOREIGN_INTERVAL`]); if so, the time is taken.
    fn foreign_due(&self) -> bool {
        let now = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let last = self.foreign_at.load(Ordering::Relaxed);
        now.saturating_sub(last) >= FOREIGN_INTERVAL.as_nanos() as u64
            && self
                .foreign_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

impl Endpoint {
    /// `fi_scalable_ep`: a scalable endpoint with `info`'s context counts, listening
    /// at `info.src_addr` (else at an address of the core's choosing).
    ///
    /// # Errors
    /// `FI_EINVAL` for context counts beyond [`crate::max_ep_ctx`] (1 over verbs); the
    /// core's errors opening the listener.
    pub fn open_scalable(
        dom: Arc<DomainShared>,
        info: &Info,
        engine: Arc<ProgressEngine>,
    ) -> Result<Endpoint> {
        let (ntx, nrx) = context_counts(NAME, info, crate::max_ep_ctx(&dom.core_info))?;
        let sep_state = SepState {
            info: info.clone(),
            slots: ContextSlots::new(ntx, nrx),
            inbox: (0..nrx).map(|_| Mutex::default()).collect(),
            reading: Mutex::new(()),
        };
        Self::open_as(
            dom,
            info,
            engine,
            Role::Scalable,
            Membership::Scalable(Box::new(sep_state)),
        )
    }

    /// `fi_tx_context`: transmit context `index`, the scalable endpoint's attributes
    /// with what `attr` sets.
    pub(super) fn tx_context(&self, index: i32, attr: &TxAttr) -> Result<Endpoint> {
        self.open_context(index, |info| {
            merge_tx(&mut info.tx_attr, attr);
            Role::TxCtx
        })
    }

    /// `fi_rx_context`: receive context `index`, the scalable endpoint's attributes
    /// with what `attr` sets.
    pub(super) fn rx_context(&self, index: i32, attr: &RxAttr) -> Result<Endpoint> {
        self.open_context(index, |info| {
            merge_rx(&mut info.rx_attr, attr);
            Role::RxCtx
        })
    }

    /// Open context `index` of this scalable endpoint; `set` adjusts the info and says
    /// which kind of context it is.
    fn open_context(&self, index: i32, set: impl FnOnce(&mut Info) -> Role) -> Result<Endpoint> {
        let Membership::Scalable(sep_state) = &self.sh.sep else {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: contexts are opened on a scalable endpoint"),
            ));
        };
        let mut info = sep_state.info.clone();
        let role = set(&mut info);
        let tx = role == Role::TxCtx;
        let index = sep_state.slots.claim(NAME, tx, index)?;
        // From here the link frees the index if opening fails.
        let link = CtxLink {
            sep: self.sh.clone(),
            tx,
            index,
            own_cqs: OnceLock::new(),
            foreign_at: AtomicU64::new(0),
            origin: Instant::now(),
        };
        // The context's own passive endpoint (it does not listen) on the scalable
        // endpoint's interface, at a port of its own.
        info.src_addr = info
            .src_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .map(|mut a| {
                a.set_port(0);
                Address::from(a)
            });
        let ep = Self::open_as(
            self.sh.dom.clone(),
            &info,
            self.sh.engine.clone(),
            role,
            Membership::Context(link),
        )?;
        if !tx {
            // A receive context answers to the scalable endpoint's name.
            ep.sh.me_bytes.set(self.sh.me_bytes.to_vec());
        }
        Ok(ep)
    }
}

impl Shared {
    /// `fi_close`: a scalable endpoint with open contexts is `FI_EBUSY`.
    pub(super) fn sep_close(&self) -> Result<()> {
        match &self.sep {
            Membership::Scalable(sep_state) => sep_state.slots.check_close(NAME),
            _ => Ok(()),
        }
    }

    /// `fi_setname` of a context (`FI_EINVAL`: its name is its scalable endpoint's) or
    /// of a scalable endpoint with open contexts (`FI_EBUSY`: they answer to the name).
    pub(super) fn check_rename(&self) -> Result<()> {
        match &self.sep {
            Membership::Scalable(sep_state) => sep_state.slots.check_close(NAME),
            Membership::Context(_) => Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: a context's name is its scalable endpoint's"),
            )),
            Membership::None => Ok(()),
        }
    }

    /// Whether this is a scalable endpoint.
    pub(super) fn is_scalable(&self) -> bool {
        matches!(self.sep, Membership::Scalable(_))
    }

    /// Before a context's bindings are frozen: the scalable endpoint's AV when it has
    /// none of its own.
    pub(super) fn inherit_av(&self, setup: &mut Setup) {
        if let Membership::Context(link) = &self.sep {
            if setup.av.is_none() {
                setup.av.clone_from(&lock(&link.sep.setup).av);
            }
        }
    }

    /// At `fi_enable` of a context: remember the CQs it reports to (see the module
    /// docs on progress).
    pub(super) fn note_ctx_cqs(&self, bound: &Bound) {
        if let Membership::Context(link) = &self.sep {
            let id = |b: &Option<ofi_kit::ep::CqBinding>| b.as_ref().map_or(0, |b| b.cq.id());
            let _ = link.own_cqs.set([id(&bound.txcq), id(&bound.rxcq)]);
        }
    }

    /// Progress (the kit's progress engine calls it): a context driven by the read of
    /// another CQ is progressed at most once per [`FOREIGN_INTERVAL`], and only if its
    /// lock is free (see the module docs).
    #[inline]
    pub(super) fn progress_now(&self, active: &Active) -> usize {
        if let Some(link) = self.sep.context() {
            if link.foreign_drive() {
                if !link.foreign_due() {
                    return 0;
                }
                return match self.state.try_lock() {
                    Ok(mut g) => self.progress_all(active, &mut g),
                    Err(TryLockError::Poisoned(p)) => {
                        self.progress_all(active, &mut p.into_inner())
                    }
                    Err(TryLockError::WouldBlock) => 0,
                };
            }
        }
        self.progress_all(active, &mut lock(&self.state))
    }

    /// The object whose passive endpoint answers the connection requests this one
    /// handles: a receive context's scalable endpoint, else itself.
    pub(super) fn listener(&self) -> &Shared {
        match &self.sep {
            Membership::Context(link) if !link.tx => &link.sep,
            _ => self,
        }
    }

    /// The handshake extensions of a connection request to receive context
    /// `rx_index` of a peer: the index when not 0, and a transmit context's alias (its
    /// scalable endpoint's name).
    pub(super) fn request_extensions(&self, rx_index: u16) -> Extensions {
        Extensions {
            rx_index: (rx_index != 0).then_some(rx_index),
            alias: match &self.sep {
                Membership::Context(link) => Some(link.sep.me_bytes.to_vec()),
                _ => None,
            },
        }
    }

    /// Whether a connection request for receive context `index` is this object's
    /// (receive context `index`, or an ordinary endpoint and index 0).
    pub(super) fn answers_index(&self, index: usize) -> bool {
        index == self.sep.rx_index()
    }

    /// A receive context's EQ step: route the scalable endpoint's new connection
    /// requests to their contexts' inboxes (unless another receive context is doing
    /// it), then answer this context's own. Returns the requests handled.
    pub(super) fn take_routed_requests(&self, active: &Active, state: &mut EpState) -> usize {
        let Some(link) = self.sep.context().filter(|l| !l.tx) else {
            return 0;
        };
        let sep = &*link.sep;
        let Membership::Scalable(sep_state) = &sep.sep else {
            return 0;
        };
        if let Ok(_reader) = sep_state.reading.try_lock() {
            sep.route_requests(sep_state);
        }
        let mine: Vec<Request> = sep_state
            .inbox
            .get(link.index)
            .map(|q| lock(q).drain(..).collect())
            .unwrap_or_default();
        let n = mine.len();
        for r in mine {
            self.handle_connreq(active, state, Some(r.info), &r.data);
        }
        n
    }

    /// Read the scalable endpoint's EQ (a bounded batch) and put each connection
    /// request in the inbox of the receive context it names, or refuse it.
    fn route_requests(&self, sep_state: &SepState) {
        for _ in 0..EQ_BUDGET {
            match self.core_eq.read() {
                Ok(ev) => {
                    if let (EqEvent::ConnReq, Some(info)) = (ev.event, ev.info) {
                        self.route(sep_state, info, ev.cm_data);
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    let _ = self.core_eq.readerr();
                }
                Err(_) => break,
            }
        }
    }

    /// At a scalable endpoint's end (its contexts are closed): refuse the connection
    /// requests its EQ and its inboxes still hold (one routed while its context was
    /// closing), whose connections would otherwise wait in the core until the fabric
    /// closes. Nothing for other objects.
    pub(super) fn refuse_unrouted(&self) {
        let Membership::Scalable(sep_state) = &self.sep else {
            return;
        };
        for q in &sep_state.inbox {
            self.refuse_waiting(q);
        }
        for _ in 0..INBOX_MAX {
            match self.core_eq.read() {
                Ok(ev) => {
                    if let (EqEvent::ConnReq, Some(info)) = (ev.event, ev.info) {
                        self.reject(info.handle, Reason::Refused);
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    let _ = self.core_eq.readerr();
                }
                Err(_) => break,
            }
        }
    }

    /// Refuse (reason "refused") the requests waiting in the inbox `q` of this scalable
    /// endpoint.
    fn refuse_waiting(&self, q: &Mutex<VecDeque<Request>>) {
        let left: Vec<Request> = lock(q).drain(..).collect();
        for r in left {
            self.reject(r.info.handle, Reason::Refused);
        }
    }

    /// Route one connection request (see [`Shared::route_requests`]).
    fn route(&self, sep_state: &SepState, info: Box<Info>, data: Vec<u8>) {
        let from = info
            .dest_addr
            .as_ref()
            .map(|a| a.to_bytes())
            .unwrap_or_default();
        let handle = info.handle;
        let ext = match Hello::parse(&data).and_then(|h| Extensions::parse(&data, h.addr.len())) {
            Ok(ext) => ext,
            Err(e) => {
                return self.refuse(
                    handle,
                    &from,
                    Reason::Malformed,
                    &format!("malformed handshake: {e}"),
                )
            }
        };
        let (index, count) = (ext.index(), sep_state.inbox.len());
        if index >= count {
            return self.refuse(
                handle,
                &from,
                Reason::Params,
                &format!(
                    "peer addresses receive context {index}, the scalable endpoint has {count}"
                ),
            );
        }
        if !sep_state.slots.rx_is_open(index) {
            return self.refuse(
                handle,
                &from,
                Reason::Refused,
                &format!("receive context {index} is not open"),
            );
        }
        let mut q = lock(&sep_state.inbox[index]);
        if q.len() >= INBOX_MAX {
            drop(q);
            return self.refuse(
                handle,
                &from,
                Reason::Refused,
                &format!("receive context {index} has {INBOX_MAX} requests waiting"),
            );
        }
        q.push_back(Request { info, data });
    }
}
