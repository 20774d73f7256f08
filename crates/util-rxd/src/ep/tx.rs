//! Transmit: operation slots ([`OpToken`], [`TxOp`]), sends, and handing the engine's
//! packets to the core endpoint.
//!
//! # Invariants
//!
//! - `EpState::live` counts the occupied slots of `EpState::ops`; a slot's generation changes at
//!   every allocation, so a token of a completed operation never names its successor.
//! - A send copies the application's message into the engine's packets during the
//!   submitting call: nothing reads the application's buffer after it returns.
//! - Packets go to the core with `fi_inject`: `EAGAIN` stops a flush (the engine keeps
//!   the packet), other errors drop the packet (the engine retransmits it).
//!
//! Nothing here panics.

use super::*;
use ofi_kit::epglue::check_len;

/// Names a transmit operation: its slot in `EpState::ops` and the generation the slot had
/// when the operation took it (a slot is reused; an old token no longer matches). It
/// travels as one `u64` (the engine's message token, and the request id of an RMA or
/// atomic request on the wire): generation in the high half, slot in the low.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OpToken {
    pub(super) slot: u32,
    pub(super) gen: u32,
}

impl OpToken {
    /// The token as the engine and the wire carry it.
    pub(super) fn bits(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.slot)
    }

    /// A token from its `u64` form (any value: a peer's is checked by lookup).
    pub(super) fn from_bits(t: u64) -> OpToken {
        OpToken {
            slot: t as u32,
            gen: (t >> 32) as u32,
        }
    }
}

/// Largest RDM address index whose peer is cached (`EpState::dest_peer`).
const DEST_CACHE_MAX: usize = 1 << 16;

/// A transmit operation between its submission and its completion.
pub(super) struct TxOp {
    /// The generation of its slot (see [`OpToken`]).
    pub(super) gen: u32,
    pub(super) ctx: usize,
    /// The completion's flags.
    pub(super) flags: u64,
    /// Whether a successful completion is written (selective completion).
    pub(super) want: bool,
    /// RMA and atomics: they complete with the target's response.
    pub(super) remote: Option<Remote>,
}

impl EpState {
    /// The live operation `t` names.
    pub(super) fn op(&self, t: OpToken) -> Option<&TxOp> {
        self.ops
            .get(t.slot as usize)
            .and_then(Option::as_ref)
            .filter(|o| o.gen == t.gen)
    }
}

/// Append `n` bytes of `iov` from `offset` to `dst` (without zero-filling first).
///
/// # Safety
/// Every buffer of `iov` is readable for its length for the call (the application's
/// buffers during the submitting call: the C contract).
pub(super) unsafe fn append_from(dst: &mut Vec<u8>, iov: &IoList, offset: usize, n: usize) {
    if n == 0 || offset.saturating_add(n) > iov.total() {
        return;
    }
    dst.reserve(n);
    let at = dst.len();
    // SAFETY: `reserve` made room for `n` more bytes after `at`; `iov`'s buffers are
    // readable for their lengths (the caller's contract) and `offset + n` lies within
    // them (checked above); every one of the `n` bytes is written before `set_len`.
    unsafe {
        iov.gather(offset, dst.as_mut_ptr().add(at), n);
        dst.set_len(at + n);
    }
}

