//! ofi-prov-verbs: the `verbs` provider — `FI_EP_MSG` endpoints over reliable-connected
//! (RC) queue pairs and `FI_EP_DGRAM` endpoints over unreliable-datagram (UD) queue
//! pairs of an RDMA device, through the device layer `ofi-rdma` (rdma-core
//! opened at run time, or the software device `soft0` with `FI_VERBS_DEVICE=soft`).
//!
//! # What it offers
//!
//! - one getinfo result per device (domain name = device name, fabric
//!   `IB-0xfe80000000000000`), endpoint type `FI_EP_MSG`, address format
//!   `FI_SOCKADDR_IN`; without rdma-core or without a device the provider does not
//!   initialise, and its error is the one-line reason ("libibverbs.so.1 not found",
//!   "no RDMA device");
//! - capabilities `FI_MSG | FI_RMA | FI_ATOMIC | FI_REMOTE_CQ_DATA` with the direction
//!   bits (no tagged messages: verbs RC has no tags), with mode `FI_RX_CQ_DATA`; a second
//!   info per device without `FI_REMOTE_CQ_DATA` needs no mode;
//! - connection management through the device layer's connection manager
//!   (`ofi_rdma::CmChannel`, librdmacm's on rdma-core devices, an equivalent exchange
//!   on the software device; see [`cm`]): passive endpoints, `fi_connect` with up to 56
//!   bytes of data (55 on rdma-core), `FI_CONNREQ`, `fi_accept` (up to 196 bytes, 195)
//!   / `fi_reject`, `FI_CONNECTED`, `FI_SHUTDOWN`, `FI_ECONNREFUSED`, `FI_ETIMEDOUT`,
//!   `FI_EHOSTUNREACH` error events;
//! - messages as RC sends (`fi_inject` as an inline send up to the inline size); RMA
//!   read / write / write with remote CQ data (write with immediate: 4 bytes of CQ
//!   data, consuming a posted receive at the target, hence mode `FI_RX_CQ_DATA`); the
//!   8-byte atomics verbs has (`FI_SUM` as fetch-and-add, `FI_CSWAP` as compare-and-swap,
//!   on `FI_UINT64` / `FI_INT64`);
//! - memory registration with `FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
//!   FI_MR_PROV_KEY` (the key is the region's rkey); a local buffer outside every
//!   registered region is registered for the duration of its operation;
//! - shared receive contexts (`fi_srx_context`) over a shared receive queue for
//!   `FI_EP_MSG` endpoints (their queue pairs are created at `fi_enable`, on it);
//! - a third result per device, `FI_EP_DGRAM` over UD (`FI_MSG`, datagrams up to the
//!   MTU, injected up to the MTU, `FI_ADDR_IB_UD` names, kit's AV, `FI_SOURCE` /
//!   `FI_SOURCE_ERR` from each datagram's GRH, no message prefix: see [`ep::ud`]), under
//!   `ofi_rxd` too;
//! - completion queues are kit's, filled by the endpoint's progress from the device's
//!   completion queue; waiting sleeps on the device's completion channel fd.
//!
//! Work completion statuses become `FI_*` errors by the table in [`cq`].
//!
//! # Parameters (`FI_VERBS_<NAME>`)
//!
//! `iface` (accepted; the software device has no interfaces), `device_name` (only this
//! device), `inline_size` (default 64), `tx_size` / `rx_size` (default 384), and, read by
//! the device layer, `FI_VERBS_DEVICE=soft`.
//!
//! # Module map
//!
//! [`fabric`] fabric; [`domain`] domain (device context, protection domain, region
//! table); [`mr`] memory regions; [`cm`] connection management and the passive endpoint;
//! [`ep`] the active endpoint; [`cq`] work completions → CQ entries.
//!
//! # Panics
//!
//! Nothing panics on application or peer input.

pub mod cm;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod fabric;
pub mod mr;

