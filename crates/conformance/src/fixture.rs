//! Objects the checks share: an opened fabric and domain, enabled endpoints (each with
//! its own CQ and an AV holding every endpoint's address), and bounded completion
//! waits.
//!
//! Helpers here panic with a message naming the step that failed: they are used from
//! checks (test code). Field order is drop order: endpoints, then CQs and AVs, then
//! the domain, then the fabric.

use std::time::{Duration, Instant};

use ofi::abi::raw::{CqEntryFormat, CqErrEntry, CqMsgEntry, Iov, Msg, MsgTagged};
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr, CqError};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{Address, CqFormat, Errno, Info, OpFlags, ADDR_NOTAVAIL, API_VERSION};

use crate::{Subject, WAIT};

/// One enabled endpoint with its CQ (bound for transmit and receive) and AV.
#[derive(Debug)]
pub struct Peer {
    /// The endpoint.
    pub ep: Endpoint,
    /// Its CQ (`FI_CQ_FORMAT_MSG`).
    pub cq: CompletionQueue,
    /// Its AV.
    pub av: AddressVector,
    /// Its own address (`fi_getname`).
    pub addr: Address,
}

/// A fabric, a domain, and `n` enabled endpoints that can all reach each other: in
/// every AV, endpoint `i` has fabric address `fi_addrs[i]`.
#[derive(Debug)]
pub struct Fixture {
    /// The endpoints.
    pub peers: Vec<Peer>,
    /// The fabric address of endpoint `i` (the same in every AV).
    pub fi_addrs: Vec<u64>,
    /// The domain.
    pub domain: Domain,
    /// The fabric.
    pub fabric: Fabric,
    /// The info everything was opened with.
    pub info: Info,
}

/// The first result of getinfo for a connectionless endpoint with `FI_MSG`.
pub fn msg_info(s: &Subject) -> Info {
    msg_info_with(s, ofi::Caps::MSG)
}

/// The first result of getinfo for a connectionless endpoint with `caps`.
pub fn msg_info_with(s: &Subject, caps: ofi::Caps) -> Info {
    let claims = s.claimed();
    let ep_type = claims
        .connectionless_type()
        .expect("a connectionless endpoint type");
    let hints = s.base_hints().with_ep_type(ep_type).with_caps(caps);
    let infos = s
        .getinfo_with(Some(hints), ofi::GetinfoFlags::empty())
        .unwrap_or_else(|e| panic!("getinfo for {ep_type} with {caps}: {e}"));
    infos[0].clone()
}

/// Open fabric and domain for `info`.
pub fn open_domain(s: &Subject, info: &Info) -> (Fabric, Domain) {
    let fabric = s
        .registry
        .open_fabric(info)
        .unwrap_or_else(|e| panic!("fi_fabric: {e}"));
    let domain = fabric
        .domain(info)
        .unwrap_or_else(|e| panic!("fi_domain: {e}"));
    (fabric, domain)
}

/// Closes `domain`, then `fabric`; either failing panics with the `fi_close` error.
pub fn close_domain(mut fabric: Fabric, mut domain: Domain) {
    domain
        .close()
        .unwrap_or_else(|e| panic!("fi_close(domain): {e}"));
    fabric
        .close()
        .unwrap_or_else(|e| panic!("fi_close(fabric): {e}"));
}

/// The first info `registry` answers for `hints` (`fi_getinfo` of this API version,
/// no node, service or flags); panics when there is none.
pub fn first_info(registry: &Registry, hints: Info) -> Info {
    let prov = hints.fabric_attr.prov_name.clone().unwrap_or_default();
    registry
        .getinfo(&GetinfoRequest {
            hints: Some(hints),
            ..GetinfoRequest::new(API_VERSION)
        })
        .unwrap_or_else(|e| panic!("fi_getinfo (provider {prov:?}): {e}"))
        .remove(0)
}