impl Shared {
    /// Hand the engine's packets to the core.
    pub(super) fn flush(&self, state: &mut EpState, now: u64) -> usize {
        let EpState { eng, core_addr, .. } = state;
        let fmt = self.fmt;
        let av = &self.core_av;
        let ep = &self.core_ep;
        eng.poll_transmit(now, TX_BUDGET, |peer, addr, pkt| {
            if peer == NO_PEER {
                // A CHALLENGE to the source of a CONNECT: no peer, no state kept (the
                // address is in the core AV for the send only; inserts are counted, so
                // this never drops a peer's entry).
                let Some(f) = Address::from_bytes(fmt, addr)
                    .and_then(|a| av.insert(&[a]))
                    .ok()
                    .and_then(|v| v.first().copied())
                else {
                    return true;
                };
                // SAFETY: `pkt` is valid for the call; inject copies it.
                let r = unsafe { ep.inject_raw(pkt.as_ptr(), pkt.len(), f) };
                let _ = av.remove(&[f], 0);
                return !matches!(r, Err(e) if e.code() == Errno::EAGAIN);
            }
            let i = peer as usize;
            if core_addr.len() <= i {
                core_addr.resize(i + 1, None);
            }
            let fi = match core_addr[i] {
                Some(f) => f,
                None => {
                    let r = Address::from_bytes(fmt, addr).and_then(|a| av.insert(&[a]));
                    match r.ok().and_then(|v| v.first().copied()) {
                        Some(f) => {
                            core_addr[i] = Some(f);
                            f
                        }
                        None => {
                            // Not an address of the core: the packet is lost (the engine
                            // will give up on the peer).
                            ofi_core::ofi_info!(NAME, "ep_data", "peer {peer}: bad address");
                            return true;
                        }
                    }
                }
            };
            // SAFETY: `pkt` is valid for the call; inject copies it.
            match unsafe { ep.inject_raw(pkt.as_ptr(), pkt.len(), fi) } {
                Ok(()) => true,
                Err(e) if e.code() == Errno::EAGAIN => false,
                Err(e) => {
                    ofi_core::ofi_debug!(NAME, "ep_data", "sending a packet: {e}");
                    true
                }
            }
        })
    }

    /// The engine peer for RDM address `dest`.
    ///
    /// Peers made here are the local side's (never reclaimed by the engine), so a
    /// cached (fabric address, address) → peer stays right as long as the AV still
    /// holds that address at that fabric address, which each use checks.
    pub(super) fn peer_of(
        &self,
        active: &Active,
        state: &mut EpState,
        dest: u64,
    ) -> Result<PeerId> {
        let slot = (dest & 0xffff_ffff) as usize;
        if let Some(Some((d, a, p))) = state.dest_peer.get(slot) {
            if *d == dest && active.av.with_entry(dest, |e| e.addr == a).unwrap_or(false) {
                return Ok(*p);
            }
        }
        let a = active.av.lookup(dest).map_err(|_| {
            Error::new(
                Errno::EINVAL,
                format!("{NAME}: destination {dest:#x} is not in the AV"),
            )
        })?;
        let key = norm_addr(&a).to_bytes();
        let p = match state.by_key.get(&key) {
            Some(&p) => p,
            None => {
                let p = state.eng.peer_for_addr(&key);
                state.by_key.insert(key, p);
                p
            }
        };
        if slot < DEST_CACHE_MAX {
            if state.dest_peer.len() <= slot {
                state.dest_peer.resize(slot + 1, None);
            }
            state.dest_peer[slot] = Some((dest, a, p));
        }
        Ok(p)
    }

    /// Start an operation to `dest`: the state locked, the destination's peer, and a
    /// slot holding `op(peer)`; `FI_EAGAIN` (after kicking progress) when `tx_size`
    /// operations are under way.
    pub(super) fn begin_op(
        &self,
        active: &Active,
        dest: u64,
        op: impl FnOnce(PeerId) -> TxOp,
    ) -> Result<(MutexGuard<'_, EpState>, PeerId, OpToken)> {
        let mut g = lock(&self.state);
        if g.live >= self.settings.tx_size {
            drop(g);
            self.engine.kick();
            return Err(Error::code_only(Errno::EAGAIN));
        }
        let peer = self.peer_of(active, &mut g, dest)?;
        let t = Self::alloc_op(&mut g, op(peer));
        Ok((g, peer, t))
    }

