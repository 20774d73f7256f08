//! The efa RDM protocol, sans-IO.
//!
//! One [`Engine`] is one endpoint. The caller (a provider over a device, or a test over
//! a simulated network) drives it:
//!
//! - the application's calls: [`Engine::send`], [`Engine::post_recv`],
//!   [`Engine::write`], [`Engine::read`], [`Engine::atomic`], [`Engine::register`];
//! - what the transport reports: [`Engine::handle_packet`] (a datagram arrived; the
//!   answer [`NotReady`] is the receiver-not-ready the transport gives the sender),
//!   [`Engine::handle_send_done`] and [`Engine::handle_rnr`] (a packet the engine sent
//!   was taken, or refused), [`Engine::handle_send_failed`] (it cannot be delivered:
//!   the peer is gone), [`Engine::handle_read_done`] (a read of a peer's memory
//!   ended), and [`Engine::serve_read`] (the transport reading this endpoint's memory
//!   for a peer);
//! - time: [`Engine::poll_timeout`] says when [`Engine::handle_timeout`] is next due;
//! - output: [`Engine::poll_transmit`] (packets to send, reads to perform) and
//!   [`Engine::poll_event`] (completions).
//!
//! Every function takes the current time where it needs one; nothing reads a clock.
//!
//! # The transport (SRD) this runs over
//!
//! Reliable (a packet the transport took is delivered once, or the peer is gone), in any
//! order, each datagram at most [`Config::mtu`] bytes, and a receiver may refuse a
//! packet (RNR). It names a packet's source by the address the peer sends from, and it
//! can read a peer's registered memory (the receiver of a long message reads it).
//!
//! # Message paths (see docs/providers/efa.md)
//!
//! By size: **eager** (the message fits one packet), **medium** (up to
//! [`Config::max_medium_msg_size`]: several packets sent at once, reassembled in any
//! order), **long by read** (from [`Config::min_read_msg_size`], when both ends' devices
//! read: the receiver reads the sender's memory and answers `EOR`), else **long by
//! clear-to-send** (the first packet carries the start; the receiver grants windows of
//! [`Config::tx_min_credits`] packets with `CTS`, the sender answers with `CTSDATA`).
//!
//! # Invariants
//!
//! - No input panics the engine; a packet that fails a check is dropped and counted in
//!   [`Stats`].
//! - No state exists for a peer that has not proved it receives at its address (see
//!   [`peer`]).
//! - Every operation ends in exactly one completion: success, an error answer from the
//!   peer, or [`LOST_PEER_ERRNO`] once its peer gave no sign of life for
//!   [`Config::peer_timeout`] while packets to it were pending (an operation that only
//!   waits makes the engine probe the peer after [`Config::probe_interval`], so a lost
//!   peer is found within both).
//! - Memory is bounded: unexpected messages by the matcher's limits, held packets by
//!   the receive window, handshake answers by [`MAX_HS_REPLIES`], writes in progress by
//!   [`MAX_WRITES_IN_PROGRESS`]; a request longer than [`Config::max_msg_size`] is
//!   dropped as malformed.

#![forbid(unsafe_code)]

use ofi_core::error::Errno;
use ofi_core::flags::OpFlags;
use ofi_kit::tagmatch::MatcherConfig;

mod engine;
pub mod peer;
mod rma;
pub mod rnr;
mod rx;
mod tx;
pub mod wire;

pub use engine::{Engine, Outstanding};
pub use ofi_core::enums::{AtomicKind, AtomicOp, Datatype};
pub use ofi_kit::atomic::AtomicCall;
pub use rma::{
    atomic_access, Access, RegionAccess, RemoteAtomic, RemoteRegion, MAX_WRITES_IN_PROGRESS,
};
pub use tx::READ_KEY_BIT;

/// A peer's address as the transport names it (a device address handle, a simulated
/// node).
pub type PeerAddr = u64;

/// Time in nanoseconds, on whatever clock the caller keeps.
pub type Nanos = u64;

/// The `src` of a completion that names no message (`FI_ADDR_NOTAVAIL`).
pub const NO_SRC: PeerAddr = u64::MAX;

/// The error operations of a lost peer complete with.
pub const LOST_PEER_ERRNO: Errno = Errno::EIO;

/// Largest receive window a peer's handshake is taken at (larger announcements are
/// clamped to it; message ids compare modulo 2^32, so a window must stay far below
/// 2^31). An engine announces at most this much too.
pub const MAX_RECVWIN: u32 = 1 << 20;

