//! Same-host copies (cross-memory attach, protocol version 2).
//!
//! On a connection between two processes of this host (see the crate docs), each side
//! offers a nonce once connected and verifies the peer's proof with a real
//! `process_vm_readv` (the [`Local`] state of each connection); the nonce is never kept
//! in plain form (masked with a per-process key) so no other process can find it in
//! this one's memory. Once the peer has verified this side, sends and RMA reads of at
//! least `cma_threshold` bytes go as descriptors: the send waits (as a pending
//! operation) for the receiver's `Ack`, the receiver copies from the sender with
//! `process_vm_readv` straight into the matched buffer (or into an unexpected-message
//! buffer, under the same limits), and a read's target copies into the initiator with
//! `process_vm_writev`.
//!
//! Invariants: descriptors are accepted only from a verified peer (`peer_pid` set);
//! the copies only touch the verified peer's memory (the kernel checks its addresses)
//! and buffers this side owns or has checked; `tx_ok` is set only after the peer's
//! `LocalOk`. Registered memory, which a peer's copy may write at any moment, is never
//! borrowed as `&[u8]` / `&mut [u8]`.
//!
//! Nothing here panics on peer input: a descriptor from an unverified peer or a failed
//! copy fails the operation or the connection with an error code.

use super::*;

/// The same-host copy state of one connection (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Local {
    /// Both ends are on this host and copies are not disabled.
    pub(super) eligible: bool,
    /// The nonce offered to the peer, masked with [`process_key`]; cleared once the
    /// peer's proof has been checked.
    pub(super) offered: Option<u64>,
    /// The peer's pid, once its proof held: descriptors from it are accepted and this
    /// side copies from / into its memory.
    pub(super) peer_pid: Option<i32>,
    /// A proof was sent (a `LocalOk` may come).
    pub(super) proved: bool,
    /// The peer verified this side: large sends and reads go as descriptors.
    pub(super) tx_ok: bool,
}

/// A random key of this process that masks offered nonces in memory.
pub(super) fn process_key() -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    *KEY.get_or_init(ofi_kit::cma::random_u64)
}

/// Whether a connection between `local` and `peer` stays on this host.
pub(super) fn same_host(local: &SocketAddr, peer: &SocketAddr) -> bool {
    peer.ip().is_loopback() || peer.ip() == local.ip()
}

impl EpInner {
    /// The same-host handshake and read requests (see the module docs).
    pub(super) fn local_control(
        &self,
        state: &mut EpState,
        hdr: &Hdr,
    ) -> std::result::Result<(), Fail> {
        let perr = |m: &str| Fail::Error(Errno::EPROTO, m.to_string());
        match hdr.op {
            Op::LocalOffer => {
                if !state.local.eligible {
                    // Copies are off on this side (or the peer is elsewhere): no proof,
                    // the peer keeps to the socket.
                    return Ok(());
                }
                self.proof.store(hdr.data, Ordering::Release);
                let mut p = Hdr::new(Op::LocalProof);
                p.data = u64::from(std::process::id());
                p.tag = self.proof.as_ptr() as u64;
                state.local.proved = true;
                EpInner::respond(state, p, Segs::default());
            }
            Op::LocalProof => {
                let Some(masked) = state.local.offered.take() else {
                    return Err(perr("same-host proof that was not asked for"));
                };
                let pid = i32::try_from(hdr.data).map_err(|_| perr("same-host proof pid"))?;
                let held = pid > 0 && ofi_kit::cma::probe(pid, hdr.tag, masked ^ process_key());
                if held {
                    state.local.peer_pid = Some(pid);
                } else {
                    ofi_core::ofi_info!(
                        NAME,
                        "ep_data",
                        "same-host copies towards pid {pid} refused by the kernel or the proof; \
                         using the socket"
                    );
                }
                let mut ok = Hdr::new(Op::LocalOk);
                ok.data = u64::from(held);
                EpInner::respond(state, ok, Segs::default());
            }
            Op::LocalOk => {
                if !std::mem::take(&mut state.local.proved) || hdr.data > 1 {
                    return Err(perr("same-host verdict that was not asked for"));
                }
                state.local.tx_ok = hdr.data == 1;
            }
            Op::LocalReadReq => {
                let Some(pid) = state.local.peer_pid else {
                    return Err(perr("same-host read from an unverified peer"));
                };
                let cnt = usize::from(hdr.rma_cnt);
                let nrem = usize::try_from(hdr.tag).unwrap_or(usize::MAX);
                if nrem == 0 || nrem >= cnt {
                    return Err(perr("same-host read with a bad remote iov count"));
                }
                let rma = parse_rma(&state.hbuf, hdr.rma_cnt);
                let mut rsp = Hdr::new(Op::ReadRsp);
                rsp.id = hdr.id;
                rsp.flags = FLAG_LOCAL;
                match self.lookup(&rma, nrem as u8, OpFlags::REMOTE_READ) {
                    Ok(src) => {
                        let dst: Vec<(u64, u64)> =
                            rma[nrem..cnt].iter().map(|r| (r.addr, r.len)).collect();
                        let want = dst.iter().fold(0u64, |a, d| a.saturating_add(d.1));
                        let have = src.total().unwrap_or(usize::MAX) as u64;
                        if want != have {
                            rsp.status = Errno::EINVAL.0 as u16;
                        } else {
                            // SAFETY: `src` is registered memory the MR table checked for
                            // remote read (only read here). `dst` are the buffers of the
                            // peer's pending read, in the process whose pid its proof
                            // established; when that is this process, they are a read
                            // posted here, valid and untouched until it completes (the
                            // contract of fi_read), after this copy.
                            let copied = unsafe { ofi_kit::cma::writev(pid, src.segs(), &dst) };
                            match copied {
                                Ok(n) if n as u64 == have => {}
                                Ok(_) | Err(_) => rsp.status = Errno::EIO.0 as u16,
                            }
                        }
                    }
                    Err(status) => rsp.status = status,
                }
                EpInner::respond(state, rsp, Segs::default());
            }
            _ => {}
        }
        Ok(())
    }

