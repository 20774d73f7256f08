//! ofi-kit: the building blocks every provider reuses, so that a provider supplies only
//! its transport and a progress function (DESIGN §1, §6).
//!
//! Landed so far:
//! - [`atomic`]: the atomic engine — every operation × datatype of fi_atomic(3), the
//!   valid/query answers, applied atomically on a target buffer;
//! - [`tagmatch`]: the tag matcher — posted and unexpected queues, tag/ignore masks,
//!   directed receive, peek/claim/discard, multi-receive, cancel, bounded memory;
//! - [`bufpool`]: buffer pools with stable indices usable as context ids.
//!
//! The completion queue, counters, event queue, address vector, MR table, progress
//! engine and wait objects follow. Depends on `ofi-core` only (DESIGN §2).

#![forbid(unsafe_code)]

pub mod atomic;
pub mod bufpool;
pub mod tagmatch;

pub use ofi_core as core;
