//! Tagged messages (fi_tagged(3)) on every endpoint type with `FI_TAGGED`: tag and
//! ignore-mask matching, receives matched by tag rather than order, tagged sends never
//! matching untagged receives, `FI_PEEK` (`FI_ENOMSG` on a miss), `FI_CLAIM`,
//! `FI_DISCARD`, cancel of a tagged receive, and directed receive (`FI_DIRECTED_RECV`, connectionless).

use ofi::{Caps, EpType, Errno, OpFlags};

use crate::fixture::{pattern, trecvmsg};
use crate::pair::{assert_flags, each_pair, each_pair_where, each_type, show, Pair};
use crate::Subject;

const TRECV: OpFlags = OpFlags::RECV.union(OpFlags::TAGGED);
const TSEND: OpFlags = OpFlags::SEND.union(OpFlags::TAGGED);

/// The tagged sends and receives on slices the checks use; they live in
/// [`crate::fixture`] with the other data calls (named here too, for callers that
/// import them from this module).
pub use crate::fixture::{trecv, tsend};

/// The next completion of side `i`, which must succeed: a tagged receive with context
/// `ctx` of `len` bytes with tag `tag`.
fn wait_received(p: &Pair, i: usize, (ctx, len, tag): (usize, usize, u64), what: &str) {
    let r = p.wait_ok(i, what);
    assert_eq!(
        (r.op_context, r.len, r.tag),
        (ctx, len, tag),
        "{what}: {}",
        show(&r)
    );
}

/// Tags match under the ignore mask; receives take the message with their tag, not
/// the next one; a tagged message does not match an untagged receive.
pub fn tagged_match_tag_and_ignore(s: &Subject) {
    each_pair(s, Caps::TAGGED, |p| {
        let (x, y) = (pattern(32, 1), pattern(48, 2));
        let mut bx = vec![0u8; 64];
        let mut by = vec![0u8; 64];
        // Posted in one order, sent in the other.
        trecv(&p.b.ep, &mut by, ofi::ADDR_UNSPEC, 0xb0b, 0, 0x21);
        trecv(&p.b.ep, &mut bx, ofi::ADDR_UNSPEC, 0xa00, 0xff, 0x20);
        tsend(&p.a.ep, &x, p.a.peer, 0xa5a, 0x10);
        tsend(&p.a.ep, &y, p.a.peer, 0xb0b, 0x11);
        for c in p.wait_n(0, 2, "tagged send completions") {
            assert_flags(&c, TSEND, "tagged send completion");
        }
        let mut got = p.wait_n(1, 2, "tagged receives");
        got.sort_by_key(|e| e.op_context);
        assert_eq!(got[0].op_context, 0x20, "{}", show(&got[0]));
        assert_eq!(got[0].tag, 0xa5a, "the matched tag is the sender's");
        assert_eq!(got[0].len, 32);
        assert_flags(&got[0], TRECV, "tagged receive");
        assert!(
            bx[..32] == x[..],
            "tag 0xa5a went to the 0xa00/0xff receive"
        );
        assert_eq!(got[1].op_context, 0x21);
        assert_eq!(got[1].tag, 0xb0b);
        assert!(by[..48] == y[..]);
        // And the other way (side b's peer address, a receive posted on side a).
        let z = pattern(20, 3);
        let mut bz = vec![0u8; 32];
        trecv(&p.a.ep, &mut bz, ofi::ADDR_UNSPEC, 0xc0c, 0, 0x22);
        tsend(&p.b.ep, &z, p.b.peer, 0xc0c, 0x12);
        assert_eq!(p.wait_ok(1, "tagged send b to a").op_context, 0x12);
        wait_received(p, 0, (0x22, 20, 0xc0c), "tagged receive on side a");
        assert!(bz[..20] == z[..]);
        // An untagged receive never takes a tagged message (and vice versa).
        if p.info.caps.contains(Caps::MSG) && p.info.ep_type() != EpType::Dgram {
            let mut plain = vec![0u8; 16];
            crate::fixture::post_recv(&p.b.ep, &mut plain, 0x30).unwrap();
            tsend(&p.a.ep, b"tagged!", p.a.peer, 0x7, 0x31);
            p.wait_ok(0, "tagged send");
            p.assert_quiet(1, 50, "a tagged message must not match fi_recv");
            let mut t = vec![0u8; 16];
            trecv(&p.b.ep, &mut t, ofi::ADDR_UNSPEC, 0x7, 0, 0x32);
            let r = p.wait_ok(1, "the tagged receive");
            assert_eq!(r.op_context, 0x32, "{}", show(&r));
            assert_eq!(&t[..7], b"tagged!");
            p.cancel_recv(0x30, "cancelled fi_recv");
        }
        // A posted tagged receive cancelled (fabtests recv_cancel).
        let mut c = vec![0u8; 16];
        trecv(&p.b.ep, &mut c, ofi::ADDR_UNSPEC, 0xdead, 0, 0x33);
        p.cancel_recv(0x33, "cancelled fi_trecv");
        assert!(c.iter().all(|&b| b == 0));
    });
}

