//! Peer sockets: a connected socket for each of the first `FI_UDP_PEER_SOCKETS`
//! unicast destinations (see the parent module's "Peer sockets").
//!
//! Invariants: slots are filled in order, under `make`, and never emptied, so
//! `live()` (the filled prefix) is read without a lock; a slot whose socket could not
//! be made holds `sock: None` and its destination uses the endpoint's socket. Nothing
//! here panics.

use super::*;

/// A destination's connected socket (`sock` is `None` if it could not be made; the
/// destination then goes through the endpoint's socket).
pub(super) struct PeerSock {
    dst: SockAddr,
    pub(super) sock: Option<UdpSock>,
}

/// The peer sockets of an endpoint: the first `FI_UDP_PEER_SOCKETS` unicast
/// destinations, each in a slot for the endpoint's lifetime (slots are filled in
/// order and never emptied, so readers need no lock).
pub(super) struct PeerSocks {
    slots: Box<[OnceLock<PeerSock>]>,
    /// Slots filled (a prefix of `slots`).
    made: AtomicUsize,
    /// Serialises filling slots.
    make: Mutex<()>,
    /// The endpoint's bound address, which every peer socket shares.
    local: SocketAddr,
    /// Socket buffer sizes (`FI_UDP_SNDBUF` / `FI_UDP_RCVBUF`; 0: the kernel's).
    sndbuf: usize,
    rcvbuf: usize,
    /// The endpoint's DSCP value, on every peer socket too.
    dscp: Option<u8>,
}

impl PeerSocks {
    pub(super) fn new(settings: &Settings, local: SocketAddr, dscp: Option<u8>) -> PeerSocks {
        PeerSocks {
            slots: (0..settings.peer_sockets)
                .map(|_| OnceLock::new())
                .collect(),
            made: AtomicUsize::new(0),
            make: Mutex::new(()),
            local,
            sndbuf: settings.sndbuf,
            rcvbuf: settings.rcvbuf,
            dscp,
        }
    }

    /// The filled slots (each `get` is `Some`: `made` is raised after the slot is set).
    #[inline]
    pub(super) fn live(&self) -> &[OnceLock<PeerSock>] {
        let n = self.made.load(Ordering::Acquire).min(self.slots.len());
        &self.slots[..n]
    }

    /// The filled slot of `dst`, if it has one.
    #[inline]
    fn slot_of(&self, dst: &SockAddr) -> Option<&PeerSock> {
        self.live()
            .iter()
            .filter_map(OnceLock::get)
            .find(|p| p.dst.same(dst))
    }

    /// The connected socket for `dst`, making one if a slot is free and `dst` may have
    /// one; `None`: send through the endpoint's socket. `made_one` runs after a new
    /// socket exists (waiters must learn of it).
    #[inline]
    pub(super) fn for_dst(
        &self,
        main: &UdpSock,
        dst: &SockAddr,
        made_one: impl FnOnce(),
    ) -> Option<&UdpSock> {
        if let Some(slot) = self.slot_of(dst) {
            return slot.sock.as_ref();
        }
        if self.made.load(Ordering::Relaxed) >= self.slots.len() {
            return None;
        }
        // Multicast and broadcast destinations take no slot.
        if !dst
            .to_std()
            .is_some_and(|d| peer_socket_for(&self.local, &d))
        {
            return None;
        }
        self.make_for(main, dst, made_one)
    }

    #[cold]
    fn make_for(
        &self,
        main: &UdpSock,
        dst: &SockAddr,
        made_one: impl FnOnce(),
    ) -> Option<&UdpSock> {
        let _g = lock(&self.make);
        // Made by another thread meanwhile?
        if let Some(slot) = self.slot_of(dst) {
            return slot.sock.as_ref();
        }
        let i = self.made.load(Ordering::Acquire);
        let slot = self.slots.get(i)?;
        // A failure (say, the port cannot be shared) fills the slot without a socket:
        // `dst` then goes through the endpoint's socket, and is not tried again.
        let sock = match main
            .share_port()
            .and_then(|()| UdpSock::connected(&self.local, dst, self.sndbuf, self.rcvbuf))
            .and_then(|s| {
                if let Some(d) = self.dscp {
                    s.set_dscp(d)?;
                }
                Ok(s)
            }) {
            Ok(s) => Some(s),
            Err(e) => {
                ofi_core::ofi_debug!(NAME, "ep_data", "no peer socket for {dst:?}: {e}");
                None
            }
        };
        let made = sock.is_some();
        let _ = slot.set(PeerSock { dst: *dst, sock });
        self.made.store(i + 1, Ordering::Release);
        if made {
            made_one();
        }
        slot.get().and_then(|p| p.sock.as_ref())
    }
}

/// Whether a datagram from `local` to `dst` may go through a peer socket: a unicast
/// destination of the same family (multicast and broadcast stay on the endpoint's
/// socket, which holds the memberships).
fn peer_socket_for(local: &SocketAddr, dst: &SocketAddr) -> bool {
    match (local, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(d)) => {
            let ip = d.ip();
            !ip.is_multicast() && !ip.is_broadcast() && !ip.is_unspecified() && d.port() != 0
        }
        (SocketAddr::V6(_), SocketAddr::V6(d)) => {
            !d.ip().is_multicast() && !d.ip().is_unspecified() && d.port() != 0
        }
        _ => false,
    }
}
