//! In-process tests of the provider through the public ofi-core API: the provider is
//! registered the way a linked-in provider is (`init_builtin`, which goes through the
//! same C-ABI tables a plugin uses), then two endpoints of this process talk.
//!
//! Run with `cargo test --manifest-path examples/vendor-provider/Cargo.toml`.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

use ofi_core::abi::raw::{CqErrEntry, CqMsgEntry, Iov, Msg};
use ofi_core::av::{AddressVector, AvAttr};
use ofi_core::cq::{CompletionQueue, CqAttr};
use ofi_core::domain::Domain;
use ofi_core::ep::Endpoint;
use ofi_core::fabric::Fabric;
use ofi_core::getinfo::GetinfoRequest;
use ofi_core::provider::{init_builtin, ProviderHandle};
use ofi_core::version::API_VERSION;
use ofi_core::{AddrFormat, Address, CqFormat, Errno, Info, OpFlags, WaitObj, ADDR_NOTAVAIL};
use ofi_prov_unixdgram::UnixDgram;

/// One endpoint with its CQ (both directions) and AV.
struct Node {
    ep: Endpoint,
    cq: CompletionQueue,
    av: AddressVector,
    addr: Address,
}

struct World {
    nodes: Vec<Node>,
    info: Info,
    _domain: Domain,
    _fabric: Fabric,
    _prov: ProviderHandle,
}

const MSG: u64 = OpFlags::MSG.bits();
const SEND: u64 = OpFlags::SEND.bits();
const RECV: u64 = OpFlags::RECV.bits();

fn info_and_fabric() -> (ProviderHandle, Info, Fabric) {
    let prov = init_builtin::<UnixDgram>().expect("provider init");
    let mut req = GetinfoRequest::new(API_VERSION);
    req.hints = Some(Info::hints().with_provider("unixdgram"));
    let out = prov.getinfo(&req);
    assert!(out.error.is_none(), "{:?}", out.error);
    let info = out.infos.into_iter().next().expect("a getinfo result");
    let fabric = prov.open_fabric(&info).expect("fabric");
    (prov, info, fabric)
}

fn node(domain: &Domain, info: &Info, cq_attr: &CqAttr, cq_flags: OpFlags) -> Node {
    let cq = domain.cq_open(cq_attr).expect("cq");
    let av = domain.av_open(&AvAttr::default()).expect("av");
    let ep = domain.endpoint(info).expect("endpoint");
    ep.bind(&cq, cq_flags).expect("bind cq");
    ep.bind_av(&av).expect("bind av");
    ep.enable().expect("enable");
    let addr = Address::from_bytes(AddrFormat::STR, &ep.getname().unwrap()).unwrap();
    Node { ep, cq, av, addr }
}

/// `n` endpoints, each knowing all the others (fabric address i = endpoint i).
fn world(n: usize, cq_attr: CqAttr) -> World {
    let (prov, info, fabric) = info_and_fabric();
    let domain = fabric.domain(&info).expect("domain");
    let nodes: Vec<Node> = (0..n)
        .map(|_| node(&domain, &info, &cq_attr, OpFlags::TRANSMIT | OpFlags::RECV))
        .collect();
    let addrs: Vec<Address> = nodes.iter().map(|n| n.addr.clone()).collect();
    for nd in &nodes {
        assert_eq!(
            nd.av.insert(&addrs).unwrap(),
            (0..n as u64).collect::<Vec<_>>()
        );
    }
    World {
        nodes,
        info,
        _domain: domain,
        _fabric: fabric,
        _prov: prov,
    }
}

fn msg_cq() -> CqAttr {
    CqAttr {
        wait_obj: WaitObj::Unspec,
        ..CqAttr::with_format(CqFormat::Msg)
    }
}

/// Read one completion (successful or not) within a few seconds.
fn next(cq: &CompletionQueue) -> Result<(CqMsgEntry, u64), CqErrEntry> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut e = [CqMsgEntry::default()];
        let mut src = [0u64];
        match cq.readfrom(&mut e, &mut src) {
            Ok(1) => return Ok((e[0], src[0])),
            Err(err) if err.code() == Errno::EAVAIL => {
                let mut mine = [0x5Au8; 16];
                let mut ee = CqErrEntry {
                    err_data: mine.as_mut_ptr() as *mut std::ffi::c_void,
                    err_data_size: mine.len(),
                    ..CqErrEntry::default()
                };
                cq.readerr(&mut ee, 0).unwrap();
                // This provider has no error data: nothing is copied into the buffer.
                assert_eq!(ee.err_data_size, 0);
                assert_eq!(mine, [0x5A; 16]);
                ee.err_data = std::ptr::null_mut();
                return Err(ee);
            }
            Err(err) if err.code() == Errno::EAGAIN => {}
            other => panic!("cq read: {other:?}"),
        }
        assert!(Instant::now() < deadline, "no completion within 5 s");
        std::thread::yield_now();
    }
}

