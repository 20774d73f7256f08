//! ofi-prov-shm: `FI_EP_RDM` between processes of one host, over shared memory and
//! cross-memory attach (CMA).
//!
//! # What it offers
//!
//! - endpoint type `FI_EP_RDM`; capabilities `FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC |
//!   FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |
//!   FI_SOURCE | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_REMOTE_CQ_DATA | FI_LOCAL_COMM`
//!   (no `FI_REMOTE_COMM`: peers are processes of this host); `FI_DELIVERY_COMPLETE`
//!   and `FI_COMMIT_COMPLETE` (as delivery complete: no persistent memory);
//! - addresses `FI_ADDR_STR`: `fi_shm://<name>`, where `<name>` is the endpoint's region
//!   in `/dev/shm` (given as the info's `src_addr`, or generated as
//!   `ofi-shm-<pid>-<n>`);
//! - the kit's CQs (every format, `readfrom`, errors, `sread`, wait fd), counters
//!   (`FI_SEND`, `FI_RECV`, `FI_WRITE`, `FI_READ` bindings), EQs, wait sets, AVs (map
//!   and table) and MR table (`mr_mode` from the info, among `FI_MR_VIRT_ADDR`,
//!   `FI_MR_PROV_KEY`, `FI_MR_ALLOCATED`, `FI_MR_LOCAL`; none by default);
//! - data progress manual (reading a CQ polls the rings, at most [`ep::POLL_BUDGET`]
//!   slots per ring per call) or auto (the kit's progress thread);
//! - scalable endpoints (up to [`MAX_EP_CTX`] transmit and receive contexts, each an
//!   endpoint of its own underneath, receive contexts named by `fi_rx_addr`), shared
//!   receive contexts (the bound endpoints' names link to the context's region) and
//!   shared transmit contexts, and `FI_RMA_EVENT` remote counters: see
//!   `docs/providers/shm.md`;
//! - named AVs shared by the processes of the host (`FI_SHARED_AV`, [`av`]) and
//!   authorization keys (`auth_key`: endpoints of different keys cannot reach each
//!   other, see [`region`]).
//!
//! # The region ([`region`])
//!
//! Each endpoint owns one region: a header (magic, version, owner pid and start time,
//! size, geometry) and `rings` rings. A peer that sends to the endpoint maps the region
//! on its first send, claims a free ring with a compare-and-swap and writes its identity
//! (pid, name, CMA probe word). A ring is a single-producer single-consumer queue of
//! fixed 256-byte slots ([`ring`]: publish by a per-slot sequence word with
//! Release/Acquire, consumer tail on its own cache line, producer head private), a
//! return ring of acknowledgements, and a few bounce chunks. Everything is offsets from
//! the mapping's start, never pointers. A peer's header is validated against the file
//! size when it is mapped, and every length, index and count read from a slot is
//! checked ([`proto::Slot::parse`]) before use, so a corrupt or hostile region is reported
//! (the slot skipped and counted) — no read or write ever leaves the mapping.
//!
//! # Protocols ([`proto`])
//!
//! - **inline**: messages up to [`proto::INLINE_CAP`] (216) bytes travel in the slot;
//!   the send completes at once (no syscall, no allocation, no contended lock);
//! - **eager bounce**: messages up to one bounce chunk (64 KiB by default) are copied
//!   into a chunk and complete at once; the receiver copies them straight into the
//!   matched receive;
//! - **inject**: `fi_inject*` and `FI_INJECT` take up to [`proto::INJECT_SIZE`] (4096)
//!   bytes: inline or eager bounce, or from a private copy when no chunk is free;
//! - **bounce pipeline**: messages up to `cma_threshold` (4 MiB by default) stream
//!   through the ring's bounce chunks, fragment by fragment, sender and receiver
//!   copying in parallel (measured here 2–3× faster than CMA, see `docs/providers/shm.md`);
//! - **CMA**: longer messages post a request naming the sender's buffers; the receiver
//!   copies straight into the matched receive buffer with `process_vm_readv` and
//!   acknowledges; the send completes on the ack. The receiver probes CMA once per
//!   sender with a real `process_vm_readv` of the sender's probe word; when it is
//!   refused (or disabled), every size takes the bounce pipeline;
//! - **RMA**: writes up to [`proto::RMA_INLINE_CAP`] bytes carry their data in the
//!   slot; writes up to `cma_threshold` (or of any size without CMA) stream through the
//!   bounce chunks; larger writes and all reads are done by the target with
//!   `process_vm_readv`/`process_vm_writev`. The target checks key, range and access in
//!   the kit's MR table first (a write's whole range before its first fragment); the
//!   initiator completes on the target's ack, which carries the table's error code
//!   (`FI_ENOKEY`, `FI_EACCES`, `FI_EFAULT`, …);
//! - **atomics**: the target applies the operation with the kit's atomic engine under
//!   a process-wide lock set; operand and compare bytes travel in the slot when they
//!   fit ([`proto::ATOMIC_INLINE_CAP`]), else by CMA; fetched values return by CMA.
//!
//! `FI_DELIVERY_COMPLETE` (and `FI_COMMIT_COMPLETE`, the same here: docs/API.md)
//! asks the receiver for an ack once it has taken the message
//! in: copied into a receive, or buffered as unexpected (libfabric's delivery
//! complete); a message read by CMA is read when a receive matches it, so it is
//! acknowledged then.
//!
//! Limits: without CMA (refused, or `disable_cma`), RMA reads, atomics whose operands
//! do not fit a slot and fetching atomics complete with `FI_EOPNOTSUPP`; RMA takes one
//! remote buffer (`rma_iov_limit` 1) and atomics one buffer per vector.
//!
//! # Robustness
//!
//! A peer that dies is noticed (pid and start-time check, at most every
//! [`ep::LIVENESS_EVERY`] of progress and whenever a ring is full): its pending sends
//! complete with `FI_ECONNRESET`, later sends fail with `FI_ECONNREFUSED`; a receiver
//! drains and then releases the rings of senders that closed or died. A region left by
//! a dead process is unlinked by the next endpoint opened on the host; a live one is
//! never touched (nor any file in `/dev/shm` that is not a region of this provider);
//! an endpoint's region name is unlinked when it closes. (Processes in different pid
//! namespaces that share `/dev/shm` cannot see each other's pids and must not use
//! this provider together.)
//!
//! # Parameters (environment `FI_SHM_<NAME>`, or `plugins.toml`)
//!
//! - `disable_cma` (bool, default false): never use CMA; large messages go through the
//!   bounce chunks;
//! - `cma_threshold` (size, default 4194304): messages longer than this use CMA;
//! - `rings` (size, default 32): peers that can send to one endpoint at once;
//! - `ring_size` (size, default 64, a power of two): slots per ring;
//! - `bounce_chunks` (size, default 16) and `bounce_chunk_size` (size, default 65536).
//!
//! # What may panic
//!
//! Nothing on application or peer input: bad arguments are errors with the C library's
//! codes; bad shared memory is logged and skipped.

