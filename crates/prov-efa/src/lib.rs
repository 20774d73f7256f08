//! ofi-prov-efa: the `efa` provider — `FI_EP_RDM` over SRD queue pairs (AWS's Elastic
//! Fabric Adapter), through the device layer `ofi-rdma`.
//!
//! EFA's SRD ("scalable reliable datagram") queue pairs deliver datagrams reliably but
//! in any order, each at most one MTU, and a receiver without a posted buffer answers
//! "receiver not ready" (RNR). The provider builds `FI_EP_RDM` on that with its own
//! protocol, [`proto`]: a sans-IO state machine (handshake, eager / medium / long
//! messages, order rebuilt per peer, RNR back-off, lost peers), driven by the endpoint
//! ([`ep`]) over one SRD queue pair.
//!
//! # Devices
//!
//! `FI_EFA_DEVICE=soft` selects the RDMA layer's software device (`soft0`), whose SRD
//! queue pairs behave as EFA's do (see `ofi_rdma::soft`); otherwise the provider needs
//! libefa ([`libefa`]: `libefa.so.1`, opened at run time) and an EFA device, and without
//! them it does not initialise: its error is the one-line reason
//! ("libefa.so.1 not found", "no EFA device"), shown by `fi_info -l` and `--explain`.
//!
//! # What it offers
//!
//! One `FI_EP_RDM` info per device: `FI_MSG`, `FI_TAGGED`, `FI_SOURCE`,
//! `FI_DIRECTED_RECV`, `FI_MULTI_RECV`, `FI_REMOTE_CQ_DATA`, `FI_RMA` (emulated by the
//! protocol: writes with remote CQ data, reads), `FI_ATOMIC` (emulated: one
//! `FI_UINT64` element of the bitwise, min/max, sum, read/write and compare-and-swap
//! operations), send-after-send order, delivery
//! complete; addresses `FI_ADDR_EFA` ([`av`]); kit's CQs, counters, EQs and AV; memory
//! registration in kit's table (no mode bits needed: the protocol copies).
//!
//! # Parameters (`FI_EFA_<NAME>`, see [`Settings`])
//!
//! # Module map
//!
//! [`fabric`] fabric; [`domain`] domain (device context, protection domain, AV, MR);
//! [`av`] the address format; [`cq`] work completion statuses; [`ep`] the RDM endpoint;
//! [`libefa`] the library on hardware; [`proto`] the protocol.
//!
//! # Panics
//!
//! Nothing panics on application or peer input.

pub mod av;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod fabric;
pub mod libefa;
pub mod proto;

use ofi_core::attr::Info;
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest};
use ofi_core::provider::Host;
use ofi_core::{
    AddrFormat, AvType, Caps, EpType, Errno, Error, MsgOrder, OpFlags, Progress, Protocol,
    ResourceMgmt, Result, Threading, Version,
};
use ofi_kit::{info, param::Params};
use ofi_rdma::DeviceKind;

pub use domain::Domain;
pub use ep::Endpoint;
pub use fabric::Fabric;

/// The provider's name.
pub const NAME: &str = "efa";
/// The fabric name every device is listed under.
pub const FABRIC_NAME: &str = "efa";
/// Largest I/O vector of one operation.
pub const IOV_LIMIT: usize = ofi_kit::iov::IOV_LIMIT;
/// Largest message offered.
pub const MAX_MSG_SIZE: usize = 64 << 20;

