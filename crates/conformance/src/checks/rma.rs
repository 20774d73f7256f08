//! RMA (fi_rma(3)) on every endpoint type with `FI_RMA`: `fi_write` / `fi_read` of
//! several sizes with integrity, `fi_writev` / `fi_readv`, `fi_writemsg`,
//! `fi_inject_write` (no completion), `fi_writedata` (remote CQ data at the target),
//! counters bound with `FI_WRITE` / `FI_READ`, and bad keys / out-of-range accesses
//! (an error completion at the initiator, target memory untouched; the codes are the
//! provider's [`crate::Expectations`]).
//!
//! The target is a region of side `b` registered with `FI_REMOTE_READ |
//! FI_REMOTE_WRITE`; remote addresses are virtual addresses under `FI_MR_VIRT_ADDR`,
//! offsets otherwise. Local buffers are registered too (needed under `FI_MR_LOCAL`,
//! harmless otherwise). Every wait is bounded by [`crate::WAIT`].

use std::time::Instant;

use ofi::abi::raw::{Iov, MsgRma, RmaIov};
use ofi::mr::MemoryRegion;
use ofi::{Caps, Errno, MrMode, OpFlags};

use crate::fixture::pattern;
use crate::pair::{assert_flags, each_pair_with, show, Pair, PairSpec};
use crate::{Subject, WAIT};

/// Size of the target region.
pub const REGION: usize = 1 << 20;

/// A registered region with its remote address base.
#[derive(Debug)]
pub struct Region {
    /// The registration (owns the memory).
    pub mr: MemoryRegion,
    /// The address a peer uses for its first byte.
    pub addr: u64,
    /// Its start in this process.
    pub ptr: *mut u8,
}

impl Region {
    /// Register `len` bytes filled with `fill` on `p`'s side `side` with `access`.
    pub fn new(p: &Pair, side: usize, len: usize, fill: u8, access: OpFlags, key: u64) -> Region {
        let mr = p
            .domain
            .mr_reg_owned(vec![fill; len], access, key)
            .unwrap_or_else(|e| {
                panic!("fi_mr_reg of {len} bytes with {access}: {e} ({})", e.code())
            });
        let mode = p.info.domain_attr.mr_mode;
        if mode.contains(MrMode::ENDPOINT) {
            mr.bind_ep(&p.side(side).ep, 0)
                .unwrap_or_else(|e| panic!("fi_mr_bind(ep): {e}"));
            mr.enable().unwrap_or_else(|e| panic!("fi_mr_enable: {e}"));
        }
        let ptr = mr.owned_ptr().expect("an owned region has its memory").0;
        let addr = if mode.contains(MrMode::VIRT_ADDR) {
            ptr as u64
        } else {
            0
        };
        Region { mr, addr, ptr }
    }

    /// A copy of the bytes (read between operations: progress is manual or the
    /// operation's completion has been read).
    pub fn bytes(&self) -> Vec<u8> {
        self.mr.owned_to_vec().expect("owned")
    }

    /// The local iov of `len` bytes at `off` (for this process's own operations).
    pub fn iov(&self, off: usize, len: usize) -> Iov {
        Iov {
            base: self.ptr.wrapping_add(off).cast(),
            len,
        }
    }

    /// The remote iov of `len` bytes at `off` (for a peer's RMA into this region).
    pub fn rma_iov(&self, off: u64, len: usize) -> RmaIov {
        RmaIov {
            addr: self.addr + off,
            len,
            key: self.mr.key(),
        }
    }

    /// Overwrite the bytes at `off`.
    pub fn set(&mut self, off: usize, data: &[u8]) {
        self.mr.write_owned(off, data).expect("inside the region");
    }

    /// `fi_write` (`dir` [`Rma::Write`]) of this (local) region's first `len` bytes
    /// from `p`'s first endpoint to its peer's `addr` under `key`, or `fi_read`
    /// ([`Rma::Read`]) from there into them, with context `ctx`; the call's answer.
    ///
    /// # Safety
    ///
    /// This region lives until the operation's completion has been read.
    pub unsafe fn rma(
        &self,
        p: &Pair,
        dir: Rma,
        len: usize,
        addr: u64,
        key: u64,
        ctx: usize,
    ) -> ofi::Result<()> {
        let (ep, desc, peer) = (&p.a.ep, self.mr.desc(), p.a.peer);
        // SAFETY: `len` bytes of this registered region, which the caller keeps alive
        // until the completion.
        unsafe {
            match dir {
                Rma::Write => ep.write(self.ptr, len, desc, peer, addr, key, ctx),
                Rma::Read => ep.read(self.ptr, len, desc, peer, addr, key, ctx),
            }
        }
    }