#[test]
fn loopback_send_recv_with_source_addresses() {
    let w = world(2, msg_cq());
    let (a, b) = (&w.nodes[0], &w.nodes[1]);
    assert!(
        matches!(&a.addr, Address::Str(s) if s.starts_with("fi_unixdgram://")),
        "{}",
        a.addr
    );
    assert_eq!(a.av.lookup(1).unwrap(), b.addr);

    for round in 0..50u8 {
        let out: Vec<u8> = (0..(round as usize * 37 + 1))
            .map(|i| (i as u8) ^ round)
            .collect();
        let mut inb = vec![0u8; 4096];
        // SAFETY: both buffers outlive the operations, whose completions are read below.
        unsafe {
            b.ep.recv(
                inb.as_mut_ptr(),
                inb.len(),
                std::ptr::null_mut(),
                ADDR_NOTAVAIL,
                100 + round as usize,
            )
            .unwrap();
            a.ep.send(
                out.as_ptr(),
                out.len(),
                std::ptr::null_mut(),
                1,
                200 + round as usize,
            )
            .unwrap();
        }
        let (tx, _) = next(&a.cq).unwrap();
        assert_eq!(
            (tx.op_context, tx.flags, tx.len),
            (200 + round as usize, SEND | MSG, out.len())
        );
        let (rx, src) = next(&b.cq).unwrap();
        assert_eq!(
            (rx.op_context, rx.flags, rx.len),
            (100 + round as usize, RECV | MSG, out.len())
        );
        assert_eq!(
            src, 0,
            "FI_SOURCE: the sender is fabric address 0 in b's AV"
        );
        assert_eq!(&inb[..out.len()], &out[..]);
    }
}

#[test]
fn vectored_and_msg_forms_and_inject() {
    let w = world(2, msg_cq());
    let (a, b) = (&w.nodes[0], &w.nodes[1]);
    let (p1, p2) = (b"hello, ".to_vec(), b"world".to_vec());
    let mut r1 = [0u8; 3];
    let mut r2 = [0u8; 16];
    let riov = [
        Iov {
            base: r1.as_mut_ptr().cast(),
            len: r1.len(),
        },
        Iov {
            base: r2.as_mut_ptr().cast(),
            len: r2.len(),
        },
    ];
    let siov = [Iov::from_slice(&p1), Iov::from_slice(&p2)];
    // SAFETY: every buffer outlives its operation.
    unsafe {
        b.ep.recvv(
            riov.as_ptr(),
            std::ptr::null(),
            riov.len(),
            ADDR_NOTAVAIL,
            1,
        )
        .unwrap();
        a.ep.sendv(siov.as_ptr(), std::ptr::null(), siov.len(), 1, 2)
            .unwrap();
    }
    assert_eq!(next(&a.cq).unwrap().0.len, 12);
    assert_eq!(next(&b.cq).unwrap().0.len, 12);
    assert_eq!(&r1, b"hel");
    assert_eq!(&r2[..9], b"lo, world");

    let mut r = [0u8; 8];
    let rmsg = Msg {
        msg_iov: &Iov {
            base: r.as_mut_ptr().cast(),
            len: r.len(),
        },
        desc: std::ptr::null(),
        iov_count: 1,
        addr: ADDR_NOTAVAIL,
        context: 7,
        data: 0,
    };
    let payload = *b"msgform";
    let smsg = Msg {
        msg_iov: &Iov::from_slice(&payload),
        desc: std::ptr::null(),
        iov_count: 1,
        addr: 1,
        context: 8,
        data: 0,
    };
    // SAFETY: the messages and their buffers outlive the operations.
    unsafe {
        b.ep.recvmsg(&rmsg, OpFlags::COMPLETION.bits()).unwrap();
        a.ep.sendmsg(&smsg, OpFlags::COMPLETION.bits()).unwrap();
    }
    assert_eq!(next(&a.cq).unwrap().0.op_context, 8);
    assert_eq!(next(&b.cq).unwrap().0.op_context, 7);
    assert_eq!(&r[..7], b"msgform");

    // inject: no send completion, the buffer is free at once.
    let mut r = [0u8; 8];
    // SAFETY: `r` outlives the receive.
    unsafe {
        b.ep.recv(
            r.as_mut_ptr(),
            r.len(),
            std::ptr::null_mut(),
            ADDR_NOTAVAIL,
            9,
        )
        .unwrap()
    };
    a.ep.inject(b"inj", 1).unwrap();
    assert_eq!(next(&b.cq).unwrap().0.len, 3);
    let mut e = [CqMsgEntry::default()];
    assert_eq!(
        a.cq.read(&mut e).unwrap_err().code(),
        Errno::EAGAIN,
        "inject has no completion"
    );
}

