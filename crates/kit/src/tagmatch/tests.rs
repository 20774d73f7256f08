//! Unit tests of the `tagmatch` module (in their own file; they see its private items).

use super::*;
use proptest::prelude::*;

type M = TagMatcher<&'static str, u32>;

fn cfg() -> MatcherConfig {
    MatcherConfig {
        min_multi_recv: 0,
        ..MatcherConfig::default()
    }
}

fn inc(tag: u64, len: usize) -> Incoming {
    Incoming {
        src: 1,
        tag,
        len,
        data: None,
        tagged: true,
    }
}

fn untagged(src: u64, len: usize) -> Incoming {
    Incoming {
        src,
        tag: 0,
        len,
        data: Some(7),
        tagged: false,
    }
}

/// ctx of a match against a posted receive.
/// The placement of `len` bytes at `offset` of a receive buffer (`truncated`: the
/// message did not fit).
fn placed(offset: usize, len: usize, truncated: bool) -> Placement {
    Placement {
        offset,
        len,
        truncated,
    }
}

/// The model's placement of a `msg_len`-byte message into `space` bytes at `offset`.
fn fit(offset: usize, msg_len: usize, space: usize) -> Placement {
    placed(offset, msg_len.min(space), msg_len > space)
}

fn matched_ctx(m: Match<'_, &'static str>) -> Option<usize> {
    match m {
        Match::Unexpected => None,
        Match::Recv { recv, .. } => Some(recv.ctx),
        Match::Multi { buf, .. } => Some(buf.recv().ctx),
    }
}

/// A matcher that releases a multi-receive buffer once less than `min_multi_recv`
/// bytes of it are left.
fn multi_recv_matcher(min_multi_recv: usize) -> M {
    M::new(MatcherConfig {
        min_multi_recv,
        ..cfg()
    })
}

/// An untagged multi-receive buffer `buf` of `len` bytes with context `ctx`.
fn multi_msg(ctx: usize, buf: &'static str, len: usize) -> PostedRecv<&'static str> {
    PostedRecv::msg(ctx, buf, len).with_flags(OpFlags::MULTI_RECV)
}

fn post(m: &mut M, r: PostedRecv<&'static str>) {
    assert!(matches!(m.post_recv(r), Ok(PostOutcome::Queued)));
}

#[test]
fn kinds_never_cross() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::msg(1, "a", 8));
    assert_eq!(
        m.match_incoming(&inc(0, 4)),
        Match::Unexpected,
        "tagged msg, untagged recv"
    );
    m.push_unexpected(inc(0, 4), 10).unwrap();
    post(&mut m, PostedRecv::tagged(2, 5, 0, "b", 8));
    assert_eq!(m.match_incoming(&untagged(1, 4)).recv_ctx(), Some(1));
    // the tagged unexpected message (tag 0) is still there; tag 5 recv does not take it
    assert_eq!(m.unexpected_len(), 1);
    match m.post_recv(PostedRecv::tagged(3, 0, 0, "c", 8)).unwrap() {
        PostOutcome::Matched { recv, msg, place } => {
            assert_eq!(recv.ctx, 3);
            assert_eq!(msg.payload, 10);
            assert_eq!(place, placed(0, 4, false));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(m.unexpected_len(), 0);
    assert_eq!(m.unexpected_bytes(), 0);
}

#[test]
fn in_place_match_removes_only_after_delivery() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::tagged(1, 5, 0, "a", 8));
    post(&mut m, PostedRecv::tagged(2, 6, 0, "b", 8));
    // A delivery that panics leaves its receive posted.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = m.match_incoming_with(&inc(6, 4), |_, _| panic!("delivery failed"));
    }));
    assert!(caught.is_err());
    assert_eq!(m.posted_len(), 2);
    // Not the oldest: the second receive is taken, the first keeps its place.
    let got = m.match_incoming_with(&inc(6, 12), |r, place| (r.ctx, r.buf, place));
    assert_eq!(got.ok(), Some((2, "b", placed(0, 8, true))));
    assert_eq!(m.posted_len(), 1);
    assert_eq!(
        m.match_incoming_with(&inc(7, 1), |r, _| r.ctx).err(),
        Some(Match::Unexpected)
    );
    assert_eq!(
        m.match_incoming_with(&inc(5, 1), |r, _| r.ctx).ok(),
        Some(1)
    );
    assert_eq!(m.posted_len(), 0);
    // A multi-receive buffer is answered as match_incoming answers it.
    post(&mut m, multi_msg(3, "big", 20));
    match m.match_incoming_with(&untagged(1, 4), |_, _| panic!("not ordinary")) {
        Err(Match::Multi { buf, place }) => {
            assert_eq!(buf.recv().ctx, 3);
            assert_eq!(place.len, 4);
        }
        other => panic!("{other:?}"),
    }
}

