//! Tagged extensions of the connection request, after the authorization tag's place:
//! what a scalable endpoint needs to travel in the handshake.
//!
//! A connection request is the fixed [`Hello`](crate::proto::Hello), the sender's
//! address, then optionally the four-byte authorization tag ([`crate::auth`]). When the
//! sender has extensions to send, the tag's four bytes are always there (zero when it
//! has no key, which is what a keyless listener expects to read), followed by
//! extensions, each
//!
//! | size | field |
//! | --- | --- |
//! | 1 | type |
//! | 1 | value length `n` |
//! | n | value |
//!
//! | type | value |
//! | --- | --- |
//! | 1 [`EXT_RX_INDEX`] | u16 LE: the receive context the request is for (absent: 0) |
//! | 2 [`EXT_ALIAS`] | the address the sender is known by in its peers' AVs (a transmit context's scalable endpoint's name), for `FI_SOURCE` |
//!
//! A request without extensions is byte for byte what it was before they existed, and
//! reaches receive context 0. Peers that do not know the extensions ignore them (they
//! read the address and the tag, nothing after); an unknown type is skipped, so later
//! types can be added. A type given twice, a length past the end, a receive index not
//! two bytes long, or an alias empty or longer than [`MAX_ADDR`] is malformed.
//!
//! Nothing here panics on any input.

use ofi_kit::auth::AuthTag;
use ofi_kit::wire::WireError;

use crate::auth::{wire_tag, TAG_LEN};
use crate::proto::{HELLO_LEN, MAX_ADDR};

/// Extension type: the receive context index (u16 LE).
pub const EXT_RX_INDEX: u8 = 1;
/// Extension type: the address the sender is known by (for `FI_SOURCE`).
pub const EXT_ALIAS: u8 = 2;

/// The extensions of one connection request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    /// The receive context the request is for (`None`: context 0).
    pub rx_index: Option<u16>,
    /// The address the sender is known by, when it is not the handshake's address.
    pub alias: Option<Vec<u8>>,
}

impl Extensions {
    /// Whether there is nothing to send (the request is then unchanged).
    pub fn is_empty(&self) -> bool {
        self.rx_index.is_none() && self.alias.is_none()
    }

    /// The receive context index asked for (0 when absent).
    pub fn index(&self) -> usize {
        usize::from(self.rx_index.unwrap_or(0))
    }

    /// Parse the extensions of the untrusted request `data` whose address is
    /// `addr_len` bytes (none after the tag's place: none at all).
    ///
    /// # Errors
    /// A [`WireError`] for a malformed extension (see the module docs).
    pub fn parse(data: &[u8], addr_len: usize) -> Result<Extensions, WireError> {
        let at = HELLO_LEN.saturating_add(addr_len).saturating_add(TAG_LEN);
        let mut rest = data.get(at..).unwrap_or_default();
        let mut ext = Extensions::default();
        while let [ty, len, tail @ ..] = rest {
            let n = usize::from(*len);
            let value = tail.get(..n).ok_or(WireError::Truncated {
                need: n,
                have: tail.len(),
            })?;
            rest = &tail[n..];
            match *ty {
                EXT_RX_INDEX => {
                    let v = <[u8; 2]>::try_from(value)
                        .map_err(|_| WireError::field("rx index length", *len))?;
                    if ext.rx_index.replace(u16::from_le_bytes(v)).is_some() {
                        return Err(WireError::Malformed("receive index given twice"));
                    }
                }
                EXT_ALIAS => {
                    if value.is_empty() || n > MAX_ADDR {
                        return Err(WireError::field("alias length", *len));
                    }
                    if ext.alias.replace(value.to_vec()).is_some() {
                        return Err(WireError::Malformed("alias given twice"));
                    }
                }
                _ => {}
            }
        }
        if let [_] = rest {
            return Err(WireError::Truncated { need: 2, have: 1 });
        }
        Ok(ext)
    }
}

