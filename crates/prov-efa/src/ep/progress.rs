//! Progress: device completions into the engine, the engine's timers, its packets to
//! the device, its events to the application's CQs and counters.
//!
//! # Invariants
//!
//! - A receive slot is posted again only once the engine took its datagram.
//! - Each engine event is handled once; an operation leaves `EpState::tx_ops` / `rx_ops` with
//!   its last completion.
//!
//! Nothing here panics.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ofi_core::ADDR_NOTAVAIL;
use ofi_kit::progress::Progress;
use ofi_kit::tagmatch::{Incoming, Placement};
use ofi_rdma::grh::grh_field;
use ofi_rdma::{SendFlags, SendOp, SendWr, UdDest};

use super::*;
use crate::cq::{send_outcome, SendOutcome};
use crate::proto::{Event, RxDone, NO_SRC};

impl Progress for Shared {
    fn progress(&self) -> usize {
        let Some(active) = self.active.get() else {
            return 0;
        };
        let mut state = lock(&self.state);
        self.round(active, &mut state)
    }
}

/// Most packets posted to the device at once (one batch, `post_send_batch`): two of
/// the software device's bundles of 8 KiB datagrams.
const POST_BATCH: usize = 30;

/// A packet copied into send slot `slot`, for `peer`, `len` bytes.
#[derive(Clone, Copy, Default)]
struct Staged {
    slot: u32,
    peer: PeerAddr,
    len: u32,
}

/// How often the watchdog looks at an endpoint with work under way.
const WATCHDOG_BUSY: Duration = Duration::from_millis(1);
/// How often it looks at an idle endpoint (a peer's first packets may be waiting).
const WATCHDOG_IDLE: Duration = Duration::from_millis(10);

/// The watchdog: with manual progress an application may stop calling in as soon as it
/// has its completions (or, for an inject, at once) while the protocol still has work:
/// a handshake to finish before an injected message leaves, a peer's packets to take,
/// a grant to answer. When no round ran for a watchdog period, it runs one. It holds
/// the endpoint weakly and ends once the endpoint is closed.
pub(super) fn spawn_watchdog(w: std::sync::Weak<Shared>) {
    ofi_kit::watchdog::spawn_watchdog(NAME, "efa-watchdog", w, WATCHDOG_IDLE, |sh| {
        let Some(active) = sh.active.get() else {
            return WATCHDOG_IDLE;
        };
        let since = sh
            .now()
            .saturating_sub(sh.last_round.load(Ordering::Relaxed));
        if since < WATCHDOG_BUSY.as_nanos() as u64 {
            return WATCHDOG_BUSY;
        }
        // Someone else is in a round: look again soon.
        let Ok(mut state) = sh.state.try_lock() else {
            return WATCHDOG_BUSY;
        };
        let did = sh.round(active, &mut state);
        let busy = did > 0
            || state.eng.poll_timeout().is_some()
            || !state.tx_ops.is_empty()
            || state.pending.is_some()
            || !state.held.is_empty();
        if busy {
            WATCHDOG_BUSY
        } else {
            WATCHDOG_IDLE
        }
    });
}

impl Shared {
    /// One round: device completions, timers, packets out, events.
    pub(super) fn round(&self, active: &Bound, state: &mut EpState) -> usize {
        let now = self.now();
        self.last_round.store(now, Ordering::Relaxed);
        self.forget_removed(active, state);
        let mut n = self.poll_recv(active, state, now);
        n += self.retry_held(state, now);
        n += self.poll_send(active, state, now);
        if state.eng.poll_timeout().is_some_and(|t| t <= now) {
            state.eng.handle_timeout(now);
        }
        n += self.flush(state, now);
        n += self.handle_events(active, state);
        n
    }

