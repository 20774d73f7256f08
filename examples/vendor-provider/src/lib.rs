//! `unixdgram`: an ofi-rs provider of `FI_EP_DGRAM` endpoints over Unix datagram
//! sockets, built outside the ofi-rs workspace against the `ofi-core` crate only.
//!
//! This crate is the template for out-of-tree providers (docs/PLUGINS.md walks through
//! it). It builds two ways from the same code:
//!
//! - as a **plugin**: the cdylib `libofi_prov_unixdgram.so` exports the entry static
//!   ([`ofi_core::export_provider!`]); put it in a directory named by `FI_PROVIDER_PATH`;
//! - as an **rlib**: a program links it and registers
//!   `ofi_core::abi::entry_for::<UnixDgram>()` with its registry.
//!
//! # What it offers
//!
//! - endpoint type `FI_EP_DGRAM`; capabilities `FI_MSG | FI_SEND | FI_RECV | FI_SOURCE`
//!   (and `FI_LOCAL_COMM`: peers are processes of the same host);
//! - addresses `FI_ADDR_STR`: `fi_unixdgram://NAME`, where NAME is the endpoint's name in
//!   Linux's abstract socket namespace (nothing is created on disk; see [`addr`]);
//! - completion queues of every format, with `fi_cq_readfrom`, `fi_cq_readerr`,
//!   `fi_cq_sread` and `fi_cq_signal`; address vectors of type `FI_AV_MAP` or
//!   `FI_AV_TABLE`;
//! - `FI_THREAD_SAFE`; data progress `FI_PROGRESS_MANUAL` (reading a CQ receives what has
//!   arrived for the endpoints bound to it); `FI_RM_ENABLED` (an operation that could
//!   overrun a CQ is refused with `FI_EAGAIN` instead).
//!
//! Parameters (environment `FI_UNIXDGRAM_<NAME>`, or `plugins.toml`):
//! `max_msg_size` (default 65536, at most 131072) and `rx_size` (receives an endpoint
//! may have posted, default 256).
//!
//! # Module map
//!
//! - [`sock`]: the only code that calls the OS (socket, sendmsg/recvmsg, poll, eventfd);
//! - [`addr`]: `fi_unixdgram://NAME` text ↔ names;
//! - [`fabric`]: the fabric and domain objects (they open everything else);
//! - [`ep`], [`cq`], [`av`]: endpoint, completion queue, address vector.
//!
//! # Invariants and panics
//!
//! Nothing panics on application or peer input: bad arguments are errors with the C
//! library's codes, and any datagram a peer sends is either delivered or reported as an
//! error completion. (With the test-only feature `panic-in-send`, `send` panics on
//! purpose; the ofi-core boundary turns that into `FI_EOTHER`.)

pub mod addr;
pub mod av;
pub mod cq;
pub mod ep;
pub mod fabric;
pub mod sock;

use ofi_core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest, NoResolver};
use ofi_core::param::ParamType;
use ofi_core::provider::{Host, Provider};
use ofi_core::{
    AddrFormat, AvType, Caps, CompOrder, EpType, Errno, Error, Mode, MrMode, MsgOrder, OpFlags,
    Progress, Protocol, ResourceMgmt, Result, Threading, Version,
};

pub use fabric::{Domain, Fabric};

/// The provider's name: what `FI_PROVIDER`, `fi_info -p` and the plugin file name use.
pub const NAME: &str = "unixdgram";

/// Largest I/O vector of one send or receive.
pub const IOV_LIMIT: usize = 4;

/// Largest value the `max_msg_size` parameter accepts. A Unix datagram must fit in the
/// sender's socket buffer, which unprivileged processes can only grow so far.
pub const MAX_MSG_SIZE_LIMIT: usize = 128 * 1024;

/// What the parameters resolved to at init; every object copies what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Largest message (`ep_attr.max_msg_size`).
    pub max_msg_size: usize,
    /// Largest `inject` (`tx_attr.inject_size`).
    pub inject_size: usize,
    /// Receives an endpoint may have posted (`rx_attr.size`).
    pub rx_size: usize,
    /// Sends that may be outstanding (`tx_attr.size`). Sends complete as they are
    /// posted, so this only bounds what a CQ must have room for.
    pub tx_size: usize,
    /// Entries of a CQ opened with size 0.
    pub default_cq_size: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_msg_size: 64 * 1024,
            inject_size: 4096,
            rx_size: 256,
            tx_size: 256,
            default_cq_size: 1024,
        }
    }
}

/// The provider. [`Provider::init`] reads its parameters; everything else it holds is
/// derived from them.
#[derive(Debug)]
pub struct UnixDgram {
    settings: Settings,
}

