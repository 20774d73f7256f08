//! Unit tests of the `av` module (in their own file; they see its private items).

use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// A minimal provider family whose AV is `KitAv<()>` and whose MR is `KitMr`, to
/// drive both through core's tables (shared with the MR tests).
pub(crate) mod fam {
    use super::super::*;
    use crate::mr::{CounterHook, KitMr, MrConfig, MrEndpointTarget, MrTable, RmaCounterTarget};
    use ofi_core::cntr::CntrAttr;
    use ofi_core::cq::{CqAttr, CqBuf, CqError};
    use ofi_core::eq::EqAttr;
    use ofi_core::mr::MrAttr;
    use ofi_core::provider::{
        BindTarget, CntrOps, CqOps, DomainOps, EndpointOps, EqOps, Host, Provider,
    };
    use ofi_core::{Caps, EpType, Info, Version};
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicU64, Ordering};

    thread_local! {
        /// The MR table of the last domain opened on this thread.
        pub(crate) static LAST_TABLE: RefCell<Option<Arc<MrTable>>> = const { RefCell::new(None) };
    }

    pub(crate) fn last_table() -> Arc<MrTable> {
        LAST_TABLE
            .with(|t| t.borrow().clone())
            .expect("a domain was opened")
    }

    pub(crate) struct TProv;
    impl Provider for TProv {
        const NAME: &'static str = "kit_av_mr_test";
        const VERSION: Version = Version::new(1, 0);
        type Fabric = TFab;
        fn init(_host: &Host) -> Result<Self> {
            Ok(TProv)
        }
        fn info_templates(&self) -> Vec<Info> {
            vec![info(AddrFormat::SOCKADDR_IN, MrMode::empty())]
        }
        fn fabric(&self, _info: &Info) -> Result<TFab> {
            Ok(TFab)
        }
    }

    use ofi_core::flags::MrMode;

    pub(crate) fn info(format: AddrFormat, mode: MrMode) -> Info {
        let mut i = Info::new()
            .with_caps(Caps::MSG | Caps::RMA)
            .with_ep_type(EpType::Rdm)
            .with_addr_format(format);
        i.fabric_attr.name = Some("kit".into());
        i.fabric_attr.prov_name = Some(TProv::NAME.into());
        i.domain_attr.name = Some("kit0".into());
        i.domain_attr.mr_mode = mode;
        i
    }

    pub(crate) struct TFab;
    impl FabricOps for TFab {
        type Domain = TDom;
        type PassiveEp = Unsupported;
        type Eq = TEq;
        type Wait = Unsupported;
        fn domain(&self, info: &Info, _context: usize) -> Result<TDom> {
            let table = MrTable::new(MrConfig::new(info.domain_attr.mr_mode))?;
            LAST_TABLE.with(|t| *t.borrow_mut() = Some(table.clone()));
            Ok(TDom {
                format: info.addr_format,
                table,
            })
        }
        fn eq_open(&self, _attr: &EqAttr, _context: usize) -> Result<TEq> {
            Ok(TEq::default())
        }
    }

    pub(crate) struct TDom {
        format: AddrFormat,
        table: Arc<MrTable>,
    }
    impl DomainOps<TFab> for TDom {
        type Endpoint = TEp;
        type Cq = TCq;
        type Cntr = TCntr;
        type Av = KitAv<()>;
        type Mr = KitMr;
        fn endpoint(&self, _info: &Info, _context: usize, _flags: u64) -> Result<TEp> {
            static NEXT: AtomicU64 = AtomicU64::new(1);
            Ok(TEp(NEXT.fetch_add(1, Ordering::Relaxed)))
        }
        fn cq_open(&self, _attr: &CqAttr, _context: usize) -> Result<TCq> {
            Ok(TCq)
        }
        fn cntr_open(&self, _attr: &CntrAttr, _context: usize) -> Result<TCntr> {
            Ok(TCntr(Arc::new(AtomicU64::new(0))))
        }
        fn av_open(&self, attr: &AvAttr, context: usize) -> Result<KitAv<()>> {
            KitAv::open(attr, context, AvConfig::new(self.format))
        }
        fn mr_reg(&self, attr: &MrAttr<'_>, flags: u64) -> Result<KitMr> {
            self.table.register(attr, flags)
        }
    }

    pub(crate) struct TEp(pub(crate) u64);
    impl EndpointOps<TFab> for TEp {
        fn bind(&self, _target: BindTarget<'_, TFab>, _flags: OpFlags) -> Result<()> {
            Ok(())
        }
    }
    impl MrEndpointTarget for TEp {
        fn mr_endpoint_id(&self) -> u64 {
            self.0
        }
    }

    pub(crate) struct TCq;
    impl CqOps for TCq {
        fn read(&self, _buf: CqBuf<'_>, _src: Option<&mut [u64]>) -> Result<usize> {
            Err(Error::code_only(Errno::EAGAIN))
        }
        fn readerr(&self, _flags: u64) -> Result<CqError> {
            Err(Error::code_only(Errno::EAGAIN))
        }
    }

    pub(crate) struct TCntr(pub(crate) Arc<AtomicU64>);
    impl CntrOps for TCntr {
        fn read(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
        fn readerr(&self) -> u64 {
            0
        }
        fn add(&self, value: u64) -> Result<()> {
            self.0.fetch_add(value, Ordering::Relaxed);
            Ok(())
        }
        fn set(&self, value: u64) -> Result<()> {
            self.0.store(value, Ordering::Relaxed);
            Ok(())
        }
    }
    impl RmaCounterTarget for TCntr {
        fn rma_counter_hook(&self) -> Result<CounterHook> {
            let c = self.0.clone();
            Ok(CounterHook::new(move |n| {
                c.fetch_add(n, Ordering::Relaxed);
            }))
        }
    }

    type EqItem = std::result::Result<Event, EqErrorEntry>;

    #[derive(Default)]
    pub(crate) struct TEq {
        q: Arc<Mutex<VecDeque<EqItem>>>,
    }
    impl EqOps for TEq {
        fn read(&self, peek: bool) -> Result<Event> {
            let mut q = self.q.lock().unwrap();
            match q.front() {
                None => Err(Error::code_only(Errno::EAGAIN)),
                Some(Err(_)) => Err(Error::code_only(Errno::EAVAIL)),
                Some(Ok(e)) => {
                    let e = e.clone();
                    if !peek {
                        q.pop_front();
                    }
                    Ok(e)
                }
            }
        }
        fn readerr(&self) -> Result<EqErrorEntry> {
            let mut q = self.q.lock().unwrap();
            match q.front() {
                Some(Err(_)) => match q.pop_front() {
                    Some(Err(e)) => Ok(e),
                    _ => Err(Error::code_only(Errno::EAGAIN)),
                },
                _ => Err(Error::code_only(Errno::EAGAIN)),
            }
        }
    }
    impl AvEventTarget for TEq {
        fn av_event_sink(&self) -> Result<AvEventSink> {
            let q = self.q.clone();
            Ok(Arc::new(move |ev: AvEvent| {
                q.lock().unwrap().push_back(ev.into_eq());
            }))
        }
    }
}