    /// [`Region::rma`] between the bytes `span` of `target` and as many bytes at the
    /// start of this region, then its completion at side a, read and checked: context
    /// `ctx`, flags `FI_RMA` with `FI_WRITE` / `FI_READ`. Panics (naming `what`) when the
    /// call fails or the completion differs.
    pub fn rma_done(
        &self,
        p: &Pair,
        dir: Rma,
        target: &Region,
        span: std::ops::Range<usize>,
        ctx: usize,
        what: &str,
    ) {
        let (addr, key) = (target.addr + span.start as u64, target.mr.key());
        // SAFETY: the completion is read below, while `self` is borrowed.
        unsafe { self.rma(p, dir, span.len(), addr, key, ctx) }
            .unwrap_or_else(|e| panic!("{what}: {e} ({})", e.code()));
        let c = p.wait_ok_ctx(0, ctx, what);
        assert_flags(&c, OpFlags::RMA | dir.flag(), what);
    }

    /// `fi_writev` ([`Rma::Write`]) of the local buffers `iov` (which lie in this
    /// region) to `p`'s peer at `addr` under `key`, or `fi_readv` ([`Rma::Read`]) from
    /// there into them, with context `ctx`; the call's answer.
    ///
    /// # Safety
    ///
    /// This region lives until the operation's completion has been read.
    pub unsafe fn rmav(
        &self,
        p: &Pair,
        dir: Rma,
        iov: &[Iov],
        addr: u64,
        key: u64,
        ctx: usize,
    ) -> ofi::Result<()> {
        let (ep, peer) = (&p.a.ep, p.a.peer);
        let desc = vec![self.mr.desc(); iov.len()];
        let (iov, desc, n) = (iov.as_ptr(), desc.as_ptr(), iov.len());
        // SAFETY: the buffers of `iov` lie in this registered region, which the caller
        // keeps alive until the completion; `desc` has one entry per buffer.
        unsafe {
            match dir {
                Rma::Write => ep.writev(iov, desc, n, peer, addr, key, ctx),
                Rma::Read => ep.readv(iov, desc, n, peer, addr, key, ctx),
            }
        }
    }
}

/// Which way an RMA operation of [`Region::rma`] moves the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rma {
    /// `fi_write`: from the local region to the peer's.
    Write,
    /// `fi_read`: from the peer's region to the local one.
    Read,
}

impl Rma {
    /// The flag its completion carries with `FI_RMA` (`FI_WRITE` / `FI_READ`).
    pub fn flag(self) -> OpFlags {
        match self {
            Rma::Write => OpFlags::WRITE,
            Rma::Read => OpFlags::READ,
        }
    }
}

/// The `fi_msg_rma` of an operation from `p`'s first endpoint to its peer: the local
/// buffers `iov` (described by `desc`), the target ranges `rma`, context `ctx`, no
/// data. It points into the arrays, which must outlive the call it is passed to.
pub fn msg_rma(
    p: &Pair,
    iov: &[Iov],
    desc: &[*mut std::ffi::c_void],
    rma: &[RmaIov],
    ctx: usize,
) -> MsgRma {
    MsgRma {
        msg_iov: iov.as_ptr(),
        desc: desc.as_ptr(),
        iov_count: iov.len(),
        addr: p.a.peer,
        rma_iov: rma.as_ptr(),
        rma_iov_count: rma.len(),
        context: ctx,
        data: 0,
    }
}

/// Drive `p` until `region[off..]` equals `want` (a remote write has landed), within
/// [`WAIT`].
pub fn await_bytes(p: &Pair, region: &Region, off: usize, want: &[u8], what: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        if region.bytes()[off..off + want.len()] == *want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: target memory never matched ({} bytes at offset {off})",
            want.len()
        );
        p.drive();
        std::thread::yield_now();
    }
}

/// Run `f` on a pair of every endpoint type with `FI_RMA` (see [`each_rma_pair_where`]).
fn each_rma_pair(s: &Subject, f: impl FnMut(Pair)) -> usize {
    each_rma_pair_where(s, Caps::RMA, |_| true, f)
}

/// Run `f` on a pair of every endpoint type with `caps` whose results satisfy `extra`
/// (see [`crate::pair::each_type`]); where counters work, the pair's counter counts `FI_READ |
/// FI_WRITE`.
fn each_rma_pair_where(
    s: &Subject,
    caps: Caps,
    extra: impl Fn(&ofi::Info) -> bool,
    f: impl FnMut(Pair),
) -> usize {
    let counted = s.claimed().probes.cntr.is_ok();
    let count_rma = |spec: &mut PairSpec| {
        if counted {
            spec.cntr_flags = OpFlags::READ | OpFlags::WRITE;
        }
    };
    each_pair_with(s, caps, extra, count_rma, f)
}

