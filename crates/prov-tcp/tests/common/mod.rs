//! Helpers shared by the tcp provider's integration tests: a registry with the provider
//! linked in, getinfo for FI_EP_MSG, and bounded waits on EQs and CQs.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use ofi::abi::raw::{CqErrEntry, CqTaggedEntry};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::{Endpoint, PassiveEndpoint};
use ofi::eq::{EqAttr, EqErrorEntry, Event, EventQueue};
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{
    AddrFormat, Caps, CqFormat, EpType, EqEvent, Errno, GetinfoFlags, Info, OpFlags, Progress,
    API_VERSION,
};
use ofi_conformance::plugin::linked_registry;

/// Every wait is bounded by this.
pub const WAIT: Duration = Duration::from_secs(3);

/// Whether the provider starts (a fresh registry's getinfo finds tcp) with the
/// environment as it is now.
pub fn tcp_starts() -> bool {
    let mut h = Info::hints();
    h.fabric_attr.prov_name = Some("tcp".into());
    registry()
        .getinfo(&GetinfoRequest {
            hints: Some(h),
            ..GetinfoRequest::new(API_VERSION)
        })
        .is_ok_and(|v| !v.is_empty())
}

/// A registry holding the provider, linked in.
pub fn registry() -> Registry {
    linked_registry(&[ofi::abi::entry_for::<ofi_prov_tcp::TcpProvider>()])
}

/// getinfo for FI_EP_MSG with `caps` on loopback (IPv6 with `v6`), manual data
/// progress.
pub fn info(reg: &Registry, v6: bool, caps: Caps) -> Info {
    info_progress(reg, v6, caps, Progress::Manual)
}

/// A fabric and a domain for tcp's FI_EP_MSG with `caps` on IPv4 loopback (manual
/// data progress), with the info they were opened with.
pub fn open_msg_domain(caps: Caps) -> (Info, Fabric, Domain) {
    let reg = registry();
    let info = info(&reg, false, caps);
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    (info, fabric, domain)
}

/// As [`info`] with data progress `progress`.
pub fn info_progress(reg: &Registry, v6: bool, caps: Caps, progress: Progress) -> Info {
    let mut hints = Info::hints()
        .with_ep_type(EpType::Msg)
        .with_caps(caps)
        .with_provider("tcp")
        .with_addr_format(if v6 {
            AddrFormat::SOCKADDR_IN6
        } else {
            AddrFormat::SOCKADDR_IN
        });
    hints.domain_attr.data_progress = progress;
    let infos = reg
        .getinfo(&GetinfoRequest {
            hints: Some(hints),
            node: Some(if v6 { "::1" } else { "127.0.0.1" }.into()),
            flags: GetinfoFlags::empty(),
            ..GetinfoRequest::new(API_VERSION)
        })
        .expect("getinfo");
    infos[0].clone()
}

/// The next EQ event within [`WAIT`]: `Ok(event)` or `Err(error entry)`.
pub fn eq_wait(eq: &EventQueue) -> Result<Event, EqErrorEntry> {
    let end = Instant::now() + WAIT;
    loop {
        match eq.read() {
            Ok(ev) => return Ok(ev),
            Err(e) if e.code() == Errno::EAVAIL => return Err(eq.readerr().expect("readerr")),
            Err(e) if e.code() == Errno::EAGAIN => {}
            Err(e) => panic!("fi_eq_read: {e}"),
        }
        assert!(Instant::now() < end, "no EQ event within {WAIT:?}");
        std::thread::yield_now();
    }
}

/// The next EQ event, which must be `what`.
pub fn eq_expect(eq: &EventQueue, what: EqEvent) -> Event {
    match eq_wait(eq) {
        Ok(ev) => {
            assert_eq!(ev.event, what, "event {ev:?}");
            ev
        }
        Err(e) => panic!("expected {what:?}, got error event {e:?}"),
    }
}

/// A completion: success or error entry.
pub type Comp = Result<CqTaggedEntry, CqErrEntry>;

/// The next completion of `cq` within [`WAIT`], driving `others` too.
pub fn cq_wait(cq: &CompletionQueue, others: &[&CompletionQueue]) -> Comp {
    let end = Instant::now() + WAIT;
    loop {
        let mut e = [CqTaggedEntry::default()];
        match cq.read(&mut e) {
            Ok(1) => return Ok(e[0]),
            Ok(n) => panic!("read {n}"),
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut ee = CqErrEntry::default();
                cq.readerr(&mut ee, 0).expect("readerr");
                return Err(ee);
            }
            Err(err) if err.code() == Errno::EAGAIN => {}
            Err(err) => panic!("fi_cq_read: {err}"),
        }
        for o in others {
            let _ = o.read(&mut Vec::<CqTaggedEntry>::new());
        }
        assert!(Instant::now() < end, "no completion within {WAIT:?}");
        std::thread::yield_now();
    }
}