use fam::TFab;

fn v4(s: &str) -> Address {
    Address::Inet(s.parse().unwrap())
}

fn attr(t: AvType) -> AvAttr {
    AvAttr {
        av_type: t,
        ..AvAttr::default()
    }
}

fn av(t: AvType) -> KitAv<()> {
    KitAv::open(&attr(t), 0x55, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap()
}

fn ok(v: Vec<Result<u64>>) -> Vec<u64> {
    v.into_iter().map(|r| r.unwrap()).collect()
}

fn code<T: fmt::Debug>(r: Result<T>) -> Errno {
    r.unwrap_err().code()
}

fn addrs(n: usize) -> Vec<Address> {
    (0..n)
        .map(|i| v4(&format!("10.0.0.{}:{}", i + 1, 7000 + i)))
        .collect()
}

#[test]
fn open_validates_the_attributes() {
    let cfg = || AvConfig::new(AddrFormat::SOCKADDR_IN);
    let open = |a: AvAttr| KitAv::<()>::open(&a, 0, cfg());
    for bits in [-1, 17] {
        let a = AvAttr {
            rx_ctx_bits: bits,
            ..AvAttr::default()
        };
        assert_eq!(code(open(a)), Errno::EINVAL, "rx_ctx_bits {bits}");
    }
    let named = AvAttr {
        name: Some("shared".into()),
        ..AvAttr::default()
    };
    assert_eq!(code(open(named)), Errno::ENOSYS);
    let ro = AvAttr {
        flags: AvFlags::READ,
        ..AvAttr::default()
    };
    assert_eq!(code(open(ro)), Errno::EINVAL);
    let bad = AvAttr {
        flags: AvFlags::from_bits_retain(1 << 3),
        ..AvAttr::default()
    };
    assert_eq!(code(open(bad)), Errno::EBADFLAGS);
    let fine = AvAttr {
        flags: AvFlags::SYMMETRIC | AvFlags::UNIVERSE,
        rx_ctx_bits: 16,
        count: 3,
        ..AvAttr::default()
    };
    let a = open(fine).unwrap();
    assert_eq!(a.av_type(), AvType::Table);
    assert!(!a.is_async());
    assert!(a.is_empty());
    assert_eq!(a.addr_format(), AddrFormat::SOCKADDR_IN);
    let mut c = cfg();
    c.default_type = AvType::Map;
    assert_eq!(
        KitAv::<()>::open(&AvAttr::default(), 0, c)
            .unwrap()
            .av_type(),
        AvType::Map
    );
    assert_eq!(av(AvType::Map).av_type(), AvType::Map);
    assert!(format!("{:?}", av(AvType::Map)).contains("Map"));
    assert!(format!("{:?}", cfg()).contains("resolver: None"));
}

#[test]
fn table_indices_are_dense_and_reuse_the_lowest_free() {
    let t = av(AvType::Table);
    let a = addrs(6);
    assert_eq!(ok(t.insert(&a[..3], 0, 0).unwrap()), [0, 1, 2]);
    assert_eq!(ok(t.insert(&a[3..4], 0, 0).unwrap()), [3]);
    assert_eq!(t.len(), 4);
    t.remove(&[2, 0], 0).unwrap();
    assert_eq!(code(t.lookup(0)), Errno::EINVAL);
    assert_eq!(code(t.lookup(2)), Errno::EINVAL);
    assert_eq!(t.lookup(1).unwrap(), a[1]);
    assert_eq!(t.lookup(3).unwrap(), a[3]);
    // The lowest free index first, then the next one, then growth.
    assert_eq!(ok(t.insert(&a[4..6], 0, 0).unwrap()), [0, 2]);
    assert_eq!(ok(t.insert(&a[..1], 0, 0).unwrap()), [4]);
    assert_eq!(t.lookup(0).unwrap(), a[4]);
    assert_eq!(t.lookup(4).unwrap(), a[0]);
    assert_eq!(t.slot_count(), 5);
    assert_eq!(t.index(4).unwrap(), 4);
    assert_eq!(t.fi_addr_of(2), Some(2));
    assert_eq!(t.fi_addr_of(9), None);
    assert_eq!(code(t.lookup(5)), Errno::EINVAL);
    assert_eq!(code(t.lookup(ADDR_NOTAVAIL)), Errno::EINVAL);
    assert_eq!(code(t.lookup(1 << 40)), Errno::EINVAL);
    assert!(t.contains(1) && !t.contains(5));
    let e = t.lookup(7).unwrap_err();
    assert!(e.message().contains("0x7"), "{e}");
    assert_eq!(
        t.snapshot(),
        vec![
            (0, a[4].clone()),
            (1, a[1].clone()),
            (2, a[5].clone()),
            (3, a[3].clone()),
            (4, a[0].clone())
        ]
    );
}

#[test]
fn map_addresses_carry_a_generation() {
    let m = av(AvType::Map);
    let a = addrs(3);
    let f = ok(m.insert(&a[..2], 0, 0).unwrap());
    assert_eq!(f, [1 << 32, (1 << 32) | 1]);
    assert!(f.iter().all(|&x| x != 0 && x != ADDR_NOTAVAIL));
    m.remove(&f[..1], 0).unwrap();
    let g = ok(m.insert(&a[2..3], 0, 0).unwrap());
    // Same slot, next generation: the old address is stale.
    assert_eq!(g, [(2 << 32)]);
    assert_eq!(code(m.lookup(f[0])), Errno::EINVAL);
    assert_eq!(code(m.index(f[0])), Errno::EINVAL);
    assert_eq!(code(m.remove(&f[..1], 0)), Errno::EINVAL);
    assert_eq!(m.lookup(g[0]).unwrap(), a[2]);
    assert_eq!(m.index(g[0]).unwrap(), 0);
    assert_eq!(m.fi_addr_of(0), Some(g[0]));
    // A bare index is not a map address.
    assert_eq!(code(m.lookup(1)), Errno::EINVAL);
    assert_eq!(code(m.lookup(u64::from(u32::MAX))), Errno::EINVAL);
}

#[test]
fn generations_wrap_skipping_zero() {
    let a = AvAttr {
        av_type: AvType::Map,
        rx_ctx_bits: 16,
        ..AvAttr::default()
    };
    let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
    let x = [v4("1.1.1.1:1")];
    let first = ok(m.insert(&x, 0, 0).unwrap())[0];
    assert_eq!(first, 1 << 32);
    let mut last = first;
    for _ in 0..0xffff {
        m.remove(&[last], 0).unwrap();
        last = ok(m.insert(&x, 0, 0).unwrap())[0];
        assert_ne!(last >> 32, 0);
        assert_eq!(last >> 48, 0, "generation stays below the rx bits");
    }
    // 0xffff removals: generation 1 → 0xffff → (0 skipped) 1.
    assert_eq!(last, first);
}

#[test]
fn rx_context_bits_are_ignored_by_lookups() {
    for t in [AvType::Table, AvType::Map] {
        let a = AvAttr {
            av_type: t,
            rx_ctx_bits: 4,
            ..AvAttr::default()
        };
        let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
        let f = ok(m.insert(&addrs(2), 0, 0).unwrap())[1];
        let rx = (5u64 << 60) | f;
        assert_eq!(m.lookup(rx).unwrap(), addrs(2)[1]);
        assert_eq!(m.rx_index(rx), 5);
        assert_eq!(m.rx_index(f), 0);
        assert_eq!(m.rx_index(ADDR_NOTAVAIL), 0);
        assert_eq!(code(m.lookup(ADDR_NOTAVAIL)), Errno::EINVAL);
    }
    assert_eq!(av(AvType::Table).rx_index(5u64 << 60), 0);
}

#[test]
fn duplicates_share_an_entry_and_count_references() {
    for t in [AvType::Table, AvType::Map] {
        let m = av(t);
        let a = addrs(2);
        let f = ok(m
            .insert(&[a[0].clone(), a[1].clone(), a[0].clone()], 0, 0)
            .unwrap());
        assert_eq!(f[0], f[2]);
        assert_eq!(m.len(), 2);
        m.remove(&[f[0]], 0).unwrap();
        assert_eq!(m.lookup(f[0]).unwrap(), a[0]);
        assert_eq!(m.reverse_lookup(&a[0]), Some(f[0]));
        m.remove(&[f[0]], 0).unwrap();
        assert_eq!(code(m.lookup(f[0])), Errno::EINVAL);
        assert_eq!(m.reverse_lookup(&a[0]), None);
        assert_eq!(m.len(), 1);
    }
}

#[test]
fn remove_is_all_or_nothing() {
    let t = av(AvType::Table);
    let f = ok(t.insert(&addrs(3), 0, 0).unwrap());
    assert_eq!(code(t.remove(&[f[0]], 1)), Errno::EBADFLAGS);
    let e = t.remove(&[f[0], 9, f[1]], 0).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.message().contains("#1"), "{e}");
    // Twice in one list but inserted once.
    assert_eq!(code(t.remove(&[f[2], f[2]], 0)), Errno::EINVAL);
    assert_eq!(t.len(), 3);
    t.remove(&[], 0).unwrap();
    t.remove(&f, 0).unwrap();
    assert!(t.is_empty());
    assert_eq!(code(t.remove(&f[..1], 0)), Errno::EINVAL);
}

