//! Connections: MSG endpoints and their bounce buffers, the connection manager's
//! actions, and the core EQ's events (requests, accepts, rejects, shutdowns).
//!
//! # Invariants
//!
//! - A connection's operations are failed (queued and in flight) exactly once when it
//!   breaks; the engine then starts a new epoch for the peer, and credits or receives
//!   of an older epoch are never counted against the next connection.
//! - A handshake from the peer is parsed with [`crate::proto::Hello::parse`]; a
//!   malformed one is rejected (never a panic).

use super::*;

impl Shared {
    /// Open a MSG endpoint for `conn` from `info` (a connection request's, or the core
    /// info for an outgoing one), bound to the core EQ and CQ.
    pub(super) fn open_msg(&self, state: &mut EpState, info: &Info, conn: ConnId) -> Result<usize> {
        state.msg_gen = state.msg_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = state.msg_gen;
        let slot = state
            .msgs
            .iter()
            .position(Option::is_none)
            .unwrap_or(state.msgs.len());
        let ep = self.dom.core.endpoint_with(info, ep_ctx(slot, gen), 0)?;
        ep.bind_eq(&self.core_eq)?;
        ep.bind(&self.core_cq, OpFlags::TRANSMIT | OpFlags::RECV)?;
        let s = state.new_msg(ep, conn, gen);
        debug_assert_eq!(s, slot);
        Ok(s)
    }

    pub(super) fn drop_msg(&self, state: &mut EpState, slot: Option<usize>) {
        if let Some(s) = slot {
            if let Some(m) = state.msgs.get_mut(s).and_then(Option::take) {
                let _ = m.ep.shutdown(0);
                drop(m);
            }
        }
    }

    /// Carry out the connection manager's actions.
    pub(super) fn run_actions(&self, active: &Active, state: &mut EpState) {
        let now = state.now();
        while let Some(a) = state.conn_mgr.poll_action() {
            match a {
                Action::Connect(p) => {
                    let conn_id = p;
                    let Some((addr, rx_index)) =
                        state.conn(conn_id).map(|x| (x.key.clone(), x.rx_index))
                    else {
                        state.conn_mgr.remove(p, now);
                        continue;
                    };
                    let hello = self.hello_with(
                        Kind::Connect,
                        Reason::None,
                        &self.request_extensions(rx_index),
                    );
                    let mut ci = self.dom.core_info.clone();
                    ci.dest_addr = None;
                    ci.src_addr = None;
                    let r = self.open_msg(state, &ci, conn_id).and_then(|slot| {
                        let res = state.msgs[slot]
                            .as_ref()
                            .map(|m| m.ep.enable().and_then(|_| m.ep.connect(&addr, &hello)))
                            .unwrap_or(Ok(()));
                        match res {
                            Ok(()) => Ok(slot),
                            Err(e) => {
                                self.drop_msg(state, Some(slot));
                                Err(e)
                            }
                        }
                    });
                    match r {
                        Ok(slot) => {
                            if let Some(conn) = state.conn_mut(conn_id) {
                                conn.attempt = Some(slot);
                            }
                        }
                        Err(e) => {
                            ofi_core::ofi_info!(NAME, "ep_ctrl", "connect: {e}");
                            state.conn_mgr.on_refused(p, e.code(), Reason::None, now);
                        }
                    }
                }
                Action::Abort(p) | Action::AbortAccept(p) => {
                    let outgoing = matches!(a, Action::Abort(_));
                    let slot = state.conn_mut(p).and_then(|conn| {
                        if outgoing {
                            conn.attempt.take()
                        } else {
                            conn.accepting.take()
                        }
                    });
                    self.drop_msg(state, slot);
                }
                Action::Fail(p, e) => {
                    ofi_core::ofi_info!(NAME, "ep_ctrl", "peer {}: giving up: {e}", p.0);
                    self.fail_queued(active, state, p, e);
                }
            }
        }
        state.next_timer = state.conn_mgr.poll_timeout();
    }

    /// Fail every operation waiting for a connection `conn_id` (the connection manager
    /// gave up on the peer).
    pub(super) fn fail_queued(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        e: Errno,
    ) {
        state.protocol.fail_waiting(conn_id, e);
        self.drain_events(active, state);
    }

    /// The connection `conn_id` is gone: fail what was queued or in flight on it.
    pub(super) fn fail_conn(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        e: Errno,
    ) {
        let now = state.now();
        let Some(conn) = state.conn_mut(conn_id) else {
            return;
        };
        let slots: Vec<usize> = conn
            .tx
            .take()
            .into_iter()
            .chain(conn.attempt.take())
            .chain(conn.accepting.take())
            .chain(conn.extra.drain(..))
            .collect();
        conn.stalled.clear();
        conn.instance = None;
        for s in slots {
            self.drop_msg(state, Some(s));
        }
        // Operations in flight or queued on this connection: the engine's (queued,
        // awaiting the peer) and those it is done with but the core is not.
        self.fail_ops_of(active, state, conn_id, e, false);
        self.fail_receives_of(active, state, conn_id, e);
        state.conn_mgr.on_lost(conn_id, now);
        self.run_actions(active, state);
    }

