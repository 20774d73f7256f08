//! Connection management: the fabric's `CmHub` (one `ofi_rdma::CmChannel` and the
//! routes from its listeners and connections to passive and active endpoints) and the
//! passive endpoint [`PassiveEp`].
//!
//! The exchange (the device layer's, as rdma_cm's on hardware): `fi_connect` sends the
//! endpoint's queue pair (GID, number) and the CM data; the listener's side reports
//! `FI_CONNREQ` (the info's `handle` names the request); `fi_accept` moves the
//! acceptor's queue pair to RTS towards the requester and answers with its own; the
//! connector moves its queue pair on `Established` and reports `FI_CONNECTED` with the
//! acceptor's data; the acceptor reports `FI_CONNECTED` on ready-to-use. `Rejected`
//! becomes an `FI_ECONNREFUSED` error event with the reject data; `Disconnected` (the
//! peer's `fi_shutdown`, or its process ended) moves the queue pair to the error state
//! (flushing what is posted) and reports `FI_SHUTDOWN`.
//!
//! On rdma-core devices the channel is librdmacm's: it resolves the address and route,
//! and moves the queue pairs through INIT, RTR and RTS itself with what rdma_cm
//! computes for the route (`CmChannel::drives_qp`); failures before an answer
//! (unreachable, timed out) come as `Failed` and become error events with that code.
//!
//! Invariants: the hub's tables are locked only to look a route up; handlers run with no
//! hub lock held. Nothing here panics on peer input (the channel parses it).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use ofi_core::attr::Info;
use ofi_core::provider::PassiveEndpointOps;
use ofi_core::{Address, Result};
use ofi_kit::cm::{PepBase, PepListener};
use ofi_kit::eq::KitEq;
use ofi_kit::progress::{FdInterest, Progress};
use ofi_rdma::{CmChannel, CmEventKind, CmPeer, DeviceKind};

use crate::ep::EpInner;
use crate::fabric::{Fabric, FabricShared};
use crate::NAME;

/// Events handled per progress round.
const ROUND: usize = 32;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Routes {
    listeners: HashMap<u64, Weak<PepInner>>,
    conns: HashMap<u64, Weak<EpInner>>,
    /// Connect requests reported and not yet accepted or rejected: the requester.
    pending: HashMap<u64, CmPeer>,
}

/// The fabric's connection manager: the channel and where its events go.
pub(crate) struct CmHub {
    pub(crate) channel: CmChannel,
    routes: Mutex<Routes>,
}

impl std::fmt::Debug for CmHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmHub").finish_non_exhaustive()
    }
}

impl CmHub {
    /// The hub of devices of `kind` (librdmacm's event channel for rdma-core).
    pub(crate) fn new(kind: DeviceKind) -> Result<CmHub> {
        Ok(CmHub {
            channel: CmChannel::open(kind).map_err(|e| e.context(NAME))?,
            routes: Mutex::new(Routes::default()),
        })
    }

    /// Events of connection `id` go to `ep` from now on.
    pub(crate) fn route_conn(&self, id: u64, ep: &Arc<EpInner>) {
        lock(&self.routes).conns.insert(id, Arc::downgrade(ep));
    }

    /// Forget connection `id`.
    pub(crate) fn unroute_conn(&self, id: u64) {
        lock(&self.routes).conns.remove(&id);
    }

    /// The requester of the pending connect request `id`, taken out of the table.
    pub(crate) fn take_pending(&self, id: u64) -> Option<CmPeer> {
        lock(&self.routes).pending.remove(&id)
    }
}

impl Progress for CmHub {
    fn progress(&self) -> usize {
        let mut work = 0;
        while work < ROUND {
            let Some(ev) = self.channel.get_event() else {
                break;
            };
            work += 1;
            match ev.kind {
                CmEventKind::ConnectRequest { listener, peer } => {
                    let pep = {
                        let mut r = lock(&self.routes);
                        let pep = r.listeners.get(&listener).and_then(Weak::upgrade);
                        if pep.is_some() {
                            r.pending.insert(ev.id, peer.clone());
                        }
                        pep
                    };
                    match pep {
                        Some(p) if p.report_request(ev.id, peer.private_data) => {}
                        _ => {
                            lock(&self.routes).pending.remove(&ev.id);
                            let _ = self.channel.reject(ev.id, &[]);
                        }
                    }
                }
                kind => {
                    let ep = lock(&self.routes).conns.get(&ev.id).and_then(Weak::upgrade);
                    match ep {
                        Some(ep) => ep.on_cm_event(kind),
                        None => {
                            lock(&self.routes).pending.remove(&ev.id);
                        }
                    }
                }
            }
        }
        work
    }

    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        out.push(FdInterest::read(self.channel.fd()));
        true
    }
}

