//! The address vector: the kit's [`SharedAv`], and named AVs shared by the processes
//! of the host (`FI_SHARED_AV`, fi_av(3) `attr.name`): a [`GatedAv`] whose gate,
//! [`Sharing`], keeps the shared table.
//!
//! # Named AVs
//!
//! `fi_av_open` with `attr.name` `NAME` (without `FI_READ`) creates the table
//! `/dev/shm/ofi-shmav-NAME` next to the process's own AV: each address inserted is
//! appended there with the `fi_addr_t` it got. Another process opens it with the same
//! name and `FI_READ`: a read-only view whose own AV holds the same addresses at the
//! same `fi_addr_t`s — they are replayed, in order, into an AV of the creator's type
//! (inserting the same addresses in the same order into an empty AV gives the same
//! `fi_addr_t`s; each is checked, a difference is `FI_EIO`). The view takes in what
//! the creator inserted before it opened, and what was inserted since at each
//! `fi_av_lookup` / `fi_av_straddr` of the view.
//!
//! The table: a 64-byte header (magic `OFIRSAV1` u64, version u32, capacity u32,
//! count u32 — atomic, entries published —, AV type u32, creator pid u32 at 24 and
//! start time u64 at 32), then `capacity` entries of
//! 128 bytes (`fi_addr_t` u64, address length u32 — atomic, written last —, 4 bytes
//! reserved, the `fi_shm://` address). The creator's inserts are serialized, so the
//! table's order is the order of its `fi_addr_t`s. Capacity: `attr.count` (at least
//! [`MIN_CAPACITY`], at most [`MAX_CAPACITY`]; 0: [`DEFAULT_CAPACITY`]); inserts beyond
//! it fail with `FI_ENOSPC`.
//!
//! Limits (each an error, never a silent divergence): the view is read-only (inserts
//! and removals `FI_EOPNOTSUPP`); the creator cannot remove from a named AV, nor
//! insert by service or symbolically (`FI_EOPNOTSUPP`: the view could not replay
//! them); a named AV does not take `FI_EVENT` (`FI_EINVAL`). The creator unlinks the
//! table when its AV closes; views keep their mapping. A creator that dies leaves the
//! table behind, until the next creator of the name replaces it (the header names the
//! creator's pid and start time; a live creator's table is never replaced).
//!
//! Every byte read from the table is checked (count within the capacity, lengths
//! within an entry, addresses valid `fi_shm://` names): a corrupt table is `FI_EPROTO`,
//! never a panic or a read outside the mapping.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use ofi_core::addr::Address;
use ofi_core::av::AvAttr;
use ofi_core::flags::AvFlags;
use ofi_core::provider::AvOps;
use ofi_core::{AddrFormat, AvType, Errno, Error, Result, ADDR_NOTAVAIL};
use ofi_kit::av::{AvConfig, AvGate, GatedAv, KitAv, SharedAv};
use ofi_kit::wait::lock;

use crate::fabric::{region_name, Fabric};
use crate::region::{self, Mapping};
use crate::NAME;

/// Prefix of a named AV's table in `/dev/shm`.
pub const TABLE_PREFIX: &str = "ofi-shmav-";
/// Entries of a table opened with `attr.count` 0.
pub const DEFAULT_CAPACITY: usize = 1024;
/// Fewest entries of a table.
pub const MIN_CAPACITY: usize = 16;
/// Most entries of a table.
pub const MAX_CAPACITY: usize = 1 << 16;

const MAGIC: u64 = u64::from_le_bytes(*b"OFIRSAV1");
const VERSION: u32 = 1;
const HDR: usize = 64;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_CAPACITY: usize = 12;
const H_COUNT: usize = 16;
const H_AV_TYPE: usize = 20;
const H_PID: usize = 24;
const H_START: usize = 32;
const ENTRY: usize = 128;
const E_FI_ADDR: usize = 0;
const E_LEN: usize = 8;
const E_ADDR: usize = 16;
const ADDR_MAX: usize = ENTRY - E_ADDR;

fn proto(what: impl std::fmt::Display) -> Error {
    Error::new(Errno::EPROTO, format!("{NAME}: shared AV table: {what}"))
}

