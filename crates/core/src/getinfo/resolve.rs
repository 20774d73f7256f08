//! Turning getinfo's `node` / `service` into addresses (reference §4.2).
//!
//! [`AddrResolver`] is called once per matching template with the shaped info (whose
//! `addr_format` decides the family, and whose `src_addr` already holds a hint's source
//! address when one applies). [`IpResolver`] serves IP providers, [`NoResolver`] the
//! rest.
//!
//! [`IpResolver`] rules:
//! - `FI_SOURCE`: node/service name the local address → `src_addr`. No node means the
//!   wildcard address (`0.0.0.0` / `::`).
//! - otherwise node/service name the peer → `dest_addr` (no node means loopback), and
//!   `src_addr` is the info's own (from the hints) or, failing that, the local address
//!   the routing table picks for the peer (a UDP socket is connected — nothing is sent —
//!   and its local address read; port 0). A route lookup failure leaves `src_addr` unset.
//! - the info's format decides the family: `_IN` IPv4 only, `_IN6` IPv6 only,
//!   `FI_SOCKADDR` (and `FI_FORMAT_UNSPEC`, treated as a generic socket address) either;
//!   `FI_ADDR_STR` gives [`Address::Str`] (the node itself when it is an `FI_ADDR_STR`
//!   string, else the resolved address as text). Any other format → `FI_ENODATA`.
//! - node as an `FI_ADDR_STR` string (`fmt://…`, service must be absent) is parsed, not
//!   looked up; a malformed one is `FI_EINVAL`.
//! - `FI_NUMERICHOST`: the node must be a numeric IP address (no DNS); otherwise
//!   `FI_ENODATA`.
//! - service: a decimal port (0–65535) or a name from `/etc/services`; anything else is
//!   `FI_ENODATA`.
//! - a host that does not resolve, or resolves to no address of the wanted family, is
//!   `FI_ENODATA` (the template is skipped, the others still tried).
//!
//! Nothing here panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};

use super::GetinfoRequest;
use crate::addr::Address;
use crate::attr::Info;
use crate::enums::{AddrFormat, EpType};
use crate::error::{Errno, Error, Result};
use crate::flags::GetinfoFlags;

/// Addresses found for one template. `None` leaves the info's address as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedAddrs {
    /// The local address (with `FI_SOURCE`, or the route's source).
    pub src_addr: Option<Address>,
    /// The peer's address (without `FI_SOURCE`).
    pub dest_addr: Option<Address>,
}

/// Resolves getinfo's `node` / `service` for a provider's templates.
pub trait AddrResolver: Sync {
    /// Resolve the `node` / `service` of getinfo call `req` for a template of this
    /// address format (`template` is the shaped info: its `addr_format` is final and its
    /// `src_addr` holds the hints' source address, if any). `FI_SOURCE` in `req.flags`
    /// means node/service name the local address.
    ///
    /// # Errors
    /// `FI_ENODATA` when this template cannot have such an address (it is skipped);
    /// any other code fails the whole provider.
    fn resolve(&self, template: &Info, req: &GetinfoRequest) -> Result<ResolvedAddrs>;
}

/// The default resolver for IP providers (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct IpResolver;

/// Resolver for providers whose addresses are not IP: an `FI_ADDR_STR` node
/// (`fmt://…`) is kept as [`Address::Str`] (source or destination by `FI_SOURCE`);
/// anything else gives no addresses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoResolver;

impl AddrResolver for NoResolver {
    fn resolve(&self, _template: &Info, req: &GetinfoRequest) -> Result<ResolvedAddrs> {
        let mut out = ResolvedAddrs::default();
        if let Some(n) = req.node.as_deref().filter(|n| n.contains("://")) {
            let a = Address::Str(n.to_string());
            if req.flags.contains(GetinfoFlags::SOURCE) {
                out.src_addr = Some(a);
            } else {
                out.dest_addr = Some(a);
            }
        }
        Ok(out)
    }
}

/// Which IP families a format allows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    V4,
    V6,
    Any,
}