impl Match<'_, &'static str> {
    fn recv_ctx(self) -> Option<usize> {
        matched_ctx(self)
    }
}

#[test]
fn untagged_receive_ignores_tags() {
    let mut m = M::new(cfg());
    post(
        &mut m,
        PostedRecv {
            tag: 9,
            ignore: 0,
            ..PostedRecv::msg(1, "a", 8)
        },
    );
    let msg = Incoming {
        tag: 1234,
        ..untagged(1, 3)
    };
    assert_eq!(m.match_incoming(&msg).recv_ctx(), Some(1));
}

#[test]
fn tag_and_ignore_mask() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::tagged(1, 0xab00, 0x00ff, "a", 8));
    assert_eq!(m.match_incoming(&inc(0xac00, 1)), Match::Unexpected);
    assert_eq!(m.match_incoming(&inc(0xab7f, 1)).recv_ctx(), Some(1));
    post(&mut m, PostedRecv::tagged(2, 0, u64::MAX, "b", 8));
    assert_eq!(
        m.match_incoming(&inc(u64::MAX, 1)).recv_ctx(),
        Some(2),
        "all-ignore takes any tag"
    );
    post(&mut m, PostedRecv::tagged(3, 7, 0, "c", 8));
    assert_eq!(m.match_incoming(&inc(6, 1)), Match::Unexpected);
    assert_eq!(m.match_incoming(&inc(7, 1)).recv_ctx(), Some(3));
}

#[test]
fn first_posted_wins_and_unexpected_is_fifo() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::tagged(1, 1, 0, "a", 8));
    post(&mut m, PostedRecv::tagged(2, 0, u64::MAX, "b", 8));
    post(&mut m, PostedRecv::tagged(3, 1, 0, "c", 8));
    assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(1));
    assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(2));
    assert_eq!(m.match_incoming(&inc(1, 1)).recv_ctx(), Some(3));
    assert_eq!(m.posted_len(), 0);

    for (tag, p) in [(4, 100), (5, 101), (4, 102)] {
        assert_eq!(m.match_incoming(&inc(tag, 2)), Match::Unexpected);
        m.push_unexpected(inc(tag, 2), p).unwrap();
    }
    let got: Vec<u32> = (0..3)
        .map(
            |i| match m.post_recv(PostedRecv::tagged(i, 4, 1, "x", 8)).unwrap() {
                PostOutcome::Matched { msg, .. } => msg.payload,
                o => panic!("{o:?}"),
            },
        )
        .collect();
    assert_eq!(got, vec![100, 101, 102]);
}

#[test]
fn directed_receive() {
    for directed in [false, true] {
        let mut m = M::new(MatcherConfig {
            directed_recv: directed,
            ..cfg()
        });
        post(&mut m, PostedRecv::msg(1, "a", 8).from_src(5));
        post(&mut m, PostedRecv::msg(2, "b", 8));
        let first = m.match_incoming(&untagged(6, 1)).recv_ctx();
        assert_eq!(first, Some(if directed { 2 } else { 1 }));
        let second = m.match_incoming(&untagged(6, 1)).recv_ctx();
        assert_eq!(second, if directed { None } else { Some(2) });
        if directed {
            assert_eq!(m.match_incoming(&untagged(5, 1)).recv_ctx(), Some(1));
            // a directed post skips unexpected messages from others
            m.push_unexpected(untagged(6, 1), 1).unwrap();
            m.push_unexpected(untagged(5, 1), 2).unwrap();
            match m.post_recv(PostedRecv::msg(3, "c", 8).from_src(5)).unwrap() {
                PostOutcome::Matched { msg, .. } => assert_eq!(msg.payload, 2),
                o => panic!("{o:?}"),
            }
        }
    }
}

