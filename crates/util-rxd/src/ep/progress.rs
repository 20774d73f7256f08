//! Progress: reading the core CQ into the engine, the engine's events and timers, and the
//! watchdog thread that runs a round when the application stopped calling in.
//!
//! # Invariants
//!
//! - A datagram buffer is reposted after its packet was handed to the engine, never
//!   while the engine reads it.
//! - Each engine event is handled once; requests and responses completed by a packet
//!   are carried out after that packet's events (`EpState::deferred`).
//! - The watchdog holds the endpoint weakly and ends once it is closed.
//!
//! Nothing here panics.

use super::*;

/// How often the watchdog looks at an endpoint with timers pending.
pub(super) const WATCHDOG_PERIOD: Duration = Duration::from_millis(1);
/// How often it looks at an endpoint with nothing pending.
pub(super) const WATCHDOG_IDLE: Duration = Duration::from_millis(10);

/// The watchdog: with manual progress an application may stop calling into the provider
/// as soon as it has its completions, while its peer still waits for an acknowledgement
/// (or a retransmission is due). When progress has not run for a watchdog period and a
/// timer of the engine is due, the watchdog runs one round. It sleeps otherwise, and
/// ends when the endpoint is closed.
pub(super) fn spawn_watchdog(w: Weak<Shared>) {
    // The nap stays as it was while progress ran lately (or before `fi_enable`).
    let mut nap = WATCHDOG_PERIOD;
    ofi_kit::watchdog::spawn_watchdog(NAME, "ofi_rxd-watchdog", w, nap, move |sh| {
        let Some(active) = sh.active.get() else {
            return nap;
        };
        let now = sh.now();
        let last = sh.last_progress.load(AtomicOrdering::Relaxed);
        if now.saturating_sub(last) < WATCHDOG_PERIOD.as_nanos() as u64 {
            return nap;
        }
        // Busy (someone is progressing): look again soon.
        let deadline = match sh.state.try_lock() {
            Ok(g) => g.eng.poll_timeout(),
            Err(_) => Some(u64::MAX),
        };
        nap = if deadline.is_none() {
            WATCHDOG_IDLE
        } else {
            WATCHDOG_PERIOD
        };
        if deadline.is_some_and(|d| d <= now) {
            sh.progress_all(active);
        }
        nap
    });
}

impl Shared {
    /// Handle what the engine reported.
    pub(super) fn handle_events(&self, active: &Active, state: &mut EpState) -> usize {
        let mut n = 0;
        while let Some(ev) = state.eng.poll_event() {
            n += 1;
            match ev {
                Event::Message { peer, data } => self.on_message(active, state, peer, data),
                Event::Sent { token } => {
                    // RMA and atomics complete with their response instead.
                    let token = OpToken::from_bits(token);
                    let remote = state.op(token).is_some_and(|o| o.remote.is_some());
                    if !remote {
                        if let Some(op) = Self::take_op(state, token) {
                            active.complete_tx(op.ctx, op.flags, op.want, None);
                        }
                    }
                }
                Event::Failed { token, why } => {
                    if let Some(op) = Self::take_op(state, OpToken::from_bits(token)) {
                        let e = match why {
                            Failure::Lost | Failure::Protocol => Errno::EIO,
                            Failure::Reset => Errno::ECONNRESET,
                        };
                        ofi_core::ofi_info!(NAME, "ep_data", "send failed: {why:?}");
                        active.complete_tx(op.ctx, op.flags, true, Some(e));
                    }
                }
                Event::PeerLost { peer, why } => {
                    // Its operations failed (Failed events before this one); those whose
                    // request it had acknowledged but not answered (RMA, atomics) fail
                    // now; a message being received from it is abandoned; the core
                    // address stays for a later connection.
                    let waiting: Vec<OpToken> = state
                        .ops
                        .iter()
                        .enumerate()
                        .filter_map(|(i, o)| {
                            let o = o.as_ref()?;
                            o.remote.as_ref().filter(|r| r.peer == peer)?;
                            Some(OpToken {
                                slot: i as u32,
                                gen: o.gen,
                            })
                        })
                        .collect();
                    for t in waiting {
                        if let Some(op) = Self::take_op(state, t) {
                            active.complete_tx(op.ctx, op.flags, true, Some(Errno::EIO));
                        }
                    }
                    if let Some(t) = state.rx.get_mut(peer as usize).and_then(Option::take) {
                        self.abort_rx(active, t, Errno::EIO);
                    }
                    ofi_core::ofi_info!(NAME, "ep_ctrl", "peer {peer}: connection ended ({why:?})");
                }
                Event::PeerReclaimed { peer } => {
                    // The slot goes to a new peer: forget the old one's core address.
                    let i = peer as usize;
                    if let Some(f) = state.core_addr.get_mut(i).and_then(Option::take) {
                        let _ = self.core_av.remove(&[f], 0);
                        if let Some(e) = state.src_bytes.get_mut((f & 0xffff_ffff) as usize) {
                            *e = None;
                        }
                    }
                    if let Some(a) = state.peer_addr.get_mut(i) {
                        *a = None;
                    }
                    if let Some(t) = state.rx.get_mut(i).and_then(Option::take) {
                        self.abort_rx(active, t, Errno::EIO);
                    }
                }
            }
        }
        n
    }

