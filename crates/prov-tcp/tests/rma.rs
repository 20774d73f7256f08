//! RMA over a connected pair: write, writedata, inject_write, read, and the target's
//! checks (bad key → FI_EACCES, out of range → FI_EINVAL at the initiator).

mod common;

use common::*;
use ofi::{Caps, Errno, OpFlags};

const NULL: *mut std::ffi::c_void = std::ptr::null_mut();

#[test]
fn write_read_and_bad_accesses() {
    let p = connect_pair(false, Caps::MSG | Caps::RMA);
    let (c, s) = (&p.client, &p.server);
    let mr = p
        .domain
        .mr_reg_owned(
            vec![0u8; 64],
            OpFlags::REMOTE_READ | OpFlags::REMOTE_WRITE,
            0x42,
        )
        .unwrap();
    let key = mr.key();
    assert_eq!(key, 0x42);
    // Write 5 bytes at offset 10 (mr_mode has no FI_MR_VIRT_ADDR: offsets).
    let data = *b"abcde";
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { c.ep.write(data.as_ptr(), 5, NULL, 0, 10, key, 1).unwrap() };
    let e = cq_expect_ctx(&c.cq, &[&s.cq], 1);
    assert_eq!(e.flags, (OpFlags::RMA | OpFlags::WRITE).bits());
    assert_eq!(&mr.owned_to_vec().unwrap()[10..15], b"abcde");
    // writedata: the target's CQ gets the data.
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe {
        c.ep.writedata(data.as_ptr(), 5, NULL, 0x5151, 0, 20, key, 2)
            .unwrap()
    };
    cq_wait(&c.cq, &[&s.cq]).unwrap();
    let e = cq_wait(&s.cq, &[]).unwrap();
    assert_eq!(e.data, 0x5151);
    assert!(e.flags & OpFlags::REMOTE_CQ_DATA.bits() != 0);
    // inject_write: no completion, but the data lands.
    c.ep.inject_write(b"XY", 0, 30, key).unwrap();
    // Read back 25 bytes from offset 10.
    let mut rb = [0u8; 25];
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { c.ep.read(rb.as_mut_ptr(), 25, NULL, 0, 10, key, 3).unwrap() };
    let e = cq_expect_ctx(&c.cq, &[&s.cq], 3);
    assert_eq!(e.flags, (OpFlags::RMA | OpFlags::READ).bits());
    assert_eq!(&rb[..5], b"abcde");
    assert_eq!(&rb[10..15], b"abcde");
    assert_eq!(&rb[20..22], b"XY");
    // Bad key: FI_EACCES, for writes and reads.
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe {
        c.ep.write(data.as_ptr(), 5, NULL, 0, 0, key + 1, 4)
            .unwrap()
    };
    let e = cq_wait(&c.cq, &[&s.cq]).expect_err("bad key");
    assert_eq!((e.err, e.op_context), (Errno::EACCES.0, 4));
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe {
        c.ep.read(rb.as_mut_ptr(), 5, NULL, 0, 0, key + 1, 5)
            .unwrap()
    };
    let e = cq_wait(&c.cq, &[&s.cq]).expect_err("bad key");
    assert_eq!((e.err, e.op_context), (Errno::EACCES.0, 5));
    // Out of range: FI_EINVAL.
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { c.ep.write(data.as_ptr(), 5, NULL, 0, 62, key, 6).unwrap() };
    let e = cq_wait(&c.cq, &[&s.cq]).expect_err("out of range");
    assert_eq!((e.err, e.op_context), (Errno::EINVAL.0, 6));
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { c.ep.read(rb.as_mut_ptr(), 25, NULL, 0, 50, key, 7).unwrap() };
    let e = cq_wait(&c.cq, &[&s.cq]).expect_err("out of range");
    assert_eq!((e.err, e.op_context), (Errno::EINVAL.0, 7));
    // The region is untouched by the refused write, and the connection still works.
    assert_eq!(&mr.owned_to_vec().unwrap()[60..64], &[0u8; 4]);
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe { c.ep.read(rb.as_mut_ptr(), 5, NULL, 0, 10, key, 8).unwrap() };
    assert_eq!(cq_wait(&c.cq, &[&s.cq]).unwrap().op_context, 8);
    // A read-only region refuses writes with FI_EACCES.
    let ro = p
        .domain
        .mr_reg_owned(vec![1u8; 8], OpFlags::REMOTE_READ, 0x43)
        .unwrap();
    // SAFETY: the buffers outlive the operation (its completion is awaited).
    unsafe {
        c.ep.write(data.as_ptr(), 5, NULL, 0, 0, ro.key(), 9)
            .unwrap()
    };
    let e = cq_wait(&c.cq, &[&s.cq]).expect_err("read-only");
    assert_eq!(e.err, Errno::EACCES.0);
}
