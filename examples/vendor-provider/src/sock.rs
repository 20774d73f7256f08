//! The only module that talks to the operating system: a non-blocking Unix datagram
//! socket bound to a name in Linux's *abstract* socket namespace, and the two small
//! helpers a blocking CQ read needs (`poll` and an `eventfd`).
//!
//! Abstract names live in the kernel, not in the file system: nothing is created on
//! disk and a name disappears when its socket closes, so a crashed process leaves no
//! litter behind. A name is up to [`MAX_NAME`] bytes; [`DgramSocket::bind`] with no
//! name lets the kernel pick a unique one ("autobind": five hex digits).
//!
//! Everything here is non-blocking: a call that would wait returns `Ok(None)` (receive)
//! or an `io::Error` of kind `WouldBlock` (send). `EINTR` is retried. Socket options
//! go through `socket2`; every `unsafe` block is a plain libc call on memory this
//! module owns or borrows for the call. Nothing here panics.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Longest abstract name: `sun_path` is 108 bytes and the first one is the NUL that
/// marks the abstract namespace.
pub const MAX_NAME: usize = 107;

/// Offset of `sun_path` in `sockaddr_un` (the family field comes first).
const PATH_OFFSET: usize = size_of::<libc::sa_family_t>();

/// A peer's socket address (`sockaddr_un` of an abstract name), ready for `sendmsg`.
/// Plain data: copying it is how the data path avoids allocating.
#[derive(Clone, Copy)]
pub struct SockAddr {
    sa: libc::sockaddr_un,
    len: libc::socklen_t,
}

impl SockAddr {
    /// An empty address (what `recvmsg` fills in).
    pub fn empty() -> SockAddr {
        // SAFETY: `sockaddr_un` is plain old data; all-zero bytes are a valid value.
        let sa: libc::sockaddr_un = unsafe { zeroed() };
        SockAddr { sa, len: 0 }
    }

    /// The address of abstract name `name`; `None` if the name is empty or longer than
    /// [`MAX_NAME`].
    pub fn from_abstract(name: &[u8]) -> Option<SockAddr> {
        if name.is_empty() || name.len() > MAX_NAME {
            return None;
        }
        let mut a = SockAddr::empty();
        a.sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
        // sun_path[0] stays 0: the abstract namespace.
        for (dst, &src) in a.sa.sun_path[1..].iter_mut().zip(name) {
            *dst = src as libc::c_char;
        }
        a.len = (PATH_OFFSET + 1 + name.len()) as libc::socklen_t;
        Some(a)
    }

    /// The abstract name, or an empty slice for an unnamed or file-system peer.
    pub fn abstract_name(&self) -> &[u8] {
        let len = self.len as usize;
        if len <= PATH_OFFSET + 1 || self.sa.sun_path[0] != 0 {
            return &[];
        }
        let n = (len - PATH_OFFSET - 1).min(MAX_NAME);
        // SAFETY: `sun_path` is a `[c_char; 108]`; `c_char` and `u8` have the same size
        // and alignment, and `1 + n <= 108`.
        unsafe { std::slice::from_raw_parts(self.sa.sun_path.as_ptr().add(1).cast::<u8>(), n) }
    }
}

/// One non-blocking `AF_UNIX`/`SOCK_DGRAM` socket bound to an abstract name.
#[derive(Debug)]
pub struct DgramSocket {
    fd: OwnedFd,
    name: Vec<u8>,
}