use ofi_core::attr::{DomainAttr, EpAttr, Info, RxAttr, TxAttr};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest};
use ofi_core::provider::Host;
use ofi_core::{
    AddrFormat, Caps, EpType, Errno, Error, Mode, MrMode, MsgOrder, OpFlags, Protocol, Result,
    Version,
};
use ofi_kit::{info, param::Params};
use ofi_rdma::{device_list, DeviceKind};

pub use domain::Domain;
pub use ep::Endpoint;
pub use fabric::Fabric;

/// The provider's name.
pub const NAME: &str = "verbs";
/// The fabric name every device is listed under (the default GID subnet prefix).
pub const FABRIC_NAME: &str = "IB-0xfe80000000000000";
/// Scatter/gather entries per operation.
pub const IOV_LIMIT: usize = 4;

/// What the parameters resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Which implementation provides the devices.
    pub kind: DeviceKind,
    /// The devices offered (names).
    pub devices: Vec<String>,
    /// Largest inline send.
    pub inline_size: usize,
    /// Send queue depth.
    pub tx_size: usize,
    /// Receive queue depth.
    pub rx_size: usize,
    /// `FI_VERBS_IFACE`, as given.
    pub iface: Option<String>,
    /// `FI_VERBS_DEVICE_NAME`, as given: the only device offered.
    pub device_name: Option<String>,
}

impl Default for Settings {
    /// The parameters' defaults; rdma-core's devices, none found yet.
    fn default() -> Settings {
        Settings {
            kind: DeviceKind::RdmaCore,
            devices: Vec::new(),
            inline_size: 64,
            tx_size: 384,
            rx_size: 384,
            iface: None,
            device_name: None,
        }
    }
}

impl Settings {
    /// Reads the parameters (`fi_info -e` lists them in this order) and checks them.
    fn from_host(host: &Host) -> Result<Settings> {
        let p = Params::new(host, NAME);
        let mut s = ofi_kit::read_params!(p, Settings {
            iface: "iface", "Network interface to use";
            device_name: "device_name",
                "Only this RDMA device (e.g. mlx5_0; soft0 for the software device)";
            inline_size: "inline_size", "Largest send carried inline in the work request",
                0..=ep::INLINE_MAX;
            tx_size: "tx_size", "Send queue depth", 1..=16 << 10;
            rx_size: "rx_size", "Receive queue depth", 1..=16 << 10;
        })?;
        s.kind = DeviceKind::from_env();
        s.devices = device_list(s.kind)
            .map_err(|e| Error::new(Errno::ENODEV, e.message().to_string()))?
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        if let Some(want) = &s.device_name {
            s.devices.retain(|d| d == want);
            if s.devices.is_empty() {
                return Err(Error::new(
                    Errno::ENODEV,
                    format!(
                        "FI_VERBS_DEVICE_NAME={:?}: no such RDMA device",
                        ofi_kit::diag::shorten(want, 64)
                    ),
                ));
            }
        }
        if s.devices.is_empty() {
            return Err(Error::new(Errno::ENODEV, "no RDMA device"));
        }
        Ok(s)
    }
}

