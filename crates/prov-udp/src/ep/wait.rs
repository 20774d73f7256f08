//! The endpoint's wait descriptor (`fi_control(FI_GETWAIT)`): an epoll descriptor
//! that is readable while a datagram waits on any of the endpoint's sockets — its
//! own and its peer sockets (see the parent module's "Peer sockets"), which the
//! kernel gives a peer's datagrams to instead.
//!
//! Invariants: the set is made at the first `FI_GETWAIT` after `fi_enable`
//! (`FI_EOPBADSTATE` before: `fi_setname` may still replace the socket) and lives as
//! long as the endpoint; every socket of the endpoint is in it (level-triggered
//! `EPOLLIN`): those that exist when it is made, and each peer socket made later
//! (`peer_socket_made`, under the same lock, so none is missed). Progress takes
//! datagrams off the sockets only while a receive is posted, so the descriptor stays
//! readable until the application posts one and reads its CQ. It signals receive
//! readiness only (a datagram send never waits). Nothing here panics.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::*;

impl EpInner {
    /// `FI_GETWAIT`: the endpoint's wait descriptor (see the module docs), made at the
    /// first call; `FI_EOPBADSTATE` before `fi_enable`, the OS error if epoll fails.
    pub(super) fn wait_fd(&self) -> Result<i32> {
        let Some(active) = self.active.get() else {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_control(FI_GETWAIT) before fi_enable"),
            ));
        };
        let mut set = lock(&self.wait_set);
        if let Some(fd) = &*set {
            return Ok(fd.as_raw_fd());
        }
        // SAFETY: no pointer arguments; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(os_error(&io::Error::last_os_error(), "epoll_create1"));
        }
        // SAFETY: `fd` was just returned by epoll_create1 and nothing else owns it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        watch_sockets(fd, active)?;
        *set = Some(owned);
        Ok(fd)
    }

    /// A peer socket was made: add it to the wait set, if one was made (a failure is
    /// logged: the set then misses that socket's datagrams).
    pub(super) fn peer_socket_made(&self) {
        let Some(active) = self.active.get() else {
            return;
        };
        let set = lock(&self.wait_set);
        if let Some(fd) = &*set {
            if let Err(e) = watch_sockets(fd.as_raw_fd(), active) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "wait set: {e}");
            }
        }
    }
}

/// Add every socket of `active` to the epoll set `epfd` (`EPOLLIN`, level-triggered);
/// sockets already in it stay as they are.
fn watch_sockets(epfd: i32, active: &Active) -> Result<()> {
    let mut failed = None;
    active.each_fd(|fd| {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a valid event for the duration of the call; `epfd` and `fd`
        // are open descriptors of this endpoint.
        let r = unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) && failed.is_none() {
                failed = Some(os_error(&e, "epoll_ctl"));
            }
        }
    });
    failed.map_or(Ok(()), Err)
}
