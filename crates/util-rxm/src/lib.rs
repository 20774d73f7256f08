//! ofi-util-rxm: the utility provider `ofi_rxm` — `FI_EP_RDM` (reliable, connectionless
//! messages, tagged messages, RMA and atomics) over any core provider with `FI_EP_MSG`.
//!
//! # Layering (DESIGN §2)
//!
//! rxm never names the provider beneath it. At getinfo it asks the host for core
//! providers with `FI_EP_MSG` ([`Host::getinfo_core`]) and answers one RDM info per MSG
//! info it gets back (the registry names it `core;ofi_rxm`, e.g. `tcp;ofi_rxm`). At
//! fabric open it finds that MSG info again and opens it through the host
//! ([`Host::open_fabric`]); from there it uses the ordinary public objects (fabric,
//! domain, passive endpoint, endpoints, EQ, CQ, MRs) exactly as an application would,
//! so any MSG core works, linked in or loaded as a plugin.
//!
//! # Module map
//!
//! - [`proto`]: the wire format (handshake carried in CM data, packet header, control
//!   bodies), checked parsers that never panic.
//! - [`conn`]: the sans-IO connection manager (connect on first use, bounded handshakes
//!   in flight, time-outs, back-off, deterministic simultaneous-connect resolution),
//!   driven with the current time as an argument and tested on a virtual clock.
//! - [`engine`]: the message protocol (credits, eager, segmentation, rendezvous,
//!   connection epochs) as a sans-IO state machine without timers (connection timing is
//!   [`conn`]'s alone), tested on the shared simulated network (`tests/sim.rs`).
//! - [`fabric`]: fabric, domain, AV and MR objects (kit AV; MRs are registered with the
//!   MSG domain so RMA keys work end to end).
//! - [`ep`]: the RDM endpoint: connections, eager / segmented / rendezvous protocols,
//!   credit-based flow control, tag matching (kit), RMA and atomics forwarded to the
//!   connection, remote-access counters (`FI_RMA_EVENT`), progress.
//!
//! # Parameters (environment `FI_OFI_RXM_<NAME>`, or `plugins.toml`)
//!
//! See [`Settings`] and `docs/providers/rxm.md`.
//!
//! # What may panic
//!
//! Nothing on application, peer or network input: bad arguments are errors with the C
//! library's codes; malformed packets or handshakes are refused and logged.

pub mod auth;
pub mod conn;
pub mod engine;
pub mod ep;
pub mod fabric;
pub mod hello_ext;
pub mod proto;

use ofi_core::attr::Info;
use ofi_core::param::ParamType;
use ofi_core::provider::Host;
use ofi_core::{
    Caps, EpType, Errno, Error, MsgOrder, OpFlags, Progress, Protocol, Result, Version,
};

/// The provider's name.
pub const NAME: &str = "ofi_rxm";
/// Largest I/O vector of one operation (what the kit's `IoList` holds).
pub const IOV_LIMIT: usize = ofi_kit::iov::IOV_LIMIT;
/// Largest message rxm offers (capped below the core's: one rendezvous transfer of this
/// size takes well under a second over tcp here).
pub const MAX_MSG_SIZE: usize = 256 << 20;
/// Transmit and receive contexts of a scalable endpoint at most (each a whole
/// endpoint with its own core objects).
pub const MAX_EP_CTX: usize = 16;

/// The transmit and receive contexts a scalable endpoint over the core `core` may have:
/// [`MAX_EP_CTX`], or 1 (no scalable endpoints) over a core whose connection data is
/// RDMA CM's 56 bytes (verbs), which a request with an IPv4 address and a key fills
/// already: there is no room for the extensions that address a receive context
/// ([`hello_ext`]).
pub fn max_ep_ctx(core: &Info) -> usize {
    let rdma_cm = matches!(
        core.ep_attr.protocol,
        Protocol::RDMA_CM_IB_RC | Protocol::IWARP
    );
    if rdma_cm {
        1
    } else {
        MAX_EP_CTX
    }
}

