//! The safe application layer: builders, typed endpoints, owned buffers and typed
//! completions over the raw calls of [`crate::ep`], [`crate::cq`] and friends.
//!
//! The raw API mirrors C: data calls take pointers and are `unsafe`, because the caller
//! must keep each buffer alive and untouched until the operation's completion is read.
//! This layer expresses that rule with ownership instead:
//!
//! - a posted operation **takes** its buffer ([`Buf`]) and keeps it in the endpoint's
//!   in-flight table; the [`Completion`] that reports the operation **gives it back**.
//!   Safe code cannot touch, free or reuse a buffer the provider may still access;
//! - an endpoint's kind is a type parameter ([`Ep<Msg>`](Ep), `Ep<Rdm>`, `Ep<Dgram>`):
//!   connection calls exist only on `Ep<Msg>`, address-vector calls only on
//!   connectionless kinds, tagged / RMA / atomic calls only on reliable kinds;
//! - memory a peer may write is registered with
//!   [`Domain::register_remote_writable`] and described to peers by a
//!   [`RemoteRegion<RemoteWrite>`](RemoteRegion); an RMA write or atomic only accepts
//!   that type, so writing to a region registered read-only does not compile;
//! - endpoint addresses ([`EpAddr`]) and region descriptors ([`RemoteRegion`]) are
//!   `serde::Serialize` / `Deserialize`, to be exchanged out of band.
//!
//! The cost per operation is a slot in a table and a few moves (a few ns); nothing is
//! allocated on the data path once buffers exist, except the 16-byte operand/result box
//! of a fetching atomic (see docs/PERFORMANCE.md, "Safe layer overhead").
//!
//! # Object model
//!
//! [`Hints`] → [`getinfo`](Hints::getinfo) → [`FabricInfo<K>`](FabricInfo) →
//! [`Fabric::open`] → [`Fabric::domain`] → [`Domain::endpoint`] ([`EpBuilder`]) →
//! [`Ep<K>`](Ep). Each endpoint owns its completion queue (and, for connectionless
//! kinds, its address vector; for `Ep<Msg>`, its event queue). Children keep their
//! parents open, so handles may be dropped in any order.
//!
//! # Progress
//!
//! The in-tree providers use manual progress: the provider only moves data when the
//! application calls into it. [`Ep::poll`] (one CQ read) drives progress; so do
//! [`Ep::wait`] and every `post` that returns `FI_EAGAIN` (retry after polling).
//! The async layer (`aio`, feature `tokio`) keeps driving progress while it waits.
//!
//! # Errors
//!
//! Everything returns [`crate::Error`] (an `FI_*` code and a message), except posting,
//! which returns [`PostError`] so the buffer comes back with the error, and
//! completions, where a failed operation is an [`OpError`] carrying its buffer.
//!
//! # Teardown
//!
//! Dropping an [`Ep`] closes the provider's endpoint first (which cancels what is still
//! posted) and only then frees the buffers of its in-flight operations. If the close
//! fails the buffers are leaked on purpose rather than freed while the provider might
//! still write to them.
//!
//! # What may panic
//!
//! Nothing in this module panics on bad input or peer data.

mod addr;
mod buf;
mod cq;
mod domain;
mod ep;
mod info;
mod kind;
mod listener;

#[cfg(feature = "tokio")]
pub mod aio;

pub use addr::{EpAddr, Peer};
pub use buf::Buf;
pub use cq::{Completion, OpError, OpId, OpKind, PostError, PostResult};
pub use domain::{Access, Domain, Fabric, RemoteRead, RemoteRegion, RemoteWrite, SharedRegion};
pub use ep::{Ep, EpBuilder};
pub use info::{FabricInfo, Hints};
pub use kind::{Connectionless, Dgram, EpKind, Msg, Rdm, Reliable};
pub use listener::{ConnRequest, Listener};
