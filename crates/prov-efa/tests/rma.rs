//! Emulated RMA and atomics between two engines: writes and reads of one and many
//! packets, atomics (every family, several datatypes, many elements, the operations
//! kit's engine defines), and the target's checks (bad key, no access, out of range)
//! with the initiator's error and the target's memory untouched.

mod common;

use common::{settle, sim, small_cfg, srd, Node};
use ofi_core::error::Errno;
use ofi_prov_efa::proto::{
    Access, AtomicCall, AtomicKind, AtomicOp, Datatype, Event, Outstanding, PeerAddr, RemoteAtomic,
    RemoteRegion, TxKind,
};
use ofi_testkit::simnet::{Nanos, Sim};

/// Region `key` of `peer`, at `offset`.
fn region(peer: PeerAddr, key: u32, offset: u64) -> RemoteRegion {
    RemoteRegion { peer, key, offset }
}

const SPAN: Nanos = 200_000_000;

fn pair(seed: u64) -> Sim<Node> {
    let mut s = sim(2, |i| small_cfg(i as u64 + 60), 10, srd(20_000), seed);
    s.nodes[1]
        .eng
        .register(1, vec![0; 4096], Access::ALL)
        .unwrap();
    s.nodes[1]
        .eng
        .register(
            2,
            vec![9; 64],
            Access {
                remote_read: true,
                remote_write: false,
            },
        )
        .unwrap();
    s.nodes[1]
        .eng
        .register(
            3,
            vec![8; 64],
            Access {
                remote_read: false,
                remote_write: true,
            },
        )
        .unwrap();
    s
}

/// An atomic of `kind` on `u64` elements: `operand` (empty for ATOMIC_READ) and
/// `compare`, one element each per target element.
fn u64_atomic(op: AtomicOp, kind: AtomicKind, operand: &[u64], compare: &[u64]) -> RemoteAtomic {
    let bytes = |v: &[u64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let count = operand.len().max(compare.len()).max(1);
    RemoteAtomic {
        call: AtomicCall::new(op, Datatype::Uint64, kind, count),
        operand: bytes(operand),
        compare: bytes(compare),
    }
}

/// The `u64` elements of `b`.
fn words(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// A transmit completion: (ctx, kind, result, data).
type Done = (u64, TxKind, Result<(), Errno>, Vec<u8>);

/// The transmit completions of node 0, taken.
fn done(s: &mut Sim<Node>) -> Vec<Done> {
    s.nodes[0]
        .events
        .drain(..)
        .filter_map(|(_, e)| match e {
            Event::Tx {
                ctx,
                kind,
                result,
                data,
            } => Some((ctx, kind, result, data)),
            _ => None,
        })
        .collect()
}

#[test]
fn writes_and_reads_of_one_and_many_packets() {
    let mut s = pair(1);
    let big: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    s.nodes[0]
        .eng
        .write(0, 1, region(1, 1, 100), big.clone())
        .unwrap();
    s.nodes[0]
        .eng
        .write(0, 2, region(1, 1, 4000), vec![5; 96])
        .unwrap();
    settle(&mut s, SPAN);
    let mut d = done(&mut s);
    d.sort_by_key(|x| x.0);
    assert_eq!(
        d.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>(),
        vec![(1, Ok(())), (2, Ok(()))]
    );
    let r = s.nodes[1].eng.region(1).unwrap();
    assert_eq!(&r[100..3100], &big[..]);
    assert_eq!(&r[4000..], &[5; 96][..]);
    assert!(r[..100].iter().all(|&b| b == 0));
    s.nodes[0]
        .eng
        .read(s.now, 3, region(1, 1, 50), 3100)
        .unwrap();
    s.nodes[0].eng.read(s.now, 4, region(1, 2, 0), 64).unwrap();
    settle(&mut s, SPAN);
    let mut d = done(&mut s);
    d.sort_by_key(|x| x.0);
    assert_eq!(d[0].1, TxKind::Read);
    assert_eq!(d[0].3[..], s.nodes[1].eng.region(1).unwrap()[50..3150]);
    assert_eq!(d[1].3, vec![9; 64]);
    for n in &s.nodes {
        assert_eq!(n.eng.outstanding(), Outstanding::default());
    }
}

#[test]
fn the_target_checks_key_access_and_bounds() {
    let mut s = pair(2);
    let e = &mut s.nodes[0].eng;
    e.write(0, 1, region(1, 77, 0), vec![1; 8]).unwrap(); // no such key
    e.write(0, 2, region(1, 2, 0), vec![1; 8]).unwrap(); // read-only region
    e.write(0, 3, region(1, 1, 4090), vec![1; 300]).unwrap(); // past the end (several packets)
    e.read(0, 4, region(1, 3, 0), 8).unwrap(); // write-only region
    e.read(0, 5, region(1, 1, u64::MAX - 2), 8).unwrap(); // offset overflows
    let sum = |v: &[u64]| u64_atomic(AtomicOp::Sum, AtomicKind::Base, v, &[]);
    // Two elements whose second straddles the end.
    e.atomic(0, 6, region(1, 1, 4088), sum(&[1, 1])).unwrap();
    let fetch_sum = u64_atomic(AtomicOp::Sum, AtomicKind::Fetch, &[1], &[]);
    e.atomic(0, 7, region(1, 3, 0), fetch_sum).unwrap(); // fetch needs read access
    settle(&mut s, SPAN);
    let mut d = done(&mut s);
    d.sort_by_key(|x| x.0);
    let got: Vec<(u64, Result<(), Errno>)> = d.iter().map(|x| (x.0, x.2)).collect();
    assert_eq!(
        got,
        vec![
            (1, Err(Errno::EACCES)),
            (2, Err(Errno::EACCES)),
            (3, Err(Errno::EINVAL)),
            (4, Err(Errno::EACCES)),
            (5, Err(Errno::EINVAL)),
            (6, Err(Errno::EINVAL)),
            (7, Err(Errno::EACCES)),
        ]
    );
    assert!(
        s.nodes[1].eng.region(1).unwrap().iter().all(|&b| b == 0),
        "untouched"
    );
    assert_eq!(s.nodes[1].eng.region(2).unwrap(), &[9; 64][..]);
    assert_eq!(s.nodes[1].eng.region(3).unwrap(), &[8; 64][..]);
    for n in &s.nodes {
        assert_eq!(n.eng.outstanding(), Outstanding::default());
    }
}

#[test]
fn atomics_of_one_u64_element() {
    let mut s = pair(3);
    let cases: [(AtomicOp, AtomicKind, u64, Option<u64>, u64, u64); 9] = [
        (AtomicOp::AtomicWrite, AtomicKind::Fetch, 10, None, 0, 10),
        (AtomicOp::Sum, AtomicKind::Fetch, 5, None, 10, 15),
        (AtomicOp::Max, AtomicKind::Fetch, 12, None, 15, 15),
        (AtomicOp::Min, AtomicKind::Fetch, 12, None, 15, 12),
        (AtomicOp::Bor, AtomicKind::Fetch, 0x30, None, 12, 0x3c),
        (AtomicOp::Bxor, AtomicKind::Fetch, 0xff, None, 0x3c, 0xc3),
        (AtomicOp::Cswap, AtomicKind::Compare, 7, Some(0xc3), 0xc3, 7),
        (AtomicOp::Cswap, AtomicKind::Compare, 9, Some(1), 7, 7),
        (AtomicOp::CswapLt, AtomicKind::Compare, 9, Some(1), 7, 9),
    ];
    for (i, (op, kind, operand, cmp, want_old, want_new)) in cases.into_iter().enumerate() {
        let args = u64_atomic(op, kind, &[operand], cmp.as_slice());
        s.nodes[0]
            .eng
            .atomic(s.now, i as u64, region(1, 1, 16), args)
            .unwrap();
        settle(&mut s, SPAN);
        let d = done(&mut s);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].2, Ok(()), "{op:?}");
        assert_eq!(words(&d[0].3), [want_old], "{op:?}");
        let r = s.nodes[1].eng.region(1).unwrap();
        assert_eq!(words(&r[16..24]), [want_new], "{op:?}");
    }
}

