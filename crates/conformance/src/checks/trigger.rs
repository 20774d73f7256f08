//! Triggered operations (fi_trigger(3)): a `*msg` call made with `FI_TRIGGER` whose
//! context is a `struct fi_triggered_context` starts only when the named counter
//! reaches the threshold, then runs and completes as if posted then (its completion
//! reports the triggered context).
//!
//! - [`trigger_send_waits_for_threshold`]: a send triggered at threshold 2 does not go
//!   while the counter reads 0 or 1 (progress driven on both sides), and goes at 2.
//! - [`trigger_chain_rma_and_atomic`]: a send triggered by a domain counter, an RMA
//!   write triggered by the transmit counter that send increments, an atomic
//!   triggered by the same counter at the next value: one `fi_cntr_add` starts the
//!   chain; each lands and completes in order.
//! - [`trigger_bad_arguments`]: threshold 0, a counter of another domain and a null
//!   context are `FI_EINVAL`; `FI_TRIGGER` on a receive, or with `FI_INJECT` (whose
//!   buffer is the caller's again on return), is `FI_EBADFLAGS`; none posts
//!   anything; at most `tx_size` wait (`FI_EAGAIN` beyond).
//! - [`trigger_close_cancels`]: closing an endpoint with a waiting triggered send
//!   completes it with `FI_ECANCELED`.
//! - [`trigger_failure_completes_as_error`]: a triggered RMA write with a bad key
//!   fails once it goes: an error completion reporting its triggered context.
//!
//! "Does not go" is checked after a fixed number of progress rounds on both sides
//! (no sleeping); every wait is bounded by [`crate::WAIT`].

use ofi::abi::raw::{Ioc, Iov, MsgAtomic, MsgRma, RmaIoc, RmaIov};
use ofi::cntr::{CntrAttr, Counter, TriggeredContext};
use ofi::{AtomicOp, Caps, Datatype, EpType, Errno, OpFlags};

use crate::checks::rma::{await_bytes, Region};
use crate::fixture::{expect_errno, pattern, post_recv, recvmsg, sendmsg};
use crate::pair::{each_pair_with, poll, show, Pair};
use crate::Subject;

/// Progress rounds driven before asserting that a triggered operation has not gone.
const ROUNDS: usize = 64;

fn reliable(i: &ofi::Info) -> bool {
    i.ep_type() != EpType::Dgram
}

/// Run `f` on a pair of every reliable endpoint type with `caps` (see
/// [`crate::pair::each_pair`]).
fn each_reliable_pair(s: &Subject, caps: Caps, f: impl FnMut(Pair)) -> usize {
    each_pair_with(s, caps, reliable, |_| {}, f)
}

/// A counter of the pair's domain.
fn counter(p: &Pair) -> Counter {
    p.domain
        .cntr_open(&CntrAttr::default())
        .unwrap_or_else(|e| panic!("fi_cntr_open: {e} ({})", e.code()))
}

/// Drive both sides [`ROUNDS`] times, then assert neither CQ has an entry.
fn assert_nothing_yet(p: &Pair, what: &str) {
    for _ in 0..ROUNDS {
        p.drive();
    }
    for i in 0..2 {
        if let Some(c) = poll(&p.side(i).cq) {
            match c {
                Ok(e) => panic!("{what}: side {i} has a completion already: {}", show(&e)),
                Err(ee) => panic!("{what}: side {i} has an error {}", Errno(ee.err)),
            }
        }
    }
}

fn ctx_of(t: &TriggeredContext) -> usize {
    t as *const TriggeredContext as usize
}

