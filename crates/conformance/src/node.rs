//! What a provider's own RDM tests repeat, written once: an enabled endpoint with its
//! own fabric, domain, tagged CQ and AV ([`Node`]), two of them that know each other
//! ([`pair_of`]), the first getinfo answer of a provider ([`rdm_info`]), posting sends
//! and receives of whole buffers, and reading completions without waiting ([`poll`],
//! [`poll_from`]) or until one comes within a bound while other CQs are driven too
//! ([`wait_for`]).
//!
//! Unlike the checks (which take a [`crate::Subject`]), these reach the provider
//! through the process-wide registry ([`Node::open`]) or a fabric the test opened
//! itself ([`Node::in_fabric`]), as an application does.
//!
//! # What may panic
//!
//! This is test support: opening or binding an object, posting a receive, or reading a
//! CQ failing otherwise than with `FI_EAGAIN` panics, naming the call; so does
//! [`wait_for`] when nothing comes within its bound.

use std::time::{Duration, Instant};

use ofi::abi::raw::CqTaggedEntry;
use ofi::addr::Address;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::{AddrFormat, Caps, CqFormat, EpType, Errno, GetinfoFlags, Info, API_VERSION};

use crate::checks::tagged;
use crate::fixture;

/// The size of a [`Node`]'s CQ: room for every completion of a test's burst.
pub const CQ_SIZE: usize = 4096;

/// An enabled endpoint with its CQ (transmit and receive) and AV bound, and its name
/// (field order = drop order: the endpoint closes before what it is bound to).
#[derive(Debug)]
pub struct Node {
    /// The endpoint.
    pub ep: Endpoint,
    /// Its CQ (`FI_CQ_FORMAT_TAGGED`, [`CQ_SIZE`] entries).
    pub cq: CompletionQueue,
    /// Its AV.
    pub av: AddressVector,
    /// Its name (`fi_getname`, in `info.addr_format`).
    pub addr: Address,
    _domain: Domain,
    _fabric: Fabric,
}

impl Node {
    /// A node for `info` in a fabric of its own, opened through the process-wide
    /// registry (`ofi::fabric`).
    pub fn open(info: &Info) -> Node {
        Node::in_fabric(ofi::fabric(info).expect("fi_fabric"), info)
    }

    /// A node for `info` in `fabric` (e.g. opened from a registry of the test's own),
    /// with a domain of its own.
    pub fn in_fabric(fabric: Fabric, info: &Info) -> Node {
        Node::named_in(fabric, info, None)
    }

    /// A node for `info` whose endpoint is named `name` (`fi_setname`) before it is
    /// enabled, in a fabric of its own.
    pub fn named(info: &Info, name: &[u8]) -> Node {
        Node::named_in(ofi::fabric(info).expect("fi_fabric"), info, Some(name))
    }

    fn named_in(fabric: Fabric, info: &Info, name: Option<&[u8]>) -> Node {
        let domain = fabric.domain(info).expect("fi_domain");
        let (ep, cq, av, addr) = endpoint_named_in(&domain, info, name);
        Node {
            ep,
            cq,
            av,
            addr,
            _domain: domain,
            _fabric: fabric,
        }
    }

    /// The domain the node's objects belong to (to open more in it, e.g. a memory
    /// registration).
    pub fn domain(&self) -> &Domain {
        &self._domain
    }

    /// Inserts `addr` in this node's AV; its index there.
    pub fn insert(&self, addr: &Address) -> u64 {
        self.av
            .insert(std::slice::from_ref(addr))
            .expect("fi_av_insert")[0]
    }

    /// `fi_send` of the whole of `buf` to `dest` with context `ctx` (see
    /// [`fixture::send`]: the caller keeps `buf` until the send completes).
    pub fn send(&self, buf: &[u8], dest: u64, ctx: usize) -> ofi::Result<()> {
        fixture::send(&self.ep, buf, dest, ctx)
    }

    /// `fi_tsend` of the whole of `buf` to `dest` with `tag` and context `ctx` (see
    /// [`tagged::tsend`]: the caller keeps `buf` until the send completes); panics
    /// when refused.
    pub fn tsend(&self, buf: &[u8], dest: u64, tag: u64, ctx: usize) {
        tagged::tsend(&self.ep, buf, dest, tag, ctx);
    }

    /// `fi_recv` into the whole of `buf` from any source with context `ctx` (see
    /// [`fixture::post_recv`]: the caller keeps `buf` until the receive completes);
    /// panics when refused.
    pub fn recv(&self, buf: &mut [u8], ctx: usize) {
        fixture::post_recv(&self.ep, buf, ctx).expect("fi_recv");
    }

    /// `fi_trecv` into the whole of `buf` from any source, of tag `tag` exactly, with
    /// context `ctx` (see [`tagged::trecv`]: the caller keeps `buf` until the receive
    /// completes); panics when refused.
    pub fn trecv(&self, buf: &mut [u8], tag: u64, ctx: usize) {
        tagged::trecv(&self.ep, buf, ofi::ADDR_UNSPEC, tag, 0, ctx);
    }
}

