//! Timers: connection retries, retransmissions with back-off, delayed acknowledgements
//! and lost peers, driven by the timer heap.
//!
//! # Invariants
//!
//! - Only peers whose heap deadline passed are visited; a heap entry whose time differs
//!   from its peer's `timer_at` is stale and skipped.
//! - A peer with any deadline has `timer_at` at or before it after its visit.
//!
//! Nothing here panics.

use super::*;

impl Engine {
    /// Run the timers due at `now`: connection retries, retransmissions, delayed
    /// acknowledgements, lost peers.
    ///
    /// Only the peers whose timer is due are visited (the timer heap).
    pub fn handle_timeout(&mut self, now: u64) {
        while let Some(&Reverse((t, pid))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(p) = self.peers.get_mut(pid as usize) else {
                continue;
            };
            if p.timer_at != t {
                // Stale: the peer was re-armed (or reclaimed) since.
                continue;
            }
            p.timer_at = u64::MAX;
            self.stats.timer_visits += 1;
            let next = self.peer_timers(pid, now);
            if next != u64::MAX {
                self.arm(pid, next);
            }
        }
    }

    /// Run `pid`'s timers due at `now`; its next deadline.
    pub(super) fn peer_timers(&mut self, pid: PeerId, now: u64) -> u64 {
        let mut next = u64::MAX;
        let limit = self.cfg.retry_limit;
        {
            let mut lost = false;
            let mut mark = false;
            {
                let cfg = self.cfg;
                let p = &mut self.peers[pid as usize];
                if let Some(t) = p.ack_due {
                    if t <= now {
                        p.ack_due = None;
                        p.ack_now = true;
                        mark = true;
                    } else {
                        next = next.min(t);
                    }
                }
                match p.state {
                    State::Connecting { tries, deadline } => {
                        if deadline <= now {
                            if tries >= limit {
                                lost = true;
                            } else {
                                let d = now.saturating_add(rto_for(&cfg, tries + 1));
                                p.state = State::Connecting {
                                    tries: tries + 1,
                                    deadline: d,
                                };
                                p.send_connect = true;
                                self.stats.retransmits += 1;
                                mark = true;
                                next = next.min(d);
                            }
                        } else {
                            next = next.min(deadline);
                        }
                    }
                    State::Connected => {
                        let sent = p.sent_upto.wrapping_sub(p.snd_una) as usize;
                        // While the peer refuses the first packet (not ready), only that
                        // one is offered again: the others wait behind it, uncounted.
                        let held = p.inflight.front().is_some_and(|t| t.rnr);
                        for (idx, t) in p.inflight.iter_mut().take(sent).enumerate() {
                            if t.sacked {
                                continue;
                            }
                            if held && idx > 0 {
                                if t.deadline <= now {
                                    t.deadline =
                                        now.saturating_add(rto_for(&cfg, rnr_tries(&cfg) + 1));
                                }
                                next = next.min(t.deadline);
                                continue;
                            }
                            if t.deadline <= now {
                                if t.tries >= limit {
                                    lost = true;
                                    break;
                                }
                                let s = p.snd_una.wrapping_add(idx as u32);
                                if !p.resend.contains(&s) {
                                    p.resend.push_back(s);
                                }
                                // Back off now so the scan does not fire again before
                                // the resend goes.
                                t.deadline = now.saturating_add(rto_for(&cfg, t.tries + 1));
                                mark = true;
                            }
                            next = next.min(t.deadline);
                        }
                    }
                    State::Idle => {}
                }
            }
            if lost {
                self.fail_peer(pid, Failure::Lost);
                return u64::MAX;
            } else if mark {
                self.mark(pid);
            }
        }
        next
    }
}