/// An `fi_writemsg` with `FI_TRIGGER` of the first `len` bytes of `local` to the start
/// of `target` with `key`, triggered by `trig`.
fn triggered_write(
    p: &Pair,
    local: &Region,
    target: &Region,
    len: usize,
    key: u64,
    trig: &TriggeredContext,
) {
    let liov = [Iov {
        base: local.ptr.cast(),
        len,
    }];
    let desc = [local.mr.desc()];
    let riov = [RmaIov {
        addr: target.addr,
        len,
        key,
    }];
    let wmsg = MsgRma {
        msg_iov: liov.as_ptr(),
        desc: desc.as_ptr(),
        iov_count: 1,
        addr: p.a.peer,
        rma_iov: riov.as_ptr(),
        rma_iov_count: 1,
        context: ctx_of(trig),
        data: 0,
    };
    // SAFETY: the caller keeps `local` until the completion is read; the arrays live
    // across the call (the provider copies them).
    unsafe {
        p.a.ep
            .writemsg(&wmsg, (OpFlags::TRIGGER | OpFlags::COMPLETION).bits())
    }
    .unwrap_or_else(|e| panic!("fi_writemsg(FI_TRIGGER): {e} ({})", e.code()));
}

/// A send triggered at threshold 2 goes only when the counter reaches 2.
pub fn trigger_send_waits_for_threshold(s: &Subject) {
    each_reliable_pair(s, Caps::MSG | Caps::TRIGGER, |p| {
        assert!(p.info.caps.contains(Caps::TRIGGER), "asked for FI_TRIGGER");
        let c = counter(&p);
        let payload = pattern(48, 9);
        let mut rbuf = vec![0u8; 64];
        post_recv(&p.b.ep, &mut rbuf, 0x71).unwrap();
        let trig = Box::new(TriggeredContext::threshold(&c, 2));
        sendmsg(&p.a.ep, &payload, p.a.peer, ctx_of(&trig), OpFlags::TRIGGER)
            .unwrap_or_else(|e| panic!("fi_sendmsg(FI_TRIGGER): {e} ({})", e.code()));
        assert_nothing_yet(&p, "counter at 0");
        c.add(1).unwrap();
        assert_nothing_yet(&p, "counter at 1 of 2");
        c.add(1).unwrap();
        let e = p.wait_ok(1, "the triggered message");
        assert_eq!(e.len, 48, "received length");
        assert_eq!(rbuf[..48], payload[..], "received bytes");
        let e = p.wait_ok(0, "the triggered send's completion");
        assert_eq!(
            e.op_context,
            ctx_of(&trig),
            "the completion reports the triggered context"
        );
        assert_eq!(
            c.read().unwrap(),
            2,
            "the trigger counter is not changed by the send"
        );
    });
}