/// An endpoint of `domain` with a fresh CQ and AV bound, not yet enabled.
pub fn unenabled_peer(domain: &Domain, info: &Info) -> (Endpoint, CompletionQueue, AddressVector) {
    let av = domain
        .av_open(&AvAttr::default())
        .unwrap_or_else(|e| panic!("fi_av_open: {e}"));
    let (ep, cq) = unenabled_peer_on(domain, info, &av);
    (ep, cq, av)
}

/// An enabled endpoint of `domain` with a fresh CQ (`FI_CQ_FORMAT_MSG`) and a fresh AV
/// bound: [`unenabled_peer`], enabled.
pub fn enabled_peer(domain: &Domain, info: &Info) -> (Endpoint, CompletionQueue, AddressVector) {
    enabled_endpoint(domain, info, &CqAttr::with_format(CqFormat::Msg))
}

/// An endpoint of `domain` with a fresh CQ (`FI_CQ_FORMAT_MSG`) and `av` bound, not
/// yet enabled.
pub fn unenabled_peer_on(
    domain: &Domain,
    info: &Info,
    av: &AddressVector,
) -> (Endpoint, CompletionQueue) {
    unenabled_endpoint(domain, info, &CqAttr::with_format(CqFormat::Msg), av)
}

/// An endpoint of `domain` for `info` with a fresh CQ opened with `cq_attr` (bound for
/// transmit and receive) and `av` bound, not yet enabled.
pub fn unenabled_endpoint(
    domain: &Domain,
    info: &Info,
    cq_attr: &CqAttr,
    av: &AddressVector,
) -> (Endpoint, CompletionQueue) {
    let cq = domain
        .cq_open(cq_attr)
        .unwrap_or_else(|e| panic!("fi_cq_open ({:?}): {e}", cq_attr.format));
    let ep = domain
        .endpoint(info)
        .unwrap_or_else(|e| panic!("fi_endpoint: {e}"));
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .unwrap_or_else(|e| panic!("fi_ep_bind CQ: {e}"));
    ep.bind_av(av)
        .unwrap_or_else(|e| panic!("fi_ep_bind AV: {e}"));
    (ep, cq)
}

/// An enabled endpoint of `domain` for `info` with a fresh CQ opened with `cq_attr`
/// (bound for transmit and receive) and a fresh AV of its own bound.
pub fn enabled_endpoint(
    domain: &Domain,
    info: &Info,
    cq_attr: &CqAttr,
) -> (Endpoint, CompletionQueue, AddressVector) {
    let av = domain
        .av_open(&AvAttr::default())
        .unwrap_or_else(|e| panic!("fi_av_open: {e}"));
    let (ep, cq) = unenabled_endpoint(domain, info, cq_attr, &av);
    ep.enable().unwrap_or_else(|e| panic!("fi_enable: {e}"));
    (ep, cq, av)
}

/// The address of `ep` (`fi_getname`), in `info`'s format.
pub fn name_of(ep: &Endpoint, info: &Info) -> Address {
    let bytes = ep.getname().unwrap_or_else(|e| panic!("fi_getname: {e}"));
    Address::from_bytes(info.addr_format, &bytes)
        .unwrap_or_else(|e| panic!("fi_getname returned an address that does not decode: {e}"))
}

impl Fixture {
    /// `n` enabled endpoints of one domain for [`msg_info`].
    pub fn new(s: &Subject, n: usize) -> Fixture {
        Fixture::with_info(s, msg_info(s), n)
    }

