//! Endpoint addresses: the C binary forms and the `FI_ADDR_STR` text form.
//!
//! An [`Address`] is what `fi_info.src_addr` / `dest_addr`, `fi_getname` and
//! `fi_av_insert` carry. Its binary form ([`Address::to_bytes`]) is exactly what the C
//! API passes with an `addrlen`:
//! - IPv4: a 16-byte `struct sockaddr_in` (family `AF_INET` in native byte order, port
//!   in network order, address, 8 zero bytes);
//! - IPv6: a 28-byte `struct sockaddr_in6` (family `AF_INET6` native, port network
//!   order, flow info, address, scope id; flow info and scope id are stored as the
//!   values [`SocketAddrV6::flowinfo`] / [`SocketAddrV6::scope_id`] return, in native
//!   order, exactly as the Rust standard library fills a `sockaddr_in6`);
//! - `FI_ADDR_STR`: the string's bytes followed by one NUL;
//! - anything else: opaque bytes tagged with their [`AddrFormat`].
//!
//! The text form follows the URI model of fi_getinfo(3):
//! `address_format[://[node][:[service][/[field3]...][?[key=value][&k2=v2]...]]]`;
//! [`AddrStr`] parses and prints that structure, and [`Address::to_addr_str`] /
//! [`Address::parse_addr_str`] map addresses to and from it:
//! - `fi_sockaddr_in://127.0.0.1:7471`
//! - `fi_sockaddr_in6://[::1]:7471` (a scope id as `[fe80::1%2]`; a non-zero flow info
//!   as the parameter `?flowinfo=N`)
//! - other binary formats as `<lowercase C name>://0x<hex bytes>`, for example
//!   `fi_addr_psmx2://0x0102...`, and `fi_format_<n>://0x...` for a number without a name.
//!
//! Invariants: [`Address::from_bytes`] never returns `Raw` for the sockaddr formats or
//! `FI_ADDR_STR` (it decodes them), so equal addresses have equal variants when they come
//! from the C forms. Nothing here panics; malformed input is [`Errno::EINVAL`] with a
//! message saying what was wrong.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::enums::AddrFormat;
use crate::error::{Errno, Error};

type Res<T> = std::result::Result<T, Error>;

/// `AF_INET` as stored in `sa_family`.
const FAMILY_INET: u16 = libc::AF_INET as u16;
/// `AF_INET6` as stored in `sa_family`.
const FAMILY_INET6: u16 = libc::AF_INET6 as u16;
/// `sizeof(struct sockaddr_in)`.
pub const SOCKADDR_IN_LEN: usize = 16;
/// `sizeof(struct sockaddr_in6)`.
pub const SOCKADDR_IN6_LEN: usize = 28;

fn einval<T>(msg: impl Into<String>) -> Res<T> {
    Err(Error::new(Errno::EINVAL, msg.into()))
}

/// An endpoint address in one of the formats of [`AddrFormat`].
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Address {
    /// IPv4 (`FI_SOCKADDR_IN`).
    Inet(SocketAddrV4),
    /// IPv6 (`FI_SOCKADDR_IN6`).
    Inet6(SocketAddrV6),
    /// A formatted string (`FI_ADDR_STR`), e.g. `fi_shm://1234`.
    Str(String),
    /// Opaque bytes of another format.
    Raw {
        /// The format the bytes are in.
        format: AddrFormat,
        /// The address as the C API carries it.
        bytes: Vec<u8>,
    },
}

impl AddrFormat {
    /// True for the formats whose C binary form [`Address::from_bytes`] decodes into a
    /// structured address (`FI_SOCKADDR`, `FI_SOCKADDR_IN`, `FI_SOCKADDR_IN6`,
    /// `FI_ADDR_STR`); every other format stays [`Address::Raw`].
    pub const fn has_structured_form(self) -> bool {
        matches!(
            self,
            AddrFormat::SOCKADDR
                | AddrFormat::SOCKADDR_IN
                | AddrFormat::SOCKADDR_IN6
                | AddrFormat::STR
        )
    }

    /// True for the socket address formats, the ones `FI_SOCKADDR` stands for:
    /// `FI_SOCKADDR` itself, `FI_SOCKADDR_IN`, `FI_SOCKADDR_IN6` and `FI_SOCKADDR_IB`.
    pub const fn is_socket(self) -> bool {
        matches!(
            self,
            AddrFormat::SOCKADDR
                | AddrFormat::SOCKADDR_IN
                | AddrFormat::SOCKADDR_IN6
                | AddrFormat::SOCKADDR_IB
        )
    }
}

impl Address {
    /// The address format: `SOCKADDR_IN`, `SOCKADDR_IN6`, `STR`, or the `Raw` format.
    pub fn format(&self) -> AddrFormat {
        match self {
            Address::Inet(_) => AddrFormat::SOCKADDR_IN,
            Address::Inet6(_) => AddrFormat::SOCKADDR_IN6,
            Address::Str(_) => AddrFormat::STR,
            Address::Raw { format, .. } => *format,
        }
    }

