//! The software device (`soft0`): RC, UD and SRD queue pairs between processes of this host,
//! with the semantics of verbs — one-sided operations served by a per-context service
//! thread without the target application, keys/bounds/access checked, receiver-not-ready
//! and retry behaviour, error states that flush, lost peers, UD loss and delay.
//!
//! What may panic: nothing reachable from peer input (packets are parsed with bounds
//! checks and dropped when malformed); the `expect`s left assert local invariants.

pub(crate) mod conn;
pub(crate) mod cq;
pub(crate) mod ctx;
pub(crate) mod mem;
pub(crate) mod qp;
pub mod wire;

pub use ctx::SoftFault;

/// The software device's name.
pub const SOFT_DEVICE_NAME: &str = "soft0";
/// The largest SRD datagram (payload bytes) the software device carries; a longer send
/// is refused at posting (`EINVAL`).
pub const SRD_MTU: usize = 8192;
/// The software device's node GUID.
pub const SOFT_NODE_GUID: u64 = 0x0200_5eff_fe00_0001;
