//! Address vectors: [`KitAv`], the address vector every provider reuses (fi_av(3)).
//!
//! A [`KitAv<P>`] maps peer [`Address`]es to fabric addresses (`fi_addr_t`, a `u64`)
//! and keeps, next to each address, a per-peer value `P` the provider chooses (its
//! connection state, a header template, `()` for nothing). It implements core's
//! [`AvOps`], so a provider can name it as its `DomainOps::Av` directly and build it
//! in `av_open` with [`KitAv::open`] / [`KitAv::open_with`].
//!
//! # Fabric addresses
//!
//! Entries live in slots with dense indices from 0.
//! - `FI_AV_TABLE`: the fabric address is the index. An insert takes the **lowest
//!   unused index** (fi_av(3)), so indices are sequential across calls as long as
//!   nothing is removed, and an index freed by [`KitAv::remove`] is the next one
//!   handed out. A removed index is invalid (`FI_EINVAL`) until an insert returns it
//!   again; the table cannot tell an old holder of a reused index from the new one.
//! - `FI_AV_MAP`: the fabric address is `generation << 32 | index`, opaque to the
//!   application. A slot's generation starts at 1 and is bumped on every removal
//!   (skipping 0 when it wraps), so a fabric address whose entry was removed stays
//!   invalid (`FI_EINVAL`) even after its slot is reused, until the generation wraps
//!   (2³² − 1 reuses of one slot, fewer with `rx_ctx_bits`, see below). A map address
//!   is never 0 and never `FI_ADDR_NOTAVAIL`.
//! - `FI_AV_UNSPEC` resolves to [`AvConfig::default_type`] (`FI_AV_TABLE` unless the
//!   provider says otherwise; read the choice back with [`KitAv::av_type`]).
//! - With `rx_ctx_bits = n > 0` (scalable endpoints), the top `n` bits of a fabric
//!   address select a receive context (`fi_rx_addr`); lookups ignore them
//!   ([`KitAv::rx_index`] extracts them). `n` may be 0..=16; a map generation then
//!   has `32 − n` bits.
//!
//! Index `u32::MAX` is never used, so the largest AV holds `u32::MAX − 1` entries
//! ([`AvConfig::max_entries`] may lower that; beyond it an insert fails with
//! `FI_ENOSPC` for that address).
//!
//! # Duplicates and reverse lookup
//!
//! fi_av(3) leaves a duplicate insert undefined. Here it returns the fabric address of
//! the entry already there and counts a reference: the entry goes away when it has been
//! removed as many times as it was inserted. So the reverse map ([`KitAv::reverse_lookup`],
//! for `FI_SOURCE`) is a bijection between live addresses and entries, O(1) by hash.
//! Its per-peer value is made once, on the first insert. With `FI_AV_USER_ID` the first
//! insert's user id is kept.
//!
//! # Inserts
//!
//! [`KitAv::insert`], [`KitAv::insertsvc`] and [`KitAv::insertsym`] return one
//! `Result<u64>` per address — the `FI_SYNC_ERR` per-entry status array of the C API —
//! inside an outer `Result` for failures of the whole call (bad flags, no EQ bound to an
//! asynchronous AV, a malformed node/service range). The [`AvOps`] methods turn them
//! into the C shape: `FI_ADDR_NOTAVAIL` for failed entries and the count of successes.
//! An address fails with `FI_EINVAL` when its format does not fit the AV's address
//! format ([`AvConfig::addr_format`]), or with whatever the provider's per-peer
//! constructor returns.
//!
//! Insert flags: `FI_MORE` (ignored: inserts are immediate), `FI_SYNC_ERR`,
//! `FI_AV_USER_ID`; anything else is `FI_EBADFLAGS`.
//!
//! `insertsvc`/`insertsym` resolve node and service through [`AvConfig::resolver`],
//! by default [`resolve_node_service`]: IP formats by `std::net` (literals, then the
//! system resolver), `FI_ADDR_STR` as given. [`sym_range`] expands the ranges of
//! `insertsym` (fi_av(3): all services of a node before the next node).
//!
//! # Asynchronous AVs (`FI_EVENT`)
//!
//! An AV opened with `FI_EVENT` in `attr.flags` needs an event sink before any insert
//! (else `FI_ENOEQ`). Inserts still happen before the call returns, but the outcome
//! is reported as [`AvEvent`]s: one [`AvEvent::Error`] per failed address (`data` = its
//! position in the call), then one [`AvEvent::Complete`] (`FI_AV_COMPLETE`, `data` =
//! number inserted); the [`AvOps`] insert returns 0. The sink is a closure the provider
//! wires to its event queue: [`KitAv::bind_sink`] takes one directly, and the
//! [`AvOps::bind_eq`] of `KitAv` asks the provider's EQ type for one through
//! [`AvEventTarget`]. [`AvEvent::into_eq`] builds the core EQ entries. `FI_SYNC_ERR`
//! on an asynchronous AV is `FI_EBADFLAGS` (it applies to synchronous inserts only).
//!
//! # Threads and the data path
//!
//! All state sits behind one `RwLock`: lookups take it shared, inserts and removals
//! exclusively. [`KitAv::index`], [`KitAv::with_entry`], [`KitAv::peer`] (for
//! `P: Clone`, e.g. an `Arc`) and [`KitAv::contains`] never allocate; their error is
//! a bare `FI_EINVAL`. The per-peer constructor runs under the write lock (it must not
//! call back into the same AV); the resolver runs before the lock is taken. A panic in
//! either leaves the AV consistent (they run before anything is changed), and a
//! poisoned lock is recovered.
//!
//! Nothing here panics.
//!
//! # Files
//!
//! This file: the types and `open`; `lookup.rs`: fabric addresses and the data-path
//! lookups; `insert.rs`: inserts, removals and their events; `resolve.rs`: node and
//! service resolution; `ops.rs`: core's `AvOps` and [`SharedAv`]; `tests.rs`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ofi_core::addr::Address;
use ofi_core::av::AvAttr;
use ofi_core::enums::{AddrFormat, AvType, EqEvent, ADDR_NOTAVAIL};
use ofi_core::eq::{EqErrorEntry, Event};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{AvFlags, Caps, OpFlags};
use ofi_core::provider::{AvOps, EqOf, FabricOps, Unsupported};