/// What the parameters resolved to at init.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `FI_OFI_RXM_BUFFER_SIZE` (default 16384): size of each bounce buffer; messages up
    /// to this size minus the header go eagerly. Part of the handshake: peers with
    /// different values refuse each other (as in the C library).
    pub buffer_size: usize,
    /// `FI_OFI_RXM_SAR_LIMIT` (default 131072): messages up to this size are segmented
    /// into bounce-buffer-sized segments; larger ones use rendezvous.
    pub sar_limit: usize,
    /// `FI_OFI_RXM_USE_SRX` (default false): accepted for compatibility; no shared receive
    /// context is used yet (a warning is logged when it is set).
    pub use_srx: bool,
    /// `FI_OFI_RXM_MSG_RX_SIZE` (default 8): bounce buffers posted on each MSG endpoint.
    pub msg_rx_size: usize,
    /// `FI_OFI_RXM_CREDITS` (default 64): messages a peer may have outstanding at this
    /// endpoint (held unexpected or being received); bounds unexpected memory per peer.
    pub credits: usize,
    /// `FI_OFI_RXM_CONN_TIMEOUT` (ms, default 3000): a handshake not finished by then is
    /// abandoned and retried.
    pub conn_timeout_ms: u64,
    /// `FI_OFI_RXM_CONN_RETRIES` (default 4): connection attempts before a peer's pending
    /// operations fail.
    pub conn_retries: u32,
    /// `FI_OFI_RXM_MAX_CONNECTING` (default 32): handshakes one endpoint has in flight at
    /// once; more wait their turn.
    pub max_connecting: usize,
    /// `FI_OFI_RXM_TX_SIZE` (default 1024): operations outstanding per endpoint.
    pub tx_size: usize,
    /// `FI_OFI_RXM_RX_SIZE` (default 1024): receives posted per endpoint.
    pub rx_size: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            buffer_size: 16384,
            sar_limit: 131072,
            use_srx: false,
            msg_rx_size: 8,
            credits: 64,
            conn_timeout_ms: 3000,
            conn_retries: 4,
            max_connecting: 32,
            tx_size: 1024,
            rx_size: 1024,
        }
    }
}

impl Settings {
    /// Largest payload of one eager packet.
    pub fn eager_limit(&self) -> usize {
        self.buffer_size - proto::HDR_LEN
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::new(Errno::EINVAL, format!("{NAME} parameters: {m}")));
        if self.buffer_size < proto::HDR_LEN + 64 || self.buffer_size > (1 << 30) {
            return bad(format!(
                "buffer_size {} (must be {} to 1 GiB)",
                self.buffer_size,
                proto::HDR_LEN + 64
            ));
        }
        if self.msg_rx_size == 0 || self.msg_rx_size > 4096 {
            return bad(format!("msg_rx_size {} (1 to 4096)", self.msg_rx_size));
        }
        if self.credits == 0 || self.credits > 65535 {
            return bad(format!("credits {} (1 to 65535)", self.credits));
        }
        if self.max_connecting == 0 {
            return bad("max_connecting 0".into());
        }
        if self.conn_timeout_ms == 0 {
            return bad("conn_timeout 0".into());
        }
        Ok(())
    }

    fn from_host(host: &Host) -> Result<Settings> {
        let mut s = Settings::default();
        let decl =
            |n: &str, t: ParamType, h: &str, d: String| host.declare_param(n, t, h, Some(&d));
        decl(
            "buffer_size",
            ParamType::Size,
            "Bounce buffer size; messages up to it (less the header) are sent eagerly",
            s.buffer_size.to_string(),
        )?;
        decl(
            "sar_limit",
            ParamType::Size,
            "Messages up to this size are segmented; larger ones use rendezvous (RMA read)",
            s.sar_limit.to_string(),
        )?;
        decl(
            "use_srx",
            ParamType::Bool,
            "Use a shared receive context of the MSG provider (accepted, not used yet)",
            "false".into(),
        )?;
        decl(
            "msg_rx_size",
            ParamType::Size,
            "Bounce buffers posted on each MSG endpoint",
            s.msg_rx_size.to_string(),
        )?;
        decl(
            "credits",
            ParamType::Size,
            "Messages a peer may have outstanding at an endpoint (flow control)",
            s.credits.to_string(),
        )?;
        decl(
            "conn_timeout",
            ParamType::Size,
            "Milliseconds before an unfinished connection handshake is retried",
            s.conn_timeout_ms.to_string(),
        )?;
        decl(
            "conn_retries",
            ParamType::Size,
            "Connection attempts before a peer's operations fail",
            s.conn_retries.to_string(),
        )?;
        decl(
            "max_connecting",
            ParamType::Size,
            "Connection handshakes an endpoint has in flight at once",
            s.max_connecting.to_string(),
        )?;
        decl(
            "tx_size",
            ParamType::Size,
            "Transmit operations outstanding per endpoint",
            s.tx_size.to_string(),
        )?;
        decl(
            "rx_size",
            ParamType::Size,
            "Receives posted per endpoint",
            s.rx_size.to_string(),
        )?;
        if let Some(v) = host.param_size("buffer_size")? {
            s.buffer_size = v;
        }
        s.sar_limit = s.buffer_size.saturating_mul(8);
        if let Some(v) = host.param_size("sar_limit")? {
            s.sar_limit = v;
        }
        if let Some(v) = host.param_bool("use_srx")? {
            s.use_srx = v;
        }
        if let Some(v) = host.param_size("msg_rx_size")? {
            s.msg_rx_size = v;
        }
        if let Some(v) = host.param_size("credits")? {
            s.credits = v;
        }
        if let Some(v) = host.param_size("conn_timeout")? {
            s.conn_timeout_ms = v as u64;
        }
        if let Some(v) = host.param_size("conn_retries")? {
            s.conn_retries = v.min(1000) as u32;
        }
        if let Some(v) = host.param_size("max_connecting")? {
            s.max_connecting = v;
        }
        if let Some(v) = host.param_size("tx_size")? {
            s.tx_size = v.max(1);
        }
        if let Some(v) = host.param_size("rx_size")? {
            s.rx_size = v.max(1);
        }
        s.validate()?;
        if s.use_srx {
            ofi_core::ofi_warn!(NAME, "core", "FI_OFI_RXM_USE_SRX is accepted but not used");
        }
        Ok(s)
    }
}