/// A chain: a send triggered by a domain counter; an RMA write and an atomic
/// triggered by the transmit counter that the send (then the write) increments.
pub fn trigger_chain_rma_and_atomic(s: &Subject) {
    let caps = Caps::MSG | Caps::RMA | Caps::ATOMIC | Caps::TRIGGER;
    const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
    each_pair_with(
        s,
        caps,
        reliable,
        |spec| spec.cntr_flags = OpFlags::SEND | OpFlags::WRITE,
        |p| {
            let start = counter(&p);
            let txc = p.a.cntr.as_ref().expect("the pair binds a counter");
            let target = Region::new(&p, 1, 4096, 0, REMOTE, 0x91);
            let mut local = Region::new(&p, 0, 4096, 0, OpFlags::READ | OpFlags::WRITE, 0x92);
            let data = pattern(64, 5);
            local.set(0, &data);
            let operand: u64 = 5;
            // The operand goes after the written bytes.
            local.set(128, &operand.to_ne_bytes());
            let payload = pattern(32, 1);
            let mut rbuf = vec![0u8; 32];
            post_recv(&p.b.ep, &mut rbuf, 0x81).unwrap();

            let t_send = Box::new(TriggeredContext::threshold(&start, 1));
            let t_write = Box::new(TriggeredContext::threshold(txc, 1));
            let t_atomic = Box::new(TriggeredContext::threshold(txc, 2));
            sendmsg(
                &p.a.ep,
                &payload,
                p.a.peer,
                ctx_of(&t_send),
                OpFlags::TRIGGER,
            )
            .unwrap_or_else(|e| panic!("fi_sendmsg(FI_TRIGGER): {e} ({})", e.code()));

            let desc = [local.mr.desc()];
            triggered_write(&p, &local, &target, 64, target.mr.key(), &t_write);

            let aiov = [Ioc {
                // SAFETY: inside the 4096 bytes of `local`.
                addr: unsafe { local.ptr.add(128) }.cast(),
                count: 1,
            }];
            let rioc = [RmaIoc {
                addr: target.addr + 128,
                count: 1,
                key: target.mr.key(),
            }];
            let amsg = MsgAtomic {
                msg_iov: aiov.as_ptr(),
                desc: desc.as_ptr(),
                iov_count: 1,
                addr: p.a.peer,
                rma_iov: rioc.as_ptr(),
                rma_iov_count: 1,
                datatype: Datatype::Uint64.to_raw(),
                op: AtomicOp::Sum.to_raw(),
                context: ctx_of(&t_atomic),
                data: 0,
            };
            // SAFETY: as above.
            unsafe {
                p.a.ep
                    .atomicmsg(&amsg, (OpFlags::TRIGGER | OpFlags::COMPLETION).bits())
            }
            .unwrap_or_else(|e| panic!("fi_atomicmsg(FI_TRIGGER): {e} ({})", e.code()));

            assert_nothing_yet(&p, "before the start counter moves");
            assert_eq!(txc.read().unwrap(), 0, "nothing has completed");
            start.add(1).unwrap();
            let got: Vec<usize> = (0..3)
                .map(|k| {
                    p.wait_ok(0, &format!("chain completion {}", k + 1))
                        .op_context
                })
                .collect();
            assert_eq!(
                got,
                [ctx_of(&t_send), ctx_of(&t_write), ctx_of(&t_atomic)],
                "the chain completes send, write, atomic in order"
            );
            let e = p.wait_ok(1, "the chain's message");
            assert_eq!(rbuf, payload, "the chain's message bytes");
            assert_eq!(e.len, 32);
            await_bytes(&p, &target, 0, &data, "the triggered write");
            await_bytes(
                &p,
                &target,
                128,
                &5u64.to_ne_bytes(),
                "the triggered atomic",
            );
            assert_eq!(txc.read().unwrap(), 3, "the transmit counter");
        },
    );
}

/// Bad triggers are refused and post nothing; the queue is bounded by `tx_size`.
pub fn trigger_bad_arguments(s: &Subject) {
    each_reliable_pair(s, Caps::MSG | Caps::TRIGGER, |p| {
        let c = counter(&p);
        let payload = pattern(16, 3);
        let zero = Box::new(TriggeredContext::threshold(&c, 0));
        expect_errno(
            sendmsg(&p.a.ep, &payload, p.a.peer, ctx_of(&zero), OpFlags::TRIGGER),
            Errno::EINVAL,
            "threshold 0",
        );
        let other = p
            .fabric
            .domain(&p.info)
            .unwrap_or_else(|e| panic!("a second fi_domain: {e}"));
        let foreign = other.cntr_open(&CntrAttr::default()).unwrap();
        let far = Box::new(TriggeredContext::threshold(&foreign, 1));
        expect_errno(
            sendmsg(&p.a.ep, &payload, p.a.peer, ctx_of(&far), OpFlags::TRIGGER),
            Errno::EINVAL,
            "a counter of another domain",
        );
        expect_errno(
            sendmsg(&p.a.ep, &payload, p.a.peer, 0, OpFlags::TRIGGER),
            Errno::EINVAL,
            "a null triggered context",
        );
        let one = Box::new(TriggeredContext::threshold(&c, 1));
        expect_errno(
            sendmsg(
                &p.a.ep,
                &payload,
                p.a.peer,
                ctx_of(&one),
                OpFlags::TRIGGER | OpFlags::INJECT,
            ),
            Errno::EBADFLAGS,
            "FI_TRIGGER with FI_INJECT (the buffer is free on return)",
        );
        let mut scratch = [0u8; 16];
        let rtrig = Box::new(TriggeredContext::threshold(&c, 1));
        expect_errno(
            recvmsg(&p.b.ep, &mut scratch, ctx_of(&rtrig), OpFlags::TRIGGER),
            Errno::EBADFLAGS,
            "fi_recvmsg(FI_TRIGGER)",
        );
        c.add(5).unwrap();
        assert_nothing_yet(&p, "after refused triggers");
        drop(foreign);
        drop(other);
        // At most tx_size wait.
        let size = p.info.tx_attr.size;
        if size == 0 || size > 4096 {
            println!("  tx_size {size}: bound not checked");
            return;
        }
        let far_off = Box::new(TriggeredContext::threshold(&c, 1 << 40));
        // A triggered send waiting for a threshold the counter never reaches.
        let send_waiting = || {
            sendmsg(
                &p.a.ep,
                &payload,
                p.a.peer,
                ctx_of(&far_off),
                OpFlags::TRIGGER,
            )
        };
        for k in 0..size {
            send_waiting().unwrap_or_else(|e| panic!("waiting triggered send {k} of {size}: {e}"));
        }
        expect_errno(
            send_waiting(),
            Errno::EAGAIN,
            "one triggered send beyond tx_size",
        );
        // The endpoint closes with them waiting (their completions are FI_ECANCELED).
        drop(p);
    });
}

