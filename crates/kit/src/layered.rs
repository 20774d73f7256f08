//! The endpoint glue of a utility provider layered over a core provider (rxm over MSG,
//! rxd over DGRAM): binding before `fi_enable`, enabling, cancelling a receive,
//! `FI_OPT_MIN_MULTI_RECV`, the endpoint's name, the queue room left, and the plain
//! parts of kit's [`DataPath`](crate::dataops::DataPath). A utility's endpoint
//! implements [`LayeredEndpoint`] (where its bindings, matcher and engine live) and
//! writes [`layered_endpoint_ops!`](crate::layered_endpoint_ops) in its `EndpointOps`
//! impl and [`layered_data_path!`](crate::layered_data_path) in its `DataPath` impl;
//! the behaviour below is then the same for every utility, its messages prefixed with
//! the provider's name ([`LayeredEndpoint::NAME`]).
//!
//! # Invariants
//!
//! - Binding after `fi_enable` is `FI_EOPBADSTATE`; `fi_enable` freezes the bindings
//!   once (a second call is a no-op) and kicks the progress engine.
//! - Data calls before `fi_enable` are `FI_EOPBADSTATE` ([`active`]).
//! - `fi_cancel` of a receive completes it with `FI_ECANCELED` on the receive CQ; of
//!   anything else is `FI_ENOENT`.
//!
//! Nothing here panics; a poisoned lock is taken over (the state stays consistent under
//! every lock holder's own rules).

use std::any::Any;
use std::sync::{Mutex, OnceLock};

use ofi_core::provider::{BindTarget, DomainOps, FabricOps};
use ofi_core::{Errno, Error, OpFlags, Result};

use crate::av::SharedAv;
use crate::cntr::KitCntr;
use crate::cq::KitCq;
use crate::ep::{BindRules, Bindings, Bound};
use crate::eq::KitEq;
use crate::iov::IoList;
use crate::progress::ProgressEngine;
use crate::tagmatch::{PostedRecv, TagMatcher, ANY_SRC};

/// Where a layered utility endpoint keeps what the common glue works on.
pub trait LayeredEndpoint {
    /// The provider's name (`ofi_rxm`), the prefix of every message.
    const NAME: &'static str;
    /// The bindings made before `fi_enable`.
    fn bindings(&self) -> &Mutex<Bindings>;
    /// What `fi_enable` froze (set once).
    fn bound(&self) -> &OnceLock<Bound>;
    /// What may be bound beyond CQs, counters and an AV.
    fn bind_rules(&self) -> &BindRules;
    /// The progress engine driving the endpoint.
    fn engine(&self) -> &ProgressEngine;
    /// Run `f` on the endpoint's tag matcher, under the endpoint's lock.
    fn with_matcher<R>(&self, f: impl FnOnce(&mut dyn RecvQueue) -> R) -> R;
    /// Transmit operations the endpoint can still take.
    fn tx_room(&self) -> usize;
    /// The endpoint's name (`fi_getname`).
    fn name_bytes(&self) -> Vec<u8>;
    /// Default transmit operation flags (`fi_tx_attr.op_flags`).
    fn tx_op_flags(&self) -> OpFlags;
    /// Default receive operation flags (`fi_rx_attr.op_flags`).
    fn rx_op_flags(&self) -> OpFlags;
    /// Whether receives honour their source address (`FI_DIRECTED_RECV`).
    fn directed(&self) -> bool;
    /// A counter bound with `FI_REMOTE_READ` / `FI_REMOTE_WRITE` (`flags` holds only
    /// those): an endpoint that counts remote accesses (`FI_RMA_EVENT`) keeps it; the
    /// default refuses, as the kit's bindings do (`FI_ENOSYS`).
    ///
    /// # Errors
    /// `FI_ENOSYS` by default; the endpoint's own refusals.
    fn bind_remote_cntr(&self, _cntr: &KitCntr, _flags: OpFlags) -> Result<()> {
        Err(Error::new(
            Errno::ENOSYS,
            format!(
                "{}: remote-access counters (FI_RMA_EVENT) are not supported",
                Self::NAME
            ),
        ))
    }
    /// `fi_ep_bind` of a shared context `ctx` (the provider's endpoint type, as `Any`;
    /// `srx`: a shared receive context, else a shared transmit context): the default
    /// refuses (`FI_ENOSYS`).
    ///
    /// # Errors
    /// `FI_ENOSYS` by default; the endpoint's own refusals.
    fn bind_shared_ctx(&self, _ctx: &dyn Any, _srx: bool, _flags: OpFlags) -> Result<()> {
        Err(Error::new(
            Errno::ENOSYS,
            format!("{}: shared contexts are not supported", Self::NAME),
        ))
    }
    /// Whether this is a shared context (`fi_stx_context`, `fi_srx_context`): it takes
    /// no bindings (`FI_EINVAL`: they go to its endpoints) and `fi_enable` does nothing
    /// to it. `false` by default.
    fn is_shared_ctx(&self) -> bool {
        false
    }
    /// `fi_enable`, once the bindings are frozen into `bound` and before they take
    /// effect: an error fails the call and leaves the endpoint disabled. `Ok` by default.
    ///
    /// # Errors
    /// The endpoint's own.
    fn on_enable(&self, _bound: &Bound) -> Result<()> {
        Ok(())
    }
    /// `fi_setname` on an endpoint not enabled yet ([`setname`], which refuses it later): the
    /// endpoint takes the name `addr` (what it will bind), or refuses bytes that are no
    /// address of its format (`FI_EINVAL`). The default answers `FI_ENOSYS`.
    ///
    /// # Errors
    /// `FI_ENOSYS` by default; `FI_EINVAL` for a malformed name; the core's errors
    /// binding the new name.
    fn rename(&self, _addr: &[u8]) -> Result<()> {
        Err(Error::new(
            Errno::ENOSYS,
            format!("{}: fi_setname is not supported", Self::NAME),
        ))
    }
    /// Whether this is a scalable endpoint (`fi_scalable_ep`): it binds an AV only
    /// (anything else is `FI_EINVAL`: CQs and counters go to its contexts), and
    /// `fi_enable` only checks that the AV is bound (`FI_ENOAV`). `false` by default.
    fn is_scalable(&self) -> bool {
        false
    }
    /// At `fi_enable`, before the bindings `setup` are frozen: what the endpoint takes
    /// from elsewhere (a scalable endpoint's context, its endpoint's AV when it has none
    /// of its own). Nothing by default.
    fn inherit(&self, _setup: &mut Bindings) {}
}

