//! The sans-IO connection manager (DESIGN §7): which peer to connect to and when,
//! handshake time-outs, retries with back-off, a bound on handshakes in flight, and the
//! deterministic resolution of simultaneous connects. It does no I/O and reads no
//! clock: the endpoint feeds it events with the current time ([`Manager::want`],
//! [`Manager::on_connected`], [`Manager::on_refused`], [`Manager::on_incoming`],
//! [`Manager::on_lost`], [`Manager::handle_timeout`]) and carries out what
//! [`Manager::poll_action`] asks (open a MSG endpoint and `fi_connect`, abandon an
//! attempt, fail a peer's operations). [`Manager::poll_timeout`] says when to call back.
//!
//! # Rules
//!
//! - A peer is connected on first use ([`Manager::want`]); at most
//!   [`Config::max_in_flight`] own handshakes run at once, the others queue in order.
//! - An attempt not answered within [`Config::timeout`] is abandoned; a refused or
//!   timed-out attempt is retried after a back-off doubling from [`Config::backoff`] (at
//!   most [`Config::backoff_max`]); after [`Config::retries`] attempts the peer fails
//!   ([`Action::Fail`]) with the last error and returns to idle (a later `want` starts
//!   over).
//! - Simultaneous connects: the connection initiated by the endpoint with the lower
//!   address wins ([`self_wins`]). The winner rejects the loser's request with
//!   [`Incoming::RejectAlready`]; the loser accepts the winner's request and abandons
//!   its own attempt; a loser that hears the reject first waits ([`State::AwaitPeer`])
//!   for the winner's request, at most a time-out, then tries again itself.
//! - A request from a peer instance we already have a connection (or an accepted
//!   request) with is a stale simultaneous request: rejected. One from a new instance
//!   (the peer restarted) replaces the old connection ([`Incoming::Replace`]).
//! - A handshake refused for a protocol reason (version, parameters, malformed) is not
//!   retried: [`Action::Fail`] with `FI_ECONNREFUSED` at once.
//!
//! Invariants: `in_flight` equals the number of peers in [`State::Connecting`] and never
//! exceeds `max_in_flight`; every peer in `Queued` is in the queue exactly once. Nothing
//! here panics.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use ofi_core::Errno;

/// A peer, as the endpoint numbers them: the engine's peer id (one a connection).
pub use crate::engine::PeerId;

/// A point in time: nanoseconds on any monotonic clock the driver chooses (the
/// endpoint: since it was enabled; `tests/sim.rs`: the simulation's virtual clock).
pub type Nanos = u64;

/// `d` in nanoseconds (saturating).
fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Manager limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// How long one handshake may take.
    pub timeout: Duration,
    /// Attempts before the peer fails.
    pub retries: u32,
    /// First back-off.
    pub backoff: Duration,
    /// Longest back-off.
    pub backoff_max: Duration,
    /// Own handshakes in flight at once.
    pub max_in_flight: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            timeout: Duration::from_secs(3),
            retries: 4,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            max_in_flight: 32,
        }
    }
}

/// A peer's connection state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Nothing going on.
    Idle,
    /// Waiting for a handshake slot.
    Queued,
    /// Our request is out; answer due by `deadline`.
    Connecting {
        /// When it times out.
        deadline: Nanos,
    },
    /// We accepted the peer's request; waiting for it to complete.
    Accepting {
        /// When it times out.
        deadline: Nanos,
    },
    /// The peer said its own request wins; waiting for it.
    AwaitPeer {
        /// When we give up waiting and try ourselves.
        deadline: Nanos,
    },
    /// Waiting to retry.
    Backoff {
        /// When to retry.
        until: Nanos,
    },
    /// Connected.
    Connected,
}

/// What the endpoint must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a MSG endpoint and send a connection request to the peer.
    Connect(PeerId),
    /// Abandon our current attempt to the peer (close its MSG endpoint).
    Abort(PeerId),
    /// Abandon an accepted request that never completed.
    AbortAccept(PeerId),
    /// Fail the peer's pending operations with this error.
    Fail(PeerId, Errno),
}

