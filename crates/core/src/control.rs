//! The `fi_control` commands of `<rdma/fabric.h>`, with their C values, and what the
//! endpoint commands take.
//!
//! | command | object | argument |
//! | --- | --- | --- |
//! | [`GETOPSFLAG`] | endpoint | `uint64_t *`: in, `FI_TRANSMIT` or `FI_RECV` (not both); out, that side's default operation flags |
//! | [`SETOPSFLAG`] | endpoint | `uint64_t *`: `FI_TRANSMIT` or `FI_RECV` (not both) with the new default flags OR'ed in |
//! | [`ALIAS`] | endpoint | `struct fi_alias *` |
//! | [`GETWAIT`] | CQ, counter, EQ, wait set | `int *` (the wait fd) |
//! | [`ENABLE`] | endpoint, MR | none |
//! | [`BACKLOG`] | passive endpoint | `int *`: the listen backlog |
//!
//! Which side an [`GETOPSFLAG`] / [`SETOPSFLAG`] argument names is [`ops_side`]: both or
//! neither is `FI_EINVAL`. Nothing here panics.

use crate::{Errno, Error, OpFlags, Result};

/// `FI_GETOPSFLAG`: read an endpoint's default operation flags of one side.
pub const GETOPSFLAG: i32 = 2;
/// `FI_SETOPSFLAG`: set an endpoint's default operation flags of one side.
pub const SETOPSFLAG: i32 = 3;
/// `FI_ALIAS`: make an endpoint alias (what `fi_ep_alias` sends).
pub const ALIAS: i32 = 4;
/// `FI_GETWAIT`: the wait object of a queue, counter or wait set.
pub const GETWAIT: i32 = 5;
/// `FI_ENABLE`: enable an endpoint or memory region.
pub const ENABLE: i32 = 6;
/// `FI_BACKLOG`: a passive endpoint's connection request backlog.
pub const BACKLOG: i32 = 7;

/// The side an operation-flags argument names and the flags without the side bit:
/// `(true, flags)` for `FI_TRANSMIT`, `(false, flags)` for `FI_RECV`.
///
/// # Errors
/// `FI_EINVAL` when `arg` has both `FI_TRANSMIT` and `FI_RECV`, or neither.
pub fn ops_side(arg: u64) -> Result<(bool, OpFlags)> {
    let flags = OpFlags::from_bits_retain(arg);
    let tx = flags.contains(OpFlags::TRANSMIT);
    let rx = flags.contains(OpFlags::RECV);
    match (tx, rx) {
        (true, false) => Ok((true, flags - OpFlags::TRANSMIT)),
        (false, true) => Ok((false, flags - OpFlags::RECV)),
        _ => Err(Error::new(
            Errno::EINVAL,
            format!(
                "operation flags {flags} must name FI_TRANSMIT or FI_RECV, not {}",
                if tx { "both" } else { "neither" }
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_is_one_of_two() {
        let (tx, f) = ops_side((OpFlags::TRANSMIT | OpFlags::COMPLETION).bits()).unwrap();
        assert!(tx);
        assert_eq!(f, OpFlags::COMPLETION);
        let (tx, f) = ops_side(OpFlags::RECV.bits()).unwrap();
        assert!(!tx);
        assert!(f.is_empty());
        for bad in [0, (OpFlags::TRANSMIT | OpFlags::RECV).bits()] {
            assert_eq!(ops_side(bad).unwrap_err().code(), Errno::EINVAL);
        }
    }
}
