//! The receive path: the queue of posted receives, progress filling them from the
//! sockets, their completions, and cancel.
//!
//! Invariants: the queue is only touched under `EpInner::rx`; progress only
//! `try_lock`s it (concurrent drivers never wait on each other) and reads a socket only
//! while a receive is posted and its CQ has room. A datagram whose header does not
//! parse is dropped and counted, the receive stays posted. Nothing here panics.

use super::*;

/// One datagram taken for a posted receive, as its completion reports it.
struct Arrival<'a> {
    /// The receive's context.
    ctx: usize,
    /// The receive's operation flags (`FI_COMPLETION` for selective completion).
    op_flags: OpFlags,
    /// The completion's flags.
    cflags: u64,
    /// Where the payload starts.
    buf: *mut libc::c_void,
    /// Payload bytes placed in the buffer.
    len: usize,
    /// Payload bytes the datagram carried (more than `len`: truncated).
    payload: usize,
    /// Remote CQ data (0 if none).
    data: u64,
    /// The sender's socket address.
    src: &'a SockAddr,
}

impl EpInner {
    /// Queue a receive (on an enabled endpoint: `_active`).
    pub(super) fn post_recv(
        &self,
        _active: &Active,
        iov: UserIov,
        context: usize,
        flags: OpFlags,
    ) -> Result<()> {
        let multi = flags.contains(OpFlags::MULTI_RECV);
        if multi && iov.n != 1 {
            return Err(Error::new(
                Errno::EINVAL,
                format!("{NAME}: FI_MULTI_RECV takes exactly one buffer"),
            ));
        }
        {
            let mut q = lock(&self.rx);
            if q.len() >= self.settings.rx_size {
                return Err(code(Errno::EAGAIN));
            }
            q.push_back(Posted {
                iov,
                context,
                flags,
                multi,
                offset: 0,
                min_multi: self.min_multi_recv.load(Ordering::Relaxed),
            });
        }
        self.engine.kick();
        if self.unwatched.load(Ordering::SeqCst) && self.unwatched.swap(false, Ordering::SeqCst) {
            self.hub.wake();
        }
        Ok(())
    }

    /// Report a received datagram (or its failure) for the receive `a.ctx`.
    fn complete_recv(&self, active: &Active, a: Arrival<'_>) {
        let Arrival {
            ctx,
            op_flags,
            cflags,
            buf,
            len,
            payload,
            data,
            src,
        } = a;
        let (src_addr, src_a) = if self.source {
            self.source_of(active, src)
        } else {
            (ADDR_NOTAVAIL, None)
        };
        let err = if payload > len {
            Some((Errno::ETRUNC, payload - len, Vec::new()))
        } else if self.source_err && src_addr == ADDR_NOTAVAIL {
            let bytes = src_a.map(|a| a.to_bytes()).unwrap_or_default();
            Some((Errno::EADDRNOTAVAIL, 0, bytes))
        } else {
            None
        };
        match err {
            Some((errno, olen, err_data)) => {
                if let Some(c) = &active.rx_cq {
                    let _ = c.cq.push_err(CqError {
                        op_context: ctx,
                        flags: cflags,
                        len,
                        buf: buf as usize,
                        data,
                        tag: 0,
                        olen,
                        err: errno,
                        prov_errno: 0,
                        err_data,
                    });
                }
                if let Some(c) = &active.rx_cntr {
                    c.inc_err();
                }
            }
            None => {
                if let Some(c) = &active.rx_cq {
                    if c.wants(op_flags) {
                        let e = CqTaggedEntry {
                            op_context: ctx,
                            flags: cflags,
                            len,
                            buf,
                            data,
                            tag: 0,
                        };
                        let _ = c.cq.push(&e, src_addr);
                    }
                }
                if let Some(c) = &active.rx_cntr {
                    c.inc();
                }
            }
        }
    }

