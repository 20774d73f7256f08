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

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ofi_core::addr::Address;
use ofi_core::av::AvAttr;
use ofi_core::enums::{AddrFormat, AvType, EqEvent, ADDR_NOTAVAIL};
use ofi_core::eq::{EqErrorEntry, Event};
use ofi_core::error::{Errno, Error, Result};
use ofi_core::flags::{AvFlags, Caps, OpFlags};
use ofi_core::provider::{AvOps, EqOf, FabricOps, Unsupported};

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

/// Turns node and service strings into an address (see [`resolve_node_service`]).
pub type AvResolver = Arc<dyn Fn(&str, &str) -> Result<Address> + Send + Sync>;

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
#[derive(Clone)]
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
}

impl fmt::Debug for AvConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AvConfig")
            .field("addr_format", &self.addr_format)
            .field("default_type", &self.default_type)
            .field("universe_size", &self.universe_size)
            .field("max_entries", &self.max_entries)
            .field("custom_resolver", &self.resolver.is_some())
            .finish()
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
            Arc::new(move |node: &str, service: &str| resolve_node_service(format, node, service))
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
            inner: RwLock::new(AvInner {
                slots: Vec::with_capacity(reserve.min(max_entries)),
                free: BTreeSet::new(),
                rev: HashMap::with_capacity(reserve.min(max_entries)),
                live: 0,
            }),
        })
    }
}

impl<P> KitAv<P> {
    fn read(&self) -> RwLockReadGuard<'_, AvInner<P>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, AvInner<P>> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Entries room was reserved for at open (`attr.count`, or the universe size, at
    /// most [`RESERVE_MAX`]).
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// The AV type in effect (`Map` or `Table`, never `Unspec`).
    pub fn av_type(&self) -> AvType {
        self.av_type
    }

    /// The address format inserted addresses must have.
    pub fn addr_format(&self) -> AddrFormat {
        self.addr_format
    }

    /// Whether inserts report through events (`FI_EVENT`).
    pub fn is_async(&self) -> bool {
        self.asynchronous
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.read().live
    }

    /// Whether the AV has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots allocated so far (live or free); the table grows beyond its reservation
    /// as needed.
    pub fn slot_count(&self) -> usize {
        self.read().slots.len()
    }

    /// The receive-context index encoded in the top `rx_ctx_bits` of `fi_addr`
    /// (0 without receive-context bits).
    pub fn rx_index(&self, fi_addr: u64) -> usize {
        if self.rx_ctx_bits == 0 || fi_addr == ADDR_NOTAVAIL {
            0
        } else {
            (fi_addr >> (64 - self.rx_ctx_bits)) as usize
        }
    }

    /// The fabric address of a live index.
    fn encode(&self, generation: u32, index: u32) -> u64 {
        match self.av_type {
            AvType::Map => (u64::from(generation) << 32) | u64::from(index),
            _ => u64::from(index),
        }
    }

    /// The index behind `fi_addr` if it names a live entry.
    fn decode(&self, inner: &AvInner<P>, fi_addr: u64) -> Option<u32> {
        if fi_addr == ADDR_NOTAVAIL {
            return None;
        }
        let a = fi_addr & self.addr_mask;
        let (index, generation) = match self.av_type {
            AvType::Map => (a & 0xffff_ffff, Some(a >> 32)),
            _ => (a, None),
        };
        let index = u32::try_from(index).ok()?;
        let slot = inner.slots.get(index as usize)?;
        slot.entry.as_ref()?;
        match generation {
            Some(g) if g != u64::from(slot.generation) => None,
            _ => Some(index),
        }
    }

    /// The dense index of a live `fi_addr` (receive-context bits ignored), for
    /// provider arrays indexed like the AV. Allocation-free.
    ///
    /// # Errors
    /// `FI_EINVAL` (no message): not a live entry, stale (map), or `FI_ADDR_NOTAVAIL`.
    #[inline]
    pub fn index(&self, fi_addr: u64) -> Result<u32> {
        self.decode(&self.read(), fi_addr)
            .ok_or(Error::code_only(Errno::EINVAL))
    }

    /// Whether `fi_addr` names a live entry.
    pub fn contains(&self, fi_addr: u64) -> bool {
        self.decode(&self.read(), fi_addr).is_some()
    }

    /// The fabric address of the live entry at `index`, if any.
    pub fn fi_addr_of(&self, index: u32) -> Option<u64> {
        let inner = self.read();
        let slot = inner.slots.get(index as usize)?;
        slot.entry.as_ref()?;
        Some(self.encode(slot.generation, index))
    }

