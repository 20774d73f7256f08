//! A remote buffer (`struct fi_rma_iov`: address, length, key) as the kit's formats
//! carry it: [`RMA_IOV_LEN`] bytes, three little-endian `u64`s, declared once.
//!
//! tcp's operation headers carry them after the header (the target buffers of an RMA,
//! the sender's buffers of a same-host descriptor) and rxm's rendezvous requests after
//! the request's fixed part (the sender's buffers the receiver reads): both read and
//! write them through [`RmaIovView`] and [`RmaIov`].
//!
//! Every value is valid on the wire (the target checks address, length and key against
//! its registrations), so parsing checks the length only; nothing here panics.

use super::WireError;

/// Bytes of one remote buffer on the wire.
pub const RMA_IOV_LEN: usize = 24;

crate::wire_header! {
    /// A checked view of one remote buffer.
    pub struct RmaIovView;
    endian: little;
    len: RMA_IOV_LEN;
    /// Where each field of a remote buffer lies.
    pub mod rma_iov_field {
        /// Remote address (a virtual address or an offset, per the target's `mr_mode`).
        ADDR: u64 = 0..8 => addr, set_addr;
        /// Length in bytes.
        LEN: u64 = 8..16 => length, set_length;
        /// Memory key.
        KEY: u64 = 16..24 => key, set_key;
    }
    repr: RmaIov;
}

/// A remote buffer (`struct fi_rma_iov`) as read from or written to the wire (the C
/// struct itself, as applications pass it, is `ofi_core::abi::raw::RmaIov`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmaIov {
    /// Remote address (virtual address or offset, per the target's `mr_mode`).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Memory key.
    pub key: u64,
}

impl RmaIov {
    /// Every field of `v` (any value is valid).
    ///
    /// # Errors
    /// None: the `Result` is the one every parsed form's `parse` returns (see
    /// [`RmaIov::from_bytes`], which refuses fewer than [`RMA_IOV_LEN`] bytes).
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(v: &RmaIovView<T>) -> Result<RmaIov, WireError> {
        Ok(RmaIov {
            addr: v.addr(),
            len: v.length(),
            key: v.key(),
        })
    }

    /// Write every field into the view.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut RmaIovView<T>) {
        v.set_addr(self.addr);
        v.set_length(self.len);
        v.set_key(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three little-endian `u64`s (address, length, key), any value valid, fewer than
    /// [`RMA_IOV_LEN`] bytes refused.
    #[test]
    fn rma_iov_is_three_little_endian_words() {
        let r = RmaIov {
            addr: 1,
            len: 2 << 8,
            key: 3 << 16,
        };
        let mut want = [0u8; RMA_IOV_LEN];
        want[0] = 1;
        want[9] = 2;
        want[18] = 3;
        assert_eq!(r.bytes(), want);
        assert_eq!(RmaIov::from_bytes(&want), Ok(r));
        let any = [0xa5u8; RMA_IOV_LEN + 1];
        assert_eq!(
            RmaIov::from_bytes(&any).map(|r| r.key),
            Ok(0xa5a5_a5a5_a5a5_a5a5)
        );
        assert_eq!(
            RmaIov::from_bytes(&want[..23]),
            Err(WireError::Truncated { need: 24, have: 23 })
        );
    }
}
