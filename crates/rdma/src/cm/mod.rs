//! Connection management: what rdma_cm does for RC queue pairs (connect request with
//! the requester's queue pair and private data; accept or reject with the responder's;
//! established; disconnect), behind one [`CmChannel`] with two backends chosen by the
//! device kind, like the rest of this crate:
//!
//! - the **software device** ([`DeviceKind::Soft`]): an equivalent exchange over unix
//!   sockets between processes of this host (`soft`); the user moves its queue pair
//!   to RTR and RTS with the peer's GID and queue pair number from the events;
//! - **librdmacm** ([`DeviceKind::RdmaCore`]), opened at run time (`rdmacm`): ids on an
//!   event channel whose fd is the wait fd; address and route resolution are internal
//!   steps; the channel moves the queue pair given to [`CmChannel::connect`] or
//!   [`CmChannel::accept`] through INIT, RTR and RTS itself with the attributes
//!   rdma_cm computes for the route ([`CmChannel::drives_qp`] says which).
//!
//! Both report the same [`CmEvent`]s. Invariants: a channel is driven by its user (no
//! thread): [`CmChannel::get_event`] never blocks. Nothing here panics on peer input:
//! private data is bounded by the exchange's limits and parsed defensively.

mod rdmacm;
mod soft;

pub use rdmacm::{translate, CmStep, HW_ACCEPT_PRIVATE_MAX, HW_CONNECT_PRIVATE_MAX};

use std::net::SocketAddr;
use std::os::fd::RawFd;

use ofi_core::{Errno, Result};

use crate::device::DeviceKind;
use crate::qp::QueuePair;
use crate::verbs::Gid;

/// Most private-data bytes of a connect request (InfiniBand's REQ limit).
pub const CONNECT_PRIVATE_MAX: usize = 56;
/// Most private-data bytes of an accept or reject (InfiniBand's REP limit).
pub const ACCEPT_PRIVATE_MAX: usize = 196;

/// `EINVAL` ("`call` private data over `max` bytes") for private data longer than the
/// connection manager carries with `call` (`connect`, `accept`, `reject`).
pub(crate) fn check_private_data(call: &str, data: &[u8], max: usize) -> Result<()> {
    if data.len() > max {
        return Err(ofi_core::Error::new(
            Errno::EINVAL,
            format!("{call} private data over {max} bytes"),
        ));
    }
    Ok(())
}

/// One side's part of the exchange: where its queue pair is, and private data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmPeer {
    /// The GID of the queue pair's context.
    pub gid: Gid,
    /// The queue pair number.
    pub qpn: u32,
    /// Application data carried by the message.
    pub private_data: Vec<u8>,
    /// The sender's IP address and port, as rdma_cm's IP header carries them outside
    /// the application's private data (the accepting side's `fi_getpeer`). `None`
    /// when the sender gave none or sent something unreadable.
    pub source: Option<SocketAddr>,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEventKind {
    /// A connect request arrived at listener `listener`; the event's id names the new
    /// connection, to accept or reject.
    ConnectRequest {
        /// The listener it arrived at.
        listener: u64,
        /// The requester's queue pair and private data.
        peer: CmPeer,
    },
    /// The connection is up. On the connecting side, `peer` is the acceptor's queue
    /// pair and private data (move the queue pair to RTR and RTS now); on the accepting
    /// side, the requester's again.
    Established {
        /// The other side.
        peer: CmPeer,
    },
    /// The other side rejected the request.
    Rejected {
        /// The rejecter's private data.
        private_data: Vec<u8>,
    },
    /// The other side disconnected, or its process ended.
    Disconnected,
    /// The connection failed (librdmacm only): connecting, the address or route could
    /// not be resolved, or the peer was unreachable or did not answer in time;
    /// accepting, the connector refused the answer or did not confirm it; at any time,
    /// the device went away. `err` is `FI_EHOSTUNREACH`, `FI_ETIMEDOUT`,
    /// `FI_ECONNREFUSED`, `FI_ENODEV` or the like.
    Failed {
        /// What went wrong.
        err: Errno,
    },
}

/// An event of a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmEvent {
    /// The connection (as returned by [`CmChannel::connect`] or named by a
    /// connect request).
    pub id: u64,
    /// What happened.
    pub kind: CmEventKind,
}

enum Backend {
    Soft(soft::SoftCm),
    RdmaCm(rdmacm::RdmaCmChannel),
}

/// A set of listeners and connections with their events (`struct rdma_event_channel`).
pub struct CmChannel {
    backend: Backend,
}

impl std::fmt::Debug for CmChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmChannel")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

impl CmChannel {
    /// A channel of the software device (in its socket directory).
    pub fn new() -> Result<CmChannel> {
        CmChannel::open(DeviceKind::Soft)
    }

    /// A channel for devices of `kind`. For rdma-core: librdmacm's event channel; the
    /// error (`FI_ENODEV`) is one line naming the cause when the library is missing
    /// ("librdmacm.so.1 not found") or the kernel's connection manager is not there
    /// (no `/dev/infiniband/rdma_cm`).
    pub fn open(kind: DeviceKind) -> Result<CmChannel> {
        let backend = match kind {
            DeviceKind::Soft => Backend::Soft(soft::SoftCm::new()?),
            DeviceKind::RdmaCore => Backend::RdmaCm(rdmacm::RdmaCmChannel::new()?),
        };
        Ok(CmChannel { backend })
    }