#[test]
fn per_entry_errors() {
    let t = av(AvType::Table);
    let list = [
        v4("1.2.3.4:5"),
        Address::Inet6("[::1]:5".parse().unwrap()),
        Address::Str("fi_x://y".into()),
        v4("1.2.3.4:6"),
    ];
    let r = t.insert(&list, INSERT_SYNC_ERR | INSERT_MORE, 0).unwrap();
    assert_eq!(*r[0].as_ref().unwrap(), 0);
    assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::EINVAL);
    assert!(r[1]
        .as_ref()
        .unwrap_err()
        .message()
        .contains("FI_SOCKADDR_IN6"));
    assert_eq!(r[2].as_ref().unwrap_err().code(), Errno::EINVAL);
    // Failures do not consume indices.
    assert_eq!(*r[3].as_ref().unwrap(), 1);

    // The per-peer constructor's error fails that address only.
    let p = KitAv::open_with(
        &attr(AvType::Table),
        0,
        AvConfig::new(AddrFormat::SOCKADDR),
        |a| match a.socket_addr().map(|s| s.port()) {
            Some(13) => Err(Error::new(Errno::ECONNREFUSED, "port 13 refused")),
            Some(p) => Ok(p),
            None => Ok(0),
        },
    )
    .unwrap();
    let r = p
        .insert(
            &[
                v4("1.1.1.1:12"),
                v4("1.1.1.1:13"),
                Address::Inet6("[::1]:14".parse().unwrap()),
            ],
            0,
            0,
        )
        .unwrap();
    assert_eq!(*r[0].as_ref().unwrap(), 0);
    assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::ECONNREFUSED);
    assert_eq!(*r[2].as_ref().unwrap(), 1);
    assert_eq!(p.peer(1).unwrap(), 14);
    assert_eq!(p.peer(0).unwrap(), 12);
    assert_eq!(code(p.peer(2)), Errno::EINVAL);
    let seen = p
        .with_entry(1, |e| {
            (e.fi_addr, e.index, e.addr.clone(), *e.peer, e.user_id)
        })
        .unwrap();
    assert_eq!(
        seen,
        (1, 1, Address::Inet6("[::1]:14".parse().unwrap()), 14, None)
    );

    // A full AV.
    let mut c = AvConfig::new(AddrFormat::SOCKADDR_IN);
    c.max_entries = 2;
    let small = KitAv::<()>::open(&attr(AvType::Map), 0, c).unwrap();
    let r = small.insert(&addrs(3), 0, 0).unwrap();
    assert!(r[0].is_ok() && r[1].is_ok());
    assert_eq!(r[2].as_ref().unwrap_err().code(), Errno::ENOSPC);
    // A duplicate still fits: it is not a new entry.
    assert!(small.insert(&addrs(1), 0, 0).unwrap()[0].is_ok());
}