impl Family {
    fn allows(self, ip: &IpAddr) -> bool {
        match self {
            Family::V4 => ip.is_ipv4(),
            Family::V6 => ip.is_ipv6(),
            Family::Any => true,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
            Family::Any => "IP",
        }
    }
}

fn nodata<T>(msg: String) -> Result<T> {
    Err(Error::new(Errno::ENODATA, msg))
}

impl AddrResolver for IpResolver {
    fn resolve(&self, template: &Info, req: &GetinfoRequest) -> Result<ResolvedAddrs> {
        let (node, service, flags) = (req.node.as_deref(), req.service.as_deref(), req.flags);
        let fmt = template.addr_format;
        let (family, as_str) = match fmt {
            AddrFormat::SOCKADDR_IN => (Family::V4, false),
            AddrFormat::SOCKADDR_IN6 => (Family::V6, false),
            AddrFormat::SOCKADDR | AddrFormat::UNSPEC => (Family::Any, false),
            AddrFormat::STR => (Family::Any, true),
            other => {
                return nodata(format!(
                    "address format {} is not an IP format",
                    other.name()
                ))
            }
        };
        let source = flags.contains(GetinfoFlags::SOURCE);

        // An FI_ADDR_STR node: parsed, never looked up.
        if let Some(n) = node.filter(|n| n.contains("://")) {
            let addr = if as_str {
                Address::Str(n.to_string())
            } else {
                let a = Address::parse_addr_str(n)?;
                match a.socket_addr() {
                    Some(sa) if family.allows(&sa.ip()) => a,
                    _ => {
                        return nodata(format!(
                            "node {n:?} is not an {} address as {} needs",
                            family.name(),
                            fmt.name()
                        ))
                    }
                }
            };
            return Ok(place(template, addr, source, as_str));
        }

        let port = match service {
            None => 0,
            Some(s) => parse_service(s, template.ep_attr.ep_type)?,
        };
        let ip = match node {
            None => default_ip(family, source),
            Some(n) => resolve_host(n, port, family, flags.contains(GetinfoFlags::NUMERICHOST))?,
        };
        let sa = SocketAddr::new(ip, port);
        let addr = if as_str {
            Address::Str(Address::from(sa).to_addr_str())
        } else {
            Address::from(sa)
        };
        Ok(place(template, addr, source, as_str))
    }
}

/// Puts `addr` where the flags say, and finds a source address for a destination.
fn place(template: &Info, addr: Address, source: bool, as_str: bool) -> ResolvedAddrs {
    if source {
        return ResolvedAddrs {
            src_addr: Some(addr),
            dest_addr: None,
        };
    }
    let src = match &template.src_addr {
        Some(s) => Some(s.clone()),
        None => route_source(&addr).map(|sa| {
            if as_str {
                Address::Str(Address::from(sa).to_addr_str())
            } else {
                Address::from(sa)
            }
        }),
    };
    ResolvedAddrs {
        src_addr: src,
        dest_addr: Some(addr),
    }
}

