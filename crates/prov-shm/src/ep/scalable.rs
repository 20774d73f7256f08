//! Scalable endpoints (`fi_scalable_ep`) and their transmit and receive contexts
//! (`fi_tx_context`, `fi_rx_context`).
//!
//! # Structure
//!
//! A scalable endpoint is a name, `BASE`, and up to `tx_ctx_cnt` transmit and
//! `rx_ctx_cnt` receive contexts. Each context is a whole endpoint of this provider
//! (its own region, its own `tx` and `rx` locks, its own CQs and counters), so a
//! context driven by one thread shares no lock on the data path with the others:
//! only the address vector (read-locked on a connection's first use) and the domain's
//! progress engine (lock-free when its sources do not change) are common.
//!
//! - Receive context `i` owns the region `BASE` (`i = 0`) or `BASE.rxI`: a sender
//!   that addresses `fi_rx_addr(base, i, rx_ctx_bits)` connects to that region; a
//!   sender whose AV has no receive-context bits reaches context 0, so a scalable
//!   endpoint is also an ordinary peer.
//! - Transmit context `i` owns a small region `BASE.txI` (it receives nothing; the
//!   region gives it the identity peers see). A receiver reports the source of its
//!   messages as `fi_shm://BASE` ([`public_name`]), the scalable endpoint's address.
//! - The scalable endpoint itself owns a small region `BASE.sep`, which reserves the
//!   name: a second scalable endpoint on the same `src_addr` fails with
//!   `FI_EADDRINUSE`. It carries no data: its data calls fail with
//!   `FI_EOPBADSTATE`.
//!
//! # Invariants
//!
//! - A context keeps its scalable endpoint alive; closing the scalable endpoint while
//!   a context is open is `FI_EBUSY`.
//! - Each index is open at most once at a time (`FI_EBUSY` for a second open).
//! - A context bound to no AV of its own uses the scalable endpoint's, taken when the
//!   context is enabled.
//! - A context's progress runs when one of its own CQs is read, or when anything but a
//!   CQ read drives the domain (a counter or EQ read, a wait, the auto thread): the read
//!   of a CQ it is not bound to leaves it alone, so threads that each read their own
//!   context's CQs do not poll (and lock) each other's rings.
//!
//! Nothing here panics.

use std::sync::{Arc, Mutex};

use ofi_core::addr::Address;
use ofi_core::attr::{Info, RxAttr, TxAttr};
use ofi_core::provider::BindTarget;
use ofi_core::{Errno, Error, OpFlags, Result};
use ofi_kit::mr::MrTable;
use ofi_kit::progress::ProgressEngine;
use ofi_kit::scalable::{context_counts, merge_rx, merge_tx, ContextSlots};
use ofi_kit::wait::lock;

use super::{create_auto_named_base, Endpoint, Setup, BIND_RULES};
use crate::fabric::{region_name, Fabric};
use crate::region::{Geometry, Region};
use crate::{Settings, ADDR_PREFIX, NAME};

/// The geometry of a region that receives nothing (a transmit context's, a scalable
/// endpoint's): one ring of two slots, one chunk of one line.
pub(super) const IDLE_GEOMETRY: Geometry = Geometry {
    rings: 1,
    slots: 2,
    chunks: 1,
    chunk_size: 64,
};

/// Suffix of a transmit context's region name (before its index).
const TX_SUFFIX: &str = ".tx";
/// Suffix of a receive context's region name (before its index; context 0 has none).
const RX_SUFFIX: &str = ".rx";
/// Suffix of the scalable endpoint's own region name.
const SEP_SUFFIX: &str = ".sep";

/// What an [`Endpoint`] is.
#[derive(Debug)]
pub(crate) enum Role {
    /// An ordinary endpoint (`fi_endpoint`).
    Plain,
    /// A scalable endpoint.
    Sep(Arc<Scalable>),
    /// A shared receive context (`fi_srx_context`, see `shared_ctx`).
    Srx,
    /// A shared transmit context (`fi_stx_context`).
    Stx,
    /// A context of a scalable endpoint (transmit when `tx`), at `index`.
    Ctx {
        sep: Arc<Scalable>,
        tx: bool,
        index: usize,
    },
}

impl Drop for Role {
    fn drop(&mut self) {
        if let Role::Ctx { sep, tx, index } = self {
            sep.slots.release(*tx, *index);
        }
    }
}