fn unsupported(what: &str) -> Error {
    Error::new(Errno::EOPNOTSUPP, format!("{NAME}: {what}"))
}

/// A named AV's table in shared memory.
#[derive(Debug)]
struct Table {
    map: Mapping,
    capacity: usize,
    file: String,
    /// The creator's table (unlinked on drop); a view's is not.
    owner: bool,
}

impl Drop for Table {
    fn drop(&mut self) {
        if self.owner {
            region::unlink(&self.file);
        }
    }
}

impl Table {
    fn u32_at(&self, off: usize) -> Result<&std::sync::atomic::AtomicU32> {
        self.map.u32_at(off).ok_or_else(|| proto("offset outside"))
    }

    /// Published entries (at most the capacity).
    fn count(&self) -> Result<usize> {
        let n = self.u32_at(H_COUNT)?.load(Ordering::Acquire) as usize;
        if n > self.capacity {
            return Err(proto(format!(
                "count {n} beyond capacity {}",
                self.capacity
            )));
        }
        Ok(n)
    }

    fn create(file: String, capacity: usize, av_type: AvType) -> Result<Table> {
        let len = HDR + capacity * ENTRY;
        let map = match Mapping::create_file(&file, len) {
            Err(e) if e.code() == Errno::EADDRINUSE && Table::creator_gone(&file) => {
                region::unlink(&file);
                Mapping::create_file(&file, len)?
            }
            other => other?,
        };
        let t = Table {
            map,
            capacity,
            file,
            owner: true,
        };
        let magic = t.map.u64_at(H_MAGIC).ok_or_else(|| proto("no header"))?;
        t.u32_at(H_VERSION)?.store(VERSION, Ordering::Relaxed);
        t.u32_at(H_CAPACITY)?
            .store(capacity as u32, Ordering::Relaxed);
        t.u32_at(H_AV_TYPE)?
            .store(u32::from(av_type == AvType::Map), Ordering::Relaxed);
        let pid = std::process::id() as i32;
        t.u32_at(H_PID)?.store(pid as u32, Ordering::Relaxed);
        let start = t.map.u64_at(H_START).ok_or_else(|| proto("no header"))?;
        start.store(region::process_start(pid).unwrap_or(0), Ordering::Relaxed);
        magic.store(MAGIC, Ordering::Release);
        Ok(t)
    }

    /// Whether the existing table `file` is a table of this provider whose creator is
    /// dead (then it may be replaced); anything else is kept.
    fn creator_gone(file: &str) -> bool {
        let Ok(map) = Mapping::open_file(file) else {
            return false;
        };
        let word = |off| map.u64_at(off).map(|w| w.load(Ordering::Acquire));
        let pid = map.u32_at(H_PID).map(|w| w.load(Ordering::Relaxed) as i32);
        match (word(H_MAGIC), pid, word(H_START)) {
            (Some(MAGIC), Some(pid), Some(start)) => !region::pid_alive(pid, start),
            _ => false,
        }
    }