/// An enabled endpoint of `domain` for `info`, with its own CQ (transmit and receive,
/// `FI_CQ_FORMAT_TAGGED`, [`CQ_SIZE`] entries) and AV bound, and its name.
pub fn endpoint_in(
    domain: &Domain,
    info: &Info,
) -> (Endpoint, CompletionQueue, AddressVector, Address) {
    endpoint_named_in(domain, info, None)
}

/// As [`endpoint_in`], the endpoint named `name` (`fi_setname`) before it is enabled
/// when one is given.
pub fn endpoint_named_in(
    domain: &Domain,
    info: &Info,
    name: Option<&[u8]>,
) -> (Endpoint, CompletionQueue, AddressVector, Address) {
    let cq_attr = CqAttr {
        size: CQ_SIZE,
        ..CqAttr::with_format(CqFormat::Tagged)
    };
    let av = domain.av_open(&AvAttr::default()).expect("fi_av_open");
    let (ep, cq) = fixture::unenabled_endpoint(domain, info, &cq_attr, &av);
    if let Some(name) = name {
        ep.setname(name).expect("fi_setname before fi_enable");
    }
    ep.enable().expect("fi_enable");
    let addr =
        Address::from_bytes(info.addr_format, &ep.getname().expect("getname")).expect("addr");
    (ep, cq, av, addr)
}

/// The first answer of the process-wide registry for provider (or stack) `prov`
/// (`"udp;ofi_rxd"`), `FI_EP_RDM` with `caps` in address format `fmt`; it must come
/// from `prov`.
pub fn rdm_info(prov: &str, fmt: AddrFormat, caps: Caps) -> Info {
    let mut h = Info::hints().with_addr_format(fmt).with_caps(caps);
    h.ep_attr.ep_type = EpType::Rdm;
    h.fabric_attr.prov_name = Some(prov.into());
    let infos = ofi::getinfo(API_VERSION, None, None, GetinfoFlags::empty(), Some(&h))
        .unwrap_or_else(|e| panic!("getinfo {prov}: {e}"));
    assert_eq!(infos[0].prov_name(), prov);
    infos[0].clone()
}

/// Two nodes for `info` (see [`Node::open`]), each in the other's AV: `(a, b, b's
/// index at a, a's index at b)`.
pub fn pair_of(info: &Info) -> (Node, Node, u64, u64) {
    let a = Node::open(info);
    let b = Node::open(info);
    let b_at_a = a.insert(&b.addr);
    let a_at_b = b.insert(&a.addr);
    (a, b, b_at_a, a_at_b)
}

/// A completion: the entry, or an error's context and code.
pub type Done = Result<CqTaggedEntry, (usize, Errno)>;

/// A completion with its source: the entry and the source's AV index, or an error's
/// context and code.
pub type DoneFrom = Result<(CqTaggedEntry, u64), (usize, Errno)>;

/// The next completion of `cq` if one is there (no waiting; reading drives progress).
pub fn poll(cq: &CompletionQueue) -> Option<Done> {
    let mut e = [CqTaggedEntry::default()];
    read_one(cq, cq.read(&mut e)).map(|r| r.map(|()| e[0]))
}

/// As [`poll`], with the completion's source (`fi_cq_readfrom`).
pub fn poll_from(cq: &CompletionQueue) -> Option<DoneFrom> {
    let mut e = [CqTaggedEntry::default()];
    let mut src = [0u64];
    read_one(cq, cq.readfrom(&mut e, &mut src)).map(|r| r.map(|()| (e[0], src[0])))
}

/// What a read of one entry of `cq` answered: `None` when there was none, the error
/// entry's context and code when the read said `FI_EAVAIL`.
fn read_one(cq: &CompletionQueue, read: ofi::Result<usize>) -> Option<Result<(), (usize, Errno)>> {
    match read {
        Ok(1) => Some(Ok(())),
        Ok(_) => None,
        Err(err) if err.code() == Errno::EAGAIN => None,
        Err(err) if err.code() == Errno::EAVAIL => {
            let ee = cq.readerr_owned(0).expect("readerr");
            Some(Err((ee.op_context, ee.err)))
        }
        Err(err) => panic!("cq read: {err}"),
    }
}

/// Drives the progress of each of `cqs` (reading none of their entries) for `span`:
/// messages in flight arrive meanwhile, e.g. as unexpected messages before their
/// receive is posted.
pub fn drive_for(cqs: &[&CompletionQueue], span: Duration) {
    let end = Instant::now() + span;
    while Instant::now() < end {
        for cq in cqs {
            let _ = cq.read::<CqTaggedEntry>(&mut []);
        }
    }
}

/// The first `Some` of `poll` within `bound`, reading the `others` (to drive their
/// progress) between tries; panics naming `what` when none comes in time.
pub fn wait_for<T>(
    others: &[&CompletionQueue],
    bound: Duration,
    what: &str,
    mut poll: impl FnMut() -> Option<T>,
) -> T {
    let end = Instant::now() + bound;
    loop {
        if let Some(d) = poll() {
            return d;
        }
        for o in others {
            let _ = o.read::<CqTaggedEntry>(&mut []);
        }
        assert!(Instant::now() < end, "{what}: nothing within {bound:?}");
        std::thread::yield_now();
    }
}
