//! `Info` and its attribute structures: what getinfo returns and what opens objects.
//!
//! These mirror the C library's `struct fi_info` and its `fi_tx_attr`, `fi_rx_attr`,
//! `fi_ep_attr`, `fi_domain_attr`, `fi_fabric_attr` and `fid_nic` field for field, with
//! Rust types: bit sets are [`crate::flags`] types, enums are [`crate::enums`] types,
//! strings are `Option<String>`, addresses are [`Address`].
//!
//! Hint semantics (seed fi_getinfo): a zero / `None` / `Unspec` field is a wildcard; a set
//! field is a requirement. The one exception is `mode`: the bits set are the modes the
//! application supports, and 0 means it supports none. In C a hint's sub-structure may be
//! NULL; here it is always present and a default (all-zero) sub-structure means the same.
//!
//! Handles (`handle`, `domain_attr.domain`, `fabric_attr.fabric`) are opaque `usize`
//! values (0 = none): they are copied, never dereferenced, by this module.
//!
//! Nothing here panics.

use crate::addr::Address;
use crate::enums::{AddrFormat, AvType, EpType, Progress, Protocol, ResourceMgmt, Threading};
use crate::flags::{Caps, CompOrder, Mode, MrMode, MsgOrder, OpFlags};
use crate::version::Version;

/// Transmit context attributes (`struct fi_tx_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxAttr {
    /// Capabilities of the transmit context (a subset of `Info::caps`).
    pub caps: Caps,
    /// Modes required by the transmit context.
    pub mode: Mode,
    /// Default operation flags for transmit operations.
    pub op_flags: OpFlags,
    /// Message ordering guaranteed between transmit operations.
    pub msg_order: MsgOrder,
    /// Completion ordering (C's `comp_order`; only `FI_ORDER_NONE` is accepted in hints).
    pub comp_order: CompOrder,
    /// Largest message that can be sent with `inject`.
    pub inject_size: usize,
    /// Number of transmit operations that can be outstanding.
    pub size: usize,
    /// Largest I/O vector for a send.
    pub iov_limit: usize,
    /// Largest RMA I/O vector.
    pub rma_iov_limit: usize,
    /// Traffic class (`FI_TC_*`), 0 = unspecified.
    pub tclass: u32,
}

/// Receive context attributes (`struct fi_rx_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxAttr {
    /// Capabilities of the receive context.
    pub caps: Caps,
    /// Modes required by the receive context.
    pub mode: Mode,
    /// Default operation flags for receive operations.
    pub op_flags: OpFlags,
    /// Message ordering guaranteed between received operations.
    pub msg_order: MsgOrder,
    /// Completion ordering.
    pub comp_order: CompOrder,
    /// Deprecated buffered-receive size; must be 0 in hints.
    pub total_buffered_recv: usize,
    /// Number of receive operations that can be posted.
    pub size: usize,
    /// Largest I/O vector for a receive.
    pub iov_limit: usize,
}

/// Endpoint attributes (`struct fi_ep_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpAttr {
    /// Endpoint type (`FI_EP_MSG`, `FI_EP_DGRAM`, `FI_EP_RDM`, …).
    pub ep_type: EpType,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Version of the wire protocol.
    pub protocol_version: u32,
    /// Largest message size.
    pub max_msg_size: usize,
    /// Bytes of prefix space with `FI_MSG_PREFIX`.
    pub msg_prefix_size: usize,
    /// Ordering size for read-after-write.
    pub max_order_raw_size: usize,
    /// Ordering size for write-after-read.
    pub max_order_war_size: usize,
    /// Ordering size for write-after-write.
    pub max_order_waw_size: usize,
    /// Tag bits format: set bits are tag bits, cleared bits are reserved.
    pub mem_tag_format: u64,
    /// Transmit contexts per endpoint ([`crate::enums::SHARED_CONTEXT`] = shared).
    pub tx_ctx_cnt: usize,
    /// Receive contexts per endpoint ([`crate::enums::SHARED_CONTEXT`] = shared).
    pub rx_ctx_cnt: usize,
    /// Authorization key, if any.
    pub auth_key: Option<Vec<u8>>,
}

