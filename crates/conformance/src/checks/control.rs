//! The endpoint's control surface (fi_endpoint(3) "fi_control", "fi_ep_alias") and the
//! operation flags of the data calls: `FI_GETOPSFLAG` / `FI_SETOPSFLAG` read and change
//! the defaults the calls without flags use, an alias carries its own defaults over the
//! same endpoint, and a flag a `*msg` call does not define (or the provider does not
//! implement) is `FI_EBADFLAGS`, never silently dropped; `FI_MORE` is a hint every
//! call accepts.

use ofi::{Caps, Errno, OpFlags};

use crate::checks::pairs::check_recv;
use crate::fixture::{expect_errno, pattern, post_recv, recvmsg, send, sendmsg, trecvmsg};
use crate::pair::{each_pair, each_pair_spec};
use crate::Subject;

/// `FI_GETOPSFLAG` answers each side's defaults (a subset of the attributes' op_flags
/// the endpoint was opened with); naming both sides or neither is `FI_EINVAL`;
/// `FI_SETOPSFLAG` changes what `FI_GETOPSFLAG` answers, side by side; a flag the side
/// does not take is `FI_EBADFLAGS` and changes nothing.
pub fn control_get_set_ops_flags(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let ep = &p.a.ep;
        let tx = ep
            .op_flags(true)
            .unwrap_or_else(|e| panic!("FI_GETOPSFLAG(FI_TRANSMIT): {e} ({})", e.code()));
        let rx = ep
            .op_flags(false)
            .unwrap_or_else(|e| panic!("FI_GETOPSFLAG(FI_RECV): {e} ({})", e.code()));
        assert!(
            p.info.tx_attr.op_flags.contains(tx),
            "transmit defaults {tx} not within tx_attr.op_flags {}",
            p.info.tx_attr.op_flags
        );
        assert!(
            p.info.rx_attr.op_flags.contains(rx),
            "receive defaults {rx} not within rx_attr.op_flags {}",
            p.info.rx_attr.op_flags
        );
        for both_or_none in [OpFlags::TRANSMIT | OpFlags::RECV, OpFlags::empty()] {
            let mut v = both_or_none.bits();
            // SAFETY: FI_GETOPSFLAG takes a `uint64_t *`; `v` lives across the call.
            let r = unsafe { ep.control(ofi::control::GETOPSFLAG, (&mut v as *mut u64).cast()) };
            expect_errno(r, Errno::EINVAL, &format!("FI_GETOPSFLAG({both_or_none})"));
        }
        ep.set_op_flags(true, OpFlags::COMPLETION | OpFlags::TRANSMIT_COMPLETE)
            .unwrap_or_else(|e| panic!("FI_SETOPSFLAG(FI_TRANSMIT): {e} ({})", e.code()));
        assert_eq!(
            ep.op_flags(true).unwrap(),
            OpFlags::COMPLETION | OpFlags::TRANSMIT_COMPLETE,
            "transmit defaults after FI_SETOPSFLAG"
        );
        assert_eq!(ep.op_flags(false).unwrap(), rx, "receive side untouched");
        expect_errno(
            ep.set_op_flags(true, OpFlags::MULTI_RECV),
            Errno::EBADFLAGS,
            "FI_SETOPSFLAG(FI_TRANSMIT | FI_MULTI_RECV)",
        );
        expect_errno(
            ep.set_op_flags(false, OpFlags::INJECT),
            Errno::EBADFLAGS,
            "FI_SETOPSFLAG(FI_RECV | FI_INJECT)",
        );
        assert_eq!(
            ep.op_flags(true).unwrap(),
            OpFlags::COMPLETION | OpFlags::TRANSMIT_COMPLETE,
            "a refused FI_SETOPSFLAG changed the defaults"
        );
        ep.set_op_flags(true, tx).unwrap();
        // The pair still works with its defaults back.
        crate::checks::pairs::exchange(p, 0, &pattern(40, 9), 0x300);
    });
}

