//! The receiving side: message requests through the receive window (order), matching
//! against posted receives (kit's [`TagMatcher`](ofi_kit::tagmatch::TagMatcher):
//! tagged and untagged, directed receive, multi-receive), reassembly of medium messages
//! in any order, clear-to-send grants and `CTSDATA`, the read of a long-read message,
//! and the answers that end them (`RECEIPT` for delivery complete, `EOR`).
//!
//! A message whose receive is not posted yet is unexpected: its first packet is kept in
//! the matcher and its later segments beside it, both bounded by the matcher's limits
//! (a message that finds them full is refused with [`NotReady`], the transport's RNR).
//!
//! Nothing here panics on a peer's packet: bytes are copied only where they fit the
//! receive buffer, and a segment or `CTSDATA` outside its message or grant is counted
//! stale. A hostile sender that repeats segments can make its own message complete
//! early (with wrong bytes), never overrun a buffer.

use ofi_core::error::Errno;
use ofi_core::flags::OpFlags;
use ofi_kit::tagmatch::{multi_deliveries, Incoming, Match, Placement, PostAction, PostedRecv};

use super::engine::Engine;
use super::peer::Arrival;
use super::wire::{self, Ctrl, PktType, Repr, Req, CTRL_LEN};
use super::{Event, Nanos, NotReady, PeerAddr, RecvReq, RxDone, Transmit};

/// An unexpected message: its first packet.
#[derive(Clone, Debug)]
pub(crate) struct Unexp {
    pub peer: PeerAddr,
    pub req: Req,
    pub first: Vec<u8>,
}

/// Where a matched message goes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub ctx: u64,
    pub place_len: usize,
    pub offset: usize,
    pub truncated: bool,
    pub multi_released: bool,
    /// A discarded message: no completion of its own.
    pub silent: bool,
}

impl Target {
    fn new(ctx: u64, place: Placement, multi_released: bool) -> Target {
        Target {
            ctx,
            place_len: place.len,
            offset: place.offset,
            truncated: place.truncated,
            multi_released,
            silent: false,
        }
    }
}

/// A message being received.
#[derive(Debug)]
pub(crate) struct RxOp {
    pub peer: PeerAddr,
    pub msg_id: u32,
    pub req: Req,
    pub target: Target,
    pub buf: Vec<u8>,
    /// Message bytes accounted (placed or cut off).
    pub got: u64,
    /// Long-CTS: end of the current grant.
    pub granted_end: u64,
}

impl RxOp {
    pub(crate) fn into_event(self, result: Result<(), Errno>) -> Event {
        let result = match result {
            Ok(()) if self.target.truncated => Err(Errno::ETRUNC),
            r => r,
        };
        Event::Rx(RxDone {
            ctx: self.target.ctx,
            result,
            src: self.peer,
            tag: self.req.tag,
            tagged: self.req.ty.is_tagged(),
            msg_len: self.req.total_len as usize,
            data: self.buf,
            offset: self.target.offset,
            multi_recv_released: self.target.multi_released,
            cq_data: (self.req.flags & wire::F_CQ_DATA != 0).then_some(self.req.cq_data),
        })
    }

    /// Account `data` at message offset `off`, copying what fits the buffer.
    fn place(&mut self, off: u64, data: &[u8]) {
        let cap = self.buf.len() as u64;
        if off < cap {
            let n = (cap - off).min(data.len() as u64) as usize;
            let o = off as usize;
            self.buf[o..o + n].copy_from_slice(&data[..n]);
        }
        self.got = self.got.saturating_add(data.len() as u64);
    }

    fn complete(&self) -> bool {
        self.got >= self.req.total_len
    }
}

/// A completion describing `msg` without data (peek, discard, a peek's miss).
fn msg_info(ctx: u64, msg: &Incoming, result: Result<(), Errno>) -> Event {
    Event::Rx(RxDone {
        ctx,
        result,
        src: msg.src,
        tag: msg.tag,
        tagged: msg.tagged,
        msg_len: msg.len,
        data: Vec::new(),
        offset: 0,
        multi_recv_released: false,
        cq_data: msg.data,
    })
}

fn incoming(src: PeerAddr, req: &Req) -> Incoming {
    Incoming {
        src,
        tag: req.tag,
        len: req.total_len as usize,
        data: (req.flags & wire::F_CQ_DATA != 0).then_some(req.cq_data),
        tagged: req.ty.is_tagged(),
    }
}

