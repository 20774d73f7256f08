//! Operations: RMA and atomics forwarded to the peer's MSG endpoint, completion of
//! transmit operations, and the submission of sends and forwarded operations.
//!
//! # Invariants
//!
//! - Every submitted operation completes exactly once (success or error), through
//!   [`Shared::maybe_finish`] or a failure path.

use super::tx::Posted;
use super::*;

/// An RMA or atomic operation on its way to the peer's MSG endpoint.
pub(super) struct FwdRequest {
    /// The peer's fabric address.
    pub(super) dest: u64,
    /// The application's context.
    pub(super) ctx: usize,
    /// The operation.
    pub(super) fwd: Fwd,
    /// A copy of the source data (inject), kept until the core completes.
    pub(super) owned: Option<Vec<u8>>,
    /// The operation's flags.
    pub(super) flags: OpFlags,
    /// No completion for it (the inject calls).
    pub(super) suppress: bool,
}

impl TxOp {
    /// A new operation on connection `conn_id`, not posted yet: `flags` and `want` for its
    /// completion, `owned` a copy of its data (inject).
    fn new(
        conn_id: ConnId,
        ctx: usize,
        flags: u64,
        want: bool,
        body: Body,
        owned: Option<Vec<u8>>,
    ) -> TxOp {
        TxOp {
            gen: 0,
            conn: conn_id,
            ctx,
            flags,
            want,
            body,
            owned,
            outstanding: 0,
            started: false,
            posted: false,
            engine_done: false,
            err: None,
            hdrs: Vec::new(),
            bounce: Vec::new(),
            mrs: Vec::new(),
        }
    }
}

impl Shared {
    pub(super) fn post_fwd(
        &self,
        active: &Active,
        state: &mut EpState,
        i: u32,
        ctx: usize,
    ) -> Posted {
        let Some(op) = state.ops.get(i as usize).and_then(Option::as_ref) else {
            return Posted::Done;
        };
        let Body::Fwd(f) = &op.body else {
            return Posted::Done;
        };
        let Some(ep) = self.tx_ep(state, op.conn) else {
            return Posted::Gone;
        };
        let dp = |d: &Vec<usize>| -> *const *mut c_void {
            if d.is_empty() {
                std::ptr::null()
            } else {
                d.as_ptr() as *const *mut c_void
            }
        };
        let r = match f {
            Fwd::Read { iov, desc, rma } => {
                let m = msg_rma(iov, dp(desc), rma, ctx, 0);
                // SAFETY: the arrays live in the op until completion; the application's
                // buffers by the C contract.
                unsafe { ep.readmsg(&m, OpFlags::COMPLETION.bits()) }
            }
            Fwd::Write {
                iov,
                desc,
                rma,
                data,
            } => {
                let m = msg_rma(iov, dp(desc), rma, ctx, data.unwrap_or(0));
                let mut fl = OpFlags::COMPLETION;
                if data.is_some() {
                    fl |= OpFlags::REMOTE_CQ_DATA;
                }
                // SAFETY: as above.
                unsafe { ep.writemsg(&m, fl.bits()) }
            }
            Fwd::Atomic {
                kind,
                iov,
                desc,
                rma,
                dt,
                op: aop,
                cmp,
                cdesc,
                res,
                rdesc,
            } => {
                let m = MsgAtomic {
                    msg_iov: iov.as_ptr(),
                    desc: dp(desc),
                    iov_count: iov.len(),
                    addr: ADDR_UNSPEC,
                    rma_iov: rma,
                    rma_iov_count: 1,
                    datatype: dt.to_raw(),
                    op: aop.to_raw(),
                    context: ctx,
                    data: 0,
                };
                let fl = OpFlags::COMPLETION.bits();
                // SAFETY: as above.
                unsafe {
                    match kind {
                        AtomicKind::Base => ep.atomicmsg(&m, fl),
                        AtomicKind::Fetch => {
                            ep.fetch_atomicmsg(&m, res.as_ptr(), dp(rdesc), res.len(), fl)
                        }
                        AtomicKind::Compare => ep.compare_atomicmsg(
                            &m,
                            cmp.as_ptr(),
                            dp(cdesc),
                            cmp.len(),
                            res.as_ptr(),
                            dp(rdesc),
                            res.len(),
                            fl,
                        ),
                    }
                }
            }
        };
        match r {
            Ok(()) => {
                state.posted_last(i);
                Posted::Done
            }
            Err(e) if e.code() == Errno::EAGAIN => Posted::Blocked,
            Err(e) => self.fail_op(active, state, i, e.code()),
        }
    }

