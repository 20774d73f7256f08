//! Scalable endpoints and shared contexts on shm, beyond the conformance checks: the
//! source address of a transmit context's messages, context indexes, the rules of
//! shared-context bindings, and two threads sending on their own contexts at once.
//! Every wait is bounded; no test leaves a region of its own in /dev/shm.

use std::time::{Duration, Instant};

use ofi::abi::raw::CqMsgEntry;
use ofi::av::{AddressVector, AvAttr};
use ofi::cq::{CompletionQueue, CqAttr};
use ofi::domain::Domain;
use ofi::ep::Endpoint;
use ofi::fabric::Fabric;
use ofi::getinfo::GetinfoRequest;
use ofi::registry::Registry;
use ofi::{Address, Caps, CqFormat, EpType, Errno, Info, OpFlags, API_VERSION};
use ofi_conformance::fixture::{first_info, post_recv, send};

const BOUND: Duration = Duration::from_secs(20);

/// The tests count this process's regions: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn registry() -> Registry {
    ofi_conformance::plugin::linked_registry(&[ofi::abi::entry_for::<ofi_prov_shm::ShmProvider>()])
}

/// An info with `FI_SOURCE`, two transmit and two receive contexts.
fn info(reg: &Registry) -> Info {
    let mut hints = Info::hints()
        .with_ep_type(EpType::Rdm)
        .with_caps(Caps::MSG | Caps::TAGGED | Caps::SOURCE | Caps::NAMED_RX_CTX);
    hints.fabric_attr.prov_name = Some("shm".into());
    hints.ep_attr.tx_ctx_cnt = 2;
    hints.ep_attr.rx_ctx_cnt = 2;
    let i = first_info(reg, hints);
    assert_eq!((i.ep_attr.tx_ctx_cnt, i.ep_attr.rx_ctx_cnt), (2, 2));
    assert!(i.domain_attr.max_ep_tx_ctx >= 2 && i.domain_attr.max_ep_srx_ctx > 0);
    i
}

fn open(reg: &Registry, info: &Info) -> (Fabric, Domain) {
    let fabric = reg.open_fabric(info).expect("fabric");
    let domain = fabric.domain(info).expect("domain");
    (fabric, domain)
}

/// Runs `f` with an shm domain opened for [`info`] (alone among the tests that count
/// this process's regions), then asserts that closing it all left no region of this
/// process behind.
fn in_domain(f: impl FnOnce(&Info, &Domain)) {
    let _serial = serial();
    let reg = registry();
    let info = info(&reg);
    {
        let (_f, d) = open(&reg, &info);
        f(&info, &d);
    }
    assert_eq!(own_regions(), 0, "regions left behind");
}

fn cq(d: &Domain) -> CompletionQueue {
    d.cq_open(&CqAttr::with_format(CqFormat::Msg)).expect("cq")
}

fn name_of(ep: &Endpoint, info: &Info) -> Address {
    Address::from_bytes(info.addr_format, &ep.getname().expect("getname")).expect("address")
}

/// The next completion of `cq` with its source, within [`BOUND`].
fn wait_from(cq: &CompletionQueue) -> (CqMsgEntry, u64) {
    ofi_conformance::fixture::wait_from_ok(cq, BOUND, "a completion with its source")
}

fn own_regions() -> usize {
    let prefix = format!("ofi-shm-{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .count()
        })
        .unwrap_or(0)
}

/// A scalable endpoint with its AV bound (not enabled).
fn sep(d: &Domain, info: &Info, bits: i32) -> (Endpoint, AddressVector) {
    let av = d
        .av_open(&AvAttr {
            rx_ctx_bits: bits,
            ..AvAttr::default()
        })
        .expect("av");
    let sep = d.scalable_ep(info).expect("scalable_ep");
    sep.bind_av(&av).expect("scalable_ep_bind");
    (sep, av)
}

