//! `FI_RMA_EVENT` (fi_cntr(3), fi_endpoint(3)): a counter bound to the target
//! endpoint with `FI_REMOTE_WRITE | FI_REMOTE_READ` counts the RMA writes, reads (and,
//! with `FI_ATOMIC`, atomics) a peer carries out on its memory, once each has been done; an access the target
//! refuses (a bad key) counts nothing, and the initiator's own remote counter stays at
//! 0. Every wait is bounded by [`crate::WAIT`].

use ofi::{AtomicOp, Caps, Datatype, OpFlags};

use crate::checks::rma::{await_bytes, Region, Rma};
use crate::fixture::pattern;
use crate::pair::{each_pair_with, Pair};
use crate::{Subject, WAIT};

const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
const LOCAL: OpFlags = OpFlags::READ.union(OpFlags::WRITE);

/// The value of side `i`'s counter once it reaches `want` (within [`WAIT`]).
fn await_count(p: &Pair, i: usize, want: u64, what: &str) {
    let c = p.side(i).cntr.as_ref().expect("the pair binds a counter");
    c.wait(want, WAIT.as_millis() as i32)
        .unwrap_or_else(|e| panic!("{what}: the remote counter never reached {want}: {e}"));
    assert_eq!(c.read().unwrap(), want, "{what}: the remote counter");
}

/// An `fi_write`, an `fi_read`, an `fi_atomic` (with `FI_ATOMIC`), then a write with
/// a bad key: the target's remote counter reads 1, 2, 3, 3; the initiator's 0.
pub fn rma_remote_counters(s: &Subject) {
    let base = Caps::RMA | Caps::RMA_EVENT;
    // Atomics too where the provider offers them with remote counters.
    let caps = if s.claimed().types_with(base | Caps::ATOMIC).is_empty() {
        base
    } else {
        base | Caps::ATOMIC
    };
    each_pair_with(
        s,
        caps,
        |i| i.ep_type() != ofi::EpType::Dgram,
        |spec| spec.cntr_flags = REMOTE,
        |p| {
            let target = Region::new(&p, 1, 4096, 0, REMOTE, 0x81);
            let mut local = Region::new(&p, 0, 4096, 0, LOCAL, 0x82);
            let data = pattern(64, 3);
            local.set(0, &data);
            // An fi_write of the 64 bytes of `local` to `target` with `key`.
            let write = |key: u64, ctx: usize| {
                // SAFETY: `local` lives until the completion is read.
                unsafe { local.rma(&p, Rma::Write, 64, target.addr, key, ctx) }
            };
            write(target.mr.key(), 1).unwrap_or_else(|e| panic!("fi_write: {e} ({})", e.code()));
            p.wait_ok(0, "fi_write");
            await_bytes(&p, &target, 0, &data, "fi_write");
            await_count(&p, 1, 1, "after one fi_write");
            local.rma_done(&p, Rma::Read, &target, 64..128, 2, "fi_read");
            await_count(&p, 1, 2, "after an fi_write and an fi_read");
            if p.info.caps.contains(Caps::ATOMIC) {
                // An atomic is a remote write.
                println!("  with an fi_atomic");
                // SAFETY: `local` lives until the completion is read.
                unsafe {
                    p.a.ep.atomic(
                        local.ptr.cast(),
                        1,
                        local.mr.desc(),
                        p.a.peer,
                        target.addr + 128,
                        target.mr.key(),
                        Datatype::Uint64,
                        AtomicOp::Sum,
                        4,
                    )
                }
                .unwrap_or_else(|e| panic!("fi_atomic: {e} ({})", e.code()));
                p.wait_ok(0, "fi_atomic");
                await_count(&p, 1, 3, "after an fi_atomic");
            }
            let counted = p.side(1).cntr.as_ref().map_or(0, |c| c.read().unwrap());
            // A bad key: an error at the initiator, nothing counted at the target.
            if write(target.mr.key() ^ 0x5a5a, 3).is_ok() {
                p.wait_err(0, "fi_write with a bad key");
            }
            p.drive();
            await_count(&p, 1, counted, "after a refused fi_write");
            assert_eq!(
                p.a.cntr.as_ref().map(|c| c.read().unwrap()),
                Some(0),
                "the initiator's remote counter"
            );
        },
    );
}
