//! ofi-prov-udp: the `udp` provider — `FI_EP_DGRAM` endpoints over UDP sockets, the
//! datagram base `ofi_rxd` layers reliability on.
//!
//! # What it offers
//!
//! - endpoint type `FI_EP_DGRAM`; capabilities `FI_MSG | FI_SEND | FI_RECV |
//!   FI_MULTI_RECV | FI_SOURCE | FI_SOURCE_ERR | FI_REMOTE_CQ_DATA | FI_LOCAL_COMM |
//!   FI_REMOTE_COMM | FI_MULTICAST`;
//! - addresses `FI_SOCKADDR_IN` (IPv4), `FI_SOCKADDR_IN6` (IPv6) and `FI_ADDR_STR`
//!   (`fi_sockaddr_in://a.b.c.d:port`, `fi_sockaddr_in6://[::1]:port`); getinfo
//!   resolves `node`/`service` with the core's `IpResolver` (`FI_SOURCE` picks the
//!   local address and port). Every result gets the source address its endpoint
//!   binds, one other hosts reach (see "Source address" below); `fi_setname` before
//!   `fi_enable` rebinds an endpoint;
//! - messages: `fi_send`/`sendv`/`sendmsg`/`inject`/`senddata`/`injectdata`,
//!   `fi_recv`/`recvv`/`recvmsg`, up to `max_msg_size` = 65495 bytes (the largest
//!   IPv4 UDP payload minus this provider's 12-byte header; larger → `FI_EMSGSIZE`),
//!   `inject_size` = `max_msg_size`, `iov_limit` 4; a receive buffer too small →
//!   error completion `FI_ETRUNC` with `olen`; `fi_cancel` of a receive →
//!   `FI_ECANCELED`; `FI_MULTI_RECV` with `FI_OPT_MIN_MULTI_RECV` (default 64 bytes);
//!   remote CQ data (`cq_data_size` 8);
//! - completion queues of every format (the kit's `KitCq`), counters (`KitCntr`, bound
//!   with `FI_SEND`/`FI_RECV`), `FI_SELECTIVE_COMPLETION`, address vectors `FI_AV_MAP`
//!   and `FI_AV_TABLE` (`KitAv`), event queues (`KitEq`), wait sets (`KitWait`);
//! - `FI_THREAD_SAFE`; data progress `FI_PROGRESS_MANUAL` by default (reading a CQ or
//!   counter polls the sockets of the endpoints of the domain, nonblocking, a bounded
//!   batch each) or `FI_PROGRESS_AUTO` on request (the kit's progress thread);
//!   `FI_RM_ENABLED` (a send whose completion would not fit its CQ is `FI_EAGAIN`; a
//!   datagram is not taken off the socket while its CQ is full).
//!
//! - multicast (`FI_MULTICAST`): `Endpoint::join` of the core (interface minor 1) joins an
//!   IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) group on the endpoint's socket and inserts
//!   the group's address into the endpoint's AV: the returned fabric address sends to
//!   the group. To receive, bind the endpoint (`src_addr`) to the wildcard address and
//!   the group's port. `FI_SEND` alone joins send-only (no membership). With an EQ
//!   bound, `FI_JOIN_COMPLETE` is queued at once. Dropping the membership leaves.
//!
//! UDP is unreliable: a datagram may be lost (for example when the receiver's socket
//! buffer is full) and nothing reports it. A send completes when the kernel has taken
//! the datagram.
//!
//! # Parameters
//!
//! Environment `FI_UDP_<NAME>` (or `plugins.toml`); `fi_info -e` lists them:
//! - `rx_size` (default 1024): receives an endpoint may have posted;
//! - `tx_size` (default 1024): reported `tx_attr.size`;
//! - `sndbuf`, `rcvbuf` (default 0 = the kernel's): socket buffer sizes in bytes;
//! - `batch` (default 1): datagrams one progress round takes from one socket (1: a
//!   datagram is handed to the CQ at once, not after another `recvmsg` that usually
//!   finds nothing; bursts are read one datagram per `fi_cq_read` either way);
//! - `iface` (default empty): the network interface whose address endpoints bind when
//!   the application names none (see "Source address");
//! - `mcast_if` (default empty): IPv4 address of the interface multicast groups are
//!   joined on and sent from (for example `127.0.0.1`); empty: the kernel's choice;
//! - `peer_sockets` (default 1, at most 64): connected sockets an endpoint makes for
//!   its first unicast destinations (see [`ep`], "Peer sockets"); 0: every datagram
//!   goes through the endpoint's one socket.
//!
//! # Source address
//!
//! Chosen by getinfo for each result (the rules of `ofi_kit::netif`): the `src_addr`
//! asked for (a wildcard one takes `FI_UDP_IFACE`'s address when that is set); else
//! `FI_UDP_IFACE`'s address; else, with a destination, the routing table's source for
//! it; else the first up, running, non-loopback interface's (loopback only on a host
//! without one). An `FI_UDP_IFACE` no interface has is `FI_ENODATA` naming it; a result
//! of a family the interface has no address of is dropped. `fi_getname` of an endpoint
//! bound to the wildcard address names that interface's address with the bound port,
//! never `0.0.0.0`.
//!
//! # Wire format
//!
//! Every datagram is a 12-byte header followed by the payload; see [`proto`]
//! (magic `0xd6`, version 1, flags, remote CQ data). A datagram with a malformed
//! header is dropped and counted ([`ep::Endpoint::malformed`]), never delivered.
//!
//! # Module map
//!
//! - [`proto`]: the header (checked parse); [`sock`]: the only code calling the OS;
//! - [`fabric`]: fabric, domain and the AV wrapper; [`ep`]: the endpoint and its data
//!   path; `watch`: the wait-fd watcher of manual-progress domains.
//!
//! # Invariants and panics
//!
//! Nothing panics on application, peer or network input: bad arguments are errors with
//! the C library's codes; a malformed datagram is dropped. The data path allocates
//! nothing (errors on it carry only their code; an `FI_SOURCE_ERR` error entry carries
//! the sender's address; with `FI_SOURCE` on an `FI_ADDR_STR` endpoint the sender's
//! address is formatted as text for the AV lookup) and takes the receive-queue lock (on receive), the AV's read
//! lock and the CQ's lock.
//!
//! # Waiting
//!
//! Blocking reads (`fi_cq_sread`, `fi_cntr_wait`) are the kit's: with manual progress
//! they alternate polling the sockets with sleeps of at most 1 ms; with auto progress
//! the progress thread polls and wakes them. Wait fds (`FI_WAIT_FD`/`FI_WAIT_UNSPEC`,
//! for epoll): with manual progress the first CQ or counter with a wait fd starts a
//! per-domain watcher thread that sleeps in `poll(2)` on the sockets of the endpoints
//! with receives posted and drives progress when one becomes readable, so the wait fd
//! becomes readable when a datagram has arrived (`watch` module).