    pub(super) fn progress_cq(&self, active: &Active, state: &mut EpState, now: u64) -> usize {
        // The batch arrays live in `EpState`: an empty poll (most polls) initialises nothing
        // (they were on the stack, filled afresh each call: measured with callgrind on
        // `fi_pingpong -p "udp;ofi_rxd"`, about 100 instructions of every poll).
        let mut n = 0;
        for _ in 0..CQ_ROUNDS {
            let EpState {
                cq_batch, cq_from, ..
            } = state;
            match self.core_cq.readfrom(&mut cq_batch.0[..], &mut cq_from[..]) {
                Ok(k) => {
                    for j in 0..k.min(CQ_BATCH) {
                        let (e, f) = (state.cq_batch.0[j], state.cq_from[j]);
                        let i = e.op_context;
                        if e.flags & OpFlags::RECV.bits() == 0 {
                            continue;
                        }
                        if i < state.bufs.len() {
                            // (A buffer kept across packets: no allocation per datagram.)
                            let mut src = std::mem::take(&mut state.src_buf);
                            self.src_of_core(state, f, &mut src);
                            self.take_packet(active, state, i, e.len, &src, now);
                            state.src_buf = src;
                            self.repost(state, i);
                        }
                    }
                    n += k;
                    if k < CQ_BATCH {
                        break;
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    if let Ok(ce) = self.core_cq.readerr_owned(0) {
                        if ce.flags & OpFlags::RECV.bits() != 0 && ce.op_context < state.bufs.len()
                        {
                            if ce.err == Errno::EADDRNOTAVAIL {
                                // A datagram from a source not in the core AV (a first
                                // CONNECT): its source is in the error data.
                                let src = Address::from_bytes(self.fmt, &ce.err_data)
                                    .map(|a| norm_addr(&a).to_bytes())
                                    .unwrap_or_default();
                                self.take_packet(active, state, ce.op_context, ce.len, &src, now);
                            }
                            // (Else a truncated or failed datagram: not one of ours.)
                            self.repost(state, ce.op_context);
                        }
                    }
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    /// Write into `out` the address (engine form) of core AV entry `f` that sent a
    /// datagram (nothing if unknown: the engine then takes nothing from it).
    pub(super) fn src_of_core(&self, state: &mut EpState, f: u64, out: &mut Vec<u8>) {
        out.clear();
        if f == ADDR_NOTAVAIL {
            return;
        }
        let i = (f & 0xffff_ffff) as usize;
        if let Some(Some((g, b))) = state.src_bytes.get(i) {
            if *g == f {
                out.extend_from_slice(b);
                return;
            }
        }
        let Ok(a) = self.core_av.lookup(f) else {
            return;
        };
        let b = norm_addr(&a).to_bytes();
        out.extend_from_slice(&b);
        if i < (1 << 20) {
            if state.src_bytes.len() <= i {
                state.src_bytes.resize(i + 1, None);
            }
            state.src_bytes[i] = Some((f, b));
        }
    }

    /// Feed datagram buffer `i` (`len` bytes) to the engine, placing message pieces as
    /// they come; then handle its events (a lost peer's open message is abandoned before
    /// the next packet) and the requests it completed.
    pub(super) fn take_packet(
        &self,
        active: &Active,
        state: &mut EpState,
        i: usize,
        len: usize,
        src: &[u8],
        now: u64,
    ) {
        {
            let EpState {
                eng,
                bufs,
                m,
                rx,
                peer_addr,
                deferred,
                ..
            } = state;
            let b = &bufs[i];
            let pkt = &b[..len.min(b.len())];
            eng.handle_packet_streaming(src, pkt, now, &mut |seg: Seg<'_>| {
                let parts = RxParts {
                    m: &mut *m,
                    rx: &mut *rx,
                    peer_addr: &mut *peer_addr,
                    deferred: &mut *deferred,
                };
                self.on_seg(active, parts, seg)
            });
        }
        self.handle_events(active, state);
        if !state.deferred.is_empty() {
            for (peer, v) in std::mem::take(&mut state.deferred) {
                self.on_message(active, state, peer, v);
            }
        }
    }

    pub(super) fn progress_all(&self, active: &Active) -> usize {
        let mut g = lock(&self.state);
        let state = &mut *g;
        let now = self.now();
        self.last_progress.store(now, AtomicOrdering::Relaxed);
        let mut n = self.progress_cq(active, state, now);
        state.eng.handle_timeout(now);
        n += self.handle_events(active, state);
        n += self.flush(state, now);
        n
    }
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(active) = self.active.get() else {
            return 0;
        };
        self.progress_all(active)
    }
}
