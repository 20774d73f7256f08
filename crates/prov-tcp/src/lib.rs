//! ofi-prov-tcp: the `tcp` provider — `FI_EP_MSG` (connection-oriented) endpoints over
//! TCP, built on `ofi-kit`.
//!
//! # What it offers
//!
//! - endpoint type `FI_EP_MSG`, address formats `FI_SOCKADDR_IN` and `FI_SOCKADDR_IN6`
//!   (one getinfo result each, IPv4 first);
//! - capabilities `FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV |
//!   FI_REMOTE_CQ_DATA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
//!   FI_REMOTE_WRITE`;
//! - connection management: passive endpoints (`fi_passive_ep`, `fi_pep_bind` an EQ,
//!   `fi_listen` with the `FI_BACKLOG` backlog), `fi_connect` with up to
//!   [`proto::CM_DATA_SIZE`] bytes of CM data (`FI_OPT_CM_DATA_SIZE`), `FI_CONNREQ`
//!   events carrying the info (its `handle` names the request) and the data,
//!   `fi_accept` / `fi_reject` (with data), `FI_CONNECTED`, `FI_SHUTDOWN`, and an
//!   `FI_ECONNREFUSED` error event (carrying the reject data) on a rejected connect;
//!   `fi_getname` / `fi_getpeer`; nonblocking connect; `fi_shutdown`;
//! - messages: `send`/`sendv`/`sendmsg`/`inject`/`senddata`/`injectdata` and
//!   `recv`/`recvv`/`recvmsg`, and the tagged family through kit's tag matcher
//!   (`FI_PEEK`, `FI_CLAIM`, `FI_DISCARD`, ignore masks). A message that meets a posted
//!   receive is read straight from the socket into the receive's buffers (header first,
//!   then one `readv` into the posted iov); others are buffered as unexpected messages,
//!   bounded by the matcher's limits (when full the connection stops being read until
//!   receives are posted). `FI_ETRUNC` for a message longer than the receive;
//!   `fi_cancel` of posted receives; multi-receive buffers (`FI_MULTI_RECV`,
//!   `FI_OPT_MIN_MULTI_RECV`);
//! - RMA `read`/`write`/`writedata`/`inject_write`(+data), checked at the target
//!   against kit's `MrTable`: an unknown key (or access not granted) completes at the
//!   initiator with `FI_EACCES`, a range outside the region with `FI_EINVAL`. Writes
//!   complete when the target acknowledges them;
//! - atomics: every operation × datatype kit's atomic engine supports, executed at the
//!   target under the same MR checks (`atomicvalid` / `fetch_atomicvalid` /
//!   `compare_atomicvalid`, `fi_query_atomic`); they complete when the target answers
//!   (fetch and compare with the original values);
//! - completion semantics: sends complete when the whole message has been handed to
//!   the kernel (`FI_INJECT_COMPLETE`/`FI_TRANSMIT_COMPLETE`); with
//!   `FI_DELIVERY_COMPLETE` or `FI_COMMIT_COMPLETE` (no persistent memory: the same,
//!   docs/API.md) when the target acknowledges placement. Ordering: TCP is one
//!   byte stream and the target handles operations in arrival order, so
//!   `FI_ORDER_SAS` and the RMA orderings (RAR, RAW, WAR, WAW, SAR, SAW, RAS, WAS) hold;
//! - progress: `FI_PROGRESS_MANUAL` (reading a CQ, counter or EQ polls the nonblocking
//!   sockets, a bounded amount of work per call) and `FI_PROGRESS_AUTO` (kit's progress
//!   thread); `FI_THREAD_SAFE`.
//!
//! Not yet: `FI_RMA_EVENT`, shared contexts, scalable endpoints.
//!
//! # Parameters (`FI_TCP_<NAME>`)
//!
//! - `iface`: the network interface (e.g. `eth0`) whose address passive endpoints and
//!   outgoing connections use as their source. Unset: the route to the peer decides.
//!   A name no interface has is `FI_ENODATA` naming it when an endpoint binds. A
//!   passive endpoint on the wildcard address is named (`fi_getname`) by this
//!   interface's address, else the first up non-loopback interface's.
//! - `max_msg_size` (default 1 GiB), `inject_size` (default 128), `rx_size` / `tx_size`
//!   (default 256), `max_unexpected_bytes` (default 16 MiB), `read_ahead` (default
//!   16 KiB: one `recv` takes a small message's header and payload together, and the
//!   payload bytes that came with the header are copied once into the matched buffer;
//!   0: every payload goes straight from the socket into its buffer, one more
//!   `recv` per message);
//! - `disable_cma` (default false) and `cma_threshold` (default 64 KiB): see
//!   "Same-host copies" below;
//! - `local_congestion` (default `reno`): the congestion control (`TCP_CONGESTION`) of
//!   connections whose two ends are on this host, where there is no path to probe and
//!   the algorithm is pure per-acknowledgement cost (the system default here is often
//!   BBR, which also paces); `system`: leave the system's choice. A name the kernel
//!   refuses (not loaded, or not allowed for this user) leaves the default, logged.
//!
//! # Same-host copies
//!
//! When both ends of a connection are on this host (the peer's address is a loopback
//! address or the connection's own local address), each side proves to the other with a
//! real `process_vm_readv` of a fresh nonce that it is the process it claims to be
//! ([`proto`] describes the exchange). Once proven, messages and RMA reads of at least
//! `cma_threshold` bytes no longer travel through the socket: the sender passes a
//! descriptor of its buffers and the receiver copies the data straight from the
//! sender's memory into the matched receive buffer (one copy instead of the socket's
//! two), then acknowledges; an RMA read's target copies into the initiator's buffer.
//! A send so made completes when the receiver has copied it (delivery complete).
//! Where the kernel refuses cross-memory access (ptrace restrictions, another user,
//! another pid namespace) the proof fails and everything goes through the socket, as
//! with `FI_TCP_DISABLE_CMA=1`. A copy that fails later (the peer died) completes that
//! receive and the send in error with `FI_EIO`.
//!
//! # Wire format
//!
//! See [`proto`]: an 8-byte CM header (magic `oftc`, version, kind, data length) plus
//! data opens each connection; then each operation is a 40-byte little-endian header
//! (version, op, flags, rma iov count, atomic op/datatype, status, size, cq data, tag,
//! id), up to 4 remote iovs of 24 bytes, and the payload. It does not interoperate with
//! the C provider.
//!
//! # Module map
//!
//! [`proto`] wire format; [`sock`] the OS calls; [`fabric`] fabric, domain and passive
//! endpoint; [`ep`] the active endpoint and its progress.
//!
//! # Panics
//!
//! Nothing panics on application, peer or network input: bad arguments are errors with
//! the C library's codes; malformed bytes from a peer close that connection and raise an
//! `FI_EPROTO` error event on its EQ.

