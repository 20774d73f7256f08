//! The sending side: choosing a message's path, building its request packets, answering
//! clear-to-send with data, and completing operations on the answers (`EOR`,
//! `RECEIPT`, `READRSP`, `ATOMRSP`).
//!
//! An operation completes once every packet it queued was taken by the transport, no
//! data remains to be granted, and the answer it waits for (if any) arrived — or, with
//! an error, once its packets are accounted for. Its completion is emitted exactly once.
//!
//! Nothing here panics on a peer's packet: every id, offset and length in an answer is
//! checked against the operation it names before use (a mismatch is counted stale).

use ofi_core::error::Errno;

use super::engine::Engine;
use super::peer::{Owner, TxHandshake};
use super::wire::{self, Ctrl, PktType, Req, CTRL_LEN};
use super::{Event, Nanos, PeerAddr, SendReq, TxKind};

/// Keys of the internal regions through which long messages are read (an operation's
/// id with this bit); application keys stay below it.
pub const READ_KEY_BIT: u32 = 1 << 31;

/// How a transmit operation moves its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxProto {
    Eager,
    Medium,
    /// Bytes queued so far.
    LongCts {
        sent: usize,
    },
    LongRead,
    Write,
    Read,
    Atomic,
}

/// A transmit operation.
#[derive(Debug)]
pub(crate) struct TxOp {
    pub peer: PeerAddr,
    pub ctx: u64,
    pub kind: TxKind,
    pub data: Vec<u8>,
    /// Chosen when the handshake is known.
    pub proto: Option<TxProto>,
    /// The request's fields (cookie filled when sent).
    pub req: Req,
    pub delivery_complete: bool,
    /// What it waits for before it completes.
    pub pending: Pending,
    /// A read's data or an atomic's old value.
    pub result_data: Vec<u8>,
    /// Read bytes received.
    pub got: usize,
}

/// What a transmit operation waits for before it completes (see the module docs): its
/// packets, an answer, data not yet granted; and the error it will end with.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    /// Packets queued or in flight.
    pub pkts_out: usize,
    /// An answer is awaited.
    pub answer: bool,
    /// Long-CTS data not yet granted.
    pub more_to_queue: bool,
    /// The error the operation ends with, once its packets are accounted for.
    pub error: Option<Errno>,
}

impl Pending {
    /// How the operation ends now, or `None` while it must wait: with its error once no
    /// packet is out; successfully once nothing at all is left.
    fn outcome(&self) -> Option<Result<(), Errno>> {
        if self.pkts_out > 0 {
            return None;
        }
        match self.error {
            Some(e) => Some(Err(e)),
            None => (!self.answer && !self.more_to_queue).then_some(Ok(())),
        }
    }

    /// The awaited answer arrived with the peer's `status` (0, or a positive `FI_*`
    /// code the operation ends with).
    fn answered(&mut self, status: u32) {
        self.answer = false;
        self.error = Errno::from_peer_status(i64::from(status));
    }
}

impl TxOp {
    pub(crate) fn new(peer: PeerAddr, ctx: u64, kind: TxKind, data: Vec<u8>, req: Req) -> TxOp {
        TxOp {
            peer,
            ctx,
            kind,
            data,
            proto: None,
            req,
            delivery_complete: false,
            pending: Pending::default(),
            result_data: Vec::new(),
            got: 0,
        }
    }

    pub(crate) fn into_event(self, result: Result<(), Errno>) -> Event {
        Event::Tx {
            ctx: self.ctx,
            kind: self.kind,
            result,
            data: if result.is_ok() {
                self.result_data
            } else {
                Vec::new()
            },
        }
    }
}

/// An empty request of type `ty`.
pub(crate) fn blank_req(ty: PktType) -> Req {
    Req {
        ty,
        flags: 0,
        msg_id: 0,
        cookie: 0,
        tag: 0,
        total_len: 0,
        seg_offset: 0,
        send_id: 0,
        key: 0,
        cq_data: 0,
        rma_offset: 0,
    }
}

