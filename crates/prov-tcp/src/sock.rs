//! The only code of this crate that calls the OS: nonblocking TCP sockets through
//! `libc` (socket, bind, listen, accept4, connect, recv, readv, sendmsg, poll,
//! getsockname/getpeername, setsockopt).
//!
//! Every socket is created `SOCK_NONBLOCK | SOCK_CLOEXEC`; sends use `MSG_NOSIGNAL` so
//! a dead peer is an `EPIPE` error, never a signal. Socket addresses, errno conversion
//! and interface lookup are the kit's (`ofi_kit::sock`). Nothing here panics.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ofi_kit::sock::{cvt, cvt_size, SockAddr};
pub use ofi_kit::sock::{iface_addr, iovec, os_code};

/// A nonblocking TCP socket (closed on drop).
#[derive(Debug)]
pub struct Sock(OwnedFd);

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
        ofi_kit::sock::setsockopt_int(self.fd(), level, name, val)
    }

    /// `TCP_NODELAY` on.
    pub fn set_nodelay(&self) -> io::Result<()> {
        self.setopt(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
    }

    /// Switch the connection's congestion control to `name` (`TCP_CONGESTION`).
    pub fn set_congestion(&self, name: &str) -> io::Result<()> {
        // SAFETY: `name` is valid for `name.len()` bytes during the call; the kernel
        // copies at most that (it needs no terminating NUL).
        let r = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name.as_ptr().cast(),
                name.len() as libc::socklen_t,
            )
        };
        ofi_kit::sock::cvt(r).map(|_| ())
    }

    /// The connection's congestion control (`TCP_CONGESTION`).
    pub fn congestion(&self) -> io::Result<String> {
        let mut b = [0u8; 16];
        let mut len = b.len() as libc::socklen_t;
        // SAFETY: `b` has room for `len` bytes; the kernel writes at most that and
        // updates `len`.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                b.as_mut_ptr().cast(),
                &mut len,
            )
        };
        ofi_kit::sock::cvt(r)?;
        let b = &b[..(len as usize).min(b.len())];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
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
        let sa = SockAddr::from_std(addr);
        // SAFETY: `sa` is a valid sockaddr of `sa.len()` bytes.
        cvt(unsafe { libc::bind(self.fd(), sa.as_ptr(), sa.len()) }).map(drop)
    }

    /// Listen with `backlog`.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        // SAFETY: plain FFI call.
        cvt(unsafe { libc::listen(self.fd(), backlog) }).map(drop)
    }

    /// Start connecting: `Ok(true)` connected, `Ok(false)` in progress.
    pub fn connect(&self, addr: &SocketAddr) -> io::Result<bool> {
        let sa = SockAddr::from_std(addr);
        // SAFETY: `sa` is a valid sockaddr of `sa.len()` bytes.
        let r = unsafe { libc::connect(self.fd(), sa.as_ptr(), sa.len()) };
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
        let mut sa = SockAddr::empty();
        let p = sa.as_mut_ptr();
        // SAFETY: `sa` has room for `len` bytes; the kernel writes at most that.
        let r = unsafe {
            libc::accept4(
                self.fd(),
                p,
                sa.len_mut(),
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
        Ok(Some((s, sa.to_std_or_err()?)))
    }

    fn name(&self, peer: bool) -> io::Result<SocketAddr> {
        let mut sa = SockAddr::empty();
        let p = sa.as_mut_ptr();
        // SAFETY: `sa` has room for `len` bytes; the kernel writes at most that.
        cvt(unsafe {
            if peer {
                libc::getpeername(self.fd(), p, sa.len_mut())
            } else {
                libc::getsockname(self.fd(), p, sa.len_mut())
            }
        })?;
        sa.to_std_or_err()
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

#[cfg(test)]
mod tests {
    use super::*;

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