pub mod ep;
pub mod fabric;
pub mod proto;
pub mod sock;

use ofi_core::attr::{DomainAttr, Info, TxAttr};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest};
use ofi_core::provider::Host;
use ofi_core::{AddrFormat, Caps, EpType, MsgOrder, OpFlags, Protocol, Result, Version};
use ofi_kit::{info, param::Params};

pub use ep::Endpoint;
pub use fabric::{Domain, Fabric, PassiveEp};

/// The provider's name.
pub const NAME: &str = "tcp";

/// Largest I/O vector of one operation.
pub const IOV_LIMIT: usize = 4;

/// What the parameters resolved to; every object copies what it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Largest message.
    pub max_msg_size: usize,
    /// Largest inject.
    pub inject_size: usize,
    /// Receives an endpoint may have posted.
    pub rx_size: usize,
    /// Transmit queue depth.
    pub tx_size: usize,
    /// Bytes of unexpected messages an endpoint buffers.
    pub max_unexpected_bytes: usize,
    /// Bytes one read-ahead takes (0: none).
    pub read_ahead: usize,
    /// `FI_TCP_IFACE`: the interface whose address is the source.
    pub iface: Option<String>,
    /// `FI_TCP_DISABLE_CMA`: never use same-host copies.
    pub disable_cma: bool,
    /// `FI_TCP_CMA_THRESHOLD`: messages and reads of at least this many bytes use a
    /// same-host copy when the connection allows it.
    pub cma_threshold: usize,
    /// `FI_TCP_LOCAL_CONGESTION`: the congestion control of connections whose two ends
    /// are on this host (`None`: the system's default).
    pub local_congestion: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_msg_size: 1 << 30,
            inject_size: ep::INLINE_MAX,
            rx_size: 256,
            tx_size: 256,
            max_unexpected_bytes: 16 << 20,
            read_ahead: 16 << 10,
            iface: None,
            disable_cma: false,
            cma_threshold: 64 << 10,
            local_congestion: Some("reno".into()),
        }
    }
}

