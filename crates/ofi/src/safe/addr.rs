//! Endpoint addresses for out-of-band exchange ([`EpAddr`], `serde`-serializable) and
//! peer handles ([`Peer`]). Malformed addresses from a peer are errors
//! (`FI_EINVAL`), never panics.

use serde::{Deserialize, Serialize};

use crate::{AddrFormat, Address, Errno, Error, Result};

/// An endpoint's address (`fi_getname`) with its format, for exchange with peers.
/// Serialize it with any `serde` format; its text form ([`Display`](std::fmt::Display)
/// / [`FromStr`](std::str::FromStr)) is `FORMAT:HEX`.
///
/// ```
/// use ofi::safe::EpAddr;
/// let a: EpAddr = "3:0a0b".parse()?;
/// assert_eq!(a.bytes(), &[0x0a, 0x0b]);
/// assert_eq!(a.to_string(), "3:0a0b");
/// # Ok::<(), ofi::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EpAddr {
    format: u32,
    bytes: Vec<u8>,
}

impl EpAddr {
    /// An address of `format` (`FI_ADDR_*`) with the provider's bytes.
    #[inline]
    pub fn new(format: AddrFormat, bytes: Vec<u8>) -> EpAddr {
        EpAddr {
            format: format.to_raw(),
            bytes,
        }
    }

    /// The address format.
    #[inline]
    pub fn format(&self) -> AddrFormat {
        AddrFormat::from_raw(self.format)
    }

    /// The raw address bytes, as `fi_getname` wrote them.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Decode into a typed [`Address`] (`FI_EINVAL` if the bytes do not fit the format).
    #[inline]
    pub fn to_address(&self) -> Result<Address> {
        Address::from_bytes(self.format(), &self.bytes)
            .map_err(|e| Error::new(Errno::EINVAL, format!("peer address: {e}")))
    }
}

impl std::fmt::Display for EpAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:", self.format)?;
        for b in &self.bytes {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for EpAddr {
    type Err = Error;
    fn from_str(s: &str) -> Result<EpAddr> {
        let bad = |why: &str| Error::new(Errno::EINVAL, format!("address {s:?}: {why}"));
        let (fmt, hex) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let format: u32 = fmt.parse().map_err(|_| bad("format is not a number"))?;
        if hex.len() % 2 != 0 || !hex.is_ascii() {
            return Err(bad("odd or non-ASCII hex"));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(|_| bad("not hex"))?;
        Ok(EpAddr { format, bytes })
    }
}

/// A peer an endpoint can send to: an address-vector entry of a connectionless
/// endpoint ([`Ep::insert_peer`](super::Ep::insert_peer)) or the connected peer of an
/// `Ep<Msg>` ([`Ep::peer`](super::Ep::peer)). Only meaningful with the endpoint that
/// made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer(pub(crate) u64);

impl Peer {
    /// The fabric address (`fi_addr_t`) behind the handle.
    #[inline]
    pub fn fi_addr(&self) -> u64 {
        self.0
    }
}