    /// Receive completions: datagrams to the engine.
    fn poll_recv(&self, active: &Bound, state: &mut EpState, now: u64) -> usize {
        let mut n = 0;
        loop {
            let k = self.rcq.poll(&mut state.wc).unwrap_or(0);
            for j in 0..k {
                let wc = state.wc[j];
                let i = wc.wr_id as u32;
                n += 1;
                if wc.status != WcStatus::Success {
                    if wc.status != WcStatus::WrFlushErr {
                        let _ = self.post_rx(i);
                    }
                    continue;
                }
                let Some(len) = self.rx_len(&wc) else {
                    state.peers.count_dropped();
                    let _ = self.post_rx(i);
                    continue;
                };
                let grh_gid = || self.grh_sgid(i);
                if self.dgram {
                    match state.peers.sender_addr(&wc, grh_gid) {
                        Some(src) => self.dgram_arrived(active, state, i, src, len),
                        None => {
                            state.peers.count_dropped();
                            let _ = self.post_rx(i);
                        }
                    }
                    continue;
                }
                let Some(peer) = state.peers.sender(&wc, grh_gid) else {
                    let _ = self.post_rx(i);
                    continue;
                };
                self.offer(state, now, i, peer, len);
            }
            if k < WC_BATCH {
                return n;
            }
        }
    }

    /// The datagram length of the successful receive `wc`: its bytes less the GRH where
    /// the device wrote one. `None` for a GRH where the slot has no room for one (a
    /// device that writes GRHs on SRD after all): nothing of it can be trusted.
    fn rx_len(&self, wc: &WorkCompletion) -> Option<usize> {
        let grh = if wc.wc_flags.contains(WcFlags::GRH) {
            GRH_LEN
        } else {
            0
        };
        if grh > self.rx_prefix {
            return None;
        }
        Some((wc.byte_len as usize).saturating_sub(grh).min(self.mtu))
    }

    /// The sender's GID in the GRH of receive slot `i` ([`grh_field::SGID`]).
    fn grh_sgid(&self, i: u32) -> Gid {
        let mut gid = [0u8; 16];
        self.bounce
            .read(self.rx_off(i) + grh_field::SGID.start, &mut gid);
        Gid(gid)
    }

    /// Hands the datagram in receive slot `i` to the engine: posted again when taken;
    /// when refused, copied aside (the slot posted again) while fewer than
    /// `copied_max` wait so, else held in its slot. Returns whether it was taken.
    fn offer(&self, state: &mut EpState, now: u64, i: u32, peer: PeerAddr, len: usize) -> bool {
        // SAFETY: slot `i` is not posted (its completion was read, or it is held), and
        // is posted again only below, after the last use of `bytes`.
        let bytes = unsafe { self.bounce.slot_bytes(self.rx_payload(i), len) };
        let taken = state.eng.handle_packet(now, peer, bytes).is_ok();
        if !taken && state.copied >= self.copied_max {
            state.held.push_back(Held::Slot(i, peer, len));
            return false;
        }
        if !taken {
            state.copied += 1;
            state.held.push_back(Held::Copied(peer, bytes.to_vec()));
        }
        if let Err(e) = self.post_rx(i) {
            ofi_core::ofi_warn!(NAME, "ep_data", "posting a receive slot: {e}");
        }
        taken
    }

    /// Offers the refused datagrams again, oldest first (each once per round).
    fn retry_held(&self, state: &mut EpState, now: u64) -> usize {
        let mut n = 0;
        for _ in 0..state.held.len() {
            let Some(h) = state.held.pop_front() else {
                break;
            };
            match h {
                Held::Slot(i, peer, len) => {
                    if self.offer(state, now, i, peer, len) {
                        n += 1;
                    }
                }
                Held::Copied(peer, bytes) => {
                    if state.eng.handle_packet(now, peer, &bytes).is_ok() {
                        state.copied -= 1;
                        n += 1;
                    } else {
                        state.held.push_back(Held::Copied(peer, bytes));
                    }
                }
            }
        }
        n
    }

    /// Send completions: the engine learns what became of each packet.
    pub(super) fn poll_send(&self, active: &Bound, state: &mut EpState, now: u64) -> usize {
        let mut n = 0;
        loop {
            let k = self.scq.poll(&mut state.wc).unwrap_or(0);
            for j in 0..k {
                let wc = state.wc[j];
                let slot = (wc.wr_id & 0xffff_ffff) as u32;
                let Some(&token) = state.tx_token.get(slot as usize) else {
                    continue;
                };
                state.tx_free.push(slot);
                n += 1;
                if self.dgram {
                    self.dgram_sent(active, state, token, wc.status);
                    continue;
                }
                match send_outcome(wc.status) {
                    SendOutcome::Done => state.eng.handle_send_done(now, token),
                    SendOutcome::Rnr => state.eng.handle_rnr(now, token),
                    SendOutcome::Flushed => {}
                    SendOutcome::Failed => {
                        ofi_core::ofi_info!(NAME, "ep_data", "send failed: {:?}", wc.status);
                        state.eng.handle_send_failed(now, token);
                    }
                }
            }
            if k < WC_BATCH {
                return n;
            }
        }
    }