impl VerbsProvider {
    /// The info of `device`; with `cq_data`, remote CQ data and the `FI_RX_CQ_DATA`
    /// mode it needs (a write with immediate consumes a posted receive).
    fn template(&self, device: &str, cq_data: bool) -> Info {
        let s = &self.settings;
        let mut caps = Caps::MSG
            | Caps::REMOTE_CQ_DATA
            | Caps::SEND
            | Caps::RECV
            | ofi_kit::info::RMA_ATOMIC_CAPS;
        let mode = if cq_data {
            Mode::RX_CQ_DATA
        } else {
            caps -= Caps::REMOTE_CQ_DATA;
            Mode::empty()
        };
        let order = MsgOrder::SAS | MsgOrder::RAW | MsgOrder::WAW | MsgOrder::SAW | MsgOrder::WAS;
        Info {
            caps,
            mode,
            addr_format: AddrFormat::SOCKADDR_IN,
            tx_attr: TxAttr {
                caps: ofi_kit::info::tx_caps(caps),
                op_flags: OpFlags::COMPLETION,
                msg_order: order,
                inject_size: s.inline_size,
                size: s.tx_size,
                iov_limit: IOV_LIMIT,
                rma_iov_limit: 1,
                ..TxAttr::default()
            },
            rx_attr: RxAttr {
                mode,
                ..info::rx_attr(caps, OpFlags::COMPLETION, order, s.rx_size, IOV_LIMIT)
            },
            ep_attr: EpAttr {
                max_order_raw_size: 1 << 30,
                max_order_waw_size: 1 << 30,
                mem_tag_format: 0,
                ..info::ep_attr(EpType::Msg, Protocol::RDMA_CM_IB_RC, 1, 1 << 30)
            },
            // The kit's domain, with the device's limits and verbs' MR rules.
            domain_attr: DomainAttr {
                mr_mode: MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY,
                mr_key_size: 4,
                cq_data_size: 4,
                cq_cnt: 1024,
                ep_cnt: 4096,
                tx_ctx_cnt: 4096,
                rx_ctx_cnt: 4096,
                max_ep_srx_ctx: 1,
                cntr_cnt: 1024,
                mr_iov_limit: 1,
                max_err_data: ofi_rdma::cm::ACCEPT_PRIVATE_MAX,
                ..info::domain_attr(device)
            },
            fabric_attr: info::fabric_attr(FABRIC_NAME),
            ..Info::default()
        }
    }
}

impl VerbsProvider {
    /// The `FI_EP_DGRAM` info of `device`: messages over a UD queue pair, datagrams up
    /// to the port's MTU (4096 on the software device; a device with a smaller MTU
    /// refuses longer sends with `FI_EMSGSIZE`), `FI_ADDR_IB_UD` names, no message
    /// prefix (the provider keeps the GRH out of the application's buffers); the
    /// sender of each datagram (`FI_SOURCE`, `FI_SOURCE_ERR`) from its GRH, queue pair
    /// and LID.
    fn dgram_template(&self, device: &str) -> Info {
        let mut i = self.template(device, false);
        let caps = Caps::MSG | Caps::SEND | Caps::RECV | Caps::SOURCE | Caps::SOURCE_ERR;
        i.caps = caps;
        i.mode = Mode::empty();
        i.addr_format = AddrFormat::IB_UD;
        i.tx_attr.caps = Caps::MSG | Caps::SEND;
        i.tx_attr.msg_order = MsgOrder::empty();
        i.tx_attr.rma_iov_limit = 0;
        // Injected datagrams over the inline size are copied to bounce buffers.
        i.tx_attr.inject_size = UD_MTU;
        i.rx_attr.caps = Caps::MSG | Caps::RECV | Caps::SOURCE | Caps::SOURCE_ERR;
        i.rx_attr.mode = Mode::empty();
        i.rx_attr.msg_order = MsgOrder::empty();
        i.ep_attr.ep_type = EpType::Dgram;
        i.ep_attr.protocol = Protocol::IB_UD;
        i.ep_attr.max_msg_size = UD_MTU;
        i.ep_attr.max_order_raw_size = 0;
        i.ep_attr.max_order_waw_size = 0;
        i.domain_attr.cq_data_size = 0;
        i.domain_attr.max_ep_srx_ctx = 0;
        i
    }
}

/// The largest datagram offered (the software device's MTU, the largest InfiniBand
/// MTU).
pub const UD_MTU: usize = 4096;

ofi_kit::core_provider! {
    /// The `verbs` provider.
    pub struct VerbsProvider(Settings) {
        NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
    }

    fn info_templates(&self) -> Vec<Info> {
        self.settings
            .devices
            .iter()
            .flat_map(|d| {
                [
                    self.template(d, true),
                    self.template(d, false),
                    self.dgram_template(d),
                ]
            })
            .collect()
    }

    fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        ofi_kit::info::getinfo_preferring_manual(self, req, &getinfo::IpResolver)
    }
}

#[cfg(feature = "plugin")]
ofi_core::export_provider!(VerbsProvider);