/// What the parameters resolved to at init.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `FI_EFA_DEVICE` (`soft`: the software device; else libefa's devices).
    pub kind: DeviceKind,
    /// The devices offered (names).
    pub devices: Vec<String>,
    /// `FI_EFA_TX_SIZE` (default 1024): transmit operations outstanding per endpoint.
    pub tx_size: usize,
    /// `FI_EFA_RX_SIZE` (default 1024): receives posted per endpoint.
    pub rx_size: usize,
    /// `FI_EFA_RNR_RETRY` (default 3): times the device sends a refused packet again
    /// before it reports RNR to the protocol (7: for ever).
    pub rnr_retry: u8,
    /// `FI_EFA_RECVWIN_SIZE` (default 16384): message ids a receiver holds ahead; at
    /// least `tx_bufs` (a receiver must hold every datagram a peer has in flight behind
    /// one its device refused: the device took them already, so the receiver may not
    /// refuse them in turn).
    pub recvwin_size: u32,
    /// `FI_EFA_TX_MIN_CREDITS` (default 32): packets per clear-to-send grant.
    pub tx_min_credits: usize,
    /// `FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE` (default 65536).
    pub max_medium_msg_size: usize,
    /// `FI_EFA_RNR_BACKOFF_INITIAL_WAIT_TIME` (µs, default 0: random).
    pub rnr_backoff_initial_wait_time: u64,
    /// `FI_EFA_RNR_BACKOFF_WAIT_TIME_CAP` (µs, default 1000000).
    pub rnr_backoff_wait_time_cap: u64,
    /// `FI_EFA_PEER_TIMEOUT` (ms, default 10000; this provider's): a peer with packets
    /// in flight silent this long is lost.
    pub peer_timeout_ms: u64,
    /// `FI_EFA_RX_BUFS` (default 256; this provider's): datagram buffers posted on the
    /// queue pair.
    pub rx_bufs: usize,
    /// `FI_EFA_TX_BUFS` (default 256; this provider's): datagrams in flight on the
    /// queue pair.
    pub tx_bufs: usize,
}

impl Default for Settings {
    /// The parameters' defaults, the software device not chosen and no device found yet.
    fn default() -> Settings {
        Settings {
            kind: DeviceKind::RdmaCore,
            devices: Vec::new(),
            tx_size: 1024,
            rx_size: 1024,
            rnr_retry: 3,
            recvwin_size: 16384,
            tx_min_credits: 32,
            max_medium_msg_size: 65536,
            rnr_backoff_initial_wait_time: 0,
            rnr_backoff_wait_time_cap: 1_000_000,
            peer_timeout_ms: 10_000,
            rx_bufs: 256,
            tx_bufs: 256,
        }
    }
}

impl Settings {
    fn from_host(host: &Host) -> Result<Settings> {
        let p = Params::new(host, NAME);
        let device = p.text(
            "device",
            "soft: the software device of the RDMA layer (SRD between processes of this host)",
            None,
        )?;
        let mut s = ofi_kit::read_params!(p, Settings {
            tx_size: "tx_size", "Transmit operations per endpoint", 1..=1 << 16;
            rx_size: "rx_size", "Receives posted per endpoint", 1..=1 << 16;
            rnr_retry: "rnr_retry",
                "Device retries of a packet refused for lack of a receive (7: for ever)", 0..=7;
            recvwin_size: "recvwin_size", "Message ids a receiver holds ahead of the next in order",
                1..=1 << 20;
            tx_min_credits: "tx_min_credits", "Packets per clear-to-send grant of a long message",
                1..=4096;
            max_medium_msg_size: "inter_max_medium_message_size",
                "Largest message sent as medium (all packets at once)", 0..=MAX_MSG_SIZE;
            rnr_backoff_initial_wait_time: "rnr_backoff_initial_wait_time",
                "First wait after an RNR in microseconds (0: random in 40-120)";
            rnr_backoff_wait_time_cap: "rnr_backoff_wait_time_cap",
                "Longest wait after RNRs in a row, microseconds", 1..=60_000_000;
            peer_timeout_ms: "peer_timeout",
                "Milliseconds a peer with packets in flight may stay silent before it is lost",
                1..=3_600_000;
            rx_bufs: "rx_bufs", "Datagram buffers posted on the queue pair", 2..=16384;
            tx_bufs: "tx_bufs", "Datagrams in flight on the queue pair", 1..=16384;
        })?;
        if matches!(device.as_deref(), Some(d) if d.eq_ignore_ascii_case("soft")) {
            s.kind = DeviceKind::Soft;
        }
        if (s.recvwin_size as usize) < s.tx_bufs {
            // A receiver must be able to hold, for order, every datagram a peer can have
            // in flight behind a refused one: its device took them already.
            return Err(crate::einval(format!(
                "FI_EFA_RECVWIN_SIZE={} is below FI_EFA_TX_BUFS={} \
                 (datagrams in flight per endpoint)",
                s.recvwin_size, s.tx_bufs
            )));
        }
        s.devices = libefa::devices(s.kind)?;
        Ok(s)
    }
}

