//! Connections: the client's connect / response exchange, the server's accept, the
//! end of a connection and the CM options.
//!
//! Invariants: `EpState::conn` moves only forward — `Idle` → `Connecting` → `AwaitResp` →
//! `Connected` (client), `Idle` → `Accepting` → `Connected` (server), any → `Shutdown`;
//! `EpInner::cm_watch` holds the socket's descriptor exactly while a socket is open
//! and is cleared before the socket is closed. When a connection ends every queued and
//! pending operation completes (in error) once, then `FI_SHUTDOWN` or an error event
//! goes to the EQ; nothing is completed twice because the queues are drained as they
//! are completed. The [`CmSource`] holds the endpoint weakly, so a closed endpoint is
//! not kept alive by the fabric's CM engine.
//!
//! Nothing here panics on peer input: a malformed or oversized CM message fails the
//! connection with `FI_EPROTO`.

use super::*;

/// `getopt` for the CM options shared by endpoints and passive endpoints.
pub(crate) fn cm_getopt(level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
    if level != OPT_ENDPOINT || optname != OPT_CM_DATA_SIZE {
        return Err(Error::new(
            Errno::ENOPROTOOPT,
            format!("{NAME}: option not supported"),
        ));
    }
    ofi_kit::ep::put_size_opt(NAME, "FI_OPT_CM_DATA_SIZE", optval, CM_DATA_SIZE)
}

/// `setopt` for the CM options: `FI_OPT_CM_DATA_SIZE` is read only (fi_endpoint(3)):
/// `FI_EINVAL`; any other option `FI_ENOPROTOOPT`.
pub(crate) fn cm_setopt(level: i32, optname: i32, _optval: &[u8]) -> Result<()> {
    if level == OPT_ENDPOINT && optname == OPT_CM_DATA_SIZE {
        // fi_endpoint(3): "This option is read only."
        return Err(Error::new(
            Errno::EINVAL,
            format!("{NAME}: FI_OPT_CM_DATA_SIZE is read only (it is {CM_DATA_SIZE})"),
        ));
    }
    Err(Error::new(
        Errno::ENOPROTOOPT,
        format!("{NAME}: option not supported"),
    ))
}

/// Drives an endpoint's connection setup (connect / await response) from the fabric's
/// CM engine — and so from EQ reads, or the CM thread with `FI_PROGRESS_AUTO` control
/// progress — without touching the data path of connected endpoints.
pub(crate) struct CmSource(pub(super) std::sync::Weak<EpInner>);