    /// Open the table `file` and validate its header: the table and the creator's AV
    /// type.
    fn open(file: String) -> Result<(Table, AvType)> {
        let map = Mapping::open_file(&file).map_err(|e| {
            if e.code() == Errno::ENOENT {
                Error::new(Errno::ENOENT, format!("{NAME}: no shared AV {file:?}"))
            } else {
                e
            }
        })?;
        let mut t = Table {
            map,
            capacity: 0,
            file,
            owner: false,
        };
        let magic = t.map.u64_at(H_MAGIC).ok_or_else(|| proto("no header"))?;
        if magic.load(Ordering::Acquire) != MAGIC {
            return Err(proto("bad magic"));
        }
        let v = t.u32_at(H_VERSION)?.load(Ordering::Relaxed);
        if v != VERSION {
            return Err(proto(format!("version {v}, this provider reads {VERSION}")));
        }
        let cap = t.u32_at(H_CAPACITY)?.load(Ordering::Relaxed) as usize;
        if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&cap) || HDR + cap * ENTRY > t.map.len() {
            return Err(proto(format!("capacity {cap} for {} bytes", t.map.len())));
        }
        t.capacity = cap;
        let av_type = match t.u32_at(H_AV_TYPE)?.load(Ordering::Relaxed) {
            0 => AvType::Table,
            1 => AvType::Map,
            other => return Err(proto(format!("AV type {other}"))),
        };
        Ok((t, av_type))
    }

    /// Append entry `i` (the caller holds the creator's insert lock).
    fn append(&self, i: usize, addr: &str, fi_addr: u64) -> Result<()> {
        let base = HDR + i * ENTRY;
        let bytes = addr.as_bytes();
        if bytes.len() > ADDR_MAX || i >= self.capacity {
            return Err(proto(format!("entry {i} does not fit")));
        }
        let fa = self
            .map
            .u64_at(base + E_FI_ADDR)
            .ok_or_else(|| proto("entry"))?;
        fa.store(fi_addr, Ordering::Relaxed);
        if !self.map.write_bytes(base + E_ADDR, bytes) {
            return Err(proto("entry outside"));
        }
        self.u32_at(base + E_LEN)?
            .store(bytes.len() as u32, Ordering::Release);
        self.u32_at(H_COUNT)?.store(i as u32 + 1, Ordering::Release);
        Ok(())
    }

    /// Entry `i` (below a count read before): its address and `fi_addr_t`.
    fn entry(&self, i: usize) -> Result<(Address, u64)> {
        let base = HDR + i * ENTRY;
        let n = self.u32_at(base + E_LEN)?.load(Ordering::Acquire) as usize;
        if n == 0 || n > ADDR_MAX {
            return Err(proto(format!("entry {i}: address length {n}")));
        }
        let mut buf = vec![0u8; n];
        if !self.map.read_bytes(base + E_ADDR, &mut buf) {
            return Err(proto("entry outside"));
        }
        let s = String::from_utf8(buf).map_err(|_| proto(format!("entry {i}: not UTF-8")))?;
        let addr = Address::Str(s);
        region_name(&addr).map_err(|e| proto(format!("entry {i}: {}", e.message())))?;
        let fa = self
            .map
            .u64_at(base + E_FI_ADDR)
            .ok_or_else(|| proto("entry"))?;
        Ok((addr, fa.load(Ordering::Relaxed)))
    }
}

/// How a named AV is shared.
#[derive(Debug)]
enum Role {
    /// Not named: the process's own AV.
    Private,
    /// The creator: inserts are appended to the table (under the lock).
    Creator(Mutex<Table>),
    /// A read-only view: how many of the table's entries are replayed (under the lock).
    View(Mutex<(Table, usize)>),
}

/// How an AV is shared: the gate of [`ShmAv`] (see the module docs).
#[derive(Debug)]
pub struct Sharing {
    role: Role,
}

/// The domain's AV type: the kit's AV, shared by name when opened with one.
pub type ShmAv = GatedAv<Sharing>;

/// The table file of AV name `name`.
fn table_file(name: &str) -> Result<String> {
    let file = format!("{TABLE_PREFIX}{name}");
    region::check_name(&file).map_err(|_| {
        Error::new(
            Errno::EINVAL,
            format!(
                "{NAME}: bad shared AV name {name:?} (A-Z a-z 0-9 . _ -, at most {} bytes)",
                region::NAME_MAX - TABLE_PREFIX.len()
            ),
        )
    })?;
    Ok(file)
}

/// `fi_av_open` for a domain whose `av_type` is `domain_type`: a private AV, a named
/// one created, or (`FI_READ`) a view of a named one opened.
///
/// # Errors
/// As the kit's `KitAv::open_with`; for a name: `FI_EINVAL` for a bad name or with
/// `FI_EVENT`, `FI_EADDRINUSE` when it exists (creating), `FI_ENOENT` when it does not
/// (`FI_READ`), `FI_EPROTO` for a corrupt table, `FI_EIO` when the replay gives other
/// `fi_addr_t`s.
pub fn open(attr: &AvAttr, context: usize, domain_type: AvType) -> Result<ShmAv> {
    let shared = |kit, role| GatedAv::new(SharedAv::new(kit), Sharing { role });
    let Some(name) = attr.name.as_deref() else {
        return Ok(shared(kit_open(attr, context, domain_type)?, Role::Private));
    };
    let file = table_file(name)?;
    if attr.flags.contains(AvFlags::EVENT) {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{NAME}: a shared AV does not take FI_EVENT"),
        ));
    }
    let mut local = attr.clone();
    local.name = None;
    local.flags.remove(AvFlags::READ);
    if attr.flags.contains(AvFlags::READ) {
        let (table, av_type) = Table::open(file)?;
        local.av_type = av_type;
        local.count = local.count.max(table.capacity);
        let kit = kit_open(&local, context, domain_type)?;
        let av = shared(kit, Role::View(Mutex::new((table, 0))));
        av.gate().sync(av.shared())?;
        return Ok(av);
    }
    let capacity = match attr.count {
        0 => DEFAULT_CAPACITY,
        n => n.clamp(MIN_CAPACITY, MAX_CAPACITY),
    };
    let kit = kit_open(&local, context, domain_type)?;
    let table = Table::create(file, capacity, kit.av_type())?;
    Ok(shared(kit, Role::Creator(Mutex::new(table))))
}

