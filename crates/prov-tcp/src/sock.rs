//! The only code of this crate that calls the OS: nonblocking TCP sockets through
//! `libc` (socket, bind, listen, accept4, connect, recv, readv, sendmsg, poll,
//! getsockname/getpeername, setsockopt).
//!
//! Every socket is created `SOCK_NONBLOCK | SOCK_CLOEXEC`; sends use `MSG_NOSIGNAL` so
//! a dead peer is an `EPIPE` error, never a signal. Nothing here panics.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A nonblocking TCP socket (closed on drop).
#[derive(Debug)]
pub struct Sock(OwnedFd);

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `addr` as a `sockaddr_storage` and its length.
fn to_raw(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for
            // sockaddr_in.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            (ss, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (ss, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

fn from_raw(ss: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Ok(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Ok(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        f => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("address family {f}"),
        )),
    }
}

/// An iovec for `len` bytes at `base`.
#[inline]
pub fn iovec(base: usize, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: base as *mut libc::c_void,
        iov_len: len,
    }
}

impl Sock {
    /// A new nonblocking stream socket of `addr`'s family.
    pub fn stream(addr: &SocketAddr) -> io::Result<Sock> {
        let fam = if addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        // SAFETY: plain FFI call without pointers.
        let fd = cvt(unsafe {
            libc::socket(
                fam,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Sock(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn setopt(&self, level: i32, name: i32, val: i32) -> io::Result<()> {
        // SAFETY: the option value is a live i32 of the size given.
        cvt(unsafe {
            libc::setsockopt(
                self.fd(),
                level,
                name,
                &val as *const i32 as *const libc::c_void,
                size_of::<i32>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// `TCP_NODELAY` on.
    pub fn set_nodelay(&self) -> io::Result<()> {
        self.setopt(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
    }

    /// `SO_REUSEADDR` on.
    pub fn set_reuseaddr(&self) -> io::Result<()> {
        self.setopt(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
    }

    /// Bind to a network device (`SO_BINDTODEVICE`).
    pub fn bind_device(&self, name: &str) -> io::Result<()> {
        // SAFETY: the name buffer is live for its length.
        cvt(unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                name.as_ptr() as *const libc::c_void,
                name.len() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// Bind to `addr`.
    pub fn bind(&self, addr: &SocketAddr) -> io::Result<()> {
        let (ss, len) = to_raw(addr);
        // SAFETY: ss is a valid sockaddr of `len` bytes.
        cvt(unsafe { libc::bind(self.fd(), &ss as *const _ as *const libc::sockaddr, len) })
            .map(drop)
    }

    /// Listen with `backlog`.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        // SAFETY: plain FFI call.
        cvt(unsafe { libc::listen(self.fd(), backlog) }).map(drop)
    }

    /// Start connecting: `Ok(true)` connected, `Ok(false)` in progress.
    pub fn connect(&self, addr: &SocketAddr) -> io::Result<bool> {
        let (ss, len) = to_raw(addr);
        // SAFETY: ss is a valid sockaddr of `len` bytes.
        let r = unsafe { libc::connect(self.fd(), &ss as *const _ as *const libc::sockaddr, len) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINPROGRESS) {
            Ok(false)
        } else {
            Err(e)
        }
    }

    /// Accept one connection, nonblocking: `Ok(None)` when none is waiting.
    pub fn accept(&self) -> io::Result<Option<(Sock, SocketAddr)>> {
        // SAFETY: zeroed storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: ss/len describe a writable buffer.
        let r = unsafe {
            libc::accept4(
                self.fd(),
                &mut ss as *mut _ as *mut libc::sockaddr,
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: r is a fresh descriptor we own.
        let s = Sock(unsafe { OwnedFd::from_raw_fd(r) });
        Ok(Some((s, from_raw(&ss)?)))
    }

    fn name(&self, peer: bool) -> io::Result<SocketAddr> {
        // SAFETY: zeroed storage is valid.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = &mut ss as *mut _ as *mut libc::sockaddr;
        // SAFETY: ss/len describe a writable buffer.
        cvt(unsafe {
            if peer {
                libc::getpeername(self.fd(), p, &mut len)
            } else {
                libc::getsockname(self.fd(), p, &mut len)
            }
        })?;
        from_raw(&ss)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.name(false)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.name(true)
    }

    /// Wait up to `timeout_ms` for `events` (`POLLIN`, `POLLOUT`); the returned
    /// events (0 on time-out).
    pub fn poll(&self, events: i16, timeout_ms: i32) -> io::Result<i16> {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(if r == 0 { 0 } else { p.revents })
    }

    /// The pending socket error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut v: i32 = 0;
        let mut len = size_of::<i32>() as libc::socklen_t;
        // SAFETY: v/len describe a writable i32.
        cvt(unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut v as *mut i32 as *mut libc::c_void,
                &mut len,
            )
        })?;
        Ok((v != 0).then(|| io::Error::from_raw_os_error(v)))
    }

    /// Receive into `buf`: `Ok(0)` is end of stream; `WouldBlock` when nothing waits.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is writable for its length.
        cvt_size(unsafe {
            libc::recv(
                self.fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        })
    }

    /// Scatter-read into `iov`.
    ///
    /// # Safety
    /// Every iovec must describe memory writable for its length.
    pub unsafe fn readv(&self, iov: &[libc::iovec]) -> io::Result<usize> {
        // SAFETY: the caller vouches for the iovecs.
        cvt_size(unsafe { libc::readv(self.fd(), iov.as_ptr(), iov.len() as libc::c_int) })
    }

    /// Gather-write `iov` with `MSG_NOSIGNAL`.
    ///
    /// # Safety
    /// Every iovec must describe memory readable for its length.
    pub unsafe fn writev(&self, iov: &[libc::iovec]) -> io::Result<usize> {
        // SAFETY: msghdr is plain data; zero is valid.
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_iov = iov.as_ptr() as *mut libc::iovec;
        m.msg_iovlen = iov.len() as _;
        // SAFETY: the caller vouches for the iovecs; m is valid.
        cvt_size(unsafe { libc::sendmsg(self.fd(), &m, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) })
    }

    /// Write all of `buf`, waiting (poll) up to `timeout_ms` in total for room. For the
    /// small CM messages.
    pub fn write_all_timeout(&self, mut buf: &[u8], timeout_ms: i32) -> io::Result<()> {
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms.max(0) as u64);
        while !buf.is_empty() {
            // SAFETY: buf is readable for its length.
            match unsafe { self.writev(&[iovec(buf.as_ptr() as usize, buf.len())]) } {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() >= deadline {
                        return Err(io::Error::from(io::ErrorKind::TimedOut));
                    }
                    self.poll(libc::POLLOUT, 10)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `shutdown(SHUT_RDWR)` (errors ignored: the socket is going away).
    pub fn shutdown(&self) {
        // SAFETY: plain FFI call.
        unsafe { libc::shutdown(self.fd(), libc::SHUT_RDWR) };
    }

    /// The raw descriptor.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The first address of family v4/v6 (`v6`) of the interface `name`, from
/// `getifaddrs`; `None` if there is none.
pub fn iface_addr(name: &str, v6: bool) -> Option<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` on success; freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let n = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and starts with a sa_family_t.
        let fam = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let want = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        if fam != want {
            continue;
        }
        // SAFETY: zeroed storage is valid; we copy the family's struct size only.
        let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
        let len = if v6 {
            size_of::<libc::sockaddr_in6>()
        } else {
            size_of::<libc::sockaddr_in>()
        };
        // SAFETY: ifa_addr points at a sockaddr of the family's size; ss is larger.
        unsafe {
            std::ptr::copy_nonoverlapping(
                ifa.ifa_addr as *const u8,
                &mut ss as *mut _ as *mut u8,
                len,
            )
        };
        if let Ok(a) = from_raw(&ss) {
            found = Some(a.ip());
            break;
        }
    }
    // SAFETY: list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The errno of an I/O error, if it has one.
pub fn os_code(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_interface_has_an_address() {
        assert_eq!(
            iface_addr("lo", false),
            Some(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(iface_addr("no-such-if0", false), None);
    }

    #[test]
    fn roundtrip_addresses() {
        for a in ["127.0.0.1:5", "[::1]:7", "[fe80::1%3]:9"] {
            let sa: SocketAddr = a.parse().unwrap();
            let (ss, _) = to_raw(&sa);
            assert_eq!(from_raw(&ss).unwrap(), sa);
        }
    }

    #[test]
    fn listen_connect_accept_on_loopback() {
        let l_addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let l = Sock::stream(&l_addr).unwrap();
        l.bind(&l_addr).unwrap();
        l.listen(4).unwrap();
        let bound = l.local_addr().unwrap();
        let c = Sock::stream(&bound).unwrap();
        let _ = c.connect(&bound).unwrap();
        let mut acc = None;
        for _ in 0..200 {
            if let Some(a) = l.accept().unwrap() {
                acc = Some(a);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (s, peer) = acc.expect("accepted");
        assert_eq!(peer, c.local_addr().unwrap());
        c.poll(libc::POLLOUT, 1000).unwrap();
        c.write_all_timeout(b"hi", 1000).unwrap();
        s.poll(libc::POLLIN, 1000).unwrap();
        let mut b = [0u8; 2];
        assert_eq!(s.recv(&mut b).unwrap(), 2);
        assert_eq!(&b, b"hi");
    }
}
