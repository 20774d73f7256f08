//! Address vectors (`fi_av`): attributes and the public [`AddressVector`].
//!
//! An AV maps peer addresses ([`Address`]) to compact fabric addresses (`u64`,
//! `fi_addr_t`) that data calls take. Inserts return one fabric address per input,
//! `FI_ADDR_NOTAVAIL` ([`crate::enums::ADDR_NOTAVAIL`]) for an address that could not be
//! inserted. Nothing here panics.

use std::sync::Arc;

use crate::abi::object::{AsFid, FidRef, Node};
use crate::abi::raw::{Obj, RawAddr, RawAvAttr, RawStr};
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

/// An open address vector.
pub struct AddressVector {
    pub(crate) obj: Obj,
    ops: *const AvTable,
    node: Arc<Node>,
}

// SAFETY: the object and table are required by the interface to be usable from any
// thread; the node is thread-safe.
unsafe impl Send for AddressVector {}
// SAFETY: see `Send`.
unsafe impl Sync for AddressVector {}

impl std::fmt::Debug for AddressVector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressVector")
            .field("provider", &self.node.prov())
            .field("closed", &self.node.is_closed())
            .finish()
    }
}

impl AsFid for AddressVector {
    fn as_fid(&self) -> FidRef<'_> {
        FidRef::new(&self.node, self.obj)
    }
}

pub(crate) fn av_status(rc: i32) -> Result<usize> {
    if rc >= 0 {
        Ok(rc as usize)
    } else {
        Err(Error::from_status(rc as isize))
    }
}

crate::abi::ctl_ops::detach_one_table!(AddressVector: AvTable);

impl AddressVector {
    /// Wrap a provider's AV.
    ///
    /// # Safety
    /// `obj`/`ops` must be an AV and its table from the provider of `node`'s family,
    /// owned from now on by `node`.
    pub(crate) unsafe fn from_raw(obj: Obj, ops: *const AvTable, node: Arc<Node>) -> AddressVector {
        AddressVector { obj, ops, node }
    }

    #[inline(always)]
    pub(crate) fn t(&self) -> &AvTable {
        // SAFETY: the provider's table or the static CLOSED table.
        unsafe { &*self.ops }
    }

    /// `fi_av_insert` with flags and context, into `fi_addr` (same length as `addrs`);
    /// returns the number inserted.
    pub fn insert_into(
        &self,
        addrs: &[Address],
        fi_addr: &mut [u64],
        flags: u64,
        context: usize,
    ) -> Result<usize> {
        if fi_addr.len() < addrs.len() {
            return Err(Error::new(
                Errno::EINVAL,
                "av insert: fewer fabric address slots than addresses",
            ));
        }
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
        let target = eq.as_fid();
        self.node.check_peer(target.node(), "AV bind")?;
        let raw = target.raw();
        // SAFETY: our own object; `raw` names an open EQ of our family.
        crate::abi::object::ctl(|e| unsafe {
            call_slot!(self.t(), AvTable.bind(self.obj, raw, flags, e))
        })?;
        self.node.add_binding(target.node());
        Ok(())
    }

    // ---- one method per entry of the list (`for_each_av_op!`) ----
    crate::for_each_av_op!(crate::abi::ctl_ops::ctl_wrappers);
}