/// The answer to a peer's connection request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// Accept it (abandon our own attempt if there is one: [`Action::Abort`] follows).
    Accept,
    /// Accept it; it replaces the connection we had (the peer restarted): fail what was
    /// in flight on the old one.
    Replace,
    /// Reject it: our own connection wins, or it is a stale duplicate.
    RejectAlready,
}

/// Whether the connection initiated by `mine` wins over the one initiated by
/// `theirs`: the lower address (compared as bytes) wins.
pub fn self_wins(mine: &[u8], theirs: &[u8]) -> bool {
    mine < theirs
}

#[derive(Clone, Copy, Debug)]
struct Peer {
    state: State,
    attempts: u32,
    last_err: Errno,
    /// Instance of the peer on our current (or accepted) connection.
    instance: Option<u64>,
}

/// The connection manager (see the module docs).
#[derive(Debug)]
pub struct Manager {
    cfg: Config,
    peers: HashMap<PeerId, Peer>,
    queue: VecDeque<PeerId>,
    in_flight: usize,
    actions: VecDeque<Action>,
}

impl Manager {
    /// A manager with `cfg` (a zero `max_in_flight` counts as 1).
    pub fn new(mut cfg: Config) -> Manager {
        cfg.max_in_flight = cfg.max_in_flight.max(1);
        Manager {
            cfg,
            peers: HashMap::new(),
            queue: VecDeque::new(),
            in_flight: 0,
            actions: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Own handshakes in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A peer's state (`Idle` if unknown).
    pub fn state(&self, p: PeerId) -> State {
        self.peers.get(&p).map_or(State::Idle, |x| x.state)
    }

    fn peer(&mut self, p: PeerId) -> &mut Peer {
        self.peers.entry(p).or_insert(Peer {
            state: State::Idle,
            attempts: 0,
            last_err: Errno::ECONNREFUSED,
            instance: None,
        })
    }

    fn leave_connecting(&mut self, p: PeerId) {
        if matches!(self.state(p), State::Connecting { .. }) {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }

    fn set(&mut self, p: PeerId, s: State) {
        self.leave_connecting(p);
        if matches!(s, State::Connecting { .. }) {
            self.in_flight += 1;
        }
        self.peer(p).state = s;
    }

    /// Start handshakes while slots are free.
    fn pump(&mut self, now: Nanos) {
        while self.in_flight < self.cfg.max_in_flight {
            let Some(p) = self.queue.pop_front() else {
                return;
            };
            if self.state(p) != State::Queued {
                continue;
            }
            self.peer(p).attempts += 1;
            self.set(
                p,
                State::Connecting {
                    deadline: now.saturating_add(nanos(self.cfg.timeout)),
                },
            );
            self.actions.push_back(Action::Connect(p));
        }
    }

    fn enqueue(&mut self, p: PeerId, now: Nanos) {
        self.set(p, State::Queued);
        self.queue.push_back(p);
        self.pump(now);
    }

    /// The application has something for `p`: connect unless already connected or
    /// under way.
    pub fn want(&mut self, p: PeerId, now: Nanos) {
        if self.state(p) == State::Idle {
            self.peer(p).attempts = 0;
            self.enqueue(p, now);
        }
    }

    /// The connection to `p` is up (our request was accepted, or the request we
    /// accepted completed), with the peer `instance`.
    pub fn on_connected(&mut self, p: PeerId, instance: Option<u64>, now: Nanos) {
        let pe = self.peer(p);
        pe.attempts = 0;
        if instance.is_some() {
            pe.instance = instance;
        }
        self.set(p, State::Connected);
        self.pump(now);
    }

    /// Our attempt to `p` was refused (`reason` from the peer's reject data) or failed
    /// with `err` (e.g. `FI_ECONNREFUSED` for nobody listening).
    pub fn on_refused(&mut self, p: PeerId, err: Errno, reason: crate::proto::Reason, now: Nanos) {
        use crate::proto::Reason;
        if !matches!(self.state(p), State::Connecting { .. }) {
            return;
        }
        match reason {
            Reason::Already => {
                self.set(
                    p,
                    State::AwaitPeer {
                        deadline: now.saturating_add(nanos(self.cfg.timeout)),
                    },
                );
            }
            Reason::Version | Reason::Params | Reason::Malformed => {
                self.set(p, State::Idle);
                self.actions.push_back(Action::Fail(p, Errno::ECONNREFUSED));
            }
            Reason::None | Reason::Refused => {
                self.peer(p).last_err = err;
                self.retry_or_fail(p, now);
            }
        }
        self.pump(now);
    }

    fn retry_or_fail(&mut self, p: PeerId, now: Nanos) {
        let (attempts, err) = {
            let pe = self.peer(p);
            (pe.attempts, pe.last_err)
        };
        if attempts >= self.cfg.retries {
            self.set(p, State::Idle);
            self.actions.push_back(Action::Fail(p, err));
            return;
        }
        let shift = attempts.saturating_sub(1).min(16);
        let b = self
            .cfg
            .backoff
            .saturating_mul(1u32 << shift)
            .min(self.cfg.backoff_max);
        self.set(
            p,
            State::Backoff {
                until: now.saturating_add(nanos(b)),
            },
        );
    }

    /// A connection request from `p` (peer `instance`) arrived. `self_wins` is
    /// [`self_wins`] of our address against the peer's.
    pub fn on_incoming(
        &mut self,
        p: PeerId,
        instance: u64,
        self_wins: bool,
        now: Nanos,
    ) -> Incoming {
        let st = self.state(p);
        let known = self.peers.get(&p).and_then(|x| x.instance);
        let deadline = now.saturating_add(nanos(self.cfg.timeout));
        match st {
            State::Connected | State::Accepting { .. } if known == Some(instance) => {
                Incoming::RejectAlready
            }
            State::Connected => {
                self.peer(p).instance = Some(instance);
                self.set(p, State::Accepting { deadline });
                Incoming::Replace
            }
            State::Accepting { .. } => {
                self.peer(p).instance = Some(instance);
                self.actions.push_back(Action::AbortAccept(p));
                self.set(p, State::Accepting { deadline });
                Incoming::Accept
            }
            State::Connecting { .. } if self_wins => Incoming::RejectAlready,
            State::Connecting { .. } => {
                self.actions.push_back(Action::Abort(p));
                self.peer(p).instance = Some(instance);
                self.set(p, State::Accepting { deadline });
                self.pump(now);
                Incoming::Accept
            }
            State::Idle | State::Queued | State::AwaitPeer { .. } | State::Backoff { .. } => {
                self.peer(p).instance = Some(instance);
                self.set(p, State::Accepting { deadline });
                Incoming::Accept
            }
        }
    }

    /// The connection to `p` was lost (shutdown, error): back to idle.
    pub fn on_lost(&mut self, p: PeerId, now: Nanos) {
        if let Some(pe) = self.peers.get_mut(&p) {
            pe.instance = None;
        }
        self.set(p, State::Idle);
        self.pump(now);
    }

    /// Forget `p` entirely (its slot is reused).
    pub fn remove(&mut self, p: PeerId, now: Nanos) {
        self.leave_connecting(p);
        self.peers.remove(&p);
        self.pump(now);
    }

    /// When [`Manager::handle_timeout`] should run next.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.peers
            .values()
            .filter_map(|p| match p.state {
                State::Connecting { deadline }
                | State::Accepting { deadline }
                | State::AwaitPeer { deadline } => Some(deadline),
                State::Backoff { until } => Some(until),
                _ => None,
            })
            .min()
    }

    /// Act on every deadline that has passed at `now`.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let due: Vec<(PeerId, State)> = self
            .peers
            .iter()
            .filter(|(_, p)| match p.state {
                State::Connecting { deadline }
                | State::Accepting { deadline }
                | State::AwaitPeer { deadline } => deadline <= now,
                State::Backoff { until } => until <= now,
                _ => false,
            })
            .map(|(&id, p)| (id, p.state))
            .collect();
        let mut due = due;
        due.sort_by_key(|(id, _)| *id);
        for (p, st) in due {
            match st {
                State::Connecting { .. } => {
                    self.actions.push_back(Action::Abort(p));
                    self.peer(p).last_err = Errno::ETIMEDOUT;
                    self.retry_or_fail(p, now);
                }
                State::Accepting { .. } => {
                    self.actions.push_back(Action::AbortAccept(p));
                    self.peer(p).instance = None;
                    self.peer(p).last_err = Errno::ETIMEDOUT;
                    self.retry_or_fail(p, now);
                }
                State::AwaitPeer { .. } => {
                    self.peer(p).last_err = Errno::ETIMEDOUT;
                    self.retry_or_fail(p, now);
                }
                State::Backoff { .. } => {
                    self.set(p, State::Queued);
                    self.queue.push_back(p);
                }
                _ => {}
            }
        }
        self.pump(now);
    }

    /// The next thing to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Reason;

    fn cfg(max: usize) -> Config {
        Config {
            timeout: Duration::from_millis(100),
            retries: 3,
            backoff: Duration::from_millis(10),
            backoff_max: Duration::from_millis(40),
            max_in_flight: max,
        }
    }

    fn drain(m: &mut Manager) -> Vec<Action> {
        std::iter::from_fn(|| m.poll_action()).collect()
    }

    #[test]
    fn handshakes_in_flight_are_bounded_and_queue_in_order() {
        let t: Nanos = 0;
        let mut m = Manager::new(cfg(2));
        for p in 0..5 {
            m.want(PeerId(p), t);
        }
        assert_eq!(
            drain(&mut m),
            vec![Action::Connect(PeerId(0)), Action::Connect(PeerId(1))]
        );
        assert_eq!(m.in_flight(), 2);
        m.on_connected(PeerId(0), Some(1), t);
        assert_eq!(drain(&mut m), vec![Action::Connect(PeerId(2))]);
        m.want(PeerId(0), t);
        m.want(PeerId(2), t);
        assert!(drain(&mut m).is_empty(), "no duplicate attempts");
        assert_eq!(m.in_flight(), 2);
    }

    #[test]
    fn timeouts_retry_with_backoff_then_fail() {
        let t0: Nanos = 0;
        let mut m = Manager::new(cfg(4));
        m.want(PeerId(7), t0);
        assert_eq!(drain(&mut m), vec![Action::Connect(PeerId(7))]);
        let mut now = t0;
        let mut connects = 1;
        let mut failed = None;
        for _ in 0..100 {
            let Some(next) = m.poll_timeout() else { break };
            assert!(next >= now, "deadlines never go backwards");
            now = next;
            m.handle_timeout(now);
            for a in drain(&mut m) {
                match a {
                    Action::Connect(PeerId(7)) => connects += 1,
                    Action::Fail(PeerId(7), e) => failed = Some(e),
                    Action::Abort(PeerId(7)) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert_eq!(connects, 3, "three attempts (retries = 3)");
        assert_eq!(failed, Some(Errno::ETIMEDOUT));
        assert_eq!(m.state(PeerId(7)), State::Idle);
        assert_eq!(m.in_flight(), 0);
        // Bounded: 3 time-outs of 100 ms plus back-offs of 10 and 20 ms.
        assert!(
            now - t0 <= nanos(Duration::from_millis(330)),
            "{} ns",
            now - t0
        );
    }

    #[test]
    fn protocol_refusals_fail_at_once() {
        let t: Nanos = 0;
        let mut m = Manager::new(cfg(4));
        m.want(PeerId(1), t);
        drain(&mut m);
        m.on_refused(PeerId(1), Errno::ECONNREFUSED, Reason::Version, t);
        assert_eq!(
            drain(&mut m),
            vec![Action::Fail(PeerId(1), Errno::ECONNREFUSED)]
        );
        assert_eq!(m.in_flight(), 0);
    }

    #[test]
    fn simultaneous_connect_keeps_the_lower_address_connection() {
        let t: Nanos = 0;
        // Endpoint "a" (address 1) and "b" (address 2) connect to each other at once.
        let (a_addr, b_addr) = ([1u8], [2u8]);
        let mut a = Manager::new(cfg(4));
        let mut b = Manager::new(cfg(4));
        a.want(PeerId(0), t);
        b.want(PeerId(0), t);
        drain(&mut a);
        drain(&mut b);
        // Each receives the other's request.
        let at_a = a.on_incoming(PeerId(0), 2, self_wins(&a_addr, &b_addr), t);
        let at_b = b.on_incoming(PeerId(0), 1, self_wins(&b_addr, &a_addr), t);
        assert_eq!(at_a, Incoming::RejectAlready, "a's own connection wins");
        assert_eq!(at_b, Incoming::Accept);
        assert_eq!(drain(&mut b), vec![Action::Abort(PeerId(0))]);
        // b's attempt is rejected by a (ignored: it was abandoned).
        b.on_refused(PeerId(0), Errno::ECONNREFUSED, Reason::Already, t);
        assert!(matches!(b.state(PeerId(0)), State::Accepting { .. }));
        a.on_connected(PeerId(0), Some(2), t);
        b.on_connected(PeerId(0), Some(1), t);
        assert_eq!(a.state(PeerId(0)), State::Connected);
        assert_eq!(b.state(PeerId(0)), State::Connected);
        // A stale duplicate from the same instance is rejected; a restarted peer replaces.
        assert_eq!(
            a.on_incoming(PeerId(0), 2, true, t),
            Incoming::RejectAlready
        );
        assert_eq!(a.on_incoming(PeerId(0), 3, true, t), Incoming::Replace);
    }

    /// A simulated network of `n` endpoints that all connect to each other at once, with
    /// random delays (so reordering), lost and duplicated requests, on a virtual clock. Every pair must end with
    /// exactly one agreed connection, within a bounded time, never exceeding the
    /// in-flight bound.
    fn storm(n: u32, seed: u64, loss_pct: u64, max: usize) {
        storm_dup(n, seed, loss_pct, 0, max)
    }

    fn storm_dup(n: u32, seed: u64, loss_pct: u64, dup_pct: u64, max: usize) {
        #[derive(Debug)]
        enum Msg {
            Req { from: u32, att: u64 },
            Acc { from: u32, att: u64 },
            Rej { from: u32, att: u64, reason: Reason },
        }
        let mut rng = ofi_testkit::TestRng::seeded(seed);
        let mut rand = move |m: u64| rng.below(m);
        let t0: Nanos = 0;
        let c = Config {
            timeout: Duration::from_millis(50),
            retries: 50,
            backoff: Duration::from_millis(1),
            backoff_max: Duration::from_millis(20),
            max_in_flight: max,
        };
        let mut mgr: Vec<Manager> = (0..n).map(|_| Manager::new(c)).collect();
        // Per node: current own attempt id per peer, and the agreed connection per peer
        // (initiator, attempt).
        let mut attempt: Vec<HashMap<u32, u64>> = vec![HashMap::new(); n as usize];
        let mut conn: Vec<HashMap<u32, (u32, u64)>> = vec![HashMap::new(); n as usize];
        let mut accepted: Vec<HashMap<u32, (u32, u64)>> = vec![HashMap::new(); n as usize];
        let mut next_att = 1u64;
        let mut net: Vec<(Nanos, u32, Msg)> = Vec::new();
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    mgr[i as usize].want(PeerId(j), t0);
                }
            }
        }
        let mut now = t0;
        for _round in 0..200_000 {
            // Carry out actions.
            for i in 0..n as usize {
                assert!(mgr[i].in_flight() <= max);
                while let Some(a) = mgr[i].poll_action() {
                    match a {
                        Action::Connect(PeerId(p)) => {
                            let att = next_att;
                            next_att += 1;
                            attempt[i].insert(p, att);
                            if rand(100) >= loss_pct {
                                let copies = if rand(100) < dup_pct { 2 } else { 1 };
                                for _ in 0..copies {
                                    let d = rand(3000) * 1000;
                                    let from = i as u32;
                                    net.push((now + d, p, Msg::Req { from, att }));
                                }
                            }
                        }
                        Action::Abort(PeerId(p)) => {
                            attempt[i].remove(&p);
                        }
                        Action::AbortAccept(PeerId(p)) => {
                            accepted[i].remove(&p);
                        }
                        Action::Fail(PeerId(p), e) => panic!("{i} gave up on {p}: {e}"),
                    }
                }
            }
            let done = (0..n as usize).all(|i| {
                (0..n).all(|j| j == i as u32 || mgr[i].state(PeerId(j)) == State::Connected)
            });
            if done && net.is_empty() {
                break;
            }
            // Next event: a message or a timer.
            net.sort_by_key(|m| m.0);
            let timer = mgr.iter().filter_map(Manager::poll_timeout).min();
            let msg_t = net.first().map(|m| m.0);
            match (msg_t, timer) {
                (Some(mt), Some(tt)) if tt < mt => {
                    now = tt;
                    mgr.iter_mut().for_each(|m| m.handle_timeout(now));
                }
                (None, Some(tt)) => {
                    now = tt;
                    mgr.iter_mut().for_each(|m| m.handle_timeout(now));
                }
                (Some(_), _) => {
                    let (t, to, msg) = net.remove(0);
                    now = t;
                    let me = to as usize;
                    let d = rand(3000) * 1000;
                    match msg {
                        Msg::Req { from, att } => {
                            let wins = self_wins(&[to as u8], &[from as u8]);
                            match mgr[me].on_incoming(PeerId(from), u64::from(from), wins, now) {
                                Incoming::Accept | Incoming::Replace => {
                                    accepted[me].insert(from, (from, att));
                                    net.push((now + d, from, Msg::Acc { from: to, att }));
                                }
                                Incoming::RejectAlready => net.push((
                                    now + d,
                                    from,
                                    Msg::Rej {
                                        from: to,
                                        att,
                                        reason: Reason::Already,
                                    },
                                )),
                            }
                        }
                        Msg::Acc { from, att } => {
                            if attempt[me].get(&from) == Some(&att) {
                                attempt[me].remove(&from);
                                conn[me].insert(from, (to, att));
                                mgr[me].on_connected(PeerId(from), Some(u64::from(from)), now);
                                // The acceptor's side completes too.
                                if accepted[from as usize].get(&to) == Some(&(to, att)) {
                                    accepted[from as usize].remove(&to);
                                    conn[from as usize].insert(to, (to, att));
                                    mgr[from as usize].on_connected(PeerId(to), None, now);
                                }
                            }
                        }
                        Msg::Rej { from, att, reason } => {
                            if attempt[me].get(&from) == Some(&att) {
                                attempt[me].remove(&from);
                                mgr[me].on_refused(PeerId(from), Errno::ECONNREFUSED, reason, now);
                            }
                        }
                    }
                }
                (None, None) => break,
            }
        }
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                assert_eq!(
                    mgr[i as usize].state(PeerId(j)),
                    State::Connected,
                    "seed {seed}: {i} -> {j} not connected"
                );
                assert_eq!(
                    conn[i as usize].get(&j),
                    conn[j as usize].get(&i),
                    "seed {seed}: {i} and {j} disagree on their connection"
                );
            }
        }
        assert!(
            now - t0 < nanos(Duration::from_secs(30)),
            "bounded: {} ns",
            now - t0
        );
    }

    #[test]
    fn storm_all_connect_at_once() {
        for seed in 1..6 {
            storm(12, seed, 0, 4);
        }
    }

    #[test]
    fn storm_with_duplicated_and_lost_requests() {
        for seed in 20..24 {
            storm_dup(8, seed, 10, 20, 3);
        }
    }

    #[test]
    fn storm_with_lost_requests() {
        for seed in 10..14 {
            storm(8, seed, 20, 3);
        }
    }
}