/// The capabilities of the RDM endpoint.
pub const CAPS: Caps = ofi_kit::info::RDM_MSG_CAPS
    .union(ofi_kit::info::RMA_ATOMIC_CAPS)
    .union(Caps::RMA_EVENT)
    .union(Caps::FENCE)
    .union(Caps::LOCAL_COMM)
    .union(Caps::REMOTE_COMM);

impl EfaProvider {
    /// The RDM info of `device`.
    fn rdm_template(&self, device: &str) -> Info {
        let s = &self.settings;
        let order = MsgOrder::SAS;
        let mtu = libefa::mtu(s.kind);
        let inject = mtu.saturating_sub(proto::wire::REQ_LEN).min(4096);
        let mut d = ofi_core::attr::DomainAttr {
            name: Some(device.to_string()),
            threading: Threading::Safe,
            control_progress: Progress::Auto,
            data_progress: Progress::Auto,
            resource_mgmt: ResourceMgmt::Enabled,
            av_type: AvType::Unspec,
            mr_mode: ofi_core::MrMode::empty(),
            mr_key_size: 4,
            cq_data_size: 8,
            mr_iov_limit: IOV_LIMIT,
            ..ofi_core::attr::DomainAttr::default()
        };
        d.max_ep_tx_ctx = 1;
        d.max_ep_rx_ctx = 1;
        Info {
            caps: CAPS,
            addr_format: AddrFormat::EFA,
            tx_attr: info::rdm_tx_attr(
                info::tx_caps(CAPS),
                info::RDM_TX_OP_FLAGS,
                order,
                inject,
                s.tx_size,
                IOV_LIMIT,
            ),
            rx_attr: info::rdm_rx_attr(CAPS, order, s.rx_size, IOV_LIMIT),
            ep_attr: ofi_kit::info::ep_attr(
                EpType::Rdm,
                Protocol::EFA,
                u32::from(proto::wire::VERSION),
                MAX_MSG_SIZE,
            ),
            domain_attr: d,
            fabric_attr: info::fabric_attr(FABRIC_NAME),
            ..Info::default()
        }
    }
}

impl EfaProvider {
    /// The `FI_EP_DGRAM` info of `device`: messages over a UD queue pair, datagrams up
    /// to [`libefa::DGRAM_MTU`], no message prefix (the provider keeps the GRH out of
    /// the application's buffers), `FI_SOURCE`.
    fn dgram_template(&self, device: &str) -> Info {
        let mut i = self.rdm_template(device);
        let caps = Caps::MSG | Caps::SEND | Caps::RECV | Caps::SOURCE;
        i.caps = caps;
        i.tx_attr.caps = Caps::MSG | Caps::SEND;
        i.tx_attr.op_flags = OpFlags::COMPLETION | OpFlags::INJECT | OpFlags::INJECT_COMPLETE;
        i.tx_attr.msg_order = MsgOrder::empty();
        i.tx_attr.inject_size = libefa::DGRAM_MTU;
        i.tx_attr.rma_iov_limit = 0;
        i.rx_attr.caps = Caps::MSG | Caps::RECV | Caps::SOURCE;
        i.rx_attr.op_flags = OpFlags::COMPLETION;
        i.rx_attr.msg_order = MsgOrder::empty();
        i.ep_attr.ep_type = EpType::Dgram;
        i.ep_attr.max_msg_size = libefa::DGRAM_MTU;
        i.domain_attr.cq_data_size = 0;
        i
    }
}

ofi_kit::core_provider! {
    /// The `efa` provider.
    pub struct EfaProvider(Settings) {
        NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
    }

    fn info_templates(&self) -> Vec<Info> {
        self.settings
            .devices
            .iter()
            .flat_map(|d| [self.rdm_template(d), self.dgram_template(d)])
            .collect()
    }

    fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        ofi_kit::info::getinfo_preferring_manual(self, req, &getinfo::IpResolver)
    }
}

/// `FI_EINVAL` with the provider's name.
pub(crate) fn einval(msg: impl std::fmt::Display) -> Error {
    Error::new(Errno::EINVAL, format!("{NAME}: {msg}"))
}

#[cfg(feature = "plugin")]
ofi_core::export_provider!(EfaProvider);