pub mod ep;
pub mod fabric;
pub mod proto;
pub mod sock;
mod watch;

use ofi_core::attr::{DomainAttr, EpAttr, Info, RxAttr, TxAttr};
use ofi_core::getinfo::{self, GetinfoOutcome, GetinfoRequest, IpResolver};
use ofi_core::provider::Host;
use ofi_core::{
    AddrFormat, Address, Caps, EpType, Errno, Error, MsgOrder, Protocol, Result, Version,
};
use ofi_kit::netif::{self, IfName};
use ofi_kit::{info, param::Params};

pub use ep::Endpoint;
pub use fabric::{Domain, Fabric};

/// The provider's name.
pub const NAME: &str = "udp";

/// Largest I/O vector of one send or receive: kit's (the message calls arrive as
/// kit's buffer lists).
pub const IOV_LIMIT: usize = ofi_kit::iov::IOV_LIMIT;

/// Largest UDP payload over IPv4 (65535 − 20 − 8).
pub const UDP_MAX_PAYLOAD: usize = 65507;

/// Largest message: the UDP payload minus the header.
pub const MAX_MSG_SIZE: usize = UDP_MAX_PAYLOAD - proto::HDR_LEN;

/// Default `FI_OPT_MIN_MULTI_RECV`.
pub const DEFAULT_MIN_MULTI_RECV: usize = 64;