    pub(super) fn alloc_op(state: &mut EpState, mut op: TxOp) -> OpToken {
        state.op_gen = state.op_gen.wrapping_add(1).max(1);
        op.gen = state.op_gen;
        state.live += 1;
        let gen = op.gen;
        let i = match state.op_free.pop() {
            Some(i) => {
                state.ops[i as usize] = Some(op);
                i
            }
            None => {
                state.ops.push(Some(op));
                (state.ops.len() - 1) as u32
            }
        };
        OpToken { slot: i, gen }
    }

    pub(super) fn take_op(state: &mut EpState, t: OpToken) -> Option<TxOp> {
        let i = t.slot;
        let slot = state.ops.get_mut(i as usize)?;
        if slot.as_ref().map(|o| o.gen) != Some(t.gen) {
            return None;
        }
        let op = slot.take()?;
        state.op_free.push(i);
        state.live = state.live.saturating_sub(1);
        Some(op)
    }

    /// Send message `r` (a tagged one when it has a tag).
    pub(super) fn send(&self, active: &Active, r: SendRequest) -> Result<()> {
        let cq_flags = r.completion_flags().bits();
        let (iov, dest, ctx, data, flags, inject) =
            (r.iov, r.dest, r.context, r.data, r.flags, r.inject);
        let (tagged, tag) = (r.tagged(), r.tag.unwrap_or(0));
        let len = iov.total();
        check_len(NAME, "message", len, "max_msg_size", MAX_MSG_SIZE)?;
        let want = active.tx_completion_wanted(inject, flags);
        let (mut g, peer, t) = self.begin_op(active, dest, |_| TxOp {
            gen: 0,
            ctx,
            flags: cq_flags,
            want,
            remote: None,
        })?;
        let state = &mut *g;
        let h = msg_hdr(tagged, tag, data);
        self.send_op(state, peer, t, MSG_HDR + len, "message", |off, n, dst| {
            let (o, left) = put_head(&h, off, n, dst);
            // SAFETY: `iov` is the application's message, readable for its length
            // during this submitting call (the C contract `SendRequest` carries).
            unsafe { append_from(dst, &iov, o, left) };
        })
    }

    /// Hand operation `t`'s message of `len` bytes to the engine for `peer` (`fill(off,
    /// n, dst)` appends its `n` bytes from offset `off` to `dst`) and send what is due.
    /// A message the engine refuses (over its size limit) ends the operation:
    /// `FI_EMSGSIZE`, naming `what` was too long.
    #[inline]
    pub(super) fn send_op(
        &self,
        state: &mut EpState,
        peer: PeerId,
        t: OpToken,
        len: usize,
        what: &str,
        fill: impl FnMut(usize, usize, &mut Vec<u8>),
    ) -> Result<()> {
        let now = self.now();
        if state.eng.send_with(peer, t.bits(), len, now, fill).is_err() {
            let _ = Self::take_op(state, t);
            return Err(Error::new(
                Errno::EMSGSIZE,
                format!("{NAME}: {what} too long"),
            ));
        }
        self.flush(state, now);
        Ok(())
    }
}

/// Append to `dst` the part of bytes `off..off + n` of a message that lies in its
/// header `head`; returns where the rest starts in the body after the header, and its
/// length.
#[inline]
pub(super) fn put_head(head: &[u8], off: usize, n: usize, dst: &mut Vec<u8>) -> (usize, usize) {
    match off.checked_sub(head.len()) {
        Some(body_off) => (body_off, n),
        None => {
            let k = (head.len() - off).min(n);
            dst.extend_from_slice(&head[off..off + k]);
            (0, n - k)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = OpToken { slot: 5, gen: 77 };
        assert_eq!(OpToken::from_bits(t.bits()), t);
        let t = OpToken {
            slot: u32::MAX,
            gen: 1,
        };
        assert_eq!(OpToken::from_bits(t.bits()), t);
        assert_eq!(t.bits(), (1 << 32) | u64::from(u32::MAX));
    }
}