#[test]
fn bad_input_has_the_right_codes() {
    let w = world(2, msg_cq());
    let (a, b) = (&w.nodes[0], &w.nodes[1]);
    let max = w.info.ep_attr.max_msg_size;
    let big = vec![0u8; max + 1];
    // SAFETY: the calls fail before touching any buffer, or the buffer outlives them.
    unsafe {
        let e =
            a.ep.send(big.as_ptr(), big.len(), std::ptr::null_mut(), 1, 0)
                .unwrap_err();
        assert_eq!(e.code(), Errno::EMSGSIZE);
        let e =
            a.ep.send(big.as_ptr(), 1, std::ptr::null_mut(), 99, 0)
                .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL, "fabric address not in the AV");
        let e =
            a.ep.send(big.as_ptr(), 1, std::ptr::null_mut(), ADDR_NOTAVAIL, 0)
                .unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL);
        let five = [Iov::from_slice(&big[..1]); 5];
        assert_eq!(
            a.ep.sendv(five.as_ptr(), std::ptr::null(), five.len(), 1, 0)
                .unwrap_err()
                .code(),
            Errno::EINVAL
        );
    }
    let e =
        a.ep.inject(&big[..w.info.tx_attr.inject_size + 1], 1)
            .unwrap_err();
    assert_eq!(e.code(), Errno::EMSGSIZE);
    assert_eq!(b.ep.cancel(12345).unwrap_err().code(), Errno::ENOENT);

    // AV: a malformed address is not inserted; removing an unknown one is FI_EINVAL.
    let bad = [
        Address::Str("fi_unixdgram://no spaces".into()),
        Address::Str("fi_tcp://x".into()),
    ];
    assert_eq!(
        a.av.insert(&bad).unwrap(),
        vec![ADDR_NOTAVAIL, ADDR_NOTAVAIL]
    );
    assert_eq!(a.av.remove(&[42], 0).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(a.av.lookup(42).unwrap_err().code(), Errno::EINVAL);

    // A removed peer is no longer a valid destination.
    a.av.remove(&[1], 0).unwrap();
    // SAFETY: fails before touching the buffer.
    let e = unsafe { a.ep.send(big.as_ptr(), 1, std::ptr::null_mut(), 1, 0) }.unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
}

#[test]
fn enable_checks_bindings_and_data_calls_need_it() {
    let (_prov, info, fabric) = info_and_fabric();
    let domain = fabric.domain(&info).unwrap();
    let cq = domain.cq_open(&msg_cq()).unwrap();
    let av = domain.av_open(&AvAttr::default()).unwrap();
    let ep = domain.endpoint(&info).unwrap();
    // SAFETY: fails before touching the buffer.
    let e = unsafe { ep.send([0u8].as_ptr(), 1, std::ptr::null_mut(), 0, 0) }.unwrap_err();
    assert_eq!(e.code(), Errno::EOPBADSTATE);
    assert_eq!(ep.enable().unwrap_err().code(), Errno::ENOAV);
    ep.bind_av(&av).unwrap();
    assert_eq!(ep.enable().unwrap_err().code(), Errno::ENOCQ);
    assert_eq!(
        ep.bind(&cq, OpFlags::COMPLETION).unwrap_err().code(),
        Errno::EBADFLAGS
    );
    ep.bind(&cq, OpFlags::TRANSMIT).unwrap();
    assert_eq!(
        ep.enable().unwrap_err().code(),
        Errno::ENOCQ,
        "no receive CQ yet"
    );
    assert_eq!(
        ep.bind(&cq, OpFlags::TRANSMIT).unwrap_err().code(),
        Errno::EINVAL
    );
    ep.bind(&cq, OpFlags::RECV).unwrap();
    ep.enable().unwrap();
    assert_eq!(
        ep.bind(&av, OpFlags::empty()).unwrap_err().code(),
        Errno::EOPBADSTATE
    );

    let mut other = info.clone();
    other.ep_attr.ep_type = ofi_core::EpType::Msg;
    assert_eq!(domain.endpoint(&other).unwrap_err().code(), Errno::EINVAL);
}

