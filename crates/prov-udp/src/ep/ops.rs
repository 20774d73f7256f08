//! The endpoint's `fi_ops` ([`EndpointOps`]): bind, enable, options, names, multicast
//! join/leave; the nine message calls are kit's (`endpoint_data_ops!(msg)`, from the
//! endpoint's `DataPath` in `datapath`), the tagged, RMA and atomic calls keep
//! `EndpointOps`' defaults (`FI_ENOSYS`).
//!
//! Invariants: bindings are only accepted before `fi_enable` (`FI_EOPBADSTATE` after),
//! which freezes them into [`Active`]. Nothing here panics.

use super::*;

/// The operation flags udp's `fi_sendmsg` / `fi_recvmsg` implement (a datagram
/// completes once handed to the kernel: no delivery, commit or match completion, no
/// fence); `FI_MORE` passes as everywhere.
pub const OP_FLAGS: OpFlags = OpFlags::COMPLETION
    .union(OpFlags::INJECT)
    .union(OpFlags::REMOTE_CQ_DATA)
    .union(OpFlags::MULTICAST)
    .union(OpFlags::MULTI_RECV)
    .union(OpFlags::INJECT_COMPLETE)
    .union(OpFlags::TRANSMIT_COMPLETE);

const BIND_RULES: BindRules = BindRules {
    prov: NAME,
    eq: true,
};

