//! Network interfaces and the source address an IP provider binds when the
//! application gave none: the rules every socket provider shares, so an endpoint is
//! reachable from other hosts by default.
//!
//! - [`IfName`]: an interface name as a provider parameter holds it (`FI_UDP_IFACE`,
//!   `FI_TCP_IFACE`): at most 15 bytes (the kernel's limit), `Copy`.
//! - [`addrs`]: every address of every interface, in the kernel's order
//!   (`getifaddrs(3)`), with whether the interface is up, running and loopback.
//! - [`iface_ip`]: the address of a named interface in one family (IPv6: a global
//!   address before a link-local one, which a peer could not use without its scope).
//! - [`default_ip`]: the address to name an endpoint by when nothing chose one: the
//!   first running, up, non-loopback interface's (IPv6: not link-local), then the
//!   first up one's, and the loopback address only when there is no other interface.
//! - [`route_source`]: the source address the kernel's routing picks for a destination
//!   (a UDP socket connected there, which sends nothing).
//!
//! Invariants: nothing here sends a packet or panics; a failed system call is an empty
//! list or `None`, never an error the data path sees (this runs only at getinfo and
//! endpoint setup).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use crate::sock::SockAddr;

/// The longest interface name (`IFNAMSIZ` less its NUL).
pub const IFNAME_MAX: usize = 15;

/// An interface name of at most [`IFNAME_MAX`] bytes, stored inline (`Copy`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IfName {
    bytes: [u8; IFNAME_MAX],
    len: u8,
}

