//! Authorization keys on rxm connections: the connection request carries the
//! connecting endpoint's key tag ([`ofi_kit::auth::AuthTag`], never the key), folded
//! to 32 bits ([`wire_tag`]), in four bytes after the handshake's address; the
//! listening endpoint refuses a request whose tag is not its own (reject reason
//! "parameters": the connecting side fails the peer's queued operations with
//! `FI_ECONNREFUSED`, without retrying), so nothing is delivered between endpoints of
//! different keys. Four bytes, not eight: a handshake with an IPv4 address then still
//! fits the 56 bytes of connect data of RDMA CM (rxm over verbs).
//!
//! An endpoint without a key sends no trailer (its handshakes are byte for byte those
//! of before), and a request without one has no key: keyless endpoints talk only to
//! keyless ones. Peers that do not know the trailer ignore it (the handshake parser
//! reads the address length it is given and nothing after).
//!
//! Nothing here panics.

use ofi_kit::auth::AuthTag;

use crate::proto::HELLO_LEN;

/// Bytes of the trailer.
pub const TAG_LEN: usize = 4;

/// `tag` as the trailer carries it: the two halves xor-ed, never 0 for a key; 0 for
/// [`AuthTag::NONE`].
pub fn wire_tag(tag: AuthTag) -> u32 {
    if tag == AuthTag::NONE {
        return 0;
    }
    let w = tag.wire();
    ((w ^ (w >> 32)) as u32).max(1)
}

/// Append `tag` to an encoded handshake (nothing for [`AuthTag::NONE`]).
pub fn append_tag(hello: &mut Vec<u8>, tag: AuthTag) {
    if tag != AuthTag::NONE {
        hello.extend_from_slice(&wire_tag(tag).to_le_bytes());
    }
}

/// Whether the untrusted handshake `data`, whose address is `addr_len` bytes, carries
/// `tag` (no trailer, or a short one, carries [`AuthTag::NONE`]).
pub fn carries(data: &[u8], addr_len: usize, tag: AuthTag) -> bool {
    let at = HELLO_LEN.saturating_add(addr_len);
    let got = data
        .get(at..at.saturating_add(TAG_LEN))
        .and_then(|b| <[u8; TAG_LEN]>::try_from(b).ok())
        .map_or(0, u32::from_le_bytes);
    got == wire_tag(tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Hello;

    #[test]
    fn the_tag_travels_after_the_address_and_parsing_ignores_it() {
        let h = Hello {
            addr: vec![1, 2, 3],
            ..crate::proto::tests::hello()
        };
        let plain = h.encode();
        let mut keyed = plain.clone();
        append_tag(&mut keyed, AuthTag::NONE);
        assert_eq!(keyed, plain, "no key, no trailer");
        let tag = AuthTag::of(Some(b"job"));
        append_tag(&mut keyed, tag);
        assert_eq!(keyed.len(), plain.len() + TAG_LEN);
        assert_eq!(Hello::parse(&keyed).unwrap(), h);
        assert!(carries(&keyed, 3, tag));
        assert!(!carries(&keyed, 3, AuthTag::of(Some(b"other"))));
        assert!(!carries(&keyed, 3, AuthTag::NONE));
        assert!(carries(&plain, 3, AuthTag::NONE));
        assert!(!carries(&plain, 3, tag));
        assert!(carries(&keyed[..keyed.len() - 1], 3, AuthTag::NONE));
        assert!(carries(&keyed, usize::MAX, AuthTag::NONE));
        assert_ne!(wire_tag(tag), 0);
    }
}
