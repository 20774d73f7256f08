//! Connections: the stateless cookie handshake (`CONNECT`, `CHALLENGE`, `ACCEPT`), peer
//! slots for the far side under the peer bound, and resetting a connection.
//!
//! # Invariants
//!
//! - No state is created for a `CONNECT` without a valid cookie: it gets a `CHALLENGE`
//!   (queued in `Engine::replies`, at most `MAX_REPLIES`), nothing else.
//! - A `CHALLENGE` or `ACCEPT` is taken only from the address of a connection being
//!   opened, naming its session.
//! - Resetting a peer fails each of its queued and in-flight messages exactly once.
//!
//! Nothing here panics on packet input.

use super::*;

impl Engine {
    /// The peer at `addr` for a proven `CONNECT`: the existing one, a new one, or a
    /// reclaimed slot at the peer bound; `None` at the bound with nothing to reclaim.
    pub(super) fn remote_peer(&mut self, addr: &[u8], now: u64) -> Option<PeerId> {
        if let Some(&p) = self.by_addr.get(addr) {
            return Some(p);
        }
        let seq = self.cfg.initial_seq;
        if self.remote_peers < self.cfg.max_peers {
            let id = self.peers.len() as PeerId;
            self.peers.push(Peer::new(addr.to_vec(), seq));
            self.by_addr.insert(addr.to_vec(), id);
            self.remote_peers += 1;
            return Some(id);
        }
        // At the bound: the quiet, far-created peer heard from least recently, if it
        // has no connection or has been silent long enough.
        let idle = self.cfg.rto_max.saturating_mul(RECLAIM_IDLE_RTOS);
        let victim = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                !p.pinned
                    && p.quiet()
                    && !matches!(p.state, State::Connecting { .. })
                    && (p.state == State::Idle || now.saturating_sub(p.last_heard) >= idle)
            })
            .min_by_key(|(_, p)| p.last_heard)
            .map(|(i, _)| i as PeerId)?;
        let old = std::mem::replace(
            &mut self.peers[victim as usize],
            Peer::new(addr.to_vec(), seq),
        );
        self.by_addr.remove(&old.addr);
        self.by_addr.insert(addr.to_vec(), victim);
        self.stats.reclaimed += 1;
        self.events.push_back(Event::PeerReclaimed { peer: victim });
        Some(victim)
    }

    pub(super) fn start_connect(&mut self, peer: PeerId, now: u64) {
        let sess = self.new_sess();
        let deadline = now.saturating_add(rto_for(&self.cfg, 1));
        if let Some(p) = self.peers.get_mut(peer as usize) {
            p.local_sess = sess;
            p.remote_sess = 0;
            p.remote_id = 0;
            p.cookie = 0;
            p.state = State::Connecting { tries: 1, deadline };
            p.send_connect = true;
        }
        self.arm(peer, deadline);
        self.mark(peer);
    }

    /// Reset `peer`'s connection state; its messages fail with `why`.
    pub(super) fn fail_peer(&mut self, peer: PeerId, why: Failure) {
        let seq = self.cfg.initial_seq;
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return;
        };
        for (token, _) in p.msgs.drain(..) {
            self.events.push_back(Event::Failed { token, why });
        }
        p.inflight.clear();
        p.inflight_bytes = 0;
        p.resend.clear();
        p.ooo.clear();
        p.reasm = None;
        p.rx_open = None;
        p.state = State::Idle;
        p.local_sess = 0;
        p.remote_sess = 0;
        p.remote_id = 0;
        p.snd_una = seq;
        p.snd_nxt = seq;
        p.sent_upto = seq;
        p.rcv_nxt = seq;
        p.ack_count = 0;
        p.ack_due = None;
        p.ack_now = false;
        p.send_accept = false;
        p.send_connect = false;
        p.cookie = 0;
        p.dup_sacks = 0;
        self.events.push_back(Event::PeerLost { peer, why });
    }

    /// The connected peer a data or ack packet from `src` belongs to.
    pub(super) fn check_conn(&mut self, src: &[u8], h: &Hdr) -> Option<PeerId> {
        let p = self.peers.get(h.dst_id as usize)?;
        let ok = p.state == State::Connected
            && p.local_sess == h.dst_sess
            && p.remote_sess == h.src_sess
            && p.remote_id == h.src_id;
        if ok && p.addr != src {
            self.stats.wrong_source += 1;
            return None;
        }
        ok.then_some(h.dst_id)
    }

    /// Queue a `CHALLENGE` for the `CONNECT` `h` from `src` (no peer state).
    pub(super) fn challenge(&mut self, src: &[u8], h: &Hdr, now: u64) {
        self.stats.challenged += 1;
        if self.replies.len() >= MAX_REPLIES {
            return;
        }
        let mut c = Hdr::new(PktType::Challenge);
        c.dst_id = h.src_id;
        c.dst_sess = h.src_sess;
        let mut pkt = [0u8; HDR_LEN + COOKIE_LEN];
        c.write(&mut pkt);
        let cookie = self.cookie_for(src, h.src_id, h.src_sess, now);
        pkt[HDR_LEN..].copy_from_slice(&cookie.to_le_bytes());
        self.replies.push_back((src.to_vec(), pkt));
    }

    pub(super) fn on_connect(&mut self, src: &[u8], h: &Hdr, body: &[u8], now: u64) {
        let Some(cookie) = cookie_of(body)
            .ok()
            .filter(|_| h.src_sess != 0 && !src.is_empty())
        else {
            self.stats.dropped += 1;
            return;
        };
        if let Some(&pid) = self.by_addr.get(src) {
            let p = &mut self.peers[pid as usize];
            if p.remote_sess == h.src_sess && p.remote_id == h.src_id && p.state == State::Connected
            {
                // A duplicate from the connection's own address (or our ACCEPT was
                // lost): answer again, to that address.
                self.stats.received += 1;
                p.last_heard = now;
                p.send_accept = true;
                self.mark(pid);
                return;
            }
        }
        if !self
            .cookie_key
            .valid(src, h.src_id, h.src_sess, cookie, now)
        {
            self.challenge(src, h, now);
            return;
        }
        // The sender receives at `src`: it may have state now.
        let Some(pid) = self.remote_peer(src, now) else {
            self.stats.dropped += 1;
            return;
        };
        self.stats.received += 1;
        self.peers[pid as usize].last_heard = now;
        let state = self.peers[pid as usize].state;
        let (rs, ri) = {
            let p = &self.peers[pid as usize];
            (p.remote_sess, p.remote_id)
        };
        if rs == h.src_sess && ri == h.src_id && state == State::Connected {
            self.peers[pid as usize].send_accept = true;
            self.mark(pid);
            return;
        }
        match state {
            State::Connecting { .. } if rs == 0 => {}
            State::Idle => {
                let s = self.new_sess();
                self.peers[pid as usize].local_sess = s;
            }
            _ => {
                // A new connection from a peer we had one with: the old one is over.
                self.fail_peer(pid, Failure::Reset);
                let s = self.new_sess();
                self.peers[pid as usize].local_sess = s;
            }
        }
        let p = &mut self.peers[pid as usize];
        p.remote_sess = h.src_sess;
        p.remote_id = h.src_id;
        p.state = State::Connected;
        p.send_accept = true;
        p.send_connect = false;
        self.mark(pid);
    }

    /// The peer a handshake answer (`CHALLENGE`, `ACCEPT`) from `src` is for: one we
    /// are connecting to `src` in the session `h` names, when the answer is `valid` by
    /// its own check. Counted as received; as dropped when there is none.
    fn connecting_peer(&mut self, src: &[u8], h: &Hdr, valid: bool) -> Option<u32> {
        let ok = valid
            && self.peers.get(h.dst_id as usize).is_some_and(|p| {
                p.local_sess == h.dst_sess
                    && matches!(p.state, State::Connecting { .. })
                    && p.addr == src
            });
        if !ok {
            self.stats.dropped += 1;
            return None;
        }
        self.stats.received += 1;
        Some(h.dst_id)
    }

    /// A `CHALLENGE` from `src`: taken only for a connection we are opening to `src`
    /// with the session it names; our next `CONNECT` (at once) echoes the cookie.
    pub(super) fn on_challenge(&mut self, src: &[u8], h: &Hdr, body: &[u8]) {
        let cookie = cookie_of(body).unwrap_or(0);
        let Some(pid) = self.connecting_peer(src, h, cookie != 0) else {
            return;
        };
        let p = &mut self.peers[pid as usize];
        if p.cookie != cookie {
            p.cookie = cookie;
            p.send_connect = true;
            self.mark(pid);
        }
    }

    pub(super) fn on_accept(&mut self, src: &[u8], h: &Hdr, now: u64) {
        // Duplicates of an ACCEPT already taken are dropped, harmlessly.
        let Some(pid) = self.connecting_peer(src, h, h.src_sess != 0) else {
            return;
        };
        let p = &mut self.peers[pid as usize];
        p.last_heard = now;
        p.remote_sess = h.src_sess;
        p.remote_id = h.src_id;
        p.state = State::Connected;
        p.send_connect = false;
        self.mark(pid);
    }
}