/// Append the trailers to an encoded handshake: nothing but the authorization tag (as
/// [`crate::auth::append_tag`]) when `ext` is empty; else the tag's four bytes (zero
/// without a key) and the extensions. An alias longer than [`MAX_ADDR`] is not sent.
pub fn append(hello: &mut Vec<u8>, tag: AuthTag, ext: &Extensions) {
    if ext.is_empty() {
        crate::auth::append_tag(hello, tag);
        return;
    }
    hello.extend_from_slice(&wire_tag(tag).to_le_bytes());
    if let Some(i) = ext.rx_index {
        hello.extend_from_slice(&[EXT_RX_INDEX, 2]);
        hello.extend_from_slice(&i.to_le_bytes());
    }
    if let Some(a) = ext.alias.as_deref().filter(|a| a.len() <= MAX_ADDR) {
        // Checked: at most MAX_ADDR (128) bytes.
        hello.extend_from_slice(&[EXT_ALIAS, a.len() as u8]);
        hello.extend_from_slice(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Hello;
    use ofi_testkit::TestRng;

    fn hello(addr: &[u8]) -> Vec<u8> {
        Hello {
            addr: addr.to_vec(),
            ..crate::proto::tests::hello()
        }
        .encode()
    }

    #[test]
    fn no_extension_leaves_the_request_unchanged() {
        let plain = hello(&[1, 2, 3]);
        for tag in [AuthTag::NONE, AuthTag::of(Some(b"job"))] {
            let mut a = plain.clone();
            crate::auth::append_tag(&mut a, tag);
            let mut b = plain.clone();
            append(&mut b, tag, &Extensions::default());
            assert_eq!(a, b);
            assert_eq!(Extensions::parse(&b, 3).unwrap(), Extensions::default());
        }
    }

    #[test]
    fn extensions_round_trip_with_and_without_a_key() {
        let ext = Extensions {
            rx_index: Some(3),
            alias: Some(vec![9; 16]),
        };
        for tag in [AuthTag::NONE, AuthTag::of(Some(b"job"))] {
            let mut b = hello(&[1, 2, 3]);
            append(&mut b, tag, &ext);
            assert_eq!(Extensions::parse(&b, 3).unwrap(), ext);
            assert!(crate::auth::carries(&b, 3, tag), "the tag's place is kept");
            assert_eq!(Hello::parse(&b).unwrap().addr, vec![1, 2, 3]);
        }
        let only = Extensions {
            rx_index: Some(1),
            alias: None,
        };
        let mut b = hello(&[1]);
        append(&mut b, AuthTag::NONE, &only);
        assert_eq!(Extensions::parse(&b, 1).unwrap().index(), 1);
    }

    #[test]
    fn malformed_extensions_are_refused_and_unknown_ones_skipped() {
        let base = {
            let mut b = hello(&[1]);
            b.extend_from_slice(&[0; TAG_LEN]);
            b
        };
        let with = |tail: &[u8]| {
            let mut b = base.clone();
            b.extend_from_slice(tail);
            Extensions::parse(&b, 1)
        };
        assert!(
            with(&[EXT_RX_INDEX, 3, 1, 0, 0]).is_err(),
            "index of 3 bytes"
        );
        assert!(with(&[EXT_RX_INDEX, 2, 1]).is_err(), "past the end");
        assert!(with(&[EXT_RX_INDEX, 2, 1, 0, EXT_RX_INDEX, 2, 2, 0]).is_err());
        assert!(with(&[EXT_ALIAS, 0]).is_err(), "empty alias");
        assert!(with(&[EXT_ALIAS, 1, 5, EXT_ALIAS, 1, 6]).is_err());
        assert!(with(&[EXT_RX_INDEX]).is_err(), "a lone type byte");
        let e = with(&[77, 2, 0xaa, 0xbb, EXT_RX_INDEX, 2, 5, 0]).unwrap();
        assert_eq!(e.rx_index, Some(5), "an unknown type is skipped");
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = TestRng::seeded(0x5ca1ab1e);
        let base = hello(&[1, 2, 3, 4]);
        for _ in 0..5000 {
            let mut b = base.clone();
            let n = rng.below(64) as usize;
            b.extend((0..n).map(|_| rng.below(256) as u8));
            let _ = Extensions::parse(&b, 4);
            let _ = Extensions::parse(&b, usize::MAX);
        }
    }
}