impl Settings {
    /// Reads the parameters (`fi_info -e` lists them in this order) and checks them.
    fn from_host(host: &Host) -> Result<Settings> {
        let p = Params::new(host, NAME);
        let mut s = ofi_kit::read_params!(p, Settings {
            iface: "iface", "Network interface whose address is used as the source address";
            max_msg_size: "max_msg_size", "Largest message, in bytes", 1..=usize::MAX;
            inject_size: "inject_size", "Largest inject, in bytes (at most 128)",
                0..=ep::INLINE_MAX;
            rx_size: "rx_size", "Receives an endpoint may have posted", 1..=usize::MAX;
            tx_size: "tx_size",
                "Transmit operations an endpoint may have outstanding (queued or awaiting \
                 the peer's answer)",
                1..=usize::MAX;
            max_unexpected_bytes: "max_unexpected_bytes",
                "Bytes of unexpected messages an endpoint buffers before it stops reading";
            read_ahead: "read_ahead",
                "Bytes read ahead of the parser, so a small message costs one recv (0: none; \
                 payload then always goes straight into the receive buffer)",
                0..=16 << 20;
            disable_cma: "disable_cma",
                "Never copy large payloads between processes of one host with \
                 process_vm_readv/writev; send them through the socket";
            cma_threshold: "cma_threshold",
                "Messages and RMA reads of at least this many bytes between processes of one \
                 host are copied with process_vm_readv/writev instead of streamed \
                 (FI_TCP_DISABLE_CMA=1 turns the copies off)",
                1..=usize::MAX;
            local_congestion: "local_congestion",
                "Congestion control of connections between processes of this host (no path to \
                 probe: the cheapest per acknowledgement; 'system': the system's default)";
        })?;
        s.inject_size = s.inject_size.min(s.max_msg_size);
        s.local_congestion = match s.local_congestion.take() {
            Some(v) if v == "system" => None,
            Some(v)
                if v.len() < 16 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                Some(v)
            }
            Some(v) => {
                return Err(p.invalid("local_congestion", v, "not a congestion control name"))
            }
            None => None,
        };
        if let Some(v) = &s.iface {
            if !iface_exists(v) {
                return Err(p.invalid(
                    "iface",
                    ofi_kit::diag::shorten(v, 64),
                    "no such network interface",
                ));
            }
        }
        Ok(s)
    }
}

impl TcpProvider {
    fn template(&self, fmt: AddrFormat) -> Info {
        let s = &self.settings;
        let caps = Caps::MSG
            | Caps::TAGGED
            | Caps::MULTI_RECV
            | Caps::REMOTE_CQ_DATA
            | Caps::SEND
            | Caps::RECV
            | Caps::FENCE
            | info::RMA_ATOMIC_CAPS;
        let order = MsgOrder::SAS
            | MsgOrder::RAR
            | MsgOrder::RAW
            | MsgOrder::WAR
            | MsgOrder::WAW
            | MsgOrder::SAR
            | MsgOrder::SAW
            | MsgOrder::RAS
            | MsgOrder::WAS;
        Info {
            caps,
            addr_format: fmt,
            tx_attr: TxAttr {
                caps: info::tx_caps(caps),
                // Every completion level is honoured per operation (one in order
                // stream: delivery is acknowledged by the peer).
                op_flags: OpFlags::COMPLETION
                    | OpFlags::INJECT_COMPLETE
                    | OpFlags::TRANSMIT_COMPLETE
                    | OpFlags::DELIVERY_COMPLETE
                    | OpFlags::COMMIT_COMPLETE,
                msg_order: order,
                inject_size: s.inject_size,
                size: s.tx_size,
                iov_limit: IOV_LIMIT,
                rma_iov_limit: proto::RMA_IOV_LIMIT,
                ..TxAttr::default()
            },
            rx_attr: info::rx_attr(caps, OpFlags::COMPLETION, order, s.rx_size, IOV_LIMIT),
            ep_attr: info::ordered_at_every_size(info::ep_attr(
                EpType::Msg,
                Protocol::SOCK_TCP,
                u32::from(proto::PROTO_VERSION),
                s.max_msg_size,
            )),
            domain_attr: DomainAttr {
                ep_cnt: 8192,
                tx_ctx_cnt: 8192,
                rx_ctx_cnt: 8192,
                mr_iov_limit: 1,
                max_err_data: proto::CM_DATA_SIZE,
                ..info::domain_attr(NAME)
            },
            fabric_attr: info::fabric_attr(NAME),
            ..Info::default()
        }
    }
}

