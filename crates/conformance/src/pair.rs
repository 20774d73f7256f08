//! Two endpoints that can talk to each other, for every endpoint type: the fixture the
//! pair checks share.
//!
//! - Connectionless (`FI_EP_DGRAM`, `FI_EP_RDM`): two endpoints of one domain, each with
//!   its own CQ and AV; each AV holds the other's name (`fi_getname`), so
//!   [`Side::peer`] is the fabric address of the other side.
//! - Connection-oriented (`FI_EP_MSG`): a passive endpoint bound to an EQ listens; side
//!   `a` (the client) connects to it with connection data; the server reads `FI_CONNREQ`
//!   (which must carry that data, the listener's context and an info with a handle),
//!   opens side `b` from that info, accepts with its own data, and both sides read
//!   `FI_CONNECTED` (the client's event carries the accept data). [`Side::peer`] is
//!   `FI_ADDR_UNSPEC` (ignored on connected endpoints).
//!
//! Every CQ is `FI_CQ_FORMAT_TAGGED` (the widest entry), bound for transmit and
//! receive (plus [`PairSpec::cq_flags`]). Waits drive the progress of both sides and are
//! bounded by [`WAIT`]. Helpers panic with a message naming the step that failed (test
//! code). Field order is drop order: endpoints, their CQs / AVs / EQs / counters, the
//! passive endpoint, the domain, the fabric.

use std::collections::VecDeque;
use std::time::Instant;

use ofi::abi::raw::{CqErrEntry, CqTaggedEntry};
use ofi::av::{AddressVector, AvAttr};
use ofi::cntr::{CntrAttr, Counter};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::{Endpoint, PassiveEndpoint};
use ofi::eq::{EqAttr, EqErrorEntry, Event, EventQueue};
use ofi::fabric::Fabric;
use ofi::wait::WaitSet;
use ofi::{Caps, CqFormat, EpType, EqEvent, Errno, GetinfoFlags, Info, OpFlags, ADDR_UNSPEC};

use crate::{fixture, Subject, WAIT};

/// Context of side `a`'s endpoint (reported as `fid` in its EQ events).
pub const CTX_A: usize = 0xa0a0;
/// Context of side `b`'s endpoint.
pub const CTX_B: usize = 0xb0b0;
/// Context of the passive endpoint.
pub const CTX_PEP: usize = 0xe0e0;

/// How to build a pair.
#[derive(Clone, Debug)]
pub struct PairSpec {
    /// The endpoint type.
    pub ep_type: EpType,
    /// Capabilities asked for in the hints.
    pub caps: Caps,
    /// Extra CQ bind flags (e.g. `FI_SELECTIVE_COMPLETION`).
    pub cq_flags: OpFlags,
    /// Bind a counter (`FI_WAIT_UNSPEC`, so `fi_cntr_wait` works) to each side with
    /// these flags (none if empty).
    pub cntr_flags: OpFlags,
    /// Connection data of `fi_connect` (`FI_EP_MSG`).
    pub connect_data: Vec<u8>,
    /// Connection data of `fi_accept` (`FI_EP_MSG`).
    pub accept_data: Vec<u8>,
    /// `FI_OPT_MIN_MULTI_RECV` to set on both endpoints before they are enabled.
    pub min_multi_recv: Option<usize>,
    /// The CQs' wait object (`FI_WAIT_NONE`, polling only, by default; `fi_cq_sread`
    /// needs another).
    pub cq_wait_obj: ofi::WaitObj,
    /// Open both CQs in one wait set (`FI_WAIT_SET`, [`Pair::wait_set`]) instead.
    pub cq_in_wait_set: bool,
}

impl PairSpec {
    /// A pair of `ep_type` with `caps`, nothing else.
    pub fn new(ep_type: EpType, caps: Caps) -> PairSpec {
        PairSpec {
            ep_type,
            caps,
            cq_flags: OpFlags::empty(),
            cntr_flags: OpFlags::empty(),
            connect_data: Vec::new(),
            accept_data: Vec::new(),
            min_multi_recv: None,
            cq_wait_obj: ofi::WaitObj::None,
            cq_in_wait_set: false,
        }
    }
}

