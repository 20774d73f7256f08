//! ofi-util-rxd: the utility provider `ofi_rxd` — `FI_EP_RDM` (reliable, connectionless
//! messages, tagged messages, RMA and atomics, in order) over any core provider with
//! `FI_EP_DGRAM` (`udp;ofi_rxd`).
//!
//! # Layering (DESIGN §2, §7)
//!
//! rxd never names the provider beneath it. At getinfo it asks the host for core
//! providers with `FI_EP_DGRAM` ([`Host::getinfo_core`]) and answers one RDM info per
//! DGRAM info (the registry names it `core;ofi_rxd`, e.g. `udp;ofi_rxd`). At fabric open
//! it finds that DGRAM info again and opens it through the host ([`Host::open_fabric`]);
//! from there it uses the ordinary public objects (fabric, domain, endpoint, AV, CQ)
//! exactly as an application would, so any DGRAM core works, linked in or a plugin.
//!
//! # Module map
//!
//! - [`proto`]: the wire format (packet header, checked parser that never panics).
//! - [`peer`]: the sans-IO reliability engine (connections, sequence numbers, sliding
//!   windows, acknowledgements, retransmission with back-off, segmentation and
//!   reassembly, lost peers), driven with the time as an argument and tested on a
//!   virtual clock over a simulated lossy network (`tests/sim.rs`).
//! - [`fabric`]: fabric, domain, AV and MR objects (kit AV over the core's address
//!   format).
//! - [`ep`]: the RDM endpoint: the core DGRAM endpoint with its bounce buffers, the
//!   engine, tag matching (kit), completions and progress.
//!
//! # Parameters (environment `FI_OFI_RXD_<NAME>`, or `plugins.toml`)
//!
//! See [`Settings`] and `docs/providers/rxd.md`.
//!
//! # What may panic
//!
//! Nothing on application, peer or network input: bad arguments are errors with the C
//! library's codes; malformed packets are dropped and counted.

pub mod cookie;
pub mod ep;
pub mod fabric;
pub mod peer;
pub mod proto;

use ofi_core::attr::Info;
use ofi_core::provider::Host;
use ofi_core::{
    Caps, EpType, Errno, Error, MsgOrder, OpFlags, Progress, Protocol, Result, Version,
};
use ofi_kit::{info, param::Params};

/// The provider's name.
pub const NAME: &str = "ofi_rxd";
/// Largest I/O vector of one operation.
pub const IOV_LIMIT: usize = ofi_kit::iov::IOV_LIMIT;
/// Largest message rxd offers.
pub const MAX_MSG_SIZE: usize = 64 << 20;
/// Largest atomic operand rxd carries in one request (bytes).
pub const MAX_ATOMIC_BYTES: usize = 1 << 20;
/// Bytes of rxd's message header inside a reliable message (operation, flags, tag,
/// remote CQ data).
pub const MSG_HDR: usize = 18;
/// Most peers an endpoint keeps that the far side created (the engine's
/// `max_peers`: past it, idle ones are reclaimed, else new connections wait).
pub const MAX_PEERS: usize = 65536;

/// What the parameters resolved to at init.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `FI_OFI_RXD_WINDOW` (default 256): packets one connection may have
    /// unacknowledged.
    pub window: u32,
    /// `FI_OFI_RXD_MAX_INFLIGHT` (default 196608): bytes one connection may have
    /// unacknowledged (at least one packet goes). Keep it within the receiver's socket
    /// buffer (`FI_UDP_RCVBUF`; the kernel's default is 212992 bytes here).
    pub max_inflight: usize,
    /// `FI_OFI_RXD_SEG_SIZE` (default 0 = the core's largest datagram): bytes of one
    /// packet (header included); capped by the core's `max_msg_size`.
    pub seg_size: usize,
    /// `FI_OFI_RXD_RTO` (µs, default 2000): first retransmission timeout.
    pub rto_us: u64,
    /// `FI_OFI_RXD_RTO_MAX` (µs, default 500000): largest retransmission timeout.
    pub rto_max_us: u64,
    /// `FI_OFI_RXD_RETRY_LIMIT` (default 12): transmissions of one packet without
    /// answer before the peer is declared lost and its operations fail (`FI_EIO`).
    pub retry_limit: u32,
    /// `FI_OFI_RXD_ACK_EVERY` (default 16): in-order packets before an acknowledgement
    /// goes without waiting for reverse traffic.
    pub ack_every: u32,
    /// `FI_OFI_RXD_ACK_DELAY` (µs, default 100): longest delay of an acknowledgement.
    pub ack_delay_us: u64,
    /// `FI_OFI_RXD_RX_BUFS` (default 64): datagram buffers posted on the core endpoint.
    pub rx_bufs: usize,
    /// `FI_OFI_RXD_TX_SIZE` (default 1024): operations outstanding per endpoint.
    pub tx_size: usize,
    /// `FI_OFI_RXD_RX_SIZE` (default 1024): receives posted per endpoint.
    pub rx_size: usize,
    /// `FI_OFI_RXD_UNEXP_MSGS` (default 1024): unexpected messages an endpoint holds
    /// (those being received included) before it refuses new ones (receiver not ready:
    /// their senders wait).
    pub unexp_msgs: usize,
    /// `FI_OFI_RXD_UNEXP_BYTES` (default 64 MiB): bytes of unexpected messages an
    /// endpoint holds (those being received included, at their full length) before it
    /// refuses new ones. One message larger than this is still taken when nothing else
    /// is held, so no message waits for ever.
    pub unexp_bytes: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            window: 256,
            max_inflight: 192 << 10,
            seg_size: 0,
            rto_us: 2000,
            rto_max_us: 500_000,
            retry_limit: 12,
            ack_every: 16,
            ack_delay_us: 100,
            rx_bufs: 64,
            tx_size: 1024,
            rx_size: 1024,
            unexp_msgs: 1024,
            unexp_bytes: 64 << 20,
        }
    }
}

