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
    pub(super) fn open_msg(&self, st: &mut St, info: &Info, conn: usize) -> Result<usize> {
        st.msg_gen = st.msg_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = st.msg_gen;
        let slot = st
            .msgs
            .iter()
            .position(Option::is_none)
            .unwrap_or(st.msgs.len());
        let ep = self.dom.core.endpoint_with(info, ep_ctx(slot, gen), 0)?;
        ep.bind_eq(&self.core_eq)?;
        ep.bind(&self.core_cq, OpFlags::TRANSMIT | OpFlags::RECV)?;
        let s = st.new_msg(ep, conn, gen);
        debug_assert_eq!(s, slot);
        Ok(s)
    }

    pub(super) fn drop_msg(&self, st: &mut St, slot: Option<usize>) {
        if let Some(s) = slot {
            if let Some(m) = st.msgs.get_mut(s).and_then(Option::take) {
                let _ = m.ep.shutdown(0);
                drop(m);
            }
        }
    }

    /// Carry out the connection manager's actions.
    pub(super) fn run_actions(&self, act: &Active, st: &mut St) {
        let now = st.now();
        while let Some(a) = st.mgr.poll_action() {
            match a {
                Action::Connect(p) => {
                    let c = p as usize;
                    let Some((addr, rx_index)) = st.conn(c).map(|x| (x.key.clone(), x.rx_index))
                    else {
                        st.mgr.remove(p, now);
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
                    let r = self.open_msg(st, &ci, c).and_then(|slot| {
                        let res = st.msgs[slot]
                            .as_ref()
                            .map(|m| m.ep.enable().and_then(|_| m.ep.connect(&addr, &hello)))
                            .unwrap_or(Ok(()));
                        match res {
                            Ok(()) => Ok(slot),
                            Err(e) => {
                                self.drop_msg(st, Some(slot));
                                Err(e)
                            }
                        }
                    });
                    match r {
                        Ok(slot) => {
                            if let Some(conn) = st.conns[c].as_mut() {
                                conn.attempt = Some(slot);
                            }
                        }
                        Err(e) => {
                            ofi_core::ofi_info!(NAME, "ep_ctrl", "connect: {e}");
                            st.mgr.on_refused(p, e.code(), Reason::None, now);
                        }
                    }
                }
                Action::Abort(p) | Action::AbortAccept(p) => {
                    let outgoing = matches!(a, Action::Abort(_));
                    let slot = st.conn_mut(p as usize).and_then(|c| {
                        if outgoing {
                            c.attempt.take()
                        } else {
                            c.accepting.take()
                        }
                    });
                    self.drop_msg(st, slot);
                }
                Action::Fail(p, e) => {
                    ofi_core::ofi_info!(NAME, "ep_ctrl", "peer {p}: giving up: {e}");
                    self.fail_queued(act, st, p as usize, e);
                }
            }
        }
        st.next_timer = st.mgr.poll_timeout();
    }

    /// Fail every operation waiting for a connection to `c` (the connection manager
    /// gave up on the peer).
    pub(super) fn fail_queued(&self, act: &Active, st: &mut St, c: usize, e: Errno) {
        st.eng.fail_waiting(peer_of(c), e);
        self.drain_events(act, st);
    }

    /// The connection to `c` is gone: fail what was queued or in flight on it.
    pub(super) fn fail_conn(&self, act: &Active, st: &mut St, c: usize, e: Errno) {
        let now = st.now();
        let Some(conn) = st.conn_mut(c) else {
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
            self.drop_msg(st, Some(s));
        }
        // Operations in flight or queued on this connection: the engine's (queued,
        // awaiting the peer) and those it is done with but the core is not.
        self.fail_ops_of(act, st, c, e, false);
        self.fail_receives_of(act, st, c, e);
        st.mgr.on_lost(c as PeerId, now);
        self.run_actions(act, st);
    }

    /// Fail with `e` the receives being filled from connection `c`: a segmented
    /// message placed into a receive, rendezvous reads.
    fn fail_receives_of(&self, act: &Active, st: &mut St, c: usize, e: Errno) {
        let sar = st.conn_mut(c).and_then(|x| x.sar.take());
        if let Some(s) = sar {
            if let SarTarget::Recv {
                recv,
                place,
                released,
            } = s.target
            {
                act.complete_rx(&recv, place, &s.inc, released, Some(e));
            }
        }
        let rds: Vec<u32> = st
            .rds
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().filter(|r| r.conn == c).map(|_| i as u32))
            .collect();
        for i in rds {
            if let Some(r) = st.rds.get_mut(i as usize).and_then(Option::take) {
                st.rd_free.push(i);
                act.complete_rx(&r.recv, r.place, &r.inc, r.released, Some(e));
            }
        }
        st.rd_waiting
            .retain(|i| st.rds.get(*i as usize).is_some_and(Option::is_some));
    }

    /// Fail the operations on connection `c` with `e`: every one, or with
    /// `keep_queued` those the engine has not started (they go on the next
    /// connection). The engine starts a new epoch for the peer.
    fn fail_ops_of(&self, act: &Active, st: &mut St, c: usize, e: Errno, keep_queued: bool) {
        st.eng.reset(peer_of(c), e, keep_queued);
        let ids: Vec<u32> = st
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| {
                o.as_ref()
                    .filter(|o| o.conn == c && (o.started || !keep_queued))
                    .map(|_| i as u32)
            })
            .collect();
        for i in ids {
            if let Some(op) = st.free_op(i) {
                act.complete_tx(op.ctx, op.flags, op.want, Some(e));
            }
        }
        // The engine's failures of the same operations find them gone.
        self.drain_events(act, st);
    }

    pub(super) fn handle_connreq(
        &self,
        act: &Active,
        st: &mut St,
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
        let now = st.now();
        // An unspecified IP in the peer's name (it listens on every interface) is the
        // IP its connection comes from.
        let src_ip = info
            .dest_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .map(|a| a.ip());
        let actual = norm_addr(&addr, src_ip);
        let c = st.conn_for_addr(&actual);
        // A transmit context of a scalable endpoint is known in the AVs by its
        // scalable endpoint's name (`FI_SOURCE`).
        let alias = ext
            .alias
            .as_deref()
            .and_then(|a| Address::from_bytes(self.dom.core_info.addr_format, a).ok());
        if let Some(conn) = st.conn_mut(c) {
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
            st.mgr
                .on_incoming(c as PeerId, h.instance, conn::self_wins(&me, &h.addr), now)
        };
        match decision {
            ConnDecision::RejectAlready => {
                self.reject(handle, Reason::Already);
            }
            ConnDecision::Accept | ConnDecision::Replace => {
                if decision == ConnDecision::Replace {
                    // The peer restarted: what was in flight on the old connection is
                    // lost; what was queued goes on the new one.
                    let old = st.conns[c].as_mut().and_then(|x| {
                        x.stalled.clear();
                        x.tx.take()
                    });
                    self.drop_msg(st, old);
                    self.fail_ops_of(act, st, c, Errno::ECONNRESET, true);
                    self.fail_receives_of(act, st, c, Errno::ECONNRESET);
                }
                self.run_actions(act, st);
                match self.open_msg(st, &info, c) {
                    Ok(slot) => {
                        let ok = st.msgs[slot]
                            .as_ref()
                            .map(|m| m.ep.accept(&self.hello(Kind::Accept, Reason::None)))
                            .unwrap_or(Ok(()));
                        if let Err(e) = ok {
                            ofi_core::ofi_warn!(NAME, "ep_ctrl", "accept: {e}");
                            self.drop_msg(st, Some(slot));
                            return;
                        }
                        if let Some(conn) = st.conns[c].as_mut() {
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
                                self.drop_msg(st, prev);
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

    pub(super) fn handle_connected(&self, act: &Active, st: &mut St, slot: usize, data: &[u8]) {
        let now = st.now();
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conn_mut(c) else {
            return;
        };
        if conn.extra.contains(&slot) {
            self.post_bufs(st, slot);
            return;
        }
        let (credits, instance) = if conn.attempt == Some(slot) {
            conn.attempt = None;
            match Hello::parse(data) {
                Ok(h)
                    if h.kind == Kind::Accept
                        && h.version == proto::VERSION
                        && h.buffer_size as usize == self.settings.buffer_size
                        && h.credits > 0 =>
                {
                    conn.peer_sar = h.sar_limit.min(crate::MAX_MSG_SIZE as u64) as usize;
                    conn.peer_rma_event = h.rma_event;
                    (h.credits as usize, Some(h.instance))
                }
                Ok(h) => {
                    ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer accepted with an incompatible handshake (kind {:?}, version {}, buffer size {})", h.kind, h.version, h.buffer_size);
                    self.drop_msg(st, Some(slot));
                    st.mgr
                        .on_refused(c as PeerId, Errno::ECONNREFUSED, Reason::Version, now);
                    self.run_actions(act, st);
                    return;
                }
                Err(e) => {
                    ofi_core::ofi_warn!(
                        NAME,
                        "ep_ctrl",
                        "peer accepted with a malformed handshake: {e}"
                    );
                    self.drop_msg(st, Some(slot));
                    st.mgr
                        .on_refused(c as PeerId, Errno::ECONNREFUSED, Reason::Malformed, now);
                    self.run_actions(act, st);
                    return;
                }
            }
        } else if conn.accepting == Some(slot) {
            conn.accepting = None;
            (conn.accept_credits, conn.instance)
        } else {
            // Abandoned attempt that completed anyway.
            self.drop_msg(st, Some(slot));
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
            st.eng.handle_conn_up(peer_of(c), credits as u32);
        }
        if peer_sar > 0 {
            st.eng.set_peer_sar_limit(peer_of(c), peer_sar);
        }
        self.drop_msg(st, old);
        self.post_bufs(st, slot);
        st.mgr.on_connected(c as PeerId, instance, now);
        self.run_actions(act, st);
        self.pump_conn(act, st, c);
    }

    pub(super) fn handle_cm_error(
        &self,
        act: &Active,
        st: &mut St,
        slot: usize,
        err: Errno,
        data: &[u8],
    ) {
        // As for FI_SHUTDOWN: what arrived before the error is completed first.
        self.progress_cq(act, st);
        let now = st.now();
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conn_mut(c) else {
            return;
        };
        if conn.attempt == Some(slot) {
            conn.attempt = None;
            self.drop_msg(st, Some(slot));
            let reason = match Hello::parse(data) {
                Ok(h) if h.kind == Kind::Reject => h.reason,
                _ => Reason::None,
            };
            if matches!(reason, Reason::Version | Reason::Params | Reason::Malformed) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "peer refused our handshake ({reason:?})");
            }
            st.mgr.on_refused(c as PeerId, err, reason, now);
            self.run_actions(act, st);
        } else if conn.tx == Some(slot) {
            self.fail_conn(act, st, c, Errno::ECONNRESET);
        } else {
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            conn.extra.retain(|s| *s != slot);
            self.drop_msg(st, Some(slot));
        }
    }

    pub(super) fn handle_shutdown(&self, act: &Active, st: &mut St, slot: usize) {
        // The core reports the close after the completions of what arrived before it;
        // take those first, or a peer's last message (sent just before it exited) would
        // be dropped with the connection's slot (the same for an error event).
        self.progress_cq(act, st);
        let Some(c) = st.msgs.get(slot).and_then(Option::as_ref).map(|m| m.conn) else {
            return;
        };
        let Some(conn) = st.conn_mut(c) else {
            return;
        };
        if conn.tx == Some(slot) {
            self.fail_conn(act, st, c, Errno::ECONNRESET);
        } else {
            conn.extra.retain(|s| *s != slot);
            if conn.accepting == Some(slot) {
                conn.accepting = None;
            }
            self.drop_msg(st, Some(slot));
        }
    }

    pub(super) fn progress_eq(&self, act: &Active, st: &mut St) -> usize {
        // A scalable endpoint's receive context: the requests routed to it.
        let mut n = self.take_routed_requests(act, st);
        for _ in 0..EQ_BUDGET {
            match self.core_eq.read() {
                Ok(ev) => {
                    n += 1;
                    match ev.event {
                        EqEvent::ConnReq if ev.fid == CTX_PEP => {
                            self.handle_connreq(act, st, ev.info, &ev.cm_data)
                        }
                        EqEvent::Connected => {
                            if let Some(slot) = live_slot(st, ev.fid) {
                                self.handle_connected(act, st, slot, &ev.cm_data);
                            }
                        }
                        EqEvent::Shutdown => {
                            if let Some(slot) = live_slot(st, ev.fid) {
                                self.handle_shutdown(act, st, slot);
                            }
                        }
                        _ => {}
                    }
                }
                Err(e) if e.code() == Errno::EAVAIL => {
                    n += 1;
                    match self.core_eq.readerr() {
                        Ok(ee) => {
                            if let Some(slot) = live_slot(st, ee.fid) {
                                self.handle_cm_error(act, st, slot, ee.err, &ee.err_data);
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
fn live_slot(st: &St, fid: usize) -> Option<usize> {
    let (slot, gen) = split_ep_ctx(fid)?;
    st.msgs
        .get(slot)
        .and_then(Option::as_ref)
        .is_some_and(|m| m.gen == gen)
        .then_some(slot)
}