    /// Run `f` on the entry of `fi_addr` under the read lock (keep `f` short: inserts
    /// wait for it). Allocation-free.
    ///
    /// # Errors
    /// `FI_EINVAL` (no message) as [`KitAv::index`].
    #[inline]
    pub fn with_entry<R>(&self, fi_addr: u64, f: impl FnOnce(AvEntry<'_, P>) -> R) -> Result<R> {
        let inner = self.read();
        let index = self
            .decode(&inner, fi_addr)
            .ok_or(Error::code_only(Errno::EINVAL))?;
        let slot = &inner.slots[index as usize];
        match &slot.entry {
            Some(e) => Ok(f(AvEntry {
                fi_addr: self.encode(slot.generation, index),
                index,
                addr: &e.addr,
                peer: &e.peer,
                user_id: e.user_id,
            })),
            None => Err(Error::code_only(Errno::EINVAL)),
        }
    }

    /// How many inserts and removes have changed the AV (a counter, bumped under the
    /// write lock). A provider may cache what it derived from an entry together with
    /// this count and trust the cache while the count is unchanged.
    #[inline]
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// A clone of the per-peer value of `fi_addr` (for `P = Arc<_>` an atomic
    /// increment, no allocation).
    ///
    /// # Errors
    /// `FI_EINVAL` (no message) as [`KitAv::index`].
    #[inline]
    pub fn peer(&self, fi_addr: u64) -> Result<P>
    where
        P: Clone,
    {
        self.with_entry(fi_addr, |e| e.peer.clone())
    }

    /// `fi_av_lookup`: the address behind `fi_addr`.
    ///
    /// # Errors
    /// `FI_EINVAL`: not a live entry (never inserted, removed, stale map address).
    pub fn lookup(&self, fi_addr: u64) -> Result<Address> {
        self.with_entry(fi_addr, |e| e.addr.clone()).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("av lookup: fabric address {fi_addr:#x} is not in the AV"),
            )
        })
    }

    /// The fabric address `addr` was inserted as (`FI_SOURCE`), if it is live. O(1).
    pub fn reverse_lookup(&self, addr: &Address) -> Option<u64> {
        let inner = self.read();
        let &index = inner.rev.get(addr)?;
        let slot = inner.slots.get(index as usize)?;
        Some(self.encode(slot.generation, index))
    }

    /// What a completion reports as the source of a message from `addr`: its
    /// `FI_AV_USER_ID` id if it has one, else its fabric address, else
    /// `FI_ADDR_NOTAVAIL` (unknown peer).
    pub fn source_addr(&self, addr: &Address) -> u64 {
        let inner = self.read();
        let Some(&index) = inner.rev.get(addr) else {
            return ADDR_NOTAVAIL;
        };
        match inner.slots.get(index as usize) {
            Some(Slot {
                generation,
                entry: Some(e),
            }) => e.user_id.unwrap_or(self.encode(*generation, index)),
            _ => ADDR_NOTAVAIL,
        }
    }

    /// Every live entry as `(fi_addr, address)`, in index order.
    pub fn snapshot(&self) -> Vec<(u64, Address)> {
        let inner = self.read();
        inner
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.entry
                    .as_ref()
                    .map(|e| (self.encode(s.generation, i as u32), e.addr.clone()))
            })
            .collect()
    }

    /// `fi_av_straddr`: the `FI_ADDR_STR` text of an address (it need not be in the AV).
    pub fn straddr(&self, addr: &Address) -> String {
        addr.to_addr_str()
    }

    /// Set the sink of asynchronous-insert events (what `fi_av_bind` of an EQ does).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero `flags` (reserved, fi_av(3)); `FI_EINVAL` if a
    /// sink is already bound.
    pub fn bind_sink(&self, sink: AvEventSink, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av bind: flags {flags:#x} are reserved and must be 0"),
            ));
        }
        let mut s = self.sink.lock().unwrap_or_else(PoisonError::into_inner);
        if s.is_some() {
            return einval("av bind: an event queue is already bound");
        }
        *s = Some(sink);
        Ok(())
    }

    /// Check call-wide conditions; returns the sink for an asynchronous AV.
    fn begin(&self, flags: u64, user_ids: bool) -> Result<Option<AvEventSink>> {
        if flags & !INSERT_FLAGS != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av insert: unsupported flags {:#x}", flags & !INSERT_FLAGS),
            ));
        }
        if flags & INSERT_USER_ID != 0 && !user_ids {
            return einval("av insert: FI_AV_USER_ID needs user ids");
        }
        if !self.asynchronous {
            return Ok(None);
        }
        if flags & INSERT_SYNC_ERR != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "av insert: FI_SYNC_ERR applies to synchronous AVs only (this one has FI_EVENT)",
            ));
        }
        match &*self.sink.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(s) => Ok(Some(s.clone())),
            None => Err(Error::new(
                Errno::ENOEQ,
                "av insert: an FI_EVENT AV needs a bound event queue first",
            )),
        }
    }

    /// Report the outcome of an asynchronous call.
    fn report(&self, sink: Option<AvEventSink>, context: usize, results: &[Result<u64>]) {
        let Some(sink) = sink else { return };
        let mut count = 0u64;
        for (i, r) in results.iter().enumerate() {
            match r {
                Ok(_) => count += 1,
                Err(e) => sink(AvEvent::Error {
                    fid: self.context,
                    context,
                    index: i as u64,
                    err: e.code(),
                }),
            }
        }
        sink(AvEvent::Complete {
            fid: self.context,
            context,
            count,
        });
    }

    fn format_fits(&self, addr: &Address) -> bool {
        format_fits(self.addr_format, addr)
    }

    /// Insert one address under the write lock.
    fn insert_one(
        &self,
        inner: &mut AvInner<P>,
        addr: &Address,
        user_id: Option<u64>,
    ) -> Result<u64> {
        if !self.format_fits(addr) {
            return Err(Error::new(
                Errno::EINVAL,
                format!(
                    "av insert: address {addr} is {}, this AV takes {}",
                    addr.format(),
                    self.addr_format
                ),
            ));
        }
        if let Some(&index) = inner.rev.get(addr) {
            let slot = &mut inner.slots[index as usize];
            if let Some(e) = slot.entry.as_mut() {
                e.refs = e.refs.checked_add(1).ok_or_else(|| {
                    Error::new(Errno::ENOSPC, "av insert: address inserted too many times")
                })?;
                return Ok(self.encode(slot.generation, index));
            }
        }
        if inner.live >= self.max_entries {
            return Err(Error::new(
                Errno::ENOSPC,
                format!("av insert: the AV is full ({} entries)", self.max_entries),
            ));
        }
        let peer = (self.make_peer)(addr)?;
        let index = match inner.free.pop_first() {
            Some(i) => i,
            None => {
                let i = inner.slots.len() as u32;
                inner.slots.push(Slot {
                    generation: 1,
                    entry: None,
                });
                i
            }
        };
        let slot = &mut inner.slots[index as usize];
        slot.entry = Some(Entry {
            addr: addr.clone(),
            peer,
            refs: 1,
            user_id,
        });
        let fi_addr = self.encode(slot.generation, index);
        inner.rev.insert(addr.clone(), index);
        inner.live += 1;
        Ok(fi_addr)
    }

    fn insert_list(
        &self,
        addrs: &[std::result::Result<Address, Error>],
        user_ids: Option<&[u64]>,
        flags: u64,
        context: usize,
        sink: Option<AvEventSink>,
    ) -> Vec<Result<u64>> {
        let use_ids = flags & INSERT_USER_ID != 0;
        let results: Vec<Result<u64>> = {
            let mut inner = self.write();
            self.changes.fetch_add(1, Ordering::Release);
            addrs
                .iter()
                .enumerate()
                .map(|(i, a)| match a {
                    Ok(a) => {
                        let id = if use_ids {
                            user_ids.and_then(|u| u.get(i).copied())
                        } else {
                            None
                        };
                        self.insert_one(&mut inner, a, id)
                    }
                    Err(e) => Err(e.clone()),
                })
                .collect()
        };
        self.report(sink, context, &results);
        results
    }

    /// `fi_av_insert`: one status per address (`Ok(fi_addr)` or why it failed). On an
    /// `FI_EVENT` AV the outcome also goes to the sink (see the module docs).
    ///
    /// # Errors
    /// The whole call: `FI_EBADFLAGS` (unknown flag, `FI_SYNC_ERR` on an asynchronous
    /// AV), `FI_EINVAL` (`FI_AV_USER_ID` here: use [`KitAv::insert_user_ids`]),
    /// `FI_ENOEQ` (asynchronous AV without an EQ).
    pub fn insert(
        &self,
        addrs: &[Address],
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let list: Vec<_> = addrs.iter().cloned().map(Ok).collect();
        Ok(self.insert_list(&list, None, flags, context, sink))
    }

    /// `fi_av_insert` with `FI_AV_USER_ID`: `user_ids[i]` is recorded with `addrs[i]`
    /// (reported by [`KitAv::source_addr`]); the flag is implied.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; `FI_EINVAL` if `user_ids` is shorter than `addrs`.
    pub fn insert_user_ids(
        &self,
        addrs: &[Address],
        user_ids: &[u64],
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        if user_ids.len() < addrs.len() {
            return einval("av insert: fewer user ids than addresses");
        }
        let flags = flags | INSERT_USER_ID;
        let sink = self.begin(flags, true)?;
        let list: Vec<_> = addrs.iter().cloned().map(Ok).collect();
        Ok(self.insert_list(&list, Some(user_ids), flags, context, sink))
    }

    /// `fi_av_insertsvc`: resolve `node`/`service` with the AV's resolver, insert the
    /// address; one status.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; resolution failures fail the whole call (`FI_EINVAL`,
    /// `FI_ENOSYS` for a format without a resolver), as the C providers do.
    pub fn insertsvc(
        &self,
        node: &str,
        service: &str,
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let addr = (self.resolver)(node, service)?;
        Ok(self.insert_list(&[Ok(addr)], None, flags, context, sink))
    }

    /// `fi_av_insertsym`: `nodecnt × svccnt` addresses from the ranges [`sym_range`]
    /// expands, each resolved; a resolution failure fails that address only.
    ///
    /// # Errors
    /// As [`KitAv::insert`]; a malformed range is `FI_EINVAL` for the whole call.
    pub fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        flags: u64,
        context: usize,
    ) -> Result<Vec<Result<u64>>> {
        let sink = self.begin(flags, false)?;
        let pairs = sym_range(node, nodecnt, service, svccnt)?;
        let list: Vec<_> = pairs.iter().map(|(n, s)| (self.resolver)(n, s)).collect();
        Ok(self.insert_list(&list, None, flags, context, sink))
    }

    /// `fi_av_remove`: all or nothing — every fabric address must be live (a duplicate
    /// in the list counts as one more removal of that entry).
    ///
    /// # Errors
    /// `FI_EBADFLAGS` for non-zero `flags` (reserved); `FI_EINVAL` naming the first
    /// address that is not live, or an entry removed more often than it was inserted.
    pub fn remove(&self, fi_addrs: &[u64], flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av remove: flags {flags:#x} are reserved and must be 0"),
            ));
        }
        let mut inner = self.write();
        self.changes.fetch_add(1, Ordering::Release);
        let mut tally: HashMap<u32, u32> = HashMap::new();
        for (i, &fa) in fi_addrs.iter().enumerate() {
            let Some(index) = self.decode(&inner, fa) else {
                return einval(format!(
                    "av remove: fabric address #{i} ({fa:#x}) is not in the AV"
                ));
            };
            let n = tally.entry(index).or_insert(0);
            *n += 1;
            let refs = inner.slots[index as usize]
                .entry
                .as_ref()
                .map_or(0, |e| e.refs);
            if *n > refs {
                return einval(format!(
                    "av remove: fabric address #{i} ({fa:#x}) removed more often than inserted"
                ));
            }
        }
        for (index, n) in tally {
            let inner = &mut *inner;
            let slot = &mut inner.slots[index as usize];
            let gone = match slot.entry.as_mut() {
                Some(e) if e.refs > n => {
                    e.refs -= n;
                    None
                }
                _ => slot.entry.take(),
            };
            if let Some(e) = gone {
                slot.generation = match slot.generation.wrapping_add(1) & self.gen_mask {
                    0 => 1,
                    g => g,
                };
                inner.rev.remove(&e.addr);
                inner.free.insert(index);
                inner.live -= 1;
            }
        }
        Ok(())
    }
}

/// Whether `addr` may go into an AV of `format`.
fn format_fits(format: AddrFormat, addr: &Address) -> bool {
    match format {
        AddrFormat::UNSPEC => true,
        AddrFormat::SOCKADDR => matches!(addr, Address::Inet(_) | Address::Inet6(_)),
        AddrFormat::SOCKADDR_IN => matches!(addr, Address::Inet(_)),
        AddrFormat::SOCKADDR_IN6 => matches!(addr, Address::Inet6(_)),
        AddrFormat::STR => matches!(addr, Address::Str(_)),
        f => matches!(addr, Address::Raw { format, .. } if *format == f),
    }
}

