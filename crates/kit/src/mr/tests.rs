//! Unit tests of the `mr` module (in their own file; they see its private items).

use super::*;
use crate::av::tests::fam;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

fn iov(base: usize, len: usize) -> Iov {
    Iov {
        base: base as *mut c_void,
        len,
    }
}

fn table(mode: MrMode) -> Arc<MrTable> {
    MrTable::new(MrConfig::new(mode)).unwrap()
}

fn reg(t: &Arc<MrTable>, iovs: &[Iov], access: OpFlags, key: u64) -> Result<KitMr> {
    let mut a = MrAttr::new(iovs, access);
    a.requested_key = key;
    t.register(&a, 0)
}

fn code<T: fmt::Debug>(r: Result<T>) -> Errno {
    r.unwrap_err().code()
}

const RW: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);

#[test]
fn table_configuration() {
    assert_eq!(
        code(MrTable::new(MrConfig::new(MrMode::RAW))),
        Errno::ENOSYS
    );
    for ks in [0, 9] {
        let mut c = MrConfig::new(MrMode::empty());
        c.key_size = ks;
        assert_eq!(code(MrTable::new(c)), Errno::EINVAL);
    }
    let mut c = MrConfig::new(MrMode::empty());
    c.iov_limit = 0;
    assert_eq!(code(MrTable::new(c)), Errno::EINVAL);
    assert_eq!(
        table(MrMode::BASIC | MrMode::LOCAL).mode(),
        MrMode::BASIC_MAP | MrMode::LOCAL
    );
    assert_eq!(table(MrMode::SCALABLE).mode(), MrMode::empty());
    let t = table(MrMode::empty());
    assert!(t.is_empty());
    let m = reg(&t, &[iov(0x1000, 16)], RW, 7).unwrap();
    assert_eq!(t.len(), 1);
    assert!(t.contains_key(7) && !t.contains_key(8));
    assert!(format!("{m:?}").contains("key: 7"));
}

#[test]
fn registration_errors() {
    let t = table(MrMode::ALLOCATED);
    let bad_flags = t.register(&MrAttr::new(&[iov(0x1000, 1)], RW), 1 << 3);
    assert_eq!(code(bad_flags), Errno::EBADFLAGS);
    for (iovs, access, what) in [
        (vec![], RW, "no buffers"),
        (vec![iov(0x1000, 0)], RW, "length 0"),
        (vec![iov(usize::MAX - 3, 8)], RW, "wraps"),
        (vec![iov(0, 8)], RW, "null"),
    ] {
        let e = reg(&t, &iovs, access, 1).unwrap_err();
        assert_eq!(e.code(), Errno::EINVAL, "{what}");
        assert!(e.message().contains(what), "{what}: {e}");
    }
    let e = reg(&t, &[iov(0x1000, 8)], OpFlags::MULTI_RECV, 1).unwrap_err();
    assert_eq!(e.code(), Errno::EBADFLAGS, "{e}");
    assert!(e.message().contains("access"), "{e}");
    // Without FI_MR_ALLOCATED any range may be registered, even at 0.
    let s = table(MrMode::empty());
    reg(&s, &[iov(0, 8)], RW, 1).unwrap();
    let mut c = MrConfig::new(MrMode::empty());
    c.iov_limit = 2;
    let l = MrTable::new(c).unwrap();
    let e = reg(&l, &[iov(8, 1), iov(16, 1), iov(32, 1)], RW, 1).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.message().contains("limit is 2"), "{e}");
    // The remote range must not overflow.
    let big = [iov(8, 16)];
    let mut a = MrAttr::new(&big, RW);
    a.offset = u64::MAX - 8;
    assert_eq!(code(s.register(&a, 0)), Errno::EINVAL);
    // Accepted flags.
    let ok = s.register(
        &MrAttr::new(&[iov(8, 1)], RW),
        REG_RMA_EVENT | REG_RMA_PMEM | REG_HMEM_HOST_ALLOC | REG_HMEM_DEVICE_ONLY,
    );
    assert!(ok.is_ok());
}