/// The address used when no node is given: the wildcard for a source, loopback for a
/// destination; IPv4 unless only IPv6 is allowed.
fn default_ip(family: Family, source: bool) -> IpAddr {
    match (family, source) {
        (Family::V6, true) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        (Family::V6, false) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        (_, true) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (_, false) => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// A numeric IP address, with or without IPv6 brackets.
fn parse_numeric(node: &str) -> Option<IpAddr> {
    let n = node.trim();
    let n = n
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(n);
    n.parse().ok()
}

/// Resolves a host name or numeric address to one address of `family`.
fn resolve_host(node: &str, port: u16, family: Family, numeric_only: bool) -> Result<IpAddr> {
    if let Some(ip) = parse_numeric(node) {
        if family.allows(&ip) {
            return Ok(ip);
        }
        return nodata(format!("node {node:?} is not an {} address", family.name()));
    }
    if numeric_only {
        return nodata(format!(
            "node {node:?} is not a numeric address (FI_NUMERICHOST)"
        ));
    }
    if node.is_empty() {
        return nodata("empty node name".to_string());
    }
    let addrs = match (node, port).to_socket_addrs() {
        Ok(a) => a,
        Err(e) => return nodata(format!("cannot resolve node {node:?}: {e}")),
    };
    let ips: Vec<IpAddr> = addrs
        .map(|a| a.ip())
        .filter(|ip| family.allows(ip))
        .collect();
    // For a generic format prefer IPv4, as the C library orders interfaces (IPv4 first).
    match ips.iter().find(|ip| ip.is_ipv4()).or(ips.first()) {
        Some(ip) => Ok(*ip),
        None => nodata(format!("node {node:?} has no {} address", family.name())),
    }
}

/// A service: a decimal port, or a name (or alias) listed in `/etc/services` for the
/// transport the endpoint type uses (UDP for datagram endpoints, TCP otherwise; either
/// if the name is only listed for the other).
fn parse_service(service: &str, ep_type: EpType) -> Result<u16> {
    let s = service.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<u16>() {
            Ok(p) => Ok(p),
            Err(_) => nodata(format!(
                "service {service:?} is not a port number (0-65535)"
            )),
        };
    }
    let proto = if matches!(ep_type, EpType::Dgram | EpType::SockDgram) {
        "udp"
    } else {
        "tcp"
    };
    let table = std::fs::read_to_string("/etc/services").unwrap_or_default();
    match lookup_service(&table, s, proto) {
        Some(p) => Ok(p),
        None => nodata(format!("unknown service {service:?}")),
    }
}

/// Finds `name` in the text of a services file: lines `name port/proto [aliases…]`,
/// `#` starting a comment. An entry for `proto` wins over one for another protocol.
pub(crate) fn lookup_service(table: &str, name: &str, proto: &str) -> Option<u16> {
    if name.is_empty() {
        return None;
    }
    let mut other = None;
    for line in table.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let (Some(first), Some(port_proto)) = (words.next(), words.next()) else {
            continue;
        };
        if !(first == name || words.any(|w| w == name)) {
            continue;
        }
        let Some((port, p)) = port_proto.split_once('/') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        if p.eq_ignore_ascii_case(proto) {
            return Some(port);
        }
        other.get_or_insert(port);
    }
    other
}

