//! Shared receive and transmit contexts (`fi_srx_context`, `fi_stx_context`,
//! `FI_SHARED_CONTEXT`).
//!
//! # Shared receive context
//!
//! A shared receive context is an rxm object of its own ([`Role::Srx`]) whose tag
//! matcher holds the receives posted to it, and only those: the endpoints bound to it
//! keep their own connections and, in their own matchers, only the messages that
//! arrived before a receive for them was posted (unexpected messages, which hold the
//! sender's credit on the endpoint's connection). So the posted receives, and the
//! memory they hold, do not grow with the endpoints.
//!
//! - A message arriving at a bound endpoint is matched against the context's receives
//!   (under the endpoint's lock, then the context's); without a match it is kept
//!   unexpected by the endpoint.
//! - A receive posted to the context (or to a bound endpoint, which hands it to its
//!   context) is queued in the context; then every bound endpoint holding unexpected
//!   messages offers them to the context's receives, in posting order (under the
//!   endpoint's lock, then the context's, held together, so no message arriving
//!   meanwhile misses a receive).
//! - Completions are reported with the bindings of the endpoint the message arrived
//!   at (its receive CQ and counter, its AV for `FI_SOURCE`); a receive cancelled on
//!   the context is reported with the bindings of the first endpoint enabled on it.
//! - The context takes receives once an endpoint bound to it is enabled (before,
//!   `FI_EOPBADSTATE`), and no transmit operation (`FI_EOPBADSTATE`). It does not take
//!   `FI_MULTI_RECV` buffers (`FI_EBADFLAGS`): a multi-receive buffer could not be
//!   offered to several endpoints' unexpected messages in turn; nor `FI_PEEK`,
//!   `FI_CLAIM` or `FI_DISCARD` (`FI_EBADFLAGS`: the unexpected messages are the
//!   endpoints', not the context's).
//!
//! # Shared transmit context
//!
//! rxm's transmit queues are per connection, and connections per endpoint: a shared
//! transmit context is accepted and bound ([`Role::Stx`]), and each endpoint bound to
//! it sends on its own connections, within its own `tx_size`. Every data call on the
//! context itself is `FI_EOPBADSTATE`.
//!
//! A shared context takes no bindings (`FI_EINVAL`, from kit's glue: they go to its
//! endpoints), and `fi_enable` does nothing to it.
//!
//! # Invariants
//!
//! - Lock order: an endpoint's state, then its context's state.
//! - A bound endpoint's matcher holds no posted receive outside
//!   [`Shared::offer_unexpected`].
//! - A shared context holds the same core objects as an endpoint, but its passive
//!   endpoint does not listen: nobody can connect to it.
//!
//! Nothing here panics.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::ep::Bound;
use ofi_kit::epglue::SharedCtxAttr;
use ofi_kit::progress::ProgressEngine;
use ofi_kit::tagmatch::{PostAction, PostedRecv};

use super::{lock, Endpoint, IoList, Shared};
use crate::fabric::DomainShared;
use crate::NAME;

/// What an rxm object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// An endpoint (`fi_endpoint`).
    Endpoint,
    /// A shared receive context (`fi_srx_context`).
    Srx,
    /// A shared transmit context (`fi_stx_context`).
    Stx,
    /// A scalable endpoint (`fi_scalable_ep`, see `scalable`).
    Scalable,
    /// A scalable endpoint's transmit context (`fi_tx_context`): no receive.
    TxCtx,
    /// A scalable endpoint's receive context (`fi_rx_context`): no transmit.
    RxCtx,
}

impl Role {
    /// Whether the object's passive endpoint listens (peers connect to it): an
    /// endpoint's and a scalable endpoint's.
    pub(super) fn listens(self) -> bool {
        matches!(self, Role::Endpoint | Role::Scalable)
    }
}

/// An object's role and its shared-context bindings.
pub(super) struct CtxState {
    role: Role,
    /// An endpoint's shared contexts, bound before `fi_enable`.
    binds: Mutex<Binds>,
    /// A shared receive context's enabled endpoints (they offer it their unexpected
    /// messages when a receive is posted).
    members: Mutex<Vec<Weak<Shared>>>,
    /// An endpoint's shared receive context, once the endpoint is enabled: its matcher
    /// holds the receives, the endpoint's only the unexpected messages.
    joined: OnceLock<Arc<Shared>>,
}

/// The shared contexts bound to an endpoint.
#[derive(Default)]
struct Binds {
    srx: Option<Arc<Shared>>,
    stx: Option<Arc<Shared>>,
}

impl CtxState {
    /// The state of a new object of role `role`, bound to nothing.
    pub(super) fn new(role: Role) -> CtxState {
        CtxState {
            role,
            binds: Mutex::default(),
            members: Mutex::default(),
            joined: OnceLock::new(),
        }
    }

    /// An endpoint's shared receive context, once the endpoint is enabled with one.
    #[inline]
    pub(super) fn srx(&self) -> Option<&Arc<Shared>> {
        self.joined.get()
    }

    /// Whether receives posted here go to a shared receive context's matcher (or are
    /// refused): a context's, and those of an endpoint enabled with one.
    #[inline]
    pub(super) fn routes_recv(&self) -> bool {
        !matches!(self.role, Role::Endpoint | Role::RxCtx) || self.joined.get().is_some()
    }

    /// Whether the object is a shared context (not an endpoint, nor a scalable one or
    /// its context).
    pub(super) fn is_context(&self) -> bool {
        matches!(self.role, Role::Srx | Role::Stx)
    }
}

/// The refusal of a data call the object does not take.
fn bad_state(what: &str) -> Error {
    Error::new(Errno::EOPBADSTATE, format!("{NAME}: {what}"))
}