impl Engine {
    /// Post a receive (`fi_recv`, `fi_trecv`, with `FI_MULTI_RECV`). Errors: the
    /// matcher's (`FI_EAGAIN` with the queue full).
    pub fn post_recv(&mut self, now: Nanos, r: RecvReq) -> Result<(), Errno> {
        self.now = self.now.max(now);
        let mut p = match r.tag {
            Some((tag, ignore)) => PostedRecv::tagged(r.ctx as usize, tag, ignore, (), r.len),
            None => PostedRecv::msg(r.ctx as usize, (), r.len),
        };
        if let Some(src) = r.src {
            p = p.from_src(src);
        }
        let acted = OpFlags::MULTI_RECV | OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD;
        p = p.with_flags(r.flags & acted);
        match self.matcher.post(p).map_err(|e| e.code())? {
            PostAction::Queued => {}
            PostAction::One {
                recv,
                place,
                payload,
                ..
            } => {
                let t = Target::new(recv.ctx as u64, place, false);
                self.start_unexpected(now, payload, t);
            }
            PostAction::Multi {
                recv,
                released,
                msgs,
            } => {
                for (place, _, payload, releases) in multi_deliveries(released, msgs) {
                    let t = Target::new(recv.ctx as u64, place, releases);
                    self.start_unexpected(now, payload, t);
                }
            }
            PostAction::Peeked { recv, msg } => {
                self.events
                    .push_back(msg_info(recv.ctx as u64, &msg, Ok(())));
            }
            PostAction::NoMessage { recv } => {
                let none = Incoming {
                    src: super::NO_SRC,
                    tag: 0,
                    len: 0,
                    data: None,
                    tagged: recv.tagged,
                };
                self.events
                    .push_back(msg_info(recv.ctx as u64, &none, Err(Errno::ENOMSG)));
            }
            PostAction::Discarded { recv, msg, payload } => {
                self.events
                    .push_back(msg_info(recv.ctx as u64, &msg, Ok(())));
                // The rest of the message still comes (or is granted, or read) and is
                // dropped as it does, so the sender completes.
                let t = Target {
                    ctx: recv.ctx as u64,
                    place_len: 0,
                    offset: 0,
                    truncated: false,
                    multi_released: false,
                    silent: true,
                };
                self.start_unexpected(now, payload, t);
            }
        }
        // Room in the unexpected queue may let held messages through.
        if self.cfg.ordered {
            let held: Vec<PeerAddr> = self
                .peers
                .iter()
                .filter(|(_, p)| p.win.held_len() > 0)
                .map(|(&a, _)| a)
                .collect();
            for a in held {
                self.drain_held(now, a);
            }
        }
        Ok(())
    }

    /// A matched unexpected message begins.
    fn start_unexpected(&mut self, now: Nanos, u: Unexp, t: Target) {
        let key = (u.peer, u.req.msg_id);
        let segs = self.unexp_segs.remove(&key);
        let needs_more = u.first.len() as u64
            + segs
                .as_ref()
                .map_or(0, |s| s.iter().map(|x| x.1.len() as u64).sum())
            < u.req.total_len;
        let lost = self.peers.get(&u.peer).is_none_or(|p| p.failed);
        if lost && needs_more {
            let op = RxOp {
                peer: u.peer,
                msg_id: u.req.msg_id,
                req: u.req,
                target: t,
                buf: Vec::new(),
                got: 0,
                granted_end: 0,
            };
            if !t.silent {
                self.events
                    .push_back(op.into_event(Err(super::LOST_PEER_ERRNO)));
            }
            return;
        }
        let id = self.start_rx(now, u.peer, u.req, &u.first, t);
        if let (Some(id), Some(segs)) = (id, segs) {
            for (off, d) in segs {
                self.rx_segment(id, off, &d);
            }
        }
    }

    /// A message request from `src` (its cookie checked).
    pub(crate) fn on_msg_req(
        &mut self,
        now: Nanos,
        src: PeerAddr,
        req: Req,
        payload: &[u8],
        bytes: &[u8],
    ) -> Result<(), NotReady> {
        let (ordered, window) = (self.cfg.ordered, self.cfg.recvwin_size);
        let Some(p) = self.peers.get_mut(&src) else {
            return Ok(());
        };
        match p.win.arrive(req.msg_id, ordered, window) {
            Arrival::Released => {
                self.route_segment(src, &req, payload);
                Ok(())
            }
            Arrival::Refuse => {
                self.stats.not_ready += 1;
                Err(NotReady)
            }
            Arrival::Hold => {
                if p.win.held_len() >= window as usize {
                    self.stats.not_ready += 1;
                    return Err(NotReady);
                }
                p.win.hold(req.msg_id, bytes.to_vec());
                Ok(())
            }
            Arrival::Release => {
                if self.release_msg(now, src, req, payload).is_err() {
                    self.stats.not_ready += 1;
                    return Err(NotReady);
                }
                if ordered {
                    self.drain_held(now, src);
                }
                Ok(())
            }
        }
    }

