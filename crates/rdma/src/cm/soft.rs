//! Connection management for the software device: the exchange rdma_cm performs on
//! hardware (connect request with the requester's queue pair and private data; accept
//! with the responder's; ready-to-use; reject; disconnect), so that RC queue pairs of
//! two processes find each other by a socket address, as `FI_EP_MSG` endpoints do.
//!
//! Every endpoint of the exchange is a `SOCK_SEQPACKET` unix socket in the software
//! device's directory: a listener for address `ip:port` is bound at `cm-<ip>-<port>`.
//! A [`SoftCm`] is driven by its user (no thread): [`SoftCm::get_event`] reads
//! whatever arrived and returns the next event; [`SoftCm::fd`] (an epoll fd) is
//! readable while a socket of the channel has something to read, so the channel can
//! sit in a wait set. A peer whose process ends (its sockets close) gives
//! [`CmEventKind::Disconnected`] for each connection it had.
//!
//! Each message is one packet in kit's wire convention (`ofi_kit::wire`): a header
//! ([`MsgView`], [`msg_field`]: type, the sender's queue pair number and GID, the
//! private data's length), the private data, then optionally the sender's source
//! address ([`AddrView`], [`addr_field`]), all little endian.
//!
//! Peer input is never trusted: a message shorter than its header, with a private-data
//! length beyond what it carries, or of an unknown type is dropped; a message that
//! does not fit the connection's state is ignored. Nothing here panics on peer input.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ofi_core::{Errno, Error, Result};

use super::{
    check_private_data, CmEvent, CmEventKind, CmPeer, ACCEPT_PRIVATE_MAX, CONNECT_PRIVATE_MAX,
};
use crate::soft::conn;
use crate::soft::cq::lock;
use crate::verbs::Gid;

ofi_kit::wire_enum! {
    /// A message's type (the exchange rdma_cm's messages make).
    enum MsgKind: u8 {
        /// Connect request: the requester's queue pair and private data.
        Req = 1,
        /// Accept: the responder's queue pair and private data.
        Rep = 2,
        /// Ready to use: the requester took the accept.
        Rtu = 3,
        /// Reject: the responder's private data.
        Rej = 4,
        /// Disconnect.
        Dreq = 5,
    }
}

/// Bytes of a message's header.
const HDR: usize = 26;
/// The optional source address after the private data: family, 16 bytes, port.
const ADDR_TRAILER: usize = 19;

ofi_kit::wire_header! {
    /// A checked view of a message: the header, then the private data and the optional
    /// source-address trailer ([`AddrView`]).
    struct MsgView;
    endian: little;
    len: HDR;
    /// Where each field of a message's header lies.
    mod msg_field {
        /// The message type ([`MsgKind`]).
        KIND: u8 = 0..1 => kind, set_kind;
        /// Reserved, zero.
        RESERVED: [u8; 3] = 1..4 => reserved, set_reserved;
        /// The sender's queue pair number (`Req`, `Rep`; zero in the others).
        QPN: u32 = 4..8 => qpn, set_qpn;
        /// The GID of the sender's queue pair (`Req`, `Rep`; zero in the others).
        GID: [u8; 16] = 8..24 => gid, set_gid;
        /// Bytes of private data after the header.
        PRIVATE_LEN: u16 = 24..26 => private_len, set_private_len;
    }
}

