//! Object attributes (raw forms) (see [`super`] for the conventions).

use super::*;

abi_struct! {
    /// Raw `CqAttr` (`struct fi_cq_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawCqAttr {
        /// Queue size (entries).
        pub size: usize,
        /// Flags.
        pub flags: u64,
        /// `CqFormat` C value.
        pub format: u32,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Signaling vector.
        pub signaling_vector: i32,
        /// `CqWaitCond` C value.
        pub wait_cond: u32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
    }

    /// Raw `EqAttr` (`struct fi_eq_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawEqAttr {
        /// Queue size.
        pub size: usize,
        /// Flags.
        pub flags: u64,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Signaling vector.
        pub signaling_vector: i32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
    }

    /// Raw `CntrAttr` (`struct fi_cntr_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawCntrAttr {
        /// Counted events (`FI_CNTR_EVENTS_COMP` = 0).
        pub events: u32,
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// A wait set of the same provider, or null.
        pub wait_set: Obj,
        /// Flags.
        pub flags: u64,
    }

    /// Raw `AvAttr` (`struct fi_av_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawAvAttr {
        /// `AvType` C value.
        pub av_type: u32,
        /// Bits of a fabric address that select a receive context.
        pub rx_ctx_bits: i32,
        /// Expected number of addresses.
        pub count: usize,
        /// Endpoints per node.
        pub ep_per_node: usize,
        /// Name of a shared AV, or none.
        pub name: RawStr,
        /// Requested base address of a shared AV mapping.
        pub map_addr: usize,
        /// `AvFlags` bits.
        pub flags: u64,
    }

    /// Raw `MrAttr` (`struct fi_mr_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawMrAttr {
        /// Buffers to register.
        pub mr_iov: *const Iov,
        /// Number of buffers.
        pub iov_count: usize,
        /// Access bits (`FI_SEND`, `FI_RECV`, `FI_READ`, `FI_WRITE`, `FI_REMOTE_*`).
        pub access: u64,
        /// Offset (with `FI_MR_VIRT_ADDR` unset: base of remote offsets).
        pub offset: u64,
        /// Requested key (without `FI_MR_PROV_KEY`).
        pub requested_key: u64,
        /// Context reported in asynchronous registration events.
        pub context: usize,
        /// Authorization key, or none.
        pub auth_key: RawStr,
        /// `HmemIface` C value.
        pub iface: u32,
        /// Device identifier for the interface.
        pub device: u64,
    }

    /// Raw `WaitAttr` (`struct fi_wait_attr`).
    #[derive(Clone, Copy, Debug)]
    pub struct RawWaitAttr {
        /// `WaitObj` C value.
        pub wait_obj: u32,
        /// Flags.
        pub flags: u64,
    }
}