#[test]
fn a_transmit_context_sends_as_its_scalable_endpoint() {
    in_domain(|info, d| {
        let (sep, sav) = sep(d, info, 1);
        let tx = sep.tx_context(1, &info.tx_attr).expect("tx_context 1");
        let txcq = cq(d);
        tx.bind(&txcq, OpFlags::TRANSMIT).unwrap();
        tx.enable().unwrap();
        sep.enable().unwrap();
        // A plain receiver that knows the scalable endpoint's address.
        let rcq = cq(d);
        let rav = d.av_open(&AvAttr::default()).unwrap();
        let rx = d.endpoint(info).unwrap();
        rx.bind(&rcq, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        rx.bind_av(&rav).unwrap();
        rx.enable().unwrap();
        let sep_addr = rav.insert(&[name_of(&sep, info)]).unwrap()[0];
        let dest = sav.insert(&[name_of(&rx, info)]).unwrap()[0];
        let mut buf = vec![0u8; 16];
        post_recv(&rx, &mut buf, 7).unwrap();
        send(&tx, b"from tx 1", dest, 8).unwrap();
        let (c, src) = wait_from(&rcq);
        assert_eq!((c.op_context, c.len), (7, 9));
        assert_eq!(src, sep_addr, "the source is the scalable endpoint");
    });
}

#[test]
fn context_indexes_are_checked_and_open_once() {
    in_domain(|info, d| {
        let (sep, _av) = sep(d, info, 1);
        let code = |r: ofi::Result<Endpoint>| r.map(|_| ()).unwrap_err().code();
        assert_eq!(code(sep.tx_context(2, &info.tx_attr)), Errno::EINVAL);
        assert_eq!(code(sep.rx_context(-1, &info.rx_attr)), Errno::EINVAL);
        let mut rx0 = sep.rx_context(0, &info.rx_attr).expect("rx_context 0");
        assert_eq!(code(sep.rx_context(0, &info.rx_attr)), Errno::EBUSY);
        rx0.close().unwrap();
        // Closed: the index is free again.
        let _again = sep
            .rx_context(0, &info.rx_attr)
            .expect("rx_context 0 again");
        // A context of a context, or of an ordinary endpoint, is refused.
        let plain = d.endpoint(info).unwrap();
        assert!(plain.tx_context(0, &info.tx_attr).is_err());
        // The scalable endpoint itself carries no data.
        assert_eq!(
            send(&sep, b"x", 0, 1).unwrap_err().code(),
            Errno::EOPBADSTATE
        );
        // The scalable endpoint binds an AV only.
        let c = cq(d);
        assert_eq!(
            sep.bind(&c, OpFlags::TRANSMIT).unwrap_err().code(),
            Errno::EINVAL
        );
    });
}

#[test]
fn shared_context_bindings_follow_the_rules() {
    in_domain(|info, d| {
        let srx = d.srx_context(&info.rx_attr).expect("srx_context");
        let stx = d.stx_context(&info.tx_attr).expect("stx_context");
        let c = cq(d);
        // Nothing binds to a shared context.
        assert_eq!(
            srx.bind(&c, OpFlags::RECV).unwrap_err().code(),
            Errno::EINVAL
        );
        // A receive on it before any endpoint bound to it is enabled.
        let mut buf = vec![0u8; 8];
        assert_eq!(
            post_recv(&srx, &mut buf, 1).unwrap_err().code(),
            Errno::EOPBADSTATE
        );
        let ep = d.endpoint(info).unwrap();
        // An stx is not an srx, and flags are refused.
        assert_eq!(
            ep.bind(&stx, OpFlags::RECV).unwrap_err().code(),
            Errno::EBADFLAGS
        );
        ep.bind(&srx, OpFlags::empty()).unwrap();
        assert_eq!(
            ep.bind(&srx, OpFlags::empty()).unwrap_err().code(),
            Errno::EINVAL,
            "a second shared receive context"
        );
        ep.bind(&stx, OpFlags::empty()).unwrap();
        // Sending on the shared transmit context itself is refused.
        assert_eq!(
            send(&stx, b"x", 0, 1).unwrap_err().code(),
            Errno::EOPBADSTATE
        );
        // Enabled, the endpoint receives through the context: a receive posted to
        // the endpoint itself would never match, so it is refused; the context
        // takes it.
        let av = d.av_open(&AvAttr::default()).expect("av");
        ep.bind_av(&av).unwrap();
        ep.bind(&c, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
        ep.enable().unwrap();
        assert_eq!(
            post_recv(&ep, &mut buf, 2).unwrap_err().code(),
            Errno::EOPBADSTATE
        );
        post_recv(&srx, &mut buf, 3).expect("a receive on the shared context");
    });
}

/// Two threads, each on its own transmit and receive context, at once.
#[test]
fn two_threads_on_their_own_contexts() {
    const MSGS: usize = 2000;
    in_domain(|info, d| {
        let (sep, av) = sep(d, info, 1);
        let mut lanes = Vec::new();
        for i in 0..2 {
            let tx = sep.tx_context(i, &info.tx_attr).unwrap();
            let rx = sep.rx_context(i, &info.rx_attr).unwrap();
            let (tcq, rcq) = (cq(d), cq(d));
            tx.bind(&tcq, OpFlags::TRANSMIT).unwrap();
            rx.bind(&rcq, OpFlags::RECV).unwrap();
            tx.enable().unwrap();
            rx.enable().unwrap();
            lanes.push((tx, tcq, rx, rcq));
        }
        sep.enable().unwrap();
        let base = av.insert(&[name_of(&sep, info)]).unwrap()[0];
        std::thread::scope(|s| {
            for (i, (tx, tcq, rx, rcq)) in lanes.iter().enumerate() {
                let dest = ((i as u64) << 63) | base;
                s.spawn(move || {
                    let deadline = Instant::now() + BOUND;
                    let mut buf = vec![0u8; 8];
                    for n in 0..MSGS {
                        post_recv(rx, &mut buf, n).unwrap();
                        let msg = [i as u8, (n & 0xff) as u8];
                        send(tx, &msg, dest, n).unwrap();
                        let mut got = (false, false);
                        while got != (true, true) {
                            assert!(Instant::now() < deadline, "lane {i} stalled at {n}");
                            let mut e = [CqMsgEntry::default()];
                            if !got.0 && tcq.read(&mut e).is_ok() {
                                assert_eq!(e[0].op_context, n);
                                got.0 = true;
                            }
                            if !got.1 && rcq.read(&mut e).is_ok() {
                                assert_eq!((e[0].op_context, e[0].len), (n, 2));
                                got.1 = true;
                            }
                        }
                        assert_eq!(buf[..2], msg, "lane {i} got its own message {n}");
                    }
                });
            }
        });
    });
}

/// getinfo honours `tx_ctx_cnt` / `rx_ctx_cnt` up to the domain's 64; beyond,
/// `FI_ENODATA`; `fi_scalable_ep` refuses more contexts than that.
#[test]
fn context_counts_are_honoured_up_to_the_domain_limit() {
    let _serial = serial();
    let reg = registry();
    let ask = |tx: usize, rx: usize| {
        let mut hints = Info::hints().with_ep_type(EpType::Rdm);
        hints.fabric_attr.prov_name = Some("shm".into());
        hints.ep_attr.tx_ctx_cnt = tx;
        hints.ep_attr.rx_ctx_cnt = rx;
        reg.getinfo(&GetinfoRequest {
            hints: Some(hints),
            ..GetinfoRequest::new(API_VERSION)
        })
    };
    let i = ask(64, 3).expect("64 transmit and 3 receive contexts")[0].clone();
    assert_eq!((i.ep_attr.tx_ctx_cnt, i.ep_attr.rx_ctx_cnt), (64, 3));
    assert_eq!(
        (i.domain_attr.max_ep_tx_ctx, i.domain_attr.max_ep_rx_ctx),
        (64, 64)
    );
    for (tx, rx) in [(65, 1), (1, 65)] {
        assert_eq!(ask(tx, rx).unwrap_err().code(), Errno::ENODATA, "{tx}/{rx}");
    }
    {
        let (_f, d) = open(&reg, &i);
        let mut too_many = i.clone();
        too_many.ep_attr.rx_ctx_cnt = 65;
        assert_eq!(
            d.scalable_ep(&too_many).map(|_| ()).unwrap_err().code(),
            Errno::EINVAL
        );
    }
    assert_eq!(own_regions(), 0, "regions left behind");
}

/// Reading one context's CQ leaves the other contexts' rings alone (their own CQ
/// reads, or any drive that is no CQ read, progress them).
#[test]
fn a_cq_read_progresses_only_its_own_contexts() {
    in_domain(|info, d| {
        let (sep, av) = sep(d, info, 1);
        let mut rxs = Vec::new();
        for i in 0..2 {
            let rx = sep.rx_context(i, &info.rx_attr).unwrap();
            let c = cq(d);
            rx.bind(&c, OpFlags::RECV).unwrap();
            rx.enable().unwrap();
            rxs.push((rx, c));
        }
        let tx = sep.tx_context(0, &info.tx_attr).unwrap();
        let tcq = cq(d);
        tx.bind(&tcq, OpFlags::TRANSMIT).unwrap();
        tx.enable().unwrap();
        sep.enable().unwrap();
        let base = av.insert(&[name_of(&sep, info)]).unwrap()[0];
        let mut buf = vec![0u8; 8];
        post_recv(&rxs[1].0, &mut buf, 5).unwrap();
        let posted = rxs[1].0.rx_size_left().unwrap();
        send(&tx, b"to 1", (1 << 63) | base, 6).unwrap();
        let mut e = [CqMsgEntry::default()];
        for _ in 0..100 {
            assert_eq!(rxs[0].1.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
        }
        assert_eq!(
            rxs[1].0.rx_size_left().unwrap(),
            posted,
            "receive context 1 untouched by reads of context 0's CQ"
        );
        let (c, _) = wait_from(&rxs[1].1);
        assert_eq!((c.op_context, c.len), (5, 4));
        assert_eq!(rxs[1].0.rx_size_left().unwrap(), posted + 1);
    });
}

/// fi_endpoint(3), shared contexts: a message received through a shared receive
/// context completes on the receive CQ of the endpoint it was addressed to. Two
/// endpoints with separate CQs share one context; a third endpoint sends to each,
/// once into a receive posted before the message, once as an unexpected message whose
/// receive is posted after it arrived.
#[test]
fn a_shared_receive_context_reports_to_the_addressed_endpoints_cq() {
    in_domain(|info, d| {
        let srx = d.srx_context(&info.rx_attr).expect("srx_context");
        let mut eps = Vec::new();
        for _ in 0..2 {
            let ep = d.endpoint(info).unwrap();
            let (c, av) = (cq(d), d.av_open(&AvAttr::default()).expect("av"));
            ep.bind(&srx, OpFlags::empty()).unwrap();
            ep.bind_av(&av).unwrap();
            ep.bind(&c, OpFlags::TRANSMIT | OpFlags::RECV).unwrap();
            ep.enable().unwrap();
            eps.push((ep, c, av));
        }
        let sender = d.endpoint(info).unwrap();
        let (scq, sav) = (cq(d), d.av_open(&AvAttr::default()).expect("av"));
        sender.bind_av(&sav).unwrap();
        sender
            .bind(&scq, OpFlags::TRANSMIT | OpFlags::RECV)
            .unwrap();
        sender.enable().unwrap();
        let names: Vec<Address> = eps.iter().map(|(ep, ..)| name_of(ep, info)).collect();
        let dest = sav.insert(&names).unwrap();
        let mut bufs = [[0u8; 16]; 4];
        let [b0, b1, b2, b3] = &mut bufs;
        // Expected: the receives are posted first, in the order opposite to the sends.
        post_recv(&srx, b0, 0x10).unwrap();
        post_recv(&srx, b1, 0x11).unwrap();
        for (k, to) in [(0usize, 1usize), (1, 0)] {
            send(&sender, format!("to ep{to}").as_bytes(), dest[to], 0x20 + k).unwrap();
            let (c, _) = wait_from(&eps[to].1);
            assert_eq!(c.len, 6, "the message to ep{to} on ep{to}'s CQ");
            let (s, _) = wait_from(&scq);
            assert_eq!(s.op_context, 0x20 + k);
        }
        let mut e = [CqMsgEntry::default()];
        for (_, c, _) in &eps {
            assert_eq!(
                c.read(&mut e).unwrap_err().code(),
                Errno::EAGAIN,
                "one each"
            );
        }
        // Unexpected: the message is in before its receive is posted.
        send(&sender, b"late ep1", dest[1], 0x30).unwrap();
        assert_eq!(wait_from(&scq).0.op_context, 0x30);
        post_recv(&srx, b2, 0x12).unwrap();
        let (c, _) = wait_from(&eps[1].1);
        assert_eq!((c.op_context, c.len), (0x12, 8));
        assert_eq!(&b2[..8], b"late ep1");
        assert_eq!(eps[0].1.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
        post_recv(&srx, b3, 0x13).unwrap();
        send(&sender, b"late ep0", dest[0], 0x31).unwrap();
        assert_eq!(wait_from(&scq).0.op_context, 0x31);
        let (c, _) = wait_from(&eps[0].1);
        assert_eq!((c.op_context, c.len), (0x13, 8));
        assert_eq!(eps[1].1.read(&mut e).unwrap_err().code(), Errno::EAGAIN);
    });
}