const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
const LOCAL: OpFlags = OpFlags::READ
    .union(OpFlags::WRITE)
    .union(OpFlags::SEND)
    .union(OpFlags::RECV);

/// `fi_write` then `fi_read` of sizes 1 … 1 MiB (and `max_msg_size`): the bytes land
/// at the target and come back; completions carry `FI_RMA | FI_WRITE` / `FI_RMA |
/// FI_READ`; counters bound with `FI_WRITE | FI_READ` count them.
pub fn rma_write_read_sizes(s: &Subject) {
    each_rma_pair(s, |p| {
        let mut target = Region::new(&p, 1, REGION, 0, REMOTE, 0x71);
        let mut local = Region::new(&p, 0, REGION, 0, LOCAL, 0x72);
        let max = p.info.ep_attr.max_msg_size.min(REGION);
        let mut ops = 0u64;
        for (i, len) in [1usize, 64, 4096, 65536, max].into_iter().enumerate() {
            if len > max {
                continue;
            }
            let data = pattern(len, 10 + i as u8);
            local.set(0, &data);
            let what = format!("fi_write of {len} bytes");
            local.rma_done(&p, Rma::Write, &target, 0..len, 0x100 + i, &what);
            await_bytes(&p, &target, 0, &data, &what);
            let back = pattern(len, 200 - i as u8);
            target.set(0, &back);
            let what = format!("fi_read of {len} bytes");
            local.rma_done(&p, Rma::Read, &target, 0..len, 0x200 + i, &what);
            assert!(
                local.bytes()[..len] == back[..],
                "fi_read of {len} bytes: wrong data"
            );
            ops += 1;
        }
        p.assert_quiet(
            1,
            10,
            "RMA without remote CQ data completes nothing at the target",
        );
        if let Some(c) = &p.a.cntr {
            c.wait(2 * ops, WAIT.as_millis() as i32)
                .unwrap_or_else(|e| {
                    panic!(
                        "FI_READ|FI_WRITE counter to {}: {e}; reads {:?}",
                        2 * ops,
                        c.read()
                    )
                });
            assert_eq!(
                c.read().unwrap(),
                2 * ops,
                "the counter bound with FI_READ | FI_WRITE"
            );
            assert_eq!(c.readerr().unwrap(), 0);
        }
    });
}

/// `fi_writev` / `fi_readv` with two local buffers (where `iov_limit` ≥ 2) and
/// `fi_writemsg` with two remote ranges (where `rma_iov_limit` ≥ 2).
pub fn rma_iov_and_msg(s: &Subject) {
    each_rma_pair(s, |p| {
        let target = Region::new(&p, 1, 4096, 0, REMOTE, 0x73);
        let mut local = Region::new(&p, 0, 4096, 0, LOCAL, 0x74);
        let data = pattern(300, 5);
        local.set(0, &data);
        let desc = [local.mr.desc(), local.mr.desc()];
        if p.info.tx_attr.iov_limit >= 2 {
            let iov = [local.iov(0, 100), local.iov(100, 200)];
            let (addr, key) = (target.addr, target.mr.key());
            // SAFETY: `local` lives until the completion.
            unsafe { local.rmav(&p, Rma::Write, &iov, addr, key, 0x300) }
                .unwrap_or_else(|e| panic!("fi_writev: {e} ({})", e.code()));
            p.wait_ok_ctx(0, 0x300, "fi_writev");
            await_bytes(&p, &target, 0, &data, "fi_writev");
            let iov = [local.iov(1000, 150), local.iov(2000, 150)];
            // SAFETY: as above.
            unsafe { local.rmav(&p, Rma::Read, &iov, addr, key, 0x301) }
                .unwrap_or_else(|e| panic!("fi_readv: {e} ({})", e.code()));
            p.wait_ok_ctx(0, 0x301, "fi_readv");
            let l = local.bytes();
            assert!(
                l[1000..1150] == data[..150] && l[2000..2150] == data[150..300],
                "fi_readv scattered wrongly"
            );
        }
        if p.info.tx_attr.rma_iov_limit >= 2 {
            let iov = [local.iov(0, 300)];
            let rma = [target.rma_iov(3000, 100), target.rma_iov(3500, 200)];
            let msg = msg_rma(&p, &iov, &desc, &rma, 0x302);
            // SAFETY: as above.
            unsafe { p.a.ep.writemsg(&msg, 0) }
                .unwrap_or_else(|e| panic!("fi_writemsg: {e} ({})", e.code()));
            assert_eq!(p.wait_ok(0, "fi_writemsg").op_context, 0x302);
            await_bytes(&p, &target, 3000, &data[..100], "fi_writemsg first range");
            await_bytes(
                &p,
                &target,
                3500,
                &data[100..300],
                "fi_writemsg second range",
            );
        }
    });
}