use crate::wait::{lock, read_lock, write_lock};

/// `FI_EVENT` as an AV open flag (`attr.flags`): inserts report on the bound EQ.
pub const AV_EVENT: u64 = AvFlags::EVENT.bits();
/// `FI_MORE` as an insert flag: more inserts follow (a hint; ignored).
pub const INSERT_MORE: u64 = OpFlags::MORE.bits();
/// `FI_SYNC_ERR` as an insert flag: per-address statuses are wanted.
pub const INSERT_SYNC_ERR: u64 = AvFlags::SYNC_ERR.bits();
/// `FI_AV_USER_ID` as an insert flag: the `fi_addr` array carries user ids in.
pub const INSERT_USER_ID: u64 = Caps::AV_USER_ID.bits();
/// `FI_UNIVERSE_SIZE`'s default: the capacity reserved when `attr.count` is 0.
pub const DEFAULT_UNIVERSE_SIZE: usize = 1024;
/// Most entries an AV reserves room for at open, whatever `attr.count` or
/// `FI_UNIVERSE_SIZE` say (a hint: the AV grows past it as addresses come).
pub const RESERVE_MAX: usize = 1 << 16;
/// The largest `rx_ctx_bits` an AV accepts.
pub const MAX_RX_CTX_BITS: i32 = 16;

/// Largest usable index (`u32::MAX` is never handed out).
const MAX_INDEX: u32 = u32::MAX - 1;
const INSERT_FLAGS: u64 = INSERT_MORE | INSERT_SYNC_ERR | INSERT_USER_ID;
const OPEN_FLAGS: u64 = AV_EVENT | AvFlags::SYMMETRIC.bits() | AvFlags::UNIVERSE.bits();

fn einval<T>(msg: impl Into<std::borrow::Cow<'static, str>>) -> Result<T> {
    Err(Error::new(Errno::EINVAL, msg))
}

/// `FI_EBADFLAGS` for non-zero `flags` of `call` (`"av bind"`, `"av remove"`), whose
/// flags are reserved (fi_av(3)).
fn reserved_flags(call: &str, flags: u64) -> Result<()> {
    if flags != 0 {
        return Err(Error::new(
            Errno::EBADFLAGS,
            format!("{call}: flags {flags:#x} are reserved and must be 0"),
        ));
    }
    Ok(())
}