/// Every capability an endpoint of this provider can have.
pub const CAPS: Caps = Caps::MSG
    .union(Caps::SEND)
    .union(Caps::RECV)
    .union(Caps::MULTI_RECV)
    .union(Caps::SOURCE)
    .union(Caps::SOURCE_ERR)
    .union(Caps::AV_USER_ID)
    .union(Caps::REMOTE_CQ_DATA)
    .union(Caps::LOCAL_COMM)
    .union(Caps::REMOTE_COMM)
    .union(Caps::MULTICAST);

/// The largest `FI_UDP_PEER_SOCKETS`.
pub const MAX_PEER_SOCKETS: usize = 64;

/// What the parameters resolved to at init; every object copies what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Receives an endpoint may have posted.
    pub rx_size: usize,
    /// Reported transmit queue size.
    pub tx_size: usize,
    /// `SO_SNDBUF` (0: the kernel's default).
    pub sndbuf: usize,
    /// `SO_RCVBUF` (0: the kernel's default).
    pub rcvbuf: usize,
    /// Datagrams one progress round takes from one socket.
    pub batch: usize,
    /// The IPv4 interface (its address) multicast groups are joined on and sent from;
    /// `None`: the kernel's choice.
    pub mcast_if: Option<std::net::Ipv4Addr>,
    /// Connected sockets an endpoint makes for its first unicast destinations
    /// ([`ep`]'s "Peer sockets"; 0: none).
    pub peer_sockets: usize,
    /// `FI_UDP_IFACE`: the interface whose address is the source of results and
    /// endpoints that name none (see "Source address" in the crate docs).
    pub iface: Option<IfName>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            rx_size: 1024,
            tx_size: 1024,
            sndbuf: 0,
            rcvbuf: 0,
            batch: 1,
            mcast_if: None,
            peer_sockets: 1,
            iface: None,
        }
    }
}

impl Settings {
    /// Reads the parameters (`fi_info -e` lists them in this order) and checks them.
    fn from_host(host: &Host) -> Result<Settings> {
        let p = Params::new(host, NAME);
        let mut s = ofi_kit::read_params!(p, Settings {
            rx_size: "rx_size", "Receives an endpoint may have posted at once", 1..=usize::MAX;
            tx_size: "tx_size", "Transmit queue size reported in tx_attr.size", 1..=usize::MAX;
            sndbuf: "sndbuf", "Socket send buffer size in bytes (0: the kernel's default)";
            rcvbuf: "rcvbuf", "Socket receive buffer size in bytes (0: the kernel's default)";
            batch: "batch",
                "Datagrams one progress round takes from one endpoint's socket (1: hand each \
                 datagram over at once)",
                1..=usize::MAX;
            peer_sockets: "peer_sockets",
                "Connected sockets an endpoint makes for its first unicast destinations \
                 (routed once instead of per datagram; 0: none, at most 64)",
                0..=MAX_PEER_SOCKETS;
        })?;
        let mcast_if = p.text(
            "mcast_if",
            "IPv4 address of the interface multicast groups are joined on and sent from \
             (empty: the kernel's choice)",
            Some(""),
        )?;
        let iface = p.text(
            "iface",
            "Network interface (e.g. eth0) whose address endpoints bind when the \
             application names no source address (empty: the interface that routes to \
             the destination, else the first up non-loopback interface)",
            Some(""),
        )?;
        s.iface = iface
            .map(|v| {
                IfName::new(&v).ok_or_else(|| {
                    p.invalid(
                        "iface",
                        &v,
                        format_args!(
                            "not an interface name (1 to {} bytes, no white space or '/')",
                            netif::IFNAME_MAX
                        ),
                    )
                })
            })
            .transpose()?;
        s.mcast_if = mcast_if
            .map(|v| {
                v.parse()
                    .map_err(|_| p.invalid("mcast_if", &v, "not an IPv4 address"))
            })
            .transpose()?;
        Ok(s)
    }
}