/// `fi_inject_write` up to `inject_size`: the bytes land, no completion at either side.
pub fn rma_inject_write(s: &Subject) {
    each_rma_pair_where(
        s,
        Caps::RMA,
        |i| i.tx_attr.inject_size > 0,
        |p| {
            let target = Region::new(&p, 1, 4096, 0, REMOTE, 0x75);
            let n = p.info.tx_attr.inject_size.min(4096);
            let data = pattern(n, 66);
            p.a.ep
                .inject_write(&data, p.a.peer, target.addr, target.mr.key())
                .unwrap_or_else(|e| panic!("fi_inject_write of {n} bytes: {e} ({})", e.code()));
            await_bytes(&p, &target, 0, &data, "fi_inject_write");
            p.assert_quiet(0, 20, "fi_inject_write generates no completion");
            p.assert_quiet(
                1,
                0,
                "fi_inject_write generates no completion at the target",
            );
        },
    );
}

/// `fi_writedata`: the target's CQ reports `FI_REMOTE_CQ_DATA` with the data (a
/// receive is posted first where the mode is `FI_RX_CQ_DATA`).
pub fn rma_writedata_remote_cq_data(s: &Subject) {
    each_rma_pair_where(
        s,
        Caps::RMA | Caps::REMOTE_CQ_DATA,
        |i| i.domain_attr.cq_data_size > 0,
        |p| {
            let target = Region::new(&p, 1, 4096, 0, REMOTE, 0x76);
            let mut local = Region::new(&p, 0, 4096, 0, LOCAL, 0x77);
            let size = p.info.domain_attr.cq_data_size.min(8);
            let mask = if size >= 8 {
                u64::MAX
            } else {
                (1u64 << (8 * size)) - 1
            };
            let data = 0x5a5a_1234_abcd_0042 & mask;
            let mut rbuf = [0u8; 8];
            if p.info.mode.contains(ofi::Mode::RX_CQ_DATA) {
                crate::fixture::post_recv(&p.b.ep, &mut rbuf, 0x401).unwrap();
            }
            let bytes = pattern(64, 8);
            local.set(0, &bytes);
            // SAFETY: `local` lives until the completion.
            unsafe {
                p.a.ep.writedata(
                    local.ptr,
                    64,
                    local.mr.desc(),
                    data,
                    p.a.peer,
                    target.addr,
                    target.mr.key(),
                    0x400,
                )
            }
            .unwrap_or_else(|e| panic!("fi_writedata: {e} ({})", e.code()));
            assert_eq!(p.wait_ok(0, "fi_writedata").op_context, 0x400);
            let r = p.wait_ok(1, "the target's fi_writedata completion");
            assert_flags(
                &r,
                OpFlags::REMOTE_CQ_DATA,
                "target completion of fi_writedata",
            );
            assert_eq!(r.data & mask, data, "remote CQ data ({})", show(&r));
            await_bytes(&p, &target, 0, &bytes, "fi_writedata");
            if p.info.tx_attr.inject_size >= 8 {
                if p.info.mode.contains(ofi::Mode::RX_CQ_DATA) {
                    crate::fixture::post_recv(&p.b.ep, &mut rbuf, 0x402).unwrap();
                }
                p.a.ep
                    .inject_writedata(
                        b"injected",
                        !data & mask,
                        p.a.peer,
                        target.addr + 100,
                        target.mr.key(),
                    )
                    .unwrap_or_else(|e| panic!("fi_inject_writedata: {e} ({})", e.code()));
                let r = p.wait_ok(1, "the target's fi_inject_writedata completion");
                assert_flags(
                    &r,
                    OpFlags::REMOTE_CQ_DATA,
                    "target completion of fi_inject_writedata",
                );
                assert_eq!(r.data & mask, !data & mask);
                await_bytes(&p, &target, 100, b"injected", "fi_inject_writedata");
            }
        },
    );
}