/// One side of a pair.
#[derive(Debug)]
pub struct Side {
    /// The endpoint.
    pub ep: Endpoint,
    /// Its CQ (`FI_CQ_FORMAT_TAGGED`).
    pub cq: CompletionQueue,
    /// Its counter, when [`PairSpec::cntr_flags`] asked for one.
    pub cntr: Option<Counter>,
    /// Its AV (connectionless).
    pub av: Option<AddressVector>,
    /// Its EQ (`FI_EP_MSG`; the server's EQ is also the passive endpoint's).
    pub eq: Option<EventQueue>,
    /// The address to send to the other side with.
    pub peer: u64,
}

/// What connection management reported while the pair was built (`FI_EP_MSG`).
#[derive(Clone, Debug, Default)]
pub struct CmRecord {
    /// The `FI_CONNREQ` event.
    pub connreq: Event,
    /// The client's `FI_CONNECTED` event.
    pub connected_a: Event,
    /// The server's `FI_CONNECTED` event.
    pub connected_b: Event,
}

/// Two endpoints that reach each other.
#[derive(Debug)]
pub struct Pair {
    /// Side `a` (the client for `FI_EP_MSG`).
    pub a: Side,
    /// Side `b` (the accepting side for `FI_EP_MSG`).
    pub b: Side,
    /// The wait set both CQs are in ([`PairSpec::cq_in_wait_set`]); declared after the
    /// sides, so it closes after their CQs.
    pub wait_set: Option<WaitSet>,
    /// The listener (`FI_EP_MSG`).
    pub pep: Option<PassiveEndpoint>,
    /// Connection events (`FI_EP_MSG`).
    pub cm: Option<CmRecord>,
    /// The info both endpoints were opened with (side `a`'s for `FI_EP_MSG`).
    pub info: Info,
    /// The domain.
    pub domain: Domain,
    /// The fabric.
    pub fabric: Fabric,
}

/// The first getinfo result for `ep_type` with `caps` (`None`: `FI_ENODATA`).
pub fn info_for(s: &Subject, ep_type: EpType, caps: Caps) -> Option<Info> {
    let hints = s.base_hints().with_ep_type(ep_type).with_caps(caps);
    match s.getinfo_with(Some(hints), GetinfoFlags::empty()) {
        Ok(v) if !v.is_empty() => Some(v[0].clone()),
        Ok(_) => None,
        Err(e) if e.code() == Errno::ENODATA => None,
        Err(e) => panic!("getinfo for {ep_type} with {caps}: {e} ({})", e.code()),
    }
}

/// Run `f` on a pair of every endpoint type whose results claim `caps` and satisfy
/// `extra`; returns how many types ran (at least one, or the check panics: it only
/// runs when its capability is claimed).
pub fn each_type(
    s: &Subject,
    caps: Caps,
    extra: impl Fn(&Info) -> bool,
    mut f: impl FnMut(EpType, Info),
) -> usize {
    let types = s.claimed().types_where(caps, &extra);
    let mut ran = 0;
    for t in types {
        let Some(info) = info_for(s, t, caps) else {
            panic!("getinfo claims {caps} on {t} but answers FI_ENODATA when asked for it");
        };
        if !extra(&info) {
            continue;
        }
        println!("  on {t}");
        f(t, info);
        ran += 1;
    }
    assert!(ran > 0, "no endpoint type with {caps} to run on");
    ran
}

/// Run `f` on a pair (built from `PairSpec::new(ep_type, caps)`) of every endpoint type
/// with `caps`.
pub fn each_pair(s: &Subject, caps: Caps, mut f: impl FnMut(&Pair)) -> usize {
    each_pair_where(s, caps, |_| true, |p| f(&p))
}