/// A scalable endpoint's state, shared with its contexts.
#[derive(Debug)]
pub(crate) struct Scalable {
    base: String,
    info: Info,
    settings: Settings,
    engine: Arc<ProgressEngine>,
    mr: Arc<MrTable>,
    setup: Mutex<Setup>,
    /// Which contexts are open.
    slots: ContextSlots,
}

/// The region name of receive context `index` of the scalable endpoint named `base`.
pub(crate) fn rx_region_name(base: &str, index: usize) -> String {
    if index == 0 {
        base.to_string()
    } else {
        format!("{base}{RX_SUFFIX}{index}")
    }
}

/// The name a receiver reports for a sender whose region is `name`: a transmit
/// context (`BASE.txI`) is reported as its scalable endpoint (`BASE`).
pub(crate) fn public_name(name: &str) -> &str {
    if let Some(at) = name.rfind(TX_SUFFIX) {
        let digits = &name[at + TX_SUFFIX.len()..];
        if at > 0 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return &name[..at];
        }
    }
    name
}

impl super::Shared {
    /// Whether this is a context and the drive now running is the read of a CQ it is
    /// not bound to (see the module docs).
    #[inline]
    pub(super) fn leaves_to_own_cqs(&self) -> bool {
        // An ordinary endpoint (the common case) has no CQs of its own: one load.
        let Some(own) = self.ctx_cqs.get() else {
            return false;
        };
        ofi_kit::cq::reading_cq().is_some_and(|reading| !own.contains(&reading))
    }
}

impl Endpoint {
    /// Open a scalable endpoint for `info` (`fi_scalable_ep`): reserve its name and
    /// remember what its contexts need.
    ///
    /// # Errors
    /// `FI_EINVAL` for a bad `src_addr` or context counts beyond the domain's;
    /// `FI_EADDRINUSE` when the name is taken.
    pub fn open_scalable(
        settings: Settings,
        info: &Info,
        engine: Arc<ProgressEngine>,
        mr: Arc<MrTable>,
    ) -> Result<Endpoint> {
        let (ntx, nrx) = context_counts(NAME, info, crate::MAX_EP_CTX)?;
        let (base, region) = match &info.src_addr {
            Some(a) => {
                let base = region_name(a)?.to_string();
                let own = format!("{base}{SEP_SUFFIX}");
                crate::region::check_name(&own)?;
                (
                    base,
                    Region::create_keyed(&own, IDLE_GEOMETRY, settings.auth)?,
                )
            }
            None => create_auto_named_base(SEP_SUFFIX, IDLE_GEOMETRY, settings.auth)?,
        };
        let sep = Arc::new(Scalable {
            base,
            info: info.clone(),
            settings,
            engine: engine.clone(),
            mr: mr.clone(),
            setup: Mutex::new(Setup::default()),
            slots: ContextSlots::new(ntx, nrx),
        });
        Endpoint::with_region(settings, info, engine, mr, region, Role::Sep(sep))
    }

