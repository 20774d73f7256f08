//! Ordering and fences (fi_endpoint(3) "msg_order", fi_getinfo(3) `FI_FENCE`): what a
//! provider claims about the order of RMA operations holds.
//!
//! - [`ordering_rma_claims_hold`]: where `FI_ORDER_RAW` / `FI_ORDER_WAW` /
//!   `FI_ORDER_WAR` are claimed (within `max_order_*_size`), operations posted back to
//!   back, without waiting for completions, act on the target in the order posted: a read
//!   after a write sees it, the later of two writes wins, a read before a write does not
//!   see it.
//! - [`fence_read_after_writes`]: with `FI_FENCE`, an `fi_readmsg` with `FI_FENCE`
//!   posted right after a burst of writes starts only when they have completed
//!   (the provider may answer `FI_EAGAIN` until then): it reads every byte they wrote,
//!   and its completion comes after theirs.
//!
//! Every wait is bounded by [`crate::WAIT`].

use std::time::Instant;

use ofi::{Caps, Errno, MsgOrder, OpFlags};

use crate::checks::rma::{msg_rma, Region};
use crate::fixture::pattern;
use crate::pair::{each_pair_with, show, Pair};
use crate::{Subject, WAIT};

const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
const LOCAL: OpFlags = OpFlags::READ
    .union(OpFlags::WRITE)
    .union(OpFlags::SEND)
    .union(OpFlags::RECV);

/// Retry `post` while it answers `FI_EAGAIN` (driving both sides), within [`WAIT`].
fn post_retrying(p: &Pair, what: &str, mut post: impl FnMut() -> ofi::Result<()>) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut again = 0;
    loop {
        match post() {
            Ok(()) => return again,
            Err(e) if e.code() == Errno::EAGAIN && Instant::now() < deadline => {
                again += 1;
                p.drive();
                std::thread::yield_now();
            }
            Err(e) => panic!("{what}: {e} ({})", e.code()),
        }
    }
}

/// `fi_write` of `local[off..off + len]` to `target[toff..]`.
fn write(p: &Pair, local: &Region, off: usize, len: usize, target: &Region, toff: u64, ctx: usize) {
    let desc = local.mr.desc();
    post_retrying(p, "fi_write", || {
        // SAFETY: `local` is registered and outlives the operation's completion.
        unsafe {
            p.a.ep.write(
                local.ptr.wrapping_add(off),
                len,
                desc,
                p.a.peer,
                target.addr + toff,
                target.mr.key(),
                ctx,
            )
        }
    });
}

/// `fi_readmsg` of `target[toff..toff + len]` into `local[off..]` with `flags`; how many
/// times the provider answered `FI_EAGAIN` first.
#[allow(clippy::too_many_arguments)]
fn readmsg(
    p: &Pair,
    local: &Region,
    off: usize,
    len: usize,
    target: &Region,
    toff: u64,
    ctx: usize,
    flags: OpFlags,
) -> usize {
    let iov = [local.iov(off, len)];
    let desc = [local.mr.desc()];
    let rma = [target.rma_iov(toff, len)];
    let msg = msg_rma(p, &iov, &desc, &rma, ctx);
    post_retrying(p, &format!("fi_readmsg({flags})"), || {
        // SAFETY: the buffers are registered and outlive the completion; `msg` and its
        // arrays live across the call.
        unsafe { p.a.ep.readmsg(&msg, flags.bits()) }
    })
}