    /// A same-host message descriptor met its sink: copy the data out of the sender,
    /// then complete as if it had been read from the socket, or, when the copy fails,
    /// complete the receive in error and tell the sender.
    pub(super) fn local_pull(
        &self,
        state: &mut EpState,
        hdr: Hdr,
        mut sink: Sink,
    ) -> std::result::Result<Step, Fail> {
        let pid = state.local.peer_pid.unwrap_or(0);
        let rma = parse_rma(&state.hbuf, hdr.rma_cnt);
        let mut remote = [(0u64, 0u64); proto::RMA_IOV_LIMIT];
        for (r, w) in rma.iter().zip(remote.iter_mut()) {
            *w = (r.addr, r.len);
        }
        let remote = &remote[..usize::from(hdr.rma_cnt)];
        state.rx = Rx::Hdr { got: 0 };
        let size = hdr.size as usize;
        let copied = match &mut sink {
            Sink::Recv { segs, keep, .. } => {
                let local = segs.window(0, *keep);
                // SAFETY: `local` is the kept part of a posted receive buffer, left
                // writable to the provider until the receive completes (the contract of
                // fi_recv) and held only as addresses.
                let r = unsafe { ofi_kit::cma::readv(pid, local.segs(), remote) };
                whole_copy(r, *keep)
            }
            Sink::Unexp(v) => {
                v.resize(size, 0);
                let local = [(v.as_mut_ptr() as usize, size)];
                // SAFETY: `v` is a live Vec of `size` bytes that nothing else touches
                // during the call.
                let r = unsafe { ofi_kit::cma::readv(pid, &local, remote) };
                whole_copy(r, size)
            }
            _ => return Err(Fail::Error(Errno::EPROTO, "same-host descriptor".into())),
        };
        match copied {
            Ok(()) => self.finish(state, hdr, sink)?,
            Err(os) => {
                let os = os.unwrap_or(libc::EFAULT);
                ofi_core::ofi_warn!(
                    NAME,
                    "ep_data",
                    "same-host copy of {size} bytes from pid {pid} failed: {}",
                    io::Error::from_raw_os_error(os)
                );
                if let Sink::Recv { recv, .. } = &sink {
                    self.rx_failed(&state.b, recv, &hdr, Errno::EIO, os);
                }
                let mut ack = Hdr::new(Op::Ack);
                ack.id = hdr.id;
                ack.status = Errno::EIO.0 as u16;
                EpInner::respond(state, ack, Segs::default());
            }
        }
        Ok(Step::Finished)
    }
}

/// The outcome of a same-host copy of `want` bytes: `Ok` when all of them came, else
/// the OS error (`None` for a short copy).
fn whole_copy(
    copied: std::result::Result<usize, i32>,
    want: usize,
) -> std::result::Result<(), Option<i32>> {
    match copied {
        Ok(n) if n == want => Ok(()),
        other => Err(other.err()),
    }
}
