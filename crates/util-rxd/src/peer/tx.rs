//! Sending: queueing messages as segments, and handing packets (data, acknowledgements,
//! handshake packets, `CHALLENGE`s) to the caller's sink within the window.
//!
//! # Invariants
//!
//! - At most `window` packets and `max_inflight` bytes of a connection are
//!   unacknowledged; `inflight` holds exactly `[snd_una, snd_nxt)` in order.
//! - A packet the sink refuses stays queued and is offered again.
//!
//! Nothing here panics.

use super::*;

impl Engine {
    /// Queue a message of `len` bytes to `peer`; `fill(offset, n, packet)` appends the
    /// `n` message bytes at `offset` to `packet` (called once per segment, in order; a
    /// packet left of another length is cut or zero-padded to it). `token` is reported
    /// in [`Event::Sent`] or [`Event::Failed`]. Starts a connection when needed.
    ///
    /// # Errors
    /// `Err(())` for an unknown peer or a message over `max_msg` (or 4 GiB).
    #[allow(clippy::result_unit_err)]
    pub fn send_with(
        &mut self,
        peer: PeerId,
        token: u64,
        len: usize,
        now: u64,
        mut fill: impl FnMut(usize, usize, &mut Vec<u8>),
    ) -> Result<(), ()> {
        if len > self.cfg.max_msg || len > u32::MAX as usize {
            return Err(());
        }
        let seg = self.cfg.seg_size;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return Err(());
        };
        let mut off = 0usize;
        let mut first = true;
        loop {
            let hdr_extra = if first { FIRST_LEN } else { 0 };
            let n = (len - off).min(seg - hdr_extra);
            let last = off + n == len;
            let mut buf = Vec::with_capacity(HDR_LEN + hdr_extra + n);
            let mut h = Hdr::new(PktType::Data);
            h.seq = p.snd_nxt;
            h.flags = if first { F_FIRST } else { 0 } | if last { F_LAST } else { 0 };
            buf.resize(HDR_LEN + hdr_extra, 0);
            h.write(&mut buf);
            if first {
                buf[HDR_LEN..HDR_LEN + FIRST_LEN].copy_from_slice(&(len as u32).to_le_bytes());
            }
            let at = buf.len();
            fill(off, n, &mut buf);
            buf.resize(at + n, 0);
            p.inflight.push_back(TxPkt {
                buf,
                sent_at: 0,
                deadline: 0,
                tries: 0,
                sacked: false,
                counted: false,
                rnr: false,
            });
            p.snd_nxt = p.snd_nxt.wrapping_add(1);
            off += n;
            first = false;
            if last {
                break;
            }
        }
        p.msgs.push_back((token, p.snd_nxt.wrapping_sub(1)));
        if p.state == State::Idle {
            self.start_connect(peer, now);
        }
        self.mark(peer);
        Ok(())
    }

    /// Queue a message held in `data` (see [`Engine::send_with`]).
    ///
    /// # Errors
    /// As [`Engine::send_with`].
    #[allow(clippy::result_unit_err)]
    pub fn send(&mut self, peer: PeerId, token: u64, data: &[u8], now: u64) -> Result<(), ()> {
        self.send_with(peer, token, data.len(), now, |off, n, dst| {
            dst.extend_from_slice(&data[off..off + n])
        })
    }

    /// Hand packets to `sink(peer, address, bytes)` (to be sent as one datagram to the
    /// peer's address) at time `now`, at most `budget` of them. `sink` returns `false` when the
    /// network cannot take more now (the packet is kept and offered again later).
    /// Returns the packets taken.
    pub fn poll_transmit(
        &mut self,
        now: u64,
        budget: usize,
        mut sink: impl FnMut(PeerId, &[u8], &[u8]) -> bool,
    ) -> usize {
        let mut n = 0;
        // Challenges first: to the source of the CONNECT each answers.
        while n < budget {
            let Some((to, pkt)) = self.replies.front() else {
                break;
            };
            if !sink(NO_PEER, to, pkt) {
                return n;
            }
            self.replies.pop_front();
            self.stats.sent += 1;
            n += 1;
        }
        while n < budget {
            let Some(&pid) = self.ready.front() else {
                break;
            };
            let (done, sent, blocked) = self.pump_peer(pid, now, budget - n, &mut sink);
            n += sent;
            if blocked {
                break;
            }
            if done {
                self.ready.pop_front();
                if let Some(p) = self.peers.get_mut(pid as usize) {
                    p.queued = false;
                }
            }
        }
        n
    }

    /// Send what `pid` has; (nothing left, packets sent, sink refused).
    pub(super) fn pump_peer(
        &mut self,
        pid: PeerId,
        now: u64,
        budget: usize,
        sink: &mut impl FnMut(PeerId, &[u8], &[u8]) -> bool,
    ) -> (bool, usize, bool) {
        let cfg = self.cfg;
        let Some(p) = self.peers.get_mut(pid as usize) else {
            return (true, 0, false);
        };
        let mut n = 0;
        if p.send_connect {
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Connect);
            h.src_id = pid;
            h.src_sess = p.local_sess;
            self.scratch.clear();
            self.scratch.extend_from_slice(&h.bytes());
            self.scratch.extend_from_slice(&p.cookie.to_le_bytes());
            if !sink(pid, &p.addr, &self.scratch) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.send_connect = false;
        }
        if p.state != State::Connected {
            return (true, n, false);
        }
        let sack = p.sack_bits();
        let ack = p.rcv_nxt;
        if p.send_accept {
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Accept);
            h.dst_id = p.remote_id;
            h.src_id = pid;
            h.src_sess = p.local_sess;
            h.dst_sess = p.remote_sess;
            if !sink(pid, &p.addr, &h.bytes()) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.send_accept = false;
        }
        let mut acked = false;
        // Retransmissions first.
        while let Some(&s) = p.resend.front() {
            if n >= budget {
                return (false, n, false);
            }
            let idx = s.wrapping_sub(p.snd_una) as usize;
            if seq_lt(s, p.snd_una) || !seq_lt(s, p.sent_upto) {
                p.resend.pop_front();
                continue;
            }
            let Some(t) = p.inflight.get_mut(idx) else {
                p.resend.pop_front();
                continue;
            };
            if t.sacked {
                p.resend.pop_front();
                continue;
            }
            proto::set_ack(&mut t.buf, true, ack, sack);
            Hdr::patch_ids(&mut t.buf, p.remote_id, pid, p.local_sess, p.remote_sess);
            if !sink(pid, &p.addr, &t.buf) {
                return (false, n, true);
            }
            t.tries += 1;
            t.sent_at = now;
            t.deadline = now.saturating_add(rto_for(&cfg, t.tries));
            let d = t.deadline;
            arm_in(&mut self.timers, p, pid, d);
            self.stats.sent += 1;
            self.stats.retransmits += 1;
            n += 1;
            acked = true;
            p.resend.pop_front();
        }
        // New packets within the window.
        while seq_lt(p.sent_upto, p.snd_nxt) && p.sent_upto.wrapping_sub(p.snd_una) < cfg.window {
            if n >= budget {
                return (false, n, false);
            }
            let idx = p.sent_upto.wrapping_sub(p.snd_una) as usize;
            let Some(len) = p.inflight.get(idx).map(|t| t.buf.len()) else {
                break;
            };
            if p.inflight_bytes > 0 && p.inflight_bytes + len > cfg.max_inflight {
                break;
            }
            // Ask for an acknowledgement at once when this packet takes the bytes in
            // flight past half the limit (so the answer comes back while the rest of
            // the window goes), or when the window is full after it.
            let next_len = p.inflight.get(idx + 1).map(|t| t.buf.len());
            let half = cfg.max_inflight / 2;
            let crossing = p.inflight_bytes < half && p.inflight_bytes + len >= half;
            let full = next_len.is_some_and(|nl| {
                crossing
                    || idx as u32 + 2 > cfg.window
                    || p.inflight_bytes + len + nl > cfg.max_inflight
            });
            let Some(t) = p.inflight.get_mut(idx) else {
                break;
            };
            if full {
                t.buf[3] |= F_REQ;
            }
            proto::set_ack(&mut t.buf, true, ack, sack);
            Hdr::patch_ids(&mut t.buf, p.remote_id, pid, p.local_sess, p.remote_sess);
            if !sink(pid, &p.addr, &t.buf) {
                // Not sent: offered again later, and counted in flight only then (a
                // count taken here would be taken again at each refusal and released
                // once at the acknowledgement: the bytes in flight would grow with
                // nothing in flight until no packet may go and no timer is armed).
                return (false, n, true);
            }
            t.counted = true;
            p.inflight_bytes += len;
            t.tries = 1;
            t.sent_at = now;
            t.deadline = now.saturating_add(rto_for(&cfg, 1));
            let d = t.deadline;
            arm_in(&mut self.timers, p, pid, d);
            self.stats.sent += 1;
            n += 1;
            acked = true;
            p.sent_upto = p.sent_upto.wrapping_add(1);
        }
        if acked && !p.rnr {
            p.ack_now = false;
            p.ack_due = None;
            p.ack_count = 0;
        } else if p.ack_now || p.rnr {
            // (A refusal goes in a standalone acknowledgement even when data carried
            // the same `ack`: only there does the flag mean "not ready".)
            if n >= budget {
                return (false, n, false);
            }
            let mut h = Hdr::new(PktType::Ack);
            h.flags = F_ACK | if p.rnr { F_RNR } else { 0 };
            h.dst_id = p.remote_id;
            h.src_id = pid;
            h.src_sess = p.local_sess;
            h.dst_sess = p.remote_sess;
            h.ack = ack;
            h.sack = sack;
            if !sink(pid, &p.addr, &h.bytes()) {
                return (false, n, true);
            }
            self.stats.sent += 1;
            n += 1;
            p.ack_now = false;
            p.rnr = false;
            p.ack_due = None;
            p.ack_count = 0;
        }
        (true, n, false)
    }
}