#[test]
fn a_receive_too_small_completes_with_etrunc_and_olen() {
    let w = world(2, msg_cq());
    let (a, b) = (&w.nodes[0], &w.nodes[1]);
    let mut small = [0u8; 10];
    let payload = [7u8; 25];
    // SAFETY: buffers outlive the operations.
    unsafe {
        b.ep.recv(
            small.as_mut_ptr(),
            small.len(),
            std::ptr::null_mut(),
            ADDR_NOTAVAIL,
            5,
        )
        .unwrap();
        a.ep.send(payload.as_ptr(), payload.len(), std::ptr::null_mut(), 1, 6)
            .unwrap();
    }
    next(&a.cq).unwrap();
    let err = next(&b.cq).unwrap_err();
    assert_eq!(err.err, Errno::ETRUNC.0);
    assert_eq!((err.op_context, err.len, err.olen), (5, 10, 15));
    assert_eq!(small, [7u8; 10]);
}

#[test]
fn cancel_completes_with_ecanceled() {
    let w = world(1, msg_cq());
    let a = &w.nodes[0];
    let mut buf = [0u8; 8];
    // SAFETY: the receive is cancelled before `buf` goes away.
    unsafe {
        a.ep.recv(
            buf.as_mut_ptr(),
            buf.len(),
            std::ptr::null_mut(),
            ADDR_NOTAVAIL,
            77,
        )
        .unwrap()
    };
    assert_eq!(a.ep.rx_size_left().unwrap(), w.info.rx_attr.size - 1);
    a.ep.cancel(77).unwrap();
    let err = next(&a.cq).unwrap_err();
    assert_eq!((err.op_context, err.err), (77, Errno::ECANCELED.0));
    assert_eq!(a.ep.cancel(77).unwrap_err().code(), Errno::ENOENT);
}

#[test]
fn a_full_cq_refuses_new_operations_with_eagain() {
    let attr = CqAttr {
        size: 2,
        ..msg_cq()
    };
    let w = world(2, attr);
    let (a, b) = (&w.nodes[0], &w.nodes[1]);
    let mut bufs = [[0u8; 4]; 3];
    // SAFETY: buffers outlive the operations (the third is refused).
    unsafe {
        for (i, buf) in bufs.iter_mut().enumerate() {
            let r =
                b.ep.recv(buf.as_mut_ptr(), 4, std::ptr::null_mut(), ADDR_NOTAVAIL, i);
            if i < 2 {
                r.unwrap();
            } else {
                assert_eq!(
                    r.unwrap_err().code(),
                    Errno::EAGAIN,
                    "no room for a third completion"
                );
            }
        }
        let p = [1u8];
        a.ep.send(p.as_ptr(), 1, std::ptr::null_mut(), 1, 0)
            .unwrap();
        a.ep.send(p.as_ptr(), 1, std::ptr::null_mut(), 1, 0)
            .unwrap();
        let e =
            a.ep.send(p.as_ptr(), 1, std::ptr::null_mut(), 1, 0)
                .unwrap_err();
        assert_eq!(e.code(), Errno::EAGAIN, "the transmit CQ is full");
    }
    let mut e = [CqMsgEntry::default(); 2];
    let mut read = 0;
    while read < 2 {
        match a.cq.read(&mut e) {
            Ok(n) => read += n,
            Err(err) => assert_eq!(err.code(), Errno::EAGAIN),
        }
    }
    let p = [1u8];
    // SAFETY: `p` outlives the send (completions are immediate).
    unsafe {
        a.ep.send(p.as_ptr(), 1, std::ptr::null_mut(), 1, 0)
            .unwrap()
    };
}

#[test]
fn sread_waits_for_data_and_times_out() {
    let w = world(1, msg_cq());
    let b = &w.nodes[0];
    let mut e = [CqMsgEntry::default()];
    let t0 = Instant::now();
    assert_eq!(b.cq.sread(&mut e, 50).unwrap_err().code(), Errno::EAGAIN);
    assert!(t0.elapsed() >= Duration::from_millis(50));

    let mut buf = [0u8; 4];
    // SAFETY: `buf` outlives the receive, completed below.
    unsafe {
        b.ep.recv(buf.as_mut_ptr(), 4, std::ptr::null_mut(), ADDR_NOTAVAIL, 3)
            .unwrap()
    };
    let sender = std::thread::spawn({
        let addr = b.addr.clone();
        move || {
            std::thread::sleep(Duration::from_millis(30));
            // A plain socket of this process, not an endpoint: any peer may send.
            let s = UnixDatagram::unbound().unwrap();
            let Address::Str(text) = addr else {
                unreachable!()
            };
            let name = text.trim_start_matches("fi_unixdgram://");
            s.send_to_addr(b"ping", &SocketAddr::from_abstract_name(name).unwrap())
                .unwrap();
        }
    });
    assert_eq!(b.cq.sread(&mut e, 5000).unwrap(), 1);
    assert_eq!((e[0].op_context, e[0].len), (3, 4));
    assert_eq!(&buf, b"ping");
    sender.join().unwrap();
}