/// Run `f` on a pair (built from `PairSpec::new(ep_type, caps)`) of every endpoint type
/// with `caps` whose results satisfy `extra` (see [`each_type`]).
pub fn each_pair_where(
    s: &Subject,
    caps: Caps,
    extra: impl Fn(&Info) -> bool,
    f: impl FnMut(Pair),
) -> usize {
    each_pair_with(s, caps, extra, |_| {}, f)
}

/// Run `f` on a pair of every endpoint type with `caps`, built from
/// `PairSpec::new(ep_type, caps)` changed by `tweak`.
pub fn each_pair_spec(
    s: &Subject,
    caps: Caps,
    tweak: impl Fn(&mut PairSpec),
    f: impl FnMut(Pair),
) -> usize {
    each_pair_with(s, caps, |_| true, tweak, f)
}

/// Run `f` on a pair of every endpoint type with `caps` whose results satisfy `extra`
/// (see [`each_type`]), built from `PairSpec::new(ep_type, caps)` changed by `tweak`.
pub fn each_pair_with(
    s: &Subject,
    caps: Caps,
    extra: impl Fn(&Info) -> bool,
    tweak: impl Fn(&mut PairSpec),
    mut f: impl FnMut(Pair),
) -> usize {
    each_type(s, caps, extra, |t, info| {
        let mut spec = PairSpec::new(t, caps);
        tweak(&mut spec);
        f(Pair::with_info(s, &spec, info))
    })
}

/// Open an endpoint of `domain` for `info` with context `context`: a tagged-format CQ
/// bound for transmit and receive (plus `spec.cq_flags`), a counter if `spec` asks,
/// an AV (connectionless types) and `eq` (if given) bound; not enabled.
#[allow(clippy::type_complexity)]
pub fn open_side(
    domain: &Domain,
    info: &Info,
    spec: &PairSpec,
    context: usize,
    eq: Option<&EventQueue>,
) -> (
    Endpoint,
    CompletionQueue,
    Option<Counter>,
    Option<AddressVector>,
) {
    open_side_in(domain, info, spec, context, eq, None)
}

/// As [`open_side`], the CQ opened in `set` when one is given.
#[allow(clippy::type_complexity)]
pub fn open_side_in(
    domain: &Domain,
    info: &Info,
    spec: &PairSpec,
    context: usize,
    eq: Option<&EventQueue>,
    set: Option<&WaitSet>,
) -> (
    Endpoint,
    CompletionQueue,
    Option<Counter>,
    Option<AddressVector>,
) {
    let attr = CqAttr {
        wait_obj: spec.cq_wait_obj,
        ..CqAttr::with_format(CqFormat::Tagged)
    };
    let cq = match set {
        Some(set) => domain
            .cq_open_in(&CqAttr::with_format(CqFormat::Tagged), set, context)
            .unwrap_or_else(|e| panic!("fi_cq_open (FI_CQ_FORMAT_TAGGED, FI_WAIT_SET): {e}")),
        None => domain.cq_open(&attr).unwrap_or_else(|e| {
            panic!(
                "fi_cq_open (FI_CQ_FORMAT_TAGGED, {}): {e}",
                spec.cq_wait_obj.name()
            )
        }),
    };
    let ep = domain
        .endpoint_with(info, context, 0)
        .unwrap_or_else(|e| panic!("fi_endpoint ({}): {e} ({})", info.ep_type(), e.code()));
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV | spec.cq_flags)
        .unwrap_or_else(|e| panic!("fi_ep_bind CQ with {}: {e}", spec.cq_flags));
    let cntr = if spec.cntr_flags.is_empty() {
        None
    } else {
        let c = domain
            .cntr_open(&CntrAttr {
                wait_obj: ofi::WaitObj::Unspec,
                ..CntrAttr::default()
            })
            .unwrap_or_else(|e| panic!("fi_cntr_open (FI_WAIT_UNSPEC): {e}"));
        ep.bind_cntr(&c, spec.cntr_flags)
            .unwrap_or_else(|e| panic!("fi_ep_bind counter with {}: {e}", spec.cntr_flags));
        Some(c)
    };
    let av = if crate::connectionless(info.ep_type()) {
        let av = domain
            .av_open(&AvAttr::default())
            .unwrap_or_else(|e| panic!("fi_av_open: {e}"));
        ep.bind_av(&av)
            .unwrap_or_else(|e| panic!("fi_ep_bind AV: {e}"));
        Some(av)
    } else {
        None
    };
    if let Some(eq) = eq {
        ep.bind_eq(eq)
            .unwrap_or_else(|e| panic!("fi_ep_bind EQ: {e}"));
    }
    if let Some(min) = spec.min_multi_recv {
        // FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV (both 0), a size_t.
        ep.setopt(0, 0, &min.to_ne_bytes())
            .unwrap_or_else(|e| panic!("fi_setopt(FI_OPT_MIN_MULTI_RECV) before fi_enable: {e}"));
    }
    (ep, cq, cntr, av)
}

