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
pub(crate) mod tests;