impl Engine {
    /// Send a message (`fi_send`, `fi_tsend`, with `FI_DELIVERY_COMPLETE` and remote
    /// CQ data as asked). Errors: `FI_EMSGSIZE` above [`super::Config::max_msg_size`];
    /// `FI_EHOSTUNREACH` for a peer declared lost (remove it first).
    pub fn send(&mut self, now: Nanos, s: SendReq) -> Result<(), Errno> {
        if s.data.len() > self.cfg.max_msg_size {
            return Err(Errno::EMSGSIZE);
        }
        let p = self.peer_mut(now, s.peer);
        if p.failed {
            return Err(Errno::EHOSTUNREACH);
        }
        let msg_id = p.next_msg_id;
        p.next_msg_id = p.next_msg_id.wrapping_add(1);
        let mut req = blank_req(PktType::EagerMsg);
        req.msg_id = msg_id;
        req.total_len = s.data.len() as u64;
        if let Some(t) = s.tag {
            req.tag = t;
            req.ty = PktType::EagerTag;
        }
        if let Some(d) = s.cq_data {
            req.flags |= wire::F_CQ_DATA;
            req.cq_data = d;
        }
        if s.delivery_complete {
            req.flags |= wire::F_DC;
        }
        let mut op = TxOp::new(s.peer, s.ctx, TxKind::Send, s.data, req);
        op.delivery_complete = s.delivery_complete;
        self.submit(now, op);
        Ok(())
    }

    /// Record `op` and start it (or wait for the peer's handshake).
    pub(crate) fn submit(&mut self, now: Nanos, op: TxOp) -> u32 {
        self.now = self.now.max(now);
        let id = self.next_tx;
        self.next_tx = (self.next_tx.wrapping_add(1) & !READ_KEY_BIT).max(1);
        let addr = op.peer;
        self.tx.insert(id, op);
        let p = self.peer_mut(now, addr);
        p.add_op();
        if matches!(p.hs, TxHandshake::Known { .. }) {
            self.start_tx(id);
        } else {
            p.awaiting_hs.push(id);
            self.ask_handshake(now, addr);
        }
        id
    }

    /// Build and queue the request packets of operation `id` (the handshake is known).
    pub(crate) fn start_tx(&mut self, id: u32) {
        let Some(op) = self.tx.get(&id) else {
            return;
        };
        let Some(TxHandshake::Known {
            features, cookie, ..
        }) = self.peers.get(&op.peer).map(|p| p.hs)
        else {
            return;
        };
        let mut req = op.req;
        req.cookie = cookie;
        req.send_id = id;
        let len = op.data.len();
        let room = self.cfg.eager_capacity().max(1);
        let mut pkts: Vec<Vec<u8>> = Vec::new();
        let mut waiting;
        let mut more = false;
        let proto = match op.kind {
            TxKind::Send => {
                if op.delivery_complete && features & wire::FEAT_DELIVERY_COMPLETE == 0 {
                    self.finish_tx(id, Err(Errno::EOPNOTSUPP));
                    return;
                }
                waiting = op.delivery_complete;
                let tagged = req.ty == PktType::EagerTag;
                let pick = |m: PktType, t: PktType| if tagged { t } else { m };
                if len <= room {
                    pkts.push(wire::emit_req(&req, &op.data));
                    TxProto::Eager
                } else if len <= self.cfg.max_medium_msg_size {
                    req.ty = pick(PktType::MediumMsg, PktType::MediumTag);
                    for (i, chunk) in op.data.chunks(room).enumerate() {
                        req.seg_offset = (i * room) as u64;
                        pkts.push(wire::emit_req(&req, chunk));
                    }
                    TxProto::Medium
                } else if self.cfg.rdma_read
                    && features & wire::FEAT_RDMA_READ != 0
                    && len >= self.cfg.min_read_msg_size
                {
                    req.ty = pick(PktType::LongReadMsg, PktType::LongReadTag);
                    req.key = READ_KEY_BIT | id;
                    pkts.push(wire::emit_req(&req, &[]));
                    waiting = true;
                    TxProto::LongRead
                } else {
                    req.ty = pick(PktType::LongCtsMsg, PktType::LongCtsTag);
                    let first = room.min(len);
                    pkts.push(wire::emit_req(&req, &op.data[..first]));
                    more = first < len;
                    TxProto::LongCts { sent: first }
                }
            }
            TxKind::Write => {
                for (i, chunk) in op.data.chunks(room).enumerate() {
                    req.seg_offset = (i * room) as u64;
                    pkts.push(wire::emit_req(&req, chunk));
                }
                waiting = true;
                TxProto::Write
            }
            TxKind::Read => {
                pkts.push(wire::emit_req(&req, &[]));
                waiting = true;
                TxProto::Read
            }
            TxKind::Atomic => {
                pkts.push(wire::emit_req(&req, &op.data));
                waiting = true;
                TxProto::Atomic
            }
        };
        let addr = op.peer;
        if let Some(op) = self.tx.get_mut(&id) {
            op.proto = Some(proto);
            op.pending.answer = waiting;
            op.pending.more_to_queue = more;
            op.pending.pkts_out += pkts.len();
        }
        for p in pkts {
            self.queue(addr, p, Owner::Tx(id));
        }
    }

