//! The only code that calls the OS: a nonblocking UDP socket (`socket`, `bind`,
//! `connect`, `sendmsg`, `recvmsg`, `getsockname`, socket options, multicast
//! membership). Socket
//! addresses in the C layout are the kit's [`SockAddr`].
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
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ofi_kit::sock::cvt;
pub use ofi_kit::sock::SockAddr;

/// `IPV6_MULTICAST_ALL` (Linux 4.20; not in the libc crate for this target).
const IPV6_MULTICAST_ALL: i32 = 29;

/// A nonblocking UDP socket.
#[derive(Debug)]
pub struct UdpSock {
    fd: OwnedFd,
    v6: bool,
}

fn setsockopt<T>(fd: RawFd, level: i32, name: i32, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of `size_of::<T>()` bytes for the call.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (val as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl UdpSock {
    /// A socket of `addr`'s family bound to `addr` (port 0: the kernel picks one).
    /// IPv6 sockets are `IPV6_V6ONLY`. `sndbuf`/`rcvbuf` > 0 set the socket buffers.
    pub fn bind(addr: &SocketAddr, sndbuf: usize, rcvbuf: usize) -> io::Result<UdpSock> {
        let sock = UdpSock::open(addr.is_ipv6(), sndbuf, rcvbuf)?;
        sock.bind_to(addr)?;
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
        let sock = UdpSock::open(local.is_ipv6(), sndbuf, rcvbuf)?;
        let raw = sock.raw_fd();
        setsockopt(raw, libc::SOL_SOCKET, libc::SO_REUSEPORT, &1i32)?;
        if sock.v6 {
            setsockopt(raw, libc::IPPROTO_IPV6, IPV6_MULTICAST_ALL, &0i32)?;
        } else {
            setsockopt(raw, libc::IPPROTO_IP, libc::IP_MULTICAST_ALL, &0i32)?;
        }
        sock.bind_to(local)?;
        // SAFETY: `peer` is a valid socket address of `peer.len()` bytes.
        cvt(unsafe { libc::connect(raw, peer.as_ptr(), peer.len()) })?;
        Ok(sock)
    }

    /// Let [`connected`](Self::connected) sockets of this user bind this socket's
    /// port (`SO_REUSEPORT`, set after the bind: a socket that did not set it still
    /// cannot bind the port).
    pub fn share_port(&self) -> io::Result<()> {
        setsockopt(self.raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, &1i32)
    }

    fn open(v6: bool, sndbuf: usize, rcvbuf: usize) -> io::Result<UdpSock> {
        let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        // SAFETY: plain syscall; the result is checked.
        let fd = cvt(unsafe {
            libc::socket(
                family,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        if v6 {
            setsockopt(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, &1i32)?;
        }
        if sndbuf > 0 {
            let v = i32::try_from(sndbuf).unwrap_or(i32::MAX);
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &v)?;
        }
        if rcvbuf > 0 {
            let v = i32::try_from(rcvbuf).unwrap_or(i32::MAX);
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &v)?;
        }
        Ok(UdpSock { fd, v6 })
    }

    fn bind_to(&self, addr: &SocketAddr) -> io::Result<()> {
        let sa = SockAddr::from_std(addr);
        // SAFETY: `sa` is a valid socket address of `sa.len()` bytes.
        cvt(unsafe { libc::bind(self.raw_fd(), sa.as_ptr(), sa.len()) }).map(|_| ())
    }

    /// Whether this is an IPv6 socket.
    pub fn is_v6(&self) -> bool {
        self.v6
    }

    /// The descriptor (for waits).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The bound address (`getsockname`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let mut sa = SockAddr::empty();
        let p = sa.as_mut_ptr();
        // SAFETY: `sa` has room for `len` bytes; the kernel writes at most that and
        // updates the length.
        cvt(unsafe { libc::getsockname(self.raw_fd(), p, sa.len_mut()) })?;
        sa.to_std()
            .ok_or_else(|| io::Error::other("getsockname: not an IP address"))
    }

    /// Send one datagram gathered from `iov` to `dst` (`None`: the connected peer);
    /// the bytes sent.
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
        match group {
            IpAddr::V4(g) => {
                let mreq = libc::ip_mreq {
                    imr_multiaddr: libc::in_addr {
                        s_addr: u32::from(*g).to_be(),
                    },
                    imr_interface: libc::in_addr {
                        s_addr: u32::from(v4_if).to_be(),
                    },
                };
                let opt = if join {
                    libc::IP_ADD_MEMBERSHIP
                } else {
                    libc::IP_DROP_MEMBERSHIP
                };
                setsockopt(self.raw_fd(), libc::IPPROTO_IP, opt, &mreq)
            }
            IpAddr::V6(g) => {
                let mreq = libc::ipv6_mreq {
                    ipv6mr_multiaddr: libc::in6_addr {
                        s6_addr: g.octets(),
                    },
                    ipv6mr_interface: v6_ifindex,
                };
                let opt = if join {
                    libc::IPV6_ADD_MEMBERSHIP
                } else {
                    libc::IPV6_DROP_MEMBERSHIP
                };
                setsockopt(self.raw_fd(), libc::IPPROTO_IPV6, opt, &mreq)
            }
        }
    }

    /// Set the outgoing interface of IPv4 multicast to the address `ifaddr` and turn
    /// multicast loopback on (so a group member on this host receives its own sends).
    pub fn multicast_v4_setup(&self, ifaddr: Ipv4Addr) -> io::Result<()> {
        let a = libc::in_addr {
            s_addr: u32::from(ifaddr).to_be(),
        };
        setsockopt(self.raw_fd(), libc::IPPROTO_IP, libc::IP_MULTICAST_IF, &a)?;
        setsockopt(
            self.raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_LOOP,
            &1i32,
        )
    }

    /// Set the outgoing interface of IPv6 multicast (index, 0 = default) and turn
    /// multicast loopback on.
    pub fn multicast_v6_setup(&self, ifindex: u32) -> io::Result<()> {
        setsockopt(
            self.raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_IF,
            &ifindex,
        )?;
        setsockopt(
            self.raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MULTICAST_LOOP,
            &1i32,
        )
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
