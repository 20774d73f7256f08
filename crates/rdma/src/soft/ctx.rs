//! A software-device context: its listening socket, connections, tables of queue pairs
//! and shared receive queues, memory regions, asynchronous events, and the service
//! thread that plays the adapter: it answers remote reads, writes and atomics, places
//! incoming messages, runs the retry timers and flushes backlogs — all without the
//! application's involvement.
//!
//! Lock order (never taken the other way): the reader state (`rx`, held while packets
//! are handled) → a queue pair → a shared receive queue → a
//! completion queue → a notifier or a connection's backlog; a queue pair → `tables`
//! (opening a connection while it moves to RTS). `tables` is held only for lookups and
//! inserts, never around another lock or a blocking call. The memory table's read view
//! may be held around the queue, notifier and backlog locks. The service thread holds
//! no lock while it polls.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::conn::{self, Conn};
use super::cq::{eventfd, eventfd_add, eventfd_take, lock, Notifier};
use super::mem::MrTable;
use super::qp::{PendingAcks, SoftQp, SoftSrq};
use super::wire::{Hdr, Kind, MAX_PACKET};
use crate::verbs::{AsyncEvent, Gid};

/// Fault injection on UD and SRD sends of one context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftFault {
    /// Percentage (0..=100) of UD datagrams dropped at the sender.
    pub ud_drop_percent: u32,
    /// Delay added to every UD datagram before it leaves.
    pub ud_delay: Duration,
    /// Seed of the drop and delay decisions.
    pub seed: u64,
    /// SRD reordering: each SRD datagram (first sends and resends alike) leaves after a
    /// random delay from 0 to this, so later ones overtake earlier ones. Zero: sent at
    /// once, in posting order.
    pub srd_reorder: Duration,
}

impl SoftFault {
    /// From `FI_VERBS_SOFT_UD_DROP` (percent, 0–100), `FI_VERBS_SOFT_UD_DELAY_US` (at most
    /// 10 s, `MAX_UD_DELAY_US`), `FI_VERBS_SOFT_SRD_REORDER_US` (at most 10 s) and
    /// `FI_VERBS_SOFT_SEED`; unset or empty values are 0.
    ///
    /// Errors: `InvalidInput` naming the variable and its value when a value is not a
    /// decimal number or is out of range (a typo must not silently run without faults).
    pub fn from_env() -> std::io::Result<SoftFault> {
        let num = |k: &str, max: u64| env_number(k, std::env::var_os(k).as_deref(), max);
        Ok(SoftFault {
            ud_drop_percent: num("FI_VERBS_SOFT_UD_DROP", 100)? as u32,
            ud_delay: Duration::from_micros(num("FI_VERBS_SOFT_UD_DELAY_US", MAX_UD_DELAY_US)?),
            seed: num("FI_VERBS_SOFT_SEED", u64::MAX)?,
            srd_reorder: Duration::from_micros(num(
                "FI_VERBS_SOFT_SRD_REORDER_US",
                MAX_UD_DELAY_US,
            )?),
        })
    }
}

/// The largest `FI_VERBS_SOFT_UD_DELAY_US` accepted: 10 s.
pub const MAX_UD_DELAY_US: u64 = 10_000_000;

/// The value of environment variable `name` (`raw`: its text, if set) as a whole number
/// of at most `max`; unset or empty is 0.
fn env_number(name: &str, raw: Option<&std::ffi::OsStr>, max: u64) -> std::io::Result<u64> {
    let Some(raw) = raw else {
        return Ok(0);
    };
    let text = raw.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    match text.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{name}={}: expected a whole number from 0 to {max}",
                text.escape_debug()
            ),
        )),
    }
}

#[cfg(test)]
mod env_tests {
    use super::env_number;
    use std::ffi::OsStr;

    #[test]
    fn numbers_from_the_environment_are_checked() {
        let n = |v: Option<&str>, max| env_number("FI_X", v.map(OsStr::new), max);
        assert_eq!(n(None, 100).unwrap(), 0);
        assert_eq!(n(Some(" "), 100).unwrap(), 0);
        assert_eq!(n(Some("42"), 100).unwrap(), 42);
        assert_eq!(n(Some("100"), 100).unwrap(), 100);
        for bad in ["101", "-1", "1e3", "ten", "18446744073709551616"] {
            let e = n(Some(bad), 100).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            assert!(e.to_string().starts_with(&format!("FI_X={bad}:")), "{e}");
        }
    }
}

pub(crate) struct FaultState {
    pub cfg: SoftFault,
    rng: u64,
}

