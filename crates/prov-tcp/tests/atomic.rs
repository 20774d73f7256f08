//! Atomics over a connected pair, executed at the target by kit's engine: base,
//! fetch and compare calls, the valid queries, and the target's MR checks.

mod common;

use std::ffi::c_void;

use common::*;
use ofi::{AtomicOp, Caps, Datatype, Errno, OpFlags};

const NULL: *mut c_void = std::ptr::null_mut();

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn atomics_at_the_target() {
    let p = connect_pair(false, Caps::MSG | Caps::ATOMIC);
    let (c, s) = (&p.client, &p.server);
    let init: Vec<u8> = [10u64, 20, 30, 40]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let mr = p
        .domain
        .mr_reg_owned(init, OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE, 7)
        .unwrap();
    // Valid queries agree with the domain's query.
    let n = c.ep.atomicvalid(Datatype::Uint64, AtomicOp::Sum).unwrap();
    assert!(n >= 4);
    let q = p
        .domain
        .query_atomic(Datatype::Uint64, AtomicOp::Sum, 0)
        .unwrap();
    assert_eq!((q.count, q.size), (n, 8));
    assert_eq!(
        c.ep.atomicvalid(Datatype::Uint64, AtomicOp::AtomicRead)
            .unwrap_err()
            .code(),
        Errno::EOPNOTSUPP
    );
    assert!(c
        .ep
        .fetch_atomicvalid(Datatype::Uint64, AtomicOp::AtomicRead)
        .is_ok());
    assert!(c
        .ep
        .compare_atomicvalid(Datatype::Uint64, AtomicOp::Cswap)
        .is_ok());
    // SUM on elements 1 and 2.
    let add = [5u64, 6u64];
    // SAFETY: the operand outlives the operation (its completion is awaited).
    unsafe {
        c.ep.atomic(
            add.as_ptr().cast(),
            2,
            NULL,
            0,
            8,
            7,
            Datatype::Uint64,
            AtomicOp::Sum,
            1,
        )
        .unwrap()
    };
    let e = cq_expect_ctx(&c.cq, &[&s.cq], 1);
    assert_eq!(e.flags, (OpFlags::ATOMIC | OpFlags::WRITE).bits());
    assert_eq!(u64s(&mr.owned_to_vec().unwrap()), [10, 25, 36, 40]);
    // Fetch-add on element 0: the original value comes back.
    let one = [1u64];
    let mut old = [0u64];
    // SAFETY: as above.
    unsafe {
        c.ep.fetch_atomic(
            one.as_ptr().cast(),
            1,
            NULL,
            old.as_mut_ptr().cast(),
            NULL,
            0,
            0,
            7,
            Datatype::Uint64,
            AtomicOp::Sum,
            2,
        )
        .unwrap()
    };
    let e = cq_wait(&c.cq, &[&s.cq]).unwrap();
    assert_eq!(e.flags, (OpFlags::ATOMIC | OpFlags::READ).bits());
    assert_eq!(old, [10]);
    assert_eq!(u64s(&mr.owned_to_vec().unwrap())[0], 11);
    // Compare-and-swap on element 3: matches 40 → 99; then 40 again does not match.
    for (expect_old, expect_new) in [(40u64, 99u64), (99, 99)] {
        let swap = [99u64];
        let cmp = [40u64];
        let mut res = [0u64];
        // SAFETY: as above.
        unsafe {
            c.ep.compare_atomic(
                swap.as_ptr().cast(),
                1,
                NULL,
                cmp.as_ptr().cast(),
                NULL,
                res.as_mut_ptr().cast(),
                NULL,
                0,
                24,
                7,
                Datatype::Uint64,
                AtomicOp::Cswap,
                3,
            )
            .unwrap()
        };
        cq_wait(&c.cq, &[&s.cq]).unwrap();
        assert_eq!(res, [expect_old]);
        assert_eq!(u64s(&mr.owned_to_vec().unwrap())[3], expect_new);
    }
    // Bad key: FI_EACCES; out of range: FI_EINVAL; the region is unchanged.
    for (addr, key, err) in [(0u64, 8u64, Errno::EACCES), (32, 7, Errno::EINVAL)] {
        // SAFETY: as above.
        unsafe {
            c.ep.atomic(
                add.as_ptr().cast(),
                1,
                NULL,
                0,
                addr,
                key,
                Datatype::Uint64,
                AtomicOp::Sum,
                4,
            )
            .unwrap()
        };
        let e = cq_wait(&c.cq, &[&s.cq]).expect_err("refused atomic");
        assert_eq!((e.err, e.op_context), (err.0, 4));
    }
    assert_eq!(u64s(&mr.owned_to_vec().unwrap()), [11, 25, 36, 99]);
    // An operation the engine does not do on a type: refused at the call.
    // SAFETY: as above.
    let r = unsafe {
        c.ep.atomic(
            add.as_ptr().cast(),
            1,
            NULL,
            0,
            0,
            7,
            Datatype::Double,
            AtomicOp::Bor,
            5,
        )
    };
    assert_eq!(r.unwrap_err().code(), Errno::EOPNOTSUPP);
}