/// Domain attributes (`struct fi_domain_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAttr {
    /// Opaque handle of an open domain (0 = none).
    pub domain: usize,
    /// Domain name (for IP providers: the interface name).
    pub name: Option<String>,
    /// Threading model.
    pub threading: Threading,
    /// Progress model for control operations.
    pub control_progress: Progress,
    /// Progress model for data operations.
    pub data_progress: Progress,
    /// Resource management (overrun protection).
    pub resource_mgmt: ResourceMgmt,
    /// Address vector type.
    pub av_type: AvType,
    /// Memory registration mode bits.
    pub mr_mode: MrMode,
    /// Size of a memory registration key in bytes.
    pub mr_key_size: usize,
    /// Bytes of remote CQ data carried with an operation.
    pub cq_data_size: usize,
    /// Number of completion queues.
    pub cq_cnt: usize,
    /// Number of endpoints.
    pub ep_cnt: usize,
    /// Number of transmit contexts.
    pub tx_ctx_cnt: usize,
    /// Number of receive contexts.
    pub rx_ctx_cnt: usize,
    /// Transmit contexts per scalable endpoint.
    pub max_ep_tx_ctx: usize,
    /// Receive contexts per scalable endpoint.
    pub max_ep_rx_ctx: usize,
    /// Shared transmit contexts per endpoint.
    pub max_ep_stx_ctx: usize,
    /// Shared receive contexts per endpoint.
    pub max_ep_srx_ctx: usize,
    /// Number of counters.
    pub cntr_cnt: usize,
    /// Largest I/O vector in one memory registration.
    pub mr_iov_limit: usize,
    /// Domain-level capabilities.
    pub caps: Caps,
    /// Domain-level modes.
    pub mode: Mode,
    /// Domain authorization key, if any.
    pub auth_key: Option<Vec<u8>>,
    /// Largest provider-specific error data in a CQ/EQ error entry.
    pub max_err_data: usize,
    /// Number of memory regions.
    pub mr_cnt: usize,
    /// Traffic class.
    pub tclass: u32,
}

/// Fabric attributes (`struct fi_fabric_attr`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricAttr {
    /// Opaque handle of an open fabric (0 = none).
    pub fabric: usize,
    /// Fabric name (for IP providers: `<network>/<prefix>`).
    pub name: Option<String>,
    /// Provider name; layered providers read `core;util`, e.g. `tcp;ofi_rxm`.
    pub prov_name: Option<String>,
    /// Provider version.
    pub prov_version: Version,
    /// API version the results are shaped for.
    pub api_version: Version,
}

/// NIC description (`struct fid_nic`: device, bus and link attributes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nic {
    /// Device name (e.g. `lo`, `eth0`).
    pub device_name: Option<String>,
    /// Device id.
    pub device_id: Option<String>,
    /// Device version.
    pub device_version: Option<String>,
    /// Vendor id.
    pub vendor_id: Option<String>,
    /// Driver name.
    pub driver: Option<String>,
    /// Firmware version.
    pub firmware: Option<String>,
    /// Link address (e.g. the MAC address as text).
    pub link_address: Option<String>,
    /// Link MTU in bytes.
    pub mtu: usize,
    /// Link speed in bits per second.
    pub speed: usize,
    /// Link state is up.
    pub link_up: bool,
    /// Network type (e.g. `Ethernet`).
    pub network_type: Option<String>,
    /// The bus the device sits on (`fi_bus_attr`).
    pub bus: Bus,
}

/// The bus a NIC sits on (`struct fi_bus_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bus {
    /// `FI_BUS_UNKNOWN`: none known (a virtual device: loopback, veth, a bridge).
    #[default]
    Unknown,
    /// `FI_BUS_PCI`, at this address.
    Pci(PciAddress),
}

/// A PCI function's address (`struct fi_pci_attr`), written as sysfs names it:
/// `DDDD:BB:DD.F` (domain, bus, device, function, in hexadecimal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u16,
    /// Bus number.
    pub bus: u8,
    /// Device number (0 to 31).
    pub device: u8,
    /// Function number (0 to 7).
    pub function: u8,
}

impl PciAddress {
    /// Parse `DDDD:BB:DD.F` (4, 2, 2 and 1 hexadecimal digits; device below 32,
    /// function below 8); `None` for anything else.
    pub fn parse(text: &str) -> Option<PciAddress> {
        let (domain, rest) = text.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |s: &str, digits: usize| {
            (s.len() == digits && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u16::from_str_radix(s, 16).ok())
                .flatten()
        };
        let small = |s: &str, digits: usize, below: u16| {
            hex(s, digits).filter(|v| *v < below).map(|v| v as u8)
        };
        Some(PciAddress {
            domain: hex(domain, 4)?,
            bus: small(bus, 2, 256)?,
            device: small(device, 2, 32)?,
            function: small(function, 1, 8)?,
        })
    }
}