    /// The engine's packets to the device while send slots are free, posted in
    /// batches of up to [`POST_BATCH`] (one doorbell each).
    fn flush(&self, state: &mut EpState, now: u64) -> usize {
        let mut n = 0;
        let mut batch = [Staged::default(); POST_BATCH];
        loop {
            let mut k = 0;
            while k < POST_BATCH && !state.tx_free.is_empty() {
                let t = match state.pending.take() {
                    Some(t) => t,
                    None => match state.eng.poll_transmit(now) {
                        Some(t) => t,
                        None => break,
                    },
                };
                match t {
                    Transmit::Send { peer, token, bytes } => {
                        n += 1;
                        match self.stage_packet(state, peer, token, &bytes) {
                            Ok(s) => {
                                batch[k] = s;
                                k += 1;
                            }
                            Err(e) => {
                                ofi_core::ofi_info!(NAME, "ep_data", "peer {peer}: {e}");
                                state.eng.handle_send_failed(now, token);
                            }
                        }
                    }
                    Transmit::Read { token, .. } => {
                        // Never asked for: the engine is configured without reads.
                        state
                            .eng
                            .handle_read_done(now, token, Err(Errno::EOPNOTSUPP));
                    }
                }
            }
            if let Err((i, e)) = self.post_staged(state, &batch[..k]) {
                ofi_core::ofi_info!(NAME, "ep_data", "posting a send: {e}");
                for s in &batch[i..k] {
                    state.tx_free.push(s.slot);
                    state
                        .eng
                        .handle_send_failed(now, state.tx_token[s.slot as usize]);
                }
            }
            if k < POST_BATCH {
                return n;
            }
        }
    }

    /// Copies `bytes` into a free send slot and posts it to `peer`.
    pub(super) fn post_packet(
        &self,
        state: &mut EpState,
        peer: PeerAddr,
        token: u64,
        bytes: &[u8],
    ) -> Result<()> {
        let staged = self.stage_packet(state, peer, token, bytes)?;
        self.post_staged(state, &[staged]).map_err(|(_, e)| {
            state.tx_free.push(staged.slot);
            e
        })
    }

    /// Copies `bytes` into a free send slot for `peer` (whose address handle is made on
    /// first use), which carries `token` from here.
    fn stage_packet(
        &self,
        state: &mut EpState,
        peer: PeerAddr,
        token: u64,
        bytes: &[u8],
    ) -> Result<Staged> {
        if bytes.len() > self.mtu {
            return Err(crate::einval("packet over the MTU"));
        }
        let Some(p) = state.peers.get_mut(peer as usize) else {
            return Err(crate::einval("unknown peer"));
        };
        if p.ah.is_none() {
            let ah = self.dom.pd.create_ah(&ofi_rdma::AhAttr {
                dgid: p.addr.gid,
                port_num: 1,
                ..ofi_rdma::AhAttr::default()
            })?;
            // On EFA hardware a receive from this GID now names its sender by this
            // handle's number (the software device's have none: their GRH names it).
            if let Ok(ahn) = ah.efa_ahn() {
                self.dom.ah_numbers.note(ahn, p.addr.gid);
            }
            p.ah = Some(ah);
        }
        let Some(slot) = state.tx_free.pop() else {
            return Err(Error::code_only(Errno::EAGAIN));
        };
        self.bounce.write(self.tx_off(slot), bytes);
        state.tx_token[slot as usize] = token;
        Ok(Staged {
            slot,
            peer,
            len: bytes.len() as u32,
        })
    }