#[test]
fn insert_flags_and_user_ids() {
    let t = av(AvType::Table);
    assert_eq!(code(t.insert(&addrs(1), 1 << 3, 0)), Errno::EBADFLAGS);
    assert_eq!(code(t.insert(&addrs(1), INSERT_USER_ID, 0)), Errno::EINVAL);
    assert_eq!(
        code(t.insert_user_ids(&addrs(2), &[1], 0, 0)),
        Errno::EINVAL
    );
    let a = addrs(3);
    let f = ok(t.insert_user_ids(&a[..2], &[0xaa, 0xbb], 0, 0).unwrap());
    assert_eq!(f, [0, 1]);
    let g = ok(t.insert(&a[2..], 0, 0).unwrap());
    assert_eq!(t.source_addr(&a[0]), 0xaa);
    assert_eq!(t.source_addr(&a[1]), 0xbb);
    assert_eq!(t.source_addr(&a[2]), g[0]);
    assert_eq!(t.source_addr(&v4("9.9.9.9:9")), ADDR_NOTAVAIL);
    assert_eq!(t.reverse_lookup(&a[0]), Some(0));
    assert_eq!(t.reverse_lookup(&v4("9.9.9.9:9")), None);
    assert_eq!(t.with_entry(1, |e| e.user_id).unwrap(), Some(0xbb));
    // The first insert's id stays.
    t.insert_user_ids(&a[..1], &[0xcc], 0, 0).unwrap();
    assert_eq!(t.source_addr(&a[0]), 0xaa);
    assert_eq!(t.straddr(&a[0]), "fi_sockaddr_in://10.0.0.1:7000");
}

fn sink() -> (AvEventSink, Arc<Mutex<Vec<AvEvent>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    (Arc::new(move |e| g.lock().unwrap().push(e)), got)
}