    /// `n` enabled endpoints of one domain for `info`.
    pub fn with_info(s: &Subject, info: Info, n: usize) -> Fixture {
        let (fabric, domain) = open_domain(s, &info);
        let mut peers = Vec::new();
        for _ in 0..n {
            let (ep, cq, av) = unenabled_peer(&domain, &info);
            ep.enable().unwrap_or_else(|e| panic!("fi_enable: {e}"));
            let addr = name_of(&ep, &info);
            peers.push(Peer { ep, cq, av, addr });
        }
        let addrs: Vec<Address> = peers.iter().map(|p| p.addr.clone()).collect();
        let mut fi_addrs = Vec::new();
        for (i, p) in peers.iter().enumerate() {
            let got =
                p.av.insert(&addrs)
                    .unwrap_or_else(|e| panic!("fi_av_insert of the endpoints' addresses: {e}"));
            assert!(
                got.iter().all(|&a| a != ADDR_NOTAVAIL),
                "fi_av_insert failed for some own address: {got:?}"
            );
            if i == 0 {
                fi_addrs = got;
            } else {
                assert_eq!(
                    got, fi_addrs,
                    "the AVs give the same addresses different numbers; the suite needs them equal"
                );
            }
        }
        Fixture {
            peers,
            fi_addrs,
            domain,
            fabric,
            info,
        }
    }
}

/// The next completion of `cq` with its source address (`fi_cq_readfrom`, entries of
/// format `E`) within `bound`: the entry and its source, the error entry after
/// `FI_EAVAIL`, or `None` when nothing came. Any other read error panics.
pub fn read_from_within<E: CqEntryFormat>(
    cq: &CompletionQueue,
    bound: Duration,
) -> Option<std::result::Result<(E, u64), CqError>> {
    let deadline = Instant::now() + bound;
    loop {
        let mut e = [E::default()];
        let mut src = [0u64];
        match cq.readfrom(&mut e, &mut src) {
            Ok(1) => return Some(Ok((e[0], src[0]))),
            Ok(n) => panic!("fi_cq_readfrom of one entry returned {n}"),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                return Some(Err(cq
                    .readerr_owned(0)
                    .unwrap_or_else(|e| panic!("fi_cq_readerr after FI_EAVAIL: {e}"))));
            }
            Err(err) => panic!("fi_cq_readfrom: {err}"),
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::yield_now();
    }
}

/// The next completion of `cq` with its source address within `bound` (see
/// [`read_from_within`]), which must come and succeed; `what` names it in a failure.
pub fn wait_from_ok<E: CqEntryFormat>(
    cq: &CompletionQueue,
    bound: Duration,
    what: &str,
) -> (E, u64) {
    match read_from_within(cq, bound) {
        Some(Ok(c)) => c,
        Some(Err(ee)) => panic!("{what}: error completion {ee:?}"),
        None => panic!("{what}: no completion within {bound:?}"),
    }
}

/// A completion: successful, or an error entry.
pub type Completion = std::result::Result<CqMsgEntry, CqErrEntry>;

/// The next completion of `cq` within [`WAIT`]; `None` if there was none.
pub fn wait(cq: &CompletionQueue) -> Option<Completion> {
    wait_within(cq, WAIT, Duration::ZERO)
}

/// The next completion of `cq` within `bound`, polling again after `pause` (zero: after
/// yielding the processor); `None` if there was none.
pub fn wait_within(cq: &CompletionQueue, bound: Duration, pause: Duration) -> Option<Completion> {
    let deadline = Instant::now() + bound;
    loop {
        let mut e = [CqMsgEntry::default()];
        match cq.read(&mut e) {
            Ok(1) => return Some(Ok(e[0])),
            Ok(n) => panic!("fi_cq_read of one entry returned {n}"),
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut ee = CqErrEntry::default();
                cq.readerr(&mut ee, 0)
                    .unwrap_or_else(|e| panic!("fi_cq_read said FI_EAVAIL, fi_cq_readerr: {e}"));
                return Some(Err(ee));
            }
            Err(err) => panic!("fi_cq_read: {err} ({})", err.code()),
        }
        if Instant::now() >= deadline {
            return None;
        }
        if pause.is_zero() {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
        }
    }
}

/// The next successful completion of `cq` (panics on an error entry or after [`WAIT`]).
pub fn wait_ok(cq: &CompletionQueue, what: &str) -> CqMsgEntry {
    expect_ok(wait(cq), what)
}

