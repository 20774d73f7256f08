//! Node and service resolution for `fi_av_insertsvc` / `fi_av_insertsym`: the
//! default resolver and the expansion of symmetric ranges. Runs before any lock is taken.

use super::insert::format_fits;
use super::*;

/// The default resolver of node and service for an AV of `format`.
///
/// - A `node` containing `://` is an `FI_ADDR_STR` address (fi_av(3)); `service` must
///   then be empty. For `FI_ADDR_STR` AVs it is taken as is, otherwise parsed with
///   [`Address::parse_addr_str`].
/// - `FI_ADDR_STR`: `node` as is; `service` must be empty.
/// - `FI_SOCKADDR`, `_IN`, `_IN6`, `FI_FORMAT_UNSPEC`: `service` is a decimal port
///   (empty: 0); `node` an IP literal (IPv6 optionally in brackets) or a host name
///   resolved by the system; the first address of the family the format wants is taken.
///
/// # Errors
/// `FI_EINVAL`: empty node, a service where none is allowed, a non-numeric or too
/// large port, an unresolvable host, no address of the wanted family, or an address of
/// the wrong format. `FI_ENOSYS`: another format (the provider supplies a resolver).
pub fn resolve_node_service(format: AddrFormat, node: &str, service: &str) -> Result<Address> {
    if node.is_empty() {
        return einval("resolve: a node is required");
    }
    if node.contains("://") {
        if !service.is_empty() {
            return einval(format!(
                "resolve: node {node:?} is an FI_ADDR_STR address, so the service must be empty"
            ));
        }
        let a = if format == AddrFormat::STR {
            Address::Str(node.to_owned())
        } else {
            Address::parse_addr_str(node)?
        };
        if !format_fits(format, &a) {
            return einval(format!(
                "resolve: {node:?} is {}, this AV takes {format}",
                a.format()
            ));
        }
        return Ok(a);
    }
    match format {
        AddrFormat::STR => {
            if !service.is_empty() {
                return einval(format!(
                    "resolve: FI_ADDR_STR node {node:?} takes no service (got {service:?})"
                ));
            }
            Ok(Address::Str(node.to_owned()))
        }
        AddrFormat::SOCKADDR
        | AddrFormat::SOCKADDR_IN
        | AddrFormat::SOCKADDR_IN6
        | AddrFormat::UNSPEC => resolve_ip(format, node, service),
        f => Err(Error::new(
            Errno::ENOSYS,
            format!("resolve: no node/service resolver for {f}"),
        )),
    }
}

pub(super) fn resolve_ip(format: AddrFormat, node: &str, service: &str) -> Result<Address> {
    let port = if service.is_empty() {
        0
    } else if service.bytes().all(|b| b.is_ascii_digit()) {
        service.parse::<u16>().map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("resolve: port {service:?} out of range"),
            )
        })?
    } else {
        return einval(format!("resolve: service {service:?} is not a port number"));
    };
    let want_v4 = format != AddrFormat::SOCKADDR_IN6;
    let want_v6 = format != AddrFormat::SOCKADDR_IN;
    let literal = node
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(node);
    let candidates: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => (node, port)
            .to_socket_addrs()
            .map_err(|e| {
                Error::new(
                    Errno::EINVAL,
                    format!("resolve: cannot resolve {node:?}: {e}"),
                )
            })?
            .collect(),
    };
    candidates
        .into_iter()
        .find(|a| (a.is_ipv4() && want_v4) || (a.is_ipv6() && want_v6))
        .map(|a| match a {
            SocketAddr::V4(a) => Address::Inet(SocketAddrV4::new(*a.ip(), a.port())),
            SocketAddr::V6(a) => Address::Inet6(SocketAddrV6::new(
                *a.ip(),
                a.port(),
                a.flowinfo(),
                a.scope_id(),
            )),
        })
        .ok_or_else(|| {
            Error::new(
                Errno::EINVAL,
                format!("resolve: {node:?} has no address for {format}"),
            )
        })
}

/// `count` strings starting at `s`: IP literals count as addresses, other strings
/// must end in a decimal number that is incremented (keeping its zero padding).
pub(super) fn range_of(what: &str, s: &str, count: usize, ip: bool) -> Result<Vec<String>> {
    if count == 1 {
        return Ok(vec![s.to_owned()]);
    }
    let last = (count - 1) as u128;
    if ip {
        if let Ok(v4) = s.parse::<Ipv4Addr>() {
            let base = u32::from(v4);
            if u128::from(base) + last > u128::from(u32::MAX) {
                return einval(format!("insertsym: {count} nodes from {s} overflow IPv4"));
            }
            return Ok((0..count as u32)
                .map(|k| Ipv4Addr::from(base + k).to_string())
                .collect());
        }
        if let Ok(v6) = s.parse::<Ipv6Addr>() {
            let base = u128::from(v6);
            if base.checked_add(last).is_none() {
                return einval(format!("insertsym: {count} nodes from {s} overflow IPv6"));
            }
            return Ok((0..count as u128)
                .map(|k| Ipv6Addr::from(base + k).to_string())
                .collect());
        }
    }
    let digits = s.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return einval(format!(
            "insertsym: {what} {s:?} has no numeric suffix to range over ({count} wanted)"
        ));
    }
    let (prefix, num) = s.split_at(s.len() - digits);
    let base: u64 = num.parse().map_err(|_| {
        Error::new(
            Errno::EINVAL,
            format!("insertsym: {what} {s:?}: number too large"),
        )
    })?;
    if u128::from(base) + last > u128::from(u64::MAX) {
        return einval(format!("insertsym: {count} {what}s from {s:?} overflow"));
    }
    Ok((0..count as u64)
        .map(|k| format!("{prefix}{:0digits$}", base + k))
        .collect())
}

/// The node/service pairs of `fi_av_insertsym`, in insertion order: for each of
/// `nodecnt` nodes from `node`, `svccnt` services from `service` (fi_av(3)).
///
/// With a count above 1: an IPv4/IPv6 literal node counts as an address (10.0.0.255,
/// 10.0.1.0, ...); another node (a host name, an `FI_ADDR_STR` string) must end in a
/// decimal number, which is incremented keeping its width ("host09", "host10"); the
/// service likewise must end in a number. A count of 1 takes the string as is; a
/// count of 0 gives nothing.
///
/// # Errors
/// `FI_EINVAL`: `nodecnt × svccnt` overflows, a ranged string without a numeric
/// suffix, or a range that overflows its address/number space.
pub fn sym_range(
    node: &str,
    nodecnt: usize,
    service: &str,
    svccnt: usize,
) -> Result<Vec<(String, String)>> {
    let total = nodecnt
        .checked_mul(svccnt)
        .ok_or_else(|| Error::new(Errno::EINVAL, "insertsym: nodecnt × svccnt overflows"))?;
    if total == 0 {
        return Ok(Vec::new());
    }
    let nodes = range_of("node", node, nodecnt, true)?;
    let services = range_of("service", service, svccnt, false)?;
    let mut out = Vec::with_capacity(total);
    for n in &nodes {
        for s in &services {
            out.push((n.clone(), s.clone()));
        }
    }
    Ok(out)
}