    pub(super) fn maybe_finish(&self, active: &Active, state: &mut EpState, i: u32) {
        let Some(op) = state.ops.get(i as usize).and_then(Option::as_ref) else {
            return;
        };
        // Done when the engine is (acknowledged, "done", or handed out) and the core
        // completed what was posted; an error of the core's ends it once nothing is
        // outstanding.
        if !op.posted || op.outstanding > 0 || (!op.engine_done && op.err.is_none()) {
            return;
        }
        // A forwarded RMA or atomic done at a peer that counts remote accesses
        // (`FI_RMA_EVENT`): tell it, on the connection the access went on (after it).
        let told = match (&op.body, op.err) {
            (Body::Fwd(f), None) => state
                .conn(op.conn)
                .is_some_and(|c| c.peer_rma_event)
                .then(|| (op.conn, f.is_remote_read())),
            _ => None,
        };
        if let Some(op) = state.free_op(i) {
            active.complete_tx(op.ctx, op.flags, op.want, op.err);
        }
        if let Some((c, read)) = told {
            state.protocol.remote_access_done(c, read);
            self.pump_conn(active, state, c);
        }
    }

    /// Submit a new operation to the engine (a message with `meta`, or a forwarded
    /// one): it goes now if its connection is up and nothing waits before it, else
    /// when the engine hands it out; a peer not connected is connected.
    pub(super) fn submit(
        &self,
        active: &Active,
        state: &mut EpState,
        mut op: TxOp,
        meta: Option<MsgMeta>,
    ) -> Result<()> {
        if state.live >= self.settings.tx_size {
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let conn_id = op.conn;
        if let (Some(_), Body::Send { len, .. }) = (meta, &op.body) {
            let rndv = Protocol::of(*len, self.settings.eager_limit(), self.settings.sar_limit)
                == Protocol::Rendezvous;
            if rndv {
                if let Err(e) = self.register_rndv(&mut op) {
                    active.complete_tx(op.ctx, op.flags, op.want, Some(e.code()));
                    return Ok(());
                }
            }
        }
        let len = match &op.body {
            Body::Send { len, .. } => *len,
            Body::Fwd(_) => 0,
        };
        let i = state.alloc_op(op);
        let gen = state.ops[i as usize].as_ref().map_or(0, |o| o.gen);
        let id = op_id(i, gen);
        let peer = conn_id;
        let r = match meta {
            Some(m) => state.protocol.send_msg(peer, id, m, len),
            None => state.protocol.forward(peer, id),
        };
        if let Err(e) = r {
            state.free_op(i);
            return Err(Error::new(e, format!("{NAME}: operation refused")));
        }
        if state.protocol.is_up(peer) {
            self.pump_conn(active, state, conn_id);
        } else {
            let now = state.now();
            state.conn_mgr.want(conn_id, now);
            self.run_actions(active, state);
        }
        Ok(())
    }

    /// The connection for fabric address `dest`.
    pub(super) fn conn_of(
        &self,
        active: &Active,
        state: &mut EpState,
        dest: u64,
    ) -> Result<ConnId> {
        // The direct-mapped cache: valid while the AV has not changed since it was
        // filled (an entry's address is then the one its connection was found for).
        let changes = active.av.changes();
        let slot = (dest & 0xffff_ffff) as usize;
        if let Some(&(d, ch, conn_id)) = state.dest_fast.get(slot) {
            if d == dest && ch == changes {
                return Ok(conn_id);
            }
        }
        let conn_id = self.conn_of_slow(active, state, dest)?;
        if slot < DEST_FAST_MAX {
            if state.dest_fast.len() <= slot {
                state
                    .dest_fast
                    .resize(slot + 1, (ADDR_UNSPEC, u64::MAX, ConnId::from_index(0)));
            }
            state.dest_fast[slot] = (dest, changes, conn_id);
        }
        Ok(conn_id)
    }

    /// [`Shared::conn_of`] without the cache: the AV entry's address checked against
    /// the connection's aliases.
    fn conn_of_slow(&self, active: &Active, state: &mut EpState, dest: u64) -> Result<ConnId> {
        if let Some(&conn_id) = state.by_fi.get(&dest) {
            if let Some(conn) = state.conn(conn_id) {
                if active
                    .av
                    .with_entry(dest, |e| conn.aliases.contains(e.addr))
                    .unwrap_or(false)
                {
                    return Ok(conn_id);
                }
            }
        }
        let addr = active.av.lookup(dest).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: fabric address {dest:#x} is not in the AV"),
            )
        })?;
        // Each receive context of a scalable peer (`fi_rx_addr`) has its connection;
        // the AV's receive-context bits never exceed 16.
        let rx_index = u16::try_from(active.av.rx_index(dest)).unwrap_or(u16::MAX);
        let conn_id = state.conn_for_target(&addr, rx_index);
        state.by_fi.insert(dest, conn_id);
        Ok(conn_id)
    }

    /// Submit a send (tagged when the request has a tag).
    pub(super) fn send(&self, active: &Active, req: SendRequest) -> Result<()> {
        let SendRequest {
            iov,
            dest,
            context: ctx,
            tag,
            data,
            flags,
            inject,
        } = req;
        let (tag, tagged) = (tag.unwrap_or(0), tag.is_some());
        let len = iov.total();
        let max = self
            .dom
            .core_info
            .ep_attr
            .max_msg_size
            .min(crate::MAX_MSG_SIZE);
        if len > max {
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: message of {len} bytes exceeds max_msg_size {max}"),
            ));
        }
        let suppress = inject;
        let inject = inject || flags.contains(OpFlags::INJECT);
        // An eager or segmented message completes when the core has sent it; a
        // delivery-complete one waits for the receiver's word that it has taken the
        // message in (into a receive, or buffered), so it needs an operation record:
        // not the fast path.
        let delivery = !inject && flags.contains(OpFlags::DELIVERY_COMPLETE);
        let cq_flags = (OpFlags::SEND
            | if tagged {
                OpFlags::TAGGED
            } else {
                OpFlags::MSG
            })
        .bits();
        let want = wants_completion(active, suppress, flags);
        let mut g = lock(&self.state);
        let state = &mut *g;
        let conn_id = self.conn_of(active, state, dest)?;
        let meta = MsgMeta {
            tag: tagged.then_some(tag),
            data,
            dc: delivery,
        };
        // Fast path: a packet that fits the core's inject size, connection idle (the
        // engine's `send_now`: up, nothing queued, a credit).
        if !delivery && len + HDR_LEN <= self.core_inject && len + HDR_LEN <= FAST_MAX {
            let ready = state
                .conn(conn_id)
                .is_some_and(|x| x.tx.is_some() && x.stalled.is_empty());
            if let Some(h) = ready
                .then(|| state.protocol.send_now(conn_id, meta, len))
                .flatten()
            {
                // The endpoint's packet buffer (reused: no allocation, no zeroing of
                // more than the packet).
                let mut pkt = std::mem::take(&mut state.fast_pkt);
                pkt.clear();
                pkt.extend_from_slice(&h.bytes());
                pkt.reserve(len);
                // SAFETY: the application's buffers are readable for their lengths (C
                // contract) and hold `len` bytes in all (`len` is their total); `pkt`
                // has room for `len` bytes after the header, which the copy writes
                // before the length covers them (no zeroing first).
                unsafe {
                    iov.gather(0, pkt.as_mut_ptr().add(HDR_LEN), len);
                    pkt.set_len(HDR_LEN + len);
                }
                let r = match self.tx_ep(state, conn_id) {
                    // SAFETY: `pkt` is valid for the call; inject copies it.
                    Some(ep) => unsafe { ep.inject_raw(pkt.as_ptr(), HDR_LEN + len, ADDR_UNSPEC) },
                    None => Err(Error::code_only(Errno::ENOTCONN)),
                };
                state.fast_pkt = pkt;
                match r {
                    Ok(()) => {
                        drop(g);
                        active.complete_tx(ctx, cq_flags, want, None);
                        return Ok(());
                    }
                    Err(e) => {
                        state.protocol.unsend(conn_id, &h);
                        if is_conn_err(e.code()) {
                            self.fail_conn(active, state, conn_id, Errno::ECONNRESET);
                        } else if e.code() != Errno::EAGAIN {
                            return Err(e);
                        }
                    }
                }
            }
        }
        let owned = if inject {
            let mut v = vec![0u8; len];
            // SAFETY: as above.
            unsafe { iov.gather(0, v.as_mut_ptr(), len) };
            Some(v)
        } else {
            None
        };
        let body = Body::Send { iov, len };
        let op = TxOp::new(conn_id, ctx, cq_flags, want, body, owned);
        self.submit(active, state, op, Some(meta))
    }

    /// Submit an RMA or atomic operation forwarded to the peer's MSG endpoint.
    pub(super) fn forward(&self, active: &Active, req: FwdRequest) -> Result<()> {
        let FwdRequest {
            dest,
            ctx,
            fwd,
            owned,
            flags,
            suppress,
        } = req;
        let cq_flags = match &fwd {
            Fwd::Read { .. } => (OpFlags::RMA | OpFlags::READ).bits(),
            Fwd::Write { .. } => (OpFlags::RMA | OpFlags::WRITE).bits(),
            Fwd::Atomic { kind, .. } => match kind {
                AtomicKind::Base => (OpFlags::ATOMIC | OpFlags::WRITE).bits(),
                _ => (OpFlags::ATOMIC | OpFlags::READ).bits(),
            },
        };
        let want = wants_completion(active, suppress, flags);
        let mut g = lock(&self.state);
        let state = &mut *g;
        let conn_id = self.conn_of(active, state, dest)?;
        let op = TxOp::new(conn_id, ctx, cq_flags, want, Body::Fwd(fwd), owned);
        self.submit(active, state, op, None)
    }
}

/// The core's RMA message for one remote buffer `rma` of the peer's connection.
fn msg_rma(iov: &[Iov], desc: *const *mut c_void, rma: &RmaIov, ctx: usize, data: u64) -> MsgRma {
    MsgRma {
        msg_iov: iov.as_ptr(),
        desc,
        iov_count: iov.len(),
        addr: ADDR_UNSPEC,
        rma_iov: rma,
        rma_iov_count: 1,
        context: ctx,
        data,
    }
}

/// Whether a transmit operation with `flags` reports a completion: not an inject call
/// (`suppress`), and a transmit CQ bound that takes every completion or is selective
/// and was asked for this one.
fn wants_completion(active: &Active, suppress: bool, flags: OpFlags) -> bool {
    !suppress
        && active
            .txcq
            .as_ref()
            .is_some_and(|b| !b.selective || flags.contains(OpFlags::COMPLETION))
}