/// Events read from several EQs while waiting for one of them, kept in order per EQ.
#[derive(Debug, Default)]
pub struct EqPoller {
    stash: Vec<VecDeque<std::result::Result<Event, EqErrorEntry>>>,
}

impl EqPoller {
    /// A poller for `n` EQs.
    pub fn new(n: usize) -> EqPoller {
        EqPoller {
            stash: (0..n).map(|_| VecDeque::new()).collect(),
        }
    }

    /// The next event (or error event) of `eqs[want]` within [`WAIT`], reading every EQ
    /// of `eqs` (so each side's connection progress is driven) and keeping the events
    /// of the others. `None` on time-out.
    pub fn next(
        &mut self,
        eqs: &[&EventQueue],
        want: usize,
        also: &[&CompletionQueue],
    ) -> Option<std::result::Result<Event, EqErrorEntry>> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(e) = self.stash[want].pop_front() {
                return Some(e);
            }
            for (i, eq) in eqs.iter().enumerate() {
                match eq.read() {
                    Ok(ev) => self.stash[i].push_back(Ok(ev)),
                    Err(e) if e.code() == Errno::EAGAIN => {}
                    Err(e) if e.code() == Errno::EAVAIL => {
                        let ee = eq.readerr().unwrap_or_else(|e| {
                            panic!("fi_eq_read said FI_EAVAIL; fi_eq_readerr: {e}")
                        });
                        self.stash[i].push_back(Err(ee));
                    }
                    Err(e) => panic!("fi_eq_read: {e} ({})", e.code()),
                }
            }
            for cq in also {
                drive(cq);
            }
            if self.stash[want].is_empty() && Instant::now() >= deadline {
                return None;
            }
            if self.stash[want].is_empty() {
                std::thread::yield_now();
            }
        }
    }

    /// The next event of `eqs[want]`, which must be `event` (panics otherwise).
    pub fn expect(
        &mut self,
        eqs: &[&EventQueue],
        want: usize,
        also: &[&CompletionQueue],
        event: EqEvent,
        what: &str,
    ) -> Event {
        match self.next(eqs, want, also) {
            Some(Ok(ev)) if ev.event == event => ev,
            Some(Ok(ev)) => panic!("{what}: expected {event:?}, got {ev:?}"),
            Some(Err(ee)) => panic!(
                "{what}: expected {event:?}, got an error event {} ({}) {ee:?}",
                ee.err,
                ofi::error::strerror(ee.err.0)
            ),
            None => panic!("{what}: no {event:?} within {WAIT:?}"),
        }
    }
}

/// Read zero entries of `cq`: drives its provider's progress.
pub fn drive(cq: &CompletionQueue) {
    let mut none: [CqTaggedEntry; 0] = [];
    let _ = cq.read(&mut none);
}

