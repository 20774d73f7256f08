//! Receive: placing the pieces of incoming messages (straight into a matched receive,
//! or gathered whole), unexpected messages, posted receives and `FI_SOURCE`.
//!
//! # Invariants
//!
//! - `EpState::rx[peer]` is the message being received from that peer; a first piece
//!   replaces (and fails) a message left open by an ended connection.
//! - A matched receive is completed exactly once: at its message's last piece, or with
//!   an error when the message cannot complete (`abort_rx`).
//! - Unexpected messages held plus those being gathered stay within `unexp_msgs` and
//!   `unexp_bytes` (one at any size when none is held).
//!
//! Nothing here panics on peer input: lengths come from the engine, which checked them.

use super::*;
use ofi_kit::epglue::Delivery;

/// An unexpected message: the whole message, rxd header included.
pub(super) type Unexp = Vec<u8>;

/// Where the pieces of a message being received go.
pub(super) enum RxTarget {
    /// A posted receive matched at the first piece: the data goes straight into it.
    Recv {
        recv: PostedRecv<IoList>,
        place: Placement,
        released: bool,
        inc: Incoming,
    },
    /// Gathered whole: an unexpected message (matched again when complete, `unexp`),
    /// a request or a response (carried out when complete), or something malformed.
    /// `total` is the message's announced length.
    Buffer {
        data: Vec<u8>,
        total: usize,
        unexp: bool,
    },
}

impl RxTarget {
    /// A buffer for a message of `total` bytes; memory is reserved up to
    /// [`RESERVE_MAX`] at once and grows with the pieces beyond (the length is the
    /// peer's word until they arrive).
    pub(super) fn buffer(total: usize, unexp: bool) -> RxTarget {
        RxTarget::Buffer {
            data: Vec::with_capacity(total.min(RESERVE_MAX)),
            total,
            unexp,
        }
    }
}

/// Most bytes reserved for a message being gathered before its pieces arrive.
pub(super) const RESERVE_MAX: usize = 1 << 20;

/// The parts of `EpState` streaming delivery needs while the engine is borrowed.
pub(super) struct RxParts<'a> {
    pub(super) m: &'a mut TagMatcher<IoList, Unexp>,
    pub(super) rx: &'a mut Vec<Option<RxTarget>>,
    pub(super) peer_addr: &'a mut Vec<Option<Address>>,
    pub(super) deferred: &'a mut Vec<(PeerId, Vec<u8>)>,
}

impl Shared {
    pub(super) fn src_of(&self, active: &Active, state: &mut EpState, peer: PeerId) -> u64 {
        let EpState { eng, peer_addr, .. } = state;
        self.src_for(active, peer_addr, peer, eng.peer_addr(peer))
    }

    /// The fabric address (in the bound AV) of engine peer `peer` at `addr`, for
    /// `FI_SOURCE`; `cache` keeps the parsed addresses.
    pub(super) fn src_for(
        &self,
        active: &Active,
        cache: &mut Vec<Option<Address>>,
        peer: PeerId,
        addr: &[u8],
    ) -> u64 {
        if !self.need_src {
            return ADDR_NOTAVAIL;
        }
        let i = peer as usize;
        if cache.len() <= i {
            cache.resize(i + 1, None);
        }
        if cache[i].is_none() {
            cache[i] = Address::from_bytes(self.fmt, addr).ok();
        }
        match &cache[i] {
            Some(a) => active.av.reverse_lookup(a).unwrap_or(ADDR_NOTAVAIL),
            None => ADDR_NOTAVAIL,
        }
    }

    pub(super) fn on_message(
        &self,
        active: &Active,
        state: &mut EpState,
        peer: PeerId,
        data: Vec<u8>,
    ) {
        let h = match MsgHdr::from_bytes(&data) {
            Ok(h) => h,
            Err(e) => {
                ofi_core::ofi_debug!(
                    NAME,
                    "ep_data",
                    "peer {peer}: malformed message dropped: {e}"
                );
                return;
            }
        };
        if h.op > OP_TAGGED {
            self.on_remote(active, state, peer, h, &data);
            return;
        }
        let src = self.src_of(active, state, peer);
        self.match_whole(active, &mut state.m, src, data);
    }

