//! The control calls of an endpoint (`fi_ep_bind`, `fi_enable`, `fi_cancel`,
//! `fi_getopt` / `fi_setopt`, the size-left queries, `fi_control` (`FI_GETOPSFLAG`,
//! `FI_SETOPSFLAG`, `FI_GETWAIT`), names, `fi_connect`, `fi_accept`, `fi_shutdown`,
//! close) and `endpoint_data_ops!`, which writes the data calls from
//! [`DataPath`] (in `datapath`).
//!
//! Invariants: binds are refused after `fi_enable` (or after `fi_connect` /
//! `fi_accept`, which enable); an endpoint is enabled only with an EQ and at least one
//! CQ; close clears the CM watch before the socket goes and unregisters the endpoint
//! from both progress engines.
//!
//! Nothing here panics on application input.

use super::*;

/// What an endpoint's binds accept beyond CQs and counters: its EQ (connection events).
const BIND_RULES: ofi_kit::ep::BindRules = ofi_kit::ep::BindRules {
    prov: NAME,
    eq: true,
};

impl Endpoint {
    /// The connection's socket descriptor, for `FI_GETWAIT`: readable when bytes of
    /// the peer wait on it (progress, a CQ read, takes them), writable while the
    /// kernel has room. It exists from `fi_connect` / `fi_accept` until the
    /// connection ends (`FI_EOPBADSTATE` otherwise).
    fn wait_fd(&self) -> Result<i32> {
        let state = lock(&self.inner.state);
        match &state.sock {
            Some(s) if state.conn != Conn::Shutdown => Ok(s.fd()),
            _ => Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_control(FI_GETWAIT): no connection (before fi_connect / fi_accept, or ended)"),
            )),
        }
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if state.enabled {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: bind after fi_enable"),
            ));
        }
        if let BindTarget::Av(_) = target {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: FI_EP_MSG endpoints take no address vector"),
            ));
        }
        state.b.bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        let mut state = lock(&self.inner.state);
        state.b.require_for_connected(NAME)?;
        state.enabled = true;
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let mut state = lock(&self.inner.state);
        match state.matcher.cancel(context) {
            Some(r) => {
                EpInner::recv_canceled(&state.b, &r);
                Ok(())
            }
            None => Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: no cancelable operation with this context"),
            )),
        }
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        if level == OPT_ENDPOINT && optname == OPT_MIN_MULTI_RECV {
            let v = lock(&self.inner.state).matcher.config().min_multi_recv;
            return ofi_kit::ep::put_size_opt(NAME, "FI_OPT_MIN_MULTI_RECV", optval, v);
        }
        cm_getopt(level, optname, optval)
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        if level == OPT_ENDPOINT && optname == OPT_MIN_MULTI_RECV {
            let v = ofi_kit::ep::take_size_opt(NAME, "FI_OPT_MIN_MULTI_RECV", optval)?;
            lock(&self.inner.state).matcher.set_min_multi_recv(v);
            return Ok(());
        }
        cm_setopt(level, optname, optval)
    }

    fn rx_size_left(&self) -> Result<usize> {
        let state = lock(&self.inner.state);
        Ok(state
            .matcher
            .config()
            .max_posted
            .saturating_sub(state.matcher.posted_len()))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let state = lock(&self.inner.state);
        Ok(self
            .inner
            .tx_size
            .saturating_sub(state.tx.len() + state.pending.len()))
    }

    /// `FI_GETOPSFLAG` / `FI_SETOPSFLAG` of this handle's default flags, and
    /// `FI_GETWAIT`: the connection's socket (`FI_EOPBADSTATE` before `fi_connect` /
    /// `fi_accept` made one, and after it is gone).
    unsafe fn control(&self, command: i32, arg: *mut c_void) -> Result<()> {
        // SAFETY: the caller's contract for `arg`, forwarded.
        let getwait =
            unsafe { ofi_kit::opflags::getwait_control(NAME, command, arg, || self.wait_fd()) };
        // SAFETY: as above.
        getwait.unwrap_or_else(|| unsafe {
            self.flags
                .endpoint_control(NAME, command, arg, <Self as DataPath>::OP_FLAGS)
        })
    }

    /// `fi_ep_alias`: the same connection and queues with their own default flags: a
    /// copy of this handle's, then one side set from `flags`. Closing the alias leaves
    /// the endpoint as it is.
    fn alias(&self, flags: u64) -> Result<Self> {
        Ok(Endpoint {
            inner: Arc::clone(&self.inner),
            cm: Arc::clone(&self.cm),
            flags: self
                .flags
                .alias(NAME, flags, <Self as DataPath>::OP_FLAGS)?,
            alias: true,
        })
    }

    /// `fi_setname` before the endpoint connects or accepts: the address its
    /// connection is made from (`FI_EOPBADSTATE` later).
    fn setname(&self, addr: &[u8]) -> Result<()> {
        let a = ip_name(addr)?;
        let mut state = lock(&self.inner.state);
        if state.conn != Conn::Idle {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_setname on a connecting or connected endpoint"),
            ));
        }
        state.name = Some(a);
        Ok(())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        let state = lock(&self.inner.state);
        if let Some(s) = &state.sock {
            if let Ok(a) = s.local_addr() {
                return Ok(Address::from(a).to_bytes());
            }
        }
        if let Some(a) = state.name {
            return Ok(Address::from(a).to_bytes());
        }
        // Not connected yet: the address the connection will be made from (its port is
        // chosen at connect time, so 0 unless the info named one).
        let a = bind_addr(&self.inner.dom.fabric, &self.inner.info)?;
        Ok(Address::from(a).to_bytes())
    }

    fn getpeer(&self) -> Result<Vec<u8>> {
        let state = lock(&self.inner.state);
        if !matches!(
            state.conn,
            Conn::Connected | Conn::Accepting | Conn::AwaitResp { .. }
        ) {
            return Err(Error::new(
                Errno::ENOTCONN,
                format!("{NAME}: not connected"),
            ));
        }
        // The socket's peer (the address actually reached, never a wildcard).
        let a = state
            .sock
            .as_ref()
            .and_then(|s| s.peer_addr().ok())
            .or(state.peer)
            .ok_or_else(|| Error::new(Errno::ENOTCONN, format!("{NAME}: not connected")))?;
        Ok(Address::from(a).to_bytes())
    }

    fn connect(&self, addr: &[u8], param: &[u8]) -> Result<()> {
        crate::fabric::check_cm_data("CM data", param)?;
        let peer = ip_name(addr)?;
        let mut state = lock(&self.inner.state);
        if !state.enabled {
            // fi_connect enables the endpoint implicitly when it is bound.
            ofi_kit::cm::bound_eq(NAME, state.b.eq.as_ref(), "fi_connect")?;
            state.enabled = true;
        }
        if state.conn != Conn::Idle {
            return Err(Error::new(
                Errno::EISCONN,
                format!("{NAME}: the endpoint is connecting or connected already"),
            ));
        }
        let sock = Sock::stream(&peer).map_err(|e| io_err("socket", e))?;
        let _ = sock.set_nodelay();
        // The endpoint's traffic class (checked when it opened).
        if let Ok(Some(d)) = ofi_core::control::endpoint_dscp(&self.inner.info) {
            sock.set_dscp(peer.is_ipv6(), d)
                .map_err(|e| io_err("traffic class", e))?;
        }
        let mut src_info = self.inner.info.clone();
        if src_info
            .src_addr
            .as_ref()
            .and_then(Address::socket_addr)
            .is_some_and(|a| a.is_ipv6() != peer.is_ipv6())
        {
            src_info.src_addr = None;
        }
        src_info.addr_format = if peer.is_ipv6() {
            AddrFormat::SOCKADDR_IN6
        } else {
            AddrFormat::SOCKADDR_IN
        };
        let src = match state.name {
            // The name fi_setname gave (the family must be the peer's).
            Some(a) if a.is_ipv6() != peer.is_ipv6() => {
                return Err(Error::new(
                    Errno::EINVAL,
                    format!("{NAME}: the endpoint's name {a} and the peer {peer} differ in family"),
                ))
            }
            Some(a) => a,
            None => bind_addr(&self.inner.dom.fabric, &src_info)?,
        };
        if !src.ip().is_unspecified() || src.port() != 0 {
            sock.bind(&src)
                .map_err(|e| io_err(&format!("bind {src}"), e))?;
        }
        sock.connect(&peer)
            .map_err(|e| io_err(&format!("connect {peer}"), e))?;
        state.sock = Some(sock);
        state.peer = Some(peer);
        state.conn = Conn::Connecting {
            req: proto::cm_message(CmKind::ConnReq, param),
            sent: 0,
        };
        self.inner.active.store(true, Ordering::Release);
        drop(state);
        self.inner.dom.fabric.cm_engine.kick();
        Ok(())
    }

    fn accept(&self, param: &[u8]) -> Result<()> {
        crate::fabric::check_cm_data("CM data", param)?;
        let mut state = lock(&self.inner.state);
        if state.conn != Conn::Accepting {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: fi_accept needs an endpoint opened from a connection request"),
            ));
        }
        ofi_kit::cm::bound_eq(NAME, state.b.eq.as_ref(), "fi_accept")?;
        state.enabled = true;
        let msg = proto::cm_message(CmKind::ConnResp, param);
        let r = match &state.sock {
            Some(s) => s.write_all_timeout(&msg, 2000),
            None => Err(io::Error::from(io::ErrorKind::NotConnected)),
        };
        if let Err(e) = r {
            self.inner
                .fail(&mut state, Fail::Error(Errno::ECONNABORTED, e.to_string()));
            return Err(io_err("accept", e));
        }
        state.conn = Conn::Connected;
        self.inner.on_connected(&mut state);
        self.inner.active.store(true, Ordering::Release);
        if let Some(eq) = &state.b.eq {
            let _ = eq.connected(self.inner.fid, Vec::new());
        }
        Ok(())
    }

    fn shutdown(&self, _flags: u64) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if matches!(state.conn, Conn::Idle | Conn::Shutdown) {
            return Err(Error::new(
                Errno::ENOTCONN,
                format!("{NAME}: not connected"),
            ));
        }
        // Write what is queued (bounded), then close.
        let _ = self.inner.flush(&mut state);
        self.inner.fail(&mut state, Fail::Closed);
        Ok(())
    }

    ofi_kit::endpoint_data_ops!();

    fn close(&self) -> Result<()> {
        if self.alias {
            return Ok(());
        }
        let mut state = lock(&self.inner.state);
        self.inner.cm_watch.store(-1, Ordering::Release);
        if let Some(s) = state.sock.take() {
            s.shutdown();
        }
        state.conn = Conn::Shutdown;
        self.inner.active.store(false, Ordering::Release);
        drop(state);
        self.inner.dom.engine.unregister(&self.inner);
        self.inner.dom.fabric.cm_engine.unregister(&self.cm);
        Ok(())
    }
}
