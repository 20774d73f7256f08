//! ofi-kit: the building blocks every provider reuses, so that a provider supplies only
//! its transport and a progress function (DESIGN §1, §6).
//!
//! Landed so far:
//! - [`atomic`]: the atomic engine — every operation × datatype of fi_atomic(3), the
//!   valid/query answers, applied atomically on a target buffer;
//! - [`tagmatch`]: the tag matcher — posted and unexpected queues, tag/ignore masks,
//!   directed receive, peek/claim/discard, multi-receive, cancel, bounded memory;
//! - [`bufpool`]: buffer pools with stable indices usable as context ids;
//! - [`auth`]: authorization keys — length checks, the tag peers compare, getinfo
//!   for keys of any length up to a maximum;
//! - [`av`]: the address vector — map/table fabric addresses, per-peer state, reverse
//!   lookup, insertsvc/insertsym, asynchronous inserts;
//! - [`mr`]: the MR table — provider/user keys, mode state machines, checked remote
//!   and local lookups, RMA event counters;
//! - [`cq`]: the completion queue — all four formats, error entries, source
//!   addresses, blocking reads, signal, overrun and reservations, wait fd;
//! - [`cntr`]: counters — values and errors, `fi_cntr_wait`, wait fd;
//! - [`remote_cntr`]: the remote-access counters of an endpoint (`FI_RMA_EVENT`);
//! - [`scalable`]: what every scalable endpoint does alike — context counts, which
//!   contexts are open (`FI_EBUSY`), a context's attributes;
//! - [`eq`]: the event queue — CM, AV and MR events, application writes, errors,
//!   `FI_PEEK`, blocking reads, wait fd;
//! - [`wait`]: wait objects, wait fds, wait sets, poll sets and `fi_trywait`;
//! - [`progress`]: the per-domain progress engine, manual or with its own thread;
//! - [`watchdog`]: an endpoint's watchdog thread, for protocols that need progress the
//!   application may not make;
//! - [`dataops`]: the forty data calls of an endpoint written from a few operations
//!   ([`dataops::DataPath`], [`endpoint_data_ops!`]);
//! - [`opflags`]: which operation flags each data call takes, and the provider's set
//!   (`FI_EBADFLAGS` for the rest, `FI_MORE` always accepted);
//! - [`fabric`]: the fabric and domain methods every kit-built provider repeats
//!   ([`kit_fabric_ops!`], [`kit_domain_cq_cntr_ops!`]) and their common checks;
//! - [`info`]: the getinfo template values every provider shares, and the getinfo of
//!   providers offering both progress modes;
//! - [`param`]: provider parameters declared with their default and read in one call;
//! - [`settings`]: a provider's settings read from a table of its parameters
//!   ([`read_params!`]);
//! - [`core_provider`](mod@core_provider): the `Provider` skeleton of a core provider whose state is its
//!   settings ([`core_provider!`]);
//! - [`ep`]: endpoint bindings (`fi_ep_bind`'s rules, once for every provider);
//! - [`epglue`]: endpoint glue providers wrote alike — posting a receive and carrying
//!   out the matcher's answer, triggered calls fired and cancelled, the `Info` of a
//!   shared context, the `FI_EMSGSIZE` length check;
//! - [`iov`]: scatter / gather lists of application buffers and their copies;
//! - [`layer`]: the getinfo of utility providers layered over core providers, and the
//!   core fabric and domain beneath them;
//! - [`layered`]: the endpoint glue of those utilities (bind, enable, cancel, options,
//!   the plain parts of the data path), once for all of them;
//! - [`layered_handle`]: the accessors, `fi_control` flag commands and `fi_ep_alias` of
//!   the endpoint handles built on that glue ([`layered_handle_ops!`]);
//! - [`cm`]: the checks before connection calls (an event queue bound) and [`cm::PepBase`],
//!   the part of a passive endpoint every connection-oriented provider shares;
//! - [`cma`]: cross-memory attach (`process_vm_readv` / `process_vm_writev`) and the
//!   probe that proves it works towards a peer, for the providers' same-host paths;
//! - [`sock`]: socket helpers (C socket addresses, errno conversion, options,
//!   interface addresses) for the socket-based providers;
//! - [`netif`]: network interfaces and the default source address of IP endpoints
//!   (`FI_<PROV>_IFACE`, the first up non-loopback interface, the route's source);
//! - [`nic`]: the NIC behind an IP address (`fi_info::nic`) read from sysfs;
//! - [`debug_fields`](mod@debug_fields): the `Debug` of an object that shows only what
//!   names it ([`debug_fields!`]);
//! - [`diag`]: diagnostics of untrusted input — long values shortened for messages,
//!   warnings about peers rate-limited per peer;
//! - [`wire`]: the one wire-format convention — named field ranges, checked views
//!   ([`wire_header!`]), the parse error [`wire::WireError`] (`FI_EPROTO` at the edge).
//!
//! Depends on `ofi-core` only (DESIGN §2) among the workspace crates.
//!
//! `unsafe` is allowed in nine places only: the `poll(2)` call of
//! [`progress::ProgressEngine::sleep_on_fds`], [`iov`]'s copies into and out of
//! application buffers (raw addresses by the C API's contract), [`sock`]'s socket
//! addresses and system calls, [`netif`]'s `getifaddrs(3)` walk, [`cma`]'s cross-memory system calls, [`dataops`]'s
//! reading of the C API's message arrays, [`opflags`]' read and write of
//! `fi_control`'s flags argument, [`trigger`]'s read of a triggered context and
//! copies of a deferred call's arrays, and [`epglue`]'s issuing of those calls
//! (`Bound::fire_triggers`, its caller's contract forwarded); everything else is
//! safe code.

#![deny(unsafe_code)]

pub mod atomic;
pub mod auth;
pub mod av;
pub mod bufpool;
pub mod cm;
#[allow(unsafe_code)]
pub mod cma;
pub mod cntr;
pub mod core_provider;
pub mod cq;
#[allow(unsafe_code)]
pub mod dataops;
pub mod debug_fields;
pub mod diag;
pub mod ep;
pub mod epglue;
pub mod eq;
pub mod fabric;
pub mod info;
#[allow(unsafe_code)]
pub mod iov;
pub mod layer;
pub mod layered;
pub mod layered_handle;
pub mod mr;
#[allow(unsafe_code)]
pub mod netif;
pub mod nic;
#[allow(unsafe_code)]
pub mod opflags;
pub mod param;
pub mod progress;
mod queue_common;
pub mod remote_cntr;
pub mod request;
pub mod request_checks;
pub mod scalable;
pub mod settings;
pub mod shared_ctx;
#[allow(unsafe_code)]
pub mod sock;
pub mod tagmatch;
#[cfg(test)]
mod test_support;
#[allow(unsafe_code)]
pub mod trigger;
pub mod wait;
pub mod watchdog;
pub mod wire;

pub use ofi_core as core;