#[test]
fn user_keys() {
    let t = table(MrMode::empty());
    let a = reg(&t, &[iov(0x1000, 8)], RW, 42).unwrap();
    assert_eq!(a.key(), 42);
    let e = reg(&t, &[iov(0x2000, 8)], RW, 42).unwrap_err();
    assert_eq!(e.code(), Errno::ENOKEY);
    assert!(e.message().contains("0x2a"), "{e}");
    assert_eq!(
        code(reg(&t, &[iov(0x2000, 8)], RW, KEY_NOTAVAIL)),
        Errno::EKEYREJECTED
    );
    a.close().unwrap();
    a.close().unwrap();
    let b = reg(&t, &[iov(0x2000, 8)], RW, 42).unwrap();
    // The first registration's drop must not remove the second.
    drop(a);
    assert!(t.contains_key(42));
    assert_eq!(t.lookup_remote(42, 0, 8, RW).unwrap().addr(), 0x2000);
    drop(b);
    assert!(!t.contains_key(42));
    assert_eq!(code(t.lookup_remote(42, 0, 8, RW)), Errno::ENOKEY);

    let mut c = MrConfig::new(MrMode::empty());
    c.key_size = 2;
    let small = MrTable::new(c).unwrap();
    assert_eq!(
        code(reg(&small, &[iov(8, 8)], RW, 0x1_0000)),
        Errno::EKEYREJECTED
    );
    assert_eq!(reg(&small, &[iov(8, 8)], RW, 0xffff).unwrap().key(), 0xffff);
}

#[test]
fn provider_keys() {
    let t = table(MrMode::PROV_KEY);
    let regs: Vec<KitMr> = (0..500)
        .map(|i| reg(&t, &[iov(0x1000 + i, 1)], RW, 42).unwrap())
        .collect();
    let mut keys: Vec<u64> = regs.iter().map(KitMr::key).collect();
    assert!(keys.iter().all(|&k| k != KEY_NOTAVAIL));
    assert_ne!(keys[..2], [1, 2], "keys are scrambled");
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), 500);
    // Descriptors are distinct and non-null.
    let mut descs: Vec<usize> = regs.iter().map(KitMr::desc_id).collect();
    assert!(descs.iter().all(|&d| d != 0));
    descs.sort_unstable();
    descs.dedup();
    assert_eq!(descs.len(), 500);

    // A 1-byte key space: 256 keys, then FI_ENOSPC; a close frees one.
    let mut c = MrConfig::new(MrMode::PROV_KEY);
    c.key_size = 1;
    let one = MrTable::new(c).unwrap();
    let mut all: Vec<KitMr> = (0..256)
        .map(|_| reg(&one, &[iov(8, 1)], RW, 0).unwrap())
        .collect();
    let mut k: Vec<u64> = all.iter().map(KitMr::key).collect();
    k.sort_unstable();
    assert_eq!(k, (0..256).collect::<Vec<u64>>());
    assert_eq!(code(reg(&one, &[iov(8, 1)], RW, 0)), Errno::ENOSPC);
    let gone = all.remove(77);
    let freed = gone.key();
    drop(gone);
    assert_eq!(reg(&one, &[iov(8, 1)], RW, 0).unwrap().key(), freed);
}

