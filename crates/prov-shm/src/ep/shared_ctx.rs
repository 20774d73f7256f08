//! Shared transmit and receive contexts (`fi_stx_context`, `fi_srx_context`,
//! `FI_SHARED_CONTEXT`).
//!
//! # Shared receive context
//!
//! A shared receive context is a receiving endpoint of its own: a region `SRX`, a tag
//! matcher and its receive progress. An endpoint bound to it keeps its own address
//! (`fi_shm://EP`, its region name) but, when it is enabled, that name is made a second
//! link to the context's region (`/dev/shm/EP` → the inode of `/dev/shm/SRX`, swapped in
//! with one `rename`). A peer that sends to the endpoint maps the context's region,
//! claims a ring there, and its message is matched against the receives posted to the
//! context: the posted receives, and the memory they hold, do not grow with the
//! endpoints. The endpoint's own region stays mapped (it names the endpoint as a
//! sender) but nobody reaches it any more.
//!
//! The context reports a message with the receive bindings of the endpoint its sender
//! addressed (fi_endpoint(3): the endpoint's receive CQ and counter, and its AV for
//! `FI_SOURCE`): a sender leaves the digest of the name it opened in its ring
//! (`region::name_digest`), and the context, attaching the ring, finds the endpoint
//! of that name among those enabled on it. A ring without a known digest (an
//! endpoint's name changed after the sender connected, say) reports with the first
//! endpoint's bindings. Receives are posted to the context (`fi_recv` on it), not to
//! the endpoints; a posted receive's completion goes to the CQ of the endpoint the
//! message that filled it was addressed to.
//!
//! # Shared transmit context
//!
//! shm keeps a connection per destination and no per-endpoint transmit queues worth
//! sharing: a shared transmit context is accepted and bound (it holds a small region
//! that names it), and each endpoint bound to it sends on its own connections.
//!
//! # Invariants
//!
//! - The shared contexts' own data calls: receives on a shared receive context once an
//!   endpoint bound to it is enabled (before, `FI_EOPBADSTATE`); none on a shared
//!   transmit context (`FI_EOPBADSTATE`).
//! - A link is removed when the endpoint closes (its region name is unlinked as
//!   always); the context's region lives while a link or a mapping does.
//!
//! Nothing here panics.

use std::sync::Arc;

use ofi_core::provider::BindTarget;
use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::ep::Bound;
use ofi_kit::epglue::SharedCtxAttr;
use ofi_kit::mr::MrTable;
use ofi_kit::progress::ProgressEngine;
use ofi_kit::wait::lock;

use super::remote_cntr::{RemoteCntrs, REMOTE_EVENTS};
use super::scalable::{Role, IDLE_GEOMETRY};
use super::{create_auto_named, Endpoint, Shared};
use crate::fabric::Fabric;
use crate::region::name_digest;
use crate::{Settings, NAME};

/// The bindings shm keeps itself, beside the kit's: shared contexts and remote
/// counters (`remote_cntr`).
#[derive(Debug, Default)]
pub(crate) struct SharedBindings {
    /// The shared receive context.
    srx: Option<Arc<Shared>>,
    /// Whether a shared transmit context is bound.
    stx: bool,
    /// Counters of remote accesses.
    pub(super) remote: RemoteCntrs,
}

ofi_kit::debug_fields!(Shared, |sh| { name: sh.name });

impl Endpoint {
    /// `fi_srx_context` or `fi_stx_context`: a receiving endpoint, or a token endpoint
    /// (see the module docs), with the attributes `attr` names.
    ///
    /// # Errors
    /// Failures creating its region.
    pub fn open_shared_ctx(
        settings: Settings,
        attr: SharedCtxAttr<'_>,
        engine: Arc<ProgressEngine>,
        mr: Arc<MrTable>,
    ) -> Result<Endpoint> {
        let (role, geometry) = if attr.is_rx() {
            (Role::Srx, settings.geometry)
        } else {
            (Role::Stx, IDLE_GEOMETRY)
        };
        let region = create_auto_named(geometry, settings.auth)?;
        Endpoint::with_region(settings, &attr.info(), engine, mr, region, role)
    }