    /// Release the held messages of `src` that are now in order.
    fn drain_held(&mut self, now: Nanos, src: PeerAddr) {
        loop {
            let Some(p) = self.peers.get_mut(&src) else {
                return;
            };
            let base = p.win.base;
            let Some(pkts) = p.win.take_held(base) else {
                return;
            };
            let mut released = false;
            for (i, bytes) in pkts.iter().enumerate() {
                let Ok(Repr::Req(req, payload)) = Repr::parse(bytes) else {
                    continue;
                };
                if !released {
                    if self.release_msg(now, src, req, payload).is_err() {
                        // No room for it yet: keep it (and what follows) held.
                        if let Some(p) = self.peers.get_mut(&src) {
                            p.win.put_back(base, pkts[i..].to_vec());
                        }
                        return;
                    }
                    released = true;
                } else {
                    self.route_segment(src, &req, payload);
                }
            }
        }
    }

    /// Match a message's first packet to arrive (or store it unexpected).
    fn release_msg(
        &mut self,
        now: Nanos,
        src: PeerAddr,
        req: Req,
        payload: &[u8],
    ) -> Result<(), NotReady> {
        let inc = incoming(src, &req);
        let bytes = if matches!(
            req.ty,
            PktType::LongReadMsg | PktType::LongReadTag | PktType::LongCtsMsg | PktType::LongCtsTag
        ) {
            payload.len()
        } else {
            req.total_len as usize
        };
        let target = match self.matcher.match_incoming(&inc) {
            Match::Unexpected => None,
            Match::Recv { recv, place } => Some(Target::new(recv.ctx as u64, place, false)),
            Match::Multi { buf, place } => {
                Some(Target::new(buf.recv().ctx as u64, place, buf.is_released()))
            }
        };
        match target {
            Some(t) => {
                self.start_rx(now, src, req, payload, t);
            }
            None => {
                let u = Unexp {
                    peer: src,
                    req,
                    first: payload.to_vec(),
                };
                if self.matcher.push_unexpected_sized(inc, u, bytes).is_err() {
                    return Err(NotReady);
                }
                if matches!(req.ty, PktType::MediumMsg | PktType::MediumTag) {
                    self.unexp_segs.insert((src, req.msg_id), Vec::new());
                }
            }
        }
        if let Some(p) = self.peers.get_mut(&src) {
            p.win.release(req.msg_id);
        }
        Ok(())
    }

    /// Begin receiving a matched message; returns the transfer's id while it lasts.
    fn start_rx(
        &mut self,
        now: Nanos,
        src: PeerAddr,
        req: Req,
        first: &[u8],
        t: Target,
    ) -> Option<u32> {
        let id = self.next_rx;
        self.next_rx = self.next_rx.wrapping_add(1).max(1);
        let mut op = RxOp {
            peer: src,
            msg_id: req.msg_id,
            req,
            target: t,
            buf: vec![0; t.place_len],
            got: 0,
            granted_end: 0,
        };
        op.place(req.seg_offset, first);
        if let Some(p) = self.peers.get_mut(&src) {
            p.add_op();
        }
        self.rx.insert(id, op);
        match req.ty {
            PktType::MediumMsg | PktType::MediumTag => {
                self.rx_by_msg.insert((src, req.msg_id), id);
            }
            PktType::LongCtsMsg | PktType::LongCtsTag => {
                if let Some(op) = self.rx.get_mut(&id) {
                    op.granted_end = op.got;
                }
                self.grant(id);
            }
            PktType::LongReadMsg | PktType::LongReadTag => {
                let token = self.token();
                if let Some(p) = self.peers.get_mut(&src) {
                    p.add_work(now);
                }
                self.read_tokens.insert(token, (src, id));
                self.reads.push_back(Transmit::Read {
                    peer: src,
                    token,
                    key: req.key,
                    offset: 0,
                    len: req.total_len as usize,
                });
                return Some(id);
            }
            _ => {}
        }
        if self.rx.get(&id).is_some_and(RxOp::complete) {
            self.finish_rx(id, Ok(()));
            return None;
        }
        Some(id)
    }

    /// The bytes one clear-to-send grant gives: `tx_min_credits` packets of data.
    fn grant_room(&self) -> u64 {
        (self.cfg.mtu.saturating_sub(CTRL_LEN).max(1) * self.cfg.tx_min_credits.max(1)) as u64
    }

    /// Grant the next window of a long-CTS message.
    fn grant(&mut self, id: u32) {
        let room = self.grant_room();
        let Some(op) = self.rx.get_mut(&id) else {
            return;
        };
        if op.complete() {
            return;
        }
        let len = room.min(op.req.total_len - op.granted_end);
        let mut c = Ctrl::new(PktType::Cts, op.req.send_id);
        c.recv_id = id;
        c.offset = op.granted_end;
        c.length = len;
        op.granted_end += len;
        let peer = op.peer;
        self.queue_ctrl(peer, &c, &[]);
    }