/// The entry of a successful completion `c` (one of [`WAIT`]'s waits); an error entry
/// or none at all panics, naming `what`.
pub fn expect_ok<E>(c: Option<std::result::Result<E, CqErrEntry>>, what: &str) -> E {
    match c {
        Some(Ok(e)) => e,
        Some(Err(ee)) => panic!(
            "{what}: error completion {} ({}), context {:#x}, olen {}",
            Errno(ee.err),
            ofi::error::strerror(ee.err),
            ee.op_context,
            ee.olen
        ),
        None => panic!("{what}: no completion within {WAIT:?}"),
    }
}

/// The next completion of `cq`, which must be an error entry.
pub fn wait_err(cq: &CompletionQueue, what: &str) -> CqErrEntry {
    match wait(cq) {
        Some(Err(ee)) => ee,
        Some(Ok(e)) => panic!("{what}: expected an error completion, got {e:?}"),
        None => panic!("{what}: no completion within {WAIT:?}"),
    }
}

/// Assert that `cq` has nothing to read now (`FI_EAGAIN`).
pub fn assert_empty(cq: &CompletionQueue, what: &str) {
    let mut e = [CqMsgEntry::default()];
    match cq.read(&mut e) {
        Err(err) => assert_eq!(err.code(), Errno::EAGAIN, "{what}: {err}"),
        Ok(n) => panic!("{what}: expected no completion, read {n}: {:?}", e[0]),
    }
}

/// Post a receive of `buf` on `ep` with `context`, from any source.
pub fn post_recv(ep: &Endpoint, buf: &mut [u8], context: usize) -> ofi::Result<()> {
    post_recv_from(ep, buf, ADDR_NOTAVAIL, context)
}

/// Post a receive of `buf` on `ep` with `context`, taking only what `src` sends (a
/// directed receive, `FI_DIRECTED_RECV`; `ADDR_NOTAVAIL`: any source).
pub fn post_recv_from(ep: &Endpoint, buf: &mut [u8], src: u64, context: usize) -> ofi::Result<()> {
    // SAFETY: every caller keeps `buf` alive and untouched until the receive's
    // completion has been read, or the endpoint is gone (see the checks).
    unsafe {
        ep.recv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            src,
            context,
        )
    }
}

/// Send `buf` from `ep` to `dest` with `context`.
pub fn send(ep: &Endpoint, buf: &[u8], dest: u64, context: usize) -> ofi::Result<()> {
    // SAFETY: `buf` lives across the call; callers keep it until the send completes
    // (a send completion is read before the buffer is dropped or reused).
    unsafe { ep.send(buf.as_ptr(), buf.len(), std::ptr::null_mut(), dest, context) }
}

/// `fi_trecv` of `buf` on `ep` for `tag` under `ignore`, from `src` (`ADDR_UNSPEC`:
/// any source), with `ctx`; panics if the call fails.
pub fn trecv(ep: &Endpoint, buf: &mut [u8], src: u64, tag: u64, ignore: u64, ctx: usize) {
    // SAFETY: callers keep `buf` until its completion is read or the endpoint is gone.
    unsafe {
        ep.trecv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            src,
            tag,
            ignore,
            ctx,
        )
    }
    .unwrap_or_else(|e| panic!("fi_trecv tag {tag:#x}: {e} ({})", e.code()));
}

/// `fi_tsend` of `buf` from `ep` to `dest` with `tag` and `ctx`; panics if the call
/// fails.
pub fn tsend(ep: &Endpoint, buf: &[u8], dest: u64, tag: u64, ctx: usize) {
    // SAFETY: callers keep `buf` until the send completion is read.
    unsafe {
        ep.tsend(
            buf.as_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            dest,
            tag,
            ctx,
        )
    }
    .unwrap_or_else(|e| panic!("fi_tsend tag {tag:#x}: {e} ({})", e.code()));
}