    /// Length of the C binary form (the `addrlen` that goes with it).
    pub fn addrlen(&self) -> usize {
        match self {
            Address::Inet(_) => SOCKADDR_IN_LEN,
            Address::Inet6(_) => SOCKADDR_IN6_LEN,
            Address::Str(s) => s.len() + 1,
            Address::Raw { bytes, .. } => bytes.len(),
        }
    }

    /// The C binary form (see the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Address::Inet(a) => {
                let mut b = Vec::with_capacity(SOCKADDR_IN_LEN);
                b.extend_from_slice(&FAMILY_INET.to_ne_bytes());
                b.extend_from_slice(&a.port().to_be_bytes());
                b.extend_from_slice(&a.ip().octets());
                b.resize(SOCKADDR_IN_LEN, 0);
                b
            }
            Address::Inet6(a) => {
                let mut b = Vec::with_capacity(SOCKADDR_IN6_LEN);
                b.extend_from_slice(&FAMILY_INET6.to_ne_bytes());
                b.extend_from_slice(&a.port().to_be_bytes());
                b.extend_from_slice(&a.flowinfo().to_ne_bytes());
                b.extend_from_slice(&a.ip().octets());
                b.extend_from_slice(&a.scope_id().to_ne_bytes());
                b
            }
            Address::Str(s) => {
                let mut b = Vec::with_capacity(s.len() + 1);
                b.extend_from_slice(s.as_bytes());
                b.push(0);
                b
            }
            Address::Raw { bytes, .. } => bytes.clone(),
        }
    }

    /// Decodes the C binary form of `format`.
    ///
    /// `FI_SOCKADDR` picks IPv4 or IPv6 by the family field; `FI_SOCKADDR_IN`/`_IN6`
    /// require that family; bytes past the structure's size are ignored (a C caller may
    /// pass a larger `addrlen`). `FI_ADDR_STR` takes the bytes up to the first NUL, which
    /// must exist, as UTF-8. Other formats become [`Address::Raw`].
    ///
    /// # Errors
    /// [`Errno::EINVAL`]: empty input, too short for the format, wrong family, missing
    /// NUL, or a string that is not UTF-8.
    pub fn from_bytes(format: AddrFormat, bytes: &[u8]) -> Res<Address> {
        if bytes.is_empty() {
            return einval(format!("empty {format} address"));
        }
        match format {
            AddrFormat::SOCKADDR => {
                if bytes.len() < 2 {
                    return einval(format!(
                        "FI_SOCKADDR address too short: {} bytes, no family field",
                        bytes.len()
                    ));
                }
                match u16::from_ne_bytes([bytes[0], bytes[1]]) {
                    FAMILY_INET => decode_in(bytes),
                    FAMILY_INET6 => decode_in6(bytes),
                    fam => einval(format!(
                        "FI_SOCKADDR address has unsupported family {fam} \
                         (expected AF_INET or AF_INET6)"
                    )),
                }
            }
            AddrFormat::SOCKADDR_IN => decode_in(bytes),
            AddrFormat::SOCKADDR_IN6 => decode_in6(bytes),
            AddrFormat::STR => {
                let Some(nul) = bytes.iter().position(|&b| b == 0) else {
                    return einval("FI_ADDR_STR address is not NUL-terminated");
                };
                match std::str::from_utf8(&bytes[..nul]) {
                    Ok(s) => Ok(Address::Str(s.to_owned())),
                    Err(e) => einval(format!("FI_ADDR_STR address is not valid UTF-8: {e}")),
                }
            }
            _ => Ok(Address::Raw {
                format,
                bytes: bytes.to_vec(),
            }),
        }
    }

    /// The IP socket address, for `Inet`/`Inet6`.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match self {
            Address::Inet(a) => Some(SocketAddr::V4(*a)),
            Address::Inet6(a) => Some(SocketAddr::V6(*a)),
            _ => None,
        }
    }

    /// The `FI_ADDR_STR` text of this address (see the module docs for the forms).
    /// `Str` is returned as is; a `Raw` address of a sockaddr format or `FI_ADDR_STR`
    /// that decodes is printed as the decoded address.
    pub fn to_addr_str(&self) -> String {
        match self {
            Address::Inet(a) => format!("fi_sockaddr_in://{}:{}", a.ip(), a.port()),
            Address::Inet6(a) => {
                let mut s = format!("fi_sockaddr_in6://[{}", a.ip());
                if a.scope_id() != 0 {
                    s.push_str(&format!("%{}", a.scope_id()));
                }
                s.push_str(&format!("]:{}", a.port()));
                if a.flowinfo() != 0 {
                    s.push_str(&format!("?flowinfo={}", a.flowinfo()));
                }
                s
            }
            Address::Str(s) => s.clone(),
            Address::Raw { format, bytes } => {
                if format.has_structured_form() {
                    if let Ok(a) = Address::from_bytes(*format, bytes) {
                        return a.to_addr_str();
                    }
                }
                let mut s = raw_scheme(*format);
                s.push_str("://0x");
                for b in bytes {
                    s.push_str(&format!("{b:02x}"));
                }
                s
            }
        }
    }

    /// Parses an `FI_ADDR_STR` string.
    ///
    /// - `fi_sockaddr_in://A.B.C.D[:port]` → `Inet`; `fi_sockaddr_in6://[addr[%scope]][:port]`
    ///   → `Inet6`; `fi_sockaddr://` takes either by the node's form. A missing node is the
    ///   wildcard address for `_in`/`_in6`; a missing port is 0. Of the query parameters
    ///   only `flowinfo` (IPv6) is used; others are ignored here (read them with
    ///   [`AddrStr::parse`]).
    /// - `<scheme>://0x<hex>` where the scheme is a binary format's lowercase C name (or
    ///   `fi_format_<n>`) → `Raw`, the inverse of [`Address::to_addr_str`].
    /// - anything else containing `://` → `Str(s)` verbatim.
    ///
    /// Scheme names are matched case-insensitively.
    ///
    /// # Errors
    /// [`Errno::EINVAL`]: no `://`, an empty scheme, or a sockaddr scheme whose node,
    /// port, fields or `flowinfo` are malformed.
    pub fn parse_addr_str(s: &str) -> Res<Address> {
        let Some((scheme, body)) = s.split_once("://") else {
            return einval(format!("address string {s:?} has no \"://\""));
        };
        if scheme.is_empty() {
            return einval(format!("address string {s:?} has an empty format name"));
        }
        let lower = scheme.to_ascii_lowercase();
        match lower.as_str() {
            "fi_sockaddr_in" | "fi_sockaddr_in6" | "fi_sockaddr" => {
                let a = AddrStr::parse(s)?;
                parse_sockaddr_str(&lower, &a, s)
            }
            _ => {
                if let Some(format) = raw_format_for_scheme(&lower) {
                    if let Some(bytes) = parse_hex_body(body) {
                        return Ok(Address::Raw { format, bytes });
                    }
                }
                Ok(Address::Str(s.to_owned()))
            }
        }
    }
}

