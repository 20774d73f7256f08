//! ofi-kit: the building blocks every provider reuses, so that a provider supplies only
//! its transport and a progress function (DESIGN §1, §6).
//!
//! Landed so far:
//! - [`atomic`]: the atomic engine — every operation × datatype of fi_atomic(3), the
//!   valid/query answers, applied atomically on a target buffer;
//! - [`tagmatch`]: the tag matcher — posted and unexpected queues, tag/ignore masks,
//!   directed receive, peek/claim/discard, multi-receive, cancel, bounded memory;
//! - [`bufpool`]: buffer pools with stable indices usable as context ids;
//! - [`av`]: the address vector — map/table fabric addresses, per-peer state, reverse
//!   lookup, insertsvc/insertsym, asynchronous inserts;
//! - [`mr`]: the MR table — provider/user keys, mode state machines, checked remote
//!   and local lookups, RMA event counters.
//!
//! The completion queue, counters, event queue, progress engine and wait
//! objects follow. Depends on `ofi-core` only (DESIGN §2).

#![forbid(unsafe_code)]

pub mod atomic;
pub mod av;
pub mod bufpool;
pub mod mr;
pub mod tagmatch;

pub use ofi_core as core;