/// The function an [`AvResolver`] calls.
type ResolveFn = dyn Fn(&str, &str) -> Result<Address> + Send + Sync;

/// Turns node and service strings into an address (see [`resolve_node_service`]).
#[derive(Clone)]
pub struct AvResolver(Arc<ResolveFn>);

impl AvResolver {
    /// A resolver calling `f`.
    pub fn new(f: impl Fn(&str, &str) -> Result<Address> + Send + Sync + 'static) -> AvResolver {
        AvResolver(Arc::new(f))
    }

    /// The address of `node` and `service`.
    ///
    /// # Errors
    /// The resolver's.
    pub fn resolve(&self, node: &str, service: &str) -> Result<Address> {
        (self.0)(node, service)
    }
}

impl fmt::Debug for AvResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AvResolver(..)")
    }
}

/// Receives the events of asynchronous inserts (see the module docs).
pub type AvEventSink = Arc<dyn Fn(AvEvent) + Send + Sync>;

/// Makes the per-peer value of a new entry.
type PeerFn<P> = Box<dyn Fn(&Address) -> Result<P> + Send + Sync>;

/// One event of an asynchronous insert, for the provider's event queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AvEvent {
    /// One address failed: an EQ error entry.
    Error {
        /// The AV's open context (the entry's `fid`).
        fid: usize,
        /// The insert call's context.
        context: usize,
        /// Position of the failed address in the call (the entry's `data`).
        index: u64,
        /// Why it failed.
        err: Errno,
    },
    /// The insert call finished: an `FI_AV_COMPLETE` event.
    Complete {
        /// The AV's open context.
        fid: usize,
        /// The insert call's context.
        context: usize,
        /// Number of addresses inserted (the event's `data`).
        count: u64,
    },
}

impl AvEvent {
    /// The core EQ form: `Ok(event)` for [`AvEvent::Complete`], `Err(error entry)` for
    /// [`AvEvent::Error`] (push it as an error entry, read with `fi_eq_readerr`).
    pub fn into_eq(self) -> std::result::Result<Event, EqErrorEntry> {
        match self {
            AvEvent::Complete {
                fid,
                context,
                count,
            } => Ok(Event {
                event: EqEvent::AvComplete,
                fid,
                context,
                data: count,
                ..Event::default()
            }),
            AvEvent::Error {
                fid,
                context,
                index,
                err,
            } => Err(EqErrorEntry {
                fid,
                context,
                data: index,
                err,
                prov_errno: 0,
                err_data: Vec::new(),
            }),
        }
    }
}

/// What a provider's event-queue type gives an AV bound to it: the sink its
/// asynchronous-insert events go to. Needed for `KitAv`'s [`AvOps`] implementation.
pub trait AvEventTarget {
    /// A sink that queues [`AvEvent`]s on this EQ (see [`AvEvent::into_eq`]).
    /// `FI_ENOSYS` if this EQ cannot take AV events.
    fn av_event_sink(&self) -> Result<AvEventSink>;
}

impl AvEventTarget for Unsupported {
    fn av_event_sink(&self) -> Result<AvEventSink> {
        match *self {}
    }
}

/// The kit's EQ queues AV events as they come (an error entry per failed address,
/// then `FI_AV_COMPLETE`); an overrun EQ records the loss itself.
impl AvEventTarget for crate::eq::KitEq {
    fn av_event_sink(&self) -> Result<AvEventSink> {
        let eq = self.clone();
        Ok(Arc::new(move |ev: AvEvent| {
            let _ = match ev.into_eq() {
                Ok(event) => eq.push(event),
                Err(entry) => eq.push_err(entry),
            };
        }))
    }
}

/// `FI_UNIVERSE_SIZE` (the core's parameter, through the host), or `default` when it is
/// not set: the number of peers an AV is sized for when `attr.count` is 0.
///
/// # Errors
/// `FI_EINVAL` naming the variable and its value when it is not a size (`abc`, `-1`,
/// `1e20`), or is 0 or more than an AV's index space (4294967294).
pub fn universe_size(default: usize) -> Result<usize> {
    let v = match ofi_core::provider::Host::current().param_size("universe_size") {
        Ok(v) => v,
        // Not declared (a host without the core's parameters): the default.
        Err(e) if e.code() == Errno::ENOENT => None,
        // (FI_EINVAL naming the variable, its value and why.)
        Err(e) => return Err(e),
    };
    match v {
        None => Ok(default),
        Some(n) if (1..=MAX_INDEX as usize).contains(&n) => Ok(n),
        Some(n) => einval(format!(
            "av_open: FI_UNIVERSE_SIZE={n}: outside 1..={MAX_INDEX}"
        )),
    }
}