/// Closing an endpoint with a waiting triggered send completes it with
/// `FI_ECANCELED`.
pub fn trigger_close_cancels(s: &Subject) {
    each_reliable_pair(s, Caps::MSG | Caps::TRIGGER, |p| {
        let c = counter(&p);
        let payload = pattern(16, 4);
        let trig = Box::new(TriggeredContext::threshold(&c, 1));
        sendmsg(&p.a.ep, &payload, p.a.peer, ctx_of(&trig), OpFlags::TRIGGER).unwrap();
        assert_nothing_yet(&p, "before close");
        let Pair { a, b, .. } = p;
        let cq = a.cq;
        drop(a.ep);
        match poll(&cq) {
            Some(Err(ee)) => {
                assert_eq!(
                    Errno(ee.err),
                    Errno::ECANCELED,
                    "the cancelled send's error"
                );
                assert_eq!(ee.op_context, ctx_of(&trig), "the cancelled send's context");
            }
            Some(Ok(e)) => panic!("expected FI_ECANCELED, got {}", show(&e)),
            None => panic!("closing the endpoint left no completion for its triggered send"),
        }
        // The counter moving now starts nothing.
        c.add(1).unwrap();
        drop(b);
        drop(cq);
    });
}

/// A triggered write with a bad key completes as an error once its counter moves.
pub fn trigger_failure_completes_as_error(s: &Subject) {
    const REMOTE: OpFlags = OpFlags::REMOTE_READ.union(OpFlags::REMOTE_WRITE);
    each_reliable_pair(s, Caps::RMA | Caps::TRIGGER, |p| {
        let c = counter(&p);
        let target = Region::new(&p, 1, 4096, 0, REMOTE, 0xa1);
        let local = Region::new(&p, 0, 4096, 7, OpFlags::READ | OpFlags::WRITE, 0xa2);
        let trig = Box::new(TriggeredContext::threshold(&c, 1));
        triggered_write(&p, &local, &target, 32, target.mr.key() ^ 0x5a5a, &trig);
        assert_nothing_yet(&p, "before the counter moves");
        c.add(1).unwrap();
        let ee = p.wait_err(0, "the triggered write with a bad key");
        assert_eq!(
            ee.op_context,
            ctx_of(&trig),
            "the error reports the triggered context"
        );
        assert_ne!(ee.err, 0, "an error code");
        assert!(
            target.bytes()[..32].iter().all(|&b| b == 0),
            "nothing was written"
        );
    });
}