    /// The transport took one of operation `id`'s packets.
    pub(crate) fn tx_packet_done(&mut self, id: u32) {
        if let Some(op) = self.tx.get_mut(&id) {
            op.pending.pkts_out = op.pending.pkts_out.saturating_sub(1);
        }
        self.maybe_complete_tx(id);
    }

    fn maybe_complete_tx(&mut self, id: u32) {
        if let Some(result) = self.tx.get(&id).and_then(|op| op.pending.outcome()) {
            self.finish_tx(id, result);
        }
    }

    /// Complete operation `id` with `result`.
    pub(crate) fn finish_tx(&mut self, id: u32, result: Result<(), Errno>) {
        let Some(op) = self.tx.remove(&id) else {
            return;
        };
        if let Some(p) = self.peers.get_mut(&op.peer) {
            p.end_op();
        }
        self.events.push_back(op.into_event(result));
    }

    /// The transmit operation `id` if `src` is its peer.
    fn tx_of(&mut self, src: PeerAddr, id: u32) -> Option<&mut TxOp> {
        self.tx.get_mut(&id).filter(|o| o.peer == src)
    }

    /// A control packet for the sending side (or `CTSDATA` for the receiving side).
    pub(crate) fn on_ctrl(&mut self, now: Nanos, src: PeerAddr, c: Ctrl, payload: &[u8]) {
        match c.ty {
            PktType::Cts => self.on_cts(src, c),
            PktType::CtsData => self.on_cts_data(now, src, c, payload),
            PktType::Eor | PktType::Receipt => {
                let Some(op) = self.tx_of(src, c.send_id) else {
                    self.stats.stale += 1;
                    return;
                };
                if !op.pending.answer {
                    self.stats.stale += 1;
                    return;
                }
                op.pending.answered(c.status);
                self.maybe_complete_tx(c.send_id);
            }
            PktType::ReadRsp => {
                let Some(op) = self.tx_of(src, c.send_id) else {
                    self.stats.stale += 1;
                    return;
                };
                let total = op.req.total_len;
                let end = c.offset.checked_add(payload.len() as u64);
                if op.proto != Some(TxProto::Read)
                    || !op.pending.answer
                    || end.is_none_or(|e| e > total)
                {
                    self.stats.stale += 1;
                    return;
                }
                let off = c.offset as usize;
                if op.result_data.len() != total as usize {
                    op.result_data = vec![0; total as usize];
                }
                op.result_data[off..off + payload.len()].copy_from_slice(payload);
                op.got += payload.len();
                if op.got as u64 >= total {
                    op.pending.answer = false;
                }
                self.maybe_complete_tx(c.send_id);
            }
            PktType::AtomRsp => {
                let Some(op) = self.tx_of(src, c.send_id) else {
                    self.stats.stale += 1;
                    return;
                };
                if op.proto != Some(TxProto::Atomic) || !op.pending.answer {
                    self.stats.stale += 1;
                    return;
                }
                op.pending.answered(c.status);
                // The original elements: as many bytes as the target covers, for
                // fetch and compare calls (a compare request carries two sets).
                let want = match op.req.ty {
                    PktType::FetchRta => op.req.total_len,
                    PktType::CompareRta => op.req.total_len / 2,
                    _ => 0,
                };
                if op.pending.error.is_none() && payload.len() as u64 != want {
                    op.pending.error = Some(Errno::EPROTO);
                }
                op.result_data = payload.to_vec();
                self.maybe_complete_tx(c.send_id);
            }
            _ => self.stats.stale += 1,
        }
    }