#[test]
fn asynchronous_inserts_report_events() {
    let a = AvAttr {
        flags: AvFlags::EVENT,
        ..AvAttr::default()
    };
    let m = KitAv::<()>::open(&a, 0x77, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
    assert!(m.is_async());
    assert_eq!(code(m.insert(&addrs(1), 0, 5)), Errno::ENOEQ);
    assert_eq!(code(m.insertsvc("1.2.3.4", "5", 0, 5)), Errno::ENOEQ);
    let (s, got) = sink();
    assert_eq!(code(m.bind_sink(s.clone(), 1)), Errno::EBADFLAGS);
    m.bind_sink(s.clone(), 0).unwrap();
    assert_eq!(code(m.bind_sink(s, 0)), Errno::EINVAL);
    assert_eq!(
        code(m.insert(&addrs(1), INSERT_SYNC_ERR, 5)),
        Errno::EBADFLAGS
    );
    let list = [
        v4("1.1.1.1:1"),
        Address::Str("fi_x://a".into()),
        v4("1.1.1.1:2"),
    ];
    let r = m.insert(&list, 0, 5).unwrap();
    assert!(r[0].is_ok() && r[1].is_err() && r[2].is_ok());
    let ev = std::mem::take(&mut *got.lock().unwrap());
    assert_eq!(
        ev,
        vec![
            AvEvent::Error {
                fid: 0x77,
                context: 5,
                index: 1,
                err: Errno::EINVAL
            },
            AvEvent::Complete {
                fid: 0x77,
                context: 5,
                count: 2
            },
        ]
    );
    let e = ev[0].clone().into_eq().unwrap_err();
    assert_eq!(
        (e.fid, e.context, e.data, e.err),
        (0x77, 5, 1, Errno::EINVAL)
    );
    let c = ev[1].clone().into_eq().unwrap();
    assert_eq!(
        (c.event, c.fid, c.context, c.data),
        (EqEvent::AvComplete, 0x77, 5, 2)
    );
    // Every call completes, even an empty one.
    m.insert(&[], 0, 6).unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        [AvEvent::Complete {
            fid: 0x77,
            context: 6,
            count: 0
        }]
    );
    // A synchronous AV with a sink reports nothing.
    let t = av(AvType::Table);
    let (s, got) = sink();
    t.bind_sink(s, 0).unwrap();
    t.insert(&addrs(1), 0, 0).unwrap();
    assert!(got.lock().unwrap().is_empty());
}

#[test]
fn kit_eq_takes_av_events() {
    use ofi_core::eq::EqAttr;
    use ofi_core::provider::EqOps;
    let eq = crate::eq::KitEq::new(&EqAttr::default()).unwrap();
    let a = AvAttr {
        flags: AvFlags::EVENT,
        ..AvAttr::default()
    };
    let m = KitAv::<()>::open(&a, 0x31, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
    m.bind_sink(eq.av_event_sink().unwrap(), 0).unwrap();
    m.insert(&[v4("1.1.1.1:1"), Address::Str("fi_x://".into())], 0, 4)
        .unwrap();
    assert_eq!(code(EqOps::read(&eq, false)), Errno::EAVAIL);
    let e = EqOps::readerr(&eq).unwrap();
    assert_eq!(
        (e.fid, e.context, e.data, e.err),
        (0x31, 4, 1, Errno::EINVAL)
    );
    let c = EqOps::read(&eq, false).unwrap();
    assert_eq!(
        (c.event, c.fid, c.context, c.data),
        (EqEvent::AvComplete, 0x31, 4, 1)
    );
}

#[test]
fn resolve_node_and_service() {
    let r = |f, n, s| resolve_node_service(f, n, s);
    let six = Address::Inet6("[fe80::1]:9".parse().unwrap());
    let str_addr = |s: &str| Address::Str(s.into());
    // (format, node, service, the address).
    for (f, n, s, want) in [
        (AddrFormat::SOCKADDR_IN, "10.1.2.3", "80", v4("10.1.2.3:80")),
        (AddrFormat::SOCKADDR_IN, "10.1.2.3", "", v4("10.1.2.3:0")),
        (AddrFormat::SOCKADDR_IN6, "fe80::1", "9", six.clone()),
        (AddrFormat::SOCKADDR, "[fe80::1]", "9", six),
        (AddrFormat::UNSPEC, "10.1.2.3", "1", v4("10.1.2.3:1")),
        (AddrFormat::SOCKADDR_IN, "localhost", "7", v4("127.0.0.1:7")),
        (
            AddrFormat::SOCKADDR_IN,
            "fi_sockaddr_in://10.0.0.1:4",
            "",
            v4("10.0.0.1:4"),
        ),
        (AddrFormat::STR, "fi_shm://42", "", str_addr("fi_shm://42")),
        (AddrFormat::STR, "peer7", "", str_addr("peer7")),
    ] {
        assert_eq!(r(f, n, s).unwrap(), want, "{n:?} {s:?}");
    }
    for (f, n, s, want) in [
        (AddrFormat::SOCKADDR_IN, "", "1", "node"),
        (AddrFormat::SOCKADDR_IN, "10.0.0.1", "http", "port number"),
        (AddrFormat::SOCKADDR_IN, "10.0.0.1", "70000", "out of range"),
        (AddrFormat::SOCKADDR_IN, "fe80::1", "1", "no address"),
        (AddrFormat::SOCKADDR_IN6, "10.0.0.1", "1", "no address"),
        (
            AddrFormat::SOCKADDR_IN,
            "no-such-host.invalid",
            "1",
            "cannot resolve",
        ),
        (
            AddrFormat::SOCKADDR_IN,
            "fi_sockaddr_in://10.0.0.1:4",
            "5",
            "service must be empty",
        ),
        (
            AddrFormat::SOCKADDR_IN6,
            "fi_sockaddr_in://10.0.0.1:4",
            "",
            "takes FI_SOCKADDR_IN6",
        ),
        (AddrFormat::STR, "fi_shm://1", "2", "service must be empty"),
        (AddrFormat::STR, "peer", "2", "no service"),
    ] {
        let e = r(f, n, s).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL, "{n:?} {s:?}");
        assert!(e.message().contains(want), "{n:?} {s:?}: {e}");
    }
    assert_eq!(code(r(AddrFormat::PSMX2, "x", "y")), Errno::ENOSYS);
}