impl fmt::Display for Address {
    /// Same as [`Address::to_addr_str`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_addr_str())
    }
}

impl From<SocketAddr> for Address {
    fn from(a: SocketAddr) -> Address {
        match a {
            SocketAddr::V4(a) => Address::Inet(a),
            SocketAddr::V6(a) => Address::Inet6(a),
        }
    }
}

impl From<SocketAddrV4> for Address {
    fn from(a: SocketAddrV4) -> Address {
        Address::Inet(a)
    }
}

impl From<SocketAddrV6> for Address {
    fn from(a: SocketAddrV6) -> Address {
        Address::Inet6(a)
    }
}

/// The head a `sockaddr_in` and a `sockaddr_in6` (`kind`) share: at least `len` bytes,
/// the family field `family` (`family_name`), then the port in network order, which is
/// returned.
fn sockaddr_port(b: &[u8], kind: &str, len: usize, family: u16, family_name: &str) -> Res<u16> {
    if b.len() < len {
        return einval(format!("{kind} too short: {} bytes, need {len}", b.len()));
    }
    let fam = u16::from_ne_bytes([b[0], b[1]]);
    if fam != family {
        return einval(format!(
            "{kind} has family {fam}, expected {family_name} ({family})"
        ));
    }
    Ok(u16::from_be_bytes([b[2], b[3]]))
}

fn decode_in(b: &[u8]) -> Res<Address> {
    let port = sockaddr_port(b, "sockaddr_in", SOCKADDR_IN_LEN, FAMILY_INET, "AF_INET")?;
    let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
    Ok(Address::Inet(SocketAddrV4::new(ip, port)))
}

fn decode_in6(b: &[u8]) -> Res<Address> {
    let port = sockaddr_port(
        b,
        "sockaddr_in6",
        SOCKADDR_IN6_LEN,
        FAMILY_INET6,
        "AF_INET6",
    )?;
    let flow = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&b[8..24]);
    let scope = u32::from_ne_bytes([b[24], b[25], b[26], b[27]]);
    Ok(Address::Inet6(SocketAddrV6::new(
        Ipv6Addr::from(octets),
        port,
        flow,
        scope,
    )))
}

/// The scheme printed for raw bytes of `format`: the lowercase C name, or
/// `fi_format_<n>` for a number without a name.
fn raw_scheme(format: AddrFormat) -> String {
    if format.is_known() {
        format.name().to_ascii_lowercase()
    } else {
        format!("fi_format_{}", format.to_raw())
    }
}