/// Under `FI_SELECTIVE_COMPLETION`, the transmit defaults set by `FI_SETOPSFLAG` decide
/// whether `fi_send` completes; an alias made with `FI_TRANSMIT | FI_COMPLETION` sends
/// over the same endpoint with completions while the endpoint's own defaults stay
/// without; the alias reports its own defaults.
pub fn control_ops_flags_and_alias_decide_completions(s: &Subject) {
    each_pair_spec(
        s,
        Caps::MSG,
        |spec| spec.cq_flags = OpFlags::SELECTIVE_COMPLETION,
        |p| {
            let mut bufs = vec![vec![0u8; 32]; 4];
            for (i, b) in bufs.iter_mut().enumerate() {
                recvmsg(&p.b.ep, b, 0x310 + i, OpFlags::COMPLETION)
                    .unwrap_or_else(|e| panic!("fi_recvmsg(FI_COMPLETION): {e}"));
            }
            let payloads: Vec<Vec<u8>> = (0..4).map(|i| pattern(20, 40 + i as u8)).collect();
            // 0: defaults without FI_COMPLETION, 1: with it.
            p.a.ep.set_op_flags(true, OpFlags::empty()).unwrap();
            send(&p.a.ep, &payloads[0], p.a.peer, 0x320).unwrap();
            check_recv(&p.wait_ok(1, "receive #0"), 0x310, &payloads[0], &bufs[0]);
            p.a.ep.set_op_flags(true, OpFlags::COMPLETION).unwrap();
            send(&p.a.ep, &payloads[1], p.a.peer, 0x321).unwrap();
            check_recv(&p.wait_ok(1, "receive #1"), 0x311, &payloads[1], &bufs[1]);
            // Only this send completes.
            p.wait_ok_ctx(0, 0x321, "the fi_send with FI_COMPLETION in the defaults");
            // 2: through an alias with FI_COMPLETION, the endpoint's defaults without.
            p.a.ep.set_op_flags(true, OpFlags::empty()).unwrap();
            let alias =
                p.a.ep
                    .alias((OpFlags::TRANSMIT | OpFlags::COMPLETION).bits())
                    .unwrap_or_else(|e| panic!("fi_ep_alias: {e} ({})", e.code()));
            assert_eq!(alias.op_flags(true).unwrap(), OpFlags::COMPLETION);
            assert_eq!(p.a.ep.op_flags(true).unwrap(), OpFlags::empty());
            send(&p.a.ep, &payloads[2], p.a.peer, 0x322).unwrap();
            check_recv(&p.wait_ok(1, "receive #2"), 0x312, &payloads[2], &bufs[2]);
            send(&alias, &payloads[3], p.a.peer, 0x323).unwrap();
            check_recv(&p.wait_ok(1, "receive #3"), 0x313, &payloads[3], &bufs[3]);
            // Only this send completes.
            p.wait_ok_ctx(0, 0x323, "the fi_send through the alias");
            for bad in [
                OpFlags::TRANSMIT | OpFlags::RECV,
                OpFlags::COMPLETION,
                OpFlags::RECV | OpFlags::INJECT,
            ] {
                expect_errno(
                    p.a.ep.alias(bad.bits()).map(|_| ()),
                    if bad.contains(OpFlags::INJECT) {
                        Errno::EBADFLAGS
                    } else {
                        Errno::EINVAL
                    },
                    &format!("fi_ep_alias({bad})"),
                );
            }
            drop(alias);
            p.a.ep.set_op_flags(true, p.info.tx_attr.op_flags).ok();
        },
    );
}

/// A flag a `*msg` call does not define is `FI_EBADFLAGS` (the call posts nothing);
/// `FI_FENCE` is refused unless the endpoint has `FI_FENCE`; `FI_MORE` is accepted as
/// the hint it is and the message arrives.
pub fn control_msg_calls_check_flags(s: &Subject) {
    each_pair(s, Caps::MSG, |p| {
        let payload = pattern(24, 77);
        expect_errno(
            sendmsg(&p.a.ep, &payload, p.a.peer, 0x330, OpFlags::MULTI_RECV),
            Errno::EBADFLAGS,
            "fi_sendmsg(FI_MULTI_RECV)",
        );
        expect_errno(
            sendmsg(
                &p.a.ep,
                &payload,
                p.a.peer,
                0x330,
                OpFlags::from_bits_retain(1 << 40),
            ),
            Errno::EBADFLAGS,
            "fi_sendmsg with an undefined bit",
        );
        let mut scratch = [0u8; 8];
        expect_errno(
            recvmsg(&p.b.ep, &mut scratch, 0x331, OpFlags::INJECT),
            Errno::EBADFLAGS,
            "fi_recvmsg(FI_INJECT)",
        );
        if !p.info.caps.contains(Caps::FENCE) {
            expect_errno(
                sendmsg(&p.a.ep, &payload, p.a.peer, 0x330, OpFlags::FENCE),
                Errno::EBADFLAGS,
                "fi_sendmsg(FI_FENCE) without the FI_FENCE capability",
            );
        }
        if p.info.caps.contains(Caps::TAGGED) {
            let r = trecvmsg(&p.b.ep, &mut scratch, 1, 0, 0x332, OpFlags::MULTI_RECV);
            expect_errno(r, Errno::EBADFLAGS, "fi_trecvmsg(FI_MULTI_RECV)");
        }
        // FI_MORE: a hint; the message goes (at the latest with the next one). The
        // refused receive above posted nothing: were it posted, the first message would
        // land in its 8 bytes (truncated) instead of these buffers.
        let mut bufs = [vec![0u8; 32], vec![0u8; 32]];
        let [b0, b1] = &mut bufs;
        post_recv(&p.b.ep, b0, 0x340).unwrap();
        post_recv(&p.b.ep, b1, 0x341).unwrap();
        let more = pattern(24, 78);
        sendmsg(
            &p.a.ep,
            &more,
            p.a.peer,
            0x350,
            OpFlags::COMPLETION | OpFlags::MORE,
        )
        .unwrap_or_else(|e| panic!("fi_sendmsg(FI_MORE): {e} ({})", e.code()));
        sendmsg(&p.a.ep, &payload, p.a.peer, 0x351, OpFlags::COMPLETION)
            .unwrap_or_else(|e| panic!("fi_sendmsg after FI_MORE: {e} ({})", e.code()));
        let mut got = p.wait_n(1, 2, "the two receives");
        got.sort_by_key(|c| c.op_context);
        check_recv(&got[0], 0x340, &more, &bufs[0]);
        check_recv(&got[1], 0x341, &payload, &bufs[1]);
        let mut sent = p.wait_n(0, 2, "the two sends");
        sent.sort_by_key(|c| c.op_context);
        assert_eq!(
            (sent[0].op_context, sent[1].op_context),
            (0x350, 0x351),
            "send completions"
        );
    });
}

