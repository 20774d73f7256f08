//! The engine's receive side: packet dispatch, credit accounting, reassembly of
//! segmented messages, rendezvous reads and the acknowledgements back.
//!
//! # Invariants
//!
//! - A packet is parsed before anything is taken from it; lengths, offsets and the
//!   credit grant are checked, and a violation is a protocol error (the connection is
//!   handled as broken, never a panic).
//! - Segments of one message arrive back to back on a connection (the sender sends them
//!   so and connections keep order): a segment of another message, or at another
//!   offset than the next, is a protocol error.

use ofi_core::Errno;

use super::{CreditToken, Engine, Event, PeerId, RdState, ReadId, ReadRequest, SarRx, TxState};
use crate::proto::{self, Hdr, Op, Rts, HDR_LEN};

impl Engine {
    /// A packet arrived on the current connection to `peer` at `now`.
    pub fn handle_packet(&mut self, peer: PeerId, pkt: &[u8], now: u64) {
        if !self.is_up(peer) {
            // A packet of a connection already handled as broken.
            return;
        }
        if let Err(err) = self.packet(peer, pkt) {
            self.events.push_back(Event::ProtocolError { peer, err });
            self.conn_down(peer, now, Errno::ECONNRESET);
        }
    }

    fn packet(&mut self, peer: PeerId, pkt: &[u8]) -> Result<(), Errno> {
        let h = Hdr::parse(pkt).map_err(|_| Errno::EPROTO)?;
        let payload = &pkt[HDR_LEN..];
        let grant = self.cfg.credits;
        let p = self.peer(peer);
        p.credits = p.credits.saturating_add(u32::from(h.credits));
        let first = matches!(h.op, Op::Eager | Op::SarFirst | Op::Rts);
        if first {
            if p.held >= grant {
                return Err(Errno::EPROTO);
            }
            if p.sar.is_some() {
                return Err(Errno::EPROTO);
            }
            p.held += 1;
        }
        let credit = CreditToken {
            peer,
            epoch: p.epoch,
        };
        match h.op {
            Op::Credit => Ok(()),
            Op::DcAck => {
                for _ in 0..h.size {
                    let id = self.peer(peer).await_ack.pop_front().ok_or(Errno::EPROTO)?;
                    if let Some(o) = self.ops.remove(&id) {
                        self.events.push_back(Event::Sent { op: o.op });
                    }
                }
                Ok(())
            }
            Op::RndvDone => {
                let ok = self
                    .ops
                    .get(&h.tag)
                    .is_some_and(|o| o.peer == peer && o.state == TxState::AwaitDone);
                if !ok {
                    return Err(Errno::EPROTO);
                }
                if let Some(o) = self.ops.remove(&h.tag) {
                    self.events
                        .push_back(match Errno::from_peer_status(h.data as i64) {
                            None => Event::Sent { op: o.op },
                            Some(err) => Event::Failed { op: o.op, err },
                        });
                }
                Ok(())
            }
            Op::Eager => {
                if h.size != payload.len() as u64 || payload.len() > self.cfg.eager_max {
                    return Err(Errno::EPROTO);
                }
                let p = self.peer(peer);
                let arrival = p.arrivals;
                p.arrivals += 1;
                if h.flags & proto::F_DC != 0 {
                    p.out
                        .push_back(Hdr::new(Op::DcAck, 0, 1, 0, 0).bytes().to_vec());
                }
                self.events.push_back(Event::Received {
                    peer,
                    tag: h.tag,
                    data: payload.to_vec(),
                    arrival,
                    credit,
                });
                Ok(())
            }
            Op::SarFirst => {
                let total = usize::try_from(h.size).map_err(|_| Errno::EPROTO)?;
                if total > self.cfg.sar_limit.max(self.cfg.eager_max)
                    || payload.len() > total
                    || h.flags & proto::F_DC == 0
                {
                    return Err(Errno::EPROTO);
                }
                let p = self.peer(peer);
                let arrival = p.arrivals;
                p.arrivals += 1;
                let mut data = Vec::with_capacity(total);
                data.extend_from_slice(payload);
                p.sar = Some(SarRx {
                    tag: h.tag,
                    total,
                    data,
                    arrival,
                });
                self.sar_piece_done(peer, h.flags & proto::F_LAST != 0, credit)
            }
            Op::SarNext => {
                let p = self.peer(peer);
                let s = p.sar.as_mut().ok_or(Errno::EPROTO)?;
                if s.tag != h.tag
                    || h.size != s.data.len() as u64
                    || s.data.len() + payload.len() > s.total
                {
                    return Err(Errno::EPROTO);
                }
                s.data.extend_from_slice(payload);
                self.sar_piece_done(peer, h.flags & proto::F_LAST != 0, credit)
            }
            Op::Rts => {
                let rts = Rts::parse(payload, h.size).map_err(|_| Errno::EPROTO)?;
                let len = usize::try_from(h.size).map_err(|_| Errno::EPROTO)?;
                if rts.n != 1 || len > self.cfg.max_msg {
                    return Err(Errno::EPROTO);
                }
                let p = self.peer(peer);
                let arrival = p.arrivals;
                p.arrivals += 1;
                let epoch = p.epoch;
                let id = ReadId(self.next_read);
                self.next_read += 1;
                self.reads.insert(
                    id,
                    RdState {
                        peer,
                        epoch,
                        tag: h.tag,
                        remote_op: rts.id,
                        len,
                        arrival,
                    },
                );
                self.read_q.push_back(ReadRequest {
                    id,
                    peer,
                    remote: rts.iov[0],
                });
                Ok(())
            }
        }
    }