/// The orderings rxm passes through from its core (what it claims of them is what the
/// core claims, and nothing the core does not): those of RMA and atomic operations
/// against each other, and of sends after them. `FI_ORDER_SAS` is rxm's own (its
/// sequence of messages per connection).
///
/// Why they hold: every transmit operation to a peer (a send, or an RMA or atomic
/// forwarded to the core) joins that peer's one queue in the engine in issue order and
/// leaves it in that order, each forwarded operation as one operation on the core's MSG
/// endpoint of the peer's connection; what the core refuses for now waits at the head
/// of the connection's `stalled` queue, before anything newer (`ep::tx`). The send fast
/// path passes only an idle connection (nothing stalled or queued), and a fenced
/// operation is refused (`FI_EAGAIN`) rather than held while later ones pass. A
/// scalable endpoint's transmit context has connections of its own: the order is per
/// context, as `fi_endpoint(3)` defines it. So operations reach the core in issue
/// order, and the core keeps the order it claims.
///
/// Not `FI_ORDER_RAS` nor `FI_ORDER_WAS`: a rendezvous send's data is not in the
/// stream; the receiver reads it from the sender after the request arrived, so an RMA
/// posted after the send can act at the target before the send's data lands there.
pub const FORWARDED_ORDER: MsgOrder = MsgOrder::all()
    .difference(MsgOrder::SAS)
    .difference(MsgOrder::RAS)
    .difference(MsgOrder::WAS);

/// The provider (`NAME` `"ofi_rxm"`, a utility provider).
#[derive(Debug)]
pub struct RxmProvider {
    settings: Settings,
    host: Host,
}

/// The capabilities rxm offers on top of the MSG core `core` (RMA and atomics only where
/// the core has them; `FI_NAMED_RX_CTX` where scalable endpoints are, [`max_ep_ctx`]).
fn rdm_caps(core: &Info) -> Caps {
    let mut c = ofi_kit::info::RDM_MSG_CAPS
        // Peers on this host and on others alike (what a core's sockets reach); MPI
        // libraries ask for both (Open MPI's ofi MTL always does).
        | Caps::LOCAL_COMM
        | Caps::REMOTE_COMM
        // Fences are rxm's own (its operation table), whatever the core offers; so
        // are triggered operations (kit's queue, fired from rxm's progress).
        | Caps::FENCE
        | Caps::TRIGGER;
    // Remote-access counters (FI_RMA_EVENT) are rxm's own: the initiator reports each
    // forwarded access done to a target that counts them.
    let remote = Caps::REMOTE_READ | Caps::REMOTE_WRITE | Caps::RMA_EVENT;
    if core.caps.contains(Caps::RMA) {
        c |= Caps::RMA | Caps::READ | Caps::WRITE | remote;
    }
    if core.caps.contains(Caps::ATOMIC) {
        c |= Caps::ATOMIC | Caps::READ | Caps::WRITE | remote;
    }
    if max_ep_ctx(core) > 1 {
        c |= Caps::NAMED_RX_CTX;
    }
    c
}

