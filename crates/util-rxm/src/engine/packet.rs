//! The protocol's per-packet rules, shared by the engine and the endpoint: which
//! protocol a message takes, the headers of its packets, what an arriving packet is
//! (parsed and checked against the limits), and the bookkeeping of a segmented message
//! being received.
//!
//! # Invariants
//!
//! - [`Inbound::classify`] takes nothing from a packet before its header parsed and its
//!   lengths were checked against the packet and the limits; any violation is
//!   `FI_EPROTO`. Nothing here panics on peer input.
//! - Segments of one message arrive back to back on a connection, at increasing
//!   offsets without gaps; [`SarCursor::next`] refuses anything else, and a last flag
//!   before the last byte (or the last byte without it).

use std::collections::VecDeque;

use ofi_core::Errno;

use crate::proto::{self, Hdr, Op, Rts, HDR_LEN};

/// How a message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// One packet.
    Eager,
    /// Segments sent back to back.
    Segmented,
    /// A rendezvous request; the receiver reads the data.
    Rendezvous,
}

impl Protocol {
    /// The protocol of a message of `len` bytes with these limits.
    #[inline]
    pub fn of(len: usize, eager_max: usize, sar_limit: usize) -> Protocol {
        if len <= eager_max {
            Protocol::Eager
        } else if len <= sar_limit {
            Protocol::Segmented
        } else {
            Protocol::Rendezvous
        }
    }
}

/// What a message carries besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgMeta {
    /// Its tag, for a tagged message.
    pub tag: Option<u64>,
    /// Remote CQ data.
    pub data: Option<u64>,
    /// The sender waits for a delivery acknowledgement ([`proto::F_DC`]).
    pub dc: bool,
}

impl MsgMeta {
    /// The header flags of the message's first packet.
    #[inline]
    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if self.tag.is_some() {
            f |= proto::F_TAGGED;
        }
        if self.data.is_some() {
            f |= proto::F_DATA;
        }
        if self.dc {
            f |= proto::F_DC;
        }
        f
    }

    /// The header of an eager message of `len` bytes.
    #[inline]
    pub fn eager(&self, len: usize) -> Hdr {
        Hdr::new(
            Op::Eager,
            self.flags(),
            len as u64,
            self.tag.unwrap_or(0),
            self.data.unwrap_or(0),
        )
    }

    /// The header of a rendezvous request for `len` bytes (its [`Rts`] body follows).
    /// A rendezvous completes on "done", never on a delivery acknowledgement.
    pub fn rts(&self, len: usize) -> Hdr {
        Hdr::new(
            Op::Rts,
            self.flags() & !proto::F_DC,
            len as u64,
            self.tag.unwrap_or(0),
            self.data.unwrap_or(0),
        )
    }

    /// The header of the segment at `off` of a segmented message of `len` bytes cut in
    /// segments of `seg` bytes (at least one), and that segment's length.
    pub fn segment(&self, off: usize, len: usize, seg: usize) -> (Hdr, usize) {
        let n = seg.max(1).min(len.saturating_sub(off));
        let tag = self.tag.unwrap_or(0);
        let mut h = if off == 0 {
            Hdr::new(
                Op::SarFirst,
                self.flags(),
                len as u64,
                tag,
                self.data.unwrap_or(0),
            )
        } else {
            Hdr::new(
                Op::SarNext,
                self.flags() & proto::F_TAGGED,
                off as u64,
                tag,
                0,
            )
        };
        if off + n >= len {
            h.flags |= proto::F_LAST;
        }
        (h, n)
    }

    /// The meta of an arriving message's header.
    #[inline]
    pub fn of_hdr(h: &Hdr) -> MsgMeta {
        MsgMeta {
            tag: (h.flags & proto::F_TAGGED != 0).then_some(h.tag),
            data: (h.flags & proto::F_DATA != 0).then_some(h.data),
            dc: h.flags & proto::F_DC != 0,
        }
    }
}

/// The control packets (no credit needed): their headers, in one place with their
/// decoding in [`Inbound::classify`].
pub struct Control;

impl Control {
    /// Credits only (the credits field is filled when it is sent).
    #[inline]
    pub fn credit() -> Hdr {
        Hdr::new(Op::Credit, 0, 0, 0, 0)
    }

    /// `count` more delivery-complete messages were taken in.
    #[inline]
    pub fn dc_ack(count: u64) -> Hdr {
        Hdr::new(Op::DcAck, 0, count, 0, 0)
    }

