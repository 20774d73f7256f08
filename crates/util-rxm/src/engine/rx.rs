//! The engine's receive side: packet classification, credit accounting, the
//! bookkeeping of segmented messages and rendezvous reads, and the acknowledgements
//! back. The bytes stay in the packet: [`Arrival`] says where they belong and the
//! driver places them.
//!
//! # Invariants
//!
//! - A packet is parsed before anything is taken from it; lengths, offsets and the
//!   credit grant are checked, and a violation is an error of [`Engine::receive`]
//!   (never a panic); the driver then resets the connection ([`Engine::reset`]),
//!   which discards what the packet may have counted.
//! - Segments of one message arrive back to back on a connection (the sender sends them
//!   so and connections keep order): a segment of another message, or at another
//!   offset than the next, is a violation.
//! - A delivery acknowledgement is queued once the whole message is in: at an eager
//!   packet, at the last segment; the driver has placed (or buffered) the bytes before
//!   it transmits again.

use ofi_core::Errno;

use super::{
    Control, CreditToken, Engine, Event, Inbound, MsgMeta, OpId, PeerId, RdState, ReadId, RtsBody,
    RxLimits, SarCursor, SarRx, TxState,
};

/// What an arriving packet brings the driver (see [`Engine::receive`]).
#[derive(Debug)]
pub enum Arrival<'a> {
    /// Nothing to place (a control packet; what it completed is in the events).
    Nothing,
    /// The first packet of a message of `total` bytes: the driver chooses where the
    /// message goes and places `payload` at offset 0.
    First {
        /// Tag, remote CQ data, delivery-complete.
        meta: MsgMeta,
        /// The whole message's length.
        total: usize,
        /// This packet's bytes.
        payload: &'a [u8],
        /// The message is complete with this packet (eager, or a single segment).
        done: bool,
        /// Its place among the peer's messages, from 0.
        arrival: u64,
        /// Hand back with [`Engine::consumed`] when the message is taken in.
        credit: CreditToken,
    },
    /// More bytes of the segmented message open on this connection, at `offset`.
    Segment {
        /// Where they go in the message.
        offset: usize,
        /// The bytes.
        payload: &'a [u8],
        /// The message is complete with them.
        done: bool,
    },
    /// A rendezvous request: the driver reads the sender's buffers (into the receive it
    /// chooses, now or when one is posted) and reports [`Engine::handle_read_done`]
    /// with `read`, also for a message it drops unread.
    Rts {
        /// Tag, remote CQ data.
        meta: MsgMeta,
        /// The message's length.
        total: usize,
        /// The sender's buffers (checked; [`RtsBody::get`] reads them), kept as bytes
        /// so that the common arrivals do not carry the larger parsed request around.
        rts: RtsBody<'a>,
        /// The read, for [`Engine::handle_read_done`].
        read: ReadId,
        /// Its place among the peer's messages.
        arrival: u64,
        /// Hand back with [`Engine::consumed`] when the message is taken in.
        credit: CreditToken,
    },
}

/// A packet out of protocol (`FI_EPROTO`): what was wrong with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation(pub &'static str);

impl Violation {
    /// The error code: `FI_EPROTO`.
    pub fn errno(&self) -> Errno {
        Errno::EPROTO
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Engine {
    /// A packet arrived on the current connection to `peer`; what it brings,
    /// or [`Event::ProtocolError`] and the connection handled as broken (then
    /// [`Arrival::Nothing`]).
    pub fn handle_packet<'a>(&mut self, peer: PeerId, pkt: &'a [u8]) -> Arrival<'a> {
        if !self.is_up(peer) {
            // A packet of a connection already handled as broken.
            return Arrival::Nothing;
        }
        match self.receive(peer, pkt) {
            Ok(a) => a,
            Err(v) => {
                self.events.push_back(Event::ProtocolError {
                    peer,
                    err: v.errno(),
                });
                self.reset(peer, Errno::ECONNRESET, false);
                Arrival::Nothing
            }
        }
    }

