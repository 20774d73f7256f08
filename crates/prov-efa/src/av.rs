//! Addresses (`FI_ADDR_EFA`): an endpoint is named by its device port's GID, its SRD
//! queue pair number and the queue pair's Q_Key — 24 bytes, little endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..16 | GID |
//! | 16..20 | queue pair number |
//! | 20..24 | Q_Key |
//!
//! This project's layout (C's efa names the same three things in 32 bytes with its own
//! padding; the two do not interoperate). The AV itself is kit's (`SharedAv`), holding
//! these bytes. Parsing never panics: a short or foreign address is `FI_EINVAL`.

use ofi_core::addr::Address;
use ofi_core::{AddrFormat, Result};
use ofi_rdma::Gid;

/// Bytes of an address.
pub const ADDR_LEN: usize = 24;
/// The Q_Key of every endpoint's queue pair.
pub const QKEY: u32 = 0x0e5a_11ed;

/// An endpoint's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EfaAddr {
    /// The port's GID.
    pub gid: Gid,
    /// The SRD queue pair.
    pub qpn: u32,
    /// Its Q_Key.
    pub qkey: u32,
}

impl EfaAddr {
    /// The address's bytes.
    pub fn to_bytes(self) -> [u8; ADDR_LEN] {
        let mut b = [0u8; ADDR_LEN];
        b[..16].copy_from_slice(&self.gid.0);
        b[16..20].copy_from_slice(&self.qpn.to_le_bytes());
        b[20..24].copy_from_slice(&self.qkey.to_le_bytes());
        b
    }

    /// The address as the AV holds it.
    pub fn to_address(self) -> Address {
        Address::Raw {
            format: AddrFormat::EFA,
            bytes: self.to_bytes().to_vec(),
        }
    }

    /// Parses an address's bytes.
    ///
    /// # Errors
    /// `FI_EINVAL` when `b` is not [`ADDR_LEN`] bytes.
    pub fn from_bytes(b: &[u8]) -> Result<EfaAddr> {
        let b: &[u8; ADDR_LEN] = b.try_into().map_err(|_| {
            crate::einval(format!(
                "an FI_ADDR_EFA address is {ADDR_LEN} bytes, not {}",
                b.len()
            ))
        })?;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[..16]);
        Ok(EfaAddr {
            gid: Gid(gid),
            qpn: u32::from_le_bytes([b[16], b[17], b[18], b[19]]),
            qkey: u32::from_le_bytes([b[20], b[21], b[22], b[23]]),
        })
    }

    /// Parses an AV address.
    ///
    /// # Errors
    /// `FI_EINVAL` for another format or a wrong length.
    pub fn from_address(a: &Address) -> Result<EfaAddr> {
        match a {
            Address::Raw { format, bytes } if *format == AddrFormat::EFA => {
                EfaAddr::from_bytes(bytes)
            }
            other => Err(crate::einval(format!(
                "{other} is not an FI_ADDR_EFA address"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_and_bad_ones_are_refused() {
        let a = EfaAddr {
            gid: Gid([7; 16]),
            qpn: 0x12_3456,
            qkey: QKEY,
        };
        assert_eq!(EfaAddr::from_address(&a.to_address()).unwrap(), a);
        assert!(EfaAddr::from_bytes(&a.to_bytes()[..23]).is_err());
        let other = Address::Raw {
            format: AddrFormat::IB_UD,
            bytes: a.to_bytes().to_vec(),
        };
        assert!(EfaAddr::from_address(&other).is_err());
    }
}