impl Endpoint {
    /// `fi_srx_context` or `fi_stx_context`: a shared receive or transmit context with
    /// the attributes `attr` names (see the module docs).
    ///
    /// # Errors
    /// The core's errors opening the context's objects.
    pub fn open_shared_ctx(
        dom: Arc<DomainShared>,
        attr: SharedCtxAttr<'_>,
        engine: Arc<ProgressEngine>,
    ) -> Result<Endpoint> {
        let role = if attr.is_rx() { Role::Srx } else { Role::Stx };
        let info = attr.info();
        Self::open_as(dom, &info, engine, role, super::scalable::Membership::None)
    }

    /// Refuse a transmit operation on a shared context or a scalable endpoint's
    /// receive context (`FI_EOPBADSTATE`).
    pub(super) fn refuse_tx_on_context(&self) -> Result<()> {
        if !matches!(self.sh.ctx.role, Role::Endpoint | Role::TxCtx) {
            return Err(bad_state(
                "a shared context or a receive context takes no transmit operation",
            ));
        }
        Ok(())
    }
}

impl Shared {
    /// `fi_ep_bind` of a shared context (see [`ofi_kit::layered::LayeredEndpoint`]).
    pub(super) fn bind_shared_ctx(&self, ctx: &dyn Any, srx: bool, flags: OpFlags) -> Result<()> {
        let want = if srx { Role::Srx } else { Role::Stx };
        let ctx = ctx
            .downcast_ref::<Endpoint>()
            .filter(|c| c.sh.ctx.role == want);
        let mut b = lock(&self.ctx.binds);
        let slot = if srx { &mut b.srx } else { &mut b.stx };
        ofi_kit::shared_ctx::check_bind(NAME, srx, ctx.is_some(), flags, slot.is_some())?;
        // Checked: `ctx` is the context.
        *slot = ctx.map(|c| c.sh.clone());
        Ok(())
    }

    /// At `fi_enable` of an endpoint (its bindings frozen into `bound`): join its shared
    /// receive context, if any, which takes this endpoint's receive bindings if it has
    /// none yet.
    pub(super) fn join_srx(&self, bound: &Bound) {
        let Some(srx) = lock(&self.ctx.binds).srx.clone() else {
            return;
        };
        let _ = srx.active.set(Bound {
            av: bound.av.clone(),
            txcq: None,
            rxcq: bound.rxcq.clone(),
            txcntr: None,
            rxcntr: bound.rxcntr.clone(),
            wcntr: None,
            rcntr: None,
        });
        let mut members = lock(&srx.ctx.members);
        members.retain(|m| m.strong_count() > 0);
        members.push(self.this.clone());
        drop(members);
        let _ = self.ctx.joined.set(srx);
    }

    /// A receive posted where [`CtxState::routes_recv`]: to a shared receive context
    /// (this one or the endpoint's); a shared transmit context refuses it.
    #[cold]
    #[inline(never)]
    pub(super) fn post_shared_recv(&self, recv: &PostedRecv<IoList>) -> Result<()> {
        match (self.ctx.role, self.ctx.joined.get()) {
            (Role::Srx, _) => self.post_to_srx(recv.clone()),
            (Role::Endpoint | Role::RxCtx, Some(srx)) => srx.post_to_srx(recv.clone()),
            _ => Err(bad_state(
                "a shared transmit context or a transmit context takes no receive",
            )),
        }
    }

    /// A receive posted to this shared receive context: queued, then offered to the
    /// unexpected messages of every bound endpoint.
    fn post_to_srx(&self, recv: PostedRecv<IoList>) -> Result<()> {
        let unsupported = OpFlags::MULTI_RECV | OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD;
        if recv.flags.intersects(unsupported) {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!(
                    "{NAME}: a shared receive context takes no FI_MULTI_RECV buffer and no \
                     FI_PEEK / FI_CLAIM / FI_DISCARD"
                ),
            ));
        }
        {
            let mut state = lock(&self.state);
            // The context's matcher has no unexpected message: the receive is queued.
            if !matches!(state.matcher.post(recv)?, PostAction::Queued) {
                ofi_core::ofi_warn!(
                    NAME,
                    "ep_data",
                    "a shared receive context matched a message"
                );
            }
        }
        let members: Vec<Arc<Shared>> = lock(&self.ctx.members)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for ep in members {
            ep.offer_unexpected(self);
        }
        Ok(())
    }

    /// Offer this endpoint's unexpected messages to the receives of its shared receive
    /// context `srx`: each receive, in posting order, takes the oldest unexpected
    /// message it matches; the others go back to the context in the same order.
    fn offer_unexpected(&self, srx: &Shared) {
        let Some(active) = self.active.get() else {
            return;
        };
        let mut g = lock(&self.state);
        let state = &mut *g;
        if state.matcher.unexpected_len() == 0 {
            return;
        }
        let mut pool = lock(&srx.state);
        let mut rest: std::collections::VecDeque<PostedRecv<IoList>> =
            pool.matcher.drain_posted().collect();
        while state.matcher.unexpected_len() > 0 && state.matcher.can_post() {
            let Some(recv) = rest.pop_front() else {
                break;
            };
            if let Err(e) = self.post_locked(active, state, recv) {
                ofi_core::ofi_warn!(NAME, "ep_data", "offering a shared receive: {e}");
            }
        }
        // Those queued here (no unexpected message matched them), then those not
        // tried: posting order.
        for recv in state.matcher.drain_posted().chain(rest) {
            if let Err(e) = pool.matcher.post(recv) {
                ofi_core::ofi_warn!(NAME, "ep_data", "returning a shared receive: {e}");
            }
        }
    }
}