    /// Match a whole (message or tagged) message `data` from `src`: copy it into a
    /// posted receive, or keep it as unexpected.
    pub(super) fn match_whole(
        &self,
        active: &Active,
        m: &mut TagMatcher<IoList, Unexp>,
        src: u64,
        data: Vec<u8>,
    ) {
        let Ok((op, tag, cqdata)) = parse_msg_hdr(&data) else {
            return;
        };
        let tagged = op == OP_TAGGED;
        let inc = Incoming {
            src,
            tag,
            len: data.len() - MSG_HDR,
            data: cqdata,
            tagged,
        };
        match m.match_incoming(&inc).into_owned() {
            Some((recv, place, rel)) => {
                let payload = &data[MSG_HDR..];
                let n = place.len.min(payload.len());
                // SAFETY: the receive buffer is the application's, writable for its
                // length (the placement lies within it); `payload` has n bytes.
                unsafe { recv.buf.scatter(place.offset, payload.as_ptr(), n) };
                active.complete_rx(&recv, place, &inc, rel, None);
            }
            None => {
                if m.push_unexpected(inc, data).is_err() {
                    // At most 5 lines per sender per 10 s.
                    static LOG: OnceLock<ofi_kit::diag::RateLimit<u64>> = OnceLock::new();
                    let log = LOG.get_or_init(|| {
                        ofi_kit::diag::RateLimit::new(5, Duration::from_secs(10), 1024)
                    });
                    if let Some(n) = log.admit(&src, Instant::now()) {
                        ofi_core::ofi_warn!(
                            NAME,
                            "ep_data",
                            "unexpected message dropped (limit){}",
                            ofi_kit::diag::suppressed_note(n)
                        );
                    }
                }
            }
        }
    }

    /// Whether an unexpected message of `total` bytes may be gathered now: what the
    /// matcher holds plus what is being gathered stays within `unexp_msgs` and
    /// `unexp_bytes` (one message of any size when nothing is held, so none waits for
    /// ever).
    pub(super) fn room_for_unexpected(
        &self,
        m: &TagMatcher<IoList, Unexp>,
        rx: &[Option<RxTarget>],
        total: usize,
    ) -> bool {
        let (mut msgs, mut bytes) = (m.unexpected_len(), m.unexpected_bytes());
        for t in rx.iter().flatten() {
            if let RxTarget::Buffer {
                total, unexp: true, ..
            } = t
            {
                msgs += 1;
                bytes = bytes.saturating_add(*total);
            }
        }
        msgs == 0
            || (msgs < self.settings.unexp_msgs
                && bytes.saturating_add(total) <= self.settings.unexp_bytes)
    }