/// How a provider configures its AVs.
#[derive(Clone, Debug)]
pub struct AvConfig {
    /// The provider's address format (`info.addr_format`): inserted addresses must be
    /// of it (`FI_SOCKADDR` takes IPv4 and IPv6, `FI_FORMAT_UNSPEC` anything).
    pub addr_format: AddrFormat,
    /// What `FI_AV_UNSPEC` becomes (`Map` or `Table`; `Unspec` here means `Table`).
    pub default_type: AvType,
    /// Capacity reserved when `attr.count` is 0 and `FI_UNIVERSE_SIZE` is not set
    /// (that parameter wins: [`universe_size`]).
    pub universe_size: usize,
    /// Most live entries (at most `u32::MAX − 1`); beyond it inserts fail `FI_ENOSPC`.
    pub max_entries: usize,
    /// Node/service resolution for `insertsvc`/`insertsym`; `None`:
    /// [`resolve_node_service`] with `addr_format`.
    pub resolver: Option<AvResolver>,
}

impl AvConfig {
    /// Defaults for `addr_format`: `FI_AV_TABLE` for unspecified, 1024 reserved, no
    /// limit but the index space, the default resolver.
    pub fn new(addr_format: AddrFormat) -> AvConfig {
        AvConfig {
            addr_format,
            default_type: AvType::Table,
            universe_size: DEFAULT_UNIVERSE_SIZE,
            max_entries: MAX_INDEX as usize,
            resolver: None,
        }
    }

    /// With [`AvConfig::default_type`] from the domain's `av_type`: the type it names
    /// (`FI_AV_MAP` or `FI_AV_TABLE`), else `fallback`.
    pub fn with_domain_type(mut self, domain: AvType, fallback: AvType) -> AvConfig {
        self.default_type = match domain {
            AvType::Map | AvType::Table => domain,
            _ => fallback,
        };
        self
    }
}

/// A view of one live entry, handed to [`KitAv::with_entry`].
#[derive(Debug)]
pub struct AvEntry<'a, P> {
    /// The entry's fabric address (without receive-context bits).
    pub fi_addr: u64,
    /// Its dense index (equal to `fi_addr` for a table).
    pub index: u32,
    /// The peer's address.
    pub addr: &'a Address,
    /// The provider's per-peer value.
    pub peer: &'a P,
    /// The `FI_AV_USER_ID` id given at insert, if any.
    pub user_id: Option<u64>,
}

struct Entry<P> {
    addr: Address,
    peer: P,
    refs: u32,
    user_id: Option<u64>,
}

struct Slot<P> {
    generation: u32,
    entry: Option<Entry<P>>,
}

struct AvInner<P> {
    slots: Vec<Slot<P>>,
    /// Free indices below `slots.len()`; the lowest is reused first.
    free: BTreeSet<u32>,
    /// Live address → index.
    rev: HashMap<Address, u32>,
    live: usize,
}

/// The kit's address vector (see the module docs).
pub struct KitAv<P = ()> {
    av_type: AvType,
    addr_format: AddrFormat,
    context: usize,
    asynchronous: bool,
    rx_ctx_bits: u32,
    /// Clears the receive-context bits.
    addr_mask: u64,
    /// Mask of a map generation.
    gen_mask: u32,
    max_entries: usize,
    /// Entries room was reserved for at open.
    reserved: usize,
    make_peer: PeerFn<P>,
    resolver: AvResolver,
    sink: Mutex<Option<AvEventSink>>,
    inner: RwLock<AvInner<P>>,
    /// Bumped (under the write lock) by every insert and remove: see [`KitAv::changes`].
    changes: AtomicU64,
    /// Set by the first insert with `FI_AV_USER_ID`: until then [`KitAv::reported`]
    /// answers without a lookup.
    has_user_ids: AtomicBool,
}