/// The MSG hints rxm asks the cores with, for RDM hints `h`.
pub fn core_hints(h: Option<&Info>) -> Info {
    // The kit's hints for rxm's LAYERING; no caps: the core answers with everything it
    // has, and rxm's own matching applies the application's caps to what rxm builds
    // from it.
    let mut m = LAYERING.core_hints(h);
    if let Some(h) = h.filter(|h| h.domain_attr.mr_mode != ofi_core::MrMode::empty()) {
        // rxm is an RMA user of its core whatever the application asked: a
        // rendezvous is the receiver reading the sender's buffer through the core.
        // rxm handles the core's target bits itself (it sends virtual addresses when
        // the core wants them, and the core's keys), so it accepts them even when
        // the application's own mode, shaped for an application that is no RMA
        // target, lacks them — otherwise a core such as verbs, whose keys only take
        // virtual addresses, would drop FI_MR_VIRT_ADDR and rxm would send offsets.
        m.domain_attr.mr_mode =
            h.domain_attr.mr_mode | ofi_core::MrMode::VIRT_ADDR | ofi_core::MrMode::PROV_KEY;
    }
    m
}

impl RxmProvider {
    /// The settings this instance was initialised with.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The RDM template rxm offers over the MSG info `core`.
    pub fn template_over(&self, core: &Info, progress: Progress) -> Info {
        let s = &self.settings;
        let caps = rdm_caps(core);
        let inject = core
            .tx_attr
            .inject_size
            .saturating_sub(proto::HDR_LEN)
            .min(s.eager_limit());
        // Connections are driven by the same progress as data (no thread of our own
        // unless auto progress is asked for).
        let mut d = ofi_kit::layer::utility_domain_attr(core, progress);
        // rxm's own header carries 8 bytes of CQ data, but fi_writedata goes through
        // the core's write with data: a core with less (verbs: 4, the immediate data)
        // limits what rxm offers.
        d.cq_data_size = match core.domain_attr.cq_data_size {
            0 => 8,
            n => n.min(8),
        };
        // Scalable endpoints (`ep::scalable`), where the core's connection data holds
        // the request's extensions.
        d.max_ep_tx_ctx = max_ep_ctx(core);
        d.max_ep_rx_ctx = max_ep_ctx(core);
        // One shared transmit and one shared receive context per endpoint
        // (`ep::shared_ctx`).
        d.max_ep_stx_ctx = 1;
        d.max_ep_srx_ctx = 1;
        d.domain = 0;
        let tx_order = MsgOrder::SAS | (core.tx_attr.msg_order & FORWARDED_ORDER);
        let rx_order = MsgOrder::SAS | (core.rx_attr.msg_order & FORWARDED_ORDER);
        Info {
            caps,
            mode: ofi_core::Mode::empty(),
            addr_format: core.addr_format,
            src_addr: None,
            dest_addr: None,
            handle: 0,
            tx_attr: ofi_kit::info::rdm_tx_attr(
                ofi_kit::info::tx_caps(caps),
                // Every level of the RDM set, and commit complete (as delivery
                // complete: no persistent memory).
                ofi_kit::info::RDM_TX_OP_FLAGS.union(OpFlags::COMMIT_COMPLETE),
                tx_order,
                inject,
                s.tx_size,
                IOV_LIMIT,
            ),
            rx_attr: ofi_kit::info::rdm_rx_attr(caps, rx_order, s.rx_size, IOV_LIMIT),
            ep_attr: ofi_core::attr::EpAttr {
                ep_type: EpType::Rdm,
                protocol: Protocol::RXM,
                protocol_version: proto::VERSION as u32,
                max_msg_size: core.ep_attr.max_msg_size.min(MAX_MSG_SIZE),
                msg_prefix_size: 0,
                max_order_raw_size: core.ep_attr.max_order_raw_size.min(MAX_MSG_SIZE),
                max_order_war_size: core.ep_attr.max_order_war_size.min(MAX_MSG_SIZE),
                max_order_waw_size: core.ep_attr.max_order_waw_size.min(MAX_MSG_SIZE),
                mem_tag_format: u64::MAX,
                tx_ctx_cnt: 1,
                rx_ctx_cnt: 1,
                auth_key: None,
            },
            domain_attr: d,
            fabric_attr: core.fabric_attr.clone(),
            nic: core.nic.clone(),
        }
    }
}