#[test]
fn remote_lookup_by_offset_and_by_virtual_address() {
    let buf = vec![0u8; 64];
    let base = buf.as_ptr() as usize;
    let off = table(MrMode::empty());
    let m = reg(&off, &[iov(base, 64)], RW, 1).unwrap();
    assert_eq!(m.remote_base(), 0);
    let r = off.lookup_remote(1, 10, 5, OpFlags::REMOTE_READ).unwrap();
    assert_eq!(
        (r.base(), r.offset(), r.addr(), r.len()),
        (base, 10, base + 10, 5)
    );
    assert_eq!(
        (r.key(), r.access(), r.endpoint()),
        (1, OpFlags::REMOTE_READ, None)
    );
    assert!(r.is_contiguous() && !r.is_empty());
    assert_eq!(
        code(off.lookup_remote(1, base as u64, 1, RW)),
        Errno::EFAULT
    );

    let virt = table(MrMode::VIRT_ADDR);
    let v = reg(&virt, &[iov(base, 64)], RW, 1).unwrap();
    assert_eq!(v.remote_base(), base as u64);
    let r = virt
        .lookup_remote(1, base as u64 + 60, 4, OpFlags::REMOTE_WRITE)
        .unwrap();
    assert_eq!(r.addr(), base + 60);
    assert_eq!(code(virt.lookup_remote(1, 10, 1, RW)), Errno::EFAULT);

    // A non-zero attr.offset moves the offset window.
    let whole = [iov(base, 64)];
    let mut a = MrAttr::new(&whole, RW);
    a.offset = 1000;
    a.requested_key = 2;
    off.register(&a, 0)
        .map(|m| {
            assert_eq!(off.lookup_remote(2, 1000, 64, RW).unwrap().addr(), base);
            assert_eq!(code(off.lookup_remote(2, 999, 1, RW)), Errno::EFAULT);
            assert_eq!(code(off.lookup_remote(2, 1064, 1, RW)), Errno::EFAULT);
            drop(m);
        })
        .unwrap();
    drop(buf);
}

#[test]
fn remote_lookup_errors() {
    let t = table(MrMode::empty());
    let _ro = reg(&t, &[iov(0x1000, 32)], OpFlags::REMOTE_READ, 5).unwrap();
    let r = |key, addr, len, acc| t.lookup_remote(key, addr, len, acc);
    assert_eq!(code(r(6, 0, 1, OpFlags::REMOTE_READ)), Errno::ENOKEY);
    assert_eq!(code(r(5, 0, 1, OpFlags::REMOTE_WRITE)), Errno::EACCES);
    assert_eq!(code(r(5, 0, 1, RW)), Errno::EACCES);
    assert_eq!(code(r(5, 0, 1, OpFlags::empty())), Errno::EINVAL);
    assert_eq!(code(r(5, 0, 1, OpFlags::READ)), Errno::EINVAL);
    assert_eq!(code(r(5, 0, 33, OpFlags::REMOTE_READ)), Errno::EFAULT);
    assert_eq!(code(r(5, 32, 1, OpFlags::REMOTE_READ)), Errno::EFAULT);
    assert_eq!(code(r(5, u64::MAX, 2, OpFlags::REMOTE_READ)), Errno::EFAULT);
    assert_eq!(
        code(r(5, 1, usize::MAX, OpFlags::REMOTE_READ)),
        Errno::EFAULT
    );
    // Zero-length accesses anywhere in [start, end].
    assert!(r(5, 32, 0, OpFlags::REMOTE_READ).unwrap().is_empty());
    assert_eq!(
        r(5, 32, 0, OpFlags::REMOTE_READ)
            .unwrap()
            .segments()
            .count(),
        0
    );
    assert_eq!(code(r(5, 33, 0, OpFlags::REMOTE_READ)), Errno::EFAULT);
    // The order of checks: access before range.
    assert_eq!(code(r(5, 999, 1, OpFlags::REMOTE_WRITE)), Errno::EACCES);
    // Messages are static: no allocation on this path.
    let e = r(5, 33, 1, OpFlags::REMOTE_READ).unwrap_err();
    assert!(e.message().contains("past the end"), "{e}");
}

#[test]
fn vectored_regions() {
    let t = table(MrMode::VIRT_ADDR);
    let m = reg(
        &t,
        &[iov(0x1000, 10), iov(0x5000, 5), iov(0x9000, 20)],
        RW,
        3,
    )
    .unwrap();
    assert_eq!(m.len(), 35);
    // The address space is iov[0].base .. + 35, buffers end to end.
    let r = t.lookup_remote(3, 0x1000 + 8, 10, RW).unwrap();
    assert!(!r.is_contiguous());
    assert_eq!((r.base(), r.offset()), (0x1000, 8));
    assert_eq!(
        r.segments().collect::<Vec<_>>(),
        [(0x1008, 2), (0x5000, 5), (0x9000, 3)]
    );
    let r = t.lookup_remote(3, 0x1000 + 10, 5, RW).unwrap();
    assert!(r.is_contiguous());
    assert_eq!(r.addr(), 0x5000);
    assert_eq!(r.segments().collect::<Vec<_>>(), [(0x5000, 5)]);
    let r = t.lookup_remote(3, 0x1000 + 35, 0, RW).unwrap();
    assert_eq!(r.addr(), 0x9000 + 20);
    assert_eq!(code(t.lookup_remote(3, 0x1000 + 30, 6, RW)), Errno::EFAULT);
}

