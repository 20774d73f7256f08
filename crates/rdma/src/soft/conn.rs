//! Connections between software-device contexts: `SOCK_SEQPACKET` unix sockets bound in
//! a private per-user directory (mode 0700), one listening socket per context, named
//! after the context's GID. Filesystem paths (not the abstract namespace) so contexts
//! in different network namespaces of one host still meet.
//!
//! Sends never block: a packet that does not fit goes to the connection's backlog (a
//! copy), which the service thread flushes when the socket becomes writable; while a
//! backlog exists every later packet queues behind it, so order is kept.

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::cq::lock;
use crate::verbs::Gid;

/// Socket buffer size asked for (the kernel may cap it).
const SOCK_BUF: libc::c_int = 4 << 20;

/// The directory the contexts' sockets live in.
pub(crate) fn socket_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FI_VERBS_SOFT_DIR") {
        return PathBuf::from(d);
    }
    // SAFETY: plain syscall.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/tmp/ofi-rdma-soft-{uid}"))
}

/// The link-local prefix every software-device GID starts with.
const GID_PREFIX: [u8; 2] = [0xfe, 0x80];
/// What names a GID as the software device's.
const GID_TAG: [u8; 4] = *b"soft";

ofi_kit::wire_header! {
    /// A checked view of a software-device GID: a link-local prefix, then the process
    /// and the context it names (big endian, as a GID's bytes are read).
    struct SoftGid;
    endian: big;
    len: 16;
    /// Where each part of a software-device GID lies.
    mod gid_field {
        /// [`GID_PREFIX`].
        PREFIX: [u8; 2] = 0..2 => prefix, set_prefix;
        /// [`GID_TAG`].
        TAG: [u8; 4] = 4..8 => tag, set_tag;
        /// The process.
        PID: u32 = 8..12 => pid, set_pid;
        /// The context's serial number in its process.
        SERIAL: u32 = 12..16 => serial, set_serial;
    }
}

/// The GID of context `serial` of process `pid`: a link-local prefix, then the two.
pub(crate) fn make_gid(pid: u32, serial: u32) -> Gid {
    let mut g = SoftGid::zeroed();
    g.set_prefix(GID_PREFIX);
    g.set_tag(GID_TAG);
    g.set_pid(pid);
    g.set_serial(serial);
    Gid(g.into_inner())
}

/// The socket path of a software-device GID, `None` for any other GID.
pub(crate) fn gid_path(dir: &Path, gid: &Gid) -> Option<PathBuf> {
    let g = SoftGid::new_checked(&gid.0).ok()?;
    if g.prefix() != GID_PREFIX || g.tag() != GID_TAG {
        return None;
    }
    Some(dir.join(format!("{}-{}", g.pid(), g.serial())))
}

fn sockaddr(path: &Path) -> std::io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = path.as_os_str().as_bytes();
    if b.len() >= a.sun_path.len() {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + b.len() + 1;
    Ok((a, len as libc::socklen_t))
}

fn seqpacket() -> std::io::Result<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: passes a c_int option by pointer and size. Failure only leaves the
        // default size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&SOCK_BUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    Ok(fd)
}

pub(crate) fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

/// Creates the directory (0700, ours) if needed and a listening socket at `path`.
pub(crate) fn listen_at(dir: &Path, path: &Path) -> std::io::Result<OwnedFd> {
    let mut last = None;
    // Another process may remove the (empty) directory between our mkdir and bind.
    for _ in 0..64 {
        let cdir = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: path is NUL-terminated.
        unsafe { libc::mkdir(cdir.as_ptr(), 0o700) };
        let md = match std::fs::symlink_metadata(dir) {
            Ok(md) => md,
            // Removed by a closing context between our mkdir and here: again.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: plain syscall.
            if !md.is_dir() || md.uid() != unsafe { libc::getuid() } || md.mode() & 0o077 != 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{} is not a private directory of this user", dir.display()),
                ));
            }
        }
        let fd = seqpacket()?;
        let (a, len) = sockaddr(path)?;
        // SAFETY: binds with a valid sockaddr_un of `len` bytes.
        let r = unsafe { libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) };
        if r == 0 {
            // SAFETY: listen on our socket.
            if unsafe { libc::listen(fd.as_raw_fd(), 128) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            set_nonblocking(fd.as_raw_fd());
            return Ok(fd);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOENT) {
            return Err(e);
        }
        last = Some(e);
    }
    Err(last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT)))
}