/// The error a peer's operations complete with when its handshake announces no receive
/// window (it could never take a message).
pub const BAD_HANDSHAKE_ERRNO: Errno = Errno::EPROTO;

/// Most handshake answers waiting to be sent (more `HELLO`s are dropped: the askers
/// ask again).
pub const MAX_HS_REPLIES: usize = 1024;

/// Protocol parameters. Names in brackets are C efa's environment variables.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest datagram, header included.
    pub mtu: usize,
    /// Largest message or RMA.
    pub max_msg_size: usize,
    /// Largest medium message [`FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE`, 65536].
    pub max_medium_msg_size: usize,
    /// Smallest message sent by read [`FI_EFA_INTER_MIN_READ_MESSAGE_SIZE`, 1 MiB].
    pub min_read_msg_size: usize,
    /// Packets per clear-to-send grant [`FI_EFA_TX_MIN_CREDITS`, 32].
    pub tx_min_credits: usize,
    /// How many message ids ahead a receiver holds [`FI_EFA_RECVWIN_SIZE`, 16384]:
    /// announced to peers in the handshake (at most [`MAX_RECVWIN`]); a sender keeps
    /// within the room its peer announced, whatever its own setting.
    pub recvwin_size: u32,
    /// First RNR wait, µs; 0 random [`FI_EFA_RNR_BACKOFF_INITIAL_WAIT_TIME`, 0].
    pub rnr_backoff_initial_wait_time: u64,
    /// Longest RNR wait, µs [`FI_EFA_RNR_BACKOFF_WAIT_TIME_CAP`, 1000000].
    pub rnr_backoff_wait_time_cap: u64,
    /// A peer with packets in flight and silent this long is lost.
    pub peer_timeout: Nanos,
    /// A peer with operations waiting (for an answer, for data) but nothing in flight
    /// is probed after this long without a sign of life.
    pub probe_interval: Nanos,
    /// Interval between `HELLO`s to a peer that has not answered.
    pub hello_interval: Nanos,
    /// This endpoint's device can read peers' memory.
    pub rdma_read: bool,
    /// Deliver messages from each peer in the order they were sent (`FI_ORDER_SAS`).
    pub ordered: bool,
    /// Matching limits and directed receive.
    pub matcher: MatcherConfig,
    /// Secret for handshake cookies (random per endpoint in a provider).
    pub secret: u64,
}

impl Config {
    /// Bytes of message one packet carries: messages up to this go eager.
    pub fn eager_capacity(&self) -> usize {
        self.mtu.saturating_sub(wire::REQ_LEN)
    }

    /// Most target bytes one atomic of family `kind` covers: its operands (and compare
    /// values) fit one request, its original elements one answer.
    pub fn max_atomic_bytes(&self, kind: AtomicKind) -> usize {
        let operands = match kind {
            AtomicKind::Compare => self.eager_capacity() / 2,
            _ => self.eager_capacity(),
        };
        operands.min(self.mtu.saturating_sub(wire::CTRL_LEN))
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mtu: 8192,
            max_msg_size: 1 << 30,
            max_medium_msg_size: 65536,
            min_read_msg_size: 1 << 20,
            tx_min_credits: 32,
            recvwin_size: 16384,
            rnr_backoff_initial_wait_time: 0,
            rnr_backoff_wait_time_cap: 1_000_000,
            peer_timeout: 10_000_000_000,
            probe_interval: 1_000_000_000,
            hello_interval: 100_000_000,
            rdma_read: true,
            ordered: true,
            matcher: MatcherConfig::default(),
            secret: 0x5eed,
        }
    }
}

/// The answer to a packet the engine cannot take now (the transport reports RNR to the
/// sender, who sends it again later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotReady;

/// What the engine wants the transport to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Send `bytes` to `peer`; report the outcome with `token`.
    Send {
        /// Destination.
        peer: PeerAddr,
        /// Names the packet in [`Engine::handle_send_done`] / [`Engine::handle_rnr`].
        token: u64,
        /// The packet.
        bytes: Vec<u8>,
    },
    /// Read `len` bytes at `offset` of `peer`'s region `key`; report with `token` in
    /// [`Engine::handle_read_done`].
    Read {
        /// The peer.
        peer: PeerAddr,
        /// Names the read.
        token: u64,
        /// The peer's region.
        key: u32,
        /// Offset in it.
        offset: u64,
        /// Bytes.
        len: usize,
    },
}