/// A listening passive endpoint for `info` with its EQ; returns (pep, eq, name).
pub fn listen(fabric: &Fabric, info: &Info) -> (PassiveEndpoint, EventQueue, Vec<u8>) {
    let eq = fabric
        .eq_open(&EqAttr::default())
        .unwrap_or_else(|e| panic!("fi_eq_open: {e} ({})", e.code()));
    let pep = fabric
        .passive_ep_with(info, CTX_PEP)
        .unwrap_or_else(|e| panic!("fi_passive_ep: {e} ({})", e.code()));
    pep.bind_eq(&eq, 0)
        .unwrap_or_else(|e| panic!("fi_pep_bind EQ: {e}"));
    pep.listen()
        .unwrap_or_else(|e| panic!("fi_listen: {e} ({})", e.code()));
    let name = pep
        .getname()
        .unwrap_or_else(|e| panic!("fi_getname (passive endpoint): {e}"));
    (pep, eq, name)
}

/// A wait set (`FI_WAIT_FD`) of `fabric`.
pub fn open_wait_set(fabric: &Fabric) -> WaitSet {
    fabric
        .wait_open(&ofi::wait::WaitAttr {
            wait_obj: ofi::WaitObj::Fd,
            flags: 0,
        })
        .unwrap_or_else(|e| panic!("fi_wait_open(FI_WAIT_FD): {e}"))
}

impl Pair {
    /// A pair as `spec` says, from the first getinfo result for it.
    pub fn new(s: &Subject, spec: &PairSpec) -> Pair {
        let info = info_for(s, spec.ep_type, spec.caps).unwrap_or_else(|| {
            panic!(
                "getinfo has no result for {} with {}",
                spec.ep_type, spec.caps
            )
        });
        Pair::with_info(s, spec, info)
    }

    /// A pair as `spec` says, opened with `info`.
    pub fn with_info(s: &Subject, spec: &PairSpec, info: Info) -> Pair {
        if info.ep_type() == EpType::Msg {
            Pair::connected(s, spec, info)
        } else {
            Pair::connectionless(s, spec, info)
        }
    }

    fn connectionless(s: &Subject, spec: &PairSpec, info: Info) -> Pair {
        let (fabric, domain) = fixture::open_domain(s, &info);
        let wait_set = spec.cq_in_wait_set.then(|| open_wait_set(&fabric));
        let mut sides = Vec::new();
        for ctx in [CTX_A, CTX_B] {
            let (ep, cq, cntr, av) =
                open_side_in(&domain, &info, spec, ctx, None, wait_set.as_ref());
            ep.enable()
                .unwrap_or_else(|e| panic!("fi_enable: {e} ({})", e.code()));
            sides.push((ep, cq, cntr, av));
        }
        let names: Vec<_> = sides
            .iter()
            .map(|(ep, ..)| fixture::name_of(ep, &info))
            .collect();
        let mut out = Vec::new();
        for (i, (ep, cq, cntr, av)) in sides.into_iter().enumerate() {
            let other = names[1 - i].clone();
            let av_ref = av.as_ref().expect("connectionless sides have an AV");
            let got = av_ref
                .insert(&[other])
                .unwrap_or_else(|e| panic!("fi_av_insert of the other side's name: {e}"));
            assert_eq!(got.len(), 1, "fi_av_insert of one address");
            assert_ne!(
                got[0],
                ofi::ADDR_NOTAVAIL,
                "fi_av_insert of the other side's name failed"
            );
            out.push(Side {
                ep,
                cq,
                cntr,
                av,
                eq: None,
                peer: got[0],
            });
        }
        let b = out.pop().expect("two sides");
        let a = out.pop().expect("two sides");
        Pair {
            a,
            b,
            wait_set,
            pep: None,
            cm: None,
            info,
            domain,
            fabric,
        }
    }

