//! Emulated RMA and atomics between two engines: writes and reads of one and many
//! packets, the 8-byte atomics, and the target's checks (bad key, no access, out of
//! range) with the initiator's error and the target's memory untouched.

mod common;

use common::{settle, sim, small_cfg, srd, Node};
use ofi_core::error::Errno;
use ofi_prov_efa::proto::{
    Access, AtomicArgs, AtomicOp, Event, Outstanding, PeerAddr, RemoteRegion, TxKind,
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
    e.atomic(
        0,
        6,
        region(1, 1, 4092),
        AtomicArgs {
            op: AtomicOp::Sum,
            operand: 1,
            compare: None,
            fetch: false,
        },
    )
    .unwrap(); // straddles the end
    e.atomic(
        0,
        7,
        region(1, 3, 0),
        AtomicArgs {
            op: AtomicOp::Sum,
            operand: 1,
            compare: None,
            fetch: true,
        },
    )
    .unwrap(); // fetch needs read access
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
fn eight_byte_atomics() {
    let mut s = pair(3);
    let old = |s: &mut Sim<Node>| {
        let d = done(s);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].2, Ok(()));
        u64::from_le_bytes(d[0].3[..8].try_into().unwrap())
    };
    let cases: [(AtomicOp, u64, Option<u64>, u64, u64); 8] = [
        (AtomicOp::Write, 10, None, 0, 10),
        (AtomicOp::Sum, 5, None, 10, 15),
        (AtomicOp::Max, 12, None, 15, 15),
        (AtomicOp::Min, 12, None, 15, 12),
        (AtomicOp::Bor, 0x30, None, 12, 0x3c),
        (AtomicOp::Bxor, 0xff, None, 0x3c, 0xc3),
        (AtomicOp::Cswap, 7, Some(0xc3), 0xc3, 7),
        (AtomicOp::Cswap, 9, Some(1), 7, 7),
    ];
    for (i, (op, operand, cmp, want_old, want_new)) in cases.into_iter().enumerate() {
        s.nodes[0]
            .eng
            .atomic(
                s.now,
                i as u64,
                region(1, 1, 16),
                AtomicArgs {
                    op,
                    operand,
                    compare: cmp,
                    fetch: true,
                },
            )
            .unwrap();
        settle(&mut s, SPAN);
        assert_eq!(old(&mut s), want_old, "{op:?}");
        let r = s.nodes[1].eng.region(1).unwrap();
        assert_eq!(
            u64::from_le_bytes(r[16..24].try_into().unwrap()),
            want_new,
            "{op:?}"
        );
    }
    // Calls that make no sense are refused at once.
    let e = &mut s.nodes[0].eng;
    let senseless = [
        // A compare-and-swap without the value to compare.
        (AtomicOp::Cswap, 1, None, true),
        // A value to compare for an operation that compares nothing.
        (AtomicOp::Sum, 1, Some(2), true),
        // A read that fetches nothing.
        (AtomicOp::Read, 0, None, false),
    ];
    for (op, operand, compare, fetch) in senseless {
        let args = AtomicArgs {
            op,
            operand,
            compare,
            fetch,
        };
        assert_eq!(
            e.atomic(0, 1, region(1, 1, 0), args),
            Err(Errno::EINVAL),
            "{op:?} with operand {operand}, compare {compare:?}, fetch {fetch}"
        );
    }
    assert_eq!(
        e.write(0, 1, region(1, 1, 0), Vec::new()),
        Err(Errno::EINVAL)
    );
    assert_eq!(e.register(1 << 31, vec![], Access::ALL), Err(Errno::EINVAL));
}