/// The default resolver of node and service for an AV of `format`.
///
/// - A `node` containing `://` is an `FI_ADDR_STR` address (fi_av(3)); `service` must
///   then be empty. For `FI_ADDR_STR` AVs it is taken as is, otherwise parsed with
///   [`Address::parse_addr_str`].
/// - `FI_ADDR_STR`: `node` as is; `service` must be empty.
/// - `FI_SOCKADDR`, `_IN`, `_IN6`, `FI_FORMAT_UNSPEC`: `service` is a decimal port
///   (empty: 0); `node` an IP literal (IPv6 optionally in brackets) or a host name
///   resolved by the system; the first address of the family the format wants is taken.
///
/// # Errors
/// `FI_EINVAL`: empty node, a service where none is allowed, a non-numeric or too
/// large port, an unresolvable host, no address of the wanted family, or an address of
/// the wrong format. `FI_ENOSYS`: another format (the provider supplies a resolver).
pub fn resolve_node_service(format: AddrFormat, node: &str, service: &str) -> Result<Address> {
    if node.is_empty() {
        return einval("resolve: a node is required");
    }
    if node.contains("://") {
        if !service.is_empty() {
            return einval(format!(
                "resolve: node {node:?} is an FI_ADDR_STR address, so the service must be empty"
            ));
        }
        let a = if format == AddrFormat::STR {
            Address::Str(node.to_owned())
        } else {
            Address::parse_addr_str(node)?
        };
        if !format_fits(format, &a) {
            return einval(format!(
                "resolve: {node:?} is {}, this AV takes {format}",
                a.format()
            ));
        }
        return Ok(a);
    }
    match format {
        AddrFormat::STR => {
            if !service.is_empty() {
                return einval(format!(
                    "resolve: FI_ADDR_STR node {node:?} takes no service (got {service:?})"
                ));
            }
            Ok(Address::Str(node.to_owned()))
        }
        AddrFormat::SOCKADDR
        | AddrFormat::SOCKADDR_IN
        | AddrFormat::SOCKADDR_IN6
        | AddrFormat::UNSPEC => resolve_ip(format, node, service),
        f => Err(Error::new(
            Errno::ENOSYS,
            format!("resolve: no node/service resolver for {f}"),
        )),
    }
}

fn resolve_ip(format: AddrFormat, node: &str, service: &str) -> Result<Address> {
    let port = if service.is_empty() {
        0
    } else if service.bytes().all(|b| b.is_ascii_digit()) {
        service.parse::<u16>().map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("resolve: port {service:?} out of range"),
            )
        })?
    } else {
        return einval(format!("resolve: service {service:?} is not a port number"));
    };
    let want_v4 = format != AddrFormat::SOCKADDR_IN6;
    let want_v6 = format != AddrFormat::SOCKADDR_IN;
    let literal = node
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(node);
    let candidates: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => (node, port)
            .to_socket_addrs()
            .map_err(|e| {
                Error::new(
                    Errno::EINVAL,
                    format!("resolve: cannot resolve {node:?}: {e}"),
                )
            })?
            .collect(),
    };
    candidates
        .into_iter()
        .find(|a| (a.is_ipv4() && want_v4) || (a.is_ipv6() && want_v6))
        .map(|a| match a {
            SocketAddr::V4(a) => Address::Inet(SocketAddrV4::new(*a.ip(), a.port())),
            SocketAddr::V6(a) => Address::Inet6(SocketAddrV6::new(
                *a.ip(),
                a.port(),
                a.flowinfo(),
                a.scope_id(),
            )),
        })
        .ok_or_else(|| {
            Error::new(
                Errno::EINVAL,
                format!("resolve: {node:?} has no address for {format}"),
            )
        })
}

/// `count` strings starting at `s`: IP literals count as addresses, other strings
/// must end in a decimal number that is incremented (keeping its zero padding).
fn range_of(what: &str, s: &str, count: usize, ip: bool) -> Result<Vec<String>> {
    if count == 1 {
        return Ok(vec![s.to_owned()]);
    }
    let last = (count - 1) as u128;
    if ip {
        if let Ok(v4) = s.parse::<Ipv4Addr>() {
            let base = u32::from(v4);
            if u128::from(base) + last > u128::from(u32::MAX) {
                return einval(format!("insertsym: {count} nodes from {s} overflow IPv4"));
            }
            return Ok((0..count as u32)
                .map(|k| Ipv4Addr::from(base + k).to_string())
                .collect());
        }
        if let Ok(v6) = s.parse::<Ipv6Addr>() {
            let base = u128::from(v6);
            if base.checked_add(last).is_none() {
                return einval(format!("insertsym: {count} nodes from {s} overflow IPv6"));
            }
            return Ok((0..count as u128)
                .map(|k| Ipv6Addr::from(base + k).to_string())
                .collect());
        }
    }
    let digits = s.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return einval(format!(
            "insertsym: {what} {s:?} has no numeric suffix to range over ({count} wanted)"
        ));
    }
    let (prefix, num) = s.split_at(s.len() - digits);
    let base: u64 = num.parse().map_err(|_| {
        Error::new(
            Errno::EINVAL,
            format!("insertsym: {what} {s:?}: number too large"),
        )
    })?;
    if u128::from(base) + last > u128::from(u64::MAX) {
        return einval(format!("insertsym: {count} {what}s from {s:?} overflow"));
    }
    Ok((0..count as u64)
        .map(|k| format!("{prefix}{:0digits$}", base + k))
        .collect())
}

/// The node/service pairs of `fi_av_insertsym`, in insertion order: for each of
/// `nodecnt` nodes from `node`, `svccnt` services from `service` (fi_av(3)).
///
/// With a count above 1: an IPv4/IPv6 literal node counts as an address (10.0.0.255,
/// 10.0.1.0, ...); another node (a host name, an `FI_ADDR_STR` string) must end in a
/// decimal number, which is incremented keeping its width ("host09", "host10"); the
/// service likewise must end in a number. A count of 1 takes the string as is; a
/// count of 0 gives nothing.
///
/// # Errors
/// `FI_EINVAL`: `nodecnt × svccnt` overflows, a ranged string without a numeric
/// suffix, or a range that overflows its address/number space.
pub fn sym_range(
    node: &str,
    nodecnt: usize,
    service: &str,
    svccnt: usize,
) -> Result<Vec<(String, String)>> {
    let total = nodecnt
        .checked_mul(svccnt)
        .ok_or_else(|| Error::new(Errno::EINVAL, "insertsym: nodecnt × svccnt overflows"))?;
    if total == 0 {
        return Ok(Vec::new());
    }
    let nodes = range_of("node", node, nodecnt, true)?;
    let services = range_of("service", service, svccnt, false)?;
    let mut out = Vec::with_capacity(total);
    for n in &nodes {
        for s in &services {
            out.push((n.clone(), s.clone()));
        }
    }
    Ok(out)
}

/// Write statuses into `fi_addr` (failures as `FI_ADDR_NOTAVAIL`); the success count.
fn fill(results: &[Result<u64>], fi_addr: &mut [u64]) -> usize {
    let mut n = 0;
    for (r, out) in results.iter().zip(fi_addr.iter_mut()) {
        *out = match r {
            Ok(a) => {
                n += 1;
                *a
            }
            Err(_) => ADDR_NOTAVAIL,
        };
    }
    n
}

impl<P> KitAv<P> {
    /// What an [`AvOps`] insert returns: the success count, or 0 when asynchronous.
    fn ops_count(&self, n: usize) -> usize {
        if self.asynchronous {
            0
        } else {
            n
        }
    }
}

/// A [`KitAv`] shared by the provider's AV object and the endpoints bound to it: use
/// it as a provider's `DomainOps::Av` type (every call goes to the kit's `AvOps`), and
/// let endpoints keep [`SharedAv::kit`] clones.
#[derive(Debug)]
pub struct SharedAv<P = ()>(Arc<KitAv<P>>);

impl<P> SharedAv<P> {
    /// Share `av`.
    pub fn new(av: KitAv<P>) -> SharedAv<P> {
        SharedAv(Arc::new(av))
    }

    /// The shared AV (what endpoints keep).
    pub fn kit(&self) -> &Arc<KitAv<P>> {
        &self.0
    }
}

impl<F, P> AvOps<F> for SharedAv<P>
where
    F: FabricOps,
    EqOf<F>: AvEventTarget,
    P: Send + Sync + 'static,
{
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        AvOps::<F>::insert(&*self.0, addrs, fi_addr, flags, context)
    }

    fn insertsvc(
        &self,
        node: &str,
        service: &str,
        fi_addr: &mut u64,
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        AvOps::<F>::insertsvc(&*self.0, node, service, fi_addr, flags, context)
    }

    #[allow(clippy::too_many_arguments)]
    fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        AvOps::<F>::insertsym(
            &*self.0, node, nodecnt, service, svccnt, fi_addr, flags, context,
        )
    }

    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        AvOps::<F>::remove(&*self.0, fi_addr, flags)
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        AvOps::<F>::lookup(&*self.0, fi_addr)
    }

    fn straddr(&self, addr: &Address) -> String {
        AvOps::<F>::straddr(&*self.0, addr)
    }

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        AvOps::<F>::bind_eq(&*self.0, eq, flags)
    }
}