    /// The device kind this channel serves.
    pub fn kind(&self) -> DeviceKind {
        match self.backend {
            Backend::Soft(_) => DeviceKind::Soft,
            Backend::RdmaCm(_) => DeviceKind::RdmaCore,
        }
    }

    /// Whether the channel moves the queue pairs given to [`CmChannel::connect`] and
    /// [`CmChannel::accept`] through INIT, RTR and RTS itself (librdmacm). When `false`
    /// (the software device), the user moves them with the peer's GID and queue pair
    /// number: the acceptor before accepting, the connector on
    /// [`CmEventKind::Established`].
    pub fn drives_qp(&self) -> bool {
        matches!(self.backend, Backend::RdmaCm(_))
    }

    /// Most private-data bytes [`CmChannel::connect`] takes (librdmacm keeps one byte
    /// of InfiniBand's 56 for the length, as the data arrives padded).
    pub fn connect_private_max(&self) -> usize {
        match self.backend {
            Backend::Soft(_) => CONNECT_PRIVATE_MAX,
            Backend::RdmaCm(_) => HW_CONNECT_PRIVATE_MAX,
        }
    }

    /// Most private-data bytes [`CmChannel::accept`] and [`CmChannel::reject`] take.
    pub fn accept_private_max(&self) -> usize {
        match self.backend {
            Backend::Soft(_) => ACCEPT_PRIVATE_MAX,
            Backend::RdmaCm(_) => HW_ACCEPT_PRIVATE_MAX,
        }
    }

    /// The fd: readable while the channel has input (call [`CmChannel::get_event`]
    /// then). Events already taken in are not signalled by it.
    pub fn fd(&self) -> RawFd {
        match &self.backend {
            Backend::Soft(c) => c.fd(),
            Backend::RdmaCm(c) => c.fd(),
        }
    }

    /// Listens at `addr` (`rdma_listen`); port 0 picks a free one. Returns the
    /// listener's id and the address it listens at.
    pub fn listen(&self, addr: SocketAddr) -> Result<(u64, SocketAddr)> {
        match &self.backend {
            Backend::Soft(c) => c.listen(addr),
            Backend::RdmaCm(c) => c.listen(addr),
        }
    }

    /// Stops a listener (its pending, unanswered requests stay).
    pub fn close_listener(&self, id: u64) {
        match &self.backend {
            Backend::Soft(c) => c.close_listener(id),
            Backend::RdmaCm(c) => c.close_listener(id),
        }
    }

    /// Sends a connect request to the listener at `dst` with the local queue pair
    /// `qp` (in INIT) and private data (`rdma_connect`, after resolving the address and
    /// route); the answer comes as an event of the returned id. `ECONNREFUSED` when
    /// the software device finds nobody listening; on hardware, failures after this
    /// returns come as [`CmEventKind::Failed`] or [`CmEventKind::Rejected`].
    pub fn connect(&self, dst: SocketAddr, local: &CmPeer, qp: &QueuePair) -> Result<u64> {
        match &self.backend {
            Backend::Soft(c) => c.connect(dst, local),
            Backend::RdmaCm(c) => c.connect(dst, &local.private_data, qp),
        }
    }

    /// Accepts request `id` with the local queue pair and private data (`rdma_accept`);
    /// [`CmEventKind::Established`] follows when the requester is ready.
    pub fn accept(&self, id: u64, local: &CmPeer, qp: &QueuePair) -> Result<()> {
        match &self.backend {
            Backend::Soft(c) => c.accept(id, local),
            Backend::RdmaCm(c) => c.accept(id, &local.private_data, qp),
        }
    }

    /// Rejects request `id` (`rdma_reject`).
    pub fn reject(&self, id: u64, private_data: &[u8]) -> Result<()> {
        match &self.backend {
            Backend::Soft(c) => c.reject(id, private_data),
            Backend::RdmaCm(c) => c.reject(id, private_data),
        }
    }

    /// Disconnects `id` (`rdma_disconnect`); the other side gets
    /// [`CmEventKind::Disconnected`]. Forgets the connection.
    pub fn disconnect(&self, id: u64) -> Result<()> {
        match &self.backend {
            Backend::Soft(c) => c.disconnect(id),
            Backend::RdmaCm(c) => c.disconnect(id),
        }
    }

    /// Reads what arrived and returns the next event, if any (never blocks).
    pub fn get_event(&self) -> Option<CmEvent> {
        match &self.backend {
            Backend::Soft(c) => c.get_event(),
            Backend::RdmaCm(c) => c.get_event(),
        }
    }

    /// Waits up to `timeout` for an event.
    pub fn wait_event(&self, timeout: std::time::Duration) -> Option<CmEvent> {
        crate::soft::cq::wait_on(self.fd(), timeout, || self.get_event())
    }
}