/// A passive endpoint's listener: once listening, the channel's listener id and the
/// address it listens at.
#[derive(Debug, Default)]
struct Listener {
    at: Option<(u64, SocketAddr)>,
}

impl PepListener for Listener {
    fn is_listening(&self) -> bool {
        self.at.is_some()
    }
}

/// The shared part of a passive endpoint.
#[derive(Debug)]
pub(crate) struct PepInner {
    fabric: Arc<FabricShared>,
    base: PepBase<Listener>,
}

impl PepInner {
    /// Report a connect request on the EQ; `false` when there is no EQ or it is full.
    fn report_request(&self, id: u64, data: Vec<u8>) -> bool {
        let listening_at = self.base.listener().at.map(|(_, a)| a);
        let addrs = |info: &mut Info| {
            if let Some(a) = listening_at {
                info.src_addr = Some(Address::from(a));
            }
            info.dest_addr = None;
        };
        let handle = usize::try_from(id).unwrap_or(usize::MAX);
        self.base.report_request(handle, addrs, data)
    }
}

/// A passive endpoint: listens at an IP address and port of the connection manager.
#[derive(Debug)]
pub struct PassiveEp {
    inner: Arc<PepInner>,
}

/// The address a passive endpoint of `info` binds on devices of `kind`: rdma_cm
/// (hardware) takes `src_addr` as given, the wildcard listening on every RDMA device;
/// the software device's connection manager names listeners by address, so there the
/// wildcard means [`listen_addr`]'s 127.0.0.1.
pub(crate) fn bind_addr(info: &Info, kind: DeviceKind) -> SocketAddr {
    match kind {
        DeviceKind::RdmaCore => info
            .src_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)),
        DeviceKind::Soft => listen_addr(info),
    }
}

/// The address a passive endpoint of `info` listens at: its `src_addr`, the wildcard
/// and a missing address meaning 127.0.0.1 (the software device's connection manager
/// names listeners by address; peers use `fi_getname`'s answer).
pub(crate) fn listen_addr(info: &Info) -> SocketAddr {
    let mut a = info
        .src_addr
        .as_ref()
        .and_then(Address::socket_addr)
        .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    if a.ip().is_unspecified() {
        a.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    a
}

impl PassiveEp {
    pub(crate) fn open(
        fabric: Arc<FabricShared>,
        info: &Info,
        context: usize,
    ) -> Result<PassiveEp> {
        Ok(PassiveEp {
            inner: Arc::new(PepInner {
                fabric,
                base: PepBase::open(NAME, info, context, Listener::default())?,
            }),
        })
    }
}

impl PassiveEndpointOps<Fabric> for PassiveEp {
    fn bind_eq(&self, eq: &KitEq, _flags: u64) -> Result<()> {
        self.inner.base.bind_eq(eq);
        Ok(())
    }

    fn listen(&self) -> Result<()> {
        self.inner.base.listen(|listener| {
            let hub = &self.inner.fabric.hub;
            let (id, at) = hub
                .channel
                .listen(bind_addr(self.inner.base.info(), hub.channel.kind()))?;
            lock(&hub.routes)
                .listeners
                .insert(id, Arc::downgrade(&self.inner));
            listener.at = Some((id, at));
            Ok(())
        })
    }

    fn reject(&self, handle: usize, param: &[u8]) -> Result<()> {
        let hub = &self.inner.fabric.hub;
        let id = handle as u64;
        if hub.take_pending(id).is_none() {
            return Err(self.inner.base.no_pending_request());
        }
        hub.channel.reject(id, param)
    }

    fn getname(&self) -> Result<Vec<u8>> {
        let a = match self.inner.base.listener().at {
            Some((_, a)) => a,
            None => listen_addr(self.inner.base.info()),
        };
        Ok(Address::from(a).to_bytes())
    }

    fn close(&self) -> Result<()> {
        let listening = self.inner.base.listener().at.take();
        if let Some((id, _)) = listening {
            let hub = &self.inner.fabric.hub;
            hub.channel.close_listener(id);
            lock(&hub.routes).listeners.remove(&id);
        }
        Ok(())
    }
}
