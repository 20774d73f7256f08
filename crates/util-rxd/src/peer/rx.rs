//! Receiving: parsing a packet, acknowledgements (cumulative, selective, receiver not
//! ready) and data in sequence order, delivered whole or piece by piece to a sink.
//!
//! # Invariants
//!
//! - Segments are delivered in sequence order only; packets out of order are kept
//!   within twice the window, duplicates dropped.
//! - A message's announced length must add up exactly, or the peer is reset.
//! - A packet the sink refuses is not taken: the receive sequence stays before it.
//!
//! Nothing here panics on packet input: malformed packets are counted and dropped.

use super::*;

impl Engine {
    /// Handle one packet received at time `now` from the address `src` (the datagram's
    /// source as the network reports it, in the form of the peers' addresses).
    pub fn handle_packet(&mut self, src: &[u8], pkt: &[u8], now: u64) {
        self.handle_packet_inner(src, pkt, now, None);
    }

    /// Handle one received packet at time `now`, handing message data to `sink` piece
    /// by piece, in order, as it becomes deliverable, instead of reassembling it into an
    /// [`Event::Message`]: the caller places it (no reassembly copy). A peer's open
    /// message ends with a piece with `last`, or is abandoned when an
    /// [`Event::PeerLost`] for the peer comes (or a new `first` piece from it: a new
    /// connection).
    pub fn handle_packet_streaming(
        &mut self,
        src: &[u8],
        pkt: &[u8],
        now: u64,
        sink: &mut SegSink<'_>,
    ) {
        self.handle_packet_inner(src, pkt, now, Some(sink));
    }

    pub(super) fn handle_packet_inner(
        &mut self,
        src: &[u8],
        pkt: &[u8],
        now: u64,
        mut sink: Option<&mut SegSink<'_>>,
    ) {
        let Ok(h) = Hdr::from_bytes(pkt) else {
            self.stats.dropped += 1;
            return;
        };
        let body = &pkt[HDR_LEN..];
        match h.ty {
            PktType::Connect => self.on_connect(src, &h, body, now),
            PktType::Challenge => self.on_challenge(src, &h, body),
            PktType::Accept => self.on_accept(src, &h, now),
            PktType::Data | PktType::Ack => {
                let Some(pid) = self.check_conn(src, &h) else {
                    self.stats.dropped += 1;
                    return;
                };
                self.stats.received += 1;
                self.peers[pid as usize].last_heard = now;
                if h.flags & F_ACK != 0 {
                    self.on_ack(pid, h.ack, h.sack, h.flags & F_RNR != 0, now);
                }
                if h.ty == PktType::Data {
                    self.on_data(pid, &h, pkt, now, &mut sink);
                }
            }
        }
    }

    pub(super) fn on_ack(&mut self, pid: PeerId, ack: u32, sack: u64, rnr: bool, now: u64) {
        let cfg = self.cfg;
        let p = &mut self.peers[pid as usize];
        // Ignore acknowledgements of packets never sent.
        if seq_lt(p.sent_upto, ack) || seq_lt(ack, p.snd_una) {
            return;
        }
        let mut progressed = false;
        while seq_lt(p.snd_una, ack) {
            if let Some(t) = p.inflight.pop_front() {
                if t.counted {
                    p.inflight_bytes = p.inflight_bytes.saturating_sub(t.buf.len());
                }
            }
            p.snd_una = p.snd_una.wrapping_add(1);
            progressed = true;
        }
        while let Some(&(token, last)) = p.msgs.front() {
            if seq_lt(last, ack) {
                p.msgs.pop_front();
                self.events.push_back(Event::Sent { token });
            } else {
                break;
            }
        }
        if progressed {
            p.dup_sacks = 0;
        }
        if rnr && ack == p.snd_una {
            // The peer is alive but refused the next packet: offer it again at a
            // fixed pace, not counted toward losing the peer.
            if let Some(t) = p.inflight.front_mut().filter(|t| t.tries > 0) {
                t.rnr = true;
                t.tries = t.tries.min(rnr_tries(&cfg));
                t.sent_at = now;
                t.deadline = now.saturating_add(rto_for(&cfg, t.tries + 1));
                let d = t.deadline;
                arm_in(&mut self.timers, p, pid, d);
            }
            self.stats.peer_not_ready += 1;
        }
        if sack != 0 {
            let mut top = 0u32;
            for i in 0..64u32 {
                if sack & (1 << i) != 0 {
                    let idx = (i + 1) as usize;
                    if let Some(t) = p.inflight.get_mut(idx) {
                        t.sacked = true;
                    }
                    top = i + 1;
                }
            }
            if !progressed {
                p.dup_sacks += 1;
            }
            if p.dup_sacks >= 2 || progressed {
                // Resend holes below the highest packet the peer has, once per RTO.
                let rto = self.cfg.rto;
                let mut any = false;
                for idx in 0..top as usize {
                    if let Some(t) = p.inflight.get_mut(idx) {
                        if !t.sacked
                            && !t.rnr
                            && t.tries > 0
                            && now.saturating_sub(t.sent_at) >= rto / 4
                        {
                            let s = p.snd_una.wrapping_add(idx as u32);
                            if !p.resend.contains(&s) {
                                p.resend.push_back(s);
                                any = true;
                            }
                        }
                    }
                }
                if any {
                    p.dup_sacks = 0;
                    self.mark(pid);
                }
            }
        }
        if progressed
            && seq_lt(
                self.peers[pid as usize].sent_upto,
                self.peers[pid as usize].snd_nxt,
            )
        {
            self.mark(pid);
        }
    }