#[test]
fn local_descriptors() {
    let none = table(MrMode::empty());
    none.check_local(std::ptr::null_mut(), 0x10 as *const u8, 4)
        .unwrap();
    none.check_local(0xdead as Desc, 0x10 as *const u8, 4)
        .unwrap();

    let t = table(MrMode::LOCAL);
    let m = reg(&t, &[iov(0x1000, 16), iov(0x2000, 16)], OpFlags::SEND, 1).unwrap();
    let d = m.desc();
    assert!(!d.is_null());
    let p = |a: usize| a as *const u8;
    t.check_local(d, p(0x1000), 16).unwrap();
    t.check_local(d, p(0x2008), 8).unwrap();
    t.check_local(std::ptr::null_mut(), p(0), 0).unwrap();
    t.check_local_access(d, p(0x1000), 1, OpFlags::SEND)
        .unwrap();
    assert_eq!(
        code(t.check_local(std::ptr::null_mut(), p(0x1000), 1)),
        Errno::EINVAL
    );
    assert_eq!(
        code(t.check_local(0x7777 as Desc, p(0x1000), 1)),
        Errno::EINVAL
    );
    assert_eq!(code(t.check_local(d, p(0x1008), 16)), Errno::EFAULT);
    // Adjacent in the region, not in memory: a local buffer is one range.
    assert_eq!(code(t.check_local(d, p(0x100f), 2)), Errno::EFAULT);
    assert_eq!(code(t.check_local(d, p(usize::MAX), 2)), Errno::EFAULT);
    assert_eq!(
        code(t.check_local_access(d, p(0x1000), 1, OpFlags::RECV)),
        Errno::EACCES
    );
    m.close().unwrap();
    assert_eq!(code(t.check_local(d, p(0x1000), 1)), Errno::EINVAL);
}

#[test]
fn endpoint_regions() {
    let t = table(MrMode::ENDPOINT | MrMode::LOCAL);
    let m = reg(&t, &[iov(0x1000, 16)], RW | OpFlags::SEND, 1).unwrap();
    assert!(!m.is_enabled());
    assert_eq!(code(t.lookup_remote(1, 0, 1, RW)), Errno::EOPBADSTATE);
    assert_eq!(
        code(t.check_local(m.desc(), 0x1000 as *const u8, 1)),
        Errno::EOPBADSTATE
    );
    assert_eq!(code(m.enable()), Errno::EOPBADSTATE);
    assert_eq!(code(m.bind_endpoint(9, 1)), Errno::EBADFLAGS);
    m.bind_endpoint(9, 0).unwrap();
    assert_eq!(m.endpoint(), Some(9));
    assert_eq!(code(m.bind_endpoint(10, 0)), Errno::EINVAL);
    m.enable().unwrap();
    m.enable().unwrap();
    assert!(m.is_enabled());
    assert_eq!(code(m.bind_endpoint(9, 0)), Errno::EOPBADSTATE);
    assert_eq!(t.lookup_remote(1, 0, 1, RW).unwrap().endpoint(), Some(9));
    t.lookup_remote_ep(9, 1, 0, 1, RW).unwrap();
    assert_eq!(code(t.lookup_remote_ep(10, 1, 0, 1, RW)), Errno::ENOKEY);
    t.check_local(m.desc(), 0x1000 as *const u8, 1).unwrap();
    m.close().unwrap();
    assert_eq!(code(m.enable()), Errno::EOPBADSTATE);
    assert_eq!(code(m.bind_endpoint(9, 0)), Errno::EOPBADSTATE);

    // Without the mode: no endpoint binding, and lookup_remote_ep ignores the ep.
    let s = table(MrMode::empty());
    let n = reg(&s, &[iov(0x1000, 16)], RW, 1).unwrap();
    assert!(n.is_enabled());
    assert_eq!(code(n.bind_endpoint(9, 0)), Errno::ENOSYS);
    s.lookup_remote_ep(10, 1, 0, 1, RW).unwrap();
}