    /// One progress round: fill posted receives from the sockets (bounded batch).
    ///
    /// Without peer sockets, the endpoint's socket. With them, the socket that gave
    /// the last datagram ("hot") every round, and one other (round robin) after a gap
    /// that is one round while the others bring datagrams and doubles, up to
    /// [`MAX_OTHER_GAP`], each time the one read was empty: a read of an idle socket is
    /// a system call that finds nothing. A datagram on another socket while the hot one
    /// had none makes it the hot one.
    pub(super) fn poll_rx(&self) -> usize {
        let Some(active) = self.active.get() else {
            return 0;
        };
        let mut q = match self.rx.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return 0,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let peers = active.peers.live();
        if peers.is_empty() {
            return self.poll_sock(active, &mut q, &active.sock).0;
        }
        // Socket 0 is the endpoint's, 1.. the peer sockets (slots whose socket could
        // not be made are skipped by `sock_at`).
        let count = peers.len() + 1;
        let sock_at = |i: usize| -> Option<&UdpSock> {
            if i == 0 {
                Some(&active.sock)
            } else {
                peers
                    .get(i - 1)
                    .and_then(OnceLock::get)
                    .and_then(|p| p.sock.as_ref())
            }
        };
        let hot = self.rx_hot.load(Ordering::Relaxed) % count;
        let (work, stop) = match sock_at(hot) {
            Some(sock) => self.poll_sock(active, &mut q, sock),
            None => (0, Stop::Empty),
        };
        if stop == Stop::NoReceive {
            return work;
        }
        let wait = self.rx_wait.load(Ordering::Relaxed);
        if wait > 0 {
            self.rx_wait.store(wait - 1, Ordering::Relaxed);
            return work;
        }
        let mut other = self.rx_rr.load(Ordering::Relaxed);
        let mut found = 0;
        for _ in 0..count {
            other = (other + 1) % count;
            if other == hot {
                continue;
            }
            if let Some(sock) = sock_at(other) {
                found = self.poll_sock(active, &mut q, sock).0;
                if found > 0 && work == 0 {
                    self.rx_hot.store(other, Ordering::Relaxed);
                }
                break;
            }
        }
        self.rx_rr.store(other, Ordering::Relaxed);
        let gap = if found > 0 {
            1
        } else {
            (self.rx_gap.load(Ordering::Relaxed) * 2).clamp(1, MAX_OTHER_GAP)
        };
        self.rx_gap.store(gap, Ordering::Relaxed);
        self.rx_wait.store(gap - 1, Ordering::Relaxed);
        work + found
    }