/// Completion levels as defaults: where getinfo answers hints asking for
/// `FI_DELIVERY_COMPLETE` in `tx_attr.op_flags` (reliable types; a provider that cannot
/// honour it answers `FI_ENODATA`), an endpoint opened with that answer completes a
/// plain `fi_send` only once the data is in the receive buffer.
pub fn control_delivery_complete_default(s: &Subject) {
    let types = s
        .claimed()
        .types_where(Caps::MSG, |i| i.ep_type() != ofi::EpType::Dgram);
    let ran = level_as_default(s, OpFlags::DELIVERY_COMPLETE, types);
    println!("  ran on {ran} endpoint type(s)");
}

/// For each type of `types`: where getinfo answers hints asking for `level` (a
/// completion level that waits for the target) in `tx_attr.op_flags`, the answer keeps
/// it, the endpoint's transmit defaults hold it, and a plain `fi_send` completes only
/// once the data is in the pre-posted receive buffer. A type answered `FI_ENODATA` (or
/// no result) is skipped; returns on how many types it ran.
pub fn level_as_default(s: &Subject, level: OpFlags, types: Vec<ofi::EpType>) -> usize {
    let mut ran = 0;
    for t in types {
        let mut hints = s.base_hints().with_ep_type(t).with_caps(Caps::MSG);
        hints.tx_attr.op_flags = OpFlags::COMPLETION | level;
        let info = match s.getinfo_with(Some(hints), ofi::GetinfoFlags::empty()) {
            Ok(v) if !v.is_empty() => v[0].clone(),
            Ok(_) => continue,
            Err(e) if e.code() == Errno::ENODATA => {
                println!("  {t}: {level} as a default not offered");
                continue;
            }
            Err(e) => panic!("getinfo with tx op_flags {level}: {e} ({})", e.code()),
        };
        assert!(
            info.tx_attr.op_flags.contains(level),
            "the answer dropped the {level} asked for: {}",
            info.tx_attr.op_flags
        );
        let spec = crate::pair::PairSpec::new(t, Caps::MSG);
        let p = crate::pair::Pair::with_info(s, &spec, info);
        let tx = p.a.ep.op_flags(true).unwrap();
        assert!(
            tx.contains(level),
            "the endpoint's transmit defaults {tx} lost {level}"
        );
        let payload = pattern(2000, 17);
        let mut buf = vec![0u8; 2048];
        post_recv(&p.b.ep, &mut buf, 0x381).unwrap();
        send(&p.a.ep, &payload, p.a.peer, 0x380).unwrap();
        let c = p.wait_ok(0, &format!("the fi_send under {level} defaults"));
        assert_eq!(c.op_context, 0x380);
        assert!(
            buf[..2000] == payload[..],
            "fi_send under {level} defaults completed before the data was delivered"
        );
        check_recv(&p.wait_ok(1, "the receive"), 0x381, &payload, &buf);
        ran += 1;
    }
    ran
}