fn counter() -> (CounterHook, Arc<AtomicU64>) {
    let c = Arc::new(AtomicU64::new(0));
    let h = c.clone();
    (
        CounterHook::new(move |n| {
            h.fetch_add(n, Ordering::Relaxed);
        }),
        c,
    )
}

#[test]
fn rma_event_counters() {
    let t = table(MrMode::RMA_EVENT);
    let attr_iov = [iov(0x1000, 16)];
    let m = t
        .register(&MrAttr::new(&attr_iov, RW), REG_RMA_EVENT)
        .unwrap();
    assert!(!m.is_enabled());
    assert_eq!(m.flags(), REG_RMA_EVENT);
    let (wh, w) = counter();
    let (rh, r) = counter();
    let (bh, b) = counter();
    assert_eq!(
        code(m.bind_counter(wh.clone(), OpFlags::SEND.bits())),
        Errno::EBADFLAGS
    );
    assert_eq!(code(m.bind_counter(wh.clone(), 0)), Errno::EINVAL);
    m.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())
        .unwrap();
    m.bind_counter(rh, OpFlags::REMOTE_READ.bits()).unwrap();
    m.bind_counter(bh, RW.bits()).unwrap();
    m.enable().unwrap();
    assert_eq!(
        code(m.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())),
        Errno::EOPBADSTATE
    );
    t.lookup_remote(m.key(), 0, 4, OpFlags::REMOTE_WRITE)
        .unwrap()
        .count_access();
    t.lookup_remote(m.key(), 0, 4, OpFlags::REMOTE_READ)
        .unwrap()
        .count_access();
    // A fetching atomic reads and writes: each counter counts it once.
    t.lookup_remote(m.key(), 0, 4, RW).unwrap().count_access();
    let v = |c: &Arc<AtomicU64>| c.load(Ordering::Relaxed);
    assert_eq!((v(&w), v(&r), v(&b)), (2, 2, 3));

    // Under FI_MR_RMA_EVENT a region registered without FI_RMA_EVENT is enabled and
    // cannot take counters.
    let plain = reg(&t, &[iov(0x2000, 4)], RW, 2).unwrap();
    assert!(plain.is_enabled());
    assert_eq!(
        code(plain.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())),
        Errno::EINVAL
    );

    // Without the mode, counters may be bound to an enabled region.
    let s = table(MrMode::empty());
    let n = s
        .register(&MrAttr::new(&attr_iov, RW), REG_RMA_EVENT)
        .unwrap();
    assert!(n.is_enabled());
    n.bind_counter(wh.clone(), OpFlags::REMOTE_WRITE.bits())
        .unwrap();
    s.lookup_remote(n.key(), 0, 1, OpFlags::REMOTE_WRITE)
        .unwrap()
        .count_access();
    assert_eq!(v(&w), 3);
    n.close().unwrap();
    assert_eq!(
        code(n.bind_counter(wh, OpFlags::REMOTE_WRITE.bits())),
        Errno::EOPBADSTATE
    );
    let hook = CounterHook::from_counter(Arc::new(fam::TCntr(w.clone())));
    hook.add(5);
    assert_eq!(v(&w), 8);
    assert_eq!(format!("{hook:?}"), "CounterHook");
}

#[test]
fn kit_cntr_counts_rma_events() {
    use ofi_core::cntr::CntrAttr;
    let c = crate::cntr::KitCntr::new(&CntrAttr::default()).unwrap();
    let t = table(MrMode::empty());
    let m = reg(&t, &[iov(0x1000, 8)], RW, 1).unwrap();
    m.bind_counter(c.rma_counter_hook().unwrap(), OpFlags::REMOTE_WRITE.bits())
        .unwrap();
    t.lookup_remote(1, 0, 8, OpFlags::REMOTE_WRITE)
        .unwrap()
        .count_access();
    t.lookup_remote(1, 0, 8, OpFlags::REMOTE_READ)
        .unwrap()
        .count_access();
    assert_eq!(c.value(), 1);
}