#[test]
fn sym_ranges() {
    let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        sym_range("10.1.1.1", 2, "5000", 2).unwrap(),
        p(&[
            ("10.1.1.1", "5000"),
            ("10.1.1.1", "5001"),
            ("10.1.1.2", "5000"),
            ("10.1.1.2", "5001")
        ])
    );
    assert_eq!(
        sym_range("host10", 2, "5000", 2).unwrap(),
        p(&[
            ("host10", "5000"),
            ("host10", "5001"),
            ("host11", "5000"),
            ("host11", "5001")
        ])
    );
    assert_eq!(
        sym_range("n09", 2, "x", 1).unwrap(),
        p(&[("n09", "x"), ("n10", "x")])
    );
    assert_eq!(sym_range("10.0.0.255", 2, "1", 1).unwrap()[1].0, "10.0.1.0");
    assert_eq!(sym_range("::ffff", 2, "1", 1).unwrap()[1].0, "::1:0");
    assert_eq!(
        sym_range("host", 1, "svc", 1).unwrap(),
        p(&[("host", "svc")])
    );
    assert!(sym_range("host", 0, "1", 5).unwrap().is_empty());
    assert!(sym_range("host", 3, "1", 0).unwrap().is_empty());
    for (n, nc, s, sc, want) in [
        ("host", 2, "1", 1, "numeric suffix"),
        ("h1", 1, "svc", 2, "numeric suffix"),
        ("255.255.255.255", 2, "1", 1, "overflow IPv4"),
        (
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            2,
            "1",
            1,
            "overflow IPv6",
        ),
        ("h18446744073709551615", 2, "1", 1, "overflow"),
        ("h99999999999999999999999", 2, "1", 1, "too large"),
        ("h1", usize::MAX, "1", 2, "overflows"),
    ] {
        let e = sym_range(n, nc, s, sc).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL, "{n}");
        assert!(e.message().contains(want), "{n}: {e}");
    }
}

#[test]
fn insertsvc_and_insertsym() {
    let t = av(AvType::Table);
    assert_eq!(ok(t.insertsvc("127.0.0.1", "7000", 0, 0).unwrap()), [0]);
    assert_eq!(t.lookup(0).unwrap(), v4("127.0.0.1:7000"));
    assert_eq!(code(t.insertsvc("127.0.0.1", "x", 0, 0)), Errno::EINVAL);
    assert_eq!(
        code(t.insertsvc("127.0.0.1", "1", 1 << 3, 0)),
        Errno::EBADFLAGS
    );
    let f = ok(t.insertsym("127.0.0.1", 4, "7000", 2, 0, 0).unwrap());
    // 127.0.0.1:7000 is already in: a duplicate keeps index 0.
    assert_eq!(f, [0, 1, 2, 3, 4, 5, 6, 7]);
    let want: Vec<Address> = (1..=4)
        .flat_map(|n| (7000..7002).map(move |p| v4(&format!("127.0.0.{n}:{p}"))))
        .collect();
    for (fa, a) in f.iter().zip(&want) {
        assert_eq!(&t.lookup(*fa).unwrap(), a);
    }
    assert_eq!(code(t.insertsym("host", 2, "1", 1, 0, 0)), Errno::EINVAL);
    // A resolution failure fails that address only.
    let r = t.insertsym("10.0.0.1", 1, "65535", 2, 0, 0).unwrap();
    assert!(r[0].is_ok());
    assert_eq!(r[1].as_ref().unwrap_err().code(), Errno::EINVAL);

    // A provider resolver.
    let mut c = AvConfig::new(AddrFormat::PSMX2);
    c.resolver = Some(AvResolver::new(|n: &str, s: &str| {
        Ok(Address::Raw {
            format: AddrFormat::PSMX2,
            bytes: format!("{n}/{s}").into_bytes(),
        })
    }));
    let p = KitAv::<()>::open(&attr(AvType::Map), 0, c).unwrap();
    let f = ok(p.insertsym("n1", 2, "4", 1, 0, 0).unwrap());
    assert_eq!(
        p.lookup(f[1]).unwrap(),
        Address::Raw {
            format: AddrFormat::PSMX2,
            bytes: b"n2/4".to_vec()
        }
    );
}