/// The next completion of `cq` within [`WAIT`] (driving `others` too), which must
/// succeed and carry `context`.
pub fn cq_expect_ctx(
    cq: &CompletionQueue,
    others: &[&CompletionQueue],
    context: usize,
) -> CqTaggedEntry {
    match cq_wait(cq, others) {
        Ok(e) => {
            assert_eq!(e.op_context, context, "completion {e:?}");
            e
        }
        Err(ee) => panic!("expected the completion of {context:#x}, got error entry {ee:?}"),
    }
}

/// One side of a connection.
pub struct Side {
    pub ep: Endpoint,
    pub cq: CompletionQueue,
    pub eq: EventQueue,
}

/// A connected pair in one fabric and domain, and the passive endpoint.
pub struct Pair {
    pub client: Side,
    pub server: Side,
    pub pep: PassiveEndpoint,
    pub domain: Domain,
    pub fabric: Fabric,
    pub info: Info,
}

/// A CQ (tagged format) and EQ bound to a new endpoint for `info`.
pub fn side(fabric: &Fabric, domain: &Domain, info: &Info) -> Side {
    let cq = domain
        .cq_open(&CqAttr::with_format(CqFormat::Tagged))
        .expect("cq_open");
    let eq = fabric.eq_open(&EqAttr::default()).expect("eq_open");
    let ep = domain.endpoint(info).expect("endpoint");
    ep.bind(&cq, OpFlags::TRANSMIT | OpFlags::RECV)
        .expect("bind cq");
    ep.bind_eq(&eq).expect("bind eq");
    Side { ep, cq, eq }
}