/// `Err(last OS error)` if `rc` is -1.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl DgramSocket {
    /// A socket bound to abstract `name`, or to a kernel-chosen unique name when `None`.
    /// `sndbuf` is the send buffer to ask for (it bounds the largest datagram).
    ///
    /// # Errors
    /// The OS error: `EADDRINUSE` when the name is taken, `EINVAL` for a bad name.
    pub fn bind(name: Option<&[u8]>, sndbuf: usize) -> io::Result<DgramSocket> {
        let flags = libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: plain system call, no pointers.
        let raw = check(unsafe { libc::socket(libc::AF_UNIX, flags, 0) })?;
        // SAFETY: `raw` is a descriptor we just opened and own from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let addr = match name {
            Some(n) => SockAddr::from_abstract(n)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?,
            None => {
                // Autobind: only the family, and the kernel picks an abstract name.
                let mut a = SockAddr::empty();
                a.sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
                a.len = PATH_OFFSET as libc::socklen_t;
                a
            }
        };
        // SAFETY: `addr.sa` is a valid sockaddr_un and `addr.len` does not exceed it.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr.sa as *const libc::sockaddr_un).cast(),
                addr.len,
            )
        })?;

        // A failure only means the default buffer stays; the largest datagram is then
        // smaller, which the caller discovers as EMSGSIZE.
        let _ = socket2::SockRef::from(&fd).set_send_buffer_size(sndbuf);

        // Read the name back (the kernel chose it when we autobound).
        let mut bound = SockAddr::empty();
        bound.len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
        // SAFETY: `bound.sa` is writable for `bound.len` bytes, which the kernel updates.
        check(unsafe {
            libc::getsockname(
                fd.as_raw_fd(),
                (&mut bound.sa as *mut libc::sockaddr_un).cast(),
                &mut bound.len,
            )
        })?;
        let name = bound.abstract_name().to_vec();
        if name.is_empty() {
            return Err(io::Error::other("socket has no abstract name"));
        }
        Ok(DgramSocket { fd, name })
    }

    /// The abstract name this socket is bound to.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The descriptor, for `poll`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Send one datagram gathered from `iov` to `dest`; returns the bytes sent.
    ///
    /// # Errors
    /// `WouldBlock` when the peer's queue is full; `ECONNREFUSED` when no socket has
    /// that name; `EMSGSIZE` when the datagram exceeds the send buffer.
    pub fn send_to(&self, iov: &[libc::iovec], dest: &SockAddr) -> io::Result<usize> {
        let name = (&dest.sa as *const libc::sockaddr_un).cast_mut().cast();
        let msg = msghdr(name, dest.len, iov);
        retry_interrupted(|| {
            // SAFETY: `msg` points at `dest` and `iov`, both alive for the call; the
            // kernel only reads through them. The iovecs describe caller-owned memory
            // (the `EndpointOps` contract).
            unsafe {
                libc::sendmsg(
                    self.fd.as_raw_fd(),
                    &msg,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            }
        })
    }

    /// Receive one datagram scattered into `iov`, and its sender into `src`.
    /// Returns `Ok(None)` when no datagram is waiting, else `Ok(Some(full))` where `full`
    /// is the datagram's real length: larger than the buffers when it was truncated (the
    /// rest is discarded, as datagram sockets do).
    pub fn recv_from(&self, iov: &[libc::iovec], src: &mut SockAddr) -> io::Result<Option<usize>> {
        let name_room = size_of::<libc::sockaddr_un>() as libc::socklen_t;
        let mut msg = msghdr(
            (&mut src.sa as *mut libc::sockaddr_un).cast(),
            name_room,
            iov,
        );
        let got = retry_interrupted(|| {
            // SAFETY: `msg` points at `src` (writable, its size given) and at the iovecs,
            // which describe caller-owned writable memory (the `EndpointOps` contract).
            // MSG_TRUNC makes the kernel return the datagram's real length.
            unsafe {
                libc::recvmsg(
                    self.fd.as_raw_fd(),
                    &mut msg,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            }
        });
        match got {
            Ok(n) => {
                src.len = msg.msg_namelen.min(name_room);
                Ok(Some(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A `msghdr` for `sendmsg`/`recvmsg`: the socket address at `name` (`namelen`
/// bytes) and the buffers `iov`; no control data, no flags.
fn msghdr(name: *mut libc::c_void, namelen: libc::socklen_t, iov: &[libc::iovec]) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = name;
    msg.msg_namelen = namelen;
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len() as _;
    msg
}

/// Make the transfer `call` (a `sendmsg`/`recvmsg` returning a byte count, or -1 with
/// `errno` set) again while a signal interrupts it; its byte count or its error.
fn retry_interrupted(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Wait until one of `fds` is readable or `timeout_ms` passes (-1: no limit).
/// Returns whether any is readable.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a live, writable array of `pfds.len()` pollfds.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if rc == -1 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(rc > 0)
}

/// A non-blocking `eventfd`: how `fi_cq_signal` wakes a thread blocked in `sread`.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new eventfd with count 0.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call, no pointers.
        let raw = check(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `raw` is a descriptor we just opened and own from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(EventFd { fd })
    }

    /// The descriptor, for `poll`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Make the descriptor readable.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`. Failure (a saturated counter) still
        // leaves the descriptor readable, which is all we need.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reset to not readable; returns whether it had been notified.
    pub fn drain(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into `v`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        n == 8 && v > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iov(buf: &[u8]) -> libc::iovec {
        libc::iovec {
            iov_base: buf.as_ptr().cast_mut().cast(),
            iov_len: buf.len(),
        }
    }

    #[test]
    fn autobind_gives_a_unique_abstract_name() {
        let a = DgramSocket::bind(None, 1 << 16).unwrap();
        let b = DgramSocket::bind(None, 1 << 16).unwrap();
        assert!(!a.name().is_empty());
        assert_ne!(a.name(), b.name());
    }

    #[test]
    fn named_bind_and_name_in_use() {
        let name = format!("ofi-ud-test-{}", std::process::id());
        let a = DgramSocket::bind(Some(name.as_bytes()), 1 << 16).unwrap();
        assert_eq!(a.name(), name.as_bytes());
        let e = DgramSocket::bind(Some(name.as_bytes()), 1 << 16).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRINUSE));
        drop(a);
        // The name is free again once the socket is closed: nothing was left behind.
        DgramSocket::bind(Some(name.as_bytes()), 1 << 16).unwrap();
    }

    #[test]
    fn datagram_round_trip_with_truncation_and_source() {
        let a = DgramSocket::bind(None, 1 << 16).unwrap();
        let b = DgramSocket::bind(None, 1 << 16).unwrap();
        let to_b = SockAddr::from_abstract(b.name()).unwrap();
        let mut src = SockAddr::empty();
        let mut small = [0u8; 4];
        let rx = [libc::iovec {
            iov_base: small.as_mut_ptr().cast(),
            iov_len: small.len(),
        }];
        assert!(
            b.recv_from(&rx, &mut src).unwrap().is_none(),
            "nothing sent yet"
        );
        assert_eq!(
            a.send_to(&[iov(b"hello"), iov(b" world")], &to_b).unwrap(),
            11
        );
        assert_eq!(b.recv_from(&rx, &mut src).unwrap(), Some(11));
        assert_eq!(&small, b"hell");
        assert_eq!(src.abstract_name(), a.name());
    }

    #[test]
    fn sending_to_nobody_is_refused() {
        let a = DgramSocket::bind(None, 1 << 16).unwrap();
        let nobody = SockAddr::from_abstract(b"ofi-ud-test-nobody-here").unwrap();
        let e = a.send_to(&[iov(b"x")], &nobody).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED));
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(SockAddr::from_abstract(b"").is_none());
        assert!(SockAddr::from_abstract(&[b'a'; MAX_NAME + 1]).is_none());
        assert!(SockAddr::from_abstract(&[b'a'; MAX_NAME]).is_some());
        assert!(SockAddr::empty().abstract_name().is_empty());
    }

    #[test]
    fn eventfd_wakes_poll() {
        let e = EventFd::new().unwrap();
        assert!(!poll_readable(&[e.raw_fd()], 0).unwrap());
        e.notify();
        assert!(poll_readable(&[e.raw_fd()], 0).unwrap());
        assert!(e.drain());
        assert!(!e.drain());
    }
}