    /// One access of ours to the peer's memory is done: a read (`read`) or a write
    /// or atomic.
    #[inline]
    pub fn remote_access(read: bool) -> Hdr {
        Hdr::new(Op::RemoteAccess, 0, 0, u64::from(read), 0)
    }

    /// The rendezvous read of the sender's operation `op` finished: success, or the
    /// error as a negated `FI_*` code.
    #[inline]
    pub fn rndv_done(op: u64, result: Result<(), Errno>) -> Hdr {
        let status = match result {
            Ok(()) => 0,
            Err(e) => -i64::from(e.0),
        };
        Hdr::new(Op::RndvDone, 0, 0, op, status as u64)
    }
}

/// The delivery-complete messages sent on a connection whose acknowledgement has not
/// come, in the order sent (the receiver acknowledges in that order, with a count).
#[derive(Debug)]
pub struct AckQueue<T> {
    waiting: VecDeque<T>,
}

impl<T> Default for AckQueue<T> {
    fn default() -> AckQueue<T> {
        AckQueue {
            waiting: VecDeque::new(),
        }
    }
}

impl<T> AckQueue<T> {
    /// `t` was sent and waits for its acknowledgement.
    #[inline]
    pub fn expect(&mut self, t: T) {
        self.waiting.push_back(t);
    }

    /// The peer acknowledged `count` more: the oldest `count` waiting.
    ///
    /// # Errors
    /// `FI_EPROTO` (nothing taken) if fewer than `count` wait: acknowledgements of
    /// messages never sent.
    pub fn acked(
        &mut self,
        count: u64,
    ) -> Result<std::collections::vec_deque::Drain<'_, T>, Errno> {
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n <= self.waiting.len())
            .ok_or(Errno::EPROTO)?;
        Ok(self.waiting.drain(..n))
    }

    /// The connection is gone: nothing waits any more.
    pub fn clear(&mut self) {
        self.waiting.clear();
    }

    /// How many wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// The limits an arriving packet is checked against.
#[derive(Clone, Copy, Debug)]
pub struct RxLimits {
    /// Largest eager payload.
    pub eager_max: usize,
    /// Largest segmented message the peer may send.
    pub sar_max: usize,
    /// Largest rendezvous message.
    pub max_msg: usize,
}

/// An arriving packet, parsed and checked (see [`Inbound::classify`]).
#[derive(Debug)]
pub enum Inbound<'a> {
    /// Credits only.
    Credit,
    /// One of the peer's accesses to our memory is done.
    RemoteAccess {
        /// A read (else a write or an atomic).
        read: bool,
    },
    /// `count` more delivery-complete messages were taken in by the peer.
    DcAck {
        /// How many.
        count: u64,
    },
    /// A rendezvous read of one of our sends finished at the peer.
    RndvDone {
        /// Our operation id, as the RTS named it.
        op: u64,
        /// The peer's status: `None` for success, else an `FI_*` code (a status that
        /// is no `FI_*` code is `FI_EPROTO`).
        err: Option<Errno>,
    },
    /// A whole message.
    Eager {
        /// What it carries.
        meta: MsgMeta,
        /// Its bytes.
        payload: &'a [u8],
    },
    /// The first segment of a message of `total` bytes.
    SarFirst {
        /// What it carries.
        meta: MsgMeta,
        /// The whole message's length.
        total: usize,
        /// This segment's bytes.
        payload: &'a [u8],
        /// Also the last segment.
        last: bool,
    },
    /// A later segment at `offset`.
    SarNext {
        /// The message's tag (0 for an untagged one).
        tag: u64,
        /// Where it goes.
        offset: u64,
        /// Its bytes.
        payload: &'a [u8],
        /// The last segment.
        last: bool,
    },
    /// A rendezvous request for `total` bytes.
    Rts {
        /// What it carries.
        meta: MsgMeta,
        /// The message's length.
        total: usize,
        /// The sender's buffers (checked; [`RtsBody::get`] reads them).
        body: RtsBody<'a>,
    },
}

/// The body of a rendezvous request that [`Inbound::classify`] checked, kept as bytes
/// so that the common packets do not carry the larger parsed [`Rts`] around.
#[derive(Clone, Copy, Debug)]
pub struct RtsBody<'a> {
    bytes: &'a [u8],
    total: u64,
}

impl RtsBody<'_> {
    /// The sender's buffers.
    ///
    /// # Errors
    /// `FI_EPROTO` if the body does not parse (it did when it was classified).
    pub fn get(&self) -> Result<Rts, Errno> {
        Rts::parse(self.bytes, self.total).map_err(|_| Errno::EPROTO)
    }
}