/// An endpoint's name that `fi_setname` may replace until the endpoint is enabled
/// ([`LayeredEndpoint::rename`]); read by `fi_getname` and the endpoint's own cold
/// paths (handshakes), never per message.
#[derive(Debug)]
pub struct SettableName(Mutex<Vec<u8>>);

impl SettableName {
    /// A name, first `bytes`.
    pub fn new(bytes: Vec<u8>) -> SettableName {
        SettableName(Mutex::new(bytes))
    }

    /// The name now (a copy).
    pub fn to_vec(&self) -> Vec<u8> {
        lock(&self.0).clone()
    }

    /// Replace the name.
    pub fn set(&self, bytes: Vec<u8>) {
        *lock(&self.0) = bytes;
    }
}

/// What the glue asks of an endpoint's matcher, whatever it keeps for unexpected
/// messages.
pub trait RecvQueue {
    /// Take back the receive posted with `context`.
    fn cancel(&mut self, context: usize) -> Option<PostedRecv<IoList>>;
    /// The matcher's `FI_OPT_MIN_MULTI_RECV`.
    fn min_multi_recv(&self) -> usize;
    /// Set `FI_OPT_MIN_MULTI_RECV`.
    fn set_min_multi_recv(&mut self, min: usize);
    /// Receives it can still take.
    fn room(&self) -> usize;
}

impl<U> RecvQueue for TagMatcher<IoList, U> {
    fn cancel(&mut self, context: usize) -> Option<PostedRecv<IoList>> {
        TagMatcher::cancel(self, context)
    }

    fn min_multi_recv(&self) -> usize {
        self.config().min_multi_recv
    }

    fn set_min_multi_recv(&mut self, min: usize) {
        TagMatcher::set_min_multi_recv(self, min);
    }

    fn room(&self) -> usize {
        self.config().max_posted.saturating_sub(self.posted_len())
    }
}

use crate::wait::lock;