/// Removes the sockets in `dir` left by processes that no longer exist (killed before
/// they could close) and connection-manager listeners nobody answers at, then the
/// directory itself if it is empty.
pub(crate) fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        // A connection-manager listener nobody answers at any more.
        // (A listener's file appears only once it listens: see `cm`.)
        if name.to_str().is_some_and(|n| n.starts_with("cm-")) {
            if is_stale(&e.path()) {
                let _ = std::fs::remove_file(e.path());
            }
            continue;
        }
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, _)| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks whether the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Connects to the socket at `path` (blocking connect, then non-blocking).
///
/// Non-blocking: a listener whose backlog is full (its owner is not accepting) is tried
/// again for at most `patience`, then `EAGAIN`.
pub(crate) fn connect_to(path: &Path) -> std::io::Result<OwnedFd> {
    connect_within(path, std::time::Duration::from_secs(2))
}

/// [`connect_to`] with its patience.
pub(crate) fn connect_within(
    path: &Path,
    patience: std::time::Duration,
) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    set_nonblocking(fd.as_raw_fd());
    let (a, len) = sockaddr(path)?;
    let deadline = std::time::Instant::now() + patience;
    loop {
        // SAFETY: connects with a valid sockaddr_un of `len` bytes.
        let r =
            unsafe { libc::connect(fd.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), len) };
        if r == 0 {
            return Ok(fd);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EAGAIN) || std::time::Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Whether nobody listens at `path` any more (a connect is refused outright).
pub(crate) fn is_stale(path: &Path) -> bool {
    matches!(
        connect_within(path, std::time::Duration::ZERO),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED)
    )
}