/// `fi_sendmsg` of `buf` (one iov, no descriptor, no CQ data) from `ep` to `dest` with
/// `context` and `flags` (e.g. a completion level such as `FI_DELIVERY_COMPLETE`).
pub fn sendmsg(
    ep: &Endpoint,
    buf: &[u8],
    dest: u64,
    context: usize,
    flags: OpFlags,
) -> ofi::Result<()> {
    let iov = [Iov {
        base: buf.as_ptr() as *mut std::ffi::c_void,
        len: buf.len(),
    }];
    let msg = Msg {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null(),
        iov_count: 1,
        addr: dest,
        context,
        data: 0,
    };
    // SAFETY: `iov` and `msg` live across the call (the provider copies the iov array);
    // callers keep `buf` until the send completes, as for `send`.
    unsafe { ep.sendmsg(&msg, flags.bits()) }
}

/// The error of `r`, which must fail with `code` (panics naming `what` otherwise).
#[track_caller]
pub fn expect_errno<T>(r: ofi::Result<T>, code: Errno, what: &str) -> ofi::Error {
    match r {
        Ok(_) => panic!("{what}: succeeded, expected {code}"),
        Err(e) => {
            assert_eq!(e.code(), code, "{what}: {e}");
            e
        }
    }
}

/// The iov of the whole of `buf` (valid while `buf` is borrowed).
pub fn iov_of(buf: &mut [u8]) -> Iov {
    Iov {
        base: buf.as_mut_ptr().cast(),
        len: buf.len(),
    }
}

/// `fi_recvmsg` of `buf` (one iov, no descriptor, any source) on `ep` with `context`
/// and `flags` (e.g. `FI_COMPLETION` or `FI_MULTI_RECV`).
pub fn recvmsg(ep: &Endpoint, buf: &mut [u8], context: usize, flags: OpFlags) -> ofi::Result<()> {
    let iov = [iov_of(buf)];
    let msg = Msg {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null(),
        iov_count: 1,
        addr: ofi::ADDR_UNSPEC,
        context,
        data: 0,
    };
    // SAFETY: `iov` and `msg` live across the call (the provider copies the iov array);
    // callers keep `buf` alive and untouched until the receive's completion has been
    // read (or the multi-receive buffer is released), as for `post_recv`.
    unsafe { ep.recvmsg(&msg, flags.bits()) }
}

/// `fi_trecvmsg` of `buf` (no iov when it is empty) for `tag` under `ignore`, with
/// `flags`.
pub fn trecvmsg(
    ep: &Endpoint,
    buf: &mut [u8],
    tag: u64,
    ignore: u64,
    context: usize,
    flags: OpFlags,
) -> ofi::Result<()> {
    let iov = [iov_of(buf)];
    let msg = MsgTagged {
        msg_iov: iov.as_ptr(),
        desc: std::ptr::null(),
        iov_count: if buf.is_empty() { 0 } else { 1 },
        addr: ofi::ADDR_UNSPEC,
        tag,
        ignore,
        context,
        data: 0,
    };
    // SAFETY: as in `recvmsg`: `iov` and `msg` live across the call; callers keep `buf`
    // alive until the receive's completion has been read.
    unsafe { ep.trecvmsg(&msg, flags.bits()) }
}

/// A recognisable payload of `len` bytes (varies with `seed`); each 2 KiB block of a
/// longer one differs from the others too, so a segment put in the wrong place shows.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

/// One successful completion of `cq` if there is one now (panics on an error entry).
pub fn poll_one(cq: &CompletionQueue) -> Option<CqMsgEntry> {
    let mut e = [CqMsgEntry::default()];
    match cq.read(&mut e) {
        Ok(1) => Some(e[0]),
        Ok(n) => panic!("fi_cq_read of one entry returned {n}"),
        Err(err) if err.code() == Errno::EAGAIN => None,
        Err(err) => panic!("fi_cq_read: {err} ({})", err.code()),
    }
}