ofi_kit::wire_header! {
    /// A checked view of the source-address trailer after a message's private data.
    struct AddrView;
    endian: little;
    len: ADDR_TRAILER;
    /// Where each field of the source-address trailer lies.
    mod addr_field {
        /// 4 (an IPv4 address, mapped into `IP`) or 6.
        FAMILY: u8 = 0..1 => family, set_family;
        /// The address, as IPv6 (IPv4-mapped for family 4).
        IP: [u8; 16] = 1..17 => ip, set_ip;
        /// The port.
        PORT: u16 = 17..19 => port, set_port;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Connector: request sent, waiting for the answer.
    ReqSent,
    /// Acceptor: request received, not yet answered.
    ReqReceived,
    /// Acceptor: accepted, waiting for ready-to-use.
    RepSent,
    Established,
    Closed,
}

struct Connection {
    fd: OwnedFd,
    state: State,
    peer: Option<CmPeer>,
    /// The listener a request arrived at (0 on the connecting side).
    listener: u64,
}

struct Listener {
    fd: OwnedFd,
    path: PathBuf,
}

#[derive(Default)]
struct Inner {
    listeners: HashMap<u64, Listener>,
    conns: HashMap<u64, Connection>,
    by_fd: HashMap<RawFd, u64>,
    events: VecDeque<CmEvent>,
    next_id: u64,
}

/// The software device's channel: listeners and connections with their events.
pub(crate) struct SoftCm {
    epfd: OwnedFd,
    dir: PathBuf,
    inner: Mutex<Inner>,
}

fn cm_path(dir: &Path, addr: &SocketAddr) -> PathBuf {
    dir.join(format!("cm-{}-{}", addr.ip(), addr.port()))
}

fn encode(kind: MsgKind, peer: Option<&CmPeer>, private_data: &[u8]) -> Vec<u8> {
    let pd = peer.map_or(private_data, |p| &p.private_data);
    let mut v = MsgView::with_payload(pd);
    v.set_kind(kind as u8);
    if let Some(p) = peer {
        v.set_qpn(p.qpn);
        v.set_gid(p.gid.0);
    }
    v.set_private_len(pd.len() as u16);
    let mut m = v.into_inner();
    if let Some(a) = peer.and_then(|p| p.source) {
        encode_addr(&mut m, &a);
    }
    m
}

/// Appends the source address trailer: family (4 or 6), 16 address bytes, port.
fn encode_addr(m: &mut Vec<u8>, a: &SocketAddr) {
    let (family, ip) = match a.ip() {
        std::net::IpAddr::V4(v4) => (4u8, v4.to_ipv6_mapped().octets()),
        std::net::IpAddr::V6(v6) => (6u8, v6.octets()),
    };
    let mut t = AddrView::zeroed();
    t.set_family(family);
    t.set_ip(ip);
    t.set_port(a.port());
    m.extend_from_slice(&t.into_inner());
}

/// Parses the source address trailer; `None` when absent or malformed.
fn decode_addr(t: &[u8]) -> Option<SocketAddr> {
    let t = AddrView::new_checked(t).ok()?;
    let v6 = std::net::Ipv6Addr::from(t.ip());
    let ip = match t.family() {
        4 => std::net::IpAddr::V4(v6.to_ipv4_mapped()?),
        6 => std::net::IpAddr::V6(v6),
        _ => return None,
    };
    Some(SocketAddr::new(ip, t.port()))
}

/// Parses a message: type, queue pair, GID, private data, source address; `None` when
/// it is shorter than its header says or of an unknown type.
fn decode(m: &[u8]) -> Option<(MsgKind, CmPeer)> {
    let v = MsgView::new_checked(m).ok()?;
    let len = usize::from(v.private_len());
    let pd = v.payload().get(..len)?;
    Some((
        MsgKind::from_wire(v.kind())?,
        CmPeer {
            gid: Gid(v.gid()),
            qpn: v.qpn(),
            private_data: pd.to_vec(),
            source: v.payload().get(len..).and_then(decode_addr),
        },
    ))
}

fn send_msg(fd: RawFd, m: &[u8]) -> Result<()> {
    // SAFETY: sends our own buffer; MSG_NOSIGNAL keeps a closed peer from raising SIGPIPE.
    let r = unsafe {
        libc::send(
            fd,
            m.as_ptr().cast(),
            m.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        return Err(Error::from(std::io::Error::last_os_error()).context("connection manager"));
    }
    Ok(())
}

impl SoftCm {
    /// A new channel (in the software device's socket directory).
    pub(crate) fn new() -> Result<SoftCm> {
        // SAFETY: plain syscall.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(SoftCm {
            // SAFETY: a new fd we own.
            epfd: unsafe { OwnedFd::from_raw_fd(ep) },
            dir: conn::socket_dir(),
            inner: Mutex::new(Inner {
                next_id: 1,
                ..Inner::default()
            }),
        })
    }

    /// The fd: readable while a socket of the channel has input (call
    /// [`SoftCm::get_event`] then). Events already taken in are not signalled by it.
    pub(crate) fn fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }

    fn watch(&self, fd: RawFd) {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: adds one of our fds to our epoll set.
        unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    }

    fn unwatch(&self, fd: RawFd) {
        // SAFETY: removes one of our fds from our epoll set.
        unsafe {
            libc::epoll_ctl(
                self.epfd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Listens at `addr` (`rdma_listen`); port 0 picks a free one. Returns the
    /// listener's id and the address it listens at.
    pub(crate) fn listen(&self, addr: SocketAddr) -> Result<(u64, SocketAddr)> {
        let ports: Vec<u16> = if addr.port() == 0 {
            let base = 20_000 + (std::process::id() % 20_000) as u16;
            (0..2000u16)
                .map(|i| base.wrapping_add(i.wrapping_mul(7)))
                .filter(|p| *p >= 1024)
                .collect()
        } else {
            vec![addr.port()]
        };
        // The socket listens under a name of its own first and appears under the
        // address only once it listens (a hard link), so a connect never finds a file
        // that refuses while being set up, and a refused connect means a dead listener.
        static TMP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = TMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self.dir.join(format!("{}-cm{n}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let fd =
            conn::listen_at(&self.dir, &tmp).map_err(|e| Error::from(e).context("rdma listen"))?;
        let result = self.publish(&tmp, &addr, &ports);
        let _ = std::fs::remove_file(&tmp);
        let (at, path) = result?;
        let mut g = lock(&self.inner);
        let id = g.next_id;
        g.next_id += 1;
        g.by_fd.insert(fd.as_raw_fd(), id);
        self.watch(fd.as_raw_fd());
        g.listeners.insert(id, Listener { fd, path });
        Ok((id, at))
    }

    /// Links the listening socket at `tmp` under the first free address of `ports`.
    fn publish(
        &self,
        tmp: &Path,
        addr: &SocketAddr,
        ports: &[u16],
    ) -> Result<(SocketAddr, PathBuf)> {
        for &port in ports {
            let at = SocketAddr::new(addr.ip(), port);
            let path = cm_path(&self.dir, &at);
            for _ in 0..2 {
                match std::fs::hard_link(tmp, &path) {
                    Ok(()) => return Ok((at, path)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        // A listener that is gone: take its place (once).
                        if conn::is_stale(&path) {
                            let _ = std::fs::remove_file(&path);
                            continue;
                        }
                        break;
                    }
                    Err(e) => return Err(Error::from(e).context("rdma listen")),
                }
            }
            if addr.port() != 0 {
                return Err(Error::new(Errno::EADDRINUSE, format!("{at} is in use")));
            }
        }
        Err(Error::new(Errno::EADDRINUSE, "no free port"))
    }

    /// Stops a listener (its pending, unanswered requests stay).
    pub(crate) fn close_listener(&self, id: u64) {
        let mut g = lock(&self.inner);
        if let Some(l) = g.listeners.remove(&id) {
            g.by_fd.remove(&l.fd.as_raw_fd());
            self.unwatch(l.fd.as_raw_fd());
            let _ = std::fs::remove_file(&l.path);
        }
    }

    /// Sends a connect request to the listener at `dst` with the local queue pair and
    /// private data (`rdma_connect`); the answer comes as an event of the returned id.
    /// `ECONNREFUSED` when nobody listens there.
    pub(crate) fn connect(&self, dst: SocketAddr, local: &CmPeer) -> Result<u64> {
        check_private_data("connect", &local.private_data, CONNECT_PRIVATE_MAX)?;
        let fd = conn::connect_to(&cm_path(&self.dir, &dst))
            .map_err(|e| Error::from(e).context(format!("connect to {dst}")))?;
        send_msg(fd.as_raw_fd(), &encode(MsgKind::Req, Some(local), &[]))?;
        let mut g = lock(&self.inner);
        Ok(self.add_conn(&mut g, fd, State::ReqSent, 0))
    }

    fn answer(&self, id: u64, msg: &[u8], next: State) -> Result<()> {
        let mut g = lock(&self.inner);
        let c = g
            .conns
            .get_mut(&id)
            .ok_or_else(|| Error::new(Errno::ENOENT, "no such connection"))?;
        if c.state != State::ReqReceived {
            return Err(Error::new(Errno::EINVAL, "no request to answer"));
        }
        send_msg(c.fd.as_raw_fd(), msg)?;
        c.state = next;
        Ok(())
    }

    /// Accepts request `id` with the local queue pair and private data (`rdma_accept`);
    /// [`CmEventKind::Established`] follows when the requester is ready.
    pub(crate) fn accept(&self, id: u64, local: &CmPeer) -> Result<()> {
        check_private_data("accept", &local.private_data, ACCEPT_PRIVATE_MAX)?;
        self.answer(id, &encode(MsgKind::Rep, Some(local), &[]), State::RepSent)
    }

    /// Rejects request `id` (`rdma_reject`).
    pub(crate) fn reject(&self, id: u64, private_data: &[u8]) -> Result<()> {
        check_private_data("reject", private_data, ACCEPT_PRIVATE_MAX)?;
        self.answer(id, &encode(MsgKind::Rej, None, private_data), State::Closed)?;
        self.forget(id);
        Ok(())
    }

    /// Disconnects `id` (`rdma_disconnect`); the other side gets
    /// [`CmEventKind::Disconnected`]. Forgets the connection.
    pub(crate) fn disconnect(&self, id: u64) -> Result<()> {
        {
            let g = lock(&self.inner);
            let c = g
                .conns
                .get(&id)
                .ok_or_else(|| Error::new(Errno::ENOENT, "no such connection"))?;
            let _ = send_msg(c.fd.as_raw_fd(), &encode(MsgKind::Dreq, None, &[]));
        }
        self.forget(id);
        Ok(())
    }

    fn forget(&self, id: u64) {
        let mut g = lock(&self.inner);
        if let Some(c) = g.conns.remove(&id) {
            g.by_fd.remove(&c.fd.as_raw_fd());
            self.unwatch(c.fd.as_raw_fd());
        }
    }

    /// Reads what arrived and returns the next event, if any (never blocks).
    pub(crate) fn get_event(&self) -> Option<CmEvent> {
        let mut g = lock(&self.inner);
        if let Some(e) = g.events.pop_front() {
            return Some(e);
        }
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 16];
        // SAFETY: waits (0 ms) on our epoll set into our array.
        let n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), evs.as_mut_ptr(), 16, 0) };
        for e in &evs[..n.max(0) as usize] {
            let fd = e.u64 as RawFd;
            let Some(&id) = g.by_fd.get(&fd) else {
                continue;
            };
            if g.listeners.contains_key(&id) {
                self.accept_pending(&mut g, fd, id);
            } else {
                self.read_conn(&mut g, id);
            }
        }
        g.events.pop_front()
    }

    /// Registers a new connection (watched by the epoll set) and returns its id.
    fn add_conn(&self, g: &mut Inner, fd: OwnedFd, state: State, listener: u64) -> u64 {
        let id = g.next_id;
        g.next_id += 1;
        g.by_fd.insert(fd.as_raw_fd(), id);
        self.watch(fd.as_raw_fd());
        g.conns.insert(
            id,
            Connection {
                fd,
                state,
                peer: None,
                listener,
            },
        );
        id
    }

    fn accept_pending(&self, g: &mut Inner, lfd: RawFd, listener: u64) {
        while let Some(fd) = conn::accept_one(lfd) {
            let id = self.add_conn(g, fd, State::ReqReceived, listener);
            self.read_conn(g, id);
        }
    }

    fn read_conn(&self, g: &mut Inner, id: u64) {
        let mut buf = [0u8; 512];
        loop {
            let Some(c) = g.conns.get_mut(&id) else {
                return;
            };
            // SAFETY: receives into our buffer.
            let r = unsafe {
                libc::recv(
                    c.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r == 0
                || (r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN))
            {
                let was = c.state;
                self.unwatch(c.fd.as_raw_fd());
                let fd = c.fd.as_raw_fd();
                g.by_fd.remove(&fd);
                g.conns.remove(&id);
                if matches!(was, State::Established | State::RepSent | State::ReqSent) {
                    let kind = if was == State::ReqSent {
                        CmEventKind::Rejected {
                            private_data: Vec::new(),
                        }
                    } else {
                        CmEventKind::Disconnected
                    };
                    g.events.push_back(CmEvent { id, kind });
                }
                return;
            }
            if r < 0 {
                return;
            }
            let Some((kind, peer)) = decode(&buf[..r as usize]) else {
                continue;
            };
            let fd = c.fd.as_raw_fd();
            match (c.state, kind) {
                (State::ReqReceived, MsgKind::Req)
                    if c.peer.is_none() && peer.private_data.len() <= CONNECT_PRIVATE_MAX =>
                {
                    c.peer = Some(peer.clone());
                    let listener = c.listener;
                    g.events.push_back(CmEvent {
                        id,
                        kind: CmEventKind::ConnectRequest { listener, peer },
                    });
                }
                (State::ReqSent, MsgKind::Rep) => {
                    c.state = State::Established;
                    c.peer = Some(peer.clone());
                    let _ = send_msg(fd, &encode(MsgKind::Rtu, None, &[]));
                    g.events.push_back(CmEvent {
                        id,
                        kind: CmEventKind::Established { peer },
                    });
                }
                (State::ReqSent, MsgKind::Rej) => {
                    c.state = State::Closed;
                    g.events.push_back(CmEvent {
                        id,
                        kind: CmEventKind::Rejected {
                            private_data: peer.private_data,
                        },
                    });
                }
                (State::RepSent, MsgKind::Rtu) => {
                    c.state = State::Established;
                    let peer = c.peer.clone().unwrap_or(peer);
                    g.events.push_back(CmEvent {
                        id,
                        kind: CmEventKind::Established { peer },
                    });
                }
                (State::Established, MsgKind::Dreq) | (State::RepSent, MsgKind::Dreq) => {
                    c.state = State::Closed;
                    g.events.push_back(CmEvent {
                        id,
                        kind: CmEventKind::Disconnected,
                    });
                }
                _ => {}
            }
        }
    }
}

impl Drop for SoftCm {
    fn drop(&mut self) {
        let g = lock(&self.inner);
        for l in g.listeners.values() {
            let _ = std::fs::remove_file(&l.path);
        }
        drop(g);
        conn::sweep(&self.dir);
    }
}
