//! The address vector: fabric addresses (`fi_addr_t`) ↔ peer endpoint names.
//!
//! A fabric address is the index of the peer's slot, for both `FI_AV_MAP` and
//! `FI_AV_TABLE` (a table's indices are consecutive from 0, as the C API requires).
//! Slots are never reused, so a removed address stays invalid. Inserting a name that is
//! already present returns its existing fabric address.
//!
//! The data path asks two questions, both without allocating: "where does `fi_addr` go"
//! ([`AvShared::sockaddr`]) and, for `FI_SOURCE`, "which fabric address sent this"
//! ([`AvShared::reverse`]).
//!
//! Invariant: `by_name` maps exactly the names of the occupied slots to their index.
//! Nothing here panics.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ofi_core::av::{check_fi_addr_slots, AvAttr};
use ofi_core::provider::AvOps;
use ofi_core::{Address, AvType, Errno, Error, Result, ADDR_NOTAVAIL};

use crate::addr;
use crate::fabric::Fabric;
use crate::sock::SockAddr;

/// `fi_av_insert` flags this AV accepts (`FI_MORE`, `FI_SYNC_ERR`); any other is
/// `FI_EBADFLAGS`. `FI_SYNC_ERR` changes nothing: every insert is synchronous.
const INSERT_FLAGS: u64 = ofi_core::OpFlags::MORE.bits() | ofi_core::AvFlags::SYNC_ERR.bits();

/// One known peer.
struct Peer {
    name: Vec<u8>,
    sa: SockAddr,
}

#[derive(Default)]
struct Table {
    slots: Vec<Option<Peer>>,
    by_name: HashMap<Vec<u8>, u64>,
}

/// The AV's state, shared with the endpoints bound to it.
pub struct AvShared {
    av_type: AvType,
    table: RwLock<Table>,
}

impl AvShared {
    /// The table, for reading (a poisoned lock is taken over: the table stays consistent
    /// between statements).
    fn table(&self) -> RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table, for changing.
    fn table_mut(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The socket address of `fi_addr`, or `None` if it is not a valid address of this AV.
    #[inline]
    pub fn sockaddr(&self, fi_addr: u64) -> Option<SockAddr> {
        let t = self.table();
        let i = usize::try_from(fi_addr).ok()?;
        t.slots.get(i)?.as_ref().map(|p| p.sa)
    }

    /// The fabric address of the peer named `name`, or `FI_ADDR_NOTAVAIL`.
    #[inline]
    pub fn reverse(&self, name: &[u8]) -> u64 {
        let t = self.table();
        t.by_name.get(name).copied().unwrap_or(ADDR_NOTAVAIL)
    }
}

/// An address vector (`fid_av`).
pub struct Av {
    shared: Arc<AvShared>,
}

impl Av {
    /// Open an AV. `FI_AV_UNSPEC` takes the domain's type (`domain_av_type`).
    ///
    /// # Errors
    /// `FI_ENOSYS` for a named (shared) AV, which this provider does not offer.
    pub fn open(attr: &AvAttr, domain_av_type: AvType) -> Result<Av> {
        if attr.name.is_some() {
            return Err(Error::new(
                Errno::ENOSYS,
                "unixdgram: named (shared) AVs are not supported",
            ));
        }
        let av_type = match attr.av_type {
            AvType::Unspec => domain_av_type,
            t => t,
        };
        let table = Table {
            slots: Vec::with_capacity(attr.count.min(1 << 16)),
            by_name: HashMap::new(),
        };
        Ok(Av {
            shared: Arc::new(AvShared {
                av_type,
                table: RwLock::new(table),
            }),
        })
    }

    /// The AV's type (`FI_AV_MAP` or `FI_AV_TABLE`).
    pub fn av_type(&self) -> AvType {
        self.shared.av_type
    }

    /// The shared state, for an endpoint being bound to this AV.
    pub(crate) fn shared(&self) -> Arc<AvShared> {
        self.shared.clone()
    }