    /// A piece of a message from the engine (streaming delivery): place it. `false`
    /// refuses a first piece (receiver not ready: no room for another unexpected
    /// message; the engine has its sender offer it again later).
    pub(super) fn on_seg(&self, active: &Active, parts: RxParts<'_>, seg: Seg<'_>) -> bool {
        let RxParts {
            m,
            rx,
            peer_addr,
            deferred,
        } = parts;
        let i = seg.peer as usize;
        if rx.len() <= i {
            rx.resize_with(i + 1, || None);
        }
        if seg.first {
            // A message left open belongs to a connection that ended.
            if let Some(old) = rx[i].take() {
                ofi_core::ofi_warn!(
                    NAME,
                    "ep_data",
                    "peer {}: a new message began while one was open; the open one fails",
                    seg.peer
                );
                self.abort_rx(active, old, Errno::EIO);
            }
            let hdr = if seg.total >= MSG_HDR {
                parse_msg_hdr(seg.data).ok()
            } else {
                None
            };
            let target = match hdr {
                Some((op, tag, cqdata)) if op <= OP_TAGGED => {
                    let inc = Incoming {
                        src: self.src_for(active, peer_addr, seg.peer, seg.addr),
                        tag,
                        len: seg.total - MSG_HDR,
                        data: cqdata,
                        tagged: op == OP_TAGGED,
                    };
                    match m.match_incoming(&inc).into_owned() {
                        Some((recv, place, released)) => RxTarget::Recv {
                            recv,
                            place,
                            released,
                            inc,
                        },
                        None if !self.room_for_unexpected(m, rx, seg.total) => return false,
                        None => RxTarget::buffer(seg.total, true),
                    }
                }
                _ => RxTarget::buffer(seg.total, false),
            };
            rx[i] = Some(target);
        }
        let Some(target) = rx[i].as_mut() else {
            return true;
        };
        match target {
            RxTarget::Recv { recv, place, .. } => {
                // Message offset → receive offset (the header is not delivered).
                let (skip, at) = if seg.offset < MSG_HDR {
                    (MSG_HDR - seg.offset, 0)
                } else {
                    (0, seg.offset - MSG_HDR)
                };
                let data = seg.data.get(skip..).unwrap_or(&[]);
                if at < place.len {
                    let n = (place.len - at).min(data.len());
                    // SAFETY: the receive buffer is the application's, writable for its
                    // length; [place.offset + at, + n) lies within the placement.
                    unsafe { recv.buf.scatter(place.offset + at, data.as_ptr(), n) };
                }
            }
            RxTarget::Buffer { data, .. } => data.extend_from_slice(seg.data),
        }
        if !seg.last {
            return true;
        }
        match rx[i].take() {
            Some(RxTarget::Recv {
                recv,
                place,
                released,
                inc,
            }) => active.complete_rx(&recv, place, &inc, released, None),
            Some(RxTarget::Buffer { data: v, .. }) => match parse_msg_hdr(&v) {
                Ok((op, ..)) if op <= OP_TAGGED => {
                    let src = self.src_for(active, peer_addr, seg.peer, seg.addr);
                    self.match_whole(active, m, src, v);
                }
                Ok(_) => deferred.push((seg.peer, v)),
                Err(e) => {
                    ofi_core::ofi_debug!(
                        NAME,
                        "ep_data",
                        "peer {}: malformed message dropped: {e}",
                        seg.peer
                    );
                }
            },
            None => {}
        }
        true
    }

    /// A message being received will not complete: its receive (if one matched) fails.
    pub(super) fn abort_rx(&self, active: &Active, t: RxTarget, e: Errno) {
        if let RxTarget::Recv {
            recv,
            place,
            released,
            inc,
        } = t
        {
            active.complete_rx(&recv, place, &inc, released, Some(e));
        }
    }

    pub(super) fn deliver_unexp(&self, active: &Active, d: Delivery<'_, Unexp>) {
        let Delivery {
            recv,
            place,
            msg: inc,
            payload,
            releases: released,
        } = d;
        let data = payload.get(MSG_HDR..).unwrap_or(&[]);
        let n = place.len.min(data.len());
        // SAFETY: as in on_message.
        unsafe { recv.buf.scatter(place.offset, data.as_ptr(), n) };
        active.complete_rx(recv, place, inc, released, None);
    }

    pub(super) fn discard_unexp(&self, _st: &mut EpState, _payload: Unexp) {}

    pub(super) fn post_recv(&self, active: &Active, recv: PostedRecv<IoList>) -> Result<()> {
        let mut g = lock(&self.state);
        active.post_recv(
            &mut *g,
            |state| &mut state.m,
            recv,
            |_, d| self.deliver_unexp(active, d),
            |state, payload| self.discard_unexp(state, payload),
        )
    }
}