/// `fi_ep_bind`: refused after `fi_enable`, else the kit's rules.
///
/// # Errors
/// `FI_EOPBADSTATE` after `fi_enable`; the kit's binding errors.
pub fn bind<E, F>(ep: &E, target: BindTarget<'_, F>, flags: OpFlags) -> Result<()>
where
    E: LayeredEndpoint,
    F: FabricOps<Eq = KitEq>,
    F::Domain: DomainOps<F, Cq = KitCq, Cntr = KitCntr, Av = SharedAv>,
{
    if ep.is_shared_ctx() {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{}: a shared context takes no bindings (bind them to its endpoints)",
                E::NAME
            ),
        ));
    }
    if ep.bound().get().is_some() {
        return Err(Error::new(
            Errno::EOPBADSTATE,
            format!("{}: bind after fi_enable", E::NAME),
        ));
    }
    if ep.is_scalable() && !matches!(target, BindTarget::Av(_)) {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "{}: a scalable endpoint binds an AV only (bind CQs and counters to its \
                 contexts)",
                E::NAME
            ),
        ));
    }
    let remote = OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE;
    if let BindTarget::Cntr(c) = &target {
        if flags.intersects(remote) {
            // The remote events to the endpoint first (an endpoint without remote
            // counters refuses the whole bind, binding nothing), then the local ones to
            // the kit's bindings.
            ep.bind_remote_cntr(c, flags & remote)?;
            let local = flags - remote;
            if local.is_empty() {
                return Ok(());
            }
            return lock(ep.bindings()).bind(BindTarget::<F>::Cntr(*c), local, ep.bind_rules());
        }
    }
    match &target {
        BindTarget::Srx(c) => return ep.bind_shared_ctx(*c, true, flags),
        BindTarget::Stx(c) => return ep.bind_shared_ctx(*c, false, flags),
        _ => {}
    }
    lock(ep.bindings()).bind(target, flags, ep.bind_rules())
}

/// `fi_enable`: freeze the bindings (once, after [`LayeredEndpoint::inherit`]) and
/// start progress; of a scalable endpoint, check that its AV is bound.
///
/// # Errors
/// What [`Bindings::freeze`] refuses (no CQ, no AV, …); `FI_ENOAV` for a scalable
/// endpoint without an AV.
pub fn enable<E: LayeredEndpoint>(ep: &E) -> Result<()> {
    if ep.is_shared_ctx() || ep.bound().get().is_some() {
        return Ok(());
    }
    let mut setup = lock(ep.bindings());
    if ep.is_scalable() {
        if setup.av.is_none() {
            return Err(Error::new(
                Errno::ENOAV,
                format!(
                    "{}: bind an AV to the scalable endpoint before fi_enable",
                    E::NAME
                ),
            ));
        }
        return Ok(());
    }
    ep.inherit(&mut setup);
    let bound = setup.freeze(E::NAME)?;
    ep.on_enable(&bound)?;
    let _ = ep.bound().set(bound);
    ep.engine().kick();
    Ok(())
}

/// `fi_setname` of an endpoint that implements [`LayeredEndpoint::rename`] (its
/// `EndpointOps::setname` calls this; one that does not keeps the core's `FI_ENOSYS`
/// answer whatever its state): before `fi_enable`, the rename; after it,
/// `FI_EOPBADSTATE` with the name left as it was. A shared context has no name of its
/// own (`FI_EINVAL`). Serialised with [`enable`] by the bindings' lock, so a name is
/// never set on an endpoint being enabled.
///
/// # Errors
/// `FI_EOPBADSTATE` after `fi_enable`; `FI_EINVAL` on a shared context; what
/// [`LayeredEndpoint::rename`] refuses.
pub fn setname<E: LayeredEndpoint>(ep: &E, addr: &[u8]) -> Result<()> {
    if ep.is_shared_ctx() {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{}: a shared context has no name to set", E::NAME),
        ));
    }
    let _setup = lock(ep.bindings());
    if ep.bound().get().is_some() {
        return Err(Error::new(
            Errno::EOPBADSTATE,
            format!("{}: fi_setname after fi_enable", E::NAME),
        ));
    }
    ep.rename(addr)
}

/// What `fi_enable` froze.
///
/// # Errors
/// `FI_EOPBADSTATE` before `fi_enable`.
pub fn active<E: LayeredEndpoint>(ep: &E) -> Result<&Bound> {
    ep.bound().get().ok_or_else(|| {
        Error::new(
            Errno::EOPBADSTATE,
            format!("{}: endpoint not enabled", E::NAME),
        )
    })
}