impl IfName {
    /// `name` as an interface name; `None` when it is empty, longer than
    /// [`IFNAME_MAX`] bytes, or holds a NUL, `/` or white space (which no interface
    /// name can).
    pub fn new(name: &str) -> Option<IfName> {
        let b = name.as_bytes();
        if b.is_empty()
            || b.len() > IFNAME_MAX
            || b.iter()
                .any(|&c| c == 0 || c == b'/' || c.is_ascii_whitespace())
        {
            return None;
        }
        let mut bytes = [0u8; IFNAME_MAX];
        bytes[..b.len()].copy_from_slice(b);
        Some(IfName {
            bytes,
            len: b.len() as u8,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` in `new`, so always UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether an interface of this name exists now (in this network namespace).
    pub fn exists(&self) -> bool {
        let mut c = [0u8; IFNAME_MAX + 1];
        c[..usize::from(self.len)].copy_from_slice(&self.bytes[..usize::from(self.len)]);
        // SAFETY: `c` is NUL-terminated (the name holds no NUL and is shorter than it).
        unsafe { libc::if_nametoindex(c.as_ptr().cast()) != 0 }
    }
}

impl std::fmt::Debug for IfName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for IfName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One address of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// The interface's name.
    pub name: String,
    /// The address.
    pub ip: IpAddr,
    /// `IFF_UP`: administratively up.
    pub up: bool,
    /// `IFF_RUNNING`: up with a carrier.
    pub running: bool,
    /// `IFF_LOOPBACK`.
    pub loopback: bool,
}

/// Every IPv4 and IPv6 address of every interface, in the kernel's order; empty when
/// `getifaddrs(3)` fails.
pub fn addrs() -> Vec<IfAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` on success; it is freed below, once.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until the free.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and starts with a sa_family_t.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let len = match family {
            libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
            libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
            _ => continue,
        };
        let mut sa = SockAddr::empty();
        // SAFETY: for these two families ifa_addr points at a sockaddr of `len` bytes,
        // which fits in the storage (a sockaddr_in6).
        unsafe {
            std::ptr::copy_nonoverlapping(
                ifa.ifa_addr.cast::<u8>(),
                sa.as_mut_ptr().cast::<u8>(),
                len,
            )
        };
        *sa.len_mut() = len as libc::socklen_t;
        let Some(addr) = sa.to_std() else { continue };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        let flags = ifa.ifa_flags;
        out.push(IfAddr {
            name: name.to_string_lossy().into_owned(),
            ip: addr.ip(),
            up: flags & libc::IFF_UP as u32 != 0,
            running: flags & libc::IFF_RUNNING as u32 != 0,
            loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
        });
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// An IPv6 link-local address (fe80::/10): usable only with its interface's scope.
/// Whether `ip` is an IPv6 link-local address (`fe80::/10`: unusable without its scope).
pub fn link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80)
}

/// The address of interface `name` in the IPv6 family (`v6`) or IPv4; for IPv6 a
/// global address before a link-local one. `None`: no such interface, or none of the
/// family.
pub fn iface_ip(name: &str, v6: bool) -> Option<IpAddr> {
    let of_family: Vec<IpAddr> = addrs()
        .into_iter()
        .filter(|a| a.name == name && a.ip.is_ipv6() == v6)
        .map(|a| a.ip)
        .collect();
    of_family
        .iter()
        .find(|ip| !link_local(ip))
        .or(of_family.first())
        .copied()
}

/// The loopback address of a family.
pub fn loopback_ip(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

/// The address an endpoint is named by when the application chose none (see the
/// module docs): never loopback while another interface of the family is up.
pub fn default_ip(v6: bool) -> IpAddr {
    choose_default(&addrs(), v6).unwrap_or_else(|| loopback_ip(v6))
}

/// [`default_ip`]'s choice among `list` (`None`: only loopback is left).
fn choose_default(list: &[IfAddr], v6: bool) -> Option<IpAddr> {
    let usable = |a: &&IfAddr| {
        a.up && !a.loopback && a.ip.is_ipv6() == v6 && !link_local(&a.ip) && !a.ip.is_loopback()
    };
    list.iter()
        .filter(usable)
        .find(|a| a.running)
        .or_else(|| list.iter().find(usable))
        .map(|a| a.ip)
}

/// The source address the routing table picks for `dest` (port ignored); `None` when
/// there is no route. Connecting a UDP socket sends nothing.
pub fn route_source(dest: &SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = if dest.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let mut to = *dest;
    if to.port() == 0 {
        // Port 0 cannot be connected to; the route does not depend on the port.
        to.set_port(9);
    }
    let sock = UdpSocket::bind(any).ok()?;
    sock.connect(to).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// `addr` with its IP replaced by `ip` (the port, flow and scope kept).
pub fn with_ip(addr: SocketAddr, ip: IpAddr) -> SocketAddr {
    let mut a = addr;
    a.set_ip(ip);
    a
}

/// The error text for an interface that does not exist.
pub fn no_such_iface(param: &str, name: &IfName) -> String {
    format!("{param}={name}: no network interface of that name")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(name: &str, ip: &str, up: bool, running: bool, loopback: bool) -> IfAddr {
        IfAddr {
            name: name.into(),
            ip: ip.parse().unwrap(),
            up,
            running,
            loopback,
        }
    }

    #[test]
    fn names_are_checked_and_copied() {
        assert_eq!(IfName::new("eth0").unwrap().as_str(), "eth0");
        assert_eq!(IfName::new("a23456789012345").unwrap().as_str().len(), 15);
        assert!(IfName::new("").is_none());
        assert!(IfName::new("a234567890123456").is_none(), "16 bytes");
        assert!(IfName::new("a b").is_none());
        assert!(IfName::new("a/b").is_none());
        assert!(IfName::new("lo").unwrap().exists());
        assert!(!IfName::new("nosuchif0").unwrap().exists());
    }

    #[test]
    fn default_prefers_running_non_loopback_interfaces() {
        let list = vec![
            a("lo", "127.0.0.1", true, true, true),
            a("lo", "::1", true, true, true),
            a("down0", "10.9.9.9", false, false, false),
            a("nocarrier0", "10.8.8.8", true, false, false),
            a("eth0", "192.0.2.7", true, true, false),
            a("eth0", "fe80::1", true, true, false),
            a("eth0", "fd00::7", true, true, false),
        ];
        assert_eq!(
            choose_default(&list, false),
            Some("192.0.2.7".parse().unwrap())
        );
        assert_eq!(
            choose_default(&list, true),
            Some("fd00::7".parse().unwrap())
        );
        // Up without a carrier beats loopback.
        assert_eq!(
            choose_default(&list[..4], false),
            Some("10.8.8.8".parse().unwrap())
        );
        // Only loopback (and a link-local address): nothing, so the caller's loopback.
        assert_eq!(choose_default(&list[..3], false), None);
        assert_eq!(
            choose_default(&[list[1].clone(), list[5].clone()], true),
            None
        );
    }

    #[test]
    fn the_loopback_interface_and_its_route() {
        assert_eq!(iface_ip("lo", false), Some(loopback_ip(false)));
        assert_eq!(iface_ip("nosuchif0", false), None);
        assert_eq!(
            route_source(&"127.0.0.1:0".parse().unwrap()),
            Some(loopback_ip(false))
        );
        let d = default_ip(false);
        assert!(d.is_ipv4());
        assert_eq!(
            with_ip("0.0.0.0:77".parse().unwrap(), d),
            SocketAddr::new(d, 77)
        );
    }
}