#[test]
fn av_ops_shape() {
    let t = av(AvType::Table);
    let ops = |a: &KitAv<()>, list: &[Address], out: &mut [u64], flags| {
        <KitAv<()> as AvOps<TFab>>::insert(a, list, out, flags, 0)
    };
    let mut out = [0u64; 3];
    let list = [
        v4("1.1.1.1:1"),
        Address::Str("fi_x://".into()),
        v4("1.1.1.1:2"),
    ];
    assert_eq!(ops(&t, &list, &mut out, 0).unwrap(), 2);
    assert_eq!(out, [0, ADDR_NOTAVAIL, 1]);
    assert_eq!(code(ops(&t, &list, &mut out[..2], 0)), Errno::EINVAL);
    // User ids come in through fi_addr.
    let mut ids = [0x10, 0x20];
    assert_eq!(ops(&t, &addrs(2), &mut ids, INSERT_USER_ID).unwrap(), 2);
    assert_eq!(ids, [2, 3]);
    assert_eq!(t.source_addr(&addrs(2)[1]), 0x20);
    let mut one = 0;
    assert_eq!(
        <KitAv<()> as AvOps<TFab>>::insertsvc(&t, "1.1.1.1", "3", &mut one, 0, 0).unwrap(),
        1
    );
    assert_eq!(one, 4);
    let mut sym = [0u64; 4];
    assert_eq!(
        <KitAv<()> as AvOps<TFab>>::insertsym(&t, "2.2.2.2", 2, "1", 2, &mut sym, 0, 0).unwrap(),
        4
    );
    assert_eq!(sym, [5, 6, 7, 8]);
    assert_eq!(
        code(<KitAv<()> as AvOps<TFab>>::insertsym(
            &t, "2.2.2.2", 2, "1", 3, &mut sym, 0, 0
        )),
        Errno::EINVAL
    );
    assert_eq!(
        <KitAv<()> as AvOps<TFab>>::lookup(&t, 4).unwrap(),
        v4("1.1.1.1:3")
    );
    <KitAv<()> as AvOps<TFab>>::remove(&t, &[4], 0).unwrap();
    assert_eq!(
        code(<KitAv<()> as AvOps<TFab>>::lookup(&t, 4)),
        Errno::EINVAL
    );
    assert_eq!(
        <KitAv<()> as AvOps<TFab>>::straddr(&t, &v4("1.2.3.4:5")),
        "fi_sockaddr_in://1.2.3.4:5"
    );
    // Asynchronous: the count is 0, fi_addr is still filled.
    let a = AvAttr {
        flags: AvFlags::EVENT,
        ..AvAttr::default()
    };
    let m = KitAv::<()>::open(&a, 0, AvConfig::new(AddrFormat::SOCKADDR_IN)).unwrap();
    let eq = fam::TEq::default();
    assert_eq!(
        code(<KitAv<()> as AvOps<TFab>>::bind_eq(&m, &eq, 2)),
        Errno::EBADFLAGS
    );
    <KitAv<()> as AvOps<TFab>>::bind_eq(&m, &eq, 0).unwrap();
    let mut out = [0u64; 1];
    assert_eq!(ops(&m, &addrs(1), &mut out, 0).unwrap(), 0);
    assert_eq!(out, [0]);
}

#[test]
fn through_the_core_tables() {
    use ofi_core::eq::EqAttr;
    use ofi_core::provider::init_builtin;
    let h = init_builtin::<fam::TProv>().unwrap();
    let info = fam::info(AddrFormat::SOCKADDR_IN, ofi_core::MrMode::empty());
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let t = domain.av_open(&attr(AvType::Table)).unwrap();
    assert_eq!(t.insert(&addrs(2)).unwrap(), [0, 1]);
    assert_eq!(
        t.insert(&[Address::Str("fi_x://".into())]).unwrap(),
        [ADDR_NOTAVAIL]
    );
    assert_eq!(t.insertsvc("127.0.0.1", "9", 0).unwrap(), 2);
    assert_eq!(t.insertsym("127.0.0.2", 2, "1", 1, 0).unwrap(), [3, 4]);
    assert_eq!(t.lookup(4).unwrap(), v4("127.0.0.3:1"));
    assert_eq!(t.lookup(9).unwrap_err().code(), Errno::EINVAL);
    t.remove(&[4], 0).unwrap();
    assert_eq!(t.remove(&[4], 0).unwrap_err().code(), Errno::EINVAL);
    assert_eq!(
        t.straddr(&v4("1.2.3.4:5")).unwrap(),
        "fi_sockaddr_in://1.2.3.4:5"
    );
    assert_eq!(
        t.insertsvc("127.0.0.1", "x", 0).unwrap_err().code(),
        Errno::EINVAL
    );

    // An asynchronous AV reporting on the EQ.
    let a = AvAttr {
        av_type: AvType::Map,
        flags: AvFlags::EVENT,
        ..AvAttr::default()
    };
    let m = domain.av_open(&a).unwrap();
    assert_eq!(m.insert(&addrs(1)).unwrap_err().code(), Errno::ENOEQ);
    let eq = fabric.eq_open(&EqAttr::default()).unwrap();
    m.bind_eq(&eq, 0).unwrap();
    let mut out = [0u64; 2];
    let n = m
        .insert_into(
            &[v4("1.1.1.1:1"), Address::Str("fi_x://".into())],
            &mut out,
            0,
            9,
        )
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(out, [1 << 32, ADDR_NOTAVAIL]);
    assert_eq!(eq.read().unwrap_err().code(), Errno::EAVAIL);
    let e = eq.readerr().unwrap();
    assert_eq!((e.context, e.data, e.err), (9, 1, Errno::EINVAL));
    let c = eq.read().unwrap();
    assert_eq!((c.event, c.context, c.data), (EqEvent::AvComplete, 9, 1));
}

/// The model of an AV: live fabric address → (address, references).
#[derive(Default)]
struct Model {
    live: HashMap<u64, (Address, u32)>,
    issued: Vec<u64>,
    removed: Vec<u64>,
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>),
    Remove(usize),
    Lookup(usize),
    LookupRaw(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec(0u8..12, 1..4).prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => any::<usize>().prop_map(Op::Lookup),
        1 => any::<u64>().prop_map(Op::LookupRaw),
    ]
}

fn pool(i: u8) -> Address {
    v4(&format!("10.9.0.{i}:{}", 100 + u16::from(i)))
}