impl std::fmt::Display for PciAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// One fabric service that can reach a peer (`struct fi_info`): what getinfo returns,
/// and what opens a fabric, domain and endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// Capabilities.
    pub caps: Caps,
    /// Modes: in hints, the modes the application supports; in results, the modes the
    /// application must honour.
    pub mode: Mode,
    /// Format of `src_addr`, `dest_addr` and every address the objects take.
    pub addr_format: AddrFormat,
    /// Source (local) address.
    pub src_addr: Option<Address>,
    /// Destination (peer) address.
    pub dest_addr: Option<Address>,
    /// Opaque handle (a passive endpoint or a connection request), 0 = none.
    pub handle: usize,
    /// Transmit attributes.
    pub tx_attr: TxAttr,
    /// Receive attributes.
    pub rx_attr: RxAttr,
    /// Endpoint attributes.
    pub ep_attr: EpAttr,
    /// Domain attributes.
    pub domain_attr: DomainAttr,
    /// Fabric attributes.
    pub fabric_attr: FabricAttr,
    /// NIC details, where the provider has them.
    pub nic: Option<Nic>,
}

impl Info {
    /// An all-zero info (the C library's `fi_allocinfo`): every field a wildcard,
    /// except `mode`, where 0 means "supports no modes".
    pub fn new() -> Info {
        Info::default()
    }

    /// Hints in the style of the `fi_info` tool's defaults: every mode supported and
    /// every `mr_mode` bit except the old `BASIC` / `SCALABLE` values accepted.
    pub fn hints() -> Info {
        let mut i = Info::new();
        i.mode = Mode::all();
        i.domain_attr.mode = Mode::all();
        i.domain_attr.mr_mode = MrMode::all() - (MrMode::BASIC | MrMode::SCALABLE);
        i
    }

    /// The provider name (`fabric_attr.prov_name`), or `""`.
    pub fn prov_name(&self) -> &str {
        self.fabric_attr.prov_name.as_deref().unwrap_or("")
    }

    /// The endpoint type.
    pub fn ep_type(&self) -> EpType {
        self.ep_attr.ep_type
    }

    /// Builder-style: set the capabilities.
    pub fn with_caps(mut self, caps: Caps) -> Info {
        self.caps = caps;
        self
    }

    /// Builder-style: set the endpoint type.
    pub fn with_ep_type(mut self, ep_type: EpType) -> Info {
        self.ep_attr.ep_type = ep_type;
        self
    }

    /// Builder-style: set the provider name (`fabric_attr.prov_name`).
    pub fn with_provider(mut self, name: &str) -> Info {
        self.fabric_attr.prov_name = Some(name.to_string());
        self
    }

    /// Builder-style: set the address format.
    pub fn with_addr_format(mut self, fmt: AddrFormat) -> Info {
        self.addr_format = fmt;
        self
    }
}

/// A closed enumeration from its C value (`from`: the type's `from_raw`): a value the
/// type does not name is `FI_EINVAL`, naming the field (`what`, e.g.
/// `domain_attr.threading`) and the value.
pub fn closed_enum<T>(raw: u32, from: fn(u32) -> Option<T>, what: &str) -> crate::Result<T> {
    from(raw).ok_or_else(|| {
        crate::Error::new(crate::Errno::EINVAL, format!("{what}: invalid value {raw}"))
    })
}

