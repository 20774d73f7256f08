//! The only code that calls the OS: a nonblocking UDP socket. Setup — `socket`, `bind`,
//! `connect`, `getsockname`, socket options, multicast membership — goes through the
//! `socket2` crate; the data path (`sendmsg`, `sendto`, `recvmsg`, `recvfrom`) calls
//! libc directly (see [`UdpSock::send_to`] for why). Socket addresses in the C layout
//! are the kit's [`SockAddr`].
//!
//! # Invariants
//!
//! - A [`UdpSock`] owns its descriptor (closed on drop); it is `O_NONBLOCK` and
//!   `O_CLOEXEC`, so no call here blocks.
//! - A [`SockAddr`] is plain data (`Copy`), so the data path copies it out of the
//!   address vector without allocating.
//!
//! Errors are `std::io::Error`s from the OS; callers map them to fabric errors.
//! Nothing here panics.

use std::io;
use std::mem::zeroed;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Socket, Type};

pub use ofi_kit::sock::SockAddr;

/// A nonblocking UDP socket.
#[derive(Debug)]
pub struct UdpSock {
    sock: Socket,
    v6: bool,
}

impl UdpSock {
    /// A socket of `addr`'s family bound to `addr` (port 0: the kernel picks one).
    /// IPv6 sockets are `IPV6_V6ONLY`. `sndbuf`/`rcvbuf` > 0 set the socket buffers.
    pub fn bind(addr: &SocketAddr, sndbuf: usize, rcvbuf: usize) -> io::Result<UdpSock> {
        let sock = UdpSock::open(addr.is_ipv6(), sndbuf, rcvbuf)?;
        sock.sock.bind(&(*addr).into())?;
        Ok(sock)
    }