/// `FI_PEEK` finds nothing: an error completion `FI_ENOMSG`. After a message arrives:
/// `FI_PEEK` reports its tag and length and leaves it; `FI_PEEK | FI_CLAIM` reserves
/// it; `FI_CLAIM` with that context receives it; `FI_PEEK | FI_DISCARD` drops the
/// next one, so a later peek misses again.
pub fn tagged_peek_claim_discard(s: &Subject) {
    each_pair_where(
        s,
        Caps::TAGGED,
        |i| i.ep_type() != EpType::Dgram,
        |p| {
            let none: &mut [u8] = &mut [];
            trecvmsg(&p.b.ep, none, 0x99, 0, 0x40, OpFlags::PEEK)
                .unwrap_or_else(|e| panic!("fi_trecvmsg(FI_PEEK): {e} ({})", e.code()));
            let ee = p.wait_err(1, "FI_PEEK with no message");
            assert_eq!(Errno(ee.err), Errno::ENOMSG, "FI_PEEK miss");
            assert_eq!(ee.op_context, 0x40);
            let payload = pattern(100, 7);
            tsend(&p.a.ep, &payload, p.a.peer, 0x99, 0x41);
            p.wait_ok(0, "tagged send");
            // Peek until the message has arrived (each miss is an FI_ENOMSG completion).
            let deadline = std::time::Instant::now() + crate::WAIT;
            let found = loop {
                let none: &mut [u8] = &mut [];
                trecvmsg(&p.b.ep, none, 0x99, 0, 0x42, OpFlags::PEEK).unwrap();
                match p.wait(1) {
                    Some(Ok(e)) => break e,
                    Some(Err(ee)) if Errno(ee.err) == Errno::ENOMSG => {}
                    Some(Err(ee)) => panic!("FI_PEEK: error {}", Errno(ee.err)),
                    None => panic!("FI_PEEK: no completion"),
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the message never arrived"
                );
            };
            assert_eq!(found.op_context, 0x42);
            assert_eq!(found.len, 100, "FI_PEEK reports the length");
            assert_eq!(found.tag, 0x99, "FI_PEEK reports the tag");
            // Peeking again still finds it; now claim it.
            let none: &mut [u8] = &mut [];
            trecvmsg(&p.b.ep, none, 0x99, 0, 0x43, OpFlags::PEEK | OpFlags::CLAIM)
                .unwrap_or_else(|e| panic!("FI_PEEK | FI_CLAIM: {e}"));
            wait_received(&p, 1, (0x43, 100, 0x99), "FI_PEEK | FI_CLAIM");
            // Claimed: another peek misses.
            let none: &mut [u8] = &mut [];
            trecvmsg(&p.b.ep, none, 0x99, 0, 0x44, OpFlags::PEEK).unwrap();
            let ee = p.wait_err(1, "peek of a claimed message");
            assert_eq!(Errno(ee.err), Errno::ENOMSG, "a claimed message is hidden");
            // Receive the claimed message with FI_CLAIM and the claiming context.
            let mut buf = vec![0u8; 128];
            trecvmsg(&p.b.ep, &mut buf, 0, 0, 0x43, OpFlags::CLAIM)
                .unwrap_or_else(|e| panic!("fi_trecvmsg(FI_CLAIM): {e} ({})", e.code()));
            wait_received(&p, 1, (0x43, 100, 0x99), "FI_CLAIM receive");
            assert!(buf[..100] == payload[..], "claimed payload");
            // Discard.
            tsend(&p.a.ep, b"drop me", p.a.peer, 0x55, 0x45);
            p.wait_ok(0, "tagged send");
            let deadline = std::time::Instant::now() + crate::WAIT;
            loop {
                let none: &mut [u8] = &mut [];
                trecvmsg(&p.b.ep, none, 0x55, 0, 0x46, OpFlags::PEEK).unwrap();
                match p.wait(1) {
                    Some(Ok(_)) => break,
                    Some(Err(ee)) if Errno(ee.err) == Errno::ENOMSG => {}
                    other => panic!("FI_PEEK: {other:?}"),
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the message never arrived"
                );
            }
            let none: &mut [u8] = &mut [];
            trecvmsg(
                &p.b.ep,
                none,
                0x55,
                0,
                0x47,
                OpFlags::PEEK | OpFlags::DISCARD,
            )
            .unwrap_or_else(|e| panic!("FI_PEEK | FI_DISCARD: {e} ({})", e.code()));
            if let Some(c) = p.wait(1) {
                match c {
                    Ok(e) => assert_eq!(e.op_context, 0x47, "FI_DISCARD completion {}", show(&e)),
                    Err(ee) => panic!("FI_PEEK | FI_DISCARD: error {}", Errno(ee.err)),
                }
            }
            let none: &mut [u8] = &mut [];
            trecvmsg(&p.b.ep, none, 0x55, 0, 0x48, OpFlags::PEEK).unwrap();
            let ee = p.wait_err(1, "peek after discard");
            assert_eq!(Errno(ee.err), Errno::ENOMSG, "a discarded message is gone");
            assert_eq!(ee.op_context, 0x48);
        },
    );
}