    /// A grant: queue `CTSDATA` for it.
    fn on_cts(&mut self, src: PeerAddr, c: Ctrl) {
        let room = self.cfg.mtu.saturating_sub(CTRL_LEN).max(1);
        let Some(op) = self.tx_of(src, c.send_id) else {
            self.stats.stale += 1;
            return;
        };
        let Some(TxProto::LongCts { sent }) = op.proto else {
            self.stats.stale += 1;
            return;
        };
        let len = op.data.len() as u64;
        let end = c.offset.checked_add(c.length);
        // A grant starts where the data sent so far ends and stays within the message.
        if c.offset != sent as u64 || end.is_none_or(|e| e > len) {
            self.stats.stale += 1;
            return;
        }
        let end = end.unwrap_or(len) as usize;
        let mut pkts = Vec::new();
        let mut off = sent;
        while off < end {
            let n = room.min(end - off);
            let mut d = Ctrl::new(PktType::CtsData, c.send_id);
            d.recv_id = c.recv_id;
            d.offset = off as u64;
            pkts.push(wire::emit_ctrl(&d, &op.data[off..off + n]));
            off += n;
        }
        op.proto = Some(TxProto::LongCts { sent: end });
        op.pending.more_to_queue = end < op.data.len();
        op.pending.pkts_out += pkts.len();
        for p in pkts {
            self.queue(src, p, Owner::Tx(c.send_id));
        }
    }

    /// The bytes of the internal read region of operation `id` for `reader`.
    pub(crate) fn long_read_bytes(
        &self,
        reader: PeerAddr,
        id: u32,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, Errno> {
        let op = self
            .tx
            .get(&id)
            .filter(|o| o.peer == reader && o.proto == Some(TxProto::LongRead))
            .ok_or(Errno::EACCES)?;
        let end = offset
            .checked_add(len as u64)
            .filter(|&e| e <= op.data.len() as u64)
            .ok_or(Errno::EINVAL)?;
        Ok(op.data[offset as usize..end as usize].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The completion rule: an error ends the operation once no packet is out; success
    /// needs nothing left at all.
    #[test]
    fn an_operation_ends_once_nothing_it_waits_for_is_left() {
        let p = |pkts_out, answer, more_to_queue, error| Pending {
            pkts_out,
            answer,
            more_to_queue,
            error,
        };
        let cases = [
            (p(0, false, false, None), Some(Ok(()))),
            (p(1, false, false, None), None),
            (p(0, true, false, None), None),
            (p(0, false, true, None), None),
            (p(1, false, false, Some(Errno::EIO)), None),
            (p(0, true, true, Some(Errno::EIO)), Some(Err(Errno::EIO))),
        ];
        for (pending, want) in cases {
            assert_eq!(pending.outcome(), want, "{pending:?}");
        }
        let mut q = p(0, true, false, None);
        q.answered(0);
        assert_eq!(q.outcome(), Some(Ok(())));
        let mut q = p(0, true, false, None);
        q.answered(Errno::EACCES.0 as u32);
        assert_eq!(q.outcome(), Some(Err(Errno::EACCES)));
    }
}
