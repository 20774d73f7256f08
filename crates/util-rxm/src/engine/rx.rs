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

use super::{
    Control, CreditToken, Engine, Event, Inbound, PeerId, RdState, ReadId, ReadRequest, RxLimits,
    SarCursor, SarRx, TxState,
};

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
        let lim = RxLimits {
            eager_max: self.cfg.eager_max,
            sar_max: self.cfg.sar_limit.max(self.cfg.eager_max),
            max_msg: self.cfg.max_msg,
        };
        let (inb, returned) = Inbound::classify(pkt, &lim)?;
        let grant = self.cfg.credits;
        let p = self.peer(peer);
        p.flow.returned(returned);
        if inb.is_credited() {
            // Segments of one message go back to back: a new message while one is
            // being reassembled is out of protocol.
            if p.sar.is_some() {
                return Err(Errno::EPROTO);
            }
            p.flow.arrive(grant)?;
        }
        let credit = CreditToken {
            peer,
            epoch: p.epoch,
        };
        match inb {
            Inbound::Credit => Ok(()),
            Inbound::DcAck { count } => {
                let Some(p) = self.peers.get_mut(peer.0 as usize) else {
                    return Ok(());
                };
                for id in p.await_ack.acked(count)? {
                    if let Some(o) = self.ops.remove(&id) {
                        self.events.push_back(Event::Sent { op: o.op });
                    }
                }
                Ok(())
            }
            Inbound::RndvDone { op, err } => {
                let ok = self
                    .ops
                    .get(&op)
                    .is_some_and(|o| o.peer == peer && o.state == TxState::AwaitDone);
                if !ok {
                    return Err(Errno::EPROTO);
                }
                if let Some(o) = self.ops.remove(&op) {
                    self.events.push_back(match err {
                        None => Event::Sent { op: o.op },
                        Some(err) => Event::Failed { op: o.op, err },
                    });
                }
                Ok(())
            }
            Inbound::Eager { meta, payload } => {
                let p = self.peer(peer);
                let arrival = p.arrivals;
                p.arrivals += 1;
                if meta.dc {
                    p.out.push_back(Control::dc_ack(1).bytes().to_vec().into());
                }
                self.events.push_back(Event::Received {
                    peer,
                    tag: meta.tag.unwrap_or(0),
                    tagged: meta.tag.is_some(),
                    cq_data: meta.data,
                    data: payload.to_vec(),
                    arrival,
                    credit,
                });
                Ok(())
            }
            Inbound::SarFirst {
                meta,
                total,
                payload,
                last,
            } => {
                let (cursor, done) =
                    SarCursor::first(meta.tag.unwrap_or(0), total, payload.len(), last)?;
                let p = self.peer(peer);
                let arrival = p.arrivals;
                p.arrivals += 1;
                let mut data = Vec::with_capacity(total);
                data.extend_from_slice(payload);
                p.sar = Some(SarRx {
                    meta,
                    cursor,
                    data,
                    arrival,
                });
                if done {
                    self.sar_done(peer, credit);
                }
                Ok(())
            }
            Inbound::SarNext {
                tag,
                offset,
                payload,
                last,
            } => {
                let p = self.peer(peer);
                let s = p.sar.as_mut().ok_or(Errno::EPROTO)?;
                let done = s.cursor.next(tag, offset, payload.len(), last)?;
                s.data.extend_from_slice(payload);
                if done {
                    self.sar_done(peer, credit);
                }
                Ok(())
            }
            Inbound::Rts { meta, total, body } => {
                let rts = body.get()?;
                if rts.n != 1 {
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
                        meta,
                        remote_op: rts.id,
                        len: total,
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

    /// The segmented message of `peer` is complete: delivered and acknowledged.
    fn sar_done(&mut self, peer: PeerId, credit: CreditToken) {
        let p = self.peer(peer);
        let Some(s) = p.sar.take() else {
            return;
        };
        if s.meta.dc {
            p.out.push_back(Control::dc_ack(1).bytes().to_vec().into());
        }
        self.events.push_back(Event::Received {
            peer,
            tag: s.meta.tag.unwrap_or(0),
            tagged: s.meta.tag.is_some(),
            cq_data: s.meta.data,
            data: s.data,
            arrival: s.arrival,
            credit,
        });
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
        let done = Control::rndv_done(r.remote_op, result.as_ref().map(|_| ()).map_err(|e| *e));
        p.out.push_back(done.bytes().to_vec().into());
        let credit = CreditToken {
            peer: r.peer,
            epoch: r.epoch,
        };
        let ev = match result {
            Ok(data) => Event::Received {
                peer: r.peer,
                tag: r.meta.tag.unwrap_or(0),
                tagged: r.meta.tag.is_some(),
                cq_data: r.meta.data,
                data,
                arrival: r.arrival,
                credit,
            },
            Err(err) => {
                // The message will not be consumed: its credit goes back now.
                self.consumed(credit);
                Event::RecvFailed {
                    peer: r.peer,
                    tag: r.meta.tag.unwrap_or(0),
                    arrival: r.arrival,
                    err,
                }
            }
        };
        self.events.push_back(ev);
    }
}
