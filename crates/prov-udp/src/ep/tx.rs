//! The send path: every send call (kit's `SendRequest`, see `datapath`) ends in
//! `EpInner::send_common`, one datagram handed to the kernel (`sendto` of a stack copy
//! for small payloads, `sendmsg` of the application's vector otherwise).
//!
//! Invariants: the send's completion is pushed into a CQ slot reserved before the
//! datagram leaves (so a full CQ is `FI_EAGAIN` and nothing was sent); the bindings are
//! read from the frozen [`Active`] without a lock. Nothing here panics.

use super::*;
use ofi_kit::request::SendRequest;

impl EpInner {
    /// Send one datagram (every send call ends here): `req`'s payload, in the kernel's
    /// form `iov`, to `req.dest`.
    ///
    /// # Safety
    /// The buffers of `iov` are valid for reading during the call.
    pub(super) unsafe fn send_common(
        &self,
        active: &Active,
        iov: &UserIov,
        req: &SendRequest,
    ) -> Result<()> {
        if iov.total > MAX_MSG_SIZE {
            return Err(code(Errno::EMSGSIZE));
        }
        let dst = active.av.with_entry(req.dest, |e| e.peer.addr)?;
        let reservation = match &active.tx_cq {
            Some(c) if !req.inject && c.wants(req.flags) => Some(c.cq.reserve()?),
            _ => None,
        };
        let hdr = Header::new(req.data).encode();
        let (sock, to) = match active.peers.for_dst(&active.sock, &dst, || {
            // Waiters asleep on the endpoint's sockets must add the new one.
            self.engine.kick();
            self.hub.wake();
            self.peer_socket_made();
        }) {
            Some(peer) => (peer, None),
            None => (&active.sock, Some(&dst)),
        };
        let send = || {
            if iov.total <= SMALL_SEND {
                // Small: header and payload copied into one stack buffer, sent with
                // `sendto` (cheaper in the kernel than `sendmsg` with a vector).
                let mut b = [0u8; HDR_LEN + SMALL_SEND];
                b[..HDR_LEN].copy_from_slice(&hdr);
                let mut at = HDR_LEN;
                for v in &iov.v[..iov.n] {
                    if v.iov_len > 0 {
                        // SAFETY: the application's buffer is valid for `iov_len` bytes
                        // during the call (caller's contract); the total fits `b`.
                        let src = unsafe {
                            std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len)
                        };
                        b[at..at + v.iov_len].copy_from_slice(src);
                        at += v.iov_len;
                    }
                }
                sock.send_buf(to, &b[..at])
            } else {
                let (vecs, n) = iov.with_header(hdr.as_ptr().cast_mut());
                // SAFETY: the header lives on this frame; the application's buffers are
                // valid for the call (caller's contract).
                unsafe { sock.send_to(to, &vecs[..n]) }
            }
        };
        let mut sent = send();
        if matches!(&sent, Err(e) if is_refused(e)) && to.is_none() {
            // A peer socket reported that an earlier datagram was refused (ICMP port
            // unreachable) instead of sending this one; the report is consumed, and
            // datagrams to a closed port are lost silently, as on the shared socket.
            sent = send();
        }
        if let Err(e) = sent {
            return Err(code(match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Errno::EAGAIN,
                Some(libc::EMSGSIZE) => Errno::EMSGSIZE,
                Some(c) => Errno(c),
                None => Errno::EIO,
            }));
        }
        if let Some(r) = reservation {
            let e = CqTaggedEntry {
                op_context: req.context,
                flags: SEND_FLAGS,
                len: 0,
                buf: std::ptr::null_mut(),
                data: 0,
                tag: 0,
            };
            let _ = r.push(&e, ADDR_NOTAVAIL);
        }
        if let Some(c) = &active.tx_cntr {
            c.inc();
        }
        Ok(())
    }
}