    /// `fi_tx_context` / `fi_rx_context` on this endpoint (`tx`: a transmit context).
    pub(super) fn open_context(&self, tx: bool, index: i32, ctx_info: Info) -> Result<Endpoint> {
        let Role::Sep(sep) = &self.role else {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: contexts are opened on a scalable endpoint"),
            ));
        };
        let index = sep.slots.claim(NAME, tx, index)?;
        // From here the role frees the index if opening fails.
        let role = Role::Ctx {
            sep: sep.clone(),
            tx,
            index,
        };
        let (name, geometry) = if tx {
            (format!("{}{TX_SUFFIX}{index}", sep.base), IDLE_GEOMETRY)
        } else {
            (rx_region_name(&sep.base, index), sep.settings.geometry)
        };
        crate::region::check_name(&name)?;
        let region = Region::create_keyed(&name, geometry, sep.settings.auth)?;
        Endpoint::with_region(
            sep.settings,
            &ctx_info,
            sep.engine.clone(),
            sep.mr.clone(),
            region,
            role,
        )
    }

    /// `fi_tx_context`: the scalable endpoint's info with transmit attributes `attr`.
    pub(super) fn tx_context(&self, index: i32, attr: &TxAttr) -> Result<Endpoint> {
        let mut info = self.sep_info()?;
        merge_tx(&mut info.tx_attr, attr);
        self.open_context(true, index, info)
    }

    /// `fi_rx_context`: the scalable endpoint's info with receive attributes `attr`.
    pub(super) fn rx_context(&self, index: i32, attr: &RxAttr) -> Result<Endpoint> {
        let mut info = self.sep_info()?;
        merge_rx(&mut info.rx_attr, attr);
        self.open_context(false, index, info)
    }

    fn sep_info(&self) -> Result<Info> {
        match &self.role {
            Role::Sep(sep) => Ok(sep.info.clone()),
            _ => Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: contexts are opened on a scalable endpoint"),
            )),
        }
    }

    /// At `fi_enable` of a context: remember the CQs it reports to (its progress is
    /// left to their reads, see the module docs).
    pub(super) fn note_ctx_cqs(&self, active: &ofi_kit::ep::Bound) {
        if let Role::Ctx { .. } = self.role {
            let id = |b: &Option<ofi_kit::ep::CqBinding>| b.as_ref().map_or(0, |b| b.cq.id());
            let _ = self.sh.ctx_cqs.set([id(&active.txcq), id(&active.rxcq)]);
        }
    }

    /// `fi_scalable_ep_bind` (only an AV). `None` when this is not a scalable
    /// endpoint (the ordinary bind applies).
    pub(super) fn sep_bind(
        &self,
        target: &BindTarget<'_, Fabric>,
        flags: OpFlags,
    ) -> Option<Result<()>> {
        let Role::Sep(sep) = &self.role else {
            return None;
        };
        Some(match target {
            BindTarget::Av(av) => {
                lock(&sep.setup).bind(BindTarget::<Fabric>::Av(av), flags, &BIND_RULES)
            }
            _ => Err(Error::new(
                Errno::EINVAL,
                format!(
                    "{NAME}: a scalable endpoint binds an AV only (bind CQs and counters to \
                     its contexts)"
                ),
            )),
        })
    }

    /// Before a context freezes its bindings: the scalable endpoint's AV when the
    /// context has none.
    pub(super) fn inherit_av(&self, setup: &mut Setup) {
        if let Role::Ctx { sep, .. } = &self.role {
            if setup.av.is_none() {
                setup.av.clone_from(&lock(&sep.setup).av);
            }
        }
    }

    /// `fi_enable` of a scalable endpoint: `Some` (the AV must be bound), `None` for
    /// other endpoints.
    pub(super) fn sep_enable(&self) -> Option<Result<()>> {
        let Role::Sep(sep) = &self.role else {
            return None;
        };
        Some(if lock(&sep.setup).av.is_some() {
            Ok(())
        } else {
            Err(Error::new(
                Errno::ENOAV,
                format!("{NAME}: bind an AV to the scalable endpoint before fi_enable"),
            ))
        })
    }

    /// `fi_close` of a scalable endpoint with open contexts: `FI_EBUSY`.
    pub(super) fn sep_close(&self) -> Result<()> {
        match &self.role {
            Role::Sep(sep) => sep.slots.check_close(NAME),
            _ => Ok(()),
        }
    }

    /// The address `fi_getname` reports: the scalable endpoint's for it and its
    /// contexts, the region's for an ordinary endpoint.
    pub(super) fn public_address(&self) -> Address {
        match &self.role {
            Role::Sep(sep) | Role::Ctx { sep, .. } => {
                Address::Str(format!("{ADDR_PREFIX}{}", sep.base))
            }
            Role::Plain | Role::Srx | Role::Stx => self.address(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_name_strips_a_transmit_context_suffix() {
        assert_eq!(public_name("ofi-shm-1-2.tx0"), "ofi-shm-1-2");
        assert_eq!(public_name("ofi-shm-1-2.tx17"), "ofi-shm-1-2");
        assert_eq!(public_name("ofi-shm-1-2"), "ofi-shm-1-2");
        assert_eq!(public_name("a.tx"), "a.tx");
        assert_eq!(public_name(".tx1"), ".tx1");
        assert_eq!(public_name("a.txb"), "a.txb");
    }

    #[test]
    fn receive_context_zero_is_the_base_name() {
        assert_eq!(rx_region_name("b", 0), "b");
        assert_eq!(rx_region_name("b", 3), "b.rx3");
    }
}