impl Sharing {
    /// A view: replay into `av` the entries the creator added since the last call.
    fn sync(&self, av: &SharedAv) -> Result<()> {
        let Role::View(v) = &self.role else {
            return Ok(());
        };
        let mut g = lock(v);
        let (table, done) = &mut *g;
        let count = table.count()?;
        while *done < count {
            let (addr, want) = table.entry(*done)?;
            let mut got = [ADDR_NOTAVAIL];
            AvOps::<Fabric>::insert(av, &[addr], &mut got, 0, 0)?;
            if got[0] != want {
                return Err(Error::new(
                    Errno::EIO,
                    format!(
                        "{NAME}: shared AV entry {} is {want:#x} at its creator, {:#x} here",
                        *done, got[0]
                    ),
                ));
            }
            *done += 1;
        }
        Ok(())
    }

    /// The creator's table, or `FI_EOPNOTSUPP` naming `what` for a view.
    fn writable(&self, what: &str) -> Result<Option<&Mutex<Table>>> {
        match &self.role {
            Role::Private => Ok(None),
            Role::Creator(t) => Ok(Some(t)),
            Role::View(_) => Err(unsupported(&format!(
                "{what} on a read-only (FI_READ) shared AV"
            ))),
        }
    }

    /// `FI_EOPNOTSUPP` for `what` on a named AV (its views could not replay it).
    fn private_only(&self, what: &str) -> Result<()> {
        match self.writable(what)? {
            None => Ok(()),
            Some(_) => Err(unsupported(&format!("{what} on a shared AV"))),
        }
    }
}

fn kit_open(attr: &AvAttr, context: usize, domain_type: AvType) -> Result<KitAv> {
    let cfg = AvConfig::new(AddrFormat::STR).with_domain_type(domain_type, AvType::Table);
    KitAv::open_with(attr, context, cfg, |a: &Address| region_name(a).map(|_| ()))
}

/// shm's additions to the kit's AV calls (see the module docs).
impl AvGate for Sharing {
    /// A named AV changes only by `fi_av_insert` of its creator (its views could not
    /// replay the others).
    fn before_change(&self, call: &str) -> Result<()> {
        self.private_only(call)
    }

    /// A view first replays what its creator inserted since.
    fn before_read(&self, av: &SharedAv) -> Result<()> {
        self.sync(av)
    }

