//! Address vectors (`fi_av`): attributes and the public [`AddressVector`].
//!
//! An AV maps peer addresses ([`Address`]) to compact fabric addresses (`u64`,
//! `fi_addr_t`) that data calls take. Inserts return one fabric address per input,
//! `FI_ADDR_NOTAVAIL` ([`crate::enums::ADDR_NOTAVAIL`]) for an address that could not be
//! inserted. Nothing here panics.

use crate::abi::object::AsFid;
use crate::abi::raw::{RawAddr, RawAvAttr, RawStr};
use crate::abi::tables::{call_slot, AvTable};
use crate::addr::Address;
use crate::enums::AvType;
use crate::eq::EventQueue;
use crate::error::{Errno, Error, Result};
use crate::flags::AvFlags;

/// Address vector attributes (`struct fi_av_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AvAttr {
    /// Map or table (`Unspec`: the provider's choice).
    pub av_type: AvType,
    /// Bits of a fabric address that select a receive context (scalable endpoints).
    pub rx_ctx_bits: i32,
    /// Expected number of addresses.
    pub count: usize,
    /// Endpoints per node.
    pub ep_per_node: usize,
    /// Name of a shared AV.
    pub name: Option<String>,
    /// Requested base address of a shared AV mapping.
    pub map_addr: usize,
    /// Flags.
    pub flags: AvFlags,
}

impl AvAttr {
    /// The raw form (its `name` points into `self`).
    pub fn to_raw(&self) -> RawAvAttr {
        RawAvAttr {
            av_type: self.av_type.to_raw(),
            rx_ctx_bits: self.rx_ctx_bits,
            count: self.count,
            ep_per_node: self.ep_per_node,
            name: RawStr::from_opt(self.name.as_deref()),
            map_addr: self.map_addr,
            flags: self.flags.bits(),
        }
    }

    /// From the raw form (unknown values and a non-UTF-8 name are `FI_EINVAL`).
    ///
    /// # Safety
    /// `r.name` must be valid as documented for [`RawStr`].
    pub unsafe fn from_raw(r: &RawAvAttr) -> Result<AvAttr> {
        Ok(AvAttr {
            av_type: AvType::try_from(r.av_type)?,
            rx_ctx_bits: r.rx_ctx_bits,
            count: r.count,
            ep_per_node: r.ep_per_node,
            // SAFETY: forwarded from this function's contract.
            name: unsafe { r.name.to_string_opt("av_attr.name") }?,
            map_addr: r.map_addr,
            flags: AvFlags::from_bits_retain(r.flags),
        })
    }
}

crate::abi::ctl_ops::host_object! {
    /// An open address vector.
    AddressVector(AvTable, "an address vector");
}

/// The check every AV's insert makes before it writes results (`fi_av_insert`,
/// `fi_av_insertsym`): `fi_addr` needs a slot for each of the `count` addresses it will
/// report, else `FI_EINVAL`. `call` names the operation (and provider) in the message.
pub fn check_fi_addr_slots(call: &str, fi_addr: &[u64], count: usize) -> Result<()> {
    let slots = fi_addr.len();
    if slots < count {
        return Err(Error::new(
            Errno::EINVAL,
            format!("{call}: {slots} fabric address slots for {count} addresses"),
        ));
    }
    Ok(())
}

pub(crate) fn av_status(rc: i32) -> Result<usize> {
    if rc >= 0 {
        Ok(rc as usize)
    } else {
        Err(Error::from_status(rc as isize))
    }
}

impl AddressVector {
    /// `fi_av_insert` with flags and context, into `fi_addr` (same length as `addrs`);
    /// returns the number inserted.
    pub fn insert_into(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        check_fi_addr_slots("av insert", fi_addr, addrs.len())?;
        let bytes: Vec<Vec<u8>> = addrs.iter().map(Address::to_bytes).collect();
        let raw: Vec<RawAddr> = addrs
            .iter()
            .zip(&bytes)
            .map(|(a, b)| RawAddr::new(a.format(), b))
            .collect();
        // SAFETY: `raw` (and the bytes it points to) and `fi_addr` live across the call.
        av_status(unsafe {
            call_slot!(
                self.t(),
                AvTable.insert(
                    self.obj,
                    raw.as_ptr(),
                    raw.len(),
                    fi_addr.as_mut_ptr(),
                    flags,
                    context
                )
            )
        })
    }

    /// `fi_av_bind` an event queue (asynchronous inserts).
    pub fn bind_eq(&self, eq: &EventQueue, flags: u64) -> Result<()> {
        // SAFETY: our own object; `raw` names an open EQ of our family.
        self.node.bind(eq.as_fid(), "AV bind", |raw, e| unsafe {
            call_slot!(self.t(), AvTable.bind(self.obj, raw, flags, e))
        })
    }

    // ---- one method per entry of the list (`for_each_av_op!`) ----
    crate::for_each_av_op!(crate::abi::ctl_ops::ctl_wrappers);
}