/// The RMA orderings the pair's results claim hold for operations up to 4 KiB
/// (and within `max_order_*_size`), posted back to back.
pub fn ordering_rma_claims_hold(s: &Subject) {
    each_pair_with(
        s,
        Caps::RMA,
        |i| {
            i.tx_attr
                .msg_order
                .intersects(MsgOrder::RAW | MsgOrder::WAW | MsgOrder::WAR)
        },
        |_| {},
        |p| {
            let order = p.info.tx_attr.msg_order;
            let ep = &p.info.ep_attr;
            const LEN: usize = 4096;
            let target = Region::new(&p, 1, 4 * LEN, 0, REMOTE, 0x91);
            let mut local = Region::new(&p, 0, 8 * LEN, 0, LOCAL, 0x92);
            local.set(0, &pattern(LEN, 11));
            local.set(LEN, &pattern(LEN, 12));
            let mut n = 0;
            if order.contains(MsgOrder::RAW) && ep.max_order_raw_size >= LEN {
                write(&p, &local, 0, LEN, &target, 0, 0x400);
                readmsg(
                    &p,
                    &local,
                    4 * LEN,
                    LEN,
                    &target,
                    0,
                    0x401,
                    OpFlags::COMPLETION,
                );
                n += 2;
            }
            if order.contains(MsgOrder::WAW) && ep.max_order_waw_size >= LEN {
                write(&p, &local, 0, LEN, &target, LEN as u64, 0x402);
                write(&p, &local, LEN, LEN, &target, LEN as u64, 0x403);
                n += 2;
            }
            if order.contains(MsgOrder::WAR) && ep.max_order_war_size >= LEN {
                // The target's third block is zeros; read it, then overwrite it.
                readmsg(
                    &p,
                    &local,
                    5 * LEN,
                    LEN,
                    &target,
                    2 * LEN as u64,
                    0x404,
                    OpFlags::COMPLETION,
                );
                write(&p, &local, 0, LEN, &target, 2 * LEN as u64, 0x405);
                n += 2;
            }
            let done = p.wait_n(0, n, "the ordered operations");
            let mut ctxs: Vec<usize> = done.iter().map(|c| c.op_context).collect();
            ctxs.sort_unstable();
            assert_eq!(
                ctxs.len(),
                n,
                "completions: {:?}",
                done.iter().map(show).collect::<Vec<_>>()
            );
            let l = local.bytes();
            let t = target.bytes();
            if ctxs.contains(&0x401) {
                assert!(
                    l[4 * LEN..5 * LEN] == pattern(LEN, 11)[..],
                    "FI_ORDER_RAW claimed, but a read posted after a write did not see it"
                );
            }
            if ctxs.contains(&0x403) {
                assert!(
                    t[LEN..2 * LEN] == pattern(LEN, 12)[..],
                    "FI_ORDER_WAW claimed, but the earlier of two writes landed last"
                );
            }
            if ctxs.contains(&0x404) {
                assert!(
                    l[5 * LEN..6 * LEN].iter().all(|&b| b == 0),
                    "FI_ORDER_WAR claimed, but a read posted before a write saw it"
                );
                assert!(
                    t[2 * LEN..3 * LEN] == pattern(LEN, 11)[..],
                    "the write after the read"
                );
            }
        },
    );
}

/// `FI_FENCE`: eight writes of 8 KiB, then a fenced `fi_readmsg` of all 64 KiB: it sees
/// every write, and completes after all of them.
pub fn fence_read_after_writes(s: &Subject) {
    each_pair_with(
        s,
        Caps::RMA | Caps::FENCE,
        |_| true,
        |_| {},
        |p| {
            const BLOCK: usize = 8192;
            const N: usize = 8;
            let target = Region::new(&p, 1, N * BLOCK, 0, REMOTE, 0x93);
            let mut local = Region::new(&p, 0, 2 * N * BLOCK, 0, LOCAL, 0x94);
            let mut want = Vec::with_capacity(N * BLOCK);
            for i in 0..N {
                let b = pattern(BLOCK, 100 + i as u8);
                local.set(i * BLOCK, &b);
                want.extend_from_slice(&b);
            }
            for i in 0..N {
                write(
                    &p,
                    &local,
                    i * BLOCK,
                    BLOCK,
                    &target,
                    (i * BLOCK) as u64,
                    0x500 + i,
                );
            }
            readmsg(
                &p,
                &local,
                N * BLOCK,
                N * BLOCK,
                &target,
                0,
                0x5ff,
                OpFlags::COMPLETION | OpFlags::FENCE,
            );
            let done = p.wait_n(0, N + 1, "the writes and the fenced read");
            let ctxs: Vec<usize> = done.iter().map(|c| c.op_context).collect();
            assert_eq!(
                ctxs.last(),
                Some(&0x5ff),
                "the fenced read completed before an earlier write: {ctxs:x?}"
            );
            assert!(
                local.bytes()[N * BLOCK..] == want[..],
                "the fenced read did not see every earlier write"
            );
        },
    );
}