    /// A later segment of a released message.
    fn route_segment(&mut self, src: PeerAddr, req: &Req, payload: &[u8]) {
        if !matches!(req.ty, PktType::MediumMsg | PktType::MediumTag) {
            self.stats.stale += 1; // a second first packet: a duplicate
            return;
        }
        let key = (src, req.msg_id);
        if let Some(&id) = self.rx_by_msg.get(&key) {
            self.rx_segment(id, req.seg_offset, payload);
        } else if let Some(v) = self.unexp_segs.get_mut(&key) {
            v.push((req.seg_offset, payload.to_vec()));
        } else {
            self.stats.stale += 1;
        }
    }

    fn rx_segment(&mut self, id: u32, off: u64, data: &[u8]) {
        let Some(op) = self.rx.get_mut(&id) else {
            return;
        };
        if off.saturating_add(data.len() as u64) > op.req.total_len {
            self.stats.stale += 1;
            return;
        }
        op.place(off, data);
        if op.complete() {
            self.finish_rx(id, Ok(()));
        }
    }

    /// `CTSDATA` for a long-CTS receive.
    pub(crate) fn on_cts_data(&mut self, _now: Nanos, src: PeerAddr, c: Ctrl, payload: &[u8]) {
        let half_room = self.grant_room() / 2;
        let Some(op) = self.rx.get_mut(&c.recv_id).filter(|o| o.peer == src) else {
            self.stats.stale += 1;
            return;
        };
        let end = c.offset.checked_add(payload.len() as u64);
        if !matches!(op.req.ty, PktType::LongCtsMsg | PktType::LongCtsTag)
            || op.req.send_id != c.send_id
            || end.is_none_or(|e| e > op.granted_end)
        {
            self.stats.stale += 1;
            return;
        }
        op.place(c.offset, payload);
        // The next window goes once at most half a window of granted data is to come,
        // so the sender never waits a round trip between windows (at most 1.5 windows
        // outstanding). Grants stay in order at the sender: each next one is sent only
        // after data the sender sent in answer to the previous one.
        let ahead = op.granted_end.saturating_sub(op.got);
        let more = op.granted_end < op.req.total_len;
        if op.complete() {
            self.finish_rx(c.recv_id, Ok(()));
        } else if more && ahead <= half_room {
            self.grant(c.recv_id);
        }
    }

    /// The read of a long-read message ended.
    pub fn handle_read_done(&mut self, now: Nanos, token: u64, result: Result<Vec<u8>, Errno>) {
        self.now = self.now.max(now);
        let Some((peer, id)) = self.read_tokens.remove(&token) else {
            return;
        };
        if let Some(p) = self.peers.get_mut(&peer) {
            p.last_progress = now;
            p.end_work();
        }
        let result = match result {
            Ok(d) => match self.rx.get_mut(&id) {
                Some(op) if d.len() as u64 == op.req.total_len => {
                    op.place(0, &d);
                    Ok(())
                }
                _ => Err(Errno::EIO),
            },
            Err(e) => Err(e),
        };
        self.finish_rx(id, result);
    }

    /// The transport reads this endpoint's memory for `reader`: a long message being
    /// read, or an application region with remote read access.
    pub fn serve_read(
        &self,
        reader: PeerAddr,
        key: u32,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, Errno> {
        if key & super::tx::READ_KEY_BIT != 0 {
            return self.long_read_bytes(reader, key & !super::tx::READ_KEY_BIT, offset, len);
        }
        self.region_bytes(key, offset, len)
    }

    /// Complete receive `id`; answer the sender as its path asks.
    pub(crate) fn finish_rx(&mut self, id: u32, result: Result<(), Errno>) {
        let Some(op) = self.rx.remove(&id) else {
            return;
        };
        self.rx_by_msg.remove(&(op.peer, op.msg_id));
        let peer = op.peer;
        if let Some(p) = self.peers.get_mut(&peer) {
            p.end_op();
        }
        let status = match result {
            Ok(()) => 0,
            Err(e) => e.0 as u32,
        };
        let answer = match op.req.ty {
            PktType::LongReadMsg | PktType::LongReadTag => Some(PktType::Eor),
            _ if op.req.flags & wire::F_DC != 0 => Some(PktType::Receipt),
            _ => None,
        };
        if let Some(ty) = answer {
            let mut c = Ctrl::new(ty, op.req.send_id);
            c.status = status;
            self.queue_ctrl(peer, &c, &[]);
        }
        if !op.target.silent {
            self.events.push_back(op.into_event(result));
        }
    }
}
