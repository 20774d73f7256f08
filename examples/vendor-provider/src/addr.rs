//! Endpoint addresses of this provider: `FI_ADDR_STR` strings of the form
//! `fi_unixdgram://NAME`, where NAME is the endpoint socket's abstract name.
//!
//! NAME is 1 to [`MAX_NAME`] bytes of `A-Z a-z 0-9 . _ -`: the
//! names the kernel picks (five hex digits) and any name an application chooses for
//! its source address. The scheme is matched case-insensitively; the name is not.
//!
//! Addresses of peers read from the socket (`FI_SOURCE`) are never parsed or printed:
//! they are only looked up, as bytes, in the address vector. Nothing here panics.

use ofi_core::{AddrFormat, Address, Errno, Error, Result};

use crate::sock::MAX_NAME;

/// The address scheme (the part before `://`).
pub const SCHEME: &str = "fi_unixdgram";

/// Whether `name` is a valid endpoint name (see the module docs).
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The address of endpoint `name`. `name` comes from our own socket, so it is valid;
/// a byte outside the alphabet would be shown as `?` rather than fail.
pub fn address_of(name: &[u8]) -> Address {
    let text: String = name
        .iter()
        .map(|&b| if valid_name(&[b]) { b as char } else { '?' })
        .collect();
    Address::Str(format!("{SCHEME}://{text}"))
}

/// The endpoint name in an `fi_unixdgram://NAME` string.
///
/// # Errors
/// `FI_EINVAL` naming what is wrong: another scheme, no `://`, an empty or too long
/// name, or a character outside the alphabet.
pub fn parse_text(s: &str) -> Result<Vec<u8>> {
    let Some((scheme, name)) = s.split_once("://") else {
        return Err(Error::new(
            Errno::EINVAL,
            format!("address {s:?} is not of the form {SCHEME}://NAME"),
        ));
    };
    if !scheme.eq_ignore_ascii_case(SCHEME) {
        return Err(Error::new(
            Errno::EINVAL,
            format!("address {s:?} has scheme {scheme:?}; this provider's is {SCHEME:?}"),
        ));
    }
    if !valid_name(name.as_bytes()) {
        return Err(Error::new(
            Errno::EINVAL,
            format!(
                "address {s:?}: the name must be 1 to {MAX_NAME} characters of A-Z a-z 0-9 . _ -"
            ),
        ));
    }
    Ok(name.as_bytes().to_vec())
}

/// The endpoint name of an address given to this provider (an AV insert, a source
/// address in `Info`).
///
/// # Errors
/// `FI_EINVAL` for an address of another format, or a malformed string (see
/// [`parse_text`]).
pub fn parse(addr: &Address) -> Result<Vec<u8>> {
    match addr {
        Address::Str(s) => parse_text(s),
        Address::Raw { format, bytes } if *format == AddrFormat::STR => {
            match Address::from_bytes(AddrFormat::STR, bytes)? {
                Address::Str(s) => parse_text(&s),
                _ => Err(Error::new(
                    Errno::EINVAL,
                    "FI_ADDR_STR address did not decode",
                )),
            }
        }
        other => Err(Error::new(
            Errno::EINVAL,
            format!(
                "this provider's addresses are FI_ADDR_STR ({SCHEME}://NAME), not {}",
                other.format()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    #[test]
    fn round_trip() {
        let a = address_of(b"1a2b3");
        assert_eq!(a, Address::Str("fi_unixdgram://1a2b3".into()));
        assert_eq!(parse(&a).unwrap(), b"1a2b3");
        assert_eq!(
            parse_text("FI_UNIXDGRAM://my-ep_1.x").unwrap(),
            b"my-ep_1.x"
        );
        let raw = Address::Raw {
            format: AddrFormat::STR,
            bytes: b"fi_unixdgram://ab\0".to_vec(),
        };
        assert_eq!(parse(&raw).unwrap(), b"ab");
    }

    #[test]
    fn malformed_addresses_are_einval() {
        for bad in [
            "unixdgram",
            "fi_unixdgram://",
            "fi_sockaddr_in://127.0.0.1:1",
            "fi_unixdgram://a/b",
            "fi_unixdgram://a b",
        ] {
            let e = parse_text(bad).unwrap_err();
            assert_eq!(e.code(), Errno::EINVAL, "{bad}");
        }
        let long = format!("fi_unixdgram://{}", "a".repeat(MAX_NAME + 1));
        assert_eq!(parse_text(&long).unwrap_err().code(), Errno::EINVAL);
        let ip = Address::Inet(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1));
        let e = parse(&ip).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        assert!(e.to_string().contains("FI_SOCKADDR_IN"), "{e}");
    }
}
