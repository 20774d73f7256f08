//! ofi-rdma: the RDMA device layer of ofi-rs — the verbs interface the RDMA providers
//! (verbs, later efa) use, with two implementations:
//!
//! - a **software device** (`soft0`, [`DeviceKind::Soft`], chosen by
//!   `FI_VERBS_DEVICE=soft`): RC, UD and SRD (EFA's reliable unordered datagrams)
//!   queue pairs between processes of this host over
//!   unix `SOCK_SEQPACKET` sockets, with a per-context service thread that serves RDMA
//!   reads, writes and atomics without the target application, checks keys, bounds,
//!   protection domains and access flags, applies receiver-not-ready and retry rules,
//!   flushes work requests when a queue pair enters the error state, reports lost peers,
//!   and can drop or delay UD datagrams;
//! - **rdma-core opened at run time** ([`DeviceKind::RdmaCore`]): `libibverbs.so.1` is
//!   loaded with `libloading`, nothing is linked, so everything builds and starts without
//!   it; the structures the fast path needs are mirrored in [`sys`] and checked against the
//!   installed headers by a test; the data path (`post_send`, `post_recv`,
//!   `post_srq_recv`, `poll_cq`, `req_notify_cq`) calls through the context's ops table
//!   as rdma-core's inline functions do. Without the library or a device it says why in
//!   one line ("libibverbs.so.1 not found", "no RDMA device").
//!
//! The shape follows verbs one to one: [`Device`] → [`Context`] → [`ProtectionDomain`] →
//! [`MemoryRegion`], [`QueuePair`], [`SharedReceiveQueue`], [`AddressHandle`];
//! [`CompletionQueue`] with [`CompChannel`]; work requests ([`SendWr`], [`RecvWr`]) by
//! value with a slice of [`Sge`]s; [`WorkCompletion`]s with rdma-core's numeric statuses
//! and opcodes. Posting and polling never allocate (queues are sized at creation),
//! except that a send finding the socket full is copied to a backlog.
//!
//! Invariants: registered memory is touched only through raw-pointer copies and atomics
//! (it is written concurrently by peers); `unsafe` is confined to registration, inline
//! sends, the socket calls and the copies. What may panic: nothing reachable from peer
//! input.

pub mod cm;
pub mod cq;
pub mod device;
pub mod grh;
pub mod mr;
pub mod pd;
pub mod qp;
pub mod soft;
pub mod sys;
pub mod verbs;

pub use cm::{CmChannel, CmEvent, CmEventKind, CmPeer};
pub use cq::{CompChannel, CompletionQueue};
pub use device::{device_list, Context, Device, DeviceKind, DomainDevice};
pub use mr::MemoryRegion;
pub use pd::{AddressHandle, ProtectionDomain};
pub use qp::{QpInitAttr, QueuePair, SharedReceiveQueue, SrqInitAttr};
pub use soft::SoftFault;
pub use verbs::*;