#[test]
fn atomics_of_many_elements_and_other_datatypes() {
    let mut s = pair(4);
    let ints: Vec<u8> = [1i32, -2, 3, i32::MAX]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let floats: Vec<u8> = [1.5f64, -0.25]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    // Base SUM of four i32 at 100; fetch PROD of two f64 at 200 (after a write);
    // ATOMIC_READ of the four i32 back; MSWAP (compare = mask) of two u16 at 300.
    // (context, offset, operation, datatype, family, elements, operands, compare values)
    type Case = (
        u64,
        u64,
        AtomicOp,
        Datatype,
        AtomicKind,
        usize,
        Vec<u8>,
        Vec<u8>,
    );
    let submit = |s: &mut Sim<Node>, cases: Vec<Case>| {
        for (ctx, offset, op, dt, kind, count, operand, compare) in cases {
            let call = AtomicCall::new(op, dt, kind, count);
            let args = RemoteAtomic {
                call,
                operand,
                compare,
            };
            s.nodes[0]
                .eng
                .atomic(s.now, ctx, region(1, 1, offset), args)
                .unwrap();
        }
    };
    let (base, fetch) = (AtomicKind::Base, AtomicKind::Fetch);
    submit(
        &mut s,
        vec![(
            1,
            100,
            AtomicOp::Sum,
            Datatype::Int32,
            base,
            4,
            ints.clone(),
            vec![],
        )],
    );
    s.nodes[0]
        .eng
        .write(s.now, 2, region(1, 1, 200), floats.clone())
        .unwrap();
    settle(&mut s, SPAN);
    assert!(done(&mut s).iter().all(|d| d.2.is_ok()));
    let twos: Vec<u8> = [2.0f64, 4.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let ones: Vec<u8> = [0xffffu16, 0xffff]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let mask: Vec<u8> = [0x00ffu16, 0xf000]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let compare = AtomicKind::Compare;
    submit(
        &mut s,
        vec![
            (
                3,
                200,
                AtomicOp::Prod,
                Datatype::Double,
                fetch,
                2,
                twos,
                vec![],
            ),
            (
                4,
                100,
                AtomicOp::AtomicRead,
                Datatype::Int32,
                fetch,
                4,
                vec![],
                vec![],
            ),
            (
                5,
                300,
                AtomicOp::Mswap,
                Datatype::Uint16,
                compare,
                2,
                ones,
                mask,
            ),
        ],
    );
    settle(&mut s, SPAN);
    let mut d = done(&mut s);
    d.sort_by_key(|x| x.0);
    assert!(d.iter().all(|x| x.2.is_ok()), "{d:?}");
    assert_eq!(d[0].3, floats, "PROD fetched the originals");
    assert_eq!(d[1].3, ints, "ATOMIC_READ after SUM onto zeros");
    assert_eq!(d[2].3, [0u8; 4], "MSWAP fetched the zeros");
    let r = s.nodes[1].eng.region(1).unwrap();
    let f = |o: usize| f64::from_ne_bytes(r[o..o + 8].try_into().unwrap());
    assert_eq!((f(200), f(208)), (3.0, -1.0));
    let h = |o: usize| u16::from_ne_bytes(r[o..o + 2].try_into().unwrap());
    assert_eq!((h(300), h(302)), (0x00ff, 0xf000));
}

#[test]
fn atomic_calls_that_make_no_sense_are_refused_at_once() {
    let mut s = pair(5);
    let e = &mut s.nodes[0].eng;
    // An atomic of `count` elements of `dt` with `bytes` of operands.
    let raw = |op, dt, kind, count, bytes| RemoteAtomic {
        call: AtomicCall::new(op, dt, kind, count),
        operand: vec![0; bytes],
        compare: vec![],
    };
    let (sum, base) = (AtomicOp::Sum, AtomicKind::Base);
    let refused = [
        // A compare-and-swap without the values to compare.
        (
            u64_atomic(AtomicOp::Cswap, AtomicKind::Compare, &[1], &[]),
            Errno::EINVAL,
        ),
        // Compare values for an operation that compares nothing.
        (
            u64_atomic(sum, AtomicKind::Fetch, &[1], &[2]),
            Errno::EINVAL,
        ),
        // ATOMIC_READ is a fetch call only; CSWAP a compare call only.
        (
            u64_atomic(AtomicOp::AtomicRead, base, &[], &[]),
            Errno::EOPNOTSUPP,
        ),
        (
            u64_atomic(AtomicOp::Cswap, AtomicKind::Fetch, &[1], &[]),
            Errno::EOPNOTSUPP,
        ),
        // Bitwise operations on floating point.
        (
            raw(AtomicOp::Bor, Datatype::Float, base, 1, 4),
            Errno::EOPNOTSUPP,
        ),
        // Operands not matching the count.
        (raw(sum, Datatype::Uint64, base, 2, 8), Errno::EINVAL),
        // No elements.
        (raw(sum, Datatype::Uint64, base, 0, 0), Errno::EINVAL),
        // More than one packet's operands.
        (raw(sum, Datatype::Uint8, base, 9000, 9000), Errno::EMSGSIZE),
    ];
    for (args, want) in refused {
        let what = format!("{:?}", args.call);
        assert_eq!(e.atomic(0, 1, region(1, 1, 0), args), Err(want), "{what}");
    }
    assert_eq!(
        e.write(0, 1, region(1, 1, 0), Vec::new()),
        Err(Errno::EINVAL)
    );
    assert_eq!(e.register(1 << 31, vec![], Access::ALL), Err(Errno::EINVAL));
    assert!(done(&mut s).is_empty(), "nothing was sent");
}

#[test]
fn the_target_reports_each_remote_access_done_once() {
    let mut s = pair(6);
    let e = &mut s.nodes[0].eng;
    e.write(0, 1, region(1, 1, 0), vec![1; 600]).unwrap(); // several packets, one access
    e.read(0, 2, region(1, 1, 0), 600).unwrap();
    let sum = u64_atomic(AtomicOp::Sum, AtomicKind::Base, &[1], &[]);
    e.atomic(0, 3, region(1, 1, 0), sum).unwrap();
    e.write(0, 4, region(1, 2, 0), vec![1; 8]).unwrap(); // refused: not counted
    settle(&mut s, SPAN);
    let accesses: Vec<(PeerAddr, bool)> = s.nodes[1]
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::RemoteAccess { src, read } => Some((*src, *read)),
            _ => None,
        })
        .collect();
    let reads = accesses.iter().filter(|a| a.1).count();
    assert_eq!((accesses.len(), reads), (3, 1), "{accesses:?}");
    assert!(accesses.iter().all(|a| a.0 == 0), "from node 0");
}