impl FaultState {
    /// The next pseudo-random number (xorshift64*, upper bits).
    fn next(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33
    }

    /// True when this datagram is to be dropped.
    pub(crate) fn drop_now(&mut self) -> bool {
        if self.cfg.ud_drop_percent == 0 {
            return false;
        }
        self.next() % 100 < u64::from(self.cfg.ud_drop_percent)
    }

    /// How long this SRD datagram waits before it leaves (zero without reordering).
    pub(crate) fn srd_delay(&mut self) -> Duration {
        let max = self.cfg.srd_reorder.as_micros() as u64;
        if max == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(self.next() % (max + 1))
    }
}

#[derive(Default)]
pub(crate) struct Tables {
    pub qps: HashMap<u32, Arc<SoftQp>>,
    pub srqs: HashMap<u32, Arc<SoftSrq>>,
    /// Every live connection (polled by the service thread).
    pub conns: Vec<Arc<Conn>>,
    /// The connection this context sends everything for each peer on (one it opened,
    /// or the one the peer opened, adopted at its hello).
    pub out: HashMap<Gid, Arc<Conn>>,
}

/// A delayed UD datagram: when it leaves, on which connection, the packet.
pub(crate) type Delayed = (Instant, Arc<Conn>, Vec<u8>);

/// The shared state of one context (the service thread holds it too).
pub(crate) struct CtxShared {
    pub gid: Gid,
    dir: PathBuf,
    path: PathBuf,
    listen: OwnedFd,
    wake: Arc<OwnedFd>,
    pub mrs: MrTable,
    pub async_ev: Arc<Notifier<AsyncEvent>>,
    pub tables: Mutex<Tables>,
    pub next_id: AtomicU32,
    pub fault: Mutex<FaultState>,
    /// Delayed UD datagrams: when, where, what.
    pub delayed: Mutex<Vec<Delayed>>,
    /// The reader's state: whoever holds it (the service thread, or an application
    /// thread polling an empty completion queue) reads the connections.
    rx: Mutex<RxState>,
    stop: AtomicBool,
}

/// What reading the connections needs, reused (no allocation once warm).
struct RxState {
    buf: Vec<u8>,
    conns: Vec<Arc<Conn>>,
    /// SRD acknowledgements owed while reading (sent as each connection's read ends).
    acks: PendingAcks,
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

impl CtxShared {
    /// Wakes the service thread.
    pub(crate) fn wake(&self) {
        eventfd_add(self.wake.as_raw_fd());
    }

    /// The connection to `gid` (opened on first use), `None` when unreachable.
    pub(crate) fn conn_to(&self, gid: &Gid) -> Option<Arc<Conn>> {
        if let Some(c) = lock(&self.tables).out.get(gid) {
            if !c.is_dead() {
                return Some(c.clone());
            }
        }
        // Connect without holding the tables (a connect may wait for the peer).
        let path = conn::gid_path(&self.dir, gid)?;
        let fd = conn::connect_to(&path).ok()?;
        let c = Arc::new(Conn::new(fd, Some(*gid), self.wake.clone()));
        let hello = Hdr {
            kind: Kind::Hello as u8,
            ..Hdr::default()
        }
        .emit();
        if !c.send_packet(&hello, &self.gid.0) {
            return None;
        }
        let mut t = lock(&self.tables);
        // Polled in any case: closing it would look like our death to the peer.
        t.conns.push(c.clone());
        if let Some(other) = t.out.get(gid) {
            if !other.is_dead() {
                // Another thread connected meanwhile: keep using its connection.
                let other = other.clone();
                drop(t);
                self.wake();
                return Some(other);
            }
        }
        t.out.insert(*gid, c.clone());
        drop(t);
        self.wake();
        Some(c)
    }

    fn qp(&self, qpn: u32) -> Option<Arc<SoftQp>> {
        lock(&self.tables).qps.get(&qpn).cloned()
    }