/// The binary format a raw-bytes scheme stands for (not the sockaddr ones nor STR).
fn raw_format_for_scheme(lower: &str) -> Option<AddrFormat> {
    if let Some(n) = lower.strip_prefix("fi_format_") {
        if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
            let v: u32 = n.parse().ok()?;
            if !AddrFormat(v).is_known() {
                return Some(AddrFormat(v));
            }
        }
    }
    AddrFormat::ALL
        .iter()
        .copied()
        .filter(|f| !f.has_structured_form())
        .find(|f| f.name().eq_ignore_ascii_case(lower))
}

/// `0x` followed by a non-empty, even number of hex digits → the bytes.
fn parse_hex_body(body: &str) -> Option<Vec<u8>> {
    let hex = body
        .strip_prefix("0x")
        .or_else(|| body.strip_prefix("0X"))?;
    if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

fn parse_sockaddr_str(scheme: &str, a: &AddrStr, s: &str) -> Res<Address> {
    if !a.fields.is_empty() {
        return einval(format!(
            "address string {s:?}: {scheme} takes no path fields"
        ));
    }
    let port = match a.service.as_deref() {
        None | Some("") => 0,
        Some(p) => match p.parse::<u16>() {
            Ok(v) if p.bytes().all(|b| b.is_ascii_digit()) => v,
            _ => return einval(format!("address string {s:?}: invalid port {p:?}")),
        },
    };
    let mut flowinfo = 0u32;
    for (k, v) in &a.params {
        if k.eq_ignore_ascii_case("flowinfo") {
            flowinfo = v.parse().map_err(|_| {
                Error::new(
                    Errno::EINVAL,
                    format!("address string {s:?}: invalid flowinfo {v:?}"),
                )
            })?;
        }
    }
    let node = a.node.as_deref();
    let ip = match (scheme, node) {
        ("fi_sockaddr_in", None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        ("fi_sockaddr_in6", None) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        (_, None) => return einval(format!("address string {s:?}: {scheme} needs a node")),
        (_, Some(n)) => parse_ip_node(n, s)?,
    };
    match (scheme, ip) {
        ("fi_sockaddr_in6", IpAddr::V4(_)) => einval(format!(
            "address string {s:?}: fi_sockaddr_in6 needs an IPv6 address"
        )),
        ("fi_sockaddr_in", IpAddr::V6(..)) => einval(format!(
            "address string {s:?}: fi_sockaddr_in needs an IPv4 address"
        )),
        (_, IpAddr::V4(ip)) => {
            if node.is_some_and(|n| n.contains('%')) || flowinfo != 0 {
                return einval(format!(
                    "address string {s:?}: scope id and flowinfo apply only to IPv6"
                ));
            }
            Ok(Address::Inet(SocketAddrV4::new(ip, port)))
        }
        (_, IpAddr::V6(ip)) => {
            let scope = scope_of(node.unwrap_or(""), s)?;
            Ok(Address::Inet6(SocketAddrV6::new(ip, port, flowinfo, scope)))
        }
    }
}

/// Parses a node that must be an IP literal (IPv6 possibly with `%scope`).
fn parse_ip_node(n: &str, s: &str) -> Res<IpAddr> {
    let addr = n.split_once('%').map_or(n, |(a, _)| a);
    if n.contains('%') {
        return addr.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("address string {s:?}: invalid IPv6 node {n:?}"),
            )
        });
    }
    addr.parse::<IpAddr>().map_err(|_| {
        Error::new(
            Errno::EINVAL,
            format!("address string {s:?}: invalid IP address {n:?}"),
        )
    })
}

/// The numeric `%scope` suffix of an IPv6 node (0 if none).
fn scope_of(n: &str, s: &str) -> Res<u32> {
    match n.split_once('%') {
        None => Ok(0),
        Some((_, sc)) if !sc.is_empty() && sc.bytes().all(|b| b.is_ascii_digit()) => {
            sc.parse().map_err(|_| {
                Error::new(
                    Errno::EINVAL,
                    format!("address string {s:?}: invalid scope id {sc:?}"),
                )
            })
        }
        Some((_, sc)) => einval(format!(
            "address string {s:?}: scope id {sc:?} is not a number"
        )),
    }
}

/// The parts of an `FI_ADDR_STR` string:
/// `address_format[://[node][:[service][/[field3]...][?[key=value][&k2=v2]...]]]`.
///
/// Parsing is lenient about what may be left out: path fields and the query may follow
/// the node without a `:service`. An IPv6 node is written in brackets (`[::1]`), which
/// [`AddrStr::node`] holds without. [`Display`](fmt::Display) prints the canonical form,
/// always with `://`; `AddrStr::parse(&a.to_string())` gives back `a`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct AddrStr {
    /// The address format / scheme, e.g. `fi_sockaddr_in` (non-empty).
    pub scheme: String,
    /// The node (host); `None` when empty or absent.
    pub node: Option<String>,
    /// The service (port); `None` without `:`, `Some("")` for a `:` with nothing after.
    pub service: Option<String>,
    /// Further `/`-separated path fields (may be empty strings).
    pub fields: Vec<String>,
    /// Query parameters in order; a key without `=` gets an empty value.
    pub params: Vec<(String, String)>,
}