impl Settings {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::new(Errno::EINVAL, format!("{NAME} parameters: {m}")));
        if self.window == 0 || self.window > 1 << 16 {
            return bad(format!("window {} (1 to 65536)", self.window));
        }
        if self.seg_size != 0 && self.seg_size < proto::HDR_LEN + 64 {
            return bad(format!(
                "seg_size {} (0, or at least {})",
                self.seg_size,
                proto::HDR_LEN + 64
            ));
        }
        if self.rto_us == 0 || self.rto_max_us < self.rto_us {
            return bad(format!(
                "rto {} / rto_max {} (rto > 0, rto_max >= rto)",
                self.rto_us, self.rto_max_us
            ));
        }
        if self.retry_limit == 0 || self.retry_limit > 1000 {
            return bad(format!("retry_limit {} (1 to 1000)", self.retry_limit));
        }
        if self.ack_every == 0 {
            return bad("ack_every 0".into());
        }
        if self.rx_bufs == 0 || self.rx_bufs > 4096 {
            return bad(format!("rx_bufs {} (1 to 4096)", self.rx_bufs));
        }
        Ok(())
    }

    /// The engine configuration for a core whose largest datagram is `core_max`.
    pub fn engine_config(&self, core_max: usize) -> peer::Config {
        let pkt = if self.seg_size == 0 {
            core_max
        } else {
            self.seg_size.min(core_max)
        };
        peer::Config {
            seg_size: pkt.saturating_sub(proto::HDR_LEN).max(64),
            window: self.window,
            max_inflight: self.max_inflight,
            rto: self.rto_us.saturating_mul(1000),
            rto_max: self.rto_max_us.saturating_mul(1000),
            retry_limit: self.retry_limit,
            ack_every: self.ack_every,
            ack_delay: self.ack_delay_us.saturating_mul(1000),
            // Room for the message and RMA headers of a largest transfer.
            max_msg: MAX_MSG_SIZE + 256,
            initial_seq: 0,
            max_peers: MAX_PEERS,
        }
    }

    fn from_host(host: &Host) -> Result<Settings> {
        let p = Params::new(host, NAME);
        let mut s = ofi_kit::read_params!(p, Settings {
            window: "window", "Packets a connection may have unacknowledged";
            max_inflight: "max_inflight",
                "Bytes a connection may have unacknowledged (within the receiver's socket buffer)";
            seg_size: "seg_size",
                "Bytes of one packet, header included (0: the core's largest datagram)";
            rto_us: "rto", "First retransmission timeout in microseconds";
            rto_max_us: "rto_max", "Largest retransmission timeout in microseconds";
            retry_limit: "retry_limit",
                "Transmissions of a packet without answer before the peer is declared lost";
            ack_every: "ack_every", "In-order packets received before an acknowledgement is sent";
            ack_delay_us: "ack_delay", "Longest delay of an acknowledgement in microseconds";
            rx_bufs: "rx_bufs", "Datagram buffers posted on the core endpoint";
            tx_size: "tx_size", "Transmit operations outstanding per endpoint";
            rx_size: "rx_size", "Receives posted per endpoint";
            unexp_msgs: "unexp_msgs",
                "Unexpected messages held per endpoint before new ones are refused (their \
                 senders wait)";
            unexp_bytes: "unexp_bytes",
                "Bytes of unexpected messages held per endpoint before new ones are refused";
        })?;
        // A size of 0 is taken as 1.
        s.tx_size = s.tx_size.max(1);
        s.rx_size = s.rx_size.max(1);
        s.unexp_msgs = s.unexp_msgs.max(1);
        s.validate()?;
        Ok(s)
    }
}

/// The provider (`NAME` `"ofi_rxd"`, a utility provider).
#[derive(Debug)]
pub struct RxdProvider {
    settings: Settings,
    host: Host,
}