    /// Dispatches one received packet.
    fn handle(&self, conn: &Arc<Conn>, pkt: &[u8], acks: &mut PendingAcks) {
        let Some((h, payload)) = Hdr::parse(pkt) else {
            return;
        };
        if h.kind == Kind::Hello as u8 {
            if payload.len() >= 16 && conn.peer().is_none() {
                let mut g = [0u8; 16];
                g.copy_from_slice(&payload[..16]);
                *lock(&conn.peer) = Some(Gid(g));
                // Until this context opens one itself, its traffic to that peer uses
                // this connection too.
                let mut t = lock(&self.tables);
                if t.out.get(&Gid(g)).is_none_or(|c| c.is_dead()) {
                    t.out.insert(Gid(g), conn.clone());
                }
            }
            return;
        }
        // Nothing is accepted from a connection that has not said who it is.
        let Some(peer) = conn.peer() else { return };
        // Everything this context sends to a peer — requests and answers alike — goes
        // over one connection, so the peer sees it in the order it was sent (an answer
        // is never overtaken by a later request, as on one wire).
        let out = self.conn_to(&peer).unwrap_or_else(|| conn.clone());
        if h.kind == Kind::SrdBundle as u8 {
            for (d, payload) in super::qp::bundled(payload) {
                match self.qp(d.dst_qpn) {
                    Some(qp) => qp.on_srd_datagram(self, &out, &peer, &d, payload, acks),
                    None => super::qp::srd_nak_no_qp(&out, &d),
                }
            }
            return;
        }
        if h.kind == Kind::SrdAcks as u8 {
            for a in super::qp::acks_in(payload) {
                if let Some(qp) = self.qp(a.dst_qpn) {
                    qp.on_srd_answer(self, &peer, &a);
                }
            }
            return;
        }
        let Some(qp) = self.qp(h.dst_qpn) else {
            if h.kind == Kind::Req as u8 {
                super::qp::nak_no_qp(&out, &h);
            }
            if h.kind == Kind::Srd as u8 {
                super::qp::srd_nak_no_qp(&out, &h);
            }
            return;
        };
        match Kind::from_wire(h.kind) {
            Some(Kind::Req) => qp.on_request(self, &out, &peer, &h, payload),
            Some(Kind::Ud) => qp.on_datagram(self, &peer, &h, payload),
            Some(Kind::Srd) => qp.on_srd_datagram(self, &out, &peer, &h, payload, acks),
            Some(Kind::SrdAck | Kind::SrdNak) => qp.on_srd_answer(self, &peer, &h),
            Some(Kind::Ack | Kind::Nak | Kind::ReadResp | Kind::AtomicResp) => {
                qp.on_response(self, &peer, &h, payload)
            }
            // Handled above, or unknown: dropped.
            Some(Kind::Hello | Kind::SrdAcks | Kind::SrdBundle) | None => {}
        }
    }

    /// Reads what is pending on `c` (at most 256 packets) and handles it, then sends
    /// the acknowledgements that earned; the caller holds the reader state. A
    /// connection that ended is reported lost.
    fn drain(&self, c: &Arc<Conn>, buf: &mut [u8], acks: &mut PendingAcks) {
        let mut ended = false;
        for _ in 0..256 {
            match c.recv(buf) {
                Ok(Some(n)) if n <= buf.len() => self.handle(c, &buf[..n], acks),
                // Longer than any packet we send: dropped.
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(()) => {
                    ended = true;
                    break;
                }
            }
        }
        acks.flush();
        if ended || c.is_dead() {
            self.lost(c);
        }
    }

    /// Progress from an application thread (a poll that found its completion queue
    /// empty): when no other thread is reading, reads every connection once, so a
    /// polling application does not wait for the service thread to be scheduled.
    /// Never blocks.
    pub(crate) fn progress(&self) {
        let guard = match self.rx.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        self.drain_all(guard);
    }

    /// Handles everything that has arrived on every connection, waiting for the
    /// service thread if it is reading: what the adapter has received (an
    /// acknowledgement, say) is processed before a queue pair is moved to the error
    /// state, as hardware processes what reached it. Takes the reader state, so the
    /// caller must hold no queue pair lock (lock order).
    pub(crate) fn settle(&self) {
        self.drain_all(lock(&self.rx));
    }

    fn drain_all(&self, mut guard: std::sync::MutexGuard<'_, RxState>) {
        let RxState { buf, conns, acks } = &mut *guard;
        conns.clear();
        conns.extend(lock(&self.tables).conns.iter().cloned());
        for c in conns.iter() {
            self.drain(c, buf, acks);
        }
        conns.clear();
    }