    /// `fi_ep_bind` of a shared context (`Some`), or of anything to a shared context
    /// (`Some`: refused); `None` for the other binds.
    pub(super) fn shared_ctx_bind(
        &self,
        target: &BindTarget<'_, Fabric>,
        flags: OpFlags,
    ) -> Option<Result<()>> {
        if matches!(self.role, Role::Srx | Role::Stx) {
            return Some(Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: a shared context takes no bindings (bind them to its endpoints)"),
            )));
        }
        let (ctx, srx) = match target {
            BindTarget::Srx(c) => (*c, true),
            BindTarget::Stx(c) => (*c, false),
            BindTarget::Cntr(c) if flags.intersects(REMOTE_EVENTS) => {
                return Some(self.bind_remote_cntr(c, flags));
            }
            _ => return None,
        };
        Some(self.bind_shared(ctx, srx, flags))
    }

    fn bind_shared(&self, ctx: &Endpoint, srx: bool, flags: OpFlags) -> Result<()> {
        let want = if srx { Role::Srx } else { Role::Stx };
        let is_kind = std::mem::discriminant(&ctx.role) == std::mem::discriminant(&want);
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: bind after fi_enable"),
            ));
        }
        let mut b = lock(&self.shared_ctx);
        let taken = if srx { b.srx.is_some() } else { b.stx };
        ofi_kit::shared_ctx::check_bind(NAME, srx, is_kind, flags, taken)?;
        if srx {
            b.srx = Some(ctx.sh.clone());
        } else {
            b.stx = true;
        }
        Ok(())
    }

    /// A counter bind naming remote events: those are kept here, the others go to the
    /// kit's bindings (checked there first, so a refused bind binds nothing).
    fn bind_remote_cntr(&self, c: &ofi_kit::cntr::KitCntr, flags: OpFlags) -> Result<()> {
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: bind after fi_enable"),
            ));
        }
        let local = flags - REMOTE_EVENTS;
        let mut own = lock(&self.shared_ctx);
        // Check the remote part before the kit binds the local one.
        own.remote.clone().bind(NAME, c, flags & REMOTE_EVENTS)?;
        if !local.is_empty() {
            lock(&self.sh.setup).bind(BindTarget::<Fabric>::Cntr(c), local, &super::BIND_RULES)?;
        }
        own.remote.bind(NAME, c, flags & REMOTE_EVENTS)
    }

    /// `fi_enable` of a shared context: nothing to do (`Some`); `None` for the
    /// others.
    pub(super) fn shared_ctx_enable(&self) -> Option<Result<()>> {
        matches!(self.role, Role::Srx | Role::Stx).then_some(Ok(()))
    }

    /// After this endpoint's bindings are frozen (`active`): hand them to its shared
    /// receive context if it has none yet, and route the endpoint's name to the
    /// context's region.
    pub(super) fn attach_srx(&self, active: &Bound) -> Result<()> {
        let own = lock(&self.shared_ctx);
        let _ = self.sh.remote.set(own.remote.clone());
        let Some(srx) = own.srx.clone() else {
            return Ok(());
        };
        drop(own);
        self.sh
            .rx_via_srx
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let receive_side = || Bound {
            av: active.av.clone(),
            txcq: None,
            rxcq: active.rxcq.clone(),
            txcntr: None,
            rxcntr: active.rxcntr.clone(),
            wcntr: None,
            rcntr: None,
        };
        let _ = srx.active.set(receive_side());
        let name = self.sh.name();
        lock(&srx.srx_routes).push((name_digest(&name), Arc::new(receive_side())));
        alias_region(&srx.name(), &name)
    }
}

/// Make `/dev/shm/alias` a link to `/dev/shm/target`'s region, replacing what `alias`
/// named in one `rename`.
fn alias_region(target: &str, alias: &str) -> Result<()> {
    let tmp = format!("/dev/shm/{alias}.link");
    let io = |what: &str, e: std::io::Error| {
        Error::new(
            Errno::EIO,
            format!("{NAME}: {what} for the shared receive context: {e}"),
        )
    };
    let _ = std::fs::remove_file(&tmp);
    std::fs::hard_link(format!("/dev/shm/{target}"), &tmp).map_err(|e| io("link", e))?;
    std::fs::rename(&tmp, format!("/dev/shm/{alias}")).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("rename", e)
    })
}