    /// Fail with `e` the receives being filled from connection `conn_id`: a segmented
    /// message placed into a receive, rendezvous reads.
    fn fail_receives_of(&self, active: &Active, state: &mut EpState, conn_id: ConnId, e: Errno) {
        let sar = state.conn_mut(conn_id).and_then(|x| x.sar.take());
        if let Some(s) = sar {
            if let SarTarget::Recv {
                recv,
                place,
                released,
            } = s.target
            {
                active.complete_rx(&recv, place, &s.inc, released, Some(e));
            }
        }
        let rds: Vec<u32> = state
            .rds
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().filter(|r| r.conn == conn_id).map(|_| i as u32))
            .collect();
        for i in rds {
            if let Some(r) = state.rds.get_mut(i as usize).and_then(Option::take) {
                state.rd_free.push(i);
                active.complete_rx(&r.recv, r.place, &r.inc, r.released, Some(e));
            }
        }
        state
            .rd_waiting
            .retain(|i| state.rds.get(*i as usize).is_some_and(Option::is_some));
    }

    /// Fail the operations on connection `conn_id` with `e`: every one, or with
    /// `keep_queued` those the engine has not started (they go on the next
    /// connection). The engine starts a new epoch for the peer.
    fn fail_ops_of(
        &self,
        active: &Active,
        state: &mut EpState,
        conn_id: ConnId,
        e: Errno,
        keep_queued: bool,
    ) {
        state.protocol.reset(conn_id, e, keep_queued);
        let ids: Vec<u32> = state
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| {
                o.as_ref()
                    .filter(|o| o.conn == conn_id && (o.started || !keep_queued))
                    .map(|_| i as u32)
            })
            .collect();
        for i in ids {
            if let Some(op) = state.free_op(i) {
                active.complete_tx(op.ctx, op.flags, op.want, Some(e));
            }
        }
        // The engine's failures of the same operations find them gone.
        self.drain_events(active, state);
    }

    pub(super) fn handle_connreq(
        &self,
        active: &Active,
        state: &mut EpState,
        info: Option<Box<Info>>,
        data: &[u8],
    ) {
        let Some(info) = info else {
            return;
        };
        let handle = info.handle;
        let from = info
            .dest_addr
            .as_ref()
            .map(|a| a.to_bytes())
            .unwrap_or_default();
        let reject = |reason: Reason, why: &str| self.refuse(handle, &from, reason, why);
        let h = match Hello::parse(data) {
            Ok(h) => h,
            Err(e) => return reject(Reason::Malformed, &format!("malformed handshake: {e}")),
        };
        if h.kind != Kind::Connect {
            return reject(Reason::Malformed, "handshake is not a connection request");
        }
        if h.version != proto::VERSION {
            return reject(
                Reason::Version,
                &format!(
                    "peer speaks {NAME} protocol version {}, this endpoint {}",
                    h.version,
                    proto::VERSION
                ),
            );
        }
        if h.buffer_size as usize != self.settings.buffer_size {
            return reject(
                Reason::Params,
                &format!(
                    "peer's FI_OFI_RXM_BUFFER_SIZE is {}, ours {}",
                    h.buffer_size, self.settings.buffer_size
                ),
            );
        }
        if h.credits == 0 {
            return reject(Reason::Params, "peer grants no credits");
        }
        if !crate::auth::carries(data, h.addr.len(), self.auth) {
            return reject(Reason::Params, "peer's authorization key differs");
        }
        let ext = match crate::hello_ext::Extensions::parse(data, h.addr.len()) {
            Ok(ext) => ext,
            Err(e) => return reject(Reason::Malformed, &format!("malformed handshake: {e}")),
        };
        // A peer's index is checked before anything else uses it (a scalable
        // endpoint's receive context gets only its own, routed; an ordinary endpoint is
        // receive context 0).
        if !self.answers_index(ext.index()) {
            return reject(
                Reason::Params,
                &format!(
                    "peer addresses receive context {}, which is not here",
                    ext.index()
                ),
            );
        }
        let addr = match Address::from_bytes(self.dom.core_info.addr_format, &h.addr) {
            Ok(a) => a,
            Err(e) => return reject(Reason::Malformed, &format!("bad peer address: {e}")),
        };
        let now = state.now();
        // An unspecified IP in the peer's name (it listens on every interface) is the
        // IP its connection comes from.
        let src_ip = info
            .dest_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .map(|a| a.ip());
        let actual = norm_addr(&addr, src_ip);
        let conn_id = state.conn_for_addr(&actual);
        // A transmit context of a scalable endpoint is known in the AVs by its
        // scalable endpoint's name (`FI_SOURCE`).
        let alias = ext
            .alias
            .as_deref()
            .and_then(|a| Address::from_bytes(self.dom.core_info.addr_format, a).ok());
        if let Some(conn) = state.conn_mut(conn_id) {
            let forms = [
                Some(addr.clone()),
                alias.as_ref().map(|a| norm_addr(a, src_ip)),
                alias,
            ];
            for a in forms.into_iter().flatten() {
                if !conn.aliases.contains(&a) {
                    conn.aliases.push(a);
                }
            }
        }
        let me = self.me_bytes.to_vec();
        let loopback = h.addr == me;
        let decision = if loopback {
            ConnDecision::Accept
        } else {
            state
                .conn_mgr
                .on_incoming(conn_id, h.instance, conn::self_wins(&me, &h.addr), now)
        };
        match decision {
            ConnDecision::RejectAlready => {
                self.reject(handle, Reason::Already);
            }
            ConnDecision::Accept | ConnDecision::Replace => {
                if decision == ConnDecision::Replace {
                    // The peer restarted: what was in flight on the old connection is
                    // lost; what was queued goes on the new one.
                    let old = state.conn_mut(conn_id).and_then(|x| {
                        x.stalled.clear();
                        x.tx.take()
                    });
                    self.drop_msg(state, old);
                    self.fail_ops_of(active, state, conn_id, Errno::ECONNRESET, true);
                    self.fail_receives_of(active, state, conn_id, Errno::ECONNRESET);
                }
                self.run_actions(active, state);
                match self.open_msg(state, &info, conn_id) {
                    Ok(slot) => {
                        let ok = state.msgs[slot]
                            .as_ref()
                            .map(|m| m.ep.accept(&self.hello(Kind::Accept, Reason::None)))
                            .unwrap_or(Ok(()));
                        if let Err(e) = ok {
                            ofi_core::ofi_warn!(NAME, "ep_ctrl", "accept: {e}");
                            self.drop_msg(state, Some(slot));
                            return;
                        }
                        if let Some(conn) = state.conn_mut(conn_id) {
                            if loopback {
                                conn.loopback = true;
                                conn.extra.push(slot);
                            } else {
                                let prev = conn.accepting.replace(slot);
                                conn.accept_credits = h.credits as usize;
                                conn.peer_sar =
                                    h.sar_limit.min(crate::MAX_MSG_SIZE as u64) as usize;
                                conn.instance = Some(h.instance);
                                conn.peer_rma_event = h.rma_event;
                                self.drop_msg(state, prev);
                            }
                        }
                    }
                    Err(e) => {
                        ofi_core::ofi_warn!(NAME, "ep_ctrl", "opening an accepting endpoint: {e}");
                        self.reject(handle, Reason::Refused);
                    }
                }
            }
        }
    }

    pub(super) fn handle_connected(
        &self,
        active: &Active,
        state: &mut EpState,
        slot: usize,
        data: &[u8],
    ) {
        let now = state.now();
        let Some(conn_id) = state.conn_of_slot(slot) else {
            return;
        };
        let Some(conn) = state.conn_mut(conn_id) else {
            return;
        };
        if conn.extra.contains(&slot) {
            self.post_bufs(state, slot);
            return;
        }
        let (credits, instance) = if conn.attempt == Some(slot) {
            conn.attempt = None;
            // The peer's accept: its credits and instance, or why it is refused.
            let accepted = match Hello::parse(data) {
                Ok(h)
                    if h.kind == Kind::Accept
                        && h.version == proto::VERSION
                        && h.buffer_size as usize == self.settings.buffer_size
                        && h.credits > 0 =>
                {
                    conn.peer_sar = h.sar_limit.min(crate::MAX_MSG_SIZE as u64) as usize;
                    conn.peer_rma_event = h.rma_event;
                    Ok((h.credits as usize, Some(h.instance)))
                }
                Ok(h) => {
                    ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer accepted with an incompatible handshake (kind {:?}, version {}, buffer size {})", h.kind, h.version, h.buffer_size);
                    Err(Reason::Version)
                }
                Err(e) => {
                    ofi_core::ofi_warn!(
                        NAME,
                        "ep_ctrl",
                        "peer accepted with a malformed handshake: {e}"
                    );
                    Err(Reason::Malformed)
                }
            };
            match accepted {
                Ok(accepted) => accepted,
                Err(reason) => {
                    self.drop_msg(state, Some(slot));
                    state
                        .conn_mgr
                        .on_refused(conn_id, Errno::ECONNREFUSED, reason, now);
                    self.run_actions(active, state);
                    return;
                }
            }
        } else if conn.accepting == Some(slot) {
            conn.accepting = None;
            (conn.accept_credits, conn.instance)
        } else {
            // Abandoned attempt that completed anyway.
            self.drop_msg(state, Some(slot));
            return;
        };
        let old = conn.tx.replace(slot);
        let peer_sar = conn.peer_sar;
        conn.instance = instance;
        // Credits are counted per peer on both sides (the receiver's `held`), not per
        // MSG connection: when a second connection of the same epoch takes over (both
        // sides connected at once), the messages sent on the first one still hold
        // credits at the peer, so the grant of the new handshake must not refill them
        // (the engine ignores a second "up").
        if old.is_none() {
            state.protocol.handle_conn_up(conn_id, credits as u32);
        }
        if peer_sar > 0 {
            state.protocol.set_peer_sar_limit(conn_id, peer_sar);
        }
        self.drop_msg(state, old);
        self.post_bufs(state, slot);
        state.conn_mgr.on_connected(conn_id, instance, now);
        self.run_actions(active, state);
        self.pump_conn(active, state, conn_id);
    }

    pub(super) fn handle_cm_error(
        &self,
        active: &Active,
        state: &mut EpState,
        slot: usize,
        err: Errno,
        data: &[u8],
    ) {
        // As for FI_SHUTDOWN: what arrived before the error is completed first.
        self.progress_cq(active, state);
        let now = state.now();
        let Some(conn_id) = state.conn_of_slot(slot) else {
            return;
        };
        let Some(conn) = state.conn_mut(conn_id) else {
            return;
        };
        if conn.attempt == Some(slot) {
            conn.attempt = None;
            self.drop_msg(state, Some(slot));
            let reason = match Hello::parse(data) {
                Ok(h) if h.kind == Kind::Reject => h.reason,
                _ => Reason::None,
            };
            if matches!(reason, Reason::Version | Reason::Params | Reason::Malformed) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer refused our handshake ({reason:?})");
            }
            state.conn_mgr.on_refused(conn_id, err, reason, now);
            self.run_actions(active, state);
        } else if conn.tx == Some(slot) {
            self.fail_conn(active, state, conn_id, Errno::ECONNRESET);
        } else {
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            conn.extra.retain(|s| *s != slot);
            self.drop_msg(state, Some(slot));
        }
    }

    pub(super) fn handle_shutdown(&self, active: &Active, state: &mut EpState, slot: usize) {
        // The core reports the close after the completions of what arrived before it;
        // take those first, or a peer's last message (sent just before it exited) would
        // be dropped with the connection's slot (the same for an error event).
        self.progress_cq(active, state);
        let Some(conn_id) = state.conn_of_slot(slot) else {
            return;
        };
        let Some(conn) = state.conn_mut(conn_id) else {
            return;
        };
        if conn.tx == Some(slot) {
            self.fail_conn(active, state, conn_id, Errno::ECONNRESET);
        } else {
            conn.extra.retain(|s| *s != slot);
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            self.drop_msg(state, Some(slot));
        }
    }

    pub(super) fn progress_eq(&self, active: &Active, state: &mut EpState) -> usize {
        // A scalable endpoint's receive context: the requests routed to it.
        let mut n = self.take_routed_requests(active, state);
        for _ in 0..EQ_BUDGET {
            match self.core_eq.read() {
                Ok(ev) => {
                    n += 1;
                    match ev.event {
                        EqEvent::ConnReq if ev.fid == CTX_PEP => {
                            self.handle_connreq(active, state, ev.info, &ev.cm_data)
                        }
                        EqEvent::Connected => {
                            if let Some(slot) = live_slot(state, ev.fid) {
                                self.handle_connected(active, state, slot, &ev.cm_data);
                            }
                        }
                        EqEvent::Shutdown => {
                            if let Some(slot) = live_slot(state, ev.fid) {
                                self.handle_shutdown(active, state, slot);
                            }
                        }
                        _ => {}
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    n += 1;
                    match self.core_eq.readerr() {
                        Ok(ee) => {
                            if let Some(slot) = live_slot(state, ee.fid) {
                                self.handle_cm_error(active, state, slot, ee.err, &ee.err_data);
                            }
                        }
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        n
    }
}

/// The MSG slot an EQ event's context names, if that slot still holds the endpoint of
/// that generation (an event of a closed endpoint is ignored).
fn live_slot(state: &EpState, fid: usize) -> Option<usize> {
    let (slot, gen) = split_ep_ctx(fid)?;
    state
        .msgs
        .get(slot)
        .and_then(Option::as_ref)
        .is_some_and(|m| m.gen == gen)
        .then_some(slot)
}