fn run_model(t: AvType, ops: Vec<Op>) -> std::result::Result<(), TestCaseError> {
    let a = av(t);
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Insert(ix) => {
                let list: Vec<Address> = ix.iter().map(|&i| pool(i)).collect();
                let got = ok(a.insert(&list, 0, 0).unwrap());
                for (addr, fa) in list.iter().zip(got) {
                    let existing = m.live.iter().find(|(_, (x, _))| x == addr).map(|(k, _)| *k);
                    match existing {
                        Some(k) => {
                            prop_assert_eq!(fa, k);
                            m.live.get_mut(&k).unwrap().1 += 1;
                        }
                        None => {
                            prop_assert!(!m.live.contains_key(&fa));
                            if t == AvType::Table {
                                let lowest = (0..).find(|i| !m.live.contains_key(i)).unwrap();
                                prop_assert_eq!(fa, lowest);
                            } else {
                                prop_assert!(!m.removed.contains(&fa), "stale address reissued");
                                prop_assert!(fa != 0 && fa != ADDR_NOTAVAIL);
                            }
                            m.live.insert(fa, (addr.clone(), 1));
                            m.issued.push(fa);
                        }
                    }
                }
            }
            Op::Remove(i) => {
                if m.issued.is_empty() {
                    continue;
                }
                let fa = m.issued[i % m.issued.len()];
                let r = a.remove(&[fa], 0);
                match m.live.get_mut(&fa) {
                    Some(e) => {
                        prop_assert!(r.is_ok());
                        e.1 -= 1;
                        if e.1 == 0 {
                            m.live.remove(&fa);
                            m.removed.push(fa);
                        }
                    }
                    None => prop_assert_eq!(r.unwrap_err().code(), Errno::EINVAL),
                }
            }
            Op::Lookup(i) => {
                if m.issued.is_empty() {
                    continue;
                }
                let fa = m.issued[i % m.issued.len()];
                check_lookup(&a, &m, fa)?;
            }
            Op::LookupRaw(fa) => check_lookup(&a, &m, fa)?,
        }
        prop_assert_eq!(a.len(), m.live.len());
    }
    for (fa, (addr, _)) in &m.live {
        prop_assert_eq!(a.reverse_lookup(addr), Some(*fa));
    }
    Ok(())
}

fn check_lookup(a: &KitAv<()>, m: &Model, fa: u64) -> std::result::Result<(), TestCaseError> {
    match m.live.get(&fa) {
        Some((addr, _)) => {
            prop_assert_eq!(&a.lookup(fa).unwrap(), addr);
            prop_assert!(a.contains(fa));
        }
        None => {
            prop_assert_eq!(a.lookup(fa).unwrap_err().code(), Errno::EINVAL);
            prop_assert_eq!(a.index(fa).unwrap_err().code(), Errno::EINVAL);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn table_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
        run_model(AvType::Table, ops)?;
    }

    #[test]
    fn map_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
        run_model(AvType::Map, ops)?;
    }

    #[test]
    fn sym_range_counts(n in 0usize..6, s in 0usize..6, base in 0u32..1000) {
        let r = sym_range(&format!("h{base}"), n, &format!("{base}"), s).unwrap();
        prop_assert_eq!(r.len(), n * s);
        if n > 0 && s > 0 {
            prop_assert_eq!(&r[r.len() - 1], &(format!("h{}", base + n as u32 - 1), format!("{}", base + s as u32 - 1)));
        }
    }
}

#[test]
fn concurrent_lookups_during_inserts() {
    let a = Arc::new(
        KitAv::<Arc<u32>>::open_with(
            &attr(AvType::Map),
            0,
            AvConfig::new(AddrFormat::SOCKADDR_IN),
            |addr| {
                Ok(Arc::new(u32::from(
                    addr.socket_addr().map_or(0, |s| s.port()),
                )))
            },
        )
        .unwrap(),
    );
    let published = Arc::new(Mutex::new(Vec::<(u64, u16)>::new()));
    let done = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (a, published, done) = (a.clone(), published.clone(), done.clone());
            std::thread::spawn(move || {
                let mut checked = 0u64;
                let mut k = r;
                while done.load(Ordering::Acquire) == 0 || checked < 1000 {
                    let snap = published.lock().unwrap().clone();
                    if let Some(&(fa, port)) = snap.get(k % snap.len().max(1)) {
                        // Entries published are never removed in this test.
                        assert_eq!(*a.peer(fa).unwrap(), u32::from(port));
                        assert_eq!(a.lookup(fa).unwrap().socket_addr().unwrap().port(), port);
                        checked += 1;
                    }
                    assert_eq!(a.index(ADDR_NOTAVAIL).unwrap_err().code(), Errno::EINVAL);
                    k += 7;
                }
                checked
            })
        })
        .collect();
    let mut scratch = VecDeque::new();
    for i in 0..3000u32 {
        let port = (i % 60000) as u16 + 1;
        let addr = v4(&format!("10.{}.{}.1:{port}", i >> 8, i & 0xff));
        let fa = ok(a.insert(std::slice::from_ref(&addr), 0, 0).unwrap())[0];
        if i % 3 == 0 {
            // Churn: some entries come and go (never published).
            scratch.push_back(fa);
            if scratch.len() > 5 {
                a.remove(&[scratch.pop_front().unwrap()], 0).unwrap();
            }
        } else {
            published.lock().unwrap().push((fa, port));
        }
    }
    done.store(1, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() >= 1000);
    }
    assert_eq!(a.len(), 2000 + scratch.len());
}