impl AddrStr {
    /// Parses an address string (see the type docs).
    ///
    /// # Errors
    /// [`Errno::EINVAL`]: empty scheme, a scheme with characters other than ASCII
    /// letters, digits and `_ - . +`, an unclosed `[`, text after `]` that is not `:`, `/`
    /// or `?`, or an empty parameter key.
    pub fn parse(s: &str) -> Res<AddrStr> {
        let (scheme, rest) = match s.split_once("://") {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        if scheme.is_empty() {
            return einval(format!("address string {s:?} has an empty format name"));
        }
        if !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.+".contains(&b))
        {
            return einval(format!(
                "address string {s:?}: invalid format name {scheme:?}"
            ));
        }
        let mut out = AddrStr {
            scheme: scheme.to_owned(),
            ..AddrStr::default()
        };
        let Some(rest) = rest else {
            return Ok(out);
        };
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        // Node: bracketed (IPv6) or up to the first ':' or '/'.
        let after_node;
        if let Some(br) = path.strip_prefix('[') {
            let Some(end) = br.find(']') else {
                return einval(format!("address string {s:?}: '[' without ']'"));
            };
            out.node = Some(br[..end].to_owned()).filter(|n| !n.is_empty());
            after_node = &br[end + 1..];
            if !(after_node.is_empty() || after_node.starts_with([':', '/'])) {
                return einval(format!(
                    "address string {s:?}: unexpected {after_node:?} after ']'"
                ));
            }
        } else {
            let end = path.find([':', '/']).unwrap_or(path.len());
            if path[..end].contains(']') {
                return einval(format!("address string {s:?}: ']' without '['"));
            }
            out.node = Some(path[..end].to_owned()).filter(|n| !n.is_empty());
            after_node = &path[end..];
        }
        // Service: after ':' up to '/'.
        let after_service = if let Some(sv) = after_node.strip_prefix(':') {
            let end = sv.find('/').unwrap_or(sv.len());
            out.service = Some(sv[..end].to_owned());
            &sv[end..]
        } else {
            after_node
        };
        // Fields: each '/'-prefixed segment.
        if let Some(f) = after_service.strip_prefix('/') {
            out.fields = f.split('/').map(str::to_owned).collect();
        }
        if let Some(q) = query {
            for kv in q.split('&').filter(|kv| !kv.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                if k.is_empty() {
                    return einval(format!("address string {s:?}: parameter {kv:?} has no key"));
                }
                out.params.push((k.to_owned(), v.to_owned()));
            }
        }
        Ok(out)
    }

    /// The value of the first parameter called `key` (case-sensitive).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Display for AddrStr {
    /// `scheme://node:service/field...?k=v&...`, with only the parts present; a node
    /// containing `:` is bracketed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme)?;
        if let Some(n) = &self.node {
            if n.contains(':') {
                write!(f, "[{n}]")?;
            } else {
                f.write_str(n)?;
            }
        }
        if let Some(sv) = &self.service {
            write!(f, ":{sv}")?;
        }
        for field in &self.fields {
            write!(f, "/{field}")?;
        }
        for (i, (k, v)) in self.params.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { '?' } else { '&' })?;
        }
        Ok(())
    }
}