/// A send of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendReq {
    /// Reported in the completion.
    pub ctx: u64,
    /// Destination.
    pub peer: PeerAddr,
    /// The message.
    pub data: Vec<u8>,
    /// `Some(tag)`: a tagged send.
    pub tag: Option<u64>,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// `FI_DELIVERY_COMPLETE`: complete once the receiver has placed the data.
    pub delivery_complete: bool,
}

/// A receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvReq {
    /// Reported in the completion(s).
    pub ctx: u64,
    /// Buffer length.
    pub len: usize,
    /// `Some((tag, ignore))`: a tagged receive.
    pub tag: Option<(u64, u64)>,
    /// Directed receive: only from this peer (with [`MatcherConfig::directed_recv`]).
    pub src: Option<PeerAddr>,
    /// Operation flags acted on: `FI_MULTI_RECV` (the buffer takes messages until it
    /// runs short), `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD` (kit's matcher's rules; a bad
    /// combination is `FI_EBADFLAGS`). Others are ignored.
    pub flags: OpFlags,
}

/// What a transmit-side operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// A message.
    Send,
    /// An emulated write.
    Write,
    /// An emulated read.
    Read,
    /// An emulated atomic.
    Atomic,
}

/// A completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A transmit-side operation ended.
    Tx {
        /// Its context.
        ctx: u64,
        /// What it was.
        kind: TxKind,
        /// Success or the error.
        result: Result<(), Errno>,
        /// A read's data, an atomic's old value (8 bytes, fetch and compare).
        data: Vec<u8>,
    },
    /// A message was received (or a receive failed).
    Rx(RxDone),
    /// A peer's emulated write with remote CQ data (`fi_writedata`) was placed here.
    RemoteWrite {
        /// The writer.
        src: PeerAddr,
        /// Bytes written.
        len: u64,
        /// Its CQ data.
        cq_data: u64,
    },
    /// A peer's emulated RMA or atomic on this endpoint's memory is done (for remote
    /// counters, `FI_RMA_EVENT`): one per operation, after [`Event::RemoteWrite`] where
    /// both apply.
    RemoteAccess {
        /// The peer.
        src: PeerAddr,
        /// A read (`fi_read`); otherwise a write or an atomic.
        read: bool,
    },
}

/// A receive completion. A peek that found a message (`FI_PEEK`, with `FI_CLAIM` too)
/// and a discard (`FI_DISCARD`) report the message's source, tag, length and CQ data
/// with no data; a peek that found none completes with `FI_ENOMSG` and `src`
/// [`NO_SRC`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxDone {
    /// The receive's context.
    pub ctx: u64,
    /// Success, `FI_ETRUNC` (the message was longer than the buffer; `data` holds
    /// what fit), or the error that ended the transfer.
    pub result: Result<(), Errno>,
    /// The sender (`FI_SOURCE`).
    pub src: PeerAddr,
    /// Tag (tagged messages).
    pub tag: u64,
    /// Whether the message was tagged.
    pub tagged: bool,
    /// The message's length as sent.
    pub msg_len: usize,
    /// The bytes placed.
    pub data: Vec<u8>,
    /// Offset in a multi-receive buffer (0 otherwise).
    pub offset: usize,
    /// The multi-receive buffer was released with this message (`FI_MULTI_RECV`).
    pub multi_recv_released: bool,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
}

/// Counters of what the engine dropped or did again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets that failed parsing.
    pub malformed: u64,
    /// Requests whose cookie did not check (no state kept).
    pub bad_cookie: u64,
    /// Packets naming an operation or message that does not exist (stale or forged).
    pub stale: u64,
    /// Packets from a peer declared lost.
    pub from_lost: u64,
    /// Packets refused with [`NotReady`].
    pub not_ready: u64,
    /// RNR reports received.
    pub rnr: u64,
    /// `HELLO`s answered.
    pub hello_answered: u64,
    /// `HELLO`s dropped because [`MAX_HS_REPLIES`] answers were waiting.
    pub hello_dropped: u64,
    /// Peers declared lost.
    pub peers_lost: u64,
    /// Handshakes refused because they announced no receive window (the peer's
    /// operations completed with [`BAD_HANDSHAKE_ERRNO`]).
    pub bad_handshake: u64,
    /// Handshakes whose receive window was above [`MAX_RECVWIN`] (taken at that).
    pub recvwin_clamped: u64,
}