/// What this utility layers over (the getinfo it shares with the other utilities).
pub(crate) const LAYERING: ofi_kit::layer::Layering = ofi_kit::layer::Layering {
    name: NAME,
    // Crate 0.1.0, by the rule of `ofi_core::version::prov_version_from_crate`.
    version: Version::new(1, 0),
    offers: EpType::Rdm,
    core_type: EpType::Msg,
    core_caps: Caps::empty(),
};

ofi_kit::layered_provider!(
    RxmProvider,
    LAYERING,
    Settings,
    fabric::Fabric,
    core_hints,
    auth_key_max = ofi_kit::auth::AUTH_KEY_MAX
);

#[cfg(feature = "plugin")]
ofi_core::export_provider!(RxmProvider);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_hints_drop_rxm_and_accept_the_cores_mr_bits() {
        let mut h = Info::hints().with_provider("tcp;OFI_RXM");
        h.domain_attr.mr_mode = ofi_core::MrMode::LOCAL;
        let m = core_hints(Some(&h));
        assert_eq!(m.fabric_attr.prov_name.as_deref(), Some("tcp"));
        assert_eq!(m.ep_attr.ep_type, EpType::Msg);
        assert!(m.domain_attr.mr_mode.contains(ofi_core::MrMode::VIRT_ADDR));
        assert_eq!(
            core_hints(None).domain_attr.mr_mode,
            Info::hints().domain_attr.mr_mode
        );
    }

    /// rxm claims SAS and, of the RMA and atomic orderings, what its core claims per
    /// direction (never a bit the core lacks, and never RAS or WAS: rendezvous), within
    /// the core's `max_order_*_size`.
    #[test]
    fn ordering_is_the_cores_intersected() {
        let rxm = RxmProvider {
            settings: Settings::default(),
            host: Host::for_provider(NAME),
        };
        let mut core = Info {
            caps: Caps::MSG | Caps::RMA,
            ..Info::default()
        };
        core.ep_attr.max_msg_size = 1 << 20;
        core.tx_attr.msg_order =
            MsgOrder::SAS | MsgOrder::RAW | MsgOrder::WAW | MsgOrder::SAW | MsgOrder::WAS;
        core.rx_attr.msg_order = MsgOrder::SAS | MsgOrder::RAW;
        core.ep_attr.max_order_raw_size = 1 << 40;
        core.ep_attr.max_order_waw_size = 4096;
        let i = rxm.template_over(&core, Progress::Manual);
        assert_eq!(
            i.tx_attr.msg_order,
            MsgOrder::SAS | MsgOrder::RAW | MsgOrder::WAW | MsgOrder::SAW
        );
        assert_eq!(i.rx_attr.msg_order, MsgOrder::SAS | MsgOrder::RAW);
        assert_eq!(i.ep_attr.max_order_raw_size, MAX_MSG_SIZE);
        assert_eq!(i.ep_attr.max_order_waw_size, 4096);
        assert_eq!(i.ep_attr.max_order_war_size, 0);
        // A core that claims no ordering: SAS only (rxm's own).
        core.tx_attr.msg_order = MsgOrder::empty();
        core.rx_attr.msg_order = MsgOrder::empty();
        let i = rxm.template_over(&core, Progress::Manual);
        assert_eq!(i.tx_attr.msg_order, MsgOrder::SAS);
        assert_eq!(i.rx_attr.msg_order, MsgOrder::SAS);
    }

    #[test]
    fn settings_are_checked() {
        let s = Settings {
            buffer_size: 10,
            ..Settings::default()
        };
        assert_eq!(s.validate().unwrap_err().code(), Errno::EINVAL);
        let s = Settings {
            credits: 0,
            ..Settings::default()
        };
        assert_eq!(s.validate().unwrap_err().code(), Errno::EINVAL);
        assert!(Settings::default().validate().is_ok());
    }
}