/// Keep `s`'s connection served for at most `bound`: read (and drop) its completions
/// every millisecond until `done(s)` says to stop.
pub fn serve_until(s: &Side, bound: Duration, mut done: impl FnMut(&Side) -> bool) {
    let end = Instant::now() + bound;
    while Instant::now() < end && !done(s) {
        let _ = s.cq.read(&mut Vec::<CqTaggedEntry>::new());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client of `reg` for `info`, in a fabric and domain of its own, connected to `to`
/// with connection data `data` (its `FI_CONNECTED` read): `(fabric, domain, side)`.
pub fn connected_client(
    reg: &Registry,
    info: &Info,
    to: std::net::SocketAddr,
    data: &[u8],
) -> (Fabric, Domain, Side) {
    let fabric = reg.open_fabric(info).unwrap();
    let domain = fabric.domain(info).unwrap();
    let c = side(&fabric, &domain, info);
    c.ep.connect(&ofi::Address::from(to).to_bytes(), data)
        .unwrap();
    eq_expect(&c.eq, EqEvent::Connected);
    (fabric, domain, c)
}

/// A listening passive endpoint and its EQ.
pub fn listener(fabric: &Fabric, info: &Info) -> (PassiveEndpoint, EventQueue) {
    let eq = fabric.eq_open(&EqAttr::default()).expect("eq_open");
    let pep = fabric.passive_ep(info).expect("passive_ep");
    pep.bind_eq(&eq, 0).expect("pep bind");
    pep.listen().expect("listen");
    (pep, eq)
}

/// The name of passive endpoint `pep` (of address format `fmt`) as a socket address.
pub fn pep_addr(pep: &PassiveEndpoint, fmt: AddrFormat) -> std::net::SocketAddr {
    ofi::Address::from_bytes(fmt, &pep.getname().expect("pep getname"))
        .expect("pep name")
        .socket_addr()
        .expect("an IP name")
}

/// A listener opened from scratch for `info`, with the fabric and domain its
/// connections use.
pub struct Listening {
    pub fabric: Fabric,
    pub domain: Domain,
    pub pep: PassiveEndpoint,
    pub eq: EventQueue,
    /// The listener's name.
    pub addr: std::net::SocketAddr,
}

/// [`listen`] on `FI_EP_MSG` info of `reg` (IPv6 with `v6`) without a source address:
/// the provider names the listener (`FI_TCP_IFACE`, or the first interface up).
pub fn listen_unbound(reg: &Registry, v6: bool) -> Listening {
    let mut info = info(reg, v6, Caps::MSG);
    info.src_addr = None;
    listen(reg, &info)
}

/// Open a fabric, a domain and a listener for `info` (from `reg`).
pub fn listen(reg: &Registry, info: &Info) -> Listening {
    let fabric = reg.open_fabric(info).expect("fabric");
    let domain = fabric.domain(info).expect("domain");
    let (pep, eq) = listener(&fabric, info);
    let addr = pep_addr(&pep, info.addr_format);
    Listening {
        fabric,
        domain,
        pep,
        eq,
        addr,
    }
}

/// [`listen`] for IPv4 `FI_MSG` (a new registry's info, returned too).
pub fn listen_v4_msg() -> (Info, Listening) {
    let reg = registry();
    let info = info(&reg, false, Caps::MSG);
    let l = listen(&reg, &info);
    (info, l)
}

/// The next connection request on listener EQ `peq`, accepted by an endpoint that has
/// a receive of `len` bytes (context 1) posted before the accept: the request's CM
/// data, the connected side, and the receive's buffer (keep it until the receive
/// completes; its bytes do not move with the box).
pub fn accept_with_recv(
    fabric: &Fabric,
    domain: &Domain,
    peq: &EventQueue,
    len: usize,
) -> (Vec<u8>, Side, Box<[u8]>) {
    let req = eq_expect(peq, EqEvent::ConnReq);
    let s = side(fabric, domain, req.info.as_ref().expect("connreq info"));
    s.ep.enable().expect("enable");
    let mut rb = vec![0u8; len].into_boxed_slice();
    // SAFETY: the buffer is heap memory the caller keeps until the receive completes.
    unsafe {
        s.ep.recv(rb.as_mut_ptr(), len, std::ptr::null_mut(), 0, 1)
            .expect("recv")
    };
    s.ep.accept(b"").expect("accept");
    eq_expect(&s.eq, EqEvent::Connected);
    (req.cm_data, s, rb)
}

/// Connect a pair with `cm_data` on both sides; returns the pair and the data each side
/// saw (server: with the request; client: with FI_CONNECTED).
pub fn connect_pair(v6: bool, caps: Caps) -> Pair {
    connect_pair_progress(v6, caps, Progress::Manual)
}

/// As [`connect_pair`] with data progress `progress`.
pub fn connect_pair_progress(v6: bool, caps: Caps, progress: Progress) -> Pair {
    let reg = registry();
    let info = info_progress(&reg, v6, caps, progress);
    connect_pair_with(&reg, info)
}

/// A client of `info` that asked a new listener to connect, with `cm_data`: the
/// client, the listener and its EQ (to keep open), and the request the listener got
/// (its CM data checked).
pub fn connect_request(
    fabric: &Fabric,
    domain: &Domain,
    info: &Info,
    cm_data: &[u8],
) -> (Side, (PassiveEndpoint, EventQueue), Info) {
    let (pep, peq) = listener(fabric, info);
    let addr = pep.getname().expect("pep getname");
    let client = side(fabric, domain, info);
    client.ep.enable().expect("enable");
    client.ep.connect(&addr, cm_data).expect("connect");
    let req = eq_expect(&peq, EqEvent::ConnReq);
    assert_eq!(req.cm_data, cm_data);
    (client, (pep, peq), *req.info.expect("connreq info"))
}

/// A connected pair opened with `info` (from `reg`).
pub fn connect_pair_with(reg: &Registry, info: Info) -> Pair {
    let fabric = reg.open_fabric(&info).expect("fabric");
    let domain = fabric.domain(&info).expect("domain");
    let (client, (pep, peq), rinfo) = connect_request(&fabric, &domain, &info, b"hello");
    let server = side(&fabric, &domain, &rinfo);
    server.ep.accept(b"welcome").expect("accept");
    let ev = eq_expect(&client.eq, EqEvent::Connected);
    assert_eq!(ev.cm_data, b"welcome");
    eq_expect(&server.eq, EqEvent::Connected);
    drop(peq);
    Pair {
        client,
        server,
        pep,
        domain,
        fabric,
        info,
    }
}

/// Sends `n` patterned bytes from `p`'s client to its server and changes the first 16
/// bytes of the source right after the send is posted — against the rule that a
/// buffer stays untouched until its send completes, on purpose, to see when the data
/// was taken (a same-host receiver copying at receive time sees the change; through
/// the socket, the kernel took the old bytes at the send) — then receives them and
/// waits for both completions. Returns the source before the change, the source after
/// it, and the bytes received.
pub fn send_changing_the_source(p: &Pair, n: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let null = std::ptr::null_mut();
    let (c, s) = (&p.client, &p.server);
    let mut src = ofi_conformance::fixture::pattern(n, 3);
    let orig = src.clone();
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { c.ep.send(src.as_ptr(), n, null, 0, 1).unwrap() };
    src[..16].copy_from_slice(b"changed-at-once!");
    let mut dst = vec![0u8; n];
    // SAFETY: the buffer outlives the operation (its completion is awaited).
    unsafe { s.ep.recv(dst.as_mut_ptr(), n, null, 0, 2).unwrap() };
    let e = cq_wait(&s.cq, &[&c.cq]).unwrap();
    assert_eq!((e.op_context, e.len), (2, n));
    let e = cq_wait(&c.cq, &[&s.cq]).unwrap();
    assert_eq!(e.op_context, 1);
    (orig, src, dst)
}

/// A raw TCP peer connected (CM exchange done by hand) to an endpoint of the provider,
/// for tests that speak the wire format directly.
pub struct RawConn {
    pub raw: std::net::TcpStream,
    pub s: Side,
    pub domain: Domain,
    pub fabric: Fabric,
}

/// Connect a raw stream to a fresh IPv4 endpoint with `caps`: the request goes out, the
/// endpoint is accepted, and the response is read off the stream.
pub fn raw_connection(caps: Caps) -> RawConn {
    use ofi_prov_tcp::proto::{self, CmKind};
    use std::io::{Read, Write};
    let (info, fabric, domain) = open_msg_domain(caps);
    let (pep, peq) = listener(&fabric, &info);
    let addr = ofi::Address::from_bytes(AddrFormat::SOCKADDR_IN, &pep.getname().unwrap())
        .unwrap()
        .socket_addr()
        .unwrap();
    let mut raw = std::net::TcpStream::connect(addr).expect("connect");
    raw.write_all(&proto::cm_message(CmKind::ConnReq, b"raw"))
        .unwrap();
    let ev = eq_expect(&peq, EqEvent::ConnReq);
    let s = side(&fabric, &domain, ev.info.as_ref().unwrap());
    s.ep.accept(b"").unwrap();
    eq_expect(&s.eq, EqEvent::Connected);
    let mut resp = [0u8; proto::CM_HDR_LEN];
    raw.read_exact(&mut resp).unwrap();
    assert_eq!(proto::CmHdr::parse(&resp).unwrap().kind, CmKind::ConnResp);
    RawConn {
        raw,
        s,
        domain,
        fabric,
    }
}

/// The descriptor of this process's socket whose local and peer addresses are `local`
/// and `peer` (found among /proc/self/fd), if there is one.
#[allow(dead_code)]
pub fn socket_fd_of(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> Option<i32> {
    fn addr(fd: i32, peer: bool) -> Option<std::net::SocketAddr> {
        // SAFETY: all-zero bytes are a valid sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = (&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
        // SAFETY: `ss` has room for `len` bytes; the kernel writes at most that.
        let r = unsafe {
            if peer {
                libc::getpeername(fd, p, &mut len)
            } else {
                libc::getsockname(fd, p, &mut len)
            }
        };
        if r != 0 {
            return None;
        }
        match i32::from(ss.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let a: libc::sockaddr_in =
                    unsafe { std::ptr::read((&ss as *const libc::sockaddr_storage).cast()) };
                Some(std::net::SocketAddr::from((
                    u32::from_be(a.sin_addr.s_addr).to_be_bytes(),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let a: libc::sockaddr_in6 =
                    unsafe { std::ptr::read((&ss as *const libc::sockaddr_storage).cast()) };
                Some(std::net::SocketAddr::from((
                    a.sin6_addr.s6_addr,
                    u16::from_be(a.sin6_port),
                )))
            }
            _ => None,
        }
    }
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Ok(fd) = entry.ok()?.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if addr(fd, false) == Some(local) && addr(fd, true) == Some(peer) {
            return Some(fd);
        }
    }
    None
}

/// The congestion control of this process's TCP socket whose local and peer
/// addresses are `local` and `peer` (found among /proc/self/fd), if there is one.
#[allow(dead_code)]
pub fn congestion_of(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> Option<String> {
    let fd = socket_fd_of(local, peer)?;
    let mut b = [0u8; 16];
    let mut len = b.len() as libc::socklen_t;
    // SAFETY: `b` has room for `len` bytes; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            b.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0).then(|| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    })
}

/// The system's default congestion control (what new sockets get).
#[allow(dead_code)]
pub fn system_congestion() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