/// The capabilities rxd offers.
pub const CAPS: Caps = ofi_kit::info::RDM_MSG_CAPS
    .union(ofi_kit::info::RMA_ATOMIC_CAPS)
    .union(Caps::LOCAL_COMM)
    .union(Caps::REMOTE_COMM)
    .union(Caps::FENCE);

/// The DGRAM hints rxd asks the cores with, for RDM hints `h` (the kit's
/// [`Layering::core_hints`](ofi_kit::layer::Layering::core_hints) for `FI_EP_DGRAM`
/// cores with `FI_SOURCE` and `FI_SOURCE_ERR`).
pub fn core_hints(h: Option<&Info>) -> Info {
    LAYERING.core_hints(h)
}

impl RxdProvider {
    /// The settings this instance was initialised with.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The RDM template rxd offers over the DGRAM info `core`.
    pub fn template_over(&self, core: &Info, progress: Progress) -> Info {
        let s = &self.settings;
        let caps = CAPS;
        let mut d = ofi_kit::layer::utility_domain_attr(core, progress);
        d.mr_mode = ofi_core::MrMode::empty();
        d.mr_iov_limit = IOV_LIMIT;
        d.mr_key_size = 8;
        d.cq_data_size = 8;
        d.max_ep_tx_ctx = 1;
        d.max_ep_rx_ctx = 1;
        d.max_ep_stx_ctx = 0;
        d.max_ep_srx_ctx = 0;
        d.domain = 0;
        let order = MsgOrder::SAS;
        // One packet's payload (an inject goes in one packet).
        let pkt = s
            .engine_config(core.ep_attr.max_msg_size)
            .seg_size
            .saturating_sub(proto::FIRST_LEN + MSG_HDR);
        Info {
            caps,
            addr_format: core.addr_format,
            tx_attr: info::rdm_tx_attr(
                info::tx_caps(caps),
                OpFlags::COMPLETION
                    | OpFlags::INJECT
                    | OpFlags::INJECT_COMPLETE
                    | OpFlags::TRANSMIT_COMPLETE,
                order,
                pkt.min(4096),
                s.tx_size,
                IOV_LIMIT,
            ),
            rx_attr: info::rdm_rx_attr(caps, order, s.rx_size, IOV_LIMIT),
            ep_attr: ofi_kit::info::ep_attr(
                EpType::Rdm,
                Protocol::RXD,
                u32::from(proto::VERSION),
                MAX_MSG_SIZE,
            ),
            domain_attr: d,
            fabric_attr: core.fabric_attr.clone(),
            nic: core.nic.clone(),
            ..Info::default()
        }
    }
}

/// What this utility layers over (the getinfo it shares with the other utilities).
pub(crate) const LAYERING: ofi_kit::layer::Layering = ofi_kit::layer::Layering {
    name: NAME,
    // Crate 0.1.0, by the rule of `ofi_core::version::prov_version_from_crate`.
    version: Version::new(1, 0),
    offers: EpType::Rdm,
    core_type: EpType::Dgram,
    // The datagram's source (FI_SOURCE, and FI_SOURCE_ERR for a source not yet in the
    // AV) is how rxd knows a peer: a core without them cannot carry rxd safely.
    core_caps: Caps::MSG
        .union(Caps::SEND)
        .union(Caps::RECV)
        .union(Caps::SOURCE)
        .union(Caps::SOURCE_ERR),
};

ofi_kit::layered_provider!(RxdProvider, LAYERING, Settings, fabric::Fabric, core_hints);

#[cfg(feature = "plugin")]
ofi_core::export_provider!(RxdProvider);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_hints_drop_rxd_and_ask_for_sources() {
        let h = Info::hints().with_provider("udp;ofi_rxd");
        let m = core_hints(Some(&h));
        assert_eq!(m.fabric_attr.prov_name.as_deref(), Some("udp"));
        assert!(core_hints(None)
            .caps
            .contains(Caps::SOURCE | Caps::SOURCE_ERR));
    }

    #[test]
    fn settings_are_checked() {
        // Each breaks one rule of `validate`, starting from the valid defaults.
        let breaks: [fn(&mut Settings); 5] = [
            |s| s.window = 0,
            |s| s.seg_size = 10,
            |s| (s.rto_us, s.rto_max_us) = (10, 5),
            |s| s.retry_limit = 0,
            |s| s.rx_bufs = 0,
        ];
        for break_rule in breaks {
            let mut s = Settings::default();
            break_rule(&mut s);
            assert_eq!(s.validate().unwrap_err().code(), Errno::EINVAL, "{s:?}");
        }
        assert!(Settings::default().validate().is_ok());
        let c = Settings::default().engine_config(65495);
        assert_eq!(c.seg_size, 65495 - proto::HDR_LEN);
        assert_eq!(c.rto, 2_000_000);
    }
}