impl UdpProvider {
    /// The template for one address format.
    fn template(&self, addr_format: AddrFormat) -> Info {
        let s = &self.settings;
        Info {
            caps: CAPS,
            addr_format,
            tx_attr: TxAttr {
                caps: Caps::MSG | Caps::SEND | Caps::MULTICAST,
                msg_order: MsgOrder::SAS,
                inject_size: MAX_MSG_SIZE,
                size: s.tx_size,
                iov_limit: IOV_LIMIT,
                ..TxAttr::default()
            },
            rx_attr: RxAttr {
                // FI_MULTICAST is a transmit-side capability (fi_endpoint(3)): a
                // joined group's messages arrive through plain receives.
                caps: Caps::MSG
                    | Caps::RECV
                    | Caps::MULTI_RECV
                    | Caps::SOURCE
                    | Caps::SOURCE_ERR
                    | Caps::AV_USER_ID
                    | Caps::REMOTE_CQ_DATA,
                msg_order: MsgOrder::SAS,
                size: s.rx_size,
                iov_limit: IOV_LIMIT,
                ..RxAttr::default()
            },
            ep_attr: EpAttr {
                mem_tag_format: 0,
                ..info::ep_attr(
                    EpType::Dgram,
                    Protocol::UDP,
                    u32::from(proto::VERSION),
                    MAX_MSG_SIZE,
                )
            },
            // Data progress: the most capable level, so hints asking either pass;
            // getinfo reports manual unless auto was asked for.
            domain_attr: DomainAttr {
                mr_key_size: 0,
                max_err_data: 64,
                mr_cnt: 0,
                ..info::domain_attr(NAME)
            },
            fabric_attr: info::fabric_attr(NAME),
            ..Info::default()
        }
    }
}

/// An IP socket address from an address of this provider's formats (`None`: not IP).
fn ip_of(a: &Address) -> Option<std::net::SocketAddr> {
    match a {
        Address::Str(s) => Address::parse_addr_str(s).ok()?.socket_addr(),
        a => a.socket_addr(),
    }
}

/// `sa` as an address of `format` (`FI_ADDR_STR`: its text form).
fn in_format(sa: std::net::SocketAddr, format: AddrFormat) -> Address {
    let a = Address::from(sa);
    if format == AddrFormat::STR {
        Address::Str(a.to_addr_str())
    } else {
        a
    }
}

/// Whether a result of `format` (with these addresses) is IPv6.
fn is_v6(format: AddrFormat, src: Option<&Address>, dest: Option<&Address>) -> bool {
    match format {
        AddrFormat::SOCKADDR_IN6 => true,
        AddrFormat::SOCKADDR_IN => false,
        _ => src.or(dest).and_then(ip_of).is_some_and(|sa| sa.is_ipv6()),
    }
}

/// The address of `FI_UDP_IFACE` in one family: `Ok(None)` when the interface has no
/// address of that family.
///
/// # Errors
/// `FI_ENODATA` naming the interface when none of that name exists.
pub(crate) fn iface_ip(iface: &IfName, v6: bool) -> Result<Option<std::net::IpAddr>> {
    if !iface.exists() {
        return Err(Error::new(
            Errno::ENODATA,
            netif::no_such_iface("FI_UDP_IFACE", iface),
        ));
    }
    Ok(netif::iface_ip(iface.as_str(), v6))
}