    /// The creator appends each address inserted, with its `fi_addr_t`, to the table
    /// (under its lock, so the table's order is that of the `fi_addr_t`s); an insert
    /// beyond the table's capacity is refused whole (`FI_ENOSPC`).
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        insert: impl FnOnce(&mut [u64]) -> Result<usize>,
    ) -> Result<usize> {
        let Some(table) = self.writable("fi_av_insert")? else {
            return insert(fi_addr);
        };
        let t = lock(table);
        let count = t.count()?;
        if count + addrs.len() > t.capacity {
            return Err(Error::new(
                Errno::ENOSPC,
                format!(
                    "{NAME}: shared AV {:?} holds {count} of {} entries",
                    t.file, t.capacity
                ),
            ));
        }
        let n = insert(fi_addr)?;
        let mut at = count;
        for (a, f) in addrs.iter().zip(fi_addr.iter()) {
            if let (Address::Str(s), true) = (a, *f != ADDR_NOTAVAIL) {
                t.append(at, s, *f)?;
                at += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(tag: &str) -> String {
        format!("u{}-{tag}", std::process::id())
    }

    fn named(n: &str, flags: AvFlags) -> AvAttr {
        AvAttr {
            name: Some(n.to_string()),
            flags,
            ..AvAttr::default()
        }
    }

    /// A view of a corrupt table is `FI_EPROTO` (never a panic or a read outside):
    /// a count beyond the capacity, an entry length beyond an entry, a bad address,
    /// a capacity beyond the file.
    #[test]
    fn corrupt_tables_are_eproto() {
        let n = name("corrupt");
        let creator = open(&named(&n, AvFlags::empty()), 0, AvType::Table).unwrap();
        let Role::Creator(t) = &creator.gate().role else {
            panic!("a creator")
        };
        let t = lock(t);
        t.append(0, "fi_shm://ofi-shm-a", 0).unwrap();
        let view = |what: &str| {
            let e = open(&named(&n, AvFlags::READ), 0, AvType::Table).unwrap_err();
            assert_eq!(e.code(), Errno::EPROTO, "{what}: {e}");
        };
        t.u32_at(H_COUNT)
            .unwrap()
            .store(u32::MAX, Ordering::Release);
        view("count");
        t.u32_at(H_COUNT).unwrap().store(1, Ordering::Release);
        t.u32_at(HDR + E_LEN)
            .unwrap()
            .store(ENTRY as u32, Ordering::Release);
        view("length");
        t.u32_at(HDR + E_LEN).unwrap().store(3, Ordering::Release);
        view("address");
        t.u32_at(H_CAPACITY)
            .unwrap()
            .store(u32::MAX, Ordering::Relaxed);
        view("capacity");
        drop(t);
        drop(creator);
        let file = format!("{TABLE_PREFIX}{n}");
        assert!(!std::path::Path::new("/dev/shm").join(file).exists());
    }

    /// A table left by a dead creator is replaced by the next creator of the name; a
    /// live creator's is not.
    #[test]
    fn a_dead_creators_table_is_replaced() {
        let n = name("dead");
        let first = open(&named(&n, AvFlags::empty()), 0, AvType::Table).unwrap();
        let e = open(&named(&n, AvFlags::empty()), 0, AvType::Table).unwrap_err();
        assert_eq!(
            e.code(),
            Errno::EADDRINUSE,
            "a live creator's table is kept"
        );
        let Role::Creator(t) = &first.gate().role else {
            panic!("a creator")
        };
        // Pose as a creator that died: no process has pid i32::MAX.
        lock(t)
            .u32_at(H_PID)
            .unwrap()
            .store(i32::MAX as u32, Ordering::Relaxed);
        let second = open(&named(&n, AvFlags::empty()), 0, AvType::Table).unwrap();
        let Role::Creator(t) = &first.gate().role else {
            panic!("a creator")
        };
        // The first's table is the second's now: only the second unlinks it.
        lock(t).owner = false;
        drop(first);
        let file = format!("{TABLE_PREFIX}{n}");
        assert!(std::path::Path::new("/dev/shm").join(&file).exists());
        drop(second);
        assert!(!std::path::Path::new("/dev/shm").join(file).exists());
    }

    /// A full table refuses the insert that would overflow it (`FI_ENOSPC`), whole.
    #[test]
    fn a_full_table_is_enospc() {
        let attr = AvAttr {
            count: MIN_CAPACITY,
            ..named(&name("full"), AvFlags::empty())
        };
        let av = open(&attr, 0, AvType::Table).unwrap();
        let addrs: Vec<Address> = (0..=MIN_CAPACITY)
            .map(|i| Address::Str(format!("fi_shm://ofi-shm-f{i}")))
            .collect();
        let mut out = vec![0; addrs.len()];
        let e = AvOps::<Fabric>::insert(&av, &addrs, &mut out, 0, 0).unwrap_err();
        assert_eq!(e.code(), Errno::ENOSPC);
        let n = AvOps::<Fabric>::insert(&av, &addrs[1..], &mut out[1..], 0, 0).unwrap();
        assert_eq!(n, MIN_CAPACITY);
    }
}
