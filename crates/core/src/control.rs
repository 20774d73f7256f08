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
//! neither is `FI_EINVAL`.
//!
//! # Traffic classes
//!
//! The `tclass` of `fi_tx_attr` / `fi_domain_attr` is [`TC_UNSPEC`], a DSCP value
//! ([`tc_dscp_set`]: `FI_TC_DSCP` with the value in the low byte) or a label
//! ([`TC_BEST_EFFORT`] …). [`dscp_of`] is the DSCP an IP socket carries for each: the
//! value itself, and for the labels the code points of RFC 4594's service classes
//! (best effort CS0, low latency EF, dedicated access AF41, bulk data AF11,
//! scavenger CS1, network control CS6).
//!
//! Nothing here panics.

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

/// `FI_TC_UNSPEC`: no traffic class asked for.
pub const TC_UNSPEC: u32 = 0;
/// `FI_TC_DSCP`: the low byte is a DSCP value.
pub const TC_DSCP: u32 = 0x100;
/// `FI_TC_LABEL`: the first of the labels.
pub const TC_LABEL: u32 = 0x200;
/// `FI_TC_BEST_EFFORT`.
pub const TC_BEST_EFFORT: u32 = TC_LABEL;
/// `FI_TC_LOW_LATENCY`.
pub const TC_LOW_LATENCY: u32 = TC_LABEL + 1;
/// `FI_TC_DEDICATED_ACCESS`.
pub const TC_DEDICATED_ACCESS: u32 = TC_LABEL + 2;
/// `FI_TC_BULK_DATA`.
pub const TC_BULK_DATA: u32 = TC_LABEL + 3;
/// `FI_TC_SCAVENGER`.
pub const TC_SCAVENGER: u32 = TC_LABEL + 4;
/// `FI_TC_NETWORK_CTRL`.
pub const TC_NETWORK_CTRL: u32 = TC_LABEL + 5;

/// `fi_tc_dscp_set`: the traffic class carrying DSCP value `dscp` (`FI_TC_DSCP` with
/// `dscp` in the low byte, as the C header's inline function).
pub const fn tc_dscp_set(dscp: u8) -> u32 {
    TC_DSCP | dscp as u32
}

/// `fi_tc_dscp_get`: the low byte of a traffic class with the `FI_TC_DSCP` bit (as the
/// C header's inline function); 0 for any other class.
pub const fn tc_dscp_get(tclass: u32) -> u8 {
    if tclass & TC_DSCP != 0 {
        tclass as u8
    } else {
        0
    }
}

/// The DSCP value an IP socket carries for `tclass`: `None` for [`TC_UNSPEC`] (leave the
/// socket as it is), the value of a DSCP class, a label's code point (see the
/// [module docs](self)).
///
/// # Errors
/// `FI_EINVAL` for any other value (an unknown label, a DSCP over 63, other bits).
pub fn dscp_of(tclass: u32) -> Result<Option<u8>> {
    let dscp = match tclass {
        TC_UNSPEC => return Ok(None),
        t if t & !0xff == TC_DSCP && t & 0xff <= 0x3f => (t & 0x3f) as u8,
        TC_BEST_EFFORT => 0,
        TC_LOW_LATENCY => 46,
        TC_DEDICATED_ACCESS => 34,
        TC_BULK_DATA => 10,
        TC_SCAVENGER => 8,
        TC_NETWORK_CTRL => 48,
        t => {
            return Err(Error::new(
                Errno::EINVAL,
                format!("traffic class {t:#x} is neither FI_TC_DSCP nor a known label"),
            ))
        }
    };
    Ok(Some(dscp))
}

/// The DSCP value the sockets of an endpoint opened with `info` carry: that of
/// `tx_attr.tclass`, or `domain_attr.tclass` when the former is unspecified.
///
/// # Errors
/// `FI_EINVAL` for a traffic class [`dscp_of`] does not know.
pub fn endpoint_dscp(info: &crate::attr::Info) -> Result<Option<u8>> {
    let tc = if info.tx_attr.tclass != TC_UNSPEC {
        info.tx_attr.tclass
    } else {
        info.domain_attr.tclass
    };
    dscp_of(tc)
}

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

    #[test]
    fn traffic_classes() {
        assert_eq!(tc_dscp_set(46), 0x100 | 46);
        assert_eq!(tc_dscp_get(tc_dscp_set(46)), 46);
        assert_eq!(tc_dscp_get(TC_LOW_LATENCY), 0);
        assert_eq!(tc_dscp_get(TC_UNSPEC), 0);
        assert_eq!(tc_dscp_get(TC_DSCP | 0x7f), 0x7f, "the low byte, as C");
        assert_eq!(dscp_of(TC_UNSPEC).unwrap(), None);
        assert_eq!(dscp_of(tc_dscp_set(10)).unwrap(), Some(10));
        assert_eq!(dscp_of(TC_LOW_LATENCY).unwrap(), Some(46));
        assert_eq!(dscp_of(TC_NETWORK_CTRL).unwrap(), Some(48));
        for bad in [TC_LABEL + 6, TC_DSCP | 64, 0x400, 7] {
            assert_eq!(dscp_of(bad).unwrap_err().code(), Errno::EINVAL, "{bad:#x}");
        }
    }
}