/// Give `info` the source address its endpoint binds (see "Source address" in the
/// crate docs). `Ok(false)`: drop the result (`FI_UDP_IFACE` has no address of its
/// family).
fn choose_source(info: &mut Info, iface: Option<&IfName>) -> Result<bool> {
    let v6 = is_v6(
        info.addr_format,
        info.src_addr.as_ref(),
        info.dest_addr.as_ref(),
    );
    let src = info.src_addr.as_ref().and_then(ip_of);
    if src.is_some_and(|sa| !sa.ip().is_unspecified()) {
        // A specific address asked for: kept whatever the interface parameter says.
        return Ok(true);
    }
    let wanted = match iface {
        Some(i) => match iface_ip(i, v6)? {
            Some(ip) => Some(ip),
            None => return Ok(false),
        },
        None => None,
    };
    let chosen = match (src, info.dest_addr.as_ref().and_then(ip_of)) {
        // A wildcard asked for takes the interface's address when one is set.
        (Some(sa), _) => match wanted {
            Some(ip) => Some(netif::with_ip(sa, ip)),
            None => return Ok(true),
        },
        (None, Some(dest)) => wanted
            .or_else(|| netif::route_source(&dest))
            .map(|ip| std::net::SocketAddr::new(ip, 0)),
        (None, None) if info.dest_addr.is_none() => Some(std::net::SocketAddr::new(
            wanted.unwrap_or_else(|| netif::default_ip(v6)),
            0,
        )),
        (None, None) => None,
    };
    if let Some(sa) = chosen {
        info.src_addr = Some(in_format(sa, info.addr_format));
    }
    Ok(true)
}

ofi_kit::core_provider! {
    /// The `udp` provider.
    pub struct UdpProvider(Settings) {
        NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
    }

    fn info_templates(&self) -> Vec<Info> {
        vec![
            self.template(AddrFormat::SOCKADDR_IN),
            self.template(AddrFormat::SOCKADDR_IN6),
            self.template(AddrFormat::STR),
        ]
    }

    /// The framework's matcher with the IP resolver; then data progress becomes manual
    /// unless the hints asked for auto, and every result gets the source address its
    /// endpoint binds ("Source address" in the crate docs): `FI_UDP_IFACE`'s, the
    /// route's to the destination, or the first up non-loopback interface's, and the NIC
    /// of that address (`ofi_kit::nic`). An `FI_UDP_IFACE` that names no interface is
    /// `FI_ENODATA` naming it.
    fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
        let mut out = info::getinfo_preferring_manual(self, req, &IpResolver);
        let iface = self.settings.iface.as_ref();
        let mut kept = Vec::with_capacity(out.infos.len());
        for mut i in std::mem::take(&mut out.infos) {
            match choose_source(&mut i, iface) {
                Ok(true) => kept.push(i),
                Ok(false) => {}
                Err(e) => {
                    // No result of any template: each is rejected for the parameter.
                    let name = iface.map(IfName::to_string).unwrap_or_default();
                    out.verdicts = (0..self.info_templates().len())
                        .map(|t| {
                            getinfo::Verdict::rejected(
                                NAME,
                                t,
                                getinfo::Mismatch::new(
                                    "FI_UDP_IFACE",
                                    name.clone(),
                                    "no network interface of that name",
                                ),
                            )
                        })
                        .collect();
                    out.error = Some(e);
                    return out;
                }
            }
        }
        if kept.is_empty() && out.error.is_none() {
            if let Some(i) = iface {
                out.error = Some(Error::new(
                    Errno::ENODATA,
                    format!("FI_UDP_IFACE={i}: the interface has no address of the format asked"),
                ));
            }
        }
        ofi_kit::nic::fill(&mut kept);
        out.infos = kept;
        out
    }
}

#[cfg(feature = "plugin")]
ofi_core::export_provider!(UdpProvider);

#[cfg(test)]
mod tests {
    use super::*;

    use ofi_core::provider::Provider;
    use ofi_core::Progress;

    fn prov() -> UdpProvider {
        UdpProvider {
            settings: Settings::default(),
        }
    }

    /// A getinfo request for node 127.0.0.1, service 7471 (no hints).
    fn loopback_request() -> GetinfoRequest {
        let mut req = GetinfoRequest::new(ofi_core::version::API_VERSION);
        req.node = Some("127.0.0.1".into());
        req.service = Some("7471".into());
        req
    }