impl UnixDgram {
    /// The settings this instance was initialised with.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Read the parameters through the host (declaring them first, so `fi_info -e`
    /// lists them with their help text).
    fn settings_from(host: &Host) -> Result<Settings> {
        let mut s = Settings::default();
        host.declare_param(
            "max_msg_size",
            ParamType::Size,
            "Largest message an endpoint sends or receives, in bytes (at most 131072)",
            Some("65536"),
        )?;
        host.declare_param(
            "rx_size",
            ParamType::Size,
            "Receives an endpoint may have posted at once",
            Some("256"),
        )?;
        if let Some(v) = host.param_size("max_msg_size")? {
            if v == 0 || v > MAX_MSG_SIZE_LIMIT {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("FI_UNIXDGRAM_MAX_MSG_SIZE={v}: must be 1 to {MAX_MSG_SIZE_LIMIT}"),
                ));
            }
            s.max_msg_size = v;
        }
        if let Some(v) = host.param_size("rx_size")? {
            if v == 0 {
                return Err(Error::new(
                    Errno::EINVAL,
                    "FI_UNIXDGRAM_RX_SIZE=0: must be at least 1",
                ));
            }
            s.rx_size = v;
        }
        s.inject_size = s.inject_size.min(s.max_msg_size);
        Ok(s)
    }

    /// The one template per address-vector type this provider answers getinfo with.
    /// Every domain field is filled in: the matcher treats a template's `Unspec`
    /// threading / progress / resource management as the most demanding value.
    fn template(&self, av_type: AvType) -> Info {
        let s = &self.settings;
        let caps = Caps::MSG | Caps::SEND | Caps::RECV | Caps::SOURCE | Caps::LOCAL_COMM;
        Info {
            caps,
            mode: Mode::empty(),
            addr_format: AddrFormat::STR,
            tx_attr: TxAttr {
                caps: Caps::MSG | Caps::SEND,
                mode: Mode::empty(),
                op_flags: OpFlags::COMPLETION
                    | OpFlags::INJECT
                    | OpFlags::INJECT_COMPLETE
                    | OpFlags::TRANSMIT_COMPLETE,
                msg_order: MsgOrder::SAS,
                comp_order: CompOrder::NONE,
                inject_size: s.inject_size,
                size: s.tx_size,
                iov_limit: IOV_LIMIT,
                rma_iov_limit: 0,
                tclass: 0,
            },
            rx_attr: RxAttr {
                caps: Caps::MSG | Caps::RECV | Caps::SOURCE,
                mode: Mode::empty(),
                op_flags: OpFlags::COMPLETION,
                msg_order: MsgOrder::SAS,
                comp_order: CompOrder::NONE,
                total_buffered_recv: 0,
                size: s.rx_size,
                iov_limit: IOV_LIMIT,
            },
            ep_attr: EpAttr {
                ep_type: EpType::Dgram,
                protocol: Protocol::UNSPEC,
                protocol_version: 1,
                max_msg_size: s.max_msg_size,
                msg_prefix_size: 0,
                max_order_raw_size: 0,
                max_order_war_size: 0,
                max_order_waw_size: 0,
                mem_tag_format: 0,
                tx_ctx_cnt: 1,
                rx_ctx_cnt: 1,
                auth_key: None,
            },
            domain_attr: DomainAttr {
                domain: 0,
                name: Some(NAME.to_string()),
                threading: Threading::Safe,
                // Control operations complete before they return.
                control_progress: Progress::Auto,
                // Receives complete when the application reads a CQ.
                data_progress: Progress::Manual,
                resource_mgmt: ResourceMgmt::Enabled,
                av_type,
                mr_mode: MrMode::empty(),
                mr_key_size: 0,
                cq_data_size: 0,
                cq_cnt: 256,
                ep_cnt: 256,
                tx_ctx_cnt: 256,
                rx_ctx_cnt: 256,
                max_ep_tx_ctx: 1,
                max_ep_rx_ctx: 1,
                max_ep_stx_ctx: 0,
                max_ep_srx_ctx: 0,
                cntr_cnt: 0,
                mr_iov_limit: 0,
                caps: Caps::LOCAL_COMM,
                mode: Mode::empty(),
                auth_key: None,
                max_err_data: 0,
                mr_cnt: 0,
                tclass: 0,
            },
            fabric_attr: FabricAttr {
                name: Some(NAME.to_string()),
                ..FabricAttr::default()
            },
            ..Info::default()
        }
    }
}

impl Provider for UnixDgram {
    const NAME: &'static str = NAME;
    /// Crate 0.1.0, by the rule of `ofi_core::version::prov_version_from_crate`
    /// (a test checks they agree).
    const VERSION: Version = Version::new(1, 0);
    type Fabric = Fabric;