/// The C-shaped interface: failed entries become `FI_ADDR_NOTAVAIL`, the return value
/// is the number inserted (0 for an `FI_EVENT` AV). `FI_AV_USER_ID` takes the user ids
/// from `fi_addr` on input. `FI_SYNC_ERR` is accepted, but the per-entry codes cannot
/// reach the C caller's array through this trait (it carries `context` as a plain
/// integer); use the inherent methods for them.
impl<F, P> AvOps<F> for KitAv<P>
where
    F: FabricOps,
    EqOf<F>: AvEventTarget,
    P: Send + Sync + 'static,
{
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        if fi_addr.len() < addrs.len() {
            return einval("av insert: fewer fabric address slots than addresses");
        }
        let results = if flags & INSERT_USER_ID != 0 {
            let ids: Vec<u64> = fi_addr[..addrs.len()].to_vec();
            KitAv::insert_user_ids(self, addrs, &ids, flags, context)?
        } else {
            KitAv::insert(self, addrs, flags, context)?
        };
        Ok(self.ops_count(fill(&results, fi_addr)))
    }

    fn insertsvc(
        &self,
        node: &str,
        service: &str,
        fi_addr: &mut u64,
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        let results = KitAv::insertsvc(self, node, service, flags, context)?;
        Ok(self.ops_count(fill(&results, std::slice::from_mut(fi_addr))))
    }

    fn insertsym(
        &self,
        node: &str,
        nodecnt: usize,
        service: &str,
        svccnt: usize,
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        let total = nodecnt.saturating_mul(svccnt);
        if fi_addr.len() < total {
            return einval("av insertsym: fewer fabric address slots than nodecnt × svccnt");
        }
        let results = KitAv::insertsym(self, node, nodecnt, service, svccnt, flags, context)?;
        Ok(self.ops_count(fill(&results, fi_addr)))
    }

    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        KitAv::remove(self, fi_addr, flags)
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        KitAv::lookup(self, fi_addr)
    }

    fn straddr(&self, addr: &Address) -> String {
        KitAv::straddr(self, addr)
    }

    fn bind_eq(&self, eq: &EqOf<F>, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!("av bind: flags {flags:#x} are reserved and must be 0"),
            ));
        }
        self.bind_sink(eq.av_event_sink()?, flags)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A minimal provider family whose AV is `KitAv<()>` and whose MR is `KitMr`, to
    /// drive both through core's tables (shared with the MR tests).
    pub(crate) mod fam {
        use super::super::*;
        use crate::mr::{
            CounterHook, KitMr, MrConfig, MrEndpointTarget, MrTable, RmaCounterTarget,
        };
        use ofi_core::cntr::CntrAttr;
        use ofi_core::cq::{CqAttr, CqBuf, CqError};
        use ofi_core::eq::EqAttr;
        use ofi_core::mr::MrAttr;
        use ofi_core::provider::{
            BindTarget, CntrOps, CqOps, DomainOps, EndpointOps, EqOps, Host, Provider,
        };
        use ofi_core::{Caps, EpType, Info, Version};
        use std::cell::RefCell;
        use std::collections::VecDeque;
        use std::sync::atomic::{AtomicU64, Ordering};

        thread_local! {
            /// The MR table of the last domain opened on this thread.
            pub(crate) static LAST_TABLE: RefCell<Option<Arc<MrTable>>> = const { RefCell::new(None) };
        }

        pub(crate) fn last_table() -> Arc<MrTable> {
            LAST_TABLE
                .with(|t| t.borrow().clone())
                .expect("a domain was opened")
        }

        pub(crate) struct TProv;
        impl Provider for TProv {
            const NAME: &'static str = "kit_av_mr_test";
            const VERSION: Version = Version::new(1, 0);
            type Fabric = TFab;
            fn init(_host: &Host) -> Result<Self> {
                Ok(TProv)
            }
            fn info_templates(&self) -> Vec<Info> {
                vec![info(AddrFormat::SOCKADDR_IN, MrMode::empty())]
            }
            fn fabric(&self, _info: &Info) -> Result<TFab> {
                Ok(TFab)
            }
        }

        use ofi_core::flags::MrMode;

        pub(crate) fn info(format: AddrFormat, mode: MrMode) -> Info {
            let mut i = Info::new()
                .with_caps(Caps::MSG | Caps::RMA)
                .with_ep_type(EpType::Rdm)
                .with_addr_format(format);
            i.fabric_attr.name = Some("kit".into());
            i.fabric_attr.prov_name = Some(TProv::NAME.into());
            i.domain_attr.name = Some("kit0".into());
            i.domain_attr.mr_mode = mode;
            i
        }

        pub(crate) struct TFab;
        impl FabricOps for TFab {
            type Domain = TDom;
            type PassiveEp = Unsupported;
            type Eq = TEq;
            type Wait = Unsupported;
            fn domain(&self, info: &Info, _context: usize) -> Result<TDom> {
                let table = MrTable::new(MrConfig::new(info.domain_attr.mr_mode))?;
                LAST_TABLE.with(|t| *t.borrow_mut() = Some(table.clone()));
                Ok(TDom {
                    format: info.addr_format,
                    table,
                })
            }
            fn eq_open(&self, _attr: &EqAttr, _context: usize) -> Result<TEq> {
                Ok(TEq::default())
            }
        }

        pub(crate) struct TDom {
            format: AddrFormat,
            table: Arc<MrTable>,
        }
        impl DomainOps<TFab> for TDom {
            type Endpoint = TEp;
            type Cq = TCq;
            type Cntr = TCntr;
            type Av = KitAv<()>;
            type Mr = KitMr;
            fn endpoint(&self, _info: &Info, _context: usize, _flags: u64) -> Result<TEp> {
                static NEXT: AtomicU64 = AtomicU64::new(1);
                Ok(TEp(NEXT.fetch_add(1, Ordering::Relaxed)))
            }
            fn cq_open(&self, _attr: &CqAttr, _context: usize) -> Result<TCq> {
                Ok(TCq)
            }
            fn cntr_open(&self, _attr: &CntrAttr, _context: usize) -> Result<TCntr> {
                Ok(TCntr(Arc::new(AtomicU64::new(0))))
            }
            fn av_open(&self, attr: &AvAttr, context: usize) -> Result<KitAv<()>> {
                KitAv::open(attr, context, AvConfig::new(self.format))
            }
            fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
                self.table.register(attr, flags)
            }
        }

        pub(crate) struct TEp(pub(crate) u64);
        impl EndpointOps<TFab> for TEp {
            fn bind(&self, _target: BindTarget<'_, TFab>, _flags: OpFlags) -> Result<()> {
                Ok(())
            }
        }
        impl MrEndpointTarget for TEp {
            fn mr_endpoint_id(&self) -> u64 {
                self.0
            }
        }

        pub(crate) struct TCq;
        impl CqOps for TCq {
            fn read(&self, _buf: CqBuf<'_>, _src: Option<&mut [u64]>) -> Result<usize> {
                Err(Error::code_only(Errno::EAGAIN))
            }
            fn readerr(&self, _flags: u64) -> Result<CqError> {
                Err(Error::code_only(Errno::EAGAIN))
            }
        }

        pub(crate) struct TCntr(pub(crate) Arc<AtomicU64>);
        impl CntrOps for TCntr {
            fn read(&self) -> u64 {
                self.0.load(Ordering::Relaxed)
            }
            fn readerr(&self) -> u64 {
                0
            }
            fn add(&self, value: u64) -> Result<()> {
                self.0.fetch_add(value, Ordering::Relaxed);
                Ok(())
            }
            fn set(&self, value: u64) -> Result<()> {
                self.0.store(value, Ordering::Relaxed);
                Ok(())
            }
        }
        impl RmaCounterTarget for TCntr {
            fn rma_counter_hook(&self) -> Result<CounterHook> {
                let c = self.0.clone();
                Ok(CounterHook::new(move |n| {
                    c.fetch_add(n, Ordering::Relaxed);
                }))
            }
        }

        type EqItem = std::result::Result<Event, EqErrorEntry>;

        #[derive(Default)]
        pub(crate) struct TEq {
            q: Arc<Mutex<VecDeque<EqItem>>>,
        }
        impl EqOps for TEq {
            fn read(&self, peek: bool) -> Result<Event> {
                let mut q = self.q.lock().unwrap();
                match q.front() {
                    None => Err(Error::code_only(Errno::EAGAIN)),
                    Some(Err(_)) => Err(Error::code_only(Errno::EAVAIL)),
                    Some(Ok(e)) => {
                        let e = e.clone();
                        if !peek {
                            q.pop_front();
                        }
                        Ok(e)
                    }
                }
            }
            fn readerr(&self) -> Result<EqErrorEntry> {
                let mut q = self.q.lock().unwrap();
                match q.front() {
                    Some(Err(_)) => match q.pop_front() {
                        Some(Err(e)) => Ok(e),
                        _ => Err(Error::code_only(Errno::EAGAIN)),
                    },
                    _ => Err(Error::code_only(Errno::EAGAIN)),
                }
            }
        }
        impl AvEventTarget for TEq {
            fn av_event_sink(&self) -> Result<AvEventSink> {
                let q = self.q.clone();
                Ok(Arc::new(move |ev: AvEvent| {
                    q.lock().unwrap().push_back(ev.into_eq());
                }))
            }
        }
    }

    use fam::TFab;

    fn v4(s: &str) -> Address {
        Address::Inet(s.parse().unwrap())
    }

    fn attr(t: AvType) -> AvAttr {
        AvAttr {
            av_type: t,
            ..AvAttr::default()
        }
    }

    fn av(t: AvType) -> KitAv<()> {
        KitAv::open(&attr(t), 0x55, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap()
    }

    fn ok(v: Vec<Result<u64>>) -> Vec<u64> {
        v.into_iter().map(|r| r.unwrap()).collect()
    }

    fn code<T: fmt::Debug>(r: Result<T>) -> Errno {
        r.unwrap_err().code()
    }

    fn addrs(n: usize) -> Vec<Address> {
        (0..n)
            .map(|i| v4(&format!("10.0.0.{}:{}", i + 1, 7000 + i)))
            .collect()
    }

    #[test]
    fn open_validates_the_attributes() {
        let cfg = || AvConfig::new(AddrFormat::SOCKADDR_IN);
        let open = |a: AvAttr| KitAv::<()>::open(&a, 0, cfg());
        for bits in [-1, 17] {
            let a = AvAttr {
                rx_ctx_bits: bits,
                ..AvAttr::default()
            };
            assert_eq!(code(open(a)), Errno::EINVAL, "rx_ctx_bits {bits}");
        }
        let named = AvAttr {
            name: Some("shared".into()),
            ..AvAttr::default()
        };
        assert_eq!(code(open(named)), Errno::ENOSYS);
        let ro = AvAttr {
            flags: AvFlags::READ,
            ..AvAttr::default()
        };
        assert_eq!(code(open(ro)), Errno::EINVAL);
        let bad = AvAttr {
            flags: AvFlags::from_bits_retain(1 << 3),
            ..AvAttr::default()
        };
        assert_eq!(code(open(bad)), Errno::EBADFLAGS);
        let fine = AvAttr {
            flags: AvFlags::SYMMETRIC | AvFlags::UNIVERSE,
            rx_ctx_bits: 16,
            count: 3,
            ..AvAttr::default()
        };
        let a = open(fine).unwrap();
        assert_eq!(a.av_type(), AvType::Table);
        assert!(!a.is_async());
        assert!(a.is_empty());
        assert_eq!(a.addr_format(), AddrFormat::SOCKADDR_IN);
        let mut c = cfg();
        c.default_type = AvType::Map;
        assert_eq!(
            KitAv::<()>::open(&AvAttr::default(), 0, c)
                .unwrap()
                .av_type(),
            AvType::Map
        );
        assert_eq!(av(AvType::Map).av_type(), AvType::Map);
        assert!(format!("{:?}", av(AvType::Map)).contains("Map"));
        assert!(format!("{:?}", cfg()).contains("custom_resolver: false"));
    }

    #[test]
    fn table_indices_are_dense_and_reuse_the_lowest_free() {
        let t = av(AvType::Table);
        let a = addrs(6);
        assert_eq!(ok(t.insert(&a[..3], 0, 0).unwrap()), [0, 1, 2]);
        assert_eq!(ok(t.insert(&a[3..4], 0, 0).unwrap()), [3]);
        assert_eq!(t.len(), 4);
        t.remove(&[2, 0], 0).unwrap();
        assert_eq!(code(t.lookup(0)), Errno::EINVAL);
        assert_eq!(code(t.lookup(2)), Errno::EINVAL);
        assert_eq!(t.lookup(1).unwrap(), a[1]);
        assert_eq!(t.lookup(3).unwrap(), a[3]);
        // The lowest free index first, then the next one, then growth.
        assert_eq!(ok(t.insert(&a[4..6], 0, 0).unwrap()), [0, 2]);
        assert_eq!(ok(t.insert(&a[..1], 0, 0).unwrap()), [4]);
        assert_eq!(t.lookup(0).unwrap(), a[4]);
        assert_eq!(t.lookup(4).unwrap(), a[0]);
        assert_eq!(t.slot_count(), 5);
        assert_eq!(t.index(4).unwrap(), 4);
        assert_eq!(t.fi_addr_of(2), Some(2));
        assert_eq!(t.fi_addr_of(9), None);
        assert_eq!(code(t.lookup(5)), Errno::EINVAL);
        assert_eq!(code(t.lookup(ADDR_NOTAVAIL)), Errno::EINVAL);
        assert_eq!(code(t.lookup(1 << 40)), Errno::EINVAL);
        assert!(t.contains(1) && !t.contains(5));
        let e = t.lookup(7).unwrap_err();
        assert!(e.message().contains("0x7"), "{e}");
        assert_eq!(
            t.snapshot(),
            vec![
                (0, a[4].clone()),
                (1, a[1].clone()),
                (2, a[5].clone()),
                (3, a[3].clone()),
                (4, a[0].clone())
            ]
        );
    }

    #[test]
    fn map_addresses_carry_a_generation() {
        let m = av(AvType::Map);
        let a = addrs(3);
        let f = ok(m.insert(&a[..2], 0, 0).unwrap());
        assert_eq!(f, [1 << 32, (1 << 32) | 1]);
        assert!(f.iter().all(|&x| x != 0 && x != ADDR_NOTAVAIL));
        m.remove(&f[..1], 0).unwrap();
        let g = ok(m.insert(&a[2..3], 0, 0).unwrap());
        // Same slot, next generation: the old address is stale.
        assert_eq!(g, [(2 << 32)]);
        assert_eq!(code(m.lookup(f[0])), Errno::EINVAL);
        assert_eq!(code(m.index(f[0])), Errno::EINVAL);
        assert_eq!(code(m.remove(&f[..1], 0)), Errno::EINVAL);
        assert_eq!(m.lookup(g[0]).unwrap(), a[2]);
        assert_eq!(m.index(g[0]).unwrap(), 0);
        assert_eq!(m.fi_addr_of(0), Some(g[0]));
        // A bare index is not a map address.
        assert_eq!(code(m.lookup(1)), Errno::EINVAL);
        assert_eq!(code(m.lookup(u64::from(u32::MAX))), Errno::EINVAL);
    }

    #[test]
    fn generations_wrap_skipping_zero() {
        let a = AvAttr {
            av_type: AvType::Map,
            rx_ctx_bits: 16,
            ..AvAttr::default()
        };
        let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
        let x = [v4("1.1.1.1:1")];
        let first = ok(m.insert(&x, 0, 0).unwrap())[0];
        assert_eq!(first, 1 << 32);
        let mut last = first;
        for _ in 0..0xffff {
            m.remove(&[last], 0).unwrap();
            last = ok(m.insert(&x, 0, 0).unwrap())[0];
            assert_ne!(last >> 32, 0);
            assert_eq!(last >> 48, 0, "generation stays below the rx bits");
        }
        // 0xffff removals: generation 1 → 0xffff → (0 skipped) 1.
        assert_eq!(last, first);
    }

    #[test]
    fn rx_context_bits_are_ignored_by_lookups() {
        for t in [AvType::Table, AvType::Map] {
            let a = AvAttr {
                av_type: t,
                rx_ctx_bits: 4,
                ..AvAttr::default()
            };
            let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
            let f = ok(m.insert(&addrs(2), 0, 0).unwrap())[1];
            let rx = (5u64 << 60) | f;
            assert_eq!(m.lookup(rx).unwrap(), addrs(2)[1]);
            assert_eq!(m.rx_index(rx), 5);
            assert_eq!(m.rx_index(f), 0);
            assert_eq!(m.rx_index(ADDR_NOTAVAIL), 0);
            assert_eq!(code(m.lookup(ADDR_NOTAVAIL)), Errno::EINVAL);
        }
        assert_eq!(av(AvType::Table).rx_index(5u64 << 60), 0);
    }

    #[test]
    fn duplicates_share_an_entry_and_count_references() {
        for t in [AvType::Table, AvType::Map] {
            let m = av(t);
            let a = addrs(2);
            let f = ok(m
                .insert(&[a[0].clone(), a[1].clone(), a[0].clone()], 0, 0)
                .unwrap());
            assert_eq!(f[0], f[2]);
            assert_eq!(m.len(), 2);
            m.remove(&[f[0]], 0).unwrap();
            assert_eq!(m.lookup(f[0]).unwrap(), a[0]);
            assert_eq!(m.reverse_lookup(&a[0]), Some(f[0]));
            m.remove(&[f[0]], 0).unwrap();
            assert_eq!(code(m.lookup(f[0])), Errno::EINVAL);
            assert_eq!(m.reverse_lookup(&a[0]), None);
            assert_eq!(m.len(), 1);
        }
    }

    #[test]
    fn remove_is_all_or_nothing() {
        let t = av(AvType::Table);
        let f = ok(t.insert(&addrs(3), 0, 0).unwrap());
        assert_eq!(code(t.remove(&[f[0]], 1)), Errno::EBADFLAGS);
        let e = t.remove(&[f[0], 9, f[1]], 0).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.message().contains("#1"), "{e}");
        // Twice in one list but inserted once.
        assert_eq!(code(t.remove(&[f[2], f[2]], 0)), Errno::EINVAL);
        assert_eq!(t.len(), 3);
        t.remove(&[], 0).unwrap();
        t.remove(&f, 0).unwrap();
        assert!(t.is_empty());
        assert_eq!(code(t.remove(&f[..1], 0)), Errno::EINVAL);
    }

    #[test]
    fn per_entry_errors() {
        let t = av(AvType::Table);
        let list = [
            v4("1.2.3.4:5"),
            Address::Inet6("[::1]:5".parse().unwrap()),
            Address::Str("fi_x://y".into()),
            v4("1.2.3.4:6"),
        ];
        let r = t.insert(&list, INSERT_SYNC_ERR | INSERT_MORE, 0).unwrap();
        assert_eq!(*r[0].as_ref().unwrap(), 0);
        assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::EINVAL);
        assert!(r[1]
            .as_ref()
            .unwrap_err()
            .message()
            .contains("FI_SOCKADDR_IN6"));
        assert_eq!(r[2].as_ref().unwrap_err().code(), Errno::EINVAL);
        // Failures do not consume indices.
        assert_eq!(*r[3].as_ref().unwrap(), 1);

        // The per-peer constructor's error fails that address only.
        let p = KitAv::open_with(
            &attr(AvType::Table),
            0,
            AvConfig::new(AddrFormat::SOCKADDR),
            |a| match a.socket_addr().map(|s| s.port()) {
                Some(13) => Err(Error::new(Errno::ECONNREFUSED, "port 13 refused")),
                Some(p) => Ok(p),
                None => Ok(0),
            },
        )
        .unwrap();
        let r = p
            .insert(
                &[
                    v4("1.1.1.1:12"),
                    v4("1.1.1.1:13"),
                    Address::Inet6("[::1]:14".parse().unwrap()),
                ],
                0,
                0,
            )
            .unwrap();
        assert_eq!(*r[0].as_ref().unwrap(), 0);
        assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::ECONNREFUSED);
        assert_eq!(*r[2].as_ref().unwrap(), 1);
        assert_eq!(p.peer(1).unwrap(), 14);
        assert_eq!(p.peer(0).unwrap(), 12);
        assert_eq!(code(p.peer(2)), Errno::EINVAL);
        let seen = p
            .with_entry(1, |e| {
                (e.fi_addr, e.index, e.addr.clone(), *e.peer, e.user_id)
            })
            .unwrap();
        assert_eq!(
            seen,
            (1, 1, Address::Inet6("[::1]:14".parse().unwrap()), 14, None)
        );

        // A full AV.
        let mut c = AvConfig::new(AddrFormat::SOCKADDR_IN);
        c.max_entries = 2;
        let small = KitAv::<()>::open(&attr(AvType::Map), 0, c).unwrap();
        let r = small.insert(&addrs(3), 0, 0).unwrap();
        assert!(r[0].is_ok() && r[1].is_ok());
        assert_eq!(r[2].as_ref().unwrap_err().code(), Errno::ENOSPC);
        // A duplicate still fits: it is not a new entry.
        assert!(small.insert(&addrs(1), 0, 0).unwrap()[0].is_ok());
    }

    #[test]
    fn insert_flags_and_user_ids() {
        let t = av(AvType::Table);
        assert_eq!(code(t.insert(&addrs(1), 1 << 3, 0)), Errno::EBADFLAGS);
        assert_eq!(code(t.insert(&addrs(1), INSERT_USER_ID, 0)), Errno::EINVAL);
        assert_eq!(
            code(t.insert_user_ids(&addrs(2), &[1], 0, 0)),
            Errno::EINVAL
        );
        let a = addrs(3);
        let f = ok(t.insert_user_ids(&a[..2], &[0xaa, 0xbb], 0, 0).unwrap());
        assert_eq!(f, [0, 1]);
        let g = ok(t.insert(&a[2..], 0, 0).unwrap());
        assert_eq!(t.source_addr(&a[0]), 0xaa);
        assert_eq!(t.source_addr(&a[1]), 0xbb);
        assert_eq!(t.source_addr(&a[2]), g[0]);
        assert_eq!(t.source_addr(&v4("9.9.9.9:9")), ADDR_NOTAVAIL);
        assert_eq!(t.reverse_lookup(&a[0]), Some(0));
        assert_eq!(t.reverse_lookup(&v4("9.9.9.9:9")), None);
        assert_eq!(t.with_entry(1, |e| e.user_id).unwrap(), Some(0xbb));
        // The first insert's id stays.
        t.insert_user_ids(&a[..1], &[0xcc], 0, 0).unwrap();
        assert_eq!(t.source_addr(&a[0]), 0xaa);
        assert_eq!(t.straddr(&a[0]), "fi_sockaddr_in://10.0.0.1:7000");
    }

    fn sink() -> (AvEventSink, Arc<Mutex<Vec<AvEvent>>>) {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        (Arc::new(move |e| g.lock().unwrap().push(e)), got)
    }

    #[test]
    fn asynchronous_inserts_report_events() {
        let a = AvAttr {
            flags: AvFlags::EVENT,
            ..AvAttr::default()
        };
        let m = KitAv::<()>::open(&a, 0x77, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
        assert!(m.is_async());
        assert_eq!(code(m.insert(&addrs(1), 0, 5)), Errno::ENOEQ);
        assert_eq!(code(m.insertsvc("1.2.3.4", "5", 0, 5)), Errno::ENOEQ);
        let (s, got) = sink();
        assert_eq!(code(m.bind_sink(s.clone(), 1)), Errno::EBADFLAGS);
        m.bind_sink(s.clone(), 0).unwrap();
        assert_eq!(code(m.bind_sink(s, 0)), Errno::EINVAL);
        assert_eq!(
            code(m.insert(&addrs(1), INSERT_SYNC_ERR, 5)),
            Errno::EBADFLAGS
        );
        let list = [
            v4("1.1.1.1:1"),
            Address::Str("fi_x://a".into()),
            v4("1.1.1.1:2"),
        ];
        let r = m.insert(&list, 0, 5).unwrap();
        assert!(r[0].is_ok() && r[1].is_err() && r[2].is_ok());
        let ev = std::mem::take(&mut *got.lock().unwrap());
        assert_eq!(
            ev,
            vec![
                AvEvent::Error {
                    fid: 0x77,
                    context: 5,
                    index: 1,
                    err: Errno::EINVAL
                },
                AvEvent::Complete {
                    fid: 0x77,
                    context: 5,
                    count: 2
                },
            ]
        );
        let e = ev[0].clone().into_eq().unwrap_err();
        assert_eq!(
            (e.fid, e.context, e.data, e.err),
            (0x77, 5, 1, Errno::EINVAL)
        );
        let c = ev[1].clone().into_eq().unwrap();
        assert_eq!(
            (c.event, c.fid, c.context, c.data),
            (EqEvent::AvComplete, 0x77, 5, 2)
        );
        // Every call completes, even an empty one.
        m.insert(&[], 0, 6).unwrap();
        assert_eq!(
            *got.lock().unwrap(),
            [AvEvent::Complete {
                fid: 0x77,
                context: 6,
                count: 0
            }]
        );
        // A synchronous AV with a sink reports nothing.
        let t = av(AvType::Table);
        let (s, got) = sink();
        t.bind_sink(s, 0).unwrap();
        t.insert(&addrs(1), 0, 0).unwrap();
        assert!(got.lock().unwrap().is_empty());
    }

    #[test]
    fn kit_eq_takes_av_events() {
        use ofi_core::eq::EqAttr;
        use ofi_core::provider::EqOps;
        let eq = crate::eq::KitEq::new(&EqAttr::default()).unwrap();
        let a = AvAttr {
            flags: AvFlags::EVENT,
            ..AvAttr::default()
        };
        let m = KitAv::<()>::open(&a, 0x31, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
        m.bind_sink(eq.av_event_sink().unwrap(), 0).unwrap();
        m.insert(&[v4("1.1.1.1:1"), Address::Str("fi_x://".into())], 0, 4)
            .unwrap();
        assert_eq!(code(EqOps::read(&eq, false)), Errno::EAVAIL);
        let e = EqOps::readerr(&eq).unwrap();
        assert_eq!(
            (e.fid, e.context, e.data, e.err),
            (0x31, 4, 1, Errno::EINVAL)
        );
        let c = EqOps::read(&eq, false).unwrap();
        assert_eq!(
            (c.event, c.fid, c.context, c.data),
            (EqEvent::AvComplete, 0x31, 4, 1)
        );
    }

    #[test]
    fn resolve_node_and_service() {
        let r = |f, n, s| resolve_node_service(f, n, s);
        assert_eq!(
            r(AddrFormat::SOCKADDR_IN, "10.1.2.3", "80").unwrap(),
            v4("10.1.2.3:80")
        );
        assert_eq!(
            r(AddrFormat::SOCKADDR_IN, "10.1.2.3", "").unwrap(),
            v4("10.1.2.3:0")
        );
        let six = Address::Inet6("[fe80::1]:9".parse().unwrap());
        assert_eq!(r(AddrFormat::SOCKADDR_IN6, "fe80::1", "9").unwrap(), six);
        assert_eq!(r(AddrFormat::SOCKADDR, "[fe80::1]", "9").unwrap(), six);
        assert_eq!(
            r(AddrFormat::UNSPEC, "10.1.2.3", "1").unwrap(),
            v4("10.1.2.3:1")
        );
        assert_eq!(
            r(AddrFormat::SOCKADDR_IN, "localhost", "7").unwrap(),
            v4("127.0.0.1:7")
        );
        assert_eq!(
            r(AddrFormat::SOCKADDR_IN, "fi_sockaddr_in://10.0.0.1:4", "").unwrap(),
            v4("10.0.0.1:4")
        );
        assert_eq!(
            r(AddrFormat::STR, "fi_shm://42", "").unwrap(),
            Address::Str("fi_shm://42".into())
        );
        assert_eq!(
            r(AddrFormat::STR, "peer7", "").unwrap(),
            Address::Str("peer7".into())
        );
        for (f, n, s, want) in [
            (AddrFormat::SOCKADDR_IN, "", "1", "node"),
            (AddrFormat::SOCKADDR_IN, "10.0.0.1", "http", "port number"),
            (AddrFormat::SOCKADDR_IN, "10.0.0.1", "70000", "out of range"),
            (AddrFormat::SOCKADDR_IN, "fe80::1", "1", "no address"),
            (AddrFormat::SOCKADDR_IN6, "10.0.0.1", "1", "no address"),
            (
                AddrFormat::SOCKADDR_IN,
                "no-such-host.invalid",
                "1",
                "cannot resolve",
            ),
            (
                AddrFormat::SOCKADDR_IN,
                "fi_sockaddr_in://10.0.0.1:4",
                "5",
                "service must be empty",
            ),
            (
                AddrFormat::SOCKADDR_IN6,
                "fi_sockaddr_in://10.0.0.1:4",
                "",
                "takes FI_SOCKADDR_IN6",
            ),
            (AddrFormat::STR, "fi_shm://1", "2", "service must be empty"),
            (AddrFormat::STR, "peer", "2", "no service"),
        ] {
            let e = r(f, n, s).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{n:?} {s:?}");
            assert!(e.message().contains(want), "{n:?} {s:?}: {e}");
        }
        assert_eq!(code(r(AddrFormat::PSMX2, "x", "y")), Errno::ENOSYS);
    }

    #[test]
    fn sym_ranges() {
        let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            sym_range("10.1.1.1", 2, "5000", 2).unwrap(),
            p(&[
                ("10.1.1.1", "5000"),
                ("10.1.1.1", "5001"),
                ("10.1.1.2", "5000"),
                ("10.1.1.2", "5001")
            ])
        );
        assert_eq!(
            sym_range("host10", 2, "5000", 2).unwrap(),
            p(&[
                ("host10", "5000"),
                ("host10", "5001"),
                ("host11", "5000"),
                ("host11", "5001")
            ])
        );
        assert_eq!(
            sym_range("n09", 2, "x", 1).unwrap(),
            p(&[("n09", "x"), ("n10", "x")])
        );
        assert_eq!(sym_range("10.0.0.255", 2, "1", 1).unwrap()[1].0, "10.0.1.0");
        assert_eq!(sym_range("::ffff", 2, "1", 1).unwrap()[1].0, "::1:0");
        assert_eq!(
            sym_range("host", 1, "svc", 1).unwrap(),
            p(&[("host", "svc")])
        );
        assert!(sym_range("host", 0, "1", 5).unwrap().is_empty());
        assert!(sym_range("host", 3, "1", 0).unwrap().is_empty());
        for (n, nc, s, sc, want) in [
            ("host", 2, "1", 1, "numeric suffix"),
            ("h1", 1, "svc", 2, "numeric suffix"),
            ("255.255.255.255", 2, "1", 1, "overflow IPv4"),
            (
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                2,
                "1",
                1,
                "overflow IPv6",
            ),
            ("h18446744073709551615", 2, "1", 1, "overflow"),
            ("h99999999999999999999999", 2, "1", 1, "too large"),
            ("h1", usize::MAX, "1", 2, "overflows"),
        ] {
            let e = sym_range(n, nc, s, sc).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{n}");
            assert!(e.message().contains(want), "{n}: {e}");
        }
    }

    #[test]
    fn insertsvc_and_insertsym() {
        let t = av(AvType::Table);
        assert_eq!(ok(t.insertsvc("127.0.0.1", "7000", 0, 0).unwrap()), [0]);
        assert_eq!(t.lookup(0).unwrap(), v4("127.0.0.1:7000"));
        assert_eq!(code(t.insertsvc("127.0.0.1", "x", 0, 0)), Errno::EINVAL);
        assert_eq!(
            code(t.insertsvc("127.0.0.1", "1", 1 << 3, 0)),
            Errno::EBADFLAGS
        );
        let f = ok(t.insertsym("127.0.0.1", 4, "7000", 2, 0, 0).unwrap());
        // 127.0.0.1:7000 is already in: a duplicate keeps index 0.
        assert_eq!(f, [0, 1, 2, 3, 4, 5, 6, 7]);
        let want: Vec<Address> = (1..=4)
            .flat_map(|n| (7000..7002).map(move |p| v4(&format!("127.0.0.{n}:{p}"))))
            .collect();
        for (fa, a) in f.iter().zip(&want) {
            assert_eq!(&t.lookup(*fa).unwrap(), a);
        }
        assert_eq!(code(t.insertsym("host", 2, "1", 1, 0, 0)), Errno::EINVAL);
        // A resolution failure fails that address only.
        let r = t.insertsym("10.0.0.1", 1, "65535", 2, 0, 0).unwrap();
        assert!(r[0].is_ok());
        assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::EINVAL);

        // A provider resolver.
        let mut c = AvConfig::new(AddrFormat::PSMX2);
        c.resolver = Some(Arc::new(|n: &str, s: &str| {
            Ok(Address::Raw {
                format: AddrFormat::PSMX2,
                bytes: format!("{n}/{s}").into_bytes(),
            })
        }));
        let p = KitAv::<()>::open(&attr(AvType::Map), 0, c).unwrap();
        let f = ok(p.insertsym("n1", 2, "4", 1, 0, 0).unwrap());
        assert_eq!(
            p.lookup(f[1]).unwrap(),
            Address::Raw {
                format: AddrFormat::PSMX2,
                bytes: b"n2/4".to_vec()
            }
        );
    }

    #[test]
    fn av_ops_shape() {
        let t = av(AvType::Table);
        let ops = |a: &KitAv<()>, list: &[Address], out: &mut [u64], flags| {
            <KitAv<()> as AvOps<TFab>>::insert(a, list, out, flags, 0)
        };
        let mut out = [0u64; 3];
        let list = [
            v4("1.1.1.1:1"),
            Address::Str("fi_x://".into()),
            v4("1.1.1.1:2"),
        ];
        assert_eq!(ops(&t, &list, &mut out, 0).unwrap(), 2);
        assert_eq!(out, [0, ADDR_NOTAVAIL, 1]);
        assert_eq!(code(ops(&t, &list, &mut out[..2], 0)), Errno::EINVAL);
        // User ids come in through fi_addr.
        let mut ids = [0x10, 0x20];
        assert_eq!(ops(&t, &addrs(2), &mut ids, INSERT_USER_ID).unwrap(), 2);
        assert_eq!(ids, [2, 3]);
        assert_eq!(t.source_addr(&addrs(2)[1]), 0x20);
        let mut one = 0;
        assert_eq!(
            <KitAv<()> as AvOps<TFab>>::insertsvc(&t, "1.1.1.1", "3", &mut one, 0, 0).unwrap(),
            1
        );
        assert_eq!(one, 4);
        let mut sym = [0u64; 4];
        assert_eq!(
            <KitAv<()> as AvOps<TFab>>::insertsym(&t, "2.2.2.2", 2, "1", 2, &mut sym, 0, 0)
                .unwrap(),
            4
        );
        assert_eq!(sym, [5, 6, 7, 8]);
        assert_eq!(
            code(<KitAv<()> as AvOps<TFab>>::insertsym(
                &t, "2.2.2.2", 2, "1", 3, &mut sym, 0, 0
            )),
            Errno::EINVAL
        );
        assert_eq!(
            <KitAv<()> as AvOps<TFab>>::lookup(&t, 4).unwrap(),
            v4("1.1.1.1:3")
        );
        <KitAv<()> as AvOps<TFab>>::remove(&t, &[4], 0).unwrap();
        assert_eq!(
            code(<KitAv<()> as AvOps<TFab>>::lookup(&t, 4)),
            Errno::EINVAL
        );
        assert_eq!(
            <KitAv<()> as AvOps<TFab>>::straddr(&t, &v4("1.2.3.4:5")),
            "fi_sockaddr_in://1.2.3.4:5"
        );
        // Asynchronous: the count is 0, fi_addr is still filled.
        let a = AvAttr {
            flags: AvFlags::EVENT,
            ..AvAttr::default()
        };
        let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
        let eq = fam::TEq::default();
        assert_eq!(
            code(<KitAv<()> as AvOps<TFab>>::bind_eq(&m, &eq, 2)),
            Errno::EBADFLAGS
        );
        <KitAv<()> as AvOps<TFab>>::bind_eq(&m, &eq, 0).unwrap();
        let mut out = [0u64; 1];
        assert_eq!(ops(&m, &addrs(1), &mut out, 0).unwrap(), 0);
        assert_eq!(out, [0]);
    }

    #[test]
    fn through_the_core_tables() {
        use ofi_core::eq::EqAttr;
        use ofi_core::provider::init_builtin;
        let h = init_builtin::<fam::TProv>().unwrap();
        let info = fam::info(AddrFormat::SOCKADDR_IN, ofi_core::MrMode::empty());
        let fabric = h.open_fabric(&info).unwrap();
        let domain = fabric.domain(&info).unwrap();
        let t = domain.av_open(&attr(AvType::Table)).unwrap();
        assert_eq!(t.insert(&addrs(2)).unwrap(), [0, 1]);
        assert_eq!(
            t.insert(&[Address::Str("fi_x://".into())]).unwrap(),
            [ADDR_NOTAVAIL]
        );
        assert_eq!(t.insertsvc("127.0.0.1", "9", 0).unwrap(), 2);
        assert_eq!(t.insertsym("127.0.0.2", 2, "1", 1, 0).unwrap(), [3, 4]);
        assert_eq!(t.lookup(4).unwrap(), v4("127.0.0.3:1"));
        assert_eq!(t.lookup(9).unwrap_err().code(), Errno::EINVAL);
        t.remove(&[4], 0).unwrap();
        assert_eq!(t.remove(&[4], 0).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            t.straddr(&v4("1.2.3.4:5")).unwrap(),
            "fi_sockaddr_in://1.2.3.4:5"
        );
        assert_eq!(
            t.insertsvc("127.0.0.1", "x", 0).unwrap_err().code(),
            Errno::EINVAL
        );

        // An asynchronous AV reporting on the EQ.
        let a = AvAttr {
            av_type: AvType::Map,
            flags: AvFlags::EVENT,
            ..AvAttr::default()
        };
        let m = domain.av_open(&a).unwrap();
        assert_eq!(m.insert(&addrs(1)).unwrap_err().code(), Errno::ENOEQ);
        let eq = fabric.eq_open(&EqAttr::default()).unwrap();
        m.bind_eq(&eq, 0).unwrap();
        let mut out = [0u64; 2];
        let n = m
            .insert_into(
                &[v4("1.1.1.1:1"), Address::Str("fi_x://".into())],
                &mut out,
                0,
                9,
            )
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(out, [1 << 32, ADDR_NOTAVAIL]);
        assert_eq!(eq.read().unwrap_err().code(), Errno::EAVAIL);
        let e = eq.readerr().unwrap();
        assert_eq!((e.context, e.data, e.err), (9, 1, Errno::EINVAL));
        let c = eq.read().unwrap();
        assert_eq!((c.event, c.context, c.data), (EqEvent::AvComplete, 9, 1));
    }

    /// The model of an AV: live fabric address → (address, references).
    #[derive(Default)]
    struct Model {
        live: HashMap<u64, (Address, u32)>,
        issued: Vec<u64>,
        removed: Vec<u64>,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(Vec<u8>),
        Remove(usize),
        Lookup(usize),
        LookupRaw(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => prop::collection::vec(0u8..12, 1..4).prop_map(Op::Insert),
            2 => any::<usize>().prop_map(Op::Remove),
            2 => any::<usize>().prop_map(Op::Lookup),
            1 => any::<u64>().prop_map(Op::LookupRaw),
        ]
    }

    fn pool(i: u8) -> Address {
        v4(&format!("10.9.0.{i}:{}", 100 + u16::from(i)))
    }

    fn run_model(t: AvType, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
        let a = av(t);
        let mut m = Model::default();
        for op in ops {
            match op {
                Op::Insert(ix) => {
                    let list: Vec<Address> = ix.iter().map(|&i| pool(i)).collect();
                    let got = ok(a.insert(&list, 0, 0).unwrap());
                    for (addr, fa) in list.iter().zip(got) {
                        let existing = m.live.iter().find(|(_, (x, _))| x == addr).map(|(k, _)| *k);
                        match existing {
                            Some(k) => {
                                prop_assert_eq!(fa, k);
                                m.live.get_mut(&k).unwrap().1 += 1;
                            }
                            None => {
                                prop_assert!(!m.live.contains_key(&fa));
                                if t == AvType::Table {
                                    let lowest = (0..).find(|i| !m.live.contains_key(i)).unwrap();
                                    prop_assert_eq!(fa, lowest);
                                } else {
                                    prop_assert!(
                                        !m.removed.contains(&fa),
                                        "stale address reissued"
                                    );
                                    prop_assert!(fa != 0 && fa != ADDR_NOTAVAIL);
                                }
                                m.live.insert(fa, (addr.clone(), 1));
                                m.issued.push(fa);
                            }
                        }
                    }
                }
                Op::Remove(i) => {
                    if m.issued.is_empty() {
                        continue;
                    }
                    let fa = m.issued[i % m.issued.len()];
                    let r = a.remove(&[fa], 0);
                    match m.live.get_mut(&fa) {
                        Some(e) => {
                            prop_assert!(r.is_ok());
                            e.1 -= 1;
                            if e.1 == 0 {
                                m.live.remove(&fa);
                                m.removed.push(fa);
                            }
                        }
                        None => prop_assert_eq!(r.unwrap_err().code(), Errno::EINVAL),
                    }
                }
                Op::Lookup(i) => {
                    if m.issued.is_empty() {
                        continue;
                    }
                    let fa = m.issued[i % m.issued.len()];
                    check_lookup(&a, &m, fa)?;
                }
                Op::LookupRaw(fa) => check_lookup(&a, &m, fa)?,
            }
            prop_assert_eq!(a.len(), m.live.len());
        }
        for (fa, (addr, _)) in &m.live {
            prop_assert_eq!(a.reverse_lookup(addr), Some(*fa));
        }
        Ok(())
    }

    fn check_lookup(a: &KitAv<()>, m: &Model, fa: u64) -> std::result::Result<(), TestCaseError> {
        match m.live.get(&fa) {
            Some((addr, _)) => {
                prop_assert_eq!(&a.lookup(fa).unwrap(), addr);
                prop_assert!(a.contains(fa));
            }
            None => {
                prop_assert_eq!(a.lookup(fa).unwrap_err().code(), Errno::EINVAL);
                prop_assert_eq!(a.index(fa).unwrap_err().code(), Errno::EINVAL);
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn table_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
            run_model(AvType::Table, ops)?;
        }

        #[test]
        fn map_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
            run_model(AvType::Map, ops)?;
        }

        #[test]
        fn sym_range_counts(n in 0usize..6, s in 0usize..6, base in 0u32..1000) {
            let r = sym_range(&format!("h{base}"), n, &format!("{base}"), s).unwrap();
            prop_assert_eq!(r.len(), n * s);
            if n > 0 && s > 0 {
                prop_assert_eq!(&r[r.len() - 1], &(format!("h{}", base + n as u32 - 1), format!("{}", base + s as u32 - 1)));
            }
        }
    }

    #[test]
    fn concurrent_lookups_during_inserts() {
        let a = Arc::new(
            KitAv::<Arc<u32>>::open_with(
                &attr(AvType::Map),
                0,
                AvConfig::new(AddrFormat::SOCKADDR_IN),
                |addr| {
                    Ok(Arc::new(u32::from(
                        addr.socket_addr().map_or(0, |s| s.port()),
                    )))
                },
            )
            .unwrap(),
        );
        let published = Arc::new(Mutex::new(Vec::<(u64, u16)>::new()));
        let done = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (a, published, done) = (a.clone(), published.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut checked = 0u64;
                    let mut k = r;
                    while done.load(Ordering::Acquire) == 0 || checked < 1000 {
                        let snap = published.lock().unwrap().clone();
                        if let Some(&(fa, port)) = snap.get(k % snap.len().max(1)) {
                            // Entries published are never removed in this test.
                            assert_eq!(*a.peer(fa).unwrap(), u32::from(port));
                            assert_eq!(a.lookup(fa).unwrap().socket_addr().unwrap().port(), port);
                            checked += 1;
                        }
                        assert_eq!(a.index(ADDR_NOTAVAIL).unwrap_err().code(), Errno::EINVAL);
                        k += 7;
                    }
                    checked
                })
            })
            .collect();
        let mut scratch = VecDeque::new();
        for i in 0..3000u32 {
            let port = (i % 60000) as u16 + 1;
            let addr = v4(&format!("10.{}.{}.1:{port}", i >> 8, i & 0xff));
            let fa = ok(a.insert(std::slice::from_ref(&addr), 0, 0).unwrap())[0];
            if i % 3 == 0 {
                // Churn: some entries come and go (never published).
                scratch.push_back(fa);
                if scratch.len() > 5 {
                    a.remove(&[scratch.pop_front().unwrap()], 0).unwrap();
                }
            } else {
                published.lock().unwrap().push((fa, port));
            }
        }
        done.store(1, Ordering::Release);
        for r in readers {
            assert!(r.join().unwrap() >= 1000);
        }
        assert_eq!(a.len(), 2000 + scratch.len());
    }
}