    /// After a segment: a complete message (the last flag, and every byte) is delivered
    /// and acknowledged; a last flag before every byte is a protocol error.
    fn sar_piece_done(
        &mut self,
        peer: PeerId,
        last: bool,
        credit: CreditToken,
    ) -> Result<(), Errno> {
        let p = self.peer(peer);
        let Some(s) = p.sar.as_ref() else {
            return Ok(());
        };
        let full = s.data.len() == s.total;
        if last != full {
            return Err(Errno::EPROTO);
        }
        if !full {
            return Ok(());
        }
        let Some(s) = p.sar.take() else {
            return Ok(());
        };
        p.out
            .push_back(Hdr::new(Op::DcAck, 0, 1, 0, 0).bytes().to_vec());
        self.events.push_back(Event::Received {
            peer,
            tag: s.tag,
            data: s.data,
            arrival: s.arrival,
            credit,
        });
        Ok(())
    }

    /// The read `id` finished with the peer's bytes or an error. A read of a connection
    /// that broke meanwhile was already reported failed and is ignored.
    pub fn handle_read_done(&mut self, id: ReadId, result: Result<Vec<u8>, Errno>) {
        let Some(r) = self.reads.remove(&id) else {
            return;
        };
        let p = self.peer(r.peer);
        if !p.up || p.epoch != r.epoch {
            return;
        }
        let result = result.and_then(|d| {
            if d.len() == r.len {
                Ok(d)
            } else {
                Err(Errno::EIO)
            }
        });
        let status = match &result {
            Ok(_) => 0u64,
            Err(e) => (-i64::from(e.0)) as u64,
        };
        p.out.push_back(
            Hdr::new(Op::RndvDone, 0, 0, r.remote_op, status)
                .bytes()
                .to_vec(),
        );
        let credit = CreditToken {
            peer: r.peer,
            epoch: r.epoch,
        };
        let ev = match result {
            Ok(data) => Event::Received {
                peer: r.peer,
                tag: r.tag,
                data,
                arrival: r.arrival,
                credit,
            },
            Err(err) => {
                // The message will not be consumed: its credit goes back now.
                self.consumed(credit);
                Event::RecvFailed {
                    peer: r.peer,
                    tag: r.tag,
                    arrival: r.arrival,
                    err,
                }
            }
        };
        self.events.push_back(ev);
    }
}