/// Unexpected tagged messages (sent before the receives) are matched by tag when the
/// receives are posted later, in reverse order.
pub fn tagged_unexpected(s: &Subject) {
    each_pair_where(
        s,
        Caps::TAGGED,
        |i| i.ep_type() != EpType::Dgram,
        |p| {
            let payloads: Vec<Vec<u8>> = (0..4).map(|i| pattern(10 + 1000 * i, i as u8)).collect();
            for (i, pl) in payloads.iter().enumerate() {
                tsend(&p.a.ep, pl, p.a.peer, 0x100 + i as u64, 0x50 + i);
            }
            p.assert_quiet(1, 50, "nothing posted");
            let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 4096]).collect();
            for (i, b) in bufs.iter_mut().enumerate().rev() {
                trecv(&p.b.ep, b, ofi::ADDR_UNSPEC, 0x100 + i as u64, 0, 0x60 + i);
            }
            // A send may complete only once it is matched (rendezvous): wait after posting.
            p.wait_n(0, 4, "tagged sends");
            for _ in 0..4 {
                let r = p.wait_ok(1, "unexpected tagged message");
                let i = r.op_context - 0x60;
                assert!(i < 4, "{}", show(&r));
                assert_eq!(r.tag, 0x100 + i as u64);
                assert_eq!(r.len, payloads[i].len());
                assert!(
                    bufs[i][..r.len] == payloads[i][..],
                    "payload of tag {:#x}",
                    r.tag
                );
            }
        },
    );
}

/// `FI_DIRECTED_RECV`: a receive naming a source takes only that source's messages.
pub fn tagged_directed_recv(s: &Subject) {
    each_type(
        s,
        Caps::TAGGED | Caps::DIRECTED_RECV,
        |i| crate::connectionless(i.ep_type()),
        |_t, info| {
            // Three endpoints: 0 receives, 1 and 2 send with the same tag.
            let f = crate::fixture::Fixture::with_info(s, info, 3);
            let (r, x, y) = (&f.peers[0], &f.peers[1], &f.peers[2]);
            let mut from_y = vec![0u8; 16];
            // `from_y` lives until its completion is read.
            trecv(&r.ep, &mut from_y, f.fi_addrs[2], 0x5, 0, 0x70);
            tsend(&x.ep, b"from x", f.fi_addrs[0], 0x5, 0x71);
            tsend(&y.ep, b"from y", f.fi_addrs[0], 0x5, 0x72);
            crate::fixture::wait_ok(&x.cq, "send from x");
            crate::fixture::wait_ok(&y.cq, "send from y");
            let c = crate::fixture::wait_ok(&r.cq, "directed receive");
            assert_eq!(c.op_context, 0x70);
            assert_eq!(
                &from_y[..6],
                b"from y",
                "the directed receive took another source's message"
            );
            let mut any = vec![0u8; 16];
            trecv(&r.ep, &mut any, ofi::ADDR_UNSPEC, 0x5, 0, 0x73);
            let c = crate::fixture::wait_ok(&r.cq, "receive from any source");
            assert_eq!(c.op_context, 0x73);
            assert_eq!(&any[..6], b"from x");
        },
    );
}