#[cfg(not(all(loom, test)))]
pub mod av;
#[cfg(not(all(loom, test)))]
pub mod ep;
#[cfg(not(all(loom, test)))]
pub mod fabric;
#[cfg(not(all(loom, test)))]
pub mod proto;
#[cfg(not(all(loom, test)))]
pub mod region;
pub mod ring;

#[cfg(not(all(loom, test)))]
pub use provider::*;

#[cfg(not(all(loom, test)))]
mod provider {
    use ofi_core::attr::{DomainAttr, Info};
    use ofi_core::getinfo::{GetinfoOutcome, GetinfoRequest, NoResolver};
    use ofi_core::provider::Host;
    use ofi_core::{
        AddrFormat, AvType, Caps, EpType, Errno, Error, MsgOrder, OpFlags, Progress, Protocol,
        Result, Version,
    };
    use ofi_kit::{info, param::Params};

    use crate::fabric::Fabric;
    use crate::region::Geometry;

    /// The provider's name.
    pub const NAME: &str = "shm";
    /// Address prefix of `FI_ADDR_STR` addresses.
    pub const ADDR_PREFIX: &str = "fi_shm://";
    /// Largest I/O vector of one operation (what the kit's `IoList` holds).
    pub const IOV_LIMIT: usize = ofi_kit::iov::IOV_LIMIT;
    /// Largest message.
    pub const MAX_MSG_SIZE: usize = 64 << 20;
    /// Most transmit (and receive) contexts of a scalable endpoint
    /// (`max_ep_tx_ctx`, `max_ep_rx_ctx`).
    pub const MAX_EP_CTX: usize = 64;