    fn init(host: &Host) -> Result<Self> {
        if cfg!(feature = "init-fails") {
            return Err(Error::new(
                Errno::ENODEV,
                "built with feature init-fails: refusing to initialise",
            ));
        }
        let settings = UnixDgram::settings_from(host)?;
        ofi_core::ofi_debug!(NAME, "core", "initialised: {settings:?}");
        Ok(UnixDgram { settings })
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![self.template(AvType::Map), self.template(AvType::Table)]
    }

    /// The framework's matcher, with the resolver for non-IP addresses: a `node` of the
    /// form `fi_unixdgram://NAME` becomes the destination (or, with `FI_SOURCE`, the
    /// source) address.
    fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        getinfo::match_templates(
            NAME,
            Self::VERSION,
            &self.info_templates(),
            req,
            &NoResolver,
        )
    }

    fn fabric(&self, info: &Info) -> Result<Fabric> {
        Fabric::open(self.settings, info)
    }
}

// ---------------------------------------------------------------------------------------
// The exported entry.
//
// A normal build exports the entry the macro derives from `UnixDgram`. The test-only
// features below replace it with a copy of that same entry in which exactly one field
// is changed, so the plugin tests can check that the loader refuses each kind of
// mismatch before running any of the plugin's code.

#[cfg(all(feature = "abi-next-major", feature = "layout-drift"))]
compile_error!("features abi-next-major and layout-drift are exclusive");

#[cfg(not(any(feature = "abi-next-major", feature = "layout-drift")))]
ofi_core::export_provider!(UnixDgram);

/// Test-only: the normal entry, claiming the next interface major.
#[cfg(feature = "abi-next-major")]
#[no_mangle]
pub static OFI_RS_PLUGIN_ENTRY: ofi_core::abi::PluginEntry = ofi_core::abi::PluginEntry {
    abi_major: ofi_core::abi::ABI_MAJOR + 1,
    ..*ofi_core::abi::entry_for::<UnixDgram>()
};

/// Test-only: the normal entry, claiming another table layout.
#[cfg(feature = "layout-drift")]
#[no_mangle]
pub static OFI_RS_PLUGIN_ENTRY: ofi_core::abi::PluginEntry = ofi_core::abi::PluginEntry {
    fingerprint: !ofi_core::abi::FINGERPRINT,
    ..*ofi_core::abi::entry_for::<UnixDgram>()
};

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_core::getinfo::check_info;

    fn prov() -> UnixDgram {
        UnixDgram {
            settings: Settings::default(),
        }
    }

    #[test]
    fn version_follows_the_crate_version() {
        assert_eq!(
            UnixDgram::VERSION,
            ofi_core::version::prov_version_from_crate(env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn templates_fill_every_domain_level() {
        for t in prov().info_templates() {
            let d = &t.domain_attr;
            assert_ne!(d.threading, Threading::Unspec);
            assert_ne!(d.control_progress, Progress::Unspec);
            assert_ne!(d.data_progress, Progress::Unspec);
            assert_ne!(d.resource_mgmt, ResourceMgmt::Unspec);
            assert_ne!(d.av_type, AvType::Unspec);
            assert!(t.tx_attr.inject_size <= t.ep_attr.max_msg_size);
        }
    }

    #[test]
    fn templates_pass_demanding_hints() {
        let mut hints = Info::hints()
            .with_ep_type(EpType::Dgram)
            .with_caps(Caps::MSG);
        hints.domain_attr.threading = Threading::Safe;
        hints.domain_attr.data_progress = Progress::Manual;
        hints.domain_attr.resource_mgmt = ResourceMgmt::Enabled;
        hints.domain_attr.av_type = AvType::Table;
        let t = prov().info_templates();
        assert!(check_info(&t[1], &hints, ofi_core::version::API_VERSION).is_ok());
        let m = check_info(&t[0], &hints, ofi_core::version::API_VERSION).unwrap_err();
        assert_eq!(m.field, "domain_attr.av_type");
    }

    #[test]
    fn getinfo_keeps_an_addr_str_node_as_destination() {
        let mut req = GetinfoRequest::new(ofi_core::version::API_VERSION);
        req.node = Some("fi_unixdgram://peer-1".into());
        let out = prov().getinfo(&req);
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.infos.len(), 2);
        for i in &out.infos {
            assert_eq!(
                i.dest_addr,
                Some(ofi_core::Address::Str("fi_unixdgram://peer-1".into()))
            );
            assert_eq!(i.prov_name(), NAME);
        }
    }
}
