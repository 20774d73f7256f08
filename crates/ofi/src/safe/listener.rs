//! [`Listener`]: the passive side of `FI_EP_MSG` connections (`fi_passive_ep`,
//! `fi_listen`, `FI_CONNREQ`, `fi_accept` / `fi_reject`). Every wait is bounded by the
//! caller's timeout (`FI_ETIMEDOUT`). Nothing here panics.

use std::time::Duration;

use super::addr::EpAddr;
use super::domain::{Domain, Fabric};
use super::ep::{eq_attr, eq_wait, Ep, EpBuilder};
use super::info::FabricInfo;
use super::kind::Msg;
use crate::ep::PassiveEndpoint;
use crate::eq::EventQueue;
use crate::{EqEvent, Errno, Error, Result};

/// A listening passive endpoint with its event queue.
#[derive(Debug)]
pub struct Listener {
    pep: PassiveEndpoint,
    eq: EventQueue,
    addr: EpAddr,
}

/// A connection request read by [`Listener::next_request`]: accept or reject it.
#[derive(Debug)]
pub struct ConnRequest {
    info: crate::Info,
    /// The data the client sent with its connect.
    pub cm_data: Vec<u8>,
}

impl Listener {
    /// Open a passive endpoint for `info` and listen.
    pub fn bind(fabric: &Fabric, info: &FabricInfo<Msg>) -> Result<Listener> {
        let eq = fabric.inner.eq_open(&eq_attr())?;
        let pep = fabric.inner.passive_ep(info.info())?;
        pep.bind_eq(&eq, 0)?;
        pep.listen()?;
        let addr = EpAddr::new(info.info().addr_format, pep.getname()?);
        Ok(Listener { pep, eq, addr })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> &EpAddr {
        &self.addr
    }

    /// The listener's event queue (`FI_CONNREQ` arrives there; it has a wait fd:
    /// `raw_eq().wait_fd()`).
    pub fn raw_eq(&self) -> &EventQueue {
        &self.eq
    }

    /// Wait up to `timeout` for the next connection request.
    pub fn next_request(&mut self, timeout: Duration) -> Result<ConnRequest> {
        let ev = eq_wait(&self.eq, EqEvent::ConnReq, timeout)?;
        let info = ev
            .info
            .ok_or_else(|| Error::new(Errno::EOTHER, "FI_CONNREQ without the request's info"))?;
        Ok(ConnRequest {
            info: *info,
            cm_data: ev.cm_data,
        })
    }

    /// Accept `req` on `domain` with connection data `cm_data`; wait up to `timeout`
    /// for the connection.
    pub fn accept(
        &mut self,
        domain: &Domain,
        req: ConnRequest,
        cm_data: &[u8],
        timeout: Duration,
    ) -> Result<Ep<Msg>> {
        EpBuilder::<Msg>::for_request(domain, req.info, 0, false).accept(cm_data, timeout)
    }

    /// Reject `req`, with data `cm_data` for the client.
    pub fn reject(&mut self, req: ConnRequest, cm_data: &[u8]) -> Result<()> {
        self.pep.reject(req.info.handle, cm_data)
    }
}