    /// The ordering claimed in `tx_attr.msg_order` and `rx_attr.msg_order`: every
    /// `FI_ORDER_*` bit (sends, RMA and atomics against each other), at every size
    /// (`max_order_*_size` = `max_msg_size`).
    ///
    /// Why it holds: everything an endpoint (or a transmit context) issues to one peer
    /// enters that peer's region through one ring, the sender's own single-producer
    /// queue, in issue order — a slot (inline message, inline write, RMA by CMA,
    /// atomic) is published only while no queued operation waits for that ring
    /// (otherwise the post is `FI_EAGAIN`), and queued operations (bounce-streamed
    /// sends and writes) go out in the order queued. The target takes a ring's slots
    /// in order and carries each RMA or atomic out before the next (its CMA copy, the
    /// inline copy, a streamed write's fragment, an atomic under the atomic locks); a
    /// slot that must wait (an unexpected message without room) stalls the ring, so
    /// nothing passes it; a send's data is copied into its matched receive as its slots
    /// are taken (a CMA send's by the receiver at once). Hence every pair of RMA,
    /// atomic and send operations to a peer keeps its order.
    pub const ORDER: MsgOrder = MsgOrder::all();

    /// What the parameters resolved to at init.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Settings {
        /// Never use CMA (`FI_SHM_DISABLE_CMA`).
        pub disable_cma: bool,
        /// Messages longer than this use CMA (when allowed); shorter ones stream
        /// through the bounce chunks (`FI_SHM_CMA_THRESHOLD`).
        pub cma_threshold: usize,
        /// Geometry of each endpoint's region.
        pub geometry: Geometry,
        /// Largest message.
        pub max_msg_size: usize,
        /// Receives an endpoint may have posted.
        pub rx_size: usize,
        /// Sends an endpoint may have outstanding (beyond inline ones).
        pub tx_size: usize,
        /// The authorization tag of the endpoint's key (set per endpoint by the
        /// domain; [`ofi_kit::auth::AuthTag::NONE`] without a key).
        pub auth: ofi_kit::auth::AuthTag,
    }

    impl Default for Settings {
        fn default() -> Settings {
            Settings {
                disable_cma: false,
                cma_threshold: 4 << 20,
                geometry: Geometry {
                    rings: 32,
                    slots: 64,
                    chunks: 16,
                    chunk_size: 64 << 10,
                },
                max_msg_size: MAX_MSG_SIZE,
                rx_size: 1024,
                tx_size: 1024,
                auth: ofi_kit::auth::AuthTag::NONE,
            }
        }
    }

    impl Settings {
        /// Reads the parameters (`fi_info -e` lists them in this order) and checks them.
        fn from_host(host: &Host) -> Result<Settings> {
            let p = Params::new(host, NAME);
            let s = ofi_kit::read_params!(p, Settings {
                disable_cma: "disable_cma",
                    "Never use cross-memory attach; large messages go through bounce buffers";
                cma_threshold: "cma_threshold",
                    "Messages longer than this many bytes use CMA (when allowed); shorter ones \
                     stream through the bounce buffers";
                geometry.rings: "rings",
                    "Peers that can send to one endpoint at once (rings per region)";
                geometry.slots: "ring_size", "Slots per ring (a power of two, 2 to 4096)";
                geometry.chunks: "bounce_chunks", "Bounce chunks per ring (1 to 16)";
                geometry.chunk_size: "bounce_chunk_size",
                    "Bytes per bounce chunk (a multiple of 64, at most 4 MiB)";
            })?;
            s.geometry.validate(usize::MAX).map_err(|e| {
                Error::new(Errno::EINVAL, format!("{NAME} parameters: {}", e.message()))
            })?;
            Ok(s)
        }
    }

    impl ShmProvider {
        fn template(&self, av_type: AvType) -> Info {
            let s = &self.settings;
            let caps = ofi_kit::info::RDM_MSG_CAPS
                | ofi_kit::info::RMA_ATOMIC_CAPS
                | Caps::NAMED_RX_CTX
                | Caps::RMA_EVENT
                | Caps::FENCE
                | Caps::TRIGGER
                | Caps::SHARED_AV
                | Caps::LOCAL_COMM;
            let order = ORDER;
            Info {
                caps,
                addr_format: AddrFormat::STR,
                tx_attr: info::rdm_tx_attr(
                    Caps::MSG
                        | Caps::TAGGED
                        | Caps::SEND
                        | Caps::RMA
                        | Caps::ATOMIC
                        | Caps::READ
                        | Caps::WRITE
                        | Caps::FENCE
                        | Caps::TRIGGER,
                    // Every level of the RDM set, and commit complete (as delivery
                    // complete: no persistent memory).
                    info::RDM_TX_OP_FLAGS.union(OpFlags::COMMIT_COMPLETE),
                    order,
                    crate::proto::INJECT_SIZE,
                    s.tx_size,
                    IOV_LIMIT,
                ),
                rx_attr: info::rdm_rx_attr(
                    Caps::MSG
                        | Caps::TAGGED
                        | Caps::RECV
                        | Caps::SOURCE
                        | Caps::AV_USER_ID
                        | Caps::DIRECTED_RECV
                        | Caps::MULTI_RECV
                        | Caps::RMA
                        | Caps::ATOMIC
                        | Caps::REMOTE_READ
                        | Caps::REMOTE_WRITE
                        | Caps::RMA_EVENT,
                    order,
                    s.rx_size,
                    IOV_LIMIT,
                ),
                // Ordered at every size (see `ORDER`).
                ep_attr: info::ordered_at_every_size(info::ep_attr(
                    EpType::Rdm,
                    Protocol::SHM,
                    1,
                    s.max_msg_size,
                )),
                domain_attr: DomainAttr {
                    data_progress: Progress::Manual,
                    av_type,
                    mr_iov_limit: IOV_LIMIT,
                    caps: Caps::LOCAL_COMM | Caps::SHARED_AV,
                    max_ep_tx_ctx: MAX_EP_CTX,
                    max_ep_rx_ctx: MAX_EP_CTX,
                    max_ep_stx_ctx: MAX_EP_CTX,
                    max_ep_srx_ctx: MAX_EP_CTX,
                    ..info::domain_attr(NAME)
                },
                fabric_attr: info::fabric_attr(NAME),
                ..Info::default()
            }
        }
    }

    ofi_kit::core_provider! {
        /// The provider (`NAME` `"shm"`, a core provider).
        pub struct ShmProvider(Settings) {
            NAME = NAME, VERSION = Version::new(1, 0), Fabric = Fabric;
        }

        fn info_templates(&self) -> Vec<Info> {
            vec![self.template(AvType::Map), self.template(AvType::Table)]
        }

        /// The framework's matcher with the resolver for non-IP addresses: a `node`
        /// `fi_shm://NAME` becomes the destination (with `FI_SOURCE`, the source).
        /// Authorization keys of 1 to [`ofi_kit::auth::AUTH_KEY_MAX`] bytes are taken
        /// (`ofi_kit::auth::match_with_auth_key`).
        fn getinfo(&self, req: &GetinfoRequest) -> GetinfoOutcome {
            let max = ofi_kit::auth::AUTH_KEY_MAX;
            ofi_kit::auth::match_with_auth_key(NAME, req, max, |req| {
                info::getinfo_from_templates(self, req, &NoResolver)
            })
        }
    }

    #[cfg(feature = "plugin")]
    ofi_core::export_provider!(ShmProvider);

    #[cfg(test)]
    mod tests {
        use super::*;

        use ofi_core::provider::Provider;
        use ofi_core::Threading;

        #[test]
        fn templates_fill_every_domain_level() {
            let p = ShmProvider {
                settings: Settings::default(),
            };
            for t in p.info_templates() {
                let d = &t.domain_attr;
                assert_ne!(d.threading, Threading::Unspec);
                assert_ne!(d.data_progress, Progress::Unspec);
                assert_ne!(d.av_type, AvType::Unspec);
                assert!(t.tx_attr.inject_size <= t.ep_attr.max_msg_size);
                assert_eq!(t.ep_attr.ep_type, EpType::Rdm);
            }
        }
    }
}