    /// Posts the staged send slots (at most [`POST_BATCH`]) as one batch, without
    /// allocating; on a refusal, the index of the first not posted and why (its slot
    /// and the later ones' are still taken).
    fn post_staged(
        &self,
        state: &EpState,
        staged: &[Staged],
    ) -> std::result::Result<(), (usize, Error)> {
        if staged.len() > POST_BATCH {
            return Err((0, crate::einval("more packets than one batch")));
        }
        let mut sges = [Sge::default(); POST_BATCH];
        let unused = SendWr {
            wr_id: 0,
            sg_list: &[],
            op: SendOp::Send,
            send_flags: SendFlags::empty(),
            ud: None,
        };
        let mut wrs = [unused; POST_BATCH];
        let slots = staged.iter().zip(&mut sges).zip(&mut wrs);
        for (i, ((s, sge), wr)) in slots.enumerate() {
            let Some((p, ah)) = state
                .peers
                .get(s.peer as usize)
                .and_then(|p| Some((p, p.ah.as_ref()?)))
            else {
                // Staged only with its handle made: cannot happen.
                return Err((i, crate::einval("no address handle")));
            };
            *sge = Sge {
                addr: self.bounce.ptr as u64 + self.tx_off(s.slot) as u64,
                length: s.len,
                lkey: self.mr.lkey(),
            };
            *wr = SendWr {
                wr_id: TX_BIT | u64::from(s.slot),
                sg_list: std::slice::from_ref(sge),
                op: SendOp::Send,
                send_flags: SendFlags::SIGNALED,
                ud: Some(UdDest {
                    ah,
                    remote_qpn: p.addr.qpn,
                    remote_qkey: p.addr.qkey,
                }),
            };
        }
        // SAFETY: the slots lie in the registered bounce region, which outlives the
        // queue pair; they are not written again until their completions free them.
        unsafe { self.qp.post_send_batch(&wrs[..staged.len()]) }
    }

    /// The engine's events to the application.
    fn handle_events(&self, active: &Bound, state: &mut EpState) -> usize {
        let mut n = 0;
        while let Some(ev) = state.eng.poll_event() {
            n += 1;
            match ev {
                Event::Tx {
                    ctx, result, data, ..
                } => {
                    if let Some(op) = state.tx_ops.remove(&ctx) {
                        if let (Some(l), Ok(())) = (&op.read_into, result) {
                            let n = data.len().min(l.total());
                            // SAFETY: a read's local buffers are the application's,
                            // writable until this completion (the C contract).
                            unsafe { l.scatter(0, data.as_ptr(), n) };
                        }
                        let want = op.want || result.is_err();
                        active.complete_tx(op.ctx, op.flags, want, result.err());
                    }
                }
                Event::Rx(done) => self.on_rx(active, state, done),
                Event::RemoteWrite { src, len, cq_data } => {
                    self.on_remote_write(active, state, src, len, cq_data)
                }
                Event::RemoteAccess { read, .. } => state.remote_cntrs.count(read),
            }
        }
        n
    }

    /// A receive completion of the engine.
    fn on_rx(&self, active: &Bound, state: &mut EpState, done: RxDone) {
        let Some(op) = state.rx_ops.get(&done.ctx) else {
            return;
        };
        let recv = op.posted();
        let multi = op.flags.contains(OpFlags::MULTI_RECV);
        let src = match state.peers.get(done.src as usize) {
            Some(p) if done.src != NO_SRC => active
                .av
                .reverse_lookup(&p.addr.to_address())
                .unwrap_or(ADDR_NOTAVAIL),
            _ => ADDR_NOTAVAIL,
        };
        let inc = Incoming {
            src,
            tag: done.tag,
            len: done.msg_len,
            data: done.cq_data,
            tagged: done.tagged,
        };
        if recv.flags.intersects(OpFlags::PEEK | OpFlags::DISCARD) {
            state.rx_ops.remove(&done.ctx);
            match done.result {
                Err(Errno::ENOMSG) => active.no_message(&recv),
                _ => {
                    let discarded = recv.flags.contains(OpFlags::DISCARD);
                    active.peeked(recv, &inc, discarded)
                }
            }
            return;
        }
        let n = done
            .data
            .len()
            .min(recv.buf.total().saturating_sub(done.offset));
        // SAFETY: the receive's buffers are the application's, writable until the
        // receive completes (the C contract the posted receive carries); `offset + n`
        // lies within them.
        unsafe { recv.buf.scatter(done.offset, done.data.as_ptr(), n) };
        let place = Placement {
            offset: done.offset,
            len: n,
            truncated: done.result == Err(Errno::ETRUNC),
        };
        let err = match done.result {
            Ok(()) | Err(Errno::ETRUNC) => None,
            Err(e) => Some(e),
        };
        if !multi || done.multi_recv_released {
            state.rx_ops.remove(&done.ctx);
        }
        active.complete_rx(&recv, place, &inc, done.multi_recv_released, err);
    }
}