/// `fi_cancel`: take back the receive posted with `context`.
///
/// # Errors
/// `FI_EOPBADSTATE` before `fi_enable`; `FI_ENOENT` when no receive has that context.
pub fn cancel<E: LayeredEndpoint>(ep: &E, context: usize) -> Result<()> {
    let bound = active(ep)?;
    match ep.with_matcher(|m| m.cancel(context)) {
        Some(r) => {
            bound.cancelled(&r);
            Ok(())
        }
        None => Err(Error::new(
            Errno::ENOENT,
            format!("{}: no such operation to cancel", E::NAME),
        )),
    }
}

/// `fi_getopt` (`FI_OPT_MIN_MULTI_RECV` only).
///
/// # Errors
/// As [`crate::ep::getopt_min_multi_recv`].
pub fn getopt<E: LayeredEndpoint>(
    ep: &E,
    level: i32,
    optname: i32,
    optval: &mut [u8],
) -> Result<usize> {
    crate::ep::getopt_min_multi_recv(E::NAME, level, optname, optval, || {
        ep.with_matcher(|m| m.min_multi_recv())
    })
}

/// `fi_setopt` (`FI_OPT_MIN_MULTI_RECV` only).
///
/// # Errors
/// As [`crate::ep::setopt_min_multi_recv`].
pub fn setopt<E: LayeredEndpoint>(ep: &E, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
    let v = crate::ep::setopt_min_multi_recv(E::NAME, level, optname, optval)?;
    ep.with_matcher(|m| m.set_min_multi_recv(v));
    Ok(())
}

/// `fi_rx_size_left`: receives the matcher can still take.
pub fn rx_size_left<E: LayeredEndpoint>(ep: &E) -> usize {
    ep.with_matcher(|m| m.room())
}

/// The source a receive matches: as given when receives are directed, else any.
pub fn recv_src<E: LayeredEndpoint>(ep: &E, src: u64) -> u64 {
    if ep.directed() {
        src
    } else {
        ANY_SRC
    }
}

/// Inside `impl EndpointOps<Fabric> for Endpoint`, given the fabric type: `bind`, `enable`, `cancel`,
/// `getopt`, `setopt`, `getname`, `rx_size_left`, `tx_size_left` through
/// [`LayeredEndpoint`], and the data calls of [`endpoint_data_ops!`](crate::endpoint_data_ops).
#[macro_export]
macro_rules! layered_endpoint_ops {
    ($fabric:ty) => {
        fn bind(
            &self,
            target: $crate::core::provider::BindTarget<'_, $fabric>,
            flags: $crate::core::OpFlags,
        ) -> $crate::core::Result<()> {
            $crate::layered::bind(self, target, flags)
        }

        fn enable(&self) -> $crate::core::Result<()> {
            $crate::layered::enable(self)
        }

        fn cancel(&self, context: usize) -> $crate::core::Result<()> {
            $crate::layered::cancel(self, context)
        }

        fn getopt(
            &self,
            level: i32,
            optname: i32,
            optval: &mut [u8],
        ) -> $crate::core::Result<usize> {
            $crate::layered::getopt(self, level, optname, optval)
        }

        fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> $crate::core::Result<()> {
            $crate::layered::setopt(self, level, optname, optval)
        }

        fn getname(&self) -> $crate::core::Result<Vec<u8>> {
            Ok($crate::layered::LayeredEndpoint::name_bytes(self))
        }

        fn rx_size_left(&self) -> $crate::core::Result<usize> {
            Ok($crate::layered::rx_size_left(self))
        }

        fn tx_size_left(&self) -> $crate::core::Result<usize> {
            Ok($crate::layered::LayeredEndpoint::tx_room(self))
        }

        $crate::endpoint_data_ops!();
    };
}

/// Inside `impl DataPath for Endpoint`: `NAME`, `Active`, `active`, `tx_op_flags`,
/// `rx_op_flags` and `recv_src` through [`LayeredEndpoint`].
#[macro_export]
macro_rules! layered_data_path {
    () => {
        const NAME: &'static str = <Self as $crate::layered::LayeredEndpoint>::NAME;
        type Active = $crate::ep::Bound;

        fn active(&self) -> $crate::core::Result<&$crate::ep::Bound> {
            $crate::layered::active(self)
        }

        fn tx_op_flags(&self) -> $crate::core::OpFlags {
            $crate::layered::LayeredEndpoint::tx_op_flags(self)
        }

        fn rx_op_flags(&self) -> $crate::core::OpFlags {
            $crate::layered::LayeredEndpoint::rx_op_flags(self)
        }

        fn recv_src(&self, src: u64) -> u64 {
            $crate::layered::recv_src(self, src)
        }
    };
}