ofi_kit::core_provider! {
    /// The `tcp` provider.
    pub struct TcpProvider(Settings) {
        NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![
            self.template(AddrFormat::SOCKADDR_IN),
            self.template(AddrFormat::SOCKADDR_IN6),
        ]
    }

    /// The framework's matcher with the IP resolver; then data progress becomes manual
    /// unless the hints asked for auto (as the C provider answers: a busy-polling
    /// application gets no progress thread competing with it), and each result names the
    /// NIC of its source address (`ofi_kit::nic`).
    fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        let mut out = info::getinfo_preferring_manual(self, req, &getinfo::IpResolver);
        ofi_kit::nic::fill(&mut out.infos);
        out
    }
}

#[cfg(feature = "plugin")]
ofi_core::export_provider!(TcpProvider);

/// Whether the system has a network interface named `name` (`if_nametoindex(3)`).
fn iface_exists(name: &str) -> bool {
    if name.len() >= libc::IF_NAMESIZE {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ofi_core::getinfo::check_info;
    use ofi_core::provider::Provider;
    use ofi_core::Progress;

    fn prov() -> TcpProvider {
        TcpProvider {
            settings: Settings::default(),
        }
    }

    #[test]
    fn templates_pass_msg_hints_and_refuse_dgram() {
        let t = prov().info_templates();
        let mut hints = Info::hints()
            .with_ep_type(EpType::Msg)
            .with_caps(Caps::MSG | Caps::TAGGED | Caps::RMA);
        hints.domain_attr.data_progress = Progress::Manual;
        assert!(check_info(&t[0], &hints, ofi_core::version::API_VERSION).is_ok());
        let hints = Info::hints().with_ep_type(EpType::Dgram);
        assert!(check_info(&t[0], &hints, ofi_core::version::API_VERSION).is_err());
    }

    #[test]
    fn each_result_names_the_nic_of_its_source_address() {
        let mut hints = Info::hints().with_ep_type(EpType::Msg);
        hints.addr_format = AddrFormat::SOCKADDR_IN;
        hints.src_addr = Some(ofi_core::Address::Inet("127.0.0.1:0".parse().unwrap()));
        let mut req = GetinfoRequest::new(ofi_core::version::API_VERSION);
        req.hints = Some(hints);
        ofi_conformance::nic::assert_every_nic_is_loopback(&prov().getinfo(&req));
    }

    /// Data progress is manual unless the hints ask for auto.
    #[test]
    fn data_progress_is_manual_unless_asked() {
        let p = prov();
        let ask = |progress: Progress| {
            let mut hints = Info::hints().with_ep_type(EpType::Msg);
            hints.domain_attr.data_progress = progress;
            let req = GetinfoRequest {
                version: ofi_core::version::API_VERSION,
                node: None,
                service: None,
                flags: ofi_core::GetinfoFlags::empty(),
                hints: Some(hints),
            };
            let out = p.getinfo(&req);
            assert!(!out.infos.is_empty(), "{:?}", out.error);
            out.infos
                .iter()
                .map(|i| i.domain_attr.data_progress)
                .collect::<Vec<_>>()
        };
        assert!(ask(Progress::Unspec).iter().all(|&p| p == Progress::Manual));
        assert!(ask(Progress::Manual).iter().all(|&p| p == Progress::Manual));
        assert!(ask(Progress::Auto).iter().all(|&p| p == Progress::Auto));
    }
}