impl std::str::FromStr for AddrStr {
    type Err = Error;
    /// Same as [`AddrStr::parse`].
    fn from_str(s: &str) -> Res<AddrStr> {
        AddrStr::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `e`, the error for `input`, is `FI_EINVAL` and its text mentions `what`.
    fn assert_einval_mentions(e: &Error, input: &str, what: &str) {
        assert_eq!(e.code(), Errno::EINVAL, "{input}");
        assert!(
            e.to_string().contains(what),
            "{input}: {e} should mention {what}"
        );
    }

    fn v4(s: &str) -> Address {
        Address::Inet(s.parse().unwrap())
    }

    #[test]
    fn sockaddr_in_bytes() {
        let a = v4("127.0.0.1:7471");
        let b = a.to_bytes();
        assert_eq!(b.len(), 16);
        assert_eq!(a.addrlen(), 16);
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), libc::AF_INET as u16);
        assert_eq!(&b[2..4], &7471u16.to_be_bytes());
        assert_eq!(&b[4..8], &[127, 0, 0, 1]);
        assert_eq!(&b[8..], &[0; 8]);
        assert_eq!(Address::from_bytes(AddrFormat::SOCKADDR_IN, &b).unwrap(), a);
        assert_eq!(Address::from_bytes(AddrFormat::SOCKADDR, &b).unwrap(), a);
        assert_eq!(a.format(), AddrFormat::SOCKADDR_IN);
    }

    #[test]
    fn sockaddr_in_matches_libc_layout() {
        let a: SocketAddrV4 = "10.1.2.3:4567".parse().unwrap();
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: sockaddr_in is plain old data of exactly this size; we only read it.
        let raw: [u8; 16] = unsafe { std::mem::transmute(sin) };
        assert_eq!(Address::Inet(a).to_bytes(), raw);
    }

    #[test]
    fn sockaddr_in6_bytes() {
        let sa = SocketAddrV6::new("fe80::1".parse().unwrap(), 7471, 0x12345, 3);
        let a = Address::Inet6(sa);
        let b = a.to_bytes();
        assert_eq!(b.len(), 28);
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), libc::AF_INET6 as u16);
        assert_eq!(&b[2..4], &7471u16.to_be_bytes());
        assert_eq!(&b[8..24], &sa.ip().octets());
        assert_eq!(
            Address::from_bytes(AddrFormat::SOCKADDR_IN6, &b).unwrap(),
            a
        );
        assert_eq!(Address::from_bytes(AddrFormat::SOCKADDR, &b).unwrap(), a);
        // Longer buffers (a sockaddr_storage) are accepted.
        let mut long = b.clone();
        long.resize(128, 0);
        assert_eq!(
            Address::from_bytes(AddrFormat::SOCKADDR_IN6, &long).unwrap(),
            a
        );
    }

    #[test]
    fn format_sets() {
        for f in AddrFormat::ALL.iter().copied().chain([AddrFormat(99)]) {
            // The structured formats are exactly those `from_bytes` does not keep raw.
            let bytes = [0u8; 64];
            let kept_raw = matches!(Address::from_bytes(f, &bytes), Ok(Address::Raw { .. }));
            assert_eq!(f.has_structured_form(), !kept_raw, "{f}");
        }
        let sockets: Vec<_> = AddrFormat::ALL.iter().filter(|f| f.is_socket()).collect();
        assert_eq!(
            sockets,
            [
                &AddrFormat::SOCKADDR,
                &AddrFormat::SOCKADDR_IN,
                &AddrFormat::SOCKADDR_IN6,
                &AddrFormat::SOCKADDR_IB
            ]
        );
    }

    #[test]
    fn from_bytes_errors() {
        let in4 = v4("1.2.3.4:5").to_bytes();
        let in6 = Address::Inet6("[::1]:5".parse().unwrap()).to_bytes();
        let cases: Vec<(AddrFormat, Vec<u8>, &str)> = vec![
            (AddrFormat::SOCKADDR_IN, in4[..15].to_vec(), "too short"),
            (AddrFormat::SOCKADDR_IN, in6.clone(), "family"),
            (AddrFormat::SOCKADDR_IN6, in6[..27].to_vec(), "too short"),
            (
                AddrFormat::SOCKADDR_IN6,
                {
                    let mut b = in4.clone();
                    b.resize(28, 0);
                    b
                },
                "family",
            ),
            (AddrFormat::SOCKADDR, vec![1], "too short"),
            (AddrFormat::SOCKADDR, vec![0xff, 0xff, 0, 0], "family"),
            (AddrFormat::SOCKADDR, in4[..10].to_vec(), "too short"),
            (AddrFormat::STR, b"fi_x://a".to_vec(), "NUL"),
            (AddrFormat::STR, vec![0xff, 0xfe, 0], "UTF-8"),
            (AddrFormat::PSMX2, vec![], "empty"),
        ];
        for (f, b, what) in cases {
            let e = Address::from_bytes(f, &b).unwrap_err();
            assert_einval_mentions(&e, &format!("{f} {b:?}"), what);
        }
    }

    #[test]
    fn str_and_raw_bytes() {
        let s = Address::Str("fi_shm://42".into());
        assert_eq!(s.to_bytes(), b"fi_shm://42\0");
        assert_eq!(s.addrlen(), 12);
        assert_eq!(
            Address::from_bytes(AddrFormat::STR, &s.to_bytes()).unwrap(),
            s
        );
        assert_eq!(
            Address::from_bytes(AddrFormat::STR, b"abc\0junk").unwrap(),
            Address::Str("abc".into())
        );
        assert_eq!(s.format(), AddrFormat::STR);
        let r = Address::from_bytes(AddrFormat::PSMX2, &[1, 2, 3]).unwrap();
        assert_eq!(
            r,
            Address::Raw {
                format: AddrFormat::PSMX2,
                bytes: vec![1, 2, 3]
            }
        );
        assert_eq!(r.to_bytes(), vec![1, 2, 3]);
        assert_eq!(r.format(), AddrFormat::PSMX2);
    }

    #[test]
    fn addr_str_forms() {
        assert_eq!(
            v4("127.0.0.1:7471").to_addr_str(),
            "fi_sockaddr_in://127.0.0.1:7471"
        );
        let a6 = Address::Inet6("[::1]:7471".parse().unwrap());
        assert_eq!(a6.to_addr_str(), "fi_sockaddr_in6://[::1]:7471");
        assert_eq!(a6.to_string(), "fi_sockaddr_in6://[::1]:7471");
        let scoped = Address::Inet6(SocketAddrV6::new("fe80::6:12".parse().unwrap(), 1, 7, 2));
        assert_eq!(
            scoped.to_addr_str(),
            "fi_sockaddr_in6://[fe80::6:12%2]:1?flowinfo=7"
        );
        assert_eq!(
            Address::parse_addr_str(&scoped.to_addr_str()).unwrap(),
            scoped
        );
        let raw = Address::Raw {
            format: AddrFormat::PSMX2,
            bytes: vec![0xab, 1],
        };
        assert_eq!(raw.to_addr_str(), "fi_addr_psmx2://0xab01");
        assert_eq!(
            Address::parse_addr_str("fi_addr_psmx2://0xab01").unwrap(),
            raw
        );
        let odd = Address::Raw {
            format: AddrFormat(99),
            bytes: vec![0],
        };
        assert_eq!(odd.to_addr_str(), "fi_format_99://0x00");
        assert_eq!(Address::parse_addr_str("fi_format_99://0x00").unwrap(), odd);
        let raw_in = Address::Raw {
            format: AddrFormat::SOCKADDR_IN,
            bytes: v4("1.2.3.4:5").to_bytes(),
        };
        assert_eq!(raw_in.to_addr_str(), "fi_sockaddr_in://1.2.3.4:5");
        let bad_raw_in = Address::Raw {
            format: AddrFormat::SOCKADDR_IN,
            bytes: vec![9],
        };
        assert_eq!(bad_raw_in.to_addr_str(), "fi_sockaddr_in://0x09");
    }

    #[test]
    fn parse_addr_str_sockaddr() {
        let p = |s: &str| Address::parse_addr_str(s).unwrap();
        assert_eq!(p("fi_sockaddr_in://127.0.0.1:7471"), v4("127.0.0.1:7471"));
        assert_eq!(p("FI_SOCKADDR_IN://10.0.0.1"), v4("10.0.0.1:0"));
        assert_eq!(p("fi_sockaddr_in://:80"), v4("0.0.0.0:80"));
        assert_eq!(
            p("fi_sockaddr://10.31.6.12:7471?qos=3"),
            v4("10.31.6.12:7471")
        );
        assert_eq!(
            p("fi_sockaddr_in6://[fe80::6:12]:7471"),
            Address::Inet6("[fe80::6:12]:7471".parse().unwrap())
        );
        assert_eq!(
            p("fi_sockaddr://[::1]:9"),
            Address::Inet6("[::1]:9".parse().unwrap())
        );
        assert_eq!(
            p("fi_sockaddr_in6://"),
            Address::Inet6("[::]:0".parse().unwrap())
        );
        // Other schemes are kept verbatim.
        assert_eq!(p("fi_shm://1234"), Address::Str("fi_shm://1234".into()));
        assert_eq!(
            p("fi_addr_psmx2://12:34"),
            Address::Str("fi_addr_psmx2://12:34".into())
        );
        assert_eq!(
            p("fi_addr_psmx2://0x123"),
            Address::Str("fi_addr_psmx2://0x123".into())
        );
        assert_eq!(p("fi_ns://h:1?x=y"), Address::Str("fi_ns://h:1?x=y".into()));
    }

    #[test]
    fn parse_addr_str_errors() {
        for (s, what) in [
            ("127.0.0.1:7471", "://"),
            ("://x", "empty format"),
            ("fi_sockaddr_in://[::1]:80", "IPv4"),
            ("fi_sockaddr_in6://1.2.3.4:80", "IPv6"),
            ("fi_sockaddr_in://1.2.3.4:99999", "port"),
            ("fi_sockaddr_in://1.2.3.4:+80", "port"),
            ("fi_sockaddr_in://1.2.3.4:80/x", "fields"),
            ("fi_sockaddr_in://host.example:80", "invalid IP"),
            ("fi_sockaddr://:80", "needs a node"),
            ("fi_sockaddr_in6://[::1%eth0]:1", "scope"),
            ("fi_sockaddr_in6://[::1]:1?flowinfo=x", "flowinfo"),
            ("fi_sockaddr_in://1.2.3.4:1?flowinfo=3", "IPv6"),
            ("fi_sockaddr_in6://[::1:1", "']'"),
        ] {
            assert_einval_mentions(&Address::parse_addr_str(s).unwrap_err(), s, what);
        }
    }

    #[test]
    fn addr_str_structure() {
        let a = AddrStr::parse("fi_x://host:svc/f1/f2?k=v&k2=v2").unwrap();
        assert_eq!(a.scheme, "fi_x");
        assert_eq!(a.node.as_deref(), Some("host"));
        assert_eq!(a.service.as_deref(), Some("svc"));
        assert_eq!(a.fields, ["f1", "f2"]);
        assert_eq!(
            a.params,
            [("k".into(), "v".into()), ("k2".into(), "v2".into())]
        );
        assert_eq!(a.param("k2"), Some("v2"));
        assert_eq!(a.to_string(), "fi_x://host:svc/f1/f2?k=v&k2=v2");

        let b = AddrStr::parse("fi_sockaddr_in6://[fe80::6:12]:7471").unwrap();
        assert_eq!(b.node.as_deref(), Some("fe80::6:12"));
        assert_eq!(b.service.as_deref(), Some("7471"));
        assert_eq!(b.to_string(), "fi_sockaddr_in6://[fe80::6:12]:7471");

        let c = AddrStr::parse("fi_x").unwrap();
        assert_eq!(
            c,
            AddrStr {
                scheme: "fi_x".into(),
                ..Default::default()
            }
        );
        assert_eq!(c.to_string(), "fi_x://");

        let d = AddrStr::parse("fi_x://:7/?flag").unwrap();
        assert_eq!(d.node, None);
        assert_eq!(d.service.as_deref(), Some("7"));
        assert_eq!(d.fields, [""]);
        assert_eq!(d.params, [("flag".into(), String::new())]);
        assert_eq!(
            "fi_x://h".parse::<AddrStr>().unwrap().node.as_deref(),
            Some("h")
        );

        for (s, what) in [
            ("", "empty"),
            ("://h", "empty"),
            ("fi x://h", "invalid format"),
            ("fi_x://[::1", "'['"),
            ("fi_x://[::1]x", "after"),
            ("fi_x://a]:1", "']'"),
            ("fi_x://h?=v", "no key"),
        ] {
            assert_einval_mentions(&AddrStr::parse(s).unwrap_err(), s, what);
        }
    }

    fn seg() -> impl Strategy<Value = String> {
        "[A-Za-z0-9._-]{0,8}"
    }

    fn addr_str() -> impl Strategy<Value = AddrStr> {
        (
            "[a-z][a-z0-9_]{0,10}",
            prop::option::of(prop_oneof![
                "[A-Za-z0-9.-]{1,10}",
                "[0-9a-f:]{0,6}:[0-9a-f]{1,4}"
            ]),
            prop::option::of(seg()),
            prop::collection::vec(seg(), 0..3),
            prop::collection::vec(("[a-z][a-z0-9_]{0,5}", seg()), 0..3),
        )
            .prop_map(|(scheme, node, service, fields, params)| AddrStr {
                scheme,
                node,
                service,
                fields,
                params,
            })
    }

    proptest! {
        #[test]
        fn inet_bytes_round_trip(ip: [u8; 4], port: u16) {
            let a = Address::Inet(SocketAddrV4::new(Ipv4Addr::from(ip), port));
            let back = Address::from_bytes(AddrFormat::SOCKADDR_IN, &a.to_bytes()).unwrap();
            prop_assert_eq!(back, a.clone());
            prop_assert_eq!(Address::parse_addr_str(&a.to_addr_str()).unwrap(), a);
        }

        #[test]
        fn inet6_bytes_round_trip(ip: [u8; 16], port: u16, flow: u32, scope: u32) {
            let a = Address::Inet6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope));
            let back = Address::from_bytes(AddrFormat::SOCKADDR, &a.to_bytes()).unwrap();
            prop_assert_eq!(back, a.clone());
            prop_assert_eq!(Address::parse_addr_str(&a.to_addr_str()).unwrap(), a);
        }

        #[test]
        fn raw_round_trip(fmt in 4u32..200, bytes in prop::collection::vec(any::<u8>(), 1..40)) {
            prop_assume!(fmt != AddrFormat::STR.0);
            let a = Address::from_bytes(AddrFormat(fmt), &bytes).unwrap();
            prop_assert_eq!(a.to_bytes(), bytes);
            prop_assert_eq!(Address::parse_addr_str(&a.to_addr_str()).unwrap(), a);
        }

        #[test]
        fn str_round_trip(s in "[a-z_]{1,8}://[ -~]{0,20}") {
            let a = Address::Str(s.clone());
            let back = Address::from_bytes(AddrFormat::STR, &a.to_bytes()).unwrap();
            prop_assert_eq!(back, a.clone());
            let special = ["fi_sockaddr", "fi_addr_", "fi_format_"];
            prop_assume!(!special.iter().any(|p| s.starts_with(p)));
            prop_assert_eq!(Address::parse_addr_str(&s).unwrap(), a);
        }

        #[test]
        fn addr_str_display_round_trip(a in addr_str()) {
            let text = a.to_string();
            prop_assert_eq!(AddrStr::parse(&text).unwrap(), a);
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = AddrStr::parse(&s);
            let _ = Address::parse_addr_str(&s);
            let _ = Address::from_bytes(AddrFormat::SOCKADDR, s.as_bytes());
            let _ = Address::from_bytes(AddrFormat::STR, s.as_bytes());
        }
    }
}