    /// A packet arrived on the connection to `peer` (up): checked by the protocol's
    /// rules, its credits and acknowledgements taken into account, and what it brings.
    ///
    /// # Errors
    /// A [`Violation`] (`FI_EPROTO`) for a packet out of protocol: malformed, past the
    /// limits or the credit grant, a segment out of order, an acknowledgement or
    /// "done" of nothing sent. The driver closes the connection
    /// ([`Engine::reset`]).
    #[inline]
    pub fn receive<'a>(&mut self, peer: PeerId, pkt: &'a [u8]) -> Result<Arrival<'a>, Violation> {
        let grant = self.cfg.credits;
        let i = peer.0 as usize;
        let Some(p) = self.peers.get_mut(i) else {
            return Err(Violation("a packet from a peer never connected"));
        };
        let lim = RxLimits {
            eager_max: self.cfg.eager_max,
            sar_max: p
                .sar_max
                .unwrap_or(self.cfg.sar_limit)
                .max(self.cfg.eager_max),
            max_msg: self.cfg.max_msg,
        };
        let (inb, returned) = Inbound::classify(pkt, &lim)
            .map_err(|_| Violation("a packet out of protocol (header, size or limit)"))?;
        p.flow.returned(returned);
        if inb.is_credited() {
            // Segments of one message go back to back: a new message while one is
            // being reassembled is out of protocol.
            if p.sar.is_some() {
                return Err(Violation("a message while a segmented one is open"));
            }
            p.flow
                .arrive(grant)
                .map_err(|_| Violation("peer sent beyond the credits granted to it"))?;
        }
        let credit = CreditToken {
            peer,
            epoch: p.epoch,
        };
        match inb {
            Inbound::Credit => Ok(Arrival::Nothing),
            Inbound::RemoteAccess { read } => {
                self.events.push_back(Event::RemoteAccess { peer, read });
                Ok(Arrival::Nothing)
            }
            Inbound::DcAck { count } => {
                let acked = p
                    .await_ack
                    .acked(count)
                    .map_err(|_| Violation("delivery acknowledgement of a message never sent"))?;
                for op in acked {
                    if self.ops.remove(&op.0).is_some() {
                        self.events.push_back(Event::Sent { op });
                    }
                }
                Ok(Arrival::Nothing)
            }
            Inbound::RndvDone { op, err } => {
                let ok = self
                    .ops
                    .get(&op)
                    .is_some_and(|o| o.peer == peer && o.state == TxState::AwaitDone);
                if !ok {
                    return Err(Violation("rendezvous done for no request of ours"));
                }
                self.ops.remove(&op);
                let op = OpId(op);
                self.events.push_back(match err {
                    None => Event::Sent { op },
                    Some(err) => Event::Failed { op, err },
                });
                Ok(Arrival::Nothing)
            }
            Inbound::Eager { meta, payload } => {
                let arrival = p.arrivals;
                p.arrivals += 1;
                if meta.dc {
                    p.out.push_back(Control::dc_ack(1).into());
                }
                Ok(Arrival::First {
                    meta,
                    total: payload.len(),
                    payload,
                    done: true,
                    arrival,
                    credit,
                })
            }
            Inbound::SarFirst {
                meta,
                total,
                payload,
                last,
            } => {
                let (cursor, done) =
                    SarCursor::first(meta.tag.unwrap_or(0), total, payload.len(), last)
                        .map_err(|_| Violation("a first segment whose last flag is wrong"))?;
                let arrival = p.arrivals;
                p.arrivals += 1;
                if done {
                    if meta.dc {
                        p.out.push_back(Control::dc_ack(1).into());
                    }
                } else {
                    p.sar = Some(SarRx {
                        meta,
                        cursor,
                        arrival,
                    });
                }
                Ok(Arrival::First {
                    meta,
                    total,
                    payload,
                    done,
                    arrival,
                    credit,
                })
            }
            Inbound::SarNext {
                tag,
                offset,
                payload,
                last,
            } => {
                let s = p
                    .sar
                    .as_mut()
                    .ok_or(Violation("a segment without a first segment"))?;
                let at = s.cursor.got();
                let done = s
                    .cursor
                    .next(tag, offset, payload.len(), last)
                    .map_err(|_| Violation("a segment out of order"))?;
                if done {
                    if s.meta.dc {
                        p.out.push_back(Control::dc_ack(1).into());
                    }
                    p.sar = None;
                }
                Ok(Arrival::Segment {
                    offset: at,
                    payload,
                    done,
                })
            }
            Inbound::Rts { meta, total, body } => {
                let rts = body.get().map_err(|_| Violation("a malformed RTS"))?;
                let arrival = p.arrivals;
                p.arrivals += 1;
                let epoch = p.epoch;
                let read = ReadId(self.next_read);
                self.next_read += 1;
                self.reads.insert(
                    read,
                    RdState {
                        peer,
                        epoch,
                        meta,
                        remote_op: rts.id,
                        arrival,
                    },
                );
                Ok(Arrival::Rts {
                    meta,
                    total,
                    rts: body,
                    read,
                    arrival,
                    credit,
                })
            }
        }
    }

    /// The read `read` finished, or the driver dropped its message unread (`Ok`: the
    /// sender's buffer is no longer needed): RNDV_DONE goes to the sender with the
    /// status. A read of a connection that broke meanwhile was already reported failed
    /// and is ignored. The message's credit goes back through [`Engine::consumed`], as
    /// for any message.
    pub fn handle_read_done(&mut self, read: ReadId, result: Result<(), Errno>) {
        let Some(r) = self.reads.remove(&read) else {
            return;
        };
        let Some(p) = self.peers.get_mut(r.peer.0 as usize) else {
            return;
        };
        if !p.up || p.epoch != r.epoch {
            return;
        }
        p.out
            .push_back(Control::rndv_done(r.remote_op, result).into());
    }
}