    #[test]
    fn getinfo_without_hints_is_manual_with_reachable_sources() {
        let out = prov().getinfo(&GetinfoRequest::new(ofi_core::version::API_VERSION));
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.infos.len(), 3);
        for i in &out.infos {
            assert_eq!(i.domain_attr.data_progress, Progress::Manual);
            assert_eq!(i.ep_attr.ep_type, EpType::Dgram);
        }
        // The first up non-loopback interface's address (loopback only without one).
        let v4 = netif::default_ip(false);
        assert_eq!(
            out.infos[0].src_addr,
            Some(Address::Inet(
                std::net::SocketAddr::new(v4, 0)
                    .to_string()
                    .parse()
                    .unwrap()
            ))
        );
        assert_eq!(
            out.infos[1]
                .src_addr
                .as_ref()
                .and_then(Address::socket_addr),
            Some(std::net::SocketAddr::new(netif::default_ip(true), 0))
        );
        assert_eq!(
            out.infos[2].src_addr,
            Some(Address::Str(format!("fi_sockaddr_in://{v4}:0")))
        );
    }

    fn with_iface(name: &str) -> UdpProvider {
        UdpProvider {
            settings: Settings {
                iface: IfName::new(name),
                ..Settings::default()
            },
        }
    }

    #[test]
    fn iface_chooses_the_source_and_a_missing_one_is_an_error() {
        let req = GetinfoRequest::new(ofi_core::version::API_VERSION);
        let out = with_iface("lo").getinfo(&req);
        assert!(out.error.is_none(), "{:?}", out.error);
        let srcs: Vec<String> = out
            .infos
            .iter()
            .map(|i| i.src_addr.as_ref().unwrap().to_addr_str())
            .collect();
        assert!(
            srcs.contains(&"fi_sockaddr_in://127.0.0.1:0".to_string()),
            "{srcs:?}"
        );
        let out = with_iface("nosuchif0").getinfo(&req);
        assert!(out.infos.is_empty());
        let e = out.error.expect("an error");
        assert_eq!(e.code(), Errno::ENODATA);
        assert!(e.to_string().contains("FI_UDP_IFACE=nosuchif0"), "{e}");
    }

    #[test]
    fn a_destination_gets_the_routes_source_and_a_wildcard_the_interfaces() {
        let mut req = loopback_request();
        let mut h = Info::hints();
        h.addr_format = AddrFormat::SOCKADDR_IN;
        req.hints = Some(h);
        let out = prov().getinfo(&req);
        assert_eq!(
            out.infos[0].src_addr,
            Some(Address::Inet("127.0.0.1:0".parse().unwrap())),
            "loopback because the destination is"
        );
        // FI_SOURCE with a service only: the wildcard stays unless an interface is set.
        req.node = None;
        req.flags = ofi_core::GetinfoFlags::SOURCE;
        let out = prov().getinfo(&req);
        assert_eq!(
            out.infos[0].src_addr,
            Some(Address::Inet("0.0.0.0:7471".parse().unwrap()))
        );
        let out = with_iface("lo").getinfo(&req);
        assert_eq!(
            out.infos[0].src_addr,
            Some(Address::Inet("127.0.0.1:7471".parse().unwrap()))
        );
    }

    #[test]
    fn each_result_names_the_nic_of_its_source_address() {
        ofi_conformance::nic::assert_every_nic_is_loopback(&prov().getinfo(&loopback_request()));
    }

    #[test]
    fn getinfo_node_service_fills_dest() {
        let req = loopback_request();
        let out = prov().getinfo(&req);
        let v4 = out
            .infos
            .iter()
            .find(|i| i.addr_format == AddrFormat::SOCKADDR_IN)
            .expect("an IPv4 result");
        assert_eq!(
            v4.dest_addr,
            Some(Address::Inet("127.0.0.1:7471".parse().unwrap()))
        );
    }

    #[test]
    fn getinfo_auto_progress_when_asked() {
        let mut h = Info::hints();
        h.domain_attr.data_progress = Progress::Auto;
        let mut req = GetinfoRequest::new(ofi_core::version::API_VERSION);
        req.hints = Some(h);
        let out = prov().getinfo(&req);
        assert!(!out.infos.is_empty());
        assert!(out
            .infos
            .iter()
            .all(|i| i.domain_attr.data_progress == Progress::Auto));
    }
}