impl Progress for CmSource {
    fn progress(&self) -> usize {
        let Some(ep) = self.0.upgrade() else {
            return 0;
        };
        if !ep.active.load(Ordering::Acquire) {
            return 0;
        }
        let Ok(mut state) = ep.state.try_lock() else {
            return 0;
        };
        match state.conn {
            Conn::Connecting { .. } | Conn::AwaitResp { .. } => ep.progress_connect(&mut state),
            Conn::Connected => {
                // Only notice a closed or failed connection here (one poll, no reads),
                // so FI_SHUTDOWN reaches the EQ without the data path being driven.
                let ev = state
                    .sock
                    .as_ref()
                    .and_then(|s| s.poll(libc::POLLRDHUP, 0).ok())
                    .unwrap_or(0);
                if ev & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
                    ep.progress_locked(&mut state)
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Connecting: writable (the connect completes); awaiting the response: readable;
    /// connected: only a hang-up (the data path reads the socket).
    fn wait_fds(&self, out: &mut Vec<FdInterest>) -> bool {
        let Some(ep) = self.0.upgrade() else {
            return true;
        };
        if !ep.active.load(Ordering::Acquire) {
            return true;
        }
        let watch = ep.cm_watch.load(Ordering::Acquire);
        if watch >= 0 {
            out.push(FdInterest::hangup(watch));
            return true;
        }
        let Ok(state) = ep.state.try_lock() else {
            return false;
        };
        let Some(fd) = state.sock.as_ref().map(Sock::fd) else {
            return true;
        };
        match state.conn {
            Conn::Connecting { .. } => out.push(FdInterest::write(fd)),
            Conn::AwaitResp { .. } => out.push(FdInterest::read(fd)),
            Conn::Connected => out.push(FdInterest::hangup(fd)),
            _ => {}
        }
        true
    }
}

impl EpInner {
    pub(super) fn progress_connect(&self, state: &mut EpState) -> usize {
        let Some(sock) = state.sock.as_ref() else {
            return 0;
        };
        match &mut state.conn {
            Conn::Connecting { req, sent } => {
                match sock.poll(libc::POLLOUT, 0) {
                    Ok(0) => return 0,
                    Ok(_) => {}
                    Err(e) => {
                        let code = Errno(crate::sock::os_code(&e));
                        self.connect_failed(state, code, Vec::new());
                        return 1;
                    }
                }
                if let Ok(Some(e)) | Err(e) = sock.take_error() {
                    let code = Errno(crate::sock::os_code(&e));
                    self.connect_failed(state, code, Vec::new());
                    return 1;
                }
                while *sent < req.len() {
                    // SAFETY: the request bytes are live for the call.
                    match unsafe {
                        sock.writev(&[iovec(req.as_ptr() as usize + *sent, req.len() - *sent)])
                    } {
                        Ok(n) => *sent += n,
                        Err(e) if would_block(&e) => return 1,
                        Err(e) => {
                            let code = Errno(crate::sock::os_code(&e));
                            self.connect_failed(state, code, Vec::new());
                            return 1;
                        }
                    }
                }
                state.conn = Conn::AwaitResp { buf: Vec::new() };
                1
            }
            Conn::AwaitResp { buf } => {
                let mut tmp = [0u8; CM_HDR_LEN + CM_DATA_SIZE];
                loop {
                    let need = if buf.len() < CM_HDR_LEN {
                        CM_HDR_LEN
                    } else {
                        match CmHdr::parse(buf) {
                            Ok(h) => CM_HDR_LEN + usize::from(h.data_len),
                            Err(e) => {
                                let code = if proto::is_foreign(&e) {
                                    Errno::ENOPROTOOPT
                                } else {
                                    Error::from(e).code()
                                };
                                self.connect_failed(state, code, Vec::new());
                                return 1;
                            }
                        }
                    };
                    if buf.len() >= need {
                        break;
                    }
                    match sock.recv(&mut tmp[..need - buf.len()]) {
                        Ok(0) => {
                            self.connect_failed(state, Errno::ECONNREFUSED, Vec::new());
                            return 1;
                        }
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        Err(e) if would_block(&e) => return 0,
                        Err(e) => {
                            let code = match e.raw_os_error() {
                                Some(libc::ECONNRESET) => Errno::ECONNREFUSED,
                                Some(c) => Errno(c),
                                None => Errno::EIO,
                            };
                            self.connect_failed(state, code, Vec::new());
                            return 1;
                        }
                    }
                }
                let (kind, data) = match CmHdr::parse(buf) {
                    Ok(h) => (h.kind, buf[CM_HDR_LEN..].to_vec()),
                    Err(_) => return 0,
                };
                match kind {
                    CmKind::ConnResp => {
                        state.conn = Conn::Connected;
                        self.on_connected(state);
                        if let Some(eq) = &state.b.eq {
                            let _ = eq.connected(self.fid, data);
                        }
                    }
                    CmKind::Reject => self.connect_failed(state, Errno::ECONNREFUSED, data),
                    CmKind::ConnReq => self.connect_failed(state, Errno::EPROTO, Vec::new()),
                }
                1
            }
            _ => 0,
        }
    }

    /// The connection is up: when both ends are on this host, switch to the local
    /// congestion control and offer the peer a same-host proof.
    pub(super) fn on_connected(&self, state: &mut EpState) {
        let Some(sock) = state.sock.as_ref() else {
            return;
        };
        self.cm_watch.store(sock.fd(), Ordering::Release);
        let (Ok(local), Ok(peer)) = (sock.local_addr(), sock.peer_addr()) else {
            return;
        };
        if !same_host(&local, &peer) {
            return;
        }
        if let Some(cc) = &self.dom.fabric.settings.local_congestion {
            if let Err(e) = sock.set_congestion(cc) {
                ofi_core::ofi_debug!(NAME, "ep_ctrl", "congestion control {cc}: {e}");
            }
        }
        if self.cma_threshold == usize::MAX {
            return;
        }
        state.local.eligible = true;
        let nonce = ofi_kit::cma::random_u64();
        state.local.offered = Some(nonce ^ process_key());
        let mut h = Hdr::new(Op::LocalOffer);
        h.data = nonce;
        EpInner::respond(state, h, Segs::default());
        if self.dom.engine.mode() == ofi_kit::progress::ProgressMode::Auto {
            self.dom.engine.kick();
        }
    }

    pub(super) fn connect_failed(&self, state: &mut EpState, code: Errno, data: Vec<u8>) {
        self.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = state.sock.take() {
            s.shutdown();
        }
        state.conn = Conn::Shutdown;
        self.active.store(false, Ordering::Release);
        if let Some(eq) = &state.b.eq {
            let _ = eq.conn_error(self.fid, code, data);
        }
        self.flush_all(state, Errno::ECONNREFUSED);
    }

    /// Tear the connection down and report.
    pub(super) fn fail(&self, state: &mut EpState, f: Fail) {
        self.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = state.sock.take() {
            s.shutdown();
        }
        state.conn = Conn::Shutdown;
        self.active.store(false, Ordering::Release);
        self.flush_all(state, Errno::ECONNRESET);
        if let Some(eq) = &state.b.eq {
            match f {
                Fail::Closed => {
                    let _ = eq.shutdown(self.fid);
                }
                Fail::Error(code, msg) => {
                    ofi_core::ofi_warn!(NAME, "ep_data", "connection closed: {msg}");
                    let _ = eq.conn_error(self.fid, code, Vec::new());
                }
            }
        }
    }

    /// Complete everything outstanding in error.
    pub(super) fn flush_all(&self, state: &mut EpState, code: Errno) {
        let tx: Vec<TxOp> = state.tx.drain(..).collect();
        for op in tx {
            if let Some(c) = op.comp {
                self.comp_err(&state.b, &c, code);
            }
        }
        let pend: Vec<Pending> = state.pending.drain(..).collect();
        for p in pend {
            self.comp_err(&state.b, &p.comp, code);
        }
        if let Rx::Body {
            sink: Sink::ReadRsp(p),
            ..
        } = std::mem::replace(&mut state.rx, Rx::Hdr { got: 0 })
        {
            self.comp_err(&state.b, &p.comp, code);
        }
        let posted: Vec<PostedRecv<RBuf>> = state.matcher.drain_posted().collect();
        for r in posted {
            EpInner::recv_canceled(&state.b, &r);
            if let Some(c) = state.b.counter(CounterKind::Recv) {
                c.inc_err();
            }
        }
    }
}