#[test]
fn truncation() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::msg(1, "a", 4));
    match m.match_incoming(&untagged(1, 10)) {
        Match::Recv { place, .. } => assert_eq!(place, placed(0, 4, true)),
        o => panic!("{o:?}"),
    }
    m.push_unexpected(untagged(1, 10), 0).unwrap();
    match m.post_recv(PostedRecv::msg(2, "b", 3)).unwrap() {
        PostOutcome::Matched { place, .. } => {
            assert_eq!(place, placed(0, 3, true))
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn multi_recv_packs_and_releases_below_min() {
    let mut m = multi_recv_matcher(10);
    post(&mut m, multi_msg(1, "big", 40));
    post(&mut m, PostedRecv::msg(2, "next", 8));
    match m.match_incoming(&untagged(1, 12)) {
        Match::Multi { buf, place } => {
            assert!(!buf.is_released());
            assert_eq!(buf, MultiBuf::Posted(&multi_msg(1, "big", 40)));
            assert_eq!(place, placed(0, 12, false));
        }
        o => panic!("{o:?}"),
    }
    match m.match_incoming(&untagged(1, 18)) {
        Match::Multi { buf, place } => {
            assert!(!buf.is_released(), "10 bytes left: not below the minimum");
            assert_eq!(place, placed(12, 18, false));
        }
        o => panic!("{o:?}"),
    }
    match m.match_incoming(&untagged(1, 1)) {
        Match::Multi { buf, place } => {
            assert!(buf.is_released(), "9 bytes left < 10");
            assert_eq!(buf.recv().ctx, 1);
            assert_eq!(place, placed(30, 1, false));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(2));
}

#[test]
fn multi_recv_truncates_into_the_rest_and_zero_min_releases_when_full() {
    let mut m = M::new(cfg());
    post(
        &mut m,
        PostedRecv::tagged(1, 0, !0, "big", 10).with_flags(OpFlags::MULTI_RECV),
    );
    match m.match_incoming(&inc(0, 10)) {
        Match::Multi { buf, place } => {
            assert!(buf.is_released(), "full buffer is released even with min 0");
            assert_eq!(place, placed(0, 10, false));
        }
        o => panic!("{o:?}"),
    }
    post(
        &mut m,
        PostedRecv::tagged(2, 0, !0, "big", 10).with_flags(OpFlags::MULTI_RECV),
    );
    let _ = m.match_incoming(&inc(0, 6));
    match m.match_incoming(&inc(0, 6)) {
        Match::Multi { buf, place } => {
            assert!(buf.is_released());
            assert_eq!(place, placed(6, 4, true));
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn multi_recv_post_drains_unexpected() {
    let mut m = multi_recv_matcher(4);
    for (i, len) in [5usize, 3, 6].into_iter().enumerate() {
        m.push_unexpected(untagged(1, len), i as u32).unwrap();
    }
    m.push_unexpected(inc(0, 1), 99).unwrap(); // tagged: not for a msg buffer
    let out = m.post_recv(multi_msg(1, "big", 20)).unwrap();
    match out {
        PostOutcome::MultiMatched { buf, msgs } => {
            assert!(!buf.is_released(), "6 bytes left >= 4");
            let got: Vec<(usize, usize, u32)> = msgs
                .iter()
                .map(|(p, u)| (p.offset, p.len, u.payload))
                .collect();
            assert_eq!(got, vec![(0, 5, 0), (5, 3, 1), (8, 6, 2)]);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(m.posted_len(), 1);
    assert_eq!(m.unexpected_len(), 1);
    assert_eq!(m.unexpected_bytes(), 1);
    match m.match_incoming(&untagged(1, 3)) {
        Match::Multi { buf, place } => {
            assert!(buf.is_released(), "3 bytes left < 4");
            assert_eq!(place.offset, 14);
        }
        o => panic!("{o:?}"),
    }
    // a buffer consumed during the post is released without being queued
    m.push_unexpected(untagged(1, 30), 5).unwrap();
    match m.post_recv(multi_msg(2, "big", 20)).unwrap() {
        PostOutcome::MultiMatched {
            buf: MultiBuf::Released(r),
            msgs,
        } => {
            assert_eq!(r.ctx, 2);
            assert_eq!(msgs.len(), 1);
            assert_eq!(msgs[0].0, placed(0, 20, true));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(m.posted_len(), 0);
    // no unexpected message: simply queued
    post(&mut m, multi_msg(3, "big", 20));
}

#[test]
fn min_multi_recv_applies_to_later_posts() {
    let mut m = multi_recv_matcher(0);
    post(&mut m, multi_msg(1, "a", 10));
    m.set_min_multi_recv(100);
    assert_eq!(m.config().min_multi_recv, 100);
    match m.match_incoming(&untagged(1, 2)) {
        Match::Multi { buf, .. } => assert!(!buf.is_released(), "posted with min 0"),
        o => panic!("{o:?}"),
    }
    post(
        &mut m,
        PostedRecv::tagged(2, 0, 0, "b", 10).with_flags(OpFlags::MULTI_RECV),
    );
    match m.match_incoming(&inc(0, 2)) {
        Match::Multi { buf, .. } => assert!(buf.is_released(), "posted with min 100"),
        o => panic!("{o:?}"),
    }
}

#[test]
fn peek_found_and_not_found() {
    let mut m = M::new(cfg());
    let peek = |ctx| PostedRecv::tagged(ctx, 3, 0, "p", 0).with_flags(OpFlags::PEEK);
    match m.post_recv(peek(1)).unwrap() {
        PostOutcome::NoMessage { recv } => assert_eq!(recv.ctx, 1),
        o => panic!("{o:?}"),
    }
    let msg = Incoming {
        src: 4,
        tag: 3,
        len: 9,
        data: Some(42),
        tagged: true,
    };
    m.push_unexpected(msg, 7).unwrap();
    for _ in 0..2 {
        match m.post_recv(peek(2)).unwrap() {
            PostOutcome::Peeked { recv, msg: got } => {
                assert_eq!(recv.ctx, 2);
                assert_eq!(got, msg, "length, tag, data and source reported");
            }
            o => panic!("{o:?}"),
        }
    }
    assert_eq!(m.unexpected_len(), 1, "peek does not consume");
    assert_eq!(m.posted_len(), 0, "peek is never queued");
}

#[test]
fn peek_claim_then_claim() {
    let mut m = M::new(cfg());
    m.push_unexpected(inc(3, 9), 7).unwrap();
    m.push_unexpected(inc(3, 5), 8).unwrap();
    let pc = PostedRecv::tagged(10, 3, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
    match m.post_recv(pc.clone()).unwrap() {
        PostOutcome::Peeked { msg, .. } => assert_eq!(msg.len, 9),
        o => panic!("{o:?}"),
    }
    assert_eq!(m.claimed_len(), 1);
    assert_eq!(m.unexpected_len(), 2, "claimed messages still count");
    assert_eq!(m.unexpected_bytes(), 14);
    // the claimed message is invisible to other peeks and receives
    match m
        .post_recv(PostedRecv::tagged(11, 3, 0, "p", 0).with_flags(OpFlags::PEEK))
        .unwrap()
    {
        PostOutcome::Peeked { msg, .. } => assert_eq!(msg.len, 5),
        o => panic!("{o:?}"),
    }
    // the same ctx cannot claim twice
    let e = m.post_recv(pc).unwrap_err();
    assert_eq!(e.error.code(), Errno::EINVAL);
    assert_eq!(e.item.ctx, 10);
    // claim with a different tag still gets the reserved message
    let claim = PostedRecv::tagged(10, 999, 0, "buf", 4).with_flags(OpFlags::CLAIM);
    match m.post_recv(claim).unwrap() {
        PostOutcome::Matched { recv, place, msg } => {
            assert_eq!(recv.buf, "buf");
            assert_eq!(msg.payload, 7);
            assert_eq!(place, placed(0, 4, true));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(m.claimed_len(), 0);
    assert_eq!(m.unexpected_len(), 1);
    assert_eq!(m.unexpected_bytes(), 5);
    // claiming again: nothing reserved for ctx 10
    let e = m
        .post_recv(PostedRecv::tagged(10, 3, 0, "b", 4).with_flags(OpFlags::CLAIM))
        .unwrap_err();
    assert_eq!(e.error.code(), Errno::EINVAL);
}

#[test]
fn discard() {
    let mut m = M::new(cfg());
    m.push_unexpected(inc(1, 9), 7).unwrap();
    m.push_unexpected(inc(2, 5), 8).unwrap();
    let pd =
        |tag| PostedRecv::tagged(1, tag, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::DISCARD);
    match m.post_recv(pd(1)).unwrap() {
        PostOutcome::Discarded { msg, .. } => assert_eq!(msg.payload, 7),
        o => panic!("{o:?}"),
    }
    assert!(matches!(
        m.post_recv(pd(1)).unwrap(),
        PostOutcome::NoMessage { .. }
    ));
    assert_eq!(m.unexpected_len(), 1);
    // claim, then discard the claimed one
    let pc = PostedRecv::tagged(5, 2, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
    assert!(matches!(
        m.post_recv(pc).unwrap(),
        PostOutcome::Peeked { .. }
    ));
    let cd = PostedRecv::tagged(5, 0, 0, "p", 0).with_flags(OpFlags::CLAIM | OpFlags::DISCARD);
    match m.post_recv(cd).unwrap() {
        PostOutcome::Discarded { recv, msg } => {
            assert_eq!(recv.ctx, 5);
            assert_eq!(msg.payload, 8);
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(
        (m.unexpected_len(), m.unexpected_bytes(), m.claimed_len()),
        (0, 0, 0)
    );
}

#[test]
fn bad_flag_combinations() {
    let mut m = M::new(cfg());
    m.push_unexpected(inc(0, 1), 0).unwrap();
    for flags in [
        OpFlags::DISCARD,
        OpFlags::MULTI_RECV | OpFlags::PEEK,
        OpFlags::MULTI_RECV | OpFlags::CLAIM,
        OpFlags::MULTI_RECV | OpFlags::DISCARD,
    ] {
        let e = m
            .post_recv(PostedRecv::tagged(1, 0, 0, "a", 8).with_flags(flags))
            .unwrap_err();
        assert_eq!(e.error.code(), Errno::EBADFLAGS, "{flags:?}");
        assert_eq!(e.item.buf, "a");
    }
    assert_eq!(m.unexpected_len(), 1, "refused posts change nothing");
    let err: Error = m
        .post_recv(PostedRecv::msg(1, "a", 1).with_flags(OpFlags::DISCARD))
        .unwrap_err()
        .into();
    assert_eq!(err.code(), Errno::EBADFLAGS);
}

#[test]
fn cancel_removes_queued_receive() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::tagged(1, 0, 0, "t", 8));
    post(&mut m, PostedRecv::msg(1, "m", 8));
    post(&mut m, PostedRecv::msg(2, "m2", 8));
    assert_eq!(
        m.cancel(1).map(|r| r.buf),
        Some("m"),
        "untagged searched first"
    );
    assert_eq!(m.cancel(1).map(|r| r.buf), Some("t"));
    assert_eq!(m.cancel(1), None);
    assert_eq!(m.cancel(99), None);
    assert_eq!(m.posted_len(), 1);
    assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(2));
    assert_eq!(m.match_incoming(&inc(0, 1)), Match::Unexpected);
}

#[test]
fn posted_limit_is_eagain() {
    let mut m = M::new(MatcherConfig {
        max_posted: 2,
        ..cfg()
    });
    post(&mut m, PostedRecv::msg(1, "a", 8));
    post(&mut m, PostedRecv::tagged(2, 0, 0, "b", 8));
    assert!(!m.can_post());
    let e = m.post_recv(PostedRecv::msg(3, "c", 8)).unwrap_err();
    assert_eq!(e.error.code(), Errno::EAGAIN);
    assert_eq!(e.item.buf, "c");
    let e = m.post_recv(multi_msg(3, "c", 8)).unwrap_err();
    assert_eq!(e.error.code(), Errno::EAGAIN);
    // peeks are never queued, so they work on a full queue
    assert!(matches!(
        m.post_recv(PostedRecv::msg(4, "p", 0).with_flags(OpFlags::PEEK))
            .unwrap(),
        PostOutcome::NoMessage { .. }
    ));
    // an ordinary receive that matches an unexpected message needs no slot
    m.push_unexpected(
        Incoming {
            tag: 1,
            ..inc(0, 1)
        },
        5,
    )
    .unwrap();
    assert!(matches!(
        m.post_recv(PostedRecv::tagged(5, 1, 0, "d", 8)).unwrap(),
        PostOutcome::Matched { .. }
    ));
    // completing one frees a slot
    assert_eq!(m.match_incoming(&untagged(1, 1)).recv_ctx(), Some(1));
    post(&mut m, PostedRecv::msg(3, "c", 8));
}

#[test]
fn unexpected_limits_are_enobufs() {
    let mut m = M::new(MatcherConfig {
        max_unexpected: 2,
        max_unexpected_bytes: 10,
        ..cfg()
    });
    assert!(m.has_room_for_unexpected(10));
    assert!(!m.has_room_for_unexpected(11));
    let e = m.push_unexpected(untagged(1, 11), 1).unwrap_err();
    assert_eq!(e.error.code(), Errno::ENOBUFS);
    assert_eq!(e.item.payload, 1);
    m.push_unexpected(untagged(1, 6), 2).unwrap();
    let e = m.push_unexpected(untagged(1, 5), 3).unwrap_err();
    assert_eq!(e.error.code(), Errno::ENOBUFS, "bytes");
    // a rendezvous header counts only what is buffered
    m.push_unexpected_sized(inc(0, 1 << 30), 4, 4).unwrap();
    assert_eq!(m.unexpected_bytes(), 10);
    let e = m.push_unexpected_sized(untagged(1, 0), 5, 0).unwrap_err();
    assert_eq!(e.error.code(), Errno::ENOBUFS, "entries");
    assert_eq!((m.unexpected_len(), m.unexpected_bytes()), (2, 10));
    match m.post_recv(PostedRecv::tagged(1, 0, 0, "r", 64)).unwrap() {
        PostOutcome::Matched { msg, place, .. } => {
            assert_eq!(msg.bytes, 4);
            assert_eq!(place, placed(0, 64, true));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!((m.unexpected_len(), m.unexpected_bytes()), (1, 6));
    assert!(m.push_unexpected(untagged(1, 4), 6).is_ok());
}

#[test]
fn drains_empty_everything() {
    let mut m = M::new(cfg());
    post(&mut m, PostedRecv::tagged(1, 1, 0, "t", 8));
    post(&mut m, PostedRecv::msg(2, "m", 8));
    m.push_unexpected(inc(2, 3), 1).unwrap();
    m.push_unexpected(inc(3, 3), 2).unwrap();
    let pc = PostedRecv::tagged(9, 3, 0, "p", 0).with_flags(OpFlags::PEEK | OpFlags::CLAIM);
    m.post_recv(pc).unwrap();
    let posted: Vec<usize> = m.drain_posted().map(|r| r.ctx).collect();
    assert_eq!(posted, vec![2, 1]);
    let held: Vec<u32> = m.drain_unexpected().map(|u| u.payload).collect();
    assert_eq!(held, vec![1, 2]);
    assert_eq!(
        (
            m.posted_len(),
            m.unexpected_len(),
            m.unexpected_bytes(),
            m.claimed_len()
        ),
        (0, 0, 0, 0)
    );
}

#[test]
fn refused_debug_and_conversion() {
    let r = Refused::new(Errno::EAGAIN, "full", 5u8);
    assert!(format!("{r:?}").contains("FI_EAGAIN"));
    let e: Error = r.into();
    assert_eq!(e.code(), Errno::EAGAIN);
    assert_eq!(e.message(), "full");
}

// ---- property test against a naive reference model ----

/// The observable result of one operation, with receives named by their buffer id
/// (unique per post) and messages by their payload id.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Obs {
    Refused(Errno, u32),
    Unexpected,
    Pushed,
    Recv(u32, Placement),
    Multi(u32, bool, Placement),
    Queued,
    Matched(u32, Placement, u32),
    MultiMatched(u32, bool, Vec<(Placement, u32)>),
    Peeked(u32, Incoming),
    NoMessage(u32),
    Discarded(u32, u32),
    Cancelled(Option<u32>),
}

/// A plain reference: one Vec of posted receives (both kinds, posting order),
/// one Vec of unexpected messages (both kinds, arrival order), one Vec of claims.
struct Model {
    cfg: MatcherConfig,
    posted: Vec<(PostedRecv<u32>, usize, usize)>,
    unexp: Vec<(Incoming, u32, usize)>,
    claimed: Vec<(usize, Incoming, u32, usize)>,
}

impl Model {
    fn takes(&self, r: &PostedRecv<u32>, m: &Incoming) -> bool {
        if r.tagged != m.tagged {
            return false;
        }
        if self.cfg.directed_recv && r.src != ANY_SRC && r.src != m.src {
            return false;
        }
        !r.tagged || (m.tag | r.ignore) == (r.tag | r.ignore)
    }

    fn held(&self) -> (usize, usize) {
        let n = self.unexp.len() + self.claimed.len();
        let b = self.unexp.iter().map(|u| u.2).sum::<usize>()
            + self.claimed.iter().map(|c| c.3).sum::<usize>();
        (n, b)
    }

    fn arrive(&mut self, m: Incoming, id: u32) -> Vec<Obs> {
        if let Some(i) = self.posted.iter().position(|(r, _, _)| self.takes(r, &m)) {
            let (r, used, min) = &mut self.posted[i];
            if !r.flags.contains(OpFlags::MULTI_RECV) {
                let place = fit(0, m.len, r.len);
                let buf = r.buf;
                self.posted.remove(i);
                return vec![Obs::Recv(buf, place)];
            }
            let left = r.len - *used;
            let place = fit(*used, m.len, left);
            *used += place.len;
            let left = r.len - *used;
            let released = left == 0 || left < *min;
            let buf = r.buf;
            if released {
                self.posted.remove(i);
            }
            return vec![Obs::Multi(buf, released, place)];
        }
        let (n, b) = self.held();
        if n + 1 > self.cfg.max_unexpected || b + m.len > self.cfg.max_unexpected_bytes {
            return vec![Obs::Unexpected, Obs::Refused(Errno::ENOBUFS, id)];
        }
        self.unexp.push((m, id, m.len));
        vec![Obs::Unexpected, Obs::Pushed]
    }

    fn post(&mut self, r: PostedRecv<u32>) -> Obs {
        let f = r.flags;
        let peek = f.contains(OpFlags::PEEK);
        let claim = f.contains(OpFlags::CLAIM);
        let discard = f.contains(OpFlags::DISCARD);
        let multi = f.contains(OpFlags::MULTI_RECV);
        if (discard && !peek && !claim) || (multi && (peek || claim)) {
            return Obs::Refused(Errno::EBADFLAGS, r.buf);
        }
        if peek {
            if claim && !discard && self.claimed.iter().any(|c| c.0 == r.ctx) {
                return Obs::Refused(Errno::EINVAL, r.buf);
            }
            let Some(i) = self.unexp.iter().position(|u| self.takes(&r, &u.0)) else {
                return Obs::NoMessage(r.buf);
            };
            if discard {
                let u = self.unexp.remove(i);
                return Obs::Discarded(r.buf, u.1);
            }
            if claim {
                let u = self.unexp.remove(i);
                self.claimed.push((r.ctx, u.0, u.1, u.2));
                return Obs::Peeked(r.buf, u.0);
            }
            return Obs::Peeked(r.buf, self.unexp[i].0);
        }
        if claim {
            let Some(i) = self.claimed.iter().position(|c| c.0 == r.ctx) else {
                return Obs::Refused(Errno::EINVAL, r.buf);
            };
            let c = self.claimed.remove(i);
            if discard {
                return Obs::Discarded(r.buf, c.2);
            }
            let place = fit(0, c.1.len, r.len);
            return Obs::Matched(r.buf, place, c.2);
        }
        let full = self.posted.len() >= self.cfg.max_posted;
        if multi {
            if full {
                return Obs::Refused(Errno::EAGAIN, r.buf);
            }
            let min = self.cfg.min_multi_recv;
            let mut used = 0;
            let mut got = Vec::new();
            let mut released = false;
            let mut kept = Vec::new();
            for u in std::mem::take(&mut self.unexp) {
                if released || !self.takes(&r, &u.0) {
                    kept.push(u);
                    continue;
                }
                let left = r.len - used;
                let place = fit(used, u.0.len, left);
                used += place.len;
                got.push((place, u.1));
                let left = r.len - used;
                released = left == 0 || left < min;
            }
            self.unexp = kept;
            let buf = r.buf;
            if !released {
                self.posted.push((r, used, min));
            }
            if got.is_empty() {
                return Obs::Queued;
            }
            return Obs::MultiMatched(buf, released, got);
        }
        if let Some(i) = self.unexp.iter().position(|u| self.takes(&r, &u.0)) {
            let u = self.unexp.remove(i);
            let place = fit(0, u.0.len, r.len);
            return Obs::Matched(r.buf, place, u.1);
        }
        if full {
            return Obs::Refused(Errno::EAGAIN, r.buf);
        }
        self.posted.push((r, 0, 0));
        Obs::Queued
    }

    fn cancel(&mut self, ctx: usize) -> Obs {
        let i = self
            .posted
            .iter()
            .position(|p| !p.0.tagged && p.0.ctx == ctx)
            .or_else(|| {
                self.posted
                    .iter()
                    .position(|p| p.0.tagged && p.0.ctx == ctx)
            });
        Obs::Cancelled(i.map(|i| self.posted.remove(i).0.buf))
    }
}

/// `in_place`: through [`TagMatcher::match_incoming_with`] (its `Ok` is the
/// ordinary receive's answer, seen by reference), else `match_incoming`.
fn real_arrive(t: &mut TagMatcher<u32, u32>, m: Incoming, id: u32, in_place: bool) -> Vec<Obs> {
    let general = if in_place {
        match t.match_incoming_with(&m, |recv, place| Obs::Recv(recv.buf, place)) {
            Ok(obs) => return vec![obs],
            Err(Match::Recv { .. }) => panic!("an ordinary receive came back as Err"),
            Err(other) => other,
        }
    } else {
        t.match_incoming(&m)
    };
    let first = match general {
        Match::Unexpected => Obs::Unexpected,
        Match::Recv { recv, place } => return vec![Obs::Recv(recv.buf, place)],
        Match::Multi { buf, place } => {
            return vec![Obs::Multi(buf.recv().buf, buf.is_released(), place)]
        }
    };
    let second = match t.push_unexpected(m, id) {
        Ok(()) => Obs::Pushed,
        Err(e) => {
            assert_eq!(e.item.payload, id);
            Obs::Refused(e.error.code(), id)
        }
    };
    vec![first, second]
}

fn real_post(t: &mut TagMatcher<u32, u32>, r: PostedRecv<u32>) -> Obs {
    let id = r.buf;
    match t.post_recv(r) {
        Err(e) => {
            assert_eq!(e.item.buf, id, "refused receive handed back");
            Obs::Refused(e.error.code(), id)
        }
        Ok(PostOutcome::Queued) => Obs::Queued,
        Ok(PostOutcome::Matched { recv, place, msg }) => Obs::Matched(recv.buf, place, msg.payload),
        Ok(PostOutcome::MultiMatched { buf, msgs }) => Obs::MultiMatched(
            buf.recv().buf,
            buf.is_released(),
            msgs.iter().map(|(p, u)| (*p, u.payload)).collect(),
        ),
        Ok(PostOutcome::Peeked { recv, msg }) => Obs::Peeked(recv.buf, msg),
        Ok(PostOutcome::NoMessage { recv }) => Obs::NoMessage(recv.buf),
        Ok(PostOutcome::Discarded { recv, msg }) => Obs::Discarded(recv.buf, msg.payload),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Arrive {
        src: u64,
        tag: u64,
        len: usize,
        tagged: bool,
    },
    Post {
        ctx: usize,
        src: u64,
        tag: u64,
        ignore: u64,
        flags: OpFlags,
        tagged: bool,
        len: usize,
    },
    Cancel(usize),
    SetMin(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let flags = prop::sample::select(vec![
        OpFlags::empty(),
        OpFlags::empty(),
        OpFlags::empty(),
        OpFlags::MULTI_RECV,
        OpFlags::MULTI_RECV,
        OpFlags::PEEK,
        OpFlags::PEEK | OpFlags::CLAIM,
        OpFlags::CLAIM,
        OpFlags::PEEK | OpFlags::DISCARD,
        OpFlags::CLAIM | OpFlags::DISCARD,
        OpFlags::PEEK | OpFlags::CLAIM | OpFlags::DISCARD,
        OpFlags::DISCARD,
        OpFlags::MULTI_RECV | OpFlags::PEEK,
    ]);
    let src = prop_oneof![3 => 0u64..3, 1 => Just(ANY_SRC)];
    let ignore = prop::sample::select(vec![0u64, 1, 2, 3, u64::MAX]);
    prop_oneof![
        4 => (0u64..3, 0u64..4, 0usize..12, any::<bool>())
            .prop_map(|(src, tag, len, tagged)| Op::Arrive { src, tag, len, tagged }),
        4 => (0usize..5, src, 0u64..4, ignore, flags, any::<bool>(), 0usize..24).prop_map(
            |(ctx, src, tag, ignore, flags, tagged, len)| Op::Post { ctx, src, tag, ignore, flags, tagged, len }
        ),
        1 => (0usize..5).prop_map(Op::Cancel),
        1 => (0usize..8).prop_map(Op::SetMin),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn agrees_with_reference_model(
        directed in any::<bool>(),
        max_posted in 0usize..6,
        max_unexpected in 0usize..6,
        max_unexpected_bytes in 0usize..40,
        min_multi_recv in 0usize..8,
        in_place in any::<bool>(),
        ops in proptest::collection::vec(op(), 0..120),
    ) {
        let cfg = MatcherConfig { directed_recv: directed, max_posted, max_unexpected, max_unexpected_bytes, min_multi_recv };
        let mut real: TagMatcher<u32, u32> = TagMatcher::new(cfg.clone());
        let mut model = Model { cfg, posted: vec![], unexp: vec![], claimed: vec![] };
        for (n, op) in ops.into_iter().enumerate() {
            let id = n as u32;
            let (got, want) = match op {
                Op::Arrive { src, tag, len, tagged } => {
                    let m = Incoming { src, tag, len, data: Some(u64::from(id)), tagged };
                    (real_arrive(&mut real, m, id, in_place), model.arrive(m, id))
                }
                Op::Post { ctx, src, tag, ignore, flags, tagged, len } => {
                    let r = PostedRecv { ctx, src, tag, ignore, flags, tagged, buf: id, len };
                    (vec![real_post(&mut real, r.clone())], vec![model.post(r)])
                }
                Op::Cancel(ctx) => {
                    (vec![Obs::Cancelled(real.cancel(ctx).map(|r| r.buf))], vec![model.cancel(ctx)])
                }
                Op::SetMin(v) => {
                    real.set_min_multi_recv(v);
                    model.cfg.min_multi_recv = v;
                    (vec![], vec![])
                }
            };
            prop_assert_eq!(got, want, "op #{}", n);
            let (held, bytes) = model.held();
            prop_assert_eq!(real.posted_len(), model.posted.len());
            prop_assert_eq!(real.unexpected_len(), held);
            prop_assert_eq!(real.unexpected_bytes(), bytes);
            prop_assert_eq!(real.claimed_len(), model.claimed.len());
            prop_assert!(real.posted_len() <= max_posted);
            prop_assert!(held <= max_unexpected && bytes <= max_unexpected_bytes);
        }
        let posted: Vec<u32> = real.drain_posted().map(|r| r.buf).collect();
        let mut want: Vec<u32> = model.posted.iter().filter(|p| !p.0.tagged).map(|p| p.0.buf).collect();
        want.extend(model.posted.iter().filter(|p| p.0.tagged).map(|p| p.0.buf));
        prop_assert_eq!(posted, want);
        let held: Vec<u32> = real.drain_unexpected().map(|u| u.payload).collect();
        let mut want: Vec<u32> = model.unexp.iter().filter(|u| !u.0.tagged).map(|u| u.1).collect();
        want.extend(model.unexp.iter().filter(|u| u.0.tagged).map(|u| u.1));
        want.extend(model.claimed.iter().map(|c| c.2));
        prop_assert_eq!(held, want);
    }
}
