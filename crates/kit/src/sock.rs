//! Socket helpers the socket-based providers share: [`SockAddr`], a socket address in
//! the C layout (IPv4 or IPv6, `Copy`, no allocation — the data path keeps one per
//! peer), the `-1`/errno conversions of system call results,
//! the address of a named interface, and `iovec` construction.
//!
//! Invariants: a [`SockAddr`] is always plain data that the kernel may fill (its
//! length says how much is valid); [`SockAddr::to_std`] reads only what the family and
//! length promise. Nothing here panics.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address in the C layout (IPv4 or IPv6), `Copy` and allocation-free.
#[derive(Clone, Copy)]
pub struct SockAddr {
    storage: libc::sockaddr_in6,
    len: libc::socklen_t,
}

impl std::fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_std() {
            Some(a) => write!(f, "SockAddr({a})"),
            None => f.write_str("SockAddr(?)"),
        }
    }
}

impl SockAddr {
    /// An empty address (family 0) with room for any IPv4 / IPv6 address, for the
    /// kernel to fill (`recvmsg`, `accept4`, `getsockname`).
    pub fn empty() -> SockAddr {
        SockAddr {
            // SAFETY: all-zero bytes are a valid `sockaddr_in6` (plain integers).
            storage: unsafe { zeroed() },
            len: size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        }
    }

    /// The C form of `a`.
    pub fn from_std(a: &SocketAddr) -> SockAddr {
        let mut s = SockAddr::empty();
        match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*v4.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_in` (16 bytes) fits in the `sockaddr_in6` storage
                // (28 bytes); both are plain data, the write is unaligned-safe.
                unsafe {
                    std::ptr::write_unaligned(
                        (&mut s.storage as *mut libc::sockaddr_in6).cast::<libc::sockaddr_in>(),
                        sin,
                    )
                };
                s.len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(v6) => {
                s.storage = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                s.len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        s
    }

    /// Whether `self` and `other` name the same socket address: family, port and
    /// address (for IPv6 also flow info and scope). Addresses made by
    /// [`from_std`](Self::from_std) or filled by the kernel compare as expected.
    pub fn same(&self, other: &SockAddr) -> bool {
        let (a, b) = (&self.storage, &other.storage);
        // For AF_INET the IPv4 address occupies the bytes of `sin6_flowinfo` (both
        // layouts: family, port, then four bytes), so these three fields cover it.
        if a.sin6_family != b.sin6_family
            || a.sin6_port != b.sin6_port
            || a.sin6_flowinfo != b.sin6_flowinfo
        {
            return false;
        }
        self.family() != libc::AF_INET6
            || (a.sin6_addr.s6_addr == b.sin6_addr.s6_addr && a.sin6_scope_id == b.sin6_scope_id)
    }

    /// The address family (`AF_INET`, `AF_INET6`, or 0 when empty).
    pub fn family(&self) -> i32 {
        i32::from(self.storage.sin6_family)
    }

    /// The standard form, if the address is IPv4 or IPv6 and long enough.
    pub fn to_std(&self) -> Option<SocketAddr> {
        match self.family() {
            libc::AF_INET if self.len as usize >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the storage holds a `sockaddr_in` (family AF_INET, length
                // checked); unaligned read of plain data.
                let sin: libc::sockaddr_in = unsafe {
                    std::ptr::read_unaligned(
                        (&self.storage as *const libc::sockaddr_in6).cast::<libc::sockaddr_in>(),
                    )
                };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if self.len as usize >= size_of::<libc::sockaddr_in6>() => {
                let s = &self.storage;
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// [`SockAddr::to_std`], or an `InvalidData` error naming the family.
    pub fn to_std_or_err(&self) -> io::Result<SocketAddr> {
        self.to_std().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("address family {}", self.family()),
            )
        })
    }

    /// The address for the kernel to read (`bind`, `connect`, `sendto`).
    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.storage as *const libc::sockaddr_in6).cast()
    }

    /// The address for the kernel to write (`len_mut` bytes of room).
    pub fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        (&mut self.storage as *mut libc::sockaddr_in6).cast()
    }

    /// The valid length in bytes.
    pub fn len(&self) -> libc::socklen_t {
        self.len
    }

    /// True for an address of length 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The length, for the kernel to update (in: room; out: the address's length).
    /// Values over the storage's size are clamped when read back by
    /// [`SockAddr::to_std`] (it checks the family's size only).
    pub fn len_mut(&mut self) -> &mut libc::socklen_t {
        &mut self.len
    }
}

/// A system call's `int` result: `-1` becomes the errno as an `io::Error`.
pub fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A system call's `ssize_t` result: `-1` becomes the errno as an `io::Error`.
pub fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// An `iovec` for `len` bytes at `base`.
#[inline]
pub fn iovec(base: usize, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: base as *mut libc::c_void,
        iov_len: len,
    }
}

/// The errno of an I/O error (`EIO` if it has none).
pub fn os_code(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The IPv4 (`v6` false) or IPv6 address of the interface `name` (see
/// [`crate::netif::iface_ip`]); `None` if there is none.
pub fn iface_addr(name: &str, v6: bool) -> Option<IpAddr> {
    crate::netif::iface_ip(name, v6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip() {
        for a in ["127.0.0.1:80", "[::1]:9", "[fe80::1%2]:7", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(SockAddr::from_std(&a).to_std(), Some(a));
        }
        assert_eq!(SockAddr::empty().to_std(), None);
        assert!(SockAddr::empty().to_std_or_err().is_err());
        let mut short = SockAddr::from_std(&"[::1]:9".parse().unwrap());
        *short.len_mut() = 8;
        assert_eq!(short.to_std(), None, "a truncated address is not read");
    }

    /// `same` agrees with comparing the standard forms, for every pair of a list that
    /// differs in each field in turn.
    #[test]
    fn same_compares_family_port_and_address() {
        let list: Vec<SocketAddr> = [
            "127.0.0.1:80",
            "127.0.0.1:81",
            "127.0.0.2:80",
            "0.0.0.0:80",
            "[::1]:80",
            "[::1]:81",
            "[::2]:80",
            "[fe80::1%2]:80",
            "[fe80::1%3]:80",
            "[::ffff:127.0.0.1]:80",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        for a in &list {
            for b in &list {
                let (x, y) = (SockAddr::from_std(a), SockAddr::from_std(b));
                assert_eq!(x.same(&y), a == b, "{a} vs {b}");
            }
        }
        // An address the kernel filled (a round trip through a real socket).
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut k = SockAddr::empty();
        let p = k.as_mut_ptr();
        // SAFETY: `k` has room for its length; the kernel writes at most that.
        cvt(unsafe { libc::getsockname(std::os::fd::AsRawFd::as_raw_fd(&s), p, k.len_mut()) })
            .unwrap();
        assert!(k.same(&SockAddr::from_std(&s.local_addr().unwrap())));
    }

    #[test]
    fn loopback_has_an_address_and_errors_keep_errno() {
        assert_eq!(
            iface_addr("lo", false),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        assert_eq!(iface_addr("no-such-interface0", false), None);
        // SAFETY: closing an invalid descriptor only fails.
        let e = cvt(unsafe { libc::close(-1) }).unwrap_err();
        assert_eq!(os_code(&e), libc::EBADF);
    }
}