/// The local address the routing table would use to reach `dest`, port 0. Connecting a
/// UDP socket sends nothing; it only selects a route.
fn route_source(dest: &Address) -> Option<SocketAddr> {
    let target = match dest {
        Address::Str(s) => Address::parse_addr_str(s).ok()?.socket_addr()?,
        other => other.socket_addr()?,
    };
    let ip = target.ip();
    if ip.is_unspecified() {
        return None;
    }
    // Port 0 cannot be connected to; the port does not influence the route.
    let target = SocketAddr::new(ip, if target.port() == 0 { 9 } else { target.port() });
    let bind: SocketAddr = match ip {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(bind).ok()?;
    sock.connect(target).ok()?;
    let mut local = sock.local_addr().ok()?;
    local.set_port(0);
    Some(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddrV4, SocketAddrV6};

    fn tmpl(fmt: AddrFormat) -> Info {
        Info::new().with_addr_format(fmt).with_ep_type(EpType::Msg)
    }

    fn src(flags: GetinfoFlags) -> GetinfoFlags {
        flags | GetinfoFlags::SOURCE
    }

    /// A getinfo request naming `node` and `service` with `flags`.
    fn req(node: Option<&str>, service: Option<&str>, flags: GetinfoFlags) -> GetinfoRequest {
        GetinfoRequest {
            node: node.map(str::to_string),
            service: service.map(str::to_string),
            flags,
            ..GetinfoRequest::default()
        }
    }

    /// `IpResolver` on a template of format `fmt`; `""` is an absent node or service,
    /// `source` adds `FI_SOURCE` to `flags`.
    fn ip(
        fmt: AddrFormat,
        node: &str,
        service: &str,
        source: bool,
        flags: GetinfoFlags,
    ) -> Result<ResolvedAddrs> {
        let flags = if source { src(flags) } else { flags };
        let node = Some(node).filter(|s| !s.is_empty());
        let service = Some(service).filter(|s| !s.is_empty());
        IpResolver.resolve(&tmpl(fmt), &req(node, service, flags))
    }

    #[test]
    fn resolutions() {
        use AddrFormat as F;
        // (template format, node, service, FI_SOURCE, source address, destination
        // address): addresses as `{:?}`, `-` for absent, `*` for not checked.
        #[rustfmt::skip]
        let cases = [
            (F::SOCKADDR_IN, "127.0.0.1", "7471", true, "Inet(127.0.0.1:7471)", "-"),
            (F::SOCKADDR, "", "5000", true, "Inet(0.0.0.0:5000)", "-"),
            (F::SOCKADDR_IN6, "", "5000", true, "Inet6([::]:5000)", "-"),
            (F::SOCKADDR_IN, "127.0.0.1", "80", false, "Inet(127.0.0.1:0)", "Inet(127.0.0.1:80)"),
            (F::SOCKADDR_IN, "localhost", "7471", false, "*", "Inet(127.0.0.1:7471)"),
            (F::SOCKADDR_IN, "127.0.0.1", "", false, "*", "Inet(127.0.0.1:0)"),
            (F::SOCKADDR, "fi_sockaddr_in://127.0.0.1:7471", "", true, "Inet(127.0.0.1:7471)", "-"),
            // A string-format template keeps the string, and renders a resolved address
            // as text.
            (F::STR, "fi_sockaddr_in://127.0.0.1:1", "", false, "*",
                r#"Str("fi_sockaddr_in://127.0.0.1:1")"#),
            (F::STR, "127.0.0.1", "9", true, r#"Str("fi_sockaddr_in://127.0.0.1:9")"#, "-"),
        ];
        let show = |a: &Option<Address>| a.as_ref().map_or("-".to_string(), |a| format!("{a:?}"));
        for (fmt, node, service, source, want_src, want_dest) in cases {
            let case = format!("{fmt} {node:?} {service:?} source={source}");
            let r = ip(fmt, node, service, source, GetinfoFlags::empty())
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            for (got, want) in [
                (show(&r.src_addr), want_src),
                (show(&r.dest_addr), want_dest),
            ] {
                assert!(want == "*" || got == want, "{case}: {got} != {want}");
            }
        }
        // A numeric node resolves under FI_NUMERICHOST; an address prints in its
        // FI_ADDR_STR form.
        let r = ip(
            F::SOCKADDR_IN,
            "127.0.0.1",
            "7471",
            false,
            GetinfoFlags::NUMERICHOST,
        );
        assert_eq!(
            r.unwrap().dest_addr.unwrap().to_string(),
            "fi_sockaddr_in://127.0.0.1:7471"
        );
    }

    #[test]
    fn refusals() {
        use AddrFormat as F;
        use GetinfoFlags as G;
        // (template format, node, service, flags, error): the family of the node does not
        // fit the template's, a name under FI_NUMERICHOST, a malformed or non-IP address.
        let cases = [
            (F::SOCKADDR_IN6, "127.0.0.1", "", G::empty(), Errno::ENODATA),
            (F::SOCKADDR_IN, "::1", "", G::empty(), Errno::ENODATA),
            (
                F::SOCKADDR_IN,
                "localhost",
                "7471",
                G::NUMERICHOST,
                Errno::ENODATA,
            ),
            (
                F::SOCKADDR_IN6,
                "fi_sockaddr_in://127.0.0.1:7471",
                "",
                G::empty(),
                Errno::ENODATA,
            ),
            (
                F::SOCKADDR_IN,
                "fi_sockaddr_in://bad:x",
                "",
                G::empty(),
                Errno::EINVAL,
            ),
            (F::PSMX2, "127.0.0.1", "", G::empty(), Errno::ENODATA),
        ];
        for (fmt, node, service, flags, code) in cases {
            let e = ip(fmt, node, service, false, flags).unwrap_err();
            assert_eq!(e.code(), code, "{fmt} {node:?} {service:?} {flags:?}: {e}");
        }
        let e = ip(F::SOCKADDR_IN, "localhost", "7471", false, G::NUMERICHOST).unwrap_err();
        assert!(e.message().contains("FI_NUMERICHOST"), "{e}");
    }

    #[test]
    fn dest_v6_with_route_source() {
        let r = IpResolver
            .resolve(
                &tmpl(AddrFormat::SOCKADDR_IN6),
                &req(Some("::1"), Some("7471"), GetinfoFlags::empty()),
            )
            .unwrap();
        assert_eq!(
            r.dest_addr,
            Some(Address::Inet6(SocketAddrV6::new(
                Ipv6Addr::LOCALHOST,
                7471,
                0,
                0
            )))
        );
        // The route to ::1 leaves from ::1 where IPv6 is up; if the host has no IPv6 at
        // all the source is simply not found.
        if let Some(s) = r.src_addr {
            assert_eq!(s.to_string(), "fi_sockaddr_in6://[::1]:0");
        }
    }

    #[test]
    fn dest_keeps_hint_source() {
        let mut t = tmpl(AddrFormat::SOCKADDR_IN);
        let hint_src = Address::Inet(SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 0));
        t.src_addr = Some(hint_src.clone());
        let r = IpResolver
            .resolve(&t, &req(Some("127.0.0.1"), None, GetinfoFlags::empty()))
            .unwrap();
        assert_eq!(r.src_addr, Some(hint_src));
        assert_eq!(
            r.dest_addr.unwrap().to_string(),
            "fi_sockaddr_in://127.0.0.1:0"
        );
    }

    #[test]
    fn services() {
        assert_eq!(parse_service("0", EpType::Msg).unwrap(), 0);
        assert_eq!(parse_service("65535", EpType::Msg).unwrap(), 65535);
        assert_eq!(
            parse_service("65536", EpType::Msg).unwrap_err().code(),
            Errno::ENODATA
        );
        assert_eq!(
            parse_service("no-such-service-xyz", EpType::Msg)
                .unwrap_err()
                .code(),
            Errno::ENODATA
        );
        assert_eq!(
            parse_service("", EpType::Msg).unwrap_err().code(),
            Errno::ENODATA
        );
        let table =
            "# comment\nhttp 80/tcp www # web\nsyslog 514/udp\nfoo 1000/udp\nfoo 1001/tcp\n";
        assert_eq!(lookup_service(table, "http", "tcp"), Some(80));
        assert_eq!(lookup_service(table, "www", "tcp"), Some(80));
        assert_eq!(lookup_service(table, "syslog", "tcp"), Some(514));
        assert_eq!(lookup_service(table, "foo", "tcp"), Some(1001));
        assert_eq!(lookup_service(table, "foo", "udp"), Some(1000));
        assert_eq!(lookup_service(table, "comment", "tcp"), None);
        assert_eq!(lookup_service(table, "udp", "tcp"), None);
    }

    #[test]
    fn no_resolver() {
        let t = tmpl(AddrFormat::STR);
        let r = NoResolver
            .resolve(&t, &req(Some("fi_shm://42"), None, GetinfoFlags::empty()))
            .unwrap();
        assert_eq!(r.dest_addr, Some(Address::Str("fi_shm://42".into())));
        assert_eq!(r.src_addr, None);
        let r = NoResolver
            .resolve(&t, &req(Some("fi_shm://42"), None, GetinfoFlags::SOURCE))
            .unwrap();
        assert_eq!(r.src_addr, Some(Address::Str("fi_shm://42".into())));
        let r = NoResolver
            .resolve(&t, &req(Some("host"), Some("1"), GetinfoFlags::empty()))
            .unwrap();
        assert_eq!(r, ResolvedAddrs::default());
    }
}