    /// Fill posted receives from `sock` (at most `batch` datagrams); the work done and
    /// why it stopped.
    fn poll_sock(
        &self,
        active: &Active,
        q: &mut VecDeque<Posted>,
        sock: &UdpSock,
    ) -> (usize, Stop) {
        let mut work = 0;
        let mut rounds = 0;
        let mut refused = false;
        while rounds < self.settings.batch {
            rounds += 1;
            let Some(p) = q.front_mut() else {
                return (work, Stop::NoReceive);
            };
            if let Some(c) = &active.rx_cq {
                if !c.cq.has_room() {
                    return (work, Stop::NoReceive);
                }
            }
            let mut hdr = [0u8; HDR_LEN];
            let (mut vecs, n) = p.iov.with_header(hdr.as_mut_ptr());
            let region_len;
            if p.multi {
                let room = p.iov.total - p.offset;
                // SAFETY: offset ≤ total, so the pointer stays inside the buffer.
                let base = unsafe { p.iov.v[0].iov_base.cast::<u8>().add(p.offset) };
                vecs[1] = libc::iovec {
                    iov_base: base.cast(),
                    iov_len: room,
                };
                region_len = room;
                if room < MAX_MSG_SIZE {
                    let mut peek = [libc::iovec {
                        iov_base: hdr.as_mut_ptr().cast(),
                        iov_len: HDR_LEN,
                    }];
                    // SAFETY: the iovec points at `hdr` on this frame.
                    match unsafe { sock.recv_from(&mut peek, true) } {
                        Ok((len, _)) if len >= HDR_LEN && len - HDR_LEN > room => {
                            // Does not fit: release this buffer; the datagram goes
                            // to the next receive.
                            let ctx = p.context;
                            let flags = p.flags;
                            q.pop_front();
                            if let Some(c) = &active.rx_cq {
                                if c.wants(flags) {
                                    let e = CqTaggedEntry {
                                        op_context: ctx,
                                        flags: RECV_FLAGS | OpFlags::MULTI_RECV.bits(),
                                        len: 0,
                                        buf: base.cast(),
                                        data: 0,
                                        tag: 0,
                                    };
                                    let _ = c.cq.push(&e, ADDR_NOTAVAIL);
                                }
                            }
                            work += 1;
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            return (work, Stop::Empty)
                        }
                        Err(e) if is_refused(&e) && !refused => {
                            refused = true;
                            rounds -= 1;
                            continue;
                        }
                        Err(e) => {
                            ofi_core::ofi_debug!(NAME, "ep_data", "recvmsg (peek): {e}");
                            return (work, Stop::Empty);
                        }
                    }
                }
            } else {
                region_len = p.iov.total;
            }
            let used = if p.multi { 2 } else { n };
            let r = if !p.multi && region_len <= SMALL_RECV {
                // Small receive: one recvfrom into a stack buffer, then a copy of at most
                // SMALL_RECV bytes (cheaper than recvmsg's header and vector imports).
                let mut b = [0u8; HDR_LEN + SMALL_RECV];
                sock.recv_into(&mut b[..HDR_LEN + region_len], self.source)
                    .map(|(len, src)| {
                        let got = len.min(HDR_LEN + region_len);
                        let h = got.min(HDR_LEN);
                        hdr[..h].copy_from_slice(&b[..h]);
                        // SAFETY: the posted iovecs are the application's buffers, valid
                        // for writing until this receive completes (caller's contract).
                        unsafe { p.iov.scatter(&b[h..got]) };
                        (len, src)
                    })
            } else {
                // SAFETY: the iovecs point at `hdr` and at the posted application
                // buffers, which stay valid until this receive completes (caller's
                // contract).
                unsafe { sock.recv_from(&mut vecs[..used], false) }
            };
            let (len, src) = match r {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (work, Stop::Empty),
                // A peer socket's report of an ICMP "port unreachable" for an earlier
                // datagram (reading it clears it): look again, once.
                Err(e) if is_refused(&e) && !refused => {
                    refused = true;
                    rounds -= 1;
                    continue;
                }
                Err(e) => {
                    ofi_core::ofi_debug!(NAME, "ep_data", "recvmsg: {e}");
                    return (work, Stop::Empty);
                }
            };
            work += 1;
            let h = match Header::from_bytes(&hdr[..len.min(HDR_LEN)]) {
                Ok(h) => h,
                Err(e) => {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                    ofi_core::ofi_debug!(
                        NAME,
                        "ep_data",
                        "dropped a malformed datagram from {src:?}: {e}"
                    );
                    continue;
                }
            };
            let payload = len - HDR_LEN;
            let got = payload.min(region_len);
            let buf = vecs[1].iov_base;
            let mut cflags = RECV_FLAGS;
            let data = match h.cq_data() {
                Some(d) => {
                    cflags |= OpFlags::REMOTE_CQ_DATA.bits();
                    d
                }
                None => 0,
            };
            let (ctx, op_flags) = (p.context, p.flags);
            let release = if p.multi {
                p.offset += got;
                p.iov.total - p.offset < p.min_multi
            } else {
                true
            };
            if p.multi && release {
                cflags |= OpFlags::MULTI_RECV.bits();
            }
            if release {
                q.pop_front();
            }
            self.complete_recv(
                active,
                Arrival {
                    ctx,
                    op_flags,
                    cflags,
                    buf,
                    len: got,
                    payload,
                    data,
                    src: &src,
                },
            );
        }
        (work, Stop::Budget)
    }

    pub(super) fn cancel(&self, context: usize) -> Result<()> {
        let p = {
            let mut q = lock(&self.rx);
            match q.iter().position(|p| p.context == context) {
                Some(i) => q.remove(i),
                None => None,
            }
        };
        let Some(p) = p else {
            return Err(Error::new(
                Errno::ENOENT,
                format!("{NAME}: no queued operation has this context"),
            ));
        };
        if let Some(c) = self.active.get().and_then(|a| a.rx_cq.as_ref()) {
            let mut flags = RECV_FLAGS;
            if p.multi {
                flags |= OpFlags::MULTI_RECV.bits();
            }
            let mut e = CqError::new(context, Errno::ECANCELED);
            e.flags = flags;
            e.buf = p.iov.first_base() as usize;
            let _ = c.cq.push_err(e);
        }
        Ok(())
    }
}