impl<P> fmt::Debug for KitAv<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KitAv")
            .field("av_type", &self.av_type)
            .field("addr_format", &self.addr_format)
            .field("asynchronous", &self.asynchronous)
            .field("rx_ctx_bits", &self.rx_ctx_bits)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<P: Default + Send + Sync + 'static> KitAv<P> {
    /// Open an AV whose per-peer values start as `P::default()`.
    ///
    /// # Errors
    /// As [`KitAv::open_with`].
    pub fn open(attr: &AvAttr, context: usize, config: AvConfig) -> Result<KitAv<P>> {
        KitAv::open_with(attr, context, config, |_| Ok(P::default()))
    }
}

impl<P: Send + Sync + 'static> KitAv<P> {
    /// Open an AV; `make_peer` builds the per-peer value of each new entry (its error
    /// fails that address). `context` is the AV's open context (the `fid` of its events).
    ///
    /// # Errors
    /// - `FI_EINVAL`: `rx_ctx_bits` outside 0..=16; `FI_READ` without a name.
    /// - `FI_ENOSYS`: a named (shared) AV or read-only open; the kit has no shared AVs.
    /// - `FI_EBADFLAGS`: `attr.flags` other than `FI_EVENT`, `FI_SYMMETRIC`, `FI_UNIVERSE`.
    /// - `FI_EINVAL`: with `attr.count` 0, an `FI_UNIVERSE_SIZE` that is not a size in
    ///   1..=4294967294 ([`universe_size`]).
    ///
    /// The room reserved at open is `attr.count`, or with 0 the universe size, at most
    /// [`RESERVE_MAX`] entries.
    pub fn open_with(
        attr: &AvAttr,
        context: usize,
        config: AvConfig,
        make_peer: impl Fn(&Address) -> Result<P> + Send + Sync + 'static,
    ) -> Result<KitAv<P>> {
        if !(0..=MAX_RX_CTX_BITS).contains(&attr.rx_ctx_bits) {
            return einval(format!(
                "av_open: rx_ctx_bits {} outside 0..={MAX_RX_CTX_BITS}",
                attr.rx_ctx_bits
            ));
        }
        let flags = attr.flags.bits();
        if attr.name.is_some() {
            return Err(Error::new(
                Errno::ENOSYS,
                "av_open: named (shared) address vectors are not supported",
            ));
        }
        if flags & AvFlags::READ.bits() != 0 {
            return einval("av_open: FI_READ (read-only) needs a named AV");
        }
        if flags & !OPEN_FLAGS != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av_open: unsupported flags {:#x}", flags & !OPEN_FLAGS),
            ));
        }
        let av_type = match attr.av_type {
            AvType::Unspec => match config.default_type {
                AvType::Map => AvType::Map,
                _ => AvType::Table,
            },
            t => t,
        };
        let bits = attr.rx_ctx_bits as u32;
        let addr_mask = if bits == 0 {
            u64::MAX
        } else {
            u64::MAX >> bits
        };
        let gen_mask = u32::MAX >> bits;
        let reserve = if attr.count == 0 {
            universe_size(config.universe_size)?
        } else {
            attr.count
        };
        let reserve = reserve.min(RESERVE_MAX);
        let max_entries = config.max_entries.min(MAX_INDEX as usize);
        let format = config.addr_format;
        let resolver = config.resolver.clone().unwrap_or_else(|| {
            AvResolver::new(move |node: &str, service: &str| {
                resolve_node_service(format, node, service)
            })
        });
        Ok(KitAv {
            av_type,
            addr_format: config.addr_format,
            context,
            asynchronous: flags & AV_EVENT != 0,
            rx_ctx_bits: bits,
            addr_mask,
            gen_mask,
            max_entries,
            reserved: reserve.min(max_entries),
            make_peer: Box::new(make_peer),
            resolver,
            sink: Mutex::new(None),
            changes: AtomicU64::new(0),
            has_user_ids: AtomicBool::new(false),
            inner: RwLock::new(AvInner {
                slots: Vec::with_capacity(reserve.min(max_entries)),
                free: BTreeSet::new(),
                rev: HashMap::with_capacity(reserve.min(max_entries)),
                live: 0,
            }),
        })
    }
}

mod insert;
mod lookup;
mod ops;
mod resolve;

pub use ops::{AvGate, GatedAv, SharedAv};
pub use resolve::{resolve_node_service, sym_range};

#[cfg(test)]
pub(crate) mod tests;