#[test]
fn refresh_and_accessors() {
    let t = table(MrMode::MMU_NOTIFY);
    let mut a = MrAttr::new(&[], RW);
    let iovs = [iov(0x1000, 16)];
    a.iov = &iovs;
    a.context = 0xc0;
    a.iface = HmemIface::System;
    a.device = 3;
    let m = t.register(&a, 0).unwrap();
    assert_eq!(m.access(), RW);
    assert!(!m.is_empty());
    assert_eq!(m.context(), 0xc0);
    assert_eq!(m.hmem(), (HmemIface::System, 3));
    assert_eq!(m.desc_id(), m.desc() as usize);
    m.refresh(&[], 0).unwrap();
    m.refresh(&[iov(0x1004, 4)], 0).unwrap();
    assert_eq!(code(m.refresh(&[iov(0x1004, 4)], 1)), Errno::EBADFLAGS);
    let e = m.refresh(&[iov(0x1000, 4), iov(0x100c, 8)], 0).unwrap_err();
    assert_eq!(e.code(), Errno::EINVAL);
    assert!(e.message().contains("#1"), "{e}");
    assert_eq!(code(m.refresh(&[iov(usize::MAX, 4)], 0)), Errno::EINVAL);
    m.close().unwrap();
    assert_eq!(code(m.refresh(&[], 0)), Errno::EOPBADSTATE);
}

#[test]
fn through_the_core_tables() {
    use ofi_core::cntr::CntrAttr;
    use ofi_core::provider::init_builtin;
    use ofi_core::AddrFormat;
    let h = init_builtin::<fam::TProv>().unwrap();
    let info = fam::info(AddrFormat::SOCKADDR_IN, MrMode::ENDPOINT | MrMode::PROV_KEY);
    let fabric = h.open_fabric(&info).unwrap();
    let domain = fabric.domain(&info).unwrap();
    let table = fam::last_table();
    let mr = domain.mr_reg_owned(vec![7u8; 32], RW, 0).unwrap();
    let key = mr.key();
    assert_ne!(key, KEY_NOTAVAIL);
    assert!(!mr.desc().is_null());
    assert_eq!(code(table.lookup_remote(key, 0, 4, RW)), Errno::EOPBADSTATE);
    assert_eq!(mr.enable().unwrap_err().code(), Errno::EOPBADSTATE);
    let ep = domain.endpoint(&info).unwrap();
    mr.bind_ep(&ep, 0).unwrap();
    let cntr = domain.cntr_open(&CntrAttr::default()).unwrap();
    assert_eq!(mr.bind_cntr(&cntr, 1).unwrap_err().code(), Errno::EBADFLAGS);
    mr.bind_cntr(&cntr, OpFlags::REMOTE_WRITE.bits()).unwrap();
    mr.enable().unwrap();
    let r = table
        .lookup_remote(key, 8, 4, OpFlags::REMOTE_WRITE)
        .unwrap();
    assert_eq!(r.addr(), mr.owned_ptr().unwrap().0 as usize + 8);
    r.count_access();
    assert_eq!(cntr.read().unwrap(), 1);
    mr.refresh(&[], 0).unwrap();
    drop(r);
    let mut mr = mr;
    mr.close().unwrap();
    assert_eq!(
        code(table.lookup_remote(key, 8, 4, OpFlags::REMOTE_WRITE)),
        Errno::ENOKEY
    );
    assert!(table.is_empty());

    // User keys across the boundary: a duplicate is FI_ENOKEY.
    let info = fam::info(AddrFormat::SOCKADDR_IN, MrMode::empty());
    let d2 = fabric.domain(&info).unwrap();
    let a = d2.mr_reg_owned(vec![0u8; 8], RW, 99).unwrap();
    assert_eq!(a.key(), 99);
    assert_eq!(
        d2.mr_reg_owned(vec![0u8; 8], RW, 99).unwrap_err().code(),
        Errno::ENOKEY
    );
}