#[test]
fn datagrams_from_strangers_are_delivered_without_a_source() {
    let w = world(1, msg_cq());
    let a = &w.nodes[0];
    let Address::Str(text) = &a.addr else {
        unreachable!()
    };
    let to = SocketAddr::from_abstract_name(text.trim_start_matches("fi_unixdgram://")).unwrap();
    let stranger = UnixDatagram::unbound().unwrap();
    let mut bufs = [[0u8; 64]; 3];
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: the buffers outlive the receives, completed below.
        unsafe {
            a.ep.recv(b.as_mut_ptr(), 64, std::ptr::null_mut(), ADDR_NOTAVAIL, i)
                .unwrap()
        };
    }
    stranger.send_to_addr(b"", &to).unwrap();
    stranger.send_to_addr(&[0xff; 64], &to).unwrap();
    stranger.send_to_addr(&[0u8; 200], &to).unwrap();
    let (c0, src0) = next(&a.cq).unwrap();
    assert_eq!((c0.op_context, c0.len, src0), (0, 0, ADDR_NOTAVAIL));
    let (c1, src1) = next(&a.cq).unwrap();
    assert_eq!((c1.op_context, c1.len, src1), (1, 64, ADDR_NOTAVAIL));
    let e = next(&a.cq).unwrap_err();
    assert_eq!((e.op_context, e.err, e.olen), (2, Errno::ETRUNC.0, 136));
}

#[test]
fn selective_completion_skips_unflagged_sends() {
    let (_prov, info, fabric) = info_and_fabric();
    let domain = fabric.domain(&info).unwrap();
    let mut tx_info = info.clone();
    tx_info.tx_attr.op_flags = OpFlags::empty();
    let a = node(
        &domain,
        &tx_info,
        &msg_cq(),
        OpFlags::TRANSMIT | OpFlags::RECV | OpFlags::SELECTIVE_COMPLETION,
    );
    let b = node(&domain, &info, &msg_cq(), OpFlags::TRANSMIT | OpFlags::RECV);
    let to_b = a.av.insert(std::slice::from_ref(&b.addr)).unwrap()[0];
    let p = [1u8];
    // SAFETY: `p` outlives the sends (completions are immediate).
    unsafe {
        a.ep.send(p.as_ptr(), 1, std::ptr::null_mut(), to_b, 1)
            .unwrap()
    };
    let mut e = [CqMsgEntry::default()];
    assert_eq!(a.cq.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
    let msg = Msg {
        msg_iov: &Iov::from_slice(&p),
        desc: std::ptr::null(),
        iov_count: 1,
        addr: to_b,
        context: 2,
        data: 0,
    };
    // SAFETY: as above.
    unsafe { a.ep.sendmsg(&msg, OpFlags::COMPLETION.bits()).unwrap() };
    assert_eq!(next(&a.cq).unwrap().0.op_context, 2);
}

#[test]
fn the_provider_can_be_opened_through_a_registry() {
    use ofi_core::abi::entry_for;
    use ofi_host::registry::{Registry, RegistryConfig};
    let reg = Registry::build(RegistryConfig {
        builtins: vec![entry_for::<UnixDgram>()],
        ..Default::default()
    });
    let providers = reg.providers();
    assert_eq!(providers.len(), 1);
    assert_eq!(providers[0].name, "unixdgram");
    assert!(providers[0].path.is_none(), "linked in, not a plugin");
    let infos = reg.getinfo(&GetinfoRequest::new(API_VERSION)).unwrap();
    assert_eq!(infos.len(), 2, "one result per AV type");
    assert_eq!(infos[0].domain_attr.av_type, ofi_core::AvType::Map);
    assert_eq!(infos[1].domain_attr.av_type, ofi_core::AvType::Table);
    let fabric = reg.open_fabric(&infos[0]).unwrap();
    assert_eq!(fabric.provider(), "unixdgram");
}
