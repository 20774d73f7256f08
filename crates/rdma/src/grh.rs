//! The global route header (GRH): the [`GRH_LEN`] bytes a UD or SRD receive finds in
//! front of the payload (network byte order), declared once in kit's wire convention
//! (`ofi_kit::wire`): the software device writes it ([`ipv6_grh`]), the providers read
//! the sender's GID from it ([`source_gid`]).
//!
//! Two layouts share the 40 bytes. InfiniBand, RoCE v1 and RoCE v2 over IPv6 put an
//! IPv6-style header there ([`Grh`], [`grh_field`]: version 6 in the first nibble);
//! RoCE v2 over IPv4 puts an IPv4 header in the last 20 bytes ([`Ipv4Grh`],
//! [`ipv4_grh_field`]: version 4 in the first nibble of byte 20) and leaves the first 20
//! undefined.
//!
//! Nothing here panics: a header of neither kind names no GID.

use std::net::Ipv4Addr;

use ofi_kit::wire_header;

use crate::verbs::{Gid, GRH_LEN};

/// The IP version an IPv6-style GRH carries in its first nibble.
const IP_V6: u32 = 6;
/// The IP version of the IPv4 header of a RoCE v2 over IPv4 GRH.
const IP_V4: u8 = 4;

wire_header! {
    /// A checked view of an IPv6-style GRH (InfiniBand, RoCE v1, RoCE v2 over IPv6).
    pub struct Grh;
    endian: big;
    len: GRH_LEN;
    /// Where each field of an IPv6-style GRH lies.
    pub mod grh_field {
        /// IP version (high nibble), traffic class and flow label.
        VERSION_CLASS_FLOW: u32 = 0..4 => version_class_flow, set_version_class_flow;
        /// Bytes after the header.
        PAYLOAD_LEN: u16 = 4..6 => payload_len, set_payload_len;
        /// Next header.
        NEXT_HDR: u8 = 6..7 => next_hdr, set_next_hdr;
        /// Hop limit.
        HOP_LIMIT: u8 = 7..8 => hop_limit, set_hop_limit;
        /// The sender's GID.
        SGID: [u8; 16] = 8..24 => sgid, set_sgid;
        /// The receiver's GID.
        DGID: [u8; 16] = 24..40 => dgid, set_dgid;
    }
}

wire_header! {
    /// A checked view of a RoCE v2 over IPv4 GRH: an IPv4 header in its last 20 bytes.
    pub struct Ipv4Grh;
    endian: big;
    len: GRH_LEN;
    /// Where each field of the IPv4 header of a GRH lies (from the GRH's start).
    pub mod ipv4_grh_field {
        /// IP version (high nibble) and header length.
        VERSION_IHL: u8 = 20..21 => version_ihl, set_version_ihl;
        /// The sender's address.
        SRC: [u8; 4] = 32..36 => src, set_src;
        /// The receiver's address.
        DST: [u8; 4] = 36..40 => dst, set_dst;
    }
}

/// The IPv6-style GRH of a datagram of `payload_len` bytes from `sgid` to `dgid` (what
/// the software device writes in front of a UD receive).
pub fn ipv6_grh(sgid: &Gid, dgid: &Gid, payload_len: u16) -> [u8; GRH_LEN] {
    let mut v = Grh::zeroed();
    v.set_version_class_flow(IP_V6 << 28);
    v.set_payload_len(payload_len);
    v.set_sgid(sgid.0);
    v.set_dgid(dgid.0);
    v.into_inner()
}

/// The source GID `grh` names: an IPv6-style header's source GID; for RoCE v2 over
/// IPv4, the IPv4-mapped GID of the IPv4 header's source address; `None` for anything
/// else.
pub fn source_gid(grh: &[u8; GRH_LEN]) -> Option<Gid> {
    let v6 = Grh::new_checked(grh).ok()?;
    if v6.version_class_flow() >> 28 == IP_V6 {
        return Some(Gid(v6.sgid()));
    }
    let v4 = Ipv4Grh::new_checked(grh).ok()?;
    if v4.version_ihl() >> 4 == IP_V4 {
        return Some(Gid(Ipv4Addr::from(v4.src()).to_ipv6_mapped().octets()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grh_names_the_source_gid() {
        // InfiniBand / RoCE v1 / RoCE v2 over IPv6: version 6, SGID at 8..24.
        let mut grh = [0u8; GRH_LEN];
        grh[0] = 0x60;
        grh[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            source_gid(&grh),
            Some(Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]))
        );
        // RoCE v2 over IPv4: the IPv4 header in the last 20 bytes, source at 12..16.
        let mut grh = [0u8; GRH_LEN];
        grh[20] = 0x45;
        grh[32..36].copy_from_slice(&[192, 168, 7, 9]);
        let mut want = [0u8; 16];
        want[10..12].copy_from_slice(&[0xff, 0xff]);
        want[12..].copy_from_slice(&[192, 168, 7, 9]);
        assert_eq!(source_gid(&grh), Some(Gid(want)));
        // Neither: unknown.
        assert_eq!(source_gid(&[0u8; GRH_LEN]), None);
    }

    #[test]
    fn the_software_device_grh_is_ipv6_style_and_names_its_sender() {
        let (s, d) = (Gid([1; 16]), Gid([2; 16]));
        let grh = ipv6_grh(&s, &d, 0x0102);
        assert_eq!(grh[..8], [0x60, 0, 0, 0, 0x01, 0x02, 0, 0]);
        assert_eq!(grh[24..], d.0);
        assert_eq!(source_gid(&grh), Some(s));
    }
}