    fn connected(s: &Subject, spec: &PairSpec, info: Info) -> Pair {
        let (fabric, domain) = fixture::open_domain(s, &info);
        let wait_set = spec.cq_in_wait_set.then(|| open_wait_set(&fabric));
        let (pep, eq_s, name) = listen(&fabric, &info);
        let eq_c = fabric
            .eq_open(&EqAttr::default())
            .unwrap_or_else(|e| panic!("fi_eq_open: {e}"));
        let (ep_a, cq_a, cntr_a, _) =
            open_side_in(&domain, &info, spec, CTX_A, Some(&eq_c), wait_set.as_ref());
        ep_a.enable()
            .unwrap_or_else(|e| panic!("fi_enable (client): {e} ({})", e.code()));
        ep_a.connect(&name, &spec.connect_data)
            .unwrap_or_else(|e| panic!("fi_connect: {e} ({})", e.code()));
        let mut poll = EqPoller::new(2);
        let eqs = [&eq_c, &eq_s];
        let connreq = poll.expect(&eqs, 1, &[&cq_a], EqEvent::ConnReq, "listener");
        assert_eq!(
            connreq.fid, CTX_PEP,
            "FI_CONNREQ fid: the passive endpoint's context"
        );
        assert!(
            connreq.cm_data.starts_with(&spec.connect_data),
            "FI_CONNREQ carries the connect data: sent {:?}, got {:?}",
            spec.connect_data,
            connreq.cm_data
        );
        let req_info = connreq
            .info
            .as_deref()
            .cloned()
            .unwrap_or_else(|| panic!("FI_CONNREQ without an info"));
        assert_ne!(req_info.handle, 0, "FI_CONNREQ info has no handle");
        assert_eq!(req_info.ep_type(), EpType::Msg, "FI_CONNREQ info ep_type");
        let (ep_b, cq_b, cntr_b, _) = open_side_in(
            &domain,
            &req_info,
            spec,
            CTX_B,
            Some(&eq_s),
            wait_set.as_ref(),
        );
        ep_b.accept(&spec.accept_data)
            .unwrap_or_else(|e| panic!("fi_accept: {e} ({})", e.code()));
        let connected_b = poll.expect(&eqs, 1, &[&cq_a, &cq_b], EqEvent::Connected, "server");
        assert_eq!(connected_b.fid, CTX_B, "server FI_CONNECTED fid");
        let connected_a = poll.expect(&eqs, 0, &[&cq_a, &cq_b], EqEvent::Connected, "client");
        assert_eq!(connected_a.fid, CTX_A, "client FI_CONNECTED fid");
        assert!(
            connected_a.cm_data.starts_with(&spec.accept_data),
            "the client's FI_CONNECTED carries the accept data: sent {:?}, got {:?}",
            spec.accept_data,
            connected_a.cm_data
        );
        Pair {
            a: Side {
                ep: ep_a,
                cq: cq_a,
                cntr: cntr_a,
                av: None,
                eq: Some(eq_c),
                peer: ADDR_UNSPEC,
            },
            b: Side {
                ep: ep_b,
                cq: cq_b,
                cntr: cntr_b,
                av: None,
                eq: Some(eq_s),
                peer: ADDR_UNSPEC,
            },
            wait_set,
            pep: Some(pep),
            cm: Some(CmRecord {
                connreq,
                connected_a,
                connected_b,
            }),
            info,
            domain,
            fabric,
        }
    }

    /// Side `i` (0 = `a`, 1 = `b`).
    pub fn side(&self, i: usize) -> &Side {
        if i == 0 {
            &self.a
        } else {
            &self.b
        }
    }

    /// Drive both sides' progress once.
    pub fn drive(&self) {
        drive(&self.a.cq);
        drive(&self.b.cq);
    }

    /// The next completion of side `i` within [`WAIT`] (driving both sides).
    pub fn wait(&self, i: usize) -> Option<Completion> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(c) = poll(&self.side(i).cq) {
                return Some(c);
            }
            drive(&self.side(1 - i).cq);
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// The next completion of side `i`, which must succeed.
    pub fn wait_ok(&self, i: usize, what: &str) -> CqTaggedEntry {
        fixture::expect_ok(self.wait(i), what)
    }

    /// The next completion of side `i`, which must succeed and carry `context`.
    pub fn wait_ok_ctx(&self, i: usize, context: usize, what: &str) -> CqTaggedEntry {
        let c = self.wait_ok(i, what);
        assert_eq!(
            c.op_context,
            context,
            "{what}: wrong completion {}",
            show(&c)
        );
        c
    }