    fn insert_one(t: &mut Table, addr: &Address) -> Result<u64> {
        let name = addr::parse(addr)?;
        if let Some(&existing) = t.by_name.get(&name) {
            return Ok(existing);
        }
        let sa = SockAddr::from_abstract(&name)
            .ok_or_else(|| Error::new(Errno::EINVAL, "unixdgram: endpoint name too long"))?;
        let fi_addr = t.slots.len() as u64;
        t.by_name.insert(name.clone(), fi_addr);
        t.slots.push(Some(Peer { name, sa }));
        Ok(fi_addr)
    }
}

impl AvOps<Fabric> for Av {
    /// Inserts every address it can. A malformed address, or one of another format,
    /// gets `FI_ADDR_NOTAVAIL` and is not counted (the C library's rule: the result is
    /// the number inserted).
    fn insert(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        _context: usize,
    ) -> Result<usize> {
        if flags & !INSERT_FLAGS != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "unixdgram: AV insert accepts only FI_MORE and FI_SYNC_ERR",
            ));
        }
        check_fi_addr_slots("unixdgram: AV insert", fi_addr, addrs.len())?;
        let mut t = self.shared.table_mut();
        let mut inserted = 0;
        for (a, out) in addrs.iter().zip(fi_addr.iter_mut()) {
            match Av::insert_one(&mut t, a) {
                Ok(v) => {
                    *out = v;
                    inserted += 1;
                }
                Err(e) => {
                    *out = ADDR_NOTAVAIL;
                    ofi_core::ofi_info!(crate::NAME, "av", "insert of {a} failed: {e}");
                }
            }
        }
        Ok(inserted)
    }

    /// Removes every address, or none: an address that is not valid is `FI_EINVAL`.
    fn remove(&self, fi_addr: &[u64], flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                "unixdgram: AV remove takes no flags",
            ));
        }
        let mut t = self.shared.table_mut();
        for &a in fi_addr {
            let ok = usize::try_from(a)
                .ok()
                .and_then(|i| t.slots.get(i))
                .is_some_and(Option::is_some);
            if !ok {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("unixdgram: fi_addr {a} is not in the AV"),
                ));
            }
        }
        for &a in fi_addr {
            if let Some(peer) = t.slots.get_mut(a as usize).and_then(Option::take) {
                t.by_name.remove(&peer.name);
            }
        }
        Ok(())
    }

    fn lookup(&self, fi_addr: u64) -> Result<Address> {
        let t = self.shared.table();
        usize::try_from(fi_addr)
            .ok()
            .and_then(|i| t.slots.get(i))
            .and_then(Option::as_ref)
            .map(|p| addr::address_of(&p.name))
            .ok_or_else(|| {
                Error::new(
                    Errno::EINVAL,
                    format!("unixdgram: fi_addr {fi_addr} is not in the AV"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn av() -> Av {
        Av::open(&AvAttr::default(), AvType::Map).unwrap()
    }

    fn s(x: &str) -> Address {
        Address::Str(x.into())
    }

    /// Insert the addresses `names` into `av`: the count inserted, and their fabric
    /// addresses.
    fn insert_names(av: &Av, names: &[&str]) -> (usize, Vec<u64>) {
        let addrs: Vec<Address> = names.iter().map(|n| s(n)).collect();
        let mut out = vec![0u64; names.len()];
        let n = av.insert(&addrs, &mut out, 0, 0).unwrap();
        (n, out)
    }

    #[test]
    fn insert_lookup_remove() {
        let av = av();
        assert_eq!(av.av_type(), AvType::Map);
        let names = ["fi_unixdgram://a", "fi_unixdgram://b", "fi_unixdgram://a"];
        let (n, out) = insert_names(&av, &names);
        assert_eq!(n, 3);
        assert_eq!(out, [0, 1, 0], "a name inserted twice keeps its address");
        assert_eq!(av.lookup(1).unwrap(), s("fi_unixdgram://b"));
        assert_eq!(av.shared.reverse(b"b"), 1);
        assert!(av.shared.sockaddr(1).is_some());
        av.remove(&[1], 0).unwrap();
        assert_eq!(av.lookup(1).unwrap_err().code(), Errno::EINVAL);
        assert!(av.shared.sockaddr(1).is_none());
        assert_eq!(av.shared.reverse(b"b"), ADDR_NOTAVAIL);
        // Removed addresses are never reused.
        assert_eq!(insert_names(&av, &["fi_unixdgram://c"]), (1, vec![2]));
    }

    #[test]
    fn bad_addresses_get_notavail() {
        let av = av();
        let names = ["fi_unixdgram://ok", "fi_other://x", "fi_unixdgram://a b"];
        let (n, out) = insert_names(&av, &names);
        assert_eq!(n, 1);
        assert_eq!(out, [0, ADDR_NOTAVAIL, ADDR_NOTAVAIL]);
    }

    #[test]
    fn errors_have_their_codes() {
        let av = av();
        let mut out = [0u64; 1];
        let e = av
            .insert(&[s("fi_unixdgram://a")], &mut out, 1 << 3, 0)
            .unwrap_err();
        assert_eq!(e.code(), Errno::EBADFLAGS);
        assert_eq!(av.remove(&[7], 0).unwrap_err().code(), Errno::EINVAL);
        assert_eq!(
            av.remove(&[ADDR_NOTAVAIL], 0).unwrap_err().code(),
            Errno::EINVAL
        );
        assert_eq!(av.lookup(ADDR_NOTAVAIL).unwrap_err().code(), Errno::EINVAL);
        let named = AvAttr {
            name: Some("shared".into()),
            ..AvAttr::default()
        };
        assert_eq!(
            Av::open(&named, AvType::Map).err().map(|e| e.code()),
            Some(Errno::ENOSYS)
        );
        let table = AvAttr {
            av_type: AvType::Table,
            ..AvAttr::default()
        };
        assert_eq!(
            Av::open(&table, AvType::Map).unwrap().av_type(),
            AvType::Table
        );
    }
}
