//! `fi_setname`: an endpoint's address is its region's name (`fi_shm://<name>`), so
//! naming it moves the region's file in `/dev/shm` to the new name: a hard link under
//! the new name (which never replaces a file), then the old name unlinked. The mapping,
//! the rings and everything bound stay as they are.
//!
//! Rules:
//! - before `fi_enable` only (`FI_EOPBADSTATE` after: peers may know the name);
//! - an ordinary endpoint only (`FI_ENOSYS` for a scalable endpoint, its contexts and
//!   shared contexts, whose names derive from one base);
//! - the address is this provider's (`fi_shm://` and a valid region name), else
//!   `FI_EINVAL`;
//! - a name a live process's region holds (or a file not of this provider) is
//!   `FI_EADDRINUSE`; a dead process's region under it is reclaimed, as at open.
//!
//! The setup lock serialises `fi_setname` with `fi_enable`; the name's own lock is
//! a leaf. Nothing here panics.

use super::*;

use ofi_core::AddrFormat;
use region::Owner;

impl Shared {
    /// The region's (and so the endpoint's) current name.
    pub(super) fn name(&self) -> String {
        lock(&self.name).clone()
    }
}

impl Endpoint {
    /// `fi_setname` (see the module docs).
    pub(super) fn set_name(&self, addr: &[u8]) -> Result<()> {
        let a = Address::from_bytes(AddrFormat::STR, addr)?;
        let new = region_name(&a)?;
        if !matches!(self.role, scalable::Role::Plain) {
            return Err(Error::new(
                Errno::ENOSYS,
                format!(
                    "{NAME}: fi_setname of a scalable endpoint, a context or a shared context is not supported"
                ),
            ));
        }
        let _setup = lock(&self.sh.setup);
        if self.sh.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_setname after fi_enable"),
            ));
        }
        let mut name = lock(&self.sh.name);
        if *name != new {
            move_region(&name, new)?;
            *name = new.to_string();
        }
        Ok(())
    }
}

/// Move the region file `old` to `new` without replacing anything (see the module
/// docs): at most one stale region under `new` is reclaimed.
fn move_region(old: &str, new: &str) -> Result<()> {
    let path = |n: &str| format!("/dev/shm/{n}");
    for _ in 0..2 {
        match std::fs::hard_link(path(old), path(new)) {
            Ok(()) => {
                region::unlink(old);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match region::probe_owner(new) {
                    Owner::Dead => region::unlink(new),
                    Owner::Alive(pid) => {
                        return Err(Error::new(
                            Errno::EADDRINUSE,
                            format!(
                            "{NAME}: fi_setname: region {new:?} is in use by live process {pid}"
                        ),
                        ))
                    }
                    Owner::Foreign => {
                        return Err(Error::new(
                            Errno::EADDRINUSE,
                            format!(
                        "{NAME}: fi_setname: /dev/shm/{new} exists and is not an ofi-rs shm region"
                    ),
                        ))
                    }
                }
            }
            Err(e) => {
                return Err(Error::new(
                    Errno::EIO,
                    format!("{NAME}: fi_setname: link /dev/shm/{old} to {new}: {e}"),
                ))
            }
        }
    }
    Err(Error::new(
        Errno::EADDRINUSE,
        format!("{NAME}: fi_setname: {new:?} was taken again while reclaiming it"),
    ))
}