    /// `fi_cancel` of the receive posted on side `b` with `context`: it must complete
    /// with an `FI_ECANCELED` error entry carrying `context`.
    pub fn cancel_recv(&self, context: usize, what: &str) {
        self.b
            .ep
            .cancel(context)
            .unwrap_or_else(|e| panic!("fi_cancel ({what}): {e}"));
        let ee = self.wait_err(1, what);
        assert_eq!(Errno(ee.err), Errno::ECANCELED, "{what}: error code");
        assert_eq!(ee.op_context, context, "{what}: context");
    }

    /// The next completion of side `i`, which must be an error entry.
    pub fn wait_err(&self, i: usize, what: &str) -> CqErrEntry {
        match self.wait(i) {
            Some(Err(ee)) => ee,
            Some(Ok(e)) => panic!("{what}: expected an error completion, got {}", show(&e)),
            None => panic!("{what}: no completion within {WAIT:?}"),
        }
    }

    /// `n` successful completions of side `i`, in the order read.
    pub fn wait_n(&self, i: usize, n: usize, what: &str) -> Vec<CqTaggedEntry> {
        (0..n)
            .map(|k| self.wait_ok(i, &format!("{what} ({} of {n})", k + 1)))
            .collect()
    }

    /// Drive both sides for `ms` milliseconds (or until side `i` has a completion),
    /// then assert side `i`'s CQ is empty.
    pub fn assert_quiet(&self, i: usize, ms: u64, what: &str) {
        let until = Instant::now() + std::time::Duration::from_millis(ms);
        while Instant::now() < until {
            self.drive();
            std::thread::yield_now();
        }
        if let Some(c) = poll(&self.side(i).cq) {
            match c {
                Ok(e) => panic!("{what}: expected no completion, got {}", show(&e)),
                Err(ee) => panic!(
                    "{what}: expected no completion, got error {} context {:#x}",
                    Errno(ee.err),
                    ee.op_context
                ),
            }
        }
    }
}

/// A completion: successful, or an error entry.
pub type Completion = std::result::Result<CqTaggedEntry, CqErrEntry>;

/// An empty tagged entry.
pub fn empty_entry() -> CqTaggedEntry {
    CqTaggedEntry {
        op_context: 0,
        flags: 0,
        len: 0,
        buf: std::ptr::null_mut(),
        data: 0,
        tag: 0,
    }
}

/// A readable rendering of an entry.
pub fn show(e: &CqTaggedEntry) -> String {
    format!(
        "{{context {:#x}, flags {}, len {}, data {:#x}, tag {:#x}}}",
        e.op_context,
        OpFlags::from_bits_retain(e.flags),
        e.len,
        e.data,
        e.tag
    )
}

/// One read of `cq` (`None` if empty); an error entry is read with `fi_cq_readerr`.
pub fn poll(cq: &CompletionQueue) -> Option<Completion> {
    let mut e = [empty_entry()];
    match cq.read(&mut e) {
        Ok(1) => Some(Ok(e[0])),
        Ok(n) => panic!("fi_cq_read of one entry returned {n}"),
        Err(err) if err.code() == Errno::EAGAIN => None,
        Err(err) if err.code() == Errno::EAVAIL => {
            let mut ee = CqErrEntry::default();
            cq.readerr(&mut ee, 0)
                .unwrap_or_else(|e| panic!("fi_cq_read said FI_EAVAIL; fi_cq_readerr: {e}"));
            Some(Err(ee))
        }
        Err(err) => panic!("fi_cq_read: {err} ({})", err.code()),
    }
}

/// Assert `flags` (of a completion) has every bit of `want`.
pub fn assert_flags(e: &CqTaggedEntry, want: OpFlags, what: &str) {
    assert!(
        OpFlags::from_bits_retain(e.flags).contains(want),
        "{what}: completion flags {} lack {want} ({})",
        OpFlags::from_bits_retain(e.flags),
        show(e)
    );
}