/// Accepts one pending connection (non-blocking), `None` when none is pending.
pub(crate) fn accept_one(listen: RawFd) -> Option<OwnedFd> {
    // SAFETY: accept4 with null address arguments.
    let fd = unsafe {
        libc::accept4(
            listen,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: a new fd we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One connection to (or from) another context.
pub(crate) struct Conn {
    fd: OwnedFd,
    /// The peer's GID (known from its hello, or the one we connected to).
    pub peer: Mutex<Option<Gid>>,
    backlog: Mutex<VecDeque<Vec<u8>>>,
    dead: AtomicBool,
    /// The owning context's service-thread eventfd: written when the backlog becomes
    /// non-empty, so the thread adds `POLLOUT` for this connection at once instead of at
    /// its next timeout (a send that found the socket full used to wait up to a second).
    wake: Arc<OwnedFd>,
}

impl Conn {
    pub(crate) fn new(fd: OwnedFd, peer: Option<Gid>, wake: Arc<OwnedFd>) -> Conn {
        Conn {
            fd,
            peer: Mutex::new(peer),
            backlog: Mutex::new(VecDeque::new()),
            dead: AtomicBool::new(false),
            wake,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub(crate) fn peer(&self) -> Option<Gid> {
        *lock(&self.peer)
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    pub(crate) fn mark_dead(&self) {
        self.dead.store(true, Ordering::Release);
    }

    pub(crate) fn has_backlog(&self) -> bool {
        !lock(&self.backlog).is_empty()
    }

    /// Sends one packet made of the pieces in `iov`; false when the connection is dead.
    ///
    /// # Safety
    /// Every `iov` entry points at `iov_len` readable bytes (kept readable for the call).
    pub(crate) unsafe fn send(&self, iov: &[libc::iovec]) -> bool {
        if self.is_dead() {
            return false;
        }
        let mut bl = lock(&self.backlog);
        if bl.is_empty() {
            // SAFETY: caller's contract on `iov`.
            match unsafe { self.sendmsg(iov) } {
                Ok(()) => return true,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {}
                Err(_) => {
                    self.mark_dead();
                    return false;
                }
            }
        }
        let mut copy = Vec::with_capacity(iov.iter().map(|v| v.iov_len).sum());
        for v in iov {
            let start = copy.len();
            copy.resize(start + v.iov_len, 0);
            // SAFETY: caller's contract: readable for `iov_len` bytes; copied raw.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v.iov_base as *const u8,
                    copy[start..].as_mut_ptr(),
                    v.iov_len,
                )
            };
        }
        let was_empty = bl.is_empty();
        bl.push_back(copy);
        drop(bl);
        if was_empty {
            super::cq::eventfd_add(self.wake.as_raw_fd());
        }
        true
    }

    /// Sends `head` then `body` as one packet; false when the connection is dead.
    pub(crate) fn send_packet(&self, head: &[u8], body: &[u8]) -> bool {
        let iov = [head, body].map(|piece| libc::iovec {
            iov_base: piece.as_ptr() as *mut _,
            iov_len: piece.len(),
        });
        // SAFETY: both pieces are borrowed slices, readable for the call.
        unsafe { self.send(&iov) }
    }

    /// # Safety
    /// As [`Conn::send`].
    unsafe fn sendmsg(&self, iov: &[libc::iovec]) -> std::io::Result<()> {
        // SAFETY: all-zero msghdr is valid; then points at the caller's iovecs.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_iov = iov.as_ptr() as *mut libc::iovec;
        m.msg_iovlen = iov.len() as _;
        // SAFETY: caller's contract on the iovecs; MSG_NOSIGNAL keeps a dead peer from
        // raising SIGPIPE.
        let r = unsafe {
            libc::sendmsg(
                self.fd.as_raw_fd(),
                &m,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Sends as much of the backlog as fits (service thread).
    pub(crate) fn flush(&self) {
        let mut bl = lock(&self.backlog);
        while let Some(p) = bl.front() {
            let iov = [libc::iovec {
                iov_base: p.as_ptr() as *mut _,
                iov_len: p.len(),
            }];
            // SAFETY: points at the owned packet, alive for the call.
            match unsafe { self.sendmsg(&iov) } {
                Ok(()) => {
                    bl.pop_front();
                }
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return,
                Err(_) => {
                    self.mark_dead();
                    bl.clear();
                    return;
                }
            }
        }
    }

    /// Receives one packet into `buf`: `Ok(Some(len))`, `Ok(None)` when nothing is
    /// pending, `Err(())` when the connection ended. A packet longer than `buf` is
    /// reported with its full length (the caller drops it).
    pub(crate) fn recv(&self, buf: &mut [u8]) -> Result<Option<usize>, ()> {
        // SAFETY: receives into our own buffer of its length.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if r > 0 {
            return Ok(Some(r as usize));
        }
        if r == 0 {
            return Err(());
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soft::cq::{eventfd, eventfd_take};

    /// A packet that finds the socket full goes to the backlog and wakes the service
    /// thread (through the context's eventfd) once, when the backlog becomes non-empty;
    /// the thread then polls the connection for `POLLOUT` and flushes.
    #[test]
    fn a_full_socket_wakes_the_service_thread() {
        let mut fds = [0; 2];
        // SAFETY: plain syscall writing two fds into a local array.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: two new fds we own.
        let (ours, _peer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let wake = Arc::new(eventfd(false).unwrap());
        let conn = Conn::new(ours, None, wake.clone());
        let packet = vec![0x5au8; 16 << 10];
        let iov = [libc::iovec {
            iov_base: packet.as_ptr() as *mut _,
            iov_len: packet.len(),
        }];
        // Bounded: the socket holds at most a few MiB; nobody reads the other end.
        let mut sent = 0;
        while !conn.has_backlog() {
            assert!(sent < 100_000, "the socket never filled");
            assert!(!eventfd_take(wake.as_raw_fd()), "woken before the backlog");
            // SAFETY: `packet` is alive for the call.
            assert!(unsafe { conn.send(&iov) });
            sent += 1;
        }
        assert!(
            eventfd_take(wake.as_raw_fd()),
            "no wake when the backlog began"
        );
        // SAFETY: as above.
        assert!(unsafe { conn.send(&iov) });
        assert!(
            !eventfd_take(wake.as_raw_fd()),
            "a second wake for the same backlog"
        );
    }
}