/// What a correct remote lookup of `(addr, len)` gives: the local pieces, or None.
fn model(
    segs: &[(usize, usize)],
    remote_base: u64,
    addr: u64,
    len: usize,
) -> Option<Vec<(usize, usize)>> {
    let total: u128 = segs.iter().map(|s| s.1 as u128).sum();
    let off = u128::from(addr).checked_sub(u128::from(remote_base))?;
    if off + len as u128 > total {
        return None;
    }
    let mut out = Vec::new();
    let (mut off, mut left) = (off, len as u128);
    for &(b, l) in segs {
        if left == 0 {
            break;
        }
        if off >= l as u128 {
            off -= l as u128;
            continue;
        }
        let n = (l as u128 - off).min(left);
        out.push((b + off as usize, n as usize));
        left -= n;
        off = 0;
    }
    Some(out)
}

fn seg_strategy() -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((0usize..1 << 40, 1usize..200), 1..4)
}

fn addr_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..1000, any::<u64>(), (u64::MAX - 300)..=u64::MAX]
}

fn len_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..700, any::<usize>(), (usize::MAX - 10)..=usize::MAX]
}

proptest! {
    #[test]
    fn remote_bounds_match_the_model(
        segs in seg_strategy(),
        virt in any::<bool>(),
        offset in prop_oneof![Just(0u64), 0u64..1000, (u64::MAX - 1000)..u64::MAX],
        probes in prop::collection::vec((addr_strategy(), len_strategy(), any::<bool>()), 1..40),
    ) {
        let t = table(if virt { MrMode::VIRT_ADDR } else { MrMode::empty() });
        let iovs: Vec<Iov> = segs.iter().map(|&(b, l)| iov(b, l)).collect();
        let mut a = MrAttr::new(&iovs, RW);
        a.offset = offset;
        let total: u64 = segs.iter().map(|s| s.1 as u64).sum();
        let base = if virt { segs[0].0 as u64 } else { offset };
        let m = match t.register(&a, 0) {
            Ok(m) => m,
            Err(e) => {
                prop_assert!(base.checked_add(total).is_none());
                prop_assert_eq!(e.code(), Errno::EINVAL);
                return Ok(());
            }
        };
        for (addr, len, near) in probes {
            // Half the probes land near the region.
            let addr = if near { base.wrapping_add(addr % (total + 20)).wrapping_sub(10) } else { addr };
            let got = t.lookup_remote(m.key(), addr, len, OpFlags::REMOTE_READ);
            match model(&segs, base, addr, len) {
                Some(pieces) => {
                    let r = got.unwrap();
                    prop_assert_eq!(r.segments().collect::<Vec<_>>(), pieces.clone());
                    prop_assert_eq!(r.len(), len);
                    if let Some(&(first, _)) = pieces.first() {
                        prop_assert_eq!(r.addr(), first);
                    }
                    prop_assert_eq!(r.is_contiguous(), pieces.len() <= 1);
                }
                None => prop_assert_eq!(got.unwrap_err().code(), Errno::EFAULT),
            }
        }
    }
}

#[test]
fn concurrent_registration_and_lookup() {
    let t = table(MrMode::PROV_KEY);
    let stable = reg(&t, &[iov(0x1000, 64)], RW, 0).unwrap();
    let key = stable.key();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..5000u64 {
                    let r = t.lookup_remote(key, i % 64, 1, RW).unwrap();
                    assert_eq!(r.addr(), 0x1000 + (i % 64) as usize);
                }
            })
        })
        .collect();
    for i in 0..2000 {
        let m = reg(&t, &[iov(0x10_0000 + i, 1)], RW, 0).unwrap();
        assert_eq!(
            t.lookup_remote(m.key(), 0, 1, RW).unwrap().addr(),
            0x10_0000 + i
        );
    }
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(t.len(), 1);
}