impl EndpointOps<Fabric> for Endpoint {
    fn bind(&self, target: BindTarget<'_, Fabric>, flags: OpFlags) -> Result<()> {
        let me = &*self.inner;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_ep_bind after fi_enable"),
            ));
        }
        s.b.bind(target, flags, &BIND_RULES)
    }

    fn enable(&self) -> Result<()> {
        let me = &*self.inner;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Ok(());
        }
        let av = s.b.require_for_enable(NAME)?;
        let Some(sock) = s.sock.take() else {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: endpoint has no socket"),
            ));
        };
        let local = match sock.local_addr() {
            Ok(a) => a,
            Err(e) => {
                let err = os_error(&e, "getsockname");
                s.sock = Some(sock);
                return Err(err);
            }
        };
        let active = Active {
            sock,
            peers: PeerSocks::new(&me.settings, local, me.dscp),
            local,
            av,
            tx_cq: s.b.txcq.clone(),
            rx_cq: s.b.rxcq.clone(),
            tx_cntr: s.b.counter(ofi_kit::ep::CounterKind::Send).cloned(),
            rx_cntr: s.b.counter(ofi_kit::ep::CounterKind::Recv).cloned(),
            eq: s.b.eq.clone(),
        };
        if me.active.set(active).is_err() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: enabled twice"),
            ));
        }
        me.engine.kick();
        Ok(())
    }

    fn cancel(&self, context: usize) -> Result<()> {
        self.inner.cancel(context)
    }

    fn getopt(&self, level: i32, optname: i32, optval: &mut [u8]) -> Result<usize> {
        ofi_kit::ep::getopt_min_multi_recv(NAME, level, optname, optval, || {
            self.inner.min_multi_recv.load(Ordering::Relaxed)
        })
    }

    fn setopt(&self, level: i32, optname: i32, optval: &[u8]) -> Result<()> {
        let v = ofi_kit::ep::setopt_min_multi_recv(NAME, level, optname, optval)?;
        self.inner.min_multi_recv.store(v, Ordering::Relaxed);
        Ok(())
    }

    fn rx_size_left(&self) -> Result<usize> {
        self.inner.active()?;
        let n = lock(&self.inner.rx).len();
        Ok(self.inner.settings.rx_size.saturating_sub(n))
    }

    fn tx_size_left(&self) -> Result<usize> {
        let active = self.inner.active()?;
        Ok(match &active.tx_cq {
            Some(c) => c.cq.room().min(self.inner.settings.tx_size),
            None => self.inner.settings.tx_size,
        })
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        let me = &*self.inner;
        let a = Address::from_bytes(me.addr_format, addr)?;
        let sa = addr_to_std(&a)?;
        let mut s = lock(&me.setup);
        if me.active.get().is_some() {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_setname after fi_enable"),
            ));
        }
        s.sock = Some(open_sock(&me.settings, me.dscp, &sa)?);
        Ok(())
    }

    /// Joins the group on the socket (receiving what is sent to it, if the socket is
    /// bound to the wildcard address and the group's port) and inserts the group's
    /// address into the bound AV: the returned fabric address sends to the group.
    /// Needs an enabled endpoint (`FI_EOPBADSTATE`), a multicast address of the
    /// socket's family (`FI_EINVAL`); flags other than `FI_SEND`/`FI_RECV` are
    /// `FI_EBADFLAGS` (`FI_SEND` alone: send-only, no membership). Completes at once;
    /// with an EQ bound, `FI_JOIN_COMPLETE` (fid = the endpoint's context, with
    /// `context`) is queued.
    fn join(&self, addr: &Address, flags: u64, context: usize) -> Result<u64> {
        let me = &*self.inner;
        let Some(active) = me.active.get() else {
            return Err(Error::new(
                Errno::EOPBADSTATE,
                format!("{NAME}: fi_join before fi_enable"),
            ));
        };
        let known = OpFlags::SEND.bits() | OpFlags::RECV.bits();
        if flags & !known != 0 {
            return Err(Error::new(
                Errno::EBADFLAGS,
                format!(
                    "{NAME}: fi_join flags {:#x} are not supported",
                    flags & !known
                ),
            ));
        }
        let sa = addr_to_std(addr)?;
        if !sa.ip().is_multicast() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: fi_join: {sa} is not a multicast address"),
            ));
        }
        if sa.is_ipv6() != active.sock.is_v6() {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: fi_join: {sa} is not of the endpoint's address family"),
            ));
        }
        let member = flags != OpFlags::SEND.bits();
        let ifaddr = me
            .settings
            .mcast_if
            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        if member {
            active
                .sock
                .membership(&sa.ip(), ifaddr, 0, true)
                .map_err(|e| os_error(&e, &format!("fi_join {sa}")))?;
        }
        let key = me.to_address(sa);
        let inserted = active
            .av
            .insert(std::slice::from_ref(&key), 0, 0)
            .and_then(|mut r| r.pop().unwrap_or(Err(code(Errno::EOTHER))));
        let fi_addr = match inserted {
            Ok(a) => a,
            Err(e) => {
                if member {
                    let _ = active.sock.membership(&sa.ip(), ifaddr, 0, false);
                }
                return Err(e);
            }
        };
        lock(&me.groups).push((fi_addr, member));
        if let Some(eq) = &active.eq {
            let _ = eq.push(Event {
                event: EqEvent::JoinComplete,
                fid: me.context,
                context,
                data: 0,
                info: None,
                cm_data: Vec::new(),
            });
        }
        Ok(fi_addr)
    }

    /// Leaves the group joined as `fi_addr` and removes it from the AV.
    fn leave(&self, fi_addr: u64) -> Result<()> {
        let me = &*self.inner;
        let active = me.active()?;
        let member = {
            let mut g = lock(&me.groups);
            let Some(i) = g.iter().position(|(a, _)| *a == fi_addr) else {
                return Err(Error::new(
                    Errno::ENOENT,
                    format!("{NAME}: {fi_addr:#x} is not a joined group"),
                ));
            };
            g.remove(i).1
        };
        let sa = addr_to_std(&active.av.lookup(fi_addr)?)?;
        if member {
            let ifaddr = me
                .settings
                .mcast_if
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
            if let Err(e) = active.sock.membership(&sa.ip(), ifaddr, 0, false) {
                ofi_core::ofi_warn!(NAME, "ep_ctrl", "leaving {sa}: {e}");
            }
        }
        active.av.remove(&[fi_addr], 0)
    }

    /// The bound address; bound to the wildcard address, the address a peer reaches
    /// it at instead: `FI_UDP_IFACE`'s, else the first up non-loopback interface's
    /// (loopback only when there is no other), with the bound port.
    fn getname(&self) -> Result<Vec<u8>> {
        let mut sa = self.inner.local_addr()?;
        if sa.ip().is_unspecified() {
            let v6 = sa.is_ipv6();
            let ip = match &self.inner.settings.iface {
                Some(i) => crate::iface_ip(i, v6)?,
                None => None,
            };
            sa.set_ip(ip.unwrap_or_else(|| ofi_kit::netif::default_ip(v6)));
        }
        Ok(self.inner.to_address(sa).to_bytes())
    }

    /// `FI_GETOPSFLAG` / `FI_SETOPSFLAG` of the endpoint's default flags, and
    /// `FI_GETWAIT`: a descriptor readable while a datagram waits on one of the
    /// endpoint's sockets (`FI_EOPBADSTATE` before `fi_enable`; see `ep::wait`).
    unsafe fn control(&self, command: i32, arg: *mut std::ffi::c_void) -> Result<()> {
        // SAFETY: the caller's contract for `arg`, forwarded.
        let getwait = unsafe {
            ofi_kit::opflags::getwait_control(NAME, command, arg, || self.inner.wait_fd())
        };
        // SAFETY: as above.
        getwait.unwrap_or_else(|| unsafe {
            self.op_flags.endpoint_control(NAME, command, arg, OP_FLAGS)
        })
    }

    /// `fi_ep_alias`: the same socket and queues with their own default flags: a copy
    /// of this handle's, then one side set from `flags`. Closing the alias leaves the
    /// endpoint as it is.
    fn alias(&self, flags: u64) -> Result<Self> {
        Ok(Endpoint {
            inner: Arc::clone(&self.inner),
            op_flags: self.op_flags.alias(NAME, flags, OP_FLAGS)?,
            alias: true,
        })
    }

    ofi_kit::endpoint_data_ops!(msg);

    /// Stops progress on the endpoint and forgets its posted receives (their buffers
    /// are the application's again; no completions are generated).
    fn close(&self) -> Result<()> {
        if self.alias {
            return Ok(());
        }
        self.inner.engine.unregister(&self.inner);
        lock(&self.inner.rx).clear();
        Ok(())
    }
}