    pub(super) fn on_data(
        &mut self,
        pid: PeerId,
        h: &Hdr,
        pkt: &[u8],
        now: u64,
        sink: &mut Option<&mut SegSink<'_>>,
    ) {
        let window = self.cfg.window;
        let p = &mut self.peers[pid as usize];
        let s = h.seq;
        if seq_lt(s, p.rcv_nxt) {
            self.stats.duplicates += 1;
            p.ack_now = true;
            self.mark(pid);
            return;
        }
        if s != p.rcv_nxt {
            if s.wrapping_sub(p.rcv_nxt) > window.saturating_mul(2) {
                self.stats.dropped += 1;
                return;
            }
            match p.ooo.entry(s) {
                std::collections::btree_map::Entry::Occupied(_) => self.stats.duplicates += 1,
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(pkt.to_vec());
                }
            }
            p.ack_now = true;
            self.mark(pid);
            return;
        }
        // A window-full sender: acknowledge at the end of this round.
        if h.flags & F_REQ != 0 {
            p.ack_now = true;
        }
        match self.deliver(pid, h.flags, &pkt[HDR_LEN..], sink) {
            Delivery::Taken => {}
            Delivery::NotReady => return self.not_ready(pid),
            Delivery::Broken => return,
        }
        loop {
            let p = &mut self.peers[pid as usize];
            p.rcv_nxt = p.rcv_nxt.wrapping_add(1);
            p.ack_count += 1;
            let nxt = p.rcv_nxt;
            let Some(b) = p.ooo.remove(&nxt) else {
                break;
            };
            let flags = b[3];
            if flags & F_REQ != 0 {
                p.ack_now = true;
            }
            match self.deliver(pid, flags, &b[HDR_LEN..], sink) {
                Delivery::Taken => {}
                Delivery::NotReady => {
                    // Kept where it was, for when the receiver has room.
                    self.peers[pid as usize].ooo.insert(nxt, b);
                    return self.not_ready(pid);
                }
                Delivery::Broken => return,
            }
        }
        let every = self.cfg.ack_every;
        let delay = self.cfg.ack_delay;
        let p = &mut self.peers[pid as usize];
        if p.ack_now || p.ack_count >= every || !p.ooo.is_empty() {
            p.ack_now = true;
            self.mark(pid);
        } else if p.ack_due.is_none() {
            let t = now.saturating_add(delay);
            p.ack_due = Some(t);
            self.arm(pid, t);
        }
    }

    /// The sink refused the next packet of `pid`: owe the peer an `F_RNR` acknowledgement.
    pub(super) fn not_ready(&mut self, pid: PeerId) {
        self.stats.not_ready += 1;
        let p = &mut self.peers[pid as usize];
        p.rnr = true;
        p.ack_now = true;
        self.mark(pid);
    }

    /// Take one in-order segment (see [`Delivery`]).
    pub(super) fn deliver(
        &mut self,
        pid: PeerId,
        flags: u8,
        body: &[u8],
        sink: &mut Option<&mut SegSink<'_>>,
    ) -> Delivery {
        let max = self.cfg.max_msg;
        let p = &mut self.peers[pid as usize];
        let last = flags & F_LAST != 0;
        // Check the segment against the open message (lengths must add up exactly).
        let (first, total, offset, data) = if flags & F_FIRST != 0 {
            match first_len(body) {
                Ok(t) if p.rx_open.is_none() && (t as usize) <= max => {
                    let d = &body[FIRST_LEN..];
                    (true, t as usize, 0, d)
                }
                _ => (false, 0, usize::MAX, body),
            }
        } else {
            match p.rx_open {
                Some((t, got)) => (false, t, got, body),
                None => (false, 0, usize::MAX, body),
            }
        };
        let ok = offset != usize::MAX
            && offset + data.len() <= total
            && last == (offset + data.len() == total);
        if !ok {
            self.stats.dropped += 1;
            self.fail_peer(pid, Failure::Protocol);
            return Delivery::Broken;
        }
        let open = (!last).then_some((total, offset + data.len()));
        match sink {
            Some(f) => {
                let taken = f(Seg {
                    peer: pid,
                    addr: &p.addr,
                    first,
                    total,
                    offset,
                    data,
                    last,
                });
                if first && !taken {
                    return Delivery::NotReady;
                }
                p.rx_open = open;
            }
            None => {
                p.rx_open = open;
                if first && last {
                    self.events.push_back(Event::Message {
                        peer: pid,
                        data: data.to_vec(),
                    });
                } else {
                    let v = p.reasm.get_or_insert_with(|| Vec::with_capacity(total));
                    v.extend_from_slice(data);
                    if last {
                        if let Some(v) = p.reasm.take() {
                            self.events.push_back(Event::Message { peer: pid, data: v });
                        }
                    }
                }
            }
        }
        Delivery::Taken
    }
}