impl<'a> Inbound<'a> {
    /// Parse and check `pkt`; also the credits it hands back.
    ///
    /// # Errors
    /// `FI_EPROTO` for a packet that does not parse, an eager payload whose length is
    /// not the header's or is past `eager_max`, a first segment past `sar_max` or
    /// longer than its message, a rendezvous request that does not parse or is past
    /// `max_msg`.
    #[inline]
    pub fn classify(pkt: &'a [u8], lim: &RxLimits) -> Result<(Inbound<'a>, u16), Errno> {
        let h = Hdr::parse(pkt).map_err(|_| Errno::EPROTO)?;
        let payload = pkt.get(HDR_LEN..).unwrap_or_default();
        let last = h.flags & proto::F_LAST != 0;
        let inb = match h.op {
            Op::Credit => Inbound::Credit,
            Op::RemoteAccess => match h.tag {
                0 => Inbound::RemoteAccess { read: false },
                1 => Inbound::RemoteAccess { read: true },
                _ => return Err(Errno::EPROTO),
            },
            Op::DcAck => Inbound::DcAck { count: h.size },
            Op::RndvDone => Inbound::RndvDone {
                op: h.tag,
                err: Errno::from_peer_status(h.data as i64),
            },
            Op::Eager => {
                if h.size != payload.len() as u64 || payload.len() > lim.eager_max {
                    return Err(Errno::EPROTO);
                }
                Inbound::Eager {
                    meta: MsgMeta::of_hdr(&h),
                    payload,
                }
            }
            Op::SarFirst => {
                let total = usize::try_from(h.size).map_err(|_| Errno::EPROTO)?;
                if total > lim.sar_max || payload.len() > total {
                    return Err(Errno::EPROTO);
                }
                Inbound::SarFirst {
                    meta: MsgMeta::of_hdr(&h),
                    total,
                    payload,
                    last,
                }
            }
            Op::SarNext => Inbound::SarNext {
                tag: h.tag,
                offset: h.size,
                payload,
                last,
            },
            Op::Rts => {
                let total = usize::try_from(h.size).map_err(|_| Errno::EPROTO)?;
                if total > lim.max_msg {
                    return Err(Errno::EPROTO);
                }
                let body = RtsBody {
                    bytes: payload,
                    total: h.size,
                };
                body.get()?;
                Inbound::Rts {
                    meta: MsgMeta::of_hdr(&h),
                    total,
                    body,
                }
            }
        };
        Ok((inb, h.credits))
    }

    /// Whether the packet is a credited message (eager, first segment, RTS).
    #[inline]
    pub fn is_credited(&self) -> bool {
        matches!(
            self,
            Inbound::Eager { .. } | Inbound::SarFirst { .. } | Inbound::Rts { .. }
        )
    }
}

/// Where a segmented message being received is (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SarCursor {
    tag: u64,
    total: usize,
    got: usize,
}

impl SarCursor {
    /// A message of `total` bytes with `tag` whose first segment brought `first` bytes
    /// (`last`: flagged the last); also whether it is complete.
    ///
    /// # Errors
    /// `FI_EPROTO` if the last flag and the byte count disagree.
    pub fn first(
        tag: u64,
        total: usize,
        first: usize,
        last: bool,
    ) -> Result<(SarCursor, bool), Errno> {
        let c = SarCursor {
            tag,
            total,
            got: first.min(total),
        };
        let done = c.check_done(last)?;
        Ok((c, done))
    }

    /// The next segment: `tag`, at `offset`, `len` bytes, `last` flagged; whether the
    /// message is now complete.
    ///
    /// # Errors
    /// `FI_EPROTO` for another message's tag, an offset that is not the next byte, more
    /// bytes than the message has, or a last flag that disagrees with the count.
    pub fn next(&mut self, tag: u64, offset: u64, len: usize, last: bool) -> Result<bool, Errno> {
        if tag != self.tag || offset != self.got as u64 || len > self.total - self.got {
            return Err(Errno::EPROTO);
        }
        self.got += len;
        self.check_done(last)
    }

    fn check_done(&self, last: bool) -> Result<bool, Errno> {
        let full = self.got == self.total;
        if last != full {
            return Err(Errno::EPROTO);
        }
        Ok(full)
    }

    /// Bytes received so far (the offset of the next segment).
    pub fn got(&self) -> usize {
        self.got
    }

    /// The message's length.
    pub fn total(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests;