    /// A connection ended: every RC queue pair talking to its peer fails.
    fn lost(&self, conn: &Arc<Conn>) {
        conn.mark_dead();
        let peer = conn.peer();
        let qps: Vec<Arc<SoftQp>> = {
            let mut t = lock(&self.tables);
            t.conns.retain(|c| !Arc::ptr_eq(c, conn));
            if let Some(p) = peer {
                if t.out.get(&p).is_some_and(|c| Arc::ptr_eq(c, conn)) {
                    t.out.remove(&p);
                }
            }
            t.qps.values().cloned().collect()
        };
        if let Some(p) = peer {
            for qp in qps {
                qp.on_peer_lost(self, &p);
            }
        }
    }
}

/// The owner of a context: stops and joins the service thread, closes the sockets and
/// removes the socket file when the last handle goes.
pub(crate) struct CtxOwner {
    pub shared: Arc<CtxShared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl CtxOwner {
    pub(crate) fn open() -> std::io::Result<CtxOwner> {
        // Read first: a bad value leaves nothing behind.
        let fault = SoftFault::from_env()?;
        let dir = conn::socket_dir();
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let gid = conn::make_gid(std::process::id(), serial);
        let path = conn::gid_path(&dir, &gid).expect("a software GID has a path");
        // A stale file from an earlier process with our pid and serial.
        let _ = std::fs::remove_file(&path);
        conn::sweep(&dir);
        let listen = conn::listen_at(&dir, &path)?;
        let shared = Arc::new(CtxShared {
            gid,
            dir,
            path,
            listen,
            wake: Arc::new(eventfd(false)?),
            mrs: MrTable::default(),
            async_ev: Arc::new(Notifier::new()?),
            tables: Mutex::new(Tables::default()),
            next_id: AtomicU32::new(1),
            fault: Mutex::new(FaultState {
                cfg: fault,
                rng: fault.seed | 1,
            }),
            delayed: Mutex::new(Vec::new()),
            rx: Mutex::new(RxState {
                buf: vec![0u8; MAX_PACKET],
                // Room for the connections of a busy context: the snapshot an
                // application thread takes does not allocate.
                conns: Vec::with_capacity(64),
                acks: PendingAcks::default(),
            }),
            stop: AtomicBool::new(false),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("soft-rdma-{serial}"))
            .spawn(move || service(&s2))?;
        Ok(CtxOwner {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }
}

impl Drop for CtxOwner {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
        {
            let mut t = lock(&self.shared.tables);
            t.conns.clear();
            t.out.clear();
            // Queue pairs hold the context; break those cycles.
            t.qps.clear();
            t.srqs.clear();
        }
        lock(&self.shared.delayed).clear();
        let _ = std::fs::remove_file(&self.shared.path);
        // Stale sockets of killed processes go too; the directory only when empty
        // (other contexts may still use it).
        conn::sweep(&self.shared.dir);
    }
}

/// The service thread's loop.
fn service(ctx: &Arc<CtxShared>) {
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    let mut conns: Vec<Arc<Conn>> = Vec::new();
    let mut qps: Vec<Arc<SoftQp>> = Vec::new();
    while !ctx.stop.load(Ordering::Acquire) {
        conns.clear();
        conns.extend(lock(&ctx.tables).conns.iter().cloned());
        pfds.clear();
        pfds.push(libc::pollfd {
            fd: ctx.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        pfds.push(libc::pollfd {
            fd: ctx.listen.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for c in &conns {
            let mut ev = libc::POLLIN;
            if c.has_backlog() {
                ev |= libc::POLLOUT;
            }
            pfds.push(libc::pollfd {
                fd: c.fd(),
                events: ev,
                revents: 0,
            });
        }
        qps.clear();
        qps.extend(lock(&ctx.tables).qps.values().cloned());
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for qp in &qps {
            if let Some(t) = qp.on_timer(ctx, now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        {
            let mut d = lock(&ctx.delayed);
            let mut i = 0;
            while i < d.len() {
                if d[i].0 <= now {
                    let (_, c, p) = d.swap_remove(i);
                    c.send_packet(&p, &[]);
                } else {
                    next = Some(next.map_or(d[i].0, |n| n.min(d[i].0)));
                    i += 1;
                }
            }
        }
        let timeout = match next {
            None => 1000,
            Some(t) => t.saturating_duration_since(now).as_millis().min(1000) as i32,
        };
        // SAFETY: polls our own array of pollfds.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if r < 0 {
            continue;
        }
        if ctx.stop.load(Ordering::Acquire) {
            break;
        }
        if pfds[0].revents != 0 {
            while eventfd_take(ctx.wake.as_raw_fd()) {}
        }
        if pfds[1].revents != 0 {
            while let Some(fd) = conn::accept_one(ctx.listen.as_raw_fd()) {
                lock(&ctx.tables)
                    .conns
                    .push(Arc::new(Conn::new(fd, None, ctx.wake.clone())));
            }
        }
        let mut rx = lock(&ctx.rx);
        let RxState { buf, acks, .. } = &mut *rx;
        for (c, p) in conns.iter().zip(&pfds[2..]) {
            if p.revents & libc::POLLOUT != 0 {
                c.flush();
            }
            if p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                ctx.drain(c, buf, acks);
            }
        }
        drop(rx);
    }
}