/// A write or read with a key no region has, or beyond the region's end: an error
/// completion at the initiator (its context, the provider's documented code), and the
/// target memory is untouched; a good write afterwards works. Under
/// [`Semantics::ACCESS_ERROR_BREAKS_CONNECTION`](crate::Semantics::ACCESS_ERROR_BREAKS_CONNECTION)
/// each bad access runs on a fresh pair and the write after it must complete in error
/// (the connection is gone), the target still untouched.
pub fn rma_bad_key_and_out_of_range(s: &Subject) {
    if s.has(crate::Semantics::ACCESS_ERROR_BREAKS_CONNECTION) {
        for case in 0..3 {
            bad_accesses(s, &[case]);
        }
    } else {
        bad_accesses(s, &[0, 1, 2]);
    }
}

/// The bad accesses `cases` (indices of the three below) on each RMA pair, in order.
fn bad_accesses(s: &Subject, cases: &[usize]) {
    let breaks = s.has(crate::Semantics::ACCESS_ERROR_BREAKS_CONNECTION);
    each_rma_pair(s, |p| {
        let target = Region::new(&p, 1, 4096, 0x11, REMOTE, 0x78);
        let local = Region::new(&p, 0, 4096, 0x22, LOCAL, 0x79);
        let bad_key = target.mr.key() ^ 0x5a5a_0000;
        let all: [(&str, u64, u64, usize, Option<Errno>); 3] = [
            (
                "fi_write with a bad key",
                target.addr,
                bad_key,
                0,
                s.expect.rma_bad_key,
            ),
            (
                "fi_write past the region's end",
                target.addr + 4096 - 8,
                target.mr.key(),
                0,
                s.expect.rma_out_of_range,
            ),
            (
                "fi_read with a bad key",
                target.addr,
                bad_key,
                1,
                s.expect.rma_bad_key,
            ),
        ];
        for &i in cases {
            let (what, addr, key, read, want) = all[i];
            let ctx = 0x500 + i;
            // SAFETY: `local` lives until the completion.
            let r = unsafe {
                if read == 1 {
                    p.a.ep
                        .read(local.ptr, 64, local.mr.desc(), p.a.peer, addr, key, ctx)
                } else {
                    p.a.ep
                        .write(local.ptr, 64, local.mr.desc(), p.a.peer, addr, key, ctx)
                }
            };
            match r {
                Err(e) => panic!(
                    "{what}: the call failed at once ({e}); the error belongs in a completion"
                ),
                Ok(()) => {
                    let ee = p.wait_err(0, what);
                    assert_eq!(ee.op_context, ctx, "{what}: error completion context");
                    let got = Errno(ee.err);
                    assert_ne!(
                        got,
                        Errno(0),
                        "{what}: error completion without an error code"
                    );
                    if let Some(w) = want {
                        assert_eq!(got, w, "{what}: error code");
                    } else {
                        println!(
                            "  {what}: error completion {got} ({})",
                            ofi::error::strerror(ee.err)
                        );
                    }
                }
            }
        }
        p.assert_quiet(1, 20, "failed RMA completes nothing at the target");
        if let Some(c) = &p.a.cntr {
            // Operations that complete in error count as errors (fi_endpoint(3) NOTES).
            assert_eq!(
                c.readerr().unwrap(),
                cases.len() as u64,
                "the FI_READ | FI_WRITE counter's errors"
            );
            assert_eq!(c.read().unwrap(), 0, "failed operations are not successes");
        }
        assert!(
            target.bytes().iter().all(|&b| b == 0x11),
            "a failed write changed the target"
        );
        assert!(
            local.bytes().iter().all(|&b| b == 0x22),
            "a failed read changed the local buffer"
        );
        // SAFETY: as above.
        unsafe { local.rma(&p, Rma::Write, 8, target.addr, target.mr.key(), 0x5ff) }.unwrap();
        if breaks {
            // The connection is gone: the write is flushed, the target untouched.
            let ee = p.wait_err(0, "a write after the error (broken connection)");
            assert_eq!(ee.op_context, 0x5ff, "flushed write's context");
            assert!(
                [Errno::ECANCELED, Errno::ECONNRESET].contains(&Errno(ee.err)),
                "a write on the broken connection: {} instead of FI_ECANCELED or \
                     FI_ECONNRESET",
                Errno(ee.err)
            );
            p.assert_quiet(1, 20, "a flushed write completes nothing at the target");
            assert!(
                target.bytes().iter().all(|&b| b == 0x11),
                "a flushed write changed the target"
            );
            return;
        }
        // The pair still works.
        p.wait_ok(0, "a good write after the failures");
        await_bytes(
            &p,
            &target,
            0,
            &[0x22; 8],
            "a good write after the failures",
        );
    });
}