/// A struct literal between an attribute structure and one of its C-side mirrors (the
/// ABI's raw forms, the C ABI's `fi_*_attr`), with the fields both sides name alike
/// listed here once for every crate that converts:
///
/// - `__attr_literal!(TxAttr to_bits, RawTxAttr from t { struct_size: … })`: the bit-set
///   fields as `bits()`, then the plain fields copied, then the fields given;
/// - `__attr_literal!(TxAttr from_bits, TxAttr from raw {})`: the bit-set fields from
///   their bits (unknown bits kept), the plain fields copied;
/// - `TxAttr` and `RxAttr` take `to_bits`/`from_bits`; `EpAttr` and `DomainAttr` (plain
///   fields only; their other fields given by the caller) take neither;
/// - `__attr_literal!(DomainAttr checked, DomainAttr from d { domain: …, name: …,
///   mr_mode: …, auth_key: … })` (likewise `EpAttr checked`, given `auth_key`): the Rust
///   attribute from a C-side mirror, the plain fields copied, the enumerations from
///   their C values through [`closed_enum`] (an unknown value returns `FI_EINVAL`
///   naming the field: use it where `?` may return a [`crate::Error`]) and the bit sets
///   from their bits; the fields whose C form differs by side are given.
///
/// `from_bits` names the bit-set types unqualified (`Caps`, `Mode`, `OpFlags`,
/// `MsgOrder`, `CompOrder`): they must be in scope where it expands.
#[doc(hidden)]
#[macro_export]
macro_rules! __attr_literal {
    (TxAttr $dir:ident, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(@lit $dir, $T, $src,
            [caps: Caps, mode: Mode, op_flags: OpFlags, msg_order: MsgOrder,
             comp_order: CompOrder]
            [inject_size, size, iov_limit, rma_iov_limit, tclass]
            { $($rest)* })
    };
    (RxAttr $dir:ident, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(@lit $dir, $T, $src,
            [caps: Caps, mode: Mode, op_flags: OpFlags, msg_order: MsgOrder,
             comp_order: CompOrder]
            [total_buffered_recv, size, iov_limit]
            { $($rest)* })
    };
    (EpAttr, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(@lit plain, $T, $src, []
            [protocol_version, max_msg_size, msg_prefix_size, max_order_raw_size,
             max_order_war_size, max_order_waw_size, mem_tag_format, tx_ctx_cnt, rx_ctx_cnt]
            { $($rest)* })
    };
    (DomainAttr, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(@lit plain, $T, $src, []
            [mr_key_size, cq_data_size, cq_cnt, ep_cnt, tx_ctx_cnt, rx_ctx_cnt, max_ep_tx_ctx,
             max_ep_rx_ctx, max_ep_stx_ctx, max_ep_srx_ctx, cntr_cnt, mr_iov_limit,
             max_err_data, mr_cnt, tclass]
            { $($rest)* })
    };
    (EpAttr checked, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(EpAttr, $T from $src {
            ep_type: $crate::attr::closed_enum(
                $src.ep_type, $crate::enums::EpType::from_raw, "ep_attr.type")?,
            protocol: $crate::enums::Protocol::from_raw($src.protocol),
            $($rest)*
        })
    };
    (DomainAttr checked, $T:ident from $src:ident { $($rest:tt)* }) => {
        $crate::__attr_literal!(DomainAttr, $T from $src {
            threading: $crate::attr::closed_enum(
                $src.threading, $crate::enums::Threading::from_raw, "domain_attr.threading")?,
            control_progress: $crate::attr::closed_enum($src.control_progress,
                $crate::enums::Progress::from_raw, "domain_attr.control_progress")?,
            data_progress: $crate::attr::closed_enum(
                $src.data_progress, $crate::enums::Progress::from_raw, "domain_attr.data_progress")?,
            resource_mgmt: $crate::attr::closed_enum($src.resource_mgmt,
                $crate::enums::ResourceMgmt::from_raw, "domain_attr.resource_mgmt")?,
            av_type: $crate::attr::closed_enum(
                $src.av_type, $crate::enums::AvType::from_raw, "domain_attr.av_type")?,
            caps: $crate::flags::Caps::from_bits_retain($src.caps),
            mode: $crate::flags::Mode::from_bits_retain($src.mode),
            $($rest)*
        })
    };
    (@lit to_bits, $T:ident, $src:ident, [$($b:ident: $B:path),*] [$($p:ident),*]
        { $($rest:tt)* }) => {
        $T { $($b: $src.$b.bits(),)* $($p: $src.$p,)* $($rest)* }
    };
    (@lit from_bits, $T:ident, $src:ident, [$($b:ident: $B:path),*] [$($p:ident),*]
        { $($rest:tt)* }) => {
        $T { $($b: <$B>::from_bits_retain($src.$b),)* $($p: $src.$p,)* $($rest)* }
    };
    (@lit plain, $T:ident, $src:ident, [] [$($p:ident),*] { $($rest:tt)* }) => {
        $T { $($p: $src.$p,)* $($rest)* }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_parse_as_sysfs_writes_them() {
        let a = PciAddress::parse("0000:00:03.0").expect("an address");
        assert_eq!(
            a,
            PciAddress {
                domain: 0,
                bus: 0,
                device: 3,
                function: 0
            }
        );
        assert_eq!(a.to_string(), "0000:00:03.0");
        let b = PciAddress::parse("10de:af:1f.7").expect("an address");
        assert_eq!(
            (b.domain, b.bus, b.device, b.function),
            (0x10de, 0xaf, 0x1f, 7)
        );
        for bad in [
            "",
            "virtio2",
            "0000:00:03",
            "0000:00:20.0",
            "0000:00:03.8",
            "000:00:03.0",
            "0000:0g:03.0",
            "0000:00:03.0.1",
            "+000:00:03.0",
            "pci0000:00",
        ] {
            assert_eq!(PciAddress::parse(bad), None, "{bad:?}");
        }
    }
}