    /// A socket sharing the port of `local` (whose socket called
    /// [`share_port`](Self::share_port)) and connected to `peer`: the kernel routes
    /// its datagrams once, at `connect`, and delivers `peer`'s datagrams to `local`'s
    /// port here (the more specific match) instead of to the shared socket. It joins
    /// no multicast group and takes none of the groups the shared socket joined
    /// (`IP_MULTICAST_ALL` / `IPV6_MULTICAST_ALL` off).
    pub fn connected(
        local: &SocketAddr,
        peer: &SockAddr,
        sndbuf: usize,
        rcvbuf: usize,
    ) -> io::Result<UdpSock> {
        let peer = peer
            .to_std()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))?;
        let sock = UdpSock::open(local.is_ipv6(), sndbuf, rcvbuf)?;
        sock.sock.set_reuse_port(true)?;
        if sock.v6 {
            sock.sock.set_multicast_all_v6(false)?;
        } else {
            sock.sock.set_multicast_all_v4(false)?;
        }
        sock.sock.bind(&(*local).into())?;
        sock.sock.connect(&peer.into())?;
        Ok(sock)
    }

    /// Let [`connected`](Self::connected) sockets of this user bind this socket's
    /// port (`SO_REUSEPORT`, set after the bind: a socket that did not set it still
    /// cannot bind the port).
    pub fn share_port(&self) -> io::Result<()> {
        self.sock.set_reuse_port(true)
    }

    fn open(v6: bool, sndbuf: usize, rcvbuf: usize) -> io::Result<UdpSock> {
        let domain = if v6 { Domain::IPV6 } else { Domain::IPV4 };
        // socket2 adds SOCK_CLOEXEC on Linux; SOCK_NONBLOCK at creation saves a call.
        let sock = Socket::new(domain, Type::DGRAM.nonblocking(), None)?;
        if v6 {
            sock.set_only_v6(true)?;
        }
        if sndbuf > 0 {
            sock.set_send_buffer_size(sndbuf.min(i32::MAX as usize))?;
        }
        if rcvbuf > 0 {
            sock.set_recv_buffer_size(rcvbuf.min(i32::MAX as usize))?;
        }
        Ok(UdpSock { sock, v6 })
    }

    /// Mark the datagrams with DSCP value `dscp`: `IP_TOS` (IPv4) or `IPV6_TCLASS`
    /// (IPv6) set to `dscp << 2` (the ECN bits stay 0).
    pub fn set_dscp(&self, dscp: u8) -> io::Result<()> {
        let tos = u32::from(dscp & 0x3f) << 2;
        if self.v6 {
            self.sock.set_tclass_v6(tos)
        } else {
            self.sock.set_tos_v4(tos)
        }
    }

    /// Whether this is an IPv6 socket.
    pub fn is_v6(&self) -> bool {
        self.v6
    }

    /// The descriptor (for waits).
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The bound address (`getsockname`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("getsockname: not an IP address"))
    }

    /// Send one datagram gathered from `iov` to `dst` (`None`: the connected peer);
    /// the bytes sent.
    ///
    /// Raw libc, like the other send and receive calls below: they are the measured data
    /// path (the `pingpong` and `pollcost` benches of this crate, and `fi_pingpong -p
    /// udp`): one system call each with exactly the flags needed, the application's
    /// buffers as raw iovecs (never made into slices), the kit's C-layout address
    /// passed as it is (no conversion per datagram), and `recvfrom` without a source
    /// address when none is wanted.
    ///
    /// # Safety
    /// Every iovec in `iov` points to memory valid for reading its length.
    #[inline]
    pub unsafe fn send_to(&self, dst: Option<&SockAddr>, iov: &[libc::iovec]) -> io::Result<usize> {
        // SAFETY: zeroed `msghdr` is valid; the fields set below point to live data.
        let mut m: libc::msghdr = unsafe { zeroed() };
        if let Some(dst) = dst {
            m.msg_name = dst.as_ptr() as *mut libc::c_void;
            m.msg_namelen = dst.len();
        }
        m.msg_iov = iov.as_ptr() as *mut libc::iovec;
        m.msg_iovlen = iov.len() as _;
        // SAFETY: `m` describes valid memory (caller's contract for the iovecs).
        let n = unsafe { libc::sendmsg(self.raw_fd(), &m, libc::MSG_DONTWAIT) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Send one datagram from one contiguous buffer to `dst` (`None`: the connected
    /// peer) with `sendto`, which the kernel handles faster than `sendmsg` with an I/O
    /// vector; the bytes sent.
    #[inline]
    pub fn send_buf(&self, dst: Option<&SockAddr>, buf: &[u8]) -> io::Result<usize> {
        let (name, len) = match dst {
            Some(d) => (d.as_ptr(), d.len()),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `buf` is valid for the call, and so is `dst` (or no address at all).
        let n = unsafe {
            libc::sendto(
                self.raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                name,
                len,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Receive one datagram, scattered into `iov`; returns its full length (which may
    /// exceed what fit: `MSG_TRUNC`) and the sender. With `peek` the datagram stays
    /// queued. `WouldBlock` when nothing is queued.
    ///
    /// # Safety
    /// Every iovec in `iov` points to memory valid for writing its length.
    #[inline]
    pub unsafe fn recv_from(
        &self,
        iov: &mut [libc::iovec],
        peek: bool,
    ) -> io::Result<(usize, SockAddr)> {
        let mut src = SockAddr::empty();
        // SAFETY: zeroed `msghdr` is valid; the fields set below point to live data.
        let mut m: libc::msghdr = unsafe { zeroed() };
        m.msg_name = src.as_mut_ptr().cast();
        m.msg_namelen = src.len();
        m.msg_iov = iov.as_mut_ptr();
        m.msg_iovlen = iov.len() as _;
        let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC | if peek { libc::MSG_PEEK } else { 0 };
        // SAFETY: `m` describes valid memory (caller's contract for the iovecs, `src`
        // lives across the call).
        let n = unsafe { libc::recvmsg(self.raw_fd(), &mut m, flags) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        *src.len_mut() = m.msg_namelen;
        Ok((n as usize, src))
    }

    /// Receive one datagram into `buf` with `recvfrom(2)` (no message header or I/O
    /// vector for the kernel to import: the cheaper call for small receives); returns
    /// its full length (which may exceed `buf`: `MSG_TRUNC`) and, with `want_src`, the
    /// sender (else an empty address: the kernel copies none out). `WouldBlock` when
    /// nothing is queued.
    #[inline]
    pub fn recv_into(&self, buf: &mut [u8], want_src: bool) -> io::Result<(usize, SockAddr)> {
        let mut src = SockAddr::empty();
        let mut len = src.len();
        let (name, name_len) = if want_src {
            (src.as_mut_ptr().cast(), &mut len as *mut libc::socklen_t)
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        // SAFETY: `buf` is writable for its length; `src` and `len` (when passed) live
        // across the call and `len` holds the address buffer's size.
        let n = unsafe {
            libc::recvfrom(
                self.raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                name,
                name_len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if want_src {
            *src.len_mut() = len;
        }
        Ok((n as usize, src))
    }

    /// Join (`join = true`) or leave the multicast group `group`: IPv4 on the interface
    /// with address `v4_if` (`0.0.0.0`: the kernel's choice), IPv6 on the interface
    /// with index `v6_ifindex` (0: the kernel's choice).
    pub fn membership(
        &self,
        group: &IpAddr,
        v4_if: Ipv4Addr,
        v6_ifindex: u32,
        join: bool,
    ) -> io::Result<()> {
        match (group, join) {
            (IpAddr::V4(g), true) => self.sock.join_multicast_v4(g, &v4_if),
            (IpAddr::V4(g), false) => self.sock.leave_multicast_v4(g, &v4_if),
            (IpAddr::V6(g), true) => self.sock.join_multicast_v6(g, v6_ifindex),
            (IpAddr::V6(g), false) => self.sock.leave_multicast_v6(g, v6_ifindex),
        }
    }

    /// Set the outgoing interface of IPv4 multicast to the address `ifaddr` and turn
    /// multicast loopback on (so a group member on this host receives its own sends).
    pub fn multicast_v4_setup(&self, ifaddr: Ipv4Addr) -> io::Result<()> {
        self.sock.set_multicast_if_v4(&ifaddr)?;
        self.sock.set_multicast_loop_v4(true)
    }

    /// Set the outgoing interface of IPv6 multicast (index, 0 = default) and turn
    /// multicast loopback on.
    pub fn multicast_v6_setup(&self, ifindex: u32) -> io::Result<()> {
        self.sock.set_multicast_if_v6(ifindex)?;
        self.sock.set_multicast_loop_v6(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_round_trips() {
        for a in [
            "127.0.0.1:7471".parse::<SocketAddr>().unwrap(),
            "[::1]:9".parse().unwrap(),
            "[fe80::1%2]:65535".parse().unwrap(),
        ] {
            assert_eq!(SockAddr::from_std(&a).to_std(), Some(a));
        }
        assert_eq!(SockAddr::empty().to_std(), None);
    }

    #[test]
    fn loopback_datagram_with_scatter() {
        let a = UdpSock::bind(&"127.0.0.1:0".parse().unwrap(), 0, 0).unwrap();
        let b = UdpSock::bind(&"127.0.0.1:0".parse().unwrap(), 0, 0).unwrap();
        let dst = SockAddr::from_std(&b.local_addr().unwrap());
        let (p1, p2) = (*b"head", *b"payload!");
        let iov = [
            libc::iovec {
                iov_base: p1.as_ptr() as *mut _,
                iov_len: 4,
            },
            libc::iovec {
                iov_base: p2.as_ptr() as *mut _,
                iov_len: 8,
            },
        ];
        // SAFETY: the iovecs point at live arrays.
        assert_eq!(unsafe { a.send_to(Some(&dst), &iov) }.unwrap(), 12);
        let (mut h, mut small) = ([0u8; 4], [0u8; 3]);
        let mut riov = [
            libc::iovec {
                iov_base: h.as_mut_ptr().cast(),
                iov_len: 4,
            },
            libc::iovec {
                iov_base: small.as_mut_ptr().cast(),
                iov_len: 3,
            },
        ];
        let mut got = None;
        for _ in 0..1000 {
            // SAFETY: the iovecs point at live arrays.
            match unsafe { b.recv_from(&mut riov, false) } {
                Ok(r) => {
                    got = Some(r);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        let (n, src) = got.expect("datagram within a second");
        assert_eq!(n, 12, "full length despite truncation");
        assert_eq!(src.to_std(), Some(a.local_addr().unwrap()));
        assert_eq!(&h, b"head");
        assert_eq!(&small, b"pay");
    }
}
