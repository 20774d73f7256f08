//! The control calls of an endpoint: binds, enable, CM (`fi_connect`, `fi_accept`,
//! `fi_shutdown`, names), size-left queries, close, and the data calls from
//! [`ofi_kit::dataops::DataPath`] (in `post`).
//!
//! Invariants: binds are refused after `fi_enable`; an endpoint is enabled only with an
//! EQ and a CQ; close unroutes the connection and unregisters the endpoint from the
//! domain's engine. Nothing here panics on application input.

use std::net::SocketAddr;

use ofi_core::provider::{BindTarget, EndpointOps};
use ofi_core::{AddrFormat, Address, Errno, Error, OpFlags, Result};
use ofi_rdma::CmChannel;

use super::{lock, Conn, Endpoint};
use crate::fabric::Fabric;
use crate::NAME;

/// What an endpoint's binds accept beyond CQs, counters and an AV: its EQ (connection
/// events).
const BIND_RULES: ofi_kit::ep::BindRules = ofi_kit::ep::BindRules {
    prov: NAME,
    eq: true,
};

fn bad(code: Errno, what: &str) -> Error {
    Error::new(code, format!("{NAME}: {what}"))
}

impl Endpoint {
    /// `fi_enable` of a datagram endpoint: an AV and a CQ or counter bound; the UD
    /// queue pair to RTS and every bounce buffer posted.
    fn enable_datagram(&self) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if state.enabled {
            return Ok(());
        }
        state.b.require_for_enable(NAME)?;
        let qp = self.inner.qp()?;
        qp.datagram_ready(None)?;
        if let Some(u) = &state.ud {
            u.post_all(qp, super::RX_BIT)?;
        }
        state.conn = Conn::Connected;
        self.mark_enabled(state);
        Ok(())
    }

    /// What `fi_connect` and `fi_accept` check first: a connected (not datagram)
    /// endpoint, and CM data within what the connection manager carries with the call
    /// (`max_of` reads that limit from the channel).
    fn check_cm_call(&self, param: &[u8], max_of: impl Fn(&CmChannel) -> usize) -> Result<()> {
        if self.inner.dgram {
            return Err(bad(Errno::ENOSYS, "FI_EP_DGRAM endpoints do not connect"));
        }
        let max = max_of(&self.inner.dom.fabric.hub.channel);
        if param.len() > max {
            return Err(bad(
                Errno::EINVAL,
                &format!("CM data of {} bytes (at most {max})", param.len()),
            ));
        }
        Ok(())
    }

    /// Marks the endpoint enabled and, the first time, registers it with the domain's
    /// progress engine (after releasing the endpoint's lock).
    fn mark_enabled(&self, mut state: std::sync::MutexGuard<'_, super::EpState>) {
        state.enabled = true;
        if !state.registered {
            state.registered = true;
            drop(state);
            self.inner.dom.engine.register(&self.inner);
        }
    }
}

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if state.enabled {
            return Err(bad(Errno::EOPBADSTATE, "bind after fi_enable"));
        }
        match target {
            BindTarget::Av(_) if !self.inner.dgram => Err(bad(
                Errno::EINVAL,
                "FI_EP_MSG endpoints take no address vector",
            )),
            BindTarget::Srx(srx) => {
                if self.inner.dgram || self.inner.srq.is_some() {
                    return Err(bad(
                        Errno::ENOSYS,
                        "shared receive contexts bind to FI_EP_MSG endpoints only",
                    ));
                }
                if srx.inner.srq.is_none() {
                    return Err(bad(Errno::EINVAL, "not a shared receive context"));
                }
                if !std::sync::Arc::ptr_eq(&srx.inner.dom, &self.inner.dom) {
                    return Err(bad(
                        Errno::EINVAL,
                        "a shared receive context of another domain",
                    ));
                }
                if state.srx.is_some() {
                    return Err(bad(
                        Errno::EINVAL,
                        "a shared receive context is already bound",
                    ));
                }
                state.srx = Some(srx.inner.clone());
                Ok(())
            }
            target => state.b.bind(target, flags, &BIND_RULES),
        }
    }

    fn enable(&self) -> Result<()> {
        if self.inner.dgram {
            return self.enable_datagram();
        }
        if self.inner.srq.is_some() {
            // A shared receive context is usable from its creation.
            return Ok(());
        }
        let state = lock(&self.inner.state);
        state.b.require_for_connected(NAME)?;
        let srq = state.srx.as_ref().and_then(|x| x.srq.as_ref());
        self.inner.create_qp(srq)?;
        self.mark_enabled(state);
        Ok(())
    }

    fn rx_size_left(&self) -> Result<usize> {
        let state = lock(&self.inner.state);
        Ok(state.ud.as_ref().map_or(state.rx.left(), |u| u.left()))
    }

    fn cancel(&self, context: usize) -> Result<()> {
        if self.inner.dgram {
            return self.inner.cancel_datagram_recv(context);
        }
        // An RC queue pair cannot take back a posted receive (as C's verbs provider).
        Err(bad(
            Errno::ENOSYS,
            "a receive posted to an RC queue pair cannot be cancelled",
        ))
    }

    fn tx_size_left(&self) -> Result<usize> {
        Ok(lock(&self.inner.state).tx.left())
    }

    fn getname(&self) -> Result<Vec<u8>> {
        if self.inner.dgram {
            let lid = self.inner.dom.ctx.query_port(1)?.lid;
            return Ok(super::ud::encode_name(
                &self.inner.dom.gid,
                self.inner.qp()?.qp_num(),
                lid,
            ));
        }
        Ok(Address::from(crate::cm::listen_addr(&self.inner.info)).to_bytes())
    }

    fn getpeer(&self) -> Result<Vec<u8>> {
        if self.inner.dgram {
            return Err(bad(Errno::ENOSYS, "FI_EP_DGRAM endpoints have no peer"));
        }
        match lock(&self.inner.state).peer {
            Some(a) => Ok(Address::from(a).to_bytes()),
            None => Err(bad(Errno::ENOTCONN, "not connected")),
        }
    }

    fn connect(&self, addr: &[u8], param: &[u8]) -> Result<()> {
        self.check_cm_call(param, |c| c.connect_private_max())?;
        let fmt = match addr.len() {
            16 => AddrFormat::SOCKADDR_IN,
            28 => AddrFormat::SOCKADDR_IN6,
            n => return Err(bad(Errno::EINVAL, &format!("a {n}-byte address"))),
        };
        let peer: SocketAddr = Address::from_bytes(fmt, addr)?
            .socket_addr()
            .ok_or_else(|| bad(Errno::EINVAL, "not an IP address"))?;
        self.enable()?;
        let mut state = lock(&self.inner.state);
        if state.conn != Conn::Idle {
            return Err(bad(Errno::EISCONN, "already connecting or connected"));
        }
        let hub = &self.inner.dom.fabric.hub;
        let id = hub
            .channel
            .connect(peer, &self.inner.cm_peer(param)?, self.inner.qp()?)
            .map_err(|e| {
                if e.code() == Errno::ENOENT {
                    Error::new(Errno::ECONNREFUSED, e.to_string())
                } else {
                    e
                }
            })?;
        hub.route_conn(id, &self.inner);
        state.conn_id = Some(id);
        state.conn = Conn::Connecting;
        state.peer = Some(peer);
        Ok(())
    }

    fn accept(&self, param: &[u8]) -> Result<()> {
        self.check_cm_call(param, |c| c.accept_private_max())?;
        let Some(id) = self.inner.handle else {
            return Err(bad(
                Errno::EINVAL,
                "fi_accept needs an endpoint opened with a connection request's info",
            ));
        };
        self.enable()?;
        let mut state = lock(&self.inner.state);
        if state.conn != Conn::Idle {
            return Err(bad(Errno::EISCONN, "already connecting or connected"));
        }
        let hub = &self.inner.dom.fabric.hub;
        let Some(peer) = hub.take_pending(id) else {
            return Err(bad(Errno::EINVAL, "no pending connection request"));
        };
        if !hub.channel.drives_qp() {
            self.inner.connect_qp(&peer)?;
        }
        hub.route_conn(id, &self.inner);
        state.conn_id = Some(id);
        state.conn = Conn::Accepting;
        if peer.source.is_some() {
            state.peer = peer.source;
        }
        hub.channel
            .accept(id, &self.inner.cm_peer(param)?, self.inner.qp()?)
    }

    fn shutdown(&self, _flags: u64) -> Result<()> {
        if self.inner.dgram {
            return Err(bad(Errno::ENOSYS, "FI_EP_DGRAM endpoints do not connect"));
        }
        let mut state = lock(&self.inner.state);
        if matches!(state.conn, Conn::Idle | Conn::Shutdown) {
            return Err(bad(Errno::ENOTCONN, "not connected"));
        }
        if let Some(id) = state.conn_id {
            let _ = self.inner.dom.fabric.hub.channel.disconnect(id);
        }
        if state.conn == Conn::Connected {
            self.inner.shut(&mut state);
        } else {
            state.conn = Conn::Shutdown;
            self.inner.to_error();
        }
        Ok(())
    }

    ofi_kit::endpoint_data_ops!();

    fn close(&self) -> Result<()> {
        let mut state = lock(&self.inner.state);
        if let Some(id) = state.conn_id.take() {
            let hub = &self.inner.dom.fabric.hub;
            let _ = hub.channel.disconnect(id);
            hub.unroute_conn(id);
        }
        state.conn = Conn::Shutdown;
        state.enabled = false;
        drop(state);
        self.inner.dom.engine.unregister(&self.inner);
        Ok(())
    }
}
