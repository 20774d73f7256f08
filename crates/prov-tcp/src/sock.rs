//! The only code of this crate that calls the OS: nonblocking TCP sockets.
//!
//! Setup and options (socket, bind, listen, accept, connect, names, `SO_ERROR`,
//! `TCP_NODELAY`, `TCP_CONGESTION`, `SO_REUSEADDR`, `SO_BINDTODEVICE`, shutdown) go
//! through the `socket2` crate. Raw `libc` calls are left only where `socket2` would
//! need a borrow the data path must not make, or has no call:
//! - `readv` / `sendmsg` on the data path: their iovecs describe application buffers
//!   and registered memory, which are never borrowed as `IoSlice` / `IoSliceMut`
//!   (a same-host peer may write registered memory at any moment; see `ep`). The
//!   call made is the one `socket2`'s vectored calls would make — one system call of
//!   header and payload — so the choice costs nothing: the instruction counts of a
//!   fixed-iteration `fi_pingpong` run are unchanged by this module's move to
//!   `socket2` (callgrind, see the branch's report).
//! - `poll` (neither `std` nor `socket2` waits on one descriptor with a time-out).
//!
//! Every socket is created `SOCK_NONBLOCK | SOCK_CLOEXEC`; sends use `MSG_NOSIGNAL` so
//! a dead peer is an `EPIPE` error, never a signal. Errno conversion and interface
//! lookup are the kit's (`ofi_kit::sock`). Nothing here panics.

use std::io::{self, Read};
use std::mem::zeroed;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

use ofi_kit::sock::cvt_size;
pub use ofi_kit::sock::{iface_addr, iovec, os_code};
use socket2::{Domain, Socket, Type};

/// A nonblocking TCP socket (closed on drop).
#[derive(Debug)]
pub struct Sock(Socket);

/// The standard form of a `socket2` address (`EINVAL` for a family other than IPv4 or
/// IPv6).
fn std_addr(a: socket2::SockAddr) -> io::Result<SocketAddr> {
    a.as_socket()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
}

impl Sock {
    /// A new nonblocking stream socket of `addr`'s family.
    pub fn stream(addr: &SocketAddr) -> io::Result<Sock> {
        let ty = Type::STREAM.nonblocking().cloexec();
        Socket::new(Domain::for_address(*addr), ty, None).map(Sock)
    }

    /// `TCP_NODELAY` on.
    pub fn set_nodelay(&self) -> io::Result<()> {
        self.0.set_tcp_nodelay(true)
    }

    /// Switch the connection's congestion control to `name` (`TCP_CONGESTION`).
    pub fn set_congestion(&self, name: &str) -> io::Result<()> {
        self.0.set_tcp_congestion(name.as_bytes())
    }

    /// The connection's congestion control (`TCP_CONGESTION`).
    pub fn congestion(&self) -> io::Result<String> {
        let b = self.0.tcp_congestion()?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }

    /// Mark the packets with DSCP value `dscp`: `IP_TOS` (IPv4) or `IPV6_TCLASS`
    /// (IPv6) set to `dscp << 2` (the ECN bits stay 0).
    pub fn set_dscp(&self, v6: bool, dscp: u8) -> io::Result<()> {
        let tos = u32::from(dscp & 0x3f) << 2;
        if v6 {
            self.0.set_tclass_v6(tos)
        } else {
            self.0.set_tos_v4(tos)
        }
    }

    /// `SO_REUSEADDR` on.
    pub fn set_reuseaddr(&self) -> io::Result<()> {
        self.0.set_reuse_address(true)
    }

    /// Bind to a network device (`SO_BINDTODEVICE`).
    pub fn bind_device(&self, name: &str) -> io::Result<()> {
        self.0.bind_device(Some(name.as_bytes()))
    }

    /// Bind to `addr`.
    pub fn bind(&self, addr: &SocketAddr) -> io::Result<()> {
        self.0.bind(&(*addr).into())
    }

    /// Listen with `backlog`.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        self.0.listen(backlog)
    }

    /// Start connecting: `Ok(true)` connected, `Ok(false)` in progress.
    pub fn connect(&self, addr: &SocketAddr) -> io::Result<bool> {
        match self.0.connect(&(*addr).into()) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Accept one connection, nonblocking: `Ok(None)` when none is waiting.
    pub fn accept(&self) -> io::Result<Option<(Sock, SocketAddr)>> {
        match self.0.accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
            Ok((s, a)) => Ok(Some((Sock(s), std_addr(a)?))),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        std_addr(self.0.local_addr()?)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        std_addr(self.0.peer_addr()?)
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
        self.0.take_error()
    }

    /// Receive into `buf`: `Ok(0)` is end of stream; `WouldBlock` when nothing waits
    /// (the socket is nonblocking).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.0).read(buf)
    }

    /// Scatter-read into `iov` (raw: see the module docs).
    ///
    /// # Safety
    /// Every iovec must describe memory writable for its length.
    pub unsafe fn readv(&self, iov: &[libc::iovec]) -> io::Result<usize> {
        // SAFETY: the caller vouches for the iovecs.
        cvt_size(unsafe { libc::readv(self.fd(), iov.as_ptr(), iov.len() as libc::c_int) })
    }

    /// Gather-write `iov` with `MSG_NOSIGNAL` (raw: see the module docs).
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
            match self.0.send_with_flags(buf, libc::MSG_NOSIGNAL) {
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
        let _ = self.0.shutdown(Shutdown::Both);
    }

    /// The raw descriptor.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A connected pair (client, accepted) of sockets on loopback, and the client's
    /// address as the listener saw it; the client is writable.
    pub(crate) fn loopback_pair() -> (Sock, Sock, SocketAddr) {
        let l_addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let l = Sock::stream(&l_addr).unwrap();
        l.bind(&l_addr).unwrap();
        l.listen(4).unwrap();
        let bound = l.local_addr().unwrap();
        let c = Sock::stream(&bound).unwrap();
        let _ = c.connect(&bound).unwrap();
        for _ in 0..400 {
            if let Some((s, peer)) = l.accept().unwrap() {
                c.poll(libc::POLLOUT, 2000).unwrap();
                return (c, s, peer);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("no connection accepted");
    }

    #[test]
    fn listen_connect_accept_on_loopback() {
        let (c, s, peer) = loopback_pair();
        assert_eq!(peer, c.local_addr().unwrap());
        c.write_all_timeout(b"hi", 1000).unwrap();
        s.poll(libc::POLLIN, 1000).unwrap();
        let mut b = [0u8; 2];
        assert_eq!(s.recv(&mut b).unwrap(), 2);
        assert_eq!(&b, b"hi");
    }
}
